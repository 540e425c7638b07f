//! Where a string literal ends, as the grammar reads it (`string_body` in
//! `grammar/warden.pest`), for the scans that read policy text without the parser: comments,
//! the parenthesis-depth cap and the invisible-character warnings.

/// The end of the string whose body starts at byte `from` of `bytes` (just after its opening
/// `"`): `(body_end, next)`, where `body_end` is the offset of its closing `"`, of the line feed
/// that ends it unclosed, or the text's length, and `next` is where the text after the string
/// starts (after the closing quote; at the line feed; at the end).
///
/// A backslash escapes the byte after it, except a line feed: no string spans two lines, so
/// every line starts outside a string and a parse begun at any line start reads strings as a
/// parse of the whole text does. The search jumps with `memchr`; a string's delimiters are ASCII
/// bytes, which no byte of a multi-byte character equals.
pub(crate) fn string_end(bytes: &[u8], from: usize) -> (usize, usize) {
    let mut i = from;
    while let Some(off) = memchr::memchr3(b'"', b'\\', b'\n', bytes.get(i..).unwrap_or_default()) {
        let at = i + off;
        match bytes[at] {
            b'\\' if bytes.get(at + 1) != Some(&b'\n') => i = at + 2,
            b'"' => return (at, at + 1),
            // A line feed, or a backslash before one: the string ends unclosed.
            _ => {
                let feed = if bytes[at] == b'\\' { at + 1 } else { at };
                return (feed, feed);
            }
        }
    }
    (bytes.len(), bytes.len())
}

#[cfg(test)]
mod tests {
    use super::string_end;

    #[test]
    fn strings_end_at_their_quote_their_line_or_the_text() {
        let end = |s: &str| string_end(s.as_bytes(), 1);
        assert_eq!(end("\"abc\" x"), (4, 5));
        assert_eq!(end("\"a\\\"b\" x"), (5, 6));
        assert_eq!(end("\"a\\\\\" x"), (4, 5));
        assert_eq!(end("\"abc\nx\""), (4, 4));
        assert_eq!(end("\"a\\\nx\""), (3, 3));
        assert_eq!(end("\"abc"), (4, 4));
        assert_eq!(end("\"a\\"), (3, 3));
        assert_eq!(end("\"é\\é\""), (6, 7));
    }
}
