//! Shared by the gateway tests: a gateway process with a configuration of the test's, a
//! minimal HTTP/1.1 client over a TcpStream (so a test can send exactly the bytes it wants),
//! and MCP sessions over it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gateway")
        .join(name)
}

pub struct Gateway {
    pub child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    /// The gateway's stderr lines so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Gateway {
    /// The stderr lines so far that contain `needle`.
    pub fn logged(&self, needle: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The configuration of two fake upstream servers `a` and `b` (upstream.py), `a` logging the
/// calls it receives to `calls.jsonl` in the test's folder; `extra` is appended.
pub fn config(dir: &Path, extra: &str) -> String {
    let py = fixture("upstream.py");
    format!(
        "policy = {policy:?}\nlisten = \"127.0.0.1:0\"\nintent = \"write\"\naudit = {audit:?}\n{extra}\n\
         [servers.a]\ncommand = [\"python3\", {py:?}, \"a\", {calls:?}]\n\
         [servers.b]\ncommand = [\"python3\", {py:?}, \"b\"]\n",
        policy = fixture("gateway.warden").display().to_string(),
        audit = dir.join("audit.jsonl").display().to_string(),
        calls = dir.join("calls.jsonl").display().to_string(),
        py = py.display().to_string(),
    )
}

/// Starts `toolwarden gateway` with the configuration `config(dir)` returns.
pub fn start(config: impl FnOnce(&Path) -> String) -> Gateway {
    start_with(config, None)
}

/// Starts `toolwarden gateway` with the configuration `config(dir)` returns, allowed at most
/// `open_files` file descriptors when given (unix).
pub fn start_with(config: impl FnOnce(&Path) -> String, open_files: Option<u64>) -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config(dir.path())).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolwarden"));
    command
        .args(["gateway", "--config"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    if let Some(n) = open_files {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: n as libc::rlim_t,
                    rlim_max: n as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = open_files;
    let mut child = command.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let port = line
        .trim()
        .strip_prefix("toolwarden gateway: listening on http://127.0.0.1:")
        .and_then(|r| r.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .parse()
        .unwrap();
    // Keep draining stderr so the gateway never blocks on it.
    let log = Arc::new(Mutex::new(Vec::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        let mut sink = String::new();
        while err.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
            eprint!("{sink}");
            kept.lock().unwrap().push(sink.trim_end().to_string());
            sink.clear();
        }
    });
    Gateway {
        child,
        port,
        dir,
        log,
    }
}

/// One HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, or the JSON-RPC messages of an SSE body (the last one).
    pub fn json(&self) -> Value {
        if let Ok(v) = serde_json::from_str(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .next_back()
            .unwrap_or(Value::Null)
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(i) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(std::str::from_utf8(&raw[..i]).unwrap().trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[i + 2..i + 2 + size]);
        raw = &raw[i + 2 + size + 2..];
    }
}

/// Sends `raw` (a whole request) and reads the response to the end (`Connection: close`).
pub fn exchange(port: u16, raw: &[u8]) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(raw).unwrap();
    read_response(&mut s)
}

pub fn read_response(s: &mut TcpStream) -> Response {
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response with headers");
    let head = String::from_utf8_lossy(&all[..split]).to_string();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = all[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    }
}

/// A POST of `body` to `path` with `headers` (`Name: value` each).
pub fn post(port: u16, path: &str, headers: &[String], body: &[u8]) -> Response {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        raw.push_str(h);
        raw.push_str("\r\n");
    }
    raw.push_str("\r\n");
    let mut bytes = raw.into_bytes();
    bytes.extend_from_slice(body);
    exchange(port, &bytes)
}

/// An MCP session over Streamable HTTP (protocol 2025-06-18), with an optional bearer token.
pub struct Session {
    pub port: u16,
    pub id: String,
    pub token: Option<String>,
    pub next: u64,
}

impl Session {
    /// Opens a session (initialize, notifications/initialized); `Err` with the response when
    /// the gateway refused it.
    pub fn open(port: u16, token: Option<&str>) -> Result<Session, Response> {
        let mut headers = Vec::new();
        if let Some(t) = token {
            headers.push(format!("Authorization: Bearer {t}"));
        }
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});
        let r = post(port, "/mcp", &headers, init.to_string().as_bytes());
        let Some(id) = r.header("mcp-session-id").map(str::to_string) else {
            return Err(r);
        };
        let s = Session {
            port,
            id,
            token: token.map(str::to_string),
            next: 1,
        };
        let r = s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(r.status, 202, "{r:?}");
        Ok(s)
    }

    pub fn headers(&self) -> Vec<String> {
        let mut h = vec![
            format!("Mcp-Session-Id: {}", self.id),
            "MCP-Protocol-Version: 2025-06-18".to_string(),
        ];
        if let Some(t) = &self.token {
            h.push(format!("Authorization: Bearer {t}"));
        }
        h
    }

    pub fn send(&self, msg: &Value) -> Response {
        self.send_raw(msg.to_string().as_bytes())
    }

    pub fn send_raw(&self, body: &[u8]) -> Response {
        post(self.port, "/mcp", &self.headers(), body)
    }

    /// A request; returns its JSON-RPC response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let r = self
            .send(&json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}));
        assert_eq!(r.status, 200, "{r:?}");
        r.json()
    }

    /// The tool `name` as `tools/list` with `params` (an object; `_meta` for example) lists it,
    /// every page read (panics when it is not there).
    pub fn listed(&mut self, name: &str, params: Value) -> Value {
        let mut params = params;
        loop {
            let r = self.request("tools/list", params.clone());
            let tools = r["result"]["tools"].as_array().cloned().unwrap_or_default();
            if let Some(t) = tools.into_iter().find(|t| t["name"] == name) {
                return t;
            }
            let Some(cursor) = r["result"]["nextCursor"].as_str() else {
                panic!("`{name}` is not listed: {r}");
            };
            params["cursor"] = json!(cursor);
        }
    }

    /// The names `tools/list` gives (every page).
    pub fn tool_names(&mut self, meta: Option<Value>) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut params = json!({});
            if let Some(c) = &cursor {
                params["cursor"] = Value::from(c.clone());
            }
            if let Some(m) = &meta {
                params["_meta"] = m.clone();
            }
            let r = self.request("tools/list", params);
            assert!(r["result"]["tools"].is_array(), "{r}");
            for t in r["result"]["tools"].as_array().unwrap() {
                names.push(t["name"].as_str().unwrap().to_string());
            }
            match r["result"]["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return names,
            }
        }
    }

    pub fn call(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": args}))
    }

    pub fn call_in(&mut self, name: &str, args: Value, query: &str) -> Value {
        self.request(
            "tools/call",
            json!({"name": name, "arguments": args, "_meta": {"toolwarden/query": query}}),
        )
    }
}

/// The calls upstream `a` received, as `tool` names, from its log.
pub fn calls_received(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["tool"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Opens a session whose client declares elicitation (form).
pub fn open_eliciting(port: u16) -> Session {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "test", "version": "1"}}});
    let r = post(port, "/mcp", &[], init.to_string().as_bytes());
    let id = r.header("mcp-session-id").expect("a session").to_string();
    let s = Session {
        port,
        id,
        token: None,
        next: 1,
    };
    assert_eq!(
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .status,
        202
    );
    s
}

/// Calls `name` in session `s`, and answers the gateway's `elicitation/create` with
/// `answer` (an ElicitResult) when one comes. Returns the elicitation's params (if one came)
/// and the call's response.
pub fn call_answering(
    s: &Session,
    name: &str,
    args: Value,
    answer: Value,
) -> (Option<Value>, Value) {
    call_answering_with(s, name, args, answer, |_| {})
}

/// [`call_answering`], running `while_asked` on the session while the elicitation waits for
/// its answer (the call, id 77, in flight).
pub fn call_answering_with(
    s: &Session,
    name: &str,
    args: Value,
    answer: Value,
    while_asked: impl FnOnce(&Session),
) -> (Option<Value>, Value) {
    let mut while_asked = Some(while_asked);
    let mut reader = start_call(s, name, args);
    let mut asked = None;
    loop {
        let msg = next_message(&mut reader);
        if msg["method"] == "elicitation/create" {
            asked = Some(msg["params"].clone());
            if let Some(f) = while_asked.take() {
                f(s);
            }
            let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": answer});
            let r = s.send(&reply);
            assert_eq!(r.status, 202, "{r:?}");
        } else if msg["id"] == 77 {
            return (asked, msg);
        }
    }
}

/// Sends `tools/call name args` with id 77 in session `s` on its own connection; returns the
/// connection, to read the answer's messages with [`next_message`].
pub fn start_call(s: &Session, name: &str, args: Value) -> BufReader<TcpStream> {
    let body = json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                      "params": {"name": name, "arguments": args}})
    .to_string();
    let mut raw = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
        s.port,
        body.len()
    );
    for h in s.headers() {
        raw.push_str(&h);
        raw.push_str("\r\n");
    }
    raw.push_str("\r\n");
    raw.push_str(&body);
    let mut stream = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(raw.as_bytes()).unwrap();
    BufReader::new(stream)
}

/// The next message of an answer's event stream (panics when the stream ends first).
pub fn next_message(reader: &mut BufReader<TcpStream>) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("the stream ended without the call's response");
        }
        // SSE data lines sit inside chunks; a message is one `data: {…}` line.
        let Some(data) = line.trim_end().strip_prefix("data: ") else {
            continue;
        };
        if let Ok(msg) = serde_json::from_str::<Value>(data) {
            return msg;
        }
    }
}
