//! When to look again after a step: the next wake-up, decided from what the step decided and
//! how its work ended. The caller maps it to its own timers (the daemon to its `Action`); the
//! availability poll's period is the caller's, as it is the members' pace, not the rollout's.

use std::sync::Arc;
use std::time::Duration;

use super::rolling::BindingHealth;
use super::step::StepSummary;
use super::work::{Action, Outcome, Work};

/// How long to wait after a failed push when no placement asks for a time of its own.
pub const RETRY_FAILED_PUSH: Duration = Duration::from_secs(5);
/// The longest wait a placement's requeue may ask for before the next look.
pub const LONGEST_REQUEUE: Duration = Duration::from_secs(60);

/// When to look again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// At once: a binding changed what it runs or became available, so the next step may
    /// move the rollout on.
    Now,
    /// At the availability poll: a cluster's availability is not known yet (members are not
    /// watched).
    AvailabilityPoll,
    /// After this long: something failed, waits for the budget or asked for a time of its own.
    After(Duration),
    /// Only on a change (or the caller's poll): nothing to do.
    OnChange,
}

/// When to look again after a step whose placements' summaries are `steps` and whose work
/// ended as `results`: at once when a binding changed what it runs or became available (take
/// the next step); at the availability poll while a cluster's availability is not known yet;
/// while something failed or waits for the budget, after the shortest wait a placement asks
/// for ([`RETRY_FAILED_PUSH`] if none, at most [`LONGEST_REQUEUE`]); otherwise only on a change.
pub fn next_wake(steps: &[Arc<StepSummary>], results: &[(Work, Outcome)]) -> Wake {
    // Re-reading a cluster that is still pending is not progress: the availability poll paces
    // it.
    let progressed = results.iter().any(|(w, o)| match o {
        Outcome::Done(health, _) => {
            !matches!(w.action, Action::Apply { refresh: true, .. })
                || *health != BindingHealth::Pending
        }
        Outcome::Failed(_) => false,
    });
    let pending = results
        .iter()
        .any(|(_, o)| matches!(o, Outcome::Done(BindingHealth::Pending, _)));
    let failed = results.iter().any(|(_, o)| matches!(o, Outcome::Failed(_)));
    if progressed {
        Wake::Now
    } else if pending {
        Wake::AvailabilityPoll
    } else if failed || steps.iter().any(|s| s.is_moving() || s.requeue_after > 0) {
        let wait = steps
            .iter()
            .map(|s| s.requeue_after)
            .filter(|w| *w > 0)
            .min()
            .map_or(RETRY_FAILED_PUSH, Duration::from_secs);
        Wake::After(wait.min(LONGEST_REQUEUE))
    } else {
        Wake::OnChange
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PlacementKey;
    use crate::rollout::rolling::Revision;
    use crate::rollout::strategy::ApplyStrategy;

    fn key() -> PlacementKey {
        "crp/app".parse().unwrap()
    }

    fn summary(requeue_after: u64, waiting: &[&str]) -> Arc<StepSummary> {
        let mut s = StepSummary::new(key(), crate::rollout::Strategy::RollingUpdate);
        s.requeue_after = requeue_after;
        s.waiting = waiting.iter().map(|c| c.to_string()).collect();
        Arc::new(s)
    }

    fn apply(refresh: bool) -> Work {
        let revision = Revision {
            resource_index: 1,
            rendered: "r".into(),
        };
        let rendered = (Arc::new(vec![]), revision);
        let strategy = ApplyStrategy::default();
        Work::apply(&key(), "m1", rendered, strategy, "s".into(), false, refresh)
    }

    fn done(work: Work, health: BindingHealth) -> (Work, Outcome) {
        (work, Outcome::Done(health, Default::default()))
    }

    fn failed(work: Work) -> (Work, Outcome) {
        (work, Outcome::Failed("refused".into()))
    }

    #[test]
    fn a_step_that_changed_a_binding_is_followed_at_once() {
        let settled = [summary(0, &[])];
        let bound = [done(apply(false), BindingHealth::Pending)];
        assert_eq!(next_wake(&settled, &bound), Wake::Now);
        let available = [done(apply(true), BindingHealth::Available)];
        assert_eq!(next_wake(&settled, &available), Wake::Now);
        let removed = [done(
            Work::remove(&key(), "m1", ApplyStrategy::default()),
            BindingHealth::Available,
        )];
        assert_eq!(next_wake(&settled, &removed), Wake::Now);
    }

    #[test]
    fn a_cluster_still_pending_is_read_again_at_the_availability_poll() {
        let pending = [done(apply(true), BindingHealth::Pending)];
        assert_eq!(
            next_wake(&[summary(30, &[])], &pending),
            Wake::AvailabilityPoll
        );
    }

    #[test]
    fn a_failure_or_a_wait_looks_again_after_the_shortest_wait_asked_within_bounds() {
        let failure = [failed(apply(false))];
        assert_eq!(
            next_wake(&[summary(0, &[])], &failure),
            Wake::After(RETRY_FAILED_PUSH)
        );
        let steps = [summary(0, &["m2"]), summary(30, &[]), summary(12, &[])];
        assert_eq!(next_wake(&steps, &[]), Wake::After(Duration::from_secs(12)));
        assert_eq!(
            next_wake(&[summary(0, &["m2"])], &[]),
            Wake::After(RETRY_FAILED_PUSH)
        );
        assert_eq!(
            next_wake(&[summary(600, &[])], &failure),
            Wake::After(LONGEST_REQUEUE)
        );
    }

    #[test]
    fn a_settled_step_waits_for_a_change() {
        assert_eq!(next_wake(&[summary(0, &[])], &[]), Wake::OnChange);
        assert_eq!(next_wake(&[], &[]), Wake::OnChange);
    }
}
