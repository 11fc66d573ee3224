//! Unknown fields under `status`, as the API server finds them.
//!
//! Every kind gitfleet reads whose CRD declares a `status` also enables the status subresource,
//! so the API server drops the status on create (and keeps the old one on update) before it
//! validates the object: the status's types, ranges and required fields are never checked on
//! that path (`status: {phase: 3}` where a string is declared is admitted, so is `status: x`).
//! Unknown fields are found earlier, while the request is decoded with strict field validation
//! (`kubectl apply --validate=strict`, the default), so `status.bogus` is refused, and so is
//! `status.placementStatuses[0].failedPlacements[1].bogus`: the server prunes the whole object
//! against its schema, to any depth. A CRD without a `status` (overrides, staged update
//! strategies, disruption budgets, envelopes) refuses the field itself; those kinds' models have
//! no `status` and strict decoding refuses it.
//!
//! Each kind's status is described once, as a [`Shape`] (the fields its CRD declares, and the
//! shape of each that holds fields of its own), in [`kubefleet`] and [`ocm`]; [`check`] walks a
//! status beside its shape as the server's pruning walks it beside the schema: by the value, not
//! by the declared types. An object where the CRD declares a scalar or a list of scalars keeps
//! none of its fields (`status.conditions[0].message: {a: 1}` is refused at
//! `status.conditions[0].message.a`); a scalar where the CRD declares an object holds nothing to
//! prune. No status schema of these kinds preserves unknown fields, so the shapes have no way to
//! say so (the CRD test below would find one).

mod kubefleet;
mod ocm;

use super::Problems;
use serde_json::Value;

/// What the CRD declares for one field of a status, as far as its field names go.
#[derive(Debug)]
pub(crate) enum Field {
    /// A scalar, or a list of scalars: an object found in it keeps none of its fields.
    Leaf,
    /// An object with these fields.
    Object(&'static Shape),
    /// A list of objects with these fields.
    List(&'static Shape),
    /// An object whose every key is allowed, each holding this.
    Map(&'static Field),
}

/// The fields of an object: names (in the CRD's order, alphabetical) and what each holds.
pub(crate) type Shape = [(&'static str, Field)];

/// A `metav1.Condition`, the shape of every `conditions` of these kinds.
pub(crate) const CONDITION: &Shape = &[
    ("lastTransitionTime", Field::Leaf),
    ("message", Field::Leaf),
    ("observedGeneration", Field::Leaf),
    ("reason", Field::Leaf),
    ("status", Field::Leaf),
    ("type", Field::Leaf),
];

/// The status of kinds that report conditions only.
const CONDITIONS_ONLY: &Shape = &[("conditions", Field::List(CONDITION))];

/// The status shape of each group, kind and version gitfleet reads that has a status. The first
/// row of a kind also stands for a version not listed (the catalog refuses those first).
const KINDS: &[(&str, &str, &str, &Shape)] = {
    const FLEET: &str = "placement.kubernetes-fleet.io";
    const MEMBERS: &str = "cluster.kubernetes-fleet.io";
    const OCM: &str = "cluster.open-cluster-management.io";
    const WORK: &str = "work.open-cluster-management.io";
    &[
        (
            FLEET,
            "ClusterResourcePlacement",
            "v1",
            kubefleet::PLACEMENT,
        ),
        (
            FLEET,
            "ClusterResourcePlacement",
            "v1beta1",
            kubefleet::PLACEMENT,
        ),
        (FLEET, "ResourcePlacement", "v1", kubefleet::PLACEMENT),
        (FLEET, "ResourcePlacement", "v1beta1", kubefleet::PLACEMENT),
        (FLEET, "ClusterStagedUpdateRun", "v1", kubefleet::RUN),
        (FLEET, "ClusterStagedUpdateRun", "v1beta1", kubefleet::RUN),
        (
            FLEET,
            "ClusterStagedUpdateRun",
            "v1alpha1",
            kubefleet::RUN_V1ALPHA1,
        ),
        (FLEET, "StagedUpdateRun", "v1", kubefleet::RUN),
        (FLEET, "StagedUpdateRun", "v1beta1", kubefleet::RUN),
        (FLEET, "ClusterApprovalRequest", "v1", CONDITIONS_ONLY),
        (FLEET, "ClusterApprovalRequest", "v1beta1", CONDITIONS_ONLY),
        (FLEET, "ClusterApprovalRequest", "v1alpha1", CONDITIONS_ONLY),
        (FLEET, "ApprovalRequest", "v1", CONDITIONS_ONLY),
        (FLEET, "ApprovalRequest", "v1beta1", CONDITIONS_ONLY),
        (
            FLEET,
            "ClusterResourcePlacementEviction",
            "v1beta1",
            CONDITIONS_ONLY,
        ),
        (
            FLEET,
            "ClusterResourcePlacementEviction",
            "v1alpha1",
            CONDITIONS_ONLY,
        ),
        (MEMBERS, "MemberCluster", "v1", kubefleet::MEMBER_V1),
        (
            MEMBERS,
            "MemberCluster",
            "v1beta1",
            kubefleet::MEMBER_V1BETA1,
        ),
        (OCM, "Placement", "v1beta1", ocm::PLACEMENT),
        (OCM, "PlacementDecision", "v1beta1", ocm::PLACEMENT_DECISION),
        (OCM, "ManagedCluster", "v1", ocm::MANAGED_CLUSTER),
        (OCM, "ManagedClusterSet", "v1beta2", CONDITIONS_ONLY),
        (OCM, "ManagedClusterSet", "v1beta1", CONDITIONS_ONLY),
        (OCM, "ManagedClusterSetBinding", "v1beta2", CONDITIONS_ONLY),
        (OCM, "ManagedClusterSetBinding", "v1beta1", CONDITIONS_ONLY),
        (WORK, "ManifestWork", "v1", ocm::MANIFEST_WORK),
        (
            WORK,
            "ManifestWorkReplicaSet",
            "v1alpha1",
            ocm::MANIFEST_WORK_REPLICA_SET,
        ),
    ]
};

/// The status shape of an object of `api_version` (`group/version`) and `kind`, if its kind has
/// a status.
fn shape(api_version: &str, kind: &str) -> Option<&'static Shape> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let mut rows = KINDS.iter().filter(|(g, k, ..)| *g == group && *k == kind);
    let first = rows.clone().next()?;
    Some(rows.find(|(.., v, _)| *v == version).unwrap_or(first).3)
}

/// Problems for the fields of `status` (of an object of `api_version` and `kind`) its CRD does
/// not declare, at any depth.
pub(crate) fn check(api_version: &str, kind: &str, status: Option<&Value>, p: &mut Problems) {
    let (Some(status), Some(shape)) = (status, shape(api_version, kind)) else {
        return;
    };
    walk(status, "status", shape, p);
}

/// The unknown fields of `value` at `path`, where the CRD declares the fields `known` (none for
/// a scalar, nor for the items of a list of scalars).
fn walk(value: &Value, path: &str, known: &Shape, p: &mut Problems) {
    match value {
        Value::Object(fields) => {
            for (key, v) in fields {
                let at = format!("{path}.{key}");
                match known.iter().find(|(k, _)| *k == key.as_str()) {
                    Some((_, f)) => field(v, &at, f, p),
                    None => p.push(at, unknown(key, known)),
                }
            }
        }
        // Where an object is declared, a list's items have no schema: none of their fields is
        // kept either.
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{i}]"), &[], p);
            }
        }
        _ => {}
    }
}

/// The unknown fields of `value` at `path`, a field the CRD declares as `f`.
fn field(value: &Value, path: &str, f: &Field, p: &mut Problems) {
    match (f, value) {
        (Field::Leaf, _) => walk(value, path, &[], p),
        (Field::Object(shape), _) => walk(value, path, shape, p),
        (Field::List(shape), Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{i}]"), shape, p);
            }
        }
        // A list's schema declares no properties: an object there keeps none of its fields.
        (Field::List(_), _) => walk(value, path, &[], p),
        (Field::Map(each), Value::Object(entries)) => {
            for (key, v) in entries {
                field(v, &format!("{path}.{key}"), each, p);
            }
        }
        (Field::Map(_), _) => walk(value, path, &[], p),
    }
}

fn unknown(key: &str, known: &Shape) -> String {
    if known.is_empty() {
        return format!("unknown field `{key}`: no field is declared here");
    }
    format!(
        "unknown field `{key}`, expected one of {}",
        known
            .iter()
            .map(|(k, _)| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[cfg(test)]
mod crd_tests;
#[cfg(test)]
mod tests;
