//! The outcomes folded into the state.

use super::*;
use crate::model::{ClusterName, SharedText};

/// Deliveries absorbed one member at a time, each with its own rendering of the same
/// objects, share one object set; a cluster given other objects keeps its own.
#[test]
fn clusters_absorbed_apart_share_equal_object_sets() {
    let manifests = |name: &str| -> crate::rollout::work::Manifests {
        let value = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "app"}, "data": {"x": name}});
        Arc::new(vec![Manifest {
            value: Arc::new(value),
            wave: 0,
            envelope: None,
            work: None,
        }])
    };
    let mut state = RolloutState::default();
    for (cluster, name) in [("m1", "cfg"), ("m2", "cfg"), ("m3", "other"), ("m4", "cfg")] {
        let revision = Revision {
            resource_index: 0,
            rendered: cluster.into(),
        };
        let work = Work::apply(
            &app(),
            cluster,
            (manifests(name), revision),
            ApplyStrategy::default(),
            "r0".into(),
            false,
            false,
        );
        let done = Outcome::Done(BindingHealth::Available, Default::default());
        absorb(
            &mut state,
            &mut [],
            Ledger::default(),
            vec![(work, done)],
            "c1",
            0,
        );
    }
    let c = &state.placements[&app()].clusters;
    assert!(Arc::ptr_eq(&c["m1"].objects, &c["m2"].objects));
    assert!(Arc::ptr_eq(&c["m1"].objects, &c["m4"].objects));
    assert!(!Arc::ptr_eq(&c["m1"].objects, &c["m3"].objects));
    assert_eq!(
        c["m3"].objects.iter().next().unwrap(),
        &crate::model::ObjectKey::new("", "ConfigMap", Some("app"), "other")
    );
}

/// Work applying one empty rendering, `r0`, the same for every placement and cluster it is
/// made for.
fn empty_rendering() -> impl Fn(&PlacementKey, &str) -> Work {
    let manifests: crate::rollout::work::Manifests = Arc::new(Vec::new());
    let revision = Revision {
        resource_index: 0,
        rendered: "r0".into(),
    };
    move |key, cluster| {
        let rendered = (manifests.clone(), revision.clone());
        let strategy = ApplyStrategy::default();
        Work::apply(key, cluster, rendered, strategy, "r0".into(), false, false)
    }
}

/// The clusters of one delivery given one rendering hold one fingerprint and one commit, not a
/// copy each (the state keeps them per binding).
#[test]
fn clusters_of_one_delivery_share_their_rendering_and_commit() {
    let apply = empty_rendering();
    let results = ["m1", "m2"]
        .into_iter()
        .map(|cluster| {
            (
                apply(&app(), cluster),
                Outcome::Done(BindingHealth::Available, Default::default()),
            )
        })
        .collect();
    let mut state = RolloutState::default();
    absorb(&mut state, &mut [], Ledger::default(), results, "c1", 0);
    let c = &state.placements[&app()].clusters;
    let (m1, m2) = (&c["m1"], &c["m2"]);
    let rendered = |c: &crate::rollout::ClusterState| c.revision.clone().unwrap().rendered;
    assert!(SharedText::ptr_eq(&rendered(m1), &rendered(m2)));
    assert_eq!(m1.commit.as_deref(), Some("c1"));
    assert!(SharedText::ptr_eq(
        m1.commit.as_ref().unwrap(),
        m2.commit.as_ref().unwrap()
    ));
}

/// Entries absorbed through an index that names from a fleet hold the fleet's names (one per
/// cluster, whichever placements reach it); without one, or for a cluster the fleet does not
/// hold, an entry has a name of its own.
#[test]
fn absorbed_entries_share_the_fleets_names() {
    let fleet = Arc::new(Fleet::build(&commit("1", ""), None));
    let apply = empty_rendering();
    let other: PlacementKey = "crp/other".parse().unwrap();
    let results = [(app(), "m1"), (other.clone(), "m1"), (app(), "m9")]
        .into_iter()
        .map(|(key, cluster)| {
            let work = apply(&key, cluster);
            let failed = cluster == "m9";
            let outcome = if failed {
                Outcome::Failed("refused".into())
            } else {
                Outcome::Done(BindingHealth::Available, Default::default())
            };
            (work, outcome)
        })
        .collect();
    let mut state = RolloutState::default();
    let mut index = BindingIndex::naming_from(Some(fleet.clone() as Arc<dyn NameSource>));
    absorb_indexed(
        &mut state,
        &mut [],
        &mut index,
        Ledger::default(),
        results,
        "c1",
        0,
    );
    let name = |key: &PlacementKey, cluster: &str| {
        let clusters = &state.placements[key].clusters;
        clusters
            .keys()
            .find(|k| k.as_str() == cluster)
            .unwrap()
            .clone()
    };
    let fleets = &fleet.get("m1").unwrap().name;
    assert!(ClusterName::ptr_eq(&name(&app(), "m1"), fleets));
    assert!(ClusterName::ptr_eq(&name(&other, "m1"), fleets));
    assert_eq!(
        name(&app(), "m9"),
        "m9",
        "not in the fleet: a name of its own"
    );
    assert_eq!(
        state.placements[&app()].clusters["m9"].health,
        BindingHealth::Failed
    );
}

/// A look absorbs its deliveries one member at a time through one index of the bindings: the
/// schedule it leaves is the one absorbing each delivery on its own leaves, a removal (which
/// moves the bindings after it) included.
#[test]
fn deliveries_absorbed_through_one_index_bind_as_one_by_one() {
    use crate::schedule::{Binding, PlacementSchedule};
    let binding = |cluster: &str, state| Binding {
        cluster: cluster.into(),
        state,
        policy_index: 0,
        affinity_score: None,
        topology_spread_score: None,
        previous_state: None,
    };
    let placement = |key: PlacementKey| {
        Arc::new(PlacementSchedule {
            key,
            policy_snapshot_index: Some(0),
            policy_hash: None,
            selected: Vec::new(),
            decisions: Vec::new(),
            conditions: Vec::new(),
            bindings: vec![
                binding("m1", BindingState::Unscheduled),
                binding("m2", BindingState::Scheduled),
                binding("m3", BindingState::Bound),
                binding("m4", BindingState::Scheduled),
            ],
            decision_groups: Vec::new(),
        })
    };
    let other: PlacementKey = "crp/other".parse().unwrap();
    let schedule = vec![placement(app()), placement(other.clone())];
    let apply = |key: &PlacementKey, cluster: &str| {
        let revision = Revision {
            resource_index: 0,
            rendered: "r0".into(),
        };
        let manifests = (Arc::new(Vec::new()), revision);
        let work = Work::apply(
            key,
            cluster,
            manifests,
            ApplyStrategy::default(),
            "r0".into(),
            true,
            false,
        );
        let done = Outcome::Done(BindingHealth::Available, Default::default());
        vec![(work, done)]
    };
    let remove = |key: &PlacementKey, cluster: &str| {
        let work = Work::remove(key, cluster, ApplyStrategy::default());
        vec![(
            work,
            Outcome::Done(BindingHealth::Available, Default::default()),
        )]
    };
    let deliveries = || {
        vec![
            apply(&app(), "m2"),
            remove(&app(), "m1"),
            apply(&app(), "m4"),
            apply(&app(), "m3"),
            apply(&other, "m4"),
        ]
    };
    let (mut one_by_one, mut indexed) = (schedule.clone(), schedule);
    let (mut a, mut b) = (RolloutState::default(), RolloutState::default());
    for results in deliveries() {
        absorb(&mut a, &mut one_by_one, Ledger::default(), results, "c", 0);
    }
    let mut index = crate::rollout::BindingIndex::default();
    for results in deliveries() {
        let ledger = Ledger::default();
        absorb_indexed(&mut b, &mut indexed, &mut index, ledger, results, "c", 0);
    }
    assert_eq!(indexed, one_by_one);
    let states = |p: &PlacementSchedule| -> Vec<(String, BindingState)> {
        p.bindings
            .iter()
            .map(|b| (b.cluster.to_string(), b.state))
            .collect()
    };
    let bound = |c: &str| (c.to_string(), BindingState::Bound);
    assert_eq!(states(&indexed[0]), [bound("m2"), bound("m3"), bound("m4")]);
    assert_eq!(
        states(&indexed[1]),
        [
            ("m1".to_string(), BindingState::Unscheduled),
            ("m2".to_string(), BindingState::Scheduled),
            bound("m3"),
            bound("m4"),
        ]
    );
    assert_eq!(a, b);
}
