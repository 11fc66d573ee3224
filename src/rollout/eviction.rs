//! KubeFleet's `ClusterResourcePlacementEviction`, carried out once, within the
//! `ClusterResourcePlacementDisruptionBudget` of its placement: whether an eviction is valid,
//! whether it executes, its `Valid` and `Executed` conditions with KubeFleet's reasons and
//! messages, and what it does to the placement's bindings.
//!
//! An eviction is judged once, at the first step of a commit that has it (KubeFleet judges it
//! once, when it is created): its outcome is recorded ([`EvictionRecord`], kept in the rollout
//! state under the eviction's name) and never judged again while the repository keeps the
//! eviction — an executed one does not evict again, a blocked one (`Executed=False`) stays
//! blocked and an invalid one stays invalid, as KubeFleet's terminal conditions say. To try
//! again, commit an eviction of another name (or remove it, and add it back in a later commit).
//! Removing the eviction from the repository forgets its record.
//!
//! Executing an eviction unschedules the binding (KubeFleet deletes it): the step removes the
//! placement's resources from the cluster as from any cluster that lost the placement, and the
//! scheduler, which runs after, sees the cluster free — PickN may pick another cluster (or the
//! same one again), PickAll picks it again unless it is tainted, as KubeFleet's scheduler does.
//!
//! Pure: the catalog, the bindings and the clusters' health in, records and bindings out. It
//! must not know where the records are kept or how they are shown.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::rolling::BindingHealth;
use super::RolloutState;
use crate::catalog::Catalog;
use crate::model::placement::{IntOrPercent, PlacementPolicy, PlacementType};
use crate::model::staged::PlacementDisruptionBudgetSpec;
use crate::model::{PlacementKey, PlacementKind};
use crate::schedule::{Binding, BindingState, Condition, Previous};

pub const VALID: &str = "Valid";
pub const EXECUTED: &str = "Executed";
pub const VALID_REASON: &str = "ClusterResourcePlacementEvictionValid";
pub const INVALID_REASON: &str = "ClusterResourcePlacementEvictionInvalid";
pub const EXECUTED_REASON: &str = "ClusterResourcePlacementEvictionExecuted";
pub const NOT_EXECUTED_REASON: &str = "ClusterResourcePlacementEvictionNotExecuted";

pub const INVALID_MISSING_CRP: &str =
    "Failed to find ClusterResourcePlacement targeted by eviction";
pub const INVALID_PICK_FIXED_CRP: &str =
    "Found ClusterResourcePlacement with PickFixed placement type targeted by eviction";
pub const INVALID_MISSING_CRB: &str =
    "Failed to find scheduler decision for placement in cluster targeted by eviction";
pub const VALID_MESSAGE: &str = "Eviction is valid";
pub const ALLOWED_NO_PDB: &str =
    "Eviction is allowed, no ClusterResourcePlacementDisruptionBudget specified";
pub const ALLOWED_PLACEMENT_FAILED: &str = "Eviction is allowed, placement has failed";
pub const BLOCKED_MISCONFIGURED_PDB: &str = "Eviction is blocked by misconfigured ClusterResourcePlacementDisruptionBudget, either MaxUnavailable is specified or MinAvailable is specified as a percentage for PickAll ClusterResourcePlacement";
pub const BLOCKED_MISSING_PLACEMENT: &str =
    "Eviction is blocked, placement has not propagated resources to target cluster yet";

fn allowed_by_pdb(available: usize, total: usize) -> String {
    format!("Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: {available}, totalPlacements: {total}")
}

fn blocked_by_pdb(available: usize, total: usize) -> String {
    format!("Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: {available}, totalPlacements: {total}")
}

/// What became of one eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `Valid=False`: the placement or its binding to the cluster is not there, or the
    /// placement is PickFixed.
    Invalid(&'static str),
    /// `Valid=True`, `Executed=False`: the placement has not reached the cluster, or the budget
    /// does not allow it.
    Blocked(String),
    /// `Valid=True`, `Executed=True`: the binding is unscheduled.
    Executed(String),
}

impl Verdict {
    /// The eviction's status conditions, as KubeFleet sets them.
    pub fn conditions(&self) -> Vec<Condition> {
        let valid = Condition::new(VALID, true, VALID_REASON, VALID_MESSAGE);
        match self {
            Verdict::Invalid(m) => vec![Condition::new(VALID, false, INVALID_REASON, *m)],
            Verdict::Blocked(m) => vec![
                valid,
                Condition::new(EXECUTED, false, NOT_EXECUTED_REASON, m.clone()),
            ],
            Verdict::Executed(m) => vec![
                valid,
                Condition::new(EXECUTED, true, EXECUTED_REASON, m.clone()),
            ],
        }
    }
}

/// The recorded outcome of one eviction (by the eviction's name in [`RolloutState::evictions`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionRecord {
    pub placement_name: String,
    pub cluster_name: String,
    pub conditions: Vec<Condition>,
}

impl EvictionRecord {
    /// Did it unschedule its binding?
    pub fn executed(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == EXECUTED && c.status == "True")
    }
}

/// The placement an eviction names, as the decision needs it.
pub struct Target<'a> {
    /// The defaulted policy.
    pub policy: &'a PlacementPolicy,
    /// All its bindings, unscheduled ones included (KubeFleet counts every binding).
    pub bindings: &'a [Binding],
    /// The health of what the placement last gave a cluster; `None`: nothing yet.
    pub health: &'a dyn Fn(&str) -> Option<BindingHealth>,
    /// The disruption budget of the same name, if any.
    pub budget: Option<&'a PlacementDisruptionBudgetSpec>,
}

/// KubeFleet's decision (clusterresourceplacementeviction controller: validateEviction, then
/// executeEviction) for an eviction of `cluster` from `target` (`None`: no such placement).
pub fn decide(target: Option<&Target>, cluster: &str) -> Verdict {
    let Some(t) = target else {
        return Verdict::Invalid(INVALID_MISSING_CRP);
    };
    if t.policy.placement_type == PlacementType::PickFixed {
        return Verdict::Invalid(INVALID_PICK_FIXED_CRP);
    }
    // The scheduler keeps one binding per cluster: KubeFleet's "more than one scheduler
    // decision" cannot happen here.
    let Some(binding) = t.bindings.iter().find(|b| b.cluster == cluster) else {
        return Verdict::Invalid(INVALID_MISSING_CRB);
    };
    if !placement_present(binding) {
        return Verdict::Blocked(BLOCKED_MISSING_PLACEMENT.into());
    }
    // A failed binding (or one that only reports differences) has nothing to keep available.
    if matches!(
        (t.health)(cluster),
        Some(BindingHealth::Failed | BindingHealth::DiffReported)
    ) {
        return Verdict::Executed(ALLOWED_PLACEMENT_FAILED.into());
    }
    let Some(budget) = t.budget else {
        return Verdict::Executed(ALLOWED_NO_PDB.into());
    };
    if t.policy.placement_type == PlacementType::PickAll
        && (budget.max_unavailable.is_some()
            || matches!(budget.min_available, Some(IntOrPercent::String(_))))
    {
        return Verdict::Blocked(BLOCKED_MISCONFIGURED_PDB.into());
    }
    let total = t.bindings.len();
    let (allowed, available) = allowed(t, budget);
    if allowed {
        Verdict::Executed(allowed_by_pdb(available, total))
    } else {
        Verdict::Blocked(blocked_by_pdb(available, total))
    }
}

/// KubeFleet's IsPlacementPresent: bound, or unscheduled from bound.
fn placement_present(b: &Binding) -> bool {
    match b.state {
        BindingState::Bound => true,
        BindingState::Unscheduled => b.previous_state == Some(BindingState::Bound),
        BindingState::Scheduled => false,
    }
}

/// Is a binding `Available=True`? KubeFleet sets it for untrackable objects too.
fn available(health: Option<BindingHealth>) -> bool {
    matches!(
        health,
        Some(BindingHealth::Available | BindingHealth::AvailableUntrackable { .. })
    )
}

/// KubeFleet's isEvictionAllowed: whether one more disruption fits the budget, and how many
/// bindings are available.
fn allowed(t: &Target, budget: &PlacementDisruptionBudgetSpec) -> (bool, usize) {
    let available = t
        .bindings
        .iter()
        .filter(|b| available((t.health)(&b.cluster)))
        .count() as i64;
    // KubeFleet knows the desired count of PickN only (PickFixed never gets here).
    let desired = match t.policy.placement_type {
        PlacementType::PickN => i64::from(t.policy.number_of_clusters.unwrap_or(0)),
        _ => 0,
    };
    let total = t.bindings.len() as i64;
    let disruptions = match (&budget.max_unavailable, &budget.min_available) {
        (Some(max), _) => max.scaled_up(desired).unwrap_or(0) - (total - available),
        (None, Some(min)) => {
            let min = match (t.policy.placement_type, min) {
                // Validation allows PickAll integers only.
                (PlacementType::PickAll, IntOrPercent::Int(i)) => *i,
                _ => min.scaled_up(desired).unwrap_or(0),
            };
            available - min
        }
        (None, None) => 0,
    };
    (disruptions > 0, available as usize)
}

/// One eviction judged at this step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub name: String,
    pub placement: PlacementKey,
    pub cluster: String,
    pub verdict: Verdict,
}

/// The evictions of `cat` judged against `previous` (the bindings the scheduler starts from)
/// and `state` (the clusters' health; its records say which evictions are judged already).
/// Returns the records to keep (those of evictions still in `cat`, and the new ones) and the
/// evictions judged now; the executed ones' bindings are unscheduled in `previous`.
pub fn evict(
    cat: &Catalog,
    previous: &mut Previous,
    state: &RolloutState,
) -> (BTreeMap<String, EvictionRecord>, Vec<Judged>) {
    let (records, judged) = judge_all(cat, previous, state);
    unschedule(previous, &judged);
    (records, judged)
}

/// [`evict`]'s verdicts, without acting on them.
fn judge_all(
    cat: &Catalog,
    previous: &Previous,
    state: &RolloutState,
) -> (BTreeMap<String, EvictionRecord>, Vec<Judged>) {
    let mut records = BTreeMap::new();
    let mut judged = Vec::new();
    for e in &cat.evictions {
        let name = &e.spec.metadata.name;
        let spec = &e.spec.spec;
        if let Some(r) = state.evictions.get(name) {
            records.insert(name.clone(), r.clone());
            continue;
        }
        let verdict = judge(
            cat,
            previous,
            state,
            &spec.placement_name,
            &spec.cluster_name,
        );
        records.insert(
            name.clone(),
            EvictionRecord {
                placement_name: spec.placement_name.clone(),
                cluster_name: spec.cluster_name.clone(),
                conditions: verdict.conditions(),
            },
        );
        judged.push(Judged {
            name: name.clone(),
            placement: e.spec.placement_key(),
            cluster: spec.cluster_name.clone(),
            verdict,
        });
    }
    (records, judged)
}

/// The bindings of the executed evictions unscheduled (KubeFleet deletes them).
fn unschedule(previous: &mut Previous, judged: &[Judged]) {
    for j in judged {
        if !matches!(j.verdict, Verdict::Executed(_)) {
            continue;
        }
        if let Some(s) = previous.get_mut(&j.placement) {
            let s = Arc::make_mut(s);
            if let Some(b) = s.bindings.iter_mut().find(|b| b.cluster == j.cluster) {
                // Unscheduled without a state to go back to: picked again, it starts over.
                b.state = BindingState::Unscheduled;
                b.previous_state = None;
            }
        }
    }
}

/// The evictions `head` brings, judged as the daemon would judge them at its first step of
/// `head`, for `gitfleet plan`; the executed ones' bindings are unscheduled in `previous` (the
/// base's schedule, which the head is scheduled from). With the daemon's `rollout` state, its
/// records and the clusters' health count. Without it, the evictions of `base` count as judged
/// already and the base as rolled out: every binding scheduled or bound to a cluster is taken
/// as bound there, and available.
pub fn preview(
    base: &Catalog,
    head: &Catalog,
    previous: &mut Previous,
    rollout: Option<&RolloutState>,
) -> Vec<Judged> {
    if head.evictions.is_empty() {
        return Vec::new();
    }
    let judged = match rollout {
        Some(state) => judge_all(head, previous, state).1,
        None => {
            let (settled, state) = settled(base, head, previous);
            judge_all(head, &settled, &state).1
        }
    };
    unschedule(previous, &judged);
    judged
}

/// The base rolled out, as far as `head`'s evictions look: the placements they name with
/// every live binding bound and available, and the base's evictions recorded.
fn settled(base: &Catalog, head: &Catalog, previous: &Previous) -> (Previous, RolloutState) {
    let mut state = RolloutState::default();
    for e in &base.evictions {
        let record = EvictionRecord {
            placement_name: e.spec.spec.placement_name.clone(),
            cluster_name: e.spec.spec.cluster_name.clone(),
            conditions: vec![],
        };
        state.evictions.insert(e.spec.metadata.name.clone(), record);
    }
    let mut settled = Previous::new();
    for e in &head.evictions {
        let key = e.spec.placement_key();
        let Some(s) = previous.get(&key) else {
            continue;
        };
        let mut s = (**s).clone();
        let mut ps = super::PlacementState::default();
        for b in &mut s.bindings {
            if b.state == BindingState::Unscheduled {
                continue;
            }
            b.state = BindingState::Bound;
            ps.clusters.insert(
                b.cluster.clone(),
                super::ClusterState::with_health(BindingHealth::Available),
            );
        }
        state.placements.insert(key.clone(), Arc::new(ps));
        settled.insert(key, Arc::new(s));
    }
    (settled, state)
}

/// One eviction's verdict from the commit's placement and budget of that name.
fn judge(
    cat: &Catalog,
    previous: &Previous,
    state: &RolloutState,
    placement: &str,
    cluster: &str,
) -> Verdict {
    let Some(entry) = cat
        .placement(placement, None)
        .filter(|p| p.spec.kind == PlacementKind::ClusterResourcePlacement)
    else {
        return decide(None, cluster);
    };
    let key = cat.placement_key(entry);
    let policy = entry.spec.spec.policy_or_default();
    let bindings = previous
        .get(&key)
        .map(|s| s.bindings.as_slice())
        .unwrap_or_default();
    let clusters = state.placements.get(&key);
    let health = |c: &str| clusters.and_then(|p| p.clusters.get(c)).map(|c| c.health);
    let budget = cat
        .disruption_budgets
        .iter()
        .find(|b| b.spec.metadata.name == placement)
        .map(|b| &b.spec.spec);
    let target = Target {
        policy: &policy,
        bindings,
        health: &health,
        budget,
    };
    decide(Some(&target), cluster)
}

#[cfg(test)]
mod tests;
