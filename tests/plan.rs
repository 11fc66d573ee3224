//! End-to-end: `gitfleet plan` on scenario repositories. Each scenario commits the sample fleet
//! (examples/fleet-repo) as the base and one change as the head, runs the real binary in the
//! three formats and compares them with the golden files in tests/snapshots/ (insta). Commit ids
//! are redacted to `[base]`/`[head]` so an unrelated edit of the sample does not move every file.

mod common;
use common::{gitfleet, Repo, Run};

const INVENTORY: &str = ".inventory/inventory.yaml";

/// A repository whose first commit is the sample fleet, inventory included.
fn fleet() -> Repo {
    let repo = Repo::new();
    repo.copy_sample_fleet();
    repo.commit("the sample fleet");
    repo
}

/// Replaces `from` (which must occur) by `to` in a file of the repository.
fn edit(repo: &Repo, path: &str, from: &str, to: &str) {
    let file = repo.path().join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(from), "{path} does not contain {from:?}");
    std::fs::write(file, text.replacen(from, to, 1)).unwrap();
}

/// `gitfleet plan HEAD~1..HEAD` with the sample inventory, commit ids redacted.
fn plan(repo: &Repo, extra: &[&str]) -> Run {
    let dir = repo.path().to_str().unwrap().to_string();
    let inventory = repo.path().join(INVENTORY);
    let mut args = vec![
        "plan",
        "--repo",
        &dir,
        "--base",
        "HEAD~1",
        "--head",
        "HEAD",
        "--inventory",
        inventory.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut run = gitfleet(&args);
    for (rev, name) in [("HEAD~1", "[base]"), ("HEAD", "[head]")] {
        let id = repo.git(&["rev-parse", rev]);
        run.stdout = run.stdout.replace(&id, name).replace(&id[..12], name);
    }
    run
}

/// Snapshots the three formats of the plan of HEAD~1..HEAD and checks the exit code of each.
fn snapshot_formats(name: &str, repo: &Repo, code: i32) -> [String; 3] {
    let mut outputs = Vec::new();
    for format in ["text", "markdown", "json"] {
        let run = plan(repo, &["--format", format]);
        assert_eq!(
            run.code, code,
            "{name} --format {format}: stderr: {}",
            run.stderr
        );
        assert!(
            !run.stdout.contains('\x1b'),
            "no colour when not a terminal"
        );
        if format == "json" {
            let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("valid JSON");
            assert_eq!(v["base"], "[base]");
        }
        insta::assert_snapshot!(format!("{name}.{format}"), run.stdout);
        outputs.push(run.stdout);
    }
    outputs.try_into().unwrap()
}

#[test]
fn policy_change_gains_and_loses_clusters_with_a_new_policy_snapshot() {
    let repo = fleet();
    // admission-guard: production only (loses the canaries), and tolerate the PCI taint (gains
    // westeurope-prod-2).
    edit(
        &repo,
        "placements/admission-guard.yaml",
        r#"values: ["canary", "production"]"#,
        r#"values: ["production"]"#,
    );
    edit(
        &repo,
        "placements/admission-guard.yaml",
        "  strategy:\n",
        "    tolerations:\n      - key: dedicated\n        operator: Equal\n        value: pci\n        effect: NoSchedule\n  strategy:\n",
    );
    repo.commit("admission-guard: production only, on the PCI cluster too");
    let [text, markdown, _] = snapshot_formats("policy_change", &repo, 2);
    assert!(text.contains("~ crp/admission-guard (changed: policy.affinity, policy.tolerations)"));
    assert!(text.contains("+ westeurope-prod-2 gained: policy changed"));
    assert!(text.contains("- eastus-canary lost: policy changed"));
    assert!(text.contains("policy snapshot 0 → 1"));
    assert!(markdown.contains(
        "| `crp/admission-guard` | changed: policy.affinity, policy.tolerations | westeurope-prod-2 |"
    ));
    assert!(
        text.contains("  [medium] crp/admission-guard (changed: policy.affinity, policy.tolerations): loses eastus-canary, westeurope-canary; gains westeurope-prod-2"),
        "{text}"
    );
}

#[test]
fn number_of_clusters_change_loses_the_lowest_score() {
    let repo = fleet();
    edit(
        &repo,
        "placements/shop.yaml",
        "numberOfClusters: 3",
        "numberOfClusters: 2",
    );
    repo.commit("shop-app on two clusters");
    let [text, markdown, _] = snapshot_formats("number_of_clusters", &repo, 2);
    assert!(
        text.contains("- eastus-prod-2 lost: numberOfClusters 3 → 2, lowest score"),
        "{text}"
    );
    assert!(markdown.contains("- **lost** `eastus-prod-2`: numberOfClusters 3 → 2, lowest score"));
    // The winners' scores beside the loser's, and the spread score in words.
    assert!(
        text.contains("    picked instead: eastus-prod-1 (affinity 84, topology spread -1), westeurope-prod-1 (affinity 16, topology spread 1)"),
        "{text}"
    );
    assert!(
        text.contains("It is compared before the affinity score"),
        "{text}"
    );
    assert!(
        text.contains(
            "affinity score: the sum of the weights of the preferred cluster affinity terms"
        ),
        "{text}"
    );
}

/// One cluster more than are eligible: the summary itself says the placement stalls
/// (Scheduled=False), not only the details.
#[test]
fn more_clusters_than_are_eligible_stall_and_the_summary_says_so() {
    let repo = fleet();
    edit(
        &repo,
        "placements/shop.yaml",
        "numberOfClusters: 3",
        "numberOfClusters: 4",
    );
    repo.commit("shop-app on four clusters");
    let [text, markdown, json] = snapshot_formats("stalls", &repo, 2);
    assert!(
        text.contains("summary, riskiest first:\n  [medium] crp/shop-app (changed: policy.numberOfClusters): stalls: Scheduled=False (SchedulingPolicyUnfulfilled)"),
        "{text}"
    );
    assert!(
        markdown.contains(
            "- **medium** crp/shop-app (changed: policy.numberOfClusters): stalls: Scheduled=False"
        ),
        "{markdown}"
    );
    assert!(json.contains("\"kind\": \"stalls\""), "{json}");
    // No cluster is added, so nothing is said of maxSurge.
    assert!(!text.contains("above the target"), "{text}");
}

/// Removing the placement of a Namespace deletes the Namespace, and its workload, from every
/// cluster it was on: said first, above the table, not only in the folded diffs.
#[test]
fn namespace_and_workload_deletions_are_called_out_above_the_fold() {
    let repo = fleet();
    repo.remove("placements/shop.yaml");
    repo.remove("overrides/shop-web-ro.yaml");
    repo.commit("no more shop");
    let [text, markdown, _] = snapshot_formats("namespace_deletion", &repo, 2);
    let caution = "> [!CAUTION]\n> crp/shop-app: DELETES Namespace shop and everything in it on 3 clusters (eastus-prod-1, eastus-prod-2, westeurope-prod-1)  \n> crp/shop-app: DELETES Deployment/shop/shop-web on 3 clusters";
    let (at, table) = (
        markdown.find(caution).expect(&markdown),
        markdown.find("| Placement |").expect(&markdown),
    );
    assert!(at < table, "{markdown}");
    assert!(
        text.contains("  [high] crp/shop-app (removed): DELETES Namespace shop and everything in it on 3 clusters"),
        "{text}"
    );
}

#[test]
fn new_override_updates_the_staged_rollout_stage_that_holds_the_clusters() {
    let repo = fleet();
    repo.write(
        "overrides/telemetry-ro.yaml",
        "\
apiVersion: placement.kubernetes-fleet.io/v1
kind: ResourceOverride
metadata:
  name: otel-collector-production
  namespace: telemetry
spec:
  placement:
    name: telemetry
    scope: Cluster
  resourceSelectors:
    - group: apps
      version: v1
      kind: Deployment
      name: otel-collector
  policy:
    overrideRules:
      - clusterSelector:
          clusterSelectorTerms:
            - labelSelector:
                matchLabels:
                  environment: production
        jsonPatchOverrides:
          - op: replace
            path: /spec/replicas
            value: 2
",
    );
    repo.commit("two collectors on production clusters");
    let [text, markdown, _] = snapshot_formats("new_override", &repo, 2);
    assert!(
        text.contains("~ crp/telemetry (changed: overrides (ResourceOverride/telemetry/otel-collector-production added))"),
        "{text}"
    );
    // The run the base already has renders the commit it was initialised at: the override
    // waits for a run of its own.
    assert!(
        text.contains(
            "no staged update run delivers this change; a new run naming this placement will"
        ),
        "{text}"
    );
    assert!(text.contains("stage telemetry-rollout-1/production: eastus-prod-1, eastus-prod-2, westeurope-prod-1, westeurope-prod-2 (2 at a time; renders an earlier commit"));
    assert!(text.contains("! run telemetry-rollout-1 does not deliver this change: it was initialised before this commit"));
    assert!(markdown.contains("4 clusters, no staged run"), "{markdown}");
    assert!(
        text.contains("[medium] crp/telemetry (changed: overrides (ResourceOverride/telemetry/otel-collector-production added)): 4 clusters wait for a new staged update run"),
        "{text}"
    );
}

/// Two runs share the placement: the one the commit brings delivers the change, stage by stage;
/// the one already there goes on rendering what it was initialised with.
#[test]
fn of_two_runs_sharing_a_placement_the_new_one_delivers_the_change() {
    let repo = fleet();
    edit(
        &repo,
        "apps/telemetry/deployment.yaml",
        "replicas: 1",
        "replicas: 3",
    );
    repo.write(
        "rollout/telemetry-rollout-2.yaml",
        "\
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateRun
metadata:
  name: telemetry-rollout-2
spec:
  placementName: telemetry
  stagedRolloutStrategyName: three-stage
  state: Run
",
    );
    repo.commit("three collectors, rolled out by a new run");
    let [text, markdown, json] = snapshot_formats("two_runs", &repo, 2);
    assert!(
        text.contains("staged update run telemetry-rollout-2 delivers this change stage by stage"),
        "{text}"
    );
    assert!(text.contains("stage telemetry-rollout-2/production: eastus-prod-1, eastus-prod-2, westeurope-prod-1, westeurope-prod-2 (2 at a time; 4 updating"), "{text}");
    assert!(text.contains("stage telemetry-rollout-1/production: eastus-prod-1, eastus-prod-2, westeurope-prod-1, westeurope-prod-2 (2 at a time; renders an earlier commit"), "{text}");
    assert!(
        text.contains("! run telemetry-rollout-1 does not deliver this change"),
        "{text}"
    );
    assert!(
        !text.contains("run telemetry-rollout-2 does not deliver"),
        "{text}"
    );
    assert!(
        markdown.contains("in stages staging, canary, production"),
        "{markdown}"
    );
    assert!(json.contains("\"kind\": \"doesNotDeliver\""), "{json}");
}

#[test]
fn envelope_change_is_a_new_resource_snapshot_and_a_diff_of_the_inner_object() {
    let repo = fleet();
    edit(
        &repo,
        "envelopes/payments-guardrails.yaml",
        r#"pods: "40""#,
        r#"pods: "60""#,
    );
    repo.commit("payments: room for 60 pods");
    let [text, _, _] = snapshot_formats("envelope_change", &repo, 2);
    assert!(text.contains("~ crp/payments-app (changed: resources)"));
    assert!(text.contains("resource snapshot 0 → 1"));
    assert!(text.contains("resources: changed ResourceEnvelope/payments/payments-guardrails"));
    assert!(text.contains("~ ResourceQuota/payments/payments-quota (crp/payments-app)"));
    assert!(text.contains("-    pods: \"40\"\n    +    pods: \"60\""));
}

#[test]
fn placement_removal_loses_its_clusters_and_removes_its_objects() {
    let repo = fleet();
    repo.remove("placements/cost-controls-rp.yaml");
    repo.commit("no more cost controls");
    let [text, _, _] = snapshot_formats("placement_removal", &repo, 2);
    assert!(text.contains("- rp/platform/cost-controls (removed)"));
    assert!(text.contains("- eastus-prod-1 lost: placement removed"));
    assert!(text.contains("- ConfigMap/platform/cost-controls (rp/platform/cost-controls)"));
}

#[test]
fn invalid_head_reports_only_its_errors_and_exits_1() {
    let repo = fleet();
    edit(
        &repo,
        "placements/shop.yaml",
        "    numberOfClusters: 3\n",
        "",
    );
    edit(
        &repo,
        "apps/shop/configmap.yaml",
        "namespace: shop",
        "namespace: shops",
    );
    repo.commit("broken");
    let [text, markdown, _] = snapshot_formats("invalid_head", &repo, 1);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 2, "{text}");
    assert_eq!(
        text.lines().count(),
        3,
        "a header and the errors, nothing else"
    );
    assert!(markdown.contains("> [!CAUTION]"));
    assert!(!markdown.contains("| Placement |"));
}

#[test]
fn a_commit_that_changes_no_fleet_object_plans_nothing_and_exits_0() {
    let repo = fleet();
    edit(
        &repo,
        "README.md",
        "# Sample fleet repository",
        "# Our fleet",
    );
    repo.commit("docs only");
    let [text, markdown, _] = snapshot_formats("unchanged", &repo, 0);
    assert_eq!(
        text.lines().next().unwrap(),
        "gitfleet plan [base]..[head]: no change to the fleet"
    );
    assert!(markdown.contains("No change to the fleet."));
}

#[test]
fn secret_values_are_masked_in_every_format() {
    let repo = fleet();
    let secret = "\
apiVersion: v1
kind: Secret
metadata:
  name: shop-psp
  namespace: shop
type: Opaque
stringData:
  api-key: hunter2
  endpoint: https://psp.example.com
";
    repo.write("apps/shop/secret.yaml", secret);
    repo.commit("psp credentials");
    repo.write(
        "apps/shop/secret.yaml",
        &secret.replace("hunter2", "correct-horse"),
    );
    repo.commit("rotate the psp key");
    for format in ["text", "markdown", "json"] {
        let run = plan(&repo, &["--format", format]);
        assert_eq!(run.code, 2);
        for value in ["hunter2", "correct-horse", "psp.example.com"] {
            assert!(!run.stdout.contains(value), "{format} shows {value}");
        }
    }
    let text = plan(&repo, &[]).stdout;
    assert!(
        text.contains("-      api-key: \"***\"\n    +      api-key: \"*** (changed)\"")
            || text.contains("-  api-key: \"***\"\n    +  api-key: \"*** (changed)\""),
        "{text}"
    );
    insta::assert_snapshot!("secret_masked.text", text);
}

/// The sample's Helm release: changed values show as changes of the rendered objects, each
/// traced to the release, per cluster after the override.
#[test]
fn a_changed_helm_value_shows_on_the_rendered_objects_traced_to_the_release() {
    if gitfleet_testkit::tools::HELM
        .find("the sample's Helm release plan")
        .is_none()
    {
        return;
    }
    let repo = fleet();
    edit(
        &repo,
        "apps/hello/release/values.yaml",
        "image: nginx:1.27.3",
        "image: nginx:1.27.4",
    );
    repo.commit("hello: nginx 1.27.4");
    let run = plan(&repo, &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let text = run.stdout;
    assert!(
        text.contains(
            "~ Deployment/hello/hello (crp/hello, helm apps/hello/release/helmrelease.yaml)"
        ),
        "{text}"
    );
    assert!(text.contains("+        image: nginx:1.27.4"), "{text}");
    insta::assert_snapshot!("helm_value.text", text);
}

#[test]
fn unfulfilled_placement_lists_the_unschedulable_clusters_and_why() {
    let repo = fleet();
    edit(
        &repo,
        "placements/shop.yaml",
        "numberOfClusters: 3",
        "numberOfClusters: 5",
    );
    repo.commit("shop-app on five clusters");
    let run = plan(&repo, &[]);
    assert_eq!(run.code, 2);
    assert!(run
        .stdout
        .contains("! westeurope-prod-2 unschedulable: ClusterUnschedulable, taint"));
    assert!(run
        .stdout
        .contains("! Scheduled=False (SchedulingPolicyUnfulfilled)"));
    insta::assert_snapshot!("unfulfilled.text", run.stdout);
}

#[test]
fn markdown_over_max_bytes_cuts_whole_diffs_and_says_how_to_see_them() {
    let repo = fleet();
    edit(
        &repo,
        "placements/admission-guard.yaml",
        r#"values: ["canary", "production"]"#,
        r#"values: ["production"]"#,
    );
    repo.commit("admission-guard: production only");
    let full = plan(&repo, &["--format", "markdown"]).stdout;
    let run = plan(&repo, &["--format", "markdown", "--max-bytes", "2500"]);
    assert_eq!(run.code, 2);
    let md = run.stdout;
    assert!(full.len() > 2500 && md.len() <= 2500, "{} bytes", md.len());
    assert!(
        md.contains("| `crp/admission-guard` |"),
        "the summary is kept"
    );
    assert!(
        md.contains("#### `crp/admission-guard`"),
        "the sections are kept"
    );
    let fences = md.lines().filter(|l| l.starts_with("```")).count();
    assert_eq!(fences % 2, 0, "{md}");
    let note = md.lines().last().unwrap();
    assert!(
        note.starts_with("> This comment is capped at 2500 bytes"),
        "{note}"
    );
    assert!(
        note.contains("gitfleet plan --format text --cluster NAME"),
        "{note}"
    );
}

#[test]
fn cluster_flag_limits_the_diffs_to_that_cluster() {
    let repo = fleet();
    edit(
        &repo,
        "envelopes/payments-guardrails.yaml",
        r#"pods: "40""#,
        r#"pods: "60""#,
    );
    repo.commit("payments: room for 60 pods");
    let run = plan(&repo, &["--cluster", "westeurope-prod-2"]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.contains("cluster westeurope-prod-2:"));
    assert!(!run.stdout.contains("cluster eastus-prod-1:"));
    // The placement's rollout still counts both clusters that update.
    assert!(run.stdout.contains("2 cluster(s) update"), "{}", run.stdout);
    // A cluster the change does not touch shows no diff, but the plan still says the fleet changes.
    let run = plan(&repo, &["--cluster", "eastus-staging"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
}

#[test]
fn render_errors_of_the_head_come_first_and_loud() {
    let repo = fleet();
    edit(
        &repo,
        "overrides/shop-web-ro.yaml",
        "path: /spec/replicas",
        "path: /spec/nothing/here",
    );
    repo.commit("an override that cannot apply");
    let run = plan(&repo, &[]);
    // A head that cannot render is an error, and it deletes nothing: what is applied stays.
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(!run.stdout.contains("removed"), "{}", run.stdout);
    let text = run.stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with("3 render errors"), "{}", lines[0]);
    for (line, cluster) in
        lines[1..4]
            .iter()
            .zip(["eastus-prod-1", "eastus-prod-2", "westeurope-prod-1"])
    {
        assert!(
            line.starts_with(&format!("error: {cluster}: crp/shop-app: ")),
            "{line}"
        );
    }
    let markdown = plan(&repo, &["--format", "markdown"]).stdout;
    let warning = markdown.find("> [!WARNING]").expect("a warning block");
    assert!(warning < markdown.find("| Placement |").unwrap());
}

/// An override that leaves an object invalid (here `metadata.annotations` a string) is a render
/// error of each cluster its rule selects, naming the object, the cluster and the override
/// (KubeFleet: `WorkSynchronized=False`, `SyncWorkFailed`; test/e2e/placement_ro_test.go
/// "creating resourceOverride and resource becomes invalid after override"). The rule selects
/// production clusters: the canaries of the other placements are untouched.
#[test]
fn an_override_that_makes_an_object_invalid_is_a_render_error_naming_the_override() {
    let repo = fleet();
    edit(
        &repo,
        "overrides/shop-web-ro.yaml",
        "          - op: replace\n            path: /spec/replicas\n            value: 4",
        "          - op: add\n            path: /metadata/annotations\n            value: oops",
    );
    repo.commit("an override that breaks the shop's Deployment");
    let run = plan(&repo, &[]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let errors: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    let want: Vec<String> = ["eastus-prod-1", "eastus-prod-2", "westeurope-prod-1"]
        .iter()
        .map(|c| {
            format!(
                "error: {c}: crp/shop-app: Failed to synchronize the work to the latest: \
                 Deployment/shop/shop-web for cluster {c} is not a valid Kubernetes object after \
                 the overrides ResourceOverride shop/shop-web-per-cluster: metadata.annotations: \
                 must be a map of strings, got \"oops\""
            )
        })
        .collect();
    assert_eq!(errors, want, "{}", run.stdout);
    assert!(
        run.stdout
            .lines()
            .next()
            .unwrap()
            .ends_with("3 render errors"),
        "{}",
        run.stdout
    );
    let json = plan(&repo, &["--format", "json"]).stdout;
    assert!(
        json.contains("after the overrides ResourceOverride shop/shop-web-per-cluster"),
        "{json}"
    );
}

/// A Namespace label selector (default scope NamespaceWithResources) that matches a reserved
/// namespace is an error at the placement's selector, as naming it is (KubeFleet:
/// pkg/utils/controller/resource_selector_resolver.go fetchAllResourcesInOneNamespace, a user
/// error). KubeFleet's hub admits the placement and reports the error on it (Scheduled=False,
/// InvalidResourceSelectors: pkg/controllers/placement/controller.go handleUpdate) and takes no
/// snapshot, so its clusters keep what they run: the plan shows the condition, and no change on
/// its clusters (nothing lost, nothing removed).
#[test]
fn a_label_selector_matching_a_reserved_namespace_holds_the_placement_with_its_clusters_unchanged()
{
    let repo = fleet();
    repo.write(
        "platform/kube-platform.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-platform\n  labels:\n    shop-addon: \"true\"\n",
    );
    edit(
        &repo,
        "placements/shop.yaml",
        "      name: shop\n",
        "      name: shop\n    - group: \"\"\n      version: v1\n      kind: Namespace\n      labelSelector:\n        matchLabels:\n          shop-addon: \"true\"\n",
    );
    repo.commit("the shop takes its add-on namespaces by label");
    let run = plan(&repo, &["--format", "json"]);
    // The placement's spec changed: a change, but not an invalid head.
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["errors"], serde_json::json!([]), "{}", run.stdout);
    // No cluster changes: the held placement's clusters keep the base's manifests.
    assert_eq!(plan["clusters"], serde_json::json!([]), "{}", run.stdout);
    let shop = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "shop-app")
        .unwrap();
    assert_eq!(shop["change"], "changed", "{shop}");
    assert_eq!(
        shop["changedFields"],
        serde_json::json!(["resourceSelectors"])
    );
    assert_eq!(shop["lost"], serde_json::json!([]), "{shop}");
    assert_eq!(shop["gained"], serde_json::json!([]), "{shop}");
    assert_eq!(shop["kept"].as_array().unwrap().len(), 3, "{shop}");
    assert_eq!(shop["rollout"], serde_json::Value::Null, "{shop}");
    assert_eq!(
        shop["condition"],
        serde_json::json!({
            "type": "Scheduled",
            "status": "False",
            "reason": "InvalidResourceSelectors",
            "message": "The resource selectors are invalid: failed to process the request due to a client error: spec.resourceSelectors[1].labelSelector: selects namespace \"kube-platform\", which is reserved (fleet-* and kube-* namespaces are never propagated)",
        })
    );
    let text = plan_text(&repo);
    assert!(
        text.contains(
            "  ! Scheduled=False (InvalidResourceSelectors): The resource selectors are invalid: "
        ),
        "{text}"
    );
    assert!(!text.contains("lost"), "{text}");
}

fn plan_text(repo: &Repo) -> String {
    plan(repo, &[]).stdout
}

/// A placement new at head whose selectors are invalid is admitted and selects nothing.
#[test]
fn a_new_placement_with_invalid_selectors_selects_nothing() {
    let repo = fleet();
    repo.write(
        "placements/system.yaml",
        "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: system\nspec:\n  resourceSelectors:\n    - {group: \"\", version: v1, kind: Namespace, name: kube-system}\n",
    );
    repo.commit("place kube-system");
    let run = plan(&repo, &["--format", "json"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["clusters"], serde_json::json!([]), "{}", run.stdout);
    let system = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "system")
        .unwrap();
    assert_eq!(system["change"], "added", "{system}");
    assert_eq!(system["gained"], serde_json::json!([]), "{system}");
    assert_eq!(system["condition"]["reason"], "InvalidResourceSelectors");
}

/// The head renders what the base rendered where nothing changed, but never a cluster's own
/// rendering once its labels changed: an override that substitutes the cluster's labels
/// renders anew with the head's labels.
#[test]
fn a_member_label_used_by_an_override_variable_changes_only_that_members_objects() {
    let repo = fleet();
    // The cluster is declared twice (MemberCluster and ManagedCluster): both move.
    let declared = "name: eastus-prod-1\n  labels:\n";
    edit(
        &repo,
        "members/eastus-prod-1.yaml",
        &format!("{declared}    region: eastus\n"),
        &format!("{declared}    region: eastus2\n"),
    );
    let set = "    cluster.open-cluster-management.io/clusterset: production\n";
    edit(
        &repo,
        "ocm/managed-clusters.yaml",
        &format!("{declared}{set}    region: eastus\n"),
        &format!("{declared}{set}    region: eastus2\n"),
    );
    repo.commit("eastus-prod-1 moves region");
    let run = plan(&repo, &["--format", "json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let clusters = plan["clusters"].as_array().unwrap();
    let names: Vec<&str> = clusters
        .iter()
        .map(|c| c["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["eastus-prod-1"], "{}", run.stdout);
    let objects = clusters[0]["objects"].as_array().unwrap();
    let diff_of = |id: &str| {
        objects
            .iter()
            .find(|o| o["object"].as_str().unwrap().contains(id))
            .unwrap_or_else(|| panic!("no diff of {id}: {objects:?}"))["diff"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let role = diff_of("platform-viewer");
    assert!(role.contains("-    fleet-region: eastus\n"), "{role}");
    assert!(role.contains("+    fleet-region: eastus2\n"), "{role}");
    let web = diff_of("shop-web");
    assert!(web.contains("+          value: eastus2\n"), "{web}");
}

/// A plain ManifestWork is planned as a placement of its own, `mw/CLUSTER/NAME`,
/// that gains the one cluster its namespace names and delivers its manifests there only; its
/// manifestConfigs travel with the manifests. Refused (exit 1) before 17.5 was built.
#[test]
fn a_manifest_work_gains_its_cluster_only() {
    let repo = fleet();
    repo.write(
        "ocm/work.yaml",
        "apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {name: probe, namespace: eastus-canary}
spec:
  manifestConfigs:
  - resourceIdentifier: {group: '', resource: configmaps, namespace: default, name: probe}
    updateStrategy: {type: CreateOnly}
  workload:
    manifests:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: probe, namespace: default}, data: {a: '1'}}
",
    );
    repo.commit("a work for the canary");
    let run = plan(&repo, &["--format", "text"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("mw/eastus-canary/probe"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("eastus-canary gained"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("eastus-prod-1 gained"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("ConfigMap/default/probe"),
        "{}",
        run.stdout
    );
}

/// A large commit's diffs are held once, however many clusters get them: plan's memory grows
/// with the change, not with the change times the clusters.
mod shared_diffs {
    use gitfleet::catalog::Catalog;
    use gitfleet::plan::{plan_catalogs, Inputs, Options};
    use gitfleet::schedule::Previous;
    use gitfleet_testkit::bench::manifest::{commit_files, configmaps, Shape};
    use std::sync::Arc;

    fn commit(bulk: Option<String>) -> Catalog {
        let (cat, diags) = gitfleet::analyze(&commit_files(bulk));
        assert!(diags.is_empty(), "{diags:#?}");
        cat
    }

    #[test]
    fn clusters_with_the_same_change_share_one_diff_text() {
        let base = commit(None);
        let (bulk, n) = configmaps(20_000, Shape::Documents, 0);
        let head = commit(Some(bulk));
        let previous = Previous::new();
        let inputs = Inputs {
            inventory: None,
            previous: &previous,
            rollout: None,
            now_unix: 0,
        };
        let opts = Options {
            clusters: vec![],
            context: 3,
        };
        let plan = plan_catalogs(("base", &base), ("head", &head), &inputs, &opts);
        assert_eq!(plan.clusters.len(), 3, "{:#?}", plan.summary);
        let first = &plan.clusters[0].objects;
        // The ConfigMaps (the namespace is in both commits).
        assert_eq!(first.len(), n);
        for c in &plan.clusters[1..] {
            assert_eq!(c.objects.len(), first.len());
            for (a, b) in first.iter().zip(&c.objects) {
                assert_eq!(a.object, b.object);
                assert!(
                    Arc::ptr_eq(&a.diff, &b.diff),
                    "{} on {}: a copy of the diff",
                    b.object,
                    c.cluster
                );
            }
        }
        // One reference per cluster and none left behind by the comparison.
        assert!(first.iter().all(|o| Arc::strong_count(&o.diff) == 3));
    }
}

/// An OCM Placement's replica set with a ProgressivePerGroup rollout: the plan shows the order
/// by decision group (two groups of two clusters, as OCM's clustersPerDecisionGroup makes them).
#[test]
fn an_ocm_progressive_rollout_shows_its_order_by_decision_group() {
    let repo = Repo::new();
    let mut hub = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n---\n\
         apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata: {name: all}\n---\n\
         apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSetBinding\nmetadata: {name: all, namespace: app}\nspec: {clusterSet: all}\n---\n\
         apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p, namespace: app}\n\
         spec:\n  clusterSets: [all]\n  decisionStrategy: {groupStrategy: {clustersPerDecisionGroup: 2}}\n",
    );
    for m in ["m1", "m2", "m3", "m4"] {
        hub.push_str(&format!(
            "---\napiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata:\n  name: {m}\n  labels: {{cluster.open-cluster-management.io/clusterset: all}}\nspec: {{hubAcceptsClient: true}}\n"
        ));
    }
    repo.write("hub.yaml", &hub);
    let rs = |tag: &str| {
        format!(
            "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata: {{name: rs, namespace: app}}\n\
             spec:\n  placementRefs: [{{name: p, rolloutStrategy: {{type: ProgressivePerGroup}}}}]\n  manifestWorkTemplate:\n    workload:\n      manifests:\n\
             \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: rs, namespace: default}}, data: {{tag: '{tag}'}}}}\n"
        )
    };
    repo.write("rs.yaml", &rs("1"));
    repo.commit("a replica set");
    repo.write("rs.yaml", &rs("2"));
    repo.commit("a new template");
    let dir = repo.path().to_str().unwrap();
    let run = gitfleet(&["plan", "--repo", dir, "--base", "HEAD~1", "--head", "HEAD"]);
    // Exit 2: the head changes the fleet.
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(
            "rollout: ProgressivePerGroup: group 0 (m1, m2), then group 1 (m3, m4) (each step once the one before is available)"
        ),
        "{}",
        run.stdout
    );
}
