//! Stage `arguments` of `check_call`: the argument rules of the language example, fail-closed
//! cases, deny over confirm, the confirm path through a pending call, `context` sets and
//! `in query`.

use serde_json::{json, Value};
use toolwarden::{
    Decision, FiredRule, Intent, Policy, Request, RequestError, Stage, Turn, Verdict,
};

const HEADER: &str = r#"policy "p" version 1
effects none, write, export, execute
intents read
fallback read
matrix m {
  none write export execute
  read allow allow allow allow
}
mode m { matrix m }
confirm fields "confirmed"
"#;

/// The language's own example, exactly as written there.
const EXAMPLE: &str = include_str!("fixtures/rules/language_example.warden");

fn policy() -> Policy {
    Policy::parse(&format!("{HEADER}{EXAMPLE}"), "p.warden").expect("the example loads")
}

fn request() -> Request {
    Request::new("m").context("contacts", ["alice"])
}

fn call(p: &Policy, request: &Request, intent: &Intent, tool: &str, args: Value) -> Verdict {
    p.check_call_strict(request, intent, &mut Turn::new(), tool, &args, None)
        .expect("request fits")
}

fn judge(tool: &str, args: Value) -> Verdict {
    let p = policy();
    call(&p, &request(), &Intent::named("read"), tool, args)
}

fn fired(source: &str, outcome: &'static str, reference: &str, value: Option<&str>) -> FiredRule {
    FiredRule {
        source: source.to_string(),
        outcome,
        reference: reference.to_string(),
        value: value.map(str::to_string),
        problem: None,
    }
}

#[test]
fn write_file_rules() {
    let v = judge("write_file", json!({"path": "/workspace/src/main.rs"}));
    assert_eq!(v.decision, Decision::Allow);
    assert!(v.rules.is_empty());

    let v = judge("write_file", json!({"path": "/etc/passwd"}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Arguments));
    assert_eq!(v.source.as_deref(), Some("p.warden:15:3"));
    assert_eq!(
        v.reason,
        "`write_file` is denied by the argument rule at p.warden:15:3 on `path` = `/etc/passwd`"
    );
    assert_eq!(
        v.rules,
        [fired("p.warden:15:3", "deny", "path", Some("/etc/passwd"))]
    );

    let v = judge("write_file", json!({"path": "/workspace/app/.env"}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some("p.warden:16:3"));
    assert_eq!(
        v.rules,
        [fired(
            "p.warden:16:3",
            "deny",
            "path",
            Some("/workspace/app/.env")
        )]
    );

    // Climbing out with `..` is never under anything.
    let v = judge("write_file", json!({"path": "/workspace/../etc/passwd"}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some("p.warden:15:3"));
}

#[test]
fn send_money_rules_and_deny_over_confirm() {
    let v = judge("send_money", json!({"recipient": "alice", "amount": 50}));
    assert_eq!(v.decision, Decision::Allow);
    assert!(v.rules.is_empty());

    let v = judge("send_money", json!({"recipient": "alice", "amount": 500}));
    assert_eq!(v.decision, Decision::Confirm);
    assert_eq!(v.stage, Some(Stage::Arguments));
    assert_eq!(v.source.as_deref(), Some("p.warden:21:3"));
    assert_eq!(
        v.reason,
        "`send_money` needs confirmation: ask the user, then repeat the call with `confirmed` set to true (the argument rule at p.warden:21:3 on `amount` = `500`)"
    );
    assert!(v.pending.is_some());

    // Both confirm rules and the deny rule fire: the deny wins, every fired rule is listed.
    let v = judge(
        "send_money",
        json!({"recipient": "mallory", "amount": 20000}),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Arguments));
    assert_eq!(v.source.as_deref(), Some("p.warden:22:3"));
    assert!(v.pending.is_none());
    assert_eq!(
        v.rules,
        [
            FiredRule {
                problem: Some("the user's query is not known".to_string()),
                ..fired("p.warden:20:3", "confirm", "recipient", Some("mallory"))
            },
            fired("p.warden:21:3", "confirm", "amount", Some("20000")),
            fired("p.warden:22:3", "deny", "amount", Some("20000")),
        ]
    );
}

#[test]
fn fail_closed_on_absent_string_and_array() {
    // Absent: every rule on `amount` fires, the deny wins.
    let v = judge("send_money", json!({"recipient": "alice"}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some("p.warden:22:3"));
    assert_eq!(v.rules.len(), 2);
    assert_eq!(v.rules[1].reference, "amount");
    assert_eq!(v.rules[1].value, None);
    assert_eq!(
        v.rules[1].problem.as_deref(),
        Some("the argument is absent")
    );

    // The string "5000" is not a number.
    let v = judge(
        "send_money",
        json!({"recipient": "alice", "amount": "5000"}),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.rules[1].value.as_deref(), Some("5000"));
    assert_eq!(
        v.rules[1].problem.as_deref(),
        Some("expected a number, found a string")
    );

    // An array where one value is expected.
    let v = judge("write_file", json!({"path": ["/workspace/a"]}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some("p.warden:15:3"));
    assert_eq!(v.rules[0].value.as_deref(), Some("[\"/workspace/a\"]"));
}

#[test]
fn send_email_fetch_url_run_sql_match_and_global_rules() {
    let v = judge(
        "send_email",
        json!({"recipients": ["a@example.com", "b@example.com"]}),
    );
    assert_eq!(v.decision, Decision::Allow);
    let v = judge(
        "send_email",
        json!({"recipients": ["a@example.com", "eve@evil.test"]}),
    );
    assert_eq!(v.decision, Decision::Confirm);
    assert_eq!(
        v.rules,
        [fired(
            "p.warden:26:3",
            "confirm",
            "recipients[*]",
            Some("eve@evil.test")
        )]
    );

    let v = judge(
        "fetch_url",
        json!({"url": "https://GitHub.com:443/rust-lang"}),
    );
    assert_eq!(v.decision, Decision::Allow);
    let v = judge("fetch_url", json!({"url": "https://evil.test/x"}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(
        v.rules,
        [fired(
            "p.warden:30:3",
            "deny",
            "host(url)",
            Some("https://evil.test/x")
        )]
    );

    let v = judge("run_sql", json!({"query": "select * from t"}));
    assert_eq!(v.decision, Decision::Allow);
    let v = judge("run_sql", json!({"query": "DROP TABLE t"}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some("p.warden:32:32"));

    let v = judge("mcp__github__create_issue", json!({"owner": "acme"}));
    assert_eq!(v.decision, Decision::Allow);
    let v = judge("mcp__github__create_issue", json!({"owner": "other"}));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.source.as_deref(), Some("p.warden:33:40"));

    // The global rule applies to every tool, to any string anywhere.
    let v = judge(
        "fetch_url",
        json!({"url": "https://docs.rs", "h": {"k": ["AKIAABCDEFGHIJKLMNOP"]}}),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(
        v.rules,
        [fired(
            "p.warden:36:3",
            "deny",
            "any",
            Some("AKIAABCDEFGHIJKLMNOP")
        )]
    );
}

#[test]
fn a_confirm_rule_makes_a_pending_call_that_confirmed_with_the_same_args_is_allowed() {
    let p = policy();
    let r = request();
    let intent = Intent::named("read");
    let mut turn = Turn::new();
    let args = json!({"recipient": "alice", "amount": 500});
    let v = p
        .check_call_strict(&r, &intent, &mut turn, "send_money", &args, None)
        .expect("fits");
    assert_eq!(v.decision, Decision::Confirm);
    let held = v.pending.expect("a pending call");
    assert_eq!(held.args, *args.as_object().expect("object"));

    let confirmed = json!({"recipient": "alice", "amount": 500, "confirmed": true});
    let v = p
        .check_call_strict(
            &r,
            &intent,
            &mut turn,
            "send_money",
            &confirmed,
            Some(&held),
        )
        .expect("fits");
    assert_eq!(v.decision, Decision::Allow);
    assert!(v.confirmation_received);

    // Other arguments are another call.
    let other = json!({"recipient": "alice", "amount": 501, "confirmed": true});
    let v = p
        .check_call_strict(&r, &intent, &mut turn, "send_money", &other, Some(&held))
        .expect("fits");
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Confirmation));

    // A confirmation with no pending call is refused under strict mode.
    let v = p
        .check_call_strict(&r, &intent, &mut turn, "send_money", &confirmed, None)
        .expect("fits");
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Confirmation));
}

#[test]
fn context_supplied_not_supplied_and_undeclared() {
    let p = policy();
    let intent = Intent::named("read");
    let args = json!({"recipient": "bob", "amount": 10});
    let with_bob = Request::new("m").context("contacts", ["alice", "bob"]);
    assert_eq!(
        call(&p, &with_bob, &intent, "send_money", args.clone()).decision,
        Decision::Allow
    );
    // The empty set: bob is not in it.
    let empty = Request::new("m").context("contacts", Vec::<String>::new());
    let v = call(
        &p,
        &empty,
        &p.classify("pay carol"),
        "send_money",
        args.clone(),
    );
    assert_eq!(v.decision, Decision::Confirm);
    assert_eq!(
        v.rules,
        [fired("p.warden:20:3", "confirm", "recipient", Some("bob"))]
    );
    // Not supplied: fail closed.
    let v = call(&p, &Request::new("m"), &intent, "send_money", args.clone());
    assert_eq!(v.decision, Decision::Confirm);
    assert_eq!(
        v.rules[0].problem.as_deref(),
        Some("the request did not supply the set")
    );
    // Undeclared.
    let err = p
        .check_call(
            &Request::new("m").context("friends", ["bob"]),
            &intent,
            &mut Turn::new(),
            "send_money",
            &args,
        )
        .expect_err("undeclared set");
    assert_eq!(
        err,
        RequestError::UnknownContext {
            name: "friends".to_string(),
            known: "`contacts`, `own_accounts`".to_string(),
        }
    );
}

#[test]
fn in_query_reads_the_users_query() {
    let p = policy();
    let r = Request::new("m").context("contacts", Vec::<String>::new());
    let args = json!({"recipient": "Bob Smith", "amount": 10});
    let asked = p.classify("please pay bob smith ten dollars");
    assert_eq!(
        call(&p, &r, &asked, "send_money", args.clone()).decision,
        Decision::Allow
    );
    let other = p.classify("please pay carol");
    let v = call(&p, &r, &other, "send_money", args.clone());
    assert_eq!(v.decision, Decision::Confirm);
    assert_eq!(
        v.rules,
        [fired(
            "p.warden:20:3",
            "confirm",
            "recipient",
            Some("Bob Smith")
        )]
    );
    // An intent given by name has no query: `in query` cannot be evaluated, the rule fires.
    let v = call(&p, &r, &Intent::named("read"), "send_money", args);
    assert_eq!(v.decision, Decision::Confirm);
    assert_eq!(
        v.rules[0].problem.as_deref(),
        Some("the user's query is not known")
    );
}

#[test]
fn verdict_json_lists_the_fired_rules() {
    let v = judge("write_file", json!({"path": "/etc/passwd"}));
    let j = v.to_json();
    assert_eq!(j["metadata"]["stage"], "arguments");
    assert_eq!(
        j["rules"],
        json!([{"source": "p.warden:15:3", "outcome": "deny", "reference": "path", "value": "/etc/passwd", "problem": null}])
    );
    let allowed = judge("write_file", json!({"path": "/workspace/a"})).to_json();
    assert!(allowed.get("rules").is_none());
}

#[test]
fn checker_reports_undeclared_context_and_duplicates() {
    let text = format!("{HEADER}context contacts, contacts\ntool t {{ effect none  deny when x in context.contact }}\n");
    let err = Policy::parse(&text, "p.warden").expect_err("refused");
    let got: Vec<(String, Option<String>)> = err
        .diagnostics()
        .iter()
        .map(|d| (d.code().to_string(), d.help_text().map(str::to_string)))
        .collect();
    assert_eq!(
        got,
        [
            (
                "duplicate".to_string(),
                Some(
                    "rename one of them or delete the second declaration of `contacts`".to_string()
                )
            ),
            (
                "undeclared-context".to_string(),
                Some(
                    "did you mean `context.contacts`? or declare it: `context contact`".to_string()
                )
            ),
        ]
    );
    let span = err.diagnostics()[1].span().expect("positioned");
    assert_eq!(err.sources().slice(span), "context.contact");
}
