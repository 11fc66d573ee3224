//! A simulated fleet for end-to-end tests: the real `gitfleet sim` binary started as a child
//! process, awaited until it prints its `ready` line, killed when dropped. Tests reach its
//! members only through the kubeconfig it writes, as a user reaches real clusters.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the simulator may take to print `ready` before a test fails (it binds loopback
/// ports only; this bounds a hang, it is not a timing assumption).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

pub struct SimFleet {
    child: Child,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    /// `http://127.0.0.1:<port>` of the admin endpoint.
    pub admin: String,
    /// The admin endpoint's bearer token, read from the file the simulator names.
    pub admin_token: String,
    /// What the simulator printed up to and including its `ready` line.
    pub banner: String,
}

impl SimFleet {
    /// Starts `gitfleet sim` on a fleet file given as YAML text.
    pub fn start(fleet_yaml: &str) -> SimFleet {
        let dir = tempfile::tempdir().expect("tempdir");
        let fleet = dir.path().join("fleet.yaml");
        std::fs::write(&fleet, fleet_yaml).unwrap();
        Self::start_file(&fleet, dir)
    }

    /// Starts `gitfleet sim` on a fleet file on disk; `dir` holds the kubeconfig it writes.
    pub fn start_file(fleet: &Path, dir: tempfile::TempDir) -> SimFleet {
        Self::start_args(fleet, dir, &[])
    }

    /// [`SimFleet::start_file`] with more arguments for `gitfleet sim`.
    pub fn start_args(fleet: &Path, dir: tempfile::TempDir, extra: &[&str]) -> SimFleet {
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
            .arg("sim")
            .arg("--fleet")
            .arg(fleet)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .args(["--admin", "127.0.0.1:0"])
            .args(extra)
            .env_remove("GITFLEET_SIM_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("gitfleet sim starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        // The reader keeps draining stdout after `ready` so the simulator never blocks on a
        // full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Nobody listens any more: keep draining.
                    continue;
                }
            }
        });
        let mut banner = String::new();
        let mut admin = None;
        let mut admin_token = None;
        loop {
            let line = match rx.recv_timeout(READY_TIMEOUT) {
                Ok(line) => line,
                Err(e) => {
                    let _ = child.kill();
                    panic!("gitfleet sim did not become ready ({e}); it printed:\n{banner}");
                }
            };
            banner.push_str(&line);
            banner.push('\n');
            if let Some(a) = line.strip_prefix("admin: ") {
                admin = Some(a.trim_end_matches("/members").to_string());
            }
            if let Some(f) = line.strip_prefix("admin token file: ") {
                let token = std::fs::read_to_string(f).expect("the admin token file");
                admin_token = Some(token.trim().to_string());
            }
            if line.starts_with("gitfleet sim: ready") {
                break;
            }
        }
        SimFleet {
            child,
            dir,
            kubeconfig,
            admin: admin.expect("the simulator prints its admin address"),
            admin_token: admin_token.expect("the simulator names its admin token file"),
            banner,
        }
    }

    /// Changes a member's faults at run time through the admin endpoint, e.g.
    /// `{"down": true}` or `{"errorRate": 1.0, "errorCodes": [503]}`.
    pub fn set_faults(&self, member: &str, faults: serde_json::Value) {
        let url = format!("{}/members/{member}/faults", self.admin);
        let mut response = ureq::post(&url)
            .header("authorization", self.admin_auth())
            .header("content-type", "application/json")
            .send(faults.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        let _ = response.body_mut().read_to_string();
    }

    /// What the admin endpoint says of a member: `server`, `token`, `faults`, `injectedErrors`.
    /// The member's change log from the admin endpoint (`resource` like `deployments`), each
    /// entry with a sequence number shared by all members.
    pub fn changes(&self, member: &str, resource: &str) -> Vec<serde_json::Value> {
        let url = format!(
            "{}/members/{member}/changes?resource={resource}",
            self.admin
        );
        let body = ureq::get(&url)
            .header("authorization", self.admin_auth())
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["changes"].as_array().cloned().unwrap_or_default()
    }

    pub fn member(&self, name: &str) -> serde_json::Value {
        let url = format!("{}/members/{name}", self.admin);
        let mut response = ureq::get(&url)
            .header("authorization", self.admin_auth())
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let text = response.body_mut().read_to_string().unwrap();
        serde_json::from_str(&text).expect("the admin endpoint answers JSON")
    }

    /// The `Authorization` header value for the admin endpoint.
    pub fn admin_auth(&self) -> String {
        format!("Bearer {}", self.admin_token)
    }

    /// One plain HTTP/1.1 request to a member (`Connection: close`), with the given bearer token
    /// (none: no `Authorization` header), for what kubectl does not show: status codes, headers,
    /// raw bodies.
    pub fn http(
        &self,
        member: &str,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: &str,
    ) -> HttpResponse {
        let (mut stream, host) = self.connect(member);
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(t) = token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        HttpResponse::parse(&String::from_utf8_lossy(&raw))
    }

    /// Opens a watch (`GET path`, which must ask for `watch=1`) and reads its events until
    /// `done` says the events so far suffice, or panics after a bounded wait. `during` runs once
    /// the request is sent, to cause the events.
    pub fn watch_events(
        &self,
        member: &str,
        path: &str,
        during: impl FnOnce(),
        done: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Vec<serde_json::Value> {
        let (mut stream, host) = self.connect(member);
        let token = self.member(member)["token"].as_str().unwrap().to_string();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nAccept-Encoding: identity\r\n\r\n"
        )
        .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        during();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let events = watch_events_in(&raw);
            if done(&events) {
                return events;
            }
            assert!(
                Instant::now() < deadline,
                "watch {path}: still waiting; got {}",
                String::from_utf8_lossy(&raw)
            );
            match stream.read(&mut buf) {
                Ok(0) => panic!(
                    "watch {path}: the server closed the stream early: {}",
                    String::from_utf8_lossy(&raw)
                ),
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("watch {path}: {e}"),
            }
        }
    }

    fn connect(&self, member: &str) -> (TcpStream, String) {
        let server = self.member(member)["server"].as_str().unwrap().to_string();
        let host = server.trim_start_matches("http://").to_string();
        let stream = TcpStream::connect(&host).unwrap_or_else(|e| panic!("connect {host}: {e}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        (stream, host)
    }
}

impl super::kubectl::Kubectl for SimFleet {
    fn kubectl_paths(&self) -> (&Path, PathBuf) {
        (&self.kubeconfig, self.dir.path().join("kube-cache"))
    }
}

/// Polls `f` until it returns `Some`, or panics with `what` after a bounded wait (a bound on a
/// hang, not a timing assumption).
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A plain HTTP response: status code, headers (names in lowercase) and body.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    fn parse(raw: &str) -> HttpResponse {
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {raw:?}"));
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        HttpResponse {
            status,
            headers,
            body: body.to_string(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// The complete watch events in a chunked response read so far: each is one JSON object on a
/// line of its own (chunk-size lines are not JSON objects and are skipped).
fn watch_events_in(raw: &[u8]) -> Vec<serde_json::Value> {
    let text = String::from_utf8_lossy(raw);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    body.split(['\r', '\n'])
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

impl Drop for SimFleet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
