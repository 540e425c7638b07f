//! `toolwarden import mcp`: effects from annotations, accepted shapes, errors with JSON paths,
//! quoting, and the generated policy loading clean.

use std::process::Command;

use serde_json::json;
use toolwarden::import::mcp::{self, McpEffect};
use toolwarden::Policy;

#[test]
fn effects_follow_the_spec_defaults() {
    use McpEffect::{Delete, Write};
    let cases = [
        (None, None, Delete),
        (None, Some(true), Delete),
        (None, Some(false), Write),
        (Some(false), None, Delete),
        (Some(false), Some(true), Delete),
        (Some(false), Some(false), Write),
        (Some(true), None, McpEffect::None),
        (Some(true), Some(true), McpEffect::None),
        (Some(true), Some(false), McpEffect::None),
    ];
    for (ro, de, want) in cases {
        assert_eq!(
            McpEffect::from_hints(ro, de),
            want,
            "readOnly {ro:?} destructive {de:?}"
        );
    }
}

#[test]
fn three_input_shapes_give_the_same_tools() {
    let tools = json!([
        {"name": "a", "annotations": {"readOnlyHint": true}},
        {"name": "b", "inputSchema": {}}
    ]);
    let bare = mcp::catalog_from_value(&tools).unwrap();
    let listed = mcp::catalog_from_value(&json!({"tools": tools})).unwrap();
    let rpc =
        mcp::catalog_from_value(&json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": tools}}))
            .unwrap();
    assert_eq!(bare, listed);
    assert_eq!(bare, rpc);
    assert_eq!(bare.len(), 2);
    assert_eq!(bare[0].effect(), McpEffect::None);
    assert!(bare[0].has_annotations);
    assert_eq!(bare[1].effect(), McpEffect::Delete);
    assert!(!bare[1].has_annotations);
}

fn err(text: &str) -> String {
    mcp::parse_catalog(text).unwrap_err().to_string()
}

#[test]
fn bad_input_names_the_json_path() {
    assert_eq!(
        err("{\"tools\": [1,"),
        "not JSON: EOF while parsing a value at line 1 column 13"
    );
    assert_eq!(
        err(r#"{"tools": [{"name": "a"}, {"description": "x"}]}"#),
        "tools[1]: the tool has no `name`"
    );
    assert_eq!(
        err(r#"[{"name": 7}]"#),
        "[0].name: expected a string, found a number"
    );
    assert_eq!(
        err(r#"{"tools": [{"name": "a"}, {"name": "b"}, {"name": "a"}]}"#),
        "tools[2].name: duplicate tool name `a` (first at tools[0].name)"
    );
    assert_eq!(
        err(r#"{"tools": [{"name": "a"}, {"name": "b"}, {"name": "c"},
            {"name": "d", "annotations": {"readOnlyHint": "yes"}}]}"#),
        "tools[3].annotations.readOnlyHint: expected true or false, found a string (leave the hint out to use the spec default)"
    );
    assert_eq!(
        err(r#"{"result": {"tools": [{"name": "d", "annotations": {"destructiveHint": null}}]}}"#),
        "result.tools[0].annotations.destructiveHint: expected true or false, found null (leave the hint out to use the spec default)"
    );
    assert_eq!(
        err(r#"[{"name": "d", "annotations": [true]}]"#),
        "[0].annotations: expected an object, found an array"
    );
    assert_eq!(
        err(r#"{"tools": {}}"#),
        "tools: expected an array of tools, found an object"
    );
    assert_eq!(
        err("42"),
        "expected a tools/list result or an array of tools, found a number"
    );
    assert_eq!(err(r#"[{"name": ""}]"#), "[0].name: the tool name is empty");
    assert_eq!(
        err(r#"{"jsonrpc": "2.0", "error": {"code": -1}}"#),
        "error: the document is a JSON-RPC error response: {\"code\":-1}"
    );
}

#[test]
fn names_are_quoted_never_mangled() {
    assert_eq!(mcp::warden_name("get_me"), "get_me");
    assert_eq!(mcp::warden_name("get-env.v2"), "get-env.v2");
    assert_eq!(mcp::warden_name("2fa"), "\"2fa\"");
    assert_eq!(mcp::warden_name("move file"), "\"move file\"");
    assert_eq!(
        mcp::warden_name("say \"hi\" \\o/"),
        "\"say \\\"hi\\\" \\\\o/\""
    );
    assert_eq!(mcp::warden_name("ファイル"), "\"ファイル\"");
}

#[test]
fn server_names_are_checked() {
    let tools = mcp::catalog_from_value(&json!([{"name": "a"}])).unwrap();
    assert_eq!(
        mcp::to_warden(&tools, Some("git__hub"), "x").unwrap_err(),
        "server name `git__hub` contains `__`, which separates server and tool in mcp__<server>__<tool>"
    );
    assert_eq!(
        mcp::to_warden(&tools, Some(""), "x").unwrap_err(),
        "the server name is empty"
    );
}

const FIXTURE: &str = include_str!("fixtures/mcp_tools_list.json");

const EXPECTED: &str = r#"# Imported by `toolwarden import mcp` from mcp_tools_list.json: 6 tools.
# Effects come from MCP annotations with the spec's defaults (2025-11-25: a missing
# readOnlyHint is false, a missing destructiveHint is true). Annotations are untrusted
# hints from the server: review every effect before relying on it.
policy "mcp-fs" version 1

effects none, write, delete

mode agent { confirm write, delete }
default mode agent

unknown deny
confirm fields "confirmed"
trust annotations tighten
connectors prefix "mcp__"

tool mcp__fs__read_file        { effect none }
tool mcp__fs__write_file       { effect delete }
tool mcp__fs__create_directory { effect write }
tool "mcp__fs__move file"      { effect delete }  # defaulted: readOnlyHint, destructiveHint
tool mcp__fs__echo             { effect delete }  # no annotations: spec defaults
tool "mcp__fs__say \"hi\""     { effect write }   # defaulted: readOnlyHint
"#;

#[test]
fn generated_policy_is_exact_formatted_and_loads_clean() {
    let tools = mcp::parse_catalog(FIXTURE).unwrap();
    let text = mcp::to_warden(&tools, Some("fs"), "mcp_tools_list.json").unwrap();
    assert_eq!(text, EXPECTED);
    assert_eq!(
        toolwarden::fmt::format_source(&text, "x.warden").unwrap(),
        text
    );
    let policy = Policy::parse(&text, "import.warden").unwrap();
    assert!(policy.warnings().is_empty(), "{:?}", policy.warnings());
    assert_eq!(
        policy.tools().collect::<Vec<_>>(),
        [
            "mcp__fs__read_file",
            "mcp__fs__write_file",
            "mcp__fs__create_directory",
            "mcp__fs__move file",
            "mcp__fs__echo",
            "mcp__fs__say \"hi\""
        ]
    );
    assert_eq!(policy.connector_server("mcp__fs__move file"), Some("fs"));
}

#[test]
fn without_server_names_are_kept_as_given() {
    let tools = mcp::parse_catalog(FIXTURE).unwrap();
    let text = mcp::to_warden(&tools, None, "f.json").unwrap();
    assert!(text.contains("policy \"mcp-import\" version 1\n"));
    assert!(!text.contains("connectors prefix"));
    let policy = Policy::parse(&text, "import.warden").unwrap();
    assert_eq!(policy.tools().nth(3), Some("move file"));
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
}

#[test]
fn cli_imports_and_reports_errors() {
    let out = bin()
        .args([
            "import",
            "mcp",
            "tests/fixtures/mcp_tools_list.json",
            "--server",
            "fs",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), EXPECTED);

    let dir = std::env::temp_dir().join(format!("tw-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"tools": [{"name": "a", "annotations": {"readOnlyHint": 1}}]}"#,
    )
    .unwrap();
    let out = bin().args(["import", "mcp"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: {}: tools[0].annotations.readOnlyHint: expected true or false, found a number (leave the hint out to use the spec default)\n",
            bad.display()
        )
    );
    std::fs::remove_dir_all(&dir).ok();
}

const FLAT: &str = include_str!("fixtures/mcp_flat_hints.json");

/// `(name, effect)` of each imported tool.
fn effects(tools: &[mcp::McpTool]) -> Vec<(&str, &str)> {
    tools
        .iter()
        .map(|t| (t.name.as_str(), t.effect().as_str()))
        .collect()
}

#[test]
fn hints_at_the_top_level_of_a_row_are_read() {
    let tools = mcp::parse_catalog(FLAT).unwrap();
    assert_eq!(
        effects(&tools),
        [
            ("list_notes", "none"),
            ("add_note", "write"),
            ("drop_notes", "delete"),
            ("sync_notes", "delete"),
            ("peek_note", "write"),
            ("tag_note", "write"),
        ]
    );
    // `null` at the top level is "not given": no hint, spec defaults.
    assert!(!tools[3].has_annotations);
    assert!(tools[0].has_annotations);
    // A hint of the wrong type at the top level is refused with its path.
    assert_eq!(
        err(r#"[{"name": "a", "readOnlyHint": "yes"}]"#),
        "[0].readOnlyHint: expected true, false or null, found a string (leave the hint out to use the spec default)"
    );
}

#[test]
fn hints_that_disagree_between_the_two_shapes_keep_the_stricter_and_warn() {
    let tools = mcp::parse_catalog(FLAT).unwrap();
    let warned: Vec<(&str, &[String])> = tools
        .iter()
        .filter(|t| !t.warnings.is_empty())
        .map(|t| (t.name.as_str(), t.warnings.as_slice()))
        .collect();
    assert_eq!(
        warned,
        [(
            "peek_note",
            &["[4]: `readOnlyHint` is true at the top level but false in `annotations`: kept false, the stricter".to_string()][..]
        )]
    );
    // The stricter destructiveHint wins too.
    let t = mcp::catalog_from_value(&json!([{"name": "a", "readOnlyHint": false,
        "destructiveHint": false, "annotations": {"destructiveHint": true}}]))
    .unwrap();
    assert_eq!(t[0].effect(), McpEffect::Delete);
    assert_eq!(
        t[0].warnings,
        ["[0]: `destructiveHint` is false at the top level but true in `annotations`: kept true, the stricter"]
    );
    // The command says so on stderr and in a comment on the tool's line.
    let out = bin()
        .args(["import", "mcp", "tests/fixtures/mcp_flat_hints.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "warning: tests/fixtures/mcp_flat_hints.json: [4]: `readOnlyHint` is true at the top level but false in `annotations`: kept false, the stricter\n"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("tool peek_note  { effect write }   # hints disagree: kept the stricter\n"),
        "{text}"
    );
}

const TOOLS_ONLY: &str = r#"# Imported by `toolwarden import mcp` from mcp_flat_hints.json: 6 tools.
# Effects come from MCP annotations with the spec's defaults (2025-11-25: a missing
# readOnlyHint is false, a missing destructiveHint is true). Annotations are untrusted
# hints from the server: review every effect before relying on it.
# Tool declarations only: include this file from a policy that declares
# `effects none, write, delete`.

tool mcp__notes__list_notes { effect none }
tool mcp__notes__add_note   { effect write }
tool mcp__notes__drop_notes { effect delete }
tool mcp__notes__sync_notes { effect delete }  # no annotations: spec defaults
tool mcp__notes__peek_note  { effect write }   # hints disagree: kept the stricter
tool mcp__notes__tag_note   { effect write }   # defaulted: readOnlyHint
"#;

#[test]
fn tools_only_output_includes_into_a_policy_that_declares_the_effects() {
    let out = bin()
        .args([
            "import",
            "mcp",
            "tests/fixtures/mcp_flat_hints.json",
            "--server",
            "notes",
            "--tools-only",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(text, TOOLS_ONLY);
    let dir = std::env::temp_dir().join(format!("tw-tools-only-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.tools.warden"), &text).unwrap();
    let main = dir.join("main.warden");
    std::fs::write(
        &main,
        "policy \"notes-agent\" version 1\neffects none, write, delete\n\
         mode agent { confirm write, delete }\ndefault mode agent\nunknown deny\n\
         connectors prefix \"mcp__\"\ninclude \"notes.tools.warden\"\n",
    )
    .unwrap();
    let check = bin().arg("check").arg(&main).output().unwrap();
    assert_eq!(
        (
            check.status.code(),
            String::from_utf8_lossy(&check.stdout).into_owned()
        ),
        (Some(0), format!("{}: ok\n", main.display()))
    );
    let policy = Policy::from_file(&main).unwrap();
    assert_eq!(policy.tools().count(), 6);
    assert_eq!(
        policy.connector_server("mcp__notes__add_note"),
        Some("notes")
    );
    std::fs::remove_dir_all(&dir).ok();
}
