//! The HTTP side: one listener serving MCP Streamable HTTP at `/mcp` (rmcp's service) and the
//! decision API at `/v1/…`, behind one layer that every request crosses first:
//!
//! - identity: with `[identity]`, a request without a valid bearer token gets HTTP 401, and
//!   one whose token names a mode the policy does not declare gets HTTP 403;
//! - a POST body is read within the size cap (HTTP 413) and the time limit (HTTP 408), then
//!   parsed once, strictly ([`parse_message`]: a duplicated key or too deep is -32600, not
//!   JSON is -32700, both with HTTP 400), and what the handlers read is that parsed value
//!   serialized again, never the client's bytes;
//! - on `/mcp`, a message that is not JSON-RPC 2.0, whose id is neither a string nor a 64-bit
//!   signed integer (a request's never null), whose `method` is no string, or that is both a
//!   request and a response or neither, is refused (-32600); so is a JSON-RPC batch (MCP has
//!   no batches since 2025-06-18) and a `tools/call` without an id (a call must be answerable
//!   to be judged and confirmed), so every call reaches the judging handler as a request;
//! - an MCP session belongs to the principal whose `initialize` opened it: a request naming
//!   another principal's session (or one the gateway did not open) gets HTTP 404, whatever its
//!   method (POST, GET, DELETE), so nobody answers another's elicitation or ends their session;
//! - `initialize` opens the session's judging state for the principal in the session store; at
//!   the store's caps the new MCP session is closed again and refused (HTTP 429 for the
//!   principal's cap, 503 for the gateway's), and a DELETE of the session forgets that state;
//! - a request whose id is still being answered in its session is refused (-32600), so no
//!   answer carries another request's result (`in_flight.rs`);
//! - the answer to a request on `/mcp` is rmcp's event stream, or its one message as an
//!   `application/json` body when that message is the request's response (`answer.rs`);
//! - on a loopback listener, the decision API checks the `Host` header (without one, the
//!   URI's authority, HTTP/2's `:authority`) as rmcp does for `/mcp` (a page that rebinds a
//!   name to 127.0.0.1 gets HTTP 403).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, post};
use axum::Router;
use http_body_util::{BodyExt, Limited};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};

use super::answer;
use super::api;
use super::core::Gateway;
use super::handler::GatewayHandler;
use super::identity::{Identity, Verifier};
use super::in_flight::{until_answered, InFlight};
use super::session_store::StoreError;
use crate::mcp::message::{parse_message, rpc_error, INVALID_REQUEST};

/// What the guard layer needs.
#[derive(Clone)]
pub(crate) struct Guard {
    pub gateway: Arc<Gateway>,
    pub verifier: Option<Arc<Verifier>>,
    pub sessions: Arc<LocalSessionManager>,
    /// The principal of each MCP session the gateway opened, by `Mcp-Session-Id`.
    pub owners: Arc<Mutex<HashMap<String, String>>>,
    /// Whether the decision API checks the `Host` header (a loopback listener).
    pub check_host: bool,
    /// The request ids each MCP session has in flight.
    pub in_flight: InFlight,
}

/// Whether a `Host` header names the loopback interface (`localhost`, `127.0.0.1`, `[::1]`,
/// with or without a port).
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    matches!(
        name.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "::1"
    )
}

fn not_found_session() -> Response {
    json_response(StatusCode::NOT_FOUND, json!({"error": "session not found"}))
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn rpc_refusal(code: i64, message: &str) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        rpc_error(&Value::Null, code, message, None),
    )
}

/// Why a parsed `/mcp` message is refused before rmcp reads it, if it is.
pub(crate) fn refuse_framing(msg: &Value) -> Option<&'static str> {
    match msg {
        Value::Array(_) => {
            Some("Invalid Request: JSON-RPC batches are not accepted (MCP has none)")
        }
        Value::Object(o) => {
            if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
                return Some("Invalid Request: a JSON-RPC message has `\"jsonrpc\": \"2.0\"`");
            }
            // MCP ids are strings or integers; a fraction, an exponent or an integer past 64
            // signed bits would be answered under another id, and any other type has none.
            if let Some(id) = o.get("id") {
                if !(id.is_null() || id.is_string() || id.is_i64()) {
                    return Some("Invalid Request: an id is a string or an integer (of at most 64 signed bits)");
                }
            }
            // A request or notification (a string `method`), or a response (a `result` or an
            // `error`, with no `method`); MCP ids are never null.
            let answer = o.contains_key("result") || o.contains_key("error");
            match o.get("method") {
                Some(Value::String(_)) if answer => {
                    return Some("Invalid Request: a message is a request or a response, not both")
                }
                Some(Value::String(_)) if o.get("id") == Some(&Value::Null) => {
                    return Some("Invalid Request: an id is a string or an integer, never null")
                }
                Some(Value::String(_)) => {}
                Some(_) => return Some("Invalid Request: `method` is a string"),
                None if !answer => {
                    return Some(
                        "Invalid Request: a message has a `method`, or a `result` or an `error`",
                    )
                }
                None => {}
            }
            // A null id is refused above; a call must have one to be answered.
            let call = o.get("method").and_then(Value::as_str) == Some("tools/call");
            (call && !o.contains_key("id")).then_some(
                "Invalid Request: a tools/call needs an id (a string or a number) to be judged and answered",
            )
        }
        _ => Some("Invalid Request: expected a JSON-RPC object"),
    }
}

async fn guard(State(g): State<Guard>, req: Request, next: Next) -> Response {
    let identity = match &g.verifier {
        None => Identity::anonymous(),
        Some(v) => {
            let auth = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok());
            match v.verify(auth) {
                Ok(i) => i,
                Err(reason) => {
                    let mut r = json_response(
                        StatusCode::UNAUTHORIZED,
                        json!({"error": format!("unauthorized: {reason}")}),
                    );
                    r.headers_mut().insert(
                        header::WWW_AUTHENTICATE,
                        header::HeaderValue::from_static("Bearer"),
                    );
                    return r;
                }
            }
        }
    };
    if let Some(why) = g.gateway.unknown_mode(&identity) {
        return json_response(
            StatusCode::FORBIDDEN,
            json!({"error": format!("forbidden: {why}")}),
        );
    }
    let principal = identity.principal();
    let (mut parts, body) = req.into_parts();
    parts.extensions.insert(identity);
    let mcp = parts.uri.path() == "/mcp";
    if !mcp && g.check_host {
        // HTTP/2 names the host in `:authority` (the URI's), not in a `Host` header.
        let host = match parts.headers.get(header::HOST) {
            Some(h) => h.to_str().ok(),
            None => parts.uri.authority().map(http::uri::Authority::as_str),
        };
        if !host.is_some_and(loopback_host) {
            return json_response(
                StatusCode::FORBIDDEN,
                json!({"error": "forbidden: the Host header does not name this loopback listener"}),
            );
        }
    }
    let session = parts
        .headers
        .get("mcp-session-id")
        .map(|h| h.to_str().unwrap_or("\u{FFFD}").to_string());
    if mcp {
        if let Some(id) = &session {
            let owners = g
                .owners
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if owners.get(id) != Some(&principal) {
                return not_found_session();
            }
        }
    }
    if parts.method != axum::http::Method::POST {
        let ends = mcp && parts.method == axum::http::Method::DELETE;
        let response = next.run(Request::from_parts(parts, body)).await;
        if let (true, Some(id), true) = (ends, &session, response.status().is_success()) {
            let key = super::session_store::SessionKey::new(principal, id.as_str());
            if let Err(e) = g.gateway.store().close(&key).await {
                super::core::log(&format!(
                    "the ended session could not be forgotten ({e}); it expires when idle"
                ));
            }
        }
        return response;
    }
    let limits = &g.gateway.config().limits;
    let read = Limited::new(body, limits.max_body_bytes).collect();
    let bytes: Bytes = match tokio::time::timeout(limits.request_timeout, read).await {
        Err(_) => {
            return json_response(
                StatusCode::REQUEST_TIMEOUT,
                json!({"error": format!("the request body did not arrive within {} s", limits.request_timeout.as_secs())}),
            )
        }
        Ok(Err(e)) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return json_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    json!({"error": format!("the request body is over {} bytes", limits.max_body_bytes)}),
                );
            }
            return json_response(
                StatusCode::BAD_REQUEST,
                json!({"error": format!("cannot read the request body: {e}")}),
            );
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    let msg = match parse_message(&bytes) {
        Ok(v) => v,
        Err(e) => return rpc_refusal(e.code(), &e.to_string()),
    };
    if parts.uri.path() == "/mcp" {
        if let Some(why) = refuse_framing(&msg) {
            return rpc_refusal(INVALID_REQUEST, why);
        }
        // A new MCP session past the cap is refused; the sessions kept expire when idle.
        if !parts.headers.contains_key("mcp-session-id")
            && msg.get("method").and_then(Value::as_str) == Some("initialize")
            && g.sessions.sessions.read().await.len() >= limits.max_sessions
        {
            return json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": format!("the gateway keeps {} sessions, its limit; try again later", limits.max_sessions)}),
            );
        }
    }
    let opens =
        mcp && session.is_none() && msg.get("method").and_then(Value::as_str) == Some("initialize");
    // A request (a method and an id) is answered on its POST: as one JSON body when nothing
    // but its response is sent there ([`answer::plain`]).
    let request_id = match msg.get("id") {
        Some(id) if mcp && !id.is_null() && msg.get("method").is_some() => Some(id.clone()),
        _ => None,
    };
    // One request per id at a time in a session: rmcp would answer the second with the
    // first's result.
    let held = match (&session, &request_id) {
        (Some(sid), Some(id)) => match g.in_flight.hold(sid, id) {
            Some(h) => Some(h),
            None => {
                return rpc_refusal(
                    INVALID_REQUEST,
                    "Invalid Request: a request with this id is still being answered in this session; send it with another id",
                )
            }
        },
        _ => None,
    };
    if let Some(h) = &held {
        // rmcp hands the request's parts to the handler: the handler holds the id too.
        parts.extensions.insert(h.clone());
    }
    let text = msg.to_string();
    parts.headers.insert(
        header::CONTENT_LENGTH,
        header::HeaderValue::from(text.len()),
    );
    let response = next.run(Request::from_parts(parts, Body::from(text))).await;
    if opens {
        if let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|h| h.to_str().ok())
        {
            let id = id.to_string();
            // The judging state of the session, bound to the principal; refused at a cap.
            if let Err(e) = g.gateway.store().open(&principal, Some(&id)).await {
                use rmcp::transport::streamable_http_server::session::SessionManager;
                let _ = g.sessions.close_session(&id.as_str().into()).await;
                let status = match e {
                    StoreError::PrincipalFull(_) => StatusCode::TOO_MANY_REQUESTS,
                    _ => StatusCode::SERVICE_UNAVAILABLE,
                };
                return json_response(status, json!({"error": e.to_string()}));
            }
            let live = g.sessions.sessions.read().await;
            let mut owners = g
                .owners
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Forget the sessions rmcp no longer keeps (expired or deleted): bounded by its cap.
            owners.retain(|sid, _| live.contains_key(sid.as_str()));
            owners.insert(id, principal);
        }
    }
    let response = match request_id {
        Some(id) => answer::plain(response, &id).await,
        None => response,
    };
    match held {
        Some(h) => until_answered(response, h),
        None => response,
    }
}

/// The gateway's HTTP application: `/mcp` and the decision API behind the guard layer.
///
/// # Errors
///
/// A message when the `[identity]` key cannot be read.
pub fn app(gateway: Arc<Gateway>) -> Result<Router, String> {
    let config = gateway.config();
    let verifier = match &config.identity {
        Some(i) => Some(Arc::new(Verifier::new(i)?)),
        None => None,
    };
    let limits = config.limits.clone();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(limits.session_idle);
    let sessions = Arc::new(sessions);
    // An open event stream carries a keep-alive comment well within the idle timeout, so only
    // a silent connection is closed as idle.
    let keep_alive = (limits.idle_timeout / 3).min(std::time::Duration::from_secs(15));
    let mut http_config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(limits.max_body_bytes)
        .with_sse_keep_alive(Some(keep_alive));
    if config.listen.is_some_and(|a| !a.ip().is_loopback()) {
        // Identity is required there: every request carries a verified token.
        http_config = http_config.disable_allowed_hosts();
    }
    let handler_gateway = gateway.clone();
    let service = StreamableHttpService::new(
        move || Ok(GatewayHandler::http(handler_gateway.clone())),
        sessions.clone(),
        http_config,
    );
    let guard_state = Guard {
        gateway: gateway.clone(),
        verifier,
        sessions,
        owners: Arc::default(),
        check_host: config.listen.is_some_and(|a| a.ip().is_loopback()),
        in_flight: InFlight::default(),
    };
    Ok(Router::new()
        .route_service("/mcp", service)
        .route("/v1/classify", post(api::classify))
        .route("/v1/offer", post(api::offer))
        .route("/v1/check_call", post(api::check_call))
        .route("/v1/sessions", post(api::open_session))
        .route("/v1/sessions/{id}", delete(api::close_session))
        .with_state(gateway)
        .layer(axum::middleware::from_fn_with_state(guard_state, guard)))
}
