//! Whole-word occurrence for `in query`: the value occurs in the user's query when its words,
//! in order, are consecutive words of the query. A word is a run of alphanumeric characters;
//! both texts are normalized by the caller's normalizer (the one keywords go through) first.

/// Text reduced to its words, each followed by one space and the whole preceded by one
/// (` w1 w2 `), so a whole-word search is a substring search.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Words(String);

impl Words {
    /// The words of `text` (already normalized).
    pub(super) fn new(text: &str) -> Words {
        let mut out = String::with_capacity(text.len() + 2);
        out.push(' ');
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
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

    #[test]
    fn whole_words_in_order() {
        let q = Words::new("pay bob@example.com 100 dollars for the rent");
        assert!(q.contains(&Words::new("bob@example.com")));
        assert!(q.contains(&Words::new("100")));
        assert!(q.contains(&Words::new("the rent")));
        assert!(!q.contains(&Words::new("10")));
        assert!(!q.contains(&Words::new("ob")));
        assert!(!q.contains(&Words::new("rent the")));
        assert!(!q.contains(&Words::new("")));
        assert!(!q.contains(&Words::new("@ .")));
        assert!(Words::new("").is_empty());
        assert!(!Words::new("").contains(&Words::new("a")));
    }
}
