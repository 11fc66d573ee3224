//! Sharded delivery: replicas of `gitfleet run --state kubernetes --shards 8` with a real API
//! server of the test bed as the hosting cluster, and twelve simulated members. The leader
//! decides; each member is pushed to by the replica that owns its shard, through orders and
//! reports in the hosting cluster. A killed replica's members are delivered by the survivors,
//! and a report under a claim that is no longer the shard's is refused.
//!
//! Short leases (4 s / 3 s / 1 s) keep the takeover quick; every wait is on a condition.

mod common;
use common::kubectl::Kubectl as _;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;

use common::daemon::{await_until, Daemon};
use common::members::{available, Backend, Members};
use common::Repo;
use gitfleet::daemon::shards::{assign, ShardId};

const SHARDS: u32 = 8;
const NAMESPACE: &str = "default";

fn member_names() -> Vec<String> {
    (1..=12).map(|i| format!("m{i:02}")).collect()
}

fn fleet_yaml() -> String {
    // kubectl sends no token over plain HTTP: the test's own reads are anonymous.
    let mut yaml = "anonymousAuth: true\nmembers:\n".to_string();
    for m in member_names() {
        yaml.push_str(&format!("  - name: {m}\n"));
    }
    yaml
}

fn settings(repo: &Repo, mode: &str) {
    repo.write(
        "app/settings.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata: {{mode: {mode}}}\n"
        ),
    );
}

/// The resources, without members or a placement yet: nothing is probed or pushed before the
/// replicas have split the shards.
fn fleet_repo() -> Repo {
    let repo = Repo::new();
    repo.write(
        "app/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n",
    );
    settings(&repo, "v1");
    repo.commit("resources");
    repo
}

/// The members, and a placement of the resources on all of them.
fn place(repo: &Repo) {
    for m in member_names() {
        repo.write(&format!("members/{m}.yaml"), &common::member_cluster(&m));
    }
    repo.write(
        "app/placement.yaml",
        "apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: app
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: app}
",
    );
    repo.commit("placement");
}

/// A replica whose hosting cluster is `hosting`'s and whose members are `fleet`'s.
fn replica(repo: &Repo, hosting: &Members, fleet: &Members, identity: &str) -> Daemon {
    let dir = fleet.dir().join(identity);
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let args = [
        "--state",
        "kubernetes",
        "--state-namespace",
        NAMESPACE,
        "--hosting-context",
        "hosting",
        "--identity",
        identity,
        "--lease-duration",
        "4s",
        "--renew-deadline",
        "3s",
        "--retry-period",
        "1s",
        "--shards",
        "8",
        "--hosting-kubeconfig",
    ];
    let flags: Vec<&OsStr> = args
        .iter()
        .map(OsStr::new)
        .chain([hosting.kubeconfig.as_os_str()])
        .collect();
    Daemon::start_with(
        repo.path(),
        &fleet.kubeconfig,
        &dir.join("cache"),
        &secret,
        "1h",
        &flags,
        &[],
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

fn leading(daemon: &Daemon) -> bool {
    placements(daemon)["leader"]["leading"] == true
}

/// The shards a replica says it holds.
fn held(daemon: &Daemon) -> BTreeSet<u32> {
    placements(daemon)["leader"]["shards"]["held"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_u64().map(|n| n as u32))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the replicas hold all shards between them, each once, each at least one.
fn split_among(replicas: &BTreeMap<String, Daemon>) -> bool {
    let mut all = Vec::new();
    for daemon in replicas.values() {
        let h = held(daemon);
        if h.is_empty() {
            return false;
        }
        all.extend(h);
    }
    all.sort();
    all == (0..SHARDS).collect::<Vec<_>>()
}

/// Orders a replica carried out with `outcome` (`delivered`, `probed`), by shard
/// (`gitfleet_shard_orders_total`).
fn orders(daemon: &Daemon, outcome: &str) -> BTreeMap<u32, u64> {
    let suffix = format!(",outcome=\"{outcome}\"}} ");
    get(daemon, "/metrics")
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("gitfleet_shard_orders_total{shard=\"")?;
            let (shard, rest) = rest.split_once('"')?;
            let count = rest.strip_prefix(suffix.as_str())?;
            Some((shard.parse().ok()?, count.trim().parse().ok()?))
        })
        .collect()
}

fn delivered(daemon: &Daemon) -> BTreeMap<u32, u64> {
    orders(daemon, "delivered")
}

/// Each member's `settings` mode and resourceVersion.
fn settings_on(fleet: &Members) -> BTreeMap<String, (String, String)> {
    member_names()
        .into_iter()
        .filter(|m| fleet.exists(m, &["configmap", "settings", "-n", "app"]))
        .map(|m| {
            let cm = fleet.get_json(&m, &["configmap", "settings", "-n", "app"]);
            let mode = cm["data"]["mode"].as_str().unwrap_or_default().to_string();
            let rv = cm["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (m, (mode, rv))
        })
        .collect()
}

fn everywhere(fleet: &Members, mode: &str) -> bool {
    let now = settings_on(fleet);
    now.len() == member_names().len() && now.values().all(|(m, _)| m == mode)
}

fn shard_of(member: &str) -> u32 {
    assign::shard_of(member, SHARDS).0
}

/// A client of the test bed's `hosting` API server.
async fn hosting_client(hosting: &Members) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&hosting.kubeconfig).unwrap();
    let options = kube::config::KubeConfigOptions {
        context: Some("hosting".into()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[test]
fn each_member_is_pushed_by_its_shards_owner_and_the_survivors_take_over_a_killed_ones() {
    if !available(Backend::Real) {
        return;
    }
    let hosting = Members::start(Backend::Real, "members:\n  - name: hosting\n");
    let fleet = Members::start(Backend::Sim, &fleet_yaml());
    let repo = fleet_repo();
    let mut replicas: BTreeMap<String, Daemon> = ["r1", "r2", "r3"]
        .into_iter()
        .map(|id| (id.to_string(), replica(&repo, &hosting, &fleet, id)))
        .collect();
    await_until("three replicas holding the 8 shards, one leading", || {
        split_among(&replicas) && replicas.values().any(leading)
    });
    let holders: BTreeMap<u32, String> = replicas
        .iter()
        .flat_map(|(id, d)| held(d).into_iter().map(move |s| (s, id.clone())))
        .collect();

    // The first rollout: every member probed and pushed to by its shard's owner, and by no one
    // else.
    place(&repo);
    await_until("the placement on every member", || everywhere(&fleet, "v1"));
    let leader = replicas
        .iter()
        .find(|(_, d)| leading(d))
        .map(|(id, _)| id.clone())
        .unwrap();
    await_until("the leader shows every member up to date", || {
        placements(&replicas[&leader])["placements"][0]["upToDate"]
            .as_array()
            .map(Vec::len)
            == Some(member_names().len())
    });
    let member_shards: BTreeSet<u32> = member_names().iter().map(|m| shard_of(m)).collect();
    // Pushes and probes alike: the leader reaches no member itself.
    for outcome in ["delivered", "probed"] {
        for shard in &member_shards {
            let owner = &holders[shard];
            assert!(
                orders(&replicas[owner], outcome).contains_key(shard),
                "shard {shard}'s members not {outcome} by its owner {owner}"
            );
        }
        for (id, daemon) in &replicas {
            for (shard, n) in orders(daemon, outcome) {
                assert_eq!(
                    holders.get(&shard),
                    Some(id),
                    "{id} {outcome} {n} orders of shard {shard}, held by {:?}",
                    holders.get(&shard)
                );
            }
        }
    }
    // The orders and reports are deleted once answered (a probe may be out at any moment).
    await_until("no order left", || {
        let (code, out, err) = hosting.kubectl(
            "hosting",
            &[
                "get",
                "configmaps",
                "-n",
                NAMESPACE,
                "-l",
                "gitfleet.io/order-of=gitfleet",
                "-o",
                "name",
            ],
        );
        assert_eq!(code, 0, "{err}");
        out.trim().is_empty()
    });

    // A replica that is not the leader and owns members' shards is killed.
    let victim = replicas
        .iter()
        .filter(|(id, _)| **id != leader)
        .max_by_key(|(_, d)| held(d).intersection(&member_shards).count())
        .map(|(id, _)| id.clone())
        .unwrap();
    let victims_shards: BTreeSet<u32> = held(&replicas[&victim])
        .intersection(&member_shards)
        .copied()
        .collect();
    let before: BTreeMap<String, BTreeMap<u32, u64>> = replicas
        .iter()
        .filter(|(id, _)| **id != victim)
        .map(|(id, d)| (id.clone(), delivered(d)))
        .collect();
    let at_kill = settings_on(&fleet);
    let killed_at = std::time::Instant::now();
    drop(replicas.remove(&victim));
    await_until("the two survivors holding all 8", || split_among(&replicas));
    let taken = killed_at.elapsed();
    // The new owners check the killed replica's members again at once (no commit, no resync):
    // they take over their watches, and write nothing, since nothing changed.
    let new_owner = |shard: &u32| {
        replicas
            .iter()
            .find(|(_, d)| held(d).contains(shard))
            .map(|(id, d)| (id.clone(), d))
            .expect("a survivor holds it")
    };
    await_until(
        "the killed replica's members checked by their new owners",
        || {
            victims_shards.iter().all(|shard| {
                let (id, daemon) = new_owner(shard);
                let was = before[&id].get(shard).copied().unwrap_or(0);
                delivered(daemon).get(shard).copied().unwrap_or(0) > was
            })
        },
    );
    eprintln!(
        "{victim} killed: its shards {victims_shards:?} taken after {:.1} s, their members checked again after {:.1} s",
        taken.as_secs_f64(),
        killed_at.elapsed().as_secs_f64()
    );
    assert_eq!(settings_on(&fleet), at_kill, "a member was written again");
    let before: BTreeMap<String, BTreeMap<u32, u64>> = replicas
        .iter()
        .map(|(id, d)| (id.clone(), delivered(d)))
        .collect();

    settings(&repo, "v2");
    repo.commit("v2");
    await_until("v2 on every member", || everywhere(&fleet, "v2"));
    for (member, (_, rv)) in settings_on(&fleet) {
        assert_ne!(rv, at_kill[&member].1, "{member} not written");
    }
    for shard in &victims_shards {
        let (id, daemon) = new_owner(shard);
        let after = delivered(daemon).get(shard).copied().unwrap_or(0);
        let was = before[&id].get(shard).copied().unwrap_or(0);
        assert!(
            after > was,
            "{victim}'s shard {shard} was not delivered by its new owner {id}"
        );
    }

    // A report under a claim the shard's record no longer holds (a deposed owner's) is refused
    // and deleted.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use gitfleet::daemon::shards::orders::{self, Report, ReportBody};
        use gitfleet::daemon::shards::Names;
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(hosting_client(&hosting).await, NAMESPACE);
        let names = Names {
            prefix: "gitfleet".into(),
        };
        let shard = *victims_shards.iter().next().unwrap_or(&0);
        let stale = Report {
            shard: ShardId(shard),
            token: serde_json::from_str(&format!("\"{victim}@1\"")).unwrap(),
            body: ReportBody::Changed { changes: vec![] },
        };
        let object = orders::report_object(&names, "gitfleet-changes-stale", &stale);
        api.create(&Default::default(), &object).await.unwrap();
    });
    let leader_daemon = &replicas[&leader];
    await_until("the leader refuses the deposed owner's report", || {
        get(leader_daemon, "/metrics").contains("gitfleet_shard_reports_refused_total 1")
    });
    await_until("the refused report deleted", || {
        !hosting.exists(
            "hosting",
            &["configmap", "gitfleet-changes-stale", "-n", NAMESPACE],
        )
    });
}
