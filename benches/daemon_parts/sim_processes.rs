//! Simulated members for fleets one process cannot serve: the simulator holds a listening
//! socket per member and its clients' connections (over plain HTTP/1.1, one per watched kind
//! and one for requests), and a process may open only so many files (`ulimit -n`). Past what
//! one process holds, the members are served by `gitfleet sim` child processes, the hosting
//! cluster by one of its own; what a phase counts is then read from their admin endpoints.

use super::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// Changes each member keeps for watches to resume from, unless
/// `GITFLEET_DAEMON_SIM_WATCH_HISTORY` says: the simulator's default, 20,000, keeps every
/// version of every object a fleet-scale rollout writes (gigabytes over thousands of members),
/// more than a watch that reconnects at once needs.
const WATCH_HISTORY: usize = 1_000;

fn watch_history() -> usize {
    std::env::var("GITFLEET_DAEMON_SIM_WATCH_HISTORY")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .map_or(WATCH_HISTORY, |n| n.max(1))
}

/// Open files a simulated member costs its simulator at most: its listener and its owners'
/// connections (seen: about four a member at rest, and up to six while shards move: an old
/// owner's idle connections stay open until they time out).
const FILES_PER_MEMBER: u64 = 8;

/// The members of a benchmark: served from this process, or by child processes.
pub(super) enum Members {
    InProcess(gitfleet_sim::RunningFleet),
    Processes(Vec<SimProcess>),
}

impl Members {
    /// Serves `names` (two 8-core nodes each, [`watch_history`] changes kept) and writes one
    /// kubeconfig for all of them in `dir`: in this process while its open-files limit allows,
    /// otherwise in child processes of at most that many members each, `HOSTING` (if named)
    /// alone in one.
    pub(super) fn start(
        rt: &tokio::runtime::Runtime,
        names: &[String],
        dir: &Path,
    ) -> Result<(Members, PathBuf)> {
        let per_process = members_per_process()?;
        if names.len() <= per_process {
            let fleet = gitfleet::yaml::from_str(&fleet_text(names)).map_err(|e| e.to_string())?;
            let (sim, kubeconfig) = start_fleet(rt, fleet, dir)?;
            return Ok((Members::InProcess(sim), kubeconfig));
        }
        let (hosting, members): (Vec<String>, Vec<String>) =
            names.iter().cloned().partition(|n| n == HOSTING);
        let mut groups: Vec<&[String]> = Vec::new();
        if !hosting.is_empty() {
            groups.push(&hosting);
        }
        // As even as the limit allows.
        let count = members.len().div_ceil(per_process);
        let size = members.len().div_ceil(count);
        groups.extend(members.chunks(size));
        let processes = groups
            .iter()
            .enumerate()
            .map(|(i, group)| SimProcess::start(group, dir, i))
            .collect::<Result<Vec<_>>>()?;
        let mut entries = Vec::new();
        for p in &processes {
            for m in p.members()? {
                let field = |k: &str| m[k].as_str().map(str::to_string).ok_or("a member field");
                entries.push(gitfleet_sim::KubeconfigEntry {
                    context: field("context")?,
                    server: field("server")?,
                    token: field("token")?,
                });
            }
        }
        let kubeconfig = dir.join("kubeconfig");
        gitfleet_sim::kubeconfig::write_kubeconfig(&kubeconfig, &entries)
            .map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
        Ok((Members::Processes(processes), kubeconfig))
    }

    /// Requests the members (not the hosting cluster) received, `(reads, writes)`.
    pub(super) fn requests(&self) -> Result<(u64, u64)> {
        match self {
            Members::InProcess(sim) => Ok(member_requests(sim)),
            Members::Processes(processes) => {
                let (mut reads, mut writes) = (0, 0);
                for p in processes {
                    for m in p.members()? {
                        if m["name"] != HOSTING {
                            reads += m["requests"]["reads"].as_u64().unwrap_or(0);
                            writes += m["requests"]["writes"].as_u64().unwrap_or(0);
                        }
                    }
                }
                Ok((reads, writes))
            }
        }
    }

    /// The simulators' process ids: this process's, or the children's.
    pub(super) fn pids(&self) -> Vec<u32> {
        match self {
            Members::InProcess(_) => vec![std::process::id()],
            Members::Processes(processes) => processes.iter().map(|p| p.child.id()).collect(),
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Members::InProcess(_) => "one simulator, in the benchmark's process".into(),
            Members::Processes(p) => format!(
                "{} gitfleet sim processes (the hosting cluster alone in one; open files limit {})",
                p.len(),
                open_files_limit().unwrap_or(0)
            ),
        }
    }

    pub(super) fn shutdown(self, rt: &tokio::runtime::Runtime) {
        match self {
            Members::InProcess(sim) => rt.block_on(sim.shutdown()),
            Members::Processes(processes) => drop(processes),
        }
    }
}

fn fleet_text(names: &[String]) -> String {
    format!(
        "watchHistory: {}\n{}",
        watch_history(),
        sim_fleet_text(names, BENCH_NODES)
    )
}

/// This process's open-files limit (soft), from `/proc/self/limits`.
fn open_files_limit() -> Result<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").map_err(|e| e.to_string())?;
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .ok_or_else(|| "no open files limit in /proc/self/limits".to_string())
}

/// How many members one simulator process serves without running out of files; the rest of
/// the limit is the process's own (a few hundred: the runtime, the hosting cluster's clients).
/// `GITFLEET_DAEMON_SIM_MEMBERS_PER_PROCESS` sets fewer (to try the child processes on a small
/// fleet).
fn members_per_process() -> Result<usize> {
    let fit = (open_files_limit()?.saturating_sub(500) / FILES_PER_MEMBER).max(1) as usize;
    Ok(std::env::var("GITFLEET_DAEMON_SIM_MEMBERS_PER_PROCESS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .map_or(fit, |n| n.clamp(1, fit)))
}

/// Entries in `/proc/<pid>/fd`: the files a process has open.
pub(super) fn open_files(pid: u32) -> Result<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .map_err(|e| format!("/proc/{pid}/fd: {e}"))
}

/// One `gitfleet sim` child process, killed when dropped.
pub(super) struct SimProcess {
    child: Child,
    admin: String,
    token: String,
    agent: ureq::Agent,
}

impl SimProcess {
    fn start(names: &[String], dir: &Path, index: usize) -> Result<SimProcess> {
        let fleet = dir.join(format!("sim-{index}.yaml"));
        std::fs::write(&fleet, fleet_text(names))
            .map_err(|e| format!("{}: {e}", fleet.display()))?;
        let token = format!("bench-{}-{index}", std::process::id());
        let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .arg("sim")
            .arg("--fleet")
            .arg(&fleet)
            .arg("--kubeconfig-out")
            .arg(dir.join(format!("sim-{index}.kubeconfig")))
            .args(["--admin", "127.0.0.1:0", "--admin-token", &token])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start gitfleet sim: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut admin = None;
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if let Some(url) = line.strip_prefix("admin: ") {
                    admin = url.strip_suffix("/members").map(str::to_string);
                }
                if line.starts_with("gitfleet sim: ready") {
                    let _ = tx.send(admin.take());
                }
            }
        });
        let mut process = SimProcess {
            child,
            admin: String::new(),
            token,
            agent: ureq::Agent::new_with_defaults(),
        };
        process.admin = match rx.recv_timeout(SETTLE_LIMIT) {
            Ok(Some(admin)) => admin,
            Ok(None) => return Err("gitfleet sim printed no admin address".into()),
            Err(_) => {
                let status = process.child.try_wait().ok().flatten();
                return Err(format!(
                    "gitfleet sim ({} members) did not get ready: {status:?}",
                    names.len()
                ));
            }
        };
        Ok(process)
    }

    /// Its admin endpoint's `GET /members`.
    fn members(&self) -> Result<Vec<Value>> {
        let text = self
            .agent
            .get(&format!("{}/members", self.admin))
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .and_then(|mut r| r.body_mut().with_config().limit(u64::MAX).read_to_string())
            .map_err(|e| format!("GET {}/members: {e}", self.admin))?;
        let mut doc: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        match doc["members"].take() {
            Value::Array(members) => Ok(members),
            _ => Err(format!("{}/members: no members", self.admin)),
        }
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
