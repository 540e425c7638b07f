//! `mode` declarations (a matrix, `restrict` and `confirm` lists of effects, `after` blocks)
//! and `default mode`.

use super::names::sym;
use super::suggest::{list_names, suggest};
use super::{Checker, ModeModel};
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{ModeDecl, ModeItem, Name, Span};

impl Checker {
    /// Declares the mode `m` by name (its items are read once every name is declared).
    pub(super) fn declare_mode(&mut self, m: &ModeDecl) {
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
                afters: Vec::new(),
            });
        }
    }

    /// Reads the items of the mode `m`: its matrix, its `restrict` and `confirm` lists.
    pub(super) fn resolve_mode(&mut self, m: &ModeDecl) {
        let Some(&mi) = self.mode_ix.get(&m.name.text) else {
            return;
        };
        if self.model.modes[mi].name.span.start != m.name.span.start {
            return;
        }
        for item in &m.items {
            match item {
                ModeItem::After(a) => {
                    if let Some(after) = self.resolve_after(a) {
                        self.model.modes[mi].afters.push(after);
                    }
                }
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
    /// `default mode name`: a declared mode.
    pub(super) fn resolve_default_mode(&mut self, name: &Name, span: Span) {
        if self.single("default mode", span) {
            match self.mode_ix.get(&name.text) {
                Some(&i) => self.model.default_mode = Some((i, span)),
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
}
