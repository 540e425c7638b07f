//! The gateway's judging, independent of the transport: the aggregated tool list of every
//! upstream server (named `mcp__<server>__<tool>`), and each call judged in its session and
//! turn, recorded, then forwarded or refused, with the user's confirmation asked through
//! elicitation when the client can.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use super::config::GatewayConfig;
use super::identity::Identity;
use super::session_store::{Changed, SessionChange, SessionKey, SessionStore, StoreError};
use super::telemetry::{CallSpan, CallStart, Telemetry};
use super::upstream::{ListLimits, ToolList, Upstream};
use crate::audit::Clock;
use crate::classify::Intent;
use crate::decision::Turn;
use crate::mcp::judge::{CallJudgment, Judge, Refusal};
use crate::mcp::message::INVALID_PARAMS;

/// JSON-RPC "Internal error".
const INTERNAL_ERROR: i64 = -32603;

/// How many times a call is judged again because its session's flow labels changed while it
/// was judged, before it is refused (fail closed).
pub const LABEL_RETRIES: usize = 8;
use crate::mcp::record::{
    args_digest, new_decision_id, AuditSink, CallRecord, MillisClock, PolicyRef,
};
use crate::policy::Policy;

/// The `_meta` key of `tools/list` and `tools/call` params carrying the user's query.
pub const QUERY_META: &str = "toolwarden/query";
/// The `_meta` key of `tools/list` and `tools/call` params naming a session the gateway issued
/// to the request's principal (`POST /v1/sessions`); without it, the `Mcp-Session-Id`.
pub const SESSION_META: &str = "toolwarden/session";

/// What the client sees for one `tools/call`: a result (`CallToolResult` JSON, possibly
/// `isError`), or a JSON-RPC error (code, message, data).
#[derive(Clone, Debug, PartialEq)]
pub enum CallAnswer {
    /// The `CallToolResult` as JSON.
    Result(Value),
    /// A JSON-RPC error.
    Error {
        /// The JSON-RPC code.
        code: i64,
        /// The message.
        message: String,
        /// The `data` member.
        data: Option<Value>,
    },
}

/// The user's answer to a confirmation request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserAnswer {
    /// Accepted, with the boolean field set to true.
    Confirmed,
    /// Declined, cancelled, accepted with false, or no answer in time (with the reason).
    Declined(String),
}

/// The gateway's shared state: the policy, the upstream servers, the sessions, the audit log.
pub struct Gateway {
    policy: Policy,
    config: GatewayConfig,
    upstreams: BTreeMap<String, Arc<Upstream>>,
    store: Arc<dyn SessionStore>,
    audit: Option<Mutex<Box<dyn AuditSink>>>,
    policy_ref: PolicyRef,
    telemetry: Telemetry,
    told: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

pub(crate) fn log(message: &str) {
    // One line, whatever a client or a server put in the names and errors it carries: control,
    // bidirectional and invisible characters are escaped, so nothing forges or hides a line.
    eprintln!(
        "toolwarden gateway: {}",
        crate::mcp::message::escape_log(message)
    );
}

fn tool_error(text: &str, structured: Value) -> Value {
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": true,
    })
}

/// The JSON-RPC error for a session the store cannot serve: an unknown session or a full
/// store is the client's to fix (-32602), an unreachable store is the gateway's (-32603).
pub fn store_refusal(e: &StoreError) -> CallAnswer {
    let code = match e {
        StoreError::Unavailable(_) => INTERNAL_ERROR,
        _ => INVALID_PARAMS,
    };
    CallAnswer::Error {
        code,
        message: format!("Invalid session: {e}"),
        data: Some(json!({"blocked_by_policy": true})),
    }
}

impl Gateway {
    /// A gateway for `config`, judging with `policy`, keeping sessions in `store`, recording
    /// into `audit` when given.
    ///
    /// # Errors
    ///
    /// The evaluator's message when the configured intent or connectors do not fit the
    /// policy; a message for advisory mode without an audit log.
    pub fn new(
        policy: Policy,
        config: GatewayConfig,
        store: Arc<dyn SessionStore>,
        audit: Option<Box<dyn AuditSink>>,
    ) -> Result<Gateway, String> {
        if config.advisory && audit.is_none() {
            return Err(
                "`advisory = true` needs `audit`: advisory mode forwards every call and only the audit log says what would have been refused"
                    .to_string(),
            );
        }
        let upstreams = config
            .servers
            .iter()
            .map(|(name, s)| {
                (
                    name.clone(),
                    Arc::new(Upstream::new(
                        name,
                        s.clone(),
                        config.limits.upstream_timeout,
                        ListLimits::of(&config.limits),
                    )),
                )
            })
            .collect();
        let telemetry = Telemetry::new(config.otlp_endpoint.as_deref())?;
        let g = Gateway {
            telemetry,
            policy_ref: PolicyRef::of(&policy),
            policy,
            config,
            upstreams,
            store,
            audit: audit.map(Mutex::new),
            told: Mutex::new(HashSet::new()),
        };
        // The configured request must fit the policy before any client comes.
        g.judge(&Identity::anonymous(), g.intent(None), "x", false)
            .map_err(|e| format!("the configuration does not fit the policy: {e}"))?;
        Ok(g)
    }

    /// The configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The session store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// Why `identity` cannot be judged, when its mode (a token's mode claim, or `--mode` on
    /// stdio) is not a mode the policy declares; `None` when it has no mode or a declared one.
    pub fn unknown_mode(&self, identity: &Identity) -> Option<String> {
        let mode = identity.mode.as_deref()?;
        if self.policy.modes().any(|m| m == mode) {
            return None;
        }
        let declared: Vec<&str> = self.policy.modes().collect();
        Some(format!(
            "the mode `{mode}` is not a mode of the policy ({})",
            declared.join(", ")
        ))
    }

    /// The intent of a request: the query's when one is given, else the configured intent,
    /// else the policy's fallback intent.
    pub fn intent(&self, query: Option<&str>) -> Intent {
        match (query, &self.config.intent) {
            (Some(q), _) => self.policy.classify(q),
            (None, Some(i)) => Intent::named(i.clone()),
            (None, None) => self.policy.fallback_intent(),
        }
    }

    fn judge(
        &self,
        identity: &Identity,
        intent: Intent,
        server: &str,
        elicitation: bool,
    ) -> Result<Judge, String> {
        let judge = Judge::new(
            self.policy.clone(),
            identity.request(&self.config.connectors),
            intent,
            Some(server.to_string()),
            self.config.advisory,
        )?;
        // With `elicitation_only`, no client is offered the field, eliciting or not.
        Ok(if elicitation || self.config.elicitation_only {
            judge.without_confirm_field_declaration()
        } else {
            judge
        })
    }

    /// Enters `session` with `query` (a different query begins a new turn).
    async fn enter(&self, session: &SessionKey, query: Option<&str>) -> Result<(), StoreError> {
        let change = SessionChange {
            query,
            ..SessionChange::default()
        };
        self.store.change(session, change).await.map(|_| ())
    }

    /// The policy's `limit transactional N per turn`, when it declares one.
    pub fn turn_limit(&self) -> Option<u32> {
        self.policy.tables().limit
    }

    /// The tools `identity` may see in `session`, from every upstream server, named
    /// `mcp__<server>__<tool>`, and the servers that are unavailable (`{"server", "reason"}`
    /// each). `elicitation`: the client confirms through elicitation, so no confirmation field
    /// is declared.
    ///
    /// # Errors
    ///
    /// The store's error when `session` is unknown or the store cannot be reached; nothing is
    /// listed then.
    pub async fn list(
        &self,
        identity: &Identity,
        session: &SessionKey,
        query: Option<&str>,
        elicitation: bool,
    ) -> Result<(Vec<Value>, Vec<Value>), StoreError> {
        let mut tools = Vec::new();
        let mut unavailable = Vec::new();
        if let Err(e) = self.enter(session, query).await {
            log(&format!("tools/list: {e}; no tool is listed"));
            return Err(e);
        }
        let labels = match self.store.labels(session).await {
            Ok(l) => l,
            Err(e) => {
                log(&format!("tools/list: {e}; no tool is listed"));
                return Err(e);
            }
        };
        let flow = labels.session().map_err(|e| {
            log(&format!("tools/list: {e}; no tool is listed"));
            StoreError::Unavailable(e)
        })?;
        let intent = self.intent(query);
        // Every server's list at once, each within its own time limit: one that hangs costs
        // one `list_timeout`, not one per server.
        let mut fetching = tokio::task::JoinSet::new();
        for (i, upstream) in self.upstreams.values().enumerate() {
            let upstream = upstream.clone();
            fetching.spawn(async move { (i, upstream.tools().await) });
        }
        let mut lists: Vec<Result<Arc<ToolList>, String>> = self
            .upstreams
            .keys()
            .map(|_| Err("the tool list could not be fetched".to_string()))
            .collect();
        while let Some(done) = fetching.join_next().await {
            if let Ok((i, listed)) = done {
                if let Some(slot) = lists.get_mut(i) {
                    *slot = listed;
                }
            }
        }
        for ((name, _), listed) in self.upstreams.iter().zip(lists) {
            let listed = match listed {
                Ok(t) => t,
                Err(reason) => {
                    unavailable.push(json!({"server": name, "reason": reason}));
                    continue;
                }
            };
            let judge = match self.judge(identity, intent.clone(), name, elicitation) {
                Ok(j) => j,
                Err(reason) => {
                    log(&format!(
                        "tools/list of `{name}`: {reason}; its tools are hidden"
                    ));
                    continue;
                }
            };
            let judged = judge.judge_list_in(listed.tools().to_vec(), Some(&flow));
            for t in &judged.tightened {
                let line = t.log_line();
                if self.told_once(&format!("{name}\0{}", t.tool)) {
                    log(&format!("server `{name}`: {line}"));
                }
            }
            for mut schema in judged.kept {
                if let Some(n) = schema.get("name").and_then(Value::as_str) {
                    schema["name"] = Value::from(format!("mcp__{name}__{n}"));
                    tools.push(schema);
                }
            }
        }
        for u in &unavailable {
            log(&format!(
                "tools/list: server `{}` is unavailable ({}); its tools are not listed",
                u["server"].as_str().unwrap_or("?"),
                u["reason"].as_str().unwrap_or("?")
            ));
        }
        Ok((tools, unavailable))
    }

    fn told_once(&self, key: &str) -> bool {
        self.told
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.to_string())
    }

    /// The policy the audit records name.
    pub fn policy_ref(&self) -> &PolicyRef {
        &self.policy_ref
    }

    /// Writes the record of one decision, `decision_id`, to the audit log (one `write` of the
    /// whole line, then flush), before its call is forwarded, and puts the decision on `span`.
    /// The answer to a call refused at stage `confirmation` (the user declined, or could not be
    /// asked): its record, a deny with `text` as the reason, and an `isError` result.
    fn refused_at_confirmation(
        &self,
        judged: &CallRecord,
        text: String,
        decision_id: &str,
        span: &mut CallSpan,
        name: &str,
    ) -> CallAnswer {
        let rec = CallRecord {
            decision: "deny",
            stage: Some("confirmation".to_string()),
            reason: text.clone(),
            forwarded: false,
            ..judged.clone()
        };
        if let Err(e) = self.record(&rec, decision_id, span) {
            log(&e);
        }
        CallAnswer::Result(tool_error(
            &text,
            json!({"ok": false, "decision": "deny", "tool": name,
                   "reason": text,
                   "metadata": {"blocked_by_policy": true, "stage": "confirmation"}}),
        ))
    }

    fn record(
        &self,
        rec: &CallRecord,
        decision_id: &str,
        span: &mut CallSpan,
    ) -> Result<(), String> {
        span.decided(rec, &self.policy_ref, decision_id);
        let Some(audit) = &self.audit else {
            return Ok(());
        };
        let line = rec.to_json(
            MillisClock.now(),
            self.config.advisory,
            &self.policy_ref,
            decision_id,
        );
        audit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .record(&line)
            .map_err(|e| format!("the audit log could not be written ({e})"))
    }

    /// Judges the call of `name` (`mcp__<server>__<tool>`) with `arguments` in `session`,
    /// and forwards it when allowed. When the policy holds it for confirmation and `confirm`
    /// is given (the client declared elicitation), `confirm` asks the user with the message it
    /// is given, and the call runs only when the user accepted; the model's own confirmation
    /// fields are removed from the arguments then, so only the user can confirm. Without
    /// `confirm`, the digest-bound confirmation field of the policy applies. An unknown
    /// `session`, or a tool the server does not list, is a JSON-RPC error (-32602), and
    /// nothing is judged or forwarded.
    pub async fn call<F, Fut>(
        &self,
        identity: &Identity,
        session: &SessionKey,
        query: Option<&str>,
        name: &str,
        arguments: Option<Map<String, Value>>,
        confirm: Option<F>,
    ) -> CallAnswer
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = UserAnswer>,
    {
        let mut span = CallSpan::default();
        self.run(
            identity, session, query, name, arguments, confirm, &mut span,
        )
        .await
    }

    /// [`Gateway::call`] for the JSON-RPC request `request_id` whose `params._meta` is `meta`,
    /// in a span of its own when telemetry is on ([`super::telemetry`]): the span's parent is
    /// the trace context in `meta`, and it records the decision and how the call ended.
    #[allow(clippy::too_many_arguments)]
    pub async fn call_traced<F, Fut>(
        &self,
        identity: &Identity,
        session: &SessionKey,
        query: Option<&str>,
        name: &str,
        arguments: Option<Map<String, Value>>,
        confirm: Option<F>,
        request_id: &Value,
        meta: &Value,
    ) -> CallAnswer
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = UserAnswer>,
    {
        let mut span = self.telemetry.start(CallStart {
            tool: name,
            request_id,
            session: &session.id,
            meta,
        });
        let answer = self
            .run(
                identity, session, query, name, arguments, confirm, &mut span,
            )
            .await;
        match &answer {
            CallAnswer::Error { code, message, .. } => span.failed(&code.to_string(), message),
            CallAnswer::Result(v) if v["isError"] == true => span.failed(
                "tool_error",
                v["content"][0]["text"].as_str().unwrap_or("isError"),
            ),
            CallAnswer::Result(_) => {}
        }
        answer
    }

    /// The telemetry of the gateway.
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    #[allow(clippy::too_many_arguments)]
    async fn run<F, Fut>(
        &self,
        identity: &Identity,
        session: &SessionKey,
        query: Option<&str>,
        name: &str,
        arguments: Option<Map<String, Value>>,
        confirm: Option<F>,
        span: &mut CallSpan,
    ) -> CallAnswer
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = UserAnswer>,
    {
        let unknown = |reason: &str| CallAnswer::Error {
            code: INVALID_PARAMS,
            message: format!("Unknown tool: {name}"),
            data: Some(json!({"reason": reason, "blocked_by_policy": true})),
        };
        // The id of this call's decision, in its audit record.
        let decision_id = new_decision_id();
        if let Err(e) = self.enter(session, query).await {
            return self.session_refused(&e, name);
        }
        let Some((server, tool)) = name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
        else {
            return unknown("the gateway's tools are named mcp__<server>__<tool>");
        };
        let Some(upstream) = self.upstreams.get(server) else {
            return unknown(&format!("no server `{server}` is configured"));
        };
        let mut args = arguments.unwrap_or_default();
        let elicitation = confirm.is_some();
        // A confirmation field from the model never counts where the user confirms (an
        // eliciting client) or where nothing but the user may (`elicitation_only`).
        if elicitation || self.config.elicitation_only {
            for f in self.policy.confirm_fields() {
                args.remove(f);
            }
        }
        let args = Value::Object(args);
        // The server's list is known before its first call is judged (annotations tighten).
        let listed = match upstream.tools().await {
            Ok(t) => t,
            Err(reason) => {
                let text = format!(
                    "toolwarden: server `{server}` is unavailable ({reason}); `{name}` was not run"
                );
                let rec = CallRecord {
                    tool: tool.to_string(),
                    policy_tool: name.to_string(),
                    args_sha256: args_digest(&args),
                    decision: "deny",
                    stage: Some("error".to_string()),
                    rule: None,
                    reason: text.clone(),
                    forwarded: false,
                };
                let _ = self.record(&rec, &decision_id, span);
                log(&text);
                return CallAnswer::Result(tool_error(
                    &text,
                    json!({"ok": false, "decision": "deny", "tool": name, "error": text,
                           "metadata": {"blocked_by_policy": true, "stage": "error"}}),
                ));
            }
        };
        let schema = listed.get(tool);
        // A call is judged only against the server's whole list: a tool it does not list is
        // unknown, whatever rule its name would match, and never reaches the server.
        let Some(schema) = schema else {
            let reason = format!("server `{server}` does not list a tool `{tool}`");
            let rec = CallRecord {
                tool: tool.to_string(),
                policy_tool: name.to_string(),
                args_sha256: args_digest(&args),
                decision: "deny",
                stage: Some("identity".to_string()),
                rule: None,
                reason: reason.clone(),
                forwarded: false,
            };
            if let Err(e) = self.record(&rec, &decision_id, span) {
                log(&e);
            }
            log(&format!("refused `{name}`: {reason}"));
            return unknown(&reason);
        };
        let schema = Some(schema);
        let judge = match self.judge(identity, self.intent(query), server, elicitation) {
            Ok(j) => j,
            Err(e) => {
                let r = Refusal::error(&format!(
                    "toolwarden could not evaluate the policy for `{name}` ({e}); the call is refused"
                ));
                return self.refused(&r, name);
            }
        };
        let mut judged = match self
            .judge_call(&judge, name, session, query, schema, tool, &args)
            .await
        {
            Ok(j) => j,
            Err(answer) => return answer,
        };
        if judged.record.decision == "confirm" && !self.config.advisory {
            let refused = if let Some(confirm) = confirm {
                // The user reads this: bidirectional and invisible characters in the model's
                // arguments are shown escaped, so the text cannot be reordered or hidden.
                let message = crate::mcp::message::escape_log(&format!(
                    "Allow `{name}` with arguments {}? {}",
                    args,
                    crate::eval::confirmation_why(&judged.record.reason)
                ));
                match confirm(message).await {
                    UserAnswer::Confirmed => {
                        let mut confirmed = args.as_object().cloned().unwrap_or_default();
                        if let Some(f) = self.policy.confirm_fields().next() {
                            confirmed.insert(f.to_string(), Value::Bool(true));
                        }
                        judged = match self
                            .judge_call(
                                &judge,
                                name,
                                session,
                                query,
                                schema,
                                tool,
                                &Value::Object(confirmed),
                            )
                            .await
                        {
                            Ok(j) => j,
                            Err(answer) => return answer,
                        };
                        None
                    }
                    UserAnswer::Declined(why) => Some(format!(
                        "toolwarden did not run `{name}`: the user declined it ({why})"
                    )),
                }
            } else if self.config.elicitation_only {
                Some(format!(
                    "toolwarden did not run `{name}`: it needs the user's confirmation ({}), and this gateway takes it only through elicitation, which this client did not declare",
                    crate::eval::confirmation_why(&judged.record.reason)
                ))
            } else {
                None
            };
            if let Some(text) = refused {
                return self.refused_at_confirmation(
                    &judged.record,
                    text,
                    &decision_id,
                    span,
                    name,
                );
            }
        }
        if let Err(e) = self.record(&judged.record, &decision_id, span) {
            let r = Refusal::error(&format!("{e}; `{name}` is refused"));
            log(&format!("{e}; `{name}` is refused"));
            return self.refused(&r, name);
        }
        match judged.forward {
            Ok(exec) => {
                let sent = match exec {
                    Some(exec) => exec,
                    None => args.as_object().cloned().unwrap_or_default(),
                };
                match upstream.call(tool, sent).await {
                    Ok(result) => CallAnswer::Result(result),
                    Err(reason) => {
                        let text = format!("toolwarden: server `{server}`: {reason}");
                        log(&format!("`{name}`: {text}"));
                        CallAnswer::Result(tool_error(
                            &text,
                            json!({"ok": false, "tool": name, "error": text,
                                   "metadata": {"stage": "upstream"}}),
                        ))
                    }
                }
            }
            Err(r) => {
                log(&format!("refused `{name}`: {}", r.text()));
                self.refused(&r, name)
            }
        }
    }

    /// Judges the call in `session`'s turn with the session's flow labels, and applies what
    /// it changes there (a hold taken or made, the call counted, the labels of a call that is
    /// forwarded added) in one atomic [`SessionStore::change`] that fails when the labels
    /// changed since they were read: then the call is judged again with the new labels, at
    /// most [`LABEL_RETRIES`] times, and refused past that. When the store says the hold is
    /// gone or the turn is full by then, judges again as it now is (a refusal).
    #[allow(clippy::too_many_arguments)]
    async fn judge_call(
        &self,
        judge: &Judge,
        name: &str,
        session: &SessionKey,
        query: Option<&str>,
        schema: Option<&Value>,
        tool: &str,
        args: &Value,
    ) -> Result<CallJudgment, CallAnswer> {
        let refused = |e: &StoreError| self.session_refused(e, name);
        let taints: Vec<String> = judge
            .call_labels(schema, tool)
            .into_iter()
            .map(str::to_string)
            .collect();
        for _ in 0..LABEL_RETRIES {
            let labels = self.store.labels(session).await.map_err(|e| refused(&e))?;
            let flow = labels.session().map_err(|e| {
                let text = format!("toolwarden cannot judge `{name}`: {e}; the call is refused");
                log(&text);
                self.refused(&Refusal::error(&text), name)
            })?;
            let flow = Some(&flow);
            // Judged in a fresh turn: the store checks the limit when it counts the call.
            let (mut judged, mut effects) = judge.judge_call_effects_in(
                &mut |_| None,
                &mut Turn::new(),
                schema,
                tool,
                args,
                flow,
            );
            let mut held = None;
            if let Some(digest) = effects.wanted.clone() {
                held = self
                    .store
                    .held(session, &digest)
                    .await
                    .map_err(|e| refused(&e))?;
                if let Some(call) = &held {
                    (judged, effects) = judge.judge_call_effects_in(
                        &mut |d| (d == digest).then(|| call.clone()),
                        &mut Turn::new(),
                        schema,
                        tool,
                        args,
                        flow,
                    );
                }
            }
            let forwarded = judged.forward.is_ok();
            let change = SessionChange {
                query,
                take: effects.take.as_deref(),
                count: effects.counted,
                limit: self.turn_limit(),
                hold: effects.hold.as_ref(),
                labels_read: Some(labels.version),
                taints: if forwarded { &taints } else { &[] },
                tool: name,
            };
            let again = match self
                .store
                .change(session, change)
                .await
                .map_err(|e| refused(&e))?
            {
                Changed::Applied => return Ok(judged),
                // Labels came while the call was judged: judge it with them.
                Changed::LabelsChanged(_) => continue,
                // Another request took the hold: the confirmation matches nothing now.
                Changed::HoldGone => judge.judge_call_effects_in(
                    &mut |_| None,
                    &mut Turn::new(),
                    schema,
                    tool,
                    args,
                    flow,
                ),
                // The turn's limit was reached: judged in the full turn, a refusal.
                Changed::TurnFull(n) => judge.judge_call_effects_in(
                    &mut |d| held.as_ref().filter(|c| c.digest == d).cloned(),
                    &mut Turn {
                        transactional_calls: n,
                    },
                    schema,
                    tool,
                    args,
                    flow,
                ),
            };
            let (judged, effects) = again;
            if effects.take.is_some() || effects.counted || effects.hold.is_some() {
                // Judged again, the call still changes the session: refuse rather than retry.
                let text = format!("toolwarden cannot judge `{name}`: the session changed while it was judged; the call is refused");
                return Err(self.refused(&Refusal::error(&text), name));
            }
            if judged.forward.is_ok() && !taints.is_empty() {
                // Forwarded all the same (advisory mode): its labels are added.
                let add = SessionChange {
                    query,
                    taints: &taints,
                    tool: name,
                    ..SessionChange::default()
                };
                self.store
                    .change(session, add)
                    .await
                    .map_err(|e| refused(&e))?;
            }
            return Ok(judged);
        }
        let text = format!(
            "toolwarden cannot judge `{name}`: the session's flow labels changed {LABEL_RETRIES} times while it was judged; the call is refused"
        );
        log(&text);
        Err(self.refused(&Refusal::error(&text), name))
    }

    /// The answer to a call of `name` whose session the store cannot serve, a JSON-RPC error
    /// and nothing forwarded: an unreachable store is the gateway's failure (-32603, saying
    /// the call is refused), an unknown session or a full store the client's ([`store_refusal`]).
    fn session_refused(&self, e: &StoreError, name: &str) -> CallAnswer {
        if let StoreError::Unavailable(_) = e {
            let text = format!("toolwarden cannot judge `{name}`: {e}; the call is refused");
            log(&text);
            return CallAnswer::Error {
                code: INTERNAL_ERROR,
                message: text,
                data: Some(json!({"blocked_by_policy": true, "stage": "error", "tool": name})),
            };
        }
        log(&format!("tools/call of `{name}`: {e}; the call is refused"));
        store_refusal(e)
    }

    fn refused(&self, r: &Refusal, name: &str) -> CallAnswer {
        match r {
            Refusal::UnknownTool { reason, .. } => CallAnswer::Error {
                code: INVALID_PARAMS,
                message: format!("Unknown tool: {name}"),
                data: Some(json!({"reason": reason, "blocked_by_policy": true})),
            },
            Refusal::ToolError { text, structured } => {
                // The judge names the server's tool; the client knows it by the gateway's name.
                let text = match name.rsplit_once("__") {
                    Some((_, tool)) => text.replace(&format!("`{tool}`"), &format!("`{name}`")),
                    None => text.clone(),
                };
                let text = &text;
                let mut s = structured.clone();
                if s.is_object() {
                    s["tool"] = Value::from(name);
                }
                CallAnswer::Result(tool_error(text, s))
            }
        }
    }
}
