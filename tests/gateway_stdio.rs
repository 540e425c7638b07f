//! `toolwarden gateway` without `listen`: one client on stdio, two fake upstream servers; each
//! client line is parsed strictly before the MCP layer reads it. And a configuration that
//! does not fit the policy is refused at start.
#![cfg(feature = "gateway")]

mod gateway_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use gateway_support::{calls_received, config};
use serde_json::{json, Value};

#[test]
fn on_stdio_every_line_is_parsed_strictly_and_every_call_judged_with_the_flags_identity() {
    let dir = tempfile::tempdir().unwrap();
    let text = config(dir.path(), "").replace("listen = \"127.0.0.1:0\"\n", "");
    std::fs::write(dir.path().join("g.toml"), text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["gateway", "--role", "admin", "--config"])
        .arg(dir.path().join("g.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut send = |line: &str| {
        input.write_all(line.as_bytes()).unwrap();
        input.write_all(b"\n").unwrap();
        input.flush().unwrap();
    };
    let mut read = || {
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(read()["result"]["serverInfo"]["name"], "toolwarden-gateway");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__a__save_doc","arguments":{"confirmed":false,"confirmed":true}}}"#,
    );
    let r = read();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("duplicate key `confirmed`"));
    send(
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"mcp__a__touch","arguments":{}}}"#,
    );
    assert_eq!(read()["error"]["code"], -32600);
    send(r#"[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__a__touch"}}]"#);
    assert_eq!(read()["error"]["code"], -32600);
    send("{oops");
    assert_eq!(read()["error"]["code"], -32700);
    // The flags' role shows the admin-only tool and lets it run.
    send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#);
    let names: Vec<Value> = read()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert!(names.contains(&json!("mcp__a__hidden")), "{names:?}");
    send(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp__a__hidden","arguments":{}}}"#,
    );
    assert_eq!(read()["result"]["structuredContent"]["tool"], "hidden");
    send(
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
    );
    assert_eq!(
        read()["result"]["structuredContent"]["metadata"]["stage"],
        "mode"
    );
    // The stdio client is one session; another it names is unknown, and nothing runs.
    send(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp__a__hidden","arguments":{},"_meta":{"toolwarden/session":"fresh"}}}"#,
    );
    let r = read();
    assert_eq!(
        (r["error"]["code"].clone(), r["error"]["message"].clone()),
        (json!(-32602), json!("Invalid session: unknown session `fresh`: sessions are issued by the gateway (initialize, or POST /v1/sessions) to one principal, and forgotten when idle")),
        "{r}"
    );
    drop(input);
    let _ = child.wait();
    assert_eq!(calls_received(dir.path()), ["hidden"]);
}

#[test]
fn a_refused_client_line_is_logged_on_one_line_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let text = config(dir.path(), "").replace("listen = \"127.0.0.1:0\"\n", "");
    std::fs::write(dir.path().join("g.toml"), text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["gateway", "--config"])
        .arg(dir.path().join("g.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A duplicated key that holds a line feed and an escape: the refusal quotes the key.
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\\ntoolwarden gateway: forged \\u001b[31m\":1,\"x\\ntoolwarden gateway: forged \\u001b[31m\":2}}\n")
        .unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let refused: Vec<&str> = err.lines().filter(|l| l.contains("forged")).collect();
    assert_eq!(
        refused,
        ["toolwarden gateway: refused a client message: Invalid Request: duplicate key `x\\u{a}toolwarden gateway: forged \\u{1b}[31m` at line 1 column 137"],
        "{err}"
    );
}

#[test]
fn a_configuration_that_does_not_fit_the_policy_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "intent = \"write\"",
            "intent = \"nope\"",
            "the configuration does not fit the policy",
        ),
        (
            "listen = \"127.0.0.1:0\"",
            "listen = \"0.0.0.0:0\"",
            "is not a loopback address",
        ),
        (
            "intent = \"write\"",
            "intent = \"write\"\naudit2 = 1",
            "unknown field `audit2`",
        ),
    ];
    for (from, to, expected) in cases {
        let text = config(dir.path(), "").replacen(from, to, 1);
        std::fs::write(dir.path().join("g.toml"), text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
            .args(["gateway", "--config"])
            .arg(dir.path().join("g.toml"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(expected), "{to}: {err}");
    }
}
