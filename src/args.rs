//! Strict parsing of a tool call's JSON arguments, for callers that receive them as text (the
//! `guard` command, bindings).
//!
//! Plain `serde_json::from_str` keeps the *last* of two equal keys, so `{"confirmed": false,
//! "confirmed": true}` would read as confirmed while a log or a human reviewer sees `false`
//! first. Two readers disagreeing about a security-relevant field is how guards get bypassed,
//! so [`parse_args`] rejects duplicated keys at any depth. It also caps the text at
//! [`limits::MAX_ARGS_BYTES`] and the nesting at [`limits::MAX_ARGS_DEPTH`] (checked while
//! parsing, so hostile input never builds a deep tree), and never panics.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::limits;

/// Why argument text was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// The text is longer than [`limits::MAX_ARGS_BYTES`].
    #[error("the arguments are {len} bytes, over the limit of {max} bytes")]
    TooLarge {
        /// The text's length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not JSON, a duplicated key, or nesting deeper than [`limits::MAX_ARGS_DEPTH`]; the
    /// message says which, with line and column.
    #[error("the arguments are not acceptable JSON: {0}")]
    Invalid(String),
}

/// Parses call arguments strictly: valid JSON, at most [`limits::MAX_ARGS_BYTES`] bytes, no
/// duplicated key in any object, nesting at most [`limits::MAX_ARGS_DEPTH`] deep (a scalar is
/// depth 0, `{}` depth 1). Any JSON value is returned; whether it must be an object is the
/// guard's business ([`crate::Policy::check_call`] denies anything else).
///
/// # Errors
///
/// [`ArgsError`] saying what is wrong and where.
pub fn parse_args(text: &str) -> Result<Value, ArgsError> {
    parse_strict(
        text.as_bytes(),
        limits::MAX_ARGS_BYTES,
        limits::MAX_ARGS_DEPTH,
    )
    .map_err(|e| match e {
        StrictError::TooLarge { len, max } => ArgsError::TooLarge { len, max },
        StrictError::Syntax(m) | StrictError::Refused(m) => ArgsError::Invalid(m),
    })
}

/// Why [`parse_strict`] rejected a text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StrictError {
    /// Longer than the byte cap.
    TooLarge { len: usize, max: usize },
    /// Not JSON at all (or not UTF-8, or cut short), with line and column.
    Syntax(String),
    /// JSON, but refused: a duplicated key or nesting over the depth cap, with line and column.
    Refused(String),
}

/// The strict parse behind [`parse_args`] with the caller's caps: at most `max_bytes` bytes, no
/// duplicated key in any object, nesting at most `max_depth` deep (a scalar is depth 0). Used
/// for whole MCP messages too (`crate::mcp::message`), so one parser decides what every
/// reader of a message sees.
pub(crate) fn parse_strict(
    text: &[u8],
    max_bytes: usize,
    max_depth: usize,
) -> Result<Value, StrictError> {
    if text.len() > max_bytes {
        return Err(StrictError::TooLarge {
            len: text.len(),
            max: max_bytes,
        });
    }
    let classify = |e: serde_json::Error| match e.classify() {
        serde_json::error::Category::Data => StrictError::Refused(e.to_string()),
        _ => StrictError::Syntax(e.to_string()),
    };
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = Strict {
        depth: 0,
        max: max_depth,
    }
    .deserialize(&mut de)
    .map_err(classify)?;
    de.end().map_err(classify)?;
    Ok(value)
}

struct Strict {
    depth: usize,
    max: usize,
}

impl Strict {
    fn deeper<E: de::Error>(&self) -> Result<Strict, E> {
        if self.depth + 1 > self.max {
            return Err(E::custom(format!("nested deeper than {} levels", self.max)));
        }
        Ok(Strict {
            depth: self.depth + 1,
            max: self.max,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict {
            depth: inner.depth,
            max: inner.max,
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let v = map.next_value_seed(Strict {
                depth: inner.depth,
                max: inner.max,
            })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}
