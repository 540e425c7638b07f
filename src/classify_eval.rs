//! Evaluation of a policy's intent classifier against labeled queries (issue 3, the
//! `toolwarden classify --eval` mode).
//!
//! Input is JSON Lines: one object a line with `"text"` (the query) and `"intent"` (the expected
//! intent, a name the policy declares), optionally `"lang"` (a language tag, used only to group
//! the figures; rows without one are grouped under `"-"`) and `"confidence"` (`"clear"`, the
//! default, or `"ambiguous"`). Other fields are ignored; blank lines are skipped.
//!
//! A row is correct when the deciding intent ([`Intent::name`]) equals the expected intent; under
//! `combine union` that is the highest-priority intent hit. Clear and ambiguous rows are counted
//! apart: the accuracy a CI gate checks is the accuracy on clear rows.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::classify::{Hit, Intent};
use crate::Policy;

/// One labeled query read from a JSON Lines file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LabeledQuery {
    /// 1-based line number in the input.
    pub line: usize,
    /// The query text.
    pub text: String,
    /// The expected intent.
    pub intent: String,
    /// The language tag (`"-"` when the row has none).
    pub lang: String,
    /// Whether the row's label is marked `"confidence": "ambiguous"`.
    pub ambiguous: bool,
}

#[derive(Deserialize)]
struct RawRow {
    text: String,
    intent: String,
    #[serde(default)]
    lang: Option<String>,
    #[serde(default)]
    confidence: Option<String>,
}

/// An input line that could not be read as a labeled query.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct EvalInputError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// Parses JSON Lines bytes into labeled queries.
///
/// Errors (with the 1-based line number): a line that is not valid UTF-8, not a JSON object with
/// string fields `text` and `intent`, or with a `confidence` other than `"clear"` or
/// `"ambiguous"`.
pub fn parse_labeled(bytes: &[u8]) -> Result<Vec<LabeledQuery>, EvalInputError> {
    let mut rows = Vec::new();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let text = std::str::from_utf8(raw).map_err(|e| EvalInputError {
            line,
            message: format!("not valid UTF-8 (byte {})", e.valid_up_to() + 1),
        })?;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let row: RawRow = serde_json::from_str(text).map_err(|e| EvalInputError {
            line,
            message: format!(
                "expected a JSON object with string fields \"text\" and \"intent\": {e}"
            ),
        })?;
        let ambiguous = match row.confidence.as_deref() {
            None | Some("clear") => false,
            Some("ambiguous") => true,
            Some(other) => {
                return Err(EvalInputError {
                    line,
                    message: format!(
                        "\"confidence\" is `{other}`; expected \"clear\" or \"ambiguous\""
                    ),
                })
            }
        };
        rows.push(LabeledQuery {
            line,
            text: row.text,
            intent: row.intent,
            lang: row
                .lang
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| "-".to_string()),
            ambiguous,
        });
    }
    Ok(rows)
}

/// Correct answers out of rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    /// Rows counted.
    pub rows: usize,
    /// Rows classified as expected.
    pub correct: usize,
    /// `correct / rows` as a fraction in 0..=1, `None` when there are no rows.
    pub accuracy: Option<f64>,
}

impl Tally {
    fn add(&mut self, ok: bool) {
        self.rows += 1;
        self.correct += usize::from(ok);
        self.accuracy = Some(self.correct as f64 / self.rows as f64);
    }
}

/// Clear, ambiguous and all rows of one group (overall or one language).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Tallies {
    /// Rows not marked ambiguous.
    pub clear: Tally,
    /// Rows marked `"confidence": "ambiguous"`.
    pub ambiguous: Tally,
    /// All rows.
    pub all: Tally,
}

/// Counts of (expected, got) pairs; rows are the expected intent, columns the intent got, both in
/// the order of [`Confusion::labels`] (the policy's intents, highest priority first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// The intent names, in row and column order.
    pub labels: Vec<String>,
    /// `counts[expected][got]`.
    pub counts: Vec<Vec<usize>>,
}

/// A row the classifier got wrong.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Miss {
    /// 1-based line number in the input.
    pub line: usize,
    /// The language tag (`"-"` when none).
    pub lang: String,
    /// Whether the row is marked ambiguous.
    pub ambiguous: bool,
    /// The query text.
    pub text: String,
    /// The expected intent.
    pub expected: String,
    /// The intent the classifier decided.
    pub got: String,
    /// Whether the classifier used the fallback (no keyword hit).
    pub fallback: bool,
    /// The keyword hits that counted.
    pub hits: Vec<Hit>,
    /// The keyword hits dropped by a negator.
    pub dropped: Vec<Hit>,
}

/// The result of evaluating a classifier on labeled queries.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    /// Figures over every row.
    pub overall: Tallies,
    /// Figures per language tag, sorted by tag.
    pub languages: BTreeMap<String, Tallies>,
    /// Confusion matrix of the clear rows.
    pub confusion_clear: Confusion,
    /// Confusion matrix of the ambiguous rows.
    pub confusion_ambiguous: Confusion,
    /// The misclassified rows, in input order.
    pub misclassified: Vec<Miss>,
}

/// Classifies every row with `policy` and tallies the results.
///
/// Errors: a row whose expected intent the policy does not declare (line number and name).
pub fn evaluate(policy: &Policy, rows: &[LabeledQuery]) -> Result<EvalReport, EvalInputError> {
    let labels: Vec<String> = policy.intents().map(str::to_string).collect();
    let index = |name: &str| labels.iter().position(|l| l == name);
    let n = labels.len();
    let mut report = EvalReport {
        overall: Tallies::default(),
        languages: BTreeMap::new(),
        confusion_clear: Confusion {
            labels: labels.clone(),
            counts: vec![vec![0; n]; n],
        },
        confusion_ambiguous: Confusion {
            labels: labels.clone(),
            counts: vec![vec![0; n]; n],
        },
        misclassified: Vec::new(),
    };
    for row in rows {
        let Some(expected) = index(&row.intent) else {
            return Err(EvalInputError {
                line: row.line,
                message: format!(
                    "expected intent `{}` is not declared by the policy (it declares: {})",
                    row.intent,
                    labels.join(", ")
                ),
            });
        };
        let intent: Intent = policy.classify(&row.text);
        let ok = intent.name == row.intent;
        let lang = report.languages.entry(row.lang.clone()).or_default();
        for t in [&mut report.overall, lang] {
            t.all.add(ok);
            if row.ambiguous {
                t.ambiguous.add(ok);
            } else {
                t.clear.add(ok);
            }
        }
        if let Some(got) = index(&intent.name) {
            let m = if row.ambiguous {
                &mut report.confusion_ambiguous
            } else {
                &mut report.confusion_clear
            };
            m.counts[expected][got] += 1;
        }
        if !ok {
            report.misclassified.push(Miss {
                line: row.line,
                lang: row.lang.clone(),
                ambiguous: row.ambiguous,
                text: row.text.clone(),
                expected: row.intent.clone(),
                got: intent.name.to_string(),
                fallback: intent.fallback,
                hits: intent.hits,
                dropped: intent.dropped,
            });
        }
    }
    Ok(report)
}

/// Parses a `--min-accuracy` value: a fraction in 0..=1 (`0.9`) or a percentage with a `%` sign
/// (`90%`, `92.5%`). Returns the fraction.
///
/// Errors: not a number, outside the range, or a bare number above 1 (ambiguous: write `90%` or
/// `0.90`).
pub fn parse_min_accuracy(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = num.parse().map_err(|_| {
        format!("`{text}` is not a number (write a fraction like 0.9 or a percentage like 90%)")
    })?;
    if !v.is_finite() {
        return Err(format!("`{text}` is not a finite number"));
    }
    if percent {
        if !(0.0..=100.0).contains(&v) {
            return Err(format!("`{text}` is not a percentage between 0% and 100%"));
        }
        Ok(v / 100.0)
    } else {
        if !(0.0..=1.0).contains(&v) {
            return Err(format!(
                "`{text}` is not a fraction between 0 and 1 (for a percentage write `{v}%`)"
            ));
        }
        Ok(v)
    }
}
