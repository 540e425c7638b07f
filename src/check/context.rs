//! Checks of the declarations that tell the classifier which parts of a query are not the
//! user's request: `embedded` phrases and `except` words (resolved into [`PhraseRule`]s), and
//! the `quoted` setting they work with.

use std::collections::HashMap;

use super::lexicon::spelling_problem;
use super::shown::shown;
use super::{Checker, PhraseRule};
use crate::diagnostic::Diagnostic;
use crate::limits;
use crate::syntax::ast::{PhrasesDecl, Quoted, Span};

impl Checker {
    /// Resolves an `embedded` block (`except` false) or an `except` block into the model.
    /// An `embedded` entry must be a plain word or phrase; an `except` entry may also be a
    /// `"stem*"`, under the rules of keywords.
    pub(super) fn resolve_phrases(&mut self, d: &PhrasesDecl, except: bool) {
        for g in &d.groups {
            for e in &g.entries {
                let ok = if except {
                    self.keyword_ok(e)
                } else if e.text.contains('*') || e.text.trim().is_empty() {
                    self.error(
                        Diagnostic::error(
                            "bad-embedded",
                            format!(
                                "embedded phrase `{}` must be a plain word or phrase",
                                shown(&e.text)
                            ),
                        )
                        .at(e.span, "")
                        .help("write the phrase without `*`, e.g. \"translate this\""),
                    );
                    false
                } else {
                    true
                };
                if !ok {
                    continue;
                }
                let rule = PhraseRule {
                    text: e.text.clone(),
                    clause: d.clause,
                    span: e.span,
                    spellings: Vec::new(),
                };
                if except {
                    self.model.exceptions.push(rule);
                } else {
                    self.model.embedded.push(rule);
                }
            }
        }
    }

    /// Normalizes the `embedded` and `except` entries and reports their misuse: an entry no
    /// query can contain, more entries than the classifier holds, `embedded` phrases under
    /// `quoted count` (where they change nothing), and an `except` entry that is itself a
    /// keyword (which then never counts).
    pub(super) fn check_context(&mut self) {
        let fold = self.model.fold_accents;
        let mut problems = Vec::new();
        let total = self.model.keywords.len()
            + self.model.negations.len()
            + self.model.embedded.len()
            + self.model.exceptions.len();
        // Keywords and negators alone past the limit are reported by `check_keywords`.
        let own = self.model.keywords.len() + self.model.negations.len();
        if total > limits::MAX_KEYWORDS && own <= limits::MAX_KEYWORDS {
            let span = self
                .model
                .exceptions
                .last()
                .or(self.model.embedded.last())
                .map_or(Span::default(), |k| k.span);
            problems.push(
                Diagnostic::error(
                    "too-many",
                    format!(
                        "{total} keywords, negators, embedded phrases and exceptions; at most {} are supported",
                        limits::MAX_KEYWORDS
                    ),
                )
                .at(span, "")
                .help("use stems (\"apagad*\") instead of listing every form"),
            );
        }
        for (what, rules) in [
            ("embedded phrase", &mut self.model.embedded),
            ("exception", &mut self.model.exceptions),
        ] {
            for r in rules.iter_mut() {
                let stem = r.is_stem();
                let body = r.text.strip_suffix('*').unwrap_or(&r.text);
                r.spellings = crate::classify::spellings(body, fold);
                problems.extend(spelling_problem(what, &r.text, r.span, &r.spellings, stem));
            }
        }
        if self.model.quoted == Quoted::Count {
            if let Some(first) = self.model.embedded.first() {
                problems.push(
                    Diagnostic::warning(
                        "embedded-counts",
                        "`embedded` phrases change nothing under `quoted count`",
                    )
                    .at(first.span, "the text after this phrase still counts")
                    .help("declare `quoted data` (or `quoted ignore`) to read the text after these phrases as data"),
                );
            }
        }
        let keywords: HashMap<(&[String], bool), usize> = self
            .model
            .keywords
            .iter()
            .enumerate()
            .map(|(i, k)| ((k.spellings.as_slice(), k.text.ends_with('*')), i))
            .collect();
        // A whole-clause exception leaves the keyword counting everywhere else.
        for r in self.model.exceptions.iter().filter(|r| !r.clause) {
            if let Some(&k) = keywords.get(&(r.spellings.as_slice(), r.is_stem())) {
                let k = &self.model.keywords[k];
                problems.push(
                    Diagnostic::warning(
                        "exception-is-keyword",
                        format!(
                            "exception `{}` is the keyword `{}` of intent `{}`, which then never counts",
                            shown(&r.text),
                            shown(&k.text),
                            self.model.intents[k.intent].name
                        ),
                    )
                    .at(r.span, "covers every hit of the keyword")
                    .related(k.span, "the keyword")
                    .help("delete the keyword, or list the longer word or phrase in which it has its other reading (\"what change\")"),
                );
            }
        }
        self.diagnostics.extend(problems);
    }

    /// `quoted count`, `quoted data` or `quoted ignore`.
    pub(super) fn resolve_quoted(&mut self, quoted: Quoted, span: Span) {
        if self.single("quoted", span) {
            self.model.quoted = quoted;
        }
    }
}
