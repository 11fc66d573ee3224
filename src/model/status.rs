//! Unknown fields under `status`, as the API server finds them.
//!
//! Every kind gitfleet reads whose CRD declares a `status` also enables the status subresource,
//! so the API server drops the status on create (and keeps the old one on update) before it
//! validates the object: the status's types, ranges and required fields are never checked on
//! that path (`status: {phase: 3}` where a string is declared is admitted, so is `status: x`).
//! Unknown fields are found earlier, while the request is decoded with strict field validation
//! (`kubectl apply --validate=strict`, the default), so `status.bogus` is refused. A CRD without
//! a `status` (overrides, staged update strategies, disruption budgets, envelopes) refuses the
//! field itself; those kinds' models have no `status` and strict decoding refuses it.
//!
//! Checked here: the status's own fields and those of each of its `conditions`. Deeper fields
//! (a placement's per-cluster statuses, a run's stage statuses) are not checked: there gitfleet
//! admits what a hub would refuse.

use super::Problems;
use serde_json::Value;

/// The fields of a `metav1.Condition`, the one shape every fleet kind's `conditions` share.
const CONDITION_FIELDS: &[&str] = &[
    "lastTransitionTime",
    "message",
    "observedGeneration",
    "reason",
    "status",
    "type",
];

/// Problems for the unknown fields of `status` (given the fields its CRD declares) and of each
/// of its `conditions`. A status or condition that is not an object is not checked (the server
/// drops the status without validating its types).
pub(crate) fn check(status: Option<&Value>, known: &[&str], p: &mut Problems) {
    let Some(status) = status else {
        return;
    };
    unknown_fields(status, "status", known, p);
    if !known.contains(&"conditions") {
        return;
    }
    if let Some(conditions) = status.get("conditions").and_then(Value::as_array) {
        for (i, c) in conditions.iter().enumerate() {
            unknown_fields(c, &format!("status.conditions[{i}]"), CONDITION_FIELDS, p);
        }
    }
}

/// The fields of `value` (when it is an object) that `known` does not list, as the API server's
/// strict decoding names them.
pub(crate) fn unknown_fields(value: &Value, field: &str, known: &[&str], p: &mut Problems) {
    let Some(object) = value.as_object() else {
        return;
    };
    for key in object.keys().filter(|k| !known.contains(&k.as_str())) {
        p.push(
            format!("{field}.{key}"),
            format!(
                "unknown field `{key}`, expected one of {}",
                known
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
}
