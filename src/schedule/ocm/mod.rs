//! OCM `Placement` scheduling, to the letter of OCM's scheduler (pkg/placement in open-cluster-management-io/ocm): candidate clusters from the
//! ManagedClusterSets bound into the placement's namespace; the `Predicate` and
//! `TaintToleration` filters; the Balance, Steady, ResourceAllocatableCPU/Memory and AddOn
//! prioritizers with their weights and modes; the stable sort (total score, then name) and
//! top-k; decision groups; the `PlacementSatisfied` and `PlacementMisconfigured` conditions with
//! OCM's strings; and the PlacementDecision objects (see [`placement_decisions`]).
//!
//! Where Git replaces the hub:
//! - PlacementDecisions on the hub are the results of the previous run (`Previous`) and of the
//!   placements already scheduled in this run: Steady and the NoSelectIfNew taint read the
//!   placement's own previous selection; Balance counts every *other* OCM placement's selection.
//! - A cluster's claims are its properties (inventory and `gitfleet.io/properties`).
//! - `status.allocatable` / `status.capacity` are the properties
//!   `resources.kubernetes-fleet.io/allocatable-{cpu,memory}` / `…/total-{cpu,memory}`.
//! - AddOnPlacementScores are the inventory's `addOnScores`, by `scoreName` (the inventory has no
//!   `resourceName` and no `validUntil`, so scores never expire).
//! - The hub taints an unavailable cluster `cluster.open-cluster-management.io/unreachable`
//!   (NoSelect). gitfleet does the same for a cluster the inventory reports unhealthy; as the
//!   moment it became unhealthy is unknown, a `tolerationSeconds` toleration of it has run out.
//! - A taint without `timeAdded` counts from the zero time, as in OCM: a toleration with
//!   `tolerationSeconds` of it has run out.
//! - CEL cluster selectors are evaluated as OCM does (see the `cel` module for what differs).
//!
//! - Rules OCM's hub admits but its scheduler rejects (tolerations, prioritizers, decision group
//!   sizes, CEL; list in `model::ocm`) are checked here, never at validation: they make that one
//!   placement `PlacementMisconfigured=True` with no decisions, and every other placement is
//!   scheduled as usual.
//!
//! Pure: the fleet, the previous results and the clock are parameters. It must not know how a
//! selection is rolled out or applied.

pub(crate) mod cel;
mod groups;
mod ranking;
#[cfg(test)]
mod tests;

pub use ranking::RankedReason;

use ranking::Ranking;

pub use groups::{
    decision_group_status, decision_object_name, placement_decisions, DECISION_GROUP_INDEX_LABEL,
    DECISION_GROUP_NAME_LABEL, MAX_DECISIONS_PER_OBJECT, PLACEMENT_LABEL,
};

use super::fleet::{Cluster, Fleet};
use super::labels::ClusterBits;
use super::{
    ClusterDecision, Condition, PlacementKey, PlacementKind, PlacementSchedule, Previous, Reason,
};
use crate::catalog::{Catalog, Entry};
use crate::model::member::{
    ManagedClusterTaint, OcmTaintEffect, SelectorType, CLUSTER_SET_LABEL, TAINT_UNREACHABLE,
};
use crate::model::ocm::{
    ClusterPredicate, OcmPlacement, OcmToleration, OcmTolerationOperator, ScoreCoordinateType,
    PRIORITIZER_ALLOCATABLE_CPU, PRIORITIZER_ALLOCATABLE_MEMORY, PRIORITIZER_BALANCE,
    PRIORITIZER_STEADY,
};
use crate::model::ClusterName;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};

/// Condition type: are the decisions complete?
pub const SATISFIED: &str = "PlacementSatisfied";
/// Condition type: did the configuration check pass?
pub const MISCONFIGURED: &str = "PlacementMisconfigured";
/// Annotation that makes OCM (and gitfleet) leave a placement alone.
pub const DISABLE_ANNOTATION: &str =
    "cluster.open-cluster-management.io/experimental-scheduling-disable";
/// The properties standing for `status.allocatable` and `status.capacity`.
pub const ALLOCATABLE_CPU: &str = "resources.kubernetes-fleet.io/allocatable-cpu";
pub const CAPACITY_CPU: &str = "resources.kubernetes-fleet.io/total-cpu";
pub const ALLOCATABLE_MEMORY: &str = "resources.kubernetes-fleet.io/allocatable-memory";
pub const CAPACITY_MEMORY: &str = "resources.kubernetes-fleet.io/total-memory";

/// `MaxClusterScore` of OCM's plugin interface.
const MAX_SCORE: i64 = 100;
const NANOS: i128 = 1_000_000_000;

/// Schedules every OCM Placement of the commit, in (namespace, name) order. Balance for a
/// placement counts the decisions of all OTHER OCM placements of the commit: those already
/// scheduled in this run, and for those not yet scheduled their previous result in `previous`
/// (if any).
pub fn schedule_all(
    cat: &Catalog,
    fleet: &Fleet,
    previous: &Previous,
    now_unix: i64,
) -> Vec<PlacementSchedule> {
    // The world (every cluster's resources, parsed) is built only for placements to schedule:
    // a fleet of KubeFleet placements built it at every look for nothing.
    if cat.ocm_placements.is_empty() {
        return Vec::new();
    }
    let world = World::new(cat, fleet);
    let mut entries: Vec<(&str, &Entry<OcmPlacement>)> = cat
        .ocm_placements
        .iter()
        .map(|e| (cat.objects[e.index].namespace.as_deref().unwrap_or(""), e))
        .collect();
    entries.sort_by(|a, b| (a.0, &a.1.spec.metadata.name).cmp(&(b.0, &b.1.spec.metadata.name)));
    let prev_of = |ns: &str, e: &Entry<OcmPlacement>| previous.get(&id(ns, &e.spec.metadata.name));
    // Decisions per cluster of every placement as the hub holds them now: the previous results,
    // replaced one by one by this run's.
    let mut counts = Counts::new(fleet);
    for (ns, e) in &entries {
        if let Some(p) = prev_of(ns, e) {
            counts.add(fleet, &p.selected, 1);
        }
    }
    let mut out = Vec::with_capacity(entries.len());
    for (ns, e) in entries {
        let prev = prev_of(ns, e);
        if let Some(p) = prev {
            counts.add(fleet, &p.selected, -1);
        }
        let balance = counts.view();
        let (result, selected) =
            world.schedule(&e.spec, ns, prev.map(|p| &**p), &balance, now_unix);
        match selected {
            Some(indices) => counts.add_indices(&indices),
            None => counts.add(fleet, &result.selected, 1),
        }
        out.push(result);
    }
    out
}

/// One placement. `others` = decision counts per cluster of the other placements (for Balance).
pub fn schedule_one(
    cat: &Catalog,
    entry: &Entry<OcmPlacement>,
    fleet: &Fleet,
    previous: Option<&PlacementSchedule>,
    others: &BTreeMap<String, i64>,
    now_unix: i64,
) -> PlacementSchedule {
    let world = World::new(cat, fleet);
    let ns = cat.objects[entry.index].namespace.as_deref().unwrap_or("");
    let mut by_index = vec![0i64; fleet.clusters.len()];
    let mut max = 0;
    for (name, &n) in others {
        if n <= 0 {
            continue;
        }
        max = max.max(n);
        if let Some(i) = index_of(fleet, name) {
            by_index[i] = n;
        }
    }
    let balance = BalanceView {
        by_index: &by_index,
        max,
    };
    world
        .schedule(&entry.spec, ns, previous, &balance, now_unix)
        .0
}

fn id(ns: &str, name: &str) -> PlacementKey {
    PlacementKey::new(PlacementKind::OcmPlacement, Some(ns), name)
}

fn index_of(fleet: &Fleet, name: &str) -> Option<usize> {
    fleet
        .clusters
        .binary_search_by(|c| c.name.as_str().cmp(name))
        .ok()
}

// ---------------------------------------------------------------------------------------------
// Balance counts
// ---------------------------------------------------------------------------------------------

/// How many PlacementDecisions of the hub name each cluster (fleet clusters by index, others by
/// name: a previous result may name a cluster that has left the fleet; it still counts for
/// `maxCount`, as a stale PlacementDecision does in OCM).
struct Counts {
    by_index: Vec<i64>,
    extra: HashMap<String, i64>,
}

/// What Balance reads: the counts of the other placements and their maximum over all clusters.
struct BalanceView<'a> {
    by_index: &'a [i64],
    max: i64,
}

impl Counts {
    fn new(fleet: &Fleet) -> Self {
        Counts {
            by_index: vec![0; fleet.clusters.len()],
            extra: HashMap::new(),
        }
    }

    fn add(&mut self, fleet: &Fleet, clusters: &[ClusterName], delta: i64) {
        for c in clusters {
            match index_of(fleet, c) {
                Some(i) => self.by_index[i] += delta,
                None => *self.extra.entry(c.to_string()).or_default() += delta,
            }
        }
    }

    fn add_indices(&mut self, clusters: &[u32]) {
        for &i in clusters {
            self.by_index[i as usize] += 1;
        }
    }

    fn view(&self) -> BalanceView<'_> {
        let max = self
            .by_index
            .iter()
            .chain(self.extra.values())
            .copied()
            .max()
            .unwrap_or(0)
            .max(0);
        BalanceView {
            by_index: &self.by_index,
            max,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The prioritizers' formulas (OCM's pkg/placement/plugins)
// ---------------------------------------------------------------------------------------------

/// Balance: 100 for a cluster no other placement uses; otherwise
/// `2 * int64(100 * (0.5 - count/maxCount))`, truncated toward zero before doubling.
pub fn balance_score(count: i64, max_count: i64) -> i64 {
    if count <= 0 || max_count <= 0 {
        return MAX_SCORE;
    }
    let usage = count as f64 / max_count as f64;
    2 * ((MAX_SCORE as f64 * (0.5 - usage)) as i64)
}

/// ResourceAllocatable*: `int64((ratio - 0.5) * 2 * 100)` with `ratio = (a - min) / (max - min)`,
/// truncated toward zero; 100 for everyone when `min == max`.
pub fn resource_score(allocatable: f64, min: f64, max: f64) -> i64 {
    if max - min != 0.0 {
        let ratio = (allocatable - min) / (max - min);
        ((ratio - 0.5) * 2.0 * 100.0) as i64
    } else {
        MAX_SCORE
    }
}

// ---------------------------------------------------------------------------------------------
// The commit as the scheduler sees it
// ---------------------------------------------------------------------------------------------

/// A scheduler "Misconfigured" status: the plugin that found it (empty for the framework) and its
/// message; the condition message is `<plugin>:<message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Misconfig {
    plugin: &'static str,
    message: String,
}

impl Misconfig {
    fn new(plugin: &'static str, message: impl Into<String>) -> Self {
        Misconfig {
            plugin,
            message: message.into(),
        }
    }
    fn text(&self) -> String {
        format!("{}:{}", self.plugin, self.message)
    }
}

static UNREACHABLE: LazyLock<ManagedClusterTaint> = LazyLock::new(|| ManagedClusterTaint {
    key: TAINT_UNREACHABLE.into(),
    value: String::new(),
    effect: OcmTaintEffect::NoSelect,
    time_added: None,
});

/// One taint of a cluster with its `timeAdded` read once.
struct TaintView<'a> {
    taint: &'a ManagedClusterTaint,
    added: Option<i128>,
}

/// What the scheduler needs of one fleet cluster, computed once per run.
struct ClusterView<'a> {
    /// A ManagedCluster that is not being deleted.
    eligible: bool,
    cpu: Option<f64>,
    memory: Option<f64>,
    taints: Vec<TaintView<'a>>,
}

struct World<'a> {
    fleet: &'a Fleet,
    views: Vec<ClusterView<'a>>,
    /// Namespace → the sets bound there whose ManagedClusterSet exists, sorted.
    bound: HashMap<&'a str, Vec<&'a str>>,
    /// Set → its eligible members (fleet indices, ascending = by name).
    members: HashMap<&'a str, Vec<u32>>,
    /// Eligible set list → the union of their members.
    candidates: RefCell<HashMap<Vec<&'a str>, Rc<[u32]>>>,
    /// Add-on score name → each cluster's score (0 when it has none), by fleet index.
    add_on_scores: RefCell<HashMap<String, Rc<[i64]>>>,
}

/// An allocatable quantity, when the cluster reports both allocatable and capacity.
fn resource(c: &Cluster, allocatable: &str, capacity: &str) -> Option<f64> {
    match (c.property(allocatable), c.property(capacity)) {
        (Some(Ok(a)), Some(Ok(_))) => Some(a),
        _ => None,
    }
}

impl<'a> World<'a> {
    fn new(cat: &'a Catalog, fleet: &'a Fleet) -> Self {
        let deleting: std::collections::HashSet<&str> = cat
            .managed_clusters
            .iter()
            .filter(|m| m.spec.metadata.deletion_timestamp.is_some())
            .map(|m| m.spec.metadata.name.as_str())
            .collect();
        let views: Vec<ClusterView> = fleet
            .clusters
            .iter()
            .map(|c| {
                let mut taints: Vec<TaintView> =
                    c.ocm_taints
                        .iter()
                        .map(|t| TaintView {
                            taint: t,
                            added: t.time_added.as_deref().and_then(|t| {
                                crate::timestamp::parse(t).map(|t| t.as_nanosecond())
                            }),
                        })
                        .collect();
                if !c.healthy {
                    // gitfleet's stand-in for the hub's taint, always last.
                    taints.push(TaintView {
                        taint: &UNREACHABLE,
                        added: None,
                    });
                }
                ClusterView {
                    eligible: c.ocm_member && !deleting.contains(c.name.as_str()),
                    cpu: resource(c, ALLOCATABLE_CPU, CAPACITY_CPU),
                    memory: resource(c, ALLOCATABLE_MEMORY, CAPACITY_MEMORY),
                    taints,
                }
            })
            .collect();
        // Exclusive sets by their label, read once.
        let mut by_set_label: HashMap<&str, Vec<u32>> = HashMap::new();
        for (i, c) in fleet.clusters.iter().enumerate() {
            if views[i].eligible {
                if let Some(set) = c.ocm_labels.get(CLUSTER_SET_LABEL) {
                    by_set_label.entry(set.as_str()).or_default().push(i as u32);
                }
            }
        }
        let mut members = HashMap::new();
        for s in &cat.cluster_sets {
            let set = &s.spec;
            let list = match set.spec.cluster_selector.selector_type {
                Some(SelectorType::LabelSelector) => fleet
                    .clusters
                    .iter()
                    .enumerate()
                    .filter(|(i, c)| views[*i].eligible && set.selects(&c.ocm_labels))
                    .map(|(i, _)| i as u32)
                    .collect(),
                _ => by_set_label
                    .get(set.metadata.name.as_str())
                    .cloned()
                    .unwrap_or_default(),
            };
            members.insert(set.metadata.name.as_str(), list);
        }
        let mut bound: HashMap<&str, Vec<&str>> = HashMap::new();
        for b in &cat.cluster_set_bindings {
            let name = b.spec.metadata.name.as_str();
            if members.contains_key(name) {
                let ns = cat.objects[b.index].namespace.as_deref().unwrap_or("");
                bound.entry(ns).or_default().push(name);
            }
        }
        for sets in bound.values_mut() {
            sets.sort_unstable();
            sets.dedup();
        }
        World {
            fleet,
            views,
            bound,
            members,
            candidates: RefCell::new(HashMap::new()),
            add_on_scores: RefCell::new(HashMap::new()),
        }
    }

    /// Every cluster's add-on score `name`, shared between placements.
    fn add_on_scores(&self, name: &str) -> Rc<[i64]> {
        if let Some(s) = self.add_on_scores.borrow().get(name) {
            return s.clone();
        }
        let scores: Rc<[i64]> = (self.fleet.clusters.iter())
            .map(|c| c.add_on_scores.get(name).copied().unwrap_or(0))
            .collect();
        (self.add_on_scores.borrow_mut()).insert(name.to_string(), scores.clone());
        scores
    }

    /// The union of the members of `sets`, ascending, shared between placements.
    fn candidates(&self, sets: &[&'a str]) -> Rc<[u32]> {
        if let Some(c) = self.candidates.borrow().get(sets) {
            return c.clone();
        }
        let mut all: Vec<u32> = sets
            .iter()
            .flat_map(|s| self.members.get(s).into_iter().flatten().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        let all: Rc<[u32]> = all.into();
        self.candidates
            .borrow_mut()
            .insert(sets.to_vec(), all.clone());
        all
    }

    fn schedule(
        &self,
        placement: &OcmPlacement,
        ns: &str,
        previous: Option<&PlacementSchedule>,
        balance: &BalanceView,
        now_unix: i64,
    ) -> (PlacementSchedule, Option<Vec<u32>>) {
        let key = id(ns, &placement.metadata.name);
        let mut out = PlacementSchedule {
            key: key.clone(),
            policy_snapshot_index: None,
            policy_hash: None,
            selected: vec![],
            decisions: vec![],
            conditions: vec![],
            bindings: vec![],
            decision_groups: vec![],
        };
        // OCM leaves a disabled placement and its PlacementDecisions as they are.
        if placement
            .metadata
            .annotations
            .get(DISABLE_ANNOTATION)
            .is_some_and(|v| v == "true")
            || placement.metadata.deletion_timestamp.is_some()
        {
            if let Some(p) = previous {
                out = p.clone();
                out.key = key;
            }
            return (out, None);
        }
        let spec = &placement.spec;
        let bound: &[&str] = self.bound.get(ns).map(Vec::as_slice).unwrap_or(&[]);
        let eligible: Vec<&str> = if spec.cluster_sets.is_empty() {
            bound.to_vec()
        } else {
            bound
                .iter()
                .copied()
                .filter(|s| spec.cluster_sets.iter().any(|c| c == s))
                .collect()
        };
        let candidates = self.candidates(&eligible);
        let run = self.run(placement, &candidates, previous, balance, now_unix);

        let selected_count = run.selected.len();
        let mut status = run.misconfig.clone();
        let strategy = &spec.decision_strategy.group_strategy;
        match groups::decision_groups(strategy, self.fleet, &run.selected) {
            Ok(g) => out.decision_groups = g,
            Err(m) => status = Some(m),
        }
        // With misconfigured groups OCM writes no PlacementDecision: nothing is selected.
        let written = run.misconfig.is_some() || status.is_none();
        let mut indices: Vec<u32> = Vec::new();
        if written {
            indices = run.selected.clone();
            indices.sort_unstable();
            out.selected = indices
                .iter()
                .map(|&i| self.fleet.clusters[i as usize].name.clone())
                .collect();
        }
        let unscheduled = run.unscheduled;
        out.decisions = self.decisions(run, &candidates, status.as_ref(), written);
        out.conditions = vec![
            satisfied(
                &spec.cluster_sets,
                &eligible,
                bound.len(),
                candidates.len(),
                selected_count,
                unscheduled,
            ),
            misconfigured(status.as_ref()),
        ];
        (out, Some(indices))
    }

    /// Filters, scores, sorts and picks (OCM's `Schedule`).
    fn run<'p>(
        &self,
        placement: &'p OcmPlacement,
        candidates: &[u32],
        previous: Option<&PlacementSchedule>,
        balance: &BalanceView,
        now_unix: i64,
    ) -> Run<'p> {
        let spec = &placement.spec;
        let n = self.fleet.clusters.len();
        let mut run = Run::default();
        let mut was_selected = vec![false; if previous.is_some() { n } else { 0 }];
        for c in previous.into_iter().flat_map(|p| &p.selected) {
            if let Some(i) = index_of(self.fleet, c) {
                was_selected[i] = true;
            }
        }
        let in_decisions = |i: u32| was_selected.get(i as usize).copied().unwrap_or(false);

        // Predicate.
        let mut passed: Vec<u32> = Vec::with_capacity(candidates.len());
        if spec.predicates.is_empty() || candidates.is_empty() {
            passed.extend_from_slice(candidates);
        } else {
            let cels = match compile_cel(&spec.predicates, self.fleet) {
                Ok(cels) => cels,
                Err(m) => {
                    run.misconfig = Some(m);
                    return run;
                }
            };
            let mut reasons: [Option<Arc<str>>; 4] = Default::default();
            let labels: Vec<ClusterBits> = spec
                .predicates
                .iter()
                .map(|p| {
                    let selector = &p.required_cluster_selector.label_selector;
                    self.fleet.ocm_label_index().select(selector)
                })
                .collect();
            for &i in candidates {
                let c = &self.fleet.clusters[i as usize];
                match predicate_miss(&spec.predicates, &labels, &cels, i as usize, c) {
                    None => passed.push(i),
                    Some(miss) => {
                        let why = reasons[miss as usize]
                            .get_or_insert_with(|| miss.reason(spec.predicates.len()).into());
                        run.filtered_by_predicate.push((i, why.clone()));
                    }
                }
            }
        }

        // TaintToleration.
        let now = i128::from(now_unix) * NANOS;
        if !passed.is_empty() {
            if let Some(m) = toleration_misconfig(&spec.tolerations) {
                run.misconfig = Some(m);
                return run;
            }
        }
        run.feasible.reserve(passed.len());
        for i in passed {
            let view = &self.views[i as usize];
            match tolerated(&view.taints, &spec.tolerations, in_decisions(i), now) {
                Ok(until) => run.feasible.push(Feasible {
                    index: i,
                    total: 0,
                    tolerated_until: until,
                }),
                Err(why) => {
                    let c = &self.fleet.clusters[i as usize];
                    run.filtered_by_taints
                        .push((i, taint_reason(&why, c, in_decisions(i)).into()));
                }
            }
        }

        // Prioritizers.
        let prioritizers = match prioritizers(placement) {
            Ok(p) => p,
            Err(m) => {
                run.misconfig = Some(m);
                return run;
            }
        };
        let mut scores = Vec::with_capacity(prioritizers.len());
        for (p, weight) in &prioritizers {
            let s = self.score(p, &run.feasible, &in_decisions, balance);
            for (at, f) in run.feasible.iter_mut().enumerate() {
                f.total = f
                    .total
                    .saturating_add(s.value(at).saturating_mul(i64::from(*weight)));
            }
            scores.push(s);
        }
        run.prioritizers = prioritizers;
        run.scores = scores;

        // Sort (total descending, then name ascending = index ascending: the feasible clusters
        // are in fleet order) and pick the top k.
        let totals: Vec<i64> = run.feasible.iter().map(|f| f.total).collect();
        run.rank = ranking::best_first(&totals);
        let feasible = &run.feasible;
        let k = spec
            .number_of_clusters
            .map_or(feasible.len(), |k| k.max(0) as usize);
        let chosen = k.min(feasible.len());
        run.selected = run.rank[..chosen]
            .iter()
            .map(|&r| feasible[r as usize].index)
            .collect();
        run.k = k;
        if spec.number_of_clusters.is_some() {
            run.unscheduled = k - chosen;
        }
        run
    }

    /// One prioritizer's scores over the feasible clusters (`None`: no entry, which sums as 0).
    fn score(
        &self,
        p: &Prioritizer<'_>,
        feasible: &[Feasible],
        in_decisions: &dyn Fn(u32) -> bool,
        balance: &BalanceView,
    ) -> ranking::Column {
        match p {
            Prioritizer::Balance => feasible
                .iter()
                .map(|f| {
                    Some(balance_score(
                        balance.by_index[f.index as usize],
                        balance.max,
                    ))
                })
                .collect(),
            Prioritizer::Steady => feasible
                .iter()
                .map(|f| Some(if in_decisions(f.index) { MAX_SCORE } else { 0 }))
                .collect(),
            Prioritizer::Cpu | Prioritizer::Memory => {
                let value = |f: &Feasible| {
                    let v = &self.views[f.index as usize];
                    if matches!(p, Prioritizer::Cpu) {
                        v.cpu
                    } else {
                        v.memory
                    }
                };
                let mut range: Option<(f64, f64)> = None;
                for v in feasible.iter().filter_map(value) {
                    range = Some(range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
                }
                feasible
                    .iter()
                    .map(|f| {
                        let (lo, hi) = range?;
                        value(f).map(|a| resource_score(a, lo, hi))
                    })
                    .collect()
            }
            Prioritizer::AddOn { score_name, .. } => {
                let scores = self.add_on_scores(score_name);
                feasible
                    .iter()
                    .map(|f| Some(scores[f.index as usize]))
                    .collect()
            }
        }
    }

    /// One decision per candidate: the feasible clusters best first, then the filtered ones by
    /// name.
    fn decisions(
        &self,
        run: Run,
        candidates: &[u32],
        status: Option<&Misconfig>,
        written: bool,
    ) -> Vec<ClusterDecision> {
        let name = |i: u32| self.fleet.clusters[i as usize].name.clone();
        if let Some(m) = &run.misconfig {
            let reason: Arc<str> = format!(
                "not scheduled: the placement is misconfigured ({})",
                m.text()
            )
            .into();
            return candidates
                .iter()
                .map(|&i| decision(name(i), false, None, Reason::Text(reason.clone())))
                .collect();
        }
        let mut out = Vec::with_capacity(candidates.len());
        let chosen = run.selected.len();
        let scores = ranking::Scores {
            prioritizers: run
                .prioritizers
                .iter()
                .map(|(p, w)| {
                    let mut name = String::new();
                    p.write_name(&mut name);
                    (name, *w)
                })
                .collect(),
            order: run.rank,
            totals: run.feasible.iter().map(|f| f.total).collect(),
            scores: run.scores,
        };
        let unwritten = (!written).then(|| status.map(Misconfig::text).unwrap_or_default());
        let feasible = &run.feasible;
        let ranking = Ranking::new(scores, run.k, chosen, unwritten, |at| {
            let f = &feasible[at as usize];
            let (until, t) = f.tolerated_until?;
            let taint = self.views[f.index as usize].taints[t].taint;
            Some((until, taint_text(taint)))
        });
        for (rank, &at) in ranking.order().iter().enumerate() {
            let f = &feasible[at as usize];
            let reason = Reason::Ranked(ranking.reason(rank));
            let selected = rank < chosen && written;
            out.push(decision(name(f.index), selected, Some(f.total), reason));
        }
        // Each filter's list is in fleet order: merged, they are by name.
        let (mut predicate, mut taints) = (
            run.filtered_by_predicate.into_iter().peekable(),
            run.filtered_by_taints.into_iter().peekable(),
        );
        let filtered = std::iter::from_fn(|| match (predicate.peek(), taints.peek()) {
            (Some(p), Some(t)) if t.0 < p.0 => taints.next(),
            (Some(_), _) => predicate.next(),
            (None, _) => taints.next(),
        });
        for (i, why) in filtered {
            out.push(decision(name(i), false, None, Reason::Text(why)));
        }
        out
    }
}

fn decision(
    cluster: ClusterName,
    selected: bool,
    score: Option<i64>,
    reason: Reason,
) -> ClusterDecision {
    ClusterDecision {
        cluster,
        selected,
        affinity_score: None,
        topology_spread_score: None,
        score,
        reason,
    }
}

/// The outcome of the filter, score and select steps for one placement.
#[derive(Default)]
struct Run<'a> {
    misconfig: Option<Misconfig>,
    /// Clusters removed by the Predicate filter and by TaintToleration, with the reason, each
    /// in fleet order.
    filtered_by_predicate: Vec<(u32, Arc<str>)>,
    filtered_by_taints: Vec<(u32, Arc<str>)>,
    /// Clusters that passed the filters, by index.
    feasible: Vec<Feasible>,
    prioritizers: Vec<(Prioritizer<'a>, i32)>,
    /// Per prioritizer, its score of each feasible cluster.
    scores: Vec<ranking::Column>,
    /// Positions in `feasible`, best first.
    rank: Vec<u32>,
    /// The selection, best first.
    selected: Vec<u32>,
    k: usize,
    unscheduled: usize,
}

struct Feasible {
    index: u32,
    total: i64,
    /// The earliest expiry of a `tolerationSeconds` toleration this cluster relies on, and the
    /// taint (index in the cluster's taints).
    tolerated_until: Option<(i128, usize)>,
}

// ---------------------------------------------------------------------------------------------
// Filters
// ---------------------------------------------------------------------------------------------

/// Each predicate's CEL selector, compiled (`None` without expressions); an expression that
/// does not compile makes the placement misconfigured, as OCM's Predicate plugin does
/// (pkg/placement/plugins/predicate/predicate.go).
fn compile_cel(
    predicates: &[ClusterPredicate],
    fleet: &Fleet,
) -> Result<Vec<Option<cel::CelSelector>>, Misconfig> {
    predicates
        .iter()
        .map(|p| {
            let exprs = &p.required_cluster_selector.cel_selector.cel_expressions;
            if exprs.is_empty() {
                return Ok(None);
            }
            cel::CelSelector::compile(exprs, &fleet.clusters)
                .map(Some)
                .map_err(|e| Misconfig::new("Predicate", e))
        })
        .collect()
}

/// Why a cluster matches none of the predicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PredicateMiss {
    /// With one predicate: its label selector does not match.
    Labels = 0,
    /// With one predicate: its claim selector does not match.
    Claims = 1,
    /// With several predicates: none matches.
    All = 2,
    /// With one predicate: its CEL selector does not match.
    Cel = 3,
}

impl PredicateMiss {
    fn reason(self, predicates: usize) -> String {
        match self {
            PredicateMiss::Labels => {
                "filtered by Predicate: the cluster's labels do not match its labelSelector".into()
            }
            PredicateMiss::Claims => {
                "filtered by Predicate: the cluster's claims (properties) do not match its claimSelector"
                    .into()
            }
            PredicateMiss::Cel => {
                "filtered by Predicate: the cluster does not satisfy its celSelector".into()
            }
            PredicateMiss::All => format!(
                "filtered by Predicate: the cluster matches none of the {predicates} predicates"
            ),
        }
    }
}

/// `None` when the cluster matches one of the predicates (ORed; within one, the label AND the
/// claim selector must match).
/// `labels` holds what each predicate's label selector matches over the fleet; `index` is the
/// cluster's position there.
fn predicate_miss(
    predicates: &[ClusterPredicate],
    labels: &[ClusterBits],
    cels: &[Option<cel::CelSelector>],
    index: usize,
    c: &Cluster,
) -> Option<PredicateMiss> {
    let mut miss = PredicateMiss::Claims;
    for ((p, bits), cel) in predicates.iter().zip(labels).zip(cels) {
        let sel = &p.required_cluster_selector;
        if !bits.contains(index) {
            miss = PredicateMiss::Labels;
            continue;
        }
        if !sel
            .claim_selector
            .match_expressions
            .iter()
            .all(|r| r.matches(&c.properties))
        {
            continue;
        }
        // As OCM's ClusterSelector.Matches: labels, then claims, then CEL.
        if cel.as_ref().is_some_and(|cel| !cel.matches(c)) {
            miss = PredicateMiss::Cel;
            continue;
        }
        return None;
    }
    Some(if predicates.len() == 1 {
        miss
    } else {
        PredicateMiss::All
    })
}

/// The scheduler's own toleration checks (TaintToleration's Misconfigured messages).
fn toleration_misconfig(tolerations: &[OcmToleration]) -> Option<Misconfig> {
    for t in tolerations {
        if t.key.is_empty() && t.operator() != OcmTolerationOperator::Exists {
            return Some(Misconfig::new(
                "TaintToleration",
                "If the key is empty, operator must be Exists.",
            ));
        }
        if t.operator() == OcmTolerationOperator::Exists && !t.value.is_empty() {
            return Some(Misconfig::new(
                "TaintToleration",
                "If the operator is Exists, the value should be empty.",
            ));
        }
    }
    None
}

/// Why a taint stopped a cluster.
struct Untolerated {
    /// Index in the cluster's taints.
    taint: usize,
    /// The tolerations that match the taint but whose `tolerationSeconds` ran out: the latest
    /// expiry among them (`None` when no toleration matched at all).
    expired_at: Option<Option<i128>>,
}

/// OCM's `isClusterTolerated`: every taint must be tolerated. PreferNoSelect always is;
/// NoSelectIfNew is when the cluster is in the placement's current decisions; otherwise the
/// first matching toleration that has not run out (`now < timeAdded + tolerationSeconds`).
/// `Ok` carries the earliest expiry among the timed tolerations relied on.
fn tolerated(
    taints: &[TaintView],
    tolerations: &[OcmToleration],
    in_decisions: bool,
    now: i128,
) -> Result<Option<(i128, usize)>, Untolerated> {
    let mut earliest: Option<(i128, usize)> = None;
    for (ti, t) in taints.iter().enumerate() {
        let effect = t.taint.effect;
        if effect == OcmTaintEffect::PreferNoSelect
            || (effect == OcmTaintEffect::NoSelectIfNew && in_decisions)
        {
            continue;
        }
        let mut ok = false;
        let mut expired: Option<Option<i128>> = None;
        for tol in tolerations {
            if !tol.matches(t.taint) {
                continue;
            }
            let Some(secs) = tol.toleration_seconds else {
                ok = true;
                break;
            };
            // A missing timeAdded is Go's zero time (year 1): long expired.
            let until = t.added.map(|a| a.saturating_add(i128::from(secs) * NANOS));
            if let Some(until) = until.filter(|u| now < *u) {
                ok = true;
                if earliest.is_none_or(|(e, _)| until < e) {
                    earliest = Some((until, ti));
                }
                break;
            }
            expired = Some(match (expired.flatten(), until) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            });
        }
        if !ok {
            return Err(Untolerated {
                taint: ti,
                expired_at: expired,
            });
        }
    }
    Ok(earliest)
}

fn taint_text(t: &ManagedClusterTaint) -> String {
    if t.value.is_empty() {
        format!("{}:{:?}", t.key, t.effect)
    } else {
        format!("{}={}:{:?}", t.key, t.value, t.effect)
    }
}

fn taint_reason(why: &Untolerated, c: &Cluster, in_decisions: bool) -> String {
    let view_taint = c
        .ocm_taints
        .get(why.taint)
        .unwrap_or_else(|| LazyLock::force(&UNREACHABLE));
    let implicit = why.taint >= c.ocm_taints.len();
    let mut s = format!(
        "filtered by TaintToleration: taint {}",
        taint_text(view_taint)
    );
    if implicit {
        let _ = write!(
            s,
            " (gitfleet's stand-in for the hub's taint: the cluster is unhealthy{})",
            c.health_reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    match why.expired_at {
        Some(Some(at)) => {
            let _ = write!(
                s,
                " was tolerated until {}; its tolerationSeconds have run out",
                crate::timestamp::format_unix_nanos(at)
            );
        }
        Some(None) => s.push_str(
            if implicit {
                " is tolerated only for tolerationSeconds, and when the cluster became unhealthy is unknown, so they have run out"
            } else {
                " has no timeAdded, so the tolerationSeconds of the toleration that matches it have run out"
            },
        ),
        None => s.push_str(" is not tolerated"),
    }
    if view_taint.effect == OcmTaintEffect::NoSelectIfNew {
        s.push_str(" and the cluster is not in the placement's current decisions");
    } else if in_decisions {
        s.push_str("; the cluster is removed from the placement's decisions");
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Prioritizers
// ---------------------------------------------------------------------------------------------

enum Prioritizer<'a> {
    Balance,
    Steady,
    Cpu,
    Memory,
    AddOn {
        resource_name: &'a str,
        score_name: &'a str,
    },
}

impl Prioritizer<'_> {
    fn write_name(&self, out: &mut String) {
        match self {
            Prioritizer::Balance => out.push_str(PRIORITIZER_BALANCE),
            Prioritizer::Steady => out.push_str(PRIORITIZER_STEADY),
            Prioritizer::Cpu => out.push_str(PRIORITIZER_ALLOCATABLE_CPU),
            Prioritizer::Memory => out.push_str(PRIORITIZER_ALLOCATABLE_MEMORY),
            Prioritizer::AddOn {
                resource_name,
                score_name,
            } => {
                let _ = write!(out, "AddOn/{resource_name}/{score_name}");
            }
        }
    }
}

/// OCM's `getWeights` and `getPrioritizers`: the prioritizers with a non-zero weight, or the
/// framework's Misconfigured message for an unknown builtIn or an AddOn without `addOn`.
fn prioritizers(placement: &OcmPlacement) -> Result<Vec<(Prioritizer<'_>, i32)>, Misconfig> {
    let weights = placement.prioritizer_weights();
    // `prioritizer_weights` returns owned coordinates; borrow the add-on names from the spec.
    let addons: Vec<_> = placement
        .spec
        .prioritizer_policy
        .configurations
        .iter()
        .filter(|c| c.score_coordinate.type_ == ScoreCoordinateType::AddOn && c.weight() != 0)
        .collect();
    let mut next_addon = addons.iter();
    let mut out = Vec::with_capacity(weights.len());
    for (sc, w) in weights {
        let p = match sc.type_ {
            ScoreCoordinateType::BuiltIn => match sc.built_in.as_str() {
                PRIORITIZER_BALANCE => Prioritizer::Balance,
                PRIORITIZER_STEADY => Prioritizer::Steady,
                PRIORITIZER_ALLOCATABLE_CPU => Prioritizer::Cpu,
                PRIORITIZER_ALLOCATABLE_MEMORY => Prioritizer::Memory,
                other => {
                    return Err(Misconfig::new(
                        "",
                        format!("incorrect builtin prioritizer: {other}"),
                    ))
                }
            },
            ScoreCoordinateType::AddOn => {
                match next_addon
                    .next()
                    .and_then(|c| c.score_coordinate.add_on.as_ref())
                {
                    Some(a) => Prioritizer::AddOn {
                        resource_name: &a.resource_name,
                        score_name: &a.score_name,
                    },
                    None => return Err(Misconfig::new("", "addOn should not be empty")),
                }
            }
        };
        out.push((p, w));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Conditions
// ---------------------------------------------------------------------------------------------

/// `PlacementSatisfied`, the first matching case (OCM's `newSatisfiedCondition`;
/// its case 4, a plugin Error, cannot happen here).
fn satisfied(
    spec_sets: &[String],
    eligible: &[&str],
    bindings: usize,
    available: usize,
    selected: usize,
    unscheduled: usize,
) -> Condition {
    let c = |ok, reason: &str, message: String| Condition::new(SATISFIED, ok, reason, message);
    if bindings == 0 {
        c(
            false,
            "NoManagedClusterSetBindings",
            "No valid ManagedClusterSetBindings found in placement namespace".into(),
        )
    } else if eligible.is_empty() {
        c(
            false,
            "NoIntersection",
            format!(
                "None of ManagedClusterSets [{}] is bound to placement namespace",
                spec_sets.join(",")
            ),
        )
    } else if available == 0 {
        c(
            false,
            "AllManagedClusterSetsEmpty",
            format!(
                "All ManagedClusterSets [{}] have no member ManagedCluster",
                eligible.join(",")
            ),
        )
    } else if selected == 0 {
        c(
            false,
            "NoManagedClusterMatched",
            "No ManagedCluster matches any of the cluster predicate".into(),
        )
    } else if unscheduled == 0 {
        c(
            true,
            "AllDecisionsScheduled",
            "All cluster decisions scheduled".into(),
        )
    } else {
        c(
            false,
            "NotAllDecisionsScheduled",
            format!("{unscheduled} cluster decisions unscheduled"),
        )
    }
}

/// `PlacementMisconfigured`.
fn misconfigured(status: Option<&Misconfig>) -> Condition {
    match status {
        Some(m) => Condition {
            type_: MISCONFIGURED.into(),
            status: "True".into(),
            reason: "Misconfigured".into(),
            message: m.text(),
        },
        None => Condition::new(
            MISCONFIGURED,
            false,
            "Succeedconfigured",
            "Placement configurations check pass",
        ),
    }
}
