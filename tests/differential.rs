//! Differential test: the compiled evaluator against the reference interpreter in
//! `tests/reference/`, on random policies written as warden text and random requests.
//!
//! Every generated policy goes through `Policy::parse`; one that loads is run against a batch
//! of requests, and for every request every tool name's `offer` decision and stage, and a
//! `check_call` decision and stage, must agree. The case counts are printed by
//! `differential_case_count` (run with `--nocapture`).
//!
//! A second property does the same for argument rules: policies whose tools, pattern,
//! `defaults` and `rules` blocks carry random rules of every kind, called with random arguments,
//! `context` sets and queries; the decision, the stage, every fired rule (position and outcome,
//! in order) and the rule that decided must agree.

mod generate;
mod reference;

use generate::rules::{rule_args, rule_request, rules_policy_text, RULE_TOOLS};
use generate::{args, policy_text, request, Req, QUERY_NAMES};

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use reference::{Outcome, RefPolicy};
use serde_json::json;
use toolwarden::{Policy, RequestError, Turn};

fn error_kind(e: &RequestError) -> &'static str {
    match e {
        RequestError::UnknownMode { .. } => "unknown_mode",
        RequestError::NoMode { .. } => "no_mode",
        RequestError::UnknownTier { .. } => "unknown_tier",
        RequestError::UnknownIntent { .. } => "unknown_intent",
        RequestError::UnknownContext { .. } => "unknown_context",
        RequestError::Session(_) => "session",
    }
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

/// Rule policies generated per run; each is checked against 16 calls.
const RULE_POLICY_CASES: u32 = 400;

/// `line:col` of a `gen.warden:line:col` source.
fn line_col(source: &str) -> (usize, usize) {
    let mut parts = source.rsplitn(3, ':');
    let col = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let line = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    (line, col)
}

#[test]
fn argument_rules_agree_with_reference() {
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: RULE_POLICY_CASES,
        max_shrink_iters: 4000,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        rules_policy_text(),
        proptest::collection::vec(
            (rule_request(), rule_args(), 0u64..2, 0..RULE_TOOLS.len()),
            16,
        ),
    );
    let seen = std::sync::Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    let count = |key: String| {
        if let Ok(mut m) = seen.lock() {
            *m.entry(key).or_default() += 1;
        }
    };
    let result = runner.run(&strategy, |(text, calls)| {
        let policy = match Policy::parse(&text, "gen.warden") {
            Ok(p) => p,
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "a generated rules policy must load: {e}\n{text}"
                )))
            }
        };
        let reference = RefPolicy::from_text(&text);
        for (req, args, used, tool_ix) in &calls {
            let (request, intent) = req.compiled();
            let name = RULE_TOOLS[*tool_ix];
            let mut turn = Turn {
                transactional_calls: *used as u32,
            };
            let verdict = policy.check_call(&request, &intent, &mut turn, name, args);
            let got = verdict
                .as_ref()
                .map(|v| (v.decision.as_str(), v.stage.map(|s| s.as_str())))
                .map_err(error_kind);
            let mut ref_turn = *used;
            let (want, fired) =
                reference.check_call_judged(&req.reference(), &mut ref_turn, name, args);
            count(match &want {
                Ok((d, s)) => format!("{d}/{}", s.unwrap_or("-")),
                Err(e) => format!("error/{e}"),
            });
            for (_, _, outcome) in &fired.rules {
                count(format!("fired {outcome}"));
            }
            let context =
                format!("check_call `{name}` args {args}\nrequest {req:?}\npolicy:\n{text}");
            prop_assert_eq!(got, want, "{}", context);
            let Ok(v) = verdict else { continue };
            let got_rules: Vec<(usize, usize, &str)> = v
                .rules
                .iter()
                .map(|f| {
                    let (l, c) = line_col(&f.source);
                    (l, c, f.outcome)
                })
                .collect();
            prop_assert_eq!(&got_rules, &fired.rules, "fired rules\n{}", context);
            if v.stage.map(|s| s.as_str()) == Some("arguments") {
                prop_assert_eq!(
                    v.source.as_deref().map(line_col),
                    fired.decisive,
                    "deciding rule\n{}",
                    context
                );
            }
            prop_assert_eq!(u64::from(turn.transactional_calls), ref_turn, "turn count");
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let seen = seen.lock().map(|m| m.clone()).unwrap_or_default();
    eprintln!("argument-rule outcomes: {seen:?}");
    for key in [
        "allow/-",
        "confirm/arguments",
        "confirm/confirmation",
        "deny/arguments",
        "deny/requires",
        "deny/identity",
        "deny/intent",
        "deny/turn_limit",
        "error/unknown_context",
        "fired deny",
        "fired confirm",
    ] {
        assert!(
            seen.get(key).copied().unwrap_or(0) > 0,
            "no case reached `{key}`: {seen:?}"
        );
    }
}

/// Every kind of condition, on arguments chosen to make it true, false and unevaluable, agrees
/// with the reference (a fixed table, so a change of the generator cannot lose a case).
#[test]
fn every_kind_of_condition_agrees_with_reference_on_chosen_arguments() {
    let conditions = [
        r#"a in "alice", 5, context.c0, query"#,
        r#"a not in context.c1"#,
        r#"n in 5, query"#,
        r#"p under "/w", "/tmp/x""#,
        r#"p not under "/w""#,
        r#"p matches "**/.env", "/w/*""#,
        r#"list[*] not matches "*@ex.com""#,
        r#"a =~ "(?i)^bob""#,
        r#"any !~ "^[a-z]+$""#,
        "n > 5",
        "n <= 2.5",
        "n == 5 or n != 0",
        "not (present(obj.k) and obj.k in \"alice\")",
        r#"objs[*].name matches "*.txt""#,
        r#"host(url) in "github.com", context.c0"#,
        r#"host(url) not in query"#,
        r#"any under "/w""#,
    ];
    let args = [
        json!({}),
        json!({"a": "alice", "n": 5, "p": "/w/a/../b.txt", "url": "https://GitHub.com:443/x"}),
        json!({"a": "Bob Smith", "n": 2.5, "p": "/w/../etc/passwd", "url": "https://user@evil.com/"}),
        json!({"a": 5, "n": "5", "p": "w/rel", "url": "no host here", "list": ["x@ex.com", "y@evil.com"]}),
        json!({"a": null, "n": [1], "p": "/..", "url": 3, "list": "x", "obj": {"k": "alice"}}),
        json!({"a": ["alice"], "n": 100, "p": "/tmp/x/.env", "url": "//docs.rs/r", "list": [], "obj": {"k": 5}, "objs": [{"name": "a.txt"}, {"name": 3}]}),
        json!({"a": "abc", "p": "/w/.env", "objs": [{"nom": 1}], "obj": "str"}),
    ];
    let queries = [None, Some("pay bob smith 5 dollars via docs.rs")];
    let contexts: [Vec<(&str, Vec<&str>)>; 3] = [
        vec![],
        vec![("c0", vec!["github.com", "Bob Smith"]), ("c1", vec![])],
        vec![("c1", vec!["alice", "5"])],
    ];
    for (i, cond) in conditions.iter().enumerate() {
        let outcome = if i % 2 == 0 { "deny" } else { "confirm" };
        let text = format!(
            "policy \"gen\"\neffects none\nintents read\nfallback read\nmode m {{ }}\ncontext c0, c1\ntool t {{\n  effect none\n  {outcome} when {cond}\n}}\n"
        );
        let policy = Policy::parse(&text, "gen.warden").unwrap_or_else(|e| panic!("{cond}: {e}"));
        let reference = RefPolicy::from_text(&text);
        for a in &args {
            for q in queries {
                for c in &contexts {
                    let req = generate::rules::RuleReq {
                        mode: "m",
                        intent: "read",
                        query: q,
                        contexts: c.clone(),
                    };
                    let (request, intent) = req.compiled();
                    let got = policy
                        .check_call(&request, &intent, &mut Turn::new(), "t", a)
                        .map(|v| (v.decision.as_str(), v.stage.map(|s| s.as_str())))
                        .map_err(|e| error_kind(&e));
                    let want = reference.check_call(&req.reference(), &mut 0, "t", a);
                    assert_eq!(
                        got, want,
                        "`{cond}` on {a} with query {q:?}, contexts {c:?}"
                    );
                }
            }
        }
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
