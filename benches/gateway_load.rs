//! The gateway's cost under load, on loopback: N concurrent MCP client sessions (1, 16, 256)
//! calling one tool through `toolwarden gateway` and directly against the same upstream, each
//! a bounded number of calls; the latency the gateway adds (p50, p99), the judged calls per
//! second, and the memory one open session costs the gateway, with sessions in memory and, when
//! `TOOLWARDEN_REDIS_SERVER` names a `redis-server`, in Redis (and what they cost Redis).
//!
//! `cargo bench --bench gateway_load` (release; the gateway is the `toolwarden` binary built
//! beside this bench). The upstream is an rmcp server in this process over Streamable HTTP; the
//! clients are rmcp clients. The figures go to docs/performance.md.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ErrorData, RoleServer, ServiceExt};
use serde_json::json;

/// Calls per configuration at most (split over the sessions), and time per configuration.
const CALLS: usize = 4096;
const TIME: Duration = Duration::from_secs(20);
const SESSIONS: [usize; 3] = [1, 16, 256];

#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        serde_json::from_value(json!({"tools": [{"name": "get_doc",
            "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]}))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let v = json!({"content": [{"type": "text", "text": "ok"}],
                       "structuredContent": {"arguments": request.arguments}});
        serde_json::from_value::<CallToolResult>(v)
            .map(CallToolResponse::from)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }
}

async fn upstream() -> u16 {
    let service = StreamableHttpService::new(
        || Ok(Echo),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    port
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
    std::fs::write(
        dir.path().join("gateway.toml"),
        format!(
            "policy = \"bench.warden\"\nlisten = \"127.0.0.1:0\"\n[limits]\nmax_connections = 4096\nmax_sessions_per_principal = 4096\n\
             {state}[servers.up]\nurl = \"http://127.0.0.1:{upstream}/mcp\"\n"
        ),
    )
    .unwrap();
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("toolwarden");
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

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn connect(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url))
        .await
        .unwrap()
}

/// `n` sessions at once, `CALLS / n` calls each (bounded by `TIME`): every call's latency (µs)
/// and the wall time.
async fn load(url: &str, tool: &str, n: usize) -> (Vec<u64>, Duration) {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(connect(url).await);
    }
    let each = (CALLS / n).max(4);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, c) in clients.into_iter().enumerate() {
        let tool = tool.to_string();
        tasks.spawn(async move {
            let mut lat = Vec::with_capacity(each);
            for k in 0..each {
                if start.elapsed() > TIME {
                    break;
                }
                let args = json!({"i": i, "k": k}).as_object().cloned().unwrap();
                let t = Instant::now();
                let r = c
                    .peer()
                    .call_tool(CallToolRequestParams::new(tool.clone()).with_arguments(args))
                    .await
                    .unwrap();
                lat.push(t.elapsed().as_micros() as u64);
                assert_ne!(r.is_error, Some(true), "{r:?}");
            }
            let _ = c.cancel().await;
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let up = upstream().await;
    let direct = format!("http://127.0.0.1:{up}/mcp");
    let redis_dir = tempfile::tempdir().unwrap();
    let redis = start_redis(redis_dir.path());
    let mut stores = vec![("memory", None)];
    if let Some((_, port)) = &redis {
        stores.push(("redis", Some(*port)));
    }
    println!("| store | sessions | calls | direct p50 | direct p99 | gateway p50 | gateway p99 | added p50 | added p99 | judged calls/s |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut memory = Vec::new();
    for (store, port) in &stores {
        let g = gateway(up, *port);
        let through = format!("http://127.0.0.1:{}/mcp", g.port);
        // Warm up both paths (connections, the gateway's tool list).
        let _ = load(&direct, "get_doc", 4).await;
        let _ = load(&through, "mcp__up__get_doc", 4).await;
        for n in SESSIONS {
            let (d, _) = load(&direct, "get_doc", n).await;
            let (t, wall) = load(&through, "mcp__up__get_doc", n).await;
            let (d50, d99, t50, t99) = (
                quantile(&d, 0.5),
                quantile(&d, 0.99),
                quantile(&t, 0.5),
                quantile(&t, 0.99),
            );
            println!(
                "| {store} | {n} | {} | {d50} µs | {d99} µs | {t50} µs | {t99} µs | {} µs | {} µs | {:.0} |",
                t.len(),
                t50 as i64 - d50 as i64,
                t99 as i64 - d99 as i64,
                t.len() as f64 / wall.as_secs_f64()
            );
        }
        // Memory per open session: the gateway's resident memory (and Redis's) before and
        // after opening 256 more sessions that each made one call.
        let before = rss_kib(g.child.id());
        let redis_before = port.map(redis_memory);
        let mut open = Vec::new();
        for i in 0..256 {
            let c = connect(&through).await;
            let args = json!({"i": i}).as_object().cloned().unwrap();
            c.peer()
                .call_tool(CallToolRequestParams::new("mcp__up__get_doc").with_arguments(args))
                .await
                .unwrap();
            open.push(c);
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
        for c in open {
            let _ = c.cancel().await;
        }
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
