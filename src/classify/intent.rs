//! The result of a classification: the [`Intent`] a query signals, with the keyword [`Hit`]s
//! that counted and those that were dropped.

use arcstr::ArcStr;
use serde::Serialize;

/// One keyword found in a query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// The keyword as written in the policy (`"edit*"`, `"do not"`).
    pub keyword: ArcStr,
    /// The intent the keyword signals.
    pub intent: ArcStr,
    /// The keyword's language tag.
    pub lang: ArcStr,
    /// Byte range of the match in the original query text (for a `"stem*"` keyword, the whole
    /// word it starts).
    pub span: (usize, usize),
    /// For a dropped hit, the negator that cancelled it, or the `except` word or phrase it
    /// stands in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negated_by: Option<ArcStr>,
    /// Whether the hit stands in quoted content: between quotation marks, after an `embedded`
    /// phrase, or inside an identifier (`delete_me.txt`). Always false under `quoted count`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub quoted: bool,
}

/// The classification of one query: the intent to gate tools with, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Intent {
    /// The deciding intent: the highest-priority one hit, or the fallback.
    pub name: ArcStr,
    /// Every intent that counts: `[name]` under `combine priority`; every intent hit, highest
    /// priority first, under `combine union`.
    pub intents: Vec<ArcStr>,
    /// Keyword hits that counted, in query order.
    pub hits: Vec<Hit>,
    /// Keyword hits dropped by a negator, in query order.
    pub dropped: Vec<Hit>,
    /// Whether no keyword hit counted and the fallback intent was used.
    pub fallback: bool,
    /// Whether only the start of the query was read: it was longer than
    /// [`limits::MAX_QUERY_BYTES`] (it is read up to the last white space before the cap, so no
    /// word is read cut in two), or it held more than [`limits::MAX_QUERY_OCCURRENCES`] keyword
    /// and negator occurrences (it is read up to the word where the cap was reached).
    ///
    /// [`limits::MAX_QUERY_BYTES`]: crate::limits::MAX_QUERY_BYTES
    /// [`limits::MAX_QUERY_OCCURRENCES`]: crate::limits::MAX_QUERY_OCCURRENCES
    pub truncated: bool,
    /// The user's query, normalized as keywords are, when the intent was classified from one
    /// ([`crate::Policy::classify`]); argument rules `in query` read it. `None` for an intent
    /// given by name, where `in query` cannot be evaluated (its rule fires).
    #[serde(skip)]
    pub query: Option<ArcStr>,
}

impl Intent {
    /// An intent given by name (e.g. from `--intent`), without a query.
    pub fn named(name: impl Into<ArcStr>) -> Intent {
        let name = name.into();
        Intent {
            intents: vec![name.clone()],
            name,
            hits: Vec::new(),
            dropped: Vec::new(),
            fallback: false,
            truncated: false,
            query: None,
        }
    }

    /// Several intents at once, as `combine union` yields them (highest priority first).
    ///
    /// An empty list gives an intent named `""` that no policy declares.
    pub fn union<I, S>(names: I) -> Intent
    where
        I: IntoIterator<Item = S>,
        S: Into<ArcStr>,
    {
        let intents: Vec<ArcStr> = names.into_iter().map(Into::into).collect();
        Intent {
            name: intents.first().cloned().unwrap_or_default(),
            intents,
            hits: Vec::new(),
            dropped: Vec::new(),
            fallback: false,
            truncated: false,
            query: None,
        }
    }
}
