//! What the parts of the daemon benchmark share: the repository the daemon follows, the daemon
//! as a child process, the members as any client reaches them, the fleets' documents, readings
//! of a process's CPU and memory from `/proc`, and the statistics the parts print.

use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(super) type Result<T> = std::result::Result<T, String>;

pub(super) const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// A bound on every wait, so a broken daemon fails the benchmark instead of hanging it.
pub(super) const SETTLE_LIMIT: Duration = Duration::from_secs(300);
/// `gitfleet run`'s default `--poll`.
pub(super) const DEFAULT_POLL: Duration = Duration::from_secs(30);
/// A bound on each phase of the scale benchmark.
pub(super) const SCALE_LIMIT: Duration = Duration::from_secs(1800);
/// How often the scale benchmark reads the status API (a count of the unready placements:
/// reading it costs the daemon CPU that the phase's figure includes).
pub(super) const SCALE_STATUS_POLL: Duration = Duration::from_millis(500);

// ---------------------------------------------------------------------------------------------
// git
// ---------------------------------------------------------------------------------------------

pub(super) use gitfleet_testkit::bench::git::git;

/// A bare repository the daemon follows and a working clone that pushes into it.
pub(super) struct Repos {
    pub(super) watched: PathBuf,
    pub(super) work: PathBuf,
}

impl Repos {
    /// Writes `files` (path, text) into a new clone, commits and pushes them.
    pub(super) fn create(dir: &Path, files: &[(String, String)]) -> Result<Repos> {
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

    pub(super) fn write(&self, path: &str, text: &str) -> Result<()> {
        let file = self.work.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))
    }

    pub(super) fn commit(&self, message: &str) -> Result<String> {
        git(&self.work, &["commit", "-q", "-am", message])?;
        git(&self.work, &["rev-parse", "HEAD"])
    }

    pub(super) fn push(&self) -> Result<()> {
        git(&self.work, &["push", "-q", "origin", "main"]).map(drop)
    }
}

pub(super) fn yaml(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| gitfleet::yaml::to_string(d).expect("JSON values serialise as YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

// ---------------------------------------------------------------------------------------------
// The daemon as a child process
// ---------------------------------------------------------------------------------------------

pub(super) struct DaemonProcess {
    child: Child,
    pub(super) addr: String,
    agent: ureq::Agent,
    /// The last lines of its log, for error messages.
    pub(super) log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// How many lines it has logged.
    lines: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl DaemonProcess {
    pub(super) fn start(repo: &Path, kubeconfig: &Path, state: &Path) -> Result<DaemonProcess> {
        let state = [OsString::from("--state-dir"), state.into()];
        DaemonProcess::start_with(repo, kubeconfig, &state)
    }

    /// With `state`: the flags that say where the daemon keeps its state.
    pub(super) fn start_with(
        repo: &Path,
        kubeconfig: &Path,
        state: &[OsString],
    ) -> Result<DaemonProcess> {
        // `GITFLEET_DAEMON_BENCH_WRAP="heaptrack -o /tmp/profile"` runs each daemon under that
        // command (a profiler); the measured process is then the wrapper's child.
        let wrap = std::env::var("GITFLEET_DAEMON_BENCH_WRAP").unwrap_or_default();
        let mut wrap = wrap.split_whitespace();
        let mut child = match wrap.next() {
            Some(program) => {
                let mut c = Command::new(program);
                c.args(wrap).arg(env!("CARGO_BIN_EXE_gitfleet"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_gitfleet")),
        };
        let mut child = child
            .arg("run")
            .arg("--repo")
            .arg(repo)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(state)
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            // `GITFLEET_DAEMON_BENCH_FILTER="info,gitfleet::daemon::timing=debug"` adds the
            // reconciles' timings; `GITFLEET_DAEMON_BENCH_LOGFILE=F` keeps each daemon's whole
            // log in `F.<pid>`.
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
            let pid = child.id();
            let mut keep = std::env::var_os("GITFLEET_DAEMON_BENCH_LOGFILE").and_then(|f| {
                let mut f = f;
                f.push(format!(".{pid}"));
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

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn lines(&self) -> usize {
        self.lines.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) fn get(&self, path: &str) -> Result<String> {
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
    pub(super) fn settled_on(&self, commit: &str) -> Result<bool> {
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

    pub(super) fn await_settled(&self, commit: &str) -> Result<Duration> {
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
    pub(super) fn counter_total(&self, name: &str) -> Result<f64> {
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
    pub(super) fn reconciles(&self) -> Result<(u64, f64)> {
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

    /// Polls the status API (every `every`) until the daemon serves `commit`, every placement
    /// is settled and no cluster waits for a re-check (what a start-up or resync re-applies):
    /// everything the daemon knows of has been confirmed on its member.
    pub(super) fn await_confirmed(&self, commit: &str, every: Duration) -> Result<Duration> {
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
    pub(super) fn stop(mut self) -> Result<()> {
        let pid = self.pid().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .map_err(|e| format!("kill -TERM {pid}: {e}"))?;
        self.child.wait().map_err(|e| e.to_string())?;
        Ok(())
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

pub(super) struct MemberClient {
    pub(super) name: String,
    server: String,
    token: String,
    agent: ureq::Agent,
}

impl MemberClient {
    pub(super) fn of(sim: &gitfleet_sim::RunningFleet) -> Vec<MemberClient> {
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

    pub(super) fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// `data[key]` of a ConfigMap, `None` when it does not exist.
    pub(super) fn config_value(&self, ns: &str, name: &str, key: &str) -> Result<Option<String>> {
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
    pub(super) fn apply(&self, obj: &Value) -> Result<()> {
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
pub(super) fn await_value(
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

pub(super) struct Stats {
    pub(super) median: Duration,
    pub(super) p90: Duration,
    pub(super) min: Duration,
    pub(super) max: Duration,
}

pub(super) fn stats(samples: &[Duration]) -> Stats {
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

pub(super) fn ms(d: Duration) -> String {
    let s = d.as_secs_f64() * 1e3;
    if s >= 100.0 {
        format!("{s:.0} ms")
    } else {
        format!("{s:.1} ms")
    }
}

pub(super) fn line(label: &str, s: &Stats) -> String {
    format!(
        "{label:<10} median {:>8} | p90 {:>8} | min {:>8} | max {:>8}",
        ms(s.median),
        ms(s.p90),
        ms(s.min),
        ms(s.max)
    )
}

// ---------------------------------------------------------------------------------------------
// The fleets
// ---------------------------------------------------------------------------------------------

pub(super) const WATCHED: (&str, &str, &str) = ("web", "web-config", "revision");

pub(super) fn member_doc(name: &str) -> Value {
    json!({
        "apiVersion": "cluster.kubernetes-fleet.io/v1",
        "kind": "MemberCluster",
        "metadata": {"name": name},
        "spec": {"identity": {"name": format!("agent-{name}"), "kind": "ServiceAccount",
            "namespace": "fleet-system", "apiGroup": ""}},
    })
}

pub(super) fn crp(name: &str) -> Value {
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

pub(super) fn deployment(ns: &str, name: &str) -> Value {
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
pub(super) fn web_objects(ns: &str, revision: usize) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": WATCHED.1, "namespace": ns},
            "data": {WATCHED.2: revision.to_string(), "LOG_LEVEL": "info"}}),
        deployment(ns, "web"),
    ]
}

pub(super) fn latency_files(members: &[String]) -> Vec<(String, String)> {
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

pub(super) fn sim_fleet(names: &[String], nodes: &str) -> gitfleet_sim::FleetFile {
    gitfleet::yaml::from_str(&sim_fleet_text(names, nodes)).expect("fleet file")
}

/// The fleet file of members `names`, each with `nodes` (a fleet file's node groups).
pub(super) fn sim_fleet_text(names: &[String], nodes: &str) -> String {
    let mut text = String::from("members:\n");
    for n in names {
        text.push_str(&format!("  - name: {n}\n    nodes: [{nodes}]\n"));
    }
    text
}

/// The nodes of the benchmarks' members: two of 8 cores.
pub(super) const BENCH_NODES: &str = "{count: 2, cpu: '8', memory: 32Gi}";

/// Simulated members `names` (two 8-core nodes each) and a kubeconfig for them in `dir`.
pub(super) fn start_members(
    rt: &tokio::runtime::Runtime,
    names: &[String],
    dir: &Path,
) -> Result<(gitfleet_sim::RunningFleet, PathBuf)> {
    start_fleet(rt, sim_fleet(names, BENCH_NODES), dir)
}

/// Simulated members as `fleet` says, and a kubeconfig for them in `dir`.
pub(super) fn start_fleet(
    rt: &tokio::runtime::Runtime,
    fleet: gitfleet_sim::FleetFile,
    dir: &Path,
) -> Result<(gitfleet_sim::RunningFleet, PathBuf)> {
    let sim = rt
        .block_on(gitfleet_sim::start(
            fleet,
            gitfleet_sim::StartOptions::default(),
        ))
        .map_err(|e| e.to_string())?;
    let kubeconfig = dir.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)
        .map_err(|e| e.to_string())?;
    Ok((sim, kubeconfig))
}

/// A deployable fleet of `clusters` members (labelled by region and environment) and
/// `placements` ClusterResourcePlacements, each placing its own namespace and ConfigMap: a third
/// PickAll with label affinity, a third PickN (5 to 20 clusters), a third PickFixed (3 clusters).
/// (`gitfleet_testkit::bench::generate` is made for the scheduler: its ResourcePlacements need namespaces
/// no placement creates, so its fleet never settles when actually rolled out.)
pub(super) fn idle_files(
    placements: usize,
    clusters: usize,
) -> (Vec<String>, Vec<(String, String)>) {
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

// ---------------------------------------------------------------------------------------------
// A process's CPU and memory, from /proc
// ---------------------------------------------------------------------------------------------

pub(super) fn proc_status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("/proc/{pid}/status has no {field}"))
}

/// `utime + stime` in clock ticks.
pub(super) fn cpu_ticks(pid: u32) -> Result<u64> {
    stat_sum(pid, (11, 12), "utime/stime")
}

/// The CPU time of `pid`'s children it has waited for (`cutime + cstime`), in clock ticks:
/// the kustomize processes the daemon ran.
pub(super) fn children_cpu_ticks(pid: u32) -> Result<u64> {
    stat_sum(pid, (13, 14), "cutime/cstime")
}

/// The sum of two fields of `/proc/<pid>/stat`, counted from its state field as 0.
fn stat_sum(pid: u32, (a, b): (usize, usize), names: &str) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // Fields after the command name (which may hold spaces) start at state (field 3);
    // utime, stime, cutime and cstime are fields 14 to 17.
    let rest = &stat[stat.rfind(')').ok_or("odd /proc/pid/stat")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (num(a), num(b)) {
        (Some(u), Some(s)) => Ok(u + s),
        _ => Err(format!("/proc/{pid}/stat: no {names}")),
    }
}

pub(super) fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

// ---------------------------------------------------------------------------------------------
// Phases (the scale and kustomize parts)
// ---------------------------------------------------------------------------------------------

/// What one phase of the scale benchmark cost the daemon and the members.
pub(super) struct Phase {
    pub(super) name: &'static str,
    pub(super) wall: Duration,
    pub(super) cpu: f64,
    /// VmHWM over the phase (reset at its start), KiB.
    pub(super) peak: u64,
    /// VmRSS at its end, KiB.
    pub(super) rss: u64,
    pub(super) reads: u64,
    pub(super) writes: u64,
    pub(super) reconciles: u64,
}

/// Counters at the start of a phase.
pub(super) struct PhaseStart {
    pub(super) at: Instant,
    pub(super) ticks: u64,
    pub(super) requests: (u64, u64),
    pub(super) reconciles: u64,
}

/// The simulated cluster that hosts the daemon's state with `GITFLEET_DAEMON_STATE=kubernetes`
/// (not a member: the fleet does not declare it).
pub(super) const HOSTING: &str = "hosting";

/// Requests the members received, `(reads, writes)`: the hosting cluster's (state objects,
/// Lease) are not the members'.
pub(super) fn member_requests(sim: &gitfleet_sim::RunningFleet) -> (u64, u64) {
    sim.request_counts_except(Some(HOSTING))
}

impl PhaseStart {
    /// Resets the daemon's peak RSS (`/proc/<pid>/clear_refs`, 5) so that VmHWM at the end is
    /// the phase's peak.
    pub(super) fn now(
        daemon: &DaemonProcess,
        sim: &gitfleet_sim::RunningFleet,
    ) -> Result<PhaseStart> {
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

    pub(super) fn end(
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
