//! A staged run waiting for an approval, against a settled fleet: the daemon's own CPU
//! (`utime + stime`), its reconciles and its log lines over one window, nine members, the
//! default `--poll`. A waiting run wakes the daemon only for a tag, a timer, a commit or a
//! member event, so the two should cost alike: the waiting daemon is reported as a ratio of the
//! settled one, measured in the same run.

use super::common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Nine members, three per environment.
fn member_names() -> Vec<String> {
    (1..=9).map(|i| format!("m{i}")).collect()
}

fn environment(i: usize) -> &'static str {
    match i {
        0..=2 => "staging",
        3..=5 => "canary",
        _ => "production",
    }
}

/// The repository: the members, a namespace with a ConfigMap and its placement; with
/// `waiting`, the placement is External and a run of a three-stage strategy waits for an
/// approval before its second stage.
fn files(waiting: bool) -> Vec<(String, String)> {
    let mut docs: Vec<Value> = member_names()
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut m = member_doc(name);
            m["metadata"]["labels"] = json!({"env": environment(i)});
            m
        })
        .collect();
    docs.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "telemetry"}}));
    docs.push(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "collector", "namespace": "telemetry"},
        "data": {"version": "1"},
    }));
    let mut placement = crp("telemetry");
    placement["spec"]["strategy"] =
        json!({"type": if waiting { "External" } else { "RollingUpdate" }});
    docs.push(placement);
    if waiting {
        let stage =
            |name: &str| json!({"name": name, "labelSelector": {"matchLabels": {"env": name}}});
        let mut canary = stage("canary");
        canary["beforeStageTasks"] = json!([{"type": "Approval"}]);
        docs.push(json!({
            "apiVersion": "placement.kubernetes-fleet.io/v1",
            "kind": "ClusterStagedUpdateStrategy",
            "metadata": {"name": "three-stage"},
            "spec": {"stages": [stage("staging"), canary, stage("production")]},
        }));
        docs.push(json!({
            "apiVersion": "placement.kubernetes-fleet.io/v1",
            "kind": "ClusterStagedUpdateRun",
            "metadata": {"name": "rollout-1"},
            "spec": {"placementName": "telemetry", "stagedRolloutStrategyName": "three-stage",
                "state": "Run"},
        }));
    }
    vec![("fleet.yaml".to_string(), yaml(&docs))]
}

/// What one daemon did over the window.
struct Window {
    cpu: f64,
    reconciles: u64,
    log_lines: usize,
}

/// Starts members and a daemon on [`files`]`(waiting)`, waits until it is settled (or its run
/// waits for the approval), then measures one window.
fn measure(rt: &tokio::runtime::Runtime, waiting: bool, window: Duration) -> Result<Window> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (sim, kubeconfig) = start_members(rt, &member_names(), dir.path())?;
    let repos = Repos::create(dir.path(), &files(waiting))?;
    let head = git(&repos.work, &["rev-parse", "HEAD"])?;
    let daemon = DaemonProcess::start(&repos.watched, &kubeconfig, &dir.path().join("state"))?;
    if waiting {
        let start = Instant::now();
        while !daemon
            .get("/api/v1/approvalrequests")?
            .contains("\"canary\"")
        {
            if start.elapsed() > SETTLE_LIMIT {
                return Err(format!(
                    "the run did not reach its approval within {SETTLE_LIMIT:?}; the log ends:\n{}",
                    daemon.log.lock().unwrap().join("\n")
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    } else {
        daemon.await_settled(&head)?;
    }
    let (reconciles_before, _) = daemon.reconciles()?;
    let lines_before = daemon.lines();
    let ticks_before = cpu_ticks(daemon.pid())?;
    std::thread::sleep(window);
    let ticks = cpu_ticks(daemon.pid())? - ticks_before;
    let (reconciles_after, _) = daemon.reconciles()?;
    let log_lines = daemon.lines() - lines_before;
    drop(daemon);
    rt.block_on(sim.shutdown());
    Ok(Window {
        cpu: ticks as f64 / clock_ticks_per_second() as f64,
        reconciles: reconciles_after - reconciles_before,
        log_lines,
    })
}

pub(super) fn waiting(rt: &tokio::runtime::Runtime, window: Duration) -> Result<()> {
    let settled = measure(rt, false, window)?;
    let waiting = measure(rt, true, window)?;
    println!(
        "waiting: 9 members, one placement, default --poll {}s; over {:.0} s after settling (baseline) or once the run waits for its approval:",
        DEFAULT_POLL.as_secs(),
        window.as_secs_f64()
    );
    for (label, w) in [
        ("settled (baseline)", &settled),
        ("run waiting for its approval", &waiting),
    ] {
        println!(
            "{label:<30} CPU {:.2} s | {} reconciles | {} log lines",
            w.cpu, w.reconciles, w.log_lines
        );
    }
    // CPU is counted in clock ticks: a window with none is reported as such, not as a ratio.
    if settled.cpu > 0.0 {
        println!("waiting / settled CPU: {:.2}×", waiting.cpu / settled.cpu);
    }
    Ok(())
}
