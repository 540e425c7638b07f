//! Differential test: the compiled evaluator against the reference interpreter in
//! `tests/reference/`, on random policies written as warden text and random requests.
//!
//! Every generated policy goes through `Policy::parse`; one that loads is run against a batch
//! of requests, and for every request every tool name's `offer` decision and stage, and a
//! `check_call` decision and stage, must agree. The case counts are printed by
//! `differential_case_count` (run with `--nocapture`).

mod generate;
mod reference;

use generate::{args, policy_text, request, Req, QUERY_NAMES};

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use reference::{Outcome, RefPolicy};
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

/// Call arguments: tenant argument (own, other, null, number), required names present or
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
