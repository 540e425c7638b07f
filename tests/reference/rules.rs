//! Argument rules for the reference interpreter, written from the language's description of
//! them (docs/design.md, "Argument rules"; the semantics in the `condition` module's docs), not
//! from the evaluator: conditions are walked straight off the syntax tree, with three truth
//! values, on the JSON arguments.
//!
//! - A rule fires when its condition holds or cannot be evaluated.
//! - `not` swaps true and false and keeps "cannot be evaluated"; `and` is false when a part is
//!   false, else unknown when a part is, else true; `or` the other way round.
//! - A reference reaches zero or more values (`[*]` one per element); a comparison holds when
//!   it holds for one of them, else is unknown when one is unknown (an absent or `null` value, a
//!   field of a non-object, `[*]` of a non-array, a value of the wrong type), else false. The
//!   negated operators are negated per value.
//! - `any` reaches every string anywhere in the arguments (not object keys).
//! - `in`: equal to a string literal, or a number equal to a number literal, or (as text) in a
//!   supplied `context` set or whole words of the query; a set not supplied, or a query not
//!   known, is unknown unless something else matched.
//! - `under`: an absolute path, `.`/`..`/`//` resolved, whose segments start with the
//!   directory's; anything else (relative, NUL, climbing above `/`) is under nothing.
//! - `matches`: a glob (`*` within a segment, `**` across, `**/` zero or more whole segments,
//!   `?` one character but `/`) on the value, an absolute path first put in normal form (one
//!   that climbs above `/` or holds a NUL cannot be evaluated).
//! - `host(ref)`: the host of a URL (scheme optional, userinfo and port dropped, one trailing
//!   dot dropped, lower case); a string with no such host cannot be evaluated.

use serde_json::Value;
use toolwarden::syntax::ast::{ArgRef, CompareOp, Comparison, Condition, Operand, RefStep};

/// Three truth values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truth {
    True,
    False,
    Unknown,
}

use Truth::{False, True, Unknown};

fn not(t: Truth) -> Truth {
    match t {
        True => False,
        False => True,
        Unknown => Unknown,
    }
}

/// At least one `True` wins; else any `Unknown`; else `False` (also for no values at all).
fn some(ts: impl IntoIterator<Item = Truth>) -> Truth {
    let mut unknown = false;
    for t in ts {
        match t {
            True => return True,
            Unknown => unknown = true,
            False => {}
        }
    }
    if unknown {
        Unknown
    } else {
        False
    }
}

/// What a request gives the conditions: the query (as typed, `None` when not known) and the
/// `context` sets it supplies.
pub struct Given<'a> {
    pub query: Option<&'a str>,
    pub contexts: &'a [(String, Vec<String>)],
}

/// The words of `text`: lower case (the generated texts are ASCII), split at every character
/// that is not a letter or a digit.
fn words(text: &str) -> Vec<String> {
    text.to_ascii_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `value`'s words occur, in order and next to each other, among the query's.
fn in_query(query: &str, value: &str) -> bool {
    let q = words(query);
    let v = words(value);
    !v.is_empty() && q.windows(v.len()).any(|w| w == v.as_slice())
}

/// The condition's truth on `args`.
pub fn eval(c: &Condition, args: &Value, given: &Given<'_>) -> Truth {
    match c {
        Condition::Not { inner, .. } => not(eval(inner, args, given)),
        Condition::And { items, .. } => {
            let ts: Vec<Truth> = items.iter().map(|i| eval(i, args, given)).collect();
            if ts.contains(&False) {
                False
            } else if ts.contains(&Unknown) {
                Unknown
            } else {
                True
            }
        }
        Condition::Or { items, .. } => some(items.iter().map(|i| eval(i, args, given))),
        Condition::Present { arg, .. } => {
            let found = reach(arg, args)
                .into_iter()
                .any(|v| v.is_some_and(|v| !v.is_null()));
            if found {
                True
            } else {
                False
            }
        }
        Condition::Compare(cmp) => compare(cmp, args, given),
    }
}

/// The values a reference reaches: `None` for a step that found nothing usable.
fn reach<'a>(r: &ArgRef, args: &'a Value) -> Vec<Option<&'a Value>> {
    let mut here: Vec<Option<&'a Value>> = vec![Some(args)];
    for step in &r.steps {
        let mut next = Vec::new();
        for v in here {
            match (step, v) {
                (RefStep::Field(name), Some(Value::Object(m))) => next.push(m.get(name)),
                (RefStep::Each, Some(Value::Array(items))) => next.extend(items.iter().map(Some)),
                _ => next.push(None),
            }
        }
        here = next;
    }
    here
}

/// Every string value in `v`, depth first.
fn strings<'a>(v: &'a Value, out: &mut Vec<Option<&'a Value>>) {
    match v {
        Value::String(_) => out.push(Some(v)),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(m) => m.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}

fn compare(c: &Comparison, args: &Value, given: &Given<'_>) -> Truth {
    let (values, host) = match &c.operand {
        Operand::Arg(r) => (reach(r, args), false),
        Operand::Host { of, .. } => match &**of {
            Operand::Arg(r) => (reach(r, args), true),
            _ => unreachable!("the checker refuses host() of anything but a reference"),
        },
        Operand::Any(_) => {
            let mut out = Vec::new();
            strings(args, &mut out);
            (out, false)
        }
        Operand::Literal(_) => unreachable!("the checker refuses a literal operand"),
    };
    let negated = c.op.is_negated();
    some(values.into_iter().map(|v| {
        let t = match v {
            None | Some(Value::Null) => Unknown,
            Some(v) if host => match v.as_str().and_then(host_of) {
                Some(h) => test(c, &Value::String(h), true, given),
                None => Unknown,
            },
            Some(v) => test(c, v, false, given),
        };
        if negated {
            not(t)
        } else {
            t
        }
    }))
}

/// The operator (its positive form) on one non-null value.
fn test(c: &Comparison, v: &Value, is_host: bool, given: &Given<'_>) -> Truth {
    use toolwarden::syntax::ast::Value as Lit;
    let bool_truth = |b: bool| if b { True } else { False };
    match c.op {
        CompareOp::In | CompareOp::NotIn => {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Unknown,
            };
            some(c.values.iter().map(|lit| match (lit, v) {
                (Lit::Str(s), Value::String(x)) => {
                    let listed = if is_host {
                        host_of(&s.text).unwrap_or_default()
                    } else {
                        s.text.clone()
                    };
                    bool_truth(listed == *x)
                }
                (Lit::Number { text, .. }, Value::Number(n)) => {
                    bool_truth(text.parse::<f64>().ok() == n.as_f64())
                }
                (Lit::Str(_), _) | (Lit::Number { .. }, _) => False,
                (Lit::Context { name, .. }, _) => {
                    match given.contexts.iter().find(|(n, _)| *n == name.text) {
                        Some((_, set)) => bool_truth(set.contains(&text)),
                        None => Unknown,
                    }
                }
                (Lit::Query(_), _) => match given.query {
                    Some(q) => bool_truth(in_query(q, &text)),
                    None => Unknown,
                },
            }))
        }
        CompareOp::Under | CompareOp::NotUnder => {
            let Some(s) = v.as_str() else {
                return Unknown;
            };
            let path = absolute(s).and_then(|p| p.ok());
            some(c.values.iter().map(|lit| {
                let Lit::Str(d) = lit else {
                    return False;
                };
                let dir = absolute(&d.text)
                    .and_then(|p| p.ok())
                    .expect("the checker refuses an unusable directory");
                bool_truth(path.as_ref().is_some_and(|p| p.starts_with(&dir)))
            }))
        }
        CompareOp::Matches | CompareOp::NotMatches => {
            let Some(s) = v.as_str() else {
                return Unknown;
            };
            let subject = if !is_host && s.starts_with('/') {
                match absolute(s) {
                    Some(Ok(segments)) => format!("/{}", segments.join("/")),
                    _ => return Unknown,
                }
            } else {
                s.to_string()
            };
            some(c.values.iter().map(|lit| match lit {
                Lit::Str(g) => bool_truth(glob(&g.text, &subject)),
                _ => False,
            }))
        }
        CompareOp::RegexMatch | CompareOp::RegexNotMatch => {
            let Some(s) = v.as_str() else {
                return Unknown;
            };
            let Some(Lit::Str(re)) = c.values.first() else {
                unreachable!("`=~` takes one string");
            };
            let re = regex::Regex::new(&re.text).expect("the checker compiled it");
            bool_truth(re.is_match(s))
        }
        CompareOp::Lt
        | CompareOp::Le
        | CompareOp::Gt
        | CompareOp::Ge
        | CompareOp::Eq
        | CompareOp::Ne => {
            let Some(x) = v.as_f64() else {
                return Unknown;
            };
            let Some(Lit::Number { text, .. }) = c.values.first() else {
                unreachable!("the checker refuses a comparison with anything but a number");
            };
            let y: f64 = text.parse().expect("a number");
            bool_truth(match c.op {
                CompareOp::Lt => x < y,
                CompareOp::Le => x <= y,
                CompareOp::Gt => x > y,
                CompareOp::Ge => x >= y,
                _ => x == y,
            })
        }
    }
}

/// An absolute path's segments with `.`, `..` and empty segments resolved: `None` for a
/// relative path, `Some(Err(()))` for one that holds a NUL or climbs above `/`.
fn absolute(path: &str) -> Option<Result<Vec<String>, ()>> {
    let rest = path.strip_prefix('/')?;
    if path.contains('\0') {
        return Some(Err(()));
    }
    let mut out: Vec<String> = Vec::new();
    for seg in rest.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Some(Err(()));
                }
            }
            s => out.push(s.to_string()),
        }
    }
    Some(Ok(out))
}

/// The host of a URL or `host[:port][/path]`, in normal form; `None` when there is none.
fn host_of(s: &str) -> Option<String> {
    let mut rest = s;
    if let Some(i) = rest.find("://") {
        let scheme = &rest[..i];
        let mut chars = scheme.chars();
        let is_scheme = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if is_scheme {
            rest = &rest[i + 3..];
        }
    }
    if rest.len() == s.len() {
        rest = rest.strip_prefix("//").unwrap_or(rest);
    }
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit('@').next().unwrap_or("");
    let host = match hostport.rfind(':') {
        Some(i) => {
            if !hostport[i + 1..].chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            &hostport[..i]
        }
        None => hostport,
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    let ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
        && !host.starts_with('.')
        && !host.contains("..");
    ok.then(|| host.to_ascii_lowercase())
}

/// One piece of a glob.
#[derive(Clone, Copy, Debug)]
enum Piece {
    Char(char),
    /// `?`
    One,
    /// `*`: any run without `/`.
    Star,
    /// `**`: any run.
    Stars,
    /// `**/` at a segment's start: nothing, or any run that ends in `/`.
    StarsSlash,
}

fn pieces(glob: &str) -> Vec<Piece> {
    let chars: Vec<char> = glob.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '*' {
            let mut j = i;
            while j < chars.len() && chars[j] == '*' {
                j += 1;
            }
            let at_start = i == 0 || chars[i - 1] == '/';
            if j - i == 1 {
                out.push(Piece::Star);
            } else if at_start && chars.get(j) == Some(&'/') {
                out.push(Piece::StarsSlash);
                j += 1;
            } else {
                out.push(Piece::Stars);
            }
            i = j;
        } else {
            out.push(if chars[i] == '?' {
                Piece::One
            } else {
                Piece::Char(chars[i])
            });
            i += 1;
        }
    }
    out
}

/// Whether `glob` matches all of `text`: a table of (pieces used, characters read).
fn glob(glob: &str, text: &str) -> bool {
    let p = pieces(glob);
    let t: Vec<char> = text.chars().collect();
    // ok[i][j]: pieces[i..] match text[j..].
    let mut ok = vec![vec![false; t.len() + 1]; p.len() + 1];
    ok[p.len()][t.len()] = true;
    for i in (0..p.len()).rev() {
        for j in (0..=t.len()).rev() {
            ok[i][j] = match p[i] {
                Piece::Char(c) => j < t.len() && t[j] == c && ok[i + 1][j + 1],
                Piece::One => j < t.len() && t[j] != '/' && ok[i + 1][j + 1],
                Piece::Star => (j..=t.len())
                    .take_while(|&k| k == j || t[k - 1] != '/')
                    .any(|k| ok[i + 1][k]),
                Piece::Stars => (j..=t.len()).any(|k| ok[i + 1][k]),
                Piece::StarsSlash => {
                    ok[i + 1][j] || (j + 1..=t.len()).any(|k| t[k - 1] == '/' && ok[i + 1][k])
                }
            };
        }
    }
    ok[0][0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_paths_and_hosts_read_as_documented() {
        assert!(glob("**/.env", ".env"));
        assert!(glob("**/.env", "/w/a/.env"));
        assert!(!glob("**/.env", "/w/x.env"));
        assert!(glob("/w/*", "/w/a"));
        assert!(!glob("/w/*", "/w/a/b"));
        assert!(glob("/w/**", "/w/a/b"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "a/c"));
        assert!(glob("*@ex.com", "bob@ex.com"));
        assert!(!glob("*@ex.com", "a/b@ex.com"));
        assert_eq!(
            absolute("/w/../w/./a//"),
            Some(Ok(vec!["w".to_string(), "a".to_string()]))
        );
        assert_eq!(absolute("/.."), Some(Err(())));
        assert_eq!(absolute("w/a"), None);
        assert_eq!(
            host_of("HTTPS://u:p@GitHub.com:443/x").as_deref(),
            Some("github.com")
        );
        assert_eq!(host_of("//docs.rs/r").as_deref(), Some("docs.rs"));
        assert_eq!(
            host_of("https://evil.com\\@github.com/").as_deref(),
            Some("evil.com")
        );
        assert_eq!(host_of("no host here"), None);
        assert_eq!(host_of("https://"), None);
        assert!(in_query("Pay Bob Smith 5 dollars", "bob smith"));
        assert!(!in_query("pay bob smith", "smith bob"));
        assert!(!in_query("pay", "--"));
    }
}
