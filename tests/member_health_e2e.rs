//! A member that a push finds down, answering errors or answering garbage is shown unhealthy at
//! once (status, `gitfleet_member_healthy`, the inventory), not at its next heartbeat probe,
//! and healthy again once a probe reaches it. The members' heartbeat here is ten minutes, so
//! only the push can tell; everything is awaited on conditions, nothing is timed.

mod common;
use common::kubectl::Kubectl;

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::Repo;

on_both_backends!(a_member_a_push_cannot_reach_is_unhealthy_at_once_and_recovers);

fn fleet_file(names: &[&str]) -> String {
    let mut yaml = String::from("anonymousAuth: true\nmembers:\n");
    for n in names {
        yaml.push_str(&format!(
            "  - name: {n}\n    nodes: [{{count: 1, cpu: \"4\", memory: 16Gi, instanceType: D4}}]\n"
        ));
    }
    yaml
}

/// A PickAll placement of one ConfigMap to `names`, whose heartbeat is ten minutes.
fn fleet_repo(names: &[&str], version: &str) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shop-config, namespace: shop}}\n\
         data: {{version: \"{version}\"}}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: shop}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: shop}}]\n\
         \x20 strategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: {}, maxSurge: 0}}}}\n",
        names.len()
    );
    for n in names {
        yaml.push_str(&format!(
            "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
             metadata: {{name: {n}}}\nspec:\n  identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}\n  heartbeatPeriodSeconds: 600\n"
        ));
    }
    yaml
}

fn config_version(members: &impl Kubectl, member: &str) -> Option<String> {
    let (code, out, _) = members.kubectl(
        member,
        &[
            "get",
            "configmap",
            "shop-config",
            "-n",
            "shop",
            "-o",
            "jsonpath={.data.version}",
        ],
    );
    (code == 0).then_some(out)
}

/// A short retry budget: a push gives up on a failing member within a second.
fn start_daemon(repo: &Repo, kubeconfig: &std::path::Path, state: &tempfile::TempDir) -> Daemon {
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let flags = ["--retry-budget", "1s", "--member-timeout", "2s"].map(std::ffi::OsStr::new);
    Daemon::start_with(
        repo.path(),
        kubeconfig,
        &state.path().join("state"),
        &secret,
        "10m",
        &flags,
        &[],
    )
}

fn get(daemon: &Daemon, path: &str) -> String {
    match ureq::get(&format!("{}{path}", daemon.addr)).call() {
        Ok(mut r) => r.body_mut().read_to_string().unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// `gitfleet_member_healthy{member=...}` as the daemon's metrics show it.
fn healthy_metric(daemon: &Daemon, member: &str) -> Option<i64> {
    let prefix = format!("gitfleet_member_healthy{{member=\"{member}\"}} ");
    get(daemon, "/metrics")
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().parse().unwrap()))
}

/// The member's health in the inventory the status API serves, with its error.
fn inventory_health(daemon: &Daemon, member: &str) -> Option<(bool, String)> {
    let v: serde_json::Value = serde_json::from_str(&get(daemon, "/api/v1/inventory")).ok()?;
    let c = v["clusters"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == member)?
        .clone();
    Some((
        c["healthy"].as_bool().unwrap_or(true),
        c["error"].as_str().unwrap_or_default().to_string(),
    ))
}

fn shown_unhealthy(daemon: &Daemon, member: &str) -> bool {
    healthy_metric(daemon, member) == Some(0)
        && inventory_health(daemon, member).is_some_and(|(healthy, _)| !healthy)
}

fn shown_healthy(daemon: &Daemon, member: &str) -> bool {
    healthy_metric(daemon, member) == Some(1)
        && inventory_health(daemon, member).is_some_and(|(healthy, _)| healthy)
}

/// A stopped member's API server (both backends): the next commit's push finds it down and it
/// is shown unhealthy, with one log line; started again, it is healthy again (one line) and
/// catches up.
fn a_member_a_push_cannot_reach_is_unhealthy_at_once_and_recovers(backend: Backend) {
    let names = ["alpha", "bravo"];
    let members = Members::start(backend, &fleet_file(&names));
    let repo = Repo::new();
    repo.write("fleet.yaml", &fleet_repo(&names, "1"));
    repo.commit("v1");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members.kubeconfig, &state);
    await_until("the first commit on every member, both healthy", || {
        names
            .iter()
            .all(|m| config_version(&members, m).as_deref() == Some("1"))
            && names.iter().all(|m| shown_healthy(&daemon, m))
    });

    members.stop_member("bravo");
    repo.write("fleet.yaml", &fleet_repo(&names, "2"));
    repo.commit("v2");
    await_until("bravo shown unhealthy after the push failed", || {
        shown_unhealthy(&daemon, "bravo")
    });
    assert!(shown_healthy(&daemon, "alpha"));
    daemon.await_log(&["member unhealthy", "bravo"]);

    members.start_member("bravo");
    await_until("bravo healthy again, on the second commit", || {
        shown_healthy(&daemon, "bravo") && config_version(&members, "bravo").as_deref() == Some("2")
    });
    daemon.await_log(&["member healthy again", "bravo"]);
}

/// Answering 500 on every request, or garbage: the push that meets it marks the member
/// unhealthy with the push's error; lifted, the member is healthy again and catches up.
#[test]
fn a_member_answering_errors_or_garbage_is_unhealthy_at_once_and_recovers() {
    let names = ["alpha", "bravo"];
    let members = Members::start(Backend::Sim, &fleet_file(&names));
    let sim = members.sim().unwrap();
    let repo = Repo::new();
    repo.write("fleet.yaml", &fleet_repo(&names, "1"));
    repo.commit("v1");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members.kubeconfig, &state);
    await_until("the first commit on every member", || {
        names
            .iter()
            .all(|m| config_version(&members, m).as_deref() == Some("1"))
            && shown_healthy(&daemon, "bravo")
    });
    let faults = [
        serde_json::json!({"errorRate": 1.0, "errorCodes": [500]}),
        serde_json::json!({"garbage": true}),
    ];
    for (n, fault) in faults.into_iter().enumerate() {
        let version = (n + 2).to_string();
        sim.set_faults("bravo", fault.clone());
        repo.write("fleet.yaml", &fleet_repo(&names, &version));
        repo.commit(&format!("v{version}"));
        await_until(&format!("bravo shown unhealthy under {fault}"), || {
            shown_unhealthy(&daemon, "bravo")
        });
        sim.set_faults(
            "bravo",
            serde_json::json!({"errorRate": 0.0, "garbage": false}),
        );
        await_until(&format!("bravo healthy again after {fault}"), || {
            shown_healthy(&daemon, "bravo")
                && config_version(&members, "bravo").as_deref() == Some(version.as_str())
        });
    }
}
