//! End-to-end: `gitfleet inventory` and `--inventory live` against members served by the real
//! `gitfleet sim` or, for the tests listed in `on_both_backends!`, also by real API servers with
//! the real scheduler and kwok's nodes (the test bed), reached only through the kubeconfig.

mod common;
use common::daemon::{await_until, Daemon};
use common::kubectl::Kubectl as _;
use common::members::{Backend, Members};
use common::{gitfleet, Repo, Run};
use serde_json::Value;
use std::time::{Duration, Instant};

// Member-facing behaviour, checked on `gitfleet sim` and on real API servers (the test bed).
on_both_backends!(
    inventory_reads_nodes_and_pods_and_live_scheduling_follows_it,
    namespace_collection_sends_a_resource_placement_where_its_namespace_exists,
    the_daemon_with_namespace_collection_follows_a_namespace_created_on_a_member,
);

/// `small`: two ready nodes with reserved capacity and one node that is not ready. `big`: three
/// schedulable nodes and a cordoned one. `third`: reached through another context name.
const FLEET: &str = r#"
anonymousAuth: true
members:
  - name: small
    nodes:
      - count: 2
        cpu: "4"
        memory: 16Gi
        allocatableCpu: 3800m
        allocatableMemory: 15Gi
        instanceType: D4
      - pool: broken
        cpu: "4"
        memory: 16Gi
        instanceType: D4
        ready: false
  - name: big
    workloadDelayMs: 0
    nodes:
      - count: 3
        cpu: "8"
        memory: 32Gi
        instanceType: D8
      - pool: cordoned
        cpu: "8"
        memory: 32Gi
        instanceType: D8
        unschedulable: true
  - name: third
    context: admin@third
    nodes:
      - cpu: "2"
        memory: 8Gi
        instanceType: B2
"#;

fn member(name: &str, metadata_extra: &str) -> String {
    format!(
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: {name}
{metadata_extra}spec:
  identity: {{name: agent, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
"
    )
}

/// Two placements that read live properties: every member with more than 5 cpu available, and
/// the one member with the most cpu available.
const PLACEMENTS: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: app}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata: {name: roomy}
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: app}
  policy:
    placementType: PickAll
    affinity:
      clusterAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          clusterSelectorTerms:
          - propertySelector:
              matchExpressions:
              - {name: resources.kubernetes-fleet.io/available-cpu, operator: Gt, values: ['5']}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata: {name: most-cpu}
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: app}
  policy:
    placementType: PickN
    numberOfClusters: 1
    affinity:
      clusterAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          preference:
            propertySorter: {name: resources.kubernetes-fleet.io/available-cpu, sortOrder: Descending}
";

fn fleet_repo() -> Repo {
    let repo = Repo::new();
    repo.write("placements.yaml", PLACEMENTS);
    repo.write("members/small.yaml", &member("small", ""));
    repo.write("members/big.yaml", &member("big", ""));
    repo.write(
        "members/third.yaml",
        &member(
            "third",
            "  annotations:\n    gitfleet.io/kubeconfig-context: admin@third\n    gitfleet.io/properties: '{\"example.com/tier\": \"2\"}'\n",
        ),
    );
    repo.commit("fleet");
    repo
}

fn run(repo: &Repo, members: &Members, command: &str, extra: &[&str]) -> Run {
    let repo_path = repo.path().display().to_string();
    let kubeconfig = members.kubeconfig.display().to_string();
    let mut args = vec![command, "--repo", &repo_path, "--kubeconfig", &kubeconfig];
    args.extend_from_slice(extra);
    gitfleet(&args)
}

fn inventory_json(repo: &Repo, members: &Members, extra: &[&str]) -> Value {
    let mut args = vec!["-o", "json"];
    args.extend_from_slice(extra);
    let r = run(repo, members, "inventory", &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).expect("inventory prints JSON")
}

fn cluster<'a>(inv: &'a Value, name: &str) -> &'a Value {
    inv["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no cluster {name} in {inv:#}"))
}

fn picked(schedule: &Value, placement: &str) -> Vec<String> {
    let p = schedule["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == placement)
        .unwrap();
    serde_json::from_value(p["selected"].clone()).unwrap()
}

fn schedule_live(repo: &Repo, members: &Members) -> Value {
    let r = run(
        repo,
        members,
        "schedule",
        &["--inventory", "live", "-o", "json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

/// Polls `check` until it holds or the deadline passes (bounds a hang; not a timing assumption).
fn await_condition(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn inventory_reads_nodes_and_pods_and_live_scheduling_follows_it(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    let prices = members.dir().join("prices.yaml");
    std::fs::write(&prices, "instanceTypes: {D4: 0.192, D8: 0.384}\n").unwrap();
    let prices = prices.display().to_string();

    let inv = inventory_json(&repo, &members, &["--prices", &prices]);
    let props = |name: &str| cluster(&inv, name)["properties"].clone();
    assert_eq!(
        props("small"),
        serde_json::json!({
            "kubernetes-fleet.io/node-count": "3",
            "kubernetes.azure.com/per-cpu-core-cost": "0.048",
            "kubernetes.azure.com/per-gb-memory-cost": "0.012",
            "kubernetes.azure.com/vm-sizes/D4/capacity": "2",
            "resources.kubernetes-fleet.io/allocatable-cpu": "7600m",
            "resources.kubernetes-fleet.io/allocatable-memory": "30Gi",
            "resources.kubernetes-fleet.io/available-cpu": "7600m",
            "resources.kubernetes-fleet.io/available-memory": "30Gi",
            "resources.kubernetes-fleet.io/total-cpu": "8",
            "resources.kubernetes-fleet.io/total-memory": "32Gi",
        })
    );
    let big = props("big");
    assert_eq!(big["kubernetes-fleet.io/node-count"], "4");
    // The cordoned node is ready capacity of its size, but holds nothing schedulable.
    assert_eq!(big["kubernetes.azure.com/vm-sizes/D8/capacity"], "4");
    assert_eq!(big["resources.kubernetes-fleet.io/allocatable-cpu"], "24");
    assert_eq!(
        big["resources.kubernetes-fleet.io/available-memory"],
        "96Gi"
    );
    assert_eq!(big["kubernetes.azure.com/per-cpu-core-cost"], "0.048");
    // `third` is reached through its annotated context, carries its declared property, and gets
    // no costs: its instance type is not priced.
    let third = props("third");
    assert_eq!(cluster(&inv, "third")["healthy"], true);
    assert_eq!(third["example.com/tier"], "2");
    assert_eq!(third["resources.kubernetes-fleet.io/available-cpu"], "2");
    assert!(third
        .get("kubernetes.azure.com/per-cpu-core-cost")
        .is_none());

    // The printed inventory is an inventory file: schedule reads it back, and deciding from it
    // is deciding live.
    let file = members.dir().join("inventory.yaml");
    let yaml = run(&repo, &members, "inventory", &[]);
    assert_eq!(yaml.code, 0, "{}", yaml.stderr);
    std::fs::write(&file, &yaml.stdout).unwrap();
    let from_file = gitfleet(&[
        "schedule",
        "--repo",
        repo.path().to_str().unwrap(),
        "--inventory",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert_eq!(from_file.code, 0, "{}", from_file.stderr);
    let from_file: Value = serde_json::from_str(&from_file.stdout).unwrap();
    let live = schedule_live(&repo, &members);
    assert_eq!(from_file, live);
    assert_eq!(picked(&live, "roomy"), ["big", "small"]);
    assert_eq!(picked(&live, "most-cpu"), ["big"]);

    // Three pods of 7 cpu land on big's three schedulable nodes: 3 of its 24 cpu stay free.
    let deployment = members.dir().join("hungry.yaml");
    std::fs::write(
        &deployment,
        "apiVersion: apps/v1
kind: Deployment
metadata: {name: hungry, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: hungry}}
  template:
    metadata: {labels: {app: hungry}}
    spec:
      containers:
      - name: c
        image: busybox
        resources: {requests: {cpu: '7', memory: 1Gi}}
",
    )
    .unwrap();
    let (code, _, err) = members.kubectl(
        "big",
        &["apply", "--server-side", "-f", deployment.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    await_condition("three running pods on big", || {
        let pods = members.get_json("big", &["pods", "-n", "default", "-l", "app=hungry"]);
        let items = pods["items"].as_array().cloned().unwrap_or_default();
        items.len() == 3 && items.iter().all(|p| p["status"]["phase"] == "Running")
    });
    let inv = inventory_json(&repo, &members, &[]);
    let big = &cluster(&inv, "big")["properties"];
    assert_eq!(big["resources.kubernetes-fleet.io/available-cpu"], "3");
    assert_eq!(
        big["resources.kubernetes-fleet.io/available-memory"],
        "93Gi"
    );
    assert_eq!(big["resources.kubernetes-fleet.io/allocatable-cpu"], "24");

    let live = schedule_live(&repo, &members);
    assert_eq!(picked(&live, "roomy"), ["small"]);
    assert_eq!(picked(&live, "most-cpu"), ["small"]);

    // plan probes once for base and head; the same commit changes nothing.
    let head = repo.git(&["rev-parse", "HEAD"]);
    let plan = run(
        &repo,
        &members,
        "plan",
        &["--base", &head, "--head", &head, "--inventory", "live"],
    );
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
}

/// Two plain members for the namespace-collection test.
const TWO_MEMBERS: &str = r#"
anonymousAuth: true
members:
  - name: alpha
    nodes: [{cpu: "2", memory: 8Gi}]
  - name: beta
    nodes: [{cpu: "2", memory: 8Gi}]
"#;

/// A ResourcePlacement in namespace `shop` (its namespace is not placed by gitfleet: it must
/// already exist on a member, as KubeFleet requires of a ResourcePlacement).
const SHOP: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: shop}
data: {k: v}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ResourcePlacement
metadata: {name: cfg, namespace: shop}
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: ConfigMap, name: cfg}
  policy: {placementType: PickAll}
";

/// A placement's selected clusters, and each cluster's decision reason.
type Decisions = (Vec<String>, Vec<(String, String)>);

/// The ResourcePlacement's [`Decisions`].
fn shop_decisions(schedule: &Value) -> Decisions {
    let p = schedule["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "cfg" && p["namespace"] == "shop")
        .unwrap_or_else(|| panic!("no shop/cfg in {schedule:#}"));
    let selected = serde_json::from_value(p["selected"].clone()).unwrap();
    let reasons = p["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["cluster"].as_str().unwrap().to_string(),
                d["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (selected, reasons)
}

/// Two members, `shop` (a ResourcePlacement's namespace) on alpha only, and a repository
/// placing the shop on them.
fn shop_on_two_members(backend: Backend) -> (Members, Repo) {
    let members = Members::start(backend, TWO_MEMBERS);
    let repo = Repo::new();
    repo.write("placements.yaml", SHOP);
    // Probed every second by the daemon (KubeFleet's heartbeat period; 60 s by default).
    for m in ["alpha", "beta"] {
        let declared = format!("{}  heartbeatPeriodSeconds: 1\n", member(m, ""));
        repo.write(&format!("members/{m}.yaml"), &declared);
    }
    repo.commit("fleet");
    let (code, _, err) = members.kubectl("alpha", &["create", "namespace", "shop"]);
    assert_eq!(code, 0, "{err}");
    (members, repo)
}

/// With `--enable-namespace-collection` (KubeFleet's member agent flag
/// `--enable-namespace-collection-in-property-provider`) the live probe lists each member's
/// namespaces and KubeFleet's NamespaceAffinity filter
/// (pkg/scheduler/framework/plugins/namespaceaffinity/filtering.go) sends a ResourcePlacement
/// only where its namespace exists, saying "target namespace does not exist on cluster"; once
/// the namespace is created on a member, the next probe schedules it there. Without the flag
/// every member passes, as KubeFleet without namespace collection.
///
/// Fails if the live inventory does not collect namespaces: both members would then be
/// selected.
fn namespace_collection_sends_a_resource_placement_where_its_namespace_exists(backend: Backend) {
    let (members, repo) = shop_on_two_members(backend);

    let schedule = |extra: &[&str]| -> Value {
        let mut args = vec!["--inventory", "live", "-o", "json"];
        args.extend_from_slice(extra);
        let r = run(&repo, &members, "schedule", &args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap()
    };

    // Not asked: namespaces are not known, every member passes.
    let (selected, _) = shop_decisions(&schedule(&[]));
    assert_eq!(selected, ["alpha", "beta"]);
    let inv = inventory_json(&repo, &members, &[]);
    assert!(
        cluster(&inv, "alpha").get("namespaces").is_none(),
        "{inv:#}"
    );

    // Asked: the inventory lists names, and only alpha has `shop`.
    let inv = inventory_json(&repo, &members, &["--enable-namespace-collection"]);
    let names = |c: &str| -> Vec<String> {
        serde_json::from_value(cluster(&inv, c)["namespaces"].clone()).unwrap()
    };
    assert!(names("alpha").contains(&"shop".to_string()), "{inv:#}");
    assert!(names("alpha").contains(&"default".to_string()), "{inv:#}");
    assert!(!names("beta").contains(&"shop".to_string()), "{inv:#}");
    assert!(cluster(&inv, "alpha")
        .get("namespaceCollectionDegraded")
        .is_none());
    let (selected, reasons) = shop_decisions(&schedule(&["--enable-namespace-collection"]));
    assert_eq!(selected, ["alpha"]);
    let beta = reasons.iter().find(|(c, _)| c == "beta").unwrap();
    assert_eq!(
        beta.1,
        "ClusterUnschedulable, target namespace does not exist on cluster"
    );

    // The namespace appears on beta: the next probe sees it and the placement goes there too.
    let (code, _, err) = members.kubectl("beta", &["create", "namespace", "shop"]);
    assert_eq!(code, 0, "{err}");
    await_condition("beta's namespace seen by a probe", || {
        shop_decisions(&schedule(&["--enable-namespace-collection"])).0 == ["alpha", "beta"]
    });
}

/// Whether `member` has the ConfigMap `shop/cfg`.
fn has_cfg(members: &Members, member: &str) -> bool {
    let (code, out, _) = members.kubectl(
        member,
        &[
            "get",
            "configmap",
            "cfg",
            "-n",
            "shop",
            "-o",
            "name",
            "--ignore-not-found",
        ],
    );
    code == 0 && out.trim() == "configmap/cfg"
}

/// Namespace collection on the daemon: `gitfleet run --enable-namespace-collection` probes
/// namespaces at each heartbeat (here every second), delivers the ResourcePlacement only where
/// its namespace exists, reports KubeFleet's reason for the other member in its schedule, and
/// once the namespace is created there, the next probe schedules and delivers it. Without
/// collection beta would be picked at once (its apply then failing on the missing namespace).
fn the_daemon_with_namespace_collection_follows_a_namespace_created_on_a_member(backend: Backend) {
    let (members, repo) = shop_on_two_members(backend);

    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let daemon = Daemon::start_with(
        repo.path(),
        &members.kubeconfig,
        &dir.path().join("state"),
        &secret,
        "1s",
        &["--enable-namespace-collection".as_ref()],
        &[],
    );
    let schedule = || -> Option<Decisions> {
        let body = ureq::get(&format!("{}/api/v1/schedule", daemon.addr))
            .call()
            .ok()?
            .body_mut()
            .read_to_string()
            .ok()?;
        let v: Value = serde_json::from_str(&body).ok()?;
        v["placements"]
            .as_array()?
            .iter()
            .any(|p| p["name"] == "cfg")
            .then(|| shop_decisions(&v))
    };
    await_until("the ConfigMap on alpha", || has_cfg(&members, "alpha"));
    let mut served = None;
    await_until("the schedule served", || {
        served = schedule();
        served.is_some()
    });
    let (selected, reasons) = served.unwrap();
    assert_eq!(selected, ["alpha"]);
    assert!(
        reasons.contains(&(
            "beta".to_string(),
            "ClusterUnschedulable, target namespace does not exist on cluster".to_string()
        )),
        "{reasons:?}"
    );
    assert!(!has_cfg(&members, "beta"));

    let (code, _, err) = members.kubectl("beta", &["create", "namespace", "shop"]);
    assert_eq!(code, 0, "{err}");
    await_until("the ConfigMap on beta", || has_cfg(&members, "beta"));
    // The schedule the status API serves is saved with the step's outcome, which may come
    // after the apply itself.
    await_until("the schedule to pick beta", || {
        schedule().is_some_and(|(selected, _)| selected == ["alpha", "beta"])
    });
}

/// KubeFleet's namespace tracker stops at 200 namespaces (`namespaceTrackerLimit`,
/// pkg/propertyprovider/default/trackers/namespaces.go), reports the collection degraded, and
/// its scheduler still uses what was collected: a namespace beyond the limit counts as missing.
#[test]
fn namespace_collection_stops_at_kubefleets_limit_and_says_so() {
    let members = Members::start(Backend::Sim, TWO_MEMBERS);
    let repo = Repo::new();
    repo.write("placements.yaml", SHOP);
    repo.write("members/alpha.yaml", &member("alpha", ""));
    repo.write("members/beta.yaml", &member("beta", ""));
    repo.commit("fleet");
    // 201 namespaces that sort before `shop`, then `shop`.
    let many: String = (0..201)
        .map(|i| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: ns-{i:03}}}\n---\n"))
        .collect();
    let (code, _, err) = members.kubectl_stdin("alpha", &["apply", "-f", "-"], &many);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = members.kubectl("alpha", &["create", "namespace", "shop"]);
    assert_eq!(code, 0, "{err}");

    let inv = inventory_json(&repo, &members, &["--enable-namespace-collection"]);
    let alpha = cluster(&inv, "alpha");
    let names: Vec<String> = serde_json::from_value(alpha["namespaces"].clone()).unwrap();
    assert_eq!(names.len(), 200, "{alpha:#}");
    assert!(!names.contains(&"shop".to_string()));
    assert_eq!(alpha["namespaceCollectionDegraded"], true);
    assert!(cluster(&inv, "beta")
        .get("namespaceCollectionDegraded")
        .is_none());

    let r = run(
        &repo,
        &members,
        "schedule",
        &[
            "--inventory",
            "live",
            "--enable-namespace-collection",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (selected, reasons) = shop_decisions(&serde_json::from_str(&r.stdout).unwrap());
    assert!(selected.is_empty(), "{reasons:?}");
    assert!(reasons
        .iter()
        .all(|(_, why)| why == "ClusterUnschedulable, target namespace does not exist on cluster"));
}

#[test]
fn a_down_member_is_reported_unhealthy_and_the_others_still_answer() {
    let members = Members::start(Backend::Sim, FLEET);
    let repo = fleet_repo();
    members.stop_member("big");
    // `third` answers, but only with errors.
    members
        .sim()
        .expect("faults need the simulator")
        .set_faults(
            "third",
            serde_json::json!({"errorRate": 1.0, "errorCodes": [500]}),
        );

    // A member answering 5xx is asked again until its time is up: keep that short here.
    let inv = inventory_json(&repo, &members, &["--member-timeout", "2"]);
    let big = cluster(&inv, "big");
    assert_eq!(big["healthy"], false);
    let error = big["error"].as_str().unwrap();
    assert!(error.starts_with("listing nodes: "), "{error}");
    assert!(big.get("properties").is_none(), "{big:#}");
    let third = cluster(&inv, "third");
    assert_eq!(third["healthy"], false);
    let error = third["error"].as_str().unwrap();
    assert!(
        error.starts_with("listing nodes: ") && error.contains("500"),
        "{error}"
    );
    let small = cluster(&inv, "small");
    assert_eq!(small["healthy"], true, "{small:#}");
    assert!(small.get("error").is_none());

    // Live scheduling leaves the down member out and says why on stderr.
    let r = run(
        &repo,
        &members,
        "schedule",
        &["--inventory", "live", "--member-timeout", "2", "-o", "json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("warning: member big is unhealthy: listing nodes"),
        "{}",
        r.stderr
    );
    let live: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(picked(&live, "most-cpu"), ["small"]);

    // Back up: healthy again.
    members.start_member("big");
    members
        .sim()
        .expect("faults need the simulator")
        .set_faults("third", serde_json::json!({"errorRate": 0.0}));
    let inv = inventory_json(&repo, &members, &[]);
    assert_eq!(cluster(&inv, "big")["healthy"], true);
    assert_eq!(cluster(&inv, "third")["healthy"], true);
}

#[test]
fn nothing_to_ask_is_an_error_and_a_missing_context_only_fails_its_member() {
    let members = Members::start(Backend::Sim, FLEET);
    let repo = fleet_repo();

    let bad = gitfleet(&[
        "inventory",
        "--repo",
        repo.path().to_str().unwrap(),
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr
            .contains("cannot read kubeconfig /nonexistent/kubeconfig"),
        "{}",
        bad.stderr
    );

    // Without --kubeconfig, as kubectl: the files KUBECONFIG lists, else ~/.kube/config; with
    // none of them there, nothing can be asked and the message says where it looked.
    let home = tempfile::tempdir().unwrap();
    let without_flag = |kubeconfig_env: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gitfleet"));
        cmd.args(["schedule", "--repo", repo.path().to_str().unwrap()])
            .args(["--inventory", "live"])
            .env_remove("GITFLEET_KUBECONFIG")
            .env_remove("KUBECONFIG")
            .env("HOME", home.path());
        if let Some(v) = kubeconfig_env {
            cmd.env("KUBECONFIG", v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = without_flag(Some("/nonexistent/a:/nonexistent/b"));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("none of the files KUBECONFIG lists exists"),
        "{stderr}"
    );
    let (code, stderr) = without_flag(None);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(".kube/config"), "{stderr}");
    // KUBECONFIG naming a missing file and the real one: the missing one is skipped.
    let listed = format!("/nonexistent/a:{}", members.kubeconfig.display());
    let (code, stderr) = without_flag(Some(&listed));
    assert_eq!(code, Some(0), "{stderr}");

    // A member whose context the kubeconfig lacks is unhealthy; the rest answer.
    repo.write("members/ghost.yaml", &member("ghost", ""));
    repo.commit("a member without a context");
    let inv = inventory_json(&repo, &members, &[]);
    let ghost = cluster(&inv, "ghost");
    assert_eq!(ghost["healthy"], false);
    assert!(
        ghost["error"]
            .as_str()
            .unwrap()
            .ends_with("has no context \"ghost\""),
        "{ghost:#}"
    );
    assert_eq!(cluster(&inv, "small")["healthy"], true);
}
