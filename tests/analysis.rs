//! Issue 5: decision table, exhaustive diff, explain trace and the policy test runner.

use std::path::{Path, PathBuf};
use std::process::Command;

use toolwarden::analysis::table::SubjectKind;
use toolwarden::analysis::testrun::run_file;
use toolwarden::analysis::{PolicyDiff, Table, TableFormat};
use toolwarden::{Decision, Intent, Policy, Request, Stage};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load(name: &str) -> Policy {
    Policy::from_file(root().join("policies").join(name)).expect("reference policy loads")
}

/// A unique scratch directory for this test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tw-analysis-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Requests over every role alone, every permission alone, with and without tenant, forced or
/// not, and (when the policy has tiers) connector allowlists.
fn requests(policy: &Policy, mode: &str, tool: &str) -> Vec<Request> {
    let mut role_sets: Vec<Vec<String>> = vec![vec![]];
    role_sets.extend(policy.roles().map(|r| vec![r.to_string()]));
    let mut perm_sets: Vec<Vec<String>> =
        vec![vec![], policy.permissions().map(str::to_string).collect()];
    perm_sets.extend(policy.permissions().map(|p| vec![p.to_string()]));
    let tiers: Vec<String> = policy.tiers().map(str::to_string).collect();
    let mut conn: Vec<Vec<(String, Vec<String>)>> = vec![vec![]];
    if let Some(first) = tiers.first() {
        conn.push(vec![(first.clone(), vec![])]);
        conn.push(vec![(first.clone(), vec!["github".into()])]);
        if let Some(last) = tiers.last() {
            conn.push(vec![(last.clone(), vec!["slack".into()])]);
        }
    }
    let mut out = Vec::new();
    for roles in &role_sets {
        for perms in &perm_sets {
            for tenant in [false, true] {
                for forced in [false, true] {
                    for c in &conn {
                        let mut r = Request::new(mode)
                            .roles(roles.clone())
                            .permissions(perms.clone());
                        if tenant {
                            r = r.tenant("t-1");
                        }
                        if forced {
                            r = r.forced([tool]);
                        }
                        for (tier, servers) in c {
                            r = r.connectors(tier.clone(), servers.clone());
                        }
                        out.push(r);
                    }
                }
            }
        }
    }
    out
}

fn intents(policy: &Policy) -> Vec<Intent> {
    let v: Vec<Intent> = policy.intents().map(Intent::named).collect();
    if v.is_empty() {
        vec![policy.fallback_intent()]
    } else {
        v
    }
}

fn names(policy: &Policy) -> Vec<String> {
    let mut n: Vec<String> = policy.tools().map(str::to_string).collect();
    n.extend([
        "mcp__github__get_issue".to_string(),
        "mcp__slack__post".to_string(),
        "mcp__github__delete_repo".to_string(),
        "mcp__github".to_string(),
        "not_declared".to_string(),
    ]);
    n
}

#[test]
fn explain_agrees_with_decide_on_every_reference_tool() {
    let mut checked = 0usize;
    for file in ["finance.warden", "connectors.warden", "retail.warden"] {
        let policy = load(file);
        for mode in policy.modes().map(str::to_string).collect::<Vec<_>>() {
            for intent in intents(&policy) {
                for tool in names(&policy) {
                    for request in requests(&policy, &mode, &tool) {
                        let d = policy
                            .decide_tool(&request, &intent, &tool)
                            .expect("valid request");
                        let t = policy
                            .explain(&request, &intent, &tool)
                            .expect("valid request");
                        assert_eq!(
                            (t.decision, t.stage),
                            (d.decision, d.stage),
                            "{file} {tool} {mode} {:?} {request:?}",
                            intent.name
                        );
                        // The deciding step is the last non-skipped one and names the stage.
                        if let Some(stage) = d.stage {
                            assert!(t.steps.iter().any(|s| s.stage == stage
                                && s.result != toolwarden::analysis::explain::StepResult::Skip
                                && s.result != toolwarden::analysis::explain::StepResult::Pass));
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 10_000, "only {checked} combinations");
}

/// Whether `request` satisfies a cell's conditions, for a tool named `tool`.
fn holds(
    policy: &Policy,
    c: &toolwarden::analysis::table::Conditions,
    request: &Request,
    tool: &str,
) -> bool {
    if let Some(server) = &c.connector {
        let server = if server == "*" {
            policy.connector_server(tool).unwrap_or("").to_string()
        } else {
            server.clone()
        };
        let tiers: Vec<&str> = policy.tiers().collect();
        let list = tiers.iter().find_map(|t| {
            request
                .connector_tiers()
                .iter()
                .find(|(n, _)| n == t)
                .map(|(_, s)| s)
        });
        if let Some(list) = list {
            if !list.contains(&server) {
                return false;
            }
        }
    }
    if c.tenant && request.tenant_id().is_none() {
        return false;
    }
    if let Some(roles) = &c.roles {
        if !request.role_names().iter().any(|r| roles.contains(r)) {
            return false;
        }
    }
    c.permissions
        .iter()
        .all(|g| request.permission_names().iter().any(|p| g.contains(p)))
}

#[test]
fn table_conditions_agree_with_decide() {
    let mut checked = 0usize;
    for file in ["finance.warden", "connectors.warden", "retail.warden"] {
        let policy = load(file);
        let table = Table::build(&policy, None).expect("table");
        for row in table.rows.iter().filter(|r| r.kind == SubjectKind::Tool) {
            for cell in &row.cells {
                let intent = if cell.intent.is_empty() {
                    policy.fallback_intent()
                } else {
                    Intent::named(cell.intent.clone())
                };
                for request in requests(&policy, &cell.mode, &row.name) {
                    let actual = policy
                        .decide_tool(&request, &intent, &row.name)
                        .expect("valid")
                        .decision;
                    let o = &cell.outcome;
                    let ok = holds(&policy, &o.conditions, &request, &row.name);
                    let forced = request.forced_names().contains(&row.name);
                    let expected = match (o.decision, o.stage) {
                        (Decision::Deny, Some(Stage::Intent)) if ok && forced => {
                            o.forced.expect("forced outcome")
                        }
                        (Decision::Deny, _) => Decision::Deny,
                        (d, _) if ok => d,
                        _ => Decision::Deny,
                    };
                    assert_eq!(
                        expected, actual,
                        "{file} {} {} {} {request:?}",
                        row.name, cell.mode, cell.intent
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 5_000, "only {checked} combinations");
}

#[test]
fn reference_tables_are_pinned() {
    for file in ["finance", "connectors", "retail"] {
        let policy = load(&format!("{file}.warden"));
        let table = Table::build(&policy, None).expect("table");
        insta::assert_snapshot!(format!("table_{file}"), table.render(TableFormat::Text));
    }
    let policy = load("connectors.warden");
    let table = Table::build(&policy, Some("chat")).expect("table");
    insta::assert_snapshot!("table_connectors_csv", table.render(TableFormat::Csv));
}

#[test]
fn table_rejects_unknown_mode_and_counts_cells() {
    let policy = load("finance.warden");
    let err = Table::build(&policy, Some("turbo")).expect_err("unknown mode");
    assert_eq!(
        err.to_string(),
        "unknown mode `turbo`; the policy declares `analyzer`, `supervised`, `autonomous`"
    );
    // 8 tools + the undeclared-name row, × 3 modes × 5 intents.
    assert_eq!(
        Table::build(&policy, None).expect("table").cell_count(),
        9 * 3 * 5
    );
    assert_eq!(
        Table::build(&policy, Some("analyzer"))
            .expect("table")
            .cell_count(),
        9 * 5
    );
}

fn widened_finance() -> Policy {
    let text = std::fs::read_to_string(root().join("policies/finance.warden")).expect("read");
    let old_row = "  write        allow  allow  deny    deny    deny";
    assert!(text.contains(old_row));
    let new_text = text.replace(old_row, "  write        allow  allow  allow   deny    deny");
    // Same folder, so the lexicon include resolves.
    Policy::parse(
        &new_text,
        &root()
            .join("policies/finance-wide.warden")
            .display()
            .to_string(),
    )
    .expect("widened policy loads")
}

#[test]
fn widening_write_to_delete_shows_every_reachable_destructive_tool() {
    let old = load("finance.warden");
    let new = widened_finance();
    let d = PolicyDiff::compute(&old, &new);
    let cells: Vec<(String, String, String, String, String)> = d
        .cells
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.mode.clone(),
                c.intent.clone(),
                c.old.as_ref().map(|o| o.to_text()).unwrap_or_default(),
                c.new.as_ref().map(|o| o.to_text()).unwrap_or_default(),
            )
        })
        .collect();
    let cond = "if tenant, role accountant|admin, permission invoices.delete|invoices.manage";
    assert_eq!(
        cells,
        vec![
            (
                "delete_invoice".into(),
                "supervised".into(),
                "write".into(),
                format!("deny intent; forced: confirm {cond}"),
                format!("confirm {cond}"),
            ),
            (
                "delete_invoice".into(),
                "autonomous".into(),
                "write".into(),
                format!("deny intent; forced: confirm {cond}"),
                format!("allow {cond}"),
            ),
        ]
    );
    // The analyzer mode uses the same matrix but its ceiling still denies: no change there.
    // Each change names the widened cell of the new text.
    for c in &d.cells {
        let rule = c.rule.as_ref().expect("rule");
        assert!(
            rule.location.ends_with("finance-wide.warden:29:30"),
            "{}",
            rule.location
        );
        assert_eq!(
            rule.line.trim(),
            "write        allow  allow  allow   deny    deny"
        );
        assert_eq!(
            c.old_rule.as_ref().expect("old rule").line.trim(),
            "write        allow  allow  deny    deny    deny"
        );
    }
    assert!(d.rows.is_empty() && d.settings.is_empty() && d.keywords_added.is_empty());
    assert!(!d.is_empty());
    assert!(d.render().ends_with(
        "2 cells changed: 2 decisions moved, 0 reasons moved; 0 rows added/removed/changed, 0 declarations changed, 0 argument-rule changes, 0 keywords added, 0 removed, 0 of 0 queries reclassified\n"
    ));
}

#[test]
fn identical_policies_have_an_empty_diff() {
    let p = load("finance.warden");
    let d =
        PolicyDiff::compute(&p, &load("finance.warden")).with_queries(&p, &p, ["delete invoice 7"]);
    assert!(d.is_empty());
    assert_eq!(d.queries_checked, 1);
}

#[test]
fn policies_with_different_effects_and_intents_still_diff() {
    let a = load("finance.warden");
    let b = load("retail.warden");
    let d = PolicyDiff::compute(&a, &b).with_queries(&a, &b, ["delete invoice 7", "hello"]);
    let added: Vec<&str> = d
        .rows
        .iter()
        .filter(|r| r.change == "added")
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        added,
        [
            "alterar_plano",
            "consultar_pedido",
            "consultar_plano",
            "devolver_pedido"
        ]
    );
    let removed = d.rows.iter().filter(|r| r.change == "removed").count();
    assert_eq!(removed, 8);
    // Cells of the modes/intents only one side has are reported with the other side empty.
    assert!(d
        .cells
        .iter()
        .any(|c| c.mode == "agent" && c.old.is_none() && c.new.is_some()));
    assert!(d
        .cells
        .iter()
        .any(|c| c.mode == "supervised" && c.old.is_some() && c.new.is_none()));
    assert!(d
        .settings
        .iter()
        .any(|s| s == "effects: none, write, delete, export, execute -> none, write"));
    assert_eq!(d.queries.len(), 2); // "hello": read (fallback) -> "" (no intents)
    assert_eq!(d.queries[0].text, "delete invoice 7");
    assert_eq!(d.queries[0].old, ["destructive"]);
    // And the other way round.
    let back = PolicyDiff::compute(&b, &a);
    assert_eq!(back.rows.iter().filter(|r| r.change == "added").count(), 8);
}

#[test]
fn diff_reports_added_tools_against_the_old_treatment_of_the_name() {
    let old = Policy::parse(
        "policy \"p\" version 1\neffects none, write\nmode m { }\ndefault mode m\nunknown deny\ntool a { effect none }\n",
        "old.warden",
    )
    .expect("loads");
    let new = Policy::parse(
        "policy \"p\" version 2\neffects none, write\nmode m { }\ndefault mode m\nunknown deny\ntool a { effect none }\ntool b { effect write confirm always }\n",
        "new.warden",
    )
    .expect("loads");
    let d = PolicyDiff::compute(&old, &new);
    assert_eq!(d.cells.len(), 1);
    let c = &d.cells[0];
    assert_eq!((c.name.as_str(), c.mode.as_str()), ("b", "m"));
    assert_eq!(
        c.old.as_ref().map(|o| o.to_text()).as_deref(),
        Some("deny identity")
    );
    assert_eq!(
        c.new.as_ref().map(|o| o.to_text()).as_deref(),
        Some("confirm")
    );
    assert_eq!(
        c.rule.as_ref().map(|r| r.location.as_str()),
        Some("new.warden:7:1")
    );
    assert_eq!(d.rows.len(), 1);
    assert_eq!(d.rows[0].change, "added");
}

#[test]
fn reference_test_files_pass() {
    for (file, cases) in [("finance", 22), ("connectors", 9), ("retail", 8)] {
        let r = run_file(&root().join(format!("policies/{file}.test.yaml")), None);
        assert_eq!(r.error, None, "{file}");
        let failed: Vec<_> = r.cases.iter().filter(|c| !c.passed).collect();
        assert!(failed.is_empty(), "{failed:?}");
        assert_eq!(r.passed(), cases, "{file}");
    }
    let r = run_file(&root().join("policies/finance.test.yaml"), Some("analyzer"));
    assert_eq!(r.cases.len(), 2);
}

fn write_test(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let policy = root().join("policies/finance.warden");
    std::fs::write(&path, format!("policy: {}\n{body}", policy.display())).expect("write");
    path
}

#[test]
fn a_failing_case_reports_expected_actual_and_trace() {
    let dir = scratch("fail");
    let path = write_test(
        &dir,
        "f.test.yaml",
        "cases:\n  - name: wrong\n    request: { mode: supervised, roles: [viewer], tenant: t, permissions: [invoices.manage], intent: destructive }\n    tool: delete_invoice\n    expect: { decision: confirm }\n",
    );
    let r = run_file(&path, None);
    assert_eq!(r.error, None);
    assert_eq!((r.passed(), r.failed()), (0, 1));
    let c = &r.cases[0];
    assert_eq!(c.location, format!("{}:3:5", path.display()));
    assert_eq!(c.failures, ["decision: expected confirm, got deny"]);
    let trace = c.trace.as_deref().expect("trace");
    assert!(trace.contains("role=fail @"), "{trace}");
    assert!(trace.ends_with("finance.warden:55:93"), "{trace}");
}

#[test]
fn malformed_files_point_at_the_bad_case() {
    let dir = scratch("bad");
    // A YAML type error inside the second case.
    let p = write_test(
        &dir,
        "a.test.yaml",
        "cases:\n  - name: ok\n    tool: get_invoice\n    expect: { decision: deny }\n  - name: bad\n    tool: get_invoice\n    expect: { decision: [deny] }\n",
    );
    let e = run_file(&p, None).error.expect("error");
    assert!(
        e.starts_with(&format!("{}:8:", p.display()))
            || e.starts_with(&format!("{}:7:", p.display())),
        "{e}"
    );
    // An unknown field.
    let p = write_test(
        &dir,
        "b.test.yaml",
        "cases:\n  - name: x\n    tool: get_invoice\n    expekt: {}\n",
    );
    let e = run_file(&p, None).error.expect("error");
    assert!(e.starts_with(&format!("{}:5:5", p.display())), "{e}");
    // An unknown tool is an error, at its line.
    let p = write_test(
        &dir,
        "c.test.yaml",
        "cases:\n  - name: fine\n    tool: get_invoice\n    expect: { decision: deny }\n  - name: typo\n    tool: delete_invoce\n    expect: { decision: deny }\n",
    );
    let r = run_file(&p, None);
    assert_eq!(
        r.error.as_deref(),
        Some(format!("{}:7:5: case `typo`: unknown tool `delete_invoce`: neither declared nor matched by a pattern; did you mean `delete_invoice`? (a case about an undeclared name says `undeclared: true`)", p.display()).as_str())
    );
    assert_eq!(r.failed(), 1);
    // Unknown intent, mode and role are errors too.
    for (field, body, msg) in [
        (
            "intent",
            "    request: { intent: destroy }\n",
            "unknown intent `destroy`",
        ),
        (
            "mode",
            "    request: { mode: turbo }\n",
            "unknown mode `turbo`",
        ),
        (
            "roles",
            "    request: { roles: [accountent] }\n",
            "unknown role `accountent`",
        ),
        (
            "stage",
            "    expect: { stage: roles }\n",
            "unknown stage `roles`",
        ),
    ] {
        let expect = if field == "stage" {
            ""
        } else {
            "    expect: { decision: deny }\n"
        };
        let p = write_test(
            &dir,
            &format!("{field}.test.yaml"),
            &format!("cases:\n  - name: n\n    tool: get_invoice\n{body}{expect}"),
        );
        let e = run_file(&p, None).error.expect("error");
        assert!(e.starts_with(&format!("{}:5:", p.display())), "{e}");
        assert!(e.contains(msg), "{e}");
    }
}

#[test]
fn unknown_tools_in_forced_and_offered_are_errors_at_their_line() {
    let dir = scratch("names");
    let p = write_test(
        &dir,
        "forced.test.yaml",
        "cases:\n  - name: typo\n    tool: get_invoice\n    request: { intent: read, forced: [delete_invoce] }\n    expect: { decision: deny }\n",
    );
    assert_eq!(
        run_file(&p, None).error,
        Some(format!(
            "{}:5:30: case `typo`: unknown tool `delete_invoce` in `forced`: neither declared nor matched by a pattern; did you mean `delete_invoice`?",
            p.display()
        ))
    );
    let p = write_test(
        &dir,
        "offered.test.yaml",
        "cases:\n  - name: typo\n    request: { intent: read }\n    tools: [get_invoice]\n    expect:\n      offered: [get_invoce]\n",
    );
    assert_eq!(
        run_file(&p, None).error,
        Some(format!(
            "{}:7:7: case `typo`: unknown tool `get_invoce`: neither declared nor matched by a pattern; did you mean `get_invoice`? (a case about an undeclared name says `undeclared: true`)",
            p.display()
        ))
    );
}

#[test]
fn coverage_lists_what_no_case_exercised() {
    let dir = scratch("cov");
    let p = write_test(
        &dir,
        "cov.test.yaml",
        "cases:\n  - name: one\n    request: { mode: analyzer, query: \"delete it\" }\n    tool: get_invoice\n    expect: { decision: deny }\n",
    );
    let cov = run_file(&p, None).uncovered.expect("coverage");
    assert_eq!(
        cov.tools,
        [
            "search_invoices",
            "create_invoice",
            "delete_invoice",
            "export_business_data",
            "execute_workflow",
            "create_workflow",
            "legacy_sync"
        ]
    );
    assert_eq!(cov.modes, ["supervised", "autonomous"]);
    assert_eq!(cov.cells.len(), 5 * 5 - 1);
    assert!(!cov
        .cells
        .contains(&"standard: destructive × none".to_string()));
    assert!(!cov
        .keywords
        .contains(&"destructive en \"delete\"".to_string()));
    assert!(cov.keywords.contains(&"write en \"create\"".to_string()));
    // A keyword a negator dropped was matched: it counts as exercised.
    let p = write_test(
        &dir,
        "cov2.test.yaml",
        "cases:\n  - name: one\n    request: { mode: analyzer, query: \"don't remove it\" }\n    tool: get_invoice\n    expect: { decision: deny }\n",
    );
    let cov = run_file(&p, None).uncovered.expect("coverage");
    assert!(!cov
        .keywords
        .contains(&"destructive en \"remove\"".to_string()));
    assert!(cov
        .keywords
        .contains(&"destructive en \"delete\"".to_string()));
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
}

#[test]
fn cli_test_closing_line_and_exit_codes() {
    let out = bin()
        .args(["test", "policies/"])
        .current_dir(root())
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Other test files may join policies/ later; ours are 39 cases.
    let last = stdout.lines().last().unwrap_or("");
    let passed: usize = last
        .strip_suffix(" passed, 0 failed")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("closing line {last:?}"));
    assert!(passed >= 39, "{stdout}");
    assert_eq!(out.status.code(), Some(0));

    let dir = scratch("cli");
    let p = write_test(
        &dir,
        "x.test.yaml",
        "cases:\n  - name: wrong\n    request: { intent: read }\n    tool: search_invoices\n    expect: { decision: allow }\n",
    );
    let out = bin().arg("test").arg(&p).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // One line per failing case: expected vs actual, then the trace.
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with(&format!(
            "FAIL {}:3:5 wrong: decision: expected allow, got deny | trace: identity=pass @",
            p.display()
        )),
        "{stdout}"
    );
    assert!(
        lines[0].ends_with("tenant=fail @policies/finance.warden:52:76")
            || lines[0].contains("tenant=fail @"),
        "{stdout}"
    );
    assert_eq!(lines.last(), Some(&"0 passed, 1 failed"));
    assert_eq!(out.status.code(), Some(1));
}

/// `toolwarden test ARGS... FILE`.
fn run_test_command(args: &[&str], file: &Path) -> std::process::Output {
    bin()
        .arg("test")
        .args(args)
        .arg(file)
        .output()
        .expect("runs")
}

#[test]
fn cli_test_filter_that_matches_nothing_is_an_error() {
    let dir = scratch("filter");
    let p = write_test(
        &dir,
        "f.test.yaml",
        "cases:\n  - name: reads\n    request: { intent: read }\n    tool: search_invoices\n    expect: { decision: deny }\n",
    );
    let out = run_test_command(&["--filter", "no-such-case"], &p);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: no test case name contains `no-such-case` (in 1 test file)\n"
    );
    let out = run_test_command(&["--filter", "read"], &p);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1 passed, 0 failed\n");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn cli_test_coverage_lists_one_item_a_line_and_caps_each_list() {
    let dir = scratch("covcli");
    let p = write_test(
        &dir,
        "c.test.yaml",
        "cases:\n  - name: one\n    request: { mode: analyzer, query: \"delete it\" }\n    tool: get_invoice\n    expect: { decision: deny }\n",
    );
    let out = run_test_command(&["--coverage"], &p);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let tools = lines
        .iter()
        .position(|l| *l == "  tools not exercised (7):")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(lines[tools + 1], "    search_invoices");
    assert_eq!(lines[tools + 7], "    legacy_sync");
    let keywords = lines
        .iter()
        .position(|l| l.starts_with("  keywords not exercised ("))
        .unwrap_or_else(|| panic!("{stdout}"));
    let more = &lines[keywords + 21];
    assert!(
        more.starts_with("    … and ") && more.ends_with(" more (`--json` lists them all)"),
        "{more}"
    );
    assert_eq!(lines.last(), Some(&"1 passed, 0 failed"));
}

#[test]
fn cli_diff_fail_on_change_and_json() {
    let dir = scratch("diff");
    let wide = root()
        .join("policies")
        .join(format!("tmp-wide-{}.warden", std::process::id()));
    let text = std::fs::read_to_string(root().join("policies/finance.warden"))
        .expect("read")
        .replace(
            "  write        allow  allow  deny    deny    deny",
            "  write        allow  allow  allow   deny    deny",
        );
    std::fs::write(&wide, text).expect("write");
    let q = dir.join("q.jsonl");
    std::fs::write(
        &q,
        "{\"text\": \"delete invoice 7\"}\ncreate a new invoice\n",
    )
    .expect("write");
    let out = bin()
        .args(["diff", "policies/finance.warden"])
        .arg(&wide)
        .arg("--queries")
        .arg(&q)
        .args(["--fail-on-change", "--json"])
        .current_dir(root())
        .output()
        .expect("runs");
    let _ = std::fs::remove_file(&wide);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["changed"], true);
    assert_eq!(v["cells"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["queries_checked"], 2);
    let same = bin()
        .args([
            "diff",
            "policies/finance.warden",
            "policies/finance.warden",
            "--fail-on-change",
        ])
        .current_dir(root())
        .output()
        .expect("runs");
    assert_eq!(same.status.code(), Some(0));
}

#[test]
fn cli_explain_prints_source_notes() {
    let out = bin()
        .args([
            "explain",
            "-p",
            "policies/finance.warden",
            "--mode",
            "supervised",
            "--role",
            "viewer",
            "--permission",
            "invoices.manage",
            "--tenant",
            "b-42",
            "--query",
            "delete invoice 7",
            "--tool",
            "delete_invoice",
        ])
        .current_dir(root())
        .output()
        .expect("runs");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("  4 role         fail    needs one of `accountant`; the request holds `viewer` (closed under inclusion)\n        --> policies/finance.warden:55:93\n"), "{s}");
    assert!(s.ends_with("decision: deny (stage role)\n"), "{s}");
}

#[test]
fn diff_reports_keyword_changes_and_reclassified_queries() {
    let base =
        "policy \"k\" version 1\neffects none, delete\nintents destructive > read\nfallback read\n\
                matrix m {\n none delete\n read allow deny\n destructive allow allow\n}\n\
                mode s { matrix m }\ndefault mode s\ntool rm { effect delete }\n";
    let old = Policy::parse(
        &format!("{base}keywords destructive {{ en \"delete\" }}\n"),
        "old.warden",
    )
    .expect("loads");
    let new = Policy::parse(
        &format!("{base}keywords destructive {{ en \"delete\", \"purge\" }}\n"),
        "new.warden",
    )
    .expect("loads");
    let d = PolicyDiff::compute(&old, &new).with_queries(
        &old,
        &new,
        ["purge invoice 7", "delete it", "show all"],
    );
    assert_eq!(d.keywords_added, ["destructive en \"purge\""]);
    assert!(d.keywords_removed.is_empty());
    assert!(d.cells.is_empty(), "no cell moves: {:?}", d.cells);
    assert_eq!(d.queries.len(), 1);
    assert_eq!(d.queries[0].text, "purge invoice 7");
    assert_eq!(
        (d.queries[0].old.as_slice(), d.queries[0].new.as_slice()),
        (
            ["read".to_string()].as_slice(),
            ["destructive".to_string()].as_slice()
        )
    );
    assert_eq!(d.queries[0].new_hits, ["destructive:purge"]);
    assert!(d.render().ends_with("0 cells changed: 0 decisions moved, 0 reasons moved; 0 rows added/removed/changed, 0 declarations changed, 0 argument-rule changes, 1 keyword added, 0 removed, 1 of 3 queries reclassified\n"));
}

#[test]
fn diff_reports_quoted_embedded_and_except_changes() {
    let base =
        "policy \"k\" version 1\neffects none, delete\nintents destructive > read\nfallback read\n\
                matrix m {\n none delete\n read allow deny\n destructive allow allow\n}\n\
                mode s { matrix m }\ndefault mode s\ntool rm { effect delete }\n\
                keywords destructive { en \"delete\", \"stop\" }\n";
    let old = Policy::parse(
        &format!("{base}except {{ en \"delete button\" }}\n"),
        "old.warden",
    )
    .expect("loads");
    let new = Policy::parse(
        &format!(
            "{base}quoted ignore\nembedded {{ en \"translate this\" }}\nexcept clause {{ en \"stop\" }}\n"
        ),
        "new.warden",
    )
    .expect("loads");
    let d = PolicyDiff::compute(&old, &new).with_queries(
        &old,
        &new,
        [
            "stop! show all",
            "translate this: delete it",
            "delete button",
        ],
    );
    assert_eq!(
        d.keywords_added,
        ["embedded \"translate this\"", "except clause \"stop\""]
    );
    assert_eq!(d.keywords_removed, ["except \"delete button\""]);
    assert_eq!(d.settings, ["quoted: count -> ignore"]);
    let moved: Vec<(&str, &[String], &[String])> = d
        .queries
        .iter()
        .map(|q| (q.text.as_str(), q.old.as_slice(), q.new.as_slice()))
        .collect();
    let (read, destructive) = (["read".to_string()], ["destructive".to_string()]);
    assert_eq!(
        moved,
        [
            ("stop! show all", &destructive[..], &read[..]),
            ("translate this: delete it", &destructive[..], &read[..]),
            ("delete button", &read[..], &destructive[..]),
        ]
    );
}

#[test]
fn table_json_and_csv_layouts_are_stable() {
    let policy = load("retail.warden");
    let table = Table::build(&policy, None).expect("table");
    insta::assert_snapshot!("table_retail_json", table.render(TableFormat::Json));
    let csv = Table::build(&load("finance.warden"), Some("supervised"))
        .expect("table")
        .render(TableFormat::Csv);
    assert!(csv.contains(
        "tool,delete_invoice,delete,supervised,destructive,confirm,confirmation,,,yes,accountant|admin,invoices.delete|invoices.manage,\n"
    ), "{csv}");
    assert!(csv.contains(
        "tool,delete_invoice,delete,supervised,read,deny,intent,confirm,,yes,accountant|admin,invoices.delete|invoices.manage,\n"
    ), "{csv}");
    assert!(
        csv.contains("tool,legacy_sync,write,supervised,read,deny,identity,,,,,,\n"),
        "{csv}"
    );
}

#[test]
fn cli_explain_with_args_judges_the_call_too() {
    let out = bin()
        .args([
            "explain",
            "-p",
            "policies/finance.warden",
            "--mode",
            "autonomous",
            "--permission",
            "invoices.manage",
            "--tenant",
            "b-42",
            "--intent",
            "write",
            "--tool",
            "create_invoice",
            "--args",
            "{\"business_id\": \"x\", \"customer_id\": 1}",
        ])
        .current_dir(root())
        .output()
        .expect("runs");
    let s = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines[lines.len() - 2], "decision: allow");
    assert_eq!(
        lines[lines.len() - 1],
        "call with these arguments: deny at stage tenant_arg (argument `business_id` names tenant `x`, but this session's tenant is `b-42`), rule policies/finance.warden:50:12"
    );
}

/// A policy of ours whose roles and permissions are granted through chains, one of them
/// written over two lines.
const GRANTS: &str = "policy \"grants\" version 1
effects none, write
mode office { }
mode locked { restrict none }
roles { owner > editor > reviewer,
        reviewer > reader }
permission \"docs.admin\" implies \"docs.edit\"
permission \"docs.edit\" implies \"docs.read\"
tool read_doc  { effect none   roles reader  permissions \"docs.read\" }
tool edit_doc  { effect write  roles editor }
";

fn grants_policy() -> Policy {
    Policy::parse(GRANTS, "grants.warden").unwrap_or_else(|e| panic!("{}", e.render()))
}

/// `(grants, locations of the rules)` of the step of `stage` in a trace.
fn step_of(trace: &toolwarden::analysis::Trace, stage: Stage) -> (Vec<String>, Vec<String>) {
    let step = trace
        .steps
        .iter()
        .find(|s| s.stage == stage)
        .expect("stage is traced");
    (
        step.grants.clone(),
        step.rules.iter().map(|r| r.location.clone()).collect(),
    )
}

#[test]
fn explain_cites_the_mode_line_on_a_mode_pass() {
    let p = grants_policy();
    let request = Request::new("office")
        .roles(["reader"])
        .permissions(["docs.read"]);
    let t = p
        .explain(&request, &p.fallback_intent(), "read_doc")
        .expect("valid request");
    assert_eq!(t.decision, Decision::Allow);
    assert_eq!(
        step_of(&t, Stage::Mode),
        (vec![], vec!["grants.warden:3:6".to_string()])
    );
    // A mode with a ceiling cites the ceiling, pass or fail.
    let t = p
        .explain(
            &Request::new("locked").roles(["owner"]),
            &p.fallback_intent(),
            "edit_doc",
        )
        .expect("valid request");
    assert_eq!(
        step_of(&t, Stage::Mode),
        (vec![], vec!["grants.warden:4:15".to_string()])
    );
}

#[test]
fn explain_cites_the_roles_lines_that_granted_a_role() {
    let p = grants_policy();
    let request = Request::new("office")
        .roles(["owner"])
        .permissions(["docs.read"]);
    let t = p
        .explain(&request, &p.fallback_intent(), "read_doc")
        .expect("valid request");
    assert_eq!(
        step_of(&t, Stage::Role),
        (
            vec!["role `reader` granted through `roles { owner > editor > reviewer }` at grants.warden:5:9 and `roles { reviewer > reader }` at grants.warden:6:9".to_string()],
            vec![
                "grants.warden:9:32".to_string(),
                "grants.warden:5:9".to_string(),
                "grants.warden:6:9".to_string()
            ]
        )
    );
    // A role held directly is granted by nothing but the request.
    let t = p
        .explain(
            &Request::new("office").roles(["editor"]),
            &p.fallback_intent(),
            "edit_doc",
        )
        .expect("valid request");
    assert_eq!(
        step_of(&t, Stage::Role),
        (vec![], vec!["grants.warden:10:32".to_string()])
    );
    // A role stage that fails grants nothing.
    let t = p
        .explain(
            &Request::new("office").roles(["reader"]),
            &p.fallback_intent(),
            "edit_doc",
        )
        .expect("valid request");
    assert_eq!(t.stage, Some(Stage::Role));
    assert_eq!(step_of(&t, Stage::Role).0, Vec::<String>::new());
}

#[test]
fn explain_cites_the_implies_lines_that_granted_a_permission() {
    let p = grants_policy();
    let request = Request::new("office")
        .roles(["owner"])
        .permissions(["docs.admin"]);
    let t = p
        .explain(&request, &p.fallback_intent(), "read_doc")
        .expect("valid request");
    assert_eq!(
        step_of(&t, Stage::Permission),
        (
            vec!["permission `docs.read` granted through `permission \"docs.admin\" implies \"docs.edit\"` at grants.warden:7:33 and `permission \"docs.edit\" implies \"docs.read\"` at grants.warden:8:32".to_string()],
            vec![
                "grants.warden:9:46".to_string(),
                "grants.warden:7:33".to_string(),
                "grants.warden:8:32".to_string()
            ]
        )
    );
    insta::assert_snapshot!("explain_grants_rendered", t.render());
}

/// The test runner's fixture: `send_money` has two argument rules, and a `rules` block applies
/// one to every tool.
fn money_policy() -> Policy {
    Policy::from_file("tests/fixtures/testrun/money.warden").expect("the fixture loads")
}

#[test]
fn table_marks_cells_that_argument_rules_can_tighten_and_lists_the_rules() {
    let table = Table::build(&money_policy(), None).expect("table");
    assert_eq!(
        table.render(TableFormat::Text),
        "# decision table of policy \"money\" version 1
# modes: autonomous
# intents: read
# a decision holds when every condition holds; a failed condition denies at its stage.
# connector S: allowlist unset or holds S (*: the name's server) · tenant: a tenant is set
# role a|b: one of these roles (closed under inclusion) · permission p|q: p or a permission implying it
# allow*, confirm*: argument rules (`rule:` lines, and those for every tool) can still deny a call or ask for confirmation
# rules for every tool:
#   deny when any =~ \"AKIA[0-9A-Z]{16}\"

tool get_balance  effect none
  autonomous  read  allow*

tool send_money  effect write
  autonomous  read  allow*
  rule: confirm when recipient not in context.contacts
  rule: deny when amount > 10000

unknown *  (no effect)
  autonomous  read  deny identity
"
    );
    let csv = table.render(TableFormat::Csv);
    assert_eq!(
        csv,
        "kind,name,effect,mode,intent,decision,stage,forced,connector,tenant,roles,permissions,argument_rules
tool,get_balance,none,autonomous,read,allow,,,,,,,yes
tool,send_money,write,autonomous,read,allow,,,,,,,yes
unknown,*,,autonomous,read,deny,identity,,,,,,
"
    );
    let json: serde_json::Value =
        serde_json::from_str(&table.render(TableFormat::Json)).expect("JSON");
    assert_eq!(
        json["rules"],
        serde_json::json!([{
            "source": "tests/fixtures/testrun/money.warden:19:3",
            "outcome": "deny",
            "text": "deny when any =~ \"AKIA[0-9A-Z]{16}\""
        }])
    );
    assert_eq!(json["rows"][1]["name"], "send_money");
    assert_eq!(
        json["rows"][1]["rules"],
        serde_json::json!([
            {
                "source": "tests/fixtures/testrun/money.warden:14:3",
                "outcome": "confirm",
                "text": "confirm when recipient not in context.contacts"
            },
            {
                "source": "tests/fixtures/testrun/money.warden:15:3",
                "outcome": "deny",
                "text": "deny when amount > 10000"
            }
        ])
    );
    assert_eq!(json["rows"][1]["cells"][0]["argument_rules"], true);
    assert_eq!(json["rows"][0]["rules"], serde_json::json!([]));
    assert_eq!(json["rows"][2]["cells"][0]["argument_rules"], false);
}

#[test]
fn table_stars_only_the_tools_with_rules_and_keeps_forced_cells_apart() {
    // Without the `rules` block only `send_money` has rules; a confirm cell and a forced
    // decision are starred too, a denied cell never.
    let text = std::fs::read_to_string("tests/fixtures/testrun/money.warden")
        .expect("read")
        .replace("rules {\n  deny when any =~ \"AKIA[0-9A-Z]{16}\"\n}\n", "")
        .replace("  read allow allow\n", "  read allow confirm\n")
        .replace("intents read\n", "intents read > other\n")
        .replace(
            "  read allow confirm\n",
            "  read allow confirm\n  other allow deny\n",
        );
    let p = Policy::parse(&text, "money.warden").unwrap_or_else(|e| panic!("{}", e.render()));
    let table = Table::build(&p, None).expect("table");
    let cells = |name: &str| -> Vec<String> {
        let row = table.rows.iter().find(|r| r.name == name).expect("row");
        row.cells.iter().map(|c| c.outcome.to_text()).collect()
    };
    assert_eq!(cells("get_balance"), ["allow", "allow"]);
    assert_eq!(
        cells("send_money"),
        ["confirm*", "deny intent; forced: confirm*"]
    );
    assert!(table.rules.is_empty());
}
