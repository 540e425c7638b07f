//! Tool attributes: the `effect`, `permissions`, `roles`, `tenant required`, `requires`,
//! `confirm always`, `enabled` and `taints` of a `tool`, a `match` pattern or `defaults`, each resolved
//! into the [`AttrModel`].
//!
//! A new attribute is a field of [`AttrModel`] (model.rs, with its line in [`AttrModel::or`]
//! for the `defaults`) and an arm of [`Checker::resolve_attr`]: its match over [`ToolAttr`] is
//! exhaustive, so a new variant does not build until it is checked here. An attribute is given
//! at most once per declaration (keyed by [`ToolAttr::keyword`]); one that may repeat is left
//! out of that check in [`Checker::resolve_attrs`].

use super::{AttrModel, Checker};
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::ToolAttr;

impl Checker {
    /// Resolves the attributes of one declaration, reporting an attribute given twice.
    pub(super) fn resolve_attrs(&mut self, attrs: &[ToolAttr]) -> AttrModel {
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
            self.resolve_attr(a, &mut out);
        }
        out
    }

    /// Resolves one attribute into `out`: its names to indexes, an undefined one reported.
    fn resolve_attr(&mut self, a: &ToolAttr, out: &mut AttrModel) {
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
            ToolAttr::Taints { names, span } => {
                let ids = names.iter().filter_map(|n| self.label(n)).collect();
                out.taints = Some((ids, *span));
            }
        }
    }
}
