//! Push-to-applied latency on real members, when the test bed is built (testbed/): 3 real
//! members (real kube-apiserver, deployment controller, scheduler and kwok's nodes), each
//! commit changing a ConfigMap and a Deployment's pod template, timed until the daemon reports
//! the commit settled (every Deployment available again).

use super::common::*;
use super::testbed;
use serde_json::{json, Value};
use std::time::Instant;

/// The objects of the `web` placement at `revision`, with the Deployment's pod template
/// changed too, so every commit rolls its pods out again.
fn rolling_web_objects(revision: usize) -> Vec<Value> {
    let mut objects = web_objects("web", revision);
    objects[2]["spec"]["template"]["metadata"]["annotations"] =
        json!({"example.com/revision": revision.to_string()});
    objects.push(crp("web"));
    objects
}

/// Push-to-applied latency on 3 real members (the test bed: real kube-apiserver, deployment
/// controller, scheduler and kwok's nodes), with real availability: each commit changes the
/// `web` ConfigMap and the pod template of its Deployment, and the clock runs from just before
/// `git push` until the daemon reports the commit settled, i.e. every member's Deployment
/// available again as its deployment controller reports it (default RollingUpdate).
pub(super) fn latency_real(commits: usize) -> Result<()> {
    let names: Vec<String> = (0..3).map(|i| format!("r-{i}")).collect();
    let mut fleet = String::from("members:\n");
    for n in &names {
        fleet.push_str(&format!(
            "  - name: {n}\n    nodes: [{{count: 2, cpu: '8', memory: 32Gi}}]\n"
        ));
    }
    let Some(testbed) = testbed::Testbed::start(&fleet) else {
        println!("push-to-applied latency on real members: skipped, no test bed (build it with `bash testbed/build.sh`, or set GITFLEET_TESTBED)");
        return Ok(());
    };
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut files = latency_files(&names);
    files.retain(|(path, _)| path != "apps/web.yaml");
    files.push(("apps/web.yaml".into(), yaml(&rolling_web_objects(0))));
    let repos = Repos::create(dir.path(), &files)?;
    let first = git(&repos.work, &["rev-parse", "HEAD"])?;
    let daemon = DaemonProcess::start(
        &repos.watched,
        testbed.kubeconfig(),
        &dir.path().join("state"),
    )?;
    let first_rollout = daemon.await_settled(&first)?;
    let mut latencies = Vec::with_capacity(commits);
    for r in 1..=commits {
        repos.write("apps/web.yaml", &yaml(&rolling_web_objects(r)))?;
        let head = repos.commit(&format!("web revision {r}"))?;
        let start = Instant::now();
        repos.push()?;
        daemon.await_settled(&head)?;
        latencies.push(start.elapsed());
    }
    drop(daemon);
    let s = stats(&latencies);
    println!(
        "push-to-applied latency on real members: 3 test-bed members (ready in {:.0} s), 3 PickAll placements (default RollingUpdate), {commits} commits each changing a ConfigMap and the pod template of a 2-replica Deployment; first rollout of the fleet {}",
        testbed.started_in.as_secs_f64(),
        ms(first_rollout)
    );
    println!("{}", line("daemon", &s));
    println!(
        "latency = from just before `git push` until the daemon's status API reports the commit settled on every placement (each member's Deployment available again, by its real deployment controller with kwok's pods), polled every {} ms.",
        POLL_INTERVAL.as_millis()
    );
    Ok(())
}
