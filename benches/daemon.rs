//! The daemon benchmark: `cargo bench --bench daemon`.
//!
//! Runs the real binary, `gitfleet run`, as a child process against simulated members served
//! in this process (`gitfleet_sim`), in parts, one module each under `daemon_parts/`:
//!
//! - [`latency`]: push-to-applied latency on 10 members (or the sizes
//!   `GITFLEET_DAEMON_LATENCY_MEMBERS` names), against a plain client's server-side apply.
//! - [`faults`]: push-to-applied on healthy members with and without 4 faulty ones beside them.
//! - [`idle`]: the settled daemon's RSS and CPU over one default poll period, 100 members and
//!   100 placements.
//! - [`waiting`]: the daemon's CPU, reconciles and log lines over the idle window with a staged
//!   run waiting for an approval, against the same daemon settled.
//! - [`real_latency`]: push-to-applied on 3 real members, when the test bed is built.
//! - [`scale`]: 1,000 placements over 300 members, five phases.
//! - [`sharded`]: the scale fleet delivered by replicas with `--shards`, five phases; past
//!   what one process's open files allow, its members are served by `gitfleet sim` child
//!   processes ([`sim_processes`]).
//! - [`kustomize`]: the daemon's CPU with 100 placements built by kustomize, against the same
//!   objects as plain YAML.
//!
//! What they share (the repositories, the daemon process, the members over HTTP, `/proc`
//! readings, the statistics) is in [`common`]. The simulator shares the machine (and its
//! cores) with the daemon, as it would in the quick start.
//!
//! `GITFLEET_DAEMON_BENCH="commits,idle_seconds"` changes the sizes (default 20,30);
//! `GITFLEET_DAEMON_PARTS=latency,faults,idle,waiting,real latency,scale,sharded,kustomize` runs only
//! the parts named (`scale`, `sharded` and `kustomize` run only when named);
//! `GITFLEET_DAEMON_REAL_COMMITS` the commits on real members (default 10).

/// The simulator serves the members from this process on the allocator `gitfleet sim` runs on
/// (src/main.rs), not glibc's: glibc's malloc and free would cost it much CPU serving a
/// restart's lists, CPU the daemon under test would then have less of.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use common::{Result, DEFAULT_POLL};
use std::process::ExitCode;
use std::time::Duration;

#[path = "daemon_parts/common.rs"]
mod common;
#[path = "daemon_parts/faults.rs"]
mod faults;
#[path = "daemon_parts/idle.rs"]
mod idle;
#[path = "daemon_parts/kustomize.rs"]
mod kustomize;
#[path = "daemon_parts/latency.rs"]
mod latency;
#[path = "daemon_parts/real_latency.rs"]
mod real_latency;
#[path = "daemon_parts/scale.rs"]
mod scale;
#[path = "daemon_parts/sharded.rs"]
mod sharded;
#[path = "daemon_parts/sim_processes.rs"]
mod sim_processes;
#[path = "support/testbed.rs"]
mod testbed;
#[path = "daemon_parts/waiting.rs"]
mod waiting;

/// `GITFLEET_DAEMON_BENCH="commits,idle_seconds"`: the commits of the latency and faults
/// parts (default 20) and the idle window (default one poll period).
fn sizes() -> (usize, Duration) {
    let text = std::env::var("GITFLEET_DAEMON_BENCH").unwrap_or_default();
    let mut it = text.split(',').map(|n| n.trim().parse::<u64>().ok());
    let commits = it.next().flatten().unwrap_or(20).max(1) as usize;
    let idle = it.next().flatten().unwrap_or(DEFAULT_POLL.as_secs()).max(1);
    (commits, Duration::from_secs(idle))
}

fn main() -> ExitCode {
    let (commits, window) = sizes();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut failed = false;
    let real_commits = std::env::var("GITFLEET_DAEMON_REAL_COMMITS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(10)
        .max(1);
    let parts: [(&str, &dyn Fn() -> Result<()>); 8] = [
        ("latency", &|| {
            latency::latency_members()
                .into_iter()
                .try_for_each(|n| latency::latency(&rt, commits, n))
        }),
        ("faults", &|| faults::faults(&rt, commits)),
        ("idle", &|| idle::idle(&rt, window)),
        ("waiting", &|| waiting::waiting(&rt, window)),
        ("real latency", &|| real_latency::latency_real(real_commits)),
        ("scale", &|| scale::scale(&rt)),
        ("sharded", &|| sharded::sharded(&rt)),
        ("kustomize", &|| kustomize::kustomize(&rt)),
    ];
    // `GITFLEET_DAEMON_PARTS=faults,idle` runs only those parts.
    let only = std::env::var("GITFLEET_DAEMON_PARTS").unwrap_or_default();
    // The scale, sharded and kustomize parts take minutes: only when named.
    let wanted = |name: &str| {
        (only.is_empty() && !["scale", "sharded", "kustomize"].contains(&name))
            || only.split(',').any(|p| p.trim() == name)
    };
    for (name, part) in parts.into_iter().filter(|(n, _)| wanted(n)) {
        if let Err(e) = part() {
            eprintln!("{name}: {e}");
            failed = true;
        }
        println!();
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
