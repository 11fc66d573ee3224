//! The daemon's idle cost: 100 members, 100 placements (PickAll, PickN, PickFixed, see
//! [`idle_files`]), the daemon with its default poll; once the rollout has settled, RSS
//! (`VmRSS`) and CPU time (`utime + stime`) of the daemon process are sampled from
//! `/proc/<pid>` for one default poll period, so the window holds exactly one periodic look at
//! the branch and the members.

use super::common::*;
use serde_json::Value;
use std::time::{Duration, Instant};

const IDLE_FLEET: (usize, usize) = (100, 100);

pub(super) fn idle(rt: &tokio::runtime::Runtime, window: Duration) -> Result<()> {
    let (placements, clusters) = IDLE_FLEET;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (names, texts) = idle_files(placements, clusters);
    let (sim, kubeconfig) = start_members(rt, &names, dir.path())?;
    let repos = Repos::create(dir.path(), &texts)?;
    let head = git(&repos.work, &["rev-parse", "HEAD"])?;
    let started = Instant::now();
    let daemon = DaemonProcess::start(&repos.watched, &kubeconfig, &dir.path().join("state"))?;
    daemon.await_settled(&head)?;
    let rollout = started.elapsed();
    let pid = daemon.pid();
    let doc: Value =
        serde_json::from_str(&daemon.get("/api/v1/placements")?).map_err(|e| e.to_string())?;
    let placed: usize = doc["placements"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| p["upToDate"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0);

    let tck = clock_ticks_per_second();
    let (reconciles_before, _) = daemon.reconciles()?;
    let pushes_before = daemon.counter_total("gitfleet_member_pushes_total")?;
    let ticks_before = cpu_ticks(pid)?;
    let start = Instant::now();
    let mut rss = Vec::new();
    while start.elapsed() < window {
        rss.push(proc_status_kib(pid, "VmRSS:")?);
        std::thread::sleep(Duration::from_secs(1).min(window.saturating_sub(start.elapsed())));
    }
    let ticks = cpu_ticks(pid)? - ticks_before;
    let wall = start.elapsed();
    rss.push(proc_status_kib(pid, "VmRSS:")?);
    let hwm = proc_status_kib(pid, "VmHWM:")?;
    let (reconciles_after, _) = daemon.reconciles()?;
    let pushes = daemon.counter_total("gitfleet_member_pushes_total")? - pushes_before;
    if std::env::var_os("GITFLEET_DAEMON_BENCH_LOG").is_some() {
        eprintln!("{}", daemon.log.lock().unwrap().join("\n"));
    }
    drop(daemon);
    rt.block_on(sim.shutdown());

    let cpu = ticks as f64 / tck as f64;
    let mean_rss = rss.iter().sum::<u64>() as f64 / rss.len() as f64 / 1024.0;
    let max_rss = *rss.iter().max().unwrap_or(&0) as f64 / 1024.0;
    println!(
        "idle: {clusters} members, {placements} placements (PickAll with affinity, PickN, PickFixed, one namespace and ConfigMap each; {placed} placement×cluster bindings), default --poll {}s; rollout of the fleet settled in {:.1} s",
        DEFAULT_POLL.as_secs(),
        rollout.as_secs_f64()
    );
    println!(
        "{:<10} RSS mean {mean_rss:.1} MiB | RSS max {max_rss:.1} MiB | peak (VmHWM, incl. the rollout) {:.1} MiB | CPU {:.2} % of one core ({cpu:.2} s in {:.1} s) | in the window: {} reconciles, {pushes} placement pushes",
        "daemon",
        hwm as f64 / 1024.0,
        100.0 * cpu / wall.as_secs_f64(),
        wall.as_secs_f64(),
        reconciles_after - reconciles_before,
    );
    println!(
        "idle = after the rollout settled, the daemon process alone (the simulator runs in the benchmark's process): VmRSS sampled every second, CPU = utime+stime from /proc/<pid>/stat over the window ({tck} ticks/s)."
    );
    Ok(())
}
