//! Running gitfleet with one external rendering tool named (`GITFLEET_KUSTOMIZE`,
//! `GITFLEET_HELM`), its renderings logged, as the sources' end-to-end tests do.

use super::members::Members;
use super::{Repo, Run};
use std::path::Path;
use std::process::Command;

/// The tool's environment variable and the program it names.
pub type Tool<'a> = (&'static str, &'a Path);

/// `gitfleet ARGS` with `tool`; renderings are logged at debug.
pub fn gitfleet((var, program): Tool, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(args)
        .env_remove("GITFLEET_REPO")
        .env(var, program)
        .env("GITFLEET_LOG", "info,gitfleet::sources=debug")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `gitfleet run --once` with `tool` and `state`; its log lines.
pub fn run_once(tool: Tool, repo: &Repo, members: &Members, state: &Path) -> Vec<String> {
    let run = gitfleet(
        tool,
        &[
            "run",
            "--once",
            "--repo",
            repo.path().to_str().unwrap(),
            "--kubeconfig",
            members.kubeconfig.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    run.stderr.lines().map(str::to_string).collect()
}
