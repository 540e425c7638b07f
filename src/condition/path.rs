//! Lexical path containment for `under`, and the normalized form `matches` compares absolute
//! paths in.
//!
//! Nothing here touches the file system: `.` segments, repeated `/` and a trailing `/` are
//! dropped and `..` removes the segment before it. A path that is relative, holds a NUL, or
//! climbs above `/` with `..` is under no directory.

use std::borrow::Cow;

/// A directory of an `under` condition, normalized when the policy loads.
#[derive(Clone, Debug)]
pub(super) struct Dir {
    /// The segments below `/` (none for `/` itself), as byte ranges of `text`.
    segments: Vec<(usize, usize)>,
    /// The directory in normalized form, without a trailing `/` (empty for `/` itself).
    text: Box<str>,
}

/// Why a directory literal cannot be used with `under`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DirError {
    /// It does not start with `/`.
    Relative,
    /// It holds a NUL, or climbs above `/`: no path is under it.
    Unmatchable,
}

impl Dir {
    /// Normalizes a directory literal.
    ///
    /// # Errors
    ///
    /// [`DirError::Relative`] for a directory that does not start with `/`,
    /// [`DirError::Unmatchable`] for one that holds a NUL or climbs above `/`.
    pub(super) fn new(text: &str) -> Result<Dir, DirError> {
        if !text.starts_with('/') {
            return Err(DirError::Relative);
        }
        if text.contains('\0') {
            return Err(DirError::Unmatchable);
        }
        let mut parts: Vec<&str> = Vec::new();
        for seg in text.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(DirError::Unmatchable);
                    }
                }
                s => parts.push(s),
            }
        }
        // The normalized text, written once at its length; each segment is a range of it.
        let mut normal = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
        let mut segments = Vec::with_capacity(parts.len());
        for p in parts {
            normal.push('/');
            let start = normal.len();
            normal.push_str(p);
            segments.push((start, normal.len()));
        }
        Ok(Dir {
            segments,
            text: normal.into_boxed_str(),
        })
    }

    /// Whether `path` is this directory or lies below it, lexically (see the module's doc).
    pub(super) fn contains(&self, path: &str) -> bool {
        let Some(rest) = path.strip_prefix('/') else {
            return false;
        };
        let p = path.as_bytes();
        let dir = self.text.as_bytes();
        match p.strip_prefix(dir) {
            // The directory's (normalized) text, then segments that never go up: under it.
            Some(after) if (after.is_empty() || after[0] == b'/') && !climbs_or_nul(after) => {
                return true;
            }
            // No `//`, no segment starting with `.`, no NUL: the path is normalized but for a
            // trailing `/`, and it does not start with the directory's segments.
            _ if is_plain(p) => return false,
            _ => {}
        }
        if path.contains('\0') {
            return false;
        }
        let k = self.segments.len();
        let (mut depth, mut matched) = (0usize, 0usize);
        for seg in rest.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    if depth == 0 {
                        return false;
                    }
                    depth -= 1;
                    matched = matched.min(depth);
                }
                s => {
                    let same =
                        |&(start, end): &(usize, usize)| self.text.get(start..end) == Some(s);
                    if matched == depth && self.segments.get(depth).is_some_and(same) {
                        matched += 1;
                    }
                    depth += 1;
                }
            }
        }
        matched == k
    }
}

/// Whether `after` (the text of a path after a directory's, starting with `/` when not empty)
/// holds a NUL or a `..` segment (one pass over its bytes).
fn climbs_or_nul(after: &[u8]) -> bool {
    after.iter().enumerate().any(|(i, &b)| {
        b == 0
            || (b == b'.'
                && i > 0
                && after[i - 1] == b'/'
                && after.get(i + 1) == Some(&b'.')
                && matches!(after.get(i + 2), None | Some(b'/')))
    })
}

/// Whether `path` holds no NUL and no `/` followed by `/` or `.` (one pass over the bytes).
fn is_plain(path: &[u8]) -> bool {
    let mut after_slash = false;
    for &b in path {
        if b == 0 || (after_slash && (b == b'/' || b == b'.')) {
            return false;
        }
        after_slash = b == b'/';
    }
    true
}

/// An absolute path in normalized form: borrowed when it is already normalized (no `//`,
/// `/./`, `/../`, trailing `/`), else built (the one allocation).
///
/// # Errors
///
/// `Err(())` for a path with a NUL or one that climbs above `/`.
pub(super) fn normalize(path: &str) -> Result<Cow<'_, str>, ()> {
    if path.contains('\0') {
        return Err(());
    }
    let clean = !path.contains("//")
        && !path.contains("/./")
        && !path.contains("/../")
        && !path.ends_with("/.")
        && !path.ends_with("/..")
        && (path == "/" || !path.ends_with('/'));
    if clean {
        return Ok(Cow::Borrowed(path));
    }
    let mut kept: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                kept.pop().ok_or(())?;
            }
            s => kept.push(s),
        }
    }
    let mut out = String::with_capacity(path.len());
    for seg in &kept {
        out.push('/');
        out.push_str(seg);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn under(path: &str, dir: &str) -> bool {
        Dir::new(dir).expect("a usable directory").contains(path)
    }

    #[test]
    fn containment_is_lexical() {
        assert!(under("/workspace", "/workspace"));
        assert!(under("/workspace/a", "/workspace"));
        assert!(under("/workspace//a/", "/workspace"));
        assert!(under("/workspace/./a/b", "/workspace/"));
        assert!(under("/workspace/x/../a", "/workspace/a"));
        assert!(under("//workspace///a", "/workspace"));
        assert!(!under("/workspace/../etc", "/workspace"));
        assert!(!under("/workspace/../etc/passwd", "/workspace"));
        assert!(!under("/workspaces/a", "/workspace"));
        assert!(!under("/work", "/workspace"));
        assert!(!under("workspace/a", "/workspace"));
        assert!(!under("./workspace/a", "/"));
        assert!(!under("", "/"));
        assert!(!under("/workspace/a\0", "/workspace"));
        assert!(!under("/../workspace/a", "/workspace"));
        assert!(!under("/..", "/"));
        assert!(under("/", "/"));
        assert!(under("/etc/passwd", "/"));
        // `..` back into the directory, after leaving it, is inside again.
        assert!(under("/workspace/../workspace/a", "/workspace"));
        assert!(under("/a/b/c/../../b/d", "/a/b"));
        assert!(!under("/a/b/../../c/b", "/a/b"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// Containment answers as a prefix test on the normalized path does.
        #[test]
        fn containment_is_a_prefix_of_the_normalized_path(
            path in "[/.ab\0]{0,12}",
            dir in "/[/.ab]{0,6}",
        ) {
            let Ok(d) = Dir::new(&dir) else { return Ok(()) };
            let expected = path.starts_with('/')
                && normalize(&path).is_ok_and(|n| {
                    let n = n.as_bytes();
                    let t = d.text.as_bytes();
                    n.starts_with(t) && (n.len() == t.len() || n[t.len()] == b'/' || t.is_empty())
                });
            proptest::prop_assert_eq!(d.contains(&path), expected, "{:?} under {:?}", path, dir);
        }
    }

    #[test]
    fn directories_are_normalized_or_refused() {
        assert_eq!(Dir::new("/a//b/./c/").map(|d| d.segments.len()), Ok(3));
        assert_eq!(Dir::new("/a/../b").map(|d| d.segments.len()), Ok(1));
        assert_eq!(Dir::new("/").map(|d| d.segments.len()), Ok(0));
        assert_eq!(Dir::new("workspace").err(), Some(DirError::Relative));
        assert_eq!(Dir::new("").err(), Some(DirError::Relative));
        assert_eq!(Dir::new("/../a").err(), Some(DirError::Unmatchable));
        assert_eq!(Dir::new("/a\0").err(), Some(DirError::Unmatchable));
    }

    #[test]
    fn normalize_borrows_clean_paths() {
        assert!(matches!(
            normalize("/workspace/a.txt"),
            Ok(Cow::Borrowed(_))
        ));
        assert_eq!(normalize("/workspace//a/").as_deref(), Ok("/workspace/a"));
        assert_eq!(
            normalize("/workspace/./a/../b").as_deref(),
            Ok("/workspace/b")
        );
        assert_eq!(normalize("/workspace/..").as_deref(), Ok("/"));
        assert_eq!(normalize("/").as_deref(), Ok("/"));
        assert_eq!(normalize("/a/.").as_deref(), Ok("/a"));
        assert_eq!(normalize("/../etc"), Err(()));
        assert_eq!(normalize("/a\0b"), Err(()));
    }
}
