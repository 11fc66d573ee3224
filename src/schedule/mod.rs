//! The scheduler: which member clusters each placement targets, with scores and reasons.
//! KubeFleet placements follow kubefleet.md §2 (`kubefleet`), OCM placements ocm.md (`ocm`).
//! Pure: the fleet view, the previous bindings and the clock are parameters.

pub mod fleet;
pub mod kubefleet;
pub mod labels;
pub mod ocm;

pub use fleet::{Cluster, Fleet, Inventory, InventoryCluster};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which placement a result is about: `ClusterResourcePlacement`, `ResourcePlacement` or OCM
/// `Placement`, with namespace for the namespaced ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PlacementKey {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl PlacementKey {
    /// `crp/<name>`, `rp/<ns>/<name>`, `ocm/<ns>/<name>`: stable keys for the state store.
    pub fn id(&self) -> String {
        let prefix = match self.kind.as_str() {
            "ClusterResourcePlacement" => "crp",
            "ResourcePlacement" => "rp",
            _ => "ocm",
        };
        match &self.namespace {
            Some(ns) => format!("{prefix}/{ns}/{}", self.name),
            None => format!("{prefix}/{}", self.name),
        }
    }
}

/// KubeFleet binding states (kubefleet.md §1.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BindingState {
    Scheduled,
    Bound,
    Unscheduled,
}

/// One placement's binding to one cluster, as kept between scheduling runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    pub cluster: String,
    pub state: BindingState,
    /// The policy snapshot index the binding was made (or last patched) for.
    pub policy_index: u64,
    /// Scores recorded at pick time (PickN), used to choose what to drop on downscale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_score: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_score: Option<i32>,
    /// For an unscheduled binding: the state it had, restored if the cluster is picked again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_state: Option<BindingState>,
}

/// One line of a placement's decisions (spec/README §6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    pub cluster: String,
    pub selected: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_score: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_score: Option<i32>,
    /// OCM placements: the total prioritizer score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn new(type_: &str, ok: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.into(),
            status: if ok { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// OCM decision groups (ocm.md §4): clusters of each group in decision order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroup {
    pub group_name: String,
    pub group_index: usize,
    pub clusters: Vec<String>,
}

/// What the scheduler decided for one placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSchedule {
    #[serde(flatten)]
    pub key: PlacementKey,
    /// KubeFleet placements: the policy snapshot index the decisions are for, and its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_snapshot_index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_hash: Option<String>,
    /// Selected clusters, sorted by name.
    #[serde(default)]
    pub selected: Vec<String>,
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// KubeFleet: the bindings after this run (what the state store keeps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<Binding>,
    /// OCM: the decision groups, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroup>,
}

/// Everything scheduled for one commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub commit: String,
    pub placements: Vec<PlacementSchedule>,
}

/// The previous run's results, by placement id ([`PlacementKey::id`]).
pub type Previous = BTreeMap<String, PlacementSchedule>;

/// Schedules every placement of a commit: KubeFleet placements in catalog order, then OCM
/// placements. `previous` holds the last run's results (bindings, decisions, policy index);
/// `now_unix` is the clock, for OCM's `tolerationSeconds`.
pub fn schedule_commit(
    cat: &crate::catalog::Catalog,
    fleet: &Fleet,
    previous: &Previous,
    now_unix: i64,
) -> Vec<PlacementSchedule> {
    let mut cache = kubefleet::Cache::default();
    let mut out = Vec::new();
    for entry in &cat.placements {
        let placement = &entry.spec;
        let key = PlacementKey {
            kind: placement.kind.clone(),
            namespace: cat.objects[entry.index].namespace.clone(),
            name: placement.metadata.name.clone(),
        };
        let policy = placement.spec.policy_or_default();
        let hash = crate::snapshot::policy_hash(&policy);
        let prev = previous.get(&key.id());
        let index =
            match prev.and_then(|p| Some((p.policy_snapshot_index?, p.policy_hash.as_deref()?))) {
                Some((i, h)) if h == hash => i,
                Some((i, _)) => i + 1,
                None => 0,
            };
        let bindings = prev.map(|p| p.bindings.as_slice()).unwrap_or_default();
        let input = kubefleet::Input {
            key,
            policy: &policy,
            policy_index: index,
            policy_hash: hash,
            fleet,
            bindings,
        };
        out.push(kubefleet::schedule(&input, &mut cache));
    }
    out.extend(ocm::schedule_all(cat, fleet, previous, now_unix));
    out
}
