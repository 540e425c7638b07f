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
//!       context: { contacts: [alice, bob] } # the `context` sets the policy declares
//!       query: "delete invoice 7"           # or `intent: destructive`
//!     session: { labels: [untrusted] }      # flow labels already on the session
//!     tool: delete_invoice                  # or `tools: [...]` with `expect.offered`
//!     args: { business_id: b-42 }           # optional: judge a call (check_call) instead
//!     expect:
//!       decision: confirm                   # allow | confirm | deny
//!       stage: confirmation                 # a stage name, or `none` for an allow
//!       intent: destructive                 # the query's classification
//!       confirmation: true                  # the tool needs (or the call awaits) confirmation
//!       rule: finance.warden:52:1           # the rule that decided, at its file:line:col
//! ```
//!
//! With `tools`, `expect.offered` is the exact set of names offered (allow or confirm). Every
//! mode, tier, role, permission, intent, `context` set and tool a case names must be known to
//! the policy (a typo is an error, never a silent pass); a case about an undeclared name says
//! `undeclared: true`. A malformed file or case is reported at its `file:line:col`.
//!
//! Argument rules are tested with `args`, the request's `context` sets and `expect.rule`, the
//! `file:line:col` of the rule that decided (relative to this file, as `toolwarden check` and
//! `explain` print it; for a call stopped at stage `arguments`, the first `deny` rule that
//! fired, else the first `confirm` rule; for an allow, the tool's declaration). A position no
//! rule of the policy starts at is an error.
//!
//! `steps` runs several calls within one turn, in order, through one [`Session`], so that a
//! pending call, its confirmation, the turn limit and the flow labels are tested in one case.
//! The calls go through `check_call_session`, as an agent runtime makes them: the pending call
//! a step leaves is the one the next steps answer, `confirm: true` sets the policy's first
//! `confirm fields` argument to `true`, which is the user confirming the pending call, and an
//! allowed call of a tool that `taints` puts its labels on the session for the next steps (so a
//! later step can expect stage `flow`). A `confirm: true` with no pending call is the model
//! confirming its own call (denied at stage `confirmation`).
//!
//! `session: { labels: [untrusted] }` starts a case from a session that already holds these
//! flow labels: its `tool` decision (stages 1–7 and `flow`, as `offer_session` decides), its
//! call (`args`, through `check_call_session` on a copy of the session), its `tools` offer
//! and its `steps` are judged within it. Each label must be one the policy declares.
//!
//! ```yaml
//! cases:
//!   - name: a payment to a stranger waits for the user, then runs once
//!     request: { mode: autonomous, context: { contacts: [alice, bob] } }
//!     steps:
//!       - tool: send_money
//!         args: { recipient: mallory, amount: 20 }
//!         expect: { decision: confirm, stage: arguments, rule: money.warden:14:3 }
//!       - tool: send_money
//!         args: { recipient: mallory, amount: 20 }
//!         confirm: true                     # the user says yes
//!         expect: { decision: allow }
//!       - tool: send_money                  # the turn's limit is one transactional call
//!         args: { recipient: alice, amount: 5 }
//!         expect: { decision: deny, stage: turn_limit }
//! ```
//!
//! Each step takes `tool`, `args` (default `{}`), `confirm` and an `expect` of `decision`,
//! `stage`, `rule` and `confirmation`; the case's own `expect` may then only give `intent`.
//! Coverage (see [`Coverage`]) counts what every case exercised, filtered out or not, including
//! the argument rules that fired on some call and the `after` blocks that applied to some
//! decision (made in the block's mode with a session holding all its labels).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod positions;
mod rule_positions;

use positions::{case_field_position, case_positions, field_position, list_block};
use rule_positions::RulePositions;

use crate::classify::Intent;
use crate::decision::{Decision, Stage, ToolMatch, Turn};
use crate::eval::Request;
use crate::eval::Session;
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
    /// `context: { name: [values] }`: the named sets the request supplies.
    context: Option<BTreeMap<String, Vec<String>>>,
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
            context: self.context.clone().or_else(|| base.context.clone()),
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
    /// `file:line:col` of the deciding rule, relative to the test file.
    rule: Option<String>,
}

/// One call of a multi-step case.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct StepSpec {
    tool: String,
    #[serde(default = "empty_object")]
    args: Value,
    /// The user confirms the pending call: the first confirmation field is set to `true`.
    #[serde(default)]
    confirm: bool,
    expect: Expect,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// `session: { labels: [untrusted] }`: the flow labels already on the case's session.
#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct SessionSpec {
    #[serde(default)]
    labels: Vec<String>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct CaseSpec {
    name: String,
    #[serde(default)]
    request: ReqSpec,
    /// The session the case's decisions and calls are judged in.
    session: Option<SessionSpec>,
    tool: Option<String>,
    tools: Option<Vec<String>>,
    args: Option<Value>,
    steps: Option<Vec<StepSpec>>,
    #[serde(default)]
    undeclared: bool,
    #[serde(default)]
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
    /// Argument rules no case's call fired, in source order, each as `file:line:col` and its
    /// canonical text (`policy.warden:14:3 deny when amount > 10000`).
    pub rules: Vec<String>,
    /// `after` blocks no case's decision was made under (in the block's mode, with a session
    /// holding all its labels), in compiled order (the top-level blocks, then each mode's),
    /// each as its head and its lines with their `file:line:col`
    /// (`after untrusted, private: flow.warden:14:28 deny export`).
    pub afters: Vec<String>,
    /// How many `after` blocks the policy has (so a report can say they were all exercised).
    pub after_blocks: usize,
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
    if let Some(sets) = &spec.context {
        for (name, values) in sets {
            if !policy.contexts().any(|x| x == name) {
                let near = crate::check::suggest(name, policy.contexts())
                    .map(|c| format!("did you mean `{c}`? "))
                    .unwrap_or_default();
                return Err((
                    "context",
                    format!(
                        "unknown context set `{name}`; {near}the policy declares {}",
                        known(policy.contexts())
                    ),
                ));
            }
            request = request.context(name.clone(), values.clone());
        }
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
    /// Locations of the argument rules some call fired.
    rules: BTreeSet<String>,
    /// The (mode, label mask) pairs some decision was made with, for the `after` blocks.
    flow: BTreeSet<(usize, u8)>,
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
    let rules = RulePositions::new(&policy, &dir);
    let positions = case_positions(&text);
    let total_lines = text.lines().count() + 1;
    let mut seen = Seen::default();
    for (idx, case) in spec.cases.iter().enumerate() {
        let pos = positions.get(idx).copied().unwrap_or((1, 1));
        let end = positions.get(idx + 1).map_or(total_lines, |p| p.0);
        let at = |key: &str| {
            let (l, c) = case_field_position(&text, pos, end, key);
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
        if let Err((where_, msg)) = validate(&policy, case, &rules) {
            let (place, msg) = match where_ {
                At::Case(key) => (at(key), msg),
                At::Step(i, key) => {
                    let steps = list_block(&text, pos, end, "steps")
                        .map(|b| b.items)
                        .unwrap_or_default();
                    let place = match steps.get(i) {
                        Some(&step) => {
                            let step_end = steps.get(i + 1).map_or(end, |p| p.0);
                            let (l, c) = field_position(&text, step, step_end, key);
                            format!("{file}:{l}:{c}")
                        }
                        None => at("steps"),
                    };
                    (place, format!("step {}: {msg}", i + 1))
                }
            };
            report.error = Some(format!("{place}: case `{}`: {msg}", case.name));
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
        let step_tools = case.steps.iter().flatten().map(|s| &s.tool);
        for name in case
            .tool
            .iter()
            .chain(case.tools.iter().flatten())
            .chain(step_tools)
        {
            seen.tool(&policy, &prepared.request, &prepared.intent, name);
        }
        let session = match session_of(&policy, case) {
            Ok(s) => s,
            Err((key, msg)) => {
                report.error = Some(format!("{}: case `{}`: {msg}", at(key), case.name));
                report.cases.clear();
                return report;
            }
        };
        // Every case runs, so that the argument rules a filtered-out case fires count too.
        let result = run_case(
            &policy,
            case,
            &prepared,
            session.as_ref(),
            &rules,
            format!("{file}:{}:{}", pos.0, pos.1),
            &mut seen,
        );
        if filter.is_some_and(|f| !case.name.contains(f)) {
            continue;
        }
        report.cases.push(result);
    }
    report.uncovered = Some(uncovered(&policy, &seen));
    report
}

/// Where a mistake in a case is: a key of the case, or a key of its step (0-based).
enum At {
    Case(&'static str),
    Step(usize, &'static str),
}

fn validate(policy: &Policy, case: &CaseSpec, rules: &RulePositions) -> Result<(), (At, String)> {
    let e = &case.expect;
    let fail = |key, msg: &str| Err((At::Case(key), msg.to_string()));
    if case.tool.is_some() && case.tools.is_some() {
        return fail("tools", "give `tool` or `tools`, not both");
    }
    if let Some(steps) = &case.steps {
        if case.tool.is_some() || case.tools.is_some() || case.args.is_some() {
            return fail(
                "steps",
                "`steps` holds the calls: give `tool` and `args` in each step, not in the case",
            );
        }
        if steps.is_empty() {
            return fail("steps", "`steps` holds no call");
        }
        if e.decision.is_some()
            || e.stage.is_some()
            || e.confirmation.is_some()
            || e.offered.is_some()
            || e.rule.is_some()
        {
            return fail(
                "expect",
                "with `steps`, each step has its own `expect`; the case's may only give `intent`",
            );
        }
        validate_expect(policy, e, rules).map_err(|(k, m)| (At::Case(k), m))?;
        for (i, step) in steps.iter().enumerate() {
            validate_step(policy, case, step, rules).map_err(|(k, m)| (At::Step(i, k), m))?;
        }
        return Ok(());
    }
    if case.args.is_some() && case.tool.is_none() {
        return fail("args", "`args` judges a call: it needs `tool`");
    }
    if case.tool.is_none()
        && (e.decision.is_some()
            || e.stage.is_some()
            || e.confirmation.is_some()
            || e.rule.is_some())
    {
        return fail(
            "expect",
            "`decision`, `stage`, `confirmation` and `rule` are about one `tool`",
        );
    }
    if e.offered.is_some() && case.tools.is_none() {
        return fail("offered", "`offered` needs `tools`");
    }
    if e.decision.is_none()
        && e.stage.is_none()
        && e.intent.is_none()
        && e.confirmation.is_none()
        && e.offered.is_none()
        && e.rule.is_none()
    {
        return fail("expect", "the case expects nothing");
    }
    validate_expect(policy, e, rules).map_err(|(k, m)| (At::Case(k), m))?;
    if !case.undeclared {
        let names = (case.tool.iter().map(|n| ("tool", n)))
            .chain(case.tools.iter().flatten().map(|n| ("tools", n)))
            .chain(e.offered.iter().flatten().map(|n| ("offered", n)));
        for (key, n) in names {
            known_or_error(policy, key, n)?;
        }
    }
    Ok(())
}

/// A step: a known tool (unless the case is about undeclared names), an expectation, and a
/// `confirm` only where the policy has a confirmation field and the arguments are an object.
fn validate_step(
    policy: &Policy,
    case: &CaseSpec,
    step: &StepSpec,
    rules: &RulePositions,
) -> Result<(), (&'static str, String)> {
    let e = &step.expect;
    if e.intent.is_some() || e.offered.is_some() {
        return Err((
            "expect",
            "a step expects `decision`, `stage`, `rule` or `confirmation`; `intent` belongs to the case's `expect`"
                .to_string(),
        ));
    }
    if e.decision.is_none() && e.stage.is_none() && e.confirmation.is_none() && e.rule.is_none() {
        return Err(("expect", "the step expects nothing".to_string()));
    }
    validate_expect(policy, e, rules)?;
    if step.confirm {
        if policy.confirm_fields().next().is_none() {
            return Err((
                "confirm",
                "`confirm: true` sets a confirmation field, but the policy declares no `confirm fields`"
                    .to_string(),
            ));
        }
        if !step.args.is_object() {
            return Err((
                "confirm",
                "`confirm: true` needs `args` to be a mapping".to_string(),
            ));
        }
    }
    if !case.undeclared {
        if let Err((_, msg)) = known_or_error(policy, "tool", &step.tool) {
            return Err(("tool", msg));
        }
    }
    Ok(())
}

/// The values an `expect` names: a decision, a stage, an intent and a rule the policy knows.
fn validate_expect(
    policy: &Policy,
    e: &Expect,
    rules: &RulePositions,
) -> Result<(), (&'static str, String)> {
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
    if let Some(r) = &e.rule {
        rules.resolve(r).map_err(|m| ("rule", m))?;
    }
    Ok(())
}

fn known_or_error(policy: &Policy, key: &'static str, n: &str) -> Result<(), (At, String)> {
    if known_tool(policy, n) {
        return Ok(());
    }
    Err((
        At::Case(key),
        format!(
            "unknown tool `{n}`: neither declared nor matched by a pattern{} (a case about an undeclared name says `undeclared: true`)",
            did_you_mean(policy, n)
        ),
    ))
}

/// What one call found, for the case's expectations.
struct Observed {
    decision: Decision,
    stage: Option<Stage>,
    confirmation: bool,
    /// The deciding rule's location, as the policy prints it.
    rule: Option<String>,
}

/// Compares `observed` with `e`, pushing `what: expected X, got Y` (prefixed) per mismatch.
fn compare(
    e: &Expect,
    observed: &Observed,
    rules: &RulePositions,
    prefix: &str,
    failures: &mut Vec<String>,
) {
    let mut check = |what: &str, expected: &str, actual: &str| {
        if expected != actual {
            failures.push(format!("{prefix}{what}: expected {expected}, got {actual}"));
        }
    };
    if let Some(d) = &e.decision {
        check("decision", d, observed.decision.as_str());
    }
    if let Some(s) = &e.stage {
        check("stage", s, observed.stage.map_or("none", Stage::as_str));
    }
    if let Some(c) = e.confirmation {
        check(
            "confirmation",
            &c.to_string(),
            &observed.confirmation.to_string(),
        );
    }
    if let Some(r) = &e.rule {
        let want = rules.resolve(r).unwrap_or_default();
        let got = observed.rule.as_deref().unwrap_or("");
        if want != got {
            let got = if got.is_empty() {
                "none".to_string()
            } else {
                rules.shown(got)
            };
            failures.push(format!("{prefix}rule: expected {r}, got {got}"));
        }
    }
}

/// The session a case starts from: `None` without `session`, else one holding its labels.
/// `Err((key, message))` names a label the policy does not declare.
fn session_of(policy: &Policy, case: &CaseSpec) -> Result<Option<Session>, (&'static str, String)> {
    let Some(spec) = &case.session else {
        return Ok(None);
    };
    if let Some(l) = spec
        .labels
        .iter()
        .find(|l| !policy.labels().any(|d| d == l.as_str()))
    {
        let near = crate::check::suggest(l, policy.labels())
            .map(|c| format!("did you mean `{c}`? "))
            .unwrap_or_default();
        return Err((
            "labels",
            format!(
                "unknown label `{l}` in `session.labels`; {near}the policy declares {}",
                known(policy.labels())
            ),
        ));
    }
    let labels: Vec<&str> = spec.labels.iter().map(String::as_str).collect();
    Session::with_labels(policy, &labels, SESSION_SOURCE)
        .map(Some)
        .map_err(|e| ("labels", e.to_string()))
}

/// What put a case's `session.labels` on its session, as the reasons of stage `flow` name it.
const SESSION_SOURCE: &str = "session.labels";

/// The explain trace of `tool` on one line, within the session's labels when there is one.
fn trace_of(
    policy: &Policy,
    p: &Prepared,
    session: Option<&Session>,
    tool: &str,
) -> Option<String> {
    match session.filter(|s| !s.labels().is_empty()) {
        None => policy.explain(&p.request, &p.intent, tool),
        Some(s) => {
            let labels: Vec<&str> = s.labels().iter().map(|l| l.label.as_str()).collect();
            policy.explain_labels(&p.request, &p.intent, tool, &labels)
        }
    }
    .ok()
    .map(|t| t.summary())
}

/// Records that a decision was made in the request's mode with the session's labels, for the
/// coverage of `after` blocks.
fn saw_flow(policy: &Policy, p: &Prepared, session: Option<&Session>, seen: &mut Seen) {
    let Ok(b) = policy.bind(&p.request, &p.intent) else {
        return;
    };
    let mask = session.map_or(Ok(0), |s| s.mask_for(policy)).unwrap_or(0);
    if mask != 0 {
        seen.flow.insert((b.mode, mask));
    }
}

/// Runs one case; the argument rules that fired on its calls and the label sets its decisions
/// were made with are added to `seen`.
fn run_case(
    policy: &Policy,
    case: &CaseSpec,
    p: &Prepared,
    session: Option<&Session>,
    rules: &RulePositions,
    location: String,
    seen: &mut Seen,
) -> CaseResult {
    let e = &case.expect;
    let mut failures = Vec::new();
    if let Some(i) = &e.intent {
        if *i != p.intent.name {
            failures.push(format!("intent: expected {i}, got {}", p.intent.name));
        }
    }
    let mut trace = None;
    if let Some(tool) = &case.tool {
        saw_flow(policy, p, session, seen);
        let outcome = match (&case.args, session) {
            (Some(args), _) => match session {
                // A copy: the case's session is the same for every call it judges.
                Some(s) => {
                    policy.check_call_session(&p.request, &p.intent, &mut s.clone(), tool, args)
                }
                None => policy.check_call(&p.request, &p.intent, &mut Turn::new(), tool, args),
            }
            .map(|v| {
                seen.rules.extend(v.rules.iter().map(|r| r.source.clone()));
                Observed {
                    decision: v.decision,
                    stage: v.stage,
                    confirmation: v.pending.is_some(),
                    rule: v.source,
                }
            }),
            (None, Some(s)) => policy
                .bind_session(&p.request, &p.intent, s)
                .map(|b| b.decide(tool))
                .map(|d| observed_decision(policy, &d)),
            (None, None) => policy
                .decide_tool(&p.request, &p.intent, tool)
                .map(|d| observed_decision(policy, &d)),
        };
        match outcome {
            Err(err) => failures.push(format!("request: {err}")),
            Ok(observed) => compare(e, &observed, rules, "", &mut failures),
        }
        if !failures.is_empty() {
            trace = trace_of(policy, p, session, tool);
        }
    }
    if let Some(steps) = &case.steps {
        trace = run_steps(policy, steps, p, session, rules, &mut failures, seen);
    }
    if let Some(tools) = &case.tools {
        saw_flow(policy, p, session, seen);
        let names = tools.iter().map(String::as_str);
        let offer = match session {
            Some(s) => policy.offer_session(&p.request, &p.intent, s, names),
            None => policy.offer(&p.request, &p.intent, names),
        };
        match offer {
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
                                trace_of(policy, p, session, n).map(|t| format!("{n}: {t}"))
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

/// What a decision of stages 1–7 (and `flow`, within a session) found.
fn observed_decision(policy: &Policy, d: &crate::decision::ToolDecision) -> Observed {
    Observed {
        decision: d.decision,
        stage: d.stage,
        confirmation: d.decision == Decision::Confirm,
        rule: policy.rule_source(d.rule).map(|l| l.to_string()),
    }
}

/// Runs the steps of a case in order through one [`Session`] (the case's, or a new one; see
/// the module docs); returns the explain trace of the first step that failed.
fn run_steps(
    policy: &Policy,
    steps: &[StepSpec],
    p: &Prepared,
    start: Option<&Session>,
    rules: &RulePositions,
    failures: &mut Vec<String>,
    seen: &mut Seen,
) -> Option<String> {
    let mut session = start.cloned().unwrap_or_default();
    let mut trace = None;
    for (i, step) in steps.iter().enumerate() {
        let prefix = format!("step {} (`{}`): ", i + 1, step.tool);
        let mut args = step.args.clone();
        if step.confirm {
            if let (Value::Object(obj), Some(field)) = (&mut args, policy.confirm_fields().next()) {
                obj.insert(field.to_string(), Value::Bool(true));
            }
        }
        saw_flow(policy, p, Some(&session), seen);
        // The trace of a failed step is taken with the labels the step was judged with.
        let before_call = session.clone();
        let before = failures.len();
        match policy.check_call_session(&p.request, &p.intent, &mut session, &step.tool, &args) {
            Err(err) => failures.push(format!("{prefix}request: {err}")),
            Ok(v) => {
                seen.rules.extend(v.rules.iter().map(|r| r.source.clone()));
                let observed = Observed {
                    decision: v.decision,
                    stage: v.stage,
                    confirmation: v.pending.is_some(),
                    rule: v.source.clone(),
                };
                compare(&step.expect, &observed, rules, &prefix, failures);
            }
        }
        if failures.len() > before && trace.is_none() {
            trace = trace_of(policy, p, Some(&before_call), &step.tool)
                .map(|t| format!("step {}: {t}", i + 1));
        }
    }
    trace
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
    let mut rules: Vec<_> = t
        .arg_rules
        .iter()
        .filter_map(|r| Some((policy.rule_span(r.rule)?, r)))
        .collect();
    rules.sort_by_key(|(span, _)| (span.file, span.start));
    cov.rules = rules
        .into_iter()
        .filter_map(|(_, r)| {
            let at = policy.rule_source(r.rule)?.to_string();
            (!seen.rules.contains(&at)).then(|| format!("{at} {}", r.text))
        })
        .collect();
    cov.after_blocks = t.afters.len();
    cov.afters = t
        .afters
        .iter()
        .filter(|a| !seen.flow.iter().any(|&(m, l)| a.applies(m, l)))
        .map(|a| after_entry(policy, a))
        .collect();
    cov
}

/// One `after` block as coverage lists it: `after L1, L2` (` in mode M` for a mode's block),
/// then each line and argument rule as `file:line:col text`, separated by ` · `.
fn after_entry(policy: &Policy, a: &crate::compile::AfterRow) -> String {
    let t = policy.tables();
    let mut head = policy.after_head(a.labels);
    if let Some(m) = a.mode.and_then(|m| t.modes.get(usize::from(m))) {
        head.push_str(&format!(" in mode {}", m.name));
    }
    let mut lines: Vec<String> = a
        .lines
        .iter()
        .filter_map(|&(_, _, rule)| {
            let at = policy.rule_source(rule)?;
            Some(format!("{at} {}", policy.rule_text(rule).trim()))
        })
        .collect();
    let (from, to) = (a.arg_rules.start as usize, a.arg_rules.end as usize);
    lines.extend(
        t.arg_rules
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .filter_map(|r| Some(format!("{} {}", policy.rule_source(r.rule)?, r.text))),
    );
    if lines.is_empty() {
        head
    } else {
        format!("{head}: {}", lines.join(" · "))
    }
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
