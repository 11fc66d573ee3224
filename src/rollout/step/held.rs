//! The step of a KubeFleet placement held for invalid resource selectors
//! ([`PlacementSchedule::held`]): KubeFleet's placement controller takes no snapshot of it and
//! leaves its works alone, so nothing of it is applied, pruned or swept, no snapshot is taken
//! and its staged runs are not advanced.

use std::sync::Arc;

use super::{Rendered, StepSummary};
use crate::model::PlacementKey;
use crate::rollout::state::PlacementState;
use crate::rollout::strategy::Strategy;
use crate::schedule::{BindingState, PlacementSchedule};

/// The step of a placement held for invalid resource selectors ([`PlacementSchedule::held`]):
/// no work, and each bound cluster "wants" what it runs, so its conditions stay what the
/// member reports.
pub(super) fn step(
    key: &PlacementKey,
    strategy: Strategy,
    ps: &PlacementSchedule,
    prev: &PlacementState,
    message: &str,
) -> StepSummary {
    let mut step = StepSummary::new(key.clone(), strategy);
    step.held = true;
    step.target = ps
        .bindings
        .iter()
        .filter(|b| b.state != BindingState::Unscheduled)
        .count();
    for cluster in &ps.selected {
        if let Some(revision) = prev
            .clusters
            .get(cluster.as_str())
            .and_then(|c| c.revision.clone())
        {
            let objects = None;
            let entry = Arc::new(Rendered { revision, objects });
            step.rendered.insert(cluster.clone(), entry);
            step.up_to_date.push(cluster.to_string());
        }
    }
    step.note = Some(format!(
        "held: {message}; what it placed stays as it is until its selectors are fixed"
    ));
    step
}
