//! The step of a KubeFleet placement at immediate pacing (`gitfleet apply`): every binding is
//! applied (or removed) now, whatever it runs and whatever the placement's strategy.

use super::render::Renderings;
use super::{note_render_errors, KubeFleet, Placement, StepSummary};
use crate::rollout::work::Work;
use crate::schedule::BindingState;

/// The step of placement `p` at resource snapshot `resource_index`, from `step` (started):
/// its summary and the work for members.
pub(super) fn step(
    p: &Placement,
    kf: &KubeFleet,
    resource_index: u64,
    mut step: StepSummary,
    renderings: &mut Renderings,
) -> (StepSummary, Vec<Work>) {
    let (key, strategy) = (p.key, kf.strategy);
    let mut work = Vec::new();
    for b in &p.schedule.bindings {
        if b.state == BindingState::Unscheduled {
            step.removing.push(b.cluster.to_string());
            work.push(Work::remove(key, &b.cluster, strategy));
            continue;
        }
        step.target += 1;
        let rendered = renderings.render(&mut step, p.index, key, &b.cluster, resource_index);
        let Some(rendered) = rendered else {
            continue;
        };
        step.applying.push(b.cluster.to_string());
        let binds = b.state == BindingState::Scheduled;
        let stamp = kf.resource_snapshot.clone();
        work.push(Work::apply(
            key, &b.cluster, rendered, strategy, stamp, binds, false,
        ));
    }
    note_render_errors(&mut step);
    (step, work)
}
