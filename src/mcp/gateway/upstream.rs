//! One upstream MCP server, reached with the rmcp client over a child process's stdio or over
//! Streamable HTTP: connected on first use, its tool list fetched (every page, within the
//! page, tool and time caps of [`ListLimits`]) before any of its calls is judged and again
//! after `notifications/tools/list_changed`, and reconnected after it went away. A server that
//! failed to connect or to list is reported unavailable, without being tried again, for
//! [`ListLimits::retry`].
//!
//! Once connected and listed, a call reads the list and the connection from a snapshot under a
//! short lock ([`Upstream::tools`], [`Upstream::call`]), so concurrent calls do not queue on
//! the connection; the snapshot is dropped whenever the list is stale or the connection went
//! away, and the next call fetches and connects under the connection lock, as the first did.

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::handler::client::ClientHandler;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};

use super::config::{Limits, ServerConfig};
use super::core::log;

/// The client side of one upstream: notes that the tool list changed.
#[derive(Clone, Debug, Default)]
pub struct Listener {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
    }
}

struct Connection {
    service: RunningService<RoleClient, Listener>,
    tools: Option<Arc<ToolList>>,
}

/// One server's tool list as it listed it, and each tool's schema by name (the first listed,
/// when a name repeats).
#[derive(Debug, Default)]
pub struct ToolList {
    tools: Vec<Value>,
    by_name: HashMap<String, usize>,
}

impl ToolList {
    /// The list of `tools` (schemas, in the server's order).
    pub fn new(tools: Vec<Value>) -> ToolList {
        let mut by_name = HashMap::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            if let Some(name) = t.get("name").and_then(Value::as_str) {
                by_name.entry(name.to_string()).or_insert(i);
            }
        }
        ToolList { tools, by_name }
    }

    /// The schemas, in the server's order.
    pub fn tools(&self) -> &[Value] {
        &self.tools
    }

    /// The schema of the tool named `name` (the first listed of that name).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.by_name.get(name).and_then(|&i| self.tools.get(i))
    }
}

/// What a call needs once the server is connected and listed.
#[derive(Clone)]
struct Ready {
    peer: rmcp::Peer<RoleClient>,
    tools: Arc<ToolList>,
}

/// The bounds of fetching one upstream's tool list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListLimits {
    /// Time the whole list may take, connecting included.
    pub timeout: Duration,
    /// After a failure, how long the server is reported unavailable without being tried.
    pub retry: Duration,
    /// Most pages read.
    pub max_pages: usize,
    /// Most tools listed.
    pub max_tools: usize,
}

impl ListLimits {
    /// The list bounds of the `[limits]` table.
    pub fn of(limits: &Limits) -> ListLimits {
        ListLimits {
            timeout: limits.list_timeout,
            retry: limits.upstream_retry,
            max_pages: limits.max_list_pages,
            max_tools: limits.max_tools_per_server,
        }
    }
}

/// One upstream server. Cheap to share (`Arc`); each method takes the connection lock only
/// while it needs it.
pub struct Upstream {
    name: String,
    config: ServerConfig,
    timeout: Duration,
    list: ListLimits,
    stale: Arc<AtomicBool>,
    /// The HTTP client of a Streamable HTTP server: its connections are kept alive and reused
    /// from call to call (rmcp's default client opens one per request).
    http: reqwest::Client,
    conn: tokio::sync::Mutex<Option<Connection>>,
    /// The connection's peer and its current list, while both are good; `None` sends the next
    /// use through `conn`.
    ready: Mutex<Option<Ready>>,
    /// The last failure to connect or to list, and when, while it is within `list.retry`.
    failed: Mutex<Option<(Instant, String)>>,
    /// The strictest schema seen for each tool name over this upstream's life (reconnections
    /// included): a listing only tightens what was listed before (`session::stricter`).
    seen: Mutex<HashMap<String, Value>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The client of Streamable HTTP upstreams: connections kept alive (idle ones closed after 90 s,
/// reqwest's default), `TCP_NODELAY` so each request leaves at once, and no redirect followed
/// (a redirect is an error: the JSON-RPC message and the session id go only where configured).
fn http_client() -> reqwest::Client {
    // The client's TLS (for an https:// server) needs a crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// `error`'s text without the Rust type names rmcp puts in it in brackets (`Send message error
/// Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`): what an operator reads
/// is what failed, not how rmcp's transport is typed.
fn without_type_names(error: &dyn std::fmt::Display) -> String {
    let text = error.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(open) = rest.find(" [") {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        if !rest[open..close].contains("::") {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

impl Upstream {
    /// An upstream named `name` (not connected yet); `timeout` bounds each request to it,
    /// `list` the fetching of its tool list.
    pub fn new(name: &str, config: ServerConfig, timeout: Duration, list: ListLimits) -> Upstream {
        Upstream {
            name: name.to_string(),
            config,
            timeout,
            list,
            stale: Arc::new(AtomicBool::new(false)),
            http: http_client(),
            conn: tokio::sync::Mutex::new(None),
            ready: Mutex::new(None),
            failed: Mutex::new(None),
            seen: Mutex::new(HashMap::new()),
        }
    }

    fn ready(&self) -> std::sync::MutexGuard<'_, Option<Ready>> {
        self.ready
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The snapshot, when the list is not stale and the connection is still up.
    fn snapshot(&self) -> Option<Ready> {
        if self.stale.load(Ordering::SeqCst) {
            return None;
        }
        let ready = self.ready();
        ready
            .as_ref()
            .filter(|r| !r.peer.is_transport_closed())
            .cloned()
    }

    fn failure(&self) -> std::sync::MutexGuard<'_, Option<(Instant, String)>> {
        self.failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The server's name in the configuration.
    pub fn name(&self) -> &str {
        &self.name
    }

    async fn connect(&self) -> Result<Connection, String> {
        let listener = Listener {
            stale: self.stale.clone(),
        };
        let service = match &self.config {
            ServerConfig::Command(command) => {
                let mut cmd = tokio::process::Command::new(&command[0]);
                cmd.args(&command[1..]);
                let (transport, _) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::inherit())
                    .spawn()
                    .map_err(|e| format!("cannot start `{}`: {e}", command[0]))?;
                tokio::time::timeout(self.timeout, listener.serve(transport))
                    .await
                    .map_err(|_| "no answer to initialize in time".to_string())?
                    .map_err(|e| format!("initialize failed: {}", without_type_names(&e)))?
            }
            ServerConfig::Url(url) => {
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                let transport =
                    StreamableHttpClientTransport::with_client(self.http.clone(), config);
                tokio::time::timeout(self.timeout, listener.serve(transport))
                    .await
                    .map_err(|_| "no answer to initialize in time".to_string())?
                    .map_err(|e| format!("initialize failed: {}", without_type_names(&e)))?
            }
        };
        Ok(Connection {
            service,
            tools: None,
        })
    }

    /// The server's tools as it lists them (every page), fetched when not known yet, after it
    /// said its list changed, and after a reconnection; within [`ListLimits`].
    ///
    /// # Errors
    ///
    /// Why the server is unavailable: it cannot be started or reached, it did not give its
    /// list within the time, its list repeats a cursor or is over the page or tool cap, or it
    /// failed so within the retry time (the same reason, at once). The connection is dropped
    /// then, and the next use after the retry time connects again.
    pub async fn tools(&self) -> Result<Arc<ToolList>, String> {
        if let Some(ready) = self.snapshot() {
            return Ok(ready.tools);
        }
        if let Some((at, reason)) = self.failure().as_ref() {
            if at.elapsed() < self.list.retry {
                return Err(reason.clone());
            }
        }
        let listed = match tokio::time::timeout(self.list.timeout, self.fetch()).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "no tool list within {} s",
                self.list.timeout.as_secs()
            )),
        };
        match &listed {
            Ok(_) => *self.failure() = None,
            Err(reason) => {
                log(&format!("server `{}` is unavailable: {reason}", self.name));
                *self.failure() = Some((Instant::now(), reason.clone()));
            }
        }
        listed
    }

    async fn fetch(&self) -> Result<Arc<ToolList>, String> {
        let mut guard = self.conn.lock().await;
        *self.ready() = None;
        if guard
            .as_ref()
            .is_some_and(|c| c.service.is_transport_closed() || c.service.is_closed())
        {
            log(&format!(
                "server `{}` went away; connecting again",
                self.name
            ));
            *guard = None;
        }
        if guard.is_none() {
            *guard = Some(self.connect().await?);
        }
        let Some(conn) = guard.as_mut() else {
            return Err("not connected".to_string());
        };
        if self.stale.swap(false, Ordering::SeqCst) {
            conn.tools = None;
        }
        let peer = conn.service.peer().clone();
        if let Some(t) = &conn.tools {
            let tools = t.clone();
            self.keep(&peer, &tools);
            return Ok(tools);
        }
        let tools = match self.pages(&peer).await {
            Ok(t) => t,
            Err(e) => {
                *guard = None;
                return Err(e);
            }
        };
        let tools = match self.tighten(tools) {
            Ok(t) => t,
            Err(e) => {
                *guard = None;
                return Err(e);
            }
        };
        let tools = Arc::new(ToolList::new(tools));
        if let Some(conn) = guard.as_mut() {
            conn.tools = Some(tools.clone());
        }
        self.keep(&peer, &tools);
        Ok(tools)
    }

    /// The listed `tools`, each with the strictest annotations seen for its name (a name
    /// listed twice gets the strictest of both): a server cannot loosen a tool's effect, or
    /// close an open-world tool, by listing it again. Over its life an upstream may list at
    /// most four times `max_tools_per_server` distinct names; past that the listing is refused
    /// (the server is unavailable), so the memory of what was seen stays bounded.
    fn tighten(&self, tools: Vec<Value>) -> Result<Vec<Value>, String> {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let cap = self.list.max_tools.saturating_mul(4);
        let mut names = Vec::with_capacity(tools.len());
        for schema in tools {
            let Some(name) = schema
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string)
            else {
                names.push((None, schema));
                continue;
            };
            if !seen.contains_key(&name) && seen.len() >= cap {
                return Err(format!(
                    "the server listed more than {cap} distinct tool names over its life \
                     (four times max_tools_per_server)"
                ));
            }
            let merged = crate::mcp::session::stricter(seen.get(&name), schema);
            seen.insert(name.clone(), merged);
            names.push((Some(name), Value::Null));
        }
        Ok(names
            .into_iter()
            .map(|(name, schema)| match name.and_then(|n| seen.get(&n)) {
                Some(merged) => merged.clone(),
                None => schema,
            })
            .collect())
    }

    /// Keeps `peer` and `tools` as the snapshot, unless the list went stale meanwhile (then
    /// the next use fetches it again).
    fn keep(&self, peer: &rmcp::Peer<RoleClient>, tools: &Arc<ToolList>) {
        if !self.stale.load(Ordering::SeqCst) {
            *self.ready() = Some(Ready {
                peer: peer.clone(),
                tools: tools.clone(),
            });
        }
    }

    /// Every page of the server's `tools/list`, within the page and tool caps; a cursor seen
    /// before ends the loop as an error.
    async fn pages(&self, peer: &rmcp::Peer<RoleClient>) -> Result<Vec<Value>, String> {
        let mut tools = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..self.list.max_pages {
            let params = PaginatedRequestParams::default().with_cursor(cursor.clone());
            let page = tokio::time::timeout(self.timeout, peer.list_tools(Some(params)))
                .await
                .map_err(|_| "tools/list not answered in time".to_string())?
                .map_err(|e| format!("tools/list failed: {e}"))?;
            for t in &page.tools {
                if tools.len() >= self.list.max_tools {
                    return Err(format!(
                        "tools/list has more than {} tools (max_tools_per_server)",
                        self.list.max_tools
                    ));
                }
                if let Ok(v) = serde_json::to_value(t) {
                    tools.push(v);
                }
            }
            match page.next_cursor {
                None => return Ok(tools),
                Some(next) => {
                    if !seen.insert(next.clone()) {
                        return Err(format!("tools/list repeated the cursor `{next}`"));
                    }
                    cursor = Some(next);
                }
            }
        }
        Err(format!(
            "tools/list has more than {} pages (max_list_pages)",
            self.list.max_pages
        ))
    }

    /// Calls `tool` with `arguments` and returns the server's `CallToolResult` as JSON. A
    /// call is sent once: a failure is never retried (the server may have run it).
    ///
    /// # Errors
    ///
    /// Why the call has no result: the server is not connected, went away, answered with a
    /// JSON-RPC error (its message) or not in time.
    pub async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, String> {
        let peer = match self.snapshot() {
            Some(ready) => ready.peer,
            None => {
                let guard = self.conn.lock().await;
                match guard.as_ref() {
                    Some(c) if !c.service.is_transport_closed() => c.service.peer().clone(),
                    _ => return Err("the server is not connected".to_string()),
                }
            }
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        match tokio::time::timeout(self.timeout, peer.call_tool(params)).await {
            Ok(Ok(result)) => serde_json::to_value(result).map_err(|e| e.to_string()),
            Ok(Err(rmcp::ServiceError::McpError(e))) => Err(format!(
                "the server answered error {}: {}",
                e.code.0, e.message
            )),
            Ok(Err(e)) => {
                *self.ready() = None;
                *self.conn.lock().await = None;
                Err(format!("the call failed: {e}"))
            }
            Err(_) => Err("the server did not answer in time".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::without_type_names;

    #[test]
    fn rmcp_type_names_are_left_out_of_an_error() {
        let rmcp = "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::async_impl::client::Client>>] error: Client error: error sending request for url (http://127.0.0.1:9100/mcp), when send initialize request";
        assert_eq!(
            without_type_names(&rmcp),
            "Send message error Transport error: Client error: error sending request for url (http://127.0.0.1:9100/mcp), when send initialize request"
        );
        assert_eq!(without_type_names(&"a [b] c [d"), "a [b] c [d");
        assert_eq!(without_type_names(&"x [a::b]"), "x");
    }
}
