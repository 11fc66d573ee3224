//! The sample fleet can go on a real hub as it is: every file of examples/fleet-repo passes a
//! server-side dry run (`kubectl apply --dry-run=server --validate=strict`) on a test-bed API
//! server (a real kube-apiserver) with KubeFleet's and OCM's CustomResourceDefinitions installed.
//! The CRDs are not in the repository: they are read from `GITFLEET_CRDS_DIR`, or from the
//! shared design folder beside it (`../shared/crds`, see its README: KubeFleet's
//! config/crd/bases and OCM's cluster and work CRDs). Without them, or without the test bed,
//! the test says so on the terminal and passes; with `GITFLEET_TESTBED_REQUIRED=1` a missing
//! test bed fails it, and with `GITFLEET_REQUIRE_CRDS=1` missing CRDs fail it. (The CRDs are
//! not served by the Go module proxy, so CI cannot fetch them: it runs this test only where
//! the shared folder holds them.)
//!
//! KubeFleet's validating webhooks do not run on the test bed: this holds the samples to the
//! CRD schemas and CEL rules; the webhooks' rules are `gitfleet validate`'s unit tests.

mod common;
use common::kubectl::Kubectl as _;
use common::members::{available, Backend, Members};
use std::io::Write as _;
use std::path::{Path, PathBuf};

const FLEET: &str = "anonymousAuth: true\nmembers:\n  - name: hub\n";

/// The folder of CRDs, if present (see the module doc).
fn crds_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("GITFLEET_CRDS_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => common::manifest_dir().join("../shared/crds"),
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
        "\nnote: the sample fleet's server-side dry run is SKIPPED: no CRDs at {} (set GITFLEET_CRDS_DIR)\n",
        dir.display()
    );
    None
}

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Whether `dir` holds a kustomization file.
fn is_kustomization(dir: &Path) -> bool {
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
/// kustomize, see [`kustomize_renderings`]) and Helm folders, and no SOPS-encrypted file (its
/// `sops` metadata is no Secret field: gitfleet decrypts it first, tests/sops_e2e.rs).
fn fleet_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = common::walk(root)
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

/// What kustomize renders from each overlay of the samples (`*/overlays/*`: the root
/// kustomizations), written into `out`; none, with a note, without kustomize.
fn kustomize_renderings(root: &Path, out: &Path) -> Vec<PathBuf> {
    let program = std::env::var_os("GITFLEET_KUSTOMIZE").unwrap_or_else(|| "kustomize".into());
    let found = std::process::Command::new(&program)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("GITFLEET_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "kustomize is required (GITFLEET_REQUIRE_TOOLS=1)"
        );
        eprintln!("note: no kustomize on PATH: the sample's Kustomize overlays are not dry-run");
        return Vec::new();
    }
    let mut overlays: Vec<PathBuf> = common::walk(root)
        .into_iter()
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .filter(|d| is_kustomization(d) && d.parent().is_some_and(|p| p.ends_with("overlays")))
        .collect();
    overlays.sort();
    overlays.dedup();
    overlays
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let built = std::process::Command::new(&program)
                .arg("build")
                .arg(dir)
                .output()
                .unwrap();
            assert!(
                built.status.success(),
                "kustomize build {}: {}",
                dir.display(),
                String::from_utf8_lossy(&built.stderr)
            );
            let file = out.join(format!("kustomize-{i}.yaml"));
            std::fs::write(&file, &built.stdout).unwrap();
            file
        })
        .collect()
}

#[test]
fn every_sample_file_passes_a_server_side_dry_run() {
    if !available(Backend::Real) {
        return;
    }
    let Some(crds) = crds_dir() else {
        return;
    };
    let root = common::manifest_dir().join("examples/fleet-repo");
    let mut files = fleet_files(&root);
    assert!(files.len() > 30, "{} sample files", files.len());
    let rendered = tempfile::tempdir().unwrap();
    files.extend(kustomize_renderings(&root, rendered.path()));
    let shown = |f: &Path| f.strip_prefix(&root).unwrap_or(f).display().to_string();

    let members = Members::start(Backend::Real, FLEET);
    let crd_files = fleet_files(&crds);
    assert!(crd_files.len() > 20, "{} CRD files", crd_files.len());
    for f in &crd_files {
        // `create`, not client-side `apply`: the largest CRDs exceed its annotation limit.
        let path = f.display().to_string();
        let (code, _, err) = members.kubectl("hub", &["create", "-f", &path]);
        assert_eq!(code, 0, "kubectl create -f {path}: {err}");
    }
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

    // The namespaces the samples declare exist before the objects that live in them.
    let sources: Vec<gitfleet::catalog::SourceFile> = files
        .iter()
        .map(|f| gitfleet::catalog::SourceFile {
            path: shown(f),
            content: std::fs::read(f).unwrap(),
        })
        .collect();
    let (cat, _) = gitfleet::analyze(&sources);
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

    let mut refused = Vec::new();
    for f in &files {
        let path = f.display().to_string();
        let (code, _, err) = members.kubectl(
            "hub",
            &[
                "apply",
                "--dry-run=server",
                "--validate=strict",
                "-f",
                &path,
            ],
        );
        if code != 0 {
            refused.push(format!("{}: {}", shown(f), err.trim()));
        }
    }
    eprintln!(
        "sample fleet: {} files, {} refused by the API server",
        files.len(),
        refused.len()
    );
    assert!(
        refused.is_empty(),
        "a real hub refuses these sample files:\n{}",
        refused.join("\n")
    );
}
