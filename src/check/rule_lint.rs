//! Warnings about argument rules that compile but cannot do what they seem to: a rule that can
//! never fire, and a `confirm` rule that a `deny` rule of the same body always overrides.
//!
//! Both are judged on the syntax, soundly: a warning is given only when it holds for every
//! call, under the fail-closed semantics of conditions (a rule fires when its condition holds
//! *or cannot be evaluated*). So `amount > 5 and not amount > 5` is not reported: it fires
//! whenever `amount` is absent or not a number. Only `present(...)` is never unevaluable,
//! which is why the contradictions found are those of `present` (`present(x) and not
//! present(x)`, and what `and`, `or` and `not` build from them). Conditions compare by their
//! canonical text (what `toolwarden fmt` prints), so layout and parentheses do not matter.

use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{CompareOp, Comparison, Condition, Operand, RuleDecl, RuleOutcome, Value};

/// Whether `c` can never be unevaluable: it is built from `present(...)` with `and`, `or` and
/// `not` only.
fn definite(c: &Condition) -> bool {
    match c {
        Condition::Present { .. } => true,
        Condition::Not { inner, .. } => definite(inner),
        Condition::And { items, .. } | Condition::Or { items, .. } => items.iter().all(definite),
        Condition::Compare(_) => false,
    }
}

/// In `items`, a definite condition and its negation, as their canonical texts. Each item is
/// printed once (a set of the texts, not a comparison of every pair).
fn complementary(items: &[Condition]) -> Option<(String, String)> {
    let negations: Vec<(&Condition, String)> = items
        .iter()
        .filter_map(|a| match a {
            Condition::Not { inner, .. } if definite(inner) => Some((a, inner.to_string())),
            _ => None,
        })
        .collect();
    if negations.is_empty() {
        return None;
    }
    let texts: std::collections::HashSet<String> = items.iter().map(|b| b.to_string()).collect();
    negations
        .into_iter()
        .find_map(|(a, text)| texts.contains(&text).then(|| (text, a.to_string())))
}

/// Why `c` is false on every call (never true, never unevaluable), or `None` when it may not be.
fn always_false(c: &Condition) -> Option<String> {
    match c {
        Condition::And { items, .. } => complementary(items)
            .map(|(a, b)| format!("`{a}` and `{b}` never hold together"))
            .or_else(|| items.iter().find_map(always_false)),
        Condition::Or { items, .. } => {
            let reasons: Option<Vec<String>> = items.iter().map(always_false).collect();
            reasons.map(|r| r.join("; "))
        }
        Condition::Not { inner, .. } => always_true(inner)
            .map(|why| format!("`{inner}` always holds ({why}), so its negation never does")),
        Condition::Present { .. } | Condition::Compare(_) => None,
    }
}

/// Why `c` is true on every call, or `None` when it may not be.
fn always_true(c: &Condition) -> Option<String> {
    match c {
        Condition::Or { items, .. } => complementary(items)
            .map(|(a, b)| format!("`{a}` or `{b}` is always one of them"))
            .or_else(|| items.iter().find_map(always_true)),
        Condition::And { items, .. } => {
            let reasons: Option<Vec<String>> = items.iter().map(always_true).collect();
            reasons.map(|r| r.join("; "))
        }
        Condition::Not { inner, .. } => always_false(inner),
        Condition::Present { .. } | Condition::Compare(_) => None,
    }
}

/// A number comparison: the reference's canonical text, the operator and the number.
fn number_test(c: &Comparison) -> Option<(String, CompareOp, f64)> {
    let Operand::Arg(r) = &c.operand else {
        return None;
    };
    let [Value::Number { text, .. }] = c.values.as_slice() else {
        return None;
    };
    let n: f64 = text.parse().ok()?;
    if !n.is_finite() {
        return None;
    }
    matches!(
        c.op,
        CompareOp::Lt
            | CompareOp::Le
            | CompareOp::Gt
            | CompareOp::Ge
            | CompareOp::Eq
            | CompareOp::Ne
    )
    .then(|| (r.to_string(), c.op, n))
}

/// Whether `x op_c a` implies `x op_d b` for every number `x`.
fn number_implies(op_c: CompareOp, a: f64, op_d: CompareOp, b: f64) -> bool {
    use CompareOp::*;
    let holds = |op: CompareOp, x: f64, y: f64| match op {
        Lt => x < y,
        Le => x <= y,
        Gt => x > y,
        Ge => x >= y,
        Eq => x == y,
        Ne => x != y,
        _ => false,
    };
    match (op_c, op_d) {
        (Eq, _) => holds(op_d, a, b),
        (Ne, Ne) => a == b,
        (Ne, _) => false,
        (Gt, Gt | Ge) | (Lt, Lt | Le) | (Ge, Ge) | (Le, Le) => {
            if matches!(op_c, Gt | Ge) {
                a >= b
            } else {
                a <= b
            }
        }
        (Ge, Gt) => a > b,
        (Le, Lt) => a < b,
        (Gt, Ne) => b <= a,
        (Ge, Ne) => b < a,
        (Lt, Ne) => b >= a,
        (Le, Ne) => b > a,
        _ => false,
    }
}

/// Whether, on every call, `d` holds or cannot be evaluated whenever `c` holds or cannot be
/// evaluated (so a rule on `d` fires whenever a rule on `c` does).
///
/// Sound by construction: equal canonical texts; `or` on the right holds when one of its
/// items does; `and` on the left holds only when each item does; and two number comparisons
/// of the same argument reference, which are unevaluable on exactly the same values (absent,
/// `null`, not a number, an array where a number is expected, per element through `[*]`).
///
/// The search can branch on both sides at every level, so it draws on `budget` (bytes of
/// canonical text compared, plus one a step): once that is spent it answers `false`, which
/// only withholds a warning (the lint reports what it proves, never more).
fn implies(c: &Condition, d: &Condition, budget: &mut usize) -> bool {
    if *budget == 0 {
        return false;
    }
    if same_text(c, d, budget) {
        return true;
    }
    match (c, d) {
        (Condition::Or { items, .. }, _) => items.iter().all(|i| implies(i, d, budget)),
        (_, Condition::And { items, .. }) => items.iter().all(|i| implies(c, i, budget)),
        (Condition::And { items, .. }, _) if items.iter().any(|i| implies(i, d, budget)) => true,
        (_, Condition::Or { items, .. }) if items.iter().any(|i| implies(c, i, budget)) => true,
        (Condition::Compare(x), Condition::Compare(y)) => match (number_test(x), number_test(y)) {
            (Some((rx, ox, a)), Some((ry, oy, b))) => rx == ry && number_implies(ox, a, oy, b),
            _ => false,
        },
        _ => false,
    }
}

/// Whether two conditions read the same in canonical form. Two comparisons with different
/// operators or numbers of values never do (the operator is printed between the operand and
/// the values), which is decided without printing them. Takes one step and the bytes printed
/// from `budget`.
fn same_text(c: &Condition, d: &Condition, budget: &mut usize) -> bool {
    *budget = budget.saturating_sub(1);
    if let (Condition::Compare(x), Condition::Compare(y)) = (c, d) {
        if x.op != y.op || x.values.len() != y.values.len() {
            return false;
        }
    }
    let (a, b) = (c.to_string(), d.to_string());
    *budget = budget.saturating_sub(a.len() + b.len());
    a == b
}

/// The work the redundant-confirm lint may do in one body ([`implies`]), per byte of the
/// body's rules, and at least: far more than rules written by hand need, and linear in the
/// policy's size whatever the rules' shapes.
const LINT_BUDGET_PER_BYTE: usize = 64;
const LINT_BUDGET_MIN: usize = 1 << 16;

impl Checker {
    /// The warnings of one body's rules (those that compiled): rules that can never fire, and
    /// `confirm` rules a `deny` rule of the same body makes redundant.
    pub(super) fn lint_rules(&mut self, rules: &[&RuleDecl]) {
        for rule in rules {
            if let Some(why) = always_false(&rule.condition) {
                self.error(
                    Diagnostic::warning(
                        "rule-never-fires",
                        format!("`{rule}` can never fire: {why}"),
                    )
                    .at(rule.condition.span(), "false for every call")
                    .help(
                        "delete the rule, or write the condition it was meant to have \
                         (`present(x)` holds when `x` is given and not `null`)",
                    ),
                );
            }
        }
        let size: usize = rules.iter().map(|r| r.span.range().len()).sum();
        let mut budget = size
            .saturating_mul(LINT_BUDGET_PER_BYTE)
            .max(LINT_BUDGET_MIN);
        for confirm in rules.iter().filter(|r| r.outcome == RuleOutcome::Confirm) {
            if always_false(&confirm.condition).is_some() {
                continue;
            }
            let deny = rules.iter().find(|d| {
                d.outcome == RuleOutcome::Deny
                    && implies(&confirm.condition, &d.condition, &mut budget)
            });
            if let Some(deny) = deny {
                let same = confirm.condition.to_string() == deny.condition.to_string();
                self.error(
                    Diagnostic::warning(
                        "redundant-confirm",
                        format!(
                            "`{confirm}` never decides a call: whenever it fires, `{deny}` fires \
                             too, and deny wins"
                        ),
                    )
                    .at(
                        confirm.span,
                        if same {
                            "the same condition as the deny rule"
                        } else {
                            "implies the deny rule's condition"
                        },
                    )
                    .related(deny.span, "the deny rule")
                    .help(
                        "delete the confirm rule, or narrow the deny rule if such calls should \
                         be confirmed rather than denied",
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::number_implies;
    use crate::syntax::ast::CompareOp::*;

    #[test]
    fn number_implication_is_set_inclusion() {
        assert!(number_implies(Gt, 500.0, Gt, 100.0));
        assert!(number_implies(Gt, 100.0, Gt, 100.0));
        assert!(!number_implies(Gt, 100.0, Gt, 500.0));
        assert!(number_implies(Gt, 100.0, Ge, 100.0));
        assert!(!number_implies(Ge, 100.0, Gt, 100.0));
        assert!(number_implies(Ge, 100.5, Gt, 100.0));
        assert!(number_implies(Lt, 5.0, Le, 5.0));
        assert!(!number_implies(Le, 5.0, Lt, 5.0));
        assert!(number_implies(Eq, 7.0, Gt, 5.0));
        assert!(!number_implies(Eq, 5.0, Gt, 5.0));
        assert!(number_implies(Gt, 5.0, Ne, 5.0));
        assert!(!number_implies(Ge, 5.0, Ne, 5.0));
        assert!(number_implies(Ne, 5.0, Ne, 5.0));
        assert!(!number_implies(Ne, 5.0, Gt, 0.0));
        assert!(!number_implies(Gt, 5.0, Lt, 100.0));
        assert!(!number_implies(Lt, 0.0, Gt, -10.0));
    }
}
