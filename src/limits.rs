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

/// Deepest nesting of parentheses in a policy's text outside strings and comments: the
/// conditions of argument rules nest one grammar level per parenthesis, so deeper text is
/// refused with its position before it is parsed.
pub const MAX_CONDITION_DEPTH: usize = 32;

/// Longest regular expression or glob an argument rule may hold, in bytes of its text.
pub const MAX_PATTERN_BYTES: usize = 16 * 1024;

/// Largest a rule's regular expression (or compiled glob) may grow when compiled, in bytes
/// (the `regex` crate's size limit; its lazy DFA gets the same budget).
pub const MAX_PATTERN_COMPILED_BYTES: usize = 1024 * 1024;

/// Most array elements one argument reference with `[*]` looks at; a longer array makes the
/// condition unevaluable, so its rule fires.
pub const MAX_RULE_ELEMENTS: usize = 10_000;

/// Most JSON values `any` looks at in one call's arguments (strings and containers together);
/// more makes the condition unevaluable, so its rule fires.
pub const MAX_RULE_VALUES: usize = 100_000;

/// Longest argument text [`crate::parse_args`] accepts, in bytes (1 MiB).
pub const MAX_ARGS_BYTES: usize = 1024 * 1024;

/// Most roles a policy may declare. Each role is compiled with the set of the roles it
/// includes, so the tables grow with the square of the count (at most 75 MiB here).
pub const MAX_ROLES: usize = 25_000;

/// Most permissions a policy may declare (named in `permission` or `requires`). Each is
/// compiled with the set of the permissions it implies, as for [`MAX_ROLES`].
pub const MAX_PERMISSIONS: usize = 25_000;

/// Deepest nesting accepted in YAML text (`tool_policies.yaml`, `tools.yaml`, test files):
/// levels of block indentation and of `[` / `{` together. Deeper text is refused, with its
/// position, before the YAML parser reads it.
pub const MAX_YAML_DEPTH: usize = 64;

/// Most distinct files one policy may include, all levels together.
pub const MAX_INCLUDED_FILES: usize = 256;

/// Largest data file (queries, labeled rows, tool-name lists) accepted, in bytes (64 MiB).
pub const MAX_DATA_BYTES: usize = 64 * 1024 * 1024;

/// Reads a regular file of at most `max` bytes: the one place toolwarden reads a file the user
/// names (policies, includes, YAML, test files, state files, data files).
///
/// Refuses anything that is not a regular file (a directory, a FIFO, a socket, `/dev/zero`)
/// without blocking: the type is checked before opening (following symlinks), the file is
/// opened non-blocking (a FIFO with no writer cannot hold the open), and the type is checked
/// again on the open file, so a path swapped between the two checks is refused too. Reading
/// stops after `max + 1` bytes, so hostile paths cannot hang the reader or exhaust memory.
///
/// # Errors
///
/// The I/O error of opening or reading; `IsADirectory` for a directory; `InvalidInput` for any
/// other file that is not regular (the message names its type: `not a regular file (a FIFO)`)
/// or for a file larger than `max` bytes (its inner error is a [`TooLarge`]).
pub fn read_file(path: &std::path::Path, max: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    regular(&std::fs::metadata(path)?)?;
    let file = open_nonblocking(path)?;
    let meta = file.metadata()?;
    regular(&meta)?;
    let mut bytes = Vec::with_capacity((meta.len() as usize).min(max) + 1);
    file.take(max as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            TooLarge { max },
        ));
    }
    Ok(bytes)
}

/// The error inside the [`std::io::Error`] (kind `InvalidInput`) that [`read_file`] and
/// [`read_text`] return for a file larger than their `max` bytes; find it with
/// `error.get_ref().and_then(|e| e.downcast_ref::<TooLarge>())`. Its message is
/// `larger than the limit of {max} bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// The limit the file exceeded, in bytes.
    pub max: usize,
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "larger than the limit of {} bytes", self.max)
    }
}

impl std::error::Error for TooLarge {}

/// Reads a regular file of at most `max` bytes as UTF-8 text, as [`read_file`] does.
///
/// # Errors
///
/// Those of [`read_file`], and `InvalidData` (`not valid UTF-8 (byte N)`) for text that is
/// not UTF-8.
pub fn read_text(path: &std::path::Path, max: usize) -> std::io::Result<String> {
    String::from_utf8(read_file(path, max)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not valid UTF-8 (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// `Ok` for a regular file; the error [`read_file`] gives for anything else.
fn regular(meta: &std::fs::Metadata) -> std::io::Result<()> {
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    if kind.is_dir() {
        return Err(std::io::Error::from(std::io::ErrorKind::IsADirectory));
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("not a regular file ({})", file_kind(&kind)),
    ))
}

/// What a file that is neither regular nor a directory is, for an error message.
#[cfg(unix)]
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

/// What a file that is neither regular nor a directory is, for an error message.
#[cfg(not(unix))]
fn file_kind(_kind: &std::fs::FileType) -> &'static str {
    "a special file"
}

/// Opens `path` for reading without blocking on a FIFO or a device, and without making a
/// terminal the controlling one.
#[cfg(unix)]
fn open_nonblocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// Opens `path` for reading.
#[cfg(not(unix))]
fn open_nonblocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}
