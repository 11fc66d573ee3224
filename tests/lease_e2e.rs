//! `gitfleet run --state kubernetes` on the real-member test bed:
//! one member's API server serves as the hosting cluster (its Lease and the state ConfigMaps);
//! the others are members. Two replicas elect a leader; the leader is SIGKILLed in the middle of
//! a rolling rollout; the other takes over and finishes it, and the members' objects show that
//! no member was written by both. A leader whose hosting API server stops stops acting, and the
//! state objects refuse a deposed leader's late write (fencing) on a real API server.
//!
//! Short leases (4 s / 3 s / 1 s) keep the takeover quick; every wait is on a condition.

mod common;
use common::kubectl::Kubectl as _;

use std::collections::{BTreeMap, BTreeSet};

use common::daemon::{await_until, Daemon};
use common::members::{available, Backend, Members};
use common::replicas::{self, get, leading, placements};
use common::Repo;

const FLEET: &str = r#"
members:
  - name: hosting
  - name: m1
  - name: m2
  - name: m3
"#;

const MEMBERS: [&str; 3] = ["m1", "m2", "m3"];
/// The test's namespace of the hosting cluster (the test bed's API servers have `default`).
const NAMESPACE: &str = "default";

/// Three members, and a placement rolled out one member at a time, each given 4 s to count
/// as available.
fn fleet_repo() -> Repo {
    let repo = Repo::new();
    for m in MEMBERS {
        repo.write(&format!("members/{m}.yaml"), &common::member_cluster(m));
    }
    repo.write(
        "app/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n",
    );
    repo.write(
        "app/placement.yaml",
        "apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: app
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: app}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 1, maxSurge: 0, unavailablePeriodSeconds: 4}
",
    );
    // An ExternalName Service has no availability rule (untrackable, as in KubeFleet): each
    // cluster counts as available only `unavailablePeriodSeconds` after its apply, which paces
    // the rollout (ConfigMaps alone are available at once).
    repo.write(
        "app/upstream.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: upstream\n  namespace: app\nspec:\n  type: ExternalName\n  externalName: upstream.example.com\n",
    );
    settings(&repo, "v1");
    repo.commit("first");
    repo
}

fn settings(repo: &Repo, mode: &str) {
    repo.write(
        "app/settings.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata: {{mode: {mode}}}\n"
        ),
    );
}

/// A replica of `gitfleet run --state kubernetes` named `identity`.
fn replica(repo: &Repo, members: &Members, identity: &str) -> Daemon {
    replica_with(repo, members, identity, &[])
}

/// [`replica`] with more flags.
fn replica_with(repo: &Repo, members: &Members, identity: &str, more: &[&str]) -> Daemon {
    let hosting = replicas::Hosting {
        kubeconfig: &members.kubeconfig,
        namespace: NAMESPACE,
    };
    replicas::start(
        repo,
        &members.kubeconfig,
        members.dir(),
        &hosting,
        identity,
        more,
    )
}

fn up_to_date(daemon: &Daemon) -> bool {
    placements(daemon)["placements"][0]["upToDate"]
        .as_array()
        .map(Vec::len)
        == Some(MEMBERS.len())
}

/// Each member's `settings` ConfigMap: its `mode` and resourceVersion.
fn settings_on(members: &Members) -> BTreeMap<&'static str, (String, String)> {
    MEMBERS
        .iter()
        .filter(|m| members.exists(m, &["configmap", "settings", "-n", "app"]))
        .map(|m| {
            let cm = members.get_json(m, &["configmap", "settings", "-n", "app"]);
            (
                *m,
                (
                    cm["data"]["mode"].as_str().unwrap_or_default().to_string(),
                    cm["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ),
            )
        })
        .collect()
}

fn lease(members: &Members) -> serde_json::Value {
    members.get_json("hosting", &["lease", "gitfleet", "-n", NAMESPACE])
}

fn micros(time: &serde_json::Value) -> i128 {
    let text = time.as_str().expect("a MicroTime");
    let t: jiff::Timestamp = text.parse().unwrap();
    t.as_microsecond() as i128
}

#[test]
fn the_follower_takes_over_a_killed_leaders_rollout_without_repeating_a_step() {
    if !available(Backend::Real) {
        return;
    }
    let members = Members::start(Backend::Real, FLEET);
    let repo = fleet_repo();
    let a = replica(&repo, &members, "replica-a");
    let b = replica(&repo, &members, "replica-b");
    await_until("one replica leads", || leading(&a) || leading(&b));
    let (mut leader, follower) = if leading(&a) { (a, b) } else { (b, a) };
    let leader_name = placements(&leader)["leader"]["identity"]
        .as_str()
        .unwrap()
        .to_string();
    await_until("the follower knows who leads", || {
        placements(&follower)["leader"]["leader"] == leader_name.as_str()
    });
    assert!(!leading(&follower));
    // The follower is ready (it follows), serves metrics naming the leader, and says so in
    // `gitfleet status`.
    assert_eq!(get(&follower, "/readyz"), "ok");
    let metrics = get(&follower, "/metrics");
    assert!(metrics.contains("gitfleet_is_leader 0"), "{metrics}");
    assert!(
        metrics.contains(&format!("gitfleet_leader{{identity=\"{leader_name}\"}} 1")),
        "{metrics}"
    );
    assert!(get(&leader, "/metrics").contains("gitfleet_is_leader 1"));
    let status = common::gitfleet(&["status", "--server", &follower.addr]);
    assert!(
        status
            .stdout
            .contains(&format!("Leader: {leader_name} (answered by follower")),
        "{}{}",
        status.stdout,
        status.stderr
    );
    await_until("the first commit on every member", || up_to_date(&leader));

    // A rolling change, one member at a time; killed once it is part way.
    settings(&repo, "v2");
    repo.commit("second");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let now = settings_on(&members);
        let changed = now.values().filter(|(m, _)| m == "v2").count();
        if changed >= 1 && changed < MEMBERS.len() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let log: Vec<String> = leader.lines.try_iter().collect();
            panic!("not mid-rollout: {now:?}\n{}", log.join("\n"));
        }
    }
    leader.child.kill().unwrap();
    leader.child.wait().unwrap();
    let at_kill = settings_on(&members);
    let last_renew = micros(&lease(&members)["spec"]["renewTime"]);
    let done_by_old: Vec<&str> = at_kill
        .iter()
        .filter(|(_, (m, _))| m == "v2")
        .map(|(name, _)| *name)
        .collect();
    assert!(
        !done_by_old.is_empty() && done_by_old.len() < MEMBERS.len(),
        "killed mid-rollout: {at_kill:?}"
    );

    await_until("the follower leads", || leading(&follower));
    let taken = lease(&members);
    assert_eq!(
        taken["spec"]["holderIdentity"],
        placements(&follower)["leader"]["identity"]
    );
    // Not taken before the killed leader's lease ran out (same clock: one machine).
    let acquired = micros(&taken["spec"]["acquireTime"]);
    assert!(
        acquired - last_renew >= 4_000_000,
        "taken {} µs after the last renewal",
        acquired - last_renew
    );
    eprintln!(
        "takeover: lease acquired {:.1} s after the killed leader's last renewal",
        (acquired - last_renew) as f64 / 1e6
    );
    follower.await_log(&["leading: read and claimed the state", &leader_name]);
    // It completes its view from the members' records before it steps.
    follower.await_log(&["leader takeover: read the members' records"]);
    await_until("the new leader finishes the rollout", || {
        settings_on(&members).values().all(|(m, _)| m == "v2") && up_to_date(&follower)
    });
    let end = settings_on(&members);
    for (name, (mode, rv)) in &end {
        assert_eq!(mode, "v2");
        if done_by_old.contains(name) {
            // Written by the killed leader only: the new one did not write it again.
            assert_eq!(
                rv, &at_kill[name].1,
                "{name} was written again after the takeover"
            );
        } else {
            assert_ne!(rv, &at_kill[name].1, "{name}");
        }
    }
    // The state in the hosting cluster names the new leader and holds the placement.
    let (code, out, err) = members.kubectl(
        "hosting",
        &[
            "get",
            "configmaps",
            "-n",
            NAMESPACE,
            "-l",
            "gitfleet.io/state=gitfleet",
            "-o",
            "name",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("configmap/gitfleet-state"), "{out}");
    assert!(out.contains("configmap/gitfleet-p-crp-app-"), "{out}");
}

#[test]
fn a_leader_whose_hosting_api_server_stops_stops_acting() {
    if !available(Backend::Real) {
        return;
    }
    let members = Members::start(Backend::Real, FLEET);
    let repo = fleet_repo();
    let mut solo = replica(&repo, &members, "replica-solo");
    await_until("it leads", || leading(&solo));
    solo.await_log(&["leading: read and claimed the state"]);
    members.stop_member("hosting");
    // Every line up to its exit (the log ends when it does).
    let log: Vec<String> = solo.lines.iter().collect();
    // Whichever sees it first — the election loop at its renew deadline, or the reconcile
    // about to hand work to members — the daemon stops for the same reason.
    let exit = log
        .iter()
        .find(|l| l.contains("stopped acting; exiting"))
        .unwrap_or_else(|| panic!("{}", log.join("\n")));
    assert!(
        exit.contains("does not hold the leader lease any more"),
        "{exit}"
    );
    let status = solo.child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
}

/// A client of the test bed's `hosting` API server.
async fn hosting_client(members: &Members) -> kube::Client {
    replicas::hosting_client(&members.kubeconfig).await
}

/// Fencing on a real API server: once a second store has claimed the state, the first one's
/// write carries a stale resourceVersion and the API server refuses it (409).
#[test]
fn a_deposed_leaders_late_write_is_refused_by_the_api_server() {
    if !available(Backend::Real) {
        return;
    }
    use gitfleet::state::kube::{ConfigMaps, KubeStore};
    use gitfleet::state::{StateBackend, StateError};
    let members = Members::start(Backend::Real, "members:\n  - name: hosting\n");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(hosting_client(&members));
    let objects = || ConfigMaps::new(client.clone(), NAMESPACE, runtime.handle().clone());
    let mut state = gitfleet::rollout::RolloutState {
        serving: Some("c1".into()),
        ..Default::default()
    };
    state
        .placements
        .insert("crp/app".parse().unwrap(), Default::default());
    let (old, _) = KubeStore::open(objects(), "fence", "old").unwrap();
    old.save(None, &state).unwrap();
    let (new, loaded) = KubeStore::open(objects(), "fence", "new").unwrap();
    assert_eq!(loaded.previous_leader, "old");
    assert_eq!(new.load_rollout().unwrap(), state);
    state.serving = Some("c2".into());
    let e = old.save(None, &state).unwrap_err();
    assert!(matches!(e, StateError::Fenced { .. }), "{e}");
    // The refused write changed nothing: a third reader sees what the new leader claimed.
    let (third, loaded) = KubeStore::open(objects(), "fence", "third").unwrap();
    assert_eq!(loaded.previous_leader, "new");
    assert_eq!(third.load_rollout().unwrap().serving.as_deref(), Some("c1"));
}

/// The shards a replica says it holds, and the replicas it sees live (`None` before it says).
fn shards_of(daemon: &Daemon) -> Option<(BTreeSet<u64>, BTreeSet<String>)> {
    let shards = placements(daemon)["leader"]["shards"].clone();
    let set = |v: &serde_json::Value| v.as_array().map(|a| a.to_vec());
    Some((
        set(&shards["held"])?
            .iter()
            .filter_map(serde_json::Value::as_u64)
            .collect(),
        set(&shards["live"])?
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
    ))
}

/// Whether `replicas` hold every one of `count` shards between them, each shard once, one of
/// them leading and holding none (the leader serves no shard while another replica is live),
/// each other at least one, and each sees exactly them live.
fn split_among(replicas: &BTreeMap<&str, Daemon>, count: u64) -> bool {
    let names: BTreeSet<String> = replicas.keys().map(|k| k.to_string()).collect();
    if replicas.values().filter(|d| leading(d)).count() != 1 {
        return false;
    }
    let mut all = Vec::new();
    for daemon in replicas.values() {
        let Some((held, live)) = shards_of(daemon) else {
            return false;
        };
        let serves = !leading(daemon) || replicas.len() == 1;
        if held.is_empty() == serves || live != names {
            return false;
        }
        all.extend(held);
    }
    all.sort();
    all == (0..count).collect::<Vec<_>>()
}

/// Three replicas with `--shards 8` divide the shards among them through the shard Leases; one
/// is killed and the two others hold all of its shards as soon as its replica Lease has gone
/// unrenewed for the lease duration, and the Leases in the hosting cluster name the same
/// holders as the replicas say.
#[test]
fn replicas_split_the_shards_and_the_survivors_take_over_a_killed_ones() {
    if !available(Backend::Real) {
        return;
    }
    let members = Members::start(Backend::Real, FLEET);
    let repo = fleet_repo();
    let mut replicas: BTreeMap<&str, Daemon> = ["r1", "r2", "r3"]
        .into_iter()
        .map(|id| (id, replica_with(&repo, &members, id, &["--shards", "8"])))
        .collect();
    await_until("three replicas holding the 8 shards between them", || {
        split_among(&replicas, 8)
    });
    let (r2_held, _) = shards_of(&replicas["r2"]).unwrap();
    let killed_at = std::time::Instant::now();
    drop(replicas.remove("r2"));
    await_until("the two survivors holding all 8", || {
        split_among(&replicas, 8)
    });
    eprintln!(
        "r2's {} shards taken over {:.1} s after it was killed (lease duration 4 s)",
        r2_held.len(),
        killed_at.elapsed().as_secs_f64()
    );
    let leases = members.get_json(
        "hosting",
        &[
            "leases",
            "-n",
            NAMESPACE,
            "-l",
            "gitfleet.io/shards-of=gitfleet,gitfleet.io/lease-role=shard",
        ],
    );
    let mut holders = BTreeMap::new();
    for l in leases["items"].as_array().unwrap() {
        let name = l["metadata"]["name"].as_str().unwrap();
        let shard: u64 = name.trim_start_matches("gitfleet-shard-").parse().unwrap();
        holders.insert(
            shard,
            l["spec"]["holderIdentity"].as_str().unwrap().to_string(),
        );
    }
    for (id, daemon) in &replicas {
        for shard in shards_of(daemon).unwrap().0 {
            assert_eq!(
                holders.get(&shard).map(String::as_str),
                Some(*id),
                "{holders:?}"
            );
        }
    }
    assert_eq!(holders.len(), 8, "{holders:?}");
}

/// A shard's record refuses the write of an owner deposed by a successor's claim, on a real
/// API server: the fencing a Lease alone does not give a replica that was paused past it.
#[test]
fn a_deposed_shard_owners_late_write_is_refused_by_the_api_server() {
    if !available(Backend::Real) {
        return;
    }
    use gitfleet::daemon::shards::claims::{self, ClaimError};
    use gitfleet::daemon::shards::{Names, ReplicaId, ShardId};
    let members = Members::start(Backend::Real, "members:\n  - name: hosting\n");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = hosting_client(&members).await;
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client, NAMESPACE);
        let names = Names {
            prefix: "fence".into(),
        };
        let (old, new) = (ReplicaId::from("old"), ReplicaId::from("new"));
        let report = |n: &str| BTreeMap::from([("report".to_string(), n.to_string())]);
        let mut by_old = claims::claim(&api, &names, ShardId(3), &old).await.unwrap();
        claims::write(&api, &names, &mut by_old, &old, report("1"))
            .await
            .unwrap();
        let mut by_new = claims::claim(&api, &names, ShardId(3), &new).await.unwrap();
        let e = claims::write(&api, &names, &mut by_old, &old, report("2"))
            .await
            .unwrap_err();
        assert!(matches!(e, ClaimError::Fenced { shard: ShardId(3) }), "{e}");
        claims::write(&api, &names, &mut by_new, &new, report("3"))
            .await
            .unwrap();
        let record = api.get("fence-shard-3-record").await.unwrap();
        let data = record.data.unwrap();
        assert_eq!(
            (data["owner"].as_str(), data["report"].as_str()),
            ("new", "3")
        );
    });
}

/// Flags that cannot work together are refused before anything starts (exit 64).
#[test]
fn state_flags_that_cannot_work_are_usage_errors() {
    let run = |args: &[&str]| {
        common::gitfleet(&[&["run", "--repo", ".", "--kubeconfig", "k"], args].concat())
    };
    let r = run(&[]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("--state-dir"), "{}", r.stderr);
    let r = run(&[
        "--state",
        "kubernetes",
        "--lease-duration",
        "3s",
        "--renew-deadline",
        "3s",
    ]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("--lease-duration"), "{}", r.stderr);
    let r = run(&[
        "--state",
        "kubernetes",
        "--renew-deadline",
        "2s",
        "--retry-period",
        "2s",
    ]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    let r = run(&["--state", "kubernetes", "--once"]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("--once"), "{}", r.stderr);
    let r = run(&["--state-dir", "s", "--shards", "4"]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("--shards"), "{}", r.stderr);
}
