//! The change impact between two versions of a policy, exhaustive over the finite decision
//! space: every tool and pattern of either version (plus the undeclared-name row) × every mode
//! × every intent of either version, with the request conditions of stages 2–5 compared
//! symbolically (see [`super::table`]). Nothing is sampled.
//!
//! A declared tool present in one version only is compared with what the other version does
//! with the same name (a pattern, the `defaults`, or `unknown deny`); a pattern, mode or intent
//! present in one version only shows as added or removed cells. Each changed cell names the
//! rule that changed it: the rule read at the first stage whose result differs.
//!
//! For review, a changed cell either moved its decision ([`Moved::Decision`]: `allow`,
//! `confirm`, `deny`, or a cell on one side only) or only the reason for it
//! ([`Moved::Reason`]: the stage, the conditions, what a forced name gets); the cells are
//! grouped by subject and deciding rule ([`CellGroup`]), each group with a one-line summary.
//! Argument rules, which no cell reads, are compared as canonical text
//! ([`super::rule_changes`]), and recorded calls can be replayed ([`super::replay`]).
//!
//! Flow labels: a cell can also move only for a session holding some labels (an `after`
//! block added, loosened or tightened, a label renamed). Every non-empty subset of both
//! versions' labels is compared (each version ignoring the labels it does not declare), and a
//! cell that moves under a set is reported with that set ([`CellChange::labels`]), once, under
//! the smallest sets where the change appears. The `labels` declaration, each tool's `taints`
//! and each `after` block that changed are declaration lines.
//!
//! Roles and permissions compare by closure (what each includes or implies, however it is
//! written): the `roles` and `permissions` declaration lines list, on each side, only the names
//! whose closure changed, each with what it includes (implies) there.

use arcstr::ArcStr;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::table::{ConnShape, Outcome, SubjectKind, Sym, SymStep, TableCell};
use super::RuleRef;
use crate::compile::{BitSet, RuleKind, Tables};
use crate::decision::RuleId;
use crate::policy::Policy;
use crate::relation::Relation;

/// What moved in a changed cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Moved {
    /// The decision (`allow`, `confirm`, `deny`) differs, or the cell exists on one side only.
    Decision,
    /// The decision is the same; its stage, its conditions or what a forced name gets differ.
    Reason,
}

impl Moved {
    /// `decision` or `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Moved::Decision => "decision",
            Moved::Reason => "reason",
        }
    }
}

/// One cell whose outcome moved.
#[derive(Clone, Debug, Serialize)]
pub struct CellChange {
    /// Whether its decision moved, or only the reason for it.
    pub moved: Moved,
    /// What the row stands for.
    pub kind: SubjectKind,
    /// Tool name, glob, or `*`.
    pub name: String,
    /// The mode.
    pub mode: String,
    /// The intent (`""` without intents).
    pub intent: String,
    /// The old decision, `None` when the cell did not exist (new mode, intent or pattern).
    pub old: Option<Outcome>,
    /// The new decision, `None` when the cell no longer exists.
    pub new: Option<Outcome>,
    /// The rule of the new version that decides the difference, when the text spells it out.
    pub rule: Option<RuleRef>,
    /// The rule of the old version at the same stage.
    pub old_rule: Option<RuleRef>,
    /// What the deciding rule says, on one line: its text (`enabled false`, `roles clerk`),
    /// prefixed with its place for a matrix cell or a mode setting (`matrix standard, write ×
    /// delete: allow`, `mode analyzer: restrict none`); the new version's rule, else the old
    /// one's; `""` when neither text spells it out.
    pub label: String,
    /// The flow labels on the session for which the cell moves (in the union of both
    /// versions' labels, old order then new); empty (and left out of the JSON) for the cell of
    /// a session without labels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

/// The cells of one subject that one rule moved, summarized on one line for review:
/// `` `tool x`: enabled false — 5 cells allow → deny ``.
#[derive(Clone, Debug, Serialize)]
pub struct CellGroup {
    /// Whether the group's decisions moved, or only their reasons.
    pub moved: Moved,
    /// What the row stands for.
    pub kind: SubjectKind,
    /// Tool name, glob, or `*`.
    pub name: String,
    /// The deciding rule's one-line label ([`CellChange::label`]).
    pub label: String,
    /// The label set the group's cells move under ([`CellChange::labels`]); left out of the
    /// JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The new version's deciding rule.
    pub rule: Option<RuleRef>,
    /// The old version's rule at the same stage.
    pub old_rule: Option<RuleRef>,
    /// How many cells the group holds.
    pub count: usize,
    /// The one-line summary (see the type docs).
    pub summary: String,
    /// The cells by transition, in the order they first appear.
    pub transitions: Vec<Transition>,
}

/// The cells of a [`CellGroup`] that moved from one outcome to the same other outcome.
#[derive(Clone, Debug, Serialize)]
pub struct Transition {
    /// The old outcome as one line ([`Outcome::to_text`]), `(no cell)` when there was none.
    pub old: String,
    /// The new outcome as one line, `(no cell)` when there is none.
    pub new: String,
    /// The cells, as `mode/intent` (`mode/*` without intents).
    pub cells: Vec<String>,
}

/// A row present in one version only, or whose effect or `requires` changed.
#[derive(Clone, Debug, Serialize)]
pub struct RowChange {
    /// What the row stands for.
    pub kind: SubjectKind,
    /// Tool name or glob.
    pub name: String,
    /// `added`, `removed` or `changed`.
    pub change: &'static str,
    /// The old effect and `requires`, when the row existed.
    pub old: Option<(Option<String>, Vec<String>)>,
    /// The new effect and `requires`, when the row exists.
    pub new: Option<(Option<String>, Vec<String>)>,
}

/// A query whose classification changed.
#[derive(Clone, Debug, Serialize)]
pub struct QueryChange {
    /// The query text.
    pub text: String,
    /// Its intents under the old policy.
    pub old: Vec<String>,
    /// Its intents under the new policy.
    pub new: Vec<String>,
    /// The keywords that hit under the new policy, as `intent:keyword`.
    pub new_hits: Vec<String>,
}

/// The change impact between two policies. Build it with [`PolicyDiff::compute`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct PolicyDiff {
    /// Declarations that changed: effects, intents, modes, roles, permissions, tiers, settings
    /// (`fallback`, `combine`, `quoted`, `unknown`, `confirm fields`, `tenant arg`, `limit`, `default
    /// mode`) and flow declarations (`labels`, each tool's `taints`, each `after` block), as
    /// `what: old -> new` lines.
    pub settings: Vec<String>,
    /// Rows added, removed, or whose effect or `requires` changed.
    pub rows: Vec<RowChange>,
    /// Every cell whose outcome changed: the decisions that moved first, then the reasons.
    pub cells: Vec<CellChange>,
    /// The changed cells grouped by subject and deciding rule, decisions first (the order of
    /// [`PolicyDiff::render`]).
    pub groups: Vec<CellGroup>,
    /// Tools, patterns and the blocks that apply to every tool whose argument rules changed.
    pub rules: Vec<super::rule_changes::RuleChange>,
    /// Keywords, negators, `embedded` phrases and `except` entries added, as `intent lang
    /// "text"`, `negation before 3 "text"`, `embedded "text"`, `except "text"` or
    /// `except clause "text"`.
    pub keywords_added: Vec<String>,
    /// Keywords, negators, `embedded` phrases and `except` entries removed, as
    /// [`PolicyDiff::keywords_added`] writes them.
    pub keywords_removed: Vec<String>,
    /// Queries (from [`PolicyDiff::with_queries`]) whose intents changed.
    pub queries: Vec<QueryChange>,
    /// How many queries were classified.
    pub queries_checked: usize,
    /// Recorded calls (from [`PolicyDiff::with_calls`]) whose verdict moved.
    pub calls: Vec<super::replay::CallChange>,
    /// How many recorded calls were replayed.
    pub calls_checked: usize,
}

fn set_change(what: &str, old: &[String], new: &[String], out: &mut Vec<String>) {
    if old != new {
        out.push(format!("{what}: {} -> {}", list(old), list(new)));
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "(none)".to_string()
    } else {
        v.join(", ")
    }
}

fn strings<'a>(it: impl Iterator<Item = &'a str>) -> Vec<String> {
    it.map(str::to_string).collect()
}

fn settings_of(p: &Policy) -> BTreeMap<&'static str, String> {
    let t = p.tables();
    let mut m = BTreeMap::new();
    m.insert("effects", strings(p.effects()).join(", "));
    m.insert("intents", strings(p.intents()).join(" > "));
    m.insert("modes", strings(p.modes()).join(", "));
    m.insert(
        "default mode",
        p.default_mode().unwrap_or("(none)").to_string(),
    );
    m.insert("fallback", p.fallback_intent().name.to_string());
    m.insert("combine", p.classifier().combine_name().to_string());
    m.insert("quoted", p.classifier().quoted_name().to_string());
    m.insert(
        "unknown",
        if t.defaults.is_some() {
            "allow"
        } else {
            "deny"
        }
        .to_string(),
    );
    m.insert("tiers", strings(p.tiers()).join(" > "));
    m.insert(
        "connectors prefix",
        t.prefix.as_deref().unwrap_or("(none)").to_string(),
    );
    m.insert(
        "confirm fields",
        t.confirm_fields
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    );
    m.insert(
        "tenant arg",
        t.tenant_arg.as_deref().unwrap_or("(none)").to_string(),
    );
    m.insert(
        "limit transactional",
        t.limit
            .map_or("(none)".to_string(), |l| format!("{l} per turn")),
    );
    m
}

/// Every tool and pattern either policy declares, and the unknown-tool subject `*`, in order.
pub(super) fn subjects_of(old: &Policy, new: &Policy) -> BTreeSet<(SubjectKind, String)> {
    let mut subjects = BTreeSet::new();
    for p in [old, new] {
        let t = p.tables();
        subjects.extend(
            t.tools
                .iter()
                .map(|(n, _)| (SubjectKind::Tool, n.to_string())),
        );
        subjects.extend(
            t.patterns
                .iter()
                .map(|x| (SubjectKind::Pattern, x.glob.to_string())),
        );
    }
    subjects.insert((SubjectKind::Unknown, "*".to_string()));
    subjects
}

/// One side's flow declarations as diff reads them, keyed by what they declare: `labels`, each
/// tool's or pattern's `taints`, and each `after` block (its labels and mode) with its lines and
/// argument rules in canonical form. A key one side lacks reads as `(none)`, so a label, taint
/// or block added or removed is a change.
fn flow_of(p: &Policy) -> BTreeMap<String, String> {
    let t = p.tables();
    let mut m = BTreeMap::new();
    let labels_of = |mask: u8| -> Vec<&str> {
        t.labels
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1u8 << i) != 0)
            .map(|(_, l)| &**l)
            .collect()
    };
    if !t.labels.is_empty() {
        m.insert("labels".to_string(), strings(p.labels()).join(", "));
    }
    for tool in p.tools().chain(p.patterns()) {
        let taints = p.taints(tool);
        if !taints.is_empty() {
            m.insert(format!("taints of `{tool}`"), taints.join(", "));
        }
    }
    let effects: Vec<&str> = p.effects().collect();
    let modes: Vec<&str> = p.modes().collect();
    let effect_list = |mask: u64| -> String {
        effects
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 64 && mask & (1u64 << i) != 0)
            .map(|(_, e)| *e)
            .collect::<Vec<_>>()
            .join(", ")
    };
    for after in &t.afters {
        let mut key = format!("after {}", labels_of(after.labels).join(", "));
        if let Some(mode) = after.mode {
            let name = modes.get(usize::from(mode)).copied().unwrap_or("?");
            key.push_str(&format!(" in mode {name}"));
        }
        let mut body: Vec<String> = after
            .lines
            .iter()
            .map(|(outcome, mask, _)| {
                let word = match outcome {
                    crate::syntax::ast::RuleOutcome::Deny => "deny",
                    crate::syntax::ast::RuleOutcome::Confirm => "confirm",
                };
                format!("{word} {}", effect_list(*mask))
            })
            .collect();
        let (from, to) = (after.arg_rules.start as usize, after.arg_rules.end as usize);
        body.extend(
            t.arg_rules
                .get(from..to)
                .unwrap_or_default()
                .iter()
                .map(|r| r.text.to_string()),
        );
        body.sort();
        let entry = m.entry(key).or_insert_with(String::new);
        if !entry.is_empty() {
            entry.push_str("; ");
        }
        entry.push_str(&format!("{{ {} }}", body.join("; ")));
    }
    m
}

/// One side's relation (role inclusion or permission implication) as diff reads it.
struct Closed<'t> {
    names: &'t [Box<str>],
    index: &'t rustc_hash::FxHashMap<Box<str>, u32>,
    closure: &'t [BitSet],
    edges: &'t [(u32, u32)],
}

impl Closed<'_> {
    fn roles(t: &Tables) -> Closed<'_> {
        Closed {
            names: &t.roles,
            index: &t.role_index,
            closure: &t.role_closure,
            edges: &t.role_edges,
        }
    }

    fn permissions(t: &Tables) -> Closed<'_> {
        Closed {
            names: &t.permissions,
            index: &t.perm_index,
            closure: &t.perm_closure,
            edges: &t.perm_edges,
        }
    }

    /// Whether every declared edge of `self` is in the closure of `other` (by names). Both
    /// ways, that is the same closure: a closure holding every edge of a relation holds its
    /// closure.
    fn edges_within(&self, other: &Closed<'_>) -> bool {
        self.edges.iter().all(|&(a, b)| {
            let (a, b) = (&self.names[a as usize], &self.names[b as usize]);
            match (other.index.get(a), other.index.get(b)) {
                (Some(&a), Some(&b)) => other.closure[a as usize].contains(b as usize),
                _ => false,
            }
        })
    }

    /// For each name of `self`, whether `other` declares it with the same closure (by names).
    ///
    /// Names are visited in an order where what a name reaches comes first: a name whose
    /// declared edges lead to the same names in both, each with the same closure, has the same
    /// closure at the cost of its edges; only the others are compared member by member. So
    /// the cost is linear in names and edges, plus the size of the closures that differ.
    fn same_closures(&self, other: &Closed<'_>) -> Vec<bool> {
        let n = self.names.len();
        let map: Vec<Option<usize>> = self
            .names
            .iter()
            .map(|name| other.index.get(name).map(|&j| j as usize))
            .collect();
        let mine = Relation::new(n, self.edges.iter().map(|&(a, b)| (a as usize, b as usize)));
        let theirs = Relation::new(
            other.names.len(),
            other.edges.iter().map(|&(a, b)| (a as usize, b as usize)),
        );
        let mut same = vec![false; n];
        for members in mine.components().0 {
            for &i in &members {
                let Some(j) = map[i] else { continue };
                let quick = members.len() == 1 && {
                    let mut a: Vec<Option<usize>> =
                        mine.successors(i).iter().map(|&s| map[s]).collect();
                    let mut b: Vec<Option<usize>> =
                        theirs.successors(j).iter().map(|&s| Some(s)).collect();
                    a.sort_unstable();
                    a.dedup();
                    b.sort_unstable();
                    b.dedup();
                    a == b && mine.successors(i).iter().all(|&s| same[s])
                };
                same[i] = quick || {
                    let theirs = &other.closure[j];
                    let mut count = 0usize;
                    self.closure[i].iter().all(|x| {
                        count += 1;
                        map[x].is_some_and(|y| theirs.contains(y))
                    }) && count == theirs.iter().count()
                };
            }
        }
        same
    }

    /// The names `i` reaches, itself excluded, sorted.
    fn reached(&self, i: usize) -> Vec<&str> {
        let mut out: Vec<&str> = self.closure[i]
            .iter()
            .filter(|&x| x != i)
            .map(|x| &*self.names[x])
            .collect();
        out.sort_unstable();
        out
    }
}

/// How two versions relate their roles (`word` `includes`) or permissions (`implies`):
/// `None` when they declare the same names with the same closure (checked in time linear in
/// the names and edges), else each side's entries for the names whose closure differs, as
/// `name (word a, b)`, sorted.
fn relation_change(old: &Closed<'_>, new: &Closed<'_>, word: &str) -> Option<(String, String)> {
    let same_names =
        old.names.len() == new.names.len() && old.names.iter().all(|n| new.index.contains_key(n));
    if same_names && old.edges_within(new) && new.edges_within(old) {
        return None;
    }
    let entry = |side: &Closed<'_>, i: usize| {
        let reached = side.reached(i);
        if reached.is_empty() {
            side.names[i].to_string()
        } else {
            format!("{} ({word} {})", side.names[i], reached.join(", "))
        }
    };
    let same = old.same_closures(new);
    let mut changed: BTreeSet<&str> = (0..old.names.len())
        .filter(|&i| !same[i])
        .map(|i| &*old.names[i])
        .collect();
    changed.extend(
        new.names
            .iter()
            .filter(|n| !old.index.contains_key(*n))
            .map(|n| &**n),
    );
    let side_text = |side: &Closed<'_>| {
        let entries: Vec<String> = changed
            .iter()
            .filter_map(|n| side.index.get(*n))
            .map(|&i| entry(side, i as usize))
            .collect();
        if entries.is_empty() {
            "(none)".to_string()
        } else {
            entries.join("; ")
        }
    };
    Some((side_text(old), side_text(new)))
}

fn keywords_of(p: &Policy) -> BTreeSet<String> {
    let c = p.classifier();
    c.keyword_entries()
        .map(|(i, l, t)| format!("{i} {l} \"{t}\""))
        .chain(
            c.negator_entries()
                .map(|(d, w, t)| format!("negation {d} {w} \"{t}\"")),
        )
        .chain(c.phrase_entries())
        .collect()
}

/// The rows of one policy, keyed for comparison.
struct Side<'p> {
    policy: &'p Policy,
    modes: Vec<String>,
    intents: Vec<String>,
}

impl<'p> Side<'p> {
    fn new(policy: &'p Policy) -> Side<'p> {
        Side {
            policy,
            modes: strings(policy.modes()),
            intents: policy.table_intents().into_iter().map(|(n, _)| n).collect(),
        }
    }

    /// Cells keyed by (mode, intent) for a subject, or `None` when this side has no such row.
    fn cells(
        &self,
        kind: SubjectKind,
        name: &str,
    ) -> Option<BTreeMap<(String, String), TableCell>> {
        let p = self.policy;
        let t = p.tables();
        let modes: Vec<usize> = (0..t.modes.len()).collect();
        let cells = match kind {
            SubjectKind::Tool => {
                let (_, row) = p.resolve_tool(name);
                p.row_cells(&p.conn_shape_of_name(name), row, &modes)
            }
            SubjectKind::Pattern => {
                let pat = t.patterns.iter().find(|x| &*x.glob == name)?;
                p.row_cells(&p.conn_shape_of_glob(name), Some(&pat.row), &modes)
            }
            SubjectKind::Unknown => {
                let shape: ConnShape = p.conn_shape_of_glob("*");
                p.row_cells(&shape, t.defaults.as_ref(), &modes)
            }
        };
        Some(
            cells
                .into_iter()
                .map(|c| ((c.mode.clone(), c.intent.clone()), c))
                .collect(),
        )
    }

    fn meta(&self, kind: SubjectKind, name: &str) -> Option<(Option<String>, Vec<String>)> {
        let t = self.policy.tables();
        let row = match kind {
            SubjectKind::Tool => t.tool_index.get(name).map(|&i| &t.tools[i as usize].1),
            SubjectKind::Pattern => t.patterns.iter().find(|x| &*x.glob == name).map(|x| &x.row),
            SubjectKind::Unknown => t.defaults.as_ref(),
        };
        match (kind, row) {
            (SubjectKind::Unknown, None) => Some((None, Vec::new())),
            (_, None) => None,
            (_, Some(r)) => Some((
                Some(t.effects[r.effect as usize].to_string()),
                r.requires.iter().map(|s| s.to_string()).collect(),
            )),
        }
    }
}

impl Side<'_> {
    /// The evaluation row of a subject on this side (the one its cells come from).
    fn row(&self, kind: SubjectKind, name: &str) -> Option<&crate::compile::ToolRow> {
        let t = self.policy.tables();
        match kind {
            SubjectKind::Tool => self.policy.resolve_tool(name).1,
            SubjectKind::Pattern => t.patterns.iter().find(|x| &*x.glob == name).map(|x| &x.row),
            SubjectKind::Unknown => t.defaults.as_ref(),
        }
    }

    /// This side's label mask for the label names of `set` (bits over `union`); labels it does
    /// not declare are not on its session.
    fn mask(&self, union: &[String], set: u32) -> u8 {
        self.policy
            .labels()
            .enumerate()
            .filter(|(_, l)| {
                union
                    .iter()
                    .position(|u| u == l)
                    .is_some_and(|i| set & (1u32 << i) != 0)
            })
            .fold(0u8, |m, (i, _)| m | (1u8 << i))
    }
}

/// Most labels whose every subset the diff compares; with more (a policy renamed most of its
/// labels), only the subsets of one side's labels are compared.
const MAX_UNION_LABELS: usize = 10;

/// The label sets the diff compares, as bit sets over `union`, fewest labels first: every
/// non-empty subset of the union of both versions' labels, or (beyond
/// [`MAX_UNION_LABELS`]) every non-empty subset of one version's labels.
fn label_sets(a: &Side<'_>, b: &Side<'_>, union: &[String]) -> Vec<u32> {
    let mut sets: Vec<u32> = if union.len() <= MAX_UNION_LABELS {
        (1..(1u32 << union.len())).collect()
    } else {
        let side = |s: &Side<'_>| -> u32 {
            s.policy
                .labels()
                .filter_map(|l| union.iter().position(|u| u == l))
                .fold(0u32, |m, i| m | (1u32 << i))
        };
        let mut out = BTreeSet::new();
        for all in [side(a), side(b)] {
            // Every non-empty subset of `all`.
            let mut sub = all;
            while sub != 0 {
                out.insert(sub);
                sub = (sub - 1) & all;
            }
        }
        out.into_iter().collect()
    };
    sets.sort_by_key(|s| (s.count_ones(), *s));
    sets
}

/// Whether the pair of outcomes `(old, new)` `q` is the change `p` already shows: the same
/// pair, or (when `p` moves) the same new outcome reached from the same old decision (the old
/// outcome's reason may differ: a label the old version already judged, say).
fn same_change(
    p: &(Option<Outcome>, Option<Outcome>),
    q: &(Option<Outcome>, Option<Outcome>),
) -> bool {
    let decision = |o: &Option<Outcome>| o.as_ref().map(|o| o.decision);
    p == q || (p.0 != p.1 && p.1 == q.1 && decision(&p.0) == decision(&q.0))
}

/// The cells that move for a session holding some label set (see [`PolicyDiff::compute`]):
/// for each set, each subject and each cell, the two versions' outcomes with the `after`
/// blocks of that set. A cell is reported under a set when its outcomes differ and the change
/// is not already that of a set with one label fewer (the set without labels included; see
/// [`same_change`]): so each change shows once, under the smallest sets where it appears.
fn flow_cells(
    a: &Side<'_>,
    b: &Side<'_>,
    subjects: &BTreeSet<(SubjectKind, String)>,
    modes: &[String],
    intents: &[String],
) -> Vec<CellChange> {
    let mut union: Vec<String> = strings(a.policy.labels());
    union.extend(
        b.policy
            .labels()
            .filter(|l| !union.iter().any(|u| u == l))
            .map(str::to_string)
            .collect::<Vec<_>>(),
    );
    let sets = label_sets(a, b, &union);
    if sets.is_empty() {
        return Vec::new();
    }
    let names = |set: u32| -> Vec<String> {
        union
            .iter()
            .enumerate()
            .filter(|(i, _)| set & (1u32 << i) != 0)
            .map(|(_, l)| l.clone())
            .collect()
    };
    let masks: Vec<(u8, u8)> = sets
        .iter()
        .map(|&s| (a.mask(&union, s), b.mask(&union, s)))
        .collect();
    let mode_index = |side: &Side<'_>, mode: &str| side.modes.iter().position(|m| m == mode);
    let mut out = Vec::new();
    for (kind, name) in subjects {
        let (co, cn) = (a.cells(*kind, name), b.cells(*kind, name));
        let (ro, rn) = (a.row(*kind, name), b.row(*kind, name));
        for mode in modes {
            for intent in intents {
                let key = (mode.clone(), intent.clone());
                let x = co.as_ref().and_then(|c| c.get(&key));
                let y = cn.as_ref().and_then(|c| c.get(&key));
                // One side's cell for the label mask `mask`.
                let under = |side: &Side<'_>, cell: Option<&TableCell>, row, mask: u8| {
                    let cell = cell?;
                    match (row, mode_index(side, mode)) {
                        (Some(row), Some(m)) => {
                            Some(
                                side.policy
                                    .flow_cell(row, m, mask, &cell.outcome, &cell.steps),
                            )
                        }
                        _ => Some((cell.outcome.clone(), cell.steps.clone())),
                    }
                };
                let base = (x.map(|c| c.outcome.clone()), y.map(|c| c.outcome.clone()));
                let mut pairs: BTreeMap<u32, (Option<Outcome>, Option<Outcome>)> = BTreeMap::new();
                for (&set, &(mo, mn)) in sets.iter().zip(&masks) {
                    let (fx, fy) = (under(a, x, ro, mo), under(b, y, rn, mn));
                    let pair = (
                        fx.as_ref().map(|f| f.0.clone()),
                        fy.as_ref().map(|f| f.0.clone()),
                    );
                    let inherited = (0..union.len())
                        .filter(|i| set & (1u32 << i) != 0)
                        .any(|i| {
                            let smaller = set & !(1u32 << i);
                            let p = if smaller == 0 {
                                Some(&base)
                            } else {
                                pairs.get(&smaller)
                            };
                            p.is_some_and(|p| same_change(p, &pair))
                        });
                    if pair.0 != pair.1 && !inherited {
                        let (rule_o, rule_n) = deciding_rules(
                            fx.as_ref().map(|f| f.1.as_slice()),
                            fy.as_ref().map(|f| f.1.as_slice()),
                        );
                        let moved = match (&pair.0, &pair.1) {
                            (Some(p), Some(q)) if p.decision == q.decision => Moved::Reason,
                            _ => Moved::Decision,
                        };
                        let label = rule_n
                            .map(|r| rule_label(b.policy, r))
                            .filter(|l| !l.is_empty())
                            .or_else(|| rule_o.map(|r| rule_label(a.policy, r)))
                            .unwrap_or_default();
                        out.push(CellChange {
                            moved,
                            kind: *kind,
                            name: name.clone(),
                            mode: mode.clone(),
                            intent: intent.clone(),
                            old: pair.0.clone(),
                            new: pair.1.clone(),
                            rule: rule_n.and_then(|r| RuleRef::of(b.policy, r)),
                            old_rule: rule_o.and_then(|r| RuleRef::of(a.policy, r)),
                            label,
                            labels: names(set),
                        });
                    }
                    pairs.insert(set, pair);
                }
            }
        }
    }
    out
}

/// The first stage whose symbolic result differs, with the rules read there on each side.
fn deciding_rules(
    old: Option<&[SymStep]>,
    new: Option<&[SymStep]>,
) -> (
    Option<crate::decision::RuleId>,
    Option<crate::decision::RuleId>,
) {
    match (old, new) {
        (Some(o), Some(n)) => {
            for stage in crate::decision::Stage::ALL {
                let a = o.iter().find(|s| s.stage == stage);
                let b = n.iter().find(|s| s.stage == stage);
                let sym = |s: Option<&SymStep>| s.map_or(Sym::NotApplicable, |s| s.sym.clone());
                if sym(a) != sym(b) {
                    return (a.and_then(|s| s.rule), b.and_then(|s| s.rule));
                }
            }
            (None, None)
        }
        (None, Some(n)) => (None, n.last().and_then(|s| s.rule)),
        (Some(o), None) => (o.last().and_then(|s| s.rule), None),
        (None, None) => (None, None),
    }
}

/// Whitespace runs as one space, cut to 80 characters (with `…`).
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 80 {
        let mut cut: String = flat.chars().take(79).collect();
        cut.push('…');
        cut
    } else {
        flat
    }
}

/// The one-line label of `rule` (see [`CellChange::label`]).
fn rule_label(p: &Policy, rule: RuleId) -> String {
    let t = p.tables();
    let text = one_line(p.rule_text(rule));
    if text.is_empty() {
        return text;
    }
    match t.rules.get(rule.0 as usize).map(|r| &r.kind) {
        Some(RuleKind::Cell { matrix, intent }) => {
            let ne = t.effects.len();
            let i = *intent as usize;
            let effect = t
                .matrices
                .get(*matrix as usize)
                .and_then(|m| (0..ne).find(|&e| m.cell_rule.get(i * ne + e) == Some(&rule)));
            format!(
                "matrix {}, {} × {}: {text}",
                t.matrix_names.get(*matrix as usize).map_or("?", |n| &**n),
                t.intents.get(i).map_or("?", |n| &**n),
                effect.and_then(|e| t.effects.get(e)).map_or("?", |n| &**n),
            )
        }
        Some(RuleKind::Restrict | RuleKind::ModeConfirm) => {
            match t
                .modes
                .iter()
                .find(|m| m.rule_restrict == rule || m.rule_confirm == rule)
            {
                Some(m) => format!("mode {}: {text}", m.name),
                None => text,
            }
        }
        Some(RuleKind::NoMatrix) => format!("mode {text} (no matrix)"),
        Some(RuleKind::AfterLine) => format!("{}: {text}", p.after_head(p.after_of(rule))),
        _ => text,
    }
}

/// The subject as a summary names it: `` `tool x` ``, `` `pattern mcp__*` ``, `undeclared
/// names`.
fn subject(kind: SubjectKind, name: &str) -> String {
    match kind {
        SubjectKind::Unknown => "undeclared names".to_string(),
        _ => format!("`{} {name}`", kind.as_str()),
    }
}

fn cells_word(n: usize) -> &'static str {
    if n == 1 {
        "cell"
    } else {
        "cells"
    }
}

/// What differs between two outcomes of the same decision, shortly: the stage (`deny at
/// intent` → `deny at identity`), else the conditions (`if role clerk|lead` → `if role
/// clerk`), else what a forced name gets (`forced: confirm` → `forced: deny`).
fn reason_pair(a: &Outcome, b: &Outcome) -> (String, String) {
    let stage = |o: &Outcome| match o.stage {
        Some(s) => format!("{} at {s}", o.decision),
        None => o.decision.to_string(),
    };
    let when = |o: &Outcome| {
        let c = o.conditions.to_text();
        if c.is_empty() {
            "unconditionally".to_string()
        } else {
            format!("if {c}")
        }
    };
    let forced = |o: &Outcome| {
        o.forced
            .map_or("forced: (not applicable)".to_string(), |f| {
                format!("forced: {f}")
            })
    };
    if a.stage != b.stage {
        (stage(a), stage(b))
    } else if a.conditions != b.conditions {
        (when(a), when(b))
    } else if a.after != b.after {
        let after = |o: &Outcome| {
            o.after
                .clone()
                .unwrap_or_else(|| "no after block".to_string())
        };
        (after(a), after(b))
    } else {
        (forced(a), forced(b))
    }
}

/// Groups `cells` (decisions first) by subject and deciding rule, with their summaries.
fn group_cells(cells: &[CellChange]) -> Vec<CellGroup> {
    let show = |o: &Option<Outcome>| o.as_ref().map_or("(no cell)".to_string(), Outcome::to_text);
    let word = |o: &Option<Outcome>| {
        o.as_ref()
            .map_or("(no cell)".to_string(), |o| o.decision.to_string())
    };
    let mut groups: Vec<CellGroup> = Vec::new();
    // Per group, the summary's (old, new) pairs with their counts.
    let mut pairs: Vec<Vec<((String, String), usize)>> = Vec::new();
    fn location(r: &Option<RuleRef>) -> Option<&str> {
        r.as_ref().map(|r| r.location.as_str())
    }
    // A group's key: what moved, the subject, the label and the rule's location on each side.
    type Key<'c> = (
        Moved,
        SubjectKind,
        &'c str,
        &'c [String],
        &'c str,
        Option<&'c str>,
        Option<&'c str>,
    );
    let mut index: std::collections::HashMap<Key<'_>, usize> = std::collections::HashMap::new();
    for c in cells {
        let key: Key<'_> = (
            c.moved,
            c.kind,
            &c.name,
            &c.labels,
            &c.label,
            location(&c.rule),
            location(&c.old_rule),
        );
        let i = *index.entry(key).or_insert_with(|| {
            groups.push(CellGroup {
                moved: c.moved,
                kind: c.kind,
                name: c.name.clone(),
                label: c.label.clone(),
                labels: c.labels.clone(),
                rule: c.rule.clone(),
                old_rule: c.old_rule.clone(),
                count: 0,
                summary: String::new(),
                transitions: Vec::new(),
            });
            pairs.push(Vec::new());
            groups.len() - 1
        });
        let g = &mut groups[i];
        g.count += 1;
        let (old, new) = (show(&c.old), show(&c.new));
        let intent = if c.intent.is_empty() { "*" } else { &c.intent };
        let cell = format!("{}/{intent}", c.mode);
        match g
            .transitions
            .iter_mut()
            .find(|t| t.old == old && t.new == new)
        {
            Some(t) => t.cells.push(cell),
            None => g.transitions.push(Transition {
                old: old.clone(),
                new: new.clone(),
                cells: vec![cell],
            }),
        }
        let pair = match (c.moved, &c.old, &c.new) {
            (Moved::Reason, Some(a), Some(b)) => reason_pair(a, b),
            _ => (word(&c.old), word(&c.new)),
        };
        match pairs[i].iter_mut().find(|(p, _)| *p == pair) {
            Some((_, n)) => *n += 1,
            None => pairs[i].push((pair, 1)),
        }
    }
    for (g, pairs) in groups.iter_mut().zip(pairs) {
        let moves: Vec<String> = pairs
            .iter()
            .map(|((a, b), n)| format!("{n} {} {a} → {b}", cells_word(*n)))
            .collect();
        let label = if g.label.is_empty() {
            "(no rule)"
        } else {
            &g.label
        };
        let with = if g.labels.is_empty() {
            String::new()
        } else {
            format!(" with labels {}", g.labels.join(", "))
        };
        g.summary = format!(
            "{}{with}: {label} — {}",
            subject(g.kind, &g.name),
            moves.join(", ")
        );
    }
    groups
}

impl PolicyDiff {
    /// Compares `old` with `new` over the whole decision space (see the module docs).
    /// Never fails: policies with different effects, intents, modes or tools still compare,
    /// the cells one of them lacks showing as added or removed.
    pub fn compute(old: &Policy, new: &Policy) -> PolicyDiff {
        let mut diff = PolicyDiff::default();
        let (so, sn) = (settings_of(old), settings_of(new));
        let (to, tn) = (old.tables(), new.tables());
        let roles = relation_change(&Closed::roles(to), &Closed::roles(tn), "includes");
        let permissions = relation_change(
            &Closed::permissions(to),
            &Closed::permissions(tn),
            "implies",
        );
        for (k, v) in &so {
            let w = sn.get(k).cloned().unwrap_or_default();
            if *v != w {
                set_change(k, std::slice::from_ref(v), &[w], &mut diff.settings);
            }
            // Roles and permissions come after `modes`, where the full listing used to sort.
            if *k == "modes" {
                for (what, change) in [("permissions", &permissions), ("roles", &roles)] {
                    if let Some((a, b)) = change {
                        set_change(
                            what,
                            std::slice::from_ref(a),
                            std::slice::from_ref(b),
                            &mut diff.settings,
                        );
                    }
                }
            }
        }
        let (fo, fn_) = (flow_of(old), flow_of(new));
        for k in fo.keys().chain(fn_.keys()).collect::<BTreeSet<_>>() {
            let (v, w) = (fo.get(k).cloned(), fn_.get(k).cloned());
            if v != w {
                set_change(
                    k,
                    &v.into_iter().collect::<Vec<_>>(),
                    &w.into_iter().collect::<Vec<_>>(),
                    &mut diff.settings,
                );
            }
        }
        let (ko, kn) = (keywords_of(old), keywords_of(new));
        diff.keywords_added = kn.difference(&ko).cloned().collect();
        diff.keywords_removed = ko.difference(&kn).cloned().collect();

        let (a, b) = (Side::new(old), Side::new(new));
        let subjects = subjects_of(old, new);

        // Cell keys: the union of modes × the union of intents, in old order then new.
        let mut modes: Vec<String> = a.modes.clone();
        modes.extend(b.modes.iter().filter(|m| !a.modes.contains(m)).cloned());
        let mut intents: Vec<String> = a.intents.clone();
        intents.extend(b.intents.iter().filter(|i| !a.intents.contains(i)).cloned());

        for (kind, name) in &subjects {
            let (mo, mn) = (a.meta(*kind, name), b.meta(*kind, name));
            let change = match (&mo, &mn) {
                (None, Some(_)) => Some("added"),
                (Some(_), None) => Some("removed"),
                (Some(x), Some(y)) if x != y => Some("changed"),
                _ => None,
            };
            if let Some(change) = change {
                diff.rows.push(RowChange {
                    kind: *kind,
                    name: name.clone(),
                    change,
                    old: mo.clone(),
                    new: mn.clone(),
                });
            }
            let (co, cn) = (a.cells(*kind, name), b.cells(*kind, name));
            for mode in &modes {
                for intent in &intents {
                    let key = (mode.clone(), intent.clone());
                    let x = co.as_ref().and_then(|c| c.get(&key));
                    let y = cn.as_ref().and_then(|c| c.get(&key));
                    if x.map(|c| &c.outcome) == y.map(|c| &c.outcome) {
                        continue;
                    }
                    let (ro, rn) = deciding_rules(
                        x.map(|c| c.steps.as_slice()),
                        y.map(|c| c.steps.as_slice()),
                    );
                    let moved = match (x, y) {
                        (Some(x), Some(y)) if x.outcome.decision == y.outcome.decision => {
                            Moved::Reason
                        }
                        _ => Moved::Decision,
                    };
                    let label = rn
                        .map(|r| rule_label(new, r))
                        .filter(|l| !l.is_empty())
                        .or_else(|| ro.map(|r| rule_label(old, r)))
                        .unwrap_or_default();
                    diff.cells.push(CellChange {
                        moved,
                        label,
                        kind: *kind,
                        name: name.clone(),
                        mode: mode.clone(),
                        intent: intent.clone(),
                        old: x.map(|c| c.outcome.clone()),
                        new: y.map(|c| c.outcome.clone()),
                        rule: rn.and_then(|r| RuleRef::of(new, r)),
                        old_rule: ro.and_then(|r| RuleRef::of(old, r)),
                        labels: Vec::new(),
                    });
                }
            }
        }
        diff.cells
            .extend(flow_cells(&a, &b, &subjects, &modes, &intents));
        // Decisions first, reasons after; each in subject, mode and intent order (a cell of
        // a label set after the cells without labels).
        diff.cells.sort_by_key(|c| c.moved);
        diff.groups = group_cells(&diff.cells);
        diff.rules = super::rule_changes::rule_changes(old, new);
        diff
    }

    /// Adds the queries whose classification differs between `old` and `new`.
    pub fn with_queries<'q>(
        mut self,
        old: &Policy,
        new: &Policy,
        queries: impl IntoIterator<Item = &'q str>,
    ) -> PolicyDiff {
        for q in queries {
            self.queries_checked += 1;
            let (x, y) = (old.classify(q), new.classify(q));
            if x.intents != y.intents {
                self.queries.push(QueryChange {
                    text: q.to_string(),
                    old: x.intents.iter().map(ArcStr::to_string).collect(),
                    new: y.intents.iter().map(ArcStr::to_string).collect(),
                    new_hits: y
                        .hits
                        .iter()
                        .map(|h| format!("{}:{}", h.intent, h.keyword))
                        .collect(),
                });
            }
        }
        self
    }

    /// Adds the recorded `calls` (from [`super::replay::parse_recording`]) whose verdict
    /// moves between `old` and `new` (see [`super::replay`]).
    pub fn with_calls(
        mut self,
        old: &Policy,
        new: &Policy,
        calls: &[(usize, super::replay::RecordedCall)],
    ) -> PolicyDiff {
        self.calls_checked += calls.len();
        self.calls.extend(super::replay::replay(old, new, calls));
        self
    }

    /// Whether nothing moved.
    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
            && self.rows.is_empty()
            && self.cells.is_empty()
            && self.rules.is_empty()
            && self.keywords_added.is_empty()
            && self.keywords_removed.is_empty()
            && self.queries.is_empty()
            && self.calls.is_empty()
    }

    /// How many changed cells moved a decision, and how many only a reason.
    pub fn moved_counts(&self) -> (usize, usize) {
        let decisions = self
            .cells
            .iter()
            .filter(|c| c.moved == Moved::Decision)
            .count();
        (decisions, self.cells.len() - decisions)
    }

    /// The diff as human text for review: the decisions that moved, then the reasons that
    /// moved (one summary line per subject and rule, its cells under it), the declarations,
    /// rows, argument rules, keywords, queries and recorded calls that changed, and a summary
    /// line (`N cells changed: ...`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let (decisions, reasons) = self.moved_counts();
        for (moved, count, title) in [
            (Moved::Decision, decisions, "decisions moved"),
            (
                Moved::Reason,
                reasons,
                "reasons moved (same decision, another stage, rule or condition)",
            ),
        ] {
            if count == 0 {
                continue;
            }
            out.push_str(&format!("{title}: {count} {}\n", cells_word(count)));
            for g in self.groups.iter().filter(|g| g.moved == moved) {
                out.push_str(&format!("  {}\n", g.summary));
                if let Some(r) = &g.rule {
                    out.push_str(&format!("      by {}\n", r.one_line()));
                }
                if let Some(r) = &g.old_rule {
                    if g.rule.as_ref().map(|n| n.line.trim()) != Some(r.line.trim()) {
                        out.push_str(&format!("      was {}\n", r.one_line()));
                    }
                }
                for t in &g.transitions {
                    out.push_str(&format!(
                        "      {}: {} → {}\n",
                        t.cells.join(", "),
                        t.old,
                        t.new
                    ));
                }
            }
        }
        if !self.settings.is_empty() {
            out.push_str("declarations:\n");
            for s in &self.settings {
                out.push_str(&format!("  ~ {s}\n"));
            }
        }
        if !self.rows.is_empty() {
            out.push_str("rows:\n");
            for r in &self.rows {
                let fmt = |m: &Option<(Option<String>, Vec<String>)>| match m {
                    None => String::new(),
                    Some((e, req)) => {
                        let mut s = format!("effect {}", e.as_deref().unwrap_or("-"));
                        if !req.is_empty() {
                            s.push_str(&format!(" requires {}", req.join(", ")));
                        }
                        s
                    }
                };
                let sign = match r.change {
                    "added" => "+",
                    "removed" => "-",
                    _ => "~",
                };
                let detail = match r.change {
                    "added" => fmt(&r.new),
                    "removed" => fmt(&r.old),
                    _ => format!("{} -> {}", fmt(&r.old), fmt(&r.new)),
                };
                out.push_str(&format!(
                    "  {sign} {} {} ({}): {detail}\n",
                    r.kind.as_str(),
                    r.name,
                    r.change
                ));
            }
        }
        if !self.rules.is_empty() {
            out.push_str("argument rules:\n");
            for r in &self.rules {
                out.push_str(&r.render());
            }
        }
        if !self.keywords_added.is_empty() || !self.keywords_removed.is_empty() {
            out.push_str("keywords:\n");
            for k in &self.keywords_added {
                out.push_str(&format!("  + {k}\n"));
            }
            for k in &self.keywords_removed {
                out.push_str(&format!("  - {k}\n"));
            }
        }
        if !self.queries.is_empty() {
            out.push_str("queries:\n");
            for q in &self.queries {
                out.push_str(&format!(
                    "  ~ {:?}: {} -> {}{}\n",
                    q.text,
                    list(&q.old),
                    list(&q.new),
                    if q.new_hits.is_empty() {
                        String::new()
                    } else {
                        format!(" (hits {})", q.new_hits.join(", "))
                    }
                ));
            }
        }
        if !self.calls.is_empty() {
            out.push_str("calls:\n");
            for c in &self.calls {
                out.push_str(&c.render());
            }
        }
        let plural = |n: usize, one: &'static str, many: &'static str| {
            if n == 1 {
                one
            } else {
                many
            }
        };
        out.push_str(&format!(
            "{} {} changed: {decisions} decision{} moved, {reasons} reason{} moved; {} row{} added/removed/changed, {} declaration{} changed, {} argument-rule change{}, {} keyword{} added, {} removed, {} of {} quer{} reclassified",
            self.cells.len(),
            cells_word(self.cells.len()),
            plural(decisions, "", "s"),
            plural(reasons, "", "s"),
            self.rows.len(),
            plural(self.rows.len(), "", "s"),
            self.settings.len(),
            plural(self.settings.len(), "", "s"),
            self.rules.len(),
            plural(self.rules.len(), "", "s"),
            self.keywords_added.len(),
            plural(self.keywords_added.len(), "", "s"),
            self.keywords_removed.len(),
            self.queries.len(),
            self.queries_checked,
            plural(self.queries_checked, "y", "ies"),
        ));
        if self.calls_checked > 0 {
            out.push_str(&format!(
                ", {} of {} call{} moved",
                self.calls.len(),
                self.calls_checked,
                plural(self.calls_checked, "", "s")
            ));
        }
        out.push('\n');
        out
    }
}
