//! What a classifier is built from: the [`Lexicon`] of one policy (its intents in priority
//! order, keywords, negators, `embedded` phrases, `except` entries, and the settings that say how
//! hits combine and how quoted content counts), each entry with the normalized spellings the
//! automaton holds for it ([`spellings`](super::spellings)). The compiler fills it from the
//! checked policy; the classifier knows nothing of the syntax or the checker.

/// How several intents hit by one query combine (`combine priority|union`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Combine {
    /// The highest-priority intent with a hit wins.
    #[default]
    Priority,
    /// Every intent hit counts.
    Union,
}

/// Which side of a keyword a negator is looked for on (`negation before|after`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// The negator precedes the keyword ("don't delete").
    Before,
    /// The negator follows the keyword (Persian "حذف نکن").
    After,
}

/// How keyword hits inside quoted content count (`quoted count|data|ignore`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Quoted {
    /// Like any other hit (the default).
    #[default]
    Count,
    /// Only when no hit outside quoted content counts.
    Data,
    /// Never.
    Ignore,
}

/// One keyword of an intent.
#[derive(Clone, Debug)]
pub(crate) struct Keyword {
    /// Index of its intent in [`Lexicon::intents`].
    pub intent: usize,
    /// Its language tag.
    pub lang: String,
    /// The keyword as written (a `"stem*"` ends with `*`).
    pub text: String,
    /// The texts the automaton holds for it (without a stem's `*`).
    pub spellings: Vec<String>,
}

/// One negator, with the rule of its `negation` block.
#[derive(Clone, Debug)]
pub(crate) struct Negator {
    /// The side of a keyword it is looked for on.
    pub direction: Direction,
    /// The window in words; 0 for a negator whose reach is its clause (`clause` is set).
    pub window: u32,
    /// `negation before|after clause`: the negator reaches to the end (start) of its clause.
    pub clause: bool,
    /// The negator as written.
    pub text: String,
    /// As [`Keyword::spellings`].
    pub spellings: Vec<String>,
}

/// One `embedded` phrase or `except` word or phrase.
#[derive(Clone, Debug)]
pub(crate) struct Phrase {
    /// The text as written (an `except` stem ends with `*`).
    pub text: String,
    /// `except clause`: the entry drops a hit only where the entry is its whole clause.
    pub clause: bool,
    /// As [`Keyword::spellings`].
    pub spellings: Vec<String>,
}

/// Everything a classifier is built from, in declaration order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Lexicon {
    /// Intent names, highest priority first.
    pub intents: Vec<String>,
    /// Index in `intents` of the intent a query without hits gets.
    pub fallback: Option<usize>,
    /// How several intents hit by one query combine.
    pub combine: Combine,
    /// Every keyword of every intent.
    pub keywords: Vec<Keyword>,
    /// Every negator of every `negation` block.
    pub negators: Vec<Negator>,
    /// How hits inside quoted content count.
    pub quoted: Quoted,
    /// `embedded` phrases: the text after one is quoted content.
    pub embedded: Vec<Phrase>,
    /// `except` words and phrases: a keyword hit inside one does not count.
    pub exceptions: Vec<Phrase>,
    /// Whether accents are folded (`accents keep` turns it off); the spellings were made so.
    pub fold_accents: bool,
}
