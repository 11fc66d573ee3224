//! The staged update run benchmark: `cargo bench --bench staged`.
//!
//! KubeFleet's published figure ("Performance and Scalability Report – Q1
//! 2026"): a staged rollout over 100 clusters in 3 stages of 20/30/50 clusters, 50 %
//! concurrency, no gates, p90 1m36s. The same here: 100 simulated members (served in this
//! process by `gitfleet_sim`), a PickAll placement with `strategy.type: External` (a namespace
//! and a 1 KB ConfigMap, as KubeFleet's test places), a three-stage strategy with
//! `maxConcurrency: 50%` and no tasks, and the real `gitfleet run` as a child process following
//! a bare repository. Each sample commits a new `ClusterStagedUpdateRun` (and a new ConfigMap
//! value), starts the clock, pushes, and polls the status API every 10 ms until the run is
//! `Succeeded`; then checks that every member serves the new value. The clock includes `git
//! push` and the daemon noticing it.
//!
//! Baseline, in the same run: the same objects applied to the same 100 members by a plain
//! client (server-side apply, members one after another, as a stage-by-stage script would),
//! so the figure is also a ratio against work that must be done anyway.
//! `GITFLEET_STAGED_BENCH=N` sets the number of runs (default 5).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const MEMBERS: usize = 100;
const POLL_INTERVAL: Duration = Duration::from_millis(10);
const LIMIT: Duration = Duration::from_secs(600);

type Result<T> = std::result::Result<T, String>;

use gitfleet_testkit::bench::git::git;

fn write(dir: &Path, path: &str, text: &str) -> Result<()> {
    let file = dir.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).map_err(|e| e.to_string())?;
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))
}

fn yaml(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| gitfleet::yaml::to_string(d).expect("JSON values serialise as YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

fn names() -> Vec<String> {
    (0..MEMBERS).map(|i| format!("m-{i:03}")).collect()
}

/// Stage of member `i`: 20 staging, 30 canary, 50 production.
fn stage_of(i: usize) -> &'static str {
    match i {
        0..20 => "staging",
        20..50 => "canary",
        _ => "production",
    }
}

fn members_yaml() -> String {
    let docs: Vec<Value> = names()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "apiVersion": "cluster.kubernetes-fleet.io/v1beta1",
                "kind": "MemberCluster",
                "metadata": {"name": n, "labels": {"stage": stage_of(i)}},
                "spec": {"identity": {"name": "a", "kind": "ServiceAccount", "namespace": "fleet-system", "apiGroup": ""}}
            })
        })
        .collect();
    yaml(&docs)
}

fn app_objects(version: usize) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "payload", "namespace": "bench"},
               "data": {"version": version.to_string(), "filler": "x".repeat(1000)}}),
    ]
}

fn app_yaml(version: usize) -> String {
    let mut docs = app_objects(version);
    docs.push(json!({
        "apiVersion": "placement.kubernetes-fleet.io/v1",
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": "bench"},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": "bench"}],
            "policy": {"placementType": "PickAll"},
            "strategy": {"type": "External"}
        }
    }));
    let stages: Vec<Value> = ["staging", "canary", "production"]
        .iter()
        .map(|s| json!({"name": s, "labelSelector": {"matchLabels": {"stage": s}}, "maxConcurrency": "50%"}))
        .collect();
    docs.push(json!({
        "apiVersion": "placement.kubernetes-fleet.io/v1",
        "kind": "ClusterStagedUpdateStrategy",
        "metadata": {"name": "three"},
        "spec": {"stages": stages}
    }));
    yaml(&docs)
}

fn run_yaml(n: usize) -> String {
    yaml(&[json!({
        "apiVersion": "placement.kubernetes-fleet.io/v1",
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": format!("run-{n}")},
        "spec": {"placementName": "bench", "stagedRolloutStrategyName": "three", "state": "Run"}
    })])
}

struct Daemon {
    child: Child,
    addr: String,
    agent: ureq::Agent,
}

impl Daemon {
    fn start(repo: &Path, kubeconfig: &Path, state: &Path) -> Result<Daemon> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .arg("run")
            .arg("--repo")
            .arg(repo)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--state-dir")
            .arg(state)
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .env("GITFLEET_LOG", "warn,gitfleet=info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start gitfleet run: {e}"))?;
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                let v: Value = serde_json::from_str(&line).unwrap_or_default();
                if let Some(a) = v["fields"]["listen"].as_str() {
                    let _ = tx.send(a.to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| "gitfleet run did not log its address".to_string())?;
        Ok(Daemon {
            child,
            addr: format!("http://{addr}"),
            agent: ureq::Agent::new_with_defaults(),
        })
    }

    fn run_state(&self, name: &str) -> Result<(String, String)> {
        let text = self
            .agent
            .get(&format!("{}/api/v1/updateruns", self.addr))
            .call()
            .and_then(|mut r| r.body_mut().read_to_string())
            .map_err(|e| format!("GET /api/v1/updateruns: {e}"))?;
        let doc: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let run = doc["updateRuns"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == name))
            .cloned()
            .unwrap_or_default();
        Ok((
            run["succeeded"].as_str().unwrap_or_default().to_string(),
            run["waitingFor"].as_str().unwrap_or_default().to_string(),
        ))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Member {
    server: String,
    token: String,
    agent: ureq::Agent,
}

impl Member {
    fn get_version(&self) -> Result<Option<String>> {
        let url = format!("{}/api/v1/namespaces/bench/configmaps/payload", self.server);
        match self
            .agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
        {
            Ok(mut r) => {
                let v: Value = serde_json::from_str(
                    &r.body_mut().read_to_string().map_err(|e| e.to_string())?,
                )
                .map_err(|e| e.to_string())?;
                Ok(v["data"]["version"].as_str().map(str::to_string))
            }
            Err(ureq::Error::StatusCode(404)) => Ok(None),
            Err(e) => Err(format!("GET {url}: {e}")),
        }
    }

    /// Server-side apply of one of the app's objects, moved to namespace `bench-baseline`.
    fn apply(&self, obj: &Value) -> Result<()> {
        let mut obj = obj.clone();
        let path = if obj["kind"] == "Namespace" {
            obj["metadata"]["name"] = json!("bench-baseline");
            "/api/v1/namespaces/bench-baseline".to_string()
        } else {
            obj["metadata"]["namespace"] = json!("bench-baseline");
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            format!("/api/v1/namespaces/bench-baseline/configmaps/{name}")
        };
        self.agent
            .patch(&format!(
                "{}{path}?fieldManager=bench-baseline&force=true",
                self.server
            ))
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("Content-Type", "application/apply-patch+yaml")
            .send(obj.to_string())
            .map(drop)
            .map_err(|e| format!("PATCH {path}: {e}"))
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn bench(rt: &tokio::runtime::Runtime, runs: usize) -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut fleet = String::from("members:\n");
    for n in names() {
        fleet.push_str(&format!(
            "  - name: {n}\n    nodes: [{{count: 2, cpu: '8', memory: 32Gi}}]\n"
        ));
    }
    let sim = rt
        .block_on(gitfleet_sim::start(
            gitfleet::yaml::from_str(&fleet).map_err(|e| e.to_string())?,
            gitfleet_sim::StartOptions::default(),
        ))
        .map_err(|e| e.to_string())?;
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)
        .map_err(|e| e.to_string())?;
    let members: Vec<Member> = sim
        .members()
        .iter()
        .map(|m| Member {
            server: m.server.clone(),
            token: m.token.clone(),
            agent: ureq::Agent::new_with_defaults(),
        })
        .collect();

    // Baseline: every member gets the objects, one member after another.
    let start = Instant::now();
    for m in &members {
        for obj in app_objects(0) {
            m.apply(&obj)?;
        }
    }
    let baseline = start.elapsed();

    let watched = dir.path().join("watched.git");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&watched).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    git(&watched, &["init", "-q", "--bare", "-b", "main"])?;
    git(&work, &["init", "-q", "-b", "main"])?;
    git(
        &work,
        &["remote", "add", "origin", watched.to_str().unwrap()],
    )?;
    write(&work, "members.yaml", &members_yaml())?;
    write(&work, "app.yaml", &app_yaml(0))?;
    git(&work, &["add", "-A"])?;
    git(&work, &["commit", "-q", "-m", "fleet"])?;
    git(&work, &["push", "-q", "origin", "main"])?;
    let daemon = Daemon::start(&watched, &kubeconfig, &dir.path().join("state"))?;

    let mut samples = Vec::new();
    for n in 1..=runs {
        write(&work, "app.yaml", &app_yaml(n))?;
        write(&work, "run.yaml", &run_yaml(n))?;
        git(&work, &["add", "-A"])?;
        git(&work, &["commit", "-q", "-m", &format!("run {n}")])?;
        let start = Instant::now();
        git(&work, &["push", "-q", "origin", "main"])?;
        let name = format!("run-{n}");
        loop {
            let (succeeded, waiting) = daemon.run_state(&name)?;
            if succeeded == "True" {
                break;
            }
            if succeeded == "False" {
                return Err(format!("{name} failed"));
            }
            if start.elapsed() > LIMIT {
                return Err(format!(
                    "{name} did not succeed within {LIMIT:?} (waiting for {waiting})"
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        let took = start.elapsed();
        for (i, m) in members.iter().enumerate() {
            let v = m.get_version()?;
            if v.as_deref() != Some(n.to_string().as_str()) {
                return Err(format!("member {i} serves {v:?} after {name} succeeded"));
            }
        }
        println!("{name}: commit to Succeeded {}", secs(took));
        samples.push(took);
    }
    samples.sort_unstable();
    let p90 = samples[((samples.len() * 9).div_ceil(10)).max(1) - 1];
    let median = samples[samples.len() / 2];
    println!(
        "staged run, 100 members, 3 stages 20/30/50, maxConcurrency 50%, no gates: median {} | p90 {} | min {} | max {} ({} runs)",
        secs(median),
        secs(p90),
        secs(samples[0]),
        secs(samples[samples.len() - 1]),
        samples.len()
    );
    println!(
        "baseline (the same objects applied to the same members, one after another): {} -> p90 / baseline = {:.1}x",
        secs(baseline),
        p90.as_secs_f64() / baseline.as_secs_f64().max(1e-9)
    );
    println!("KubeFleet, published (1,000-cluster hub, same run shape): p90 96 s (min 91 s)");
    Ok(())
}

fn main() -> ExitCode {
    let runs = std::env::var("GITFLEET_STAGED_BENCH")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(5usize)
        .max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match bench(&rt, runs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("staged: {e}");
            ExitCode::FAILURE
        }
    }
}
