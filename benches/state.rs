//! The state objects of `--state kubernetes` at fleet scale: `cargo bench --bench
//! state`.
//!
//! Generates the synthetic fleet of `gitfleet_testkit::bench` (default 1,000 placements × 1,000
//! clusters; `GITFLEET_BENCH_SIZES="100x100,1000x1000"` for others), schedules it, and builds
//! the rollout state a settled fleet has: every bound cluster holding its revision, commit,
//! health and the objects it was given, every placement a snapshot history, every member a
//! last probe. It then saves that state through the Kubernetes backend (`KubeStore`), first
//! into an in-memory model of the API server (the same objects a real one stores: the
//! baseline), then, when the test bed is built, into a real API server (the test bed's
//! kube-apiserver and etcd, through `ConfigMaps`: the kube client code the daemon runs with
//! `--state kubernetes`, resourceVersion preconditions included), and prints for each:
//!
//! - objects, their total and largest size (what etcd holds; the limit per object is 1 MiB);
//! - writes, bytes and wall time of the first save, of a rolling step that moves one
//!   placement, and of a step that moves every placement at once (a commit touching all);
//! - a new leader's takeover, `GITFLEET_BENCH_RUNS` times (default 5; min and median): the
//!   LIST of every state object alone, and `KubeStore::open` (LIST, check, decode, claim);
//!   on the real API server also the bytes it sent for those LISTs (from its own metrics).
//!
//! Wall times on the real API server are printed as ratios to the in-memory baseline of the
//! same run, never asserted.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gitfleet::rollout::{
    BindingHealth, ClusterState, LastProbe, PlacementState, Revision, RolloutState,
};
use gitfleet::schedule::{schedule_commit, Fleet, PlacementSchedule, Previous};
use gitfleet::snapshot::{History, SnapshotRecord};
use gitfleet::state::kube::{ConfigMaps, KubeStore, MemoryObjects, Objects};
use gitfleet::state::StateBackend;

#[path = "support/testbed.rs"]
mod testbed;

const DEFAULT_SIZES: &[(usize, usize)] = &[(1000, 1000)];
const COMMIT: &str = "8f3b2c1d9e0a7b6c5d4e3f2a1b0c9d8e7f6a5b4c";
const NOW: u64 = 1_769_904_000;

fn main() -> ExitCode {
    let sizes = match gitfleet_testkit::bench::sizes_from_env(DEFAULT_SIZES) {
        Ok(sizes) => sizes,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let repetitions = match std::env::var("GITFLEET_BENCH_RUNS") {
        Ok(n) => match n.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("GITFLEET_BENCH_RUNS={n}: expected a count of runs, at least 1");
                return ExitCode::from(2);
            }
        },
        Err(_) => 5,
    };
    println!("load average at start: {}", load_average());
    for (placements, clusters) in sizes {
        measure(placements, clusters, repetitions);
    }
    println!("load average at end: {}", load_average());
    println!("peak RSS of this process: {}", peak_rss());
    ExitCode::SUCCESS
}

/// `/proc/loadavg`'s three averages: the machine is shared, timings are read next to it.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// `VmHWM` of `/proc/self/status`.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_string()))
        })
        .unwrap_or_else(|| "unknown".into())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn measure(placements: usize, clusters: usize, repetitions: usize) {
    let (files, inventory) = gitfleet_testkit::bench::generate(
        gitfleet_testkit::bench::FleetSpec::new(placements, clusters),
    );
    let (cat, _) = gitfleet::analyze(&files);
    drop(files);
    let fleet = Fleet::build(&cat, Some(&inventory));
    let schedule = schedule_commit(
        &cat,
        &Default::default(),
        &fleet,
        &Previous::new(),
        NOW as i64,
    );
    let mut state = RolloutState {
        serving: Some(COMMIT.into()),
        ..RolloutState::default()
    };
    for c in &inventory.clusters {
        state.members.insert(
            c.name.clone(),
            LastProbe {
                at: NOW,
                cluster: c.clone(),
            },
        );
    }
    let mut bindings = 0usize;
    for s in &schedule {
        let id = s.key.to_string();
        let mut p = PlacementState {
            resources: History {
                records: vec![SnapshotRecord {
                    index: 0,
                    hash: format!("{:064x}", bindings),
                    commit: COMMIT.into(),
                }],
            },
            ..PlacementState::default()
        };
        for cluster in &s.selected {
            bindings += 1;
            p.clusters.insert(cluster.clone(), settled(&id, bindings));
        }
        state.placements.insert(s.key.clone(), p.into());
    }

    let json_bytes =
        serde_json::to_vec(&state).unwrap().len() + serde_json::to_vec(&schedule).unwrap().len();
    println!("state of {placements} placements x {clusters} clusters ({bindings} bound clusters, {} scheduled placements)", schedule.len());
    println!(
        "  as JSON (uncompressed, schedule + rollout): {:.1} MiB",
        mib(json_bytes as u64)
    );

    // The baseline: an in-memory model of the API server (no network, no etcd).
    let api = MemoryObjects::default();
    let memory = steps(api.clone(), &schedule, state.clone());
    let objects = api.all();
    let sizes: Vec<usize> = objects.values().map(|s| s.object.content_bytes()).collect();
    let total: usize = sizes.iter().sum();
    let largest = sizes.iter().max().copied().unwrap_or(0);
    // What the API server's 1 MiB limit counts (ValidateConfigMap): the values' raw bytes.
    let raw: usize = objects
        .values()
        .flat_map(|s| {
            let o = &s.object;
            o.data
                .values()
                .map(String::len)
                .chain(o.binary_data.values().map(Vec::len))
        })
        .sum();
    println!(
        "  objects: {} (head + one per placement), {:.1} MiB as gitfleet counts them (binaryData as base64, keys included), largest {:.0} KiB (gitfleet's limit 900 KiB); {:.1} MiB of raw values",
        objects.len(),
        mib(total as u64),
        largest as f64 / 1024.0,
        mib(raw as u64)
    );
    drop(objects);
    println!("  in memory (model of the API server, no network):");
    memory.print("    ");
    let memory_takeover = takeover(&api, &memory.state, repetitions);
    memory_takeover.print("    ", None);
    drop(api);

    real_api_server(&schedule, state, &memory, &memory_takeover, repetitions);
}

/// Writes and content bytes (as the API server counts them) of one save, and its wall time.
struct Save {
    writes: u64,
    bytes: u64,
    wall: Duration,
}

impl Save {
    fn print(&self, indent: &str, what: &str, baseline: Option<&Save>) {
        let rate = self.writes as f64 / self.wall.as_secs_f64().max(1e-9);
        let ratio = baseline
            .map(|b| {
                format!(
                    "; {:.1}x the in-memory save",
                    self.wall.as_secs_f64() / b.wall.as_secs_f64().max(1e-9)
                )
            })
            .unwrap_or_default();
        println!(
            "{indent}{what}: {} writes, {:.2} MiB, {:.3} s ({rate:.0} writes/s{ratio})",
            self.writes,
            mib(self.bytes),
            self.wall.as_secs_f64()
        );
    }
}

/// The saves of one backend: the first (every object created), a rolling step that moves one
/// placement, and a step that moves every placement at once (a commit touching all of them).
struct Steps {
    first: Save,
    one: Save,
    all: Save,
    /// The state after the last step: what a new leader must read back.
    state: RolloutState,
}

impl Steps {
    fn print(&self, indent: &str) {
        self.first.print(indent, "first save", None);
        self.one
            .print(indent, "rolling step of one placement", None);
        self.all.print(indent, "step moving every placement", None);
    }

    fn print_against(&self, indent: &str, baseline: &Steps) {
        self.first
            .print(indent, "first save", Some(&baseline.first));
        self.one
            .print(indent, "rolling step of one placement", Some(&baseline.one));
        self.all
            .print(indent, "step moving every placement", Some(&baseline.all));
    }
}

/// Saves `state` through a fresh `KubeStore` on `objects`, then the two steps; the same
/// sequence on every backend.
fn steps<O: Objects>(
    objects: O,
    schedule: &[Arc<PlacementSchedule>],
    mut state: RolloutState,
) -> Steps {
    let (store, _) = KubeStore::open(objects, "gitfleet", "bench").unwrap();
    let save = |schedule: Option<(&str, &[Arc<PlacementSchedule>])>, state: &RolloutState| {
        let (w0, b0) = store.writes();
        let started = Instant::now();
        store.save(schedule, state).unwrap();
        let wall = started.elapsed();
        let (w1, b1) = store.writes();
        Save {
            writes: w1 - w0,
            bytes: b1 - b0,
            wall,
        }
    };
    let first = save(Some((COMMIT, schedule)), &state);

    // A rolling step: one placement's next cluster gets a new revision.
    let key = state.placements.keys().next().cloned().unwrap();
    let p = std::sync::Arc::make_mut(state.placements.get_mut(&key).unwrap());
    if let Some(c) = p.clusters.values_mut().next() {
        c.revision = Some(Revision {
            resource_index: 1,
            rendered: "next".into(),
        });
        c.health = BindingHealth::Pending;
    }
    let one = save(None, &state);

    // A commit that moves every placement by one cluster.
    for p in state.placements.values_mut() {
        if let Some(c) = std::sync::Arc::make_mut(p).clusters.values_mut().next() {
            c.revision = Some(Revision {
                resource_index: 2,
                rendered: "next".into(),
            });
        }
    }
    let all = save(None, &state);
    Steps {
        first,
        one,
        all,
        state,
    }
}

/// A new leader's takeover, repeated: the LIST alone (`Objects::list`, every page), and
/// `KubeStore::open` (the LIST, then checking and decoding every object, then the claim: the
/// head written with the new leader's name), each a fresh store as a new replica has.
struct Takeover {
    objects: usize,
    bytes: usize,
    list: Vec<Duration>,
    open: Vec<Duration>,
}

impl Takeover {
    fn print(&self, indent: &str, baseline: Option<&Takeover>) {
        let ratio = |mine: Duration, theirs: fn(&Takeover) -> Duration| {
            baseline
                .map(|b| {
                    format!(
                        " = {:.1}x in memory",
                        mine.as_secs_f64() / theirs(b).as_secs_f64().max(1e-9)
                    )
                })
                .unwrap_or_default()
        };
        println!(
            "{indent}LIST of {} objects ({:.1} MiB of content), {} runs: min {:.3} s, median {:.3} s{}",
            self.objects,
            mib(self.bytes as u64),
            self.list.len(),
            min(&self.list).as_secs_f64(),
            median(&self.list).as_secs_f64(),
            ratio(median(&self.list), |b| median(&b.list)),
        );
        println!(
            "{indent}new leader's takeover (KubeStore::open: LIST, check, decode, claim), {} runs: min {:.3} s, median {:.3} s{}",
            self.open.len(),
            min(&self.open).as_secs_f64(),
            median(&self.open).as_secs_f64(),
            ratio(median(&self.open), |b| median(&b.open)),
        );
    }
}

fn min(runs: &[Duration]) -> Duration {
    runs.iter().min().copied().unwrap_or_default()
}

fn median(runs: &[Duration]) -> Duration {
    let mut sorted = runs.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

fn takeover<O: Objects + Clone>(
    objects: &O,
    expected: &RolloutState,
    repetitions: usize,
) -> Takeover {
    let mut list = Vec::new();
    let mut open = Vec::new();
    let mut listed = (0, 0);
    for _ in 0..repetitions {
        let started = Instant::now();
        let all = objects.list("gitfleet").unwrap();
        list.push(started.elapsed());
        listed = (
            all.len(),
            all.iter().map(|s| s.object.content_bytes()).sum(),
        );
    }
    for n in 0..repetitions {
        let started = Instant::now();
        let (leader, loaded) =
            KubeStore::open(objects.clone(), "gitfleet", &format!("next-{n}")).unwrap();
        open.push(started.elapsed());
        // Each open claims the state (the head names its leader): the bytes move by a few.
        assert_eq!(
            loaded.objects, listed.0,
            "the takeover read what the LIST returned"
        );
        if n == 0 {
            assert_eq!(&leader.load_rollout().unwrap(), expected);
        }
    }
    Takeover {
        objects: listed.0,
        bytes: listed.1,
        list,
        open,
    }
}

/// The same saves and takeover against a real API server: the test bed's (kube-apiserver
/// with embedded etcd), through `ConfigMaps`, the kube client code the daemon uses with
/// `--state kubernetes`.
fn real_api_server(
    schedule: &[Arc<PlacementSchedule>],
    state: RolloutState,
    memory: &Steps,
    memory_takeover: &Takeover,
    repetitions: usize,
) {
    let Some(testbed) = testbed::Testbed::start("members:\n  - name: hosting\n") else {
        println!("  real API server: skipped, no test bed (build it with `bash testbed/build.sh`, or set GITFLEET_TESTBED)");
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(testbed.kubeconfig()).unwrap();
        let options = kube::config::KubeConfigOptions {
            context: Some("hosting".into()),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    });
    println!(
        "  real API server (the test bed's kube-apiserver and embedded etcd, built from testbed/go.mod; etcd without fsync; ready in {:.1} s), namespace default:",
        testbed.started_in.as_secs_f64()
    );
    let objects = ConfigMaps::new(client.clone(), "default", runtime.handle().clone());
    let real = steps(objects.clone(), schedule, state);
    real.print_against("    ", memory);
    let served = || list_bytes_served(&runtime, &client);
    let before = served();
    let real_takeover = takeover(&objects, &real.state, repetitions);
    let after = served();
    real_takeover.print("    ", Some(memory_takeover));
    match (before, after) {
        (Ok(before), Ok(after)) => println!(
            "    bytes the API server sent for those LISTs (its apiserver_response_sizes_sum, LIST configmaps): {:.1} MiB per takeover",
            (after - before) / 2.0 / repetitions as f64 / (1024.0 * 1024.0)
        ),
        (Err(e), _) | (_, Err(e)) => println!("    bytes sent: not measured ({e})"),
    }
}

/// What the API server has sent in answers to LIST configmaps so far, in bytes, from its own
/// metrics (the response bodies, as JSON: the client asks for no compression).
fn list_bytes_served(
    runtime: &tokio::runtime::Runtime,
    client: &kube::Client,
) -> Result<f64, String> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let text = runtime
        .block_on(client.request_text(request))
        .map_err(|e| format!("GET /metrics: {e}"))?;
    let sum = text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_response_sizes_sum{")
                && l.contains("resource=\"configmaps\"")
                && l.contains("verb=\"LIST\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    Ok(sum)
}

/// A cluster settled on its revision: what a fleet at rest holds per bound cluster.
fn settled(placement: &str, n: usize) -> ClusterState {
    let ns = placement.rsplit('/').next().unwrap_or("app");
    ClusterState {
        revision: Some(Revision {
            resource_index: 0,
            rendered: format!("{:064x}", n * 7919).into(),
        }),
        details: Default::default(),
        commit: Some(COMMIT.into()),
        health: BindingHealth::AvailableUntrackable { since: NOW },
        recheck: None,
        drift: false,
        reread: false,
        delivered_by: None,
        updated_at: NOW,
        objects: std::sync::Arc::new(
            [
                gitfleet::model::ObjectKey::new("", "Namespace", None, ns),
                gitfleet::model::ObjectKey::new("", "ConfigMap", Some(ns), "settings"),
                gitfleet::model::ObjectKey::new("apps", "Deployment", Some(ns), ns),
                gitfleet::model::ObjectKey::new("", "Service", Some(ns), ns),
            ]
            .into_iter()
            .collect(),
        ),
    }
}
