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
use common::hub::{self, fleet_files, is_kustomization};
use common::kubectl::Kubectl as _;
use common::members::{available, Backend};
use std::path::{Path, PathBuf};

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
    let Some(crds) = hub::crds_dir("the sample fleet's server-side dry run") else {
        return;
    };
    let root = common::manifest_dir().join("examples/fleet-repo");
    let mut files = fleet_files(&root);
    assert!(files.len() > 30, "{} sample files", files.len());
    let rendered = tempfile::tempdir().unwrap();
    files.extend(kustomize_renderings(&root, rendered.path()));
    let shown = |f: &Path| f.strip_prefix(&root).unwrap_or(f).display().to_string();

    let members = hub::start_with_crds(&crds);
    // The namespaces the samples declare exist before the objects that live in them.
    let sources: Vec<gitfleet::catalog::SourceFile> = files
        .iter()
        .map(|f| gitfleet::catalog::SourceFile {
            path: shown(f),
            content: std::fs::read(f).unwrap(),
        })
        .collect();
    hub::create_namespaces(&members, &sources);

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
