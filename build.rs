//! Build facts for `gitfleet version` and the `gitfleet_build_info` metric: the commit the
//! binary is built from and when. `GITFLEET_COMMIT` / `GITFLEET_BUILD_DATE` set at build time
//! win (an image build without `.git`); `SOURCE_DATE_EPOCH` gives a reproducible date.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn date(args: &[&str]) -> Option<String> {
    let out = Command::new("date").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "GITFLEET_COMMIT",
        "GITFLEET_BUILD_DATE",
        "SOURCE_DATE_EPOCH",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // A new commit re-runs this (HEAD, the branch's ref, or packed refs move).
    if let (Some(dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        // Only when it exists: cargo takes a missing file for a changed one, and re-ran this
        // (and rebuilt the crate, the date having moved) at every build of a repository whose
        // refs were never packed. Packing removes the loose ref below, which re-runs it.
        if std::path::Path::new(&format!("{common}/packed-refs")).exists() {
            println!("cargo:rerun-if-changed={common}/packed-refs");
        }
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={common}/{r}");
        }
    }
    let commit = std::env::var("GITFLEET_COMMIT")
        .ok()
        .or_else(|| {
            let sha = git(&["rev-parse", "HEAD"])?;
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            Some(if dirty { format!("{sha}-dirty") } else { sha })
        })
        .unwrap_or_else(|| "unknown".into());
    let build_date = std::env::var("GITFLEET_BUILD_DATE")
        .ok()
        .or_else(|| match std::env::var("SOURCE_DATE_EPOCH") {
            Ok(epoch) => date(&["-u", "-d", &format!("@{epoch}"), "+%Y-%m-%dT%H:%M:%SZ"]),
            Err(_) => date(&["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=GITFLEET_COMMIT={commit}");
    println!("cargo:rustc-env=GITFLEET_BUILD_DATE={build_date}");
}
