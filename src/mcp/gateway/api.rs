//! The decision API (`POST /v1/classify`, `/v1/offer`, `/v1/check_call`), for agents in
//! languages without a binding: JSON bodies mirroring the library, the library's JSON back,
//! errors as `{"error": …}` with HTTP 400. The identity is the request's (the same rules as
//! `/mcp`); `POST /v1/sessions` opens a session for the request's principal, and
//! `check_call` counts calls in the turn of the `session` it names (one so issued);
//! `DELETE /v1/sessions/{id}` ends one of the principal's sessions.

use std::sync::Arc;

use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::core::{Gateway, LABEL_RETRIES};
use super::identity::Identity;
use super::session_store::{Changed, SessionChange, SessionKey, StoreError};
use crate::classify::Intent;

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

/// Reads a body (already parsed strictly by the guard layer) as `T`.
fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Box<Response>> {
    serde_json::from_slice(bytes).map_err(|e| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            format!("bad request body: {e}"),
        ))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassifyBody {
    query: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OfferBody {
    query: Option<String>,
    intent: Option<String>,
    tools: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckCallBody {
    query: Option<String>,
    intent: Option<String>,
    call: CallBody,
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallBody {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
    /// The tool's schema as listed (annotations tighten), when the caller has it.
    #[serde(default)]
    schema: Option<Value>,
}

fn intent_of(g: &Gateway, query: &Option<String>, intent: &Option<String>) -> Intent {
    match (query, intent) {
        (Some(q), _) => g.policy().classify(q),
        (None, Some(i)) => Intent::named(i.clone()),
        (None, None) => g.intent(None),
    }
}

fn store_status(e: &StoreError) -> StatusCode {
    match e {
        StoreError::Unknown(_) => StatusCode::NOT_FOUND,
        StoreError::PrincipalFull(_) => StatusCode::TOO_MANY_REQUESTS,
        StoreError::Full(_) | StoreError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// `POST /v1/sessions` (any JSON object body, `{}`): opens a session for the request's
/// principal and answers `{"session": ID}`, the id to send as `check_call`'s `session` or in
/// `_meta["toolwarden/session"]` on `/mcp`. HTTP 429 at the principal's cap, 503 at the
/// gateway's.
pub(crate) async fn open_session(
    State(g): State<Arc<Gateway>>,
    Extension(identity): Extension<Identity>,
    bytes: axum::body::Bytes,
) -> Response {
    let _: serde_json::Map<String, Value> = match body(&bytes) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    match g.store().open(&identity.principal(), None).await {
        Ok(key) => Json(json!({"session": key.id})).into_response(),
        Err(e) => error(store_status(&e), e.to_string()),
    }
}

/// `DELETE /v1/sessions/{id}`: ends a session of the request's principal (its held calls and
/// turn are forgotten), so a principal at its cap can open another; answers
/// `{"closed": ID}`. A session of another principal, or none, is HTTP 404.
pub(crate) async fn close_session(
    State(g): State<Arc<Gateway>>,
    Extension(identity): Extension<Identity>,
    Path(id): Path<String>,
) -> Response {
    let key = SessionKey::new(identity.principal(), id.as_str());
    // Only a session the store knows for this principal is closed (`held` reads only, and
    // fails for a session the principal was not issued).
    if let Err(e) = g.store().held(&key, "").await {
        return error(store_status(&e), e.to_string());
    }
    if let Err(e) = g.store().close(&key).await {
        return error(store_status(&e), e.to_string());
    }
    Json(json!({"closed": id})).into_response()
}

/// `POST /v1/classify` `{"query"}`: the intent, as the library's JSON.
pub(crate) async fn classify(State(g): State<Arc<Gateway>>, bytes: axum::body::Bytes) -> Response {
    let b: ClassifyBody = match body(&bytes) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    Json(json!(g.policy().classify(&b.query))).into_response()
}

/// `POST /v1/offer` `{"query" or "intent", "tools": [schemas]}`: `{"tools": [the schemas the
/// request may see]}`.
pub(crate) async fn offer(
    State(g): State<Arc<Gateway>>,
    Extension(identity): Extension<Identity>,
    bytes: axum::body::Bytes,
) -> Response {
    let b: OfferBody = match body(&bytes) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let request = identity.request(&g.config().connectors);
    let intent = intent_of(&g, &b.query, &b.intent);
    match g.policy().offer_schemas(&request, &intent, &b.tools) {
        Ok(tools) => Json(json!({"tools": tools, "intent": intent.name.as_str()})).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

/// `POST /v1/check_call` `{"query" or "intent", "call": {"name", "arguments"[, "schema"]},
/// "session"}`: the verdict as the library's JSON (`decision`, `tool`, …). With a `session`
/// (an id of `POST /v1/sessions` for this principal; another is HTTP 404), the call is judged
/// with that session's flow labels, and an allowed call counts in its turn (a different query
/// begins a new one) and puts its labels on it; when the labels keep changing while it is
/// judged, HTTP 503. The policy's
/// confirmation fields are removed from `arguments` before judging: only the user confirms,
/// through `/mcp`.
pub(crate) async fn check_call(
    State(g): State<Arc<Gateway>>,
    Extension(identity): Extension<Identity>,
    bytes: axum::body::Bytes,
) -> Response {
    let b: CheckCallBody = match body(&bytes) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let request = identity.request(&g.config().connectors);
    let intent = intent_of(&g, &b.query, &b.intent);
    let mut schema = b.call.schema.clone().unwrap_or_else(|| json!({}));
    if !schema.is_object() {
        return error(
            StatusCode::BAD_REQUEST,
            "call.schema must be a JSON object".to_string(),
        );
    }
    schema["name"] = Value::from(b.call.name.clone());
    let mut args = b.call.arguments.clone().unwrap_or_else(|| json!({}));
    let policy = g.policy();
    // Only the user confirms, through `/mcp`: a confirmation field in the body is the
    // caller's own, so the call is judged without it (a held call stays `confirm`).
    if let Some(o) = args.as_object_mut() {
        for f in policy.confirm_fields() {
            o.remove(f);
        }
    }
    let judge = |turn: &mut crate::decision::Turn, flow: Option<&crate::Session>| {
        policy
            .check_call_schema_in(&request, &intent, turn, &schema, &args, None, flow)
            .map_err(|e| e.to_string())
    };
    let Some(s) = &b.session else {
        // Without a session: judged in a fresh turn, without labels.
        let verdict = Some(judge(&mut crate::decision::Turn::new(), None));
        return verdict_response(verdict, &b.call.name);
    };
    let key = SessionKey::new(identity.principal(), s.as_str());
    // The labels an allowed call puts on the session (it is assumed to run): the tool's
    // taints and, when it is open-world (`openWorldHint` true or missing), `taint openworld`.
    let open_world = !policy.tables().annotations_tighten
        || !matches!(
            schema
                .get("annotations")
                .and_then(|a| a.get("openWorldHint")),
            Some(Value::Bool(false))
        );
    let taints: Vec<String> = policy
        .call_labels(&b.call.name, open_world)
        .into_iter()
        .map(str::to_string)
        .collect();
    let mut verdict = None;
    for _ in 0..LABEL_RETRIES {
        let labels = match g.store().labels(&key).await {
            Ok(l) => l,
            Err(e) => return error(store_status(&e), e.to_string()),
        };
        let flow = match labels.session() {
            Ok(f) => f,
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
        };
        // Judged in a fresh turn; an allowed call that counts is counted by the store, which
        // checks the turn's limit and that the labels are still those read in the same step.
        let mut turn = crate::decision::Turn::new();
        let judged = judge(&mut turn, Some(&flow));
        let allowed = matches!(&judged, Ok(v) if v.decision == crate::Decision::Allow);
        let change = SessionChange {
            query: b.query.as_deref(),
            count: turn.transactional_calls > 0,
            limit: g.turn_limit(),
            labels_read: Some(labels.version),
            taints: if allowed { &taints } else { &[] },
            tool: &b.call.name,
            ..SessionChange::default()
        };
        match g.store().change(&key, change).await {
            Ok(Changed::LabelsChanged(_)) => continue,
            Ok(Changed::TurnFull(n)) => {
                verdict = Some(judge(
                    &mut crate::decision::Turn {
                        transactional_calls: n,
                    },
                    Some(&flow),
                ));
            }
            Ok(_) => verdict = Some(judged),
            Err(e) => return error(store_status(&e), e.to_string()),
        }
        break;
    }
    if verdict.is_none() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the session's flow labels changed {LABEL_RETRIES} times while the call was judged; judge it again"),
        );
    }
    verdict_response(verdict, &b.call.name)
}

/// The answer of `check_call`: the verdict as the library's JSON with `decision` and `tool`
/// (`tool` named as the caller named it), or HTTP 400 with the evaluator's error.
fn verdict_response(verdict: Option<Result<crate::Verdict, String>>, tool: &str) -> Response {
    match verdict {
        Some(Ok(v)) => {
            let mut j = v.to_json();
            j["decision"] = Value::from(v.decision.as_str());
            j["tool"] = Value::from(tool);
            Json(j).into_response()
        }
        Some(Err(e)) => error(StatusCode::BAD_REQUEST, e),
        None => error(StatusCode::INTERNAL_SERVER_ERROR, "no verdict".to_string()),
    }
}
