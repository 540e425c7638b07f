//! The analysis tools and flow labels: `test` cases with `session.labels` and multi-step cases
//! that reach a label through a tainting call, `--coverage` of `after` blocks, the table per
//! label set, the diff's cells that move under a label set, the graph's labels, taints and
//! `after` blocks, explain's applicable blocks, and `fmt` keeping all of it. The policy is
//! `tests/fixtures/flow/header.warden`: the language's example exactly as written, included
//! into the declarations it leaves to its context.

use std::path::PathBuf;
use std::process::Command;

use toolwarden::analysis::testrun::run_file;
use toolwarden::Policy;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/flow").join(name)
}

const HEADER: &str = include_str!("fixtures/flow/header.warden");
const EXAMPLE: &str = include_str!("fixtures/flow/language_example.warden");

fn policy() -> Policy {
    Policy::from_file(fixture("header.warden")).expect("the example loads as written")
}

/// A scratch directory holding the fixture policy and the test file `header.test.yaml` with
/// `body`; returns the test file.
fn scratch(tag: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tw-flow-analysis-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    std::fs::write(dir.join("header.warden"), HEADER).expect("write policy");
    std::fs::write(dir.join("language_example.warden"), EXAMPLE).expect("write example");
    let path = dir.join("header.test.yaml");
    std::fs::write(&path, body).expect("write test file");
    path
}

/// The file error of a test file, without its path prefix.
fn error_of(tag: &str, body: &str) -> String {
    let p = scratch(tag, body);
    let r = run_file(&p, None);
    assert!(r.cases.is_empty(), "{:?}", r.cases);
    let e = r.error.expect("a file error");
    e.strip_prefix(&format!("{}:", p.display()))
        .unwrap_or(&e)
        .to_string()
}

fn toolwarden(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run toolwarden");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------------
// toolwarden test

#[test]
fn the_example_policy_loads_as_written() {
    let p = policy();
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    assert_eq!(p.labels().collect::<Vec<_>>(), ["untrusted", "private"]);
    assert!(HEADER.contains("include \"language_example.warden\""));
}

#[test]
fn the_shipped_test_file_passes_every_case() {
    let r = run_file(&fixture("header.test.yaml"), None);
    assert_eq!(r.error, None);
    let failed: Vec<_> = r.cases.iter().filter(|c| !c.passed).collect();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(r.passed(), 4);
}

#[test]
fn a_tainting_call_in_one_step_reaches_stage_flow_in_the_next() {
    let p = scratch(
        "steps",
        "request: { mode: autonomous, context: { contacts: [alice] } }
cases:
  - name: the inbox is untrusted and private
    steps:
      - tool: read_inbox
        expect: { decision: allow, stage: none }
      - tool: post_webpage
        expect: { decision: deny, stage: flow, rule: language_example.warden:14:28 }
      - tool: send_money
        args: { recipient: alice }
        expect: { decision: confirm, stage: flow, rule: language_example.warden:10:3 }
  - name: a denied call taints nothing
    session: { labels: [private] }
    steps:
      - tool: get_webpage
        expect: { decision: allow }
      - tool: post_webpage
        expect: { decision: deny, stage: flow }
",
    );
    let r = run_file(&p, None);
    assert_eq!(r.error, None);
    let failed: Vec<_> = r.cases.iter().filter(|c| !c.passed).collect();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(r.passed(), 2);
}

#[test]
fn a_failing_flow_step_names_the_step_and_traces_it_with_its_labels() {
    let p = scratch(
        "fail",
        "request: { mode: autonomous }
cases:
  - name: wrong on purpose
    steps:
      - tool: get_webpage
        expect: { decision: allow }
      - tool: send_money
        args: { recipient: alice }
        expect: { decision: allow }
",
    );
    let r = run_file(&p, None);
    assert_eq!(r.error, None);
    let c = &r.cases[0];
    assert!(!c.passed);
    assert_eq!(
        c.failures,
        ["step 2 (`send_money`): decision: expected allow, got confirm"]
    );
    let trace = c.trace.as_deref().expect("a trace");
    assert!(trace.starts_with("step 2: "), "{trace}");
    assert!(trace.contains("flow=confirm"), "{trace}");
}

#[test]
fn an_undeclared_session_label_is_a_positioned_error() {
    assert_eq!(
        error_of(
            "label",
            "cases:
  - name: typo
    session: { labels: [untrustd] }
    tool: send_money
    expect: { decision: confirm }
"
        ),
        "3:16: case `typo`: unknown label `untrustd` in `session.labels`; did you mean `untrusted`? the policy declares `untrusted`, `private`"
    );
    assert_eq!(
        error_of(
            "field",
            "cases:
  - name: typo
    session: { label: [untrusted] }
    tool: send_money
    expect: { decision: confirm }
"
        ),
        "3:16: malformed test file: cases[0].session: unknown field `label`, expected `labels` at line 3 column 16"
    );
}

#[test]
fn coverage_lists_the_after_blocks_no_case_exercised() {
    let r = run_file(&fixture("header.test.yaml"), None);
    let u = r.uncovered.expect("coverage");
    let at = fixture("language_example.warden").display().to_string();
    assert_eq!(u.after_blocks, 2);
    assert_eq!(
        u.afters,
        [format!("after untrusted, private: {at}:14:28 deny export")]
    );
    // With every block exercised, none is listed.
    let p = scratch(
        "cover",
        "request: { mode: autonomous }
cases:
  - name: both labels
    session: { labels: [private, untrusted] }
    tool: post_webpage
    expect: { decision: deny, stage: flow }
",
    );
    let u = run_file(&p, None).uncovered.expect("coverage");
    assert_eq!(u.afters, Vec::<String>::new());
}

#[test]
fn coverage_text_lists_each_block_with_its_lines() {
    let p = scratch(
        "cover-text",
        "request: { mode: autonomous }
cases:
  - name: no labels
    tool: post_webpage
    expect: { decision: confirm }
",
    );
    let path = p.display().to_string();
    let (code, out, err) = toolwarden(&["test", &path, "--coverage"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let dir = p.parent().expect("dir").display().to_string();
    let tail: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("  after blocks"))
        .collect();
    assert_eq!(
        tail,
        [
            "  after blocks not exercised (2):".to_string(),
            format!("    after untrusted: {dir}/language_example.warden:10:3 confirm write, export · {dir}/language_example.warden:11:3 deny    execute · {dir}/language_example.warden:12:3 confirm when recipient not in query"),
            format!("    after untrusted, private: {dir}/language_example.warden:14:28 deny export"),
            "1 passed, 0 failed".to_string(),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// toolwarden table

use toolwarden::analysis::{Table, TableFormat};

#[test]
fn the_table_shows_the_cells_each_label_set_changes() {
    let table = Table::build(&policy(), None).expect("table");
    insta::assert_snapshot!("table_label_sets", table.render(TableFormat::Text));
}

#[test]
fn the_table_for_one_label_set_marks_the_tightened_cells() {
    let (code, out, err) = toolwarden(&[
        "table",
        "-p",
        "tests/fixtures/flow/header.warden",
        "--labels",
        "private,untrusted",
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    let full = Table::build_for_labels(&policy(), None, &["untrusted", "private"]).expect("t");
    assert_eq!(out, full.render(TableFormat::Text));
    assert!(out.starts_with(
        "# decision table of policy \"flow\" version 1, for a session holding labels untrusted, private\n"
    ));
    let cells: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("  autonomous"))
        .collect();
    assert_eq!(
        cells,
        [
            "  autonomous  read  allow* [after untrusted]",
            "  autonomous  read  allow* [after untrusted]",
            "  autonomous  read  deny flow [after untrusted, private]",
            "  autonomous  read  allow* [after untrusted]",
            "  autonomous  read  deny flow [after untrusted]",
            "  autonomous  read  confirm* [after untrusted]",
            "  autonomous  read  deny identity",
        ]
    );
    // The table for no label is the table without labels, without the label sets.
    let (_, none, _) = toolwarden(&[
        "table",
        "-p",
        "tests/fixtures/flow/header.warden",
        "--labels",
        "",
    ]);
    let base = Table::build(&policy(), None).expect("table");
    let cut = base.render(TableFormat::Text);
    let cut = cut
        .split("\n# labels untrusted:")
        .next()
        .expect("base part");
    assert_eq!(
        none.replacen(", for a session holding no label", "", 1),
        cut
    );
}

#[test]
fn an_undeclared_label_is_refused_by_the_table() {
    let (code, out, err) = toolwarden(&[
        "table",
        "-p",
        "tests/fixtures/flow/header.warden",
        "--labels",
        "untrustd",
    ]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        "error: `--labels`: the session holds label `untrustd`, which the policy does not declare; it declares `untrusted`, `private`\n"
    );
}

#[test]
fn the_table_json_has_a_label_sets_array() {
    let table = Table::build(&policy(), None).expect("table");
    let v: serde_json::Value =
        serde_json::from_str(&table.render(TableFormat::Json)).expect("json");
    assert_eq!(v["labels"], serde_json::json!(["untrusted", "private"]));
    let sets = v["label_sets"].as_array().expect("label_sets");
    let labels: Vec<&serde_json::Value> = sets.iter().map(|s| &s["labels"]).collect();
    assert_eq!(
        labels,
        [
            &serde_json::json!(["untrusted"]),
            &serde_json::json!(["private"]),
            &serde_json::json!(["untrusted", "private"]),
        ]
    );
    assert_eq!(sets[1]["cells"], serde_json::json!([]));
    let post = sets[2]["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .find(|c| c["name"] == "post_webpage")
        .expect("post_webpage moves");
    assert_eq!(
        post,
        &serde_json::json!({
            "kind": "tool", "name": "post_webpage", "mode": "autonomous", "intent": "read",
            "decision": "deny", "stage": "flow",
            "conditions": {"connector": null, "tenant": false, "roles": null, "permissions": []},
            "forced": null, "argument_rules": false, "after": "after untrusted, private"
        })
    );
    assert_eq!(v["rows"][1]["taints"], serde_json::json!(["untrusted"]));
    // The cells of the table without labels carry no `after`.
    assert!(v["rows"][2]["cells"][0].get("after").is_none());
}

#[test]
fn the_table_csv_has_labels_and_after_columns() {
    let table = Table::build(&policy(), None).expect("table");
    insta::assert_snapshot!("table_label_sets_csv", table.render(TableFormat::Csv));
}

#[test]
fn a_policy_without_labels_keeps_its_table_layout() {
    let p = Policy::parse(
        "policy \"p\"\neffects none, write\nmode m { }\ntool a { effect write }\n",
        "p.warden",
    )
    .expect("policy");
    let table = Table::build(&p, None).expect("table");
    assert_eq!(
        table.render(TableFormat::Csv),
        "kind,name,effect,mode,intent,decision,stage,forced,connector,tenant,roles,permissions,argument_rules\n\
         tool,a,write,m,,allow,,,,,,,\n\
         unknown,*,,m,,deny,identity,,,,,,\n"
    );
    let v: serde_json::Value =
        serde_json::from_str(&table.render(TableFormat::Json)).expect("json");
    assert!(v.get("label_sets").is_none() && v.get("labels").is_none());
    assert!(v["rows"][0].get("taints").is_none());
}

/// A mode's own `after` block, a forced name and a pattern that taints.
const MODES: &str = r#"policy "modes" version 2
effects none, write
intents act > read
fallback read
matrix m {
  none write
  read allow deny
  act  allow allow
}
labels untrusted
mode strict { matrix m  after untrusted { deny write } }
mode loose { matrix m }
match "web_*" { effect none  taints untrusted }
tool send { effect write }
"#;

#[test]
fn a_mode_after_block_changes_only_that_mode_and_a_forced_name_too() {
    let p = Policy::parse(MODES, "modes.warden").expect("policy");
    let table = Table::build(&p, None).expect("table");
    let text = table.render(TableFormat::Text);
    let tail = text
        .split("\n# labels untrusted:")
        .nth(1)
        .expect("label set");
    assert_eq!(
        tail,
        " 2 cells differ from the table without labels\n\
         tool send\n\
         \x20 strict  act   deny flow [after untrusted]\n\
         \x20 strict  read  deny intent; forced: deny [after untrusted]\n"
    );
    assert!(text.contains("pattern web_*  effect none  taints untrusted\n"));
}

// ---------------------------------------------------------------------------------------------
// toolwarden diff

use toolwarden::analysis::PolicyDiff;

/// The fixture policy with `example` in place of the included example, as one text.
fn with_example(example: &str) -> Policy {
    let text = HEADER.replace("include \"language_example.warden\"\n", example);
    Policy::parse(&text, "flow.warden").expect("policy")
}

/// The example with the trifecta block loosened to `confirm export` and `write` denied after
/// untrusted content.
fn loosened() -> String {
    EXAMPLE
        .replace(
            "after untrusted, private { deny export }",
            "after untrusted, private { confirm export }",
        )
        .replace("  deny    execute\n", "  deny    execute, write\n")
        .replace(
            "tool get_balance   { effect none   taints private }",
            "tool get_balance   { effect none   taints private, untrusted }",
        )
}

#[test]
fn the_diff_reports_cells_that_move_under_a_label_set() {
    let (a, b) = (with_example(EXAMPLE), with_example(&loosened()));
    let d = PolicyDiff::compute(&a, &b);
    insta::assert_snapshot!("diff_label_sets", d.render());
    let moved: Vec<(String, Vec<String>, String, String)> = d
        .cells
        .iter()
        .map(|c| {
            let show = |o: &Option<toolwarden::analysis::table::Outcome>| {
                o.as_ref().map_or(String::new(), |o| o.to_text())
            };
            (c.name.clone(), c.labels.clone(), show(&c.old), show(&c.new))
        })
        .collect();
    assert_eq!(
        moved,
        [
            (
                "post_webpage".to_string(),
                vec!["untrusted".to_string(), "private".to_string()],
                "deny flow [after untrusted, private]".to_string(),
                "confirm* [after untrusted]".to_string()
            ),
            (
                "send_money".to_string(),
                vec!["untrusted".to_string()],
                "confirm* [after untrusted]".to_string(),
                "deny flow [after untrusted]".to_string()
            ),
        ]
    );
    // `send_money` moves under `untrusted, private` too, but as under `untrusted` alone: shown
    // once, under the smaller set.
    assert!(!d.is_empty());
}

#[test]
fn a_label_added_in_the_new_version_names_its_set() {
    let new = EXAMPLE.replace(
        "labels untrusted, private",
        "labels untrusted, private, secret",
    ) + "after secret { deny none }\n";
    let d = PolicyDiff::compute(&with_example(EXAMPLE), &with_example(&new));
    let cells: Vec<(String, Vec<String>)> = d
        .cells
        .iter()
        .map(|c| (c.name.clone(), c.labels.clone()))
        .collect();
    assert_eq!(
        cells,
        ["get_balance", "get_webpage", "read_inbox"]
            .map(|n| (n.to_string(), vec!["secret".to_string()]))
    );
    assert_eq!(
        d.groups[0].summary,
        "`tool get_balance` with labels secret: after secret: deny none — 1 cell allow → deny"
    );
    assert_eq!(
        d.settings,
        [
            "after secret: (none) -> { deny none }",
            "labels: untrusted, private -> untrusted, private, secret"
        ]
    );
}

#[test]
fn a_change_without_labels_is_not_repeated_under_each_label_set() {
    let new = EXAMPLE.replace(
        "tool get_webpage   { effect none   taints untrusted }",
        "tool get_webpage   { effect write  taints untrusted }",
    );
    let d = PolicyDiff::compute(&with_example(EXAMPLE), &with_example(&new));
    let cells: Vec<(String, Vec<String>, String)> = d
        .cells
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.labels.clone(),
                c.new.as_ref().map_or(String::new(), |o| o.to_text()),
            )
        })
        .collect();
    // Without labels `get_webpage` stays allowed (the matrix allows write); after untrusted
    // content a write needs the user, which it did not as a `none` tool.
    assert_eq!(
        cells,
        [(
            "get_webpage".to_string(),
            vec!["untrusted".to_string()],
            "confirm* [after untrusted]".to_string()
        )]
    );
}

// ---------------------------------------------------------------------------------------------
// toolwarden explain

#[test]
fn explain_lists_the_after_blocks_of_the_mode_for_the_labels() {
    let p = policy();
    let request = toolwarden::Request::new("autonomous");
    let intent = p.fallback_intent();
    let trace = p
        .explain_labels(&request, &intent, "post_webpage", &["untrusted"])
        .expect("trace");
    let at = fixture("language_example.warden").display().to_string();
    let blocks: Vec<(String, bool, Vec<String>, &str, usize)> = trace
        .after_blocks
        .iter()
        .map(|a| {
            (
                a.head.clone(),
                a.applies,
                a.missing.clone(),
                a.effect,
                a.lines.len(),
            )
        })
        .collect();
    assert_eq!(
        blocks,
        [
            ("after untrusted".to_string(), true, vec![], "confirm", 3),
            (
                "after untrusted, private".to_string(),
                false,
                vec!["private".to_string()],
                "deny",
                1
            ),
        ]
    );
    assert_eq!(
        trace.after_blocks[0].lines,
        [
            format!("{at}:10:3: confirm write, export"),
            format!("{at}:11:3: deny    execute"),
            format!("{at}:12:3: confirm when recipient not in query"),
        ]
    );
    // Without labels the trace lists no block.
    let plain = p.explain(&request, &intent, "post_webpage").expect("trace");
    assert!(plain.after_blocks.is_empty());
}

#[test]
fn explain_text_shows_the_blocks_and_a_session_file_its_label_sources() {
    let p = policy();
    let mut s = toolwarden::Session::new();
    s.record(&p, "read_inbox").expect("record");
    let dir = std::env::temp_dir().join(format!("tw-flow-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("session.json");
    std::fs::write(&file, s.to_json()).expect("write session");
    let (code, out, err) = toolwarden(&[
        "explain",
        "-p",
        "tests/fixtures/flow/header.warden",
        "--mode",
        "autonomous",
        "--tool",
        "post_webpage",
        "--session",
        &file.display().to_string(),
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "session label untrusted: from read_inbox in turn 1",
            "session label private: from read_inbox in turn 1"
        ]
    );
    let tail: Vec<&str> = out.lines().skip_while(|l| *l != "after blocks:").collect();
    let at = "tests/fixtures/flow/language_example.warden";
    assert_eq!(
        tail,
        [
            "after blocks:".to_string(),
            "  after untrusted: applies: the tool's effect needs confirmation".to_string(),
            format!("      {at}:10:3: confirm write, export"),
            format!("      {at}:11:3: deny    execute"),
            format!("      {at}:12:3: confirm when recipient not in query"),
            "  after untrusted, private: applies: denies the tool's effect".to_string(),
            format!("      {at}:14:28: deny export"),
            "decision: deny (stage flow)".to_string(),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// toolwarden fmt

#[test]
fn fmt_keeps_labels_taints_and_after_blocks_and_is_idempotent() {
    let text = HEADER.replace("include \"language_example.warden\"\n", EXAMPLE);
    let once = toolwarden::fmt::format_source(&text, "flow.warden").expect("formats");
    let twice = toolwarden::fmt::format_source(&once, "flow.warden").expect("formats again");
    assert_eq!(once, twice);
    for kept in [
        "labels untrusted, private\n",
        "tool read_inbox  { effect none  taints untrusted, private }\n",
        "after untrusted {\n  confirm write, export  # effects that now need the user\n  deny execute\n  confirm when recipient not in query  # argument rules, as in tool bodies, for every tool\n}\n",
        "after untrusted, private { deny export }  # all listed labels present: the trifecta\n",
    ] {
        assert!(once.contains(kept), "{kept:?} in\n{once}");
    }
    // The formatted policy decides as the original: no cell moves under any label set, and
    // no declaration changes.
    let (a, b) = (
        Policy::parse(&text, "flow.warden").expect("original"),
        Policy::parse(&once, "flow.warden").expect("formatted"),
    );
    let d = PolicyDiff::compute(&a, &b);
    assert!(d.is_empty(), "{}", d.render());
    // (The text layout leaves positions out: the formatted rules sit on other lines.)
    assert_eq!(
        Table::build(&a, None).expect("t").render(TableFormat::Text),
        Table::build(&b, None).expect("t").render(TableFormat::Text)
    );
    // A mode's own `after` block survives too.
    let modes = toolwarden::fmt::format_source(MODES, "modes.warden").expect("formats");
    assert!(modes.contains("after untrusted { deny write }"), "{modes}");
    let diff = PolicyDiff::compute(
        &Policy::parse(MODES, "modes.warden").expect("original"),
        &Policy::parse(&modes, "modes.warden").expect("formatted"),
    );
    assert!(diff.is_empty(), "{}", diff.render());
}

// ---------------------------------------------------------------------------------------------
// toolwarden graph

use toolwarden::analysis::graph::{render, GraphFormat};

#[test]
fn the_graph_draws_labels_taints_and_after_blocks() {
    let p = policy();
    let dot = render(&p, GraphFormat::Dot);
    let flow: String = dot
        .lines()
        .skip_while(|l| !l.starts_with("  subgraph cluster_labels"))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!("graph_flow_dot", flow);
    let mermaid = render(&p, GraphFormat::Mermaid);
    let flow: String = mermaid
        .lines()
        .skip_while(|l| !l.starts_with("  subgraph labels"))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!("graph_flow_mermaid", flow);
    // A mode's block names its mode.
    let modes = render(
        &Policy::parse(MODES, "modes.warden").expect("policy"),
        GraphFormat::Mermaid,
    );
    assert!(
        modes.contains("    f0[\"after untrusted (mode strict)<br/>deny write\"]\n"),
        "{modes}"
    );
    assert!(modes.contains("  p0 -.->|taints| l0\n"), "{modes}");
}

#[test]
fn a_policy_without_labels_draws_no_flow_part() {
    let p = Policy::parse(
        "policy \"p\"\neffects none, write\nmode m { }\ntool a { effect write }\n",
        "p.warden",
    )
    .expect("policy");
    assert!(!render(&p, GraphFormat::Dot).contains("cluster_labels"));
    assert!(!render(&p, GraphFormat::Mermaid).contains("subgraph labels"));
}

/// The example of docs/testing.md ("Flow labels: `session` and tainting steps"), as written,
/// passes against the fixture policy it describes.
#[test]
fn the_documented_flow_example_passes() {
    let doc = std::fs::read_to_string(root().join("docs/testing.md")).expect("docs/testing.md");
    let from = doc
        .find("#### Flow labels: `session` and tainting steps")
        .expect("the section");
    let start = from + doc[from..].find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = start + doc[start..].find("```").expect("closed");
    let r = run_file(&scratch("doc", &doc[start..end]), None);
    assert_eq!(r.error, None);
    assert_eq!((r.passed(), r.failed()), (2, 0), "{:?}", r.cases);
}
