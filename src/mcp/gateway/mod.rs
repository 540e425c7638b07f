//! `toolwarden gateway`: one MCP server in front of several upstream servers (stdio child
//! processes and Streamable HTTP), judging every `tools/call` with [`crate::mcp::Judge`]. See
//! docs/gateway.md.
//!
//! - [`config`]: the TOML configuration.
//! - [`identity`]: bearer JWTs to roles, permissions, tenant, mode, connectors.
//! - [`session_store`]: per-session state (pending calls, turn, flow labels) behind [`SessionStore`], in
//!   memory ([`MemoryStore`]).
//! - [`redis_store`]: the same state in Redis, shared by replicas ([`RedisStore`]).
//! - [`upstream`]: one upstream server through the rmcp client.
//! - [`core`]: the aggregated listing and the judged call, transport-free.
//! - [`handler`]: the rmcp server handler over [`core`].
//! - [`listener`]: the accept loop (connection cap, idle connections closed, back-off).
//! - [`http`]: Streamable HTTP at `/mcp` and the decision API ([`api`]) behind the strict,
//!   authenticating guard layer.
//! - [`stdio`]: one client on stdio, each line parsed strictly before rmcp reads it.
//! - [`telemetry`]: an OpenTelemetry span per `tools/call`, exported over OTLP/HTTP.

mod answer;
pub mod api;
pub mod config;
pub mod core;
pub mod handler;
pub mod http;
pub mod identity;
mod in_flight;
pub mod listener;
pub mod redis_store;
pub mod session_store;
pub mod stdio;
pub mod telemetry;
pub mod upstream;

use std::sync::Arc;

pub use config::{GatewayConfig, IdentityConfig, KeySource, Limits, ServerConfig};
pub use core::{CallAnswer, Gateway, UserAnswer, QUERY_META, SESSION_META};
pub use identity::{Identity, Verifier};
pub use redis_store::RedisStore;
pub use session_store::{
    new_session_id, Changed, Labels, MemoryStore, SessionChange, SessionKey, SessionState,
    SessionStore, StoreError, StoreFuture,
};

use crate::mcp::record::{AuditSink, SyncedFile};
use crate::policy::Policy;

/// Builds the gateway of `config` with `policy` (sessions in memory, or in Redis with
/// `[state] redis`) and serves it: over
/// HTTP when `config.listen` is set, else to one client on stdio who is `stdio_identity`.
/// Returns when the server stops (stdin closed; on HTTP, Ctrl-C).
///
/// # Errors
///
/// A message when the audit log cannot be opened, the configuration does not fit the
/// policy, the address cannot be bound, or `[identity]` is given for stdio.
pub fn serve(
    policy: Policy,
    config: GatewayConfig,
    stdio_identity: Identity,
) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let audit: Option<Box<dyn AuditSink>> = match &config.audit {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open audit file `{}`: {e}", path.display()))?;
            Some(if config.audit_fsync {
                Box::new(SyncedFile(file))
            } else {
                Box::new(file)
            })
        }
        None => None,
    };
    if config.listen.is_none() && config.identity.is_some() {
        return Err(
            "[identity] applies to HTTP only: on stdio, give the identity with --role, --permission, --tenant, --mode"
                .to_string(),
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let l = &config.limits;
        let store: Arc<dyn SessionStore> = match &config.redis {
            Some(url) => Arc::new(RedisStore::new(
                url,
                l.max_sessions,
                l.max_sessions_per_principal,
                l.session_idle,
            )?),
            None => Arc::new(MemoryStore::new(
                l.max_sessions,
                l.max_sessions_per_principal,
                l.session_idle,
            )),
        };
        let listen = config.listen;
        let gateway = Arc::new(Gateway::new(policy, config, store.clone(), audit)?);
        // Idle sessions are forgotten even when no request comes.
        {
            let store = store.clone();
            let every = (gateway.config().limits.session_idle / 4)
                .max(std::time::Duration::from_millis(100));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if let Err(e) = store.sweep().await {
                        core::log(&format!("idle sessions not swept: {e}"));
                    }
                }
            });
        }
        let limits = gateway.config().limits.clone();
        let kept = gateway.clone();
        let served = match listen {
            Some(addr) => {
                let app = http::app(gateway)?;
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
                let local = listener.local_addr().map_err(|e| e.to_string())?;
                eprintln!("toolwarden gateway: listening on http://{local}/mcp");
                listener::serve(listener, app, &limits).await
            }
            None => stdio::serve(gateway, stdio_identity).await,
        };
        // The spans not yet exported are sent before the gateway exits.
        let telemetry = tokio::task::spawn_blocking(move || kept.telemetry().shutdown());
        let _ = telemetry.await;
        served
    })
}
