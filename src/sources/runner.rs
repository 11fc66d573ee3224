//! Running a rendering tool (`kustomize build`, `helm template`) on
//! files gitfleet wrote into a temporary folder, bounded: a time limit, an output-size limit, no
//! network and no inherited environment. The tool is killed when a bound is passed.
//!
//! The edge of [`super`]: it spawns processes and knows nothing of what they render.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// An address where nothing listens: the proxy every network request of a tool is sent to, so
/// a request that slipped past gitfleet's own checks fails at once instead of reaching out.
const NO_NETWORK_PROXY: &str = "http://127.0.0.1:9";

/// How much of a failing tool's standard error is kept for the diagnostic.
const STDERR_LIMIT: usize = 8 * 1024;

/// The bounds of one rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub time: Duration,
    /// Bytes of rendered output.
    pub output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time: Duration::from_secs(60),
            output: 64 * 1024 * 1024,
        }
    }
}

/// A rendering tool: its name, the program run, and how to install it.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: &'static str,
    pub program: PathBuf,
    /// The command that installs it, for the error when it is missing.
    pub install: &'static str,
}

/// Why a tool gave no output. Its text goes into diagnostics: it names the tool and never holds
/// the rendered output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error(
        "{tool} is not installed ({program} cannot be run: {message}): install it with \
         `{install}`, or name the program with --{tool} (GITFLEET_{upper})",
        upper = tool.to_uppercase()
    )]
    NotFound {
        tool: &'static str,
        program: String,
        message: String,
        install: &'static str,
    },
    #[error("{tool} failed ({status}): {stderr}")]
    Failed {
        tool: &'static str,
        status: String,
        stderr: String,
    },
    #[error("{tool} did not finish within {}s and was stopped", limit.as_secs_f64())]
    TimedOut { tool: &'static str, limit: Duration },
    #[error("{tool} printed more than {limit} bytes and was stopped")]
    TooLarge { tool: &'static str, limit: usize },
    #[error("cannot run {tool}: {message}")]
    Io { tool: &'static str, message: String },
}

impl RunError {
    /// Whether running the same inputs again may succeed (a timeout on a busy machine), so the
    /// outcome must not be cached.
    pub fn is_transient(&self) -> bool {
        matches!(self, RunError::TimedOut { .. } | RunError::Io { .. })
    }
}

impl Tool {
    /// Runs the tool with `args` in `dir` within `limits`; its standard output.
    pub fn run(&self, args: &[&str], dir: &Path, limits: &Limits) -> Result<Vec<u8>, RunError> {
        self.run_with(args, dir, &[], limits)
    }

    /// [`Tool::run`] with `env` set as well (a tool's own settings, such as where helm keeps
    /// its cache, pointed into the temporary folder).
    pub fn run_with(
        &self,
        args: &[&str],
        dir: &Path,
        env: &[(&str, PathBuf)],
        limits: &Limits,
    ) -> Result<Vec<u8>, RunError> {
        let tool = self.name;
        let mut command = Command::new(&self.program);
        command
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "")
            .env("HOME", dir)
            .env("TMPDIR", dir)
            .env("XDG_CONFIG_HOME", dir)
            .env("XDG_CACHE_HOME", dir);
        for proxy in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
        ] {
            command.env(proxy, NO_NETWORK_PROXY);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| RunError::NotFound {
            tool,
            program: self.program.display().to_string(),
            message: e.to_string(),
            install: self.install,
        })?;
        let start = Instant::now();
        let (tx, rx) = mpsc::channel();
        let mut stdout = child.stdout.take().expect("piped");
        let output_limit = limits.output;
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let result = (&mut stdout)
                .take(output_limit as u64 + 1)
                .read_to_end(&mut out);
            let _ = tx.send(result.map(|_| out));
        });
        let mut stderr = child.stderr.take().expect("piped");
        let stderr_reader = std::thread::spawn(move || {
            let mut err = Vec::new();
            let _ = (&mut stderr)
                .take(STDERR_LIMIT as u64)
                .read_to_end(&mut err);
            // Drain the rest so the tool never blocks on a full pipe.
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            err
        });
        let stop = |child: &mut std::process::Child| {
            let _ = child.kill();
            let _ = child.wait();
        };
        let out = match rx.recv_timeout(limits.time) {
            Ok(Ok(out)) if out.len() > output_limit => {
                stop(&mut child);
                return Err(RunError::TooLarge {
                    tool,
                    limit: output_limit,
                });
            }
            Ok(Ok(out)) => out,
            Ok(Err(e)) => {
                stop(&mut child);
                return Err(RunError::Io {
                    tool,
                    message: e.to_string(),
                });
            }
            Err(_) => {
                stop(&mut child);
                return Err(RunError::TimedOut {
                    tool,
                    limit: limits.time,
                });
            }
        };
        // The output is closed; the process is ending. Bound the wait by what is left.
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if start.elapsed() >= limits.time => {
                    stop(&mut child);
                    return Err(RunError::TimedOut {
                        tool,
                        limit: limits.time,
                    });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => {
                    return Err(RunError::Io {
                        tool,
                        message: e.to_string(),
                    })
                }
            }
        };
        let stderr = stderr_reader.join().unwrap_or_default();
        if !status.success() {
            return Err(RunError::Failed {
                tool,
                status: status.to_string(),
                stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh() -> Tool {
        Tool {
            name: "sh",
            program: "/bin/sh".into(),
            install: "apt-get install dash",
        }
    }

    fn run(script: &str, limits: Limits) -> Result<Vec<u8>, RunError> {
        let dir = tempfile::tempdir().unwrap();
        sh().run(&["-c", script], dir.path(), &limits)
    }

    #[test]
    fn output_is_returned_and_the_environment_is_not_inherited() {
        // HOME is always set in a test run, and must not reach the tool as it was.
        let home = std::env::var("HOME").unwrap_or_default();
        let out = run("echo \"$HOME|$HTTPS_PROXY|$PATH\"", Limits::default()).unwrap();
        assert!(!String::from_utf8_lossy(&out).starts_with(&format!("{home}|")));
        assert!(
            String::from_utf8(out)
                .unwrap()
                .ends_with("|http://127.0.0.1:9|\n"),
            "the proxy is the dead one and PATH is empty"
        );
    }

    #[test]
    fn a_tool_that_never_ends_is_stopped_at_the_time_limit() {
        let limits = Limits {
            time: Duration::from_millis(300),
            ..Limits::default()
        };
        let err = run("while :; do :; done", limits).unwrap_err();
        assert_eq!(
            err,
            RunError::TimedOut {
                tool: "sh",
                limit: limits.time
            }
        );
        assert!(err.is_transient());
    }

    #[test]
    fn a_tool_that_prints_too_much_is_stopped() {
        let limits = Limits {
            output: 1000,
            ..Limits::default()
        };
        let err = run("while :; do echo aaaaaaaaaaaaaaaaaaaa; done", limits).unwrap_err();
        assert_eq!(
            err,
            RunError::TooLarge {
                tool: "sh",
                limit: 1000
            }
        );
    }

    #[test]
    fn a_failure_keeps_the_tools_message_and_a_missing_tool_says_how_to_install_it() {
        let err = run("echo bad input >&2; exit 3", Limits::default()).unwrap_err();
        assert_eq!(err.to_string(), "sh failed (exit status: 3): bad input");
        let missing = Tool {
            program: "/nonexistent/kustomize".into(),
            name: "kustomize",
            install: "go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2",
        };
        let err = missing
            .run(&["build"], Path::new("/"), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("kustomize is not installed (/nonexistent/kustomize cannot be run:"),
            "{err}"
        );
        assert!(
            err.ends_with("install it with `go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2`, or name the program with --kustomize (GITFLEET_KUSTOMIZE)"),
            "{err}"
        );
    }
}
