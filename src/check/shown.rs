//! How a diagnostic shows policy text: a character a reader cannot see as its code point.

/// Whether a diagnostic can show `c` as itself: a visible character, not a control, white
/// space, combining mark, or a character normalization removes (zero-width and format
/// characters, tatweel).
fn is_visible(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_graphic();
    }
    !c.is_control()
        && !c.is_whitespace()
        && unicode_normalization::char::canonical_combining_class(c) == 0
        && !crate::classify::normalize(&c.to_string(), true)
            .text
            .trim()
            .is_empty()
}

/// A character as a diagnostic shows it: `` `+` `` when it is visible on its own, else its code
/// point (`U+0301`).
pub(super) fn shown_char(c: char) -> String {
    if is_visible(c) {
        format!("`{c}`")
    } else {
        format!("U+{:04X}", u32::from(c))
    }
}

/// `text` as a diagnostic shows it: a character a reader cannot see on its own (a zero-width
/// or format character, a combining mark, white space other than a space) as `<U+200C>`.
pub(super) fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == ' ' || is_visible(c) {
                c.to_string()
            } else {
                format!("<U+{:04X}>", u32::from(c))
            }
        })
        .collect()
}

/// The first 24 characters of `text` as [`shown`] shows them, and `…` when it is longer.
pub(super) fn shortened(text: &str) -> String {
    let start: String = text.chars().take(24).collect();
    let mut out = shown(&start);
    if start.len() < text.len() {
        out.push('…');
    }
    out
}

/// The code points of `text`, as `U+200B U+00AD`.
pub(super) fn code_points(text: &str) -> String {
    let points: Vec<String> = text
        .chars()
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect();
    points.join(" ")
}
