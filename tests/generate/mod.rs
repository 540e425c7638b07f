//! Strategies shared by the differential and property tests: random policies as warden text,
//! random requests (in the compiled and the reference form) and random call arguments;
//! `rules.rs` the same for policies with argument rules.

#![allow(dead_code)]

pub mod rules;

use proptest::prelude::*;
use proptest::sample::subsequence;
use serde_json::{json, Value};
use toolwarden::{Intent, Request};

use crate::reference::RefRequest;

pub const EFFECTS: &[&str] = &["none", "write", "delete", "export", "execute"];
pub const INTENTS: &[&str] = &["destructive", "execute", "export", "write", "read"];
pub const ROLES: &[&str] = &["admin", "accountant", "viewer", "auditor", "clerk"];
pub const PERMS: &[&str] = &["p.manage", "p.add", "p.delete", "p.view", "q.all", "q.one"];
pub const TIERS: &[&str] = &["task", "session", "project"];
pub const SERVERS: &[&str] = &["github", "slack", "drive"];
pub const TOOL_NAMES: &[&str] = &[
    "search",
    "create_x",
    "delete_x",
    "export_all",
    "run_job",
    "mcp__github__get_issue",
    "mcp__slack__delete_msg",
    "mcp__drive__get_file",
];
pub const PATTERNS: &[&str] = &[
    "mcp__*__get_*",
    "mcp__*__delete_*",
    "mcp__github__*",
    "*_x",
    "search*",
    "*",
    "mcp__**",
    "x*y*z",
];
/// Names queried on every request: declared ones, pattern-only ones, malformed connector names.
pub const QUERY_NAMES: &[&str] = &[
    "search",
    "create_x",
    "delete_x",
    "export_all",
    "run_job",
    "mcp__github__get_issue",
    "mcp__slack__delete_msg",
    "mcp__drive__get_file",
    "mcp__github__list",
    "mcp__slack__get_a__b",
    "mcp__drive__delete_",
    "mcp__nosuch__get_y",
    "mcp____get_z",
    "mcp__github",
    "mcp__",
    "searchable",
    "remove_x",
    "xaybz",
    "unheard_of",
];

/// Attributes of one tool, pattern or `defaults` block, as text.
pub fn attrs(
    effects: Vec<&'static str>,
    roles: Vec<&'static str>,
    perms: Vec<&'static str>,
    effect_required: bool,
) -> impl Strategy<Value = String> {
    let effect = if effect_required {
        proptest::sample::select(effects).prop_map(Some).boxed()
    } else {
        proptest::option::of(proptest::sample::select(effects)).boxed()
    };
    let nroles = roles.len();
    let nperms = perms.len();
    // subsequence needs a non-empty input; an empty role list is filtered out below
    let roles = if roles.is_empty() {
        vec!["admin"]
    } else {
        roles
    };
    (
        effect,
        proptest::option::weighted(0.3, subsequence(roles, 1..=nroles.max(1))),
        proptest::option::weighted(0.4, subsequence(perms, 1..=nperms.max(1))),
        proptest::bool::weighted(0.2),
        proptest::option::weighted(0.2, subsequence(vec!["a", "b", "new_id"], 1..=2)),
        proptest::bool::weighted(0.2),
        proptest::option::weighted(0.15, any::<bool>()),
    )
        .prop_map(
            move |(effect, roles, perms, tenant, requires, confirm, enabled)| {
                let mut s = Vec::new();
                if let Some(e) = effect {
                    s.push(format!("effect {e}"));
                }
                if let Some(r) = roles.filter(|_| nroles > 0) {
                    s.push(format!("roles {}", r.join(", ")));
                }
                if let Some(p) = perms.filter(|_| nperms > 0) {
                    let q: Vec<String> = p.iter().map(|p| format!("\"{p}\"")).collect();
                    s.push(format!("permissions {}", q.join(", ")));
                }
                if tenant {
                    s.push("tenant required".into());
                }
                if let Some(r) = requires {
                    s.push(format!("requires {}", r.join(", ")));
                }
                if confirm {
                    s.push("confirm always".into());
                }
                if let Some(e) = enabled {
                    s.push(format!("enabled {e}"));
                }
                s.join("  ")
            },
        )
}

pub fn cell() -> impl Strategy<Value = &'static str> {
    prop_oneof![3 => Just("allow"), 2 => Just("deny"), 1 => Just("confirm")]
}

/// A random policy as warden text.
pub fn policy_text() -> impl Strategy<Value = String> {
    (
        subsequence(EFFECTS.to_vec(), 1..=5).prop_shuffle(),
        // `read` and `write` always, so most requests name declared intents
        subsequence(INTENTS[..3].to_vec(), 0..=3)
            .prop_map(|mut v| {
                v.extend(["write", "read"]);
                v
            })
            .prop_shuffle(),
        any::<bool>(),                                 // combine union
        proptest::option::weighted(0.8, 0usize..3),    // roles: chain shape
        1usize..=3,                                    // modes
        prop_oneof![1 => Just(0usize), 1 => Just(1), 4 => Just(2)], // tiers (0 = none)
        any::<bool>(),                                 // prefix
        proptest::bool::weighted(0.25),                // unknown allow
        any::<u64>(),                                  // seed for the rest
    )
        .prop_flat_map(
            |(effects, intents, union, roles_shape, nmodes, ntiers, prefix, unknown_allow, _)| {
                let roles: Vec<&'static str> = match roles_shape {
                    None => vec![],
                    Some(0) => ROLES[..3].to_vec(),
                    Some(_) => ROLES.to_vec(),
                };
                let ncells = effects.len() * intents.len();
                let matrices = proptest::collection::vec(
                    proptest::collection::vec(cell(), ncells..=ncells),
                    1..=2,
                );
                let modes = proptest::collection::vec(
                    (
                        proptest::option::weighted(0.8, 0usize..2),
                        proptest::option::weighted(0.35, subsequence(effects.clone(), 1..=effects.len())),
                        proptest::option::weighted(0.4, subsequence(effects.clone(), 1..=effects.len())),
                    ),
                    nmodes..=nmodes,
                );
                let default_mode = proptest::option::weighted(0.7, 0..nmodes);
                let implies = proptest::collection::vec(
                    (0..PERMS.len(), subsequence(PERMS.to_vec(), 1..=3)),
                    0..4,
                );
                let tools = proptest::collection::vec(
                    (
                        proptest::sample::select(TOOL_NAMES.to_vec()),
                        attrs(effects.clone(), roles.clone(), PERMS.to_vec(), !unknown_allow),
                    ),
                    0..8,
                );
                let patterns = proptest::collection::vec(
                    (
                        proptest::sample::select(PATTERNS.to_vec()),
                        attrs(effects.clone(), roles.clone(), PERMS.to_vec(), !unknown_allow),
                    ),
                    0..4,
                );
                let defaults = if unknown_allow {
                    attrs(effects.clone(), roles.clone(), PERMS.to_vec(), true)
                        .prop_map(Some)
                        .boxed()
                } else {
                    proptest::option::weighted(0.2, attrs(effects.clone(), roles.clone(), PERMS.to_vec(), false)).boxed()
                };
                (
                    Just((effects, intents, union, roles_shape, roles, ntiers, prefix, unknown_allow)),
                    matrices,
                    modes,
                    default_mode,
                    implies,
                    tools,
                    patterns,
                    defaults,
                    (
                        proptest::bool::weighted(0.7),
                        proptest::bool::weighted(0.6),
                        proptest::option::weighted(0.5, 0u64..3),
                        0usize..5, // fallback: an index into the intents, modulo their number
                    ),
                )
            },
        )
        .prop_map(
            |(
                (effects, intents, union, roles_shape, roles, ntiers, prefix, unknown_allow),
                matrices,
                modes,
                default_mode,
                implies,
                tools,
                patterns,
                defaults,
                (confirm_fields, tenant_arg, limit, fallback),
            )| {
                let mut s = String::from("policy \"gen\" version 3\n");
                s += &format!("effects {}\n", effects.join(", "));
                s += &format!("intents {}\n", intents.join(" > "));
                s += &format!("fallback {}\n", intents[fallback % intents.len()]);
                if union {
                    s += "combine union\n";
                }
                for (mi, cells) in matrices.iter().enumerate() {
                    s += &format!("matrix m{mi} {{\n    {}\n", effects.join(" "));
                    for (ii, intent) in intents.iter().enumerate() {
                        let row: Vec<&str> =
                            (0..effects.len()).map(|e| cells[ii * effects.len() + e]).collect();
                        s += &format!("  {intent} {}\n", row.join(" "));
                    }
                    s += "}\n";
                }
                for (i, (matrix, restrict, confirm)) in modes.iter().enumerate() {
                    s += &format!("mode mode{i} {{");
                    if let Some(m) = matrix {
                        s += &format!(" matrix m{}", m % matrices.len());
                    }
                    if let Some(r) = restrict {
                        s += &format!(" restrict {}", r.join(", "));
                    }
                    if let Some(c) = confirm {
                        s += &format!(" confirm {}", c.join(", "));
                    }
                    s += " }\n";
                }
                if let Some(d) = default_mode {
                    s += &format!("default mode mode{d}\n");
                }
                match roles_shape {
                    Some(0) => s += "roles { admin > accountant > viewer }\n",
                    Some(1) => s += "roles { admin > accountant > viewer, auditor > viewer, clerk }\n",
                    Some(_) => s += "roles { admin > auditor, accountant > clerk > viewer, admin > accountant }\n",
                    None => {}
                }
                let _ = roles;
                // Every permission is declared; implications only point to later permissions,
                // so they never cycle.
                for (from, perm) in PERMS.iter().enumerate() {
                    let tos: Vec<String> = implies
                        .iter()
                        .filter(|(f, _)| *f == from)
                        .flat_map(|(_, tos)| tos.iter().copied())
                        .filter(|t| PERMS.iter().position(|p| p == t).unwrap_or(0) > from)
                        .map(|p| format!("\"{p}\""))
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    if tos.is_empty() {
                        s += &format!("permission \"{perm}\"\n");
                    } else {
                        s += &format!("permission \"{perm}\" implies {}\n", tos.join(", "));
                    }
                }
                if ntiers > 0 {
                    s += &format!("tiers {}\n", TIERS[..=ntiers].join(" > "));
                }
                if prefix {
                    s += "connectors prefix \"mcp__\"\n";
                }
                s += if unknown_allow { "unknown allow\n" } else { "unknown deny\n" };
                if let Some(d) = defaults {
                    s += &format!("defaults {{ {d} }}\n");
                }
                if confirm_fields {
                    s += "confirm fields \"confirmed\", \"confirmation\"\n";
                }
                if tenant_arg {
                    s += "tenant arg \"business_id\"\n";
                }
                if let Some(l) = limit {
                    s += &format!("limit transactional {l} per turn\n");
                }
                let mut seen = std::collections::BTreeSet::new();
                for (name, a) in tools {
                    if seen.insert(name) {
                        s += &format!("tool {name} {{ {a} }}\n");
                    }
                }
                let mut seen = std::collections::BTreeSet::new();
                for (glob, a) in patterns {
                    if seen.insert(glob) {
                        s += &format!("match \"{glob}\" {{ {a} }}\n");
                    }
                }
                s
            },
        )
}

/// A random request, in both evaluators' forms.
#[derive(Clone, Debug)]
pub struct Req {
    pub mode: Option<String>,
    pub roles: Vec<&'static str>,
    pub perms: Vec<&'static str>,
    pub tenant: Option<&'static str>,
    pub connectors: Vec<(&'static str, Vec<&'static str>)>,
    pub forced: Vec<&'static str>,
    pub intents: Vec<&'static str>,
}

pub fn request() -> impl Strategy<Value = Req> {
    let mode = prop_oneof![
        8 => Just(Some("mode0".to_string())),
        4 => (1usize..3).prop_map(|i| Some(format!("mode{i}"))),
        3 => Just(None),
        1 => Just(Some("ghost_mode".to_string())),
    ];
    let mut roles = ROLES.to_vec();
    roles.push("ghost");
    let mut perms = PERMS.to_vec();
    perms.push("p.ghost");
    let tier = (
        prop_oneof![12 => proptest::sample::select(TIERS.to_vec()), 1 => Just("galaxy")],
        subsequence(SERVERS.to_vec(), 0..=3),
    );
    let mut intents = INTENTS.to_vec();
    intents.push("ghost_intent");
    let intent = prop_oneof![
        8 => proptest::sample::select(vec!["read", "write"]).prop_map(|i| vec![i]),
        4 => proptest::sample::select(INTENTS.to_vec()).prop_map(|i| vec![i]),
        3 => subsequence(INTENTS.to_vec(), 2..=3),
        1 => proptest::sample::select(intents).prop_map(|i| vec![i]),
    ];
    (
        mode,
        subsequence(roles, 0..=3),
        subsequence(perms, 0..=4),
        proptest::option::of(Just("b-42")),
        proptest::collection::vec(tier, 0..3),
        subsequence(QUERY_NAMES.to_vec(), 0..=4),
        intent,
    )
        .prop_map(
            |(mode, roles, perms, tenant, connectors, forced, intents)| Req {
                mode,
                roles,
                perms,
                tenant,
                connectors,
                forced,
                intents,
            },
        )
}

impl Req {
    pub fn compiled(&self) -> (Request, Intent) {
        let mut r = match &self.mode {
            Some(m) => Request::new(m.clone()),
            None => Request::default_mode(),
        };
        r = r
            .roles(self.roles.iter().copied())
            .permissions(self.perms.iter().copied())
            .forced(self.forced.iter().copied());
        if let Some(t) = self.tenant {
            r = r.tenant(t);
        }
        for (tier, servers) in &self.connectors {
            r = r.connectors(*tier, servers.iter().copied());
        }
        let mut intent = Intent::named(self.intents[0]);
        intent.intents = self.intents.iter().map(|&s| s.into()).collect();
        (r, intent)
    }

    pub fn reference(&self) -> RefRequest {
        // The compiled `Request::connectors` replaces a tier set twice; keep the last list.
        let mut connectors: Vec<(String, Vec<String>)> = Vec::new();
        for (tier, servers) in &self.connectors {
            let servers: Vec<String> = servers.iter().map(|s| s.to_string()).collect();
            match connectors.iter_mut().find(|(t, _)| t == tier) {
                Some(slot) => slot.1 = servers,
                None => connectors.push((tier.to_string(), servers)),
            }
        }
        RefRequest {
            mode: self.mode.clone(),
            roles: self.roles.iter().map(|s| s.to_string()).collect(),
            permissions: self.perms.iter().map(|s| s.to_string()).collect(),
            tenant: self.tenant.map(str::to_string),
            connectors,
            forced: self.forced.iter().map(|s| s.to_string()).collect(),
            intents: self.intents.iter().map(|s| s.to_string()).collect(),
            query: None,
            contexts: Vec::new(),
        }
    }
}

/// null, confirmation literal true or the string "true", or not an object at all.
pub fn args() -> impl Strategy<Value = Value> {
    (
        proptest::option::of(prop_oneof![
            Just(json!("b-42")),
            Just(json!("b-7")),
            Just(Value::Null),
            Just(json!(42))
        ]),
        proptest::option::of(prop_oneof![Just(json!(1)), Just(Value::Null)]),
        proptest::option::of(Just(json!("id-9"))),
        proptest::option::of(Just(json!("x"))),
        proptest::option::of(prop_oneof![
            Just(json!(true)),
            Just(json!("true")),
            Just(json!(false))
        ]),
        proptest::bool::weighted(0.05),
    )
        .prop_map(|(tenant, a, new_id, b, confirmed, not_object)| {
            if not_object {
                return json!(["not", "an", "object"]);
            }
            let mut m = serde_json::Map::new();
            if let Some(t) = tenant {
                m.insert("business_id".into(), t);
            }
            if let Some(a) = a {
                m.insert("a".into(), a);
            }
            if let Some(n) = new_id {
                m.insert("new_id".into(), n);
            }
            if let Some(b) = b {
                m.insert("b".into(), b);
            }
            if let Some(c) = confirmed {
                m.insert("confirmed".into(), c);
            }
            Value::Object(m)
        })
}
