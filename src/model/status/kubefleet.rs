//! The status shapes of KubeFleet's kinds (`placement.kubernetes-fleet.io`,
//! `cluster.kubernetes-fleet.io`), as their CRDs declare them. Fields in alphabetical order, as
//! the CRDs list them.

use super::Field::{Leaf, List, Map, Object};
use super::{Shape, CONDITION};

/// `ClusterResourcePlacement` and `ResourcePlacement`, `v1` and `v1beta1`.
pub(crate) const PLACEMENT: &Shape = &[
    ("conditions", List(CONDITION)),
    ("observedResourceIndex", Leaf),
    ("placementStatuses", List(PER_CLUSTER)),
    ("selectedResources", List(RESOURCE_IDENTIFIER)),
];

/// `status.placementStatuses[i]`: one cluster's.
const PER_CLUSTER: &Shape = &[
    ("applicableClusterResourceOverrides", Leaf),
    ("applicableResourceOverrides", List(NAMESPACED_NAME)),
    ("clusterName", Leaf),
    ("conditions", List(CONDITION)),
    ("diffedPlacements", List(DIFFED)),
    ("driftedPlacements", List(DRIFTED)),
    ("failedPlacements", List(FAILED)),
    ("observedResourceIndex", Leaf),
];

const NAMESPACED_NAME: &Shape = &[("name", Leaf), ("namespace", Leaf)];

const ENVELOPE: &Shape = &[("name", Leaf), ("namespace", Leaf), ("type", Leaf)];

/// A selected resource: group, version, kind, name, namespace and the envelope it came in.
const RESOURCE_IDENTIFIER: &Shape = &[
    ("envelope", Object(ENVELOPE)),
    ("group", Leaf),
    ("kind", Leaf),
    ("name", Leaf),
    ("namespace", Leaf),
    ("version", Leaf),
];

const FAILED: &Shape = &[
    ("condition", Object(CONDITION)),
    ("envelope", Object(ENVELOPE)),
    ("group", Leaf),
    ("kind", Leaf),
    ("name", Leaf),
    ("namespace", Leaf),
    ("version", Leaf),
];

const DRIFTED: &Shape = &[
    ("envelope", Object(ENVELOPE)),
    ("firstDriftedObservedTime", Leaf),
    ("group", Leaf),
    ("kind", Leaf),
    ("name", Leaf),
    ("namespace", Leaf),
    ("observationTime", Leaf),
    ("observedDrifts", List(PATCH_DETAIL)),
    ("targetClusterObservedGeneration", Leaf),
    ("version", Leaf),
];

const DIFFED: &Shape = &[
    ("envelope", Object(ENVELOPE)),
    ("firstDiffedObservedTime", Leaf),
    ("group", Leaf),
    ("kind", Leaf),
    ("name", Leaf),
    ("namespace", Leaf),
    ("observationTime", Leaf),
    ("observedDiffs", List(PATCH_DETAIL)),
    ("targetClusterObservedGeneration", Leaf),
    ("version", Leaf),
];

const PATCH_DETAIL: &Shape = &[
    ("path", Leaf),
    ("valueInHub", Leaf),
    ("valueInMember", Leaf),
];

/// `ClusterStagedUpdateRun` (`v1`, `v1beta1`) and `StagedUpdateRun`.
pub(crate) const RUN: &Shape = &[
    ("appliedStrategy", Object(APPLIED_STRATEGY)),
    ("conditions", List(CONDITION)),
    ("deletionStageStatus", Object(STAGE_STATUS)),
    ("policyObservedClusterCount", Leaf),
    ("policySnapshotIndexUsed", Leaf),
    ("resourceSnapshotIndexUsed", Leaf),
    ("stagedUpdateStrategySnapshot", Object(STRATEGY_SNAPSHOT)),
    ("stagesStatus", List(STAGE_STATUS)),
];

/// `ClusterStagedUpdateRun` `v1alpha1`: no before-stage tasks, no resource snapshot index.
pub(crate) const RUN_V1ALPHA1: &Shape = &[
    ("appliedStrategy", Object(APPLIED_STRATEGY)),
    ("conditions", List(CONDITION)),
    ("deletionStageStatus", Object(STAGE_STATUS_V1ALPHA1)),
    ("policyObservedClusterCount", Leaf),
    ("policySnapshotIndexUsed", Leaf),
    (
        "stagedUpdateStrategySnapshot",
        Object(STRATEGY_SNAPSHOT_V1ALPHA1),
    ),
    ("stagesStatus", List(STAGE_STATUS_V1ALPHA1)),
];

const APPLIED_STRATEGY: &Shape = &[
    ("allowCoOwnership", Leaf),
    ("comparisonOption", Leaf),
    ("serverSideApplyConfig", Object(&[("force", Leaf)])),
    ("type", Leaf),
    ("whenToApply", Leaf),
    ("whenToTakeOver", Leaf),
];

const STAGE_STATUS: &Shape = &[
    ("afterStageTaskStatus", List(TASK_STATUS)),
    ("beforeStageTaskStatus", List(TASK_STATUS)),
    ("clusters", List(CLUSTER_UPDATING_STATUS)),
    ("conditions", List(CONDITION)),
    ("endTime", Leaf),
    ("stageName", Leaf),
    ("startTime", Leaf),
];

const STAGE_STATUS_V1ALPHA1: &Shape = &[
    ("afterStageTaskStatus", List(TASK_STATUS)),
    ("clusters", List(CLUSTER_UPDATING_STATUS)),
    ("conditions", List(CONDITION)),
    ("endTime", Leaf),
    ("stageName", Leaf),
    ("startTime", Leaf),
];

const TASK_STATUS: &Shape = &[
    ("approvalRequestName", Leaf),
    ("conditions", List(CONDITION)),
    ("type", Leaf),
];

const CLUSTER_UPDATING_STATUS: &Shape = &[
    ("clusterName", Leaf),
    ("clusterResourceOverrideSnapshots", Leaf),
    ("conditions", List(CONDITION)),
    ("resourceOverrideSnapshots", List(NAMESPACED_NAME)),
];

const STRATEGY_SNAPSHOT: &Shape = &[("stages", List(STAGE_CONFIG))];

const STRATEGY_SNAPSHOT_V1ALPHA1: &Shape = &[("stages", List(STAGE_CONFIG_V1ALPHA1))];

const STAGE_CONFIG: &Shape = &[
    ("afterStageTasks", List(STAGE_TASK)),
    ("beforeStageTasks", List(STAGE_TASK)),
    ("labelSelector", Object(LABEL_SELECTOR)),
    ("maxConcurrency", Leaf),
    ("name", Leaf),
    ("sortingLabelKey", Leaf),
];

const STAGE_CONFIG_V1ALPHA1: &Shape = &[
    ("afterStageTasks", List(STAGE_TASK)),
    ("labelSelector", Object(LABEL_SELECTOR)),
    ("name", Leaf),
    ("sortingLabelKey", Leaf),
];

const STAGE_TASK: &Shape = &[("type", Leaf), ("waitTime", Leaf)];

const LABEL_SELECTOR: &Shape = &[
    (
        "matchExpressions",
        List(&[("key", Leaf), ("operator", Leaf), ("values", Leaf)]),
    ),
    ("matchLabels", Map(&Leaf)),
];

/// `MemberCluster` `v1`.
pub(crate) const MEMBER_V1: &Shape = &[
    ("agentStatus", List(AGENT_STATUS)),
    ("conditions", List(CONDITION)),
    ("properties", Map(&Object(PROPERTY_VALUE))),
    ("resourceUsage", Object(RESOURCE_USAGE)),
];

/// `MemberCluster` `v1beta1`: also the namespaces of the member.
pub(crate) const MEMBER_V1BETA1: &Shape = &[
    ("agentStatus", List(AGENT_STATUS)),
    ("conditions", List(CONDITION)),
    ("namespaces", Map(&Leaf)),
    ("properties", Map(&Object(PROPERTY_VALUE))),
    ("resourceUsage", Object(RESOURCE_USAGE)),
];

const AGENT_STATUS: &Shape = &[
    ("conditions", List(CONDITION)),
    ("lastReceivedHeartbeat", Leaf),
    ("type", Leaf),
];

const PROPERTY_VALUE: &Shape = &[("observationTime", Leaf), ("value", Leaf)];

const RESOURCE_USAGE: &Shape = &[
    ("allocatable", Map(&Leaf)),
    ("available", Map(&Leaf)),
    ("capacity", Map(&Leaf)),
    ("observationTime", Leaf),
];
