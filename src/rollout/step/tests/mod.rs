//! The step's tests, by what they are about; the commits and steps they share.

use super::*;
use crate::catalog::SourceFile;
use crate::model::placement::RolloutStrategyType;
use crate::render::Manifest;
use crate::rollout::rolling::BindingHealth;
use crate::rollout::work::{Action, Outcome, Prune};
use crate::schedule::BindingState;

mod absorb;
mod external;
mod held;
mod immediate;
mod memo;
mod ocm;
mod removed;
mod rolling;

const MEMBERS: &[&str] = &["m1", "m2", "m3", "m4"];

fn commit(image_tag: &str, extra: &str) -> Catalog {
    let (cat, diags) = crate::analyze(&[SourceFile {
        path: "fleet.yaml".into(),
        content: commit_yaml(image_tag, extra).into_bytes(),
    }]);
    assert!(diags.is_empty(), "{diags:#?}");
    cat
}

fn commit_yaml(image_tag: &str, extra: &str) -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: app}\n",
    );
    yaml.push_str(&format!("data: {{tag: '{image_tag}'}}\n"));
    for m in MEMBERS {
        yaml.push_str(&format!(
            "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
             metadata: {{name: {m}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
        ));
    }
    yaml.push_str(
        "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {name: app}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
         \x20 strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1, maxSurge: 1}}\n",
    );
    yaml.push_str(extra);
    yaml
}

/// The fleet `cat` declares, and its placements scheduled after `previous`.
fn scheduled(
    cat: &Catalog,
    previous: &crate::schedule::Previous,
) -> (Fleet, Vec<Arc<PlacementSchedule>>) {
    let fleet = Fleet::build(cat, None);
    let invalid = crate::snapshot::invalid_selections(cat);
    let schedule = crate::schedule::schedule_commit(cat, &invalid, &fleet, previous, 0);
    (fleet, schedule)
}

fn decide(
    cat: &Catalog,
    commit: &str,
    schedule: &[Arc<PlacementSchedule>],
    fleet: &Fleet,
    state: &RolloutState,
    pacing: Pacing,
) -> Decision {
    let input = Input {
        cat,
        commit,
        schedule,
        fleet,
        unreachable: &BTreeMap::new(),
        only: None,
        now: 0,
        staged: Default::default(),
        selected: None,
    };
    step(&input, state, pacing)
}

/// One rolling step with every push succeeding with `health`; returns the clusters applied
/// and removed.
fn roll(
    cat: &Catalog,
    sha: &str,
    state: &mut RolloutState,
    previous: &mut crate::schedule::Previous,
    health: BindingHealth,
) -> (Vec<String>, Vec<String>) {
    roll_at(cat, sha, state, previous, health, 0)
}

/// [`roll`] with the results absorbed at `now`.
fn roll_at(
    cat: &Catalog,
    sha: &str,
    state: &mut RolloutState,
    previous: &mut crate::schedule::Previous,
    health: BindingHealth,
    now: u64,
) -> (Vec<String>, Vec<String>) {
    let (fleet, mut schedule) = scheduled(cat, previous);
    let d = decide(cat, sha, &schedule, &fleet, state, Pacing::Rolling);
    let applied: Vec<String> = d
        .work
        .iter()
        .filter(|w| matches!(w.action, Action::Apply { .. }))
        .map(|w| w.cluster.clone())
        .collect();
    let removed: Vec<String> = d
        .work
        .iter()
        .filter(|w| matches!(w.action, Action::Remove { .. }))
        .map(|w| w.cluster.clone())
        .collect();
    let results = d
        .work
        .into_iter()
        .map(|w| (w, Outcome::Done(health, Default::default())))
        .collect();
    absorb(state, &mut schedule, d.ledger, results, sha, now);
    *previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
    (applied, removed)
}

/// State and bindings after the first commit landed everywhere and became available.
fn settled_on_v1() -> (RolloutState, crate::schedule::Previous) {
    let mut state = RolloutState::default();
    let mut previous = crate::schedule::Previous::new();
    roll(
        &commit("1", ""),
        "c1",
        &mut state,
        &mut previous,
        BindingHealth::Available,
    );
    (state, previous)
}

fn app() -> PlacementKey {
    "crp/app".parse().unwrap()
}

fn applied(d: &Decision) -> BTreeMap<String, (Revision, String, usize)> {
    d.work
        .iter()
        .filter_map(|w| match &w.action {
            Action::Apply {
                revision,
                resource_snapshot,
                manifests,
                ..
            } => Some((
                w.cluster.clone(),
                (
                    revision.clone(),
                    resource_snapshot.to_string(),
                    manifests.len(),
                ),
            )),
            Action::Remove { .. } => None,
        })
        .collect()
}
