//! Canonical JSON (keys sorted at every level, no whitespace) and its sha256, so the same content
//! always hashes the same whatever the key order or file layout it was written in.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `v` as canonical JSON.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    // serde_json writes UTF-8 only.
    String::from_utf8(out).expect("JSON is UTF-8")
}

fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(k, out);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_json(scalar, out),
    }
}

/// A string or scalar as serde_json writes it (escapes included).
fn write_json<T: serde::Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    serde_json::to_writer(out, v).expect("writing JSON to memory cannot fail");
}

/// sha256 hex of the canonical JSON of `v`.
pub fn hash_value(v: &Value) -> String {
    let mut json = Vec::new();
    write_canonical(v, &mut json);
    let digest = Sha256::digest(&json);
    let mut hex = String::with_capacity(64);
    for b in digest {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
    }
    hex
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
        // sha256 of that text: hashes recorded in state stores stay valid.
        assert_eq!(
            hash_value(&a),
            "2c3048f96c306125197950534af08ab8daf6128c26f9a1d2cbd16b252bd76e66"
        );
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
