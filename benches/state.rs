//! The state objects of `--state kubernetes` at fleet scale (issue 16.5): `cargo bench --bench
//! state`.
//!
//! Generates the synthetic fleet of `gitfleet::bench` (default 1,000 placements × 1,000
//! clusters; `GITFLEET_BENCH_SIZES="100x100,1000x1000"` for others), schedules it, and builds
//! the rollout state a settled fleet has: every bound cluster holding its revision, commit,
//! health and the objects it was given, every placement a snapshot history, every member a
//! last probe. It then saves that state through the Kubernetes backend into an in-memory model
//! of the API server (the same objects a real one stores) and prints:
//!
//! - objects, their total and largest size (what etcd holds; the limit per object is 1 MiB);
//! - writes and bytes of the first save, of a rolling step that moves one placement, and of a
//!   step that moves every placement at once (a commit touching all of them);
//! - a new leader's load: reading, checking and decoding every object (`KubeStore::open`),
//!   without the network (the API server's list time comes on top, see deploy/README.md).

use std::process::ExitCode;
use std::time::Instant;

use gitfleet::rollout::{
    BindingHealth, ClusterState, LastProbe, PlacementState, Revision, RolloutState,
};
use gitfleet::schedule::{schedule_commit, Fleet, Previous};
use gitfleet::snapshot::{History, SnapshotRecord};
use gitfleet::state::kube::{KubeStore, MemoryObjects};
use gitfleet::state::StateBackend;

const DEFAULT_SIZES: &[(usize, usize)] = &[(1000, 1000)];
const COMMIT: &str = "8f3b2c1d9e0a7b6c5d4e3f2a1b0c9d8e7f6a5b4c";
const NOW: u64 = 1_769_904_000;

fn main() -> ExitCode {
    let sizes = match gitfleet::bench::sizes_from_env(DEFAULT_SIZES) {
        Ok(sizes) => sizes,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    for (placements, clusters) in sizes {
        measure(placements, clusters);
    }
    ExitCode::SUCCESS
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn measure(placements: usize, clusters: usize) {
    let (files, inventory) =
        gitfleet::bench::generate(gitfleet::bench::FleetSpec::new(placements, clusters));
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

    let api = MemoryObjects::default();
    let (store, _) = KubeStore::open(api.clone(), "gitfleet", "bench").unwrap();
    let (w0, b0) = store.writes();
    let started = Instant::now();
    store.save(Some((COMMIT, &schedule)), &state).unwrap();
    let first_save = started.elapsed();
    let (w1, b1) = store.writes();
    let objects = api.all();
    let sizes: Vec<usize> = objects.values().map(|s| s.object.content_bytes()).collect();
    let total: usize = sizes.iter().sum();
    let largest = sizes.iter().max().copied().unwrap_or(0);
    let json_bytes =
        serde_json::to_vec(&state).unwrap().len() + serde_json::to_vec(&schedule).unwrap().len();

    // A rolling step: one placement's next cluster gets a new revision.
    let one = state.placements.keys().next().cloned().unwrap();
    let p = std::sync::Arc::make_mut(state.placements.get_mut(&one).unwrap());
    if let Some(c) = p.clusters.values_mut().next() {
        c.revision = Some(Revision {
            resource_index: 1,
            rendered: "next".into(),
        });
        c.health = BindingHealth::Pending;
    }
    store.save(None, &state).unwrap();
    let (w2, b2) = store.writes();

    // A commit that moves every placement by one cluster.
    for p in state.placements.values_mut() {
        if let Some(c) = std::sync::Arc::make_mut(p).clusters.values_mut().next() {
            c.revision = Some(Revision {
                resource_index: 2,
                rendered: "next".into(),
            });
        }
    }
    let started = Instant::now();
    store.save(None, &state).unwrap();
    let all_step = started.elapsed();
    let (w3, b3) = store.writes();

    drop(store);
    let started = Instant::now();
    let (leader, loaded) = KubeStore::open(api.clone(), "gitfleet", "next").unwrap();
    let load = started.elapsed();
    assert_eq!(leader.load_rollout().unwrap(), state);

    println!("state of {placements} placements x {clusters} clusters ({bindings} bound clusters, {} scheduled placements)", schedule.len());
    println!(
        "  as JSON (uncompressed, schedule + rollout): {:.1} MiB",
        mib(json_bytes as u64)
    );
    println!(
        "  objects: {} (head + one per placement), {:.1} MiB stored, largest {:.0} KiB (limit 900 KiB)",
        objects.len(),
        mib(total as u64),
        largest as f64 / 1024.0
    );
    println!(
        "  first save: {} writes, {:.1} MiB, {:.2} s (encode + in-memory store)",
        w1 - w0,
        mib(b1 - b0),
        first_save.as_secs_f64()
    );
    println!(
        "  rolling step of one placement: {} writes, {:.0} KiB",
        w2 - w1,
        (b2 - b1) as f64 / 1024.0
    );
    println!(
        "  step moving every placement: {} writes, {:.1} MiB, {:.2} s",
        w3 - w2,
        mib(b3 - b2),
        all_step.as_secs_f64()
    );
    println!(
        "  new leader's load (decode and check {} objects, {:.1} MiB, no network): {:.2} s",
        loaded.objects,
        mib(loaded.bytes as u64),
        load.as_secs_f64()
    );
}

/// A cluster settled on its revision: what a fleet at rest holds per bound cluster.
fn settled(placement: &str, n: usize) -> ClusterState {
    let ns = placement.rsplit('/').next().unwrap_or("app");
    ClusterState {
        revision: Some(Revision {
            resource_index: 0,
            rendered: format!("{:064x}", n * 7919),
        }),
        attempted: None,
        commit: Some(COMMIT.into()),
        health: BindingHealth::AvailableUntrackable { since: NOW },
        diffs: vec![],
        not_available: vec![],
        last_error: None,
        recheck: None,
        updated_at: NOW,
        objects: [
            format!("Namespace/{ns}"),
            format!("ConfigMap/{ns}/settings"),
            format!("Deployment.apps/{ns}/{ns}"),
            format!("Service/{ns}/{ns}"),
        ]
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>(),
    }
}
