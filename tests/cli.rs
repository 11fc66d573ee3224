//! End-to-end: the real binary on real git repositories (`validate`, `render`).

mod common;
use common::{gitfleet, Repo};

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n";
const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: app\ndata:\n  color: blue\n";
const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: app
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        env:
        - {name: REGION, value: unset}
";
const CRP: &str = "\
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata:
  name: app
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: app}
";
const MEMBER: &str = "\
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: east-1
  labels: {region: eastus, environment: production}
spec:
  identity: {name: member, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}
";
const RO: &str = "\
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceOverride
metadata:
  name: web-region
  namespace: app
spec:
  placement: {name: app}
  resourceSelectors:
  - {group: apps, version: v1, kind: Deployment, name: web}
  policy:
    overrideRules:
    - clusterSelector:
        clusterSelectorTerms:
        - labelSelector: {matchLabels: {environment: production}}
      jsonPatchOverrides:
      - {op: replace, path: /spec/template/spec/containers/0/env/0/value, value: '${MEMBER-CLUSTER-LABEL-KEY-region}'}
      - {op: add, path: /metadata/labels/placed-on, value: '${MEMBER-CLUSTER-NAME}'}
";

fn valid_fleet(repo: &Repo, prefix: &str) {
    repo.write(&format!("{prefix}ns.yaml"), NAMESPACE);
    repo.write(
        &format!("{prefix}app.yaml"),
        &format!("{CONFIGMAP}---\n{DEPLOYMENT}"),
    );
    repo.write(&format!("{prefix}placement.yaml"), CRP);
    repo.write(&format!("{prefix}members/east-1.yaml"), MEMBER);
    repo.write(&format!("{prefix}ro.yaml"), RO);
}

fn repo_arg(repo: &Repo) -> String {
    repo.path().display().to_string()
}

#[test]
fn validate_reports_counts_by_kind() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    let sha = repo.commit("fleet");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout.trim(),
        format!(
            "ok {}: 5 files, 6 objects (1 ClusterResourcePlacement, 1 ConfigMap, 1 Deployment, 1 MemberCluster, 1 Namespace, 1 ResourceOverride)",
            &sha[..12]
        )
    );
}

#[test]
fn uncommitted_changes_are_invisible() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    repo.commit("fleet");
    // A broken edit in the working tree, an untracked broken file and a staged deletion.
    repo.write("placement.yaml", "this: is: not yaml");
    repo.write("untracked.yaml", "kind: Nope\n");
    repo.git(&["rm", "-q", "--cached", "ns.yaml"]);
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("6 objects"), "{}", run.stdout);
    // ... but not without a word: the edits differ from the commit read.
    assert!(
        run.stderr
            .contains("note: 2 manifests in the working tree differ from commit")
            && run.stderr.contains("(placement.yaml, untracked.yaml)")
            && run.stderr.contains("gitfleet reads commits, not files"),
        "{}",
        run.stderr
    );
    // A clean working tree gets no note, nor does an older commit.
    repo.git(&["checkout", "-q", "--", "."]);
    repo.remove("untracked.yaml");
    repo.git(&["add", "ns.yaml"]);
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert!(!run.stderr.contains("note:"), "{}", run.stderr);
}

/// The sample fleet with three typos a reviewer could miss: each is a warning naming the likely
/// intended name, `validate` still passes unless `--strict`, and `plan` shows them.
#[test]
fn likely_mistakes_are_warnings_with_the_intended_name() {
    let repo = sample_repo();
    let edit = |path: &str, from: &str, to: &str| {
        let file = repo.path().join(path);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(from), "{path}: {from}");
        repo.write(path, &text.replacen(from, to, 1));
    };
    edit("placements/shop.yaml", "name: shop\n", "name: shopp\n");
    edit(
        "overrides/shop-web-ro.yaml",
        "name: shop-app",
        "name: shop-appp",
    );
    edit(
        "rollout/telemetry-rollout-1.yaml",
        "three-stage\n",
        "three-stagee\n",
    );
    edit(
        "placements/reports.yaml",
        "- eastus-staging",
        "- eastus-stagin",
    );
    repo.commit("typos");
    let repo_path = repo_arg(&repo);
    let run = gitfleet(&["validate", "--repo", &repo_path]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let want = [
        "warning: overrides/shop-web-ro.yaml:11: ResourceOverride/shop-web-per-cluster: spec.placement.name: names placement crp/shop-appp, which is not in the commit (did you mean \"crp/shop-app\"?); the override applies to nothing",
        "warning: placements/reports.yaml:16: ClusterResourcePlacement/reports: spec.policy.clusterNames[0]: cluster \"eastus-stagin\" is not a member of the fleet (no MemberCluster of that name in the commit) (did you mean \"eastus-staging\"?); nothing is placed on it",
        "warning: placements/shop.yaml:15: ClusterResourcePlacement/shop-app: spec.resourceSelectors[0].name: selects nothing: no Namespace named \"shopp\" in the commit (did you mean \"shop\"?); this selector delivers nothing",
        "warning: rollout/telemetry-rollout-1.yaml:11: ClusterStagedUpdateRun/telemetry-rollout-1: spec.stagedRolloutStrategyName: names strategy \"three-stagee\", but the commit has no ClusterStagedUpdateStrategy of that name (did you mean \"three-stage\"?); the run cannot start",
    ];
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings, want, "{}", run.stderr);
    let strict = gitfleet(&["validate", "--repo", &repo_path, "--strict"]);
    assert_eq!(strict.code, 1, "{}", strict.stderr);
    assert!(
        strict.stderr.contains("4 warnings and --strict: failing"),
        "{}",
        strict.stderr
    );
    // The plan of the typos shows them, as new in the head; --strict fails it.
    let plan = gitfleet(&[
        "plan", "--repo", &repo_path, "--base", "HEAD~1", "--head", "HEAD",
    ]);
    assert_eq!(plan.code, 2, "{}", plan.stderr);
    for w in want {
        assert!(plan.stdout.contains(w), "{w}\n{}", plan.stdout);
    }
    let md = gitfleet(&[
        "plan", "--repo", &repo_path, "--base", "HEAD~1", "--head", "HEAD", "-o", "markdown",
    ]);
    assert!(
        md.stdout.contains("> [!WARNING]\n> 4 warnings (likely mistakes; the fleet accepts them):\n> - `overrides/shop-web-ro.yaml:11:"),
        "{}",
        md.stdout
    );
    let strict = gitfleet(&[
        "plan", "--repo", &repo_path, "--base", "HEAD~1", "--head", "HEAD", "--strict",
    ]);
    assert_eq!(strict.code, 1, "{}", strict.stderr);
    // The base has none of them: its plan against itself warns of nothing.
    let same = gitfleet(&[
        "plan", "--repo", &repo_path, "--base", "HEAD~1", "--head", "HEAD~1",
    ]);
    assert_eq!(same.code, 0, "{}", same.stdout);
    assert!(!same.stdout.contains("warning"), "{}", same.stdout);
}

/// `approve` checks the signing setup before anything else: a setup that cannot sign is an
/// error (exit 1) that says what to set, never the advice to force the tag.
#[test]
fn approve_without_a_signing_key_fails_first_and_never_advises_force() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    repo.commit("fleet");
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("gitconfig");
    std::fs::write(&config, "[gpg]\n\tformat = ssh\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["approve", "run-1-before-prod", "--repo", &repo_arg(&repo)])
        // No daemon is asked: the port is closed, and the error must come before.
        .args(["--server", "http://127.0.0.1:9"])
        .env("GIT_CONFIG_GLOBAL", &config)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", home.path())
        .env_remove("GITFLEET_SERVER")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot sign an approval tag in")
            && stderr.contains("gpg.format is ssh but user.signingkey is not set"),
        "{stderr}"
    );
    assert!(!stderr.contains("--force"), "{stderr}");
}

/// A misspelled kind or field is an error, with the likely one named.
#[test]
fn misspelled_kinds_and_fields_name_the_likely_one() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    repo.write(
        "app.yaml",
        &format!(
            "{CONFIGMAP}---\n{}",
            DEPLOYMENT.replace("kind: Deployment", "kind: Deploymnet")
        ),
    );
    repo.write(
        "placement.yaml",
        &format!("{CRP}  policy: {{placementTyp: PickAll}}\n"),
    );
    repo.commit("typos");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("Deploymnet/web: unknown scope: kind Deploymnet of group \"apps\" is neither a built-in kind nor defined by a CustomResourceDefinition in the repository (did you mean \"Deployment\"?)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("unknown field `placementTyp`, expected one of `placementType`,")
            && run.stderr.contains("(did you mean `placementType`?)"),
        "{}",
        run.stderr
    );
}

/// `render --cluster` of a cluster the commit does not declare is an error naming the likely
/// member, unless its labels are given (a cluster not declared yet).
#[test]
fn render_for_an_unknown_cluster_is_an_error() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    repo.commit("fleet");
    let run = gitfleet(&[
        "render",
        "--repo",
        &repo_arg(&repo),
        "--placement",
        "crp/app",
        "--cluster",
        "east1",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("cluster \"east1\" is not a member of the fleet in commit")
            && run.stderr.contains("(did you mean \"east-1\"?); to render for a cluster not declared yet, give its labels with --labels"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[test]
fn rev_selects_older_commits_branches_and_tags() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    let good = repo.commit("good");
    repo.git(&["tag", "v1"]);
    repo.write(
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: orphan\n  namespace: nowhere\n",
    );
    repo.commit("bad");
    let head = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(head.code, 1);
    assert!(
        head.stderr.contains("bad.yaml:5: ConfigMap/orphan: metadata.namespace: namespace \"nowhere\" does not exist"),
        "{}",
        head.stderr
    );
    for rev in ["HEAD~1", "v1", &good, &good[..10]] {
        let run = gitfleet(&["validate", "--repo", &repo_arg(&repo), "--rev", rev]);
        assert_eq!(run.code, 0, "rev {rev}: {}", run.stderr);
        assert!(
            run.stdout.starts_with(&format!("ok {}", &good[..12])),
            "{}",
            run.stdout
        );
    }
    repo.git(&["branch", "stable", "v1"]);
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo), "--rev", "stable"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = gitfleet(&[
        "validate",
        "--repo",
        &repo_arg(&repo),
        "--rev",
        "no-such-branch",
    ]);
    assert_eq!(run.code, 3);
    assert!(
        run.stderr
            .contains("cannot resolve revision \"no-such-branch\""),
        "{}",
        run.stderr
    );
}

#[test]
fn path_limits_what_is_read() {
    let repo = Repo::new();
    valid_fleet(&repo, "fleet/");
    repo.write("other/broken.yaml", "kind: [\n");
    repo.write("fleet/.github/ci.yaml", "not: a kubernetes object\n");
    repo.write("fleet/README.md", "# not read\n");
    repo.commit("two folders");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo), "--path", "fleet"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("5 files, 6 objects"), "{}", run.stdout);
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("other/broken.yaml:"), "{}", run.stderr);
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo), "--path", "missing"]);
    assert_eq!(run.code, 3);
    assert!(
        run.stderr.contains("path \"missing\" does not exist"),
        "{}",
        run.stderr
    );
}

#[test]
fn symlinks_and_submodules_named_like_manifests_are_reported_as_skipped() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    repo.commit("fleet");
    std::os::unix::fs::symlink("/etc/passwd", repo.path().join("outside.yaml")).unwrap();
    // A submodule entry (a gitlink) named like a manifest, without cloning anything.
    let head = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{},vendor.yaml", head.trim()),
    ]);
    // Not `commit` (it runs `git add -A`, which would drop the gitlink: no such folder exists).
    repo.git(&["add", "outside.yaml"]);
    repo.git(&["commit", "-q", "-m", "a link and a submodule"]);
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("note: skipped outside.yaml: a symbolic link"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("note: skipped vendor.yaml: a submodule"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_empty_repository_says_it_has_no_commits() {
    let repo = Repo::new();
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("has no commits yet"), "{}", run.stderr);
}

#[test]
fn not_a_repository_is_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let run = gitfleet(&["validate", "--repo", &dir.path().display().to_string()]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot open git repository"),
        "{}",
        run.stderr
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    repo.write(
        "broken.yaml",
        "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: pickn\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    placementType: PickN\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n",
    );
    repo.commit("broken");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 1);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        lines,
        vec![
            "broken.yaml:8: ClusterResourcePlacement/pickn: spec.policy.numberOfClusters: Required value: number of clusters cannot be nil for policy type PickN",
            "broken.yaml:13: Secret/s: metadata.namespace: Required value: Secret is namespaced and must name its namespace",
            "2 problems found",
        ],
        "{}",
        run.stderr
    );
}

#[test]
fn render_applies_overrides_in_apply_order() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    repo.commit("fleet");
    let run = gitfleet(&[
        "render",
        "--repo",
        &repo_arg(&repo),
        "--placement",
        "app",
        "--cluster",
        "east-1",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let docs: Vec<serde_json::Value> = gitfleet::yaml::documents(&run.stdout).unwrap();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["Namespace", "ConfigMap", "Deployment"]);
    let deploy = &docs[2];
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
        "eastus"
    );
    assert_eq!(deploy["metadata"]["labels"]["placed-on"], "east-1");

    // A cluster that is not production gets no override; labels can be given on the command line.
    let run = gitfleet(&[
        "render",
        "--repo",
        &repo_arg(&repo),
        "--placement",
        "app",
        "--cluster",
        "west-9",
        "--labels",
        "environment=staging,region=westeurope",
        "-o",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let list: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(
        list["items"][2]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
        "unset"
    );
}

#[test]
fn render_refuses_unknown_placements_and_invalid_commits() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    repo.commit("fleet");
    let run = gitfleet(&[
        "render",
        "--repo",
        &repo_arg(&repo),
        "--placement",
        "nope",
        "--cluster",
        "east-1",
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("no ClusterResourcePlacement \"nope\""),
        "{}",
        run.stderr
    );
    repo.write(
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    repo.commit("bad");
    let run = gitfleet(&[
        "render",
        "--repo",
        &repo_arg(&repo),
        "--placement",
        "app",
        "--cluster",
        "east-1",
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("nothing is scheduled or rendered"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
}

/// The earlier declared-property spelling is read, with a warning that says how to rewrite it.
#[test]
fn legacy_property_annotation_is_read_with_a_warning() {
    let repo = Repo::new();
    repo.write(
        "m.yaml",
        &common::member_cluster("m").replace(
            "  name: m\n",
            "  name: m\n  annotations:\n    gitfleet.io/property.example.com/cost-tier: '3'\n",
        ),
    );
    repo.commit("legacy");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("warning: m.yaml:6: MemberCluster/m: metadata.annotations[\"gitfleet.io/property.example.com/cost-tier\"]: the spelling gitfleet.io/property.<name> is deprecated")
            && run.stderr.contains("`gitfleet.io/properties: '{\"example.com/cost-tier\":\"3\"}'`"),
        "{}",
        run.stderr
    );
}

#[test]
fn sample_fleet_validates_clean() {
    let repo = Repo::new();
    repo.copy_sample_fleet();
    repo.commit("sample");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // No deprecated spelling (the declared properties' annotation) in the sample.
    assert!(!run.stderr.contains("warning:"), "{}", run.stderr);
    for kind in [
        "ClusterResourcePlacement",
        "ResourcePlacement",
        "ClusterResourceOverride",
        "ResourceOverride",
        "ClusterResourceEnvelope",
        "ResourceEnvelope",
        "ClusterStagedUpdateStrategy",
        "ClusterStagedUpdateRun",
        "Placement",
        "ManifestWorkReplicaSet",
    ] {
        assert!(
            run.stdout.contains(&format!(" {kind}")),
            "{kind} missing from {}",
            run.stdout
        );
    }
}

#[test]
fn sample_fleet_renders_overrides_with_variables() {
    let repo = Repo::new();
    repo.copy_sample_fleet();
    repo.commit("sample");
    let run = gitfleet(&[
        "render",
        "--repo",
        &repo_arg(&repo),
        "--placement",
        "shop-app",
        "--cluster",
        "westeurope-prod-1",
        "-o",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let list: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let items = list["items"].as_array().unwrap();
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        vec!["Namespace", "ConfigMap", "Service", "Deployment"]
    );
    let deploy = &items[3];
    let env = &deploy["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env[0]["value"], "westeurope", "{deploy}");
    assert_eq!(env[1]["value"], "westeurope-prod-1", "{deploy}");
    assert_eq!(deploy["spec"]["replicas"], 4);
}

fn sample_repo() -> Repo {
    let repo = Repo::new();
    repo.copy_sample_fleet();
    repo.commit("sample");
    repo
}

fn schedule_json(repo: &Repo, extra: &[&str]) -> serde_json::Value {
    let inventory = repo
        .path()
        .join(".inventory/inventory.yaml")
        .display()
        .to_string();
    let mut args = vec![
        "schedule",
        "--repo",
        &repo.path().to_str().unwrap(),
        "--inventory",
        &inventory,
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    let run = gitfleet(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

fn placement<'a>(schedule: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    schedule["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()
}

#[test]
fn schedule_state_makes_later_runs_stable() {
    let repo = sample_repo();
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().display().to_string();
    let first = schedule_json(&repo, &["--state", &state_arg, "--save"]);
    let shop = placement(&first, "shop-app");
    assert_eq!(
        shop["selected"],
        serde_json::json!(["eastus-prod-1", "eastus-prod-2", "westeurope-prod-1"])
    );
    assert_eq!(shop["policySnapshotIndex"], 0);
    assert!(state.path().join("schedule.json").is_file());

    // N 3 -> 2: same policy snapshot, the lowest (topology, affinity) score goes.
    let shop_file = repo.path().join("placements/shop.yaml");
    let text = std::fs::read_to_string(&shop_file).unwrap();
    assert!(text.contains("numberOfClusters: 3"));
    repo.write(
        "placements/shop.yaml",
        &text.replace("numberOfClusters: 3", "numberOfClusters: 2"),
    );
    repo.commit("shrink shop");
    let second = schedule_json(&repo, &["--state", &state_arg, "--save"]);
    let shop = placement(&second, "shop-app");
    assert_eq!(
        shop["selected"],
        serde_json::json!(["eastus-prod-1", "westeurope-prod-1"])
    );
    assert_eq!(shop["policySnapshotIndex"], 0);

    // Without the state the same commit is scheduled from scratch (and nothing is written).
    let fresh = schedule_json(&repo, &[]);
    assert_eq!(
        placement(&fresh, "shop-app")["selected"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // A policy change takes a new policy snapshot index.
    repo.write(
        "placements/shop.yaml",
        &text
            .replace("numberOfClusters: 3", "numberOfClusters: 2")
            .replace("maxSkew: 1", "maxSkew: 2"),
    );
    repo.commit("relax spread");
    let third = schedule_json(&repo, &["--state", &state_arg]);
    assert_eq!(placement(&third, "shop-app")["policySnapshotIndex"], 1);
}

#[test]
fn schedule_table_and_bad_state() {
    let repo = sample_repo();
    let run = gitfleet(&["schedule", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let header = run.stdout.lines().next().unwrap();
    assert!(
        header.starts_with("PLACEMENT")
            && header.contains("WANTED")
            && header.contains("CONDITION"),
        "{header}"
    );
    assert!(run.stdout.contains("shop-app"), "{}", run.stdout);
    let state = tempfile::tempdir().unwrap();
    std::fs::write(
        state.path().join("schedule.json"),
        r#"{"version": 7, "commit": "x", "placements": []}"#,
    )
    .unwrap();
    let run = gitfleet(&[
        "schedule",
        "--repo",
        &repo_arg(&repo),
        "--state",
        &state.path().display().to_string(),
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("state format version 7"),
        "{}",
        run.stderr
    );
}

#[test]
fn render_without_placement_follows_the_schedule() {
    let repo = sample_repo();
    let inventory = repo
        .path()
        .join(".inventory/inventory.yaml")
        .display()
        .to_string();
    let run = gitfleet(&[
        "render",
        "--repo",
        &repo_arg(&repo),
        "--cluster",
        "westeurope-staging",
        "--inventory",
        &inventory,
        "-o",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let list: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["kind"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    // Staging gets the platform baseline and telemetry (PickAll), not the production apps.
    assert!(
        names.contains(&"Namespace/platform".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"Namespace/telemetry".to_string()),
        "{names:?}"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.contains("shop") || n.contains("payments")),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("Envelope")), "{names:?}");
}

/// A stand-in for the daemon's read API (`/api/v1/inventory`, `/api/v1/schedule`), serving
/// fixed JSON on a loopback port until the test ends.
fn fake_daemon(inventory: String, schedule: String) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            reader.read_line(&mut line).unwrap();
            // Drain the headers.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let (status, body) = if line.starts_with("GET /api/v1/inventory ") {
                ("200 OK", inventory.clone())
            } else if line.starts_with("GET /api/v1/schedule ") {
                ("200 OK", schedule.clone())
            } else {
                ("404 Not Found", "{}".to_string())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

#[test]
fn plan_reads_inventory_and_bindings_from_a_daemon() {
    let repo = sample_repo();
    let base = repo.git(&["rev-parse", "HEAD"]);
    let text = std::fs::read_to_string(repo.path().join("placements/shop.yaml")).unwrap();
    repo.write(
        "placements/shop.yaml",
        &text.replace("numberOfClusters: 3", "numberOfClusters: 2"),
    );
    repo.commit("shrink shop");
    // The daemon's view: every cluster healthy, with the sample inventory's properties, and the
    // shop placement currently bound to three clusters chosen differently from a fresh schedule.
    let inv_yaml = std::fs::read_to_string(repo.path().join(".inventory/inventory.yaml")).unwrap();
    let inv: serde_json::Value = gitfleet::yaml::from_str(&inv_yaml).unwrap();
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().display().to_string();
    let inventory_arg = repo
        .path()
        .join(".inventory/inventory.yaml")
        .display()
        .to_string();
    let run = gitfleet(&[
        "schedule",
        "--repo",
        &repo_arg(&repo),
        "--rev",
        &base,
        "--inventory",
        &inventory_arg,
        "--state",
        &state_arg,
        "--save",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The live bindings differ from what a fresh schedule would pick: the daemon placed shop on
    // eastus-canary instead of eastus-prod-2 (say, before prod-2 joined).
    let mut schedule: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.path().join("schedule.json")).unwrap())
            .unwrap();
    for p in schedule["placements"].as_array_mut().unwrap() {
        if p["name"] == "shop-app" {
            for b in p["bindings"].as_array_mut().unwrap() {
                if b["cluster"] == "eastus-prod-2" {
                    b["cluster"] = "eastus-canary".into();
                    b["affinityScore"] = 24.into();
                }
            }
        }
    }
    let server = fake_daemon(inv.to_string(), schedule.to_string());
    let run = gitfleet(&[
        "plan",
        "--repo",
        &repo_arg(&repo),
        "--base",
        &base,
        "--head",
        "HEAD",
        "--server",
        &server,
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let shop = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "shop-app")
        .unwrap();
    assert_eq!(shop["lost"][0]["cluster"], "eastus-canary", "{shop}");
    assert_eq!(
        shop["lost"][0]["reason"],
        "numberOfClusters 3 → 2, lowest score"
    );

    // A daemon that is not there is an error (exit 1), not an empty fleet.
    let run = gitfleet(&[
        "plan",
        "--repo",
        &repo_arg(&repo),
        "--base",
        &base,
        "--head",
        "HEAD",
        "--server",
        "http://127.0.0.1:9",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains("cannot reach gitfleet daemon"),
        "{}",
        run.stderr
    );
}

/// A usage error must never share plan's "the fleet changes" code (2): the README's CI recipe
/// accepts 2, so a mistyped flag would pass. Every subcommand, and clap's own errors, exit 64.
#[test]
fn usage_errors_exit_64_on_every_command_and_help_exits_0() {
    use std::process::Command;
    let commands = [
        "validate",
        "schedule",
        "render",
        "plan",
        "inventory",
        "apply",
        "run",
        "status",
        "wait",
        "quickstart",
        "sim",
        "approve",
        "verify-approval",
    ];
    for cmd in commands {
        let run = gitfleet(&[cmd, "--no-such-flag"]);
        assert_eq!(run.code, 64, "{cmd} --no-such-flag: {}", run.stderr);
        assert!(
            run.stderr.contains("--no-such-flag"),
            "{cmd}: {}",
            run.stderr
        );
        let help = gitfleet(&[cmd, "--help"]);
        assert_eq!(help.code, 0, "{cmd} --help: {}", help.stderr);
        assert!(
            help.stdout.contains("64 bad command line"),
            "{cmd} --help says what 64 means: {}",
            help.stdout
        );
    }
    // A missing required flag, a bad value, no subcommand at all, an unknown subcommand.
    for args in [
        &["plan", "--repo", "."][..],
        &[
            "apply",
            "--repo",
            ".",
            "--kubeconfig",
            "k",
            "--retry-budget",
            "soon",
        ],
        &[],
        &["deploy"],
    ] {
        let run = gitfleet(args);
        assert_eq!(run.code, 64, "{args:?}: {}", run.stderr);
    }
    assert_eq!(gitfleet(&["--version"]).code, 0);
    assert_eq!(gitfleet(&["--help"]).code, 0);
    // A usage error found after parsing (flags that need each other) is 64 too.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .args(["verify-approval", "gitfleet/approve/x-before-y"])
        .env_remove("GITFLEET_TRUSTED_SIGNERS")
        .env_remove("GITFLEET_TRUSTED_GPG_KEYS")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn version_completion_and_plan_output_follow_cli_conventions() {
    let v = gitfleet(&["version", "-o", "json"]);
    assert_eq!(v.code, 0, "{}", v.stderr);
    let info: serde_json::Value = serde_json::from_str(&v.stdout).unwrap();
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    // Built from this repository: the commit is a sha (maybe with -dirty), not "unknown".
    let commit = info["commit"].as_str().unwrap();
    assert!(
        commit.len() >= 40 && commit[..40].bytes().all(|b| b.is_ascii_hexdigit()),
        "{commit}"
    );
    assert!(info["buildDate"].as_str().unwrap().ends_with('Z'), "{info}");
    let long = gitfleet(&["--version"]);
    assert!(long.stdout.contains(&commit[..12]), "{}", long.stdout);
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef gitfleet"),
        ("fish", "complete -c gitfleet"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let c = gitfleet(&["completion", shell]);
        assert_eq!(c.code, 0, "{shell}: {}", c.stderr);
        assert!(c.stdout.contains(marker), "{shell}");
        assert!(c.stdout.contains("verify-approval"), "{shell}");
    }
    assert_eq!(gitfleet(&["completion", "tcsh"]).code, 64);
    // The names the scripts complete come from the repository, in the form commands take.
    let sample = sample_repo();
    let names = |what: &str| gitfleet(&["__complete", what, "--repo", &repo_arg(&sample)]);
    let placements = names("placements");
    assert_eq!(placements.code, 0, "{}", placements.stderr);
    let placements: Vec<&str> = placements.stdout.lines().collect();
    for id in [
        "crp/shop-app",
        "rp/platform/cost-controls",
        "ocm/ocm-apps/logging-agent",
    ] {
        assert!(placements.contains(&id), "{id}: {placements:?}");
    }
    let clusters = names("clusters");
    assert!(
        clusters.stdout.lines().any(|c| c == "eastus-prod-1"),
        "{}",
        clusters.stdout
    );
    // Outside a repository: nothing, and no error into the command line being completed.
    let empty = tempfile::tempdir().unwrap();
    let none = gitfleet(&[
        "__complete",
        "clusters",
        "--repo",
        &empty.path().display().to_string(),
    ]);
    assert_eq!(
        (none.code, none.stdout.as_str(), none.stderr.as_str()),
        (0, "", "")
    );
    // A placement is written the same way in schedule's table as in status and plan.
    let table = gitfleet(&["schedule", "--repo", &repo_arg(&sample)]);
    assert!(
        table.stdout.contains("\nrp/platform/cost-controls "),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("\ncrp/shop-app "), "{}", table.stdout);
    // ... and render and apply take it as written there.
    let render = gitfleet(&[
        "render",
        "--repo",
        &repo_arg(&sample),
        "--placement",
        "rp/platform/cost-controls",
        "--cluster",
        "eastus-prod-1",
        "-o",
        "json",
    ]);
    assert_eq!(render.code, 0, "{}", render.stderr);
    assert!(render.stdout.contains("\"ConfigMap\""), "{}", render.stdout);
    // plan's diff context is --diff-context; --context (kubectl's kubeconfig context) still
    // reads as it, with a warning.
    let old = gitfleet(&[
        "plan",
        "--repo",
        &repo_arg(&sample),
        "--base",
        "HEAD",
        "--head",
        "HEAD",
        "--context",
        "5",
    ]);
    assert_eq!(old.code, 0, "{}", old.stderr);
    assert!(
        old.stderr
            .contains("warning: plan's --context is now --diff-context"),
        "{}",
        old.stderr
    );
    let new = gitfleet(&[
        "plan",
        "--repo",
        &repo_arg(&sample),
        "--base",
        "HEAD",
        "--head",
        "HEAD",
        "--diff-context",
        "5",
    ]);
    assert_eq!((new.code, new.stderr.as_str()), (0, ""));
    // --repo defaults to the current folder.
    let here = std::process::Command::new(env!("CARGO_BIN_EXE_gitfleet"))
        .arg("validate")
        .current_dir(sample.path())
        .env_remove("GITFLEET_REPO")
        .env("GITFLEET_AGE_KEY_FILE", common::sample_age_key())
        .output()
        .unwrap();
    assert!(
        here.status.success(),
        "{}",
        String::from_utf8_lossy(&here.stderr)
    );
    // No help shows an empty default.
    for cmd in [
        "validate",
        "schedule",
        "render",
        "plan",
        "inventory",
        "apply",
        "run",
    ] {
        let help = gitfleet(&[cmd, "--help"]);
        assert!(
            !help.stdout.contains("[default: ]") && !help.stdout.contains("[default: \"\"]"),
            "{cmd}: {}",
            help.stdout
        );
        assert!(!help.stdout.contains("spec/README"), "{cmd}");
    }
    // plan takes -o like every other command (an unreadable repo is exit 1 after parsing).
    let dir = tempfile::tempdir().unwrap();
    let p = gitfleet(&[
        "plan",
        "--repo",
        &dir.path().display().to_string(),
        "--base",
        "a",
        "--head",
        "b",
        "-o",
        "json",
    ]);
    assert_eq!(p.code, 1, "{}", p.stderr);
}

/// The main commands' `--help` shows examples before the exit codes.
#[test]
fn the_main_commands_help_has_examples() {
    for cmd in [
        "validate",
        "schedule",
        "render",
        "plan",
        "inventory",
        "apply",
        "run",
        "status",
        "wait",
        "quickstart",
        "sim",
    ] {
        let help = gitfleet(&[cmd, "--help"]);
        assert_eq!(help.code, 0, "{cmd}: {}", help.stderr);
        let examples = help.stdout.find("Examples:\n  ");
        let codes = help.stdout.find("Exit codes:");
        assert!(
            matches!((examples, codes), (Some(e), Some(c)) if e < c),
            "{cmd} --help: examples, then exit codes:\n{}",
            help.stdout
        );
        assert!(
            help.stdout.contains(&format!("gitfleet {cmd}")),
            "{cmd}'s examples run {cmd}:\n{}",
            help.stdout
        );
    }
}

/// `schedule -o wide` lists every picked cluster, the policy snapshot index and
/// every condition.
#[test]
fn schedule_wide_shows_every_cluster_and_condition() {
    let repo = Repo::new();
    valid_fleet(&repo, "");
    let names = ["east-2", "east-3", "west-1", "west-2", "west-3"];
    for name in names {
        repo.write(
            &format!("members/{name}.yaml"),
            &MEMBER.replace("east-1", name),
        );
    }
    repo.commit("fleet");
    let narrow = gitfleet(&["schedule", "--repo", &repo_arg(&repo)]);
    assert_eq!(narrow.code, 0, "{}", narrow.stderr);
    assert!(narrow.stdout.contains("(+2 more)"), "{}", narrow.stdout);
    let wide = gitfleet(&["schedule", "--repo", &repo_arg(&repo), "-o", "wide"]);
    assert_eq!(wide.code, 0, "{}", wide.stderr);
    let header: Vec<&str> = wide
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "PLACEMENT",
            "TYPE",
            "WANTED",
            "POLICY-INDEX",
            "PICKED",
            "CONDITIONS"
        ],
        "{}",
        wide.stdout
    );
    let row: Vec<&str> = wide
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..5],
        [
            "crp/app",
            "PickAll",
            "all",
            "0",
            "east-1,east-2,east-3,west-1,west-2,west-3"
        ],
        "{}",
        wide.stdout
    );
    assert_eq!(
        row[5..].join(" "),
        "Scheduled=True (SchedulingPolicyFulfilled)"
    );
}

const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
const TEMPLATE: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicas }}\n";
const KUSTOMIZATION: &str = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../base]\npatches: [{path: replicas.yaml}]\n";

/// A Helm chart no release uses and a Kustomize overlay that cannot be built (its base is
/// missing) get one diagnostic each (not a cascade of parse and schema errors), the chart's
/// saying what it is and the `.gitfleetignore` line that leaves it out; `.gitfleetignore` is read from the
/// commit, with gitignore's rules.
#[test]
fn helm_charts_and_kustomize_folders_get_one_diagnostic_each_and_gitfleetignore_leaves_files_out() {
    let repo = Repo::new();
    valid_fleet(&repo, "fleet/");
    repo.write("fleet/charts/web/Chart.yaml", CHART);
    repo.write("fleet/charts/web/values.yaml", "replicas: 2\n");
    repo.write("fleet/charts/web/values-prod.yaml", "replicas: 5\n");
    repo.write("fleet/charts/web/templates/deploy.yaml", TEMPLATE);
    repo.write("fleet/overlays/prod/kustomization.yaml", KUSTOMIZATION);
    repo.write(
        "fleet/overlays/prod/replicas.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 5}\n",
    );
    repo.commit("a chart and an overlay");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo), "--path", "fleet"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "two diagnostics and the count:\n{}",
        run.stderr
    );
    assert!(
        lines[0].starts_with("fleet/charts/web/Chart.yaml:1: Helm chart fleet/charts/web: a Helm chart (Chart.yaml) that no helmrelease.yaml uses")
            && lines[0].contains("or leave the folder out with the line `/charts/web/` in fleet/.gitfleetignore"),
        "{}",
        run.stderr
    );
    // kustomize's own error when it is installed, else how to install it: one line either way.
    assert!(
        lines[1].starts_with(
            "fleet/overlays/prod/kustomization.yaml:1: Kustomization fleet/overlays/prod: "
        ),
        "{}",
        run.stderr
    );
    assert_eq!(lines[2], "2 problems found");

    // Left out as the diagnostics say, plus drafts that do not parse: the commit is valid.
    repo.write("fleet/.gitfleetignore", "# rendered in CI\n/charts/web/\n/overlays/prod/\ndrafts/\n*.draft.yaml\n!keep.draft.yaml\n");
    repo.write("fleet/drafts/wip.yaml", "kind: [\n");
    repo.write("fleet/apps/x.draft.yaml", "kind: [\n");
    repo.write(
        "fleet/keep.draft.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: kept}\n",
    );
    repo.commit("leave them out");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo), "--path", "fleet"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The fleet's 5 files and the file taken back with `!`.
    assert!(run.stdout.contains("6 files, 7 objects"), "{}", run.stdout);

    // Read from the commit: an uncommitted edit of .gitfleetignore changes nothing.
    repo.write("fleet/.gitfleetignore", "");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo), "--path", "fleet"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Only the path's root counts: the repository root's is not read for --path fleet.
    repo.write(
        "fleet/.gitfleetignore",
        "drafts/\n*.draft.yaml\n!keep.draft.yaml\n",
    );
    repo.write(
        ".gitfleetignore",
        "/fleet/charts/\n/fleet/overlays/\n/fleet/drafts/\n*.draft.yaml\n!keep.draft.yaml\n",
    );
    repo.commit("the ignore file at the repository root");
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo), "--path", "fleet"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("2 problems found"), "{}", run.stderr);
    let run = gitfleet(&["validate", "--repo", &repo_arg(&repo)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}
