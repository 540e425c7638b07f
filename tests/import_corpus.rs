//! The real MCP catalogs in `../shared/corpora/mcp/` (beside the clone) import and load. The
//! corpus is other people's data outside the repository, so these tests are ignored in plain
//! `cargo test` and `.ci/run` runs them with `--include-ignored`; the comparison with the labels
//! is `cargo run --example mcp_corpus` (a `.ci/run` step).

use std::path::Path;

use serde_json::{Map, Value};
use toolwarden::import::mcp;
use toolwarden::Policy;

/// The corpus rows flatten annotations into the row (`null` = not declared); rebuild MCP tools.
fn to_mcp(row: &Map<String, Value>) -> Value {
    let mut annotations = Map::new();
    for key in ["readOnlyHint", "destructiveHint"] {
        if let Some(Value::Bool(b)) = row.get(key) {
            annotations.insert(key.to_string(), Value::Bool(*b));
        }
    }
    let declared = row
        .get("annotations_declared")
        .and_then(Value::as_bool)
        .unwrap_or(!annotations.is_empty());
    let mut tool = Map::new();
    tool.insert("name".into(), row["name"].clone());
    if declared {
        tool.insert("annotations".into(), Value::Object(annotations));
    }
    Value::Object(tool)
}

/// The corpus file's rows; panics when it is absent or not an array of objects.
fn rows(file: &str) -> Vec<Map<String, Value>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpora/mcp")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the corpus `{}` is needed: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("the corpus is JSON");
    v.as_array()
        .expect("the corpus is an array")
        .iter()
        .filter_map(|r| r.as_object().cloned())
        .collect()
}

#[test]
#[ignore = "needs ../shared/corpora/mcp beside the clone; .ci/run runs it"]
fn github_catalog_imports_154_tools_into_a_clean_policy() {
    let rows = rows("github-mcp-server.tools.json");
    let tools: Vec<Value> = rows.iter().map(to_mcp).collect();
    let parsed = mcp::catalog_from_value(&Value::Array(tools)).unwrap();
    assert_eq!(parsed.len(), 154);
    let text = mcp::to_warden(&parsed, Some("github"), "github").unwrap();
    let policy = Policy::parse(&text, "github.warden").unwrap();
    assert!(policy.warnings().is_empty());
    assert_eq!(policy.tools().count(), 154);
    let count = |e: &str| parsed.iter().filter(|t| t.effect().as_str() == e).count();
    assert_eq!(
        (count("none"), count("write"), count("delete")),
        (81, 24, 49)
    );
}

#[test]
#[ignore = "needs ../shared/corpora/mcp beside the clone; .ci/run runs it"]
fn reference_catalog_imports_132_tools_per_server() {
    let rows = rows("reference-servers.tools.json");
    assert_eq!(rows.len(), 132);
    let mut servers: Vec<&str> = rows.iter().filter_map(|r| r["server"].as_str()).collect();
    servers.sort_unstable();
    servers.dedup();
    let mut total = 0;
    for server in servers {
        let tools: Vec<Value> = rows
            .iter()
            .filter(|r| r["server"].as_str() == Some(server))
            .map(to_mcp)
            .collect();
        let parsed = mcp::catalog_from_value(&Value::Array(tools)).unwrap();
        let text = mcp::to_warden(&parsed, Some(server), server).unwrap();
        let policy = Policy::parse(&text, "ref.warden").unwrap();
        assert!(policy.warnings().is_empty(), "{server}");
        total += policy.tools().count();
    }
    assert_eq!(total, 132);
}
