//! The daemon benchmark: `cargo bench --bench daemon`.
//!
//! Runs the real binary, `gitfleet run`, as a child process against simulated members served
//! in this process (`gitfleet_sim`), and measures two things:
//!
//! - **push-to-applied latency**: a bare repository the daemon follows, a working clone, 10
//!   members (`GITFLEET_DAEMON_LATENCY_MEMBERS="10,100"` measures each size in turn) and a few
//!   PickAll placements under the default RollingUpdate strategy. Twenty times:
//!   commit a new ConfigMap value in the clone, start the clock, `git push` into the watched
//!   repository, and poll every member over HTTP (every 10 ms) until all serve the new value.
//!   The clock therefore includes `git push` itself and up to one poll interval (plus one sweep
//!   of GETs) of granularity. Baseline, in the same run: a plain client applying the same
//!   objects to the same members with server-side apply (members in parallel, objects in
//!   order), timed until every request has been answered.
//! - **idle cost**: 100 members, 100 placements (PickAll, PickN, PickFixed, see [`idle_files`]),
//!   the daemon with its default poll; once the rollout has
//!   settled, RSS (`VmRSS`) and CPU time (`utime + stime`) of the daemon process are sampled from
//!   `/proc/<pid>` for one default poll period, so the window holds exactly one periodic look at
//!   the branch and the members.
//!
//! - **faulty members**: 6 healthy members and 4 faulty ones (down, 500 on every
//!   request, garbage on every request, 3 s per request) under one daemon; push-to-applied on
//!   the healthy members, first with no fault, then with the faults, as the ratio of the
//!   medians (goal: under 2), see [`faults`].
//!
//! - **push-to-applied latency on real members**, when the test bed is built (testbed/): 3
//!   real members, each commit changing a ConfigMap and a Deployment's pod template, timed
//!   until the daemon reports the commit settled (every Deployment available again through the
//!   real deployment controller and kwok), see [`latency_real`].
//!
//! - **fleet scale**: 1,000 placements over 300 simulated members, five phases
//!   (first commit, idle, a one-placement change, a ConfigMap a tenth of the placements select,
//!   a restart), each with the daemon's wall and CPU time, peak and steady RSS and the requests
//!   the members received, see [`scale`]. `GITFLEET_DAEMON_SCALE="placements,members,idle_s"`;
//!   `GITFLEET_DAEMON_STATE=kubernetes` keeps the state in a simulated hosting cluster behind a
//!   Lease, so that the restart is a new leader's re-sync.
//!
//! - **Kustomize sources**: the idle part's kind of fleet at fleet scale, 100 of its
//!   placements' namespaces built by kustomize (one overlay per app over one shared base),
//!   against the same objects as plain YAML in the same run: the daemon's CPU for a commit that
//!   changes one plain placement, for one that changes the base and one that changes one
//!   overlay, and a restart that must run no build, see [`kustomize`].
//!   `GITFLEET_DAEMON_KUSTOMIZE="placements,members"`; needs the real kustomize
//!   (`gitfleet_testkit::tools::KUSTOMIZE`).
//!
//! The simulator shares the machine (and its cores) with the daemon, as it would in the quick
//! start. `GITFLEET_DAEMON_BENCH="commits,idle_seconds"` changes the sizes (default 20,30);
//! - **a run waiting for its approval**: the daemon's CPU, reconciles and log lines over the
//!   idle window with a staged run waiting for an approval, against the same daemon settled,
//!   see [`waiting`].
//!
//! `GITFLEET_DAEMON_PARTS=latency,faults,idle,waiting,real latency,scale,kustomize` runs only the parts
//! named (`scale` and `kustomize` run only when named);
//! `GITFLEET_DAEMON_REAL_COMMITS` the commits on real members (default 10).

/// The simulator serves the members from this process on the allocator `gitfleet sim` runs on
/// (src/main.rs), not glibc's: glibc's malloc and free would cost it much CPU serving a
/// restart's lists, CPU the daemon under test would then have less of.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "support/testbed.rs"]
mod testbed;
#[path = "daemon_parts/waiting.rs"]
mod waiting;

/// The latency part's fleet sizes: `GITFLEET_DAEMON_LATENCY_MEMBERS="10,100"` (default 10).
fn latency_members() -> Vec<usize> {
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
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// A bound on every wait, so a broken daemon fails the benchmark instead of hanging it.
const SETTLE_LIMIT: Duration = Duration::from_secs(300);
/// `gitfleet run`'s default `--poll`.
const DEFAULT_POLL: Duration = Duration::from_secs(30);
const IDLE_FLEET: (usize, usize) = (100, 100);

type Result<T> = std::result::Result<T, String>;

fn sizes() -> (usize, Duration) {
    let text = std::env::var("GITFLEET_DAEMON_BENCH").unwrap_or_default();
    let mut it = text.split(',').map(|n| n.trim().parse::<u64>().ok());
    let commits = it.next().flatten().unwrap_or(20).max(1) as usize;
    let idle = it.next().flatten().unwrap_or(DEFAULT_POLL.as_secs()).max(1);
    (commits, Duration::from_secs(idle))
}

// ---------------------------------------------------------------------------------------------
// git
// ---------------------------------------------------------------------------------------------

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@gitfleet.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@gitfleet.invalid")
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A bare repository the daemon follows and a working clone that pushes into it.
struct Repos {
    watched: PathBuf,
    work: PathBuf,
}

impl Repos {
    /// Writes `files` (path, text) into a new clone, commits and pushes them.
    fn create(dir: &Path, files: &[(String, String)]) -> Result<Repos> {
        let watched = dir.join("watched.git");
        let work = dir.join("work");
        std::fs::create_dir_all(&watched).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
        git(&watched, &["init", "-q", "--bare", "-b", "main"])?;
        git(&work, &["init", "-q", "-b", "main"])?;
        git(
            &work,
            &["remote", "add", "origin", watched.to_str().unwrap()],
        )?;
        let repos = Repos { watched, work };
        for (path, text) in files {
            repos.write(path, text)?;
        }
        git(&repos.work, &["add", "-A"])?;
        git(&repos.work, &["commit", "-q", "-m", "the fleet"])?;
        git(&repos.work, &["push", "-q", "origin", "main"])?;
        Ok(repos)
    }

    fn write(&self, path: &str, text: &str) -> Result<()> {
        let file = self.work.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))
    }

    fn commit(&self, message: &str) -> Result<String> {
        git(&self.work, &["commit", "-q", "-am", message])?;
        git(&self.work, &["rev-parse", "HEAD"])
    }

    fn push(&self) -> Result<()> {
        git(&self.work, &["push", "-q", "origin", "main"]).map(drop)
    }
}

fn yaml(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| gitfleet::yaml::to_string(d).expect("JSON values serialise as YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

// ---------------------------------------------------------------------------------------------
// The daemon as a child process
// ---------------------------------------------------------------------------------------------

struct DaemonProcess {
    child: Child,
    addr: String,
    agent: ureq::Agent,
    /// The last lines of its log, for error messages.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// How many lines it has logged.
    lines: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl DaemonProcess {
    fn start(repo: &Path, kubeconfig: &Path, state: &Path) -> Result<DaemonProcess> {
        let state = [OsString::from("--state-dir"), state.into()];
        DaemonProcess::start_with(repo, kubeconfig, &state)
    }

    /// With `state`: the flags that say where the daemon keeps its state.
    fn start_with(repo: &Path, kubeconfig: &Path, state: &[OsString]) -> Result<DaemonProcess> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .arg("run")
            .arg("--repo")
            .arg(repo)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(state)
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            // `GITFLEET_DAEMON_BENCH_FILTER="info,gitfleet::daemon::timing=debug"` adds the
            // reconciles' timings; `GITFLEET_DAEMON_BENCH_LOGFILE` keeps the whole log.
            .env(
                "GITFLEET_LOG",
                std::env::var("GITFLEET_DAEMON_BENCH_FILTER").unwrap_or_else(|_| "info".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start gitfleet run: {e}"))?;
        let stderr = child.stderr.take().expect("piped");
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        {
            let log = log.clone();
            let lines = lines.clone();
            let mut keep = std::env::var_os("GITFLEET_DAEMON_BENCH_LOGFILE").and_then(|f| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(f)
                    .ok()
            });
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                    if let Some(f) = keep.as_mut() {
                        use std::io::Write as _;
                        let _ = writeln!(f, "{line}");
                    }
                    let v: Value = serde_json::from_str(&line).unwrap_or_default();
                    if let Some(a) = v["fields"]["listen"].as_str() {
                        let _ = tx.send(a.to_string());
                    }
                    lines.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let mut log = log.lock().unwrap();
                    log.push(line.chars().take(400).collect());
                    if log.len() > 12 {
                        log.remove(0);
                    }
                }
            });
        }
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| "gitfleet run did not log its address".to_string())?;
        Ok(DaemonProcess {
            child,
            addr: format!("http://{addr}"),
            agent: ureq::Agent::new_with_defaults(),
            log,
            lines,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn lines(&self) -> usize {
        self.lines.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn get(&self, path: &str) -> Result<String> {
        self.agent
            .get(&format!("{}{path}", self.addr))
            .call()
            // The placements document of a fleet-scale daemon is bigger than ureq's default
            // 10 MiB limit.
            .and_then(|mut r| r.body_mut().with_config().limit(u64::MAX).read_to_string())
            .map_err(|e| format!("GET {path}: {e}"))
    }

    /// Whether the daemon serves `commit` and every placement is settled (nothing applying,
    /// removing or waiting).
    fn settled_on(&self, commit: &str) -> Result<bool> {
        let doc: Value = serde_json::from_str(&self.get("/api/v1/placements")?)
            .map_err(|e| format!("/api/v1/placements: {e}"))?;
        if doc["serving"] != commit {
            return Ok(false);
        }
        let placements = doc["placements"].as_array().cloned().unwrap_or_default();
        Ok(!placements.is_empty()
            && placements.iter().all(|p| {
                ["applying", "removing", "waiting"]
                    .iter()
                    .all(|k| p[k].as_array().is_none_or(Vec::is_empty))
            }))
    }

    fn await_settled(&self, commit: &str) -> Result<Duration> {
        let start = Instant::now();
        while !self.settled_on(commit)? {
            if start.elapsed() > SETTLE_LIMIT {
                return Err(format!(
                    "the daemon did not settle on {commit} within {SETTLE_LIMIT:?}; its log ends:\n{}",
                    self.log.lock().unwrap().join("\n")
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        Ok(start.elapsed())
    }

    /// The sum of every sample of a counter (all label sets).
    fn counter_total(&self, name: &str) -> Result<f64> {
        let text = self.get("/metrics")?;
        Ok(text
            .lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    /// `(count, sum of seconds)` of the reconcile-duration histogram.
    fn reconciles(&self) -> Result<(u64, f64)> {
        let text = self.get("/metrics")?;
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        Ok((
            value("gitfleet_reconcile_duration_seconds_count ") as u64,
            value("gitfleet_reconcile_duration_seconds_sum "),
        ))
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Members over HTTP (as any client would reach them)
// ---------------------------------------------------------------------------------------------

struct MemberClient {
    name: String,
    server: String,
    token: String,
    agent: ureq::Agent,
}

impl MemberClient {
    fn of(sim: &gitfleet_sim::RunningFleet) -> Vec<MemberClient> {
        sim.members()
            .iter()
            .map(|m| MemberClient {
                name: m.name.clone(),
                server: m.server.clone(),
                token: m.token.clone(),
                agent: ureq::Agent::new_with_defaults(),
            })
            .collect()
    }

    fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// `data[key]` of a ConfigMap, `None` when it does not exist.
    fn config_value(&self, ns: &str, name: &str, key: &str) -> Result<Option<String>> {
        let url = format!("{}/api/v1/namespaces/{ns}/configmaps/{name}", self.server);
        match self
            .agent
            .get(&url)
            .header("Authorization", &self.auth())
            .call()
        {
            Ok(mut r) => {
                let v: Value = r
                    .body_mut()
                    .read_to_string()
                    .map_err(|e| e.to_string())
                    .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                    .map_err(|e| format!("{}: {url}: {e}", self.name))?;
                Ok(v["data"][key].as_str().map(str::to_string))
            }
            Err(ureq::Error::StatusCode(404)) => Ok(None),
            Err(e) => Err(format!("{}: GET {url}: {e}", self.name)),
        }
    }

    /// Server-side apply of one object.
    fn apply(&self, obj: &Value) -> Result<()> {
        let kind = obj["kind"].as_str().unwrap_or_default();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let ns = obj["metadata"]["namespace"].as_str();
        let path = match (kind, ns) {
            ("Namespace", _) => format!("/api/v1/namespaces/{name}"),
            ("ConfigMap", Some(ns)) => format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
            ("Deployment", Some(ns)) => format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}"),
            _ => return Err(format!("the baseline cannot apply a {kind}")),
        };
        let url = format!(
            "{}{path}?fieldManager=bench-baseline&force=true",
            self.server
        );
        self.agent
            .patch(&url)
            .header("Authorization", &self.auth())
            .header("Content-Type", "application/apply-patch+yaml")
            .send(obj.to_string())
            .map(drop)
            .map_err(|e| format!("{}: PATCH {url}: {e}", self.name))
    }
}

/// Polls every member every [`POLL_INTERVAL`] until each serves `want`; returns when the last
/// one was first seen doing so.
fn await_value(
    members: &[MemberClient],
    (ns, name, key): (&str, &str, &str),
    want: &str,
    start: Instant,
) -> Result<Duration> {
    let mut pending: Vec<&MemberClient> = members.iter().collect();
    let mut last = Duration::ZERO;
    while !pending.is_empty() {
        let mut still = Vec::new();
        for m in pending {
            if m.config_value(ns, name, key)?.as_deref() == Some(want) {
                last = start.elapsed();
            } else {
                still.push(m);
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if start.elapsed() > SETTLE_LIMIT {
            return Err(format!(
                "{} members never served {ns}/{name} {key}={want}",
                pending.len()
            ));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    Ok(last)
}

// ---------------------------------------------------------------------------------------------
// Statistics and printing
// ---------------------------------------------------------------------------------------------

struct Stats {
    median: Duration,
    p90: Duration,
    min: Duration,
    max: Duration,
}

fn stats(samples: &[Duration]) -> Stats {
    let mut s = samples.to_vec();
    s.sort_unstable();
    let n = s.len();
    let median = if n.is_multiple_of(2) {
        (s[n / 2 - 1] + s[n / 2]) / 2
    } else {
        s[n / 2]
    };
    // Nearest rank.
    let p90 = s[((n * 9).div_ceil(10)).max(1) - 1];
    Stats {
        median,
        p90,
        min: s[0],
        max: s[n - 1],
    }
}

fn ms(d: Duration) -> String {
    let s = d.as_secs_f64() * 1e3;
    if s >= 100.0 {
        format!("{s:.0} ms")
    } else {
        format!("{s:.1} ms")
    }
}

fn line(label: &str, s: &Stats) -> String {
    format!(
        "{label:<10} median {:>8} | p90 {:>8} | min {:>8} | max {:>8}",
        ms(s.median),
        ms(s.p90),
        ms(s.min),
        ms(s.max)
    )
}

// ---------------------------------------------------------------------------------------------
// Latency
// ---------------------------------------------------------------------------------------------

const WATCHED: (&str, &str, &str) = ("web", "web-config", "revision");

fn member_doc(name: &str) -> Value {
    json!({
        "apiVersion": "cluster.kubernetes-fleet.io/v1",
        "kind": "MemberCluster",
        "metadata": {"name": name},
        "spec": {"identity": {"name": format!("agent-{name}"), "kind": "ServiceAccount",
            "namespace": "fleet-system", "apiGroup": ""}},
    })
}

fn crp(name: &str) -> Value {
    json!({
        "apiVersion": "placement.kubernetes-fleet.io/v1",
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": name}],
            "policy": {"placementType": "PickAll"},
        },
    })
}

fn deployment(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
            },
        },
    })
}

/// The objects of the placement whose ConfigMap changes, in namespace `ns`.
fn web_objects(ns: &str, revision: usize) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": WATCHED.1, "namespace": ns},
            "data": {WATCHED.2: revision.to_string(), "LOG_LEVEL": "info"}}),
        deployment(ns, "web"),
    ]
}

fn latency_files(members: &[String]) -> Vec<(String, String)> {
    let mut files = vec![(
        "members.yaml".to_string(),
        yaml(&members.iter().map(|m| member_doc(m)).collect::<Vec<_>>()),
    )];
    let mut web = web_objects("web", 0);
    web.push(crp("web"));
    files.push(("apps/web.yaml".into(), yaml(&web)));
    let api = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "api"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "api-config", "namespace": "api"},
            "data": {"TIMEOUT": "30s"}}),
        deployment("api", "api"),
        crp("api"),
    ];
    files.push(("apps/api.yaml".into(), yaml(&api)));
    let mut settings =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "settings"}})];
    for i in 0..3 {
        settings.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("settings-{i}"), "namespace": "settings"},
            "data": {"index": i.to_string(), "payload": "x".repeat(256)}}));
    }
    settings.push(crp("settings"));
    files.push(("apps/settings.yaml".into(), yaml(&settings)));
    files
}

fn sim_fleet(names: &[String], nodes: &str) -> gitfleet_sim::FleetFile {
    let mut text = String::from("members:\n");
    for n in names {
        text.push_str(&format!("  - name: {n}\n    nodes: [{nodes}]\n"));
    }
    gitfleet::yaml::from_str(&text).expect("fleet file")
}

/// Simulated members `names` (two 8-core nodes each) and a kubeconfig for them in `dir`.
fn start_members(
    rt: &tokio::runtime::Runtime,
    names: &[String],
    dir: &Path,
) -> Result<(gitfleet_sim::RunningFleet, PathBuf)> {
    let sim = rt
        .block_on(gitfleet_sim::start(
            sim_fleet(names, "{count: 2, cpu: '8', memory: 32Gi}"),
            gitfleet_sim::StartOptions::default(),
        ))
        .map_err(|e| e.to_string())?;
    let kubeconfig = dir.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)
        .map_err(|e| e.to_string())?;
    Ok((sim, kubeconfig))
}

fn latency(rt: &tokio::runtime::Runtime, commits: usize, size: usize) -> Result<()> {
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

/// The objects of the `web` placement at `revision`, with the Deployment's pod template
/// changed too, so every commit rolls its pods out again.
/// The goal for the median: under 100 ms on 10 members (and fewer), under 1 s on more
/// (it names 100).
fn latency_goal(members: usize) -> Duration {
    if members <= 10 {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    }
}

fn rolling_web_objects(revision: usize) -> Vec<Value> {
    let mut objects = web_objects("web", revision);
    objects[2]["spec"]["template"]["metadata"]["annotations"] =
        json!({"example.com/revision": revision.to_string()});
    objects.push(crp("web"));
    objects
}

/// Push-to-applied latency on 3 real members (the test bed: real kube-apiserver, deployment
/// controller, scheduler and kwok's nodes), with real availability: each commit changes the
/// `web` ConfigMap and the pod template of its Deployment, and the clock runs from just before
/// `git push` until the daemon reports the commit settled, i.e. every member's Deployment
/// available again as its deployment controller reports it (default RollingUpdate).
fn latency_real(commits: usize) -> Result<()> {
    let names: Vec<String> = (0..3).map(|i| format!("r-{i}")).collect();
    let mut fleet = String::from("members:\n");
    for n in &names {
        fleet.push_str(&format!(
            "  - name: {n}\n    nodes: [{{count: 2, cpu: '8', memory: 32Gi}}]\n"
        ));
    }
    let Some(testbed) = testbed::Testbed::start(&fleet) else {
        println!("push-to-applied latency on real members: skipped, no test bed (build it with `bash testbed/build.sh`, or set GITFLEET_TESTBED)");
        return Ok(());
    };
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut files = latency_files(&names);
    files.retain(|(path, _)| path != "apps/web.yaml");
    files.push(("apps/web.yaml".into(), yaml(&rolling_web_objects(0))));
    let repos = Repos::create(dir.path(), &files)?;
    let first = git(&repos.work, &["rev-parse", "HEAD"])?;
    let daemon = DaemonProcess::start(
        &repos.watched,
        testbed.kubeconfig(),
        &dir.path().join("state"),
    )?;
    let first_rollout = daemon.await_settled(&first)?;
    let mut latencies = Vec::with_capacity(commits);
    for r in 1..=commits {
        repos.write("apps/web.yaml", &yaml(&rolling_web_objects(r)))?;
        let head = repos.commit(&format!("web revision {r}"))?;
        let start = Instant::now();
        repos.push()?;
        daemon.await_settled(&head)?;
        latencies.push(start.elapsed());
    }
    drop(daemon);
    let s = stats(&latencies);
    println!(
        "push-to-applied latency on real members: 3 test-bed members (ready in {:.0} s), 3 PickAll placements (default RollingUpdate), {commits} commits each changing a ConfigMap and the pod template of a 2-replica Deployment; first rollout of the fleet {}",
        testbed.started_in.as_secs_f64(),
        ms(first_rollout)
    );
    println!("{}", line("daemon", &s));
    println!(
        "latency = from just before `git push` until the daemon's status API reports the commit settled on every placement (each member's Deployment available again, by its real deployment controller with kwok's pods), polled every {} ms.",
        POLL_INTERVAL.as_millis()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Idle
// ---------------------------------------------------------------------------------------------

fn proc_status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("/proc/{pid}/status has no {field}"))
}

/// `utime + stime` in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // Fields after the command name (which may hold spaces) start at state (field 3);
    // utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').ok_or("odd /proc/pid/stat")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (num(11), num(12)) {
        (Some(u), Some(s)) => Ok(u + s),
        _ => Err(format!("/proc/{pid}/stat: no utime/stime")),
    }
}

fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// A deployable fleet of `clusters` members (labelled by region and environment) and
/// `placements` ClusterResourcePlacements, each placing its own namespace and ConfigMap: a third
/// PickAll with label affinity, a third PickN (5 to 20 clusters), a third PickFixed (3 clusters).
/// (`gitfleet_testkit::bench::generate` is made for the scheduler: its ResourcePlacements need namespaces
/// no placement creates, so its fleet never settles when actually rolled out.)
fn idle_files(placements: usize, clusters: usize) -> (Vec<String>, Vec<(String, String)>) {
    const REGIONS: [&str; 4] = ["eastus", "westus2", "westeurope", "japaneast"];
    const ENVS: [&str; 3] = ["staging", "canary", "production"];
    let names: Vec<String> = (0..clusters).map(|i| format!("m-{i:03}")).collect();
    let members: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut m = member_doc(n);
            m["metadata"]["labels"] =
                json!({"region": REGIONS[i % REGIONS.len()], "environment": ENVS[i % ENVS.len()]});
            m
        })
        .collect();
    let mut files = vec![("members.yaml".to_string(), yaml(&members))];
    for p in 0..placements {
        let ns = format!("app-{p:03}");
        let policy = match p % 3 {
            0 => json!({"placementType": "PickAll", "affinity": {"clusterAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [
                    {"labelSelector": {"matchLabels": {"region": REGIONS[p % REGIONS.len()]}}}]}}}}),
            1 => json!({"placementType": "PickN", "numberOfClusters": 5 + p % 16}),
            _ => json!({"placementType": "PickFixed", "clusterNames":
                (0..3).map(|k| names[(p * 7 + k * 31) % clusters].clone()).collect::<Vec<_>>()}),
        };
        let docs = vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "app-config", "namespace": ns},
                "data": {"REPLICAS": (1 + p % 5).to_string(), "LOG_LEVEL": "info"}}),
            json!({
                "apiVersion": "placement.kubernetes-fleet.io/v1",
                "kind": "ClusterResourcePlacement",
                "metadata": {"name": ns},
                "spec": {
                    "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": ns}],
                    "policy": policy,
                },
            }),
        ];
        files.push((format!("placements/{ns}.yaml"), yaml(&docs)));
    }
    (names, files)
}

fn idle(rt: &tokio::runtime::Runtime, window: Duration) -> Result<()> {
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

// ---------------------------------------------------------------------------------------------
// Faulty members
// ---------------------------------------------------------------------------------------------

const FAULT_HEALTHY: usize = 6;
/// The faulty members and their faults, in the simulator's terms.
const FAULTY: [(&str, &str); 4] = [
    ("down", r#"{"down": true}"#),
    ("errors", r#"{"errorRate": 1.0, "errorCodes": [500]}"#),
    ("garbage", r#"{"garbage": true}"#),
    ("slow", r#"{"latencyMs": 3000}"#),
];

/// A PickAll placement whose rollout budget has room for every member at once, so that the
/// faulty members (unavailable) never hold the healthy ones back by the budget: what is
/// measured is isolation.
fn roomy_crp(name: &str) -> Value {
    let mut p = crp(name);
    p["spec"]["strategy"] = json!({"type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "100%", "maxSurge": "100%"}});
    p
}

/// `commits` commits, each timed from just before `git push` until every member of `members`
/// serves it; one after the other, without waiting for the rest of the fleet.
fn healthy_latencies(
    repos: &Repos,
    members: &[MemberClient],
    from: usize,
    commits: usize,
) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(commits);
    for r in from..from + commits {
        let mut web = web_objects("web", r);
        web.push(roomy_crp("web"));
        repos.write("apps/web.yaml", &yaml(&web))?;
        repos.commit(&format!("web revision {r}"))?;
        let start = Instant::now();
        repos.push()?;
        out.push(await_value(members, WATCHED, &r.to_string(), start)?);
    }
    Ok(out)
}

/// Push-to-applied on the healthy members of one fleet and one daemon, first with no fault,
/// then while one member is down, one answers 500, one answers garbage and one takes 3 s per
/// request; reported as the ratio of the medians (goal: under 2).
fn faults(rt: &tokio::runtime::Runtime, commits: usize) -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let healthy: Vec<String> = (0..FAULT_HEALTHY).map(|i| format!("ok-{i}")).collect();
    let mut names = healthy.clone();
    names.extend(FAULTY.iter().map(|(n, _)| n.to_string()));
    let (sim, kubeconfig) = start_members(rt, &names, dir.path())?;
    let members: Vec<MemberClient> = MemberClient::of(&sim)
        .into_iter()
        .filter(|m| healthy.contains(&m.name))
        .collect();
    let mut web = web_objects("web", 0);
    web.push(roomy_crp("web"));
    let files = vec![
        (
            "members.yaml".to_string(),
            yaml(&names.iter().map(|m| member_doc(m)).collect::<Vec<_>>()),
        ),
        ("apps/web.yaml".to_string(), yaml(&web)),
    ];
    let repos = Repos::create(dir.path(), &files)?;
    let first = git(&repos.work, &["rev-parse", "HEAD"])?;
    let daemon = DaemonProcess::start(&repos.watched, &kubeconfig, &dir.path().join("state"))?;
    daemon.await_settled(&first)?;

    let clean = healthy_latencies(&repos, &members, 1, commits)?;
    for (member, faults) in FAULTY {
        let update: gitfleet_sim::fleet_file::FaultsUpdate =
            serde_json::from_str(faults).expect("valid faults");
        sim.set_faults(member, &update).map_err(|e| e.to_string())?;
    }
    let faulty = healthy_latencies(&repos, &members, 1 + commits, commits)?;
    drop(daemon);
    rt.block_on(sim.shutdown());

    let (clean, faulty) = (stats(&clean), stats(&faulty));
    let ratio = faulty.median.as_secs_f64() / clean.median.as_secs_f64().max(1e-9);
    println!(
        "faulty members: {FAULT_HEALTHY} healthy members and 4 faulty ones (down, 500 on every request, garbage on every request, 3 s per request), 1 PickAll placement (maxUnavailable 100 %), {commits} commits without faults then {commits} with, pushed one after the other; latency to the healthy members"
    );
    println!("{}", line("no fault", &clean));
    println!("{}", line("faults", &faulty));
    println!(
        "{:<10} {ratio:.2}x (median / median); goal: under 2x: {}",
        "ratio",
        if ratio < 2.0 { "met" } else { "NOT met" }
    );
    println!(
        "latency = from just before `git push` until every healthy member serves the new value, polled every {} ms; the next commit is pushed as soon as the healthy members serve the last one (the faulty ones never settle).",
        POLL_INTERVAL.as_millis()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Fleet scale
// ---------------------------------------------------------------------------------------------

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

/// The scale fleet: [`idle_files`] for nine tenths of the placements, and one tenth
/// PickFixed placements that all select the `shared` namespace (and so its ConfigMap), each
/// for its own slice of the members (so that no two put the same object on one member, which
/// push refuses: "already placed by another placement"). Returns the member names, the files
/// and the number of shared placements.
fn scale_files(placements: usize, clusters: usize) -> (Vec<String>, Vec<(String, String)>, usize) {
    let shared = placements / 10;
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

/// What one phase of the scale benchmark cost the daemon and the members.
struct Phase {
    name: &'static str,
    wall: Duration,
    cpu: f64,
    /// VmHWM over the phase (reset at its start), KiB.
    peak: u64,
    /// VmRSS at its end, KiB.
    rss: u64,
    reads: u64,
    writes: u64,
    reconciles: u64,
}

/// Counters at the start of a phase.
struct PhaseStart {
    at: Instant,
    ticks: u64,
    requests: (u64, u64),
    reconciles: u64,
}

/// The simulated cluster that hosts the daemon's state with `GITFLEET_DAEMON_STATE=kubernetes`
/// (not a member: the fleet does not declare it).
const HOSTING: &str = "hosting";

/// Requests the members received, `(reads, writes)`: the hosting cluster's (state objects,
/// Lease) are not the members'.
fn member_requests(sim: &gitfleet_sim::RunningFleet) -> (u64, u64) {
    let (reads, writes) = sim.request_counts();
    let (hr, hw) = sim.member_request_counts(HOSTING).unwrap_or((0, 0));
    (reads - hr, writes - hw)
}

impl PhaseStart {
    /// Resets the daemon's peak RSS (`/proc/<pid>/clear_refs`, 5) so that VmHWM at the end is
    /// the phase's peak.
    fn now(daemon: &DaemonProcess, sim: &gitfleet_sim::RunningFleet) -> Result<PhaseStart> {
        let pid = daemon.pid();
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
            .map_err(|e| format!("/proc/{pid}/clear_refs: {e}"))?;
        // Read first: the scrape of `/metrics` it takes (thousands of series at 1,000
        // placements) is the benchmark's work, not the phase's.
        let reconciles = daemon.reconciles()?.0;
        Ok(PhaseStart {
            at: Instant::now(),
            ticks: cpu_ticks(pid)?,
            requests: member_requests(sim),
            reconciles,
        })
    }

    fn end(
        self,
        name: &'static str,
        daemon: &DaemonProcess,
        sim: &gitfleet_sim::RunningFleet,
        tck: u64,
    ) -> Result<Phase> {
        let wall = self.at.elapsed();
        let pid = daemon.pid();
        let ticks = cpu_ticks(pid)? - self.ticks;
        let (reads, writes) = member_requests(sim);
        Ok(Phase {
            name,
            wall,
            cpu: ticks as f64 / tck as f64,
            peak: proc_status_kib(pid, "VmHWM:")?,
            rss: proc_status_kib(pid, "VmRSS:")?,
            reads: reads - self.requests.0,
            writes: writes - self.requests.1,
            reconciles: daemon.reconciles()?.0 - self.reconciles,
        })
    }
}

impl DaemonProcess {
    /// Polls the status API (every `every`) until the daemon serves `commit`, every placement
    /// is settled and no cluster waits for a re-check (what a start-up or resync re-applies):
    /// everything the daemon knows of has been confirmed on its member.
    fn await_confirmed(&self, commit: &str, every: Duration) -> Result<Duration> {
        let start = Instant::now();
        loop {
            // `?unready` leaves out every placement with nothing applying, removing or waiting
            // and every cluster available with no re-check due; `limit=0` lists none of the
            // others and counts them, so polling costs the measured daemon little even while
            // every placement is unready. Before its first reconcile (`/readyz` fails until
            // then) a daemon lists no placement at all.
            const UNREADY: &str = "/api/v1/placements?unready&limit=0";
            let done = self.get("/readyz").is_ok() && {
                let doc: Value = serde_json::from_str(&self.get(UNREADY)?)
                    .map_err(|e| format!("{UNREADY}: {e}"))?;
                doc["serving"] == commit && doc["matched"] == 0
            };
            if done {
                return Ok(start.elapsed());
            }
            if start.elapsed() > SCALE_LIMIT {
                return Err(format!(
                    "the daemon did not settle on {commit} within {SCALE_LIMIT:?}; its log ends:\n{}",
                    self.log.lock().unwrap().join("\n")
                ));
            }
            std::thread::sleep(every);
        }
    }

    /// Stops the daemon with SIGTERM (it saves its state after every reconcile and on the way
    /// out) and waits for it.
    fn stop(mut self) -> Result<()> {
        let pid = self.pid().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .map_err(|e| format!("kill -TERM {pid}: {e}"))?;
        self.child.wait().map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// A bound on each phase of the scale benchmark.
const SCALE_LIMIT: Duration = Duration::from_secs(1800);
/// How often the scale benchmark reads the status API (a count of the unready placements:
/// reading it costs the daemon CPU that the phase's figure includes).
const SCALE_STATUS_POLL: Duration = Duration::from_millis(500);

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The daemon at fleet scale: `placements` placements over `members` simulated
/// members (one simulator in this process), five phases, each measured on the daemon process:
/// the first commit until everything is applied and available; idle for one default poll; a
/// commit that changes one placement's ConfigMap; a commit that changes the ConfigMap a tenth
/// of the placements select; a restart on the same state directory, until every binding is
/// confirmed on its member.
fn scale(rt: &tokio::runtime::Runtime) -> Result<()> {
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
    // What one read of the whole placements document (as `gitfleet status` reads it) costs
    // the daemon: the phases poll `?unready` instead, which leaves the settled ones out. Read
    // after the phases: the allocator returns the memory of 5 reads of tens of MiB to the
    // system after a delay, which landed in the one-placement commit's CPU when they were
    // made just before it.
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

// ---------------------------------------------------------------------------------------------
// Kustomize sources
// ---------------------------------------------------------------------------------------------

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

/// The CPU time of `pid`'s children it has waited for (`cutime + cstime`), in clock ticks:
/// the kustomize processes the daemon ran.
fn children_cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    let rest = &stat[stat.rfind(')').ok_or("odd /proc/pid/stat")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (num(13), num(14)) {
        (Some(u), Some(s)) => Ok(u + s),
        _ => Err(format!("/proc/{pid}/stat: no cutime/cstime")),
    }
}

/// A kustomize that logs its first argument (`build`, `version`) to `log` before running the
/// real one: every process the daemon starts is counted, whether or not its renders metric
/// counts it.
fn counting_kustomize(real: &Path, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    use std::os::unix::fs::PermissionsExt as _;
    let log = dir.join("kustomize-runs");
    let script = dir.join("counting-kustomize");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
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
fn kustomize(rt: &tokio::runtime::Runtime) -> Result<()> {
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
    let parts: [(&str, &dyn Fn() -> Result<()>); 7] = [
        ("latency", &|| {
            latency_members()
                .into_iter()
                .try_for_each(|n| latency(&rt, commits, n))
        }),
        ("faults", &|| faults(&rt, commits)),
        ("idle", &|| idle(&rt, window)),
        ("waiting", &|| waiting::waiting(&rt, window)),
        ("real latency", &|| latency_real(real_commits)),
        ("scale", &|| scale(&rt)),
        ("kustomize", &|| kustomize(&rt)),
    ];
    // `GITFLEET_DAEMON_PARTS=faults,idle` runs only those parts.
    let only = std::env::var("GITFLEET_DAEMON_PARTS").unwrap_or_default();
    // The scale and kustomize parts take minutes: only when named.
    let wanted = |name: &str| {
        (only.is_empty() && !["scale", "kustomize"].contains(&name))
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
