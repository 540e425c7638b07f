//! The front door: loading a [`Policy`] from text or a file (syntax -> check -> compile), and
//! what a loaded policy declares (its effects, intents, modes, tools, rules and their sources,
//! the decision graph, the keyword classifier). The evaluator's methods (`offer`,
//! `check_call`, ...) live in the `eval` module, which also defines the `Policy` handle itself.

use std::path::Path;
use std::sync::Arc;

use crate::check;
use crate::classify::Intent;
use crate::compile::{self, Edge, Node};
use crate::decision::RuleId;
use crate::diagnostic::{Diagnostic, Location, PolicyError, Severity, Sources};
use crate::load::{self, Origin};

pub use crate::eval::Policy;
use crate::eval::{Inner, Relations};

impl Policy {
    /// Reads, checks and compiles the policy at `path`, following its `include`s (relative to
    /// the including file).
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] holding every diagnostic found (an unreadable file is a diagnostic
    /// too). A policy with errors is never returned.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = match crate::limits::read_file(path, crate::limits::MAX_POLICY_BYTES) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(e) => {
                    let d = Diagnostic::error(
                        "unreadable",
                        format!(
                            "cannot read `{name}`: not valid UTF-8 (byte {})",
                            e.utf8_error().valid_up_to()
                        ),
                    )
                    .help("save the policy as UTF-8");
                    return Err(PolicyError::new(vec![d], Arc::new(Sources::new())));
                }
            },
            Err(e) => {
                let d = Diagnostic::error(
                    "unreadable",
                    format!("cannot read `{name}`: {}", load::io_reason(&e)),
                )
                .help("check the path; policies are `.warden` text files");
                return Err(PolicyError::new(vec![d], Arc::new(Sources::new())));
            }
        };
        Policy::build(&name, &text, Origin::Path(path.to_path_buf()))
    }

    /// Checks and compiles policy text held in memory. `name` labels diagnostics
    /// (`name:line:col`); `include`s resolve relative to `name`'s folder.
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] holding every diagnostic found.
    pub fn parse(text: &str, name: &str) -> Result<Policy, PolicyError> {
        let dir = Path::new(name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Policy::build(name, text, Origin::Memory(dir))
    }

    /// Loads policy text named `name` whose includes resolve against `origin`.
    pub(crate) fn build(name: &str, text: &str, origin: Origin) -> Result<Policy, PolicyError> {
        let mut sources = Sources::new();
        let (files, mut diagnostics) = load::load(name, text, origin, &mut sources);
        let syntax_failed = diagnostics.iter().any(|d| d.severity() == Severity::Error);
        let (model, mut checked) = check::check(&files);
        checked.extend(check::invisible_characters(&files, &sources));
        if syntax_failed {
            // Semantic errors on a partial tree mislead (a missing declaration may only be
            // missing because it did not parse); keep only the ones that cannot stem from that.
            checked.retain(|d| !d.code().starts_with("missing"));
        }
        diagnostics.append(&mut checked);
        let sources = Arc::new(sources);
        if diagnostics.iter().any(|d| d.severity() == Severity::Error) {
            return Err(PolicyError::new(diagnostics, sources));
        }
        crate::diagnostic::sort_diagnostics(&mut diagnostics);
        // The syntax tree is freed while the classifier is built.
        let compiled = compile::compile(&model, move || drop(files));
        let relations = Relations {
            role_edges: model.role_edges.clone(),
            implies: model.implies.clone(),
        };
        Ok(Policy {
            inner: Arc::new(Inner {
                name: model
                    .name
                    .as_ref()
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
                version: model.version,
                sources,
                warnings: diagnostics,
                compiled,
                relations,
            }),
        })
    }

    /// Warnings found while loading (errors never reach a `Policy`).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.inner.warnings
    }

    /// The source text of the policy and its includes.
    pub fn sources(&self) -> &Sources {
        &self.inner.sources
    }

    /// Declared effects, in declaration order.
    pub fn effects(&self) -> impl Iterator<Item = &str> {
        self.tables().effects.iter().map(|s| &**s)
    }

    /// Declared intents, highest priority first.
    pub fn intents(&self) -> impl Iterator<Item = &str> {
        self.tables().intents.iter().map(|s| &**s)
    }

    /// Declared modes, in declaration order.
    pub fn modes(&self) -> impl Iterator<Item = &str> {
        self.tables().modes.iter().map(|m| &*m.name)
    }

    /// Declared flow labels (`labels`), in declaration order.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.tables().labels.iter().map(|s| &**s)
    }

    /// The labels a call of `tool` puts on a session (its `taints`, or those of the pattern or
    /// `defaults` it resolves to), in declaration order; empty for a tool the policy does not
    /// know.
    pub fn taints(&self, tool: &str) -> Vec<&str> {
        let mask = self.resolve_tool(tool).1.map_or(0, |r| r.taints);
        self.tables()
            .labels
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1u8 << i) != 0)
            .map(|(_, l)| &**l)
            .collect()
    }

    /// Declared tool names, in declaration order.
    pub fn tools(&self) -> impl Iterator<Item = &str> {
        self.tables().tools.iter().map(|(n, _)| &**n)
    }

    /// Declared `match` patterns, in declaration order.
    pub fn patterns(&self) -> Vec<&str> {
        let mut p: Vec<_> = self.tables().patterns.iter().collect();
        p.sort_by_key(|p| p.source_index);
        p.into_iter().map(|p| &*p.glob).collect()
    }

    /// Declared roles.
    pub fn roles(&self) -> impl Iterator<Item = &str> {
        self.tables().roles.iter().map(|s| &**s)
    }

    /// Declared permissions (named in a `permission` statement or implied by one).
    pub fn permissions(&self) -> impl Iterator<Item = &str> {
        self.tables().permissions.iter().map(|s| &**s)
    }

    /// Declared connector tiers, highest precedence first.
    pub fn tiers(&self) -> impl Iterator<Item = &str> {
        self.tables().tiers.iter().map(|s| &**s)
    }

    /// The `context` sets the policy declares (the named sets a request supplies with
    /// [`crate::Request::context`]), in declaration order.
    pub fn contexts(&self) -> impl Iterator<Item = &str> {
        self.tables().contexts.iter().map(|s| &**s)
    }

    /// The argument names that confirm a call (`confirm fields`), in declaration order; empty
    /// when the policy declares none.
    pub fn confirm_fields(&self) -> impl Iterator<Item = &str> {
        self.tables().confirm_fields.iter().map(|s| &**s)
    }

    /// The `intents` a query with no keyword hit gets (`fallback`), or `""` without intents.
    pub fn fallback_intent(&self) -> Intent {
        self.classify("")
    }

    /// The number of keyword entries (each language's strings; negators not counted).
    pub fn keyword_count(&self) -> usize {
        self.inner.compiled.classifier.keyword_count()
    }

    /// Classifies a query into the intent that gates tools (see [`crate::classify`]).
    ///
    /// Never fails: any text classifies, in time linear in its length; text over
    /// [`crate::limits::MAX_QUERY_BYTES`] is cut there (`Intent::truncated`).
    pub fn classify(&self, query: &str) -> Intent {
        let mut intent = self.inner.compiled.classifier.classify(query);
        if !self.tables().arg_rules.is_empty() {
            let normalized = crate::classify::normalize(query, self.tables().fold_accents);
            intent.query = Some(normalized.text.as_str().into());
        }
        intent
    }

    /// The policy text of a rule (the span's source), or `""`.
    pub fn rule_text(&self, rule: RuleId) -> &str {
        self.tables()
            .rules
            .get(rule.0 as usize)
            .and_then(|r| r.span)
            .map_or("", |s| self.inner.sources.slice(s))
    }

    /// The compiled keyword classifier (for analysis).
    pub(crate) fn classifier(&self) -> &crate::classify::Classifier {
        &self.inner.compiled.classifier
    }

    /// The span of a rule, when the text spells it out.
    pub(crate) fn rule_span(&self, rule: RuleId) -> Option<crate::syntax::ast::Span> {
        self.tables()
            .rules
            .get(rule.0 as usize)
            .and_then(|r| r.span)
    }

    /// The whole source line a rule starts on (without its line break), with the rule's
    /// location and its column range on that line (in characters, 0-based, end exclusive).
    pub(crate) fn rule_line(&self, rule: RuleId) -> Option<(Location, String, (usize, usize))> {
        self.span_line(self.rule_span(rule)?)
    }

    /// As [`Policy::rule_line`], for any span of the policy's sources.
    pub(crate) fn span_line(
        &self,
        span: crate::syntax::ast::Span,
    ) -> Option<(Location, String, (usize, usize))> {
        let sources = &self.inner.sources;
        let text = sources.text(span.file);
        let start = (span.start as usize).min(text.len());
        let end = (span.end as usize).clamp(start, text.len());
        let line_start = text.get(..start)?.rfind('\n').map_or(0, |i| i + 1);
        let line_end = text
            .get(start..)?
            .find('\n')
            .map_or(text.len(), |i| start + i);
        let line = text.get(line_start..line_end)?.trim_end_matches('\r');
        let col0 = text.get(line_start..start)?.chars().count();
        let col1 = col0 + text.get(start..end.min(line_end))?.chars().count();
        Some((
            sources.location(span),
            line.to_string(),
            (col0, col1.max(col0 + 1)),
        ))
    }

    /// The declared role inclusions and permission implications, with their spans.
    pub(crate) fn relations(&self) -> &Relations {
        &self.inner.relations
    }

    /// The decision graph: node and edge lists, for `graph` and `explain`.
    pub fn graph(&self) -> &petgraph::graph::DiGraph<Node, Edge> {
        &self.inner.compiled.graph
    }

    /// Approximate heap bytes held by the compiled tables (tools, patterns, closures, matrices,
    /// rule table), not counting the source text, graph or keyword automaton.
    pub fn table_heap_bytes(&self) -> usize {
        let t = self.tables();
        let row = |r: &compile::ToolRow| {
            std::mem::size_of::<compile::ToolRow>()
                + r.perms.heap_bytes()
                + r.roles.as_ref().map_or(0, |b| b.heap_bytes())
                + r.requires.iter().map(|s| s.len() + 16).sum::<usize>()
        };
        t.tools
            .iter()
            .map(|(n, r)| n.len() + 16 + row(r))
            .sum::<usize>()
            + t.tool_index.len() * 40
            + t.tools.iter().map(|(n, _)| n.len()).sum::<usize>()
            + t.patterns
                .iter()
                .map(|p| p.glob.len() + row(&p.row))
                .sum::<usize>()
            + t.role_closure
                .iter()
                .map(|b| b.heap_bytes() + 16)
                .sum::<usize>()
            + t.perm_closure
                .iter()
                .map(|b| b.heap_bytes() + 16)
                .sum::<usize>()
            + t.matrices
                .iter()
                .map(|m| (m.allow.len() * 16) + m.cell_rule.len() * 4)
                .sum::<usize>()
            + t.rules.len() * std::mem::size_of::<compile::RuleInfo>()
    }
}
