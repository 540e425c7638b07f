//! Property: for any sequence of client messages (random framings, ids of every kind,
//! batches, duplicated keys, garbage), the `tools/call` messages the server receives are
//! exactly those the audit log records as forwarded, in order, never one more; in enforcing
//! mode each was allowed and none is a tool the policy refuses; a call that needs
//! confirmation runs only after an earlier line asked for it unconfirmed; and the client's
//! messages reach the server in the client's order.

mod mcp_support;

use mcp_support::Harness;
use proptest::prelude::*;

/// An id as JSON text; `None` for no id at all.
fn id() -> impl Strategy<Value = Option<String>> {
    prop::sample::select(vec![
        None,
        Some("null"),
        Some("1"),
        Some("-7"),
        Some("5.0"),
        Some("-0"),
        Some("1e0"),
        Some("\"a\""),
        Some("\"toolwarden-tools-list-1\""),
        Some("{\"x\":1}"),
        Some("true"),
    ])
    .prop_map(|s| s.map(str::to_string))
}

fn method() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "\"tools/call\"",
        "\"tools/call\"",
        "\"tools/call\"",
        "\"tools/list\"",
        "\"ping\"",
        "\"notifications/initialized\"",
        "\"initialize\"",
        "5",
    ])
    .prop_map(str::to_string)
}

fn params() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "\"echo\"",
        "\"erase_all\"",
        "\"sneaky\"",
        "\"save_note\"",
        "\"broken_hints\"",
        "\"mystery\"",
        "\"get_note\"",
        "7",
    ]);
    let args = prop::sample::select(vec![
        "{}",
        "{\"title\":\"t\"}",
        "{\"title\":\"t\",\"confirmed\":true}",
        "{\"confirmed\":false,\"confirmed\":true}",
        "{\"title\":18446744073709551616}",
        "{\"title\":1e-400}",
        "\"x\"",
        "[1]",
    ]);
    (name, args, any::<bool>()).prop_map(|(n, a, with_args)| {
        if with_args {
            format!("{{\"name\":{n},\"arguments\":{a}}}")
        } else {
            format!("{{\"name\":{n}}}")
        }
    })
}

/// One JSON-RPC object as text, sometimes with a key written twice.
fn object() -> impl Strategy<Value = String> {
    (id(), method(), params(), 0usize..5).prop_map(|(id, method, params, dup)| {
        let mut pairs = vec![("jsonrpc".to_string(), "\"2.0\"".to_string())];
        if let Some(id) = id {
            pairs.push(("id".to_string(), id));
        }
        pairs.push(("method".to_string(), method));
        pairs.push(("params".to_string(), params));
        match dup {
            0 => pairs.push(("method".to_string(), "\"ping\"".to_string())),
            1 => pairs.insert(1, ("method".to_string(), "\"tools/call\"".to_string())),
            _ => {}
        }
        let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(","))
    })
}

/// One line from the client.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => object(),
        2 => prop::collection::vec(object(), 0..4).prop_map(|items| format!("[{}]", items.join(","))),
        1 => prop::sample::select(vec!["5", "\"x\"", "null", "[5]", "{not json", "[[]]", "{}"])
            .prop_map(str::to_string),
        1 => object().prop_map(|o| format!("  {o} \t")),
    ]
}

/// A step: a client line, the handshake, or the end of every wait.
#[derive(Clone, Debug)]
enum Step {
    Line(String),
    Handshake,
    Expire,
    AuditFails(bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => line().prop_map(Step::Line),
        2 => Just(Step::Handshake),
        1 => Just(Step::Expire),
        1 => any::<bool>().prop_map(Step::AuditFails),
    ]
}

fn run(advisory: bool, lists: bool, steps: &[Step]) {
    let mut h = Harness::new(advisory);
    h.server_lists = lists;
    for s in steps {
        match s {
            Step::Line(l) => h.client(l.as_bytes()),
            Step::Handshake => h.handshake(),
            Step::Expire => h.expire(),
            Step::AuditFails(f) => h.audit.fail.store(*f, std::sync::atomic::Ordering::SeqCst),
        }
        h.check();
    }
    h.expire();
    h.check();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn the_server_gets_exactly_the_calls_the_audit_log_forwards(
        advisory in any::<bool>(),
        lists in prop::bool::weighted(0.8),
        steps in prop::collection::vec(step(), 1..30),
    ) {
        run(advisory, lists, &steps);
    }
}

#[test]
fn the_property_sees_calls_run() {
    // The generator reaches the interesting case: calls that do run.
    let steps = [
        Step::Handshake,
        Step::Line(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#.to_string()),
        Step::Line(r#"[{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"get_note","arguments":{}}}]"#.to_string()),
    ];
    let mut h = Harness::new(false);
    for s in &steps {
        if let Step::Line(l) = s {
            h.client(l.as_bytes());
        } else {
            h.handshake();
        }
    }
    assert_eq!(h.calls_received().len(), 2);
    h.check();
}
