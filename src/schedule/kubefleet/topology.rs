//! Topology spread constraints: each member's domain per constraint, the bindings counted per
//! domain in a cycle, and KubeFleet's skew scores and violations.

use super::bindings::Bindings;
use super::cache::{Cache, Domains};
use crate::model::placement::{TopologySpreadConstraint, UnsatisfiableAction};
use crate::schedule::fleet::Fleet;
use std::rc::Rc;

pub(super) const TSC_VIOLATION_PENALTY: i32 = 1000;

/// The topology domains of a placement: for each constraint (DoNotSchedule first, as they are
/// evaluated), each member's domain.
pub(super) struct TopologyDomains<'a> {
    constraints: Vec<ConstraintDomains<'a>>,
}

pub(super) struct ConstraintDomains<'a> {
    constraint: &'a TopologySpreadConstraint,
    domains: Rc<Domains>,
}

impl<'a> TopologyDomains<'a> {
    pub(super) fn new(
        fleet: &Fleet,
        constraints: &'a [TopologySpreadConstraint],
        cache: &mut Cache,
    ) -> Self {
        let mut ordered: Vec<&TopologySpreadConstraint> = constraints.iter().collect();
        ordered.sort_by_key(|c| {
            c.when_unsatisfiable.unwrap_or_default() == UnsatisfiableAction::ScheduleAnyway
        });
        let constraints = ordered
            .into_iter()
            .map(|constraint| ConstraintDomains {
                constraint,
                domains: cache.domains(fleet, &constraint.topology_key),
            })
            .collect();
        Self { constraints }
    }

    /// The state of one cycle: bindings counted per domain, and what placing one more copy in
    /// each domain does (the same for every cluster of the domain, so worked out once).
    pub(super) fn state(&self, bindings: &Bindings) -> TopologyState<'_> {
        if self.constraints.is_empty() {
            return TopologyState {
                constraints: vec![],
            };
        }
        let current: Vec<usize> = bindings.current().map(|(i, _)| i).collect();
        TopologyState {
            constraints: self
                .constraints
                .iter()
                .map(|cd| {
                    let mut counts = vec![0usize; cd.domains.count];
                    for &i in &current {
                        if let Some(d) = cd.domains.by_position[i] {
                            counts[d] += 1;
                        }
                    }
                    let counts = DomainCounts::new(counts);
                    let effects = (0..cd.domains.count)
                        .map(|domain| effect(cd.constraint, &counts, domain))
                        .collect();
                    (cd, effects)
                })
                .collect(),
        }
    }
}

/// What placing one more copy in a domain does to a constraint's score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// It violates a DoNotSchedule constraint.
    Violates,
    Adds(i32),
}

fn effect(constraint: &TopologySpreadConstraint, counts: &DomainCounts, domain: usize) -> Effect {
    let max_skew = constraint.max_skew.unwrap_or(1);
    let (violated, change) = counts.will_violate(domain, max_skew);
    match (violated, constraint.when_unsatisfiable.unwrap_or_default()) {
        (true, UnsatisfiableAction::DoNotSchedule) => Effect::Violates,
        (true, UnsatisfiableAction::ScheduleAnyway) => Effect::Adds(-TSC_VIOLATION_PENALTY),
        (false, _) => Effect::Adds(-change),
    }
}

/// Topology spread state of one cycle: per constraint, each domain's effect.
pub(super) struct TopologyState<'a> {
    constraints: Vec<(&'a ConstraintDomains<'a>, Vec<Effect>)>,
}

/// Bindings per domain (every domain of the members, empty ones included).
pub(super) struct DomainCounts {
    counts: Vec<usize>,
    smallest: usize,
    second_smallest: usize,
    largest: usize,
}

impl DomainCounts {
    pub(super) fn new(counts: Vec<usize>) -> Self {
        let mut sorted = counts.clone();
        sorted.sort_unstable();
        let (smallest, second_smallest, largest) = match sorted.len() {
            0 => (0, 0, 0),
            1 => (sorted[0], sorted[0], sorted[0]),
            2 if sorted[0] < sorted[1] => (sorted[0], sorted[1], sorted[1]),
            2 => (sorted[0], sorted[0], sorted[0]),
            _ => (sorted[0], sorted[1], sorted[sorted.len() - 1]),
        };
        Self {
            counts,
            smallest,
            second_smallest,
            largest,
        }
    }

    /// `(violated, skew change)` of placing one more copy in `domain` (KubeFleet's `willViolate`).
    pub(super) fn will_violate(&self, domain: usize, max_skew: i32) -> (bool, i32) {
        let count = self.counts.get(domain).copied().unwrap_or(0);
        let skew = (self.largest - self.smallest) as i32;
        if self.largest == self.smallest {
            (skew + 1 > max_skew, 1)
        } else if count == self.smallest && self.smallest != self.second_smallest {
            (skew - 1 > max_skew, -1)
        } else if count == self.largest {
            (skew + 1 > max_skew, 1)
        } else {
            (skew > max_skew, 0)
        }
    }
}

impl<'a> TopologyState<'a> {
    /// The topology spread score of the member at `position` in the fleet, or the DoNotSchedule
    /// constraint it violates.
    pub(super) fn score(&self, position: usize) -> Result<i32, &'a TopologySpreadConstraint> {
        let mut score = 0;
        for (cd, effects) in &self.constraints {
            let Some(domain) = cd.domains.by_position[position] else {
                continue;
            };
            match effects[domain] {
                Effect::Violates => return Err(cd.constraint),
                Effect::Adds(change) => score += change,
            }
        }
        Ok(score)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn counts(values: &[usize]) -> DomainCounts {
        DomainCounts::new(values.to_vec())
    }

    #[test]
    pub(super) fn skew_changes_follow_will_violate() {
        // All equal: +1.
        assert_eq!(counts(&[1, 1]).will_violate(0, 1), (false, 1));
        assert_eq!(counts(&[1, 1]).will_violate(0, 0), (true, 1));
        // Unique smallest: -1.
        assert_eq!(counts(&[0, 3]).will_violate(0, 1), (true, -1));
        assert_eq!(counts(&[0, 2]).will_violate(0, 1), (false, -1));
        assert_eq!(counts(&[0, 1]).will_violate(0, 1), (false, -1));
        // Largest: +1.
        assert_eq!(counts(&[0, 1]).will_violate(1, 1), (true, 1));
        // In between, or a shared smallest: 0.
        assert_eq!(counts(&[0, 1, 2]).will_violate(1, 2), (false, 0));
        assert_eq!(counts(&[0, 0, 1]).will_violate(0, 1), (false, 0));
    }
}
