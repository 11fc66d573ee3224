//! Push-to-applied latency on simulated members: a bare repository the daemon follows, a
//! working clone, 10 members (`GITFLEET_DAEMON_LATENCY_MEMBERS="10,100"` measures each size in
//! turn) and a few PickAll placements under the default RollingUpdate strategy. For each
//! commit: change a ConfigMap value in the clone, start the clock, `git push` into the watched
//! repository, and poll every member over HTTP (every 10 ms) until all serve the new value. The
//! clock therefore includes `git push` itself and up to one poll interval (plus one sweep of
//! GETs) of granularity. Baseline, in the same run: a plain client applying the same objects to
//! the same members with server-side apply (members in parallel, objects in order), timed until
//! every request has been answered.

use super::common::*;
use std::time::{Duration, Instant};

/// The latency part's fleet sizes: `GITFLEET_DAEMON_LATENCY_MEMBERS="10,100"` (default 10).
pub(super) fn latency_members() -> Vec<usize> {
    let text = std::env::var("GITFLEET_DAEMON_LATENCY_MEMBERS").unwrap_or_default();
    let sizes: Vec<usize> = text
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .filter(|n| *n > 0)
        .collect();
    if sizes.is_empty() {
        vec![10]
    } else {
        sizes
    }
}

/// The goal for the median: under 100 ms on 10 members (and fewer), under 1 s on more
/// (it names 100).
fn latency_goal(members: usize) -> Duration {
    if members <= 10 {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    }
}

pub(super) fn latency(rt: &tokio::runtime::Runtime, commits: usize, size: usize) -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let names: Vec<String> = (0..size).map(|i| format!("m-{i:03}")).collect();
    let (sim, kubeconfig) = start_members(rt, &names, dir.path())?;
    let members = MemberClient::of(&sim);

    // Baseline first, in its own namespace, so that it never touches the daemon's objects.
    let mut baseline = Vec::with_capacity(commits);
    for r in 1..=commits {
        let objects = web_objects("baseline-web", r);
        let start = Instant::now();
        std::thread::scope(|s| {
            let handles: Vec<_> = members
                .iter()
                .map(|m| s.spawn(|| objects.iter().try_for_each(|o| m.apply(o))))
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().expect("no panic"))
        })?;
        baseline.push(start.elapsed());
    }

    let repos = Repos::create(dir.path(), &latency_files(&names))?;
    let first = git(&repos.work, &["rev-parse", "HEAD"])?;
    let started = Instant::now();
    let daemon = DaemonProcess::start(&repos.watched, &kubeconfig, &dir.path().join("state"))?;
    daemon.await_settled(&first)?;
    let first_rollout = started.elapsed();

    let mut latencies = Vec::with_capacity(commits);
    let mut pushes = Vec::with_capacity(commits);
    let mut reconciles_per_commit = Vec::with_capacity(commits);
    let mut reconcile_time = Vec::with_capacity(commits);
    for r in 1..=commits {
        let mut web = web_objects("web", r);
        web.push(crp("web"));
        repos.write("apps/web.yaml", &yaml(&web))?;
        let head = repos.commit(&format!("web revision {r}"))?;
        let (count_before, sum_before) = daemon.reconciles()?;
        let start = Instant::now();
        repos.push()?;
        pushes.push(start.elapsed());
        latencies.push(await_value(&members, WATCHED, &r.to_string(), start)?);
        // Let the rollout finish its bookkeeping before the next commit, so rounds never overlap.
        daemon.await_settled(&head)?;
        let (count, sum) = daemon.reconciles()?;
        reconciles_per_commit.push(count - count_before);
        reconcile_time.push(Duration::from_secs_f64(
            (sum - sum_before) / (count - count_before).max(1) as f64,
        ));
    }
    drop(daemon);
    rt.block_on(sim.shutdown());

    let daemon_stats = stats(&latencies);
    let baseline_stats = stats(&baseline);
    println!(
        "push-to-applied latency: {size} members, 3 PickAll placements (default RollingUpdate: maxUnavailable 25 %, maxSurge 25 %), {commits} commits each changing one ConfigMap value"
    );
    println!("{}", line("daemon", &daemon_stats));
    println!("{}", line("baseline", &baseline_stats));
    let goal = latency_goal(size);
    println!(
        "{:<10} {:.1}x (median / median); goal: median under {}: {}",
        "ratio",
        daemon_stats.median.as_secs_f64() / baseline_stats.median.as_secs_f64().max(1e-9),
        ms(goal),
        if daemon_stats.median < goal {
            "met"
        } else {
            "NOT met"
        }
    );
    let mut counts = reconciles_per_commit.clone();
    counts.sort_unstable();
    println!(
        "{:<10} git push median {} | reconciles per commit median {} (min {}, max {}) | mean reconcile {} (median over commits) | first rollout of the fleet {}",
        "details",
        ms(stats(&pushes).median),
        counts[counts.len() / 2],
        counts[0],
        counts[counts.len() - 1],
        ms(stats(&reconcile_time).median),
        ms(first_rollout),
    );
    println!(
        "latency = from just before `git push` into the watched bare repository until every member serves the new value, polled every {} ms (the figure includes git push and up to one poll interval plus one sweep of {size} GETs); baseline = server-side apply of the same 3 objects (namespace, ConfigMap, Deployment) to the {size} members, members in parallel, until every request has been answered.",
        POLL_INTERVAL.as_millis()
    );
    Ok(())
}
