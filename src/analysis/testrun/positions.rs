//! Where things are in a test file's text: the cases of a block-style `cases:` list, a key
//! inside a case, and the steps of a case's `steps:` list, so that a mistake is reported at its
//! `file:line:col` (the YAML parser gives positions only for syntax errors).

/// Where each case of a block-style `cases:` list starts (1-based line and column of its first
/// key), found in the text; empty when the list is not in block style.
pub(super) fn case_positions(text: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|l| l.starts_with("cases:") && l[6..].trim().is_empty())
    else {
        return Vec::new();
    };
    let mut item_indent = None;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent == 0 && !trimmed.starts_with('-') {
            break;
        }
        if trimmed.starts_with("- ") || trimmed == "-" {
            let ind = *item_indent.get_or_insert(indent);
            if indent == ind {
                out.push((i + 1, indent + 3));
            }
        }
    }
    out
}

/// The line and column of `key:` inside a case (lines `case.0..to`, 1-based), else the case's.
pub(super) fn field_position(
    text: &str,
    case: (usize, usize),
    to: usize,
    key: &str,
) -> (usize, usize) {
    find_key(text, case.0, to, key).unwrap_or(case)
}

/// The line and column of the first `key:` on lines `from..to` (1-based, `to` exclusive).
fn find_key(text: &str, from: usize, to: usize, key: &str) -> Option<(usize, usize)> {
    let pat = format!("{key}:");
    for (i, line) in text
        .lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .take(to.saturating_sub(from))
    {
        // `key:` as a whole key: at the start of the line's content, or after `{`, `,` or a
        // space (flow mappings).
        let mut start = 0;
        while let Some(off) = line[start..].find(&pat) {
            let at = start + off;
            let before = line[..at].chars().last();
            if before.is_none_or(|c| c == '{' || c == ',' || c == ' ' || c == '-') {
                return Some((i + 1, line[..at].chars().count() + 1));
            }
            start = at + pat.len();
        }
    }
    None
}

/// A block-style list under `key:` inside a case: the key's line, where each item starts
/// (line and column of its first key) and the first line after the list.
pub(super) struct ListBlock {
    pub key_line: usize,
    pub items: Vec<(usize, usize)>,
    pub end: usize,
}

/// The block-style list under `key:` inside a case (lines `case.0..to`), when there is one.
pub(super) fn list_block(
    text: &str,
    case: (usize, usize),
    to: usize,
    key: &str,
) -> Option<ListBlock> {
    let (key_line, key_col) = find_key(text, case.0, to, key)?;
    let key_indent = key_col - 1;
    let mut item_indent = None;
    let mut block = ListBlock {
        key_line,
        items: Vec::new(),
        end: to,
    };
    for (i, line) in text
        .lines()
        .enumerate()
        .skip(key_line)
        .take(to.saturating_sub(key_line + 1))
    {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        let is_item = trimmed.starts_with("- ") || trimmed == "-";
        if indent < key_indent || (indent == key_indent && !is_item) {
            block.end = i + 1;
            break;
        }
        if is_item {
            let ind = *item_indent.get_or_insert(indent);
            if indent == ind {
                block.items.push((i + 1, indent + 3));
            }
        }
    }
    Some(block)
}

/// The line and column of a case's own `key:`, outside its `steps` list (whose steps have keys
/// of the same names), else the case's.
pub(super) fn case_field_position(
    text: &str,
    case: (usize, usize),
    to: usize,
    key: &str,
) -> (usize, usize) {
    match list_block(text, case, to, "steps") {
        Some(b) if key != "steps" => find_key(text, case.0, b.key_line, key)
            .or_else(|| find_key(text, b.end, to, key))
            .unwrap_or(case),
        _ => field_position(text, case, to, key),
    }
}
