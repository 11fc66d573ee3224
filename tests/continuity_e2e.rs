//! Continuity between commands and releases, end to end (the real binary, members served by
//! `gitfleet sim`): `gitfleet apply` followed by `gitfleet run` on the same commit changes
//! nothing on any member, and a state directory written by gitfleet 0.1.0 is read by this one,
//! which continues that rollout without re-applying what was done; a daemon restarted with
//! nothing changed confirms every binding without writing to any member.

mod common;
use common::kubectl::Kubectl as _;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::daemon::{await_until, Daemon};
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

/// `apply` and the daemon stamp `gitfleet.io/resource-snapshot` with the same whole hash: a
/// stamp that differed (one cut short) would make a `run` after an `apply` of the same commit
/// re-patch every object on every member.
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

/// Whether the daemon's status shows `commit` served, every placement settled and every
/// binding available with no re-check pending (what a start-up re-applies): everything it
/// knows of confirmed on its member.
fn confirmed(daemon: &Daemon, commit: &str) -> bool {
    let url = format!("{}/api/v1/placements", daemon.addr);
    let Ok(mut response) = ureq::get(&url).call() else {
        return false;
    };
    let doc: serde_json::Value =
        serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
    let placements = doc["placements"].as_array().cloned().unwrap_or_default();
    doc["serving"] == commit
        && !placements.is_empty()
        && placements.iter().all(|p| {
            ["applying", "removing", "waiting"]
                .iter()
                .all(|k| p[k].as_array().is_none_or(Vec::is_empty))
                && p["clusters"].as_object().is_some_and(|cs| {
                    !cs.is_empty()
                        && cs
                            .values()
                            .all(|c| c["recheck"].is_null() && c["health"]["state"] == "available")
                })
        })
}

/// Requests that could write (POST, PUT, PATCH, DELETE) each member received so far, as the
/// simulator counts them.
fn writes(sim: &SimFleet) -> Vec<u64> {
    requests(sim, "writes")
}

fn requests(sim: &SimFleet, which: &str) -> Vec<u64> {
    MEMBERS
        .iter()
        .map(|m| sim.member(m)["requests"][which].as_u64().unwrap())
        .collect()
}

/// A daemon restarted on its state directory with nothing changed while it was
/// down re-checks every binding on its member (the start-up re-check, which must not re-apply
/// every object with a server-side apply) and writes nothing.
#[test]
fn a_restart_with_nothing_changed_confirms_every_binding_without_writing() {
    let sim = SimFleet::start(FLEET);
    let repo = Repo::new();
    let members: String = MEMBERS
        .iter()
        .map(|m| {
            format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: {m}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
            )
        })
        .collect();
    repo.write("members.yaml", &members);
    repo.write(
        "shop.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shop-config, namespace: shop}\n\
         data: {version: '1'}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {name: shop}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: shop}]\n",
    );
    repo.write("shop-deployment.yaml", DEPLOYMENT);
    let head = repo.commit("shop");
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s").unwrap();

    let daemon = Daemon::start(repo.path(), &sim.kubeconfig, state.path(), &secret, "1m");
    await_until("the first rollout confirmed", || confirmed(&daemon, &head));
    let first = writes(&sim);
    assert!(first.iter().all(|w| *w > 0), "{first:?}");
    drop(daemon);

    let (before, reads) = (writes(&sim), requests(&sim, "reads"));
    let daemon = Daemon::start(repo.path(), &sim.kubeconfig, state.path(), &secret, "1m");
    await_until("every binding confirmed after the restart", || {
        confirmed(&daemon, &head)
    });
    assert_eq!(writes(&sim), before, "the restart wrote to members");
    // It did look: every member was read again (records, objects).
    let after = requests(&sim, "reads");
    assert!(
        after.iter().zip(&reads).all(|(a, b)| a > b),
        "{reads:?} → {after:?}"
    );
}
