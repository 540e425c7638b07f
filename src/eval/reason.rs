//! The one-sentence reason given with a decision: which stage denied, and what the policy says
//! there (the missing role, the mode that does not allow the effect, the matrix cell, ...).

use crate::decision::{Decision, Stage, ToolDecision, ToolMatch};

use super::{Policy, Request};

impl Policy {
    /// A one-sentence reason for a decision about `tool`.
    pub fn reason(&self, tool: &str, d: &ToolDecision, request: &Request) -> String {
        self.reason_as(tool, d, request, None)
    }

    /// [`Policy::reason`] for a tool judged under `effect_override` (an effect index).
    pub(crate) fn reason_as(
        &self,
        tool: &str,
        d: &ToolDecision,
        request: &Request,
        effect_override: Option<u8>,
    ) -> String {
        let t = self.tables();
        let row = self.resolve_tool(tool).1;
        let effect = row.map_or("?", |r| {
            &*t.effects[effect_override.unwrap_or(r.effect) as usize]
        });
        let mode_name = request
            .mode
            .clone()
            .or_else(|| self.default_mode().map(str::to_string))
            .unwrap_or_default();
        match (d.decision, d.stage) {
            (Decision::Allow, _) => format!("`{tool}` ({effect}) is allowed"),
            (_, Some(Stage::Identity)) => match d.matched {
                ToolMatch::Unknown => format!("`{tool}` is not declared by the policy and unknown tools are denied"),
                _ => format!("`{tool}` is disabled (`enabled false`)"),
            },
            (_, Some(Stage::Connector)) => {
                let server = self.connector_server(tool).unwrap_or("");
                // Seed 000: the first tier, in precedence order, that the request sets decides.
                let tier = t
                    .tiers
                    .iter()
                    .find(|tier| request.connectors.iter().any(|(n, _)| **n == ***tier))
                    .map_or("request", |tier| &**tier);
                format!("Connector {server} is not enabled for this {tier}")
            }
            (_, Some(Stage::Tenant)) => format!("`{tool}` needs a tenant and the request has none"),
            (_, Some(Stage::Role)) => {
                let roles = row
                    .and_then(|r| r.roles.as_ref())
                    .map(|r| r.iter().map(|i| format!("`{}`", t.roles[i])).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default();
                format!("`{tool}` needs one of the roles {roles}")
            }
            (_, Some(Stage::Permission)) => {
                let perms = row
                    .map(|r| r.perms.iter().map(|i| format!("`{}`", t.permissions[i])).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default();
                format!("`{tool}` needs permission {perms}")
            }
            (_, Some(Stage::Mode)) => format!("mode `{mode_name}` does not allow effect `{effect}`"),
            (_, Some(Stage::Intent)) => match t.rules.get(d.rule.0 as usize).map(|r| &r.kind) {
                Some(crate::compile::RuleKind::Cell { matrix, intent }) => format!(
                    "intent `{}` does not offer effect `{effect}` in mode `{mode_name}` (matrix `{}`)",
                    t.intents[*intent as usize], t.matrix_names[*matrix as usize]
                ),
                _ => format!("the query's intent does not offer effect `{effect}` in mode `{mode_name}`"),
            },
            (_, Some(Stage::Flow)) => {
                let what = if d.decision == Decision::Deny { "denies" } else { "confirms" };
                let head = t
                    .afters
                    .iter()
                    .find(|a| a.lines.iter().any(|(_, _, r)| *r == d.rule))
                    .map_or_else(|| "an `after` block".to_string(), |a| format!("`{}`", self.after_head(a.labels)));
                format!("the session's labels bring in {head}, which {what} effect `{effect}`")
            }
            (Decision::Confirm, _) => {
                let kind = t.rules.get(d.rule.0 as usize).map(|r| r.kind.clone());
                match kind {
                    Some(crate::compile::RuleKind::ConfirmAlways) => format!("`{tool}` says `confirm always`"),
                    Some(crate::compile::RuleKind::ModeConfirm) => format!("mode `{mode_name}` confirms effect `{effect}`"),
                    _ if request.forced.iter().any(|f| f == tool) => format!(
                        "`{tool}` is forced past the intent stage, so its calls need confirmation"
                    ),
                    _ => format!("the matrix cell for effect `{effect}` is `confirm`"),
                }
            }
            (_, Some(stage)) => format!("denied at stage `{stage}`"),
            (_, None) => "denied".to_string(),
        }
    }
}
