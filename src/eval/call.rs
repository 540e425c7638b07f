//! The execution guard, `check_call` and its variants: stages 1–7 as in `offer`, then the
//! tenant argument (8), required arguments (9), argument rules (10), the session's flow labels
//! (11, with a [`Session`]), confirmation against a pending call (12) and the per-turn limit
//! (13), with the digest that ties a confirmation to one exact call.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::args::json_kind;
use crate::classify::Intent;
use crate::compile::ToolRow;
use crate::condition::{ContextSet, EvalContext};
use crate::decision::{Decision, FiredRule, PendingCall, RuleId, Stage, Turn, Verdict};
use crate::limits;
use crate::syntax::ast::RuleOutcome;

use super::json::{canonical_object, json_depth, write_json};
use super::{Policy, Request, RequestError, Session};

/// Most `context` sets whose lookups `check_call` keeps on the stack.
const FEW_CONTEXTS: usize = 8;

impl Policy {
    /// Judges one tool call: stages 1–7 exactly as in `offer`, then tenant argument, required
    /// arguments, confirmation and the per-turn limit (DESIGN.md, "Semantics of check_call").
    /// An allowed call increments `turn` when it is transactional.
    ///
    /// `args` should be a JSON object; anything else is denied at stage `requires`.
    ///
    /// This form trusts a confirmation field set to `true` without asking where it came from;
    /// an agent runtime, where the model writes the arguments, uses
    /// [`Policy::check_call_strict`] instead, so that only a confirmation of a pending call
    /// counts.
    ///
    /// # Errors
    ///
    /// [`RequestError`] as for [`Policy::offer`].
    pub fn check_call(
        &self,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
    ) -> Result<Verdict, RequestError> {
        self.check_call_with(request, intent, turn, tool, args, None)
    }

    /// [`Policy::check_call`] for a call that answers a pending confirmation: when the call is
    /// confirmed, its tool and arguments (confirmation fields removed) must match `pending`'s
    /// digest, or it is denied at stage `confirmation`. A pending call that matches the call
    /// presented exempts its tool from the intent stage. With `pending` `None`, a confirmation
    /// field set to `true` is trusted: prefer [`Policy::check_call_strict`], which refuses it.
    ///
    /// # Errors
    ///
    /// [`RequestError`] as for [`Policy::offer`].
    pub fn check_call_with(
        &self,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
        pending: Option<&PendingCall>,
    ) -> Result<Verdict, RequestError> {
        self.check_call_as(request, intent, turn, tool, args, pending, None)
    }

    /// Judges one tool call for a caller that keeps the calls awaiting confirmation (the way to
    /// integrate): a confirmation is trusted only against `pending`, the call the user was
    /// asked about. Exactly [`Policy::check_call_with`], except that a call which needs
    /// confirmation and carries a confirmation field set to `true` while `pending` is `None` is
    /// denied at stage `confirmation` ("no call is awaiting confirmation"): the model cannot
    /// confirm its own call. A call that needs no confirmation runs as usual (its confirmation
    /// fields removed).
    ///
    /// The flow: a `confirm` verdict hands back [`Verdict::pending`]; keep it where the model
    /// cannot write, ask the user, and on "yes" repeat the call with the confirmation field set
    /// and `Some(&pending)`. While that pending call matches the call presented (same digest),
    /// its tool is exempt from the intent stage, so a "yes" that classifies as another intent
    /// still reaches it (stages 1–6 still apply).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolwarden::{Decision, Policy, Request, Turn};
    /// let policy = Policy::parse(
    ///     "policy \"p\" version 1\neffects none, write\nmode agent { }\n\
    ///      confirm fields \"confirmed\"\ntool send { effect write confirm always }\n",
    ///     "p.warden",
    /// ).unwrap();
    /// let (request, intent) = (Request::new("agent"), policy.fallback_intent());
    /// let mut turn = Turn::new();
    /// // The model confirms its own call: denied, nobody asked the user.
    /// let v = policy.check_call_strict(&request, &intent, &mut turn, "send",
    ///     &json!({"to": "bob", "confirmed": true}), None).unwrap();
    /// assert_eq!(v.decision, Decision::Deny);
    /// // Asked first, then confirmed by the user: runs.
    /// let held = policy.check_call_strict(&request, &intent, &mut turn, "send",
    ///     &json!({"to": "bob"}), None).unwrap().pending.unwrap();
    /// let v = policy.check_call_strict(&request, &intent, &mut turn, "send",
    ///     &json!({"to": "bob", "confirmed": true}), Some(&held)).unwrap();
    /// assert_eq!(v.decision, Decision::Allow);
    /// ```
    ///
    /// # Errors
    ///
    /// [`RequestError`] as for [`Policy::offer`].
    pub fn check_call_strict(
        &self,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
        pending: Option<&PendingCall>,
    ) -> Result<Verdict, RequestError> {
        self.check_call_inner(
            request, intent, turn, tool, args, pending, None, true, None, None,
        )
    }

    /// Judges one tool call within a [`Session`]: [`Policy::check_call_strict`] with the
    /// session's pending call as `pending` and its turn count as the [`Turn`], plus stage
    /// `flow` (after `arguments`, before `confirmation`): the `after` blocks whose labels are
    /// all on the session deny the call, or make it need confirmation, by its effect or by
    /// their argument rules; the reason names the label and the call that put it there
    /// ("the session read untrusted content from get_webpage in turn 2").
    ///
    /// The session is updated: the turn's count; a `confirm` verdict's pending call is kept
    /// in it (confirm it by repeating the call with the confirmation field set), and a
    /// confirmed call clears it; an allowed call of a tool that `taints` adds its labels (an
    /// allowed call is assumed to run). The first call binds a new session to this policy.
    ///
    /// # Errors
    ///
    /// [`RequestError`] as for [`Policy::offer`], and [`RequestError::Session`] when the
    /// session belongs to another policy or version or holds a label the policy does not
    /// declare (the session is unchanged then).
    pub fn check_call_session(
        &self,
        request: &Request,
        intent: &Intent,
        session: &mut Session,
        tool: &str,
        args: &Value,
    ) -> Result<Verdict, RequestError> {
        let labels = session.bind(self).map_err(RequestError::Session)?;
        let mut turn = session.turn_state();
        let mut taints = 0;
        let verdict = self.check_call_inner(
            request,
            intent,
            &mut turn,
            tool,
            args,
            session.pending(),
            None,
            true,
            Some((&*session, labels)),
            Some(&mut taints),
        )?;
        session.after_call(self, turn, &verdict, taints);
        Ok(verdict)
    }

    /// `args` without the policy's confirmation fields (`confirm fields`): what a model's own
    /// call should be judged as before deciding whether to ask the user, so that a model that
    /// writes `"confirmed": true` itself still reaches the human. Arguments that are not a
    /// JSON object are returned unchanged (the guard denies them).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolwarden::Policy;
    /// let policy = Policy::parse(
    ///     "policy \"p\"\neffects none\nmode m { }\nconfirm fields \"confirmed\", \"confirmation\"\n",
    ///     "p.warden",
    /// ).unwrap();
    /// let args = json!({"id": 7, "confirmed": true, "confirmation": "yes"});
    /// assert_eq!(policy.strip_confirmation(&args), json!({"id": 7}));
    /// ```
    pub fn strip_confirmation(&self, args: &Value) -> Value {
        match args {
            Value::Object(obj) => {
                let fields = &self.tables().confirm_fields;
                Value::Object(
                    obj.iter()
                        .filter(|(k, _)| !fields.iter().any(|f| **f == ***k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                )
            }
            other => other.clone(),
        }
    }

    /// Whether `pending` is awaiting confirmation of exactly this call (same digest over the
    /// policy, the tool and the arguments without confirmation fields).
    fn pending_matches(&self, pending: &PendingCall, tool: &str, args: &Value) -> bool {
        if pending.transaction_status != "AWAITING_CONFIRMATION" || pending.tool != tool {
            return false;
        }
        match self.strip_confirmation(args) {
            Value::Object(stripped) => pending.digest == self.call_digest(tool, &stripped),
            _ => false,
        }
    }

    /// [`Policy::check_call_with`], judging the tool as if its effect were `effect_override`
    /// when given (an effect index; used by `check_call_schema` when MCP annotations tighten
    /// the tool's own effect).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_call_as(
        &self,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
        pending: Option<&PendingCall>,
        effect_override: Option<u8>,
    ) -> Result<Verdict, RequestError> {
        self.check_call_as_in(
            request,
            intent,
            turn,
            tool,
            args,
            pending,
            effect_override,
            None,
        )
    }

    /// [`Policy::check_call_as`] with stage `flow` judged against `session`'s labels (the
    /// session is not changed; the MCP layer records the call's labels once it forwards it).
    ///
    /// # Errors
    ///
    /// As [`Policy::check_call_as`], and [`RequestError::Session`] for a session of another
    /// policy or version or one holding an undeclared label.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_call_as_in(
        &self,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
        pending: Option<&PendingCall>,
        effect_override: Option<u8>,
        session: Option<&Session>,
    ) -> Result<Verdict, RequestError> {
        let flow = match session {
            Some(s) => Some((s, s.mask_for(self).map_err(RequestError::Session)?)),
            None => None,
        };
        self.check_call_inner(
            request,
            intent,
            turn,
            tool,
            args,
            pending,
            effect_override,
            false,
            flow,
            None,
        )
    }

    /// The guard itself. `strict`: a confirmation is trusted only against `pending`.
    /// `session`: the session and its labels as a mask, for stage `flow`. `taints`: set to the
    /// labels the tool's output puts on a session (its row's `taints`), read once with the row.
    #[allow(clippy::too_many_arguments)]
    fn check_call_inner(
        &self,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
        pending: Option<&PendingCall>,
        effect_override: Option<u8>,
        strict: bool,
        session: Option<(&Session, u8)>,
        taints: Option<&mut u8>,
    ) -> Result<Verdict, RequestError> {
        // A confirmation in flight is exempt from the intent filter (seed 001's
        // `force_tool_names`): when the pending call is this very call, its tool is forced for
        // stage 7. Stages 1–6 still apply, and stage 10 still needs the literal confirmation.
        let forced_request;
        let request = match pending {
            Some(p)
                if !request.forced.iter().any(|f| f == tool)
                    && self.pending_matches(p, tool, args) =>
            {
                let names: Vec<String> = request
                    .forced
                    .iter()
                    .cloned()
                    .chain(std::iter::once(tool.to_string()))
                    .collect();
                forced_request = request.clone().forced(names);
                &forced_request
            }
            _ => request,
        };
        let bound = self.bind(request, intent)?;
        let t = self.tables();
        let d = self.decide_as(&bound, tool, effect_override);
        let (_, row) = self.resolve_tool(tool);
        if let Some(taints) = taints {
            *taints = row.map_or(0, |r| r.taints);
        }
        let row_effect = |r: &ToolRow| effect_override.unwrap_or(r.effect);
        let effect = row.map(|r| t.effects[row_effect(r) as usize].to_string());
        let read_only = row.map(|r| Some(row_effect(r)) == t.read_only_effect);
        let mut verdict = Verdict {
            decision: d.decision,
            tool: tool.to_string(),
            stage: d.stage,
            reason: String::new(),
            effect,
            operation_type: read_only.map(|r| if r { "read_only" } else { "transactional" }),
            source: self.rule_source(d.rule).map(|l| l.to_string()),
            args_for_execution: None,
            pending: None,
            missing: Vec::new(),
            confirmation_received: false,
            would_be: None,
            rules: Vec::new(),
            confirm_fields: t.confirm_fields.iter().map(|s| s.to_string()).collect(),
        };
        let deny = |mut v: Verdict, stage: Stage, rule: RuleId, reason: String| {
            v.decision = Decision::Deny;
            v.stage = Some(stage);
            v.source = self.rule_source(rule).map(|l| l.to_string());
            v.reason = reason;
            v
        };
        if d.decision == Decision::Deny {
            verdict.reason = self.reason_as(tool, &d, request, effect_override);
            return Ok(verdict);
        }
        let Some(row) = row else {
            verdict.reason = self.reason_as(tool, &d, request, effect_override);
            return Ok(verdict);
        };
        // Arguments must be a JSON object of bounded depth.
        let Some(obj) = args.as_object() else {
            let reason = format!(
                "arguments of `{tool}` must be a JSON object, not {}",
                json_kind(args)
            );
            return Ok(deny(verdict, Stage::Requires, row.rule_decl, reason));
        };
        if json_depth(args) > limits::MAX_ARGS_DEPTH {
            let reason = format!(
                "arguments of `{tool}` are nested deeper than {} levels",
                limits::MAX_ARGS_DEPTH
            );
            return Ok(deny(verdict, Stage::Requires, row.rule_decl, reason));
        }
        // 8. tenant argument
        // Absent, it is left to the session (which injects it); present, it must be the tenant's
        // id as a string: null or any other type fails closed.
        if let Some(arg) = t.tenant_arg.as_deref() {
            if let Some(value) = obj.get(arg) {
                let Value::String(given) = value else {
                    let reason = format!(
                        "argument `{arg}` must be the tenant's id (a string), not {}",
                        json_kind(value)
                    );
                    return Ok(deny(verdict, Stage::TenantArg, t.rule_tenant_arg, reason));
                };
                if bound.tenant != Some(given.as_str()) {
                    let reason = match bound.tenant {
                        Some(own) => format!(
                            "argument `{arg}` names tenant `{given}`, but this session's tenant is `{own}`"
                        ),
                        None => format!(
                            "argument `{arg}` names tenant `{given}`, but this session has no tenant"
                        ),
                    };
                    return Ok(deny(verdict, Stage::TenantArg, t.rule_tenant_arg, reason));
                }
            }
        }
        // 9. required arguments
        let missing: Vec<String> = row
            .requires
            .iter()
            .filter(|r| obj.get(&***r).is_none_or(Value::is_null))
            .map(|r| r.to_string())
            .collect();
        if !missing.is_empty() {
            let list = missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let reason = format!(
                "`{tool}` requires argument{} {list}",
                if missing.len() == 1 { "" } else { "s" }
            );
            let mut v = deny(verdict, Stage::Requires, row.rule_requires, reason);
            v.missing = missing;
            return Ok(v);
        }
        // The arguments the pending-call digest covers: confirmation fields removed.
        let mut exec_args = obj.clone();
        // Confirmed only when some confirmation field is the JSON literal `true` and none says
        // anything else: `{"confirmed": false, "confirmation": true}` is not a confirmation.
        let mut any_true = false;
        let mut any_other = false;
        for field in &t.confirm_fields {
            if let Some(v) = exec_args.remove(&**field) {
                if v == Value::Bool(true) {
                    any_true = true;
                } else {
                    any_other = true;
                }
            }
        }
        // 10. arguments
        let judged = Value::Object(exec_args);
        let fired = self.judge_arguments(request, intent, row, &judged)?;
        // The reasons to ask the user besides stages 1–7: an argument rule, then `flow`.
        let mut asks: Vec<(Stage, RuleId, String)> = Vec::new();
        if !fired.is_empty() {
            let deny_at = fired.iter().position(|(f, _)| f.outcome == "deny");
            let (first, rule) = &fired[deny_at.unwrap_or(0)];
            let text = rule_reason(first);
            let rule = *rule;
            verdict.rules = fired.into_iter().map(|(f, _)| f).collect();
            if deny_at.is_some() {
                let reason = format!("`{tool}` is denied by the argument rule at {text}");
                return Ok(deny(verdict, Stage::Arguments, rule, reason));
            }
            asks.push((
                Stage::Arguments,
                rule,
                format!("the argument rule at {text}"),
            ));
        }
        // 11. flow: the `after` blocks whose labels are all on the session. The masks say
        // in one lookup whether any of them can matter for this effect.
        if let Some((session, labels)) = session.filter(|(_, l)| *l != 0) {
            let masks = t.flow_masks(bound.mode, labels);
            let bit = 1u64 << row_effect(row).min(63);
            if masks.deny & bit != 0 || masks.confirm & bit != 0 || masks.rules {
                let flow = self.judge_flow(
                    request,
                    intent,
                    bound.mode,
                    session,
                    labels,
                    row_effect(row),
                    &judged,
                )?;
                verdict.rules.extend(flow.fired);
                if let Some((rule, why)) = flow.deny {
                    let reason = format!("`{tool}` is denied: {why}");
                    return Ok(deny(verdict, Stage::Flow, rule, reason));
                }
                if let Some((rule, why)) = flow.confirm {
                    asks.push((Stage::Flow, rule, why));
                }
            }
        }
        let exec_args = match judged {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        // 12. confirmation
        let confirmed = any_true && !any_other;
        verdict.confirmation_received = confirmed;
        if d.decision != Decision::Confirm {
            if let Some((stage, rule, _)) = asks.first() {
                verdict.stage = Some(*stage);
                verdict.source = self.rule_source(*rule).map(|l| l.to_string());
            }
        }
        if d.decision == Decision::Confirm || !asks.is_empty() {
            let digest = self.call_digest(tool, &exec_args);
            if !confirmed {
                let fields = t
                    .confirm_fields
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(" or ");
                let mut parts = Vec::new();
                if d.decision == Decision::Confirm {
                    parts.push(self.reason_as(tool, &d, request, effect_override));
                }
                parts.extend(asks.into_iter().map(|(_, _, why)| why));
                let why = parts.join("; and ");
                verdict.decision = Decision::Confirm;
                verdict.reason = if fields.is_empty() {
                    format!("`{tool}` needs confirmation ({why}) and the policy declares no `confirm fields`")
                } else {
                    format!("`{tool}` needs confirmation{CONFIRM_ASK}{fields}{CONFIRM_SET}{why})")
                };
                verdict.pending = Some(PendingCall {
                    tool: tool.to_string(),
                    args: exec_args,
                    digest,
                    transaction_status: "AWAITING_CONFIRMATION".to_string(),
                    policy: self.name().to_string(),
                    policy_version: self.version(),
                });
                return Ok(verdict);
            }
            if pending.is_none() && strict {
                let reason = format!(
                    "`{tool}` carries a confirmation, but no call is awaiting confirmation: only the user confirms, so call it without the confirmation field, ask the user, then repeat it with the pending call"
                );
                return Ok(deny(
                    verdict,
                    Stage::Confirmation,
                    t.rule_confirm_fields,
                    reason,
                ));
            }
            if let Some(p) = pending {
                let reason = if p.policy != self.name() || p.policy_version != self.version() {
                    Some(format!(
                        "the pending call was made under policy `{}` version {}, not `{}` version {}; ask the user again",
                        p.policy,
                        p.policy_version.map_or("none".to_string(), |v| v.to_string()),
                        self.name(),
                        self.version().map_or("none".to_string(), |v| v.to_string()),
                    ))
                } else if p.transaction_status != "AWAITING_CONFIRMATION" {
                    Some(format!(
                        "the pending call's status is `{}`, not `AWAITING_CONFIRMATION`",
                        p.transaction_status
                    ))
                } else if p.digest != self.call_digest(&p.tool, &p.args) {
                    Some(
                        "the pending call is corrupt: its digest does not match its own tool and arguments"
                            .to_string(),
                    )
                } else if p.digest != digest {
                    Some(if p.tool != tool {
                        format!("the confirmation was for `{}`, not `{tool}`", p.tool)
                    } else {
                        format!("the arguments of `{tool}` differ from the call the user confirmed")
                    })
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Ok(deny(
                        verdict,
                        Stage::Confirmation,
                        t.rule_confirm_fields,
                        reason,
                    ));
                }
            }
        }
        // 13. turn limit
        let transactional = Some(row_effect(row)) != t.read_only_effect;
        if transactional {
            if let Some(limit) = t.limit {
                if turn.transactional_calls >= limit {
                    let reason = format!(
                        "this turn already ran {} transactional call{}; the limit is {limit} per turn",
                        turn.transactional_calls,
                        if turn.transactional_calls == 1 { "" } else { "s" }
                    );
                    return Ok(deny(verdict, Stage::TurnLimit, t.rule_limit, reason));
                }
            }
            turn.transactional_calls = turn.transactional_calls.saturating_add(1);
        }
        verdict.decision = Decision::Allow;
        verdict.stage = None;
        verdict.reason = format!("`{tool}` may run");
        verdict.source = self.rule_source(row.rule_decl).map(|l| l.to_string());
        verdict.args_for_execution = Some(exec_args);
        Ok(verdict)
    }

    /// Stage 10: runs every argument rule of `row` and every rule that applies to all tools on
    /// `args` (confirmation fields already removed), and returns those that fired with their
    /// rule ids, in evaluation order.
    ///
    /// # Errors
    ///
    /// [`RequestError::UnknownContext`] when the request supplies a `context` set the policy
    /// does not declare.
    fn judge_arguments(
        &self,
        request: &Request,
        intent: &Intent,
        row: &ToolRow,
        args: &Value,
    ) -> Result<Vec<(FiredRule, RuleId)>, RequestError> {
        let mut fired = Vec::new();
        self.each_argument_rule(request, intent, Some(row), args, |rule, f| {
            if let Some(f) = f {
                fired.push((f, rule));
            }
        })?;
        Ok(fired)
    }

    /// Evaluates every argument rule of `row` (none for `None`), then every rule that applies
    /// to all tools, on `args`, and calls `each` with the rule's id and, when it fired, what
    /// fired it.
    ///
    /// # Errors
    ///
    /// [`RequestError::UnknownContext`] when the request supplies a `context` set the policy
    /// does not declare.
    pub(crate) fn each_argument_rule(
        &self,
        request: &Request,
        intent: &Intent,
        row: Option<&ToolRow>,
        args: &Value,
        each: impl FnMut(RuleId, Option<FiredRule>),
    ) -> Result<(), RequestError> {
        let t = self.tables();
        if let Some(name) = request
            .context_names()
            .find(|n| !t.contexts.iter().any(|c| **c == **n))
        {
            return Err(RequestError::UnknownContext {
                name: name.to_string(),
                known: super::request::known(&t.contexts),
            });
        }
        let own = row.map_or(0..0, |r| r.arg_rules.clone());
        self.each_rule_in(request, intent, &[own, t.global_rules.clone()], args, each)
    }

    /// Evaluates the argument rules of `ranges` (ranges of `Tables::arg_rules`, in order) on
    /// `args` and calls `each` with the rule's id and, when it fired, what fired it. The
    /// request's `context` sets must already be known to be declared.
    fn each_rule_in(
        &self,
        request: &Request,
        intent: &Intent,
        ranges: &[std::ops::Range<u32>],
        args: &Value,
        mut each: impl FnMut(RuleId, Option<FiredRule>),
    ) -> Result<(), RequestError> {
        let t = self.tables();
        if ranges.iter().all(|r| r.is_empty()) {
            return Ok(());
        }
        // The request's sets, indexed by `ContextId`: on the stack for a policy that declares
        // a few (the common case), else in a vector.
        let mut few: [Option<&ContextSet>; FEW_CONTEXTS] = [None; FEW_CONTEXTS];
        let many: Vec<Option<&ContextSet>>;
        let sets: &[Option<&ContextSet>] = if t.contexts.len() <= FEW_CONTEXTS {
            for (slot, name) in few.iter_mut().zip(t.contexts.iter()) {
                *slot = request.context_set(name);
            }
            &few[..t.contexts.len()]
        } else {
            many = t.contexts.iter().map(|n| request.context_set(n)).collect();
            &many
        };
        let fold = t.fold_accents;
        let normalize = move |s: &str| crate::classify::normalize(s, fold).text;
        let ctx = match intent.query.as_deref() {
            Some(q) => EvalContext::new(q, &normalize, sets),
            None => EvalContext::without_query(&normalize, sets),
        };
        for rule in ranges
            .iter()
            .filter_map(|r| t.arg_rules.get(r.start as usize..r.end as usize))
            .flatten()
        {
            let outcome = rule.condition.eval(args, &ctx);
            let fired = outcome.fires().then(|| {
                let w = outcome.witness();
                FiredRule {
                    source: self
                        .rule_source(rule.rule)
                        .map_or_else(String::new, |l| l.to_string()),
                    outcome: rule.outcome.as_str(),
                    reference: w.map_or_else(String::new, |w| w.reference().to_string()),
                    value: w.and_then(|w| w.value_text()),
                    problem: w.and_then(|w| w.problem()).map(|p| p.to_string()),
                }
            });
            each(rule.rule, fired);
        }
        Ok(())
    }

    /// Stage 11 for a call of effect `effect` in mode `mode`, with the session's labels
    /// `labels` (not empty): every applicable `after` block's lines and argument rules. The
    /// first deny (an effect line, else a fired rule) wins over the first confirm; each comes
    /// with its rule and the reason's words, which name the labels and the calls that put them
    /// on the session.
    #[allow(clippy::too_many_arguments)]
    fn judge_flow(
        &self,
        request: &Request,
        intent: &Intent,
        mode: usize,
        session: &Session,
        labels: u8,
        effect: u8,
        args: &Value,
    ) -> Result<Flow, RequestError> {
        let t = self.tables();
        let bit = 1u64 << effect.min(63);
        let effect_name = &t.effects[effect as usize];
        let mut flow = Flow::default();
        let mut rule_deny = None;
        for a in t.afters.iter().filter(|a| a.applies(mode, labels)) {
            let read = self.session_read(session, a.labels);
            let head = self.after_head(a.labels);
            for &(outcome, effects, rule) in &a.lines {
                if effects & bit == 0 {
                    continue;
                }
                let why = format!(
                    "{read}, and `{head}` {} effect `{effect_name}`",
                    if outcome == RuleOutcome::Deny {
                        "denies"
                    } else {
                        "confirms"
                    }
                );
                match outcome {
                    RuleOutcome::Deny if flow.deny.is_none() => flow.deny = Some((rule, why)),
                    RuleOutcome::Confirm if flow.confirm.is_none() => {
                        flow.confirm = Some((rule, why))
                    }
                    _ => {}
                }
            }
            let mut fired = Vec::new();
            self.each_rule_in(
                request,
                intent,
                std::slice::from_ref(&a.arg_rules),
                args,
                |rule, f| {
                    if let Some(f) = f {
                        fired.push((f, rule));
                    }
                },
            )?;
            for (f, rule) in fired {
                let why = format!("{read}, and the argument rule at {}", rule_reason(&f));
                if f.outcome == "deny" {
                    rule_deny.get_or_insert((rule, why));
                } else if flow.confirm.is_none() {
                    flow.confirm = Some((rule, why));
                }
                flow.fired.push(f);
            }
        }
        if flow.deny.is_none() {
            flow.deny = rule_deny;
        }
        Ok(flow)
    }

    /// "the session read untrusted content from get_webpage in turn 2 and private content
    /// from read_inbox in turn 3": where each label of `mask` came from.
    pub(crate) fn session_read(&self, session: &Session, mask: u8) -> String {
        let t = self.tables();
        let parts: Vec<String> = (0..t.labels.len())
            .filter(|i| mask & (1u8 << i) != 0)
            .map(|i| match session.source_of(self, i) {
                Some(s) => format!("{} content from {} in turn {}", t.labels[i], s.tool, s.turn),
                None => format!("{} content", t.labels[i]),
            })
            .collect();
        format!("the session read {}", parts.join(" and "))
    }

    /// `after untrusted, private`: the head of a block waiting for the labels of `mask`.
    pub(crate) fn after_head(&self, mask: u8) -> String {
        let t = self.tables();
        let names: Vec<&str> = (0..t.labels.len())
            .filter(|i| mask & (1u8 << i) != 0)
            .map(|i| &*t.labels[i])
            .collect();
        format!("after {}", names.join(", "))
    }

    /// Hex SHA-256 over the policy name and version, the tool name and the canonical JSON of
    /// the arguments (object keys sorted at every depth, whatever order the map keeps, so the
    /// digest does not depend on serde_json's `preserve_order` feature).
    pub(crate) fn call_digest(&self, tool: &str, args: &Map<String, Value>) -> String {
        // `{"policy":NAME,"tool":TOOL,"version":VERSION}`: the canonical JSON of the three,
        // keys in byte order.
        let mut text = Vec::with_capacity(256);
        text.extend_from_slice(b"{\"policy\":");
        write_json(self.name(), &mut text);
        text.extend_from_slice(b",\"tool\":");
        write_json(tool, &mut text);
        text.extend_from_slice(b",\"version\":");
        write_json(&self.version(), &mut text);
        text.extend_from_slice(b"}\n");
        canonical_object(args, &mut text);
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(64);
        for b in Sha256::digest(&text) {
            hex.push(char::from(HEX[usize::from(b >> 4)]));
            hex.push(char::from(HEX[usize::from(b & 15)]));
        }
        hex
    }
}

/// What stage `flow` found: the deciding deny and confirm (rule, reason words) and the
/// `after` blocks' argument rules that fired.
#[derive(Default)]
struct Flow {
    deny: Option<(RuleId, String)>,
    confirm: Option<(RuleId, String)>,
    fired: Vec<FiredRule>,
}

/// How a reason names a fired rule: `file:line:col`, the argument reference and the value
/// (already cut to 80 characters), or why the condition could not be evaluated.
fn rule_reason(f: &FiredRule) -> String {
    let mut text = f.source.clone();
    if !f.reference.is_empty() {
        text.push_str(&format!(" on `{}`", f.reference));
    }
    match (&f.value, &f.problem) {
        (Some(v), Some(p)) => text.push_str(&format!(" = `{v}` ({p})")),
        (Some(v), None) => text.push_str(&format!(" = `{v}`")),
        (None, Some(p)) => text.push_str(&format!(" ({p})")),
        (None, None) => {}
    }
    text
}

/// The instruction in the reason of a call held for confirmation, between the tool and the
/// confirmation fields: `` `TOOL` needs confirmation: ask the user, then repeat the call with
/// FIELDS set to true (WHY)``.
const CONFIRM_ASK: &str = ": ask the user, then repeat the call with ";
/// What follows the confirmation fields in that reason, before why the call needs it.
const CONFIRM_SET: &str = " set to true (";

/// Why a call held for confirmation needs it, out of its verdict's `reason`: the WHY of
/// `` `TOOL` needs confirmation: ask the user, then repeat the call with FIELDS set to true
/// (WHY)``, for a reader who is the user, not the model told to repeat the call. Any other
/// reason is returned whole.
#[cfg(feature = "gateway")]
pub(crate) fn confirmation_why(reason: &str) -> &str {
    let Some(at) = reason.find(CONFIRM_ASK) else {
        return reason;
    };
    let rest = &reason[at + CONFIRM_ASK.len()..];
    match (rest.find(CONFIRM_SET), rest.strip_suffix(')')) {
        (Some(set), Some(_)) => &rest[set + CONFIRM_SET.len()..rest.len() - 1],
        _ => reason,
    }
}

#[cfg(all(test, feature = "gateway"))]
mod tests {
    use super::confirmation_why;

    #[test]
    fn the_why_of_a_confirmation_reason_is_read_back_and_any_other_reason_is_whole() {
        assert_eq!(
            confirmation_why("`pay` needs confirmation: ask the user, then repeat the call with `confirmed` set to true (`pay` says `confirm always`)"),
            "`pay` says `confirm always`"
        );
        assert_eq!(confirmation_why("`pay` is denied"), "`pay` is denied");
        assert_eq!(
            confirmation_why(
                "`pay` needs confirmation: ask the user, then repeat the call with `ok`"
            ),
            "`pay` needs confirmation: ask the user, then repeat the call with `ok`"
        );
    }
}
