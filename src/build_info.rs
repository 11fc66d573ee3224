//! What this binary is: version, the commit it was built from and when (set by `build.rs`).
//! Shown by `gitfleet version`, `--version` and the `gitfleet_build_info` metric.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BuildInfo {
    pub version: &'static str,
    pub commit: &'static str,
    pub build_date: &'static str,
}

pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    commit: env!("GITFLEET_COMMIT"),
    build_date: env!("GITFLEET_BUILD_DATE"),
};

/// `0.1.0 (commit 1a2b3c4d5e6f, built 2026-11-26T04:00:00Z)`, for `--version`.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("GITFLEET_COMMIT"),
    ", built ",
    env!("GITFLEET_BUILD_DATE"),
    ")"
);
