//! A placement whose resource selectors become invalid is held, not the commit,
//! end to end with the real binary, a real git repository and both member backends.
//! KubeFleet's hub admits such a placement; its placement controller meets the error while
//! selecting, sets `Scheduled=False` (reason `InvalidResourceSelectors`) and returns before it
//! takes any snapshot, so the placement's works stay and every other placement proceeds
//! (kubefleet-dev/kubefleet pkg/controllers/placement/controller.go `handleUpdate`).

mod common;
use common::kubectl::Kubectl as _;

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::{gitfleet, member_cluster, Repo, TWO_MEMBERS};

on_both_backends!(
    a_placement_with_invalid_selectors_is_held_while_the_others_roll_out,
    apply_holds_a_placement_with_invalid_selectors_and_applies_the_others,
);

/// Namespace `name` with ConfigMap `settings` (`v: value`), and a ClusterResourcePlacement
/// `name` with these resource selectors.
fn write_placement(repo: &Repo, name: &str, value: &str, selectors: &str) {
    repo.write(
        &format!("{name}.yaml"),
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels: {{team: {name}}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {name}\ndata: {{v: '{value}'}}\n---\n\
             apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: {name}\n\
             spec:\n  resourceSelectors:\n{selectors}"
        ),
    );
}

fn by_name(name: &str) -> String {
    format!("  - {{group: '', version: v1, kind: Namespace, name: {name}}}\n")
}

/// `team: p` matches namespace `p` and the reserved `kube-p`: with the default scope
/// (NamespaceWithResources) KubeFleet fails the selection, as when `kube-p` is named
/// (pkg/utils/controller/resource_selector_resolver.go fetchAllResourcesInOneNamespace).
const BY_LABEL: &str =
    "  - {group: '', version: v1, kind: Namespace, labelSelector: {matchLabels: {team: p}}}\n";

const MESSAGE: &str = "The resource selectors are invalid: failed to process the request due to a client error: spec.resourceSelectors[0].labelSelector: selects namespace \"kube-p\", which is reserved (fleet-* and kube-* namespaces are never propagated)";

/// ConfigMap `settings`'s value in namespace `ns` of `member` ("" while it is not there).
/// A repository of the two members and placements p and q, each selecting its namespace by
/// name, committed; with that commit.
fn p_and_q() -> (Repo, String) {
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &member_cluster("alpha"));
    repo.write("members/beta.yaml", &member_cluster("beta"));
    write_placement(&repo, "p", "1", &by_name("p"));
    write_placement(&repo, "q", "1", &by_name("q"));
    let first = repo.commit("p and q");
    (repo, first)
}

fn value(members: &Members, member: &str, ns: &str) -> String {
    let (_, out, _) = members.kubectl(
        member,
        &["get", "configmap", "settings", "-n", ns, "-o", "json"],
    );
    let cm: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    cm["data"]["v"].as_str().unwrap_or_default().to_string()
}

fn get(daemon: &Daemon, path: &str) -> String {
    ureq::get(&format!("{}{path}", daemon.addr))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

fn placement(daemon: &Daemon, id: &str) -> serde_json::Value {
    serde_json::from_str(&get(daemon, &format!("/api/v1/placements/{id}"))).unwrap_or_default()
}

fn serving(daemon: &Daemon) -> String {
    let v: serde_json::Value =
        serde_json::from_str(&get(daemon, "/api/v1/placements")).unwrap_or_default();
    v["serving"].as_str().unwrap_or_default().to_string()
}

/// The placement's `…Scheduled` condition as (status, reason, message).
fn scheduled(p: &serde_json::Value) -> (String, String, String) {
    let c = p["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "ClusterResourcePlacementScheduled")
        })
        .cloned()
        .unwrap_or_default();
    let text = |f: &str| c[f].as_str().unwrap_or_default().to_string();
    (text("status"), text("reason"), text("message"))
}

fn a_placement_with_invalid_selectors_is_held_while_the_others_roll_out(backend: Backend) {
    let members = Members::start(backend, TWO_MEMBERS);
    let (repo, first) = p_and_q();
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let daemon = Daemon::start(
        repo.path(),
        &members.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1h",
    );
    for m in ["alpha", "beta"] {
        await_until("p and q on the members", || {
            value(&members, m, "p") == "1" && value(&members, m, "q") == "1"
        });
    }
    assert_eq!(serving(&daemon), first);

    // P selects by label, which takes the reserved kube-p too (and its ConfigMap changes);
    // Q's ConfigMap changes.
    repo.write(
        "kube-p.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-p\n  labels: {team: p}\n",
    );
    write_placement(&repo, "p", "2", BY_LABEL);
    write_placement(&repo, "q", "2", &by_name("q"));
    let second = repo.commit("p takes its namespaces by label; q changes");
    // The commit is valid: validate warns of the placement and exits 0.
    let validate = gitfleet(&["validate", "--repo", repo.path().to_str().unwrap()]);
    assert_eq!(validate.code, 0, "{}", validate.stderr);
    assert!(
        validate.stderr.contains(
            "warning: p.yaml:20: ClusterResourcePlacement/p: spec.resourceSelectors[0].labelSelector: selects namespace \"kube-p\""
        ) && validate
            .stderr
            .contains("Scheduled=False InvalidResourceSelectors and not rejected"),
        "{}",
        validate.stderr
    );
    // The daemon serves it: Q's change reaches the members...
    for m in ["alpha", "beta"] {
        await_until("q's change on the members", || {
            value(&members, m, "q") == "2"
        });
    }
    await_until("p held in the status", || {
        serving(&daemon) == second
            && scheduled(&placement(&daemon, "crp/p"))
                == (
                    "False".into(),
                    "InvalidResourceSelectors".into(),
                    MESSAGE.into(),
                )
    });
    // ...while P's objects stay on its members untouched.
    for m in ["alpha", "beta"] {
        assert_eq!(value(&members, m, "p"), "1", "{m}");
        assert!(members.exists(m, &["namespace", "p"]), "{m}");
        assert!(!members.exists(m, &["namespace", "kube-p"]), "{m}");
    }
    let p = placement(&daemon, "crp/p");
    assert_eq!(p["selected"], serde_json::json!(["alpha", "beta"]), "{p:#}");
    assert!(
        p["note"].as_str().unwrap_or_default().contains(MESSAGE),
        "{p:#}"
    );
    // Its clusters keep the conditions their members report.
    for c in p["perCluster"].as_array().unwrap() {
        assert!(
            c["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x["status"] == "True"),
            "{p:#}"
        );
    }
    assert_eq!(
        scheduled(&placement(&daemon, "crp/q")).1,
        "SchedulingPolicyFulfilled"
    );
    let metrics = get(&daemon, "/metrics");
    assert!(
        metrics.contains("gitfleet_placement_invalid_resource_selectors{placement=\"crp/p\"} 1")
            && !metrics.contains("placement=\"crp/q\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gitfleet_commits_rejected_total 0"),
        "{metrics}"
    );
    let status = gitfleet(&["status", "--server", &daemon.addr, "p"]);
    assert!(
        status.stdout.contains("ClusterResourcePlacementScheduled")
            && status.stdout.contains("InvalidResourceSelectors"),
        "{}",
        status.stdout
    );

    // `gitfleet wait` fails on it: served, but held.
    let wait = gitfleet(&[
        "wait",
        "--server",
        &daemon.addr,
        "--commit",
        &second,
        "--timeout",
        "60s",
    ]);
    assert_eq!(wait.code, 1, "{}\n{}", wait.stdout, wait.stderr);
    assert!(
        format!("{}{}", wait.stdout, wait.stderr).contains(&format!("crp/p: held: {MESSAGE}")),
        "{}\n{}",
        wait.stdout,
        wait.stderr
    );

    // Fixed: P rolls out again.
    write_placement(&repo, "p", "3", &by_name("p"));
    let third = repo.commit("p fixed");
    for m in ["alpha", "beta"] {
        await_until("p's fix on the members", || value(&members, m, "p") == "3");
    }
    await_until("p scheduled again", || {
        serving(&daemon) == third
            && scheduled(&placement(&daemon, "crp/p")).1 == "SchedulingPolicyFulfilled"
    });
    let metrics = get(&daemon, "/metrics");
    assert!(
        !metrics.contains("gitfleet_placement_invalid_resource_selectors{"),
        "{metrics}"
    );
}

/// `gitfleet apply` holds the placement as the daemon does: nothing of it applied, and not
/// swept from its members although the commit delivers nothing of it.
fn apply_holds_a_placement_with_invalid_selectors_and_applies_the_others(backend: Backend) {
    let members = Members::start(backend, TWO_MEMBERS);
    let (repo, _) = p_and_q();
    let repo_path = repo.path().display().to_string();
    let kubeconfig = members.kubeconfig.display().to_string();
    let apply = || {
        gitfleet(&[
            "apply",
            "--repo",
            &repo_path,
            "--kubeconfig",
            &kubeconfig,
            "--retry-budget",
            "20s",
        ])
    };
    let run = apply();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    for m in ["alpha", "beta"] {
        assert_eq!(value(&members, m, "p"), "1", "{m}");
        assert_eq!(value(&members, m, "q"), "1", "{m}");
    }
    repo.write(
        "kube-p.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-p\n  labels: {team: p}\n",
    );
    write_placement(&repo, "p", "2", BY_LABEL);
    write_placement(&repo, "q", "2", &by_name("q"));
    repo.commit("p takes its namespaces by label; q changes");
    // `schedule` shows the condition; `render` renders nothing for p and says why.
    let schedule = gitfleet(&["schedule", "--repo", &repo_path]);
    assert_eq!(schedule.code, 0, "{}", schedule.stderr);
    let p_row = schedule
        .stdout
        .lines()
        .find(|l| l.starts_with("crp/p "))
        .unwrap_or_default();
    assert!(
        p_row.contains("Scheduled=False (InvalidResourceSelectors)"),
        "{}",
        schedule.stdout
    );
    let render = gitfleet(&[
        "render",
        "--repo",
        &repo_path,
        "--placement",
        "p",
        "--cluster",
        "alpha",
    ]);
    assert_eq!(render.code, 0, "{}", render.stderr);
    assert_eq!(render.stdout, "");
    assert!(
        render.stderr.contains(&format!(
            "placement crp/p is held (Scheduled=False, InvalidResourceSelectors): {MESSAGE}; nothing is rendered for it"
        )),
        "{}",
        render.stderr
    );
    let run = apply();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains(&format!("note: placement crp/p: held: {MESSAGE}")),
        "{}",
        run.stderr
    );
    for m in ["alpha", "beta"] {
        assert_eq!(value(&members, m, "q"), "2", "{m}");
        assert_eq!(value(&members, m, "p"), "1", "{m}");
        assert!(members.exists(m, &["namespace", "p"]), "{m}");
        assert!(!members.exists(m, &["namespace", "kube-p"]), "{m}");
    }
}
