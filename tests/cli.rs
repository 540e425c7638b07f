//! The `toolwarden` binary, end to end: exit codes, human and JSON output (insta snapshots),
//! and bad input (bad flags, unreadable files, bad JSON) answered with exit 2 and exactly one
//! line on stderr, never a panic.
//!
//! Every command runs in the crate root with relative paths, so the output is the same on every
//! machine.

use std::process::{Command, Output};

use serde_json::{json, Value};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}

/// The accountant of seed 001 asking to delete an invoice, in supervised mode.
const DELETE_QUERY: &[&str] = &[
    "-p",
    "policies/finance.warden",
    "--mode",
    "supervised",
    "--role",
    "accountant",
    "--permission",
    "invoices.manage",
    "--tenant",
    "b-42",
    "--query",
    "delete invoice 7",
];

fn with<'a>(command: &'a str, tail: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![command];
    v.extend_from_slice(DELETE_QUERY);
    v.extend_from_slice(tail);
    v
}

#[test]
fn check_passes_the_shipped_policies() {
    let o = run(&[
        "check",
        "policies/finance.warden",
        "policies/connectors.warden",
        "policies/retail.warden",
        "policies/examples/agentdojo-banking.warden",
        "policies/examples/agentdojo-slack.warden",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "policies/finance.warden: ok\n\
         policies/connectors.warden: ok\n\
         policies/retail.warden: ok\n\
         policies/examples/agentdojo-banking.warden: ok\n\
         policies/examples/agentdojo-slack.warden: ok\n"
    );
    assert_eq!(stderr(&o), "");
}

#[test]
fn check_fails_a_broken_policy_with_its_report() {
    let o = run(&["check", "tests/fixtures/check/several_errors.warden"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "");
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn check_json_lists_each_diagnostic() {
    let o = run(&[
        "check",
        "--json",
        "tests/fixtures/check/role_cycle.warden",
        "policies/retail.warden",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v,
        json!([
            {
                "file": "tests/fixtures/check/role_cycle.warden",
                "ok": false,
                "diagnostics": [{
                    "severity": "error",
                    "code": "cycle",
                    "message": "roles form a cycle: admin > accountant > auditor > admin",
                    "file": "tests/fixtures/check/role_cycle.warden",
                    "line": 8,
                    "column": 3,
                    "text": "auditor > admin",
                    "help": "role inclusion must be a hierarchy; remove one `>` of the cycle",
                    "notes": [],
                }]
            },
            {"file": "policies/retail.warden", "ok": true, "diagnostics": []}
        ])
    );
}

#[test]
fn check_with_warnings_only_passes_unless_denied() {
    let o = run(&["check", "tests/fixtures/check/shadowed_pattern.warden"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).ends_with(
        "0 errors, 2 warnings\ntests/fixtures/check/shadowed_pattern.warden: ok (with warnings)\n"
    ));
    let o = run(&[
        "check",
        "--deny-warnings",
        "tests/fixtures/check/shadowed_pattern.warden",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).ends_with(
        "0 errors, 2 warnings\ntests/fixtures/check/shadowed_pattern.warden: failed (warnings denied by --deny-warnings)\n"
    ));
}

#[test]
fn offer_prints_a_table_for_a_real_query() {
    let o = run(&with("offer", &[]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn offer_json_for_a_real_query() {
    let o = run(&with("offer", &["--json"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["offered"],
        json!(["search_invoices", "get_invoice", "delete_invoice"])
    );
    assert_eq!(v["intent"]["name"], json!("destructive"));
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn offer_of_named_tools_in_persian() {
    let o = run(&[
        "offer",
        "-p",
        "policies/finance.warden",
        "--mode",
        "analyzer",
        "--role",
        "admin",
        "--permission",
        "invoices.manage",
        "--tenant",
        "b-42",
        "--query",
        "این فاکتور را حذف کن",
        "--json",
        "delete_invoice",
        "search_invoices",
        "rm_rf",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["mode"], json!("analyzer"));
    assert_eq!(v["intent"]["name"], json!("destructive"));
    assert_eq!(v["offered"], json!(["search_invoices"]));
    let stages: Vec<(&str, &str, Value)> = v["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["tool"].as_str().unwrap(),
                d["decision"].as_str().unwrap(),
                d["stage"].clone(),
            )
        })
        .collect();
    assert_eq!(
        stages,
        [
            ("delete_invoice", "deny", json!("mode")),
            ("search_invoices", "allow", Value::Null),
            ("rm_rf", "deny", json!("identity")),
        ]
    );
}

#[test]
fn offer_on_a_policy_without_intents_uses_no_intent() {
    let o = run(&[
        "offer",
        "-p",
        "policies/connectors.warden",
        "--connectors",
        "task=",
        "--json",
        "send_email",
        "mcp__github__create_issue",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["offered"], json!(["send_email"]));
    assert_eq!(
        v["decisions"][1]["reason"],
        json!("Connector github is not enabled for this task")
    );
}

#[test]
fn guard_json_holds_a_delete_for_confirmation() {
    let o = run(&with(
        "guard",
        &[
            "--tool",
            "delete_invoice",
            "--args",
            r#"{"invoice_id": 7}"#,
            "--json",
        ],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn guard_json_runs_an_approved_delete_and_blocks_another_tenant() {
    let o = run(&with(
        "guard",
        &[
            "--tool",
            "delete_invoice",
            "--args",
            r#"{"invoice_id": 7, "approve_writes": true}"#,
            "--json",
        ],
    ));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v,
        json!({
            "ok": true,
            "decision": "allow",
            "tool": "delete_invoice",
            "args": {"invoice_id": 7},
            "confirmation_received": true,
            "metadata": {
                "blocked_by_policy": false,
                "operation_type": "transactional",
                "effect": "delete",
                "policy_source": "policies/finance.warden:55:1",
            }
        })
    );
    let o = run(&with(
        "guard",
        &[
            "--tool",
            "delete_invoice",
            "--args",
            r#"{"invoice_id": 7, "business_id": "b-7"}"#,
            "--json",
        ],
    ));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v,
        json!({
            "ok": false,
            "decision": "deny",
            "tool": "delete_invoice",
            "error": "argument `business_id` names tenant `b-7`, but this session's tenant is `b-42`",
            "metadata": {
                "blocked_by_policy": true,
                "stage": "tenant_arg",
                "operation_type": "transactional",
                "effect": "delete",
                "policy_source": "policies/finance.warden:50:12",
            }
        })
    );
}

#[test]
fn guard_human_output() {
    let o = run(&with(
        "guard",
        &["--tool", "create_invoice", "--args", "{}"],
    ));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        "decision: deny\n\
         stage:    intent\n\
         reason:   intent `destructive` does not offer effect `write` in mode `supervised` (matrix `standard`)\n\
         rule:     policies/finance.warden:30:23\n"
    );
}

#[test]
fn classify_prints_the_intent_and_its_hits() {
    let o = run(&[
        "classify",
        "-p",
        "policies/finance.warden",
        "borrar la factura 7",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        "intent: destructive\n  hit      destructive  \"borrar\" [es] matched \"borrar\" at bytes 0..6\n"
    );
}

/// Input errors: exit 2, nothing on stdout, exactly one line on stderr.
#[test]
fn bad_input_is_one_line_on_stderr_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["offer", "-p", "policies/finance.warden", "--bogus"],
            "error: unexpected argument '--bogus' found (see `toolwarden --help`)",
        ),
        (
            &["offer", "--query", "x"],
            "error: the following required arguments were not provided: --policy <POLICY> (see `toolwarden --help`)",
        ),
        (
            &["offer", "-p", "policies/finance.warden", "--mode"],
            "error: a value is required for '--mode <MODE>' but none was supplied (see `toolwarden --help`)",
        ),
        (
            &["frobnicate"],
            "error: unrecognized subcommand 'frobnicate' (see `toolwarden --help`)",
        ),
        (
            &["offer", "-p", "policies/finance.warden", "--query", "x", "--intent", "read"],
            "error: the argument '--query <QUERY>' cannot be used with '--intent <INTENT>' (see `toolwarden --help`)",
        ),
        (
            &["offer", "-p", "no/such/policy.warden", "--query", "x"],
            "error: cannot read `no/such/policy.warden`: no such file",
        ),
        (
            &["check", "no/such/policy.warden"],
            "error: cannot read `no/such/policy.warden`: no such file",
        ),
        (
            &["classify", "-p", "tests", "delete it"],
            "error: cannot read `tests`: it is a directory",
        ),
        (
            &["offer", "-p", "policies/finance.warden", "--tools-file", "no/such/tools.txt"],
            "error: cannot read tools file `no/such/tools.txt`: no such file",
        ),
        (
            &["offer", "-p", "policies/finance.warden", "--mode", "yolo"],
            "error: unknown mode `yolo`; the policy declares `analyzer`, `supervised`, `autonomous`",
        ),
        (
            &["offer", "-p", "policies/finance.warden", "--intent", "destroy"],
            "error: unknown intent `destroy`; the policy declares `destructive`, `execute`, `export`, `write`, `read`",
        ),
        (
            &["offer", "-p", "policies/connectors.warden", "--connectors", "github"],
            "error: `--connectors github` must be TIER=server1,server2 (or TIER= for zero connectors)",
        ),
        (
            &["offer", "-p", "policies/connectors.warden", "--connectors", "workspace=github"],
            "error: unknown connector tier `workspace`; the policy declares `task`, `session`, `project`",
        ),
        (
            &["guard", "-p", "policies/finance.warden", "--tool", "get_invoice", "--args", "{bad"],
            "error: `--args`: the arguments are not acceptable JSON: key must be a string at line 1 column 2",
        ),
    ];
    for (args, line) in cases {
        let o = run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(stdout(&o), "", "{args:?}");
        assert_eq!(err, format!("{line}\n"), "{args:?}");
        assert!(!err.contains("panicked"), "{args:?}");
    }
}

#[test]
fn a_policy_that_does_not_load_shows_its_diagnostics() {
    let o = run(&[
        "offer",
        "-p",
        "tests/fixtures/check/role_cycle.warden",
        "--intent",
        "read",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(
        err.starts_with(
            "error: policy `tests/fixtures/check/role_cycle.warden` does not load:\n  × roles form a cycle: admin > accountant > auditor > admin\n"
        ),
        "{err}"
    );
    assert!(err.contains("roles form a cycle: admin > accountant > auditor > admin"));
    assert!(err.ends_with("1 error, 0 warnings\n"));
}

#[test]
fn help_and_version_exit_0() {
    let o = run(&["--version"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        format!("toolwarden {}\n", env!("CARGO_PKG_VERSION"))
    );
    let o = run(&["offer", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o).starts_with("Decide which tools the model may see for a request and a query\n")
    );
}

#[test]
fn offer_on_retail_prints_no_intent_and_the_confirmations() {
    let o = run(&["offer", "-p", "policies/retail.warden"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "mode: agent\n\
         intent: none (the policy declares no intents)\n\
         \n\
         TOOL              DECISION  STAGE         RULE                    REASON\n\
         consultar_plano   allow     -             retail.warden:18:1\n\
         alterar_plano     confirm   confirmation  retail.warden:19:66     `alterar_plano` says `confirm always`\n\
         consultar_pedido  allow     -             retail.warden:20:1\n\
         devolver_pedido   confirm   confirmation  retail.warden:21:66     `devolver_pedido` says `confirm always`\n\
         \n\
         offered: consultar_plano, alterar_plano, consultar_pedido, devolver_pedido\n"
    );
}

#[test]
fn guard_and_offer_write_an_audit_log_and_advisory_allows_but_marks() {
    let dir = std::env::temp_dir().join(format!("toolwarden-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let log = dir.join("audit.jsonl");
    let _ = std::fs::remove_file(&log);
    let log_arg = log.display().to_string();
    // Enforced: the viewer's delete is denied, and logged as such.
    let viewer = [
        "-p",
        "policies/finance.warden",
        "--mode",
        "supervised",
        "--role",
        "viewer",
        "--permission",
        "invoices.view",
        "--tenant",
        "b-42",
        "--query",
        "show invoices",
    ];
    let mut args = vec!["guard"];
    args.extend_from_slice(&viewer);
    args.extend_from_slice(&["--tool", "delete_invoice", "--args", r#"{"invoice_id": 7}"#]);
    args.extend_from_slice(&["--audit", &log_arg, "--json"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["ok"], json!(false));
    // Advisory: the same call runs, and the record says what enforcement would have done.
    args.push("--advisory");
    let o = run(&args);
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["ok"], json!(true));
    assert_eq!(v["args"], json!({"invoice_id": 7}));
    assert_eq!(
        v["metadata"]["advisory"],
        json!({
            "would_be": "deny",
            "stage": "role",
            "reason": "advisory: would be deny: `delete_invoice` needs one of the roles `accountant`"
        })
    );
    let text = std::fs::read_to_string(&log).expect("the log exists");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    assert_eq!(records.len(), 2);
    for (r, enforcement, decision) in [
        (&records[0], "enforce", "deny"),
        (&records[1], "advisory", "allow"),
    ] {
        assert_eq!(r["op"], json!("call"));
        assert_eq!(r["tool"], json!("delete_invoice"));
        assert_eq!(r["enforcement"], json!(enforcement));
        assert_eq!(r["decision"], json!(decision));
        assert_eq!(r["stage"], json!("role"));
        assert_eq!(r["policy"], json!("finance-assistant"));
    }
    assert_eq!(records[1]["would_be"], json!("deny"));
    // An advisory offer shows what enforcement would have denied, and why.
    let mut args = vec!["offer"];
    args.extend_from_slice(&viewer);
    args.extend_from_slice(&[
        "--audit",
        &log_arg,
        "--advisory",
        "delete_invoice",
        "get_invoice",
    ]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("delete_invoice") || l.starts_with("get_invoice"))
        .collect();
    assert_eq!(
        rows,
        [
            "delete_invoice  allow     role          finance.warden:55:93    advisory: would be deny: `delete_invoice` needs one of the roles `accountant`",
            "get_invoice     allow     -             finance.warden:53:1",
        ],
        "{text}"
    );
    assert_eq!(
        text.lines().nth(1),
        Some("enforcement: advisory (what enforcement would deny is allowed and marked)"),
        "{text}"
    );
    args.push("--json");
    let v: Value = serde_json::from_str(&stdout(&run(&args))).expect("json");
    assert_eq!(v["enforcement"], json!("advisory"));
    assert_eq!(v["decisions"][0]["would_be"], json!("deny"));
    assert_eq!(v["decisions"][1].get("would_be"), None);
    // Without `--advisory` the output names no enforcement: it is the default.
    let enforced = run(&[
        "offer",
        "-p",
        "policies/finance.warden",
        "--json",
        "get_invoice",
    ]);
    let v: Value = serde_json::from_str(&stdout(&enforced)).expect("json");
    assert_eq!(v.get("enforcement"), None);
    // `--advisory` without `--audit` is a usage error: advisory mode must leave a trace.
    let o = run(&["offer", "-p", "policies/finance.warden", "--advisory"]);
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
