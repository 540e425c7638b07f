//! Seed 004 (`tool_policies.yaml` for MCP tools) on `policies/retail.warden`: a transactional
//! call runs only with its `requires` arguments and a literal JSON `true` in `confirmed` or
//! `confirmation`; the blocked result has the seed's shape; a pending call is bound to its
//! arguments by a digest; at most one transactional call runs per turn, read-only calls never
//! count.
//!
//! The policy is loaded by its relative path (integration tests run in the crate root), so
//! `policy_source` reads `policies/retail.warden:LINE:COL` on every platform.

use serde_json::{json, Value};
use toolwarden::{Decision, Policy, Request, Stage, Turn, Verdict};

const POLICY: &str = "policies/retail.warden";

fn load() -> Policy {
    Policy::from_file(POLICY).unwrap_or_else(|e| panic!("{}", e.render()))
}

/// One call in a fresh turn, in the policy's default mode, with the intent `classify` gives.
fn call(policy: &Policy, turn: &mut Turn, tool: &str, args: Value) -> Verdict {
    let intent = policy.classify("Quero alterar meu plano");
    policy
        .check_call(&Request::default_mode(), &intent, turn, tool, &args)
        .unwrap()
}

fn exec_args(v: &Verdict) -> Value {
    Value::Object(
        v.args_for_execution
            .clone()
            .expect("an allowed call has arguments"),
    )
}

#[test]
fn a_literal_true_in_either_confirmation_field_runs_the_call() {
    let policy = load();
    for field in ["confirmed", "confirmation"] {
        let mut turn = Turn::new();
        let v = call(
            &policy,
            &mut turn,
            "alterar_plano",
            json!({"new_plan_id": "CONTROLE_100", field: true}),
        );
        assert_eq!((v.decision, v.stage), (Decision::Allow, None), "{field}");
        assert_eq!(v.reason, "`alterar_plano` may run");
        assert_eq!(v.operation_type, Some("transactional"));
        // The confirmation field is not handed to the tool.
        assert_eq!(exec_args(&v), json!({"new_plan_id": "CONTROLE_100"}));
        assert_eq!(
            v.to_json(),
            json!({
                "ok": true,
                "decision": "allow",
                "tool": "alterar_plano",
                "args": {"new_plan_id": "CONTROLE_100"},
                "confirmation_received": true,
                "metadata": {
                    "blocked_by_policy": false,
                    "operation_type": "transactional",
                    "effect": "write",
                    "policy_source": "policies/retail.warden:19:1",
                }
            })
        );
        assert_eq!(turn.transactional_calls, 1);
    }
    // Both fields at once: both are removed.
    let mut turn = Turn::new();
    let v = call(
        &policy,
        &mut turn,
        "alterar_plano",
        json!({"new_plan_id": "X", "confirmed": true, "confirmation": true}),
    );
    assert_eq!(exec_args(&v), json!({"new_plan_id": "X"}));
}

#[test]
fn anything_but_the_literal_true_asks_for_confirmation() {
    let policy = load();
    let refused = [
        json!("true"),
        json!(1),
        json!("yes"),
        json!("sim"),
        json!(false),
        json!(null),
        json!([true]),
        json!({"value": true}),
        json!("True"),
    ];
    for field in ["confirmed", "confirmation"] {
        for value in &refused {
            let mut turn = Turn::new();
            let v = call(
                &policy,
                &mut turn,
                "alterar_plano",
                json!({"new_plan_id": "CONTROLE_100", field: value}),
            );
            assert_eq!(
                (v.decision, v.stage),
                (Decision::Confirm, Some(Stage::Confirmation)),
                "{field} = {value}"
            );
            assert_eq!(
                v.reason,
                "`alterar_plano` needs confirmation: ask the user, then repeat the call with `confirmed` or `confirmation` set to true (`alterar_plano` says `confirm always`)"
            );
            assert!(v.args_for_execution.is_none());
            // The pending call holds the arguments without the confirmation field.
            let pending = v.pending.as_ref().unwrap();
            assert_eq!(
                Value::Object(pending.args.clone()),
                json!({"new_plan_id": "CONTROLE_100"})
            );
            assert_eq!(turn.transactional_calls, 0);
        }
    }
    // No confirmation field at all.
    let mut turn = Turn::new();
    let v = call(
        &policy,
        &mut turn,
        "alterar_plano",
        json!({"new_plan_id": "CONTROLE_100"}),
    );
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Confirm, Some(Stage::Confirmation))
    );
}

#[test]
fn the_confirm_result_has_the_pending_call() {
    let policy = load();
    let mut turn = Turn::new();
    let v = call(
        &policy,
        &mut turn,
        "alterar_plano",
        json!({"new_plan_id": "CONTROLE_100", "confirmed": "true"}),
    );
    let digest = v.pending.as_ref().unwrap().digest.clone();
    assert_eq!(digest.len(), 64);
    assert!(digest.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        v.to_json(),
        json!({
            "ok": false,
            "decision": "confirm",
            "tool": "alterar_plano",
            "error": "`alterar_plano` needs confirmation: ask the user, then repeat the call with `confirmed` or `confirmation` set to true (`alterar_plano` says `confirm always`)",
            "metadata": {
                "blocked_by_policy": true,
                "stage": "confirmation",
                "operation_type": "transactional",
                "effect": "write",
                "policy_source": "policies/retail.warden:19:66",
            },
            "confirmation_required": true,
            "confirmation_fields": ["confirmed", "confirmation"],
            "transaction_status": "AWAITING_CONFIRMATION",
            "pending_call": {
                "tool": "alterar_plano",
                "args": {"new_plan_id": "CONTROLE_100"},
                "digest": digest,
                "transaction_status": "AWAITING_CONFIRMATION",
                "policy": "retail-agent",
                "policy_version": 1,
            }
        })
    );
}

#[test]
fn missing_or_null_required_arguments_are_denied_listing_every_name() {
    let policy = load();
    let cases = [
        // (tool, args, missing)
        (
            "alterar_plano",
            json!({"confirmed": true}),
            vec!["new_plan_id"],
        ),
        (
            "alterar_plano",
            json!({"new_plan_id": null, "confirmed": true}),
            vec!["new_plan_id"],
        ),
        ("alterar_plano", json!({"plan": "X"}), vec!["new_plan_id"]),
        (
            "devolver_pedido",
            json!({"confirmed": true}),
            vec!["order_id", "reason"],
        ),
        (
            "devolver_pedido",
            json!({"order_id": null, "reason": null}),
            vec!["order_id", "reason"],
        ),
        (
            "devolver_pedido",
            json!({"order_id": "123", "confirmed": true}),
            vec!["reason"],
        ),
        (
            "devolver_pedido",
            json!({"reason": "arrependimento"}),
            vec!["order_id"],
        ),
        ("consultar_pedido", json!({}), vec!["order_id"]),
    ];
    for (tool, args, missing) in cases {
        let mut turn = Turn::new();
        let v = call(&policy, &mut turn, tool, args.clone());
        assert_eq!(
            (v.decision, v.stage),
            (Decision::Deny, Some(Stage::Requires)),
            "{tool} {args}"
        );
        assert_eq!(v.missing, missing, "{tool} {args}");
        let list = missing
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let plural = if missing.len() == 1 { "" } else { "s" };
        assert_eq!(
            v.reason,
            format!("`{tool}` requires argument{plural} {list}")
        );
        assert_eq!(v.to_json()["metadata"]["missing"], json!(missing));
        assert_eq!(v.to_json()["metadata"]["stage"], json!("requires"));
        assert!(
            v.pending.is_none(),
            "a call missing arguments is not held for confirmation"
        );
        assert_eq!(turn.transactional_calls, 0);
    }
    // Present but falsy values are present: requires only checks absence and null.
    let mut turn = Turn::new();
    let v = call(
        &policy,
        &mut turn,
        "devolver_pedido",
        json!({"order_id": 0, "reason": "", "confirmation": true}),
    );
    assert_eq!((v.decision, v.stage), (Decision::Allow, None));
    assert_eq!(exec_args(&v), json!({"order_id": 0, "reason": ""}));
}

#[test]
fn the_blocked_result_has_the_seed_shape() {
    let policy = load();
    let mut turn = Turn::new();
    let v = call(
        &policy,
        &mut turn,
        "devolver_pedido",
        json!({"confirmed": true}),
    );
    assert_eq!(
        v.to_json(),
        json!({
            "ok": false,
            "decision": "deny",
            "tool": "devolver_pedido",
            "error": "`devolver_pedido` requires arguments `order_id`, `reason`",
            "metadata": {
                "blocked_by_policy": true,
                "stage": "requires",
                "operation_type": "transactional",
                "effect": "write",
                "policy_source": "policies/retail.warden:21:39",
                "missing": ["order_id", "reason"],
            }
        })
    );
    // A tool the policy does not know: denied at identity, with no effect to report.
    let v = call(&policy, &mut turn, "cancelar_conta", json!({}));
    assert_eq!(
        v.to_json(),
        json!({
            "ok": false,
            "decision": "deny",
            "tool": "cancelar_conta",
            "error": "`cancelar_conta` is not declared by the policy and unknown tools are denied",
            "metadata": {
                "blocked_by_policy": true,
                "stage": "identity",
                "operation_type": null,
                "effect": null,
                "policy_source": "policies/retail.warden:14:1",
            }
        })
    );
    // Arguments that are not a JSON object.
    let v = call(&policy, &mut turn, "consultar_plano", json!(["x"]));
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::Requires))
    );
    assert_eq!(
        v.reason,
        "arguments of `consultar_plano` must be a JSON object, not an array"
    );
    assert_eq!(
        v.to_json()["metadata"]["operation_type"],
        json!("read_only")
    );
}

#[test]
fn a_confirmation_must_match_the_pending_call() {
    let policy = load();
    let intent = policy.classify("Quero devolver o pedido 123 porque me arrependi da compra.");
    let request = Request::default_mode();
    let mut turn = Turn::new();
    let first = json!({"order_id": "123", "reason": "arrependimento"});
    let v = policy
        .check_call(&request, &intent, &mut turn, "devolver_pedido", &first)
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Confirm, Some(Stage::Confirmation))
    );
    let pending = v.pending.unwrap();
    // The pending call survives a round trip through JSON (persisted between turns).
    let pending: toolwarden::PendingCall =
        serde_json::from_value(serde_json::to_value(&pending).unwrap()).unwrap();

    // "Sim, confirmo a devolução." -- but the model changed the order id.
    let tampered = json!({"order_id": "999", "reason": "arrependimento", "confirmed": true});
    let v = policy
        .check_call_with(
            &request,
            &intent,
            &mut turn,
            "devolver_pedido",
            &tampered,
            Some(&pending),
        )
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::Confirmation))
    );
    assert_eq!(
        v.reason,
        "the arguments of `devolver_pedido` differ from the call the user confirmed"
    );
    assert_eq!(v.source.as_deref(), Some("policies/retail.warden:15:16"));
    // Another tool under the same confirmation.
    let v = policy
        .check_call_with(
            &request,
            &intent,
            &mut turn,
            "alterar_plano",
            &json!({"new_plan_id": "X", "confirmed": true}),
            Some(&pending),
        )
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::Confirmation))
    );
    assert_eq!(
        v.reason,
        "the confirmation was for `devolver_pedido`, not `alterar_plano`"
    );
    // A forged digest.
    let mut forged = pending.clone();
    forged.digest = "0".repeat(64);
    let same = json!({"order_id": "123", "reason": "arrependimento", "confirmed": true});
    let v = policy
        .check_call_with(
            &request,
            &intent,
            &mut turn,
            "devolver_pedido",
            &same,
            Some(&forged),
        )
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::Confirmation))
    );
    assert_eq!(turn.transactional_calls, 0);
    // The same call, confirmed: runs once, with the held arguments. Key order does not matter.
    let same = json!({"confirmed": true, "reason": "arrependimento", "order_id": "123"});
    let v = policy
        .check_call_with(
            &request,
            &intent,
            &mut turn,
            "devolver_pedido",
            &same,
            Some(&pending),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), (Decision::Allow, None));
    assert_eq!(exec_args(&v), first);
    assert_eq!(turn.transactional_calls, 1);
}

#[test]
fn one_transactional_call_per_turn_and_reads_never_count() {
    let policy = load();
    let mut turn = Turn::new();
    // Reads before, between and after: they run and do not count.
    for _ in 0..3 {
        let v = call(&policy, &mut turn, "consultar_plano", json!({}));
        assert_eq!((v.decision, v.stage), (Decision::Allow, None));
        assert_eq!(v.operation_type, Some("read_only"));
    }
    assert_eq!(turn.transactional_calls, 0);
    // A confirm does not use the turn's transactional call.
    let v = call(
        &policy,
        &mut turn,
        "alterar_plano",
        json!({"new_plan_id": "A"}),
    );
    assert_eq!(v.decision, Decision::Confirm);
    assert_eq!(turn.transactional_calls, 0);
    // The first confirmed transactional call runs.
    let v = call(
        &policy,
        &mut turn,
        "alterar_plano",
        json!({"new_plan_id": "A", "confirmed": true}),
    );
    assert_eq!((v.decision, v.stage), (Decision::Allow, None));
    assert_eq!(turn.transactional_calls, 1);
    // Reads still run.
    let v = call(
        &policy,
        &mut turn,
        "consultar_pedido",
        json!({"order_id": "123"}),
    );
    assert_eq!((v.decision, v.stage), (Decision::Allow, None));
    assert_eq!(turn.transactional_calls, 1);
    // The second transactional call of the turn is denied, whichever tool it is.
    for (tool, args) in [
        (
            "alterar_plano",
            json!({"new_plan_id": "B", "confirmed": true}),
        ),
        (
            "devolver_pedido",
            json!({"order_id": "123", "reason": "r", "confirmation": true}),
        ),
    ] {
        let v = call(&policy, &mut turn, tool, args);
        assert_eq!(
            (v.decision, v.stage),
            (Decision::Deny, Some(Stage::TurnLimit)),
            "{tool}"
        );
        assert_eq!(
            v.reason,
            "this turn already ran 1 transactional call; the limit is 1 per turn"
        );
        assert_eq!(v.source.as_deref(), Some("policies/retail.warden:16:1"));
    }
    assert_eq!(turn.transactional_calls, 1);
    // A new turn starts again.
    let mut next = Turn::new();
    let v = call(
        &policy,
        &mut next,
        "alterar_plano",
        json!({"new_plan_id": "B", "confirmed": true}),
    );
    assert_eq!((v.decision, v.stage), (Decision::Allow, None));
}

#[test]
fn offer_shows_every_enabled_tool_with_its_confirmation() {
    let policy = load();
    let intent = policy.classify("Sim, confirmo a devolução.");
    let offer = policy
        .offer(
            &Request::default_mode(),
            &intent,
            [
                "consultar_plano",
                "alterar_plano",
                "consultar_pedido",
                "devolver_pedido",
                "apagar_tudo",
            ],
        )
        .unwrap();
    let got: Vec<(&str, Decision, Option<Stage>)> = offer
        .entries()
        .iter()
        .map(|(n, d)| (*n, d.decision, d.stage))
        .collect();
    assert_eq!(
        got,
        [
            ("consultar_plano", Decision::Allow, None),
            (
                "alterar_plano",
                Decision::Confirm,
                Some(Stage::Confirmation)
            ),
            ("consultar_pedido", Decision::Allow, None),
            (
                "devolver_pedido",
                Decision::Confirm,
                Some(Stage::Confirmation)
            ),
            ("apagar_tudo", Decision::Deny, Some(Stage::Identity)),
        ]
    );
}
