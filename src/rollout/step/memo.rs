//! The memo of settled placements' steps: what each was worked out from, so that a later step
//! with the same inputs reuses it instead of rendering and planning the placement again.

use crate::fast_hash::{HashMap, HashSet};
use std::sync::Arc;

use super::{Pacing, StepSummary};
use crate::catalog::Catalog;
use crate::model::PlacementKey;
use crate::rollout::rolling::BindingHealth;
use crate::rollout::state::PlacementState;
use crate::schedule::{same_schedule, Fleet, PlacementSchedule};

/// The steps of settled placements, kept from one step to the next with what each was worked
/// out from: a later step whose inputs for the placement are the same (the
/// placement, its selected resources' hash, its schedule and its state, and the commit's
/// overrides, clusters and scopes) takes the same decision, so it is reused instead of
/// rendering and planning the placement again. Only placements that are settled are kept
/// (nothing to push, nothing waiting, every binding available and not marked for a re-check),
/// so a reused decision never depends on the clock or on what members answer.
#[derive(Debug, Default)]
pub struct StepMemo {
    context: Option<MemoContext>,
    /// The commit the settled steps were taken for: within one commit a placement's spec and
    /// selected resources cannot change, so they are not selected and hashed again.
    commit: Option<String>,
    settled: HashMap<PlacementKey, Settled>,
    reused: usize,
    /// The number of the last settled step recorded ([`StepSummary::settled`]).
    generations: u64,
}

impl StepMemo {
    /// Placements whose step was reused by the last step.
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// Starts a step of `commit` of `cat` over `fleet`: what was worked out under other
    /// overrides, clusters or scopes is forgotten. Whether the commit is the last step's.
    pub(super) fn start(&mut self, cat: &Catalog, fleet: &Fleet, commit: &str) -> bool {
        if !self.context.as_ref().is_some_and(|c| c.matches(cat, fleet)) {
            self.settled.clear();
            self.context = Some(MemoContext::of(cat, fleet));
        }
        let same_commit = self.commit.as_deref() == Some(commit);
        self.commit = Some(commit.to_string());
        self.reused = 0;
        same_commit
    }

    /// The settled step of `key`, taken again, when it still holds at `pacing` for this
    /// schedule and state and `also` says the rest of its inputs are this step's. Its history
    /// and abandon flag are the state's (a settled step takes no new snapshot), so the ledger
    /// records nothing for it.
    pub(super) fn reuse(
        &mut self,
        key: &PlacementKey,
        pacing: Pacing,
        ps: &Arc<PlacementSchedule>,
        prev: &Arc<PlacementState>,
        also: impl Fn(&Settled) -> bool,
    ) -> Option<Arc<StepSummary>> {
        let m = self
            .settled
            .get(key)
            .filter(|m| also(m) && m.holds(pacing, ps, prev))?;
        self.reused += 1;
        Some(m.summary.clone())
    }

    /// Keeps `step` for the next steps when it is `settled` (numbered: [`StepSummary::settled`];
    /// the closure gives what it was worked out from), else forgets the placement's.
    pub(super) fn remember(
        &mut self,
        key: &PlacementKey,
        mut step: StepSummary,
        settled: Option<impl FnOnce(Arc<StepSummary>) -> Settled>,
    ) -> Arc<StepSummary> {
        // Kept until the placement's next step: without the room its filling left over.
        step.shrink_to_fit();
        let Some(settled) = settled else {
            self.forget(key);
            return Arc::new(step);
        };
        self.generations += 1;
        step.settled = Some(self.generations);
        // One summary for the decision and the memo (a copy is large in a large fleet).
        let step = Arc::new(step);
        self.settled.insert(key.clone(), settled(step.clone()));
        step
    }

    /// Forgets the placement's settled step.
    pub(super) fn forget(&mut self, key: &PlacementKey) {
        self.settled.remove(key);
    }

    /// Forgets the settled steps of placements not in `scheduled`.
    pub(super) fn keep_only(&mut self, scheduled: &HashSet<&PlacementKey>) {
        self.settled.retain(|k, _| scheduled.contains(k));
    }
}

/// What every placement's step reads besides its own inputs.
#[derive(Debug)]
struct MemoContext {
    cluster_overrides: Vec<crate::model::overrides::ClusterResourceOverride>,
    resource_overrides: Vec<crate::model::overrides::ResourceOverride>,
    clusters: Vec<(String, crate::model::selector::Labels)>,
    scopes: crate::model::scope::ScopeTable,
}

impl MemoContext {
    fn of(cat: &Catalog, fleet: &Fleet) -> MemoContext {
        MemoContext {
            cluster_overrides: cat
                .cluster_overrides
                .iter()
                .map(|e| e.spec.clone())
                .collect(),
            resource_overrides: cat
                .resource_overrides
                .iter()
                .map(|e| e.spec.clone())
                .collect(),
            clusters: fleet
                .clusters
                .iter()
                .map(|c| (c.name.to_string(), c.labels.clone()))
                .collect(),
            scopes: cat.scopes.clone(),
        }
    }

    /// Whether this is [`MemoContext::of`] `cat` and `fleet`, without copying them (every look
    /// asks; the answer is nearly always yes).
    fn matches(&self, cat: &Catalog, fleet: &Fleet) -> bool {
        fn same<A, B>(a: &[A], b: &[B], eq: impl Fn(&A, &B) -> bool) -> bool {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| eq(a, b))
        }
        same(&self.cluster_overrides, &cat.cluster_overrides, |a, e| {
            *a == e.spec
        }) && same(&self.resource_overrides, &cat.resource_overrides, |a, e| {
            *a == e.spec
        }) && same(&self.clusters, &fleet.clusters, |(name, labels), c| {
            *name == c.name && *labels == c.labels
        }) && self.scopes == cat.scopes
    }
}

/// A settled placement's step and its inputs.
#[derive(Debug)]
pub(super) struct Settled {
    /// The pacing it was stepped at (only rolling steps are kept: the others read inputs the
    /// memo does not hold); with the same commit, the same pacing is the same pace.
    pub(super) pacing: Pacing,
    /// The placement object and the values it selected, kept (so their addresses stay
    /// theirs): the same ones are the same placement and the same resource snapshot.
    pub(super) source: Arc<serde_json::Value>,
    pub(super) selected: Vec<Arc<serde_json::Value>>,
    pub(super) placement: crate::model::placement::Placement,
    pub(super) resource_snapshot: crate::model::SharedText,
    pub(super) schedule: Arc<PlacementSchedule>,
    /// Shared with the rollout state it was taken from (not a copy of every cluster's state).
    pub(super) state: Arc<PlacementState>,
    pub(super) summary: Arc<StepSummary>,
}

impl Settled {
    /// Whether it still holds at `pacing` for this schedule and state (the caller checks what
    /// else it was worked out from).
    pub(super) fn holds(
        &self,
        pacing: Pacing,
        ps: &Arc<PlacementSchedule>,
        prev: &Arc<PlacementState>,
    ) -> bool {
        self.pacing == pacing && same_schedule(&self.schedule, ps) && same_state(&self.state, prev)
    }

    /// Whether it was worked out from the very same placement object selecting the very same
    /// objects (an unchanged file's, shared from the last commit): the same snapshot, known
    /// without hashing it again.
    pub(super) fn same_objects(
        &self,
        source: &Arc<serde_json::Value>,
        resources: &[crate::snapshot::SelectedResource],
    ) -> bool {
        Arc::ptr_eq(&self.source, source)
            && self.selected.len() == resources.len()
            && self
                .selected
                .iter()
                .zip(resources.iter())
                .all(|(a, r)| Arc::ptr_eq(a, &r.value))
    }

    /// Whether it was worked out from an equal placement with the same resource snapshot.
    pub(super) fn same_snapshot(
        &self,
        resource_snapshot: &str,
        placement: &crate::model::placement::Placement,
    ) -> bool {
        *self.resource_snapshot == *resource_snapshot && self.placement == *placement
    }
}

/// The same placement state: the same shared value (unchanged since), or an equal one.
fn same_state(a: &Arc<PlacementState>, b: &Arc<PlacementState>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// Whether a rolling step is settled, so it may be kept: no work, no new snapshot, nothing
/// moving or waiting, nothing that cannot be rendered, and every binding available and not
/// marked for a re-check (a kept step must not depend on the clock or on what members answer).
pub(super) fn is_settled(
    step: &StepSummary,
    work: &[crate::rollout::work::Work],
    new_snapshot: bool,
    prev: &PlacementState,
) -> bool {
    work.is_empty()
        && !new_snapshot
        && !step.is_moving()
        && step.requeue_after == 0
        && step.render_errors.is_empty()
        && prev
            .clusters
            .values()
            .all(|c| c.health == BindingHealth::Available && !c.is_marked())
}
