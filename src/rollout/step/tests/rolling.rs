//! Rolling pacing: KubeFleet's RollingUpdate, placement by placement.

use super::*;

/// Overrides that select some clusters change only those clusters' manifests and revision
/// fingerprints, and only those count as overridden (the Overridden condition's reason).
#[test]
fn overridden_clusters_are_those_whose_manifests_the_overrides_change() {
    let cro = "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourceOverride\n\
               metadata: {name: mark}\nspec:\n\
               \x20 placement: {name: app, scope: Cluster}\n\
               \x20 clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
               \x20 policy:\n    overrideRules:\n\
               \x20   - clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchExpressions: [{key: kubernetes-fleet.io/member-name, operator: In, values: [m2, m3]}]}}]}\n\
               \x20     jsonPatchOverrides: [{op: add, path: /metadata/labels, value: {marked: 'yes'}}]\n";
    let cat = commit("1", cro);
    let (fleet, schedule) = scheduled(&cat, &Default::default());
    // maxUnavailable 1, maxSurge 1: the first step only; render every cluster through it.
    let d = decide(
        &cat,
        "c1",
        &schedule,
        &fleet,
        &RolloutState::default(),
        Pacing::Rolling,
    );
    let step = &d.steps[0];
    let overridden: Vec<&str> = step.overridden.iter().map(String::as_str).collect();
    assert_eq!(overridden, ["m2", "m3"]);
    let rendered = |c: &str| step.rendered[c].revision.rendered.clone();
    assert_eq!(rendered("m1"), rendered("m4"));
    assert_eq!(rendered("m2"), rendered("m3"));
    assert_ne!(rendered("m1"), rendered("m2"));
    for w in &d.work {
        let Action::Apply { manifests, .. } = &w.action else {
            continue;
        };
        let marked = manifests[0]
            .value
            .pointer("/metadata/labels/marked")
            .is_some();
        assert_eq!(
            marked,
            ["m2", "m3"].contains(&w.cluster.as_str()),
            "{}",
            w.cluster
        );
    }
}

#[test]
fn first_commit_binds_every_cluster_then_updates_one_at_a_time() {
    let mut state = RolloutState::default();
    let mut previous = crate::schedule::Previous::new();
    let v1 = commit("1", "");
    // PickAll over 4: target 4 + surge 1 - 0 can-be-ready = 5 may be bound: all 4 are.
    let (applied, _) = roll(
        &v1,
        "c1",
        &mut state,
        &mut previous,
        BindingHealth::Available,
    );
    assert_eq!(applied, MEMBERS);
    let bindings = &previous[&app()].bindings;
    assert!(bindings.iter().all(|b| b.state == BindingState::Bound));

    // A new resource version: maxUnavailable 1 of 4 → one cluster per step while each
    // becomes available.
    let v2 = commit("2", "");
    let mut order = Vec::new();
    for _ in 0..4 {
        let (applied, _) = roll(
            &v2,
            "c2",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        assert_eq!(applied.len(), 1, "{applied:?}");
        order.extend(applied);
    }
    assert_eq!(order, MEMBERS);
    let (applied, _) = roll(
        &v2,
        "c2",
        &mut state,
        &mut previous,
        BindingHealth::Available,
    );
    assert!(applied.is_empty());
    let ps = &state.placements[&app()];
    assert!(ps
        .clusters
        .values()
        .all(|c| c.revision.as_ref().unwrap().resource_index == 1));
}

#[test]
fn a_cluster_that_stays_pending_stalls_the_update() {
    let (mut state, mut previous) = settled_on_v1();
    let v2 = commit("2", "");
    let (first, _) = roll(&v2, "c2", &mut state, &mut previous, BindingHealth::Pending);
    assert_eq!(first, ["m1"]);
    // m1 is not available yet: no budget for another, but m1 is re-applied to read health.
    let (again, _) = roll(&v2, "c2", &mut state, &mut previous, BindingHealth::Pending);
    assert_eq!(again, ["m1"]);
}

/// What a member lost is re-applied through the step, with the cluster's own
/// revision (no budget for an update is spent), and the re-apply clears the mark.
#[test]
fn a_cluster_marked_for_recheck_is_reapplied_once_with_what_it_runs() {
    let (mut state, mut previous) = settled_on_v1();
    let v1 = commit("1", "");
    let (none, _) = roll(
        &v1,
        "c1",
        &mut state,
        &mut previous,
        BindingHealth::Available,
    );
    assert!(none.is_empty());
    state.recheck(
        "m3",
        Some("crp.app"),
        (
            "ConfigMap app/x deleted",
            crate::rollout::state::RecheckCause::ChangedOnTheMember,
        ),
        true,
        5,
    );
    assert_eq!(
        state.placements[&app()].clusters["m3"].health,
        BindingHealth::Pending
    );
    let (healed, _) = roll(
        &v1,
        "c1",
        &mut state,
        &mut previous,
        BindingHealth::Available,
    );
    assert_eq!(healed, ["m3"]);
    let m3 = &state.placements[&app()].clusters["m3"];
    assert_eq!(
        (m3.health, m3.recheck.as_deref()),
        (BindingHealth::Available, None)
    );
    let (again, _) = roll(
        &v1,
        "c1",
        &mut state,
        &mut previous,
        BindingHealth::Available,
    );
    assert!(again.is_empty());
    // Everything marked (start-up, resync): every cluster once. Pushes that find what
    // was there change no entry, not even its time or its commit (a later commit that
    // left this placement as it was): the state is as it was.
    let before = state.clone();
    state.recheck_all("periodic resync");
    let (all, _) = roll_at(
        &v1,
        "c2",
        &mut state,
        &mut previous,
        BindingHealth::Available,
        99,
    );
    assert_eq!(all, MEMBERS);
    assert_eq!(state, before);
    // Clusters given the same rendering share one object set.
    let clusters = &state.placements[&app()].clusters;
    assert!(Arc::ptr_eq(
        &clusters["m1"].objects,
        &clusters["m4"].objects
    ));
    // One that finds the cluster otherwise is a change, at that time.
    state.recheck_all("periodic resync");
    roll_at(
        &v1,
        "c1",
        &mut state,
        &mut previous,
        BindingHealth::Pending,
        100,
    );
    let m1 = &state.placements[&app()].clusters["m1"];
    assert_eq!((m1.health, m1.updated_at), (BindingHealth::Pending, 100));
}
