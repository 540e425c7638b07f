//! The decision log: exact JSON lines under a fixed clock, in enforce and advisory mode.

use serde_json::{json, Value};
use toolwarden::audit::{
    policy_sha256, request_digest, rfc3339, AuditError, Auditor, Enforcement, FixedClock,
};
use toolwarden::{Decision, Policy, Request, Session, Stage, Turn};

const POLICY: &str = r#"policy "audit-demo" version 2
effects none, write
mode m { restrict none }
confirm fields "confirmed"
tool list_notes  { effect none }
tool write_note  { effect write }
tool ask_first   { effect none  confirm always }
"#;

const TIME: &str = "2026-11-29T20:00:00Z";

fn policy() -> Policy {
    Policy::parse(POLICY, "audit.warden").expect("loads")
}

/// The records of `log`, each without its `decision_id`, which must be a UUID (36
/// characters, version 4) unique in the log.
fn lines(log: Vec<u8>) -> Vec<Value> {
    let mut ids = std::collections::HashSet::new();
    String::from_utf8(log)
        .expect("utf-8")
        .lines()
        .map(|l| {
            let mut r: Value = serde_json::from_str(l).expect("one JSON object a line");
            let id = r
                .as_object_mut()
                .and_then(|o| o.remove("decision_id"))
                .and_then(|v| v.as_str().map(str::to_string))
                .expect("a decision_id");
            assert_eq!((id.len(), &id[14..15]), (36, "4"), "{id}");
            assert!(ids.insert(id.clone()), "decision_id {id} repeated");
            r
        })
        .collect()
}

#[test]
fn enforce_mode_logs_each_offer_decision_exactly() {
    let p = policy();
    let request = Request::new("m");
    let intent = p.classify("");
    let digest = request_digest(&request, &intent);
    let mut log = Vec::new();
    let mut auditor =
        Auditor::new(&mut log, Enforcement::Enforce).with_clock(FixedClock(TIME.into()));
    let offer = auditor
        .offer(
            &p,
            7,
            &request,
            &intent,
            ["list_notes", "write_note", "nope"],
        )
        .expect("offer");
    assert_eq!(offer.visible().collect::<Vec<_>>(), ["list_notes"]);
    drop(auditor);
    let base = |tool: &str, decision: &str, stage: Value, source: Value| {
        json!({
            "time": TIME, "policy": "audit-demo", "policy_version": 2,
            "policy_sha256": policy_sha256(&p), "generation": 7, "request": digest,
            "op": "offer", "tool": tool, "decision": decision, "stage": stage,
            "source": source, "enforcement": "enforce",
        })
    };
    assert_eq!(
        lines(log),
        [
            base(
                "list_notes",
                "allow",
                Value::Null,
                json!("audit.warden:5:1")
            ),
            base(
                "write_note",
                "deny",
                json!("mode"),
                json!("audit.warden:3:10")
            ),
            base("nope", "deny", json!("identity"), Value::Null),
        ]
    );
}

#[test]
fn advisory_mode_allows_and_marks_every_record() {
    let p = policy();
    let request = Request::new("m");
    let intent = p.classify("");
    let mut log = Vec::new();
    let mut auditor =
        Auditor::new(&mut log, Enforcement::Advisory).with_clock(FixedClock(TIME.into()));
    let offer = auditor
        .offer(&p, 1, &request, &intent, ["list_notes", "write_note"])
        .expect("offer");
    assert_eq!(
        offer.visible().collect::<Vec<_>>(),
        ["list_notes", "write_note"]
    );
    let mut turn = Turn::new();
    let v = auditor
        .check_call(
            &p,
            1,
            &request,
            &intent,
            &mut turn,
            "write_note",
            &json!({"text": "hi"}),
            None,
        )
        .expect("verdict");
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(v.stage, Some(Stage::Mode));
    assert!(
        v.reason.starts_with("advisory: would be deny: "),
        "{}",
        v.reason
    );
    assert_eq!(
        v.args_for_execution,
        json!({"text": "hi"}).as_object().cloned()
    );
    assert_eq!(turn.transactional_calls, 1);
    drop(auditor);
    let records = lines(log);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(r["enforcement"], "advisory");
        assert_eq!(r["decision"], "allow");
    }
    let marks: Vec<(&str, &str, bool)> = records
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap_or(""),
                r["would_be"].as_str().unwrap_or(""),
                r["overridden"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        marks,
        [
            ("list_notes", "allow", false),
            ("write_note", "deny", true),
            ("write_note", "deny", true),
        ]
    );
    assert_eq!(records[2]["op"], "call");
    assert_eq!(records[2]["stage"], "mode");
}

#[test]
fn enforce_mode_logs_a_pending_confirmation() {
    let p = policy();
    let request = Request::new("m");
    let intent = p.classify("");
    let mut log = Vec::new();
    let mut auditor =
        Auditor::new(&mut log, Enforcement::Enforce).with_clock(FixedClock(TIME.into()));
    let mut turn = Turn::new();
    let v = auditor
        .check_call(
            &p,
            3,
            &request,
            &intent,
            &mut turn,
            "ask_first",
            &json!({}),
            None,
        )
        .expect("verdict");
    assert_eq!(v.decision, Decision::Confirm);
    assert!(v.pending.is_some());
    drop(auditor);
    let r = &lines(log)[0];
    assert_eq!(
        (
            &r["op"],
            &r["tool"],
            &r["decision"],
            &r["stage"],
            &r["source"]
        ),
        (
            &json!("call"),
            &json!("ask_first"),
            &json!("confirm"),
            &json!("confirmation"),
            &json!("audit.warden:7:33")
        )
    );
    assert!(r.get("would_be").is_none());
}

#[test]
fn a_request_error_logs_nothing_and_a_failing_writer_is_an_error() {
    let p = policy();
    let intent = p.classify("");
    let mut log = Vec::new();
    let mut auditor = Auditor::new(&mut log, Enforcement::Enforce);
    let err = auditor
        .offer(&p, 1, &Request::new("ghost"), &intent, ["list_notes"])
        .unwrap_err();
    assert!(matches!(err, AuditError::Request(_)));
    drop(auditor);
    assert!(log.is_empty());

    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut auditor = Auditor::new(Broken, Enforcement::Enforce);
    let err = auditor
        .offer(&p, 1, &Request::new("m"), &intent, ["list_notes"])
        .unwrap_err();
    assert_eq!(err.to_string(), "cannot write the decision log: disk full");
}

#[test]
fn digests_and_times_are_exact() {
    let p = policy();
    let intent = p.classify("");
    let a = request_digest(&Request::new("m").roles(["x"]), &intent);
    let b = request_digest(&Request::new("m").roles(["x"]), &intent);
    let c = request_digest(&Request::new("m").roles(["y"]), &intent);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 64);
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_795_982_400), "2026-11-29T20:00:00Z");
}

#[test]
fn the_policy_digest_is_over_each_source_after_its_length() {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update((POLICY.len() as u64).to_le_bytes());
    h.update(POLICY.as_bytes());
    let expected: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(policy_sha256(&policy()), expected);
    // The same text read under another name has the same digest; another text does not.
    let renamed = Policy::parse(POLICY, "elsewhere/other.warden").expect("loads");
    assert_eq!(policy_sha256(&renamed), expected);
    let other =
        Policy::parse(&POLICY.replace("version 2", "version 3"), "audit.warden").expect("loads");
    assert_ne!(policy_sha256(&other), expected);
}

#[test]
fn a_synced_file_log_holds_every_record_of_a_returned_decision() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("decisions.jsonl");
    let file = std::fs::File::create(&path).expect("created");
    let p = policy();
    let request = Request::new("m");
    let intent = p.classify("");
    let mut auditor = Auditor::new(file, Enforcement::Enforce)
        .with_clock(FixedClock(TIME.into()))
        .with_sync();
    auditor
        .offer(&p, 1, &request, &intent, ["list_notes", "write_note"])
        .expect("offer");
    let mut turn = Turn::new();
    auditor
        .check_call(
            &p,
            1,
            &request,
            &intent,
            &mut turn,
            "list_notes",
            &json!({}),
            None,
        )
        .expect("verdict");
    // Read while the auditor (and its file) is still open: nothing waits in a buffer.
    let records = lines(std::fs::read(&path).expect("readable"));
    let ops: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["op"].as_str().unwrap_or(""),
                r["tool"].as_str().unwrap_or(""),
                r["decision"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("offer", "list_notes", "allow"),
            ("offer", "write_note", "deny"),
            ("call", "list_notes", "allow")
        ]
    );
    drop(auditor);
}

const FLOW_POLICY: &str = r#"policy "flow-demo" version 1
effects none, write
mode m { }
confirm fields "confirmed"
labels untrusted, private
tool get_webpage { effect none  taints untrusted }
tool save        { effect write }
after untrusted { confirm write }
"#;

fn flow_policy() -> Policy {
    Policy::parse(FLOW_POLICY, "flow.warden").expect("loads")
}

/// A record without its `decision_id` and `policy_sha256` (checked elsewhere).
fn bare(mut r: Value) -> Value {
    let o = r.as_object_mut().expect("an object");
    o.remove("policy_sha256");
    r
}

#[test]
fn a_call_in_a_session_is_logged_and_taints_the_session() {
    let p = flow_policy();
    let intent = p.classify("");
    let request = Request::new("m");
    let mut session = Session::new();
    let mut log = Vec::new();
    let mut auditor =
        Auditor::new(&mut log, Enforcement::Enforce).with_clock(FixedClock(TIME.into()));
    let v = auditor
        .check_call_session(
            &p,
            1,
            &request,
            &intent,
            &mut session,
            "get_webpage",
            &json!({}),
        )
        .unwrap();
    assert_eq!(v.decision, Decision::Allow);
    assert!(session.has_label("untrusted"));
    let v = auditor
        .check_call_session(&p, 1, &request, &intent, &mut session, "save", &json!({}))
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Confirm, Some(Stage::Flow))
    );
    assert_eq!(session.pending().map(|c| c.tool.as_str()), Some("save"));
    drop(auditor);
    let digest = request_digest(&request, &intent);
    let records: Vec<Value> = lines(log).into_iter().map(bare).collect();
    assert_eq!(
        records,
        [
            json!({"time": TIME, "policy": "flow-demo", "policy_version": 1, "generation": 1,
                   "request": digest, "op": "call", "tool": "get_webpage", "decision": "allow",
                   "stage": null, "source": "flow.warden:6:1", "enforcement": "enforce"}),
            json!({"time": TIME, "policy": "flow-demo", "policy_version": 1, "generation": 1,
                   "request": digest, "op": "call", "tool": "save", "decision": "confirm",
                   "stage": "flow", "source": "flow.warden:8:19", "enforcement": "enforce"}),
        ]
    );
}

#[test]
fn advisory_lets_a_held_call_run_in_the_session() {
    let p = flow_policy();
    let intent = p.classify("");
    let request = Request::new("m");
    let mut session = Session::with_labels(&p, &["untrusted"], "test").unwrap();
    let mut log = Vec::new();
    let mut auditor =
        Auditor::new(&mut log, Enforcement::Advisory).with_clock(FixedClock(TIME.into()));
    let v = auditor
        .check_call_session(&p, 1, &request, &intent, &mut session, "save", &json!({}))
        .unwrap();
    assert_eq!(
        (v.decision, v.would_be),
        (Decision::Allow, Some(Decision::Confirm))
    );
    // The call ran: no hold kept, the turn counts it.
    assert_eq!(session.pending(), None);
    assert_eq!(session.turn_state().transactional_calls, 1);
    drop(auditor);
    let records = lines(log);
    assert_eq!(records.len(), 1);
    assert_eq!(
        (
            &records[0]["decision"],
            &records[0]["would_be"],
            &records[0]["overridden"]
        ),
        (&json!("allow"), &json!("confirm"), &json!(true))
    );
}

#[test]
fn declassify_is_logged_and_an_error_changes_nothing() {
    let p = flow_policy();
    let intent = p.classify("");
    let request = Request::new("m");
    let mut session = Session::new();
    let mut log = Vec::new();
    let mut auditor =
        Auditor::new(&mut log, Enforcement::Enforce).with_clock(FixedClock(TIME.into()));
    auditor
        .check_call_session(
            &p,
            1,
            &request,
            &intent,
            &mut session,
            "get_webpage",
            &json!({}),
        )
        .unwrap();
    // Declared but not on the session: nothing happens, nothing is written.
    assert_eq!(
        auditor.declassify(&p, 1, &mut session, "private").unwrap(),
        None
    );
    // Not declared: refused.
    let err = auditor
        .declassify(&p, 1, &mut session, "tainted")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the session holds label `tainted`, which the policy does not declare; it declares `untrusted`, `private`"
    );
    let source = auditor
        .declassify(&p, 1, &mut session, "untrusted")
        .unwrap()
        .expect("the label was on the session");
    assert_eq!((source.tool.as_str(), source.turn), ("get_webpage", 1));
    assert!(!session.has_label("untrusted"));
    // Without the label, `save` is allowed again.
    let v = auditor
        .check_call_session(&p, 1, &request, &intent, &mut session, "save", &json!({}))
        .unwrap();
    assert_eq!(v.decision, Decision::Allow);
    drop(auditor);
    let records: Vec<Value> = lines(log).into_iter().map(bare).collect();
    assert_eq!(records.len(), 3);
    assert_eq!(
        records[1],
        json!({"time": TIME, "policy": "flow-demo", "policy_version": 1, "generation": 1,
               "op": "declassify", "label": "untrusted",
               "from": {"tool": "get_webpage", "turn": 1}, "enforcement": "enforce"})
    );

    // A session of another policy is refused; a failing log keeps the label.
    let other = Policy::parse(
        &FLOW_POLICY.replace("version 1", "version 2"),
        "flow.warden",
    )
    .expect("loads");
    let mut log = Vec::new();
    let mut auditor = Auditor::new(&mut log, Enforcement::Enforce);
    let mut tainted = Session::with_labels(&p, &["untrusted"], "test").unwrap();
    assert!(matches!(
        auditor.declassify(&other, 1, &mut tainted, "untrusted"),
        Err(AuditError::Request(_))
    ));
    assert!(tainted.has_label("untrusted"));
    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut broken = Auditor::new(Broken, Enforcement::Enforce);
    assert!(matches!(
        broken.declassify(&p, 1, &mut tainted, "untrusted"),
        Err(AuditError::Write(_))
    ));
    assert!(tainted.has_label("untrusted"));
    let before = tainted.clone();
    assert!(matches!(
        broken.check_call_session(&p, 1, &request, &intent, &mut tainted, "save", &json!({})),
        Err(AuditError::Write(_))
    ));
    assert_eq!(tainted, before);
}
