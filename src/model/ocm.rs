//! OCM placement and workload APIs: `Placement` (cluster.open-cluster-management.io v1beta1) and
//! `ManifestWorkReplicaSet` (work.open-cluster-management.io v1alpha1), with their defaults and
//! the rules the real hub enforces **at admission**. Pure: matching clusters, scoring and
//! grouping belong to the scheduler; the rollout of a replica set belongs to the rollout.
//!
//! # Admission-time and schedule-time rules
//! A rule the hub enforces when the object is written (CRD schema, validating webhook) makes
//! the commit invalid here. A rule the hub only meets while scheduling is reported on that one
//! placement (`PlacementMisconfigured=True`, no decisions) and every other placement is
//! scheduled as usual; those live in `schedule::ocm`, not here. OCM has no validating webhook
//! for `Placement` (pkg/registration/webhook serves ManagedCluster and
//! ManagedClusterSetBinding only), so for a Placement admission is the CRD schema alone
//! (manifests/cluster-manager/hub/crds/0000_02_clusters.open-cluster-management.io_placements.crd.yaml).
//!
//! Admission-time (rejected here):
//! - `prioritizerPolicy.configurations[].weight` in [-10, 10] (CRD minimum/maximum);
//! - `spreadPolicy.spreadConstraints`: at most 8 (maxItems), `topologyKey` pattern, `maxSkew` ≥ 1;
//! - `tolerations[].key` pattern and length 316, `value` length 1024, the enum of `effect`
//!   (CRD); `operator` `Equal` or `Exists`: **a gitfleet deviation** (the CRD has no enum), said
//!   so in the diagnostic;
//! - `decisionStrategy.groupStrategy.clustersPerDecisionGroup` pattern and
//!   `decisionGroups[].groupName` pattern (CRD); `scoreRateLimit` pattern (CRD);
//! - label and claim selectors well formed (Kubernetes' LabelSelector rules): **a gitfleet
//!   deviation**, said so in each diagnostic. The CRD does not carry these rules (the test
//!   bed's API server admits an unknown operator, a bad key, `In` without values), so a hub
//!   admits such a selector and its scheduler cannot evaluate it;
//! - `numberOfClusters` ≥ 0: **a gitfleet deviation**, said so in the diagnostic. The CRD has no minimum, and OCM's
//!   scheduler slices its candidates with the count (pkg/placement/controllers/scheduling/
//!   schedule.go, selectClusters), which cannot run with a negative one; rejecting is the only
//!   behaviour that can be reproduced.
//!
//! Schedule-time (`PlacementMisconfigured` on the placement, see `schedule::ocm`):
//! - a toleration with an empty key and operator `Equal`, or `Exists` with a value
//!   (pkg/placement/plugins/tainttoleration/taint_toleration.go; its tests
//!   taint_toleration_test.go and test/integration/placement/placement_test.go "Should schedule
//!   successfully once MisConfigured is fixed");
//! - an unknown built-in prioritizer, an `AddOn` score coordinate without `addOn`
//!   (pkg/placement/controllers/scheduling/schedule.go, getPrioritizers);
//! - `clustersPerDecisionGroup` given as a string that is not a percentage
//!   (scheduling_controller.go, the decision group length);
//! - CEL expressions that do not compile, empty ones included (the CEL selector of
//!   pkg/placement/plugins/predicate).

use super::member::{
    check_name, check_requirement_list, check_selector, ocm_key_problem, ManagedClusterTaint,
    OcmTaintEffect,
};
use super::object::ObjectMeta;
use super::placement::IntOrPercent;
use super::selector::{LabelSelector, LabelSelectorRequirement};
use super::{ApiObject, Problem, Problems};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::collections::HashSet;

/// The OCM cluster API group (Placement, ManagedCluster, sets).
pub const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
/// The OCM work API group.
pub const WORK_GROUP: &str = "work.open-cluster-management.io";
/// Built-in prioritizer: spread decisions over clusters (default weight 1 in Additive mode).
pub const PRIORITIZER_BALANCE: &str = "Balance";
/// Built-in prioritizer: keep existing decisions (default weight 1 in Additive mode).
pub const PRIORITIZER_STEADY: &str = "Steady";
/// Built-in prioritizer: most allocatable CPU.
pub const PRIORITIZER_ALLOCATABLE_CPU: &str = "ResourceAllocatableCPU";
/// Built-in prioritizer: most allocatable memory.
pub const PRIORITIZER_ALLOCATABLE_MEMORY: &str = "ResourceAllocatableMemory";
/// The built-in prioritizers the OCM scheduler knows (`Spread`, though documented, is not one).
pub const BUILTIN_PRIORITIZERS: &[&str] = &[
    PRIORITIZER_BALANCE,
    PRIORITIZER_STEADY,
    PRIORITIZER_ALLOCATABLE_CPU,
    PRIORITIZER_ALLOCATABLE_MEMORY,
];
/// Most spread constraints a placement may have.
pub const MAX_SPREAD_CONSTRAINTS: usize = 8;
/// Most bytes of manifests a ManifestWork (and so a replica set's template) may carry.
pub const MAX_MANIFEST_BYTES: usize = 500 * 1024;

const GROUP_NAME_PATTERN: &str = "^[a-zA-Z0-9][-A-Za-z0-9_.]{0,61}[a-zA-Z0-9]$";
const CLUSTERS_PER_GROUP_PATTERN: &str = "^((100|[1-9][0-9]{0,1})%|[1-9][0-9]*)$";
const SCORE_RATE_LIMIT_PATTERN: &str = "^[0-9]+[hms]$";
const PROGRESS_DEADLINE_PATTERN: &str = "^(([0-9])+[h|m|s])|None$";
const ROLLOUT_COUNT_PATTERN: &str = "^((100|[0-9]{1,2})%|[0-9]+)$";

// ---------------------------------------------------------------------------------------------
// Placement
// ---------------------------------------------------------------------------------------------

/// An OCM `Placement` (namespaced): which managed clusters of the sets bound to its namespace
/// get a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OcmPlacement {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    /// Required, but `{}` is a valid spec (every cluster of the bound sets).
    pub spec: OcmPlacementSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OcmPlacementSpec {
    /// Empty: every set bound to the namespace; otherwise the intersection with the bound sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_sets: Vec<String>,
    /// Absent: every feasible cluster. Must not be negative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_clusters: Option<i32>,
    /// ORed; empty selects every cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicates: Vec<ClusterPredicate>,
    #[serde(default)]
    pub prioritizer_policy: PrioritizerPolicy,
    /// Accepted and ignored, as OCM's scheduler ignores it.
    #[serde(default)]
    pub spread_policy: SpreadPolicy,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<OcmToleration>,
    #[serde(default)]
    pub decision_strategy: DecisionStrategy,
    /// Default `ClusterName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_by: Option<SortBy>,
    /// Default `1m`; `^[0-9]+[hms]$`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_rate_limit: Option<String>,
}

/// One predicate: all of its selectors must match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterPredicate {
    #[serde(default)]
    pub required_cluster_selector: OcmClusterSelector,
}

/// Label AND claim AND CEL selectors; empty matches every cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OcmClusterSelector {
    #[serde(default)]
    pub label_selector: LabelSelector,
    #[serde(default)]
    pub claim_selector: ClaimSelector,
    #[serde(default)]
    pub cel_selector: CelSelector,
}

/// Requirements over a cluster's `status.clusterClaims`, shaped like label requirements.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimSelector {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// CEL expressions over the `ManagedCluster`, ANDed (evaluated by the scheduler, not here).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelSelector {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrioritizerPolicy {
    /// Default `Additive` (`""` also means Additive).
    #[serde(default)]
    pub mode: PrioritizerMode,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configurations: Vec<PrioritizerConfig>,
}

/// How configured prioritizers combine with the defaults (Balance 1, Steady 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum PrioritizerMode {
    /// Defaults, overridden by the configured entries.
    #[default]
    Additive,
    /// Only the configured entries.
    Exact,
}

impl<'de> Deserialize<'de> for PrioritizerMode {
    /// The CRD has no enum on `mode`; the scheduler accepts `""`, `Additive` and `Exact` and calls
    /// anything else (`exact` included) a misconfiguration.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "" | "Additive" => Ok(PrioritizerMode::Additive),
            "Exact" => Ok(PrioritizerMode::Exact),
            other => Err(serde::de::Error::custom(format!(
                "incorrect prioritizer policy mode: {other}"
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrioritizerConfig {
    pub score_coordinate: ScoreCoordinate,
    /// [-10, 10], default 1; 0 disables the prioritizer. See [`PrioritizerConfig::weight`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoreCoordinate {
    /// Default `BuiltIn`.
    #[serde(rename = "type", default)]
    pub type_: ScoreCoordinateType,
    /// One of [`BUILTIN_PRIORITIZERS`] when the type is `BuiltIn`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub built_in: String,
    /// Required when the type is `AddOn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on: Option<AddOnScore>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScoreCoordinateType {
    #[default]
    BuiltIn,
    AddOn,
}

/// Score `scoreName` of the `AddOnPlacementScore` named `resourceName` in each cluster's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddOnScore {
    pub resource_name: String,
    pub score_name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpreadPolicy {
    /// At most [`MAX_SPREAD_CONSTRAINTS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread_constraints: Vec<SpreadConstraint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpreadConstraint {
    pub topology_key: String,
    pub topology_key_type: TopologyKeyType,
    /// Default 1, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_skew: Option<i32>,
    /// Default `ScheduleAnyway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_unsatisfiable: Option<WhenUnsatisfiable>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopologyKeyType {
    Label,
    Claim,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    #[default]
    ScheduleAnyway,
}

impl SpreadConstraint {
    pub fn max_skew(&self) -> i32 {
        self.max_skew.unwrap_or(1)
    }
    pub fn when_unsatisfiable(&self) -> WhenUnsatisfiable {
        self.when_unsatisfiable.unwrap_or_default()
    }
}

/// Lets a placement select clusters with matching taints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OcmToleration {
    /// Empty matches every key (and then the operator must be `Exists`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Default `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<OcmTolerationOperator>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Absent matches every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<OcmTaintEffect>,
    /// Absent: forever. Counted from the taint's `timeAdded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum OcmTolerationOperator {
    #[default]
    Equal,
    Exists,
}

/// The CRD has no enum for the operator (a hub admits `Gt`); OCM's taint-toleration plugin
/// knows only these two, so gitfleet refuses any other and says whose rule that is.
impl<'de> Deserialize<'de> for OcmTolerationOperator {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "Equal" => Ok(Self::Equal),
            "Exists" => Ok(Self::Exists),
            other => Err(serde::de::Error::custom(format!(
                "unknown toleration operator {other:?}: Equal or Exists ({OWN_RULE}; its scheduler knows no other)"
            ))),
        }
    }
}

impl OcmToleration {
    pub fn operator(&self) -> OcmTolerationOperator {
        self.operator.unwrap_or_default()
    }

    /// Does this toleration match the taint (effect, key, operator and value)? Whether
    /// `tolerationSeconds` has run out since the taint's `timeAdded` is the scheduler's question,
    /// as it needs the clock.
    pub fn matches(&self, taint: &ManagedClusterTaint) -> bool {
        self.effect.is_none_or(|e| e == taint.effect)
            && (self.key.is_empty() || self.key == taint.key)
            && match self.operator() {
                OcmTolerationOperator::Equal => self.value == taint.value,
                OcmTolerationOperator::Exists => true,
            }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionStrategy {
    #[serde(default)]
    pub group_strategy: GroupStrategy,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupStrategy {
    /// Processed in order; a cluster joins the first group whose selector matches it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroup>,
    /// An integer or `"N%"` of the selected clusters; default `"100%"`. See
    /// [`GroupStrategy::clusters_per_group`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters_per_decision_group: Option<IntOrPercent>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionGroup {
    /// `^[a-zA-Z0-9][-A-Za-z0-9_.]{0,61}[a-zA-Z0-9]$`.
    pub group_name: String,
    pub group_cluster_selector: GroupClusterSelector,
}

/// Label AND claim selectors (no CEL in decision groups).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupClusterSelector {
    #[serde(default)]
    pub label_selector: LabelSelector,
    #[serde(default)]
    pub claim_selector: ClaimSelector,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortBy {
    #[default]
    ClusterName,
    Score,
}

impl GroupStrategy {
    /// Clusters per decision group for `total` selected clusters, as OCM computes it: an integer
    /// as given; a percentage of `total` rounded up; default 100%; a result of 0 or less, or more
    /// than `total`, means all of them.
    pub fn clusters_per_group(&self, total: usize) -> usize {
        let n: i64 = match &self.clusters_per_decision_group {
            None => total as i64,
            Some(IntOrPercent::Int(i)) => *i,
            Some(IntOrPercent::String(s)) => match s.strip_suffix('%') {
                Some(p) => p
                    .parse::<f64>()
                    .map(|p| (p / 100.0 * total as f64).ceil() as i64)
                    .unwrap_or(total as i64),
                None => total as i64,
            },
        };
        if n <= 0 || n as usize > total {
            total
        } else {
            n as usize
        }
    }
}

impl PrioritizerConfig {
    /// `weight`, defaulted to 1.
    pub fn weight(&self) -> i32 {
        self.weight.unwrap_or(1)
    }
}

impl OcmPlacement {
    pub fn sort_by(&self) -> SortBy {
        self.spec.sort_by.unwrap_or_default()
    }

    /// `scoreRateLimit`, default `1m`.
    pub fn score_rate_limit(&self) -> &str {
        self.spec.score_rate_limit.as_deref().unwrap_or("1m")
    }

    /// The prioritizers the scheduler builds, with their weights, as `getWeights` merges them:
    /// in Additive mode Balance 1 and Steady 1, then each configured entry (a later BuiltIn entry
    /// of the same name replaces an earlier one; every AddOn entry counts on its own); in Exact
    /// mode only the configured entries. Weight-0 entries are dropped. Order: built-ins by name,
    /// then add-ons in configuration order.
    pub fn prioritizer_weights(&self) -> Vec<(ScoreCoordinate, i32)> {
        let policy = &self.spec.prioritizer_policy;
        let mut builtins: std::collections::BTreeMap<String, i32> = Default::default();
        if policy.mode == PrioritizerMode::Additive {
            builtins.insert(PRIORITIZER_BALANCE.into(), 1);
            builtins.insert(PRIORITIZER_STEADY.into(), 1);
        }
        let mut addons = Vec::new();
        for c in &policy.configurations {
            match c.score_coordinate.type_ {
                ScoreCoordinateType::BuiltIn => {
                    builtins.insert(c.score_coordinate.built_in.clone(), c.weight());
                }
                ScoreCoordinateType::AddOn => addons.push((c.score_coordinate.clone(), c.weight())),
            }
        }
        builtins
            .into_iter()
            .map(|(name, w)| {
                (
                    ScoreCoordinate {
                        type_: ScoreCoordinateType::BuiltIn,
                        built_in: name,
                        add_on: None,
                    },
                    w,
                )
            })
            .chain(addons)
            .filter(|(_, w)| *w != 0)
            .collect()
    }
}

impl ApiObject for OcmPlacement {
    /// A label or claim selector's operator is a Kubernetes LabelSelector operator, which
    /// OCM's CRD does not enumerate: a hub admits another and fails only when it schedules.
    fn decode_problem(mut problem: Problem) -> Problem {
        let selector_operator =
            problem.field.contains(".matchExpressions[") && problem.field.ends_with(".operator");
        if selector_operator && problem.message.starts_with("unknown variant") {
            problem.message = format!(
                "{} ({OWN_RULE}; its scheduler cannot evaluate the selector)",
                problem.message
            );
        }
        problem
    }

    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, None, &mut p);
        let spec = &self.spec;
        if let Some(n) = spec.number_of_clusters {
            if n < 0 {
                p.push(
                    "spec.numberOfClusters",
                    format!("must be greater than or equal to 0, got {n} ({OWN_RULE}; OCM's scheduler cannot select a negative number of clusters)"),
                );
            }
        }
        for (i, pred) in spec.predicates.iter().enumerate() {
            let f = format!("spec.predicates[{i}].requiredClusterSelector");
            let sel = &pred.required_cluster_selector;
            own_selector_rules(&mut p, |p| {
                check_selector(&format!("{f}.labelSelector"), &sel.label_selector, p);
                check_requirement_list(
                    &format!("{f}.claimSelector"),
                    &sel.claim_selector.match_expressions,
                    p,
                );
            });
        }
        validate_prioritizers(&spec.prioritizer_policy, &mut p);
        validate_spread(&spec.spread_policy, &mut p);
        validate_tolerations(&spec.tolerations, &mut p);
        validate_groups(&spec.decision_strategy.group_strategy, &mut p);
        if let Some(limit) = &spec.score_rate_limit {
            let digits = limit.bytes().take_while(u8::is_ascii_digit).count();
            let ok = digits > 0
                && digits + 1 == limit.len()
                && matches!(limit.as_bytes()[digits], b'h' | b'm' | b's');
            if !ok {
                p.push(
                    "spec.scoreRateLimit",
                    format!("{limit:?} must match '{SCORE_RATE_LIMIT_PATTERN}'"),
                );
            }
        }
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

fn validate_prioritizers(policy: &PrioritizerPolicy, p: &mut Problems) {
    for (i, c) in policy.configurations.iter().enumerate() {
        let f = format!("spec.prioritizerPolicy.configurations[{i}]");
        let w = c.weight();
        if !(-10..=10).contains(&w) {
            p.push(
                format!("{f}.weight"),
                format!("must be between -10 and 10, got {w}"),
            );
        }
        // Unknown built-ins and AddOn coordinates without `addOn` are schedule-time
        // (module doc): the scheduler reports them on the placement.
    }
}

fn validate_spread(spread: &SpreadPolicy, p: &mut Problems) {
    let f = "spec.spreadPolicy.spreadConstraints";
    let n = spread.spread_constraints.len();
    if n > MAX_SPREAD_CONSTRAINTS {
        p.push(
            f,
            format!("must have at most {MAX_SPREAD_CONSTRAINTS} items, got {n}"),
        );
    }
    for (i, c) in spread.spread_constraints.iter().enumerate() {
        if let Some(msg) = ocm_key_problem(&c.topology_key) {
            p.push(format!("{f}[{i}].topologyKey"), msg);
        }
        if c.max_skew() < 1 {
            p.push(
                format!("{f}[{i}].maxSkew"),
                format!("must be greater than or equal to 1, got {}", c.max_skew()),
            );
        }
    }
}

fn validate_tolerations(tolerations: &[OcmToleration], p: &mut Problems) {
    for (i, t) in tolerations.iter().enumerate() {
        let f = format!("spec.tolerations[{i}]");
        if !t.key.is_empty() {
            if let Some(msg) = ocm_key_problem(&t.key) {
                p.push(format!("{f}.key"), msg);
            }
        }
        if t.value.len() > 1024 {
            p.push(
                format!("{f}.value"),
                format!(
                    "must be no more than 1024 characters, got {}",
                    t.value.len()
                ),
            );
        }
        // An empty key with Equal, or Exists with a value, is schedule-time (module doc).
    }
}

fn validate_groups(g: &GroupStrategy, p: &mut Problems) {
    let f = "spec.decisionStrategy.groupStrategy";
    if let Some(IntOrPercent::String(s)) = &g.clusters_per_decision_group {
        let field = format!("{f}.clustersPerDecisionGroup");
        let pct_ok = |d: &str| {
            d == "100"
                || (matches!(d.len(), 1 | 2)
                    && d.bytes().all(|b| b.is_ascii_digit())
                    && !d.starts_with('0'))
        };
        let int_ok =
            |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0');
        match s.strip_suffix('%') {
            Some(d) if pct_ok(d) => {}
            // The CRD pattern admits "5" as a string; only the scheduler rejects it (module doc).
            None if int_ok(s) => {}
            _ => p.push(
                field,
                format!("{s:?} must match '{CLUSTERS_PER_GROUP_PATTERN}'"),
            ),
        }
    }
    for (i, group) in g.decision_groups.iter().enumerate() {
        let gf = format!("{f}.decisionGroups[{i}]");
        if !is_group_name(&group.group_name) {
            p.push(
                format!("{gf}.groupName"),
                format!("{:?} must match '{GROUP_NAME_PATTERN}'", group.group_name),
            );
        }
        let sel = &group.group_cluster_selector;
        own_selector_rules(p, |p| {
            check_selector(
                &format!("{gf}.groupClusterSelector.labelSelector"),
                &sel.label_selector,
                p,
            );
            check_requirement_list(
                &format!("{gf}.groupClusterSelector.claimSelector"),
                &sel.claim_selector.match_expressions,
                p,
            );
        });
    }
}

/// How a diagnostic says a rule is gitfleet's and not the hub's: OCM's CRD has no such rule
/// and OCM serves no validating webhook for Placement, so a real hub admits the object.
const OWN_RULE: &str = "gitfleet's own rule: an OCM hub admits it";

/// Label and claim selectors of a Placement: Kubernetes' LabelSelector rules (keys, values,
/// operators and their values), which the CRD does not carry, so a real hub admits a bad one
/// and fails only when it schedules. gitfleet refuses it in the commit, and says whose rule
/// that is.
fn own_selector_rules(p: &mut Problems, check: impl FnOnce(&mut Problems)) {
    let mut own = Problems::default();
    check(&mut own);
    for problem in own.0 {
        p.push(
            problem.field,
            format!(
                "{} ({OWN_RULE}; its scheduler cannot evaluate the selector)",
                problem.message
            ),
        );
    }
}

/// `^[a-zA-Z0-9][-A-Za-z0-9_.]{0,61}[a-zA-Z0-9]$`: 2 to 63 characters.
fn is_group_name(s: &str) -> bool {
    let b = s.as_bytes();
    (2..=63).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

// ---------------------------------------------------------------------------------------------
// ManifestWorkReplicaSet
// ---------------------------------------------------------------------------------------------

/// An OCM `ManifestWorkReplicaSet` (namespaced): one ManifestWork per cluster decided by the
/// referenced placements of its namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestWorkReplicaSet {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ManifestWorkReplicaSetSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestWorkReplicaSetSpec {
    #[serde(default)]
    pub manifest_work_template: ManifestWorkTemplate,
    /// At least one.
    pub placement_refs: Vec<LocalPlacementReference>,
    /// Default `Background`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cascade_deletion_policy: Option<CascadeDeletionPolicy>,
}

/// A `ManifestWorkSpec`: the manifests are kept as JSON objects; the other fields are kept as
/// given (the work agent interprets them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestWorkTemplate {
    #[serde(default)]
    pub workload: Workload,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<super::work::DeleteOption>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest_configs: Vec<super::work::ManifestConfigOption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CascadeDeletionPolicy {
    #[default]
    Background,
    Foreground,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalPlacementReference {
    /// A `Placement` in the replica set's namespace.
    pub name: String,
    /// Default `{type: All, all: {progressDeadline: None}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<OcmRolloutStrategy>,
}

/// How a replica set rolls its works out over the decision groups. Strict on its own fields; the
/// per-type settings below it are read leniently (fields unknown to this version are ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OcmRolloutStrategy {
    /// Default `All`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<OcmRolloutType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<RolloutConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive: Option<RolloutProgressive>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive_per_group: Option<RolloutProgressivePerGroup>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OcmRolloutType {
    #[default]
    All,
    Progressive,
    ProgressivePerGroup,
}

/// Timing and failure tolerance shared by the rollout types (the `all` settings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutConfig {
    /// A Go duration, default `0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success_time: Option<String>,
    /// `<n>h|m|s` or `None` (the default: wait forever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<String>,
    /// Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<IntOrPercent>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressive {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<IntOrPercent>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
    /// Default: from the placement's `clustersPerDecisionGroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<IntOrPercent>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressivePerGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<IntOrPercent>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
}

/// A decision group by name (checked first) or index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MandatoryDecisionGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_index: Option<i32>,
}

impl ManifestWorkReplicaSet {
    pub fn cascade_deletion_policy(&self) -> CascadeDeletionPolicy {
        self.spec.cascade_deletion_policy.unwrap_or_default()
    }
}

impl LocalPlacementReference {
    /// The rollout type, default `All`.
    pub fn rollout_type(&self) -> OcmRolloutType {
        self.rollout_strategy
            .as_ref()
            .and_then(|r| r.type_)
            .unwrap_or_default()
    }
}

impl OcmRolloutStrategy {
    /// What takes effect: the type (default `All`) with that type's settings only, so two
    /// strategies that roll out alike compare equal.
    pub fn effective(&self) -> OcmRolloutStrategy {
        let type_ = self.type_.unwrap_or_default();
        OcmRolloutStrategy {
            type_: Some(type_),
            all: (type_ == OcmRolloutType::All).then(|| self.all.clone().unwrap_or_default()),
            progressive: (type_ == OcmRolloutType::Progressive)
                .then(|| self.progressive.clone().unwrap_or_default()),
            progressive_per_group: (type_ == OcmRolloutType::ProgressivePerGroup)
                .then(|| self.progressive_per_group.clone().unwrap_or_default()),
        }
    }
}

impl LocalPlacementReference {
    /// The strategy that takes effect ([`OcmRolloutStrategy::effective`]).
    pub fn effective_strategy(&self) -> OcmRolloutStrategy {
        self.rollout_strategy
            .clone()
            .unwrap_or_default()
            .effective()
    }
}

impl ApiObject for ManifestWorkReplicaSet {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, None, &mut p);
        validate_manifests(
            "spec.manifestWorkTemplate.workload.manifests",
            &self.spec.manifest_work_template.workload.manifests,
            &mut p,
        );
        super::work::validate_config(
            "spec.manifestWorkTemplate",
            &self.spec.manifest_work_template,
            &mut p,
        );
        let refs = &self.spec.placement_refs;
        if refs.is_empty() {
            p.push(
                "spec.placementRefs",
                "Required value: at least one placement reference is required",
            );
        }
        for (i, r) in refs.iter().enumerate() {
            let f = format!("spec.placementRefs[{i}]");
            if r.name.is_empty() {
                p.push(format!("{f}.name"), "Required value");
            }
            if let Some(rs) = &r.rollout_strategy {
                validate_rollout(rs, &format!("{f}.rolloutStrategy"), &mut p);
            }
        }
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

/// What of OCM's work API gitfleet does not carry out: refused, never accepted and
/// ignored: the work options gitfleet does not honour ([`super::work::not_built`]'s).
pub fn not_built(m: &ManifestWorkReplicaSet) -> Vec<Problem> {
    super::work::not_built("spec.manifestWorkTemplate", &m.spec.manifest_work_template)
}

/// The OCM work webhook's manifest rules; `f` is the manifests' field path.
pub(crate) fn validate_manifests(f: &str, manifests: &[Value], p: &mut Problems) {
    if manifests.is_empty() {
        p.push(f, "Workload manifests should not be empty");
        return;
    }
    let size: usize = manifests.iter().map(manifest_size).sum();
    if size > MAX_MANIFEST_BYTES {
        p.push(
            f,
            format!("the size of manifests is {size} bytes which exceeds the {MAX_MANIFEST_BYTES} limit"),
        );
    }
    let mut seen = HashSet::new();
    for (i, m) in manifests.iter().enumerate() {
        let mf = format!("{f}[{i}]");
        let Some(obj) = m.as_object() else {
            p.push(mf, "manifest must be a JSON object");
            continue;
        };
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
        let api_version = text(obj.get("apiVersion"));
        let kind = text(obj.get("kind"));
        let meta = obj.get("metadata");
        let name = text(meta.and_then(|m| m.get("name")));
        let namespace = text(meta.and_then(|m| m.get("namespace")));
        let mut ok = true;
        for (field, v, msg) in [
            (
                "apiVersion",
                &api_version,
                // OCM's webhook decodes the manifest as unstructured, which requires a kind
                // but not an apiVersion; no work agent can apply it.
                "Object 'apiVersion' is missing in manifest (gitfleet's own rule: OCM's work webhook admits it, but no work agent can apply an object without one)",
            ),
            ("kind", &kind, "Object 'Kind' is missing in manifest"),
            ("metadata.name", &name, "name must be set in manifest"),
        ] {
            if v.is_empty() {
                p.push(format!("{mf}.{field}"), msg);
                ok = false;
            }
        }
        if meta.and_then(|m| m.get("generateName")).is_some() {
            p.push(
                format!("{mf}.metadata.generateName"),
                "generateName must not be set in manifest",
            );
        }
        if ok
            && !seen.insert((
                api_version.clone(),
                kind.clone(),
                namespace.clone(),
                name.clone(),
            ))
        {
            p.push(
                mf,
                format!(
                    "duplicate manifest for resource {namespace}/{name} with resource type {api_version}.{kind}"
                ),
            );
        }
    }
}

/// A manifest's size as OCM's work webhook counts it: the protobuf size of the `Manifest`
/// wrapping the raw JSON the API server hands it (Go's encoding: compact, with `<`, `>`, `&`,
/// U+2028 and U+2029 escaped as `\uXXXX`).
fn manifest_size(m: &Value) -> usize {
    // The length of a protobuf varint.
    fn varint(n: usize) -> usize {
        (usize::BITS - (n | 1).leading_zeros()).div_ceil(7) as usize
    }
    let Ok(json) = serde_json::to_string(m) else {
        return 0;
    };
    let escapes: usize = json
        .chars()
        .map(|c| match c {
            '<' | '>' | '&' => 5,
            '\u{2028}' | '\u{2029}' => 3,
            _ => 0,
        })
        .sum();
    let raw = json.len() + escapes;
    // RawExtension{Raw} inside Manifest{RawExtension}: a tag and a length each.
    let extension = 1 + varint(raw) + raw;
    1 + varint(extension) + extension
}

fn validate_rollout(rs: &OcmRolloutStrategy, f: &str, p: &mut Problems) {
    let check_deadline = |field: String, v: &Option<String>, p: &mut Problems| {
        if let Some(s) = v {
            if !is_progress_deadline(s) {
                p.push(
                    field,
                    format!("{s:?} must match '{PROGRESS_DEADLINE_PATTERN}'"),
                );
            }
        }
    };
    let check_count = |field: String, v: &Option<IntOrPercent>, p: &mut Problems| {
        if let Some(IntOrPercent::String(s)) = v {
            if !is_rollout_count(s) {
                p.push(field, format!("{s:?} must match '{ROLLOUT_COUNT_PATTERN}'"));
            }
        }
    };
    // `minSuccessTime` is a `metav1.Duration` in a string the CRD does not constrain: OCM's
    // controller cannot read what Go's duration parser refuses.
    let check_duration = |field: String, v: &Option<String>, p: &mut Problems| {
        if let Some(s) = v {
            if go_duration_secs(s).is_none() {
                p.push(
                    field,
                    format!("{s:?} is not a duration such as 30s, 5m or 1h30m (gitfleet's own rule: an OCM hub admits it; OCM's controller cannot read it)"),
                );
            }
        }
    };
    if let Some(c) = &rs.all {
        check_duration(format!("{f}.all.minSuccessTime"), &c.min_success_time, p);
        check_deadline(format!("{f}.all.progressDeadline"), &c.progress_deadline, p);
        check_count(format!("{f}.all.maxFailures"), &c.max_failures, p);
    }
    if let Some(c) = &rs.progressive {
        let g = format!("{f}.progressive");
        check_duration(format!("{g}.minSuccessTime"), &c.min_success_time, p);
        check_deadline(format!("{g}.progressDeadline"), &c.progress_deadline, p);
        check_count(format!("{g}.maxFailures"), &c.max_failures, p);
        check_count(format!("{g}.maxConcurrency"), &c.max_concurrency, p);
    }
    if let Some(c) = &rs.progressive_per_group {
        let g = format!("{f}.progressivePerGroup");
        check_duration(format!("{g}.minSuccessTime"), &c.min_success_time, p);
        check_deadline(format!("{g}.progressDeadline"), &c.progress_deadline, p);
        check_count(format!("{g}.maxFailures"), &c.max_failures, p);
    }
}

/// The CRD pattern `^(([0-9])+[h|m|s])|None$` taken literally, as the API server does: a run of
/// digits followed by `h`, `m`, `s` or `|` at the start, or `None` at the end (so `5m30s` passes).
pub(crate) fn is_progress_deadline(s: &str) -> bool {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && matches!(s.as_bytes().get(digits), Some(b'h' | b'm' | b's' | b'|')))
        || s.ends_with("None")
}

/// A Go duration (`time.ParseDuration`: `300ms`, `-1.5h`, `2h45m`; units ns, us, µs, ms, s,
/// m, h) in whole seconds, rounded up; a negative one is 0. `None` when Go would not parse it.
pub fn go_duration_secs(s: &str) -> Option<u64> {
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let negative = s.starts_with('-');
    if body == "0" {
        return Some(0);
    }
    if body.is_empty() {
        return None;
    }
    let mut rest = body;
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        nanos += value * scale;
    }
    if negative {
        return Some(0);
    }
    Some((nanos / 1e9).ceil() as u64)
}

/// `^((100|[0-9]{1,2})%|[0-9]+)$`.
fn is_rollout_count(s: &str) -> bool {
    match s.strip_suffix('%') {
        Some(d) => {
            d == "100" || (matches!(d.len(), 1 | 2) && d.bytes().all(|b| b.is_ascii_digit()))
        }
        None => !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::decode;
    use crate::model::testing::*;

    /// The Placement documents of ocm-examples/ (the multicluster-gateway one equals the helm one
    /// but for `numberOfClusters: 2`).
    const EXAMPLES: &[&str] = &[
        // deploy-a-helm-chart--placement.yaml
        r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: demo-placement
  namespace: default
spec:
  numberOfClusters: 1
  clusterSets:
    - default
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels:
            purpose: test
"#,
        // deploy-argocd-apps--guestbook-app-placement.yaml
        r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: guestbook-app-placement
  namespace: argocd
spec: {}
"#,
        // kueue-admission-check--placement-demo2-1.yaml
        r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: multikueue-config-demo2
  namespace: kueue-system
spec:
  clusterSets:
  - global
  tolerations:
  - key: cluster.open-cluster-management.io/unreachable
    operator: Exists
  - key: cluster.open-cluster-management.io/unavailable
    operator: Exists
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels:
            accelerator: nvidia-tesla-t4
"#,
        // kueue-admission-check--placement-demo2-2.yaml
        r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: multikueue-config-demo2
  namespace: kueue-system
spec:
  clusterSets:
  - global
  tolerations:
  - key: cluster.open-cluster-management.io/unreachable
    operator: Exists
  - key: cluster.open-cluster-management.io/unavailable
    operator: Exists
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels:
            accelerator: nvidia-tesla-t4
  numberOfClusters: 1
  prioritizerPolicy:
    mode: Exact
    configurations:
      - scoreCoordinate:
          type: AddOn
          addOn:
            resourceName: resource-usage-score
            scoreName: gpuClusterAvailable
        weight: 1
"#,
        // multicluster-gateway--nginx-application--placement.yaml
        r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: demo-placement
  namespace: default
spec:
  numberOfClusters: 2
  clusterSets:
    - default
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels:
            purpose: test
"#,
    ];

    #[test]
    fn compat_examples_decode_and_validate() {
        for doc in EXAMPLES {
            assert_eq!(problems::<OcmPlacement>(doc), vec![], "{doc}");
        }
        let gpu: OcmPlacement = typed(EXAMPLES[3]);
        assert_eq!(gpu.spec.prioritizer_policy.mode, PrioritizerMode::Exact);
        assert_eq!(
            gpu.spec.tolerations[0].operator(),
            OcmTolerationOperator::Exists
        );
        assert_eq!(gpu.spec.number_of_clusters, Some(1));
        let weights = gpu.prioritizer_weights();
        assert_eq!(weights.len(), 1);
        assert_eq!(weights[0].0.type_, ScoreCoordinateType::AddOn);
        assert_eq!(
            weights[0].0.add_on.as_ref().unwrap().score_name,
            "gpuClusterAvailable"
        );
        let empty: OcmPlacement = typed(EXAMPLES[1]);
        assert_eq!(empty.spec, OcmPlacementSpec::default());
        assert_eq!(empty.sort_by(), SortBy::ClusterName);
        assert_eq!(empty.score_rate_limit(), "1m");
        assert_eq!(
            empty
                .spec
                .decision_strategy
                .group_strategy
                .clusters_per_group(7),
            7
        );
    }

    const HEAD: &str = "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p, namespace: default}\n";

    fn placement(spec: &str) -> String {
        format!("{HEAD}spec:\n{spec}")
    }

    /// What OCM's hub admits but its scheduler reports as `PlacementMisconfigured` is no
    /// validation problem here (module doc: taint_toleration_test.go, schedule.go,
    /// scheduling_controller.go); the scheduler reports it on the placement.
    #[test]
    fn schedule_time_rules_are_admitted() {
        for spec in [
            "  tolerations: [{effect: NoSelect}]\n",
            "  tolerations: [{key: gpu, operator: Exists, value: 'true'}]\n",
            "  prioritizerPolicy: {configurations: [{scoreCoordinate: {builtIn: Spread}}]}\n",
            "  prioritizerPolicy: {configurations: [{scoreCoordinate: {type: AddOn}, weight: -2}]}\n",
            "  decisionStrategy: {groupStrategy: {clustersPerDecisionGroup: '5'}}\n",
            "  predicates: [{requiredClusterSelector: {celSelector: {celExpressions: ['  ']}}}]\n",
        ] {
            assert_eq!(problems::<OcmPlacement>(&placement(spec)), vec![], "{spec}");
        }
    }

    #[test]
    fn full_spec_decodes_with_defaults() {
        let doc = placement(
            r#"  predicates:
  - requiredClusterSelector:
      labelSelector: {matchExpressions: [{key: env, operator: In, values: [prod]}]}
      claimSelector: {matchExpressions: [{key: region.open-cluster-management.io, operator: Exists}]}
      celSelector: {celExpressions: ['managedCluster.metadata.labels["x"] == "y"']}
  prioritizerPolicy:
    configurations:
    - scoreCoordinate: {builtIn: ResourceAllocatableMemory}
      weight: 3
    - scoreCoordinate: {type: BuiltIn, builtIn: Balance}
      weight: 0
  spreadPolicy:
    spreadConstraints:
    - {topologyKey: zone, topologyKeyType: Label}
  tolerations:
  - {key: gpu, value: 'true', effect: NoSelect, tolerationSeconds: 300}
  decisionStrategy:
    groupStrategy:
      clustersPerDecisionGroup: 25%
      decisionGroups:
      - groupName: canary-west
        groupClusterSelector: {labelSelector: {matchLabels: {region: west}}}
  sortBy: Score
  scoreRateLimit: 30s
"#,
        );
        assert_eq!(problems::<OcmPlacement>(&doc), vec![]);
        let p: OcmPlacement = typed(&doc);
        assert_eq!(p.spec.prioritizer_policy.mode, PrioritizerMode::Additive);
        let names: Vec<(String, i32)> = p
            .prioritizer_weights()
            .into_iter()
            .map(|(c, w)| (c.built_in, w))
            .collect();
        assert_eq!(
            names,
            vec![
                ("ResourceAllocatableMemory".to_string(), 3),
                ("Steady".to_string(), 1)
            ]
        );
        let c = &p.spec.spread_policy.spread_constraints[0];
        assert_eq!(c.max_skew(), 1);
        assert_eq!(c.when_unsatisfiable(), WhenUnsatisfiable::ScheduleAnyway);
        let g = &p.spec.decision_strategy.group_strategy;
        assert_eq!(g.clusters_per_group(10), 3, "25% of 10 rounds up");
        assert_eq!(p.sort_by(), SortBy::Score);
    }

    #[test]
    fn empty_mode_means_additive_and_others_are_refused() {
        let p: OcmPlacement = typed(&placement("  prioritizerPolicy: {mode: ''}\n"));
        assert_eq!(p.spec.prioritizer_policy.mode, PrioritizerMode::Additive);
        assert_eq!(p.prioritizer_weights().len(), 2);
        let err =
            decode::<OcmPlacement>(&value(&placement("  prioritizerPolicy: {mode: exact}\n")))
                .unwrap_err();
        assert_eq!(err.field, "spec.prioritizerPolicy.mode");
        assert_eq!(err.message, "incorrect prioritizer policy mode: exact");
    }

    #[test]
    fn decoding_is_strict() {
        let cases = [
            (
                placement("  numberOfCluster: 1\n"),
                "spec.numberOfCluster",
                "unknown field `numberOfCluster`",
            ),
            (
                placement("  decisionStrategy: {groupStrategy: {decisionGroups: [{groupName: ab, groupClusterSelector: {celSelector: {}}}]}}\n"),
                "spec.decisionStrategy.groupStrategy.decisionGroups[0].groupClusterSelector.celSelector",
                "unknown field `celSelector`",
            ),
            (
                placement("  tolerations: [{key: a, operator: Gt}]\n"),
                "spec.tolerations[0].operator",
                "unknown toleration operator \"Gt\": Equal or Exists (gitfleet's own rule: an OCM hub admits it; its scheduler knows no other)",
            ),
            (
                placement("  prioritizerPolicy: {configurations: [{weight: 1}]}\n"),
                "spec.prioritizerPolicy.configurations[0]",
                "missing field `scoreCoordinate`",
            ),
            (
                placement("  spreadPolicy: {spreadConstraints: [{topologyKey: zone}]}\n"),
                "spec.spreadPolicy.spreadConstraints[0]",
                "missing field `topologyKeyType`",
            ),
            (
                HEAD.to_string(),
                "",
                "missing field `spec`",
            ),
        ];
        for (doc, field, msg) in cases {
            let err = decode::<OcmPlacement>(&value(&doc)).unwrap_err();
            assert_eq!(err.field, field, "{doc}");
            assert!(err.message.contains(msg), "{}", err.message);
        }
    }

    /// OCM's CRD admits each of these (the test bed's API server creates them) and OCM serves no
    /// webhook for Placement: gitfleet refuses them as its own rules, and each diagnostic says so.
    #[test]
    fn ocm_rules_stricter_than_the_hub_say_they_are_gitfleets_own() {
        for spec in [
            "  numberOfClusters: -1\n",
            "  tolerations: [{key: a, operator: Gt}]\n",
            "  predicates: [{requiredClusterSelector: {labelSelector: {matchLabels: {'bad key!': x}}}}]\n",
            "  predicates: [{requiredClusterSelector: {claimSelector: {matchExpressions: [{key: a, operator: In}]}}}]\n",
            "  decisionStrategy: {groupStrategy: {decisionGroups: [{groupName: ab, groupClusterSelector: {labelSelector: {matchExpressions: [{key: 'a b', operator: Exists}]}}}]}}\n",
            "  predicates: [{requiredClusterSelector: {labelSelector: {matchExpressions: [{key: a, operator: Foo, values: [b]}]}}}]\n",
        ] {
            let messages: Vec<String> = match decode::<OcmPlacement>(&value(&placement(spec))) {
                Err(e) => vec![OcmPlacement::decode_problem(e).message],
                Ok(p) => p.validate().into_iter().map(|p| p.message).collect(),
            };
            assert!(!messages.is_empty(), "{spec}");
            for m in &messages {
                assert!(m.contains("gitfleet's own rule: an OCM hub admits it"), "{spec}: {m}");
            }
        }
    }

    #[test]
    fn placement_rules_name_their_field() {
        let nine: String = (0..9)
            .map(|i| format!("    - {{topologyKey: k{i}, topologyKeyType: Label}}\n"))
            .collect();
        let key_pattern = r#"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"#;
        let long = "v".repeat(1025);
        expect_one::<OcmPlacement>(&[
            (
                placement("  numberOfClusters: -1\n"),
                "spec.numberOfClusters",
                "must be greater than or equal to 0, got -1 (gitfleet's own rule: an OCM hub admits it; OCM's scheduler cannot select a negative number of clusters)",
            ),
            (
                placement("  predicates: [{requiredClusterSelector: {labelSelector: {matchExpressions: [{key: a, operator: NotIn}]}}}]\n"),
                "spec.predicates[0].requiredClusterSelector.labelSelector.matchExpressions[0].values",
                "must be specified when `operator` is 'In' or 'NotIn' (gitfleet's own rule: an OCM hub admits it; its scheduler cannot evaluate the selector)",
            ),
            (
                placement("  predicates: [{}, {requiredClusterSelector: {claimSelector: {matchExpressions: [{key: a, operator: Exists, values: [b]}]}}}]\n"),
                "spec.predicates[1].requiredClusterSelector.claimSelector.matchExpressions[0].values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist' (gitfleet's own rule: an OCM hub admits it; its scheduler cannot evaluate the selector)",
            ),
            (
                placement("  prioritizerPolicy: {configurations: [{scoreCoordinate: {builtIn: Balance}, weight: 11}]}\n"),
                "spec.prioritizerPolicy.configurations[0].weight",
                "must be between -10 and 10, got 11",
            ),
            (
                placement(&format!("  spreadPolicy:\n    spreadConstraints:\n{nine}")),
                "spec.spreadPolicy.spreadConstraints",
                "must have at most 8 items, got 9",
            ),
            (
                placement("  spreadPolicy: {spreadConstraints: [{topologyKey: 'a b', topologyKeyType: Claim}]}\n"),
                "spec.spreadPolicy.spreadConstraints[0].topologyKey",
                &format!("\"a b\" must match '{key_pattern}'"),
            ),
            (
                placement("  spreadPolicy: {spreadConstraints: [{topologyKey: zone, topologyKeyType: Label, maxSkew: 0}]}\n"),
                "spec.spreadPolicy.spreadConstraints[0].maxSkew",
                "must be greater than or equal to 1, got 0",
            ),
            (
                placement("  tolerations: [{key: -gpu, operator: Exists}]\n"),
                "spec.tolerations[0].key",
                &format!("\"-gpu\" must match '{key_pattern}'"),
            ),
            (
                placement(&format!("  tolerations: [{{key: gpu, value: {long}}}]\n")),
                "spec.tolerations[0].value",
                "must be no more than 1024 characters, got 1025",
            ),
            (
                placement("  decisionStrategy: {groupStrategy: {clustersPerDecisionGroup: '0%'}}\n"),
                "spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup",
                "\"0%\" must match '^((100|[1-9][0-9]{0,1})%|[1-9][0-9]*)$'",
            ),
            (
                placement("  decisionStrategy: {groupStrategy: {decisionGroups: [{groupName: a, groupClusterSelector: {}}]}}\n"),
                "spec.decisionStrategy.groupStrategy.decisionGroups[0].groupName",
                "\"a\" must match '^[a-zA-Z0-9][-A-Za-z0-9_.]{0,61}[a-zA-Z0-9]$'",
            ),
            (
                placement("  decisionStrategy: {groupStrategy: {decisionGroups: [{groupName: ab, groupClusterSelector: {labelSelector: {matchLabels: {'-x': v}}}}]}}\n"),
                "spec.decisionStrategy.groupStrategy.decisionGroups[0].groupClusterSelector.labelSelector.matchLabels",
                "key \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (gitfleet's own rule: an OCM hub admits it; its scheduler cannot evaluate the selector)",
            ),
            (
                placement("  scoreRateLimit: 1h30m\n"),
                "spec.scoreRateLimit",
                "\"1h30m\" must match '^[0-9]+[hms]$'",
            ),
        ]);
    }

    #[test]
    fn zero_weight_prioritizers_are_not_checked() {
        let doc = placement(
            "  prioritizerPolicy: {configurations: [{scoreCoordinate: {builtIn: Spread}, weight: 0}, {scoreCoordinate: {type: AddOn}, weight: 0}]}\n",
        );
        assert_eq!(problems::<OcmPlacement>(&doc), vec![]);
    }

    #[test]
    fn clusters_per_group_follows_ocm() {
        let g = |v: Option<IntOrPercent>| GroupStrategy {
            decision_groups: vec![],
            clusters_per_decision_group: v,
        };
        let s = |x: &str| Some(IntOrPercent::String(x.into()));
        assert_eq!(g(None).clusters_per_group(310), 310);
        assert_eq!(g(Some(IntOrPercent::Int(150))).clusters_per_group(310), 150);
        assert_eq!(g(Some(IntOrPercent::Int(0))).clusters_per_group(310), 310);
        assert_eq!(g(Some(IntOrPercent::Int(400))).clusters_per_group(310), 310);
        assert_eq!(g(s("20%")).clusters_per_group(100), 20);
        assert_eq!(g(s("30%")).clusters_per_group(7), 3);
        assert_eq!(g(s("100%")).clusters_per_group(0), 0);
    }

    #[test]
    fn tolerations_match_taints() {
        let taint = |key: &str, value: &str, effect| ManagedClusterTaint {
            key: key.into(),
            value: value.into(),
            effect,
            time_added: None,
        };
        let tol = |key: &str, op, value: &str, effect| OcmToleration {
            key: key.into(),
            operator: op,
            value: value.into(),
            effect,
            toleration_seconds: None,
        };
        use OcmTaintEffect::*;
        use OcmTolerationOperator::*;
        let gpu = taint("gpu", "true", NoSelect);
        assert!(tol("gpu", None, "true", None).matches(&gpu));
        assert!(!tol("gpu", None, "false", None).matches(&gpu));
        assert!(tol("gpu", Some(Exists), "", Some(NoSelect)).matches(&gpu));
        assert!(!tol("gpu", Some(Exists), "", Some(NoSelectIfNew)).matches(&gpu));
        assert!(tol("", Some(Exists), "", None).matches(&gpu));
        assert!(!tol("cpu", Some(Exists), "", None).matches(&gpu));
    }

    const MWRS: &str = r#"
apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata:
  name: mwrset-cm
  namespace: default
spec:
  placementRefs:
    - name: placement-rollout-all
      rolloutStrategy:
        type: All
        all:
          progressDeadline: None
    - name: placement-rollout-progressive
      rolloutStrategy:
        type: Progressive
        progressive:
          mandatoryDecisionGroups:
          - groupName: canary
          maxConcurrency: 25%
          minSuccessTime: 5m
          progressDeadline: 10m
          maxFailures: 2
    - name: placement-rollout-group
      rolloutStrategy:
        type: ProgressivePerGroup
        progressivePerGroup:
          mandatoryDecisionGroups:
          - groupIndex: 0
          maxFailures: 10%
  manifestWorkTemplate:
    deleteOption:
      propagationPolicy: SelectivelyOrphan
      selectivelyOrphans:
        orphaningRules:
        - {group: '', resource: configmaps, namespace: default, name: cm}
    manifestConfigs:
    - resourceIdentifier: {group: apps, resource: deployments, namespace: default, name: web}
      updateStrategy: {type: ServerSideApply}
    executor:
      subject:
        type: ServiceAccount
        serviceAccount: {namespace: default, name: deployer}
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: cm
            namespace: default
          data:
            key: value
        - apiVersion: apps/v1
          kind: Deployment
          metadata: {name: web, namespace: default}
          spec: {replicas: 1}
"#;

    #[test]
    fn manifest_work_replica_set_decodes_with_defaults() {
        // Valid by OCM's rules; what gitfleet does not carry out is refused (the executor).
        // manifestConfigs' update strategies and deleteOption's orphaning are honoured.
        assert_eq!(problems::<ManifestWorkReplicaSet>(MWRS), vec![]);
        let fields: Vec<String> = not_built(&typed(MWRS))
            .into_iter()
            .inspect(|p| {
                assert!(
                    p.message.starts_with("not built in gitfleet"),
                    "{}",
                    p.message
                )
            })
            .map(|p| p.field)
            .collect();
        assert_eq!(
            fields,
            ["spec.manifestWorkTemplate.executor"],
            "every rollout type is carried out"
        );
        let built = "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\n\
            metadata: {name: m, namespace: default}\nspec:\n  placementRefs: [{name: p, rolloutStrategy: {type: All}}]\n\
            \x20 manifestWorkTemplate:\n    deleteOption: {propagationPolicy: Foreground}\n\
            \x20   workload:\n      manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}}]\n";
        assert_eq!(not_built(&typed(built)), vec![]);
        let m: ManifestWorkReplicaSet = typed(MWRS);
        assert_eq!(
            m.cascade_deletion_policy(),
            CascadeDeletionPolicy::Background
        );
        assert_eq!(m.spec.manifest_work_template.workload.manifests.len(), 2);
        assert_eq!(
            m.spec.placement_refs[1].rollout_type(),
            OcmRolloutType::Progressive
        );
        let prog = m.spec.placement_refs[1]
            .rollout_strategy
            .as_ref()
            .unwrap()
            .progressive
            .as_ref()
            .unwrap();
        assert_eq!(
            prog.max_concurrency,
            Some(IntOrPercent::String("25%".into()))
        );
        assert_eq!(
            prog.mandatory_decision_groups[0].group_name.as_deref(),
            Some("canary")
        );
        let bare: ManifestWorkReplicaSet = typed(&MWRS.replace(
            "      rolloutStrategy:\n        type: All\n        all:\n          progressDeadline: None\n",
            "",
        ));
        assert_eq!(
            bare.spec.placement_refs[0].rollout_type(),
            OcmRolloutType::All
        );
        let fg: ManifestWorkReplicaSet = typed(&MWRS.replace(
            "spec:\n  placementRefs:",
            "spec:\n  cascadeDeletionPolicy: Foreground\n  placementRefs:",
        ));
        assert_eq!(
            fg.cascade_deletion_policy(),
            CascadeDeletionPolicy::Foreground
        );
    }

    #[test]
    fn manifest_work_replica_set_decoding() {
        let cases = [
            (
                MWRS.replace(
                    "spec:\n  placementRefs:",
                    "spec:\n  replicas: 2\n  placementRefs:",
                ),
                "spec.replicas",
                "unknown field `replicas`",
            ),
            (
                MWRS.replace("    deleteOption:", "    foo: {}\n    deleteOption:"),
                "spec.manifestWorkTemplate.foo",
                "unknown field `foo`",
            ),
            (
                MWRS.replace("type: Progressive\n", "type: Canary\n"),
                "spec.placementRefs[1].rolloutStrategy.type",
                "unknown variant `Canary`",
            ),
            (
                MWRS.replace(
                    "        type: All\n",
                    "        type: All\n        bogus: 1\n",
                ),
                "spec.placementRefs[0].rolloutStrategy.bogus",
                "unknown field `bogus`",
            ),
            (
                MWRS.replace(
                    "spec:\n  placementRefs:",
                    "spec:\n  cascadeDeletionPolicy: Orphan\n  placementRefs:",
                ),
                "spec.cascadeDeletionPolicy",
                "unknown variant `Orphan`",
            ),
        ];
        for (doc, field, msg) in cases {
            let err = decode::<ManifestWorkReplicaSet>(&value(&doc)).unwrap_err();
            assert_eq!(err.field, field, "{doc}");
            assert!(err.message.contains(msg), "{}", err.message);
        }
        // The per-type settings are read leniently.
        let lenient = MWRS.replace(
            "          progressDeadline: None\n",
            "          progressDeadline: None\n          futureField: x\n",
        );
        assert_eq!(problems::<ManifestWorkReplicaSet>(&lenient), vec![]);
    }

    const MWRS_HEAD: &str = "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata: {name: m, namespace: default}\nspec:\n";

    fn mwrs(manifests: &str, refs: &str) -> String {
        format!("{MWRS_HEAD}  manifestWorkTemplate: {{workload: {{manifests: {manifests}}}}}\n  placementRefs: {refs}\n")
    }

    #[test]
    fn manifest_work_replica_set_rules_name_their_field() {
        let cm = "{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: default}}";
        let refs = "[{name: p}]";
        let big = format!(
            "[{{apiVersion: v1, kind: ConfigMap, metadata: {{name: cm}}, data: {{k: {}}}}}]",
            "x".repeat(MAX_MANIFEST_BYTES)
        );
        expect_one::<ManifestWorkReplicaSet>(&[
            (
                mwrs("[]", refs),
                "spec.manifestWorkTemplate.workload.manifests",
                "Workload manifests should not be empty",
            ),
            (
                mwrs(&big, refs),
                "spec.manifestWorkTemplate.workload.manifests",
                "the size of manifests is 512087 bytes which exceeds the 512000 limit",
            ),
            (
                mwrs("[hello]", refs),
                "spec.manifestWorkTemplate.workload.manifests[0]",
                "manifest must be a JSON object",
            ),
            (
                mwrs("[{kind: ConfigMap, metadata: {name: cm}}]", refs),
                "spec.manifestWorkTemplate.workload.manifests[0].apiVersion",
                "Object 'apiVersion' is missing in manifest (gitfleet's own rule: OCM's work webhook admits it, but no work agent can apply an object without one)",
            ),
            (
                mwrs("[{apiVersion: v1, metadata: {name: cm}}]", refs),
                "spec.manifestWorkTemplate.workload.manifests[0].kind",
                "Object 'Kind' is missing in manifest",
            ),
            (
                mwrs("[{apiVersion: v1, kind: ConfigMap, metadata: {}}]", refs),
                "spec.manifestWorkTemplate.workload.manifests[0].metadata.name",
                "name must be set in manifest",
            ),
            (
                mwrs("[{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, generateName: cm-}}]", refs),
                "spec.manifestWorkTemplate.workload.manifests[0].metadata.generateName",
                "generateName must not be set in manifest",
            ),
            (
                mwrs(&format!("[{cm}, {cm}]"), refs),
                "spec.manifestWorkTemplate.workload.manifests[1]",
                "duplicate manifest for resource default/cm with resource type v1.ConfigMap",
            ),
            (
                mwrs(&format!("[{cm}]"), "[]"),
                "spec.placementRefs",
                "Required value: at least one placement reference is required",
            ),
            (
                mwrs(&format!("[{cm}]"), "[{name: ''}]"),
                "spec.placementRefs[0].name",
                "Required value",
            ),
            (
                mwrs(&format!("[{cm}]"), "[{name: p, rolloutStrategy: {type: All, all: {progressDeadline: soon}}}]"),
                "spec.placementRefs[0].rolloutStrategy.all.progressDeadline",
                "\"soon\" must match '^(([0-9])+[h|m|s])|None$'",
            ),
            (
                mwrs(&format!("[{cm}]"), "[{name: p, rolloutStrategy: {type: Progressive, progressive: {maxConcurrency: '200%'}}}]"),
                "spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency",
                "\"200%\" must match '^((100|[0-9]{1,2})%|[0-9]+)$'",
            ),
            (
                mwrs(&format!("[{cm}]"), "[{name: p, rolloutStrategy: {type: ProgressivePerGroup, progressivePerGroup: {maxFailures: 'many'}}}]"),
                "spec.placementRefs[0].rolloutStrategy.progressivePerGroup.maxFailures",
                "\"many\" must match '^((100|[0-9]{1,2})%|[0-9]+)$'",
            ),
        ]);
        let err = decode::<ManifestWorkReplicaSet>(&value(&format!(
            "{MWRS_HEAD}  manifestWorkTemplate: {{}}\n"
        )))
        .unwrap_err();
        assert_eq!(err.field, "spec");
        assert!(err.message.contains("missing field `placementRefs`"));
    }

    #[test]
    fn progress_deadline_pattern_is_taken_literally() {
        for ok in ["None", "5m", "5m30s", "90s", "2h"] {
            assert!(is_progress_deadline(ok), "{ok}");
        }
        for bad in ["", "m", "5", "five minutes", "5d"] {
            assert!(!is_progress_deadline(bad), "{bad}");
        }
    }

    /// Go's `time.ParseDuration`, as `metav1.Duration` reads `minSuccessTime`.
    #[test]
    fn go_durations_parse_as_go_does() {
        for (text, secs) in [
            ("0", 0),
            ("90s", 90),
            ("5m30s", 330),
            ("1.5h", 5400),
            ("300ms", 1),
            ("2h45m", 9900),
            ("-5m", 0),
            ("+10s", 10),
        ] {
            assert_eq!(go_duration_secs(text), Some(secs), "{text}");
        }
        for bad in ["", "5", "5d", "m", ".s", "1..5s", "five"] {
            assert_eq!(go_duration_secs(bad), None, "{bad}");
        }
    }
    /// One test per rule of OCM's Placement and ManifestWorkReplicaSet CRDs, OCM's work webhook
    /// and gitfleet's own, named after the rule: the breaking document names the field, the
    /// edge case is admitted.
    mod rules {
        use super::{mwrs, placement, MAX_MANIFEST_BYTES};
        use crate::model::testing::rule_tests;

        const OWN: &str = "gitfleet's own rule: an OCM hub admits it";
        const PRED: &str = "spec.predicates[0].requiredClusterSelector";
        const GROUP: &str = "spec.decisionStrategy.groupStrategy";

        fn spread(n: usize, extra: &str) -> String {
            let items: Vec<String> = (0..n)
                .map(|i| format!("{{topologyKey: k{i}, topologyKeyType: Label{extra}}}"))
                .collect();
            placement(&format!(
                "  spreadPolicy: {{spreadConstraints: [{}]}}\n",
                items.join(", ")
            ))
        }
        fn predicate(selector: &str) -> String {
            placement(&format!(
                "  predicates: [{{requiredClusterSelector: {selector}}}]\n"
            ))
        }
        fn groups(g: &str) -> String {
            placement(&format!("  decisionStrategy: {{groupStrategy: {g}}}\n"))
        }
        fn weight(w: i32) -> String {
            placement(&format!("  prioritizerPolicy: {{mode: Additive, configurations: [{{scoreCoordinate: {{builtIn: Balance}}, weight: {w}}}]}}\n"))
        }

        rule_tests! { super::OcmPlacement;
            number_of_clusters_not_negative_is_gitfleets_own: placement("  numberOfClusters: -1\n") => "spec.numberOfClusters", OWN;
                ok: placement("  numberOfClusters: 0\n");
            predicate_label_selector_syntax_is_gitfleets_own: predicate("{labelSelector: {matchLabels: {'bad key!': x}}}") => format!("{PRED}.labelSelector.matchLabels"), OWN;
                ok: predicate("{labelSelector: {matchLabels: {'example.com/key': x}}}");
            predicate_label_selector_operator_is_gitfleets_own: predicate("{labelSelector: {matchExpressions: [{key: a, operator: Foo, values: [b]}]}}") => format!("{PRED}.labelSelector.matchExpressions[0].operator"), OWN;
                ok: predicate("{labelSelector: {matchExpressions: [{key: a, operator: NotIn, values: [b]}]}}");
            predicate_claim_selector_syntax_is_gitfleets_own: predicate("{claimSelector: {matchExpressions: [{key: a, operator: In}]}}") => format!("{PRED}.claimSelector.matchExpressions[0].values"), OWN;
                ok: predicate("{claimSelector: {matchExpressions: [{key: a, operator: In, values: [b]}]}}");
            prioritizer_weight_at_least_minus_10: weight(-11) => "spec.prioritizerPolicy.configurations[0].weight", "between -10 and 10";
                ok: weight(-10);
            prioritizer_weight_at_most_10: weight(11) => "spec.prioritizerPolicy.configurations[0].weight", "between -10 and 10";
                ok: weight(10);
            spread_constraints_at_most_8: spread(9, "") => "spec.spreadPolicy.spreadConstraints", "at most 8 items";
                ok: spread(8, "");
            spread_topology_key_pattern: placement("  spreadPolicy: {spreadConstraints: [{topologyKey: 'a b', topologyKeyType: Claim}]}\n") => "spec.spreadPolicy.spreadConstraints[0].topologyKey", "must match";
                ok: placement("  spreadPolicy: {spreadConstraints: [{topologyKey: example.com/zone, topologyKeyType: Claim}]}\n");
            spread_topology_key_type_is_an_enum: placement("  spreadPolicy: {spreadConstraints: [{topologyKey: zone, topologyKeyType: Annotation}]}\n") => "spec.spreadPolicy.spreadConstraints[0].topologyKeyType", "unknown variant";
                ok: placement("  spreadPolicy: {spreadConstraints: [{topologyKey: zone, topologyKeyType: Label}]}\n");
            spread_max_skew_at_least_1: spread(1, ", maxSkew: 0") => "spec.spreadPolicy.spreadConstraints[0].maxSkew", "greater than or equal to 1";
                ok: spread(1, ", maxSkew: 1");
            toleration_key_pattern: placement("  tolerations: [{key: -gpu, operator: Exists}]\n") => "spec.tolerations[0].key", "must match";
                ok: placement("  tolerations: [{key: '', operator: Exists}]\n");
            toleration_value_at_most_1024_characters: placement(&format!("  tolerations: [{{key: gpu, value: {}}}]\n", "v".repeat(1025))) => "spec.tolerations[0].value", "no more than 1024 characters";
                ok: placement(&format!("  tolerations: [{{key: gpu, value: {}}}]\n", "v".repeat(1024)));
            toleration_operator_is_gitfleets_own: placement("  tolerations: [{key: a, operator: Gt}]\n") => "spec.tolerations[0].operator", OWN;
                ok: placement("  tolerations: [{key: a, operator: Equal, value: b}]\n");
            clusters_per_decision_group_pattern: groups("{clustersPerDecisionGroup: '0%'}") => format!("{GROUP}.clustersPerDecisionGroup"), "must match";
                ok: groups("{clustersPerDecisionGroup: '100%'}");
            decision_group_name_pattern: groups("{decisionGroups: [{groupName: a, groupClusterSelector: {}}]}") => format!("{GROUP}.decisionGroups[0].groupName"), "must match";
                ok: groups(&format!("{{decisionGroups: [{{groupName: {}, groupClusterSelector: {{}}}}]}}", "a".repeat(63)));
            decision_group_name_at_most_63_characters: groups(&format!("{{decisionGroups: [{{groupName: {}, groupClusterSelector: {{}}}}]}}", "a".repeat(64))) => format!("{GROUP}.decisionGroups[0].groupName"), "must match";
                ok: groups("{decisionGroups: [{groupName: ab, groupClusterSelector: {}}]}");
            decision_group_selector_syntax_is_gitfleets_own: groups("{decisionGroups: [{groupName: ab, groupClusterSelector: {labelSelector: {matchLabels: {'-x': v}}}}]}") => format!("{GROUP}.decisionGroups[0].groupClusterSelector.labelSelector.matchLabels"), OWN;
                ok: groups("{decisionGroups: [{groupName: ab, groupClusterSelector: {labelSelector: {matchLabels: {x: v}}}}]}");
            score_rate_limit_pattern: placement("  scoreRateLimit: 1h30m\n") => "spec.scoreRateLimit", "must match";
                ok: placement("  scoreRateLimit: 90s\n");
            placement_status_unknown_field_refused: placement("  numberOfClusters: 1\nstatus: {numberOfSelectedClusters: 1, selected: []}\n") => "status.selected", "unknown field `selected`";
                ok: placement("  numberOfClusters: 1\nstatus: {numberOfSelectedClusters: many, decisionGroups: [], lastScoreUpdateTime: x}\n");
            score_coordinate_type_is_an_enum: placement("  prioritizerPolicy: {configurations: [{scoreCoordinate: {type: Other}}]}\n") => "spec.prioritizerPolicy.configurations[0].scoreCoordinate.type", "unknown variant";
                ok: placement("  prioritizerPolicy: {configurations: [{scoreCoordinate: {type: AddOn, addOn: {resourceName: r, scoreName: s}}}]}\n");
        }

        const CM: &str =
            "{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: default}}";
        const REFS: &str = "[{name: p}]";
        fn one(manifest: &str) -> String {
            mwrs(&format!("[{manifest}]"), REFS)
        }
        fn rollout(strategy: &str) -> String {
            mwrs(
                &format!("[{CM}]"),
                &format!("[{{name: p, rolloutStrategy: {strategy}}}]"),
            )
        }
        /// One ConfigMap whose manifest takes exactly `bytes` bytes as OCM's webhook counts
        /// them: its JSON and, for a JSON of this size, 8 bytes of protobuf framing (two tags
        /// and two 3-byte lengths).
        fn sized(bytes: usize) -> String {
            let frame = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": ""}});
            let pad = bytes - 8 - serde_json::to_vec(&frame).unwrap().len();
            one(&format!(
                "{{apiVersion: v1, kind: ConfigMap, metadata: {{name: cm}}, data: {{k: {}}}}}",
                "x".repeat(pad)
            ))
        }

        mod manifest_work_replica_set {
            use super::*;
            rule_tests! { super::super::ManifestWorkReplicaSet;
                manifests_not_empty: mwrs("[]", REFS) => "spec.manifestWorkTemplate.workload.manifests", "should not be empty";
                    ok: one(CM);
                manifests_at_most_512000_bytes: sized(MAX_MANIFEST_BYTES + 1) => "spec.manifestWorkTemplate.workload.manifests", "exceeds the 512000 limit";
                    ok: sized(MAX_MANIFEST_BYTES);
                manifest_size_counts_go_json_escapes: one(&format!("{{apiVersion: v1, kind: ConfigMap, metadata: {{name: cm}}, data: {{k: '{}'}}}}", "<".repeat(MAX_MANIFEST_BYTES / 6 + 1))) => "spec.manifestWorkTemplate.workload.manifests", "exceeds the 512000 limit";
                    ok: one(&format!("{{apiVersion: v1, kind: ConfigMap, metadata: {{name: cm}}, data: {{k: '{}'}}}}", "<".repeat(MAX_MANIFEST_BYTES / 6 - 20)));
                manifest_is_an_object: mwrs("[hello]", REFS) => "spec.manifestWorkTemplate.workload.manifests[0]", "must be a JSON object";
                    ok: one(CM);
                manifest_api_version_required_is_gitfleets_own: one("{kind: ConfigMap, metadata: {name: cm}}") => "spec.manifestWorkTemplate.workload.manifests[0].apiVersion", "gitfleet's own rule";
                    ok: one("{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}");
                manifest_kind_required: one("{apiVersion: v1, metadata: {name: cm}}") => "spec.manifestWorkTemplate.workload.manifests[0].kind", "'Kind' is missing";
                    ok: one("{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}");
                manifest_name_required: one("{apiVersion: v1, kind: ConfigMap, metadata: {}}") => "spec.manifestWorkTemplate.workload.manifests[0].metadata.name", "name must be set";
                    ok: one("{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}");
                manifest_no_generate_name: one("{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, generateName: cm-}}") => "spec.manifestWorkTemplate.workload.manifests[0].metadata.generateName", "must not be set";
                    ok: one("{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}");
                manifests_unique: mwrs(&format!("[{CM}, {CM}]"), REFS) => "spec.manifestWorkTemplate.workload.manifests[1]", "duplicate manifest";
                    ok: mwrs(&format!("[{CM}, {}]", CM.replace("namespace: default", "namespace: other")), REFS);
                placement_refs_required: mwrs(&format!("[{CM}]"), "[]") => "spec.placementRefs", "at least one placement reference";
                    ok: one(CM);
                placement_ref_name_required: mwrs(&format!("[{CM}]"), "[{name: ''}]") => "spec.placementRefs[0].name", "Required value";
                    ok: one(CM);
                min_success_time_is_a_duration_is_gitfleets_own: rollout("{type: Progressive, progressive: {minSuccessTime: soon}}") => "spec.placementRefs[0].rolloutStrategy.progressive.minSuccessTime", OWN;
                    ok: rollout("{type: Progressive, progressive: {minSuccessTime: 1m30s}}");
                progress_deadline_pattern: rollout("{type: All, all: {progressDeadline: soon}}") => "spec.placementRefs[0].rolloutStrategy.all.progressDeadline", "must match";
                    ok: rollout("{type: All, all: {progressDeadline: None}}");
                max_failures_pattern: rollout("{type: All, all: {maxFailures: '101%'}}") => "spec.placementRefs[0].rolloutStrategy.all.maxFailures", "must match";
                    ok: rollout("{type: All, all: {maxFailures: '100%'}}");
                max_concurrency_pattern: rollout("{type: Progressive, progressive: {maxConcurrency: '200%'}}") => "spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency", "must match";
                    ok: rollout("{type: Progressive, progressive: {maxConcurrency: '0'}}");
                per_group_max_failures_pattern: rollout("{type: ProgressivePerGroup, progressivePerGroup: {maxFailures: many}}") => "spec.placementRefs[0].rolloutStrategy.progressivePerGroup.maxFailures", "must match";
                    ok: rollout("{type: ProgressivePerGroup, progressivePerGroup: {maxFailures: 3}}");
                replica_set_status_unknown_field_refused: format!("{}status: {{summary: {{}}, total: 1}}\n", one(CM)) => "status.total", "unknown field `total`";
                    ok: format!("{}status: {{summary: {{}}, placementSummary: []}}\n", one(CM));
                rollout_type_is_an_enum: rollout("{type: Canary}") => "spec.placementRefs[0].rolloutStrategy.type", "unknown variant";
                    ok: rollout("{type: All}");
            }
        }
    }
}
