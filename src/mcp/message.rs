//! JSON-RPC 2.0 messages as the MCP stdio transport carries them: one strict parse per message,
//! request ids compared by JSON value, and the error responses the proxy sends itself.
//!
//! A message is parsed once, with the rules of [`crate::parse_args`] (no duplicated key in any
//! object, nesting and size capped), and whatever is forwarded afterwards is that parsed value
//! serialized again, so the policy and the peer can never read two different messages.

use std::hash::{Hash, Hasher};

use serde_json::{json, Value};

use crate::args::{parse_strict_capped, StrictError};
use crate::limits;

/// Longest message accepted in either direction, in bytes (64 MiB). A longer line is refused
/// (from the client) or dropped (from the server) without being buffered whole.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Deepest nesting accepted in a message: the argument cap ([`limits::MAX_ARGS_DEPTH`]) plus
/// the envelope of a call inside a batch (`[{"params": {"arguments": …}}]`).
pub const MAX_MESSAGE_DEPTH: usize = limits::MAX_ARGS_DEPTH + 4;

/// Most elements a JSON-RPC batch may have; a longer batch is refused whole with one
/// [`INVALID_REQUEST`] (it is not read past this many elements).
pub const MAX_BATCH: usize = 1000;

/// JSON-RPC "Parse error": the text is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC "Invalid Request": JSON, but not an acceptable message (a duplicated key, too deep,
/// too large, not an object, an id that is neither a string, a number nor null).
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC "Invalid params"; MCP also answers an unknown tool with it.
pub const INVALID_PARAMS: i64 = -32602;

/// The prefix of the ids of the proxy's own requests to the server. A client request with a
/// string id of this prefix is refused, so the proxy's ids never collide with the client's.
pub const OWN_ID_PREFIX: &str = "toolwarden-";

/// Why a message was refused before it was read as JSON-RPC.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Not JSON (or not UTF-8): answered with [`PARSE_ERROR`].
    #[error("Parse error: {0}")]
    Syntax(String),
    /// JSON that is refused: a duplicated key, nesting over [`MAX_MESSAGE_DEPTH`], more than
    /// [`MAX_MESSAGE_BYTES`]. Answered with [`INVALID_REQUEST`].
    #[error("Invalid Request: {0}")]
    Refused(String),
}

impl MessageError {
    /// The JSON-RPC error code for this error.
    pub fn code(&self) -> i64 {
        match self {
            MessageError::Syntax(_) => PARSE_ERROR,
            MessageError::Refused(_) => INVALID_REQUEST,
        }
    }
}

/// Parses one message (a line of the stdio transport, without its newline) strictly.
///
/// # Errors
///
/// [`MessageError::Syntax`] for text that is not JSON; [`MessageError::Refused`] for a
/// duplicated key anywhere, nesting deeper than [`MAX_MESSAGE_DEPTH`], a text longer than
/// [`MAX_MESSAGE_BYTES`], a batch of more than [`MAX_BATCH`] elements, or a number that
/// cannot be represented exactly (an integer outside `i64`/`u64`, a float that overflows, or
/// a nonzero float that underflows to 0).
pub fn parse_message(text: &[u8]) -> Result<Value, MessageError> {
    parse_strict_capped(text, MAX_MESSAGE_BYTES, MAX_MESSAGE_DEPTH, MAX_BATCH).map_err(
        |e| match e {
            StrictError::TooLarge { len, max } => MessageError::Refused(format!(
                "the message is {len} bytes, over the limit of {max} bytes"
            )),
            StrictError::Syntax(m) => MessageError::Syntax(m),
            StrictError::Refused(m) => MessageError::Refused(m),
        },
    )
}

/// A JSON-RPC id as a hashable key compared by JSON value: numbers numerically (`5`, `5.0`
/// and `5e0` are one id, `-0` and `0` too), strings as strings. Ids that are neither (objects,
/// arrays, booleans, `null`) have no key.
#[derive(Clone, Debug)]
pub enum IdKey {
    /// A numeric id, as an `f64` with `-0` read as `0`.
    Number(f64),
    /// A string id.
    String(String),
}

impl IdKey {
    /// The key of `id`, or `None` for `null` and for values JSON-RPC does not allow as ids.
    pub fn of(id: &Value) -> Option<IdKey> {
        match id {
            Value::Number(n) => n
                .as_f64()
                .map(|f| IdKey::Number(if f == 0.0 { 0.0 } else { f })),
            Value::String(s) => Some(IdKey::String(s.clone())),
            _ => None,
        }
    }
}

impl PartialEq for IdKey {
    fn eq(&self, other: &IdKey) -> bool {
        match (self, other) {
            (IdKey::Number(a), IdKey::Number(b)) => a.to_bits() == b.to_bits(),
            (IdKey::String(a), IdKey::String(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for IdKey {}

impl Hash for IdKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            IdKey::Number(f) => {
                0u8.hash(state);
                f.to_bits().hash(state);
            }
            IdKey::String(s) => {
                1u8.hash(state);
                s.hash(state);
            }
        }
    }
}

/// The id to answer or forward for a client's `id`: the value as parsed, except that a
/// negative zero (`-0`, `-0.0`) is answered as the integer `0`, the same id by value, so an
/// id is never echoed as a float the client did not write as one.
pub fn answer_id(id: &Value) -> Value {
    match id.as_f64() {
        Some(f) if f == 0.0 && f.is_sign_negative() => Value::from(0),
        _ => id.clone(),
    }
}

/// `text` with every character that could forge or hide part of a log line escaped as
/// `\u{…}`: every character [`crate::invisible::is_invisible`] names (control characters,
/// bidirectional controls, zero-width and other format characters, tags, line and paragraph
/// separators). A backslash stays as it is. Used for every client- or server-supplied string
/// in the proxy's and the gateway's log lines and in the gateway's question to the user.
pub fn escape_log(text: &str) -> String {
    use crate::invisible::is_invisible;
    if !text.chars().any(is_invisible) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_invisible(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `id` is an id JSON-RPC allows: a string, a number or `null`.
pub fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_) | Value::Null)
}

/// Whether `id` is a string id reserved for the proxy's own requests ([`OWN_ID_PREFIX`]).
pub fn is_own_id(id: &Value) -> bool {
    id.as_str().is_some_and(|s| s.starts_with(OWN_ID_PREFIX))
}

/// A JSON-RPC error response: `{"jsonrpc":"2.0","id":ID,"error":{"code","message"[,"data"]}}`.
pub fn rpc_error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(d) = data {
        error["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A `tools/call` result the client shows the model: `isError: true`, one text content and the
/// structured verdict.
pub fn tool_error(id: &Value, text: &str, structured: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": true,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_compare_by_json_value() {
        let key = |t: &str| IdKey::of(&serde_json::from_str(t).unwrap());
        assert_eq!(key("5"), key("5.0"));
        assert_eq!(key("5"), key("5e0"));
        assert_eq!(key("-0"), key("0"));
        assert_eq!(key("-0.0"), key("0"));
        assert_ne!(key("5"), key("\"5\""));
        assert_ne!(key("5"), key("-5"));
        assert_eq!(key("null"), None);
        assert_eq!(key("[1]"), None);
    }

    #[test]
    fn duplicate_keys_anywhere_are_refused_and_syntax_errors_are_parse_errors() {
        let e =
            parse_message(br#"{"method":"a","params":{"x":{"confirmed":false,"confirmed":true}}}"#)
                .unwrap_err();
        assert_eq!(e.code(), INVALID_REQUEST);
        assert!(e.to_string().contains("duplicate key `confirmed`"), "{e}");
        assert_eq!(parse_message(b"{not json").unwrap_err().code(), PARSE_ERROR);
        assert_eq!(parse_message(b"\xff").unwrap_err().code(), PARSE_ERROR);
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_MESSAGE_DEPTH + 1),
            "]".repeat(MAX_MESSAGE_DEPTH + 1)
        );
        assert_eq!(
            parse_message(deep.as_bytes()).unwrap_err().code(),
            INVALID_REQUEST
        );
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_MESSAGE_DEPTH),
            "]".repeat(MAX_MESSAGE_DEPTH)
        );
        assert!(parse_message(ok.as_bytes()).is_ok());
    }
}
