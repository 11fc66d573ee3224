//! Where the tests find the KubeFleet/OCM compatibility corpus: real manifests the two projects
//! publish, kept beside the repository (`../shared/compat`), not in it. A test that reads it
//! runs when it is there; without it the test says so on the terminal and passes, unless
//! `GITFLEET_REQUIRE_COMPAT=1` (CI) makes the absence a failure. `GITFLEET_COMPAT_DIR` points
//! at a corpus elsewhere.
//!
//! One file for both kinds of test: the library's unit tests compile it under `cfg(test)`, and
//! tests/common includes it by path (integration tests do not see the library's `cfg(test)`).

use std::io::Write;
use std::path::{Path, PathBuf};

/// What the corpus is and how to point the tests at it, for skip notes and failures.
pub const HOW_TO_GET: &str = "it is the compat/ folder of the shared design folder checked out \
     beside the repository as ../shared (kubefleet-dev/kubefleet's examples/ at e160c1cd and \
     Placements from open-cluster-management-io/ocm's solutions/ at 00f84c32), or set \
     GITFLEET_COMPAT_DIR=/path/to/compat";

/// The corpus folder, if present. Absent, it notes on the terminal (past the test harness's
/// capture) that the calling test goes without it, and returns `None` (the test returns early);
/// it panics instead when `GITFLEET_REQUIRE_COMPAT=1`, or when `GITFLEET_COMPAT_DIR` names a
/// folder that does not exist.
pub fn corpus() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("GITFLEET_COMPAT_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "GITFLEET_COMPAT_DIR={} is not a folder",
            dir.display()
        );
        return Some(dir);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/compat");
    if dir.is_dir() {
        return Some(dir);
    }
    let required = std::env::var("GITFLEET_REQUIRE_COMPAT").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "GITFLEET_REQUIRE_COMPAT=1 but the compatibility corpus is not at {}: {HOW_TO_GET}",
        dir.display()
    );
    // The harness names each test's thread after the test (but for `--test-threads=1`, where
    // its own "test NAME ..." line just before says which).
    let test = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    // One write, so that the harness's own lines on the terminal do not cut it.
    let note = format!(
        "note: test{test}: compatibility corpus SKIPPED (not at {}): {HOW_TO_GET}\n",
        dir.display()
    );
    let _ = std::io::stderr().write_all(note.as_bytes());
    None
}
