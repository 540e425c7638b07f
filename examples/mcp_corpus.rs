//! Imports the MCP catalogs of `../shared/corpora/mcp/` and compares the imported effects with
//! the corpus labels.
//!
//! ```text
//! cargo run --example mcp_corpus -- [DIR]     # DIR defaults to ../shared/corpora/mcp
//! ```
//!
//! The corpus files flatten each tool's annotations into the tool row (`readOnlyHint`,
//! `destructiveHint`, `null` = not declared); this program rebuilds the MCP shape
//! (`{"name", "annotations": {...}}`, undeclared hints left out, no `annotations` object when
//! the server declared none), imports it per server with `--server` naming, checks that every
//! generated policy loads without diagnostics, and prints how the imported effects compare with
//! `my_side_effect` (reference servers) and with GitHub's own `readOnlyHint`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Map, Value};
use toolwarden::import::mcp::{self, McpEffect};
use toolwarden::Policy;

fn to_mcp(row: &Map<String, Value>) -> Value {
    let mut annotations = Map::new();
    for key in [
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
    ] {
        if let Some(Value::Bool(b)) = row.get(key) {
            annotations.insert(key.to_string(), Value::Bool(*b));
        }
    }
    let declared = row
        .get("annotations_declared")
        .and_then(Value::as_bool)
        .unwrap_or(!annotations.is_empty());
    let mut tool = Map::new();
    tool.insert(
        "name".into(),
        row.get("name").cloned().unwrap_or(Value::Null),
    );
    if declared {
        tool.insert("annotations".into(), Value::Object(annotations));
    }
    Value::Object(tool)
}

fn severity(effect: &str) -> u8 {
    match effect {
        "none" => 0,
        "write" => 1,
        "delete" => 2,
        _ => 3,
    }
}

fn load(path: &PathBuf) -> Result<Vec<Map<String, Value>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let rows = v.as_array().ok_or("expected a JSON array")?;
    Ok(rows.iter().filter_map(|r| r.as_object().cloned()).collect())
}

/// Imports one server's tools; returns the effects by tool name and whether the policy loads
/// without any diagnostic.
fn import(server: &str, tools: &[Value]) -> Result<(BTreeMap<String, McpEffect>, bool), String> {
    let catalog = json!({ "tools": tools });
    let parsed = mcp::catalog_from_value(&catalog).map_err(|e| format!("{server}: {e}"))?;
    let text = mcp::to_warden(&parsed, Some(server), server)?;
    let clean = match Policy::parse(&text, "import.warden") {
        Ok(p) => p.warnings().is_empty() && p.tools().count() == parsed.len(),
        Err(e) => {
            eprintln!("{server}: generated policy does not load:\n{}", e.render());
            false
        }
    };
    Ok((
        parsed
            .iter()
            .map(|t| (t.name.clone(), t.effect()))
            .collect(),
        clean,
    ))
}

fn main() -> Result<(), String> {
    let dir = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("../shared/corpora/mcp"), PathBuf::from);

    // Reference servers: labelled.
    let reference = load(&dir.join("reference-servers.tools.json"))?;
    let mut by_server: BTreeMap<String, Vec<&Map<String, Value>>> = BTreeMap::new();
    for row in &reference {
        let server = row
            .get("server")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        by_server.entry(server.to_string()).or_default().push(row);
    }
    let mut confusion: BTreeMap<(String, &'static str), usize> = BTreeMap::new();
    let (mut total, mut exact, mut at_least, mut clean_servers) = (0, 0, 0, 0);
    let (mut annotated, mut annotated_exact) = (0, 0);
    let mut looser = Vec::new();
    for (server, rows) in &by_server {
        let tools: Vec<Value> = rows.iter().map(|r| to_mcp(r)).collect();
        let (effects, clean) = import(server, &tools)?;
        clean_servers += usize::from(clean);
        for r in rows {
            let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
            let label = r
                .get("my_side_effect")
                .and_then(Value::as_str)
                .unwrap_or("?");
            let Some(effect) = effects.get(name) else {
                continue;
            };
            let got = effect.as_str();
            total += 1;
            let has_annotations =
                r.get("annotations_declared").and_then(Value::as_bool) == Some(true);
            annotated += usize::from(has_annotations);
            if got == label {
                exact += 1;
                annotated_exact += usize::from(has_annotations);
            }
            if severity(got) >= severity(label) || (got == "delete" && severity(label) == 3) {
                at_least += 1;
            } else {
                looser.push(format!("{server}/{name}: imported {got}, label {label}"));
            }
            *confusion.entry((label.to_string(), got)).or_default() += 1;
        }
    }
    println!(
        "reference-servers.tools.json: {} tools, {} servers",
        reference.len(),
        by_server.len()
    );
    println!(
        "  generated policies that load with no diagnostics: {clean_servers}/{}",
        by_server.len()
    );
    println!(
        "  imported effect == label: {exact}/{total} ({:.1}%)",
        100.0 * exact as f64 / total.max(1) as f64
    );
    println!(
        "  with annotations declared: {annotated_exact}/{annotated} equal; without: {}/{} equal",
        exact - annotated_exact,
        total - annotated
    );
    println!(
        "  imported effect at least as strict as the label (none < write < delete; delete covers export/execute): {at_least}/{total}"
    );
    println!("  label -> imported (count):");
    for ((label, got), n) in &confusion {
        println!("    {label:>8} -> {got:<6} {n}");
    }
    if !looser.is_empty() {
        println!("  imported effect looser than the label:");
        for l in &looser {
            println!("    {l}");
        }
    }

    // GitHub: no labels; compare with the server's own readOnlyHint and count defaults.
    let github = load(&dir.join("github-mcp-server.tools.json"))?;
    let tools: Vec<Value> = github.iter().map(to_mcp).collect();
    let (effects, clean) = import("github", &tools)?;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for e in effects.values() {
        *counts.entry(e.as_str()).or_default() += 1;
    }
    let no_annotations = tools
        .iter()
        .filter(|t| t.get("annotations").is_none())
        .count();
    let ro_true = github
        .iter()
        .filter(|r| r.get("readOnlyHint") == Some(&Value::Bool(true)))
        .count();
    let read_named = github
        .iter()
        .filter(|r| {
            let n = r.get("name").and_then(Value::as_str).unwrap_or_default();
            ["get_", "list_", "search_"]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .filter(|r| {
            let n = r.get("name").and_then(Value::as_str).unwrap_or_default();
            effects.get(n) != Some(&McpEffect::None)
        })
        .count();
    println!(
        "github-mcp-server.tools.json: {} tools (policy loads clean: {clean})",
        github.len()
    );
    println!(
        "  imported: none {}, write {}, delete {}; {} tools without any declared hint (spec defaults -> delete); readOnlyHint true: {ro_true}",
        counts.get("none").unwrap_or(&0),
        counts.get("write").unwrap_or(&0),
        counts.get("delete").unwrap_or(&0),
        no_annotations
    );
    println!("  get_/list_/search_ tools not imported as `none`: {read_named}");
    Ok(())
}
