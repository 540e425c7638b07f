//! The evaluator: `offer` (schema visibility, stages 1–7) and `check_call` (the execution
//! guard, stages 1–11) over a compiled policy's tables.
//!
//! A request is bound to the policy once per call ([`Policy::offer`] binds, then decides each
//! tool with a few bit operations and one hash lookup, allocating only the result).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::args::json_kind;
use crate::classify::Intent;
use crate::compile::{BitSet, ToolRow, NO_SERVER};
use crate::decision::{
    Decision, Offer, PendingCall, RuleId, Stage, ToolDecision, ToolMatch, Turn, Verdict,
};
use crate::glob::glob_match;
use crate::limits;
use crate::policy::Policy;

/// Who is asking, in which mode: the inputs of a decision besides the tool and the intent.
///
/// Built with chained setters:
///
/// ```
/// use toolwarden::Request;
/// let request = Request::new("supervised")
///     .roles(["accountant"])
///     .permissions(["invoices.view"])
///     .tenant("b-42")
///     .connectors("session", ["github"])
///     .forced(["delete_invoice"]);
/// assert_eq!(request.mode(), Some("supervised"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    permissions: Vec<String>,
    #[serde(default)]
    tenant: Option<String>,
    /// `(tier, servers)` for each tier the request sets; a tier set to `[]` allows zero
    /// connectors.
    #[serde(default)]
    connectors: Vec<(String, Vec<String>)>,
    #[serde(default)]
    forced: Vec<String>,
}

impl Request {
    /// A request in execution mode `mode`.
    pub fn new(mode: impl Into<String>) -> Request {
        Request {
            mode: Some(mode.into()),
            ..Request::default()
        }
    }

    /// A request in the policy's `default mode`.
    pub fn default_mode() -> Request {
        Request::default()
    }

    /// Sets the principal's roles (unknown role names are ignored).
    pub fn roles<I, S>(mut self, roles: I) -> Request
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.roles = roles.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the principal's permissions (unknown names are ignored).
    pub fn permissions<I, S>(mut self, permissions: I) -> Request
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.permissions = permissions.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the session's tenant (seed 001's `business_id`).
    pub fn tenant(mut self, tenant: impl Into<String>) -> Request {
        self.tenant = Some(tenant.into());
        self
    }

    /// Sets the connector allowlist of one tier (seed 000). An empty list means "zero
    /// connectors", never "unrestricted"; a tier left unset declares nothing.
    pub fn connectors<I, S>(mut self, tier: impl Into<String>, servers: I) -> Request
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let tier = tier.into();
        let servers: Vec<String> = servers.into_iter().map(Into::into).collect();
        match self.connectors.iter_mut().find(|(t, _)| *t == tier) {
            Some(slot) => slot.1 = servers,
            None => self.connectors.push((tier, servers)),
        }
        self
    }

    /// Sets the tool names exempt from the intent stage (seed 001's `force_tool_names`, e.g. a
    /// confirmation in flight). Forced names still pass stages 1–6.
    pub fn forced<I, S>(mut self, names: I) -> Request
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.forced = names.into_iter().map(Into::into).collect();
        self
    }

    /// The mode, or `None` for the policy's default mode.
    pub fn mode(&self) -> Option<&str> {
        self.mode.as_deref()
    }

    /// The roles as given.
    pub fn role_names(&self) -> &[String] {
        &self.roles
    }

    /// The permissions as given.
    pub fn permission_names(&self) -> &[String] {
        &self.permissions
    }

    /// The tenant, when set.
    pub fn tenant_id(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The tiers set, with their servers.
    pub fn connector_tiers(&self) -> &[(String, Vec<String>)] {
        &self.connectors
    }

    /// The forced names.
    pub fn forced_names(&self) -> &[String] {
        &self.forced
    }
}

/// A request that does not fit the policy. Unknown roles and permissions are not errors (they
/// grant nothing); an unknown mode, tier or intent is, since no decision could be right.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The mode is not declared.
    #[error("unknown mode `{mode}`; the policy declares {known}")]
    UnknownMode {
        /// The mode asked for.
        mode: String,
        /// The declared modes, as a readable list.
        known: String,
    },
    /// No mode was given and the policy has no `default mode`.
    #[error("no mode given and the policy has no `default mode`; modes are {known}")]
    NoMode {
        /// The declared modes, as a readable list.
        known: String,
    },
    /// A connector tier is not declared in `tiers`.
    #[error("unknown connector tier `{tier}`; the policy declares {known}")]
    UnknownTier {
        /// The tier named.
        tier: String,
        /// The declared tiers, as a readable list.
        known: String,
    },
    /// The intent is not declared.
    #[error("unknown intent `{intent}`; the policy declares {known}")]
    UnknownIntent {
        /// The intent named.
        intent: String,
        /// The declared intents, as a readable list.
        known: String,
    },
}

fn known(names: &[Box<str>]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A request bound to one policy: mode, roles, permissions, connector allowlist and intent
/// resolved to indexes and closed bit sets, once. Deciding a tool name then costs one hash
/// lookup and a few bit operations, and allocates nothing.
///
/// Made by [`Policy::bind`]; borrows the policy and the request. Bind once per turn (or per
/// request), then call [`BoundRequest::decide`] or [`BoundRequest::offer`] as often as needed:
/// the answers are exactly those of [`Policy::decide_tool`] and [`Policy::offer`].
///
/// ```
/// use toolwarden::{Decision, Intent, Policy, Request};
/// let policy = Policy::parse(
///     "policy \"p\"\neffects none, write\nintents write > read\nfallback read\n\
///      matrix m {\n none write\n read allow deny\n write allow allow\n}\n\
///      mode ask { matrix m }\nunknown deny\n\
///      tool list_invoices { effect none }\ntool add_invoice { effect write }\n",
///     "p.warden",
/// ).unwrap();
/// let request = Request::new("ask");
/// let bound = policy.bind(&request, &Intent::named("read")).unwrap();
/// assert_eq!(bound.decide("list_invoices").decision, Decision::Allow);
/// assert_eq!(bound.decide("add_invoice").decision, Decision::Deny);
/// ```
#[derive(Clone, Debug)]
pub struct BoundRequest<'a> {
    pub(crate) policy: &'a Policy,
    pub(crate) mode: usize,
    pub(crate) roles: BitSet,
    pub(crate) perms: BitSet,
    pub(crate) tenant: Option<&'a str>,
    /// The deciding tier and its servers; `None` = unrestricted.
    pub(crate) allowlist: Option<(usize, &'a [String])>,
    /// The allowlist's servers as indexes into `Tables::servers` (declared tools' servers).
    pub(crate) allowed_servers: BitSet,
    pub(crate) forced: &'a [String],
    /// Effects the intent row(s) offer (all effects when the mode has no matrix).
    pub(crate) allow_mask: u64,
    /// Effects whose intent cell is `confirm`.
    pub(crate) confirm_mask: u64,
    /// The intent index deciding the cell rule (the first intent).
    pub(crate) intent: Option<usize>,
    pub(crate) intent_mask: u64,
}

impl Policy {
    /// Resolves a request and an intent against this policy, once, for many decisions.
    ///
    /// Allocates nothing when the policy has at most 64 roles, 64 permissions and 64 connector
    /// servers (wider sets take one small allocation each).
    ///
    /// # Errors
    ///
    /// [`RequestError`] when the request names a mode, tier or intent the policy does not
    /// declare, or gives no mode and the policy has no `default mode`.
    pub fn bind<'a>(
        &'a self,
        request: &'a Request,
        intent: &Intent,
    ) -> Result<BoundRequest<'a>, RequestError> {
        let t = self.tables();
        let mode = match request.mode.as_deref() {
            Some(m) => t
                .modes
                .iter()
                .position(|row| &*row.name == m)
                .ok_or_else(|| RequestError::UnknownMode {
                    mode: m.to_string(),
                    known: known(&t.modes.iter().map(|m| m.name.clone()).collect::<Vec<_>>()),
                })?,
            None => t
                .default_mode
                .map(usize::from)
                .ok_or_else(|| RequestError::NoMode {
                    known: known(&t.modes.iter().map(|m| m.name.clone()).collect::<Vec<_>>()),
                })?,
        };
        let mut roles = BitSet::new(t.roles.len());
        for r in &request.roles {
            if let Some(&i) = t.role_index.get(r.as_str()) {
                roles.union_with(&t.role_closure[i as usize]);
            }
        }
        let mut perms = BitSet::new(t.permissions.len());
        for p in &request.permissions {
            if let Some(&i) = t.perm_index.get(p.as_str()) {
                perms.union_with(&t.perm_closure[i as usize]);
            }
        }
        for (tier, _) in &request.connectors {
            if !t.tiers.iter().any(|x| **x == **tier) {
                return Err(RequestError::UnknownTier {
                    tier: tier.clone(),
                    known: known(&t.tiers),
                });
            }
        }
        // Seed 000: the first tier, in precedence order, that the request sets decides.
        let allowlist = t.tiers.iter().enumerate().find_map(|(i, tier)| {
            request
                .connectors
                .iter()
                .find(|(name, _)| **name == **tier)
                .map(|(_, servers)| (i, servers.as_slice()))
        });
        let mut allowed_servers = BitSet::new(t.servers.len());
        if let Some((_, servers)) = allowlist {
            for s in servers {
                if let Some(i) = t.servers.iter().position(|x| **x == **s) {
                    allowed_servers.insert(i);
                }
            }
        }
        let row = &t.modes[mode];
        let mut intent_mask = 0u64;
        let mut first_intent = None;
        for name in &intent.intents {
            // A policy without intents classifies every query as `""` (no intent): nothing to
            // resolve, and its modes have no matrix to gate with.
            if name.is_empty() && t.intents.is_empty() {
                continue;
            }
            match t.intents.iter().position(|x| **x == **name) {
                Some(i) => {
                    intent_mask |= 1u64 << (i as u32).min(63);
                    first_intent.get_or_insert(i);
                }
                None => {
                    return Err(RequestError::UnknownIntent {
                        intent: name.to_string(),
                        known: known(&t.intents),
                    })
                }
            }
        }
        let (allow_mask, confirm_mask) = match row.matrix {
            None => (u64::MAX, 0),
            Some(m) => {
                let table = &t.matrices[m as usize];
                let mut allow = 0u64;
                let mut confirm = 0u64;
                for i in 0..t.intents.len().min(64) {
                    if intent_mask & (1u64 << i) != 0 {
                        allow |= table.allow[i];
                        confirm |= table.confirm[i];
                    }
                }
                (allow, confirm)
            }
        };
        Ok(BoundRequest {
            policy: self,
            mode,
            roles,
            perms,
            // An empty tenant is no tenant.
            tenant: request.tenant.as_deref().filter(|t| !t.is_empty()),
            allowlist,
            allowed_servers,
            forced: &request.forced,
            allow_mask,
            confirm_mask,
            intent: first_intent,
            intent_mask,
        })
    }

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
        let confirm_rule = if cell_denies || b.confirm_mask & bit != 0 {
            Some(self.cell_rule(b, row_effect))
        } else if mode.confirm & bit != 0 {
            Some(mode.rule_confirm)
        } else if row.confirm_always {
            Some(row.rule_confirm)
        } else {
            None
        };
        match confirm_rule {
            Some(rule) => ToolDecision {
                decision: Decision::Confirm,
                stage: Some(Stage::Confirmation),
                rule,
                matched,
            },
            None => ToolDecision {
                decision: Decision::Allow,
                stage: None,
                rule: row.rule_decl,
                matched,
            },
        }
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
        self.check_call_inner(request, intent, turn, tool, args, pending, None, true)
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
        self.check_call_inner(
            request,
            intent,
            turn,
            tool,
            args,
            pending,
            effect_override,
            false,
        )
    }

    /// The guard itself. `strict`: a confirmation is trusted only against `pending`.
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
        // 10. confirmation
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
        let confirmed = any_true && !any_other;
        verdict.confirmation_received = confirmed;
        if d.decision == Decision::Confirm {
            let digest = self.call_digest(tool, &exec_args);
            if !confirmed {
                let fields = t
                    .confirm_fields
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(" or ");
                verdict.reason = if fields.is_empty() {
                    format!("`{tool}` needs confirmation ({}) and the policy declares no `confirm fields`", self.reason_as(tool, &d, request, effect_override))
                } else {
                    format!(
                        "`{tool}` needs confirmation: ask the user, then repeat the call with {fields} set to true ({})",
                        self.reason_as(tool, &d, request, effect_override)
                    )
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
        // 11. turn limit
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

    /// Hex SHA-256 over the policy name and version, the tool name and the canonical JSON of
    /// the arguments (object keys sorted at every depth, whatever order the map keeps, so the
    /// digest does not depend on serde_json's `preserve_order` feature).
    pub(crate) fn call_digest(&self, tool: &str, args: &Map<String, Value>) -> String {
        let mut text = String::new();
        canonical_json(
            &serde_json::json!({
                "policy": self.name(),
                "version": self.version(),
                "tool": tool,
            }),
            &mut text,
        );
        text.push('\n');
        canonical_object(args, &mut text);
        let hash = Sha256::digest(text.as_bytes());
        hash.iter().map(|b| format!("{b:02x}")).collect()
    }

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

    /// The policy this request is bound to.
    pub fn policy(&self) -> &'a Policy {
        self.policy
    }

    /// The mode the request resolved to (its own, or the policy's `default mode`).
    pub fn mode(&self) -> &'a str {
        &self.policy.tables().modes[self.mode].name
    }
}

/// Appends the canonical JSON of `v`: no whitespace, object keys in byte order.
fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(o) => canonical_object(o, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn canonical_object(o: &Map<String, Value>, out: &mut String) {
    let mut keys: Vec<&String> = o.keys().collect();
    keys.sort();
    out.push('{');
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        if let Some(v) = o.get(k) {
            canonical_json(v, out);
        }
    }
    out.push('}');
}

/// The canonical JSON text of `v`: no white space, object keys sorted by byte order at every
/// depth. Two values that are equal as JSON have the same canonical text, whatever the order
/// their keys came in; digests of calls are taken over it.
pub fn canonical_json_text(v: &Value) -> String {
    let mut out = String::new();
    canonical_json(v, &mut out);
    out
}

/// Nesting depth of a JSON value (a scalar is 0), computed without recursion.
fn json_depth(v: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        if d > limits::MAX_ARGS_DEPTH {
            return d;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}
