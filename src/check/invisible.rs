//! Warnings about characters a reader cannot see in the strings and comments of a policy,
//! made on the source text rather than the syntax tree.

use crate::diagnostic::{Diagnostic, Sources};
use crate::syntax::ast::{Decl, FileId, PolicyFile, Span};

/// Warns about invisible characters ([`crate::invisible::is_invisible`]) in the strings and
/// comments of `files` (Trojan Source): a zero-width character, a bidirectional control, another
/// format character, or a control character other than a tab (and, in a comment, the carriage
/// return of a CRLF line end) makes text read as something it is not, or reorders the text
/// after it. One diagnostic (`invisible-character`) per string or comment, at its first such
/// character, naming it as `<U+XXXX>` and saying what to write. A NUL in a string (a name) is
/// an error. ZWNJ (U+200C) is part of Persian spelling: it is allowed in comments and in the
/// strings of `keywords`, `negation`, `embedded` and `except` declarations.
pub(crate) fn invisible_characters(files: &[PolicyFile], sources: &Sources) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for file in files {
        let text = sources.text(file.file);
        let keyword_decls: Vec<std::ops::Range<usize>> = file
            .decls
            .iter()
            .filter_map(|d| match d {
                Decl::Keywords(k) => Some(k.span.range()),
                Decl::Negation(n) => Some(n.span.range()),
                Decl::Embedded(e) | Decl::Except(e) => Some(e.span.range()),
                _ => None,
            })
            .collect();
        // Strings and comments start with an ASCII byte and end at one (`"`, a line feed), so
        // the scan goes byte by byte: the bytes of a multi-byte character are never those.
        let bytes = text.as_bytes();
        let mut pos = 0;
        while let Some(off) = memchr::memchr2(b'"', b'#', &bytes[pos..]) {
            let start = pos + off;
            let comment = bytes[start] == b'#';
            // The token's body: a string's up to its closing quote or the line's end, as the
            // grammar reads it; a comment's to the line's end (which the next search starts at).
            let body_start = start + 1;
            let body_end;
            (body_end, pos) = if comment {
                let end = memchr::memchr(b'\n', &bytes[body_start..])
                    .map_or(text.len(), |n| body_start + n);
                (end, end)
            } else {
                crate::syntax::strings::string_end(bytes, body_start)
            };
            let body = &text[body_start..body_end];
            // Declarations are in source order: the last one starting before the token.
            let keyword = !comment && {
                let i = keyword_decls.partition_point(|r| r.start <= start);
                i > 0 && keyword_decls[i - 1].contains(&start)
            };
            // A comment may end in the carriage return of a CRLF line end; a carriage return
            // anywhere else ends the line in some editors, and what follows it, hidden in the
            // comment, reads as policy text.
            let crlf = comment && body.ends_with('\r') && bytes.get(body_end) == Some(&b'\n');
            let flagged = |i: usize, c: char| {
                crate::invisible::is_invisible(c)
                    && c != '\t'
                    && !(crlf && c == '\r' && i + 1 == body.len())
                    && !((keyword || comment) && c == '\u{200C}')
            };
            // Printable ASCII is never flagged: most bodies are decided by this one pass.
            if body.bytes().all(|b| (0x20..0x7F).contains(&b)) {
                continue;
            }
            let found: Vec<(usize, char)> = body
                .char_indices()
                .filter(|&(i, c)| flagged(i, c))
                .collect();
            if let Some(d) = invisible_diagnostic(file.file, body_start, body, comment, &found) {
                out.push(d);
            }
        }
    }
    out
}

/// The `invisible-character` diagnostic for the string or comment `body` (starting at byte
/// `offset` of `file`) whose invisible characters are `found` (offsets within `body`).
fn invisible_diagnostic(
    file: FileId,
    offset: usize,
    body: &str,
    comment: bool,
    found: &[(usize, char)],
) -> Option<Diagnostic> {
    let nul = found.iter().find(|&&(_, c)| c == '\0');
    let &(at, c) = nul.or(found.first())?;
    let point = format!("<U+{:04X}>", u32::from(c));
    let kind = if c == '\0' {
        "a NUL character"
    } else if crate::invisible::is_bidi_control(c) {
        "a bidirectional control, which reorders the text after it on screen"
    } else if matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}') {
        "a zero-width character"
    } else if c.is_control() {
        "a control character"
    } else {
        "an invisible format character"
    };
    let short = |s: &str| {
        let start: String = s.chars().take(40).collect();
        let more = if start.len() < s.len() { "…" } else { "" };
        format!("{}{more}", crate::invisible::escape(&start))
    };
    let (what, fix) = if comment {
        ("comment", "delete it from the comment".to_string())
    } else {
        let visible: String = body
            .char_indices()
            // `found` is in text order: a binary search keeps this linear-logarithmic.
            .filter(|(i, _)| found.binary_search_by_key(i, |&(j, _)| j).is_err())
            .map(|(_, c)| c)
            .collect();
        let fix = if visible.is_empty() {
            "delete it".to_string()
        } else {
            format!("delete it: write \"{}\"", short(&visible))
        };
        ("string", fix)
    };
    let others = found.len() - 1;
    let mut help =
        format!("{point} is {kind}; text that holds it reads as something it is not; {fix}");
    if others > 0 {
        help.push_str(&format!(
            " ({others} more invisible character{} in this {what})",
            if others == 1 { "" } else { "s" }
        ));
    }
    let message = format!(
        "invisible character {point} in the {what} \"{}\"",
        short(body)
    );
    let span = Span::new(file, offset + at, offset + at + c.len_utf8());
    let d = if c == '\0' {
        Diagnostic::error("invisible-character", message)
    } else {
        Diagnostic::warning("invisible-character", message)
    };
    Some(d.at(span, format!("{point} here")).help(help))
}

#[cfg(test)]
mod tests {
    use crate::Policy;

    /// A long string of invisible characters is reported once, in bounded time.
    #[test]
    fn a_long_invisible_string_is_one_diagnostic() {
        let text = format!(
            "policy \"p\"\neffects none\nmode m {{ }}\ntool \"a{}\" {{ effect none }}\n",
            "\u{200B}".repeat(200_000)
        );
        let policy = Policy::parse(&text, "p.warden").expect("warnings only");
        let codes: Vec<&str> = policy.warnings().iter().map(|d| d.code()).collect();
        assert_eq!(codes, ["invisible-character"]);
        assert_eq!(
            policy.warnings()[0].help_text(),
            Some("<U+200B> is a zero-width character; text that holds it reads as something it is not; delete it: write \"a\" (199999 more invisible characters in this string)")
        );
    }

    /// A comment may end in a CRLF's carriage return; a lone one, which some editors show as a
    /// line end (so the rule after it looks like policy text), is reported.
    #[test]
    fn only_a_crlf_carriage_return_is_allowed_in_a_comment() {
        let messages = |text: &str| -> Vec<String> {
            let policy = Policy::parse(text, "p.warden").expect("warnings only");
            policy
                .warnings()
                .iter()
                .map(|d| d.message().to_string())
                .collect()
        };
        let head = "policy \"p\"\r\neffects none\r\nmode m { }\r\n";
        let crlf = format!("{head}tool t {{ # workspace only\r\n effect none }}\r\n");
        assert_eq!(messages(&crlf), Vec::<String>::new());
        let lone = format!(
            "{head}tool t {{ # workspace only\r deny when path not under \"/w\"\n effect none }}\n"
        );
        assert_eq!(
            messages(&lone),
            ["invisible character <U+000D> in the comment \" workspace only<U+000D> deny when path not unde…\""]
        );
    }
}
