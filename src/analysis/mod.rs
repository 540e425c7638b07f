//! Policy analysis for the people who change policies: the stage-by-stage [`Trace`] of one
//! decision ([`Policy::explain`](crate::Policy::explain)), the complete decision [`Table`] of a
//! policy, the exhaustive [`PolicyDiff`] between two versions, the runner of policy test
//! files (`*.test.yaml`, [`testrun`]), and the decision graph drawn as DOT or Mermaid ([`graph`]).
//!
//! The decision space is finite: declared tools and patterns × intents × modes, and the request
//! conditions (connector, tenant, roles, permissions) stages 2–5 read. The table and the diff
//! are computed symbolically over that space from the compiled tables, not by sampling requests.
//! Argument rules are compared as text ([`rule_changes`]); what they do to real calls is seen
//! by replaying recorded calls against both versions ([`replay`]).

pub mod diff;
pub mod explain;
pub mod graph;
pub mod replay;
pub mod rule_changes;
pub mod table;
pub mod testrun;

pub use diff::{CellGroup, Moved, PolicyDiff};
pub use explain::{RuleCheck, Trace, TraceStep};
pub use table::{Table, TableFormat};

use serde::Serialize;

use crate::decision::RuleId;
use crate::policy::Policy;

/// A rule of the policy text, resolved for display: `file:line:col` and the whole source line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleRef {
    /// `file:line:col` of the rule.
    pub location: String,
    /// The source line the rule starts on, as written.
    pub line: String,
    /// The rule's column range on that line (characters, 0-based, end exclusive).
    #[serde(skip)]
    pub columns: (usize, usize),
}

impl RuleRef {
    /// Resolves `rule`, or `None` for a rule the text does not spell out.
    pub(crate) fn of(policy: &Policy, rule: RuleId) -> Option<RuleRef> {
        let (loc, line, columns) = policy.rule_line(rule)?;
        Some(RuleRef {
            location: loc.to_string(),
            line,
            columns,
        })
    }

    /// Resolves a span of the policy's sources (a rule the tables do not number, such as one
    /// inclusion of a `roles` chain).
    pub(crate) fn at(policy: &Policy, span: crate::syntax::ast::Span) -> Option<RuleRef> {
        let (loc, line, columns) = policy.span_line(span)?;
        Some(RuleRef {
            location: loc.to_string(),
            line,
            columns,
        })
    }

    /// `file:line:col: text` on one line (the source line trimmed).
    pub fn one_line(&self) -> String {
        format!("{}: {}", self.location, self.line.trim())
    }

    /// A compiler-style note: `--> file:line:col`, the numbered source line and a caret
    /// underline, each line prefixed with `indent`.
    pub fn note(&self, indent: &str) -> String {
        let number = self.location.rsplit(':').nth(1).unwrap_or("").to_string();
        let pad = " ".repeat(number.len());
        let width = self.line.chars().count();
        let (c0, c1) = (self.columns.0.min(width), self.columns.1.min(width));
        let carets = "^".repeat(c1.saturating_sub(c0).max(1));
        format!(
            "{indent}{pad}--> {}\n{indent}{pad} |\n{indent}{number} | {}\n{indent}{pad} | {}{carets}\n",
            self.location,
            self.line,
            " ".repeat(c0)
        )
    }
}
