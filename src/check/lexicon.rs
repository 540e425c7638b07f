//! The classifier's lexicon: `keywords` (words, stems, phrases), `negation`, `combine` and
//! `accents`; the keyword checks (empty, unmatchable, too long, duplicate, shadowed under
//! `combine priority`, covered by a stem), made on the spellings the keyword automaton holds.

use std::collections::HashMap;

use super::shown::{code_points, shortened, shown, shown_char};
use super::{Checker, KeywordRule, NegationRule};
use crate::diagnostic::Diagnostic;
use crate::limits;
use crate::syntax::ast::{Combine, Int, KeywordsDecl, Name, NegationDecl, Reach, Span};

impl Checker {
    /// `combine priority` or `combine union`.
    pub(super) fn resolve_combine(&mut self, combine: Combine, span: Span) {
        if self.single("combine", span) {
            self.model.combine = combine;
        }
    }

    /// `keywords intent { lang "word", "stem*", "a phrase" }`.
    pub(super) fn resolve_keywords(&mut self, k: &KeywordsDecl) {
        let Some(intent) = self.intent(&k.intent) else {
            return;
        };
        for g in &k.groups {
            for e in &g.entries {
                if self.keyword_ok(e) {
                    self.model.keywords.push(KeywordRule {
                        intent,
                        lang: g.lang.text.clone(),
                        text: e.text.clone(),
                        span: e.span,
                        spellings: Vec::new(),
                    });
                }
            }
        }
    }

    /// `negation before|after N words|clause { ... }`: plain words or phrases, a window of
    /// 1 to 16 words.
    pub(super) fn resolve_negation(&mut self, n: &NegationDecl) {
        let window = match &n.reach {
            Reach::Words(w) => w,
            Reach::Clause(_) => &Int {
                value: 0,
                span: n.reach.span(),
            },
        };
        let clause = matches!(n.reach, Reach::Clause(_));
        if !clause && (window.value == 0 || window.value > 16) {
            self.error(
                Diagnostic::error(
                    "bad-window",
                    format!(
                        "a negation window of {} words is out of range",
                        window.value
                    ),
                )
                .at(window.span, "")
                .help("use a window from 1 to 16 words, or `clause` to reach the whole clause"),
            );
            return;
        }
        for g in &n.groups {
            for e in &g.entries {
                if e.text.contains('*') || e.text.trim().is_empty() {
                    self.error(
                        Diagnostic::error(
                            "bad-negator",
                            format!("negator `{}` must be a plain word or phrase", e.text),
                        )
                        .at(e.span, "")
                        .help("write the negator without `*`, e.g. \"don't\""),
                    );
                    continue;
                }
                self.model.negations.push(NegationRule {
                    direction: n.direction,
                    window: window.value as u32,
                    clause,
                    text: e.text.clone(),
                    span: e.span,
                    spellings: Vec::new(),
                });
            }
        }
    }

    /// `accents fold` or `accents keep`.
    pub(super) fn resolve_accents(&mut self, fold: bool, span: Span) {
        if self.single("accents", span) {
            self.model.fold_accents = fold;
        }
    }

    /// Whether `e` is a well-formed keyword (or `except` entry): not empty, not only `*`, a
    /// `*` only at its end and right after a letter; else a `bad-keyword` error.
    pub(super) fn keyword_ok(&mut self, e: &Name) -> bool {
        const FORMS: &str =
            "write a word (\"delete\"), a stem (\"elimin*\") or a phrase (\"do not\")";
        let text = e.text.trim();
        let problem = if text.is_empty() {
            Some(("a keyword cannot be empty", "", FORMS))
        } else if text == "*" {
            Some(("a keyword cannot be only `*`", "", FORMS))
        } else if text.trim_end_matches('*').contains('*') {
            Some(("`*` may only end a keyword", "", FORMS))
        } else if text.ends_with("**") {
            Some(("a keyword ends with at most one `*`", "", FORMS))
        } else if text.strip_suffix('*').is_some_and(|body| {
            // Also when invisible characters stand between the space and the `*`
            // ("drop \u{200B}*"), or a joiner reads as a space (ZWNJ).
            crate::classify::normalize(&format!("{body}a"), true)
                .text
                .ends_with(" a")
        }) {
            Some((
                "a `*` after a space",
                "remove the space (or ZWNJ) before `*`",
                "`*` ends a stem right after its last letter (\"drop*\" matches `drop`, `dropped`, `dropbox`); no keyword stands for any next word",
            ))
        } else {
            None
        };
        if let Some((p, label, help)) = problem {
            self.error(
                Diagnostic::error("bad-keyword", format!("{p}: `{}`", shown(&e.text)))
                    .at(e.span, label)
                    .help(help),
            );
            return false;
        }
        true
    }
    /// The keyword and negator checks, made once every keyword is resolved; each keyword and
    /// negator keeps its spellings for the compiler.
    pub(super) fn check_keywords(&mut self) {
        let total = self.model.keywords.len() + self.model.negations.len();
        if total > limits::MAX_KEYWORDS {
            let span = self
                .model
                .keywords
                .last()
                .map_or(Span::default(), |k| k.span);
            self.error(
                Diagnostic::error(
                    "too-many",
                    format!(
                        "{total} keywords and negators; at most {} are supported",
                        limits::MAX_KEYWORDS
                    ),
                )
                .at(span, "")
                .help("use stems (\"elimin*\") instead of listing every form"),
            );
        }
        // Keywords are compared as the automaton holds them: normalized, stem or word.
        let fold = self.model.fold_accents;
        let keywords = &self.model.keywords;
        let normalized: Vec<(Vec<String>, bool)> = keywords
            .iter()
            .map(|k| match k.text.strip_suffix('*') {
                Some(body) => (crate::classify::spellings(body, fold), true),
                None => (crate::classify::spellings(&k.text, fold), false),
            })
            .collect();
        // Stems by spelling: (intent, keyword index) of each.
        let mut stems: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        for (i, (spellings, stem)) in normalized.iter().enumerate() {
            if *stem {
                for s in spellings {
                    stems.entry(s).or_default().push((keywords[i].intent, i));
                }
            }
        }
        let mut seen: HashMap<(&[String], bool, usize), usize> = HashMap::new();
        // The highest-priority keyword of each spelling (intents are declared highest first,
        // so the lowest intent index; the first declared among equals).
        let mut strongest: HashMap<(&[String], bool), usize> = HashMap::new();
        for (i, (spellings, stem)) in normalized.iter().enumerate() {
            let best = strongest.entry((spellings.as_slice(), *stem)).or_insert(i);
            if keywords[i].intent < keywords[*best].intent {
                *best = i;
            }
        }
        let priority = self.model.combine == Combine::Priority;
        let mut problems = Vec::new();
        for (i, (k, (spellings, stem))) in keywords.iter().zip(&normalized).enumerate() {
            // A keyword that cannot match is reported as such, and only as such.
            if let Some(d) = spelling_problem("keyword", &k.text, k.span, spellings, *stem) {
                problems.push(d);
                continue;
            }
            let intent = &self.model.intents[k.intent].name;
            if let Some(&j) = seen.get(&(spellings.as_slice(), *stem, k.intent)) {
                let first = &keywords[j];
                let message = if first.text.to_lowercase() == k.text.to_lowercase() {
                    format!(
                        "keyword `{}` is listed twice for intent `{intent}`",
                        shown(&k.text)
                    )
                } else {
                    format!(
                        "keyword `{}` is the same as `{}` once normalized (`{}`), listed twice for intent `{intent}`",
                        shown(&k.text),
                        shown(&first.text),
                        shown(&spellings[0])
                    )
                };
                problems.push(
                    Diagnostic::warning("duplicate-keyword", message)
                        .at(k.span, "repeats an earlier entry")
                        .related(first.span, "first listed")
                        .help("delete one of the entries"),
                );
                continue;
            }
            seen.insert((spellings.as_slice(), *stem, k.intent), i);
            // Under `combine priority` the same keyword of a higher intent always decides.
            if let Some(&j) = strongest.get(&(spellings.as_slice(), *stem)) {
                let strong = &keywords[j];
                if priority && strong.intent < k.intent {
                    let names = &self.model.intents;
                    problems.push(
                        Diagnostic::warning(
                            "shadowed-keyword",
                            format!(
                                "keyword `{}` of intent `{}` never decides: the same keyword of `{}` comes first under `combine priority`",
                                shown(&k.text),
                                names[k.intent].name,
                                names[strong.intent].name
                            ),
                        )
                        .at(k.span, "never decides")
                        .related(strong.span, "the keyword that decides")
                        .help("delete one of the entries, or use `combine union` to count every intent hit"),
                    );
                }
            }
            // A one-word keyword every spelling of which a stem of the same intent and language
            // starts adds nothing (a stem of another language is left alone: hits name the
            // language; a phrase is left alone: its hit spans more words, which a negator
            // after it may treat differently).
            let covering = |s: &String| {
                s.char_indices()
                    .skip(1)
                    .map(|(at, _)| at)
                    .chain([s.len()])
                    .find_map(|at| {
                        stems.get(&s[..at])?.iter().find_map(|&(intent, j)| {
                            (intent == k.intent && j != i && keywords[j].lang == k.lang)
                                .then_some(j)
                        })
                    })
            };
            let one_word = spellings.iter().all(|s| !s.contains(' '));
            let cover = one_word
                .then(|| {
                    spellings
                        .iter()
                        .map(covering)
                        .collect::<Option<Vec<usize>>>()
                })
                .flatten();
            if let Some(&j) = cover.as_ref().and_then(|c| c.first()) {
                let by = &keywords[j];
                problems.push(
                    Diagnostic::warning(
                        "redundant-keyword",
                        format!(
                            "keyword `{}` adds nothing: the `{}` stem `{}` of intent `{intent}` matches every word it does",
                            shown(&k.text),
                            k.lang,
                            shown(&by.text)
                        ),
                    )
                    .at(k.span, "covered by a stem")
                    .related(by.span, "the stem")
                    .help("delete this entry, or narrow the stem"),
                );
            }
        }
        drop(seen);
        drop(strongest);
        drop(stems);
        for (k, (spellings, _)) in self.model.keywords.iter_mut().zip(normalized) {
            k.spellings = spellings;
        }
        for n in &mut self.model.negations {
            n.spellings = crate::classify::spellings(&n.text, fold);
            problems.extend(spelling_problem(
                "negator",
                &n.text,
                n.span,
                &n.spellings,
                false,
            ));
        }
        self.diagnostics.extend(problems);
    }
}

/// The indefinite article before `word`: "an" before a vowel letter, else "a".
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// What is wrong with a keyword or negator `text` (at `span`) whose normalized spellings are
/// `spellings` (a `"stem*"` when `stem`): an error when it normalizes to nothing or is longer
/// than [`limits::MAX_KEYWORD_BYTES`]; a warning when no query can ever contain it on word
/// boundaries (issue 3: keywords match whole words, stems word prefixes).
pub(super) fn spelling_problem(
    what: &str,
    text: &str,
    span: Span,
    spellings: &[String],
    stem: bool,
) -> Option<Diagnostic> {
    let Some(longest) = spellings.iter().map(String::len).max() else {
        return Some(
            Diagnostic::error(
                "bad-keyword",
                format!("{what} `{text}` ({}) is empty once normalized", code_points(text)),
            )
                .at(span, "only characters that matching removes")
                .help("white space, ZWNJ, zero-width and format characters, tatweel and harakat are removed before matching; write letters or digits"),
        );
    };
    if longest > limits::MAX_KEYWORD_BYTES {
        return Some(
            Diagnostic::error(
                "too-long",
                format!(
                    "{what} `{}` is {longest} bytes once normalized; at most {} are supported",
                    shortened(text),
                    limits::MAX_KEYWORD_BYTES
                ),
            )
            .at(span, "")
            .help(
                "split it into shorter keywords, or match the start of its first word with a stem",
            ),
        );
    }
    // Text written with ZWNJ has two spellings: it can match when either can.
    let mut reasons = spellings
        .iter()
        .map(|s| crate::classify::unmatchable(s, stem));
    let reason = reasons.next()??;
    if reasons.any(|r| r.is_none()) {
        return None;
    }
    const WORDS: &str =
        "words are runs of letters and digits, joined by `'`, `.` or `:` between letters";
    let not_word = |c: char| !c.is_alphanumeric();
    let (label, help) = match reason {
        crate::classify::Unmatchable::Start(c) => {
            let body = text.trim_start_matches(not_word);
            let fix = if body.is_empty() || body == text {
                String::new()
            } else {
                format!("write \"{body}\": ")
            };
            (
                format!("no word starts with {}", shown_char(c)),
                format!(
                    "{fix}{} {what} must start with a letter or digit; {WORDS}",
                    article(what)
                ),
            )
        }
        crate::classify::Unmatchable::End(c) => {
            let body = text.trim_end_matches(not_word);
            let fix = match (body.is_empty() || body == text, what == "keyword") {
                (false, true) => format!(
                    "write the stem \"{text}*\" to match the text as written, or \"{body}\" for the word alone: "
                ),
                (false, false) => format!("write \"{body}\": "),
                (true, _) => String::new(),
            };
            (
                format!("no word ends with {}", shown_char(c)),
                format!(
                    "{fix}{} {what} must end with a letter or digit; {WORDS}",
                    article(what)
                ),
            )
        }
    };
    Some(
        Diagnostic::warning(
            "unmatchable-keyword",
            format!("{what} `{}` can never match", shown(text)),
        )
        .at(span, label)
        .help(help),
    )
}
