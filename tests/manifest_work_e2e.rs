//! Plain OCM `ManifestWork`s and their `manifestConfigs`/`deleteOption` end to end:
//! `gitfleet apply` of a real git repository to members served by `gitfleet sim` and by real API
//! servers (the test bed), checked with kubectl.
//!
//! Every test here fails if plain ManifestWorks are refused: `apply` would then exit 1 and
//! write nothing. The OCM behaviour each mirrors is cited on the test.

mod common;
use common::kubectl::Kubectl as _;

use common::members::{Backend, Members};
use common::{gitfleet, Repo};
use serde_json::Value;

on_both_backends!(
    a_manifest_work_lands_on_its_cluster_only,
    a_read_only_resource_is_never_written,
    create_only_never_overwrites_a_changed_live_object,
    orphaned_resources_stay_when_the_work_is_removed,
    update_replaces_and_a_field_manager_is_honoured,
    a_replica_sets_template_options_hold_on_the_clusters_it_picks,
);

use common::TWO_MEMBERS as FLEET;

/// A ManifestWork named `name` in cluster namespace `cluster`, carrying ConfigMaps of the
/// `default` namespace (`(name, value of key a)`), with `extra` spec lines.
fn work(cluster: &str, name: &str, config_maps: &[(&str, &str)], extra: &str) -> String {
    let mut manifests = String::new();
    for (cm, a) in config_maps {
        manifests.push_str(&format!(
            "    - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {cm}, namespace: default}}, data: {{a: '{a}'}}}}\n"
        ));
    }
    format!(
        "apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  name: {name}
  namespace: {cluster}
spec:
{extra}  workload:
    manifests:
{manifests}"
    )
}

fn repo() -> Repo {
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &common::member_cluster("alpha"));
    repo.write("members/beta.yaml", &common::member_cluster("beta"));
    repo
}

fn apply(repo: &Repo, members: &Members) -> Value {
    let repo_path = repo.path().display().to_string();
    let kubeconfig = members.kubeconfig.display().to_string();
    let run = gitfleet(&[
        "apply",
        "--repo",
        &repo_path,
        "--kubeconfig",
        &kubeconfig,
        "--retry-budget",
        "20s",
        "-o",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// The outcome of one object on one member, and the placement that reported it.
fn outcome(report: &Value, member: &str, name: &str) -> (String, String) {
    for m in report["members"].as_array().unwrap() {
        if m["member"] != member {
            continue;
        }
        for p in m["placements"].as_array().unwrap() {
            for o in p["objects"].as_array().unwrap() {
                if o["kind"] == "ConfigMap" && o["name"] == name {
                    return (
                        o["outcome"].as_str().unwrap().to_string(),
                        p["placement"].as_str().unwrap().to_string(),
                    );
                }
            }
        }
    }
    panic!("no ConfigMap {name} on {member} in {report:#}");
}

fn data_a(members: &Members, ctx: &str, name: &str) -> Value {
    members.get_json(ctx, &["configmap", name, "-n", "default"])["data"]["a"].clone()
}

/// OCM's model: the work agent of cluster X applies the ManifestWorks of hub namespace X
/// (ocm pkg/work/spoke/spokeagent.go informs on its own cluster's namespace only).
fn a_manifest_work_lands_on_its_cluster_only(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = repo();
    repo.write(
        "works/web.yaml",
        &work("alpha", "web", &[("mw-web", "1")], ""),
    );
    repo.commit("a work for alpha");
    let report = apply(&repo, &members);
    assert_eq!(
        outcome(&report, "alpha", "mw-web"),
        ("applied".into(), "mw.alpha.web".into())
    );
    assert_eq!(data_a(&members, "alpha", "mw-web"), "1");
    assert!(!members.exists("beta", &["configmap", "mw-web", "-n", "default"]));
    let cm = members.get_json("alpha", &["configmap", "mw-web", "-n", "default"]);
    assert_eq!(
        cm["metadata"]["labels"]["gitfleet.io/placement"],
        "mw.alpha.web"
    );

    // Removed from the repository (Foreground, the default): what it delivered is pruned.
    repo.remove("works/web.yaml");
    repo.commit("the work removed");
    let report = apply(&repo, &members);
    assert_eq!(outcome(&report, "alpha", "mw-web").0, "pruned");
    assert!(!members.exists("alpha", &["configmap", "mw-web", "-n", "default"]));
}

/// ReadOnly: the work agent's read-only applier writes nothing
/// (ocm pkg/work/spoke/apply/read_only_apply.go).
fn a_read_only_resource_is_never_written(backend: Backend) {
    let members = Members::start(backend, FLEET);
    members.apply(
        "alpha",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ro, namespace: default}\ndata: {a: live}\n",
        &["--field-manager", "someone"],
    );
    let repo = repo();
    let config = "  manifestConfigs:
  - resourceIdentifier: {group: '', resource: configmaps, namespace: default, name: ro}
    updateStrategy: {type: ReadOnly}
";
    repo.write(
        "works/ro.yaml",
        &work("alpha", "ro", &[("ro", "git"), ("rw", "git")], config),
    );
    repo.commit("read-only");
    let report = apply(&repo, &members);
    assert_eq!(outcome(&report, "alpha", "ro").0, "readOnly");
    assert_eq!(outcome(&report, "alpha", "rw").0, "applied");
    let cm = members.get_json(
        "alpha",
        &["configmap", "ro", "-n", "default", "--show-managed-fields"],
    );
    assert_eq!(cm["data"]["a"], "live");
    assert!(
        cm["metadata"]["labels"]["gitfleet.io/placement"].is_null(),
        "{cm:#}"
    );
    let managers: Vec<&str> = cm["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(!managers.contains(&"gitfleet"), "{managers:?}");
    assert_eq!(data_a(&members, "alpha", "rw"), "git");

    // Removing the work never deletes what it only read.
    repo.remove("works/ro.yaml");
    repo.commit("the work removed");
    apply(&repo, &members);
    assert_eq!(data_a(&members, "alpha", "ro"), "live");
    assert!(!members.exists("alpha", &["configmap", "rw", "-n", "default"]));
}

/// CreateOnly: created when absent, never updated
/// (ocm pkg/work/spoke/apply/create_only_apply.go).
fn create_only_never_overwrites_a_changed_live_object(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = repo();
    let config = "  manifestConfigs:
  - resourceIdentifier: {resource: configmaps, namespace: '*', name: 'co*'}
    updateStrategy: {type: CreateOnly}
";
    repo.write(
        "works/co.yaml",
        &work("alpha", "co", &[("co", "1")], config),
    );
    repo.commit("create-only");
    let report = apply(&repo, &members);
    assert_eq!(outcome(&report, "alpha", "co").0, "applied");
    assert_eq!(data_a(&members, "alpha", "co"), "1");
    let (code, _, err) = members.kubectl(
        "alpha",
        &[
            "patch",
            "configmap",
            "co",
            "-n",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"a":"changed"}}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    repo.write(
        "works/co.yaml",
        &work("alpha", "co", &[("co", "2")], config),
    );
    repo.commit("create-only, changed in git");
    let report = apply(&repo, &members);
    assert_eq!(outcome(&report, "alpha", "co").0, "unchanged");
    assert_eq!(data_a(&members, "alpha", "co"), "changed");
}

/// deleteOption Orphan and SelectivelyOrphan: what the work does not own stays on the cluster
/// when the work goes (ocm pkg/work/helper/helpers.go OwnedByTheWork, DeleteAppliedResources).
fn orphaned_resources_stay_when_the_work_is_removed(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = repo();
    repo.write(
        "works/all.yaml",
        &work(
            "alpha",
            "all",
            &[("orphan-all", "1")],
            "  deleteOption: {propagationPolicy: Orphan}\n",
        ),
    );
    repo.write(
        "works/some.yaml",
        &work(
            "alpha",
            "some",
            &[("keep", "1"), ("drop", "1")],
            "  deleteOption:
    propagationPolicy: SelectivelyOrphan
    selectivelyOrphans:
      orphaningRules: [{group: '', resource: configmaps, namespace: default, name: keep}]
",
        ),
    );
    repo.commit("orphaning works");
    apply(&repo, &members);
    for cm in ["orphan-all", "keep", "drop"] {
        assert_eq!(data_a(&members, "alpha", cm), "1", "{cm}");
    }
    repo.remove("works/all.yaml");
    repo.remove("works/some.yaml");
    repo.commit("the works removed");
    let report = apply(&repo, &members);
    assert_eq!(outcome(&report, "alpha", "orphan-all").0, "abandoned");
    assert_eq!(outcome(&report, "alpha", "keep").0, "abandoned");
    assert_eq!(outcome(&report, "alpha", "drop").0, "pruned");
    for cm in ["orphan-all", "keep"] {
        let live = members.get_json("alpha", &["configmap", cm, "-n", "default"]);
        assert_eq!(live["data"]["a"], "1");
        assert!(live["metadata"]["labels"]["gitfleet.io/placement"].is_null());
    }
    assert!(!members.exists("alpha", &["configmap", "drop", "-n", "default"]));
}

/// Update: a replace by an update call, labels and annotations merged with the live ones
/// (ocm pkg/work/spoke/apply/update_apply.go); ServerSideApply with its own fieldManager and
/// force (server_side_apply.go).
fn update_replaces_and_a_field_manager_is_honoured(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = repo();
    let config = "  manifestConfigs:
  - resourceIdentifier: {resource: configmaps, namespace: default, name: up}
    updateStrategy: {type: Update}
  - resourceIdentifier: {resource: configmaps, namespace: default, name: fm}
    updateStrategy: {type: ServerSideApply, serverSideApply: {fieldManager: work-agent-test, force: true}}
";
    repo.write(
        "works/up.yaml",
        &work("alpha", "up", &[("up", "1"), ("fm", "1")], config),
    );
    repo.commit("update and field manager");
    apply(&repo, &members);
    // Someone else adds a data key and a label; the next commit changes key a.
    let (code, _, err) = members.kubectl(
        "alpha",
        &[
            "patch",
            "configmap",
            "up",
            "-n",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"labels":{"team":"x"}},"data":{"b":"theirs"}}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    // Another manager owns fm's key a: only force lets the work's manager take it.
    members.apply(
        "alpha",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fm, namespace: default}\ndata: {a: other}\n",
        &["--field-manager", "other", "--force-conflicts"],
    );
    repo.write(
        "works/up.yaml",
        &work("alpha", "up", &[("up", "2"), ("fm", "2")], config),
    );
    repo.commit("changed");
    let report = apply(&repo, &members);
    assert_eq!(outcome(&report, "alpha", "up").0, "applied");
    let up = members.get_json("alpha", &["configmap", "up", "-n", "default"]);
    // Replaced: the data key only the member had is gone; the label is merged and kept.
    assert_eq!(up["data"], serde_json::json!({"a": "2"}), "{up:#}");
    assert_eq!(up["metadata"]["labels"]["team"], "x");
    assert_eq!(
        up["metadata"]["labels"]["gitfleet.io/placement"],
        "mw.alpha.up"
    );
    let fm = members.get_json(
        "alpha",
        &["configmap", "fm", "-n", "default", "--show-managed-fields"],
    );
    assert_eq!(fm["data"]["a"], "2");
    let managers: Vec<&str> = fm["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"work-agent-test"), "{managers:?}");
    assert!(!managers.contains(&"gitfleet"), "{managers:?}");

    // The same commit again after someone added a key: Update replaces it away, as OCM's
    // update applier does for any difference (isSameUnstructured); unchanged otherwise.
    let (code, _, err) = members.kubectl(
        "alpha",
        &[
            "patch",
            "configmap",
            "up",
            "-n",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"c":"drift"}}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let report = apply(&repo, &members);
    assert_eq!(outcome(&report, "alpha", "up").0, "applied");
    assert_eq!(
        data_all(&members, "alpha", "up"),
        serde_json::json!({"a": "2"})
    );
    let report = apply(&repo, &members);
    assert_eq!(outcome(&report, "alpha", "up").0, "unchanged");
}

fn data_all(members: &Members, ctx: &str, name: &str) -> Value {
    members.get_json(ctx, &["configmap", name, "-n", "default"])["data"].clone()
}

/// A ManifestWorkReplicaSet's `manifestWorkTemplate` options hold as a ManifestWork's do, on
/// every cluster its Placement picks (ocm pkg/work/hub/controllers/manifestworkreplicasetcontroller/
/// manifestworkreplicaset_deploy_reconcile.go: each work's spec is the template).
fn a_replica_sets_template_options_hold_on_the_clusters_it_picks(backend: Backend) {
    let members = Members::start(backend, FLEET);
    for ctx in ["alpha", "beta"] {
        members.apply(
            ctx,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rs-ro, namespace: default}\ndata: {a: live}\n",
            &["--field-manager", "someone"],
        );
    }
    let repo = Repo::new();
    repo.write("hub.yaml", &common::ocm_hub("both", &["alpha", "beta"]));
    repo.write(
        "mwrs.yaml",
        "apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata: {name: rs, namespace: apps}
spec:
  placementRefs: [{name: both}]
  manifestWorkTemplate:
    deleteOption:
      propagationPolicy: SelectivelyOrphan
      selectivelyOrphans:
        orphaningRules: [{group: '', resource: configmaps, namespace: default, name: rs-keep}]
    manifestConfigs:
    - resourceIdentifier: {group: '', resource: configmaps, namespace: default, name: rs-ro}
      updateStrategy: {type: ReadOnly}
    workload:
      manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: rs-ro, namespace: default}, data: {a: git}}
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: rs-keep, namespace: default}, data: {a: git}}
",
    );
    repo.commit("a replica set with options");
    let report = apply(&repo, &members);
    for ctx in ["alpha", "beta"] {
        assert_eq!(
            outcome(&report, ctx, "rs-ro"),
            ("readOnly".into(), "ocm.apps.both".into())
        );
        assert_eq!(data_a(&members, ctx, "rs-ro"), "live");
        assert_eq!(data_a(&members, ctx, "rs-keep"), "git");
    }
    repo.remove("mwrs.yaml");
    repo.commit("the replica set removed");
    let report = apply(&repo, &members);
    for ctx in ["alpha", "beta"] {
        assert_eq!(outcome(&report, ctx, "rs-keep").0, "abandoned");
        assert_eq!(data_a(&members, ctx, "rs-keep"), "git");
        assert_eq!(data_a(&members, ctx, "rs-ro"), "live");
    }
}

/// The daemon (`run --once`) delivers, keeps state for and prunes a ManifestWork as `apply`
/// does: it goes through the same rollout step.
#[test]
fn the_daemon_delivers_and_prunes_a_manifest_work() {
    let members = Members::start(Backend::Sim, FLEET);
    let repo = repo();
    repo.write(
        "works/web.yaml",
        &work("beta", "web", &[("daemon-web", "1")], ""),
    );
    repo.commit("a work for beta");
    let state = members.dir().join("state");
    let run_once = || {
        let run = gitfleet(&[
            "run",
            "--once",
            "--repo",
            repo.path().to_str().unwrap(),
            "--kubeconfig",
            members.kubeconfig.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    };
    run_once();
    assert_eq!(data_a(&members, "beta", "daemon-web"), "1");
    assert!(!members.exists("alpha", &["configmap", "daemon-web", "-n", "default"]));
    repo.remove("works/web.yaml");
    repo.commit("the work removed");
    run_once();
    assert!(!members.exists("beta", &["configmap", "daemon-web", "-n", "default"]));
}

/// A work in a namespace that is no cluster: nothing delivers it (the hub accepts it; no agent
/// reads that namespace). Reported on its schedule, never applied anywhere.
#[test]
fn a_work_outside_any_cluster_namespace_is_reported_not_delivered() {
    let repo = repo();
    repo.write(
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: nowhere}\n",
    );
    repo.write(
        "works/lost.yaml",
        &work("nowhere", "lost", &[("x", "1")], ""),
    );
    repo.commit("a lost work");
    let path = repo.path().display().to_string();
    let run = gitfleet(&["schedule", "--repo", &path, "-o", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let lost = v["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "ManifestWork")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(lost["selected"], serde_json::json!([]));
    assert_eq!(lost["conditions"][0]["reason"], "ClusterNotFound");
    // A feedback rule that cannot be read is refused, naming file and field.
    repo.write(
        "works/lost.yaml",
        &work(
            "alpha",
            "fb",
            &[("x", "1")],
            "  manifestConfigs:\n  - resourceIdentifier: {resource: configmaps, name: x, namespace: default}\n    feedbackRules: [{type: JSONPaths, jsonPaths: [{name: a, path: data.a}]}]\n",
        ),
    );
    repo.commit("feedback");
    let run = gitfleet(&["validate", "--repo", &path]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(
        all.contains("works/lost.yaml")
            && all.contains("spec.manifestConfigs[0].feedbackRules[0].jsonPaths[0].path")
            && all.contains("unrecognized identifier data"),
        "{all}"
    );
}
