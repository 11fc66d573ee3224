//! KubeFleet `ClusterResourcePlacement` and `ResourcePlacement` (placement.kubernetes-fleet.io v1
//! and v1beta1, one model): the spec, its defaults (`SetPlacementDefaults`) and the API/CEL/webhook
//! rules that concern one placement on its own.
//!
//! # Admission-time and schedule-time rules
//! Every rule checked here is one KubeFleet's hub enforces when the object is written, so a
//! commit that breaks one is invalid: the CRD schema and CEL rules
//! (apis/placement/v1beta1/clusterresourceplacement_types.go: placement-type field
//! combinations, toleration `Exists`/empty-key rules, `MaxItems`) and the validating webhook
//! (pkg/utils/validator/placement.go: resource selectors, PickFixed names, PickN
//! `numberOfClusters`, affinity terms and property selectors/sorters, tolerations, rollout
//! strategy). What KubeFleet only meets while scheduling — a property that is not a
//! quantity on a member, a PickFixed cluster that is not a member or not eligible — is
//! reported by `schedule::kubefleet` on that placement (a failed cycle, or a decision with
//! KubeFleet's reason), never here. OCM's split is in `model::ocm`.

use super::object::ObjectMeta;
use super::quantity::Quantity;
use super::scope::{Scope, ScopeTable};
use super::selector::LabelSelector;
use super::{is_dns1123_subdomain, is_label_value, ApiObject, Problem, Problems};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const GROUP: &str = "placement.kubernetes-fleet.io";

/// A ClusterResourcePlacement (cluster-scoped) or ResourcePlacement (namespaced).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Placement {
    pub api_version: String,
    pub kind: super::PlacementKind,
    pub metadata: ObjectMeta,
    pub spec: PlacementSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementSpec {
    pub resource_selectors: Vec<ResourceSelectorTerm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PlacementPolicy>,
    #[serde(default)]
    pub strategy: RolloutStrategy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reporting_scope: Option<StatusReportingScope>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StatusReportingScope {
    ClusterScopeOnly,
    NamespaceAccessible,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSelectorTerm {
    pub group: String,
    pub version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_scope: Option<SelectionScope>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectionScope {
    NamespaceOnly,
    #[default]
    NamespaceWithResources,
    NamespaceWithResourceSelectors,
}

impl ResourceSelectorTerm {
    pub fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.kind == "Namespace"
    }
    pub fn scope(&self) -> SelectionScope {
        self.selection_scope.unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlacementType {
    #[default]
    PickAll,
    PickN,
    PickFixed,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "PolicyFields")]
pub struct PlacementPolicy {
    pub placement_type: PlacementType,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number_of_clusters: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Which lists were written, empty or not: the CRD's CEL rules test presence (`has()`).
    #[serde(skip)]
    pub written: WrittenLists,
}

/// The lists of a policy that its document writes (an empty list is written; `null` is not).
/// Not part of the policy's value: two policies that differ only here are equal.
#[derive(Debug, Clone, Copy, Default)]
pub struct WrittenLists {
    pub cluster_names: bool,
    pub topology_spread_constraints: bool,
    pub tolerations: bool,
}

impl PartialEq for WrittenLists {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// A policy as written, before [`PlacementPolicy`] forgets which lists were absent.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyFields {
    #[serde(default)]
    placement_type: PlacementType,
    #[serde(default)]
    cluster_names: Option<Vec<String>>,
    #[serde(default)]
    number_of_clusters: Option<i32>,
    #[serde(default)]
    affinity: Option<Affinity>,
    #[serde(default)]
    topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    #[serde(default)]
    tolerations: Option<Vec<Toleration>>,
}

impl From<PolicyFields> for PlacementPolicy {
    fn from(f: PolicyFields) -> Self {
        PlacementPolicy {
            written: WrittenLists {
                cluster_names: f.cluster_names.is_some(),
                topology_spread_constraints: f.topology_spread_constraints.is_some(),
                tolerations: f.tolerations.is_some(),
            },
            placement_type: f.placement_type,
            cluster_names: f.cluster_names.unwrap_or_default(),
            number_of_clusters: f.number_of_clusters,
            affinity: f.affinity,
            topology_spread_constraints: f.topology_spread_constraints.unwrap_or_default(),
            tolerations: f.tolerations.unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Affinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_affinity: Option<ClusterAffinity>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterAffinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<ClusterSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_during_scheduling_ignored_during_execution: Vec<PreferredClusterSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSelector {
    pub cluster_selector_terms: Vec<ClusterSelectorTerm>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property_selector: Option<PropertySelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property_sorter: Option<PropertySorter>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropertySelector {
    pub match_expressions: Vec<PropertySelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropertySelectorRequirement {
    pub name: String,
    pub operator: PropertyOperator,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PropertyOperator {
    Gt,
    Ge,
    Eq,
    Ne,
    Lt,
    Le,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropertySorter {
    pub name: String,
    pub sort_order: SortOrder,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortOrder {
    Ascending,
    Descending,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreferredClusterSelector {
    pub weight: i32,
    pub preference: ClusterSelectorTerm,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologySpreadConstraint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_skew: Option<i32>,
    pub topology_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_unsatisfiable: Option<UnsatisfiableAction>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnsatisfiableAction {
    #[default]
    DoNotSchedule,
    ScheduleAnyway,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TolerationOperator {
    #[default]
    Equal,
    Exists,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RolloutStrategyType {
    #[default]
    RollingUpdate,
    External,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutStrategy {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<RolloutStrategyType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_strategy: Option<ApplyStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_strategy: Option<DeleteStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_back_strategy: Option<ReportBackStrategy>,
}

/// `int` or `"N%"`, as Kubernetes' IntOrString.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntOrPercent {
    Int(i64),
    String(String),
}

impl IntOrPercent {
    /// The value for a total of `total`, percentages rounded up (`ceil(pct·T)`), as the rollout
    /// controller computes maxUnavailable and maxSurge. `None` when malformed.
    pub fn scaled_up(&self, total: i64) -> Option<i64> {
        match self {
            IntOrPercent::Int(i) => Some(*i),
            IntOrPercent::String(s) => match s.strip_suffix('%') {
                Some(p) => p.parse::<i64>().ok().map(|p| (p * total + 99) / 100),
                None => s.parse().ok(),
            },
        }
    }

    /// Does it match `^((100|[0-9]{1,2})%|[0-9]+)$` (the CRD pattern)?
    pub fn is_well_formed(&self) -> bool {
        match self {
            IntOrPercent::Int(i) => *i >= 0,
            IntOrPercent::String(s) => match s.strip_suffix('%') {
                Some(p) => {
                    !p.is_empty()
                        && p.len() <= 3
                        && p.bytes().all(|b| b.is_ascii_digit())
                        && (p.len() < 3 || p == "100")
                }
                None => !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()),
            },
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollingUpdateConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrPercent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrPercent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_period_seconds: Option<i32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApplyStrategyType {
    #[default]
    ClientSideApply,
    ServerSideApply,
    ReportDiff,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ComparisonOption {
    #[default]
    PartialComparison,
    FullComparison,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WhenToApply {
    #[default]
    Always,
    IfNotDrifted,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WhenToTakeOver {
    #[default]
    Always,
    IfNoDiff,
    Never,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyStrategy {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ApplyStrategyType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison_option: Option<ComparisonOption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_to_apply: Option<WhenToApply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_to_take_over: Option<WhenToTakeOver>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_co_ownership: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply_config: Option<ServerSideApplyConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerSideApplyConfig {
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PropagationPolicy {
    #[default]
    Delete,
    Abandon,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<PropagationPolicy>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReportBackStrategy {
    /// The CRD marks it required but defaults it to `Disabled`: the server fills it in first.
    #[serde(default, rename = "type")]
    pub type_: ReportBackType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<ReportBackDestination>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReportBackType {
    #[default]
    Disabled,
    Mirror,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReportBackDestination {
    OriginalResource,
    WorkAPI,
}

impl Placement {
    pub fn is_namespaced(&self) -> bool {
        self.kind == super::PlacementKind::ResourcePlacement
    }

    /// The spec with every default KubeFleet's CRD schema and `SetPlacementDefaults` fill in.
    pub fn defaulted_spec(&self) -> PlacementSpec {
        self.spec.defaulted()
    }

    /// The rules of KubeFleet's webhook that need to know which kinds are namespaced (it asks
    /// its resource informer): a ClusterResourcePlacement selects cluster-scoped kinds, and
    /// namespaced ones only beside a Namespace selector with selectionScope
    /// NamespaceWithResourceSelectors; a ResourcePlacement selects namespaced kinds only (the
    /// Namespace kind is [`ApiObject::validate`]'s, which needs no table). Kinds of unknown scope
    /// are the catalog's to refuse (it names the likely kind).
    pub fn scope_problems(&self, scopes: &ScopeTable) -> Vec<Problem> {
        let selectors = &self.spec.resource_selectors;
        let with_selectors = selectors.iter().any(|s| {
            s.is_namespace() && s.scope() == SelectionScope::NamespaceWithResourceSelectors
        });
        let mut p = Problems::default();
        for (i, s) in selectors.iter().enumerate() {
            let scope = scopes.scope(&s.group, &s.kind);
            let message = match (self.is_namespaced(), scope) {
                (false, Some(Scope::Namespaced)) if !with_selectors => format!(
                    "a ClusterResourcePlacement selects cluster-scoped resources; {} is namespaced (select its Namespace, or use a Namespace selector with selectionScope NamespaceWithResourceSelectors)",
                    s.kind
                ),
                (true, Some(Scope::Cluster)) if !s.is_namespace() => format!(
                    "a ResourcePlacement selects namespaced resources of its own namespace; {} is cluster-scoped (use a ClusterResourcePlacement)",
                    s.kind
                ),
                _ => continue,
            };
            p.push(format!("spec.resourceSelectors[{i}]"), message);
        }
        p.0
    }
}

impl PlacementSpec {
    pub fn defaulted(&self) -> PlacementSpec {
        let mut spec = self.clone();
        let mut policy = spec.policy.take().unwrap_or_default();
        for t in &mut policy.topology_spread_constraints {
            t.max_skew.get_or_insert(1);
            t.when_unsatisfiable.get_or_insert_default();
        }
        for t in &mut policy.tolerations {
            t.operator.get_or_insert_default();
        }
        spec.policy = Some(policy);
        spec.revision_history_limit.get_or_insert(10);
        let strategy = &mut spec.strategy;
        let strategy_type = *strategy.type_.get_or_insert_default();
        if strategy_type == RolloutStrategyType::RollingUpdate {
            let ru = strategy.rolling_update.get_or_insert_default();
            ru.max_unavailable
                .get_or_insert_with(|| IntOrPercent::String("25%".into()));
            ru.max_surge
                .get_or_insert_with(|| IntOrPercent::String("25%".into()));
            ru.unavailable_period_seconds.get_or_insert(60);
        }
        let apply = strategy.apply_strategy.get_or_insert_default();
        let apply_type = *apply.type_.get_or_insert_default();
        apply.comparison_option.get_or_insert_default();
        apply.when_to_apply.get_or_insert_default();
        apply.when_to_take_over.get_or_insert_default();
        apply.allow_co_ownership.get_or_insert(false);
        if apply_type == ApplyStrategyType::ServerSideApply {
            apply.server_side_apply_config.get_or_insert_default();
        }
        spec
    }

    /// The defaulted policy (PickAll when absent).
    pub fn policy_or_default(&self) -> PlacementPolicy {
        self.defaulted().policy.unwrap_or_default()
    }
}

impl ApiObject for Placement {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        validate_placement(self, &mut p);
        p.0
    }
}

fn validate_placement(pl: &Placement, p: &mut Problems) {
    let name = &pl.metadata.name;
    if name.is_empty() {
        p.push("metadata.name", "Required value: name is required");
    } else if name.len() > 63 {
        // The webhook's own limit (DNS1035LabelMaxLength); the characters are the API server's.
        p.push(
            "metadata.name",
            format!(
                "the name field cannot have length exceeding 63 (it has {})",
                name.len()
            ),
        );
    } else if let Some(msg) = super::metadata::NameRule::Subdomain.problem(name) {
        p.push("metadata.name", format!("Invalid value: {name:?}: {msg}"));
    }
    let is_v1 = pl.api_version == format!("{GROUP}/v1");
    let spec = &pl.spec;
    validate_selectors(pl, p);
    if let Some(limit) = spec.revision_history_limit {
        if !(1..=1000).contains(&limit) {
            p.push(
                "spec.revisionHistoryLimit",
                format!("must be between 1 and 1000, got {limit}"),
            );
        }
    }
    // The CRD's CEL rule is on ClusterResourcePlacement only; KubeFleet ignores the scope on a
    // ResourcePlacement (its namespace status sync skips them), so a hub admits it there.
    if spec.status_reporting_scope == Some(StatusReportingScope::NamespaceAccessible)
        && !pl.is_namespaced()
        && spec
            .resource_selectors
            .iter()
            .filter(|s| s.is_namespace())
            .count()
            != 1
    {
        p.push(
            "spec.statusReportingScope",
            "NamespaceAccessible requires exactly one resource selector of kind Namespace",
        );
    }
    if let Some(policy) = &spec.policy {
        validate_policy(policy, p);
    }
    validate_strategy(&spec.strategy, is_v1, p);
    super::status::check(&pl.api_version, &pl.kind.to_string(), pl.status.as_ref(), p);
}

fn validate_selectors(pl: &Placement, p: &mut Problems) {
    let selectors = &pl.spec.resource_selectors;
    if selectors.is_empty() {
        p.push(
            "spec.resourceSelectors",
            "Required value: at least one resource selector is required",
        );
    }
    if selectors.len() > 100 {
        p.push(
            "spec.resourceSelectors",
            format!("must have at most 100 items, got {}", selectors.len()),
        );
    }
    for (i, s) in selectors.iter().enumerate() {
        let f = format!("spec.resourceSelectors[{i}]");
        if s.version.is_empty() {
            p.push(format!("{f}.version"), "Required value");
        }
        if s.kind.is_empty() {
            p.push(format!("{f}.kind"), "Required value");
        }
        if s.name.is_some() && s.label_selector.is_some() {
            p.push(
                f.clone(),
                "the labelSelector and name fields are mutually exclusive",
            );
        }
        if let Some(ls) = &s.label_selector {
            // The webhook's LabelSelectorAsSelector: structure, keys and values.
            super::member::check_selector(&format!("{f}.labelSelector"), ls, p);
        }
        if pl.is_namespaced() && s.is_namespace() {
            p.push(
                f.clone(),
                "a ResourcePlacement selects namespaced resources in its own namespace; it cannot select a Namespace",
            );
        }
    }
    let with_selectors: Vec<usize> = selectors
        .iter()
        .enumerate()
        .filter(|(_, s)| s.scope() == SelectionScope::NamespaceWithResourceSelectors)
        .map(|(i, _)| i)
        .collect();
    if let Some(&first) = with_selectors.first() {
        let f = format!("spec.resourceSelectors[{first}]");
        if with_selectors.len() > 1 {
            p.push(
                format!("{f}.selectionScope"),
                "only one Namespace selector may use selectionScope NamespaceWithResourceSelectors",
            );
        }
        if selectors[first].name.is_none() {
            p.push(
                format!("{f}.name"),
                "a Namespace selector with selectionScope NamespaceWithResourceSelectors must select by name",
            );
        }
        if selectors.iter().filter(|s| s.is_namespace()).count() > 1 {
            p.push(
                format!("{f}.selectionScope"),
                "with selectionScope NamespaceWithResourceSelectors it must be the only Namespace selector",
            );
        }
    }
}

/// The CRD's CEL rules refuse a list that may not be set for the placement type even when it
/// is written empty (`has()` is true); the webhook's rules, which follow, catch a non-empty one.
fn validate_written_lists(policy: &PlacementPolicy, p: &mut Problems) {
    let w = policy.written;
    let ty = policy.placement_type;
    let refused: &[(&str, bool, bool)] = match ty {
        PlacementType::PickFixed => &[
            (
                "topologySpreadConstraints",
                w.topology_spread_constraints,
                policy.topology_spread_constraints.is_empty(),
            ),
            ("tolerations", w.tolerations, policy.tolerations.is_empty()),
        ],
        PlacementType::PickAll => &[
            (
                "clusterNames",
                w.cluster_names,
                policy.cluster_names.is_empty(),
            ),
            (
                "topologySpreadConstraints",
                w.topology_spread_constraints,
                policy.topology_spread_constraints.is_empty(),
            ),
        ],
        PlacementType::PickN => &[(
            "clusterNames",
            w.cluster_names,
            policy.cluster_names.is_empty(),
        )],
    };
    for &(field, written, empty) in refused {
        if written && empty {
            p.push(
                format!("spec.policy.{field}"),
                format!("{field} cannot be set when placementType is {ty:?}, not even to an empty list (a CEL rule of the CRD); leave it out"),
            );
        }
    }
}

fn validate_policy(policy: &PlacementPolicy, p: &mut Problems) {
    let f = "spec.policy";
    validate_written_lists(policy, p);
    // The webhook refuses any `affinity` with PickFixed, an empty one included.
    let has_affinity = policy.affinity.is_some();
    match policy.placement_type {
        PlacementType::PickFixed => {
            if policy.cluster_names.len() > 100 {
                p.push(format!("{f}.clusterNames"), "must have at most 100 items");
            }
            let mut seen = std::collections::HashSet::new();
            for (i, c) in policy.cluster_names.iter().enumerate() {
                if !seen.insert(c) {
                    p.push(
                        format!("{f}.clusterNames[{i}]"),
                        format!("duplicate cluster name {c:?}"),
                    );
                }
                if c.len() > 63 || !is_dns1123_subdomain(c) {
                    p.push(
                        format!("{f}.clusterNames[{i}]"),
                        format!("{c:?} is not a valid cluster name: a DNS-1123 subdomain of at most 63 characters"),
                    );
                }
            }
            if has_affinity {
                p.push(
                    format!("{f}.affinity"),
                    "affinity must be nil for policy type PickFixed",
                );
            }
            if policy.number_of_clusters.is_some() {
                p.push(
                    format!("{f}.numberOfClusters"),
                    "number of clusters must be nil for policy type PickFixed",
                );
            }
            if !policy.topology_spread_constraints.is_empty() {
                p.push(
                    format!("{f}.topologySpreadConstraints"),
                    "topology spread constraints needs to be empty for policy type PickFixed",
                );
            }
            if !policy.tolerations.is_empty() {
                p.push(
                    format!("{f}.tolerations"),
                    "tolerations needs to be empty for policy type PickFixed",
                );
            }
        }
        PlacementType::PickAll => {
            if !policy.cluster_names.is_empty() {
                p.push(
                    format!("{f}.clusterNames"),
                    "cluster names needs to be empty for policy type PickAll",
                );
            }
            if policy.number_of_clusters.is_some() {
                p.push(
                    format!("{f}.numberOfClusters"),
                    "number of clusters must be nil for policy type PickAll",
                );
            }
            if !policy.topology_spread_constraints.is_empty() {
                p.push(
                    format!("{f}.topologySpreadConstraints"),
                    "topology spread constraints needs to be empty for policy type PickAll",
                );
            }
            let preferred = policy
                .affinity
                .as_ref()
                .and_then(|a| a.cluster_affinity.as_ref())
                .is_some_and(|c| {
                    !c.preferred_during_scheduling_ignored_during_execution
                        .is_empty()
                });
            if preferred {
                p.push(
                    format!("{f}.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution"),
                    "PreferredDuringSchedulingIgnoredDuringExecution will be ignored for placement policy type PickAll",
                );
            }
        }
        PlacementType::PickN => {
            match policy.number_of_clusters {
                None => p.push(
                    format!("{f}.numberOfClusters"),
                    "Required value: number of clusters cannot be nil for policy type PickN",
                ),
                Some(n) if n < 0 => p.push(
                    format!("{f}.numberOfClusters"),
                    format!("number of clusters cannot be {n} for policy type PickN"),
                ),
                _ => {}
            }
            if !policy.cluster_names.is_empty() {
                p.push(
                    format!("{f}.clusterNames"),
                    "cluster names needs to be empty for policy type PickN",
                );
            }
        }
    }
    if let Some(ca) = policy
        .affinity
        .as_ref()
        .and_then(|a| a.cluster_affinity.as_ref())
    {
        validate_affinity(ca, p);
    }
    for (i, t) in policy.topology_spread_constraints.iter().enumerate() {
        let tf = format!("{f}.topologySpreadConstraints[{i}]");
        if t.topology_key.is_empty() {
            p.push(format!("{tf}.topologyKey"), "Required value");
        }
        if let Some(s) = t.max_skew {
            if s < 1 {
                p.push(
                    format!("{tf}.maxSkew"),
                    format!("must be at least 1, got {s}"),
                );
            }
        }
    }
    validate_tolerations(&policy.tolerations, p);
}

fn validate_affinity(ca: &ClusterAffinity, p: &mut Problems) {
    let f = "spec.policy.affinity.clusterAffinity";
    if let Some(req) = &ca.required_during_scheduling_ignored_during_execution {
        let rf = format!("{f}.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms");
        let n = req.cluster_selector_terms.len();
        if n > 10 {
            p.push(
                rf.clone(),
                format!("Too many: {n}: must have at most 10 items"),
            );
        } else if n == 0 {
            // KubeFleet admits an empty list and its affinity plugin then skips the filter (every
            // cluster is eligible); gitfleet's scheduler reads an empty list as "no cluster".
            p.push(
                rf.clone(),
                "an empty list is refused by gitfleet (its own rule, not KubeFleet's: KubeFleet treats it as no required affinity); leave requiredDuringSchedulingIgnoredDuringExecution out instead",
            );
        }
        for (i, term) in req.cluster_selector_terms.iter().enumerate() {
            let tf = format!("{rf}[{i}]");
            if term.property_sorter.is_some() {
                p.push(
                    format!("{tf}.propertySorter"),
                    "propertySorter is not allowed in required affinity terms",
                );
            }
            validate_term(term, &tf, p);
        }
    }
    for (i, pref) in ca
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .enumerate()
    {
        let pf = format!("{f}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        if !(-100..=100).contains(&pref.weight) {
            p.push(
                format!("{pf}.weight"),
                format!("must be between -100 and 100, got {}", pref.weight),
            );
        }
        if pref.preference.property_selector.is_some() {
            p.push(
                format!("{pf}.preference.propertySelector"),
                "propertySelector is not allowed in preferred affinity terms",
            );
        }
        if let Some(sorter) = &pref.preference.property_sorter {
            if let Err(msg) = check_property_name(&sorter.name) {
                p.push(format!("{pf}.preference.propertySorter.name"), msg);
            }
        }
        validate_term(&pref.preference, &format!("{pf}.preference"), p);
    }
}

fn validate_term(term: &ClusterSelectorTerm, f: &str, p: &mut Problems) {
    if let Some(ls) = &term.label_selector {
        // The webhook's LabelSelectorAsSelector: structure, keys and values.
        super::member::check_selector(&format!("{f}.labelSelector"), ls, p);
    }
    if let Some(ps) = &term.property_selector {
        for (name, msg) in contradictions(&ps.match_expressions) {
            p.push(
                format!("{f}.propertySelector.matchExpressions"),
                format!("inconsistent requirements on property {name}: {msg}"),
            );
        }
        for (i, r) in ps.match_expressions.iter().enumerate() {
            let rf = format!("{f}.propertySelector.matchExpressions[{i}]");
            if let Err(msg) = check_property_name(&r.name) {
                p.push(format!("{rf}.name"), msg);
            }
            if r.values.len() != 1 {
                p.push(
                    format!("{rf}.values"),
                    format!("exactly one value is required, got {}", r.values.len()),
                );
            }
            for (j, v) in r.values.iter().enumerate() {
                if let Err(e) = Quantity::parse(v) {
                    p.push(format!("{rf}.values[{j}]"), e.to_string());
                }
            }
        }
    }
}

/// The requirements on one property that no value can meet together, per property (in order of
/// first appearance), as KubeFleet's webhook finds them (`validateRequirementsConsistency`): two
/// different `Eq` values, an `Eq` and a `Ne` on the same value, bounds that exclude every value,
/// an `Eq` outside the bounds. Requirements that are malformed on their own are skipped here.
pub fn contradictions(reqs: &[PropertySelectorRequirement]) -> Vec<(String, String)> {
    let mut names: Vec<&str> = Vec::new();
    for r in reqs {
        if !names.contains(&r.name.as_str()) {
            names.push(&r.name);
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let of_name: Vec<&PropertySelectorRequirement> =
                reqs.iter().filter(|r| r.name == name).collect();
            (of_name.len() > 1)
                .then(|| contradiction(&of_name))
                .flatten()
                .map(|msg| (name.to_string(), msg))
        })
        .collect()
}

/// A bound: the value, as written and as a number, and whether it is excluded (`Gt`, `Lt`).
type Bound<'a> = (&'a str, f64, bool);

fn contradiction(reqs: &[&PropertySelectorRequirement]) -> Option<String> {
    let (mut lower, mut upper): (Option<Bound>, Option<Bound>) = (None, None);
    let (mut eq, mut ne): (Option<(&str, f64)>, Vec<f64>) = (None, Vec::new());
    for r in reqs {
        let [v] = r.values.as_slice() else { continue };
        let Ok(q) = Quantity::parse(v) else { continue };
        let (v, q) = (v.as_str(), q.0);
        match r.operator {
            PropertyOperator::Gt | PropertyOperator::Ge => {
                let strict = r.operator == PropertyOperator::Gt;
                // The higher bound wins; at the same value the strict one.
                if lower.is_none_or(|l| q > l.1 || (q == l.1 && strict && !l.2)) {
                    lower = Some((v, q, strict));
                }
            }
            PropertyOperator::Lt | PropertyOperator::Le => {
                let strict = r.operator == PropertyOperator::Lt;
                if upper.is_none_or(|u| q < u.1 || (q == u.1 && strict && !u.2)) {
                    upper = Some((v, q, strict));
                }
            }
            PropertyOperator::Eq => match eq {
                Some((e, eq_q)) if eq_q != q => {
                    return Some(format!("conflicting Eq values {e} and {v}"));
                }
                _ => eq = Some((v, q)),
            },
            PropertyOperator::Ne => ne.push(q),
        }
    }
    if let Some((e, q)) = eq {
        if ne.contains(&q) {
            return Some(format!("conflicting Eq and Ne on same value {e}"));
        }
    }
    if let (Some(l), Some(u)) = (lower, upper) {
        if l.1 > u.1 || (l.1 == u.1 && (l.2 || u.2)) {
            return Some(format!(
                "lower bound ({}) and upper bound ({}) exclude all values",
                l.0, u.0
            ));
        }
    }
    let (e, q) = eq?;
    if let Some(l) = lower.filter(|l| q < l.1 || (q == l.1 && l.2)) {
        return Some(format!("eq value {e} violates lower bound {}", l.0));
    }
    if let Some(u) = upper.filter(|u| q > u.1 || (q == u.1 && u.2)) {
        return Some(format!("eq value {e} violates upper bound {}", u.0));
    }
    None
}

/// Why `name` is not a property name KubeFleet's webhook admits (`validateName` in
/// pkg/utils/validator/placement.go): a resource property is
/// `resources.kubernetes-fleet.io/<total|allocatable|available>-<resource>` and a qualified name;
/// any other is one or more `/`-separated qualified names, the first of which may instead be a
/// DNS subdomain (so `example.com/cost-tier` and `a.b/c/d` are names).
pub fn check_property_name(name: &str) -> Result<(), String> {
    use super::member::qualified_name_problem;
    if name.is_empty() {
        return Err("Required value: property name is required".into());
    }
    if let Some(rest) = name.strip_prefix("resources.kubernetes-fleet.io/") {
        let ok = ["total-", "allocatable-", "available-"]
            .iter()
            .any(|p| rest.strip_prefix(p).is_some_and(|r| !r.is_empty()));
        if !ok {
            return Err(format!(
                "invalid resource property {name:?}: expected resources.kubernetes-fleet.io/<total|allocatable|available>-<resource>"
            ));
        }
        return match qualified_name_problem(name) {
            Some(msg) => Err(format!("invalid property name {name:?}: {msg}")),
            None => Ok(()),
        };
    }
    let mut segments = name.split('/');
    let first = segments.next().unwrap_or_default();
    let rest: Vec<&str> = segments.collect();
    if rest.is_empty() {
        return match qualified_name_problem(name) {
            Some(msg) => Err(format!("invalid property name {name:?}: {msg}")),
            None => Ok(()),
        };
    }
    if !is_dns1123_subdomain(first) && qualified_name_problem(first).is_some() {
        return Err(format!(
            "invalid property name {name:?}: its first segment {first:?} is neither a DNS subdomain nor a qualified name"
        ));
    }
    for seg in rest {
        if let Some(msg) = qualified_name_problem(seg) {
            return Err(format!(
                "invalid property name {name:?}: segment {seg:?}: {msg}"
            ));
        }
    }
    Ok(())
}

fn validate_tolerations(tolerations: &[Toleration], p: &mut Problems) {
    let f = "spec.policy.tolerations";
    if tolerations.len() > 100 {
        p.push(f, "must have at most 100 items");
    }
    for (i, t) in tolerations.iter().enumerate() {
        let tf = format!("{f}[{i}]");
        let op = t.operator.unwrap_or_default();
        match op {
            TolerationOperator::Exists => {
                if !t.value.is_empty() {
                    p.push(
                        format!("{tf}.value"),
                        "toleration value needs to be empty, when operator is Exists",
                    );
                }
            }
            TolerationOperator::Equal => {
                if t.key.is_empty() {
                    p.push(
                        format!("{tf}.key"),
                        "toleration key cannot be empty, when operator is Equal",
                    );
                }
                if !is_label_value(&t.value) {
                    p.push(
                        format!("{tf}.value"),
                        format!("{:?} is not a valid label value", t.value),
                    );
                }
            }
        }
        if !t.key.is_empty() && !super::is_qualified_name(&t.key) {
            p.push(
                format!("{tf}.key"),
                format!("{:?} is not a valid qualified name", t.key),
            );
        }
        // The webhook compares tolerations after the CRD has defaulted `operator` to Equal.
        let same = |o: &Toleration| {
            o.key == t.key
                && o.value == t.value
                && o.effect == t.effect
                && o.operator.unwrap_or_default() == op
        };
        if tolerations[..i].iter().any(same) {
            p.push(
                tf,
                format!("toleration {t:?} already exists, tolerations must be unique"),
            );
        }
    }
}

fn validate_strategy(s: &RolloutStrategy, is_v1: bool, p: &mut Problems) {
    let f = "spec.strategy";
    if is_v1 {
        // These fields exist only in v1beta1; a v1 server prunes nothing, it rejects them.
        if s.delete_strategy.is_some() {
            p.push(
                format!("{f}.deleteStrategy"),
                "unknown field \"deleteStrategy\" (v1beta1 only)",
            );
        }
        if s.report_back_strategy.is_some() {
            p.push(
                format!("{f}.reportBackStrategy"),
                "unknown field \"reportBackStrategy\" (v1beta1 only)",
            );
        }
    }
    if let Some(r) = &s.report_back_strategy {
        // CEL rule of the CRD on reportBackStrategy.
        if r.type_ == ReportBackType::Mirror && r.destination.is_none() {
            p.push(
                format!("{f}.reportBackStrategy"),
                "when reportBackStrategy.type is 'Mirror', a destination must be specified",
            );
        }
    }
    let ty = s.type_.unwrap_or_default();
    if let Some(ru) = &s.rolling_update {
        if ty == RolloutStrategyType::External {
            p.push(
                format!("{f}.rollingUpdate"),
                "rollingUpdate config is not valid for External rollout strategy type",
            );
        }
        for (field, v) in [
            ("maxUnavailable", &ru.max_unavailable),
            ("maxSurge", &ru.max_surge),
        ] {
            if let Some(v) = v {
                if !v.is_well_formed() {
                    p.push(
                        format!("{f}.rollingUpdate.{field}"),
                        format!("{v:?} must match ^((100|[0-9]{{1,2}})%|[0-9]+)$"),
                    );
                }
            }
        }
        if let Some(sec) = ru.unavailable_period_seconds {
            if sec < 0 {
                p.push(
                    format!("{f}.rollingUpdate.unavailablePeriodSeconds"),
                    format!("must be at least 0, got {sec}"),
                );
            }
        }
    }
    // `serverSideApplyConfig` under another apply type is admitted: KubeFleet honors it only
    // under ServerSideApply and no webhook refuses it, and neither does gitfleet.
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::decode;

    fn placement(yaml: &str) -> Placement {
        let v: Value = crate::yaml::from_str(yaml).unwrap();
        decode(&v).unwrap()
    }

    fn problems(yaml: &str) -> Vec<(String, String)> {
        placement(yaml)
            .validate()
            .into_iter()
            .map(|p| (p.field, p.message))
            .collect()
    }

    const HEAD: &str = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {name: crp}\n";

    fn crp(spec: &str) -> String {
        format!("{HEAD}spec:\n{spec}")
    }

    const SEL: &str =
        "  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n";

    #[test]
    fn defaults_follow_kubefleet() {
        let p = placement(&crp(SEL));
        let d = p.defaulted_spec();
        let policy = d.policy.unwrap();
        assert_eq!(policy.placement_type, PlacementType::PickAll);
        assert_eq!(d.revision_history_limit, Some(10));
        let ru = d.strategy.rolling_update.unwrap();
        assert_eq!(ru.max_unavailable, Some(IntOrPercent::String("25%".into())));
        assert_eq!(ru.max_surge, Some(IntOrPercent::String("25%".into())));
        assert_eq!(ru.unavailable_period_seconds, Some(60));
        let a = d.strategy.apply_strategy.unwrap();
        assert_eq!(a.type_, Some(ApplyStrategyType::ClientSideApply));
        assert_eq!(a.when_to_take_over, Some(WhenToTakeOver::Always));
        assert!(a.server_side_apply_config.is_none());
    }

    #[test]
    fn spread_and_toleration_defaults() {
        let p = placement(&crp(&format!(
            "{SEL}  policy:\n    placementType: PickN\n    numberOfClusters: 2\n    topologySpreadConstraints: [{{topologyKey: region}}]\n    tolerations: [{{key: a, value: b}}]\n"
        )));
        let policy = p.spec.policy_or_default();
        assert_eq!(policy.topology_spread_constraints[0].max_skew, Some(1));
        assert_eq!(
            policy.topology_spread_constraints[0].when_unsatisfiable,
            Some(UnsatisfiableAction::DoNotSchedule)
        );
        assert_eq!(
            policy.tolerations[0].operator,
            Some(TolerationOperator::Equal)
        );
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_path() {
        let v: Value =
            crate::yaml::from_str(&crp(&format!("{SEL}  policy: {{placementTyp: PickAll}}\n")))
                .unwrap();
        let err = decode::<Placement>(&v).unwrap_err();
        assert_eq!(err.field, "spec.policy.placementTyp");
        assert!(
            err.message.contains("unknown field `placementTyp`"),
            "{}",
            err.message
        );
    }

    fn problems_of(spec: &str) -> Vec<(String, String)> {
        problems(&crp(spec))
    }

    /// Stricter than KubeFleet no more: each of these is admitted by the CRD and by KubeFleet's
    /// webhook (pkg/utils/validator/placement.go), as the test bed's API server admits it.
    #[test]
    fn admitted_as_kubefleet_admits_them() {
        for spec in [
            // validatePolicyForPickFixedPlacementType loops over the names; none is no error.
            format!("{SEL}  policy: {{placementType: PickFixed}}\n"),
            format!("{SEL}  policy: {{placementType: PickFixed, clusterNames: []}}\n"),
            // No rule reads selectionScope on other kinds; the resolver ignores it there.
            "  resourceSelectors: [{group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: r, selectionScope: NamespaceOnly}]\n".to_string(),
            // The CRD: "The minimum of MaxUnavailable is 0"; the webhook refuses only below 0.
            format!("{SEL}  strategy: {{rollingUpdate: {{maxUnavailable: 0}}}}\n"),
            format!("{SEL}  strategy: {{rollingUpdate: {{maxUnavailable: '0%'}}}}\n"),
        ] {
            assert_eq!(problems_of(&spec), vec![], "{spec}");
        }
    }

    /// The API server's name rule for custom resources (a DNS-1123 subdomain, dots allowed) and
    /// the webhook's limit of 63 characters.
    #[test]
    fn placement_name_is_a_subdomain_of_at_most_63_characters() {
        let named = |n: &str| crp(SEL).replace("{name: crp}", &format!("{{name: '{n}'}}"));
        assert_eq!(problems(&named("web.v2")), vec![]);
        assert_eq!(problems(&named(&"a".repeat(63))), vec![]);
        let got = problems(&named(&"a".repeat(64)));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "metadata.name");
        assert!(got[0]
            .1
            .starts_with("the name field cannot have length exceeding 63"));
        let got = problems(&named("Web_2"));
        assert!(
            got[0]
                .1
                .starts_with("Invalid value: \"Web_2\": a lowercase RFC 1123 subdomain"),
            "{got:?}"
        );
    }

    /// The webhook refuses any `affinity` with PickFixed (`policy.Affinity != nil`), an empty
    /// one included.
    #[test]
    fn pick_fixed_refuses_any_affinity() {
        let got = problems_of(&format!(
            "{SEL}  policy: {{placementType: PickFixed, clusterNames: [a], affinity: {{}}}}\n"
        ));
        assert_eq!(
            got,
            [(
                "spec.policy.affinity".to_string(),
                "affinity must be nil for policy type PickFixed".to_string()
            )]
        );
    }

    /// gitfleet's own rule: an empty list of required terms. KubeFleet admits it and skips the
    /// affinity filter; the diagnostic says whose rule it is.
    #[test]
    fn empty_required_affinity_terms_are_gitfleets_own_rule() {
        let got = problems_of(&format!(
            "{SEL}  policy: {{affinity: {{clusterAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{clusterSelectorTerms: []}}}}}}}}\n"
        ));
        assert_eq!(got.len(), 1);
        assert!(
            got[0].1.contains("gitfleet (its own rule, not KubeFleet's"),
            "{got:?}"
        );
    }

    /// The webhook's `validateRequirementsConsistency`: requirements on one property that no
    /// value meets together.
    #[test]
    fn contradictory_property_requirements() {
        let term = |exprs: &str| {
            format!(
                "{SEL}  policy:\n    placementType: PickN\n    numberOfClusters: 1\n    affinity: {{clusterAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{clusterSelectorTerms: [{{propertySelector: {{matchExpressions: [{exprs}]}}}}]}}}}}}\n"
            )
        };
        let e = |op: &str, v: &str| format!("{{name: cpu, operator: {op}, values: ['{v}']}}");
        let cases: Vec<(String, Option<&str>)> = vec![
            (
                format!("{}, {}", e("Eq", "2"), e("Eq", "3")),
                Some("conflicting Eq values 2 and 3"),
            ),
            (format!("{}, {}", e("Eq", "2"), e("Eq", "2000m")), None),
            (
                format!("{}, {}", e("Eq", "2"), e("Ne", "2")),
                Some("conflicting Eq and Ne on same value 2"),
            ),
            (
                format!("{}, {}", e("Gt", "4"), e("Lt", "2")),
                Some("lower bound (4) and upper bound (2) exclude all values"),
            ),
            (format!("{}, {}", e("Ge", "2"), e("Le", "2")), None),
            (
                format!("{}, {}", e("Gt", "2"), e("Le", "2")),
                Some("lower bound (2) and upper bound (2) exclude all values"),
            ),
            (
                format!("{}, {}, {}", e("Ge", "1"), e("Gt", "3"), e("Lt", "3")),
                Some("lower bound (3) and upper bound (3) exclude all values"),
            ),
            (
                format!("{}, {}", e("Eq", "1"), e("Ge", "2")),
                Some("eq value 1 violates lower bound 2"),
            ),
            (
                format!("{}, {}", e("Eq", "5"), e("Lt", "5")),
                Some("eq value 5 violates upper bound 5"),
            ),
            (format!("{}, {}", e("Gt", "1"), e("Lt", "5")), None),
            // Another property's requirements are not compared with these.
            (
                format!(
                    "{}, {{name: mem, operator: Lt, values: ['1']}}",
                    e("Gt", "4")
                ),
                None,
            ),
        ];
        let f = "spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions";
        for (exprs, want) in cases {
            let got = problems_of(&term(&exprs));
            let want: Vec<(String, String)> = want
                .map(|m| {
                    (
                        f.to_string(),
                        format!("inconsistent requirements on property cpu: {m}"),
                    )
                })
                .into_iter()
                .collect();
            assert_eq!(got, want, "{exprs}");
        }
    }

    /// The webhook's scope rules, with the scope table: a ClusterResourcePlacement selects
    /// cluster-scoped kinds (namespaced ones only in NamespaceWithResourceSelectors mode), a
    /// ResourcePlacement namespaced kinds only, Namespace or not.
    #[test]
    fn placement_selects_kinds_of_its_scope() {
        let scopes = ScopeTable::builtin();
        let scope_problems = |doc: String| -> Vec<String> {
            placement(&doc)
                .scope_problems(&scopes)
                .into_iter()
                .map(|p| format!("{}: {}", p.field, p.message))
                .collect()
        };
        let deploy = "{group: apps, version: v1, kind: Deployment, name: web}";
        let role = "{group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: r}";
        let widget = "{group: example.com, version: v1, kind: Widget, name: w}";
        let got = scope_problems(crp(&format!(
            "  resourceSelectors: [{deploy}, {role}, {widget}]\n"
        )));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("spec.resourceSelectors[0]: a ClusterResourcePlacement selects cluster-scoped resources; Deployment is namespaced"));
        let with_selectors = format!(
            "  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: app, selectionScope: NamespaceWithResourceSelectors}}, {deploy}]\n"
        );
        assert_eq!(scope_problems(crp(&with_selectors)), Vec::<String>::new());
        let rp = |sel: &str| {
            format!("apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ResourcePlacement\nmetadata: {{name: rp, namespace: app}}\nspec:\n  resourceSelectors: [{sel}]\n")
        };
        let got = scope_problems(rp(&format!("{deploy}, {role}, {widget}")));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("spec.resourceSelectors[1]: a ResourcePlacement selects namespaced resources of its own namespace; ClusterRole is cluster-scoped"));
    }

    #[test]
    fn v1_rejects_v1beta1_only_fields() {
        let doc = crp(&format!(
            "{SEL}  strategy: {{deleteStrategy: {{propagationPolicy: Abandon}}}}\n"
        ))
        .replace("/v1beta1", "/v1");
        assert_eq!(problems(&doc)[0].0, "spec.strategy.deleteStrategy");
        let beta = crp(&format!(
            "{SEL}  strategy: {{deleteStrategy: {{propagationPolicy: Abandon}}}}\n"
        ));
        assert!(problems(&beta).is_empty());
    }

    #[test]
    fn percent_scaling_rounds_up() {
        assert_eq!(IntOrPercent::String("25%".into()).scaled_up(10), Some(3));
        assert_eq!(IntOrPercent::String("25%".into()).scaled_up(4), Some(1));
        assert_eq!(IntOrPercent::Int(2).scaled_up(10), Some(2));
        assert!(!IntOrPercent::String("1000%".into()).is_well_formed());
        assert!(IntOrPercent::String("100%".into()).is_well_formed());
    }

    /// KubeFleet's webhook `validateName`: resource properties by capacity type, others as
    /// `/`-separated qualified names with an optional DNS-subdomain first segment.
    #[test]
    fn property_names_follow_the_webhook_rule() {
        for good in [
            "resources.kubernetes-fleet.io/total-cpu",
            "resources.kubernetes-fleet.io/available-memory",
            "kubernetes-fleet.io/node-count",
            "example.com/cost-tier",
            "kubernetes.azure.com/vm-sizes/Standard_D4s_v3/capacity",
            "plain",
        ] {
            assert_eq!(check_property_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "resources.kubernetes-fleet.io/used-cpu",
            "resources.kubernetes-fleet.io/total",
            "bad name",
            "example.com//x",
            "example.com/-x",
            "Bad Prefix/x",
            "a/b/",
        ] {
            assert!(check_property_name(bad).is_err(), "{bad}");
        }
    }

    /// CEL rule of the CRD: `reportBackStrategy.type: Mirror` needs a destination.
    #[test]
    fn report_back_mirror_requires_a_destination() {
        let got = problems(&crp(&format!(
            "{SEL}  strategy: {{reportBackStrategy: {{type: Mirror}}}}\n"
        )));
        assert_eq!(got[0].0, "spec.strategy.reportBackStrategy");
        assert!(got[0].1.contains("a destination must be specified"));
        assert!(problems(&crp(&format!(
            "{SEL}  strategy: {{reportBackStrategy: {{type: Mirror, destination: WorkAPI}}}}\n"
        )))
        .is_empty());
    }

    /// The CRD defaults `reportBackStrategy.type` to Disabled, so it may be left out.
    #[test]
    fn report_back_type_defaults_to_disabled() {
        let p = placement(&crp(&format!(
            "{SEL}  strategy: {{reportBackStrategy: {{}}}}\n"
        )));
        assert_eq!(
            p.spec.strategy.report_back_strategy.unwrap().type_,
            ReportBackType::Disabled
        );
    }

    /// A null in a field is pruned by the API server and the CRD's default applies:
    /// `spec.strategy: null` is the default strategy, `reportBackStrategy: {type: null}` is
    /// Disabled, `policy: {placementType: null}` is PickAll.
    #[test]
    fn null_fields_take_the_crd_defaults() {
        let p = placement(&crp(&format!("{SEL}  strategy: null\n")));
        assert_eq!(p.spec.strategy, RolloutStrategy::default());
        let p = placement(&crp(&format!(
            "{SEL}  strategy: {{reportBackStrategy: {{type: null}}}}\n"
        )));
        assert_eq!(
            p.spec.strategy.report_back_strategy.unwrap().type_,
            ReportBackType::Disabled
        );
        let p = placement(&crp(&format!(
            "{SEL}  policy: {{placementType: null, clusterNames: null}}\n"
        )));
        assert_eq!(
            p.spec.policy.unwrap().placement_type,
            PlacementType::PickAll
        );
        assert!(problems(&crp(&format!("{SEL}  strategy: null\n"))).is_empty());
    }

    /// The webhook's `LabelSelectorAsSelector`: keys and values of resource and cluster
    /// selectors are label keys and values.
    #[test]
    fn placement_label_selectors_hold_valid_keys_and_values() {
        let got = problems(&crp(
            "  resourceSelectors: [{group: '', version: v1, kind: Namespace, labelSelector: {matchLabels: {'bad key!': v}}}]\n",
        ));
        assert_eq!(
            got[0].0, "spec.resourceSelectors[0].labelSelector.matchLabels",
            "{got:?}"
        );
        let got = problems(&crp(&format!(
            "{SEL}  policy:\n    affinity: {{clusterAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{clusterSelectorTerms: [{{labelSelector: {{matchExpressions: [{{key: env, operator: In, values: ['-x']}}]}}}}]}}}}}}\n"
        )));
        assert_eq!(
            got[0].0,
            "spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].labelSelector.matchExpressions[0].values[0]",
            "{got:?}"
        );
    }
    /// One test per rule of the CRDs (schema and CEL), KubeFleet's webhook
    /// (pkg/utils/validator/placement.go) and gitfleet's own, named after the rule: the
    /// breaking document names the field, the edge case is admitted.
    mod rules {
        use super::{crp, SEL};
        use crate::model::testing::rule_tests;

        fn policy(p: &str) -> String {
            crp(&format!("{SEL}  policy: {p}\n"))
        }
        fn strategy(s: &str) -> String {
            crp(&format!("{SEL}  strategy: {s}\n"))
        }
        /// A PickN policy with the given cluster affinity.
        fn affinity(ca: &str) -> String {
            policy(&format!(
                "{{placementType: PickN, numberOfClusters: 1, affinity: {{clusterAffinity: {ca}}}}}"
            ))
        }
        fn required(terms: &str) -> String {
            affinity(&format!(
                "{{requiredDuringSchedulingIgnoredDuringExecution: {{clusterSelectorTerms: [{terms}]}}}}"
            ))
        }
        fn preferred(weight: i32, preference: &str) -> String {
            affinity(&format!(
                "{{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: {weight}, preference: {preference}}}]}}"
            ))
        }
        fn property(expr: &str) -> String {
            required(&format!(
                "{{propertySelector: {{matchExpressions: [{expr}]}}}}"
            ))
        }
        fn named(name: &str) -> String {
            crp(SEL).replace("{name: crp}", &format!("{{name: '{name}'}}"))
        }
        fn selectors(items: &[&str]) -> String {
            crp(&format!("  resourceSelectors: [{}]\n", items.join(", ")))
        }
        fn namespaces(n: usize) -> String {
            let items: Vec<String> = (0..n)
                .map(|i| format!("{{group: '', version: v1, kind: Namespace, name: ns{i}}}"))
                .collect();
            crp(&format!("  resourceSelectors: [{}]\n", items.join(", ")))
        }
        fn list(n: usize, item: impl Fn(usize) -> String) -> String {
            (0..n).map(item).collect::<Vec<_>>().join(", ")
        }
        fn rp(sel: &str) -> String {
            format!("apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ResourcePlacement\nmetadata: {{name: rp, namespace: app}}\nspec:\n  resourceSelectors: [{sel}]\n")
        }
        const NS: &str = "{group: '', version: v1, kind: Namespace, name: app}";
        const NS_WITH: &str = "{group: '', version: v1, kind: Namespace, name: app, selectionScope: NamespaceWithResourceSelectors}";
        const CM: &str = "{group: '', version: v1, kind: ConfigMap, name: c}";
        const REQ: &str = "spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms";
        const PREF: &str = "spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]";
        const EXPR: &str = "spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[0]";

        rule_tests! { super::Placement;
            // Metadata: the API server's name rule, the webhook's length limit.
            name_is_required: named("") => "metadata.name", "name is required";
                ok: named("a");
            name_at_most_63_characters: named(&"a".repeat(64)) => "metadata.name", "cannot have length exceeding 63";
                ok: named(&"a".repeat(63));
            name_is_a_dns_subdomain: named("Web_2") => "metadata.name", "RFC 1123 subdomain";
                ok: named("web.v2");
            // Resource selectors: the CRD's item counts and required fields, the webhook's rules.
            resource_selectors_required: crp("  resourceSelectors: []\n") => "spec.resourceSelectors", "at least one";
                ok: namespaces(1);
            resource_selectors_at_most_100: namespaces(101) => "spec.resourceSelectors", "at most 100 items";
                ok: namespaces(100);
            resource_selector_version_required: selectors(&["{group: '', version: '', kind: Namespace, name: a}"]) => "spec.resourceSelectors[0].version", "Required value";
                ok: selectors(&[NS]);
            resource_selector_kind_required: selectors(&["{group: '', version: v1, kind: '', name: a}"]) => "spec.resourceSelectors[0].kind", "Required value";
                ok: selectors(&[NS]);
            resource_selector_name_and_label_selector_exclusive: selectors(&["{group: '', version: v1, kind: Namespace, name: a, labelSelector: {}}"]) => "spec.resourceSelectors[0]", "mutually exclusive";
                ok: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {}}"]);
            resource_selector_label_keys_are_qualified_names: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchLabels: {'bad key!': v}}}"]) => "spec.resourceSelectors[0].labelSelector.matchLabels", "key \"bad key!\"";
                ok: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchLabels: {'example.com/k': v}}}"]);
            resource_selector_label_values_are_label_values: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchLabels: {k: '-v'}}}"]) => "spec.resourceSelectors[0].labelSelector.matchLabels", "value \"-v\"";
                ok: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchLabels: {k: ''}}}"]);
            label_selector_in_requires_values: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchExpressions: [{key: k, operator: In, values: []}]}}"]) => "spec.resourceSelectors[0].labelSelector.matchExpressions[0].values", "must be specified";
                ok: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchExpressions: [{key: k, operator: In, values: [v]}]}}"]);
            label_selector_exists_refuses_values: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchExpressions: [{key: k, operator: Exists, values: [v]}]}}"]) => "spec.resourceSelectors[0].labelSelector.matchExpressions[0].values", "may not be specified";
                ok: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchExpressions: [{key: k, operator: Exists}]}}"]);
            label_selector_operator_is_an_enum: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchExpressions: [{key: k, operator: Has}]}}"]) => "spec.resourceSelectors[0].labelSelector.matchExpressions[0].operator", "unknown variant";
                ok: selectors(&["{group: '', version: v1, kind: Namespace, labelSelector: {matchExpressions: [{key: k, operator: DoesNotExist}]}}"]);
            resource_placement_cannot_select_a_namespace: rp(NS) => "spec.resourceSelectors[0]", "cannot select a Namespace";
                ok: rp(CM);
            namespace_with_resource_selectors_selects_by_name: selectors(&["{group: '', version: v1, kind: Namespace, selectionScope: NamespaceWithResourceSelectors}"]) => "spec.resourceSelectors[0].name", "must select by name";
                ok: selectors(&[NS_WITH, CM]);
            namespace_with_resource_selectors_at_most_one: selectors(&[NS_WITH, &NS_WITH.replace("app", "b")]) => "spec.resourceSelectors[0].selectionScope", "only one Namespace selector";
                ok: selectors(&[NS_WITH]);
            namespace_with_resource_selectors_is_the_only_namespace_selector: selectors(&[NS_WITH, &NS.replace("app", "b")]) => "spec.resourceSelectors[0].selectionScope", "the only Namespace selector";
                ok: selectors(&[NS_WITH, CM]);
            selection_scope_is_an_enum: selectors(&["{group: '', version: v1, kind: Namespace, name: a, selectionScope: Everything}"]) => "spec.resourceSelectors[0].selectionScope", "unknown variant";
                ok: selectors(&["{group: '', version: v1, kind: Namespace, name: a, selectionScope: NamespaceOnly}"]);
            resource_selector_unknown_field: selectors(&["{group: '', version: v1, kind: Namespace, nme: a}"]) => "spec.resourceSelectors[0].nme", "unknown field";
                ok: selectors(&[NS]);
            // Spec.
            revision_history_limit_at_least_1: crp(&format!("{SEL}  revisionHistoryLimit: 0\n")) => "spec.revisionHistoryLimit", "between 1 and 1000";
                ok: crp(&format!("{SEL}  revisionHistoryLimit: 1\n"));
            revision_history_limit_at_most_1000: crp(&format!("{SEL}  revisionHistoryLimit: 1001\n")) => "spec.revisionHistoryLimit", "between 1 and 1000";
                ok: crp(&format!("{SEL}  revisionHistoryLimit: 1000\n"));
            namespace_accessible_selects_exactly_one_namespace: selectors(&[CM]).replace("spec:\n", "spec:\n  statusReportingScope: NamespaceAccessible\n") => "spec.statusReportingScope", "exactly one resource selector of kind Namespace";
                ok: selectors(&[NS]).replace("spec:\n", "spec:\n  statusReportingScope: NamespaceAccessible\n");
            // Policy, by placement type (the webhook's validatePolicyFor*PlacementType).
            placement_type_is_an_enum: policy("{placementType: PickSome}") => "spec.policy.placementType", "unknown variant";
                ok: policy("{placementType: PickAll}");
            pick_fixed_cluster_names_at_most_100: policy(&format!("{{placementType: PickFixed, clusterNames: [{}]}}", list(101, |i| format!("c{i}")))) => "spec.policy.clusterNames", "at most 100 items";
                ok: policy(&format!("{{placementType: PickFixed, clusterNames: [{}]}}", list(100, |i| format!("c{i}"))));
            pick_fixed_cluster_names_unique: policy("{placementType: PickFixed, clusterNames: [a, a]}") => "spec.policy.clusterNames[1]", "duplicate cluster name";
                ok: policy("{placementType: PickFixed, clusterNames: [a, b]}");
            pick_fixed_cluster_names_are_valid_names: policy("{placementType: PickFixed, clusterNames: [Bad_Name]}") => "spec.policy.clusterNames[0]", "not a valid cluster name";
                ok: policy(&format!("{{placementType: PickFixed, clusterNames: [{}]}}", "a".repeat(63)));
            pick_fixed_cluster_names_at_most_63_characters: policy(&format!("{{placementType: PickFixed, clusterNames: [{}]}}", "a".repeat(64))) => "spec.policy.clusterNames[0]", "at most 63 characters";
                ok: policy("{placementType: PickFixed, clusterNames: [a.b]}");
            pick_fixed_refuses_affinity: policy("{placementType: PickFixed, clusterNames: [a], affinity: {}}") => "spec.policy.affinity", "must be nil for policy type PickFixed";
                ok: policy("{placementType: PickFixed, clusterNames: [a]}");
            pick_fixed_refuses_number_of_clusters: policy("{placementType: PickFixed, clusterNames: [a], numberOfClusters: 1}") => "spec.policy.numberOfClusters", "must be nil for policy type PickFixed";
                ok: policy("{placementType: PickFixed, clusterNames: [a]}");
            pick_fixed_refuses_topology_spread: policy("{placementType: PickFixed, clusterNames: [a], topologySpreadConstraints: [{topologyKey: r}]}") => "spec.policy.topologySpreadConstraints", "PickFixed";
                ok: policy("{placementType: PickFixed, clusterNames: [a], topologySpreadConstraints: null}");
            pick_fixed_refuses_tolerations: policy("{placementType: PickFixed, clusterNames: [a], tolerations: [{key: k, operator: Exists}]}") => "spec.policy.tolerations", "PickFixed";
                ok: policy("{placementType: PickFixed, clusterNames: [a], tolerations: null}");
            pick_all_refuses_cluster_names: policy("{placementType: PickAll, clusterNames: [a]}") => "spec.policy.clusterNames", "PickAll";
                ok: policy("{placementType: PickAll, clusterNames: null}");
            pick_all_refuses_number_of_clusters: policy("{placementType: PickAll, numberOfClusters: 1}") => "spec.policy.numberOfClusters", "PickAll";
                ok: policy("{placementType: PickAll}");
            pick_all_refuses_topology_spread: policy("{placementType: PickAll, topologySpreadConstraints: [{topologyKey: r}]}") => "spec.policy.topologySpreadConstraints", "PickAll";
                ok: policy("{placementType: PickAll, topologySpreadConstraints: null}");
            pick_all_refuses_preferred_affinity: policy("{placementType: PickAll, affinity: {clusterAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: {}}]}}}") => "spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution", "will be ignored";
                ok: policy("{placementType: PickAll, affinity: {clusterAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {clusterSelectorTerms: [{}]}}}}");
            pick_n_requires_number_of_clusters: policy("{placementType: PickN}") => "spec.policy.numberOfClusters", "cannot be nil";
                ok: policy("{placementType: PickN, numberOfClusters: 1}");
            pick_n_number_of_clusters_not_negative: policy("{placementType: PickN, numberOfClusters: -1}") => "spec.policy.numberOfClusters", "cannot be -1";
                ok: policy("{placementType: PickN, numberOfClusters: 0}");
            pick_n_refuses_cluster_names: policy("{placementType: PickN, numberOfClusters: 1, clusterNames: [a]}") => "spec.policy.clusterNames", "PickN";
                ok: policy("{placementType: PickN, numberOfClusters: 1, clusterNames: null}");
            // The CRD's CEL rules test presence: a list written empty is set.
            pick_fixed_refuses_empty_topology_spread: policy("{placementType: PickFixed, clusterNames: [a], topologySpreadConstraints: []}") => "spec.policy.topologySpreadConstraints", "not even to an empty list";
                ok: policy("{placementType: PickFixed, clusterNames: []}");
            pick_fixed_refuses_empty_tolerations: policy("{placementType: PickFixed, clusterNames: [a], tolerations: []}") => "spec.policy.tolerations", "not even to an empty list";
                ok: policy("{placementType: PickFixed, clusterNames: [a]}");
            pick_all_refuses_empty_cluster_names: policy("{placementType: PickAll, clusterNames: []}") => "spec.policy.clusterNames", "not even to an empty list";
                ok: policy("{placementType: PickAll, tolerations: []}");
            pick_all_refuses_empty_topology_spread: policy("{placementType: PickAll, topologySpreadConstraints: []}") => "spec.policy.topologySpreadConstraints", "not even to an empty list";
                ok: policy("{placementType: PickAll}");
            pick_n_refuses_empty_cluster_names: policy("{placementType: PickN, numberOfClusters: 1, clusterNames: []}") => "spec.policy.clusterNames", "not even to an empty list";
                ok: policy("{placementType: PickN, numberOfClusters: 1, topologySpreadConstraints: [], tolerations: []}");
            // Topology spread constraints (CRD).
            topology_key_required: policy("{placementType: PickN, numberOfClusters: 1, topologySpreadConstraints: [{topologyKey: ''}]}") => "spec.policy.topologySpreadConstraints[0].topologyKey", "Required value";
                ok: policy("{placementType: PickN, numberOfClusters: 1, topologySpreadConstraints: [{topologyKey: r}]}");
            max_skew_at_least_1: policy("{placementType: PickN, numberOfClusters: 1, topologySpreadConstraints: [{topologyKey: r, maxSkew: 0}]}") => "spec.policy.topologySpreadConstraints[0].maxSkew", "at least 1";
                ok: policy("{placementType: PickN, numberOfClusters: 1, topologySpreadConstraints: [{topologyKey: r, maxSkew: 1}]}");
            when_unsatisfiable_is_an_enum: policy("{placementType: PickN, numberOfClusters: 1, topologySpreadConstraints: [{topologyKey: r, whenUnsatisfiable: Maybe}]}") => "spec.policy.topologySpreadConstraints[0].whenUnsatisfiable", "unknown variant";
                ok: policy("{placementType: PickN, numberOfClusters: 1, topologySpreadConstraints: [{topologyKey: r, whenUnsatisfiable: ScheduleAnyway}]}");
            // Cluster affinity.
            required_cluster_selector_terms_at_most_10: required(&list(11, |_| "{}".into())) => REQ, "must have at most 10 items";
                ok: required(&list(10, |_| "{}".into()));
            required_cluster_selector_terms_not_empty_is_gitfleets_own: required("") => REQ, "its own rule, not KubeFleet's";
                ok: required("{}");
            required_terms_refuse_property_sorter: required("{propertySorter: {name: x, sortOrder: Ascending}}") => format!("{REQ}[0].propertySorter"), "not allowed in required";
                ok: required("{propertySelector: {matchExpressions: [{name: x, operator: Gt, values: ['1']}]}}");
            cluster_label_selector_values_are_label_values: required("{labelSelector: {matchExpressions: [{key: env, operator: In, values: ['-x']}]}}") => format!("{REQ}[0].labelSelector.matchExpressions[0].values[0]"), "";
                ok: required("{labelSelector: {matchExpressions: [{key: env, operator: In, values: [x]}]}}");
            cluster_label_selector_keys_are_qualified_names: required("{labelSelector: {matchExpressions: [{key: 'a/b/c', operator: Exists}]}}") => format!("{REQ}[0].labelSelector.matchExpressions[0].key"), "";
                ok: required("{labelSelector: {matchExpressions: [{key: 'example.com/b', operator: Exists}]}}");
            preferred_weight_at_least_minus_100: preferred(-101, "{}") => format!("{PREF}.weight"), "between -100 and 100";
                ok: preferred(-100, "{}");
            preferred_weight_at_most_100: preferred(101, "{}") => format!("{PREF}.weight"), "between -100 and 100";
                ok: preferred(100, "{}");
            preferred_terms_refuse_property_selector: preferred(1, "{propertySelector: {matchExpressions: []}}") => format!("{PREF}.preference.propertySelector"), "not allowed in preferred";
                ok: preferred(1, "{propertySorter: {name: x, sortOrder: Descending}}");
            property_sorter_name_is_a_property_name: preferred(1, "{propertySorter: {name: 'bad name', sortOrder: Ascending}}") => format!("{PREF}.preference.propertySorter.name"), "invalid property name";
                ok: preferred(1, "{propertySorter: {name: resources.kubernetes-fleet.io/available-cpu, sortOrder: Ascending}}");
            property_sorter_sort_order_is_an_enum: preferred(1, "{propertySorter: {name: x, sortOrder: Up}}") => format!("{PREF}.preference.propertySorter.sortOrder"), "unknown variant";
                ok: preferred(1, "{propertySorter: {name: x, sortOrder: Ascending}}");
            property_selector_name_is_a_property_name: property("{name: resources.kubernetes-fleet.io/used-cpu, operator: Gt, values: ['1']}") => format!("{EXPR}.name"), "invalid resource property";
                ok: property("{name: resources.kubernetes-fleet.io/total-cpu, operator: Gt, values: ['1']}");
            property_selector_name_required: property("{name: '', operator: Gt, values: ['1']}") => format!("{EXPR}.name"), "Required value";
                ok: property("{name: x, operator: Gt, values: ['1']}");
            property_selector_exactly_one_value: property("{name: cpu, operator: Gt, values: ['1', '2']}") => format!("{EXPR}.values"), "exactly one value";
                ok: property("{name: cpu, operator: Gt, values: ['1']}");
            property_selector_value_is_a_quantity: property("{name: cpu, operator: Gt, values: [lots]}") => format!("{EXPR}.values[0]"), "not a valid quantity";
                ok: property("{name: cpu, operator: Gt, values: [1500m]}");
            property_selector_operator_is_an_enum: property("{name: cpu, operator: In, values: ['1']}") => format!("{EXPR}.operator"), "unknown variant";
                ok: property("{name: cpu, operator: Ne, values: ['1']}");
            property_requirements_are_consistent: property("{name: cpu, operator: Gt, values: ['4']}, {name: cpu, operator: Lt, values: ['2']}") => format!("{REQ}[0].propertySelector.matchExpressions"), "exclude all values";
                ok: property("{name: cpu, operator: Ge, values: ['2']}, {name: cpu, operator: Le, values: ['2']}");
            // Tolerations (CRD and webhook).
            tolerations_at_most_100: policy(&format!("{{tolerations: [{}]}}", list(101, |i| format!("{{key: k{i}, operator: Exists}}")))) => "spec.policy.tolerations", "at most 100 items";
                ok: policy(&format!("{{tolerations: [{}]}}", list(100, |i| format!("{{key: k{i}, operator: Exists}}"))));
            toleration_exists_refuses_a_value: policy("{tolerations: [{key: a, operator: Exists, value: b}]}") => "spec.policy.tolerations[0].value", "needs to be empty";
                ok: policy("{tolerations: [{operator: Exists}]}");
            toleration_equal_requires_a_key: policy("{tolerations: [{value: b}]}") => "spec.policy.tolerations[0].key", "cannot be empty";
                ok: policy("{tolerations: [{key: a}]}");
            toleration_value_is_a_label_value: policy("{tolerations: [{key: a, value: 'b c'}]}") => "spec.policy.tolerations[0].value", "not a valid label value";
                ok: policy(&format!("{{tolerations: [{{key: a, value: {}}}]}}", "v".repeat(63)));
            toleration_key_is_a_qualified_name: policy("{tolerations: [{key: 'a/b/c', operator: Exists}]}") => "spec.policy.tolerations[0].key", "not a valid qualified name";
                ok: policy("{tolerations: [{key: example.com/a, operator: Exists}]}");
            tolerations_unique: policy("{tolerations: [{key: a, value: b}, {key: a, value: b}]}") => "spec.policy.tolerations[1]", "must be unique";
                ok: policy("{tolerations: [{key: a, value: b}, {key: a, value: c}]}");
            tolerations_unique_after_defaulting: policy("{tolerations: [{key: a, value: b}, {key: a, operator: Equal, value: b}]}") => "spec.policy.tolerations[1]", "must be unique";
                ok: policy("{tolerations: [{key: a, operator: Exists}, {key: a, operator: Equal}]}");
            toleration_operator_is_an_enum: policy("{tolerations: [{key: a, operator: Has}]}") => "spec.policy.tolerations[0].operator", "unknown variant";
                ok: policy("{tolerations: [{key: a, operator: Exists}]}");
            // Strategy.
            v1_has_no_delete_strategy: strategy("{deleteStrategy: {propagationPolicy: Abandon}}").replace("/v1beta1", "/v1") => "spec.strategy.deleteStrategy", "v1beta1 only";
                ok: strategy("{deleteStrategy: {propagationPolicy: Abandon}}");
            v1_has_no_report_back_strategy: strategy("{reportBackStrategy: {type: Disabled}}").replace("/v1beta1", "/v1") => "spec.strategy.reportBackStrategy", "v1beta1 only";
                ok: strategy("{reportBackStrategy: {type: Disabled}}");
            report_back_mirror_requires_destination: strategy("{reportBackStrategy: {type: Mirror}}") => "spec.strategy.reportBackStrategy", "a destination must be specified";
                ok: strategy("{reportBackStrategy: {type: Mirror, destination: OriginalResource}}");
            report_back_type_is_an_enum: strategy("{reportBackStrategy: {type: Always}}") => "spec.strategy.reportBackStrategy.type", "unknown variant";
                ok: strategy("{reportBackStrategy: {}}");
            rollout_type_is_an_enum: strategy("{type: BlueGreen}") => "spec.strategy.type", "unknown variant";
                ok: strategy("{type: External}");
            rolling_update_not_with_external: strategy("{type: External, rollingUpdate: {maxSurge: 1}}") => "spec.strategy.rollingUpdate", "not valid for External";
                ok: strategy("{type: RollingUpdate, rollingUpdate: {maxSurge: 1}}");
            max_unavailable_matches_the_pattern: strategy("{rollingUpdate: {maxUnavailable: '101%'}}") => "spec.strategy.rollingUpdate.maxUnavailable", "must match";
                ok: strategy("{rollingUpdate: {maxUnavailable: '100%'}}");
            max_surge_matches_the_pattern: strategy("{rollingUpdate: {maxSurge: '-1'}}") => "spec.strategy.rollingUpdate.maxSurge", "must match";
                ok: strategy("{rollingUpdate: {maxSurge: 0}}");
            unavailable_period_seconds_not_negative: strategy("{rollingUpdate: {unavailablePeriodSeconds: -1}}") => "spec.strategy.rollingUpdate.unavailablePeriodSeconds", "at least 0";
                ok: strategy("{rollingUpdate: {unavailablePeriodSeconds: 0}}");
            apply_type_is_an_enum: strategy("{applyStrategy: {type: Replace}}") => "spec.strategy.applyStrategy.type", "unknown variant";
                ok: strategy("{applyStrategy: {type: ReportDiff}}");
            when_to_take_over_is_an_enum: strategy("{applyStrategy: {whenToTakeOver: Sometimes}}") => "spec.strategy.applyStrategy.whenToTakeOver", "unknown variant";
                ok: strategy("{applyStrategy: {whenToTakeOver: IfNoDiff}}");
            // Status: the subresource drops it unvalidated, strict decoding refuses unknown fields.
            status_unknown_field_refused: format!("{}status: {{bogus: 1}}\n", crp(SEL)) => "status.bogus", "unknown field `bogus`";
                ok: format!("{}status: {{observedResourceIndex: 3, conditions: not-a-list}}\n", crp(SEL));
            status_condition_unknown_field_refused: format!("{}status: {{conditions: [{{type: Scheduled, status: 'True', severity: high}}]}}\n", crp(SEL)) => "status.conditions[0].severity", "unknown field `severity`";
                ok: format!("{}status: {{conditions: [{{type: Scheduled, status: 3, reason: r, message: m, lastTransitionTime: x, observedGeneration: 1}}]}}\n", crp(SEL));
        }
        /// The CRD's CEL rule on the scope is on ClusterResourcePlacement only, and KubeFleet
        /// ignores the scope on a ResourcePlacement: a hub admits it, so gitfleet does.
        /// KubeFleet honors `serverSideApplyConfig` only under ServerSideApply and no webhook
        /// refuses it under another type: a hub admits it, so gitfleet does.
        #[test]
        fn server_side_apply_config_under_another_type_is_admitted() {
            let yaml = strategy(
                "{applyStrategy: {type: ClientSideApply, serverSideApplyConfig: {force: true}}}",
            );
            assert_eq!(
                crate::model::testing::findings::<super::Placement>(&yaml),
                vec![]
            );
        }
        #[test]
        fn namespace_accessible_on_a_resource_placement_is_admitted() {
            let yaml = rp(CM).replace(
                "spec:\n",
                "spec:\n  statusReportingScope: NamespaceAccessible\n",
            );
            assert_eq!(
                crate::model::testing::findings::<super::Placement>(&yaml),
                vec![]
            );
        }
    }
}
