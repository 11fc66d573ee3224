//! Faulty members: 6 healthy members and 4 faulty ones (down, 500 on every request, garbage on
//! every request, 3 s per request) under one daemon; push-to-applied on the healthy members,
//! first with no fault, then with the faults, as the ratio of the medians (goal: under 2).

use super::common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const FAULT_HEALTHY: usize = 6;
/// The faulty members and their faults, in the simulator's terms.
const FAULTY: [(&str, &str); 4] = [
    ("down", r#"{"down": true}"#),
    ("errors", r#"{"errorRate": 1.0, "errorCodes": [500]}"#),
    ("garbage", r#"{"garbage": true}"#),
    ("slow", r#"{"latencyMs": 3000}"#),
];

/// A PickAll placement whose rollout budget has room for every member at once, so that the
/// faulty members (unavailable) never hold the healthy ones back by the budget: what is
/// measured is isolation.
fn roomy_crp(name: &str) -> Value {
    let mut p = crp(name);
    p["spec"]["strategy"] = json!({"type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "100%", "maxSurge": "100%"}});
    p
}

/// `commits` commits, each timed from just before `git push` until every member of `members`
/// serves it; one after the other, without waiting for the rest of the fleet.
fn healthy_latencies(
    repos: &Repos,
    members: &[MemberClient],
    from: usize,
    commits: usize,
) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(commits);
    for r in from..from + commits {
        let mut web = web_objects("web", r);
        web.push(roomy_crp("web"));
        repos.write("apps/web.yaml", &yaml(&web))?;
        repos.commit(&format!("web revision {r}"))?;
        let start = Instant::now();
        repos.push()?;
        out.push(await_value(members, WATCHED, &r.to_string(), start)?);
    }
    Ok(out)
}

/// Push-to-applied on the healthy members of one fleet and one daemon, first with no fault,
/// then while one member is down, one answers 500, one answers garbage and one takes 3 s per
/// request; reported as the ratio of the medians (goal: under 2).
pub(super) fn faults(rt: &tokio::runtime::Runtime, commits: usize) -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let healthy: Vec<String> = (0..FAULT_HEALTHY).map(|i| format!("ok-{i}")).collect();
    let mut names = healthy.clone();
    names.extend(FAULTY.iter().map(|(n, _)| n.to_string()));
    let (sim, kubeconfig) = start_members(rt, &names, dir.path())?;
    let members: Vec<MemberClient> = MemberClient::of(&sim)
        .into_iter()
        .filter(|m| healthy.contains(&m.name))
        .collect();
    let mut web = web_objects("web", 0);
    web.push(roomy_crp("web"));
    let files = vec![
        (
            "members.yaml".to_string(),
            yaml(&names.iter().map(|m| member_doc(m)).collect::<Vec<_>>()),
        ),
        ("apps/web.yaml".to_string(), yaml(&web)),
    ];
    let repos = Repos::create(dir.path(), &files)?;
    let first = git(&repos.work, &["rev-parse", "HEAD"])?;
    let daemon = DaemonProcess::start(&repos.watched, &kubeconfig, &dir.path().join("state"))?;
    daemon.await_settled(&first)?;

    let clean = healthy_latencies(&repos, &members, 1, commits)?;
    for (member, faults) in FAULTY {
        let update: gitfleet_sim::fleet_file::FaultsUpdate =
            serde_json::from_str(faults).expect("valid faults");
        sim.set_faults(member, &update).map_err(|e| e.to_string())?;
    }
    let faulty = healthy_latencies(&repos, &members, 1 + commits, commits)?;
    drop(daemon);
    rt.block_on(sim.shutdown());

    let (clean, faulty) = (stats(&clean), stats(&faulty));
    let ratio = faulty.median.as_secs_f64() / clean.median.as_secs_f64().max(1e-9);
    println!(
        "faulty members: {FAULT_HEALTHY} healthy members and 4 faulty ones (down, 500 on every request, garbage on every request, 3 s per request), 1 PickAll placement (maxUnavailable 100 %), {commits} commits without faults then {commits} with, pushed one after the other; latency to the healthy members"
    );
    println!("{}", line("no fault", &clean));
    println!("{}", line("faults", &faulty));
    println!(
        "{:<10} {ratio:.2}x (median / median); goal: under 2x: {}",
        "ratio",
        if ratio < 2.0 { "met" } else { "NOT met" }
    );
    println!(
        "latency = from just before `git push` until every healthy member serves the new value, polled every {} ms; the next commit is pushed as soon as the healthy members serve the last one (the faulty ones never settle).",
        POLL_INTERVAL.as_millis()
    );
    Ok(())
}
