//! The MCP judge with flow labels: `openWorldHint` read as the MCP default, the labels a
//! forwarded call records, listings and calls judged against a session's labels.

use serde_json::{json, Value};
use toolwarden::mcp::{Judge, PendingCalls};
use toolwarden::{Policy, Request, Session, Turn};

const POLICY: &str = r#"policy "mf" version 1
effects none, write
mode m { }
confirm fields "confirmed"
labels untrusted, private
taint openworld untrusted
tool fetch { effect none }
tool inbox { effect none  taints private }
tool save { effect write }
after untrusted { confirm write }
after untrusted, private { deny write }
"#;

fn judge(annotations_line: &str) -> Judge {
    let text = format!("{POLICY}{annotations_line}");
    let policy = Policy::parse(&text, "mf.warden").unwrap();
    let intent = policy.fallback_intent();
    Judge::new(policy, Request::new("m"), intent, None, false).unwrap()
}

fn schema(name: &str, annotations: Option<Value>) -> Value {
    let mut s = json!({"name": name, "inputSchema": {"type": "object"}});
    if let Some(a) = annotations {
        s["annotations"] = a;
    }
    s
}

#[test]
fn open_world_is_the_hint_true_or_missing_and_ignore_reads_no_hint() {
    let j = judge("");
    assert!(j.open_world(None));
    assert!(j.open_world(Some(&schema("fetch", None))));
    assert!(j.open_world(Some(&schema("fetch", Some(json!({}))))));
    assert!(j.open_world(Some(&schema("fetch", Some(json!({"openWorldHint": true}))))));
    assert!(!j.open_world(Some(&schema(
        "fetch",
        Some(json!({"openWorldHint": false}))
    ))));
    // Not a boolean: the default stands.
    assert!(j.open_world(Some(&schema("fetch", Some(json!({"openWorldHint": "no"}))))));
    let ignoring = judge("trust annotations ignore\n");
    assert!(ignoring.open_world(Some(&schema(
        "fetch",
        Some(json!({"openWorldHint": false}))
    ))));
}

#[test]
fn a_closed_world_tool_keeps_its_own_taints() {
    let j = judge("");
    let closed = schema("inbox", Some(json!({"openWorldHint": false})));
    assert_eq!(j.call_labels(Some(&closed), "inbox"), vec!["private"]);
    assert_eq!(
        j.call_labels(Some(&schema("inbox", None)), "inbox"),
        vec!["untrusted", "private"]
    );
}

#[test]
fn listings_and_calls_tighten_as_the_session_gathers_labels() {
    let j = judge("");
    let tools = vec![
        schema("fetch", None),
        schema("inbox", Some(json!({"openWorldHint": false}))),
        schema("save", None),
    ];
    let mut session = Session::new();
    let l = j.judge_list_in(tools.clone(), Some(&session));
    assert_eq!(l.offered, vec!["fetch", "inbox", "save"]);
    assert!(l.confirmed.is_empty());
    assert_eq!(
        j.record_call(&mut session, Some(&tools[0]), "fetch")
            .unwrap(),
        vec!["untrusted".to_string()]
    );
    let l = j.judge_list_in(tools.clone(), Some(&session));
    assert_eq!(l.offered, vec!["fetch", "inbox", "save"]);
    assert_eq!(l.confirmed, vec!["save"]);
    let mut pending = PendingCalls::default();
    let c = j.judge_call_in_session(
        &mut pending,
        &mut Turn::new(),
        Some(&tools[2]),
        "save",
        &json!({}),
        Some(&session),
    );
    assert_eq!(
        (c.record.decision, c.record.stage.as_deref()),
        ("confirm", Some("flow"))
    );
    assert_eq!(
        j.record_call(&mut session, Some(&tools[1]), "inbox")
            .unwrap(),
        vec!["private".to_string()]
    );
    let l = j.judge_list_in(tools.clone(), Some(&session));
    assert_eq!(l.offered, vec!["fetch", "inbox"]);
    let c = j.judge_call_in_session(
        &mut pending,
        &mut Turn::new(),
        Some(&tools[2]),
        "save",
        &json!({}),
        Some(&session),
    );
    assert_eq!(
        (c.record.decision, c.record.stage.as_deref()),
        ("deny", Some("flow"))
    );
    assert_eq!(
        c.record.reason,
        "`save` is denied: the session read untrusted content from fetch in turn 1 and private content from inbox in turn 1, and `after untrusted, private` denies effect `write`"
    );
    // Without the session, the call is judged as before labels.
    let c = j.judge_call(&mut pending, Some(&tools[2]), "save", &json!({}));
    assert_eq!(c.record.decision, "allow");
}
