//! What one placement's change means, for the plan's summary: the consequences a reviewer must
//! not miss (Namespaces and workloads deleted, a placement that cannot be fulfilled and stalls,
//! a run that rolls back or cannot start, clusters lost and gained) and how risky they are, so
//! that the riskiest come first. Decided here, in the core; the formats only word it.

use super::{Change, ClusterPlan, ObjectDiff, PlacementPlan, RunNoteKind};
use crate::model::PlacementKey;
use crate::rollout::strategy::Strategy;
use serde::Serialize;
use std::collections::BTreeMap;

/// How much a placement's change can hurt: deletions of Namespaces or workloads and rollbacks
/// are `High`; a placement that stalls, a run that cannot start or a lost cluster `Medium`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    #[default]
    Low,
    Medium,
    High,
}

/// One consequence of a placement's change.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Consequence {
    /// Namespaces (and all they hold) deleted from these clusters.
    #[serde(rename_all = "camelCase")]
    NamespacesDeleted {
        namespaces: Vec<String>,
        clusters: Vec<String>,
    },
    /// Workloads (Deployments, StatefulSets, DaemonSets, Jobs, CronJobs) deleted.
    #[serde(rename_all = "camelCase")]
    WorkloadsDeleted {
        objects: Vec<String>,
        clusters: Vec<String>,
    },
    /// A staged update run moves clusters back to an older resource snapshot.
    RollsBack {
        run: String,
        to: u64,
    },
    /// The head's scheduling condition is not True: the placement cannot be fulfilled (too
    /// few eligible clusters for numberOfClusters, ...) and its rollout stalls.
    Stalls {
        condition: String,
        reason: String,
        message: String,
    },
    /// A staged update run cannot start: what it should deliver waits.
    RunBlocked {
        run: String,
        message: String,
    },
    /// Strategy External and no staged update run renders the commit: its clusters' new
    /// manifests wait for a run that names the placement.
    AwaitsRun {
        clusters: usize,
    },
    ClustersLost {
        clusters: Vec<String>,
    },
    ClustersGained {
        clusters: Vec<String>,
    },
    /// Clusters that stay selected and get new manifests.
    Updates {
        clusters: usize,
    },
}

impl Consequence {
    pub fn risk(&self) -> Risk {
        match self {
            Self::NamespacesDeleted { .. }
            | Self::WorkloadsDeleted { .. }
            | Self::RollsBack { .. } => Risk::High,
            Self::Stalls { .. }
            | Self::RunBlocked { .. }
            | Self::AwaitsRun { .. }
            | Self::ClustersLost { .. } => Risk::Medium,
            Self::ClustersGained { .. } | Self::Updates { .. } => Risk::Low,
        }
    }

    /// Deleting a Namespace or a workload: called out above everything else.
    pub fn is_deletion(&self) -> bool {
        matches!(
            self,
            Self::NamespacesDeleted { .. } | Self::WorkloadsDeleted { .. }
        )
    }
}

/// A placement's consequences, riskiest first, and the highest risk among them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Story {
    pub risk: Risk,
    pub consequences: Vec<Consequence>,
}

impl Story {
    pub fn is_empty(&self) -> bool {
        self.consequences.is_empty()
    }
}

const WORKLOADS: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
];

/// The objects each placement removes, with the cluster each goes from: one pass over every
/// cluster's diffs (all clusters, before `--cluster` narrows what is printed) for the stories
/// of all placements.
pub fn removed_by_placement(
    clusters: &[ClusterPlan],
) -> BTreeMap<&PlacementKey, Vec<(&str, &ObjectDiff)>> {
    let mut removed: BTreeMap<&PlacementKey, Vec<(&str, &ObjectDiff)>> = BTreeMap::new();
    for c in clusters {
        for o in c.objects.iter().filter(|o| o.change == Change::Removed) {
            removed
                .entry(&o.placement)
                .or_default()
                .push((c.cluster.as_str(), o));
        }
    }
    removed
}

/// The story of `p`, from its own plan and the objects it removes ([`removed_by_placement`]).
pub fn of(p: &PlacementPlan, removed: &[(&str, &ObjectDiff)]) -> Story {
    let mut out = Vec::new();
    // Objects removed, by object, with the clusters they go from.
    let mut namespaces: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut workloads: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (cluster, o) in removed {
        let k = &o.key;
        if k.group().is_empty() && k.kind() == "Namespace" {
            namespaces
                .entry(k.name().to_string())
                .or_default()
                .push(cluster.to_string());
        } else if WORKLOADS.contains(&(k.group(), k.kind())) {
            workloads
                .entry(o.object.clone())
                .or_default()
                .push(cluster.to_string());
        }
    }
    if !namespaces.is_empty() {
        out.push(Consequence::NamespacesDeleted {
            clusters: union(namespaces.values()),
            namespaces: namespaces.into_keys().collect(),
        });
    }
    if !workloads.is_empty() {
        out.push(Consequence::WorkloadsDeleted {
            clusters: union(workloads.values()),
            objects: workloads.into_keys().collect(),
        });
    }
    let notes = p.rollout.iter().flat_map(|r| &r.run_notes);
    for n in notes.clone() {
        if let RunNoteKind::RollsBack { to, .. } = &n.kind {
            out.push(Consequence::RollsBack {
                run: n.run.clone(),
                to: *to,
            });
        }
    }
    if let Some(c) = p.condition.as_ref().filter(|c| c.status != "True") {
        if p.change != Change::Removed {
            out.push(Consequence::Stalls {
                condition: format!("{}={}", c.type_, c.status),
                reason: c.reason.clone(),
                message: c.message.clone(),
            });
        }
    }
    for n in notes {
        if matches!(n.kind, RunNoteKind::InitializationFailed) {
            out.push(Consequence::RunBlocked {
                run: n.run.clone(),
                message: n.message.clone(),
            });
        }
    }
    if !p.lost.is_empty() {
        out.push(Consequence::ClustersLost {
            clusters: p.lost.iter().map(|m| m.cluster.clone()).collect(),
        });
    }
    if !p.gained.is_empty() {
        out.push(Consequence::ClustersGained {
            clusters: p.gained.iter().map(|m| m.cluster.clone()).collect(),
        });
    }
    if let Some(r) = p.rollout.as_ref().filter(|r| !r.updating.is_empty()) {
        let clusters = r.updating.len();
        let delivered = r.strategy != Strategy::External || r.stages.iter().any(|s| s.delivers);
        out.push(if delivered {
            Consequence::Updates { clusters }
        } else {
            Consequence::AwaitsRun { clusters }
        });
    }
    Story {
        risk: out.iter().map(Consequence::risk).max().unwrap_or_default(),
        consequences: out,
    }
}

fn union<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    let mut all: Vec<String> = lists.flatten().cloned().collect();
    all.sort();
    all.dedup();
    all
}
