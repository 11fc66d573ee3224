//! The memo of settled steps.

use super::*;

/// The memoized step decides exactly what a full step decides, over commits
/// that change one placement's resources, then the other's, then add an override, with
/// pushes that leave clusters pending before they become available and a member's change
/// marked for a re-check; and it does reuse the settled placement's step meanwhile. The
/// commits are read as the daemon reads them, through one parse cache, so a file a commit
/// leaves unchanged hands the next one its very objects (the memo's shortcut by address),
/// and the memoized step is given the commit's selections made once, as the daemon's is.
#[test]
fn a_memoized_step_decides_what_a_full_step_decides() {
    // The placement and the ConfigMap it selects are in files of their own: a commit that
    // changes the ConfigMap only leaves the placement object as it was.
    let other = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\n\
                 apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
                 metadata: {name: other}\nspec:\n\
                 \x20 resourceSelectors: [{group: '', version: v1, kind: Namespace, name: other}]\n"
        .to_string();
    let other_data = |v: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: o, namespace: other}}\n\
             data: {{v: '{v}'}}\n"
        )
    };
    let cro = "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourceOverride\n\
               metadata: {name: mark}\nspec:\n\
               \x20 placement: {name: other, scope: Cluster}\n\
               \x20 clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: other}]\n\
               \x20 policy:\n    overrideRules:\n\
               \x20   - clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchExpressions: [{key: kubernetes-fleet.io/member-name, operator: In, values: [m2]}]}}]}\n\
               \x20     jsonPatchOverrides: [{op: add, path: /metadata/labels, value: {marked: 'yes'}}]\n";
    let mut cache = crate::catalog::ParseCache::default();
    // A commit of the app's files at `tag`, the other placement's with its ConfigMap at
    // `data`, and the override when asked.
    let mut load = |tag: &str, data: &str, with_override: bool| {
        let mut files = vec![
            ("fleet.yaml", commit_yaml(tag, "")),
            ("other.yaml", other.clone()),
            ("other-data.yaml", other_data(data)),
        ];
        if with_override {
            files.push(("override.yaml", cro.to_string()));
        }
        let files: Vec<SourceFile> = files
            .into_iter()
            .map(|(path, text)| SourceFile {
                path: path.to_string(),
                content: text.into_bytes(),
            })
            .collect();
        let (cat, diags) = crate::analyze::analyze_cached(&files, &mut cache);
        assert!(diags.is_empty(), "{diags:#?}");
        cat
    };
    let commits = [
        ("c1", load("1", "a", false)),
        ("c2", load("2", "a", false)),
        ("c3", load("2", "b", false)),
        ("c4", load("2", "b", true)),
    ];
    let mut state = RolloutState::default();
    let mut previous = crate::schedule::Previous::new();
    let mut memo = StepMemo::default();
    let mut reused = 0;
    for (sha, cat) in &commits {
        // The daemon's way: the commit's selections made once, when it was read.
        let made = crate::snapshot::select_all(cat);
        for round in 0..7 {
            if round == 3 {
                state.recheck(
                    "m3",
                    Some("crp.other"),
                    (
                        "ConfigMap other/o deleted",
                        crate::rollout::state::RecheckCause::ChangedOnTheMember,
                    ),
                    true,
                    0,
                );
            }
            let (fleet, mut schedule) = scheduled(cat, &previous);
            let input = Input {
                cat,
                commit: sha,
                schedule: &schedule,
                fleet: &fleet,
                unreachable: &BTreeMap::new(),
                only: None,
                now: 0,
                staged: Default::default(),
                selected: None,
            };
            let daemon_input = Input {
                selected: Some(&made),
                staged: Default::default(),
                ..input
            };
            let mut full = step(&input, &state, Pacing::Rolling);
            let mut memoized = step_memoized(&daemon_input, &state, Pacing::Rolling, &mut memo);
            // A settled step's number names a memo entry: not part of what is decided.
            for s in full.steps.iter_mut().chain(memoized.steps.iter_mut()) {
                Arc::make_mut(s).settled = None;
            }
            assert_eq!(
                format!("{full:#?}"),
                format!("{memoized:#?}"),
                "{sha}, round {round}"
            );
            reused += memo.reused();
            let health = if round == 1 {
                BindingHealth::Pending
            } else {
                BindingHealth::Available
            };
            let results = full
                .work
                .into_iter()
                .map(|w| (w, Outcome::Done(health, Default::default())))
                .collect();
            absorb(&mut state, &mut schedule, full.ledger, results, sha, 0);
            previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
        }
    }
    let ps = &state.placements[&"crp/other".parse::<PlacementKey>().unwrap()];
    // The override reached m2 (only its rendering changed).
    assert_eq!(ps.clusters["m2"].commit.as_deref(), Some("c4"));
    assert!(reused >= 10, "{reused}");
}
