//! `toolwarden mcp-proxy` judges every `tools/call` whatever its framing, parses each message
//! once and strictly, filters every `tools/list` result, knows the server's tools before it
//! judges a call, never forwards a call it could not record, and tells the operator why.
//! In front of the fake server of tests/proxy.rs (Python stdlib only; `python3` is needed).

mod proxy_support;

use proxy_support::{audit_lines, start_fake as start, temp_dir, text, Session};
use serde_json::{json, Value};

const POLICY: &str = "tests/fixtures/proxy/fake.warden";

/// The calls the server received, in order, and their raw lines.
fn received(s: &mut Session, id: i64) -> (Vec<String>, Vec<String>) {
    let r = s.call(id, "calls", json!({}));
    let sc = &r["result"]["structuredContent"];
    let names = sc["calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no calls in {r}"))
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let raw = sc["raw"]
        .as_array()
        .unwrap_or_else(|| panic!("no raw lines in {r}"))
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    (names, raw)
}

#[test]
fn a_call_without_an_id_or_with_a_null_id_is_judged_and_never_runs_unjudged() {
    let dir = temp_dir("proxy-noid");
    let audit = dir.join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap().to_string();
    let mut s = start(&["--intent", "write", "--audit", &audit_arg]);
    s.send_raw(
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"erase_all","arguments":{}}}"#,
    );
    s.send_raw(r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"erase_all","arguments":{}}}"#);
    let r = s.response(&Value::Null);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "mode"
    );
    // An allowed call without an id runs (a notification gets no answer).
    s.send_raw(
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}"#,
    );
    let (names, _) = received(&mut s, 2);
    assert_eq!(names, ["echo", "calls"]);
    let (_, stderr) = s.close();
    assert!(
        stderr.contains(
            "toolwarden mcp-proxy: refused a tools/call notification (no id): toolwarden blocked `erase_all`: mode `agent` does not allow effect `delete`"
        ),
        "{stderr}"
    );
    let calls: Vec<(String, String, bool)> = audit_lines(&audit)
        .iter()
        .filter(|l| l["event"] == "tools/call")
        .map(|l| {
            (
                l["tool"].as_str().unwrap().to_string(),
                l["decision"].as_str().unwrap().to_string(),
                l["forwarded"].as_bool().unwrap(),
            )
        })
        .collect();
    let row = |t: &str, d: &str, f| (t.to_string(), d.to_string(), f);
    assert_eq!(
        calls,
        [
            row("erase_all", "deny", false),
            row("erase_all", "deny", false),
            row("echo", "allow", true),
            row("calls", "allow", true),
        ]
    );
}

#[test]
fn every_call_inside_a_batch_is_judged_and_answered() {
    let mut s = start(&["--intent", "write"]);
    s.send_raw(
        r#"[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"erase_all","arguments":{}}},
            {"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{}}},
            {"jsonrpc":"2.0","method":"tools/call","params":{"name":"erase_all","arguments":{}}},
            {"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sneaky","arguments":{}}},
            5]"#
            .replace('\n', "")
            .as_str(),
    );
    let r = s.response(&json!(7));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"], "mode",
        "{r}"
    );
    let r = s.response(&json!(8));
    assert_eq!(text(&r), "called echo");
    let r = s.response(&json!(9));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["effect"], "delete",
        "{r}"
    );
    let r = s.response(&Value::Null);
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let (names, _) = received(&mut s, 10);
    assert_eq!(names, ["echo", "calls"]);
    s.close();
}

#[test]
fn a_duplicated_key_anywhere_is_refused_with_invalid_request_and_never_reaches_the_server() {
    let mut s = start(&["--intent", "write"]);
    let args = json!({"title": "groceries"});
    let r = s.call(2, "save_note", args);
    assert_eq!(
        r["result"]["structuredContent"]["decision"], "confirm",
        "{r}"
    );
    // `guard` refuses this text; the proxy must not read it as confirmed.
    s.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"save_note","arguments":{"title":"groceries","confirmed":false,"confirmed":true}}}"#);
    let r = s.recv();
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid Request: duplicate key `confirmed`"),
        "{r}"
    );
    s.send_raw(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","method":"ping","params":{"name":"erase_all"}}"#);
    assert_eq!(s.recv()["error"]["code"], -32600);
    let (names, _) = received(&mut s, 5);
    assert_eq!(names, ["calls"]);
    s.close();
}

#[test]
fn the_server_receives_the_judged_message_serialized_again_not_the_clients_bytes() {
    let mut s = start(&[]);
    s.send_raw(r#"{ "jsonrpc" : "2.0", "id" : 2, "method" : "tools/call", "params" : {"name": "ech\u006f", "arguments": {"\u0061": 1.50, "b": "\u00e9"}} }"#);
    assert_eq!(text(&s.response(&json!(2))), "called echo");
    let (_, raw) = received(&mut s, 3);
    assert_eq!(
        raw[0],
        r#"{"id":2,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"a":1.5,"b":"é"},"name":"echo"}}"#
    );
    s.close();
}

fn names_of(r: &Value) -> Vec<String> {
    r["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {r}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_tools_list_result_is_filtered_whatever_its_id() {
    let mut s = start(&[]);
    let offered = [
        "get_note", "echo", "calls", "garbage", "notify", "ask", "quit",
    ];
    // Ids are matched by value: -0 is the number 0, 5.0 the number 5, whatever spelling the
    // server answers with.
    for id in ["-0", "5.0", "1e0"] {
        s.send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#
        ));
        let r = s.recv();
        assert_eq!(r["id"].as_f64(), id.parse::<f64>().ok(), "{r}");
        assert_eq!(names_of(&r), offered);
    }
    // Two requests in flight with one id: both answers are filtered.
    s.send_raw(r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#);
    s.send_raw(r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#);
    assert_eq!(names_of(&s.response(&json!(9))), offered);
    assert_eq!(names_of(&s.response(&json!(9))), offered);
    // A tools/list without an id: the fake server answers it with id null, which matches no
    // request, and it is filtered all the same.
    s.send_raw(r#"{"jsonrpc":"2.0","method":"tools/list"}"#);
    assert_eq!(names_of(&s.response(&Value::Null)), offered);
    s.close();
}

#[test]
fn a_call_before_any_tools_list_is_judged_with_the_servers_annotations() {
    let mut s = start(&["--intent", "write"]);
    // No tools/list from the client: `sneaky` is declared `none`, its annotations say
    // destructive, and `delete` is over the mode's ceiling.
    let r = s.call(2, "sneaky", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        text(&r),
        "toolwarden blocked `sneaky`: mode `agent` does not allow effect `delete` (stage mode, \
         rule at tests/fixtures/proxy/fake.warden:15:28; the server says destructiveHint true, \
         so `sneaky`, declared none, is judged as delete). It would be allowed by a mode whose \
         ceiling allows effect `delete` (`--mode`)."
    );
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["annotations"],
        json!({"declared_effect": "none", "judged_effect": "delete", "hints": "destructiveHint true"})
    );
    // Malformed hints: refused before any listing too.
    let r = s.call(3, "broken_hints", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"], "error",
        "{r}"
    );
    let (names, _) = received(&mut s, 4);
    assert_eq!(names, ["calls"]);
    // The client's list is filtered the same way, and the operator was told once per tool.
    s.tool_names(5);
    s.tool_names(6);
    let (_, stderr) = s.close();
    let line = "toolwarden mcp-proxy: sneaky: declared none, judged as delete: the server says \
                destructiveHint true; trust annotations ignore keeps the declaration\n";
    assert_eq!(stderr.matches(line).count(), 1, "{stderr}");
}

#[test]
fn a_list_that_hides_every_tool_says_which_stages_hid_them() {
    let mut s = start(&["--connectors", "session=github"]);
    assert_eq!(s.tool_names(2), Vec::<String>::new());
    let (_, stderr) = s.close();
    assert!(
        stderr.contains(
            "toolwarden mcp-proxy: tools/list: the policy hides all 12 tools the server listed (stage connector: 10, stage error: 1, stage identity: 1)\n"
        ),
        "{stderr}"
    );
}

#[test]
fn advisory_mode_needs_an_audit_file() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["mcp-proxy", "-p", POLICY, "--advisory", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: the following required arguments were not provided: --audit <FILE> (see `toolwarden --help`)\n"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_call_that_cannot_be_recorded_is_never_forwarded() {
    // Enforcing: each unrecorded call is refused.
    let mut s = start(&["--audit", "/dev/full"]);
    let r = s.call(2, "echo", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        text(&r).starts_with(
            "toolwarden could not record the call to `echo` in the audit log (No space left on device"
        ),
        "{}",
        text(&r)
    );
    let (_, stderr) = s.close();
    assert!(!stderr.contains("fake-server: call"), "{stderr}");
    assert!(
        stderr
            .contains("toolwarden mcp-proxy: cannot write the audit file: No space left on device"),
        "{stderr}"
    );

    // Advisory: the first failure stops all forwarding of calls, and says so.
    let mut s = start(&["--advisory", "--audit", "/dev/full"]);
    for (id, tool) in [(2, "echo"), (3, "erase_all"), (4, "calls")] {
        let r = s.call(id, tool, json!({}));
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(
            text(&r).starts_with("toolwarden forwards no call: the audit log cannot be written"),
            "{}",
            text(&r)
        );
    }
    let (_, stderr) = s.close();
    assert!(!stderr.contains("fake-server: call"), "{stderr}");
    assert!(
        stderr.contains(
            "toolwarden mcp-proxy: advisory mode stops forwarding calls: the audit log cannot be written (No space left on device"
        ),
        "{stderr}"
    );
}

#[test]
fn the_proxys_own_tools_list_never_reaches_the_client() {
    let mut s = start(&[]);
    // After initialize the proxy listed the tools itself; the client sees only its answers.
    let r = s.request(2, "ping", json!({}));
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
    assert_eq!(s.stash, Vec::<Value>::new());
    // Reserved ids are refused.
    s.send_raw(r#"{"jsonrpc":"2.0","id":"toolwarden-tools-list-9","method":"tools/list"}"#);
    let r = s.recv();
    assert_eq!(r["id"], "toolwarden-tools-list-9");
    assert_eq!(r["error"]["code"], -32600);
    s.close();
}

#[test]
fn a_confirmation_the_client_sent_before_the_held_answer_reached_it_does_not_count() {
    let mut s = start(&["--intent", "write"]);
    let held = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "save_note", "arguments": {"title": "t", "body": "b"}}});
    let confirm = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "save_note", "arguments": {"title": "t", "body": "b", "confirmed": true}}});
    // Both lines in one write: the confirmation was sent before the held answer came back.
    s.send_raw(&format!("{held}\n{confirm}"));
    let r = s.response(&json!(2));
    assert_eq!(
        r["result"]["structuredContent"]["decision"], "confirm",
        "{r}"
    );
    let r = s.response(&json!(3));
    assert_eq!(r["result"]["structuredContent"]["decision"], "deny", "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"], "confirmation",
        "{r}"
    );
    // Sent after the held answer was read: it counts.
    let r = s.call(
        4,
        "save_note",
        json!({"title": "t", "body": "b", "confirmed": true}),
    );
    assert_eq!(r["result"].get("isError"), None, "{r}");
    let (names, _) = received(&mut s, 5);
    assert_eq!(names, ["save_note", "calls"]);
    s.close();
}
