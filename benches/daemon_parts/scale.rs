//! The daemon at fleet scale: 1,000 placements over 300 simulated members, five phases (first
//! commit, idle, a one-placement change, a ConfigMap a tenth of the placements select, a
//! restart), each with the daemon's wall and CPU time, peak and steady RSS and the requests the
//! members received. `GITFLEET_DAEMON_SCALE="placements,members,idle_s"`;
//! `GITFLEET_DAEMON_STATE=kubernetes` keeps the state in a simulated hosting cluster behind a
//! Lease, so that the restart is a new leader's re-sync.

use super::common::*;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// `GITFLEET_DAEMON_SCALE="placements,members,idle_seconds"` (default 1000,300,30).
fn scale_sizes() -> (usize, usize, Duration) {
    let text = std::env::var("GITFLEET_DAEMON_SCALE").unwrap_or_default();
    let mut it = text.split(',').map(|n| n.trim().parse::<u64>().ok());
    let placements = it.next().flatten().unwrap_or(1000).max(10) as usize;
    let members = it.next().flatten().unwrap_or(300).max(10) as usize;
    let idle = it.next().flatten().unwrap_or(DEFAULT_POLL.as_secs()).max(1);
    (placements, members, Duration::from_secs(idle))
}

/// The shared namespace and ConfigMap the last tenth of the scale fleet's placements deliver.
const SHARED: (&str, &str, &str) = ("shared", "common", "revision");

/// The scale fleet: [`idle_files`] for nine tenths of the placements, and one tenth (more
/// where a tenth's slices would list more than 100 members) PickFixed placements that all select the `shared` namespace (and so its ConfigMap), each
/// for its own slice of the members (so that no two put the same object on one member, which
/// push refuses: "already placed by another placement"). Returns the member names, the files
/// and the number of shared placements.
pub(super) fn scale_files(
    placements: usize,
    clusters: usize,
) -> (Vec<String>, Vec<(String, String)>, usize) {
    // A tenth of the placements, or more where a tenth's slices would pass the hub's limit of
    // 100 names a PickFixed placement may list.
    let shared = (placements / 10)
        .max(clusters.div_ceil(100))
        .min(placements);
    let (names, mut files) = idle_files(placements - shared, clusters);
    files.push(("shared/namespace.yaml".into(), yaml(&shared_objects(0))));
    for k in 0..shared {
        let slice: Vec<String> = (0..clusters)
            .filter(|i| i * shared / clusters == k)
            .map(|i| names[i].clone())
            .collect();
        let crp = json!({
            "apiVersion": "placement.kubernetes-fleet.io/v1",
            "kind": "ClusterResourcePlacement",
            "metadata": {"name": format!("shared-{k:03}")},
            "spec": {
                "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": SHARED.0}],
                "policy": {"placementType": "PickFixed", "clusterNames": slice},
            },
        });
        files.push((format!("shared/shared-{k:03}.yaml"), yaml(&[crp])));
    }
    (names, files, shared)
}

fn shared_objects(revision: usize) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SHARED.0}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": SHARED.1, "namespace": SHARED.0},
            "data": {SHARED.2: revision.to_string(), "payload": "x".repeat(512)}}),
    ]
}

/// The daemon at fleet scale: `placements` placements over `members` simulated
/// members (one simulator in this process), five phases, each measured on the daemon process:
/// the first commit until everything is applied and available; idle for one default poll; a
/// commit that changes one placement's ConfigMap; a commit that changes the ConfigMap a tenth
/// of the placements select; a restart on the same state directory, until every binding is
/// confirmed on its member.
pub(super) fn scale(rt: &tokio::runtime::Runtime) -> Result<()> {
    let (placements, clusters, window) = scale_sizes();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (mut names, texts, shared) = scale_files(placements, clusters);
    // `GITFLEET_DAEMON_STATE=kubernetes`: the state in ConfigMaps of one more simulated
    // cluster, behind a Lease, the restart then a new leader's re-sync.
    let in_kubernetes = std::env::var("GITFLEET_DAEMON_STATE").is_ok_and(|s| s == "kubernetes");
    if in_kubernetes {
        names.push(HOSTING.to_string());
    }
    let (sim, kubeconfig) = start_members(rt, &names, dir.path())?;
    let repos = Repos::create(dir.path(), &texts)?;
    let head = git(&repos.work, &["rev-parse", "HEAD"])?;
    let tck = clock_ticks_per_second();
    let state: Vec<OsString> = if in_kubernetes {
        let mut flags: Vec<OsString> = ["--state", "kubernetes", "--hosting-kubeconfig"]
            .map(OsString::from)
            .into();
        flags.push(kubeconfig.clone().into());
        flags.extend(
            ["--hosting-context", HOSTING, "--state-namespace", "default"].map(OsString::from),
        );
        flags
    } else {
        vec!["--state-dir".into(), dir.path().join("state").into()]
    };
    let mut phases = Vec::new();
    let mut loads = Vec::new();

    // 1. The first commit, from the daemon's start.
    let requests = member_requests(&sim);
    let at = Instant::now();
    let daemon = DaemonProcess::start_with(&repos.watched, &kubeconfig, &state)?;
    let start = PhaseStart {
        at,
        ticks: 0,
        requests,
        reconciles: 0,
    };
    daemon.await_confirmed(&head, SCALE_STATUS_POLL)?;
    phases.push(start.end("first commit", &daemon, &sim, tck)?);
    loads.push(load_average());
    let doc: Value =
        serde_json::from_str(&daemon.get("/api/v1/placements")?).map_err(|e| e.to_string())?;
    let bindings: usize = doc["placements"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| p["upToDate"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0);

    // 2. Idle, one default poll period.
    let start = PhaseStart::now(&daemon, &sim)?;
    let mut rss = Vec::new();
    while start.at.elapsed() < window {
        rss.push(proc_status_kib(daemon.pid(), "VmRSS:")?);
        std::thread::sleep(Duration::from_secs(1).min(window.saturating_sub(start.at.elapsed())));
    }
    let mut idle = start.end("idle", &daemon, &sim, tck)?;
    rss.push(idle.rss);
    idle.rss = rss.iter().sum::<u64>() / rss.len() as u64;
    phases.push(idle);
    loads.push(load_average());
    // 3. One placement's ConfigMap (a PickN placement).
    let one = "app-001";
    let text = texts
        .iter()
        .find(|(p, _)| p == &format!("placements/{one}.yaml"))
        .map(|(_, t)| t.clone())
        .ok_or("no app-001")?;
    repos.write(
        &format!("placements/{one}.yaml"),
        &text.replace("LOG_LEVEL: info", "LOG_LEVEL: debug"),
    )?;
    let head = repos.commit("one placement's ConfigMap")?;
    let start = PhaseStart::now(&daemon, &sim)?;
    repos.push()?;
    daemon.await_confirmed(&head, SCALE_STATUS_POLL)?;
    phases.push(start.end("one placement", &daemon, &sim, tck)?);
    loads.push(load_average());

    // 4. The ConfigMap a tenth of the placements select.
    repos.write("shared/namespace.yaml", &yaml(&shared_objects(1)))?;
    let head = repos.commit("the shared ConfigMap")?;
    let start = PhaseStart::now(&daemon, &sim)?;
    repos.push()?;
    daemon.await_confirmed(&head, SCALE_STATUS_POLL)?;
    phases.push(start.end("shared ConfigMap", &daemon, &sim, tck)?);
    loads.push(load_average());

    // 5. A restart on the same state, nothing changed meanwhile.
    daemon.stop()?;
    let requests = member_requests(&sim);
    let hosting_before = sim.member_request_counts(HOSTING).unwrap_or((0, 0));
    let at = Instant::now();
    let daemon = DaemonProcess::start_with(&repos.watched, &kubeconfig, &state)?;
    let start = PhaseStart {
        at,
        ticks: 0,
        requests,
        reconciles: 0,
    };
    daemon.await_confirmed(&head, SCALE_STATUS_POLL)?;
    phases.push(start.end("restart", &daemon, &sim, tck)?);
    loads.push(load_average());
    let hosting_after = sim.member_request_counts(HOSTING).unwrap_or((0, 0));
    // This process serves every member: its memory is the simulator's (read before the
    // document reads below, which are the benchmark's own and tens of MiB).
    let me = std::process::id();
    let sim_memory = (
        proc_status_kib(me, "VmHWM:")?,
        proc_status_kib(me, "VmRSS:")?,
    );
    // What one read of the whole placements document (as `gitfleet status` reads it) costs
    // the daemon: the phases poll `?unready` instead, which leaves the settled ones out. Read
    // after the phases: the allocator returns the memory of 5 reads of tens of MiB to the
    // system only after a delay, which would land in the CPU of the phase that follows.
    // The summary and a page, what `status`, `wait` and the dashboard read, against it.
    let reads = 5u32;
    let read = |path: &str| -> Result<(usize, f64, Duration)> {
        let (ticks, at, mut bytes) = (cpu_ticks(daemon.pid())?, Instant::now(), 0);
        for _ in 0..reads {
            bytes = daemon.get(path)?.len();
        }
        Ok((
            bytes,
            (cpu_ticks(daemon.pid())? - ticks) as f64 * 1000.0 / tck as f64 / f64::from(reads),
            at.elapsed() / reads,
        ))
    };
    let full_read = read("/api/v1/placements")?;
    let page = format!("GET /api/v1/placements?offset={}&limit=20", placements / 2);
    // The dashboard's matrix: its first page, and one from the middle of both axes.
    let matrix = format!(
        "GET /matrix?offset={}&moffset={}",
        placements / 2,
        clusters / 2
    );
    let small_reads = [
        ("GET /api/v1/summary".to_string(), read("/api/v1/summary")?),
        (page.clone(), read(&page[4..])?),
        ("GET /matrix".to_string(), read("/matrix")?),
        (matrix.clone(), read(&matrix[4..])?),
    ];
    if std::env::var_os("GITFLEET_DAEMON_BENCH_LOG").is_some() {
        eprintln!("{}", daemon.log.lock().unwrap().join("\n"));
    }

    let profile = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    println!(
        "fleet scale ({profile}): {clusters} simulated members (one simulator, in the benchmark's process), {placements} placements ({} PickAll with region affinity, PickN 5-20, PickFixed 3, one namespace and ConfigMap each; {shared} PickFixed selecting one shared namespace and ConfigMap, each on its own {} members), {bindings} placement×cluster bindings",
        placements - shared,
        clusters / shared.max(1),
    );
    println!(
        "{:<17} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9} {:>11}  load avg (1/5/15 min, at the end)",
        "phase", "wall", "CPU", "peak RSS", "RSS", "reads", "writes", "reconciles"
    );
    for (p, load) in phases.iter().zip(&loads) {
        println!(
            "{:<17} {:>8.2}s {:>8.2}s {:>6.1} MiB {:>6.1} MiB {:>10} {:>9} {:>11}  {load}",
            p.name,
            p.wall.as_secs_f64(),
            p.cpu,
            p.peak as f64 / 1024.0,
            p.rss as f64 / 1024.0,
            p.reads,
            p.writes,
            p.reconciles,
        );
    }
    println!(
        "simulator (this process, {} members): peak RSS {:.1} MiB ({:.0} KiB per member), RSS after the restart {:.1} MiB",
        names.len(),
        sim_memory.0 as f64 / 1024.0,
        sim_memory.0 as f64 / names.len() as f64,
        sim_memory.1 as f64 / 1024.0,
    );
    if in_kubernetes {
        println!(
            "state: --state kubernetes, ConfigMaps in namespace default of one more simulated cluster ({HOSTING:?}, not a member), behind a Lease; the restart (a new leader's re-sync) sent it {} reads and {} writes",
            hosting_after.0 - hosting_before.0,
            hosting_after.1 - hosting_before.1,
        );
    } else {
        println!("state: --state-dir (the default directory backend)");
    }
    println!(
        "the whole placements document (GET /api/v1/placements, settled, after the restart): {:.1} MiB, {:.0} ms of the daemon's CPU and {:.0} ms wall per read (mean of {reads})",
        full_read.0 as f64 / (1024.0 * 1024.0),
        full_read.1,
        full_read.2.as_secs_f64() * 1000.0,
    );
    for (what, (bytes, cpu, wall)) in &small_reads {
        println!(
            "{what}: {:.1} KiB ({:.5} of the whole document), {cpu:.1} ms of the daemon's CPU ({:.4}), {:.1} ms wall ({:.4}) per read (mean of {reads})",
            *bytes as f64 / 1024.0,
            *bytes as f64 / full_read.0 as f64,
            cpu / full_read.1.max(f64::MIN_POSITIVE),
            wall.as_secs_f64() * 1000.0,
            wall.as_secs_f64() / full_read.2.as_secs_f64(),
        );
    }
    println!(
        "wall = until the status API shows the commit served, every placement settled and every binding available with no re-check pending (GET /api/v1/placements?unready&limit=0 counts none, polled every {} ms; the first commit and the restart from the process's start); CPU = the daemon's utime+stime; peak RSS = VmHWM over the phase (reset at its start); RSS = VmRSS at its end (idle: mean of 1 s samples over {} s); reads/writes = requests the members received (GET/HEAD vs POST/PUT/PATCH/DELETE), the benchmark's own none.",
        SCALE_STATUS_POLL.as_millis(),
        window.as_secs()
    );
    // `GITFLEET_DAEMON_BENCH_HOLD=SECONDS` keeps the settled daemon up that long, for a
    // browser to measure the dashboard against it (tests/dashboard_e2e.rs's
    // `matrix_first_paint`).
    if let Some(hold) = std::env::var("GITFLEET_DAEMON_BENCH_HOLD")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        println!("dashboard: {}/matrix, held for {hold} s", daemon.addr);
        std::thread::sleep(Duration::from_secs(hold));
    }
    drop(daemon);
    rt.block_on(sim.shutdown());
    Ok(())
}
