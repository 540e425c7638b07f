//! Exact-value tests of compiling and evaluating conditions, the fail-closed cases, the caps on
//! hostile input, and properties over arbitrary arguments.

use serde_json::{json, Value as Json};

use super::*;
use crate::syntax::ast::{Decl, FileId};
use crate::syntax::parse_file;

/// The declared sets of these tests: `contacts` is 0, `own_accounts` is 1.
fn resolve(name: &str) -> Option<ContextId> {
    match name {
        "contacts" => Some(ContextId(0)),
        "own_accounts" => Some(ContextId(1)),
        _ => None,
    }
}

/// The condition of `deny when COND`, parsed.
fn parsed(cond: &str) -> ast::Condition {
    let text = format!("rules {{ deny when {cond} }}");
    let (tree, diagnostics) = parse_file(&text, FileId(0));
    assert!(diagnostics.is_empty(), "{cond}: {diagnostics:?}");
    let Some(Decl::Rules(r)) = tree.decls.into_iter().next() else {
        panic!("{cond}: no rules block");
    };
    r.rules.into_iter().next().expect("one rule").condition
}

fn compiled(cond: &str) -> CompiledCondition {
    CompiledCondition::compile(&parsed(cond), &resolve).unwrap_or_else(|e| panic!("{cond}: {e:?}"))
}

/// The errors compiling `cond` gives, as `(code, text under the span)`.
fn errors(cond: &str) -> Vec<(&'static str, String)> {
    let text = format!("rules {{ deny when {cond} }}");
    match CompiledCondition::compile(&parsed(cond), &resolve) {
        Ok(_) => panic!("{cond}: compiled"),
        Err(errors) => errors
            .iter()
            .map(|e| (e.code(), text[e.span().range()].to_string()))
            .collect(),
    }
}

fn normalize(s: &str) -> String {
    s.to_lowercase()
}

/// `H` holds, `-` does not hold, `?` cannot be evaluated.
fn eval_with(cond: &str, args: &Json, query: &str, sets: &[Option<&ContextSet>]) -> char {
    let c = compiled(cond);
    let ctx = EvalContext::new(query, &normalize, sets);
    match c.eval(args, &ctx) {
        Outcome::Holds(_) => 'H',
        Outcome::DoesNotHold => '-',
        Outcome::Unevaluable(_) => '?',
    }
}

fn eval(cond: &str, args: Json) -> char {
    eval_with(cond, &args, "", &[])
}

/// The outcome's letter, reference, value text and problem.
fn witness(cond: &str, args: &Json) -> (char, String, Option<String>, Option<Problem>) {
    let c = compiled(cond);
    let ctx = EvalContext::new("", &normalize, &[]);
    let out = c.eval(args, &ctx);
    let letter = match out {
        Outcome::Holds(_) => 'H',
        Outcome::DoesNotHold => '-',
        Outcome::Unevaluable(_) => '?',
    };
    let w = out.witness().copied();
    (
        letter,
        w.map(|w| w.reference().to_string()).unwrap_or_default(),
        w.and_then(|w| w.value_text()),
        w.and_then(|w| w.problem()),
    )
}

#[test]
fn in_and_not_in_literals() {
    assert_eq!(
        eval(r#"owner in "acme", "beta""#, json!({"owner": "acme"})),
        'H'
    );
    assert_eq!(
        eval(r#"owner in "acme", "beta""#, json!({"owner": "Acme"})),
        '-'
    );
    assert_eq!(
        eval(r#"owner not in "acme""#, json!({"owner": "evil"})),
        'H'
    );
    assert_eq!(
        eval(r#"owner not in "acme""#, json!({"owner": "acme"})),
        '-'
    );
    assert_eq!(eval("n in 1, 2.5", json!({"n": 2.5})), 'H');
    assert_eq!(eval("n in 1, 2.5", json!({"n": 1.0})), 'H');
    assert_eq!(eval("n in 1, 2.5", json!({"n": 3})), '-');
    // Types are strict: a string is not a number, nor the other way round.
    assert_eq!(eval(r#"n in "5000""#, json!({"n": 5000})), '-');
    assert_eq!(eval("n in 5000", json!({"n": "5000"})), '-');
    assert_eq!(eval("n not in 5000", json!({"n": "5000"})), 'H');
    assert_eq!(eval(r#"n in "a""#, json!({"n": true})), '?');
    assert_eq!(eval(r#"n not in "a""#, json!({"n": {"x": 1}})), '?');
}

#[test]
fn in_context_sets() {
    let contacts = ContextSet::new(["alice@example.com", "bob@example.com"]);
    let none = ContextSet::new(Vec::<String>::new());
    let cond = "recipient not in context.contacts";
    let args = json!({"recipient": "alice@example.com"});
    assert_eq!(eval_with(cond, &args, "", &[Some(&contacts)]), '-');
    let args = json!({"recipient": "mallory@evil.com"});
    assert_eq!(eval_with(cond, &args, "", &[Some(&contacts)]), 'H');
    assert_eq!(eval_with(cond, &args, "", &[Some(&none)]), 'H');
    // A set the request did not supply: fail closed, both ways.
    assert_eq!(eval_with(cond, &args, "", &[None]), '?');
    assert_eq!(eval_with(cond, &args, "", &[]), '?');
    let args = json!({"recipient": "alice@example.com"});
    assert_eq!(
        eval_with("recipient in context.contacts", &args, "", &[]),
        '?'
    );
    // A literal or another set that holds decides even when one set is missing.
    assert_eq!(
        eval_with(
            "recipient in context.own_accounts, context.contacts",
            &args,
            "",
            &[Some(&contacts), None]
        ),
        'H'
    );
    // Numbers are compared by their JSON text.
    let accounts = ContextSet::new(["12345"]);
    let args = json!({"to": 12345});
    assert_eq!(
        eval_with(
            "to in context.own_accounts",
            &args,
            "",
            &[None, Some(&accounts)]
        ),
        'H'
    );
    assert_eq!(contacts.len(), 2);
    assert!(none.is_empty());
}

#[test]
fn in_query_is_whole_words_after_normalizing() {
    let cond = "recipient not in context.contacts, query";
    let contacts = ContextSet::new(["alice@example.com"]);
    let sets = [Some(&contacts)];
    let query = "please pay bob@example.com 100 dollars";
    let check = |v: Json| eval_with(cond, &json!({"recipient": v}), query, &sets);
    assert_eq!(check(json!("alice@example.com")), '-');
    assert_eq!(check(json!("bob@example.com")), '-');
    assert_eq!(check(json!("BOB@Example.com")), '-');
    assert_eq!(check(json!("ob@example.com")), 'H');
    assert_eq!(check(json!("mallory@evil.com")), 'H');
    assert_eq!(check(json!("")), 'H');
    assert_eq!(
        eval_with("amount in query", &json!({"amount": 100}), query, &[]),
        'H'
    );
    assert_eq!(
        eval_with("amount in query", &json!({"amount": 10}), query, &[]),
        '-'
    );
}

#[test]
fn under_and_not_under() {
    let cond = r#"path not under "/workspace", "/tmp/scratch""#;
    let check = |p: &str| eval(cond, json!({ "path": p }));
    assert_eq!(check("/workspace/a.txt"), '-');
    assert_eq!(check("/workspace"), '-');
    assert_eq!(check("/workspace//a/"), '-');
    assert_eq!(check("/tmp/scratch/x/./y"), '-');
    assert_eq!(check("/workspace/../etc"), 'H');
    assert_eq!(check("/workspace/../etc/passwd"), 'H');
    assert_eq!(check("/workspaces/a"), 'H');
    assert_eq!(check("workspace/a"), 'H');
    assert_eq!(check("/workspace/a\0"), 'H');
    assert_eq!(check("/../workspace/a"), 'H');
    assert_eq!(
        eval(
            r#"path under "/workspace""#,
            json!({"path": "/workspace/../etc"})
        ),
        '-'
    );
    assert_eq!(eval(r#"path under "/""#, json!({"path": "relative"})), '-');
    assert_eq!(eval(cond, json!({"path": 5})), '?');
    assert_eq!(eval(cond, json!({"path": ["/workspace/a"]})), '?');
}

#[test]
fn matches_globs() {
    let cond = r#"path matches "**/.env", "**/*.pem", "**/.git/**""#;
    let check = |p: &str| eval(cond, json!({ "path": p }));
    assert_eq!(check("/workspace/.env"), 'H');
    assert_eq!(check("/workspace/keys/server.pem"), 'H');
    assert_eq!(check("/workspace/.git/config"), 'H');
    assert_eq!(check("/workspace/.env.example"), '-');
    assert_eq!(check("/workspace/src/main.rs"), '-');
    // Absolute paths are matched in normalized form.
    assert_eq!(check("/workspace//.env"), 'H');
    assert_eq!(check("/workspace/.env/"), 'H');
    assert_eq!(check("/workspace/x/../.git/HEAD"), 'H');
    assert_eq!(check("/../.env"), '?');
    assert_eq!(check(".env"), 'H');
    let cond = r#"recipients[*] not matches "*@example.com""#;
    assert_eq!(
        eval(
            cond,
            json!({"recipients": ["a@example.com", "b@example.com"]})
        ),
        '-'
    );
    assert_eq!(
        eval(
            cond,
            json!({"recipients": ["a@example.com", "eve@evil.com"]})
        ),
        'H'
    );
    assert_eq!(eval(cond, json!({"recipients": []})), '-');
    assert_eq!(eval(cond, json!({"recipients": ["a@example.com", 7]})), '?');
    assert_eq!(eval(cond, json!({"recipients": ["eve@evil.com", 7]})), 'H');
    assert_eq!(eval(cond, json!({"recipients": "a@example.com"})), '?');
}

#[test]
fn regular_expressions() {
    let cond = r#"query =~ "(?i)\\b(drop|truncate)\\b""#;
    assert_eq!(eval(cond, json!({"query": "DROP TABLE users"})), 'H');
    assert_eq!(eval(cond, json!({"query": "select * from dropbox"})), '-');
    assert_eq!(eval(cond, json!({"query": 1})), '?');
    let cond = r#"name !~ "^[a-z]+$""#;
    assert_eq!(eval(cond, json!({"name": "abc"})), '-');
    assert_eq!(eval(cond, json!({"name": "ab1"})), 'H');
}

#[test]
fn number_comparisons() {
    let args = json!({"amount": 100});
    assert_eq!(eval("amount > 100", args.clone()), '-');
    assert_eq!(eval("amount >= 100", args.clone()), 'H');
    assert_eq!(eval("amount < 100.5", args.clone()), 'H');
    assert_eq!(eval("amount <= 99", args.clone()), '-');
    assert_eq!(eval("amount == 100", args.clone()), 'H');
    assert_eq!(eval("amount != 100", args.clone()), '-');
    assert_eq!(eval("amount > -1", json!({"amount": -0.5})), 'H');
    // The string "5000" is not a number: the rule fires whichever way it is written.
    assert_eq!(eval("amount > 100", json!({"amount": "5000"})), '?');
    assert_eq!(eval("amount <= 100", json!({"amount": "5000"})), '?');
    assert_eq!(eval("amount > 100", json!({"amount": null})), '?');
    assert_eq!(eval("amount > 100", json!({})), '?');
    assert_eq!(eval("amount > 100", json!({"amount": [5000]})), '?');
    assert_eq!(eval("amount > 100", json!({"amount": true})), '?');
    assert_eq!(eval("amount > 100", json!("not an object")), '?');
    assert_eq!(eval("amount > 100", json!({"amount": u64::MAX})), 'H');
}

#[test]
fn hosts() {
    let cond = r#"host(url) not in "github.com", "docs.rs""#;
    let check = |u: &str| eval(cond, json!({ "url": u }));
    assert_eq!(check("HTTPS://User:pw@GitHub.com:443/x"), '-');
    assert_eq!(check("github.com"), '-');
    assert_eq!(check("https://docs.rs./regex"), '-');
    assert_eq!(check("https://github.com.evil.com/x"), 'H');
    assert_eq!(check("https://github.com@evil.com/"), 'H');
    assert_eq!(check("https://evil.com\\@github.com/"), 'H');
    assert_eq!(check("https://git hub.com/"), '?');
    assert_eq!(check("https://github.com%2f@evil.com"), 'H');
    assert_eq!(check(""), '?');
    assert_eq!(eval(cond, json!({"url": 443})), '?');
    // Punycode and Unicode spellings are one host, on either side.
    let cond = r#"host(url) in "bücher.de""#;
    assert_eq!(
        eval(cond, json!({"url": "https://xn--bcher-kva.de/x"})),
        'H'
    );
    assert_eq!(eval(cond, json!({"url": "https://BÜCHER.de/x"})), 'H');
    let cond = r#"host(url) in "XN--BCHER-KVA.DE""#;
    assert_eq!(eval(cond, json!({"url": "https://bücher.de/x"})), 'H');
    let cond = r#"host(url) matches "*.github.com""#;
    assert_eq!(eval(cond, json!({"url": "https://api.GitHub.com/x"})), 'H');
    assert_eq!(eval(cond, json!({"url": "https://github.com/x"})), '-');
    let cond = r#"host(url) =~ "^(.+\\.)?example\\.org$""#;
    assert_eq!(eval(cond, json!({"url": "http://a.example.org:80"})), 'H');
    assert_eq!(eval(cond, json!({"url": "http://example.org.evil"})), '-');
}

#[test]
fn any_is_every_string_value() {
    let cond = r#"any =~ "AKIA[0-9A-Z]{16}""#;
    let key = "AKIAABCDEFGHIJKLMNOP";
    assert_eq!(eval(cond, json!({"a": 1, "b": {"c": ["x", key]}})), 'H');
    assert_eq!(eval(cond, json!({"a": "x", "b": [1, true, null]})), '-');
    assert_eq!(eval(cond, json!({ key: "keys are not values" })), '-');
    assert_eq!(eval(cond, json!({})), '-');
    let (letter, reference, value, problem) = witness(cond, &json!({"b": {"c": ["x", key]}}));
    assert_eq!(
        (letter, reference.as_str(), value.as_deref(), problem),
        ('H', "any", Some(key), None)
    );
}

#[test]
fn present_never_fails_to_evaluate() {
    assert_eq!(eval("present(x)", json!({"x": 0})), 'H');
    assert_eq!(eval("present(x)", json!({"x": null})), '-');
    assert_eq!(eval("present(x)", json!({})), '-');
    assert_eq!(eval("present(x.y)", json!({"x": "s"})), '-');
    assert_eq!(eval("present(x.y)", json!({"x": {"y": false}})), 'H');
    assert_eq!(eval("present(x[*].y)", json!({"x": [{}, {"y": 1}]})), 'H');
    assert_eq!(eval("present(x[*].y)", json!({"x": [{}, {}]})), '-');
    assert_eq!(eval("present(x)", json!([1])), '-');
    assert_eq!(eval("not present(x)", json!({})), 'H');
}

/// `not` keeps an unevaluable condition unevaluable, so its rule fires whatever `not` wraps;
/// `and` and `or` follow Kleene's logic.
#[test]
fn not_and_or_with_unevaluable_parts() {
    let absent = json!({});
    assert_eq!(eval("amount > 5", absent.clone()), '?');
    assert_eq!(eval("not amount > 5", absent.clone()), '?');
    assert_eq!(eval("not not amount > 5", absent.clone()), '?');
    assert_eq!(eval("not (amount > 5 or amount < 1)", absent.clone()), '?');
    assert_eq!(eval("present(amount) and amount > 5", absent.clone()), '-');
    assert_eq!(
        eval("not present(amount) or amount > 5", absent.clone()),
        'H'
    );
    assert_eq!(eval("amount > 5 or y > 5", json!({"y": 10})), 'H');
    assert_eq!(eval("amount > 5 or y > 5", json!({"y": 1})), '?');
    assert_eq!(eval("amount > 5 and y > 5", json!({"y": 1})), '-');
    assert_eq!(eval("amount > 5 and y > 5", json!({"y": 10})), '?');
    assert_eq!(eval("not (amount > 5 and y > 5)", json!({"y": 1})), 'H');
    assert_eq!(eval("x > 1 and y > 1", json!({"x": 2, "y": 2})), 'H');
    assert_eq!(eval("x > 1 or y > 1", json!({"x": 0, "y": 0})), '-');
}

#[test]
fn nested_references() {
    let cond = r#"attachments[*].name matches "*.exe""#;
    let a = |v: Json| eval(cond, json!({ "attachments": v }));
    assert_eq!(a(json!([{"name": "a.txt"}, {"name": "b.exe"}])), 'H');
    assert_eq!(a(json!([{"name": "a.txt"}, {"name": "b.pdf"}])), '-');
    assert_eq!(a(json!([{"name": "a.txt"}, {"size": 3}])), '?');
    assert_eq!(a(json!([{"size": 3}, {"name": "b.exe"}])), 'H');
    assert_eq!(a(json!([{"name": "a.txt"}, "b.exe"])), '?');
    assert_eq!(a(json!({"name": "b.exe"})), '?');
    assert_eq!(
        eval(
            r#"options.mode in "0644""#,
            json!({"options": {"mode": "0644"}})
        ),
        'H'
    );
    assert_eq!(
        eval(r#"options.mode in "0644""#, json!({"options": "0644"})),
        '?'
    );
    assert_eq!(
        eval(r#"m[*][*] in "x""#, json!({"m": [["a"], ["b", "x"]]})),
        'H'
    );
}

#[test]
fn witnesses_name_the_reference_and_the_value() {
    let cond = r#"recipients[*] not matches "*@example.com""#;
    let args = json!({"recipients": ["a@example.com", "eve@evil.com"]});
    assert_eq!(
        witness(cond, &args),
        (
            'H',
            "recipients[*]".into(),
            Some("eve@evil.com".into()),
            None
        )
    );
    assert_eq!(
        witness("amount > 100", &json!({"amount": "5000"})),
        (
            '?',
            "amount".into(),
            Some("5000".into()),
            Some(Problem::WrongType {
                expected: "a number",
                found: "a string"
            })
        )
    );
    assert_eq!(
        witness("amount > 100", &json!({})),
        ('?', "amount".into(), None, Some(Problem::Absent))
    );
    assert_eq!(
        witness(r#"host(url) in "a.com""#, &json!({"url": "https://b c"})),
        (
            '?',
            "host(url)".into(),
            Some("https://b c".into()),
            Some(Problem::NotAHost)
        )
    );
    assert_eq!(
        witness("not x > 1", &json!({"x": 0})),
        ('H', "x".into(), Some("0".into()), None)
    );
    let long = "é".repeat(1000);
    let (_, _, text, _) = witness(r#"x =~ "é""#, &json!({ "x": long }));
    let text = text.expect("a value");
    assert_eq!(text.chars().count(), 80);
    assert!(text.ends_with('…'));
    let (_, _, text, _) = witness(r#"x in "a""#, &json!({"x": {"k": "v".repeat(10_000)}}));
    let text = text.expect("a value");
    assert_eq!(text.chars().count(), 80);
    assert!(text.starts_with("{\"k\":\"vvv"));
    assert_eq!(
        Problem::TooManyElements.to_string(),
        "more than 10000 array elements"
    );
}

#[test]
fn compile_errors_are_positioned() {
    assert_eq!(
        errors(r#"q =~ "(?i)\\b(drop""#),
        [("bad-regex", "(".to_string())]
    );
    assert_eq!(
        errors(r#"q =~ "a\"b[z-a]""#),
        [("bad-regex", "z-a".to_string())]
    );
    assert_eq!(
        errors("path under \"workspace\", \"/ok\", \"/a\0b\"")
            .iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        ["relative-directory", "unmatchable-directory"]
    );
    assert_eq!(
        errors(r#"path not under "/../x""#),
        [("unmatchable-directory", "\"/../x\"".to_string())]
    );
    assert_eq!(
        errors(r#"path matches "/a//b", "ok""#),
        [("unmatchable-glob", "\"/a//b\"".to_string())]
    );
    assert_eq!(
        errors("r in context.friends, context.contacts"),
        [("undeclared-context", "context.friends".to_string())]
    );
    assert_eq!(
        errors(r#"amount > "5000""#),
        [("compare-with-string", "\"5000\"".to_string())]
    );
    assert_eq!(
        errors(r#"host("github.com") in "a""#),
        [("host-of-non-reference", "\"github.com\"".to_string())]
    );
    assert_eq!(
        errors(r#"host(any) in "a""#),
        [("host-of-non-reference", "any".to_string())]
    );
    assert_eq!(errors("any > 5"), [("operator-on-any", ">".to_string())]);
    assert_eq!(
        errors(r#"host(u) under "/a""#),
        [("operator-on-host", "under".to_string())]
    );
    assert_eq!(
        errors(r#"host(u) in "a b", 5"#),
        [
            ("bad-host", "\"a b\"".to_string()),
            ("bad-host", "5".to_string())
        ]
    );
    let huge = format!("x > 1{}", "0".repeat(400));
    assert_eq!(errors(&huge)[0].0, "bad-number");
    // Every mistake at once.
    assert_eq!(
        errors(r#"a =~ "(" or b under "rel" and c > "1""#)
            .iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        ["bad-regex", "relative-directory", "compare-with-string"]
    );
    let c = CompiledCondition::compile(&parsed(r#"q =~ "(""#), &resolve).expect_err("fails");
    assert_eq!(c[0].message(), "invalid regular expression: unclosed group");
    assert!(!c[0].help().is_empty());
}

#[test]
fn hostile_patterns_in_a_policy_are_clear_errors() {
    let regex = "a".repeat(100 * 1024);
    let e = CompiledCondition::compile(&parsed(&format!("q =~ \"{regex}\"")), &resolve)
        .expect_err("too long");
    assert_eq!(e[0].code(), "pattern-too-long");
    assert_eq!(
        e[0].message(),
        "the regular expression is 102400 bytes, over the limit of 16384 bytes"
    );
    let e = CompiledCondition::compile(&parsed(r#"q =~ "((a{100}){100}){100}""#), &resolve)
        .expect_err("too large");
    assert_eq!(e[0].code(), "bad-regex");
    assert_eq!(
        e[0].message(),
        "the regular expression is too large once compiled (over 1048576 bytes)"
    );
    // A glob of 10,000 stars compiles to one sub-expression and matches a 1 MiB string fast.
    let started = std::time::Instant::now();
    let c = compiled(&format!("p matches \"{}\"", "*".repeat(10_000)));
    let big = "a".repeat(1024 * 1024);
    let ctx = EvalContext::new("", &normalize, &[]);
    assert!(c.eval(&json!({ "p": big }), &ctx).fires());
    let c = compiled(&format!("p matches \"a{}b\"", "*".repeat(10_000)));
    assert!(!c.eval(&json!({ "p": big }), &ctx).fires());
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn hostile_arguments_stay_bounded() {
    let ctx = EvalContext::new("", &normalize, &[]);
    let started = std::time::Instant::now();
    // 1 MiB strings, through every operator.
    let big = format!("/workspace/{}", "a".repeat(1024 * 1024));
    for (cond, expect) in [
        (r#"p not under "/workspace""#, '-'),
        (r#"p =~ "b""#, '-'),
        (r#"p matches "**/*.pem""#, '-'),
        (r#"host(p) in "x""#, '?'),
        (r#"p in query"#, '-'),
        (r#"any =~ "AKIA[0-9A-Z]{16}""#, '-'),
    ] {
        assert_eq!(
            eval_with(cond, &json!({ "p": big }), "q", &[]),
            expect,
            "{cond}"
        );
    }
    // A 100,000-element array: past the cap, so the rule fires, for `[*]` and for `any`.
    let many: Vec<Json> = (0..100_000)
        .map(|i| json!(format!("a{i}@example.com")))
        .collect();
    let args = json!({ "to": many });
    let c = compiled(r#"to[*] not matches "*@example.com""#);
    let out = c.eval(&args, &ctx);
    assert_eq!(
        out.witness().and_then(|w| w.problem()),
        Some(Problem::TooManyElements)
    );
    let c = compiled(r#"any =~ "evil""#);
    let out = c.eval(&args, &ctx);
    assert_eq!(
        out.witness().and_then(|w| w.problem()),
        Some(Problem::TooManyValues)
    );
    // Exactly at the cap is evaluated.
    let at_cap: Vec<Json> = (0..limits::MAX_RULE_ELEMENTS)
        .map(|_| json!("a@example.com"))
        .collect();
    let c = compiled(r#"to[*] not matches "*@example.com""#);
    assert!(!c.eval(&json!({ "to": at_cap }), &ctx).fires());
    // Nesting: 64 levels are read, deeper is unevaluable for `any`.
    let nest = |depth: usize| {
        let mut v = json!("AKIA");
        for _ in 0..depth {
            v = Json::Array(vec![v]);
        }
        let mut top = serde_json::Map::new();
        top.insert("x".to_string(), v);
        Json::Object(top)
    };
    let c = compiled(r#"any =~ "^AKIA$""#);
    assert!(matches!(c.eval(&nest(62), &ctx), Outcome::Holds(_)));
    let deep = nest(64);
    let out = c.eval(&deep, &ctx);
    assert_eq!(
        out.witness().and_then(|w| w.problem()),
        Some(Problem::TooDeep)
    );
    // Deeper than serde_json would parse (built in memory), without recursing past the cap.
    let deep = nest(10_000);
    assert!(c.eval(&deep, &ctx).fires());
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    // Dropping a 10,000-deep value recurses in serde_json; keep it off this thread's stack.
    std::mem::forget(deep);
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn json_value() -> impl Strategy<Value = Json> {
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |x| x.is_finite())
                .prop_map(|x| json!(x)),
            ".*".prop_map(Json::String),
            "(/|\\.\\.|\\.|a|b|//|@|:|\\[|\\]|%|xn--|ü)*".prop_map(Json::String),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Json::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("path".to_string()),
                        Just("url".to_string()),
                        Just("to".to_string()),
                        Just("amount".to_string()),
                        Just("name".to_string()),
                        "[a-z]{1,3}"
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Json::Object(m.into_iter().collect())),
            ]
        })
    }

    /// One condition of every kind.
    fn every_kind() -> Vec<CompiledCondition> {
        [
            r#"path not under "/workspace", "/tmp/scratch""#,
            r#"path matches "**/.env", "**/*.pem", "**/.git/**""#,
            "to not in context.contacts, query",
            "amount > 100 and amount != 5",
            r#"host(url) not in "github.com", "bücher.de""#,
            r#"host(url) matches "*.example.com""#,
            r#"to[*].name !~ "^[a-z]+$""#,
            r#"any =~ "AKIA[0-9A-Z]{16}""#,
            "not present(name) or name in 1, \"x\"",
            r#"not (to[*] matches "*@example.com" or amount <= 0)"#,
        ]
        .iter()
        .map(|c| compiled(c))
        .collect()
    }

    proptest! {
        #[test]
        fn eval_never_panics_on_arbitrary_arguments(args in json_value(), query in ".*") {
            let contacts = ContextSet::new(["a"]);
            let sets = [Some(&contacts)];
            let ctx = EvalContext::new(&query, &normalize, &sets);
            for c in every_kind() {
                let out = c.eval(&args, &ctx);
                if let Some(w) = out.witness() {
                    let _ = w.value_text();
                }
            }
        }

        #[test]
        fn eval_never_panics_on_arbitrary_strings(s in ".*") {
            let ctx = EvalContext::new(&s, &normalize, &[]);
            for c in every_kind() {
                for key in ["path", "url", "to", "amount", "name"] {
                    let _ = c.eval(&json!({ key: s.clone() }), &ctx);
                }
            }
        }

        #[test]
        fn compile_never_panics_on_arbitrary_literals(s in ".*") {
            let quoted: String = s
                .chars()
                .filter(|c| *c != '\n')
                .flat_map(|c| match c {
                    '"' => vec!['\\', '"'],
                    '\\' => vec!['\\', '\\'],
                    c => vec![c],
                })
                .collect();
            for op in ["under", "matches", "=~", "in"] {
                for operand in ["x", "host(x)"] {
                    let text = format!("rules {{ deny when {operand} {op} \"{quoted}\" }}");
                    let (tree, _) = parse_file(&text, FileId(0));
                    if let Some(Decl::Rules(r)) = tree.decls.first() {
                        if let Some(rule) = r.rules.first() {
                            let _ = CompiledCondition::compile(&rule.condition, &resolve);
                        }
                    }
                }
            }
        }
    }
}
