//! Only the user confirms: a confirmation is trusted only against a pending call, a pending
//! call that matches the call presented exempts its tool from the intent stage (seed 001's
//! `force_tool_names` for a confirmation in flight), the state files of `guard` are locked and
//! written through unique temporary files, and every result names its decision and tool.
//! Through the library and through the CLI.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use toolwarden::{Decision, Policy, Request, Stage, Turn};

fn finance() -> Policy {
    Policy::from_file("policies/finance.warden").expect("finance.warden loads")
}

fn retail() -> Policy {
    Policy::from_file("policies/retail.warden").expect("retail.warden loads")
}

fn accountant(mode: &str) -> Request {
    Request::new(mode)
        .roles(["accountant"])
        .permissions(["invoices.manage"])
        .tenant("b-42")
}

const NO_PENDING: &str = "`devolver_pedido` carries a confirmation, but no call is awaiting confirmation: only the user confirms, so call it without the confirmation field, ask the user, then repeat it with the pending call";

// ---------------------------------------------------------------------------------------------
// Library
// ---------------------------------------------------------------------------------------------

#[test]
fn strict_check_call_denies_a_confirmation_no_call_awaits() {
    let policy = retail();
    let request = Request::default_mode();
    let intent = policy.fallback_intent();
    let mut turn = Turn::new();
    let args = json!({"order_id": "123", "reason": "r", "confirmed": true});
    let v = policy
        .check_call_strict(&request, &intent, &mut turn, "devolver_pedido", &args, None)
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::Confirmation))
    );
    assert_eq!(v.reason, NO_PENDING);
    assert_eq!(
        v.source.as_deref(),
        Some("policies/retail.warden:15:16"),
        "the `confirm fields` line decides"
    );
    assert_eq!(turn.transactional_calls, 0);

    // Asked first (no confirmation field): a pending call; then confirmed against it: runs.
    let asked = policy
        .check_call_strict(
            &request,
            &intent,
            &mut turn,
            "devolver_pedido",
            &policy.strip_confirmation(&args),
            None,
        )
        .unwrap();
    assert_eq!(asked.decision, Decision::Confirm);
    let pending = asked.pending.expect("a pending call");
    let v = policy
        .check_call_strict(
            &request,
            &intent,
            &mut turn,
            "devolver_pedido",
            &args,
            Some(&pending),
        )
        .unwrap();
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(
        v.args_for_execution.map(Value::Object),
        Some(json!({"order_id": "123", "reason": "r"}))
    );
    assert_eq!(turn.transactional_calls, 1);

    // A tool that needs no confirmation runs whatever fields the model adds (stripped).
    let v = policy
        .check_call_strict(
            &request,
            &intent,
            &mut Turn::new(),
            "consultar_plano",
            &json!({"confirmed": true}),
            None,
        )
        .unwrap();
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(v.args_for_execution.map(Value::Object), Some(json!({})));
}

#[test]
fn strip_confirmation_removes_every_confirm_field_and_nothing_else() {
    let policy = finance();
    assert_eq!(
        policy.strip_confirmation(&json!({
            "invoice_id": 7,
            "approve_writes": true,
            "confirmed": "true",
            "confirmation": true,
        })),
        // `confirmation` is not one of finance's `confirm fields`.
        json!({"invoice_id": 7, "confirmation": true})
    );
    assert_eq!(policy.strip_confirmation(&json!([1])), json!([1]));
}

#[test]
fn a_matching_pending_call_exempts_its_tool_from_the_intent_stage() {
    let policy = finance();
    let request = accountant("supervised");
    let args = json!({"customer_id": "c-12", "amount": 100});
    let asked = policy
        .check_call_strict(
            &request,
            &policy.classify("create a new invoice"),
            &mut Turn::new(),
            "create_invoice",
            &args,
            None,
        )
        .unwrap();
    assert_eq!(asked.decision, Decision::Confirm);
    let pending = asked.pending.expect("a pending call");

    // Turn 2: "yes" classifies as `read`, whose row denies writes.
    let yes = policy.classify("yes");
    assert_eq!(&*yes.name, "read");
    let confirmed = json!({"customer_id": "c-12", "amount": 100, "approve_writes": true});
    let without = policy
        .check_call_strict(
            &request,
            &yes,
            &mut Turn::new(),
            "create_invoice",
            &confirmed,
            None,
        )
        .unwrap();
    assert_eq!(
        without.stage,
        Some(Stage::Intent),
        "no pending call: stage 7"
    );

    let mut turn = Turn::new();
    let v = policy
        .check_call_strict(
            &request,
            &yes,
            &mut turn,
            "create_invoice",
            &confirmed,
            Some(&pending),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), (Decision::Allow, None));
    assert_eq!(v.args_for_execution.map(Value::Object), Some(args.clone()));
    assert_eq!(turn.transactional_calls, 1);

    // The exemption needs the very call: other arguments still meet stage 7.
    let other = json!({"customer_id": "c-12", "amount": 1, "approve_writes": true});
    let v = policy
        .check_call_strict(
            &request,
            &yes,
            &mut Turn::new(),
            "create_invoice",
            &other,
            Some(&pending),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), (Decision::Deny, Some(Stage::Intent)));

    // Unconfirmed, the matching call is still only held: forcing never skips the question.
    let v = policy
        .check_call_strict(
            &request,
            &yes,
            &mut Turn::new(),
            "create_invoice",
            &args,
            Some(&pending),
        )
        .unwrap();
    assert_eq!(v.decision, Decision::Confirm);

    // Stages 1–6 still apply: the analyzer mode's ceiling holds, and so do permissions.
    let v = policy
        .check_call_strict(
            &accountant("analyzer"),
            &yes,
            &mut Turn::new(),
            "create_invoice",
            &confirmed,
            Some(&pending),
        )
        .unwrap();
    assert_eq!((v.decision, v.stage), (Decision::Deny, Some(Stage::Mode)));
    let v = policy
        .check_call_strict(
            &Request::new("supervised").tenant("b-42"),
            &yes,
            &mut Turn::new(),
            "create_invoice",
            &confirmed,
            Some(&pending),
        )
        .unwrap();
    assert_eq!(
        (v.decision, v.stage),
        (Decision::Deny, Some(Stage::Permission))
    );
}

#[test]
fn every_verdict_json_carries_decision_and_tool() {
    let policy = retail();
    let request = Request::default_mode();
    let intent = policy.fallback_intent();
    for (tool, args, decision) in [
        ("consultar_plano", json!({}), "allow"),
        ("alterar_plano", json!({"new_plan_id": "X"}), "confirm"),
        ("devolver_pedido", json!({}), "deny"),
        ("cancelar_conta", json!({}), "deny"),
    ] {
        let v = policy
            .check_call(&request, &intent, &mut Turn::new(), tool, &args)
            .unwrap();
        let out = v.to_json();
        assert_eq!(out["decision"], json!(decision), "{tool}");
        assert_eq!(out["tool"], json!(tool), "{tool}");
    }
}

// ---------------------------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------------------------

mod scratch;
use scratch::Scratch;

fn toolwarden() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap_or(Value::Null)
}

#[test]
fn guard_pending_denies_a_confirmation_when_no_call_is_awaiting() {
    let dir = Scratch::new("no-pending");
    let pending = dir.path("pending.json");
    let out = toolwarden()
        .args([
            "guard",
            "-p",
            "policies/retail.warden",
            "--tool",
            "devolver_pedido",
        ])
        .args([
            "--args",
            r#"{"order_id": "123", "reason": "r", "confirmed": true}"#,
        ])
        .arg("--pending")
        .arg(&pending)
        .arg("--json")
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        json_of(&out),
        json!({
            "ok": false,
            "decision": "deny",
            "tool": "devolver_pedido",
            "error": NO_PENDING,
            "metadata": {
                "blocked_by_policy": true,
                "stage": "confirmation",
                "operation_type": "transactional",
                "effect": "write",
                "policy_source": "policies/retail.warden:15:16",
            }
        })
    );
    assert!(!pending.exists(), "a deny writes no pending call");
}

/// `guard --json` on finance.warden as an accountant of b-42 in supervised mode.
fn finance_guard(query: &str, args: &str, pending: &Path) -> Value {
    let out = toolwarden()
        .args([
            "guard",
            "-p",
            "policies/finance.warden",
            "--mode",
            "supervised",
        ])
        .args(["--role", "accountant", "--permission", "invoices.manage"])
        .args([
            "--tenant",
            "b-42",
            "--query",
            query,
            "--tool",
            "create_invoice",
        ])
        .args(["--args", args, "--json", "--pending"])
        .arg(pending)
        .output()
        .expect("the binary runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

#[test]
fn guard_confirming_yes_reaches_the_pending_write_without_forced() {
    let dir = Scratch::new("yes");
    let pending = dir.path("pending.json");
    let args = r#"{"customer_id": "c-12", "amount": 100}"#;
    let confirmed = r#"{"customer_id": "c-12", "amount": 100, "approve_writes": true}"#;
    let asked = finance_guard("create a new invoice", args, &pending);
    assert_eq!(asked["decision"], json!("confirm"));
    assert!(pending.exists());
    // Other arguments with "yes": not the pending call, so stage 7 denies the write.
    let other = finance_guard(
        "yes",
        r#"{"customer_id": "c-12", "amount": 9, "approve_writes": true}"#,
        &pending,
    );
    assert_eq!(
        (&other["decision"], &other["metadata"]["stage"]),
        (&json!("deny"), &json!("intent"))
    );
    // The very call with "yes": reaches stage 10 and runs.
    let v = finance_guard("yes", confirmed, &pending);
    assert_eq!(v["decision"], json!("allow"), "{v}");
    assert_eq!(v["args"], json!({"customer_id": "c-12", "amount": 100}));
    assert!(!pending.exists(), "the pending call is consumed");
}

#[test]
fn parallel_guard_runs_share_one_turn_limit() {
    // retail.warden: `limit transactional 1 per turn`. Four runs at once on one turn file
    // allow exactly one call, every trial, and none fails on a shared temporary file.
    let dir = Scratch::new("parallel");
    for trial in 0..12 {
        let turn = dir.path(&format!("turn-{trial}.json"));
        let children: Vec<_> = (0..4)
            .map(|i| {
                toolwarden()
                    .args([
                        "guard",
                        "-p",
                        "policies/retail.warden",
                        "--tool",
                        "alterar_plano",
                    ])
                    .args([
                        "--args",
                        &format!(r#"{{"new_plan_id": "P{i}", "confirmed": true}}"#),
                        "--json",
                        "--turn",
                    ])
                    .arg(&turn)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("the binary runs")
            })
            .collect();
        let mut allowed = 0;
        for child in children {
            let out = child.wait_with_output().expect("the run ends");
            assert_eq!(
                out.status.code(),
                Some(0),
                "trial {trial}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v = json_of(&out);
            match v["decision"].as_str() {
                Some("allow") => allowed += 1,
                Some("deny") => assert_eq!(v["metadata"]["stage"], json!("turn_limit")),
                other => panic!("trial {trial}: unexpected decision {other:?}"),
            }
        }
        assert_eq!(allowed, 1, "trial {trial}");
        assert_eq!(
            std::fs::read_to_string(&turn).expect("turn written"),
            r#"{"transactional_calls":1}"#
        );
    }
    // Only the state files and their lock files remain: no temporary file is left behind.
    let mut names: Vec<String> = std::fs::read_dir(dir.dir())
        .expect("the scratch folder")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| !n.starts_with("turn-"))
        .collect();
    names.sort();
    assert_eq!(names, Vec::<String>::new());
}

#[cfg(unix)]
#[test]
fn guard_refuses_a_lock_file_that_is_a_fifo_without_blocking() {
    let dir = Scratch::new("fifo");
    let turn = dir.path("turn.json");
    let lock = dir.path("turn.json.lock");
    let c = std::ffi::CString::new(lock.to_string_lossy().as_bytes()).expect("a C path");
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let mut child = toolwarden()
        .args([
            "guard",
            "-p",
            "policies/retail.warden",
            "--tool",
            "consultar_plano",
        ])
        .arg("--turn")
        .arg(&turn)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("guard blocked on a FIFO lock file");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("the run ends");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("lock file `{}`", lock.display())),
        "{stderr}"
    );
    assert!(!turn.exists());
}

#[test]
fn guard_pending_with_audit_logs_the_denied_self_confirmation() {
    let dir = Scratch::new("audit");
    let (pending, log) = (dir.path("pending.json"), dir.path("audit.jsonl"));
    let out = toolwarden()
        .args([
            "guard",
            "-p",
            "policies/retail.warden",
            "--tool",
            "devolver_pedido",
        ])
        .args([
            "--args",
            r#"{"order_id": "123", "reason": "r", "confirmed": true}"#,
        ])
        .arg("--pending")
        .arg(&pending)
        .arg("--audit")
        .arg(&log)
        .arg("--json")
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0));
    let v = json_of(&out);
    assert_eq!(
        (&v["decision"], &v["metadata"]["stage"]),
        (&json!("deny"), &json!("confirmation"))
    );
    let text = std::fs::read_to_string(&log).expect("the audit log");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["op"], json!("call"));
    assert_eq!(records[0]["tool"], json!("devolver_pedido"));
    assert_eq!(records[0]["decision"], json!("deny"));
    assert_eq!(records[0]["stage"], json!("confirmation"));
}
