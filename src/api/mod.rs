//! The status API's wire types: the JSON documents the daemon's server writes
//! ([`crate::daemon::server`]) and its clients read (`gitfleet status`, `wait`, `approve
//! --server`, `plan --server`, through [`client`]). One type per document; the inventory
//! (`GET /api/v1/inventory`) is [`crate::schedule::Inventory`] itself, `GET /api/v1/approvals`
//! is [`ApprovalsView`].

pub mod client;
pub mod shared_status;

use serde::{Deserialize, Serialize};

use crate::rollout::approval::{Approval, Rejection, Request};
use crate::rollout::staged::status::RunStatus;
use crate::rollout::Rejected;
use crate::schedule::PlacementSchedule;

/// `GET /api/v1/placements`: the branch followed and every placement's rollout. The server
/// writes it from borrowed statuses (`Placements<&PlacementStatus>`), clients read it owned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placements<P = PlacementStatus> {
    pub branch: String,
    /// The newest head seen (`null` before the first look).
    #[serde(default)]
    pub head: Option<String>,
    /// The commit being rolled out (the last valid one).
    #[serde(default)]
    pub serving: Option<String>,
    /// Why no commit is served, while none may be (`serving` is then `null`).
    #[serde(
        default,
        rename = "notServing",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_serving: Option<String>,
    /// Under `--verify-commits`, the commit served and who signed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<crate::rollout::serve::Verified>,
    /// The newest head, when it was refused, with why.
    #[serde(default)]
    pub rejected: Option<Rejected>,
    /// The served commit's likely mistakes (a selector that selects nothing, an override of a
    /// missing placement, ...): accepted, as the hub accepts them, and shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The newest head, when the deletion guard holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<crate::rollout::guard::Held>,
    /// The git source and its last fetches (absent from daemons older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    pub placements: Vec<P>,
    /// How many placements the query matched, when it limited how many are listed
    /// (`?limit=N`): a poller asking whether anything is unready reads a count, not the fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<usize>,
    /// `--state kubernetes`: which replica leads, as the one answering knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderStatus>,
}

/// Where commits come from and how the last fetches went: a failing remote shows here (and in
/// `/readyz`, the metrics, `gitfleet status`) while the last fetched head keeps being served.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// The remote URL (a password in it masked) or the local repository's path.
    pub url: String,
    pub branch: String,
    /// `remote` (fetched into a mirror) or `local` (read in place).
    pub kind: String,
    /// The branch's head as last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// When a fetch (or, for a local repository, a read of the branch) last succeeded, Unix
    /// seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<u64>,
    /// The last failure's message and when it happened, kept after a later success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_at: Option<u64>,
    /// Failures since the last success (0: the source is fine).
    #[serde(default)]
    pub consecutive_failures: u32,
}

/// Serialises shared values as the values themselves (serde's own `Arc` support is behind its
/// `rc` feature, which would rebuild every dependency that uses serde).
pub fn shared_list<T: Serialize, S: serde::Serializer>(
    list: &[std::sync::Arc<T>],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|v| &**v))
}

impl Placements {
    /// One placement by its id (`crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`).
    pub fn placement(&self, id: &str) -> Option<&PlacementStatus> {
        self.placements.iter().find(|p| p.id == id)
    }
}

/// `GET /api/v1/schedule`: the last schedule, in the state directory's `schedule.json` format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub version: u32,
    /// The commit the schedule is of.
    #[serde(default)]
    pub commit: Option<String>,
    pub placements: Vec<std::sync::Arc<PlacementSchedule>>,
}

/// `GET /api/v1/updateruns`: every staged update run ([`super::runs`] builds them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateRuns {
    pub update_runs: Vec<UpdateRun>,
}

/// `GET /api/v1/approvalrequests`: every approval request the runs reached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequests {
    pub approval_requests: Vec<ApprovalRequest>,
}

/// `GET /api/v1/evictions`: the `ClusterResourcePlacementEviction`s of the commit served, as
/// they were judged ([`crate::rollout::eviction`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evictions {
    pub evictions: Vec<Eviction>,
}

/// One eviction: the `kubectl get clusterresourceplacementeviction` columns and its conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Eviction {
    pub name: String,
    pub placement_name: String,
    pub cluster_name: String,
    /// The `Valid` condition's status (`True`, `False`).
    pub valid: String,
    /// The `Executed` condition's status, empty for an invalid eviction.
    pub executed: String,
    pub conditions: Vec<crate::schedule::Condition>,
}

impl Evictions {
    /// The evictions of a rollout state, by name.
    pub fn of(state: &crate::rollout::RolloutState) -> Evictions {
        use crate::rollout::eviction::{EXECUTED, VALID};
        let status = |r: &crate::rollout::eviction::EvictionRecord, t: &str| {
            r.conditions
                .iter()
                .find(|c| c.type_ == t)
                .map_or(String::new(), |c| c.status.clone())
        };
        Evictions {
            evictions: state
                .evictions
                .iter()
                .map(|(name, r)| Eviction {
                    name: name.clone(),
                    placement_name: r.placement_name.clone(),
                    cluster_name: r.cluster_name.clone(),
                    valid: status(r, VALID),
                    executed: status(r, EXECUTED),
                    conditions: r.conditions.clone(),
                })
                .collect(),
        }
    }
}

/// What `gitfleet status -o json|yaml` prints: the placements document with the runs and
/// their approval requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDocument {
    #[serde(flatten)]
    pub placements: Placements,
    pub update_runs: Vec<UpdateRun>,
    pub approval_requests: Vec<ApprovalRequest>,
    /// Approval tags the daemon refused, with why (`/api/v1/approvals`' `rejections`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_approvals: Vec<Rejection>,
    /// The evictions of the commit served (`/api/v1/evictions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<Eviction>,
}

/// One staged update run: the `kubectl get clusterstagedupdaterun` columns, where it stands, and its whole status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateRun {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub placement: String,
    pub resource_snapshot_index: Option<u64>,
    pub policy_snapshot_index: Option<u64>,
    pub initialized: String,
    pub progressing: String,
    pub succeeded: String,
    pub created_at: u64,
    pub state: String,
    /// The stage being updated (`kubernetes-fleet.io/deleteStage` at the end), if any.
    pub stage: Option<String>,
    /// Clusters done / in the stage.
    pub clusters: String,
    /// What the run waits for, in a few words (`-` when nothing).
    pub waiting_for: String,
    /// While the current stage soaks (TimedWait): when the wait ends, unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ends: Option<u64>,
    /// The commit at which the run was initialised (approving tags point at it).
    pub init_commit: String,
    pub status: RunStatus,
}

/// One approval request a run has reached, like a `ClusterApprovalRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub update_run: String,
    pub stage: String,
    /// `beforeStage` or `afterStage`.
    pub task_type: String,
    pub approved: String,
    pub approval_accepted: String,
    pub created_at: u64,
    /// The tag that approves it, and the commit it must point at.
    pub tag: String,
    pub commit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<i64>,
}

/// What the daemon serves at `/api/v1/approvals`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalsView {
    /// The requests runs wait on or will reach, with the commit a tag must point at.
    pub requests: Vec<Request>,
    /// Approvals accepted by the last evaluation.
    pub approvals: Vec<Approval>,
    /// Tags refused by the last evaluation, with the reason.
    pub rejections: Vec<Rejection>,
}

/// Which replica leads, as the one answering knows it (`/api/v1/placements`, `gitfleet status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderStatus {
    /// This replica's `--identity`.
    pub identity: String,
    /// The leader's identity; `None` while the Lease is unread, free or expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// Whether this replica leads (and acts).
    pub leading: bool,
    /// `--shards`: the member shards this replica holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsStatus>,
}

/// The member shards one replica holds, as it knows them (`--shards`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardsStatus {
    /// How many shards the members are divided into.
    pub count: u32,
    /// The shards this replica holds and acts for.
    pub held: Vec<u32>,
    /// The live replicas as this one sees them, itself included.
    pub live: Vec<String>,
}

/// One placement as the status API shows it (`GET /api/v1/placements`, [`Placements`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    pub id: String,
    pub strategy: crate::rollout::Strategy,
    pub target: usize,
    /// A KubeFleet placement's scheduling policy as its spec declares it (`spec.policy`,
    /// `PickAll` when the spec has none): placement type, cluster names or number of
    /// clusters, affinity, topology spread constraints, tolerations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::model::placement::PlacementPolicy>,
    /// An OCM Placement's spec as declared: cluster sets, number of clusters, predicates,
    /// prioritizers, tolerations, decision strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocm_policy: Option<crate::model::ocm::OcmPlacementSpec>,
    /// The selected clusters, as the schedule names them (one shared table of names), read
    /// through the schedule ([`shared_status::SelectedClusters`]).
    pub selected: shared_status::SelectedClusters,
    /// The step's lists, shared with it ([`shared_status::StepClusters`]).
    pub applying: shared_status::StepClusters,
    pub removing: shared_status::StepClusters,
    pub waiting: shared_status::StepClusters,
    pub up_to_date: shared_status::StepClusters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Clusters the commit cannot render this placement's manifests for, with the reason.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub render_errors: std::collections::BTreeMap<String, String>,
    /// Per cluster: revision, health and last error, as stored (shared with the rollout
    /// state: [`shared_status`]).
    pub clusters: shared_status::Clusters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_resource_index: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selected_resources: Vec<String>,
    /// Placement-level conditions (KubeFleet's `ClusterResourcePlacement…` /
    /// `ResourcePlacement…` types; OCM's for OCM placements).
    pub conditions: Vec<crate::schedule::Condition>,
    /// Per selected cluster, KubeFleet's per-cluster conditions (worked out when serialised:
    /// [`shared_status`]).
    #[serde(default, skip_serializing_if = "shared_status::PerCluster::is_empty")]
    pub per_cluster: shared_status::PerCluster,
    /// An OCM Placement that ManifestWorkReplicaSets name: their rollout's counts, as OCM's
    /// `placementsSummary` entry for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_sets: Option<crate::rollout::progressive::PlacementSummary>,
    /// Clusters whose last push failed, with the error (KubeFleet's failedPlacements).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub failed: std::collections::BTreeMap<String, String>,
    /// [`PlacementStatus::is_ready`], worked out at its first call.
    #[serde(skip)]
    pub ready: ReadyOnce,
}

impl PlacementStatus {
    /// Nothing is being applied, removed or waited for, and every cluster is available (or,
    /// under ReportDiff, has its diff reported) with no re-check due: what
    /// `GET /api/v1/placements?unready` leaves out.
    pub fn is_ready(&self) -> bool {
        *self.ready.0.get_or_init(|| {
            self.applying.is_empty()
                && self.removing.is_empty()
                && self.waiting.is_empty()
                && self
                    .clusters
                    .values()
                    .all(|c| c.recheck.is_none() && c.health.is_ready())
        })
    }
}

/// Whether a published status is ready, kept once known: a status does not change once
/// published, and a client polling `?unready` would otherwise have every cluster of every
/// placement looked at each time it polls.
/// Not part of the status's value: every two are equal.
#[derive(Debug, Clone, Default)]
pub struct ReadyOnce(std::sync::OnceLock<bool>);

impl PartialEq for ReadyOnce {
    fn eq(&self, _: &ReadyOnce) -> bool {
        true
    }
}

/// `GET /api/v1/summary`: the fleet in a few numbers, what `gitfleet status` and `wait` poll and
/// the dashboard's header shows. Its size does not grow with the fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub branch: String,
    #[serde(default)]
    pub head: Option<String>,
    #[serde(default)]
    pub serving: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_serving: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<crate::rollout::serve::Verified>,
    #[serde(default)]
    pub rejected: Option<Rejected>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<crate::rollout::guard::Held>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderStatus>,
    /// Members in the live inventory (0 before the first probe).
    pub members: usize,
    pub placements: PlacementCounts,
    /// Cluster placements (one per placement and selected cluster) by state.
    pub clusters: ClusterCounts,
    pub update_runs: RunCounts,
}

/// How many placements are in each of the states `?state=` filters on; a placement with a
/// failure and a run counts in both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementCounts {
    pub total: usize,
    pub ready: usize,
    pub unready: usize,
    pub failed: usize,
    pub staged: usize,
}

/// Cluster placements by what is happening to them. `applying`, `removing`, `waiting`,
/// `upToDate` are the placement's lists; `available`, `pending`, `failed`, `diffReported` the
/// clusters' health (an untrackable object's availability counts as available).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCounts {
    pub selected: usize,
    pub applying: usize,
    pub removing: usize,
    pub waiting: usize,
    pub up_to_date: usize,
    pub available: usize,
    pub pending: usize,
    pub failed: usize,
    pub diff_reported: usize,
}

/// Staged update runs: how many, how many in progress, and the approval requests still
/// waiting for their tag.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCounts {
    pub total: usize,
    pub in_progress: usize,
    pub pending_approvals: usize,
}

/// The states `GET /api/v1/placements?state=` filters on (a comma-separated list matches a
/// placement in any of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementState {
    /// [`PlacementStatus::is_ready`].
    Ready,
    Unready,
    /// A cluster failed or has a last error, the commit cannot render for a cluster, or the
    /// placement is held for invalid resource selectors.
    Failed,
    /// A staged update run names it.
    Staged,
}

impl std::str::FromStr for PlacementState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ready" => Ok(PlacementState::Ready),
            "unready" => Ok(PlacementState::Unready),
            "failed" => Ok(PlacementState::Failed),
            "staged" => Ok(PlacementState::Staged),
            other => Err(format!(
                "state={other}: the states are ready, unready, failed and staged"
            )),
        }
    }
}

impl PlacementStatus {
    /// Something failed: a cluster's health or last push, its manifests' rendering, or the
    /// placement's resource selectors (held, `Scheduled=False`).
    pub fn has_failure(&self) -> bool {
        !self.failed.is_empty()
            || !self.render_errors.is_empty()
            || self.clusters.values().any(|c| {
                c.details.last_error.is_some() || c.health == crate::rollout::BindingHealth::Failed
            })
            || self.is_held()
    }

    /// Whether it is in `state` (`staged`: whether `staged` holds its id, the caller knowing
    /// the runs).
    pub fn is_in(&self, state: PlacementState, staged: &std::collections::BTreeSet<&str>) -> bool {
        match state {
            PlacementState::Ready => self.is_ready(),
            PlacementState::Unready => !self.is_ready(),
            PlacementState::Failed => self.has_failure(),
            PlacementState::Staged => staged.contains(self.id.as_str()),
        }
    }
}

/// `GET /api/v1/members`: the members as the scheduler sees them (the repository's
/// `MemberCluster`/`ManagedCluster` joined with the live inventory), paged like the placements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Members {
    pub members: Vec<Member>,
    /// How many members the query matched (all of them without a filter).
    pub matched: usize,
}

/// One member: health, labels, taints and properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub name: String,
    pub healthy: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_reason: Option<String>,
    /// The labels KubeFleet sees (the `MemberCluster`'s).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The labels OCM sees (the `ManagedCluster`'s), when it is one.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub ocm_labels: std::collections::BTreeMap<String, String>,
    /// `key=value:Effect`, KubeFleet's and OCM's taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<String>,
    /// Properties as written (quantities): the live inventory's and the declared ones.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub properties: std::collections::BTreeMap<String, String>,
}

impl Member {
    pub fn of(c: &crate::schedule::Cluster) -> Member {
        let taint = |k: &str, v: &str, e: String| match v {
            "" => format!("{k}:{e}"),
            v => format!("{k}={v}:{e}"),
        };
        Member {
            name: c.name.to_string(),
            healthy: c.healthy,
            health_reason: c.health_reason.clone(),
            labels: c.labels.clone(),
            ocm_labels: if c.ocm_member {
                c.ocm_labels.clone()
            } else {
                Default::default()
            },
            taints: c
                .taints
                .iter()
                .map(|t| taint(&t.key, &t.value, format!("{:?}", t.effect)))
                .chain(
                    c.ocm_taints
                        .iter()
                        .map(|t| taint(&t.key, &t.value, format!("{:?}", t.effect))),
                )
                .collect(),
            properties: c.properties.clone(),
        }
    }

    /// Whether `selector` (`key`, `key=value`, `key!=value`, comma-separated: all must hold)
    /// matches its labels.
    pub fn has_labels(&self, selector: &str) -> bool {
        selector
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .all(|term| {
                if let Some((k, v)) = term.split_once("!=") {
                    self.labels.get(k.trim()).is_none_or(|l| l != v.trim())
                } else if let Some((k, v)) = term.split_once('=') {
                    let v = v.trim_start_matches('=');
                    self.labels.get(k.trim()).is_some_and(|l| l == v.trim())
                } else {
                    self.labels.contains_key(term)
                }
            })
    }
}

/// What is happening to a placement on one cluster, as the dashboard's matrix colours it; a
/// cluster in more than one is shown in the first that holds, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterPlacementState {
    /// Its last push failed, its manifests cannot be rendered, or an object is unavailable.
    Failed,
    /// The member changed what was placed there (re-applied at the next step), or, under
    /// ReportDiff, it differs from what the placement declares.
    Drifted,
    /// Being applied or removed.
    Applying,
    /// Held back: waiting for the rollout's budget, a stage, a wait or an approval; or the
    /// placement is held for invalid resource selectors.
    Held,
    /// Every object is available.
    Available,
    /// Selected, not applied yet (or applied, not yet available).
    Scheduled,
}

impl ClusterPlacementState {
    pub const ALL: [ClusterPlacementState; 6] = [
        ClusterPlacementState::Scheduled,
        ClusterPlacementState::Applying,
        ClusterPlacementState::Available,
        ClusterPlacementState::Failed,
        ClusterPlacementState::Drifted,
        ClusterPlacementState::Held,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClusterPlacementState::Failed => "failed",
            ClusterPlacementState::Drifted => "drifted",
            ClusterPlacementState::Applying => "applying",
            ClusterPlacementState::Held => "held",
            ClusterPlacementState::Available => "available",
            ClusterPlacementState::Scheduled => "scheduled",
        }
    }

    pub fn parse(s: &str) -> Option<ClusterPlacementState> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl PlacementStatus {
    /// Held for invalid resource selectors: it keeps what it placed as it is.
    pub fn is_held(&self) -> bool {
        self.conditions.iter().any(|c| {
            c.type_.ends_with(crate::schedule::kubefleet::SCHEDULED)
                && c.reason == crate::snapshot::INVALID_RESOURCE_SELECTORS
        })
    }

    /// Where this placement stands on `cluster`; `None` when it neither selects the cluster
    /// nor has anything there.
    pub fn cluster_state(&self, cluster: &str) -> Option<ClusterPlacementState> {
        use crate::rollout::BindingHealth;
        let has = |list: &[String]| list.iter().any(|c| c == cluster);
        let stored = self.clusters.get(cluster);
        let selected = self.selected.iter().any(|c| &**c == cluster);
        if !selected && stored.is_none() && !has(&self.removing) {
            return None;
        }
        let state = if self.failed.contains_key(cluster)
            || self.render_errors.contains_key(cluster)
            || stored.is_some_and(|c| {
                c.details.last_error.is_some() || c.health == BindingHealth::Failed
            }) {
            ClusterPlacementState::Failed
        } else if stored.is_some_and(|c| {
            c.recheck.is_some()
                || c.health == BindingHealth::DiffReported && !c.details.diffs.is_empty()
        }) {
            ClusterPlacementState::Drifted
        } else if has(&self.applying) || has(&self.removing) {
            ClusterPlacementState::Applying
        } else if has(&self.waiting) || self.is_held() {
            ClusterPlacementState::Held
        } else if stored.is_some_and(|c| c.revision.is_some() && c.health.is_ready()) {
            ClusterPlacementState::Available
        } else {
            ClusterPlacementState::Scheduled
        };
        Some(state)
    }
}
