//! Stages 1–7, the decisions `offer` makes for each tool name: identity (declared tool,
//! pattern, defaults), connector, tenant, role, permission, mode ceiling and intent, then (with
//! a session) the `after` blocks of stage `flow`, then whether the call needs confirmation. No
//! allocation per tool.

use crate::classify::Intent;
use crate::compile::{ToolRow, NO_SERVER};
use crate::decision::{Decision, Offer, RuleId, Stage, ToolDecision, ToolMatch};
use crate::glob::glob_match;
use crate::syntax::ast::RuleOutcome;

use super::{BoundRequest, Policy, Request, RequestError, Session};

impl Policy {
    /// Resolves a tool name to its row: a declared tool, else the first pattern in precedence
    /// order, else the defaults under `unknown allow`.
    #[inline]
    pub(crate) fn resolve_tool(&self, name: &str) -> (ToolMatch, Option<&ToolRow>) {
        let t = self.tables();
        if let Some(&i) = t.tool_index.get(name) {
            return (ToolMatch::Declared(i), Some(&t.tools[i as usize].1));
        }
        self.resolve_undeclared(name)
    }

    #[cold]
    fn resolve_undeclared(&self, name: &str) -> (ToolMatch, Option<&ToolRow>) {
        let t = self.tables();
        for p in &t.patterns {
            if glob_match(&p.glob, name) {
                return (ToolMatch::Pattern(p.source_index), Some(&p.row));
            }
        }
        match &t.defaults {
            Some(row) => (ToolMatch::Defaults, Some(row)),
            None => (ToolMatch::Unknown, None),
        }
    }

    /// The server of an `mcp__<server>__<tool>` name, or `None` when the name is not shaped so
    /// (no prefix declared, prefix absent, empty server or tool segment). Seed 000: split on
    /// `__` into at most three parts, so a tool segment keeps any further `__`.
    pub fn connector_server<'n>(&self, name: &'n str) -> Option<&'n str> {
        let prefix = self.tables().prefix.as_deref()?;
        crate::compile::connector_server_of(prefix, name)
    }

    /// Stages 1–7 for one tool name.
    pub(crate) fn decide(&self, b: &BoundRequest<'_>, name: &str) -> ToolDecision {
        self.decide_as(b, name, None)
    }

    /// Stages 1–7 for one tool name, with the tool's effect replaced by `effect` when given
    /// (used to judge an MCP tool under its annotation-derived effect, see `offer_schemas`).
    #[inline]
    pub(crate) fn decide_as(
        &self,
        b: &BoundRequest<'_>,
        name: &str,
        effect: Option<u8>,
    ) -> ToolDecision {
        let t = self.tables();
        let deny = |stage, rule, matched| ToolDecision {
            decision: Decision::Deny,
            stage: Some(stage),
            rule,
            matched,
        };
        // 1. identity
        let (matched, row) = self.resolve_tool(name);
        let Some(row) = row else {
            return deny(Stage::Identity, t.rule_unknown, matched);
        };
        if !row.enabled {
            return deny(Stage::Identity, row.rule_disabled, matched);
        }
        // 2. connector
        if let Some((_, servers)) = b.allowlist {
            let allowed = if let ToolMatch::Declared(_) = matched {
                // Declared names: the server was interned at compile time.
                row.server == NO_SERVER || b.allowed_servers.contains(row.server as usize)
            } else {
                match self.connector_server(name) {
                    Some(server) => servers.iter().any(|s| s == server),
                    None => true,
                }
            };
            if !allowed {
                return deny(Stage::Connector, t.rule_tiers, matched);
            }
        }
        // 3. tenant
        if row.tenant_required && b.tenant.is_none() {
            return deny(Stage::Tenant, row.rule_tenant, matched);
        }
        // 4. role
        if let Some(roles) = &row.roles {
            if !roles.intersects(&b.roles) {
                return deny(Stage::Role, row.rule_roles, matched);
            }
        }
        // 5. permission
        if !row.perms.is_subset(&b.perms) {
            return deny(Stage::Permission, row.rule_perms, matched);
        }
        // 6. mode ceiling (forced names too)
        let mode = &t.modes[b.mode];
        let row_effect = effect.unwrap_or(row.effect);
        let bit = 1u64 << row_effect.min(63);
        if mode.restrict & bit == 0 {
            return deny(Stage::Mode, mode.rule_restrict, matched);
        }
        // 7. intent
        let forced = b.forced.iter().any(|f| f == name);
        let cell_denies = b.allow_mask & bit == 0;
        if cell_denies && !forced {
            return deny(Stage::Intent, self.cell_rule(b, row_effect), matched);
        }
        // Confirmation: cell, mode list, or the tool itself. A forced tool whose cell denies is
        // only exempt from hiding, never from asking: its calls need confirmation, so `forced`
        // can never yield a weaker decision than the query's own intent would.
        // Flow (offer with a session): an applicable `after` block that denies the effect
        // hides the tool; one that confirms it offers it as `confirm`.
        let mut flow_confirm = None;
        if b.labels != 0 {
            let masks = t.flow_masks(b.mode, b.labels);
            if masks.deny & bit != 0 {
                let rule = self.flow_rule(b.mode, b.labels, bit, RuleOutcome::Deny);
                return deny(Stage::Flow, rule, matched);
            }
            if masks.confirm & bit != 0 {
                flow_confirm = Some(self.flow_rule(b.mode, b.labels, bit, RuleOutcome::Confirm));
            }
        }
        let confirm_rule = if cell_denies || b.confirm_mask & bit != 0 {
            Some(self.cell_rule(b, row_effect))
        } else if mode.confirm & bit != 0 {
            Some(mode.rule_confirm)
        } else if row.confirm_always {
            Some(row.rule_confirm)
        } else {
            None
        };
        match (confirm_rule, flow_confirm) {
            (None, Some(rule)) => ToolDecision {
                decision: Decision::Confirm,
                stage: Some(Stage::Flow),
                rule,
                matched,
            },
            (Some(rule), _) => ToolDecision {
                decision: Decision::Confirm,
                stage: Some(Stage::Confirmation),
                rule,
                matched,
            },
            (None, None) => ToolDecision {
                decision: Decision::Allow,
                stage: None,
                rule: row.rule_decl,
                matched,
            },
        }
    }

    /// The rule of the first `confirm` or `deny` line (`outcome`) of an `after` block that
    /// applies in mode `mode` to `labels` and names an effect of `bit`.
    #[cold]
    pub(crate) fn flow_rule(
        &self,
        mode: usize,
        labels: u8,
        bit: u64,
        outcome: RuleOutcome,
    ) -> RuleId {
        let t = self.tables();
        t.afters
            .iter()
            .filter(|a| a.applies(mode, labels))
            .flat_map(|a| a.lines.iter())
            .find(|(o, effects, _)| *o == outcome && effects & bit != 0)
            .map_or(t.rule_unknown, |(_, _, rule)| *rule)
    }

    /// The labels of the `after` block that holds the line `rule` (0 when none does).
    pub(crate) fn after_of(&self, rule: RuleId) -> u8 {
        self.tables()
            .afters
            .iter()
            .find(|a| a.lines.iter().any(|(_, _, r)| *r == rule))
            .map_or(0, |a| a.labels)
    }

    /// [`Policy::offer`] within a [`Session`]: the `after` blocks whose labels are all on the
    /// session hide a tool whose effect they deny (stage `flow`) and offer one whose effect
    /// they confirm as `confirm` (stage `flow`, when nothing before asked for confirmation).
    /// Their argument rules are not read (a call is judged by them in
    /// [`Policy::check_call_session`]). The session is not changed.
    ///
    /// # Errors
    ///
    /// [`RequestError`] as for [`Policy::offer`], and [`RequestError::Session`] when the
    /// session belongs to another policy or version or holds an undeclared label.
    pub fn offer_session<'t, I>(
        &self,
        request: &Request,
        intent: &Intent,
        session: &Session,
        tools: I,
    ) -> Result<Offer<'t>, RequestError>
    where
        I: IntoIterator<Item = &'t str>,
    {
        Ok(self.bind_session(request, intent, session)?.offer(tools))
    }

    /// [`Policy::bind`] within a [`Session`]: the bound request's decisions
    /// ([`BoundRequest::decide`], [`BoundRequest::offer`]) are those of
    /// [`Policy::offer_session`], for the session's labels at the time of binding.
    ///
    /// # Errors
    ///
    /// As [`Policy::offer_session`].
    pub fn bind_session<'a>(
        &'a self,
        request: &'a Request,
        intent: &Intent,
        session: &Session,
    ) -> Result<BoundRequest<'a>, RequestError> {
        let labels = session.mask_for(self).map_err(RequestError::Session)?;
        let mut bound = self.bind(request, intent)?;
        bound.labels = labels;
        Ok(bound)
    }

    /// The matrix cell rule for the bound intent(s) and an effect: the first intent whose cell
    /// is not `deny`, else the first intent's cell.
    pub(crate) fn cell_rule(&self, b: &BoundRequest<'_>, effect: u8) -> RuleId {
        let t = self.tables();
        let mode = &t.modes[b.mode];
        let Some(m) = mode.matrix else {
            return mode.rule_no_matrix;
        };
        let table = &t.matrices[m as usize];
        let ne = t.effects.len();
        let bit = 1u64 << effect.min(63);
        let intent = (0..t.intents.len().min(64))
            .filter(|i| b.intent_mask & (1u64 << i) != 0)
            .find(|&i| table.allow[i] & bit != 0)
            .or(b.intent)
            .unwrap_or(0);
        table
            .cell_rule
            .get(intent * ne + effect as usize)
            .copied()
            .unwrap_or(mode.rule_no_matrix)
    }

    /// Decides which of `tools` the model may see (DESIGN.md, "Semantics of offer").
    ///
    /// Takes the request, the query's intent (from [`Policy::classify`] or [`Intent::named`])
    /// and the tool names; returns one decision per name, in input order. An unknown name is an
    /// ordinary `deny` at stage `identity`. Allocates only the result. To decide many times
    /// for one request, [`Policy::bind`] once and use [`BoundRequest::offer`].
    ///
    /// # Errors
    ///
    /// [`RequestError`] when the request names a mode, tier or intent the policy does not
    /// declare.
    pub fn offer<'t, I>(
        &self,
        request: &Request,
        intent: &Intent,
        tools: I,
    ) -> Result<Offer<'t>, RequestError>
    where
        I: IntoIterator<Item = &'t str>,
    {
        Ok(self.bind(request, intent)?.offer(tools))
    }

    /// Decides one tool name (stages 1–7), as `offer` would. Binds the request each call; for
    /// repeated decisions use [`Policy::bind`] and [`BoundRequest::decide`].
    ///
    /// # Errors
    ///
    /// [`RequestError`] as for [`Policy::offer`].
    pub fn decide_tool(
        &self,
        request: &Request,
        intent: &Intent,
        tool: &str,
    ) -> Result<ToolDecision, RequestError> {
        Ok(self.bind(request, intent)?.decide(tool))
    }
}

impl<'a> BoundRequest<'a> {
    /// Stages 1–7 for one tool name: exactly [`Policy::decide_tool`]'s answer, without
    /// binding again. Allocates nothing.
    #[inline]
    pub fn decide(&self, tool: &str) -> ToolDecision {
        self.policy.decide_as(self, tool, None)
    }

    /// One decision per name of `tools`, in input order: exactly [`Policy::offer`]'s answer.
    /// Allocates only the result (one `Vec`, sized from the iterator's lower bound).
    pub fn offer<'t, I>(&self, tools: I) -> Offer<'t>
    where
        I: IntoIterator<Item = &'t str>,
    {
        let iter = tools.into_iter();
        let mut entries = Vec::with_capacity(iter.size_hint().0);
        for name in iter {
            entries.push((name, self.decide(name)));
        }
        Offer { entries }
    }
}
