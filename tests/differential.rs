//! Differential test: the compiled evaluator against the reference interpreter in
//! `tests/reference/`, on random policies written as warden text and random requests.
//!
//! Every generated policy goes through `Policy::parse`; one that loads is run against a batch
//! of requests, and for every request every tool name's `offer` decision and stage, and a
//! `check_call` decision and stage, must agree. The case counts are printed by
//! `differential_case_count` (run with `--nocapture`).

mod reference;

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::sample::subsequence;
use reference::{Outcome, RefPolicy, RefRequest};
use serde_json::{json, Value};
use toolwarden::{Intent, Policy, Request, RequestError, Turn};

const EFFECTS: &[&str] = &["none", "write", "delete", "export", "execute"];
const INTENTS: &[&str] = &["destructive", "execute", "export", "write", "read"];
const ROLES: &[&str] = &["admin", "accountant", "viewer", "auditor", "clerk"];
const PERMS: &[&str] = &["p.manage", "p.add", "p.delete", "p.view", "q.all", "q.one"];
const TIERS: &[&str] = &["task", "session", "project"];
const SERVERS: &[&str] = &["github", "slack", "drive"];
const TOOL_NAMES: &[&str] = &[
    "search",
    "create_x",
    "delete_x",
    "export_all",
    "run_job",
    "mcp__github__get_issue",
    "mcp__slack__delete_msg",
    "mcp__drive__get_file",
];
const PATTERNS: &[&str] = &[
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
const QUERY_NAMES: &[&str] = &[
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
fn attrs(
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

fn cell() -> impl Strategy<Value = &'static str> {
    prop_oneof![3 => Just("allow"), 2 => Just("deny"), 1 => Just("confirm")]
}

/// A random policy as warden text.
fn policy_text() -> impl Strategy<Value = String> {
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
struct Req {
    mode: Option<String>,
    roles: Vec<&'static str>,
    perms: Vec<&'static str>,
    tenant: Option<&'static str>,
    connectors: Vec<(&'static str, Vec<&'static str>)>,
    forced: Vec<&'static str>,
    intents: Vec<&'static str>,
}

fn request() -> impl Strategy<Value = Req> {
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
    fn compiled(&self) -> (Request, Intent) {
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
        intent.intents = self.intents.iter().map(|s| s.to_string()).collect();
        (r, intent)
    }

    fn reference(&self) -> RefRequest {
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
        }
    }
}

fn error_kind(e: &RequestError) -> &'static str {
    match e {
        RequestError::UnknownMode { .. } => "unknown_mode",
        RequestError::NoMode { .. } => "no_mode",
        RequestError::UnknownTier { .. } => "unknown_tier",
        RequestError::UnknownIntent { .. } => "unknown_intent",
    }
}

/// Call arguments: tenant argument (own, other, null, number), required names present or
/// null, confirmation literal true or the string "true", or not an object at all.
fn args() -> impl Strategy<Value = Value> {
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

static POLICIES: AtomicUsize = AtomicUsize::new(0);
static LOADED: AtomicUsize = AtomicUsize::new(0);
static DECISIONS: AtomicUsize = AtomicUsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);
/// How often each outcome (`decision/stage`) came up, so the run proves it reached every stage.
static SEEN: std::sync::Mutex<std::collections::BTreeMap<String, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

fn seen(o: &Outcome) {
    let key = match o {
        Ok((d, s)) => format!("{d}/{}", s.unwrap_or("-")),
        Err(e) => format!("error/{e}"),
    };
    if let Ok(mut m) = SEEN.lock() {
        *m.entry(key).or_default() += 1;
    }
}

fn compiled_outcome(d: Result<toolwarden::ToolDecision, RequestError>) -> Outcome {
    match d {
        Ok(d) => Ok((d.decision.as_str(), d.stage.map(|s| s.as_str()))),
        Err(e) => Err(error_kind(&e)),
    }
}

/// Policies generated per run; each is checked against 12 requests × 19 names plus 12 calls.
const POLICY_CASES: u32 = 1500;

#[test]
fn compiled_evaluator_agrees_with_reference() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: POLICY_CASES,
        max_shrink_iters: 4000,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        policy_text(),
        proptest::collection::vec((request(), args(), 0u64..3, 0..QUERY_NAMES.len()), 12),
    );
    let result = runner.run(&strategy, |(text, requests)| {
        POLICIES.fetch_add(1, Ordering::Relaxed);
        let policy = match Policy::parse(&text, "gen.warden") {
            Ok(p) => p,
            Err(_) => return Ok(()),
        };
        LOADED.fetch_add(1, Ordering::Relaxed);
        let reference = RefPolicy::from_text(&text);
        for (req, args, used, call_ix) in &requests {
            let (request, intent) = req.compiled();
            let rr = req.reference();
            let offer = policy.offer(&request, &intent, QUERY_NAMES.iter().copied());
            for (i, name) in QUERY_NAMES.iter().enumerate() {
                let got = compiled_outcome(
                    offer
                        .as_ref()
                        .map(|o| o.entries()[i].1)
                        .map_err(Clone::clone),
                );
                let want = reference.offer(&rr, name);
                DECISIONS.fetch_add(1, Ordering::Relaxed);
                seen(&want);
                prop_assert_eq!(
                    got,
                    want,
                    "offer `{}`\nrequest {:?}\npolicy:\n{}",
                    name,
                    req,
                    text
                );
            }
            let name = QUERY_NAMES[*call_ix];
            let mut turn = Turn {
                transactional_calls: *used as u32,
            };
            let got = policy
                .check_call(&request, &intent, &mut turn, name, args)
                .map(|v| (v.decision.as_str(), v.stage.map(|s| s.as_str())))
                .map_err(|e| error_kind(&e));
            let mut ref_turn = *used;
            let want = reference.check_call(&rr, &mut ref_turn, name, args);
            CALLS.fetch_add(1, Ordering::Relaxed);
            seen(&want);
            prop_assert_eq!(
                got,
                want,
                "check_call `{}` args {}\nrequest {:?}\npolicy:\n{}",
                name,
                args,
                req,
                text
            );
            prop_assert_eq!(
                u64::from(turn.transactional_calls),
                ref_turn,
                "turn count after `{}`",
                name
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (generated, loaded) = (
        POLICIES.load(Ordering::Relaxed),
        LOADED.load(Ordering::Relaxed),
    );
    eprintln!(
        "differential: {generated} policies generated, {loaded} loaded, {} offer decisions and {} calls compared",
        DECISIONS.load(Ordering::Relaxed),
        CALLS.load(Ordering::Relaxed)
    );
    // Most generated policies must load, or the comparison would be comparing nothing.
    assert!(
        loaded * 100 >= generated * 90,
        "only {loaded}/{generated} generated policies load"
    );
    // Every outcome must have come up, or the generator misses a stage.
    let seen = SEEN.lock().map(|m| m.clone()).unwrap_or_default();
    eprintln!("outcomes: {seen:?}");
    for key in [
        "allow/-",
        "confirm/confirmation",
        "deny/identity",
        "deny/connector",
        "deny/tenant",
        "deny/role",
        "deny/permission",
        "deny/mode",
        "deny/intent",
        "deny/tenant_arg",
        "deny/requires",
        "deny/turn_limit",
        "error/unknown_mode",
        "error/no_mode",
        "error/unknown_tier",
        "error/unknown_intent",
    ] {
        assert!(
            seen.get(key).copied().unwrap_or(0) > 0,
            "no case reached `{key}`: {seen:?}"
        );
    }
}

/// Runs after the property above in the same process only by chance, so it checks the load
/// rate on its own sample: most generated policies must load, or the differential test would
/// be comparing nothing.
#[test]
fn generated_policies_mostly_load() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = policy_text();
    let mut loaded = 0;
    let total = 300;
    let mut first_error = None;
    for _ in 0..total {
        let text = strategy.new_tree(&mut runner).expect("tree").current();
        match Policy::parse(&text, "gen.warden") {
            Ok(_) => loaded += 1,
            Err(e) => {
                first_error.get_or_insert_with(|| format!("{e}\n{text}"));
            }
        }
    }
    assert!(
        loaded * 100 >= total * 90,
        "only {loaded}/{total} generated policies load; first error:\n{}",
        first_error.unwrap_or_default()
    );
}

#[test]
fn reference_reads_finance_like_the_compiled_policy() {
    let text = include_str!("../policies/finance.warden");
    // finance includes the lexicon; the reference reads one file, so compare offer only.
    let policy = Policy::from_file("policies/finance.warden").expect("finance loads");
    let reference = RefPolicy::from_text(text);
    let names: Vec<&str> = policy.tools().collect();
    for mode in ["analyzer", "supervised", "autonomous"] {
        for intent in ["read", "write", "destructive", "export", "execute"] {
            let req = Req {
                mode: Some(mode.to_string()),
                roles: vec!["accountant"],
                perms: vec!["invoices.manage"],
                tenant: Some("b-42"),
                connectors: vec![],
                forced: vec![],
                intents: vec![intent],
            };
            let (request, i) = req.compiled();
            let offer = policy
                .offer(&request, &i, names.iter().copied())
                .expect("offer");
            for (n, d) in offer.entries() {
                let got: Outcome = Ok((d.decision.as_str(), d.stage.map(|s| s.as_str())));
                assert_eq!(
                    got,
                    reference.offer(&req.reference(), n),
                    "{mode} {intent} {n}"
                );
            }
        }
    }
}

#[test]
fn reference_glob_matches_like_the_documented_examples() {
    assert!(reference::glob_matches(
        "mcp__*__get_*",
        "mcp__github__get_issue"
    ));
    assert!(reference::glob_matches("*", ""));
    assert!(!reference::glob_matches("a*b", "ba"));
    assert!(reference::glob_matches("x*y*z", "xaybz"));
    assert!(!reference::glob_matches("x*y*z", "xaybzq"));
}
