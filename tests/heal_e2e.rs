//! `gitfleet run` heals what members lose: the daemon watches what it put on
//! members (by its labels) and re-applies through the rollout core when an object is deleted
//! or changed — or, under `whenToApply: IfNotDrifted`, reports the drift and leaves it. Checked
//! on `gitfleet sim` and on real API servers (the test bed). The poll is an hour away in these
//! tests and the resync ten minutes: only the watches can heal in time.

mod common;
use common::kubectl::Kubectl as _;

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::Repo;

on_both_backends!(
    a_deleted_object_is_restored_by_the_daemon,
    drift_under_if_not_drifted_is_reported_not_overwritten,
    status_says_which_objects_are_not_available_and_why,
    an_emptied_repository_says_its_objects_stay_on_members,
    a_hand_scaled_deployment_is_put_back_under_the_default_client_side_apply,
    server_side_apply_without_force_fails_on_a_hand_scale_and_force_takes_it_back,
    if_not_drifted_reports_a_hand_scale_and_leaves_it,
);

use common::TWO_MEMBERS as FLEET;

fn fleet_placement(apply_strategy: &str) -> String {
    format!(
        "apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: app
spec:
  resourceSelectors:
  - {{group: '', version: v1, kind: Namespace, name: app}}
  strategy:
{apply_strategy}"
    )
}

fn fleet_repo(apply_strategy: &str) -> Repo {
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &common::member_cluster("alpha"));
    repo.write("members/beta.yaml", &common::member_cluster("beta"));
    repo.write(
        "app/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n",
    );
    repo.write("app/placement.yaml", &fleet_placement(apply_strategy));
    repo.write(
        "app/settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata: {mode: blue}\n",
    );
    repo.commit("first");
    repo
}

fn start_daemon(repo: &Repo, members: &Members, state: &tempfile::TempDir) -> Daemon {
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    Daemon::start(
        repo.path(),
        &members.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1h",
    )
}

fn placements(daemon: &Daemon) -> serde_json::Value {
    let body = ureq::get(&format!("{}/api/v1/placements", daemon.addr))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default();
    serde_json::from_str(&body).unwrap_or_default()
}

fn up_to_date(daemon: &Daemon, n: usize) -> bool {
    let v = placements(daemon);
    v["placements"][0]["upToDate"].as_array().map(Vec::len) == Some(n)
        && v["placements"][0]["clusters"]
            .as_object()
            .is_some_and(|c| c.values().all(|c| c["health"]["state"] == "available"))
}

fn mode(members: &Members, member: &str) -> Option<String> {
    members
        .exists(member, &["configmap", "settings", "-n", "app"])
        .then(|| {
            members.get_json(member, &["configmap", "settings", "-n", "app"])["data"]["mode"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
}

fn a_deleted_object_is_restored_by_the_daemon(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo("    applyStrategy: {type: ServerSideApply}\n");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("the commit on both members, available", || {
        up_to_date(&daemon, 2)
    });
    assert_eq!(mode(&members, "alpha").as_deref(), Some("blue"));

    let (code, _, err) =
        members.kubectl("alpha", &["delete", "configmap", "settings", "-n", "app"]);
    assert_eq!(code, 0, "{err}");
    daemon.await_log(&["ConfigMap app/settings deleted on the member", "alpha"]);
    await_until("the deleted ConfigMap restored on alpha", || {
        mode(&members, "alpha").as_deref() == Some("blue")
    });
    await_until("status available again on both", || up_to_date(&daemon, 2));
    assert_eq!(mode(&members, "beta").as_deref(), Some("blue"));
}

fn drift_under_if_not_drifted_is_reported_not_overwritten(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo("    applyStrategy: {whenToApply: IfNotDrifted}\n");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("the commit on both members, available", || {
        up_to_date(&daemon, 2)
    });
    let (code, _, err) = members.kubectl(
        "alpha",
        &[
            "patch",
            "configmap",
            "settings",
            "-n",
            "app",
            "--type=merge",
            "-p",
            r#"{"data":{"mode":"red"}}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    await_until("the drift reported for alpha in status", || {
        let v = placements(&daemon);
        let alpha = &v["placements"][0]["clusters"]["alpha"];
        alpha["health"]["state"] == "failed"
            && alpha["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("/data/mode") && e.contains("red"))
    });
    // Reported, never overwritten; beta untouched.
    assert_eq!(mode(&members, "alpha").as_deref(), Some("red"));
    assert_eq!(mode(&members, "beta").as_deref(), Some("blue"));
    let v = placements(&daemon);
    assert_eq!(
        v["placements"][0]["clusters"]["beta"]["health"]["state"],
        "available"
    );
}

fn status_text(daemon: &Daemon, placement: Option<&str>) -> String {
    let mut args = vec!["status", "--server", &daemon.addr];
    args.extend(placement);
    let out = common::gitfleet(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

/// A Deployment that can never be scheduled (64 CPUs) keeps its clusters pending;
/// status says the rollout waits for availability, not "settled", and describe says which
/// object and why.
fn status_says_which_objects_are_not_available_and_why(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo("    applyStrategy: {type: ServerSideApply}\n");
    repo.write(
        "app/big.yaml",
        "apiVersion: apps/v1
kind: Deployment
metadata: {name: big, namespace: app}
spec:
  replicas: 1
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec:
      containers:
      - name: big
        image: busybox
        resources: {requests: {cpu: '64'}}
",
    );
    repo.commit("a Deployment no member can run");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("both clusters pending with a reason", || {
        let v = placements(&daemon);
        v["placements"][0]["clusters"].as_object().is_some_and(|c| {
            c.len() == 2
                && c.values().all(|c| {
                    c["health"]["state"] == "pending"
                        && c["notAvailable"][0].as_str().is_some_and(|n| {
                            n.starts_with("Deployment app/big: 0/1 replicas available")
                        })
                })
        })
    });
    let table = status_text(&daemon, None);
    assert!(
        table.contains("waiting for availability on 2 cluster(s)") && !table.contains("settled"),
        "{table}"
    );
    let describe = status_text(&daemon, Some("app"));
    assert!(
        describe.contains("not available: Deployment app/big: 0/1 replicas available"),
        "{describe}"
    );
}

/// After a commit that empties the repository, the members are gone from it too
/// and keep what they have (as in KubeFleet); status says so instead of "Deleted ... settled".
fn an_emptied_repository_says_its_objects_stay_on_members(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo("    applyStrategy: {type: ServerSideApply}\n");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("the commit on both members, available", || {
        up_to_date(&daemon, 2)
    });
    for f in [
        "members/alpha.yaml",
        "members/beta.yaml",
        "app/namespace.yaml",
        "app/placement.yaml",
        "app/settings.yaml",
    ] {
        repo.remove(f);
    }
    let empty = repo.commit("empty tree");
    await_until("the empty commit served", || {
        placements(&daemon)["serving"] == empty.as_str()
    });
    let table = status_text(&daemon, None);
    assert!(
        table.contains("deleted from the repository; its objects stay on 2 clusters no longer in the repository (alpha, beta): members removed from the repository keep what they have, as in KubeFleet"),
        "{table}"
    );
    assert!(!table.contains("settled"), "{table}");
    // And they do stay.
    assert_eq!(mode(&members, "alpha").as_deref(), Some("blue"));
}

/// A Deployment with two replicas, added to the placement's namespace.
const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: app}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx}
";

/// Two members with a node each, for [`WEB`]'s pods.
const WEB_FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
  - name: beta
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
"#;

/// The `app` fleet with [`WEB`], the daemon on it, and both clusters available.
fn web_fleet(backend: Backend, apply_strategy: &str) -> (Members, Repo, tempfile::TempDir, Daemon) {
    let members = Members::start(backend, WEB_FLEET);
    let repo = fleet_repo(apply_strategy);
    repo.write("app/web.yaml", WEB);
    repo.commit("web");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("the commit on both members, available", || {
        up_to_date(&daemon, 2)
    });
    (members, repo, state, daemon)
}

fn replicas(members: &Members, member: &str) -> serde_json::Value {
    members.get_json(member, &["deployment", "web", "-n", "app"])["spec"]["replicas"].clone()
}

/// `kubectl scale`: the scale subresource, written by kubectl's own field manager.
fn scale_by_hand(members: &Members, member: &str, n: u32) {
    let (code, _, err) = members.kubectl(
        member,
        &[
            "scale",
            "deployment",
            "web",
            "-n",
            "app",
            &format!("--replicas={n}"),
        ],
    );
    assert_eq!(code, 0, "{err}");
}

fn cluster(daemon: &Daemon, name: &str) -> serde_json::Value {
    placements(daemon)["placements"][0]["clusters"][name].clone()
}

/// KubeFleet's default, ClientSideApply: a field the manifest sets and someone changed on the
/// member is put back (a forced server-side apply of the manifest's fields); fields the
/// manifest does not set stay as the member has them.
fn a_hand_scaled_deployment_is_put_back_under_the_default_client_side_apply(backend: Backend) {
    let (members, _repo, _state, daemon) = web_fleet(backend, "    type: RollingUpdate\n");
    let (code, _, err) = members.kubectl(
        "alpha",
        &["annotate", "deployment", "web", "-n", "app", "team=theirs"],
    );
    assert_eq!(code, 0, "{err}");
    scale_by_hand(&members, "alpha", 5);
    await_until("alpha's replicas put back to 2", || {
        replicas(&members, "alpha") == 2
    });
    await_until("status available again on both", || up_to_date(&daemon, 2));
    let web = members.get_json("alpha", &["deployment", "web", "-n", "app"]);
    assert_eq!(web["metadata"]["annotations"]["team"], "theirs", "{web:#}");
    assert_eq!(replicas(&members, "beta"), 2);
    assert!(status_text(&daemon, None).contains("settled"));
}

/// ServerSideApply without force: a field another manager took is a conflict, the cluster
/// fails naming the manager and the field and saying how to take it; with force it is taken.
fn server_side_apply_without_force_fails_on_a_hand_scale_and_force_takes_it_back(backend: Backend) {
    let (members, repo, _state, daemon) =
        web_fleet(backend, "    applyStrategy: {type: ServerSideApply}\n");
    scale_by_hand(&members, "alpha", 5);
    await_until("alpha failed with the conflict in status", || {
        let alpha = cluster(&daemon, "alpha");
        alpha["health"]["state"] == "failed"
            && alpha["lastError"].as_str().is_some_and(|e| {
                e.contains("conflict with \"kubectl")
                    && e.contains(".spec.replicas")
                    && e.contains("serverSideApplyConfig.force: true")
            })
    });
    assert_eq!(replicas(&members, "alpha"), 5);
    let table = status_text(&daemon, None);
    assert!(
        !table.contains("settled") && table.contains("1 failed"),
        "{table}"
    );

    repo.write(
        "app/placement.yaml",
        &fleet_placement(
            "    applyStrategy: {type: ServerSideApply, serverSideApplyConfig: {force: true}}\n",
        ),
    );
    repo.commit("force");
    await_until("alpha's replicas taken back", || {
        replicas(&members, "alpha") == 2
    });
    await_until("status available again on both", || up_to_date(&daemon, 2));
}

/// whenToApply IfNotDrifted: the hand scale is reported as drift of `/spec/replicas` and left.
fn if_not_drifted_reports_a_hand_scale_and_leaves_it(backend: Backend) {
    let (members, _repo, _state, daemon) =
        web_fleet(backend, "    applyStrategy: {whenToApply: IfNotDrifted}\n");
    scale_by_hand(&members, "alpha", 5);
    await_until("the drift reported for alpha in status", || {
        let alpha = cluster(&daemon, "alpha");
        alpha["health"]["state"] == "failed"
            && alpha["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("FoundDrifts") && e.contains("/spec/replicas: 5 → 2"))
    });
    assert_eq!(replicas(&members, "alpha"), 5);
    assert_eq!(replicas(&members, "beta"), 2);
    assert!(!status_text(&daemon, None).contains("settled"));
}

/// A real API server speaks HTTP/2 over TLS: the daemon's requests to a member share one
/// connection, and its watches of every kind it delivered share another (the watches' client
/// is its own, for its longer read timeout). Over HTTP/1.1 each watch holds a connection of
/// its own: three kinds here would be three connections for the watches alone. The watches
/// are shown live first: each kind's deleted object is put back before the next poll.
#[test]
fn a_real_members_requests_and_watches_share_two_http2_connections() {
    if !common::members::available(Backend::Real) {
        return;
    }
    let members = Members::start(Backend::Real, FLEET);
    let repo = fleet_repo("    applyStrategy: {type: ServerSideApply}\n");
    repo.write(
        "app/runner.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: runner\n  namespace: app\n",
    );
    repo.commit("a ServiceAccount: a third kind to watch");
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("the commit on both members, available", || {
        up_to_date(&daemon, 2)
    });
    for (kind, name) in [("configmap", "settings"), ("serviceaccount", "runner")] {
        let (code, _, err) = members.kubectl("alpha", &["delete", kind, name, "-n", "app"]);
        assert_eq!(code, 0, "{err}");
        await_until(&format!("the deleted {kind} restored on alpha"), || {
            members.exists("alpha", &[kind, name, "-n", "app"])
        });
    }
    // Awaited rather than read once: on a loaded machine a request that timed out may leave a
    // connection closing while its replacement is open. Watches that did not share one would
    // hold three for good, and the wait would time out.
    let port = common::connections::server_port(&members.kubeconfig, "alpha");
    let mut held = 0;
    await_until("at most two connections to alpha's API server", || {
        held = common::connections::connections_to(daemon.child.id(), port);
        (1..=2).contains(&held)
    });
    eprintln!("the daemon holds {held} connection(s) to alpha's API server (port {port})");
}
