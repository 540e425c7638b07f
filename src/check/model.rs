//! The checked policy: [`Model`], every name resolved to an index and every rule with its
//! span, and the types it is made of. The compiler reads it; nothing after the compiler does.

use crate::condition::CompiledCondition;
use crate::syntax::ast::{Combine, Direction, Quoted, RuleOutcome, Span};

/// A declared name and where it was declared.
#[derive(Clone, Debug)]
pub(crate) struct Sym {
    pub name: String,
    pub span: Span,
}

/// A matrix cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cell {
    /// The effect is offered for the intent.
    Allow,
    /// The effect is offered, and its calls need confirmation.
    Confirm,
    /// The effect is not offered for the intent.
    Deny,
}

impl Cell {
    /// The cell's keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            Cell::Allow => "allow",
            Cell::Confirm => "confirm",
            Cell::Deny => "deny",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct KeywordRule {
    pub intent: usize,
    pub lang: String,
    pub text: String,
    pub span: Span,
    /// The texts the keyword automaton holds for it (without a stem's `*`), set once the
    /// policy's `accents` setting is known: see [`crate::classify::spellings`].
    pub spellings: Vec<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct NegationRule {
    pub direction: Direction,
    /// The window in words; 0 for a negator whose reach is its clause (`clause` is set).
    pub window: u32,
    /// `negation before|after clause`: the negator reaches to the end (start) of its clause.
    pub clause: bool,
    pub text: String,
    pub span: Span,
    /// As [`KeywordRule::spellings`].
    pub spellings: Vec<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct MatrixModel {
    pub name: Sym,
    /// `cells[intent][effect]`, with the span of each cell word.
    pub cells: Vec<Vec<(Cell, Span)>>,
}

#[derive(Clone, Debug)]
pub(crate) struct ModeModel {
    pub name: Sym,
    pub matrix: Option<(usize, Span)>,
    pub restrict: Option<(Vec<usize>, Span)>,
    pub confirm: Option<(Vec<usize>, Span)>,
    /// The mode's own `after` blocks.
    pub afters: Vec<AfterModel>,
}

/// One checked `after` block: the labels it waits for (indexes into [`Model::labels`]), its
/// effect lines and its argument rules.
#[derive(Clone, Debug)]
pub(crate) struct AfterModel {
    pub labels: Vec<usize>,
    /// `confirm EFFECTS` and `deny EFFECTS` lines, in source order.
    pub lines: Vec<AfterLine>,
    /// Its argument rules, compiled, in source order.
    pub rules: Vec<RuleModel>,
}

/// One `confirm EFFECTS` or `deny EFFECTS` line of an `after` block.
#[derive(Clone, Debug)]
pub(crate) struct AfterLine {
    pub outcome: RuleOutcome,
    pub effects: Vec<usize>,
    pub span: Span,
}

/// The resolved attributes of a tool, pattern or `defaults` block.
#[derive(Clone, Debug, Default)]
pub(crate) struct AttrModel {
    pub effect: Option<(usize, Span)>,
    pub permissions: Option<(Vec<usize>, Span)>,
    pub roles: Option<(Vec<usize>, Span)>,
    pub tenant_required: Option<Span>,
    pub requires: Option<(Vec<String>, Span)>,
    pub confirm_always: Option<Span>,
    pub enabled: Option<(bool, Span)>,
    /// `taints L1, L2`: label indexes.
    pub taints: Option<(Vec<usize>, Span)>,
}

impl AttrModel {
    /// Attributes of `self`, each missing one taken from `defaults`.
    pub fn or(&self, defaults: &AttrModel) -> AttrModel {
        AttrModel {
            effect: self.effect.or(defaults.effect),
            permissions: self
                .permissions
                .clone()
                .or_else(|| defaults.permissions.clone()),
            roles: self.roles.clone().or_else(|| defaults.roles.clone()),
            tenant_required: self.tenant_required.or(defaults.tenant_required),
            requires: self.requires.clone().or_else(|| defaults.requires.clone()),
            confirm_always: self.confirm_always.or(defaults.confirm_always),
            enabled: self.enabled.or(defaults.enabled),
            taints: self.taints.clone().or_else(|| defaults.taints.clone()),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct ToolModel {
    pub name: Sym,
    pub span: Span,
    pub attrs: AttrModel,
    /// Its own argument rules, compiled, in source order.
    pub rules: Vec<RuleModel>,
}

/// One checked argument rule: its outcome, its compiled condition, its canonical text (as
/// `toolwarden fmt` prints it) and the rule's span.
#[derive(Clone, Debug)]
pub(crate) struct RuleModel {
    pub outcome: RuleOutcome,
    pub condition: CompiledCondition,
    pub text: Box<str>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub(crate) struct PatternModel {
    pub glob: Sym,
    pub span: Span,
    pub attrs: AttrModel,
    /// Its own argument rules, compiled, in source order.
    pub rules: Vec<RuleModel>,
}

/// A checked policy: every name resolved to an index, every rule with its span.
#[derive(Clone, Debug, Default)]
pub(crate) struct Model {
    pub name: Option<Sym>,
    pub version: Option<u64>,
    pub effects: Vec<Sym>,
    pub intents: Vec<Sym>,
    pub fallback: Option<(usize, Span)>,
    pub combine: Combine,
    pub keywords: Vec<KeywordRule>,
    pub negations: Vec<NegationRule>,
    /// `quoted count|data|ignore`.
    pub quoted: Quoted,
    /// `embedded` phrases: the text after one is quoted content.
    pub embedded: Vec<PhraseRule>,
    /// `except` words and phrases: a keyword hit inside one does not count.
    pub exceptions: Vec<PhraseRule>,
    pub matrices: Vec<MatrixModel>,
    pub modes: Vec<ModeModel>,
    pub default_mode: Option<(usize, Span)>,
    pub roles: Vec<Sym>,
    /// `(higher, lower, span)`: the higher role includes the lower one.
    pub role_edges: Vec<(usize, usize, Span)>,
    pub permissions: Vec<Sym>,
    /// `(permission, implied, span)`.
    pub implies: Vec<(usize, usize, Span)>,
    pub tiers: Vec<Sym>,
    pub tiers_span: Option<Span>,
    pub prefix: Option<Sym>,
    pub unknown_allow: bool,
    pub unknown_span: Option<Span>,
    pub defaults: AttrModel,
    pub confirm_fields: Vec<Sym>,
    pub tenant_arg: Option<Sym>,
    pub limit: Option<(u64, Span)>,
    pub tools: Vec<ToolModel>,
    pub patterns: Vec<PatternModel>,
    pub fold_accents: bool,
    /// `trust annotations ignore` was declared (the default is `tighten`).
    pub ignore_annotations: bool,
    /// The declared `context` sets, in declaration order (a set's index is its `ContextId`).
    pub contexts: Vec<Sym>,
    /// The rules that apply to every tool: those of the top-level `rules` blocks and of the
    /// `defaults` blocks, in file and source order.
    pub rules: Vec<RuleModel>,
    /// The declared flow labels, in declaration order (at most eight).
    pub labels: Vec<Sym>,
    /// The top-level `after` blocks, which apply in every mode.
    pub afters: Vec<AfterModel>,
    /// `taint openworld L1, L2`: the labels (indexes into [`Model::labels`]) an MCP tool whose
    /// `openWorldHint` is true or missing puts on the session.
    pub openworld: Option<(Vec<usize>, Span)>,
}

/// One `embedded` phrase or `except` word or phrase, as the classifier reads it.
#[derive(Clone, Debug)]
pub(crate) struct PhraseRule {
    /// The text as written (an `except` stem ends with `*`).
    pub text: String,
    /// `except clause`: the entry counts only where it is its whole clause.
    pub clause: bool,
    pub span: Span,
    /// The texts the automaton holds for it (without a stem's `*`), as
    /// [`KeywordRule::spellings`].
    pub spellings: Vec<String>,
}

impl PhraseRule {
    /// Whether it is a `"stem*"` (only `except` entries may be).
    pub fn is_stem(&self) -> bool {
        self.text.ends_with('*')
    }
}
