//! `toolwarden gateway` over Streamable HTTP, hermetic: two fake upstream servers on stdio
//! (tests/fixtures/gateway/upstream.py, Python stdlib), a hand-written HTTP client on
//! loopback. Aggregation, judging, identity, sessions and turns, bad input, the decision API.
#![cfg(feature = "gateway")]

mod gateway_support;

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gateway_support::*;
use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::{json, Value};

const SECRET: &str = "a test secret of the gateway";

fn token(secret: &str, claims: Value) -> String {
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn in_an_hour() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600
}

fn with_identity(dir: &std::path::Path) -> String {
    std::fs::write(dir.join("jwt.secret"), format!("{SECRET}\n")).unwrap();
    config(
        dir,
        &format!(
            "[identity]\njwt_hs256_secret_file = {:?}\n",
            dir.join("jwt.secret").display().to_string()
        ),
    )
}

#[test]
fn the_tools_of_both_servers_are_listed_by_server_and_every_call_is_judged() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    // Each server's two pages were read; delete and role-gated tools are hidden.
    assert_eq!(
        s.tool_names(None),
        [
            "mcp__a__get_doc",
            "mcp__a__touch",
            "mcp__a__save_doc",
            "mcp__a__calls",
            "mcp__a__crash",
            "mcp__a__grow",
            "mcp__b__get_doc",
            "mcp__b__touch",
            "mcp__b__calls",
        ]
    );
    let r = s.call("mcp__a__touch", json!({"x": 1}));
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"server": "a", "tool": "touch", "arguments": {"x": 1}})
    );
    let r = s.call("mcp__a__erase_all", json!({}));
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "mode"
    );
    // A hidden tool called by name is refused at its stage.
    let r = s.call("mcp__a__hidden", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "role"
    );
    let r = s.call("mcp__a__mystery", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["message"], "Unknown tool: mcp__a__mystery");
    let r = s.call("mcp__zz__touch", json!({}));
    assert_eq!(r["error"]["message"], "Unknown tool: mcp__zz__touch");
    let r = s.call("mcp__b__calls", json!({}));
    assert_eq!(r["result"]["structuredContent"]["calls"], json!(["calls"]));
    assert_eq!(calls_received(g.dir.path()), ["touch"]);
    // Each decision is in the audit log, before the call was forwarded.
    let audit = std::fs::read_to_string(g.dir.path().join("audit.jsonl")).unwrap();
    let decisions: Vec<(String, String, bool)> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["policy_tool"].as_str().unwrap().to_string(),
                v["decision"].as_str().unwrap().to_string(),
                v["forwarded"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("mcp__a__touch".into(), "allow".into(), true),
            ("mcp__a__erase_all".into(), "deny".into(), false),
            ("mcp__a__hidden".into(), "deny".into(), false),
            ("mcp__a__mystery".into(), "deny".into(), false),
            ("mcp__b__calls".into(), "allow".into(), true),
        ]
    );
}

#[test]
fn a_confirmation_counts_only_against_the_held_call_and_is_not_forwarded() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    // A model that confirms a call nobody held is refused, and nothing is held for it.
    let r = s.call("mcp__a__save_doc", json!({"title": "t", "confirmed": true}));
    assert_eq!(r["result"]["structuredContent"]["decision"], "deny");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "confirmation"
    );
    assert_eq!(calls_received(g.dir.path()), Vec::<String>::new());
    // Asked without the field, the call is held for the user.
    let r = s.call("mcp__a__save_doc", json!({"title": "t"}));
    assert_eq!(r["result"]["structuredContent"]["decision"], "confirm");
    // The text names the tool as the client knows it.
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("toolwarden holds `mcp__a__save_doc` until"),
        "{text}"
    );
    assert!(
        text.contains("call `mcp__a__save_doc` again with the same arguments"),
        "{text}"
    );
    let r = s.call("mcp__a__save_doc", json!({"title": "t", "confirmed": true}));
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"server": "a", "tool": "save_doc", "arguments": {"title": "t"}})
    );
    assert_eq!(calls_received(g.dir.path()), ["save_doc"]);
}

#[test]
fn a_turn_ends_when_the_query_changes_and_without_queries_the_session_is_one_turn() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    for _ in 0..2 {
        let r = s.call_in("mcp__a__touch", json!({}), "save the doc");
        assert_eq!(r["result"]["isError"], Value::Null, "{r}");
    }
    let r = s.call_in("mcp__b__touch", json!({}), "save the doc");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "turn_limit"
    );
    let r = s.call("mcp__b__touch", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "turn_limit"
    );
    let r = s.call_in("mcp__b__touch", json!({}), "save the other doc");
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    // Another session has turns of its own.
    let mut t = Session::open(g.port, None).unwrap();
    let r = t.call("mcp__a__touch", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    // A read query's intent hides and refuses writes.
    let r = t.call_in("mcp__a__touch", json!({}), "show me the doc");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "intent"
    );
}

#[test]
fn identity_comes_from_a_verified_token_and_anything_else_is_401() {
    let g = start(with_identity);
    let admin = token(
        SECRET,
        json!({"sub": "ann", "roles": ["admin"], "exp": in_an_hour()}),
    );
    let mut s = Session::open(g.port, Some(&admin)).unwrap();
    assert!(s.tool_names(None).contains(&"mcp__a__hidden".to_string()));
    let r = s.call("mcp__a__hidden", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "hidden", "{r}");
    let editor = token(
        SECRET,
        json!({"sub": "bob", "roles": "editor", "exp": in_an_hour()}),
    );
    let mut e = Session::open(g.port, Some(&editor)).unwrap();
    assert!(!e.tool_names(None).contains(&"mcp__a__hidden".to_string()));
    let r = e.call("mcp__a__hidden", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "role"
    );
    // The session belongs to its principal: another's token naming it gets 404, for a message
    // (an answer to an elicitation included), a stream or a DELETE, and the session lives on.
    let stolen = Session {
        token: Some(editor.clone()),
        ..Session::open(g.port, Some(&admin)).unwrap()
    };
    let r = stolen.send(&json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept"}}));
    assert_eq!(
        (r.status, r.json()),
        (404, json!({"error": "session not found"}))
    );
    for method in ["GET", "DELETE"] {
        let raw = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n{}\r\nConnection: close\r\n\r\n",
            g.port,
            stolen.headers().join("\r\n")
        );
        let r = exchange(g.port, raw.as_bytes());
        assert_eq!((method, r.status), (method, 404));
    }
    let mut owner = Session {
        token: Some(admin.clone()),
        ..stolen
    };
    let r = owner.call("mcp__a__hidden", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "hidden", "{r}");
    // A session the gateway did not open is not found either.
    let unknown = Session {
        id: "not-a-session".to_string(),
        ..owner
    };
    let r = unknown.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(r.status, 404);
    // The token's connector allowlist is the session tier: only `b` is reachable.
    let only_b = token(
        SECRET,
        json!({"sub": "cy", "connectors": ["b"], "exp": in_an_hour()}),
    );
    let mut c = Session::open(g.port, Some(&only_b)).unwrap();
    assert_eq!(
        c.tool_names(None),
        ["mcp__b__get_doc", "mcp__b__touch", "mcp__b__calls"]
    );
    let r = c.call("mcp__a__get_doc", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "connector"
    );
    let forged = token(
        "another secret",
        json!({"sub": "eve", "roles": ["admin"], "exp": in_an_hour()}),
    );
    let expired = token(
        SECRET,
        json!({"sub": "ann", "roles": ["admin"], "exp": 1_000_000_000}),
    );
    let not_yet = token(
        SECRET,
        json!({"sub": "ann", "roles": ["admin"], "exp": in_an_hour(), "nbf": in_an_hour()}),
    );
    // A token without `sub` (or with an empty one) would share its sessions with every
    // other such token: refused.
    for claims in [
        json!({"roles": ["admin"], "exp": in_an_hour()}),
        json!({"sub": "", "roles": ["admin"], "exp": in_an_hour()}),
    ] {
        let r = Session::open(g.port, Some(&token(SECRET, claims)))
            .err()
            .expect("refused");
        assert_eq!(
            (r.status, r.json()),
            (
                401,
                json!({"error": "unauthorized: the token has no `sub` claim: the gateway keeps each subject's sessions apart, so a token must name its subject"})
            )
        );
    }
    for bad in [
        None,
        Some(forged.as_str()),
        Some(expired.as_str()),
        Some(not_yet.as_str()),
        Some("not.a.token"),
    ] {
        let r = Session::open(g.port, bad).err().expect("refused");
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert!(r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("unauthorized: "));
        // A call inside a valid session with a bad token is refused too, never forwarded.
        let mut h = s.headers();
        h.retain(|x| !x.starts_with("Authorization"));
        if let Some(b) = bad {
            h.push(format!("Authorization: Bearer {b}"));
        }
        let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                          "params": {"name": "mcp__a__touch", "arguments": {}}});
        assert_eq!(
            post(g.port, "/mcp", &h, call.to_string().as_bytes()).status,
            401
        );
    }
    assert_eq!(calls_received(g.dir.path()), ["hidden", "hidden"]);
    let api = post(g.port, "/v1/classify", &[], br#"{"query":"save it"}"#);
    assert_eq!(api.status, 401);
}

#[test]
fn bad_input_over_http_is_refused_and_nothing_unjudged_reaches_a_server() {
    let g = start(|d| {
        config(
            d,
            "[limits]\nmax_body_bytes = 2048\nrequest_timeout_secs = 1\n",
        )
    });
    let s = Session::open(g.port, None).unwrap();
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"mcp__a__touch","arguments":{{"x":"{}"}}}}}}"#,
        "y".repeat(4096)
    );
    assert_eq!(s.send_raw(big.as_bytes()).status, 413);
    let r = s.send_raw(b"{\"jsonrpc\":\"2.0\",");
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32700))
    );
    for refused in [
        // A duplicated key anywhere: the policy and the server could read different messages.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__save_doc","arguments":{"confirmed":false,"confirmed":true}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"mcp__a__erase_all"}}"#,
        // No id, a null id, a batch.
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}]"#,
        // Not JSON-RPC 2.0, or an id that is no string or 64-bit integer.
        r#"{"id":1,"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1e3,"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"mcp__a__erase_all","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":true,"method":"tools/list"}"#,
        // A null id on any request, a method that is no string, a request that is also a
        // response, a message that is neither.
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
    ] {
        let r = s.send_raw(refused.as_bytes());
        assert_eq!(r.status, 400, "{refused}: {r:?}");
        assert_eq!(r.json()["error"]["code"], -32600, "{refused}");
    }
    // A slow client: headers, then part of the body, then nothing.
    let mut slow = std::net::TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    write!(
        slow,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    )
    .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(read_response(&mut slow).status, 408);
    // The gateway still serves, and no call reached upstream `a`.
    let mut s = s;
    assert_eq!(s.tool_names(None).len(), 9);
    assert_eq!(calls_received(g.dir.path()), Vec::<String>::new());
}

#[test]
fn a_thousand_abandoned_sessions_stay_bounded_and_expire() {
    let g = start(|d| config(d, "[limits]\nmax_sessions = 50\nsession_idle_secs = 2\n"));
    let mut opened = 0;
    let mut refused = 0;
    for _ in 0..1000 {
        match Session::open(g.port, None) {
            Ok(_) => opened += 1,
            Err(r) => {
                assert_eq!(r.status, 503, "{r:?}");
                refused += 1;
            }
        }
    }
    assert!(
        opened >= 50 && refused > 0,
        "{opened} opened, {refused} refused"
    );
    // Idle sessions expire: new ones are served again.
    std::thread::sleep(Duration::from_millis(4500));
    let mut s = Session::open(g.port, None).unwrap();
    assert_eq!(s.tool_names(None).len(), 9);
}

#[test]
fn an_upstream_that_dies_is_reported_the_others_keep_working_and_it_is_reconnected() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    assert_eq!(s.tool_names(None).len(), 9);
    let r = s.call("mcp__a__crash", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let r = s.call("mcp__b__touch", json!({}));
    assert_eq!(r["result"]["structuredContent"]["server"], "b", "{r}");
    // `a` is started again on its next use.
    let r = s.call("mcp__a__get_doc", json!({}));
    assert_eq!(r["result"]["structuredContent"]["server"], "a", "{r}");
    assert_eq!(calls_received(g.dir.path()), ["crash", "get_doc"]);
}

#[test]
fn a_server_that_says_its_list_changed_is_listed_again() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    assert!(!s.tool_names(None).contains(&"mcp__a__get_late".to_string()));
    let r = s.call("mcp__a__grow", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "grow", "{r}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(s.tool_names(None).contains(&"mcp__a__get_late".to_string()));
    let r = s.call("mcp__a__get_late", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "get_late", "{r}");
}

#[test]
fn a_server_cannot_loosen_a_tool_by_listing_it_again() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    let r = s.call_in("mcp__a__touch", json!({}), "save the doc");
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    let relist = |s: &mut Session, annotations: Value| {
        let r = s.call(
            "mcp__a__grow",
            json!({"annotate": {"tool": "touch", "annotations": annotations}}),
        );
        assert_eq!(r["result"]["structuredContent"]["tool"], "grow", "{r}");
        std::thread::sleep(Duration::from_millis(300));
    };
    // The server now says touch is destructive: the policy denies effect delete here.
    relist(
        &mut s,
        json!({"readOnlyHint": false, "destructiveHint": true}),
    );
    let r = s.call_in("mcp__a__touch", json!({}), "save the doc again");
    assert_eq!(r["result"]["structuredContent"]["decision"], "deny", "{r}");
    // Listing it again as harmless does not loosen it: the strictest reading stays.
    relist(
        &mut s,
        json!({"readOnlyHint": false, "destructiveHint": false}),
    );
    let r = s.call_in("mcp__a__touch", json!({}), "save the doc once more");
    assert_eq!(r["result"]["structuredContent"]["decision"], "deny", "{r}");
    assert_eq!(calls_received(g.dir.path()), ["touch", "grow", "grow"]);
}

#[test]
fn the_decision_api_answers_the_library_json_and_errors_as_json() {
    let g = start(|d| config(d, ""));
    let r = post(g.port, "/v1/classify", &[], br#"{"query":"save the doc"}"#);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["name"], "write");
    let r = post(
        g.port,
        "/v1/offer",
        &[],
        br#"{"intent":"write","tools":[{"name":"mcp__a__touch"},{"name":"mcp__a__erase_all"}]}"#,
    );
    assert_eq!(r.json()["tools"], json!([{"name": "mcp__a__touch"}]));
    // A session the gateway did not issue is not found; one it issued counts the turn.
    let call =
        br#"{"query":"save it","call":{"name":"mcp__a__touch","arguments":{}},"session":"s1"}"#;
    let r = post(g.port, "/v1/check_call", &[], call);
    assert_eq!(
        (r.status, r.json()),
        (
            404,
            json!({"error": "unknown session `s1`: sessions are issued by the gateway (initialize, or POST /v1/sessions) to one principal, and forgotten when idle"})
        )
    );
    let r = post(g.port, "/v1/sessions", &[], b"{}");
    assert_eq!(r.status, 200);
    let id = r.json()["session"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 36, "{id}");
    let call = json!({"query": "save it", "call": {"name": "mcp__a__touch", "arguments": {}},
                      "session": id})
    .to_string();
    for expected in ["allow", "allow", "deny"] {
        let r = post(g.port, "/v1/check_call", &[], call.as_bytes());
        assert_eq!(r.json()["decision"], expected, "{r:?}");
    }
    let r = post(
        g.port,
        "/v1/check_call",
        &[],
        br#"{"call":{"name":"mcp__a__erase_all"}}"#,
    );
    assert_eq!(r.json()["metadata"]["stage"], "mode");
    let r = post(
        g.port,
        "/v1/offer",
        &[],
        br#"{"tools":[{"name":"x","annotations":{"readOnlyHint":"yes"}}]}"#,
    );
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"].as_str().unwrap().contains("schema [0]"),
        "{r:?}"
    );
    let r = post(g.port, "/v1/classify", &[], br#"{"query":"a","query":"b"}"#);
    assert_eq!(r.json()["error"]["code"], -32600);
    let r = post(g.port, "/v1/classify", &[], br#"{"text":"a"}"#);
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]
        .as_str()
        .unwrap()
        .contains("unknown field `text`"));
    // On a loopback listener, a Host that names another site is refused (DNS rebinding).
    let body = r#"{"query":"save it"}"#;
    let raw = format!(
        "POST /v1/classify HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let r = exchange(g.port, raw.as_bytes());
    assert_eq!(r.status, 403);
}

#[test]
fn with_elicitation_the_user_confirms_and_the_model_cannot() {
    let g = start(|d| config(d, ""));
    let mut s = open_eliciting(g.port);
    // No confirmation field is offered to the model of an eliciting client.
    let save = s.listed("mcp__a__save_doc", json!({}));
    assert_eq!(save["inputSchema"], json!({"type": "object"}));
    // Accepted with true: forwarded without the confirmation field (the model's own
    // `confirmed` removed too).
    let (asked, r) = call_answering(
        &s,
        "mcp__a__save_doc",
        json!({"title": "yes", "confirmed": true}),
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    let asked = asked.expect("the user was asked");
    assert!(
        asked["message"]
            .as_str()
            .unwrap()
            .starts_with(r#"Allow `mcp__a__save_doc` with arguments {"title":"yes"}?"#),
        "{asked}"
    );
    assert_eq!(asked["requestedSchema"]["required"], json!(["confirm"]));
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"server": "a", "tool": "save_doc", "arguments": {"title": "yes"}})
    );
    // Declined, cancelled, or accepted without true: not run.
    for answer in [
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        json!({"action": "accept", "content": {"confirm": false}}),
    ] {
        let (asked, r) = call_answering(
            &s,
            "mcp__a__save_doc",
            json!({"title": "no", "confirmed": true}),
            answer.clone(),
        );
        assert!(asked.is_some());
        assert_eq!(r["result"]["isError"], true, "{answer}: {r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("toolwarden did not run `mcp__a__save_doc`: the user declined it"),
            "{text}"
        );
    }
    // A second initialize cannot take elicitation away from the session (so that a model's
    // `confirmed` would then confirm): it is refused, and the user is still the one asked.
    let r = s.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(
        r["error"],
        json!({"code": -32600, "message": "Invalid Request: this session is already initialized; an MCP session has one initialize (open a new session for other capabilities)"}),
        "{r}"
    );
    let (asked, r) = call_answering(
        &s,
        "mcp__a__save_doc",
        json!({"title": "reinit", "confirmed": true}),
        json!({"action": "decline"}),
    );
    assert!(asked.is_some(), "{r}");
    assert_eq!(r["result"]["isError"], true, "{r}");
    // The question shows a right-to-left override, a line separator and a tag character in
    // the arguments escaped, not applied.
    let (asked, _) = call_answering(
        &s,
        "mcp__a__save_doc",
        json!({"title": "a\u{202e}txt.exe\u{2028}\u{e0041}"}),
        json!({"action": "decline"}),
    );
    let asked = asked.expect("the user was asked");
    let message = asked["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            r#"Allow `mcp__a__save_doc` with arguments {"title":"a\u{202e}txt.exe\u{2028}\u{e0041}"}?"#
        ),
        "{message}"
    );
    assert_eq!(calls_received(g.dir.path()), ["save_doc"]);
}

#[test]
fn rs256_tokens_verify_with_the_public_key_and_an_hs256_token_keyed_with_it_does_not() {
    // tests/fixtures/gateway/test_rs256_*.pem: a key pair made for this test only.
    let public = fixture("test_rs256_public.pem");
    let g = start(|d| {
        config(
            d,
            &format!(
                "[identity]\njwt_rs256_public_key_file = {:?}\n",
                public.display().to_string()
            ),
        )
    });
    let private = std::fs::read(fixture("test_rs256_private.pem")).unwrap();
    let claims = json!({"sub": "ann", "roles": ["admin"], "exp": in_an_hour()});
    let good = encode(
        &Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &EncodingKey::from_rsa_pem(&private).unwrap(),
    )
    .unwrap();
    let mut s = Session::open(g.port, Some(&good)).unwrap();
    assert!(s.tool_names(None).contains(&"mcp__a__hidden".to_string()));
    // The algorithm-confusion attack: HS256 with the public key's text as the secret.
    let confused = encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(&std::fs::read(&public).unwrap()),
    )
    .unwrap();
    assert_eq!(
        Session::open(g.port, Some(&confused)).err().unwrap().status,
        401
    );
}

#[test]
fn the_configured_connector_allowlist_applies_to_every_session() {
    let g = start(|d| config(d, "[connectors]\nsession = [\"a\"]\n"));
    let mut s = Session::open(g.port, None).unwrap();
    let names = s.tool_names(None);
    assert!(names.iter().all(|n| n.starts_with("mcp__a__")), "{names:?}");
    assert_eq!(names.len(), 6);
    let r = s.call("mcp__b__get_doc", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "connector"
    );
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let g = start(|d| config(d, "[limits]\nrequest_timeout_secs = 1\n"));
    let mut slow = std::net::TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    write!(slow, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = Vec::new();
    // The gateway closes the connection (an error from the read would be the 10 s timeout).
    let read = std::io::Read::read_to_end(&mut slow, &mut buf);
    assert!(read.is_ok(), "{read:?}");
    // And it still serves others.
    let mut s = Session::open(g.port, None).unwrap();
    assert_eq!(s.tool_names(None).len(), 9);
}

#[test]
fn a_client_cannot_choose_a_fresh_session_to_reset_its_turn() {
    let g = start(with_identity);
    let ann = token(SECRET, json!({"sub": "ann", "exp": in_an_hour()}));
    let bob = token(SECRET, json!({"sub": "bob", "exp": in_an_hour()}));
    let mut s = Session::open(g.port, Some(&ann)).unwrap();
    for _ in 0..2 {
        let r = s.call("mcp__a__touch", json!({}));
        assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    }
    let refused = |r: &Value| r["result"]["structuredContent"]["metadata"]["stage"].clone();
    assert_eq!(refused(&s.call("mcp__a__touch", json!({}))), "turn_limit");
    // A session id of the client's choosing is refused, on tools/call and tools/list alike.
    let unknown = "Invalid session: unknown session `fresh`: sessions are issued by the gateway (initialize, or POST /v1/sessions) to one principal, and forgotten when idle";
    let r = s.request(
        "tools/call",
        json!({"name": "mcp__a__touch", "arguments": {}, "_meta": {"toolwarden/session": "fresh"}}),
    );
    assert_eq!(
        (r["error"]["code"].clone(), r["error"]["message"].clone()),
        (json!(-32602), json!(unknown)),
        "{r}"
    );
    let r = s.request(
        "tools/list",
        json!({"_meta": {"toolwarden/session": "fresh"}}),
    );
    assert_eq!(r["error"]["message"], unknown, "{r}");
    // Another principal's issued session is unknown to this one.
    let bobs = post(
        g.port,
        "/v1/sessions",
        &[format!("Authorization: Bearer {bob}")],
        b"{}",
    )
    .json()["session"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s.request(
        "tools/call",
        json!({"name": "mcp__a__touch", "arguments": {}, "_meta": {"toolwarden/session": bobs}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        r["error"]["message"],
        format!("Invalid session: unknown session `{bobs}`: sessions are issued by the gateway (initialize, or POST /v1/sessions) to one principal, and forgotten when idle")
    );
    // Still one turn: the limit holds, and only the two calls reached `a`.
    assert_eq!(refused(&s.call("mcp__a__touch", json!({}))), "turn_limit");
    assert_eq!(calls_received(g.dir.path()), ["touch", "touch"]);
}

#[test]
fn a_principal_at_its_session_cap_is_refused_and_cannot_evict_another_principals_session() {
    let g = start(|d| {
        format!(
            "{}[limits]\nmax_sessions = 6\nmax_sessions_per_principal = 3\n",
            with_identity(d)
        )
    });
    let ann = token(SECRET, json!({"sub": "ann", "exp": in_an_hour()}));
    let bob = token(SECRET, json!({"sub": "bob", "exp": in_an_hour()}));
    let mut b = Session::open(g.port, Some(&bob)).unwrap();
    let r = b.call("mcp__a__touch", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    let kept: Vec<Session> = (0..3)
        .map(|_| Session::open(g.port, Some(&ann)).unwrap())
        .collect();
    for _ in 0..3 {
        let r = Session::open(g.port, Some(&ann)).err().expect("refused");
        assert_eq!(
            (r.status, r.json()),
            (
                429,
                json!({"error": "this principal keeps 3 sessions, its limit; let one expire or end it first"})
            )
        );
    }
    let r = post(
        g.port,
        "/v1/sessions",
        &[format!("Authorization: Bearer {ann}")],
        b"{}",
    );
    assert_eq!(r.status, 429, "{r:?}");
    // Bob's session lives on with its turn: one more call, then the limit.
    let r = b.call("mcp__a__touch", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    let r = b.call("mcp__a__touch", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"],
        "turn_limit"
    );
    // A session ended by its client makes room.
    let raw = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{}\r\nConnection: close\r\n\r\n",
        g.port,
        kept[0].headers().join("\r\n")
    );
    assert_eq!(exchange(g.port, raw.as_bytes()).status, 202);
    assert!(Session::open(g.port, Some(&ann)).is_ok());
}

/// `[servers.NAME]` of upstream.py under `NAME`, for the servers that list badly.
fn bad_lister(name: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = [\"python3\", {:?}, \"{name}\"]\n",
        fixture("upstream.py").display().to_string()
    )
}

fn unavailable_of(r: &Value) -> Vec<(String, String)> {
    r["result"]["_meta"]["toolwarden/unavailable"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|u| {
                    (
                        u["server"].as_str().unwrap().to_string(),
                        u["reason"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_hung_or_looping_upstream_is_reported_quickly_and_the_others_keep_working() {
    let g = start(|d| {
        config(
            d,
            &format!(
                "[limits]\nlist_timeout_secs = 3\nupstream_retry_secs = 30\nmax_list_pages = 3\n{}{}{}",
                bad_lister("hang"),
                bad_lister("loop"),
                bad_lister("pages")
            ),
        )
    });
    let mut s = Session::open(g.port, None).unwrap();
    let started = std::time::Instant::now();
    let r = s.request("tools/list", json!({}));
    let first = started.elapsed();
    let expected = vec![
        ("hang".to_string(), "no tool list within 3 s".to_string()),
        (
            "loop".to_string(),
            "tools/list repeated the cursor `same`".to_string(),
        ),
        (
            "pages".to_string(),
            "tools/list has more than 3 pages (max_list_pages)".to_string(),
        ),
    ];
    assert_eq!(unavailable_of(&r), expected, "{r}");
    assert!(
        first < Duration::from_secs(6),
        "the first list took {first:?}"
    );
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 9, "{r}");
    // The failures are kept for the retry time: the next list does not wait on them.
    let started = std::time::Instant::now();
    let r = s.request("tools/list", json!({}));
    let second = started.elapsed();
    assert_eq!(unavailable_of(&r), expected, "{r}");
    assert!(
        second < Duration::from_millis(700),
        "the second list took {second:?}"
    );
    // A call to the hung server is refused at once; the others' calls run.
    let started = std::time::Instant::now();
    let r = s.call("mcp__hang__get_doc", json!({}));
    assert!(started.elapsed() < Duration::from_millis(700));
    assert_eq!(
        r["result"]["content"][0]["text"],
        "toolwarden: server `hang` is unavailable (no tool list within 3 s); `mcp__hang__get_doc` was not run"
    );
    let r = s.call("mcp__a__touch", json!({}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
}

#[test]
fn an_upstreams_error_cannot_forge_a_gateway_log_line() {
    let g = start(|d| config(d, &bad_lister("forge")));
    let mut s = Session::open(g.port, None).unwrap();
    let r = s.request("tools/list", json!({}));
    let reasons = unavailable_of(&r);
    assert_eq!(reasons.len(), 1, "{r}");
    assert_eq!(reasons[0].0, "forge");
    assert!(
        reasons[0]
            .1
            .contains("no list\ntoolwarden gateway: forged line"),
        "{r}"
    );
    // Both lines that tell of it, each one line with the line feed escaped; no line of its own.
    let expected = [
        "toolwarden gateway: server `forge` is unavailable: tools/list failed: Mcp error: -32000: no list\\u{a}toolwarden gateway: forged line",
        "toolwarden gateway: tools/list: server `forge` is unavailable (tools/list failed: Mcp error: -32000: no list\\u{a}toolwarden gateway: forged line); its tools are not listed",
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while g.logged("forged line").len() < expected.len() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(g.logged("forged line"), expected);
}

#[test]
fn an_upstream_listing_more_tools_than_the_cap_is_reported() {
    let g = start(|d| config(d, "[limits]\nmax_tools_per_server = 7\n"));
    let mut s = Session::open(g.port, None).unwrap();
    let r = s.request("tools/list", json!({}));
    let reason = "tools/list has more than 7 tools (max_tools_per_server)".to_string();
    assert_eq!(
        unavailable_of(&r),
        [("a".to_string(), reason.clone()), ("b".to_string(), reason)],
        "{r}"
    );
    assert_eq!(r["result"]["tools"], json!([]));
}

#[test]
fn in_advisory_mode_every_call_is_forwarded_and_the_audit_log_says_what_would_have_been_refused() {
    let g = start(|d| config(d, "advisory = true\n"));
    let mut s = Session::open(g.port, None).unwrap();
    // Every tool with a name is shown, the ones the policy would hide included.
    let names = s.tool_names(None);
    assert_eq!(names.len(), 16, "{names:?}");
    assert!(names.contains(&"mcp__a__erase_all".to_string()));
    assert!(names.contains(&"mcp__a__hidden".to_string()));
    for (tool, args) in [
        ("erase_all", json!({})),
        ("hidden", json!({})),
        ("save_doc", json!({"title": "t"})),
        ("touch", json!({})),
    ] {
        let r = s.call(&format!("mcp__a__{tool}"), args.clone());
        assert_eq!(
            r["result"]["structuredContent"],
            json!({"server": "a", "tool": tool, "arguments": args}),
            "{r}"
        );
    }
    assert_eq!(
        calls_received(g.dir.path()),
        ["erase_all", "hidden", "save_doc", "touch"]
    );
    let audit = std::fs::read_to_string(g.dir.path().join("audit.jsonl")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            json!([
                v["policy_tool"],
                v["decision"],
                v["stage"],
                v["advisory"],
                v["forwarded"]
            ])
        })
        .collect();
    assert_eq!(
        lines,
        [
            json!(["mcp__a__erase_all", "deny", "mode", true, true]),
            json!(["mcp__a__hidden", "deny", "role", true, true]),
            json!(["mcp__a__save_doc", "confirm", "confirmation", true, true]),
            json!(["mcp__a__touch", "allow", null, true, true]),
        ]
    );
}

#[test]
fn a_token_mode_claim_selects_that_mode_and_a_mode_the_policy_lacks_is_refused() {
    let g = start(|d| {
        std::fs::write(d.join("jwt.secret"), SECRET).unwrap();
        config(
            d,
            &format!(
                "[identity]\njwt_hs256_secret_file = {:?}\nmode_claim = \"mode\"\n",
                d.join("jwt.secret").display().to_string()
            ),
        )
    });
    let as_mode = |mode: Option<&str>| {
        let mut claims = json!({"sub": "ann", "exp": in_an_hour()});
        if let Some(m) = mode {
            claims["mode"] = Value::from(m);
        }
        token(SECRET, claims)
    };
    let mut r = Session::open(g.port, Some(&as_mode(Some("readonly")))).unwrap();
    assert_eq!(
        r.tool_names(None),
        [
            "mcp__a__get_doc",
            "mcp__a__calls",
            "mcp__a__crash",
            "mcp__a__grow",
            "mcp__b__get_doc",
            "mcp__b__calls",
        ]
    );
    let c = r.call("mcp__a__touch", json!({}));
    assert_eq!(
        c["result"]["structuredContent"]["metadata"]["stage"], "mode",
        "{c}"
    );
    for mode in [Some("agent"), None] {
        let mut a = Session::open(g.port, Some(&as_mode(mode))).unwrap();
        let c = a.call("mcp__a__touch", json!({}));
        assert_eq!(c["result"]["structuredContent"]["tool"], "touch", "{c}");
    }
    assert_eq!(calls_received(g.dir.path()), ["touch", "touch"]);
    let undeclared = as_mode(Some("root"));
    let refusal = json!({"error": "forbidden: the mode `root` is not a mode of the policy (agent, readonly)"});
    let r = Session::open(g.port, Some(&undeclared))
        .err()
        .expect("refused");
    assert_eq!((r.status, r.json()), (403, refusal.clone()));
    let r = post(
        g.port,
        "/v1/check_call",
        &[format!("Authorization: Bearer {undeclared}")],
        br#"{"call":{"name":"mcp__a__touch"}}"#,
    );
    assert_eq!((r.status, r.json()), (403, refusal));
}

#[test]
fn resources_and_prompts_are_refused_with_the_reason_and_reach_no_server() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    for (method, params) in [
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "file:///etc/passwd"})),
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "mcp__a__p"})),
    ] {
        let r = s.request(method, params);
        assert_eq!(
            r["error"],
            json!({"code": -32601,
                   "message": format!("Method not found: {method}: the toolwarden gateway serves tools only; the policy judges tool calls, and upstream resources and prompts are not forwarded unjudged"),
                   "data": {"method": method}}),
            "{r}"
        );
    }
    assert_eq!(calls_received(g.dir.path()), Vec::<String>::new());
}

#[test]
fn the_decision_api_never_takes_a_confirmation_field_as_the_users_confirmation() {
    let g = start(|d| config(d, ""));
    // Without a session: the field is the caller's own, so the call stays held.
    let r = post(
        g.port,
        "/v1/check_call",
        &[],
        br#"{"call":{"name":"mcp__a__save_doc","arguments":{"confirmed":true}}}"#,
    );
    assert_eq!(r.status, 200);
    let j = r.json();
    assert_eq!(j["decision"], "confirm", "{j}");
    assert_eq!(j["metadata"]["stage"], "confirmation", "{j}");
    assert_eq!(j["pending_call"]["args"], json!({}), "{j}");
    assert_eq!(j.get("confirmation_received"), None, "{j}");
    // With a session: still held, and nothing counts in the turn.
    let id = post(g.port, "/v1/sessions", &[], b"{}").json()["session"]
        .as_str()
        .unwrap()
        .to_string();
    let held = json!({"query": "save it", "session": id,
                      "call": {"name": "mcp__a__save_doc", "arguments": {"title": "t", "confirmed": true}}})
    .to_string();
    for _ in 0..3 {
        let j = post(g.port, "/v1/check_call", &[], held.as_bytes()).json();
        assert_eq!(j["decision"], "confirm", "{j}");
        assert_eq!(j["pending_call"]["args"], json!({"title": "t"}), "{j}");
        assert_eq!(j.get("confirmation_received"), None, "{j}");
    }
    // The turn allows two `touch` calls: none of the held calls took one.
    let touch = json!({"query": "save it", "session": id,
                       "call": {"name": "mcp__a__touch", "arguments": {}}})
    .to_string();
    let decisions: Vec<Value> = (0..3)
        .map(|_| post(g.port, "/v1/check_call", &[], touch.as_bytes()).json()["decision"].clone())
        .collect();
    assert_eq!(decisions, [json!("allow"), json!("allow"), json!("deny")]);
    assert_eq!(calls_received(g.dir.path()), Vec::<String>::new());
}

#[test]
fn a_tool_the_server_never_listed_is_unknown_and_never_forwarded() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    // Each name matches the policy's `mcp__*__get_*` glob, but server `a`/`b` lists none.
    for name in [
        "mcp__b__get_secret_admin_thing",
        "mcp__a__get_doc__x",
        "mcp__a__get_../erase_all",
    ] {
        let r = s.call(name, json!({}));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(
            r["error"]["message"],
            format!("Unknown tool: {name}"),
            "{r}"
        );
        let (server, tool) = (&name[5..6], &name[8..]);
        assert_eq!(
            r["error"]["data"],
            json!({"reason": format!("server `{server}` does not list a tool `{tool}`"),
                   "blocked_by_policy": true}),
            "{r}"
        );
    }
    // A listed tool the glob matches still runs.
    let r = s.call("mcp__a__get_doc", json!({}));
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"server": "a", "tool": "get_doc", "arguments": {}})
    );
    assert_eq!(calls_received(g.dir.path()), ["get_doc"]);
}

#[test]
fn a_configured_audience_and_issuer_are_required_and_critical_headers_are_refused() {
    let g = start(|d| {
        std::fs::write(d.join("jwt.secret"), SECRET).unwrap();
        config(
            d,
            &format!(
                "[identity]\njwt_hs256_secret_file = {:?}\nissuer = \"idp\"\naudience = \"gw\"\n",
                d.join("jwt.secret").display().to_string()
            ),
        )
    });
    let refused = |claims: Value| {
        let r = Session::open(g.port, Some(&token(SECRET, claims)))
            .err()
            .expect("refused");
        assert_eq!(r.status, 401, "{r:?}");
        r.json()["error"].as_str().unwrap().to_string()
    };
    let exp = in_an_hour();
    let missing_aud = "unauthorized: invalid token: Missing required claim: aud";
    let missing_iss = "unauthorized: invalid token: Missing required claim: iss";
    for (claims, expected) in [
        (json!({"sub": "ann", "iss": "idp", "exp": exp}), missing_aud),
        (json!({"sub": "ann", "iss": "idp", "aud": 5, "exp": exp}), missing_aud),
        (json!({"sub": "ann", "iss": "idp", "aud": null, "exp": exp}), missing_aud),
        (json!({"sub": "ann", "aud": "gw", "exp": exp}), missing_iss),
        (json!({"sub": "ann", "iss": 5, "aud": "gw", "exp": exp}), missing_iss),
        (json!({"sub": "ann", "iss": null, "aud": "gw", "exp": exp}), missing_iss),
        (
            json!({"sub": "ann", "iss": "other", "aud": "gw", "exp": exp}),
            "unauthorized: invalid token: InvalidIssuer",
        ),
        (
            json!({"sub": "ann", "iss": "idp", "aud": "other", "exp": exp}),
            "unauthorized: invalid token: InvalidAudience",
        ),
        (
            json!({"sub": " \t ", "iss": "idp", "aud": "gw", "exp": exp}),
            "unauthorized: the token has no `sub` claim: the gateway keeps each subject's sessions apart, so a token must name its subject",
        ),
    ] {
        assert_eq!(refused(claims.clone()), expected, "{claims}");
    }
    let good = json!({"sub": "ann", "iss": "idp", "aud": ["gw", "x"], "exp": exp});
    assert!(Session::open(g.port, Some(&token(SECRET, good.clone()))).is_ok());
    // RFC 7515 §4.1.11: a critical extension the gateway does not understand refuses the token.
    let crit = encode(
        &Header {
            crit: Some(vec!["exp".to_string()]),
            ..Header::default()
        },
        &good,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    let r = Session::open(g.port, Some(&crit)).err().expect("refused");
    assert_eq!(
        (r.status, r.json()),
        (
            401,
            json!({"error": "unauthorized: invalid token: its header has a `crit` parameter, and the gateway understands no critical extension"})
        )
    );
}

#[test]
fn a_tools_list_cursor_out_of_range_is_invalid_params_and_the_session_keeps_working() {
    let g = start(|d| config(d, ""));
    let mut s = Session::open(g.port, None).unwrap();
    // A page from the 9th tool (index 8) is the last tool alone.
    let r = s.request("tools/list", json!({"cursor": "8"}));
    assert_eq!(r["result"]["tools"][0]["name"], "mcp__b__calls", "{r}");
    assert_eq!(r["result"]["tools"].as_array().map(Vec::len), Some(1));
    assert_eq!(r["result"].get("nextCursor"), None);
    for cursor in [
        "18446744073709551615",
        "18446744073709551616",
        "9",
        "-1",
        "x",
    ] {
        let r = s.request("tools/list", json!({"cursor": cursor}));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(
            r["error"]["message"],
            format!("Invalid params: invalid cursor `{cursor}`"),
            "{r}"
        );
    }
    assert_eq!(s.tool_names(None).len(), 9);
}

#[test]
fn a_principal_ends_its_own_decision_api_sessions_and_no_one_elses() {
    let g = start(|d| {
        format!(
            "{}[limits]\nmax_sessions_per_principal = 2\n",
            with_identity(d)
        )
    });
    let ann = format!(
        "Authorization: Bearer {}",
        token(SECRET, json!({"sub": "ann", "exp": in_an_hour()}))
    );
    let bob = format!(
        "Authorization: Bearer {}",
        token(SECRET, json!({"sub": "bob", "exp": in_an_hour()}))
    );
    let open = || post(g.port, "/v1/sessions", std::slice::from_ref(&ann), b"{}");
    let first = open().json()["session"].as_str().unwrap().to_string();
    assert_eq!(open().status, 200);
    assert_eq!(open().status, 429);
    let delete = |who: &str, id: &str| {
        let raw = format!(
            "DELETE /v1/sessions/{id} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{who}\r\nConnection: close\r\n\r\n",
            g.port
        );
        let r = exchange(g.port, raw.as_bytes());
        (r.status, r.json())
    };
    let unknown = format!("unknown session `{first}`: sessions are issued by the gateway (initialize, or POST /v1/sessions) to one principal, and forgotten when idle");
    assert_eq!(delete(&bob, &first), (404, json!({"error": unknown})));
    assert_eq!(delete(&ann, &first), (200, json!({"closed": first})));
    assert_eq!(delete(&ann, &first), (404, json!({"error": unknown})));
    // The ended session is gone for check_call too, and its slot is free.
    let call = json!({"call": {"name": "mcp__a__touch"}, "session": first}).to_string();
    let r = post(
        g.port,
        "/v1/check_call",
        std::slice::from_ref(&ann),
        call.as_bytes(),
    );
    assert_eq!(r.status, 404);
    assert_eq!(open().status, 200);
}

/// The configuration of `config` with the flow policy (tests/fixtures/gateway/flow.warden).
fn with_flow(dir: &std::path::Path) -> String {
    config(dir, "").replace(
        &format!("{:?}", fixture("gateway.warden").display().to_string()),
        &format!("{:?}", fixture("flow.warden").display().to_string()),
    )
}

#[test]
fn a_tainting_call_puts_its_label_on_its_session_only_and_later_writes_need_confirmation() {
    let g = start(with_flow);
    let mut s = Session::open(g.port, None).unwrap();
    let mut other = Session::open(g.port, None).unwrap();
    let touch_schema = |s: &mut Session| s.listed("mcp__a__touch", json!({}));
    // Before any label, a write is allowed and listed without a confirmation field (the
    // policy allows two writes per turn: this one and the confirmed one below).
    assert_eq!(
        touch_schema(&mut s)["inputSchema"]["properties"]["confirmed"],
        Value::Null
    );
    let r = s.call("mcp__a__touch", json!({"x": 1}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    // `b`'s get_doc taints nothing; `a`'s puts `untrusted` on the session.
    let r = s.call("mcp__b__get_doc", json!({}));
    assert_eq!(r["result"]["structuredContent"]["server"], "b", "{r}");
    let r = s.call("mcp__a__get_doc", json!({}));
    assert_eq!(r["result"]["structuredContent"]["server"], "a", "{r}");
    // Now a write is held for the user at stage flow, naming the label and the call.
    let r = s.call("mcp__a__touch", json!({"x": 3}));
    let sc = &r["result"]["structuredContent"];
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(sc["decision"], "confirm", "{r}");
    assert_eq!(sc["metadata"]["stage"], "flow", "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(
            "(the session read untrusted content from mcp__a__get_doc in turn 1, and `after untrusted` confirms effect `write`) (stage flow, rule at "
        ),
        "{text}"
    );
    // The listing marks it: the confirmation field is declared.
    assert_eq!(
        touch_schema(&mut s)["inputSchema"]["properties"]["confirmed"]["type"],
        "boolean"
    );
    // Confirmed with the digest-bound field, it runs.
    let r = s.call("mcp__a__touch", json!({"x": 3, "confirmed": true}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    // The other session holds no label: the same write is allowed and listed plainly.
    assert_eq!(
        touch_schema(&mut other)["inputSchema"]["properties"]["confirmed"],
        Value::Null
    );
    let r = other.call("mcp__a__touch", json!({"x": 4}));
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    assert_eq!(
        calls_received(g.dir.path()),
        ["touch", "get_doc", "touch", "touch"]
    );
    // The audit log names stage flow for the held call.
    let audit = std::fs::read_to_string(g.dir.path().join("audit.jsonl")).unwrap();
    let flow: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["stage"] == "flow")
        .collect();
    assert_eq!(flow.len(), 1, "{audit}");
    assert_eq!(flow[0]["decision"], "confirm");
}

#[test]
fn the_decision_api_judges_a_session_with_its_labels_and_an_allowed_call_adds_them() {
    let g = start(with_flow);
    let open = || {
        post(g.port, "/v1/sessions", &[], b"{}").json()["session"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (id, fresh) = (open(), open());
    let check = |session: Option<&str>, name: &str| {
        let mut body = json!({"call": {"name": name, "arguments": {}}});
        if let Some(s) = session {
            body["session"] = Value::from(s);
        }
        let r = post(g.port, "/v1/check_call", &[], body.to_string().as_bytes());
        assert_eq!(r.status, 200, "{r:?}");
        let j = r.json();
        (
            j["decision"].as_str().unwrap().to_string(),
            j["metadata"]["stage"].as_str().unwrap_or("").to_string(),
        )
    };
    let flow = ("confirm".to_string(), "flow".to_string());
    assert_eq!(check(Some(&id), "mcp__a__get_doc").0, "allow");
    assert_eq!(check(Some(&id), "mcp__a__touch"), flow);
    // The label is the session's for /mcp too.
    let mut s = Session::open(g.port, None).unwrap();
    let r = s.request(
        "tools/call",
        json!({"name": "mcp__a__touch", "arguments": {},
               "_meta": {"toolwarden/session": id}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"], "flow",
        "{r}"
    );
    // Without a session, or in another one, no label applies.
    assert_eq!(check(None, "mcp__a__touch").0, "allow");
    assert_eq!(check(Some(&fresh), "mcp__a__touch").0, "allow");
}

#[test]
fn with_elicitation_only_a_client_without_elicitation_cannot_confirm_and_the_user_still_can() {
    let g = start(|d| config(d, "elicitation_only = true"));
    let mut s = Session::open(g.port, None).unwrap();
    // No confirmation field is offered to the model.
    let save = s.listed("mcp__a__save_doc", json!({}));
    assert_eq!(save["inputSchema"], json!({"type": "object"}));
    // A call that needs confirmation is refused, with or without the model's field, and
    // nothing is held for a repeat to confirm.
    for args in [
        json!({"title": "t"}),
        json!({"title": "t", "confirmed": true}),
    ] {
        let r = s.call("mcp__a__save_doc", args.clone());
        let structured = &r["result"]["structuredContent"];
        assert_eq!(
            (
                structured["decision"].clone(),
                structured["metadata"]["stage"].clone()
            ),
            (json!("deny"), json!("confirmation")),
            "{args}: {r}"
        );
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            text,
            "toolwarden did not run `mcp__a__save_doc`: it needs the user's confirmation (`mcp__a__save_doc` says `confirm always`), and this gateway takes it only through elicitation, which this client did not declare"
        );
    }
    // A call that needs none still runs.
    let r = s.call("mcp__a__touch", json!({}));
    assert_eq!(r["result"]["isError"], Value::Null, "{r}");
    // An eliciting client's user confirms as before.
    let e = open_eliciting(g.port);
    let (asked, r) = call_answering(
        &e,
        "mcp__a__save_doc",
        json!({"title": "yes"}),
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    assert!(asked.is_some(), "{r}");
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"server": "a", "tool": "save_doc", "arguments": {"title": "yes"}})
    );
    assert_eq!(calls_received(g.dir.path()), ["touch", "save_doc"]);
}

#[test]
fn a_request_with_an_id_still_in_flight_in_its_session_is_refused_and_the_id_is_free_after() {
    let g = start(|d| config(d, ""));
    let mut s = open_eliciting(g.port);
    let (asked, r) = call_answering_with(
        &s,
        "mcp__a__save_doc",
        json!({"title": "t"}),
        json!({"action": "decline"}),
        |s| {
            // The call (id 77) waits for the user: another request with id 77 in this session
            // is refused, not answered with the call's result.
            let r = s.send(&json!({"jsonrpc": "2.0", "id": 77, "method": "tools/list"}));
            assert_eq!(r.status, 400, "{r:?}");
            assert_eq!(
                r.json()["error"],
                json!({"code": -32600, "message": "Invalid Request: a request with this id is still being answered in this session; send it with another id"})
            );
            // Another session may use the same id.
            let mut other = Session::open(s.port, None).unwrap();
            other.next = 76;
            assert!(other.request("tools/list", json!({}))["result"]["tools"].is_array());
        },
    );
    assert!(asked.is_some(), "{r}");
    assert_eq!(r["result"]["isError"], true, "{r}");
    // Answered, the id is free again.
    s.next = 76;
    assert!(s.request("tools/list", json!({}))["result"]["tools"].is_array());
    // A call waiting for the user outlives its closed connection: its id stays taken until
    // the call ends, so its result cannot answer a later request with that id.
    let mut reader = start_call(&s, "mcp__a__save_doc", json!({"title": "gone"}));
    let asked = next_message(&mut reader);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    drop(reader);
    let reuse = json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                       "params": {"name": "mcp__a__touch", "arguments": {}}});
    let r = s.send(&reuse);
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32600)),
        "{r:?}"
    );
    let reply = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}});
    assert_eq!(s.send(&reply).status, 202);
    // Declined, the call ends and the id is free (within a few seconds: the call's end is
    // noticed by the gateway, not the test).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = s.send(&reuse);
        if r.status == 200 || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(r.status, 200, "{r:?}");
    let touched = r.json();
    assert_eq!(
        touched["result"]["structuredContent"]["tool"], "touch",
        "{touched}"
    );
    assert_eq!(calls_received(g.dir.path()), ["touch"]);
}
