//! Unwrapping envelopes for a member (§1.10): a selected envelope is replaced by the objects it
//! carries, in KubeFleet's deterministic order; the envelope itself never reaches a member.

use super::{EnvelopeRef, RenderError};
use crate::model::envelope::{envelope_contents_of, EnvelopeKind};
use crate::model::scope::ScopeTable;
use serde_json::Value;

/// `None` when `value` is not an envelope; else the envelope and its contents sorted by their
/// JSON text (keys sorted, compact), descending, as KubeFleet's work generator sorts the raw
/// manifests of an envelope.
pub(super) fn unwrap(
    value: &Value,
    scopes: &ScopeTable,
) -> Option<Result<(EnvelopeRef, Vec<Value>), RenderError>> {
    let kind = EnvelopeKind::of_value(value)?;
    let envelope = EnvelopeRef {
        kind,
        name: text(value, "/metadata/name"),
        namespace: match kind {
            EnvelopeKind::ClusterResourceEnvelope => None,
            _ => Some(text(value, "/metadata/namespace")).filter(|ns| !ns.is_empty()),
        },
    };
    let contents = match envelope_contents_of(value, scopes)? {
        Ok(contents) => contents,
        Err(problems) => return Some(Err(RenderError::Envelope { envelope, problems })),
    };
    let mut keyed: Vec<(String, Value)> =
        contents.into_iter().map(|v| (canonical(&v), v)).collect();
    keyed.sort_by(|a, b| b.0.cmp(&a.0));
    Some(Ok((envelope, keyed.into_iter().map(|(_, v)| v).collect())))
}

fn text(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Compact JSON with object keys sorted, whatever order the document used (the snapshot hash's
/// canonical form).
pub(super) fn canonical(value: &Value) -> String {
    crate::snapshot::canonical_json(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_at_every_level() {
        let v = json!({"b": [{"z": 1, "a": "x"}], "a": null, "c": {"y": true, "x": 1.5}});
        assert_eq!(
            canonical(&v),
            r#"{"a":null,"b":[{"a":"x","z":1}],"c":{"x":1.5,"y":true}}"#
        );
    }

    #[test]
    fn contents_are_sorted_descending_by_json() {
        let cr = |name: &str| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}});
        let env = json!({
            "apiVersion": "placement.kubernetes-fleet.io/v1beta1", "kind": "ClusterResourceEnvelope",
            "metadata": {"name": "e"},
            "data": {"1": cr("a"), "2": cr("c"), "3": cr("b")},
        });
        let (r, contents) = unwrap(&env, &ScopeTable::builtin()).unwrap().unwrap();
        assert_eq!(
            r,
            EnvelopeRef {
                kind: EnvelopeKind::ClusterResourceEnvelope,
                name: "e".into(),
                namespace: None
            }
        );
        assert_eq!(contents, vec![cr("c"), cr("b"), cr("a")]);
        assert!(unwrap(&cr("x"), &ScopeTable::builtin()).is_none());
    }
}
