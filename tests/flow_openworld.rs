//! `taint openworld L1, L2`: an MCP tool whose `openWorldHint` is true or missing puts these
//! labels on the session, besides its own `taints`; the hint never removes one. The checker's
//! diagnostics, `fmt`'s round trip, [`Policy::call_labels`] and [`Session::record_mcp`].

use serde_json::json;
use toolwarden::{Decision, Policy, Request, Session, Severity, Stage};

const POLICY: &str = r#"policy "ow" version 1
effects none, export
mode m { }
confirm fields "confirmed"
labels untrusted, private
taint openworld untrusted
tool fetch { effect none }
tool read_inbox { effect none  taints private }
tool post { effect export }
after untrusted { deny export }
"#;

fn policy() -> Policy {
    Policy::parse(POLICY, "ow.warden").expect("the policy loads")
}

/// Each error as `(code, message, help, file:line:col)`.
fn errors(text: &str) -> Vec<(String, String, String, String)> {
    let err = Policy::parse(text, "ow.warden").unwrap_err();
    err.diagnostics()
        .iter()
        .filter(|d| d.severity() == Severity::Error)
        .map(|d| {
            (
                d.code().to_string(),
                d.message().to_string(),
                d.help_text().unwrap_or("").to_string(),
                d.span()
                    .map(|s| err.sources().location(s).to_string())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn call_labels_add_openworld_labels_to_the_tools_own_taints() {
    let p = policy();
    assert_eq!(p.openworld_labels(), vec!["untrusted"]);
    assert_eq!(p.call_labels("fetch", true), vec!["untrusted"]);
    assert_eq!(p.call_labels("fetch", false), Vec::<&str>::new());
    // The hint only adds: a closed-world tool keeps its own taints.
    assert_eq!(p.call_labels("read_inbox", false), vec!["private"]);
    assert_eq!(
        p.call_labels("read_inbox", true),
        vec!["untrusted", "private"]
    );
    // A tool the policy does not declare still reads the open world.
    assert_eq!(p.call_labels("unknown_tool", true), vec!["untrusted"]);
}

#[test]
fn without_the_statement_the_hint_adds_nothing() {
    let p = Policy::parse(
        "policy \"p\"\neffects none\nmode m { }\nlabels untrusted\ntool fetch { effect none }\n",
        "p.warden",
    )
    .unwrap();
    assert!(p.openworld_labels().is_empty());
    assert!(p.call_labels("fetch", true).is_empty());
}

#[test]
fn record_mcp_taints_the_session_and_the_export_is_denied_at_flow() {
    let p = policy();
    let (request, intent) = (Request::new("m"), p.fallback_intent());
    let mut session = Session::new();
    assert_eq!(
        session.record_mcp(&p, "fetch", false).unwrap(),
        Vec::<String>::new()
    );
    let v = p
        .check_call_session(&request, &intent, &mut session, "post", &json!({}))
        .unwrap();
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(
        session.record_mcp(&p, "fetch", true).unwrap(),
        vec!["untrusted".to_string()]
    );
    // Recorded again: nothing new.
    assert_eq!(
        session.record_mcp(&p, "fetch", true).unwrap(),
        Vec::<String>::new()
    );
    let sources: Vec<(&str, &str, u32)> = session
        .labels()
        .iter()
        .map(|l| (l.label.as_str(), l.tool.as_str(), l.turn))
        .collect();
    assert_eq!(sources, vec![("untrusted", "fetch", 1)]);
    let v = p
        .check_call_session(&request, &intent, &mut session, "post", &json!({}))
        .unwrap();
    assert_eq!((v.decision, v.stage), (Decision::Deny, Some(Stage::Flow)));
    assert_eq!(
        v.reason,
        "`post` is denied: the session read untrusted content from fetch in turn 1, and `after untrusted` denies effect `export`"
    );
}

#[test]
fn record_mcp_refuses_a_session_of_another_policy_and_changes_nothing() {
    let p = policy();
    let other = Policy::parse(
        "policy \"other\"\neffects none\nmode m { }\nlabels untrusted\ntaint openworld untrusted\n",
        "o.warden",
    )
    .unwrap();
    let mut session = Session::new();
    session.record_mcp(&other, "x", true).unwrap();
    let before = session.clone();
    let err = session.record_mcp(&p, "fetch", true).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the session belongs to policy `other` version none, not `ow` version 1; start a new session"
    );
    assert_eq!(session, before);
}

#[test]
fn an_undeclared_label_is_a_positioned_error_with_help() {
    let got = errors(
        "policy \"p\"\neffects none\nmode m { }\nlabels untrusted, private\n\
         taint openworld untrustd, private\n",
    );
    assert_eq!(
        got,
        vec![(
            "undefined-label".to_string(),
            "undefined label `untrustd`".to_string(),
            "did you mean `untrusted`?".to_string(),
            "ow.warden:5:17".to_string(),
        )]
    );
    let got = errors("policy \"p\"\neffects none\nmode m { }\ntaint openworld web\n");
    assert_eq!(
        got,
        vec![(
            "undefined-label".to_string(),
            "undefined label `web`".to_string(),
            "declare it: `labels web`".to_string(),
            "ow.warden:4:17".to_string(),
        )]
    );
}

#[test]
fn the_statement_is_declared_once() {
    let got = errors(
        "policy \"p\"\neffects none\nmode m { }\nlabels untrusted, private\n\
         taint openworld untrusted\ntaint openworld private\n",
    );
    assert_eq!(
        got,
        vec![(
            "duplicate".to_string(),
            "`taint openworld` is declared twice".to_string(),
            "keep one `taint openworld` declaration and delete the other".to_string(),
            "ow.warden:6:1".to_string(),
        )]
    );
}

#[test]
fn a_missing_label_list_is_a_parse_error() {
    let err = Policy::parse(
        "policy \"p\"\neffects none\nmode m { }\nlabels a\ntaint openworld\n",
        "ow.warden",
    )
    .unwrap_err();
    assert_eq!(err.diagnostics()[0].code(), "syntax");
}

#[test]
fn fmt_writes_the_statement_and_round_trips() {
    let messy = POLICY.replace(
        "taint openworld untrusted",
        "taint   openworld   untrusted ,private   # web pages",
    );
    let formatted = toolwarden::fmt::format_source(&messy, "ow.warden").unwrap();
    assert!(
        formatted.contains("taint openworld untrusted, private  # web pages\n"),
        "{formatted}"
    );
    assert_eq!(
        toolwarden::fmt::format_source(&formatted, "ow.warden").unwrap(),
        formatted
    );
    let p = Policy::parse(&formatted, "ow.warden").unwrap();
    assert_eq!(p.openworld_labels(), vec!["untrusted", "private"]);
}
