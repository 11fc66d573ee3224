//! What the API server refuses in a ConfigMap or Secret by size and encoding, so `validate` says
//! it at the field instead of a member saying it at apply time:
//!
//! - `Secret.data` and `ConfigMap.binaryData` values must be standard, padded base64 (Go's JSON
//!   decoding of `[]byte`; line breaks are ignored, as Go ignores them). Refused with 400
//!   "illegal base64 data".
//! - A ConfigMap's `data` and `binaryData` (decoded) together, and a Secret's `data` (decoded)
//!   with `stringData` merged over it, may hold at most 1 MiB (`MaxSecretSize`, 1,048,576 bytes,
//!   in k8s.io/kubernetes pkg/apis/core/validation; keys do not count). Refused with 422
//!   "Too long: may not be more than 1048576 bytes".
//!
//! Both checked against a real kube-apiserver v1.37 with `kubectl create --dry-run=server`.

use super::{Catalog, Diagnostic};
use base64::Engine;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The API server's limit on a ConfigMap's or a Secret's data (`MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

pub(super) fn check(cat: &Catalog, diags: &mut Vec<Diagnostic>) {
    for (i, o) in cat.objects.iter().enumerate() {
        let (base64_map, text_map, total_field) = match (o.gvk.group.as_str(), o.gvk.kind.as_str())
        {
            ("", "ConfigMap") => ("binaryData", "data", ""),
            ("", "Secret") => ("data", "stringData", "data"),
            _ => continue,
        };
        // Sizes by key: a Secret's stringData replaces data of the same key, as the API server
        // merges them.
        let mut sizes: BTreeMap<&str, usize> = BTreeMap::new();
        let mut decodable = true;
        for (key, value) in entries(&o.value, base64_map) {
            let Some(text) = value.as_str() else { continue };
            match decode(text) {
                Ok(len) => {
                    sizes.insert(key, len);
                }
                Err(e) => {
                    decodable = false;
                    diags.push(cat.diagnostic(
                        i,
                        &format!("{base64_map}.{key}"),
                        format!(
                            "Invalid value: not base64 ({}); the API server reads {base64_map} \
                             values as standard base64 with padding (put plain text in {})",
                            explain(&e),
                            if base64_map == "data" {
                                "stringData"
                            } else {
                                "data"
                            }
                        ),
                    ));
                }
            }
        }
        for (key, value) in entries(&o.value, text_map) {
            if let Some(text) = value.as_str() {
                let size = sizes.entry(key).or_default();
                *size = if o.gvk.kind == "Secret" {
                    text.len()
                } else {
                    *size + text.len()
                };
            }
        }
        let total: usize = sizes.values().sum();
        if decodable && total > MAX_DATA_BYTES {
            let field = if total_field.is_empty() {
                text_map
            } else {
                total_field
            };
            diags.push(cat.diagnostic(
                i,
                field,
                format!(
                    "Too long: {total} bytes of data, the API server accepts at most \
                     {MAX_DATA_BYTES} bytes (1 MiB) in a {}",
                    o.gvk.kind
                ),
            ));
        }
    }
}

fn entries<'v>(object: &'v Value, map: &str) -> impl Iterator<Item = (&'v str, &'v Value)> {
    object
        .get(map)
        .and_then(Value::as_object)
        .map(Map::iter)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v))
}

/// The decoded length of a base64 value as Go's JSON decoding reads `[]byte` (standard alphabet,
/// padding required, `\r` and `\n` ignored).
fn decode(text: &str) -> Result<usize, base64::DecodeError> {
    let compact: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map(|bytes| bytes.len())
}

/// The decoding error in words.
fn explain(e: &base64::DecodeError) -> String {
    match e {
        base64::DecodeError::InvalidByte(at, byte) => {
            format!("{:?} at character {at}", char::from(*byte))
        }
        base64::DecodeError::InvalidLength(_) => "its length is not a multiple of 4".into(),
        base64::DecodeError::InvalidLastSymbol { offset, symbol, .. } => format!(
            "{:?} cannot end the value, at character {offset}",
            char::from(*symbol)
        ),
        base64::DecodeError::InvalidPadding => "missing or misplaced `=` padding".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn base64_is_read_as_go_reads_byte_slices() {
        assert_eq!(decode("YWJj").unwrap(), 3);
        assert_eq!(decode("YW\nJj").unwrap(), 3);
        assert_eq!(decode("").unwrap(), 0);
        // Unpadded and non-alphabet input are refused by the real API server.
        assert!(decode("YWI").is_err());
        assert!(decode("not-base64!").is_err());
        assert!(decode("YWJj-_").is_err());
    }
}
