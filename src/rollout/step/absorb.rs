//! The work's outcomes folded back into the rollout state and the schedule's bindings.

use crate::fast_hash::HashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::render::ids_of;
use super::Ledger;
use crate::model::{ClusterName, ObjectKey, PlacementKey};
use crate::rollout::rolling::BindingHealth;
use crate::rollout::state::{ClusterState, PlacementState, RolloutState};
use crate::rollout::work::{Action, Outcome, Work};
use crate::schedule::{BindingState, Fleet, PlacementSchedule};

/// Shares `objects` with an equal set the placement holds: the cluster's own (`before`: a
/// push that found it as it was), else one of a few distinct sets of its other clusters (each
/// delivery is absorbed on its own, one member at a time: the clusters of a placement
/// rendered alike would otherwise each keep their own copy).
fn share_equal_set(
    objects: &mut Arc<BTreeSet<ObjectKey>>,
    before: Option<&ClusterState>,
    ps: &PlacementState,
) {
    const LOOKS: usize = 4;
    let held = before.into_iter().chain(ps.clusters.values());
    let mut seen: Vec<&Arc<BTreeSet<ObjectKey>>> = Vec::with_capacity(LOOKS);
    for other in held.map(|c| &c.objects) {
        if seen.iter().any(|s| Arc::ptr_eq(s, other)) {
            continue;
        }
        if *other == *objects {
            *objects = other.clone();
            return;
        }
        seen.push(other);
        if seen.len() == LOOKS {
            return;
        }
    }
}

/// Where the bindings of a schedule's placements are: by placement key, and within a
/// placement by cluster, each found on first use. A look absorbs its deliveries one after
/// another, each one member's, so it meets every placement once per member: scanning a
/// placement's bindings for each result cost a look members × bindings. Valid for one schedule
/// slice, whose placements keep their places (their contents may change).
///
/// It also names the clusters of new entries: from a [`NameSource`] (the fleet's names), which
/// every entry of a cluster then shares (the state keeps an entry per binding); without one, or
/// for a cluster it does not hold, by a name of the entry's own.
#[derive(Default)]
pub struct BindingIndex {
    placements: Option<HashMap<PlacementKey, Vec<usize>>>,
    clusters: HashMap<usize, HashMap<String, Vec<usize>>>,
    names: Option<Arc<dyn NameSource>>,
}

/// Where the clusters' shared names are found.
pub trait NameSource: Send + Sync {
    fn shared_name(&self, cluster: &str) -> Option<ClusterName>;
}

impl NameSource for Fleet {
    fn shared_name(&self, cluster: &str) -> Option<ClusterName> {
        self.get(cluster).map(|c| c.name.clone())
    }
}

/// Names sorted by their text.
impl NameSource for Vec<ClusterName> {
    fn shared_name(&self, cluster: &str) -> Option<ClusterName> {
        let at = self.binary_search_by(|n| n.as_str().cmp(cluster)).ok()?;
        Some(self[at].clone())
    }
}

impl BindingIndex {
    /// An index whose new entries share the names `names` holds.
    pub fn naming_from(names: Option<Arc<dyn NameSource>>) -> BindingIndex {
        BindingIndex {
            names,
            ..BindingIndex::default()
        }
    }

    /// `cluster`'s name for a new entry.
    fn name(&self, cluster: &str) -> ClusterName {
        self.names
            .as_ref()
            .and_then(|n| n.shared_name(cluster))
            .unwrap_or_else(|| ClusterName::new(cluster))
    }

    /// The places of the placements named `key` (one, unless a caller's schedule repeats it).
    fn placements(
        &mut self,
        schedule: &[Arc<PlacementSchedule>],
        key: &PlacementKey,
    ) -> Vec<usize> {
        let placements = self.placements.get_or_insert_with(|| {
            let mut at: HashMap<PlacementKey, Vec<usize>> = HashMap::default();
            for (i, p) in schedule.iter().enumerate() {
                at.entry(p.key.clone()).or_default().push(i);
            }
            at
        });
        placements.get(key).cloned().unwrap_or_default()
    }

    /// The places of `cluster`'s bindings in the placement at `at`.
    fn bindings(
        &mut self,
        schedule: &[Arc<PlacementSchedule>],
        at: usize,
        cluster: &str,
    ) -> &[usize] {
        self.clusters
            .entry(at)
            .or_insert_with(|| {
                let mut by: HashMap<String, Vec<usize>> = HashMap::default();
                for (i, b) in schedule[at].bindings.iter().enumerate() {
                    by.entry(b.cluster.to_string()).or_default().push(i);
                }
                by
            })
            .get(cluster)
            .map_or(&[], Vec::as_slice)
    }

    /// The first placement named `key` with a binding of `cluster` in `state`, and where its
    /// bindings of `cluster` are.
    fn find(
        &mut self,
        schedule: &[Arc<PlacementSchedule>],
        key: &PlacementKey,
        cluster: &str,
        state: BindingState,
    ) -> Option<(usize, Vec<usize>)> {
        self.placements(schedule, key).into_iter().find_map(|at| {
            let places = self.bindings(schedule, at, cluster);
            places
                .iter()
                .any(|&i| schedule[at].bindings[i].state == state)
                .then(|| (at, places.to_vec()))
        })
    }

    /// The placement at `at` lost bindings: its places are found again on next use.
    fn forget(&mut self, at: usize) {
        self.clusters.remove(&at);
    }
}

/// Folds the outcomes of the work into the state and the schedule's bindings: applied clusters
/// record their revision and health and become Bound; removed ones leave both.
pub fn absorb(
    state: &mut RolloutState,
    schedule: &mut [Arc<PlacementSchedule>],
    ledger: Ledger,
    results: Vec<(Work, Outcome)>,
    commit: &str,
    now: u64,
) {
    let mut index = BindingIndex::default();
    absorb_indexed(state, schedule, &mut index, ledger, results, commit, now);
}

/// [`absorb`], with the places of the bindings kept in `index` from one call to the next on
/// the same `schedule`.
pub fn absorb_indexed(
    state: &mut RolloutState,
    schedule: &mut [Arc<PlacementSchedule>],
    index: &mut BindingIndex,
    ledger: Ledger,
    results: Vec<(Work, Outcome)>,
    commit: &str,
    now: u64,
) {
    // Written only where they change: a placement's state is shared, and copied on write.
    for (key, history) in ledger.histories {
        let ps = state.placements.entry(key).or_default();
        if ps.resources != history {
            Arc::make_mut(ps).resources = history;
        }
    }
    for (key, abandon) in ledger.abandon {
        let ps = state.placements.entry(key).or_default();
        if ps.abandon != abandon {
            Arc::make_mut(ps).abandon = abandon;
        }
    }
    for (key, run) in ledger.runs {
        match run {
            Some(r) => {
                state.ended_runs.remove(&key);
                state.runs.insert(key, r);
            }
            None => {
                state.runs.remove(&key);
                state.ended_runs.insert(key);
            }
        }
    }
    let mut object_sets: HashMap<usize, Arc<BTreeSet<ObjectKey>>> = HashMap::default();
    // One for every cluster this delivery pushed to, not one per binding.
    let commit = crate::model::SharedText::from(commit);
    for (work, outcome) in results {
        let key = &work.placement;
        let ps: &mut PlacementState =
            Arc::make_mut(state.placements.entry(key.clone()).or_default());
        match (work.action, outcome) {
            (
                Action::Apply {
                    revision,
                    binds,
                    manifests,
                    delivered_by,
                    ..
                },
                Outcome::Done(health, observed),
            ) => {
                // One set per rendering: clusters given the same manifests share it.
                let objects = object_sets
                    .entry(Arc::as_ptr(&manifests) as usize)
                    .or_insert_with(|| ids_of(&manifests))
                    .clone();
                let mut pushed = ClusterState {
                    objects,
                    revision: Some(revision),
                    details: crate::rollout::Details::new(crate::rollout::DetailFields {
                        diffs: observed.diffs,
                        not_available: observed.not_available,
                        work_status: observed.work_status.map(Arc::new),
                        ..Default::default()
                    }),
                    commit: Some(commit.clone()),
                    health,
                    recheck: None,
                    drift: false,
                    reread: false,
                    delivered_by,
                    updated_at: now,
                };
                // A push that confirmed what the cluster had (a re-check's, a restart's) is no
                // change of the entry: it keeps the commit that delivered the revision and its
                // time, and the state stays as saved.
                let before = ps.clusters.get(&work.cluster);
                share_equal_set(&mut pushed.objects, before, ps);
                if let Some(before) = before {
                    if before.revision == pushed.revision && before.commit.is_some() {
                        pushed.commit.clone_from(&before.commit);
                    }
                    if before.same_but_for_time_and_recheck(&pushed) {
                        pushed.updated_at = before.updated_at;
                    }
                }
                match ps.clusters.get_mut(&work.cluster) {
                    Some(entry) => *entry = pushed,
                    None => {
                        ps.clusters.insert(index.name(&work.cluster), pushed);
                    }
                }
                if binds {
                    // Only a binding still Scheduled: the daemon absorbs results that may come
                    // after a later schedule unscheduled the cluster, which must stay so.
                    let scheduled = BindingState::Scheduled;
                    if let Some((at, places)) = index.find(schedule, key, &work.cluster, scheduled)
                    {
                        // Copied on write: the schedule may be shared with the scheduler's memo.
                        let p = Arc::make_mut(&mut schedule[at]);
                        for i in places {
                            if p.bindings[i].state == scheduled {
                                p.bindings[i].state = BindingState::Bound;
                            }
                        }
                    }
                }
            }
            (Action::Remove { .. }, Outcome::Done(..)) => {
                ps.clusters.remove(&work.cluster);
                let unscheduled = BindingState::Unscheduled;
                if let Some((at, _)) = index.find(schedule, key, &work.cluster, unscheduled) {
                    Arc::make_mut(&mut schedule[at])
                        .bindings
                        .retain(|b| !(b.cluster == work.cluster && b.state == unscheduled));
                    index.forget(at);
                }
            }
            (action, Outcome::Failed(message)) => {
                let failed = || ClusterState {
                    objects: Default::default(),
                    revision: None,
                    details: Default::default(),
                    commit: None,
                    health: BindingHealth::Failed,
                    recheck: None,
                    drift: false,
                    reread: false,
                    delivered_by: None,
                    updated_at: now,
                };
                let name = |cluster: &str| index.name(cluster);
                let entry = ps.clusters.get_or_insert_named(&work.cluster, name, failed);
                entry.health = BindingHealth::Failed;
                if let Action::Apply { revision, .. } = action {
                    entry.details.make_mut().attempted = Some(revision);
                }
                entry.details.make_mut().last_error = Some(message);
                entry.updated_at = now;
            }
        }
    }
    // An ended run is remembered only while a cluster still names it as its deliverer.
    if !state.ended_runs.is_empty() {
        let named: BTreeSet<&str> = state
            .placements
            .values()
            .flat_map(|ps| ps.clusters.values())
            .filter_map(|c| c.delivered_by.as_ref())
            .map(|d| d.run.as_str())
            .collect();
        let ended = std::mem::take(&mut state.ended_runs);
        state.ended_runs = ended
            .into_iter()
            .filter(|k| named.contains(k.as_str()))
            .collect();
    }
    // A placement with nothing left on any cluster and gone from the commit is forgotten. The
    // set of live keys is built only when one could be (most looks have none, and building it
    // and looking every placement up in it is a real share of a settled look).
    if state.placements.values().any(|ps| ps.clusters.is_empty()) {
        let live: BTreeSet<&PlacementKey> = schedule.iter().map(|p| &p.key).collect();
        state
            .placements
            .retain(|key, ps| live.contains(key) || !ps.clusters.is_empty());
    }
}
