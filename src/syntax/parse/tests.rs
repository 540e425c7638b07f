//! The resumption after syntax errors: windows decide as the whole rest of the text does.

use proptest::prelude::*;

use super::pieces::tests::{part, same, whole};
use super::{resume_in_windows, Built};
use crate::syntax::ast::FileId;

/// The parse resumed in windows of `first` bytes at first.
fn windowed(text: &str, first: usize) -> Built {
    let mut built = Built::default();
    resume_in_windows(text, FileId(0), &mut built, first);
    built
}

#[test]
fn many_errors_resume_in_windows_as_in_the_whole_rest() {
    let text: String = (0..300)
        .map(|i| match i % 3 {
            0 => format!("tool t{i} {{ effect }}\n"),
            1 => format!("tool u{i} {{\n  effect none\n  deny when path not under \"/w\"\n}}\n"),
            _ => "tool}\n".to_string(),
        })
        .collect();
    let reference = windowed(&text, usize::MAX);
    assert_eq!(reference.diagnostics.len(), 200);
    assert_eq!(reference.decls.len(), 100);
    for first in [1, 16, 100, 4096] {
        assert!(same(&windowed(&text, first), &reference), "{first}");
    }
    assert!(same(&whole(&text), &reference));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_resumes_in_windows_as_in_the_whole_rest(
        parts in proptest::collection::vec(0..30usize, 1..40),
        crlf in any::<bool>(),
        first in prop_oneof![Just(1usize), Just(8), 16usize..200],
    ) {
        let newline = if crlf { "\r\n" } else { "\n" };
        let text = parts.iter().map(|&i| part(i)).collect::<Vec<_>>().join(newline);
        prop_assert!(same(&windowed(&text, first), &windowed(&text, usize::MAX)), "{text:?}");
    }
}
