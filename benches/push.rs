//! The push benchmark: `cargo bench --bench push`.
//!
//! Starts simulated members in-process (`gitfleet_sim`), pushes one placement of a namespace
//! and N ConfigMaps to each with `gitfleet::push::push_fleet`, then pushes the same again
//! (everything unchanged). One member answers every request 200 ms late and one is down, to
//! show that neither delays the others: the report gives when the last healthy member finished.
//! `GITFLEET_PUSH_BENCH="members,objects"` changes the size (default 50 members, 20 objects).
//!
//! Then the throughput comparison: 1,000 objects to each of 10 healthy members, once through
//! `push_fleet` and once through a plain client loop (server-side apply of the same objects as
//! gitfleet sends them, labels and annotations included, with the same number of requests in
//! flight per member), both measured in this run; gitfleet's throughput is reported as a
//! fraction of that raw capacity.
//! `GITFLEET_PUSH_CAPACITY="members,objects"` changes that size (default 10,1000).
//!
//! Last, the same comparison against real members when the test bed is built (testbed/, found
//! as the tests find it): 1,000 objects to each of 3 test-bed members (real kube-apiservers),
//! gitfleet's push against the raw loop in the same run. `GITFLEET_PUSH_REAL="members,objects"`
//! changes that size (default 3,1000).

use gitfleet::model::{PlacementKey, PlacementKind};
use gitfleet::push::{MemberPush, MemberResult, PlacementPush, PruneUnlisted, PushOptions};
use gitfleet::render::{wave_of, Manifest};
use gitfleet::rollout::ApplyStrategy;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "support/testbed.rs"]
mod testbed;

const SLOW: &str = "m-slow";
const DOWN: &str = "m-down";

/// `"a,b"` from an environment variable, or the default.
fn pair_from_env(var: &str, default: (usize, usize)) -> (usize, usize) {
    let text = std::env::var(var).unwrap_or_default();
    let mut it = text.split(',').map(|n| n.trim().parse::<usize>().ok());
    match (it.next().flatten(), it.next().flatten()) {
        (Some(a), Some(b)) => (a, b),
        _ => default,
    }
}

fn sizes() -> (usize, usize) {
    let (m, o) = pair_from_env("GITFLEET_PUSH_BENCH", (50, 20));
    (m.max(3), o)
}

/// Simulated members in this process, and a kubeconfig reaching them.
async fn start_sim(fleet_yaml: &str) -> (gitfleet_sim::RunningFleet, kube::config::Kubeconfig) {
    let fleet = gitfleet::yaml::from_str(fleet_yaml).expect("fleet file");
    let sim = gitfleet_sim::start(fleet, gitfleet_sim::StartOptions::default())
        .await
        .expect("simulator starts");
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).expect("kubeconfig");
    (sim, kubeconfig)
}

fn manifests(objects: usize) -> Vec<Manifest> {
    let mut values = vec![json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "bench"}})];
    for i in 0..objects {
        values.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "bench"},
            "data": {"index": i.to_string(), "payload": "x".repeat(256)}}));
    }
    values
        .into_iter()
        .map(|value| {
            let kind = value["kind"].as_str().unwrap_or_default().to_string();
            Manifest {
                value: std::sync::Arc::new(value),
                wave: wave_of("", &kind),
                envelope: None,
                work: None,
            }
        })
        .collect()
}

struct Round {
    wall: Duration,
    finished: BTreeMap<String, Duration>,
    results: Vec<MemberResult>,
}

async fn round(
    kubeconfig: &kube::config::Kubeconfig,
    members: &[MemberPush],
    opts: &PushOptions,
) -> Round {
    let start = Instant::now();
    let finished = Arc::new(Mutex::new(BTreeMap::new()));
    let seen = Arc::clone(&finished);
    let progress = Arc::new(move |r: &MemberResult| {
        seen.lock()
            .unwrap()
            .insert(r.member.clone(), start.elapsed());
    });
    let results = gitfleet::push::push_fleet(
        &Arc::new(kubeconfig.clone()),
        std::path::Path::new("(in-process sim)"),
        members.to_vec(),
        opts,
        progress,
    )
    .await;
    let wall = start.elapsed();
    let finished = finished.lock().unwrap().clone();
    Round {
        wall,
        finished,
        results,
    }
}

fn report(label: &str, r: &Round, objects: usize) {
    let healthy_last = r
        .finished
        .iter()
        .filter(|(m, _)| m.as_str() != SLOW && m.as_str() != DOWN)
        .map(|(_, d)| *d)
        .max()
        .unwrap_or_default();
    let failed: Vec<&str> = r
        .results
        .iter()
        .filter(|m| m.failed())
        .map(|m| m.member.as_str())
        .collect();
    let healthy = r.finished.len().saturating_sub(2);
    println!(
        "{label:<10} wall {:>7.0} ms | last healthy member {:>6.0} ms ({} members x {} objects, {:.0} objects/s) | slow member {:>6.0} ms | down member {:>6.0} ms | failed: {failed:?}",
        r.wall.as_secs_f64() * 1e3,
        healthy_last.as_secs_f64() * 1e3,
        healthy,
        objects + 1,
        (healthy * (objects + 1)) as f64 / healthy_last.as_secs_f64().max(1e-9),
        r.finished.get(SLOW).copied().unwrap_or_default().as_secs_f64() * 1e3,
        r.finished.get(DOWN).copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
}

/// The simulator's raw server-side-apply capacity: every object applied by a plain kube client
/// per member, `in_flight` requests at a time, all members at once (the namespace first, as
/// its ConfigMaps need it). Returns the wall time.
async fn raw_apply(
    kubeconfig: &kube::config::Kubeconfig,
    members: &[String],
    manifests: &[Manifest],
    in_flight: usize,
) -> Duration {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    use kube::discovery::ApiResource;
    async fn apply_one(client: kube::Client, value: serde_json::Value) {
        let name = value["metadata"]["name"].as_str().unwrap().to_string();
        let api: Api<DynamicObject> = match value["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(
                client,
                ns,
                &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
            ),
            None => Api::all_with(
                client,
                &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
            ),
        };
        api.patch(
            &name,
            &PatchParams::apply("raw-loop").force(),
            &Patch::Apply(&value),
        )
        .await
        .expect("raw apply");
    }
    let start = Instant::now();
    let mut members_done = tokio::task::JoinSet::new();
    for member in members {
        let options = kube::config::KubeConfigOptions {
            context: Some(member.clone()),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
            .await
            .expect("config");
        let client = kube::Client::try_from(config).expect("client");
        let values: Vec<serde_json::Value> = manifests.iter().map(|m| (*m.value).clone()).collect();
        members_done.spawn(async move {
            let (namespace, rest) = values.split_first().expect("a namespace first");
            apply_one(client.clone(), namespace.clone()).await;
            let slots = Arc::new(tokio::sync::Semaphore::new(in_flight.max(1)));
            let mut requests = tokio::task::JoinSet::new();
            for v in rest.iter().cloned() {
                let permit = Arc::clone(&slots).acquire_owned().await.expect("open");
                let client = client.clone();
                requests.spawn(async move {
                    apply_one(client, v).await;
                    drop(permit);
                });
            }
            while requests.join_next().await.is_some() {}
        });
    }
    while members_done.join_next().await.is_some() {}
    start.elapsed()
}

fn capacity_sizes() -> (usize, usize) {
    let (m, o) = pair_from_env("GITFLEET_PUSH_CAPACITY", (10, 1000));
    (m.max(1), o.max(1))
}

/// 1,000 objects to 10 simulated members: gitfleet's push against the raw loop, in the same
/// process.
async fn capacity() {
    let (n, objects) = capacity_sizes();
    let mut fleet_yaml = String::from("members:\n");
    for i in 0..n {
        fleet_yaml.push_str(&format!("  - name: c-{i:02}\n"));
    }
    let (sim, kubeconfig) = start_sim(&fleet_yaml).await;
    let names: Vec<String> = sim.members().iter().map(|m| m.name.clone()).collect();
    capacity_on("capacity", &kubeconfig, &names, objects).await;
    sim.shutdown().await;
}

/// The same comparison against real members: 1,000 objects to each of 3 test-bed members
/// (real kube-apiservers with their controllers, testbed/), when the test bed is built.
/// `GITFLEET_PUSH_REAL="members,objects"` changes the size (default 3,1000).
async fn capacity_real() {
    let (n, objects) = pair_from_env("GITFLEET_PUSH_REAL", (3, 1000));
    let names: Vec<String> = (0..n.max(1)).map(|i| format!("r-{i}")).collect();
    let mut fleet_yaml = String::from("members:\n");
    for name in &names {
        fleet_yaml.push_str(&format!("  - name: {name}\n"));
    }
    let Some(testbed) = tokio::task::spawn_blocking(move || testbed::Testbed::start(&fleet_yaml))
        .await
        .expect("no panic")
    else {
        println!("real       skipped: no test bed (build it with `bash testbed/build.sh`, or set GITFLEET_TESTBED)");
        return;
    };
    println!(
        "real       {} test-bed members ready in {:.0} s",
        names.len(),
        testbed.started_in.as_secs_f64()
    );
    let kubeconfig = kube::config::Kubeconfig::read_from(testbed.kubeconfig()).expect("kubeconfig");
    capacity_on("real", &kubeconfig, &names, objects).await;
    tokio::task::spawn_blocking(move || drop(testbed))
        .await
        .expect("stopped");
}

/// gitfleet's push of `objects` objects to each member against the raw SSA loop over the same
/// objects, in this run; prints both rates and their ratio.
async fn capacity_on(
    label: &str,
    kubeconfig: &kube::config::Kubeconfig,
    names: &[String],
    objects: usize,
) {
    let n = names.len();
    // Different namespaces, so both runs create everything new.
    let with_namespace = |ns: &str| -> Vec<Manifest> {
        manifests(objects - 1)
            .into_iter()
            .map(|mut m| {
                let value = std::sync::Arc::make_mut(&mut m.value);
                if value["kind"] == "Namespace" {
                    value["metadata"]["name"] = json!(ns);
                } else {
                    value["metadata"]["namespace"] = json!(ns);
                }
                m
            })
            .collect()
    };
    let in_flight = 8;
    // The raw loop sends the very objects gitfleet sends (its labels and annotations
    // included), so the comparison measures the client path, not object size.
    let stamp = gitfleet::push::decorate::Stamp {
        placement_label: "crp.capacity",
        resource_snapshot: "capacity",
        commit: "0000000000000000000000000000000000000000",
    };
    let raw_objects: Vec<Manifest> = with_namespace("raw")
        .into_iter()
        .map(|mut m| {
            m.value = std::sync::Arc::new(gitfleet::push::decorate::decorate(&m.value, &stamp));
            m
        })
        .collect();
    let raw = raw_apply(kubeconfig, names, &raw_objects, in_flight).await;
    let members: Vec<MemberPush> = names
        .iter()
        .map(|m| MemberPush {
            member: m.clone(),
            context: m.clone(),
            placements: vec![PlacementPush {
                placement: PlacementKey::new(
                    PlacementKind::ClusterResourcePlacement,
                    None,
                    "capacity",
                ),
                strategy: ApplyStrategy::default(),
                resource_snapshot: "capacity".into(),
                manifests: with_namespace("pushed"),
                run: None,
            }],
            prune_unlisted: PruneUnlisted::Only(Default::default()),
        })
        .collect();
    let opts = PushOptions {
        commit: "0000000000000000000000000000000000000000".into(),
        parallel_members: 16,
        parallel_requests: in_flight,
        retry_budget: Duration::from_secs(30),
        writer: gitfleet::push::writer::Identity::process("bench"),
        feedback_raw_json: Default::default(),
    };
    let pushed = round(kubeconfig, &members, &opts).await;
    let failed = pushed.results.iter().filter(|m| m.failed()).count();
    let total = (n * objects) as f64;
    let raw_rate = total / raw.as_secs_f64();
    let push_rate = total / pushed.wall.as_secs_f64();
    println!(
        "{label:<10} {n} members x {objects} objects, {in_flight} requests in flight per member | raw SSA loop {:>6.0} ms ({raw_rate:.0} objects/s) | gitfleet push {:>6.0} ms ({push_rate:.0} objects/s, {failed} members failed) | gitfleet / raw = {:.2} (goal >= 0.8)",
        raw.as_secs_f64() * 1e3,
        pushed.wall.as_secs_f64() * 1e3,
        push_rate / raw_rate,
    );
}

fn main() {
    let (n, objects) = sizes();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut fleet_yaml = String::from("members:\n");
        for i in 0..n - 2 {
            fleet_yaml.push_str(&format!("  - name: m-{i:03}\n"));
        }
        fleet_yaml.push_str(&format!(
            "  - name: {SLOW}\n    faults: {{latencyMs: 200}}\n  - name: {DOWN}\n    faults: {{down: true}}\n"
        ));
        let (sim, kubeconfig) = start_sim(&fleet_yaml).await;
        let placement = PlacementPush {
            placement: PlacementKey::new(PlacementKind::ClusterResourcePlacement, None, "bench"),
            strategy: ApplyStrategy::default(),
            resource_snapshot: "bench".into(),
            manifests: manifests(objects),
            run: None,
        };
        let members: Vec<MemberPush> = sim
            .members()
            .iter()
            .map(|m| MemberPush {
                member: m.name.clone(),
                context: m.name.clone(),
                placements: vec![placement.clone()],
                prune_unlisted: PruneUnlisted::AllExcept(Default::default()),
            })
            .collect();
        let opts = PushOptions {
            commit: "0000000000000000000000000000000000000000".into(),
            parallel_members: 16,
            parallel_requests: 8,
            retry_budget: Duration::from_secs(2),
            writer: gitfleet::push::writer::Identity::process("bench"),
            feedback_raw_json: Default::default(),
        };
        let first = round(&kubeconfig, &members, &opts).await;
        report("create", &first, objects);
        let second = round(&kubeconfig, &members, &opts).await;
        report("unchanged", &second, objects);
        sim.shutdown().await;
        capacity().await;
        capacity_real().await;
    });
}
