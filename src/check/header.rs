//! The policy's header: `policy`, `effects`, `intents` and `fallback`, and the declarations
//! every policy needs (`missing-policy`, `missing-effects`, `missing-mode`, `missing-fallback`).

use super::names::sym;
use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::limits;
use crate::syntax::ast::{Decl, FileId, Int, Name, PolicyFile, Span};

impl Checker {
    /// `policy "name" version n`, in the root file only.
    pub(super) fn declare_policy(
        &mut self,
        name: &Name,
        version: Option<&Int>,
        span: Span,
        root: bool,
    ) {
        if !root {
            self.error(
                Diagnostic::error(
                    "policy-in-include",
                    "an included file cannot declare `policy`",
                )
                .at(span, "")
                .help("only the root file names the policy; delete this line"),
            );
        } else if self.single("policy", span) {
            self.model.name = Some(sym(name));
            self.model.version = version.map(|v| v.value);
        }
    }

    /// `effects a, b, ...`: the side-effect classes, at most [`limits::MAX_EFFECTS`].
    pub(super) fn declare_effects(&mut self, names: &[Name], span: Span) {
        if self.single("effects", span) {
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
                    .at(span, "")
                    .help("merge effects that are gated the same way"),
                );
            }
        }
    }

    /// `intents a > b > ...`: highest priority first, at most [`limits::MAX_INTENTS`].
    pub(super) fn declare_intents(&mut self, names: &[Name], span: Span) {
        if self.single("intents", span) {
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
                    .at(span, "")
                    .help("merge intents that gate the same effects"),
                );
            }
        }
    }

    /// Reports what every policy declares and this one does not: `policy`, `effects`, a
    /// mode, and a `fallback` when intents are declared.
    pub(super) fn require_basics(&mut self, files: &[PolicyFile]) {
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
    /// `fallback intent`: the intent of a query with no keyword hit.
    pub(super) fn resolve_fallback(&mut self, name: &Name, span: Span) {
        if self.single("fallback", span) {
            if let Some(i) = self.intent(name) {
                self.model.fallback = Some((i, span));
            }
        }
    }
}
