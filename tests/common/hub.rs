//! A hub on the test bed with KubeFleet's and OCM's CustomResourceDefinitions installed, for
//! tests that hold gitfleet's files to what a real hub admits. The CRDs are not in the
//! repository: they are read from `GITFLEET_CRDS_DIR`, or from the shared design folder beside
//! it (`../shared/crds`: KubeFleet's config/crd/bases and OCM's cluster and work CRDs). Without
//! them a test says so on the terminal and passes; `GITFLEET_REQUIRE_CRDS=1` makes that a
//! failure. (The CRDs are not served by the Go module proxy, so CI cannot fetch them: it runs
//! these tests only where the shared folder holds them.)

use super::kubectl::Kubectl as _;
use super::members::{Backend, Members};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The fleet file of a one-member test bed whose member is the hub.
pub const FLEET: &str = "anonymousAuth: true\nmembers:\n  - name: hub\n";

/// The folder of CRDs, if present; `what` names the skipped check in the note.
pub fn crds_dir(what: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("GITFLEET_CRDS_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => super::manifest_dir().join("../shared/crds"),
    };
    if dir.is_dir() {
        return Some(dir);
    }
    let required = std::env::var("GITFLEET_REQUIRE_CRDS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "GITFLEET_REQUIRE_CRDS=1 but the CRDs are not at {}: set GITFLEET_CRDS_DIR to a folder holding KubeFleet's config/crd/bases and OCM's cluster and work CRDs",
        dir.display()
    );
    let _ = writeln!(
        std::io::stderr(),
        "\nnote: {what} is SKIPPED: no CRDs at {} (set GITFLEET_CRDS_DIR)\n",
        dir.display()
    );
    None
}

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Whether `dir` holds a kustomization file.
pub fn is_kustomization(dir: &Path) -> bool {
    KUSTOMIZATION_FILES.iter().any(|n| dir.join(n).is_file())
}

/// Whether `dir` is a Helm chart or release folder (rendered by helm, not read file by file;
/// the release's objects go on real API servers in tests/helm_e2e.rs).
fn is_helm(dir: &Path) -> bool {
    ["Chart.yaml", "helmrelease.yaml"]
        .iter()
        .any(|n| dir.join(n).is_file())
}

/// The files gitfleet reads as objects: YAML and JSON, outside folders whose name starts with
/// a dot (`.inventory` is the inventory, not the fleet), outside Kustomize folders (built by
/// kustomize) and Helm folders, and no SOPS-encrypted file (its `sops` metadata is no Secret
/// field: gitfleet decrypts it first, tests/sops_e2e.rs).
pub fn fleet_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = super::walk(root)
        .into_iter()
        .filter(|f| {
            let rel = f.strip_prefix(root).unwrap();
            let hidden = rel
                .components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
            let ext = f.extension().and_then(|e| e.to_str()).unwrap_or_default();
            let rendered = f
                .ancestors()
                .skip(1)
                .take_while(|d| d.starts_with(root))
                .any(|d| is_kustomization(d) || is_helm(d));
            let encrypted = std::fs::read_to_string(f).is_ok_and(|t| t.contains("\nsops:\n"));
            !hidden && !rendered && !encrypted && matches!(ext, "yaml" | "yml" | "json")
        })
        .collect();
    files.sort();
    files
}

/// Starts a test-bed hub and installs every CRD of `crds`, waiting until they are served.
pub fn start_with_crds(crds: &Path) -> Members {
    let members = Members::start(Backend::Real, FLEET);
    let crd_files = fleet_files(crds);
    assert!(crd_files.len() > 20, "{} CRD files", crd_files.len());
    for f in &crd_files {
        // `create`, not client-side `apply`: the largest CRDs exceed its annotation limit.
        let path = f.display().to_string();
        let (code, _, err) = members.kubectl("hub", &["create", "-f", &path]);
        assert_eq!(code, 0, "kubectl create -f {path}: {err}");
    }
    await_crds(&members);
    members
}

/// Waits until every CRD on the hub is established (served).
pub fn await_crds(members: &Members) {
    let (code, _, err) = members.kubectl(
        "hub",
        &[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=120s",
        ],
    );
    assert_eq!(code, 0, "the CRDs are not established: {err}");
}

/// Creates on the hub the namespaces `sources` declare, so the objects that live in them can
/// be dry-run.
pub fn create_namespaces(members: &Members, sources: &[gitfleet::catalog::SourceFile]) {
    let (cat, _) = gitfleet::analyze(sources);
    let namespaces: Vec<&str> = cat
        .objects
        .iter()
        .filter(|o| o.gvk.group.is_empty() && o.gvk.kind == "Namespace")
        .map(|o| o.name.as_str())
        .collect();
    assert!(!namespaces.is_empty());
    for ns in namespaces {
        let (code, _, err) = members.kubectl("hub", &["create", "namespace", ns]);
        assert_eq!(code, 0, "kubectl create namespace {ns}: {err}");
    }
}
