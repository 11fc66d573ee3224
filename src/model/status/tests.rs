use super::*;

/// `(field, message)` of each problem of `status` (YAML) in an object of `api_version` and
/// `kind`.
fn problems(api_version: &str, kind: &str, status: &str) -> Vec<(String, String)> {
    let mut p = Problems::default();
    let status = crate::model::testing::value(status);
    check(api_version, kind, Some(&status), &mut p);
    p.0.into_iter().map(|p| (p.field, p.message)).collect()
}

/// One test per shape's rule, named after it: the full status (`ok`, every field the shape
/// declares, populated) is admitted, and `bad` is refused at `field` with a message holding
/// `says`.
macro_rules! shape_tests {
    ($($name:ident: $api:expr, $kind:expr; $bad:expr => $field:expr, $says:expr; ok: $ok:expr;)*) => {
        $(
            #[test]
            fn $name() {
                let got = problems($api, $kind, $bad);
                assert!(
                    got.iter().any(|(f, m)| f == $field && m.contains($says)),
                    "expected {}: …{}…, got {got:?}", $field, $says
                );
                let got = problems($api, $kind, $ok);
                assert!(got.is_empty(), "the full status is refused: {got:?}");
            }
        )*
    };
}

const CONDITION_YAML: &str = "{type: Ready, status: 'True', reason: R, message: m, observedGeneration: 1, lastTransitionTime: '2024-01-01T00:00:00Z'}";

fn full_placement() -> String {
    let c = CONDITION_YAML;
    let env = "envelope: {name: e, namespace: n, type: ConfigMap}";
    let gvknn = "group: apps, version: v1, kind: Deployment, name: d, namespace: n";
    format!(
        "conditions: [{c}]
observedResourceIndex: '0'
selectedResources: [{{{gvknn}, {env}}}]
placementStatuses:
- clusterName: m1
  observedResourceIndex: '0'
  applicableClusterResourceOverrides: [cro-0]
  applicableResourceOverrides: [{{name: ro, namespace: n}}]
  conditions: [{c}]
  failedPlacements: [{{{gvknn}, {env}, condition: {c}}}]
  driftedPlacements:
  - {{{gvknn}, {env}, observationTime: t, firstDriftedObservedTime: t, targetClusterObservedGeneration: 1, observedDrifts: [{{path: /a, valueInHub: x, valueInMember: y}}]}}
  diffedPlacements:
  - {{{gvknn}, {env}, observationTime: t, firstDiffedObservedTime: t, targetClusterObservedGeneration: 1, observedDiffs: [{{path: /a, valueInHub: x, valueInMember: y}}]}}
"
    )
}

fn full_run(alpha: bool) -> String {
    let c = CONDITION_YAML;
    let before = if alpha {
        ""
    } else {
        ", beforeStageTaskStatus: [{type: Approval, approvalRequestName: a, conditions: []}]"
    };
    let stage = format!(
        "{{stageName: s, startTime: t, endTime: t, conditions: [{c}], afterStageTaskStatus: [{{type: TimedWait, conditions: [{c}]}}]{before}, clusters: [{{clusterName: m1, clusterResourceOverrideSnapshots: [x], resourceOverrideSnapshots: [{{name: r, namespace: n}}], conditions: [{c}]}}]}}"
    );
    let stage_config = if alpha {
        "{name: s, sortingLabelKey: k, labelSelector: {matchLabels: {a: b}, matchExpressions: [{key: k, operator: In, values: [v]}]}, afterStageTasks: [{type: TimedWait, waitTime: 1h}]}"
    } else {
        "{name: s, sortingLabelKey: k, maxConcurrency: 1, labelSelector: {matchLabels: {a: b}, matchExpressions: [{key: k, operator: In, values: [v]}]}, afterStageTasks: [{type: TimedWait, waitTime: 1h}], beforeStageTasks: [{type: Approval}]}"
    };
    let resource_index = if alpha {
        ""
    } else {
        "resourceSnapshotIndexUsed: '0'\n"
    };
    format!(
        "conditions: [{c}]
policySnapshotIndexUsed: p
policyObservedClusterCount: 1
{resource_index}appliedStrategy: {{type: ClientSideApply, comparisonOption: PartialComparison, whenToApply: Always, whenToTakeOver: Always, allowCoOwnership: false, serverSideApplyConfig: {{force: true}}}}
stagedUpdateStrategySnapshot: {{stages: [{stage_config}]}}
stagesStatus: [{stage}]
deletionStageStatus: {stage}
"
    )
}

fn full_member(beta: bool) -> String {
    let c = CONDITION_YAML;
    let namespaces = if beta {
        "namespaces: {default: x}\n"
    } else {
        ""
    };
    format!(
        "conditions: [{c}]
{namespaces}agentStatus: [{{type: MemberAgent, lastReceivedHeartbeat: t, conditions: [{c}]}}]
properties: {{k8s.io/node-count: {{value: '3', observationTime: t}}}}
resourceUsage: {{capacity: {{cpu: '4'}}, allocatable: {{cpu: '4'}}, available: {{cpu: 2}}, observationTime: t}}
"
    )
}

fn full_managed_cluster() -> String {
    let c = CONDITION_YAML;
    format!(
        "conditions: [{c}]
capacity: {{cpu: '4'}}
allocatable: {{cpu: 4}}
version: {{kubernetes: v1.30.0}}
clusterClaims: [{{name: id.k8s.io, value: x}}]
managedNamespaces: [{{name: ns, clusterSet: s, conditions: [{c}]}}]
"
    )
}

fn full_manifest_work() -> String {
    let c = CONDITION_YAML;
    format!(
        "conditions: [{c}]
resourceStatus:
  manifests:
  - conditions: [{c}]
    resourceMeta: {{ordinal: 0, group: '', version: v1, kind: ConfigMap, resource: configmaps, name: c, namespace: n}}
    statusFeedback:
      values: [{{name: n, fieldValue: {{type: Integer, integer: 1, string: s, boolean: true, jsonRaw: '{{}}'}}}}]
"
    )
}

fn full_replica_set() -> String {
    let c = CONDITION_YAML;
    let sum = "{total: 1, applied: 1, available: 1, degraded: 0, progressing: 0, desiredTotal: 1, updated: 1}";
    format!(
        "conditions: [{c}]
summary: {sum}
placementSummary: [{{name: p, availableDecisionGroups: '1 (1 / 1 clusters applied)', summary: {sum}}}]
"
    )
}

fn full_ocm_placement() -> String {
    let c = CONDITION_YAML;
    format!(
        "conditions: [{c}]
numberOfSelectedClusters: 1
lastScoreUpdateTime: t
decisionGroups: [{{decisionGroupIndex: 0, decisionGroupName: g, decisions: [d], clusterCount: 1}}]
"
    )
}

const CRP: &str = "placement.kubernetes-fleet.io/v1";
const CRP_BETA: &str = "placement.kubernetes-fleet.io/v1beta1";
const ALPHA: &str = "placement.kubernetes-fleet.io/v1alpha1";
const MEMBER: &str = "cluster.kubernetes-fleet.io/v1";
const MEMBER_BETA: &str = "cluster.kubernetes-fleet.io/v1beta1";
const OCM: &str = "cluster.open-cluster-management.io/v1beta1";
const OCM_V1: &str = "cluster.open-cluster-management.io/v1";
const OCM_BETA2: &str = "cluster.open-cluster-management.io/v1beta2";
const WORK: &str = "work.open-cluster-management.io/v1";
const WORK_ALPHA: &str = "work.open-cluster-management.io/v1alpha1";

shape_tests! {
    status_unknown_field_refused: CRP, "ClusterResourcePlacement";
        "{bogus: 1}" => "status.bogus", "unknown field `bogus`, expected one of `conditions`";
        ok: &full_placement();
    status_condition_unknown_field_refused: CRP, "ClusterResourcePlacement";
        "{conditions: [{type: Scheduled, status: 'True', severity: high}]}" => "status.conditions[0].severity", "expected one of `lastTransitionTime`";
        ok: &full_placement();
    placement_per_cluster_unknown_field_refused: CRP_BETA, "ResourcePlacement";
        "{placementStatuses: [{clusterName: a}, {clusterName: b, bogus: 1}]}" => "status.placementStatuses[1].bogus", "unknown field `bogus`";
        ok: &full_placement();
    placement_failed_placement_unknown_field_refused: CRP, "ClusterResourcePlacement";
        "{placementStatuses: [{failedPlacements: [{kind: A}, {kind: B, bogus: 1}]}]}" => "status.placementStatuses[0].failedPlacements[1].bogus", "unknown field `bogus`";
        ok: &full_placement();
    placement_failed_condition_unknown_field_refused: CRP, "ClusterResourcePlacement";
        "{placementStatuses: [{failedPlacements: [{condition: {type: A, bogus: 1}}]}]}" => "status.placementStatuses[0].failedPlacements[0].condition.bogus", "unknown field `bogus`";
        ok: &full_placement();
    placement_envelope_unknown_field_refused: CRP, "ResourcePlacement";
        "{selectedResources: [{envelope: {name: e, bogus: 1}}]}" => "status.selectedResources[0].envelope.bogus", "expected one of `name`, `namespace`, `type`";
        ok: &full_placement();
    placement_drift_detail_unknown_field_refused: CRP, "ClusterResourcePlacement";
        "{placementStatuses: [{driftedPlacements: [{observedDrifts: [{path: /a, bogus: 1}]}]}]}" => "status.placementStatuses[0].driftedPlacements[0].observedDrifts[0].bogus", "expected one of `path`, `valueInHub`, `valueInMember`";
        ok: &full_placement();
    placement_diff_unknown_field_refused: CRP, "ClusterResourcePlacement";
        "{placementStatuses: [{diffedPlacements: [{firstDriftedObservedTime: t}]}]}" => "status.placementStatuses[0].diffedPlacements[0].firstDriftedObservedTime", "unknown field";
        ok: &full_placement();
    placement_scalar_holding_object_refused: CRP, "ClusterResourcePlacement";
        "{observedResourceIndex: {a: 1}}" => "status.observedResourceIndex.a", "no field is declared here";
        ok: "{observedResourceIndex: 3, placementStatuses: x, conditions: [1, null]}";
    placement_scalar_list_holding_object_refused: CRP, "ClusterResourcePlacement";
        "{placementStatuses: [{applicableClusterResourceOverrides: [a, {b: 1}]}]}" => "status.placementStatuses[0].applicableClusterResourceOverrides[1].b", "no field is declared here";
        ok: "{placementStatuses: [{applicableClusterResourceOverrides: [a, 1]}]}";
    placement_list_holding_object_refused: CRP, "ClusterResourcePlacement";
        "{placementStatuses: {clusterName: a}}" => "status.placementStatuses.clusterName", "no field is declared here";
        ok: "{placementStatuses: []}";
    placement_object_holding_list_refused: CRP, "ClusterResourcePlacement";
        "{placementStatuses: [{failedPlacements: [{envelope: [{name: e}]}]}]}" => "status.placementStatuses[0].failedPlacements[0].envelope[0].name", "no field is declared here";
        ok: "{placementStatuses: [{failedPlacements: [{envelope: null}]}]}";
    run_status_unknown_field_refused: CRP, "ClusterStagedUpdateRun";
        "{stagesStatus: 1, bogus: 1}" => "status.bogus", "unknown field `bogus`";
        ok: &full_run(false);
    run_stage_cluster_unknown_field_refused: CRP_BETA, "StagedUpdateRun";
        "{stagesStatus: [{clusters: [{clusterName: a}, {clusterName: b, bogus: 1}]}]}" => "status.stagesStatus[0].clusters[1].bogus", "unknown field `bogus`";
        ok: &full_run(false);
    run_stage_cluster_condition_unknown_field_refused: CRP, "StagedUpdateRun";
        "{stagesStatus: [{clusters: [{conditions: [{type: A, bogus: 1}]}]}]}" => "status.stagesStatus[0].clusters[0].conditions[0].bogus", "unknown field `bogus`";
        ok: &full_run(false);
    run_deletion_stage_task_unknown_field_refused: CRP, "ClusterStagedUpdateRun";
        "{deletionStageStatus: {beforeStageTaskStatus: [{type: Approval, bogus: 1}]}}" => "status.deletionStageStatus.beforeStageTaskStatus[0].bogus", "expected one of `approvalRequestName`, `conditions`, `type`";
        ok: &full_run(false);
    run_strategy_snapshot_selector_unknown_field_refused: CRP, "ClusterStagedUpdateRun";
        "{stagedUpdateStrategySnapshot: {stages: [{labelSelector: {matchExpressions: [{key: k, bogus: 1}]}}]}}" => "status.stagedUpdateStrategySnapshot.stages[0].labelSelector.matchExpressions[0].bogus", "unknown field `bogus`";
        ok: &full_run(false);
    run_match_labels_holding_object_refused: CRP, "ClusterStagedUpdateRun";
        "{stagedUpdateStrategySnapshot: {stages: [{labelSelector: {matchLabels: {a: {b: c}}}}]}}" => "status.stagedUpdateStrategySnapshot.stages[0].labelSelector.matchLabels.a.b", "no field is declared here";
        ok: &full_run(false);
    run_applied_strategy_unknown_field_refused: CRP, "ClusterStagedUpdateRun";
        "{appliedStrategy: {serverSideApplyConfig: {force: true, bogus: 1}}}" => "status.appliedStrategy.serverSideApplyConfig.bogus", "expected one of `force`";
        ok: &full_run(false);
    run_v1alpha1_before_stage_tasks_refused: ALPHA, "ClusterStagedUpdateRun";
        "{stagesStatus: [{beforeStageTaskStatus: []}]}" => "status.stagesStatus[0].beforeStageTaskStatus", "unknown field";
        ok: &full_run(true);
    run_v1alpha1_resource_snapshot_index_refused: ALPHA, "ClusterStagedUpdateRun";
        "{resourceSnapshotIndexUsed: '0'}" => "status.resourceSnapshotIndexUsed", "unknown field";
        ok: &full_run(true);
    run_v1alpha1_max_concurrency_refused: ALPHA, "ClusterStagedUpdateRun";
        "{stagedUpdateStrategySnapshot: {stages: [{maxConcurrency: 1}]}}" => "status.stagedUpdateStrategySnapshot.stages[0].maxConcurrency", "unknown field";
        ok: &full_run(true);
    approval_status_condition_unknown_field_refused: CRP, "ApprovalRequest";
        "{conditions: [{type: Approved, status: 'True', by: me}]}" => "status.conditions[0].by", "unknown field `by`";
        ok: &format!("conditions: [{CONDITION_YAML}]");
    eviction_status_unknown_field_refused: ALPHA, "ClusterResourcePlacementEviction";
        "{conditions: [], bogus: 1}" => "status.bogus", "expected one of `conditions`";
        ok: &format!("conditions: [{CONDITION_YAML}]");
    member_agent_status_unknown_field_refused: MEMBER, "MemberCluster";
        "{agentStatus: [{type: MemberAgent, bogus: 1}]}" => "status.agentStatus[0].bogus", "unknown field `bogus`";
        ok: &full_member(false);
    member_property_unknown_field_refused: MEMBER_BETA, "MemberCluster";
        "{properties: {a: {value: '1', bogus: 1}}}" => "status.properties.a.bogus", "expected one of `observationTime`, `value`";
        ok: &full_member(true);
    member_resource_usage_unknown_field_refused: MEMBER, "MemberCluster";
        "{resourceUsage: {used: {}}}" => "status.resourceUsage.used", "unknown field `used`";
        ok: &full_member(false);
    member_quantity_holding_object_refused: MEMBER, "MemberCluster";
        "{resourceUsage: {capacity: {cpu: {a: 1}}}}" => "status.resourceUsage.capacity.cpu.a", "no field is declared here";
        ok: &full_member(false);
    member_v1_namespaces_refused: MEMBER, "MemberCluster";
        "{namespaces: {}}" => "status.namespaces", "unknown field `namespaces`";
        ok: &full_member(false);
    managed_cluster_claim_unknown_field_refused: OCM_V1, "ManagedCluster";
        "{clusterClaims: [{name: a, bogus: 1}]}" => "status.clusterClaims[0].bogus", "expected one of `name`, `value`";
        ok: &full_managed_cluster();
    managed_cluster_namespace_condition_unknown_field_refused: OCM_V1, "ManagedCluster";
        "{managedNamespaces: [{conditions: [{bogus: 1}]}]}" => "status.managedNamespaces[0].conditions[0].bogus", "unknown field `bogus`";
        ok: &full_managed_cluster();
    managed_cluster_version_unknown_field_refused: OCM_V1, "ManagedCluster";
        "{version: {kubernetes: v1, openshift: v4}}" => "status.version.openshift", "expected one of `kubernetes`";
        ok: &full_managed_cluster();
    cluster_set_status_unknown_field_refused: OCM_BETA2, "ManagedClusterSet";
        "{conditions: [{bogus: 1}]}" => "status.conditions[0].bogus", "unknown field `bogus`";
        ok: &format!("conditions: [{CONDITION_YAML}]");
    cluster_set_binding_status_unknown_field_refused: OCM_BETA2, "ManagedClusterSetBinding";
        "{bogus: 1}" => "status.bogus", "unknown field `bogus`";
        ok: &format!("conditions: [{CONDITION_YAML}]");
    ocm_placement_decision_group_unknown_field_refused: OCM, "Placement";
        "{decisionGroups: [{decisionGroupIndex: 0, bogus: 1}]}" => "status.decisionGroups[0].bogus", "expected one of `clusterCount`";
        ok: &full_ocm_placement();
    placement_decision_unknown_field_refused: OCM, "PlacementDecision";
        "{decisions: [{clusterName: a, reason: r}, {clusterName: b, weight: 1}]}" => "status.decisions[1].weight", "expected one of `clusterName`, `reason`, `score`";
        ok: "{decisions: [{clusterName: a, reason: r, score: 1}]}";
    manifest_work_resource_meta_unknown_field_refused: WORK, "ManifestWork";
        "{resourceStatus: {manifests: [{resourceMeta: {kind: ConfigMap, bogus: 1}}]}}" => "status.resourceStatus.manifests[0].resourceMeta.bogus", "unknown field `bogus`";
        ok: &full_manifest_work();
    manifest_work_feedback_value_unknown_field_refused: WORK, "ManifestWork";
        "{resourceStatus: {manifests: [{statusFeedback: {values: [{name: n, fieldValue: {type: String, bogus: 1}}]}}]}}" => "status.resourceStatus.manifests[0].statusFeedback.values[0].fieldValue.bogus", "expected one of `boolean`";
        ok: &full_manifest_work();
    replica_set_summary_unknown_field_refused: WORK_ALPHA, "ManifestWorkReplicaSet";
        "{placementSummary: [{name: p, summary: {total: 1, bogus: 1}}]}" => "status.placementSummary[0].summary.bogus", "expected one of `applied`";
        ok: &full_replica_set();
}

#[test]
fn every_problem_of_a_status_is_found_at_once() {
    let got = problems(
        CRP,
        "ClusterResourcePlacement",
        "{a: 1, placementStatuses: [{b: 1, failedPlacements: [{c: 1}]}]}",
    );
    let fields: Vec<&str> = got.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "status.a",
            "status.placementStatuses[0].b",
            "status.placementStatuses[0].failedPlacements[0].c"
        ]
    );
}

#[test]
fn a_status_of_a_kind_without_one_or_a_scalar_status_is_not_checked() {
    assert!(problems(CRP, "ClusterResourceOverride", "{bogus: 1}").is_empty());
    assert!(problems(CRP, "ClusterResourcePlacement", "x").is_empty());
}

#[test]
fn an_unlisted_version_takes_the_kinds_first_shape() {
    // The catalog refuses the version; this only keeps the check from going silent.
    let got = problems(
        "placement.kubernetes-fleet.io/v2",
        "ClusterResourcePlacement",
        "{bogus: 1}",
    );
    assert_eq!(got.len(), 1, "{got:?}");
}
