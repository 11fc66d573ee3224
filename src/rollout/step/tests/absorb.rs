//! The outcomes folded into the state.

use super::*;

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

/// The clusters of one delivery given one rendering hold one fingerprint and one commit, not a
/// copy each (the state keeps them per binding).
#[test]
fn clusters_of_one_delivery_share_their_rendering_and_commit() {
    let manifests: crate::rollout::work::Manifests = Arc::new(Vec::new());
    let revision = Revision {
        resource_index: 0,
        rendered: "r0".into(),
    };
    let results = ["m1", "m2"]
        .into_iter()
        .map(|cluster| {
            let work = Work::apply(
                &app(),
                cluster,
                (manifests.clone(), revision.clone()),
                ApplyStrategy::default(),
                "r0".into(),
                false,
                false,
            );
            (
                work,
                Outcome::Done(BindingHealth::Available, Default::default()),
            )
        })
        .collect();
    let mut state = RolloutState::default();
    absorb(&mut state, &mut [], Ledger::default(), results, "c1", 0);
    let c = &state.placements[&app()].clusters;
    let (m1, m2) = (&c["m1"], &c["m2"]);
    let rendered = |c: &crate::rollout::ClusterState| c.revision.clone().unwrap().rendered;
    assert!(Arc::ptr_eq(&rendered(m1), &rendered(m2)));
    assert_eq!(m1.commit.as_deref(), Some("c1"));
    assert!(Arc::ptr_eq(
        m1.commit.as_ref().unwrap(),
        m2.commit.as_ref().unwrap()
    ));
}
