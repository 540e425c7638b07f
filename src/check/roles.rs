//! Roles and permissions: `roles { a > b }` chains, `permission "p" implies ...`, the caps on
//! their number, and cycles in either relation.

use std::collections::HashMap;

use super::names::sym;
use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::limits;
use crate::relation::Relation;
use crate::syntax::ast::{Name, Span};

impl Checker {
    /// `roles { a > b > c }`: each chain declares its roles and the inclusion between
    /// neighbours.
    pub(super) fn declare_roles(&mut self, chains: &[Vec<Name>]) {
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

    /// `permission "name" implies "other", ...`: one statement per permission.
    pub(super) fn declare_permission(&mut self, name: &Name, implies: &[Name]) {
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

    /// The index of the permission `name`, declared now if it is new (an `implies` target
    /// declares it too).
    fn permission(&mut self, name: &Name) -> usize {
        if let Some(&i) = self.perm_ix.get(&name.text) {
            return i;
        }
        let i = self.model.permissions.len();
        self.perm_ix.insert(name.text.clone(), i);
        self.model.permissions.push(sym(name));
        i
    }
    /// Cycles in `roles` and `implies`, each reported once with the cycle spelled out.
    pub(super) fn check_cycles(&mut self) {
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
}

/// One walk around each cycle of a relation over `0..n` (see [`Relation::cycles`]), in linear
/// time.
fn find_cycles(n: usize, edges: &[(usize, usize, Span)]) -> Vec<Vec<usize>> {
    Relation::new(n, edges.iter().map(|&(a, b, _)| (a, b))).cycles()
}
