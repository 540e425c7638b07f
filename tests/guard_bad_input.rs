//! Bad input to the execution guard: each case is a clear error or a deny with its reason;
//! never a panic, never an allow.

use std::process::Command;

use proptest::prelude::*;
use serde_json::{json, Value};
use toolwarden::{
    limits, parse_args, ArgsError, Decision, PendingCall, Policy, Request, Stage, Turn,
};

fn retail() -> Policy {
    Policy::from_file("policies/retail.warden").expect("retail.warden loads")
}

fn call(
    policy: &Policy,
    tool: &str,
    args: &Value,
    pending: Option<&PendingCall>,
) -> toolwarden::Verdict {
    let mut turn = Turn::new();
    policy
        .check_call_with(
            &Request::default_mode(),
            &policy.fallback_intent(),
            &mut turn,
            tool,
            args,
            pending,
        )
        .expect("request fits")
}

fn pending_for(policy: &Policy, args: Value) -> PendingCall {
    call(policy, "devolver_pedido", &args, None)
        .pending
        .expect("devolver_pedido asks for confirmation")
}

#[test]
fn arguments_that_are_not_an_object_are_denied() {
    let policy = retail();
    for (args, kind) in [
        (json!([1, 2]), "an array"),
        (json!("order 123"), "a string"),
        (json!(null), "null"),
        (json!(true), "a boolean"),
        (json!(7), "a number"),
    ] {
        let v = call(&policy, "devolver_pedido", &args, None);
        assert_eq!(v.decision, Decision::Deny, "{args}");
        assert_eq!(v.stage, Some(Stage::Requires));
        assert_eq!(
            v.reason,
            format!("arguments of `devolver_pedido` must be a JSON object, not {kind}")
        );
    }
}

#[test]
fn missing_and_null_required_arguments_are_all_listed() {
    let policy = retail();
    let v = call(
        &policy,
        "devolver_pedido",
        &json!({"order_id": null, "confirmed": true}),
        None,
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Requires));
    assert_eq!(v.missing, ["order_id", "reason"]);
    assert_eq!(
        v.reason,
        "`devolver_pedido` requires arguments `order_id`, `reason`"
    );
    assert_eq!(
        v.to_json()["metadata"]["missing"],
        json!(["order_id", "reason"])
    );
}

#[test]
fn duplicated_keys_are_rejected_at_any_depth() {
    assert_eq!(
        parse_args(r#"{"confirmed": false, "confirmed": true}"#),
        Err(ArgsError::Invalid(
            "duplicate key `confirmed` at line 1 column 32".to_string()
        ))
    );
    assert_eq!(
        parse_args(r#"{"a": {"b": 1, "b": 2}}"#),
        Err(ArgsError::Invalid(
            "duplicate key `b` at line 1 column 18".to_string()
        ))
    );
    assert_eq!(
        parse_args(r#"{"order_id": "123", "confirmed": true}"#),
        Ok(json!({"order_id": "123", "confirmed": true}))
    );
}

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn nesting_is_capped_while_parsing() {
    assert_eq!(limits::MAX_ARGS_DEPTH, 64);
    assert!(parse_args(&nested(64)).is_ok());
    assert_eq!(
        parse_args(&nested(65)),
        Err(ArgsError::Invalid(
            "nested deeper than 64 levels at line 1 column 66".to_string()
        ))
    );
    // Hostile depth fails fast at the cap, without building the tree or blowing the stack.
    let hostile = "[".repeat(1_000_000);
    assert_eq!(
        parse_args(&hostile),
        Err(ArgsError::Invalid(
            "nested deeper than 64 levels at line 1 column 65".to_string()
        ))
    );
}

#[test]
fn deep_arguments_built_in_memory_are_denied() {
    let policy = retail();
    let mut deep = json!("x");
    for _ in 0..limits::MAX_ARGS_DEPTH {
        deep = json!([deep]);
    }
    // The object adds one level: 65 in all.
    let v = call(
        &policy,
        "devolver_pedido",
        &json!({"order_id": "1", "reason": deep, "confirmed": true}),
        None,
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Requires));
    assert_eq!(
        v.reason,
        "arguments of `devolver_pedido` are nested deeper than 64 levels"
    );
}

#[test]
fn huge_argument_text_is_rejected() {
    let huge = format!(r#"{{"reason": "{}"}}"#, "x".repeat(limits::MAX_ARGS_BYTES));
    assert_eq!(
        parse_args(&huge),
        Err(ArgsError::TooLarge {
            len: limits::MAX_ARGS_BYTES + 14,
            max: limits::MAX_ARGS_BYTES
        })
    );
}

#[test]
fn a_tampered_pending_call_is_denied() {
    let policy = retail();
    let args = json!({"order_id": "123", "reason": "r"});
    let mut pending = pending_for(&policy, args.clone());
    // Someone edits the stored arguments (and the call to match) but cannot fix the digest.
    pending.args.insert("order_id".into(), json!("999"));
    let v = call(
        &policy,
        "devolver_pedido",
        &json!({"order_id": "999", "reason": "r", "confirmed": true}),
        Some(&pending),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Confirmation));
    assert_eq!(
        v.reason,
        "the pending call is corrupt: its digest does not match its own tool and arguments"
    );
    // A status other than AWAITING_CONFIRMATION.
    let mut done = pending_for(&policy, args.clone());
    done.transaction_status = "DONE".into();
    let v = call(
        &policy,
        "devolver_pedido",
        &json!({"order_id": "123", "reason": "r", "confirmed": true}),
        Some(&done),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(
        v.reason,
        "the pending call's status is `DONE`, not `AWAITING_CONFIRMATION`"
    );
    // A confirmation for another tool.
    let other = pending_for(&policy, args);
    let v = call(
        &policy,
        "alterar_plano",
        &json!({"new_plan_id": "X", "confirmed": true}),
        Some(&other),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(
        v.reason,
        "the confirmation was for `devolver_pedido`, not `alterar_plano`"
    );
}

fn retail_v2() -> Policy {
    let text = std::fs::read_to_string("policies/retail.warden").expect("readable");
    let text = text.replace(
        "policy \"retail-agent\" version 1",
        "policy \"retail-agent\" version 2",
    );
    Policy::parse(&text, "policies/retail-v2.warden").expect("v2 loads")
}

#[test]
fn a_pending_call_from_another_policy_version_is_denied() {
    let v1 = retail();
    let v2 = retail_v2();
    assert_eq!(v2.version(), Some(2));
    let pending = pending_for(&v1, json!({"order_id": "123", "reason": "r"}));
    let v = call(
        &v2,
        "devolver_pedido",
        &json!({"order_id": "123", "reason": "r", "confirmed": true}),
        Some(&pending),
    );
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.stage, Some(Stage::Confirmation));
    assert_eq!(
        v.reason,
        "the pending call was made under policy `retail-agent` version 1, not `retail-agent` version 2; ask the user again"
    );
}

mod scratch;
use scratch::Scratch;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_rejects_bad_arguments_and_corrupt_state_files() {
    let dir = Scratch::new("bad-input");
    let base = [
        "guard",
        "-p",
        "policies/retail.warden",
        "--tool",
        "devolver_pedido",
    ];
    let with = |extra: &[&str]| {
        let mut v: Vec<&str> = base.to_vec();
        v.extend_from_slice(extra);
        run(&v)
    };

    let (code, out, err) = with(&["--args", r#"{"confirmed": false, "confirmed": true}"#]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        "error: `--args`: the arguments are not acceptable JSON: duplicate key `confirmed` at line 1 column 32\n"
    );

    let (code, _, err) = with(&["--args", "{\"order_id\": "]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "error: `--args`: the arguments are not acceptable JSON: EOF while parsing"
        ),
        "{err}"
    );

    let deep = nested(65);
    let (code, _, err) = with(&["--args", &deep]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "error: `--args`: the arguments are not acceptable JSON: nested deeper than 64 levels at line 1 column 66\n"
    );

    // Not an object: a deny with its reason (exit 0: guard reports verdicts).
    let (code, out, _) = with(&["--args", "[1]", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["metadata"]["stage"], json!("requires"));
    assert_eq!(
        v["error"],
        json!("arguments of `devolver_pedido` must be a JSON object, not an array")
    );

    // A corrupt pending file: a clear error, nothing allowed, the file left for inspection.
    let pending = dir.path("pending.json");
    let pending_s = pending.to_string_lossy().into_owned();
    std::fs::write(&pending, "{\"tool\": \"devolver_pedido\"").expect("write");
    let (code, out, err) = with(&[
        "--args",
        r#"{"order_id": "123", "reason": "r", "confirmed": true}"#,
        "--pending",
        &pending_s,
    ]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!("error: pending file `{pending_s}` is corrupt (EOF while parsing an object at line 1 column 26); delete it and ask the user to confirm again\n")
    );
    // A pending file with a field the format does not have.
    std::fs::write(
        &pending,
        r#"{"tool": "devolver_pedido", "args": {}, "digest": "00", "transaction_status": "AWAITING_CONFIRMATION", "policy": "retail-agent", "policy_version": 1, "approved": true}"#,
    )
    .expect("write");
    let (code, _, err) = with(&[
        "--args",
        r#"{"order_id": "123", "reason": "r", "confirmed": true}"#,
        "--pending",
        &pending_s,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown field `approved`"), "{err}");

    // A corrupt turn file.
    let turn = dir.path("turn.json");
    std::fs::write(&turn, "{\"transactional_calls\": -1}").expect("write");
    let (code, _, err) = with(&["--args", "{}", "--turn", &turn.to_string_lossy()]);
    assert_eq!(code, 2);
    assert!(err.contains("is corrupt"), "{err}");
    assert!(err.contains("delete it to start a new turn"), "{err}");

    // A pending file from policy version 1 presented to version 2: denied with the reason.
    let v1 = retail();
    let p = pending_for(&v1, json!({"order_id": "123", "reason": "r"}));
    std::fs::write(&pending, serde_json::to_string(&p).expect("json")).expect("write");
    let v2_path = dir.path("retail-v2.warden");
    std::fs::write(
        &v2_path,
        std::fs::read_to_string("policies/retail.warden")
            .expect("read")
            .replace("version 1", "version 2"),
    )
    .expect("write");
    let (code, out, _) = run(&[
        "guard",
        "-p",
        &v2_path.to_string_lossy(),
        "--tool",
        "devolver_pedido",
        "--args",
        r#"{"order_id": "123", "reason": "r", "confirmed": true}"#,
        "--pending",
        &pending_s,
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["metadata"]["stage"], json!("confirmation"));
    assert_eq!(
        v["error"],
        json!("the pending call was made under policy `retail-agent` version 1, not `retail-agent` version 2; ask the user again")
    );
    assert!(
        pending.exists(),
        "a denied confirmation keeps the pending file"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Whatever text arrives as arguments, parsing never panics, and the return tool runs only
    /// with a literal `true` confirmation and both required arguments present.
    #[test]
    fn no_text_sneaks_past_confirmation(text in "\\PC{0,80}", confirm in prop_oneof![
        Just(json!(true)), Just(json!("true")), Just(json!(1)), Just(json!("yes")), Just(json!(null))
    ]) {
        let policy = retail();
        if let Ok(v) = parse_args(&text) {
            let verdict = call(&policy, "devolver_pedido", &v, None);
            prop_assert_ne!(verdict.decision, Decision::Allow);
        }
        let args = json!({"order_id": text, "reason": "r", "confirmed": confirm});
        let verdict = call(&policy, "devolver_pedido", &args, None);
        let expected = if confirm == json!(true) { Decision::Allow } else { Decision::Confirm };
        prop_assert_eq!(verdict.decision, expected);
    }
}
