//! `gitfleet run` following a remote repository: a bare repository pushed to with the git CLI,
//! reached by the daemon over `file://` (mirrored into its state directory and fetched with gix),
//! members served by `gitfleet sim`.

mod common;
use common::kubectl::Kubectl as _;

use std::path::Path;

use common::daemon::{await_until, Daemon};
use common::sim::SimFleet;
use common::{gitfleet, Repo};

const FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
  - name: bravo
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
"#;

const MEMBERS: &str = "\
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: alpha}
spec: {identity: {name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: bravo}
spec: {identity: {name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
";

fn app(version: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shop-config, namespace: shop}}\n\
         data: {{version: \"{version}\"}}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: shop}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: shop}}]\n\
         \x20 strategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: 1, maxSurge: 0}}}}\n"
    )
}

/// A bare repository (the "server") and a work clone that pushes to it.
struct Remote {
    bare: Repo,
    work: Repo,
}

impl Remote {
    fn new() -> Remote {
        let bare = Repo {
            dir: tempfile::tempdir().unwrap(),
        };
        bare.git(&["init", "-q", "--bare", "-b", "main"]);
        let work = Repo::new();
        work.git(&["remote", "add", "origin", bare.path().to_str().unwrap()]);
        Remote { bare, work }
    }

    fn url(&self) -> String {
        format!("file://{}", self.bare.path().display())
    }

    /// Commits `shop.yaml` at `version` and pushes it (forced when `force`).
    fn push(&self, version: &str, force: bool) -> String {
        self.work.write("members.yaml", MEMBERS);
        self.work.write("shop.yaml", &app(version));
        let id = self.work.commit(&format!("shop {version}"));
        let mut args = vec!["push", "-q", "origin", "main"];
        if force {
            args.push("--force");
        }
        self.work.git(&args);
        id
    }
}

fn run_once(repo: &str, sim: &SimFleet, state: &Path) -> common::Run {
    gitfleet(&[
        "run",
        "--once",
        "--repo",
        repo,
        "--kubeconfig",
        sim.kubeconfig.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ])
}

/// The applied version, or "" while the ConfigMap is not there (for polling).
fn config_version(sim: &SimFleet, member: &str) -> String {
    let get = ["get", "configmap", "shop-config", "-n", "shop"];
    let (code, out, _) = sim.kubectl(
        member,
        &[&get[..], &["-o", "jsonpath={.data.version}"]].concat(),
    );
    if code == 0 {
        out
    } else {
        String::new()
    }
}

fn assert_version(sim: &SimFleet, want: &str) {
    for m in ["alpha", "bravo"] {
        let cm = sim.get_json(m, &["configmap", "shop-config", "-n", "shop"]);
        assert_eq!(cm["data"]["version"], want, "{m}");
    }
}

#[test]
fn once_follows_pushes_and_a_force_push_through_a_file_url() {
    let sim = SimFleet::start(FLEET);
    let remote = Remote::new();
    let state = tempfile::tempdir().unwrap();
    let first = remote.push("1", false);

    let r = run_once(&remote.url(), &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_version(&sim, "1");
    let mirror = state.path().join("repo.git");
    assert!(
        mirror.join("HEAD").exists(),
        "the mirror lives in the state dir"
    );
    let mirrored = |branch: &str| {
        let out = std::process::Command::new("git")
            .args(["--git-dir", mirror.to_str().unwrap(), "rev-parse", branch])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(mirrored("refs/heads/main"), first);

    // A second push: the next run re-uses the mirror, fetches, and rolls the update out.
    let second = remote.push("2", false);
    let r = run_once(&remote.url(), &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_version(&sim, "2");
    assert_eq!(mirrored("refs/heads/main"), second);

    // History rewritten on the server: the mirror is force-updated, the new head is served
    // and the rewrite is logged.
    remote.work.git(&["reset", "-q", "--hard", &first]);
    let rewritten = remote.push("3", true);
    let r = run_once(&remote.url(), &sim, state.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_version(&sim, "3");
    assert_eq!(mirrored("refs/heads/main"), rewritten);
    assert!(
        r.stderr.contains("history rewritten"),
        "the force-push is logged: {}",
        r.stderr
    );
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.path().join("daemon.json")).unwrap()).unwrap();
    assert_eq!(saved["serving"], rewritten.as_str());
}

#[test]
fn an_unreachable_url_fails_once_naming_the_url() {
    let sim = SimFleet::start(FLEET);
    let state = tempfile::tempdir().unwrap();
    let gone = tempfile::tempdir().unwrap();
    let url = format!("file://{}/nothing-here.git", gone.path().display());
    let r = run_once(&url, &sim, state.path());
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("cannot fetch"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&url),
        "the message names the URL: {}",
        r.stderr
    );
}

#[test]
fn a_missing_branch_on_the_remote_is_named() {
    let sim = SimFleet::start(FLEET);
    let remote = Remote::new();
    remote.push("1", false);
    let state = tempfile::tempdir().unwrap();
    let r = gitfleet(&[
        "run",
        "--once",
        "--repo",
        &remote.url(),
        "--branch",
        "release",
        "--kubeconfig",
        sim.kubeconfig.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("\"release\""), "{}", r.stderr);
    assert!(r.stderr.contains(&remote.url()), "{}", r.stderr);
}

/// The webhook and liveness, as the tests use them.
impl Daemon {
    fn hook(&self) {
        let status = ureq::post(&format!("{}/hooks/git", self.addr))
            .header("X-Gitlab-Token", "s3cret")
            .send(&br#"{"ref":"refs/heads/main"}"#[..])
            .map(|r| r.status().as_u16())
            .unwrap();
        assert_eq!(status, 202);
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

#[test]
fn the_daemon_fetches_on_the_webhook_and_outlives_a_server_that_is_down() {
    let sim = SimFleet::start(FLEET);
    let remote = Remote::new();
    remote.push("1", false);
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let mut daemon = Daemon::start(
        remote.url(),
        &sim.kubeconfig,
        &state.path().join("state"),
        &secret,
        // An hour away: only the webhook makes the daemon fetch.
        "60m",
    );
    await_until("the first commit on every member", || {
        ["alpha", "bravo"]
            .iter()
            .all(|m| config_version(&sim, m) == "1")
    });

    // The server goes away: the webhook's fetch fails, is logged with the URL, and the daemon
    // keeps running with what is deployed untouched.
    let moved = remote.bare.path().with_extension("away");
    std::fs::rename(remote.bare.path(), &moved).unwrap();
    daemon.hook();
    daemon.await_log(&["cannot fetch", &remote.url()]);
    assert!(daemon.alive(), "a failed fetch does not stop the daemon");
    assert_version(&sim, "1");

    // Back again, with a new commit: the next webhook fetches and rolls it out.
    std::fs::rename(&moved, remote.bare.path()).unwrap();
    remote.push("2", false);
    daemon.hook();
    await_until("the second commit on every member", || {
        ["alpha", "bravo"]
            .iter()
            .all(|m| config_version(&sim, m) == "2")
    });
    assert!(daemon.alive());
}

/// The token for an HTTPS remote comes from a file and goes to the Git server in-process: it is
/// in no process's command line, no log line (even at debug level), the status API or the
/// metrics. The server (git http-backend behind basic auth) refuses a fetch without it.
#[test]
fn a_token_from_a_file_reaches_the_git_server_and_nothing_else() {
    use std::ffi::OsStr;
    const TOKEN: &str = "tok-9f3c1e7a-SECRET";
    let sim = SimFleet::start(FLEET);
    let remote = Remote::new();
    remote.push("1", false);
    let ca = common::git_http::TestCa::new();
    let server = common::git_http::GitHttp::start(
        remote.bare.path().parent().unwrap(),
        "fleet-bot",
        TOKEN,
        &ca,
    );
    let name = remote.bare.path().file_name().unwrap().to_str().unwrap();
    let url = format!("{}/{name}", server.base);
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "tok-wrong-SECRET\n").unwrap();

    let ca_file = ca.ca_cert.to_str().unwrap();
    // Without credentials, and with the wrong ones, the server refuses: the fetch fails, named.
    let run = gitfleet(&[
        "run",
        "--once",
        "--repo",
        &url,
        "--kubeconfig",
        sim.kubeconfig.to_str().unwrap(),
        "--state-dir",
        dir.path().join("s0").to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--git-ca-file",
        ca_file,
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("cannot fetch"), "{}", run.stderr);
    let run = gitfleet(&[
        "run",
        "--once",
        "--repo",
        &url,
        "--kubeconfig",
        sim.kubeconfig.to_str().unwrap(),
        "--state-dir",
        dir.path().join("s1").to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--git-username",
        "fleet-bot",
        "--git-password-file",
        wrong.to_str().unwrap(),
        "--git-ca-file",
        ca_file,
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("cannot fetch"), "{}", run.stderr);
    assert!(!run.stderr.contains("tok-wrong"), "{}", run.stderr);

    // With the token file the daemon fetches and rolls out.
    let hook = dir.path().join("hook");
    std::fs::write(&hook, "hook-secret\n").unwrap();
    let daemon = common::daemon::Daemon::start_with(
        &url,
        &sim.kubeconfig,
        &dir.path().join("state"),
        &hook,
        "60m",
        &[
            OsStr::new("--git-token-file"),
            token.as_os_str(),
            OsStr::new("--git-username"),
            OsStr::new("fleet-bot"),
            OsStr::new("--git-ca-file"),
            ca.ca_cert.as_os_str(),
        ],
        &[],
    );
    let mut logs: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !["alpha", "bravo"]
        .iter()
        .all(|m| config_version(&sim, m) == "1")
    {
        logs.extend(daemon.lines.try_iter());
        assert!(
            std::time::Instant::now() < deadline,
            "the commit fetched over HTTP on every member; logs:\n{}",
            logs.join("\n")
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        !server.seen.lock().unwrap().is_empty(),
        "the server saw credentials"
    );

    // The process list: every process's command line and the daemon's environment.
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        for file in ["cmdline", "environ"] {
            if file == "environ" && entry.file_name() != *daemon.child.id().to_string() {
                continue;
            }
            if let Ok(bytes) = std::fs::read(entry.path().join(file)) {
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(TOKEN),
                    "{:?} {file}",
                    entry.path()
                );
            }
        }
    }
    // The status API, `gitfleet status` and the metrics.
    for path in ["/api/v1/placements", "/metrics", "/api/v1/inventory"] {
        let body = http_get(&daemon.addr, path);
        assert!(body.starts_with("HTTP/1.1 200"), "{path}: {body}");
        assert!(!body.contains(TOKEN), "{path}: {body}");
    }
    let status = gitfleet(&["status", "--server", &daemon.addr, "-o", "json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(!status.stdout.contains(TOKEN) && !status.stderr.contains(TOKEN));
    // The logs, so far: the daemon logged the fetch and the rollout, never the token.
    logs.extend(daemon.lines.try_iter());
    assert!(!logs.is_empty());
    for line in &logs {
        assert!(!line.contains(TOKEN), "{line}");
    }
}

/// A plain HTTP GET of `path` on the daemon (`http://host:port`): status line, headers, body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let host = addr.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

/// The status API, as a client sees it: status code and body.
fn api_get(daemon: &Daemon, path: &str) -> (u16, String) {
    match ureq::get(&format!("{}{path}", daemon.addr))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
    {
        Ok(mut r) => (
            r.status().as_u16(),
            r.body_mut().read_to_string().unwrap_or_default(),
        ),
        Err(e) => panic!("{path}: {e}"),
    }
}

fn source_of(daemon: &Daemon) -> serde_json::Value {
    let (_, body) = api_get(daemon, "/api/v1/placements");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    doc["source"].clone()
}

/// A remote that fails shows in the status API (`source`), `gitfleet status`,
/// `/readyz` (after `--ready-fetch-failures` failures in a row) and the metrics; the daemon
/// recovers when the remote is back; a member removed from the repository loses its
/// `gitfleet_member_healthy` series.
#[test]
fn a_failing_remote_shows_in_status_readiness_and_metrics() {
    use std::ffi::OsStr;
    let sim = SimFleet::start(FLEET);
    let remote = Remote::new();
    let first = remote.push("1", false);
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let daemon = Daemon::start_with(
        remote.url(),
        &sim.kubeconfig,
        &state.path().join("state"),
        &secret,
        // An hour away: only the webhook makes the daemon fetch, so failures are counted exactly.
        "60m",
        &[OsStr::new("--ready-fetch-failures"), OsStr::new("2")],
        &[],
    );
    await_until("the first commit on every member", || {
        ["alpha", "bravo"]
            .iter()
            .all(|m| config_version(&sim, m) == "1")
    });
    await_until("readiness", || api_get(&daemon, "/readyz").0 == 200);
    let source = source_of(&daemon);
    assert_eq!(source["url"], remote.url().as_str(), "{source}");
    assert_eq!(source["branch"], "main", "{source}");
    assert_eq!(source["kind"], "remote", "{source}");
    assert_eq!(source["head"], first.as_str(), "{source}");
    assert_eq!(source["consecutiveFailures"], 0, "{source}");
    assert!(source["lastSuccess"].as_u64().unwrap() > 0, "{source}");
    assert!(source.get("lastError").is_none(), "{source}");
    let (_, metrics) = api_get(&daemon, "/metrics");
    assert!(
        metrics.contains("gitfleet_git_fetch_errors_total 0"),
        "{metrics}"
    );
    let success = metrics
        .lines()
        .find_map(|l| l.strip_prefix("gitfleet_git_last_fetch_success_timestamp_seconds "))
        .unwrap_or_else(|| panic!("{metrics}"));
    assert_eq!(
        success.parse::<u64>().unwrap(),
        source["lastSuccess"].as_u64().unwrap()
    );
    for m in ["alpha", "bravo"] {
        assert!(
            metrics.contains(&format!("gitfleet_member_healthy{{member=\"{m}\"}} 1")),
            "{metrics}"
        );
    }

    // The server goes away: one failure is shown, the daemon is still ready (1 < 2).
    let moved = remote.bare.path().with_extension("away");
    std::fs::rename(remote.bare.path(), &moved).unwrap();
    daemon.hook();
    await_until("one failure in the status", || {
        source_of(&daemon)["consecutiveFailures"] == 1
    });
    let source = source_of(&daemon);
    let error = source["lastError"].as_str().unwrap();
    assert!(
        error.contains("cannot fetch") && error.contains(&remote.url()),
        "{source}"
    );
    assert_eq!(api_get(&daemon, "/readyz").0, 200);
    // The second failure in a row makes it not ready, saying why.
    daemon.hook();
    await_until("two failures in the status", || {
        source_of(&daemon)["consecutiveFailures"] == 2
    });
    let (code, body) = api_get(&daemon, "/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("the git source failed 2 times in a row") && body.contains(&remote.url()),
        "{body}"
    );
    let (_, metrics) = api_get(&daemon, "/metrics");
    assert!(
        metrics.contains("gitfleet_git_fetch_errors_total 2"),
        "{metrics}"
    );
    let status = gitfleet(&["status", "--server", &daemon.addr]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status
            .stdout
            .contains(&format!("source {}  fetched", remote.url())),
        "{}",
        status.stdout
    );
    assert!(
        status
            .stdout
            .contains("SOURCE FAILING: 2 failure(s) in a row"),
        "{}",
        status.stdout
    );
    // What is deployed stays.
    assert_version(&sim, "1");

    // Back, with a commit that removes bravo from the repository: the next fetch succeeds,
    // the daemon is ready again, and bravo's health series is gone (alpha's stays).
    std::fs::rename(&moved, remote.bare.path()).unwrap();
    remote
        .work
        .write("members.yaml", MEMBERS.split("---\n").next().unwrap());
    let without_bravo = remote.work.commit("bravo leaves the fleet");
    remote.work.git(&["push", "-q", "origin", "main"]);
    daemon.hook();
    await_until("the commit without bravo served", || {
        let (_, body) = api_get(&daemon, "/api/v1/placements");
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        doc["serving"] == without_bravo.as_str()
    });
    let source = source_of(&daemon);
    assert_eq!(source["consecutiveFailures"], 0, "{source}");
    assert!(
        source["lastError"].is_string(),
        "the last error is kept: {source}"
    );
    assert_eq!(api_get(&daemon, "/readyz").0, 200);
    await_until("bravo's health series gone", || {
        let (_, metrics) = api_get(&daemon, "/metrics");
        !metrics.contains("gitfleet_member_healthy{member=\"bravo\"}")
            && metrics.contains("gitfleet_member_healthy{member=\"alpha\"} 1")
    });
}
