//! Evictions judged as KubeFleet judges them, case by case from KubeFleet's tests
//! (pkg/controllers/clusterresourceplacementeviction/controller_test.go: TestValidateEviction,
//! TestExecuteEviction, TestIsEvictionAllowed; test/e2e/placement_eviction_test.go), then
//! through the rollout step as the daemon drives it.

use std::collections::BTreeMap;

use super::*;
use crate::catalog::SourceFile;
use crate::model::placement::PlacementPolicy;
use crate::model::ClusterName;
use crate::rollout::{absorb, step, Action, Input, Outcome, Pacing, StagedInput};
use crate::schedule::{schedule_commit, Fleet};

fn binding(cluster: &str, state: BindingState, previous: Option<BindingState>) -> Binding {
    Binding {
        cluster: cluster.into(),
        state,
        policy_index: 0,
        affinity_score: None,
        topology_spread_score: None,
        previous_state: previous,
    }
}

fn pick_n(n: i32) -> PlacementPolicy {
    PlacementPolicy {
        placement_type: PlacementType::PickN,
        number_of_clusters: Some(n),
        ..PlacementPolicy::default()
    }
}

fn pick_all() -> PlacementPolicy {
    PlacementPolicy::default()
}

fn pick_fixed() -> PlacementPolicy {
    PlacementPolicy {
        placement_type: PlacementType::PickFixed,
        cluster_names: vec!["test-cluster".into()],
        ..PlacementPolicy::default()
    }
}

fn max(v: IntOrPercent) -> PlacementDisruptionBudgetSpec {
    PlacementDisruptionBudgetSpec {
        max_unavailable: Some(v),
        min_available: None,
    }
}

fn min(v: IntOrPercent) -> PlacementDisruptionBudgetSpec {
    PlacementDisruptionBudgetSpec {
        max_unavailable: None,
        min_available: Some(v),
    }
}

fn pct(s: &str) -> IntOrPercent {
    IntOrPercent::String(s.into())
}

/// TestIsEvictionAllowed's bindings: (cluster, state, available).
type B = (&'static str, BindingState, bool);
const S1: B = ("test-cluster-1", BindingState::Scheduled, false);
const BA2: B = ("test-cluster-2", BindingState::Bound, true);
const BA3: B = ("test-cluster-3", BindingState::Bound, true);
const BU4: B = ("test-cluster-4", BindingState::Bound, false);
const UA5: B = ("test-cluster-5", BindingState::Unscheduled, true);

/// A TestIsEvictionAllowed case: name, policy, bindings, budget, allowed, available bindings.
type Case = (
    &'static str,
    PlacementPolicy,
    &'static [B],
    PlacementDisruptionBudgetSpec,
    bool,
    usize,
);

/// TestIsEvictionAllowed, every case, by KubeFleet's name.
#[test]
fn is_eviction_allowed() {
    #[rustfmt::skip]
    let cases: &[Case] = &[
        ("MaxUnavailable specified as Integer zero, one available binding - block eviction", pick_n(1), &[BA2], max(IntOrPercent::Int(0)), false, 1),
        ("MaxUnavailable specified as Integer zero, one unavailable bindings - block eviction", pick_n(1), &[S1], max(IntOrPercent::Int(0)), false, 0),
        ("MaxUnavailable specified as Integer one, one unavailable binding - block eviction", pick_n(1), &[S1], max(IntOrPercent::Int(1)), false, 0),
        ("MaxUnavailable specified as Integer one, one available binding, upscaling - allow eviction", pick_n(2), &[BA2], max(IntOrPercent::Int(1)), true, 1),
        ("MaxUnavailable specified as Integer one, one available, one unavailable binding - block eviction", pick_n(2), &[BA2, BU4], max(IntOrPercent::Int(1)), false, 1),
        ("MaxUnavailable specified as Integer one, two available binding - allow eviction", pick_n(1), &[BA2, UA5], max(IntOrPercent::Int(1)), true, 2),
        ("MaxUnavailable specified as Integer one, available bindings greater than target, downscaling - allow eviction", pick_n(1), &[BA2, BA3, UA5], max(IntOrPercent::Int(1)), true, 3),
        ("MaxUnavailable specified as Integer greater than one - block eviction", pick_n(4), &[S1, BA2, BA3, BU4], max(IntOrPercent::Int(2)), false, 2),
        ("MaxUnavailable specified as Integer greater than one - allow eviction", pick_n(3), &[S1, BA2, UA5], max(IntOrPercent::Int(2)), true, 2),
        ("MaxUnavailable specified as Integer large number greater than target number - allows eviction", pick_n(4), &[S1, BA2, BU4, UA5], max(IntOrPercent::Int(10)), true, 2),
        ("MaxUnavailable specified as percentage zero - block eviction", pick_n(2), &[BA2, UA5], max(pct("0%")), false, 2),
        ("MaxUnavailable specified as percentage greater than zero, rounds up to 1 - block eviction", pick_n(1), &[S1], max(pct("10%")), false, 0),
        ("MaxUnavailable specified as percentage greater than zero, rounds up to 1 - allow eviction", pick_n(1), &[BA2], max(pct("10%")), true, 1),
        ("MaxUnavailable specified as percentage greater than zero, rounds up to greater than 1 - block eviction", pick_n(4), &[S1, BA2, BU4, UA5], max(pct("40%")), false, 2),
        ("MaxUnavailable specified as percentage greater than zero, rounds up to greater than 1 - allow eviction", pick_n(3), &[S1, BA2, UA5], max(pct("50%")), true, 2),
        ("MaxUnavailable specified as percentage hundred, target number greater than bindings - allow eviction", pick_n(10), &[S1, BA2, BU4, BA3, UA5], max(pct("100%")), true, 3),
        ("MaxUnavailable specified as percentage hundred, target number equal to bindings - block eviction", pick_n(2), &[S1, BU4], max(pct("100%")), false, 0),
        ("MaxUnavailable specified as percentage hundred, target number equal to bindings - allow eviction", pick_n(4), &[S1, BA2, BU4, UA5], max(pct("100%")), true, 2),
        ("MinAvailable specified as Integer zero, unavailable binding - block eviction", pick_n(2), &[S1], min(IntOrPercent::Int(0)), false, 0),
        ("MinAvailable specified as Integer zero, available binding - allow eviction", pick_n(2), &[BA2], min(IntOrPercent::Int(0)), true, 1),
        ("MinAvailable specified as Integer one, unavailable binding - block eviction", pick_n(1), &[S1], min(IntOrPercent::Int(1)), false, 0),
        ("MinAvailable specified as Integer one, available binding, upscaling - block eviction", pick_n(2), &[BA2], min(IntOrPercent::Int(1)), false, 1),
        ("MinAvailable specified as Integer one, one available, one unavailable binding - block eviction", pick_n(1), &[BA2, BU4], min(IntOrPercent::Int(1)), false, 1),
        ("MinAvailable specified as Integer one, two available bindings - allow eviction", pick_n(2), &[BA2, UA5], min(IntOrPercent::Int(1)), true, 2),
        ("MinAvailable specified as Integer one, available bindings greater than target number, downscaling - allow eviction", pick_n(1), &[BA2, BA3, UA5], min(IntOrPercent::Int(1)), true, 3),
        ("MinAvailable specified as Integer greater than one - block eviction", pick_n(2), &[BA2, UA5], min(IntOrPercent::Int(2)), false, 2),
        ("MinAvailable specified as Integer greater than one - allow eviction", pick_n(4), &[S1, BA2, BA3, UA5], min(IntOrPercent::Int(2)), true, 3),
        ("MinAvailable specified as Integer greater than one, available bindings greater than target number, downscaling - block eviction", pick_n(1), &[BA2, BA3, UA5], min(IntOrPercent::Int(3)), false, 3),
        ("MinAvailable specified as Integer large number greater than target number - blocks eviction", pick_n(5), &[S1, BA2, BA3, BU4, UA5], min(IntOrPercent::Int(10)), false, 3),
        ("MinAvailable specified as percentage zero, all bindings are unavailable - block eviction", pick_n(2), &[S1, BU4], min(pct("0%")), false, 0),
        ("MinAvailable specified as percentage zero, all bindings are available - allow eviction", pick_n(3), &[BA2, BA3, UA5], min(pct("0%")), true, 3),
        ("MinAvailable specified as percentage rounds upto one - block eviction", pick_n(1), &[S1], min(pct("10%")), false, 0),
        ("MinAvailable specified as percentage rounds upto one - allow eviction", pick_n(2), &[BA2, UA5], min(pct("10%")), true, 2),
        ("MinAvailable specified as percentage greater than zero, rounds up to greater than 1 - block eviction", pick_n(3), &[S1, BA2, BA3], min(pct("40%")), false, 2),
        ("MinAvailable specified as percentage greater than zero, rounds up to greater than 1 - allow eviction", pick_n(3), &[BA2, BA3, UA5], min(pct("40%")), true, 3),
        ("MinAvailable specified as percentage hundred, bindings less than target number - block eviction", pick_n(10), &[BA2, BA3], min(pct("100%")), false, 2),
        ("MinAvailable specified as percentage hundred, bindings equal to target number  - block eviction", pick_n(3), &[BA2, BA3, UA5], min(pct("100%")), false, 3),
        ("MinAvailable specified as percentage hundred, bindings greater than target number - allow eviction", pick_n(2), &[BA2, BA3, UA5], min(pct("100%")), true, 3),
        ("MinAvailable specified as Integer zero, available binding, PickAll CRP - allow eviction", pick_all(), &[BA2], min(IntOrPercent::Int(0)), true, 1),
        ("MinAvailable specified as Integer one, available binding, PickAll CRP - block eviction", pick_all(), &[BA2], min(IntOrPercent::Int(1)), false, 1),
        ("MinAvailable specified as Integer greater than one, available binding, PickAll CRP - allow eviction", pick_all(), &[BA2, BA3, UA5], min(IntOrPercent::Int(2)), true, 3),
    ];
    for (name, policy, bs, budget, want_allowed, want_available) in cases {
        let bindings: Vec<Binding> = bs.iter().map(|(c, s, _)| binding(c, *s, None)).collect();
        let health = |c: &str| {
            bs.iter().find(|b| b.0 == c).map(|b| {
                if b.2 {
                    BindingHealth::Available
                } else {
                    BindingHealth::Pending
                }
            })
        };
        let t = Target {
            policy,
            bindings: &bindings,
            health: &health,
            budget: Some(budget),
        };
        assert_eq!(
            allowed(&t, budget),
            (*want_allowed, *want_available),
            "{name}"
        );
    }
}

/// One binding to "test-cluster" in `state` with `health`, under `policy` and `budget`.
fn decide_one(
    policy: &PlacementPolicy,
    b: Binding,
    health: Option<BindingHealth>,
    budget: Option<&PlacementDisruptionBudgetSpec>,
) -> Verdict {
    let bindings = vec![b];
    let health = move |_: &str| health;
    let t = Target {
        policy,
        bindings: &bindings,
        health: &health,
        budget,
    };
    decide(Some(&t), "test-cluster")
}

fn bound() -> Binding {
    binding("test-cluster", BindingState::Bound, None)
}

/// TestExecuteEviction. "deleting binding - eviction executed" has no counterpart: a binding
/// here is never half-deleted (an executed eviction unschedules it within the step).
#[test]
fn execute_eviction() {
    let missing = Verdict::Blocked(BLOCKED_MISSING_PLACEMENT.into());
    // scheduled binding - eviction not executed
    let b = binding("test-cluster", BindingState::Scheduled, None);
    assert_eq!(decide_one(&pick_all(), b, None, None), missing);
    // unscheduled binding with previous state annotation doesn't exist - eviction not executed
    let b = binding("test-cluster", BindingState::Unscheduled, None);
    assert_eq!(decide_one(&pick_all(), b, None, None), missing);
    // unscheduled binding with previous state as scheduled - eviction not executed
    let b = binding(
        "test-cluster",
        BindingState::Unscheduled,
        Some(BindingState::Scheduled),
    );
    assert_eq!(decide_one(&pick_all(), b, None, None), missing);
    // failed to apply binding / failed to be available binding - eviction executed, whatever
    // the budget
    let failed = Verdict::Executed(ALLOWED_PLACEMENT_FAILED.into());
    let blocking = min(IntOrPercent::Int(5));
    for h in [BindingHealth::Failed, BindingHealth::DiffReported] {
        assert_eq!(
            decide_one(&pick_all(), bound(), Some(h), Some(&blocking)),
            failed
        );
    }
    // pdb not found - eviction executed
    assert_eq!(
        decide_one(&pick_all(), bound(), Some(BindingHealth::Available), None),
        Verdict::Executed(ALLOWED_NO_PDB.into())
    );
    // PickAll CRP, Misconfigured PDB MaxUnavailable specified / MinAvailable specified as
    // percentage - eviction not executed
    let misconfigured = Verdict::Blocked(BLOCKED_MISCONFIGURED_PDB.into());
    for budget in [max(IntOrPercent::Int(1)), min(pct("10%"))] {
        let v = decide_one(
            &pick_all(),
            bound(),
            Some(BindingHealth::Available),
            Some(&budget),
        );
        assert_eq!(v, misconfigured);
    }
    // Allowed and blocked by a budget: the counts in the message.
    assert_eq!(
        decide_one(&pick_n(1), bound(), Some(BindingHealth::Available), Some(&min(IntOrPercent::Int(0)))),
        Verdict::Executed(
            "Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 1, totalPlacements: 1".into()
        )
    );
    assert_eq!(
        decide_one(&pick_n(1), bound(), Some(BindingHealth::Available), Some(&min(IntOrPercent::Int(1)))),
        Verdict::Blocked(
            "Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 1, totalPlacements: 1".into()
        )
    );
    // An unscheduled binding that was bound still holds the placement's resources.
    let b = binding(
        "test-cluster",
        BindingState::Unscheduled,
        Some(BindingState::Bound),
    );
    assert_eq!(
        decide_one(&pick_all(), b, Some(BindingHealth::Available), None),
        Verdict::Executed(ALLOWED_NO_PDB.into())
    );
}

/// TestValidateEviction. "invalid eviction - deleting CRP" has no counterpart (a placement is
/// in the commit or not), nor "multiple CRBs for same cluster" (one binding per cluster).
#[test]
fn validate_eviction() {
    // invalid eviction - CRP not found
    assert_eq!(
        decide(None, "test-cluster"),
        Verdict::Invalid(INVALID_MISSING_CRP)
    );
    // invalid eviction - pickFixed CRP
    assert_eq!(
        decide_one(&pick_fixed(), bound(), Some(BindingHealth::Available), None),
        Verdict::Invalid(INVALID_PICK_FIXED_CRP)
    );
    // invalid eviction - CRB not found
    let other = binding("other-cluster", BindingState::Bound, None);
    assert_eq!(
        decide_one(&pick_all(), other, Some(BindingHealth::Available), None),
        Verdict::Invalid(INVALID_MISSING_CRB)
    );
    // CRP with empty spec - valid eviction
    assert!(!matches!(
        decide_one(&pick_all(), bound(), Some(BindingHealth::Available), None),
        Verdict::Invalid(_)
    ));
}

/// The conditions are KubeFleet's: an invalid eviction has `Valid` only.
#[test]
fn conditions_are_kubefleets() {
    let c = Verdict::Invalid(INVALID_MISSING_CRP).conditions();
    assert_eq!(
        c,
        vec![Condition::new(
            VALID,
            false,
            INVALID_REASON,
            INVALID_MISSING_CRP
        )]
    );
    let c = Verdict::Blocked("b".into()).conditions();
    assert_eq!(
        c,
        vec![
            Condition::new(VALID, true, VALID_REASON, VALID_MESSAGE),
            Condition::new(EXECUTED, false, NOT_EXECUTED_REASON, "b"),
        ]
    );
    let c = Verdict::Executed("e".into()).conditions();
    assert_eq!(c[1], Condition::new(EXECUTED, true, EXECUTED_REASON, "e"));
}

// ---------------------------------------------------------------------------------------------
// Through the step, as the daemon drives it.
// ---------------------------------------------------------------------------------------------

fn members(tainted: &[&str]) -> String {
    let mut y = String::new();
    for i in 1..=3 {
        let m = format!("m{i}");
        let taints = if tainted.contains(&m.as_str()) {
            ", taints: [{key: evict, value: 'yes', effect: NoSchedule}]"
        } else {
            ""
        };
        y.push_str(&format!(
            "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
             metadata: {{name: {m}}}\n\
             spec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}{taints}}}\n"
        ));
    }
    y
}

fn placement(policy: &str) -> String {
    format!(
        "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: app}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: app}}]\n\
         \x20 policy: {policy}\n"
    )
}

fn eviction(name: &str, cluster: &str) -> String {
    format!(
        "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementEviction\n\
         metadata: {{name: {name}}}\nspec: {{placementName: app, clusterName: {cluster}}}\n"
    )
}

fn budget(spec: &str) -> String {
    format!(
        "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementDisruptionBudget\n\
         metadata: {{name: app}}\nspec: {{{spec}}}\n"
    )
}

fn commit(extra: &str) -> Catalog {
    let yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: app}}\n{extra}");
    let (cat, diags) = crate::analyze(&[SourceFile {
        path: "fleet.yaml".into(),
        content: yaml.into_bytes(),
    }]);
    assert!(diags.is_empty(), "{diags:#?}");
    cat
}

/// The daemon's side: bindings and rollout state.
#[derive(Default)]
struct World {
    state: RolloutState,
    previous: Previous,
}

#[derive(Debug, Default)]
struct Stepped {
    judged: Vec<Judged>,
    applied: Vec<String>,
    removed: Vec<String>,
    selected: Vec<ClusterName>,
}

impl World {
    /// One step of `cat` as the daemon takes it: evictions, schedule, step; every push ends
    /// available.
    fn step(&mut self, cat: &Catalog) -> Stepped {
        let (records, judged) = evict(cat, &mut self.previous, &self.state);
        self.state.evictions = records;
        let fleet = Fleet::build(cat, None);
        let mut schedule = schedule_commit(
            cat,
            &crate::snapshot::invalid_selections(cat),
            &fleet,
            &self.previous,
            0,
        );
        let input = Input {
            cat,
            commit: "c",
            schedule: &schedule,
            fleet: &fleet,
            unreachable: &BTreeMap::new(),
            only: None,
            now: 1,
            staged: StagedInput::default(),
            selected: None,
        };
        let d = step(&input, &self.state, Pacing::Rolling);
        let pick = |remove: bool| -> Vec<String> {
            d.work
                .iter()
                .filter(|w| matches!(w.action, Action::Remove { .. }) == remove)
                .map(|w| w.cluster.clone())
                .collect()
        };
        let out = Stepped {
            judged,
            applied: pick(false),
            removed: pick(true),
            selected: schedule[0].selected.clone(),
        };
        let results = d
            .work
            .into_iter()
            .map(|w| {
                (
                    w,
                    Outcome::Done(BindingHealth::Available, Default::default()),
                )
            })
            .collect();
        absorb(&mut self.state, &mut schedule, d.ledger, results, "c", 1);
        self.previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
        out
    }

    /// Steps `cat` until nothing is left to do.
    fn settle(&mut self, cat: &Catalog) {
        for _ in 0..10 {
            let s = self.step(cat);
            if s.applied.is_empty() && s.removed.is_empty() {
                return;
            }
        }
        panic!("did not settle");
    }

    fn executed(&self, name: &str) -> Option<bool> {
        let r = self.state.evictions.get(name)?;
        r.conditions
            .iter()
            .find(|c| c.type_ == EXECUTED)
            .map(|_| r.executed())
    }
}

fn verdict_kind(j: &Judged) -> &'static str {
    match j.verdict {
        Verdict::Invalid(_) => "invalid",
        Verdict::Blocked(_) => "blocked",
        Verdict::Executed(_) => "executed",
    }
}

/// placement_eviction_test.go, "eviction of bound binding, taint cluster before eviction - No
/// PDB specified": the tainted cluster loses the placement, the others keep it.
#[test]
fn tainted_cluster_evicted_loses_the_placement() {
    let mut w = World::default();
    let base = format!("{}{}", members(&[]), placement("{placementType: PickAll}"));
    w.settle(&commit(&base));
    let head = format!(
        "{}{}{}",
        members(&["m1"]),
        placement("{placementType: PickAll}"),
        eviction("e1", "m1")
    );
    let s = w.step(&commit(&head));
    assert_eq!(s.judged.len(), 1);
    assert_eq!(
        s.judged[0].verdict,
        Verdict::Executed(ALLOWED_NO_PDB.into())
    );
    assert_eq!(s.removed, vec!["m1"]);
    assert_eq!(s.selected, vec!["m2", "m3"]);
    assert_eq!(w.executed("e1"), Some(true));
    w.settle(&commit(&head));
    assert!(!w
        .state
        .placements
        .values()
        .next()
        .unwrap()
        .clusters
        .contains_key("m1"));
}

/// placement_eviction_test.go, "no taint specified, evicted cluster is picked again by
/// scheduler": PickAll picks the untainted cluster again (here in the same step, so the
/// member keeps the resources it has).
#[test]
fn untainted_cluster_is_picked_again() {
    let mut w = World::default();
    let base = format!("{}{}", members(&[]), placement("{placementType: PickAll}"));
    w.settle(&commit(&base));
    let s = w.step(&commit(&format!("{base}{}", eviction("e1", "m1"))));
    assert_eq!(verdict_kind(&s.judged[0]), "executed");
    assert_eq!(s.selected, vec!["m1", "m2", "m3"]);
    assert!(s.removed.is_empty());
}

/// placement_eviction_test.go, "PickAll CRP, PDB with MinAvailable specified as Integer to
/// protect resources on all clusters, eviction denied": nothing moves; the verdict is kept
/// and never judged again, even when the budget would allow it later (KubeFleet's
/// `Executed=False` is terminal too).
#[test]
fn budget_blocks_and_a_blocked_eviction_stays_blocked() {
    let mut w = World::default();
    let base = format!(
        "{}{}",
        members(&["m1"]),
        placement("{placementType: PickAll}")
    );
    w.settle(&commit(&format!(
        "{}{}",
        members(&[]),
        placement("{placementType: PickAll}")
    )));
    let blocked = format!(
        "{base}{}{}",
        budget("minAvailable: 3"),
        eviction("e1", "m1")
    );
    let s = w.step(&commit(&blocked));
    assert_eq!(s.judged[0].verdict, Verdict::Blocked(blocked_by_pdb(3, 3)));
    assert!(s.removed.is_empty());
    assert_eq!(w.executed("e1"), Some(false));
    // Later commits and restarts keep the verdict: judged once.
    let relaxed = format!(
        "{base}{}{}",
        budget("minAvailable: 2"),
        eviction("e1", "m1")
    );
    let s = w.step(&commit(&relaxed));
    assert!(s.judged.is_empty());
    assert!(s.removed.is_empty());
    assert_eq!(w.executed("e1"), Some(false));
    // A new eviction is judged anew: the budget allows it now.
    let again = format!("{relaxed}{}", eviction("e2", "m1"));
    let s = w.step(&commit(&again));
    assert_eq!(s.judged.len(), 1);
    assert_eq!(s.judged[0].verdict, Verdict::Executed(allowed_by_pdb(3, 3)));
    assert_eq!(s.removed, vec!["m1"]);
}

/// placement_eviction_test.go, "PickAll CRP, PDB with MinAvailable specified as Integer to
/// protect resources in all but one cluster, eviction allowed".
#[test]
fn budget_allows_one() {
    let mut w = World::default();
    w.settle(&commit(&format!(
        "{}{}",
        members(&[]),
        placement("{placementType: PickAll}")
    )));
    let head = format!(
        "{}{}{}{}",
        members(&["m1"]),
        placement("{placementType: PickAll}"),
        budget("minAvailable: 2"),
        eviction("e1", "m1")
    );
    let s = w.step(&commit(&head));
    assert_eq!(s.judged[0].verdict, Verdict::Executed(allowed_by_pdb(3, 3)));
    assert_eq!(s.removed, vec!["m1"]);
}

/// An executed eviction does not evict again: once the cluster is picked again (its taint
/// removed), it keeps the placement while the eviction stays in the repository.
#[test]
fn an_executed_eviction_executes_once() {
    let mut w = World::default();
    w.settle(&commit(&format!(
        "{}{}",
        members(&[]),
        placement("{placementType: PickAll}")
    )));
    let evicting = format!(
        "{}{}{}",
        members(&["m1"]),
        placement("{placementType: PickAll}"),
        eviction("e1", "m1")
    );
    w.settle(&commit(&evicting));
    let untainted = format!(
        "{}{}{}",
        members(&[]),
        placement("{placementType: PickAll}"),
        eviction("e1", "m1")
    );
    let s = w.step(&commit(&untainted));
    assert!(s.judged.is_empty());
    assert_eq!(s.applied, vec!["m1"]);
    w.settle(&commit(&untainted));
    let s = w.step(&commit(&untainted));
    assert!(s.removed.is_empty() && s.judged.is_empty());
    // Removed from the repository, its record is forgotten.
    w.step(&commit(&format!(
        "{}{}",
        members(&[]),
        placement("{placementType: PickAll}")
    )));
    assert!(w.state.evictions.is_empty());
}

/// PickN: the evicted (tainted) cluster is replaced by another, as KubeFleet's scheduler does
/// once the binding is gone.
#[test]
fn pick_n_picks_another_cluster() {
    let mut w = World::default();
    let policy = "{placementType: PickN, numberOfClusters: 2}";
    w.settle(&commit(&format!("{}{}", members(&[]), placement(policy))));
    let before = w
        .step(&commit(&format!("{}{}", members(&[]), placement(policy))))
        .selected;
    assert_eq!(before, vec!["m2", "m3"]);
    let head = format!(
        "{}{}{}",
        members(&["m3"]),
        placement(policy),
        eviction("e1", "m3")
    );
    let s = w.step(&commit(&head));
    assert_eq!(verdict_kind(&s.judged[0]), "executed");
    assert_eq!(s.selected, vec!["m1", "m2"]);
    assert_eq!(s.removed, vec!["m3"]);
    assert_eq!(s.applied, vec!["m1"]);
}

/// Invalid evictions: a missing placement, a PickFixed one, a cluster it does not target.
/// Invalid is terminal: the placement appearing later does not make it valid.
#[test]
fn invalid_evictions() {
    let mut w = World::default();
    let fixed = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\n\
                 metadata: {name: fixed}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
                 \x20 policy: {placementType: PickFixed, clusterNames: [m1]}\n";
    let base = format!(
        "{}{}{fixed}",
        members(&[]),
        placement("{placementType: PickN, numberOfClusters: 1}")
    );
    w.settle(&commit(&base));
    let on_fixed = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementEviction\n\
                    metadata: {name: e-fixed}\nspec: {placementName: fixed, clusterName: m1}\n";
    let on_missing = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementEviction\n\
                      metadata: {name: e-missing}\nspec: {placementName: later, clusterName: m1}\n";
    let head = format!(
        "{base}{on_fixed}{on_missing}{}",
        eviction("e-unbound", "m1")
    );
    let s = w.step(&commit(&head));
    let got: BTreeMap<&str, &Verdict> = s
        .judged
        .iter()
        .map(|j| (j.name.as_str(), &j.verdict))
        .collect();
    assert_eq!(got["e-fixed"], &Verdict::Invalid(INVALID_PICK_FIXED_CRP));
    assert_eq!(got["e-missing"], &Verdict::Invalid(INVALID_MISSING_CRP));
    assert_eq!(got["e-unbound"], &Verdict::Invalid(INVALID_MISSING_CRB));
    assert!(s.removed.is_empty());
    let later = fixed.replace("name: fixed", "name: later");
    let s = w.step(&commit(&format!("{head}{later}")));
    assert!(s.judged.is_empty());
    assert_eq!(
        w.state.evictions["e-missing"].conditions[0].message,
        INVALID_MISSING_CRP
    );
}
