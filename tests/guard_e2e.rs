//! Guards against losing a fleet by accident, end to end with the real
//! binary: a commit that would delete most of what gitfleet manages is held — nothing of it
//! applied — until a commit's `Gitfleet-Allow-Deletions` trailer releases it (read as git reads
//! trailers: a message that is only the trailer releases nothing), on `gitfleet sim` and on real
//! API servers; `gitfleet plan` says the head would be held; a second daemon on
//! the same state directory exits at once naming the first one's pid; a truncated state file
//! is refused at start naming it.

mod common;
use common::kubectl::Kubectl as _;

use common::daemon::{await_until, Daemon};
use common::members::{Backend, Members};
use common::{gitfleet, member_cluster, Repo, TWO_MEMBERS};

on_both_backends!(
    a_mass_deletion_is_held_until_a_commit_trailer_releases_it,
    apply_refuses_a_mass_deletion_unless_allowed,
    a_lost_state_directory_is_rebuilt_from_the_members_records,
);

/// ConfigMaps in namespace `app`, besides the namespace: 7 objects per member.
const CONFIGS: usize = 6;

fn placement(name: &str) -> String {
    format!(
        "apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: {name}
spec:
  resourceSelectors:
  - {{group: '', version: v1, kind: Namespace, name: {name}}}
"
    )
}

/// Two placements on both members: `app` (a namespace and 6 ConfigMaps: 14 objects in all)
/// and `keep` (a namespace and a ConfigMap with `mode`: 4 objects).
fn fleet_repo(mode: &str) -> Repo {
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &member_cluster("alpha"));
    repo.write("members/beta.yaml", &member_cluster("beta"));
    write_app(&repo);
    write_keep(&repo, mode);
    repo.commit("two placements");
    repo
}

fn write_app(repo: &Repo) {
    repo.write(
        "app/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n",
    );
    repo.write("app/placement.yaml", &placement("app"));
    for i in 0..CONFIGS {
        repo.write(
            &format!("app/config-{i}.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-{i}\n  namespace: app\ndata: {{n: '{i}'}}\n"
            ),
        );
    }
}

fn write_keep(repo: &Repo, mode: &str) {
    repo.write(
        "keep/all.yaml",
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: keep\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: keep\ndata: {{mode: {mode}}}\n---\n{}",
            placement("keep")
        ),
    );
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

fn get(daemon: &Daemon, path: &str) -> String {
    ureq::get(&format!("{}{path}", daemon.addr))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

fn placements(daemon: &Daemon) -> serde_json::Value {
    serde_json::from_str(&get(daemon, "/api/v1/placements")).unwrap_or_default()
}

/// Every placement up to date on both members, at `commit`.
fn settled(daemon: &Daemon, commit: &str) -> bool {
    let v = placements(daemon);
    v["serving"] == commit
        && v["placements"].as_array().is_some_and(|ps| {
            ps.iter().all(|p| {
                p["upToDate"].as_array().map(Vec::len) == Some(2)
                    && p["clusters"]
                        .as_object()
                        .is_some_and(|c| c.values().all(|c| c["health"]["state"] == "available"))
            })
        })
}

fn configs_on(members: &Members, member: &str) -> usize {
    (0..CONFIGS)
        .filter(|i| members.exists(member, &["configmap", &format!("config-{i}"), "-n", "app"]))
        .count()
}

fn mode(members: &Members, member: &str) -> String {
    members.get_json(member, &["configmap", "settings", "-n", "keep"])["data"]["mode"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn a_mass_deletion_is_held_until_a_commit_trailer_releases_it(backend: Backend) {
    let members = Members::start(backend, TWO_MEMBERS);
    let repo = fleet_repo("blue");
    let first = repo.git(&["rev-parse", "HEAD"]);
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("both placements on both members", || {
        settled(&daemon, &first)
    });

    // One commit removes `app` (14 of the 18 objects managed) and changes `keep`.
    for f in std::fs::read_dir(repo.path().join("app")).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    write_keep(&repo, "green");
    let deleting = repo.commit("retire app, keep goes green");

    // `gitfleet plan` says the daemon would hold it.
    let plan = gitfleet(&[
        "plan",
        "--repo",
        repo.path().to_str().unwrap(),
        "--base",
        &first,
        "--head",
        &deleting,
    ]);
    assert!(
        plan.stdout
            .contains("would delete 14 of the 18 objects gitfleet manages")
            && plan.stdout.contains("Gitfleet-Allow-Deletions: 14"),
        "{}\n{}",
        plan.stdout,
        plan.stderr
    );

    let line = daemon.await_log(&["would delete 14 of the 18 objects", "held"]);
    assert!(line.contains("Gitfleet-Allow-Deletions: 14"), "{line}");
    await_until("status says the head is held", || {
        placements(&daemon)["held"]["commit"] == deleting.as_str()
    });
    let v = placements(&daemon);
    assert_eq!(v["serving"], first.as_str(), "{v:#}");
    assert_eq!(v["held"]["deleting"], 14, "{v:#}");
    assert!(
        get(&daemon, "/metrics").contains("gitfleet_deletions_held 14"),
        "{}",
        get(&daemon, "/metrics")
    );
    let status = gitfleet(&["status", "--server", &daemon.addr]);
    assert!(
        status.stdout.contains("HELD") && status.stdout.contains("Gitfleet-Allow-Deletions: 14"),
        "{}",
        status.stdout
    );
    // Nothing of the held commit is applied: no deletion, and not the change either.
    for m in ["alpha", "beta"] {
        assert_eq!(configs_on(&members, m), CONFIGS, "{m}");
        assert_eq!(mode(&members, m), "blue", "{m}");
    }

    // A message that is only the trailer is a subject, and git reads no trailer there: held.
    let subject_only = repo.commit("Gitfleet-Allow-Deletions: 14");
    daemon.await_log(&["would delete 14", &subject_only[..12]]);
    await_until("status holds the subject-only commit", || {
        placements(&daemon)["held"]["commit"] == subject_only.as_str()
    });
    let v = placements(&daemon);
    assert_eq!(v["serving"], first.as_str(), "{v:#}");

    // A trailer allowing fewer does not release it; one allowing all of them does.
    repo.git(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "too few",
        "--trailer",
        "Gitfleet-Allow-Deletions: 13",
    ]);
    daemon.await_log(&["would delete 14", "its trailer allows only 13"]);
    repo.git(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "retire app for good",
        "--trailer",
        "Gitfleet-Allow-Deletions: 14",
    ]);
    let release = repo.git(&["rev-parse", "HEAD"]);
    await_until("the release served and settled", || {
        let v = placements(&daemon);
        v["serving"] == release.as_str()
            && v["held"].is_null()
            && v["placements"].as_array().map(Vec::len) == Some(1)
            && settled(&daemon, &release)
    });
    for m in ["alpha", "beta"] {
        await_until("app's objects deleted", || configs_on(&members, m) == 0);
        assert_eq!(mode(&members, m), "green", "{m}");
    }
    assert!(get(&daemon, "/metrics").contains("gitfleet_deletions_held 0"));
}

/// Deleting a few objects (under the minimum) is not held.
#[test]
fn a_small_deletion_is_not_held() {
    let members = Members::start(Backend::Sim, TWO_MEMBERS);
    let repo = fleet_repo("blue");
    let first = repo.git(&["rev-parse", "HEAD"]);
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("both placements on both members", || {
        settled(&daemon, &first)
    });
    // 4 of 18 objects: neither the share nor the minimum.
    repo.remove("keep/all.yaml");
    let second = repo.commit("retire keep");
    await_until("the commit served and settled", || {
        let v = placements(&daemon);
        v["held"].is_null()
            && v["placements"].as_array().map(Vec::len) == Some(1)
            && settled(&daemon, &second)
    });
    assert!(!members.exists("alpha", &["configmap", "settings", "-n", "keep"]));
}

#[test]
fn a_second_daemon_on_the_same_state_directory_exits_naming_the_first_ones_pid() {
    let members = Members::start(Backend::Sim, TWO_MEMBERS);
    let repo = fleet_repo("blue");
    let first = repo.git(&["rev-parse", "HEAD"]);
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("settled", || settled(&daemon, &first));
    let dir = state.path().join("state");
    let second = gitfleet(&[
        "run",
        "--once",
        "--repo",
        repo.path().to_str().unwrap(),
        "--kubeconfig",
        members.kubeconfig.to_str().unwrap(),
        "--state-dir",
        dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_ne!(second.code, 0, "{}", second.stderr);
    assert!(
        second.stderr.contains(&format!(
            "state directory {} is in use by another gitfleet (pid {}",
            dir.display(),
            daemon.child.id()
        )),
        "{}",
        second.stderr
    );
    // `schedule --save` writes the directory too, and is refused the same way.
    let save = gitfleet(&[
        "schedule",
        "--repo",
        repo.path().to_str().unwrap(),
        "--state",
        dir.to_str().unwrap(),
        "--save",
    ]);
    assert_ne!(save.code, 0, "{}", save.stderr);
    assert!(
        save.stderr.contains("is in use by another gitfleet"),
        "{}",
        save.stderr
    );

    // Once the first is gone, a truncated schedule.json is refused at start, naming it.
    drop(daemon);
    let file = dir.join("schedule.json");
    let text = std::fs::read(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let again = gitfleet(&[
        "run",
        "--once",
        "--repo",
        repo.path().to_str().unwrap(),
        "--kubeconfig",
        members.kubeconfig.to_str().unwrap(),
        "--state-dir",
        dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_ne!(again.code, 0, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains(&format!("{} is not a gitfleet state file", file.display())),
        "{}",
        again.stderr
    );
}

fn apply(repo: &Repo, members: &Members, extra: &[&str]) -> common::Run {
    let (repo, kubeconfig) = (
        repo.path().display().to_string(),
        members.kubeconfig.display().to_string(),
    );
    let mut args = vec!["apply", "--repo", &repo, "--kubeconfig", &kubeconfig];
    args.extend_from_slice(extra);
    gitfleet(&args)
}

/// `gitfleet apply` reads the members' records and refuses the same mass deletion, unless the
/// commit's trailer or `--allow-mass-deletion` allows it.
fn apply_refuses_a_mass_deletion_unless_allowed(backend: Backend) {
    let members = Members::start(backend, TWO_MEMBERS);
    let repo = fleet_repo("blue");
    let first = apply(&repo, &members, &[]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    assert_eq!(configs_on(&members, "alpha"), CONFIGS);

    for f in std::fs::read_dir(repo.path().join("app")).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    write_keep(&repo, "green");
    let deleting = repo.commit("retire app, keep goes green");
    let refused = apply(&repo, &members, &[]);
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "commit {deleting} would delete 14 of the 18 objects gitfleet manages"
        )) && refused.stderr.contains("Gitfleet-Allow-Deletions: 14")
            && refused.stderr.contains("--allow-mass-deletion"),
        "{}",
        refused.stderr
    );
    for m in ["alpha", "beta"] {
        assert_eq!(configs_on(&members, m), CONFIGS, "{m}");
        assert_eq!(mode(&members, m), "blue", "{m}");
    }
    // The trailer as the subject is no trailer (git reads none there).
    repo.commit("Gitfleet-Allow-Deletions: 14");
    let subject_only = apply(&repo, &members, &[]);
    assert_eq!(
        subject_only.code, 1,
        "{}{}",
        subject_only.stdout, subject_only.stderr
    );
    assert_eq!(configs_on(&members, "alpha"), CONFIGS);
    // A trailer allowing fewer is not enough; the flag is.
    repo.git(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "too few",
        "--trailer",
        "Gitfleet-Allow-Deletions: 13",
    ]);
    assert_eq!(apply(&repo, &members, &[]).code, 1);
    let allowed = apply(&repo, &members, &["--allow-mass-deletion"]);
    assert_eq!(allowed.code, 0, "{}{}", allowed.stdout, allowed.stderr);
    assert!(
        allowed.stderr.contains("as --allow-mass-deletion allows"),
        "{}",
        allowed.stderr
    );
    for m in ["alpha", "beta"] {
        assert_eq!(configs_on(&members, m), 0, "{m}");
        assert_eq!(mode(&members, m), "green", "{m}");
    }
}

/// The state directory is lost and, in the same commit, a placement is deleted. The
/// daemon starting without state reads the members' records, adopts what they list, and
/// removes what no placement delivers any more.
fn a_lost_state_directory_is_rebuilt_from_the_members_records(backend: Backend) {
    let members = Members::start(backend, TWO_MEMBERS);
    let repo = fleet_repo("blue");
    let first = repo.git(&["rev-parse", "HEAD"]);
    let state = tempfile::tempdir().unwrap();
    let daemon = start_daemon(&repo, &members, &state);
    await_until("both placements on both members", || {
        settled(&daemon, &first)
    });
    drop(daemon);
    std::fs::remove_dir_all(state.path().join("state")).unwrap();
    repo.remove("keep/all.yaml");
    let second = repo.commit("retire keep");

    let daemon = start_daemon(&repo, &members, &state);
    let line = daemon.await_log(&["rebuilt the view from the members' records"]);
    assert!(
        line.contains("\"placements\":2") && line.contains("\"clusters\":4"),
        "{line}"
    );
    await_until("keep removed from both members, app still there", || {
        ["alpha", "beta"].iter().all(|m| {
            !members.exists(m, &["configmap", "settings", "-n", "keep"])
                && configs_on(&members, m) == CONFIGS
        })
    });
    await_until("the commit served and settled", || {
        settled(&daemon, &second)
    });
}
