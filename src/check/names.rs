//! Declaring and resolving names: a declaration that may appear once, a name declared or listed
//! twice, and a reference to an effect, intent, role or permission that is not declared (with
//! a "did you mean").

use std::collections::HashMap;

use super::suggest::{list_names, suggest};
use super::{Checker, Model, Sym};
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{Name, Span};

/// A declared name as the model keeps it.
pub(super) fn sym(n: &Name) -> Sym {
    Sym {
        name: n.text.clone(),
        span: n.span,
    }
}

impl Checker {
    /// Reports a second declaration of something that may appear once.
    pub(super) fn single(&mut self, what: &'static str, span: Span) -> bool {
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

    /// Reports a second declaration of the named `what` (a matrix, mode, permission, tool or
    /// pattern).
    pub(super) fn duplicate(&mut self, what: &str, name: &Name, first: Span) {
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
    pub(super) fn duplicate_in_list(&mut self, what: &str, name: &Name, first: Span) {
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

    /// Declares `n` in the list `list` (with its index in `ix`), or reports it listed twice.
    pub(super) fn declare_unique(
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

    /// The index of the declared effect `n`, or `None` with an `undefined-effect` error.
    pub(super) fn effect(&mut self, n: &Name) -> Option<usize> {
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

    /// The index of the declared intent `n`, or `None` with an `undefined-intent` error.
    pub(super) fn intent(&mut self, n: &Name) -> Option<usize> {
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

    /// The index of the declared role `n`, or `None` with an `undefined-role` error.
    pub(super) fn role(&mut self, n: &Name) -> Option<usize> {
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

    /// The index of the declared permission `n`, or `None` with an `undefined-permission`
    /// error.
    pub(super) fn permission_ref(&mut self, n: &Name) -> Option<usize> {
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
}
