//! The MCP session core (`toolwarden::mcp::Session`) driven message by message against a
//! scripted server: the proxy's own paginated listing, calls waiting for it, failures that
//! refuse, `list_changed`, id matching, and the audit log.

mod mcp_support;

use mcp_support::Harness;
use serde_json::{json, Value};

/// A `tools/call`; `Value::Null` for `id` makes it a notification (no id at all).
fn call(id: Value, tool: &str, args: Value) -> Value {
    let mut m = json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": tool, "arguments": args}});
    if !id.is_null() {
        m["id"] = id;
    }
    m
}

#[test]
fn the_proxy_lists_every_page_itself_after_the_handshake_and_never_shows_it_the_client() {
    let mut h = Harness::new(false);
    h.handshake();
    let own: Vec<&Value> = h
        .server_got
        .iter()
        .filter(|m| m["method"] == "tools/list")
        .collect();
    assert_eq!(
        own,
        [
            &json!({"jsonrpc": "2.0", "id": "toolwarden-tools-list-1", "method": "tools/list", "params": {}}),
            &json!({"jsonrpc": "2.0", "id": "toolwarden-tools-list-2", "method": "tools/list", "params": {"cursor": "2"}}),
        ]
    );
    assert!(h.session.tools_known());
    // The client saw the initialize answer only.
    assert_eq!(h.client_got.len(), 1);
    assert_eq!(h.client_got[0]["id"], 0);
    // `sneaky` is on page 2: its annotations count.
    assert_eq!(
        h.log,
        ["sneaky: declared none, judged as delete: the server says destructiveHint true; trust annotations ignore keeps the declaration"]
    );
    h.client_json(&call(json!(3), "sneaky", json!({})));
    assert_eq!(
        h.client_got[1]["result"]["structuredContent"]["metadata"]["effect"],
        "delete"
    );
    h.check();
}

#[test]
fn a_call_before_the_listing_waits_for_it_and_is_then_judged() {
    let mut h = Harness::new(false);
    h.server_lists = false;
    h.handshake();
    h.client_json(&call(json!(1), "sneaky", json!({})));
    h.client_json(&call(json!(2), "echo", json!({})));
    assert_eq!(h.waits, [0]);
    assert!(h.calls_received().is_empty());
    // The server answers the proxy's listing now (page 1 here, page 2 by the script).
    h.server_lists = true;
    let [first, _] = mcp_support::pages();
    h.server(
        json!({"jsonrpc": "2.0", "id": "toolwarden-tools-list-1", "result": {"tools": first, "nextCursor": "2"}})
            .to_string()
            .as_bytes(),
    );
    let received: Vec<&Value> = h.calls_received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0]["params"]["name"], "echo");
    let refused = h.client_got.iter().find(|m| m["id"] == 1).unwrap();
    assert_eq!(
        refused["result"]["structuredContent"]["metadata"]["stage"],
        "mode"
    );
    // The wait is over: expiring it changes nothing.
    let before = h.client_got.len();
    h.expire();
    assert_eq!(h.client_got.len(), before);
    h.check();
}

#[test]
fn a_wait_that_ends_refuses_the_waiting_calls() {
    let mut h = Harness::new(false);
    h.server_lists = false;
    h.handshake();
    h.client_json(&call(json!(1), "echo", json!({})));
    h.client_json(&call(Value::Null, "echo", json!({})));
    h.expire();
    assert!(h
        .calls_received()
        .iter()
        .all(|m| m["method"] != "tools/call"));
    let r = h.client_got.iter().find(|m| m["id"] == 1).unwrap();
    assert_eq!(
        r["result"]["content"][0]["text"],
        "toolwarden refuses `echo`: it could not read the server's tool list (the server did not answer tools/list in time), so it cannot judge the call against the tool's annotations"
    );
    assert_eq!(h.client_got.len(), 2, "the notification gets no answer");
    let records = h.records();
    assert_eq!(records.len(), 2);
    assert!(records
        .iter()
        .all(|r| r["stage"] == "error" && r["forwarded"] == false));
    h.check();
}

#[test]
fn a_failed_listing_refuses_calls_until_a_listing_succeeds() {
    let mut h = Harness::new(false);
    h.client_json(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}));
    h.server_lists = false;
    h.client_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    h.server(br#"{"jsonrpc":"2.0","id":"toolwarden-tools-list-1","error":{"code":-32601,"message":"Method not found"}}"#);
    h.client_json(&call(json!(1), "echo", json!({})));
    assert!(h.calls_received().is_empty());
    assert!(h.client_got[1]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("the server answered tools/list with an error"));
    // The server says its tools changed: the proxy lists again, and calls run.
    h.server_lists = true;
    h.server(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
    assert!(h.session.tools_known());
    h.client_json(&call(json!(2), "echo", json!({})));
    assert_eq!(h.calls_received().len(), 1);
    h.check();
}

#[test]
fn responses_are_matched_by_id_value_and_a_tools_array_is_always_filtered() {
    let mut h = Harness::new(false);
    h.handshake();
    let visible = json!(["get_note", "echo", "save_note"]);
    let names = |m: &Value| -> Value {
        Value::Array(
            m["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].clone())
                .collect(),
        )
    };
    let all: Vec<Value> = mcp_support::pages().concat();
    // The client asks with id 5; the server answers with 5.0, twice with an unknown id, and
    // with -0 where 0 was asked.
    h.client(br#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#);
    h.client(br#"{"jsonrpc":"2.0","id":0,"method":"tools/list"}"#);
    let n = h.client_got.len();
    for id in ["5.0", "\"x\"", "null", "-0"] {
        let reply = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":{}}}}}"#,
            Value::Array(all.clone())
        );
        h.server(reply.as_bytes());
    }
    // The client's own requests were answered by the scripted server too (id 5 and 0).
    for m in &h.client_got[1..] {
        assert_eq!(names(m), visible, "{m}");
    }
    assert_eq!(h.client_got.len(), n + 4);
    h.check();
}

#[test]
fn a_call_that_cannot_be_recorded_is_not_forwarded_and_advisory_mode_stops() {
    let mut h = Harness::new(false);
    h.handshake();
    h.audit
        .fail
        .store(true, std::sync::atomic::Ordering::SeqCst);
    h.client_json(&call(json!(1), "echo", json!({})));
    assert!(h.calls_received().is_empty());
    h.audit
        .fail
        .store(false, std::sync::atomic::Ordering::SeqCst);
    h.client_json(&call(json!(2), "echo", json!({})));
    assert_eq!(
        h.calls_received().len(),
        1,
        "enforcing mode refuses only what it cannot record"
    );
    h.check();

    let mut h = Harness::new(true);
    h.handshake();
    h.client_json(&call(json!(1), "erase_all", json!({})));
    assert_eq!(
        h.calls_received().len(),
        1,
        "advisory mode forwards a denied call it recorded"
    );
    h.audit
        .fail
        .store(true, std::sync::atomic::Ordering::SeqCst);
    h.client_json(&call(json!(2), "echo", json!({})));
    h.audit
        .fail
        .store(false, std::sync::atomic::Ordering::SeqCst);
    h.client_json(&call(json!(3), "echo", json!({})));
    assert_eq!(
        h.calls_received().len(),
        1,
        "advisory mode stops after a failed write"
    );
    assert!(h
        .log
        .iter()
        .any(|l| l == "advisory mode stops forwarding calls: the audit log cannot be written (the disk is full)"));
    h.check();
}

#[test]
fn batches_are_split_and_each_call_judged() {
    let mut h = Harness::new(false);
    h.handshake();
    h.client(br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","method":"tools/call","params":{"name":"erase_all"}},{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"erase_all"}},{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"echo"}}]"#);
    assert_eq!(h.calls_received().len(), 1);
    let answers: Vec<(Value, Value)> = h.client_got[1..]
        .iter()
        .map(|m| (m["id"].clone(), m["error"]["code"].clone()))
        .collect();
    assert_eq!(
        answers,
        [
            (Value::Null, Value::Null),
            (Value::Null, json!(-32600)),
            (json!(1), Value::Null),
        ]
    );
    h.check();
}

#[test]
fn a_client_that_skips_the_initialized_notification_gets_the_listing_at_its_first_call() {
    let mut h = Harness::new(false);
    h.client_json(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}));
    assert!(!h.session.tools_known());
    h.client_json(&call(json!(1), "echo", json!({})));
    assert!(h.session.tools_known());
    assert_eq!(h.calls_received().len(), 1);
    h.check();
}
