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

/// Most `match` patterns a policy may declare.
pub const MAX_PATTERNS: usize = 10_000;

/// Longest query `classify` reads, in bytes (1 MiB); the rest of a longer query is ignored and
/// the result says it was truncated.
pub const MAX_QUERY_BYTES: usize = 1024 * 1024;

/// Deepest nesting of arrays and objects accepted in call arguments: `check_call` denies deeper
/// arguments at stage `requires`, and [`crate::parse_args`] rejects them while parsing.
pub const MAX_ARGS_DEPTH: usize = 64;

/// Longest argument text [`crate::parse_args`] accepts, in bytes (1 MiB).
pub const MAX_ARGS_BYTES: usize = 1024 * 1024;
