//! `*.test.yaml` cases about argument rules: `context` sets, `expect.rule`, multi-step cases
//! (a pending call, its confirmation and the turn limit in one case), their mistakes at
//! `file:line:col`, and `--coverage` of the rules no case fired.

use std::path::{Path, PathBuf};
use std::process::Command;

use toolwarden::analysis::testrun::run_file;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const POLICY: &str = include_str!("fixtures/testrun/money.warden");

/// A scratch directory holding `money.warden` and the test file `name` with `body`.
fn scratch(tag: &str, name: &str, body: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("tw-testrun-rules-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    std::fs::write(dir.join("money.warden"), POLICY).expect("write policy");
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write test file");
    (dir, path)
}

fn error_of(tag: &str, body: &str) -> String {
    let (_, p) = scratch(tag, "money.test.yaml", body);
    let r = run_file(&p, None);
    assert!(r.cases.is_empty(), "{:?}", r.cases);
    let e = r.error.expect("a file error");
    e.strip_prefix(&format!("{}:", p.display()))
        .unwrap_or(&e)
        .to_string()
}

#[test]
fn the_shipped_fixture_passes_every_case() {
    let r = run_file(&root().join("tests/fixtures/testrun/money.test.yaml"), None);
    assert_eq!(r.error, None);
    let failed: Vec<_> = r.cases.iter().filter(|c| !c.passed).collect();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(r.passed(), 5);
}

#[test]
fn failing_steps_name_the_step_and_what_differs() {
    let (_, p) = scratch(
        "fail",
        "money.test.yaml",
        "request: { mode: autonomous, context: { contacts: [alice] } }
cases:
  - name: wrong on purpose
    steps:
      - tool: send_money
        args: { recipient: mallory, amount: 20 }
        expect: { decision: allow, rule: money.warden:15:3 }
      - tool: send_money
        args: { recipient: mallory, amount: 20 }
        confirm: true
        expect: { decision: allow, stage: none }
      - tool: get_balance
        expect: { decision: deny, stage: turn_limit }
",
    );
    let r = run_file(&p, None);
    assert_eq!(r.error, None);
    assert_eq!((r.passed(), r.failed()), (0, 1));
    let c = &r.cases[0];
    assert_eq!(c.location, format!("{}:3:5", p.display()));
    // Step 2 confirms the call step 1 held, so it passes; step 3 is read-only, which the
    // turn limit does not count.
    assert_eq!(
        c.failures,
        [
            "step 1 (`send_money`): decision: expected allow, got confirm",
            "step 1 (`send_money`): rule: expected money.warden:15:3, got money.warden:14:3",
            "step 3 (`get_balance`): decision: expected deny, got allow",
            "step 3 (`get_balance`): stage: expected turn_limit, got none",
        ]
    );
    let trace = c.trace.as_deref().expect("trace");
    assert!(trace.starts_with("step 1: identity=pass @"), "{trace}");
}

#[test]
fn a_confirmation_answers_only_the_call_the_user_was_shown() {
    let (_, p) = scratch(
        "other",
        "money.test.yaml",
        "request: { mode: autonomous, context: { contacts: [alice] } }
cases:
  - name: the user confirmed 20, the model sends 9000
    steps:
      - tool: send_money
        args: { recipient: mallory, amount: 20 }
        expect: { decision: confirm, confirmation: true }
      - tool: send_money
        args: { recipient: mallory, amount: 9000 }
        confirm: true
        expect: { decision: deny, stage: confirmation, rule: money.warden:10:16 }
      - tool: send_money
        args: { recipient: mallory, amount: 20 }
        confirm: true
        expect: { decision: allow }
",
    );
    let r = run_file(&p, None);
    assert_eq!(r.error, None);
    assert!(r.cases[0].passed, "{:?}", r.cases[0].failures);
}

#[test]
fn an_undeclared_context_set_is_an_error_at_its_position() {
    assert_eq!(
        error_of(
            "ctx",
            "cases:\n  - name: typo\n    request: { mode: autonomous, context: { contact: [alice] } }\n    tool: get_balance\n    expect: { decision: allow }\n"
        ),
        "3:34: case `typo`: unknown context set `contact`; did you mean `contacts`? the policy declares `contacts`"
    );
}

#[test]
fn a_rule_position_must_name_a_rule_of_the_policy() {
    assert_eq!(
        error_of(
            "rule",
            "cases:\n  - name: off by one\n    request: { mode: autonomous }\n    tool: send_money\n    args: { recipient: a, amount: 1 }\n    expect: { rule: money.warden:14:2 }\n"
        ),
        "6:15: case `off by one`: no rule of the policy starts at `money.warden:14:2`; on that line: `money.warden:14:3`"
    );
    assert_eq!(
        error_of(
            "rule2",
            "cases:\n  - name: no position\n    request: { mode: autonomous }\n    tool: send_money\n    expect: { rule: \"money.warden\" }\n"
        ),
        "5:15: case `no position`: `rule: money.warden` must be the rule's position, `file:line:col`"
    );
}

#[test]
fn mistakes_in_a_step_point_at_the_step() {
    assert_eq!(
        error_of(
            "steptool",
            "cases:\n  - name: typo\n    request: { mode: autonomous }\n    steps:\n      - tool: get_balance\n        expect: { decision: allow }\n      - tool: send_mony\n        expect: { decision: allow }\n"
        ),
        "7:9: case `typo`: step 2: unknown tool `send_mony`: neither declared nor matched by a pattern; did you mean `send_money`? (a case about an undeclared name says `undeclared: true`)"
    );
    assert_eq!(
        error_of(
            "stepexpect",
            "cases:\n  - name: nothing\n    request: { mode: autonomous }\n    steps:\n      - tool: get_balance\n        expect: {}\n"
        ),
        "6:9: case `nothing`: step 1: the step expects nothing"
    );
    assert_eq!(
        error_of(
            "stepstage",
            "cases:\n  - name: stage\n    request: { mode: autonomous }\n    steps:\n      - tool: get_balance\n        expect: { stage: argument }\n"
        ),
        "6:19: case `stage`: step 1: unknown stage `argument`; stages are none, identity, connector, tenant, role, permission, mode, intent, tenant_arg, requires, arguments, flow, confirmation, turn_limit"
    );
    assert_eq!(
        error_of(
            "both",
            "cases:\n  - name: both\n    request: { mode: autonomous }\n    tool: get_balance\n    steps:\n      - tool: get_balance\n        expect: { decision: allow }\n"
        ),
        "5:5: case `both`: `steps` holds the calls: give `tool` and `args` in each step, not in the case"
    );
    assert_eq!(
        error_of(
            "caseexpect",
            "cases:\n  - name: outer\n    request: { mode: autonomous }\n    steps:\n      - tool: get_balance\n        expect: { decision: allow }\n    expect: { decision: allow }\n"
        ),
        "7:5: case `outer`: with `steps`, each step has its own `expect`; the case's may only give `intent`"
    );
}

#[test]
fn confirm_needs_a_confirmation_field() {
    let dir = std::env::temp_dir().join(format!("tw-testrun-rules-{}-nofield", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    std::fs::write(
        dir.join("p.warden"),
        POLICY.replace("confirm fields \"confirmed\"\n", ""),
    )
    .expect("write policy");
    let p = dir.join("p.test.yaml");
    std::fs::write(
        &p,
        "cases:\n  - name: yes\n    request: { mode: autonomous }\n    steps:\n      - tool: get_balance\n        confirm: true\n        expect: { decision: allow }\n",
    )
    .expect("write");
    assert_eq!(
        run_file(&p, None).error,
        Some(format!(
            "{}:6:9: case `yes`: step 1: `confirm: true` sets a confirmation field, but the policy declares no `confirm fields`",
            p.display()
        ))
    );
}

#[test]
fn coverage_lists_the_rules_no_call_fired() {
    let (dir, p) = scratch(
        "cov",
        "money.test.yaml",
        "request: { mode: autonomous, context: { contacts: [alice] } }
cases:
  - name: a stranger
    tool: send_money
    args: { recipient: mallory, amount: 1 }
    expect: { decision: confirm }
  - name: filtered out, but it fires the deny rule
    tool: send_money
    args: { recipient: alice, amount: 50000 }
    expect: { decision: deny }
",
    );
    let r = run_file(&p, Some("stranger"));
    assert_eq!(r.cases.len(), 1);
    let cov = r.uncovered.expect("coverage");
    assert_eq!(
        cov.rules,
        [format!(
            "{}:19:3 deny when any =~ \"AKIA[0-9A-Z]{{16}}\"",
            dir.join("money.warden").display()
        )]
    );
    assert_eq!(cov.tools, ["get_balance"]);
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
}

#[test]
fn cli_coverage_prints_unfired_rules_with_their_position() {
    let out = bin()
        .args([
            "test",
            "--coverage",
            "tests/fixtures/testrun/money.test.yaml",
        ])
        .current_dir(root())
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "  argument rules not exercised (1):")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(
        lines[at + 1],
        "    tests/fixtures/testrun/money.warden:19:3 deny when any =~ \"AKIA[0-9A-Z]{16}\""
    );
    assert_eq!(lines.last(), Some(&"5 passed, 0 failed"));
    assert_eq!(out.status.code(), Some(0));

    let out = bin()
        .args([
            "test",
            "--coverage",
            "--json",
            "tests/fixtures/testrun/money.test.yaml",
        ])
        .current_dir(root())
        .output()
        .expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["files"][0]["uncovered"]["rules"],
        serde_json::json!([
            "tests/fixtures/testrun/money.warden:19:3 deny when any =~ \"AKIA[0-9A-Z]{16}\""
        ])
    );
}

#[test]
fn cli_failure_line_names_the_step() {
    let (_, p) = scratch(
        "clifail",
        "money.test.yaml",
        "request: { mode: autonomous, context: { contacts: [alice] } }
cases:
  - name: too trusting
    steps:
      - tool: send_money
        args: { recipient: mallory, amount: 20 }
        expect: { decision: allow }
",
    );
    let out = bin().arg("test").arg(&p).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().unwrap_or("");
    assert!(
        first.starts_with(&format!(
            "FAIL {}:3:5 too trusting: step 1 (`send_money`): decision: expected allow, got confirm | trace: step 1: identity=pass @",
            p.display()
        )),
        "{stdout}"
    );
    assert_eq!(stdout.lines().last(), Some("0 passed, 1 failed"));
    assert_eq!(out.status.code(), Some(1));
}

/// The test file's own directory is where `rule:` positions are relative to.
#[test]
fn rule_positions_are_relative_to_the_test_file() {
    let (dir, _) = scratch("rel", "unused.test.yaml", "cases: []\n");
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).expect("dir");
    let p: &Path = &sub.join("x.test.yaml");
    std::fs::write(
        p,
        "policy: ../money.warden\ncases:\n  - name: big\n    request: { mode: autonomous }\n    tool: send_money\n    args: { recipient: a, amount: 20000 }\n    expect: { decision: deny, rule: ../money.warden:15:3 }\n",
    )
    .expect("write");
    let r = run_file(p, None);
    assert_eq!(r.error, None);
    assert!(r.cases[0].passed, "{:?}", r.cases[0].failures);
}

/// The example of docs/testing.md ("Argument rules and calls in several steps"), as written,
/// passes against the fixture policy it describes.
#[test]
fn the_documented_example_passes() {
    let doc = std::fs::read_to_string(root().join("docs/testing.md")).expect("docs/testing.md");
    let from = doc
        .find("#### Argument rules and calls in several steps")
        .expect("the section");
    let start = from + doc[from..].find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = start + doc[start..].find("```").expect("closed");
    let (_, p) = scratch("doc", "money.test.yaml", &doc[start..end]);
    let r = run_file(&p, None);
    assert_eq!(r.error, None);
    assert_eq!((r.passed(), r.failed()), (2, 0), "{:?}", r.cases);
}
