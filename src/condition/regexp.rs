//! A compiled regular expression of `=~`, `!~` or `matches` (a glob is translated into one),
//! with a substring prefilter: when every match starts with the same bytes, a string that does
//! not hold them is no match, and a substring search (`memchr`'s `memmem`) says so without
//! running the regular expression.

use memchr::memmem::Finder;
use regex::{Regex, RegexBuilder};
use regex_syntax::hir::literal::Extractor;

use crate::limits;

/// A regular expression compiled within the size limits, and the bytes every match starts
/// with, when there are some.
#[derive(Debug)]
pub(super) struct Regexp {
    regex: Regex,
    /// Finds the longest prefix common to every match; `None` when that prefix is empty (or
    /// cannot be known).
    prefix: Option<Finder<'static>>,
}

impl Regexp {
    /// Compiles `pattern` with the size limits of [`limits::MAX_PATTERN_COMPILED_BYTES`].
    ///
    /// # Errors
    ///
    /// The `regex` crate's error: a syntax error, or a compiled form over the limits.
    pub(super) fn new(pattern: &str) -> Result<Regexp, regex::Error> {
        let regex = RegexBuilder::new(pattern)
            .size_limit(limits::MAX_PATTERN_COMPILED_BYTES)
            .dfa_size_limit(limits::MAX_PATTERN_COMPILED_BYTES)
            .build()?;
        // The same parse the `regex` crate makes (its default syntax): a finite sequence of
        // prefix literals has one of them at the start of every match, so their common
        // prefix is at the start of every match too.
        let prefix = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .ok()
            .and_then(|hir| {
                let seq = Extractor::new().extract(&hir);
                let common = seq.longest_common_prefix()?;
                (!common.is_empty()).then(|| Finder::new(common).into_owned())
            });
        Ok(Regexp { regex, prefix })
    }

    /// Whether the regular expression matches somewhere in `s`. Linear in `s`'s length.
    pub(super) fn is_match(&self, s: &str) -> bool {
        match &self.prefix {
            Some(prefix) if prefix.find(s.as_bytes()).is_none() => false,
            _ => self.regex.is_match(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(pattern: &str) -> Option<Vec<u8>> {
        let r = Regexp::new(pattern).expect("a valid pattern");
        r.prefix.map(|f| f.needle().to_vec())
    }

    #[test]
    fn the_prefix_is_what_every_match_starts_with() {
        assert_eq!(prefix("AKIA[0-9A-Z]{16}"), Some(b"AKIA".to_vec()));
        assert_eq!(
            prefix("^/workspace/[^/]*\\.md$"),
            Some(b"/workspace/".to_vec())
        );
        assert_eq!(prefix("abc|abd"), Some(b"ab".to_vec()));
        assert_eq!(prefix("(?i)\\b(drop|truncate)\\b"), None);
        assert_eq!(prefix("(?i)akia"), None);
        assert_eq!(prefix("a*b"), None);
        assert_eq!(prefix("x?"), None);
        assert_eq!(prefix(".*AKIA"), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// The prefilter never changes an answer.
        #[test]
        fn the_prefilter_answers_as_the_regex(
            pattern in proptest::prop_oneof![
                "[ab]{1,3}",
                "[ab]{1,2}(a|b[ab]|\\\\b)[ab]?",
                "(?i)[ab]{1,3}",
                "\\^?[ab]{1,2}[ab]*\\$?",
                "(ab|a)b?",
            ],
            haystack in "[abAB ]{0,12}",
        ) {
            let r = Regexp::new(&pattern).expect("a valid pattern");
            proptest::prop_assert_eq!(r.is_match(&haystack), r.regex.is_match(&haystack));
        }
    }
}
