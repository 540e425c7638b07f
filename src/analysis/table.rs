//! The complete decision table of a policy: every declared tool, every pattern and the
//! undeclared-name row, × every mode × every intent, with the `offer` decision and the request
//! conditions under which it holds.
//!
//! Stages 1 (identity), 6 (mode ceiling), 7 (intent cell) and the confirmation rules do not
//! depend on the request once the mode and the intent are fixed; stages 2–5 do, and appear as
//! conditions:
//!
//! - `connector S`: the request's resolved allowlist (seed 000) is unrestricted or holds server
//!   `S` (`connector *`: the name's own server, for a pattern or an undeclared name);
//! - `tenant`: the request has a tenant;
//! - `role a|b`: the request holds one of these roles, directly or by inclusion (the list is
//!   already closed: every role whose closure reaches a role the tool accepts);
//! - `permission p|q`: the request holds `p` or a permission implying it (one group per required
//!   permission; all groups must hold).
//!
//! When every condition holds the decision is the cell's; when one fails the tool is denied at
//! that condition's stage. A cell denied at stage `intent` also gives the decision for a
//! *forced* name (seed 001's `force_tool_names`), under the same conditions.
//!
//! Each cell is for one intent. Under `combine union` a query with several intents is offered
//! an effect when any of its intents' cells offers it (the union of the cells).
//!
//! Argument rules (`deny when ...`, `confirm when ...`) judge a call's arguments, which `offer`
//! never sees: a cell of a tool that has argument rules (its own, or those of the `rules` and
//! `defaults` blocks, which apply to every tool) is marked `allow*` / `confirm*`, since the
//! rules can still deny a call or ask for confirmation. Each row lists its own rules in their
//! canonical text (as `toolwarden fmt` prints them), and the table lists the rules for every
//! tool once, in its header.
//!
//! Flow labels: a session's labels turn on the `after` blocks that name them (stage `flow`),
//! so with k declared labels there are 2^k tables, one per label set (k is at most 8). The
//! table ([`Table::build`]) is the one for a session without labels; [`Table::label_sets`]
//! then holds, for each non-empty set (by mask: the first label alone, the second alone, both,
//! ...), only the cells that differ from it, so the output stays small.
//! [`Table::build_for_labels`] builds the whole table for exactly one set. A cell an `after`
//! block tightened names the block ([`Outcome::after`], `[after untrusted]` in text): a block
//! that denies the effect denies the cell at stage `flow` (a forced name's decision too), one
//! that confirms it turns an `allow` into a `confirm` at stage `flow`, and one with argument
//! rules stars the cell. Each row lists what its tool `taints`. The CSV layout of a policy with
//! labels has two more columns, `labels` (`a|b`, empty for the table without labels) and
//! `after`; the JSON layout has `labels`, each row's `taints` and `label_sets`.
//!
//! Rows are sorted (tools by name, then patterns by glob, then the undeclared-name row), modes
//! keep declaration order and intents priority order, so the text, JSON and CSV layouts are
//! stable across runs and platforms and can be committed and reviewed as a diff. Source
//! locations are left out of the text and CSV layouts on purpose: moving a rule does not change
//! them. The JSON layout gives each argument rule's `file:line:col` (`source`), so a tool can
//! point at it.

use serde::Serialize;

use crate::compile::ToolRow;
use crate::decision::{Decision, RuleId, Stage};
use crate::eval::RequestError;
use crate::policy::Policy;
use crate::syntax::ast::RuleOutcome;

/// What a table row stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SubjectKind {
    /// A declared `tool`.
    Tool,
    /// A `match` pattern.
    Pattern,
    /// Any name neither declared nor matched by a pattern.
    Unknown,
}

impl SubjectKind {
    /// `tool`, `pattern` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectKind::Tool => "tool",
            SubjectKind::Pattern => "pattern",
            SubjectKind::Unknown => "unknown",
        }
    }
}

/// The request conditions under which a cell's decision holds (all of them must hold).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Conditions {
    /// The connector server that must be allowed (`"*"`: the name's own server), when the
    /// name is gated by the connector stage.
    pub connector: Option<String>,
    /// Whether the request must carry a tenant.
    pub tenant: bool,
    /// Roles of which the request must hold one (closed under inclusion), when restricted.
    pub roles: Option<Vec<String>>,
    /// One group per required permission: the request must hold a member of each group (the
    /// permission itself first, then the permissions implying it).
    pub permissions: Vec<Vec<String>>,
}

impl Conditions {
    /// Whether no condition applies.
    pub fn is_empty(&self) -> bool {
        self.connector.is_none()
            && !self.tenant
            && self.roles.is_none()
            && self.permissions.is_empty()
    }

    /// `connector S, tenant, role a|b, permission p|q`, or `""`.
    pub fn to_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.connector {
            parts.push(format!("connector {c}"));
        }
        if self.tenant {
            parts.push("tenant".to_string());
        }
        if let Some(r) = &self.roles {
            parts.push(format!("role {}", r.join("|")));
        }
        for p in &self.permissions {
            parts.push(format!("permission {}", p.join("|")));
        }
        parts.join(", ")
    }
}

/// The decision of one cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Outcome {
    /// The decision when every condition holds (`deny` when no request can pass).
    pub decision: Decision,
    /// For a `deny`, the stage that denies whatever the request; for a `confirm`,
    /// [`Stage::Confirmation`]; `None` for an `allow`.
    pub stage: Option<Stage>,
    /// The conditions (empty for a deny at stage `identity`, `role` or `mode`).
    pub conditions: Conditions,
    /// For a deny at stage `intent`: the decision when the name is forced.
    pub forced: Option<Decision>,
    /// Whether argument rules apply to the tool's calls here: the decision (or the forced
    /// decision) lets a call through to stage `arguments`, where a rule can still deny it or
    /// ask for confirmation. Shown as `allow*` / `confirm*`.
    pub argument_rules: bool,
    /// In a table for a label set: the head of the `after` block that tightened the cell
    /// (`after untrusted`), which denies its effect, makes it need confirmation, or adds
    /// argument rules. Shown as `[after untrusted]`; `None` (and left out of the JSON) when no
    /// block changed the cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

impl Outcome {
    /// One-line text: `allow`, `confirm if tenant, role a|b`, `deny mode`,
    /// `deny intent; forced: confirm if tenant`, `allow*` (argument rules apply),
    /// `deny flow [after untrusted]` (an `after` block tightened the cell).
    pub fn to_text(&self) -> String {
        let cond = self.conditions.to_text();
        let when = if cond.is_empty() {
            String::new()
        } else {
            format!(" if {cond}")
        };
        let star = if self.argument_rules { "*" } else { "" };
        let text = match (self.decision, self.stage, self.forced) {
            (Decision::Deny, Some(Stage::Intent), Some(f)) => {
                format!("deny intent; forced: {f}{star}{when}")
            }
            (Decision::Deny, Some(stage), _) => format!("deny {stage}"),
            (d, _, _) => format!("{d}{star}{when}"),
        };
        match &self.after {
            Some(head) => format!("{text} [{head}]"),
            None => text,
        }
    }
}

/// One cell: a mode and an intent, and the decision there.
#[derive(Clone, Debug, Serialize)]
pub struct TableCell {
    /// The mode.
    pub mode: String,
    /// The intent (`""` for a policy that declares no intents).
    pub intent: String,
    /// The decision and its conditions.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Per stage, what the symbolic evaluation found and the rule it read (for the diff).
    #[serde(skip)]
    pub(crate) steps: Vec<SymStep>,
}

/// One argument rule, as the table lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableRule {
    /// `file:line:col` of the rule (JSON only; the text and CSV layouts leave positions out).
    pub source: String,
    /// `deny` or `confirm`.
    pub outcome: &'static str,
    /// The rule's canonical text, as `toolwarden fmt` prints it (`deny when amount > 10000`).
    pub text: String,
}

/// One row: a tool, a pattern or the undeclared-name row, with a cell per mode and intent.
#[derive(Clone, Debug, Serialize)]
pub struct TableRow {
    /// What the row stands for.
    pub kind: SubjectKind,
    /// The tool name, the pattern's glob, or `*` for the undeclared-name row.
    pub name: String,
    /// The effect (`None` for undeclared names under `unknown deny`).
    pub effect: Option<String>,
    /// Arguments a call must carry (`requires`), checked at execution.
    pub requires: Vec<String>,
    /// Cells, by mode (declaration order), then intent (priority order).
    pub cells: Vec<TableCell>,
    /// Its own argument rules, in source order (those for every tool are [`Table::rules`]).
    pub rules: Vec<TableRule>,
    /// The flow labels a call puts on the session (`taints`), in declaration order; left out
    /// of the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<String>,
}

/// One cell of a label set's table that differs from the table without labels.
#[derive(Clone, Debug, Serialize)]
pub struct LabelCell {
    /// What the row stands for.
    pub kind: SubjectKind,
    /// The tool name, the pattern's glob, or `*`.
    pub name: String,
    /// The mode.
    pub mode: String,
    /// The intent (`""` for a policy that declares no intents).
    pub intent: String,
    /// The decision for a session holding the set's labels.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The cells that differ, for a session holding exactly one set of labels, from the table
/// without labels.
#[derive(Clone, Debug, Serialize)]
pub struct LabelSet {
    /// The set's labels, in declaration order.
    pub labels: Vec<String>,
    /// The cells that differ, in row order, then mode and intent order.
    pub cells: Vec<LabelCell>,
}

/// The complete decision table of a policy (see the module docs).
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    /// The policy's name.
    pub policy: String,
    /// Its version, when declared.
    pub version: Option<u64>,
    /// The modes covered, in declaration order.
    pub modes: Vec<String>,
    /// The intents, highest priority first (`[""]` when the policy declares none).
    pub intents: Vec<String>,
    /// The rows, sorted as the module docs say.
    pub rows: Vec<TableRow>,
    /// The argument rules that apply to every tool (the `rules` and `defaults` blocks), in
    /// source order.
    pub rules: Vec<TableRule>,
    /// The declared flow labels; left out of the JSON when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// For a table built for one label set ([`Table::build_for_labels`]): the labels on the
    /// session, whose `after` blocks the cells already include. `None` for the table without
    /// labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_labels: Option<Vec<String>>,
    /// For the table without labels of a policy that declares labels: per non-empty label set
    /// (2^k - 1 of them, by mask: the first label's set, the second's, both, ...), the cells
    /// that differ from [`Table::rows`]. Left out of the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub label_sets: Vec<LabelSet>,
}

/// Output layout of [`Table::render`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFormat {
    /// Aligned text, one line per cell.
    Text,
    /// Pretty JSON.
    Json,
    /// CSV with a header line.
    Csv,
}

impl TableFormat {
    /// Parses `text`, `json` or `csv`.
    pub fn parse(s: &str) -> Option<TableFormat> {
        match s {
            "text" => Some(TableFormat::Text),
            "json" => Some(TableFormat::Json),
            "csv" => Some(TableFormat::Csv),
            _ => None,
        }
    }
}

/// What the symbolic evaluation found at one stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Sym {
    Pass,
    Fail,
    /// Passes under a condition (its text).
    Cond(String),
    /// The stage does not apply.
    NotApplicable,
    Confirm,
}

#[derive(Clone, Debug)]
pub(crate) struct SymStep {
    pub stage: Stage,
    pub sym: Sym,
    pub rule: Option<RuleId>,
}

/// How a row's names meet the connector stage.
#[derive(Clone, Debug)]
pub(crate) enum ConnShape {
    None,
    Server(String),
    Any,
}

impl Policy {
    pub(crate) fn conn_shape_of_name(&self, name: &str) -> ConnShape {
        let t = self.tables();
        if t.tiers.is_empty() {
            return ConnShape::None;
        }
        match self.connector_server(name) {
            Some(s) => ConnShape::Server(s.to_string()),
            None => ConnShape::None,
        }
    }

    pub(crate) fn conn_shape_of_glob(&self, glob: &str) -> ConnShape {
        let t = self.tables();
        let Some(prefix) = t.prefix.as_deref() else {
            return ConnShape::None;
        };
        if t.tiers.is_empty() {
            return ConnShape::None;
        }
        if let Some(rest) = glob.strip_prefix(prefix) {
            if let Some((server, _)) = rest.split_once("__") {
                if !server.is_empty() && !server.contains('*') {
                    return ConnShape::Server(server.to_string());
                }
            }
            return ConnShape::Any;
        }
        let head = glob.split('*').next().unwrap_or("");
        if glob.contains('*') && prefix.starts_with(head) {
            ConnShape::Any
        } else {
            ConnShape::None
        }
    }

    /// Stages 1–5, which do not depend on the mode or the intent: the conditions, or the
    /// unconditional deny (`Err`). Both sides are values the caller keeps (no boxing: the
    /// table is built once per row, off the hot path).
    #[allow(clippy::type_complexity, clippy::result_large_err)]
    pub(crate) fn symbolic_prefix(
        &self,
        shape: &ConnShape,
        row: Option<&ToolRow>,
    ) -> Result<(Conditions, Vec<SymStep>), (Outcome, Vec<SymStep>)> {
        let t = self.tables();
        let mut steps = Vec::with_capacity(8);
        let deny = |stage, steps| {
            (
                Outcome {
                    decision: Decision::Deny,
                    stage: Some(stage),
                    conditions: Conditions::default(),
                    forced: None,
                    argument_rules: false,
                    after: None,
                },
                steps,
            )
        };
        let step = |stage, sym, rule: Option<RuleId>| SymStep { stage, sym, rule };
        // 1. identity
        let Some(row) = row else {
            steps.push(step(Stage::Identity, Sym::Fail, Some(t.rule_unknown)));
            return Err(deny(Stage::Identity, steps));
        };
        if !row.enabled {
            steps.push(step(Stage::Identity, Sym::Fail, Some(row.rule_disabled)));
            return Err(deny(Stage::Identity, steps));
        }
        steps.push(step(Stage::Identity, Sym::Pass, Some(row.rule_decl)));
        let mut conditions = Conditions::default();
        // 2. connector
        match shape {
            ConnShape::None => steps.push(step(Stage::Connector, Sym::NotApplicable, None)),
            ConnShape::Server(s) => {
                conditions.connector = Some(s.clone());
                steps.push(step(
                    Stage::Connector,
                    Sym::Cond(s.clone()),
                    Some(t.rule_tiers),
                ));
            }
            ConnShape::Any => {
                conditions.connector = Some("*".to_string());
                steps.push(step(
                    Stage::Connector,
                    Sym::Cond("*".into()),
                    Some(t.rule_tiers),
                ));
            }
        }
        // 3. tenant
        if row.tenant_required {
            conditions.tenant = true;
            steps.push(step(
                Stage::Tenant,
                Sym::Cond("tenant".into()),
                Some(row.rule_tenant),
            ));
        } else {
            steps.push(step(Stage::Tenant, Sym::NotApplicable, None));
        }
        // 4. role
        if let Some(roles) = &row.roles {
            let mut ok: Vec<String> = (0..t.roles.len())
                .filter(|&r| t.role_closure[r].intersects(roles))
                .map(|r| t.roles[r].to_string())
                .collect();
            ok.sort();
            if ok.is_empty() {
                steps.push(step(Stage::Role, Sym::Fail, Some(row.rule_roles)));
                return Err(deny(Stage::Role, steps));
            }
            steps.push(step(
                Stage::Role,
                Sym::Cond(ok.join("|")),
                Some(row.rule_roles),
            ));
            conditions.roles = Some(ok);
        } else {
            steps.push(step(Stage::Role, Sym::NotApplicable, None));
        }
        // 5. permission
        if row.perms.is_empty() {
            steps.push(step(Stage::Permission, Sym::NotApplicable, None));
        } else {
            let mut groups: Vec<Vec<String>> = row
                .perms
                .iter()
                .map(|p| {
                    let mut others: Vec<String> = (0..t.permissions.len())
                        .filter(|&q| q != p && t.perm_closure[q].iter().any(|x| x == p))
                        .map(|q| t.permissions[q].to_string())
                        .collect();
                    others.sort();
                    let mut g = vec![t.permissions[p].to_string()];
                    g.extend(others);
                    g
                })
                .collect();
            // A group that contains another group is implied by it: drop it, so equivalent
            // requirements compare equal.
            let snapshot = groups.clone();
            groups.retain(|g| {
                !snapshot
                    .iter()
                    .any(|h| h != g && h.iter().all(|x| g.contains(x)))
            });
            groups.sort();
            groups.dedup();
            let text = groups
                .iter()
                .map(|g| g.join("|"))
                .collect::<Vec<_>>()
                .join(",");
            steps.push(step(
                Stage::Permission,
                Sym::Cond(text),
                Some(row.rule_perms),
            ));
            conditions.permissions = groups;
        }
        Ok((conditions, steps))
    }

    /// Stages 6, 7 and confirmation for one mode and intent, after [`Policy::symbolic_prefix`].
    pub(crate) fn symbolic_suffix(
        &self,
        row: &ToolRow,
        conditions: Conditions,
        mut steps: Vec<SymStep>,
        mode: usize,
        intent: Option<usize>,
    ) -> (Outcome, Vec<SymStep>) {
        let t = self.tables();
        let deny = |stage, steps| {
            (
                Outcome {
                    decision: Decision::Deny,
                    stage: Some(stage),
                    conditions: Conditions::default(),
                    forced: None,
                    argument_rules: false,
                    after: None,
                },
                steps,
            )
        };
        let step = |stage, sym, rule: Option<RuleId>| SymStep { stage, sym, rule };
        // 6. mode ceiling
        let m = &t.modes[mode];
        let bit = 1u64 << row.effect.min(63);
        if m.restrict & bit == 0 {
            steps.push(step(Stage::Mode, Sym::Fail, Some(m.rule_restrict)));
            return deny(Stage::Mode, steps);
        }
        steps.push(step(Stage::Mode, Sym::Pass, Some(m.rule_restrict)));
        // 7. intent
        let ne = t.effects.len();
        let (cell_allow, cell_confirm, cell_rule) = match (m.matrix, intent) {
            (Some(mx), Some(i)) => {
                let table = &t.matrices[mx as usize];
                (
                    table.allow[i] & bit != 0,
                    table.confirm[i] & bit != 0,
                    table.cell_rule.get(i * ne + row.effect as usize).copied(),
                )
            }
            _ => (true, false, None),
        };
        if m.matrix.is_none() {
            steps.push(step(
                Stage::Intent,
                Sym::NotApplicable,
                Some(m.rule_no_matrix),
            ));
        } else {
            steps.push(step(
                Stage::Intent,
                if cell_allow { Sym::Pass } else { Sym::Fail },
                cell_rule,
            ));
        }
        let mode_or_tool_confirm = if m.confirm & bit != 0 {
            Some(m.rule_confirm)
        } else if row.confirm_always {
            Some(row.rule_confirm)
        } else {
            None
        };
        let confirm_rule = if cell_allow && cell_confirm {
            cell_rule
        } else {
            mode_or_tool_confirm
        };
        if !cell_allow {
            steps.push(step(
                Stage::Confirmation,
                if mode_or_tool_confirm.is_some() {
                    Sym::Confirm
                } else {
                    Sym::Pass
                },
                mode_or_tool_confirm,
            ));
            // A forced tool whose cell denies is exempt from hiding, never from asking.
            let forced = Decision::Confirm;
            return (
                Outcome {
                    decision: Decision::Deny,
                    stage: Some(Stage::Intent),
                    conditions,
                    forced: Some(forced),
                    argument_rules: false,
                    after: None,
                },
                steps,
            );
        }
        let confirm = confirm_rule.is_some() || (cell_allow && cell_confirm);
        steps.push(step(
            Stage::Confirmation,
            if confirm { Sym::Confirm } else { Sym::Pass },
            confirm_rule,
        ));
        (
            Outcome {
                decision: if confirm {
                    Decision::Confirm
                } else {
                    Decision::Allow
                },
                stage: confirm.then_some(Stage::Confirmation),
                conditions,
                forced: None,
                argument_rules: false,
                after: None,
            },
            steps,
        )
    }

    /// A cell of `row` in mode `mode` (`base`, with its `steps`, as [`Policy::row_cells`] found
    /// it without labels) for a session holding the labels of `labels`: what stage `flow` does
    /// to it, as [`Policy::offer_session`] decides. A block that denies the effect denies the
    /// cell at stage `flow` (a forced name too); one that confirms it makes an `allow` a
    /// `confirm` at stage `flow`; one with argument rules stars the cell. The block that
    /// tightened the cell is named in [`Outcome::after`].
    pub(crate) fn flow_cell(
        &self,
        row: &ToolRow,
        mode: usize,
        labels: u8,
        base: &Outcome,
        steps: &[SymStep],
    ) -> (Outcome, Vec<SymStep>) {
        let t = self.tables();
        let mut o = base.clone();
        let mut steps = steps.to_vec();
        // Only a call that gets past stage 7 (a forced name past a denying cell too) meets
        // stage `flow`.
        let reaches = o.decision != Decision::Deny || o.forced.is_some();
        if labels == 0 || !reaches {
            return (o, steps);
        }
        let masks = t.flow_masks(mode, labels);
        let bit = 1u64 << row.effect.min(63);
        let step = |sym, rule| SymStep {
            stage: Stage::Flow,
            sym,
            rule: Some(rule),
        };
        if masks.deny & bit != 0 {
            let rule = self.flow_rule(mode, labels, bit, RuleOutcome::Deny);
            let head = self.after_head(self.after_of(rule));
            if o.decision == Decision::Deny {
                o.forced = Some(Decision::Deny);
                o.argument_rules = false;
                o.after = Some(head);
            } else {
                o = Outcome {
                    decision: Decision::Deny,
                    stage: Some(Stage::Flow),
                    conditions: Conditions::default(),
                    forced: None,
                    argument_rules: false,
                    after: Some(head),
                };
            }
            steps.push(step(Sym::Fail, rule));
            return (o, steps);
        }
        if masks.confirm & bit != 0 {
            let rule = self.flow_rule(mode, labels, bit, RuleOutcome::Confirm);
            if o.decision == Decision::Allow {
                o.decision = Decision::Confirm;
                o.stage = Some(Stage::Flow);
                o.after = Some(self.after_head(self.after_of(rule)));
            }
            // Read even when an earlier stage already asks (the diff names it).
            steps.push(step(Sym::Confirm, rule));
        }
        if masks.rules && !o.argument_rules {
            let first = t
                .afters
                .iter()
                .filter(|a| a.applies(mode, labels) && !a.arg_rules.is_empty())
                .find_map(|a| {
                    let rule = t.arg_rules.get(a.arg_rules.start as usize)?.rule;
                    Some((a.labels, rule))
                });
            if let Some((mask, rule)) = first {
                o.argument_rules = true;
                if o.after.is_none() {
                    o.after = Some(self.after_head(mask));
                }
                steps.push(step(Sym::Cond("argument rules".to_string()), rule));
            }
        }
        (o, steps)
    }

    /// The intents of the table's columns: the declared ones, or `[None]` without intents.
    pub(crate) fn table_intents(&self) -> Vec<(String, Option<usize>)> {
        let t = self.tables();
        if t.intents.is_empty() {
            vec![(String::new(), None)]
        } else {
            t.intents
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), Some(i)))
                .collect()
        }
    }

    /// The cells of one row for every mode index in `modes`.
    pub(crate) fn row_cells(
        &self,
        shape: &ConnShape,
        row: Option<&ToolRow>,
        modes: &[usize],
    ) -> Vec<TableCell> {
        let t = self.tables();
        let intents = self.table_intents();
        let mut cells = Vec::with_capacity(modes.len() * intents.len());
        let prefix = self.symbolic_prefix(shape, row);
        let has_rules = row.is_some_and(|r| !r.arg_rules.is_empty()) || !t.global_rules.is_empty();
        for &m in modes {
            for (name, i) in &intents {
                let (mut outcome, steps) = match (&prefix, row) {
                    (Ok((c, st)), Some(row)) => {
                        self.symbolic_suffix(row, c.clone(), st.clone(), m, *i)
                    }
                    (Err(denied), _) => denied.clone(),
                    (Ok(_), None) => unreachable_deny(),
                };
                outcome.argument_rules =
                    has_rules && (outcome.decision != Decision::Deny || outcome.forced.is_some());
                cells.push(TableCell {
                    mode: t.modes[m].name.to_string(),
                    intent: name.clone(),
                    outcome,
                    steps,
                });
            }
        }
        cells
    }
}

/// A prefix only succeeds with a row; kept total so no path can panic.
fn unreachable_deny() -> (Outcome, Vec<SymStep>) {
    (
        Outcome {
            decision: Decision::Deny,
            stage: Some(Stage::Identity),
            conditions: Conditions::default(),
            forced: None,
            argument_rules: false,
            after: None,
        },
        Vec::new(),
    )
}

impl Table {
    /// Builds the table of `policy`, for every mode or only `mode`, for a session without
    /// labels; when the policy declares labels, [`Table::label_sets`] holds, per non-empty label
    /// set, the cells that differ.
    ///
    /// # Errors
    ///
    /// [`RequestError::UnknownMode`] when `mode` is not declared.
    pub fn build(policy: &Policy, mode: Option<&str>) -> Result<Table, RequestError> {
        Table::build_inner(policy, mode, None)
    }

    /// Builds the table of `policy` for a session holding exactly `labels`: every cell
    /// includes what the `after` blocks that apply to that set do ([`Outcome::after`] names
    /// the block that tightened a cell). No [`Table::label_sets`].
    ///
    /// # Errors
    ///
    /// [`RequestError::UnknownMode`] when `mode` is not declared, [`RequestError::Session`]
    /// for a label the policy does not declare.
    pub fn build_for_labels(
        policy: &Policy,
        mode: Option<&str>,
        labels: &[&str],
    ) -> Result<Table, RequestError> {
        let declared = &policy.tables().labels;
        let mut mask = 0u8;
        for l in labels {
            match declared.iter().position(|d| **d == **l) {
                Some(i) => mask |= 1u8 << i,
                None => {
                    return Err(RequestError::Session(
                        crate::eval::SessionError::UndeclaredLabel {
                            label: l.to_string(),
                            known: if declared.is_empty() {
                                "none".to_string()
                            } else {
                                declared
                                    .iter()
                                    .map(|d| format!("`{d}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            },
                        },
                    ))
                }
            }
        }
        Table::build_inner(policy, mode, Some(mask))
    }

    /// The table without labels (`labels` `None`, with the label sets) or for one label mask.
    fn build_inner(
        policy: &Policy,
        mode: Option<&str>,
        labels: Option<u8>,
    ) -> Result<Table, RequestError> {
        let t = policy.tables();
        let modes: Vec<usize> = match mode {
            None => (0..t.modes.len()).collect(),
            Some(name) => vec![t
                .modes
                .iter()
                .position(|m| &*m.name == name)
                .ok_or_else(|| RequestError::UnknownMode {
                    mode: name.to_string(),
                    known: t
                        .modes
                        .iter()
                        .map(|m| format!("`{}`", m.name))
                        .collect::<Vec<_>>()
                        .join(", "),
                })?],
        };
        let requires = |row: &ToolRow| row.requires.iter().map(|s| s.to_string()).collect();
        let names_of = |mask: u8| -> Vec<String> {
            t.labels
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1u8 << i) != 0)
                .map(|(_, l)| l.to_string())
                .collect()
        };
        let rules_in = |range: &std::ops::Range<u32>| -> Vec<TableRule> {
            t.arg_rules
                .get(range.start as usize..range.end as usize)
                .unwrap_or_default()
                .iter()
                .map(|r| TableRule {
                    source: policy
                        .rule_source(r.rule)
                        .map_or_else(String::new, |l| l.to_string()),
                    outcome: r.outcome.as_str(),
                    text: r.text.to_string(),
                })
                .collect()
        };
        // Each row with the evaluation row its cells come from.
        let mut rows: Vec<(TableRow, Option<&ToolRow>)> = Vec::new();
        let make = |kind, name: String, shape: ConnShape, row: Option<&ToolRow>| TableRow {
            kind,
            name,
            effect: row.map(|r| t.effects[r.effect as usize].to_string()),
            requires: row.map(requires).unwrap_or_default(),
            cells: policy.row_cells(&shape, row, &modes),
            rules: row.map(|r| rules_in(&r.arg_rules)).unwrap_or_default(),
            taints: row.map(|r| names_of(r.taints)).unwrap_or_default(),
        };
        let mut tools: Vec<&(Box<str>, ToolRow)> = t.tools.iter().collect();
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, row) in tools {
            let shape = policy.conn_shape_of_name(name);
            rows.push((
                make(SubjectKind::Tool, name.to_string(), shape, Some(row)),
                Some(row),
            ));
        }
        let mut patterns: Vec<_> = t.patterns.iter().collect();
        patterns.sort_by(|a, b| a.glob.cmp(&b.glob));
        for p in patterns {
            let shape = policy.conn_shape_of_glob(&p.glob);
            rows.push((
                make(
                    SubjectKind::Pattern,
                    p.glob.to_string(),
                    shape,
                    Some(&p.row),
                ),
                Some(&p.row),
            ));
        }
        let shape = policy.conn_shape_of_glob("*");
        rows.push((
            make(
                SubjectKind::Unknown,
                "*".to_string(),
                shape,
                t.defaults.as_ref(),
            ),
            t.defaults.as_ref(),
        ));
        let per_mode = policy.table_intents().len();
        // The cell at index `i` of a row is in mode `modes[i / per_mode]`.
        let flow = |row: &ToolRow, i: usize, c: &TableCell, mask: u8| {
            let mode = modes.get(i / per_mode.max(1)).copied().unwrap_or(0);
            policy.flow_cell(row, mode, mask, &c.outcome, &c.steps)
        };
        let mut label_sets = Vec::new();
        match labels {
            Some(mask) => {
                for (r, row) in &mut rows {
                    let Some(row) = row else { continue };
                    for (i, c) in r.cells.iter_mut().enumerate() {
                        let (outcome, steps) = flow(row, i, c, mask);
                        c.outcome = outcome;
                        c.steps = steps;
                    }
                }
            }
            None => {
                let sets = 1u16 << t.labels.len();
                for set in 1..sets {
                    let mask = u8::try_from(set).unwrap_or(u8::MAX);
                    let mut cells = Vec::new();
                    for (r, row) in &rows {
                        let Some(row) = row else { continue };
                        for (i, c) in r.cells.iter().enumerate() {
                            let (outcome, _) = flow(row, i, c, mask);
                            if outcome != c.outcome {
                                cells.push(LabelCell {
                                    kind: r.kind,
                                    name: r.name.clone(),
                                    mode: c.mode.clone(),
                                    intent: c.intent.clone(),
                                    outcome,
                                });
                            }
                        }
                    }
                    label_sets.push(LabelSet {
                        labels: names_of(mask),
                        cells,
                    });
                }
            }
        }
        Ok(Table {
            policy: policy.name().to_string(),
            version: policy.version(),
            modes: modes.iter().map(|&m| t.modes[m].name.to_string()).collect(),
            intents: policy.table_intents().into_iter().map(|(n, _)| n).collect(),
            rows: rows.into_iter().map(|(r, _)| r).collect(),
            rules: rules_in(&t.global_rules),
            labels: names_of(u8::MAX),
            session_labels: labels.map(names_of),
            label_sets,
        })
    }

    /// The number of cells.
    pub fn cell_count(&self) -> usize {
        self.rows.iter().map(|r| r.cells.len()).sum()
    }

    /// Renders the table in `format`; text and CSV end with a newline.
    pub fn render(&self, format: TableFormat) -> String {
        match format {
            TableFormat::Text => self.to_text(),
            TableFormat::Json => {
                let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
                s.push('\n');
                s
            }
            TableFormat::Csv => self.to_csv(),
        }
    }

    fn to_text(&self) -> String {
        let mw = self
            .modes
            .iter()
            .map(|m| m.chars().count())
            .max()
            .unwrap_or(0);
        let iw = self
            .intents
            .iter()
            .map(|i| i.chars().count().max(1))
            .max()
            .unwrap_or(1);
        let mut out = String::new();
        out.push_str(&format!(
            "# decision table of policy \"{}\"{}{}\n",
            self.policy,
            self.version
                .map(|v| format!(" version {v}"))
                .unwrap_or_default(),
            match &self.session_labels {
                Some(l) if l.is_empty() => ", for a session holding no label".to_string(),
                Some(l) => format!(", for a session holding labels {}", l.join(", ")),
                None => String::new(),
            }
        ));
        out.push_str(&format!("# modes: {}\n", self.modes.join(", ")));
        if self.intents.iter().any(|i| !i.is_empty()) {
            out.push_str(&format!("# intents: {}\n", self.intents.join(" > ")));
        } else {
            out.push_str("# intents: none declared (`*`: any query)\n");
        }
        out.push_str(
            "# a decision holds when every condition holds; a failed condition denies at its stage.\n\
             # connector S: allowlist unset or holds S (*: the name's server) · tenant: a tenant is set\n\
             # role a|b: one of these roles (closed under inclusion) · permission p|q: p or a permission implying it\n",
        );
        if !self.rules.is_empty() || self.rows.iter().any(|r| !r.rules.is_empty()) {
            out.push_str(
                "# allow*, confirm*: argument rules (`rule:` lines, and those for every tool) can still deny a call or ask for confirmation\n",
            );
        }
        if !self.labels.is_empty() {
            out.push_str(&format!(
                "# labels: {} · [after L]: the `after` block that tightened the cell\n",
                self.labels.join(", ")
            ));
        }
        if !self.rules.is_empty() {
            out.push_str("# rules for every tool:\n");
            for r in &self.rules {
                out.push_str(&format!("#   {}\n", r.text));
            }
        }
        for row in &self.rows {
            out.push('\n');
            out.push_str(&format!("{} {}", row.kind.as_str(), row.name));
            match &row.effect {
                Some(e) => out.push_str(&format!("  effect {e}")),
                None => out.push_str("  (no effect)"),
            }
            if !row.requires.is_empty() {
                out.push_str(&format!("  requires {}", row.requires.join(", ")));
            }
            if !row.taints.is_empty() {
                out.push_str(&format!("  taints {}", row.taints.join(", ")));
            }
            out.push('\n');
            for c in &row.cells {
                cell_line(&mut out, &c.mode, &c.intent, &c.outcome, mw, iw);
            }
            for r in &row.rules {
                out.push_str(&format!("  rule: {}\n", r.text));
            }
        }
        for set in &self.label_sets {
            let labels = set.labels.join(", ");
            out.push('\n');
            if set.cells.is_empty() {
                out.push_str(&format!(
                    "# labels {labels}: no cell differs from the table without labels\n"
                ));
                continue;
            }
            out.push_str(&format!(
                "# labels {labels}: {} {} differ from the table without labels\n",
                set.cells.len(),
                if set.cells.len() == 1 {
                    "cell"
                } else {
                    "cells"
                }
            ));
            let mut last: Option<(SubjectKind, &str)> = None;
            for c in &set.cells {
                if last != Some((c.kind, &c.name)) {
                    out.push_str(&format!("{} {}\n", c.kind.as_str(), c.name));
                    last = Some((c.kind, &c.name));
                }
                cell_line(&mut out, &c.mode, &c.intent, &c.outcome, mw, iw);
            }
        }
        out
    }

    fn to_csv(&self) -> String {
        // A policy with labels gets two more columns: the label set of the line (`a|b`, empty
        // for the table without labels) and the `after` block that tightened the cell.
        let flow = !self.labels.is_empty();
        let mut out = String::from(
            "kind,name,effect,mode,intent,decision,stage,forced,connector,tenant,roles,permissions,argument_rules",
        );
        out.push_str(if flow { ",labels,after\n" } else { "\n" });
        let effects: std::collections::HashMap<(SubjectKind, &str), &str> = self
            .rows
            .iter()
            .map(|r| ((r.kind, r.name.as_str()), r.effect.as_deref().unwrap_or("")))
            .collect();
        let base = self.session_labels.as_ref().map(|l| l.join("|"));
        for row in &self.rows {
            for c in &row.cells {
                let effect = row.effect.as_deref().unwrap_or("");
                csv_line(&mut out, row.kind, &row.name, effect, c, &c.outcome);
                if flow {
                    csv_flow(&mut out, base.as_deref().unwrap_or(""), &c.outcome);
                }
                out.push('\n');
            }
        }
        for set in &self.label_sets {
            let labels = set.labels.join("|");
            for c in &set.cells {
                let effect = effects
                    .get(&(c.kind, c.name.as_str()))
                    .copied()
                    .unwrap_or("");
                let cell = (c.mode.as_str(), c.intent.as_str());
                csv_fields(&mut out, c.kind, &c.name, effect, cell, &c.outcome);
                csv_flow(&mut out, &labels, &c.outcome);
                out.push('\n');
            }
        }
        out
    }
}

/// The common CSV fields of one cell (no line end).
fn csv_line(
    out: &mut String,
    kind: SubjectKind,
    name: &str,
    effect: &str,
    c: &TableCell,
    o: &Outcome,
) {
    csv_fields(out, kind, name, effect, (&c.mode, &c.intent), o);
}

/// The common CSV fields of a cell at `(mode, intent)` (no line end).
fn csv_fields(
    out: &mut String,
    kind: SubjectKind,
    name: &str,
    effect: &str,
    (mode, intent): (&str, &str),
    o: &Outcome,
) {
    let fields = [
        kind.as_str().to_string(),
        name.to_string(),
        effect.to_string(),
        mode.to_string(),
        intent.to_string(),
        o.decision.as_str().to_string(),
        o.stage.map(|s| s.as_str().to_string()).unwrap_or_default(),
        o.forced.map(|d| d.as_str().to_string()).unwrap_or_default(),
        o.conditions.connector.clone().unwrap_or_default(),
        if o.conditions.tenant { "yes" } else { "" }.to_string(),
        o.conditions
            .roles
            .as_ref()
            .map(|r| r.join("|"))
            .unwrap_or_default(),
        o.conditions
            .permissions
            .iter()
            .map(|g| g.join("|"))
            .collect::<Vec<_>>()
            .join(";"),
        if o.argument_rules { "yes" } else { "" }.to_string(),
    ];
    out.push_str(
        &fields
            .iter()
            .map(|f| csv_field(f))
            .collect::<Vec<_>>()
            .join(","),
    );
}

/// The `labels` and `after` CSV fields, each after a comma.
fn csv_flow(out: &mut String, labels: &str, o: &Outcome) {
    out.push(',');
    out.push_str(&csv_field(labels));
    out.push(',');
    out.push_str(&csv_field(o.after.as_deref().unwrap_or("")));
}

/// One cell as a text line: `  MODE  INTENT  OUTCOME`, the columns `mw` and `iw` wide.
fn cell_line(out: &mut String, mode: &str, intent: &str, o: &Outcome, mw: usize, iw: usize) {
    let intent = if intent.is_empty() { "*" } else { intent };
    let line = format!("  {mode:<mw$}  {intent:<iw$}  {}", o.to_text());
    out.push_str(line.trim_end());
    out.push('\n');
}

/// Quotes a CSV field when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
