//! Strategies for argument rules: small policies whose tools, `match` pattern, `defaults` and
//! `rules` blocks carry random rules of every kind, requests with random `context` sets and
//! queries, and arguments shaped to reach every outcome (absent, `null`, wrong types, arrays,
//! nested objects, paths that climb out, URLs with userinfo and ports).

use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use serde_json::{json, Value};
use toolwarden::{Intent, Request};

use crate::reference::RefRequest;

/// The names every generated request calls: three tools, one name only the pattern covers, one
/// name nothing declares.
pub const RULE_TOOLS: &[&str] = &["t0", "t1", "t2", "m_x", "other"];

/// References to arguments that hold (or may hold) strings, numbers, arrays and objects.
const REFS: &[&str] = &[
    "a",
    "p",
    "url",
    "n",
    "list[*]",
    "obj.k",
    "objs[*].name",
    "missing",
    "a.b",
];
const IN_ITEMS: &[&str] = &[
    "\"alice\"",
    "\"bob smith\"",
    "5",
    "2.5",
    "context.c0",
    "context.c1",
    "query",
    "\"/w/a.txt\"",
];
const HOST_ITEMS: &[&str] = &[
    "\"github.com\"",
    "\"docs.rs\"",
    "\"GitHub.COM.\"",
    "context.c0",
    "query",
];
const DIRS: &[&str] = &["\"/w\"", "\"/tmp/x\"", "\"/\"", "\"/w/../tmp\""];
const GLOBS: &[&str] = &[
    "\"*.txt\"",
    "\"/w/**\"",
    "\"**/.env\"",
    "\"a?c\"",
    "\"/w/*\"",
    "\"*@ex.com\"",
    "\"**\"",
    "\"*\"",
];
const REGEXES: &[&str] = &["^a", "b$", "(?i)alice", "[0-9]+", "x|y", "^$"];
const NUMBERS: &[&str] = &["0", "5", "2.5", "-1", "100"];
const COMPARE: &[&str] = &["<", "<=", ">", ">=", "==", "!="];

fn list(items: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    subsequence(items.to_vec(), 1..=max).prop_map(|v| v.join(", "))
}

fn negated(plain: &'static str, negated: &'static str) -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(plain), Just(negated)]
}

/// One comparison or `present(...)`, of any kind.
fn atom() -> impl Strategy<Value = String> {
    let r = || select(REFS.to_vec());
    let on_args = prop_oneof![
        (r(), negated("in", "not in"), list(IN_ITEMS, 3))
            .prop_map(|(r, op, l)| format!("{r} {op} {l}")),
        (r(), negated("under", "not under"), list(DIRS, 2))
            .prop_map(|(r, op, l)| format!("{r} {op} {l}")),
        (r(), negated("matches", "not matches"), list(GLOBS, 2))
            .prop_map(|(r, op, l)| format!("{r} {op} {l}")),
        (r(), negated("=~", "!~"), select(REGEXES.to_vec()))
            .prop_map(|(r, op, re)| format!("{r} {op} \"{re}\"")),
        (r(), select(COMPARE.to_vec()), select(NUMBERS.to_vec()))
            .prop_map(|(r, op, x)| format!("{r} {op} {x}")),
        r().prop_map(|r| format!("present({r})")),
    ]
    .boxed();
    let on_host_and_any = prop_oneof![
        (
            select(vec!["url", "a", "list[*]", "missing"]),
            negated("in", "not in"),
            list(HOST_ITEMS, 3)
        )
            .prop_map(|(r, op, l)| format!("host({r}) {op} {l}")),
        (negated("matches", "not matches"), list(GLOBS, 2))
            .prop_map(|(op, l)| format!("host(url) {op} {l}")),
        select(REGEXES.to_vec()).prop_map(|re| format!("host(url) =~ \"{re}\"")),
        (negated("in", "not in"), list(IN_ITEMS, 2)).prop_map(|(op, l)| format!("any {op} {l}")),
        (negated("=~", "!~"), select(REGEXES.to_vec()))
            .prop_map(|(op, re)| format!("any {op} \"{re}\"")),
        (negated("matches", "not matches"), list(GLOBS, 2))
            .prop_map(|(op, l)| format!("any {op} {l}")),
        (negated("under", "not under"), list(DIRS, 2)).prop_map(|(op, l)| format!("any {op} {l}")),
    ]
    .boxed();
    prop_oneof![2 => on_args, 1 => on_host_and_any]
}

/// A condition: atoms joined by `and`, `or` and `not`, two levels deep at most.
pub fn condition() -> impl Strategy<Value = String> {
    atom().prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} and {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} or {b})")),
            inner.prop_map(|a| format!("not {a}")),
        ]
    })
}

/// Zero to `max` rules, one a line, indented.
fn rules(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec((negated("deny", "confirm"), condition()), 0..=max).prop_map(|rs| {
        rs.iter()
            .map(|(o, c)| format!("  {o} when {c}\n"))
            .collect::<String>()
    })
}

fn cell() -> impl Strategy<Value = &'static str> {
    prop_oneof![3 => Just("allow"), 1 => Just("confirm"), 1 => Just("deny")]
}

/// A policy with argument rules on `t0`, `t1`, `t2`, the pattern `m_*`, in a `defaults` block
/// and in a `rules` block, and the two sets `context c0, c1`.
pub fn rules_policy_text() -> impl Strategy<Value = String> {
    let body = || {
        (
            select(vec!["none", "write"]),
            proptest::bool::weighted(0.2),
            proptest::bool::weighted(0.15),
            rules(3),
        )
    };
    (
        (cell(), cell()),
        proptest::bool::weighted(0.3), // unknown allow
        proptest::option::weighted(0.4, 0u64..3),
        proptest::option::weighted(0.4, rules(2)), // defaults
        proptest::option::weighted(0.5, rules(2)), // rules block
        proptest::collection::vec(body(), 4..=4),  // t0, t1, t2, m_*
    )
        .prop_map(
            |((read, write), unknown_allow, limit, defaults, global, bodies)| {
                let mut s = String::from("policy \"gen\" version 3\n");
                s += "effects none, write\nintents write > read\nfallback read\n";
                s += &format!(
                    "matrix m {{\n  none write\n  read allow {read}\n  write allow {write}\n}}\n"
                );
                s += "mode m0 { matrix m }\nmode m1 { matrix m  confirm write }\ndefault mode m0\n";
                s += "confirm fields \"confirmed\"\ncontext c0, c1\n";
                s += if unknown_allow {
                    "unknown allow\n"
                } else {
                    "unknown deny\n"
                };
                if let Some(l) = limit {
                    s += &format!("limit transactional {l} per turn\n");
                }
                // `unknown allow` needs the default effect a `defaults` block gives.
                match defaults {
                    Some(d) => s += &format!("defaults {{\n  effect none\n{d}}}\n"),
                    None if unknown_allow => s += "defaults { effect none }\n",
                    None => {}
                }
                for (i, (effect, requires, always, rules)) in bodies.iter().enumerate() {
                    let head = if i < 3 {
                        format!("tool t{i}")
                    } else {
                        "match \"m_*\"".to_string()
                    };
                    s += &format!("{head} {{\n  effect {effect}\n");
                    if *requires {
                        s += "  requires a\n";
                    }
                    if *always {
                        s += "  confirm always\n";
                    }
                    s += rules;
                    s += "}\n";
                }
                if let Some(g) = global {
                    s += &format!("rules {{\n{g}}}\n");
                }
                s
            },
        )
}

/// Values an argument may take, of every JSON type.
fn values(vs: Vec<Value>) -> impl Strategy<Value = Option<Value>> {
    proptest::option::weighted(0.75, select(vs))
}

/// Call arguments: each field absent or one of a few values of several types; now and then
/// not an object at all.
pub fn rule_args() -> impl Strategy<Value = Value> {
    (
        (
            values(vec![
                json!("alice"),
                json!("Bob Smith"),
                json!("abc"),
                json!("xyz@ex.com"),
                json!("/w/a.txt"),
                json!(5),
                Value::Null,
                json!(["alice"]),
                json!(true),
            ]),
            values(vec![
                json!("/w/a.txt"),
                json!("/w/../etc/passwd"),
                json!("/w//b/"),
                json!("w/rel.txt"),
                json!("/tmp/x/y.env"),
                json!("/w/.env"),
                json!("/"),
                json!("/.."),
                json!("/w/a\u{0}"),
                json!(7),
            ]),
            values(vec![
                json!("https://GitHub.com:443/x"),
                json!("github.com"),
                json!("//docs.rs/r"),
                json!("https://user@evil.com/"),
                json!("https://evil.com\\@github.com/"),
                json!("ftp://a.b"),
                json!("no host here"),
                json!("https://"),
                json!("HTTP://Docs.RS./x?y"),
                json!(3),
            ]),
            values(vec![
                json!(5),
                json!(2.5),
                json!(-1),
                json!(100),
                json!(0),
                json!("5"),
                Value::Null,
                json!([1]),
            ]),
        ),
        (
            values(vec![
                json!([]),
                json!(["alice", "xyz@ex.com"]),
                json!(["a", 5]),
                json!(["/w/a.txt", "https://docs.rs/x"]),
                json!("notalist"),
                Value::Null,
            ]),
            values(vec![
                json!({"k": "alice"}),
                json!({"k": 5}),
                json!({"k": ["abc"]}),
                json!("str"),
                json!({}),
                Value::Null,
            ]),
            values(vec![
                json!([{"name": "a.txt"}, {"name": 3}]),
                json!([]),
                json!([{"nom": 1}]),
                json!([{"name": "/w/x"}, {"name": "b"}]),
                json!({"name": "a.txt"}),
            ]),
            values(vec![json!(true), json!(false), json!("true")]),
            proptest::bool::weighted(0.03),
        ),
    )
        .prop_map(
            |((a, p, url, n), (list, obj, objs, confirmed, not_object))| {
                if not_object {
                    return json!(["not", "an", "object"]);
                }
                let mut m = serde_json::Map::new();
                for (k, v) in [
                    ("a", a),
                    ("p", p),
                    ("url", url),
                    ("n", n),
                    ("list", list),
                    ("obj", obj),
                    ("objs", objs),
                    ("confirmed", confirmed),
                ] {
                    if let Some(v) = v {
                        m.insert(k.to_string(), v);
                    }
                }
                Value::Object(m)
            },
        )
}

/// A request for a rules policy: mode, intent, the user's query (or none: an intent given by
/// name) and the `context` sets supplied.
#[derive(Clone, Debug)]
pub struct RuleReq {
    pub mode: &'static str,
    pub intent: &'static str,
    pub query: Option<&'static str>,
    pub contexts: Vec<(&'static str, Vec<&'static str>)>,
}

const CONTEXT_VALUES: &[&str] = &["alice", "github.com", "5", "Bob Smith", "/w/a.txt"];

pub fn rule_request() -> impl Strategy<Value = RuleReq> {
    let set = || proptest::option::weighted(0.7, subsequence(CONTEXT_VALUES.to_vec(), 0..=3));
    (
        select(vec!["m0", "m1"]),
        select(vec!["read", "write"]),
        proptest::option::weighted(
            0.7,
            select(vec![
                "Pay Alice 5 dollars",
                "send it to Bob Smith",
                "fetch github.com now",
                "docs.rs and abc please",
                "nothing here",
                "",
            ]),
        ),
        set(),
        set(),
        proptest::bool::weighted(0.03),
    )
        .prop_map(|(mode, intent, query, c0, c1, undeclared)| {
            let mut contexts = Vec::new();
            if let Some(v) = c0 {
                contexts.push(("c0", v));
            }
            if let Some(v) = c1 {
                contexts.push(("c1", v));
            }
            if undeclared {
                contexts.push(("zz", vec!["alice"]));
            }
            RuleReq {
                mode,
                intent,
                query,
                contexts,
            }
        })
}

impl RuleReq {
    /// The request and intent for the evaluator; the query normalized as `classify` leaves it
    /// (lower case, for these ASCII texts).
    pub fn compiled(&self) -> (Request, Intent) {
        let mut r = Request::new(self.mode);
        for (name, values) in &self.contexts {
            r = r.context(*name, values.iter().copied());
        }
        let mut intent = Intent::named(self.intent);
        intent.query = self.query.map(|q| q.to_ascii_lowercase().as_str().into());
        (r, intent)
    }

    pub fn reference(&self) -> RefRequest {
        RefRequest {
            mode: Some(self.mode.to_string()),
            intents: vec![self.intent.to_string()],
            query: self.query.map(str::to_string),
            contexts: self
                .contexts
                .iter()
                .map(|(n, v)| (n.to_string(), v.iter().map(|s| s.to_string()).collect()))
                .collect(),
            ..RefRequest::default()
        }
    }
}
