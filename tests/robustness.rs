//! Property tests: hostile policy text, queries and call arguments never panic the library, and
//! the evaluator's basic invariants hold on every input.

use proptest::prelude::*;
use serde_json::Value;
use toolwarden::{Decision, Intent, Policy, Request, Stage, Turn};

const FINANCE: &str = include_str!("../policies/finance.warden");
const RETAIL: &str = include_str!("../policies/retail.warden");
const CONNECTORS: &str = include_str!("../policies/connectors.warden");

/// finance.warden, loaded once for every case.
fn finance() -> Policy {
    static POLICY: std::sync::OnceLock<Policy> = std::sync::OnceLock::new();
    POLICY
        .get_or_init(|| match Policy::from_file("policies/finance.warden") {
            Ok(p) => p,
            Err(e) => panic!("finance.warden must load: {e}"),
        })
        .clone()
}

/// Pieces of warden syntax, so random text often gets deep into the parser and checker.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("policy".to_string()),
        Just("effects".to_string()),
        Just("intents".to_string()),
        Just("matrix".to_string()),
        Just("mode".to_string()),
        Just("tool".to_string()),
        Just("match".to_string()),
        Just("roles".to_string()),
        Just("permission".to_string()),
        Just("implies".to_string()),
        Just("keywords".to_string()),
        Just("negation".to_string()),
        Just("include".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just(">".to_string()),
        Just(",".to_string()),
        Just("\n".to_string()),
        Just("\"".to_string()),
        Just("*".to_string()),
        Just("allow".to_string()),
        Just("deny".to_string()),
        Just("confirm".to_string()),
        "[a-z_]{1,8}",
        "\"[^\"]{0,6}\"",
        "[0-9]{1,25}",
        any::<char>().prop_map(String::from),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        let _ = Policy::parse(&text, "fuzz.warden");
    }

    #[test]
    fn token_soup_never_panics(tokens in prop::collection::vec(token(), 0..80)) {
        let text = tokens.join(" ");
        if let Err(e) = Policy::parse(&text, "soup.warden") {
            // Every error renders, and names a place or says why it has none.
            let rendered = e.render();
            prop_assert!(rendered.contains("error"));
        }
    }

    #[test]
    fn mutated_reference_policies_never_panic(
        which in 0usize..3,
        cuts in prop::collection::vec((any::<prop::sample::Index>(), "\\PC{0,3}"), 1..6),
    ) {
        let base = [FINANCE, RETAIL, CONNECTORS][which];
        let mut text: Vec<char> = base.chars().collect();
        for (at, insert) in cuts {
            let i = at.index(text.len() + 1);
            let end = (i + 3).min(text.len());
            text.splice(i..end, insert.chars());
        }
        let text: String = text.into_iter().collect();
        // `include` must not escape to the file system in a random place: name a folder that
        // does not exist so includes fail cleanly.
        let _ = Policy::parse(&text, "/nonexistent-toolwarden-dir/mutated.warden");
    }

    #[test]
    fn classify_never_panics_and_spans_are_in_bounds(query in "\\PC{0,300}") {
        let policy = finance();
        let intent = policy.classify(&query);
        for h in intent.hits.iter().chain(intent.dropped.iter()) {
            prop_assert!(h.span.0 <= h.span.1 && h.span.1 <= query.len());
            prop_assert!(query.is_char_boundary(h.span.0) && query.is_char_boundary(h.span.1));
        }
        prop_assert!(policy.intents().any(|i| i == intent.name));
    }

    #[test]
    fn offer_keeps_order_and_denies_undeclared(names in prop::collection::vec("[a-z_]{0,12}", 0..40)) {
        let policy = finance();
        let request = Request::new("autonomous").roles(["admin"]).permissions(["invoices.manage"]).tenant("t");
        let intent = Intent::named("write");
        let offer = policy.offer(&request, &intent, names.iter().map(String::as_str)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got: Vec<&str> = offer.entries().iter().map(|(n, _)| *n).collect();
        let want: Vec<&str> = names.iter().map(String::as_str).collect();
        prop_assert_eq!(got, want);
        for (name, d) in offer.entries() {
            if !policy.tools().any(|t| t == *name) {
                prop_assert_eq!(d.decision, Decision::Deny);
                prop_assert_eq!(d.stage, Some(Stage::Identity));
            }
        }
    }

    #[test]
    fn check_call_never_panics_and_never_allows_what_offer_denies(
        tool in prop::sample::select(vec!["search_invoices", "create_invoice", "delete_invoice", "export_business_data", "nope", "legacy_sync"]),
        args in arb_json(),
        intent in prop::sample::select(vec!["read", "write", "destructive", "export", "execute"]),
        mode in prop::sample::select(vec!["analyzer", "supervised", "autonomous"]),
    ) {
        let policy = finance();
        let request = Request::new(mode).roles(["viewer"]).permissions(["invoices.view"]).tenant("b-1");
        let intent = Intent::named(intent);
        let offered = policy.decide_tool(&request, &intent, tool).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut turn = Turn::new();
        let verdict = policy.check_call(&request, &intent, &mut turn, tool, &args).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if offered.decision == Decision::Deny {
            prop_assert_eq!(verdict.decision, Decision::Deny);
            prop_assert_eq!(verdict.stage, offered.stage);
        }
        if verdict.decision == Decision::Allow {
            let exec = verdict.args_for_execution.clone().unwrap_or_default();
            prop_assert!(!exec.contains_key("approve_writes") && !exec.contains_key("confirmed"));
        }
        let json = verdict.to_json();
        prop_assert_eq!(json["ok"].as_bool(), Some(verdict.decision == Decision::Allow));
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
        Just(Value::from("true")),
    ];
    let tree = leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("approve_writes".to_string()),
                    Just("confirmed".to_string()),
                    Just("business_id".to_string()),
                    Just("customer_id".to_string()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop_oneof![
        tree.clone(),
        prop::collection::btree_map("[a-z_]{1,8}", tree, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    ]
}

#[test]
fn a_deeply_nested_argument_is_denied_not_a_crash() {
    let policy = finance();
    let request = Request::new("autonomous")
        .roles(["admin"])
        .permissions(["invoices.manage"])
        .tenant("b-1");
    let mut nested = Value::from(1);
    for _ in 0..100 {
        nested = Value::Array(vec![nested]);
    }
    let args = serde_json::json!({ "customer_id": "c", "deep": nested });
    let mut turn = Turn::new();
    let verdict = policy
        .check_call(
            &request,
            &Intent::named("write"),
            &mut turn,
            "create_invoice",
            &args,
        )
        .expect("known mode and intent");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(verdict.stage, Some(Stage::Requires));
    assert_eq!(
        verdict.reason,
        "arguments of `create_invoice` are nested deeper than 64 levels"
    );
    assert_eq!(turn.transactional_calls, 0);
}

#[test]
fn a_huge_query_classifies() {
    let policy = finance();
    let mut query = "show the invoices ".repeat(60_000); // ~1 MiB
    query.push_str("and delete them");
    let intent = policy.classify(&query);
    assert!(query.len() > toolwarden::limits::MAX_QUERY_BYTES);
    assert!(intent.truncated);
    assert_eq!(intent.name, "read");
}

#[test]
fn policies_are_send_sync_and_unwind_safe() {
    fn assert_traits<T: Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
    assert_traits::<Policy>();
    assert_traits::<Request>();
    assert_traits::<toolwarden::Verdict>();
    assert_traits::<toolwarden::PolicyError>();
}
