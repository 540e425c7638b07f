//! Policy test files (`*.test.yaml`): cases written by policy authors, run against a policy.
//!
//! ```yaml
//! policy: finance.warden          # relative to this file; default: <stem>.warden beside it
//! request:                        # defaults for every case (each case may override a field)
//!   mode: supervised
//!   tenant: b-42
//! cases:
//!   - name: an accountant may delete, with confirmation
//!     request:
//!       roles: [accountant]
//!       permissions: [invoices.manage]
//!       connectors: { session: [github] }   # per tier; [] = zero connectors
//!       forced: []
//!       query: "delete invoice 7"           # or `intent: destructive`
//!     tool: delete_invoice                  # or `tools: [...]` with `expect.offered`
//!     args: { business_id: b-42 }           # optional: judge a call (check_call) instead
//!     expect:
//!       decision: confirm                   # allow | confirm | deny
//!       stage: confirmation                 # a stage name, or `none` for an allow
//!       intent: destructive                 # the query's classification
//!       confirmation: true                  # the tool needs (or the call awaits) confirmation
//! ```
//!
//! With `tools`, `expect.offered` is the exact set of names offered (allow or confirm). Every
//! mode, tier, role, permission, intent and tool a case names must be known to the policy (a
//! typo is an error, never a silent pass); a case about an undeclared name says
//! `undeclared: true`. A malformed file or case is reported at its `file:line:col`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::classify::Intent;
use crate::decision::{Decision, Stage, ToolMatch, Turn};
use crate::eval::Request;
use crate::policy::Policy;

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct ReqSpec {
    mode: Option<String>,
    roles: Option<Vec<String>>,
    permissions: Option<Vec<String>>,
    /// `Some(None)`: `tenant: null`, which clears a file-level tenant.
    #[serde(default, deserialize_with = "present")]
    tenant: Option<Option<String>>,
    connectors: Option<BTreeMap<String, Vec<String>>>,
    forced: Option<Vec<String>>,
    query: Option<String>,
    intent: Option<String>,
}

/// Deserializes a present field (even `null`) as `Some`.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

impl ReqSpec {
    fn over(&self, base: &ReqSpec) -> ReqSpec {
        ReqSpec {
            mode: self.mode.clone().or_else(|| base.mode.clone()),
            roles: self.roles.clone().or_else(|| base.roles.clone()),
            permissions: self
                .permissions
                .clone()
                .or_else(|| base.permissions.clone()),
            tenant: self.tenant.clone().or_else(|| base.tenant.clone()),
            connectors: self.connectors.clone().or_else(|| base.connectors.clone()),
            forced: self.forced.clone().or_else(|| base.forced.clone()),
            query: self.query.clone().or_else(|| {
                if self.intent.is_some() {
                    None
                } else {
                    base.query.clone()
                }
            }),
            intent: self.intent.clone().or_else(|| {
                if self.query.is_some() {
                    None
                } else {
                    base.intent.clone()
                }
            }),
        }
    }
}

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct Expect {
    decision: Option<String>,
    stage: Option<String>,
    intent: Option<String>,
    confirmation: Option<bool>,
    offered: Option<Vec<String>>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct CaseSpec {
    name: String,
    #[serde(default)]
    request: ReqSpec,
    tool: Option<String>,
    tools: Option<Vec<String>>,
    args: Option<Value>,
    #[serde(default)]
    undeclared: bool,
    expect: Expect,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    policy: Option<String>,
    #[serde(default)]
    request: ReqSpec,
    cases: Vec<CaseSpec>,
}

/// The result of one case.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// `file:line:col` of the case.
    pub location: String,
    /// Whether every expectation held.
    pub passed: bool,
    /// One `what: expected X, got Y` entry per expectation that failed.
    pub failures: Vec<String>,
    /// For a failed case about a tool: the explain trace, one line (`stage=result @rule, ...`).
    pub trace: Option<String>,
}

/// What no case exercised (see [`FileReport::uncovered`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Coverage {
    /// Declared tools no case named.
    pub tools: Vec<String>,
    /// Patterns no case's tool name resolved to.
    pub patterns: Vec<String>,
    /// Matrix cells (`matrix: intent × effect`) no case's tool decision read.
    pub cells: Vec<String>,
    /// Keywords (`intent lang "text"`) no case's query hit.
    pub keywords: Vec<String>,
    /// Modes no case ran in.
    pub modes: Vec<String>,
}

/// The result of one test file.
#[derive(Clone, Debug, Serialize)]
pub struct FileReport {
    /// The test file.
    pub file: String,
    /// The policy file it ran against.
    pub policy: Option<String>,
    /// The cases run (after `filter`), in file order.
    pub cases: Vec<CaseResult>,
    /// A file-level error (unreadable, malformed, unknown name) at `file:line:col: message`;
    /// when set, no case ran.
    pub error: Option<String>,
    /// What the file's cases did not exercise.
    pub uncovered: Option<Coverage>,
}

impl FileReport {
    /// Cases passed.
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.passed).count()
    }

    /// Cases failed; a file error counts as one failure.
    pub fn failed(&self) -> usize {
        self.cases.iter().filter(|c| !c.passed).count() + usize::from(self.error.is_some())
    }
}

/// Finds the test files under `paths`: a file is taken as given; a directory is searched
/// recursively for `*.test.yaml` / `*.test.yml`. Sorted, so runs are reproducible.
///
/// # Errors
///
/// A message for a path that does not exist or a directory that cannot be read.
pub fn find_test_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut stack = vec![p.clone()];
            // A symlink back up the tree is searched once, not forever.
            let mut seen = std::collections::HashSet::new();
            while let Some(dir) = stack.pop() {
                if !seen.insert(std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone())) {
                    continue;
                }
                let entries = std::fs::read_dir(&dir)
                    .map_err(|e| format!("cannot read directory `{}`: {e}", dir.display()))?;
                for e in entries.flatten() {
                    let path = e.path();
                    if path.is_dir() {
                        // Build output and hidden folders (`.git`) hold no test files.
                        let skip = path
                            .file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n == "target" || n.starts_with('.'));
                        if !skip {
                            stack.push(path);
                        }
                    } else if path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with(".test.yaml") || n.ends_with(".test.yml"))
                    {
                        out.push(path);
                    }
                }
            }
        } else if p.exists() {
            // Read (or refused, when not a regular file) as given.
            out.push(p.clone());
        } else {
            return Err(format!("no such file or directory `{}`", p.display()));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Where each case of a block-style `cases:` list starts (1-based line and column of its first
/// key), found in the text; empty when the list is not in block style.
fn case_positions(text: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|l| l.starts_with("cases:") && l[6..].trim().is_empty())
    else {
        return Vec::new();
    };
    let mut item_indent = None;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        if indent == 0 && !trimmed.starts_with('-') {
            break;
        }
        if trimmed.starts_with("- ") || trimmed == "-" {
            let ind = *item_indent.get_or_insert(indent);
            if indent == ind {
                out.push((i + 1, indent + 3));
            }
        }
    }
    out
}

/// The line and column of `key:` inside a case (lines `from..to`, 1-based), else the case's.
fn field_position(text: &str, case: (usize, usize), to: usize, key: &str) -> (usize, usize) {
    let pat = format!("{key}:");
    for (i, line) in text
        .lines()
        .enumerate()
        .skip(case.0 - 1)
        .take(to.saturating_sub(case.0))
    {
        // `key:` as a whole key: at the start of the line's content, or after `{`, `,` or a
        // space (flow mappings).
        let mut from = 0;
        while let Some(off) = line[from..].find(&pat) {
            let at = from + off;
            let before = line[..at].chars().last();
            if before.is_none_or(|c| c == '{' || c == ',' || c == ' ' || c == '-') {
                return (i + 1, line[..at].chars().count() + 1);
            }
            from = at + pat.len();
        }
    }
    case
}

fn known<'a>(list: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = list.map(|s| format!("`{s}`")).collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

struct Prepared {
    request: Request,
    intent: Intent,
}

/// Builds and validates a case's request; `Err((key, message))` names the offending field.
fn prepare(policy: &Policy, spec: &ReqSpec) -> Result<Prepared, (&'static str, String)> {
    if let Some(m) = &spec.mode {
        if !policy.modes().any(|x| x == m) {
            return Err((
                "mode",
                format!(
                    "unknown mode `{m}`; the policy declares {}",
                    known(policy.modes())
                ),
            ));
        }
    }
    let mut request = match &spec.mode {
        Some(m) => Request::new(m.clone()),
        None => Request::default_mode(),
    };
    if let Some(roles) = &spec.roles {
        all_declared("roles", "role", roles, || policy.roles())?;
        request = request.roles(roles.clone());
    }
    if let Some(perms) = &spec.permissions {
        all_declared("permissions", "permission", perms, || policy.permissions())?;
        request = request.permissions(perms.clone());
    }
    if let Some(Some(t)) = &spec.tenant {
        request = request.tenant(t.clone());
    }
    if let Some(c) = &spec.connectors {
        for (tier, servers) in c {
            if !policy.tiers().any(|x| x == tier) {
                return Err((
                    "connectors",
                    format!(
                        "unknown connector tier `{tier}`; the policy declares {}",
                        known(policy.tiers())
                    ),
                ));
            }
            request = request.connectors(tier.clone(), servers.clone());
        }
    }
    if let Some(f) = &spec.forced {
        if let Some(n) = f.iter().find(|n| !known_tool(policy, n)) {
            return Err((
                "forced",
                format!(
                    "unknown tool `{n}` in `forced`: neither declared nor matched by a pattern{}",
                    did_you_mean(policy, n)
                ),
            ));
        }
        request = request.forced(f.clone());
    }
    let intent = match (&spec.query, &spec.intent) {
        (Some(_), Some(_)) => {
            return Err(("intent", "give `query` or `intent`, not both".to_string()));
        }
        (Some(q), None) => policy.classify(q),
        (None, Some(i)) => {
            if !policy.intents().any(|x| x == i) {
                return Err((
                    "intent",
                    format!(
                        "unknown intent `{i}`; the policy declares {}",
                        known(policy.intents())
                    ),
                ));
            }
            Intent::named(i.clone())
        }
        (None, None) => policy.fallback_intent(),
    };
    Ok(Prepared { request, intent })
}

#[derive(Default)]
struct Seen {
    tools: BTreeSet<String>,
    patterns: BTreeSet<u32>,
    cells: BTreeSet<(u16, usize, u8)>,
    keywords: BTreeSet<String>,
    modes: BTreeSet<String>,
}

impl Seen {
    fn tool(&mut self, policy: &Policy, request: &Request, intent: &Intent, name: &str) {
        let t = policy.tables();
        let (matched, row) = policy.resolve_tool(name);
        match matched {
            ToolMatch::Declared(_) => {
                self.tools.insert(name.to_string());
            }
            ToolMatch::Pattern(i) => {
                self.patterns.insert(i);
            }
            _ => {}
        }
        let Some(row) = row else { return };
        let Ok(b) = policy.bind(request, intent) else {
            return;
        };
        if let Some(m) = t.modes[b.mode].matrix {
            for i in 0..t.intents.len().min(64) {
                if b.intent_mask & (1u64 << i) != 0 {
                    self.cells.insert((m, i, row.effect));
                }
            }
        }
    }
}

/// Runs one test file; cases whose name does not contain `filter` are skipped.
pub fn run_file(path: &Path, filter: Option<&str>) -> FileReport {
    let file = path.display().to_string();
    let mut report = FileReport {
        file: file.clone(),
        policy: None,
        cases: Vec::new(),
        error: None,
        uncovered: None,
    };
    let text = match crate::limits::read_text(path, crate::limits::MAX_POLICY_BYTES) {
        Ok(t) => t,
        Err(e) => {
            report.error = Some(format!("{file}: cannot read: {e}"));
            return report;
        }
    };
    let spec: FileSpec = match crate::load::yaml_depth::parse(&text) {
        Ok(s) => s,
        Err(crate::load::yaml_depth::YamlError::TooDeep(offset)) => {
            let (line, column) = crate::load::yaml_depth::line_column(&text, offset);
            report.error = Some(format!(
                "{file}:{line}:{column}: malformed test file: YAML nested more than {} levels deep",
                crate::limits::MAX_YAML_DEPTH
            ));
            return report;
        }
        Err(crate::load::yaml_depth::YamlError::Syntax(e)) => {
            let at = e
                .location()
                .map(|l| format!("{}:{}", l.line(), l.column()))
                .unwrap_or_else(|| "1:1".to_string());
            report.error = Some(format!("{file}:{at}: malformed test file: {e}"));
            return report;
        }
    };
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let policy_path = match &spec.policy {
        Some(p) => dir.join(p),
        None => {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let stem = name
                .strip_suffix(".test.yaml")
                .or_else(|| name.strip_suffix(".test.yml"))
                .unwrap_or(name);
            dir.join(format!("{stem}.warden"))
        }
    };
    report.policy = Some(policy_path.display().to_string());
    let policy = match Policy::from_file(&policy_path) {
        Ok(p) => p,
        Err(e) => {
            report.error = Some(format!(
                "{file}:1:1: policy `{}` does not load: {e}",
                policy_path.display()
            ));
            return report;
        }
    };
    let positions = case_positions(&text);
    let total_lines = text.lines().count() + 1;
    let mut seen = Seen::default();
    for (idx, case) in spec.cases.iter().enumerate() {
        let pos = positions.get(idx).copied().unwrap_or((1, 1));
        let end = positions.get(idx + 1).map_or(total_lines, |p| p.0);
        let at = |key: &str| {
            let (l, c) = field_position(&text, pos, end, key);
            format!("{file}:{l}:{c}")
        };
        let req = case.request.over(&spec.request);
        let prepared = match prepare(&policy, &req) {
            Ok(p) => p,
            Err((key, msg)) => {
                report.error = Some(format!("{}: case `{}`: {msg}", at(key), case.name));
                report.cases.clear();
                return report;
            }
        };
        if let Err((key, msg)) = validate(&policy, case) {
            report.error = Some(format!("{}: case `{}`: {msg}", at(key), case.name));
            report.cases.clear();
            return report;
        }
        // Coverage counts every case, filtered or not.
        seen.modes.insert(
            prepared
                .request
                .mode()
                .map(str::to_string)
                .or_else(|| policy.default_mode().map(str::to_string))
                .unwrap_or_default(),
        );
        // A keyword a negator dropped was matched too: it counts as exercised.
        for h in prepared.intent.hits.iter().chain(&prepared.intent.dropped) {
            seen.keywords
                .insert(format!("{} {} \"{}\"", h.intent, h.lang, h.keyword));
        }
        for name in case.tool.iter().chain(case.tools.iter().flatten()) {
            seen.tool(&policy, &prepared.request, &prepared.intent, name);
        }
        if filter.is_some_and(|f| !case.name.contains(f)) {
            continue;
        }
        report.cases.push(run_case(
            &policy,
            case,
            &prepared,
            format!("{file}:{}:{}", pos.0, pos.1),
        ));
    }
    report.uncovered = Some(uncovered(&policy, &seen));
    report
}

fn validate(policy: &Policy, case: &CaseSpec) -> Result<(), (&'static str, String)> {
    let e = &case.expect;
    if case.tool.is_some() && case.tools.is_some() {
        return Err(("tools", "give `tool` or `tools`, not both".to_string()));
    }
    if case.args.is_some() && case.tool.is_none() {
        return Err(("args", "`args` judges a call: it needs `tool`".to_string()));
    }
    if case.tool.is_none()
        && (e.decision.is_some() || e.stage.is_some() || e.confirmation.is_some())
    {
        return Err((
            "expect",
            "`decision`, `stage` and `confirmation` are about one `tool`".to_string(),
        ));
    }
    if e.offered.is_some() && case.tools.is_none() {
        return Err(("offered", "`offered` needs `tools`".to_string()));
    }
    if e.decision.is_none()
        && e.stage.is_none()
        && e.intent.is_none()
        && e.confirmation.is_none()
        && e.offered.is_none()
    {
        return Err(("expect", "the case expects nothing".to_string()));
    }
    if let Some(d) = &e.decision {
        if !["allow", "confirm", "deny"].contains(&d.as_str()) {
            return Err((
                "decision",
                format!("unknown decision `{d}`; use allow, confirm or deny"),
            ));
        }
    }
    if let Some(s) = &e.stage {
        if s != "none" && Stage::parse(s).is_none() {
            let all = Stage::ALL
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err((
                "stage",
                format!("unknown stage `{s}`; stages are none, {all}"),
            ));
        }
    }
    if let Some(i) = &e.intent {
        if !policy.intents().any(|x| x == i) {
            return Err((
                "intent",
                format!(
                    "unknown intent `{i}`; the policy declares {}",
                    known(policy.intents())
                ),
            ));
        }
    }
    if !case.undeclared {
        let names = (case.tool.iter().map(|n| ("tool", n)))
            .chain(case.tools.iter().flatten().map(|n| ("tools", n)))
            .chain(e.offered.iter().flatten().map(|n| ("offered", n)));
        for (key, n) in names {
            if !known_tool(policy, n) {
                return Err((
                    key,
                    format!(
                        "unknown tool `{n}`: neither declared nor matched by a pattern{} (a case about an undeclared name says `undeclared: true`)",
                        did_you_mean(policy, n)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn run_case(policy: &Policy, case: &CaseSpec, p: &Prepared, location: String) -> CaseResult {
    let e = &case.expect;
    let mut failures = Vec::new();
    let mut check = |what: &str, expected: &str, actual: &str| {
        if expected != actual {
            failures.push(format!("{what}: expected {expected}, got {actual}"));
        }
    };
    if let Some(i) = &e.intent {
        check("intent", i, &p.intent.name);
    }
    let mut trace = None;
    if let Some(tool) = &case.tool {
        let outcome = match &case.args {
            Some(args) => policy
                .check_call(&p.request, &p.intent, &mut Turn::new(), tool, args)
                .map(|v| (v.decision, v.stage, v.pending.is_some())),
            None => policy
                .decide_tool(&p.request, &p.intent, tool)
                .map(|d| (d.decision, d.stage, d.decision == Decision::Confirm)),
        };
        match outcome {
            Err(err) => failures.push(format!("request: {err}")),
            Ok((decision, stage, confirmation)) => {
                if let Some(d) = &e.decision {
                    check("decision", d, decision.as_str());
                }
                if let Some(s) = &e.stage {
                    check("stage", s, stage.map_or("none", Stage::as_str));
                }
                if let Some(c) = e.confirmation {
                    check("confirmation", &c.to_string(), &confirmation.to_string());
                }
            }
        }
        if !failures.is_empty() {
            trace = policy
                .explain(&p.request, &p.intent, tool)
                .ok()
                .map(|t| t.summary());
        }
    }
    if let Some(tools) = &case.tools {
        match policy.offer(&p.request, &p.intent, tools.iter().map(String::as_str)) {
            Err(err) => failures.push(format!("request: {err}")),
            Ok(offer) => {
                if let Some(expected) = &e.offered {
                    let want: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
                    let got: BTreeSet<&str> = offer.visible().collect();
                    if want != got {
                        let show = |s: &BTreeSet<&str>| {
                            format!("[{}]", s.iter().copied().collect::<Vec<_>>().join(", "))
                        };
                        failures.push(format!(
                            "offered: expected {}, got {}",
                            show(&want),
                            show(&got)
                        ));
                        let traces: Vec<String> = want
                            .symmetric_difference(&got)
                            .filter_map(|n| {
                                policy
                                    .explain(&p.request, &p.intent, n)
                                    .ok()
                                    .map(|t| format!("{n}: {}", t.summary()))
                            })
                            .collect();
                        trace = Some(traces.join("; "));
                    }
                }
            }
        }
    }
    CaseResult {
        name: case.name.clone(),
        location,
        passed: failures.is_empty(),
        failures,
        trace,
    }
}

fn uncovered(policy: &Policy, seen: &Seen) -> Coverage {
    let t = policy.tables();
    let mut cov = Coverage {
        tools: policy
            .tools()
            .filter(|n| !seen.tools.contains(*n))
            .map(str::to_string)
            .collect(),
        ..Coverage::default()
    };
    let mut pats: Vec<_> = t.patterns.iter().collect();
    pats.sort_by_key(|p| p.source_index);
    cov.patterns = pats
        .iter()
        .filter(|p| !seen.patterns.contains(&p.source_index))
        .map(|p| p.glob.to_string())
        .collect();
    // Cells of the matrices some mode uses.
    let used: BTreeSet<u16> = t.modes.iter().filter_map(|m| m.matrix).collect();
    for m in used {
        for i in 0..t.intents.len() {
            for e in 0..t.effects.len() {
                if !seen
                    .cells
                    .contains(&(m, i, u8::try_from(e).unwrap_or(u8::MAX)))
                {
                    cov.cells.push(format!(
                        "{}: {} × {}",
                        t.matrix_names[m as usize], t.intents[i], t.effects[e]
                    ));
                }
            }
        }
    }
    cov.keywords = policy
        .classifier()
        .keyword_entries()
        .map(|(i, l, k)| format!("{i} {l} \"{k}\""))
        .filter(|k| !seen.keywords.contains(k))
        .collect();
    cov.modes = policy
        .modes()
        .filter(|m| !seen.modes.contains(*m))
        .map(str::to_string)
        .collect();
    cov
}

/// `; did you mean `x`?` for the declared tool closest to `name`, or nothing.
fn did_you_mean(policy: &Policy, name: &str) -> String {
    crate::check::suggest(name, policy.tools())
        .map(|t| format!("; did you mean `{t}`?"))
        .unwrap_or_default()
}

/// Whether `name` is a declared tool or matched by a pattern (not left to `defaults` or
/// `unknown`).
fn known_tool(policy: &Policy, name: &str) -> bool {
    !matches!(
        policy.resolve_tool(name).0,
        ToolMatch::Unknown | ToolMatch::Defaults
    )
}

/// Checks that every name in `names` is declared (`declared` lists the policy's names);
/// otherwise the error names the field and the unknown name.
fn all_declared<'p, I>(
    field: &'static str,
    what: &str,
    names: &[String],
    declared: impl Fn() -> I,
) -> Result<(), (&'static str, String)>
where
    I: Iterator<Item = &'p str>,
{
    match names.iter().find(|n| !declared().any(|x| x == n.as_str())) {
        Some(n) => Err((
            field,
            format!(
                "unknown {what} `{n}`; the policy declares {}",
                known(declared())
            ),
        )),
        None => Ok(()),
    }
}
