//! `context` declarations and argument rules (`deny when ...`, `confirm when ...`) in `tool`,
//! `match` and `defaults` bodies and the top-level `rules` block: each condition compiled by
//! [`crate::condition`], each of its mistakes a positioned diagnostic.

use std::fmt::Write as _;

use super::names::sym;
use super::suggest::{list_names, suggest};
use super::{Checker, RuleModel};
use crate::condition::{CompiledCondition, ContextId};
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{Name, RuleDecl};

impl Checker {
    /// `context a, b`: declares the named sets a request supplies; a name declared twice (in
    /// one list or across declarations) is reported.
    pub(super) fn declare_context(&mut self, names: &[Name]) {
        for name in names {
            if let Some(&first) = self.context_ix.get(&name.text) {
                let first_span = self.model.contexts[first as usize].span;
                self.duplicate("context set", name, first_span);
                continue;
            }
            let id = u32::try_from(self.model.contexts.len()).unwrap_or(u32::MAX);
            self.context_ix.insert(name.text.clone(), id);
            self.model.contexts.push(sym(name));
        }
    }

    /// Compiles `rules` (one body's) against the declared `context` sets; every mistake is
    /// reported, the rules that compile are checked for the warnings of `rule_lint.rs`, and
    /// returned in source order.
    pub(super) fn resolve_rules(&mut self, rules: &[RuleDecl]) -> Vec<RuleModel> {
        let mut out = Vec::with_capacity(rules.len());
        let mut compiled: Vec<&RuleDecl> = Vec::with_capacity(rules.len());
        for rule in rules {
            let context_ix = &self.context_ix;
            let resolve = |name: &str| context_ix.get(name).map(|&i| ContextId(i));
            match CompiledCondition::compile_with(&rule.condition, &resolve, &mut self.patterns) {
                Ok(condition) => {
                    compiled.push(rule);
                    out.push(RuleModel {
                        outcome: rule.outcome,
                        condition,
                        text: rule_text(rule),
                        span: rule.span,
                    });
                }
                Err(errors) => {
                    for e in errors {
                        let d = self.condition_diagnostic(&e);
                        self.error(d);
                    }
                }
            }
        }
        self.lint_rules(&compiled);
        out
    }

    /// A condition's mistake as a diagnostic; an undeclared `context` set gets a "did you mean"
    /// and the way to declare it.
    fn condition_diagnostic(&self, e: &crate::condition::ConditionError) -> Diagnostic {
        let mut help = e.help().to_string();
        if e.code() == "undeclared-context" {
            let wanted = e.message().split('`').nth(1).unwrap_or("");
            let declared = self.model.contexts.iter().map(|s| s.name.as_str());
            if let Some(close) = suggest(wanted, declared) {
                help = format!("did you mean `context.{close}`? or {help}");
            } else if !self.model.contexts.is_empty() {
                help = format!(
                    "{help}; the policy declares {}",
                    list_names(&self.model.contexts)
                );
            }
        }
        Diagnostic::error(e.code(), e.message().to_string())
            .at(e.span(), e.label().to_string())
            .help(help)
    }
}

/// The canonical text of `rule`, allocated about once: it is about as long as its source.
fn rule_text(rule: &RuleDecl) -> Box<str> {
    let source_len = rule.span.end.saturating_sub(rule.span.start) as usize;
    let mut text = String::with_capacity(source_len + 16);
    // Writing to a `String` cannot fail.
    let _ = write!(text, "{rule}");
    text.into_boxed_str()
}
