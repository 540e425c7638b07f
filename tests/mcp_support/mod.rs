//! A deterministic harness around [`toolwarden::mcp::Session`]: a scripted MCP server (two
//! pages of tools, every call recorded), an in-memory audit log that can be made to fail, and
//! the invariant every run must keep. Shared by tests/mcp_session.rs, tests/mcp_properties.rs
//! and the fuzz target fuzz/fuzz_targets/mcp_session.rs.

#![allow(dead_code)]

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use toolwarden::audit::Clock;
use toolwarden::mcp::{Judge, Outcome, Session};
use toolwarden::{Intent, Policy, Request};

/// tests/fixtures/proxy/fake.warden: mode `agent` allows effects none and write; `erase_all`
/// is `delete`; `save_note` needs confirmation; `sneaky` is declared `none` but its
/// annotations say destructive.
pub const POLICY: &str = include_str!("../fixtures/proxy/fake.warden");

/// The tools the scripted server lists, in two pages.
pub fn pages() -> [Vec<Value>; 2] {
    [
        vec![
            json!({"name": "get_note", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}),
            json!({"name": "echo", "inputSchema": {"type": "object"}}),
            json!({"name": "save_note", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": false, "destructiveHint": false}}),
        ],
        vec![
            json!({"name": "erase_all", "inputSchema": {"type": "object"}}),
            json!({"name": "sneaky", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": false, "destructiveHint": true}}),
            json!({"name": "broken_hints", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}}),
            json!({"name": "mystery", "inputSchema": {"type": "object"}}),
        ],
    ]
}

/// Tools no call may reach in enforcing mode under intent `write`.
pub const NEVER_RUN: [&str; 4] = ["erase_all", "sneaky", "broken_hints", "mystery"];

/// An audit sink in memory; `fail` makes every write fail.
#[derive(Clone, Default)]
pub struct Memory {
    pub bytes: Arc<Mutex<Vec<u8>>>,
    pub fail: Arc<AtomicBool>,
}

impl Write for Memory {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("the disk is full"));
        }
        self.bytes.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A clock the test sets ([`Harness::set_time`]).
#[derive(Clone)]
pub struct TestClock(pub Arc<Mutex<String>>);

impl Clock for TestClock {
    fn now(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

/// A session, its scripted server and what each side received.
pub struct Harness {
    pub session: Session,
    pub audit: Memory,
    pub advisory: bool,
    /// Every message the server received, in order (batch elements one by one).
    pub server_got: Vec<Value>,
    /// Every message the client received, in order.
    pub client_got: Vec<Value>,
    /// Every log line.
    pub log: Vec<String>,
    /// The waits the session asked for, not yet expired.
    pub waits: Vec<u64>,
    /// Whether the scripted server answers tools/list (else it stays silent).
    pub server_lists: bool,
    /// The two pages the scripted server lists ([`pages`] at first).
    pub tools: [Vec<Value>; 2],
    /// When set, the scripted server's result for every tools/call.
    pub call_result: Option<Value>,
    /// The time the session reads.
    pub time: Arc<Mutex<String>>,
    /// Every element the client sent that parses as a JSON object, in order.
    pub client_sent: Vec<Value>,
    /// How many lines the client sent.
    pub lines: usize,
    /// For each message the server received, the client line being handled then (0 before
    /// the first).
    pub server_got_at: Vec<usize>,
    /// `save_note` requests (with an id, no confirmation) the client sent: (line, arguments).
    pub asked: Vec<(usize, Value)>,
}

impl Harness {
    /// A session under fake.warden, server `notes`, intent `write`, with an audit log.
    pub fn new(advisory: bool) -> Harness {
        let policy = Policy::parse(POLICY, "fake.warden").expect("fake.warden loads");
        let judge = Judge::new(
            policy,
            Request::default_mode(),
            Intent::named("write"),
            Some("notes".to_string()),
            advisory,
        )
        .expect("the request fits");
        let audit = Memory::default();
        let time = Arc::new(Mutex::new("2026-12-01T00:00:00.000Z".to_string()));
        let session = Session::new(
            judge,
            Some(Box::new(audit.clone())),
            Box::new(TestClock(time.clone())),
        );
        Harness {
            session,
            audit,
            advisory,
            server_got: Vec::new(),
            client_got: Vec::new(),
            log: Vec::new(),
            waits: Vec::new(),
            server_lists: true,
            tools: pages(),
            call_result: None,
            time,
            client_sent: Vec::new(),
            lines: 0,
            server_got_at: Vec::new(),
            asked: Vec::new(),
        }
    }

    /// Sets the session's clock (RFC 3339 UTC).
    pub fn set_time(&mut self, time: &str) {
        *self.time.lock().unwrap() = time.to_string();
    }

    /// The client sends one line.
    pub fn client(&mut self, text: &[u8]) {
        self.lines += 1;
        let items = match serde_json::from_slice::<Value>(text) {
            Ok(Value::Array(items)) => items.into_iter().filter(Value::is_object).collect(),
            Ok(v) if v.is_object() => vec![v],
            _ => Vec::new(),
        };
        for m in &items {
            let args = m["params"]["arguments"].clone();
            let args = if args.is_null() { json!({}) } else { args };
            if m["method"] == "tools/call"
                && m["params"]["name"] == "save_note"
                && m.get("id").is_some_and(|id| !id.is_null())
                && args.get("confirmed").is_none()
            {
                self.asked.push((self.lines, args));
            }
        }
        self.client_sent.extend(items);
        let out = self.session.from_client(text);
        self.take(out);
    }

    /// The client sends one message.
    pub fn client_json(&mut self, msg: &Value) {
        self.client(msg.to_string().as_bytes());
    }

    /// The server sends one line of its own.
    pub fn server(&mut self, text: &[u8]) {
        let out = self.session.from_server(text);
        self.take(out);
    }

    /// Every wait the session asked for ends now.
    pub fn expire(&mut self) {
        for generation in std::mem::take(&mut self.waits) {
            let out = self.session.wait_expired(generation);
            self.take(out);
        }
    }

    /// initialize + notifications/initialized, answered by the server.
    pub fn handshake(&mut self) {
        self.client_json(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}));
        self.client_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn take(&mut self, out: Outcome) {
        // In the order the session produced them, so the server sees calls in judging order.
        let mut work = std::collections::VecDeque::from([out]);
        while let Some(out) = work.pop_front() {
            self.log.extend(out.log);
            self.client_got.extend(out.to_client);
            self.waits.extend(out.wait);
            for msg in out.to_server {
                let items = match msg {
                    Value::Array(items) => items,
                    m => vec![m],
                };
                for item in items {
                    if let Some(answer) = self.answer(&item) {
                        work.push_back(self.session.from_server(answer.to_string().as_bytes()));
                    }
                    self.server_got.push(item);
                    self.server_got_at.push(self.lines);
                }
            }
        }
    }

    /// The scripted server's answer to one message.
    fn answer(&self, msg: &Value) -> Option<Value> {
        let id = msg.get("id")?.clone();
        msg.get("method")?;
        match msg["method"].as_str() {
            Some("initialize") => Some(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "scripted", "version": "1"}}})),
            Some("tools/list") if self.server_lists => {
                let [first, second] = self.tools.clone();
                Some(match msg["params"]["cursor"].as_str() {
                    Some("2") => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": second}}),
                    _ => {
                        json!({"jsonrpc": "2.0", "id": id, "result": {"tools": first, "nextCursor": "2"}})
                    }
                })
            }
            Some("tools/list") => None,
            Some("tools/call") => Some(json!({"jsonrpc": "2.0", "id": id, "result":
                self.call_result.clone().unwrap_or_else(|| json!({
                "content": [{"type": "text", "text": format!("called {}", msg["params"]["name"])}]}))})),
            _ => Some(json!({"jsonrpc": "2.0", "id": id, "result": {}})),
        }
    }

    /// The audit records, parsed.
    pub fn records(&self) -> Vec<Value> {
        String::from_utf8(self.audit.bytes.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The `tools/call` messages the server received.
    pub fn calls_received(&self) -> Vec<&Value> {
        self.server_got
            .iter()
            .filter(|m| m.get("method").and_then(Value::as_str) == Some("tools/call"))
            .collect()
    }

    /// The invariant: the server received exactly the calls the audit log records as
    /// forwarded, in order, never one more; in enforcing mode every one was allowed and none
    /// is a tool the policy refuses.
    pub fn check(&self) {
        let received: Vec<String> = self
            .calls_received()
            .iter()
            .map(|m| m["params"]["name"].as_str().unwrap_or("?").to_string())
            .collect();
        let records = self.records();
        let forwarded: Vec<String> = records
            .iter()
            .filter(|r| r["event"] == "tools/call" && r["forwarded"] == true)
            .map(|r| r["tool"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            received, forwarded,
            "server calls vs audit; log: {:?}",
            self.log
        );
        if !self.advisory {
            for r in &records {
                if r["event"] == "tools/call" && r["forwarded"] == true {
                    assert_eq!(r["decision"], "allow", "{r}");
                }
            }
            for name in &received {
                assert!(
                    !NEVER_RUN.contains(&name.as_str()),
                    "{name} reached the server"
                );
            }
        }
        // Every message the server got is a JSON-RPC object it can read.
        for m in &self.server_got {
            assert!(m.is_object(), "{m}");
        }
        // A call that needs confirmation runs only after the client asked for it without the
        // confirmation in an earlier line (never in the same line or batch).
        if !self.advisory {
            for (m, &at) in self.server_got.iter().zip(&self.server_got_at) {
                if m["method"] == "tools/call" && m["params"]["name"] == "save_note" {
                    let args = &m["params"]["arguments"];
                    assert!(
                        self.asked.iter().any(|(line, a)| *line < at && a == args),
                        "{m} ran without an earlier unconfirmed request; log: {:?}",
                        self.log
                    );
                }
            }
        }
        // The client's messages reach the server in the client's order.
        let key = |m: &Value| {
            let id = match &m["id"] {
                Value::Number(n) => n.as_f64().map(|f| (f + 0.0).to_string()),
                Value::Null if m.get("id").is_none() => None,
                other => Some(other.to_string()),
            };
            (m["method"].clone(), id)
        };
        let mut sent = self.client_sent.iter().map(key);
        for m in &self.server_got {
            if m["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("toolwarden-"))
            {
                continue;
            }
            let k = key(m);
            assert!(
                sent.any(|s| s == k),
                "{m} reached the server out of the client's order; log: {:?}",
                self.log
            );
        }
    }
}
