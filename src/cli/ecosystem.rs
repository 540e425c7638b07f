//! Ecosystem commands: `import mcp`, `fmt`, `graph`, and `offer --schemas`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use toolwarden::analysis::graph::{self, GraphFormat};
use toolwarden::import::mcp;

use super::commands::{load_policy, request_of};
use super::RequestArgs;

type CmdResult = Result<i32, String>;

fn read_text(path: &Path, what: &str) -> Result<String, String> {
    toolwarden::limits::read_text(path, toolwarden::limits::MAX_POLICY_BYTES).map_err(|e| {
        format!(
            "cannot read {what} `{}`: {}",
            path.display(),
            e.to_string().to_lowercase()
        )
    })
}

/// `toolwarden import mcp FILE [--server NAME] [--tools-only]`: prints a policy declaring the
/// catalog's tools (with `--tools-only`, the tool declarations alone); each warning of the
/// import goes to stderr as `warning: FILE: ...`.
pub(crate) fn import_mcp(file: &Path, server: Option<&str>, tools_only: bool) -> CmdResult {
    let text = read_text(file, "MCP catalog")?;
    let tools = mcp::parse_catalog(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let file_name = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let out = if tools_only {
        mcp::to_warden_tools(&tools, server, &file_name)?
    } else {
        mcp::to_warden(&tools, server, &file_name)?
    };
    for w in tools.iter().flat_map(|t| &t.warnings) {
        eprintln!("warning: {}: {w}", file.display());
    }
    print!("{out}");
    Ok(0)
}

/// `toolwarden fmt [--check] FILE...`: rewrites files in place, or with `--check` prints a
/// unified diff for each file that is not formatted and exits 1.
pub(crate) fn fmt(files: &[PathBuf], check: bool) -> CmdResult {
    let mut unformatted = 0;
    for path in files {
        let text = read_text(path, "policy")?;
        let name = path.display().to_string();
        let formatted = toolwarden::fmt::format_source(&text, &name).map_err(|e| {
            format!(
                "`{name}` does not parse, nothing formatted:\n{}",
                e.render().trim_end()
            )
        })?;
        if formatted == text {
            continue;
        }
        if check {
            unformatted += 1;
            let diff = similar::TextDiff::from_lines(&text, &formatted);
            print!(
                "{}",
                diff.unified_diff()
                    .context_radius(2)
                    .header(&name, &format!("{name} (formatted)"))
            );
        } else {
            std::fs::write(path, &formatted)
                .map_err(|e| format!("cannot write `{name}`: {}", e.to_string().to_lowercase()))?;
            println!("formatted {name}");
        }
    }
    if check && unformatted > 0 {
        eprintln!(
            "{unformatted} file{} not formatted; run `toolwarden fmt` on {}",
            if unformatted == 1 { " is" } else { "s are" },
            if unformatted == 1 { "it" } else { "them" }
        );
        return Ok(1);
    }
    Ok(0)
}

/// `toolwarden graph -p FILE [--format dot|mermaid]`.
pub(crate) fn graph(policy: &Path, format: &str) -> CmdResult {
    let format = match format {
        "dot" => GraphFormat::Dot,
        "mermaid" => GraphFormat::Mermaid,
        other => {
            return Err(format!(
                "unknown graph format `{other}`; use dot or mermaid"
            ))
        }
    };
    let policy = load_policy(policy)?;
    print!("{}", graph::render(&policy, format));
    Ok(0)
}

/// `toolwarden offer --schemas FILE`: prints the visible schemas as a JSON array (with
/// `--json`, each schema's decision instead).
pub(crate) fn offer_schemas(req: &RequestArgs, file: &Path, json: bool) -> CmdResult {
    let policy = load_policy(&req.policy)?;
    let (request, intent) = request_of(&policy, req)?;
    let text = read_text(file, "schemas file")?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("schemas file `{}` is not JSON: {e}", file.display()))?;
    let schemas: &[Value] = match &value {
        Value::Array(a) => a,
        Value::Object(o) => match o.get("tools") {
            Some(Value::Array(a)) => a,
            _ => {
                return Err(format!(
                    "schemas file `{}` must hold a JSON array of tool schemas (or {{\"tools\": [...]}})",
                    file.display()
                ))
            }
        },
        _ => {
            return Err(format!(
                "schemas file `{}` must hold a JSON array of tool schemas",
                file.display()
            ))
        }
    };
    if json {
        let decisions = policy
            .schema_decisions(&request, &intent, schemas)
            .map_err(|e| e.to_string())?;
        let out: Vec<Value> = decisions
            .iter()
            .map(|d| {
                serde_json::json!({
                    "index": d.index,
                    "name": d.name,
                    "decision": d.decision.decision.as_str(),
                    "stage": d.decision.stage.map(|s| s.as_str()),
                    "annotation_effect": d.annotation_effect,
                    "tightened": d.tightened,
                    "reason": if d.tightened {
                        format!(
                            "its MCP annotations imply effect `{}`, judged `{}` at stage `{}` (annotations may only tighten the policy's decision)",
                            d.annotation_effect.unwrap_or("?"),
                            d.decision.decision,
                            d.decision.stage.map_or("-", |s| s.as_str())
                        )
                    } else {
                        policy.reason(&d.name, &d.decision, &request)
                    },
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&Value::Array(out)).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    let shown = policy
        .offer_schemas(&request, &intent, schemas)
        .map_err(|e| e.to_string())?;
    println!(
        "{}",
        serde_json::to_string_pretty(&Value::Array(shown)).map_err(|e| e.to_string())?
    );
    Ok(0)
}
