//! The step of a placement gone from the commit: what it placed is removed with no pacing
//! (KubeFleet deletes every binding at once), except on members that left the repository,
//! which keep what they have (as in KubeFleet).

use super::StepSummary;
use crate::model::PlacementKey;
use crate::rollout::state::PlacementState;
use crate::rollout::strategy::{ApplyStrategy, Strategy};
use crate::rollout::work::Work;
use crate::schedule::Fleet;

/// The step of placement `key`, gone from the commit, with state `ps`: its summary and the
/// removals for members of `fleet`.
pub(super) fn step(
    key: &PlacementKey,
    ps: &PlacementState,
    fleet: &Fleet,
) -> (StepSummary, Vec<Work>) {
    let strategy = ApplyStrategy {
        abandon: ps.abandon,
        ..ApplyStrategy::default()
    };
    let mut step = StepSummary::new(key.clone(), Strategy::Deleted);
    let mut work = Vec::new();
    let mut kept = Vec::new();
    for cluster in ps.clusters.keys() {
        if fleet.position(cluster).is_some() {
            step.removing.push(cluster.to_string());
            work.push(Work::remove(key, cluster, strategy));
        } else {
            kept.push(cluster.as_str());
        }
    }
    if !kept.is_empty() {
        // Not "settled": its objects are still there.
        let clusters = match kept.len() {
            1 => "1 cluster no longer in the repository".to_string(),
            n => format!("{n} clusters no longer in the repository"),
        };
        step.note = Some(format!(
            "deleted from the repository; its objects stay on {clusters} ({}): members removed \
             from the repository keep what they have, as in KubeFleet",
            kept.join(", ")
        ));
    }
    (step, work)
}
