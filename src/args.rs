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
/// depth 0, `{}` depth 1), and every number representable exactly (an integer within the
/// `i64`/`u64` ranges, a float that neither overflows nor underflows a nonzero literal to 0:
/// otherwise the value read would differ from the text a reviewer sees). Any JSON value is returned; whether it must be an object is the
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
/// duplicated key in any object, nesting at most `max_depth` deep (a scalar is depth 0), no
/// number that cannot be represented exactly. Used
/// for whole MCP messages too (the MCP layer's message parsing), so one parser decides what every
/// reader of a message sees.
pub(crate) fn parse_strict(
    text: &[u8],
    max_bytes: usize,
    max_depth: usize,
) -> Result<Value, StrictError> {
    parse_strict_capped(text, max_bytes, max_depth, usize::MAX)
}

/// [`parse_strict`], with a top-level array of more than `max_items` elements refused while
/// it is read (a JSON-RPC batch is never materialised past its cap).
pub(crate) fn parse_strict_capped(
    text: &[u8],
    max_bytes: usize,
    max_depth: usize,
    max_items: usize,
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
        items: max_items,
    }
    .deserialize(&mut de)
    .map_err(classify)?;
    de.end().map_err(classify)?;
    exact_numbers(text).map_err(StrictError::Refused)?;
    Ok(value)
}

/// Refuses a number literal the parsed value cannot hold exactly: an integer outside the `i64`
/// and `u64` ranges (it would be read as a rounded float), a float that overflows to infinity
/// or a nonzero float that underflows to 0. `text` is JSON already parsed, so number tokens
/// are the runs of `-+.0-9eE` outside strings.
fn exact_numbers(text: &[u8]) -> Result<(), String> {
    let mut i = 0;
    let mut in_string = false;
    while i < text.len() {
        let b = text[i];
        if in_string {
            match b {
                b'\\' => i += 2,
                b'"' => {
                    in_string = false;
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if b == b'-' || b.is_ascii_digit() {
            let start = i;
            while i < text.len()
                && matches!(text[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
            {
                i += 1;
            }
            let token = std::str::from_utf8(&text[start..i]).unwrap_or("");
            if !number_is_exact(token) {
                let shown: String = if token.len() > 24 {
                    format!("{}…", &token[..20])
                } else {
                    token.to_string()
                };
                return Err(format!(
                    "number {shown} cannot be represented exactly (integers must fit in 64 bits, floats in an f64) at byte {start}"
                ));
            }
            continue;
        }
        i += 1;
    }
    Ok(())
}

/// Whether one JSON number literal reads as a value equal to it (integers) or as a finite
/// float that is not a nonzero literal rounded to 0.
fn number_is_exact(token: &str) -> bool {
    if !token.contains(['.', 'e', 'E']) {
        return token.parse::<i64>().is_ok() || token.parse::<u64>().is_ok();
    }
    match token.parse::<f64>() {
        Ok(f) if f.is_infinite() => false,
        Ok(0.0) => {
            let mantissa = token.split(['e', 'E']).next().unwrap_or("");
            !mantissa.bytes().any(|d| (b'1'..=b'9').contains(&d))
        }
        Ok(_) => true,
        Err(_) => false,
    }
}

struct Strict {
    depth: usize,
    max: usize,
    /// The most elements a top-level array may have.
    items: usize,
}

impl Strict {
    fn deeper<E: de::Error>(&self) -> Result<Strict, E> {
        if self.depth + 1 > self.max {
            return Err(E::custom(format!("nested deeper than {} levels", self.max)));
        }
        Ok(Strict {
            depth: self.depth + 1,
            max: self.max,
            items: usize::MAX,
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
            items: usize::MAX,
        })? {
            if out.len() == self.items {
                return Err(de::Error::custom(format!(
                    "a batch of more than {} messages",
                    self.items
                )));
            }
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
                items: usize::MAX,
            })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// A short description of a JSON value's type ("a string", "an object", ...), for messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_that_cannot_be_represented_exactly_are_refused() {
        for text in [
            r#"{"n": 18446744073709551616}"#,
            r#"{"n": 123456789012345678901234567890}"#,
            r#"{"n": -9223372036854775809}"#,
            r#"{"n": 1e-400}"#,
            r#"[0.000001e-330]"#,
        ] {
            let e = parse_args(text).unwrap_err();
            let ArgsError::Invalid(m) = e else {
                panic!("{text}: {e:?}")
            };
            assert!(m.contains("cannot be represented exactly"), "{text}: {m}");
        }
        // serde_json itself refuses a float that overflows.
        for (text, col) in [(r#"{"n": 1e400}"#, 11), (r#"{"n": -1e400}"#, 12)] {
            assert_eq!(
                parse_args(text).unwrap_err(),
                ArgsError::Invalid(format!("number out of range at line 1 column {col}"))
            );
        }
        let e = parse_args(r#"{"n": 18446744073709551616}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the arguments are not acceptable JSON: number 18446744073709551616 cannot be represented exactly (integers must fit in 64 bits, floats in an f64) at byte 6"
        );
    }

    #[test]
    fn representable_numbers_and_number_like_strings_parse_as_before() {
        let v = parse_args(
            r#"{"a": 18446744073709551615, "b": -9223372036854775808, "c": 0.0e-999, "d": 1.5e300, "e": "1e400", "f\"1e400": -0, "g": 0.1}"#,
        )
        .unwrap();
        assert_eq!(v["a"], serde_json::json!(18446744073709551615u64));
        assert_eq!(v["b"], serde_json::json!(-9223372036854775808i64));
        assert_eq!(v["c"], serde_json::json!(0.0));
        assert_eq!(v["d"], serde_json::json!(1.5e300));
        assert_eq!(v["e"], "1e400");
        assert_eq!(v["g"], serde_json::json!(0.1));
    }
}
