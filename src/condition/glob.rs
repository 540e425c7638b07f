//! Globs for `matches`: `*` matches any run of characters within one `/`-separated segment,
//! `**` (two or more `*`) any run across segments (`**/` also none: `**/.env` matches `.env`),
//! `?` one character other than `/`; every other character matches itself.
//!
//! A glob is translated into an anchored regular expression once, when the policy loads, so
//! matching runs in time linear in the text whatever the glob: a run of stars is one
//! sub-expression, however many stars it has.

/// Why a glob cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GlobError {
    /// It holds a NUL, or it starts with `/` and holds `//`, `/./`, `/../` or ends in `/`,
    /// `/.` or `/..`: an absolute path is matched in normalized form, which never has those.
    Unmatchable,
}

/// The regular expression (syntax of the `regex` crate) that matches what `glob` matches.
///
/// # Errors
///
/// [`GlobError::Unmatchable`] when no path can match the glob.
pub(super) fn to_regex(glob: &str) -> Result<String, GlobError> {
    if glob.contains('\0') {
        return Err(GlobError::Unmatchable);
    }
    if glob.starts_with('/') && glob.len() > 1 {
        let odd = glob.contains("//")
            || glob.contains("/./")
            || glob.contains("/../")
            || glob.ends_with('/')
            || glob.ends_with("/.")
            || glob.ends_with("/..");
        if odd {
            return Err(GlobError::Unmatchable);
        }
    }
    let chars: Vec<char> = glob.chars().collect();
    let mut out = String::with_capacity(glob.len() * 2 + 8);
    out.push_str("(?s)^");
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '*' {
            let run = chars[i..].iter().take_while(|&&x| x == '*').count();
            let at_segment_start = i == 0 || chars[i - 1] == '/';
            let next = chars.get(i + run).copied();
            i += run;
            if run == 1 {
                out.push_str("[^/]*");
            } else if at_segment_start && next == Some('/') {
                // `**/`: any number of whole segments, none included.
                out.push_str("(?:.*/)?");
                i += 1;
            } else {
                out.push_str(".*");
            }
            continue;
        }
        if c == '?' {
            out.push_str("[^/]");
        } else {
            let mut buf = [0u8; 4];
            out.push_str(&regex_syntax::escape(c.encode_utf8(&mut buf)));
        }
        i += 1;
    }
    out.push('$');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob_matches(glob: &str, text: &str) -> bool {
        let re = regex::Regex::new(&to_regex(glob).expect("a usable glob")).expect("compiles");
        re.is_match(text)
    }

    #[test]
    fn stars_and_question_marks() {
        assert!(glob_matches("**/.env", "/workspace/.env"));
        assert!(glob_matches("**/.env", ".env"));
        assert!(glob_matches("**/.env", "/a/b/c/.env"));
        assert!(!glob_matches("**/.env", "/workspace/.env.example"));
        assert!(!glob_matches("**/.env", "/workspace/x.env"));
        assert!(glob_matches("**/*.pem", "/etc/ssl/key.pem"));
        assert!(glob_matches("**/*.pem", "key.pem"));
        assert!(!glob_matches("**/*.pem", "/etc/ssl/key.pem.txt"));
        assert!(glob_matches("**/.git/**", "/repo/.git/config"));
        assert!(glob_matches("**/.git/**", "/repo/.git/objects/ab/cd"));
        assert!(!glob_matches("**/.git/**", "/repo/.github/x"));
        assert!(glob_matches("*@example.com", "bob@example.com"));
        assert!(!glob_matches("*@example.com", "bob@example.com.evil.org"));
        assert!(!glob_matches("*@example.com", "bob@evil.com"));
        assert!(!glob_matches("*@example.com", "a/b@example.com"));
        assert!(glob_matches("/workspace/*", "/workspace/a"));
        assert!(!glob_matches("/workspace/*", "/workspace/a/b"));
        assert!(glob_matches("/workspace/**", "/workspace/a/b"));
        assert!(glob_matches("a?c", "abc"));
        assert!(!glob_matches("a?c", "a/c"));
        assert!(glob_matches("a.c", "a.c"));
        assert!(!glob_matches("a.c", "abc"));
        assert!(glob_matches("(x)[y]+", "(x)[y]+"));
        assert!(glob_matches("", ""));
        assert!(!glob_matches("", "a"));
    }

    #[test]
    fn a_run_of_stars_is_one_sub_expression() {
        let glob = "*".repeat(10_000);
        assert_eq!(to_regex(&glob).as_deref(), Ok("(?s)^.*$"));
        let glob = format!("a{}b", "*".repeat(10_000));
        assert_eq!(to_regex(&glob).as_deref(), Ok("(?s)^a.*b$"));
    }

    #[test]
    fn globs_no_path_can_match() {
        for glob in ["/a//b", "/a/./b", "/a/../b", "/a/", "/a/.", "/a/..", "a\0"] {
            assert_eq!(to_regex(glob), Err(GlobError::Unmatchable), "{glob}");
        }
        assert!(to_regex("/").is_ok());
        assert!(to_regex("a//b").is_ok());
    }
}
