//! The two large parts of a placement's status, shared with what they come from instead of
//! copied into it. Copies would make the published statuses a large part of an idle daemon's
//! memory: every binding's [`ClusterState`] copied from the rollout state and its per-cluster
//! conditions, all of it only read when a client asks for the whole document.
//!
//! - [`Clusters`] is the rollout state's own [`PlacementState`] (an `Arc`, copied on write by
//!   the daemon), read through.
//! - [`PerCluster`] keeps the step, schedule and state the conditions are worked out from
//!   ([`conditions::of_step`], pure) and works them out again when serialised.
//!
//! Clients read both as plain values; they serialise as the values they stand for, so the
//! status API's documents are unchanged.

use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::ClusterName;
use crate::rollout::conditions::{self, ClusterConditions};
use crate::rollout::{ClusterState, ClusterStates, PlacementState, StepSummary};
use crate::schedule::PlacementSchedule;

/// Per cluster: revision, health and last error, as the rollout state holds them.
#[derive(Debug, Clone, Default)]
pub struct Clusters(Option<Arc<PlacementState>>);

static NO_CLUSTERS: LazyLock<ClusterStates> = LazyLock::new(ClusterStates::new);

impl Clusters {
    /// The clusters of `state`, shared.
    pub fn of(state: Option<Arc<PlacementState>>) -> Clusters {
        Clusters(state)
    }
}

impl From<ClusterStates> for Clusters {
    fn from(clusters: ClusterStates) -> Clusters {
        Clusters(Some(Arc::new(PlacementState {
            clusters,
            ..PlacementState::default()
        })))
    }
}

impl<K: Into<ClusterName>> FromIterator<(K, ClusterState)> for Clusters {
    fn from_iter<I: IntoIterator<Item = (K, ClusterState)>>(iter: I) -> Clusters {
        let entries = iter.into_iter().map(|(k, v)| (k.into(), v));
        Clusters::from(entries.collect::<ClusterStates>())
    }
}

impl<'a> IntoIterator for &'a Clusters {
    type Item = (&'a ClusterName, &'a ClusterState);
    type IntoIter = crate::model::cluster_map::Iter<'a, ClusterName, ClusterState>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl std::ops::Deref for Clusters {
    type Target = ClusterStates;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref().map_or(&NO_CLUSTERS, |s| &s.clusters)
    }
}

impl std::ops::DerefMut for Clusters {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut Arc::make_mut(self.0.get_or_insert_with(Default::default)).clusters
    }
}

impl PartialEq for Clusters {
    fn eq(&self, other: &Clusters) -> bool {
        **self == **other
    }
}

impl Serialize for Clusters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Clusters {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Clusters, D::Error> {
        ClusterStates::deserialize(d).map(Clusters::from)
    }
}

/// Per selected cluster, KubeFleet's per-cluster conditions.
#[derive(Debug, Clone)]
pub struct PerCluster(Inner);

#[derive(Debug, Clone)]
enum Inner {
    /// As read by a client, or made by hand.
    Made(Vec<ClusterConditions>),
    /// Worked out when needed from what the daemon published; `empty` as found at publish.
    Of {
        step: Arc<StepSummary>,
        schedule: Option<Arc<PlacementSchedule>>,
        state: Option<Arc<PlacementState>>,
        empty: bool,
    },
}

impl PerCluster {
    /// The per-cluster conditions of `step` over `schedule` and `state`, kept as those, with
    /// whether there are any (as [`conditions::placement_conditions_of_step`] says).
    pub fn of(
        step: Arc<StepSummary>,
        schedule: Option<Arc<PlacementSchedule>>,
        state: Option<Arc<PlacementState>>,
        any: bool,
    ) -> PerCluster {
        PerCluster(Inner::Of {
            step,
            schedule,
            state,
            empty: !any,
        })
    }

    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Inner::Made(v) => v.is_empty(),
            Inner::Of { empty, .. } => *empty,
        }
    }

    /// The conditions (worked out again when shared).
    pub fn get(&self) -> std::borrow::Cow<'_, [ClusterConditions]> {
        match &self.0 {
            Inner::Made(v) => v.as_slice().into(),
            Inner::Of {
                step,
                schedule,
                state,
                ..
            } => conditions::of_step(step, schedule.as_deref(), state.as_deref())
                .1
                .into(),
        }
    }
}

impl Default for PerCluster {
    fn default() -> PerCluster {
        PerCluster(Inner::Made(Vec::new()))
    }
}

impl From<Vec<ClusterConditions>> for PerCluster {
    fn from(v: Vec<ClusterConditions>) -> PerCluster {
        PerCluster(Inner::Made(v))
    }
}

impl PartialEq for PerCluster {
    fn eq(&self, other: &PerCluster) -> bool {
        self.get() == other.get()
    }
}

impl Serialize for PerCluster {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for PerCluster {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PerCluster, D::Error> {
        Vec::deserialize(d).map(PerCluster::from)
    }
}

/// A list of clusters read through what holds it rather than copied: one of a step's lists
/// (applying, removing, waiting, up to date; a settled placement's up-to-date list names every
/// cluster it runs on, and the step is kept anyway: the step memo, [`PerCluster`]), or the
/// schedule's selected clusters.
pub struct SharedList<S: 'static, T: 'static>(Names<S, T>);

/// One of a step's lists of clusters.
pub type StepClusters = SharedList<StepSummary, String>;

/// A schedule's selected clusters.
pub type SelectedClusters = SharedList<PlacementSchedule, crate::model::ClusterName>;

enum Names<S: 'static, T: 'static> {
    /// As read by a client, or made by hand.
    Made(Vec<T>),
    /// The list that `list` picks of a shared source.
    Of(Arc<S>, fn(&S) -> &Vec<T>),
}

impl<S, T: Clone> Clone for SharedList<S, T> {
    fn clone(&self) -> Self {
        SharedList(match &self.0 {
            Names::Made(v) => Names::Made(v.clone()),
            Names::Of(source, list) => Names::Of(source.clone(), *list),
        })
    }
}

impl<S, T> SharedList<S, T> {
    /// `source`'s list that `list` picks, shared.
    pub fn of(source: &Arc<S>, list: fn(&S) -> &Vec<T>) -> SharedList<S, T> {
        SharedList(Names::Of(source.clone(), list))
    }
}

impl<S, T> Default for SharedList<S, T> {
    fn default() -> Self {
        SharedList(Names::Made(Vec::new()))
    }
}

impl<S, T> From<Vec<T>> for SharedList<S, T> {
    fn from(v: Vec<T>) -> Self {
        SharedList(Names::Made(v))
    }
}

impl<S, T> std::ops::Deref for SharedList<S, T> {
    type Target = Vec<T>;

    fn deref(&self) -> &Vec<T> {
        match &self.0 {
            Names::Made(v) => v,
            Names::Of(source, list) => list(source),
        }
    }
}

/// A change is made to the status's own copy, never to the source.
impl<S, T: Clone> std::ops::DerefMut for SharedList<S, T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        if let Names::Of(..) = self.0 {
            self.0 = Names::Made((**self).clone());
        }
        match &mut self.0 {
            Names::Made(v) => v,
            Names::Of(..) => unreachable!("made above"),
        }
    }
}

impl<S, T> FromIterator<T> for SharedList<S, T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        SharedList::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl<'a, S, T> IntoIterator for &'a SharedList<S, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<S, T: std::fmt::Debug> std::fmt::Debug for SharedList<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<S, T: PartialEq> PartialEq for SharedList<S, T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<S, T: Serialize> Serialize for SharedList<S, T> {
    fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        (**self).serialize(s)
    }
}

impl<'de, S, T: Deserialize<'de>> Deserialize<'de> for SharedList<S, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::deserialize(d).map(SharedList::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::BindingHealth;

    /// Shared clusters read and serialise as the state's own; a change through them is the
    /// status's own copy, never the rollout state's.
    #[test]
    fn shared_clusters_are_the_states_and_copied_only_on_write() {
        let mut state = PlacementState::default();
        state.clusters.insert(
            "m1".into(),
            ClusterState {
                health: BindingHealth::Available,
                ..ClusterState::with_health(BindingHealth::Available)
            },
        );
        let state = Arc::new(state);
        let mut shared = Clusters::of(Some(state.clone()));
        assert_eq!(
            serde_json::to_value(&shared).unwrap(),
            serde_json::to_value(&state.clusters).unwrap()
        );
        let read: Clusters =
            serde_json::from_value(serde_json::to_value(&shared).unwrap()).expect("reads back");
        assert_eq!(read, shared);
        shared.get_mut("m1").unwrap().health = BindingHealth::Pending;
        assert_eq!(state.clusters["m1"].health, BindingHealth::Available);
        assert_eq!(shared["m1"].health, BindingHealth::Pending);
        assert!(Clusters::default().is_empty());
    }

    /// Conditions kept as made serialise as the list; an empty list is left out of a status.
    #[test]
    fn per_cluster_conditions_made_by_hand_serialise_as_the_list() {
        let made = vec![ClusterConditions {
            cluster: "m1".into(),
            conditions: vec![crate::schedule::Condition::new(
                "Applied", true, "Ok", "fine",
            )],
        }];
        let per = PerCluster::from(made.clone());
        assert_eq!(
            serde_json::to_value(&per).unwrap(),
            serde_json::to_value(&made).unwrap()
        );
        let read: PerCluster = serde_json::from_value(serde_json::to_value(&per).unwrap()).unwrap();
        assert_eq!(read, per);
        assert!(!per.is_empty());
        assert!(PerCluster::default().is_empty());
    }

    /// A step's list reads and serialises as the step's own, without a copy; a change through
    /// it is the status's own copy, never the step's.
    #[test]
    fn a_steps_list_is_read_through_and_copied_only_on_write() {
        let mut step = StepSummary::new(
            "crp/a".parse().unwrap(),
            crate::rollout::Strategy::RollingUpdate,
        );
        step.up_to_date = vec!["m1".into(), "m2".into()];
        let step = Arc::new(step);
        let mut shared = StepClusters::of(&step, |s| &s.up_to_date);
        assert!(std::ptr::eq(&*shared, &step.up_to_date));
        assert_eq!(serde_json::to_string(&shared).unwrap(), r#"["m1","m2"]"#);
        let read: StepClusters = serde_json::from_str(r#"["m1","m2"]"#).unwrap();
        assert_eq!(read, shared);
        shared.push("m3".into());
        assert_eq!(*shared, ["m1", "m2", "m3"]);
        assert_eq!(step.up_to_date, ["m1", "m2"]);
    }

    #[test]
    fn a_schedules_selected_clusters_are_read_through() {
        let schedule = Arc::new(PlacementSchedule {
            key: "crp/a".parse().unwrap(),
            policy_snapshot_index: None,
            policy_hash: None,
            selected: crate::model::ClusterName::table(["m1", "m2"]),
            decisions: vec![],
            conditions: vec![],
            bindings: vec![],
            decision_groups: vec![],
        });
        let shared = SelectedClusters::of(&schedule, |p| &p.selected);
        assert!(std::ptr::eq(&*shared, &schedule.selected));
        assert_eq!(serde_json::to_string(&shared).unwrap(), r#"["m1","m2"]"#);
        let read: SelectedClusters = serde_json::from_str(r#"["m1","m2"]"#).unwrap();
        assert_eq!(read, shared);
    }
}
