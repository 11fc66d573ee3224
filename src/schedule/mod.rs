//! The scheduler: which member clusters each placement targets, with scores and reasons.
//! KubeFleet placements follow KubeFleet's scheduler (`kubefleet`), OCM placements OCM's (`ocm`).
//! Pure: the fleet view, the previous bindings and the clock are parameters.

pub mod fleet;
pub mod kubefleet;
pub mod labels;
pub mod ocm;
pub mod work;

pub use fleet::{Cluster, Fleet, Inventory, InventoryCluster};

use crate::fast_hash::HashMap;
use crate::model::{ClusterName, PlacementKey, PlacementKind};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// KubeFleet binding states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BindingState {
    Scheduled,
    Bound,
    Unscheduled,
}

/// One placement's binding to one cluster, as kept between scheduling runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    pub cluster: ClusterName,
    pub state: BindingState,
    /// The policy snapshot index the binding was made (or last patched) for.
    pub policy_index: u64,
    /// Scores recorded at pick time (PickN), used to choose what to drop on downscale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_score: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_score: Option<i32>,
    /// For an unscheduled binding: the state it had, restored if the cluster is picked again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_state: Option<BindingState>,
}

/// One line of a placement's decisions (`gitfleet schedule`). Serialized with the reason as text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "DecisionRecord")]
pub struct ClusterDecision {
    pub cluster: ClusterName,
    pub selected: bool,
    pub affinity_score: Option<i32>,
    pub topology_spread_score: Option<i32>,
    /// OCM placements: the total prioritizer score.
    pub score: Option<i64>,
    pub reason: Reason,
}

/// Why a cluster was or was not picked.
#[derive(Debug, Clone)]
pub enum Reason {
    /// KubeFleet's "picked by scheduling policy", worded from the decision's cluster and scores
    /// when it is shown: a fleet-wide placement has thousands of them, and writing each out
    /// would be a large share of scheduling time.
    Picked,
    /// An OCM placement's decision for a cluster that passed its filters, worded from the
    /// placement's scores when it is shown, for the same reason.
    Ranked(ocm::RankedReason),
    /// Any other reason. Shared: one filter reason often stands for many clusters.
    Text(Arc<str>),
}

/// Equal when they say the same: a stored decision (its reason read back as text) equals the
/// fresh one that would have written it.
impl PartialEq for Reason {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Reason::Picked, Reason::Picked) => true,
            (Reason::Text(a), Reason::Text(b)) => a == b,
            (Reason::Ranked(a), Reason::Ranked(b)) => a == b,
            (Reason::Ranked(r), Reason::Text(t)) | (Reason::Text(t), Reason::Ranked(r)) => {
                r.text() == **t
            }
            (Reason::Picked, _) | (_, Reason::Picked) => false,
        }
    }
}

impl Eq for Reason {}

impl Reason {
    pub fn text(text: impl Into<Arc<str>>) -> Reason {
        Reason::Text(text.into())
    }
}

impl ClusterDecision {
    /// The reason as KubeFleet (or gitfleet, for OCM) words it.
    pub fn reason(&self) -> Cow<'_, str> {
        match &self.reason {
            Reason::Text(t) => Cow::Borrowed(t),
            Reason::Picked => Cow::Owned(picked_reason(&self.cluster, self.scores())),
            Reason::Ranked(r) => Cow::Owned(r.text()),
        }
    }

    /// KubeFleet's (affinity, topology spread) scores, when the decision has both.
    fn scores(&self) -> Option<(i32, i32)> {
        self.affinity_score.zip(self.topology_spread_score)
    }
}

/// KubeFleet's reason for a picked cluster: with the scores for PickN and PickAll (zeros), without for PickFixed.
pub fn picked_reason(cluster: &str, scores: Option<(i32, i32)>) -> String {
    match scores {
        Some((a, t)) => format!(
            "Successfully scheduled resources for placement in \"{cluster}\" (affinity score: {a}, topology spread score: {t}): picked by scheduling policy"
        ),
        None => format!("Successfully scheduled resources for placement in \"{cluster}\": picked by scheduling policy"),
    }
}

impl Serialize for ClusterDecision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let optional = [
            self.affinity_score.is_some(),
            self.topology_spread_score.is_some(),
            self.score.is_some(),
        ];
        let fields = 3 + optional.iter().filter(|o| **o).count();
        let mut st = s.serialize_struct("ClusterDecision", fields)?;
        st.serialize_field("cluster", &self.cluster)?;
        st.serialize_field("selected", &self.selected)?;
        match self.affinity_score {
            Some(a) => st.serialize_field("affinityScore", &a)?,
            None => st.skip_field("affinityScore")?,
        }
        match self.topology_spread_score {
            Some(t) => st.serialize_field("topologySpreadScore", &t)?,
            None => st.skip_field("topologySpreadScore")?,
        }
        match self.score {
            Some(t) => st.serialize_field("score", &t)?,
            None => st.skip_field("score")?,
        }
        st.serialize_field("reason", &*self.reason())?;
        st.end()
    }
}

/// A decision as stored (the state store, `-o json`): the reason as text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DecisionRecord {
    cluster: ClusterName,
    selected: bool,
    #[serde(default)]
    affinity_score: Option<i32>,
    #[serde(default)]
    topology_spread_score: Option<i32>,
    #[serde(default)]
    score: Option<i64>,
    reason: String,
}

impl From<DecisionRecord> for ClusterDecision {
    fn from(r: DecisionRecord) -> Self {
        let mut d = ClusterDecision {
            cluster: r.cluster,
            selected: r.selected,
            affinity_score: r.affinity_score,
            topology_spread_score: r.topology_spread_score,
            score: r.score,
            reason: Reason::Picked,
        };
        // A stored decision equals the fresh one that would have written it.
        if r.reason != picked_reason(&d.cluster, d.scores()) {
            d.reason = Reason::text(r.reason);
        }
        d
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn new(type_: &str, ok: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.into(),
            status: if ok { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// OCM decision groups (decisionStrategy): clusters of each group in decision order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroup {
    pub group_name: String,
    pub group_index: usize,
    pub clusters: Vec<ClusterName>,
}

/// What the scheduler decided for one placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSchedule {
    #[serde(flatten)]
    pub key: PlacementKey,
    /// KubeFleet placements: the policy snapshot index the decisions are for, and its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_snapshot_index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_hash: Option<String>,
    /// Selected clusters, sorted by name.
    #[serde(default)]
    pub selected: Vec<ClusterName>,
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// KubeFleet: the bindings after this run (what the state store keeps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<Binding>,
    /// OCM: the decision groups, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroup>,
}

impl PlacementSchedule {
    /// The schedule with its lists in allocations of their size: it is kept until the
    /// placement is scheduled again, and a fleet-wide placement's lists are long.
    pub fn fitted(mut self) -> PlacementSchedule {
        use crate::exact_fit::fit;
        fit(&mut self.selected);
        fit(&mut self.decisions);
        fit(&mut self.conditions);
        fit(&mut self.bindings);
        fit(&mut self.decision_groups);
        for group in &mut self.decision_groups {
            fit(&mut group.clusters);
        }
        self
    }

    /// The message of a placement held for invalid resource selectors (its `Scheduled`
    /// condition is False with reason `InvalidResourceSelectors`): it keeps its previous
    /// decisions and bindings, and the rollout leaves what it placed as it is. `None` for a
    /// placement scheduled normally.
    pub fn held(&self) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| {
                c.type_ == kubefleet::SCHEDULED
                    && c.reason == crate::snapshot::INVALID_RESOURCE_SELECTORS
            })
            .map(|c| c.message.as_str())
    }
}

/// Everything scheduled for one commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub commit: String,
    pub placements: Vec<Arc<PlacementSchedule>>,
}

/// The previous run's results, by placement. Schedules are shared (`Arc`) between the
/// scheduler's memo, the daemon's state and its status: a placement the look did not change is
/// neither copied nor compared field by field.
pub type Previous = BTreeMap<PlacementKey, Arc<PlacementSchedule>>;

/// Whether two lists of schedules are equal, comparing shared schedules by address first.
/// (`Arc`'s own `==` cannot: a schedule holds scores that are floats, so it is not `Eq`.)
pub fn same_schedules(a: &[Arc<PlacementSchedule>], b: &[Arc<PlacementSchedule>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_schedule(a, b))
}

/// [`same_schedules`] for one placement.
pub fn same_schedule(a: &Arc<PlacementSchedule>, b: &Arc<PlacementSchedule>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// Schedules every placement of a commit: KubeFleet placements in catalog order, then OCM
/// placements, then plain ManifestWorks. `previous` holds the last run's results (bindings, decisions, policy index);
/// `now_unix` is the clock, for OCM's `tolerationSeconds`.
///
/// A placement in `invalid` (its resource selection fails: [`crate::snapshot::invalid_selections`])
/// is held as KubeFleet's placement controller holds it: no new policy snapshot, so its previous
/// schedule stays as it was (policy snapshot, bindings, decisions, selected clusters), and its
/// condition is `Scheduled=False`, reason `InvalidResourceSelectors`, with KubeFleet's message;
/// one new in this commit selects nothing. KubeFleet's scheduler would still reschedule the old
/// policy snapshot when the inventory changes meanwhile; gitfleet keeps the decisions as they
/// were until the selectors are fixed.
pub fn schedule_commit(
    cat: &crate::catalog::Catalog,
    invalid: &crate::snapshot::InvalidSelections,
    fleet: &Fleet,
    previous: &Previous,
    now_unix: i64,
) -> Vec<Arc<PlacementSchedule>> {
    schedule_with(cat, invalid, fleet, previous, now_unix, None)
}

/// [`schedule_commit`], reusing the KubeFleet schedules `memo` kept for placements whose inputs
/// did not change since (and keeping this run's for the next). The result is the same.
/// The fleet is shared: a look that reuses the last one's is known to have the same fleet
/// without comparing every cluster.
pub fn schedule_commit_memoized(
    cat: &crate::catalog::Catalog,
    invalid: &crate::snapshot::InvalidSelections,
    fleet: &Arc<Fleet>,
    previous: &Previous,
    now_unix: i64,
    memo: &mut ScheduleMemo,
) -> Vec<Arc<PlacementSchedule>> {
    let same_fleet = memo
        .fleet
        .as_ref()
        .is_some_and(|f| Arc::ptr_eq(f, fleet) || **f == **fleet);
    if !same_fleet {
        memo.placements.clear();
        memo.fleet = Some(fleet.clone());
    }
    schedule_with(cat, invalid, fleet, previous, now_unix, Some(memo))
}

/// Each KubeFleet placement's last schedule with what it was worked out from (the daemon
/// looks often, and most looks change no placement's inputs). The scheduler is a function of
/// the policy (its snapshot index and hash), the fleet and the previous bindings alone, so
/// the same inputs give the same schedule without running it again.
#[derive(Debug, Default)]
pub struct ScheduleMemo {
    fleet: Option<Arc<Fleet>>,
    placements: HashMap<PlacementKey, Memoized>,
    reused: usize,
}

impl ScheduleMemo {
    /// Placements whose schedule the last run reused.
    pub fn reused(&self) -> usize {
        self.reused
    }
}

#[derive(Debug)]
struct Memoized {
    /// The placement object it was worked out for: the same object (a look at the same
    /// commit) has the same policy, with nothing to compare.
    source: Arc<serde_json::Value>,
    /// The defaulted policy and its hash (hashing is a serialisation: not done again for the
    /// same policy).
    policy: crate::model::placement::PlacementPolicy,
    policy_hash: String,
    policy_index: u64,
    /// The bindings it was scheduled from; `None`: the very ones it produced (a settled
    /// placement's, most of the time), not kept twice.
    from: Option<Vec<Binding>>,
    schedule: Arc<PlacementSchedule>,
}

fn schedule_with(
    cat: &crate::catalog::Catalog,
    invalid: &crate::snapshot::InvalidSelections,
    fleet: &Fleet,
    previous: &Previous,
    now_unix: i64,
    mut memo: Option<&mut ScheduleMemo>,
) -> Vec<Arc<PlacementSchedule>> {
    if let Some(m) = memo.as_deref_mut() {
        m.reused = 0;
    }
    let mut memoized = 0;
    let mut cache = kubefleet::Cache::default();
    let mut out = Vec::new();
    for entry in &cat.placements {
        let placement = &entry.spec;
        let key = cat.placement_key(entry);
        let prev = previous.get(&key);
        if let Some(invalid) = invalid.get(&key) {
            out.push(Arc::new(
                held(key, prev.map(|p| &**p), &invalid.message).fitted(),
            ));
            continue;
        }
        let source = &cat.objects[entry.index].value;
        let memoized_here = memo.as_deref().and_then(|m| m.placements.get(&key));
        memoized += usize::from(memoized_here.is_some());
        // The same object: its policy is the memo's, not built again to compare.
        let (known, policy) = match memoized_here {
            Some(m) if Arc::ptr_eq(&m.source, source) => (Some(m), None),
            m => {
                let policy = placement.spec.policy_or_default();
                (m.filter(|m| m.policy == policy), Some(policy))
            }
        };
        let hash = match known {
            Some(m) => m.policy_hash.clone(),
            None => crate::snapshot::policy_hash(policy.as_ref().expect("built when unknown")),
        };
        let index =
            match prev.and_then(|p| Some((p.policy_snapshot_index?, p.policy_hash.as_deref()?))) {
                Some((i, h)) if h == hash => i,
                Some((i, _)) => i + 1,
                None => 0,
            };
        let bindings = prev.map(|p| p.bindings.as_slice()).unwrap_or_default();
        // The previous schedule is often the memo's own (shared): its bindings need no compare.
        let same_bindings = |m: &Memoized| match (&m.from, prev) {
            (None, Some(p)) if Arc::ptr_eq(p, &m.schedule) => true,
            (from, _) => from.as_deref().unwrap_or(&m.schedule.bindings) == bindings,
        };
        if let Some(m) = known.filter(|m| m.policy_index == index && same_bindings(m)) {
            out.push(m.schedule.clone());
            if let Some(memo) = memo.as_deref_mut() {
                memo.reused += 1;
            }
            continue;
        }
        let policy = policy.unwrap_or_else(|| placement.spec.policy_or_default());
        let input = kubefleet::Input {
            key: key.clone(),
            policy: &policy,
            policy_index: index,
            policy_hash: hash.clone(),
            fleet,
            bindings,
        };
        let scheduled = Arc::new(kubefleet::schedule(&input, &mut cache).fitted());
        if let Some(memo) = memo.as_deref_mut() {
            let from = (scheduled.bindings != bindings).then(|| bindings.to_vec());
            memo.placements.insert(
                key,
                Memoized {
                    source: source.clone(),
                    policy,
                    policy_hash: hash,
                    policy_index: index,
                    from,
                    schedule: scheduled.clone(),
                },
            );
        }
        out.push(scheduled);
    }
    // Placements gone from the commit are forgotten (every one memoized was found: none).
    if let Some(memo) = memo.filter(|m| m.placements.len() != memoized) {
        let keys: crate::fast_hash::HashSet<PlacementKey> = cat
            .placements
            .iter()
            .map(|e| cat.placement_key(e))
            .collect();
        memo.placements.retain(|k, _| keys.contains(k));
    }
    out.extend(
        ocm::schedule_all(cat, fleet, previous, now_unix)
            .into_iter()
            .map(|s| Arc::new(s.fitted())),
    );
    out.extend(
        work::schedule_all(cat, fleet)
            .into_iter()
            .map(|s| Arc::new(s.fitted())),
    );
    out
}

/// A held placement's schedule: the previous one unchanged but for its condition, or nothing
/// selected when it has none.
fn held(key: PlacementKey, prev: Option<&PlacementSchedule>, message: &str) -> PlacementSchedule {
    let condition = Condition::new(
        kubefleet::SCHEDULED,
        false,
        crate::snapshot::INVALID_RESOURCE_SELECTORS,
        message,
    );
    match prev {
        Some(p) => PlacementSchedule {
            conditions: vec![condition],
            ..p.clone()
        },
        None => PlacementSchedule {
            key,
            policy_snapshot_index: None,
            policy_hash: None,
            selected: vec![],
            decisions: vec![],
            conditions: vec![condition],
            bindings: vec![],
            decision_groups: vec![],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(cluster: &str, scores: Option<(i32, i32)>, reason: Reason) -> ClusterDecision {
        ClusterDecision {
            cluster: cluster.into(),
            selected: true,
            affinity_score: scores.map(|s| s.0),
            topology_spread_score: scores.map(|s| s.1),
            score: None,
            reason,
        }
    }

    fn commit(namespace: &str) -> crate::catalog::Catalog {
        let mut yaml = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: app}}\n---\n\
             apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
             metadata: {{name: p}}\nspec:\n\
             \x20 resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: {namespace}}}]\n\
             \x20 policy: {{placementType: PickN, numberOfClusters: 1}}\n"
        );
        for m in ["m1", "m2"] {
            yaml.push_str(&format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: {m}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
            ));
        }
        let (cat, diags) = crate::analyze(&[crate::catalog::SourceFile {
            path: "fleet.yaml".into(),
            content: yaml.into_bytes(),
        }]);
        assert!(diags.is_empty(), "{diags:#?}");
        cat
    }

    fn run(cat: &crate::catalog::Catalog, previous: &Previous) -> PlacementSchedule {
        let invalid = crate::snapshot::invalid_selections(cat);
        let fleet = Fleet::build(cat, None);
        (*schedule_commit(cat, &invalid, &fleet, previous, 0).remove(0)).clone()
    }

    /// A fleet of four members and three placements, `n` the PickN placement's count and
    /// `zone` the first member's label.
    fn fleet_commit(n: u32, zone: &str) -> crate::catalog::Catalog {
        let mut yaml = String::from("apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n");
        for (name, policy) in [
            ("all", "{placementType: PickAll}".to_string()),
            (
                "some",
                format!("{{placementType: PickN, numberOfClusters: {n}}}"),
            ),
            (
                "fixed",
                "{placementType: PickFixed, clusterNames: [m2, m9]}".to_string(),
            ),
        ] {
            yaml.push_str(&format!(
                "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
                 metadata: {{name: {name}}}\nspec:\n\
                 \x20 resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: app}}]\n\
                 \x20 policy: {policy}\n"
            ));
        }
        for m in ["m1", "m2", "m3", "m4"] {
            let zone = if m == "m1" { zone } else { "b" };
            yaml.push_str(&format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: {m}, labels: {{zone: {zone}}}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
            ));
        }
        let (cat, diags) = crate::analyze(&[crate::catalog::SourceFile {
            path: "fleet.yaml".into(),
            content: yaml.into_bytes(),
        }]);
        assert!(diags.is_empty(), "{diags:#?}");
        cat
    }

    /// The memoized scheduler gives what the plain one gives, look after look, as bindings are
    /// bound, the fleet changes and a policy changes; and it does reuse.
    #[test]
    fn the_memoized_schedule_is_the_plain_schedule() {
        let mut memo = ScheduleMemo::default();
        let mut previous = Previous::new();
        let mut reused = 0;
        let looks = [
            (1, "a"),
            (1, "a"),
            (1, "a"),
            (1, "c"),
            (1, "c"),
            (2, "c"),
            (2, "c"),
            (3, "a"),
        ];
        // A look like the last one is a look at the same commit, as the daemon's are: the same
        // catalog and the same (shared) fleet.
        let mut last: Option<((u32, &str), crate::catalog::Catalog, Arc<Fleet>)> = None;
        for (round, (n, zone)) in looks.into_iter().enumerate() {
            let (cat, fleet) = match last.take() {
                Some((look, cat, fleet)) if look == (n, zone) => (cat, fleet),
                _ => {
                    let cat = fleet_commit(n, zone);
                    let fleet = Arc::new(Fleet::build(&cat, None));
                    (cat, fleet)
                }
            };
            let invalid = crate::snapshot::invalid_selections(&cat);
            let plain = schedule_commit(&cat, &invalid, &fleet, &previous, 0);
            let memoized =
                schedule_commit_memoized(&cat, &invalid, &fleet, &previous, 0, &mut memo);
            assert_eq!(plain, memoized, "look {round}");
            reused += memo.reused();
            // What the rollout does between looks: scheduled bindings become bound.
            previous = plain
                .into_iter()
                .map(|mut p| {
                    if round % 2 == 1 {
                        for b in &mut Arc::make_mut(&mut p).bindings {
                            if b.state == BindingState::Scheduled {
                                b.state = BindingState::Bound;
                            }
                        }
                    }
                    (p.key.clone(), p)
                })
                .collect();
            last = Some(((n, zone), cat, fleet));
        }
        assert!(reused >= 6, "reused {reused}");
    }

    /// A placement whose selectors are invalid keeps its previous schedule (no new policy
    /// snapshot: KubeFleet's handleUpdate returns before taking one) with KubeFleet's condition;
    /// new, it selects nothing.
    #[test]
    fn a_placement_with_invalid_selectors_keeps_its_previous_schedule() {
        let good = run(&commit("app"), &Previous::new());
        assert_eq!(good.selected.len(), 1);
        assert_eq!(good.held(), None);
        let previous: Previous = [(good.key.clone(), Arc::new(good.clone()))].into();
        let bad = commit("kube-system");
        let held = run(&bad, &previous);
        let want = Condition::new(
            "Scheduled",
            false,
            "InvalidResourceSelectors",
            "The resource selectors are invalid: failed to process the request due to a client error: spec.resourceSelectors[0].name: namespace \"kube-system\" is reserved (fleet-* and kube-* namespaces are never propagated)",
        );
        assert_eq!(held.conditions, vec![want.clone()]);
        assert_eq!(held.held(), Some(want.message.as_str()));
        assert_eq!(
            PlacementSchedule {
                conditions: good.conditions.clone(),
                ..held
            },
            good
        );
        let new = run(&bad, &Previous::new());
        assert_eq!(new.conditions, vec![want]);
        assert!(new.selected.is_empty() && new.bindings.is_empty() && new.decisions.is_empty());
        assert_eq!(new.policy_snapshot_index, None);
    }

    /// A picked reason is worded when shown, and reads back as the same decision.
    #[test]
    fn decisions_round_trip_with_their_reason_as_text() {
        let picked = decision("east-1", Some((20, -1)), Reason::Picked);
        let json = serde_json::to_value(&picked).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "cluster": "east-1",
                "selected": true,
                "affinityScore": 20,
                "topologySpreadScore": -1,
                "reason": "Successfully scheduled resources for placement in \"east-1\" (affinity score: 20, topology spread score: -1): picked by scheduling policy",
            })
        );
        assert_eq!(
            serde_json::from_value::<ClusterDecision>(json).unwrap(),
            picked
        );
        let pick_all = decision("west", None, Reason::Picked);
        assert_eq!(
            pick_all.reason(),
            "Successfully scheduled resources for placement in \"west\": picked by scheduling policy"
        );
        let text = decision("west", None, Reason::text("filtered by Predicate"));
        let json = serde_json::to_value(&text).unwrap();
        assert_eq!(json["reason"], "filtered by Predicate");
        assert!(json.get("affinityScore").is_none());
        assert_eq!(
            serde_json::from_value::<ClusterDecision>(json).unwrap(),
            text
        );
    }
}
