//! `gitfleet apply` end to end: the real binary, a real git repository, and members served by the
//! real `gitfleet sim` or, for the tests listed in `on_both_backends!`, also by real API servers
//! (the test bed), checked with kubectl.

mod common;
use common::kubectl::Kubectl as _;

use common::members::{Backend, Members};
use common::{gitfleet, Repo, Run};
use serde_json::{json, Value};

// Member-facing behaviour, checked on `gitfleet sim` and on real API servers (the test bed).
on_both_backends!(
    lands_objects_then_updates_and_prunes,
    a_down_member_fails_alone_and_catches_up_later,
    custom_resources_land_after_their_crd,
    a_field_owned_by_another_manager_conflicts_without_force,
    take_over_never_leaves_unlabelled_objects_alone,
    prune_never_deletes_an_object_without_gitfleets_label,
    client_side_apply_removes_what_git_dropped_and_keeps_what_others_added,
    report_diff_writes_nothing_and_reports_the_diff,
    if_not_drifted_reports_drift_after_a_kubectl_edit,
    abandon_leaves_the_object_on_the_member,
    take_over_if_no_diff_takes_identical_objects_only,
    a_namespace_gitfleet_did_not_create_is_never_deleted,
    full_comparison_reports_fields_others_set_after_apply,
    many_objects_of_a_kind_are_read_in_one_list_with_the_same_rules,
    an_unchanged_fleet_is_confirmed_with_a_list_per_kind_not_a_get_per_object,
    a_pruned_object_held_by_a_finalizer_is_in_progress_until_it_goes,
    a_pruned_namespace_is_in_progress_while_it_terminates,
    take_over_always_takes_what_nobody_else_holds_and_conflicts_on_the_rest,
    take_over_under_the_default_client_side_apply_puts_the_manifests_fields_in_place,
    a_placement_another_live_writer_is_writing_is_left_to_it,
    two_applies_of_different_commits_at_once_never_mix_a_placement_silently,
    a_push_of_one_placement_reads_only_its_own_record,
);

const FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
  - name: beta
"#;

fn member(name: &str) -> String {
    format!(
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: {name}
  labels: {{region: {name}-region, fleet: demo}}
spec:
  identity: {{name: member, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
"
    )
}

const NAMESPACE: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: app
";

const CRP: &str = "\
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: app
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: app}
";

const OVERRIDE: &str = "\
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceOverride
metadata:
  name: region
  namespace: app
spec:
  placement: {name: app}
  resourceSelectors:
  - {group: '', version: v1, kind: ConfigMap, name: settings}
  policy:
    overrideRules:
    - clusterSelector:
        clusterSelectorTerms:
        - labelSelector: {matchLabels: {fleet: demo}}
      jsonPatchOverrides:
      - {op: add, path: /data/region, value: '${MEMBER-CLUSTER-LABEL-KEY-region}'}
";

const ENVELOPE: &str = "\
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceEnvelope
metadata:
  name: guardrails
  namespace: app
data:
  quota.yaml:
    apiVersion: v1
    kind: ResourceQuota
    metadata: {name: app-quota, namespace: app}
    spec:
      hard: {pods: '10'}
";

fn configmap(name: &str, data: &str) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: app
data: {data}
"
    )
}

/// A repository with members alpha and beta and the `app` namespace placed on both.
fn fleet_repo() -> Repo {
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &member("alpha"));
    repo.write("members/beta.yaml", &member("beta"));
    repo.write("app/namespace.yaml", NAMESPACE);
    repo.write("app/placement.yaml", CRP);
    repo
}

fn apply(repo: &Repo, members: &Members, extra: &[&str]) -> Run {
    let repo_path = repo.path().display().to_string();
    let kubeconfig = members.kubeconfig.display().to_string();
    let mut args = vec!["apply", "--repo", &repo_path, "--kubeconfig", &kubeconfig];
    if !extra.contains(&"--retry-budget") {
        args.extend_from_slice(&["--retry-budget", "20s"]);
    }
    args.extend_from_slice(extra);
    gitfleet(&args)
}

fn apply_json(repo: &Repo, members: &Members, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["-o", "json"];
    args.extend_from_slice(extra);
    let run = apply(repo, members, &args);
    let v: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "apply -o json printed no JSON ({e}): {}\n{}",
            run.stdout, run.stderr
        )
    });
    (run.code, v, run.stderr)
}

/// One member's part of an `apply -o json` report.
fn member_report<'a>(report: &'a Value, member: &str) -> &'a Value {
    report["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["member"] == member)
        .unwrap_or_else(|| panic!("no member {member} in {report:#}"))
}

/// The result of one object on one member: (outcome, whole result).
fn outcome(report: &Value, member: &str, kind: &str, name: &str) -> (String, Value) {
    let m = member_report(report, member);
    for p in m["placements"].as_array().unwrap() {
        for o in p["objects"].as_array().unwrap() {
            if o["kind"] == kind && o["name"] == name {
                return (o["outcome"].as_str().unwrap().to_string(), o.clone());
            }
        }
    }
    panic!("no {kind} {name} on {member} in {report:#}");
}

fn exists(members: &Members, ctx: &str, args: &[&str]) -> bool {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    let (code, _, err) = members.kubectl(ctx, &full);
    if code != 0 {
        assert!(
            err.contains("NotFound") || err.contains("not found"),
            "{err}"
        );
    }
    code == 0
}

fn lands_objects_then_updates_and_prunes(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.write("app/old.yaml", &configmap("old", "{x: '1'}"));
    repo.write("app/override.yaml", OVERRIDE);
    repo.write("app/envelope.yaml", ENVELOPE);
    let first = repo.commit("first");

    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    for ctx in ["alpha", "beta"] {
        let cm = members.get_json(ctx, &["configmap", "settings", "-n", "app"]);
        assert_eq!(cm["data"]["mode"], "blue");
        assert_eq!(cm["data"]["region"], format!("{ctx}-region"));
        let labels = &cm["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/managed-by"], "gitfleet");
        assert_eq!(labels["gitfleet.io/placement"], "crp.app");
        let ann = &cm["metadata"]["annotations"];
        assert_eq!(ann["gitfleet.io/commit"], first.as_str());
        assert!(ann["gitfleet.io/spec-hash"].as_str().is_some());
        // The whole sha256 of the placement's resources, as the daemon stamps it.
        let stamp = ann["gitfleet.io/resource-snapshot"].as_str().unwrap();
        assert!(
            stamp.len() == 64 && stamp.bytes().all(|b| b.is_ascii_hexdigit()),
            "{stamp}"
        );
        let quota = members.get_json(ctx, &["resourcequota", "app-quota", "-n", "app"]);
        assert_eq!(quota["spec"]["hard"]["pods"], "10");
        let record = members.get_json(
            ctx,
            &["configmap", "applied.crp.app", "-n", "gitfleet-system"],
        );
        assert!(record["data"]["objects"]
            .as_str()
            .unwrap()
            .contains("\"old\""));
    }
    assert_eq!(
        outcome(&report, "alpha", "ConfigMap", "settings").0,
        "applied"
    );
    assert_eq!(
        outcome(&report, "alpha", "Namespace", "app").1["availability"]["status"],
        "Available"
    );

    // The same commit again changes nothing.
    let (code, report, _) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        outcome(&report, "beta", "ConfigMap", "settings").0,
        "unchanged"
    );

    // Second commit: an update, and a removed object is pruned.
    repo.write("app/settings.yaml", &configmap("settings", "{mode: green}"));
    repo.remove("app/old.yaml");
    repo.commit("second");
    let run = apply(&repo, &members, &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("PLACEMENT"), "{}", run.stdout);
    for ctx in ["alpha", "beta"] {
        let cm = members.get_json(ctx, &["configmap", "settings", "-n", "app"]);
        assert_eq!(cm["data"]["mode"], "green");
        assert!(!exists(&members, ctx, &["configmap", "old", "-n", "app"]));
    }
}

fn a_down_member_fails_alone_and_catches_up_later(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.commit("first");
    members.stop_member("beta");
    let (code, report, _) = apply_json(&repo, &members, &["--retry-budget", "1s"]);
    assert_eq!(code, 1);
    assert_eq!(
        outcome(&report, "alpha", "ConfigMap", "settings").0,
        "applied"
    );
    let beta = member_report(&report, "beta");
    assert!(
        beta["error"].as_str().unwrap().contains("unreachable"),
        "{beta:#}"
    );
    assert!(exists(
        &members,
        "alpha",
        &["configmap", "settings", "-n", "app"]
    ));

    members.start_member("beta");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert!(exists(
        &members,
        "beta",
        &["configmap", "settings", "-n", "app"]
    ));
}

#[test]
fn a_flaky_member_lands_through_retries() {
    let members = Members::start(Backend::Sim, FLEET);
    let repo = fleet_repo();
    for i in 0..5 {
        repo.write(
            &format!("app/cm{i}.yaml"),
            &configmap(&format!("cm{i}"), "{a: '1'}"),
        );
    }
    repo.commit("first");
    members
        .sim()
        .expect("faults need the simulator")
        .set_faults("alpha", json!({"errorRate": 0.5, "errorCodes": [503, 429]}));
    let (code, report, err) = apply_json(&repo, &members, &["--retry-budget", "60s"]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    members
        .sim()
        .expect("faults need the simulator")
        .set_faults("alpha", json!({"errorRate": 0.0}));
    for i in 0..5 {
        assert!(exists(
            &members,
            "alpha",
            &["configmap", &format!("cm{i}"), "-n", "app"]
        ));
    }
}

fn crp_with(strategy: &str) -> String {
    format!("{CRP}  strategy:\n{strategy}")
}

/// Runs kubectl with a manifest written to a file (kubectl reads it with -f).
fn kubectl_file(
    members: &Members,
    ctx: &str,
    args: &[&str],
    manifest: &str,
) -> (i32, String, String) {
    let path = members.dir().join(format!("manifest-{ctx}.yaml"));
    std::fs::write(&path, manifest).unwrap();
    let path = path.display().to_string();
    let mut full = args.to_vec();
    full.extend_from_slice(&["-f", &path]);
    members.kubectl(ctx, &full)
}

/// Objects created on alpha by someone other than gitfleet (kubectl's own server-side apply).
fn create_by_someone_else(members: &Members, manifests: &str) {
    let (code, out, err) = kubectl_file(
        members,
        "alpha",
        &[
            "apply",
            "--server-side",
            "--field-manager=someone",
            "--validate=false",
        ],
        manifests,
    );
    assert_eq!(code, 0, "{out}{err}");
}

fn kubectl_ok(members: &Members, ctx: &str, args: &[&str]) {
    let (code, out, err) = members.kubectl(ctx, args);
    assert_eq!(code, 0, "kubectl {args:?}: {out}{err}");
}

fn a_field_owned_by_another_manager_conflicts_without_force(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {type: ServerSideApply}\n"),
    );
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.commit("first");
    let (code, _, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = kubectl_file(
        &members,
        "alpha",
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "--validate=false",
        ],
        &configmap("settings", "{mode: red}"),
    );
    assert_eq!(code, 0, "{out}{err}");
    repo.write("app/settings.yaml", &configmap("settings", "{mode: green}"));
    repo.commit("second");
    let (code, report, _) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 1);
    let (o, r) = outcome(&report, "alpha", "ConfigMap", "settings");
    assert_eq!(o, "failed");
    // The API server's own words: the other manager and the field it owns; and the way out.
    let error = r["error"].as_str().unwrap();
    assert!(error.starts_with("409 Conflict: "), "{r:#}");
    assert!(
        error.contains(r#"conflict with "other""#)
            && error.contains(".data.mode")
            && error.contains("set serverSideApplyConfig.force: true"),
        "{r:#}"
    );
    // beta has no other manager: it takes the update.
    assert_eq!(
        outcome(&report, "beta", "ConfigMap", "settings").0,
        "applied"
    );
    let cm = members.get_json("alpha", &["configmap", "settings", "-n", "app"]);
    assert_eq!(cm["data"]["mode"], "red");

    // serverSideApplyConfig.force takes the field over.
    repo.write(
        "app/placement.yaml",
        &crp_with(
            "    applyStrategy: {type: ServerSideApply, serverSideApplyConfig: {force: true}}\n",
        ),
    );
    repo.commit("force");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    let cm = members.get_json("alpha", &["configmap", "settings", "-n", "app"]);
    assert_eq!(cm["data"]["mode"], "green");
}

fn take_over_never_leaves_unlabelled_objects_alone(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {whenToTakeOver: Never}\n"),
    );
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.write("app/fresh.yaml", &configmap("fresh", "{a: '1'}"));
    repo.commit("first");
    create_by_someone_else(
        &members,
        &format!("{NAMESPACE}---\n{}", configmap("settings", "{mode: mine}")),
    );
    let (code, report, _) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 1);
    let (o, r) = outcome(&report, "alpha", "ConfigMap", "settings");
    assert_eq!(o, "notTakenOver", "{r:#}");
    assert!(r["error"].as_str().unwrap().contains("Never"));
    assert_eq!(
        outcome(&report, "alpha", "Namespace", "app").0,
        "notTakenOver"
    );
    assert_eq!(outcome(&report, "alpha", "ConfigMap", "fresh").0, "applied");
    assert_eq!(
        outcome(&report, "beta", "ConfigMap", "settings").0,
        "applied"
    );
    let cm = members.get_json("alpha", &["configmap", "settings", "-n", "app"]);
    assert_eq!(cm["data"]["mode"], "mine");
    assert!(cm["metadata"]["labels"]["gitfleet.io/placement"].is_null());
    let table = apply(&repo, &members, &[]);
    assert!(
        table
            .stdout
            .contains("crp.app alpha: ConfigMap app/settings: notTakenOver"),
        "{}",
        table.stdout
    );
}

fn prune_never_deletes_an_object_without_gitfleets_label(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write("app/old.yaml", &configmap("old", "{a: '1'}"));
    repo.write("app/gone.yaml", &configmap("gone", "{a: '1'}"));
    repo.commit("first");
    let (code, _, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{err}");
    // Someone claims `old` by removing gitfleet's label.
    kubectl_ok(
        &members,
        "alpha",
        &[
            "label",
            "configmap",
            "old",
            "-n",
            "app",
            "gitfleet.io/placement-",
        ],
    );
    repo.remove("app/old.yaml");
    repo.remove("app/gone.yaml");
    repo.commit("second");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(outcome(&report, "alpha", "ConfigMap", "old").0, "left");
    assert_eq!(outcome(&report, "alpha", "ConfigMap", "gone").0, "pruned");
    assert_eq!(outcome(&report, "beta", "ConfigMap", "old").0, "pruned");
    assert!(exists(
        &members,
        "alpha",
        &["configmap", "old", "-n", "app"]
    ));
    assert!(!exists(
        &members,
        "alpha",
        &["configmap", "gone", "-n", "app"]
    ));
    assert!(!exists(
        &members,
        "beta",
        &["configmap", "old", "-n", "app"]
    ));

    // Removing the placement prunes what it delivered, namespace included (gitfleet created it).
    repo.remove("app/placement.yaml");
    repo.commit("third");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert!(!exists(&members, "beta", &["namespace", "app"]));
    assert!(!exists(
        &members,
        "beta",
        &["configmap", "applied.crp.app", "-n", "gitfleet-system"]
    ));
}

fn client_side_apply_removes_what_git_dropped_and_keeps_what_others_added(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {type: ClientSideApply}\n"),
    );
    repo.write(
        "app/settings.yaml",
        &configmap("settings", "{a: '1', b: '2'}"),
    );
    repo.commit("first");
    let (code, _, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{err}");
    kubectl_ok(
        &members,
        "alpha",
        &[
            "patch",
            "configmap",
            "settings",
            "-n",
            "app",
            "--type=merge",
            "-p",
            r#"{"data":{"other":"x"}}"#,
        ],
    );
    repo.write("app/settings.yaml", &configmap("settings", "{a: '1'}"));
    repo.commit("second");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    let cm = members.get_json("alpha", &["configmap", "settings", "-n", "app"]);
    assert_eq!(cm["data"], json!({"a": "1", "other": "x"}));

    // Switching to ServerSideApply takes over what gitfleet's own earlier writes own.
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {type: ServerSideApply}\n"),
    );
    repo.write("app/settings.yaml", &configmap("settings", "{a: '2'}"));
    repo.commit("third");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    let cm = members.get_json("beta", &["configmap", "settings", "-n", "app"]);
    assert_eq!(cm["data"], json!({"a": "2"}));
}

fn report_diff_writes_nothing_and_reports_the_diff(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {type: ReportDiff}\n"),
    );
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.write("app/fresh.yaml", &configmap("fresh", "{a: '1'}"));
    repo.commit("first");
    create_by_someone_else(
        &members,
        &format!("{NAMESPACE}---\n{}", configmap("settings", "{mode: red}")),
    );
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    let (o, r) = outcome(&report, "alpha", "ConfigMap", "settings");
    assert_eq!(o, "diffed");
    assert!(
        r["diffs"]
            .as_array()
            .unwrap()
            .contains(&json!({"path": "/data/mode", "observed": "red", "desired": "blue"})),
        "{r:#}"
    );
    assert_eq!(
        outcome(&report, "alpha", "ConfigMap", "fresh").1["diffs"][0]["path"],
        "/"
    );
    let cm = members.get_json("alpha", &["configmap", "settings", "-n", "app"]);
    assert_eq!(cm["data"]["mode"], "red");
    assert!(cm["metadata"]["labels"]["gitfleet.io/placement"].is_null());
    assert!(!exists(
        &members,
        "alpha",
        &["configmap", "fresh", "-n", "app"]
    ));
    assert!(!exists(&members, "beta", &["namespace", "app"]));
    assert!(!exists(&members, "beta", &["namespace", "gitfleet-system"]));
}

fn if_not_drifted_reports_drift_after_a_kubectl_edit(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {whenToApply: IfNotDrifted}\n"),
    );
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.commit("first");
    let (code, _, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{err}");
    kubectl_ok(
        &members,
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
    let (code, report, _) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 1);
    let (o, r) = outcome(&report, "alpha", "ConfigMap", "settings");
    assert_eq!(o, "drifted");
    assert_eq!(
        r["diffs"],
        json!([{"path": "/data/mode", "observed": "red", "desired": "blue"}])
    );
    assert_eq!(
        outcome(&report, "beta", "ConfigMap", "settings").0,
        "unchanged"
    );
    let cm = members.get_json("alpha", &["configmap", "settings", "-n", "app"]);
    assert_eq!(cm["data"]["mode"], "red");
}

fn abandon_leaves_the_object_on_the_member(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    deleteStrategy: {propagationPolicy: Abandon}\n"),
    );
    repo.write("app/old.yaml", &configmap("old", "{a: '1'}"));
    repo.commit("first");
    let (code, _, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{err}");
    repo.remove("app/old.yaml");
    repo.commit("second");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(outcome(&report, "alpha", "ConfigMap", "old").0, "abandoned");
    let cm = members.get_json("alpha", &["configmap", "old", "-n", "app"]);
    assert_eq!(cm["data"]["a"], "1");
    assert!(cm["metadata"]["labels"]["gitfleet.io/placement"].is_null());

    // The placement removed from git: its record still says Abandon.
    repo.remove("app/placement.yaml");
    repo.commit("third");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(outcome(&report, "beta", "Namespace", "app").0, "abandoned");
    assert!(exists(&members, "beta", &["namespace", "app"]));
}

#[test]
fn an_invalid_commit_applies_nothing() {
    let members = Members::start(Backend::Sim, FLEET);
    let repo = fleet_repo();
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.write("app/broken.yaml", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {name: broken}\nspec: {policy: {placementType: PickSome}}\n");
    repo.commit("broken");
    let run = apply(&repo, &members, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("broken.yaml"), "{}", run.stderr);
    assert!(!exists(&members, "alpha", &["namespace", "app"]));
    assert!(!exists(
        &members,
        "alpha",
        &["namespace", "gitfleet-system"]
    ));
    let run = gitfleet(&["apply", "--repo", "/nonexistent/repo", "--kubeconfig", "x"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    // A usage error is 64 (EX_USAGE), never a code a run can give.
    let run = gitfleet(&["apply", "--repo", ".", "--no-such-flag"]);
    assert_eq!(run.code, 64, "{}", run.stderr);
}

fn custom_resources_land_after_their_crd(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/crd.yaml",
        "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
",
    );
    repo.write(
        "app/widget.yaml",
        "\
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: app}
spec: {size: 3}
",
    );
    repo.write(
        "app/placement.yaml",
        &format!(
            "{CRP}  - {{group: apiextensions.k8s.io, version: v1, kind: CustomResourceDefinition, name: widgets.example.com}}\n"
        ),
    );
    repo.commit("first");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    let (_, r) = outcome(&report, "alpha", "Widget", "w");
    assert_eq!(r["availability"]["status"], "NotTrackable");
    let w = members.get_json("alpha", &["widgets.example.com", "w", "-n", "app"]);
    assert_eq!(w["spec"]["size"], 3);
}

fn take_over_if_no_diff_takes_identical_objects_only(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {whenToTakeOver: IfNoDiff}\n"),
    );
    repo.write("app/same.yaml", &configmap("same", "{a: '1'}"));
    repo.write("app/differs.yaml", &configmap("differs", "{a: '1'}"));
    repo.commit("first");
    create_by_someone_else(
        &members,
        &format!(
            "{NAMESPACE}---\n{}---\n{}",
            configmap("same", "{a: '1'}"),
            configmap("differs", "{a: '2'}")
        ),
    );
    let (code, report, _) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 1);
    assert_eq!(outcome(&report, "alpha", "ConfigMap", "same").0, "applied");
    let (o, r) = outcome(&report, "alpha", "ConfigMap", "differs");
    assert_eq!(o, "notTakenOver");
    assert_eq!(
        r["diffs"],
        json!([{"path": "/data/a", "observed": "2", "desired": "1"}])
    );
    let same = members.get_json("alpha", &["configmap", "same", "-n", "app"]);
    assert_eq!(
        same["metadata"]["labels"]["gitfleet.io/placement"],
        "crp.app"
    );
}

fn a_namespace_gitfleet_did_not_create_is_never_deleted(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.commit("first");
    create_by_someone_else(&members, NAMESPACE);
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    // Taken over (whenToTakeOver Always): labelled, but not created by gitfleet.
    let ns = members.get_json("alpha", &["namespace", "app"]);
    assert_eq!(ns["metadata"]["labels"]["gitfleet.io/placement"], "crp.app");

    repo.remove("app/placement.yaml");
    repo.commit("placement removed");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(outcome(&report, "alpha", "Namespace", "app").0, "abandoned");
    let ns = members.get_json("alpha", &["namespace", "app"]);
    assert!(ns["metadata"]["labels"]["gitfleet.io/placement"].is_null());
    assert!(!exists(
        &members,
        "alpha",
        &["configmap", "settings", "-n", "app"]
    ));
    assert!(!exists(&members, "beta", &["namespace", "app"]));
}

fn full_comparison_reports_fields_others_set_after_apply(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {comparisonOption: FullComparison}\n"),
    );
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.commit("first");
    let (code, _, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{err}");
    kubectl_ok(
        &members,
        "alpha",
        &[
            "patch",
            "configmap",
            "settings",
            "-n",
            "app",
            "--type=merge",
            "-p",
            r#"{"data":{"extra":"x"}}"#,
        ],
    );
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    let (o, r) = outcome(&report, "alpha", "ConfigMap", "settings");
    assert_eq!(o, "unchanged");
    assert_eq!(
        r["diffs"],
        json!([{"path": "/data/extra", "observed": "x"}])
    );
}

#[test]
fn a_member_unhealthy_in_the_inventory_is_not_touched() {
    let members = Members::start(Backend::Sim, FLEET);
    let repo = fleet_repo();
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.commit("first");
    let (code, _, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{err}");
    let inventory = members.dir().join("inventory.yaml");
    std::fs::write(
        &inventory,
        "clusters:\n- {name: alpha}\n- {name: beta, healthy: false, error: agent lost}\n",
    )
    .unwrap();
    let inventory = inventory.display().to_string();
    let (code, report, err) = apply_json(&repo, &members, &["--inventory", &inventory]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(report["skipped"][0]["member"], "beta");
    assert!(err.contains("beta: skipped"), "{err}");
    assert!(exists(
        &members,
        "beta",
        &["configmap", "settings", "-n", "app"]
    ));
}

/// Many objects of one kind in one namespace are read with one LIST: the takeover rule still
/// sees the one that someone else created, and the second apply sees everything unchanged.
fn many_objects_of_a_kind_are_read_in_one_list_with_the_same_rules(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {whenToTakeOver: Never}\n"),
    );
    for i in 0..12 {
        repo.write(
            &format!("app/cm-{i}.yaml"),
            &configmap(&format!("cm-{i}"), "{a: '1'}"),
        );
    }
    repo.commit("twelve");
    create_by_someone_else(
        &members,
        &format!("{NAMESPACE}---\n{}", configmap("cm-7", "{a: mine}")),
    );
    let (code, report, _) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 1);
    assert_eq!(
        outcome(&report, "alpha", "ConfigMap", "cm-7").0,
        "notTakenOver"
    );
    assert_eq!(outcome(&report, "alpha", "ConfigMap", "cm-3").0, "applied");
    assert_eq!(outcome(&report, "beta", "ConfigMap", "cm-7").0, "applied");
    let cm = members.get_json("alpha", &["configmap", "cm-7", "-n", "app"]);
    assert_eq!(cm["data"]["a"], "mine");
    let (_, again, _) = apply_json(&repo, &members, &[]);
    assert_eq!(outcome(&again, "beta", "ConfigMap", "cm-3").0, "unchanged");
}

/// A push that finds everything in place (a restart's re-check) reads what gitfleet
/// placed with one labelled LIST per kind across namespaces, not one GET per object; the same
/// rules hold for what it does not find that way (an unlabelled object is still looked at and
/// not taken over). Twelve placements, each its own namespace and ConfigMap, pushed twice. Before
/// the member-wide read, the second push read each of the 24 objects with a GET on each member.
fn an_unchanged_fleet_is_confirmed_with_a_list_per_kind_not_a_get_per_object(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &member("alpha"));
    repo.write("members/beta.yaml", &member("beta"));
    const TENANTS: usize = 12;
    for i in 0..TENANTS {
        repo.write(
            &format!("t{i}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: t{i}}}\n---\n\
                 apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg, namespace: t{i}}}\ndata: {{a: '1'}}\n---\n\
                 apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\n\
                 metadata: {{name: t{i}}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: t{i}}}]\n  \
                 strategy: {{applyStrategy: {{whenToTakeOver: Never}}}}\n"
            ),
        );
    }
    repo.commit("tenants");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    // Someone else's ConfigMap where gitfleet's would go next: the LIST does not find it
    // (no label), the GET does, and Never keeps it.
    kubectl_ok(
        &members,
        "alpha",
        &["delete", "configmap", "cfg", "-n", "t5"],
    );
    kubectl_ok(
        &members,
        "alpha",
        &[
            "create",
            "configmap",
            "cfg",
            "-n",
            "t5",
            "--from-literal=a=mine",
        ],
    );
    let reads = |m: &str| {
        members
            .sim()
            .map(|sim| sim.member(m)["requests"]["reads"].as_u64().unwrap())
    };
    let before = (reads("alpha"), reads("beta"));
    let (_, again, _) = apply_json(&repo, &members, &[]);
    let outcome_in = |member: &str, placement: &str, kind: &str| {
        let m = again["members"].as_array().unwrap().iter();
        let p = m.filter(|m| m["member"] == member).flat_map(|m| {
            let ps = m["placements"].as_array().unwrap().iter();
            ps.filter(|p| p["placement"] == placement)
        });
        let objects = p.flat_map(|p| p["objects"].as_array().unwrap().iter());
        objects
            .filter(|o| o["kind"] == kind)
            .map(|o| o["outcome"].as_str().unwrap().to_string())
            .next()
            .unwrap_or_else(|| panic!("no {kind} of {placement} on {member} in {again:#}"))
    };
    for i in 0..TENANTS {
        let placement = format!("crp.t{i}");
        assert_eq!(outcome_in("beta", &placement, "ConfigMap"), "unchanged");
        assert_eq!(outcome_in("alpha", &placement, "Namespace"), "unchanged");
        if i != 5 {
            assert_eq!(outcome_in("alpha", &placement, "ConfigMap"), "unchanged");
        }
    }
    assert_eq!(outcome_in("alpha", "crp.t5", "ConfigMap"), "notTakenOver");
    let cm = members.get_json("alpha", &["configmap", "cfg", "-n", "t5"]);
    assert_eq!(cm["data"]["a"], "mine");
    if let ((Some(a0), Some(b0)), (Some(a1), Some(b1))) = (before, (reads("alpha"), reads("beta")))
    {
        // Beta: the probe, the records, discovery and two LISTs; far fewer than 24 GETs.
        assert!(b1 - b0 < TENANTS as u64, "beta read {} times", b1 - b0);
        // Alpha: the same, and one GET for the unlabelled ConfigMap.
        assert!(a1 - a0 < TENANTS as u64, "alpha read {} times", a1 - a0);
    }
}

fn a_pruned_object_held_by_a_finalizer_is_in_progress_until_it_goes(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/held.yaml",
        "apiVersion: v1
kind: ConfigMap
metadata: {name: held, namespace: app, finalizers: [example.com/hold]}
data: {a: '1'}
",
    );
    repo.commit("first");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");

    // The DELETE is accepted, but the finalizer keeps the object: not pruned yet, and the record
    // still lists it.
    repo.remove("app/held.yaml");
    repo.commit("second");
    let (code, report, _) = apply_json(&repo, &members, &["--retry-budget", "2s"]);
    assert_ne!(code, 0, "{report:#}");
    let (outcome_alpha, result) = outcome(&report, "alpha", "ConfigMap", "held");
    assert_eq!(outcome_alpha, "failed", "{result:#}");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("deletion in progress"),
        "{result:#}"
    );
    let cm = members.get_json("alpha", &["configmap", "held", "-n", "app"]);
    assert!(cm["metadata"]["deletionTimestamp"].is_string(), "{cm:#}");
    let record = members.get_json(
        "alpha",
        &["configmap", "applied.crp.app", "-n", "gitfleet-system"],
    );
    assert!(record["data"]["objects"]
        .as_str()
        .unwrap()
        .contains("\"held\""));

    // Once its finalizer is done, the next run sees it gone and forgets it.
    for ctx in ["alpha", "beta"] {
        kubectl_ok(
            &members,
            ctx,
            &[
                "patch",
                "configmap",
                "held",
                "-n",
                "app",
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ],
        );
    }
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(outcome(&report, "alpha", "ConfigMap", "held").0, "pruned");
    let record = members.get_json(
        "alpha",
        &["configmap", "applied.crp.app", "-n", "gitfleet-system"],
    );
    assert!(!record["data"]["objects"]
        .as_str()
        .unwrap()
        .contains("\"held\""));
}

/// A Namespace gitfleet created is deleted when its placement goes, but a real API server
/// deletes a namespace asynchronously (the namespace controller empties it first), and an
/// object with a finalizer in it keeps it Terminating: the prune is in progress until the
/// namespace is really gone, and the record keeps it so the next run looks again.
fn a_pruned_namespace_is_in_progress_while_it_terminates(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.commit("first");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    // Someone else keeps an object with a finalizer in alpha's namespace.
    create_by_someone_else(
        &members,
        "apiVersion: v1
kind: ConfigMap
metadata: {name: held, namespace: app, finalizers: [example.com/hold]}
data: {a: '1'}
",
    );

    repo.remove("app/placement.yaml");
    repo.commit("placement removed");
    let (code, report, _) = apply_json(&repo, &members, &["--retry-budget", "3s"]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        outcome(&report, "alpha", "ConfigMap", "settings").0,
        "pruned"
    );
    let (o, r) = outcome(&report, "alpha", "Namespace", "app");
    assert_eq!(o, "failed", "{r:#}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("deletion in progress"),
        "{r:#}"
    );
    let ns = members.get_json("alpha", &["namespace", "app"]);
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns:#}");
    let record = members.get_json(
        "alpha",
        &["configmap", "applied.crp.app", "-n", "gitfleet-system"],
    );
    assert!(record["data"]["objects"]
        .as_str()
        .unwrap()
        .contains("\"Namespace\""));

    // The finalizer done, the namespace goes, and the next run sees it gone and forgets it.
    kubectl_ok(
        &members,
        "alpha",
        &[
            "patch",
            "configmap",
            "held",
            "-n",
            "app",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(outcome(&report, "alpha", "Namespace", "app").0, "pruned");
    assert!(!exists(&members, "alpha", &["namespace", "app"]));
    assert!(!exists(
        &members,
        "alpha",
        &["configmap", "applied.crp.app", "-n", "gitfleet-system"]
    ));
}

/// whenToTakeOver Always (the default): an object someone else made is taken over (labelled,
/// gitfleet's fields applied, their other fields left to them) when no field of theirs is set
/// to another value; under ServerSideApply without force, a field they own with another value
/// is a 409 conflict, as KubeFleet's (its work applier).
fn take_over_always_takes_what_nobody_else_holds_and_conflicts_on_the_rest(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write(
        "app/placement.yaml",
        &crp_with("    applyStrategy: {type: ServerSideApply}\n"),
    );
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.write("app/clash.yaml", &configmap("clash", "{mode: blue}"));
    repo.commit("first");
    create_by_someone_else(
        &members,
        &format!(
            "{NAMESPACE}---\n{}---\n{}",
            configmap("settings", "{mode: blue, extra: theirs}"),
            configmap("clash", "{mode: red}")
        ),
    );
    let (code, report, _) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        outcome(&report, "alpha", "ConfigMap", "settings").0,
        "applied"
    );
    let cm = members.get_json(
        "alpha",
        &[
            "configmap",
            "settings",
            "-n",
            "app",
            "--show-managed-fields",
        ],
    );
    assert_eq!(cm["metadata"]["labels"]["gitfleet.io/placement"], "crp.app");
    assert_eq!(cm["data"], json!({"mode": "blue", "extra": "theirs"}));
    let managers: Vec<&str> = cm["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"someone"), "{managers:?}");
    assert!(managers.len() >= 2, "{managers:?}");

    let (o, r) = outcome(&report, "alpha", "ConfigMap", "clash");
    assert_eq!(o, "failed", "{r:#}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("409") && error.contains("someone"),
        "{error}"
    );
    let clash = members.get_json("alpha", &["configmap", "clash", "-n", "app"]);
    assert_eq!(clash["data"]["mode"], "red");
    assert_eq!(outcome(&report, "beta", "ConfigMap", "clash").0, "applied");
}

/// whenToTakeOver Always under the default ClientSideApply: an object someone else made is
/// taken over with the manifest's values (KubeFleet's three-way patch sets every field the
/// manifest has); their other fields stay.
fn take_over_under_the_default_client_side_apply_puts_the_manifests_fields_in_place(
    backend: Backend,
) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write("app/clash.yaml", &configmap("clash", "{mode: blue}"));
    repo.commit("first");
    create_by_someone_else(
        &members,
        &format!(
            "{NAMESPACE}---\n{}",
            configmap("clash", "{mode: red, extra: theirs}")
        ),
    );
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(outcome(&report, "alpha", "ConfigMap", "clash").0, "applied");
    let clash = members.get_json("alpha", &["configmap", "clash", "-n", "app"]);
    assert_eq!(clash["data"], json!({"mode": "blue", "extra": "theirs"}));
    assert_eq!(
        clash["metadata"]["labels"]["gitfleet.io/placement"],
        "crp.app"
    );
}

/// Marks alpha's record of `crp.app` as being written by someone else.
fn mark_record(members: &Members, holder: &str, process: &str, until: &str) {
    kubectl_ok(
        members,
        "alpha",
        &[
            "annotate",
            "--overwrite",
            "configmap",
            "applied.crp.app",
            "-n",
            "gitfleet-system",
            &format!("gitfleet.io/writer={holder}"),
            "gitfleet.io/writer-commit=feedbeef",
            &format!("gitfleet.io/writer-until={until}"),
            &format!("gitfleet.io/writer-process={process}"),
        ],
    );
}

fn settings_mode(members: &Members, ctx: &str) -> Value {
    members.get_json(ctx, &["configmap", "settings", "-n", "app"])["data"]["mode"].clone()
}

fn a_placement_another_live_writer_is_writing_is_left_to_it(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.commit("first");
    let run = apply(&repo, &members, &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    repo.write("app/settings.yaml", &configmap("settings", "{mode: green}"));
    repo.commit("second");

    // A live writer on another host, for an hour: alpha's placement is left to it, whole.
    mark_record(
        &members,
        "apply far-host/4242",
        "far-host/4242",
        "2099-01-01T00:00:00Z",
    );
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 1, "{report:#}\n{err}");
    let text = report.to_string();
    assert!(
        text.contains(
            "apply far-host/4242 is writing this placement to the member (commit feedbeef"
        ),
        "{report:#}"
    );
    assert_eq!(settings_mode(&members, "alpha"), "blue");
    assert_eq!(settings_mode(&members, "beta"), "green");

    // A writer that crashed on this very host is known gone before its mark expires.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    mark_record(
        &members,
        &format!("apply {host}/{dead}"),
        &format!("{host}/{dead}"),
        "2099-01-01T00:00:00Z",
    );
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    assert_eq!(settings_mode(&members, "alpha"), "green");
    // The mark of the push that wrote is gone with its last write.
    for ctx in ["alpha", "beta"] {
        let record = members.get_json(
            ctx,
            &["configmap", "applied.crp.app", "-n", "gitfleet-system"],
        );
        let ann = &record["metadata"]["annotations"];
        assert!(ann.get("gitfleet.io/writer").is_none(), "{record:#}");
    }

    // An expired mark frees the placement too.
    repo.write("app/settings.yaml", &configmap("settings", "{mode: red}"));
    repo.commit("third");
    mark_record(
        &members,
        "apply far-host/4242",
        "far-host/4242",
        "2001-01-01T00:00:00Z",
    );
    let run = apply(&repo, &members, &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(settings_mode(&members, "alpha"), "red");
}

/// What a push that leaves a placement to another writer says (a live mark found, or the
/// record changed since it was read).
const REFUSED: &str = "nothing of it was written by this push";

fn two_applies_of_different_commits_at_once_never_mix_a_placement_silently(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    // Two placements, each with enough objects for the two pushes to overlap.
    repo.write(
        "web/placement.yaml",
        "apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: web}
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: web}
",
    );
    let write_all = |value: &str| {
        for ns in ["app", "web"] {
            let mut docs = vec![format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
            )];
            for i in 0..40 {
                docs.push(format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: {ns}}}\ndata: {{value: {value}}}\n"
                ));
            }
            repo.write(&format!("{ns}/namespace.yaml"), &docs.join("---\n"));
        }
    };
    write_all("one");
    let first = repo.commit("one");
    write_all("two");
    let second = repo.commit("two");

    let runs: Vec<(String, Run)> = std::thread::scope(|s| {
        let handles: Vec<_> = [&first, &second]
            .into_iter()
            .map(|rev| {
                let repo = &repo;
                let members = &members;
                s.spawn(move || (rev.clone(), apply(repo, members, &["--rev", rev])))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Every placement on every member holds one commit's objects, whole; wherever the two runs
    // left different commits, the run that lost a placement says so and fails.
    let mut seen = std::collections::BTreeSet::new();
    for ctx in ["alpha", "beta"] {
        for ns in ["app", "web"] {
            let list = members.get_json(
                ctx,
                &["configmaps", "-n", ns, "-l", "gitfleet.io/placement"],
            );
            let commits: std::collections::BTreeSet<String> = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|cm| {
                    cm["metadata"]["annotations"]["gitfleet.io/commit"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            assert_eq!(commits.len(), 1, "{ctx} {ns}: a mix of {commits:?}");
            seen.extend(commits);
            let record = members.get_json(
                ctx,
                &[
                    "configmap",
                    &format!("applied.crp.{ns}"),
                    "-n",
                    "gitfleet-system",
                ],
            );
            assert!(
                record["metadata"]["annotations"]
                    .get("gitfleet.io/writer")
                    .is_none(),
                "{record:#}"
            );
        }
    }
    if seen.len() > 1 {
        let refused: Vec<&(String, Run)> = runs
            .iter()
            .filter(|(_, r)| r.code == 1 && r.stdout.contains(REFUSED))
            .collect();
        assert!(
            !refused.is_empty(),
            "members hold both commits {seen:?} and neither run said so: {:#?}",
            runs.iter()
                .map(|(c, r)| (c, r.code, &r.stdout))
                .collect::<Vec<_>>()
        );
    }
    for (rev, run) in &runs {
        assert!(
            run.code == 0 || run.stdout.contains(REFUSED),
            "{rev}: {}\n{}",
            run.stdout,
            run.stderr
        );
    }
}

/// A push of one placement reads only the records it may touch (one list, narrowed by the
/// placement label): a member's unreadable record of another placement does not stop it,
/// while a push that may prune anything reads every record and says which one is unreadable.
fn a_push_of_one_placement_reads_only_its_own_record(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = fleet_repo();
    repo.write("app/settings.yaml", &configmap("settings", "{mode: blue}"));
    repo.write(
        "other/all.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\n\
         metadata: {name: other}\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: other}\n",
    );
    repo.commit("two placements");
    let (code, report, err) = apply_json(&repo, &members, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");

    // Another writer spoils other's record on alpha.
    kubectl_ok(
        &members,
        "alpha",
        &[
            "patch",
            "configmap",
            "applied.crp.other",
            "-n",
            "gitfleet-system",
            "--type=merge",
            "-p",
            r#"{"data":{"objects":"not a list"}}"#,
        ],
    );
    repo.write("app/settings.yaml", &configmap("settings", "{mode: green}"));
    repo.commit("app green");
    let (code, report, err) = apply_json(&repo, &members, &["--placement", "app"]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    for ctx in ["alpha", "beta"] {
        assert_eq!(settings_mode(&members, ctx), "green", "{ctx}");
    }

    // A push of every placement reads every record, and fails alpha alone, naming it.
    let (code, report, _) = apply_json(&repo, &members, &[]);
    assert_ne!(code, 0, "{report:#}");
    let error = member_report(&report, "alpha")["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("applied.crp.other"), "{report:#}");
}
