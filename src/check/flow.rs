//! Flow labels: `labels` declarations (each label once, at most [`MAX_LABELS`]), the labels
//! a `taints` attribute names, and `after` blocks at the top level or in a `mode` (their
//! labels, their effects, their argument rules), and `taint openworld` (declared once, its
//! labels declared).
//!
//! An `after` block can only tighten a decision: its lines are `confirm EFFECTS`,
//! `deny EFFECTS` and argument rules, so nothing in the language lets it allow what the
//! stages before it denied or confirm what they denied.

use super::names::sym;
use super::suggest::{list_names, suggest};
use super::{AfterLine, AfterModel, Checker};
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{AfterDecl, AfterItem, Name, RuleOutcome};

/// The most labels a policy may declare: a session's labels are one byte, and the label sets
/// (2^8 of them) stay few enough to enumerate.
pub(crate) const MAX_LABELS: usize = 8;

impl Checker {
    /// `labels a, b`: declares flow labels; a label declared twice and a label past the
    /// [`MAX_LABELS`]th are reported.
    pub(super) fn declare_labels(&mut self, names: &[Name]) {
        for name in names {
            if let Some(&first) = self.label_ix.get(&name.text) {
                let first_span = self.model.labels[first].span;
                self.duplicate("label", name, first_span);
                continue;
            }
            if self.model.labels.len() >= MAX_LABELS {
                self.error(
                    Diagnostic::error(
                        "too-many-labels",
                        format!("more than {MAX_LABELS} labels are declared"),
                    )
                    .at(name.span, format!("label {} of at most {MAX_LABELS}", self.model.labels.len() + 1))
                    .help(format!(
                        "a session holds a set of at most {MAX_LABELS} labels; merge labels that always travel together"
                    )),
                );
                continue;
            }
            self.label_ix
                .insert(name.text.clone(), self.model.labels.len());
            self.model.labels.push(sym(name));
        }
    }

    /// The index of the declared label `n`, or `None` with an `undefined-label` error (and a
    /// "did you mean").
    pub(super) fn label(&mut self, n: &Name) -> Option<usize> {
        if let Some(&i) = self.label_ix.get(&n.text) {
            return Some(i);
        }
        let mut d = Diagnostic::error("undefined-label", format!("undefined label `{}`", n.text))
            .at(n.span, "not declared in `labels`");
        d = match suggest(&n.text, self.model.labels.iter().map(|s| s.name.as_str())) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None if self.model.labels.is_empty() => {
                d.help(format!("declare it: `labels {}`", n.text))
            }
            None => d.help(format!(
                "declared labels are {}; add `{}` to `labels` to declare it",
                list_names(&self.model.labels),
                n.text
            )),
        };
        self.error(d);
        None
    }

    /// An `after` block: its labels (at least one), the effects of its `confirm` and `deny`
    /// lines, its argument rules. Every mistake is reported; `None` when one was.
    pub(super) fn resolve_after(&mut self, a: &AfterDecl) -> Option<AfterModel> {
        let before = self.error_count();
        if a.labels.is_empty() {
            let start = a.span.start as usize;
            self.error(
                Diagnostic::error("empty-after", "an `after` block names no label")
                    .at(
                        crate::span::Span::new(a.span.file, start, start + "after".len()),
                        "no label after `after`",
                    )
                    .help("name the labels the block waits for, comma-separated: `after untrusted { ... }`"),
            );
        }
        let labels: Vec<usize> = a.labels.iter().filter_map(|n| self.label(n)).collect();
        let mut lines = Vec::new();
        let mut rule_decls = Vec::new();
        for item in &a.items {
            match item {
                AfterItem::Confirm { effects, span } | AfterItem::Deny { effects, span } => {
                    let outcome = if matches!(item, AfterItem::Deny { .. }) {
                        RuleOutcome::Deny
                    } else {
                        RuleOutcome::Confirm
                    };
                    let effects = effects.iter().filter_map(|e| self.effect(e)).collect();
                    lines.push(AfterLine {
                        outcome,
                        effects,
                        span: *span,
                    });
                }
                AfterItem::Rule(r) => rule_decls.push(r.clone()),
            }
        }
        let rules = self.resolve_rules(&rule_decls);
        (self.error_count() == before).then_some(AfterModel {
            labels,
            lines,
            rules,
        })
    }

    /// `taint openworld L1, L2`: declared once, every label declared in `labels`.
    pub(super) fn resolve_taint_openworld(&mut self, labels: &[Name], span: crate::span::Span) {
        let resolved: Vec<usize> = labels.iter().filter_map(|n| self.label(n)).collect();
        if self.single("taint openworld", span) && resolved.len() == labels.len() {
            self.model.openworld = Some((resolved, span));
        }
    }

    /// How many errors are reported so far.
    fn error_count(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity() == crate::diagnostic::Severity::Error)
            .count()
    }
}
