//! Holes a security review found in the proxy's session core, each pinned against the
//! scripted server of tests/mcp_support: self-confirmation, schemas that loosen or come from
//! the wrong message, malformed server messages, batch and log bounds, inexact numbers, log
//! injection, and the handshake's timing and order.

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

fn answer(h: &Harness, id: i64) -> &Value {
    h.client_got
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {:?}", h.client_got))
}

fn called(h: &Harness) -> Vec<String> {
    h.calls_received()
        .iter()
        .map(|m| m["params"]["name"].as_str().unwrap().to_string())
        .collect()
}

// Finding 1: self-confirmation.

#[test]
fn a_confirmation_in_the_same_batch_as_the_held_call_is_refused() {
    let mut h = Harness::new(false);
    h.handshake();
    let batch = json!([
        call(json!(1), "save_note", json!({"text": "y"})),
        call(
            json!(2),
            "save_note",
            json!({"text": "y", "confirmed": true})
        ),
    ]);
    h.client_json(&batch);
    assert!(called(&h).is_empty());
    assert_eq!(
        answer(&h, 1)["result"]["structuredContent"]["decision"],
        "confirm"
    );
    let refused = &answer(&h, 2)["result"]["structuredContent"];
    assert_eq!(refused["decision"], "deny");
    assert_eq!(refused["metadata"]["stage"], "confirmation");
    // A later message, after the client had the held answer, confirms it.
    h.client_json(&call(
        json!(3),
        "save_note",
        json!({"text": "y", "confirmed": true}),
    ));
    assert_eq!(called(&h), ["save_note"]);
    assert_eq!(
        h.calls_received()[0]["params"]["arguments"],
        json!({"text": "y"})
    );
    h.check();
}

#[test]
fn a_call_notification_that_needs_confirmation_is_refused_and_holds_nothing() {
    let mut h = Harness::new(false);
    h.handshake();
    h.client_json(&call(Value::Null, "save_note", json!({"text": "y"})));
    assert_eq!(
        h.log.last().unwrap(),
        "refused a tools/call notification (no id): `save_note` needs the user's confirmation, and a tools/call notification (no id) cannot be held: nobody could be asked; send it as a request with an id"
    );
    let record = h.records().pop().unwrap();
    assert_eq!(
        (record["decision"].clone(), record["stage"].clone()),
        (json!("deny"), json!("confirmation"))
    );
    h.client_json(&call(
        Value::Null,
        "save_note",
        json!({"text": "y", "confirmed": true}),
    ));
    h.client_json(&call(
        json!(2),
        "save_note",
        json!({"text": "y", "confirmed": true}),
    ));
    assert!(called(&h).is_empty());
    assert_eq!(
        answer(&h, 2)["result"]["structuredContent"]["metadata"]["stage"],
        "confirmation"
    );
    h.check();
}

#[test]
fn a_confirmation_without_a_held_call_is_refused_and_arms_nothing() {
    let mut h = Harness::new(false);
    h.handshake();
    let confirmed = json!({"text": "y", "confirmed": true});
    h.client_json(&call(json!(1), "save_note", confirmed.clone()));
    h.client_json(&call(json!(2), "save_note", confirmed.clone()));
    assert!(called(&h).is_empty());
    for id in [1, 2] {
        let sc = &answer(&h, id)["result"]["structuredContent"];
        assert_eq!(sc["decision"], "deny", "{sc}");
        assert_eq!(sc["metadata"]["stage"], "confirmation", "{sc}");
    }
    h.check();
}

#[test]
fn a_held_call_can_be_confirmed_for_ten_minutes_only() {
    let mut h = Harness::new(false);
    h.handshake();
    h.client_json(&call(json!(1), "save_note", json!({"text": "a"})));
    h.client_json(&call(json!(2), "save_note", json!({"text": "b"})));
    h.set_time("2026-12-01T00:09:59.000Z");
    h.client_json(&call(
        json!(3),
        "save_note",
        json!({"text": "a", "confirmed": true}),
    ));
    assert_eq!(called(&h), ["save_note"]);
    h.set_time("2026-12-01T00:10:00.000Z");
    h.client_json(&call(
        json!(4),
        "save_note",
        json!({"text": "b", "confirmed": true}),
    ));
    assert_eq!(called(&h), ["save_note"], "the hold of `b` expired");
    assert_eq!(
        answer(&h, 4)["result"]["structuredContent"]["metadata"]["stage"],
        "confirmation"
    );
    h.check();
}

// Finding 2: a name the server stops listing, annotations that loosen.

#[test]
fn a_tool_the_server_stops_listing_is_refused_and_its_annotations_only_tighten() {
    let mut h = Harness::new(false);
    h.handshake();
    h.client_json(&call(json!(1), "sneaky", json!({})));
    assert_eq!(
        answer(&h, 1)["result"]["structuredContent"]["metadata"]["stage"],
        "mode"
    );
    // The server drops `sneaky` from its list.
    h.tools[1].retain(|t| t["name"] != "sneaky");
    h.server(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
    h.client_json(&call(json!(2), "sneaky", json!({})));
    let r = answer(&h, 2);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        r["error"]["data"]["reason"],
        "the server does not list `sneaky` in its latest tools/list, so toolwarden cannot judge it against the tool's annotations"
    );
    // It comes back claiming to be read-only: still judged destructive.
    h.tools[1].push(json!({"name": "sneaky", "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": true}}));
    h.server(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
    h.client_json(&call(json!(3), "sneaky", json!({})));
    let sc = &answer(&h, 3)["result"]["structuredContent"];
    assert_eq!(sc["metadata"]["stage"], "mode", "{sc}");
    assert_eq!(sc["metadata"]["effect"], "delete", "{sc}");
    // A name the server never listed, though a pattern of the policy matches it.
    h.client_json(&call(json!(4), "get_../erase_all", json!({})));
    assert_eq!(answer(&h, 4)["error"]["code"], -32602);
    assert!(called(&h).is_empty());
    h.check();
}

// Finding 3: a call result with a `tools` array.

#[test]
fn a_call_result_with_a_tools_array_is_forwarded_untouched_and_is_not_a_listing() {
    let mut h = Harness::new(false);
    h.handshake();
    let result = json!({"content": [{"type": "text", "text": "hi"}],
        "tools": [{"name": "sneaky", "inputSchema": {}}, {"name": "erase_all", "inputSchema": {}}]});
    h.call_result = Some(result.clone());
    let lists_before = h
        .records()
        .iter()
        .filter(|r| r["event"] == "tools/list")
        .count();
    h.client_json(&call(json!(1), "echo", json!({})));
    assert_eq!(answer(&h, 1)["result"], result);
    assert_eq!(
        h.records()
            .iter()
            .filter(|r| r["event"] == "tools/list")
            .count(),
        lists_before
    );
    h.call_result = None;
    h.client_json(&call(json!(2), "sneaky", json!({})));
    assert_eq!(
        answer(&h, 2)["result"]["structuredContent"]["metadata"]["stage"],
        "mode"
    );
    // An unmatched result with a tools array is filtered for the client, and teaches nothing.
    h.server(br#"{"jsonrpc":"2.0","id":99,"result":{"tools":[{"name":"sneaky","inputSchema":{},"annotations":{"readOnlyHint":true}},{"name":"erase_all","inputSchema":{}}]}}"#);
    let shown: Vec<&Value> = answer(&h, 99)["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert!(shown.is_empty(), "{shown:?}");
    h.client_json(&call(json!(3), "sneaky", json!({})));
    assert_eq!(
        answer(&h, 3)["result"]["structuredContent"]["metadata"]["stage"],
        "mode"
    );
    assert_eq!(called(&h), ["echo"]);
    h.check();
}

// Finding 4: server messages that are not well-formed JSON-RPC.

#[test]
fn malformed_server_messages_are_dropped_with_a_log_line() {
    let mut h = Harness::new(false);
    h.handshake();
    let all = Value::Array(mcp_support::pages().concat());
    h.server_lists = false;
    h.client(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
    let n = h.client_got.len();
    let lines = [
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":5,"result":{{"tools":{all}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"x","result":{{"tools":{all}}}}}"#),
        r#"[5,{"jsonrpc":"2.0","id":7,"method":"x","error":{"code":1,"message":"m"}}]"#.to_string(),
        r#"{"jsonrpc":"2.0","result":{}}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":7}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"m"}}"#.to_string(),
    ];
    for l in &lines {
        h.server(l.as_bytes());
    }
    assert_eq!(h.client_got.len(), n, "{:?}", &h.client_got[n..]);
    assert_eq!(
        h.log[h.log.len() - 7..],
        [
            "dropped a message from the server whose method is not a string",
            "dropped a message from the server with both a method and a result or error",
            "dropped a message from the server that is not a JSON object",
            "dropped a message from the server with both a method and a result or error",
            "dropped a response from the server without an id",
            "dropped a message from the server that is neither a request, a notification nor a response with one result or error",
            "dropped a message from the server that is neither a request, a notification nor a response with one result or error",
        ]
    );
    h.check();
}

// Finding 6: batch length and log lines per message.

#[test]
fn a_batch_over_a_thousand_elements_is_refused_whole_and_log_lines_are_bounded() {
    let mut h = Harness::new(false);
    h.handshake();
    let (got, logged) = (h.client_got.len(), h.log.len());
    let one = call(json!(1), "echo", json!({})).to_string();
    let batch = format!("[{}]", vec![one.as_str(); 1001].join(","));
    h.client(batch.as_bytes());
    assert!(called(&h).is_empty());
    assert_eq!(h.client_got.len(), got + 1);
    assert_eq!(h.client_got[got]["id"], Value::Null);
    assert_eq!(h.client_got[got]["error"]["code"], -32600);
    assert!(h.client_got[got]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("a batch of more than 1000 messages"));
    assert_eq!(h.log.len(), logged + 1);
    // A thousand bad elements: a thousand answers, twenty log lines.
    let batch = format!("[{}]", vec!["5"; 1000].join(","));
    h.client(batch.as_bytes());
    assert_eq!(h.client_got.len(), got + 1001);
    assert_eq!(h.log.len(), logged + 21);
    assert_eq!(
        h.log.last().unwrap(),
        "… and 981 more log lines about this message"
    );
    h.check();
}

// Finding 10: numbers the proxy cannot forward exactly; ids answered as sent.

#[test]
fn numbers_that_cannot_be_represented_exactly_are_refused_and_ids_are_answered_exactly() {
    let mut h = Harness::new(false);
    h.handshake();
    for n in [
        "18446744073709551616",
        "123456789012345678901234567890",
        "-9223372036854775809",
        "1e-400",
    ] {
        let got = h.client_got.len();
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"n":{n}}}}}}}"#
        );
        h.client(line.as_bytes());
        let r = &h.client_got[got];
        assert_eq!(r["error"]["code"], -32600, "{n}: {r}");
        let m = r["error"]["message"].as_str().unwrap();
        assert!(m.contains("cannot be represented exactly"), "{m}");
    }
    assert!(called(&h).is_empty());
    // Refused by the proxy itself and forwarded: id -0 is answered as 0, an integer.
    h.client(br#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"erase_all"}}"#);
    assert_eq!(h.client_got.last().unwrap()["id"].to_string(), "0");
    h.client(br#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"echo"}}"#);
    assert_eq!(h.calls_received()[0]["id"].to_string(), "0");
    assert_eq!(h.client_got.last().unwrap()["id"].to_string(), "0");
    h.check();
}

// Finding 11: log injection.

#[test]
fn peer_text_in_log_lines_is_escaped() {
    let mut h = Harness::new(false);
    h.handshake();
    let name = "nope\ntoolwarden mcp-proxy: FORGED line\u{1b}[31m\u{202e}x\u{200b}\u{85}";
    h.client_json(&call(Value::Null, name, json!({})));
    h.server(b"garbage \x1b[2J\xe2\x80\xae line");
    let lines = &h.log[h.log.len() - 2..];
    assert_eq!(
        lines[0],
        "refused a tools/call notification (no id): Unknown tool: nope\\u{a}toolwarden mcp-proxy: FORGED line\\u{1b}[31m\\u{202e}x\\u{200b}\\u{85} (the server does not list `nope\\u{a}toolwarden mcp-proxy: FORGED line\\u{1b}[31m\\u{202e}x\\u{200b}\\u{85}` in its latest tools/list, so toolwarden cannot judge it against the tool's annotations)"
    );
    assert!(
        lines[1].ends_with("garbage \\u{1b}[2J\\u{202e} line"),
        "{}",
        lines[1]
    );
    for l in &h.log {
        assert!(!l.chars().any(|c| c.is_control()), "{l:?}");
    }
    h.check();
}

// Finding 12: the handshake.

#[test]
fn a_pipelined_initialize_and_call_run_as_soon_as_the_server_answers_initialize() {
    let mut h = Harness::new(false);
    let batch = json!([
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}},
        call(json!(1), "echo", json!({})),
    ]);
    h.client_json(&batch);
    assert_eq!(called(&h), ["echo"]);
    let order: Vec<&str> = h
        .server_got
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        ["initialize", "tools/list", "tools/list", "tools/call"]
    );
    h.check();
}

#[test]
fn a_call_from_a_client_that_never_sent_initialize_is_refused_at_once() {
    let mut h = Harness::new(false);
    h.client_json(&call(json!(1), "echo", json!({})));
    assert!(h.waits.is_empty());
    assert_eq!(
        answer(&h, 1)["result"]["content"][0]["text"],
        "toolwarden refuses `echo`: it could not read the server's tool list (the client has not sent initialize; MCP needs the initialize handshake before tools/call), so it cannot judge the call against the tool's annotations"
    );
    assert!(h.server_got.is_empty());
    h.check();
}

#[test]
fn messages_after_a_waiting_call_wait_behind_it() {
    let mut h = Harness::new(false);
    h.server_lists = false;
    h.handshake();
    h.client_json(&call(json!(1), "echo", json!({})));
    h.client(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    h.client(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
    assert_eq!(h.server_got.last().unwrap()["method"], "tools/list");
    h.server_lists = true;
    let [first, _] = mcp_support::pages();
    h.server(
        json!({"jsonrpc": "2.0", "id": "toolwarden-tools-list-1", "result": {"tools": first, "nextCursor": "2"}})
            .to_string()
            .as_bytes(),
    );
    let tail: Vec<&str> = h.server_got[h.server_got.len() - 3..]
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(tail, ["tools/call", "ping", "notifications/cancelled"]);
    h.check();
}

// Finding 14: a non-string method is answered, even without an id.

#[test]
fn a_message_whose_method_is_not_a_string_gets_invalid_request_even_without_an_id() {
    let mut h = Harness::new(false);
    h.handshake();
    let n = h.client_got.len();
    h.client(br#"{"jsonrpc":"2.0","method":5}"#);
    assert_eq!(
        h.client_got[n..],
        [
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid Request: the method must be a string"}})
        ]
    );
    h.check();
}
