//! The typed syntax tree of a `.warden` file.
//!
//! Every node carries the byte [`Span`] of the text it came from. Spans never take part in
//! equality: two trees that differ only in layout compare equal, which is what the formatter's
//! round-trip tests rely on.

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
            | Decl::Quoted { span, .. } => *span,
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
}

/// `tool name { attrs }`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolDecl {
    /// The tool's name.
    pub name: Name,
    /// Its attributes in source order.
    pub attrs: Vec<ToolAttr>,
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
            | ToolAttr::Enabled { span, .. } => *span,
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
        }
    }
}
