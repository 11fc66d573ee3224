//! Staged update runs end to end: a real git repository with an External placement, a
//! three-stage strategy and a `ClusterStagedUpdateRun`, nine members (simulated, and real ones
//! from the test bed when it is built), the real `gitfleet run` following the branch. What is
//! awaited is a condition read from the members or the status API, never a fixed time.
//!
//! Approvals are signed tags, verified by the approvals edge (not merged yet): here the run is
//! shown to stop at its approval request, with the request in status.

mod common;
use common::kubectl::Kubectl as _;

use std::path::Path;

use common::daemon::Daemon;
use common::members::Members;
use common::{gitfleet, Repo};

const MEMBERS: [&str; 9] = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"];

fn fleet_file() -> String {
    let mut y = String::from("anonymousAuth: true\nmembers:\n");
    for m in MEMBERS {
        y.push_str(&format!(
            "  - name: {m}\n    nodes: [{{count: 1, cpu: \"4\", memory: 16Gi, instanceType: D4}}]\n"
        ));
    }
    y
}

fn members_yaml() -> String {
    MEMBERS
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let env = ["staging", "canary", "production"][i / 3];
            format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: {m}, labels: {{env: {env}}}}}\n\
                 spec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
            )
        })
        .collect()
}

const APP: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: telemetry}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: collector, namespace: telemetry}
data: {version: '1'}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata: {name: telemetry}
spec:
  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: telemetry}]
  policy: {placementType: PickAll}
  strategy: {type: External}
"#;

/// staging: one at a time, then a one-second soak; canary: an approval before it;
/// production: two at a time.
const STRATEGY: &str = r#"apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateStrategy
metadata: {name: three-stage}
spec:
  stages:
  - name: staging
    labelSelector: {matchLabels: {env: staging}}
    afterStageTasks: [{type: TimedWait, waitTime: 1s}]
  - name: canary
    labelSelector: {matchLabels: {env: canary}}
    beforeStageTasks: [{type: Approval}]
  - name: production
    labelSelector: {matchLabels: {env: production}}
    maxConcurrency: 2
"#;

fn run_yaml(state: &str) -> String {
    format!(
        "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterStagedUpdateRun\n\
         metadata: {{name: rollout-1}}\nspec: {{placementName: telemetry, stagedRolloutStrategyName: three-stage, state: {state}}}\n"
    )
}

fn has_app(members: &Members, m: &str) -> bool {
    members.exists(m, &["configmap", "collector", "-n", "telemetry"])
}

fn status(addr: &str) -> serde_json::Value {
    let r = gitfleet(&["status", "--server", addr, "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

/// Polls the status until `check` holds; on a hang, fails with the last status seen.
fn await_status(addr: &str, what: &str, mut check: impl FnMut(&serde_json::Value) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let last = status(addr);
        if check(&last) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; last status:\n{last:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn run_of(doc: &serde_json::Value) -> serde_json::Value {
    doc["updateRuns"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == "rollout-1"))
        .cloned()
        .unwrap_or_default()
}

fn start(repo: &Repo, members: &Members, state: &Path) -> Daemon {
    let secret = state.join("secret");
    std::fs::write(&secret, "s").unwrap();
    Daemon::start(repo.path(), &members.kubeconfig, state, &secret, "1m")
}

/// Staging moves one member at a time and soaks one second (awaited through status, not
/// slept); the run then waits at `rollout-1-before-canary`, which status lists with the tag
/// that approves it and the commit it must point at. A SIGKILL there and a restart keep the
/// run where it was (nothing re-applied, same initialisation commit); `state: Stop` and `Run`
/// edited in Git stop and resume it.
fn waits_at_the_approval_across_a_restart_and_stop_run(backend: common::members::Backend) {
    let members = Members::start(backend, &fleet_file());
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml());
    repo.write("app.yaml", APP);
    repo.write("rollout/strategy.yaml", STRATEGY);
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    let init_commit = repo.commit("telemetry, staged");
    let state = tempfile::tempdir().unwrap();
    let daemon = start(&repo, &members, state.path());

    await_status(&daemon.addr, "the run waits for the canary approval", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-canary"
    });
    for m in &MEMBERS[..3] {
        assert!(has_app(&members, m), "{m} (staging) has the app");
    }
    for m in &MEMBERS[3..] {
        assert!(!has_app(&members, m), "{m} waits for its stage");
    }
    let doc = status(&daemon.addr);
    let run = run_of(&doc);
    assert_eq!(run["initialized"], "True");
    assert_eq!(run["progressing"], "False");
    assert_eq!(run["stage"], "canary");
    assert_eq!(run["initCommit"], init_commit.as_str());
    let staging = &run["status"]["stagesStatus"][0];
    assert_eq!(staging["conditions"][1]["reason"], "StageUpdatingSucceeded");
    let order: Vec<&str> = staging["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["clusterName"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["m1", "m2", "m3"]);
    let req = &doc["approvalRequests"][0];
    assert_eq!(req["name"], "rollout-1-before-canary");
    assert_eq!(req["updateRun"], "rollout-1");
    assert_eq!(req["stage"], "canary");
    assert_eq!(req["approved"], "");
    assert_eq!(req["tag"], "gitfleet/approve/rollout-1-before-canary");
    assert_eq!(req["commit"], init_commit.as_str());
    // The table a person reads.
    let table = gitfleet(&["status", "--server", &daemon.addr]);
    assert!(table.stdout.contains("UPDATE RUNS"), "{}", table.stdout);
    assert!(
        table.stdout.contains("rollout-1-before-canary"),
        "{}",
        table.stdout
    );

    // SIGKILL, restart: still waiting at canary, staging not pushed again.
    drop(daemon);
    let daemon = start(&repo, &members, state.path());
    await_status(&daemon.addr, "the restarted daemon reports the run", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-canary"
    });
    let run = run_of(&status(&daemon.addr));
    assert_eq!(run["initCommit"], init_commit.as_str());
    assert_eq!(run["stage"], "canary");

    // Stop edited in Git: nothing is in flight, so the run is stopped at once.
    repo.write("rollout/run.yaml", &run_yaml("Stop"));
    repo.commit("stop the rollout");
    await_status(&daemon.addr, "the run is stopped", |d| {
        let run = run_of(d);
        run["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["reason"] == "UpdateRunStopped")
    });
    // Run again: back to waiting for the approval, still initialised at the first commit.
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    repo.commit("resume the rollout");
    await_status(&daemon.addr, "the run waits again", |d| {
        let run = run_of(d);
        run["waitingFor"] == "rollout-1-before-canary" && run["state"] == "Run"
    });
    assert_eq!(
        run_of(&status(&daemon.addr))["initCommit"],
        init_commit.as_str()
    );
    for m in &MEMBERS[3..] {
        assert!(!has_app(&members, m), "{m} still waits for the approval");
    }
}

on_both_backends!(waits_at_the_approval_across_a_restart_and_stop_run);

/// A commit that changes a run's immutable field is rejected like any invalid commit (the
/// last good commit keeps being served) and says which field.
#[test]
fn a_commit_changing_a_runs_immutable_fields_is_rejected() {
    let members = Members::start(common::members::Backend::Sim, &fleet_file());
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml());
    repo.write("app.yaml", APP);
    repo.write("rollout/strategy.yaml", STRATEGY);
    repo.write("rollout/run.yaml", &run_yaml("Initialize"));
    let good = repo.commit("initialise a run");
    let state = tempfile::tempdir().unwrap();
    let daemon = start(&repo, &members, state.path());
    await_status(&daemon.addr, "the run is initialised", |d| {
        run_of(d)["initialized"] == "True"
    });
    repo.write(
        "rollout/run.yaml",
        &run_yaml("Run").replace("three-stage", "another"),
    );
    let bad = repo.commit("change the strategy of a run");
    await_status(&daemon.addr, "the commit is rejected", |d| {
        d["rejected"]["commit"] == bad.as_str()
    });
    let doc = status(&daemon.addr);
    let errors = doc["rejected"]["errors"].to_string();
    assert!(
        errors.contains("spec.stagedRolloutStrategyName: stagedRolloutStrategyName is immutable"),
        "{errors}"
    );
    assert_eq!(doc["serving"], good.as_str());
    // Initialize -> Stop is a forbidden transition as well.
    repo.write("rollout/run.yaml", &run_yaml("Stop"));
    let bad = repo.commit("stop an initialised run");
    await_status(&daemon.addr, "the transition is rejected", |d| {
        d["rejected"]["commit"] == bad.as_str()
    });
    let errors = status(&daemon.addr)["rejected"]["errors"].to_string();
    assert!(
        errors.contains("cannot transition from Initialize to Stop"),
        "{errors}"
    );
}

/// SIGKILL in the middle of a stage: staging moves one slow member at a time (its Deployment
/// takes a while to become available); the daemon is killed as soon as the first member is
/// started. The restart finishes staging from where it was — no member pushed twice by the
/// run's own steps — and stops at the canary approval.
#[test]
fn sigkill_in_the_middle_of_a_stage_resumes_it() {
    let mut fleet = String::from("anonymousAuth: true\nmembers:\n");
    for m in MEMBERS {
        fleet.push_str(&format!(
            "  - name: {m}\n    workloadDelayMs: 700\n    nodes: [{{count: 1, cpu: \"4\", memory: 16Gi, instanceType: D4}}]\n"
        ));
    }
    let members = Members::start(common::members::Backend::Sim, &fleet);
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml());
    repo.write(
        "app.yaml",
        &APP.replace(
            "---\napiVersion: placement",
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: collector, namespace: telemetry}\n\
             spec:\n  replicas: 1\n  selector: {matchLabels: {app: c}}\n  template:\n    metadata: {labels: {app: c}}\n\
             \x20   spec: {containers: [{name: c, image: 'otel:1'}]}\n---\napiVersion: placement",
        ),
    );
    repo.write("rollout/strategy.yaml", STRATEGY);
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    repo.commit("telemetry, staged, slow members");
    let state = tempfile::tempdir().unwrap();
    let mut daemon = start(&repo, &members, state.path());
    let first = daemon.await_log(&["rollout step", "m1"]);
    assert!(!first.contains("m2"), "one at a time: {first}");
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    drop(daemon);
    assert!(!has_app(&members, "m2"), "killed before m2 started");

    let daemon = start(&repo, &members, state.path());
    let mut steps = Vec::new();
    loop {
        let line = daemon.await_log(&["rollout step"]);
        let done = line.contains("m3");
        steps.push(line);
        if done {
            break;
        }
    }
    await_status(&daemon.addr, "the run waits for the canary approval", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-canary"
    });
    for m in ["m1", "m2", "m3"] {
        assert!(has_app(&members, m), "{m}");
        let started = steps
            .iter()
            .filter(|l| l.contains(&format!("\"{m}\"")) || l.contains(&format!("{m}\\\"")))
            .count();
        // m1 once at most: again only if the kill came before its start was saved.
        assert!(started <= 1, "{m} started {started} times: {steps:#?}");
    }
    // m1's record: started once, then done.
    let run = run_of(&status(&daemon.addr));
    let m1 = &run["status"]["stagesStatus"][0]["clusters"][0];
    assert_eq!(m1["clusterName"], "m1");
    let started: Vec<&str> = m1["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(started, ["Started", "Succeeded"]);
    for m in &MEMBERS[3..] {
        assert!(!has_app(&members, m), "{m} waits for its stage");
    }
}
