//! A minimal MCP client driving `toolwarden mcp-proxy` over stdio, shared by the proxy tests.
//! Every read has a timeout, so a deadlocked proxy fails a test instead of hanging it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// How long any one answer may take.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// A running proxy with its server.
pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Messages read while waiting for another id, in arrival order.
    pub stash: Vec<Value>,
    stderr: Arc<Mutex<String>>,
}

impl Session {
    /// Starts `toolwarden mcp-proxy ARGS -- SERVER...` in `dir`.
    pub fn start(args: &[&str], server: &[&str]) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("mcp-proxy")
            .args(args)
            .arg("--")
            .args(server)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the proxy starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Session {
            stdin: child.stdin.take(),
            child,
            lines,
            stash: Vec::new(),
            stderr,
        }
    }

    /// Sends one raw line.
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends one raw line, ignoring a proxy that has already gone.
    pub fn try_send_raw(&mut self, line: &str) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin
                .write_all(format!("{line}\n").as_bytes())
                .and_then(|()| stdin.flush());
        }
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &Value) {
        self.send_raw(&msg.to_string());
    }

    /// The next message from the proxy.
    pub fn recv(&mut self) -> Value {
        if !self.stash.is_empty() {
            return self.stash.remove(0);
        }
        self.recv_fresh()
    }

    fn recv_fresh(&mut self) -> Value {
        let line = self.lines.recv_timeout(TIMEOUT).unwrap_or_else(|_| {
            panic!(
                "no message from the proxy within {TIMEOUT:?}; its stderr:\n{}",
                self.stderr()
            )
        });
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the proxy sent a line that is not JSON ({e}): {line}"))
    }

    /// The response (no `method`) with this id; other messages are stashed.
    pub fn response(&mut self, id: &Value) -> Value {
        if let Some(i) = self
            .stash
            .iter()
            .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        {
            return self.stash.remove(i);
        }
        loop {
            let m = self.recv_fresh();
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
            self.stash.push(m);
        }
    }

    /// Sends a request and waits for its response.
    pub fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&json!(id))
    }

    /// initialize + notifications/initialized; returns the initialize result.
    pub fn initialize(&mut self) -> Value {
        let r = self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "toolwarden-test", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    /// tools/list -> the tool names, in order.
    pub fn tool_names(&mut self, id: i64) -> Vec<String> {
        let r = self.request(id, "tools/list", json!({}));
        r["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools/list result without tools: {r}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// tools/call -> the whole response.
    pub fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.request(id, "tools/call", json!({"name": tool, "arguments": args}))
    }

    /// What the proxy (and the server through it) wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes the proxy's stdin and returns its exit code.
    pub fn close(mut self) -> (i32, String) {
        drop(self.stdin.take());
        self.wait()
    }

    /// Waits for the proxy to exit (stdin left open); returns its exit code and stderr.
    pub fn wait(mut self) -> (i32, String) {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the stderr reader drain.
                std::thread::sleep(Duration::from_millis(100));
                return (status.code().unwrap_or(-1), self.stderr());
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the proxy did not exit; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The text of a tools/call result's first content item.
pub fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {response}"))
        .to_string()
}

/// The lines of an audit file, parsed.
pub fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A fresh temporary directory under the target dir.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The Python interpreter that runs the fake MCP server (`tests/fixtures/proxy/fake_server.py`,
/// standard library only). Panics when there is none: these tests fail, never pass unrun.
#[allow(dead_code, reason = "not every suite starts the fake server")]
pub fn python() -> &'static str {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "python3 is needed: the fake MCP server these tests run is a Python script"
    );
    "python3"
}

/// `mcp-proxy -p tests/fixtures/proxy/fake.warden --server notes EXTRA… -- python3
/// fake_server.py`, after `initialize`.
#[allow(dead_code, reason = "not every suite starts the fake server")]
pub fn start_fake(extra: &[&str]) -> Session {
    let mut args = vec![
        "-p",
        "tests/fixtures/proxy/fake.warden",
        "--server",
        "notes",
    ];
    args.extend_from_slice(extra);
    let mut s = Session::start(&args, &[python(), "tests/fixtures/proxy/fake_server.py"]);
    let init = s.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "fake", "{init}");
    s
}
