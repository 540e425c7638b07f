//! `Policy::offer_schemas` and `offer --schemas`: OpenAI, Anthropic and MCP schemas in, the
//! visible ones out unchanged; MCP annotations only tighten (`trust annotations`).

use std::process::Command;

use serde_json::{json, Value};
use toolwarden::{Decision, Intent, Policy, Request, SchemaError, Stage};

const POLICY: &str = r#"
policy "schemas" version 1
effects none, write, delete
intents write > read
fallback read
keywords write { en "create" }
matrix m {
        none   write  delete
  read  allow  deny   deny
  write allow  allow  deny
}
mode safe   { matrix m  restrict none }
mode normal { matrix m  confirm delete }
mode open   { }
default mode normal
unknown deny
tool list_files  { effect none }
tool create_file { effect write }
tool rm_file     { effect delete }
"#;

fn policy(extra: &str) -> Policy {
    Policy::parse(&format!("{POLICY}{extra}"), "schemas.warden").unwrap()
}

fn openai(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name, "description": "d", "parameters": {"type": "object"}}})
}

fn anthropic(name: &str) -> Value {
    json!({"name": name, "description": "d", "input_schema": {"type": "object"}})
}

fn mcp_tool(name: &str, annotations: Option<Value>) -> Value {
    let mut v = json!({"name": name, "inputSchema": {"type": "object"}});
    if let Some(a) = annotations {
        v["annotations"] = a;
    }
    v
}

#[test]
fn mixed_shapes_come_back_unchanged_in_order() {
    let p = policy("");
    let schemas = vec![
        anthropic("create_file"),
        openai("unknown_tool"),
        mcp_tool("list_files", None),
        openai("list_files"),
        json!({"type": "function", "name": "create_file", "parameters": {}}),
    ];
    let intent = p.classify("create a file");
    let shown = p
        .offer_schemas(&Request::new("normal"), &intent, &schemas)
        .unwrap();
    assert_eq!(
        shown,
        vec![
            schemas[0].clone(),
            schemas[2].clone(),
            schemas[3].clone(),
            schemas[4].clone()
        ]
    );
    // A read query hides the write tool.
    let shown = p
        .offer_schemas(&Request::new("normal"), &p.fallback_intent(), &schemas)
        .unwrap();
    assert_eq!(shown, vec![schemas[2].clone(), schemas[3].clone()]);
}

#[test]
fn a_schema_without_a_name_is_an_error_naming_its_index() {
    let p = policy("");
    let schemas = vec![openai("list_files"), json!({"description": "nameless"})];
    let e = p
        .offer_schemas(&Request::new("normal"), &p.fallback_intent(), &schemas)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "schema [1]: the schema has no name; expected {\"type\":\"function\",\"function\":{\"name\":…}}, {\"name\":…,\"input_schema\":…} or {\"name\":…,\"inputSchema\":…}"
    );
    let e = p
        .offer_schemas(
            &Request::new("normal"),
            &p.fallback_intent(),
            &[json!({"type": "function", "function": {}})],
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "schema [0]: the OpenAI tool has no function.name"
    );
    let e = p
        .offer_schemas(
            &Request::new("normal"),
            &p.fallback_intent(),
            &[json!("list_files")],
        )
        .unwrap_err();
    assert!(matches!(e, SchemaError::Schema { index: 0, .. }));
}

#[test]
fn bad_hints_are_errors_with_their_path() {
    let p = policy("");
    let schemas = vec![
        mcp_tool("list_files", None),
        mcp_tool("create_file", Some(json!({"readOnlyHint": "true"}))),
    ];
    let e = p
        .offer_schemas(&Request::new("normal"), &p.fallback_intent(), &schemas)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "schema [1]: annotations.readOnlyHint: expected true or false, found a string (leave the hint out to use the spec default)"
    );
}

#[test]
fn request_errors_pass_through() {
    let p = policy("");
    let e = p
        .offer_schemas(
            &Request::new("nope"),
            &p.fallback_intent(),
            &[openai("list_files")],
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown mode `nope`; the policy declares `safe`, `normal`, `open`"
    );
}

#[test]
fn annotations_tighten_by_default() {
    let p = policy("");
    // list_files is `none` in the policy; its server says it deletes. Mode safe restricts to
    // none: judged as `delete`, it is hidden.
    let lying = mcp_tool("list_files", Some(json!({"readOnlyHint": false})));
    let d = p
        .schema_decisions(
            &Request::new("safe"),
            &p.fallback_intent(),
            std::slice::from_ref(&lying),
        )
        .unwrap();
    assert_eq!(d[0].decision.decision, Decision::Deny);
    assert_eq!(d[0].decision.stage, Some(Stage::Mode));
    assert_eq!(d[0].annotation_effect, Some("delete"));
    assert!(d[0].tightened);
    // In mode normal a read query offers none but not delete: hidden too.
    let shown = p
        .offer_schemas(
            &Request::new("normal"),
            &p.fallback_intent(),
            std::slice::from_ref(&lying),
        )
        .unwrap();
    assert!(shown.is_empty());
    // Mode open has no matrix and confirms nothing; delete is not restricted: still allowed.
    let d = p
        .schema_decisions(
            &Request::new("open"),
            &p.fallback_intent(),
            std::slice::from_ref(&lying),
        )
        .unwrap();
    assert_eq!(d[0].decision.decision, Decision::Allow);
    assert!(!d[0].tightened);
}

#[test]
fn annotations_can_turn_allow_into_confirm() {
    let p = policy("");
    // Under a write query in mode normal, `delete` is denied by the matrix; `write` is allowed.
    // create_file annotated destructive -> judged as delete -> denied.
    let intent = Intent::named("write");
    let t = mcp_tool("create_file", Some(json!({"destructiveHint": true})));
    let d = p
        .schema_decisions(&Request::new("normal"), &intent, std::slice::from_ref(&t))
        .unwrap();
    assert_eq!(d[0].decision.decision, Decision::Deny);
    assert_eq!(d[0].decision.stage, Some(Stage::Intent));
    // Mode open confirms nothing, so add a policy mode that confirms delete only.
    let p2 = Policy::parse(
        &format!("{POLICY}mode careful {{ confirm delete }}\n"),
        "x.warden",
    )
    .unwrap();
    let d = p2
        .schema_decisions(&Request::new("careful"), &intent, std::slice::from_ref(&t))
        .unwrap();
    assert_eq!(d[0].decision.decision, Decision::Confirm);
    assert!(d[0].tightened);
}

#[test]
fn annotations_never_loosen() {
    let p = policy("");
    // rm_file is `delete` in the policy; its server claims read-only. Mode safe still hides it.
    let claim = mcp_tool("rm_file", Some(json!({"readOnlyHint": true})));
    let d = p
        .schema_decisions(
            &Request::new("safe"),
            &p.fallback_intent(),
            std::slice::from_ref(&claim),
        )
        .unwrap();
    assert_eq!(d[0].decision.decision, Decision::Deny);
    assert_eq!(d[0].decision.stage, Some(Stage::Mode));
    assert_eq!(d[0].annotation_effect, Some("none"));
    assert!(!d[0].tightened);
    // In mode normal under a write query rm_file stays denied (delete under write is deny).
    let shown = p
        .offer_schemas(&Request::new("normal"), &Intent::named("write"), &[claim])
        .unwrap();
    assert!(shown.is_empty());
    // An unknown tool stays unknown whatever it claims.
    let shown = p
        .offer_schemas(
            &Request::new("open"),
            &p.fallback_intent(),
            &[mcp_tool("sneaky", Some(json!({"readOnlyHint": true})))],
        )
        .unwrap();
    assert!(shown.is_empty());
}

#[test]
fn trust_annotations_ignore_turns_tightening_off() {
    let p = policy("trust annotations ignore\n");
    let lying = mcp_tool("list_files", Some(json!({"readOnlyHint": false})));
    let d = p
        .schema_decisions(
            &Request::new("safe"),
            &p.fallback_intent(),
            std::slice::from_ref(&lying),
        )
        .unwrap();
    assert_eq!(d[0].decision.decision, Decision::Allow);
    assert!(!d[0].tightened);
    // Explicit `tighten` is the default.
    let p = policy("trust annotations tighten\n");
    let d = p
        .schema_decisions(&Request::new("safe"), &p.fallback_intent(), &[lying])
        .unwrap();
    assert_eq!(d[0].decision.decision, Decision::Deny);
}

#[test]
fn trust_declaration_is_checked() {
    let e = Policy::parse(
        &format!("{POLICY}trust annotations ignore\ntrust annotations tighten\n"),
        "dup.warden",
    )
    .unwrap_err();
    assert_eq!(e.diagnostics().len(), 1);
    assert_eq!(e.diagnostics()[0].code(), "duplicate");
    assert!(e.diagnostics()[0]
        .message()
        .contains("`trust annotations` is declared twice"));
    let e = Policy::parse(&format!("{POLICY}trust annotations maybe\n"), "bad.warden").unwrap_err();
    assert_eq!(e.diagnostics()[0].code(), "syntax");
}

#[test]
fn unannotated_and_undeclared_effects_do_not_tighten() {
    // A policy without `delete`: an annotation implying delete is ignored (nothing to judge by).
    let p = Policy::parse(
        "policy \"p\" version 1\neffects none, write\nmode m { restrict none }\ntool t { effect none }\n",
        "p.warden",
    )
    .unwrap();
    let shown = p
        .offer_schemas(
            &Request::new("m"),
            &p.fallback_intent(),
            &[mcp_tool("t", Some(json!({})))],
        )
        .unwrap();
    assert_eq!(shown.len(), 1);
    // An annotation implying write (declared) tightens.
    let shown = p
        .offer_schemas(
            &Request::new("m"),
            &p.fallback_intent(),
            &[mcp_tool("t", Some(json!({"destructiveHint": false})))],
        )
        .unwrap();
    assert!(shown.is_empty());
}

#[test]
fn cli_offer_schemas_prints_the_filtered_array() {
    let dir = std::env::temp_dir().join(format!("tw-schemas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pol = dir.join("p.warden");
    std::fs::write(&pol, POLICY).unwrap();
    let file = dir.join("tools.json");
    let schemas = json!([
        openai("list_files"),
        anthropic("rm_file"),
        mcp_tool("create_file", None)
    ]);
    std::fs::write(&file, schemas.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["offer", "-p"])
        .arg(&pol)
        .args(["--query", "create a file", "--schemas"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, json!([schemas[0], schemas[2]]));

    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["offer", "-p"])
        .arg(&pol)
        .args(["--mode", "safe", "--json", "--schemas"])
        .arg(&file)
        .output()
        .unwrap();
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed[0]["decision"], "allow");
    assert_eq!(printed[1]["decision"], "deny");
    assert_eq!(printed[1]["stage"], "mode");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cli_json_explains_a_tightened_decision() {
    let dir = std::env::temp_dir().join(format!("tw-schemas-t-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pol = dir.join("p.warden");
    std::fs::write(&pol, POLICY).unwrap();
    let file = dir.join("tools.json");
    let lying = json!({"tools": [mcp_tool("list_files", Some(json!({"readOnlyHint": false})))]});
    std::fs::write(&file, lying.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["offer", "-p"])
        .arg(&pol)
        .args(["--mode", "safe", "--json", "--schemas"])
        .arg(&file)
        .output()
        .unwrap();
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        printed,
        json!([{
            "index": 0,
            "name": "list_files",
            "decision": "deny",
            "stage": "mode",
            "annotation_effect": "delete",
            "tightened": true,
            "reason": "its MCP annotations imply effect `delete`, judged `deny` at stage `mode` (annotations may only tighten the policy's decision)"
        }])
    );
    std::fs::remove_dir_all(&dir).ok();
}
