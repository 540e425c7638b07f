//! Semantic checks: syntax tree -> a resolved [`Model`] (names replaced by indexes) plus
//! diagnostics.
//!
//! Every problem is reported, not just the first: undefined references (with a "did you mean"),
//! duplicate declarations, malformed matrices, cycles in `roles` and `implies`, a `default mode`
//! that does not exist, patterns that can never match. Warnings do not stop loading; errors do.
//!
//! [`check`] runs two passes over the files (root first, each in declaration order): the
//! declarations that introduce names (`effects`, `intents`, `matrix` and `mode` names, `roles`,
//! `permission`, `tiers`), then those that refer to names, and then the checks that need the
//! whole model. Diagnostics come out in that order. Each declaration kind is checked in the file
//! named after it:
//!
//! | file | checks |
//! |---|---|
//! | `header.rs` | `policy`, `effects`, `intents`, `fallback`; what every policy must declare |
//! | `lexicon.rs` | `keywords`, `negation`, `combine`, `accents`; the keyword checks |
//! | `context.rs` | `embedded`, `except`, `quoted` |
//! | `matrix.rs` | `matrix` |
//! | `modes.rs` | `mode`, `default mode` |
//! | `roles.rs` | `roles`, `permission`; cycles in either |
//! | `connectors.rs` | `tiers`, `connectors prefix` |
//! | `defaults.rs` | `defaults`, `unknown`, `confirm fields`, `tenant arg`, `limit transactional`, `trust annotations` |
//! | `tools.rs` | `tool`, `match`; that each has an effect |
//! | `attrs.rs` | the attributes of a `tool`, a `match` or `defaults` |
//! | `rules.rs` | `context`; the argument rules of `tool`, `match`, `defaults` and `rules` |
//! | `rule_lint.rs` | argument rules that can never fire, `confirm` rules a `deny` rule overrides |
//! | `flow.rs` | `labels`, `taints`, `after` blocks (top level and in a `mode`), `taint openworld` |
//! | `patterns.rs` | patterns that can never match, catch-all patterns |
//! | `invisible.rs` | invisible characters in strings and comments (on the source text) |
//!
//! Besides: `model.rs` holds the [`Model`] the checks build, `names.rs` the declaring and
//! resolving of names (duplicates, undefined references), `suggest.rs` the "did you mean" and
//! lists of declared names, `shown.rs` how a diagnostic shows text a reader cannot see.

use std::collections::HashMap;

use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{Decl, PolicyFile, Span};

mod attrs;
mod connectors;
mod context;
mod defaults;
mod flow;
mod header;
mod invisible;
mod lexicon;
mod matrix;
mod model;
mod modes;
mod names;
mod patterns;
mod roles;
mod rule_lint;
mod rules;
mod shown;
mod suggest;
mod tools;

pub(crate) use invisible::invisible_characters;
pub use model::Cell;
pub(crate) use model::{
    AfterLine, AfterModel, AttrModel, KeywordRule, MatrixModel, ModeModel, Model, NegationRule,
    PatternModel, PhraseRule, RuleModel, Sym, ToolModel,
};
pub(crate) use suggest::suggest;

/// Checks the parsed files (root first) and resolves them into a [`Model`].
///
/// Returns the model and all diagnostics; the model is only meaningful when no diagnostic is an
/// error.
pub(crate) fn check(files: &[PolicyFile]) -> (Model, Vec<Diagnostic>) {
    let mut c = Checker::default();
    // Accent folding is on unless the policy says `accents keep` (issue 3); `Model::default()`
    // would leave it off.
    c.model.fold_accents = true;
    c.run(files);
    (c.model, c.diagnostics)
}

#[derive(Default)]
struct Checker {
    model: Model,
    diagnostics: Vec<Diagnostic>,
    effect_ix: HashMap<String, usize>,
    intent_ix: HashMap<String, usize>,
    matrix_ix: HashMap<String, usize>,
    mode_ix: HashMap<String, usize>,
    role_ix: HashMap<String, usize>,
    perm_ix: HashMap<String, usize>,
    /// Declared tools by name.
    tool_ix: HashMap<String, usize>,
    /// Pattern text -> index in `model.patterns`, for the duplicate check.
    pattern_ix: HashMap<String, usize>,
    /// Permissions with a `permission` statement of their own, and where.
    perm_statements: HashMap<String, Span>,
    /// First span of each single-use declaration keyword.
    singles: HashMap<&'static str, Span>,
    /// Declared `context` sets by name -> their `ContextId`.
    context_ix: HashMap<String, u32>,
    /// Declared flow labels by name -> index in `model.labels`.
    label_ix: HashMap<String, usize>,
    /// The regular expressions and globs of the argument rules, each compiled once.
    patterns: crate::condition::Patterns,
}

impl Checker {
    fn error(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    fn run(&mut self, files: &[PolicyFile]) {
        // Pass 1: declarations that introduce names, in file order.
        for (i, file) in files.iter().enumerate() {
            for decl in &file.decls {
                self.declare(decl, i == 0);
            }
        }
        self.require_basics(files);
        // Pass 2: declarations that reference names.
        for file in files {
            for decl in &file.decls {
                self.resolve(decl);
            }
            let rules = self.resolve_rules(&file.defaults_rules);
            self.model.rules.extend(rules);
        }
        self.check_cycles();
        self.check_tools_complete();
        self.check_patterns();
        self.check_catch_all_patterns();
        self.check_keywords();
        self.check_context();
    }

    /// Pass 1: a declaration that introduces names.
    fn declare(&mut self, decl: &Decl, root: bool) {
        match decl {
            Decl::Policy {
                name,
                version,
                span,
            } => self.declare_policy(name, version.as_ref(), *span, root),
            Decl::Effects { names, span } => self.declare_effects(names, *span),
            Decl::Intents { names, span } => self.declare_intents(names, *span),
            Decl::Matrix(m) => self.declare_matrix(m),
            Decl::Mode(m) => self.declare_mode(m),
            Decl::Roles { chains, .. } => self.declare_roles(chains),
            Decl::Permission { name, implies, .. } => self.declare_permission(name, implies),
            Decl::Tiers { names, span } => self.declare_tiers(names, *span),
            Decl::Context { names, .. } => self.declare_context(names),
            Decl::Labels { names, .. } => self.declare_labels(names),
            _ => {}
        }
    }

    /// Pass 2: a declaration that refers to names (or is a setting).
    fn resolve(&mut self, decl: &Decl) {
        match decl {
            Decl::Fallback { name, span } => self.resolve_fallback(name, *span),
            Decl::Combine { combine, span } => self.resolve_combine(*combine, *span),
            Decl::Keywords(k) => self.resolve_keywords(k),
            Decl::Negation(n) => self.resolve_negation(n),
            Decl::Matrix(m) => self.resolve_matrix(m),
            Decl::Mode(m) => self.resolve_mode(m),
            Decl::DefaultMode { name, span } => self.resolve_default_mode(name, *span),
            Decl::ConnectorsPrefix { prefix, span } => {
                self.resolve_connectors_prefix(prefix, *span)
            }
            Decl::Unknown { allow, span } => self.resolve_unknown(*allow, *span),
            Decl::Defaults { attrs, span } => self.resolve_defaults(attrs, *span),
            Decl::ConfirmFields { names, span } => self.resolve_confirm_fields(names, *span),
            Decl::TenantArg { name, span } => self.resolve_tenant_arg(name, *span),
            Decl::Limit { max, span } => self.resolve_limit(max, *span),
            Decl::Accents { fold, span } => self.resolve_accents(*fold, *span),
            Decl::Quoted { quoted, span } => self.resolve_quoted(*quoted, *span),
            Decl::Embedded(d) => self.resolve_phrases(d, false),
            Decl::Except(d) => self.resolve_phrases(d, true),
            Decl::TrustAnnotations { tighten, span } => {
                self.resolve_trust_annotations(*tighten, *span)
            }
            Decl::Tool(t) => self.resolve_tool(t),
            Decl::Match(m) => self.resolve_match(m),
            Decl::Rules(r) => {
                let rules = self.resolve_rules(&r.rules);
                self.model.rules.extend(rules);
            }
            Decl::After(a) => {
                if let Some(after) = self.resolve_after(a) {
                    self.model.afters.push(after);
                }
            }
            Decl::TaintOpenWorld { labels, span } => self.resolve_taint_openworld(labels, *span),
            _ => {}
        }
    }
}
