//! Whole-word occurrence for `in query`: the value occurs in the user's query when its words,
//! in order, are consecutive words of the query. A word is a run of alphanumeric characters;
//! both texts are normalized by the caller's normalizer (the one keywords go through) first.
//!
//! The common case allocates nothing: the query's words are read in place ([`QueryWords`]),
//! a value of at most [`MAX_INLINE_WORDS`] words is split into a stack array, and an ASCII
//! value is compared lower-cased byte by byte instead of being normalized into a new string
//! (the keyword normalizer maps ASCII text to its lower case, up to white space, which is no
//! part of any word). A longer value falls back to [`Words`], a linear substring search.

/// Most words of a value compared in place; a longer value goes through [`Words`].
pub(super) const MAX_INLINE_WORDS: usize = 16;

/// Whether the non-ASCII character at byte `i` of `text` (a character boundary) is a word
/// character, and its length in bytes.
#[cold]
fn non_ascii_word_char_at(text: &str, i: usize) -> (bool, usize) {
    match text.get(i..).and_then(|t| t.chars().next()) {
        Some(c) => (c.is_alphanumeric(), c.len_utf8()),
        None => (false, 1),
    }
}

/// The words of a text, read in place, in order (a cheap, copyable cursor).
#[derive(Clone, Copy, Debug)]
pub(super) struct QueryWords<'q> {
    text: &'q str,
    pos: usize,
}

impl<'q> QueryWords<'q> {
    /// The words of `text`.
    pub(super) fn new(text: &'q str) -> QueryWords<'q> {
        QueryWords { text, pos: 0 }
    }
}

/// Per byte: 0 for an ASCII byte that is not alphanumeric, 1 for an ASCII alphanumeric, 2
/// for a byte of a non-ASCII character (decoded to decide).
static BYTE_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = if b >= 0x80 {
            2
        } else if (b as u8).is_ascii_alphanumeric() {
            1
        } else {
            0
        };
        b += 1;
    }
    t
};

impl<'q> Iterator for QueryWords<'q> {
    type Item = &'q str;

    fn next(&mut self) -> Option<&'q str> {
        let bytes = self.text.as_bytes();
        let len = bytes.len();
        let mut i = self.pos;
        // Skip to the next word character.
        while i < len {
            match BYTE_CLASS[bytes[i] as usize] {
                0 => i += 1,
                1 => break,
                _ => match non_ascii_word_char_at(self.text, i) {
                    (true, _) => break,
                    (false, n) => i += n,
                },
            }
        }
        if i >= len {
            self.pos = len;
            return None;
        }
        let start = i;
        // Take word characters.
        while i < len {
            match BYTE_CLASS[bytes[i] as usize] {
                0 => break,
                1 => i += 1,
                _ => match non_ascii_word_char_at(self.text, i) {
                    (true, n) => i += n,
                    (false, _) => break,
                },
            }
        }
        self.pos = i;
        self.text.get(start..i)
    }
}

/// The words of `text` in a stack array, when it has at most [`MAX_INLINE_WORDS`]: the array
/// and how many; `None` for more.
pub(super) fn inline_words(text: &str) -> Option<([&str; MAX_INLINE_WORDS], usize)> {
    let mut out = [""; MAX_INLINE_WORDS];
    let mut n = 0;
    for w in QueryWords::new(text) {
        *out.get_mut(n)? = w;
        n += 1;
    }
    Some((out, n))
}

/// Whether `needle` (at least one word) occurs as consecutive words of `query`, comparing
/// each query word with a needle word by `eq`. At most `needle.len()` comparisons per query
/// word: linear in the query for a needle of at most [`MAX_INLINE_WORDS`] words.
pub(super) fn occurs(query: &str, needle: &[&str], eq: impl Fn(&str, &str) -> bool) -> bool {
    let Some((first, rest)) = needle.split_first() else {
        return false;
    };
    let mut at = QueryWords::new(query);
    while let Some(q) = at.next() {
        if eq(q, first) {
            let mut probe = at;
            if rest.iter().all(|w| probe.next().is_some_and(|q| eq(q, w))) {
                return true;
            }
        }
    }
    false
}

/// Whether the words of the ASCII `value`, lower-cased, occur as consecutive words of `query`
/// ([`occurs`] with [`eq_lowered`]), read in place: `None` when that takes more than comparing
/// [`MAX_INLINE_WORDS`] words from one place, or the first word is longer than
/// [`COMPARED_BYTES`] (the caller then searches another way).
///
/// The query is searched for the first word lower-cased (a `memchr` jump to each place its
/// first byte occurs; an ASCII byte only starts a character, so every occurrence lies on
/// character boundaries), and only the occurrences that are whole words are walked on from.
/// Where the query holds the value's text from its first word on, lower-cased and not
/// followed by a word character, the words are the same and nothing is walked. At most
/// [`COMPARED_BYTES`] bytes are compared at one place before the walk, so the search stays
/// linear in the query. A value without words occurs nowhere.
pub(super) fn occurs_lowered(query: &str, value: &str) -> Option<bool> {
    // The value is ASCII: its words are runs of ASCII alphanumerics.
    let v = value.as_bytes();
    let Some(start) = v.iter().position(u8::is_ascii_alphanumeric) else {
        return Some(false);
    };
    let text = v.get(start..).unwrap_or_default();
    let first_len = text
        .iter()
        .position(|b| !b.is_ascii_alphanumeric())
        .unwrap_or(text.len());
    if first_len > COMPARED_BYTES {
        return None;
    }
    let mut buf = [0u8; COMPARED_BYTES];
    let kept = text.len().min(COMPARED_BYTES);
    let lowered = buf.get_mut(..kept).unwrap_or_default();
    lowered.copy_from_slice(text.get(..kept).unwrap_or_default());
    lowered.make_ascii_lowercase();
    let whole = buf.get(..text.len());
    let first = buf.get(..first_len).unwrap_or_default();
    let bytes = query.as_bytes();
    let mut from = 0;
    while let Some(off) = memchr::memchr(buf[0], bytes.get(from..).unwrap_or_default()) {
        let at = from + off;
        from = at + 1;
        if word_char_before(query, at) {
            continue;
        }
        if whole.is_some_and(|w| {
            bytes.get(at..at + w.len()) == Some(w) && !word_char_at(query, at + w.len())
        }) {
            return Some(true);
        }
        if bytes.get(at..at + first_len) != Some(first) || word_char_at(query, at + first_len) {
            continue;
        }
        let mut probe = QueryWords {
            text: query,
            pos: at + first_len,
        };
        let mut rest = QueryWords {
            text: value,
            pos: start + first_len,
        };
        let mut compared = 1;
        loop {
            let Some(w) = rest.next() else {
                return Some(true);
            };
            compared += 1;
            if compared > MAX_INLINE_WORDS {
                return None;
            }
            if !probe.next().is_some_and(|q| eq_lowered(q, w)) {
                break;
            }
        }
    }
    Some(false)
}

/// Most bytes of a value [`occurs_lowered`] compares at one place of the query before walking
/// its words (and the longest first word it takes).
const COMPARED_BYTES: usize = 128;

/// Whether the character that ends at byte `i` of `text` (a character boundary) is a word
/// character; false at the start.
fn word_char_before(text: &str, i: usize) -> bool {
    match text.as_bytes().get(i.wrapping_sub(1)) {
        None => false,
        Some(&b) if b < 0x80 => b.is_ascii_alphanumeric(),
        Some(_) => text
            .get(..i)
            .and_then(|t| t.chars().next_back())
            .is_some_and(char::is_alphanumeric),
    }
}

/// Whether the character that starts at byte `i` of `text` (a character boundary) is a word
/// character; false at the end.
fn word_char_at(text: &str, i: usize) -> bool {
    match text.as_bytes().get(i) {
        None => false,
        Some(&b) if b < 0x80 => b.is_ascii_alphanumeric(),
        Some(_) => non_ascii_word_char_at(text, i).0,
    }
}

/// Whether the query word `q` equals the ASCII word `w` lower-cased.
pub(super) fn eq_lowered(q: &str, w: &str) -> bool {
    q.len() == w.len()
        && q.bytes()
            .zip(w.bytes())
            .all(|(a, b)| a == b.to_ascii_lowercase())
}

/// Text reduced to its words, each followed by one space and the whole preceded by one
/// (` w1 w2 `), so a whole-word search is a substring search.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Words(String);

impl Words {
    /// The words of `text` (already normalized).
    pub(super) fn new(text: &str) -> Words {
        let mut out = String::with_capacity(text.len() + 2);
        out.push(' ');
        for word in QueryWords::new(text) {
            out.push_str(word);
            out.push(' ');
        }
        Words(out)
    }

    /// Whether there is no word.
    pub(super) fn is_empty(&self) -> bool {
        self.0.len() <= 1
    }

    /// Whether `needle`'s words occur, consecutively and whole, among these. A text without
    /// words occurs nowhere. Linear time (the standard library's two-way search).
    pub(super) fn contains(&self, needle: &Words) -> bool {
        !needle.is_empty() && self.0.contains(needle.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place search, as `in query` runs it on an already normalized value.
    fn in_place(query: &str, value: &str) -> bool {
        match inline_words(value) {
            Some((w, n)) => occurs(query, &w[..n], |q, w| q == w),
            None => Words::new(query).contains(&Words::new(value)),
        }
    }

    #[test]
    fn whole_words_in_order() {
        let query = "pay bob@example.com 100 dollars for the rent";
        let q = Words::new(query);
        for (value, expected) in [
            ("bob@example.com", true),
            ("100", true),
            ("the rent", true),
            ("10", false),
            ("ob", false),
            ("rent the", false),
            ("", false),
            ("@ .", false),
            ("pay bob example com 100 dollars for the rent", true),
            ("rent rent", false),
        ] {
            assert_eq!(q.contains(&Words::new(value)), expected, "{value}");
            assert_eq!(in_place(query, value), expected, "{value}");
        }
        assert!(Words::new("").is_empty());
        assert!(!Words::new("").contains(&Words::new("a")));
        assert!(!in_place("", "a"));
    }

    #[test]
    fn words_are_unicode_alphanumeric_runs() {
        let words: Vec<&str> = QueryWords::new("  é-vol ۷ 東京…x  ").collect();
        assert_eq!(words, ["é", "vol", "۷", "東京", "x"]);
        assert_eq!(inline_words(&"a ".repeat(16)).map(|(_, n)| n), Some(16));
        assert_eq!(inline_words(&"a ".repeat(17)).map(|(_, n)| n), None);
        assert!(in_place(&"a ".repeat(40), &"a ".repeat(17)));
        assert!(!in_place(&"a ".repeat(16), &"a ".repeat(17)));
    }

    #[test]
    fn lowered_comparison() {
        assert!(eq_lowered("alice", "Alice"));
        assert!(!eq_lowered("Alice", "alice"));
        assert!(!eq_lowered("alic", "alice"));
        assert!(occurs("send to alice now", &["ALICE", "Now"], eq_lowered));
        for (query, needle, expected) in [
            ("send to alice now", &["ALICE", "Now"][..], true),
            ("send to malice now", &["Alice"][..], false),
            ("send to alice2 now", &["alice"][..], false),
            ("send to éalice now", &["alice"][..], false),
            ("alice-alice now", &["alice", "now"][..], true),
            ("alice", &["alice", "now"][..], false),
            ("to alice", &["Alice"][..], true),
        ] {
            assert_eq!(
                occurs(query, needle, eq_lowered),
                expected,
                "{query} / {needle:?}"
            );
            assert_eq!(
                occurs_lowered(query, &needle.join(" ")),
                Some(expected),
                "{query} / {needle:?}"
            );
        }
    }

    #[test]
    fn a_first_word_longer_than_compared_is_left_to_the_caller() {
        let long = "a".repeat(COMPARED_BYTES + 1);
        assert_eq!(occurs_lowered(&long, &long), None);
        let fits = "a".repeat(COMPARED_BYTES);
        assert_eq!(occurs_lowered(&format!("x {fits}"), &fits), Some(true));
        // A value longer than what is compared at once is walked word by word.
        let value = format!("{fits} B");
        assert_eq!(occurs_lowered(&format!("{fits} b."), &value), Some(true));
        assert_eq!(occurs_lowered(&format!("{fits} c"), &value), Some(false));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// The search by substring answers as the walk over every word does, or leaves the
        /// value to the search by [`Words`].
        #[test]
        fn the_substring_search_answers_as_the_walk(
            query in proptest::prop_oneof!["[aAb1 é\\\\-]{0,24}", "(a{1,70} ?){0,4}"],
            value in proptest::prop_oneof![
                "[aAb1 é-]{0,8}",
                "(a ){14,18}",
                "[ab ]{0,40}",
                " ?a{1,70}( a{1,70}){0,2} ?",
            ],
        ) {
            let ascii: String = value.chars().filter(char::is_ascii).collect();
            let expected = match inline_words(&ascii) {
                Some((w, n)) => occurs(&query, &w[..n], eq_lowered),
                None => Words::new(&query).contains(&Words::new(&ascii.to_ascii_lowercase())),
            };
            match occurs_lowered(&query, &ascii) {
                Some(found) => proptest::prop_assert_eq!(found, expected, "{:?} / {:?}", query, ascii),
                // Only a value of more words than compared in place is left to `Words`.
                None => proptest::prop_assert!(inline_words(&ascii).is_none(), "{:?}", ascii),
            }
        }
    }
}
