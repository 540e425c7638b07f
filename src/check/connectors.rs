//! Connectors: `tiers` (the connector allowlists a request can name) and `connectors prefix`
//! (how an MCP tool name carries its server).

use super::names::sym;
use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{Name, Span};

impl Checker {
    /// `tiers a, b, ...`: each tier listed once.
    pub(super) fn declare_tiers(&mut self, names: &[Name], span: Span) {
        if self.single("tiers", span) {
            self.model.tiers_span = Some(span);
            for n in names {
                if let Some(first) = self.model.tiers.iter().find(|t| t.name == n.text) {
                    let first_span = first.span;
                    self.duplicate_in_list("tier", n, first_span);
                } else {
                    self.model.tiers.push(sym(n));
                }
            }
        }
    }

    /// `connectors prefix "mcp__"`: not empty.
    pub(super) fn resolve_connectors_prefix(&mut self, prefix: &Name, span: Span) {
        if self.single("connectors prefix", span) {
            if prefix.text.is_empty() {
                self.error(
                    Diagnostic::error("empty-prefix", "the connector prefix is empty")
                        .at(prefix.span, "")
                        .help("use the prefix MCP tool names carry, e.g. \"mcp__\""),
                );
            } else {
                self.model.prefix = Some(sym(prefix));
            }
        }
    }
}
