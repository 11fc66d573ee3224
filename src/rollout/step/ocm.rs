//! The step of an OCM placement: the ManifestWorkReplicaSet workloads go to the selected
//! clusters at the pace of their `rolloutStrategy` — every cluster at once for `All` (and at
//! immediate pacing), decision group by decision group as [`progressive`] decides for
//! `Progressive` and `ProgressivePerGroup`; a plain ManifestWork to its one cluster, at once, as
//! its cluster's work agent applies it.
//!
//! A cluster's OCM rollout status is read from what its pushes reported ([`status_of`]):
//! OCM's work agent reports a work Applied, then Progressing until its resources are available;
//! gitfleet's push reports the same as the binding's health.

use std::collections::BTreeSet;

use super::render::Renderings;
use super::{Context, Pacing, Placement, StepSummary};
use crate::model::ClusterName;
use crate::rollout::progressive::{self, ClusterRollout, GroupKey, Status};
use crate::rollout::rolling::{BindingHealth, Revision};
use crate::rollout::state::ClusterState;
use crate::rollout::strategy::{ApplyStrategy, Strategy};
use crate::rollout::work::Work;
use crate::schedule::{DecisionGroup, PlacementSchedule};

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
    let pace = match cx.pacing {
        Pacing::Rolling => pace_of(cx, p),
        Pacing::Immediate => None,
    };
    step.replica_sets = replica_sets_of(cx, p);
    let pace = match pace {
        Some(Err(e)) => {
            // OCM reports the placement NotAsExpected and rolls nothing out.
            if let Some(r) = &mut step.replica_sets {
                r.error = Some(e.to_string());
            }
            step.note = Some(format!("rolloutStrategy: {e}"));
            step.target = ps.selected.len();
            return (step, work);
        }
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let mut rendered = Vec::new();
    for cluster in ps.selected.iter().map(ClusterName::as_str) {
        let Some((manifests, revision)) = renderings.render(&mut step, p.index, key, cluster, 0)
        else {
            continue;
        };
        rendered.push((cluster, manifests, revision));
    }
    // At a progressive pace, the clusters the strategy lets the work reach now.
    let released: Option<BTreeSet<String>> = pace.map(|s| {
        let existing: Vec<ClusterRollout> = rendered
            .iter()
            .filter_map(|(cluster, _, revision)| {
                let (status, since) = status_of(prev.clusters.get(cluster), revision)?;
                Some(ClusterRollout::new(
                    cluster,
                    GroupKey::default(),
                    status,
                    Some(since),
                ))
            })
            .collect();
        let groups = groups_of(ps);
        let decision = progressive::decide(&s, &groups, &existing, cx.input.now);
        step.requeue_after = decision.recheck_after.unwrap_or(0);
        decision
            .to_rollout
            .iter()
            .filter(|c| matches!(c.status, Status::ToApply))
            .map(|c| c.cluster.clone())
            .collect()
    });
    for (cluster, manifests, revision) in rendered {
        let current = prev.clusters.get(cluster);
        let settled = current.and_then(|c| c.revision.as_ref()) == Some(&revision)
            && current.is_some_and(|c| c.health != BindingHealth::Failed);
        // The workloads' own hash is their snapshot stamp.
        let stamp = revision.rendered.clone();
        let at_desired = current.and_then(|c| c.revision.as_ref()) == Some(&revision);
        if released.is_some() && at_desired {
            // Progressive: a cluster at the new workloads is followed until it is available
            // (its availability read again by a push that changes nothing), failed or not.
            step.up_to_date.push(cluster.to_string());
            let follow = |c: &ClusterState| {
                matches!(c.health, BindingHealth::Pending | BindingHealth::Failed) || c.is_marked()
            };
            if current.is_some_and(follow) {
                work.push(Work::apply(
                    key,
                    cluster,
                    (manifests, revision),
                    strategy,
                    stamp,
                    false,
                    true,
                ));
            }
            continue;
        }
        if settled && cx.pacing == Pacing::Rolling {
            step.up_to_date.push(cluster.to_string());
            // What the member changed is re-applied, as a refresh.
            if current.is_some_and(ClusterState::is_marked) {
                let rendered = (manifests, revision);
                work.push(Work::apply(
                    key, cluster, rendered, strategy, stamp, false, true,
                ));
            }
            continue;
        }
        if released.as_ref().is_some_and(|r| !r.contains(cluster)) {
            step.waiting.push(cluster.to_string());
            continue;
        }
        step.applying.push(cluster.to_string());
        let rendered = (manifests, revision);
        work.push(Work::apply(
            key, cluster, rendered, strategy, stamp, false, false,
        ));
    }
    for cluster in prev.clusters.keys() {
        if !ps.selected.iter().any(|s| s == cluster) && cx.input.fleet.position(cluster).is_some() {
            step.removing.push(cluster.to_string());
            work.push(Work::remove(key, cluster, strategy));
        }
    }
    step.target = ps.selected.len();
    (step, work)
}

/// The progressive strategy of Placement `p`'s replica sets; `None` for `All` (every cluster
/// at once) or a plain ManifestWork.
fn pace_of(
    cx: &Context,
    p: &Placement,
) -> Option<Result<progressive::Strategy, progressive::StrategyError>> {
    progressive::Strategy::of_progressive(progressive::replica_set_ref(cx.input.cat, p.key)?)
}

/// The rollout type of the replica sets that name Placement `p`; `None` if none does.
fn replica_sets_of(cx: &Context, p: &Placement) -> Option<progressive::ReplicaSetRollout> {
    Some(progressive::ReplicaSetRollout {
        type_: progressive::replica_set_ref(cx.input.cat, p.key)?.rollout_type(),
        error: None,
    })
}

/// The placement's decision groups; one group of every selected cluster when it has none.
pub fn groups_of(ps: &PlacementSchedule) -> Vec<DecisionGroup> {
    if ps.decision_groups.is_empty() {
        return vec![DecisionGroup {
            group_name: String::new(),
            group_index: 0,
            clusters: ps.selected.clone(),
        }];
    }
    ps.decision_groups.clone()
}

/// A cluster's OCM rollout status for the workloads of `desired`, and since when (the time of
/// its state's last change), from what its pushes reported: `None` when it never had them (a
/// new or outdated cluster, to apply when its turn comes). OCM's agent reports a work it could
/// not apply as not Applied, which OCM counts as to apply (taken up again, never timed out); an
/// applied work is Progressing until every resource is available (Succeeded), and Failed when
/// degraded: gitfleet's Failed health of an applied work.
pub(crate) fn status_of(
    current: Option<&ClusterState>,
    desired: &Revision,
) -> Option<(Status, u64)> {
    let c = current?;
    if c.details.attempted.as_ref() == Some(desired) {
        return Some((Status::ToApply, c.updated_at));
    }
    if c.revision.as_ref() != Some(desired) {
        return None;
    }
    let status = match c.health {
        BindingHealth::Pending => Status::Progressing,
        BindingHealth::Failed => Status::Failed,
        BindingHealth::Available
        | BindingHealth::AvailableUntrackable { .. }
        | BindingHealth::DiffReported => Status::Succeeded,
    };
    Some((status, c.updated_at))
}
