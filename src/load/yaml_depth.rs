//! The one way toolwarden parses YAML text (`tool_policies.yaml`, legacy `tools.yaml`, test
//! files): nesting is capped at [`limits::MAX_YAML_DEPTH`] by a linear pre-scan before the YAML
//! parser sees the text, whose time grows with the square of the nesting depth.
//!
//! The pre-scan counts block nesting by indentation (and compact `- - x` items) and flow nesting
//! by `[` and `{`. It errs on the side of depth: every `[` and `{` outside a comment or a block
//! scalar counts, even inside a quoted or plain scalar, and only a `]` or `}` outside a quoted
//! scalar closes one; so text it lets through never nests deeper than the cap.

use serde::de::DeserializeOwned;

use crate::limits;

/// Why YAML text was not parsed.
#[derive(Debug)]
pub(crate) enum YamlError {
    /// The text nests deeper than [`limits::MAX_YAML_DEPTH`]; the byte offset where it does.
    TooDeep(usize),
    /// The YAML parser's error.
    Syntax(serde_yaml::Error),
}

/// Parses `text` as YAML into `T`, after checking its nesting depth.
///
/// # Errors
///
/// [`YamlError::TooDeep`] with the byte offset of the first opening past the cap, or the
/// parser's error.
pub(crate) fn parse<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    if let Some(at) = too_deep(text, limits::MAX_YAML_DEPTH) {
        return Err(YamlError::TooDeep(at));
    }
    serde_yaml::from_str(text).map_err(YamlError::Syntax)
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// The byte offset where `text` first nests deeper than `max` levels, if it does. One pass.
pub(crate) fn too_deep(text: &str, max: usize) -> Option<usize> {
    let mut flow = 0usize;
    // Openings inside the quoted scalar being read that it has not closed: they count while it
    // lasts and stay counted after it (a quote never closes what is outside it).
    let mut quoted = 0usize;
    let mut indents: Vec<usize> = Vec::new();
    let mut quote: Option<u8> = None;
    // The indentation of the line that opened a block scalar (`|`, `>`).
    let mut block_scalar: Option<usize> = None;
    // A plain scalar that the next line may continue, with the indentation of its line.
    let mut plain: Option<usize> = None;
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let l = line.trim_end_matches(['\n', '\r']).as_bytes();
        let indent = l.iter().take_while(|&&b| b == b' ').count();
        let blank = l[indent..].iter().all(|&b| b == b' ' || b == b'\t');
        if let Some(parent) = block_scalar {
            if blank || indent > parent {
                continue;
            }
            block_scalar = None;
        }
        if blank {
            continue;
        }
        let mut i = indent;
        // Whether a token (a quoted scalar, a block scalar header) may start here: not on a
        // line that continues a plain scalar.
        let continues = plain.is_some_and(|p| flow > 0 || indent > p);
        let mut token_start = !continues;
        if !continues {
            plain = None;
        }
        if quote.is_none() {
            if l[indent] == b'#' {
                continue;
            }
            // Inside brackets indentation only adds levels: a `[` or `{` in a plain scalar
            // counts as flow here, but the parser reads the lines after it as block structure.
            if flow == 0 {
                while indents.last().is_some_and(|&t| t > indent) {
                    indents.pop();
                }
            }
            if indents.last().is_none_or(|&t| t < indent) {
                indents.push(indent);
            }
            if indents.len() > max {
                return Some(start + indent);
            }
            // Compact nested items: each `- ` (or `? `) on the line opens one more level.
            while matches!(l.get(i), Some(b'-' | b'?'))
                && matches!(l.get(i + 1), None | Some(b' ' | b'\t'))
            {
                let dash = i;
                i += 1;
                while matches!(l.get(i), Some(b' ' | b'\t')) {
                    i += 1;
                }
                if indents.last().is_none_or(|&t| t < i) {
                    indents.push(i);
                }
                if indents.len() > max {
                    return Some(start + dash);
                }
            }
        }
        while i < l.len() {
            let b = l[i];
            match quote {
                Some(q) => {
                    let escape = (q == b'"' && b == b'\\')
                        || (b == q && q == b'\'' && l.get(i + 1) == Some(&b'\''));
                    if escape {
                        i += 1;
                    } else if b == q {
                        quote = None;
                        flow += quoted;
                        quoted = 0;
                        token_start = false;
                    } else if b == b'[' || b == b'{' {
                        quoted += 1;
                    } else if b == b']' || b == b'}' {
                        quoted = quoted.saturating_sub(1);
                    }
                }
                None => match b {
                    b'#' if i == 0 || matches!(l[i - 1], b' ' | b'\t') => {
                        plain = None;
                        break;
                    }
                    b'\'' | b'"' if token_start => quote = Some(b),
                    b'[' | b'{' => {
                        flow += 1;
                        token_start = true;
                        plain = None;
                    }
                    b']' | b'}' => {
                        flow = flow.saturating_sub(1);
                        token_start = false;
                        plain = None;
                    }
                    b',' if flow > 0 => {
                        token_start = true;
                        plain = None;
                    }
                    b' ' | b'\t' => {}
                    b':' if flow > 0 || matches!(l.get(i + 1), None | Some(b' ' | b'\t')) => {
                        token_start = true;
                        plain = None;
                    }
                    b'-' | b'?'
                        if token_start && matches!(l.get(i + 1), None | Some(b' ' | b'\t')) => {}
                    b'|' | b'>' if token_start && flow == 0 => {
                        block_scalar = Some(indent);
                        break;
                    }
                    // An anchor, tag or alias keeps the place a token may start at.
                    b'&' | b'!' | b'*' if token_start => {
                        while i + 1 < l.len() && !matches!(l[i + 1], b' ' | b'\t') {
                            i += 1;
                        }
                    }
                    _ => {
                        token_start = false;
                        plain = Some(plain.unwrap_or(indent));
                    }
                },
            }
            if indents.len() + flow + quoted > max {
                return Some(start + i);
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{line_column, too_deep};

    #[test]
    fn flow_nesting_counts_brackets_and_braces() {
        let at_cap = format!("a: {}{}\n", "[{".repeat(31) + "[", "]}".repeat(31) + "]");
        // `a:` is one block level, then 63 flow levels: 64.
        assert_eq!(too_deep(&at_cap, 64), None);
        let over = format!("a: {}{}\n", "[".repeat(64), "]".repeat(64));
        assert_eq!(too_deep(&over, 64), Some(3 + 63));
    }

    #[test]
    fn brackets_in_comments_and_block_scalars_do_not_count() {
        let text = format!(
            "a: 1 # {}\nb: |\n  {}\n  more\nc: [x]\n",
            "[".repeat(100),
            "{".repeat(100)
        );
        assert_eq!(too_deep(&text, 64), None);
    }

    #[test]
    fn a_closing_bracket_inside_quotes_closes_nothing() {
        // The quoted `]`s must not let the real brackets after them through.
        let text = format!(
            "a: [{}'{}', {}]\n",
            "[".repeat(40),
            "]".repeat(40),
            "[".repeat(40)
        );
        assert!(too_deep(&text, 64).is_some());
        let escaped = format!("a: [\"\\\"{}\", x]\n", "]".repeat(3));
        assert_eq!(too_deep(&escaped, 64), None);
    }

    #[test]
    fn block_nesting_counts_indentation_and_compact_items() {
        let mut deep = String::new();
        for d in 0..70 {
            deep.push_str(&" ".repeat(d));
            deep.push_str(&format!("k{d}:\n"));
        }
        assert_eq!(too_deep(&deep, 64), Some(line_offset(&deep, 64) + 64));
        let compact = format!("{}x\n", "- ".repeat(70));
        assert_eq!(too_deep(&compact, 64), Some(2 * 63));
        let shallow = "a:\n  b:\n    - c: 1\n      d: [1, {e: 2}]\n";
        assert_eq!(too_deep(shallow, 64), None);
    }

    #[test]
    fn a_bracket_in_a_plain_scalar_does_not_hide_the_block_nesting_after_it() {
        // `a{` is a plain key: the parser reads `- - -` as three nested sequences under it
        // (depth 4), though the scan counts the `{` as an open bracket.
        let text = "a{: \n- - - ";
        let parsed: serde_yaml::Value = serde_yaml::from_str(text).expect("valid YAML");
        assert_eq!(value_depth(&parsed), 4);
        assert_eq!(too_deep(text, 3), Some(9));
        assert_eq!(too_deep(text, 5), None);
        // Inside real brackets, a line indented less than the block around them closes
        // nothing.
        let flow = "a:\n  b:\n    c: [\n[[[[x]]]]]\n";
        assert_eq!(too_deep(flow, 7), Some(20));
    }

    fn line_offset(text: &str, line: usize) -> usize {
        text.split_inclusive('\n').take(line).map(str::len).sum()
    }

    /// The nesting of a parsed value: a scalar is 0, a sequence or mapping one more than its
    /// deepest member.
    fn value_depth(v: &serde_yaml::Value) -> usize {
        match v {
            serde_yaml::Value::Sequence(s) => 1 + s.iter().map(value_depth).max().unwrap_or(0),
            serde_yaml::Value::Mapping(m) => {
                1 + m
                    .iter()
                    .map(|(k, v)| value_depth(k).max(value_depth(v)))
                    .max()
                    .unwrap_or(0)
            }
            serde_yaml::Value::Tagged(t) => value_depth(&t.value),
            _ => 0,
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 3000, .. proptest::prelude::ProptestConfig::default()
        })]

        /// Text the pre-scan lets through at depth `k` never parses to a value nested deeper.
        #[test]
        fn the_pre_scan_never_under_counts(
            tokens in proptest::collection::vec(proptest::sample::select(vec![
                "[", "]", "{", "}", ", ", ",", ": ", ":", "- ", "? ", "\n", "  ", " ", "'", "\"",
                "''", "\\", " #", "#", "a", "b", "|", ">", "&x ", "*x", "!t ", "\t",
            ]), 0..60),
            k in 1usize..8,
        ) {
            let text: String = tokens.concat();
            if too_deep(&text, k).is_none() {
                if let Ok(v) = serde_yaml::from_str::<serde_yaml::Value>(&text) {
                    proptest::prop_assert!(value_depth(&v) <= k, "{text:?}: {}", value_depth(&v));
                }
            }
        }
    }

    #[test]
    fn positions_are_one_based_in_characters() {
        assert_eq!(line_column("ab\ncé[", 6), (2, 3));
        assert_eq!(line_column("x", 0), (1, 1));
    }
}
