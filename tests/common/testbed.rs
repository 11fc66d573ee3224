//! The real-member tier: `testbed up` (testbed/, real kube-apiserver, controller-manager,
//! scheduler and kwok per member) started as a child process, awaited until it prints its
//! `ready` line, stopped when dropped. It reads the same fleet files as `gitfleet sim` and writes
//! a kubeconfig of the same shape (TLS with the lab's CA, a client certificate as the user).
//!
//! The binary is built by `bash testbed/build.sh`; tests find it through `GITFLEET_TESTBED`
//! (a path) or in the folder that script builds into. Without it, real-member tests are skipped
//! with a note on the terminal, unless `GITFLEET_TESTBED_REQUIRED=1` (CI) makes that a failure.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// How long a test bed may take to print `ready` (API servers on a busy two-core machine take
/// tens of seconds); a bound on a hang, not a timing assumption: the supervisor waits on
/// /readyz and node conditions.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// How to build and point at the test bed, for skip notes and failures.
pub const HOW_TO_RUN: &str = "build it with `bash testbed/build.sh` (Go needed; the first build \
     takes several minutes), or set GITFLEET_TESTBED=/path/to/testbed";

/// Where the test bed binary is, if built; panics when it is older than its sources (a stale
/// test bed would test the wrong thing) or when it is required and missing.
pub fn binary() -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(find).clone()
}

fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("GITFLEET_TESTBED").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "GITFLEET_TESTBED={} is not a file",
            path.display()
        );
        return Some(path);
    }
    let dir = build_dir();
    let path = dir.join("testbed");
    if path.is_file() {
        let stamp = std::fs::read_to_string(dir.join("stamp")).unwrap_or_default();
        let built_from = stamp.split_whitespace().next().unwrap_or("");
        assert_eq!(
            built_from,
            source_hash(),
            "the test bed at {} was built from other sources than testbed/ holds now: run \
             `bash testbed/build.sh` again",
            path.display()
        );
        return Some(path);
    }
    let required = std::env::var("GITFLEET_TESTBED_REQUIRED").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "GITFLEET_TESTBED_REQUIRED=1 but no test bed at {}: {HOW_TO_RUN}",
        path.display()
    );
    None
}

/// The folder `testbed/build.sh` builds into.
fn build_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GITFLEET_TESTBED_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("gitfleet").join("testbed")
}

/// The hash `testbed/build.sh` stamps: each of go.mod, go.sum and the `.go` files in byte order
/// of their names, as its name, a newline and its content.
fn source_hash() -> String {
    let dir = super::manifest_dir().join("testbed");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n == "go.mod" || n == "go.sum" || n.ends_with(".go"))
        .collect();
    names.sort();
    let mut hasher = Sha256::new();
    for name in names {
        hasher.update(name.as_bytes());
        hasher.update(b"\n");
        hasher.update(std::fs::read(dir.join(&name)).unwrap());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Says once per test binary, on the terminal (past the test harness's capture), that the
/// real-member tier did not run.
pub fn note_skipped() {
    static NOTED: OnceLock<()> = OnceLock::new();
    NOTED.get_or_init(|| {
        let _ = writeln!(
            std::io::stderr(),
            "\nnote: real-member tier SKIPPED in this test binary (no test bed): {HOW_TO_RUN}\n"
        );
    });
}

/// A running test bed.
pub struct Testbed {
    child: Child,
    /// Held open: the supervisor stops when its standard input closes.
    stdin: Option<ChildStdin>,
    pub kubeconfig: PathBuf,
    /// `http://127.0.0.1:<port>` of the admin endpoint.
    pub admin: String,
    /// What it printed up to and including its `ready` line.
    pub banner: String,
    stderr: Arc<Mutex<String>>,
}

impl Testbed {
    /// Starts `testbed up` on `fleet` (a fleet file), with its state and kubeconfig in `dir`.
    pub fn start(binary: &Path, fleet: &Path, dir: &Path) -> Testbed {
        let kubeconfig = dir.join("kubeconfig");
        let mut child = Command::new(binary)
            .arg("up")
            .arg("--fleet")
            .arg(fleet)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .arg("--state-dir")
            .arg(dir.join("testbed"))
            .arg("--exit-on-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} up: {e}", binary.display()));
        let stdin = child.stdin.take();
        let stderr = Arc::new(Mutex::new(String::new()));
        {
            let stderr = stderr.clone();
            let mut pipe = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    stderr
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let (tx, rx) = mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut banner = String::new();
        let mut admin = None;
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    banner.push_str(&line);
                    banner.push('\n');
                    if let Some(a) = line.strip_prefix("admin: ") {
                        admin = Some(a.trim_end_matches("/members").to_string());
                    }
                    if line.starts_with("testbed: ready") {
                        break;
                    }
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "the test bed did not become ready ({e}); it printed:\n{banner}\n{}",
                        stderr.lock().unwrap()
                    );
                }
            }
        }
        Testbed {
            child,
            stdin,
            kubeconfig,
            admin: admin.expect("the test bed prints its admin address"),
            banner,
            stderr,
        }
    }

    /// What the supervisor wrote on stderr so far (notes, and a failing component's log tail).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // Closing its standard input makes the supervisor stop every component and exit.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Killed, its children follow it (they die with their parent).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
