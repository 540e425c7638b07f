//! A bare MCP pass-through built from rmcp alone, for measuring what rmcp's two Streamable
//! HTTP hops cost without any of toolwarden's work (no framing guard, no judgment, no session
//! store): an rmcp Streamable HTTP server whose `tools/list` and `tools/call` go, unchanged but
//! for the `mcp__up__` prefix of the tool names, to one upstream through an rmcp Streamable
//! HTTP client (kept-alive `reqwest` connections), with `TCP_NODELAY` on both sides, as the
//! gateway's.
//!
//! It starts as the gateway bench starts a gateway, so the bench measures it in the gateway's
//! place:
//!
//! ```text
//! cargo build --release --example rmcp_passthrough
//! cargo bench --no-run --bench gateway_load
//! TOOLWARDEN_BENCH_SESSIONS=1,16 \
//!   TOOLWARDEN_BENCH_GATEWAY=target/release/examples/rmcp_passthrough \
//!   target/release/deps/gateway_load-* --bench
//! ```
//!
//! Arguments: `gateway --config FILE`, where FILE is the bench's gateway TOML; only the `url`
//! of its `[servers.up]` is read. It listens on an ephemeral loopback port and prints
//! `toolwarden gateway: listening on http://127.0.0.1:PORT/mcp` on standard error.

use std::process::ExitCode;
use std::sync::Arc;

use axum::serve::ListenerExt;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, RoleServer, ServiceExt};

/// The prefix the bench's policy gives the upstream's tools.
const PREFIX: &str = "mcp__up__";

/// The server side: every request goes to the one upstream peer.
#[derive(Clone)]
struct PassThrough {
    upstream: Peer<RoleClient>,
}

impl ServerHandler for PassThrough {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut list = self
            .upstream
            .list_tools(request)
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        list.tools = list
            .tools
            .into_iter()
            .map(|mut t: Tool| {
                t.name = format!("{PREFIX}{}", t.name).into();
                t
            })
            .collect();
        Ok(list)
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(name) = request.name.strip_prefix(PREFIX).map(str::to_string) else {
            return Err(ErrorData::invalid_params("unknown tool", None));
        };
        request.name = name.into();
        self.upstream
            .call_tool(request)
            .await
            .map(CallToolResponse::from)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }
}

/// The `url` of `[servers.up]` in the bench's gateway TOML.
fn upstream_url(config: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(config).ok()?;
    Some(
        table
            .get("servers")?
            .get("up")?
            .get("url")?
            .as_str()?
            .to_string(),
    )
}

async fn run(url: String) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .map_err(|e| e.to_string())?;
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.as_str()),
    );
    let client: RunningService<RoleClient, ()> = ()
        .serve(transport)
        .await
        .map_err(|e| format!("cannot reach the upstream: {e}"))?;
    let handler = PassThrough {
        upstream: client.peer().clone(),
    };
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    eprintln!("toolwarden gateway: listening on http://127.0.0.1:{port}/mcp");
    // As the gateway does: each answer's small writes leave at once (no Nagle delay).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1))
    else {
        eprintln!("usage: rmcp_passthrough gateway --config FILE");
        return ExitCode::from(2);
    };
    let url = match std::fs::read_to_string(path).map(|text| upstream_url(&text)) {
        Ok(Some(url)) => url,
        Ok(None) => {
            eprintln!("{path}: not TOML with a url in [servers.up]");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(url)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
