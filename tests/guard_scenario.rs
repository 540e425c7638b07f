//! Seed 004's scenario, end to end: "Quero devolver o pedido 123 porque me arrependi da
//! compra." -> the return tool waits for confirmation; "Sim, confirmo a devolução." with
//! `confirmed: true` and the same arguments -> allowed, the confirmation field stripped; the same
//! confirmation with another order id -> denied. Through the library and through the CLI.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use toolwarden::{Decision, PendingCall, Policy, Request, Stage, Turn};

const ASK: &str = "Quero devolver o pedido 123 porque me arrependi da compra.";
const CONFIRM: &str = "Sim, confirmo a devolução.";

fn retail() -> Policy {
    Policy::from_file("policies/retail.warden").expect("retail.warden loads")
}

#[test]
fn library_two_turn_confirmation_flow() {
    let policy = retail();
    let request = Request::default_mode();

    // Turn 1: the model picks the return tool with the order id and the reason.
    let mut turn = Turn::new();
    let args = json!({"order_id": "123", "reason": "arrependimento"});
    let v = policy
        .check_call(
            &request,
            &policy.classify(ASK),
            &mut turn,
            "devolver_pedido",
            &args,
        )
        .expect("request fits");
    assert_eq!(v.decision, Decision::Confirm);
    assert!(v.needs_confirmation() && !v.confirmation_received);
    assert_eq!(v.stage, Some(Stage::Confirmation));
    assert_eq!(v.source.as_deref(), Some("policies/retail.warden:21:66"));
    assert_eq!(v.args_for_execution, None);
    assert_eq!(turn.transactional_calls, 0, "a pending call does not count");
    let pending = v.pending.clone().expect("a pending call");
    assert_eq!(pending.tool, "devolver_pedido");
    assert_eq!(Value::Object(pending.args.clone()), args);
    assert_eq!(pending.transaction_status, "AWAITING_CONFIRMATION");
    assert_eq!(pending.policy, "retail-agent");
    assert_eq!(pending.policy_version, Some(1));
    assert_eq!(pending.digest.len(), 64);
    assert_eq!(
        v.to_json(),
        json!({
            "ok": false,
            "decision": "confirm",
            "tool": "devolver_pedido",
            "error": "`devolver_pedido` needs confirmation: ask the user, then repeat the call with `confirmed` or `confirmation` set to true (`devolver_pedido` says `confirm always`)",
            "metadata": {
                "blocked_by_policy": true,
                "stage": "confirmation",
                "operation_type": "transactional",
                "effect": "write",
                "policy_source": "policies/retail.warden:21:66",
            },
            "confirmation_required": true,
            "confirmation_fields": ["confirmed", "confirmation"],
            "transaction_status": "AWAITING_CONFIRMATION",
            "pending_call": serde_json::to_value(&pending).expect("serializes"),
        })
    );

    // The agent persists the pending call between turns.
    let stored = serde_json::to_string(&pending).expect("serializes");
    let pending: PendingCall = serde_json::from_str(&stored).expect("round-trips");

    // Turn 2: the user says yes; the same call comes back with `confirmed: true`.
    let mut turn = Turn::new();
    let confirmed = json!({"order_id": "123", "reason": "arrependimento", "confirmed": true});
    let v = policy
        .check_call_with(
            &request,
            &policy.classify(CONFIRM),
            &mut turn,
            "devolver_pedido",
            &confirmed,
            Some(&pending),
        )
        .expect("request fits");
    assert_eq!(v.decision, Decision::Allow);
    assert!(v.is_allowed() && v.confirmation_received);
    assert_eq!(v.stage, None);
    assert_eq!(
        v.args_for_execution.map(Value::Object),
        Some(json!({"order_id": "123", "reason": "arrependimento"})),
        "the confirmation field never reaches the tool"
    );
    assert_eq!(turn.transactional_calls, 1);

    // The same confirmation with another order id: the model swapped the arguments.
    let mut turn = Turn::new();
    let swapped = json!({"order_id": "456", "reason": "arrependimento", "confirmed": true});
    let v = policy
        .check_call_with(
            &request,
            &policy.classify(CONFIRM),
            &mut turn,
            "devolver_pedido",
            &swapped,
            Some(&pending),
        )
        .expect("request fits");
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Confirmation));
    assert_eq!(
        v.reason,
        "the arguments of `devolver_pedido` differ from the call the user confirmed"
    );
    assert_eq!(v.source.as_deref(), Some("policies/retail.warden:15:16"));
    assert_eq!(v.args_for_execution, None);
    assert_eq!(turn.transactional_calls, 0);
}

#[test]
fn only_a_literal_true_confirms() {
    let policy = retail();
    let request = Request::default_mode();
    for bad in [
        json!("true"),
        json!(1),
        json!("yes"),
        json!(false),
        json!(null),
    ] {
        for field in ["confirmed", "confirmation"] {
            let mut turn = Turn::new();
            let mut args = json!({"order_id": "123", "reason": "r"});
            args[field] = bad.clone();
            let v = policy
                .check_call(
                    &request,
                    &policy.classify(CONFIRM),
                    &mut turn,
                    "devolver_pedido",
                    &args,
                )
                .expect("request fits");
            assert_eq!(v.decision, Decision::Confirm, "{field}: {bad}");
            let pending = v.pending.expect("pending");
            assert_eq!(
                Value::Object(pending.args),
                json!({"order_id": "123", "reason": "r"}),
                "the confirmation field is removed from the pending call"
            );
        }
    }
    let mut turn = Turn::new();
    let v = policy
        .check_call(
            &request,
            &policy.classify(CONFIRM),
            &mut turn,
            "devolver_pedido",
            &json!({"order_id": "123", "reason": "r", "confirmation": true}),
        )
        .expect("request fits");
    assert_eq!(v.decision, Decision::Allow);
}

#[test]
fn one_transactional_call_per_turn_and_reads_never_count() {
    let policy = retail();
    let request = Request::default_mode();
    let intent = policy.classify(CONFIRM);
    let mut turn = Turn::new();
    for _ in 0..3 {
        let v = policy
            .check_call(
                &request,
                &intent,
                &mut turn,
                "consultar_pedido",
                &json!({"order_id": "123"}),
            )
            .expect("fits");
        assert_eq!(v.decision, Decision::Allow);
        assert_eq!(v.operation_type, Some("read_only"));
    }
    assert_eq!(turn.transactional_calls, 0);
    let call = json!({"new_plan_id": "CONTROLE_100", "confirmed": true});
    let first = policy
        .check_call(&request, &intent, &mut turn, "alterar_plano", &call)
        .expect("fits");
    assert_eq!(first.decision, Decision::Allow);
    let second = policy
        .check_call(&request, &intent, &mut turn, "alterar_plano", &call)
        .expect("fits");
    assert_eq!(second.decision, Decision::Deny);
    assert_eq!(second.stage, Some(Stage::TurnLimit));
    assert_eq!(
        second.reason,
        "this turn already ran 1 transactional call; the limit is 1 per turn"
    );
    assert_eq!(
        second.source.as_deref(),
        Some("policies/retail.warden:16:1")
    );
    assert_eq!(turn.transactional_calls, 1);
}

mod scratch;
use scratch::Scratch;

/// Runs `toolwarden guard --json` on retail.warden; returns the exit code and the JSON printed.
fn guard(query: &str, args: &str, pending: &Path, turn: &Path) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["guard", "-p", "policies/retail.warden", "--query", query])
        .args(["--tool", "devolver_pedido", "--args", args, "--json"])
        .arg("--pending")
        .arg(pending)
        .arg("--turn")
        .arg(turn)
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json)
}

#[test]
fn cli_two_turn_flow_with_pending_and_turn_files() {
    let dir = Scratch::new("scenario");
    let (pending, turn) = (dir.path("pending.json"), dir.path("turn.json"));

    // Turn 1: pending confirmation, written to the pending file; the turn file is created.
    let (code, out) = guard(
        ASK,
        r#"{"order_id": "123", "reason": "arrependimento"}"#,
        &pending,
        &turn,
    );
    assert_eq!(code, 0);
    assert_eq!(out["ok"], json!(false));
    assert_eq!(out["confirmation_required"], json!(true));
    assert_eq!(out["metadata"]["stage"], json!("confirmation"));
    let stored: PendingCall =
        serde_json::from_str(&std::fs::read_to_string(&pending).expect("pending written"))
            .expect("pending file parses");
    assert_eq!(stored.tool, "devolver_pedido");
    assert_eq!(
        Value::Object(stored.args.clone()),
        json!({"order_id": "123", "reason": "arrependimento"})
    );
    assert_eq!(out["pending_call"], serde_json::to_value(&stored).unwrap());
    // The turn file records the call held in this turn: it is confirmed in a later one.
    assert_eq!(
        std::fs::read_to_string(&turn).expect("turn written"),
        format!(
            r#"{{"transactional_calls":0,"held":["{}"]}}"#,
            stored.digest
        )
    );

    // Turn 2, a swapped order id: denied, the pending call stays.
    std::fs::remove_file(&turn).expect("a new user turn");
    let (code, out) = guard(
        CONFIRM,
        r#"{"order_id": "456", "reason": "arrependimento", "confirmed": true}"#,
        &pending,
        &turn,
    );
    assert_eq!(code, 0);
    assert_eq!(
        out,
        json!({
            "ok": false,
            "decision": "deny",
            "tool": "devolver_pedido",
            "error": "the arguments of `devolver_pedido` differ from the call the user confirmed",
            "metadata": {
                "blocked_by_policy": true,
                "stage": "confirmation",
                "operation_type": "transactional",
                "effect": "write",
                "policy_source": "policies/retail.warden:15:16",
            }
        })
    );
    assert!(
        pending.exists(),
        "a denied confirmation keeps the pending call"
    );

    // Turn 2, the same call confirmed: allowed, `confirmed` stripped, the pending file consumed.
    let (code, out) = guard(
        CONFIRM,
        r#"{"order_id": "123", "reason": "arrependimento", "confirmed": true}"#,
        &pending,
        &turn,
    );
    assert_eq!(code, 0);
    assert_eq!(
        out,
        json!({
            "ok": true,
            "decision": "allow",
            "tool": "devolver_pedido",
            "args": {"order_id": "123", "reason": "arrependimento"},
            "confirmation_received": true,
            "metadata": {
                "blocked_by_policy": false,
                "operation_type": "transactional",
                "effect": "write",
                "policy_source": "policies/retail.warden:21:1",
            }
        })
    );
    assert!(!pending.exists(), "the confirmed pending call is consumed");
    assert_eq!(
        std::fs::read_to_string(&turn).expect("turn kept"),
        r#"{"transactional_calls":1}"#
    );

    // The same confirmed call replayed: its pending call was consumed, so nothing awaits
    // confirmation and the replay is denied (only the user confirms, once).
    let (_, out) = guard(
        CONFIRM,
        r#"{"order_id": "123", "reason": "arrependimento", "confirmed": true}"#,
        &pending,
        &turn,
    );
    assert_eq!(out["ok"], json!(false));
    assert_eq!(out["metadata"]["stage"], json!("confirmation"));
    assert!(out["error"]
        .as_str()
        .is_some_and(|e| e.contains("no call is awaiting confirmation")));
}
