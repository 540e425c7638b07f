//! The typed syntax tree of a `.warden` file.
//!
//! Every node carries the byte [`Span`] of the text it came from. Spans never take part in
//! equality: two trees that differ only in layout compare equal, which is what the formatter's
//! round-trip tests rely on.

use std::fmt;

pub use crate::span::{FileId, Span};

/// A name (identifier or quoted string) with its span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    /// The text of the name, escapes resolved.
    pub text: String,
    /// Where the name was written.
    pub span: Span,
    /// Whether it was written as a quoted string.
    pub quoted: bool,
}

/// An integer literal with its span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Int {
    /// The value.
    pub value: u64,
    /// Where it was written.
    pub span: Span,
}

/// One parsed `.warden` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyFile {
    /// The file this tree came from.
    pub file: FileId,
    /// Declarations in source order.
    pub decls: Vec<Decl>,
    /// Comments in source order, with their spans (kept for the formatter).
    pub comments: Vec<(Span, String)>,
    /// The rules written inside this file's `defaults` blocks, in source order. They are kept
    /// here rather than in [`Decl::Defaults`] so that variant keeps its shape until the
    /// checker reads rules; each rule's span lies inside the block it was written in.
    pub defaults_rules: Vec<RuleDecl>,
}

/// A top-level declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decl {
    /// `policy "name" version N`
    Policy {
        /// The policy's name.
        name: Name,
        /// Its version, when given.
        version: Option<Int>,
        /// The whole declaration.
        span: Span,
    },
    /// `effects a, b, c`
    Effects {
        /// Declared effects in order.
        names: Vec<Name>,
        /// The whole declaration.
        span: Span,
    },
    /// `intents a > b > c` (highest priority first)
    Intents {
        /// Declared intents, highest priority first.
        names: Vec<Name>,
        /// The whole declaration.
        span: Span,
    },
    /// `fallback read`
    Fallback {
        /// The fallback intent.
        name: Name,
        /// The whole declaration.
        span: Span,
    },
    /// `combine priority|union`
    Combine {
        /// The combination rule.
        combine: Combine,
        /// The whole declaration.
        span: Span,
    },
    /// `keywords intent { lang "k", ... }`
    Keywords(KeywordsDecl),
    /// `negation before|after N|clause { lang "n", ... }`
    Negation(NegationDecl),
    /// `quoted count|data|ignore`: how keyword hits inside quoted content count.
    Quoted {
        /// The setting.
        quoted: Quoted,
        /// The whole declaration.
        span: Span,
    },
    /// `embedded { lang "phrase", ... }`: phrases after which the query's text is embedded
    /// content (quoted content, for `quoted`).
    Embedded(PhrasesDecl),
    /// `except { lang "phrase", ... }`: words and phrases inside which a keyword hit does not
    /// count.
    Except(PhrasesDecl),
    /// `matrix name { grid }`
    Matrix(MatrixDecl),
    /// `mode name { ... }`
    Mode(ModeDecl),
    /// `default mode name`
    DefaultMode {
        /// The mode named.
        name: Name,
        /// The whole declaration.
        span: Span,
    },
    /// `roles { a > b > c, ... }`
    Roles {
        /// Each chain, highest role first.
        chains: Vec<Vec<Name>>,
        /// The whole declaration.
        span: Span,
    },
    /// `permission "p" implies "q", "r"`
    Permission {
        /// The permission declared.
        name: Name,
        /// The permissions it implies.
        implies: Vec<Name>,
        /// The whole declaration.
        span: Span,
    },
    /// `tiers a > b > c` (highest precedence first)
    Tiers {
        /// Tiers in precedence order.
        names: Vec<Name>,
        /// The whole declaration.
        span: Span,
    },
    /// `connectors prefix "mcp__"`
    ConnectorsPrefix {
        /// The prefix string.
        prefix: Name,
        /// The whole declaration.
        span: Span,
    },
    /// `unknown deny|allow`
    Unknown {
        /// `true` for `unknown allow`.
        allow: bool,
        /// The whole declaration.
        span: Span,
    },
    /// `defaults { attrs }`
    Defaults {
        /// The attributes unknown tools take under `unknown allow`.
        attrs: Vec<ToolAttr>,
        /// The whole declaration.
        span: Span,
    },
    /// `confirm fields "a", "b"`
    ConfirmFields {
        /// Argument names that carry a confirmation.
        names: Vec<Name>,
        /// The whole declaration.
        span: Span,
    },
    /// `tenant arg "business_id"`
    TenantArg {
        /// The argument that names a tenant.
        name: Name,
        /// The whole declaration.
        span: Span,
    },
    /// `limit transactional N per turn`
    Limit {
        /// The maximum number of non-`none` calls per turn.
        max: Int,
        /// The whole declaration.
        span: Span,
    },
    /// `tool name { attrs }`
    Tool(ToolDecl),
    /// `match "glob" { attrs }`
    Match(MatchDecl),
    /// `include "path"`, or `include yaml "path" legacy "path"` (seed 004's
    /// `tool_policies.yaml` and legacy `tools.yaml`, read as tool declarations)
    Include {
        /// The path, relative to the including file.
        path: Name,
        /// Whether `path` is a `tool_policies.yaml` file (`include yaml`).
        yaml: bool,
        /// The legacy `tools.yaml` catalog of an `include yaml`, relative to the including file.
        legacy: Option<Name>,
        /// The whole declaration.
        span: Span,
    },
    /// `accents fold|keep`
    Accents {
        /// `true` for `accents fold` (the default).
        fold: bool,
        /// The whole declaration.
        span: Span,
    },
    /// `trust annotations tighten|ignore`: whether MCP tool annotations (untrusted hints from a
    /// server) may make a decision stricter. They never make one looser.
    TrustAnnotations {
        /// `true` for `trust annotations tighten` (the default).
        tighten: bool,
        /// The whole declaration.
        span: Span,
    },
    /// `context contacts, own_accounts`: the named sets of strings a request supplies, which
    /// rules name as `context.NAME`.
    Context {
        /// The declared set names.
        names: Vec<Name>,
        /// The whole declaration.
        span: Span,
    },
    /// `rules { ... }`: rules that apply to every tool.
    Rules(RulesDecl),
    /// `labels untrusted, private`: the labels tools may put on a session.
    Labels {
        /// The declared labels, in order.
        names: Vec<Name>,
        /// The whole declaration.
        span: Span,
    },
    /// `after untrusted { ... }`: lines that apply once every listed label is on the session.
    After(AfterDecl),
    /// `taint openworld untrusted`: the labels a call of an MCP tool whose `openWorldHint` is
    /// true or missing puts on the session, besides the tool's own `taints`.
    TaintOpenWorld {
        /// The labels, in order.
        labels: Vec<Name>,
        /// The whole declaration.
        span: Span,
    },
}

impl Decl {
    /// The span of the whole declaration.
    pub fn span(&self) -> Span {
        match self {
            Decl::Policy { span, .. }
            | Decl::Effects { span, .. }
            | Decl::Intents { span, .. }
            | Decl::Fallback { span, .. }
            | Decl::Combine { span, .. }
            | Decl::DefaultMode { span, .. }
            | Decl::Roles { span, .. }
            | Decl::Permission { span, .. }
            | Decl::Tiers { span, .. }
            | Decl::ConnectorsPrefix { span, .. }
            | Decl::Unknown { span, .. }
            | Decl::Defaults { span, .. }
            | Decl::ConfirmFields { span, .. }
            | Decl::TenantArg { span, .. }
            | Decl::Limit { span, .. }
            | Decl::Include { span, .. }
            | Decl::Accents { span, .. }
            | Decl::TrustAnnotations { span, .. }
            | Decl::Quoted { span, .. }
            | Decl::Context { span, .. }
            | Decl::Labels { span, .. }
            | Decl::TaintOpenWorld { span, .. } => *span,
            Decl::Rules(d) => d.span,
            Decl::After(d) => d.span,
            Decl::Embedded(d) | Decl::Except(d) => d.span,
            Decl::Keywords(d) => d.span,
            Decl::Negation(d) => d.span,
            Decl::Matrix(d) => d.span,
            Decl::Mode(d) => d.span,
            Decl::Tool(d) => d.span,
            Decl::Match(d) => d.span,
        }
    }
}

/// How several intents hit by one query combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Combine {
    /// The highest-priority intent with a hit wins.
    #[default]
    Priority,
    /// Every intent hit counts.
    Union,
}

/// `keywords intent { ... }`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeywordsDecl {
    /// The intent these keywords signal.
    pub intent: Name,
    /// Entries per language tag, in source order.
    pub groups: Vec<LangGroup>,
    /// The whole declaration.
    pub span: Span,
}

/// A language tag followed by its strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LangGroup {
    /// The language tag (`en`, `fa`, ...).
    pub lang: Name,
    /// The strings, in source order.
    pub entries: Vec<Name>,
}

/// Which side of a keyword a negator is looked for on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The negator precedes the keyword ("don't delete").
    Before,
    /// The negator follows the keyword (Persian "حذف نکن").
    After,
}

/// How far a negator reaches from where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// At most this many words (`negation before 3`).
    Words(Int),
    /// Its whole clause on its side (`negation before clause`), with the span of `clause`.
    Clause(Span),
}

impl Reach {
    /// The span of the number or of `clause`.
    pub fn span(&self) -> Span {
        match self {
            Reach::Words(i) => i.span,
            Reach::Clause(s) => *s,
        }
    }
}

impl std::fmt::Display for Reach {
    /// The reach as written: the number, or `clause`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reach::Words(i) => write!(f, "{}", i.value),
            Reach::Clause(_) => f.write_str("clause"),
        }
    }
}

/// How keyword hits inside quoted content (quotation marks, text after an `embedded` phrase,
/// identifiers such as `delete_me.txt`) count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Quoted {
    /// Like any other hit (the default).
    #[default]
    Count,
    /// Only when no hit outside quoted content counts.
    Data,
    /// Never.
    Ignore,
}

/// A block of words and phrases per language: `embedded { ... }`, `except { ... }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhrasesDecl {
    /// `except clause`: an entry counts only where it is its whole clause (always false for
    /// `embedded`).
    pub clause: bool,
    /// Entries per language tag, in source order.
    pub groups: Vec<LangGroup>,
    /// The whole declaration.
    pub span: Span,
}

/// `negation before|after N|clause { ... }`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NegationDecl {
    /// Where negators are looked for.
    pub direction: Direction,
    /// How far a negator reaches.
    pub reach: Reach,
    /// Negators per language.
    pub groups: Vec<LangGroup>,
    /// The whole declaration.
    pub span: Span,
}

/// `matrix name { header; rows }`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixDecl {
    /// The matrix's name.
    pub name: Name,
    /// The header line: effect names, one per column.
    pub header: Vec<Name>,
    /// One row per following line.
    pub rows: Vec<MatrixRow>,
    /// The whole declaration.
    pub span: Span,
}

/// One row of a matrix: an intent and its cells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixRow {
    /// The intent this row is for.
    pub intent: Name,
    /// The cell words (`allow`, `deny`, `confirm`) in column order, unchecked.
    pub cells: Vec<Name>,
}

/// `mode name { matrix m  restrict a, b  confirm c }`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModeDecl {
    /// The mode's name.
    pub name: Name,
    /// The items in source order.
    pub items: Vec<ModeItem>,
    /// The whole declaration.
    pub span: Span,
}

/// One item of a mode block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModeItem {
    /// `matrix name`
    Matrix {
        /// The matrix used.
        name: Name,
        /// The item.
        span: Span,
    },
    /// `restrict a, b`: a ceiling on effects.
    Restrict {
        /// The effects allowed at most.
        effects: Vec<Name>,
        /// The item.
        span: Span,
    },
    /// `confirm a, b`: effects whose calls need confirmation.
    Confirm {
        /// The effects needing confirmation.
        effects: Vec<Name>,
        /// The item.
        span: Span,
    },
    /// `after L { ... }`: an `after` block that applies in this mode only.
    After(AfterDecl),
}

/// `after L1, L2 { confirm EFFECTS  deny EFFECTS  RULES }`: lines that apply once every listed
/// label is on the session. They only tighten a decision (allow, then confirm, then deny).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfterDecl {
    /// The labels that must all be present (empty only in text the checker refuses).
    pub labels: Vec<Name>,
    /// The lines, in source order.
    pub items: Vec<AfterItem>,
    /// The whole block.
    pub span: Span,
}

/// One line of an `after` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterItem {
    /// `confirm write, export`: calls with these effects need the user's confirmation.
    Confirm {
        /// The effects.
        effects: Vec<Name>,
        /// The line.
        span: Span,
    },
    /// `deny execute`: calls with these effects are denied.
    Deny {
        /// The effects.
        effects: Vec<Name>,
        /// The line.
        span: Span,
    },
    /// An argument rule, as in a tool body, for every tool.
    Rule(RuleDecl),
}

impl AfterItem {
    /// The span of the line.
    pub fn span(&self) -> Span {
        match self {
            AfterItem::Confirm { span, .. } | AfterItem::Deny { span, .. } => *span,
            AfterItem::Rule(r) => r.span,
        }
    }
}

/// `tool name { attrs }`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolDecl {
    /// The tool's name.
    pub name: Name,
    /// Its attributes in source order.
    pub attrs: Vec<ToolAttr>,
    /// Its argument rules in source order.
    pub rules: Vec<RuleDecl>,
    /// The whole declaration.
    pub span: Span,
}

/// `match "glob" { attrs }`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchDecl {
    /// The name pattern; `*` matches any run of characters.
    pub pattern: Name,
    /// Its attributes in source order.
    pub attrs: Vec<ToolAttr>,
    /// Its argument rules in source order.
    pub rules: Vec<RuleDecl>,
    /// The whole declaration.
    pub span: Span,
}

/// One attribute of a tool, pattern or `defaults` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolAttr {
    /// `effect e`
    Effect {
        /// The effect.
        name: Name,
        /// The attribute.
        span: Span,
    },
    /// `permissions "a", "b"` (all required)
    Permissions {
        /// Required permissions.
        names: Vec<Name>,
        /// The attribute.
        span: Span,
    },
    /// `roles a, b` (any one suffices)
    Roles {
        /// Accepted roles.
        names: Vec<Name>,
        /// The attribute.
        span: Span,
    },
    /// `tenant required`
    TenantRequired {
        /// The attribute.
        span: Span,
    },
    /// `requires a, b`: arguments that must be present and not null.
    Requires {
        /// Required argument names.
        names: Vec<Name>,
        /// The attribute.
        span: Span,
    },
    /// `confirm always`
    ConfirmAlways {
        /// The attribute.
        span: Span,
    },
    /// `enabled true|false`
    Enabled {
        /// The value.
        value: bool,
        /// The attribute.
        span: Span,
    },
    /// `taints untrusted, private`: the labels a call of the tool puts on the session.
    Taints {
        /// The labels.
        names: Vec<Name>,
        /// The attribute.
        span: Span,
    },
}

impl ToolAttr {
    /// The span of the attribute.
    pub fn span(&self) -> Span {
        match self {
            ToolAttr::Effect { span, .. }
            | ToolAttr::Permissions { span, .. }
            | ToolAttr::Roles { span, .. }
            | ToolAttr::TenantRequired { span }
            | ToolAttr::Requires { span, .. }
            | ToolAttr::ConfirmAlways { span }
            | ToolAttr::Enabled { span, .. }
            | ToolAttr::Taints { span, .. } => *span,
        }
    }

    /// The attribute's keyword, as written in source (`effect`, `permissions`, ...).
    pub fn keyword(&self) -> &'static str {
        match self {
            ToolAttr::Effect { .. } => "effect",
            ToolAttr::Permissions { .. } => "permissions",
            ToolAttr::Roles { .. } => "roles",
            ToolAttr::TenantRequired { .. } => "tenant required",
            ToolAttr::Requires { .. } => "requires",
            ToolAttr::ConfirmAlways { .. } => "confirm always",
            ToolAttr::Enabled { .. } => "enabled",
            ToolAttr::Taints { .. } => "taints",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Argument rules

/// `rules { ... }`: rules that apply to every tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesDecl {
    /// The rules in source order.
    pub rules: Vec<RuleDecl>,
    /// The whole declaration.
    pub span: Span,
}

/// `deny when COND` or `confirm when COND`: an outcome and a condition on the call's arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleDecl {
    /// What the rule does when its condition holds (or cannot be evaluated).
    pub outcome: RuleOutcome,
    /// The condition.
    pub condition: Condition,
    /// The whole rule, from `deny`/`confirm` to the end of the condition.
    pub span: Span,
}

/// The outcome of a rule that fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleOutcome {
    /// `confirm`: the call waits for the user's confirmation.
    Confirm,
    /// `deny`: the call is blocked. Stronger than `confirm`.
    Deny,
}

impl RuleOutcome {
    /// The keyword as written: `deny` or `confirm`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleOutcome::Confirm => "confirm",
            RuleOutcome::Deny => "deny",
        }
    }
}

/// A condition on a call's arguments. `or` binds loosest, then `and`, then `not`; parentheses
/// are not kept as nodes (the canonical text puts them back where precedence needs them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// `a or b or ...`: two or more alternatives.
    Or {
        /// The alternatives in source order.
        items: Vec<Condition>,
        /// The whole condition.
        span: Span,
    },
    /// `a and b and ...`: two or more conditions that must all hold.
    And {
        /// The conditions in source order.
        items: Vec<Condition>,
        /// The whole condition.
        span: Span,
    },
    /// `not c`
    Not {
        /// The negated condition.
        inner: Box<Condition>,
        /// From `not` to the end of `inner`.
        span: Span,
    },
    /// `present(ref)`: the argument exists and is not `null`.
    Present {
        /// The argument.
        arg: ArgRef,
        /// From `present` to the closing parenthesis.
        span: Span,
    },
    /// `OPERAND OP RHS`
    Compare(Comparison),
}

impl Condition {
    /// The span of the whole condition.
    pub fn span(&self) -> Span {
        match self {
            Condition::Or { span, .. }
            | Condition::And { span, .. }
            | Condition::Not { span, .. }
            | Condition::Present { span, .. } => *span,
            Condition::Compare(c) => c.span,
        }
    }
}

/// `OPERAND OP RHS`: `path not under "/workspace"`, `amount > 100`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comparison {
    /// What is looked at.
    pub operand: Operand,
    /// The operator.
    pub op: CompareOp,
    /// Where the operator was written.
    pub op_span: Span,
    /// The right-hand side: one or more values (one for `=~`, `!~` and the number
    /// comparisons).
    pub values: Vec<Value>,
    /// The whole comparison.
    pub span: Span,
}

/// What a comparison looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// An argument: `path`, `options.mode`, `recipients[*]`.
    Arg(ArgRef),
    /// `any`: every string value anywhere in the arguments.
    Any(Span),
    /// `host(...)`: the host of a URL. Only a reference is meaningful inside; the grammar
    /// accepts any operand or literal so the checker can say so.
    Host {
        /// What was written inside the parentheses.
        of: Box<Operand>,
        /// From `host` to the closing parenthesis.
        span: Span,
    },
    /// A literal, which only `host(...)` can hold.
    Literal(Value),
}

impl Operand {
    /// The span of the operand.
    pub fn span(&self) -> Span {
        match self {
            Operand::Arg(a) => a.span,
            Operand::Any(span) | Operand::Host { span, .. } => *span,
            Operand::Literal(v) => v.span(),
        }
    }
}

/// A reference to an argument: a name, then `.name` steps into objects and `[*]` steps over
/// every element of an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgRef {
    /// The steps in order; the first is always a [`RefStep::Field`].
    pub steps: Vec<RefStep>,
    /// The whole reference.
    pub span: Span,
}

/// One step of an [`ArgRef`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefStep {
    /// A field of an object (the first step: an argument's name).
    Field(String),
    /// `[*]`: every element of an array.
    Each,
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `in`: equal to one of the values.
    In,
    /// `not in`
    NotIn,
    /// `under`: lexically inside one of the directories.
    Under,
    /// `not under`
    NotUnder,
    /// `matches`: matched by one of the globs.
    Matches,
    /// `not matches`
    NotMatches,
    /// `=~`: matched by the regular expression.
    RegexMatch,
    /// `!~`
    RegexNotMatch,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl CompareOp {
    /// The operator as written: `not in`, `=~`, `<=`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::In => "in",
            CompareOp::NotIn => "not in",
            CompareOp::Under => "under",
            CompareOp::NotUnder => "not under",
            CompareOp::Matches => "matches",
            CompareOp::NotMatches => "not matches",
            CompareOp::RegexMatch => "=~",
            CompareOp::RegexNotMatch => "!~",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
        }
    }

    /// Whether the operator is the negated form of another (`not in`, `not under`,
    /// `not matches`, `!~`, `!=`).
    pub fn is_negated(self) -> bool {
        matches!(
            self,
            CompareOp::NotIn
                | CompareOp::NotUnder
                | CompareOp::NotMatches
                | CompareOp::RegexNotMatch
                | CompareOp::Ne
        )
    }
}

/// A value on the right of an operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A quoted string, escapes resolved.
    Str(Name),
    /// A number as written (`100`, `-5`, `0.5`); the checker reads its value.
    Number {
        /// The text as written.
        text: String,
        /// Where it was written.
        span: Span,
    },
    /// `context.NAME`: a set the request supplies.
    Context {
        /// The set's name (without `context.`).
        name: Name,
        /// The whole `context.NAME`.
        span: Span,
    },
    /// `query`: the words of the user's query.
    Query(Span),
}

impl Value {
    /// The span of the value.
    pub fn span(&self) -> Span {
        match self {
            Value::Str(n) => n.span,
            Value::Number { span, .. } | Value::Context { span, .. } | Value::Query(span) => *span,
        }
    }
}

/// The canonical text of a rule, as `toolwarden fmt` prints it: `deny when path not under
/// "/workspace", "/tmp/scratch"`.
impl fmt::Display for RuleDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Pieces written directly: `write!` with arguments costs a format walk per rule, and
        // the checker writes every rule's canonical text.
        f.write_str(self.outcome.as_str())?;
        f.write_str(" when ")?;
        fmt::Display::fmt(&self.condition, f)
    }
}

/// The canonical text of a condition: single spaces, lists joined by `, `, and parentheses only
/// where precedence needs them (an `or` inside `and` or `not`, an `and` inside `not`).
impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// Binding strength: `or` 0, `and` 1, `not` and atoms 2.
        fn level(c: &Condition) -> u8 {
            match c {
                Condition::Or { .. } => 0,
                Condition::And { .. } => 1,
                _ => 2,
            }
        }
        fn operand(f: &mut fmt::Formatter<'_>, c: &Condition, min: u8) -> fmt::Result {
            if level(c) < min {
                f.write_str("(")?;
                fmt::Display::fmt(c, f)?;
                f.write_str(")")
            } else {
                fmt::Display::fmt(c, f)
            }
        }
        match self {
            Condition::Or { items, .. } | Condition::And { items, .. } => {
                let (word, min) = match self {
                    Condition::Or { .. } => (" or ", 1),
                    _ => (" and ", 2),
                };
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(word)?;
                    }
                    operand(f, item, min)?;
                }
                Ok(())
            }
            Condition::Not { inner, .. } => {
                f.write_str("not ")?;
                operand(f, inner, 2)
            }
            Condition::Present { arg, .. } => {
                f.write_str("present(")?;
                fmt::Display::fmt(arg, f)?;
                f.write_str(")")
            }
            Condition::Compare(c) => {
                fmt::Display::fmt(&c.operand, f)?;
                f.write_str(" ")?;
                f.write_str(c.op.as_str())?;
                f.write_str(" ")?;
                for (i, v) in c.values.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    fmt::Display::fmt(v, f)?;
                }
                Ok(())
            }
        }
    }
}

/// The canonical text of an operand: `recipients[*]`, `any`, `host(url)`.
impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Arg(a) => fmt::Display::fmt(a, f),
            Operand::Any(_) => f.write_str("any"),
            Operand::Host { of, .. } => {
                f.write_str("host(")?;
                fmt::Display::fmt(of, f)?;
                f.write_str(")")
            }
            Operand::Literal(v) => fmt::Display::fmt(v, f),
        }
    }
}

/// The canonical text of a reference: `attachments[*].name`.
impl fmt::Display for ArgRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                RefStep::Field(name) if i == 0 => f.write_str(name)?,
                RefStep::Field(name) => {
                    f.write_str(".")?;
                    f.write_str(name)?;
                }
                RefStep::Each => f.write_str("[*]")?,
            }
        }
        Ok(())
    }
}

/// The canonical text of a value: a string quoted with `"` and `\` escaped, a number as
/// written, `context.NAME`, `query`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(n) => {
                // Runs between the characters to escape are written whole: a `write!` per
                // character made this most of the canonical text's cost.
                f.write_str("\"")?;
                let mut rest = n.text.as_str();
                while let Some(i) = rest.find(['"', '\\']) {
                    f.write_str(&rest[..i])?;
                    f.write_str("\\")?;
                    f.write_str(&rest[i..=i])?;
                    rest = &rest[i + 1..];
                }
                f.write_str(rest)?;
                f.write_str("\"")
            }
            Value::Number { text, .. } => f.write_str(text),
            Value::Context { name, .. } => {
                f.write_str("context.")?;
                f.write_str(&name.text)
            }
            Value::Query(_) => f.write_str("query"),
        }
    }
}
