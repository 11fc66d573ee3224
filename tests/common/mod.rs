//! Shared helpers for the end-to-end tests: real git repositories built with the `git` CLI in a
//! temporary folder, and the real `gitfleet` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../src/compat_corpus.rs"]
pub mod compat_corpus;
pub mod connections;
pub mod daemon;
pub mod git_http;
pub mod hub;
pub mod kubectl;
pub mod members;
pub mod receiver;
pub mod replicas;
pub mod signing;
pub mod sim;
pub mod sources;
pub mod testbed;

/// The lines a child process writes to `pipe` (its stdout or stderr), as they come, read on a
/// thread of their own so that the test can await a line with a deadline.
pub fn lines_of(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Two anonymous members, alpha and beta (a fleet file for [`members::Members::start`]).
pub const TWO_MEMBERS: &str = r#"
anonymousAuth: true
members:
  - name: alpha
  - name: beta
"#;

/// An OCM hub for `clusters`: namespace `apps`, ManagedClusterSet `all` bound there, a
/// `Placement` named `placement` in `apps` over the set, and a ManagedCluster per cluster in it.
pub fn ocm_hub(placement: &str, clusters: &[&str]) -> String {
    let mut hub = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: apps}}\n---\n\
         apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata: {{name: all}}\n---\n\
         apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSetBinding\nmetadata: {{name: all, namespace: apps}}\nspec: {{clusterSet: all}}\n---\n\
         apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {{name: {placement}, namespace: apps}}\nspec: {{clusterSets: [all]}}\n",
    );
    for c in clusters {
        hub.push_str(&format!(
            "---\napiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata:\n  name: {c}\n  labels: {{cluster.open-cluster-management.io/clusterset: all}}\nspec: {{hubAcceptsClient: true}}\n"
        ));
    }
    hub
}

/// A `MemberCluster` named `name`, no labels, default heartbeat.
pub fn member_cluster(name: &str) -> String {
    format!(
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: {name}
spec:
  identity: {{name: member, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
"
    )
}

pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs git in the repository with a fixed identity and no user configuration.
    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            // Fixed dates make commit ids, and so golden outputs, reproducible.
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    pub fn write(&self, path: &str, content: &str) {
        let p = self.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn remove(&self, path: &str) {
        std::fs::remove_file(self.path().join(path)).unwrap();
    }

    /// Stages everything and commits; returns the new commit id.
    pub fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Copies the sample fleet (examples/fleet-repo) to the repository's root. Its Kustomize
    /// application needs kustomize (GITFLEET_KUSTOMIZE, or on PATH) and its Helm release helm
    /// (GITFLEET_HELM, or on PATH): without one, what needs it is left out by a
    /// `.gitfleetignore`, with a note, unless GITFLEET_REQUIRE_TOOLS=1. Its SOPS-encrypted
    /// Secret opens with the demo key [`gitfleet`] gives every command ([`sample_age_key`]).
    pub fn copy_sample_fleet(&self) {
        self.copy_dir(&manifest_dir().join("examples/fleet-repo"), "");
        let mut ignored = String::new();
        for (tool, install, folders) in [
            (
                "kustomize",
                "go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2",
                "/apps/guestbook/\n",
            ),
            (
                "helm",
                "go install helm.sh/helm/v3/cmd/helm@v3.22.0",
                "/apps/hello/release/\n/charts/hello/\n",
            ),
        ] {
            let program = std::env::var_os(format!("GITFLEET_{}", tool.to_uppercase()))
                .unwrap_or_else(|| tool.into());
            let found = Command::new(program)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success());
            if !found {
                assert!(
                    std::env::var("GITFLEET_REQUIRE_TOOLS").as_deref() != Ok("1"),
                    "{tool} is required (GITFLEET_REQUIRE_TOOLS=1): {install}"
                );
                eprintln!(
                    "note: no {tool} on PATH: the sample fleet's {} is left out",
                    folders.trim()
                );
                ignored.push_str(folders);
            }
        }
        if !ignored.is_empty() {
            self.write(".gitfleetignore", &ignored);
        }
    }

    /// Copies a folder of files into the repository under `dest`.
    pub fn copy_dir(&self, src: &Path, dest: &str) {
        for entry in walk(src) {
            let rel = entry.strip_prefix(src).unwrap();
            let target = self.path().join(dest).join(rel);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(&entry, target).unwrap();
        }
    }
}

/// Every file below `dir`, sorted.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The demo age key that opens the sample fleet's SOPS-encrypted Secret (outside the fleet's
/// folder, so never read as a hub resource).
pub fn sample_age_key() -> PathBuf {
    manifest_dir().join("examples/demo-age-key.txt")
}

/// The real binary with `args`, given the sample's demo age key (a key only opens SOPS files:
/// a repository without them reads as it would without the key).
pub fn gitfleet(args: &[&str]) -> Run {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(args)
        .env_remove("GITFLEET_REPO")
        .env("GITFLEET_AGE_KEY_FILE", sample_age_key())
        .output()
        .expect("gitfleet runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
