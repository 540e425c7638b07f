//! The HTTP side: one listener serving MCP Streamable HTTP at `/mcp` (rmcp's service) and the
//! decision API at `/v1/…`, behind one layer that every request crosses first:
//!
//! - identity: with `[identity]`, a request without a valid bearer token gets HTTP 401;
//! - a POST body is read within the size cap (HTTP 413) and the time limit (HTTP 408), then
//!   parsed once, strictly ([`parse_message`]: a duplicated key or too deep is -32600, not
//!   JSON is -32700, both with HTTP 400), and what the handlers read is that parsed value
//!   serialized again, never the client's bytes;
//! - on `/mcp`, a JSON-RPC batch is refused (-32600; MCP has no batches since 2025-06-18), and
//!   so is a `tools/call` without an id or with `"id": null` (a call must be answerable to be
//!   judged and confirmed), so every call reaches the judging handler as a request.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use http_body_util::{BodyExt, Limited};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};

use super::api;
use super::core::Gateway;
use super::handler::GatewayHandler;
use super::identity::{Identity, Verifier};
use crate::mcp::message::{parse_message, rpc_error, INVALID_REQUEST};

/// What the guard layer needs.
#[derive(Clone)]
pub(crate) struct Guard {
    pub gateway: Arc<Gateway>,
    pub verifier: Option<Arc<Verifier>>,
    pub sessions: Arc<LocalSessionManager>,
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
            let call = o.get("method").and_then(Value::as_str) == Some("tools/call");
            let no_id = matches!(o.get("id"), None | Some(Value::Null));
            (call && no_id).then_some(
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
    let (mut parts, body) = req.into_parts();
    parts.extensions.insert(identity);
    if parts.method != axum::http::Method::POST {
        return next.run(Request::from_parts(parts, body)).await;
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
    let text = msg.to_string();
    parts.headers.insert(
        header::CONTENT_LENGTH,
        header::HeaderValue::from(text.len()),
    );
    next.run(Request::from_parts(parts, Body::from(text))).await
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
    let mut http_config =
        StreamableHttpServerConfig::default().with_max_request_body_bytes(limits.max_body_bytes);
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
    };
    Ok(Router::new()
        .route_service("/mcp", service)
        .route("/v1/classify", post(api::classify))
        .route("/v1/offer", post(api::offer))
        .route("/v1/check_call", post(api::check_call))
        .with_state(gateway)
        .layer(axum::middleware::from_fn_with_state(guard_state, guard)))
}
