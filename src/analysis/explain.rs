//! The stage-by-stage trace of one `offer` decision: every stage (DESIGN.md, "Semantics of
//! offer"), whether it passed, failed or was not reached, and the rules it consulted.
//!
//! The trace is computed stage by stage on its own (it does not copy the answer of
//! [`Policy::decide_tool`]); the test suite checks that both agree for every tool of the
//! reference policies.

use serde::Serialize;

use super::RuleRef;
use crate::classify::Intent;
use crate::decision::{Decision, FiredRule, RuleId, Stage, ToolMatch};
use crate::eval::{Request, RequestError, SessionError};
use crate::policy::Policy;
use crate::syntax::ast::{RuleOutcome, Span};

/// What one stage did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepResult {
    /// The stage let the tool through.
    Pass,
    /// The stage denied the tool; later stages were not reached.
    Fail,
    /// The stage asks for confirmation ([`Stage::Confirmation`], or [`Stage::Flow`] with
    /// labels).
    Confirm,
    /// The stage did not run: an earlier stage failed.
    Skip,
}

impl StepResult {
    /// `pass`, `fail`, `confirm` or `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepResult::Pass => "pass",
            StepResult::Fail => "fail",
            StepResult::Confirm => "confirm",
            StepResult::Skip => "skip",
        }
    }
}

/// One stage of a [`Trace`].
#[derive(Clone, Debug, Serialize)]
pub struct TraceStep {
    /// The stage.
    pub stage: Stage,
    /// What it did.
    pub result: StepResult,
    /// Why, in one phrase.
    pub detail: String,
    /// The rules of the policy text the stage consulted (possibly none, e.g. a stage that does
    /// not apply to the tool), then the `roles` and `implies` lines of [`TraceStep::grants`].
    pub rules: Vec<RuleRef>,
    /// How a role or permission the stage needed was granted through the policy's `roles`
    /// inclusions or `implies` implications rather than held directly, one sentence each:
    /// ``role `viewer` granted through `roles { admin > accountant > viewer }` at f.warden:9:9``.
    pub grants: Vec<String>,
}

/// The stage-by-stage trace of one tool's `offer` decision (stages 1–7, then confirmation).
#[derive(Clone, Debug, Serialize)]
pub struct Trace {
    /// The tool name.
    pub tool: String,
    /// The mode the request resolved to.
    pub mode: String,
    /// The intents that gated the tool.
    pub intents: Vec<String>,
    /// What the name resolved to: `tool`, `pattern "<glob>"`, `defaults` or `unknown`.
    pub matched: String,
    /// The tool's effect, when the name resolved to one.
    pub effect: Option<String>,
    /// Every stage in evaluation order, then [`Stage::Flow`] (only with labels, see
    /// [`Policy::explain_labels`]) and [`Stage::Confirmation`].
    pub steps: Vec<TraceStep>,
    /// The final decision.
    pub decision: Decision,
    /// The stage that denied, or [`Stage::Confirmation`] for a confirm; `None` for an allow.
    pub stage: Option<Stage>,
    /// With labels ([`Policy::explain_labels`]): every `after` block of the request's mode
    /// (the top-level ones and the mode's own), whether it applies to the labels and what it
    /// does to the tool. Empty (and left out of the JSON) without labels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after_blocks: Vec<AfterBlock>,
}

/// One `after` block as explain lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AfterBlock {
    /// `after untrusted, private`.
    pub head: String,
    /// The mode whose block it is; `None` for a top-level block.
    pub mode: Option<String>,
    /// Whether every label it names is on the session.
    pub applies: bool,
    /// The labels it names that are not on the session, in declaration order.
    pub missing: Vec<String>,
    /// What it does to the tool's effect: `deny`, `confirm`, or `none`; `none` for a name
    /// without an effect.
    pub effect: &'static str,
    /// Its lines (`confirm EFFECTS`, `deny EFFECTS`) and argument rules, each as
    /// `file:line:col: text`.
    pub lines: Vec<String>,
}

impl Trace {
    /// Renders the trace like compiler notes: one line per stage (`N stage result detail`),
    /// each consulted rule as `--> file:line:col` with its source line and a caret, then the
    /// decision.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let intents = if self.intents.iter().all(String::is_empty) {
            "(none)".to_string()
        } else {
            self.intents.join(", ")
        };
        out.push_str(&format!(
            "explain `{}` ({}{}) in mode `{}`, intent {}\n",
            self.tool,
            self.matched,
            self.effect
                .as_ref()
                .map(|e| format!(", effect {e}"))
                .unwrap_or_default(),
            self.mode,
            intents
        ));
        for step in &self.steps {
            let number = if matches!(step.stage, Stage::Confirmation | Stage::Flow) {
                "-".to_string()
            } else {
                step.stage.number().to_string()
            };
            out.push_str(&format!(
                "{:>3} {:<12} {:<7} {}\n",
                number,
                step.stage.as_str(),
                step.result.as_str(),
                step.detail
            ));
            for grant in &step.grants {
                out.push_str(&format!("      {grant}\n"));
            }
            for rule in &step.rules {
                out.push_str(&rule.note("      "));
            }
        }
        if !self.after_blocks.is_empty() {
            out.push_str("after blocks:\n");
        }
        for a in &self.after_blocks {
            let mode = a
                .mode
                .as_ref()
                .map(|m| format!(" (mode {m})"))
                .unwrap_or_default();
            let what = match (a.applies, a.effect) {
                (false, _) => format!("waits for {}", a.missing.join(", ")),
                (true, "deny") => "applies: denies the tool's effect".to_string(),
                (true, "confirm") => "applies: the tool's effect needs confirmation".to_string(),
                (true, _) => "applies: leaves the tool's effect alone".to_string(),
            };
            out.push_str(&format!("  {}{mode}: {what}\n", a.head));
            for l in &a.lines {
                out.push_str(&format!("      {l}\n"));
            }
        }
        out.push_str(&format!("decision: {}", self.decision));
        if let Some(stage) = self.stage {
            out.push_str(&format!(" (stage {stage})"));
        }
        out.push('\n');
        out
    }

    /// The trace on one line per stage, without source notes: `stage=result` pairs up to the
    /// deciding stage, for test failure reports.
    pub fn summary(&self) -> String {
        self.steps
            .iter()
            .filter(|s| s.result != StepResult::Skip)
            .map(|s| {
                let rule = s
                    .rules
                    .first()
                    .map(|r| format!(" @{}", r.location))
                    .unwrap_or_default();
                format!("{}={}{rule}", s.stage, s.result.as_str())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One link of a grant: the edge's span and the text it stands for (`a > b`, or
/// `permission "a" implies "b"`).
struct Link {
    span: Span,
    from: String,
    to: String,
}

/// Breadth-first search over `edges` (`(from, to, span)`) from every node of `held`: for each
/// node of `0..n`, the edge that first reached it (`None` for a held or unreached node) and its
/// distance from `held` (`usize::MAX` when unreached). Linear in nodes and edges.
fn reach(
    edges: &[(usize, usize, Span)],
    n: usize,
    held: &[usize],
) -> (Vec<Option<usize>>, Vec<usize>) {
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, (from, to, _)) in edges.iter().enumerate() {
        if *from < n && *to < n {
            out[*from].push(i);
        }
    }
    let mut via: Vec<Option<usize>> = vec![None; n];
    let mut dist = vec![usize::MAX; n];
    let mut queue = std::collections::VecDeque::new();
    for &h in held.iter().filter(|&&h| h < n) {
        if dist[h] == usize::MAX {
            dist[h] = 0;
            queue.push_back(h);
        }
    }
    while let Some(node) = queue.pop_front() {
        for &e in &out[node] {
            let next = edges[e].1;
            if dist[next] == usize::MAX {
                dist[next] = dist[node] + 1;
                via[next] = Some(e);
                queue.push_back(next);
            }
        }
    }
    (via, dist)
}

/// The edges from a held node to `target` along the search tree of [`reach`], first edge
/// first; empty when `target` is held or unreached.
fn path_to(edges: &[(usize, usize, Span)], via: &[Option<usize>], target: usize) -> Vec<usize> {
    let mut path = Vec::new();
    let mut at = target;
    while let Some(e) = via.get(at).copied().flatten() {
        path.push(e);
        at = edges[e].0;
    }
    path.reverse();
    path
}

/// Renders a grant of `what` through `links`, grouping consecutive links written on one source
/// line into one citation (`roles { a > b > c }` at its location) when `chained`; returns the
/// sentence and the cited rules.
fn grant(policy: &Policy, what: &str, links: &[Link], chained: bool) -> (String, Vec<RuleRef>) {
    let sources = policy.sources();
    let mut groups: Vec<Vec<&Link>> = Vec::new();
    for link in links {
        let here = sources.location(link.span);
        let joins = chained
            && groups.last().and_then(|g| g.last()).is_some_and(|prev| {
                let there = sources.location(prev.span);
                there.file == here.file && there.line == here.line
            });
        match groups.last_mut() {
            Some(g) if joins => g.push(link),
            _ => groups.push(vec![link]),
        }
    }
    let mut cited = Vec::new();
    let mut rules = Vec::new();
    for g in &groups {
        let (first, last) = (g[0], g[g.len() - 1]);
        let text = if chained {
            let mut names = vec![first.from.clone()];
            names.extend(g.iter().map(|l| l.to.clone()));
            format!("`roles {{ {} }}`", names.join(" > "))
        } else {
            format!("`permission \"{}\" implies \"{}\"`", first.from, first.to)
        };
        let span = if first.span.file == last.span.file {
            first.span.to(last.span)
        } else {
            first.span
        };
        cited.push(format!("{text} at {}", sources.location(span)));
        rules.extend(RuleRef::at(policy, span));
    }
    (
        format!("{what} granted through {}", cited.join(" and ")),
        rules,
    )
}

/// How a request holding the roles `held` (indexes) reaches one of `accepted` through the
/// `roles` inclusions: the accepted role nearest to a held one (the first declared among
/// equals), or `None` when it holds one directly or reaches none.
fn role_grant(
    policy: &Policy,
    held: &[usize],
    accepted: impl Iterator<Item = usize>,
) -> Option<(String, Vec<RuleRef>)> {
    let t = policy.tables();
    let edges = &policy.relations().role_edges;
    let (via, dist) = reach(edges, t.roles.len(), held);
    let target = accepted
        .filter(|&r| dist.get(r).is_some_and(|&d| d != usize::MAX))
        .min_by_key(|&r| (dist[r], r))?;
    if dist[target] == 0 {
        return None;
    }
    let links: Vec<Link> = path_to(edges, &via, target)
        .iter()
        .map(|&e| Link {
            span: edges[e].2,
            from: t.roles[edges[e].0].to_string(),
            to: t.roles[edges[e].1].to_string(),
        })
        .collect();
    Some(grant(
        policy,
        &format!("role `{}`", t.roles[target]),
        &links,
        true,
    ))
}

/// How a request holding the permissions `held` (indexes) reaches each of `needed` it does not
/// hold directly, through `implies`: one grant per such permission, in `needed` order.
fn permission_grants(
    policy: &Policy,
    held: &[usize],
    needed: impl Iterator<Item = usize>,
) -> Vec<(String, Vec<RuleRef>)> {
    let t = policy.tables();
    let edges = &policy.relations().implies;
    let (via, dist) = reach(edges, t.permissions.len(), held);
    needed
        .filter(|&p| dist.get(p).is_some_and(|&d| d != 0 && d != usize::MAX))
        .map(|p| {
            let links: Vec<Link> = path_to(edges, &via, p)
                .iter()
                .map(|&e| Link {
                    span: edges[e].2,
                    from: t.permissions[edges[e].0].to_string(),
                    to: t.permissions[edges[e].1].to_string(),
                })
                .collect();
            grant(
                policy,
                &format!("permission `{}`", t.permissions[p]),
                &links,
                false,
            )
        })
        .collect()
}

fn names(list: &[Box<str>], set: impl Iterator<Item = usize>) -> String {
    set.filter_map(|i| list.get(i))
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Policy {
    /// Explains how `tool` is decided for `request` and `intent`: every stage of `offer` in
    /// order, with its result and the policy rules it consulted. The final decision equals
    /// [`Policy::decide_tool`]'s.
    ///
    /// # Errors
    ///
    /// [`RequestError`] when the request names a mode, tier or intent the policy does not
    /// declare.
    pub fn explain(
        &self,
        request: &Request,
        intent: &Intent,
        tool: &str,
    ) -> Result<Trace, RequestError> {
        self.explain_inner(request, intent, tool, None)
    }

    /// [`Policy::explain`] for a session holding the flow labels `labels`: the trace has a
    /// stage `flow` before confirmation, which shows the `after` blocks that apply and what
    /// they do to the tool's effect. The final decision equals that of
    /// [`Policy::offer_session`] for a session with these labels.
    ///
    /// # Errors
    ///
    /// As [`Policy::explain`], and [`RequestError::Session`] for a label the policy does not
    /// declare.
    pub fn explain_labels(
        &self,
        request: &Request,
        intent: &Intent,
        tool: &str,
        labels: &[&str],
    ) -> Result<Trace, RequestError> {
        let declared = &self.tables().labels;
        let mut mask = 0u8;
        for l in labels {
            match declared.iter().position(|d| **d == **l) {
                Some(i) => mask |= 1u8 << i,
                None => {
                    return Err(RequestError::Session(SessionError::UndeclaredLabel {
                        label: l.to_string(),
                        known: if declared.is_empty() {
                            "none".to_string()
                        } else {
                            names(declared, 0..declared.len())
                        },
                    }))
                }
            }
        }
        self.explain_inner(request, intent, tool, Some(mask))
    }

    /// The trace, with a `flow` step for the label mask `labels` when given.
    fn explain_inner(
        &self,
        request: &Request,
        intent: &Intent,
        tool: &str,
        labels: Option<u8>,
    ) -> Result<Trace, RequestError> {
        let b = self.bind(request, intent)?;
        let t = self.tables();
        let rr = |rule: RuleId| RuleRef::of(self, rule).into_iter().collect::<Vec<_>>();
        let mode = &t.modes[b.mode];
        let (matched, row) = self.resolve_tool(tool);
        let mut trace = Trace {
            tool: tool.to_string(),
            mode: mode.name.to_string(),
            intents: intent.intents.iter().map(|s| s.to_string()).collect(),
            matched: match matched {
                ToolMatch::Declared(_) => "tool".to_string(),
                ToolMatch::Pattern(i) => {
                    let glob = t
                        .patterns
                        .iter()
                        .find(|p| p.source_index == i)
                        .map_or("", |p| &*p.glob);
                    format!("pattern \"{glob}\"")
                }
                ToolMatch::Defaults => "defaults".to_string(),
                ToolMatch::Unknown => "unknown".to_string(),
            },
            effect: row.map(|r| t.effects[r.effect as usize].to_string()),
            steps: Vec::new(),
            decision: Decision::Allow,
            stage: None,
            after_blocks: match labels {
                Some(labels) => {
                    self.after_blocks(b.mode, labels, row.map(|r| 1u64 << r.effect.min(63)))
                }
                None => Vec::new(),
            },
        };
        let mut failed = false;
        let mut push = |trace: &mut Trace, stage, ok: Option<bool>, detail: String, rules| {
            let result = if failed {
                StepResult::Skip
            } else {
                match ok {
                    Some(true) | None => StepResult::Pass,
                    Some(false) => {
                        failed = true;
                        trace.decision = Decision::Deny;
                        trace.stage = Some(stage);
                        StepResult::Fail
                    }
                }
            };
            let (detail, rules) = if result == StepResult::Skip {
                ("not reached".to_string(), Vec::new())
            } else {
                (detail, rules)
            };
            trace.steps.push(TraceStep {
                stage,
                result,
                detail,
                rules,
                grants: Vec::new(),
            });
        };
        // Adds grants to the step just pushed, unless it was not reached.
        let add_grants = |trace: &mut Trace, grants: Vec<(String, Vec<RuleRef>)>| {
            if let Some(step) = trace.steps.last_mut() {
                if step.result != StepResult::Skip {
                    for (sentence, rules) in grants {
                        step.grants.push(sentence);
                        for r in rules {
                            if !step.rules.contains(&r) {
                                step.rules.push(r);
                            }
                        }
                    }
                }
            }
        };
        let held_roles: Vec<usize> = request
            .role_names()
            .iter()
            .filter_map(|r| t.role_index.get(r.as_str()).map(|&i| i as usize))
            .collect();
        let held_perms: Vec<usize> = request
            .permission_names()
            .iter()
            .filter_map(|p| t.perm_index.get(p.as_str()).map(|&i| i as usize))
            .collect();

        // 1. identity
        match row {
            None => push(
                &mut trace,
                Stage::Identity,
                Some(false),
                "not declared, matched by no pattern, and unknown tools are denied".to_string(),
                rr(t.rule_unknown),
            ),
            Some(r) if !r.enabled => push(
                &mut trace,
                Stage::Identity,
                Some(false),
                "disabled (`enabled false`)".to_string(),
                rr(r.rule_disabled),
            ),
            Some(r) => {
                let matched_text = trace.matched.clone();
                push(
                    &mut trace,
                    Stage::Identity,
                    Some(true),
                    match matched {
                        ToolMatch::Defaults => {
                            "not declared; `unknown allow` gives it the `defaults`".to_string()
                        }
                        _ => format!("{matched_text} `{tool}`"),
                    },
                    rr(r.rule_decl),
                )
            }
        }
        let row = row.cloned().unwrap_or_else(|| crate::compile::ToolRow {
            effect: 0,
            roles: None,
            perms: crate::compile::BitSet::new(0),
            tenant_required: false,
            requires: Box::new([]),
            confirm_always: false,
            enabled: false,
            rule_decl: t.rule_unknown,
            rule_disabled: t.rule_unknown,
            rule_tenant: t.rule_unknown,
            rule_roles: t.rule_unknown,
            rule_perms: t.rule_unknown,
            rule_confirm: t.rule_unknown,
            rule_requires: t.rule_unknown,
            server: crate::compile::NO_SERVER,
            arg_rules: 0..0,
            taints: 0,
        });

        // 2. connector
        match (b.allowlist, self.connector_server(tool)) {
            (Some((tier, servers)), Some(server)) => {
                let ok = servers.iter().any(|s| s == server);
                let list = if servers.is_empty() {
                    "[] (zero connectors)".to_string()
                } else {
                    servers.join(", ")
                };
                push(
                    &mut trace,
                    Stage::Connector,
                    Some(ok),
                    format!(
                        "server `{server}` {} the {} allowlist: {list}",
                        if ok { "is in" } else { "is not in" },
                        t.tiers[tier]
                    ),
                    rr(t.rule_tiers),
                );
            }
            (None, Some(server)) => push(
                &mut trace,
                Stage::Connector,
                None,
                format!("server `{server}`: the request sets no allowlist (unrestricted)"),
                rr(t.rule_tiers),
            ),
            (_, None) => push(
                &mut trace,
                Stage::Connector,
                None,
                "not an `<prefix><server>__<tool>` name: not gated".to_string(),
                Vec::new(),
            ),
        }

        // 3. tenant
        if row.tenant_required {
            let ok = b.tenant.is_some();
            push(
                &mut trace,
                Stage::Tenant,
                Some(ok),
                match b.tenant {
                    Some(tn) => format!("`tenant required`; the request's tenant is `{tn}`"),
                    None => "`tenant required` and the request has no tenant".to_string(),
                },
                rr(row.rule_tenant),
            );
        } else {
            push(
                &mut trace,
                Stage::Tenant,
                None,
                "no tenant required".to_string(),
                Vec::new(),
            );
        }

        // 4. role
        match &row.roles {
            Some(roles) => {
                let ok = roles.intersects(&b.roles);
                let held = names(&t.roles, b.roles.iter());
                push(
                    &mut trace,
                    Stage::Role,
                    Some(ok),
                    format!(
                        "needs one of {}; the request holds {}",
                        names(&t.roles, roles.iter()),
                        if held.is_empty() {
                            "no declared role".to_string()
                        } else {
                            format!("{held} (closed under inclusion)")
                        }
                    ),
                    rr(row.rule_roles),
                );
                if ok {
                    let grants = role_grant(self, &held_roles, roles.iter())
                        .into_iter()
                        .collect();
                    add_grants(&mut trace, grants);
                }
            }
            None => push(
                &mut trace,
                Stage::Role,
                None,
                "no role restriction".to_string(),
                Vec::new(),
            ),
        }

        // 5. permission
        if row.perms.is_empty() {
            push(
                &mut trace,
                Stage::Permission,
                None,
                "no permission required".to_string(),
                Vec::new(),
            );
        } else {
            let ok = row.perms.is_subset(&b.perms);
            let missing: Vec<usize> = row
                .perms
                .iter()
                .filter(|&p| !b.perms.iter().any(|q| q == p))
                .collect();
            let detail = if ok {
                format!(
                    "needs {}; held (closed under `implies`)",
                    names(&t.permissions, row.perms.iter())
                )
            } else {
                format!(
                    "needs {}; missing {}",
                    names(&t.permissions, row.perms.iter()),
                    names(&t.permissions, missing.into_iter())
                )
            };
            push(
                &mut trace,
                Stage::Permission,
                Some(ok),
                detail,
                rr(row.rule_perms),
            );
            let grants = permission_grants(self, &held_perms, row.perms.iter());
            add_grants(&mut trace, grants);
        }

        // 6. mode ceiling
        let bit = 1u64 << row.effect.min(63);
        let effect = t.effects.get(row.effect as usize).map_or("?", |e| &**e);
        let ok = mode.restrict & bit != 0;
        push(
            &mut trace,
            Stage::Mode,
            Some(ok),
            if ok {
                format!("mode `{}` allows effect `{effect}`", mode.name)
            } else {
                format!(
                    "mode `{}` restricts effects to {}",
                    mode.name,
                    names(
                        &t.effects,
                        (0..t.effects.len()).filter(|&e| mode.restrict & (1u64 << e.min(63)) != 0)
                    )
                )
            },
            // Without a `restrict` ceiling the mode allows every effect: cite the mode itself
            // (the `rule_no_matrix` rule's span is the mode's name).
            if self.rule_span(mode.rule_restrict).is_some() {
                rr(mode.rule_restrict)
            } else {
                rr(mode.rule_no_matrix)
            },
        );

        // 7. intent
        let forced = b.forced.iter().any(|f| f == tool);
        match mode.matrix {
            None => push(
                &mut trace,
                Stage::Intent,
                None,
                format!("mode `{}` uses no matrix: not gated by intent", mode.name),
                rr(mode.rule_no_matrix),
            ),
            Some(m) => {
                let cell_ok = b.allow_mask & bit != 0;
                let matrix = &t.matrix_names[m as usize];
                let detail = match (cell_ok, forced) {
                    (true, _) => format!("matrix `{matrix}` offers effect `{effect}` for this intent"),
                    (false, true) => format!(
                        "matrix `{matrix}` denies effect `{effect}` for this intent, but the tool is forced"
                    ),
                    (false, false) => {
                        format!("matrix `{matrix}` denies effect `{effect}` for this intent")
                    }
                };
                push(
                    &mut trace,
                    Stage::Intent,
                    Some(cell_ok || forced),
                    detail,
                    rr(self.cell_rule(&b, row.effect)),
                );
            }
        }

        // Flow, with labels: the `after` blocks that apply.
        let mut flow_confirm = None;
        if let Some(labels) = labels {
            let applying: Vec<String> = t
                .afters
                .iter()
                .filter(|a| a.applies(b.mode, labels))
                .map(|a| format!("`{}`", self.after_head(a.labels)))
                .collect();
            let masks = t.flow_masks(b.mode, labels);
            if trace.decision == Decision::Deny {
                push(&mut trace, Stage::Flow, None, String::new(), Vec::new());
            } else if labels != 0 && masks.deny & bit != 0 {
                let rule = self.flow_rule(b.mode, labels, bit, RuleOutcome::Deny);
                let head = self.after_head(self.after_of(rule));
                push(
                    &mut trace,
                    Stage::Flow,
                    Some(false),
                    format!("`{head}` denies effect `{effect}`"),
                    rr(rule),
                );
            } else if labels != 0 && masks.confirm & bit != 0 {
                let rule = self.flow_rule(b.mode, labels, bit, RuleOutcome::Confirm);
                let head = self.after_head(self.after_of(rule));
                flow_confirm = Some(rule);
                trace.steps.push(TraceStep {
                    stage: Stage::Flow,
                    result: StepResult::Confirm,
                    detail: format!("`{head}` confirms effect `{effect}`"),
                    rules: rr(rule),
                    grants: Vec::new(),
                });
            } else {
                let detail = if applying.is_empty() {
                    "no `after` block applies to these labels".to_string()
                } else {
                    format!(
                        "{} neither deny nor confirm effect `{effect}`",
                        applying.join(", ")
                    )
                };
                push(&mut trace, Stage::Flow, Some(true), detail, Vec::new());
            }
        }

        // Confirmation.
        if trace.decision == Decision::Deny {
            push(
                &mut trace,
                Stage::Confirmation,
                None,
                String::new(),
                Vec::new(),
            );
        } else {
            let (detail, rule) = if b.allow_mask & bit == 0 {
                // Forced past a denying cell: exempt from hiding, not from asking.
                (
                    format!(
                        "`{tool}` is forced past a denying cell, so its calls need confirmation"
                    ),
                    Some(self.cell_rule(&b, row.effect)),
                )
            } else if b.confirm_mask & bit != 0 {
                (
                    format!("the matrix cell for effect `{effect}` is `confirm`"),
                    Some(self.cell_rule(&b, row.effect)),
                )
            } else if mode.confirm & bit != 0 {
                (
                    format!("mode `{}` confirms effect `{effect}`", mode.name),
                    Some(mode.rule_confirm),
                )
            } else if row.confirm_always {
                (
                    "the tool says `confirm always`".to_string(),
                    Some(row.rule_confirm),
                )
            } else {
                ("no confirmation needed".to_string(), None)
            };
            let result = if rule.is_some() {
                trace.decision = Decision::Confirm;
                trace.stage = Some(Stage::Confirmation);
                StepResult::Confirm
            } else {
                if flow_confirm.is_some() {
                    trace.decision = Decision::Confirm;
                    trace.stage = Some(Stage::Flow);
                }
                StepResult::Pass
            };
            trace.steps.push(TraceStep {
                stage: Stage::Confirmation,
                result,
                detail,
                rules: rule.map(rr).unwrap_or_default(),
                grants: Vec::new(),
            });
        }
        Ok(trace)
    }
}

impl Policy {
    /// The `after` blocks of mode `mode` (top-level ones first), each with whether it applies
    /// to the label mask `labels` and what it does to the effect `bit` (`None`: no effect).
    fn after_blocks(&self, mode: usize, labels: u8, bit: Option<u64>) -> Vec<AfterBlock> {
        let t = self.tables();
        t.afters
            .iter()
            .filter(|a| a.mode.is_none_or(|m| usize::from(m) == mode))
            .map(|a| {
                let hits = |outcome: RuleOutcome| {
                    bit.is_some_and(|bit| {
                        a.lines
                            .iter()
                            .any(|(o, effects, _)| *o == outcome && effects & bit != 0)
                    })
                };
                let effect = if hits(RuleOutcome::Deny) {
                    "deny"
                } else if hits(RuleOutcome::Confirm) {
                    "confirm"
                } else {
                    "none"
                };
                let mut lines: Vec<String> = a
                    .lines
                    .iter()
                    .filter_map(|&(_, _, rule)| {
                        Some(format!(
                            "{}: {}",
                            self.rule_source(rule)?,
                            self.rule_text(rule).trim()
                        ))
                    })
                    .collect();
                let (from, to) = (a.arg_rules.start as usize, a.arg_rules.end as usize);
                lines.extend(
                    t.arg_rules
                        .get(from..to)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|r| Some(format!("{}: {}", self.rule_source(r.rule)?, r.text))),
                );
                let missing = a.labels & !labels;
                AfterBlock {
                    head: self.after_head(a.labels),
                    mode: a
                        .mode
                        .and_then(|m| t.modes.get(usize::from(m)))
                        .map(|m| m.name.to_string()),
                    applies: missing == 0,
                    missing: (0..t.labels.len())
                        .filter(|i| missing & (1u8 << i) != 0)
                        .map(|i| t.labels[i].to_string())
                        .collect(),
                    effect,
                    lines,
                }
            })
            .collect()
    }
}

/// One argument rule that applies to a tool, as `explain --args` shows it: where it is, its
/// canonical text, and whether it fired on the arguments given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleCheck {
    /// `file:line:col` of the rule.
    pub source: String,
    /// The rule as written in the policy.
    pub text: String,
    /// What fired it, when it fired; `None` when it stayed silent.
    pub fired: Option<FiredRule>,
}

impl Policy {
    /// Every argument rule that applies to `tool` (its own, then those of the `rules` and
    /// `defaults` blocks), each evaluated on `args` with the confirmation fields removed, as
    /// stage `arguments` of `check_call` evaluates them.
    ///
    /// # Errors
    ///
    /// [`RequestError::UnknownContext`] when the request supplies a `context` set the policy
    /// does not declare.
    pub fn explain_rules(
        &self,
        request: &Request,
        intent: &Intent,
        tool: &str,
        args: &serde_json::Value,
    ) -> Result<Vec<RuleCheck>, RequestError> {
        let (_, row) = self.resolve_tool(tool);
        let args = self.strip_confirmation(args);
        let mut out = Vec::new();
        self.each_argument_rule(request, intent, row, &args, |rule, fired| {
            out.push(RuleCheck {
                source: self
                    .rule_source(rule)
                    .map_or_else(String::new, |l| l.to_string()),
                text: self.rule_text(rule).to_string(),
                fired,
            });
        })?;
        Ok(out)
    }
}
