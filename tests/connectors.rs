//! Seed 000 (connector allowlists) on `policies/connectors.warden`: tier precedence
//! task > session > project, `None` (tier unset) vs `[]` (zero connectors), `mcp__<server>__<tool>`
//! name parsing (split on `__` into at most three parts), malformed names and built-in names out
//! of scope, the exact blocked message, and enforcement at execution for names never offered.

use serde_json::json;
use toolwarden::{Decision, Policy, Request, RequestError, Stage, Turn};

const POLICY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/connectors.warden");

fn load() -> Policy {
    Policy::from_file(POLICY).unwrap_or_else(|e| panic!("{}", e.render()))
}

/// A tier's allowlist as a request may set it: `None` = unset, `Some(&[])` = zero connectors.
type Tier = Option<&'static [&'static str]>;

fn request(task: Tier, session: Tier, project: Tier) -> Request {
    let mut r = Request::new("chat");
    for (name, tier) in [("task", task), ("session", session), ("project", project)] {
        if let Some(servers) = tier {
            r = r.connectors(name, servers.iter().copied());
        }
    }
    r
}

const NONE: Tier = None;
const EMPTY: Tier = Some(&[]);
const GITHUB: Tier = Some(&["github"]);
const MAIL: Tier = Some(&["mail"]);
const BOTH: Tier = Some(&["github", "mail"]);

/// (task, session, project, the deciding tier or `None` for unrestricted, github allowed?,
/// mail allowed?)
type Resolution = (Tier, Tier, Tier, Option<&'static str>, bool, bool);

#[rustfmt::skip]
const RESOLUTION: &[Resolution] = &[
    // No tier set: unrestricted.
    (NONE,   NONE,   NONE,   None,            true,  true),
    // One tier set.
    (GITHUB, NONE,   NONE,   Some("task"),    true,  false),
    (NONE,   GITHUB, NONE,   Some("session"), true,  false),
    (NONE,   NONE,   GITHUB, Some("project"), true,  false),
    // [] is zero connectors at every tier, never unrestricted.
    (EMPTY,  NONE,   NONE,   Some("task"),    false, false),
    (NONE,   EMPTY,  NONE,   Some("session"), false, false),
    (NONE,   NONE,   EMPTY,  Some("project"), false, false),
    // Precedence: the first tier set decides, whatever the lower tiers say.
    (MAIL,   GITHUB, NONE,   Some("task"),    false, true),   // task wins over session
    (GITHUB, MAIL,   BOTH,   Some("task"),    true,  false),
    (NONE,   MAIL,   GITHUB, Some("session"), false, true),   // session wins over project
    (NONE,   GITHUB, BOTH,   Some("session"), true,  false),  // ...even when narrower
    (NONE,   BOTH,   EMPTY,  Some("session"), true,  true),   // ...or wider
    // A higher [] is not "unset": it still decides (zero connectors).
    (EMPTY,  BOTH,   BOTH,   Some("task"),    false, false),
    (NONE,   EMPTY,  BOTH,   Some("session"), false, false),
    // An unset higher tier falls through to a lower one.
    (NONE,   NONE,   BOTH,   Some("project"), true,  true),
];

#[test]
fn the_first_tier_set_decides_and_an_empty_list_allows_zero_connectors() {
    let policy = load();
    // connectors.warden declares no intents: its mode has no matrix, so any intent passes.
    let intent = policy.fallback_intent();
    for (i, &(task, session, project, tier, github, mail)) in RESOLUTION.iter().enumerate() {
        let req = request(task, session, project);
        for (tool, server, allowed) in [
            ("mcp__github__create_issue", "github", github),
            ("mcp__mail__send", "mail", mail),
        ] {
            let d = policy.decide_tool(&req, &intent, tool).unwrap();
            if allowed {
                assert_eq!(
                    (d.decision, d.stage),
                    (Decision::Allow, None),
                    "row {i}: {tool}"
                );
            } else {
                assert_eq!(
                    (d.decision, d.stage),
                    (Decision::Deny, Some(Stage::Connector)),
                    "row {i}: {tool}"
                );
                let tier = tier.expect("a denial has a deciding tier");
                assert_eq!(
                    policy.reason(tool, &d, &req),
                    format!("Connector {server} is not enabled for this {tier}"),
                    "row {i}"
                );
                assert_eq!(policy.rule_text(d.rule), "tiers task > session > project");
            }
        }
    }
}

#[test]
fn connector_server_splits_into_at_most_three_parts() {
    let policy = load();
    let cases = [
        ("mcp__github__create_issue", Some("github")),
        // The tool segment keeps its own `__`.
        ("mcp__srv__browser__click", Some("srv")),
        ("mcp__srv__a__b__c", Some("srv")),
        ("mcp__my-server.v2__get", Some("my-server.v2")),
        // Malformed: no server and/or no tool segment.
        ("mcp__", None),
        ("mcp__github", None),
        ("mcp__github__", None),
        ("mcp____x", None),
        ("mcp______", None),
        // Not the prefix at all.
        ("send_email", None),
        ("read_file", None),
        ("MCP__github__x", None),
        ("mcp_github__x", None),
        ("xmcp__github__x", None),
        ("", None),
    ];
    for (name, server) in cases {
        assert_eq!(policy.connector_server(name), server, "{name:?}");
    }
}

#[test]
fn the_tool_segment_with_double_underscores_is_judged_by_its_server() {
    let policy = load();
    let intent = policy.fallback_intent();
    let allow_srv = request(NONE, Some(&["srv"]), NONE);
    let allow_browser = request(NONE, Some(&["browser"]), NONE);
    let tool = "mcp__srv__browser__click";
    let d = policy.decide_tool(&allow_srv, &intent, tool).unwrap();
    assert_eq!((d.decision, d.stage), (Decision::Allow, None));
    let d = policy.decide_tool(&allow_browser, &intent, tool).unwrap();
    assert_eq!(
        (d.decision, d.stage),
        (Decision::Deny, Some(Stage::Connector))
    );
    assert_eq!(
        policy.reason(tool, &d, &allow_browser),
        "Connector srv is not enabled for this session"
    );
}

#[test]
fn malformed_and_built_in_names_pass_the_connector_stage() {
    let policy = load();
    let intent = policy.fallback_intent();
    // Every tier set to zero connectors: the most restrictive request there is.
    let req = request(EMPTY, EMPTY, EMPTY);
    let names = [
        // malformed mcp__ names (matched by `match "mcp__*"`, so identity passes)
        "mcp__",
        "mcp__github",
        "mcp____x",
        "mcp__github__",
        // built-in capabilities, out of the connector policy's scope
        "send_email",
        "list_emails",
        "read_file",
        "bash",
    ];
    let offer = policy.offer(&req, &intent, names).unwrap();
    for (name, d) in offer.entries() {
        assert_eq!((d.decision, d.stage), (Decision::Allow, None), "{name}");
    }
    // A well-formed name on the same request is blocked.
    let d = policy.decide_tool(&req, &intent, "mcp__github__x").unwrap();
    assert_eq!(
        (d.decision, d.stage),
        (Decision::Deny, Some(Stage::Connector))
    );
    // Names neither declared nor matched stay unknown (identity), connectors or not.
    let d = policy.decide_tool(&req, &intent, "mcp_github__x").unwrap();
    assert_eq!(
        (d.decision, d.stage),
        (Decision::Deny, Some(Stage::Identity))
    );
}

#[test]
fn check_call_blocks_a_connector_tool_that_was_never_offered() {
    let policy = load();
    let intent = policy.fallback_intent();
    let req = request(Some(&["mail"]), NONE, NONE);
    // The model was offered only built-in tools...
    let offer = policy
        .offer(&req, &intent, ["read_file", "send_email"])
        .unwrap();
    assert_eq!(
        offer.visible().collect::<Vec<_>>(),
        ["read_file", "send_email"]
    );
    // ...and calls an MCP tool by a name it remembers or guesses.
    let mut turn = Turn::new();
    let v = policy
        .check_call(
            &req,
            &intent,
            &mut turn,
            "mcp__github__delete_repo",
            &json!({"repo": "x"}),
        )
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::Connector))
    );
    assert_eq!(v.reason, "Connector github is not enabled for this task");
    assert!(v.args_for_execution.is_none());
    let out = v.to_json();
    assert_eq!(
        out,
        json!({
            "ok": false,
            "decision": "deny",
            "tool": "mcp__github__delete_repo",
            "error": "Connector github is not enabled for this task",
            "metadata": {
                "blocked_by_policy": true,
                "stage": "connector",
                "operation_type": "transactional",
                "effect": "write",
                "policy_source": format!("{POLICY}:11:1"),
            }
        })
    );
    // A server in the list runs.
    let v = policy
        .check_call(
            &req,
            &intent,
            &mut turn,
            "mcp__mail__send",
            &json!({"to": "a@b.c"}),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), (Decision::Allow, None));
    assert_eq!(
        v.args_for_execution.map(serde_json::Value::Object),
        Some(json!({"to": "a@b.c"}))
    );
}

#[test]
fn the_blocked_message_names_each_tier() {
    let policy = load();
    let intent = policy.fallback_intent();
    for (req, tier) in [
        (request(EMPTY, NONE, NONE), "task"),
        (request(NONE, EMPTY, NONE), "session"),
        (request(NONE, NONE, EMPTY), "project"),
    ] {
        let mut turn = Turn::new();
        let v = policy
            .check_call(&req, &intent, &mut turn, "mcp__slack__post", &json!({}))
            .unwrap();
        assert_eq!(
            v.reason,
            format!("Connector slack is not enabled for this {tier}")
        );
        assert_eq!(
            v.to_json()["error"],
            json!(format!("Connector slack is not enabled for this {tier}"))
        );
    }
}

#[test]
fn setting_a_tier_twice_keeps_the_last_list() {
    let policy = load();
    let intent = policy.fallback_intent();
    let req = Request::new("chat")
        .connectors("session", ["github"])
        .connectors("session", Vec::<String>::new());
    assert_eq!(
        req.connector_tiers(),
        [("session".to_string(), Vec::<String>::new())]
    );
    let d = policy.decide_tool(&req, &intent, "mcp__github__x").unwrap();
    assert_eq!(
        (d.decision, d.stage),
        (Decision::Deny, Some(Stage::Connector))
    );
}

#[test]
fn an_undeclared_tier_is_a_request_error() {
    let policy = load();
    let intent = policy.fallback_intent();
    let req = Request::new("chat").connectors("workspace", ["github"]);
    let err = policy.offer(&req, &intent, ["mcp__github__x"]).unwrap_err();
    assert_eq!(
        err,
        RequestError::UnknownTier {
            tier: "workspace".into(),
            known: "`task`, `session`, `project`".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "unknown connector tier `workspace`; the policy declares `task`, `session`, `project`"
    );
}
