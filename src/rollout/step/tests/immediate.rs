//! Immediate pacing, against rolling.

use super::*;

/// `apply` and `run` are one step at two paces: immediately every cluster gets what the
/// rolling step gives it in its turn — same manifests, revision and the whole snapshot hash
/// as stamp (a stamp cut short by `apply` would make a run after it re-patch everything).
#[test]
fn immediate_pacing_gives_every_cluster_now_what_rolling_gives_it_in_turn() {
    let (state, mut previous) = settled_on_v1();
    let v2 = commit("2", "");
    let (fleet, schedule) = scheduled(&v2, &previous);
    let rolling = decide(&v2, "c2", &schedule, &fleet, &state, Pacing::Rolling);
    let now = decide(&v2, "c2", &schedule, &fleet, &state, Pacing::Immediate);
    let (rolled, immediate) = (applied(&rolling), applied(&now));
    assert_eq!(rolled.keys().collect::<Vec<_>>(), ["m1"]);
    assert_eq!(immediate.keys().collect::<Vec<_>>(), MEMBERS);
    assert_eq!(rolled["m1"], immediate["m1"]);
    let selected = crate::snapshot::select(&v2, &v2.placements[0].spec).unwrap();
    let hash = crate::snapshot::resource_hash(&selected);
    assert_eq!(hash.len(), 64);
    assert!(immediate.values().all(|(_, stamp, _)| *stamp == hash));
    assert_eq!(now.steps[0].strategy, Strategy::Immediate);
    assert!(now.steps[0].waiting.is_empty());
    // A fresh schedule (what `apply` has, with no bindings kept) steps the same way.
    previous.clear();
    let (_, fresh) = scheduled(&v2, &previous);
    let from_nothing = decide(
        &v2,
        "c2",
        &fresh,
        &fleet,
        &RolloutState::default(),
        Pacing::Immediate,
    );
    // Its history starts at 0 (it keeps none); the rest is the same.
    let strip = |m: BTreeMap<String, (Revision, String, usize)>| -> Vec<(String, String, String)> {
        m.into_iter()
            .map(|(c, (r, stamp, _))| (c, r.rendered.to_string(), stamp))
            .collect()
    };
    assert_eq!(strip(applied(&from_nothing)), strip(immediate));
}

#[test]
fn immediate_pacing_pushes_external_placements_that_rolling_leaves_to_staged_runs() {
    let mut cat = commit("1", "");
    cat.placements[0].spec.spec.strategy.type_ = Some(RolloutStrategyType::External);
    let (fleet, schedule) = scheduled(&cat, &Default::default());
    let state = RolloutState::default();
    let now = decide(&cat, "c1", &schedule, &fleet, &state, Pacing::Immediate);
    assert_eq!(applied(&now).len(), MEMBERS.len());
    assert_eq!(
        Pace::of(Pacing::Rolling, &cat.placements[0].spec.spec),
        Pace::Staged
    );
}

/// `apply` sweeps every member of what it no longer receives, except placements that cannot
/// be rendered for it; a member that cannot be reached is not touched at all; limited to
/// some placements, the sweep is limited to them.
#[test]
fn immediate_pacing_sweeps_members_and_leaves_unreachable_ones_alone() {
    let broken = "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourceOverride\n\
                  metadata: {name: broken}\nspec:\n\
                  \x20 placement: {name: app, scope: Cluster}\n\
                  \x20 clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
                  \x20 policy:\n    overrideRules:\n\
                  \x20   - clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchExpressions: [{key: kubernetes-fleet.io/member-name, operator: In, values: [m2]}]}}]}\n\
                  \x20     jsonPatchOverrides: [{op: replace, path: /spec/missing, value: 1}]\n";
    let cat = commit("1", broken);
    let (fleet, schedule) = scheduled(&cat, &Default::default());
    let unreachable: BTreeMap<String, String> = [("m4".to_string(), "down".to_string())].into();
    let app: PlacementKey = "crp/app".parse().unwrap();
    let step_with = |only: Option<&BTreeSet<PlacementKey>>| {
        let input = Input {
            cat: &cat,
            commit: "c1",
            schedule: &schedule,
            fleet: &fleet,
            unreachable: &unreachable,
            only,
            now: 0,
            staged: Default::default(),
            selected: None,
        };
        step(&input, &RolloutState::default(), Pacing::Immediate)
    };
    let d = step_with(None);
    assert_eq!(applied(&d).keys().collect::<Vec<_>>(), ["m1", "m3"]);
    assert!(
        d.steps[0].render_errors.contains_key("m2"),
        "{:?}",
        d.steps[0]
    );
    let held: Vec<&str> = d.held.iter().map(|(w, _)| w.cluster.as_str()).collect();
    assert_eq!(held, ["m4"]);
    assert_eq!(d.skipped.keys().collect::<Vec<_>>(), ["m4"]);
    let sweeps: Vec<(&str, &Prune)> = d
        .sweeps
        .iter()
        .map(|s| (s.cluster.as_str(), &s.prune))
        .collect();
    let keep_app = Prune::AllExcept([app.clone()].into());
    let keep_none = Prune::AllExcept(BTreeSet::new());
    assert_eq!(
        sweeps,
        [("m1", &keep_none), ("m2", &keep_app), ("m3", &keep_none)]
    );
    let only: BTreeSet<PlacementKey> = [app.clone()].into();
    let limited = step_with(Some(&only));
    assert_eq!(limited.sweeps[0].prune, Prune::Only(only.clone()));
    assert_eq!(limited.sweeps[1].prune, Prune::Only(BTreeSet::new()));
    // Rolling pace sweeps nothing: it knows what it placed.
    let input = Input {
        cat: &cat,
        commit: "c1",
        schedule: &schedule,
        fleet: &fleet,
        unreachable: &unreachable,
        only: None,
        now: 0,
        staged: Default::default(),
        selected: None,
    };
    assert!(step(&input, &RolloutState::default(), Pacing::Rolling)
        .sweeps
        .is_empty());
}
