//! Seed 004's `tool_policies.yaml` and legacy `tools.yaml`: `Policy::from_yaml`,
//! `include yaml` in warden text, `toolwarden import yaml`, and YAML diagnostics at
//! `file:line:col`.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use toolwarden::import::yaml_to_warden;
use toolwarden::{Decision, Policy, PolicyError, Request, Severity, Stage, Turn};

const DIR: &str = "tests/fixtures/yaml";

fn fixture(name: &str) -> String {
    format!("{DIR}/{name}")
}

fn from_yaml(policies: &str, legacy: Option<&str>) -> Policy {
    let legacy = legacy.map(fixture);
    Policy::from_yaml(fixture(policies), legacy.as_deref().map(Path::new))
        .unwrap_or_else(|e| panic!("loads:\n{}", e.render()))
}

/// `(decision, stage, source)` of one call.
fn judge(policy: &Policy, tool: &str, args: Value) -> (Decision, Option<Stage>, Option<String>) {
    let mut turn = Turn::new();
    let v = policy
        .check_call(
            &Request::default_mode(),
            &policy.fallback_intent(),
            &mut turn,
            tool,
            &args,
        )
        .expect("request fits");
    (v.decision, v.stage, v.source)
}

/// Every problem as `(code, file:line:col)`.
fn problems(e: &PolicyError) -> Vec<(String, String)> {
    e.diagnostics()
        .iter()
        .map(|d| {
            (
                d.code().to_string(),
                d.span()
                    .map_or(String::new(), |s| e.sources().location(s).to_string()),
            )
        })
        .collect()
}

#[test]
fn tool_policies_with_legacy_catalog() {
    let p = from_yaml("tool_policies.yaml", Some("tools.yaml"));
    assert_eq!(p.name(), "tool_policies");
    assert_eq!(p.version(), Some(1));
    assert_eq!(p.effects().collect::<Vec<_>>(), ["none", "write"]);
    assert_eq!(p.modes().collect::<Vec<_>>(), ["agent"]);
    assert_eq!(
        p.tools().collect::<Vec<_>>(),
        [
            "consultar_plano",
            "alterar_plano",
            "devolver_pedido",
            "consultar_pedido",
            "cancelar_pedido",
            "reembolsar",
            "apagar_cliente",
            "sincronizar"
        ]
    );
    let yaml = |l: &str| Some(format!("{DIR}/{l}"));
    // The explicit entry wins over the legacy `tool_type: read_only`/`confirmation_required: false`.
    assert_eq!(
        judge(&p, "alterar_plano", json!({"new_plan_id": "CONTROLE_100"})),
        (
            Decision::Confirm,
            Some(Stage::Confirmation),
            yaml("tool_policies.yaml:14:27")
        )
    );
    assert_eq!(
        judge(
            &p,
            "alterar_plano",
            json!({"new_plan_id": "CONTROLE_100", "confirmed": true})
        ),
        (Decision::Allow, None, yaml("tool_policies.yaml:12:3"))
    );
    assert_eq!(
        judge(&p, "alterar_plano", json!({"confirmed": true})),
        (
            Decision::Deny,
            Some(Stage::Requires),
            yaml("tool_policies.yaml:15:15")
        )
    );
    // A tool only in the catalog follows its legacy fields.
    assert_eq!(
        judge(&p, "consultar_pedido", json!({})),
        (
            Decision::Deny,
            Some(Stage::Requires),
            yaml("tools.yaml:13:15")
        )
    );
    assert_eq!(
        judge(&p, "cancelar_pedido", json!({"order_id": "1"})),
        (
            Decision::Confirm,
            Some(Stage::Confirmation),
            yaml("tools.yaml:18:28")
        )
    );
    assert_eq!(
        judge(&p, "reembolsar", json!({})),
        (
            Decision::Confirm,
            Some(Stage::Confirmation),
            yaml("tools.yaml:22:23")
        )
    );
    assert_eq!(
        judge(&p, "apagar_cliente", json!({"confirmed": true})),
        (
            Decision::Deny,
            Some(Stage::Identity),
            yaml("tools.yaml:25:23")
        )
    );
    assert_eq!(
        judge(&p, "sincronizar", json!({})),
        (
            Decision::Deny,
            Some(Stage::Identity),
            yaml("tools.yaml:28:14")
        )
    );
    // A tool in neither file never runs.
    assert_eq!(
        judge(&p, "rm_rf", json!({})).0,
        Decision::Deny,
        "unknown deny"
    );
    // Generated rules point into the generated header.
    let (_, stage, source) = {
        let mut turn = Turn {
            transactional_calls: 1,
        };
        let v = p
            .check_call(
                &Request::default_mode(),
                &p.fallback_intent(),
                &mut turn,
                "alterar_plano",
                &json!({"new_plan_id": "X", "confirmed": true}),
            )
            .expect("fits");
        (v.decision, v.stage, v.source)
    };
    assert_eq!(stage, Some(Stage::TurnLimit));
    assert_eq!(
        source.as_deref(),
        Some("tests/fixtures/yaml/tool_policies.yaml (generated):8:1")
    );
}

#[test]
fn without_legacy_only_the_entries_exist() {
    let p = from_yaml("tool_policies.yaml", None);
    assert_eq!(
        p.tools().collect::<Vec<_>>(),
        ["consultar_plano", "alterar_plano", "devolver_pedido"]
    );
    assert_eq!(
        judge(&p, "consultar_pedido", json!({"order_id": "1"})).1,
        Some(Stage::Identity)
    );
}

#[test]
fn no_tool_policies_file_means_legacy_behaviour() {
    let p = from_yaml("does_not_exist.yaml", Some("tools.yaml"));
    assert_eq!(p.name(), "tools");
    assert_eq!(p.version(), None);
    let w: Vec<&str> = p.warnings().iter().map(|d| d.code()).collect();
    assert_eq!(w, ["yaml-missing"]);
    assert_eq!(
        p.warnings()[0].message(),
        "`tests/fixtures/yaml/does_not_exist.yaml` does not exist: using the legacy fields of the tools catalog (seed 004)"
    );
    // The legacy `alterar_plano` is read-only without confirmation.
    assert_eq!(
        judge(&p, "alterar_plano", json!({})),
        (Decision::Allow, None, Some(format!("{DIR}/tools.yaml:6:3")))
    );
    // Neither file: an error, not an empty policy.
    let e = Policy::from_yaml(fixture("does_not_exist.yaml"), None).expect_err("no file");
    assert_eq!(e.diagnostics()[0].code(), "unreadable");
}

#[test]
fn every_yaml_problem_is_reported_at_its_place() {
    let e = Policy::from_yaml(fixture("bad_policies.yaml"), None).expect_err("bad");
    let at = |s: &str| format!("{DIR}/bad_policies.yaml:{s}");
    assert_eq!(
        problems(&e),
        [
            ("yaml-unknown-key".to_string(), at("4:3")),
            ("yaml-value".to_string(), at("7:21")),
            ("yaml-not-boolean".to_string(), at("8:27")),
            ("yaml-type".to_string(), at("9:15")),
            ("yaml-not-boolean".to_string(), at("12:27")),
            ("yaml-unknown-key".to_string(), at("13:5")),
        ]
    );
    let d = &e.diagnostics()[0];
    assert_eq!(
        d.message(),
        "unknown key `require_confirmaton` in `defaults`"
    );
    assert_eq!(
        d.help_text(),
        Some("did you mean `require_confirmation`? keys here are `operation_type`, `require_confirmation`")
    );
    let d = &e.diagnostics()[2];
    assert_eq!(
        d.message(),
        "`require_confirmation` must be a boolean, not the string \"true\""
    );
    assert_eq!(
        d.help_text(),
        Some("write `require_confirmation: true` without quotes")
    );
    assert_eq!(e.sources().slice(d.span().expect("span")), "\"true\"");
    insta::assert_snapshot!("bad_policies_rendered", e.render());
}

#[test]
fn legacy_catalog_problems_are_reported() {
    let e = yaml_to_warden(
        Path::new(&fixture("missing.yaml")),
        Some(Path::new(&fixture("bad_legacy.yaml"))),
    )
    .expect_err("bad legacy");
    let at = |s: &str| format!("{DIR}/bad_legacy.yaml:{s}");
    assert_eq!(
        problems(&e),
        [
            ("yaml-not-boolean".to_string(), at("4:28")),
            ("yaml-value".to_string(), at("5:23")),
            ("yaml-unknown-key".to_string(), at("6:5")),
            ("yaml-value".to_string(), at("7:3")),
            ("yaml-missing".to_string(), String::new()),
        ]
    );
    assert_eq!(
        e.diagnostics()[2].help_text(),
        Some("did you mean `endpoint`? keys here are `name`, `tool_type`, `requires`, `confirmation_required`, `execution_policy`, `description`, `endpoint`, `schema`, `enabled`, `cache`")
    );
    assert_eq!(e.diagnostics()[4].severity(), Severity::Warning);
}

#[test]
fn yaml_syntax_errors_and_duplicate_keys_carry_positions() {
    let e = Policy::from_yaml(fixture("syntax_error.yaml"), None).expect_err("syntax");
    assert_eq!(
        problems(&e),
        [(
            "yaml-syntax".to_string(),
            format!("{DIR}/syntax_error.yaml:5:4")
        )]
    );
    assert_eq!(
        e.diagnostics()[0].message(),
        "invalid YAML: did not find expected key"
    );
    let e = Policy::from_yaml(fixture("duplicate_key.yaml"), None).expect_err("duplicate");
    assert_eq!(
        problems(&e),
        [(
            "yaml-syntax".to_string(),
            format!("{DIR}/duplicate_key.yaml:5:5")
        )]
    );
    assert_eq!(
        e.diagnostics()[0].message(),
        "invalid YAML: tool_policies.alterar_plano: duplicate entry with key \"require_confirmation\""
    );
}

#[test]
fn flow_style_keys_are_reported_at_their_block_parent() {
    let e = Policy::from_yaml(fixture("flow_style.yaml"), None).expect_err("flow");
    assert_eq!(
        problems(&e),
        [(
            "yaml-not-boolean".to_string(),
            format!("{DIR}/flow_style.yaml:3:3")
        )]
    );
}

#[test]
fn include_yaml_in_warden_text() {
    let p = Policy::from_file(fixture("with_include.warden"))
        .unwrap_or_else(|e| panic!("loads:\n{}", e.render()));
    assert_eq!(p.name(), "retail-yaml");
    assert_eq!(p.version(), Some(7));
    assert_eq!(p.tools().count(), 8);
    assert_eq!(
        judge(
            &p,
            "devolver_pedido",
            json!({"order_id": "123", "reason": "r"})
        ),
        (
            Decision::Confirm,
            Some(Stage::Confirmation),
            Some(format!("{DIR}/tool_policies.yaml:19:27"))
        )
    );
    // Errors in an included YAML file point into the YAML.
    let e = Policy::from_file(fixture("include_bad.warden")).expect_err("bad yaml");
    assert_eq!(problems(&e).len(), 6);
    assert_eq!(
        problems(&e)[0],
        (
            "yaml-unknown-key".to_string(),
            format!("{DIR}/bad_policies.yaml:4:3")
        )
    );
    // A missing YAML file without a legacy catalog is an error at the include.
    let e = Policy::parse(
        "policy \"p\"\neffects none, write\nmode agent { }\ninclude yaml \"nowhere.yaml\"\n",
        &fixture("inline.warden"),
    )
    .expect_err("missing");
    assert_eq!(
        problems(&e),
        [(
            "unreadable".to_string(),
            format!("{DIR}/inline.warden:4:14")
        )]
    );
    // YAML tools need the effects they map to.
    let e = Policy::parse(
        "policy \"p\"\neffects none\nmode agent { }\ninclude yaml \"tool_policies.yaml\"\n",
        &fixture("inline.warden"),
    )
    .expect_err("no write effect");
    assert_eq!(
        problems(&e),
        [
            (
                "undefined-effect".to_string(),
                format!("{DIR}/tool_policies.yaml:13:21")
            ),
            (
                "undefined-effect".to_string(),
                format!("{DIR}/tool_policies.yaml:18:21")
            )
        ]
    );
}

#[test]
fn import_prints_equivalent_warden_text() {
    let text = yaml_to_warden(
        Path::new(&fixture("tool_policies.yaml")),
        Some(Path::new(&fixture("tools.yaml"))),
    )
    .expect("imports");
    let expected = std::fs::read_to_string(fixture("expected_import.warden")).expect("fixture");
    assert_eq!(text, expected);
    // Laid out as `toolwarden fmt` would.
    assert_eq!(
        toolwarden::fmt::format_source(&text, "imported.warden").expect("parses"),
        text
    );
    let imported = Policy::parse(&text, "imported.warden")
        .unwrap_or_else(|e| panic!("the import checks clean:\n{}", e.render()));
    assert!(imported.warnings().is_empty());
    let direct = from_yaml("tool_policies.yaml", Some("tools.yaml"));
    assert_eq!(
        imported.tools().collect::<Vec<_>>(),
        direct.tools().collect::<Vec<_>>()
    );
    let all = json!({"new_plan_id": "X", "order_id": "1", "reason": "r"});
    let mut confirmed = all.clone();
    confirmed["confirmed"] = json!(true);
    for tool in direct.tools() {
        for args in [json!({}), all.clone(), confirmed.clone()] {
            let a = judge(&imported, tool, args.clone());
            let b = judge(&direct, tool, args.clone());
            assert_eq!((a.0, a.1), (b.0, b.1), "{tool} {args}");
        }
    }

    // The command prints the same text and exits 0; bad YAML exits 2 with the diagnostics.
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["import", "yaml", &fixture("tool_policies.yaml")])
        .args(["--legacy", &fixture("tools.yaml")])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["import", "yaml", &fixture("bad_policies.yaml")])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: `tests/fixtures/yaml/bad_policies.yaml` does not import:\n"),
        "{err}"
    );
    assert!(
        err.contains("[tests/fixtures/yaml/bad_policies.yaml:8:27]"),
        "{err}"
    );
}

#[test]
fn guard_reads_a_yaml_policy_directly() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["guard", "-p", &fixture("tool_policies.yaml")])
        .args([
            "--tool",
            "alterar_plano",
            "--args",
            r#"{"new_plan_id": "CONTROLE_100", "confirmed": "true"}"#,
            "--json",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["confirmation_required"], json!(true));
    assert_eq!(
        v["metadata"]["policy_source"],
        json!("tests/fixtures/yaml/tool_policies.yaml:14:27")
    );
    assert_eq!(
        v["pending_call"]["args"],
        json!({"new_plan_id": "CONTROLE_100"}),
        "the string \"true\" does not confirm and is stripped"
    );
    // With the legacy catalog, catalog-only tools exist too.
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["guard", "-p", &fixture("tool_policies.yaml")])
        .args(["--legacy", &fixture("tools.yaml")])
        .args([
            "--tool",
            "consultar_pedido",
            "--args",
            r#"{"order_id": "1"}"#,
            "--json",
        ])
        .output()
        .expect("runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["ok"], json!(true));
    assert_eq!(v["metadata"]["operation_type"], json!("read_only"));
    assert_eq!(
        v["metadata"]["policy_source"],
        json!("tests/fixtures/yaml/tools.yaml:10:3")
    );
}

/// `(code, file:line:col, message, help)` of each warning of a loaded policy.
fn warnings_at(p: &Policy) -> Vec<(String, String, String, String)> {
    p.warnings()
        .iter()
        .map(|d| {
            (
                d.code().to_string(),
                d.span()
                    .map_or(String::new(), |s| p.sources().location(s).to_string()),
                d.message().to_string(),
                d.help_text().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The operation type the guard reports for one call, and whether a second call in the same
/// turn still runs (a transactional call counts against `limit transactional 1 per turn`).
fn operation_and_second_call(
    p: &Policy,
    tool: &str,
    args: Value,
) -> (Option<&'static str>, Decision) {
    let mut turn = Turn::new();
    let intent = p.fallback_intent();
    let request = Request::default_mode();
    let first = p
        .check_call(&request, &intent, &mut turn, tool, &args)
        .expect("fits");
    let second = p
        .check_call(&request, &intent, &mut turn, tool, &args)
        .expect("fits");
    (first.operation_type, second.decision)
}

#[test]
fn an_entry_without_operation_type_fails_closed_as_transactional() {
    let p = from_yaml("no_operation_type.yaml", None);
    assert_eq!(
        warnings_at(&p),
        [(
            "yaml-no-operation-type".to_string(),
            format!("{DIR}/no_operation_type.yaml:6:3"),
            "`ship_parcel` has no `operation_type` and `defaults` sets none: treated as `transactional`".to_string(),
            "write `operation_type: read_only` in the entry if the tool changes nothing, or `operation_type: transactional` to keep this; `defaults: operation_type:` sets it for every entry".to_string(),
        )]
    );
    let confirmed = json!({"parcel_id": "p-1", "confirmed": true});
    assert_eq!(
        operation_and_second_call(&p, "ship_parcel", confirmed),
        (Some("transactional"), Decision::Deny)
    );
    // The entry that names its type keeps it.
    assert_eq!(
        operation_and_second_call(&p, "lookup_stock", json!({})),
        (Some("read_only"), Decision::Allow)
    );
    // `import yaml` writes the same effect and says why in a note.
    let text =
        yaml_to_warden(Path::new(&fixture("no_operation_type.yaml")), None).expect("imports");
    assert!(text.contains("# note: `ship_parcel` has no `operation_type` and `defaults` sets none: treated as `transactional`\n"), "{text}");
    assert!(
        text.contains("tool ship_parcel  { effect write  requires parcel_id  confirm always }"),
        "{text}"
    );
}

#[test]
fn a_legacy_entry_without_tool_type_fails_closed_as_transactional() {
    let p = from_yaml("does_not_exist.yaml", Some("no_tool_type.yaml"));
    let w = warnings_at(&p);
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(w[0].0, "yaml-missing");
    assert_eq!(
        w[1],
        (
            "yaml-no-operation-type".to_string(),
            format!("{DIR}/no_tool_type.yaml:5:11"),
            "`purge_archive` has no `tool_type` and no `defaults.operation_type` applies: treated as `transactional`".to_string(),
            "write `tool_type: read_only` in the catalog entry if the tool changes nothing, or `tool_type: transactional` to keep this".to_string(),
        )
    );
    assert_eq!(
        operation_and_second_call(&p, "purge_archive", json!({})),
        (Some("transactional"), Decision::Deny)
    );
    assert_eq!(
        operation_and_second_call(&p, "lookup_stock", json!({})),
        (Some("read_only"), Decision::Allow)
    );
    // A `defaults.operation_type` of tool_policies.yaml still applies to catalog-only tools.
    let p = from_yaml("tool_policies.yaml", Some("no_tool_type.yaml"));
    assert_eq!(warnings_at(&p), []);
    assert_eq!(
        operation_and_second_call(&p, "purge_archive", json!({})),
        (Some("read_only"), Decision::Allow)
    );
}
