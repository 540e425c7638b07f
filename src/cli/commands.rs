//! The commands. Each returns the exit code, or a one-line error message (exit 2).

use std::path::Path;

use serde_json::{json, Value};
use toolwarden::{render_all, Decision, Intent, Policy, Request, Severity, ToolDecision};

use super::RequestArgs;

type CmdResult = Result<i32, String>;

/// Loads a policy or returns its rendered diagnostics as the error.
pub(crate) fn load_policy(path: &Path) -> Result<Policy, String> {
    let yaml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    let loaded = if yaml {
        // Seed 004's tool_policies.yaml, read as `Policy::from_yaml` does.
        Policy::from_yaml(path, None)
    } else {
        Policy::from_file(path)
    };
    loaded.map_err(|e| {
        // A file that cannot be read at all: one line, no report.
        if e.diagnostics().iter().all(|d| d.span().is_none()) {
            return e
                .diagnostics()
                .iter()
                .map(|d| d.message().to_string())
                .collect::<Vec<_>>()
                .join("; ");
        }
        let rendered = e.render();
        format!(
            "policy `{}` does not load:\n{}",
            path.display(),
            rendered.trim_end()
        )
    })
}

pub(crate) fn check(files: &[std::path::PathBuf], deny_warnings: bool, json: bool) -> CmdResult {
    let mut failed = false;
    let mut unreadable = false;
    let mut reports = Vec::new();
    for path in files {
        let (diagnostics, sources, ok) = match Policy::from_file(path) {
            Ok(p) => (p.warnings().to_vec(), p.sources().clone(), true),
            // A file that cannot be read is an input error (exit 2), told in one line.
            Err(e) if e.diagnostics().iter().all(|d| d.code() == "unreadable") => {
                for d in e.diagnostics() {
                    eprintln!("error: {}", d.message());
                }
                unreadable = true;
                continue;
            }
            Err(e) => (e.diagnostics().to_vec(), e.sources().clone(), false),
        };
        let has_warnings = diagnostics
            .iter()
            .any(|d| d.severity() == Severity::Warning);
        failed |= !ok || (deny_warnings && has_warnings);
        if json {
            reports.push(json!({
                "file": path.display().to_string(),
                "ok": ok,
                "diagnostics": diagnostics.iter().map(|d| d.to_json(&sources)).collect::<Vec<_>>(),
            }));
        } else if diagnostics.is_empty() {
            println!("{}: ok", path.display());
        } else {
            print!("{}", render_all(&diagnostics, &sources));
            println!(
                "{}: {}",
                path.display(),
                match (ok, deny_warnings && has_warnings) {
                    (false, _) => "failed",
                    (true, true) => "failed (warnings denied by --deny-warnings)",
                    (true, false) => "ok (with warnings)",
                }
            );
        }
    }
    if json {
        println!("{}", pretty(&Value::Array(reports)));
    }
    if unreadable {
        return Ok(2);
    }
    Ok(i32::from(failed))
}

pub(crate) fn classify(policy: &Path, text: &str, json: bool) -> CmdResult {
    let policy = load_policy(policy)?;
    let stdin_text;
    let text = if text == "-" {
        stdin_text = read_stdin_utf8("the query")?;
        stdin_text.as_str()
    } else {
        text
    };
    let intent = policy.classify(text);
    if json {
        println!(
            "{}",
            pretty(&serde_json::to_value(&intent).map_err(|e| e.to_string())?)
        );
    } else {
        print_intent(&intent, text);
    }
    Ok(0)
}

fn print_intent(intent: &Intent, text: &str) {
    let names = intent.intents.join(", ");
    if intent.intents.is_empty() {
        println!("intent: none (the policy declares no intents)");
    } else if intent.fallback {
        println!("intent: {names} (fallback: no keyword hit)");
    } else {
        println!("intent: {names}");
    }
    for h in &intent.hits {
        let found = text.get(h.span.0..h.span.1).unwrap_or("");
        println!(
            "  hit      {:<12} \"{}\" [{}] matched \"{found}\" at bytes {}..{}",
            h.intent, h.keyword, h.lang, h.span.0, h.span.1
        );
    }
    for h in &intent.dropped {
        let found = text.get(h.span.0..h.span.1).unwrap_or("");
        println!(
            "  dropped  {:<12} \"{}\" [{}] matched \"{found}\" at bytes {}..{}, {}",
            h.intent,
            h.keyword,
            h.lang,
            h.span.0,
            h.span.1,
            super::classify_eval::drop_reason(h)
        );
    }
    if intent.truncated {
        println!(
            "  truncated: only the start of the query was read (it is over {} bytes or {} keyword occurrences)",
            toolwarden::limits::MAX_QUERY_BYTES,
            toolwarden::limits::MAX_QUERY_OCCURRENCES
        );
    }
}

/// Builds the request and the intent from the flags.
pub(crate) fn request_of(policy: &Policy, req: &RequestArgs) -> Result<(Request, Intent), String> {
    let mut request = match &req.mode {
        Some(m) => Request::new(m.clone()),
        None => Request::default_mode(),
    };
    request = request
        .roles(req.roles.clone())
        .permissions(req.permissions.clone())
        .forced(req.forced.clone());
    if let Some(t) = &req.tenant {
        request = request.tenant(t.clone());
    }
    let mut tiers_seen: Vec<&str> = Vec::new();
    for spec in &req.connectors {
        let Some((tier, servers)) = spec.split_once('=') else {
            return Err(format!(
                "`--connectors {spec}` must be TIER=server1,server2 (or TIER= for zero connectors)"
            ));
        };
        // A tier given twice is ambiguous (a later flag must not reopen a zero-connector tier).
        if tiers_seen.contains(&tier.trim()) {
            return Err(format!(
                "`--connectors` sets tier `{}` twice; give each tier once, its servers comma-separated",
                tier.trim()
            ));
        }
        tiers_seen.push(tier.trim());
        let servers: Vec<String> = servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        request = request.connectors(tier.trim().to_string(), servers);
    }
    let mut contexts_seen: Vec<&str> = Vec::new();
    for spec in &req.contexts {
        let Some((name, values)) = spec.split_once('=') else {
            return Err(format!(
                "`--context {spec}` must be NAME=value1,value2 (or NAME= for the empty set)"
            ));
        };
        let name = name.trim();
        if contexts_seen.contains(&name) {
            return Err(format!(
                "`--context` sets `{name}` twice; give each set once, its values comma-separated"
            ));
        }
        contexts_seen.push(name);
        let values: Vec<String> = values
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        request = request.context(name.to_string(), values);
    }
    let intent = match (&req.query, &req.intent) {
        (Some(q), _) => policy.classify(q),
        (None, Some(i)) => Intent::named(i.clone()),
        (None, None) => policy.fallback_intent(),
    };
    Ok((request, intent))
}

fn read_tools_file(path: &Path) -> Result<Vec<String>, String> {
    let text =
        toolwarden::limits::read_text(path, toolwarden::limits::MAX_DATA_BYTES).map_err(|e| {
            let reason = match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_string(),
                std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
                std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
                std::io::ErrorKind::InvalidData => "not valid UTF-8".to_string(),
                _ => e.to_string(),
            };
            format!("cannot read tools file `{}`: {reason}", path.display())
        })?;
    if text.trim_start().starts_with('[') {
        let v: Vec<String> = serde_json::from_str(&text).map_err(|e| {
            format!(
                "tools file `{}` is not a JSON array of names: {e}",
                path.display()
            )
        })?;
        return Ok(v);
    }
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}

/// Opens the decision log of `--audit` (appending), with advisory enforcement when asked.
pub(crate) fn auditor(
    log: &super::AuditArgs,
) -> Result<Option<toolwarden::audit::Auditor<std::fs::File>>, String> {
    let Some(path) = &log.audit else {
        return Ok(None);
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open audit log `{}`: {e}", path.display()))?;
    let enforcement = if log.advisory {
        toolwarden::audit::Enforcement::Advisory
    } else {
        toolwarden::audit::Enforcement::Enforce
    };
    Ok(Some(toolwarden::audit::Auditor::new(file, enforcement)))
}

pub(crate) fn offer(
    req: &RequestArgs,
    tools: Vec<String>,
    tools_file: Option<&Path>,
    json: bool,
    log: &super::AuditArgs,
) -> CmdResult {
    let policy = load_policy(&req.policy)?;
    let (request, intent) = request_of(&policy, req)?;
    let names: Vec<String> = match tools_file {
        Some(f) => read_tools_file(f)?,
        None if tools.is_empty() => policy.tools().map(str::to_string).collect(),
        None => tools,
    };
    let offer = match auditor(log)? {
        Some(mut a) => a
            .offer(
                &policy,
                1,
                &request,
                &intent,
                names.iter().map(String::as_str),
            )
            .map_err(|e| e.to_string())?,
        None => policy
            .offer(&request, &intent, names.iter().map(String::as_str))
            .map_err(|e| e.to_string())?,
    };
    let mode = request
        .mode()
        .or(policy.default_mode())
        .unwrap_or("")
        .to_string();
    // Under `--advisory` a deny is let through as an allow that keeps its deciding stage (an
    // enforced allow has none): the reason is the deny's, and the output says so.
    let would_deny =
        |d: &ToolDecision| log.advisory && d.decision == Decision::Allow && d.stage.is_some();
    let reason = |name: &str, d: &ToolDecision| {
        let mut d = *d;
        if would_deny(&d) {
            d.decision = Decision::Deny;
        }
        policy.reason(name, &d, &request)
    };
    if json {
        let decisions: Vec<Value> = offer
            .entries()
            .iter()
            .map(|(name, d)| {
                let mut v = json!({
                    "tool": name,
                    "decision": d.decision,
                    "stage": d.stage,
                    "reason": reason(name, d),
                    "source": policy.rule_source(d.rule).map(|l| l.to_string()),
                });
                if would_deny(d) {
                    v["would_be"] = json!(Decision::Deny);
                }
                v
            })
            .collect();
        let mut out = json!({
            "mode": mode,
            "intent": intent,
            "offered": offer.visible().collect::<Vec<_>>(),
            "decisions": decisions,
        });
        if log.advisory {
            // As the audit records say it: nothing is blocked, even where nothing would be.
            out["enforcement"] = json!("advisory");
        }
        println!("{}", pretty(&out));
        return Ok(0);
    }
    let query = req.query.as_deref().unwrap_or("");
    println!("mode: {mode}");
    if log.advisory {
        println!("enforcement: advisory (what enforcement would deny is allowed and marked)");
    }
    print_intent(&intent, query);
    println!();
    let width = offer
        .entries()
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:<width$}  {:<8}  {:<12}  {:<22}  REASON",
        "TOOL", "DECISION", "STAGE", "RULE"
    );
    for (name, d) in offer.entries() {
        let rule = policy
            .rule_source(d.rule)
            .map_or("-".to_string(), |l| l.to_string());
        let stage = d.stage.map_or("-", |s| s.as_str());
        let reason = if would_deny(d) {
            format!("advisory: would be deny: {}", reason(name, d))
        } else if d.decision == Decision::Allow {
            String::new()
        } else {
            reason(name, d)
        };
        let line = format!(
            "{name:<width$}  {:<8}  {stage:<12}  {:<22}  {reason}",
            d.decision.as_str(),
            short_rule(&rule)
        );
        println!("{}", line.trim_end());
    }
    let visible: Vec<&str> = offer.visible().collect();
    println!();
    if visible.is_empty() {
        println!("offered: nothing (fail-closed)");
    } else {
        println!("offered: {}", visible.join(", "));
    }
    Ok(0)
}

/// Shows only the file name of a `path/file:line:col` rule source.
fn short_rule(rule: &str) -> String {
    match rule.rsplit_once('/') {
        Some((_, tail)) => tail.to_string(),
        None => rule.to_string(),
    }
}

pub(crate) fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Reads all of standard input; invalid UTF-8 is a clear error naming `what` was read.
pub(crate) fn read_stdin_utf8(what: &str) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {what} from standard input: {e}"))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{what} on standard input is not valid UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}
