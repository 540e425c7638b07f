//! The texts the keyword automaton holds for a keyword, negator or phrase ([`spellings`]), and
//! whether such a text can ever be found in a query ([`unmatchable`]). The checker uses both, so
//! that it checks each entry in the form the classifier matches it.

use unicode_segmentation::UnicodeSegmentation;

use super::normalize::{normalize_into, Normalized};
use super::words::word_ranges_into;

/// A keyword written with ZWNJ (U+200C) matches both the spaced and the joined spelling.
fn zwnj_variants(text: &str) -> Vec<String> {
    if text.contains('\u{200C}') {
        vec![text.replace('\u{200C}', " "), text.replace('\u{200C}', "")]
    } else {
        vec![text.to_string()]
    }
}

/// The texts the automaton holds for a keyword or negator `body` (without a stem's `*`): its
/// [`normalize()`]d form, or two for text written with ZWNJ (spaced, then joined); a spelling
/// that normalizes to nothing is left out, so the list is empty for a body made only of
/// characters normalization removes.
///
/// [`normalize()`]: super::normalize()
pub(crate) fn spellings(body: &str, fold_accents: bool) -> Vec<String> {
    let mut norm = Normalized::default();
    zwnj_variants(body)
        .into_iter()
        .filter_map(|variant| {
            normalize_into(&variant, fold_accents, &mut norm);
            (!norm.text.is_empty()).then(|| norm.text.clone())
        })
        .collect()
}

/// Why a normalized spelling can never be found in a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unmatchable {
    /// Its first character cannot start a word (walks begin at word starts only).
    Start(char),
    /// Its last character cannot end a word, and the spelling is a `"word"` or negator (which
    /// must end on a word end).
    End(char),
}

/// Whether `spelling` (a text of [`spellings`]) can be found in some query, as a `"stem*"`
/// (`stem`: it may end inside a word) or as a word or phrase: a walk starts only where a UAX
/// #29 word starts, and a word or phrase is recorded only where one ends. Words are the
/// segments that hold a letter or digit, so a spelling whose first (last) word starts after
/// its first character (ends before its last) is never found, in any context: the character
/// there is outside every word or belongs to a longer one.
///
/// A stem whose first segment (between UAX #29 word boundaries) runs to its end may begin a
/// longer word in a query (`"_*"` begins `_foo`), so only a stem whose first segment ends
/// inside it, outside every word, is reported for its start.
pub(crate) fn unmatchable(spelling: &str, stem: bool) -> Option<Unmatchable> {
    let mut words = Vec::new();
    word_ranges_into(spelling, &mut words);
    let first_char = spelling.chars().next()?;
    if stem {
        let first_segment = spelling.split_word_bounds().next().map_or(0, str::len);
        if first_segment == spelling.len() {
            return None;
        }
    }
    let Some(&(first, _)) = words.first() else {
        return Some(Unmatchable::Start(first_char));
    };
    if first != 0 {
        return Some(Unmatchable::Start(first_char));
    }
    let last = words.last().map_or(0, |w| w.1);
    match spelling.chars().next_back() {
        Some(c) if !stem && last != spelling.len() => Some(Unmatchable::End(c)),
        _ => None,
    }
}
