//! Canonical JSON (keys sorted at every level, no whitespace) and its sha256, so the same content
//! always hashes the same whatever the key order or file layout it was written in.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `v` as canonical JSON.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
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
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// sha256 hex of the canonical JSON of `v`.
pub fn hash_value(v: &Value) -> String {
    let digest = Sha256::digest(canonical_json(v).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": null}}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": {"x": null, "y": [1, {"p": 2, "q": 1}]}, "b": 1}"#)
                .unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1}"#
        );
        assert_eq!(hash_value(&a), hash_value(&b));
    }

    #[test]
    fn any_change_changes_the_hash() {
        let a = json!({"a": [1, 2]});
        for b in [
            json!({"a": [2, 1]}),
            json!({"a": [1, 2, 3]}),
            json!({"a": ["1", 2]}),
            json!({"A": [1, 2]}),
        ] {
            assert_ne!(hash_value(&a), hash_value(&b), "{b}");
        }
        assert_eq!(hash_value(&a).len(), 64);
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(canonical_json(&json!({"k\"": "v\n"})), r#"{"k\"":"v\n"}"#);
    }
}
