//! The argument rules that changed between two versions of a policy, per tool, pattern,
//! undeclared-name row and for the blocks that apply to every tool (`rules` and `defaults`),
//! each rule in its canonical form (the text `toolwarden fmt` prints).
//!
//! Every rule of a body runs and the strongest outcome wins, so a body's rules compare as a
//! multiset of canonical texts: reordering rules, or rewriting one in another layout, changes
//! nothing.

use serde::Serialize;

use super::table::SubjectKind;
use crate::compile::ToolRow;
use crate::policy::Policy;
use crate::syntax::ast::{Decl, FileId};

/// One rule of one side, in canonical form with where it is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleText {
    /// The canonical text: `deny when amount > 10000`.
    pub text: String,
    /// `file:line:col` of the rule.
    pub location: String,
}

/// A body whose argument rules changed.
#[derive(Clone, Debug, Serialize)]
pub struct RuleChange {
    /// What the body belongs to; `None` for the rules that apply to every tool (`rules` and
    /// `defaults` blocks).
    pub kind: Option<SubjectKind>,
    /// Tool name, glob, `*` for undeclared names, or `(every tool)`.
    pub name: String,
    /// The old version's rules, sorted by canonical text (empty when the body had none or
    /// did not exist).
    pub old: Vec<RuleText>,
    /// The new version's rules, sorted the same way.
    pub new: Vec<RuleText>,
}

impl RuleChange {
    /// The body's rules side by side: a heading line, then each rule once, marked `-` (old
    /// only), `+` (new only) or ` ` (both), with its location on the side that has it.
    pub fn render(&self) -> String {
        let head = match self.kind {
            None => "every tool (`rules` and `defaults`)".to_string(),
            Some(SubjectKind::Unknown) => "undeclared names".to_string(),
            Some(k) => format!("{} {}", k.as_str(), self.name),
        };
        let mut out = format!("  ~ {head}\n");
        let mut new: Vec<Option<&RuleText>> = self.new.iter().map(Some).collect();
        for o in &self.old {
            match new.iter_mut().find(|n| n.is_some_and(|n| n.text == o.text)) {
                Some(slot) => {
                    let n = slot.take();
                    out.push_str(&format!(
                        "        {}   ({} | {})\n",
                        o.text,
                        o.location,
                        n.map_or("", |n| n.location.as_str())
                    ));
                }
                None => out.push_str(&format!("      - {}   ({})\n", o.text, o.location)),
            }
        }
        for n in new.into_iter().flatten() {
            out.push_str(&format!("      + {}   ({})\n", n.text, n.location));
        }
        out
    }
}

/// The canonical text of the rule written at `source` (a rule's own text, `deny when ...`):
/// parsed again and printed as `fmt` prints it; the text with its whitespace collapsed if it
/// does not parse on its own (it always does: it parsed when the policy loaded).
fn canonical(source: &str) -> String {
    let wrapped = format!("rules {{\n{source}\n}}\n");
    let (tree, diagnostics) = crate::syntax::parse_file(&wrapped, FileId(0));
    if diagnostics.is_empty() {
        if let Some(Decl::Rules(r)) = tree.decls.first() {
            if let [rule] = r.rules.as_slice() {
                return rule.to_string();
            }
        }
    }
    source.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The rules of a range of [`crate::compile::Tables::arg_rules`], canonical and sorted.
fn texts(p: &Policy, range: std::ops::Range<u32>) -> Vec<RuleText> {
    let t = p.tables();
    let mut out: Vec<RuleText> = t
        .arg_rules
        .get(range.start as usize..range.end as usize)
        .unwrap_or(&[])
        .iter()
        .map(|r| RuleText {
            text: canonical(p.rule_text(r.rule)),
            location: p
                .rule_source(r.rule)
                .map_or_else(String::new, |l| l.to_string()),
        })
        .collect();
    out.sort_by(|a, b| a.text.cmp(&b.text).then(a.location.cmp(&b.location)));
    out
}

fn row_of<'p>(p: &'p Policy, kind: SubjectKind, name: &str) -> Option<&'p ToolRow> {
    let t = p.tables();
    match kind {
        SubjectKind::Tool => t.tool_index.get(name).map(|&i| &t.tools[i as usize].1),
        SubjectKind::Pattern => t.patterns.iter().find(|x| &*x.glob == name).map(|x| &x.row),
        SubjectKind::Unknown => t.defaults.as_ref(),
    }
}

/// Every body whose rules differ between `old` and `new` (compared as multisets of canonical
/// texts): the blocks that apply to every tool first, then tools by name, patterns by glob and
/// the undeclared-name row. A tool declared on one side only is listed when it has rules.
pub(crate) fn rule_changes(old: &Policy, new: &Policy) -> Vec<RuleChange> {
    let mut out = Vec::new();
    let same = |a: &[RuleText], b: &[RuleText]| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.text == y.text)
    };
    let (go, gn) = (
        texts(old, old.tables().global_rules.clone()),
        texts(new, new.tables().global_rules.clone()),
    );
    if !same(&go, &gn) {
        out.push(RuleChange {
            kind: None,
            name: "(every tool)".to_string(),
            old: go,
            new: gn,
        });
    }
    for (kind, name) in super::diff::subjects_of(old, new) {
        let side = |p: &Policy| {
            row_of(p, kind, &name).map_or_else(Vec::new, |r| texts(p, r.arg_rules.clone()))
        };
        let (a, b) = (side(old), side(new));
        if !same(&a, &b) {
            out.push(RuleChange {
                kind: Some(kind),
                name,
                old: a,
                new: b,
            });
        }
    }
    out
}
