//! The gateway's cost under load, on loopback: N concurrent MCP client sessions (1, 16, 256)
//! calling one tool through `toolwarden gateway` and directly against the same upstream, each
//! a bounded number of calls; the latency the gateway adds (p50, p99), the judged calls per
//! second, the CPU time the gateway spends per judged call, and the memory one open session
//! costs the gateway, with sessions in memory and, when `TOOLWARDEN_REDIS_SERVER` names a
//! `redis-server`, in Redis (and what they cost Redis).
//!
//! `cargo bench --bench gateway_load` (release; the gateway is the `toolwarden` binary built
//! beside this bench). `TOOLWARDEN_BENCH_CALLS` sets the calls per row (default 4096) and
//! `TOOLWARDEN_BENCH_SESSIONS` the session counts (default `1,16,256`),
//! `TOOLWARDEN_BENCH_GATEWAY` another `toolwarden` binary to measure (an older build, to
//! compare), and `TOOLWARDEN_BENCH_AUDIT=1` turns the gateway's audit log on.
//!
//! So that the figures are the gateway's and not the load generator's, both ends in this
//! process are small: the upstream is a Streamable HTTP MCP server answering each POST with
//! one `application/json` body (stateless, as the transport allows), and each client session
//! is one kept-alive HTTP/1.1 connection speaking JSON-RPC (`initialize`,
//! `notifications/initialized`, then `tools/call`s), reading the gateway's event-stream
//! answers. The gateway reaches the upstream with its own MCP client (rmcp), as in
//! production. The figures go to docs/performance.md.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Calls per configuration at most (split over the sessions), and time per configuration.
const CALLS: usize = 4096;
const TIME: Duration = Duration::from_secs(20);
const SESSIONS: [usize; 3] = [1, 16, 256];
/// The protocol version the clients ask for (one with `initialize`).
const VERSION: &str = "2025-11-25";

/// The upstream's answer to one JSON-RPC message: a result as `application/json`, or 202 for
/// a notification.
async fn upstream_post(body: Bytes) -> Response {
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match msg["method"].as_str() {
        Some("initialize") => json!({
            "protocolVersion": msg["params"]["protocolVersion"].as_str().unwrap_or(VERSION),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-upstream", "version": "1"},
        }),
        Some("tools/list") => json!({"tools": [{"name": "get_doc",
            "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]}),
        Some("tools/call") => json!({"content": [{"type": "text", "text": "ok"}],
            "structuredContent": {"arguments": msg["params"]["arguments"]}}),
        Some("ping") => json!({}),
        _ => {
            let e = json!({"jsonrpc": "2.0", "id": id,
                           "error": {"code": -32601, "message": "Method not found"}});
            return json_body(e.to_string());
        }
    };
    json_body(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
}

fn json_body(text: String) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

/// The upstream, on an ephemeral loopback port: POST answers, no server-sent stream (GET is
/// 405, which the transport allows), DELETE accepted.
async fn upstream() -> u16 {
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(upstream_post)
            .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
            .delete(|| async { StatusCode::OK }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    port
}

/// One MCP client session over one kept-alive HTTP/1.1 connection.
struct Session {
    stream: TcpStream,
    host: String,
    id: Option<String>,
    buf: Vec<u8>,
    next: u64,
}

/// One HTTP response: status, headers (names lower case), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Session {
    async fn open(port: u16) -> Session {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let mut s = Session {
            stream,
            host: format!("127.0.0.1:{port}"),
            id: None,
            buf: Vec::with_capacity(8192),
            next: 1,
        };
        let init = s
            .post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": VERSION, "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}}),
            )
            .await;
        assert_eq!(init.status, 200, "{}", String::from_utf8_lossy(&init.body));
        s.id = init
            .headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone());
        rpc_result(&init);
        let done = s
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(done.status, 202);
        s
    }

    async fn post(&mut self, msg: &Value) -> Answer {
        let body = msg.to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        if let Some(id) = &self.id {
            head.push_str(&format!(
                "Mcp-Session-Id: {id}\r\nMcp-Protocol-Version: {VERSION}\r\n"
            ));
        }
        head.push_str("\r\n");
        head.push_str(&body);
        self.stream.write_all(head.as_bytes()).await.unwrap();
        self.read_answer().await
    }

    async fn fill(&mut self) {
        let mut chunk = [0u8; 16384];
        let n = self.stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the connection closed");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    async fn read_answer(&mut self) -> Answer {
        let end = loop {
            if let Some(e) = find(&self.buf, b"\r\n\r\n") {
                break e;
            }
            self.fill().await;
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            let mut body = Vec::new();
            loop {
                let line_end = loop {
                    if let Some(e) = find(&self.buf, b"\r\n") {
                        break e;
                    }
                    self.fill().await;
                };
                let size_text = String::from_utf8_lossy(&self.buf[..line_end]).to_string();
                let size =
                    usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
                while self.buf.len() < line_end + 2 + size + 2 {
                    self.fill().await;
                }
                body.extend_from_slice(&self.buf[line_end + 2..line_end + 2 + size]);
                self.buf.drain(..line_end + 2 + size + 2);
                if size == 0 {
                    break;
                }
            }
            body
        } else {
            let len: usize = header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while self.buf.len() < len {
                self.fill().await;
            }
            self.buf.drain(..len).collect()
        };
        Answer {
            status,
            headers,
            body,
        }
    }

    /// One `tools/call` of `tool`; its latency.
    async fn call(&mut self, tool: &str, args: Value) -> Duration {
        let id = self.next;
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": args}});
        let t = Instant::now();
        let answer = self.post(&msg).await;
        let took = t.elapsed();
        assert_eq!(answer.status, 200);
        let result = rpc_result(&answer);
        assert_ne!(result["isError"], true, "{result}");
        took
    }
}

/// The JSON-RPC result of an answer, whether a JSON body or an event stream (the `data:` line
/// holding the response).
fn rpc_result(answer: &Answer) -> Value {
    let text = String::from_utf8_lossy(&answer.body);
    let sse = answer
        .headers
        .iter()
        .any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream"));
    let msg: Value = if sse {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .unwrap_or_else(|| panic!("no response in the stream: {text}"))
    } else {
        serde_json::from_str(&text).unwrap()
    };
    assert!(msg.get("error").is_none(), "{msg}");
    msg["result"].clone()
}

struct Gateway {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn gateway(upstream: u16, redis: Option<u16>) -> Gateway {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bench.warden"),
        "policy \"bench\" version 1\neffects none, write\nintents read\nfallback read\n\
         matrix m {\n  none write\n  read allow deny\n}\nmode agent { matrix m restrict none, write }\n\
         default mode agent\nconnectors prefix \"mcp__\"\ntiers session\nunknown deny\n\
         tool mcp__up__get_doc { effect none }\n",
    )
    .unwrap();
    let state = redis
        .map(|p| format!("[state]\nredis = \"redis://127.0.0.1:{p}/0\"\n"))
        .unwrap_or_default();
    let audit = std::env::var("TOOLWARDEN_BENCH_AUDIT")
        .ok()
        .map(|_| format!("audit = {:?}\n", dir.path().join("audit.jsonl")))
        .unwrap_or_default();
    std::fs::write(
        dir.path().join("gateway.toml"),
        format!(
            "policy = \"bench.warden\"\nlisten = \"127.0.0.1:0\"\n{audit}[limits]\nmax_connections = 4096\nmax_sessions_per_principal = 4096\n\
             {state}[servers.up]\nurl = \"http://127.0.0.1:{upstream}/mcp\"\n"
        ),
    )
    .unwrap();
    let exe = std::env::current_exe().unwrap();
    let bin = std::env::var_os("TOOLWARDEN_BENCH_GATEWAY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| exe.parent().unwrap().parent().unwrap().join("toolwarden"));
    let mut child = Command::new(&bin)
        .args(["gateway", "--config"])
        .arg(dir.path().join("gateway.toml"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (cargo build --release)",
                bin.display()
            )
        });
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let port = line
        .trim()
        .strip_prefix("toolwarden gateway: listening on http://127.0.0.1:")
        .and_then(|r| r.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("unexpected: {line}"))
        .parse()
        .unwrap();
    std::thread::spawn(move || {
        let mut sink = String::new();
        while err.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
            eprint!("{sink}");
            sink.clear();
        }
    });
    Gateway {
        child,
        port,
        _dir: dir,
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) a process has used so far, in microseconds (from /proc, in clock
/// ticks of 10 ms: read it over many calls).
fn cpu_us(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * 1_000_000 / hz
}

/// `n` sessions at once, `calls / n` calls each (bounded by `TIME`): every call's latency (µs)
/// and the wall time.
async fn load(port: u16, tool: &str, n: usize, calls: usize) -> (Vec<u64>, Duration) {
    let mut sessions = Vec::new();
    for _ in 0..n {
        sessions.push(Session::open(port).await);
    }
    let each = (calls / n).max(4);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, mut s) in sessions.into_iter().enumerate() {
        let tool = tool.to_string();
        tasks.spawn(async move {
            let mut lat = Vec::with_capacity(each);
            for k in 0..each {
                if start.elapsed() > TIME {
                    break;
                }
                let took = s.call(&tool, json!({"i": i, "k": k})).await;
                lat.push(took.as_micros() as u64);
            }
            lat
        });
    }
    let mut all = Vec::new();
    while let Some(l) = tasks.join_next().await {
        all.extend(l.unwrap());
    }
    let wall = start.elapsed();
    all.sort_unstable();
    (all, wall)
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

struct RedisServer(Child);

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis_memory(port: u16) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"INFO memory\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut buf = vec![0; 65536];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn start_redis(dir: &std::path::Path) -> Option<(RedisServer, u16)> {
    let program = std::env::var("TOOLWARDEN_REDIS_SERVER").ok()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(program)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let server = RedisServer(child);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((server, port));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let calls: usize = std::env::var("TOOLWARDEN_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CALLS);
    let sessions: Vec<usize> = std::env::var("TOOLWARDEN_BENCH_SESSIONS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| SESSIONS.to_vec());
    let up = upstream().await;
    let redis_dir = tempfile::tempdir().unwrap();
    let redis = start_redis(redis_dir.path());
    let mut stores = vec![("memory", None)];
    if let Some((_, port)) = &redis {
        stores.push(("redis", Some(*port)));
    }
    println!("| store | sessions | calls | direct p50 | direct p99 | gateway p50 | gateway p99 | added p50 | added p99 | judged calls/s | gateway CPU per call | bench CPU per call |");
    println!(
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let mut memory = Vec::new();
    for (store, port) in &stores {
        let g = gateway(up, *port);
        let pid = g.child.id().to_string();
        // Warm up both paths (connections, the gateway's tool list).
        let _ = load(up, "get_doc", 4, 64).await;
        let _ = load(g.port, "mcp__up__get_doc", 4, 64).await;
        for &n in &sessions {
            let (d, _) = load(up, "get_doc", n, calls).await;
            let (g0, b0) = (cpu_us(&pid), cpu_us("self"));
            let (t, wall) = load(g.port, "mcp__up__get_doc", n, calls).await;
            let (g1, b1) = (cpu_us(&pid), cpu_us("self"));
            let (d50, d99, t50, t99) = (
                quantile(&d, 0.5),
                quantile(&d, 0.99),
                quantile(&t, 0.5),
                quantile(&t, 0.99),
            );
            let per = |a: u64, b: u64| (b - a) as f64 / t.len().max(1) as f64;
            println!(
                "| {store} | {n} | {} | {d50} µs | {d99} µs | {t50} µs | {t99} µs | {} µs | {} µs | {:.0} | {:.0} µs | {:.0} µs |",
                t.len(),
                t50 as i64 - d50 as i64,
                t99 as i64 - d99 as i64,
                t.len() as f64 / wall.as_secs_f64(),
                per(g0, g1),
                per(b0, b1),
            );
        }
        // Memory per open session: the gateway's resident memory (and Redis's) before and
        // after opening 256 more sessions that each made one call.
        let before = rss_kib(g.child.id());
        let redis_before = port.map(redis_memory);
        let mut open = Vec::new();
        for i in 0..256 {
            let mut s = Session::open(g.port).await;
            s.call("mcp__up__get_doc", json!({"i": i})).await;
            open.push(s);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = rss_kib(g.child.id());
        let redis_after = port.map(redis_memory);
        memory.push((
            *store,
            (after.saturating_sub(before)) as f64 / 256.0,
            redis_before
                .zip(redis_after)
                .map(|(b, a)| a.saturating_sub(b) as f64 / 256.0),
        ));
        drop(open);
    }
    println!();
    println!("| store | gateway memory per open session | Redis memory per session |");
    println!("| --- | ---: | ---: |");
    for (store, kib, redis) in memory {
        println!(
            "| {store} | {kib:.1} KiB | {} |",
            redis.map_or("–".to_string(), |b| format!("{:.0} bytes", b))
        );
    }
}
