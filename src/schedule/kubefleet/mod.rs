//! KubeFleet's scheduler for ClusterResourcePlacement and ResourcePlacement (pkg/scheduler):
//! binding classification, PickAll / PickFixed / PickN, the filter and score plugins, ranking,
//! downscale, and the decisions and `Scheduled` condition with KubeFleet's exact strings.

mod bindings;
mod cache;
mod feasible;
mod filter;
mod score;
mod topology;

pub use cache::Cache;
pub use score::interpolate;

use super::fleet::Fleet;
use super::{
    Binding, BindingState, ClusterDecision, Condition, PlacementKey, PlacementSchedule, Reason,
};
use crate::model::placement::{PlacementPolicy, PlacementType};
use crate::model::ClusterName;
use bindings::{live, Bindings};
use feasible::Feasible;
use filter::{eligibility, Filtered, Selectors};
use score::{affinity_score, Scored};
use std::collections::BTreeSet;
use topology::TopologyDomains;

pub const SCHEDULED: &str = "Scheduled";
pub const FULLY_SCHEDULED: &str = "SchedulingPolicyFulfilled";
pub const NOT_FULLY_SCHEDULED: &str = "SchedulingPolicyUnfulfilled";
/// At most this many clusters that were not picked are listed in the decisions.
const MAX_UNSELECTED_DECISIONS: usize = 20;
/// The API caps the decision list.
const MAX_DECISIONS: usize = 1000;

/// One placement to schedule.
pub struct Input<'a> {
    pub key: PlacementKey,
    /// The defaulted policy (PickAll when the placement has none).
    pub policy: &'a PlacementPolicy,
    pub policy_index: u64,
    pub policy_hash: String,
    pub fleet: &'a Fleet,
    /// The placement's bindings from the previous run.
    pub bindings: &'a [Binding],
}

/// A scheduling cycle could not run (KubeFleet retries it; gitfleet reports it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("property {property:?} of cluster {cluster:?} is not a quantity: {value:?}")]
pub struct CycleError {
    pub cluster: String,
    pub property: String,
    pub value: String,
}

pub fn schedule(input: &Input, cache: &mut Cache) -> PlacementSchedule {
    let mut bindings = Bindings::new(input.fleet, input.bindings, input.policy_index);
    let outcome = match input.policy.placement_type {
        PlacementType::PickFixed => pick_fixed(input, &mut bindings),
        PlacementType::PickAll => pick_all(input, &mut bindings, cache),
        PlacementType::PickN => pick_n(input, &mut bindings, cache),
    };
    let (decisions, condition, bindings) = match outcome {
        Ok((decisions, condition)) => (decisions, condition, bindings.into_vec()),
        Err(e) => {
            // The cycle fails as a whole: bindings stay as they were.
            let message = format!("scheduling failed: {e}");
            (
                vec![],
                Condition::new(SCHEDULED, false, NOT_FULLY_SCHEDULED, message),
                {
                    let mut as_they_were = input.bindings.to_vec();
                    as_they_were.sort_by(|a, b| a.cluster.cmp(&b.cluster));
                    as_they_were
                },
            )
        }
    };
    // Bindings come sorted by name.
    let mut selected: Vec<ClusterName> = Vec::with_capacity(bindings.len());
    let current = bindings
        .iter()
        .filter(|b| live(b) && b.policy_index == input.policy_index);
    selected.extend(current.map(|b| b.cluster.clone()));
    PlacementSchedule {
        key: input.key.clone(),
        policy_snapshot_index: Some(input.policy_index),
        policy_hash: Some(input.policy_hash.clone()),
        selected,
        decisions,
        conditions: vec![condition],
        bindings,
        decision_groups: vec![],
    }
}

type Outcome = Result<(Vec<ClusterDecision>, Condition), CycleError>;

fn count_condition(found: usize, fulfilled: bool) -> Condition {
    if fulfilled {
        Condition::new(
            SCHEDULED,
            true,
            FULLY_SCHEDULED,
            format!("found all cluster needed as specified by the scheduling policy, found {found} cluster(s)"),
        )
    } else {
        Condition::new(
            SCHEDULED,
            false,
            NOT_FULLY_SCHEDULED,
            format!("could not find all clusters needed as specified by the scheduling policy, found {found} cluster(s) instead"),
        )
    }
}

/// Decisions of the current bindings, as KubeFleet records them.
fn binding_decisions(bindings: &Bindings, with_scores: bool) -> Vec<ClusterDecision> {
    let mut decisions = Vec::with_capacity(bindings.len().min(MAX_DECISIONS) + 1);
    let current = bindings.current().take(MAX_DECISIONS).map(|(_, b)| {
        let scores = match (with_scores, b.affinity_score, b.topology_spread_score) {
            (true, Some(a), Some(t)) => Some((a, t)),
            (true, _, _) => Some((0, 0)),
            _ => None,
        };
        ClusterDecision {
            cluster: b.cluster.clone(),
            selected: true,
            affinity_score: scores.map(|s| s.0),
            topology_spread_score: scores.map(|s| s.1),
            score: None,
            reason: Reason::Picked,
        }
    });
    decisions.extend(current);
    decisions
}

fn pick_fixed(input: &Input, bindings: &mut Bindings) -> Outcome {
    let mut valid = BTreeSet::new();
    let mut invalid = Vec::new();
    for name in &input.policy.cluster_names {
        let position = input.fleet.position(name);
        match position
            .map(|i| &input.fleet.clusters[i])
            .filter(|c| c.fleet_member)
        {
            None => invalid.push(ClusterDecision {
                cluster: ClusterName::new(name),
                selected: false,
                affinity_score: None,
                topology_spread_score: None,
                score: None,
                reason: Reason::text(format!("Specified cluster \"{name}\" is not found")),
            }),
            Some(c) => match eligibility(c) {
                Err(why) => invalid.push(ClusterDecision {
                    cluster: c.name.clone(),
                    selected: false,
                    affinity_score: None,
                    topology_spread_score: None,
                    score: None,
                    reason: Reason::text(format!(
                        "Cluster \"{name}\" is not eligible for resource placement yet: {why}"
                    )),
                }),
                Ok(()) => {
                    valid.extend(position);
                }
            },
        }
    }
    for &i in &valid {
        if !bindings.is_current(i) {
            bindings.pick(i, None);
        }
    }
    bindings.unschedule_obsolete_except(|i| valid.contains(&i));
    let mut decisions = binding_decisions(bindings, false);
    decisions.extend(invalid.iter().cloned());
    Ok((decisions, count_condition(valid.len(), invalid.is_empty())))
}

fn pick_all(input: &Input, bindings: &mut Bindings, cache: &mut Cache) -> Outcome {
    let selectors = Selectors::new(input, cache);
    let feasible = Feasible::new(input, &selectors, cache);
    if let Some((_, e)) = feasible.error {
        return Err(e);
    }
    // KubeFleet wraps every cluster that passed the PickAll filters with a zero `ClusterScore`
    // (pkg/scheduler/framework/framework.go, runAllPluginsForPickAllPlacementType), so its
    // bindings and decisions carry "affinity score: 0, topology spread score: 0".
    bindings.pick_all(&feasible.passed, (0, 0));
    let mut decisions = binding_decisions(bindings, true);
    add_filtered(
        &mut decisions,
        bindings,
        &feasible.dropped,
        MAX_UNSELECTED_DECISIONS,
    );
    let found = bindings.current().count();
    Ok((decisions, count_condition(found, true)))
}

/// Adds decisions for up to `room` clusters the filters dropped, skipping those still bound
/// (IgnoredDuringExecution keeps them, and they have a decision already). `filtered` holds
/// fleet positions.
fn add_filtered(
    decisions: &mut Vec<ClusterDecision>,
    bindings: &Bindings,
    filtered: &[(usize, Filtered)],
    room: usize,
) {
    let slots = MAX_DECISIONS.saturating_sub(decisions.len()).min(room);
    let extra = filtered
        .iter()
        .take(slots)
        .filter(|(i, _)| !bindings.is_current(*i))
        .map(|(i, why)| ClusterDecision {
            cluster: bindings.fleet.clusters[*i].name.clone(),
            selected: false,
            affinity_score: None,
            topology_spread_score: None,
            score: None,
            reason: Reason::text(why.reason()),
        });
    decisions.extend(extra);
}

/// The first of two lists of dropped clusters, each by position, as one list by position (as
/// many as the decisions may list).
fn first_dropped<'c>(
    a: &[(usize, Filtered<'c>)],
    b: &[(usize, Filtered<'c>)],
) -> Vec<(usize, Filtered<'c>)> {
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    std::iter::from_fn(|| match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if y.0 < x.0 => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    })
    .take(MAX_UNSELECTED_DECISIONS)
    .copied()
    .collect()
}

fn pick_n(input: &Input, bindings: &mut Bindings, cache: &mut Cache) -> Outcome {
    let n = input.policy.number_of_clusters.unwrap_or(0).max(0) as usize;
    let present = bindings.current().count();
    let obsolete = bindings
        .iter()
        .filter(|(_, b)| live(b) && b.policy_index != bindings.index)
        .count();
    if n <= present {
        if present - n + obsolete > 0 {
            downscale(bindings, present - n);
        }
        let decisions = binding_decisions(bindings, true);
        return Ok((decisions, count_condition(n.min(present), true)));
    }
    let constraints = &input.policy.topology_spread_constraints;
    let selectors = Selectors::new(input, cache);
    // The static filters and the affinity scores do not change from one cycle to the next: the
    // filters are worked out once, the scores when a cycle first needs them, and an error where
    // the cycles would meet it in order.
    let feasible = Feasible::new(input, &selectors, cache);
    let mut affinities: Vec<Option<i32>> = vec![None; feasible.passed.len()];
    let topology = TopologyDomains::new(input.fleet, constraints, cache);
    let mut last_not_picked: Vec<(&ClusterName, i32, i32)> = Vec::new();
    let mut last_filtered: Vec<(usize, Filtered)> = Vec::new();
    loop {
        let present = bindings.current().count();
        if present >= n {
            break;
        }
        let desired = n - present;
        // PostBatch: any spread constraint limits a cycle to one pick.
        let batch = if constraints.is_empty() { desired } else { 1 };
        let tsc = topology.state(bindings);
        let mut scored: Vec<Scored> = Vec::with_capacity(feasible.passed.len());
        let mut violations: Vec<(usize, Filtered)> = Vec::new();
        for (j, &position) in feasible.passed.iter().enumerate() {
            let position = position as usize;
            if let Some((at, e)) = &feasible.error {
                if position > *at {
                    return Err(e.clone());
                }
            }
            if bindings.is_current(position) {
                continue;
            }
            let topology = match tsc.score(position) {
                Err(constraint) => {
                    if violations.len() < MAX_UNSELECTED_DECISIONS {
                        violations.push((position, Filtered::Topology(constraint)));
                    }
                    continue;
                }
                Ok(t) => t,
            };
            let affinity = match affinities[j] {
                Some(a) => a,
                None => {
                    let c = &input.fleet.clusters[position];
                    *affinities[j].insert(affinity_score(input, &selectors, position, c)?)
                }
            };
            let obsolete = bindings.is_obsolete(position);
            scored.push(Scored::new(position, topology, affinity, obsolete));
        }
        if let Some((_, e)) = feasible.error {
            return Err(e);
        }
        let k = batch.min(scored.len());
        // Only the picks and the best of the rest (listed in the decisions) need an order;
        // The ranking is total (positions are unique), so this is the full sort's prefix.
        let ranked = (k + MAX_UNSELECTED_DECISIONS).min(scored.len());
        if ranked > 0 && ranked < scored.len() {
            scored.select_nth_unstable_by(ranked - 1, Scored::rank);
        }
        scored[..ranked].sort_unstable_by(Scored::rank);
        let picked: Vec<(usize, i32, i32)> = scored[..k]
            .iter()
            .map(|s| (s.position(), s.affinity(), s.topology()))
            .collect();
        last_not_picked = scored[k..ranked]
            .iter()
            .map(|s| {
                let name = &input.fleet.clusters[s.position()].name;
                (name, s.affinity(), s.topology())
            })
            .collect();
        last_filtered = first_dropped(&feasible.dropped, &violations);
        for &(i, affinity, topology) in &picked {
            bindings.pick(i, Some((affinity, topology)));
        }
        bindings.unschedule_obsolete_except(|i| picked.iter().any(|p| p.0 == i));
        // A capped cycle that picked its full batch is requeued at once; otherwise it is done.
        if k < batch || k == 0 || batch == desired {
            break;
        }
    }
    let found = bindings.current().count();
    let mut decisions = binding_decisions(bindings, true);
    let seen: BTreeSet<&str> = decisions.iter().map(|d| d.cluster.as_str()).collect();
    let mut unpicked = Vec::new();
    for &(name, a, t) in last_not_picked
        .iter()
        .filter(|(name, _, _)| !seen.contains(name.as_str()))
    {
        if unpicked.len() == MAX_UNSELECTED_DECISIONS
            || decisions.len() + unpicked.len() >= MAX_DECISIONS
        {
            break;
        }
        unpicked.push(ClusterDecision {
            cluster: name.clone(),
            selected: false,
            affinity_score: Some(a),
            topology_spread_score: Some(t),
            score: None,
            reason: Reason::text(format!(
                "Cluster \"{name}\" does not score high enough (affinity score: {a}, topology spread score: {t})"
            )),
        });
    }
    let room = MAX_UNSELECTED_DECISIONS - unpicked.len();
    decisions.extend(unpicked);
    add_filtered(&mut decisions, bindings, &last_filtered, room);
    Ok((decisions, count_condition(found, found >= n)))
}

/// Removes `count` current bindings: all scheduled before bound, lowest score first (no score
/// lowest of all), then the smaller name. Obsolete bindings are unscheduled first.
fn downscale(bindings: &mut Bindings, count: usize) {
    bindings.unschedule_obsolete_except(|_| false);
    let mut current: Vec<(usize, &Binding)> = bindings.current().collect();
    current.sort_by(|(_, a), (_, b)| {
        let state_rank = |s: BindingState| if s == BindingState::Scheduled { 0 } else { 1 };
        let score = |b: &Binding| match (b.topology_spread_score, b.affinity_score) {
            (Some(t), Some(a)) => Some((t, a)),
            _ => None,
        };
        state_rank(a.state)
            .cmp(&state_rank(b.state))
            .then_with(|| score(a).cmp(&score(b)))
            .then_with(|| a.cluster.cmp(&b.cluster))
    });
    let dropped: Vec<usize> = current.into_iter().take(count).map(|(i, _)| i).collect();
    for i in dropped {
        if let Some(b) = bindings.get_mut(i) {
            Bindings::unschedule(b);
        }
    }
}
