//! The canonical formatter for `.warden` text (`toolwarden fmt`).
//!
//! One layout for every policy, derived from the syntax tree, the comments and the blank lines
//! of the source (nothing else of the original layout survives):
//!
//! - one declaration per line, single spaces between words, `, ` between list items,
//!   ` > ` in chains; names keep the spelling they were written in (bare or quoted);
//! - lists keep their source order (sorting would change `intents` priority, `tiers`
//!   precedence and pattern precedence ties);
//! - a matrix is a grid: the header row indented past the intent column, every column as wide
//!   as its widest word plus two spaces;
//! - runs of `tool`, `match`, `mode`, `keywords` and `negation` declarations not separated by a
//!   blank line form a table: names padded to the longest, attributes aligned by position;
//! - `keywords` and `negation` blocks written on one line stay on one line; otherwise each
//!   language starts a line, and a line break between two strings of one language is kept
//!   (continuation lines align under the first string);
//! - a block with a comment or an argument rule inside is written one item per line;
//! - comments stay where they were: a comment on its own line stays on its own line before the
//!   same code, a comment after code stays after it (trailing comments of adjacent lines are
//!   aligned); at most one blank line is kept where the source had one or more.
//!
//! The result is idempotent (`format(format(x)) == format(x)`) and preserves meaning: the
//! syntax tree of the output equals that of the input (spans aside), so the compiled policy is
//! the same. `tests/fmt.rs` checks both over the shipped policies and generated ones.

use std::sync::Arc;

use crate::diagnostic::{PolicyError, Severity, Sources};
use crate::syntax::ast::*;
use crate::syntax::parse_file;

/// Formats one `.warden` file's text. `name` labels diagnostics. Includes are not followed:
/// each file is formatted on its own.
///
/// # Errors
///
/// A [`PolicyError`] with the syntax errors when the text does not parse (nothing is formatted
/// then). Semantic problems (undefined names …) do not stop formatting.
pub fn format_source(text: &str, name: &str) -> Result<String, PolicyError> {
    let mut sources = Sources::new();
    let file = sources.add(name, text);
    let (tree, diagnostics) = parse_file(text, file);
    if diagnostics.iter().any(|d| d.severity() == Severity::Error) {
        return Err(PolicyError::new(diagnostics, Arc::new(sources)));
    }
    Ok(format_tree(&tree, text))
}

/// One output line of code.
#[derive(Debug)]
struct Line {
    indent: usize,
    text: String,
    /// Source offset of the first token the line stands for.
    start: usize,
    /// Source offset just past the last token it stands for.
    end: usize,
    /// Indent for own-line comments placed right before this line.
    comment_indent: usize,
    /// The line opens a block (`… {`); no blank line follows it.
    opener: bool,
    /// The line closes a block (`}`); no blank line precedes it.
    closer: bool,
}

impl Line {
    fn new(indent: usize, text: String, start: usize, end: usize) -> Line {
        Line {
            indent,
            text,
            start,
            end,
            comment_indent: indent,
            opener: false,
            closer: false,
        }
    }
}

fn name(n: &Name) -> String {
    if n.quoted {
        crate::syntax::quote(&n.text)
    } else {
        n.text.clone()
    }
}

fn names(list: &[Name], sep: &str) -> String {
    list.iter().map(name).collect::<Vec<_>>().join(sep)
}

fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, w: usize) -> String {
    let mut out = s.to_string();
    for _ in width(s)..w {
        out.push(' ');
    }
    out
}

fn attr_text(a: &ToolAttr) -> String {
    match a {
        ToolAttr::Effect { name: n, .. } => format!("effect {}", name(n)),
        ToolAttr::Permissions { names: n, .. } => format!("permissions {}", names(n, ", ")),
        ToolAttr::Roles { names: n, .. } => format!("roles {}", names(n, ", ")),
        ToolAttr::TenantRequired { .. } => "tenant required".to_string(),
        ToolAttr::Requires { names: n, .. } => format!("requires {}", names(n, ", ")),
        ToolAttr::ConfirmAlways { .. } => "confirm always".to_string(),
        ToolAttr::Enabled { value, .. } => format!("enabled {value}"),
        ToolAttr::Taints { names: n, .. } => format!("taints {}", names(n, ", ")),
    }
}

/// The canonical text of one line of an `after` block.
fn after_item_text(item: &AfterItem) -> String {
    match item {
        AfterItem::Confirm { effects, .. } => format!("confirm {}", names(effects, ", ")),
        AfterItem::Deny { effects, .. } => format!("deny {}", names(effects, ", ")),
        AfterItem::Rule(r) => r.to_string(),
    }
}

/// The attributes and rules of a block as canonical text with their spans, in source order.
fn body_items(attrs: &[ToolAttr], rules: &[RuleDecl]) -> Vec<(String, Span)> {
    let mut items: Vec<(String, Span)> = attrs
        .iter()
        .map(|a| (attr_text(a), a.span()))
        .chain(rules.iter().map(|r| (r.to_string(), r.span)))
        .collect();
    items.sort_by_key(|(_, s)| s.start);
    items
}

/// The one-line text of a mode item (an `after` block on one line, as
/// [`Formatter::after_block`] writes one without rules or comments).
fn mode_item_text(m: &ModeItem) -> (String, Span) {
    match m {
        ModeItem::After(a) => (after_line(a), a.span),
        ModeItem::Matrix { name: n, span } => (format!("matrix {}", name(n)), *span),
        ModeItem::Restrict { effects, span } => {
            (format!("restrict {}", names(effects, ", ")), *span)
        }
        ModeItem::Confirm { effects, span } => (format!("confirm {}", names(effects, ", ")), *span),
    }
}

/// An `after` block on one line: `after untrusted, private { deny export }`.
fn after_line(a: &AfterDecl) -> String {
    let head = format!("after {}", names(&a.labels, ", "));
    let head = head.trim_end();
    if a.items.is_empty() {
        return format!("{head} {{ }}");
    }
    let body: Vec<String> = a.items.iter().map(after_item_text).collect();
    format!("{head} {{ {} }}", body.join("  "))
}

fn group_text(g: &LangGroup) -> String {
    format!("{} {}", name(&g.lang), names(&g.entries, ", "))
}

/// The alignable shape of a single-line block declaration: keyword, name, items.
struct Row {
    head: String,
    name: String,
    items: Vec<String>,
}

fn row_line(r: &Row, name_w: usize, widths: &[usize]) -> String {
    let mut s = format!("{} {} {{", r.head, pad(&r.name, name_w));
    if r.items.is_empty() {
        s.push_str(" }");
        return s;
    }
    for (i, item) in r.items.iter().enumerate() {
        s.push(' ');
        if i + 1 < r.items.len() {
            s.push_str(&pad(item, widths.get(i).copied().unwrap_or(0)));
            s.push(' ');
        } else {
            s.push_str(item);
        }
    }
    s.push_str(" }");
    s
}

struct Formatter<'a> {
    text: &'a str,
    /// The rules of the file's `defaults` blocks ([`PolicyFile::defaults_rules`]).
    defaults_rules: &'a [RuleDecl],
    /// Comment start offsets, sorted.
    comments: Vec<(usize, usize, String)>,
    lines: Vec<Line>,
}

impl Formatter<'_> {
    /// A declaration's `(start, end)` without the whitespace and comments pest lets a
    /// declaration that ends in an optional part (`policy "p"`, `permission "p"`) swallow.
    fn range(&self, d: &Decl) -> (usize, usize) {
        let span = d.span();
        let start = span.start as usize;
        (start, self.trim_end(start, span.end as usize))
    }

    /// `end` moved back over whitespace and comments (a rule ending in a list or an optional
    /// part keeps the trivia after it in its span), never before `start`.
    fn trim_end(&self, start: usize, mut end: usize) -> usize {
        let bytes = self.text.as_bytes();
        while end > start {
            if bytes.get(end - 1).is_some_and(u8::is_ascii_whitespace) {
                end -= 1;
            } else if let Some((s, _, _)) = self.comments.iter().find(|(_, e, _)| *e == end) {
                end = *s;
            } else {
                break;
            }
        }
        end
    }

    fn has_comment_in(&self, start: usize, end: usize) -> bool {
        self.comments
            .iter()
            .any(|(s, _, _)| *s >= start && *s < end)
    }

    fn has_newline_in(&self, start: usize, end: usize) -> bool {
        self.text.get(start..end).is_some_and(|s| s.contains('\n'))
    }

    /// The single-line row of a declaration, when it has one and is written on one line.
    fn row_of(&self, d: &Decl) -> Option<Row> {
        let (start, end) = self.range(d);
        if self.has_comment_in(start, end) {
            return None;
        }
        match d {
            // A block with rules is written one item a line (see `block_attrs`).
            Decl::Tool(t) if !t.rules.is_empty() => None,
            Decl::Match(m) if !m.rules.is_empty() => None,
            Decl::Tool(t) => Some(Row {
                head: "tool".into(),
                name: name(&t.name),
                items: body_items(&t.attrs, &t.rules)
                    .into_iter()
                    .map(|(text, _)| text)
                    .collect(),
            }),
            Decl::Match(m) => Some(Row {
                head: "match".into(),
                name: name(&m.pattern),
                items: body_items(&m.attrs, &m.rules)
                    .into_iter()
                    .map(|(text, _)| text)
                    .collect(),
            }),
            // A mode with an `after` block is written one item a line.
            Decl::Mode(m) if m.items.iter().any(|i| matches!(i, ModeItem::After(_))) => None,
            Decl::Mode(m) => Some(Row {
                head: "mode".into(),
                name: name(&m.name),
                items: m.items.iter().map(|i| mode_item_text(i).0).collect(),
            }),
            Decl::Keywords(k) if !self.has_newline_in(start, end) => Some(Row {
                head: "keywords".into(),
                name: name(&k.intent),
                items: k.groups.iter().map(group_text).collect(),
            }),
            Decl::Negation(n) if !self.has_newline_in(start, end) => Some(Row {
                head: "negation".into(),
                name: format!(
                    "{} {}",
                    match n.direction {
                        Direction::Before => "before",
                        Direction::After => "after",
                    },
                    n.reach
                ),
                items: n.groups.iter().map(group_text).collect(),
            }),
            _ => None,
        }
    }

    fn kind_key(d: &Decl) -> u8 {
        match d {
            Decl::Tool(_) => 1,
            Decl::Match(_) => 2,
            Decl::Mode(_) => 3,
            Decl::Keywords(_) => 4,
            Decl::Negation(_) => 5,
            _ => 0,
        }
    }

    fn run(&mut self, decls: &[Decl]) {
        let rows: Vec<Option<Row>> = decls.iter().map(|d| self.row_of(d)).collect();
        let mut i = 0;
        while i < decls.len() {
            let Some(first) = &rows[i] else {
                self.decl(&decls[i]);
                i += 1;
                continue;
            };
            // A table: adjacent rows of the same kind with no blank line between.
            let key = Self::kind_key(&decls[i]);
            let mut j = i + 1;
            while j < decls.len()
                && rows[j].is_some()
                && Self::kind_key(&decls[j]) == key
                && !blank_between(
                    self.text,
                    self.range(&decls[j - 1]).1,
                    self.range(&decls[j]).0,
                )
            {
                j += 1;
            }
            let group: Vec<&Row> = rows[i..j].iter().flatten().collect();
            let name_w = group.iter().map(|r| width(&r.name)).max().unwrap_or(0);
            let mut widths: Vec<usize> = Vec::new();
            for r in &group {
                for (k, item) in r.items.iter().enumerate() {
                    if k + 1 < r.items.len() {
                        if widths.len() <= k {
                            widths.resize(k + 1, 0);
                        }
                        widths[k] = widths[k].max(width(item));
                    }
                }
            }
            let _ = first;
            for (k, r) in group.iter().enumerate() {
                let (start, end) = self.range(&decls[i + k]);
                self.lines
                    .push(Line::new(0, row_line(r, name_w, &widths), start, end));
            }
            i = j;
        }
    }

    fn push(&mut self, indent: usize, text: String, start: usize, end: usize) {
        let end = self.trim_end(start, end);
        self.lines.push(Line::new(indent, text, start, end));
    }

    fn opener(&mut self, text: String, start: usize, end: usize) {
        let mut l = Line::new(0, text, start, end);
        l.opener = true;
        self.lines.push(l);
    }

    fn closer(&mut self, span: Span) {
        let end = span.end as usize;
        let mut l = Line::new(0, "}".to_string(), end.saturating_sub(1), end);
        l.closer = true;
        l.comment_indent = 2;
        self.lines.push(l);
    }

    fn decl(&mut self, d: &Decl) {
        let span = d.span();
        let (start, end) = self.range(d);
        match d {
            Decl::Policy {
                name: n, version, ..
            } => {
                let mut s = format!("policy {}", name(n));
                if let Some(v) = version {
                    s.push_str(&format!(" version {}", v.value));
                }
                self.push(0, s, start, end);
            }
            Decl::Effects { names: n, .. } => {
                self.push(0, format!("effects {}", names(n, ", ")), start, end)
            }
            Decl::Intents { names: n, .. } => {
                self.push(0, format!("intents {}", names(n, " > ")), start, end)
            }
            Decl::Fallback { name: n, .. } => {
                self.push(0, format!("fallback {}", name(n)), start, end)
            }
            Decl::Combine { combine, .. } => self.push(
                0,
                format!(
                    "combine {}",
                    match combine {
                        Combine::Priority => "priority",
                        Combine::Union => "union",
                    }
                ),
                start,
                end,
            ),
            Decl::Keywords(k) => {
                self.opener(
                    format!("keywords {} {{", name(&k.intent)),
                    start,
                    k.intent.span.end as usize,
                );
                self.groups(&k.groups);
                self.closer(span);
            }
            Decl::Negation(n) => {
                let dir = match n.direction {
                    Direction::Before => "before",
                    Direction::After => "after",
                };
                self.opener(
                    format!("negation {dir} {} {{", n.reach),
                    start,
                    n.reach.span().end as usize,
                );
                self.groups(&n.groups);
                self.closer(span);
            }
            Decl::Matrix(m) => self.matrix(m),
            Decl::Mode(m) => {
                self.opener(
                    format!("mode {} {{", name(&m.name)),
                    start,
                    m.name.span.end as usize,
                );
                for item in &m.items {
                    if let ModeItem::After(a) = item {
                        self.after_block(2, a);
                        continue;
                    }
                    let (text, s) = mode_item_text(item);
                    self.push(2, text, s.start as usize, s.end as usize);
                }
                self.closer(span);
            }
            Decl::DefaultMode { name: n, .. } => {
                self.push(0, format!("default mode {}", name(n)), start, end)
            }
            Decl::Roles { chains, .. } => {
                let chain_text = |c: &Vec<Name>| names(c, " > ");
                if self.has_comment_in(start, end) {
                    self.opener("roles {".to_string(), start, start + 5);
                    for c in chains {
                        let s = c.first().map_or(start, |n| n.span.start as usize);
                        let e = c.last().map_or(start, |n| n.span.end as usize);
                        self.push(2, chain_text(c), s, e);
                    }
                    self.closer(span);
                } else if chains.is_empty() {
                    self.push(0, "roles { }".to_string(), start, end);
                } else {
                    let body = chains.iter().map(chain_text).collect::<Vec<_>>().join(", ");
                    self.push(0, format!("roles {{ {body} }}"), start, end);
                }
            }
            Decl::Permission {
                name: n, implies, ..
            } => {
                let mut s = format!("permission {}", name(n));
                if !implies.is_empty() {
                    s.push_str(&format!(" implies {}", names(implies, ", ")));
                }
                self.push(0, s, start, end);
            }
            Decl::Tiers { names: n, .. } => {
                self.push(0, format!("tiers {}", names(n, " > ")), start, end)
            }
            Decl::ConnectorsPrefix { prefix, .. } => {
                self.push(0, format!("connectors prefix {}", name(prefix)), start, end)
            }
            Decl::Unknown { allow, .. } => self.push(
                0,
                format!("unknown {}", if *allow { "allow" } else { "deny" }),
                start,
                end,
            ),
            Decl::Defaults { attrs, .. } => {
                let inside = |r: &&RuleDecl| span.start <= r.span.start && r.span.end <= span.end;
                let rules: Vec<RuleDecl> =
                    self.defaults_rules.iter().filter(inside).cloned().collect();
                self.block_attrs("defaults".to_string(), attrs, &rules, span)
            }
            Decl::ConfirmFields { names: n, .. } => {
                self.push(0, format!("confirm fields {}", names(n, ", ")), start, end)
            }
            Decl::TenantArg { name: n, .. } => {
                self.push(0, format!("tenant arg {}", name(n)), start, end)
            }
            Decl::Limit { max, .. } => self.push(
                0,
                format!("limit transactional {} per turn", max.value),
                start,
                end,
            ),
            Decl::Tool(t) => {
                self.block_attrs(format!("tool {}", name(&t.name)), &t.attrs, &t.rules, span)
            }
            Decl::Match(m) => self.block_attrs(
                format!("match {}", name(&m.pattern)),
                &m.attrs,
                &m.rules,
                span,
            ),
            Decl::Context { names: n, .. } => {
                self.push(0, format!("context {}", names(n, ", ")), start, end)
            }
            Decl::Rules(r) => {
                if r.rules.is_empty() && !self.has_comment_in(start, end) {
                    self.push(0, "rules { }".to_string(), start, end);
                } else {
                    self.opener("rules {".to_string(), start, start + 5);
                    for rule in &r.rules {
                        let s = rule.span;
                        self.push(2, rule.to_string(), s.start as usize, s.end as usize);
                    }
                    self.closer(span);
                }
            }
            Decl::Include {
                path, yaml, legacy, ..
            } => {
                let mut line =
                    format!("include {}{}", if *yaml { "yaml " } else { "" }, name(path));
                if let Some(l) = legacy {
                    line.push_str(&format!(" legacy {}", name(l)));
                }
                self.push(0, line, start, end)
            }
            Decl::Accents { fold, .. } => self.push(
                0,
                format!("accents {}", if *fold { "fold" } else { "keep" }),
                start,
                end,
            ),
            Decl::Quoted { quoted, .. } => self.push(
                0,
                format!(
                    "quoted {}",
                    match quoted {
                        Quoted::Count => "count",
                        Quoted::Data => "data",
                        Quoted::Ignore => "ignore",
                    }
                ),
                start,
                end,
            ),
            Decl::Embedded(p) => self.phrases("embedded", p, start, end),
            Decl::Except(p) => {
                let head = if p.clause { "except clause" } else { "except" };
                self.phrases(head, p, start, end)
            }
            Decl::Labels { names: n, .. } => {
                self.push(0, format!("labels {}", names(n, ", ")), start, end)
            }
            Decl::After(a) => self.after_block(0, a),
            Decl::TaintOpenWorld { labels, .. } => self.push(
                0,
                format!("taint openworld {}", names(labels, ", ")),
                start,
                end,
            ),
            Decl::TrustAnnotations { tighten, .. } => self.push(
                0,
                format!(
                    "trust annotations {}",
                    if *tighten { "tighten" } else { "ignore" }
                ),
                start,
                end,
            ),
        }
    }

    /// A tool, pattern or defaults block: one line without inner comments or rules, else one
    /// attribute or rule per line (attributes and rules in source order).
    fn block_attrs(&mut self, head: String, attrs: &[ToolAttr], rules: &[RuleDecl], span: Span) {
        let (start, end) = (span.start as usize, span.end as usize);
        let items = body_items(attrs, rules);
        if rules.is_empty() && !self.has_comment_in(start, end) {
            let body: Vec<String> = items.into_iter().map(|(text, _)| text).collect();
            let text = if body.is_empty() {
                format!("{head} {{ }}")
            } else {
                format!("{head} {{ {} }}", body.join("  "))
            };
            self.push(0, text, start, end);
            return;
        }
        let open_end = items.first().map_or(start, |(_, s)| s.start as usize);
        // The opener stands for the text up to the first attribute (a comment after `{` trails it).
        self.opener(
            format!("{head} {{"),
            start,
            open_end.saturating_sub(1).max(start),
        );
        for (text, s) in items {
            self.push(2, text, s.start as usize, s.end as usize);
        }
        self.closer(span);
    }

    /// An `after` block at `indent`: on one line when it holds no argument rule and no
    /// comment, otherwise one line per item (indented two more) and `}` on its own line.
    fn after_block(&mut self, indent: usize, a: &AfterDecl) {
        let (start, end) = (a.span.start as usize, a.span.end as usize);
        let has_rule = a.items.iter().any(|i| matches!(i, AfterItem::Rule(_)));
        if !has_rule && !self.has_comment_in(start, end) {
            self.push(indent, after_line(a), start, end);
            return;
        }
        let head = format!("after {}", names(&a.labels, ", "));
        let open_end = a.items.first().map_or(start, |i| i.span().start as usize);
        let mut open = Line::new(
            indent,
            format!("{} {{", head.trim_end()),
            start,
            open_end.saturating_sub(1).max(start),
        );
        open.opener = true;
        self.lines.push(open);
        for item in &a.items {
            let s = item.span();
            self.push(
                indent + 2,
                after_item_text(item),
                s.start as usize,
                s.end as usize,
            );
        }
        let mut close = Line::new(indent, "}".to_string(), end.saturating_sub(1), end);
        close.closer = true;
        close.comment_indent = indent + 2;
        self.lines.push(close);
    }

    /// An `embedded` or `except` block (`head`): on one line when written on one line without
    /// a comment inside (`except { en "what changed"  pt "apagou" }`), otherwise one language
    /// a line, as the groups of a `keywords` block.
    fn phrases(&mut self, head: &str, p: &PhrasesDecl, start: usize, end: usize) {
        if !self.has_newline_in(start, end) && !self.has_comment_in(start, end) {
            let items: Vec<String> = p.groups.iter().map(group_text).collect();
            let body = if items.is_empty() {
                " ".to_string()
            } else {
                format!(" {} ", items.join("  "))
            };
            self.push(0, format!("{head} {{{body}}}"), start, end);
            return;
        }
        let open_end = self.text[start..end]
            .find('{')
            .map_or(start, |i| start + i + 1);
        self.opener(format!("{head} {{"), start, open_end);
        self.groups(&p.groups);
        self.closer(p.span);
    }

    /// The groups of a multi-line `keywords` / `negation` block.
    fn groups(&mut self, groups: &[LangGroup]) {
        for g in groups {
            let lang = name(&g.lang);
            let cont = 2 + width(&lang) + 1;
            let mut line = format!("{lang} ");
            let mut line_start = g.lang.span.start as usize;
            let mut line_end = g.lang.span.end as usize;
            let mut indent = 2;
            for (k, e) in g.entries.iter().enumerate() {
                let e_start = e.span.start as usize;
                if k > 0 {
                    let prev_end = g.entries[k - 1].span.end as usize;
                    if self.has_newline_in(prev_end, e_start) {
                        line.push(',');
                        self.push(indent, std::mem::take(&mut line), line_start, line_end);
                        indent = cont;
                        line_start = e_start;
                    } else {
                        line.push_str(", ");
                    }
                }
                line.push_str(&name(e));
                line_end = e.span.end as usize;
            }
            self.push(indent, line.trim_end().to_string(), line_start, line_end);
        }
    }

    fn matrix(&mut self, m: &MatrixDecl) {
        let start = m.span.start as usize;
        self.opener(
            format!("matrix {} {{", name(&m.name)),
            start,
            m.name.span.end as usize,
        );
        let label_w = m
            .rows
            .iter()
            .map(|r| width(&name(&r.intent)))
            .max()
            .unwrap_or(0);
        let ncols = m
            .rows
            .iter()
            .map(|r| r.cells.len())
            .chain([m.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; ncols];
        for (c, h) in m.header.iter().enumerate() {
            widths[c] = widths[c].max(width(&name(h)));
        }
        for r in &m.rows {
            for (c, cell) in r.cells.iter().enumerate() {
                widths[c] = widths[c].max(width(&name(cell)));
            }
        }
        let render = |words: Vec<String>| -> String {
            let n = words.len();
            let mut s = String::new();
            for (c, w) in words.iter().enumerate() {
                if c + 1 < n {
                    s.push_str(&pad(w, widths[c] + 2));
                } else {
                    s.push_str(w);
                }
            }
            s
        };
        if !m.header.is_empty() {
            let s = m.header[0].span.start as usize;
            let e = m.header[m.header.len() - 1].span.end as usize;
            let text = render(m.header.iter().map(name).collect());
            self.push(2 + label_w + 2, text, s, e);
            if let Some(l) = self.lines.last_mut() {
                l.comment_indent = 2;
            }
        }
        for r in &m.rows {
            let s = r.intent.span.start as usize;
            let e = r
                .cells
                .last()
                .map_or(r.intent.span.end as usize, |c| c.span.end as usize);
            let mut text = pad(&name(&r.intent), label_w + 2);
            if r.cells.is_empty() {
                text = name(&r.intent);
            } else {
                text.push_str(&render(r.cells.iter().map(name).collect()));
            }
            self.push(2, text, s, e);
        }
        self.closer(m.span);
    }
}

/// Formats a parsed file; `text` is its source (for comments and blank lines).
pub(crate) fn format_tree(tree: &PolicyFile, text: &str) -> String {
    let comments: Vec<(usize, usize, String)> = tree
        .comments
        .iter()
        .map(|(s, c)| (s.start as usize, s.end as usize, c.trim_end().to_string()))
        .collect();
    let mut f = Formatter {
        text,
        defaults_rules: &tree.defaults_rules,
        comments,
        lines: Vec::new(),
    };
    f.run(&tree.decls);
    render(f, text)
}

/// An output unit: a code line (index into lines) or an own-line comment.
enum Unit {
    Code(usize),
    Comment { indent: usize, text: String },
}

fn render(f: Formatter<'_>, text: &str) -> String {
    let Formatter {
        comments, lines, ..
    } = f;
    let is_trailing = |start: usize| {
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        !text[line_start..start].trim().is_empty()
    };
    // Trailing comments per code line.
    let mut trailing: Vec<Vec<String>> = vec![Vec::new(); lines.len()];
    // Units with their source range, in output order.
    let mut units: Vec<(Unit, usize, usize)> = Vec::new();
    let mut ci = 0;
    for (li, line) in lines.iter().enumerate() {
        while ci < comments.len() && comments[ci].0 < line.start {
            let (s, e, c) = &comments[ci];
            ci += 1;
            if is_trailing(*s) {
                if let Some(prev) = lines[..li].iter().rposition(|l| l.start <= *s) {
                    trailing[prev].push(format!("#{c}"));
                    continue;
                }
            }
            units.push((
                Unit::Comment {
                    indent: line.comment_indent,
                    text: format!("#{c}"),
                },
                *s,
                *e,
            ));
        }
        units.push((Unit::Code(li), line.start, line.end));
    }
    while ci < comments.len() {
        let (s, e, c) = &comments[ci];
        ci += 1;
        if is_trailing(*s) && !lines.is_empty() {
            let prev = lines
                .iter()
                .rposition(|l| l.start <= *s)
                .unwrap_or(lines.len() - 1);
            trailing[prev].push(format!("#{c}"));
            continue;
        }
        units.push((
            Unit::Comment {
                indent: 0,
                text: format!("#{c}"),
            },
            *s,
            *e,
        ));
    }
    // A code line with several trailing comments keeps the first; the others follow it on
    // their own lines (they were inside code that now fits on one line).
    let mut out_units: Vec<(Unit, usize, usize, Option<String>)> = Vec::new();
    for (u, s, e) in units {
        match u {
            Unit::Code(li) => {
                let mut t = std::mem::take(&mut trailing[li]).into_iter();
                let first = t.next();
                out_units.push((Unit::Code(li), s, e, first));
                for extra in t {
                    out_units.push((
                        Unit::Comment {
                            indent: lines[li].indent,
                            text: extra,
                        },
                        e,
                        e,
                        None,
                    ));
                }
            }
            other => out_units.push((other, s, e, None)),
        }
    }
    // Lay out: code text, blank lines, then align trailing comments per run of adjacent lines.
    struct Out {
        code: String,
        comment: Option<String>,
        blank_before: bool,
    }
    let mut outs: Vec<Out> = Vec::new();
    let mut prev_end: Option<usize> = None;
    let mut prev_opener = false;
    for (u, s, e, tc) in out_units {
        let (code, closer, opener) = match &u {
            Unit::Code(li) => {
                let l = &lines[*li];
                (
                    format!("{}{}", " ".repeat(l.indent), l.text),
                    l.closer,
                    l.opener,
                )
            }
            Unit::Comment { indent, text } => {
                (format!("{}{text}", " ".repeat(*indent)), false, false)
            }
        };
        let blank = match prev_end {
            Some(p) => !prev_opener && !closer && blank_between(text, p, s),
            None => false,
        };
        outs.push(Out {
            code,
            comment: tc,
            blank_before: blank,
        });
        prev_end = Some(prev_end.map_or(e, |p| p.max(e)));
        prev_opener = opener;
    }
    // Align trailing comments within runs of adjacent lines that carry one.
    let mut i = 0;
    while i < outs.len() {
        if outs[i].comment.is_none() {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < outs.len() && outs[j].comment.is_some() && !outs[j].blank_before {
            j += 1;
        }
        let col = outs[i..j].iter().map(|o| width(&o.code)).max().unwrap_or(0) + 2;
        for o in &mut outs[i..j] {
            if let Some(c) = o.comment.take() {
                o.code = format!("{}{c}", pad(&o.code, col));
            }
        }
        i = j;
    }
    let mut result = String::new();
    for o in outs {
        if o.blank_before {
            result.push('\n');
        }
        result.push_str(o.code.trim_end());
        result.push('\n');
    }
    result
}

fn blank_between(text: &str, a: usize, b: usize) -> bool {
    if a >= b {
        return false;
    }
    let Some(gap) = text.get(a..b) else {
        return false;
    };
    let parts: Vec<&str> = gap.split('\n').collect();
    parts.len() > 2
        && parts[1..parts.len() - 1]
            .iter()
            .any(|l| l.trim().is_empty())
}
