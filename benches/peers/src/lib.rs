//! toolwarden next to two respected policy engines, on the same tool-gating decision: is a
//! tool visible to this principal in this mode for this intent under this connector
//! allowlist? The decision is stages 3–7 of toolwarden's `offer` over the generated policy
//! (`benches/support/gen.rs`): tenant required, role (closed under inclusion), permission
//! (closed under `implies`), the mode's `restrict` ceiling, the effect allowed by the intent's
//! row of the mode's matrix, and the connector allowlist of an `mcp__<server>__` name.
//! `confirm` counts as visible (the tool is offered; its call needs confirmation).
//!
//! - [`Cedar`]: a data-driven Cedar policy set ([`CEDAR_POLICIES`]: one `permit` and three
//!   `forbid`s); per-tool facts are `Tool` entity attributes, roles and permissions are
//!   entity hierarchies (Cedar computes their transitive closure when the entities load),
//!   modes and intents are entities holding the matrix rows and ceilings.
//! - [`Rego`]: the same as Rego ([`REGO_POLICY`]) for `regorus`, with the facts in `data`.
//!
//! Both peers get everything prepared outside the timed region (Cedar requests and contexts,
//! Rego inputs), which favours them.

use std::collections::BTreeSet;
use std::str::FromStr;

use serde_json::{json, Value};

#[path = "../../support/gen.rs"]
pub mod gen;

/// The repository root (for the generated policy's `include`).
pub const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// One request as the three engines see it (already resolved to one connector tier).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerRequest {
    /// One of [`gen::MODES`].
    pub mode: &'static str,
    /// One of [`gen::INTENTS`].
    pub intent: &'static str,
    /// Role names the principal holds (before closure).
    pub roles: Vec<&'static str>,
    /// Permission names the principal holds (before closure), e.g. `area3.manage`.
    pub permissions: Vec<String>,
    /// Whether the session has a tenant.
    pub tenant: bool,
    /// The session tier's connector allowlist; `None` = unrestricted.
    pub connectors: Option<Vec<&'static str>>,
}

impl PeerRequest {
    /// The request for toolwarden.
    pub fn to_toolwarden(&self) -> toolwarden::Request {
        let mut r = toolwarden::Request::new(self.mode)
            .roles(self.roles.iter().copied())
            .permissions(self.permissions.iter().cloned());
        if self.tenant {
            r = r.tenant("b-42");
        }
        if let Some(c) = &self.connectors {
            r = r.connectors("session", c.iter().copied());
        }
        r
    }

    /// The benches' request (`gen::request`).
    pub fn bench() -> PeerRequest {
        PeerRequest {
            mode: "supervised",
            intent: "write",
            roles: vec!["accountant"],
            permissions: ["area0.manage", "area1.manage", "area2.view", "area3.manage"]
                .map(str::to_string)
                .to_vec(),
            tenant: true,
            connectors: Some(vec!["github", "drive"]),
        }
    }
}

/// All 40 permission names.
pub fn all_permissions() -> Vec<String> {
    (0..8)
        .flat_map(|g| {
            ["manage", "add", "delete", "view", "export"].map(move |p| format!("area{g}.{p}"))
        })
        .collect()
}

/// The roles a role includes (one step down the hierarchy of `gen::policy_text`).
pub fn role_children(role: &str) -> &'static [&'static str] {
    match role {
        "owner" => &["admin"],
        "admin" => &["manager"],
        "manager" => &["accountant"],
        "accountant" => &["clerk"],
        "clerk" => &["viewer"],
        "auditor" | "support" => &["viewer"],
        _ => &[],
    }
}

/// The permissions a permission implies (one step).
pub fn perm_children(perm: &str) -> Vec<String> {
    match perm.strip_suffix(".manage") {
        Some(area) => ["add", "delete", "view", "export"]
            .iter()
            .map(|p| format!("{area}.{p}"))
            .collect(),
        None => Vec::new(),
    }
}

fn closure(start: &str, children: &dyn Fn(&str) -> Vec<String>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![start.to_string()];
    while let Some(x) = stack.pop() {
        if seen.insert(x.clone()) {
            stack.extend(children(&x));
        }
    }
    seen
}

fn mode_ceiling(mode: &str) -> Vec<&'static str> {
    if mode == "analyzer" {
        vec!["none"]
    } else {
        gen::EFFECTS.to_vec()
    }
}

fn intent_row(intent: &str) -> Vec<&'static str> {
    let i = gen::INTENTS.iter().position(|x| *x == intent).unwrap_or(4);
    (0..5)
        .filter(|&e| gen::MATRIX[i][e] == 1)
        .map(|e| gen::EFFECTS[e])
        .collect()
}

/// The Cedar policy set: one generic `permit`, three generic `forbid`s.
pub const CEDAR_POLICIES: &str = r#"
permit (principal, action == Action::"offer", resource is Tool)
when {
  principal in resource.permission &&
  (!resource.role_restricted || principal in resource.roles)
};

forbid (principal, action, resource is Tool)
when { resource.tenant_required && !context.has_tenant };

forbid (principal, action, resource is Tool)
unless {
  context.mode.ceiling.contains(resource.effect) &&
  context.intent.allows.contains(resource.effect)
};

forbid (principal, action, resource is Tool)
when {
  resource has server && context.restricted &&
  !context.connectors.contains(resource.server)
};
"#;

fn euid(ty: &str, id: &str) -> Value {
    json!({"__entity": {"type": ty, "id": id}})
}

/// The Cedar side: policies, entities (tools, roles, permissions, modes, intents, the
/// principal), and a request per tool.
pub struct Cedar {
    policies: cedar_policy::PolicySet,
    entities: cedar_policy::Entities,
    authorizer: cedar_policy::Authorizer,
    context: cedar_policy::Context,
    principal: cedar_policy::EntityUid,
    action: cedar_policy::EntityUid,
}

impl Cedar {
    /// Loads the policy set and the entities for `tools` and `request`'s principal.
    pub fn new(tools: &[gen::ToolSpec], request: &PeerRequest) -> Cedar {
        let policies =
            cedar_policy::PolicySet::from_str(CEDAR_POLICIES).expect("Cedar policies parse");
        let mut ents = Vec::new();
        for t in tools {
            let mut attrs = json!({
                "effect": gen::EFFECTS[t.effect],
                "permission": euid("Permission", &t.permission),
                "role_restricted": t.role.is_some(),
                "roles": t.role.iter().map(|r| euid("Role", r)).collect::<Vec<_>>(),
                "tenant_required": true,
            });
            if let Some(s) = t.server {
                attrs["server"] = json!(s);
            }
            ents.push(
                json!({"uid": {"type": "Tool", "id": t.name}, "attrs": attrs, "parents": []}),
            );
        }
        for r in gen::ROLES {
            let parents: Vec<Value> = role_children(r)
                .iter()
                .map(|c| json!({"type": "Role", "id": c}))
                .collect();
            ents.push(json!({"uid": {"type": "Role", "id": r}, "attrs": {}, "parents": parents}));
        }
        for p in all_permissions() {
            let parents: Vec<Value> = perm_children(&p)
                .iter()
                .map(|c| json!({"type": "Permission", "id": c}))
                .collect();
            ents.push(
                json!({"uid": {"type": "Permission", "id": p}, "attrs": {}, "parents": parents}),
            );
        }
        for m in gen::MODES {
            ents.push(json!({"uid": {"type": "Mode", "id": m}, "attrs": {"ceiling": mode_ceiling(m)}, "parents": []}));
        }
        for i in gen::INTENTS {
            ents.push(json!({"uid": {"type": "Intent", "id": i}, "attrs": {"allows": intent_row(i)}, "parents": []}));
        }
        let mut parents: Vec<Value> = request
            .roles
            .iter()
            .map(|r| json!({"type": "Role", "id": r}))
            .collect();
        parents.extend(
            request
                .permissions
                .iter()
                .map(|p| json!({"type": "Permission", "id": p})),
        );
        ents.push(json!({"uid": {"type": "User", "id": "u"}, "attrs": {}, "parents": parents}));
        let entities = cedar_policy::Entities::from_json_value(Value::Array(ents), None)
            .expect("Cedar entities load");
        let context = cedar_policy::Context::from_json_value(
            json!({
                "mode": euid("Mode", request.mode),
                "intent": euid("Intent", request.intent),
                "has_tenant": request.tenant,
                "restricted": request.connectors.is_some(),
                "connectors": request.connectors.clone().unwrap_or_default(),
            }),
            None,
        )
        .expect("Cedar context");
        Cedar {
            policies,
            entities,
            authorizer: cedar_policy::Authorizer::new(),
            context,
            principal: cedar_policy::EntityUid::from_str(r#"User::"u""#).expect("uid"),
            action: cedar_policy::EntityUid::from_str(r#"Action::"offer""#).expect("uid"),
        }
    }

    /// The Cedar request for one tool (built outside the timed region in the benches).
    pub fn request(&self, tool: &str) -> cedar_policy::Request {
        let resource = cedar_policy::EntityUid::from_type_name_and_id(
            cedar_policy::EntityTypeName::from_str("Tool").expect("type"),
            cedar_policy::EntityId::new(tool),
        );
        cedar_policy::Request::new(
            self.principal.clone(),
            self.action.clone(),
            resource,
            self.context.clone(),
            None,
        )
        .expect("Cedar request")
    }

    /// Whether Cedar allows the prepared request.
    pub fn decide(&self, request: &cedar_policy::Request) -> bool {
        self.authorizer
            .is_authorized(request, &self.policies, &self.entities)
            .decision()
            == cedar_policy::Decision::Allow
    }

    /// One decision per prepared request.
    pub fn offer(&self, requests: &[cedar_policy::Request]) -> Vec<bool> {
        requests.iter().map(|r| self.decide(r)).collect()
    }
}

/// The Rego policy (v1 syntax): `allow` for `input.tool`, `visible` for `input.tools`.
pub const REGO_POLICY: &str = r#"
package tw

default allow := false

user_roles contains r if {
  some g in input.roles
  some r in data.role_closure[g]
}

user_perms contains p if {
  some g in input.permissions
  some p in data.perm_closure[g]
}

role_ok(tool) if not tool.role
role_ok(tool) if user_roles[tool.role]

tenant_ok(tool) if not tool.tenant_required
tenant_ok(tool) if input.has_tenant

connector_ok(tool) if not tool.server
connector_ok(tool) if not input.restricted
connector_ok(tool) if tool.server in input.connectors

allowed(name) if {
  tool := data.tools[name]
  tenant_ok(tool)
  role_ok(tool)
  user_perms[tool.permission]
  tool.effect in data.modes[input.mode].ceiling
  tool.effect in data.intents[input.intent].allows
  connector_ok(tool)
}

allow if allowed(input.tool)

visible contains name if {
  some name in input.tools
  allowed(name)
}
"#;

/// The Rego side: a `regorus` engine with the policy and the facts loaded.
pub struct Rego {
    engine: regorus::Engine,
}

impl Rego {
    /// Loads the policy and the data for `tools`.
    pub fn new(tools: &[gen::ToolSpec]) -> Rego {
        let mut engine = regorus::Engine::new();
        engine
            .add_policy("tw.rego".to_string(), REGO_POLICY.to_string())
            .expect("Rego policy parses");
        let mut tool_facts = serde_json::Map::new();
        for t in tools {
            let mut f = json!({
                "effect": gen::EFFECTS[t.effect],
                "permission": t.permission,
                "tenant_required": true,
            });
            if let Some(r) = t.role {
                f["role"] = json!(r);
            }
            if let Some(s) = t.server {
                f["server"] = json!(s);
            }
            tool_facts.insert(t.name.clone(), f);
        }
        let role_closure: serde_json::Map<String, Value> = gen::ROLES
            .iter()
            .map(|r| {
                let c = closure(r, &|x| {
                    role_children(x).iter().map(|s| s.to_string()).collect()
                });
                (r.to_string(), json!(c))
            })
            .collect();
        let perm_closure: serde_json::Map<String, Value> = all_permissions()
            .into_iter()
            .map(|p| {
                let c = closure(&p, &|x| perm_children(x));
                (p, json!(c))
            })
            .collect();
        let modes: serde_json::Map<String, Value> = gen::MODES
            .iter()
            .map(|m| (m.to_string(), json!({"ceiling": mode_ceiling(m)})))
            .collect();
        let intents: serde_json::Map<String, Value> = gen::INTENTS
            .iter()
            .map(|i| (i.to_string(), json!({"allows": intent_row(i)})))
            .collect();
        let data = json!({
            "tools": tool_facts,
            "role_closure": role_closure,
            "perm_closure": perm_closure,
            "modes": modes,
            "intents": intents,
        });
        engine
            .add_data(regorus::Value::from_json_str(&data.to_string()).expect("data"))
            .expect("Rego data loads");
        Rego { engine }
    }

    /// The Rego input for `request` and one tool (or, with `tools`, a whole offer).
    pub fn input(request: &PeerRequest, tool: Option<&str>, tools: &[&str]) -> regorus::Value {
        let v = json!({
            "mode": request.mode,
            "intent": request.intent,
            "roles": request.roles,
            "permissions": request.permissions,
            "has_tenant": request.tenant,
            "restricted": request.connectors.is_some(),
            "connectors": request.connectors.clone().unwrap_or_default(),
            "tool": tool,
            "tools": tools,
        });
        regorus::Value::from_json_str(&v.to_string()).expect("input")
    }

    /// Whether `data.tw.allow` holds for a prepared input.
    pub fn decide(&mut self, input: &regorus::Value) -> bool {
        self.engine.set_input(input.clone());
        self.engine
            .eval_rule("data.tw.allow".to_string())
            .map(|v| v == regorus::Value::from(true))
            .unwrap_or(false)
    }

    /// The visible tool names (`data.tw.visible`) for a prepared offer input.
    pub fn offer(&mut self, input: &regorus::Value) -> BTreeSet<String> {
        self.engine.set_input(input.clone());
        let v = self
            .engine
            .eval_rule("data.tw.visible".to_string())
            .unwrap_or(regorus::Value::Undefined);
        match v.as_set() {
            Ok(set) => set
                .iter()
                .filter_map(|x| x.as_string().ok().map(|s| s.to_string()))
                .collect(),
            Err(_) => BTreeSet::new(),
        }
    }
}
