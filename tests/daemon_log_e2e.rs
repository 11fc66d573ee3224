//! What the daemon logs about lasting conditions: a run waiting for an approval is logged when
//! the wait starts, not at every look; the daemon's own prunes are not logged as deletions it
//! restores. Looks are counted with the daemon's metrics and the log is read whole once the
//! daemon is stopped: nothing is timed.

mod common;
use common::kubectl::Kubectl;

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::Repo;

on_both_backends!(the_daemons_own_prunes_are_not_logged_as_restorations);

const MEMBERS: [&str; 3] = ["m1", "m2", "m3"];

fn fleet_file(names: &[&str]) -> String {
    let mut yaml = String::from("anonymousAuth: true\nmembers:\n");
    for n in names {
        yaml.push_str(&format!(
            "  - name: {n}\n    nodes: [{{count: 1, cpu: \"4\", memory: 16Gi, instanceType: D4}}]\n"
        ));
    }
    yaml
}

fn members_yaml(names: &[&str]) -> String {
    names
        .iter()
        .map(|m| {
            format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: {m}, labels: {{env: prod}}}}\n\
                 spec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
            )
        })
        .collect()
}

/// An External placement and a run whose only stage waits for an approval (no signer is
/// trusted: it waits for good).
const WAITING_RUN: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: telemetry}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata: {name: telemetry}
spec:
  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: telemetry}]
  policy: {placementType: PickAll}
  strategy: {type: External}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateStrategy
metadata: {name: gated}
spec:
  stages:
  - name: all
    labelSelector: {matchLabels: {env: prod}}
    beforeStageTasks: [{type: Approval}]
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateRun
metadata: {name: rollout-1}
spec: {placementName: telemetry, stagedRolloutStrategyName: gated, state: Run}
"#;

fn start(repo: &Repo, members: &Members, state: &tempfile::TempDir) -> Daemon {
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret").unwrap();
    Daemon::start(
        repo.path(),
        &members.kubeconfig,
        &state.path().join("state"),
        &secret,
        "10m",
    )
}

fn get(daemon: &Daemon, path: &str) -> String {
    match ureq::get(&format!("{}{path}", daemon.addr)).call() {
        Ok(mut r) => r.body_mut().read_to_string().unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The looks the daemon took so far (`gitfleet_reconcile_duration_seconds_count`).
fn looks(daemon: &Daemon) -> u64 {
    get(daemon, "/metrics")
        .lines()
        .find_map(|l| l.strip_prefix("gitfleet_reconcile_duration_seconds_count "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Makes the daemon look at the branch once (the webhook).
fn wake(daemon: &Daemon) {
    let mut r = ureq::post(&format!("{}/hooks/git", daemon.addr))
        .header("X-Gitlab-Token", "s3cret")
        .send(&b"{}"[..])
        .unwrap();
    let _ = r.body_mut().read_to_string();
}

/// A run waiting for its approval is logged once, however many looks find it waiting.
#[test]
fn a_run_waiting_for_an_approval_is_logged_once_across_looks() {
    let members = Members::start(Backend::Sim, &fleet_file(&MEMBERS));
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml(&MEMBERS));
    repo.write("app.yaml", WAITING_RUN);
    repo.commit("a gated run");
    let state = tempfile::tempdir().unwrap();
    let daemon = start(&repo, &members, &state);
    await_until("the run waits for its approval", || {
        get(&daemon, "/api/v1/approvalrequests").contains("rollout-1-before-all")
    });
    for _ in 0..4 {
        let before = looks(&daemon);
        wake(&daemon);
        await_until("a look on the webhook", || looks(&daemon) > before);
    }
    let lines = daemon.stop_and_read_log();
    let waits: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("waits for approval"))
        .collect();
    assert_eq!(waits.len(), 1, "{waits:#?}");
    assert!(waits[0].contains("rollout-1-before-all"), "{}", waits[0]);
}

fn app(configmaps: &[&str]) -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {name: shop}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: shop}]\n\
         \x20 policy: {placementType: PickAll}\n",
    );
    for c in configmaps {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {c}, namespace: shop}}\ndata: {{a: '1'}}\n"
        ));
    }
    yaml
}

fn has(members: &Members, configmap: &str) -> bool {
    members.exists("m1", &["configmap", configmap, "-n", "shop"])
}

/// A ConfigMap the daemon prunes (a commit removed it) is not "restored" in the log; one
/// deleted by hand is, and comes back.
fn the_daemons_own_prunes_are_not_logged_as_restorations(backend: Backend) {
    let members = Members::start(backend, &fleet_file(&["m1"]));
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml(&["m1"]));
    repo.write("app.yaml", &app(&["kept", "pruned", "by-hand"]));
    repo.commit("three configmaps");
    let state = tempfile::tempdir().unwrap();
    let daemon = start(&repo, &members, &state);
    await_until("the three configmaps on m1", || {
        ["kept", "pruned", "by-hand"]
            .iter()
            .all(|c| has(&members, c))
    });
    repo.write("app.yaml", &app(&["kept", "by-hand"]));
    repo.commit("one configmap less");
    await_until("the pruned configmap gone", || !has(&members, "pruned"));
    let (code, _, err) = members.kubectl("m1", &["delete", "configmap", "by-hand", "-n", "shop"]);
    assert_eq!(code, 0, "{err}");
    await_until("the configmap deleted by hand restored", || {
        has(&members, "by-hand")
    });
    let lines = daemon.stop_and_read_log();
    let restorations: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("restoring it"))
        .collect();
    assert!(
        restorations.iter().any(|l| l.contains("shop/by-hand")),
        "the deletion by hand is logged: {restorations:#?}"
    );
    assert!(
        !restorations.iter().any(|l| l.contains("shop/pruned")),
        "the daemon's own prune is logged as a restoration: {restorations:#?}"
    );
}
