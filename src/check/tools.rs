//! `tool` and `match` declarations (their attributes are read in `attrs.rs`), and that each
//! tool, pattern and `unknown allow` ends up with an effect.

use super::names::sym;
use super::{Checker, PatternModel, ToolModel};
use crate::diagnostic::Diagnostic;
use crate::limits;
use crate::syntax::ast::{MatchDecl, Span, ToolDecl};

impl Checker {
    /// `tool name { ... }`: a non-empty name, declared once.
    pub(super) fn resolve_tool(&mut self, t: &ToolDecl) {
        if let Some(&first) = self.tool_ix.get(&t.name.text) {
            let first_span = self.model.tools[first].name.span;
            self.duplicate("tool", &t.name, first_span);
            return;
        }
        if t.name.text.is_empty() {
            self.error(
                Diagnostic::error("empty-name", "a tool name cannot be empty")
                    .at(t.name.span, "")
                    .help("write the name the agent uses for the tool"),
            );
            return;
        }
        self.tool_ix
            .insert(t.name.text.clone(), self.model.tools.len());
        let attrs = self.resolve_attrs(&t.attrs);
        let rules = self.resolve_rules(&t.rules);
        self.model.tools.push(ToolModel {
            name: sym(&t.name),
            span: t.span,
            attrs,
            rules,
        });
    }

    /// `match "glob*" { ... }`: a non-empty pattern, declared once, at most
    /// [`limits::MAX_PATTERNS`].
    pub(super) fn resolve_match(&mut self, m: &MatchDecl) {
        if m.pattern.text.is_empty() {
            self.error(
                Diagnostic::error("empty-pattern", "a pattern cannot be empty")
                    .at(m.pattern.span, "")
                    .help("use `*` for any run of characters: \"mcp__*__get_*\""),
            );
            return;
        }
        if let Some(&first) = self.pattern_ix.get(&m.pattern.text) {
            let first_span = self.model.patterns[first].glob.span;
            self.duplicate("pattern", &m.pattern, first_span);
            return;
        }
        if self.model.patterns.len() >= limits::MAX_PATTERNS {
            self.error(
                Diagnostic::error(
                    "too-many",
                    format!("more than {} patterns", limits::MAX_PATTERNS),
                )
                .at(m.span, "")
                .help("declare tools one by one or merge patterns"),
            );
            return;
        }
        let attrs = self.resolve_attrs(&m.attrs);
        let rules = self.resolve_rules(&m.rules);
        self.pattern_ix
            .insert(m.pattern.text.clone(), self.model.patterns.len());
        self.model.patterns.push(PatternModel {
            glob: sym(&m.pattern),
            span: m.span,
            attrs,
            rules,
        });
    }

    /// Reports a tool or pattern with no effect of its own or from `defaults` (unless its
    /// effect was already reported undefined), and `unknown allow` without a default effect.
    pub(super) fn check_tools_complete(&mut self) {
        let defaults = self.model.defaults.clone();
        let mut problems = Vec::new();
        for t in &self.model.tools {
            if t.attrs.or(&defaults).effect.is_none() && !self.has_reported_effect_error(t.span) {
                problems.push(
                    Diagnostic::error("missing-effect", format!("tool `{}` declares no effect", t.name.name))
                        .at(t.name.span, "")
                        .help(
                            "add `effect none` (or another declared effect) to the tool, or set one for all tools in `defaults { effect none }`",
                        ),
                );
            }
        }
        for p in &self.model.patterns {
            if p.attrs.or(&defaults).effect.is_none() && !self.has_reported_effect_error(p.span) {
                problems.push(
                    Diagnostic::error(
                        "missing-effect",
                        format!("pattern `{}` declares no effect", p.glob.name),
                    )
                    .at(p.glob.span, "")
                    .help("add `effect none` (or another declared effect) to the pattern"),
                );
            }
        }
        if self.model.unknown_allow && defaults.effect.is_none() && !self.model.effects.is_empty() {
            if let Some(span) = self.model.unknown_span {
                problems.push(
                    Diagnostic::error("missing-defaults", "`unknown allow` needs a default effect")
                        .at(span, "")
                        .help("add `defaults { effect none }` so unknown tools have an effect"),
                );
            }
        }
        self.diagnostics.extend(problems);
    }
    /// Whether an undefined-effect error was already reported inside `span` (so a missing effect
    /// is not reported twice).
    fn has_reported_effect_error(&self, span: Span) -> bool {
        self.diagnostics.iter().any(|d| {
            d.code() == "undefined-effect"
                && d.span().is_some_and(|s| {
                    s.file == span.file && s.start >= span.start && s.end <= span.end
                })
        })
    }
}
