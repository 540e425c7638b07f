//! Seed 001's permission matrix, every cell, in each of the three execution modes of
//! `policies/finance.warden`: 3 modes x 5 query intents x 5 tool effects = 75 rows, each with the
//! exact decision and deciding stage, through `offer` (schema visibility) and again through
//! `check_call` (the execution guard).
//!
//! The request passes stages 1-5 for every tool (role `admin`, which includes `accountant`; every
//! permission the tools need; a tenant), so the rows isolate stages 6 (mode ceiling), 7 (matrix
//! cell) and the confirmation rules:
//! - analyzer: `restrict none` -> every non-`none` effect is denied at stage `mode`, whatever the
//!   query ("Analyzer: READ_ONLY only, even if the query writes");
//! - supervised: `confirm write, delete, export, execute` -> every offered mutating tool needs
//!   approval (`approve_writes`);
//! - autonomous: `confirm export, execute` -> high-risk tools still need approval;
//! - `export_business_data` says `confirm always`, so it is `confirm` wherever it is offered.

use serde_json::json;
use toolwarden::Decision::{self, Allow, Confirm, Deny};
use toolwarden::Stage::{self, Confirmation, Intent, Mode};
use toolwarden::{Policy, Request, Turn};

const POLICY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/finance.warden");

/// The tool of `policies/finance.warden` that stands for each effect column.
fn tool_of(effect: &str) -> &'static str {
    match effect {
        "none" => "search_invoices",
        "write" => "create_invoice",
        "delete" => "delete_invoice",
        "export" => "export_business_data",
        "execute" => "execute_workflow",
        other => panic!("no tool for effect {other}"),
    }
}

/// A request that passes tenant, role and permission for every tool of the policy.
fn request(mode: &str) -> Request {
    Request::new(mode)
        .roles(["admin"])
        .permissions(["invoices.manage", "reports.export", "workflows.manage"])
        .tenant("b-42")
}

/// (mode, query intent, tool effect, decision, deciding stage).
type Row = (
    &'static str,
    &'static str,
    &'static str,
    Decision,
    Option<Stage>,
);

#[rustfmt::skip]
const MATRIX: [Row; 75] = [
    // mode analyzer
    ("analyzer", "read", "none", Allow, None),
    ("analyzer", "read", "write", Deny, Some(Mode)),
    ("analyzer", "read", "delete", Deny, Some(Mode)),
    ("analyzer", "read", "export", Deny, Some(Mode)),
    ("analyzer", "read", "execute", Deny, Some(Mode)),
    ("analyzer", "write", "none", Allow, None),
    ("analyzer", "write", "write", Deny, Some(Mode)),
    ("analyzer", "write", "delete", Deny, Some(Mode)),
    ("analyzer", "write", "export", Deny, Some(Mode)),
    ("analyzer", "write", "execute", Deny, Some(Mode)),
    ("analyzer", "destructive", "none", Allow, None),
    ("analyzer", "destructive", "write", Deny, Some(Mode)),
    ("analyzer", "destructive", "delete", Deny, Some(Mode)),
    ("analyzer", "destructive", "export", Deny, Some(Mode)),
    ("analyzer", "destructive", "execute", Deny, Some(Mode)),
    ("analyzer", "export", "none", Allow, None),
    ("analyzer", "export", "write", Deny, Some(Mode)),
    ("analyzer", "export", "delete", Deny, Some(Mode)),
    ("analyzer", "export", "export", Deny, Some(Mode)),
    ("analyzer", "export", "execute", Deny, Some(Mode)),
    ("analyzer", "execute", "none", Allow, None),
    ("analyzer", "execute", "write", Deny, Some(Mode)),
    ("analyzer", "execute", "delete", Deny, Some(Mode)),
    ("analyzer", "execute", "export", Deny, Some(Mode)),
    ("analyzer", "execute", "execute", Deny, Some(Mode)),
    // mode supervised
    ("supervised", "read", "none", Allow, None),
    ("supervised", "read", "write", Deny, Some(Intent)),
    ("supervised", "read", "delete", Deny, Some(Intent)),
    ("supervised", "read", "export", Deny, Some(Intent)),
    ("supervised", "read", "execute", Deny, Some(Intent)),
    ("supervised", "write", "none", Allow, None),
    ("supervised", "write", "write", Confirm, Some(Confirmation)),
    ("supervised", "write", "delete", Deny, Some(Intent)),
    ("supervised", "write", "export", Deny, Some(Intent)),
    ("supervised", "write", "execute", Deny, Some(Intent)),
    ("supervised", "destructive", "none", Allow, None),
    ("supervised", "destructive", "write", Deny, Some(Intent)),
    ("supervised", "destructive", "delete", Confirm, Some(Confirmation)),
    ("supervised", "destructive", "export", Deny, Some(Intent)),
    ("supervised", "destructive", "execute", Deny, Some(Intent)),
    ("supervised", "export", "none", Allow, None),
    ("supervised", "export", "write", Deny, Some(Intent)),
    ("supervised", "export", "delete", Deny, Some(Intent)),
    ("supervised", "export", "export", Confirm, Some(Confirmation)),
    ("supervised", "export", "execute", Deny, Some(Intent)),
    ("supervised", "execute", "none", Allow, None),
    ("supervised", "execute", "write", Deny, Some(Intent)),
    ("supervised", "execute", "delete", Deny, Some(Intent)),
    ("supervised", "execute", "export", Deny, Some(Intent)),
    ("supervised", "execute", "execute", Confirm, Some(Confirmation)),
    // mode autonomous
    ("autonomous", "read", "none", Allow, None),
    ("autonomous", "read", "write", Deny, Some(Intent)),
    ("autonomous", "read", "delete", Deny, Some(Intent)),
    ("autonomous", "read", "export", Deny, Some(Intent)),
    ("autonomous", "read", "execute", Deny, Some(Intent)),
    ("autonomous", "write", "none", Allow, None),
    ("autonomous", "write", "write", Allow, None),
    ("autonomous", "write", "delete", Deny, Some(Intent)),
    ("autonomous", "write", "export", Deny, Some(Intent)),
    ("autonomous", "write", "execute", Deny, Some(Intent)),
    ("autonomous", "destructive", "none", Allow, None),
    ("autonomous", "destructive", "write", Deny, Some(Intent)),
    ("autonomous", "destructive", "delete", Allow, None),
    ("autonomous", "destructive", "export", Deny, Some(Intent)),
    ("autonomous", "destructive", "execute", Deny, Some(Intent)),
    ("autonomous", "export", "none", Allow, None),
    ("autonomous", "export", "write", Deny, Some(Intent)),
    ("autonomous", "export", "delete", Deny, Some(Intent)),
    ("autonomous", "export", "export", Confirm, Some(Confirmation)),
    ("autonomous", "export", "execute", Deny, Some(Intent)),
    ("autonomous", "execute", "none", Allow, None),
    ("autonomous", "execute", "write", Deny, Some(Intent)),
    ("autonomous", "execute", "delete", Deny, Some(Intent)),
    ("autonomous", "execute", "export", Deny, Some(Intent)),
    ("autonomous", "execute", "execute", Confirm, Some(Confirmation)),
];

fn load() -> Policy {
    Policy::from_file(POLICY).unwrap_or_else(|e| panic!("{}", e.render()))
}

#[test]
fn the_table_covers_every_mode_intent_and_effect_once() {
    let policy = load();
    let modes: Vec<&str> = policy.modes().collect();
    let intents: Vec<&str> = policy.intents().collect();
    let effects: Vec<&str> = policy.effects().collect();
    assert_eq!(modes, ["analyzer", "supervised", "autonomous"]);
    assert_eq!(
        intents,
        ["destructive", "execute", "export", "write", "read"]
    );
    assert_eq!(effects, ["none", "write", "delete", "export", "execute"]);
    let mut seen = std::collections::BTreeSet::new();
    for (mode, intent, effect, _, _) in MATRIX {
        assert!(modes.contains(&mode) && intents.contains(&intent) && effects.contains(&effect));
        assert!(
            seen.insert((mode, intent, effect)),
            "duplicate row {mode}/{intent}/{effect}"
        );
    }
    assert_eq!(seen.len(), 75);
}

#[test]
fn offer_decides_every_cell_of_the_matrix_in_every_mode() {
    let policy = load();
    let mut failures = Vec::new();
    for (mode, intent, effect, decision, stage) in MATRIX {
        let tool = tool_of(effect);
        let offer = policy
            .offer(&request(mode), &toolwarden::Intent::named(intent), [tool])
            .unwrap();
        let (name, d) = offer.entries()[0];
        assert_eq!(name, tool);
        if (d.decision, d.stage) != (decision, stage) {
            failures.push(format!(
                "{mode}/{intent}/{effect} ({tool}): expected {decision:?} at {stage:?}, got {:?} at {:?}",
                d.decision, d.stage
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn offer_of_all_five_tools_at_once_matches_the_rows() {
    let policy = load();
    let tools = ["none", "write", "delete", "export", "execute"].map(tool_of);
    for mode in ["analyzer", "supervised", "autonomous"] {
        for intent in ["read", "write", "destructive", "export", "execute"] {
            let offer = policy
                .offer(&request(mode), &toolwarden::Intent::named(intent), tools)
                .unwrap();
            let expected: Vec<&str> = MATRIX
                .iter()
                .filter(|r| r.0 == mode && r.1 == intent && r.3 != Deny)
                .map(|r| tool_of(r.2))
                .collect();
            assert_eq!(
                offer.visible().collect::<Vec<_>>(),
                expected,
                "{mode}/{intent}"
            );
        }
    }
}

#[test]
fn check_call_meets_the_same_matrix_at_execution() {
    let policy = load();
    // `create_invoice` requires `customer_id`; the others ignore it.
    let args = json!({"customer_id": "c-1", "business_id": "b-42"});
    let mut failures = Vec::new();
    for (mode, intent, effect, decision, stage) in MATRIX {
        let tool = tool_of(effect);
        let mut turn = Turn::new();
        let v = policy
            .check_call(
                &request(mode),
                &toolwarden::Intent::named(intent),
                &mut turn,
                tool,
                &args,
            )
            .unwrap();
        if (v.decision, v.stage) != (decision, stage) {
            failures.push(format!(
                "{mode}/{intent}/{effect} ({tool}): expected {decision:?} at {stage:?}, got {:?} at {:?}: {}",
                v.decision, v.stage, v.reason
            ));
        }
        // An allowed call hands back the arguments; a confirm holds a pending call; a deny neither.
        assert_eq!(
            v.args_for_execution.is_some(),
            decision == Allow,
            "{mode}/{intent}/{effect}"
        );
        assert_eq!(
            v.pending.is_some(),
            decision == Confirm,
            "{mode}/{intent}/{effect}"
        );
        let transactional = u32::from(decision == Allow && effect != "none");
        assert_eq!(
            turn.transactional_calls, transactional,
            "{mode}/{intent}/{effect}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn denials_point_at_the_rule_that_decided() {
    let policy = load();
    // analyzer's `restrict none` ceiling, line 38.
    let d = policy
        .decide_tool(
            &request("analyzer"),
            &toolwarden::Intent::named("write"),
            "create_invoice",
        )
        .unwrap();
    assert_eq!(policy.rule_text(d.rule), "restrict none");
    assert_eq!(
        policy.rule_source(d.rule).unwrap().to_string(),
        format!("{POLICY}:38:36")
    );
    // supervised, read query, delete tool: the `deny` cell of row `read`, column `delete`.
    let d = policy
        .decide_tool(
            &request("supervised"),
            &toolwarden::Intent::named("read"),
            "delete_invoice",
        )
        .unwrap();
    assert_eq!(policy.rule_text(d.rule), "deny");
    assert_eq!(
        policy.rule_source(d.rule).unwrap().to_string(),
        format!("{POLICY}:28:30")
    );
    // autonomous, export query, export tool: confirmed by the mode's `confirm` list.
    let d = policy
        .decide_tool(
            &request("autonomous"),
            &toolwarden::Intent::named("export"),
            "export_business_data",
        )
        .unwrap();
    assert_eq!(policy.rule_text(d.rule), "confirm export, execute");
}

/// Seed 001's query table ("Query -> Mutation"), in Persian as written there and in English.
#[test]
fn the_seed_queries_classify_into_their_mutation_class() {
    let policy = load();
    let cases = [
        ("فاکتور علی را نشان بده", "read", false),
        ("show Ali's invoice", "read", false),
        ("فاکتور جدید ایجاد کن", "write", false),
        ("create a new invoice", "write", false),
        ("این فاکتور را حذف کن", "destructive", false),
        ("delete this invoice", "destructive", false),
        ("خروجی اکسل", "export", false),
        ("export", "export", false),
        ("اجرای workflow", "execute", false),
        ("run the workflow", "execute", false),
        ("", "read", true),
    ];
    for (query, intent, fallback) in cases {
        let got = policy.classify(query);
        assert_eq!(
            (got.name.as_str(), got.fallback),
            (intent, fallback),
            "{query:?}"
        );
    }
}
