//! Canonical JSON (no white space, object keys sorted at every depth), over which call digests
//! are taken, and the nesting depth check of call arguments.

use serde_json::{Map, Value};

use crate::limits;

/// Appends the canonical JSON of `v`: no whitespace, object keys in byte order.
pub(super) fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(o) => canonical_object(o, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

pub(super) fn canonical_object(o: &Map<String, Value>, out: &mut String) {
    let mut keys: Vec<&String> = o.keys().collect();
    keys.sort();
    out.push('{');
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        if let Some(v) = o.get(k) {
            canonical_json(v, out);
        }
    }
    out.push('}');
}

/// The canonical JSON text of `v`: no white space, object keys sorted by byte order at every
/// depth. Two values that are equal as JSON have the same canonical text, whatever the order
/// their keys came in; digests of calls are taken over it.
pub fn canonical_json_text(v: &Value) -> String {
    let mut out = String::new();
    canonical_json(v, &mut out);
    out
}

/// Nesting depth of a JSON value (a scalar is 0), computed without recursion.
pub(super) fn json_depth(v: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        if d > limits::MAX_ARGS_DEPTH {
            return d;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}
