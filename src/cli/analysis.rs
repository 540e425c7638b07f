//! The analysis commands: `test`, `table`, `diff`, `explain`. Thin over
//! `toolwarden::analysis`.

use std::path::{Path, PathBuf};

use serde_json::json;
use toolwarden::analysis::replay::parse_recording;
use toolwarden::analysis::testrun::{find_test_files, run_file, FileReport};
use toolwarden::analysis::{PolicyDiff, Table, TableFormat};

use super::commands::{load_policy, request_of};
use super::RequestArgs;

type CmdResult = Result<i32, String>;

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Most items of one kind `test --coverage` lists in text (the JSON report lists every one).
const COVERAGE_SHOWN: usize = 20;

/// `toolwarden test [PATH...]`: exit 1 when a case failed or a file is malformed; an error
/// (exit 2) when `filter` matches no case of any file.
pub(crate) fn test(
    paths: &[PathBuf],
    filter: Option<&str>,
    json: bool,
    coverage: bool,
) -> CmdResult {
    let paths = if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths.to_vec()
    };
    let files = find_test_files(&paths)?;
    if files.is_empty() {
        return Err(format!(
            "no `*.test.yaml` file under {}",
            paths
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let reports: Vec<FileReport> = files.iter().map(|f| run_file(f, filter)).collect();
    if let Some(f) = filter {
        let ran: usize = reports.iter().map(|r| r.cases.len()).sum();
        if ran == 0 && reports.iter().all(|r| r.error.is_none()) {
            return Err(format!(
                "no test case name contains `{f}` (in {} test file{})",
                files.len(),
                if files.len() == 1 { "" } else { "s" }
            ));
        }
    }
    let passed: usize = reports.iter().map(FileReport::passed).sum();
    let failed: usize = reports.iter().map(FileReport::failed).sum();
    if json {
        let mut v = json!({ "files": reports, "passed": passed, "failed": failed });
        if !coverage {
            if let Some(files) = v["files"].as_array_mut() {
                for f in files {
                    if let Some(o) = f.as_object_mut() {
                        o.remove("uncovered");
                    }
                }
            }
        }
        println!("{}", pretty(&v));
    } else {
        for r in &reports {
            if let Some(e) = &r.error {
                println!("ERROR {e}");
            }
            for c in r.cases.iter().filter(|c| !c.passed) {
                let trace = c
                    .trace
                    .as_ref()
                    .map(|t| format!(" | trace: {t}"))
                    .unwrap_or_default();
                println!(
                    "FAIL {} {}: {}{trace}",
                    c.location,
                    c.name,
                    c.failures.join("; ")
                );
            }
            if coverage {
                if let Some(u) = &r.uncovered {
                    println!(
                        "coverage of {} ({}):",
                        r.file,
                        r.policy.as_deref().unwrap_or("?")
                    );
                    let show = |what: &str, v: &[String]| {
                        if v.is_empty() {
                            println!("  {what}: all exercised");
                            return;
                        }
                        println!("  {what} not exercised ({}):", v.len());
                        for item in v.iter().take(COVERAGE_SHOWN) {
                            println!("    {item}");
                        }
                        if v.len() > COVERAGE_SHOWN {
                            println!(
                                "    … and {} more (`--json` lists them all)",
                                v.len() - COVERAGE_SHOWN
                            );
                        }
                    };
                    show("tools", &u.tools);
                    show("patterns", &u.patterns);
                    show("matrix cells", &u.cells);
                    show("keywords", &u.keywords);
                    show("modes", &u.modes);
                    show("argument rules", &u.rules);
                    if u.after_blocks > 0 {
                        show("after blocks", &u.afters);
                    }
                }
            }
        }
        println!("{passed} passed, {failed} failed");
    }
    Ok(i32::from(failed > 0))
}

/// `toolwarden table -p FILE [--mode M] [--format F] [--labels a,b]`.
pub(crate) fn table(
    policy: &Path,
    mode: Option<&str>,
    format: &str,
    labels: Option<&[String]>,
) -> CmdResult {
    let format = TableFormat::parse(format)
        .ok_or_else(|| format!("unknown format `{format}`; use text, json or csv"))?;
    let policy = load_policy(policy)?;
    let table = match labels {
        None => Table::build(&policy, mode).map_err(|e| e.to_string()),
        Some(labels) => {
            // `--labels ""` is the empty set.
            let labels: Vec<&str> = labels
                .iter()
                .map(String::as_str)
                .filter(|l| !l.is_empty())
                .collect();
            Table::build_for_labels(&policy, mode, &labels).map_err(|e| match e {
                toolwarden::RequestError::Session(e) => format!("`--labels`: {e}"),
                e => e.to_string(),
            })
        }
    }?;
    print!("{}", table.render(format));
    Ok(0)
}

/// Reads queries: one a line, or JSON Lines with a `"text"` field.
fn read_queries(path: &Path) -> Result<Vec<String>, String> {
    let text = toolwarden::limits::read_text(path, toolwarden::limits::MAX_DATA_BYTES)
        .map_err(|e| format!("cannot read queries file `{}`: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('{') {
            let v: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| format!("{}:{}: not a JSON object: {e}", path.display(), i + 1))?;
            let t = v["text"].as_str().ok_or_else(|| {
                format!(
                    "{}:{}: the JSON line has no string \"text\"",
                    path.display(),
                    i + 1
                )
            })?;
            out.push(t.to_string());
        } else {
            out.push(line.to_string());
        }
    }
    Ok(out)
}

/// What `diff` reads besides the two policies.
pub(crate) struct DiffInputs<'a> {
    /// `--queries FILE`.
    pub queries: Option<&'a Path>,
    /// `--calls FILE.jsonl`.
    pub calls: Option<&'a Path>,
}

/// `toolwarden diff OLD NEW [--queries FILE] [--calls FILE] [--fail-on-change] [--json]`:
/// exit 1 with `--fail-on-change` when anything moved, 2 on an error (a policy that does not
/// load, an unreadable file, a malformed recorded call, named by its line).
pub(crate) fn diff(
    old: &Path,
    new: &Path,
    inputs: &DiffInputs<'_>,
    fail_on_change: bool,
    json: bool,
) -> CmdResult {
    let (a, b) = (load_policy(old)?, load_policy(new)?);
    // Every input is read before anything is computed: a malformed line changes nothing.
    let queries = inputs.queries.map(read_queries).transpose()?;
    let calls = match inputs.calls {
        None => None,
        Some(path) => {
            let text = toolwarden::limits::read_text(path, toolwarden::limits::MAX_DATA_BYTES)
                .map_err(|e| format!("cannot read calls file `{}`: {e}", path.display()))?;
            Some(
                parse_recording(&text)
                    .map_err(|e| format!("calls file `{}`, {e}", path.display()))?,
            )
        }
    };
    let mut d = PolicyDiff::compute(&a, &b);
    if let Some(qs) = &queries {
        d = d.with_queries(&a, &b, qs.iter().map(String::as_str));
    }
    if let Some(calls) = &calls {
        d = d.with_calls(&a, &b, calls);
    }
    if json {
        let mut v = serde_json::to_value(&d).map_err(|e| e.to_string())?;
        let (decisions, reasons) = d.moved_counts();
        v["changed"] = json!(!d.is_empty());
        v["decisions_moved"] = json!(decisions);
        v["reasons_moved"] = json!(reasons);
        println!("{}", pretty(&v));
    } else {
        print!("{}", d.render());
    }
    Ok(i32::from(fail_on_change && !d.is_empty()))
}

/// The flow flags of `explain`: `--labels a,b` or `--session FILE`.
pub(crate) struct Flow<'a> {
    pub labels: Option<Vec<String>>,
    pub session: Option<&'a std::path::Path>,
}

/// `toolwarden explain -p FILE [request flags] --tool NAME [--args JSON] [--labels a,b |
/// --session FILE]`.
pub(crate) fn explain(
    req: &RequestArgs,
    tool: &str,
    args: Option<&str>,
    flow: &Flow<'_>,
    json: bool,
) -> CmdResult {
    let policy = load_policy(&req.policy)?;
    let (request, intent) = request_of(&policy, req)?;
    // The session the call is judged in: the file's, or one holding the `--labels`.
    let session = match (&flow.session, &flow.labels) {
        (Some(path), _) => {
            let text = toolwarden::limits::read_text(path, 4 * 1024 * 1024)
                .map_err(|e| format!("cannot read session file `{}`: {e}", path.display()))?;
            Some(
                toolwarden::Session::from_json(&text, &policy)
                    .map_err(|e| format!("session file `{}` is refused: {e}", path.display()))?,
            )
        }
        (None, Some(labels)) => {
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            Some(
                toolwarden::Session::with_labels(&policy, &labels, "--labels")
                    .map_err(|e| format!("`--labels`: {e}"))?,
            )
        }
        (None, None) => None,
    };
    let trace = match &session {
        Some(s) => {
            let labels: Vec<&str> = s.labels().iter().map(|l| l.label.as_str()).collect();
            policy.explain_labels(&request, &intent, tool, &labels)
        }
        None => policy.explain(&request, &intent, tool),
    }
    .map_err(|e| e.to_string())?;
    let (verdict, rules) = match args {
        None => (None, Vec::new()),
        Some(a) => {
            let args: serde_json::Value =
                serde_json::from_str(a).map_err(|e| format!("`--args` is not valid JSON: {e}"))?;
            let verdict = match &session {
                // A copy: explaining changes no session.
                Some(s) => {
                    policy.check_call_session(&request, &intent, &mut s.clone(), tool, &args)
                }
                None => {
                    policy.check_call(&request, &intent, &mut toolwarden::Turn::new(), tool, &args)
                }
            }
            .map_err(|e| e.to_string())?;
            let rules = policy
                .explain_rules(&request, &intent, tool, &args)
                .map_err(|e| e.to_string())?;
            (Some(verdict), rules)
        }
    };
    // Where the labels of a session file came from (`--labels` put its own there).
    let sources: Vec<&toolwarden::LabelSource> = match (&session, flow.session) {
        (Some(s), Some(_)) => s.labels().iter().collect(),
        _ => Vec::new(),
    };
    if json {
        let mut v = serde_json::to_value(&trace).map_err(|e| e.to_string())?;
        if !sources.is_empty() {
            v["session_labels"] = serde_json::to_value(&sources).map_err(|e| e.to_string())?;
        }
        if let Some(verdict) = &verdict {
            v["call"] = verdict.to_json();
        }
        if !rules.is_empty() {
            v["argument_rules"] = serde_json::to_value(&rules).map_err(|e| e.to_string())?;
        }
        println!("{}", pretty(&v));
    } else {
        for l in &sources {
            println!(
                "session label {}: from {} in turn {}",
                l.label, l.tool, l.turn
            );
        }
        print!("{}", trace.render());
        for r in &rules {
            let verdict = match &r.fired {
                None => "silent".to_string(),
                Some(f) => {
                    let mut t = format!("fires ({})", f.outcome);
                    if !f.reference.is_empty() {
                        t.push_str(&format!(" on `{}`", f.reference));
                    }
                    if let Some(v) = &f.value {
                        t.push_str(&format!(" = `{v}`"));
                    }
                    if let Some(p) = &f.problem {
                        t.push_str(&format!(": {p}"));
                    }
                    t
                }
            };
            println!("rule {}: {}  -> {verdict}", r.source, r.text);
        }
        if let Some(v) = verdict {
            println!(
                "call with these arguments: {}{} ({}){}",
                v.decision,
                v.stage
                    .map(|s| format!(" at stage {s}"))
                    .unwrap_or_default(),
                v.reason,
                v.source.map(|s| format!(", rule {s}")).unwrap_or_default()
            );
        }
    }
    Ok(0)
}
