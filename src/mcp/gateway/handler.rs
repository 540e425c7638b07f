//! The gateway as an MCP server (an rmcp [`ServerHandler`]): `tools/list` is the aggregated,
//! judged list, paginated; `tools/call` is judged by [`Gateway::call`], with the user asked
//! through `elicitation/create` when the client declared elicitation. Nothing else is served:
//! `resources/*` and `prompts/*` are refused with a JSON-RPC error saying why ([`not_served`]),
//! so nothing reaches an upstream unjudged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams,
    ElicitationAction, ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::RoleServer;
use serde_json::{json, Value};

use super::core::{store_refusal, CallAnswer, Gateway, UserAnswer, QUERY_META, SESSION_META};
use super::identity::Identity;
use super::session_store::SessionKey;

/// Tools per `tools/list` page.
pub const PAGE_SIZE: usize = 100;

/// The rmcp server handler; one per MCP session (cheap clone of the shared [`Gateway`]).
#[derive(Clone, Debug)]
pub struct GatewayHandler {
    gateway: Arc<Gateway>,
    /// The identity of the one stdio client (the command line's) and the session the gateway
    /// opened for it; `None` over HTTP, where each request carries its own.
    stdio: Option<(Identity, String)>,
    /// Whether the session's one `initialize` was answered. A second is refused: the client's
    /// capabilities (whether it elicits, so whether the user or a `confirmed` field confirms)
    /// are those it declared when the session opened, and nobody holding the session id can
    /// change them later.
    initialized: Arc<AtomicBool>,
}

/// The refusal of `method` (a `resources/…` or `prompts/…` request): JSON-RPC -32601 saying
/// that the gateway serves tools only. The policy judges tool calls; a resource read or a
/// prompt of an upstream would reach it, and its content the model, with no decision (no
/// connector allowlist, role, tenant or intent applies to it), so none is forwarded.
pub fn not_served(method: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("Method not found: {method}: the toolwarden gateway serves tools only; the policy judges tool calls, and upstream resources and prompts are not forwarded unjudged"),
        Some(json!({"method": method})),
    )
}

fn internal(message: &str) -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, message.to_string(), None)
}

impl GatewayHandler {
    /// A handler for HTTP sessions: each request's identity comes from the HTTP layer.
    pub fn http(gateway: Arc<Gateway>) -> GatewayHandler {
        GatewayHandler {
            gateway,
            stdio: None,
            initialized: Arc::default(),
        }
    }

    /// A handler for the one stdio client, who is `identity`, in the session `session` the
    /// gateway opened for it ([`crate::mcp::gateway::SessionStore::open`]).
    pub fn stdio(gateway: Arc<Gateway>, identity: Identity, session: String) -> GatewayHandler {
        GatewayHandler {
            gateway,
            stdio: Some((identity, session)),
            initialized: Arc::default(),
        }
    }

    /// The identity and the session of a request. Over HTTP the identity is the one the HTTP
    /// layer verified (a request without one is refused: fail closed); on stdio, the command
    /// line's. The session is the one `_meta["toolwarden/session"]` names, else the
    /// `Mcp-Session-Id` (HTTP) or the stdio client's; either way one the gateway issued to
    /// this principal, which the store checks. A request naming none is refused.
    fn who(
        &self,
        ctx: &RequestContext<RoleServer>,
        meta: &Value,
    ) -> Result<(Identity, SessionKey), ErrorData> {
        let named = match meta.get(SESSION_META) {
            None => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                return Err(ErrorData::invalid_params(
                    format!("Invalid params: `_meta[\"{SESSION_META}\"]` must be a string"),
                    None,
                ))
            }
        };
        if let Some(parts) = ctx.extensions.get::<http::request::Parts>() {
            let identity = parts
                .extensions
                .get::<Identity>()
                .cloned()
                .ok_or_else(|| internal("the request has no verified identity"))?;
            let header = parts
                .headers
                .get("mcp-session-id")
                .and_then(|h| h.to_str().ok());
            let Some(id) = named.or(header) else {
                return Err(ErrorData::invalid_params(
                    format!("Invalid session: the request names no session; send the `Mcp-Session-Id` of initialize, or `_meta[\"{SESSION_META}\"]` with an id of POST /v1/sessions"),
                    None,
                ));
            };
            let key = SessionKey::new(identity.principal(), id);
            return Ok((identity, key));
        }
        match &self.stdio {
            Some((i, session)) => {
                let key = SessionKey::new(i.principal(), named.unwrap_or(session));
                Ok((i.clone(), key))
            }
            None => Err(internal("the request has no verified identity")),
        }
    }
}

fn refusal(answer: CallAnswer) -> ErrorData {
    match answer {
        CallAnswer::Error {
            code,
            message,
            data,
        } => ErrorData::new(ErrorCode(code as i32), message, data),
        CallAnswer::Result(v) => internal(&v.to_string()),
    }
}

/// The params' `_meta` and the context's, merged (params first).
fn meta_of(params_meta: Option<Value>, ctx: &RequestContext<RoleServer>) -> Value {
    let mut out = serde_json::to_value(&ctx.meta).unwrap_or(Value::Null);
    if !out.is_object() {
        out = json!({});
    }
    if let Some(Value::Object(p)) = params_meta {
        for (k, v) in p {
            out[k] = v;
        }
    }
    out
}

fn elicits(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

impl ServerHandler for GatewayHandler {
    /// The handshake: the first `initialize` of the session is answered as rmcp does; any
    /// later one is refused with -32600 and changes nothing (rmcp's default would replace the
    /// client's declared capabilities, elicitation included).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if self.initialized.swap(true, Ordering::SeqCst) {
            return Err(ErrorData::invalid_request(
                "Invalid Request: this session is already initialized; an MCP session has one initialize (open a new session for other capabilities)",
                None,
            ));
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "toolwarden-gateway",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "toolwarden gateway: the tools of several MCP servers as mcp__<server>__<tool>, each call judged by a policy",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let params_meta = request
            .as_ref()
            .and_then(|r| r.meta.as_ref())
            .and_then(|m| serde_json::to_value(m).ok());
        let meta = meta_of(params_meta, &context);
        let (identity, key) = self.who(&context, &meta)?;
        let query = meta.get(QUERY_META).and_then(Value::as_str);
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let invalid = |c: &str| {
            ErrorData::invalid_params(format!("Invalid params: invalid cursor `{c}`"), None)
        };
        let start = match cursor {
            None => 0,
            Some(c) => c.parse::<usize>().map_err(|_| invalid(c))?,
        };
        let (tools, unavailable) = self
            .gateway
            .list(&identity, &key, query, elicits(&context))
            .await
            .map_err(|e| refusal(store_refusal(&e)))?;
        // A cursor is the index of a page's first tool, one the gateway gave: any other
        // (past the list, or so large that the page's end overflows) is refused.
        let end = match cursor {
            Some(c) if start >= tools.len() => return Err(invalid(c)),
            _ => start
                .checked_add(PAGE_SIZE)
                .map_or(tools.len(), |e| e.min(tools.len())),
        };
        let page: Vec<Value> = tools
            .get(start..end)
            .map(<[Value]>::to_vec)
            .unwrap_or_default();
        let mut result = json!({"tools": page});
        if end < tools.len() {
            result["nextCursor"] = Value::from(end.to_string());
        }
        if !unavailable.is_empty() {
            result["_meta"] = json!({"toolwarden/unavailable": unavailable});
        }
        serde_json::from_value(result)
            .map_err(|e| internal(&format!("cannot build the tools/list result: {e}")))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Err(not_served("resources/list"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Err(not_served("resources/templates/list"))
    }

    async fn read_resource(
        &self,
        _request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Err(not_served("resources/read"))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(not_served("prompts/list"))
    }

    async fn get_prompt(
        &self,
        _request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Err(not_served("prompts/get"))
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let params_meta = request
            .meta
            .as_ref()
            .and_then(|m| serde_json::to_value(m).ok());
        let meta = meta_of(params_meta, &context);
        let (identity, key) = self.who(&context, &meta)?;
        let query = meta.get(QUERY_META).and_then(Value::as_str);
        let timeout = self.gateway.config().limits.confirm_timeout;
        let confirm = elicits(&context).then(|| {
            let peer = context.peer.clone();
            move |message: String| async move {
                let params: ElicitRequestParams = match serde_json::from_value(json!({
                    "mode": "form",
                    "message": message,
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"confirm": {
                            "type": "boolean",
                            "title": "Run this tool call",
                            "description": "true runs the call; false or no answer refuses it",
                        }},
                        "required": ["confirm"],
                    },
                })) {
                    Ok(p) => p,
                    Err(e) => return UserAnswer::Declined(format!("no confirmation asked: {e}")),
                };
                match tokio::time::timeout(timeout, peer.create_elicitation(params)).await {
                    Err(_) => UserAnswer::Declined("no answer in time".to_string()),
                    Ok(Err(e)) => UserAnswer::Declined(format!("the confirmation failed: {e}")),
                    Ok(Ok(r)) => match r.action {
                        ElicitationAction::Accept => {
                            if r.content.as_ref().and_then(|c| c.get("confirm"))
                                == Some(&Value::Bool(true))
                            {
                                UserAnswer::Confirmed
                            } else {
                                UserAnswer::Declined("accepted without confirm: true".to_string())
                            }
                        }
                        ElicitationAction::Decline => UserAnswer::Declined("declined".to_string()),
                        _ => UserAnswer::Declined("cancelled".to_string()),
                    },
                }
            }
        });
        let request_id = serde_json::to_value(&context.id).unwrap_or(Value::Null);
        let answer = self
            .gateway
            .call_traced(
                &identity,
                &key,
                query,
                &request.name,
                request.arguments.take(),
                confirm,
                &request_id,
                &meta,
            )
            .await;
        match answer {
            CallAnswer::Result(v) => serde_json::from_value::<CallToolResult>(v)
                .map(CallToolResponse::from)
                .map_err(|e| {
                    internal(&format!("the server's result is not a CallToolResult: {e}"))
                }),
            CallAnswer::Error {
                code,
                message,
                data,
            } => Err(ErrorData::new(ErrorCode(code as i32), message, data)),
        }
    }
}
