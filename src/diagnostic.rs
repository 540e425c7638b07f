//! Source files, diagnostics and their rendering.
//!
//! A [`Diagnostic`] is a message about policy text: a severity, a message, the [`Span`] it is
//! about, and a `help` line saying what to write instead. [`Sources`] maps spans back to
//! `file:line:col` and renders a diagnostic with the source line and a caret underline (through
//! `miette`'s graphical handler, without colour, so output is stable).

use std::fmt;
use std::sync::Arc;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, MietteError,
    MietteSpanContents, SourceCode, SourceSpan, SpanContents,
};
use serde::Serialize;

use crate::span::{FileId, Span};

/// The text of every file a policy was loaded from (the root file and its includes).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
}

#[derive(Clone, Debug)]
struct SourceFile {
    name: String,
    text: Arc<str>,
    line_starts: Vec<usize>,
}

/// A resolved position: file name, 1-based line and 1-based column (in characters).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Location {
    /// The file name as given when it was loaded.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in Unicode scalar values.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

impl Sources {
    /// An empty map.
    pub fn new() -> Sources {
        Sources::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<Arc<str>>) -> FileId {
        let text: Arc<str> = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let id = FileId(u32::try_from(self.files.len()).unwrap_or(u32::MAX));
        self.files.push(SourceFile {
            name: name.into(),
            text,
            line_starts,
        });
        id
    }

    /// The number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no file was added.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The name of `file`, or `""` for an id this map does not hold.
    pub fn name(&self, file: FileId) -> &str {
        self.files
            .get(file.0 as usize)
            .map_or("", |f| f.name.as_str())
    }

    /// The full text of `file`, or `""` for an id this map does not hold.
    pub fn text(&self, file: FileId) -> &str {
        self.files.get(file.0 as usize).map_or("", |f| &f.text)
    }

    /// The source text a span covers (empty when out of range).
    pub fn slice(&self, span: Span) -> &str {
        self.text(span.file).get(span.range()).unwrap_or("")
    }

    /// The `file:line:col` of a span's start.
    pub fn location(&self, span: Span) -> Location {
        let Some(file) = self.files.get(span.file.0 as usize) else {
            return Location {
                file: String::new(),
                line: 0,
                column: 0,
            };
        };
        let offset = (span.start as usize).min(file.text.len());
        let line = match file.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let line_start = file.line_starts[line];
        let column = file
            .text
            .get(line_start..offset)
            .map_or(0, |s| s.chars().count())
            + 1;
        Location {
            file: file.name.clone(),
            line: line + 1,
            column,
        }
    }
}

/// Longest line, in bytes, that a report draws whole. miette pads with `format!` widths, which
/// panic past 65,535 columns: a longer line near a span is drawn as a window around the span
/// (a line of this many bytes is at most 2,048 columns wide, even with tabs).
pub const MAX_DRAWN_LINE_BYTES: usize = 512;

/// How many characters before a span's start the window of a long line shows.
const WINDOW_BEFORE: usize = 40;

/// How many characters the window of a long line shows in all.
const WINDOW_CHARS: usize = 120;

/// The text a report draws, as miette reads it: the span's lines with one line of context on
/// either side, or the window of one long line.
///
/// The column of a span's start is counted in characters, as [`Location`] counts it (miette
/// counts bytes, which put the `file:line:col` of a rendered report past the caret on a line
/// with non-ASCII text before the span), and in the window it is the column in the file.
struct Drawn {
    name: String,
    /// The span's lines with their context, or the window.
    text: Arc<str>,
    /// The 0-based line of the file where `text` starts.
    first_line: usize,
    /// For a window: the 0-based column, in characters, of the span's start in the file.
    column: Option<usize>,
}

impl Drawn {
    /// What to draw for the span `start..end` (byte offsets, within the text) of `file`, and
    /// that span in the drawn text's offsets.
    fn of(file: &SourceFile, start: usize, end: usize) -> (Drawn, usize, usize) {
        let line_of = |offset: usize| match file.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let line_range = |line: usize| {
            let from = file.line_starts[line];
            let to = file
                .line_starts
                .get(line + 1)
                .map_or(file.text.len(), |&next| next - 1);
            from..to
        };
        let (first, last) = (line_of(start), line_of(end));
        // miette draws one line of context on either side of the span's lines.
        let context = first.saturating_sub(1)..=(last + 1).min(file.line_starts.len() - 1);
        let long = context
            .clone()
            .any(|line| line_range(line).len() > MAX_DRAWN_LINE_BYTES);
        if !long {
            // The span's lines and their context only: miette reads a source from its start
            // to find a span's line, so drawing the whole file would cost the span's offset
            // for each report (quadratic in a file with an error on every line).
            let from = line_range(*context.start()).start;
            // Through the last line's end of line, as the whole file has it.
            let to = file
                .line_starts
                .get(*context.end() + 1)
                .map_or(file.text.len(), |&next| next);
            let lines = Drawn {
                name: file.name.clone(),
                text: Arc::from(&file.text[from..to]),
                first_line: *context.start(),
                column: None,
            };
            return (lines, start - from, end.min(to).max(start) - from);
        }
        // The window: the span's first line only, from a little before the span's start.
        let range = line_range(first);
        let line = &file.text[range.clone()];
        let start_in_line = start - range.start;
        let column = line[..start_in_line].chars().count();
        let from_char = column.saturating_sub(WINDOW_BEFORE);
        let byte_of = |char_index: usize| {
            line.char_indices()
                .nth(char_index)
                .map_or(line.len(), |(i, _)| i)
        };
        let from = byte_of(from_char);
        let to = from + byte_len_of_chars(&line[from..], WINDOW_CHARS);
        let mut text = String::new();
        if from > 0 {
            text.push('\u{2026}');
        }
        let shift = text.len();
        text.push_str(&line[from..to]);
        if to < line.len() {
            text.push('\u{2026}');
        }
        let drawn_start = shift + start_in_line - from;
        let drawn_end = shift + (end.min(range.start + to) - range.start).max(start_in_line) - from;
        let window = Drawn {
            name: file.name.clone(),
            text: Arc::from(text),
            first_line: first,
            column: Some(column),
        };
        (window, drawn_start, drawn_end)
    }
}

/// The largest char boundary of `text` at or before `offset`.
fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// The byte length of the first `chars` characters of `text` (all of it when shorter).
fn byte_len_of_chars(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(i, _)| i)
}

impl SourceCode for Drawn {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let inner =
            self.text
                .as_bytes()
                .read_span(span, context_lines_before, context_lines_after)?;
        // miette reports a column only for a span read without context (the report's header).
        let column = if inner.column() == 0 {
            0
        } else if let Some(column) = self.column {
            column
        } else {
            let offset = span.offset().min(self.text.len());
            let line_start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
            self.text
                .get(line_start..offset)
                .map_or(inner.column(), |s| s.chars().count())
        };
        let contents = MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            *inner.span(),
            self.first_line + inner.line(),
            column,
            inner.line_count(),
        )
        .with_language("warden");
        Ok(Box::new(contents))
    }
}

/// How serious a diagnostic is. Errors stop a policy from loading; warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The policy cannot be loaded.
    Error,
    /// The policy loads, but something is probably not what the author meant.
    Warning,
}

/// One message about policy text.
///
/// Built by the parser and the checker; read with the accessors, rendered with
/// [`Diagnostic::render`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    severity: Severity,
    code: &'static str,
    message: String,
    span: Option<Span>,
    label: Option<String>,
    help: Option<String>,
    notes: Vec<String>,
    related: Vec<(Span, String)>,
}

impl Diagnostic {
    /// A new error with `code` (a short kebab-case identifier) and `message`.
    pub(crate) fn error(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            span: None,
            label: None,
            help: None,
            notes: Vec::new(),
            related: Vec::new(),
        }
    }

    /// A new warning with `code` and `message`.
    pub(crate) fn warning(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message)
        }
    }

    /// Sets the span the diagnostic is about, with an optional label under it.
    pub(crate) fn at(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.span = Some(span);
        let label = label.into();
        self.label = (!label.is_empty()).then_some(label);
        self
    }

    /// Sets the `help` line: what to write instead.
    pub(crate) fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Adds a note about another place, rendered as `note: <message> at file:line:col`.
    pub(crate) fn related(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.related.push((span, message.into()));
        self
    }

    /// Error or warning.
    pub fn severity(&self) -> Severity {
        self.severity
    }

    /// A stable kebab-case code such as `undefined-effect`.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message, lower-case, with user text in backticks.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The span the diagnostic is about, when it is about a place in the text.
    pub fn span(&self) -> Option<Span> {
        self.span
    }

    /// What to write instead, when known.
    pub fn help_text(&self) -> Option<&str> {
        self.help.as_deref()
    }

    /// Further notes, without the places of [`Diagnostic::related_spans`].
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Other places the diagnostic refers to (such as a first declaration), with a message each.
    pub fn related_spans(&self) -> &[(Span, String)] {
        &self.related
    }

    /// Notes and related places, resolved to text.
    fn all_notes(&self, sources: &Sources) -> Vec<String> {
        let mut out = self.notes.clone();
        for (span, msg) in &self.related {
            out.push(format!("{msg} at {}", sources.location(*span)));
        }
        out
    }

    /// Renders the diagnostic as a multi-line report: `file:line:col`, the source line, a caret
    /// underline, the message and the help. No colour; stable for snapshots.
    pub fn render(&self, sources: &Sources) -> String {
        let mut diag =
            MietteDiagnostic::new(self.message.clone()).with_severity(match self.severity {
                Severity::Error => miette::Severity::Error,
                Severity::Warning => miette::Severity::Warning,
            });
        let mut help = self.help.clone().unwrap_or_default();
        for note in &self.all_notes(sources) {
            if !help.is_empty() {
                help.push('\n');
            }
            help.push_str("note: ");
            help.push_str(note);
        }
        if !help.is_empty() {
            diag = diag.with_help(help);
        }
        let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
            .with_width(100)
            .with_links(false);
        let mut out = String::new();
        let rendered = match self.span {
            Some(span) => {
                let empty;
                let file = match sources.files.get(span.file.0 as usize) {
                    Some(file) => file,
                    None => {
                        empty = SourceFile {
                            name: String::new(),
                            text: Arc::from(""),
                            line_starts: vec![0],
                        };
                        &empty
                    }
                };
                let text = &file.text;
                let start = floor_char_boundary(text, (span.start as usize).min(text.len()));
                let end = floor_char_boundary(text, (span.end as usize).clamp(start, text.len()));
                let (drawn, start, end) = Drawn::of(file, start, end);
                diag = diag.with_label(LabeledSpan::new(self.label.clone(), start, end - start));
                let report = miette::Report::new(diag).with_source_code(drawn);
                handler.render_report(&mut out, report.as_ref())
            }
            None => handler.render_report(&mut out, &diag),
        };
        if rendered.is_err() {
            out = self.one_line(sources);
        }
        out
    }

    /// A one-line form: `file:line:col: error[code]: message`.
    pub fn one_line(&self, sources: &Sources) -> String {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        match self.span {
            Some(span) => format!(
                "{}: {severity}[{}]: {}",
                sources.location(span),
                self.code,
                self.message
            ),
            None => format!("{severity}[{}]: {}", self.code, self.message),
        }
    }

    /// The diagnostic as a JSON value: `{severity, code, message, file, line, column, help,
    /// notes}` (`file`, `line` and `column` are null when it has no span).
    pub fn to_json(&self, sources: &Sources) -> serde_json::Value {
        let location = self.span.map(|s| sources.location(s));
        serde_json::json!({
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "file": location.as_ref().map(|l| l.file.clone()),
            "line": location.as_ref().map(|l| l.line),
            "column": location.as_ref().map(|l| l.column),
            "text": self.span.map(|s| sources.slice(s).to_string()),
            "help": self.help,
            "notes": self.all_notes(sources),
        })
    }
}

/// A policy that could not be loaded: every diagnostic found (errors and warnings) and the source
/// text they point into.
#[derive(Clone, Debug, thiserror::Error)]
pub struct PolicyError {
    diagnostics: Vec<Diagnostic>,
    sources: Arc<Sources>,
}

impl PolicyError {
    pub(crate) fn new(mut diagnostics: Vec<Diagnostic>, sources: Arc<Sources>) -> PolicyError {
        sort_diagnostics(&mut diagnostics);
        PolicyError {
            diagnostics,
            sources,
        }
    }

    /// Every diagnostic, errors first within each file position order.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The sources the diagnostics point into.
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    /// The number of errors (warnings excluded).
    pub fn error_count(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// Every diagnostic rendered with source lines and carets, then a summary line.
    pub fn render(&self) -> String {
        render_all(&self.diagnostics, &self.sources)
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let errors = self.error_count();
        write!(
            f,
            "policy has {errors} error{}",
            if errors == 1 { "" } else { "s" }
        )?;
        for d in &self.diagnostics {
            write!(f, "\n{}", d.one_line(&self.sources))?;
        }
        Ok(())
    }
}

/// Orders diagnostics by file, then position, then severity.
pub(crate) fn sort_diagnostics(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by_key(|d| {
        (
            d.span.map_or((u32::MAX, 0), |s| (s.file.0, s.start)),
            d.severity,
        )
    });
}

/// How many diagnostics [`render_all`] draws with their source lines.
pub const MAX_RENDERED: usize = 50;

/// Renders each diagnostic, separated by blank lines, followed by `N errors, N warnings`.
///
/// At most 50 diagnostics are drawn with their source; the rest are listed one
/// line each, so a file with thousands of errors still reports in linear time.
pub fn render_all(diagnostics: &[Diagnostic], sources: &Sources) -> String {
    let mut out = String::new();
    for d in diagnostics.iter().take(MAX_RENDERED) {
        out.push_str(&d.render(sources));
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
    }
    if diagnostics.len() > MAX_RENDERED {
        out.push_str(&format!(
            "{} more, one line each:\n",
            diagnostics.len() - MAX_RENDERED
        ));
        for d in &diagnostics[MAX_RENDERED..] {
            out.push_str(&d.one_line(sources));
            out.push('\n');
        }
        out.push('\n');
    }
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics.len() - errors;
    out.push_str(&format!(
        "{errors} error{}, {warnings} warning{}\n",
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" }
    ));
    out
}
