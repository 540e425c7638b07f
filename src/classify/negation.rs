//! Clauses and negation: how the words of a query group into clauses and sentences
//! ([`clause_starts`]), and which negator cancels a keyword hit: one within its rule's window
//! and in the same clause ([`Classifier::negator_of`]), or one that reaches past its window, to
//! the end of its clause or over a keyword-free aside into the next clause of its sentence
//! ([`Classifier::reaches`], [`Reaches`]).

use super::automaton::{Found, Target};
use super::classifier::Classifier;
use super::lexicon::Direction;

/// A negator occurrence that reaches past its window: where it stands (its end for `before`,
/// its start for `after`), its rule, its span, and the last word it reaches (`u32::MAX`: the
/// end of the clause).
type Reacher = (usize, usize, (usize, usize), u32);

/// Where negators reach beyond their window, computed once per query (keyword hits then look
/// their clause up): those that reach their whole clause (`negation before|after clause`), and
/// those that end their clause before a keyword-free aside ("do not, under any circumstances,
/// delete").
#[derive(Default)]
pub(super) struct Reaches {
    /// For each clause, the first `before clause` negator in it.
    before: Vec<Option<Reacher>>,
    /// For each clause, the last `after clause` negator in it.
    after: Vec<Option<Reacher>>,
    /// For each clause, the first negator that reaches it over an aside: the negator ends an
    /// earlier clause of the sentence, and the clauses between hold no keyword.
    aside: Vec<Option<Reacher>>,
    /// For each clause, the first clause from it on in its sentence that holds a keyword
    /// (`u32::MAX`: none); and each clause's first word and sentence.
    next_keyword: Vec<u32>,
    first_word: Vec<u32>,
    sentence: Vec<u32>,
}

impl Reaches {
    /// No reaches, with no buffer allocated (a `const` [`Default`]).
    pub(super) const fn new() -> Reaches {
        Reaches {
            before: Vec::new(),
            after: Vec::new(),
            aside: Vec::new(),
            next_keyword: Vec::new(),
            first_word: Vec::new(),
            sentence: Vec::new(),
        }
    }

    /// The rule and span of a negator that reaches keyword occurrence `f` beyond its window.
    pub(super) fn negator(&self, f: &Found, clauses: &[u32]) -> Option<(usize, (usize, usize))> {
        let at = |v: &[Option<Reacher>], w: u32| {
            clauses
                .get(w as usize)
                .and_then(|&c| v.get(c as usize).copied().flatten())
        };
        if let Some((end, n, span, _)) = at(&self.before, f.first_word) {
            if end <= f.start {
                return Some((n, span));
            }
        }
        if let Some((end, n, span, last)) = at(&self.aside, f.first_word) {
            if end <= f.start && f.first_word <= last {
                return Some((n, span));
            }
        }
        match at(&self.after, f.last_word) {
            Some((start, n, span, _)) if start >= f.end => Some((n, span)),
            _ => None,
        }
    }
}

impl Classifier {
    /// The first negation rule (in query order of the negators) that cancels keyword hit `f`:
    /// a negator within the rule's window, in the same clause (see [`clause_starts`]).
    /// `negators` is sorted by start; `negator_words` is the most words one of them covers;
    /// `clauses` numbers each word's clause ([`clause_starts`]).
    pub(super) fn negator_of(
        &self,
        f: &Found,
        negators: &[Found],
        negator_words: u32,
        clauses: &[u32],
    ) -> Option<(usize, (usize, usize))> {
        let clause = |w: u32| clauses.get(w as usize).copied();
        if negators.is_empty() {
            return None;
        }
        let lo_word = f
            .first_word
            .saturating_sub(self.max_window.saturating_add(negator_words));
        let hi_word = f.last_word.saturating_add(self.max_window);
        let from = negators.partition_point(|g| g.first_word < lo_word);
        negators[from..]
            .iter()
            .take_while(|g| g.first_word <= hi_word)
            .find_map(|g| {
                let Target::Negator(n) = g.target else {
                    return None;
                };
                let rule = &self.negations[n];
                if rule.clause {
                    return None;
                }
                let ok = match rule.direction {
                    Direction::Before => {
                        g.end <= f.start
                            && f.first_word.saturating_sub(g.last_word) <= rule.window
                            && clause(g.last_word) == clause(f.first_word)
                    }
                    Direction::After => {
                        g.start >= f.end
                            && g.first_word.saturating_sub(f.last_word) <= rule.window
                            && clause(f.last_word) == clause(g.first_word)
                    }
                };
                ok.then_some((n, (g.start, g.end)))
            })
    }

    /// Fills `reach` from `negators` (sorted by start) and the keyword occurrences of a query
    /// of `nwords` words whose clauses and sentences are numbered in `clauses` and `sentences`
    /// ([`clause_starts`]); returns whether any negator reaches beyond its window. A few passes
    /// over the clauses, keywords and negators: linear.
    pub(super) fn reaches(
        &self,
        negators: &[Found],
        keywords: &[Found],
        nwords: usize,
        clauses: &[u32],
        sentences: &[u32],
        reach: &mut Reaches,
    ) -> bool {
        // A negator "dangles" when it ends its clause with more of its sentence after it.
        let dangles = |g: &Found| {
            let last = g.last_word as usize;
            last + 1 < nwords
                && clauses.get(last + 1) != clauses.get(last)
                && sentences.get(last + 1) == sentences.get(last)
        };
        let any = negators.iter().any(|g| match g.target {
            Target::Negator(n) => self.negations[n].clause || dangles(g),
            _ => false,
        });
        if !any {
            return false;
        }
        let n_clauses = clauses.last().map_or(0, |&c| c as usize + 1);
        for v in [&mut reach.before, &mut reach.after, &mut reach.aside] {
            v.clear();
            v.resize(n_clauses, None);
        }
        reach.first_word.clear();
        reach.first_word.resize(n_clauses, u32::MAX);
        reach.sentence.clear();
        reach.sentence.resize(n_clauses, 0);
        for (w, (&c, &s)) in clauses.iter().zip(sentences).enumerate() {
            let c = c as usize;
            if reach.first_word[c] == u32::MAX {
                reach.first_word[c] = u32::try_from(w).unwrap_or(u32::MAX);
                reach.sentence[c] = s;
            }
        }
        reach.next_keyword.clear();
        reach.next_keyword.resize(n_clauses, u32::MAX);
        for f in keywords {
            if let Some(&c) = clauses.get(f.first_word as usize) {
                reach.next_keyword[c as usize] = c;
            }
        }
        for c in (0..n_clauses.saturating_sub(1)).rev() {
            if reach.next_keyword[c] == u32::MAX && reach.sentence[c + 1] == reach.sentence[c] {
                reach.next_keyword[c] = reach.next_keyword[c + 1];
            }
        }
        for g in negators {
            let Target::Negator(n) = g.target else {
                continue;
            };
            let rule = &self.negations[n];
            let (first, last) = (g.first_word as usize, g.last_word as usize);
            let (Some(&c), Some(&c_last)) = (clauses.get(first), clauses.get(last)) else {
                continue;
            };
            let span = (g.start, g.end);
            if rule.direction == Direction::After {
                if rule.clause {
                    reach.after[c as usize] = Some((g.start, n, span, u32::MAX));
                }
                continue;
            }
            if rule.clause && reach.before[c_last as usize].is_none() {
                reach.before[c_last as usize] = Some((g.end, n, span, u32::MAX));
            }
            if !dangles(g) {
                continue;
            }
            // The clause after the aside: the next one holding a keyword, not the very next.
            let next = c_last as usize + 1;
            let Some(&d) = reach.next_keyword.get(next) else {
                continue;
            };
            if d == u32::MAX || d as usize == next {
                continue;
            }
            let d = d as usize;
            let limit = if rule.clause {
                u32::MAX
            } else {
                reach.first_word[d]
                    .saturating_add(rule.window)
                    .saturating_sub(1)
            };
            if reach.aside[d].is_none() {
                reach.aside[d] = Some((g.end, n, span, limit));
            }
        }
        true
    }
}

/// Numbers the clauses of normalized `text` (`words` its word ranges): `clauses[w]` is how many
/// clause ends come before word `w`, so two words are in one clause when their numbers agree. A
/// clause ends in a gap between words that holds `.` `!` `?` `;` `,` `:` `(` `)` (fullwidth
/// forms and `…` read as these once normalized), a dash (`–`, `—`, or `-` beside a space), the
/// Arabic-script `؟` `؛` `۔` `،`, or the ideographic `。` `、`. A negator does not reach across a clause end, as in NegEx-style negation scopes: in
/// "don't worry. cancel it" and "no problem, delete it" nothing negates the verb. One pass over
/// the gaps, so a negation check is a comparison.
pub(super) fn clause_starts(
    text: &[u8],
    words: &[(usize, usize)],
    clauses: &mut Vec<u32>,
    sentences: &mut Vec<u32>,
) {
    clauses.clear();
    sentences.clear();
    clauses.resize(words.len(), 0);
    sentences.resize(words.len(), 0);
    let (mut n, mut s) = (0u32, 0u32);
    // The first word has no gap before it: numbers 0 and 0, as resized.
    for (k, pair) in words.windows(2).enumerate() {
        let (from, start) = (pair[0].1, pair[1].0);
        // Most gaps are one space: no clause ends there.
        let one_space = start == from + 1 && text.get(from) == Some(&b' ');
        if !one_space {
            let (clause, sentence) = gap_ends(text.get(from..start).unwrap_or_default());
            n += u32::from(clause);
            s += u32::from(sentence);
        }
        if let (Some(c), Some(t)) = (clauses.get_mut(k + 1), sentences.get_mut(k + 1)) {
            (*c, *t) = (n, s);
        }
    }
}

/// Whether the text between two words ends a clause (see [`clause_starts`]), and whether it
/// ends a sentence: it holds `.` `!` `?` `;`, the Arabic-script `؟` `؛` `۔` or the ideographic
/// `。` (a clause end that is not a comma, colon, parenthesis or dash). One pass over the gap's
/// bytes; the multi-byte marks are looked for only in a gap that holds a non-ASCII byte.
fn gap_ends(gap: &[u8]) -> (bool, bool) {
    let (mut clause, mut hyphen, mut space, mut wide) = (false, false, false, false);
    for &b in gap {
        match b {
            b'.' | b'!' | b'?' | b';' => return (true, true),
            b',' | b':' | b'(' | b')' => clause = true,
            b'-' => hyphen = true,
            b' ' => space = true,
            0x80.. => wide = true,
            _ => {}
        }
    }
    // A hyphen with a space beside it is a dash ("no worries - delete it"); alone it joins a
    // compound ("co-op").
    clause |= hyphen && space;
    if !wide {
        return (clause, false);
    }
    let sentence = gap
        .windows(2)
        .any(|w| matches!(w, [0xD8, 0x9F] | [0xD8, 0x9B] | [0xDB, 0x94]))
        || gap.windows(3).any(|w| w == [0xE3, 0x80, 0x82]);
    clause = clause
        || sentence
        // En and em dashes, the Arabic comma, the ideographic comma.
        || gap
            .windows(3)
            .any(|w| matches!(w, [0xE2, 0x80, 0x93 | 0x94] | [0xE3, 0x80, 0x81]))
        || gap.windows(2).any(|w| w == [0xD8, 0x8C]);
    (clause, sentence)
}

#[cfg(test)]
mod tests {
    use super::gap_ends;

    /// Whether a gap ends a clause and a sentence, as first written: one search per mark.
    fn searched(gap: &[u8]) -> (bool, bool) {
        let sentence = gap.iter().any(|b| matches!(b, b'.' | b'!' | b'?' | b';'))
            || gap
                .windows(2)
                .any(|w| matches!(w, [0xD8, 0x9F] | [0xD8, 0x9B] | [0xDB, 0x94]))
            || gap.windows(3).any(|w| w == [0xE3, 0x80, 0x82]);
        let clause = gap
            .iter()
            .any(|b| matches!(b, b'.' | b'!' | b'?' | b';' | b',' | b':' | b'(' | b')'))
            || (gap.contains(&b'-') && gap.contains(&b' '))
            || gap
                .windows(3)
                .any(|w| w == [0xE2, 0x80, 0x93] || w == [0xE2, 0x80, 0x94])
            || gap
                .windows(2)
                .any(|w| matches!(w, [0xD8, 0x9F] | [0xD8, 0x9B] | [0xDB, 0x94] | [0xD8, 0x8C]))
            || gap
                .windows(3)
                .any(|w| w == [0xE3, 0x80, 0x82] || w == [0xE3, 0x80, 0x81]);
        (clause, clause && sentence)
    }

    #[test]
    fn gaps_end_clauses_and_sentences() {
        assert_eq!(gap_ends(b" "), (false, false));
        assert_eq!(gap_ends(b", "), (true, false));
        assert_eq!(gap_ends(b"; "), (true, true));
        assert_eq!(gap_ends(b"-"), (false, false));
        assert_eq!(gap_ends(b" - "), (true, false));
        assert_eq!(gap_ends(" — ".as_bytes()), (true, false));
        assert_eq!(gap_ends("، ".as_bytes()), (true, false));
        assert_eq!(gap_ends("؟ ".as_bytes()), (true, true));
        assert_eq!(gap_ends("。".as_bytes()), (true, true));
        assert_eq!(gap_ends("、".as_bytes()), (true, false));
        assert_eq!(gap_ends(" « ".as_bytes()), (false, false));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        #[test]
        fn one_pass_agrees_with_a_search_per_mark(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                " ", "-", ",", ".", "!", "?", ";", ":", "(", ")", "\"", "'", "«", "»", "–", "—",
                "’", "؟", "؛", "۔", "،", "。", "、", "…", "“",
            ]), 0..8)
        ) {
            let gap = parts.concat();
            proptest::prop_assert_eq!(gap_ends(gap.as_bytes()), searched(gap.as_bytes()), "{:?}", gap);
        }
    }
}
