//! `defaults` and the other policy-wide settings of calls: `unknown`, `confirm fields`,
//! `tenant arg`, `limit transactional` and `trust annotations`.

use super::names::sym;
use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{Int, Name, Span, ToolAttr};

impl Checker {
    /// `unknown allow` (with an `unknown-allow` warning) or `unknown deny`.
    pub(super) fn resolve_unknown(&mut self, allow: bool, span: Span) {
        if self.single("unknown", span) {
            self.model.unknown_allow = allow;
            self.model.unknown_span = Some(span);
            if allow {
                self.diagnostics.push(
                    Diagnostic::warning(
                        "unknown-allow",
                        "`unknown allow` lets undeclared tools through",
                    )
                    .at(span, "")
                    .help("`unknown allow` is meant for tests; production policies use `unknown deny`"),
                );
            }
        }
    }

    /// `defaults { ... }`: the attributes of every tool and pattern that does not give its own.
    pub(super) fn resolve_defaults(&mut self, attrs: &[ToolAttr], span: Span) {
        if self.single("defaults", span) {
            self.model.defaults = self.resolve_attrs(attrs);
        }
    }

    /// `confirm fields "a", ...`: the argument fields that confirm a call.
    pub(super) fn resolve_confirm_fields(&mut self, names: &[Name], span: Span) {
        if self.single("confirm fields", span) {
            self.model.confirm_fields = names.iter().map(sym).collect();
        }
    }

    /// `tenant arg "name"`: the argument that must equal the request's tenant.
    pub(super) fn resolve_tenant_arg(&mut self, name: &Name, span: Span) {
        if self.single("tenant arg", span) {
            self.model.tenant_arg = Some(sym(name));
        }
    }

    /// `limit transactional n`: transactional calls per turn.
    pub(super) fn resolve_limit(&mut self, max: &Int, span: Span) {
        if self.single("limit transactional", span) {
            self.model.limit = Some((max.value, span));
        }
    }

    /// `trust annotations tighten` or `trust annotations ignore`.
    pub(super) fn resolve_trust_annotations(&mut self, tighten: bool, span: Span) {
        if self.single("trust annotations", span) {
            self.model.ignore_annotations = !tighten;
        }
    }
}
