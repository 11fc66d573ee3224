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

/// What `gitfleet status -o json|yaml` prints: the placements document with the runs and
/// their approval requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDocument {
    #[serde(flatten)]
    pub placements: Placements,
    pub update_runs: Vec<UpdateRun>,
    pub approval_requests: Vec<ApprovalRequest>,
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
}

/// One placement as the status API shows it (`GET /api/v1/placements`, [`Placements`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    pub id: String,
    pub strategy: crate::rollout::Strategy,
    pub target: usize,
    pub selected: Vec<String>,
    pub applying: Vec<String>,
    pub removing: Vec<String>,
    pub waiting: Vec<String>,
    pub up_to_date: Vec<String>,
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
