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

impl Policy {
    /// The labels a call of `tool` puts on a session, in the policy's order: the tool's own
    /// `taints` (or the `defaults` it takes), and, when `open_world` (an MCP tool whose
    /// `annotations.openWorldHint` is true or missing, the MCP default), the labels of
    /// `taint openworld`. The hint can only add labels: `open_world = false` never removes a
    /// label the tool `taints`.
    ///
    /// ```
    /// use toolwarden::Policy;
    /// let policy = Policy::parse(
    ///     "policy \"p\"\neffects none\nmode m { }\nlabels untrusted, private\n\
    ///      taint openworld untrusted\ntool read_inbox { effect none  taints private }\n",
    ///     "p.warden",
    /// ).unwrap();
    /// assert_eq!(policy.call_labels("read_inbox", false), vec!["private"]);
    /// assert_eq!(policy.call_labels("read_inbox", true), vec!["untrusted", "private"]);
    /// ```
    pub fn call_labels(&self, tool: &str, open_world: bool) -> Vec<&str> {
        let mask = self.call_mask(tool, open_world);
        let t = self.tables();
        (0..t.labels.len())
            .filter(|i| mask & (1u8 << i) != 0)
            .map(|i| &*t.labels[i])
            .collect()
    }

    /// The labels of `taint openworld`, in the policy's order (empty without the statement).
    pub fn openworld_labels(&self) -> Vec<&str> {
        let t = self.tables();
        (0..t.labels.len())
            .filter(|i| t.openworld & (1u8 << i) != 0)
            .map(|i| &*t.labels[i])
            .collect()
    }

    /// [`Policy::call_labels`] as a mask over the policy's labels.
    pub(crate) fn call_mask(&self, tool: &str, open_world: bool) -> u8 {
        let taints = self.resolve_tool(tool).1.map_or(0, |r| r.taints);
        if open_world {
            taints | self.tables().openworld
        } else {
            taints
        }
    }
}
