//! Real members for the benchmarks: the test bed (testbed/, real kube-apiserver,
//! controller-manager, scheduler and kwok per member) as a child process, found where
//! `bash testbed/build.sh` puts it (or `GITFLEET_TESTBED`), stopped when dropped.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Testbed {
    child: Child,
    pub kubeconfig: PathBuf,
    /// How long the members took to be ready (every /readyz and node ready).
    pub started_in: Duration,
    _dir: tempfile::TempDir,
}

/// Where the test bed binary is, if built.
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GITFLEET_TESTBED").filter(|p| !p.is_empty()) {
        return Some(p.into());
    }
    let dir = match std::env::var_os("GITFLEET_TESTBED_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
            .join("gitfleet")
            .join("testbed"),
    };
    Some(dir.join("testbed")).filter(|p| p.is_file())
}

impl Testbed {
    /// Starts members from a fleet file (the `gitfleet sim --fleet` format); `None` when the
    /// test bed is not built.
    pub fn start(fleet_yaml: &str) -> Option<Testbed> {
        let binary = binary()?;
        let dir = tempfile::tempdir().expect("tempdir");
        let fleet = dir.path().join("fleet.yaml");
        std::fs::write(&fleet, fleet_yaml).expect("fleet file");
        let kubeconfig = dir.path().join("kubeconfig");
        let started = Instant::now();
        let mut child = Command::new(&binary)
            .arg("up")
            .arg("--fleet")
            .arg(&fleet)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--exit-on-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
        // The supervisor prints `testbed: ready` once every member serves /readyz with ready
        // nodes; its stdout ends if it fails first.
        let ready = std::io::BufReader::new(child.stdout.take().expect("piped"))
            .lines()
            .map_while(Result::ok)
            .any(|l| l.starts_with("testbed: ready"));
        assert!(ready, "the test bed ended before it was ready");
        Some(Testbed {
            child,
            kubeconfig,
            started_in: started.elapsed(),
            _dir: dir,
        })
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // Closing its standard input stops the supervisor and every component.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
