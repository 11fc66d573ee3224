//! The real `kubectl` against one context of a kubeconfig, for tests on either backend.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs kubectl with `stdin` fed to it; returns (exit code, stdout, stderr). `cache` keeps its
/// discovery cache apart from the user's.
pub fn run(
    kubeconfig: &Path,
    cache: &Path,
    context: &str,
    args: &[&str],
    stdin: &str,
) -> (i32, String, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", context])
        .args(args)
        .env("KUBECACHEDIR", cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs (is it installed?)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().expect("kubectl finishes");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
