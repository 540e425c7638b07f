//! Checked model -> decision graph (petgraph) -> dense evaluation tables.
//!
//! The graph's nodes are the policy's tools, patterns, effects, intents, matrix cells, modes,
//! roles, permissions and tiers; its edges are the relations the text declares (tool
//! -has-effect-> effect, role -includes-> role, permission -implies-> permission, mode -uses->
//! cell -for-> intent / -on-> effect, tier -precedes-> tier …). The tables are derived from the
//! graph: role and permission closures are graph reachability; each mode's per-intent effect
//! masks come from the cells it uses. `offer` and `check_call` read only the tables.

mod bits;
mod lexicon;

use std::thread;

use rustc_hash::FxHashMap;

use petgraph::graph::{DiGraph, NodeIndex};

use crate::check::{AfterModel, AttrModel, Cell, Model, RuleModel};
use crate::classify::Classifier;
use crate::condition::CompiledCondition;
use crate::decision::RuleId;
use crate::relation::Relation;
use crate::syntax::ast::{RuleOutcome, Span};

pub(crate) use bits::BitSet;

/// A node of the decision graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// A declared tool (index among tools).
    Tool(u32),
    /// A `match` pattern (index among patterns).
    Pattern(u32),
    /// An effect.
    Effect(u8),
    /// An intent.
    Intent(u8),
    /// A matrix cell: matrix, intent, effect, and its value.
    Cell {
        /// Matrix index.
        matrix: u16,
        /// Intent index.
        intent: u8,
        /// Effect index.
        effect: u8,
        /// The cell's value.
        cell: Cell,
    },
    /// A mode.
    Mode(u8),
    /// A role.
    Role(u32),
    /// A permission.
    Permission(u32),
    /// A connector tier.
    Tier(u8),
}

/// An edge of the decision graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Edge {
    /// Tool or pattern -> its effect.
    HasEffect,
    /// Tool or pattern -> a permission it requires.
    Requires,
    /// Tool or pattern -> a role it accepts.
    Accepts,
    /// Higher role -> lower role it includes.
    Includes,
    /// Permission -> permission it implies.
    Implies,
    /// Mode -> a cell of the matrix it uses.
    Uses,
    /// Cell -> its intent.
    ForIntent,
    /// Cell -> its effect.
    OnEffect,
    /// Mode -> an effect in its `restrict` ceiling.
    Restricts,
    /// Mode -> an effect in its `confirm` list.
    Confirms,
    /// Higher-precedence tier -> the next tier.
    Precedes,
    /// Higher-priority intent -> the next intent.
    Outranks,
}

/// One compiled argument rule.
#[derive(Clone, Debug)]
pub(crate) struct ArgRule {
    pub outcome: RuleOutcome,
    pub condition: CompiledCondition,
    /// The rule's canonical text (`deny when amount > 10000`), as `toolwarden fmt` prints it.
    pub text: Box<str>,
    /// Its entry in the rule table (span, kind [`RuleKind::Argument`]).
    pub rule: RuleId,
}

/// Appends `rules` to `out` (each with a rule-table entry) and returns their range.
fn push_rules(
    rules: &[RuleModel],
    out: &mut Vec<ArgRule>,
    table: &mut RuleTable,
) -> std::ops::Range<u32> {
    let start = idx32(out.len());
    for r in rules {
        out.push(ArgRule {
            outcome: r.outcome,
            condition: r.condition.clone(),
            text: r.text.clone(),
            rule: table.add(Some(r.span), RuleKind::Argument),
        });
    }
    start..idx32(out.len())
}

/// Where a rule came from and what kind of rule it is.
#[derive(Clone, Debug)]
pub(crate) struct RuleInfo {
    pub span: Option<Span>,
    pub kind: RuleKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RuleKind {
    ToolDecl,
    PatternDecl,
    Defaults,
    UnknownDeny,
    Disabled,
    Tiers,
    TenantRequired,
    Roles,
    Permissions,
    Restrict,
    Cell {
        matrix: u16,
        intent: u8,
    },
    ModeConfirm,
    ConfirmAlways,
    TenantArg,
    Requires,
    ConfirmFields,
    Limit,
    NoMatrix,
    /// An argument rule (`deny when ...`, `confirm when ...`).
    Argument,
    /// A `confirm EFFECTS` or `deny EFFECTS` line of an `after` block.
    AfterLine,
}

/// One compiled `after` block.
#[derive(Clone, Debug)]
pub(crate) struct AfterRow {
    /// The labels that must all be on the session.
    pub labels: u8,
    /// The mode whose block it is; `None` for a top-level block (every mode).
    pub mode: Option<u8>,
    /// Its `confirm` and `deny` lines: the outcome, the effects as a mask, the line's rule.
    pub lines: Vec<(RuleOutcome, u64, RuleId)>,
    /// Its argument rules: a range of [`Tables::arg_rules`].
    pub arg_rules: std::ops::Range<u32>,
}

impl AfterRow {
    /// Whether the block applies in mode `mode` to a session holding `labels`.
    #[inline]
    pub fn applies(&self, mode: usize, labels: u8) -> bool {
        self.labels & labels == self.labels && self.mode.is_none_or(|m| usize::from(m) == mode)
    }
}

/// What the `after` blocks that apply to one mode and one label set do: the effects they deny,
/// the effects they make confirm, and whether any of them has argument rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlowMasks {
    pub deny: u64,
    pub confirm: u64,
    pub rules: bool,
}

/// One tool's (or pattern's) evaluation row.
#[derive(Clone, Debug)]
pub(crate) struct ToolRow {
    pub effect: u8,
    /// Accepted roles (any one suffices); `None` = no role restriction.
    pub roles: Option<BitSet>,
    /// Required permissions (all of them); empty = none.
    pub perms: BitSet,
    pub tenant_required: bool,
    pub requires: Box<[Box<str>]>,
    pub confirm_always: bool,
    pub enabled: bool,
    pub rule_decl: RuleId,
    pub rule_disabled: RuleId,
    pub rule_tenant: RuleId,
    pub rule_roles: RuleId,
    pub rule_perms: RuleId,
    pub rule_confirm: RuleId,
    pub rule_requires: RuleId,
    /// Its own argument rules: a range of [`Tables::arg_rules`].
    pub arg_rules: std::ops::Range<u32>,
    /// The labels a call of the tool puts on the session (`taints`), as a mask over
    /// [`Tables::labels`].
    pub taints: u8,
    /// For a declared tool named `<prefix><server>__<tool>`: the server's index in
    /// [`Tables::servers`]; [`NO_SERVER`] otherwise (and for patterns and defaults, whose
    /// names are only known at decision time).
    pub server: u32,
}

/// [`ToolRow::server`] of a row without a precomputed connector server.
pub(crate) const NO_SERVER: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub(crate) struct PatternRow {
    pub glob: Box<str>,
    pub row: ToolRow,
    /// Index in source order (patterns are stored in precedence order).
    pub source_index: u32,
}

/// Per intent, the effects a matrix offers and the effects it marks `confirm`.
#[derive(Clone, Debug)]
pub(crate) struct MatrixTable {
    pub allow: Vec<u64>,
    pub confirm: Vec<u64>,
    /// `cell_rule[intent * n_effects + effect]`.
    pub cell_rule: Vec<RuleId>,
}

#[derive(Clone, Debug)]
pub(crate) struct ModeRow {
    pub name: Box<str>,
    pub restrict: u64,
    pub rule_restrict: RuleId,
    pub confirm: u64,
    pub rule_confirm: RuleId,
    pub matrix: Option<u16>,
    pub rule_no_matrix: RuleId,
}

/// Everything the evaluator reads.
#[derive(Clone, Debug)]
pub(crate) struct Tables {
    pub effects: Vec<Box<str>>,
    /// The effect named `none`, when declared: the only read-only (non-transactional) effect.
    pub read_only_effect: Option<u8>,
    pub intents: Vec<Box<str>>,
    pub tools: Vec<(Box<str>, ToolRow)>,
    /// Tool name -> index in `tools` (FxHash: short keys, no untrusted-key DoS concern since
    /// the keys are the policy's own names).
    pub tool_index: FxHashMap<Box<str>, u32>,
    /// The connector servers that declared tool names mention, interned (see `ToolRow::server`).
    pub servers: Vec<Box<str>>,
    pub patterns: Vec<PatternRow>,
    pub matrices: Vec<MatrixTable>,
    pub matrix_names: Vec<Box<str>>,
    pub modes: Vec<ModeRow>,
    pub default_mode: Option<u8>,
    pub roles: Vec<Box<str>>,
    pub role_closure: Vec<BitSet>,
    /// The declared inclusions `(higher, lower)`, as indexes in `roles`.
    pub role_edges: Vec<(u32, u32)>,
    /// Role name -> index in `roles`.
    pub role_index: FxHashMap<Box<str>, u32>,
    /// Permission name -> index in `permissions`.
    pub perm_index: FxHashMap<Box<str>, u32>,
    pub permissions: Vec<Box<str>>,
    pub perm_closure: Vec<BitSet>,
    /// The declared implications `(permission, implied)`, as indexes in `permissions`.
    pub perm_edges: Vec<(u32, u32)>,
    pub tiers: Vec<Box<str>>,
    pub rule_tiers: RuleId,
    pub prefix: Option<Box<str>>,
    pub rule_unknown: RuleId,
    pub defaults: Option<ToolRow>,
    pub confirm_fields: Vec<Box<str>>,
    pub rule_confirm_fields: RuleId,
    pub tenant_arg: Option<Box<str>>,
    pub rule_tenant_arg: RuleId,
    pub limit: Option<u32>,
    pub rule_limit: RuleId,
    /// `trust annotations tighten` (the default): MCP annotations may make a decision stricter.
    pub annotations_tighten: bool,
    pub rules: Vec<RuleInfo>,
    /// Every argument rule: each row's own rules are a range of it, and so are the rules
    /// that apply to every tool ([`Tables::global_rules`]).
    pub arg_rules: Vec<ArgRule>,
    /// The rules of the `rules` and `defaults` blocks, which apply to every tool.
    pub global_rules: std::ops::Range<u32>,
    /// The declared `context` sets, by `ContextId`.
    pub contexts: Vec<Box<str>>,
    /// Whether the classifier folds accents (so `in query` normalizes values the same way).
    pub fold_accents: bool,
    /// The declared flow labels (at most eight): label `i` is bit `i` of a label mask.
    pub labels: Vec<Box<str>>,
    /// Every `after` block: the top-level ones, then each mode's, in source order.
    pub afters: Vec<AfterRow>,
    /// Per mode and label set, what the applicable `after` blocks do:
    /// `flow[mode << labels.len() | set]`. Precomputed so a decision with a session costs one
    /// lookup.
    pub flow: Vec<FlowMasks>,
    /// `taint openworld`: the labels a call of an MCP tool whose `openWorldHint` is true or
    /// missing adds, as a mask over [`Tables::labels`] (0 without the statement).
    pub openworld: u8,
}

impl Tables {
    /// What the `after` blocks do in mode `mode` for a session holding `labels`.
    #[inline]
    pub(crate) fn flow_masks(&self, mode: usize, labels: u8) -> FlowMasks {
        let set = usize::from(labels) & ((1usize << self.labels.len()) - 1);
        self.flow
            .get((mode << self.labels.len()) | set)
            .copied()
            .unwrap_or_default()
    }
}

/// The compiled form: graph, tables and classifier.
#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    pub graph: DiGraph<Node, Edge>,
    pub tables: Tables,
    pub classifier: Classifier,
}

struct RuleTable(Vec<RuleInfo>);

impl RuleTable {
    fn add(&mut self, span: Option<Span>, kind: RuleKind) -> RuleId {
        let id = RuleId(u32::try_from(self.0.len()).unwrap_or(u32::MAX));
        self.0.push(RuleInfo { span, kind });
        id
    }
}

fn mask(ids: &[usize]) -> u64 {
    ids.iter()
        .fold(0u64, |m, &e| m | (1u64 << (e as u32).min(63)))
}

fn idx8(i: usize) -> u8 {
    u8::try_from(i).unwrap_or(u8::MAX)
}

fn idx32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// The fewest tools for which the classifier is built on a thread of its own: below it, the
/// graph and tables take less time than starting the thread.
const CLASSIFIER_THREAD_TOOLS: usize = 256;

/// Compiles a checked model (which must have no errors), and runs `meanwhile` (work of the
/// caller's that does not need the result, such as freeing the syntax tree).
///
/// For a model of many tools, the classifier (an automaton over the lexicon, built in the same
/// time whatever the tools) is built on a second thread while this one builds the graph and the
/// tables and runs `meanwhile`; the result is the same.
pub(crate) fn compile(model: &Model, meanwhile: impl FnOnce()) -> Compiled {
    let lexicon = lexicon::lexicon(model);
    thread::scope(|scope| {
        let beside = (model.tools.len() >= CLASSIFIER_THREAD_TOOLS)
            .then(|| {
                thread::Builder::new()
                    .spawn_scoped(scope, || Classifier::build(&lexicon))
                    .ok()
            })
            .flatten();
        let (graph, tables) = graph_and_tables(model);
        meanwhile();
        let classifier = match beside.map(thread::ScopedJoinHandle::join) {
            Some(Ok(classifier)) => classifier,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Classifier::build(&lexicon),
        };
        Compiled {
            graph,
            tables,
            classifier,
        }
    })
}

/// The decision graph and the evaluator's tables of `model`.
fn graph_and_tables(model: &Model) -> (DiGraph<Node, Edge>, Tables) {
    let mut rules = RuleTable(Vec::new());
    let mut graph: DiGraph<Node, Edge> = DiGraph::new();

    let effect_nodes: Vec<NodeIndex> = (0..model.effects.len())
        .map(|i| graph.add_node(Node::Effect(idx8(i))))
        .collect();
    let intent_nodes: Vec<NodeIndex> = (0..model.intents.len())
        .map(|i| graph.add_node(Node::Intent(idx8(i))))
        .collect();
    for w in intent_nodes.windows(2) {
        graph.add_edge(w[0], w[1], Edge::Outranks);
    }
    let role_nodes: Vec<NodeIndex> = (0..model.roles.len())
        .map(|i| graph.add_node(Node::Role(idx32(i))))
        .collect();
    for (hi, lo, _) in &model.role_edges {
        graph.add_edge(role_nodes[*hi], role_nodes[*lo], Edge::Includes);
    }
    let perm_nodes: Vec<NodeIndex> = (0..model.permissions.len())
        .map(|i| graph.add_node(Node::Permission(idx32(i))))
        .collect();
    for (p, q, _) in &model.implies {
        graph.add_edge(perm_nodes[*p], perm_nodes[*q], Edge::Implies);
    }
    let tier_nodes: Vec<NodeIndex> = (0..model.tiers.len())
        .map(|i| graph.add_node(Node::Tier(idx8(i))))
        .collect();
    for w in tier_nodes.windows(2) {
        graph.add_edge(w[0], w[1], Edge::Precedes);
    }

    // Closures: one union per edge, in the order of the relation's components.
    let role_closure = closure(
        model.roles.len(),
        model.role_edges.iter().map(|&(a, b, _)| (a, b)),
    );
    let perm_closure = closure(
        model.permissions.len(),
        model.implies.iter().map(|&(a, b, _)| (a, b)),
    );

    // Matrices: cells as nodes, tables from the cells.
    let ne = model.effects.len();
    let mut matrices = Vec::new();
    let mut cell_nodes: Vec<Vec<NodeIndex>> = Vec::new();
    for (mi, m) in model.matrices.iter().enumerate() {
        let mut table = MatrixTable {
            allow: vec![0; model.intents.len()],
            confirm: vec![0; model.intents.len()],
            cell_rule: Vec::with_capacity(model.intents.len() * ne),
        };
        let mut nodes = Vec::new();
        for (i, row) in m.cells.iter().enumerate() {
            for (e, (cell, span)) in row.iter().enumerate() {
                let n = graph.add_node(Node::Cell {
                    matrix: u16::try_from(mi).unwrap_or(u16::MAX),
                    intent: idx8(i),
                    effect: idx8(e),
                    cell: *cell,
                });
                graph.add_edge(n, intent_nodes[i], Edge::ForIntent);
                graph.add_edge(n, effect_nodes[e], Edge::OnEffect);
                nodes.push(n);
                table.cell_rule.push(rules.add(
                    Some(*span),
                    RuleKind::Cell {
                        matrix: u16::try_from(mi).unwrap_or(u16::MAX),
                        intent: idx8(i),
                    },
                ));
            }
        }
        cell_nodes.push(nodes);
        matrices.push(table);
    }

    let all_effects = if ne >= 64 { u64::MAX } else { (1u64 << ne) - 1 };
    let mut modes = Vec::new();
    for (i, m) in model.modes.iter().enumerate() {
        let node = graph.add_node(Node::Mode(idx8(i)));
        if let Some((mx, _)) = m.matrix {
            for &c in &cell_nodes[mx] {
                graph.add_edge(node, c, Edge::Uses);
            }
        }
        if let Some((effects, _)) = &m.restrict {
            for &e in effects {
                graph.add_edge(node, effect_nodes[e], Edge::Restricts);
            }
        }
        if let Some((effects, _)) = &m.confirm {
            for &e in effects {
                graph.add_edge(node, effect_nodes[e], Edge::Confirms);
            }
        }
        modes.push(ModeRow {
            name: m.name.name.as_str().into(),
            restrict: m.restrict.as_ref().map_or(all_effects, |(e, _)| mask(e)),
            rule_restrict: rules.add(m.restrict.as_ref().map(|(_, s)| *s), RuleKind::Restrict),
            confirm: m.confirm.as_ref().map_or(0, |(e, _)| mask(e)),
            rule_confirm: rules.add(m.confirm.as_ref().map(|(_, s)| *s), RuleKind::ModeConfirm),
            matrix: m.matrix.map(|(x, _)| u16::try_from(x).unwrap_or(u16::MAX)),
            rule_no_matrix: rules.add(Some(m.name.span), RuleKind::NoMatrix),
        });
    }

    // Derive each matrix's masks from its cell nodes (the graph is the source of truth).
    for (mi, nodes) in cell_nodes.iter().enumerate() {
        for &n in nodes {
            if let Node::Cell {
                intent,
                effect,
                cell,
                ..
            } = graph[n]
            {
                let bit = 1u64 << effect.min(63);
                match cell {
                    Cell::Allow => matrices[mi].allow[intent as usize] |= bit,
                    Cell::Confirm => {
                        matrices[mi].allow[intent as usize] |= bit;
                        matrices[mi].confirm[intent as usize] |= bit;
                    }
                    Cell::Deny => {}
                }
            }
        }
    }

    let unknown_rule = rules.add(model.unknown_span, RuleKind::UnknownDeny);
    let row_of = |attrs: &AttrModel, decl_span: Span, kind: RuleKind, rules: &mut RuleTable| {
        let attrs = attrs.or(&model.defaults);
        let mut roles = attrs.roles.as_ref().map(|(ids, _)| {
            let mut set = BitSet::new(model.roles.len());
            for &r in ids {
                set.insert(r);
            }
            set
        });
        if roles.as_ref().is_some_and(|r| r.is_empty()) {
            // `roles` with every name undefined cannot occur in a checked model; an empty
            // list never matches.
            roles = Some(BitSet::new(model.roles.len()));
        }
        let mut perms = BitSet::new(model.permissions.len());
        if let Some((ids, _)) = &attrs.permissions {
            for &p in ids {
                perms.insert(p);
            }
        }
        ToolRow {
            effect: idx8(attrs.effect.map_or(0, |(e, _)| e)),
            roles,
            perms,
            tenant_required: attrs.tenant_required.is_some(),
            requires: attrs
                .requires
                .as_ref()
                .map(|(r, _)| r.iter().map(|s| s.as_str().into()).collect())
                .unwrap_or_default(),
            confirm_always: attrs.confirm_always.is_some(),
            enabled: attrs.enabled.is_none_or(|(v, _)| v),
            rule_decl: rules.add(Some(decl_span), kind),
            rule_disabled: rules.add(attrs.enabled.map(|(_, s)| s), RuleKind::Disabled),
            rule_tenant: rules.add(attrs.tenant_required, RuleKind::TenantRequired),
            rule_roles: rules.add(attrs.roles.as_ref().map(|(_, s)| *s), RuleKind::Roles),
            rule_perms: rules.add(
                attrs.permissions.as_ref().map(|(_, s)| *s),
                RuleKind::Permissions,
            ),
            rule_confirm: rules.add(attrs.confirm_always, RuleKind::ConfirmAlways),
            rule_requires: rules.add(attrs.requires.as_ref().map(|(_, s)| *s), RuleKind::Requires),
            server: NO_SERVER,
            arg_rules: 0..0,
            taints: label_mask(attrs.taints.as_ref().map_or(&[][..], |(l, _)| l)),
        }
    };
    let mut arg_rules: Vec<ArgRule> = Vec::new();
    let global_rules = push_rules(&model.rules, &mut arg_rules, &mut rules);

    let mut tools = Vec::with_capacity(model.tools.len());
    let mut tool_index = FxHashMap::with_capacity_and_hasher(model.tools.len(), Default::default());
    let mut servers: Vec<Box<str>> = Vec::new();
    let mut server_index: FxHashMap<&str, u32> = FxHashMap::default();
    for (i, t) in model.tools.iter().enumerate() {
        let mut row = row_of(&t.attrs, t.span, RuleKind::ToolDecl, &mut rules);
        row.arg_rules = push_rules(&t.rules, &mut arg_rules, &mut rules);
        if let Some(server) = model
            .prefix
            .as_ref()
            .and_then(|p| connector_server_of(&p.name, &t.name.name))
        {
            row.server = *server_index.entry(server).or_insert_with(|| {
                servers.push(server.into());
                idx32(servers.len() - 1)
            });
        }
        let node = graph.add_node(Node::Tool(idx32(i)));
        link_attrs(
            &mut graph,
            node,
            &row,
            &effect_nodes,
            &role_nodes,
            &perm_nodes,
        );
        tool_index.insert(t.name.name.as_str().into(), idx32(i));
        tools.push((t.name.name.as_str().into(), row));
    }
    let mut patterns: Vec<PatternRow> = Vec::with_capacity(model.patterns.len());
    for (i, p) in model.patterns.iter().enumerate() {
        let mut row = row_of(&p.attrs, p.span, RuleKind::PatternDecl, &mut rules);
        row.arg_rules = push_rules(&p.rules, &mut arg_rules, &mut rules);
        let node = graph.add_node(Node::Pattern(idx32(i)));
        link_attrs(
            &mut graph,
            node,
            &row,
            &effect_nodes,
            &role_nodes,
            &perm_nodes,
        );
        patterns.push(PatternRow {
            glob: p.glob.name.as_str().into(),
            row,
            source_index: idx32(i),
        });
    }
    // Precedence: longest literal text first, then source order.
    patterns.sort_by_key(|p| {
        let lit = p.glob.chars().filter(|c| *c != '*').count();
        (std::cmp::Reverse(lit), p.source_index)
    });
    let defaults = model.unknown_allow.then(|| {
        let span = model.unknown_span.unwrap_or_default();
        row_of(&AttrModel::default(), span, RuleKind::Defaults, &mut rules)
    });

    // `after` blocks: the top-level ones (every mode), then each mode's own.
    let mut afters = Vec::new();
    for a in &model.afters {
        afters.push(after_row(a, None, &mut arg_rules, &mut rules));
    }
    for (mi, m) in model.modes.iter().enumerate() {
        for a in &m.afters {
            afters.push(after_row(a, Some(idx8(mi)), &mut arg_rules, &mut rules));
        }
    }
    let flow = flow_masks(model.modes.len(), model.labels.len(), &afters);

    // DESIGN.md: transactional calls are the non-`none` ones; a policy without an effect named
    // `none` has no read-only effect, so every call counts against `limit transactional`.
    let read_only_effect = model.effects.iter().position(|e| e.name == "none");

    let tables = Tables {
        effects: model
            .effects
            .iter()
            .map(|s| s.name.as_str().into())
            .collect(),
        read_only_effect: read_only_effect.map(idx8),
        intents: model
            .intents
            .iter()
            .map(|s| s.name.as_str().into())
            .collect(),
        tools,
        tool_index,
        servers,
        patterns,
        matrices,
        matrix_names: model
            .matrices
            .iter()
            .map(|m| m.name.name.as_str().into())
            .collect(),
        modes,
        default_mode: model.default_mode.map(|(i, _)| idx8(i)),
        roles: model.roles.iter().map(|s| s.name.as_str().into()).collect(),
        role_closure,
        role_edges: model
            .role_edges
            .iter()
            .map(|&(a, b, _)| (idx32(a), idx32(b)))
            .collect(),
        role_index: name_index(model.roles.iter().map(|s| s.name.as_str())),
        perm_index: name_index(model.permissions.iter().map(|s| s.name.as_str())),
        permissions: model
            .permissions
            .iter()
            .map(|s| s.name.as_str().into())
            .collect(),
        perm_closure,
        perm_edges: model
            .implies
            .iter()
            .map(|&(a, b, _)| (idx32(a), idx32(b)))
            .collect(),
        tiers: model.tiers.iter().map(|s| s.name.as_str().into()).collect(),
        rule_tiers: rules.add(model.tiers_span, RuleKind::Tiers),
        prefix: model.prefix.as_ref().map(|p| p.name.as_str().into()),
        rule_unknown: unknown_rule,
        defaults,
        confirm_fields: model
            .confirm_fields
            .iter()
            .map(|s| s.name.as_str().into())
            .collect(),
        rule_confirm_fields: rules.add(
            model.confirm_fields.first().map(|s| s.span),
            RuleKind::ConfirmFields,
        ),
        tenant_arg: model.tenant_arg.as_ref().map(|s| s.name.as_str().into()),
        rule_tenant_arg: rules.add(
            model.tenant_arg.as_ref().map(|s| s.span),
            RuleKind::TenantArg,
        ),
        limit: model
            .limit
            .map(|(n, _)| u32::try_from(n).unwrap_or(u32::MAX)),
        rule_limit: rules.add(model.limit.map(|(_, s)| s), RuleKind::Limit),
        annotations_tighten: !model.ignore_annotations,
        rules: rules.0,
        arg_rules,
        global_rules,
        contexts: model
            .contexts
            .iter()
            .map(|s| s.name.as_str().into())
            .collect(),
        fold_accents: model.fold_accents,
        labels: model
            .labels
            .iter()
            .map(|s| s.name.as_str().into())
            .collect(),
        afters,
        flow,
        openworld: label_mask(model.openworld.as_ref().map_or(&[][..], |(l, _)| l)),
    };
    (graph, tables)
}

/// A mask of label indexes (each below eight, as the checker ensures).
fn label_mask(labels: &[usize]) -> u8 {
    labels
        .iter()
        .fold(0u8, |m, &l| m | (1u8 << (l as u32).min(7)))
}

/// Compiles one `after` block of mode `mode` (`None`: every mode).
fn after_row(
    a: &AfterModel,
    mode: Option<u8>,
    arg_rules: &mut Vec<ArgRule>,
    rules: &mut RuleTable,
) -> AfterRow {
    AfterRow {
        labels: label_mask(&a.labels),
        mode,
        lines: a
            .lines
            .iter()
            .map(|l| {
                (
                    l.outcome,
                    mask(&l.effects),
                    rules.add(Some(l.span), RuleKind::AfterLine),
                )
            })
            .collect(),
        arg_rules: push_rules(&a.rules, arg_rules, rules),
    }
}

/// For every mode and every label set, the union of what the applicable `after` blocks do
/// (2^labels entries per mode; at most 256).
fn flow_masks(modes: usize, labels: usize, afters: &[AfterRow]) -> Vec<FlowMasks> {
    let sets = 1usize << labels;
    let mut out = vec![FlowMasks::default(); modes * sets];
    for mode in 0..modes {
        for set in 0..sets {
            let m = &mut out[(mode << labels) | set];
            for a in afters.iter().filter(|a| a.applies(mode, set as u8)) {
                for &(outcome, effects, _) in &a.lines {
                    match outcome {
                        RuleOutcome::Deny => m.deny |= effects,
                        RuleOutcome::Confirm => m.confirm |= effects,
                    }
                }
                m.rules |= !a.arg_rules.is_empty();
            }
        }
    }
    out
}

/// The reflexive transitive closure of a relation over `0..n`: for each item, the set of items
/// it reaches (itself included). Components are closed in an order where everything a
/// component reaches is closed before it, so each edge costs one union of bit sets and the whole
/// costs `O((n + edges) * n / 64)` word operations, whatever the depth of the relation.
fn closure(n: usize, edges: impl Iterator<Item = (usize, usize)> + Clone) -> Vec<BitSet> {
    let relation = Relation::new(n, edges);
    let (components, component_of) = relation.components();
    let mut closed: Vec<BitSet> = vec![BitSet::default(); n];
    for (id, members) in components.iter().enumerate() {
        let mut set = BitSet::new(n);
        for &m in members {
            set.insert(m);
            for &w in relation.successors(m) {
                if component_of[w] != id {
                    set.union_with(&closed[w]);
                }
            }
        }
        for &m in &members[1..] {
            closed[m] = set.clone();
        }
        closed[members[0]] = set;
    }
    closed
}

fn name_index<'a>(names: impl Iterator<Item = &'a str>) -> FxHashMap<Box<str>, u32> {
    names
        .enumerate()
        .map(|(i, n)| (n.into(), idx32(i)))
        .collect()
}

/// The server of a `<prefix><server>__<tool>` name (seed 000: split on `__` into at most
/// three parts, so a tool segment keeps any further `__`), or `None` when not so shaped.
pub(crate) fn connector_server_of<'n>(prefix: &str, name: &'n str) -> Option<&'n str> {
    let rest = name.strip_prefix(prefix)?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then_some(server)
}

fn link_attrs(
    graph: &mut DiGraph<Node, Edge>,
    node: NodeIndex,
    row: &ToolRow,
    effects: &[NodeIndex],
    roles: &[NodeIndex],
    perms: &[NodeIndex],
) {
    if let Some(&e) = effects.get(row.effect as usize) {
        graph.add_edge(node, e, Edge::HasEffect);
    }
    if let Some(r) = &row.roles {
        for i in r.iter() {
            graph.add_edge(node, roles[i], Edge::Accepts);
        }
    }
    for i in row.perms.iter() {
        graph.add_edge(node, perms[i], Edge::Requires);
    }
}
