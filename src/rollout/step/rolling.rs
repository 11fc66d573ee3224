//! The step of a KubeFleet placement at rolling pacing with the RollingUpdate strategy: which
//! bindings are bound, updated or removed now within the budget of `strategy.rollingUpdate`
//! ([`plan_step`] decides), and which up-to-date ones are re-applied to read them again.

use std::collections::BTreeMap;

use super::render::Renderings;
use super::{note_render_errors, Context, KubeFleet, Placement, StepSummary};
use crate::rollout::rolling::{
    plan_step, BindingHealth, Revision, RollingParams, RolloutBinding, Target,
};
use crate::rollout::work::{Manifests, Work};
use crate::schedule::BindingState;

/// The step of placement `p` at resource snapshot `resource_index` towards `target` within
/// `params`, from `step` (started): its summary and the work for members.
pub(super) fn step(
    cx: &Context,
    p: &Placement,
    kf: &KubeFleet,
    (target, params): (Target, &RollingParams),
    resource_index: u64,
    mut step: StepSummary,
    renderings: &mut Renderings,
) -> (StepSummary, Vec<Work>) {
    let (key, prev, strategy) = (p.key, p.prev, kf.strategy);
    let mut work = Vec::new();
    // Bindings of clusters that left the repository are gone from the schedule: a member
    // removed from the repository keeps what it has (KubeFleet behaves the same).
    let bindings: Vec<RolloutBinding> = p
        .schedule
        .bindings
        .iter()
        .map(|b| {
            let current = prev.clusters.get(b.cluster.as_str());
            RolloutBinding {
                cluster: b.cluster.to_string(),
                state: b.state,
                // Removal is synchronous within a step: a failed one is retried as a
                // fresh removal candidate, never left "deleting".
                deleting: false,
                current: current.and_then(|c| c.revision.clone()),
                health: current.map_or(BindingHealth::Pending, |c| c.health),
            }
        })
        .collect();
    let mut desired: BTreeMap<String, Option<(Manifests, Revision)>> = BTreeMap::new();
    for b in &p.schedule.bindings {
        if b.state != BindingState::Unscheduled {
            let rendered = renderings.render(&mut step, p.index, key, &b.cluster, resource_index);
            desired.insert(b.cluster.to_string(), rendered);
        }
    }
    // A cluster that cannot be rendered keeps what it runs: desired = current, so it is
    // neither updated nor counted as stale; the error is in the step's note.
    let plan = plan_step(
        &bindings,
        |cluster| match desired.get(cluster) {
            Some(Some((_, r))) => r.clone(),
            _ => prev
                .clusters
                .get(cluster)
                .and_then(|c| c.revision.clone())
                .unwrap_or(Revision {
                    resource_index,
                    rendered: "".into(),
                }),
        },
        target,
        params,
        cx.input.now,
    );
    step.target = plan.budget.target;
    for (cluster, binds) in plan
        .bind
        .iter()
        .map(|c| (c, true))
        .chain(plan.update.iter().map(|c| (c, false)))
    {
        let Some(Some(rendered)) = desired.remove(cluster) else {
            continue;
        };
        step.applying.push(cluster.clone());
        let stamp = kf.resource_snapshot.clone();
        work.push(Work::apply(
            key, cluster, rendered, strategy, stamp, binds, false,
        ));
    }
    for cluster in &plan.remove {
        step.removing.push(cluster.clone());
        work.push(Work::remove(key, cluster, strategy));
    }
    // Up-to-date clusters whose availability is not known yet are re-applied (a no-op on
    // the member) to read it again; so are those whose objects the member changed (a
    // deleted object is restored, drift corrected or, under IfNotDrifted and ReportDiff,
    // reported: the strategy decides, as for any apply).
    for cluster in &plan.up_to_date {
        let pending = prev
            .clusters
            .get(cluster)
            .is_some_and(|c| c.health == BindingHealth::Pending || c.is_marked());
        if let Some(Some(rendered)) = desired.remove(cluster).filter(|_| pending) {
            let stamp = kf.resource_snapshot.clone();
            work.push(Work::apply(
                key, cluster, rendered, strategy, stamp, false, true,
            ));
        }
    }
    step.waiting = plan.waiting;
    step.up_to_date = plan.up_to_date;
    step.requeue_after = plan.requeue_after;
    note_render_errors(&mut step);
    (step, work)
}
