//! Stable hashes over JSON: the input hash that identifies an evaluation's input, and the
//! Spacelift-style sanitizing hash that stands in for sensitive values.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Hex sha256 of `input` as canonical JSON (object keys sorted, no whitespace), so the same
/// document hashes the same whatever its key order and whichever process serialized it.
pub fn input_hash(input: &Value) -> String {
    let mut out = String::new();
    write_canonical(input, &mut out);
    hex::encode(Sha256::digest(out.as_bytes()))
}

/// Spacelift's sanitizing hash: sha256 of the value's string form, hex of the last 8 bytes.
///
/// The string form of a string is its contents (so `sanitized("secret")` in a policy matches a
/// sensitive `"secret"` in a plan); any other value is hashed as its canonical JSON text.
pub fn sanitize_value(v: &Value) -> String {
    let digest = match v {
        Value::String(s) => Sha256::digest(s.as_bytes()),
        other => {
            let mut out = String::new();
            write_canonical(other, &mut out);
            Sha256::digest(out.as_bytes())
        }
    };
    hex::encode(&digest[digest.len() - 8..])
}

/// Writes `v` as compact JSON with object keys in byte order. Done by hand rather than through
/// `serde_json::to_string` because a dependency elsewhere in the workspace may turn on
/// `serde_json/preserve_order`, which would make maps keep insertion order.
pub(crate) fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(val, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    // A `&str` always serializes; the fallback only keeps this function total.
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let mut out = String::new();
        write_canonical(&json!({"b": 1, "a": {"z": [true, null], "y": "x\"y"}}), &mut out);
        assert_eq!(out, r#"{"a":{"y":"x\"y","z":[true,null]},"b":1}"#);
    }

    #[test]
    fn input_hash_ignores_key_order_and_is_stable() {
        let a: Value = serde_json::from_str(r#"{"x": 1, "y": {"b": [1, 2], "a": "s"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"y": {"a": "s", "b": [1, 2]}, "x": 1}"#).unwrap();
        assert_eq!(input_hash(&a), input_hash(&b));
        // sha256 of `{"x":1,"y":{"a":"s","b":[1,2]}}`, fixed so a change of format is noticed.
        assert_eq!(
            input_hash(&a),
            hex::encode(Sha256::digest(br#"{"x":1,"y":{"a":"s","b":[1,2]}}"#))
        );
        assert_ne!(
            input_hash(&a),
            input_hash(&json!({"x": 2, "y": {"a": "s", "b": [1, 2]}}))
        );
        assert_ne!(input_hash(&json!([1, 2])), input_hash(&json!([2, 1])));
    }

    #[test]
    fn sanitize_value_is_the_last_eight_bytes_of_sha256() {
        let full = hex::encode(Sha256::digest(b"secret"));
        assert_eq!(sanitize_value(&json!("secret")), full[48..]);
        assert_eq!(sanitize_value(&json!("secret")).len(), 16);
        assert_eq!(sanitize_value(&json!(42)), hex::encode(&Sha256::digest(b"42")[24..]));
    }
}
