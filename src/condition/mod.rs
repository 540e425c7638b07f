//! Argument-rule conditions: compiled once when a policy loads, evaluated on every call.
//!
//! This module is a leaf: it reads the condition nodes of the syntax tree
//! ([`crate::syntax::ast::Condition`]) to compile them and otherwise knows only JSON values,
//! regular expressions and [`crate::limits`]. The caller (the checker and the evaluator) names
//! the `context` sets ([`ContextId`]), gives the user's query already normalized and the
//! normalizer to apply to argument values ([`EvalContext`]).
//!
//! # Compiling
//!
//! [`CompiledCondition::compile`] checks and compiles a condition: regular expressions with the
//! `regex` crate's size limits (each with the bytes every match starts with, when there are
//! some, searched for first), globs translated into anchored regular expressions,
//! directories normalized, hosts normalized (lower case, IDNA), number literals read. Every
//! mistake is a [`ConditionError`] with its span, all of them at once.
//!
//! # Evaluating: three values, fail closed
//!
//! [`CompiledCondition::eval`] gives an [`Outcome`]: the condition holds, does not hold, or
//! cannot be evaluated. A rule *fires* when its condition holds **or cannot be evaluated**: an
//! argument that is absent or `null`, of the wrong type (the string `"5000"` is not a number),
//! an array where a single value is expected, an array longer than
//! [`limits::MAX_RULE_ELEMENTS`], arguments with more than [`limits::MAX_RULE_VALUES`] values
//! or deeper than [`limits::MAX_ARGS_DEPTH`] for `any`, a value that has no host for `host()`,
//! an absolute path that climbs above `/` for `matches`, a `context` set the request did not
//! supply.
//!
//! `and`, `or` and `not` follow Kleene's three-valued logic, where "cannot be evaluated" means
//! "might hold": `not` of an unevaluable condition is unevaluable (so its rule still fires,
//! whatever `not` wraps it), `false and unevaluable` is false, `true or unevaluable` is true,
//! and otherwise an unevaluable part makes the whole unevaluable. A rule therefore stays silent
//! only when no value of the unevaluable parts could make it fire, which is what lets an author
//! write `present(x) and x > 5` for an optional argument: `present(ref)` itself is never
//! unevaluable.
//!
//! A reference through `[*]` holds when the comparison holds for at least one element (the
//! negated operators are negated per element: `to[*] not matches X` holds as soon as one
//! element is outside `X`); an empty array holds for no element. `any` is every string value
//! anywhere in the arguments (object keys are not values), with the same "at least one".
//!
//! # Allocation
//!
//! Evaluation allocates nothing for `under`, `=~`, `!~`, the number comparisons, `in` and
//! `not in` against literals and `context` sets, `present`, `matches` on a value that is not a
//! path or a path already in normalized form, `host()` of a lower-case ASCII host, and
//! `in query` of an ASCII value of at most 16 words or found as it is written (the query's
//! words are read in place). It allocates to normalize a path that is not in normalized form
//! (`matches`), to lower-case or IDNA-map a host that needs it, to normalize a non-ASCII value
//! compared with `in query` (the caller's normalizer returns a `String`), and, for a value of
//! more than 16 words not found as it is written (within its first 128 bytes), the value's
//! words and, once per call, the query's. [`EvalContext::new`] allocates nothing, and
//! [`Witness::value_text`] allocates the text of the value it reports. A regular expression
//! (or glob) takes its search cache from the `regex` crate's pool: the first search with it
//! allocates that cache, later ones reuse it (a string without the bytes every match starts
//! with is not searched at all). `tests/condition_alloc.rs` counts all of this.

mod glob;
mod host;
mod path;
mod regexp;
mod words;

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde_json::Value as Json;

use self::regexp::Regexp;
use crate::limits;
use crate::syntax::ast::{self, CompareOp, Span};

/// The index of a `context` set among those a policy declares, given by the caller's resolver
/// to [`CompiledCondition::compile`] and used to index [`EvalContext`]'s sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextId(pub u32);

/// A set of strings a request supplies for one `context` set (`context.contacts`). Values are
/// compared exactly as given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextSet {
    /// Sorted, without duplicates.
    values: Vec<String>,
}

impl ContextSet {
    /// The set of `values` (duplicates are dropped).
    pub fn new<I, S>(values: I) -> ContextSet
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut values: Vec<String> = values.into_iter().map(Into::into).collect();
        values.sort_unstable();
        values.dedup();
        ContextSet { values }
    }

    /// Whether `value` is in the set (a binary search; no allocation).
    pub fn contains(&self, value: &str) -> bool {
        self.values
            .binary_search_by(|v| v.as_str().cmp(value))
            .is_ok()
    }

    /// How many distinct values the set holds.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the set is empty (`--context NAME=`).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// What a condition needs from the request besides the arguments: the user's query, the
/// normalizer for argument values, and the `context` sets.
pub struct EvalContext<'a> {
    /// `None`: no query text is known (`in query` cannot be evaluated).
    query: Option<&'a str>,
    /// The query's words as one string, built on the first `in query` of a value with more
    /// than [`words::MAX_INLINE_WORDS`] words (the only `in query` that needs it).
    query_words: std::cell::OnceCell<words::Words>,
    normalize: &'a dyn Fn(&str) -> String,
    contexts: &'a [Option<&'a ContextSet>],
}

impl<'a> EvalContext<'a> {
    /// The context of one call.
    ///
    /// - `query`: the user's query, already normalized as keywords are (for `in query`); its
    ///   words are read in place (nothing is allocated here).
    /// - `normalize`: the same normalization, applied to an argument value before it is looked
    ///   for in the query. It must map ASCII text to its ASCII lower case, up to white space
    ///   (as the keyword normalizer does): an ASCII value is compared that way, lower-cased
    ///   byte by byte, without calling it.
    /// - `contexts`: the request's sets, indexed by [`ContextId`]; `None` (or an index past
    ///   the end) for a set the request did not supply, which makes a condition that needs it
    ///   unevaluable.
    pub fn new(
        query: &'a str,
        normalize: &'a dyn Fn(&str) -> String,
        contexts: &'a [Option<&'a ContextSet>],
    ) -> EvalContext<'a> {
        EvalContext {
            query: Some(query),
            query_words: std::cell::OnceCell::new(),
            normalize,
            contexts,
        }
    }

    /// The context of a call whose user query is not known (an intent given by name): every
    /// `in query` comparison cannot be evaluated, so its rule fires
    /// ([`Problem::QueryNotGiven`]). `normalize` and `contexts` as for [`EvalContext::new`].
    pub fn without_query(
        normalize: &'a dyn Fn(&str) -> String,
        contexts: &'a [Option<&'a ContextSet>],
    ) -> EvalContext<'a> {
        EvalContext {
            query: None,
            query_words: std::cell::OnceCell::new(),
            normalize,
            contexts,
        }
    }
}

impl fmt::Debug for EvalContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvalContext")
            .field("query", &self.query)
            .field("contexts", &self.contexts)
            .finish_non_exhaustive()
    }
}

/// A mistake in a condition found while compiling it: a regular expression that does not
/// compile, a directory or glob no path can match, an undeclared `context` set, ...
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionError {
    code: &'static str,
    message: String,
    span: Span,
    label: String,
    help: String,
}

impl ConditionError {
    fn new(
        code: &'static str,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
        help: impl Into<String>,
    ) -> ConditionError {
        ConditionError {
            code,
            message: message.into(),
            span,
            label: label.into(),
            help: help.into(),
        }
    }

    /// A stable, kebab-case code for the kind of mistake (`bad-regex`, `relative-directory`,
    /// `unmatchable-glob`, `undeclared-context`, ...).
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message, lower case, user input in backticks.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where the mistake is: for a regular expression, the part of the string that is wrong.
    pub fn span(&self) -> Span {
        self.span
    }

    /// The short label for the underlined text (may be empty).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// What to write instead.
    pub fn help(&self) -> &str {
        &self.help
    }
}

impl fmt::Display for ConditionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConditionError {}

/// Why a condition could not be evaluated on a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The argument (or a field on the way to it) is absent or `null`.
    Absent,
    /// The value has another JSON type than the comparison needs.
    WrongType {
        /// What the comparison needs: `a string`, `a number`, `an object`, ...
        expected: &'static str,
        /// What the value is.
        found: &'static str,
    },
    /// An array through `[*]` has more elements than [`limits::MAX_RULE_ELEMENTS`].
    TooManyElements,
    /// `any` met more values than [`limits::MAX_RULE_VALUES`].
    TooManyValues,
    /// `any` met arguments nested deeper than [`limits::MAX_ARGS_DEPTH`].
    TooDeep,
    /// `host()` of a string that has no host.
    NotAHost,
    /// `matches` on an absolute path that holds a NUL or climbs above `/`.
    NotAPath,
    /// The request did not supply this `context` set.
    ContextNotGiven(ContextId),
    /// `in query`, but the user's query is not known (the intent was given by name).
    QueryNotGiven,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Absent => f.write_str("the argument is absent"),
            Problem::WrongType { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            Problem::TooManyElements => {
                write!(f, "more than {} array elements", limits::MAX_RULE_ELEMENTS)
            }
            Problem::TooManyValues => {
                write!(f, "more than {} values", limits::MAX_RULE_VALUES)
            }
            Problem::TooDeep => write!(f, "nested deeper than {}", limits::MAX_ARGS_DEPTH),
            Problem::NotAHost => f.write_str("no host can be read from the value"),
            Problem::NotAPath => f.write_str("the path holds a NUL or climbs above `/`"),
            Problem::ContextNotGiven(_) => f.write_str("the request did not supply the set"),
            Problem::QueryNotGiven => f.write_str("the user's query is not known"),
        }
    }
}

/// What decided a condition: the reference as written (`recipients[*]`, `host(url)`, `any`),
/// the value looked at, and, when it could not be evaluated, why.
#[derive(Clone, Copy, Debug)]
pub struct Witness<'c, 'a> {
    reference: &'c str,
    value: Option<&'a Json>,
    problem: Option<Problem>,
}

impl<'c, 'a> Witness<'c, 'a> {
    /// The reference in canonical form: `recipients[*]`, `host(url)`, `any`.
    pub fn reference(&self) -> &'c str {
        self.reference
    }

    /// The value that decided (an element, for `[*]`; a string, for `any`), when there was one:
    /// `None` for an absent argument.
    pub fn value(&self) -> Option<&'a Json> {
        self.value
    }

    /// Why the condition could not be evaluated, for an unevaluable outcome.
    pub fn problem(&self) -> Option<Problem> {
        self.problem
    }

    /// The value as text for a reason, cut to 80 characters (the 80th is `…` when cut): a
    /// string as it is, anything else as compact JSON. `None` when there is no value.
    pub fn value_text(&self) -> Option<String> {
        Some(match self.value? {
            Json::String(s) => cut(s),
            other => {
                let mut w = Bounded(Vec::new());
                // The writer refuses past its cap: the error only means the text was cut.
                let _ = serde_json::to_writer(&mut w, other);
                cut(&String::from_utf8_lossy(&w.0))
            }
        })
    }
}

/// Longest value text in a reason, in characters.
const VALUE_TEXT_CHARS: usize = 80;

fn cut(s: &str) -> String {
    match s.char_indices().nth(VALUE_TEXT_CHARS) {
        None => s.to_string(),
        Some(_) => {
            let mut out: String = s.chars().take(VALUE_TEXT_CHARS - 1).collect();
            out.push('…');
            out
        }
    }
}

/// A writer that takes a few bytes more than [`VALUE_TEXT_CHARS`] characters can need, then
/// refuses, so a large value is never serialized whole.
struct Bounded(Vec<u8>);

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = (VALUE_TEXT_CHARS + 1) * 4 - self.0.len().min((VALUE_TEXT_CHARS + 1) * 4);
        if room == 0 {
            return Err(std::io::Error::other("full"));
        }
        let n = buf.len().min(room);
        self.0.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What [`CompiledCondition::eval`] found.
#[derive(Clone, Copy, Debug)]
pub enum Outcome<'c, 'a> {
    /// The condition holds: the rule fires. The witness is what made it hold.
    Holds(Witness<'c, 'a>),
    /// The condition does not hold: the rule stays silent.
    DoesNotHold,
    /// The condition cannot be evaluated: the rule fires (fail closed). The witness says on
    /// which reference and value, and why.
    Unevaluable(Witness<'c, 'a>),
}

impl<'c, 'a> Outcome<'c, 'a> {
    /// Whether the rule fires: the condition holds or cannot be evaluated.
    pub fn fires(&self) -> bool {
        !matches!(self, Outcome::DoesNotHold)
    }

    /// The witness of an outcome that fires.
    pub fn witness(&self) -> Option<&Witness<'c, 'a>> {
        match self {
            Outcome::Holds(w) | Outcome::Unevaluable(w) => Some(w),
            Outcome::DoesNotHold => None,
        }
    }
}

/// A condition compiled for evaluation: built once when the policy loads, shared read-only
/// across threads. Cloning it is cheap (the compiled form is shared, not copied).
#[derive(Clone, Debug)]
pub struct CompiledCondition {
    node: Arc<Node>,
}

#[derive(Clone, Debug)]
enum Node {
    Or(Vec<Node>),
    And(Vec<Node>),
    Not(Box<Node>),
    Present(Reference),
    Test(Box<Test>),
}

/// An argument reference: its steps and its canonical text.
#[derive(Clone, Debug)]
struct Reference {
    path: RefPath,
    text: Box<str>,
}

/// How a reference reaches its values.
#[derive(Clone, Debug)]
enum RefPath {
    /// Field names only (no `[*]`): at most one value, looked up directly.
    Fields(Vec<Box<str>>),
    /// Steps with a `[*]`: every value reached, by a walk.
    Steps(Vec<Step>),
}

#[derive(Clone, Debug)]
enum Step {
    Field(Box<str>),
    Each,
}

#[derive(Clone, Debug)]
struct Test {
    target: Target,
    check: Check,
    /// The operator is the negated form (`not in`, `!~`, `!=`, ...): negated per value.
    negated: bool,
    /// The operand as written, for the witness, when it is not an argument (an argument's is
    /// its reference's text).
    operand_text: Option<Box<str>>,
}

impl Test {
    /// The operand as written.
    fn text(&self) -> &str {
        match (&self.target, &self.operand_text) {
            (Target::Arg(r), _) => &r.text,
            (_, Some(text)) => text,
            (_, None) => "",
        }
    }
}

#[derive(Clone, Debug)]
enum Target {
    Arg(Reference),
    Any,
    Host(Reference),
}

#[derive(Clone, Debug)]
enum Check {
    In(Members),
    Under(Vec<path::Dir>),
    Matches(Vec<Arc<Regexp>>),
    Regex(Arc<Regexp>),
    Compare(Cmp, f64),
}

#[derive(Clone, Copy, Debug)]
enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

/// The right-hand side of `in`.
#[derive(Clone, Debug, Default)]
struct Members {
    strings: Vec<Box<str>>,
    numbers: Vec<f64>,
    contexts: Vec<ContextId>,
    query: bool,
}

/// The three truth values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Truth {
    True,
    False,
    Unknown,
}

impl Truth {
    fn negate(self, negated: bool) -> Truth {
        match (self, negated) {
            (Truth::True, true) => Truth::False,
            (Truth::False, true) => Truth::True,
            (t, _) => t,
        }
    }
}

/// A truth value with what decided it (kept for false results too, so `not` can report it).
#[derive(Clone, Copy, Debug)]
struct Judged<'c, 'a> {
    truth: Truth,
    witness: Option<Witness<'c, 'a>>,
}

impl CompiledCondition {
    /// Compiles `condition`. `context` resolves a `context.NAME` set to its id (`None`: the
    /// policy does not declare it).
    ///
    /// # Errors
    ///
    /// Every mistake in the condition, each with its span: `bad-regex` (the span inside the
    /// string where the regular expression is wrong, or the whole string when it is too large
    /// once compiled), `pattern-too-long` (over [`limits::MAX_PATTERN_BYTES`]),
    /// `relative-directory` (`under` a directory that does not start with `/`),
    /// `unmatchable-directory` and `unmatchable-glob` (no path can be under or match it),
    /// `undeclared-context`, `compare-with-string` (a number comparison against a string
    /// literal), `bad-number`, `host-of-non-reference` (`host()` of anything but an argument
    /// reference), `bad-host` (a listed host that is no host name), `operator-on-host` and
    /// `operator-on-any` (an operator that cannot apply to a host or to `any`).
    pub fn compile(
        condition: &ast::Condition,
        context: &dyn Fn(&str) -> Option<ContextId>,
    ) -> Result<CompiledCondition, Vec<ConditionError>> {
        CompiledCondition::compile_with(condition, context, &mut Patterns::default())
    }

    /// [`CompiledCondition::compile`], taking the regular expressions (and globs) already
    /// compiled from `patterns` and adding the new ones to it: the conditions of one policy
    /// share one `Patterns`, so each distinct regular expression or glob is compiled once
    /// (and its search cache is shared by every rule that uses it).
    ///
    /// # Errors
    ///
    /// As [`CompiledCondition::compile`].
    pub fn compile_with(
        condition: &ast::Condition,
        context: &dyn Fn(&str) -> Option<ContextId>,
        patterns: &mut Patterns,
    ) -> Result<CompiledCondition, Vec<ConditionError>> {
        let mut errors = Vec::new();
        let mut cx = Compiling {
            context,
            patterns,
            errors: &mut errors,
        };
        let node = compile_node(condition, &mut cx);
        match node {
            Some(node) if errors.is_empty() => Ok(CompiledCondition {
                node: Arc::new(node),
            }),
            _ => Err(errors),
        }
    }

    /// Evaluates the condition on a call's `args` (normally a JSON object).
    ///
    /// Never panics, whatever `args` holds, and runs in time bounded by the size of `args`
    /// up to the caps of [`limits`] (see the module docs for the semantics and what
    /// allocates).
    pub fn eval<'c, 'a>(&'c self, args: &'a Json, ctx: &EvalContext<'_>) -> Outcome<'c, 'a> {
        let j = eval_node(&self.node, args, ctx);
        match (j.truth, j.witness) {
            (Truth::False, _) => Outcome::DoesNotHold,
            (Truth::True, w) => Outcome::Holds(w.unwrap_or(Witness {
                reference: "",
                value: None,
                problem: None,
            })),
            (Truth::Unknown, w) => Outcome::Unevaluable(w.unwrap_or(Witness {
                reference: "",
                value: None,
                problem: None,
            })),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Compiling

/// The regular expressions and globs a policy's conditions use, each compiled once (see
/// [`CompiledCondition::compile_with`]). Keyed by the regular expression's text (a glob by the
/// regular expression it translates into); only expressions that compiled are kept.
#[derive(Debug, Default)]
pub struct Patterns {
    regexes: FxHashMap<Box<str>, Arc<Regexp>>,
    /// Globs already translated and compiled, by the glob's text (a policy repeats its globs
    /// across tools, and translating one is most of its cost once its expression is shared).
    globs: FxHashMap<Box<str>, Arc<Regexp>>,
}

impl Patterns {
    /// How many distinct regular expressions (globs included) have been compiled.
    pub fn len(&self) -> usize {
        self.regexes.len()
    }

    /// Whether none has been compiled.
    pub fn is_empty(&self) -> bool {
        self.regexes.is_empty()
    }

    /// The compiled form of `source` (a regular expression already known to parse), built
    /// with the size limits unless an earlier condition built it.
    fn build(&mut self, source: &str) -> Result<Arc<Regexp>, regex::Error> {
        if let Some(re) = self.regexes.get(source) {
            return Ok(Arc::clone(re));
        }
        let re = Arc::new(Regexp::new(source)?);
        self.regexes.insert(source.into(), Arc::clone(&re));
        Ok(re)
    }

    /// The compiled form of the glob `text` (translated by [`glob::to_regex`]), built unless an
    /// earlier condition built it. `Ok(None)` when no path can match it; `Err` when its
    /// expression is over the size limits.
    fn glob(&mut self, text: &str) -> Result<Option<Arc<Regexp>>, regex::Error> {
        if let Some(re) = self.globs.get(text) {
            return Ok(Some(Arc::clone(re)));
        }
        let source = match glob::to_regex(text) {
            Ok(source) => source,
            Err(glob::GlobError::Unmatchable) => return Ok(None),
        };
        let re = self.build(&source)?;
        self.globs.insert(text.into(), Arc::clone(&re));
        Ok(Some(re))
    }
}

/// What compiling one condition carries along.
struct Compiling<'x> {
    context: &'x dyn Fn(&str) -> Option<ContextId>,
    patterns: &'x mut Patterns,
    errors: &'x mut Vec<ConditionError>,
}

fn compile_node(c: &ast::Condition, cx: &mut Compiling<'_>) -> Option<Node> {
    match c {
        ast::Condition::Or { items, .. } | ast::Condition::And { items, .. } => {
            let nodes: Vec<Option<Node>> = items.iter().map(|i| compile_node(i, cx)).collect();
            let nodes: Option<Vec<Node>> = nodes.into_iter().collect();
            let nodes = nodes?;
            Some(match c {
                ast::Condition::Or { .. } => Node::Or(nodes),
                _ => Node::And(nodes),
            })
        }
        ast::Condition::Not { inner, .. } => {
            compile_node(inner, cx).map(|n| Node::Not(Box::new(n)))
        }
        ast::Condition::Present { arg, .. } => Some(Node::Present(reference(arg))),
        ast::Condition::Compare(cmp) => compile_test(cmp, cx).map(|t| Node::Test(Box::new(t))),
    }
}

fn reference(r: &ast::ArgRef) -> Reference {
    // The text as `ast::ArgRef` displays it, allocated once at its length.
    let len = r
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            ast::RefStep::Field(f) => f.len() + usize::from(i > 0),
            ast::RefStep::Each => 3,
        })
        .sum();
    let mut text = String::with_capacity(len);
    for (i, s) in r.steps.iter().enumerate() {
        match s {
            ast::RefStep::Field(f) => {
                if i > 0 {
                    text.push('.');
                }
                text.push_str(f);
            }
            ast::RefStep::Each => text.push_str("[*]"),
        }
    }
    let field = |f: &String| -> Box<str> { f.as_str().into() };
    let path = if r.steps.iter().all(|s| matches!(s, ast::RefStep::Field(_))) {
        RefPath::Fields(
            r.steps
                .iter()
                .filter_map(|s| match s {
                    ast::RefStep::Field(f) => Some(field(f)),
                    ast::RefStep::Each => None,
                })
                .collect(),
        )
    } else {
        RefPath::Steps(
            r.steps
                .iter()
                .map(|s| match s {
                    ast::RefStep::Field(f) => Step::Field(field(f)),
                    ast::RefStep::Each => Step::Each,
                })
                .collect(),
        )
    };
    Reference {
        path,
        text: text.into_boxed_str(),
    }
}

fn compile_test(c: &ast::Comparison, cx: &mut Compiling<'_>) -> Option<Test> {
    let Compiling {
        context,
        patterns,
        errors,
    } = cx;
    let (context, errors) = (*context, &mut **errors);
    let before = errors.len();
    let target = match &c.operand {
        ast::Operand::Arg(r) => Some(Target::Arg(reference(r))),
        ast::Operand::Any(_) => Some(Target::Any),
        ast::Operand::Host { of, .. } => match &**of {
            ast::Operand::Arg(r) => Some(Target::Host(reference(r))),
            other => {
                errors.push(ConditionError::new(
                    "host-of-non-reference",
                    format!("`host()` of `{other}`, which is not an argument"),
                    other.span(),
                    "an argument reference goes here",
                    "write the argument that holds the URL: `host(url)`",
                ));
                None
            }
        },
        ast::Operand::Literal(v) => {
            errors.push(ConditionError::new(
                "literal-operand",
                format!("a condition on the literal `{v}`"),
                v.span(),
                "an argument reference goes here",
                "conditions look at arguments: write the argument's name",
            ));
            None
        }
    };
    let on_host = matches!(target, Some(Target::Host(_)));
    let on_any = matches!(target, Some(Target::Any));
    let refuse_on = |errors: &mut Vec<ConditionError>, what: &str, help: &str| {
        errors.push(ConditionError::new(
            if on_host {
                "operator-on-host"
            } else {
                "operator-on-any"
            },
            format!("`{}` cannot apply to `{}`", c.op.as_str(), c.operand),
            c.op_span,
            what.to_string(),
            help.to_string(),
        ));
    };
    let negated = c.op.is_negated();
    let check = match c.op {
        CompareOp::In | CompareOp::NotIn => {
            let mut m = Members::default();
            for v in &c.values {
                match v {
                    ast::Value::Str(n) if on_host => match host::normalize(&n.text) {
                        Ok(h) => m.strings.push(h.as_ref().into()),
                        Err(()) => errors.push(ConditionError::new(
                            "bad-host",
                            format!("`{}` is not a host name", n.text),
                            n.span,
                            "",
                            "list host names only, without scheme, path or port: \"github.com\"",
                        )),
                    },
                    ast::Value::Str(n) => m.strings.push(n.text.as_str().into()),
                    ast::Value::Number { text, span } => {
                        if on_host {
                            errors.push(ConditionError::new(
                                "bad-host",
                                format!("`{text}` is not a host name"),
                                *span,
                                "",
                                "list host names as quoted strings: \"github.com\"",
                            ));
                        } else if let Some(x) = number(text, *span, errors) {
                            m.numbers.push(x);
                        }
                    }
                    ast::Value::Context { name, span } => match context(&name.text) {
                        Some(id) => m.contexts.push(id),
                        None => errors.push(ConditionError::new(
                            "undeclared-context",
                            format!("context set `{}` is not declared", name.text),
                            *span,
                            "not declared by any `context` declaration",
                            format!("declare it: `context {}`", name.text),
                        )),
                    },
                    ast::Value::Query(_) => m.query = true,
                }
            }
            Check::In(m)
        }
        CompareOp::Under | CompareOp::NotUnder => {
            if on_host {
                refuse_on(
                    errors,
                    "a host is not a path",
                    "compare a host with `in` or `matches`: `host(url) in \"github.com\"`",
                );
            }
            let mut dirs = Vec::new();
            for v in &c.values {
                let ast::Value::Str(n) = v else {
                    continue;
                };
                match path::Dir::new(&n.text) {
                    Ok(d) => dirs.push(d),
                    Err(path::DirError::Relative) => errors.push(ConditionError::new(
                        "relative-directory",
                        format!("`under` the relative directory `{}`", n.text),
                        n.span,
                        "a relative directory",
                        "`under` compares absolute paths: write the directory from `/`, as \"/workspace\"",
                    )),
                    Err(path::DirError::Unmatchable) => errors.push(ConditionError::new(
                        "unmatchable-directory",
                        format!("no path can be under `{}`", n.text.escape_debug()),
                        n.span,
                        "holds a NUL or climbs above `/`",
                        "write the directory without NUL characters and without `..` above `/`",
                    )),
                }
            }
            Check::Under(dirs)
        }
        CompareOp::Matches | CompareOp::NotMatches => {
            let mut globs = Vec::new();
            for v in &c.values {
                let ast::Value::Str(n) = v else {
                    continue;
                };
                if too_long(n, "glob", errors) {
                    continue;
                }
                match patterns.glob(&n.text) {
                    Ok(Some(re)) => globs.push(re),
                    Err(_) => errors.push(too_large(n, "glob")),
                    Ok(None) => errors.push(ConditionError::new(
                        "unmatchable-glob",
                        format!("no path can match the glob `{}`", n.text.escape_debug()),
                        n.span,
                        "",
                        "absolute paths are matched in normalized form, without `//`, `/./`, `/../`, a trailing `/` or NUL: write the glob that way",
                    )),
                }
            }
            Check::Matches(globs)
        }
        CompareOp::RegexMatch | CompareOp::RegexNotMatch => {
            let Some(ast::Value::Str(n)) = c.values.first() else {
                return None;
            };
            match compile_regex(n, patterns) {
                Ok(re) => Check::Regex(re),
                Err(e) => {
                    errors.push(e);
                    return None;
                }
            }
        }
        CompareOp::Lt
        | CompareOp::Le
        | CompareOp::Gt
        | CompareOp::Ge
        | CompareOp::Eq
        | CompareOp::Ne => {
            if on_host || on_any {
                refuse_on(
                    errors,
                    if on_host {
                        "a host is not a number"
                    } else {
                        "`any` stands for string values"
                    },
                    "compare numbers on an argument that holds a number: `amount > 100`",
                );
            }
            let cmp = match c.op {
                CompareOp::Lt => Cmp::Lt,
                CompareOp::Le => Cmp::Le,
                CompareOp::Gt => Cmp::Gt,
                CompareOp::Ge => Cmp::Ge,
                _ => Cmp::Eq,
            };
            match c.values.first() {
                Some(ast::Value::Number { text, span }) => {
                    Check::Compare(cmp, number(text, *span, errors)?)
                }
                Some(ast::Value::Str(n)) => {
                    errors.push(ConditionError::new(
                        "compare-with-string",
                        format!(
                            "comparison of a number with a string literal: `{} {}`",
                            c.op.as_str(),
                            ast::Value::Str(n.clone())
                        ),
                        n.span,
                        "a string literal",
                        format!(
                            "`{}` compares JSON numbers: write the number without quotes, or compare strings with `in`",
                            c.op.as_str()
                        ),
                    ));
                    return None;
                }
                _ => return None,
            }
        }
    };
    if errors.len() > before {
        return None;
    }
    // An argument's text is its reference's, already written.
    let operand_text = match &target {
        Some(Target::Arg(_)) => None,
        _ => Some(c.operand.to_string().into()),
    };
    Some(Test {
        target: target?,
        check,
        negated,
        operand_text,
    })
}

/// Reads a number literal: finite, as `f64`.
fn number(text: &str, span: Span, errors: &mut Vec<ConditionError>) -> Option<f64> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Some(x),
        _ => {
            errors.push(ConditionError::new(
                "bad-number",
                format!("number `{text}` is out of range"),
                span,
                "",
                "write a number a JSON value can hold",
            ));
            None
        }
    }
}

fn too_long(n: &ast::Name, what: &str, errors: &mut Vec<ConditionError>) -> bool {
    if n.text.len() <= limits::MAX_PATTERN_BYTES {
        return false;
    }
    errors.push(ConditionError::new(
        "pattern-too-long",
        format!(
            "the {what} is {} bytes, over the limit of {} bytes",
            n.text.len(),
            limits::MAX_PATTERN_BYTES
        ),
        n.span,
        "",
        format!("write a shorter {what}, or split it over several rules"),
    ));
    true
}

fn too_large(n: &ast::Name, what: &str) -> ConditionError {
    ConditionError::new(
        "bad-regex",
        format!(
            "the {what} is too large once compiled (over {} bytes)",
            limits::MAX_PATTERN_COMPILED_BYTES
        ),
        n.span,
        "",
        "use fewer or smaller repetitions (`{n}` counts multiply when nested)",
    )
}

/// Compiles the regular expression of an `=~` or `!~` (or takes it from `patterns`); a syntax
/// error points inside the string literal.
fn compile_regex(n: &ast::Name, patterns: &mut Patterns) -> Result<Arc<Regexp>, ConditionError> {
    let mut errors = Vec::new();
    if too_long(n, "regular expression", &mut errors) {
        return Err(errors.remove(0));
    }
    if let Some(re) = patterns.regexes.get(n.text.as_str()) {
        return Ok(Arc::clone(re));
    }
    if let Err(e) = regex_syntax::ParserBuilder::new().build().parse(&n.text) {
        let (start, end, kind) = match &e {
            regex_syntax::Error::Parse(p) => (
                p.span().start.offset,
                p.span().end.offset,
                p.kind().to_string(),
            ),
            regex_syntax::Error::Translate(t) => (
                t.span().start.offset,
                t.span().end.offset,
                t.kind().to_string(),
            ),
            other => (0, n.text.len(), other.to_string()),
        };
        return Err(ConditionError::new(
            "bad-regex",
            format!("invalid regular expression: {kind}"),
            inside(n, start, end),
            kind,
            "regular expressions follow the `regex` crate's syntax; in a policy string write `\\\\` for one backslash",
        ));
    }
    patterns
        .build(&n.text)
        .map_err(|_| too_large(n, "regular expression"))
}

/// The span in the policy's text of bytes `start..end` of a string literal's value: the
/// literal's quote, then each `"` and `\` of the value written as two characters.
fn inside(n: &ast::Name, start: usize, end: usize) -> Span {
    if !n.quoted {
        return n.span;
    }
    let source_len = |upto: usize| -> usize {
        n.text
            .get(..upto)
            .unwrap_or(&n.text)
            .chars()
            .map(|c| {
                if c == '"' || c == '\\' {
                    2
                } else {
                    c.len_utf8()
                }
            })
            .sum()
    };
    let base = n.span.start as usize + 1;
    let s = base + source_len(start);
    let e = (base + source_len(end)).max(s + 1);
    Span::new(n.span.file, s, e.min((n.span.end as usize).max(s + 1)))
}

// ---------------------------------------------------------------------------------------------
// Evaluating

fn eval_node<'c, 'a>(node: &'c Node, args: &'a Json, ctx: &EvalContext<'_>) -> Judged<'c, 'a> {
    match node {
        Node::Not(inner) => {
            let j = eval_node(inner, args, ctx);
            Judged {
                truth: j.truth.negate(true),
                witness: j.witness,
            }
        }
        Node::And(items) => {
            // False as soon as one part is false; else unknown if one part is; else true.
            let mut unknown: Option<Judged<'c, 'a>> = None;
            let mut holds: Option<Judged<'c, 'a>> = None;
            for item in items {
                let j = eval_node(item, args, ctx);
                match j.truth {
                    Truth::False => return j,
                    Truth::Unknown => unknown = unknown.or(Some(j)),
                    Truth::True => holds = holds.or(Some(j)),
                }
            }
            unknown.or(holds).unwrap_or(Judged {
                truth: Truth::True,
                witness: None,
            })
        }
        Node::Or(items) => {
            // True as soon as one part is true; else unknown if one part is; else false.
            let mut unknown: Option<Judged<'c, 'a>> = None;
            let mut fails: Option<Judged<'c, 'a>> = None;
            for item in items {
                let j = eval_node(item, args, ctx);
                match j.truth {
                    Truth::True => return j,
                    Truth::Unknown => unknown = unknown.or(Some(j)),
                    Truth::False => fails = fails.or(Some(j)),
                }
            }
            unknown.or(fails).unwrap_or(Judged {
                truth: Truth::False,
                witness: None,
            })
        }
        Node::Present(r) => {
            let mut found: Option<&'a Json> = None;
            match &r.path {
                RefPath::Fields(fields) => {
                    if let Leaf::Value(v) = lookup(fields, args) {
                        found = (!v.is_null()).then_some(v);
                    }
                }
                RefPath::Steps(steps) => {
                    let mut budget = limits::MAX_RULE_ELEMENTS;
                    let _ = walk(steps, args, &mut budget, &mut |leaf| match leaf {
                        Leaf::Value(v) if !v.is_null() => {
                            found = Some(v);
                            ControlFlow::Break(())
                        }
                        _ => ControlFlow::Continue(()),
                    });
                }
            }
            Judged {
                truth: if found.is_some() {
                    Truth::True
                } else {
                    Truth::False
                },
                witness: Some(Witness {
                    reference: &r.text,
                    value: found,
                    problem: None,
                }),
            }
        }
        Node::Test(t) => eval_test(t, args, ctx),
    }
}

/// A value reached by a reference, or why none was.
enum Leaf<'a> {
    Value(&'a Json),
    Missing(Option<&'a Json>, Problem),
}

/// The value the field names `fields` reach from `v` (a reference without `[*]`), or why none
/// was: what [`walk`] gives for the same steps, without its callback.
fn lookup<'a>(fields: &[Box<str>], mut v: &'a Json) -> Leaf<'a> {
    for name in fields {
        v = match v {
            Json::Object(map) => match map.get(&**name) {
                Some(x) => x,
                None => return Leaf::Missing(None, Problem::Absent),
            },
            Json::Null => return Leaf::Missing(None, Problem::Absent),
            other => {
                return Leaf::Missing(
                    Some(other),
                    Problem::WrongType {
                        expected: "an object",
                        found: kind(other),
                    },
                )
            }
        };
    }
    Leaf::Value(v)
}

/// Follows `steps` from `v`, calling `f` on each value reached (one per element for `[*]`).
/// `budget` is the number of array elements still allowed.
fn walk<'a>(
    steps: &[Step],
    v: &'a Json,
    budget: &mut usize,
    f: &mut dyn FnMut(Leaf<'a>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let Some((step, rest)) = steps.split_first() else {
        return f(Leaf::Value(v));
    };
    match (step, v) {
        (Step::Field(name), Json::Object(map)) => match map.get(&**name) {
            Some(x) => walk(rest, x, budget, f),
            None => f(Leaf::Missing(None, Problem::Absent)),
        },
        (Step::Field(_), Json::Null) => f(Leaf::Missing(None, Problem::Absent)),
        (Step::Field(_), other) => f(Leaf::Missing(
            Some(other),
            Problem::WrongType {
                expected: "an object",
                found: kind(other),
            },
        )),
        (Step::Each, Json::Array(items)) => {
            if items.len() > *budget {
                return f(Leaf::Missing(Some(v), Problem::TooManyElements));
            }
            *budget -= items.len();
            for item in items {
                walk(rest, item, budget, f)?;
            }
            ControlFlow::Continue(())
        }
        (Step::Each, Json::Null) => f(Leaf::Missing(None, Problem::Absent)),
        (Step::Each, other) => f(Leaf::Missing(
            Some(other),
            Problem::WrongType {
                expected: "an array",
                found: kind(other),
            },
        )),
    }
}

/// Calls `f` on every string value in `v`, depth first, within the caps on depth and count.
fn walk_any<'a>(
    v: &'a Json,
    depth: usize,
    budget: &mut usize,
    f: &mut dyn FnMut(Leaf<'a>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    if *budget == 0 {
        f(Leaf::Missing(None, Problem::TooManyValues))?;
        return ControlFlow::Break(());
    }
    *budget -= 1;
    match v {
        Json::String(_) => f(Leaf::Value(v)),
        Json::Array(_) | Json::Object(_) if depth >= limits::MAX_ARGS_DEPTH => {
            f(Leaf::Missing(Some(v), Problem::TooDeep))?;
            ControlFlow::Break(())
        }
        Json::Array(items) => {
            for item in items {
                walk_any(item, depth + 1, budget, f)?;
            }
            ControlFlow::Continue(())
        }
        Json::Object(map) => {
            for item in map.values() {
                walk_any(item, depth + 1, budget, f)?;
            }
            ControlFlow::Continue(())
        }
        _ => ControlFlow::Continue(()),
    }
}

/// The JSON type of `v`, as a reason names it.
fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// A comparison over every value its operand reaches: true when it holds for one, else
/// unknown when one could not be evaluated, else false.
fn eval_test<'c, 'a>(t: &'c Test, args: &'a Json, ctx: &EvalContext<'_>) -> Judged<'c, 'a> {
    let mut acc = Judged {
        truth: Truth::False,
        witness: None,
    };
    let mut visit = |leaf: Leaf<'a>| -> ControlFlow<()> {
        let j = judge_leaf(t, leaf, ctx);
        match j.truth {
            Truth::True => {
                acc = j;
                return ControlFlow::Break(());
            }
            Truth::Unknown if acc.truth != Truth::Unknown => acc = j,
            Truth::False if acc.witness.is_none() => acc.witness = j.witness,
            _ => {}
        }
        ControlFlow::Continue(())
    };
    let _ = match &t.target {
        // One value at most: its judgment is the test's.
        Target::Arg(r) | Target::Host(r) => match &r.path {
            RefPath::Fields(fields) => return judge_leaf(t, lookup(fields, args), ctx),
            RefPath::Steps(steps) => {
                let mut budget = limits::MAX_RULE_ELEMENTS;
                walk(steps, args, &mut budget, &mut visit)
            }
        },
        Target::Any => {
            let mut budget = limits::MAX_RULE_VALUES;
            walk_any(args, 0, &mut budget, &mut visit)
        }
    };
    if acc.witness.is_none() {
        acc.witness = Some(Witness {
            reference: t.text(),
            value: None,
            problem: None,
        });
    }
    acc
}

/// The comparison on one value reached (or on why none was), negated when the operator is,
/// with its witness.
fn judge_leaf<'c, 'a>(t: &'c Test, leaf: Leaf<'a>, ctx: &EvalContext<'_>) -> Judged<'c, 'a> {
    let (truth, value, problem) = match leaf {
        Leaf::Missing(value, problem) => (Truth::Unknown, value, Some(problem)),
        Leaf::Value(v) => match judge(t, v, ctx) {
            Ok(truth) => (truth.negate(t.negated), Some(v), None),
            Err(problem) => (Truth::Unknown, Some(v), Some(problem)),
        },
    };
    Judged {
        truth,
        witness: Some(Witness {
            reference: t.text(),
            value,
            problem,
        }),
    }
}

/// The comparison on one value, before negation: `Ok(true/false)`, or why it cannot be
/// evaluated. `Ok(Truth::Unknown)` comes from `in` when a needed `context` set is missing.
fn judge(t: &Test, v: &Json, ctx: &EvalContext<'_>) -> Result<Truth, Problem> {
    let wrong = |expected| Problem::WrongType {
        expected,
        found: kind(v),
    };
    if v.is_null() {
        return Err(Problem::Absent);
    }
    if let Target::Host(_) = t.target {
        let Json::String(s) = v else {
            return Err(wrong("a string"));
        };
        let host = host::host_of(s).map_err(|()| Problem::NotAHost)?;
        return judge_str(&t.check, &host, true, ctx);
    }
    match (&t.check, v) {
        (Check::Compare(cmp, x), Json::Number(n)) => {
            let n = n.as_f64().ok_or(wrong("a number"))?;
            Ok(truth(match cmp {
                Cmp::Lt => n < *x,
                Cmp::Le => n <= *x,
                Cmp::Gt => n > *x,
                Cmp::Ge => n >= *x,
                Cmp::Eq => n == *x,
            }))
        }
        (Check::Compare(..), _) => Err(wrong("a number")),
        (Check::In(m), Json::Number(n)) => {
            if n.as_f64().is_some_and(|x| m.numbers.contains(&x)) {
                return Ok(Truth::True);
            }
            if m.contexts.is_empty() && !m.query {
                return Ok(Truth::False);
            }
            let mut buf = NumberText::default();
            use std::fmt::Write as _;
            write!(buf, "{n}").map_err(|_| wrong("a shorter number"))?;
            members_text(m, buf.as_str(), ctx)
        }
        (Check::In(m), Json::String(s)) => {
            if m.strings.iter().any(|x| **x == **s) {
                return Ok(Truth::True);
            }
            members_text(m, s, ctx)
        }
        (Check::In(_), _) => Err(wrong("a string or a number")),
        (check, Json::String(s)) => judge_str(check, s, false, ctx),
        _ => Err(wrong("a string")),
    }
}

fn truth(b: bool) -> Truth {
    if b {
        Truth::True
    } else {
        Truth::False
    }
}

/// `under`, `matches`, `=~` and `in` on a string (a host, for `host()`).
fn judge_str(
    check: &Check,
    s: &str,
    is_host: bool,
    ctx: &EvalContext<'_>,
) -> Result<Truth, Problem> {
    match check {
        Check::In(m) => {
            if m.strings.iter().any(|x| **x == *s) {
                return Ok(Truth::True);
            }
            members_text(m, s, ctx)
        }
        Check::Under(dirs) => Ok(truth(dirs.iter().any(|d| d.contains(s)))),
        Check::Matches(globs) => {
            if !is_host && s.starts_with('/') {
                let p = path::normalize(s).map_err(|()| Problem::NotAPath)?;
                Ok(truth(globs.iter().any(|g| g.is_match(&p))))
            } else {
                Ok(truth(globs.iter().any(|g| g.is_match(s))))
            }
        }
        Check::Regex(re) => Ok(truth(re.is_match(s))),
        Check::Compare(..) => Err(Problem::WrongType {
            expected: "a number",
            found: "a string",
        }),
    }
}

/// `in` against the `context` sets and `query` (the literals were tried by the caller).
fn members_text(m: &Members, s: &str, ctx: &EvalContext<'_>) -> Result<Truth, Problem> {
    let mut missing = None;
    for id in &m.contexts {
        match ctx.contexts.get(id.0 as usize).copied().flatten() {
            Some(set) if set.contains(s) => return Ok(Truth::True),
            Some(_) => {}
            None => missing = missing.or(Some(*id)),
        }
    }
    let mut no_query = false;
    if m.query {
        match ctx.query {
            Some(q) if in_query(q, s, ctx) => return Ok(Truth::True),
            Some(_) => {}
            None => no_query = true,
        }
    }
    match missing {
        Some(id) => Err(Problem::ContextNotGiven(id)),
        None if no_query => Err(Problem::QueryNotGiven),
        None => Ok(Truth::False),
    }
}

/// Whether the value `s` occurs in the (normalized) query `q` as whole words. An ASCII value
/// allocates nothing when the query holds its text (up to 128 bytes) lower-cased or when it
/// has at most [`words::MAX_INLINE_WORDS`] words; any other value is normalized first (the
/// normalizer's `String`), and one of more words also builds the words of the value and, once
/// per call, of the query.
fn in_query(q: &str, s: &str, ctx: &EvalContext<'_>) -> bool {
    if s.is_ascii() {
        if let Some(found) = words::occurs_lowered(q, s) {
            return found;
        }
    }
    let normalized = (ctx.normalize)(s);
    if let Some((w, n)) = words::inline_words(&normalized) {
        return words::occurs(q, &w[..n], |a, b| a == b);
    }
    ctx.query_words
        .get_or_init(|| words::Words::new(q))
        .contains(&words::Words::new(&normalized))
}

/// A JSON number's text, written without allocating (serde_json writes at most 24 bytes).
#[derive(Default)]
struct NumberText {
    buf: [u8; 32],
    len: usize,
}

impl NumberText {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl fmt::Write for NumberText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
