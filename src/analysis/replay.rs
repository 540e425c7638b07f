//! Recorded calls replayed against two versions of a policy (`toolwarden diff OLD NEW --calls
//! FILE`): every call whose verdict moves, with the deciding rule on each side.
//!
//! A recording is JSON Lines, one call an object:
//!
//! ```json
//! {"tool": "send_money", "args": {"recipient": "bob", "amount": 700},
//!  "mode": "autonomous", "roles": ["clerk"], "permissions": [], "tenant": "t-1",
//!  "connectors": {"external": ["github"]}, "forced": [], "query": "pay bob 700",
//!  "context": {"contacts": ["bob"]}}
//! ```
//!
//! Only `tool` is required; `args` defaults to `{}`, `mode` to each policy's `default mode`, the
//! intent to each policy's fallback. `query` (classified by each policy) and `intent` (a name)
//! exclude each other. A line is parsed as strictly as a call's arguments are (no duplicated
//! key, bounded depth), and a field the format does not know is refused, so a misspelt field
//! never goes unnoticed. Blank lines are skipped.
//!
//! Each call is judged on its own with [`Policy::check_call`]: a fresh turn, no pending call
//! (a call that needs confirmation is a `confirm`). Its verdict moved when the decision, the
//! stage or the deciding rule's text differs (rules compare by text, since the two versions
//! are different files; an allow has no deciding rule), or when one side refuses the request
//! (an undeclared mode, intent, tier or `context` set).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::classify::Intent;
use crate::decision::{Turn, Verdict};
use crate::eval::Request;
use crate::limits;
use crate::policy::Policy;

/// One recorded call, as a line of the recording holds it (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedCall {
    /// The tool called.
    pub tool: String,
    /// The call's arguments (`{}` when absent).
    #[serde(default)]
    pub args: Map<String, Value>,
    /// The execution mode (absent: each policy's `default mode`).
    #[serde(default)]
    pub mode: Option<String>,
    /// The principal's roles.
    #[serde(default)]
    pub roles: Vec<String>,
    /// The principal's permissions.
    #[serde(default)]
    pub permissions: Vec<String>,
    /// The session's tenant.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Connector allowlists by tier.
    #[serde(default)]
    pub connectors: std::collections::BTreeMap<String, Vec<String>>,
    /// Tool names exempt from the intent stage.
    #[serde(default)]
    pub forced: Vec<String>,
    /// The user's query, classified by each policy.
    #[serde(default)]
    pub query: Option<String>,
    /// An intent by name, instead of a query.
    #[serde(default)]
    pub intent: Option<String>,
    /// The `context` sets the argument rules read.
    #[serde(default)]
    pub context: std::collections::BTreeMap<String, Vec<String>>,
}

impl RecordedCall {
    /// Parses one line of a recording.
    ///
    /// # Errors
    ///
    /// A message saying what is wrong: not strict JSON, not an object, a missing or mistyped
    /// field, a field the format does not know, both `query` and `intent`.
    pub fn parse(line: &str) -> Result<RecordedCall, String> {
        let value = crate::args::parse_strict(
            line.as_bytes(),
            limits::MAX_ARGS_BYTES,
            limits::MAX_ARGS_DEPTH + 1,
        )
        .map_err(|e| match e {
            crate::args::StrictError::TooLarge { len, max } => {
                format!("the line is {len} bytes, over the {max}-byte limit")
            }
            crate::args::StrictError::Syntax(m) | crate::args::StrictError::Refused(m) => {
                format!("not acceptable JSON: {m}")
            }
        })?;
        if !value.is_object() {
            return Err(format!(
                "a recorded call is a JSON object, not {}",
                crate::args::json_kind(&value)
            ));
        }
        let call: RecordedCall = serde_json::from_value(value).map_err(|e| e.to_string())?;
        if call.query.is_some() && call.intent.is_some() {
            return Err("give `query` or `intent`, not both".to_string());
        }
        Ok(call)
    }

    /// The request and intent this call makes under `policy`.
    fn request(&self, policy: &Policy) -> (Request, Intent) {
        let mut r = match &self.mode {
            Some(m) => Request::new(m.clone()),
            None => Request::default_mode(),
        };
        r = r
            .roles(self.roles.clone())
            .permissions(self.permissions.clone())
            .forced(self.forced.clone());
        if let Some(t) = &self.tenant {
            r = r.tenant(t.clone());
        }
        for (tier, servers) in &self.connectors {
            r = r.connectors(tier.clone(), servers.clone());
        }
        for (name, values) in &self.context {
            r = r.context(name.clone(), values.clone());
        }
        let intent = match (&self.query, &self.intent) {
            (Some(q), _) => policy.classify(q),
            (None, Some(i)) => Intent::named(i.clone()),
            (None, None) => policy.fallback_intent(),
        };
        (r, intent)
    }
}

/// Reads a recording: every non-blank line, with its 1-based line number.
///
/// # Errors
///
/// The first malformed line, as `line N: what is wrong`; then no call is returned.
pub fn parse_recording(text: &str) -> Result<Vec<(usize, RecordedCall)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let call = RecordedCall::parse(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push((i + 1, call));
    }
    Ok(out)
}

/// One side's verdict on a recorded call, as the replay compares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallVerdict {
    /// `allow`, `confirm`, `deny`, or `error` when the policy refused the request.
    pub decision: String,
    /// The deciding stage (`None` for an allow or an error).
    pub stage: Option<String>,
    /// `file:line:col` of the deciding rule; `None` for an allow.
    pub rule: Option<String>,
    /// The deciding rule's text, on one line, cut to 80 characters (what the comparison
    /// reads); `None` for an allow.
    pub rule_text: Option<String>,
    /// The verdict's reason, or the request error.
    pub reason: String,
}

impl CallVerdict {
    fn of(policy: &Policy, texts: &RuleTexts, call: &RecordedCall) -> CallVerdict {
        let (request, intent) = call.request(policy);
        let mut turn = Turn::new();
        let args = Value::Object(call.args.clone());
        match policy.check_call(&request, &intent, &mut turn, &call.tool, &args) {
            Ok(v) => CallVerdict::from_verdict(texts, &v),
            Err(e) => CallVerdict {
                decision: "error".to_string(),
                stage: None,
                rule: None,
                rule_text: None,
                reason: e.to_string(),
            },
        }
    }

    /// An allow has no deciding stage, and the rule it reports is the tool's declaration:
    /// left out, so a change elsewhere in the declaration does not move an allowed call.
    fn from_verdict(texts: &RuleTexts, v: &Verdict) -> CallVerdict {
        let rule = v.stage.and(v.source.clone());
        let text = rule.as_deref().and_then(|loc| texts.get(loc).cloned());
        CallVerdict {
            decision: v.decision.to_string(),
            stage: v.stage.map(|s| s.as_str().to_string()),
            rule,
            rule_text: text,
            reason: v.reason.clone(),
        }
    }

    /// `deny at arguments (deny when amount > 50, new.warden:12:3)`.
    fn to_text(&self) -> String {
        let mut s = self.decision.clone();
        if let Some(stage) = &self.stage {
            s.push_str(&format!(" at {stage}"));
        }
        match (&self.rule_text, &self.rule) {
            (Some(t), Some(l)) => s.push_str(&format!(" ({t}, {l})")),
            (None, Some(l)) => s.push_str(&format!(" ({l})")),
            _ if self.decision == "error" => s.push_str(&format!(" ({})", self.reason)),
            _ => {}
        }
        s
    }

    fn same(&self, other: &CallVerdict) -> bool {
        self.decision == other.decision
            && self.stage == other.stage
            && self.rule_text == other.rule_text
            && (self.decision != "error" || self.reason == other.reason)
    }
}

/// Each rule's text on one line (cut to 80 characters), by the `file:line:col` a verdict
/// reports for it.
type RuleTexts = std::collections::HashMap<String, String>;

/// The [`RuleTexts`] of `policy`, built once per replay.
fn rule_texts(policy: &Policy) -> RuleTexts {
    let sources = policy.sources();
    policy
        .tables()
        .rules
        .iter()
        .filter_map(|r| r.span)
        .map(|span| {
            let flat = sources
                .slice(span)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let text = if flat.chars().count() > 80 {
                flat.chars().take(79).chain(['…']).collect()
            } else {
                flat
            };
            (sources.location(span).to_string(), text)
        })
        .collect()
}

/// A recorded call whose verdict moved.
#[derive(Clone, Debug, Serialize)]
pub struct CallChange {
    /// The call's 1-based line in the recording.
    pub line: usize,
    /// The tool called.
    pub tool: String,
    /// The old policy's verdict.
    pub old: CallVerdict,
    /// The new policy's verdict.
    pub new: CallVerdict,
}

impl CallChange {
    /// `  ~ line 3 send_money: confirm at arguments (...) → deny at arguments (...)`.
    pub fn render(&self) -> String {
        format!(
            "  ~ line {} {}: {} → {}\n",
            self.line,
            self.tool,
            self.old.to_text(),
            self.new.to_text()
        )
    }
}

/// Replays `calls` against `old` and `new`; returns the calls whose verdict moved, in order.
pub(crate) fn replay(
    old: &Policy,
    new: &Policy,
    calls: &[(usize, RecordedCall)],
) -> Vec<CallChange> {
    let (to, tn) = (rule_texts(old), rule_texts(new));
    calls
        .iter()
        .filter_map(|(line, call)| {
            let (a, b) = (
                CallVerdict::of(old, &to, call),
                CallVerdict::of(new, &tn, call),
            );
            (!a.same(&b)).then(|| CallChange {
                line: *line,
                tool: call.tool.clone(),
                old: a,
                new: b,
            })
        })
        .collect()
}
