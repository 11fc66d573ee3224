//! The status shapes of Open Cluster Management's kinds (`cluster.open-cluster-management.io`,
//! `work.open-cluster-management.io`), as their CRDs declare them. Fields in alphabetical order,
//! as the CRDs list them.

use super::Field::{Leaf, List, Map, Object};
use super::{Shape, CONDITION};

/// `Placement` `v1beta1`.
pub(crate) const PLACEMENT: &Shape = &[
    ("conditions", List(CONDITION)),
    (
        "decisionGroups",
        List(&[
            ("clusterCount", Leaf),
            ("decisionGroupIndex", Leaf),
            ("decisionGroupName", Leaf),
            ("decisions", Leaf),
        ]),
    ),
    ("lastScoreUpdateTime", Leaf),
    ("numberOfSelectedClusters", Leaf),
];

/// `PlacementDecision` `v1beta1`.
pub(crate) const PLACEMENT_DECISION: &Shape = &[(
    "decisions",
    List(&[("clusterName", Leaf), ("reason", Leaf), ("score", Leaf)]),
)];

/// `ManagedCluster` `v1`.
pub(crate) const MANAGED_CLUSTER: &Shape = &[
    ("allocatable", Map(&Leaf)),
    ("capacity", Map(&Leaf)),
    ("clusterClaims", List(&[("name", Leaf), ("value", Leaf)])),
    ("conditions", List(CONDITION)),
    (
        "managedNamespaces",
        List(&[
            ("clusterSet", Leaf),
            ("conditions", List(CONDITION)),
            ("name", Leaf),
        ]),
    ),
    ("version", Object(&[("kubernetes", Leaf)])),
];

/// `ManifestWork` `v1`.
pub(crate) const MANIFEST_WORK: &Shape = &[
    ("conditions", List(CONDITION)),
    (
        "resourceStatus",
        Object(&[("manifests", List(MANIFEST_CONDITION))]),
    ),
];

/// `status.resourceStatus.manifests[i]`: one manifest's.
const MANIFEST_CONDITION: &Shape = &[
    ("conditions", List(CONDITION)),
    (
        "resourceMeta",
        Object(&[
            ("group", Leaf),
            ("kind", Leaf),
            ("name", Leaf),
            ("namespace", Leaf),
            ("ordinal", Leaf),
            ("resource", Leaf),
            ("version", Leaf),
        ]),
    ),
    (
        "statusFeedback",
        Object(&[("values", List(FEEDBACK_VALUE))]),
    ),
];

const FEEDBACK_VALUE: &Shape = &[
    (
        "fieldValue",
        Object(&[
            ("boolean", Leaf),
            ("integer", Leaf),
            ("jsonRaw", Leaf),
            ("string", Leaf),
            ("type", Leaf),
        ]),
    ),
    ("name", Leaf),
];

/// `ManifestWorkReplicaSet` `v1alpha1`.
pub(crate) const MANIFEST_WORK_REPLICA_SET: &Shape = &[
    ("conditions", List(CONDITION)),
    (
        "placementSummary",
        List(&[
            ("availableDecisionGroups", Leaf),
            ("name", Leaf),
            ("summary", Object(SUMMARY)),
        ]),
    ),
    ("summary", Object(SUMMARY)),
];

const SUMMARY: &Shape = &[
    ("applied", Leaf),
    ("available", Leaf),
    ("degraded", Leaf),
    ("desiredTotal", Leaf),
    ("progressing", Leaf),
    ("total", Leaf),
    ("updated", Leaf),
];
