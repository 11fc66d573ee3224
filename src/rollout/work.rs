//! What a step asks of members and how it ended: per placement and cluster, apply these
//! manifests or remove what the placement put there ([`Work`]); per member under immediate
//! pacing, sweep what it no longer receives ([`Sweep`]); and the [`Outcome`] that push reports.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::rolling::{BindingHealth, Revision};
use super::strategy::ApplyStrategy;
use crate::model::PlacementKey;
use crate::render::Manifest;

/// A placement's manifests for one cluster, shared by every work item (and every cluster) that
/// renders alike: a step over 1,000 placements × 1,000 clusters holds each distinct rendering
/// once, not once per binding.
pub type Manifests = Arc<Vec<Manifest>>;

/// What to do on one member for one placement.
#[derive(Debug, Clone)]
pub enum Action {
    /// Apply the manifests (the placement's full set for the cluster: push prunes what is gone).
    Apply {
        manifests: Manifests,
        revision: Revision,
        /// The binding goes Scheduled → Bound once this succeeds.
        binds: bool,
        /// Only re-applied to read availability again (the cluster already runs it).
        refresh: bool,
        strategy: ApplyStrategy,
        /// The `gitfleet.io/resource-snapshot` stamp: the hash of the placement's selected
        /// resources (of the OCM workloads, for an OCM Placement), whole.
        resource_snapshot: crate::model::SharedText,
        /// The staged update run whose snapshot this is (recorded on the member with it).
        delivered_by: Option<Arc<super::staged::RunDelivery>>,
    },
    /// Remove everything this placement put on the cluster (or, with `abandon`, let go of it).
    Remove { strategy: ApplyStrategy },
}

#[derive(Debug, Clone)]
pub struct Work {
    pub placement: PlacementKey,
    pub cluster: String,
    pub action: Action,
}

impl Work {
    pub(crate) fn apply(
        placement: &PlacementKey,
        cluster: &str,
        (manifests, revision): (Manifests, Revision),
        strategy: ApplyStrategy,
        resource_snapshot: crate::model::SharedText,
        binds: bool,
        refresh: bool,
    ) -> Work {
        Work {
            placement: placement.clone(),
            cluster: cluster.to_string(),
            action: Action::Apply {
                manifests,
                revision,
                binds,
                refresh,
                strategy,
                resource_snapshot,
                delivered_by: None,
            },
        }
    }

    /// The same work, as the delivery of staged update run `run`.
    pub(crate) fn by_run(mut self, run: Arc<super::staged::RunDelivery>) -> Work {
        if let Action::Apply { delivered_by, .. } = &mut self.action {
            *delivered_by = Some(run);
        }
        self
    }

    pub(crate) fn remove(placement: &PlacementKey, cluster: &str, strategy: ApplyStrategy) -> Work {
        Work {
            placement: placement.clone(),
            cluster: cluster.to_string(),
            action: Action::Remove { strategy },
        }
    }
}

/// Immediate pacing: on `cluster`, every placement gitfleet recorded there and does not deliver
/// now is removed (members keep the record of what they were given; the step has no state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    pub cluster: String,
    pub prune: Prune,
}

/// Which recorded placements a sweep removes, besides those delivered now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prune {
    /// Every one except these (placements that cannot be rendered for the cluster: unknown,
    /// not gone).
    AllExcept(BTreeSet<PlacementKey>),
    /// Only these (when the step is limited to some placements).
    Only(BTreeSet<PlacementKey>),
}

/// What push read on the member besides the health, one line each.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Observed {
    /// ReportDiff diffs, fields others changed under FullComparison.
    pub diffs: Vec<String>,
    /// Objects not available yet, and why (`Deployment ns/name: 0/1 replicas available`).
    pub not_available: Vec<String>,
    /// An OCM work's feedback and condition rules, as read from the objects that have them.
    pub work_status: Option<crate::feedback::WorkStatus>,
}

/// How a piece of work ended, as push reports it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    /// Applied (or removed); the health of what is on the cluster now, and the differences
    /// push reported (ReportDiff diffs, fields others changed under FullComparison), one line
    /// each.
    Done(BindingHealth, Observed),
    /// It failed; the message says why. Failed bindings are retried on the next step.
    Failed(String),
}
