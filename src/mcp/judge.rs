//! Judging what crosses an MCP connection: the tools a `tools/list` result may show, and each
//! `tools/call`, with the server's annotations as untrusted hints that can only tighten.
//!
//! [`Judge`] holds the fixed inputs of every decision (policy, request, intent, server name,
//! advisory or not); it has no I/O and no state but the calls awaiting confirmation
//! ([`PendingCalls`]), which the caller owns. A stdio proxy, a gateway in front of several
//! servers or a binding can each build one per upstream server.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::{json, Map, Value};

use crate::classify::Intent;
use crate::decision::{Decision, PendingCall, Stage, ToolMatch, Turn, Verdict};
use crate::eval::Request;
use crate::mcp::record::{args_digest, CallRecord};
use crate::policy::Policy;
use crate::schemas::schema_name;

/// At most this many calls wait for confirmation at once; the oldest is forgotten first.
pub const MAX_PENDING: usize = 256;

/// The fixed inputs of every decision about one server's tools.
#[derive(Debug)]
pub struct Judge {
    policy: Policy,
    request: Request,
    intent: Intent,
    server: Option<String>,
    advisory: bool,
    confirm_fields: Vec<String>,
    declare_confirm_field: bool,
}

/// How long a held call can be confirmed, in milliseconds (10 minutes); an older hold is
/// forgotten and its confirmation refused.
pub const HOLD_TTL_MS: u64 = 10 * 60 * 1000;

/// Calls held for the user's confirmation, by digest, oldest forgotten first.
///
/// A hold counts for a confirmation only once it is armed ([`PendingCalls::arm_through`]:
/// the caller arms the holds whose answer the client has received, before it judges a later
/// message) and while it is younger than [`HOLD_TTL_MS`] by the time given to
/// [`PendingCalls::set_now`]. A default value arms nothing, so nothing is confirmed until the
/// caller says so (fail closed).
#[derive(Clone, Debug, Default)]
pub struct PendingCalls {
    calls: HashMap<String, PendingCall>,
    order: VecDeque<String>,
    /// Per digest: the hold's serial number and when it was made (ms).
    made: HashMap<String, (u64, u64)>,
    serial: u64,
    armed_through: u64,
    now_ms: u64,
}

impl PendingCalls {
    /// How many calls are waiting.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether no call is waiting.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The serial number of the latest hold made (0 before the first).
    pub fn latest(&self) -> u64 {
        self.serial
    }

    /// Arms the holds numbered up to `serial` (from [`PendingCalls::latest`]): they may be
    /// confirmed from now on. Never disarms.
    pub fn arm_through(&mut self, serial: u64) {
        self.armed_through = self.armed_through.max(serial.min(self.serial));
    }

    /// Sets the current time (milliseconds since the epoch) and forgets the holds older than
    /// [`HOLD_TTL_MS`], or made "after" `now_ms` (a clock that went back: fail closed).
    pub fn set_now(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        let expired: Vec<String> = self
            .made
            .iter()
            .filter(|(_, &(_, since))| now_ms < since || now_ms - since >= HOLD_TTL_MS)
            .map(|(d, _)| d.clone())
            .collect();
        for d in expired {
            self.release(&d);
        }
    }

    /// Forgets the holds made after the one numbered `serial` (a call that cannot be
    /// confirmed, such as a notification, must leave nothing held).
    pub fn forget_after(&mut self, serial: u64) {
        let newer: Vec<String> = self
            .made
            .iter()
            .filter(|(_, &(n, _))| n > serial)
            .map(|(d, _)| d.clone())
            .collect();
        for d in newer {
            self.release(&d);
        }
    }

    /// The held call of `digest` when it may be confirmed now: armed and not expired.
    pub fn confirmable(&self, digest: &str) -> Option<&PendingCall> {
        let &(n, since) = self.made.get(digest)?;
        let fresh = self.now_ms >= since && self.now_ms - since < HOLD_TTL_MS;
        (n <= self.armed_through && fresh)
            .then(|| self.calls.get(digest))
            .flatten()
    }

    /// Holds `pending` for confirmation, made now (by [`PendingCalls::set_now`]); nothing when
    /// a call of the same digest is held already. Past [`MAX_PENDING`] the oldest is forgotten.
    pub fn hold(&mut self, pending: PendingCall) {
        if self.calls.contains_key(&pending.digest) {
            return;
        }
        self.serial += 1;
        self.made
            .insert(pending.digest.clone(), (self.serial, self.now_ms));
        self.order.push_back(pending.digest.clone());
        self.calls.insert(pending.digest.clone(), pending);
        while self.order.len() > MAX_PENDING {
            if let Some(old) = self.order.pop_front() {
                self.calls.remove(&old);
                self.made.remove(&old);
            }
        }
    }

    /// Forgets the hold of `digest` (it was confirmed, or expired).
    pub fn release(&mut self, digest: &str) {
        self.calls.remove(digest);
        self.made.remove(digest);
        self.order.retain(|d| d != digest);
    }
}

/// What the judge says about one `tools/call`.
#[derive(Clone, Debug, PartialEq)]
pub struct CallJudgment {
    /// The audit record of the decision.
    pub record: CallRecord,
    /// When the call may be forwarded: the arguments to send (confirmation fields removed), or
    /// `None` to send the arguments as they came. `Err` when it must not be forwarded: what
    /// to answer the client.
    pub forward: Result<Option<Map<String, Value>>, Refusal>,
}

/// What judging one call would change in its session, for a caller that keeps the session's
/// state elsewhere and applies the change atomically ([`Judge::judge_call_effects`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallEffects {
    /// The digest of the held call this call's confirmation looked for (a call carrying a
    /// confirmation field set to `true` for a call that needs one).
    pub wanted: Option<String>,
    /// The digest of the held call this call consumes: it was confirmed and is allowed.
    pub take: Option<String>,
    /// The call to hold for confirmation.
    pub hold: Option<PendingCall>,
    /// Whether the call counts as a transactional call of the turn (it is allowed).
    pub counted: bool,
}

/// The answer to a call that is not forwarded.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// A name the policy does not know: JSON-RPC error -32602 `Unknown tool: NAME` with `data`.
    UnknownTool {
        /// The tool's name as the server knows it.
        tool: String,
        /// Why, in one sentence.
        reason: String,
    },
    /// A tool result with `isError: true`: the text the model reads and the structured verdict.
    ToolError {
        /// What happened, where the rule is, what would allow the call.
        text: String,
        /// The verdict as JSON (with `decision` and `tool`).
        structured: Value,
    },
}

impl Refusal {
    /// The JSON-RPC response to the request with this `id`.
    pub fn response(&self, id: &Value) -> Value {
        match self {
            Refusal::UnknownTool { tool, reason } => super::message::rpc_error(
                id,
                super::message::INVALID_PARAMS,
                &format!("Unknown tool: {tool}"),
                Some(json!({"reason": reason, "blocked_by_policy": true})),
            ),
            Refusal::ToolError { text, structured } => {
                super::message::tool_error(id, text, structured.clone())
            }
        }
    }

    /// The text of the refusal, for a log line.
    pub fn text(&self) -> String {
        match self {
            Refusal::UnknownTool { tool, reason } => format!("Unknown tool: {tool} ({reason})"),
            Refusal::ToolError { text, .. } => text.clone(),
        }
    }

    /// A refusal for a call that could not be judged or recorded (`stage: "error"`).
    pub fn error(reason: &str) -> Refusal {
        Refusal::ToolError {
            text: reason.to_string(),
            structured: json!({
                "ok": false,
                "decision": "deny",
                "error": reason,
                "metadata": {"blocked_by_policy": true, "stage": "error"},
            }),
        }
    }
}

/// How the server's annotations tightened a tool's declared effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tightening {
    /// The tool's name as the server knows it.
    pub tool: String,
    /// The effect the policy declares for it.
    pub declared: String,
    /// The effect the annotations imply, under which the tool is judged.
    pub judged: String,
    /// The hints, as the operator reads them (`destructiveHint true`).
    pub hints: String,
}

impl Tightening {
    /// The operator's line: `write_file: declared write, judged as delete: the server says
    /// destructiveHint true; trust annotations ignore keeps the declaration`.
    pub fn log_line(&self) -> String {
        format!(
            "{}: declared {}, judged as {}: the server says {}; trust annotations ignore keeps the declaration",
            self.tool, self.declared, self.judged, self.hints
        )
    }
}

/// The judgment of one `tools/list` result.
#[derive(Clone, Debug, PartialEq)]
pub struct ListJudgment {
    /// The tools the client may see, in the server's order (all of them in advisory mode),
    /// with the confirmation field declared on the ones that need it.
    pub kept: Vec<Value>,
    /// The names of the tools offered.
    pub offered: Vec<String>,
    /// The names of the offered tools whose calls need the user's confirmation.
    pub confirmed: Vec<String>,
    /// One entry per hidden tool: `tool`, `stage`, `rule`, `annotation_effect`, `tightened`
    /// (or `reason` for an error).
    pub hidden: Vec<Value>,
    /// The tools whose annotations tightened their declared effect.
    pub tightened: Vec<Tightening>,
    /// How many tools the server listed.
    pub listed: usize,
}

impl ListJudgment {
    /// When the server listed tools and every one is hidden: one line naming the stages that
    /// hid them (`the policy hides all 3 tools the server listed (stage mode: 2, stage
    /// identity: 1)`).
    pub fn all_hidden_line(&self) -> Option<String> {
        if self.listed == 0 || !self.offered.is_empty() {
            return None;
        }
        let mut stages: BTreeMap<String, usize> = BTreeMap::new();
        for h in &self.hidden {
            let stage = h["stage"].as_str().unwrap_or("none").to_string();
            *stages.entry(stage).or_default() += 1;
        }
        let stages = stages
            .iter()
            .map(|(s, n)| format!("stage {s}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        Some(format!(
            "tools/list: the policy hides all {} tool{} the server listed ({stages})",
            self.listed,
            if self.listed == 1 { "" } else { "s" }
        ))
    }
}

impl Judge {
    /// A judge for one server. `server`, when given, makes the policy judge each tool as
    /// `mcp__<server>__<tool>`; `advisory` forwards every call and shows every tool but records
    /// what enforcement would have done.
    ///
    /// # Errors
    ///
    /// The evaluator's message when the request does not fit the policy (an unknown mode,
    /// tier or intent), so no call is refused later for that reason.
    pub fn new(
        policy: Policy,
        request: Request,
        intent: Intent,
        server: Option<String>,
        advisory: bool,
    ) -> Result<Judge, String> {
        policy
            .decide_tool(&request, &intent, "")
            .map_err(|e| e.to_string())?;
        Ok(Judge {
            confirm_fields: policy.confirm_fields().map(str::to_string).collect(),
            policy,
            request,
            intent,
            server,
            advisory,
            declare_confirm_field: true,
        })
    }

    /// The same judge without the confirmation field in listed schemas: for a client that
    /// confirms through elicitation, where the model must not learn of (or send) the field.
    pub fn without_confirm_field_declaration(mut self) -> Judge {
        self.declare_confirm_field = false;
        self
    }

    /// The policy's confirmation fields (`confirmed` first by default).
    pub fn confirm_fields(&self) -> &[String] {
        &self.confirm_fields
    }

    /// The policy this judge decides with.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether the judge is advisory.
    pub fn advisory(&self) -> bool {
        self.advisory
    }

    /// The name the policy judges for a server's tool: `mcp__<server>__<tool>` with a server.
    pub fn policy_name(&self, tool: &str) -> String {
        match &self.server {
            Some(s) => format!("mcp__{s}__{tool}"),
            None => tool.to_string(),
        }
    }

    /// Judges the tools of one `tools/list` result (one page). Never fails: a tool without a
    /// usable name is hidden (in advisory mode too); one with malformed annotations or one the
    /// evaluator cannot decide is hidden (kept in advisory mode, where its calls are refused).
    pub fn judge_list(&self, tools: Vec<Value>) -> ListJudgment {
        self.judge_list_in(tools, None)
    }

    /// [`Judge::judge_list`] within a flow session: the `after` blocks of the labels on
    /// `session` hide the tools whose effect they deny and mark as `confirm` (the confirmation
    /// field declared) those whose effect they confirm, as [`Policy::offer_session`] does.
    /// `None` judges as [`Judge::judge_list`].
    pub fn judge_list_in(
        &self,
        tools: Vec<Value>,
        session: Option<&crate::Session>,
    ) -> ListJudgment {
        let listed = tools.len();
        let mut out = ListJudgment {
            kept: Vec::with_capacity(listed),
            offered: Vec::new(),
            confirmed: Vec::new(),
            hidden: Vec::new(),
            tightened: Vec::new(),
            listed,
        };
        for schema in tools {
            let outcome = catch_unwind(AssertUnwindSafe(|| self.judge_schema(&schema, session)));
            match outcome {
                Ok(Ok((name, decision, tightening))) => {
                    if let Some(t) = tightening {
                        out.tightened.push(t);
                    }
                    if decision.decision.decision != Decision::Deny {
                        if decision.decision.decision == Decision::Confirm {
                            out.confirmed.push(name.clone());
                        }
                        out.offered.push(name);
                        let mut schema = schema;
                        if decision.decision.decision == Decision::Confirm
                            && !self.advisory
                            && self.declare_confirm_field
                        {
                            self.declare_confirm_field(&mut schema);
                        }
                        out.kept.push(schema);
                    } else {
                        out.hidden.push(json!({
                            "tool": name,
                            "stage": decision.decision.stage.map(Stage::as_str),
                            "rule": self.policy.rule_source(decision.decision.rule).map(|l| l.to_string()),
                            "annotation_effect": decision.annotation_effect,
                            "tightened": decision.tightened,
                        }));
                        if self.advisory {
                            out.kept.push(schema);
                        }
                    }
                }
                Ok(Err((name, reason))) => {
                    // A tool with a name is kept in advisory mode (its calls are refused all
                    // the same); one without a usable name never is.
                    if name.is_some() && self.advisory {
                        out.kept.push(schema);
                    }
                    out.hidden
                        .push(json!({"tool": name, "stage": "error", "reason": reason}));
                }
                Err(_) => {
                    let name = schema_name(&schema).ok().map(str::to_string);
                    out.hidden.push(
                        json!({"tool": name, "stage": "error", "reason": "the evaluator panicked"}),
                    );
                }
            }
        }
        out
    }

    /// The decision about one listed schema, with the tightening when there is one; `Err`
    /// with the tool's name (if any) and why it is hidden.
    #[allow(clippy::type_complexity)]
    fn judge_schema(
        &self,
        schema: &Value,
        session: Option<&crate::Session>,
    ) -> Result<(String, crate::SchemaDecision, Option<Tightening>), (Option<String>, String)> {
        let name = schema_name(schema)
            .map_err(|e| (None, format!("a tool without a usable name: {e}")))?
            .to_string();
        let mut judged = schema.clone();
        judged["name"] = Value::from(self.policy_name(&name));
        let decision = self
            .policy
            .schema_decisions_in(
                &self.request,
                &self.intent,
                std::slice::from_ref(&judged),
                session,
            )
            .map_err(|e| (Some(name.clone()), e.to_string()))?
            .pop()
            .ok_or_else(|| (Some(name.clone()), "no decision".to_string()))?;
        let tightening = if decision.tightened {
            self.tightening(&name, schema, decision.annotation_effect)
        } else {
            None
        };
        Ok((name, decision, tightening))
    }

    fn tightening(&self, tool: &str, schema: &Value, judged: Option<&str>) -> Option<Tightening> {
        let judged = judged?;
        let declared = self
            .policy
            .check_call(
                &self.request,
                &self.intent,
                &mut Turn::new(),
                &self.policy_name(tool),
                &json!({}),
            )
            .ok()?
            .effect?;
        let hints = schema.get("annotations").and_then(Value::as_object);
        let hint = |key: &str, default: bool| match hints.and_then(|h| h.get(key)) {
            Some(Value::Bool(b)) => format!("{key} {b}"),
            _ => format!("no {key} (read as {default})"),
        };
        let hints = match judged {
            "delete" => hint("destructiveHint", true),
            "write" => format!(
                "{} and {}",
                hint("readOnlyHint", false),
                hint("destructiveHint", true)
            ),
            _ => hint("readOnlyHint", false),
        };
        Some(Tightening {
            tool: tool.to_string(),
            declared,
            judged: judged.to_string(),
            hints,
        })
    }

    /// Whether a call of the tool `schema` describes reads the open world: its
    /// `annotations.openWorldHint` is `true` or missing (the MCP default), or the policy says
    /// `trust annotations ignore` (the hint is not read, so the default stands). `None` (a
    /// tool the server did not list) is open-world too.
    pub fn open_world(&self, schema: Option<&Value>) -> bool {
        if !self.policy.tables().annotations_tighten {
            return true;
        }
        !matches!(
            schema
                .and_then(|s| s.get("annotations"))
                .and_then(|a| a.get("openWorldHint")),
            Some(Value::Bool(false))
        )
    }

    /// The labels a forwarded call of the server's tool `tool` puts on the session: the
    /// policy's `taints` of the judged name and, when the tool is open-world
    /// ([`Judge::open_world`]), the labels of `taint openworld`.
    pub fn call_labels(&self, schema: Option<&Value>, tool: &str) -> Vec<&str> {
        self.policy
            .call_labels(&self.policy_name(tool), self.open_world(schema))
    }

    /// Records a forwarded call of the server's tool `tool` in `session`: the labels of
    /// [`Judge::call_labels`], sourced from the server's tool name. Returns the labels that
    /// were new.
    ///
    /// # Errors
    ///
    /// As [`crate::Session::record_mcp`] (a session of another policy); nothing changes then.
    pub fn record_call(
        &self,
        session: &mut crate::Session,
        schema: Option<&Value>,
        tool: &str,
    ) -> Result<Vec<String>, crate::SessionError> {
        session.bind(&self.policy)?;
        let mask = self
            .policy
            .call_mask(&self.policy_name(tool), self.open_world(schema));
        Ok(session.taint(&self.policy, mask, tool))
    }

    /// Adds the policy's first confirmation field to the `inputSchema` of a tool whose calls
    /// need confirmation, so the model learns the field exists and clients that validate
    /// arguments let it through. A schema that already has a property of that name (the
    /// server's own argument) or whose `inputSchema`/`properties` is not an object is left as
    /// it is.
    fn declare_confirm_field(&self, schema: &mut Value) {
        let Some(field) = self.confirm_fields.first() else {
            return;
        };
        let Some(input) = schema.get_mut("inputSchema").and_then(Value::as_object_mut) else {
            return;
        };
        let properties = input
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(properties) = properties.as_object_mut() else {
            return;
        };
        if properties.contains_key(field) {
            return;
        }
        properties.insert(
            field.clone(),
            json!({
                "type": "boolean",
                "description": "toolwarden policy: this tool needs the user's confirmation. Leave this out; when a call is held, ask the user, and only if they agree repeat the same call with this set to true.",
            }),
        );
    }

    /// Judges one `tools/call` of `tool` with `args` (the call's `params.arguments`, `{}` when
    /// absent). `schema` is the tool's schema as the server last listed it (its annotations may
    /// tighten the decision exactly as they did in the listing); `None` for a tool the server
    /// did not list. A call that needs confirmation is remembered in `pending`; a later call
    /// with a confirmation field set to `true` and the same arguments is checked against it
    /// once that hold is armed and fresh ([`PendingCalls`]); a confirmed call with no such
    /// hold is denied at stage `confirmation` and holds nothing.
    /// Never panics: an evaluator error or panic is a refusal at stage `error` (in advisory
    /// mode too).
    pub fn judge_call(
        &self,
        pending: &mut PendingCalls,
        schema: Option<&Value>,
        tool: &str,
        args: &Value,
    ) -> CallJudgment {
        self.judge_call_in_turn(pending, &mut Turn::new(), schema, tool, args)
    }

    /// [`Judge::judge_call`] within the user turn `turn` (its transactional calls counted for
    /// `limit … per turn`; the count grows when the call is allowed), for a caller that knows
    /// the user's turns (the gateway). [`Judge::judge_call`] judges each call in a turn of its
    /// own.
    pub fn judge_call_in_turn(
        &self,
        pending: &mut PendingCalls,
        turn: &mut Turn,
        schema: Option<&Value>,
        tool: &str,
        args: &Value,
    ) -> CallJudgment {
        self.judge_call_in_session(pending, turn, schema, tool, args, None)
    }

    /// [`Judge::judge_call_in_turn`] with stage `flow` judged against the labels on
    /// `session` (not changed here: record a forwarded call with [`Judge::record_call`]).
    pub fn judge_call_in_session(
        &self,
        pending: &mut PendingCalls,
        turn: &mut Turn,
        schema: Option<&Value>,
        tool: &str,
        args: &Value,
        session: Option<&crate::Session>,
    ) -> CallJudgment {
        let (judged, effects) = self.judge_call_effects_in(
            &mut |digest| pending.confirmable(digest).cloned(),
            turn,
            schema,
            tool,
            args,
            session,
        );
        if let Some(d) = &effects.take {
            pending.release(d);
        }
        if let Some(h) = effects.hold {
            pending.hold(h);
        }
        judged
    }

    /// [`Judge::judge_call_in_turn`] without changing any state but `turn`: `held` gives the
    /// held call of a digest when it may be confirmed now (armed and fresh), and the returned
    /// [`CallEffects`] say what the session must change for the judgment to stand (the hold to
    /// take, the call to hold, whether it counted in the turn). A caller whose state is shared
    /// applies them atomically, and judges again when it cannot (the hold was taken meanwhile,
    /// the turn's limit was reached meanwhile).
    pub fn judge_call_effects(
        &self,
        held: &mut dyn FnMut(&str) -> Option<PendingCall>,
        turn: &mut Turn,
        schema: Option<&Value>,
        tool: &str,
        args: &Value,
    ) -> (CallJudgment, CallEffects) {
        self.judge_call_effects_in(held, turn, schema, tool, args, None)
    }

    /// [`Judge::judge_call_effects`] with stage `flow` judged against the labels on `session`
    /// (which is not changed: the caller records the call's labels, [`Judge::call_labels`],
    /// once it forwards it). `None` judges as [`Judge::judge_call_effects`].
    pub fn judge_call_effects_in(
        &self,
        held: &mut dyn FnMut(&str) -> Option<PendingCall>,
        turn: &mut Turn,
        schema: Option<&Value>,
        tool: &str,
        args: &Value,
        session: Option<&crate::Session>,
    ) -> (CallJudgment, CallEffects) {
        let mut effects = CallEffects::default();
        let before = turn.transactional_calls;
        let pname = self.policy_name(tool);
        let digest = args_digest(args);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            self.evaluate(
                held,
                &mut effects,
                turn,
                schema,
                tool,
                &pname,
                args,
                session,
            )
        }))
        .unwrap_or_else(|_| Err("the evaluator panicked".to_string()));
        effects.counted = turn.transactional_calls > before;
        let record =
            |decision, stage: Option<&str>, rule: Option<String>, reason: &str, fwd| CallRecord {
                tool: tool.to_string(),
                policy_tool: pname.clone(),
                args_sha256: digest.clone(),
                decision,
                stage: stage.map(str::to_string),
                rule,
                reason: reason.to_string(),
                forwarded: fwd,
            };
        if outcome.is_err() {
            // No decision: nothing held, taken or counted (fail closed).
            effects = CallEffects::default();
        }
        let judged = match outcome {
            Ok(Evaluated::Unknown(reason, rule)) => CallJudgment {
                record: record("deny", Some("identity"), rule, &reason, self.advisory),
                forward: if self.advisory {
                    Ok(None)
                } else {
                    Err(Refusal::UnknownTool {
                        tool: tool.to_string(),
                        reason,
                    })
                },
            },
            Err(error) => {
                let reason = format!(
                    "toolwarden could not evaluate the policy for `{tool}` ({error}); the call is refused"
                );
                CallJudgment {
                    record: record("deny", Some("error"), None, &reason, false),
                    forward: Err(Refusal::error(&reason)),
                }
            }
            Ok(Evaluated::Verdict(verdict, tightening)) => {
                let allowed = verdict.decision == Decision::Allow;
                let rec = record(
                    verdict.decision.as_str(),
                    verdict.stage.map(Stage::as_str),
                    verdict.source.clone(),
                    &verdict.reason,
                    allowed || self.advisory,
                );
                let forward = if allowed {
                    Ok(verdict
                        .args_for_execution
                        .clone()
                        .filter(|exec| Value::Object(exec.clone()) != *args))
                } else if self.advisory {
                    Ok(None)
                } else {
                    let text = self.explain(tool, &verdict, tightening.as_ref());
                    let mut structured = verdict.to_json();
                    structured["decision"] = Value::from(verdict.decision.as_str());
                    structured["tool"] = Value::from(tool);
                    if let Some(t) = &tightening {
                        structured["metadata"]["annotations"] = json!({
                            "declared_effect": t.declared,
                            "judged_effect": t.judged,
                            "hints": t.hints,
                        });
                    }
                    Err(Refusal::ToolError { text, structured })
                };
                CallJudgment {
                    record: rec,
                    forward,
                }
            }
        };
        (judged, effects)
    }

    #[allow(clippy::too_many_arguments)]
    fn evaluate(
        &self,
        held_call: &mut dyn FnMut(&str) -> Option<PendingCall>,
        effects: &mut CallEffects,
        turn: &mut Turn,
        schema: Option<&Value>,
        tool: &str,
        pname: &str,
        args: &Value,
        session: Option<&crate::Session>,
    ) -> Result<Evaluated, String> {
        let p = &self.policy;
        let d = p
            .decide_tool(&self.request, &self.intent, pname)
            .map_err(|e| e.to_string())?;
        if d.stage == Some(Stage::Identity) && d.matched == ToolMatch::Unknown {
            return Ok(Evaluated::Unknown(
                p.reason(pname, &d, &self.request),
                p.rule_source(d.rule).map(|l| l.to_string()),
            ));
        }
        let listed = schema.filter(|s| s.is_object());
        let mut schema = listed.cloned().unwrap_or_else(|| json!({}));
        schema["name"] = Value::from(pname);
        let tightening = match listed {
            Some(listed) => {
                let decision = p
                    .schema_decisions_in(
                        &self.request,
                        &self.intent,
                        std::slice::from_ref(&schema),
                        session,
                    )
                    .map_err(|e| e.to_string())?;
                match decision.first() {
                    Some(d) if d.tightened => self.tightening(tool, listed, d.annotation_effect),
                    _ => None,
                }
            }
            None => None,
        };
        let mut confirmed = false;
        let stripped = match args {
            Value::Object(o) => {
                let mut o = o.clone();
                for f in &self.confirm_fields {
                    if let Some(v) = o.remove(f) {
                        confirmed |= v == Value::Bool(true);
                    }
                }
                Value::Object(o)
            }
            other => other.clone(),
        };
        // Every check but the last runs on a copy of the turn: only the verdict returned
        // counts its call in the turn.
        let check = |args: &Value, pending: Option<&PendingCall>, turn: &mut Turn| {
            p.check_call_schema_in(
                &self.request,
                &self.intent,
                turn,
                &schema,
                args,
                pending,
                session,
            )
            .map_err(|e| e.to_string())
        };
        let unconfirmed = check(&stripped, None, &mut turn.clone())?;
        let Some(held) = unconfirmed.pending.clone() else {
            return Ok(Evaluated::Verdict(
                Box::new(check(args, None, turn)?),
                tightening,
            ));
        };
        if confirmed {
            effects.wanted = Some(held.digest.clone());
            if let Some(earlier) = held_call(&held.digest) {
                let v = check(args, Some(&earlier), turn)?;
                if v.is_allowed() {
                    effects.take = Some(held.digest.clone());
                }
                return Ok(Evaluated::Verdict(Box::new(v), tightening));
            }
            return Ok(Evaluated::Verdict(
                Box::new(unmatched_confirmation(unconfirmed)),
                tightening,
            ));
        }
        // Not confirmed: hold it and ask.
        effects.hold = Some(held);
        Ok(Evaluated::Verdict(Box::new(unconfirmed), tightening))
    }

    /// The text a refused or held call returns: what happened, where the rule is, the
    /// annotation that tightened the tool (if one did), and what would allow the call.
    fn explain(&self, tool: &str, v: &Verdict, tightening: Option<&Tightening>) -> String {
        let stage = v.stage.map_or("none", Stage::as_str);
        let source = v
            .source
            .as_deref()
            .map(|s| format!(", rule at {s}"))
            .unwrap_or_default();
        let hint = tightening
            .map(|t| {
                format!(
                    "; the server says {}, so `{tool}`, declared {}, is judged as {}",
                    t.hints, t.declared, t.judged
                )
            })
            .unwrap_or_default();
        let effect = v.effect.as_deref().unwrap_or("?");
        let fields = self
            .confirm_fields
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(" or ");
        if v.decision == Decision::Confirm {
            return format!(
                "toolwarden holds `{tool}` until the user confirms it: {} (stage {stage}{source}{hint}). \
                 To run it: ask the user; if they agree, call `{tool}` again with the same arguments \
                 and {fields} set to true.",
                v.reason
            );
        }
        let allow = match v.stage {
            Some(Stage::Identity) => "declaring or enabling the tool in the policy".to_string(),
            Some(Stage::Connector) => {
                "adding this server to the connector allowlist (`--connectors`)".to_string()
            }
            Some(Stage::Tenant) => "a session tenant (`--tenant`)".to_string(),
            Some(Stage::Role) => "a principal with one of the tool's roles (`--role`)".to_string(),
            Some(Stage::Permission) => "the missing permission (`--permission`)".to_string(),
            Some(Stage::Mode) => {
                format!("a mode whose ceiling allows effect `{effect}` (`--mode`)")
            }
            Some(Stage::Intent) => {
                format!("an intent whose matrix row offers effect `{effect}` (`--intent`)")
            }
            Some(Stage::TenantArg) => "naming this session's tenant in the arguments".to_string(),
            Some(Stage::Requires) => {
                "supplying the required arguments as a JSON object".to_string()
            }
            Some(Stage::Arguments) => {
                "arguments that the policy's argument rules do not deny".to_string()
            }
            Some(Stage::Flow) => {
                "a connection that has not read the content named above (the labels stay on this connection until it closes)"
                    .to_string()
            }
            Some(Stage::Confirmation) => {
                format!("repeating exactly the call the user confirmed, with {fields} set to true")
            }
            Some(Stage::TurnLimit) => "a new user turn".to_string(),
            None => "a policy that allows it".to_string(),
        };
        format!(
            "toolwarden blocked `{tool}`: {} (stage {stage}{source}{hint}). It would be allowed by {allow}.",
            v.reason
        )
    }
}

/// A call carrying a confirmation that no held call can take: refused at stage
/// `confirmation`, and nothing is held for it (a confirmation never arms a hold).
fn unmatched_confirmation(mut v: Verdict) -> Verdict {
    v.decision = Decision::Deny;
    v.stage = Some(Stage::Confirmation);
    v.pending = None;
    v.reason = format!(
        "{}, and no call the user could have been asked about is waiting: a confirmation counts only for the same call held earlier and answered to the client before the confirming message was sent, within 10 minutes; call it without the confirmation field first",
        v.reason
    );
    v
}

enum Evaluated {
    /// The policy knows no such tool (JSON-RPC -32602): the reason and the rule's source.
    Unknown(String, Option<String>),
    Verdict(Box<Verdict>, Option<Tightening>),
}
