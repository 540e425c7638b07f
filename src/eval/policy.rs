//! The [`Policy`] handle: what a loaded policy holds (compiled tables and classifier, sources,
//! warnings, the declared relations) behind one `Arc`, and the accessors the evaluator reads.
//! Building one from text is the work of the `policy` module, the crate's front door.

use std::sync::Arc;

use crate::compile::{self, Compiled};
use crate::decision::RuleId;
use crate::diagnostic::{Diagnostic, Location, Sources};

/// A compiled policy.
///
/// Immutable, `Send + Sync`, and a cheap clone (an `Arc` inside): compile once, share across
/// threads and agents. Build it with [`Policy::from_file`] or [`Policy::parse`].
#[derive(Clone, Debug)]
pub struct Policy {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub name: String,
    pub version: Option<u64>,
    pub sources: Arc<Sources>,
    pub warnings: Vec<Diagnostic>,
    pub compiled: Compiled,
    pub relations: Relations,
}

/// The declared relations `explain` cites when a role or permission is granted through them:
/// each role inclusion `(higher, lower, span)` (the span covers `higher > lower`) and each
/// permission implication `(permission, implied, span)` (the span is the implied name), with
/// the role and permission indexes of the compiled tables.
#[derive(Debug, Default)]
pub(crate) struct Relations {
    pub role_edges: Vec<(usize, usize, crate::span::Span)>,
    pub implies: Vec<(usize, usize, crate::span::Span)>,
}

impl Policy {
    pub(crate) fn tables(&self) -> &compile::Tables {
        &self.inner.compiled.tables
    }

    /// The name from the `policy` declaration.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The version from the `policy` declaration, when given.
    pub fn version(&self) -> Option<u64> {
        self.inner.version
    }

    /// The `default mode`, when declared.
    pub fn default_mode(&self) -> Option<&str> {
        let t = self.tables();
        t.default_mode.map(|m| &*t.modes[m as usize].name)
    }

    /// The `file:line:col` of a rule, or `None` for a rule the text does not spell out (such as
    /// the implicit `unknown deny`).
    pub fn rule_source(&self, rule: RuleId) -> Option<Location> {
        let info = self.tables().rules.get(rule.0 as usize)?;
        info.span.map(|s| self.inner.sources.location(s))
    }
}
