//! One upstream MCP server, reached with the rmcp client over a child process's stdio or over
//! Streamable HTTP: connected on first use, its tool list fetched (every page) before any of
//! its calls is judged and again after `notifications/tools/list_changed`, and reconnected
//! after it went away.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::client::ClientHandler;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};

use super::config::ServerConfig;

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
    tools: Option<Arc<Vec<Value>>>,
}

/// One upstream server. Cheap to share (`Arc`); each method takes the connection lock only
/// while it needs it.
pub struct Upstream {
    name: String,
    config: ServerConfig,
    timeout: Duration,
    stale: Arc<AtomicBool>,
    conn: tokio::sync::Mutex<Option<Connection>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn log(message: &str) {
    eprintln!("toolwarden gateway: {message}");
}

impl Upstream {
    /// An upstream named `name` (not connected yet); `timeout` bounds each request to it.
    pub fn new(name: &str, config: ServerConfig, timeout: Duration) -> Upstream {
        Upstream {
            name: name.to_string(),
            config,
            timeout,
            stale: Arc::new(AtomicBool::new(false)),
            conn: tokio::sync::Mutex::new(None),
        }
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
                    .map_err(|e| format!("initialize failed: {e}"))?
            }
            ServerConfig::Url(url) => {
                let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                tokio::time::timeout(self.timeout, listener.serve(transport))
                    .await
                    .map_err(|_| "no answer to initialize in time".to_string())?
                    .map_err(|e| format!("initialize failed: {e}"))?
            }
        };
        Ok(Connection {
            service,
            tools: None,
        })
    }

    /// The server's tools as it lists them (every page), fetched when not known yet, after it
    /// said its list changed, and after a reconnection.
    ///
    /// # Errors
    ///
    /// Why the server is unavailable: it cannot be started or reached, or it did not answer
    /// in time. The connection is dropped then, and the next use connects again.
    pub async fn tools(&self) -> Result<Arc<Vec<Value>>, String> {
        let mut guard = self.conn.lock().await;
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
            *guard = Some(self.connect().await.inspect_err(|e| {
                log(&format!("server `{}` is unavailable: {e}", self.name));
            })?);
        }
        let Some(conn) = guard.as_mut() else {
            return Err("not connected".to_string());
        };
        if self.stale.swap(false, Ordering::SeqCst) {
            conn.tools = None;
        }
        if let Some(t) = &conn.tools {
            return Ok(t.clone());
        }
        let listed = tokio::time::timeout(self.timeout, conn.service.peer().list_all_tools()).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                *guard = None;
                return Err(format!("tools/list failed: {e}"));
            }
            Err(_) => {
                *guard = None;
                return Err("tools/list not answered in time".to_string());
            }
        };
        let tools: Vec<Value> = tools
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        let tools = Arc::new(tools);
        conn.tools = Some(tools.clone());
        Ok(tools)
    }

    /// Calls `tool` with `arguments` and returns the server's `CallToolResult` as JSON. A
    /// call is sent once: a failure is never retried (the server may have run it).
    ///
    /// # Errors
    ///
    /// Why the call has no result: the server is not connected, went away, answered with a
    /// JSON-RPC error (its message) or not in time.
    pub async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, String> {
        let peer = {
            let guard = self.conn.lock().await;
            match guard.as_ref() {
                Some(c) if !c.service.is_transport_closed() => c.service.peer().clone(),
                _ => return Err("the server is not connected".to_string()),
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
                *self.conn.lock().await = None;
                Err(format!("the call failed: {e}"))
            }
            Err(_) => Err("the server did not answer in time".to_string()),
        }
    }
}
