//! What one simulated member costs in memory: starts `members` members in this process, opens
//! `watches` label-selected watches on each (as gitfleet's daemon does, one per kind), then has
//! each member server-side apply `objects` namespaces with a ConfigMap each over HTTP, `rounds`
//! times (every round after the first changes each ConfigMap), and prints the process's RSS and
//! peak RSS (`/proc/self/status`) after each step, in total and per member.
//!
//! ```sh
//! cargo run --release -p gitfleet-sim --example member_memory -- 1000 80 3 2
//! ```
//!
//! Arguments: `members objects rounds watches` (default 200 80 3 2). It runs on the allocator
//! `gitfleet sim` and the benchmarks run the simulator on (jemalloc), so that the figures are
//! theirs.

use std::time::Instant;

use gitfleet_sim::{FleetFile, MemberInfo, StartOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How many members apply at once: a daemon's `--parallel-members` is of this order.
const PARALLEL: usize = 16;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse()
                .expect("arguments: members objects rounds watches")
        })
        .collect();
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let (members, objects, rounds, watches) = (arg(0, 200), arg(1, 80), arg(2, 3), arg(3, 2));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(members, objects, rounds, watches));
}

async fn run(members: usize, objects: usize, rounds: usize, watches: usize) {
    let start = Instant::now();
    let base = Memory::now();
    report("before the members", members, &base, &base);
    let mut text = String::from("members:\n");
    for i in 0..members {
        text.push_str(&format!(
            "  - name: m-{i:04}\n    nodes: [{{count: 2, cpu: '8', memory: 32Gi}}]\n"
        ));
    }
    let fleet: FleetFile = gitfleet_kube_text::yaml::from_str(&text).expect("fleet file");
    let sim = gitfleet_sim::start(fleet, StartOptions::default())
        .await
        .expect("the simulator starts");
    report("members started", members, &base, &Memory::now());

    let mut held = Vec::new();
    for m in sim.members() {
        for kind in ["namespaces", "configmaps"].iter().cycle().take(watches) {
            held.push(tokio::spawn(watch(m.clone(), kind)));
        }
    }
    for round in 0..rounds {
        let infos: Vec<MemberInfo> = sim.members().to_vec();
        let mut queue = infos.chunks(infos.len().div_ceil(PARALLEL).max(1));
        let mut tasks = Vec::new();
        for chunk in queue.by_ref() {
            let chunk = chunk.to_vec();
            tasks.push(tokio::spawn(async move {
                for m in chunk {
                    apply_all(&m, objects, round).await;
                }
            }));
        }
        for t in tasks {
            t.await.expect("an applier");
        }
        report(
            &format!("applied, round {}", round + 1),
            members,
            &base,
            &Memory::now(),
        );
    }
    let (reads, writes) = sim.request_counts();
    println!(
        "{members} members, {objects} namespaces and ConfigMaps each, {rounds} rounds, {watches} watches each: {reads} reads, {writes} writes, {:.1} s",
        start.elapsed().as_secs_f64()
    );
    for h in held {
        h.abort();
    }
    sim.shutdown().await;
}

/// Resident and peak resident memory of this process, KiB.
struct Memory {
    rss: u64,
    hwm: u64,
}

impl Memory {
    fn now() -> Memory {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        Memory {
            rss: field("VmRSS:"),
            hwm: field("VmHWM:"),
        }
    }
}

fn report(step: &str, members: usize, base: &Memory, now: &Memory) {
    let per = |kib: u64| kib.saturating_sub(base.rss) as f64 / members as f64;
    println!(
        "{step:<20} RSS {:>8.1} MiB, peak {:>8.1} MiB; per member above the start: RSS {:>7.1} KiB, peak {:>7.1} KiB",
        now.rss as f64 / 1024.0,
        now.hwm as f64 / 1024.0,
        per(now.rss),
        per(now.hwm),
    );
}

/// One member's namespaces and ConfigMaps, applied on one keep-alive connection.
async fn apply_all(m: &MemberInfo, objects: usize, round: usize) {
    let mut conn = TcpStream::connect(m.addr).await.expect("connect");
    for i in 0..objects {
        let ns = format!("app-{i:03}");
        let labels = serde_json::json!({"app.kubernetes.io/managed-by": "gitfleet",
            "gitfleet.io/placement": ns});
        let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": labels}});
        let configmap = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "app-config", "namespace": ns, "labels": labels},
            "data": {"REPLICAS": (1 + i % 5).to_string(), "ROUND": round.to_string(),
                "LOG_LEVEL": "info"}});
        for (path, body) in [
            (format!("/api/v1/namespaces/{ns}"), namespace),
            (
                format!("/api/v1/namespaces/{ns}/configmaps/app-config"),
                configmap,
            ),
        ] {
            let status = request(
                &mut conn,
                &m.token,
                "PATCH",
                &format!("{path}?fieldManager=gitfleet&force=true"),
                &body.to_string(),
            )
            .await;
            assert!(status < 300, "{path}: {status}");
        }
    }
}

/// Sends one request on `conn` and reads the whole response; returns its status.
async fn request(conn: &mut TcpStream, token: &str, method: &str, path: &str, body: &str) -> u16 {
    // One write: a head and a body in two would wait on the peer's delayed ACK (Nagle).
    let message = format!(
        "{method} {path} HTTP/1.1\r\nHost: sim\r\nAuthorization: Bearer {token}\r\nContent-Type: application/apply-patch+yaml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(message.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let (status, body_start, length) = loop {
        let n = conn.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status = head[9..12].parse().expect("status");
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().expect("length"))
                .expect("a Content-Length");
            break (status, end + 4, length);
        }
    };
    while buf.len() < body_start + length {
        let n = conn.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
    }
    status
}

/// A watch of gitfleet's objects of one kind, read and thrown away until aborted.
async fn watch(m: MemberInfo, kind: &str) {
    let mut conn = TcpStream::connect(m.addr).await.expect("connect");
    let head = format!(
        "GET /api/v1/{kind}?watch=true&labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgitfleet&allowWatchBookmarks=true&timeoutSeconds=3600 HTTP/1.1\r\nHost: sim\r\nAuthorization: Bearer {}\r\n\r\n",
        m.token
    );
    conn.write_all(head.as_bytes()).await.expect("write");
    let mut chunk = [0u8; 16 * 1024];
    while conn.read(&mut chunk).await.is_ok_and(|n| n > 0) {}
}
