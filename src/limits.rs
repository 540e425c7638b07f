//! The caps toolwarden puts on its inputs, so hostile or accidental input stays bounded in time
//! and memory. Each cap is enforced with a clear error (policy text) or a bounded behaviour
//! (queries, arguments); the values are part of the documented contract.

/// Largest policy file accepted, in bytes (16 MiB).
pub const MAX_POLICY_BYTES: usize = 16 * 1024 * 1024;

/// Deepest chain of `include` declarations (the root file is depth 1).
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// Most effects a policy may declare (effects are a 64-bit set).
pub const MAX_EFFECTS: usize = 64;

/// Most intents a policy may declare (intent sets are 64-bit sets).
pub const MAX_INTENTS: usize = 64;

/// Most keyword and negator entries a policy may declare, all languages together.
pub const MAX_KEYWORDS: usize = 100_000;

/// Longest keyword or negator, in bytes of its normalized text (a stem without its `*`; text
/// written with ZWNJ in its spaced spelling). A walk of the keyword automaton from one word
/// start reads at most this many bytes, so it bounds the time `classify` spends per word of the
/// query. The shipped lexicon's longest entry is 30 bytes.
pub const MAX_KEYWORD_BYTES: usize = 128;

/// Most `match` patterns a policy may declare.
pub const MAX_PATTERNS: usize = 10_000;

/// Longest query `classify` reads, in bytes (1 MiB); the rest of a longer query, from the last
/// white space before the cap, is ignored and the result says it was truncated.
pub const MAX_QUERY_BYTES: usize = 1024 * 1024;

/// Most keyword and negator occurrences `classify` records for one query. Reading stops at the
/// word where the next would pass the cap (the words from there on are ignored, and the result
/// says it was truncated), so a policy of many overlapping phrases cannot make one query cost
/// unbounded time and memory. A query of the shipped lexicon's keywords reaches it after about
/// 10,000 words.
pub const MAX_QUERY_OCCURRENCES: usize = 10_000;

/// Deepest nesting of arrays and objects accepted in call arguments: `check_call` denies deeper
/// arguments at stage `requires`, and [`crate::parse_args`] rejects them while parsing.
pub const MAX_ARGS_DEPTH: usize = 64;

/// Longest argument text [`crate::parse_args`] accepts, in bytes (1 MiB).
pub const MAX_ARGS_BYTES: usize = 1024 * 1024;

/// Most distinct files one policy may include, all levels together.
pub const MAX_INCLUDED_FILES: usize = 256;

/// Reads a regular file of at most `max` bytes.
///
/// Refuses anything that is not a regular file (a directory, a FIFO, `/dev/zero`) and stops
/// reading after `max + 1` bytes, so hostile paths cannot hang the reader or exhaust memory.
///
/// # Errors
///
/// The I/O error of opening or reading; `InvalidInput` for a file that is not regular or is
/// larger than `max` bytes.
pub fn read_file(path: &std::path::Path, max: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(std::io::Error::from(std::io::ErrorKind::IsADirectory));
    }
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::with_capacity((meta.len() as usize).min(max) + 1);
    file.take(max as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("larger than the limit of {max} bytes"),
        ));
    }
    Ok(bytes)
}
