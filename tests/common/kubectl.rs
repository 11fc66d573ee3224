//! The real `kubectl` against one context of a kubeconfig, for tests on either backend: [`run`],
//! and [`Kubectl`], the helpers every set of members offers (simulated or real).

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

/// Members reached with the real kubectl through their kubeconfig. Implementors say where the
/// kubeconfig and kubectl's cache are; the helpers are the same for every backend.
pub trait Kubectl {
    /// The kubeconfig, and the folder for kubectl's discovery cache.
    fn kubectl_paths(&self) -> (&Path, std::path::PathBuf);

    /// Runs kubectl against one member's context with `stdin` fed to it (for `apply -f -`);
    /// returns (exit code, stdout, stderr).
    fn kubectl_stdin(&self, context: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
        let (kubeconfig, cache) = self.kubectl_paths();
        run(kubeconfig, &cache, context, args, stdin)
    }

    /// Runs kubectl against one member's context; returns (exit code, stdout, stderr).
    fn kubectl(&self, context: &str, args: &[&str]) -> (i32, String, String) {
        self.kubectl_stdin(context, args, "")
    }

    /// `kubectl apply --server-side -f -` of `yaml` plus `extra` arguments, panicking when
    /// kubectl fails.
    fn apply(&self, context: &str, yaml: &str, extra: &[&str]) -> String {
        let mut args = vec!["apply", "--server-side", "-f", "-"];
        args.extend_from_slice(extra);
        let (code, out, err) = self.kubectl_stdin(context, &args, yaml);
        assert_eq!(code, 0, "kubectl {args:?} failed: {err}\n{yaml}");
        out
    }

    /// `kubectl get` as JSON, panicking when kubectl fails.
    fn get_json(&self, context: &str, args: &[&str]) -> serde_json::Value {
        let mut full = vec!["get"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["-o", "json"]);
        let (code, out, err) = self.kubectl(context, &full);
        assert_eq!(code, 0, "kubectl {full:?} failed: {err}");
        serde_json::from_str(&out).expect("kubectl prints JSON")
    }

    /// Whether `kubectl get <args>` finds the object (any other failure panics).
    fn exists(&self, context: &str, args: &[&str]) -> bool {
        let mut full = vec!["get"];
        full.extend_from_slice(args);
        let (code, _, err) = self.kubectl(context, &full);
        if code != 0 {
            assert!(
                err.contains("NotFound") || err.contains("not found"),
                "{err}"
            );
        }
        code == 0
    }
}
