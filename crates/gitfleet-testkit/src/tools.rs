//! The external tools the tests drive, found where `.ci/run` installs them: a variable naming the
//! binary, the tools cache (`~/.cache/gitfleet/tools/bin`), or the PATH. A test whose tool is
//! missing is skipped with a note saying how to install it, and fails instead under
//! `GITFLEET_REQUIRE_TOOLS=1` (CI).

use std::path::{Path, PathBuf};
use std::process::Command;

/// One external tool, at the version `.ci/run` installs.
pub struct Tool {
    /// The binary's name in the tools cache and on the PATH.
    pub name: &'static str,
    /// The environment variable that names the binary.
    pub env: &'static str,
    /// The argument that prints its version (a run that succeeds shows it works).
    pub version_arg: &'static str,
    /// The command that installs it.
    pub install: &'static str,
}

pub const HELM: Tool = Tool {
    name: "helm",
    env: "GITFLEET_HELM",
    version_arg: "version",
    install: "GOBIN=~/.cache/gitfleet/tools/bin go install helm.sh/helm/v3/cmd/helm@v3.22.0",
};

pub const KUSTOMIZE: Tool = Tool {
    name: "kustomize",
    env: "GITFLEET_KUSTOMIZE",
    version_arg: "version",
    install:
        "GOBIN=~/.cache/gitfleet/tools/bin go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2",
};

pub const SOPS: Tool = Tool {
    name: "sops",
    env: "GITFLEET_SOPS",
    version_arg: "--version",
    install:
        "GOBIN=~/.cache/gitfleet/tools/bin go install github.com/getsops/sops/v3/cmd/sops@v3.13.3",
};

/// Debian's chromium, which the dashboard's browser tests drive (headless) through
/// chromedriver.
pub const CHROMIUM: Tool = Tool {
    name: "chromium",
    env: "GITFLEET_CHROMIUM",
    version_arg: "--version",
    install: "apt-get install -y chromium chromium-driver",
};

pub const CHROMEDRIVER: Tool = Tool {
    name: "chromedriver",
    env: "GITFLEET_CHROMEDRIVER",
    version_arg: "--version",
    install: "apt-get install -y chromium chromium-driver",
};

impl Tool {
    /// The tool's binary, or `None` (with a note naming `what` is skipped) when it is missing.
    /// Panics when it is missing under `GITFLEET_REQUIRE_TOOLS=1`.
    pub fn find(&self, what: &str) -> Option<PathBuf> {
        let candidates = [
            std::env::var_os(self.env).map(PathBuf::from),
            std::env::var_os("HOME").map(|h| {
                PathBuf::from(h)
                    .join(".cache/gitfleet/tools/bin")
                    .join(self.name)
            }),
            Some(PathBuf::from(self.name)),
        ];
        let found = candidates.into_iter().flatten().find(|p| {
            Command::new(p)
                .arg(self.version_arg)
                .env("SOPS_DISABLE_VERSION_CHECK", "1")
                .output()
                .is_ok_and(|o| o.status.success())
        });
        if found.is_none() {
            assert!(
                std::env::var("GITFLEET_REQUIRE_TOOLS").as_deref() != Ok("1"),
                "{} is required (GITFLEET_REQUIRE_TOOLS=1): {}",
                self.name,
                self.install
            );
            eprintln!("SKIPPED: {what} need {} ({})", self.name, self.install);
        }
        found
    }
}

/// `plaintext` encrypted by the real sops for the age `recipient`, as a file named `name` (its
/// extension says YAML or JSON), with sops' extra `flags`; no key of this process's
/// environment is used.
pub fn sops_encrypt(
    sops: &Path,
    name: &str,
    plaintext: &str,
    recipient: &str,
    flags: &[&str],
) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, plaintext).unwrap();
    let out = Command::new(sops)
        .current_dir(dir.path())
        .env("SOPS_DISABLE_VERSION_CHECK", "1")
        .env_remove("SOPS_AGE_KEY")
        .env_remove("SOPS_AGE_KEY_FILE")
        .args(["--encrypt", "--age", recipient])
        .args(flags)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sops --encrypt failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
