//! Helm releases end to end: a chart kept in a real git repository, declared by a
//! `helmrelease.yaml` with values files and inline values, rendered by the real `helm` (built
//! from its Go module by `.ci/run`) through the real binary. Every rendered object is traced to
//! its release in `render` and `plan`; chart tests are left out, hooks placed as plain objects,
//! CRDs placed, namespaced objects without a namespace put in the release namespace; overrides
//! vary rendered objects per cluster on members (on `gitfleet sim` and on real API servers); a
//! restart renders nothing again, changed values render again. Hostile charts (a template that
//! never ends, one that prints too much, a dependency from a repository, a path leaving the
//! repository or through a symbolic link) and a missing helm are clear errors that never hang.

mod common;
use common::kubectl::Kubectl as _;

use common::members::{Backend, Members};
use common::{Repo, Run, TWO_MEMBERS};
use std::path::Path;
use std::process::Command;

on_both_backends!(
    each_cluster_gets_the_release_with_its_override_and_a_restart_renders_nothing_again
);

fn member(name: &str, env: &str) -> String {
    format!(
        "apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: {name}
  labels:
    env: {env}
spec:
  identity: {{name: member, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
"
    )
}

const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
const DEFAULT_VALUES: &str = "greeting: hello\ncolour: blue\nreplicas: 1\n";
/// No namespace named: the release namespace is where helm install would put them.
const TEMPLATES: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
  labels: {app: web}
data:
  greeting: {{ .Values.greeting | quote }}
  colour: {{ .Values.colour | quote }}
  release-namespace: {{ .Release.Namespace }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-setup
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
data:
  step: migrate
"#;
const TEST_POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    helm.sh/hook: test
spec:
  containers: [{name: t, image: busybox}]
"#;
const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

fn release(values_files: &str, inline: &str) -> String {
    format!(
        "apiVersion: gitfleet.io/v1alpha1
kind: HelmRelease
metadata:
  name: web
spec:
  chart: ../../charts/web
  namespace: web
  valuesFiles: [{values_files}]
  values: {{{inline}}}
"
    )
}

const PLACEMENT: &str = "apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: web
spec:
  resourceSelectors:
  - {group: '', version: v1, kind: Namespace, name: web}
  - {group: apiextensions.k8s.io, version: v1, kind: CustomResourceDefinition, name: widgets.example.com}
  policy:
    placementType: PickAll
";

/// Prod's copy of the rendered ConfigMap says so: a rendered object varied per cluster by a
/// label selector, as Rancher Fleet's targetCustomizations vary values.
const OVERRIDE: &str = "apiVersion: placement.kubernetes-fleet.io/v1
kind: ResourceOverride
metadata:
  name: web-per-env
  namespace: web
spec:
  placement:
    name: web
    scope: Cluster
  resourceSelectors:
  - {group: '', version: v1, kind: ConfigMap, name: web-config}
  policy:
    overrideRules:
    - clusterSelector:
        clusterSelectorTerms:
        - labelSelector:
            matchLabels: {env: prod}
      jsonPatchOverrides:
      - {op: replace, path: /data/colour, value: red}
      - {op: add, path: /data/env, value: '${MEMBER-CLUSTER-LABEL-KEY-env}'}
";

/// A chart in `charts/web`, released by `apps/web/helmrelease.yaml` into namespace `web`.
fn fleet_repo() -> Repo {
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &member("alpha", "staging"));
    repo.write("members/beta.yaml", &member("beta", "prod"));
    repo.write(
        "apps/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n",
    );
    repo.write("charts/web/Chart.yaml", CHART);
    repo.write("charts/web/values.yaml", DEFAULT_VALUES);
    repo.write("charts/web/templates/config.yaml", TEMPLATES);
    repo.write("charts/web/templates/tests/test-pod.yaml", TEST_POD);
    repo.write("charts/web/crds/widgets.yaml", CRD);
    repo.write(
        "apps/web/helmrelease.yaml",
        &release("values-fleet.yaml", ""),
    );
    repo.write("apps/web/values-fleet.yaml", "greeting: bonjour\n");
    repo.write("placements/web.yaml", PLACEMENT);
    repo.write("overrides/web.yaml", OVERRIDE);
    repo
}

fn gitfleet(helm: &Path, args: &[&str]) -> Run {
    common::sources::gitfleet(("GITFLEET_HELM", helm), args)
}

#[test]
fn a_release_is_rendered_with_its_values_and_every_object_is_traced_to_it() {
    let Some(helm) = gitfleet_testkit::tools::HELM.find("the Helm tests") else {
        return;
    };
    let repo = fleet_repo();
    let empty = repo.commit("the chart without its placement");
    repo.write(
        "apps/web/helmrelease.yaml",
        &release("values-fleet.yaml", "colour: green"),
    );
    repo.commit("green");
    let repo_path = repo.path().to_str().unwrap();
    let validate = gitfleet(&helm, &["validate", "--repo", repo_path]);
    assert_eq!(validate.code, 0, "{}\n{}", validate.stdout, validate.stderr);

    let render = gitfleet(
        &helm,
        &["render", "--repo", repo_path, "--cluster", "alpha"],
    );
    assert_eq!(render.code, 0, "{}", render.stderr);
    let out = &render.stdout;
    assert_eq!(
        out.matches("---\n# rendered by helm apps/web/helmrelease.yaml\n")
            .count(),
        3,
        "the ConfigMap, the hook and the CRD of crds/, each traced:\n{out}"
    );
    assert!(out.contains("name: widgets.example.com"), "{out}");
    // The chart's default, the values file, then the inline values: helm's order.
    assert!(out.contains("greeting: bonjour"), "{out}");
    assert!(out.contains("colour: green"), "{out}");
    assert!(out.contains("release-namespace: web"), "{out}");
    assert!(out.contains("namespace: web\n"), "{out}");
    // Hooks are placed as plain objects; chart tests are left out.
    assert!(out.contains("name: web-setup"), "{out}");
    assert!(!out.contains("web-test"), "{out}");

    // The plan from a commit with other values: the change, traced.
    let plan = gitfleet(
        &helm,
        &[
            "plan", "--repo", repo_path, "--base", &empty, "--head", "HEAD",
        ],
    );
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout
            .contains("ConfigMap/web/web-config (crp/web, helm apps/web/helmrelease.yaml)"),
        "{}",
        plan.stdout
    );
    assert!(plan.stdout.contains("green"), "{}", plan.stdout);
}

/// A packaged chart (`.tgz`, as `helm package` writes it) is rendered like a folder; a
/// dependency vendored under a chart's `charts/` is rendered once, through its parent, and is
/// no chart of its own.
#[test]
fn a_packaged_chart_and_a_vendored_dependency_are_rendered_once() {
    let Some(helm) = gitfleet_testkit::tools::HELM.find("the Helm tests") else {
        return;
    };
    let repo = fleet_repo();
    repo.write(
        "charts/web/Chart.yaml",
        &format!("{CHART}dependencies:\n- name: extra\n  version: 0.1.0\n  repository: https://charts.example.com\n"),
    );
    repo.write(
        "charts/web/charts/extra/Chart.yaml",
        "apiVersion: v2\nname: extra\nversion: 0.1.0\n",
    );
    repo.write(
        "charts/web/charts/extra/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {from: subchart}\n",
    );
    // The same chart packaged, released a second time into another namespace, without its
    // CRD (which both releases would render: a duplicate).
    let packaged = tempfile::tempdir().unwrap();
    let out = Command::new(&helm)
        .args(["package", "charts/web", "--destination"])
        .arg(packaged.path())
        .current_dir(repo.path())
        .env("HELM_CACHE_HOME", packaged.path().join("cache"))
        .env("HELM_CONFIG_HOME", packaged.path().join("config"))
        .env("HELM_DATA_HOME", packaged.path().join("data"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::create_dir_all(repo.path().join("packages")).unwrap();
    std::fs::copy(
        packaged.path().join("web-0.1.0.tgz"),
        repo.path().join("packages/web-0.1.0.tgz"),
    )
    .unwrap();
    repo.write(
        "apps/web-packaged/helmrelease.yaml",
        &release("", "")
            .replace("../../charts/web", "../../packages/web-0.1.0.tgz")
            .replace("namespace: web", "namespace: packaged\n  skipCRDs: true"),
    );
    repo.write(
        "apps/packaged-namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: packaged\n",
    );
    repo.commit("a dependency and a package");
    let repo_path = repo.path().to_str().unwrap();
    let render = gitfleet(
        &helm,
        &["render", "--repo", repo_path, "--cluster", "alpha"],
    );
    assert_eq!(render.code, 0, "{}", render.stderr);
    // Only namespace web is placed: the subchart's ConfigMap once, in the release namespace.
    assert_eq!(
        render.stdout.matches("name: extra\n").count(),
        1,
        "{}",
        render.stdout
    );
    assert!(
        render.stdout.contains("from: subchart"),
        "{}",
        render.stdout
    );
    // Each release renders its ConfigMaps (web-config, web-setup, extra) into its namespace.
    let validate = gitfleet(&helm, &["validate", "--repo", repo_path]);
    assert!(
        validate.stdout.contains("6 ConfigMap"),
        "{}",
        validate.stdout
    );
}

/// A chart or values file no release uses is refused with the advice to declare one; a
/// release's mistakes name the file and field.
#[test]
fn an_unused_chart_and_a_bad_declaration_are_refused_naming_file_and_field() {
    let Some(helm) = gitfleet_testkit::tools::HELM.find("the Helm tests") else {
        return;
    };
    let repo = fleet_repo();
    repo.write(
        "charts/other/Chart.yaml",
        "apiVersion: v2\nname: other\nversion: 0.1.0\n",
    );
    repo.write("charts/other/templates/cm.yaml", TEMPLATES);
    repo.write(
        "apps/web/helmrelease.yaml",
        &release("values-fleet.yaml", "").replace(
            "  namespace: web\n",
            "  namespace: web\n  repo: https://charts.example.com\n",
        ),
    );
    repo.commit("mistakes");
    let run = gitfleet(
        &helm,
        &["validate", "--repo", repo.path().to_str().unwrap()],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("apps/web/helmrelease.yaml:1: HelmRelease web: spec.repo: unknown field `repo`, expected one of `chart`, `releaseName`, `namespace`, `valuesFiles`, `values`, `skipCRDs`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("charts/other/Chart.yaml:1: Helm chart charts/other: a Helm chart (Chart.yaml) that no helmrelease.yaml uses"),
        "{}",
        run.stderr
    );
    // The chart the broken release names is not reported as unused as well.
    assert!(
        !run.stderr.contains("Helm chart charts/web"),
        "{}",
        run.stderr
    );
}

/// Each hostile chart gets a clear error naming the release, and none hangs: the time and
/// output limits stop helm.
#[test]
fn hostile_charts_are_refused_or_stopped_with_clear_errors() {
    let Some(helm) = gitfleet_testkit::tools::HELM.find("the Helm tests") else {
        return;
    };
    type Case<'a> = (&'a str, &'a dyn Fn(&Repo), &'a str);
    let cases: [Case; 7] = [
        (
            "a template that never ends",
            &|r: &Repo| {
                // A hundred million rounds without a large list in memory.
                r.write(
                    "charts/web/templates/loop.yaml",
                    "{{- range until 10000 }}{{- range until 10000 }}{{- end }}{{- end }}\n",
                )
            },
            "apps/web/helmrelease.yaml:1: HelmRelease web: helm template: helm did not finish within 2s and was stopped",
        ),
        (
            "a template that prints too much",
            &|r: &Repo| {
                r.write(
                    "charts/web/templates/big.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n{{- range $i := until 3000 }}\n  k{{ $i }}: {{ \"x\" | repeat 1000 | quote }}\n{{- end }}\n",
                )
            },
            "apps/web/helmrelease.yaml:1: HelmRelease web: helm template: helm printed more than 1048576 bytes and was stopped",
        ),
        (
            "a dependency from a repository",
            &|r: &Repo| {
                r.write(
                    "charts/web/Chart.yaml",
                    &format!("{CHART}dependencies:\n- name: redis\n  version: 19.0.0\n  repository: https://charts.bitnami.com/bitnami\n"),
                )
            },
            "apps/web/helmrelease.yaml:1: HelmRelease web: spec.chart: not rendered: the chart's dependency \"redis\" (repository \"https://charts.bitnami.com/bitnami\") is not vendored under charts/web/charts/: gitfleet renders charts without network",
        ),
        (
            "a chart from an OCI registry",
            &|r: &Repo| {
                r.write(
                    "apps/web/helmrelease.yaml",
                    &release("values-fleet.yaml", "").replace("../../charts/web", "oci://registry.example.com/charts/web"),
                )
            },
            "apps/web/helmrelease.yaml:1: HelmRelease web: spec.chart: not rendered: \"oci://registry.example.com/charts/web\" is a chart from a repository: gitfleet renders charts without network",
        ),
        (
            "a chart path leaving the repository",
            &|r: &Repo| {
                r.write(
                    "apps/web/helmrelease.yaml",
                    &release("values-fleet.yaml", "").replace("../../charts/web", "../../../../../etc"),
                )
            },
            "apps/web/helmrelease.yaml:1: HelmRelease web: spec.chart: not rendered: \"../../../../../etc\" leaves the repository",
        ),
        (
            "a chart through a symbolic link",
            &|r: &Repo| {
                std::os::unix::fs::symlink("/etc", r.path().join("linked")).unwrap();
                r.write(
                    "apps/web/helmrelease.yaml",
                    &release("values-fleet.yaml", "").replace("../../charts/web", "../../linked"),
                )
            },
            "apps/web/helmrelease.yaml:1: HelmRelease web: spec.chart: not rendered: linked is a symbolic link",
        ),
        (
            "a symbolic link inside the chart",
            &|r: &Repo| {
                std::os::unix::fs::symlink("/etc/passwd", r.path().join("charts/web/templates/passwd.yaml"))
                    .unwrap();
            },
            "apps/web/helmrelease.yaml:1: HelmRelease web: spec.chart: not rendered: charts/web/templates/passwd.yaml is a symbolic link",
        ),
    ];
    for (what, change, want) in cases {
        // Only the endless template is stopped by the clock; the rest get time to spare, so
        // that on a busy machine the output limit, not the time limit, stops the large one.
        let timeout = if what == "a template that never ends" {
            "2s"
        } else {
            "120s"
        };
        let repo = fleet_repo();
        change(&repo);
        repo.commit(what);
        let run = gitfleet(
            &helm,
            &[
                "validate",
                "--repo",
                repo.path().to_str().unwrap(),
                "--render-timeout",
                timeout,
                "--render-max-mib",
                "1",
            ],
        );
        assert_eq!(run.code, 1, "{what}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(want), "{what}:\n{}", run.stderr);
    }
}

#[test]
fn without_helm_the_error_says_how_to_install_it() {
    let repo = fleet_repo();
    repo.commit("app");
    let run = gitfleet(
        Path::new("/nonexistent/helm"),
        &["validate", "--repo", repo.path().to_str().unwrap()],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(
            "apps/web/helmrelease.yaml:1: HelmRelease web: cannot be rendered: helm is not installed (/nonexistent/helm cannot be run:"
        ) && run.stderr.contains("install it with `go install helm.sh/helm/v3/cmd/helm@v3.22.0`, or name the program with --helm (GITFLEET_HELM)"),
        "{}",
        run.stderr
    );
}

/// `gitfleet run --once` with `state`; its log lines.
fn run_once(helm: &Path, repo: &Repo, members: &Members, state: &Path) -> Vec<String> {
    common::sources::run_once(("GITFLEET_HELM", helm), repo, members, state)
}

fn renders(log: &[String]) -> usize {
    log.iter()
        .filter(|l| l.contains("rendering with helm"))
        .count()
}

fn each_cluster_gets_the_release_with_its_override_and_a_restart_renders_nothing_again(
    backend: Backend,
) {
    let Some(helm) = gitfleet_testkit::tools::HELM.find("the Helm tests") else {
        return;
    };
    let members = Members::start(backend, TWO_MEMBERS);
    let repo = fleet_repo();
    repo.commit("web");
    let state = tempfile::tempdir().unwrap();
    let state = state.path().join("state");

    let log = run_once(&helm, &repo, &members, &state);
    assert_eq!(renders(&log), 1, "one rendering:\n{log:#?}");
    let data = |ctx: &str, key: &str| -> String {
        let (code, out, err) = members.kubectl(
            ctx,
            &[
                "get",
                "configmap",
                "web-config",
                "-n",
                "web",
                "-o",
                &format!("jsonpath={{.data.{key}}}"),
            ],
        );
        assert_eq!(code, 0, "{ctx}: {err}");
        out.trim().to_string()
    };
    for ctx in ["alpha", "beta"] {
        assert_eq!(data(ctx, "greeting"), "bonjour", "{ctx}");
        let (code, _, err) = members.kubectl(ctx, &["get", "configmap", "web-setup", "-n", "web"]);
        assert_eq!(code, 0, "{ctx}: the hook is placed: {err}");
    }
    // The override varies the rendered object by cluster label.
    assert_eq!(data("alpha", "colour"), "blue");
    assert_eq!(data("beta", "colour"), "red");
    assert_eq!(data("beta", "env"), "prod");

    // A new process with the same state: the rendering is found, not run.
    let log = run_once(&helm, &repo, &members, &state);
    assert_eq!(renders(&log), 0, "{log:#?}");

    // Changed values render again.
    repo.write("apps/web/values-fleet.yaml", "greeting: hallo\n");
    repo.commit("german");
    let log = run_once(&helm, &repo, &members, &state);
    assert_eq!(renders(&log), 1, "{log:#?}");
    assert_eq!(data("alpha", "greeting"), "hallo");
    assert_eq!(data("beta", "greeting"), "hallo");
    assert_eq!(data("beta", "colour"), "red");
}
