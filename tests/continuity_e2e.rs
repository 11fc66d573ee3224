//! Continuity between commands and releases, end to end (the real binary, members served by
//! `gitfleet sim`): `gitfleet apply` followed by `gitfleet run` on the same commit changes
//! nothing on any member, and a state directory written by gitfleet 0.1.0 is read by this one,
//! which continues that rollout without re-applying what was done.

mod common;
use common::kubectl::Kubectl as _;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::sim::{eventually, SimFleet};
use common::{gitfleet, manifest_dir, Repo, Run};

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

const MEMBERS: [&str; 3] = ["alpha", "bravo", "charlie"];

/// The fleet of the 0.1.0 state fixture (see its README): a RollingUpdate CRP, a CRP placing a
/// namespace alone, a ResourcePlacement with a per-member override, an External CRP and an OCM
/// Placement with its ManifestWorkReplicaSet.
fn fixture() -> PathBuf {
    manifest_dir().join("tests/fixtures/state-0.1.0")
}

/// Commits `commit-<n>/` of the fixture as the only content of the repository.
fn commit_fixture(repo: &Repo, n: u32) -> String {
    for f in common::walk(repo.path()) {
        if !f.starts_with(repo.path().join(".git")) {
            std::fs::remove_file(f).unwrap();
        }
    }
    repo.copy_dir(&fixture().join(format!("commit-{n}")), "");
    repo.commit(&format!("commit {n}"))
}

fn kubeconfig(sim: &SimFleet) -> String {
    sim.kubeconfig.display().to_string()
}

fn apply(repo: &Repo, sim: &SimFleet, extra: &[&str]) -> Run {
    let (repo, kubeconfig) = (repo.path().display().to_string(), kubeconfig(sim));
    let mut args = vec!["apply", "--repo", &repo, "--kubeconfig", &kubeconfig];
    args.extend_from_slice(extra);
    gitfleet(&args)
}

fn run_once(repo: &Repo, sim: &SimFleet, state: &Path) -> Run {
    gitfleet(&[
        "run",
        "--once",
        "--repo",
        repo.path().to_str().unwrap(),
        "--kubeconfig",
        &kubeconfig(sim),
        "--state-dir",
        state.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--log-format",
        "json",
    ])
}

/// `(placement, clusters)` of each `rollout step` log line, in order.
fn rollout_steps(stderr: &str) -> Vec<(String, String)> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "rollout step")
        .map(|v| {
            let field = |k: &str| v["fields"][k].as_str().unwrap_or_default().to_string();
            (field("placement"), field("applying"))
        })
        .collect()
}

/// Every namespace, ConfigMap (gitfleet's records included) and Deployment on a member, with
/// its resourceVersion: any write to one of them changes it.
fn resource_versions(sim: &SimFleet, member: &str) -> BTreeMap<String, String> {
    let list = sim.get_json(member, &["namespaces,configmaps,deployments", "-A"]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let meta = &o["metadata"];
            let id = format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap(),
                meta["namespace"].as_str().unwrap_or(""),
                meta["name"].as_str().unwrap()
            );
            (id, meta["resourceVersion"].as_str().unwrap().to_string())
        })
        .collect()
}

fn config(sim: &SimFleet, member: &str, namespace: &str, name: &str) -> serde_json::Value {
    sim.get_json(member, &["configmap", name, "-n", namespace])["data"].clone()
}

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec: {containers: [{name: shop, image: 'shop:1', resources: {requests: {cpu: 100m}}}]}
";

/// Regression (issue 12): `apply` stamped `gitfleet.io/resource-snapshot` with the hash cut to
/// 16 characters and the daemon with the whole hash, so a `run` after an `apply` of the same
/// commit re-patched every object on every member.
#[test]
fn apply_then_run_on_the_same_commit_writes_nothing() {
    let sim = SimFleet::start(FLEET);
    let repo = Repo::new();
    repo.copy_dir(&fixture().join("commit-1"), "");
    repo.write("shop-deployment.yaml", DEPLOYMENT);
    repo.commit("shop");

    let r = apply(&repo, &sim, &["--retry-budget", "20s"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // The Deployments' controllers finish before the members are read: from then on only
    // gitfleet could write.
    for m in MEMBERS {
        eventually(&format!("the shop Deployment available on {m}"), || {
            let d = sim.get_json(m, &["deployment", "shop", "-n", "shop"]);
            (d["status"]["availableReplicas"] == 1 && d["status"]["observedGeneration"] == 1)
                .then_some(())
        });
    }
    let before: Vec<_> = MEMBERS.iter().map(|m| resource_versions(&sim, m)).collect();

    let state = tempfile::tempdir().unwrap();
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The daemon did push (its state was empty: every binding is new), so the test shows that
    // those pushes found everything as it should be.
    let steps = rollout_steps(&r.stderr);
    assert!(
        steps.contains(&(
            "crp/shop".to_string(),
            r#"["alpha", "bravo", "charlie"]"#.to_string()
        )),
        "{steps:#?}"
    );
    for (m, before) in MEMBERS.iter().zip(&before) {
        let after = resource_versions(&sim, m);
        assert!(after.len() > 5, "{m}: {after:#?}");
        assert_eq!(&after, before, "{m}: run --once wrote to the member");
    }
}

/// A state directory written by gitfleet 0.1.0 in the middle of a rollout (see the fixture's
/// README): the members hold what that state says, and `gitfleet run --once` finishes the
/// rollout by updating charlie alone; alpha and bravo, already updated, are not written to.
#[test]
fn a_state_directory_of_release_0_1_0_is_read_and_its_rollout_continues() {
    let sim = SimFleet::start(FLEET);
    let repo = Repo::new();
    let first = commit_fixture(&repo, 1);
    // The members as the 0.1.0 daemon left them: commit 1 everywhere, then commit 2's shop on
    // alpha and bravo (charlie was down).
    let r = apply(&repo, &sim, &["--rev", &first]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let second = commit_fixture(&repo, 2);
    let scratch = tempfile::tempdir().unwrap();
    let inventory = scratch.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        "clusters:\n- {name: alpha, healthy: true}\n- {name: bravo, healthy: true}\n\
         - {name: charlie, healthy: false, error: down}\n",
    )
    .unwrap();
    let r = apply(
        &repo,
        &sim,
        &[
            "--placement",
            "shop",
            "--inventory",
            inventory.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for (m, version) in [("alpha", "2"), ("bravo", "2"), ("charlie", "1")] {
        assert_eq!(config(&sim, m, "shop", "shop-config")["version"], version);
    }

    let state = tempfile::tempdir().unwrap();
    for f in ["daemon.json", "schedule.json"] {
        std::fs::copy(fixture().join("state").join(f), state.path().join(f)).unwrap();
    }
    let saved = |f: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(state.path().join(f)).unwrap()).unwrap()
    };
    // The repository rebuilt here has the commits the fixture was written for.
    assert_eq!(saved("daemon.json")["serving"], second.as_str());
    assert_eq!(saved("schedule.json")["commit"], second.as_str());

    let untouched: Vec<_> = ["alpha", "bravo"]
        .iter()
        .map(|m| resource_versions(&sim, m))
        .collect();
    let r = run_once(&repo, &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        rollout_steps(&r.stderr),
        [("crp/shop".to_string(), r#"["charlie"]"#.to_string())],
        "only charlie's pending update is applied\n{}",
        r.stderr
    );
    for m in MEMBERS {
        assert_eq!(
            config(&sim, m, "shop", "shop-config")["version"],
            "2",
            "{m}"
        );
        // Commit 1's other placements are still there, as they were.
        assert_eq!(config(&sim, m, "agent", "agent-config")["level"], "info");
    }
    for (m, before) in ["alpha", "bravo"].iter().zip(&untouched) {
        assert_eq!(&resource_versions(&sim, m), before, "{m} was written to");
    }
    let daemon = saved("daemon.json");
    let shop = &daemon["placements"]["crp/shop"];
    assert_eq!(shop["clusters"]["charlie"]["revision"]["resourceIndex"], 1);
    assert_eq!(shop["clusters"]["charlie"]["health"]["state"], "available");
    assert!(
        shop["clusters"]["charlie"]["lastError"].is_null(),
        "{shop:#}"
    );
    // The snapshot history goes on from where 0.1.0 left it.
    let indices: Vec<_> = shop["resources"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [0, 1]);
    assert_eq!(
        daemon["placements"]["rp/web/web"]["clusters"]["bravo"]["revision"],
        saved_fixture("daemon.json")["placements"]["rp/web/web"]["clusters"]["bravo"]["revision"]
    );
}

fn saved_fixture(f: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture().join("state").join(f)).unwrap()).unwrap()
}
