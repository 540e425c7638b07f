//! Lowering of argument rules (`deny when ...`, `confirm when ...`) and their conditions: one
//! `build_<rule>` function per grammar rule, as for the rest of the parser.

use pest::iterators::Pair;

use super::{Builder, Rule};
use crate::diagnostic::Diagnostic;
use crate::limits;
use crate::syntax::ast::*;

impl Builder<'_> {
    /// `arg_rule`: the outcome keyword, `when`, the condition.
    pub(super) fn build_rule(&mut self, pair: Pair<'_, Rule>) -> Option<RuleDecl> {
        let span = self.span(&pair);
        let mut inner = pair.into_inner();
        let outcome = match inner.next()?.into_inner().next()?.as_rule() {
            Rule::kw_deny => RuleOutcome::Deny,
            _ => RuleOutcome::Confirm,
        };
        let condition = inner
            .find(|p| p.as_rule() == Rule::condition)
            .and_then(|p| self.build_condition(p))?;
        Some(RuleDecl {
            outcome,
            condition,
            span,
        })
    }

    /// `condition`: `cond_and` joined by `or`; a single item stands for itself.
    fn build_condition(&mut self, pair: Pair<'_, Rule>) -> Option<Condition> {
        self.build_joined(
            &pair,
            Rule::cond_and,
            Self::build_cond_and,
            |items, span| Condition::Or { items, span },
        )
    }

    /// `cond_and`: `cond_not` joined by `and`; a single item stands for itself.
    fn build_cond_and(&mut self, pair: Pair<'_, Rule>) -> Option<Condition> {
        self.build_joined(
            &pair,
            Rule::cond_not,
            Self::build_cond_not,
            |items, span| Condition::And { items, span },
        )
    }

    /// The items of `pair` that are `item` pairs, built with `build` (those that fail to build
    /// are left out): the item itself when exactly one was built (it stands for itself, and
    /// neither a list nor the join's span is made), otherwise `join` of the list and the span
    /// of `pair`. Always `Some`: the `Option` is the builders' shape.
    fn build_joined(
        &mut self,
        pair: &Pair<'_, Rule>,
        item: Rule,
        build: fn(&mut Self, Pair<'_, Rule>) -> Option<Condition>,
        join: fn(Vec<Condition>, Span) -> Condition,
    ) -> Option<Condition> {
        let mut only = None;
        let mut items = Vec::new();
        for p in pair.clone().into_inner() {
            if p.as_rule() != item {
                continue;
            }
            let Some(c) = build(self, p) else {
                continue;
            };
            match only.take() {
                None if items.is_empty() => only = Some(c),
                None => items.push(c),
                Some(first) => items.extend([first, c]),
            }
        }
        Some(match only {
            Some(c) => c,
            None => join(items, self.span(pair)),
        })
    }

    /// `cond_not`: any number of `not` (at most [`limits::MAX_CONDITION_DEPTH`], so the tree
    /// stays shallow), then an atom. Each `not` wraps what follows it, innermost first.
    fn build_cond_not(&mut self, pair: Pair<'_, Rule>) -> Option<Condition> {
        let mut nots = Vec::new();
        let mut atom = None;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::not_op => nots.push(self.span(&p)),
                Rule::cond_group => {
                    let inner = p.into_inner().find(|q| q.as_rule() == Rule::condition)?;
                    atom = self.build_condition(inner);
                }
                Rule::cond_present => {
                    let span = self.span(&p);
                    let arg = p.into_inner().find(|q| q.as_rule() == Rule::arg_ref)?;
                    atom = Some(Condition::Present {
                        arg: self.build_arg_ref(arg),
                        span,
                    });
                }
                Rule::comparison => atom = self.build_comparison(p).map(Condition::Compare),
                _ => {}
            }
        }
        let mut cond = atom?;
        if nots.len() > limits::MAX_CONDITION_DEPTH {
            let span = nots[limits::MAX_CONDITION_DEPTH];
            self.diagnostics.push(
                Diagnostic::error(
                    "too-deep",
                    format!("more than {} `not` in a row", limits::MAX_CONDITION_DEPTH),
                )
                .at(span, "one `not` too many")
                .help("two `not` in a row cancel out: drop them in pairs"),
            );
            return None;
        }
        for not in nots.into_iter().rev() {
            let span = not.to(cond.span());
            cond = Condition::Not {
                inner: Box::new(cond),
                span,
            };
        }
        Some(cond)
    }

    /// `comparison`: an operand, an operator and its right-hand side.
    fn build_comparison(&mut self, pair: Pair<'_, Rule>) -> Option<Comparison> {
        let span = self.span(&pair);
        let mut inner = pair.into_inner();
        let operand = self.build_operand(inner.next()?)?;
        let op_pair = inner.next()?;
        let op_span = self.span(&op_pair);
        let negated = op_pair
            .clone()
            .into_inner()
            .any(|p| p.as_rule() == Rule::not_op);
        let op = match (op_pair.as_rule(), negated) {
            (Rule::op_in, false) => CompareOp::In,
            (Rule::op_in, true) => CompareOp::NotIn,
            (Rule::op_under, false) => CompareOp::Under,
            (Rule::op_under, true) => CompareOp::NotUnder,
            (Rule::op_matches, false) => CompareOp::Matches,
            (Rule::op_matches, true) => CompareOp::NotMatches,
            (Rule::op_regex, _) if op_pair.as_str() == "!~" => CompareOp::RegexNotMatch,
            (Rule::op_regex, _) => CompareOp::RegexMatch,
            (Rule::op_compare, _) => match op_pair.as_str() {
                "<" => CompareOp::Lt,
                "<=" => CompareOp::Le,
                ">" => CompareOp::Gt,
                ">=" => CompareOp::Ge,
                "==" => CompareOp::Eq,
                _ => CompareOp::Ne,
            },
            _ => return None,
        };
        let rhs = inner.next()?;
        let values = match rhs.as_rule() {
            Rule::in_list | Rule::string_list => rhs
                .into_inner()
                .filter_map(|p| self.build_value(p))
                .collect(),
            _ => self.build_value(rhs).into_iter().collect(),
        };
        Some(Comparison {
            operand,
            op,
            op_span,
            values,
            span,
        })
    }

    /// `operand`, and what `host(...)` holds: `host_call`, `any`, a reference, a literal.
    fn build_operand(&mut self, pair: Pair<'_, Rule>) -> Option<Operand> {
        let span = self.span(&pair);
        match pair.as_rule() {
            Rule::operand => self.build_operand(pair.into_inner().next()?),
            Rule::kw_any => Some(Operand::Any(span)),
            Rule::arg_ref => Some(Operand::Arg(self.build_arg_ref(pair))),
            Rule::host_call => {
                let of = pair.into_inner().find(|p| p.as_rule() != Rule::kw_host)?;
                Some(Operand::Host {
                    of: Box::new(self.build_operand(of)?),
                    span,
                })
            }
            _ => self.build_value(pair).map(Operand::Literal),
        }
    }

    /// `arg_ref`: a name followed by `.name` and `[*]` steps.
    fn build_arg_ref(&mut self, pair: Pair<'_, Rule>) -> ArgRef {
        let span = self.span(&pair);
        let steps = pair
            .into_inner()
            .map(|p| match p.as_rule() {
                Rule::ref_each => RefStep::Each,
                _ => RefStep::Field(p.as_str().to_string()),
            })
            .collect();
        ArgRef { steps, span }
    }

    /// A right-hand-side value: a string, a number, `context.NAME`, `query`.
    fn build_value(&mut self, pair: Pair<'_, Rule>) -> Option<Value> {
        let span = self.span(&pair);
        Some(match pair.as_rule() {
            Rule::string => Value::Str(self.build_name(pair)),
            Rule::number => Value::Number {
                text: pair.as_str().to_string(),
                span,
            },
            Rule::context_set => {
                let name = pair.into_inner().find(|p| p.as_rule() == Rule::ref_name)?;
                Value::Context {
                    name: Name {
                        text: name.as_str().to_string(),
                        span: self.span(&name),
                        quoted: false,
                    },
                    span,
                }
            }
            Rule::kw_query => Value::Query(span),
            _ => return None,
        })
    }
}

/// The error for text whose parentheses nest deeper than [`limits::MAX_CONDITION_DEPTH`]
/// (outside strings and comments), at the first parenthesis past the cap; `None` for any other
/// text. The grammar recurses once per parenthesis, so this runs before it; pest runs without
/// a native-stack probe, so this cap is what bounds its recursion. It also bounds every parse
/// resumed at a line start after a syntax error: no string spans two lines
/// ([`crate::syntax::strings::string_end`]), so that parse reads the parentheses after its start
/// as this scan does, and its depth never exceeds this scan's.
pub(super) fn too_deep(text: &str, file: FileId) -> Option<Diagnostic> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut pos = 0;
    // From one `(`, `"` or `#` to the next; the `)` between them close what they can.
    while let Some(off) = memchr::memchr3(b'(', b'"', b'#', &bytes[pos..]) {
        let at = pos + off;
        let closing = memchr::memchr_iter(b')', &bytes[pos..at]).count();
        depth = depth.saturating_sub(closing);
        pos = match bytes[at] {
            b'#' => memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n),
            b'"' => crate::syntax::strings::string_end(bytes, at + 1).1,
            _ => {
                depth += 1;
                if depth > limits::MAX_CONDITION_DEPTH {
                    return Some(
                        Diagnostic::error(
                            "too-deep",
                            format!(
                                "parentheses nest more than {} deep",
                                limits::MAX_CONDITION_DEPTH
                            ),
                        )
                        .at(Span::new(file, at, at + 1), "one level too many")
                        .help("write the condition with fewer nested parentheses, or split it into several rules"),
                    );
                }
                at + 1
            }
        };
    }
    None
}
