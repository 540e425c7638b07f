//! Seed 001, section 10 ("Failure Modes"), one test per row, on `policies/finance.warden`, plus
//! the role-inclusion and permission-implication rules of section 5 and the tenant rules of
//! section 6. Every assertion names the exact decision and the stage that decided.
//!
//! | seed row                                   | test                                          |
//! |--------------------------------------------|-----------------------------------------------|
//! | UNKNOWN classification -> not a candidate  | `unknown_or_disabled_tools_are_never_candidates` |
//! | permission unknown / refused -> filtered   | `a_missing_permission_is_denied_at_permission` |
//! | no business_id -> business tools removed   | `without_a_tenant_business_tools_stop_at_tenant` |
//! | generic financial query -> read only       | `a_generic_financial_query_offers_no_mutation` |
//! | empty allowed set -> no schema (fail-closed)| `an_empty_allowed_set_offers_nothing`        |
//! | high rank on an unauthorized tool -> no effect | `position_and_repetition_never_bring_a_tool_back` |
//! | LLM tool_call outside the list -> guard    | `a_call_outside_the_offered_list_meets_check_call` |
//! | MCP call without approve -> approval result| `a_write_call_without_approval_is_held_for_confirmation` |

use serde_json::json;
use toolwarden::{Decision, Intent, Policy, Request, Stage, ToolMatch, Turn};

const POLICY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/finance.warden");

/// Every tool `policies/finance.warden` declares, in declaration order.
const ALL_TOOLS: [&str; 8] = [
    "search_invoices",
    "get_invoice",
    "create_invoice",
    "delete_invoice",
    "export_business_data",
    "execute_workflow",
    "create_workflow",
    "legacy_sync",
];

const ALL_PERMISSIONS: [&str; 3] = ["invoices.manage", "reports.export", "workflows.manage"];

fn load() -> Policy {
    Policy::from_file(POLICY).unwrap_or_else(|e| panic!("{}", e.render()))
}

/// A principal that passes tenant, role and permission for every tool.
fn admin(mode: &str) -> Request {
    Request::new(mode)
        .roles(["admin"])
        .permissions(ALL_PERMISSIONS)
        .tenant("b-42")
}

/// `(decision, stage)` of one tool for a request and an intent.
fn decide(
    policy: &Policy,
    request: &Request,
    intent: &str,
    tool: &str,
) -> (Decision, Option<Stage>) {
    let d = policy
        .decide_tool(request, &Intent::named(intent), tool)
        .unwrap();
    (d.decision, d.stage)
}

const DENY_IDENTITY: (Decision, Option<Stage>) = (Decision::Deny, Some(Stage::Identity));
const CONFIRM: (Decision, Option<Stage>) = (Decision::Confirm, Some(Stage::Confirmation));
const ALLOW: (Decision, Option<Stage>) = (Decision::Allow, None);

#[test]
fn unknown_or_disabled_tools_are_never_candidates() {
    let policy = load();
    for mode in ["analyzer", "supervised", "autonomous"] {
        for intent in ["read", "write", "destructive", "export", "execute"] {
            let request = admin(mode);
            // Not in the manifest: `unknown deny`.
            let d = policy
                .decide_tool(&request, &Intent::named(intent), "zzz_filler_1")
                .unwrap();
            assert_eq!(
                (d.decision, d.stage, d.matched),
                (Decision::Deny, Some(Stage::Identity), ToolMatch::Unknown)
            );
            assert_eq!(
                policy.reason("zzz_filler_1", &d, &request),
                "`zzz_filler_1` is not declared by the policy and unknown tools are denied"
            );
            // In the manifest with `enabled false`.
            let d = policy
                .decide_tool(&request, &Intent::named(intent), "legacy_sync")
                .unwrap();
            assert_eq!((d.decision, d.stage), DENY_IDENTITY, "{mode}/{intent}");
            assert!(matches!(d.matched, ToolMatch::Declared(_)));
            assert_eq!(
                policy.reason("legacy_sync", &d, &request),
                "`legacy_sync` is disabled (`enabled false`)"
            );
            assert_eq!(policy.rule_text(d.rule), "enabled false");
        }
    }
    // Even forced: identity comes before the intent stage.
    let forced = admin("supervised").forced(["legacy_sync", "zzz_filler_1"]);
    assert_eq!(
        decide(&policy, &forced, "write", "legacy_sync"),
        DENY_IDENTITY
    );
    assert_eq!(
        decide(&policy, &forced, "write", "zzz_filler_1"),
        DENY_IDENTITY
    );
    // And the execution guard refuses them the same way.
    let mut turn = Turn::new();
    let v = policy
        .check_call(
            &admin("autonomous"),
            &Intent::named("write"),
            &mut turn,
            "legacy_sync",
            &json!({}),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), DENY_IDENTITY);
    assert_eq!(v.effect.as_deref(), Some("write"));
    let v = policy
        .check_call(
            &admin("autonomous"),
            &Intent::named("write"),
            &mut turn,
            "zzz_filler_1",
            &json!({}),
        )
        .unwrap();
    assert_eq!(
        (v.decision, v.stage, v.effect),
        (Decision::Deny, Some(Stage::Identity), None)
    );
    assert_eq!(v.operation_type, None);
    assert_eq!(turn.transactional_calls, 0);
}

#[test]
fn a_missing_permission_is_denied_at_permission() {
    let policy = load();
    // An accountant with no permission at all.
    let request = Request::new("autonomous")
        .roles(["accountant"])
        .tenant("b-42");
    let expected = [
        (
            "search_invoices",
            "read",
            "`search_invoices` needs permission `invoices.view`",
        ),
        (
            "get_invoice",
            "read",
            "`get_invoice` needs permission `invoices.view`",
        ),
        (
            "create_invoice",
            "write",
            "`create_invoice` needs permission `invoices.add`",
        ),
        (
            "delete_invoice",
            "destructive",
            "`delete_invoice` needs permission `invoices.delete`",
        ),
        (
            "export_business_data",
            "export",
            "`export_business_data` needs permission `reports.export`",
        ),
        (
            "execute_workflow",
            "execute",
            "`execute_workflow` needs permission `workflows.run`",
        ),
        (
            "create_workflow",
            "write",
            "`create_workflow` needs permission `workflows.edit`",
        ),
    ];
    for (tool, intent, reason) in expected {
        let d = policy
            .decide_tool(&request, &Intent::named(intent), tool)
            .unwrap();
        assert_eq!(
            (d.decision, d.stage),
            (Decision::Deny, Some(Stage::Permission)),
            "{tool}"
        );
        assert_eq!(policy.reason(tool, &d, &request), reason);
    }
    // A permission the policy does not know grants nothing (it is not an error).
    let request = Request::new("autonomous")
        .roles(["accountant"])
        .permissions(["invoices.*", "root"])
        .tenant("b-42");
    assert_eq!(
        decide(&policy, &request, "read", "search_invoices"),
        (Decision::Deny, Some(Stage::Permission))
    );
    // One permission is not another: `invoices.view` does not grant `invoices.add`.
    let request = Request::new("autonomous")
        .roles(["accountant"])
        .permissions(["invoices.view"])
        .tenant("b-42");
    assert_eq!(decide(&policy, &request, "write", "search_invoices"), ALLOW);
    assert_eq!(
        decide(&policy, &request, "write", "create_invoice"),
        (Decision::Deny, Some(Stage::Permission))
    );
}

#[test]
fn without_a_tenant_business_tools_stop_at_tenant() {
    let policy = load();
    let request = Request::new("autonomous")
        .roles(["admin"])
        .permissions(ALL_PERMISSIONS);
    let intents = [
        "read",
        "read",
        "write",
        "destructive",
        "export",
        "execute",
        "write",
    ];
    for (tool, intent) in ALL_TOOLS[..7].iter().zip(intents) {
        let d = policy
            .decide_tool(&request, &Intent::named(intent), tool)
            .unwrap();
        assert_eq!(
            (d.decision, d.stage),
            (Decision::Deny, Some(Stage::Tenant)),
            "{tool}"
        );
        assert_eq!(policy.rule_text(d.rule), "tenant required");
        assert_eq!(
            policy.reason(tool, &d, &request),
            format!("`{tool}` needs a tenant and the request has none")
        );
    }
    let offer = policy
        .offer(&request, &Intent::named("read"), ALL_TOOLS)
        .unwrap();
    assert_eq!(offer.visible().count(), 0);
}

#[test]
fn a_generic_financial_query_offers_no_mutation() {
    let policy = load();
    for query in [
        "how much did we invoice last month?",
        "show Ali's invoice",
        "list unpaid invoices for this customer",
        "فاکتور علی را نشان بده",
    ] {
        let intent = policy.classify(query);
        assert_eq!(intent.name, "read", "{query}");
        for mode in ["analyzer", "supervised", "autonomous"] {
            let offer = policy.offer(&admin(mode), &intent, ALL_TOOLS).unwrap();
            assert_eq!(
                offer.visible().collect::<Vec<_>>(),
                ["search_invoices", "get_invoice"],
                "{mode}: {query}"
            );
            assert_eq!(
                offer.allowed().collect::<Vec<_>>(),
                ["search_invoices", "get_invoice"]
            );
            let denied: Vec<(&str, Option<Stage>)> =
                offer.denied().map(|(n, d)| (n, d.stage)).collect();
            let stage = if mode == "analyzer" {
                Stage::Mode
            } else {
                Stage::Intent
            };
            assert_eq!(
                denied,
                [
                    ("create_invoice", Some(stage)),
                    ("delete_invoice", Some(stage)),
                    ("export_business_data", Some(stage)),
                    ("execute_workflow", Some(stage)),
                    ("create_workflow", Some(stage)),
                    ("legacy_sync", Some(Stage::Identity)),
                ],
                "{mode}: {query}"
            );
        }
    }
}

#[test]
fn an_empty_allowed_set_offers_nothing() {
    let policy = load();
    // A principal with no permission: every tool is filtered, and nothing falls back open.
    let request = Request::new("supervised").roles(["viewer"]).tenant("b-42");
    let offer = policy
        .offer(&request, &Intent::named("read"), ALL_TOOLS)
        .unwrap();
    assert_eq!(offer.entries().len(), 8);
    assert_eq!(offer.visible().count(), 0);
    assert_eq!(offer.visible_indices().count(), 0);
    // Only unknown names: nothing.
    let offer = policy
        .offer(
            &admin("supervised"),
            &Intent::named("read"),
            ["zzz_filler_1", "zzz_filler_2"],
        )
        .unwrap();
    assert_eq!(offer.visible().count(), 0);
    // An empty input list yields an empty offer, never "every tool".
    let offer = policy
        .offer(
            &admin("supervised"),
            &Intent::named("read"),
            std::iter::empty::<&str>(),
        )
        .unwrap();
    assert!(offer.entries().is_empty());
    assert_eq!(offer.visible().count(), 0);
}

#[test]
fn position_and_repetition_never_bring_a_tool_back() {
    let policy = load();
    let request = admin("autonomous");
    let intent = Intent::named("read");
    let offer = policy
        .offer(
            &request,
            &intent,
            [
                "delete_invoice",
                "delete_invoice",
                "search_invoices",
                "delete_invoice",
            ],
        )
        .unwrap();
    let decisions: Vec<(&str, Decision, Option<Stage>)> = offer
        .entries()
        .iter()
        .map(|(n, d)| (*n, d.decision, d.stage))
        .collect();
    assert_eq!(
        decisions,
        [
            ("delete_invoice", Decision::Deny, Some(Stage::Intent)),
            ("delete_invoice", Decision::Deny, Some(Stage::Intent)),
            ("search_invoices", Decision::Allow, None),
            ("delete_invoice", Decision::Deny, Some(Stage::Intent)),
        ]
    );
    assert_eq!(offer.visible_indices().collect::<Vec<_>>(), [2]);
}

#[test]
fn a_forced_name_is_exempt_from_the_intent_stage_only() {
    let policy = load();
    let read = "read";
    // Supervised, read query: delete_invoice is filtered by the matrix...
    assert_eq!(
        decide(&policy, &admin("supervised"), read, "delete_invoice"),
        (Decision::Deny, Some(Stage::Intent))
    );
    // ...and comes back when forced (a confirmation in flight), still needing confirmation.
    let forced = admin("supervised").forced(["delete_invoice"]);
    assert_eq!(decide(&policy, &forced, read, "delete_invoice"), CONFIRM);
    // Forcing one name does not force another.
    assert_eq!(
        decide(&policy, &forced, read, "create_invoice"),
        (Decision::Deny, Some(Stage::Intent))
    );
    // Autonomous confirms no delete by itself, but a tool forced past a denying cell is exempt
    // from hiding only, never from asking: still a confirmation.
    let forced_auto = admin("autonomous").forced(["delete_invoice"]);
    assert_eq!(
        decide(&policy, &forced_auto, read, "delete_invoice"),
        CONFIRM
    );
    // With a destructive query the cell allows, and autonomous runs it without asking.
    assert_eq!(
        decide(&policy, &forced_auto, "destructive", "delete_invoice"),
        ALLOW
    );
    // The mode ceiling still applies (analyzer restricts to `none`).
    let forced_analyzer = admin("analyzer").forced(["delete_invoice", "export_business_data"]);
    assert_eq!(
        decide(&policy, &forced_analyzer, read, "delete_invoice"),
        (Decision::Deny, Some(Stage::Mode))
    );
    assert_eq!(
        decide(&policy, &forced_analyzer, read, "export_business_data"),
        (Decision::Deny, Some(Stage::Mode))
    );
    // So do permission, role and tenant.
    let no_perm = Request::new("supervised")
        .roles(["admin"])
        .tenant("b-42")
        .forced(["delete_invoice"]);
    assert_eq!(
        decide(&policy, &no_perm, read, "delete_invoice"),
        (Decision::Deny, Some(Stage::Permission))
    );
    let viewer = Request::new("supervised")
        .roles(["viewer"])
        .permissions(ALL_PERMISSIONS)
        .tenant("b-42")
        .forced(["delete_invoice"]);
    assert_eq!(
        decide(&policy, &viewer, read, "delete_invoice"),
        (Decision::Deny, Some(Stage::Role))
    );
    let no_tenant = Request::new("supervised")
        .roles(["admin"])
        .permissions(ALL_PERMISSIONS)
        .forced(["delete_invoice"]);
    assert_eq!(
        decide(&policy, &no_tenant, read, "delete_invoice"),
        (Decision::Deny, Some(Stage::Tenant))
    );
    // The execution guard honours the same exemption, then asks for confirmation.
    let mut turn = Turn::new();
    let v = policy
        .check_call(
            &forced,
            &Intent::named(read),
            &mut turn,
            "delete_invoice",
            &json!({"invoice_id": 7}),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), CONFIRM);
    let v = policy
        .check_call(
            &forced_analyzer,
            &Intent::named(read),
            &mut turn,
            "delete_invoice",
            &json!({}),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), (Decision::Deny, Some(Stage::Mode)));
    assert_eq!(v.reason, "mode `analyzer` does not allow effect `delete`");
}

#[test]
fn a_call_outside_the_offered_list_meets_check_call() {
    let policy = load();
    let request = admin("autonomous");
    let intent = policy.classify("show Ali's invoice");
    let offer = policy
        .offer(&request, &intent, ["search_invoices", "get_invoice"])
        .unwrap();
    assert_eq!(
        offer.visible().collect::<Vec<_>>(),
        ["search_invoices", "get_invoice"]
    );
    // The model calls delete_invoice, which it was never offered: the guard judges it anew.
    let mut turn = Turn::new();
    let v = policy
        .check_call(
            &request,
            &intent,
            &mut turn,
            "delete_invoice",
            &json!({"invoice_id": 7}),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), (Decision::Deny, Some(Stage::Intent)));
    assert_eq!(
        v.reason,
        "intent `read` does not offer effect `delete` in mode `autonomous` (matrix `standard`)"
    );
    assert_eq!(v.effect.as_deref(), Some("delete"));
    assert_eq!(v.operation_type, Some("transactional"));
    assert_eq!(
        v.source.as_deref(),
        Some(format!("{POLICY}:28:30").as_str())
    );
    // A name from no list at all.
    let v = policy
        .check_call(&request, &intent, &mut turn, "drop_database", &json!({}))
        .unwrap();
    assert_eq!((v.decision, v.stage), DENY_IDENTITY);
    // A call the offer did allow still runs, once the guard agrees.
    let v = policy
        .check_call(
            &request,
            &intent,
            &mut turn,
            "get_invoice",
            &json!({"invoice_id": 7}),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), ALLOW);
    assert_eq!(turn.transactional_calls, 0);
}

/// The digest of a held call is pinned: SHA-256 over the policy's name and version, the tool and
/// the canonical text of the arguments, so a pending call made by an earlier build of the same
/// policy still matches.
#[test]
fn the_digest_of_a_held_call_is_pinned_to_its_canonical_text() {
    let policy = load();
    let request = admin("supervised");
    let intent = policy.classify("create a new invoice for customer 12");
    let mut turn = Turn::new();
    let args = json!({
        "customer_id": "c-12",
        "amount": 100.25,
        "lines": [{"sku": "é\"\\\n\u{1}", "qty": -3}, null, true, 1e300],
        "Zeta": {"b": 1, "a": [], "": {}},
        "ünï": 18446744073709551615u64
    });
    let v = policy
        .check_call(&request, &intent, &mut turn, "create_invoice", &args)
        .unwrap();
    assert_eq!((v.decision, v.stage), CONFIRM);
    assert_eq!(
        toolwarden::canonical_json_text(&args),
        r#"{"Zeta":{"":{},"a":[],"b":1},"amount":100.25,"customer_id":"c-12","lines":[{"qty":-3,"sku":"é\"\\\n\u0001"},null,true,1e+300],"ünï":18446744073709551615}"#
    );
    assert_eq!(
        v.pending.unwrap().digest,
        "84b36b531042cb983b2e3aa168fc6fe0bb8b39c53723bd5be1850b49eff81e67"
    );
}

#[test]
fn a_write_call_without_approval_is_held_for_confirmation() {
    let policy = load();
    let request = admin("supervised");
    let intent = policy.classify("create a new invoice for customer 12");
    assert_eq!(intent.name, "write");
    let mut turn = Turn::new();
    // No approval: confirm, with the call held pending.
    let args = json!({"customer_id": "c-12", "amount": 100});
    let v = policy
        .check_call(&request, &intent, &mut turn, "create_invoice", &args)
        .unwrap();
    assert_eq!((v.decision, v.stage), CONFIRM);
    assert_eq!(v.reason, "`create_invoice` needs confirmation: ask the user, then repeat the call with `approve_writes` or `confirmed` set to true (mode `supervised` confirms effect `write`)");
    let pending = v.pending.clone().unwrap();
    assert_eq!(pending.tool, "create_invoice");
    assert_eq!(serde_json::Value::Object(pending.args.clone()), args);
    assert_eq!(pending.transaction_status, "AWAITING_CONFIRMATION");
    assert_eq!(pending.policy, "finance-assistant");
    assert_eq!(pending.policy_version, Some(1));
    assert_eq!(pending.digest.len(), 64);
    assert!(v.args_for_execution.is_none());
    let out = v.to_json();
    assert_eq!(out["ok"], json!(false));
    assert_eq!(out["confirmation_required"], json!(true));
    assert_eq!(
        out["confirmation_fields"],
        json!(["approve_writes", "confirmed"])
    );
    assert_eq!(out["metadata"]["blocked_by_policy"], json!(true));
    assert_eq!(out["metadata"]["stage"], json!("confirmation"));
    assert_eq!(turn.transactional_calls, 0);
    // `approve_writes` must be the JSON literal true.
    for not_true in [
        json!("true"),
        json!(1),
        json!(false),
        json!(null),
        json!("yes"),
    ] {
        let args = json!({"customer_id": "c-12", "amount": 100, "approve_writes": not_true});
        let v = policy
            .check_call(&request, &intent, &mut turn, "create_invoice", &args)
            .unwrap();
        assert_eq!(
            (v.decision, v.stage),
            CONFIRM,
            "approve_writes = {not_true}"
        );
        // The held call never carries the confirmation field.
        assert_eq!(v.pending.unwrap().digest, pending.digest);
    }
    // Approved: runs, without the approval field, and counts for the turn.
    let args = json!({"customer_id": "c-12", "amount": 100, "approve_writes": true});
    let v = policy
        .check_call_with(
            &request,
            &intent,
            &mut turn,
            "create_invoice",
            &args,
            Some(&pending),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), ALLOW);
    assert_eq!(
        serde_json::Value::Object(v.args_for_execution.unwrap()),
        json!({"customer_id": "c-12", "amount": 100})
    );
    assert_eq!(turn.transactional_calls, 1);
    // export and execute stay gated in autonomous mode too (high risk).
    let mut turn = Turn::new();
    for (tool, intent) in [
        ("export_business_data", "export"),
        ("execute_workflow", "execute"),
    ] {
        let v = policy
            .check_call(
                &admin("autonomous"),
                &Intent::named(intent),
                &mut turn,
                tool,
                &json!({}),
            )
            .unwrap();
        assert_eq!((v.decision, v.stage), CONFIRM, "{tool}");
    }
}

#[test]
fn a_tenant_argument_naming_another_business_is_denied() {
    let policy = load();
    let request = admin("autonomous");
    let intent = Intent::named("read");
    let mut turn = Turn::new();
    let v = policy
        .check_call(
            &request,
            &intent,
            &mut turn,
            "get_invoice",
            &json!({"invoice_id": 7, "business_id": "b-99"}),
        )
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::TenantArg))
    );
    assert_eq!(
        v.reason,
        "argument `business_id` names tenant `b-99`, but this session's tenant is `b-42`"
    );
    assert_eq!(
        v.source.as_deref(),
        Some(format!("{POLICY}:50:12").as_str())
    );
    assert_eq!(v.to_json()["metadata"]["stage"], json!("tenant_arg"));
    // A tenant argument that is not a string (a number, null) fails closed.
    for (args, kind) in [
        (json!({"business_id": 42}), "a number"),
        (json!({"business_id": null}), "null"),
        (json!({"business_id": ["b-42"]}), "an array"),
    ] {
        let v = policy
            .check_call(&request, &intent, &mut turn, "get_invoice", &args)
            .unwrap();
        assert_eq!(
            (v.decision, v.stage, v.reason.as_str()),
            (
                Decision::Deny,
                Some(Stage::TenantArg),
                format!("argument `business_id` must be the tenant's id (a string), not {kind}")
                    .as_str()
            ),
            "{args}"
        );
    }
    // The session's own tenant, or no tenant argument (injected by the session), passes.
    for args in [json!({"business_id": "b-42"}), json!({})] {
        let v = policy
            .check_call(&request, &intent, &mut turn, "get_invoice", &args)
            .unwrap();
        assert_eq!((v.decision, v.stage), ALLOW, "{args}");
    }
    // Stage 8 runs before confirmation: a write for another tenant is denied, not held.
    let v = policy
        .check_call(
            &admin("supervised"),
            &Intent::named("write"),
            &mut turn,
            "create_invoice",
            &json!({"customer_id": "c", "business_id": "b-7", "approve_writes": true}),
        )
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::TenantArg))
    );
    assert_eq!(turn.transactional_calls, 0);
}

#[test]
fn roles_include_the_roles_below_them() {
    let policy = load();
    let perms = ["invoices.delete"];
    let expected = [
        ("admin", ALLOW),      // admin > accountant
        ("accountant", ALLOW), // the role delete_invoice names
        ("viewer", (Decision::Deny, Some(Stage::Role))),
        ("auditor", (Decision::Deny, Some(Stage::Role))), // undeclared: grants nothing
    ];
    for (role, outcome) in expected {
        let request = Request::new("autonomous")
            .roles([role])
            .permissions(perms)
            .tenant("b-42");
        assert_eq!(
            decide(&policy, &request, "destructive", "delete_invoice"),
            outcome,
            "{role}"
        );
    }
    // No role at all.
    let request = Request::new("autonomous").permissions(perms).tenant("b-42");
    let d = policy
        .decide_tool(&request, &Intent::named("destructive"), "delete_invoice")
        .unwrap();
    assert_eq!((d.decision, d.stage), (Decision::Deny, Some(Stage::Role)));
    assert_eq!(
        policy.reason("delete_invoice", &d, &request),
        "`delete_invoice` needs one of the roles `accountant`"
    );
    assert_eq!(policy.rule_text(d.rule), "roles accountant");
    // Several roles: one that qualifies is enough.
    let request = Request::new("autonomous")
        .roles(["viewer", "admin"])
        .permissions(perms)
        .tenant("b-42");
    assert_eq!(
        decide(&policy, &request, "destructive", "delete_invoice"),
        ALLOW
    );
}

#[test]
fn permissions_imply_the_permissions_they_name() {
    let policy = load();
    let expected = [
        (
            vec!["invoices.manage"],
            "delete_invoice",
            "destructive",
            ALLOW,
        ),
        (vec!["invoices.manage"], "create_invoice", "write", ALLOW),
        (vec!["invoices.manage"], "search_invoices", "read", ALLOW),
        (
            vec!["invoices.delete"],
            "delete_invoice",
            "destructive",
            ALLOW,
        ),
        (
            vec!["invoices.view"],
            "delete_invoice",
            "destructive",
            (Decision::Deny, Some(Stage::Permission)),
        ),
        // Implication goes one way: the implied permission does not grant the one above it.
        (
            vec!["invoices.delete", "invoices.add", "invoices.view"],
            "export_business_data",
            "export",
            (Decision::Deny, Some(Stage::Permission)),
        ),
        // autonomous mode confirms `execute`.
        (
            vec!["workflows.manage"],
            "execute_workflow",
            "execute",
            CONFIRM,
        ),
        (
            vec!["workflows.run"],
            "create_workflow",
            "write",
            (Decision::Deny, Some(Stage::Permission)),
        ),
        (vec!["workflows.edit"], "create_workflow", "write", ALLOW),
    ];
    for (perms, tool, intent, outcome) in expected {
        let request = Request::new("autonomous")
            .roles(["admin"])
            .permissions(perms.clone())
            .tenant("b-42");
        let got = decide(&policy, &request, intent, tool);
        // create_workflow says `confirm always`.
        let outcome = if tool == "create_workflow" && outcome == ALLOW {
            CONFIRM
        } else {
            outcome
        };
        assert_eq!(got, outcome, "{perms:?} {tool}");
    }
}
