//! Warnings about `match` patterns: one that can never match (a declared tool's name, or covered
//! by an earlier pattern), one without `*`, and a catch-all with the read-only effect.

use std::collections::{HashMap, HashSet};

use super::Checker;
use crate::diagnostic::Diagnostic;

/// Most pattern-against-pattern comparisons the shadowing check makes before it gives up (with
/// a `shadow-check-incomplete` warning), so a policy of many similar patterns checks in bounded
/// time.
const MAX_SHADOW_COMPARISONS: usize = 250_000;

impl Checker {
    /// Warns about patterns that can never match: equal to a declared tool's name, or covered by
    /// an earlier pattern of the same precedence.
    pub(super) fn check_patterns(&mut self) {
        let tool_names: HashSet<&str> = self
            .model
            .tools
            .iter()
            .map(|t| t.name.name.as_str())
            .collect();
        let mut by_literal: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, p) in self.model.patterns.iter().enumerate() {
            let literal: String = p.glob.name.chars().filter(|c| *c != '*').collect();
            by_literal.entry(literal).or_default().push(i);
        }
        let mut warnings = Vec::new();
        // Patterns with the same literal text are still compared pairwise; the budget bounds
        // that work, and the checker says when it ran out.
        let mut budget = MAX_SHADOW_COMPARISONS;
        let mut budget_spent = false;
        for (i, p) in self.model.patterns.iter().enumerate() {
            if !p.glob.name.contains('*') {
                if tool_names.contains(p.glob.name.as_str()) {
                    warnings.push(
                        Diagnostic::warning(
                            "shadowed-pattern",
                            format!("pattern `{}` can never match: a tool of that name is declared", p.glob.name),
                        )
                        .at(p.glob.span, "shadowed by the tool declaration")
                        .help("a declared tool always wins over a pattern; delete the pattern or change the tool"),
                    );
                } else {
                    warnings.push(
                        Diagnostic::warning(
                            "pattern-without-star",
                            format!(
                                "pattern `{}` has no `*` and matches one name only",
                                p.glob.name
                            ),
                        )
                        .at(p.glob.span, "")
                        .help(format!(
                            "declare it as a tool: `tool \"{}\" {{ ... }}`",
                            p.glob.name
                        )),
                    );
                }
                continue;
            }
            // A pattern that covers `p` matches p's shortest name (its literal text), so it has
            // at most p's literal length; one that takes precedence has at least that length.
            // So only an earlier pattern with the very same literal text can shadow `p`: compare
            // within that group only, which keeps the check linear in practice.
            let literal: String = p.glob.name.chars().filter(|c| *c != '*').collect();
            let group = by_literal
                .get(literal.as_str())
                .map_or(&[][..], Vec::as_slice);
            let mut shadow = None;
            for &j in group.iter().take_while(|&&j| j < i) {
                if budget == 0 {
                    budget_spent = true;
                    break;
                }
                budget -= 1;
                let q = &self.model.patterns[j];
                if crate::glob::glob_covers(&q.glob.name, &p.glob.name) {
                    shadow = Some(q);
                    break;
                }
            }
            if let Some(q) = shadow {
                warnings.push(
                    Diagnostic::warning(
                        "shadowed-pattern",
                        format!("pattern `{}` can never match", p.glob.name),
                    )
                    .at(p.glob.span, "every name it matches is taken first")
                    .help(format!(
                        "pattern `{}` matches every such name first (same literal length, declared earlier); delete one or make this one more specific",
                        q.glob.name
                    )),
                );
            }
        }
        if budget_spent {
            warnings.push(
                Diagnostic::warning(
                    "shadow-check-incomplete",
                    format!(
                        "stopped looking for shadowed patterns after {MAX_SHADOW_COMPARISONS} comparisons"
                    ),
                )
                .help("many patterns share the same leading text; some that can never match may not be reported"),
            );
        }
        self.diagnostics.extend(warnings);
    }
    /// Warns about a pattern that matches every name (`*`, `**`: stars only) with the read-only
    /// effect `none`, its own or taken from `defaults`, and is not disabled: every tool the
    /// policy does not declare is then offered and runs as read-only, so `unknown deny` never
    /// refuses a tool. A pattern with literal text (`*_*`) does not match every name.
    pub(super) fn check_catch_all_patterns(&mut self) {
        let Some(none) = self.model.effects.iter().position(|e| e.name == "none") else {
            return;
        };
        let defaults = &self.model.defaults;
        let mut warnings = Vec::new();
        for p in &self.model.patterns {
            let glob = p.glob.name.as_str();
            if glob.is_empty() || glob.chars().any(|c| c != '*') {
                continue;
            }
            let attrs = p.attrs.or(defaults);
            if attrs.enabled.is_some_and(|(on, _)| !on)
                || attrs.effect.map(|(e, _)| e) != Some(none)
            {
                continue;
            }
            let mut d = Diagnostic::warning(
                "catch-all-read-only",
                format!(
                    "pattern `{glob}` matches every tool name with the read-only effect `none`: every undeclared tool is offered and runs"
                ),
            )
            .at(p.glob.span, "matches every name");
            d = match (p.attrs.effect, defaults.effect) {
                (None, Some((_, from))) => d
                    .help(format!(
                        "the pattern takes `effect none` from `defaults`, so `unknown deny` never refuses a tool; give it a stricter effect (`match \"{glob}\" {{ effect write }}`), narrow it (`mcp__github__get_*`), or delete it"
                    ))
                    .related(from, "the effect comes from `defaults`"),
                _ => d.help(
                    "`unknown deny` never refuses a tool past this pattern; declare read-only tools by name, narrow the pattern (`mcp__github__get_*`), give it a stricter effect, or delete it",
                ),
            };
            warnings.push(d);
        }
        self.diagnostics.extend(warnings);
    }
}
