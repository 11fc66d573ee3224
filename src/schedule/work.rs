//! Plain OCM `ManifestWork`s: each goes to the cluster its namespace names, as on an OCM hub
//! the work agent of cluster X reads the ManifestWorks of hub namespace X and nothing else
//! (open-cluster-management-io/ocm pkg/work/spoke/spokeagent.go: the agent's informers watch
//! its own cluster namespace). No scoring, no choice: one decision.
//!
//! A ManifestWork whose namespace is no declared cluster is accepted, as the hub accepts it
//! (its webhook pkg/work/webhook/v1/manifestwork_validating.go checks the manifests, not the
//! namespace), and reported: nothing delivers it, and its schedule says so (`Scheduled=False`,
//! reason `ClusterNotFound`); every other placement is scheduled as usual.

use super::{ClusterDecision, Condition, Fleet, PlacementSchedule, Reason};
use crate::catalog::Catalog;
use crate::model::{ClusterName, PlacementKey, PlacementKind};

pub const SCHEDULED: &str = "Scheduled";

/// The schedule of every plain ManifestWork of the commit, in catalog order.
pub fn schedule_all(cat: &Catalog, fleet: &Fleet) -> Vec<PlacementSchedule> {
    cat.manifest_works
        .iter()
        .map(|e| {
            let cluster = cat.objects[e.index].namespace.clone().unwrap_or_default();
            let key = PlacementKey::new(
                PlacementKind::ManifestWork,
                Some(&cluster),
                &e.spec.metadata.name,
            );
            schedule(key, &cluster, fleet.get(&cluster).is_some())
        })
        .collect()
}

fn schedule(key: PlacementKey, cluster: &str, declared: bool) -> PlacementSchedule {
    let (selected, decisions, condition) = if declared {
        let name = ClusterName::new(cluster);
        (
            vec![name.clone()],
            vec![ClusterDecision {
                cluster: name,
                selected: true,
                affinity_score: None,
                topology_spread_score: None,
                score: None,
                reason: Reason::text(format!(
                    "the ManifestWork is in the namespace of cluster {cluster:?}"
                )),
            }],
            Condition::new(
                SCHEDULED,
                true,
                "ClusterNamespace",
                format!("delivered to cluster {cluster:?}, whose namespace holds it"),
            ),
        )
    } else {
        (
            vec![],
            vec![],
            Condition::new(
                SCHEDULED,
                false,
                "ClusterNotFound",
                format!("namespace {cluster:?} is no declared cluster: nothing delivers this ManifestWork (an OCM work agent reads only its own cluster's namespace); move it to the namespace of a MemberCluster or ManagedCluster"),
            ),
        )
    };
    PlacementSchedule {
        key,
        policy_snapshot_index: None,
        policy_hash: None,
        selected,
        decisions,
        conditions: vec![condition],
        bindings: vec![],
        decision_groups: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_goes_to_its_namespace_cluster_only_when_declared() {
        let key = PlacementKey::new(PlacementKind::ManifestWork, Some("east"), "web");
        let found = schedule(key.clone(), "east", true);
        assert_eq!(found.selected, ["east"]);
        assert_eq!(found.conditions[0].status, "True");
        let lost = schedule(key, "east", false);
        assert!(lost.selected.is_empty());
        assert_eq!(
            (
                lost.conditions[0].status.as_str(),
                lost.conditions[0].reason.as_str()
            ),
            ("False", "ClusterNotFound")
        );
    }
}
