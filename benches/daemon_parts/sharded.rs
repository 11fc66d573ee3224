//! Sharded replicas at fleet scale: the scale benchmark's fleet, delivered by `replicas`
//! processes of `gitfleet run --state kubernetes --shards N` whose hosting cluster is one more
//! simulated cluster. Five phases: the first rollout (from the replicas' start), idle (each
//! replica's RSS), one placement's change, a replica killed (until its shards are held by the
//! others, each checked by its new owner, and every binding confirmed), and a replica added
//! (until the shards are split again and those it took checked and confirmed). Fleets past what one process's open files
//! allow are served by `gitfleet sim` child processes ([`super::sim_processes`]).
//! The kill and add phases also print the members' changes the leader took and the orders
//! each replica carried out in them.
//! `GITFLEET_DAEMON_SHARDED="placements,members,replicas,shards,idle_s"`.

use super::common::*;
use super::sim_processes::{open_files, Members};
use serde_json::Value;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// `GITFLEET_DAEMON_SHARDED` (default 200,1000,4,16,30).
fn sizes() -> (usize, usize, usize, u32, Duration) {
    let text = std::env::var("GITFLEET_DAEMON_SHARDED").unwrap_or_default();
    let mut it = text.split(',').map(|n| n.trim().parse::<u64>().ok());
    let placements = it.next().flatten().unwrap_or(200).max(10) as usize;
    let members = it.next().flatten().unwrap_or(1000).max(10) as usize;
    let replicas = it.next().flatten().unwrap_or(4).max(2) as usize;
    let shards = it.next().flatten().unwrap_or(16).max(1) as u32;
    let idle = it.next().flatten().unwrap_or(30).max(1);
    (
        placements,
        members,
        replicas,
        shards,
        Duration::from_secs(idle),
    )
}

/// One replica's `leader` block of the status API: whether it leads, and the shards it holds.
fn replica_view(daemon: &DaemonProcess) -> Result<(bool, BTreeSet<u32>)> {
    let doc: Value = serde_json::from_str(&daemon.get("/api/v1/placements?limit=0")?)
        .map_err(|e| e.to_string())?;
    let held = doc["leader"]["shards"]["held"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_u64().map(|n| n as u32))
                .collect()
        })
        .unwrap_or_default();
    Ok((doc["leader"]["leading"] == true, held))
}

/// Waits until one replica leads and each holds exactly the shards rendezvous hashing gives it
/// among those that serve shards (all but the leader): the split they settle on.
fn await_split(replicas: &[(String, DaemonProcess)], shards: u32) -> Result<Duration> {
    use gitfleet::daemon::shards::{assign, ReplicaId};
    let start = Instant::now();
    let ids = replicas
        .iter()
        .map(|(id, _)| ReplicaId::from(id.as_str()))
        .collect();
    loop {
        let views = replicas
            .iter()
            .map(|(id, d)| Ok((id, replica_view(d)?)))
            .collect::<Result<Vec<_>>>()?;
        let leaders: Vec<ReplicaId> = views
            .iter()
            .filter(|(_, (leading, _))| *leading)
            .map(|(id, _)| ReplicaId::from(id.as_str()))
            .collect();
        if let [leader] = leaders.as_slice() {
            let owners = assign::owners(shards, &assign::serving(&ids, Some(leader)));
            let settled = views.iter().all(|(id, (_, held))| {
                let due: BTreeSet<u32> = owners
                    .iter()
                    .filter(|(_, owner)| owner.as_str() == id.as_str())
                    .map(|(s, _)| s.0)
                    .collect();
                *held == due
            });
            if settled {
                return Ok(start.elapsed());
            }
        }
        if start.elapsed() > SCALE_LIMIT {
            return Err(format!("the replicas did not split the {shards} shards"));
        }
        std::thread::sleep(POLL_INTERVAL * 10);
    }
}

fn leader_of(replicas: &[(String, DaemonProcess)]) -> Result<usize> {
    let start = Instant::now();
    loop {
        for (i, (_, d)) in replicas.iter().enumerate() {
            if replica_view(d)?.0 {
                return Ok(i);
            }
        }
        if start.elapsed() > SCALE_LIMIT {
            return Err("no replica leads".into());
        }
        std::thread::sleep(POLL_INTERVAL * 10);
    }
}

/// The sum of the series of `metric` in a scrape whose labels include `label`.
fn sum_of(text: &str, metric: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.strip_prefix(metric).is_some_and(|l| l.starts_with('{')) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        // From 0.0: `sum` of no series is -0.0, printed "-0".
        .fold(0.0, |a, b| a + b)
}

/// Orders one replica carried out so far with `outcome` (`delivered`, `probed`, `checked`).
fn orders_of(d: &DaemonProcess, outcome: &str) -> Result<f64> {
    let text = d.get("/metrics")?;
    let label = format!("outcome=\"{outcome}\"");
    Ok(sum_of(&text, "gitfleet_shard_orders_total", &label))
}

/// [`orders_of`] each of `replicas`.
fn orders_by(replicas: &[(String, DaemonProcess)], outcome: &str) -> Result<Vec<(String, f64)>> {
    replicas
        .iter()
        .map(|(id, d)| Ok((id.clone(), orders_of(d, outcome)?)))
        .collect()
}

/// Orders checked so far by the replicas that serve shards (one for each shard an owner took
/// over): all but the leader, which holds none while another replica is live, and whose scrape
/// (every member's series) would cost the measured leader most.
fn checked(replicas: &[(String, DaemonProcess)], leader: usize) -> Result<f64> {
    let mut total = 0.0;
    for (i, (_, d)) in replicas.iter().enumerate() {
        if i != leader {
            total += orders_of(d, "checked")?;
        }
    }
    Ok(total)
}

/// `now` less `before`, replica by replica.
fn per_replica_since(now: &[(String, f64)], before: &[(String, f64)]) -> Vec<(String, f64)> {
    now.iter()
        .map(|(id, n)| {
            let was = before
                .iter()
                .find(|(b, _)| b == id)
                .map_or(0.0, |(_, b)| *b);
            (id.clone(), n - was)
        })
        .collect()
}

/// The members' changes the leader took so far (re-checks it was asked for), by cause.
fn changes_taken(leader: &DaemonProcess) -> Result<[f64; 3]> {
    let text = leader.get("/metrics")?;
    Ok(["changed", "watch_restarted", "status"].map(|cause| {
        sum_of(
            &text,
            "gitfleet_member_changes_total",
            &format!("cause=\"{cause}\""),
        )
    }))
}

/// What the replicas were asked to do in a phase: orders delivered, probes and checks carried
/// out by each, and the members' changes the leader took by cause. A shard taken over is one
/// check; a member found changed is one change and one order at least; more is work the phase
/// made for itself.
struct Asked {
    orders: Vec<(String, f64)>,
    probes: Vec<(String, f64)>,
    checks: Vec<(String, f64)>,
    changes: [f64; 3],
}

impl Asked {
    fn now(replicas: &[(String, DaemonProcess)], leader: &DaemonProcess) -> Result<Asked> {
        Ok(Asked {
            orders: orders_by(replicas, "delivered")?,
            probes: orders_by(replicas, "probed")?,
            checks: orders_by(replicas, "checked")?,
            changes: changes_taken(leader)?,
        })
    }

    /// What was asked since `before`.
    fn since(&self, before: &Asked) -> Asked {
        let mut changes = self.changes;
        for (c, b) in changes.iter_mut().zip(before.changes) {
            *c -= b;
        }
        Asked {
            orders: per_replica_since(&self.orders, &before.orders),
            probes: per_replica_since(&self.probes, &before.probes),
            checks: per_replica_since(&self.checks, &before.checks),
            changes,
        }
    }
}

/// How many of `members` are in `held` shards.
fn members_of(members: &[String], held: &BTreeSet<u32>, shards: u32) -> usize {
    members
        .iter()
        .filter(|m| held.contains(&gitfleet::daemon::shards::assign::shard_of(m, shards).0))
        .count()
}

/// Waits until the replicas checked `count` more orders than `before`: each of `whose` shards
/// checked by its new owner (one order each, at least).
fn await_checked(
    replicas: &[(String, DaemonProcess)],
    leader: usize,
    before: f64,
    count: usize,
    whose: &str,
) -> Result<()> {
    let start = Instant::now();
    while checked(replicas, leader)? - before < count as f64 {
        if start.elapsed() > SCALE_LIMIT {
            return Err(format!("{whose} shards were not checked"));
        }
        // As seldom as the confirmation that follows polls: each scrape encodes every
        // member's series in the measured replicas.
        std::thread::sleep(SCALE_STATUS_POLL);
    }
    Ok(())
}

/// One phase's results: wall time, and each replica's CPU seconds and RSS (MiB) at its end.
struct Row {
    name: &'static str,
    wall: Duration,
    cpu: Vec<(String, f64)>,
    rss: Vec<(String, f64)>,
    writes: u64,
    reads: u64,
    /// The most files a replica, and a simulator, had open at the phase's end.
    files: (usize, usize),
}

fn measure(
    name: &'static str,
    replicas: &[(String, DaemonProcess)],
    ticks: &[(String, u64)],
    at: Instant,
    requests: (u64, u64),
    sim: &Members,
) -> Result<Row> {
    let tck = clock_ticks_per_second() as f64;
    let mut cpu = Vec::new();
    let mut rss = Vec::new();
    for (id, d) in replicas {
        let before = ticks.iter().find(|(i, _)| i == id).map_or(0, |(_, t)| *t);
        cpu.push((id.clone(), (cpu_ticks(d.pid())? - before) as f64 / tck));
        rss.push((
            id.clone(),
            proc_status_kib(d.pid(), "VmRSS:")? as f64 / 1024.0,
        ));
    }
    let (reads, writes) = sim.requests()?;
    let most = |pids: &mut dyn Iterator<Item = u32>| -> Result<usize> {
        pids.map(open_files).try_fold(0, |m, n| n.map(|n| m.max(n)))
    };
    let files = (
        most(&mut replicas.iter().map(|(_, d)| d.pid()))?,
        most(&mut sim.pids().into_iter())?,
    );
    Ok(Row {
        name,
        wall: at.elapsed(),
        cpu,
        rss,
        reads: reads - requests.0,
        writes: writes - requests.1,
        files,
    })
}

fn ticks_of(replicas: &[(String, DaemonProcess)]) -> Result<Vec<(String, u64)>> {
    replicas
        .iter()
        .map(|(id, d)| Ok((id.clone(), cpu_ticks(d.pid())?)))
        .collect()
}

pub(super) fn sharded(rt: &tokio::runtime::Runtime) -> Result<()> {
    let (placements, clusters, count, shards, window) = sizes();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (mut names, texts, _) = super::scale::scale_files(placements, clusters);
    let members: Vec<String> = names.clone();
    names.push(HOSTING.to_string());
    let (sim, kubeconfig) = Members::start(rt, &names, dir.path())?;
    let repos = Repos::create(dir.path(), &texts)?;
    let head = git(&repos.work, &["rev-parse", "HEAD"])?;
    let start = |id: &str| -> Result<(String, DaemonProcess)> {
        let mut flags: Vec<OsString> = ["--state", "kubernetes", "--hosting-kubeconfig"]
            .map(OsString::from)
            .into();
        flags.push(kubeconfig.clone().into());
        let shards = shards.to_string();
        flags.extend(
            [
                "--hosting-context",
                HOSTING,
                "--state-namespace",
                "default",
                "--shards",
                &shards,
                "--identity",
                id,
            ]
            .map(OsString::from),
        );
        Ok((
            id.to_string(),
            DaemonProcess::start_with(&repos.watched, &kubeconfig, &flags)?,
        ))
    };
    let mut rows = Vec::new();

    // 1. The first rollout, from the replicas' start.
    let requests = sim.requests()?;
    let at = Instant::now();
    let mut replicas: Vec<(String, DaemonProcess)> = (1..=count)
        .map(|i| start(&format!("r{i}")))
        .collect::<Result<_>>()?;
    let leader = leader_of(&replicas)?;
    replicas[leader]
        .1
        .await_confirmed(&head, SCALE_STATUS_POLL)?;
    await_split(&replicas, shards)?;
    rows.push(measure(
        "first rollout",
        &replicas,
        &[],
        at,
        requests,
        &sim,
    )?);

    // 2. Idle: each replica's mean RSS over the window.
    let (requests, at, ticks) = (sim.requests()?, Instant::now(), ticks_of(&replicas)?);
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); replicas.len()];
    while at.elapsed() < window {
        for (i, (_, d)) in replicas.iter().enumerate() {
            samples[i].push(proc_status_kib(d.pid(), "VmRSS:")? as f64 / 1024.0);
        }
        std::thread::sleep(Duration::from_secs(1).min(window.saturating_sub(at.elapsed())));
    }
    let mut idle = measure("idle", &replicas, &ticks, at, requests, &sim)?;
    for (i, (_, r)) in idle.rss.iter_mut().enumerate() {
        *r = samples[i].iter().sum::<f64>() / samples[i].len().max(1) as f64;
    }
    rows.push(idle);

    // 3. One placement's ConfigMap.
    let one = "placements/app-001.yaml";
    let text = texts
        .iter()
        .find(|(p, _)| p == one)
        .map(|(_, t)| t.clone())
        .ok_or("no app-001")?;
    repos.write(one, &text.replace("LOG_LEVEL: info", "LOG_LEVEL: debug"))?;
    let head = repos.commit("one placement's ConfigMap")?;
    let (requests, at, ticks) = (sim.requests()?, Instant::now(), ticks_of(&replicas)?);
    repos.push()?;
    replicas[leader]
        .1
        .await_confirmed(&head, SCALE_STATUS_POLL)?;
    rows.push(measure(
        "one placement",
        &replicas,
        &ticks,
        at,
        requests,
        &sim,
    )?);

    // 4. A replica that does not lead is killed: until its shards are held by the others, each
    // checked by its new owner, and the leader confirmed every binding.
    let victim = (0..replicas.len())
        .find(|i| *i != leader)
        .ok_or("one replica")?;
    let (_, lost) = replica_view(&replicas[victim].1)?;
    let lost_members = members_of(&members, &lost, shards);
    let leader_id = replicas[leader].0.clone();
    let (requests, at) = (sim.requests()?, Instant::now());
    let (victim_id, victim_process) = replicas.remove(victim);
    drop(victim_process);
    let leader = replicas
        .iter()
        .position(|(id, _)| *id == leader_id)
        .ok_or("the leader is gone")?;
    let ticks = ticks_of(&replicas)?;
    let asked_before = Asked::now(&replicas, &replicas[leader].1)?;
    let before = checked(&replicas, leader)?;
    let taken = await_split(&replicas, shards)?;
    await_checked(
        &replicas,
        leader,
        before,
        lost.len(),
        "the killed replica's",
    )?;
    replicas[leader]
        .1
        .await_confirmed(&head, SCALE_STATUS_POLL)?;
    rows.push(measure(
        "replica killed",
        &replicas,
        &ticks,
        at,
        requests,
        &sim,
    )?);
    let mut asked = vec![(
        "replica killed",
        Asked::now(&replicas, &replicas[leader].1)?.since(&asked_before),
    )];

    // 5. A replica added: until the shards are split among all again.
    let (requests, at, ticks) = (sim.requests()?, Instant::now(), ticks_of(&replicas)?);
    let asked_before = Asked::now(&replicas, &replicas[leader].1)?;
    let before = checked(&replicas, leader)?;
    replicas.push(start(&format!("r{}", count + 1))?);
    let rebalanced = await_split(&replicas, shards)?;
    let (_, moved) = replica_view(&replicas[replicas.len() - 1].1)?;
    let moved_members = members_of(&members, &moved, shards);
    await_checked(
        &replicas,
        leader,
        before,
        moved.len(),
        "the added replica's",
    )?;
    replicas[leader]
        .1
        .await_confirmed(&head, SCALE_STATUS_POLL)?;
    rows.push(measure(
        "replica added",
        &replicas,
        &ticks,
        at,
        requests,
        &sim,
    )?);
    asked.push((
        "replica added",
        Asked::now(&replicas, &replicas[leader].1)?.since(&asked_before),
    ));

    let profile = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    println!(
        "sharded ({profile}): {clusters} simulated members and {placements} placements (the scale fleet), {count} replicas of gitfleet run --state kubernetes --shards {shards}, hosting cluster simulated ({}); default lease timings (15 s / 10 s / 2 s)",
        sim.describe()
    );
    println!(
        "{:<15} {:>8} {:>8} {:>8} {:>6} {:>6}  per replica: CPU s / RSS MiB (* leads)",
        "phase", "wall", "reads", "writes", "fd r", "fd sim"
    );
    for r in &rows {
        let per: Vec<String> = r
            .cpu
            .iter()
            .zip(&r.rss)
            .map(|((id, c), (_, m))| {
                let lead = if *id == leader_id { "*" } else { "" };
                format!("{id}{lead} {c:.1}/{m:.0}")
            })
            .collect();
        println!(
            "{:<15} {:>7.1}s {:>8} {:>8} {:>6} {:>6}  {}",
            r.name,
            r.wall.as_secs_f64(),
            r.reads,
            r.writes,
            r.files.0,
            r.files.1,
            per.join("  ")
        );
    }
    for (phase, a) in &asked {
        let orders: Vec<String> = a
            .orders
            .iter()
            .zip(&a.probes)
            .zip(&a.checks)
            .map(|(((id, n), (_, p)), (_, c))| format!("{id} {n:.0}/{p:.0}/{c:.0}"))
            .collect();
        println!(
            "{phase}: the leader took {:.0} members' changes (changed {:.0}, watch restarted {:.0}, status {:.0}); orders delivered/probes/checks carried out: {}",
            a.changes.iter().sum::<f64>(),
            a.changes[0],
            a.changes[1],
            a.changes[2],
            orders.join(", ")
        );
    }
    println!(
        "replica killed: {victim_id} held {} shards ({lost_members} members); the others held them {:.1} s after the kill. Replica added: it took {} shards ({moved_members} members), the shards split among all {:.1} s after its start.",
        lost.len(),
        taken.as_secs_f64(),
        moved.len(),
        rebalanced.as_secs_f64(),
    );
    println!(
        "wall = until the leader's status API shows the commit served and every binding confirmed (the first rollout: from the replicas' start, and until the shards are split); reads/writes = requests the members received; fd r / fd sim = the most files a replica / a simulator process had open at the phase's end; RSS: idle = mean of 1 s samples over {} s, otherwise at the phase's end.",
        window.as_secs()
    );
    drop(replicas);
    sim.shutdown(rt);
    Ok(())
}
