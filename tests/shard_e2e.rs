//! Sharded delivery: replicas of `gitfleet run --state kubernetes --shards 8` with a real API
//! server of the test bed as the hosting cluster, and members on either backend: twelve
//! simulated ones, or six of the test bed. The leader decides; each member is pushed to by the
//! replica that owns its shard, through orders and reports in the hosting cluster. A killed
//! replica's members are checked by the survivors against what gitfleet applied there: the one
//! changed while no replica watched it is put back, and no other member is sent a single write
//! request (as each member counts them); then the survivors deliver to them. A report under a
//! claim that is no longer the shard's is refused. The leader holds no shard; a killed leader's successor hands its
//! shards over, again without a write.
//!
//! The replicas also run with no more permissions than the sharded deploy overlay's Role grants:
//! a token of its ServiceAccount as their hosting user, and every request the hosting cluster
//! refuses fails the test at once.
//!
//! Short leases (4 s / 3 s / 1 s) keep the takeover quick; every wait is on a condition.

mod common;
use common::kubectl::Kubectl as _;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::daemon::{await_until, Daemon};
use common::members::{available, Backend, Members};
use common::replicas::{self, get, leading, placements};
use common::Repo;
use gitfleet::daemon::shards::{assign, ReplicaId, ShardId};

const SHARDS: u32 = 8;
const NAMESPACE: &str = "default";
const REPLICAS: [&str; 3] = ["r1", "r2", "r3"];

on_both_backends!(
    each_member_is_pushed_by_its_shards_owner_and_the_survivors_take_over_a_killed_ones,
    a_killed_leaders_successor_hands_its_shards_over_without_a_write
);

/// The members on `backend`. A test-bed member is a control plane of its own (API server,
/// controller-manager, scheduler, kwok), so the real fleet is smaller; whichever of r1, r2 and
/// r3 leads, its six members still fall in shards that each of the two others owns, so the one
/// killed has members and the other keeps its own.
fn member_names(backend: Backend) -> Vec<String> {
    let count = match backend {
        Backend::Sim => 12,
        Backend::Real => 6,
    };
    (1..=count).map(|i| format!("m{i:02}")).collect()
}

fn fleet_yaml(backend: Backend) -> String {
    // kubectl sends no token over plain HTTP: the test's own reads of simulated members are
    // anonymous (the test bed's kubeconfig has a client certificate instead).
    let mut yaml = "anonymousAuth: true\nmembers:\n".to_string();
    for m in member_names(backend) {
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

/// The members on `backend`, and a placement of the resources on all of them.
fn place(repo: &Repo, backend: Backend) {
    for m in member_names(backend) {
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

/// A replica whose hosting cluster is context `hosting` of `hosting_kubeconfig`, with its state
/// in `namespace`, and whose members are `fleet`'s.
fn replica(
    repo: &Repo,
    hosting_kubeconfig: &Path,
    namespace: &str,
    fleet: &Members,
    identity: &str,
) -> Daemon {
    let hosting = replicas::Hosting {
        kubeconfig: hosting_kubeconfig,
        namespace,
    };
    replicas::start(
        repo,
        &fleet.kubeconfig,
        fleet.dir(),
        &hosting,
        identity,
        &["--shards", "8"],
    )
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

/// Whether one replica leads and each holds exactly the shards that rendezvous hashing gives
/// it among those that serve shards (all but the leader): the split they settle on (a replica
/// that has not seen another yet may hold, for a moment, a shard that is not its own).
fn split_among(replicas: &BTreeMap<String, Daemon>) -> bool {
    let ids = replicas
        .keys()
        .map(|id| ReplicaId::from(id.as_str()))
        .collect();
    let mut leaders = replicas.iter().filter(|(_, d)| leading(d));
    let (Some((leader, _)), None) = (leaders.next(), leaders.next()) else {
        return false;
    };
    let leader = ReplicaId::from(leader.as_str());
    let owners = assign::owners(SHARDS, &assign::serving(&ids, Some(&leader)));
    replicas.iter().all(|(id, daemon)| {
        let due: BTreeSet<u32> = owners
            .iter()
            .filter(|(_, owner)| owner.as_str() == id)
            .map(|(s, _)| s.0)
            .collect();
        held(daemon) == due
    })
}

/// Orders a replica carried out with `outcome` (`delivered`, `probed`, `checked`), by shard
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

fn checked(daemon: &Daemon) -> BTreeMap<u32, u64> {
    orders(daemon, "checked")
}

/// Each member's `settings` mode and resourceVersion.
fn settings_on(fleet: &Members) -> BTreeMap<String, (String, String)> {
    member_names(fleet.backend)
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
    now.len() == member_names(fleet.backend).len() && now.values().all(|(m, _)| m == mode)
}

/// The requests that could write (every verb but GET, LIST and WATCH) each member received so
/// far. The simulator counts every request it is sent, and its own controllers send none. A
/// test-bed member's controllers write leases, events and statuses all the time, so there the
/// API server's `apiserver_request_total` is summed over Namespaces and ConfigMaps only: the
/// kinds gitfleet writes here (the placed objects, and its records).
fn writes(fleet: &Members) -> BTreeMap<String, u64> {
    member_names(fleet.backend)
        .into_iter()
        .map(|m| {
            let n = match fleet.sim() {
                Some(sim) => sim.member(&m)["requests"]["writes"]
                    .as_u64()
                    .expect("the simulator counts writes"),
                None => api_server_writes(fleet, &m, &["namespaces", "configmaps"]),
            };
            (m, n)
        })
        .collect()
}

/// The write requests on `resources` that `member`'s API server counted, whatever their answer.
fn api_server_writes(fleet: &Members, member: &str, resources: &[&str]) -> u64 {
    let (code, metrics, err) = fleet.kubectl(member, &["get", "--raw", "/metrics"]);
    assert_eq!(code, 0, "{err}");
    let counted: Vec<f64> = metrics
        .lines()
        .filter_map(|line| {
            let (labels, count) = line
                .strip_prefix("apiserver_request_total{")?
                .split_once("} ")?;
            let label = |name: &str| {
                labels.split(',').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    (k == name).then(|| v.trim_matches('"'))
                })
            };
            let write = !matches!(label("verb")?, "GET" | "LIST" | "WATCH");
            (write && resources.contains(&label("resource")?))
                .then(|| count.trim().parse().expect("a counter's value"))
        })
        .collect();
    assert!(
        !counted.is_empty(),
        "{member}'s API server counted no write on {resources:?} (is apiserver_request_total still named so?)"
    );
    counted.iter().sum::<f64>() as u64
}

/// A test-bed API server as the hosting cluster, `backend`'s members, the resources'
/// repository and three replicas, once one leads and the two others hold the shards.
struct Split {
    hosting: Members,
    fleet: Members,
    repo: Repo,
    replicas: BTreeMap<String, Daemon>,
}

fn three_replicas(backend: Backend) -> Split {
    let hosting = Members::start(Backend::Real, "members:\n  - name: hosting\n");
    let fleet = Members::start(backend, &fleet_yaml(backend));
    let repo = fleet_repo();
    let replicas: BTreeMap<String, Daemon> = REPLICAS
        .into_iter()
        .map(|id| {
            let daemon = replica(&repo, &hosting.kubeconfig, NAMESPACE, &fleet, id);
            (id.to_string(), daemon)
        })
        .collect();
    await_until(
        "three replicas, one leading and two holding the 8 shards",
        || split_among(&replicas),
    );
    Split {
        hosting,
        fleet,
        repo,
        replicas,
    }
}

/// The replica that leads (one must).
fn leader_of(replicas: &BTreeMap<String, Daemon>) -> String {
    replicas
        .iter()
        .find(|(_, d)| leading(d))
        .map(|(id, _)| id.clone())
        .expect("a replica leads")
}

/// Whether `daemon` shows the placement up to date on `members` clusters.
fn up_to_date(daemon: &Daemon, members: usize) -> bool {
    placements(daemon)["placements"][0]["upToDate"]
        .as_array()
        .map(Vec::len)
        == Some(members)
}

fn shard_of(member: &str) -> u32 {
    assign::shard_of(member, SHARDS).0
}

/// The hosting cluster is a test-bed API server on either backend; `backend` is the members'.
fn each_member_is_pushed_by_its_shards_owner_and_the_survivors_take_over_a_killed_ones(
    backend: Backend,
) {
    if !available(Backend::Real) {
        return;
    }
    let Split {
        hosting,
        fleet,
        repo,
        mut replicas,
    } = three_replicas(backend);
    let members = member_names(backend);
    let holders: BTreeMap<u32, String> = replicas
        .iter()
        .flat_map(|(id, d)| held(d).into_iter().map(move |s| (s, id.clone())))
        .collect();
    let member_shards: BTreeSet<u32> = members.iter().map(|m| shard_of(m)).collect();
    let owning: BTreeSet<&String> = member_shards.iter().map(|s| &holders[s]).collect();
    assert!(
        owning.len() >= 2,
        "the members' shards {member_shards:?} fall to {owning:?} only: nothing shows a push \
         that is not the owner's"
    );

    // The first rollout: every member probed and pushed to by its shard's owner, and by no one
    // else.
    place(&repo, backend);
    await_until("the placement on every member", || everywhere(&fleet, "v1"));
    let leader = leader_of(&replicas);
    await_until("the leader shows every member up to date", || {
        up_to_date(&replicas[&leader], members.len())
    });
    assert!(
        held(&replicas[&leader]).is_empty(),
        "the leader {leader} holds shards while others are live"
    );
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
    // A real API server speaks HTTP/2 over TLS: a replica's many requests to the hosting
    // cluster at once (orders, reports, claims) and its watches share one connection instead of
    // keeping one each, pooled with its read buffer.
    let port = common::connections::server_port(&hosting.kubeconfig, "hosting");
    for (id, daemon) in &replicas {
        let held = common::connections::connections_to(daemon.child.id(), port);
        assert_eq!(held, 1, "{id}'s connections to the hosting API server");
    }

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
    assert!(
        !victims_shards.is_empty(),
        "no replica but the leader {leader} holds a member's shard: {holders:?}"
    );
    // Each of the victim's shards is checked by its new owner, one order for all its members.
    let before: BTreeMap<String, BTreeMap<u32, u64>> = replicas
        .iter()
        .filter(|(id, _)| **id != victim)
        .map(|(id, d)| (id.clone(), checked(d)))
        .collect();
    // A member of the victim's changed while no replica watches it: its settings deleted.
    let drifted = members
        .iter()
        .find(|m| victims_shards.contains(&shard_of(m)))
        .expect("the victim's shards hold members")
        .clone();
    let at_kill = settings_on(&fleet);
    let writes_at_kill = writes(&fleet);
    let killed_at = std::time::Instant::now();
    drop(replicas.remove(&victim));
    let (code, _, err) = fleet.kubectl(&drifted, &["delete", "configmap", "settings", "-n", "app"]);
    assert_eq!(code, 0, "{err}");
    await_until("the survivor that does not lead holding all 8", || {
        split_among(&replicas)
    });
    let taken = killed_at.elapsed();
    // The new owners compare the killed replica's members with what gitfleet applied there (no
    // commit, no resync) and watch them from then on; only what differs is pushed again.
    let new_owner = |shard: &u32| {
        replicas
            .iter()
            .find(|(_, d)| held(d).contains(shard))
            .map(|(id, d)| (id.clone(), d))
            .expect("a survivor holds it")
    };
    await_until(
        "each of the killed replica's shards checked by its new owner",
        || {
            victims_shards.iter().all(|shard| {
                let (id, daemon) = new_owner(shard);
                let was = before[&id].get(shard).copied().unwrap_or(0);
                checked(daemon).get(shard).copied().unwrap_or(0) > was
            })
        },
    );
    await_until("the settings deleted unwatched put back", || {
        settings_on(&fleet)
            .get(&drifted)
            .is_some_and(|(mode, _)| mode == "v1")
    });
    eprintln!(
        "{victim} killed: its shards {victims_shards:?} taken after {:.1} s, their members checked and {drifted} repaired after {:.1} s",
        taken.as_secs_f64(),
        killed_at.elapsed().as_secs_f64()
    );
    // Counted as requests: a rewrite of what the member already holds leaves its
    // resourceVersion as it was, on either backend. Only the member that changed is written.
    let mut writes_now = writes(&fleet);
    assert!(
        writes_now.remove(&drifted) > writes_at_kill.get(&drifted).copied(),
        "{drifted}'s settings were put back without a write"
    );
    let mut writes_before = writes_at_kill.clone();
    writes_before.remove(&drifted);
    assert_eq!(
        writes_now, writes_before,
        "a member that did not change was sent a write during the takeover"
    );
    let mut settings_now = settings_on(&fleet);
    settings_now.remove(&drifted);
    let mut settings_before = at_kill.clone();
    settings_before.remove(&drifted);
    assert_eq!(settings_now, settings_before, "a member was written again");
    let at_kill = settings_on(&fleet);
    let writes_at_kill = writes(&fleet);
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
    // The count that stayed still above sees gitfleet's writes.
    let writes_at_v2 = writes(&fleet);
    for (member, n) in &writes_at_kill {
        assert!(
            writes_at_v2[member] > *n,
            "{member}'s writes of v2 not counted: {n} before, {} after",
            writes_at_v2[member]
        );
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
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(
            replicas::hosting_client(&hosting.kubeconfig).await,
            NAMESPACE,
        );
        let names = Names {
            prefix: "gitfleet".into(),
        };
        let shard = *victims_shards.first().expect("checked above");
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

/// The namespace the deploy manifests install into.
const DEPLOY_NAMESPACE: &str = "gitfleet";

/// Applies the ServiceAccount, Role and RoleBinding of the sharded deploy overlay to `hosting`
/// (in its namespace, created first) and writes a kubeconfig whose user is a token of that
/// ServiceAccount, with `hosting`'s server and CA, as context `hosting`; returns its path.
fn sharded_service_account(hosting: &Members) -> PathBuf {
    let rendered = std::process::Command::new("kubectl")
        .args(["kustomize", "deploy/kustomize/overlays/sharded"])
        .current_dir(common::manifest_dir())
        .output()
        .expect("kubectl runs");
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let rendered = String::from_utf8(rendered.stdout).unwrap();
    let rbac: Vec<serde_json::Value> = gitfleet::yaml::documents(&rendered)
        .unwrap()
        .into_iter()
        .filter(|o| {
            ["ServiceAccount", "Role", "RoleBinding"].contains(&o["kind"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(rbac.len(), 3, "{rendered}");
    let (code, out, err) = hosting.kubectl("hosting", &["create", "namespace", DEPLOY_NAMESPACE]);
    assert_eq!(code, 0, "{out}{err}");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rbac});
    hosting.apply("hosting", &list.to_string(), &[]);
    let (code, token, err) = hosting.kubectl(
        "hosting",
        &[
            "create",
            "token",
            "gitfleet",
            "-n",
            DEPLOY_NAMESPACE,
            "--duration=1h",
        ],
    );
    assert_eq!(code, 0, "{err}");

    // The test bed's kubeconfig (read as JSON values): the hosting context's cluster entry,
    // server and CA, kept as it is.
    let admin = std::fs::read_to_string(&hosting.kubeconfig).unwrap();
    let admin = gitfleet::yaml::documents(&admin).unwrap().remove(0);
    let named = |list: &str, name: &str| {
        admin[list]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {list} entry {name} in the test bed's kubeconfig"))
            .clone()
    };
    let context = named("contexts", "hosting");
    let cluster = named("clusters", context["context"]["cluster"].as_str().unwrap());
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "gitfleet", "user": {"token": token.trim()}}],
        "contexts": [{"name": "hosting", "context": {
            "cluster": cluster["name"],
            "user": "gitfleet",
            "namespace": DEPLOY_NAMESPACE,
        }}],
        "current-context": "hosting",
    });
    let path = hosting.dir().join("gitfleet-sa.kubeconfig");
    std::fs::write(&path, kubeconfig.to_string()).unwrap();
    path
}

/// Fails at once, with the line, when a replica logged a request the hosting cluster refused
/// (a 403: the Role lacks a verb); the lines read are consumed.
fn assert_nothing_forbidden(replicas: &BTreeMap<String, Daemon>) {
    for (id, daemon) in replicas {
        while let Ok(line) = daemon.lines.try_recv() {
            assert!(
                !line.to_lowercase().contains("forbidden"),
                "the hosting cluster refused {id} a request the sharded overlay's Role should allow:\n{line}"
            );
        }
    }
}

#[test]
fn sharded_replicas_need_no_more_than_the_sharded_overlays_role() {
    if !available(Backend::Real) {
        return;
    }
    let hosting = Members::start(Backend::Real, "members:\n  - name: hosting\n");
    let fleet = Members::start(Backend::Sim, &fleet_yaml(Backend::Sim));
    let kubeconfig = sharded_service_account(&hosting);
    let repo = fleet_repo();
    let replicas: BTreeMap<String, Daemon> = ["r1", "r2"]
        .into_iter()
        .map(|id| {
            let daemon = replica(&repo, &kubeconfig, DEPLOY_NAMESPACE, &fleet, id);
            (id.to_string(), daemon)
        })
        .collect();
    let permitted = |what: &str, check: &dyn Fn() -> bool| {
        await_until(what, || {
            assert_nothing_forbidden(&replicas);
            check()
        })
    };
    permitted(
        "two replicas, one leading and the other holding the 8 shards",
        &|| split_among(&replicas),
    );
    place(&repo, Backend::Sim);
    // The leader stores the rendering and orders each member's work; each shard's owner reads
    // them, pushes and reports back: all through the hosting cluster, as the ServiceAccount.
    permitted("the placement on every member", &|| {
        everywhere(&fleet, "v1")
    });
    let member_shards: BTreeSet<u32> = member_names(Backend::Sim)
        .iter()
        .map(|m| shard_of(m))
        .collect();
    for shard in member_shards {
        let (owner, daemon) = replicas
            .iter()
            .find(|(_, d)| held(d).contains(&shard))
            .expect("an owner");
        assert!(
            delivered(daemon).contains_key(&shard),
            "shard {shard}'s members not delivered by its owner {owner}"
        );
    }
    permitted("the leader showing every member up to date", &|| {
        replicas
            .values()
            .any(|d| leading(d) && up_to_date(d, member_names(Backend::Sim).len()))
    });

    // What this run does not reach in its time, asked of the API server's authorizer instead:
    // the renderings' garbage collection (every ten minutes) and a replica's release of its
    // Lease on a graceful stop.
    let cache = hosting.dir().join("kube-cache-sa");
    for (verb, resource) in [
        ("list", "secrets"),
        ("delete", "secrets"),
        ("delete", "leases.coordination.k8s.io"),
    ] {
        let (code, out, err) = common::kubectl::run(
            &kubeconfig,
            &cache,
            "hosting",
            &["auth", "can-i", verb, resource, "-n", DEPLOY_NAMESPACE],
            "",
        );
        assert_eq!(
            (code, out.trim()),
            (0, "yes"),
            "the ServiceAccount may not {verb} {resource}: {err}"
        );
    }
    assert_nothing_forbidden(&replicas);
}

/// The leader holds no shard while others are live, so killing it takes no member from its
/// owner: a follower takes the leader Lease, hands the shards it held to the other survivor,
/// and confirms every binding through it without a write; the next commit reaches every member.
fn a_killed_leaders_successor_hands_its_shards_over_without_a_write(backend: Backend) {
    if !available(Backend::Real) {
        return;
    }
    let Split {
        hosting: _hosting,
        fleet,
        repo,
        mut replicas,
    } = three_replicas(backend);
    let members = member_names(backend);
    place(&repo, backend);
    await_until("the placement on every member", || everywhere(&fleet, "v1"));
    let leader = leader_of(&replicas);
    await_until("the leader shows every member up to date", || {
        up_to_date(&replicas[&leader], members.len())
    });

    let writes_at_kill = writes(&fleet);
    drop(replicas.remove(&leader));
    await_until(
        "a new leader, holding no shard, and the other survivor holding all 8",
        || split_among(&replicas),
    );
    let successor = leader_of(&replicas);
    assert!(held(&replicas[&successor]).is_empty());
    await_until("the new leader shows every member up to date", || {
        up_to_date(&replicas[&successor], members.len())
    });
    assert_eq!(
        writes(&fleet),
        writes_at_kill,
        "a member was sent a write while {successor} took over from {leader}"
    );

    settings(&repo, "v2");
    repo.commit("v2");
    await_until("v2 on every member", || everywhere(&fleet, "v2"));
}
