//! KubeFleet's scheduler for ClusterResourcePlacement and ResourcePlacement (pkg/scheduler):
//! binding classification, PickAll / PickFixed / PickN, the filter and score plugins, ranking,
//! downscale, and the decisions and `Scheduled` condition with KubeFleet's exact strings.

use super::fleet::{Cluster, Fleet};
use super::labels::ClusterBits;
use super::{
    Binding, BindingState, ClusterDecision, Condition, PlacementKey, PlacementSchedule, Reason,
};
use crate::model::member::Taint;
use crate::model::placement::{
    ClusterSelectorTerm, PlacementPolicy, PlacementType, PropertyOperator, SortOrder, Toleration,
    TolerationOperator, TopologySpreadConstraint, UnsatisfiableAction,
};
use crate::model::quantity::Quantity;
use crate::model::selector::LabelSelector;
use crate::model::ClusterName;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

pub const SCHEDULED: &str = "Scheduled";
pub const FULLY_SCHEDULED: &str = "SchedulingPolicyFulfilled";
pub const NOT_FULLY_SCHEDULED: &str = "SchedulingPolicyUnfulfilled";
/// At most this many clusters that were not picked are listed in the decisions.
const MAX_UNSELECTED_DECISIONS: usize = 20;
/// The API caps the decision list.
const MAX_DECISIONS: usize = 1000;
const TSC_VIOLATION_PENALTY: i32 = 1000;

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

/// Per-run caches shared by all placements (one fleet): each property's values by fleet position
/// and its range over the members, and each topology key's domains.
#[derive(Default)]
pub struct Cache {
    columns: HashMap<String, Rc<[Prop]>>,
    extremes: HashMap<String, Option<(f64, f64)>>,
    domains: HashMap<String, Rc<Domains>>,
}

/// A cluster's property, read once per run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Prop {
    Missing,
    Value(f64),
    /// Not a quantity: the cycle fails on it (the raw text is read again for the error).
    Invalid,
}

/// A property expression of a required term: the value to compare with, and the property's
/// values by fleet position.
type Wanted = (Option<f64>, Rc<[Prop]>);
/// A preferred term's property sorter: the property's values by fleet position, and its range
/// over the members.
type Sorter = (Rc<[Prop]>, Option<(f64, f64)>);

/// The domains of one topology key over the fleet members.
struct Domains {
    /// Per fleet position: the domain (numbered in order of first appearance), if the cluster is
    /// a member with the label.
    by_position: Vec<Option<usize>>,
    count: usize,
}

impl Cache {
    fn column(&mut self, fleet: &Fleet, property: &str) -> Rc<[Prop]> {
        if let Some(c) = self.columns.get(property) {
            return c.clone();
        }
        let column: Rc<[Prop]> = fleet
            .clusters
            .iter()
            .map(|c| match c.property(property) {
                None => Prop::Missing,
                Some(Ok(v)) => Prop::Value(v),
                Some(Err(_)) => Prop::Invalid,
            })
            .collect();
        self.columns.insert(property.to_string(), column.clone());
        column
    }

    fn extremes(&mut self, fleet: &Fleet, property: &str) -> Option<(f64, f64)> {
        if let Some(e) = self.extremes.get(property) {
            return *e;
        }
        let column = self.column(fleet, property);
        let mut mm: Option<(f64, f64)> = None;
        for (c, p) in fleet.clusters.iter().zip(column.iter()) {
            if let (true, Prop::Value(v)) = (c.fleet_member, *p) {
                mm = Some(mm.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
            }
        }
        self.extremes.insert(property.to_string(), mm);
        mm
    }

    fn domains(&mut self, fleet: &Fleet, key: &str) -> Rc<Domains> {
        if let Some(d) = self.domains.get(key) {
            return d.clone();
        }
        let mut ids: HashMap<&str, usize> = HashMap::new();
        let by_position = fleet
            .clusters
            .iter()
            .map(|c| {
                let v = c.labels.get(key).filter(|_| c.fleet_member)?;
                let next = ids.len();
                Some(*ids.entry(v.as_str()).or_insert(next))
            })
            .collect();
        let domains = Rc::new(Domains {
            by_position,
            count: ids.len(),
        });
        self.domains.insert(key.to_string(), domains.clone());
        domains
    }
}

/// A scheduling cycle could not run (KubeFleet retries it; gitfleet reports it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("property {property:?} of cluster {cluster:?} is not a quantity: {value:?}")]
pub struct CycleError {
    pub cluster: String,
    pub property: String,
    pub value: String,
}

/// Working set of bindings: those to clusters of the fleet by their position in it (the order
/// of names, and what the filters ask by), and those to clusters that have left the fleet.
struct Bindings<'f> {
    fleet: &'f Fleet,
    /// Sorted by position: picks mostly arrive in that order, so this is mostly appending.
    at: Vec<(usize, Binding)>,
    /// Bindings to clusters no longer in the fleet: always unscheduled.
    gone: Vec<Binding>,
    index: u64,
}

fn live(b: &Binding) -> bool {
    b.state != BindingState::Unscheduled
}

impl<'f> Bindings<'f> {
    /// The previous bindings; those to clusters that are not fleet members any more (gone from
    /// the repository) are unscheduled.
    fn new(fleet: &'f Fleet, previous: &[Binding], index: u64) -> Self {
        let mut bindings = Bindings {
            fleet,
            at: Vec::with_capacity(previous.len()),
            gone: Vec::new(),
            index,
        };
        for b in previous {
            let mut b = b.clone();
            match fleet.position(&b.cluster) {
                Some(i) => {
                    if !fleet.clusters[i].fleet_member {
                        Self::unschedule(&mut b);
                    }
                    bindings.at.push((i, b));
                }
                None => {
                    Self::unschedule(&mut b);
                    bindings.gone.push(b);
                }
            }
        }
        bindings.at.sort_by_key(|(i, _)| *i);
        // A cluster listed twice: the later entry wins, as a map would have it.
        bindings.at.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        bindings
    }

    fn get(&self, position: usize) -> Option<&Binding> {
        let at = self.at.binary_search_by_key(&position, |(i, _)| *i).ok()?;
        Some(&self.at[at].1)
    }

    fn get_mut(&mut self, position: usize) -> Option<&mut Binding> {
        let at = self.at.binary_search_by_key(&position, |(i, _)| *i).ok()?;
        Some(&mut self.at[at].1)
    }

    /// All bindings, sorted by cluster name.
    fn into_vec(self) -> Vec<Binding> {
        let mut all: Vec<Binding> = self.at.into_iter().map(|(_, b)| b).collect();
        if !self.gone.is_empty() {
            all.extend(self.gone);
            all.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        }
        all
    }

    /// The current bindings (live, for this policy), with their fleet positions, by name.
    fn current(&self) -> impl Iterator<Item = (usize, &Binding)> {
        self.at
            .iter()
            .filter(move |(_, b)| live(b) && b.policy_index == self.index)
            .map(|(i, b)| (*i, b))
    }
    fn is_current(&self, position: usize) -> bool {
        self.get(position)
            .is_some_and(|b| live(b) && b.policy_index == self.index)
    }
    fn is_obsolete(&self, position: usize) -> bool {
        self.get(position)
            .is_some_and(|b| live(b) && b.policy_index != self.index)
    }
    fn unschedule(b: &mut Binding) {
        if live(b) {
            b.previous_state = Some(b.state);
            b.state = BindingState::Unscheduled;
        }
    }
    /// Binds the cluster at `position` for the current policy: patches an obsolete binding
    /// (state kept), revives an unscheduled one (previous state restored) or creates a
    /// `Scheduled` one.
    fn pick(&mut self, position: usize, scores: Option<(i32, i32)>) {
        let index = self.index;
        let fleet = self.fleet;
        let at = match self.at.binary_search_by_key(&position, |(i, _)| *i) {
            Ok(at) => at,
            Err(at) => {
                let b = Binding {
                    cluster: fleet.clusters[position].name.clone(),
                    state: BindingState::Scheduled,
                    policy_index: index,
                    affinity_score: None,
                    topology_spread_score: None,
                    previous_state: None,
                };
                self.at.insert(at, (position, b));
                at
            }
        };
        let b = &mut self.at[at].1;
        if b.state == BindingState::Unscheduled {
            b.state = b.previous_state.take().unwrap_or(BindingState::Scheduled);
        }
        b.previous_state = None;
        b.policy_index = index;
        if let Some((affinity, topology)) = scores {
            b.affinity_score = Some(affinity);
            b.topology_spread_score = Some(topology);
        }
    }
    fn unschedule_obsolete_except(&mut self, keep: impl Fn(usize) -> bool) {
        let index = self.index;
        for (i, b) in self.at.iter_mut() {
            let i = *i;
            if live(b) && b.policy_index != index && !keep(i) {
                Self::unschedule(b);
            }
        }
    }
}

/// A cluster that passed the filters, with its scores.
#[derive(Debug, Clone)]
struct Scored<'a> {
    cluster: &'a Cluster,
    /// Its position in the fleet.
    position: usize,
    topology: i32,
    affinity: i32,
    obsolete: i32,
}

/// KubeFleet's ranking: `(topology spread, affinity, obsolete binding)` descending, then the
/// lexicographically larger name first (the fleet is sorted by name, so the later position).
fn rank(a: &Scored, b: &Scored) -> Ordering {
    (b.topology, b.affinity, b.obsolete, b.position)
        .cmp(&(a.topology, a.affinity, a.obsolete, a.position))
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
    let selected: Vec<ClusterName> = bindings
        .iter()
        .filter(|b| live(b) && b.policy_index == input.policy_index)
        .map(|b| b.cluster.clone())
        .collect();
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
    let mut decisions = Vec::with_capacity(bindings.at.len().min(MAX_DECISIONS) + 1);
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

/// Why a cluster is filtered out, as KubeFleet's `Status.String()` words it.
fn unschedulable(reason: impl std::fmt::Display) -> String {
    format!("ClusterUnschedulable, {reason}")
}

fn eligibility(c: &Cluster) -> Result<(), String> {
    if c.healthy {
        Ok(())
    } else {
        Err(format!(
            "cluster is not connected to the fleet: {}",
            c.health_reason
                .as_deref()
                .unwrap_or("its API server did not answer the last probe")
        ))
    }
}

/// Why the filters drop a cluster; worded (as KubeFleet's `Status.String()`) only for the few
/// decisions that list it.
#[derive(Debug, Clone, Copy)]
enum Filtered<'a> {
    NoAffinityTerm,
    Ineligible(&'a Cluster),
    NamespaceMissing,
    Taint(&'a Taint),
    Topology(&'a TopologySpreadConstraint),
}

impl Filtered<'_> {
    fn reason(&self) -> String {
        match self {
            Filtered::NoAffinityTerm => unschedulable(
                "cluster does not match with any of the required cluster affinity terms",
            ),
            Filtered::Ineligible(c) => unschedulable(eligibility(c).err().unwrap_or_default()),
            Filtered::NamespaceMissing => {
                unschedulable("target namespace does not exist on cluster")
            }
            Filtered::Taint(t) => unschedulable(taint_reason(t)),
            Filtered::Topology(constraint) => unschedulable(format!(
                "violated doNotSchedule topology spread constraint {:?} (max skew {})",
                constraint.topology_key,
                constraint.max_skew.unwrap_or(1)
            )),
        }
    }
}

/// A placement's label selectors, worked out once over the whole fleet (see [`LabelIndex`]).
struct Selectors {
    /// Per required term: the clusters its label selector matches (`None`: no label selector).
    /// `None` when the placement has no required affinity.
    required: Option<Vec<Option<ClusterBits>>>,
    /// Per required term, per expression of its property selector: the value to compare with
    /// and the property's values.
    wanted: Vec<Vec<Wanted>>,
    /// Per preferred term, the same as `required`.
    preferred: Vec<Option<ClusterBits>>,
    /// Per preferred term with a property sorter: the property's values and its range over
    /// the members.
    sorters: Vec<Option<Sorter>>,
}

impl Selectors {
    fn new(input: &Input, cache: &mut Cache) -> Self {
        let index = input.fleet.label_index();
        let terms = |sel: Option<&LabelSelector>| sel.map(|s| index.select(s));
        let affinity = input
            .policy
            .affinity
            .as_ref()
            .and_then(|a| a.cluster_affinity.as_ref());
        let required = affinity.and_then(|ca| {
            ca.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
        let preferred = affinity
            .map(|ca| {
                ca.preferred_during_scheduling_ignored_during_execution
                    .as_slice()
            })
            .unwrap_or_default();
        Selectors {
            required: required.map(|req| {
                req.cluster_selector_terms
                    .iter()
                    .map(|t| terms(t.label_selector.as_ref()))
                    .collect()
            }),
            wanted: required
                .map(|req| {
                    let mut expressions = |t: &ClusterSelectorTerm| {
                        let exps = t
                            .property_selector
                            .iter()
                            .flat_map(|ps| &ps.match_expressions);
                        exps.map(|e| {
                            // Validation guarantees exactly one well-formed value.
                            let want = e.values.first().and_then(|v| Quantity::parse(v).ok());
                            (want.map(|q| q.0), cache.column(input.fleet, &e.name))
                        })
                        .collect()
                    };
                    req.cluster_selector_terms
                        .iter()
                        .map(&mut expressions)
                        .collect()
                })
                .unwrap_or_default(),
            preferred: preferred
                .iter()
                .map(|p| terms(p.preference.label_selector.as_ref()))
                .collect(),
            sorters: preferred
                .iter()
                .map(|p| {
                    let sorter = p.preference.property_sorter.as_ref()?;
                    let column = cache.column(input.fleet, &sorter.name);
                    Some((column, cache.extremes(input.fleet, &sorter.name)))
                })
                .collect(),
        }
    }
}

/// Whether the label selector of a term (worked out in `bits`) matches the `index`-th cluster.
fn labels_match(bits: &Option<ClusterBits>, index: usize) -> bool {
    bits.as_ref().is_none_or(|b| b.contains(index))
}

/// The filter chain shared by PickAll and PickN (TSC excepted): `Ok(true)` passes, `Ok(false)`
/// means already selected (skipped), `Err` carries why the filters drop it. `index` is the
/// cluster's position in the fleet.
fn filter<'c>(
    input: &Input<'c>,
    selectors: &Selectors,
    bindings: &Bindings,
    index: usize,
    c: &'c Cluster,
) -> Result<Result<bool, Filtered<'c>>, CycleError> {
    Ok(match static_filter(input, selectors, index, c)? {
        Err(why) => Err(why),
        Ok(()) => Ok(!bindings.is_current(index)),
    })
}

/// The filters that do not depend on the bindings: required affinity, eligibility, taints.
fn static_filter<'c>(
    input: &Input<'c>,
    selectors: &Selectors,
    index: usize,
    c: &'c Cluster,
) -> Result<Result<(), Filtered<'c>>, CycleError> {
    if let (Some(req), Some(bits)) = (
        input
            .policy
            .affinity
            .as_ref()
            .and_then(|a| a.cluster_affinity.as_ref())
            .and_then(|ca| {
                ca.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
        &selectors.required,
    ) {
        let mut matched = false;
        let terms = req
            .cluster_selector_terms
            .iter()
            .zip(bits)
            .zip(&selectors.wanted);
        for ((term, bits), wanted) in terms {
            if labels_match(bits, index) && properties_match(term, wanted, index, c)? {
                matched = true;
                break;
            }
        }
        if !matched {
            return Ok(Err(Filtered::NoAffinityTerm));
        }
    }
    if !c.healthy {
        return Ok(Err(Filtered::Ineligible(c)));
    }
    // NamespaceAffinity (pkg/scheduler/framework/plugins/namespaceaffinity/filtering.go): a
    // ResourcePlacement goes only where its namespace exists, when the member's namespaces are
    // known; unknown (KubeFleet: no NamespaceCollectionSucceeded condition), every cluster passes.
    if let (Some(ns), Some(known)) = (input.key.namespace.as_deref(), c.namespaces.as_ref()) {
        if !known.contains(ns) {
            return Ok(Err(Filtered::NamespaceMissing));
        }
    }
    if let Some(t) = untolerated_taint(&input.policy.tolerations, c) {
        return Ok(Err(Filtered::Taint(t)));
    }
    Ok(Ok(()))
}

/// The property selector of a term (its label selector is checked first, through [`Selectors`]).
/// `wanted` holds each expression's value, parsed, and the property over the fleet; `index` is
/// the cluster's position there.
fn properties_match(
    term: &ClusterSelectorTerm,
    wanted: &[Wanted],
    index: usize,
    c: &Cluster,
) -> Result<bool, CycleError> {
    let Some(ps) = &term.property_selector else {
        return Ok(true);
    };
    for (exp, (want, column)) in ps.match_expressions.iter().zip(wanted) {
        let value = match column[index] {
            Prop::Missing => return Ok(false),
            Prop::Value(v) => v,
            Prop::Invalid => return Err(invalid_property(c, &exp.name)),
        };
        let Some(want) = *want else {
            return Ok(false);
        };
        let ok = match exp.operator {
            PropertyOperator::Eq => value == want,
            PropertyOperator::Ne => value != want,
            PropertyOperator::Gt => value > want,
            PropertyOperator::Ge => value >= want,
            PropertyOperator::Lt => value < want,
            PropertyOperator::Le => value <= want,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn invalid_property(c: &Cluster, property: &str) -> CycleError {
    CycleError {
        cluster: c.name.to_string(),
        property: property.to_string(),
        value: match c.property(property) {
            Some(Err(raw)) => raw,
            _ => String::new(),
        },
    }
}

/// The first taint of the cluster no toleration tolerates.
fn untolerated_taint<'c>(tolerations: &[Toleration], c: &'c Cluster) -> Option<&'c Taint> {
    c.taints.iter().find(|t| {
        !tolerations.iter().any(|tol| {
            let op = tol.operator.unwrap_or_default();
            // The only effect is NoSchedule, so a toleration's effect always matches.
            match op {
                TolerationOperator::Exists => tol.key.is_empty() || tol.key == t.key,
                TolerationOperator::Equal => tol.key == t.key && tol.value == t.value,
            }
        })
    })
}

/// A taint as KubeFleet's `%+v` words it.
fn taint_reason(t: &Taint) -> String {
    format!(
        "taint {{Key:{} Value:{} Effect:NoSchedule}} cannot be tolerated",
        t.key, t.value
    )
}

fn pick_all(input: &Input, bindings: &mut Bindings, cache: &mut Cache) -> Outcome {
    let selectors = Selectors::new(input, cache);
    // Positions, ascending.
    let mut picked: Vec<usize> = Vec::with_capacity(input.fleet.clusters.len());
    let mut filtered = Vec::with_capacity(input.fleet.clusters.len());
    for (i, c) in input.fleet.clusters.iter().enumerate() {
        if !c.fleet_member {
            continue;
        }
        match filter(input, &selectors, bindings, i, c)? {
            Ok(true) => picked.push(i),
            Ok(false) => {}
            Err(why) => filtered.push((i, c, why)),
        }
    }
    // KubeFleet wraps every cluster that passed the PickAll filters with a zero `ClusterScore`
    // (pkg/scheduler/framework/framework.go, runAllPluginsForPickAllPlacementType), so its
    // bindings and decisions carry "affinity score: 0, topology spread score: 0".
    for &i in &picked {
        bindings.pick(i, Some((0, 0)));
    }
    bindings.unschedule_obsolete_except(|i| picked.binary_search(&i).is_ok());
    let mut decisions = binding_decisions(bindings, true);
    add_filtered(
        &mut decisions,
        bindings,
        &filtered,
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
    filtered: &[(usize, &Cluster, Filtered)],
    room: usize,
) {
    let slots = MAX_DECISIONS.saturating_sub(decisions.len()).min(room);
    let extra = filtered
        .iter()
        .take(slots)
        .filter(|(i, _, _)| !bindings.is_current(*i))
        .map(|(_, c, why)| ClusterDecision {
            cluster: c.name.clone(),
            selected: false,
            affinity_score: None,
            topology_spread_score: None,
            score: None,
            reason: Reason::text(why.reason()),
        });
    decisions.extend(extra);
}

fn pick_n(input: &Input, bindings: &mut Bindings, cache: &mut Cache) -> Outcome {
    let n = input.policy.number_of_clusters.unwrap_or(0).max(0) as usize;
    let present = bindings.current().count();
    let obsolete = bindings
        .at
        .iter()
        .filter(|(i, _)| bindings.is_obsolete(*i))
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
    // Members, and their positions in the fleet.
    let (members, positions): (Vec<&Cluster>, Vec<usize>) = input
        .fleet
        .clusters
        .iter()
        .enumerate()
        .filter(|(_, c)| c.fleet_member)
        .map(|(i, c)| (c, i))
        .unzip();
    // The filters other than "already selected" and the affinity score do not change from one
    // cycle to the next: each is worked out once, when a cycle first needs it (so the first
    // error is the one the cycles would meet in order).
    let mut static_filters: Vec<Option<Result<(), Filtered>>> = vec![None; members.len()];
    let mut affinities: Vec<Option<i32>> = vec![None; members.len()];
    let topology = TopologyDomains::new(input.fleet, constraints, cache);
    let mut last_not_picked: Vec<(&ClusterName, i32, i32)> = Vec::new();
    let mut last_filtered: Vec<(usize, &Cluster, Filtered)> = Vec::new();
    loop {
        let present = bindings.current().count();
        if present >= n {
            break;
        }
        let desired = n - present;
        // PostBatch: any spread constraint limits a cycle to one pick.
        let batch = if constraints.is_empty() { desired } else { 1 };
        let tsc = topology.state(bindings);
        let mut scored: Vec<Scored> = Vec::with_capacity(members.len());
        let mut filtered: Vec<(usize, &Cluster, Filtered)> = Vec::with_capacity(members.len());
        for (i, &c) in members.iter().enumerate() {
            let passed = match static_filters[i] {
                Some(r) => r,
                None => {
                    *static_filters[i].insert(static_filter(input, &selectors, positions[i], c)?)
                }
            };
            if let Err(why) = passed {
                filtered.push((positions[i], c, why));
                continue;
            }
            if bindings.is_current(positions[i]) {
                continue;
            }
            let topology = match tsc.score(positions[i]) {
                Err(constraint) => {
                    filtered.push((positions[i], c, Filtered::Topology(constraint)));
                    continue;
                }
                Ok(t) => t,
            };
            let affinity = match affinities[i] {
                Some(a) => a,
                None => *affinities[i].insert(affinity_score(input, &selectors, positions[i], c)?),
            };
            let obsolete = i32::from(bindings.is_obsolete(positions[i]));
            scored.push(Scored {
                cluster: c,
                position: positions[i],
                topology,
                affinity,
                obsolete,
            });
        }
        let k = batch.min(scored.len());
        // Only the picks and the best of the rest (listed in the decisions) need an order;
        // `rank` is total (names are unique), so this is the full sort's prefix.
        let ranked = (k + MAX_UNSELECTED_DECISIONS).min(scored.len());
        if ranked > 0 && ranked < scored.len() {
            scored.select_nth_unstable_by(ranked - 1, rank);
        }
        scored[..ranked].sort_by(rank);
        let picked: Vec<(usize, i32, i32)> = scored[..k]
            .iter()
            .map(|s| (s.position, s.affinity, s.topology))
            .collect();
        last_not_picked = scored[k..ranked]
            .iter()
            .map(|s| (&s.cluster.name, s.affinity, s.topology))
            .collect();
        last_filtered = filtered;
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

/// Preferred affinity: full weight for a matching term, or the weight interpolated over the
/// property's range in the whole fleet, rounded half away from zero.
fn affinity_score(
    input: &Input,
    selectors: &Selectors,
    index: usize,
    c: &Cluster,
) -> Result<i32, CycleError> {
    let Some(ca) = input
        .policy
        .affinity
        .as_ref()
        .and_then(|a| a.cluster_affinity.as_ref())
    else {
        return Ok(0);
    };
    let mut total = 0i32;
    let terms = ca
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .zip(&selectors.preferred)
        .zip(&selectors.sorters);
    for ((pref, bits), sorter_values) in terms {
        if pref.weight == 0 || !labels_match(bits, index) {
            continue;
        }
        let term = &pref.preference;
        let Some(sorter) = &term.property_sorter else {
            total += pref.weight;
            continue;
        };
        let Some((column, extremes)) = sorter_values else {
            continue;
        };
        let v = match column[index] {
            Prop::Missing => continue,
            Prop::Value(v) => v,
            Prop::Invalid => return Err(invalid_property(c, &sorter.name)),
        };
        total += interpolate(v, *extremes, sorter.sort_order, pref.weight);
    }
    Ok(total)
}

/// KubeFleet's `interpolateWeightFor`: float64 ratio, Go `math.Round` (half away from zero).
pub fn interpolate(v: f64, extremes: Option<(f64, f64)>, order: SortOrder, weight: i32) -> i32 {
    let Some((min, max)) = extremes else {
        return 0;
    };
    if max == min {
        return 0;
    }
    let ratio = (v - min) / (max - min);
    let w = f64::from(weight);
    let score = match order {
        SortOrder::Descending => ratio * w,
        SortOrder::Ascending => (1.0 - ratio) * w,
    };
    score.round() as i32
}

/// The topology domains of a placement: for each constraint (DoNotSchedule first, as they are
/// evaluated), each member's domain.
struct TopologyDomains<'a> {
    constraints: Vec<ConstraintDomains<'a>>,
}

struct ConstraintDomains<'a> {
    constraint: &'a TopologySpreadConstraint,
    domains: Rc<Domains>,
}

impl<'a> TopologyDomains<'a> {
    fn new(fleet: &Fleet, constraints: &'a [TopologySpreadConstraint], cache: &mut Cache) -> Self {
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

    /// The state of one cycle: bindings counted per domain.
    fn state(&self, bindings: &Bindings) -> TopologyState<'_> {
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
                    (cd, DomainCounts::new(counts))
                })
                .collect(),
        }
    }
}

/// Topology spread state of one cycle.
struct TopologyState<'a> {
    constraints: Vec<(&'a ConstraintDomains<'a>, DomainCounts)>,
}

/// Bindings per domain (every domain of the members, empty ones included).
struct DomainCounts {
    counts: Vec<usize>,
    smallest: usize,
    second_smallest: usize,
    largest: usize,
}

impl DomainCounts {
    fn new(counts: Vec<usize>) -> Self {
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
    fn will_violate(&self, domain: usize, max_skew: i32) -> (bool, i32) {
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
    fn score(&self, position: usize) -> Result<i32, &'a TopologySpreadConstraint> {
        let mut score = 0;
        for (cd, counts) in &self.constraints {
            let Some(domain) = cd.domains.by_position[position] else {
                continue;
            };
            let constraint = cd.constraint;
            let max_skew = constraint.max_skew.unwrap_or(1);
            let (violated, change) = counts.will_violate(domain, max_skew);
            match (violated, constraint.when_unsatisfiable.unwrap_or_default()) {
                (true, UnsatisfiableAction::DoNotSchedule) => return Err(constraint),
                (true, UnsatisfiableAction::ScheduleAnyway) => score -= TSC_VIOLATION_PENALTY,
                (false, _) => score -= change,
            }
        }
        Ok(score)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_matches_the_api_docs_example() {
        // Range [10, 100], weight 100, value 20: 11 Descending, 89 Ascending.
        assert_eq!(
            interpolate(20.0, Some((10.0, 100.0)), SortOrder::Descending, 100),
            11
        );
        assert_eq!(
            interpolate(20.0, Some((10.0, 100.0)), SortOrder::Ascending, 100),
            89
        );
        assert_eq!(
            interpolate(5.0, Some((5.0, 5.0)), SortOrder::Descending, 100),
            0
        );
        assert_eq!(interpolate(5.0, None, SortOrder::Descending, 100), 0);
        // Half away from zero, negative weights too: 0.5 * -5 = -2.5 rounds to -3.
        assert_eq!(
            interpolate(15.0, Some((10.0, 20.0)), SortOrder::Descending, -5),
            -3
        );
        assert_eq!(
            interpolate(15.0, Some((10.0, 20.0)), SortOrder::Descending, 5),
            3
        );
    }

    fn counts(values: &[usize]) -> DomainCounts {
        DomainCounts::new(values.to_vec())
    }

    #[test]
    fn skew_changes_follow_will_violate() {
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
