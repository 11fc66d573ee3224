//! The daemon's HTTP API under hostile clients, on the real binary: an endless header line and
//! hundreds of idle connections neither grow its memory nor keep `/healthz` from answering,
//! and thousands leave `/healthz` and `/readyz` answering within a kubelet probe's time;
//! oversized bodies and unknown paths get JSON problem bodies, never Kubernetes `Status`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::daemon::{await_until, Daemon, OneMember};
use common::sim::SimFleet;
use common::Repo;

const FLEET: &str = "anonymousAuth: true\nmembers:\n  - name: alpha\n";

/// How long `/healthz` may take under load before the test fails: a bound on a hang, far above
/// the few milliseconds it takes.
const ANSWER_DEADLINE: Duration = Duration::from_secs(5);

fn host(daemon: &Daemon) -> String {
    daemon.addr.trim_start_matches("http://").to_string()
}

/// The daemon's resident memory in KiB.
fn rss_kib(daemon: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

/// One request on a fresh connection (`Connection: close`); returns status line and body and
/// how long the answer took.
fn request(daemon: &Daemon, head: &str, body: &[u8]) -> (String, String, Duration) {
    let started = Instant::now();
    let addr = host(daemon).parse().unwrap();
    let mut s = TcpStream::connect_timeout(&addr, ANSWER_DEADLINE)
        .unwrap_or_else(|e| panic!("cannot connect for {head:?} within {ANSWER_DEADLINE:?}: {e}"));
    s.set_read_timeout(Some(ANSWER_DEADLINE)).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("no answer to {head:?} within {ANSWER_DEADLINE:?}: {e}"));
    let elapsed = started.elapsed();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    (status, body.to_string(), elapsed)
}

fn healthz(daemon: &Daemon) -> Duration {
    let (status, body, took) = request(
        daemon,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "ok"));
    took
}

#[test]
fn an_endless_header_line_and_500_idle_connections_do_not_take_the_daemon_down() {
    let fleet = OneMember::start();
    let daemon = &fleet.daemon;
    // Measured once the first reconcile is done, so that its own allocations do not count.
    await_until("readiness", || {
        request(
            daemon,
            "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"",
        )
        .0 == "HTTP/1.1 200 OK"
    });
    healthz(daemon);
    let before = rss_kib(daemon);

    // 500 connections that never send a byte.
    let idle: Vec<TcpStream> = (0..500)
        .map(|_| TcpStream::connect(host(daemon)).unwrap())
        .collect();
    // Two endless header lines at once: 16 MiB each, far more than the socket buffers hold, so
    // the writes fail once the daemon stops reading.
    let endless: Vec<_> = (0..2)
        .map(|_| {
            let addr = host(daemon);
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
                s.write_all(b"GET /healthz HTTP/1.1\r\nX-Endless: ")
                    .unwrap();
                let chunk = vec![b'a'; 64 * 1024];
                let mut sent = 0usize;
                for _ in 0..256 {
                    if s.write_all(&chunk).is_err() {
                        return (true, sent);
                    }
                    sent += chunk.len();
                }
                (false, sent)
            })
        })
        .collect();
    let took = healthz(daemon);
    for t in endless {
        let (refused, sent) = t.join().unwrap();
        assert!(refused, "the daemon read {sent} bytes of one header line");
        eprintln!(
            "endless header line: refused after {} KiB sent",
            sent / 1024
        );
    }
    let took_after = healthz(daemon);
    let after = rss_kib(daemon);
    eprintln!(
        "RSS before {before} KiB, with 500 idle connections and after two endless header lines \
         {after} KiB; /healthz answered in {took:?} during the endless lines, {took_after:?} after"
    );
    // Generous: 500 connections cost a few MiB; an unbounded header line would cost 32 MiB.
    assert!(
        after < before + 24 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );

    // The idle connections are closed by the daemon (after its 10 s header-read timeout).
    let started = Instant::now();
    let mut first = idle.into_iter().next().unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut buf = [0u8; 256];
    let n = first
        .read(&mut buf)
        .expect("the daemon closes an idle connection");
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(
        n == 0 || answer.starts_with("HTTP/1.1 408"),
        "an idle connection got {answer:?}"
    );
    eprintln!(
        "an idle connection was closed {:?} after the check",
        started.elapsed()
    );
}

/// How many file descriptors this process may open: raised to `needed` (within the hard limit)
/// when the soft limit is lower. The daemon started afterwards inherits it.
fn raise_open_files(needed: u64) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    let maximum = limit.maximum.unwrap_or(u64::MAX);
    if current < needed && current < maximum {
        limit.current = Some(needed.min(maximum));
        setrlimit(Resource::Nofile, limit).expect("setrlimit(RLIMIT_NOFILE)");
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// A kubelet's probe gives up after 1 s by default: `/healthz` and `/readyz` answer within
/// 100 ms while 5,000 idle connections are open to the daemon (more than it keeps open: the
/// oldest idle ones make room for new clients). A latency bound, so timed: the median of
/// several probes is held to it, and every probe to the kubelet's second, so that a machine
/// busy with other work does not fail it.
#[test]
fn probes_answer_within_100_ms_under_5000_idle_connections() {
    const IDLE: usize = 5_000;
    let limit = raise_open_files(IDLE as u64 + 1_000);
    assert!(
        limit >= IDLE as u64 + 200,
        "this test opens {IDLE} connections, and may open only {limit} files (ulimit -n)"
    );
    let fleet = OneMember::start();
    let daemon = &fleet.daemon;
    let ready = || {
        request(
            daemon,
            "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"",
        )
    };
    await_until("readiness", || ready().0 == "HTTP/1.1 200 OK");
    let addr: std::net::SocketAddr = host(daemon).parse().unwrap();
    let mut idle = Vec::with_capacity(IDLE);
    for n in 0..IDLE {
        // A daemon that left new clients in its backlog would make these wait for seconds.
        match TcpStream::connect_timeout(&addr, ANSWER_DEADLINE) {
            Ok(s) => idle.push(s),
            Err(e) => panic!("connection {n} of {IDLE} not taken within {ANSWER_DEADLINE:?}: {e}"),
        }
    }
    // Connected is not yet taken: the kernel completes handshakes the daemon then accepts.
    // Once a request queued behind them is answered, every connection is an idle one.
    await_until("every connection taken", || ready().0 == "HTTP/1.1 200 OK");
    let mut took: Vec<(&str, Duration)> = Vec::new();
    for _ in 0..7 {
        took.push(("/healthz", healthz(daemon)));
        let (status, body, t) = ready();
        assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "ok"));
        took.push(("/readyz", t));
    }
    eprintln!("with {IDLE} idle connections: {took:?}");
    for path in ["/healthz", "/readyz"] {
        let mut times: Vec<Duration> = took
            .iter()
            .filter(|(p, _)| *p == path)
            .map(|(_, t)| *t)
            .collect();
        times.sort();
        let median = times[times.len() / 2];
        assert!(
            median < Duration::from_millis(100),
            "{path}: median {median:?} under {IDLE} idle connections ({times:?})"
        );
        assert!(
            times.iter().all(|t| *t < Duration::from_secs(1)),
            "{path} past a kubelet's 1 s: {times:?}"
        );
    }
    drop(idle);
}

#[test]
fn oversized_webhooks_and_unknown_paths_get_json_problems() {
    let fleet = OneMember::start();
    let daemon = &fleet.daemon;
    // As curl sends a large body: the head first, the body only after `100 Continue`. The
    // daemon answers from the head alone.
    let (status, body, _) = request(
        daemon,
        &format!(
            "POST /hooks/git HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Gitlab-Token: s3cret\r\n\
             Expect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            1024 * 1024 + 1
        ),
        b"",
    );
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        serde_json::json!({"error": "payload too large"})
    );
    let (status, body, _) = request(
        daemon,
        "GET /api/v1/nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert_eq!(body, r#"{"error":"not found"}"#);
    // A webhook of a normal size still works.
    let (status, body, _) = request(
        daemon,
        "POST /hooks/git HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Gitlab-Token: s3cret\r\n\
         Content-Length: 2\r\n\r\n",
        b"{}",
    );
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 202 Accepted", r#"{"status":"fetching"}"#)
    );
}

#[test]
fn an_address_in_use_stops_the_daemon_with_a_message() {
    let sim = SimFleet::start(FLEET);
    let repo = Repo::new();
    repo.write("README", "empty fleet\n");
    repo.commit("empty");
    let state = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let r = common::gitfleet(&[
        "run",
        "--repo",
        repo.path().to_str().unwrap(),
        "--kubeconfig",
        sim.kubeconfig.to_str().unwrap(),
        "--state-dir",
        state.path().to_str().unwrap(),
        "--listen",
        &addr,
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("cannot listen on {addr}")),
        "{}",
        r.stderr
    );
}

#[test]
fn an_empty_webhook_secret_file_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, " \n\t\n").unwrap();
    let secret = secret.display().to_string();
    let run = common::gitfleet(&[
        "run",
        "--repo",
        &dir.path().display().to_string(),
        "--kubeconfig",
        "/nonexistent/kubeconfig",
        "--state-dir",
        &dir.path().join("state").display().to_string(),
        "--webhook-secret-file",
        &secret,
    ]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("is empty (or only whitespace)"),
        "{}",
        run.stderr
    );
}

/// A command line's outcome with `env` set.
fn gitfleet_env(args: &[&str], env: &[(&str, &std::path::Path)]) -> common::Run {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("gitfleet runs");
    common::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// With `--token-file`, `/api/v1` needs the token: `status`, `wait` and `plan --server` send
/// it from their `--token-file` (or `GITFLEET_TOKEN_FILE`) and work; without it, or with
/// another, they fail at once saying which flag gives it, and never print a token. The
/// probes and the metrics stay open, and the daemon's log never holds the token.
#[test]
fn status_and_wait_need_the_token_of_a_daemon_started_with_one() {
    let sim = SimFleet::start(FLEET);
    let repo = Repo::new();
    repo.write(
        "members.yaml",
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
         metadata: {name: alpha}\n\
         spec: {identity: {name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}\n",
    );
    repo.commit("members");
    let dir = tempfile::tempdir().unwrap();
    let (secret, token, wrong) = (
        dir.path().join("secret"),
        dir.path().join("token"),
        dir.path().join("wrong"),
    );
    std::fs::write(&secret, "s3cret\n").unwrap();
    std::fs::write(&token, "tok-4f1c9a\n").unwrap();
    std::fs::write(&wrong, "tok-000000\n").unwrap();
    let daemon = Daemon::start_with(
        repo.path(),
        &sim.kubeconfig,
        &dir.path().join("state"),
        &secret,
        "1m",
        &["--token-file".as_ref(), token.as_os_str()],
        &[],
    );
    // The probes need no token: a kubelet has none.
    await_until("the daemon is ready", || {
        request(
            &daemon,
            "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"",
        )
        .0 == "HTTP/1.1 200 OK"
    });
    let (status, _, _) = request(
        &daemon,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    let (status, body, _) = request(
        &daemon,
        "GET /api/v1/summary HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(status, "HTTP/1.1 401 Unauthorized", "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");

    let server = daemon.addr.as_str();
    let token_flag = token.to_str().unwrap();
    let plan = [
        "plan",
        "--repo",
        repo.path().to_str().unwrap(),
        "--base",
        "HEAD",
        "--head",
        "HEAD",
        "--server",
        server,
    ];
    for args in [
        vec!["status", "--server", server],
        vec!["wait", "--server", server, "--timeout", "5m"],
        plan.to_vec(),
    ] {
        let run = gitfleet_env(&args, &[]);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("needs its API token")
                && run.stderr.contains("--token-file")
                && run.stderr.contains("GITFLEET_TOKEN_FILE"),
            "{args:?}: {}",
            run.stderr
        );
        let mut with_wrong = args.clone();
        with_wrong.extend(["--token-file", wrong.to_str().unwrap()]);
        let run = gitfleet_env(&with_wrong, &[]);
        assert_eq!(run.code, 1, "{with_wrong:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("refused the token"),
            "{with_wrong:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("tok-"), "{}", run.stderr);
    }

    let run = gitfleet_env(
        &["status", "--server", server, "--token-file", token_flag],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = gitfleet_env(
        &["status", "--server", server, "-o", "json"],
        &[("GITFLEET_TOKEN_FILE", &token)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("\"placements\""), "{}", run.stdout);
    let run = gitfleet_env(
        &["wait", "--server", server, "--timeout", "1m"],
        &[("GITFLEET_TOKEN_FILE", &token)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("served"), "{}", run.stdout);
    assert!(!run.stdout.contains("tok-") && !run.stderr.contains("tok-"));
    let mut with_token = plan.to_vec();
    with_token.extend(["--token-file", token_flag]);
    let run = gitfleet_env(&with_token, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let log = daemon.stop_and_read_log().join("\n");
    assert!(!log.contains("tok-"), "the token is in the log:\n{log}");
}
