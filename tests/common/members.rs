//! Members for end-to-end tests on either backend: `gitfleet sim` (fast, ours) or the test bed
//! (real kube-apiserver, controller-manager, scheduler and kwok per member). A test describes its
//! fleet once, in the fleet-file format both read, and reaches the members only through the
//! kubeconfig and kubectl, as a user reaches real clusters; [`on_both_backends!`] runs it on each.
//!
//! Each test starts its own members: gitfleet treats a member as its own (it prunes placements
//! whose records it finds there and that the commit no longer has), so two tests cannot share
//! one. Start costs are measured in docs/benchmarks.md.
//!
//! A real-member test is skipped, with a note on the terminal, when the test bed is not built
//! (see [`super::testbed`]); `GITFLEET_TESTBED_REQUIRED=1` turns that into a failure.

use std::path::{Path, PathBuf};

use super::kubectl::Kubectl;
use super::sim::SimFleet;
use super::testbed::{self, Testbed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `gitfleet sim`.
    Sim,
    /// The test bed: real Kubernetes control planes.
    Real,
}

enum Running {
    Sim(SimFleet),
    Real(Testbed),
}

/// Started members, stopped on drop.
pub struct Members {
    pub backend: Backend,
    /// Declared before `dir`: fields drop in order, so the members stop before their folder goes.
    running: Running,
    /// Holds the fleet file, the kubeconfig and (real) the test bed's state; removed last.
    dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    /// `http://127.0.0.1:<port>` of the admin endpoint (the same API on both backends for
    /// `faults: {down}`).
    admin: String,
}

/// Whether tests on `backend` can run here; for the real tier, notes the skip on the terminal
/// when the test bed is not built (and fails when it is required).
pub fn available(backend: Backend) -> bool {
    match backend {
        Backend::Sim => true,
        Backend::Real => {
            let found = testbed::binary().is_some();
            if !found {
                testbed::note_skipped();
            }
            found
        }
    }
}

impl Members {
    /// Starts members from a fleet file given as YAML text (the `gitfleet sim --fleet` format).
    /// On the real backend, simulator-only fields (tokens, anonymousAuth, workloadDelayMs) are
    /// ignored and faults other than stopping a member are refused.
    pub fn start(backend: Backend, fleet_yaml: &str) -> Members {
        let dir = tempfile::tempdir().expect("tempdir");
        let fleet = dir.path().join("fleet.yaml");
        std::fs::write(&fleet, fleet_yaml).unwrap();
        let running = match backend {
            Backend::Sim => {
                let sim_dir = tempfile::tempdir_in(dir.path()).expect("tempdir");
                Running::Sim(SimFleet::start_file(&fleet, sim_dir))
            }
            Backend::Real => {
                let binary = testbed::binary()
                    .unwrap_or_else(|| panic!("no test bed: {}", testbed::HOW_TO_RUN));
                Running::Real(Testbed::start(&binary, &fleet, dir.path()))
            }
        };
        let (kubeconfig, admin) = match &running {
            Running::Sim(s) => (s.kubeconfig.clone(), s.admin.clone()),
            Running::Real(t) => (t.kubeconfig.clone(), t.admin.clone()),
        };
        Members {
            backend,
            running,
            dir,
            kubeconfig,
            admin,
        }
    }

    /// A folder for the test's own files, removed with the members.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The simulator, for what only it offers (injected errors, change logs); `None` on the
    /// real backend.
    pub fn sim(&self) -> Option<&SimFleet> {
        match &self.running {
            Running::Sim(s) => Some(s),
            Running::Real(_) => None,
        }
    }

    /// Stops a member's API server: its address refuses connections until [`Self::start_member`].
    pub fn stop_member(&self, name: &str) {
        self.set_down(name, true);
    }

    /// Starts a stopped member again (same address); returns once it serves requests.
    pub fn start_member(&self, name: &str) {
        self.set_down(name, false);
    }

    fn set_down(&self, name: &str, down: bool) {
        let url = format!("{}/members/{name}/faults", self.admin);
        let body = serde_json::json!({ "down": down }).to_string();
        let mut request = ureq::post(&url).header("content-type", "application/json");
        // The simulator's admin endpoint needs its own token; the test bed's serves loopback only.
        if let Running::Sim(s) = &self.running {
            request = request.header("authorization", &format!("Bearer {}", s.admin_token));
        }
        let mut response = request
            .send(body.as_bytes())
            .unwrap_or_else(|e| panic!("POST {url} {body}: {e}"));
        let _ = response.body_mut().read_to_string();
    }
}

impl Kubectl for Members {
    fn kubectl_paths(&self) -> (&Path, PathBuf) {
        (&self.kubeconfig, self.dir.path().join("kube-cache"))
    }
}

/// Runs each named test function (`fn name(backend: Backend)`) on both backends, as the tests
/// `name::sim` and `name::real` (so `cargo test real` runs the real-member tier alone). The real
/// one is skipped, with a note, when the test bed is not built. Attributes before a name (an
/// `ignore`) go on both tests.
#[macro_export]
macro_rules! on_both_backends {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        $(
            mod $name {
                use $crate::common::members::{available, Backend};
                #[test]
                $(#[$attr])*
                fn sim() {
                    super::$name(Backend::Sim)
                }
                #[test]
                $(#[$attr])*
                fn real() {
                    if available(Backend::Real) {
                        super::$name(Backend::Real)
                    }
                }
            }
        )*
    };
}
