//! Decisions and verdicts: what the evaluator answers, with the stage and the rule that decided.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The answer for one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Offer the tool / run the call.
    Allow,
    /// Offer the tool, but its calls need the user's explicit confirmation.
    Confirm,
    /// Do not offer the tool / block the call.
    Deny,
}

impl Decision {
    /// `"allow"`, `"confirm"` or `"deny"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Confirm => "confirm",
            Decision::Deny => "deny",
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The evaluation stages, in the order they run (DESIGN.md, "Semantics of offer" and
/// "Semantics of check_call"). Stages 1–7 decide visibility (and `flow`, with a session);
/// 8–13 only run for a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// 1: the name is declared, matched by a pattern, and enabled.
    Identity,
    /// 2: an `mcp__<server>__<tool>` name's server is in the resolved connector allowlist.
    Connector,
    /// 3: a tool that needs a tenant has one.
    Tenant,
    /// 4: one of the request's roles (closed under inclusion) is among the tool's roles.
    Role,
    /// 5: every permission the tool requires is held (closed under `implies`).
    Permission,
    /// 6: the tool's effect is under the mode's `restrict` ceiling.
    Mode,
    /// 7: the mode's matrix cell `[intent][effect]` is not `deny` (or the tool is forced).
    Intent,
    /// 8: the call's tenant argument names the request's tenant.
    #[serde(rename = "tenant_arg")]
    TenantArg,
    /// 9: every `requires` argument is present and not null.
    Requires,
    /// 10: no argument rule (`deny when ...`, `confirm when ...`) denies the call; a fired
    /// `confirm` rule makes it need confirmation.
    Arguments,
    /// 11: no `after` block whose labels are all on the session denies the call; one that
    /// makes it `confirm` makes it need confirmation (only with a session).
    Flow,
    /// 12: a call that needs confirmation carries a literal `true` confirmation.
    Confirmation,
    /// 13: the turn has not used up its transactional calls.
    TurnLimit,
}

impl Stage {
    /// Every stage in evaluation order.
    pub const ALL: [Stage; 13] = [
        Stage::Identity,
        Stage::Connector,
        Stage::Tenant,
        Stage::Role,
        Stage::Permission,
        Stage::Mode,
        Stage::Intent,
        Stage::TenantArg,
        Stage::Requires,
        Stage::Arguments,
        Stage::Flow,
        Stage::Confirmation,
        Stage::TurnLimit,
    ];

    /// The stage's name as DESIGN.md spells it (`identity`, …, `turn_limit`). Stages 3 and 8
    /// are both called `tenant` there; stage 8 is `tenant_arg` here so the two stay apart.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Identity => "identity",
            Stage::Connector => "connector",
            Stage::Tenant => "tenant",
            Stage::Role => "role",
            Stage::Permission => "permission",
            Stage::Mode => "mode",
            Stage::Intent => "intent",
            Stage::TenantArg => "tenant_arg",
            Stage::Requires => "requires",
            Stage::Arguments => "arguments",
            Stage::Flow => "flow",
            Stage::Confirmation => "confirmation",
            Stage::TurnLimit => "turn_limit",
        }
    }

    /// The stage's number, 1 to 13.
    pub fn number(self) -> u8 {
        self as u8 + 1
    }

    /// Parses a stage name as [`Stage::as_str`] writes it.
    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Index of a rule in a compiled policy: the piece of policy text that decided. Resolve it to
/// `file:line:col` with [`crate::Policy::rule_source`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub(crate) u32);

/// Which declaration a tool name resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolMatch {
    /// A `tool` declaration (its index among declared tools).
    Declared(u32),
    /// A `match` pattern (its index among patterns, in source order).
    Pattern(u32),
    /// No declaration: the `defaults` block under `unknown allow`.
    Defaults,
    /// No declaration at all.
    Unknown,
}

/// The decision for one tool name, 12 bytes, `Copy`: no allocation per tool.
///
/// `stage` is the stage that decided a `deny`, or the stage that asked for confirmation
/// ([`Stage::Confirmation`]) for a `confirm`; `None` for an `allow`. `rule` is the policy text
/// that decided (for an `allow`, the tool's declaration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolDecision {
    /// Allow, confirm or deny.
    pub decision: Decision,
    /// The deciding stage, see above.
    pub stage: Option<Stage>,
    /// The rule that decided.
    pub rule: RuleId,
    /// What the name resolved to.
    pub matched: ToolMatch,
}

/// The decisions of one `offer` call, one per input name, in input order.
#[derive(Clone, Debug)]
pub struct Offer<'t> {
    pub(crate) entries: Vec<(&'t str, ToolDecision)>,
}

impl<'t> Offer<'t> {
    /// Every name with its decision, in input order.
    pub fn entries(&self) -> &[(&'t str, ToolDecision)] {
        &self.entries
    }

    /// Names the model may see (decision `allow` or `confirm`), in input order.
    pub fn visible(&self) -> impl Iterator<Item = &'t str> + '_ {
        self.entries
            .iter()
            .filter(|(_, d)| d.decision != Decision::Deny)
            .map(|(n, _)| *n)
    }

    /// Names offered without confirmation, in input order.
    pub fn allowed(&self) -> impl Iterator<Item = &'t str> + '_ {
        self.with(Decision::Allow)
    }

    /// Names offered whose calls need confirmation, in input order.
    pub fn confirm(&self) -> impl Iterator<Item = &'t str> + '_ {
        self.with(Decision::Confirm)
    }

    /// Names not offered, with their decisions, in input order.
    pub fn denied(&self) -> impl Iterator<Item = (&'t str, ToolDecision)> + '_ {
        self.entries
            .iter()
            .filter(|(_, d)| d.decision == Decision::Deny)
            .copied()
    }

    /// Indexes (into the input) of the visible names, in input order.
    pub fn visible_indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, (_, d))| d.decision != Decision::Deny)
            .map(|(i, _)| i)
    }

    fn with(&self, decision: Decision) -> impl Iterator<Item = &'t str> + '_ {
        self.entries
            .iter()
            .filter(move |(_, d)| d.decision == decision)
            .map(|(n, _)| *n)
    }
}

/// What one user turn has executed so far; the caller keeps one per turn and passes it to every
/// `check_call` of that turn. Serializable, so a shell flow can keep it in a file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Transactional (non-read-only) calls allowed so far in this turn.
    pub transactional_calls: u32,
}

impl Turn {
    /// A fresh turn with no call made.
    pub fn new() -> Turn {
        Turn::default()
    }
}

/// A call held until the user confirms it (seed 004's `pending_tool_call` with
/// `transaction_status: AWAITING_CONFIRMATION`). Serializable so an agent can persist it between
/// turns; the `digest` binds the tool, the arguments (confirmation fields removed) and the policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingCall {
    /// The tool called.
    pub tool: String,
    /// The arguments, confirmation fields removed.
    pub args: Map<String, Value>,
    /// Hex SHA-256 over the policy name and version, the tool and the canonical JSON arguments.
    pub digest: String,
    /// Always `"AWAITING_CONFIRMATION"`.
    pub transaction_status: String,
    /// The policy that asked for confirmation.
    pub policy: String,
    /// Its version, when it declares one.
    pub policy_version: Option<u64>,
}

/// An argument rule that fired on a call: its outcome, where it is written, and the argument
/// and value that made it fire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FiredRule {
    /// `file:line:col` of the rule.
    pub source: String,
    /// `"deny"` or `"confirm"`.
    pub outcome: &'static str,
    /// The argument reference as the rule writes it (`recipients[*]`, `host(url)`, `any`).
    pub reference: String,
    /// The value that made it fire, cut to 80 characters; `None` for an absent argument.
    pub value: Option<String>,
    /// Why the condition could not be evaluated, when that is why it fired (fail closed).
    pub problem: Option<String>,
}

/// The result of `check_call`: run it (`allow`, with the arguments to execute), ask first
/// (`confirm`, with the pending call) or block it (`deny`), with the stage, a human reason and
/// the rule's source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Allow, confirm or deny.
    pub decision: Decision,
    /// The tool called.
    pub tool: String,
    /// The deciding stage (`None` for an allow).
    pub stage: Option<Stage>,
    /// Why, in one sentence.
    pub reason: String,
    /// The tool's effect, when the name resolved to one.
    pub effect: Option<String>,
    /// `"read_only"` or `"transactional"` (seed 004), when the effect is known.
    pub operation_type: Option<&'static str>,
    /// `file:line:col` of the deciding rule.
    pub source: Option<String>,
    /// On allow: the arguments to execute, confirmation fields removed.
    pub args_for_execution: Option<Map<String, Value>>,
    /// On confirm: the call awaiting confirmation.
    pub pending: Option<PendingCall>,
    /// On a `requires` deny: the missing argument names.
    pub missing: Vec<String>,
    /// Whether the call carried a confirmation field set to the literal `true` (seed 004's
    /// `confirmation_received`).
    pub confirmation_received: bool,
    /// Under advisory enforcement (the audit layer's `Enforcement::Advisory`): the decision
    /// enforcement would have made, when this allow overrode it (then `stage`, `source` and
    /// `reason` are that decision's); `None` otherwise.
    pub would_be: Option<Decision>,
    /// The argument rules that fired on the call, in evaluation order (the tool's own rules,
    /// then those that apply to every tool); empty when none fired or the call did not reach
    /// stage `arguments`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<FiredRule>,
    /// The argument names that confirm a call (`confirm fields`).
    #[serde(skip)]
    pub(crate) confirm_fields: Vec<String>,
}

impl Verdict {
    /// Whether the call may run now.
    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allow
    }

    /// Whether the call waits for the user's confirmation (then [`Verdict::pending`] is set).
    pub fn needs_confirmation(&self) -> bool {
        self.decision == Decision::Confirm
    }

    /// Whether the call is blocked.
    pub fn is_denied(&self) -> bool {
        self.decision == Decision::Deny
    }

    /// The result in seed 004's shape; every result carries `"decision"` (`"allow"`,
    /// `"confirm"`, `"deny"`) and `"tool"`. An allow gives `{"ok": true, "decision": "allow",
    /// "tool", "args": {...}}`; a deny gives `{"ok": false, "decision": "deny", "tool", "error",
    /// "metadata": {"blocked_by_policy": true, "stage", "operation_type", "effect",
    /// "policy_source"}}`; a confirm (`"decision": "confirm"`) adds
    /// `"confirmation_required": true`, `"confirmation_fields"` and `"pending_call"`. An allow
    /// that advisory enforcement let through adds `"advisory": {"would_be", "stage",
    /// "reason"}` to its metadata. When argument rules fired, `"rules"` lists them
    /// (`[{"source", "outcome", "reference", "value", "problem"}]`).
    pub fn to_json(&self) -> Value {
        let mut v = self.to_json_without_rules();
        if !self.rules.is_empty() {
            v["rules"] = serde_json::to_value(&self.rules).unwrap_or(Value::Null);
        }
        v
    }

    fn to_json_without_rules(&self) -> Value {
        match self.decision {
            Decision::Allow => {
                let mut v = serde_json::json!({
                    "ok": true,
                    "decision": "allow",
                    "tool": self.tool,
                    "args": self.args_for_execution,
                    "confirmation_received": self.confirmation_received,
                    "metadata": {
                        "blocked_by_policy": false,
                        "operation_type": self.operation_type,
                        "effect": self.effect,
                        "policy_source": self.source,
                    }
                });
                if let Some(would_be) = self.would_be {
                    v["metadata"]["advisory"] = serde_json::json!({
                        "would_be": would_be,
                        "stage": self.stage.map(Stage::as_str),
                        "reason": self.reason,
                    });
                }
                v
            }
            Decision::Deny | Decision::Confirm => {
                let mut v = serde_json::json!({
                    "ok": false,
                    "decision": self.decision,
                    "tool": self.tool,
                    "error": self.reason,
                    "metadata": {
                        "blocked_by_policy": true,
                        "stage": self.stage.map(Stage::as_str),
                        "operation_type": self.operation_type,
                        "effect": self.effect,
                        "policy_source": self.source,
                    }
                });
                if !self.missing.is_empty() {
                    v["metadata"]["missing"] = serde_json::json!(self.missing);
                }
                if self.decision == Decision::Confirm {
                    v["confirmation_required"] = Value::Bool(true);
                    v["confirmation_fields"] = serde_json::json!(self.confirm_fields);
                    v["transaction_status"] = Value::from("AWAITING_CONFIRMATION");
                    v["pending_call"] = serde_json::to_value(&self.pending).unwrap_or(Value::Null);
                }
                v
            }
        }
    }
}
