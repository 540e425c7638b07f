//! The pest parser and the AST builder: one `build_<rule>` function per grammar rule.
//!
//! Parsing never stops at the first syntax error: after an error the parser resumes at the next
//! line that starts (in column 1) with a declaration keyword, so one run reports every broken
//! declaration.

use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;
use pest::Parser;

use super::ast::*;
use crate::diagnostic::Diagnostic;

mod pieces;
mod rule;
#[cfg(test)]
mod tests;
use super::strings::string_end;
use rule::too_deep;

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/warden.pest"]
struct WardenParser;

/// Keywords that start a top-level declaration; used to resume after a syntax error.
const DECLARATION_KEYWORDS: &[&str] = &[
    "policy",
    "effects",
    "intents",
    "fallback",
    "combine",
    "keywords",
    "negation",
    "matrix",
    "mode",
    "default",
    "roles",
    "permission",
    "tiers",
    "connectors",
    "unknown",
    "defaults",
    "confirm",
    "tenant",
    "limit",
    "tool",
    "match",
    "include",
    "accents",
    "trust",
    "quoted",
    "embedded",
    "except",
    "context",
    "rules",
    "labels",
    "after",
];

/// Parses one file's text into a [`PolicyFile`].
///
/// Returns the tree (holding every declaration that parsed) and the diagnostics (syntax errors
/// and malformed literals). The tree is only trustworthy when no diagnostic is an error.
///
/// A large file is parsed in pieces on several threads (see `parse/pieces.rs`); the tree and the
/// diagnostics are the same as those of one parse of the whole text.
pub fn parse_file(text: &str, file: FileId) -> (PolicyFile, Vec<Diagnostic>) {
    let mut built = Built::default();
    if let Some(d) = too_deep(text, file) {
        // The grammar nests one level per parenthesis of a condition: refuse deeper text
        // before pest recurses into it.
        built.diagnostics.push(d);
    } else if let Some(whole) = pieces::parse_in_pieces(text, file) {
        built = whole;
    } else {
        parse_resuming(text, file, &mut built);
    }
    let comments = scan_comments(text, file);
    let Built {
        decls,
        diagnostics,
        defaults_rules,
    } = built;
    (
        PolicyFile {
            file,
            decls,
            comments,
            defaults_rules,
        },
        diagnostics,
    )
}

/// What the builder made of some declarations: the declarations, the diagnostics of malformed
/// literals and syntax errors, and the rules of `defaults` blocks.
#[derive(Debug, Default)]
struct Built {
    decls: Vec<Decl>,
    diagnostics: Vec<Diagnostic>,
    defaults_rules: Vec<RuleDecl>,
}

/// Parses `text[start..end]` as a file of its own and, when `build`, builds its declarations
/// into `out` (spans are offsets into `text`). Returns whether it built them. On a syntax
/// error, `out` is left as it was and the error is returned, its position relative to `start`.
fn parse_range(
    text: &str,
    start: usize,
    end: usize,
    file: FileId,
    out: &mut Built,
    build: bool,
) -> Result<bool, pest::error::Error<Rule>> {
    let chunk = text.get(start..end).unwrap_or_default();
    let mut pairs = WardenParser::parse(Rule::policy_file, chunk)?;
    if !build {
        return Ok(false);
    }
    if let Some(file_pair) = pairs.next() {
        let mut b = Builder {
            file,
            base: start,
            diagnostics: &mut out.diagnostics,
            defaults_rules: &mut out.defaults_rules,
        };
        for pair in file_pair.into_inner() {
            if pair.as_rule() != Rule::EOI {
                if let Some(d) = b.build_decl(pair, text) {
                    out.decls.push(d);
                }
            }
        }
    }
    Ok(true)
}

/// The bytes a parse resumed after a syntax error reads at first; the window doubles while
/// what it holds cannot be decided without the text after it.
const RESUME_WINDOW: usize = 4 * 1024;

/// Parses the whole of `text`, resuming after each syntax error at the next declaration line.
///
/// The first parse reads the whole text. A parse resumed after an error reads a window that ends
/// at a line start: pest's error position costs time in proportion to the text it was given
/// after the error, so a file of many errors would cost the square of its length. A window
/// decides as the rest of the text would, as long as the parse did not reach its end: no token
/// crosses a line end, so an error before the window's end is the error of the whole rest. A
/// window that parses whole is kept when it ends where a declaration line starts (no
/// declaration goes on with a declaration keyword); otherwise, and when the error is at its
/// end, the window doubles.
fn parse_resuming(text: &str, file: FileId, built: &mut Built) {
    resume_in_windows(text, file, built, RESUME_WINDOW);
}

/// [`parse_resuming`] with windows of `first_window` bytes at first.
fn resume_in_windows(text: &str, file: FileId, built: &mut Built, first_window: usize) {
    let mut base = 0usize;
    let mut window = text.len();
    loop {
        let end = window_end(text, base, window);
        let whole = end == text.len();
        let keep = whole || starts_declaration_line(text, end);
        let err = match parse_range(text, base, end, file, built, keep) {
            Ok(true) if whole => break,
            Ok(true) => {
                base = end;
                window = first_window;
                continue;
            }
            Ok(false) => {
                window = window.saturating_mul(2);
                continue;
            }
            Err(err) => err,
        };
        let pos = match err.location {
            InputLocation::Pos(p) => p,
            InputLocation::Span((p, _)) => p,
        };
        let at = base + pos;
        if at >= end && !whole {
            // The parse ran into the window's end: what follows decides.
            window = window.saturating_mul(2);
            continue;
        }
        built
            .diagnostics
            .push(syntax_error(&err.variant, text, at, file));
        // Keep what parsed before the error: parse the prefix up to the resume point
        // would need a second grammar entry; instead we re-parse declaration by
        // declaration from `base` until the failing one.
        salvage_prefix(text, base, at, file, built);
        // An error at the very start of a declaration line (the declaration before it
        // was left open) resumes at that line, so its declaration is not lost.
        let next = if at > base && starts_declaration_line(text, at) {
            Some(at)
        } else {
            resume_point(text, at)
        };
        match next {
            Some(next) => {
                base = next;
                window = first_window;
            }
            None => break,
        }
    }
}

/// Where a window of `window` bytes from `base` ends: the start of the first line that starts
/// at or after `base + window`, or the end of the text.
fn window_end(text: &str, base: usize, window: usize) -> usize {
    let bytes = text.as_bytes();
    let from = base.saturating_add(window);
    if from >= bytes.len() {
        bytes.len()
    } else if from > 0 && bytes[from - 1] == b'\n' {
        from
    } else {
        memchr::memchr(b'\n', &bytes[from..]).map_or(bytes.len(), |i| from + i + 1)
    }
}

/// Parses the declarations that start between `base` and the error offset `at`, so a syntax
/// error in one declaration does not hide the others from the checker.
fn salvage_prefix(text: &str, base: usize, at: usize, file: FileId, built: &mut Built) {
    // Candidate declaration starts: lines in (base..at) beginning with a keyword.
    let mut starts: Vec<usize> = vec![base];
    let mut offset = base;
    while let Some(next) = resume_point(text, offset) {
        if next >= at {
            break;
        }
        starts.push(next);
        offset = next;
    }
    starts.push(at);
    for w in starts.windows(2) {
        // A candidate that does not parse on its own is dropped: the error was reported.
        let _ = parse_range(text, w[0], w[1], file, built, true);
    }
}

/// Whether `at` is the first byte of a line that starts with a declaration keyword.
fn starts_declaration_line(text: &str, at: usize) -> bool {
    let line_start = at == 0 || text.as_bytes().get(at - 1) == Some(&b'\n');
    line_start && DECLARATION_KEYWORDS.contains(&found_token(text, at).as_str())
}

/// The byte offset of the next line after `at` that starts, in column 1, with a declaration
/// keyword.
fn resume_point(text: &str, at: usize) -> Option<usize> {
    let mut offset = text.get(at..)?.find('\n').map(|i| at + i + 1)?;
    while offset < text.len() {
        let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
        let line = &text[offset..line_end];
        let word: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        if !word.is_empty() && DECLARATION_KEYWORDS.contains(&word.as_str()) {
            return Some(offset);
        }
        offset = line_end + 1;
    }
    None
}

/// Finds `#` comments outside strings; returns their spans and text (without the `#`).
///
/// Strings are stepped over as the grammar reads them ([`string_end`]). The scan jumps between
/// the bytes that matter (`memchr`): strings and comments start and end at ASCII bytes, which no
/// byte of a multi-byte character equals.
fn scan_comments(text: &str, file: FileId) -> Vec<(Span, String)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut pos = 0;
    while let Some(off) = memchr::memchr2(b'"', b'#', &bytes[pos..]) {
        let at = pos + off;
        if bytes[at] == b'#' {
            let end = memchr::memchr(b'\n', &bytes[at..]).map_or(text.len(), |n| at + n);
            out.push((Span::new(file, at, end), text[at + 1..end].to_string()));
            pos = end;
        } else {
            pos = string_end(bytes, at + 1).1;
        }
    }
    out
}

/// Builds a syntax-error diagnostic with human names for what was expected.
fn syntax_error(variant: &ErrorVariant<Rule>, text: &str, at: usize, file: FileId) -> Diagnostic {
    let found = found_token(text, at);
    let found_span = Span::new(file, at, at + found.len().max(usize::from(at < text.len())));
    let expected = match variant {
        ErrorVariant::ParsingError { positives, .. } => expected_phrase(positives),
        ErrorVariant::CustomError { message } => message.clone(),
    };
    let found_text = if found.is_empty() {
        "the end of the file".to_string()
    } else {
        format!("`{found}`")
    };
    let mut d = Diagnostic::error("syntax", format!("expected {expected}, found {found_text}")).at(
        found_span,
        format!("expected {} here", without_examples(&expected)),
    );
    let help = single_quoted(text, at)
        .or_else(|| unclosed_string(text, at))
        .or_else(|| comma_before_language(text, at, &found, &expected))
        .or_else(|| syntax_help(&found, &expected));
    if let Some(help) = help {
        d = d.help(help);
    }
    d
}

/// For a bare word where a string was expected right after a comma (`en "add", es "crear"`),
/// the help that says languages follow each other without a comma.
fn comma_before_language(text: &str, at: usize, found: &str, expected: &str) -> Option<String> {
    let after_comma = text.get(..at)?.trim_end().ends_with(',');
    let word = !found.is_empty() && found.chars().all(|c| c.is_alphanumeric() || c == '-');
    (expected == "a quoted string" && after_comma && word).then(|| {
        format!("if `{found}` starts the next language, drop the comma before it: languages follow each other without one (`en \"add\"  {found} \"...\"`)")
    })
}

/// For a string at `at` that its line ends before it is closed, the help that says strings end
/// on their line (a backslash before the line's end does not carry one onto the next).
fn unclosed_string(text: &str, at: usize) -> Option<String> {
    let rest = text.get(at..)?.strip_prefix('"')?;
    let (body_end, _) = string_end(rest.as_bytes(), 0);
    if rest.as_bytes().get(body_end) == Some(&b'"') {
        return None;
    }
    // An odd run of backslashes at the end (before a CRLF's carriage return, which the last one
    // escapes): the last one was meant to carry the string on.
    let body = &rest[..body_end];
    let body = body.strip_suffix('\r').unwrap_or(body);
    let trailing = body.bytes().rev().take_while(|&b| b == b'\\').count();
    let continued = trailing % 2 == 1;
    Some(if continued {
        "a string ends on its line: a backslash at the line's end does not continue it; close it with `\"` (write `\\\\` for a backslash)".to_string()
    } else {
        "this string is not closed on its line: end it with `\"`".to_string()
    })
}

/// For a single-quoted string at `at` (`'invoices.view'`), the help that rewrites it with
/// double quotes.
fn single_quoted(text: &str, at: usize) -> Option<String> {
    let rest = text.get(at..)?.strip_prefix('\'')?;
    let line = rest.split('\n').next().unwrap_or("");
    let inner = &line[..line.find('\'')?];
    let escaped = inner.replace('\\', "\\\\").replace('"', "\\\"");
    Some(format!(
        "strings use double quotes: write \"{escaped}\" instead of '{inner}'"
    ))
}

fn syntax_help(found: &str, expected: &str) -> Option<String> {
    if (expected.starts_with(TOOL_ATTRIBUTE) || expected.starts_with(MODE_ITEM))
        && DECLARATION_KEYWORDS.contains(&found)
    {
        return Some(
            "the `{ ... }` block of the declaration above is not closed: end it with `}` before this line"
                .to_string(),
        );
    }
    if expected.starts_with("a declaration") {
        let close = DECLARATION_KEYWORDS
            .iter()
            .filter(|k| strsim::levenshtein(k, found) <= 2)
            .min_by_key(|k| strsim::levenshtein(k, found));
        return Some(match close {
            Some(k) => format!("did you mean `{k}`?"),
            None => "a declaration starts with a keyword such as `tool`, `match`, `effects`, `intents`, `mode` or `matrix`".to_string(),
        });
    }
    if found.starts_with('\'') {
        return Some("strings use double quotes: \"like this\"".to_string());
    }
    if expected.contains("a name") {
        return Some("a name is an identifier like `create_invoice` or a quoted string like \"invoices.view\"".to_string());
    }
    None
}

/// `phrase` without its parenthesized examples, for the short label under the caret (the
/// message keeps them).
fn without_examples(phrase: &str) -> String {
    let mut out = String::with_capacity(phrase.len());
    let mut depth = 0usize;
    for c in phrase.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The word or character at `at`, for "found `...`".
fn found_token(text: &str, at: usize) -> String {
    let rest = text.get(at..).unwrap_or("");
    // A single-quoted string, whole, when it closes on its line.
    if let Some(body) = rest.strip_prefix('\'') {
        let line = body.split('\n').next().unwrap_or("");
        if let Some(end) = line.find('\'') {
            return format!("'{}'", &line[..end]);
        }
    }
    let word: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.' || *c == '-')
        .collect();
    if !word.is_empty() {
        return word;
    }
    rest.chars().next().map(String::from).unwrap_or_default()
}

/// The phrase for "inside a tool, pattern or `defaults` block".
const TOOL_ATTRIBUTE: &str = "a tool attribute (`effect`, `permissions`, `roles`, `tenant required`, `requires`, `confirm always`, `enabled`, `taints`) or `}`";
/// The phrase for "inside a mode block".
const MODE_ITEM: &str = "a mode item (`matrix`, `restrict`, `confirm`, `after`) or `}`";

/// A human phrase for a set of expected rules: "a name", "`{`", "a declaration (...)".
///
/// pest reports the keywords that could start the next item; they are grouped back into what
/// the author thinks in: a declaration (top level), a tool attribute, a mode item. Keywords that
/// start a declaration but also appear inside blocks (`matrix`, `mode`, `roles`, `confirm`,
/// `tenant`, `match`) are not listed one by one next to "a declaration".
fn expected_phrase(rules: &[Rule]) -> String {
    let declaration = rules
        .iter()
        .any(|r| *r == Rule::EOI || is_declaration_keyword(*r));
    let tool_body = rules.contains(&Rule::kw_effect) && rules.contains(&Rule::kw_requires);
    let mode_body = rules.contains(&Rule::kw_restrict);
    let mut phrases: Vec<String> = Vec::new();
    if declaration {
        phrases.push("a declaration".to_string());
    }
    if tool_body {
        phrases.push(TOOL_ATTRIBUTE.to_string());
    }
    if mode_body {
        phrases.push(MODE_ITEM.to_string());
    }
    for rule in rules {
        let grouped = match rule {
            Rule::EOI => true,
            r if is_declaration_keyword(*r) => true,
            _ => {
                (declaration
                    && matches!(
                        rule,
                        Rule::kw_matrix
                            | Rule::kw_mode
                            | Rule::kw_roles
                            | Rule::kw_confirm
                            | Rule::kw_tenant
                            | Rule::kw_match
                            | Rule::kw_after
                    ))
                    || (tool_body
                        && matches!(
                            rule,
                            Rule::rule_outcome
                                | Rule::kw_deny
                                | Rule::kw_effect
                                | Rule::kw_permissions
                                | Rule::kw_roles
                                | Rule::kw_tenant
                                | Rule::kw_requires
                                | Rule::kw_confirm
                                | Rule::kw_enabled
                                | Rule::kw_taints
                        ))
                    || (mode_body
                        && matches!(
                            rule,
                            Rule::kw_matrix | Rule::kw_restrict | Rule::kw_confirm | Rule::kw_after
                        ))
            }
        };
        if grouped {
            continue;
        }
        let phrase = rule_name(*rule);
        if !phrases.contains(&phrase) {
            phrases.push(phrase);
        }
    }
    match phrases.len() {
        0 => "something else".to_string(),
        1 => phrases.remove(0),
        _ => {
            let last = phrases.pop().unwrap_or_default();
            format!("{} or {last}", phrases.join(", "))
        }
    }
}

fn is_declaration_keyword(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::kw_policy
            | Rule::kw_effects
            | Rule::kw_intents
            | Rule::kw_fallback
            | Rule::kw_combine
            | Rule::kw_keywords
            | Rule::kw_negation
            | Rule::kw_default
            | Rule::kw_permission
            | Rule::kw_tiers
            | Rule::kw_connectors
            | Rule::kw_unknown
            | Rule::kw_defaults
            | Rule::kw_limit
            | Rule::kw_tool
            | Rule::kw_include
            | Rule::kw_accents
            | Rule::kw_trust
            | Rule::kw_quoted
            | Rule::kw_embedded
            | Rule::kw_except
            | Rule::kw_context
            | Rule::kw_rules
            | Rule::kw_labels
            | Rule::kw_taint
    )
}

/// The human name of a grammar rule.
fn rule_name(rule: Rule) -> String {
    let s = match rule {
        Rule::policy_file => "a declaration",
        Rule::ident | Rule::name_list | Rule::matrix_token => "a name",
        Rule::string | Rule::string_body => "a quoted string",
        Rule::int => "a number",
        Rule::boolean => "`true` or `false`",
        Rule::lang_entries => "a language tag followed by quoted strings (en \"delete\")",
        Rule::direction => "`before` or `after`",
        Rule::reach => "a number of words or `clause`",
        Rule::quoted_kind => "`count`, `data` or `ignore`",
        Rule::combine_kind => "`priority` or `union`",
        Rule::unknown_kind => "`deny` or `allow`",
        Rule::accents_kind => "`fold` or `keep`",
        Rule::role_chain => "a role name",
        Rule::tool_body => "`{`",
        Rule::mode_matrix | Rule::mode_restrict | Rule::mode_confirm => {
            "a mode item (`matrix`, `restrict`, `confirm`, `after`)"
        }
        Rule::after_confirm | Rule::after_deny => {
            "an `after` line (`confirm EFFECTS`, `deny EFFECTS`, `deny when ...`, `confirm when ...`)"
        }
        Rule::after_decl => "an `after` block",
        Rule::attr_effect
        | Rule::attr_permissions
        | Rule::attr_roles
        | Rule::attr_tenant
        | Rule::attr_requires
        | Rule::attr_confirm
        | Rule::attr_enabled
        | Rule::attr_taints => {
            "a tool attribute (`effect`, `permissions`, `roles`, `tenant required`, `requires`, `confirm always`, `enabled`, `taints`)"
        }
        Rule::kw_matrix => "`matrix`",
        Rule::kw_mode => "`mode`",
        Rule::kw_roles => "`roles`",
        Rule::kw_confirm => "`confirm`",
        Rule::kw_tenant => "`tenant`",
        Rule::kw_match => "`match`",
        Rule::kw_version => "`version`",
        Rule::kw_implies => "`implies`",
        Rule::kw_prefix => "`prefix`",
        Rule::kw_fields => "`fields`",
        Rule::kw_arg => "`arg`",
        Rule::kw_transactional => "`transactional`",
        Rule::kw_per => "`per`",
        Rule::kw_turn => "`turn`",
        Rule::kw_required => "`required`",
        Rule::kw_always => "`always`",
        Rule::kw_effect => "`effect`",
        Rule::kw_true | Rule::kw_false => "`true` or `false`",
        Rule::arg_rule | Rule::rule_outcome => "a rule (`deny when ...`, `confirm when ...`)",
        Rule::kw_when => "`when`",
        Rule::condition | Rule::cond_and | Rule::cond_not | Rule::cond_group => "a condition",
        Rule::cond_present | Rule::comparison | Rule::operand | Rule::host_call => {
            "a condition (`present(ref)`, `ref OP value`, `host(ref) OP value`)"
        }
        Rule::arg_ref | Rule::ref_name => "an argument name",
        Rule::ref_each => "`[*]`",
        Rule::op_in
        | Rule::op_under
        | Rule::op_matches
        | Rule::op_regex
        | Rule::op_compare
        | Rule::not_op => {
            "an operator (`in`, `under`, `matches`, `=~`, `!~`, `<`, `<=`, `>`, `>=`, `==`, `!=`)"
        }
        Rule::in_list => "a quoted string, a number, `context.NAME` or `query`",
        Rule::string_list => "a quoted string",
        Rule::number => "a number",
        Rule::context_set => "`context.NAME`",
        other => return format!("`{}`", format!("{other:?}").trim_start_matches("kw_")),
    };
    s.to_string()
}

/// Turns pest pairs into AST nodes, adding `base` to every offset.
struct Builder<'d> {
    file: FileId,
    base: usize,
    diagnostics: &'d mut Vec<Diagnostic>,
    /// The rules of `defaults` blocks, gathered for [`PolicyFile::defaults_rules`].
    defaults_rules: &'d mut Vec<RuleDecl>,
}

impl Builder<'_> {
    /// The span of a pair, without trailing white space and comments: pest's implicit
    /// white space makes a rule that ends in a repetition (`name ~ ("," ~ name)*`) swallow the
    /// blanks and comments after its last token, which would put carets and `rule_text` over
    /// them.
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        let end = trim_trailing_trivia(pair);
        Span::new(self.file, self.base + s.start(), self.base + end)
    }

    fn build_decl(&mut self, pair: Pair<'_, Rule>, full_text: &str) -> Option<Decl> {
        let span = self.span(&pair);
        let rule = pair.as_rule();
        let mut inner = pair.into_inner().filter(|p| !is_keyword(p.as_rule()));
        let decl = match rule {
            Rule::policy_decl => {
                let name = self.build_name(inner.next()?);
                let version = inner.next().map(|p| self.build_int(p));
                Decl::Policy {
                    name,
                    version,
                    span,
                }
            }
            Rule::effects_decl => Decl::Effects {
                names: self.build_name_list(inner.next()?),
                span,
            },
            Rule::intents_decl => Decl::Intents {
                names: inner.map(|p| self.build_name(p)).collect(),
                span,
            },
            Rule::fallback_decl => Decl::Fallback {
                name: self.build_name(inner.next()?),
                span,
            },
            Rule::combine_decl => {
                let kind = inner.next()?;
                let combine = if kind.as_str() == "union" {
                    Combine::Union
                } else {
                    Combine::Priority
                };
                Decl::Combine { combine, span }
            }
            Rule::keywords_decl => {
                let intent = self.build_name(inner.next()?);
                let groups = inner.map(|p| self.build_lang_group(p)).collect();
                Decl::Keywords(KeywordsDecl {
                    intent,
                    groups,
                    span,
                })
            }
            Rule::negation_decl => {
                let direction = if inner.next()?.as_str() == "after" {
                    Direction::After
                } else {
                    Direction::Before
                };
                let reach = inner.next()?;
                let reach_span = self.span(&reach);
                let reach = match reach.into_inner().next()? {
                    p if p.as_rule() == Rule::int => Reach::Words(self.build_int(p)),
                    _ => Reach::Clause(reach_span),
                };
                let groups = inner.map(|p| self.build_lang_group(p)).collect();
                Decl::Negation(NegationDecl {
                    direction,
                    reach,
                    groups,
                    span,
                })
            }
            Rule::matrix_decl => {
                let name = self.build_name(inner.next()?);
                let tokens: Vec<Name> = inner
                    .filter_map(|p| p.into_inner().next())
                    .map(|p| self.build_name(p))
                    .collect();
                let (header, rows) = group_matrix(tokens, full_text);
                Decl::Matrix(MatrixDecl {
                    name,
                    header,
                    rows,
                    span,
                })
            }
            Rule::mode_decl => {
                let name = self.build_name(inner.next()?);
                let items = inner.filter_map(|p| self.build_mode_item(p)).collect();
                Decl::Mode(ModeDecl { name, items, span })
            }
            Rule::default_mode_decl => Decl::DefaultMode {
                name: self.build_name(inner.next()?),
                span,
            },
            Rule::roles_decl => Decl::Roles {
                chains: inner
                    .map(|chain| chain.into_inner().map(|p| self.build_name(p)).collect())
                    .collect(),
                span,
            },
            Rule::permission_decl => {
                let name = self.build_name(inner.next()?);
                let implies = inner
                    .next()
                    .map(|p| self.build_name_list(p))
                    .unwrap_or_default();
                Decl::Permission {
                    name,
                    implies,
                    span,
                }
            }
            Rule::tiers_decl => Decl::Tiers {
                names: inner.map(|p| self.build_name(p)).collect(),
                span,
            },
            Rule::connectors_decl => Decl::ConnectorsPrefix {
                prefix: self.build_name(inner.next()?),
                span,
            },
            Rule::unknown_decl => Decl::Unknown {
                allow: inner.next()?.as_str() == "allow",
                span,
            },
            Rule::defaults_decl => {
                let (attrs, rules) = self.build_tool_body(inner.next()?);
                self.defaults_rules.extend(rules);
                Decl::Defaults { attrs, span }
            }
            Rule::confirm_fields_decl => Decl::ConfirmFields {
                names: self.build_name_list(inner.next()?),
                span,
            },
            Rule::tenant_arg_decl => Decl::TenantArg {
                name: self.build_name(inner.next()?),
                span,
            },
            Rule::limit_decl => Decl::Limit {
                max: self.build_int(inner.next()?),
                span,
            },
            Rule::tool_decl => {
                let name = self.build_name(inner.next()?);
                let (attrs, rules) = self.build_tool_body(inner.next()?);
                Decl::Tool(ToolDecl {
                    name,
                    attrs,
                    rules,
                    span,
                })
            }
            Rule::match_decl => {
                let pattern = self.build_name(inner.next()?);
                let (attrs, rules) = self.build_tool_body(inner.next()?);
                Decl::Match(MatchDecl {
                    pattern,
                    attrs,
                    rules,
                    span,
                })
            }
            Rule::context_decl => Decl::Context {
                names: self.build_name_list(inner.next()?),
                span,
            },
            Rule::rules_decl => Decl::Rules(RulesDecl {
                rules: inner.filter_map(|p| self.build_rule(p)).collect(),
                span,
            }),
            Rule::include_decl => {
                let target = inner.next()?;
                if target.as_rule() == Rule::include_yaml {
                    let mut parts = target.into_inner().filter(|p| !is_keyword(p.as_rule()));
                    let path = self.build_name(parts.next()?);
                    let legacy = parts.next().map(|p| self.build_name(p));
                    Decl::Include {
                        path,
                        yaml: true,
                        legacy,
                        span,
                    }
                } else {
                    Decl::Include {
                        path: self.build_name(target),
                        yaml: false,
                        legacy: None,
                        span,
                    }
                }
            }
            Rule::accents_decl => Decl::Accents {
                fold: inner.next()?.as_str() != "keep",
                span,
            },
            Rule::quoted_decl => Decl::Quoted {
                quoted: match inner.next()?.as_str() {
                    "data" => Quoted::Data,
                    "ignore" => Quoted::Ignore,
                    _ => Quoted::Count,
                },
                span,
            },
            Rule::embedded_decl => Decl::Embedded(PhrasesDecl {
                clause: false,
                groups: inner.map(|p| self.build_lang_group(p)).collect(),
                span,
            }),
            Rule::except_decl => {
                let mut clause = false;
                let groups = inner
                    .filter(|p| {
                        let kw = p.as_rule() == Rule::kw_clause;
                        clause |= kw;
                        !kw
                    })
                    .map(|p| self.build_lang_group(p))
                    .collect();
                Decl::Except(PhrasesDecl {
                    clause,
                    groups,
                    span,
                })
            }
            Rule::trust_decl => Decl::TrustAnnotations {
                tighten: inner.next()?.as_str() != "ignore",
                span,
            },
            Rule::labels_decl => Decl::Labels {
                names: self.build_name_list(inner.next()?),
                span,
            },
            Rule::after_decl => Decl::After(self.build_after(span, inner)),
            Rule::taint_decl => Decl::TaintOpenWorld {
                labels: self.build_name_list(inner.next()?),
                span,
            },
            _ => return None,
        };
        Some(decl)
    }

    fn build_name(&mut self, pair: Pair<'_, Rule>) -> Name {
        let span = self.span(&pair);
        match pair.as_rule() {
            Rule::string => {
                let body = pair.into_inner().next();
                let raw = body.as_ref().map_or("", |b| b.as_str());
                let body_start = body.as_ref().map_or(0, |b| b.as_span().start());
                Name {
                    text: self.unescape(raw, self.base + body_start),
                    span,
                    quoted: true,
                }
            }
            _ => Name {
                text: pair.as_str().to_string(),
                span,
                quoted: false,
            },
        }
    }

    /// Resolves `\"` and `\\`; any other escape is reported and kept literally.
    fn unescape(&mut self, raw: &str, start: usize) -> String {
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((j, other)) => {
                    self.diagnostics.push(
                        Diagnostic::error(
                            "bad-escape",
                            format!("unknown escape `\\{other}` in a string"),
                        )
                        .at(
                            Span::new(self.file, start + i, start + j + other.len_utf8()),
                            "only `\\\"` and `\\\\` are escapes",
                        )
                        .help(format!(
                            "write the character itself, or `\\\\{other}` for a backslash followed by `{other}`"
                        )),
                    );
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            }
        }
        out
    }

    fn build_int(&mut self, pair: Pair<'_, Rule>) -> Int {
        let span = self.span(&pair);
        let value = match pair.as_str().parse::<u64>() {
            Ok(v) => v,
            Err(_) => {
                self.diagnostics.push(
                    Diagnostic::error(
                        "bad-number",
                        format!("number `{}` is too large", pair.as_str()),
                    )
                    .at(span, "")
                    .help("use a number below 18446744073709551616"),
                );
                0
            }
        };
        Int { value, span }
    }

    fn build_name_list(&mut self, pair: Pair<'_, Rule>) -> Vec<Name> {
        pair.into_inner().map(|p| self.build_name(p)).collect()
    }

    fn build_lang_group(&mut self, pair: Pair<'_, Rule>) -> LangGroup {
        let mut inner = pair.into_inner();
        let lang = match inner.next() {
            Some(p) => self.build_name(p),
            None => Name {
                text: String::new(),
                span: Span::default(),
                quoted: false,
            },
        };
        let entries = inner.map(|p| self.build_name(p)).collect();
        LangGroup { lang, entries }
    }

    fn build_mode_item(&mut self, pair: Pair<'_, Rule>) -> Option<ModeItem> {
        let span = self.span(&pair);
        let rule = pair.as_rule();
        let mut inner = pair.into_inner().filter(|p| !is_keyword(p.as_rule()));
        Some(match rule {
            Rule::mode_matrix => ModeItem::Matrix {
                name: self.build_name(inner.next()?),
                span,
            },
            Rule::mode_restrict => ModeItem::Restrict {
                effects: self.build_name_list(inner.next()?),
                span,
            },
            Rule::mode_confirm => ModeItem::Confirm {
                effects: self.build_name_list(inner.next()?),
                span,
            },
            Rule::after_decl => ModeItem::After(self.build_after(span, inner)),
            _ => return None,
        })
    }

    /// The inside of an `after` block (its keyword already skipped): the optional label
    /// list, then its lines in source order.
    fn build_after<'i>(
        &mut self,
        span: Span,
        inner: impl Iterator<Item = Pair<'i, Rule>>,
    ) -> AfterDecl {
        let mut labels = Vec::new();
        let mut items = Vec::new();
        for p in inner {
            match p.as_rule() {
                Rule::name_list => labels = self.build_name_list(p),
                Rule::arg_rule => items.extend(self.build_rule(p).map(AfterItem::Rule)),
                Rule::after_confirm | Rule::after_deny => {
                    let line = self.span(&p);
                    let confirm = p.as_rule() == Rule::after_confirm;
                    let effects = p
                        .into_inner()
                        .find(|q| q.as_rule() == Rule::name_list)
                        .map(|q| self.build_name_list(q))
                        .unwrap_or_default();
                    items.push(if confirm {
                        AfterItem::Confirm {
                            effects,
                            span: line,
                        }
                    } else {
                        AfterItem::Deny {
                            effects,
                            span: line,
                        }
                    });
                }
                _ => {}
            }
        }
        AfterDecl {
            labels,
            items,
            span,
        }
    }

    /// A block's attributes and its rules, each in source order.
    fn build_tool_body(&mut self, pair: Pair<'_, Rule>) -> (Vec<ToolAttr>, Vec<RuleDecl>) {
        let mut attrs = Vec::new();
        let mut rules = Vec::new();
        for p in pair.into_inner() {
            if p.as_rule() == Rule::arg_rule {
                rules.extend(self.build_rule(p));
            } else {
                attrs.extend(self.build_tool_attr(p));
            }
        }
        (attrs, rules)
    }

    fn build_tool_attr(&mut self, pair: Pair<'_, Rule>) -> Option<ToolAttr> {
        let span = self.span(&pair);
        let rule = pair.as_rule();
        let mut inner = pair.into_inner().filter(|p| !is_keyword(p.as_rule()));
        Some(match rule {
            Rule::attr_effect => ToolAttr::Effect {
                name: self.build_name(inner.next()?),
                span,
            },
            Rule::attr_permissions => ToolAttr::Permissions {
                names: self.build_name_list(inner.next()?),
                span,
            },
            Rule::attr_roles => ToolAttr::Roles {
                names: self.build_name_list(inner.next()?),
                span,
            },
            Rule::attr_tenant => ToolAttr::TenantRequired { span },
            Rule::attr_requires => ToolAttr::Requires {
                names: self.build_name_list(inner.next()?),
                span,
            },
            Rule::attr_confirm => ToolAttr::ConfirmAlways { span },
            Rule::attr_enabled => ToolAttr::Enabled {
                value: inner.next()?.as_str() == "true",
                span,
            },
            Rule::attr_taints => ToolAttr::Taints {
                names: self.build_name_list(inner.next()?),
                span,
            },
            _ => return None,
        })
    }
}

/// The end offset of `pair` once trailing white space and `#` comments are left out. Only the
/// text after the pair's last token (its rightmost descendant, the last pair in pre-order) can
/// be such trivia; literal tokens there (`}`, a closing quote) are kept. One scan from that
/// token's end gives what trimming each level from its last inner pair down would: where a
/// level's trimmed end falls, the scan is outside any comment.
fn trim_trailing_trivia(pair: &Pair<'_, Rule>) -> usize {
    let span = pair.as_span();
    // Trailing trivia ends in white space, or in a comment at the very end of the text: a skip
    // that takes a comment anywhere else takes the line feed after it too. Most pairs end in
    // neither, and need no scan.
    let ends_in_trivia = pair
        .as_str()
        .chars()
        .next_back()
        .is_some_and(|c| c.is_whitespace() || c == '\u{FEFF}');
    if !ends_in_trivia && span.end() < pair.get_input().len() {
        return span.end();
    }
    let Some(last) = pair.clone().into_inner().flatten().next_back() else {
        return span.end();
    };
    let last = last.as_span().end();
    let Some(tail) = pair.as_str().get(last.saturating_sub(span.start())..) else {
        return span.end();
    };
    let mut end = last;
    let mut in_comment = false;
    for (i, c) in tail.char_indices() {
        if in_comment {
            in_comment = c != '\n';
        } else if c == '#' {
            in_comment = true;
        } else if !c.is_whitespace() && c != '\u{FEFF}' {
            end = last + i + c.len_utf8();
        }
    }
    end
}

/// Keyword tokens carry no data; builders skip them.
fn is_keyword(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::kw_policy
            | Rule::kw_version
            | Rule::kw_effects
            | Rule::kw_intents
            | Rule::kw_fallback
            | Rule::kw_combine
            | Rule::kw_priority
            | Rule::kw_union
            | Rule::kw_keywords
            | Rule::kw_negation
            | Rule::kw_before
            | Rule::kw_after
            | Rule::kw_matrix
            | Rule::kw_mode
            | Rule::kw_restrict
            | Rule::kw_confirm
            | Rule::kw_default
            | Rule::kw_roles
            | Rule::kw_permission
            | Rule::kw_permissions
            | Rule::kw_implies
            | Rule::kw_tiers
            | Rule::kw_connectors
            | Rule::kw_prefix
            | Rule::kw_unknown
            | Rule::kw_allow
            | Rule::kw_deny
            | Rule::kw_defaults
            | Rule::kw_fields
            | Rule::kw_tenant
            | Rule::kw_arg
            | Rule::kw_limit
            | Rule::kw_transactional
            | Rule::kw_per
            | Rule::kw_turn
            | Rule::kw_tool
            | Rule::kw_match
            | Rule::kw_effect
            | Rule::kw_required
            | Rule::kw_requires
            | Rule::kw_always
            | Rule::kw_enabled
            | Rule::kw_true
            | Rule::kw_false
            | Rule::kw_include
            | Rule::kw_accents
            | Rule::kw_fold
            | Rule::kw_keep
            | Rule::kw_yaml
            | Rule::kw_legacy
            | Rule::kw_trust
            | Rule::kw_annotations
            | Rule::kw_tighten
            | Rule::kw_ignore
            | Rule::kw_quoted
            | Rule::kw_embedded
            | Rule::kw_except
            | Rule::kw_context
            | Rule::kw_rules
            | Rule::kw_when
            | Rule::kw_or
            | Rule::kw_and
            | Rule::kw_not
            | Rule::kw_in
            | Rule::kw_under
            | Rule::kw_matches
            | Rule::kw_present
            | Rule::kw_host
            | Rule::kw_labels
            | Rule::kw_taints
            | Rule::kw_taint
            | Rule::kw_openworld
    )
}

/// Splits a matrix body into the header line and one row per following line.
fn group_matrix(tokens: Vec<Name>, text: &str) -> (Vec<Name>, Vec<MatrixRow>) {
    // Lines are counted from the first token on, one gap at a time (counting from the file's
    // start for every token made a large matrix late in a file quadratic).
    let mut at = tokens.first().map_or(0, |t| t.span.start as usize);
    let mut line = 0usize;
    let mut lines: Vec<(usize, Vec<Name>)> = Vec::new();
    for token in tokens {
        let start = token.span.start as usize;
        if let Some(gap) = text.get(at..start) {
            line += memchr::memchr_iter(b'\n', gap.as_bytes()).count();
            at = start;
        }
        match lines.last_mut() {
            Some((l, v)) if *l == line => v.push(token),
            _ => lines.push((line, vec![token])),
        }
    }
    let mut iter = lines.into_iter().map(|(_, v)| v);
    let header = iter.next().unwrap_or_default();
    let rows = iter
        .map(|mut v| {
            let intent = v.remove(0);
            MatrixRow { intent, cells: v }
        })
        .collect();
    (header, rows)
}
