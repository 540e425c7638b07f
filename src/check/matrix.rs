//! `matrix` declarations: a header of exactly the declared effects, one row per intent, each
//! cell `allow`, `deny` or `confirm`.

use super::names::sym;
use super::suggest::{list_names, suggest};
use super::{Cell, Checker, MatrixModel};
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{MatrixDecl, Name, Span};

impl Checker {
    /// Declares the matrix `m` by name (its cells are read once every name is declared).
    pub(super) fn declare_matrix(&mut self, m: &MatrixDecl) {
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

    /// Reads the header, rows and cells of the matrix `m`; a matrix with any error keeps no
    /// cells.
    pub(super) fn resolve_matrix(&mut self, m: &MatrixDecl) {
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
}
