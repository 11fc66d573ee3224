//! KubeFleet evictions end to end with the real binary, a real git repository and both member
//! backends: a committed `ClusterResourcePlacementEviction` takes the placement's resources off
//! the member it names, a `ClusterResourcePlacementDisruptionBudget` blocks one, each is judged
//! once, and `gitfleet plan` says beforehand which it is. The steps follow KubeFleet's
//! test/e2e/placement_eviction_test.go ("PickAll CRP, PDB with MinAvailable specified as
//! Integer to protect resources on all clusters, eviction denied", then "... in all but one
//! cluster, eviction allowed", with the cluster tainted first).

mod common;
use common::kubectl::Kubectl as _;

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::{gitfleet, Repo, TWO_MEMBERS};

on_both_backends!(a_committed_eviction_removes_the_placement_within_its_budget);

/// `MemberCluster` `name`, tainted or not.
fn member(name: &str, tainted: bool) -> String {
    let taints = if tainted {
        "\n  taints: [{key: evicted, value: 'yes', effect: NoSchedule}]"
    } else {
        ""
    };
    format!(
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata:\n  name: {name}\n\
         spec:\n  identity: {{name: member, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}{taints}\n"
    )
}

const APP: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n---\n\
    apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata: {v: '1'}\n---\n\
    apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: app\n\
    spec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    placementType: PickAll\n";

fn budget(min_available: u32) -> String {
    format!(
        "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementDisruptionBudget\n\
         metadata:\n  name: app\nspec:\n  minAvailable: {min_available}\n"
    )
}

fn eviction(name: &str, cluster: &str) -> String {
    format!(
        "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementEviction\n\
         metadata:\n  name: {name}\nspec:\n  placementName: app\n  clusterName: {cluster}\n"
    )
}

/// Whether `member` has the placement's ConfigMap.
fn placed(members: &Members, member: &str) -> bool {
    let (_, out, _) = members.kubectl(
        member,
        &["get", "configmap", "settings", "-n", "app", "-o", "json"],
    );
    let cm: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    cm["data"]["v"] == "1"
}

/// The daemon's evictions by name: (valid, executed, message of the last condition).
fn evictions(daemon: &Daemon) -> Vec<(String, String, String, String)> {
    let body = ureq::get(&format!("{}/api/v1/evictions", daemon.addr))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let text = |e: &serde_json::Value, f: &str| e[f].as_str().unwrap_or_default().to_string();
    v["evictions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let conditions = e["conditions"].as_array().cloned().unwrap_or_default();
            let message = conditions.last().map(|c| text(c, "message"));
            (
                text(e, "name"),
                text(e, "valid"),
                text(e, "executed"),
                message.unwrap_or_default(),
            )
        })
        .collect()
}

/// `gitfleet plan` of `base..head`, as text.
fn plan(repo: &Repo, base: &str, head: &str) -> String {
    let run = gitfleet(&[
        "plan",
        "--repo",
        repo.path().to_str().unwrap(),
        "--base",
        base,
        "--head",
        head,
        "--format",
        "text",
    ]);
    assert!(
        run.code == 0 || run.code == 2,
        "{}{}",
        run.stdout,
        run.stderr
    );
    run.stdout
}

fn a_committed_eviction_removes_the_placement_within_its_budget(backend: Backend) {
    let members = Members::start(backend, TWO_MEMBERS);
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &member("alpha", false));
    repo.write("members/beta.yaml", &member("beta", false));
    repo.write("app.yaml", APP);
    repo.write("budget.yaml", &budget(2));
    let first = repo.commit("app on both members, at least two available");
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let daemon = Daemon::start(
        repo.path(),
        &members.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1h",
    );
    await_until("app on both members", || {
        placed(&members, "alpha") && placed(&members, "beta")
    });

    // The budget wants both: the eviction is not executed, and the plan says so first.
    repo.write("evictions/blocked.yaml", &eviction("blocked", "alpha"));
    let second = repo.commit("evict alpha: blocked");
    let text = plan(&repo, &first, &second);
    assert!(
        text.contains("! blocked: crp/app keeps alpha (not executed): Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 2, totalPlacements: 2"),
        "{text}"
    );
    let blocked = (
        "blocked".to_string(),
        "True".to_string(),
        "False".to_string(),
        "Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 2, totalPlacements: 2".to_string(),
    );
    await_until("the blocked eviction judged", || {
        evictions(&daemon) == [blocked.clone()]
    });
    assert!(placed(&members, "alpha") && placed(&members, "beta"));

    // Alpha tainted (so that PickAll does not pick it again), the budget down to one, and a
    // new eviction: executed, alpha loses the placement, beta keeps it. The blocked eviction
    // stays as it was judged.
    repo.write("members/alpha.yaml", &member("alpha", true));
    repo.write("budget.yaml", &budget(1));
    repo.write("evictions/allowed.yaml", &eviction("allowed", "alpha"));
    let third = repo.commit("evict alpha: allowed");
    let text = plan(&repo, &second, &third);
    assert!(
        text.contains("- allowed: crp/app loses alpha: Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 2, totalPlacements: 2"),
        "{text}"
    );
    assert!(text.contains("- alpha lost"), "{text}");
    let allowed = (
        "allowed".to_string(),
        "True".to_string(),
        "True".to_string(),
        "Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 2, totalPlacements: 2".to_string(),
    );
    await_until("the allowed eviction judged", || {
        evictions(&daemon) == [allowed.clone(), blocked.clone()]
    });
    await_until("app gone from alpha", || !placed(&members, "alpha"));
    assert!(placed(&members, "beta"));

    // A restart keeps the verdicts: nothing is judged or evicted again.
    drop(daemon);
    let daemon = Daemon::start(
        repo.path(),
        &members.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1h",
    );
    await_until("the evictions served again", || {
        evictions(&daemon) == [allowed.clone(), blocked.clone()]
    });
    assert!(!placed(&members, "alpha") && placed(&members, "beta"));
}
