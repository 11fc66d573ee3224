//! Canonical JSON (keys sorted at every level, no whitespace) and its sha256, so the same content
//! always hashes the same whatever the key order or file layout it was written in.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Write;

/// Writes `v` as canonical JSON.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    // serde_json writes UTF-8 only.
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// The writers here are memory and a hasher, which never fail.
const INFALLIBLE: &str = "writing JSON to memory or a hasher cannot fail";

fn write_canonical(v: &Value, out: &mut impl Write) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.write_all(b"{").expect(INFALLIBLE);
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.write_all(b",").expect(INFALLIBLE);
                }
                write_json(k, out);
                out.write_all(b":").expect(INFALLIBLE);
                write_canonical(v, out);
            }
            out.write_all(b"}").expect(INFALLIBLE);
        }
        Value::Array(items) => write_canonical_array(items.iter(), out),
        scalar => write_json(scalar, out),
    }
}

fn write_canonical_array<'v>(items: impl Iterator<Item = &'v Value>, out: &mut impl Write) {
    out.write_all(b"[").expect(INFALLIBLE);
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.write_all(b",").expect(INFALLIBLE);
        }
        write_canonical(item, out);
    }
    out.write_all(b"]").expect(INFALLIBLE);
}

/// A string or scalar as serde_json writes it (escapes included).
fn write_json<T: serde::Serialize + ?Sized>(v: &T, out: &mut impl Write) {
    serde_json::to_writer(out, v).expect(INFALLIBLE);
}

/// sha256 over what is written to it: canonical JSON is hashed as it is written, never held.
#[derive(Default)]
struct Hasher(Sha256);

impl Write for Hasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Hasher {
    fn hex(self) -> String {
        let mut hex = String::with_capacity(64);
        for b in self.0.finalize() {
            use std::fmt::Write as _;
            let _ = write!(hex, "{b:02x}");
        }
        hex
    }
}

/// sha256 hex of the canonical JSON of `v`.
pub fn hash_value(v: &Value) -> String {
    let mut hasher = Hasher::default();
    write_canonical(v, &mut hasher);
    hasher.hex()
}

/// [`hash_value`] of the array of `items`, or of `{key: [items]}` when a key is given, without
/// copying the items into one value (a rendering or a selection can be a large commit's size).
pub fn hash_list(key: Option<&str>, items: &[&Value]) -> String {
    let mut hasher = Hasher::default();
    if let Some(key) = key {
        hasher.write_all(b"{").expect(INFALLIBLE);
        write_json(key, &mut hasher);
        hasher.write_all(b":").expect(INFALLIBLE);
    }
    write_canonical_array(items.iter().copied(), &mut hasher);
    if key.is_some() {
        hasher.write_all(b"}").expect(INFALLIBLE);
    }
    hasher.hex()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_hashes_as_the_value_holding_it() {
        let a = json!({"b": [1, "é\"x"], "a": {"z": null, "y": 2.5}});
        let b = json!("plain");
        let items = [&a, &b];
        assert_eq!(hash_list(None, &items), hash_value(&json!(items)));
        assert_eq!(
            hash_list(Some("selectedResources"), &items),
            hash_value(&json!({ "selectedResources": items }))
        );
        assert_eq!(hash_list(None, &[]), hash_value(&json!([])));
    }

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
