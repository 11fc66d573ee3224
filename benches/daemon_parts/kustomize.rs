//! Kustomize sources: the idle part's kind of fleet at fleet scale, 100 of its placements'
//! namespaces built by kustomize (one overlay per app over one shared base), against the same
//! objects as plain YAML in the same run: the daemon's CPU for a commit that changes one plain
//! placement, for one that changes the base and one that changes one overlay, and a restart
//! that must run no build. `GITFLEET_DAEMON_KUSTOMIZE="placements,members"`; needs the real
//! kustomize (`gitfleet_testkit::tools::KUSTOMIZE`).

use super::common::*;
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The placements of the kustomize part whose namespaces come from Kustomize overlays.
const KUSTOMIZE_APPS: usize = 100;
/// One-placement commits measured per repository.
const KUSTOMIZE_ONE_COMMITS: usize = 5;

/// `GITFLEET_DAEMON_KUSTOMIZE="placements,members"` (default 1000,300).
fn kustomize_sizes() -> (usize, usize) {
    let text = std::env::var("GITFLEET_DAEMON_KUSTOMIZE").unwrap_or_default();
    let mut it = text.split(',').map(|n| n.trim().parse::<usize>().ok());
    let placements = it.next().flatten().unwrap_or(1000).max(KUSTOMIZE_APPS + 10);
    let members = it.next().flatten().unwrap_or(300).max(10);
    (placements, members)
}

/// The shared base's objects: a ConfigMap every app patches, and a ServiceAccount.
fn kustomize_base(revision: usize) -> Vec<(String, String)> {
    let kustomization = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["configmap.yaml", "serviceaccount.yaml"],
        "labels": [{"pairs": {"app.kubernetes.io/part-of": "apps"}}],
    });
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app-config"},
        "data": {"REPLICAS": "1", "LOG_LEVEL": "info", "BASE_REVISION": revision.to_string(),
                 "payload": "x".repeat(512)}});
    let account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app"}});
    vec![
        (
            "apps/base/kustomization.yaml".into(),
            yaml(&[kustomization]),
        ),
        ("apps/base/configmap.yaml".into(), yaml(&[configmap])),
        ("apps/base/serviceaccount.yaml".into(), yaml(&[account])),
    ]
}

/// App `p`'s overlay: its own namespace (set on every object of the base), its own
/// Namespace object, labels and a patch of the base's ConfigMap.
fn kustomize_overlay(p: usize, replicas: usize) -> Vec<(String, String)> {
    let ns = format!("app-{p:03}");
    let patch = yaml(&[json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app-config"}, "data": {"REPLICAS": replicas.to_string()}})]);
    let kustomization = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": ns,
        "resources": ["../../base", "namespace.yaml"],
        "labels": [{"pairs": {"app.kubernetes.io/name": ns}, "includeSelectors": false}],
        "patches": [{"patch": patch}],
    });
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    vec![
        (
            format!("apps/overlays/{ns}/kustomization.yaml"),
            yaml(&[kustomization]),
        ),
        (
            format!("apps/overlays/{ns}/namespace.yaml"),
            yaml(&[namespace]),
        ),
    ]
}

/// The kustomize part's fleet: [`idle_files`], the first [`KUSTOMIZE_APPS`] placements'
/// namespaces (a Namespace, ConfigMap and ServiceAccount each) built by kustomize from one
/// overlay per app over one shared base, their ClusterResourcePlacements plain YAML.
fn kustomize_files(placements: usize, clusters: usize) -> (Vec<String>, Vec<(String, String)>) {
    let (names, mut files) = idle_files(placements, clusters);
    for (path, text) in files.iter_mut() {
        let Some(p) = path
            .strip_prefix("placements/app-")
            .and_then(|n| n.strip_suffix(".yaml"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if p < KUSTOMIZE_APPS {
            // The namespace and ConfigMap of `idle_files` go: the overlay makes them.
            *text = text.split("---\n").last().unwrap_or_default().to_string();
        }
    }
    files.extend(kustomize_base(0));
    for p in 0..KUSTOMIZE_APPS {
        files.extend(kustomize_overlay(p, 1 + p % 5));
    }
    (names, files)
}

/// The same fleet with every overlay replaced by what `kustomize` builds of it, as plain YAML
/// (so that both repositories hold the same objects).
fn kustomize_rendered(
    kustomize: &Path,
    files: &[(String, String)],
    dir: &Path,
) -> Result<Vec<(String, String)>> {
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with("apps/")) {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
    }
    let mut out: Vec<(String, String)> = files
        .iter()
        .filter(|(p, _)| !p.starts_with("apps/"))
        .cloned()
        .collect();
    for p in 0..KUSTOMIZE_APPS {
        let overlay = dir.join(format!("apps/overlays/app-{p:03}"));
        let built = Command::new(kustomize)
            .arg("build")
            .arg(&overlay)
            .output()
            .map_err(|e| format!("kustomize build: {e}"))?;
        if !built.status.success() {
            return Err(format!(
                "kustomize build {}: {}",
                overlay.display(),
                String::from_utf8_lossy(&built.stderr)
            ));
        }
        out.push((
            format!("apps/app-{p:03}.yaml"),
            String::from_utf8_lossy(&built.stdout).into_owned(),
        ));
    }
    Ok(out)
}

/// A kustomize that logs its first argument (`build`, `version`) to `log` before running the
/// real one: every process the daemon starts is counted, whether or not its renders metric
/// counts it.
fn counting_kustomize(real: &Path, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    use std::io::Write as _;
    let log = dir.join("kustomize-runs");
    let script = dir.join("counting-kustomize");
    let text = format!(
        "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        real.display()
    );
    // Written by a child process, not through a file this process holds open: a child forked
    // meanwhile (the simulators, the daemon) would inherit that descriptor until its exec, and
    // running the script then fails with ETXTBSY.
    let mut sh = Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(&script)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("sh: {e}"))?;
    sh.stdin
        .take()
        .ok_or("sh's stdin")?
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    if !sh.wait().map_err(|e| e.to_string())?.success() {
        return Err(format!("cannot write {}", script.display()));
    }
    Ok((script, log))
}

/// `(builds, other runs)` the counting kustomize has logged.
fn kustomize_runs(log: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let builds = text.lines().filter(|l| *l == "build").count();
    (builds, text.lines().count() - builds)
}

/// One measured commit of the kustomize part.
struct KustomizePhase {
    name: String,
    wall: Duration,
    cpu: f64,
    /// The CPU of the kustomize processes the daemon ran meanwhile.
    children: f64,
    /// `kustomize build` processes run meanwhile, and the daemon's renders metric's increase.
    builds: usize,
    renders: f64,
}

/// A daemon following `repos` with the counting kustomize, and what measuring it needs.
struct KustomizeRun<'a> {
    repos: &'a Repos,
    kubeconfig: &'a Path,
    flags: Vec<OsString>,
    log: PathBuf,
    sim: &'a gitfleet_sim::RunningFleet,
    tck: u64,
}

impl KustomizeRun<'_> {
    fn start(&self) -> Result<DaemonProcess> {
        DaemonProcess::start_with(&self.repos.watched, self.kubeconfig, &self.flags)
    }

    /// Measures `daemon` from now until it has confirmed `head` (pushed first when `push`).
    fn measure(
        &self,
        name: String,
        daemon: &DaemonProcess,
        head: &str,
        push: bool,
        from_start: Option<Instant>,
    ) -> Result<KustomizePhase> {
        let builds = kustomize_runs(&self.log).0;
        let (renders, start) = match from_start {
            Some(at) => (
                0.0,
                PhaseStart {
                    at,
                    ticks: 0,
                    requests: member_requests(self.sim),
                    reconciles: 0,
                },
            ),
            None => (
                daemon.counter_total("gitfleet_source_renders_total")?,
                PhaseStart::now(daemon, self.sim)?,
            ),
        };
        let children = children_cpu_ticks(daemon.pid())?;
        if push {
            self.repos.push()?;
        }
        daemon.await_confirmed(head, SCALE_STATUS_POLL)?;
        let children = children_cpu_ticks(daemon.pid())? - children;
        let phase = start.end("", daemon, self.sim, self.tck)?;
        Ok(KustomizePhase {
            name,
            wall: phase.wall,
            cpu: phase.cpu,
            children: children as f64 / self.tck as f64,
            builds: kustomize_runs(&self.log).0 - builds,
            renders: daemon.counter_total("gitfleet_source_renders_total")? - renders,
        })
    }

    /// [`KUSTOMIZE_ONE_COMMITS`] commits, each changing one plain placement's ConfigMap.
    fn one_placement(
        &self,
        daemon: &DaemonProcess,
        texts: &[(String, String)],
    ) -> Result<Vec<KustomizePhase>> {
        // A PickN placement that is not one of the Kustomize apps.
        let path = format!("placements/app-{:03}.yaml", KUSTOMIZE_APPS + 1);
        let text = texts
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| format!("no {path}"))?;
        (0..KUSTOMIZE_ONE_COMMITS)
            .map(|i| {
                self.repos.write(
                    &path,
                    &text.replace("LOG_LEVEL: info", &format!("LOG_LEVEL: debug-{i}")),
                )?;
                let head = self.repos.commit("one placement's ConfigMap")?;
                self.measure(
                    format!("one placement #{}", i + 1),
                    daemon,
                    &head,
                    true,
                    None,
                )
            })
            .collect()
    }
}

/// The daemon with [`KUSTOMIZE_APPS`] of its placements' namespaces built by kustomize (one
/// shared base, one overlay per app), against the same fleet as plain YAML in the same run:
/// one-placement commits on both, then on the Kustomize repository a commit changing the
/// base, one changing one overlay, and a restart on the unchanged commit.
pub(super) fn kustomize(rt: &tokio::runtime::Runtime) -> Result<()> {
    let real = gitfleet_testkit::tools::KUSTOMIZE
        .find("the kustomize part")
        .ok_or_else(|| {
            format!(
                "kustomize is needed: {}",
                gitfleet_testkit::tools::KUSTOMIZE.install
            )
        })?;
    let (placements, clusters) = kustomize_sizes();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (names, texts) = kustomize_files(placements, clusters);
    let (program, log) = counting_kustomize(&real, dir.path())?;
    let tck = clock_ticks_per_second();

    // The baseline: the same objects as plain YAML.
    let plain_dir = dir.path().join("plain");
    let plain = kustomize_rendered(&real, &texts, &dir.path().join("built"))?;
    let (sim, kubeconfig) = {
        std::fs::create_dir_all(&plain_dir).map_err(|e| e.to_string())?;
        start_members(rt, &names, &plain_dir)?
    };
    let repos = Repos::create(&plain_dir, &plain)?;
    let run = KustomizeRun {
        repos: &repos,
        kubeconfig: &kubeconfig,
        flags: ["--state-dir".into(), plain_dir.join("state").into()].into(),
        log: log.clone(),
        sim: &sim,
        tck,
    };
    let at = Instant::now();
    let daemon = run.start()?;
    let head = git(&repos.work, &["rev-parse", "HEAD"])?;
    let mut baseline = vec![run.measure("first commit".into(), &daemon, &head, false, Some(at))?];
    let plain_loads = load_average();
    baseline.extend(run.one_placement(&daemon, &plain)?);
    drop(daemon);
    rt.block_on(sim.shutdown());

    // The fleet with its Kustomize overlays.
    let k_dir = dir.path().join("kustomize");
    std::fs::create_dir_all(&k_dir).map_err(|e| e.to_string())?;
    let (sim, kubeconfig) = start_members(rt, &names, &k_dir)?;
    let repos = Repos::create(&k_dir, &texts)?;
    let mut flags: Vec<OsString> = vec!["--state-dir".into(), k_dir.join("state").into()];
    flags.extend(["--kustomize".into(), program.clone().into()]);
    let run = KustomizeRun {
        repos: &repos,
        kubeconfig: &kubeconfig,
        flags,
        log: log.clone(),
        sim: &sim,
        tck,
    };
    let at = Instant::now();
    let daemon = run.start()?;
    let head = git(&repos.work, &["rev-parse", "HEAD"])?;
    let mut phases = vec![run.measure("first commit".into(), &daemon, &head, false, Some(at))?];
    let mut loads = vec![load_average()];
    let ones = run.one_placement(&daemon, &texts)?;
    loads.push(load_average());
    for (path, text) in kustomize_base(1) {
        repos.write(&path, &text)?;
    }
    let head = repos.commit("the shared base")?;
    phases.push(run.measure("the shared base".into(), &daemon, &head, true, None)?);
    loads.push(load_average());
    let one = 7;
    for (path, text) in kustomize_overlay(one, 9) {
        repos.write(&path, &text)?;
    }
    let head = repos.commit("one overlay")?;
    phases.push(run.measure("one overlay".into(), &daemon, &head, true, None)?);
    loads.push(load_average());
    daemon.stop()?;
    let runs_before = kustomize_runs(&log);
    let at = Instant::now();
    let daemon = run.start()?;
    phases.push(run.measure("restart".into(), &daemon, &head, false, Some(at))?);
    loads.push(load_average());
    let runs_after = kustomize_runs(&log);
    let cache_files = std::fs::read_dir(k_dir.join("state/cache/renders"))
        .map(|d| d.count())
        .unwrap_or(0);
    drop(daemon);
    rt.block_on(sim.shutdown());

    let profile = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    println!(
        "kustomize sources ({profile}): {clusters} simulated members, {placements} placements ({KUSTOMIZE_APPS} of them select a namespace (Namespace, ConfigMap, ServiceAccount) that kustomize builds from its own overlay over one shared base; the rest as in the idle part); the baseline: the same fleet with kustomize's output committed as plain YAML; kustomize {}",
        real.display()
    );
    let median = |xs: &[&KustomizePhase]| {
        let mut cpu: Vec<f64> = xs.iter().map(|p| p.cpu).collect();
        cpu.sort_by(f64::total_cmp);
        cpu[cpu.len() / 2]
    };
    let plain_ones: Vec<&KustomizePhase> = baseline[1..].iter().collect();
    let k_ones: Vec<&KustomizePhase> = ones.iter().collect();
    let (plain_one, k_one) = (median(&plain_ones), median(&k_ones));
    let fmt = |xs: &[&KustomizePhase]| {
        xs.iter()
            .map(|p| format!("{:.0}", p.cpu * 1000.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "one plain placement's ConfigMap, daemon CPU over {KUSTOMIZE_ONE_COMMITS} commits: Kustomize repository median {:.0} ms ({} ms; goal under 100 ms), plain YAML median {:.0} ms ({} ms): {:.2}x; kustomize builds meanwhile: {}",
        k_one * 1000.0,
        fmt(&k_ones),
        plain_one * 1000.0,
        fmt(&plain_ones),
        k_one / plain_one.max(f64::MIN_POSITIVE),
        ones.iter().map(|p| p.builds).sum::<usize>(),
    );
    println!(
        "{:<20} {:>9} {:>12} {:>15} {:>8} {:>8}  load avg (1/5/15 min, at the end)",
        "commit", "wall", "daemon CPU", "kustomize CPU", "builds", "renders"
    );
    let first = &baseline[0];
    println!(
        "{:<20} {:>8.2}s {:>11.2}s {:>15} {:>8} {:>8}  {plain_loads}",
        "plain: first commit",
        first.wall.as_secs_f64(),
        first.cpu,
        "-",
        "-",
        "-"
    );
    for (p, load) in phases.iter().zip(&loads) {
        println!(
            "{:<20} {:>8.2}s {:>11.2}s {:>14.2}s {:>8} {:>8}  {load}",
            p.name,
            p.wall.as_secs_f64(),
            p.cpu,
            p.children,
            p.builds,
            p.renders as i64,
        );
    }
    println!(
        "restart on the unchanged commit: kustomize processes run {} (build), {} (other: version); renders metric {}; {} files in the render cache folder (renderings and the kustomize version)",
        runs_after.0 - runs_before.0,
        runs_after.1 - runs_before.1,
        phases.last().map_or(0, |p| p.renders as i64),
        cache_files,
    );
    println!(
        "wall = until the status API shows the commit served and every binding confirmed (as the scale part, polled every {} ms; the first commit and the restart from the process's start); daemon CPU = its utime+stime; kustomize CPU = its children's (cutime+cstime); builds = `kustomize build` processes it ran (a counting wrapper); renders = gitfleet_source_renders_total's increase.",
        SCALE_STATUS_POLL.as_millis()
    );
    Ok(())
}
