//! The step of an OCM placement: the ManifestWorkReplicaSet workloads go to every selected
//! cluster at once (their own rolloutStrategy is not modelled); a plain ManifestWork to its one
//! cluster, at once, as its cluster's work agent applies it.

use super::render::Renderings;
use super::{Context, Pacing, Placement, StepSummary};
use crate::rollout::rolling::BindingHealth;
use crate::rollout::strategy::{ApplyStrategy, Strategy};
use crate::rollout::work::Work;

/// The step of OCM placement `p`: its summary and the work for members.
pub(super) fn step(
    cx: &Context,
    p: &Placement,
    renderings: &mut Renderings,
) -> (StepSummary, Vec<Work>) {
    let (key, ps, prev) = (p.key, p.schedule, p.prev);
    let strategy = ApplyStrategy::default();
    let mut step = StepSummary::new(key.clone(), Strategy::Ocm);
    let mut work = Vec::new();
    for cluster in &ps.selected {
        let Some((manifests, revision)) = renderings.render(&mut step, p.index, key, cluster, 0)
        else {
            continue;
        };
        let current = prev.clusters.get(cluster);
        let settled = current.and_then(|c| c.revision.as_ref()) == Some(&revision)
            && current.is_some_and(|c| c.health != BindingHealth::Failed);
        // The workloads' own hash is their snapshot stamp.
        let stamp = revision.rendered.clone();
        if settled && cx.pacing == Pacing::Rolling {
            step.up_to_date.push(cluster.clone());
            // What the member changed is re-applied, as a refresh.
            if current.is_some_and(|c| c.recheck.is_some()) {
                let rendered = (manifests, revision);
                work.push(Work::apply(
                    key, cluster, rendered, strategy, stamp, false, true,
                ));
            }
            continue;
        }
        step.applying.push(cluster.clone());
        let rendered = (manifests, revision);
        work.push(Work::apply(
            key, cluster, rendered, strategy, stamp, false, false,
        ));
    }
    for cluster in prev.clusters.keys() {
        if !ps.selected.contains(cluster) && cx.input.fleet.position(cluster).is_some() {
            step.removing.push(cluster.clone());
            work.push(Work::remove(key, cluster, strategy));
        }
    }
    step.target = ps.selected.len();
    (step, work)
}
