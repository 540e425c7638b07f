//! Semantic checks: syntax tree -> a resolved [`Model`] (names replaced by indexes) plus
//! diagnostics.
//!
//! Every problem is reported, not just the first: undefined references (with a "did you mean"),
//! duplicate declarations, malformed matrices, cycles in `roles` and `implies`, a `default mode`
//! that does not exist, patterns that can never match. Warnings do not stop loading; errors do.

// `Decl::X { .. } => if self.single(..) { .. }` reads better than guards with side effects.
#![allow(clippy::collapsible_match)]

use std::collections::HashMap;

use crate::diagnostic::Diagnostic;
use crate::limits;
use crate::relation::Relation;
use crate::syntax::ast::*;

mod context;
pub(crate) use context::PhraseRule;

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
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct ToolModel {
    pub name: Sym,
    pub span: Span,
    pub attrs: AttrModel,
}

#[derive(Clone, Debug)]
pub(crate) struct PatternModel {
    pub glob: Sym,
    pub span: Span,
    pub attrs: AttrModel,
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
}

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
}

/// Names "close" to `name` among `candidates`, for a did-you-mean help.
pub(crate) fn suggest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn list_names(syms: &[Sym]) -> String {
    let names: Vec<String> = syms
        .iter()
        .take(12)
        .map(|s| format!("`{}`", s.name))
        .collect();
    let more = if syms.len() > 12 { ", …" } else { "" };
    format!("{}{more}", names.join(", "))
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
        }
        self.check_cycles();
        self.check_tools_complete();
        self.check_patterns();
        self.check_catch_all_patterns();
        self.check_keywords();
        self.check_context();
    }

    /// Reports a second declaration of something that may appear once.
    fn single(&mut self, what: &'static str, span: Span) -> bool {
        if let Some(first) = self.singles.get(what).copied() {
            self.error(
                Diagnostic::error("duplicate", format!("`{what}` is declared twice"))
                    .at(span, "second declaration")
                    .help(format!(
                        "keep one `{what}` declaration and delete the other"
                    ))
                    .related(first, "the first declaration is"),
            );
            return false;
        }
        self.singles.insert(what, span);
        true
    }

    fn declare(&mut self, decl: &Decl, root: bool) {
        match decl {
            Decl::Policy {
                name,
                version,
                span,
            } => {
                if !root {
                    self.error(
                        Diagnostic::error(
                            "policy-in-include",
                            "an included file cannot declare `policy`",
                        )
                        .at(*span, "")
                        .help("only the root file names the policy; delete this line"),
                    );
                } else if self.single("policy", *span) {
                    self.model.name = Some(sym(name));
                    self.model.version = version.as_ref().map(|v| v.value);
                }
            }
            Decl::Effects { names, span } => {
                if self.single("effects", *span) {
                    for n in names {
                        self.declare_unique(n, "effect", |c| &mut c.effect_ix, |m| &mut m.effects);
                    }
                    if self.model.effects.len() > limits::MAX_EFFECTS {
                        self.error(
                            Diagnostic::error(
                                "too-many",
                                format!(
                                    "{} effects declared; at most {} are supported",
                                    self.model.effects.len(),
                                    limits::MAX_EFFECTS
                                ),
                            )
                            .at(*span, "")
                            .help("merge effects that are gated the same way"),
                        );
                    }
                }
            }
            Decl::Intents { names, span } => {
                if self.single("intents", *span) {
                    for n in names {
                        self.declare_unique(n, "intent", |c| &mut c.intent_ix, |m| &mut m.intents);
                    }
                    if self.model.intents.len() > limits::MAX_INTENTS {
                        self.error(
                            Diagnostic::error(
                                "too-many",
                                format!(
                                    "{} intents declared; at most {} are supported",
                                    self.model.intents.len(),
                                    limits::MAX_INTENTS
                                ),
                            )
                            .at(*span, "")
                            .help("merge intents that gate the same effects"),
                        );
                    }
                }
            }
            Decl::Matrix(m) => {
                if let Some(first) = self.matrix_ix.get(&m.name.text) {
                    let first_span = self.model.matrices[*first].name.span;
                    self.duplicate("matrix", &m.name, first_span);
                } else {
                    self.matrix_ix
                        .insert(m.name.text.clone(), self.model.matrices.len());
                    self.model.matrices.push(MatrixModel {
                        name: sym(&m.name),
                        cells: Vec::new(),
                    });
                }
            }
            Decl::Mode(m) => {
                if let Some(first) = self.mode_ix.get(&m.name.text) {
                    let first_span = self.model.modes[*first].name.span;
                    self.duplicate("mode", &m.name, first_span);
                } else {
                    self.mode_ix
                        .insert(m.name.text.clone(), self.model.modes.len());
                    self.model.modes.push(ModeModel {
                        name: sym(&m.name),
                        matrix: None,
                        restrict: None,
                        confirm: None,
                    });
                }
            }
            Decl::Roles { chains, .. } => {
                for chain in chains {
                    for n in chain {
                        if !self.role_ix.contains_key(&n.text) {
                            self.role_ix.insert(n.text.clone(), self.model.roles.len());
                            self.model.roles.push(sym(n));
                        }
                    }
                    for pair in chain.windows(2) {
                        let (hi, lo) = (self.role_ix[&pair[0].text], self.role_ix[&pair[1].text]);
                        if hi == lo {
                            self.error(
                                Diagnostic::error(
                                    "cycle",
                                    format!("role `{}` includes itself", pair[0].text),
                                )
                                .at(pair[0].span.to(pair[1].span), "")
                                .help("a role chain lists each role once: `admin > viewer`"),
                            );
                        } else {
                            self.model
                                .role_edges
                                .push((hi, lo, pair[0].span.to(pair[1].span)));
                        }
                    }
                }
            }
            Decl::Permission { name, implies, .. } => {
                if let Some(&first) = self.perm_statements.get(&name.text) {
                    self.duplicate("permission", name, first);
                    return;
                }
                self.perm_statements.insert(name.text.clone(), name.span);
                let p = self.permission(name);
                for target in implies {
                    let t = self.permission(target);
                    if p == t {
                        self.error(
                            Diagnostic::error(
                                "cycle",
                                format!("permission `{}` implies itself", name.text),
                            )
                            .at(target.span, "")
                            .help("remove it from the `implies` list"),
                        );
                    } else {
                        self.model.implies.push((p, t, target.span));
                    }
                }
            }
            Decl::Tiers { names, span } => {
                if self.single("tiers", *span) {
                    self.model.tiers_span = Some(*span);
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
            _ => {}
        }
    }

    fn permission(&mut self, name: &Name) -> usize {
        if let Some(&i) = self.perm_ix.get(&name.text) {
            return i;
        }
        let i = self.model.permissions.len();
        self.perm_ix.insert(name.text.clone(), i);
        self.model.permissions.push(sym(name));
        i
    }

    fn duplicate(&mut self, what: &str, name: &Name, first: Span) {
        self.error(
            Diagnostic::error(
                "duplicate",
                format!("{what} `{}` is declared twice", name.text),
            )
            .at(name.span, "declared again here")
            .help(format!(
                "rename one of them or delete the second declaration of `{}`",
                name.text
            ))
            .related(first, "first declared"),
        );
    }

    /// Reports a name listed twice in one list (`effects`, `intents`, `tiers`).
    fn duplicate_in_list(&mut self, what: &str, name: &Name, first: Span) {
        self.error(
            Diagnostic::error(
                "duplicate",
                format!("{what} `{}` is listed twice", name.text),
            )
            .at(name.span, "listed again here")
            .help(format!(
                "list each {what} once: delete this `{}`",
                name.text
            ))
            .related(first, "first listed"),
        );
    }

    fn declare_unique(
        &mut self,
        n: &Name,
        what: &str,
        ix: fn(&mut Checker) -> &mut HashMap<String, usize>,
        list: fn(&mut Model) -> &mut Vec<Sym>,
    ) {
        if let Some(&first) = ix(self).get(&n.text) {
            let first_span = list(&mut self.model)[first].span;
            self.duplicate_in_list(what, n, first_span);
            return;
        }
        let i = list(&mut self.model).len();
        ix(self).insert(n.text.clone(), i);
        list(&mut self.model).push(sym(n));
    }

    fn require_basics(&mut self, files: &[PolicyFile]) {
        let root_start = Span::new(files.first().map_or(FileId(0), |f| f.file), 0, 0);
        if self.model.name.is_none() && !self.singles.contains_key("policy") {
            self.error(
                Diagnostic::error("missing-policy", "the policy has no `policy` declaration")
                    .at(root_start, "")
                    .help("start the file with `policy \"my-policy\" version 1`"),
            );
        }
        if self.model.effects.is_empty() {
            self.error(
                Diagnostic::error("missing-effects", "the policy declares no effects")
                    .at(root_start, "")
                    .help("declare the side-effect classes tools can have: `effects none, write, delete`"),
            );
        }
        let has_mode = files
            .iter()
            .flat_map(|f| &f.decls)
            .any(|d| matches!(d, Decl::Mode(_)));
        if !has_mode {
            self.error(
                Diagnostic::error("missing-mode", "the policy declares no mode")
                    .at(root_start, "")
                    .help("declare at least one execution mode: `mode supervised { matrix standard }`"),
            );
        }
        let has_fallback = files
            .iter()
            .flat_map(|f| &f.decls)
            .any(|d| matches!(d, Decl::Fallback { .. }));
        if let Some(Decl::Intents { span, .. }) = files
            .iter()
            .flat_map(|f| &f.decls)
            .find(|d| matches!(d, Decl::Intents { .. }))
        {
            if !has_fallback {
                let lowest = self
                    .model
                    .intents
                    .last()
                    .map_or("read".to_string(), |s| s.name.clone());
                self.error(
                    Diagnostic::error(
                        "missing-fallback",
                        "intents are declared but no `fallback` intent",
                    )
                    .at(*span, "")
                    .help(format!(
                        "name the intent of a query with no keyword hit: `fallback {lowest}`"
                    )),
                );
            }
        }
    }

    fn effect(&mut self, n: &Name) -> Option<usize> {
        if let Some(&i) = self.effect_ix.get(&n.text) {
            return Some(i);
        }
        let mut d = Diagnostic::error("undefined-effect", format!("undefined effect `{}`", n.text))
            .at(n.span, "not declared in `effects`");
        d = match suggest(&n.text, self.model.effects.iter().map(|s| s.name.as_str())) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None if self.model.effects.is_empty() => d.help(if n.text == "none" {
                "declare it: `effects none`".to_string()
            } else {
                format!("declare it: `effects none, {}`", n.text)
            }),
            None => d.help(format!(
                "declared effects are {}; add `{}` to `effects` to declare it",
                list_names(&self.model.effects),
                n.text
            )),
        };
        self.error(d);
        None
    }

    fn intent(&mut self, n: &Name) -> Option<usize> {
        if let Some(&i) = self.intent_ix.get(&n.text) {
            return Some(i);
        }
        let mut d = Diagnostic::error("undefined-intent", format!("undefined intent `{}`", n.text))
            .at(n.span, "not declared in `intents`");
        d = match suggest(&n.text, self.model.intents.iter().map(|s| s.name.as_str())) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None if self.model.intents.is_empty() => d.help(format!(
                "declare the intents first, highest priority first: `intents {}` (more names joined by `>`)",
                n.text
            )),
            None => d.help(format!(
                "declared intents are {}; add `{}` to `intents` to declare it",
                list_names(&self.model.intents),
                n.text
            )),
        };
        self.error(d);
        None
    }

    fn role(&mut self, n: &Name) -> Option<usize> {
        if let Some(&i) = self.role_ix.get(&n.text) {
            return Some(i);
        }
        let mut d = Diagnostic::error("undefined-role", format!("undefined role `{}`", n.text))
            .at(n.span, "not declared in `roles`");
        d = match suggest(&n.text, self.model.roles.iter().map(|s| s.name.as_str())) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None if self.model.roles.is_empty() => {
                d.help(format!("declare it: `roles {{ {} }}`", n.text))
            }
            None => d.help(format!(
                "declared roles are {}; add `{}` to `roles` to declare it",
                list_names(&self.model.roles),
                n.text
            )),
        };
        self.error(d);
        None
    }

    fn permission_ref(&mut self, n: &Name) -> Option<usize> {
        if let Some(&i) = self.perm_ix.get(&n.text) {
            return Some(i);
        }
        let mut d = Diagnostic::error(
            "undefined-permission",
            format!("undefined permission `{}`", n.text),
        )
        .at(n.span, "not declared by any `permission` statement");
        d = match suggest(
            &n.text,
            self.model.permissions.iter().map(|s| s.name.as_str()),
        ) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help(format!("declare it: `permission \"{}\"`", n.text)),
        };
        self.error(d);
        None
    }

    fn resolve(&mut self, decl: &Decl) {
        match decl {
            Decl::Fallback { name, span } => {
                if self.single("fallback", *span) {
                    if let Some(i) = self.intent(name) {
                        self.model.fallback = Some((i, *span));
                    }
                }
            }
            Decl::Combine { combine, span } => {
                if self.single("combine", *span) {
                    self.model.combine = *combine;
                }
            }
            Decl::Keywords(k) => {
                let Some(intent) = self.intent(&k.intent) else {
                    return;
                };
                for g in &k.groups {
                    for e in &g.entries {
                        if self.keyword_ok(e) {
                            self.model.keywords.push(KeywordRule {
                                intent,
                                lang: g.lang.text.clone(),
                                text: e.text.clone(),
                                span: e.span,
                                spellings: Vec::new(),
                            });
                        }
                    }
                }
            }
            Decl::Negation(n) => {
                let window = match &n.reach {
                    Reach::Words(w) => w,
                    Reach::Clause(_) => &Int {
                        value: 0,
                        span: n.reach.span(),
                    },
                };
                let clause = matches!(n.reach, Reach::Clause(_));
                if !clause && (window.value == 0 || window.value > 16) {
                    self.error(
                        Diagnostic::error(
                            "bad-window",
                            format!(
                                "a negation window of {} words is out of range",
                                window.value
                            ),
                        )
                        .at(window.span, "")
                        .help("use a window from 1 to 16 words, or `clause` to reach the whole clause"),
                    );
                    return;
                }
                for g in &n.groups {
                    for e in &g.entries {
                        if e.text.contains('*') || e.text.trim().is_empty() {
                            self.error(
                                Diagnostic::error(
                                    "bad-negator",
                                    format!("negator `{}` must be a plain word or phrase", e.text),
                                )
                                .at(e.span, "")
                                .help("write the negator without `*`, e.g. \"don't\""),
                            );
                            continue;
                        }
                        self.model.negations.push(NegationRule {
                            direction: n.direction,
                            window: window.value as u32,
                            clause,
                            text: e.text.clone(),
                            span: e.span,
                            spellings: Vec::new(),
                        });
                    }
                }
            }
            Decl::Matrix(m) => self.resolve_matrix(m),
            Decl::Mode(m) => self.resolve_mode(m),
            Decl::DefaultMode { name, span } => {
                if self.single("default mode", *span) {
                    match self.mode_ix.get(&name.text) {
                        Some(&i) => self.model.default_mode = Some((i, *span)),
                        None => {
                            let mut d = Diagnostic::error(
                                "undefined-mode",
                                format!("default mode `{}` does not exist", name.text),
                            )
                            .at(name.span, "no mode of this name");
                            d = match suggest(
                                &name.text,
                                self.model.modes.iter().map(|m| m.name.name.as_str()),
                            ) {
                                Some(s) => d.help(format!("did you mean `{s}`?")),
                                None => d.help(format!(
                                    "declared modes are {}",
                                    list_names(
                                        &self
                                            .model
                                            .modes
                                            .iter()
                                            .map(|m| m.name.clone())
                                            .collect::<Vec<_>>()
                                    )
                                )),
                            };
                            self.error(d);
                        }
                    }
                }
            }
            Decl::ConnectorsPrefix { prefix, span } => {
                if self.single("connectors prefix", *span) {
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
            Decl::Unknown { allow, span } => {
                if self.single("unknown", *span) {
                    self.model.unknown_allow = *allow;
                    self.model.unknown_span = Some(*span);
                    if *allow {
                        self.diagnostics.push(
                            Diagnostic::warning(
                                "unknown-allow",
                                "`unknown allow` lets undeclared tools through",
                            )
                            .at(*span, "")
                            .help("`unknown allow` is meant for tests; production policies use `unknown deny`"),
                        );
                    }
                }
            }
            Decl::Defaults { attrs, span } => {
                if self.single("defaults", *span) {
                    self.model.defaults = self.resolve_attrs(attrs);
                }
            }
            Decl::ConfirmFields { names, span } => {
                if self.single("confirm fields", *span) {
                    self.model.confirm_fields = names.iter().map(sym).collect();
                }
            }
            Decl::TenantArg { name, span } => {
                if self.single("tenant arg", *span) {
                    self.model.tenant_arg = Some(sym(name));
                }
            }
            Decl::Limit { max, span } => {
                if self.single("limit transactional", *span) {
                    self.model.limit = Some((max.value, *span));
                }
            }
            Decl::Accents { fold, span } => {
                if self.single("accents", *span) {
                    self.model.fold_accents = *fold;
                }
            }
            Decl::Quoted { quoted, span } => {
                if self.single("quoted", *span) {
                    self.model.quoted = *quoted;
                }
            }
            Decl::Embedded(d) => self.resolve_phrases(d, false),
            Decl::Except(d) => self.resolve_phrases(d, true),
            Decl::TrustAnnotations { tighten, span } => {
                if self.single("trust annotations", *span) {
                    self.model.ignore_annotations = !*tighten;
                }
            }
            Decl::Tool(t) => {
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
                self.model.tools.push(ToolModel {
                    name: sym(&t.name),
                    span: t.span,
                    attrs,
                });
            }
            Decl::Match(m) => {
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
                self.pattern_ix
                    .insert(m.pattern.text.clone(), self.model.patterns.len());
                self.model.patterns.push(PatternModel {
                    glob: sym(&m.pattern),
                    span: m.span,
                    attrs,
                });
            }
            _ => {}
        }
    }

    fn keyword_ok(&mut self, e: &Name) -> bool {
        const FORMS: &str =
            "write a word (\"delete\"), a stem (\"elimin*\") or a phrase (\"do not\")";
        let text = e.text.trim();
        let problem = if text.is_empty() {
            Some(("a keyword cannot be empty", "", FORMS))
        } else if text == "*" {
            Some(("a keyword cannot be only `*`", "", FORMS))
        } else if text.trim_end_matches('*').contains('*') {
            Some(("`*` may only end a keyword", "", FORMS))
        } else if text.ends_with("**") {
            Some(("a keyword ends with at most one `*`", "", FORMS))
        } else if text.strip_suffix('*').is_some_and(|body| {
            // Also when invisible characters stand between the space and the `*`
            // ("drop \u{200B}*"), or a joiner reads as a space (ZWNJ).
            crate::classify::normalize(&format!("{body}a"), true)
                .text
                .ends_with(" a")
        }) {
            Some((
                "a `*` after a space",
                "remove the space (or ZWNJ) before `*`",
                "`*` ends a stem right after its last letter (\"drop*\" matches `drop`, `dropped`, `dropbox`); no keyword stands for any next word",
            ))
        } else {
            None
        };
        if let Some((p, label, help)) = problem {
            self.error(
                Diagnostic::error("bad-keyword", format!("{p}: `{}`", shown(&e.text)))
                    .at(e.span, label)
                    .help(help),
            );
            return false;
        }
        true
    }

    fn resolve_matrix(&mut self, m: &MatrixDecl) {
        let Some(&mi) = self.matrix_ix.get(&m.name.text) else {
            return;
        };
        if self.model.matrices[mi].name.span.start != m.name.span.start {
            return; // a duplicate, already reported
        }
        let ne = self.model.effects.len();
        // Header: exactly the declared effects, in any order, each once.
        let mut column_effect: Vec<Option<usize>> = Vec::new();
        let mut seen = vec![false; ne];
        let mut ok = true;
        for h in &m.header {
            match self.effect_ix.get(&h.text) {
                Some(&e) if seen[e] => {
                    ok = false;
                    self.error(
                        Diagnostic::error(
                            "matrix-header",
                            format!(
                                "effect `{}` appears twice in the header of matrix `{}`",
                                h.text, m.name.text
                            ),
                        )
                        .at(h.span, "repeated column")
                        .help("each declared effect is one column"),
                    );
                    column_effect.push(None);
                }
                Some(&e) => {
                    seen[e] = true;
                    column_effect.push(Some(e));
                }
                None => {
                    ok = false;
                    let cell_word = matches!(h.text.as_str(), "allow" | "deny" | "confirm");
                    let mut d = Diagnostic::error(
                        "matrix-header",
                        format!(
                            "`{}` in the header of matrix `{}` is not a declared effect",
                            h.text, m.name.text
                        ),
                    )
                    .at(h.span, "not an effect");
                    d = if cell_word {
                        d.help("the first line of a matrix is its header: the effect names, one per column; rows follow, one per line")
                    } else if let Some(s) =
                        suggest(&h.text, self.model.effects.iter().map(|s| s.name.as_str()))
                    {
                        d.help(format!("did you mean `{s}`?"))
                    } else if let Some(absent) = self.effects_absent_from(&m.header) {
                        d.help(format!(
                            "replace it with {absent}: the header lists exactly the declared effects"
                        ))
                    } else {
                        d.help(format!(
                            "the header lists the declared effects: {}",
                            list_names(&self.model.effects)
                        ))
                    };
                    self.error(d);
                    column_effect.push(None);
                }
            }
        }
        let missing: Vec<String> = (0..ne)
            .filter(|e| !seen[*e])
            .map(|e| format!("`{}`", self.model.effects[e].name))
            .collect();
        if !missing.is_empty() && ne > 0 {
            ok = false;
            let plural = if missing.len() == 1 { "" } else { "s" };
            // Point at the header line (where the column is missing), or at the matrix's name
            // when it has no header at all.
            let header_span = match (m.header.first(), m.header.last()) {
                (Some(first), Some(last)) => first.span.to(last.span),
                _ => m.name.span,
            };
            self.error(
                Diagnostic::error(
                    "matrix-header",
                    format!(
                        "the header of matrix `{}` lacks effect{plural} {}",
                        m.name.text,
                        missing.join(", ")
                    ),
                )
                .at(header_span, format!("no column for {}", missing.join(", ")))
                .help(format!(
                    "the header lists exactly the declared effects, one column each: `{}`",
                    self.model
                        .effects
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join("  ")
                )),
            );
        }
        let ni = self.model.intents.len();
        let mut rows: Vec<Option<Vec<(Cell, Span)>>> = vec![None; ni];
        for row in &m.rows {
            let Some(intent) = self.intent(&row.intent) else {
                ok = false;
                continue;
            };
            if rows[intent].is_some() {
                ok = false;
                self.error(
                    Diagnostic::error(
                        "matrix-row",
                        format!(
                            "intent `{}` has two rows in matrix `{}`",
                            row.intent.text, m.name.text
                        ),
                    )
                    .at(row.intent.span, "second row")
                    .help("keep one row per intent"),
                );
                continue;
            }
            if row.cells.len() != m.header.len() {
                ok = false;
                let last = row.cells.last().map_or(row.intent.span, |c| c.span);
                self.error(
                    Diagnostic::error(
                        "matrix-row",
                        format!(
                            "row `{}` of matrix `{}` has {} cell{}, the header has {} column{}",
                            row.intent.text,
                            m.name.text,
                            row.cells.len(),
                            if row.cells.len() == 1 { "" } else { "s" },
                            m.header.len(),
                            if m.header.len() == 1 { "" } else { "s" }
                        ),
                    )
                    .at(row.intent.span.to(last), "")
                    .help("write one cell (allow, deny or confirm) per header column, on the row's own line"),
                );
            }
            let mut cells = vec![(Cell::Deny, row.intent.span); ne];
            for (col, cell) in row.cells.iter().enumerate() {
                let value = match cell.text.as_str() {
                    "allow" => Cell::Allow,
                    "deny" => Cell::Deny,
                    "confirm" => Cell::Confirm,
                    other => {
                        ok = false;
                        let mut d = Diagnostic::error(
                            "matrix-cell",
                            format!("`{other}` is not a matrix cell"),
                        )
                        .at(cell.span, "expected allow, deny or confirm");
                        d = match suggest(other, ["allow", "deny", "confirm"].into_iter()) {
                            Some(s) => d.help(format!("did you mean `{s}`?")),
                            None => d.help("a cell is `allow`, `deny` or `confirm`"),
                        };
                        self.error(d);
                        continue;
                    }
                };
                if let Some(Some(e)) = column_effect.get(col) {
                    cells[*e] = (value, cell.span);
                }
            }
            rows[intent] = Some(cells);
        }
        for (i, r) in rows.iter().enumerate() {
            if r.is_none() && self.model.intents.len() > i {
                ok = false;
                let name = self.model.intents[i].name.clone();
                self.error(
                    Diagnostic::error(
                        "matrix-row",
                        format!("matrix `{}` has no row for intent `{name}`", m.name.text),
                    )
                    .at(m.name.span, format!("no `{name}` row"))
                    .help(format!(
                        "add a line `{name}` followed by one cell per effect"
                    )),
                );
            }
        }
        if ok {
            self.model.matrices[mi].cells = rows.into_iter().flatten().collect();
        }
    }

    /// The declared effects no header token names, as "`a`" or "`a` or `b`", or `None`.
    fn effects_absent_from(&self, header: &[Name]) -> Option<String> {
        let absent: Vec<String> = self
            .model
            .effects
            .iter()
            .filter(|e| !header.iter().any(|h| h.text == e.name))
            .map(|e| format!("`{}`", e.name))
            .collect();
        (!absent.is_empty()).then(|| absent.join(" or "))
    }

    fn resolve_mode(&mut self, m: &ModeDecl) {
        let Some(&mi) = self.mode_ix.get(&m.name.text) else {
            return;
        };
        if self.model.modes[mi].name.span.start != m.name.span.start {
            return;
        }
        for item in &m.items {
            match item {
                ModeItem::Matrix { name, span } => {
                    if self.model.modes[mi].matrix.is_some() {
                        self.error(
                            Diagnostic::error(
                                "duplicate",
                                format!("mode `{}` names a matrix twice", m.name.text),
                            )
                            .at(*span, "")
                            .help("a mode uses one matrix"),
                        );
                        continue;
                    }
                    match self.matrix_ix.get(&name.text) {
                        Some(&x) => self.model.modes[mi].matrix = Some((x, *span)),
                        None => {
                            let mut d = Diagnostic::error(
                                "undefined-matrix",
                                format!("undefined matrix `{}`", name.text),
                            )
                            .at(name.span, "no matrix of this name");
                            d = match suggest(&name.text, self.model.matrices.iter().map(|m| m.name.name.as_str())) {
                                Some(s) => d.help(format!("did you mean `{s}`?")),
                                None => d.help(format!(
                                    "declare it: `matrix {} {{ ... }}`, or remove `matrix` so the mode does not gate by intent",
                                    name.text
                                )),
                            };
                            self.error(d);
                        }
                    }
                }
                ModeItem::Restrict { effects, span } | ModeItem::Confirm { effects, span } => {
                    let is_restrict = matches!(item, ModeItem::Restrict { .. });
                    let ids: Vec<usize> = effects.iter().filter_map(|e| self.effect(e)).collect();
                    let slot = if is_restrict {
                        &mut self.model.modes[mi].restrict
                    } else {
                        &mut self.model.modes[mi].confirm
                    };
                    if slot.is_some() {
                        let what = if is_restrict { "restrict" } else { "confirm" };
                        self.error(
                            Diagnostic::error(
                                "duplicate",
                                format!("mode `{}` has two `{what}` lists", m.name.text),
                            )
                            .at(*span, "")
                            .help(format!("merge them into one `{what}` list")),
                        );
                    } else {
                        *slot = Some((ids, *span));
                    }
                }
            }
        }
    }

    fn resolve_attrs(&mut self, attrs: &[ToolAttr]) -> AttrModel {
        let mut out = AttrModel::default();
        let mut seen: Vec<&'static str> = Vec::new();
        for a in attrs {
            if seen.contains(&a.keyword()) {
                self.error(
                    Diagnostic::error(
                        "duplicate",
                        format!("attribute `{}` is given twice", a.keyword()),
                    )
                    .at(a.span(), "")
                    .help("give each attribute once; lists are comma-separated"),
                );
                continue;
            }
            seen.push(a.keyword());
            match a {
                ToolAttr::Effect { name, span } => {
                    out.effect = self.effect(name).map(|e| (e, *span));
                }
                ToolAttr::Permissions { names, span } => {
                    let ids = names
                        .iter()
                        .filter_map(|n| self.permission_ref(n))
                        .collect();
                    out.permissions = Some((ids, *span));
                }
                ToolAttr::Roles { names, span } => {
                    let ids = names.iter().filter_map(|n| self.role(n)).collect();
                    out.roles = Some((ids, *span));
                }
                ToolAttr::TenantRequired { span } => out.tenant_required = Some(*span),
                ToolAttr::Requires { names, span } => {
                    out.requires = Some((names.iter().map(|n| n.text.clone()).collect(), *span));
                }
                ToolAttr::ConfirmAlways { span } => out.confirm_always = Some(*span),
                ToolAttr::Enabled { value, span } => out.enabled = Some((*value, *span)),
            }
        }
        out
    }

    /// Cycles in `roles` and `implies`, each reported once with the cycle spelled out.
    fn check_cycles(&mut self) {
        // Each role (permission) is compiled with the set of every role (permission) it
        // includes (implies): the tables grow with the square of the count, hence a cap.
        for (what, names, max) in [
            ("roles", &self.model.roles, limits::MAX_ROLES),
            (
                "permissions",
                &self.model.permissions,
                limits::MAX_PERMISSIONS,
            ),
        ] {
            if let Some(over) = names.get(max) {
                let d = Diagnostic::error("too-many", format!("more than {max} {what}"))
                    .at(over.span, "")
                    .help(format!("merge {what}; a policy declares at most {max}"));
                self.diagnostics.push(d);
            }
        }
        let role_cycles = find_cycles(self.model.roles.len(), &self.model.role_edges);
        let spans = Self::closing_spans(&self.model.role_edges, &role_cycles);
        for (cycle, span) in role_cycles.iter().zip(spans) {
            let names: Vec<&str> = cycle
                .iter()
                .map(|&i| self.model.roles[i].name.as_str())
                .collect();
            self.diagnostics.push(
                Diagnostic::error(
                    "cycle",
                    format!("roles form a cycle: {} > {}", names.join(" > "), names[0]),
                )
                .at(span, "this inclusion closes the cycle")
                .help("role inclusion must be a hierarchy; remove one `>` of the cycle"),
            );
        }
        let perm_cycles = find_cycles(self.model.permissions.len(), &self.model.implies);
        let spans = Self::closing_spans(&self.model.implies, &perm_cycles);
        for (cycle, span) in perm_cycles.iter().zip(spans) {
            let names: Vec<&str> = cycle
                .iter()
                .map(|&i| self.model.permissions[i].name.as_str())
                .collect();
            self.diagnostics.push(
                Diagnostic::error(
                    "cycle",
                    format!(
                        "permissions imply each other in a cycle: {} -> {}",
                        names.join(" -> "),
                        names[0]
                    ),
                )
                .at(span, "this implication closes the cycle")
                .help("remove one implication of the cycle, or merge the permissions into one"),
            );
        }
    }

    /// The span of the first declared edge from each cycle's last item back to its first, in
    /// one pass over the edges.
    fn closing_spans(edges: &[(usize, usize, Span)], cycles: &[Vec<usize>]) -> Vec<Span> {
        let mut wanted: HashMap<(usize, usize), Option<Span>> = cycles
            .iter()
            .map(|c| ((c[c.len() - 1], c[0]), None))
            .collect();
        for (a, b, span) in edges {
            if let Some(slot @ None) = wanted.get_mut(&(*a, *b)) {
                *slot = Some(*span);
            }
        }
        cycles
            .iter()
            .map(|c| {
                wanted
                    .get(&(c[c.len() - 1], c[0]))
                    .copied()
                    .flatten()
                    .unwrap_or_default()
            })
            .collect()
    }

    fn check_tools_complete(&mut self) {
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

    /// Warns about patterns that can never match: equal to a declared tool's name, or covered by
    /// an earlier pattern of the same precedence.
    fn check_patterns(&mut self) {
        let tool_names: std::collections::HashSet<&str> = self
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
    fn check_catch_all_patterns(&mut self) {
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

    fn check_keywords(&mut self) {
        let total = self.model.keywords.len() + self.model.negations.len();
        if total > limits::MAX_KEYWORDS {
            let span = self
                .model
                .keywords
                .last()
                .map_or(Span::default(), |k| k.span);
            self.error(
                Diagnostic::error(
                    "too-many",
                    format!(
                        "{total} keywords and negators; at most {} are supported",
                        limits::MAX_KEYWORDS
                    ),
                )
                .at(span, "")
                .help("use stems (\"elimin*\") instead of listing every form"),
            );
        }
        // Keywords are compared as the automaton holds them: normalized, stem or word.
        let fold = self.model.fold_accents;
        let keywords = &self.model.keywords;
        let normalized: Vec<(Vec<String>, bool)> = keywords
            .iter()
            .map(|k| match k.text.strip_suffix('*') {
                Some(body) => (crate::classify::spellings(body, fold), true),
                None => (crate::classify::spellings(&k.text, fold), false),
            })
            .collect();
        // Stems by spelling: (intent, keyword index) of each.
        let mut stems: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        for (i, (spellings, stem)) in normalized.iter().enumerate() {
            if *stem {
                for s in spellings {
                    stems.entry(s).or_default().push((keywords[i].intent, i));
                }
            }
        }
        let mut seen: HashMap<(&[String], bool, usize), usize> = HashMap::new();
        // The highest-priority keyword of each spelling (intents are declared highest first,
        // so the lowest intent index; the first declared among equals).
        let mut strongest: HashMap<(&[String], bool), usize> = HashMap::new();
        for (i, (spellings, stem)) in normalized.iter().enumerate() {
            let best = strongest.entry((spellings.as_slice(), *stem)).or_insert(i);
            if keywords[i].intent < keywords[*best].intent {
                *best = i;
            }
        }
        let priority = self.model.combine == Combine::Priority;
        let mut problems = Vec::new();
        for (i, (k, (spellings, stem))) in keywords.iter().zip(&normalized).enumerate() {
            // A keyword that cannot match is reported as such, and only as such.
            if let Some(d) = spelling_problem("keyword", &k.text, k.span, spellings, *stem) {
                problems.push(d);
                continue;
            }
            let intent = &self.model.intents[k.intent].name;
            if let Some(&j) = seen.get(&(spellings.as_slice(), *stem, k.intent)) {
                let first = &keywords[j];
                let message = if first.text.to_lowercase() == k.text.to_lowercase() {
                    format!(
                        "keyword `{}` is listed twice for intent `{intent}`",
                        shown(&k.text)
                    )
                } else {
                    format!(
                        "keyword `{}` is the same as `{}` once normalized (`{}`), listed twice for intent `{intent}`",
                        shown(&k.text),
                        shown(&first.text),
                        shown(&spellings[0])
                    )
                };
                problems.push(
                    Diagnostic::warning("duplicate-keyword", message)
                        .at(k.span, "repeats an earlier entry")
                        .related(first.span, "first listed")
                        .help("delete one of the entries"),
                );
                continue;
            }
            seen.insert((spellings.as_slice(), *stem, k.intent), i);
            // Under `combine priority` the same keyword of a higher intent always decides.
            if let Some(&j) = strongest.get(&(spellings.as_slice(), *stem)) {
                let strong = &keywords[j];
                if priority && strong.intent < k.intent {
                    let names = &self.model.intents;
                    problems.push(
                        Diagnostic::warning(
                            "shadowed-keyword",
                            format!(
                                "keyword `{}` of intent `{}` never decides: the same keyword of `{}` comes first under `combine priority`",
                                shown(&k.text),
                                names[k.intent].name,
                                names[strong.intent].name
                            ),
                        )
                        .at(k.span, "never decides")
                        .related(strong.span, "the keyword that decides")
                        .help("delete one of the entries, or use `combine union` to count every intent hit"),
                    );
                }
            }
            // A one-word keyword every spelling of which a stem of the same intent and language
            // starts adds nothing (a stem of another language is left alone: hits name the
            // language; a phrase is left alone: its hit spans more words, which a negator
            // after it may treat differently).
            let covering = |s: &String| {
                s.char_indices()
                    .skip(1)
                    .map(|(at, _)| at)
                    .chain([s.len()])
                    .find_map(|at| {
                        stems.get(&s[..at])?.iter().find_map(|&(intent, j)| {
                            (intent == k.intent && j != i && keywords[j].lang == k.lang)
                                .then_some(j)
                        })
                    })
            };
            let one_word = spellings.iter().all(|s| !s.contains(' '));
            let cover = one_word
                .then(|| {
                    spellings
                        .iter()
                        .map(covering)
                        .collect::<Option<Vec<usize>>>()
                })
                .flatten();
            if let Some(&j) = cover.as_ref().and_then(|c| c.first()) {
                let by = &keywords[j];
                problems.push(
                    Diagnostic::warning(
                        "redundant-keyword",
                        format!(
                            "keyword `{}` adds nothing: the `{}` stem `{}` of intent `{intent}` matches every word it does",
                            shown(&k.text),
                            k.lang,
                            shown(&by.text)
                        ),
                    )
                    .at(k.span, "covered by a stem")
                    .related(by.span, "the stem")
                    .help("delete this entry, or narrow the stem"),
                );
            }
        }
        drop(seen);
        drop(strongest);
        drop(stems);
        for (k, (spellings, _)) in self.model.keywords.iter_mut().zip(normalized) {
            k.spellings = spellings;
        }
        for n in &mut self.model.negations {
            n.spellings = crate::classify::spellings(&n.text, fold);
            problems.extend(spelling_problem(
                "negator",
                &n.text,
                n.span,
                &n.spellings,
                false,
            ));
        }
        self.diagnostics.extend(problems);
    }
}

/// The indefinite article before `word`: "an" before a vowel letter, else "a".
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// What is wrong with a keyword or negator `text` (at `span`) whose normalized spellings are
/// `spellings` (a `"stem*"` when `stem`): an error when it normalizes to nothing or is longer
/// than [`limits::MAX_KEYWORD_BYTES`]; a warning when no query can ever contain it on word
/// boundaries (issue 3: keywords match whole words, stems word prefixes).
fn spelling_problem(
    what: &str,
    text: &str,
    span: Span,
    spellings: &[String],
    stem: bool,
) -> Option<Diagnostic> {
    let Some(longest) = spellings.iter().map(String::len).max() else {
        return Some(
            Diagnostic::error(
                "bad-keyword",
                format!("{what} `{text}` ({}) is empty once normalized", code_points(text)),
            )
                .at(span, "only characters that matching removes")
                .help("white space, ZWNJ, zero-width and format characters, tatweel and harakat are removed before matching; write letters or digits"),
        );
    };
    if longest > limits::MAX_KEYWORD_BYTES {
        return Some(
            Diagnostic::error(
                "too-long",
                format!(
                    "{what} `{}` is {longest} bytes once normalized; at most {} are supported",
                    shortened(text),
                    limits::MAX_KEYWORD_BYTES
                ),
            )
            .at(span, "")
            .help(
                "split it into shorter keywords, or match the start of its first word with a stem",
            ),
        );
    }
    // Text written with ZWNJ has two spellings: it can match when either can.
    let mut reasons = spellings
        .iter()
        .map(|s| crate::classify::unmatchable(s, stem));
    let reason = reasons.next()??;
    if reasons.any(|r| r.is_none()) {
        return None;
    }
    const WORDS: &str =
        "words are runs of letters and digits, joined by `'`, `.` or `:` between letters";
    let not_word = |c: char| !c.is_alphanumeric();
    let (label, help) = match reason {
        crate::classify::Unmatchable::Start(c) => {
            let body = text.trim_start_matches(not_word);
            let fix = if body.is_empty() || body == text {
                String::new()
            } else {
                format!("write \"{body}\": ")
            };
            (
                format!("no word starts with {}", shown_char(c)),
                format!(
                    "{fix}{} {what} must start with a letter or digit; {WORDS}",
                    article(what)
                ),
            )
        }
        crate::classify::Unmatchable::End(c) => {
            let body = text.trim_end_matches(not_word);
            let fix = match (body.is_empty() || body == text, what == "keyword") {
                (false, true) => format!(
                    "write the stem \"{text}*\" to match the text as written, or \"{body}\" for the word alone: "
                ),
                (false, false) => format!("write \"{body}\": "),
                (true, _) => String::new(),
            };
            (
                format!("no word ends with {}", shown_char(c)),
                format!(
                    "{fix}{} {what} must end with a letter or digit; {WORDS}",
                    article(what)
                ),
            )
        }
    };
    Some(
        Diagnostic::warning(
            "unmatchable-keyword",
            format!("{what} `{}` can never match", shown(text)),
        )
        .at(span, label)
        .help(help),
    )
}

/// Whether a diagnostic can show `c` as itself: a visible character, not a control, white
/// space, combining mark, or a character normalization removes (zero-width and format
/// characters, tatweel).
fn is_visible(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_graphic();
    }
    !c.is_control()
        && !c.is_whitespace()
        && unicode_normalization::char::canonical_combining_class(c) == 0
        && !crate::classify::normalize(&c.to_string(), true)
            .text
            .trim()
            .is_empty()
}

/// A character as a diagnostic shows it: `` `+` `` when it is visible on its own, else its code
/// point (`U+0301`).
fn shown_char(c: char) -> String {
    if is_visible(c) {
        format!("`{c}`")
    } else {
        format!("U+{:04X}", u32::from(c))
    }
}

/// `text` as a diagnostic shows it: a character a reader cannot see on its own (a zero-width
/// or format character, a combining mark, white space other than a space) as `<U+200C>`.
fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == ' ' || is_visible(c) {
                c.to_string()
            } else {
                format!("<U+{:04X}>", u32::from(c))
            }
        })
        .collect()
}

/// The first 24 characters of `text` as [`shown`] shows them, and `…` when it is longer.
fn shortened(text: &str) -> String {
    let start: String = text.chars().take(24).collect();
    let mut out = shown(&start);
    if start.len() < text.len() {
        out.push('…');
    }
    out
}

/// The code points of `text`, as `U+200B U+00AD`.
fn code_points(text: &str) -> String {
    let points: Vec<String> = text
        .chars()
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect();
    points.join(" ")
}

fn sym(n: &Name) -> Sym {
    Sym {
        name: n.text.clone(),
        span: n.span,
    }
}

/// One walk around each cycle of a relation over `0..n` (see [`Relation::cycles`]), in linear
/// time.
fn find_cycles(n: usize, edges: &[(usize, usize, Span)]) -> Vec<Vec<usize>> {
    Relation::new(n, edges.iter().map(|&(a, b, _)| (a, b))).cycles()
}

/// Most pattern-against-pattern comparisons the shadowing check makes before it gives up (with
/// a `shadow-check-incomplete` warning), so a policy of many similar patterns checks in bounded
/// time.
const MAX_SHADOW_COMPARISONS: usize = 250_000;

/// Warns about invisible characters ([`crate::invisible::is_invisible`]) in the strings and
/// comments of `files` (Trojan Source): a zero-width character, a bidirectional control, another
/// format character, or a control character other than a tab (and, in a comment, the carriage
/// return of a CRLF line end) makes text read as something it is not, or reorders the text
/// after it. One diagnostic (`invisible-character`) per string or comment, at its first such
/// character, naming it as `<U+XXXX>` and saying what to write. A NUL in a string (a name) is
/// an error. ZWNJ (U+200C) is part of Persian spelling: it is allowed in comments and in the
/// strings of `keywords`, `negation`, `embedded` and `except` declarations.
pub(crate) fn invisible_characters(
    files: &[PolicyFile],
    sources: &crate::diagnostic::Sources,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for file in files {
        let text = sources.text(file.file);
        let keyword_decls: Vec<std::ops::Range<usize>> = file
            .decls
            .iter()
            .filter_map(|d| match d {
                Decl::Keywords(k) => Some(k.span.range()),
                Decl::Negation(n) => Some(n.span.range()),
                Decl::Embedded(e) | Decl::Except(e) => Some(e.span.range()),
                _ => None,
            })
            .collect();
        let mut chars = text.char_indices().peekable();
        while let Some((start, c)) = chars.next() {
            let comment = match c {
                '"' => false,
                '#' => true,
                _ => continue,
            };
            // The token's body: up to the closing quote (escapes skipped) or the line's end.
            let body_start = start + 1;
            let mut body_end = text.len();
            while let Some(&(i, c)) = chars.peek() {
                if c == '\n' || (!comment && c == '"') {
                    body_end = i;
                    if c == '"' {
                        chars.next();
                    }
                    break;
                }
                chars.next();
                if !comment && c == '\\' {
                    chars.next();
                }
            }
            let body = &text[body_start..body_end];
            // Declarations are in source order: the last one starting before the token.
            let keyword = !comment && {
                let i = keyword_decls.partition_point(|r| r.start <= start);
                i > 0 && keyword_decls[i - 1].contains(&start)
            };
            let flagged = |c: char| {
                crate::invisible::is_invisible(c)
                    && c != '\t'
                    && !(comment && c == '\r')
                    && !((keyword || comment) && c == '\u{200C}')
            };
            let found: Vec<(usize, char)> =
                body.char_indices().filter(|&(_, c)| flagged(c)).collect();
            if let Some(d) = invisible_diagnostic(file.file, body_start, body, comment, &found) {
                out.push(d);
            }
        }
    }
    out
}

/// The `invisible-character` diagnostic for the string or comment `body` (starting at byte
/// `offset` of `file`) whose invisible characters are `found` (offsets within `body`).
fn invisible_diagnostic(
    file: FileId,
    offset: usize,
    body: &str,
    comment: bool,
    found: &[(usize, char)],
) -> Option<Diagnostic> {
    let nul = found.iter().find(|&&(_, c)| c == '\0');
    let &(at, c) = nul.or(found.first())?;
    let point = format!("<U+{:04X}>", u32::from(c));
    let kind = if c == '\0' {
        "a NUL character"
    } else if crate::invisible::is_bidi_control(c) {
        "a bidirectional control, which reorders the text after it on screen"
    } else if matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}') {
        "a zero-width character"
    } else if c.is_control() {
        "a control character"
    } else {
        "an invisible format character"
    };
    let short = |s: &str| {
        let start: String = s.chars().take(40).collect();
        let more = if start.len() < s.len() { "…" } else { "" };
        format!("{}{more}", crate::invisible::escape(&start))
    };
    let (what, fix) = if comment {
        ("comment", "delete it from the comment".to_string())
    } else {
        let visible: String = body
            .char_indices()
            // `found` is in text order: a binary search keeps this linear-logarithmic.
            .filter(|(i, _)| found.binary_search_by_key(i, |&(j, _)| j).is_err())
            .map(|(_, c)| c)
            .collect();
        let fix = if visible.is_empty() {
            "delete it".to_string()
        } else {
            format!("delete it: write \"{}\"", short(&visible))
        };
        ("string", fix)
    };
    let others = found.len() - 1;
    let mut help =
        format!("{point} is {kind}; text that holds it reads as something it is not; {fix}");
    if others > 0 {
        help.push_str(&format!(
            " ({others} more invisible character{} in this {what})",
            if others == 1 { "" } else { "s" }
        ));
    }
    let message = format!(
        "invisible character {point} in the {what} \"{}\"",
        short(body)
    );
    let span = Span::new(file, offset + at, offset + at + c.len_utf8());
    let d = if c == '\0' {
        Diagnostic::error("invisible-character", message)
    } else {
        Diagnostic::warning("invisible-character", message)
    };
    Some(d.at(span, format!("{point} here")).help(help))
}

#[cfg(test)]
mod invisible_tests {
    use crate::Policy;

    /// A long string of invisible characters is reported once, in bounded time.
    #[test]
    fn a_long_invisible_string_is_one_diagnostic() {
        let text = format!(
            "policy \"p\"\neffects none\nmode m {{ }}\ntool \"a{}\" {{ effect none }}\n",
            "\u{200B}".repeat(200_000)
        );
        let policy = Policy::parse(&text, "p.warden").expect("warnings only");
        let codes: Vec<&str> = policy.warnings().iter().map(|d| d.code()).collect();
        assert_eq!(codes, ["invisible-character"]);
        assert_eq!(
            policy.warnings()[0].help_text(),
            Some("<U+200B> is a zero-width character; text that holds it reads as something it is not; delete it: write \"a\" (199999 more invisible characters in this string)")
        );
    }
}
