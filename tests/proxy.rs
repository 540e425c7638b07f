//! `toolwarden mcp-proxy` in front of a tiny fake MCP server (tests/fixtures/proxy/
//! fake_server.py, Python stdlib only) under tests/fixtures/proxy/fake.warden: the proxy logic
//! without npm (it needs `python3`).

mod proxy_support;

use proxy_support::{audit_lines, python, start_fake as start, temp_dir, text, Session};
use serde_json::{json, Value};

const POLICY: &str = "tests/fixtures/proxy/fake.warden";
const SERVER: &str = "tests/fixtures/proxy/fake_server.py";

#[test]
fn tools_list_is_filtered_by_mode_intent_and_annotations() {
    let mut s = start(&[]);
    // Fallback intent `read`: no write tool; erase_all (delete) is over the mode's ceiling;
    // sneaky is declared `none` but its annotations say destructive; broken_hints has hints
    // that are not booleans (fail closed); mystery is not in the policy.
    assert_eq!(
        s.tool_names(2),
        ["get_note", "echo", "calls", "garbage", "notify", "ask", "quit"]
    );
    let (code, _) = s.close();
    assert_eq!(code, 3, "the fake server exits 3 when its stdin closes");

    let mut s = start(&["--intent", "write"]);
    let r = s.request(2, "tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "get_note",
            "echo",
            "save_note",
            "calls",
            "garbage",
            "notify",
            "ask",
            "quit"
        ]
    );
    // A tool that needs confirmation declares the confirmation field; the others are untouched.
    assert_eq!(
        tools[2]["inputSchema"],
        json!({"type": "object", "properties": {"confirmed": {"type": "boolean",
            "description": "toolwarden policy: this tool needs the user's confirmation. Leave this out; when a call is held, ask the user, and only if they agree repeat the same call with this set to true."}}})
    );
    assert_eq!(
        tools[1],
        json!({"name": "echo", "inputSchema": {"type": "object"}})
    );
    s.close();
}

#[test]
fn a_denied_call_never_reaches_the_server() {
    let mut s = start(&["--intent", "write"]);
    let r = s.call(2, "erase_all", json!({"all": true}));
    let result = &r["result"];
    assert_eq!(result["isError"], true, "{r}");
    assert_eq!(
        text(&r),
        "toolwarden blocked `erase_all`: mode `agent` does not allow effect `delete` \
         (stage mode, rule at tests/fixtures/proxy/fake.warden:15:28). It would be allowed by a \
         mode whose ceiling allows effect `delete` (`--mode`)."
    );
    let sc = &result["structuredContent"];
    assert_eq!(sc["decision"], "deny");
    assert_eq!(sc["tool"], "erase_all");
    assert_eq!(sc["ok"], false);
    assert_eq!(sc["metadata"]["blocked_by_policy"], true);
    assert_eq!(sc["metadata"]["stage"], "mode");
    assert_eq!(sc["metadata"]["effect"], "delete");
    assert_eq!(
        sc["metadata"]["policy_source"],
        "tests/fixtures/proxy/fake.warden:15:28"
    );
    // The annotations of `sneaky` (destructive) tighten its declared `none` at call time too.
    s.tool_names(3);
    let r = s.call(4, "sneaky", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "mode"
    );
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["effect"],
        "delete"
    );
    // Hints that are not booleans: evaluation fails, the call is refused (fail closed).
    let r = s.call(5, "broken_hints", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "error"
    );
    assert!(text(&r).starts_with(
        "toolwarden could not evaluate the policy for `broken_hints` (schema [0]: annotations.readOnlyHint"
    ), "{}", text(&r));
    let calls = s.call(6, "calls", json!({}));
    assert_eq!(
        calls["result"]["structuredContent"]["calls"],
        json!(["calls"])
    );
    s.close();
}

#[test]
fn unknown_tools_are_json_rpc_errors() {
    let mut s = start(&[]);
    let r = s.call(2, "mystery", json!({}));
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "Unknown tool: mystery",
            "data": {"blocked_by_policy": true,
                     "reason": "`mcp__notes__mystery` is not declared by the policy and unknown tools are denied"}}})
    );
    let r = s.request(3, "tools/call", json!({"arguments": {}}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    s.close();
}

#[test]
fn confirmation_then_the_confirmed_repeat_is_forwarded_without_the_field() {
    let dir = temp_dir("proxy-confirm");
    let audit = dir.join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap().to_string();
    let mut s = start(&["--intent", "write", "--audit", &audit_arg]);
    let args = json!({"title": "groceries", "body": "milk"});
    let r = s.call(2, "save_note", args.clone());
    assert_eq!(r["result"]["isError"], true, "{r}");
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["decision"], "confirm");
    assert_eq!(sc["confirmation_required"], true);
    assert_eq!(sc["confirmation_fields"], json!(["confirmed"]));
    assert_eq!(sc["pending_call"]["args"], args);
    assert!(
        text(&r).ends_with(
            "To run it: ask the user; if they agree, call `save_note` again with the same arguments and `confirmed` set to true."
        ),
        "{}",
        text(&r)
    );
    // The string "true" is not a confirmation.
    let r = s.call(
        3,
        "save_note",
        json!({"title": "groceries", "body": "milk", "confirmed": "true"}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["decision"], "confirm",
        "{r}"
    );
    // Other arguments with a confirmation: refused, and nothing is held for them.
    let r = s.call(
        4,
        "save_note",
        json!({"title": "groceries", "body": "beer", "confirmed": true}),
    );
    assert_eq!(r["result"]["structuredContent"]["decision"], "deny", "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"], "confirmation",
        "{r}"
    );
    // The confirmed repeat: forwarded, with `confirmed` removed.
    let r = s.call(
        5,
        "save_note",
        json!({"title": "groceries", "body": "milk", "confirmed": true}),
    );
    assert_eq!(r["result"].get("isError"), None, "{r}");
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"tool": "save_note", "arguments": args})
    );
    let calls = s.call(6, "calls", json!({}));
    assert_eq!(
        calls["result"]["structuredContent"]["calls"],
        json!(["save_note", "calls"])
    );
    s.close();

    let lines = audit_lines(&audit);
    let summary: Vec<(String, String, Value, bool)> = lines
        .iter()
        .map(|l| {
            (
                l["event"].as_str().unwrap().to_string(),
                l["decision"].as_str().unwrap_or("").to_string(),
                l["stage"].clone(),
                l["forwarded"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    let call = |d: &str, stage: Value, fwd| ("tools/call".to_string(), d.to_string(), stage, fwd);
    assert_eq!(
        summary,
        [
            call("confirm", json!("confirmation"), false),
            call("confirm", json!("confirmation"), false),
            call("deny", json!("confirmation"), false),
            call("allow", Value::Null, true),
            call("allow", Value::Null, true),
        ]
    );
    let first = &lines[0];
    assert_eq!(first["tool"], "save_note");
    assert_eq!(first["policy_tool"], "mcp__notes__save_note");
    assert_eq!(first["advisory"], false);
    assert_eq!(first["rule"], "tests/fixtures/proxy/fake.warden:25:47");
    assert_eq!(first["args_sha256"].as_str().unwrap().len(), 64);
    assert!(first["time"].as_str().unwrap().ends_with('Z'));
    // The digest is over the arguments as they arrived, confirmation field included.
    assert_ne!(lines[0]["args_sha256"], lines[3]["args_sha256"]);
}

#[test]
fn advisory_logs_but_forwards() {
    let dir = temp_dir("proxy-advisory");
    let audit = dir.join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap().to_string();
    let mut s = start(&["--advisory", "--audit", &audit_arg]);
    assert_eq!(s.tool_names(2).len(), 12, "advisory hides nothing");
    let r = s.call(3, "erase_all", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "erase_all", "{r}");
    s.close();
    let lines = audit_lines(&audit);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["event"], "tools/list");
    assert_eq!(lines[0]["advisory"], true);
    assert_eq!(
        lines[0]["hidden"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["tool"].as_str().unwrap())
            .collect::<Vec<_>>(),
        [
            "save_note",
            "erase_all",
            "sneaky",
            "broken_hints",
            "mystery"
        ]
    );
    assert_eq!(lines[1]["decision"], "deny");
    assert_eq!(lines[1]["stage"], "mode");
    assert_eq!(lines[1]["advisory"], true);
    assert_eq!(lines[1]["forwarded"], true);
}

#[test]
fn bad_lines_from_either_side_do_not_stop_the_proxy() {
    let mut s = start(&[]);
    s.send_raw("{not json");
    let r = s.recv();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null);
    s.send_raw("42");
    assert_eq!(s.recv()["error"]["code"], -32600);
    // The server writes a line that is not JSON before its answer: dropped and logged.
    let r = s.call(2, "garbage", json!({}));
    assert_eq!(text(&r), "after garbage");
    let r = s.request(3, "ping", json!({}));
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    let (_, stderr) = s.close();
    assert!(
        stderr.contains("fake-server: ready"),
        "stderr is forwarded: {stderr}"
    );
    assert!(
        stderr.contains("toolwarden mcp-proxy: dropped a malformed line from the server"),
        "{stderr}"
    );
}

#[test]
fn list_changed_and_server_requests_pass_through_and_ids_match_per_direction() {
    let mut s = start(&[]);
    let r = s.call(2, "notify", json!({}));
    assert_eq!(text(&r), "tools changed");
    let note = s
        .stash
        .iter()
        .find(|m| m["method"] == "notifications/tools/list_changed")
        .cloned();
    let note = match note {
        Some(n) => n,
        None => s.recv(),
    };
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    s.stash.clear();
    // The new list is filtered the same way: get_late matches a pattern, late_unknown does not.
    assert_eq!(
        s.tool_names(3),
        ["get_note", "echo", "calls", "garbage", "notify", "ask", "quit", "get_late"]
    );
    // `ask` makes the server send the client a request with id 2 while the client's tools/list
    // with id 2 is in flight: each is matched in its own direction.
    s.send(&json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "ask", "arguments": {}}}));
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let mut server_request = None;
    let mut list = None;
    while server_request.is_none() || list.is_none() {
        let m = s.recv();
        if m["method"] == "roots/list" {
            server_request = Some(m);
        } else if m["id"] == 2 {
            list = Some(m);
        } else {
            panic!("unexpected {m}");
        }
    }
    assert_eq!(
        server_request.unwrap(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "roots/list"})
    );
    assert_eq!(
        list.unwrap()["result"]["tools"].as_array().unwrap().len(),
        8
    );
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "result": {"roots": []}}));
    let r = s.response(&json!(10));
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"answer": {"roots": []}})
    );
    s.close();
}

#[test]
fn large_and_interleaved_messages_do_not_deadlock() {
    let mut s = start(&[]);
    // 4 MiB of arguments each way, with pings sent before any answer is read.
    let big = "x".repeat(4 << 20);
    for id in 2..6 {
        s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"blob": big}}}));
        s.send(&json!({"jsonrpc": "2.0", "id": id + 100, "method": "ping"}));
    }
    for id in 2..6 {
        let r = s.response(&json!(id));
        assert_eq!(
            r["result"]["structuredContent"]["arguments"]["blob"]
                .as_str()
                .unwrap()
                .len(),
            4 << 20
        );
        assert_eq!(s.response(&json!(id + 100))["result"], json!({}));
    }
    s.close();
}

#[test]
fn exits_with_the_server_exit_code() {
    let mut s = start(&[]);
    let r = s.call(2, "quit", json!({}));
    assert_eq!(text(&r), "bye");
    // Writing to a server that has exited must not kill the proxy (SIGPIPE).
    std::thread::sleep(std::time::Duration::from_millis(300));
    s.try_send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    let (code, _) = s.wait();
    assert_eq!(code, 7);
}

#[cfg(unix)]
#[test]
fn a_server_that_ignores_the_closed_stdin_is_terminated() {
    let py = python();
    let mut s = Session::start(&["-p", POLICY], &[py, SERVER, "--linger"]);
    s.initialize();
    let started = std::time::Instant::now();
    let (code, stderr) = s.close();
    assert_eq!(code, 128 + 15, "ended by SIGTERM: {stderr}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(3));
    assert!(
        stderr.contains("the server did not exit after its stdin closed; sending SIGTERM"),
        "{stderr}"
    );
}

#[test]
fn a_server_that_cannot_start_is_a_clear_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["mcp-proxy", "-p", POLICY, "--", "/nonexistent/server"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: cannot start the server `/nonexistent/server`: "),
        "{stderr}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["mcp-proxy", "-p", POLICY, "--mode", "nope", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: unknown mode `nope`; the policy declares `agent`\n"
    );
}

#[test]
fn the_server_name_meets_the_connector_allowlist() {
    let mut s = start(&["--connectors", "session=github"]);
    assert_eq!(s.tool_names(2), Vec::<String>::new());
    let r = s.call(3, "echo", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["error"],
        "Connector notes is not enabled for this session"
    );
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "connector"
    );
    s.close();

    let mut s = start(&["--connectors", "session=notes"]);
    assert_eq!(s.tool_names(2).len(), 7);
    s.close();
}
