//! What the rolling step will do with a new commit, for `gitfleet plan`: the very decision the
//! daemon takes for a placement ([`Pace::of`], [`super::rolling::plan_step`] with the same
//! target and budget), played forward from a fleet that runs the base commit everywhere, settled
//! and available, with every step's changes becoming available at once. The plan knows which
//! clusters' manifests change (it diffs them); nothing else is needed, so nothing is rendered
//! or hashed here.

use std::collections::BTreeSet;

use super::rolling::{plan_step, BindingHealth, Budget, Revision, RolloutBinding};
use super::step::{Pace, Pacing};
use crate::model::placement::PlacementSpec;
use crate::model::ClusterName;
use crate::schedule::BindingState;

/// How a KubeFleet placement's change rolls out under `gitfleet run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preview {
    /// RollingUpdate: the budget of the first step, and how many steps it takes until every
    /// updating cluster runs the head (`None`: the budget lets no update through, e.g.
    /// `maxUnavailable` resolving to 0).
    Rolling {
        budget: Budget,
        steps: Option<usize>,
    },
    /// `strategy.type: External`: staged update runs decide.
    Staged,
}

/// The clusters of a placement on both sides of a change.
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// Selected at the base (running it).
    pub base: &'a [ClusterName],
    /// Selected at the head.
    pub head: &'a [ClusterName],
    /// Clusters selected on both sides whose manifests change.
    pub updating: &'a BTreeSet<&'a str>,
}

/// The rollout of `change` for a placement whose head spec is `spec`.
pub fn preview(spec: &PlacementSpec, change: Change) -> Preview {
    let (target, params) = match Pace::of(Pacing::Rolling, spec) {
        Pace::Rolling { target, params } => (target, params),
        Pace::Staged | Pace::Now => return Preview::Staged,
    };
    let base: BTreeSet<&str> = change.base.iter().map(ClusterName::as_str).collect();
    let head: BTreeSet<&str> = change.head.iter().map(ClusterName::as_str).collect();
    let at = |i: u64| Revision {
        resource_index: i,
        rendered: "".into(),
    };
    let binding = |cluster: &str, state, current| RolloutBinding {
        cluster: cluster.to_string(),
        state,
        deleting: false,
        current,
        health: BindingHealth::Available,
    };
    // The base runs everywhere it was selected; clusters it gains are new bindings.
    let mut bindings: Vec<RolloutBinding> = head
        .iter()
        .map(|c| {
            if base.contains(c) {
                binding(c, BindingState::Bound, Some(at(0)))
            } else {
                binding(c, BindingState::Scheduled, None)
            }
        })
        .chain(
            base.difference(&head)
                .map(|c| binding(c, BindingState::Unscheduled, Some(at(0)))),
        )
        .collect();
    let desired = |c: &str| at(u64::from(change.updating.contains(c)));
    let done = |bindings: &[RolloutBinding]| {
        bindings
            .iter()
            .filter(|b| change.updating.contains(b.cluster.as_str()))
            .all(|b| b.current == Some(desired(&b.cluster)))
    };
    let mut first = None;
    let mut steps = 0;
    // Each step moves at least one binding or stops: bounded by the bindings' moves.
    while !done(&bindings) {
        let step = plan_step(&bindings, desired, target, &params, 0);
        first.get_or_insert(step.budget);
        if step.bind.is_empty() && step.update.is_empty() && step.remove.is_empty() {
            return Preview::Rolling {
                budget: step.budget,
                steps: None,
            };
        }
        steps += 1;
        bindings.retain(|b| !step.remove.contains(&b.cluster));
        for b in &mut bindings {
            if step.bind.contains(&b.cluster) || step.update.contains(&b.cluster) {
                b.state = BindingState::Bound;
                b.current = Some(desired(&b.cluster));
            }
        }
    }
    let budget = first.unwrap_or_else(|| plan_step(&bindings, desired, target, &params, 0).budget);
    Preview::Rolling {
        budget,
        steps: Some(steps),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::placement::{IntOrPercent, RollingUpdateConfig, RolloutStrategyType};

    fn names(n: &[&str]) -> Vec<ClusterName> {
        n.iter().map(|&s| s.into()).collect()
    }

    fn spec(max_unavailable: i64, max_surge: i64) -> PlacementSpec {
        let mut spec = PlacementSpec::default();
        spec.strategy.rolling_update = Some(RollingUpdateConfig {
            max_unavailable: Some(IntOrPercent::Int(max_unavailable)),
            max_surge: Some(IntOrPercent::Int(max_surge)),
            ..RollingUpdateConfig::default()
        });
        spec
    }

    #[test]
    fn updates_go_max_unavailable_at_a_time() {
        let all = names(&["a", "b", "c", "d"]);
        let updating: BTreeSet<&str> = ["a", "b", "c"].into();
        let change = Change {
            base: &all,
            head: &all,
            updating: &updating,
        };
        let Preview::Rolling { budget, steps } = preview(&spec(2, 0), change) else {
            panic!("rolling")
        };
        assert_eq!((budget.max_unavailable, budget.max_surge), (2, 0));
        assert_eq!(steps, Some(2));
    }

    #[test]
    fn a_cluster_being_removed_counts_as_available_until_it_is_gone() {
        let (base, head) = (names(&["a", "b", "z"]), names(&["a", "b"]));
        let updating: BTreeSet<&str> = ["a", "b"].into();
        let change = Change {
            base: &base,
            head: &head,
            updating: &updating,
        };
        // Target 2, maxUnavailable 1: 3 ready (z too) - 1 minimum available = 2 this step:
        // z is removed and a updated, then b.
        let Preview::Rolling { budget, steps } = preview(&spec(1, 0), change) else {
            panic!("rolling")
        };
        assert_eq!((budget.target, budget.max_to_remove), (2, 2));
        assert_eq!(steps, Some(2));
    }

    #[test]
    fn max_unavailable_zero_lets_no_update_through() {
        let all = names(&["a", "b"]);
        let updating: BTreeSet<&str> = ["a"].into();
        let change = Change {
            base: &all,
            head: &all,
            updating: &updating,
        };
        let Preview::Rolling { budget, steps } = preview(&spec(0, 1), change) else {
            panic!("rolling")
        };
        assert_eq!((budget.max_unavailable, steps), (0, None));
    }

    #[test]
    fn external_placements_are_left_to_staged_runs() {
        let mut s = spec(1, 1);
        s.strategy.type_ = Some(RolloutStrategyType::External);
        let none = BTreeSet::new();
        let change = Change {
            base: &[],
            head: &[],
            updating: &none,
        };
        assert_eq!(preview(&s, change), Preview::Staged);
    }
}
