//! `gitfleet run` in the background for the end-to-end tests: started with a JSON log and a
//! status API on a free port, its address read from the log, killed on drop.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct Daemon {
    pub child: Child,
    /// `http://host:port` of the status API.
    pub addr: String,
    /// Its log lines (JSON), as they come.
    pub lines: mpsc::Receiver<String>,
}

/// A daemon following a fresh repository that holds one MemberCluster, `alpha`, on one
/// simulated member, with a webhook secret; each part lives as long as the test holds it.
pub struct OneMember {
    pub daemon: Daemon,
    pub repo: super::Repo,
    pub sim: super::sim::SimFleet,
    pub state: tempfile::TempDir,
}

impl OneMember {
    pub fn start() -> OneMember {
        let sim = super::sim::SimFleet::start("anonymousAuth: true\nmembers:\n  - name: alpha\n");
        let repo = super::Repo::new();
        repo.write(
            "members.yaml",
            "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
             metadata: {name: alpha}\n\
             spec: {identity: {name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}\n",
        );
        repo.commit("members");
        let state = tempfile::tempdir().unwrap();
        let secret = state.path().join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let daemon = Daemon::start(
            repo.path(),
            &sim.kubeconfig,
            &state.path().join("state"),
            &secret,
            "1m",
        );
        OneMember {
            daemon,
            repo,
            sim,
            state,
        }
    }
}

impl Daemon {
    /// `gitfleet run --repo <repo>` against the members of `kubeconfig`, polling every `poll`,
    /// with the webhook secret in `secret`.
    pub fn start(
        repo: impl AsRef<OsStr>,
        kubeconfig: &Path,
        state: &Path,
        secret: &Path,
        poll: &str,
    ) -> Daemon {
        Self::start_with(repo, kubeconfig, state, secret, poll, &[], &[])
    }

    /// [`Daemon::start`] with more flags for `run` (trust files, ...) and environment (a
    /// test clock, ...). A `--listen` among the flags replaces the default free port.
    pub fn start_with(
        repo: impl AsRef<OsStr>,
        kubeconfig: &Path,
        state: &Path,
        secret: &Path,
        poll: &str,
        flags: &[&OsStr],
        env: &[(&str, &OsStr)],
    ) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .envs(env.iter().copied())
            .args(["run", "--repo"])
            .arg(repo)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--state-dir")
            .arg(state)
            .args(if flags.iter().any(|f| *f == "--listen") {
                &[][..]
            } else {
                &["--listen", "127.0.0.1:0"][..]
            })
            .args(["--poll", poll])
            .args(["--log-format", "json", "--webhook-secret-file"])
            .arg(secret)
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let rx = super::lines_of(child.stderr.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the daemon logs its address");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if let Some(a) = v["fields"]["listen"].as_str() {
                break format!("http://{a}");
            }
        };
        Daemon {
            child,
            addr,
            lines: rx,
        }
    }

    /// Waits for a log line containing every one of `words`.
    pub fn await_log(&self, words: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("no log line with {words:?}"));
            if words.iter().all(|w| line.contains(w)) {
                return line;
            }
        }
    }
}

impl Daemon {
    /// Kills the daemon and returns the log lines not read yet, up to its last.
    pub fn stop_and_read_log(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The reader thread ends at the pipe's end, and the channel with it.
        let (_, empty) = mpsc::channel();
        let lines = std::mem::replace(&mut self.lines, empty);
        lines.iter().collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // A failing test shows whether its daemon had ended on its own, and how it last logged.
        let ended = self.child.try_wait().ok().flatten();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            self.show_last_log(ended);
        }
    }
}

impl Daemon {
    /// The log lines not read yet (the last [`SHOWN_LINES`]), on standard error.
    fn show_last_log(&mut self, ended: Option<std::process::ExitStatus>) {
        match ended {
            Some(status) => eprintln!("the daemon had ended by itself: {status}"),
            None => eprintln!("the daemon was running"),
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut last = std::collections::VecDeque::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if last.len() == SHOWN_LINES {
                        last.pop_front();
                    }
                    last.push_back(line);
                }
                Err(_) => break,
            }
        }
        eprintln!("its last {} log lines not read by the test:", last.len());
        for line in last {
            eprintln!("  {}", line.chars().take(600).collect::<String>());
        }
    }
}

/// How many of a failed test's daemon's last log lines are shown.
const SHOWN_LINES: usize = 40;

/// Polls `check` until it holds, failing after a generous bound (a hang, not a timing test).
pub fn await_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
