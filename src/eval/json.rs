//! Canonical JSON (no white space, object keys sorted at every depth), over which call digests
//! are taken, and the nesting depth check of call arguments.

use serde_json::{Map, Value};

use crate::limits;

/// Appends the canonical JSON of `v` to `out`: no whitespace, object keys in byte order,
/// strings and numbers as serde_json writes them. Nothing is allocated but `out`'s growth
/// (and, for an object whose map does not keep its keys sorted, the list of its keys).
pub(super) fn canonical_json(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(o) => canonical_object(o, out),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(x, out);
            }
            out.push(b']');
        }
        scalar => write_json(scalar, out),
    }
}

/// Appends the canonical JSON of the object `o` to `out` (see [`canonical_json`]).
pub(super) fn canonical_object(o: &Map<String, Value>, out: &mut Vec<u8>) {
    out.push(b'{');
    // serde_json's default map keeps its keys sorted; with `preserve_order` they come in
    // insertion order and are sorted here.
    if o.keys().is_sorted() {
        for (i, (k, v)) in o.iter().enumerate() {
            member(i, k, v, out);
        }
    } else {
        let mut members: Vec<(&String, &Value)> = o.iter().collect();
        members.sort_unstable_by_key(|(k, _)| *k);
        for (i, (k, v)) in members.into_iter().enumerate() {
            member(i, k, v, out);
        }
    }
    out.push(b'}');
}

/// Appends the `i`-th member `"k":v` of an object, with its separating comma.
fn member(i: usize, k: &str, v: &Value, out: &mut Vec<u8>) {
    if i > 0 {
        out.push(b',');
    }
    write_json(k, out);
    out.push(b':');
    canonical_json(v, out);
}

/// Appends serde_json's compact text of a string or a scalar. Writing to a `Vec` cannot fail,
/// and neither can serializing a string, a number, a boolean or null.
pub(super) fn write_json<T: serde::Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    let _infallible = serde_json::to_writer(out, value);
}

/// The canonical JSON text of `v`: no white space, object keys sorted by byte order at every
/// depth. Two values that are equal as JSON have the same canonical text, whatever the order
/// their keys came in; digests of calls are taken over it.
pub fn canonical_json_text(v: &Value) -> String {
    let mut out = Vec::new();
    canonical_json(v, &mut out);
    // serde_json writes UTF-8 only.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
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
