//! Query intent classification: text normalization and one keyword automaton.
//!
//! A query is normalized exactly like the policy's keywords ([`normalize()`]) and split into
//! Unicode words (UAX #29 word boundaries, as `unicode-segmentation` computes them; a fast path
//! gives the same boundaries for ASCII and common Arabic-script text). One automaton over every
//! keyword and negator of every intent (a trie laid out as a double array over byte classes,
//! trie.rs) is walked from each word start, so an occurrence always
//! starts on a word boundary; `"word"` (and a phrase) must also end on one, `"stem*"` may end
//! inside a word. ZWNJ matches a space or nothing: a walk that reaches a space standing for ZWNJ
//! is repeated with every such space read as nothing (each walk reads them all one way). A
//! keyword hit with a negator within the negation window (in words, before or after) and in the
//! same clause (no `.` `!` `?` `;` `,` `:`, parenthesis or dash between) is dropped and reported in [`Intent::dropped`].
//! A negator declared `clause` reaches its whole clause on its side; a `before` negator that ends
//! its clause reaches over an aside (clauses without a keyword) into the next clause of its
//! sentence; a keyword that is also a negator occurrence that dropped another hit is dropped too.
//! A hit inside an occurrence of an `except` entry is dropped. Under `quoted data` a hit inside
//! quoted content (paired quotation marks, the text after an `embedded` phrase, identifiers)
//! counts only when no other hit counts; under `quoted ignore` never. Under `combine priority` the highest-priority intent
//! with a surviving hit wins; under `combine union` every intent with a hit counts. A query
//! without hits gets the `fallback` intent. Time is linear in the query length: at most two
//! walks per word, each bounded by the longest keyword ([`limits::MAX_KEYWORD_BYTES`]), at
//! most [`limits::MAX_QUERY_OCCURRENCES`] occurrences recorded, one pass over the clauses for
//! the negators that reach past their window, one over the text for quoted content, and a
//! binary search per hit for the `except` entries and the negators that dropped a hit. A call allocates only its result (the
//! working buffers are kept per thread).
//!
//! Rules from seed 001 (query mutation classes, priority Destructive > Execute > Export > Write >
//! Read, an empty or unclear query offers read only).
//!
//! [`limits::MAX_KEYWORD_BYTES`]: crate::limits::MAX_KEYWORD_BYTES
//! [`limits::MAX_QUERY_OCCURRENCES`]: crate::limits::MAX_QUERY_OCCURRENCES
//!
//! The parts, one file each: `Lexicon` (lexicon.rs) is what a classifier is built from, filled
//! by the compiler from the checked policy; normalize.rs normalizes text; words.rs finds its
//! Unicode words; spelling.rs turns a keyword into the texts the automaton holds (which the
//! checker also uses); trie.rs is the automaton; automaton.rs holds the needles and walks
//! them; negation.rs numbers clauses and finds the negator that cancels a hit; quoted.rs finds
//! quoted content;
//! classifier.rs builds the `Classifier` and runs one classification; intent.rs is its result
//! ([`Intent`], [`Hit`]); names.rs interns the names a result carries.

mod automaton;
mod classifier;
mod intent;
mod lexicon;
mod names;
mod negation;
mod normalize;
mod quoted;
mod spelling;
mod trie;
mod words;

pub(crate) use classifier::Classifier;
pub use intent::{Hit, Intent};
pub(crate) use lexicon::{Combine, Direction, Keyword, Lexicon, Negator, Phrase, Quoted};
pub use normalize::{normalize, Normalized};
pub(crate) use spelling::{spellings, unmatchable, Unmatchable};
