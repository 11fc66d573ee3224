//! Staged update runs end to end: a real git repository with an External placement, a
//! three-stage strategy and a `ClusterStagedUpdateRun`, nine members (simulated, and real ones
//! from the test bed when it is built), the real `gitfleet run` following the branch. What is
//! awaited is a condition read from the members or the status API, never a fixed time.
//!
//! Approvals are signed tags made by the real `git tag -s` with keys from `ssh-keygen` and `gpg`
//! in a temporary home ([`common::signing`]), verified by the daemon in-process. Long waits
//! (a TimedWait of an hour) pass on the daemon's test clock (`GITFLEET_TEST_CLOCK_SKEW_FILE`),
//! never in real time. That clock is in a binary built with the test-only `test-hooks` feature
//! alone (`cargo test --features test-hooks`); without it the tests that move it are ignored.

mod common;
use common::kubectl::Kubectl as _;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use common::daemon::Daemon;
use common::members::Members;
use common::signing::{Keys, Signer};
use common::{gitfleet, Repo};

const MEMBERS: [&str; 9] = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"];

fn fleet_file() -> String {
    fleet_of(&MEMBERS)
}

/// The simulator's fleet file for `members`.
fn fleet_of(members: &[&str]) -> String {
    let mut y = String::from("anonymousAuth: true\nmembers:\n");
    for m in members {
        y.push_str(&format!(
            "  - name: {m}\n    nodes: [{{count: 1, cpu: \"4\", memory: 16Gi, instanceType: D4}}]\n"
        ));
    }
    y
}

fn members_yaml() -> String {
    members_yaml_of(&MEMBERS)
}

/// `MemberCluster`s for `members`: three by three, staging, canary and production.
fn members_yaml_of(members: &[&str]) -> String {
    members
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

// ---------------------------------------------------------------------------------------------
// Approvals by signed tags, through the daemon.
// ---------------------------------------------------------------------------------------------

/// staging: an hour's soak and an approval after it, together; canary: an approval before it,
/// one member at a time; production: an approval before it (SREs only, by policy), two at a
/// time.
const APPROVED_STRATEGY: &str = r#"apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateStrategy
metadata: {name: three-stage}
spec:
  stages:
  - name: staging
    labelSelector: {matchLabels: {env: staging}}
    afterStageTasks: [{type: TimedWait, waitTime: 1h}, {type: Approval}]
  - name: canary
    labelSelector: {matchLabels: {env: canary}}
    beforeStageTasks: [{type: Approval}]
    maxConcurrency: 1
  - name: production
    labelSelector: {matchLabels: {env: production}}
    beforeStageTasks: [{type: Approval}]
    maxConcurrency: 2
"#;

/// Production is for the SRE; any trusted signer approves the other stages.
const POLICY: &str = "rules:\n- stages: [\"production\"]\n  principals: [\"sre@example.com\"]\n";

/// Who may approve: alice and the SRE by SSH key, Ops by OpenPGP key; the test clock's file.
struct Trust {
    keys: Keys,
    alice: PathBuf,
    sre: PathBuf,
    ops_fpr: String,
}

impl Trust {
    fn new() -> Trust {
        let keys = Keys::new();
        let (alice, sre) = (keys.ssh_key("alice"), keys.ssh_key("sre"));
        keys.write(
            "allowed_signers",
            &format!(
                "alice@example.com {}\nsre@example.com {}\n",
                keys.ssh_public(&alice),
                keys.ssh_public(&sre)
            ),
        );
        let ops_fpr = keys.gpg_key("Ops <ops@example.com>", "1y", None);
        keys.write("trusted.asc", &keys.gpg_export(&["ops@example.com"]));
        keys.write("policy.yaml", POLICY);
        keys.write("clock-skew", "0");
        Trust {
            keys,
            alice,
            sre,
            ops_fpr,
        }
    }

    /// Moves the daemon's clock `secs` ahead of real time.
    fn skew_clock(&self, secs: u64) {
        self.keys.write("clock-skew", &secs.to_string());
    }

    /// `gitfleet run` with the trust files, the policy and the test clock.
    fn start(
        &self,
        repo: impl AsRef<OsStr>,
        members: &Members,
        state: &Path,
        poll: &str,
    ) -> Daemon {
        let secret = state.join("secret");
        std::fs::write(&secret, "s").unwrap();
        let (signers, gpg, policy, skew) = (
            self.keys.path("allowed_signers"),
            self.keys.path("trusted.asc"),
            self.keys.path("policy.yaml"),
            self.keys.path("clock-skew"),
        );
        Daemon::start_with(
            repo,
            &members.kubeconfig,
            state,
            &secret,
            poll,
            &[
                OsStr::new("--trusted-signers"),
                signers.as_os_str(),
                OsStr::new("--trusted-gpg-keys"),
                gpg.as_os_str(),
                OsStr::new("--approval-policy"),
                policy.as_os_str(),
            ],
            &[("GITFLEET_TEST_CLOCK_SKEW_FILE", skew.as_os_str())],
        )
    }
}

/// `GET <path>` of the status API as JSON (`null` when it does not answer).
fn get_json(addr: &str, path: &str) -> serde_json::Value {
    ureq::get(&format!("{addr}{path}"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .and_then(|b| serde_json::from_str(&b).ok())
        .unwrap_or_default()
}

fn get_text(addr: &str, path: &str) -> String {
    ureq::get(&format!("{addr}{path}"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

/// The accepted approval of `request` in `/api/v1/approvals` (`null` when none).
fn approval_of(addr: &str, request: &str) -> serde_json::Value {
    get_json(addr, "/api/v1/approvals")["approvals"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["request"] == request))
        .cloned()
        .unwrap_or_default()
}

/// The reason `tag` is refused in `/api/v1/approvals` (`None` when it is not).
fn rejection_of(addr: &str, request: &str) -> Option<String> {
    get_json(addr, "/api/v1/approvals")["rejections"]
        .as_array()?
        .iter()
        .find(|x| x["tag"] == format!("gitfleet/approve/{request}"))
        .map(|x| x["reason"].as_str().unwrap_or_default().to_string())
}

/// Wakes a daemon that follows `repo` (its refs are watched): after the test clock moved, so
/// that it looks before its next requeue.
fn wake(repo: &Repo, n: u32) {
    repo.git(&["update-ref", &format!("refs/test/wake-{n}"), "HEAD"]);
}

fn succeeded(d: &serde_json::Value) -> bool {
    run_of(d)["succeeded"] == "True"
}

/// The whole life of a run gated by signed tags, through the daemon: Ops pre-approves canary
/// with an OpenPGP tag before the run reaches it; staging soaks an hour (on the test clock)
/// while alice approves it by SSH; alice's tag is deleted and the daemon SIGKILLed between the
/// stages, and the approval stands; alice may not approve production (policy) and the run keeps
/// waiting; the SRE may; a SIGKILL in the middle of production, `state: Stop` edited in Git
/// while the daemon is down (in-flight members finish, none starts), `Run` again; a tag moved
/// after acceptance changes nothing. Every accepted approval is recorded with its signer, key
/// fingerprint, tag, tag object and time, in status and in the state directory.
fn signed_tags_approve_each_stage_across_restarts(backend: common::members::Backend) {
    // Slow workloads (simulator; real members are slow by themselves): a member stays in
    // flight for a while after its push.
    let fleet = fleet_file().replace("    nodes:", "    workloadDelayMs: 700\n    nodes:");
    let members = Members::start(backend, &fleet);
    let trust = Trust::new();
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml());
    // A Deployment, so that a member is in flight for a while after its push.
    repo.write(
        "app.yaml",
        &APP.replace(
            "---\napiVersion: placement",
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: collector, namespace: telemetry}\n\
             spec:\n  replicas: 1\n  selector: {matchLabels: {app: c}}\n  template:\n    metadata: {labels: {app: c}}\n\
             \x20   spec: {containers: [{name: c, image: 'otel:1'}]}\n---\napiVersion: placement",
        ),
    );
    repo.write("rollout/strategy.yaml", APPROVED_STRATEGY);
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    let init = repo.commit("telemetry, staged, approved by tags");
    // Pre-approval: Ops approves canary before the run exists.
    let canary_tag = trust.keys.sign_tag(
        &repo,
        "rollout-1-before-canary",
        &init,
        Signer::Gpg("ops@example.com", None),
    );
    let state = tempfile::tempdir().unwrap();
    let daemon = trust.start(repo.path(), &members, state.path(), "1m");

    await_status(&daemon.addr, "staging done, soaking and waiting", |d| {
        run_of(d)["waitingFor"] == "rollout-1-after-staging, TimedWait"
    });
    let staging_tag = trust.keys.sign_tag(
        &repo,
        "rollout-1-after-staging",
        &init,
        Signer::Ssh(&trust.alice),
    );
    await_status(&daemon.addr, "staging approved, still soaking", |d| {
        run_of(d)["waitingFor"] == "TimedWait"
    });
    let a = approval_of(&daemon.addr, "rollout-1-after-staging");
    assert_eq!(a["signer"], "alice@example.com");
    assert_eq!(
        a["keyFingerprint"],
        trust.keys.ssh_fingerprint(&trust.alice)
    );
    assert_eq!(a["tagObject"], staging_tag.as_str());
    assert_eq!(a["commit"], init.as_str());
    for m in &MEMBERS[3..] {
        assert!(!has_app(&members, m), "{m}: staging still soaks");
    }

    // The approving tag is deleted and the daemon killed between the stages: the approval is
    // in the state and stands.
    repo.git(&["tag", "-d", "gitfleet/approve/rollout-1-after-staging"]);
    drop(daemon);
    let daemon = trust.start(repo.path(), &members, state.path(), "1m");
    await_status(&daemon.addr, "the restarted daemon still soaks", |d| {
        run_of(d)["waitingFor"] == "TimedWait"
    });
    assert_eq!(
        approval_of(&daemon.addr, "rollout-1-after-staging")["tagObject"],
        staging_tag.as_str()
    );

    // An hour later (on the daemon's clock): canary, pre-approved, runs; production waits.
    trust.skew_clock(3601);
    wake(&repo, 1);
    await_status(&daemon.addr, "canary done, production waits", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-production"
    });
    for m in &MEMBERS[..6] {
        assert!(has_app(&members, m), "{m} has the app");
    }
    let a = approval_of(&daemon.addr, "rollout-1-before-canary");
    assert_eq!(a["signer"], "Ops <ops@example.com>");
    assert_eq!(a["keyFingerprint"], trust.ops_fpr.as_str());
    assert_eq!(a["tagObject"], canary_tag.as_str());

    // Moved after acceptance (re-signed on another commit): nothing changes.
    repo.write("notes.txt", "moved\n");
    let other = repo.commit("another commit");
    trust.keys.sign_tag(
        &repo,
        "rollout-1-before-canary",
        &other,
        Signer::Gpg("ops@example.com", None),
    );

    // Alice may not approve production: refused with the policy's reason, the run waits.
    trust.keys.sign_tag(
        &repo,
        "rollout-1-before-production",
        &init,
        Signer::Ssh(&trust.alice),
    );
    await_until_rejected(&daemon, "rollout-1-before-production", "SignerNotAllowed");
    let run = run_of(&status(&daemon.addr));
    assert_eq!(run["waitingFor"], "rollout-1-before-production");
    for m in &MEMBERS[6..] {
        assert!(!has_app(&members, m), "{m}: production is not approved");
    }
    let metrics = get_text(&daemon.addr, "/metrics");
    for line in [
        "gitfleet_approval_rejections_total{reason=\"SignerNotAllowed\"} 1",
        "gitfleet_update_runs{state=\"Waiting\"} 1",
    ] {
        assert!(metrics.contains(line), "{line}: {metrics}");
    }
    assert_eq!(
        approval_of(&daemon.addr, "rollout-1-before-canary")["tagObject"],
        canary_tag.as_str(),
        "a moved tag does not touch its accepted approval"
    );

    // The SRE approves; the daemon is killed as soon as production's first pair is pushed.
    let prod_tag = trust.keys.sign_tag(
        &repo,
        "rollout-1-before-production",
        &init,
        Signer::Ssh(&trust.sre),
    );
    let mut daemon = daemon;
    await_status(&daemon.addr, "production's first pair started", |d| {
        let started = |c: &serde_json::Value| {
            c["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Started")
        };
        let clusters = &run_of(d)["status"]["stagesStatus"][2]["clusters"];
        started(&clusters[0]) && started(&clusters[1])
    });
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    drop(daemon);

    // Stopped in Git while the daemon is down: what is in flight finishes, nothing more starts.
    repo.write("rollout/run.yaml", &run_yaml("Stop"));
    repo.commit("stop the rollout");
    let daemon = trust.start(repo.path(), &members, state.path(), "1m");
    await_status(&daemon.addr, "the run is stopped", |d| {
        run_of(d)["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["reason"] == "UpdateRunStopped")
    });
    assert!(has_app(&members, "m7") && has_app(&members, "m8"));
    // Whether m9 started before the kill depends on how far the killed daemon got after the
    // pair was seen starting (m9 follows as soon as one of them is done): the stopped run
    // finishes what had started and starts nothing more.
    let stopped = status(&daemon.addr);
    let m9_started = run_of(&stopped)["status"]["stagesStatus"][2]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["clusterName"] == "m9"
                && c["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Started")
        });
    assert_eq!(
        has_app(&members, "m9"),
        m9_started,
        "a stopped run starts no member: m9 has the app only if it started before the kill\n{:#}",
        run_of(&stopped)
    );

    repo.write("rollout/run.yaml", &run_yaml("Run"));
    repo.commit("resume the rollout");
    await_status(&daemon.addr, "the run succeeds", succeeded);
    for m in MEMBERS {
        assert!(has_app(&members, m), "{m} has the app");
    }
    let doc = status(&daemon.addr);
    let run = run_of(&doc);
    assert_eq!(run["initCommit"], init.as_str());
    let production = &run["status"]["stagesStatus"][2];
    for c in production["clusters"].as_array().unwrap() {
        let kinds: Vec<&str> = c["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["Started", "Succeeded"], "{c}");
    }
    let metrics = get_text(&daemon.addr, "/metrics");
    assert!(
        metrics.contains("gitfleet_update_runs{state=\"Succeeded\"} 1"),
        "{metrics}"
    );
    let a = approval_of(&daemon.addr, "rollout-1-before-production");
    assert_eq!(a["signer"], "sre@example.com");
    assert_eq!(a["tagObject"], prod_tag.as_str());
    // The requests as `kubectl get clusterapprovalrequest` lists them: all approved, by whom.
    let requests = doc["approvalRequests"].as_array().unwrap();
    let approvers: Vec<(&str, &str)> = requests
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["approvedBy"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        approvers,
        [
            ("rollout-1-after-staging", "alice@example.com"),
            ("rollout-1-before-canary", "Ops <ops@example.com>"),
            ("rollout-1-before-production", "sre@example.com"),
        ]
    );
    // The state directory holds them: signer, key, tag, tag object, time.
    let saved = std::fs::read_to_string(state.path().join("daemon.json")).unwrap();
    for id in [&staging_tag, &canary_tag, &prod_tag] {
        assert!(saved.contains(id.as_str()), "{id} recorded in the state");
    }
    for field in [
        "\"signer\"",
        "\"keyFingerprint\"",
        "\"tag\"",
        "\"tagObject\"",
        "\"acceptedAt\"",
    ] {
        assert!(saved.contains(field), "{field} recorded in the state");
    }
}

on_both_backends!(
    #[cfg_attr(
        not(feature = "test-hooks"),
        ignore = "needs the daemon's test clock: cargo test --features test-hooks"
    )]
    signed_tags_approve_each_stage_across_restarts
);

/// Waits until the daemon refuses the tag of `request` for `reason`.
fn await_until_rejected(daemon: &Daemon, request: &str, reason: &str) {
    common::daemon::await_until(&format!("{request} refused: {reason}"), || {
        rejection_of(&daemon.addr, request).as_deref() == Some(reason)
    });
}

/// Two gates: before staging and before canary.
const GATED_STRATEGY: &str = r#"apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateStrategy
metadata: {name: three-stage}
spec:
  stages:
  - name: staging
    labelSelector: {matchLabels: {env: staging}}
    beforeStageTasks: [{type: Approval}]
  - name: canary
    labelSelector: {matchLabels: {env: canary}}
    beforeStageTasks: [{type: Approval}]
"#;

impl Trust {
    /// `gitfleet approve …` as alice, with her own git signing setup (a global git config in
    /// the keys' home, never the user's).
    fn approve(&self, args: &[&str]) -> common::Run {
        let config = self.keys.path("gitconfig");
        std::fs::write(
            &config,
            format!(
                "[user]\n\tname = Alice\n\temail = alice@example.com\n\tsigningkey = {}\n[gpg]\n\tformat = ssh\n",
                self.alice.display()
            ),
        )
        .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .arg("approve")
            .args(args)
            .env("GIT_CONFIG_GLOBAL", &config)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.keys.home.path())
            .env_remove("GITFLEET_SERVER")
            .output()
            .unwrap();
        common::Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// A run deleted from Git and brought back under the same name is a new run, initialised at
/// the new commit: the tag that approved the first one is replayed and refused (WrongCommit),
/// the run waits. `gitfleet approve --state DIR` reads the request from the daemon's state
/// directory, says which commit it tags, and replaces the old tag only with --force.
#[test]
fn a_tag_from_an_earlier_run_of_the_same_name_is_refused() {
    let members = Members::start(common::members::Backend::Sim, &fleet_of(&MEMBERS[..3]));
    let trust = Trust::new();
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml_of(&MEMBERS[..3]));
    repo.write("app.yaml", APP);
    repo.write(
        "rollout/strategy.yaml",
        GATED_STRATEGY.split("  - name: canary").next().unwrap(),
    );
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    let first = repo.commit("a gated run");
    let state = tempfile::tempdir().unwrap();
    let daemon = trust.start(repo.path(), &members, state.path(), "1m");
    await_status(&daemon.addr, "the run waits for its approval", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-staging"
    });
    let old_tag = trust.keys.sign_tag(
        &repo,
        "rollout-1-before-staging",
        &first,
        Signer::Ssh(&trust.alice),
    );
    await_status(&daemon.addr, "the first run succeeds", succeeded);

    repo.remove("rollout/run.yaml");
    repo.commit("the run is done: remove it");
    await_status(&daemon.addr, "the run is gone", |d| run_of(d).is_null());
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    let second = repo.commit("a run of the same name again");
    await_status(&daemon.addr, "the new run waits", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-staging"
    });
    assert_eq!(run_of(&status(&daemon.addr))["initCommit"], second.as_str());
    await_until_rejected(&daemon, "rollout-1-before-staging", "WrongCommit");
    assert_eq!(
        run_of(&status(&daemon.addr))["waitingFor"],
        "rollout-1-before-staging",
        "the replayed tag approves nothing"
    );

    // approve reads the request from the state directory; the old tag is replaced only on
    // demand.
    let state_dir = state.path().to_str().unwrap();
    let repo_dir = repo.path().to_str().unwrap();
    let r = trust.approve(&[
        "rollout-1-before-staging",
        "--state",
        state_dir,
        "--repo",
        repo_dir,
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    let r = trust.approve(&[
        "rollout-1-before-staging",
        "--state",
        state_dir,
        "--repo",
        repo_dir,
        "--force",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!("tagging commit {second}"))
            && r.stdout.contains("before stage staging"),
        "{}",
        r.stdout
    );
    await_status(&daemon.addr, "the second run succeeds", succeeded);
    let a = approval_of(&daemon.addr, "rollout-1-before-staging");
    assert_eq!(a["signer"], "alice@example.com");
    assert_eq!(a["commit"], second.as_str());
    assert_ne!(a["tagObject"], old_tag.as_str());
    // Approved already: approve says so (from the state) and makes no tag.
    let r = trust.approve(&[
        "rollout-1-before-staging",
        "--state",
        state_dir,
        "--repo",
        repo_dir,
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("approved already, by alice@example.com"),
        "{}",
        r.stderr
    );
    let r = trust.approve(&[
        "rollout-2-before-staging",
        "--server",
        &daemon.addr,
        "--repo",
        repo_dir,
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("has no approval request"), "{}", r.stderr);
}

/// The daemon follows a remote repository and fetches the approval tags with the branch (on
/// the webhook here): a tag deleted on the remote leaves the mirror (it would otherwise still
/// pre-approve a request), a tag moved on the remote is judged where it points now, and an
/// accepted approval stands when its tag is deleted on the remote. `gitfleet approve --server
/// --push` approves the last stage.
#[test]
fn approval_tags_follow_the_remote_and_accepted_ones_stand() {
    let six = &MEMBERS[..6];
    let members = Members::start(common::members::Backend::Sim, &fleet_of(six));
    let trust = Trust::new();
    let bare = Repo {
        dir: tempfile::tempdir().unwrap(),
    };
    bare.git(&["init", "-q", "--bare", "-b", "main"]);
    let work = Repo::new();
    work.git(&["remote", "add", "origin", bare.path().to_str().unwrap()]);
    work.write("members.yaml", &members_yaml_of(six));
    work.write("app.yaml", APP);
    work.write("rollout/strategy.yaml", GATED_STRATEGY);
    work.write("rollout/run.yaml", &run_yaml("Run"));
    let init = work.commit("a run with two gates");
    work.git(&["push", "-q", "origin", "main"]);
    let state = tempfile::tempdir().unwrap();
    let url = format!("file://{}", bare.path().display());
    let daemon = trust.start(&url, &members, state.path(), "1h");
    let hook = || {
        let code = ureq::post(&format!("{}/hooks/git", daemon.addr))
            .header("X-Gitlab-Token", "s")
            .send(&br#"{"ref":"refs/heads/main"}"#[..])
            .map(|r| r.status().as_u16())
            .unwrap();
        assert_eq!(code, 202);
    };
    await_status(&daemon.addr, "the run waits before staging", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-staging"
    });
    let push_tag = |request: &str, force: bool| {
        let spec = format!("refs/tags/gitfleet/approve/{request}");
        let spec = if force { format!("+{spec}") } else { spec };
        work.git(&["push", "-q", "origin", &spec]);
        hook();
    };

    // Canary pre-approved on the remote: fetched (judged: no such request yet)...
    trust.keys.sign_tag(
        &work,
        "rollout-1-before-canary",
        &init,
        Signer::Ssh(&trust.alice),
    );
    push_tag("rollout-1-before-canary", false);
    await_until_rejected(&daemon, "rollout-1-before-canary", "NoSuchRequest");
    // ...then deleted on the remote: gone from the mirror too.
    work.git(&[
        "push",
        "-q",
        "origin",
        ":refs/tags/gitfleet/approve/rollout-1-before-canary",
    ]);
    hook();
    common::daemon::await_until("the deleted tag leaves the mirror", || {
        rejection_of(&daemon.addr, "rollout-1-before-canary").is_none()
    });

    // Staging approved on the wrong commit, refused; moved on the remote, accepted.
    work.write("notes.txt", "another commit\n");
    let other = work.commit("another commit");
    work.git(&["push", "-q", "origin", "main"]);
    trust.keys.sign_tag(
        &work,
        "rollout-1-before-staging",
        &other,
        Signer::Ssh(&trust.alice),
    );
    push_tag("rollout-1-before-staging", false);
    await_until_rejected(&daemon, "rollout-1-before-staging", "WrongCommit");
    let moved = trust.keys.sign_tag(
        &work,
        "rollout-1-before-staging",
        &init,
        Signer::Ssh(&trust.alice),
    );
    push_tag("rollout-1-before-staging", true);
    // Staging runs; canary waits: the tag deleted on the remote approves nothing.
    await_status(&daemon.addr, "staging done, canary waits", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-canary"
    });
    assert_eq!(
        approval_of(&daemon.addr, "rollout-1-before-staging")["tagObject"],
        moved.as_str()
    );
    for m in &six[3..] {
        assert!(!has_app(&members, m), "{m}: canary is not approved");
    }

    // An accepted approval stands when its tag is deleted on the remote.
    work.git(&[
        "push",
        "-q",
        "origin",
        ":refs/tags/gitfleet/approve/rollout-1-before-staging",
    ]);
    hook();
    common::daemon::await_until("the mirror drops the deleted tag", || {
        !std::process::Command::new("git")
            .arg("--git-dir")
            .arg(state.path().join("repo.git"))
            .args(["tag", "-l", "gitfleet/approve/*"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("before-staging"))
            .unwrap_or(true)
    });
    assert_eq!(
        approval_of(&daemon.addr, "rollout-1-before-staging")["tagObject"],
        moved.as_str()
    );

    // The last gate, approved with `gitfleet approve --push` from the clone.
    let r = trust.approve(&[
        "rollout-1-before-canary",
        "--server",
        &daemon.addr,
        "--repo",
        work.path().to_str().unwrap(),
        "--push",
        "--force",
        // The daemon fetches on the webhook, sent below: no verdict to wait for before it.
        "--wait",
        "0",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    hook();
    await_status(&daemon.addr, "the run succeeds", succeeded);
    for m in six {
        assert!(has_app(&members, m), "{m} has the app");
    }
}

/// The quick start's staged run to its approved stage: staging soaks 15 minutes (passed on the
/// test clock), canary runs, and the quick start prints the `git tag -s` that approves
/// `telemetry-rollout-1-after-canary` with its demo key, runs it, and the daemon (which trusts
/// that key alone) accepts it. The user's git configuration is left as it was.
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs the daemon's test clock: cargo test --features test-hooks"
)]
fn the_quick_start_approves_the_canary_stage_with_its_demo_key() {
    use std::io::BufRead as _;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("demo");
    let home = work.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let user_config = "[user]\n\tname = Someone\n\temail = someone@example.com\n";
    std::fs::write(home.join(".gitconfig"), user_config).unwrap();
    let skew = work.path().join("clock-skew");
    std::fs::write(&skew, "0").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["quickstart", "--listen", "127.0.0.1:0", "--dir"])
        .arg(&dir)
        .env("HOME", &home)
        .env_remove("GIT_CONFIG_GLOBAL")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GITFLEET_TEST_CLOCK_SKEW_FILE", &skew)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut seen: Vec<String> = Vec::new();
    let mut next_line = |what: &str, pred: &dyn Fn(&str) -> bool| -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
                .unwrap_or_else(|_| panic!("no line {what}; saw:\n{}", seen.join("\n")));
            seen.push(line.clone());
            if pred(&line) {
                return line;
            }
        }
    };
    let server = next_line("with the status address", &|l| {
        l.trim_start().starts_with("status") && l.contains("--server")
    })
    .rsplit(' ')
    .next()
    .unwrap()
    .to_string();
    let run = |d: &serde_json::Value| {
        d["updateRuns"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == "telemetry-rollout-1"))
            .cloned()
            .unwrap_or_default()
    };
    await_status(&server, "staging soaks", |d| {
        run(d)["waitingFor"] == "TimedWait"
    });
    // The soak, shortened to a minute, counts down.
    next_line("counting the soak down", &|l| {
        l.starts_with("run telemetry-rollout-1")
            && l.ends_with("soaks after stage staging: 60s left")
    });
    // Its end, on the daemon's clock.
    std::fs::write(&skew, "1000").unwrap();
    let fleet = dir.join("fleet");
    let wake = std::process::Command::new("git")
        .current_dir(dir.join("fleet.git"))
        .args(["update-ref", "refs/test/wake", "HEAD"])
        .status()
        .unwrap();
    assert!(wake.success());
    next_line("asking for the canary approval", &|l| {
        l.contains("waits for approval telemetry-rollout-1-after-canary")
    });
    let command = next_line("with the command", &|l| l.contains("tag -s"))
        .trim()
        .to_string();
    let key = dir.join("demo-key");
    assert!(
        command.starts_with(&format!(
            "git -C {} -c gpg.format=ssh -c user.signingkey={} tag -s -m approve gitfleet/approve/telemetry-rollout-1-after-canary ",
            fleet.display(),
            key.display()
        )),
        "{command}"
    );
    next_line("signing it", &|l| l.contains("signed it with the demo key"));
    next_line("about the accepted approval", &|l| {
        l.contains("approval telemetry-rollout-1-after-canary accepted")
            && l.ends_with("by quickstart@gitfleet.invalid")
    });
    await_status(&server, "the run goes past canary", |d| {
        run(d)["stage"] == "production"
    });
    // The tag the command made: SSH-signed, on the run's initialisation commit.
    let init = run(&status(&server))["initCommit"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        command.ends_with(&format!(
            "{init} && git -C {} push -q origin gitfleet/approve/telemetry-rollout-1-after-canary",
            fleet.display()
        )),
        "{command}"
    );
    let tag = std::process::Command::new("git")
        .current_dir(&fleet)
        .args([
            "cat-file",
            "tag",
            "gitfleet/approve/telemetry-rollout-1-after-canary",
        ])
        .output()
        .unwrap();
    let tag = String::from_utf8_lossy(&tag.stdout);
    assert!(tag.contains(&format!("object {init}")), "{tag}");
    assert!(tag.contains("-----BEGIN SSH SIGNATURE-----"), "{tag}");
    assert_eq!(
        std::fs::read_to_string(home.join(".gitconfig")).unwrap(),
        user_config,
        "the user's git configuration is untouched"
    );

    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

// ---------------------------------------------------------------------------------------------
// After a run: healing, and a state rebuilt from the members' records.
// ---------------------------------------------------------------------------------------------

const THREE: [&str; 3] = ["m1", "m2", "m3"];

/// One stage over every member, all at once; with `approval`, an approval before it.
fn one_stage(approval: bool) -> String {
    format!(
        "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterStagedUpdateStrategy\n\
         metadata: {{name: three-stage}}\nspec:\n  stages:\n  - name: all\n    labelSelector: {{}}\n\
         \x20   maxConcurrency: 3\n{}",
        if approval {
            "    beforeStageTasks: [{type: Approval}]\n"
        } else {
            ""
        }
    )
}

/// The collector's `data.version` on `m` (`None` when it is not there).
fn collector_version(members: &Members, m: &str) -> Option<String> {
    has_app(members, m).then(|| {
        members.get_json(m, &["configmap", "collector", "-n", "telemetry"])["data"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

/// crp/telemetry in a status document, settled on `n` clusters: each up to date, available
/// and not waiting for a re-apply.
fn telemetry_settled(doc: &serde_json::Value, n: usize) -> bool {
    let Some(p) = doc["placements"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["id"] == "crp/telemetry"))
    else {
        return false;
    };
    let clusters = p["clusters"].as_object();
    p["upToDate"].as_array().map(Vec::len) == Some(n)
        && clusters.is_some_and(|c| {
            c.len() == n
                && c.values()
                    .all(|c| c["health"]["state"] == "available" && c["recheck"].is_null())
        })
}

/// Once its run succeeded, an External placement's members are still kept as the run left
/// them: an object deleted by hand is restored (with the run's snapshot, not the head's), and
/// `status`, `wait` and the rollout gauges agree that every cluster is up to date.
fn a_finished_runs_members_are_healed_and_status_wait_and_metrics_agree(
    backend: common::members::Backend,
) {
    let members = Members::start(backend, &fleet_of(&THREE));
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml_of(&THREE));
    repo.write("app.yaml", APP);
    repo.write("rollout/strategy.yaml", &one_stage(false));
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    repo.commit("telemetry, one stage");
    let state = tempfile::tempdir().unwrap();
    let daemon = start(&repo, &members, state.path());
    await_status(&daemon.addr, "the run succeeded", succeeded);
    await_status(&daemon.addr, "crp/telemetry settled", |d| {
        telemetry_settled(d, 3)
    });
    // A newer commit without a new run: nothing moves.
    repo.write("app.yaml", &APP.replace("version: '1'", "version: '2'"));
    repo.commit("version 2, no run yet");
    let (code, _, err) = members.kubectl(
        "m2",
        &["delete", "configmap", "collector", "-n", "telemetry"],
    );
    assert_eq!(code, 0, "{err}");
    common::daemon::await_until("the collector restored on m2", || {
        collector_version(&members, "m2").is_some()
    });
    for m in THREE {
        assert_eq!(collector_version(&members, m).as_deref(), Some("1"), "{m}");
    }
    await_status(&daemon.addr, "crp/telemetry settled again", |d| {
        telemetry_settled(d, 3)
    });
    let wait = gitfleet(&[
        "wait",
        "--server",
        &daemon.addr,
        "--timeout",
        "30s",
        "crp/telemetry",
    ]);
    assert_eq!(wait.code, 0, "{}\n{}", wait.stdout, wait.stderr);
    let metrics = get_text(&daemon.addr, "/metrics");
    assert!(
        metrics.contains(
            "gitfleet_rollout_clusters{placement=\"crp/telemetry\",state=\"upToDate\"} 3"
        ),
        "{metrics}"
    );
}

/// The state directory is lost while the daemon is down, and the head moves on (new content,
/// the same run): a daemon started then rebuilds its view from the members' records.
fn restart_without_state(trust: &Trust, repo: &Repo, members: &Members, state: &Path) -> Daemon {
    std::fs::remove_dir_all(state).unwrap();
    std::fs::create_dir(state).unwrap();
    repo.write("app.yaml", &APP.replace("version: '1'", "version: '2'"));
    repo.commit("version 2, no new run");
    let daemon = trust.start(repo.path(), members, state, "1m");
    daemon.await_log(&["no rollout state: rebuilt the view from the members' records"]);
    daemon
}

/// A finished run is not run again when the state directory is lost: the members' records
/// name the run that delivered what they hold, so the daemon, started without state at a
/// newer head, rebuilds the run as succeeded (initialised at its own commit), waits for no
/// approval, and leaves the members on the run's snapshot.
fn a_finished_run_is_not_run_again_after_the_state_directory_is_lost(
    backend: common::members::Backend,
) {
    let members = Members::start(backend, &fleet_of(&THREE));
    let trust = Trust::new();
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml_of(&THREE));
    repo.write("app.yaml", APP);
    repo.write("rollout/strategy.yaml", &one_stage(true));
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    let init = repo.commit("telemetry, one approved stage");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let daemon = trust.start(repo.path(), &members, &state, "1m");
    await_status(&daemon.addr, "the run waits for its approval", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-all"
    });
    let repo_dir = repo.path().to_str().unwrap();
    let r = trust.approve(&[
        "rollout-1-before-all",
        "--server",
        &daemon.addr,
        "--repo",
        repo_dir,
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // approve waited for the daemon's verdict (it follows this repository: it sees the tag).
    assert!(
        r.stdout
            .contains("accepted: rollout-1-before-all approved by"),
        "{}",
        r.stdout
    );
    await_status(&daemon.addr, "the run succeeded", succeeded);
    for m in THREE {
        assert_eq!(collector_version(&members, m).as_deref(), Some("1"), "{m}");
    }
    drop(daemon);
    let daemon = restart_without_state(&trust, &repo, &members, &state);
    await_status(&daemon.addr, "the run rebuilt as succeeded", succeeded);
    await_status(&daemon.addr, "crp/telemetry settled", |d| {
        telemetry_settled(d, 3)
    });
    let doc = status(&daemon.addr);
    let run = run_of(&doc);
    assert_eq!(run["initCommit"], init.as_str(), "{run:#}");
    assert_eq!(run["resourceSnapshotIndex"], 0, "{run:#}");
    assert_eq!(run["waitingFor"], "-", "{run:#}");
    assert!(
        doc["approvalRequests"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "{doc:#}"
    );
    for m in THREE {
        assert_eq!(
            collector_version(&members, m).as_deref(),
            Some("1"),
            "{m} keeps what the run delivered"
        );
    }
}

/// staging, then canary behind an approval (for [`a_run_lost_part_way_resumes_with_what_the_records_name`]).
const TWO_STAGES: &str = r#"apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateStrategy
metadata: {name: three-stage}
spec:
  stages:
  - name: staging
    labelSelector: {matchLabels: {env: staging}}
    maxConcurrency: 3
  - name: canary
    labelSelector: {matchLabels: {env: canary}}
    beforeStageTasks: [{type: Approval}]
    maxConcurrency: 3
"#;

/// A state directory lost part-way through a run: the staging members' records name the run,
/// its snapshot and its initialisation commit. The daemon, started without state at a newer
/// head, resumes the run with what the records name — it waits at the same approval, which a
/// tag at the run's own commit gives — and the canary members get the run's snapshot, not the
/// head's content.
fn a_run_lost_part_way_resumes_with_what_the_records_name(backend: common::members::Backend) {
    const SIX: [&str; 6] = ["m1", "m2", "m3", "m4", "m5", "m6"];
    let members = Members::start(backend, &fleet_of(&SIX));
    let trust = Trust::new();
    let repo = Repo::new();
    repo.write("members.yaml", &members_yaml_of(&SIX));
    repo.write("app.yaml", APP);
    repo.write("rollout/strategy.yaml", TWO_STAGES);
    repo.write("rollout/run.yaml", &run_yaml("Run"));
    let init = repo.commit("telemetry, staging then an approved canary");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let daemon = trust.start(repo.path(), &members, &state, "1m");
    await_status(
        &daemon.addr,
        "the run waits at the canary's approval",
        |d| run_of(d)["waitingFor"] == "rollout-1-before-canary",
    );
    for m in &SIX[..3] {
        assert_eq!(collector_version(&members, m).as_deref(), Some("1"), "{m}");
    }
    for m in &SIX[3..] {
        assert!(!has_app(&members, m), "{m} waits for the approval");
    }
    drop(daemon);
    let daemon = restart_without_state(&trust, &repo, &members, &state);
    await_status(&daemon.addr, "the run waits at the same approval", |d| {
        run_of(d)["waitingFor"] == "rollout-1-before-canary"
    });
    let run = run_of(&status(&daemon.addr));
    assert_eq!(run["initCommit"], init.as_str(), "{run:#}");
    let repo_dir = repo.path().to_str().unwrap();
    let r = trust.approve(&[
        "rollout-1-before-canary",
        "--server",
        &daemon.addr,
        "--repo",
        repo_dir,
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    await_status(&daemon.addr, "the run succeeded", succeeded);
    let run = run_of(&status(&daemon.addr));
    assert_eq!(run["initCommit"], init.as_str(), "{run:#}");
    assert_eq!(run["resourceSnapshotIndex"], 0, "{run:#}");
    for m in SIX {
        assert_eq!(
            collector_version(&members, m).as_deref(),
            Some("1"),
            "{m} has the run's snapshot, not the head's"
        );
    }
}

on_both_backends!(
    a_finished_runs_members_are_healed_and_status_wait_and_metrics_agree,
    a_finished_run_is_not_run_again_after_the_state_directory_is_lost,
    a_run_lost_part_way_resumes_with_what_the_records_name,
);

/// The OCM side of staged rollouts: a ManifestWorkReplicaSet rolled out `Progressive` with
/// `maxConcurrency: 1` and a `minSuccessTime` of an hour, through the daemon and its test clock.
/// After OCM's test/integration/work/manifestworkreplicaset_test.go ("rolling with min success
/// time"), with three clusters: one cluster gets the work; once it is available it soaks, and the
/// next gets the work only after the hour (in the Placement's decision order, by name); the
/// Placement's `replicaSets` summary counts as OCM's `placementsSummary` and
/// `PlacementRolledOut` turns True when the last cluster is available.
fn a_replica_set_rolls_out_one_cluster_per_soak(backend: common::members::Backend) {
    let members = Members::start(backend, &fleet_of(&THREE));
    let repo = Repo::new();
    repo.write("hub.yaml", &common::ocm_hub("all", &THREE));
    repo.write(
        "wave.yaml",
        "apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata: {name: wave, namespace: apps}
spec:
  placementRefs:
  - name: all
    rolloutStrategy: {type: Progressive, progressive: {maxConcurrency: 1, minSuccessTime: 1h}}
  manifestWorkTemplate:
    workload:
      manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: wave, namespace: default}, data: {a: '1'}}
",
    );
    repo.commit("a progressive replica set");
    let state = members.dir().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let skew = members.dir().join("clock-skew");
    std::fs::write(&skew, "0").unwrap();
    let secret = state.join("secret");
    std::fs::write(&secret, "s").unwrap();
    let daemon = Daemon::start_with(
        repo.path(),
        &members.kubeconfig,
        &state,
        &secret,
        "1m",
        &[],
        &[("GITFLEET_TEST_CLOCK_SKEW_FILE", skew.as_os_str())],
    );
    let has_wave = |m: &str| members.exists(m, &["configmap", "wave", "-n", "default"]);
    let placement = || get_json(&daemon.addr, "/api/v1/placements/ocm/apps/all");
    let summary = |p: &serde_json::Value| p["replicaSets"]["summary"].clone();
    let rolled_out = |p: &serde_json::Value| {
        p["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PlacementRolledOut"))
            .map(|c| c["status"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    for (n, cluster) in THREE.iter().enumerate() {
        if n > 0 {
            // The previous cluster soaks an hour on the daemon's clock before this one starts.
            std::fs::write(&skew, (n as u64 * 3600 + 60).to_string()).unwrap();
            wake(&repo, n as u32);
        }
        // The summary counts the clusters with the work; each with it is available in the end.
        let want = serde_json::json!({
            "total": n + 1, "applied": n + 1, "available": n + 1, "degraded": 0, "progressing": 0
        });
        common::daemon::await_until(&format!("{cluster} has the work, available"), || {
            summary(&placement()) == want
        });
        for (i, other) in THREE.iter().enumerate() {
            assert_eq!(
                has_wave(other),
                i <= n,
                "after {} soak(s), {other} has the work only if it is among the first {}",
                n,
                n + 1
            );
        }
        let expected = if n + 1 == THREE.len() {
            "True"
        } else {
            "False"
        };
        assert_eq!(rolled_out(&placement()), expected, "{:#}", placement());
    }
}

/// After OCM's test/integration/addon/addon_manager_upgrade_test.go ("rolling upgrade per group
/// with MinSuccessTime"), with a ManifestWorkReplicaSet: a Placement whose decision groups are a
/// canary (the cluster labelled `ring: canary`) and then the rest; `ProgressivePerGroup` gives
/// the canary group the work first, and the next group, both its clusters at once, only after
/// the canary soaked its hour.
fn a_replica_set_rolls_out_group_by_group(backend: common::members::Backend) {
    let members = Members::start(backend, &fleet_of(&THREE));
    let repo = Repo::new();
    let hub = common::ocm_hub("rings", &THREE)
        .replace(
            "spec: {clusterSets: [all]}",
            "spec:\n  clusterSets: [all]\n  decisionStrategy:\n    groupStrategy:\n      \
             decisionGroups:\n      - groupName: canary\n        \
             groupClusterSelector: {labelSelector: {matchLabels: {ring: canary}}}",
        )
        .replace(
            "name: m2\n  labels: {",
            "name: m2\n  labels: {ring: canary, ",
        );
    repo.write("hub.yaml", &hub);
    repo.write(
        "rings.yaml",
        "apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata: {name: rings, namespace: apps}
spec:
  placementRefs:
  - name: rings
    rolloutStrategy: {type: ProgressivePerGroup, progressivePerGroup: {minSuccessTime: 1h}}
  manifestWorkTemplate:
    workload:
      manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: rings, namespace: default}, data: {a: '1'}}
",
    );
    repo.commit("a replica set rolled out by decision group");
    let state = members.dir().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let skew = members.dir().join("clock-skew");
    std::fs::write(&skew, "0").unwrap();
    let secret = state.join("secret");
    std::fs::write(&secret, "s").unwrap();
    let daemon = Daemon::start_with(
        repo.path(),
        &members.kubeconfig,
        &state,
        &secret,
        "1m",
        &[],
        &[("GITFLEET_TEST_CLOCK_SKEW_FILE", skew.as_os_str())],
    );
    let has_work = |m: &str| members.exists(m, &["configmap", "rings", "-n", "default"]);
    let placement = || get_json(&daemon.addr, "/api/v1/placements/ocm/apps/rings");
    let summary = |n: usize| serde_json::json!({"total": n, "applied": n, "available": n, "degraded": 0, "progressing": 0});
    // The canary group first: m2 alone (m1 sorts first by name, but it is in the next group).
    common::daemon::await_until("the canary m2 has the work, available", || {
        placement()["replicaSets"]["summary"] == summary(1)
    });
    assert!(has_work("m2") && !has_work("m1") && !has_work("m3"));
    // Soaking, the next group waits however often the daemon looks.
    wake(&repo, 1);
    common::daemon::await_until("a look after the canary is available", || {
        placement()["replicaSets"]["summary"] == summary(1)
    });
    assert!(!has_work("m1") && !has_work("m3"));
    // The hour passes on the daemon's clock: the rest of the clusters, together.
    std::fs::write(&skew, "3660").unwrap();
    wake(&repo, 2);
    common::daemon::await_until("m1 and m3 have the work, available", || {
        placement()["replicaSets"]["summary"] == summary(3)
    });
    assert!(has_work("m1") && has_work("m3"));
}

on_both_backends!(
    #[cfg_attr(
        not(feature = "test-hooks"),
        ignore = "needs the daemon's test clock: cargo test --features test-hooks"
    )]
    a_replica_set_rolls_out_one_cluster_per_soak
);

on_both_backends!(
    #[cfg_attr(
        not(feature = "test-hooks"),
        ignore = "needs the daemon's test clock: cargo test --features test-hooks"
    )]
    a_replica_set_rolls_out_group_by_group
);
