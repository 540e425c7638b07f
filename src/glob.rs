//! Tool-name patterns: `*` matches any run of characters (possibly empty); every other
//! character matches itself.

/// Whether `name` matches `pattern`.
///
/// Runs in O(len(pattern) × len(name)) time at worst and never recurses, so a pattern with
/// thousands of stars stays bounded.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    walk(pattern.as_bytes(), name.as_bytes(), false)
}

/// Whether every name `inner` matches is also matched by `outer`.
///
/// `inner`'s stars are treated as a symbol only `outer`'s stars can absorb: `outer` covers
/// `inner` exactly when `outer` matches `inner`'s text under that reading.
pub(crate) fn glob_covers(outer: &str, inner: &str) -> bool {
    walk(outer.as_bytes(), inner.as_bytes(), true)
}

/// The greedy star-backtracking walk both functions share. With `text_stars`, a `*` in the text
/// matches only a `*` of the pattern, never a literal `*`.
fn walk(p: &[u8], n: &[u8], text_stars: bool) -> bool {
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<usize> = None;
    let mut mark = 0usize;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] && !(text_stars && n[ni] == b'*') {
            pi += 1;
            ni += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches() {
        assert!(glob_match("mcp__*__get_*", "mcp__github__get_issue"));
        assert!(glob_match("mcp__*__get_*", "mcp__a__b__get_"));
        assert!(!glob_match("mcp__*__get_*", "mcp__github__list_issues"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "aXbYc"));
        assert!(!glob_match("a*b*c", "aXbY"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
    }

    #[test]
    fn covers() {
        assert!(glob_covers("mcp__*", "mcp__*__get_*"));
        assert!(!glob_covers("mcp__*__get_*", "mcp__*"));
        assert!(glob_covers("a*", "a*"));
        assert!(!glob_covers("a*c", "a*"));
        assert!(glob_covers("*", "x*y*z"));
    }

    #[test]
    fn many_stars_stay_bounded() {
        let pattern = "*a".repeat(1000);
        let name = "a".repeat(999);
        assert!(!glob_match(&pattern, &name));
        assert!(glob_match(&pattern, &"a".repeat(1000)));
    }
}
