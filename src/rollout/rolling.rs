//! One RollingUpdate step for one placement (KubeFleet's rollout controller): given every binding's state,
//! what it runs and how healthy it is, which clusters are bound, updated and removed now and
//! which wait for the budget. Pure: the clock is a parameter.
//!
//! One deliberate departure from KubeFleet (docs/reference/compatibility.md): a placement whose target is zero
//! removes every remaining binding at once (kubefleet#601: KubeFleet cannot shrink to zero while
//! a binding is not ready). A binding not available yet ([`BindingHealth::Pending`]) counts as
//! failed, as it does in KubeFleet in practice (its binding reasons fall outside the allow-list).

use crate::model::placement::IntOrPercent;
use crate::model::SharedText;
use crate::schedule::BindingState;

/// What a cluster runs (or should run) for a placement: the resource snapshot, and a fingerprint
/// of what the cluster's overrides make of it (KubeFleet compares the override snapshot lists; a
/// hash of the rendered manifests changes exactly when those do, or when the resources do). A
/// binding whose revision differs from the desired one is updated.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    pub resource_index: u64,
    /// Shared by every cluster given the same rendering (one step makes it once per rendering):
    /// the state keeps one per binding, and most bindings of a placement run the same one.
    pub rendered: SharedText,
}

/// The health a binding's last push reported, as the binding conditions carry it in KubeFleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum BindingHealth {
    /// Applied (or being applied), not yet available, not failed.
    Pending,
    /// Every object is available.
    Available,
    /// Applied; some object's availability cannot be tracked. Ready once
    /// `unavailablePeriodSeconds` have passed since `since` (seconds on the caller's clock).
    AvailableUntrackable { since: u64 },
    /// ReportDiff strategy: the diff was reported (counts as ready, never as "can be ready").
    DiffReported,
    /// Applying failed or an object became unavailable.
    Failed,
}

impl BindingHealth {
    /// The push found nothing to wait for: every object available, its availability not
    /// trackable, or (ReportDiff) the diff reported. When an untrackable one counts for a
    /// rolling update's budget is [`plan_step`]'s to say.
    pub fn is_ready(self) -> bool {
        matches!(
            self,
            BindingHealth::Available
                | BindingHealth::AvailableUntrackable { .. }
                | BindingHealth::DiffReported
        )
    }
}

/// One binding as the rollout sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutBinding {
    pub cluster: String,
    pub state: BindingState,
    /// Removal from the member is under way (KubeFleet: the binding has a deletion timestamp).
    pub deleting: bool,
    /// What the cluster was last given; `None` before the first push.
    pub current: Option<Revision>,
    pub health: BindingHealth,
}

/// How many clusters the placement targets (as KubeFleet's rollout controller counts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// PickAll: the number of Scheduled and Bound bindings.
    PickAll,
    /// PickFixed: the number of cluster names; PickN: `numberOfClusters`.
    Count(usize),
}

/// The defaulted `strategy.rollingUpdate` of a placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollingParams {
    pub max_unavailable: IntOrPercent,
    pub max_surge: IntOrPercent,
    pub unavailable_period_seconds: u64,
}

impl Default for RollingParams {
    /// KubeFleet's defaults: 25%, 25%, 60 s.
    fn default() -> Self {
        Self {
            max_unavailable: IntOrPercent::String("25%".into()),
            max_surge: IntOrPercent::String("25%".into()),
            unavailable_period_seconds: 60,
        }
    }
}

/// The budget the step was computed with, for status and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    pub target: usize,
    pub max_unavailable: usize,
    pub max_to_remove: i64,
    pub max_surge: usize,
    pub max_to_add: i64,
}

/// What to do now. Every list is in candidate order (cluster name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RolloutStep {
    /// Scheduled bindings to bind (first push of the placement to the cluster).
    pub bind: Vec<String>,
    /// Bound bindings to move to the desired revision.
    pub update: Vec<String>,
    /// Unscheduled bindings whose objects are removed from the cluster now.
    pub remove: Vec<String>,
    /// Bindings that need a change but wait for the budget (`RolloutStarted=False`,
    /// `RolloutNotStartedYet`).
    pub waiting: Vec<String>,
    /// Bound bindings already at the desired revision.
    pub up_to_date: Vec<String>,
    /// When to look again, in seconds: 0 when every binding is ready, the time until the first
    /// untrackable binding becomes ready, or `unavailablePeriodSeconds` while others are not.
    pub requeue_after: u64,
    pub budget: Budget,
}

impl RolloutStep {
    /// Nothing to do and nothing waiting.
    pub fn is_settled(&self) -> bool {
        self.bind.is_empty()
            && self.update.is_empty()
            && self.remove.is_empty()
            && self.waiting.is_empty()
    }
}

/// Is the binding ready, and if not, how long until it may be (None: unknown, it waits for a
/// status change)?
fn readiness(health: BindingHealth, period: u64, now: u64) -> (bool, Option<u64>) {
    match health {
        BindingHealth::DiffReported | BindingHealth::Available => (true, Some(0)),
        BindingHealth::AvailableUntrackable { since } => {
            let ready_at = since.saturating_add(period);
            if now >= ready_at {
                (true, Some(0))
            } else {
                (false, Some(ready_at - now))
            }
        }
        BindingHealth::Pending | BindingHealth::Failed => (false, None),
    }
}

/// One reconcile of the rollout controller for one placement. `desired(cluster)` is the
/// revision the cluster should run (latest resource snapshot, the cluster's overrides).
pub fn plan_step(
    bindings: &[RolloutBinding],
    desired: impl Fn(&str) -> Revision,
    target: Target,
    params: &RollingParams,
    now: u64,
) -> RolloutStep {
    let mut sorted: Vec<&RolloutBinding> = bindings.iter().collect();
    // KubeFleet lists bindings by name, `<placement>-<cluster>-<suffix>`: cluster order.
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));

    let period = params.unavailable_period_seconds;
    let mut step = RolloutStep::default();
    let (mut targeted, mut ready, mut can_be_ready, mut can_be_unavailable) = (0, 0, 0, 0);
    let (mut removals, mut updates, mut failed_updates, mut to_bind) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut all_ready = true;
    let mut min_wait = period;

    for b in sorted {
        // As KubeFleet behaves in practice (kubefleet#670): a binding whose
        // objects are not available yet counts as failed, so a newer revision reaches it
        // outside the budget instead of waiting for an availability that may never come.
        let failed = matches!(b.health, BindingHealth::Failed | BindingHealth::Pending);
        let diff_reported = b.health == BindingHealth::DiffReported;
        let mut note_readiness = |health| {
            let (is_ready, wait) = readiness(health, period, now);
            if !is_ready {
                all_ready = false;
                if let Some(w) = wait {
                    min_wait = min_wait.min(w);
                }
            }
            is_ready
        };
        match b.state {
            BindingState::Unscheduled => {
                if !failed && !diff_reported {
                    can_be_ready += 1;
                }
                let is_ready = note_readiness(b.health);
                ready += usize::from(is_ready);
                if !b.deleting {
                    removals.push(b.cluster.clone());
                } else if is_ready {
                    can_be_unavailable += 1;
                }
            }
            BindingState::Scheduled => {
                targeted += 1;
                to_bind.push(b.cluster.clone());
            }
            BindingState::Bound => {
                targeted += 1;
                let is_ready = note_readiness(b.health);
                ready += usize::from(is_ready);
                if !failed && !diff_reported {
                    can_be_ready += 1;
                }
                if !b.deleting {
                    if b.current.as_ref() != Some(&desired(&b.cluster)) {
                        if failed {
                            failed_updates.push(b.cluster.clone());
                        } else {
                            updates.push(b.cluster.clone());
                        }
                    } else {
                        step.up_to_date.push(b.cluster.clone());
                    }
                } else if is_ready {
                    can_be_unavailable += 1;
                }
            }
        }
    }
    step.requeue_after = if all_ready { 0 } else { min_wait };

    let target = match target {
        Target::PickAll => targeted,
        Target::Count(n) => n,
    };
    let scale = |v: &IntOrPercent| v.scaled_up(target as i64).unwrap_or(0).max(0) as usize;
    let max_unavailable = scale(&params.max_unavailable);
    let min_available = target as i64 - max_unavailable as i64;
    let mut max_to_remove = (ready as i64 - can_be_unavailable as i64) - min_available;
    if target == 0 {
        // kubefleet#601 fixed: nothing has to stay available, so every removal goes now.
        max_to_remove = max_to_remove.max(removals.len() as i64);
    }
    let max_surge = scale(&params.max_surge);
    let max_to_add = (target + max_surge) as i64 - can_be_ready as i64;
    step.budget = Budget {
        target,
        max_unavailable,
        max_to_remove,
        max_surge,
        max_to_add,
    };

    // Failed bindings are already unavailable: updating them costs no budget.
    step.update.extend(failed_updates);
    let mut budget = max_to_remove.max(0) as usize;
    let take_removals = budget.min(removals.len());
    step.remove.extend(removals.drain(..take_removals));
    budget -= take_removals;
    let take_updates = budget.min(updates.len());
    step.update.extend(updates.drain(..take_updates));
    let take_binds = (max_to_add.max(0) as usize).min(to_bind.len());
    step.bind.extend(to_bind.drain(..take_binds));
    // KubeFleet marks only unselected update and bind candidates as not started; a removal that
    // waits is reported the same way here so that it stays visible (kubefleet#598).
    step.waiting.extend(updates);
    step.waiting.extend(to_bind);
    step.waiting.extend(removals);
    step.waiting.sort();
    step
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(i: u64) -> Revision {
        Revision {
            resource_index: i,
            rendered: "".into(),
        }
    }

    fn bound(cluster: &str, at: u64, health: BindingHealth) -> RolloutBinding {
        RolloutBinding {
            cluster: cluster.into(),
            state: BindingState::Bound,
            deleting: false,
            current: Some(rev(at)),
            health,
        }
    }

    fn scheduled(cluster: &str) -> RolloutBinding {
        RolloutBinding {
            cluster: cluster.into(),
            state: BindingState::Scheduled,
            deleting: false,
            current: None,
            health: BindingHealth::Pending,
        }
    }

    fn unscheduled(cluster: &str, health: BindingHealth) -> RolloutBinding {
        RolloutBinding {
            cluster: cluster.into(),
            state: BindingState::Unscheduled,
            deleting: false,
            current: Some(rev(0)),
            health,
        }
    }

    fn params(max_unavailable: &str, max_surge: &str) -> RollingParams {
        let v = |s: &str| match s.parse::<i64>() {
            Ok(i) => IntOrPercent::Int(i),
            Err(_) => IntOrPercent::String(s.into()),
        };
        RollingParams {
            max_unavailable: v(max_unavailable),
            max_surge: v(max_surge),
            unavailable_period_seconds: 60,
        }
    }

    use BindingHealth::*;

    #[test]
    fn first_rollout_binds_target_plus_surge() {
        // PickN 4, nothing bound yet: maxSurge 25% of 4 = 1, so 5 may be bound, 4 exist.
        let bindings: Vec<_> = ["a", "b", "c", "d"].into_iter().map(scheduled).collect();
        let step = plan_step(
            &bindings,
            |_| rev(0),
            Target::Count(4),
            &params("25%", "25%"),
            0,
        );
        assert_eq!(step.bind, ["a", "b", "c", "d"]);
        assert_eq!(step.budget.max_to_add, 5);
        assert!(step.waiting.is_empty());
    }

    #[test]
    fn update_waits_for_max_unavailable() {
        // Docs example 1: maxUnavailable 1 over 3 ready clusters updates one at a time.
        let bindings: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|c| bound(c, 0, Available))
            .collect();
        let step = plan_step(
            &bindings,
            |_| rev(1),
            Target::Count(3),
            &params("1", "25%"),
            0,
        );
        assert_eq!(step.update, ["a"]);
        assert_eq!(step.waiting, ["b", "c"]);
        assert_eq!(step.budget.max_to_remove, 1);
    }

    #[test]
    fn an_updated_cluster_that_is_not_ready_yet_stalls_the_rest() {
        let bindings = vec![
            bound("a", 1, Pending),
            bound("b", 0, Available),
            bound("c", 0, Available),
        ];
        let step = plan_step(
            &bindings,
            |_| rev(1),
            Target::Count(3),
            &params("1", "25%"),
            0,
        );
        assert!(step.update.is_empty());
        assert_eq!(step.waiting, ["b", "c"]);
        // Waiting for a status change: the default period.
        assert_eq!(step.requeue_after, 60);
    }

    #[test]
    fn failed_bindings_are_updated_outside_the_budget() {
        let bindings = vec![
            bound("a", 0, Failed),
            bound("b", 0, Failed),
            bound("c", 0, Available),
        ];
        // 1 ready, min available 2: no budget, yet both failed ones get the fix.
        let step = plan_step(
            &bindings,
            |_| rev(1),
            Target::Count(3),
            &params("1", "0"),
            0,
        );
        assert_eq!(step.update, ["a", "b"]);
        assert_eq!(step.waiting, ["c"]);
        assert!(step.budget.max_to_remove < 0);
    }

    #[test]
    fn removals_come_before_updates() {
        let bindings = vec![
            bound("a", 0, Available),
            bound("b", 0, Available),
            bound("c", 0, Available),
            unscheduled("z", Available),
        ];
        // Target 3, maxUnavailable 1: 4 ready - min 2 = budget 2 → remove z, update a.
        let step = plan_step(
            &bindings,
            |_| rev(1),
            Target::Count(3),
            &params("1", "0"),
            0,
        );
        assert_eq!(step.remove, ["z"]);
        assert_eq!(step.update, ["a"]);
        assert_eq!(step.waiting, ["b", "c"]);
    }

    #[test]
    fn percentages_round_up() {
        // 25% of 5 = 2 (1.25 rounded up).
        let bindings: Vec<_> = ["a", "b", "c", "d", "e"]
            .into_iter()
            .map(|c| bound(c, 0, Available))
            .collect();
        let step = plan_step(
            &bindings,
            |_| rev(1),
            Target::Count(5),
            &params("25%", "25%"),
            0,
        );
        assert_eq!(step.budget.max_unavailable, 2);
        assert_eq!(step.update, ["a", "b"]);
    }

    #[test]
    fn untrackable_binding_is_ready_after_the_period() {
        let bindings = vec![
            bound("a", 1, AvailableUntrackable { since: 100 }),
            bound("b", 0, Available),
        ];
        let p = params("1", "0");
        let early = plan_step(&bindings, |_| rev(1), Target::Count(2), &p, 130);
        assert!(early.update.is_empty());
        assert_eq!(early.requeue_after, 30);
        let later = plan_step(&bindings, |_| rev(1), Target::Count(2), &p, 160);
        assert_eq!(later.update, ["b"]);
    }

    #[test]
    fn shrinking_to_zero_removes_everything_even_when_not_ready() {
        // KubeFleet keeps these (kubefleet#601); gitfleet removes them.
        let bindings = vec![unscheduled("a", Pending), unscheduled("b", Available)];
        let step = plan_step(
            &bindings,
            |_| rev(0),
            Target::Count(0),
            &params("25%", "25%"),
            0,
        );
        assert_eq!(step.remove, ["a", "b"]);
        assert!(step.waiting.is_empty());
    }

    #[test]
    fn pick_all_targets_scheduled_and_bound() {
        let bindings = vec![bound("a", 0, Available), scheduled("b"), scheduled("c")];
        let step = plan_step(
            &bindings,
            |_| rev(0),
            Target::PickAll,
            &params("25%", "0"),
            0,
        );
        assert_eq!(step.budget.target, 3);
        // maxSurge 0: 3 + 0 - 1 can-be-ready = 2 binds.
        assert_eq!(step.bind, ["b", "c"]);
        assert_eq!(step.up_to_date, ["a"]);
    }

    #[test]
    fn surge_limits_new_clusters_while_old_ones_drain() {
        // Moving from a,b to c,d with maxSurge 1: one new cluster at a time.
        let bindings = vec![
            unscheduled("a", Available),
            unscheduled("b", Available),
            scheduled("c"),
            scheduled("d"),
        ];
        let step = plan_step(
            &bindings,
            |_| rev(0),
            Target::Count(2),
            &params("0", "1"),
            0,
        );
        assert_eq!(step.bind, ["c"]);
        assert!(
            step.remove.is_empty(),
            "maxUnavailable 0 keeps both old ones"
        );
        assert_eq!(step.waiting, ["a", "b", "d"]);
    }

    #[test]
    fn overrides_changing_make_an_update() {
        let bindings = vec![bound("a", 3, Available)];
        let desired = |_: &str| Revision {
            resource_index: 3,
            rendered: "an override changed the manifests".into(),
        };
        let step = plan_step(&bindings, desired, Target::Count(1), &params("1", "0"), 0);
        assert_eq!(step.update, ["a"]);
    }

    #[test]
    fn settled_placement_requeues_never() {
        let bindings = vec![bound("a", 2, Available), bound("b", 2, DiffReported)];
        let step = plan_step(
            &bindings,
            |_| rev(2),
            Target::Count(2),
            &params("1", "1"),
            0,
        );
        assert!(step.is_settled());
        assert_eq!(step.requeue_after, 0);
        assert_eq!(step.up_to_date, ["a", "b"]);
    }
}

#[cfg(test)]
mod pending_tests {
    use super::*;

    #[test]
    fn a_new_revision_reaches_clusters_still_pending_on_the_old_one() {
        // All three still becoming available on revision 0 when revision 1 arrives: waiting for
        // them under the budget would wait forever; KubeFleet updates them outside it.
        let bindings: Vec<RolloutBinding> = ["a", "b", "c"]
            .into_iter()
            .map(|c| RolloutBinding {
                cluster: c.into(),
                state: BindingState::Bound,
                deleting: false,
                current: Some(Revision {
                    resource_index: 0,
                    rendered: "".into(),
                }),
                health: BindingHealth::Pending,
            })
            .collect();
        let want = |_: &str| Revision {
            resource_index: 1,
            rendered: "".into(),
        };
        let step = plan_step(
            &bindings,
            want,
            Target::Count(3),
            &RollingParams::default(),
            0,
        );
        assert_eq!(step.update, ["a", "b", "c"]);
    }
}
