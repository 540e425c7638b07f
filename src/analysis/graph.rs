//! The compiled decision graph as a picture: Graphviz DOT or Mermaid text.
//!
//! Walks [`Policy::graph`] and draws, left to right:
//!
//! - **tools** (and `match` patterns, dashed) with the attributes that gate them
//!   (`tenant`, `confirm always`, `disabled`), each linked to its **effect**;
//! - each **effect** heading a column in every **mode**'s table;
//! - one table per **mode**, aggregating the matrix cells the mode uses (rows: intents, highest
//!   priority first; columns: effects) into the decision stages 6 and 7 give a tool of that
//!   effect: `allow`, `confirm` (cell `confirm`, or the mode's `confirm` list), `deny` (cell
//!   `deny`) or `ceiling` (outside the mode's `restrict`). A mode without a matrix has one row,
//!   `any intent`;
//! - the **role** hierarchy (higher role -> the role it includes) with the roles tools accept;
//! - the **permission** hierarchy (`implies`) with the permissions tools require;
//! - the connector **tiers** in precedence order;
//! - each **argument rule** (`deny when ...`, `confirm when ...`) as a node of its tool or
//!   pattern, labelled with its canonical text and coloured by its outcome, and the rules for
//!   every tool (the `rules` and `defaults` blocks) in a group of their own;
//! - the **flow labels** (hexagons), a dashed `taints` edge from each tool or pattern to the
//!   labels its calls put on the session, and each **`after` block** with its lines and
//!   argument rules, reached from the labels it waits for (`after`) and linked to the effects
//!   it denies (`deny`) or makes need confirmation (`confirm`). Drawn only when the policy
//!   declares labels.
//!
//! One node per mode instead of one per cell keeps the picture readable: finance.warden's
//! 75 cells become three five-by-five tables.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;

use crate::check::Cell;
use crate::compile::{Edge, Node};
use crate::policy::Policy;

/// The output notation of [`render`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
    /// A Mermaid `flowchart`.
    Mermaid,
}

/// What stages 6 and 7 decide for one (mode, intent, effect).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effective {
    Allow,
    Confirm,
    Deny,
    Ceiling,
}

impl Effective {
    fn word(self) -> &'static str {
        match self {
            Effective::Allow => "allow",
            Effective::Confirm => "confirm",
            Effective::Deny => "deny",
            Effective::Ceiling => "ceiling",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Effective::Allow => "#c8e6c9",
            Effective::Confirm => "#fff3b0",
            Effective::Deny => "#ffcdd2",
            Effective::Ceiling => "#e0e0e0",
        }
    }
}

/// One mode's aggregated table.
struct ModeTable {
    name: String,
    matrix: Option<String>,
    /// `rows[i] = (intent name, per effect)`; one `any intent` row without a matrix.
    rows: Vec<(String, Vec<Effective>)>,
}

/// A tool or pattern: node id, label lines, is a pattern, disabled, effect index.
type ToolNode = (String, Vec<String>, bool, bool, Option<usize>);

/// Everything drawn, gathered from the graph.
struct Picture {
    effects: Vec<String>,
    intents: Vec<String>,
    /// (node id, label lines, is pattern, disabled, effect index)
    tools: Vec<ToolNode>,
    modes: Vec<ModeTable>,
    roles: Vec<String>,
    role_edges: Vec<(usize, usize)>,
    perms: Vec<String>,
    perm_edges: Vec<(usize, usize)>,
    tiers: Vec<String>,
    /// (tool node id, role index)
    accepts: Vec<(String, usize)>,
    /// (tool node id, permission index)
    requires: Vec<(String, usize)>,
    /// The argument rules of tools and patterns: (tool node id, rule).
    rules: Vec<(String, RuleNode)>,
    /// The argument rules for every tool.
    global_rules: Vec<RuleNode>,
    /// The declared flow labels.
    labels: Vec<String>,
    /// (tool node id, label index): what a call of the tool puts on the session.
    taints: Vec<(String, usize)>,
    /// The `after` blocks, in compiled order.
    afters: Vec<AfterNode>,
}

/// An `after` block as drawn: node id (`f<index>`), its head (with its mode), its lines, the
/// labels it waits for and the effects it denies and confirms.
struct AfterNode {
    id: String,
    head: String,
    lines: Vec<String>,
    labels: Vec<usize>,
    deny: Vec<usize>,
    confirm: Vec<usize>,
}

/// The `after` blocks of `policy` as drawn.
fn after_nodes(policy: &Policy) -> Vec<AfterNode> {
    let t = policy.tables();
    let effects_of = |mask: u64| -> Vec<usize> {
        (0..t.effects.len().min(64))
            .filter(|e| mask & (1u64 << e) != 0)
            .collect()
    };
    t.afters
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut head = policy.after_head(a.labels);
            if let Some(m) = a.mode.and_then(|m| t.modes.get(usize::from(m))) {
                head.push_str(&format!(" (mode {})", m.name));
            }
            let (mut deny, mut confirm) = (0u64, 0u64);
            let mut lines = Vec::new();
            for &(outcome, mask, _) in &a.lines {
                let word = match outcome {
                    crate::syntax::ast::RuleOutcome::Deny => {
                        deny |= mask;
                        "deny"
                    }
                    crate::syntax::ast::RuleOutcome::Confirm => {
                        confirm |= mask;
                        "confirm"
                    }
                };
                let names: Vec<&str> = effects_of(mask).iter().map(|&e| &*t.effects[e]).collect();
                lines.push(format!("{word} {}", names.join(", ")));
            }
            let (from, to) = (a.arg_rules.start as usize, a.arg_rules.end as usize);
            lines.extend(
                t.arg_rules
                    .get(from..to)
                    .unwrap_or_default()
                    .iter()
                    .map(|r| r.text.to_string()),
            );
            AfterNode {
                id: format!("f{i}"),
                head,
                lines,
                labels: (0..t.labels.len())
                    .filter(|l| a.labels & (1u8 << l) != 0)
                    .collect(),
                // A denied effect is not also drawn as confirmed.
                confirm: effects_of(confirm & !deny),
                deny: effects_of(deny),
            }
        })
        .collect()
}

/// An argument rule as drawn: node id (`a<index>`), outcome, canonical text.
struct RuleNode {
    id: String,
    outcome: &'static str,
    text: String,
}

impl RuleNode {
    fn of(policy: &Policy, range: &std::ops::Range<u32>) -> Vec<RuleNode> {
        let t = policy.tables();
        (range.start..range.end)
            .filter_map(|j| {
                let r = t.arg_rules.get(j as usize)?;
                Some(RuleNode {
                    id: format!("a{j}"),
                    outcome: r.outcome.as_str(),
                    text: r.text.to_string(),
                })
            })
            .collect()
    }

    fn color(&self) -> &'static str {
        if self.outcome == "deny" {
            Effective::Deny.color()
        } else {
            Effective::Confirm.color()
        }
    }
}

fn gather(policy: &Policy) -> Picture {
    let g = policy.graph();
    let t = policy.tables();
    let effects: Vec<String> = t.effects.iter().map(|s| s.to_string()).collect();
    let intents: Vec<String> = t.intents.iter().map(|s| s.to_string()).collect();
    let mut pic = Picture {
        effects: effects.clone(),
        intents: intents.clone(),
        tools: Vec::new(),
        modes: Vec::new(),
        roles: t.roles.iter().map(|s| s.to_string()).collect(),
        role_edges: Vec::new(),
        perms: t.permissions.iter().map(|s| s.to_string()).collect(),
        perm_edges: Vec::new(),
        tiers: t.tiers.iter().map(|s| s.to_string()).collect(),
        accepts: Vec::new(),
        requires: Vec::new(),
        rules: Vec::new(),
        global_rules: RuleNode::of(policy, &t.global_rules),
        labels: t.labels.iter().map(|s| s.to_string()).collect(),
        taints: Vec::new(),
        afters: after_nodes(policy),
    };
    let out = |n: NodeIndex, kind: Edge| -> Vec<NodeIndex> {
        let mut v: Vec<NodeIndex> = g
            .edges(n)
            .filter(|e| *e.weight() == kind)
            .map(|e| e.target())
            .collect();
        v.sort();
        v
    };
    let mut patterns_by_source: BTreeMap<u32, &crate::compile::PatternRow> = BTreeMap::new();
    for p in &t.patterns {
        patterns_by_source.insert(p.source_index, p);
    }
    for n in g.node_indices() {
        match &g[n] {
            Node::Tool(_) | Node::Pattern(_) => {
                let (id, name, row, is_pattern) = match &g[n] {
                    Node::Tool(i) => {
                        let (name, row) = &t.tools[*i as usize];
                        (format!("t{i}"), name.to_string(), row, false)
                    }
                    Node::Pattern(i) => match patterns_by_source.get(i) {
                        Some(p) => (format!("p{i}"), p.glob.to_string(), &p.row, true),
                        None => continue,
                    },
                    _ => continue,
                };
                let effect = out(n, Edge::HasEffect).first().and_then(|e| match g[*e] {
                    Node::Effect(x) => Some(x as usize),
                    _ => None,
                });
                let mut notes = Vec::new();
                if row.tenant_required {
                    notes.push("tenant");
                }
                if row.confirm_always {
                    notes.push("confirm always");
                }
                if !row.requires.is_empty() {
                    notes.push("requires args");
                }
                if !row.enabled {
                    notes.push("disabled");
                }
                let mut label = vec![name];
                if !notes.is_empty() {
                    label.push(notes.join(" · "));
                }
                for r in out(n, Edge::Accepts) {
                    if let Node::Role(x) = g[r] {
                        pic.accepts.push((id.clone(), x as usize));
                    }
                }
                for p in out(n, Edge::Requires) {
                    if let Node::Permission(x) = g[p] {
                        pic.requires.push((id.clone(), x as usize));
                    }
                }
                for r in RuleNode::of(policy, &row.arg_rules) {
                    pic.rules.push((id.clone(), r));
                }
                for l in 0..t.labels.len() {
                    if row.taints & (1u8 << l) != 0 {
                        pic.taints.push((id.clone(), l));
                    }
                }
                pic.tools
                    .push((id, label, is_pattern, !row.enabled, effect));
            }
            Node::Role(r) => {
                for lo in out(n, Edge::Includes) {
                    if let Node::Role(x) = g[lo] {
                        pic.role_edges.push((*r as usize, x as usize));
                    }
                }
            }
            Node::Permission(p) => {
                for q in out(n, Edge::Implies) {
                    if let Node::Permission(x) = g[q] {
                        pic.perm_edges.push((*p as usize, x as usize));
                    }
                }
            }
            Node::Mode(m) => {
                let ne = effects.len();
                let mask_of = |kind: Edge| -> Option<Vec<bool>> {
                    let targets = out(n, kind);
                    if targets.is_empty() {
                        return None;
                    }
                    let mut v = vec![false; ne];
                    for e in targets {
                        if let Node::Effect(x) = g[e] {
                            if let Some(slot) = v.get_mut(x as usize) {
                                *slot = true;
                            }
                        }
                    }
                    Some(v)
                };
                let row = &t.modes[*m as usize];
                // A mode with `restrict` has Restricts edges; without, every effect passes.
                let ceiling = if row.restrict == u64::MAX >> (64 - ne.clamp(1, 64)) {
                    vec![true; ne]
                } else {
                    mask_of(Edge::Restricts).unwrap_or_else(|| vec![false; ne])
                };
                let confirm = mask_of(Edge::Confirms).unwrap_or_else(|| vec![false; ne]);
                let mut grid: Vec<Vec<Option<Cell>>> = vec![vec![None; ne]; intents.len()];
                let mut matrix = None;
                for c in out(n, Edge::Uses) {
                    if let Node::Cell {
                        matrix: mx,
                        intent,
                        effect,
                        cell,
                    } = g[c]
                    {
                        matrix = t.matrix_names.get(mx as usize).map(|s| s.to_string());
                        if let Some(slot) = grid
                            .get_mut(intent as usize)
                            .and_then(|r| r.get_mut(effect as usize))
                        {
                            *slot = Some(cell);
                        }
                    }
                }
                let decide = |cell: Option<Cell>, e: usize| -> Effective {
                    if !ceiling[e] {
                        Effective::Ceiling
                    } else {
                        match cell {
                            Some(Cell::Deny) => Effective::Deny,
                            Some(Cell::Confirm) => Effective::Confirm,
                            _ if confirm[e] => Effective::Confirm,
                            _ => Effective::Allow,
                        }
                    }
                };
                let rows = if row.matrix.is_some() {
                    grid.iter()
                        .enumerate()
                        .map(|(i, cells)| {
                            (
                                intents[i].clone(),
                                (0..ne).map(|e| decide(cells[e], e)).collect(),
                            )
                        })
                        .collect()
                } else {
                    vec![(
                        "any intent".to_string(),
                        (0..ne).map(|e| decide(None, e)).collect(),
                    )]
                };
                pic.modes.push(ModeTable {
                    name: row.name.to_string(),
                    matrix,
                    rows,
                });
            }
            _ => {}
        }
    }
    pic
}

fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn dot_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Renders the policy's decision graph.
///
/// Returns the whole DOT or Mermaid document. Names are escaped for the notation, so any
/// Unicode tool name renders.
pub fn render(policy: &Policy, format: GraphFormat) -> String {
    let pic = gather(policy);
    match format {
        GraphFormat::Dot => dot(policy, &pic),
        GraphFormat::Mermaid => mermaid(policy, &pic),
    }
}

/// A rule's DOT node statement (without the `;`).
fn dot_rule(r: &RuleNode) -> String {
    format!(
        "{} [label={}, shape=note, fontsize=9, fillcolor=\"{}\"]",
        r.id,
        dot_string(&r.text),
        r.color()
    )
}

fn dot(policy: &Policy, pic: &Picture) -> String {
    let mut s = String::new();
    let title = match policy.version() {
        Some(v) => format!("policy {} version {v}", policy.name()),
        None => format!("policy {}", policy.name()),
    };
    let _ = writeln!(s, "digraph warden {{");
    let _ = writeln!(
        s,
        "  graph [rankdir=LR, fontname=\"Helvetica\", fontsize=16, labelloc=t, label={}, nodesep=0.15, ranksep=0.9, newrank=true];",
        dot_string(&title)
    );
    s.push_str("  node [fontname=\"Helvetica\", fontsize=11, shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\"];\n");
    s.push_str("  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\", arrowsize=0.6];\n");

    if !pic.tools.is_empty() {
        s.push_str("  subgraph cluster_tools {\n    label=\"tools and patterns\"; style=\"rounded,filled\"; fillcolor=\"#f3f6fb\"; color=\"#9fb3d1\";\n");
        for (id, label, is_pattern, disabled, _) in &pic.tools {
            let mut l = format!("<b>{}</b>", html(&label[0]));
            for extra in &label[1..] {
                let _ = write!(
                    l,
                    "<br/><font point-size=\"9\" color=\"#555555\">{}</font>",
                    html(extra)
                );
            }
            let style = match (is_pattern, disabled) {
                (_, true) => ", style=\"rounded,dashed\", fontcolor=\"#888888\"",
                (true, false) => ", style=\"rounded,dashed,filled\"",
                _ => "",
            };
            let _ = writeln!(s, "    {id} [label=<{l}>{style}];");
        }
        for (_, r) in &pic.rules {
            let _ = writeln!(s, "    {};", dot_rule(r));
        }
        s.push_str("  }\n");
        for (tool, r) in &pic.rules {
            let _ = writeln!(
                s,
                "  {tool} -> {} [style=dotted, arrowhead=none, label={}];",
                r.id,
                dot_string(r.outcome)
            );
        }
    }
    if !pic.global_rules.is_empty() {
        s.push_str("  subgraph cluster_rules {\n    label=\"argument rules for every tool\"; style=\"rounded,filled\"; fillcolor=\"#fbf5f0\"; color=\"#d1b59f\";\n");
        for r in &pic.global_rules {
            let _ = writeln!(s, "    {};", dot_rule(r));
        }
        s.push_str("  }\n");
    }

    s.push_str("  subgraph cluster_effects {\n    label=\"effects\"; style=\"rounded,filled\"; fillcolor=\"#f7f3fb\"; color=\"#b9a3d1\";\n");
    for (i, e) in pic.effects.iter().enumerate() {
        let _ = writeln!(
            s,
            "    e{i} [label={}, shape=ellipse, fillcolor=\"#ece4f7\"];",
            dot_string(e)
        );
    }
    s.push_str("  }\n");

    for (id, _, _, _, effect) in &pic.tools {
        if let Some(e) = effect {
            let _ = writeln!(s, "  {id} -> e{e};");
        }
    }

    if !pic.modes.is_empty() {
        s.push_str("  subgraph cluster_modes {\n    label=\"modes: decision for a tool of each effect (stages 6-7)\"; style=\"rounded,filled\"; fillcolor=\"#f4f8f2\"; color=\"#a5c29a\";\n");
        for (mi, m) in pic.modes.iter().enumerate() {
            let mut l = String::from(
                "<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"3\">",
            );
            let head = match &m.matrix {
                Some(mx) => format!("mode <b>{}</b> (matrix {})", html(&m.name), html(mx)),
                None => format!("mode <b>{}</b> (no matrix)", html(&m.name)),
            };
            let _ = write!(
                l,
                "<tr><td colspan=\"{}\" bgcolor=\"#dfe9da\">{head}</td></tr><tr><td><i>intent</i></td>",
                pic.effects.len() + 1
            );
            for (ei, e) in pic.effects.iter().enumerate() {
                let _ = write!(l, "<td port=\"c{ei}\"><b>{}</b></td>", html(e));
            }
            l.push_str("</tr>");
            for (intent, cells) in &m.rows {
                let _ = write!(l, "<tr><td align=\"left\">{}</td>", html(intent));
                for c in cells {
                    let _ = write!(l, "<td bgcolor=\"{}\">{}</td>", c.color(), c.word());
                }
                l.push_str("</tr>");
            }
            l.push_str("</table>");
            let _ = writeln!(s, "    m{mi} [shape=plaintext, style=\"\", label=<{l}>];");
        }
        s.push_str("  }\n");
        // The tables' column heads name the effects; invisible edges only keep the tables to
        // the right of the effects (an edge per column would cross every table).
        let mid = pic.effects.len() / 2;
        for mi in 0..pic.modes.len() {
            let _ = writeln!(s, "  e{mid} -> m{mi} [style=invis];");
        }
    }

    if !pic.intents.is_empty() {
        s.push_str("  subgraph cluster_intents {\n    label=\"intents (priority)\"; style=\"rounded,filled\"; fillcolor=\"#fbf7ef\"; color=\"#d1bf9f\";\n");
        for (i, name) in pic.intents.iter().enumerate() {
            let _ = writeln!(
                s,
                "    i{i} [label={}, fillcolor=\"#f6ecd9\"];",
                dot_string(name)
            );
        }
        for i in 1..pic.intents.len() {
            let _ = writeln!(s, "    i{} -> i{i} [label=\"outranks\"];", i - 1);
        }
        s.push_str("  }\n");
    }

    if !pic.roles.is_empty() {
        s.push_str("  subgraph cluster_roles {\n    label=\"roles (includes)\"; style=\"rounded,filled\"; fillcolor=\"#eef7f7\"; color=\"#93c5c5\";\n");
        for (i, r) in pic.roles.iter().enumerate() {
            let _ = writeln!(
                s,
                "    r{i} [label={}, fillcolor=\"#d9f0f0\"];",
                dot_string(r)
            );
        }
        for (a, b) in &pic.role_edges {
            let _ = writeln!(s, "    r{a} -> r{b} [label=\"includes\"];");
        }
        s.push_str("  }\n");
        for (id, r) in &pic.accepts {
            let _ = writeln!(
                s,
                "  {id} -> r{r} [style=dashed, color=\"#3c8d8d\", label=\"role\"];"
            );
        }
    }

    if !pic.perms.is_empty() {
        s.push_str("  subgraph cluster_perms {\n    label=\"permissions (implies)\"; style=\"rounded,filled\"; fillcolor=\"#fbf0f0\"; color=\"#d19f9f\";\n");
        for (i, p) in pic.perms.iter().enumerate() {
            let _ = writeln!(
                s,
                "    q{i} [label={}, fillcolor=\"#f7dede\"];",
                dot_string(p)
            );
        }
        for (a, b) in &pic.perm_edges {
            let _ = writeln!(s, "    q{a} -> q{b};");
        }
        s.push_str("  }\n");
        for (id, q) in &pic.requires {
            let _ = writeln!(s, "  {id} -> q{q} [style=dotted, color=\"#b35c5c\"];");
        }
    }

    if !pic.tiers.is_empty() {
        s.push_str("  subgraph cluster_tiers {\n    label=\"connector tiers (precedence)\"; style=\"rounded,filled\"; fillcolor=\"#f5f5f5\"; color=\"#aaaaaa\";\n");
        for (i, name) in pic.tiers.iter().enumerate() {
            let _ = writeln!(s, "    k{i} [label={}];", dot_string(name));
        }
        for i in 1..pic.tiers.len() {
            let _ = writeln!(s, "    k{} -> k{i} [label=\"precedes\"];", i - 1);
        }
        s.push_str("  }\n");
    }
    dot_flow(pic, &mut s);
    s.push_str("}\n");
    s
}

/// The flow labels, the tools' `taints` and the `after` blocks, in DOT (nothing without labels).
fn dot_flow(pic: &Picture, s: &mut String) {
    if pic.labels.is_empty() {
        return;
    }
    s.push_str("  subgraph cluster_labels {\n    label=\"flow labels (taints)\"; style=\"rounded,filled\"; fillcolor=\"#fffbea\"; color=\"#d6c27a\";\n");
    for (i, l) in pic.labels.iter().enumerate() {
        let _ = writeln!(
            s,
            "    l{i} [label={}, shape=hexagon, fillcolor=\"#fff1b8\"];",
            dot_string(l)
        );
    }
    s.push_str("  }\n");
    for (id, l) in &pic.taints {
        let _ = writeln!(
            s,
            "  {id} -> l{l} [style=dashed, color=\"#b08d1a\", label=\"taints\"];"
        );
    }
    if pic.afters.is_empty() {
        return;
    }
    s.push_str("  subgraph cluster_afters {\n    label=\"after blocks (once every label is on the session)\"; style=\"rounded,filled\"; fillcolor=\"#fdf3ec\"; color=\"#d1a98a\";\n");
    for a in &pic.afters {
        let mut l = format!("<b>{}</b>", html(&a.head));
        for line in &a.lines {
            let _ = write!(l, "<br/><font point-size=\"9\">{}</font>", html(line));
        }
        let _ = writeln!(s, "    {} [label=<{l}>, shape=note];", a.id);
    }
    s.push_str("  }\n");
    for a in &pic.afters {
        for l in &a.labels {
            let _ = writeln!(s, "  l{l} -> {} [label=\"after\"];", a.id);
        }
        // Edge colours: darker shades of the deny and confirm cell colours.
        for (effects, word, color) in [
            (&a.deny, "deny", "#c62828"),
            (&a.confirm, "confirm", "#b8860b"),
        ] {
            for e in effects {
                let _ = writeln!(
                    s,
                    "  {} -> e{e} [label=\"{word}\", color=\"{color}\", fontcolor=\"{color}\"];",
                    a.id
                );
            }
        }
    }
}

/// The flow labels, the tools' `taints` and the `after` blocks, in Mermaid (nothing without
/// labels).
fn mermaid_flow(pic: &Picture, s: &mut String) {
    if pic.labels.is_empty() {
        return;
    }
    s.push_str("  subgraph labels[\"flow labels (taints)\"]\n");
    for (i, l) in pic.labels.iter().enumerate() {
        let _ = writeln!(s, "    l{i}{{{{\"{}\"}}}}", mermaid_text(l));
    }
    s.push_str("  end\n");
    for (id, l) in &pic.taints {
        let _ = writeln!(s, "  {id} -.->|taints| l{l}");
    }
    if pic.afters.is_empty() {
        return;
    }
    s.push_str("  subgraph afters[\"after blocks (once every label is on the session)\"]\n");
    for a in &pic.afters {
        let mut text = vec![mermaid_text(&a.head)];
        text.extend(a.lines.iter().map(|l| mermaid_text(l)));
        let _ = writeln!(s, "    {}[\"{}\"]", a.id, text.join("<br/>"));
    }
    s.push_str("  end\n");
    for a in &pic.afters {
        for l in &a.labels {
            let _ = writeln!(s, "  l{l} -->|after| {}", a.id);
        }
        for e in &a.deny {
            let _ = writeln!(s, "  {} -->|deny| e{e}", a.id);
        }
        for e in &a.confirm {
            let _ = writeln!(s, "  {} -->|confirm| e{e}", a.id);
        }
    }
}

fn mermaid_text(s: &str) -> String {
    // Mermaid labels are quoted; quotes and angle brackets become entity codes.
    s.replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}

fn mermaid(policy: &Policy, pic: &Picture) -> String {
    let mut s = String::from("flowchart LR\n");
    let _ = writeln!(
        s,
        "  %% policy {} — tools -> effects -> per-mode decisions; roles, permissions, tiers",
        mermaid_text(policy.name())
    );
    if !pic.tools.is_empty() {
        s.push_str("  subgraph tools[\"tools and patterns\"]\n");
        for (id, label, is_pattern, _, _) in &pic.tools {
            let text = label
                .iter()
                .map(|l| mermaid_text(l))
                .collect::<Vec<_>>()
                .join("<br/>");
            if *is_pattern {
                let _ = writeln!(s, "    {id}[/\"{text}\"/]");
            } else {
                let _ = writeln!(s, "    {id}[\"{text}\"]");
            }
        }
        for (_, r) in &pic.rules {
            let _ = writeln!(s, "    {}>\"{}\"]", r.id, mermaid_text(&r.text));
        }
        s.push_str("  end\n");
        for (tool, r) in &pic.rules {
            let _ = writeln!(s, "  {tool} -.-|{}| {}", r.outcome, r.id);
        }
    }
    if !pic.global_rules.is_empty() {
        s.push_str("  subgraph rules[\"argument rules for every tool\"]\n");
        for r in &pic.global_rules {
            let _ = writeln!(s, "    {}>\"{}\"]", r.id, mermaid_text(&r.text));
        }
        s.push_str("  end\n");
    }
    s.push_str("  subgraph effects[\"effects\"]\n");
    for (i, e) in pic.effects.iter().enumerate() {
        let _ = writeln!(s, "    e{i}([\"{}\"])", mermaid_text(e));
    }
    s.push_str("  end\n");
    for (id, _, _, _, effect) in &pic.tools {
        if let Some(e) = effect {
            let _ = writeln!(s, "  {id} --> e{e}");
        }
    }
    if !pic.modes.is_empty() {
        s.push_str("  subgraph modes[\"modes: decision per intent (stages 6-7)\"]\n");
        for (mi, m) in pic.modes.iter().enumerate() {
            let mut lines = vec![format!("mode {}", mermaid_text(&m.name))];
            for (intent, cells) in &m.rows {
                let parts: Vec<String> = pic
                    .effects
                    .iter()
                    .zip(cells)
                    .filter(|(_, c)| matches!(c, Effective::Allow | Effective::Confirm))
                    .map(|(e, c)| {
                        if *c == Effective::Confirm {
                            format!("{} (confirm)", mermaid_text(e))
                        } else {
                            mermaid_text(e)
                        }
                    })
                    .collect();
                let shown = if parts.is_empty() {
                    "nothing".to_string()
                } else {
                    parts.join(", ")
                };
                lines.push(format!("{}: {shown}", mermaid_text(intent)));
            }
            let _ = writeln!(s, "    m{mi}[\"{}\"]", lines.join("<br/>"));
        }
        s.push_str("  end\n");
    }
    if !pic.roles.is_empty() {
        s.push_str("  subgraph roles[\"roles (includes)\"]\n");
        for (i, r) in pic.roles.iter().enumerate() {
            let _ = writeln!(s, "    r{i}[\"{}\"]", mermaid_text(r));
        }
        for (a, b) in &pic.role_edges {
            let _ = writeln!(s, "    r{a} -->|includes| r{b}");
        }
        s.push_str("  end\n");
        for (id, r) in &pic.accepts {
            let _ = writeln!(s, "  {id} -.->|role| r{r}");
        }
    }
    if !pic.perms.is_empty() {
        s.push_str("  subgraph perms[\"permissions (implies)\"]\n");
        for (i, p) in pic.perms.iter().enumerate() {
            let _ = writeln!(s, "    q{i}[\"{}\"]", mermaid_text(p));
        }
        for (a, b) in &pic.perm_edges {
            let _ = writeln!(s, "    q{a} --> q{b}");
        }
        s.push_str("  end\n");
        for (id, q) in &pic.requires {
            let _ = writeln!(s, "  {id} -.->|needs| q{q}");
        }
    }
    if !pic.tiers.is_empty() {
        s.push_str("  subgraph tiers[\"connector tiers (precedence)\"]\n");
        for (i, name) in pic.tiers.iter().enumerate() {
            let _ = writeln!(s, "    k{i}[\"{}\"]", mermaid_text(name));
        }
        for i in 1..pic.tiers.len() {
            let _ = writeln!(s, "    k{} --> k{i}", i - 1);
        }
        s.push_str("  end\n");
    }
    mermaid_flow(pic, &mut s);
    if !pic.intents.is_empty() {
        let _ = writeln!(
            s,
            "  %% intents, highest priority first: {}",
            pic.intents
                .iter()
                .map(|i| mermaid_text(i))
                .collect::<Vec<_>>()
                .join(" > ")
        );
    }
    s
}
