//! Parsing a large file in pieces, one thread per piece.
//!
//! The text is cut at line starts where a top-level `{ … }` block has just closed, each piece
//! is parsed as a file of its own, and the pieces' declarations are joined in order. A block's
//! last `}` ends its declaration (no declaration goes on after its block), and every line starts
//! outside strings and comments (no string spans two lines), so when every piece parses, the
//! declarations are those of one parse of the whole text. When a piece does not parse, the
//! caller parses the whole text, so syntax errors are reported as they always are.

use std::num::NonZeroUsize;
use std::sync::OnceLock;
use std::thread;

use super::{parse_range, Built};
use crate::syntax::ast::FileId;
use crate::syntax::strings::string_end;

/// The smallest piece worth a thread of its own, in bytes: a piece this size takes about a
/// millisecond to parse, a thread some tens of microseconds to start.
const MIN_PIECE: usize = 32 * 1024;

/// The most pieces a file is cut into.
const MAX_PIECES: usize = 8;

/// The declarations, diagnostics and `defaults` rules of `text` parsed in pieces on several
/// threads, or `None` when the text is too small to be worth it, the machine has one core,
/// no cut was found, a thread could not be started, or a piece has a syntax error.
pub(super) fn parse_in_pieces(text: &str, file: FileId) -> Option<Built> {
    let count = (text.len() / MIN_PIECE).min(parallelism()).min(MAX_PIECES);
    if count < 2 {
        return None;
    }
    parse_pieces(text, file, count)
}

/// [`parse_in_pieces`] with up to `count` pieces, whatever the text's size.
fn parse_pieces(text: &str, file: FileId, count: usize) -> Option<Built> {
    let mut bounds = cuts(text.as_bytes(), count);
    if bounds.is_empty() {
        return None;
    }
    bounds.insert(0, 0);
    bounds.push(text.len());
    let ranges: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let parse = |&(start, end): &(usize, usize)| {
        let mut built = Built::default();
        parse_range(text, start, end, file, &mut built, true).ok()?;
        Some(built)
    };
    let (first, rest) = ranges.split_first()?;
    let pieces: Vec<Option<Built>> = thread::scope(|scope| {
        let mut handles = Vec::with_capacity(rest.len());
        for range in rest {
            let spawned = thread::Builder::new().spawn_scoped(scope, move || parse(range));
            handles.push(spawned.ok()?);
        }
        let mut pieces = vec![parse(first)];
        pieces.extend(handles.into_iter().map(|h| h.join().ok().flatten()));
        Some(pieces)
    })?;
    let mut whole = Built::default();
    for piece in pieces {
        let piece = piece?;
        whole.decls.extend(piece.decls);
        whole.diagnostics.extend(piece.diagnostics);
        whole.defaults_rules.extend(piece.defaults_rules);
    }
    Some(whole)
}

/// The number of threads the machine runs at once, read once.
fn parallelism() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| thread::available_parallelism().map_or(1, NonZeroUsize::get))
}

/// Up to `count - 1` ascending offsets that cut `bytes` into pieces of about equal length: each
/// is the start of a line that begins at brace depth 0, right after a line whose last token
/// (comments aside) is the `}` that closed a top-level block. Strings and comments are stepped
/// over as the grammar reads them; an unbalanced `}` makes the scan stop cutting.
pub(super) fn cuts(bytes: &[u8], count: usize) -> Vec<usize> {
    let mut out = Vec::new();
    // The next cut is the first eligible line start at or after `next_target`: the rest of the
    // text shared evenly among the pieces still to make, so a block that runs past one target
    // does not cost a piece.
    let mut next_target = (bytes.len() / count).max(1);
    let mut depth = 0usize;
    // Whether the last token read is a `}` that brought the depth to 0.
    let mut closed = false;
    let mut i = 0;
    while i < bytes.len() && out.len() + 1 < count {
        match bytes[i] {
            b'\n' => {
                i += 1;
                if closed && depth == 0 && i >= next_target && i < bytes.len() {
                    out.push(i);
                    let pieces_left = count.saturating_sub(out.len()).max(1);
                    next_target = i + ((bytes.len() - i) / pieces_left).max(1);
                }
                continue;
            }
            b' ' | b'\t' | b'\r' => {}
            b'#' => {
                i = memchr::memchr(b'\n', &bytes[i..]).map_or(bytes.len(), |n| i + n);
                continue;
            }
            b'"' => {
                closed = false;
                i = string_end(bytes, i + 1).1;
                continue;
            }
            b'{' => {
                closed = false;
                depth += 1;
            }
            b'}' => {
                let Some(d) = depth.checked_sub(1) else {
                    return out;
                };
                depth = d;
                closed = depth == 0;
            }
            _ => closed = false,
        }
        i += 1;
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use proptest::prelude::*;

    use super::super::{parse_resuming, Built};
    use super::{cuts, parse_pieces};
    use crate::syntax::ast::FileId;

    /// The declarations, diagnostics and `defaults` rules of one parse of the whole text.
    pub(in crate::syntax::parse) fn whole(text: &str) -> Built {
        let mut built = Built::default();
        parse_resuming(text, FileId(0), &mut built);
        built
    }

    pub(in crate::syntax::parse) fn same(a: &Built, b: &Built) -> bool {
        a.decls == b.decls && a.diagnostics == b.diagnostics && a.defaults_rules == b.defaults_rules
    }

    /// Every shipped policy, one after the other: a text of every kind of declaration.
    fn shipped() -> String {
        let mut files = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/policies"
        ))];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|x| x == "warden") {
                    files.push(path);
                }
            }
        }
        files.sort();
        files
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_shipped_policies_parse_in_pieces_as_they_do_whole() {
        let text = shipped();
        assert!(text.len() > 50_000, "{} bytes", text.len());
        let reference = whole(&text);
        assert!(reference.decls.len() > 100, "{}", reference.decls.len());
        for count in [2, 3, 8, 64] {
            let cut = cuts(text.as_bytes(), count).len();
            assert!(
                cut == count - 1 || count == 64 && cut > 30,
                "{count}: {cut} cuts"
            );
            let pieces = parse_pieces(&text, FileId(0), count);
            assert!(
                pieces.as_ref().is_some_and(|p| same(p, &reference)),
                "{count} pieces"
            );
        }
    }

    #[test]
    fn a_syntax_error_in_a_piece_leaves_the_text_to_the_whole_parse() {
        let text = "tool a { effect none }\ntool b { effect none }\ntool c { effect }\ntool d { effect none }\n";
        assert_eq!(cuts(text.as_bytes(), 100).len(), 3);
        assert!(parse_pieces(text, FileId(0), 100).is_none());
        let (tree, diagnostics) = crate::syntax::parse_file(text, FileId(0));
        let reference = whole(text);
        assert_eq!(tree.decls, reference.decls);
        assert_eq!(diagnostics, reference.diagnostics);
        assert_eq!(diagnostics.len(), 1);
    }

    /// Declarations and trivia, some with braces in strings and comments.
    const PARTS: &[&str] = &[
        "tool a { effect none }",
        "tool b {\n  effect write\n  deny when path not under \"/w{}\"\n}",
        "tool c { effect none  confirm when x =~ \"}\" }",
        "match \"mcp__*\" { effect write  deny when owner not in \"acme\" }",
        "mode m {\n  matrix s\n  after x {\n    deny when any =~ \"k\"\n  }\n}",
        "defaults { deny when amount > 10 }",
        "rules { deny when any =~ \"AKIA\" }",
        "policy \"p\" version 2",
        "effects none, write",
        "# a comment with } and {",
        "tool f { effect none } # }",
        "intents hi\n  > lo",
        "policy \"p\"\n  version 3",
        "effects e1\n  , e2",
        "",
        "  ",
    ];

    /// Broken declarations and stray text.
    const BROKEN: &[&str] = &["tool d { effect }", "tool e {", "}", "\"unclosed"];

    /// A part: broken one time in 25.
    pub(in crate::syntax::parse) fn part(i: usize) -> &'static str {
        match BROKEN.get(i) {
            Some(b) => b,
            None => PARTS[i % PARTS.len()],
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_text_parses_in_pieces_as_it_does_whole(
            parts in proptest::collection::vec(0..100usize, 1..40),
            crlf in any::<bool>(),
            count in 2usize..6,
        ) {
            let newline = if crlf { "\r\n" } else { "\n" };
            let text = parts.iter().map(|&i| part(i)).collect::<Vec<_>>().join(newline);
            let reference = whole(&text);
            match parse_pieces(&text, FileId(0), count) {
                Some(pieces) => prop_assert!(same(&pieces, &reference), "{text:?}"),
                // Only a text with a syntax error, or with no place to cut, is left whole.
                None => prop_assert!(
                    reference.diagnostics.iter().any(|d| d.code() == "syntax")
                        || cuts(text.as_bytes(), count).is_empty(),
                    "{text:?}"
                ),
            }
        }
    }

    #[test]
    fn cuts_fall_after_closed_top_level_blocks() {
        let text = "tool a {\n  effect none\n}\ntool b { effect none }\n# c }\ntool c { deny when x =~ \"}\" }\nmode m {\n  after x {\n  }\n}\ntool d {}\n";
        let all: Vec<usize> = cuts(text.as_bytes(), 100);
        let lines: Vec<&str> = all
            .iter()
            .map(|&c| text[c..].lines().next().unwrap_or(""))
            .collect();
        assert_eq!(
            lines,
            [
                "tool b { effect none }",
                "# c }",
                "tool c { deny when x =~ \"}\" }",
                "mode m {",
                "tool d {}"
            ]
        );
    }

    #[test]
    fn no_cut_inside_a_block_or_after_an_unbalanced_brace() {
        assert_eq!(
            cuts(b"tool a {\n  x\n}}\ntool b {}\n", 100),
            Vec::<usize>::new()
        );
        assert_eq!(cuts(b"tool a {\n  x\n", 100), Vec::<usize>::new());
        assert_eq!(
            cuts(b"mode m {\n  after x {\n  }\n  matrix s\n}\n", 100),
            Vec::<usize>::new()
        );
    }
}
