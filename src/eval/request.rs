//! Requests and binding: [`Request`] (who asks, in which mode), [`RequestError`] (a request the
//! policy cannot answer) and [`BoundRequest`], a request resolved against one policy's tables
//! once (mode, role and permission closures, connector allowlist, intent masks) so that each
//! tool decision after it is a few bit operations.

use serde::{Deserialize, Serialize};

use crate::classify::Intent;
use crate::compile::BitSet;
use crate::condition::ContextSet;

use super::Policy;

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
    pub(super) mode: Option<String>,
    #[serde(default)]
    pub(super) roles: Vec<String>,
    #[serde(default)]
    pub(super) permissions: Vec<String>,
    #[serde(default)]
    pub(super) tenant: Option<String>,
    /// `(tier, servers)` for each tier the request sets; a tier set to `[]` allows zero
    /// connectors.
    #[serde(default)]
    pub(super) connectors: Vec<(String, Vec<String>)>,
    #[serde(default)]
    pub(super) forced: Vec<String>,
    /// `(name, set)` for each `context` set the request supplies, in the order given (a name
    /// given twice: the last one counts).
    #[serde(skip)]
    pub(super) contexts: Vec<(String, ContextSet)>,
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

    /// Supplies the `context` set `name` (`context.NAME` in argument rules) with `values`; an
    /// empty list is the empty set. A set the policy declares but the request does not supply
    /// makes every rule that reads it fire (fail closed). Naming a set the policy does not
    /// declare makes `check_call` return [`RequestError::UnknownContext`].
    ///
    /// ```
    /// use toolwarden::Request;
    /// let request = Request::new("supervised").context("contacts", ["alice", "bob"]);
    /// assert_eq!(request.context_names().collect::<Vec<_>>(), ["contacts"]);
    /// ```
    pub fn context<I, S>(mut self, name: impl Into<String>, values: I) -> Request
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let name = name.into();
        self.contexts.retain(|(n, _)| *n != name);
        self.contexts.push((name, ContextSet::new(values)));
        self
    }

    /// The names of the `context` sets the request supplies, in the order given.
    pub fn context_names(&self) -> impl Iterator<Item = &str> {
        self.contexts.iter().map(|(n, _)| n.as_str())
    }

    /// The `context` set `name`, when the request supplies it.
    pub fn context_set(&self, name: &str) -> Option<&ContextSet> {
        self.contexts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
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
    /// A `context` set the request supplies is not declared by the policy.
    #[error("unknown context set `{name}`; the policy declares {known}")]
    UnknownContext {
        /// The set named.
        name: String,
        /// The declared `context` sets, as a readable list.
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
    /// The [`super::Session`] cannot be used with this policy.
    #[error("{0}")]
    Session(super::SessionError),
}

pub(super) fn known(names: &[Box<str>]) -> String {
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
    /// The session's flow labels, as a mask (0 without a session): the `after` blocks that
    /// apply to `offer`.
    pub(crate) labels: u8,
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
            labels: 0,
        })
    }
}

impl<'a> BoundRequest<'a> {
    /// The policy this request is bound to.
    pub fn policy(&self) -> &'a Policy {
        self.policy
    }

    /// The mode the request resolved to (its own, or the policy's `default mode`).
    pub fn mode(&self) -> &'a str {
        &self.policy.tables().modes[self.mode].name
    }
}
