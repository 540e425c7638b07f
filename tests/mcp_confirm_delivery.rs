//! A held call is confirmed only by a client message sent after the client received the held
//! answer: the transport reports what it wrote and which client reads came before
//! ([`Session::answers_written`]), and which read brought each line ([`Session::next_client_read`]).

mod mcp_support;

use mcp_support::Harness;
use serde_json::json;

fn line(id: i64, args: serde_json::Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "save_note", "arguments": args}})
    .to_string()
    .into_bytes()
}

fn stage(out: &toolwarden::mcp::Outcome) -> serde_json::Value {
    out.to_client[0]["result"]["structuredContent"]["metadata"]["stage"].clone()
}

#[test]
fn a_confirmation_counts_only_after_the_held_answer_was_written_and_read() {
    let mut h = Harness::new(false);
    h.handshake();
    let s = &mut h.session;
    s.answers_written(0, 0);
    s.next_client_read(1);
    let held = s.from_client(&line(1, json!({"text": "y"})));
    assert_eq!(held.holds_through, 1);
    let confirm = json!({"text": "y", "confirmed": true});
    // The held answer is not written yet.
    s.next_client_read(1);
    let out = s.from_client(&line(2, confirm.clone()));
    assert!(out.to_server.is_empty());
    assert_eq!(stage(&out), "confirmation");
    // Written after read 2: a line that came in read 2 was sent before it.
    s.answers_written(held.holds_through, 2);
    s.next_client_read(2);
    let out = s.from_client(&line(3, confirm.clone()));
    assert!(out.to_server.is_empty());
    assert_eq!(stage(&out), "confirmation");
    // A line from a later read: sent after the client had it.
    s.next_client_read(3);
    let out = s.from_client(&line(4, confirm));
    assert_eq!(out.to_server.len(), 1, "{out:?}");
    assert_eq!(
        out.to_server[0]["params"]["arguments"],
        json!({"text": "y"})
    );
}
