//! Warden string literals: how text is written back as a quoted string the grammar reads.

/// `s` as a quoted warden string (`"` and `\` escaped).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}
