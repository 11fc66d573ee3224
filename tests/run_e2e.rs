//! `gitfleet run` end to end: a real git repository, members served by `gitfleet sim` or, for
//! the tests listed in `on_both_backends!`, also by real API servers with the real deployment
//! controller, scheduler and kwok (the test bed), and the real binary following the branch.

mod common;
use common::kubectl::Kubectl;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::sim::SimFleet;
use common::{gitfleet, Repo};

// The daemon against members, checked on `gitfleet sim` and on real API servers (the test bed).
on_both_backends!(
    sigkill_mid_rollout_resumes_where_it_was,
    max_unavailable_one_updates_members_strictly_one_after_another,
    a_member_down_during_a_rollout_delays_only_itself,
    a_deployment_whose_pods_cannot_schedule_holds_the_rollout_at_its_member,
);

const FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
  - name: bravo
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
  - name: charlie
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
"#;

fn members() -> String {
    ["alpha", "bravo", "charlie"]
        .iter()
        .map(|m| {
            format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: {m}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
            )
        })
        .collect()
}

fn app(version: &str) -> String {
    app_with(version, "1")
}

fn app_with(version: &str, max_unavailable: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shop-config, namespace: shop}}\n\
         data: {{version: \"{version}\"}}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: shop}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: shop}}]\n\
         \x20 strategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: {max_unavailable}, maxSurge: 0}}}}\n"
    )
}

fn fleet_repo(version: &str) -> Repo {
    let repo = Repo::new();
    repo.write("members.yaml", &members());
    repo.write("shop.yaml", &app(version));
    repo.commit("shop");
    repo
}

fn config_version(sim: &impl Kubectl, member: &str) -> Option<String> {
    let (code, out, _) = sim.kubectl(
        member,
        &[
            "get",
            "configmap",
            "shop-config",
            "-n",
            "shop",
            "-o",
            "jsonpath={.data.version}",
        ],
    );
    (code == 0).then_some(out)
}

fn run_once(repo: &Repo, sim: &impl Kubectl, state: &std::path::Path) -> common::Run {
    gitfleet(&[
        "run",
        "--once",
        "--repo",
        repo.path().to_str().unwrap(),
        "--kubeconfig",
        sim.kubectl_paths().0.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--log-format",
        "json",
    ])
}

/// The clusters of each `rollout step` log line, in order.
fn steps_applying(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "rollout step")
        .map(|v| {
            v["fields"]["applying"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn once_rolls_a_commit_out_and_a_bad_commit_changes_nothing() {
    let sim = SimFleet::start(FLEET);
    let repo = fleet_repo("1");
    let state = tempfile::tempdir().unwrap();
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    for m in ["alpha", "bravo", "charlie"] {
        assert_eq!(config_version(&sim, m).as_deref(), Some("1"), "{m}");
    }

    // An invalid head is rejected: the objects stay, the exit code says so.
    repo.write(
        "shop.yaml",
        &app("2").replace("kind: ConfigMap", "kind: ConfigMapp"),
    );
    repo.commit("broken");
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("commit rejected"), "{}", r.stderr);
    for m in ["alpha", "bravo", "charlie"] {
        assert_eq!(config_version(&sim, m).as_deref(), Some("1"), "{m}");
    }
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.path().join("daemon.json")).unwrap()).unwrap();
    assert!(saved["rejected"]["errors"][0]
        .as_str()
        .unwrap()
        .contains("shop.yaml"));

    // The fix rolls out, one member at a time under maxUnavailable 1, as steps of one run.
    repo.write("shop.yaml", &app("2"));
    repo.commit("fixed");
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    for m in ["alpha", "bravo", "charlie"] {
        assert_eq!(config_version(&sim, m).as_deref(), Some("2"), "{m}");
    }
    let steps = steps_applying(&r.stderr);
    assert_eq!(
        steps,
        ["[\"alpha\"]", "[\"bravo\"]", "[\"charlie\"]"],
        "one update per step"
    );
}

/// The status API, as a client sees it.
impl Daemon {
    fn get(&self, path: &str) -> (u16, String) {
        match ureq::get(&format!("{}{path}", self.addr)).call() {
            Ok(mut r) => (r.status().as_u16(), r.body_mut().read_to_string().unwrap()),
            Err(ureq::Error::StatusCode(c)) => (c, String::new()),
            Err(e) => panic!("{e}"),
        }
    }

    fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> u16 {
        let mut req = ureq::post(&format!("{}{path}", self.addr));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        match req.send(body) {
            Ok(r) => r.status().as_u16(),
            Err(ureq::Error::StatusCode(c)) => c,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn the_daemon_follows_pushes_serves_status_and_stops_on_sigterm() {
    let sim = SimFleet::start(FLEET);
    let repo = fleet_repo("1");
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let daemon = Daemon::start(
        repo.path(),
        &sim.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1m",
    );

    await_until("the first commit on every member", || {
        ["alpha", "bravo", "charlie"]
            .iter()
            .all(|m| config_version(&sim, m).as_deref() == Some("1"))
    });
    await_until("readiness", || daemon.get("/readyz").0 == 200);

    // A new commit is seen through the ref watcher (the poll is a minute away).
    repo.write("shop.yaml", &app("2"));
    let head = repo.commit("v2");
    await_until("the second commit everywhere", || {
        ["alpha", "bravo", "charlie"]
            .iter()
            .all(|m| config_version(&sim, m).as_deref() == Some("2"))
    });
    await_until("status to show the new commit settled", || {
        let (_, body) = daemon.get("/api/v1/placements");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["serving"] == head.as_str()
            && v["placements"][0]["upToDate"].as_array().map(Vec::len) == Some(3)
    });
    let status = gitfleet(&["status", "--server", &daemon.addr]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(status.stdout.contains("crp/shop"), "{}", status.stdout);
    assert!(status.stdout.contains("3 available"), "{}", status.stdout);
    let describe = gitfleet(&["status", "--server", &daemon.addr, "shop"]);
    assert!(
        describe.stdout.contains("Up to date:"),
        "{}",
        describe.stdout
    );
    assert!(
        describe
            .stdout
            .contains("ClusterResourcePlacementAvailable            True    ResourceAvailable"),
        "{}",
        describe.stdout
    );
    let (_, body) = daemon.get("/api/v1/placements/crp/shop");
    let shop: serde_json::Value = serde_json::from_str(&body).unwrap();
    let reasons: Vec<&str> = shop["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            "SchedulingPolicyFulfilled",
            "RolloutStarted",
            "NoOverrideSpecified",
            "WorkSynchronized",
            "ApplySucceeded",
            "ResourceAvailable"
        ]
    );
    assert_eq!(shop["perCluster"].as_array().unwrap().len(), 3);
    assert_eq!(
        shop["selectedResources"],
        serde_json::json!(["Namespace/shop", "ConfigMap/shop/shop-config"])
    );
    let (code, metrics) = daemon.get("/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains("gitfleet_member_pushes_total{member=\"alpha\",outcome=\"applied\"}"),
        "{metrics}"
    );

    // Webhooks: a bad signature is refused, a good one accepted.
    let body = br#"{"ref":"refs/heads/main"}"#;
    assert_eq!(
        daemon.post("/hooks/git", &[("X-Gitlab-Token", "wrong")], body),
        401
    );
    assert_eq!(
        daemon.post("/hooks/git", &[("X-Gitlab-Token", "s3cret")], body),
        202
    );

    // SIGTERM: the daemon stops cleanly with its state saved.
    let pid = daemon.child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let mut daemon = daemon;
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = daemon.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let logs: Vec<String> = daemon.lines.try_iter().collect();
    assert!(
        logs.iter().any(|l| l.contains("shutting down")),
        "{logs:#?}"
    );
    let saved: serde_json::Value = serde_json::from_slice(
        &std::fs::read(state.path().join("state").join("daemon.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved["serving"], head.as_str());
}

#[test]
fn quickstart_serves_the_sample_fleet_and_rolls_a_change_out() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("demo");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["quickstart", "--listen", "127.0.0.1:0", "--dir"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = common::lines_of(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    let mut wait_for = |what: &str, pred: &dyn Fn(&str) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("no line {what}; saw:\n{}", seen.join("\n")));
            seen.push(line.clone());
            if pred(&line) {
                return seen.len();
            }
        }
    };
    wait_for("about shop settling", &|l| {
        l.starts_with("crp/shop-app")
            && l.contains("settled on eastus-prod-1, eastus-prod-2, westeurope-prod-1")
    });

    // The change the quick start suggests, committed as a user would.
    let repo = dir.join("fleet");
    let path = repo.join("apps/shop/deployment.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("1.4.2", "1.5.0")).unwrap();
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qam",
            "shop 1.5.0",
        ])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(ok.success());
    // Pushed to the repository the daemon follows, as the quick start says.
    let ok = Command::new("git")
        .args(["push", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(ok.success());
    let start = wait_for("about the new commit", &|l| {
        l.starts_with("== serving commit")
    });
    let end = wait_for("about the rollout ending", &|l| {
        l.starts_with("crp/shop-app") && l.contains("settled on")
    });
    // Progress is sampled every 200 ms, so a short step may not be printed: an apply to the
    // simulator takes milliseconds, but each cluster's new pods take its workload delay
    // (200 ms), one cluster after the other, so the rollout shows clusters in flight. What is
    // printed never shows two clusters in flight at once (maxUnavailable 1 of 3 rounds up to 1).
    let in_flight: Vec<&String> = seen[start..end]
        .iter()
        .filter(|l| {
            l.starts_with("crp/shop-app")
                && (l.contains("applying") || l.contains("becoming available"))
        })
        .collect();
    assert!(!in_flight.is_empty(), "{:#?}", &seen[start..end]);
    for line in &in_flight {
        // A cluster re-read for its availability is applying and becoming available at once.
        let clusters: std::collections::BTreeSet<&str> = ["applying ", "becoming available "]
            .iter()
            .filter_map(|what| line.split(what).nth(1))
            .flat_map(|rest| rest.split(';').next().unwrap().split(", "))
            .collect();
        assert_eq!(clusters.len(), 1, "not one cluster in flight: {line}");
    }

    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

const SLOW_FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
    workloadDelayMs: 600
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
  - name: bravo
    workloadDelayMs: 600
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
  - name: charlie
    workloadDelayMs: 600
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
"#;

fn web(image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: web}}\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: web}}\n\
         spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n\
         \x20 template:\n    metadata: {{labels: {{app: web}}}}\n\
         \x20   spec: {{containers: [{{name: web, image: \"{image}\", resources: {{requests: {{cpu: 100m}}}}}}]}}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: web}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: web}}]\n\
         \x20 strategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: 1, maxSurge: 0}}}}\n"
    )
}

fn image_on(sim: &impl Kubectl, member: &str) -> String {
    let (code, out, err) = sim.kubectl(
        member,
        &["get", "deployment", "web", "-n", "web", "-o", "json"],
    );
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_string()
}

fn resource_index(state: &std::path::Path) -> u64 {
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.join("daemon.json")).unwrap()).unwrap();
    saved["placements"]["crp/web"]["resources"]["records"]
        .as_array()
        .and_then(|r| r.last())
        .and_then(|r| r["index"].as_u64())
        .unwrap()
}

fn sigkill_mid_rollout_resumes_where_it_was(backend: Backend) {
    let sim = Members::start(backend, SLOW_FLEET);
    let repo = Repo::new();
    repo.write("members.yaml", &members());
    repo.write("web.yaml", &web("web:1"));
    repo.commit("web 1");
    let state = tempfile::tempdir().unwrap();
    // v1 everywhere, waiting for the Deployments to become available.
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    for m in ["alpha", "bravo", "charlie"] {
        assert_eq!(image_on(&sim, m), "web:1");
    }
    assert_eq!(resource_index(state.path()), 0);

    // v2 rolls out one member at a time; kill the daemon as soon as the first step starts.
    repo.write("web.yaml", &web("web:2"));
    repo.commit("web 2");
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s").unwrap();
    let mut daemon = Daemon::start(repo.path(), &sim.kubeconfig, state.path(), &secret, "1m");
    daemon.await_log(&["rollout step"]);
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    let updated_before: Vec<&str> = ["alpha", "bravo", "charlie"]
        .into_iter()
        .filter(|m| image_on(&sim, m) == "web:2")
        .collect();
    assert!(updated_before.len() <= 1, "{updated_before:?}");

    // The restart finishes the rollout from where it was: the index never goes back, the
    // remaining members are updated one per step, none twice.
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    for m in ["alpha", "bravo", "charlie"] {
        assert_eq!(image_on(&sim, m), "web:2", "{m}\n{}", r.stderr);
    }
    assert_eq!(resource_index(state.path()), 1);
    let steps = steps_applying(&r.stderr);
    for m in ["alpha", "bravo", "charlie"] {
        let n = steps
            .iter()
            .filter(|l| l.contains(&format!("\"{m}\"")))
            .count();
        assert!(n <= 1, "{m} stepped {n} times: {steps:#?}");
        // A member the killed run had already updated is not updated again.
        if updated_before.contains(&m) {
            assert_eq!(n, 0, "{m} was re-applied: {steps:#?}");
        }
    }
    assert!(steps.iter().all(|s| !s.contains(',')), "{steps:#?}");
}

/// From a member's Deployment changes: when generation `gen` was written and when it was fully
/// available, by the rule gitfleet follows (as KubeFleet's work applier: observed, every replica updated
/// and available, none unavailable; `statusReplicas`, where known, no surge pod left), in
/// sequence numbers shared by all members.
fn update_window(changes: &[serde_json::Value], gen: i64) -> (u64, u64) {
    let start = changes
        .iter()
        .find(|c| c["generation"] == gen)
        .and_then(|c| c["seq"].as_u64())
        .expect("the update was written");
    let available = changes
        .iter()
        .find(|c| {
            c["generation"] == gen
                && c["observedGeneration"] == gen
                && c["replicas"].is_i64()
                && c["availableReplicas"] == c["replicas"]
                && c["updatedReplicas"] == c["replicas"]
                && c["unavailableReplicas"].as_i64().unwrap_or(0) == 0
                && (c["statusReplicas"].is_null() || c["statusReplicas"] == c["replicas"])
        })
        .and_then(|c| c["seq"].as_u64())
        .expect("the update became available");
    (start, available)
}

/// A member's Deployment `web/web` as it changes, on the real backend: `kubectl get --watch`
/// (the current object, then every change after it, with no gap) in the shape of the
/// simulator's change log. The test bed's members keep their objects in one etcd, so their
/// resourceVersions are revisions of one store: one order across members, as the simulator's
/// sequence numbers.
struct DeploymentWatch {
    child: Child,
    seen: Arc<Mutex<String>>,
}

impl DeploymentWatch {
    fn start(members: &Members, member: &str) -> DeploymentWatch {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&members.kubeconfig)
            .args(["--context", member, "get", "deployment", "web", "-n", "web"])
            .args(["--watch", "--output-watch-events", "-o", "json"])
            .env("KUBECACHEDIR", members.dir().join("kube-cache"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl runs");
        let seen = Arc::new(Mutex::new(String::new()));
        let mut out = child.stdout.take().unwrap();
        let sink = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let watch = DeploymentWatch { child, seen };
        await_until("kubectl to print the Deployment it watches", || {
            !watch.changes().is_empty()
        });
        watch
    }

    /// The changes seen so far, as the simulator's change log has them.
    fn changes(&self) -> Vec<serde_json::Value> {
        let text = self.seen.lock().unwrap().clone();
        serde_json::Deserializer::from_str(&text)
            .into_iter::<serde_json::Value>()
            .map_while(Result::ok)
            .map(|event| {
                let o = &event["object"];
                serde_json::json!({
                    "seq": o["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse::<u64>().ok()),
                    "generation": o["metadata"]["generation"],
                    "observedGeneration": o["status"]["observedGeneration"],
                    "replicas": o["spec"]["replicas"],
                    "statusReplicas": o["status"]["replicas"],
                    "updatedReplicas": o["status"]["updatedReplicas"],
                    "availableReplicas": o["status"]["availableReplicas"],
                    "unavailableReplicas": o["status"]["unavailableReplicas"],
                })
            })
            .collect()
    }
}

impl Drop for DeploymentWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn max_unavailable_one_updates_members_strictly_one_after_another(backend: Backend) {
    let sim = Members::start(backend, SLOW_FLEET);
    let repo = Repo::new();
    repo.write("members.yaml", &members());
    repo.write("web.yaml", &web("web:1"));
    repo.commit("web 1");
    let state = tempfile::tempdir().unwrap();
    assert_eq!(run_once(&repo, &sim, state.path()).code, 0);
    let watches: Vec<(&str, DeploymentWatch)> = match backend {
        Backend::Real => ["alpha", "bravo", "charlie"]
            .into_iter()
            .map(|m| (m, DeploymentWatch::start(&sim, m)))
            .collect(),
        Backend::Sim => Vec::new(),
    };
    repo.write("web.yaml", &web("web:2"));
    repo.commit("web 2");
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);

    // The members' change logs, in one order: each member's update starts only after the
    // previous one's Deployment is fully available again.
    let changes = |m: &str| -> Vec<serde_json::Value> {
        match sim.sim() {
            Some(s) => s.changes(m, "deployments"),
            None => {
                let watch = &watches.iter().find(|w| w.0 == m).unwrap().1;
                // What the daemon saw available, the watch delivers too (maybe a moment later).
                await_until("the watch to see the update available", || {
                    std::panic::catch_unwind(|| update_window(&watch.changes(), 2)).is_ok()
                });
                watch.changes()
            }
        }
    };
    let mut windows: Vec<(u64, u64, &str)> = ["alpha", "bravo", "charlie"]
        .into_iter()
        .map(|m| {
            let (start, available) = update_window(&changes(m), 2);
            (start, available, m)
        })
        .collect();
    windows.sort();
    let order: Vec<&str> = windows.iter().map(|w| w.2).collect();
    assert_eq!(order, ["alpha", "bravo", "charlie"]);
    for pair in windows.windows(2) {
        assert!(
            pair[1].0 > pair[0].1,
            "{} started (seq {}) before {} was available (seq {})",
            pair[1].2,
            pair[1].0,
            pair[0].2,
            pair[0].1
        );
    }
}

fn a_member_down_during_a_rollout_delays_only_itself(backend: Backend) {
    let sim = Members::start(backend, FLEET);
    let repo = Repo::new();
    repo.write("members.yaml", &members());
    repo.write("shop.yaml", &app_with("1", "2"));
    repo.commit("v1");
    let state = tempfile::tempdir().unwrap();
    assert_eq!(run_once(&repo, &sim, state.path()).code, 0);

    // alpha goes down; v2 lands on the others (maxUnavailable 2 leaves room for a failed
    // member) without waiting for alpha's retries, and the run says alpha failed.
    sim.stop_member("alpha");
    repo.write("shop.yaml", &app_with("2", "2"));
    repo.commit("v2");
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("member unreachable"), "{}", r.stderr);
    for m in ["bravo", "charlie"] {
        assert_eq!(config_version(&sim, m).as_deref(), Some("2"), "{m}");
    }

    // Back up: the next run catches alpha up.
    sim.start_member("alpha");
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(config_version(&sim, "alpha").as_deref(), Some("2"));
}

/// A Deployment whose pods fit no node is applied but never becomes available (on the real
/// backend: the scheduler leaves its pod Pending, Unschedulable): under maxUnavailable 1 the
/// rollout holds at the first member, says the cluster is not available, and touches no other.
fn a_deployment_whose_pods_cannot_schedule_holds_the_rollout_at_its_member(backend: Backend) {
    let sim = Members::start(backend, SLOW_FLEET);
    let repo = Repo::new();
    repo.write("members.yaml", &members());
    repo.write("web.yaml", &web("web:1"));
    repo.commit("web 1");
    let state = tempfile::tempdir().unwrap();
    assert_eq!(run_once(&repo, &sim, state.path()).code, 0);

    // 64 cpu on members of one 4-cpu node: no node fits.
    repo.write(
        "web.yaml",
        &web("web:2").replace("requests: {cpu: 100m}", "requests: {cpu: '64'}"),
    );
    repo.commit("web 2, too big");
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s").unwrap();
    let daemon = Daemon::start(repo.path(), &sim.kubeconfig, state.path(), &secret, "1m");
    let pending = || -> serde_json::Value {
        let (_, body) = daemon.get("/api/v1/placements/crp/web");
        serde_json::from_str(&body).unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let web = pending();
        let not_available = web["perCluster"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c.to_string().contains("NotAllWorkAreAvailable"))
        });
        if not_available {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no cluster reported not available: {web:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Its pod stays Pending as the scheduler leaves it: no node has the cpu.
    let first = ["alpha", "bravo", "charlie"]
        .into_iter()
        .find(|m| image_on(&sim, m) == "web:2")
        .expect("one member has the update");
    await_until("the new pod to be unschedulable", || {
        let (_, out, _) = sim.kubectl(first, &["get", "pods", "-n", "web", "-o", "json"]);
        let pods: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        pods["items"].as_array().is_some_and(|items| {
            items.iter().any(|p| {
                p["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "PodScheduled"
                            && c["status"] == "False"
                            && c["reason"] == "Unschedulable"
                    })
                })
            })
        })
    });
    // The rollout stays where it is: the first member's worker re-reads it on its own, and the
    // daemon looks again only when an answer changes, so no other member is touched.
    let updated: Vec<&str> = ["alpha", "bravo", "charlie"]
        .into_iter()
        .filter(|m| image_on(&sim, m) == "web:2")
        .collect();
    assert_eq!(updated, [first], "only the first member is touched");
    let web = pending();
    let cluster = web["perCluster"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == first)
        .unwrap_or_else(|| panic!("no {first} in {web:#}"))
        .clone();
    let text = cluster.to_string();
    assert!(text.contains("NotAllWorkAreAvailable"), "{cluster:#}");
}

#[test]
fn report_diff_placements_show_their_differences_in_status() {
    let sim = SimFleet::start(FLEET);
    let repo = Repo::new();
    repo.write("members.yaml", &members());
    repo.write(
        "shop.yaml",
        &app("1").replace(
            "strategy: {type: RollingUpdate,",
            "strategy: {applyStrategy: {type: ReportDiff}, type: RollingUpdate,",
        ),
    );
    repo.commit("report only");
    // bravo already runs a different version of the ConfigMap, made by someone else.
    sim.apply(
        "bravo",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shop-config, namespace: shop}\n\
         data: {version: \"0\"}\n",
        &[],
    );
    let state = tempfile::tempdir().unwrap();
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Nothing written: alpha has nothing, bravo keeps its version.
    assert_eq!(config_version(&sim, "alpha"), None);
    assert_eq!(config_version(&sim, "bravo").as_deref(), Some("0"));
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.path().join("daemon.json")).unwrap()).unwrap();
    let bravo = &saved["placements"]["crp/shop"]["clusters"]["bravo"];
    assert_eq!(bravo["health"]["state"], "diffReported", "{bravo:#}");
    let diffs: Vec<&str> = bravo["diffs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        diffs
            .iter()
            .any(|d| d.contains("ConfigMap shop/shop-config")
                && d.contains("version")
                && d.contains("\"0\" → \"1\"")),
        "{diffs:#?}"
    );
}

/// `gitfleet wait` returns 0 once a commit is served and settled, 1 when it is
/// rejected, 2 on its timeout; `gitfleet status --watch` prints the status again on every
/// change and ends cleanly on Ctrl-C.
#[test]
fn wait_follows_a_commit_to_settled_or_rejected_and_status_watch_redraws_on_change() {
    let sim = SimFleet::start(FLEET);
    let repo = fleet_repo("1");
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let daemon = Daemon::start(
        repo.path(),
        &sim.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1m",
    );
    let server = daemon.addr.clone();
    let repo_path = repo.path().to_str().unwrap().to_string();

    // `status --watch` on a pipe: one block per change, separated by a blank line.
    let mut watch = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args([
            "status",
            "--watch",
            "--interval",
            "100ms",
            "--server",
            &server,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let watched = common::lines_of(watch.stdout.take().unwrap());

    // This checkout's HEAD, served and settled: every member has it when wait returns.
    let run = gitfleet(&[
        "wait",
        "--repo",
        &repo_path,
        "--server",
        &server,
        "--timeout",
        "120s",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("served: 1 placement(s) settled"),
        "{}",
        run.stdout
    );
    for m in ["alpha", "bravo", "charlie"] {
        assert_eq!(config_version(&sim, m).as_deref(), Some("1"), "{m}");
    }
    // `-o wide` names the clusters; a local repository's source is read, not fetched.
    let wide = gitfleet(&["status", "-o", "wide", "--server", &server]);
    assert_eq!(wide.code, 0, "{}", wide.stderr);
    assert!(
        wide.stdout.contains(&format!("source {repo_path}  read "))
            && wide.stdout.contains("SELECTED-CLUSTERS")
            && wide.stdout.contains("alpha,bravo,charlie"),
        "{}",
        wide.stdout
    );

    // A new commit, named by a prefix of its id, one placement.
    repo.write("shop.yaml", &app("2"));
    let second = repo.commit("v2");
    let run = gitfleet(&[
        "wait",
        "--commit",
        &second[..10],
        "--server",
        &server,
        "--timeout",
        "120s",
        "shop",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for m in ["alpha", "bravo", "charlie"] {
        assert_eq!(config_version(&sim, m).as_deref(), Some("2"), "{m}");
    }

    // An invalid commit fails the wait, naming the problem.
    repo.write("broken.yaml", "kind: [\n");
    repo.commit("broken");
    let run = gitfleet(&[
        "wait",
        "--repo",
        &repo_path,
        "--server",
        &server,
        "--timeout",
        "120s",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("was rejected") && run.stderr.contains("broken.yaml"),
        "{}",
        run.stderr
    );

    // A commit the daemon never serves: the timeout, exit 2, saying what it waited for.
    let run = gitfleet(&[
        "wait",
        "--commit",
        "deadbeef",
        "--server",
        &server,
        "--timeout",
        "1s",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("timed out after 1s") && run.stderr.contains("not yet deadbeef"),
        "{}",
        run.stderr
    );

    // The watch printed the status as it changed: the second commit served, then the rejection.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.iter().any(|l: &String| l.starts_with("REJECTED")) {
        let line = watched
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("the watch shows the rejection; saw:\n{}", seen.join("\n")));
        seen.push(line);
    }
    let served_second = format!("serving {}", &second[..12]);
    assert!(
        seen.iter().any(|l| l.contains(&served_second)),
        "{}",
        seen.join("\n")
    );
    let blocks = seen.iter().filter(|l| l.starts_with("branch main")).count();
    assert!(blocks >= 3, "{}", seen.join("\n"));
    // Ctrl-C: a clean end.
    let pid = watch.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = watch.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "status --watch did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}

/// A quick start whose port is taken stops before it writes anything, so running
/// it again (on a free port) just works.
#[test]
fn a_quickstart_whose_port_is_taken_leaves_no_folder_behind() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("demo");
    let dir_arg = dir.to_str().unwrap();
    let run = gitfleet(&["quickstart", "--listen", &addr, "--dir", dir_arg]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("cannot listen on {addr}"))
            && run.stderr.contains("use --listen to pick another address"),
        "{}",
        run.stderr
    );
    assert!(!dir.exists(), "{} was left behind", dir.display());
    drop(taken);

    let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args([
            "quickstart",
            "--listen",
            "127.0.0.1:0",
            "--no-approve",
            "--dir",
            dir_arg,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    assert_eq!(first.trim(), "gitfleet quickstart", "stderr: {err}");
    assert!(dir.join("fleet").join(".git").exists());
}

/// `gitfleet wait` rides out a daemon restart (an upgrade, a new leader): once the
/// daemon has answered, a refused connection is waited through until the timeout, and the
/// restarted daemon's serving of the commit ends the wait with 0.
#[test]
fn wait_survives_a_restart_of_the_daemon() {
    let sim = SimFleet::start(FLEET);
    let repo = fleet_repo("1");
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let start = |listen: &str| {
        Daemon::start_with(
            repo.path(),
            &sim.kubeconfig,
            &state.path().join("state"),
            &secret,
            "1m",
            &[OsStr::new("--listen"), OsStr::new(listen)],
            &[],
        )
    };
    let first = start("127.0.0.1:0");
    let server = first.addr.clone();
    let listen = server.trim_start_matches("http://").to_string();

    // The awaited commit sits on a side branch, so the first daemon cannot serve it.
    repo.git(&["checkout", "-q", "-b", "next"]);
    repo.write("shop.yaml", &app("2"));
    let next = repo.commit("v2");
    repo.git(&["checkout", "-q", "main"]);

    let mut wait = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["wait", "--commit", &next, "--server", &server])
        .args(["--timeout", "120s", "--interval", "100ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = common::lines_of(wait.stderr.take().unwrap());
    let await_said = |words: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = said
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("wait never said {words:?}"));
            if line.contains(words) {
                return;
            }
        }
    };
    await_said("not yet");
    drop(first);
    await_said("cannot reach gitfleet daemon");

    // The branch moves on while no daemon runs; the restarted one serves it.
    repo.git(&["merge", "-q", "--ff-only", "next"]);
    let _second = start(&listen);
    let out = wait.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("served: 1 placement(s) settled"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for m in ["alpha", "bravo", "charlie"] {
        assert_eq!(config_version(&sim, m).as_deref(), Some("2"), "{m}");
    }
}
