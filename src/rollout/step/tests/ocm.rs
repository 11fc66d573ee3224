//! OCM placements at rolling pacing: a ManifestWorkReplicaSet's workloads reach the clusters as
//! its `rolloutStrategy` decides (ocm pkg/work/hub/controllers/manifestworkreplicasetcontroller/
//! manifestworkreplicaset_deploy_reconcile.go: only the rollout handler's clusters to roll out
//! get their work created or updated).

use super::*;

/// Four clusters in two decision groups of two (`m1`, `m2` first) and a replica set carrying
/// ConfigMap `tag` to them under `strategy`.
fn ocm_commit(tag: &str, strategy: &str) -> Catalog {
    let mut extra = String::from(
        "---\napiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata: {name: all}\n\
         ---\napiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSetBinding\nmetadata: {name: all, namespace: app}\nspec: {clusterSet: all}\n\
         ---\napiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p, namespace: app}\n\
         spec:\n  clusterSets: [all]\n  decisionStrategy: {groupStrategy: {clustersPerDecisionGroup: 2}}\n",
    );
    for m in MEMBERS {
        extra.push_str(&format!(
            "---\napiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata:\n  name: {m}\n  labels: {{cluster.open-cluster-management.io/clusterset: all}}\nspec: {{hubAcceptsClient: true}}\n"
        ));
    }
    extra.push_str(&format!(
        "---\napiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata: {{name: rs, namespace: app}}\n\
         spec:\n  placementRefs: [{{name: p, rolloutStrategy: {strategy}}}]\n  manifestWorkTemplate:\n    workload:\n      manifests:\n\
         \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: rs, namespace: default}}, data: {{tag: '{tag}'}}}}\n"
    ));
    commit("1", &extra)
}

fn is_ocm(key: &PlacementKey) -> bool {
    key.kind == crate::model::PlacementKind::OcmPlacement
}

/// What one rolling step at `now` did to the OCM placement, with every push ending as
/// `health`: the clusters applied (new work, not re-reads), re-read, waiting, and its summary.
struct Looked {
    applied: Vec<String>,
    reread: Vec<String>,
    summary: Arc<StepSummary>,
}

fn look(
    cat: &Catalog,
    state: &mut RolloutState,
    previous: &mut crate::schedule::Previous,
    health: BindingHealth,
    now: u64,
) -> Looked {
    let (fleet, mut schedule) = scheduled(cat, previous);
    let input = Input {
        cat,
        commit: "c",
        schedule: &schedule,
        fleet: &fleet,
        unreachable: &BTreeMap::new(),
        only: None,
        now,
        staged: Default::default(),
        selected: None,
    };
    let d = step(&input, state, Pacing::Rolling);
    let summary = d
        .steps
        .iter()
        .find(|s| is_ocm(&s.placement))
        .unwrap()
        .clone();
    let (mut applied, mut reread) = (vec![], vec![]);
    for w in d.work.iter().filter(|w| is_ocm(&w.placement)) {
        if let Action::Apply { refresh, .. } = w.action {
            if refresh { &mut reread } else { &mut applied }.push(w.cluster.clone());
        }
    }
    let results = d
        .work
        .into_iter()
        .map(|w| (w, Outcome::Done(health, Default::default())))
        .collect();
    absorb(state, &mut schedule, d.ledger, results, "c", now);
    *previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
    Looked {
        applied,
        reread,
        summary,
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// ProgressivePerGroup: the second group starts when every cluster of the first is available;
/// until then the first group's clusters are read again.
#[test]
fn per_group_rolls_out_group_by_group() {
    let cat = ocm_commit("1", "{type: ProgressivePerGroup}");
    let (mut state, mut previous) = (RolloutState::default(), Default::default());
    let first = look(&cat, &mut state, &mut previous, BindingHealth::Pending, 0);
    assert_eq!(first.applied, names(&["m1", "m2"]));
    assert_eq!(first.summary.waiting, names(&["m3", "m4"]));
    let pending = look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        10,
    );
    assert_eq!(pending.applied, Vec::<String>::new());
    assert_eq!(pending.reread, names(&["m1", "m2"]));
    assert_eq!(pending.summary.waiting, names(&["m3", "m4"]));
    let second = look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        20,
    );
    assert_eq!(second.applied, names(&["m3", "m4"]));
    let settled = look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        30,
    );
    assert!(!settled.summary.is_moving(), "{:?}", settled.summary);
    assert_eq!(settled.summary.up_to_date, names(MEMBERS));
    // A new template rolls out the same way, from the first group.
    let next = ocm_commit("2", "{type: ProgressivePerGroup}");
    let update = look(
        &next,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        40,
    );
    assert_eq!(update.applied, names(&["m1", "m2"]));
    assert_eq!(update.summary.waiting, names(&["m3", "m4"]));
}

/// Progressive: `maxConcurrency` clusters at a time, by name across the groups; a cluster that
/// succeeded soaks `minSuccessTime` and holds its place meanwhile, the step asking to be woken
/// when it ends.
#[test]
fn progressive_paces_by_max_concurrency_and_soak() {
    let cat = ocm_commit(
        "1",
        "{type: Progressive, progressive: {maxConcurrency: 3, minSuccessTime: 1m}}",
    );
    let (mut state, mut previous) = (RolloutState::default(), Default::default());
    let first = look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        100,
    );
    assert_eq!(first.applied, names(&["m1", "m2", "m3"]));
    let soaking = look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        130,
    );
    assert_eq!(soaking.applied, Vec::<String>::new());
    assert_eq!(soaking.summary.waiting, names(&["m4"]));
    assert_eq!(soaking.summary.requeue_after, 30);
    let soaked = look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        160,
    );
    assert_eq!(soaked.applied, names(&["m4"]));
}

/// `progressDeadline`: clusters still progressing after it time out and count as failures;
/// within `maxFailures` the rollout goes on, beyond it stops.
#[test]
fn progress_deadline_times_out_and_max_failures_decides() {
    for (max_failures, then) in [(0, vec![]), (2, names(&["m3", "m4"]))] {
        let cat = ocm_commit(
            "1",
            &format!("{{type: Progressive, progressive: {{maxConcurrency: 2, progressDeadline: 60s, maxFailures: {max_failures}}}}}"),
        );
        let (mut state, mut previous) = (RolloutState::default(), Default::default());
        let first = look(&cat, &mut state, &mut previous, BindingHealth::Pending, 0);
        assert_eq!(first.applied, names(&["m1", "m2"]));
        let within = look(&cat, &mut state, &mut previous, BindingHealth::Pending, 30);
        assert_eq!(within.applied, Vec::<String>::new());
        assert_eq!(within.summary.requeue_after, 30);
        let late = look(&cat, &mut state, &mut previous, BindingHealth::Pending, 60);
        assert_eq!(late.applied, then, "maxFailures {max_failures}");
    }
}

/// `mandatoryDecisionGroups` go first, whatever `maxConcurrency` allows.
#[test]
fn mandatory_groups_go_first() {
    let cat = ocm_commit(
        "1",
        "{type: Progressive, progressive: {maxConcurrency: 4, mandatoryDecisionGroups: [{groupIndex: 1}]}}",
    );
    let (mut state, mut previous) = (RolloutState::default(), Default::default());
    let first = look(&cat, &mut state, &mut previous, BindingHealth::Available, 0);
    assert_eq!(first.applied, names(&["m3", "m4"]));
    let rest = look(&cat, &mut state, &mut previous, BindingHealth::Available, 1);
    assert_eq!(rest.applied, names(&["m1", "m2"]));
}

/// `gitfleet apply` (immediate pacing) sends everything at once, whatever the strategy.
#[test]
fn immediate_pacing_ignores_the_strategy() {
    let cat = ocm_commit("1", "{type: ProgressivePerGroup}");
    let (fleet, schedule) = scheduled(&cat, &Default::default());
    let d = decide(
        &cat,
        "c",
        &schedule,
        &fleet,
        &RolloutState::default(),
        Pacing::Immediate,
    );
    let mut applied: Vec<String> = d
        .work
        .iter()
        .filter(|w| is_ocm(&w.placement))
        .map(|w| w.cluster.clone())
        .collect();
    applied.sort();
    assert_eq!(applied, names(MEMBERS));
}

/// The replica sets' status as OCM's controller reports it (manifestworkreplicaset_deploy_test.go,
/// manifestworkreplicaset_status_test.go): PlacementVerified, PlacementRolledOut and
/// ManifestworkApplied with the counts of its placement summary, through the rollout.
#[test]
fn replica_set_status_follows_the_rollout() {
    use crate::rollout::conditions::{of_step, replica_set_summary};
    let cat = ocm_commit("1", "{type: ProgressivePerGroup}");
    let (mut state, mut previous) = (RolloutState::default(), Default::default());
    let status = |l: &Looked, state: &RolloutState, previous: &crate::schedule::Previous| {
        let key = &l.summary.placement;
        let (sched, stored) = (&previous[key], state.placements.get(key).map(|p| &**p));
        let (placement, clusters) = of_step(&l.summary, Some(sched), stored);
        assert_eq!(
            crate::rollout::conditions::placement_conditions_of_step(
                &l.summary,
                Some(sched),
                stored
            ),
            (placement.clone(), !clusters.is_empty())
        );
        let conditions: Vec<(String, String, String)> = placement
            .into_iter()
            .filter(|c| {
                !matches!(
                    c.type_.as_str(),
                    "PlacementSatisfied" | "PlacementMisconfigured"
                )
            })
            .map(|c| (c.type_, c.status, c.reason))
            .collect();
        (
            conditions,
            replica_set_summary(&l.summary, sched, stored).unwrap(),
        )
    };
    let c = |t: &str, s: &str, r: &str| (t.to_string(), s.to_string(), r.to_string());
    let first = look(&cat, &mut state, &mut previous, BindingHealth::Pending, 0);
    let (conditions, summary) = status(&first, &state, &previous);
    assert_eq!(
        conditions,
        [
            c("PlacementVerified", "True", "AsExpected"),
            c("PlacementRolledOut", "False", "Progressing"),
            c("ManifestworkApplied", "False", "Processing"),
        ]
    );
    assert_eq!(
        summary.available_decision_groups,
        "2 (2 / 4 clusters applied)"
    );
    assert_eq!((summary.summary.total, summary.summary.progressing), (2, 2));
    look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        10,
    );
    look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        20,
    );
    let done = look(
        &cat,
        &mut state,
        &mut previous,
        BindingHealth::Available,
        30,
    );
    let (conditions, summary) = status(&done, &state, &previous);
    assert_eq!(
        conditions,
        [
            c("PlacementVerified", "True", "AsExpected"),
            c("PlacementRolledOut", "True", "Complete"),
            c("ManifestworkApplied", "True", "AsExpected"),
        ]
    );
    assert_eq!(
        summary.available_decision_groups,
        "2 (4 / 4 clusters applied)"
    );
    assert_eq!((summary.summary.applied, summary.summary.available), (4, 4));
}
