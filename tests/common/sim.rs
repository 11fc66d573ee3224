//! A simulated fleet for end-to-end tests: the real `gitfleet sim` binary started as a child
//! process, awaited until it prints its `ready` line, killed when dropped. Tests reach its
//! members only through the kubeconfig it writes, as a user reaches real clusters.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long the simulator may take to print `ready` before a test fails (it binds loopback
/// ports only; this bounds a hang, it is not a timing assumption).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

pub struct SimFleet {
    child: Child,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    /// `http://127.0.0.1:<port>` of the admin endpoint.
    pub admin: String,
    /// What the simulator printed up to and including its `ready` line.
    pub banner: String,
}

impl SimFleet {
    /// Starts `gitfleet sim` on a fleet file given as YAML text.
    pub fn start(fleet_yaml: &str) -> SimFleet {
        let dir = tempfile::tempdir().expect("tempdir");
        let fleet = dir.path().join("fleet.yaml");
        std::fs::write(&fleet, fleet_yaml).unwrap();
        Self::start_file(&fleet, dir)
    }

    /// Starts `gitfleet sim` on a fleet file on disk; `dir` holds the kubeconfig it writes.
    pub fn start_file(fleet: &Path, dir: tempfile::TempDir) -> SimFleet {
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .arg("sim")
            .arg("--fleet")
            .arg(fleet)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .args(["--admin", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("gitfleet sim starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        // The reader keeps draining stdout after `ready` so the simulator never blocks on a
        // full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Nobody listens any more: keep draining.
                    continue;
                }
            }
        });
        let mut banner = String::new();
        let mut admin = None;
        loop {
            let line = match rx.recv_timeout(READY_TIMEOUT) {
                Ok(line) => line,
                Err(e) => {
                    let _ = child.kill();
                    panic!("gitfleet sim did not become ready ({e}); it printed:\n{banner}");
                }
            };
            banner.push_str(&line);
            banner.push('\n');
            if let Some(a) = line.strip_prefix("admin: ") {
                admin = Some(a.trim_end_matches("/members").to_string());
            }
            if line.starts_with("gitfleet sim: ready") {
                break;
            }
        }
        SimFleet {
            child,
            dir,
            kubeconfig,
            admin: admin.expect("the simulator prints its admin address"),
            banner,
        }
    }

    /// Changes a member's faults at run time through the admin endpoint, e.g.
    /// `{"down": true}` or `{"errorRate": 1.0, "errorCodes": [503]}`.
    pub fn set_faults(&self, member: &str, faults: serde_json::Value) {
        let url = format!("{}/members/{member}/faults", self.admin);
        let mut response = ureq::post(&url)
            .header("content-type", "application/json")
            .send(faults.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        let _ = response.body_mut().read_to_string();
    }

    /// Runs the real `kubectl` against one member's context; returns (exit code, stdout, stderr).
    pub fn kubectl(&self, context: &str, args: &[&str]) -> (i32, String, String) {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--context", context])
            .args(args)
            .env("KUBECACHEDIR", self.dir.path().join("kube-cache"))
            .output()
            .expect("kubectl runs (is it installed?)");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `kubectl get` as JSON, panicking when kubectl fails.
    pub fn get_json(&self, context: &str, args: &[&str]) -> serde_json::Value {
        let mut full = vec!["get"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["-o", "json"]);
        let (code, out, err) = self.kubectl(context, &full);
        assert_eq!(code, 0, "kubectl {full:?} failed: {err}");
        serde_json::from_str(&out).expect("kubectl prints JSON")
    }
}

impl Drop for SimFleet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
