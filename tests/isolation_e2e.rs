//! One faulty member never delays the rest of the fleet. `gitfleet run` against
//! members of which some are down, answer 500, answer garbage or are very slow: commits keep
//! reaching the healthy members while the faulty ones are still being retried. Everything is
//! awaited on conditions (with the usual generous bound for a hang); nothing is timed.

mod common;
use common::kubectl::Kubectl;

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::sim::SimFleet;
use common::Repo;

on_both_backends!(a_stopped_member_does_not_hold_up_a_second_commit_to_the_others);

const HEALTHY: [&str; 2] = ["alpha", "bravo"];
const FAULTY: [&str; 4] = ["down", "errors", "garbage", "slow"];

fn fleet_file(names: &[&str]) -> String {
    let mut yaml = String::from("anonymousAuth: true\nmembers:\n");
    for n in names {
        yaml.push_str(&format!(
            "  - name: {n}\n    nodes: [{{count: 1, cpu: \"4\", memory: 16Gi, instanceType: D4}}]\n"
        ));
    }
    yaml
}

/// The members, and a PickAll placement of one ConfigMap whose rollout budget has room for
/// every member at once (so that what is tested is isolation, not the budget).
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
             metadata: {{name: {n}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
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

fn on_all(members: &impl Kubectl, names: &[&str], version: &str) -> bool {
    names
        .iter()
        .all(|m| config_version(members, m).as_deref() == Some(version))
}

fn start_daemon(repo: &Repo, kubeconfig: &std::path::Path, state: &tempfile::TempDir) -> Daemon {
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    // Long member timeout and retry budget: a daemon that waited for a faulty member would
    // wait past every bound of this test.
    let flags = ["--member-timeout", "10m", "--retry-budget", "10m"].map(std::ffi::OsStr::new);
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

/// Down, 500 on every request, garbage on every request, a minute per request: the commits
/// after the faults came reach the healthy members while the faulty ones are still retried.
#[test]
fn commits_reach_the_healthy_members_while_faulty_ones_are_still_retried() {
    let mut names = HEALTHY.to_vec();
    names.extend(FAULTY);
    let sim = SimFleet::start(&fleet_file(&names));
    let repo = Repo::new();
    repo.write("fleet.yaml", &fleet_repo(&names, "1"));
    repo.commit("v1");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &sim.kubeconfig, &state);
    await_until("the first commit on every member", || {
        on_all(&sim, &names, "1")
    });

    sim.set_faults("down", serde_json::json!({"down": true}));
    sim.set_faults(
        "errors",
        serde_json::json!({"errorRate": 1.0, "errorCodes": [500]}),
    );
    sim.set_faults("garbage", serde_json::json!({"garbage": true}));
    sim.set_faults("slow", serde_json::json!({"latencyMs": 60_000}));

    repo.write("fleet.yaml", &fleet_repo(&names, "2"));
    repo.commit("v2");
    await_until("the second commit on the healthy members", || {
        on_all(&sim, &HEALTHY, "2")
    });
    // The next commit does not wait behind the faulty members' retries of the last one.
    repo.write("fleet.yaml", &fleet_repo(&names, "3"));
    let v3 = repo.commit("v3");
    await_until("the third commit on the healthy members", || {
        on_all(&sim, &HEALTHY, "3")
    });
    // ... and the member answering 500 is still being asked meanwhile.
    let injected = |m: &str| sim.member(m)["injectedErrors"].as_u64().unwrap();
    let so_far = injected("errors");
    await_until("another attempt on the member answering 500", || {
        injected("errors") > so_far
    });

    // Status: the healthy members run v3; the ones that cannot be reached or read say why
    // (the member answering 500 and the slow one are still being retried within the budget).
    await_until("status to name the faulty members' errors", || {
        let url = format!("{}/api/v1/placements", daemon.addr);
        let body = match ureq::get(&url).call() {
            Ok(mut r) => r.body_mut().read_to_string().unwrap_or_default(),
            Err(_) => String::new(),
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let p = &v["placements"][0];
        v["serving"] == v3.as_str()
            && HEALTHY
                .iter()
                .all(|m| p["clusters"][m]["commit"] == v3.as_str())
            && ["down", "garbage"]
                .iter()
                .all(|m| p["failed"][m].is_string())
    });

    // The faults are lifted: every member catches up with the last commit.
    for m in ["down", "errors", "garbage", "slow"] {
        sim.set_faults(
            m,
            serde_json::json!({"down": false, "errorRate": 0.0, "garbage": false, "latencyMs": 0}),
        );
    }
    await_until("the third commit on every member", || {
        on_all(&sim, &names, "3")
    });
}

/// On real API servers: a member whose kube-apiserver is stopped does not hold up the next
/// commits to the others, and catches up once it is back.
fn a_stopped_member_does_not_hold_up_a_second_commit_to_the_others(backend: Backend) {
    let names = ["alpha", "bravo", "charlie"];
    let members = Members::start(backend, &fleet_file(&names));
    let repo = Repo::new();
    repo.write("fleet.yaml", &fleet_repo(&names, "1"));
    repo.commit("v1");
    let state = tempfile::tempdir().unwrap();
    let _daemon = start_daemon(&repo, &members.kubeconfig, &state);
    await_until("the first commit on every member", || {
        on_all(&members, &names, "1")
    });

    members.stop_member("charlie");
    for version in ["2", "3"] {
        repo.write("fleet.yaml", &fleet_repo(&names, version));
        repo.commit(&format!("v{version}"));
        await_until("the commit on the members that run", || {
            on_all(&members, &["alpha", "bravo"], version)
        });
    }
    members.start_member("charlie");
    await_until("the stopped member to catch up", || {
        config_version(&members, "charlie").as_deref() == Some("3")
    });
}
