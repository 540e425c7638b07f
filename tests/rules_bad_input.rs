//! Bad input for argument rules, end to end through `Policy::parse` and `check_call`: arguments
//! of 1 MiB, arrays of 100,000 elements, arguments nested to the depth limit and past it, a
//! `context` set of 100,000 values, and in a policy a regular expression of 100 KB and globs of
//! 10,000 `*`. Each gives a clear error or a fired rule with its reason, never a panic; the
//! tests assert the outcomes (the time each takes is printed with `--nocapture`, not asserted:
//! speed is measured in `benches/conditions.rs`, group `hostile`).

use std::time::Instant;

use serde_json::{json, Value};
use toolwarden::{Decision, FiredRule, Intent, Policy, Request, Stage, Turn, Verdict};

const FIXTURE: &str = "tests/fixtures/rules/every_rule.warden";

fn policy() -> Policy {
    Policy::from_file(FIXTURE).unwrap_or_else(|e| panic!("{}", e.render()))
}

/// `file:line:col` of the rule whose line holds `text` in the fixture.
fn at(text: &str) -> String {
    let src = std::fs::read_to_string(FIXTURE).expect("fixture");
    let (i, line) = src
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(text))
        .unwrap_or_else(|| panic!("no rule `{text}`"));
    let col = line.find(|c: char| c != ' ').unwrap_or(0) + 1;
    let col = if line.trim_start().starts_with("tool") {
        line.find("deny").unwrap_or(0) + 1
    } else {
        col
    };
    format!("{FIXTURE}:{}:{col}", i + 1)
}

fn judge(p: &Policy, tool: &str, args: &Value) -> Verdict {
    let request = Request::new("m")
        .context("contacts", ["alice"])
        .context("hosts", ["example.org"]);
    let intent = p.classify("pay alice");
    let started = Instant::now();
    let v = p
        .check_call(&request, &intent, &mut Turn::new(), tool, args)
        .expect("request fits");
    eprintln!("{tool}: {:?} in {:?}", v.decision, started.elapsed());
    v
}

fn fired(
    source: String,
    outcome: &'static str,
    reference: &str,
    value: Option<&str>,
    problem: Option<&str>,
) -> FiredRule {
    FiredRule {
        source,
        outcome,
        reference: reference.to_string(),
        value: value.map(str::to_string),
        problem: problem.map(str::to_string),
    }
}

const MIB: usize = 1024 * 1024;

#[test]
fn arguments_of_one_mib_are_judged_and_reasons_cut_their_values() {
    let p = policy();
    let long = "a".repeat(MIB);

    let args = json!({ "path": format!("/workspace/{long}") });
    let v = judge(&p, "write_file", &args);
    assert_eq!((v.decision, v.rules.len()), (Decision::Allow, 0));

    let v = judge(&p, "write_file", &json!({ "path": format!("/srv/{long}") }));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Arguments));
    let cut = format!("/srv/{}…", "a".repeat(74));
    assert_eq!(
        v.rules,
        [fired(
            at("path not under"),
            "deny",
            "path",
            Some(&cut),
            None
        )]
    );
    assert_eq!(
        v.reason,
        format!(
            "`write_file` is denied by the argument rule at {} on `path` = `{cut}`",
            at("path not under")
        )
    );

    // A statement whose forbidden word comes after 1 MiB.
    let sql = format!("select {long} from t; drop table t");
    let v = judge(&p, "run_sql", &json!({ "query": sql }));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some(at("(drop|truncate)").as_str()));

    // A URL with a 1 MiB host: no host can be read (past the authority's cap), so it fires.
    let v = judge(
        &p,
        "fetch_url",
        &json!({ "url": format!("https://{long}.com/") }),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.rules[0].source, at("host(url) not in"));
    assert_eq!(
        v.rules[0].problem.as_deref(),
        Some("no host can be read from the value")
    );

    // `any` reads a 1 MiB string anywhere: the key is found at its end.
    let v = judge(
        &p,
        "send_money",
        &json!({"recipient": "alice", "amount": 5, "currency": "EUR",
                "memo": format!("{long} AKIAABCDEFGHIJKLMNOP")}),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some(at("AKIA[0-9A-Z]").as_str()));
}

#[test]
fn arrays_of_100000_elements_fire_the_rules_that_read_them() {
    let p = policy();
    let to: Vec<Value> = (0..100_000)
        .map(|i| json!(format!("a{i}@example.com")))
        .collect();
    let args = json!({
        "to": to,
        "attachments": [],
        "options": {"cc": "team@example.com", "priority": 3},
    });
    let v = judge(&p, "send_email", &args);
    // `to[*]` has more elements than it reads, and `any` more values than it reads: both fire,
    // and the `deny` of `any` wins.
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Arguments));
    let outcomes: Vec<(&str, &str, &str, Option<&str>)> = v
        .rules
        .iter()
        .map(|r| {
            (
                r.source.rsplit(".warden:").next().unwrap_or(""),
                r.outcome,
                r.reference.as_str(),
                r.problem.as_deref(),
            )
        })
        .collect();
    let line_col = |s: String| s.rsplit(".warden:").next().unwrap_or("").to_string();
    assert_eq!(
        outcomes,
        [
            (
                line_col(at("to[*] not matches")).as_str(),
                "confirm",
                "to[*]",
                Some("more than 10000 array elements")
            ),
            (
                line_col(at("AKIA[0-9A-Z]")).as_str(),
                "deny",
                "any",
                Some("more than 100000 values")
            ),
            (
                line_col(at("any under")).as_str(),
                "deny",
                "any",
                Some("more than 100000 values")
            ),
            (
                line_col(at("any matches")).as_str(),
                "confirm",
                "any",
                Some("more than 100000 values")
            ),
        ]
    );

    // At the cap of 10,000 elements every one is read: all are allowed addresses.
    let to: Vec<Value> = (0..10_000)
        .map(|i| json!(format!("a{i}@example.com")))
        .collect();
    let args = json!({
        "to": to,
        "attachments": [],
        "options": {"cc": "team@example.com", "priority": 3},
    });
    let v = judge(&p, "send_email", &args);
    assert_eq!((v.decision, v.rules.len()), (Decision::Allow, 0));
}

/// `{"x": [[…["AKIA…"]…]]}` with `arrays` arrays: the string is `arrays + 1` levels deep.
fn nested(arrays: usize) -> Value {
    let mut v = json!("AKIAABCDEFGHIJKLMNOP");
    for _ in 0..arrays {
        v = Value::Array(vec![v]);
    }
    json!({ "x": v })
}

#[test]
fn nesting_to_the_limit_is_judged_and_past_it_is_refused() {
    let p = policy();
    // 64 levels below the arguments object: read by `any`, which finds the key.
    let v = judge(&p, "not_declared", &nested(63));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Arguments));
    assert_eq!(v.source.as_deref(), Some(at("AKIA[0-9A-Z]").as_str()));
    assert_eq!(v.rules[0].value.as_deref(), Some("AKIAABCDEFGHIJKLMNOP"));
    // 65 levels: refused before any rule runs.
    let v = judge(&p, "not_declared", &nested(64));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Requires));
    assert_eq!(
        v.reason,
        "arguments of `not_declared` are nested deeper than 64 levels"
    );
    assert!(v.rules.is_empty());
}

#[test]
fn a_context_set_of_100000_values_is_searched() {
    let p = policy();
    let contacts: Vec<String> = (0..100_000).map(|i| format!("payee-{i}")).collect();
    let request = Request::new("m")
        .context("contacts", contacts)
        .context("hosts", Vec::<String>::new());
    let intent = Intent::named("write");
    let call = |recipient: &str| {
        p.check_call(
            &request,
            &intent,
            &mut Turn::new(),
            "send_money",
            &json!({"recipient": recipient, "amount": 5, "currency": "EUR"}),
        )
        .expect("fits")
    };
    assert_eq!(call("payee-99999").decision, Decision::Allow);
    // Not in the set, and no query to name it: the rule fires.
    let v = call("payee-100000");
    assert_eq!(v.decision, Decision::Confirm);
    assert_eq!(v.rules[0].source, at("recipient not in"));
}

/// A one-tool policy whose rule is `rule`.
fn one_rule(rule: &str) -> Result<Policy, toolwarden::PolicyError> {
    let text = format!(
        "policy \"p\"\neffects none\nintents read\nfallback read\nmode m {{ }}\n\
         tool t {{\n  effect none\n  {rule}\n}}\n"
    );
    Policy::parse(&text, "p.warden")
}

#[test]
fn a_regex_of_100_kb_is_a_positioned_error() {
    let started = Instant::now();
    let regex = "a".repeat(100 * 1024);
    let err = one_rule(&format!("deny when q =~ \"{regex}\"")).expect_err("refused");
    eprintln!("100 KB regex refused in {:?}", started.elapsed());
    let d = &err.diagnostics()[0];
    assert_eq!(d.code(), "pattern-too-long");
    assert_eq!(
        d.message(),
        "the regular expression is 102400 bytes, over the limit of 16384 bytes"
    );
    let span = d.span().expect("positioned");
    assert_eq!(err.sources().slice(span), format!("\"{regex}\""));
    assert!(d.help_text().is_some());
    // A short one that is too large once compiled.
    let err = one_rule(r#"deny when q =~ "((a{100}){100}){100}""#).expect_err("refused");
    assert_eq!(err.diagnostics()[0].code(), "bad-regex");
}

#[test]
fn globs_of_10000_stars_load_and_decide() {
    let started = Instant::now();
    let stars = "*".repeat(10_000);
    let p = one_rule(&format!("deny when p matches \"{stars}\"")).expect("loads");
    let big = "a".repeat(MIB);
    let v = p
        .check_call(
            &Request::new("m"),
            &Intent::named("read"),
            &mut Turn::new(),
            "t",
            &json!({ "p": big }),
        )
        .expect("fits");
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some("p.warden:8:3"));

    let p = one_rule(&format!("deny when p matches \"a{stars}b\"")).expect("loads");
    let v = p
        .check_call(
            &Request::new("m"),
            &Intent::named("read"),
            &mut Turn::new(),
            "t",
            &json!({ "p": big }),
        )
        .expect("fits");
    assert_eq!(v.decision, Decision::Allow);
    eprintln!("10,000-star globs on 1 MiB: {:?}", started.elapsed());

    // Past the pattern limit, a glob is refused like a regular expression.
    let err =
        one_rule(&format!("deny when p matches \"{}\"", "*".repeat(20_000))).expect_err("refused");
    assert_eq!(err.diagnostics()[0].code(), "pattern-too-long");
    assert_eq!(
        err.diagnostics()[0].message(),
        "the glob is 20000 bytes, over the limit of 16384 bytes"
    );
}
