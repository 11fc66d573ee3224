//! What immediate pacing sweeps from members' records: what they no longer receive.

use std::collections::BTreeSet;

use super::{Decision, Input};
use crate::model::PlacementKey;
use crate::rollout::work::{Prune, Sweep};

/// Immediate pacing: every member of the fleet, and every cluster given work, is swept of what
/// it no longer receives — except the placements that cannot be rendered for it (unknown, not
/// gone), the placements held for invalid resource selectors (kept as they are) and, when the
/// step is limited to some placements, the others. A member that cannot be reached is not
/// touched at all.
pub(super) fn sweep(input: &Input, decision: &mut Decision) {
    let mut clusters: BTreeSet<&str> = input
        .fleet
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    clusters.extend(decision.work.iter().map(|w| w.cluster.as_str()));
    let mut sweeps = Vec::new();
    for cluster in clusters {
        if let Some(why) = input.unreachable.get(cluster) {
            decision.skipped.insert(cluster.to_string(), why.clone());
            continue;
        }
        let unrenderable: BTreeSet<PlacementKey> = decision
            .steps
            .iter()
            .filter(|s| s.held || s.render_errors.contains_key(cluster))
            .map(|s| s.placement.clone())
            .collect();
        let prune = match input.only {
            None => Prune::AllExcept(unrenderable),
            Some(only) => Prune::Only(only.difference(&unrenderable).cloned().collect()),
        };
        sweeps.push(Sweep {
            cluster: cluster.to_string(),
            prune,
        });
    }
    decision.sweeps = sweeps;
}
