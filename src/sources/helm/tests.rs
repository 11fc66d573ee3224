use super::*;
use std::collections::BTreeMap;

fn tree(entries: &[(&str, EntryKind)]) -> Tree {
    Tree {
        root: "root".into(),
        entries: entries
            .iter()
            .map(|(p, k)| (p.to_string(), (*k, format!("id-{p}"))))
            .collect(),
    }
}

fn release(chart: &str, values_files: &[&str]) -> HelmRelease {
    let doc = serde_json::json!({
        "apiVersion": "gitfleet.io/v1alpha1",
        "kind": "HelmRelease",
        "metadata": {"name": "web"},
        "spec": {"chart": chart, "namespace": "web", "valuesFiles": values_files},
    });
    HelmRelease::parse(&doc).unwrap()
}

#[test]
fn the_inputs_are_the_declaration_chart_and_values_files_and_hostile_paths_are_refused() {
    use EntryKind::*;
    let files: BTreeMap<&str, &str> = [
        (
            "charts/web/Chart.yaml",
            "apiVersion: v2\nname: web\nversion: 1.0.0\ndependencies:\n- {name: common, repository: https://charts.example.com}\n- {name: db, repository: oci://registry.example.com/charts}\n",
        ),
        (
            "charts/remote/Chart.yaml",
            "apiVersion: v2\nname: remote\nversion: 1.0.0\ndependencies:\n- {name: redis, version: 19.0.0, repository: https://charts.bitnami.com/bitnami}\n",
        ),
        ("charts/linked/Chart.yaml", "apiVersion: v2\nname: linked\nversion: 1.0.0\n"),
    ]
    .into_iter()
    .collect();
    let t = tree(&[
        ("apps", Tree),
        ("apps/web", Tree),
        ("apps/web/helmrelease.yaml", Blob),
        ("apps/web/values-prod.yaml", Blob),
        ("apps/web/link.yaml", Link),
        ("charts", Tree),
        ("charts/web", Tree),
        ("charts/web/Chart.yaml", Blob),
        ("charts/web/templates", Tree),
        ("charts/web/templates/cm.yaml", Blob),
        ("charts/web/charts", Tree),
        ("charts/web/charts/common", Tree),
        ("charts/web/charts/common/Chart.yaml", Blob),
        ("charts/web/charts/db-2.1.0.tgz", Blob),
        ("charts/remote", Tree),
        ("charts/remote/Chart.yaml", Blob),
        ("charts/linked", Tree),
        ("charts/linked/Chart.yaml", Blob),
        ("charts/linked/templates", Link),
        ("charts/web-1.0.0.tgz", Blob),
        ("charts/notes", Tree),
        ("charts/notes/README.md", Blob),
        ("vendor", Link),
    ]);
    let read = |p: &str| {
        files
            .get(p)
            .map(|c| c.as_bytes().to_vec())
            .ok_or_else(|| "missing".to_string())
    };
    let of = |r: &HelmRelease| inputs(&t, "apps/web", "apps/web/helmrelease.yaml", r, &read);
    let got = of(&release("../../charts/web", &["values-prod.yaml"])).unwrap();
    assert_eq!(got.chart, "charts/web");
    assert_eq!(got.values_files, ["apps/web/values-prod.yaml"]);
    assert_eq!(
        got.ids,
        [
            (
                "apps/web/helmrelease.yaml".to_string(),
                "id-apps/web/helmrelease.yaml".to_string()
            ),
            ("charts/web".into(), "id-charts/web".into()),
            (
                "apps/web/values-prod.yaml".into(),
                "id-apps/web/values-prod.yaml".into()
            ),
        ]
    );
    assert_eq!(
        of(&release("../../charts/web-1.0.0.tgz", &[]))
            .unwrap()
            .chart,
        "charts/web-1.0.0.tgz"
    );
    let refused = |chart: &str, values: &[&str]| of(&release(chart, values)).unwrap_err();
    assert_eq!(
        refused("oci://registry.example.com/charts/web", &[]),
        (
            "spec.chart".into(),
            Refusal::Remote {
                reference: "oci://registry.example.com/charts/web".into()
            }
        )
    );
    assert_eq!(
        refused("https://charts.example.com/web-1.0.0.tgz", &[]).1,
        Refusal::Remote {
            reference: "https://charts.example.com/web-1.0.0.tgz".into()
        }
    );
    assert_eq!(
        refused("../../../../etc", &[]).1,
        Refusal::Outside {
            reference: "../../../../etc".into()
        }
    );
    assert_eq!(
        refused("../../vendor/web", &[]).1,
        Refusal::Symlink {
            path: "vendor".into()
        }
    );
    assert_eq!(
        refused("../../charts/linked", &[]).1,
        Refusal::Symlink {
            path: "charts/linked/templates".into()
        }
    );
    assert_eq!(
        refused("../../charts/remote", &[]),
        (
            "spec.chart".into(),
            Refusal::Dependency {
                name: "redis".into(),
                repository: "https://charts.bitnami.com/bitnami".into(),
                charts: "charts/remote/charts/".into(),
            }
        )
    );
    assert!(refused("../../charts/remote", &[])
        .1
        .to_string()
        .contains("gitfleet renders charts without network"));
    assert_eq!(
        refused("../../charts/notes", &[]).1,
        Refusal::NotAChart {
            path: "charts/notes".into()
        }
    );
    assert_eq!(
        refused("bitnami/nginx", &[]).1,
        Refusal::Missing {
            reference: "bitnami/nginx".into(),
            path: "apps/web/bitnami/nginx".into()
        }
    );
    assert_eq!(
        refused("../../charts/web", &["values-prod.yaml", "link.yaml"]),
        (
            "spec.valuesFiles[1]".into(),
            Refusal::Symlink {
                path: "apps/web/link.yaml".into()
            }
        )
    );
    assert_eq!(
        refused("../../charts/web", &["../../charts"]).1,
        Refusal::NotAFile {
            path: "charts".into()
        }
    );
}

#[test]
fn namespaced_objects_without_a_namespace_go_to_the_release_namespace() {
    let out = "---
# Source: web/crds/crd.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
---
# Source: web/templates/all.yaml
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b, namespace: elsewhere}
---
apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
---
apiVersion: unknown.example.com/v1
kind: Gadget
metadata: {name: g}
";
    let got = in_release_namespace(out.as_bytes(), "web").unwrap();
    let docs = crate::yaml::documents(std::str::from_utf8(&got).unwrap()).unwrap();
    let namespaces: Vec<(&str, Option<&str>)> = docs
        .iter()
        .map(|d| {
            (
                d["metadata"]["name"].as_str().unwrap(),
                d["metadata"]["namespace"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        namespaces,
        [
            ("widgets.example.com", None),
            ("a", Some("web")),
            ("b", Some("elsewhere")),
            ("web", None),
            ("reader", None),
            ("w", Some("web")),
            ("g", None),
        ]
    );
    assert!(in_release_namespace(b"a: [", "web")
        .unwrap_err()
        .starts_with("its output is not YAML"));
}

#[test]
fn a_chart_or_values_file_no_release_uses_gets_its_diagnostic_and_a_used_one_none() {
    use EntryKind::*;
    let t = tree(&[
        ("apps", Tree),
        ("apps/web", Tree),
        ("apps/web/helmrelease.yaml", Blob),
        ("charts", Tree),
        ("charts/web", Tree),
        ("charts/web/Chart.yaml", Blob),
        ("charts/other", Tree),
        ("charts/other/Chart.yaml", Blob),
        ("shared", Tree),
        ("shared/values.yaml", Blob),
        ("values.yaml", Blob),
    ]);
    let files: BTreeMap<&str, &str> = [
        (
            // A mistake (no namespace) still claims its chart and values file.
            "apps/web/helmrelease.yaml",
            "apiVersion: gitfleet.io/v1alpha1\nkind: HelmRelease\nmetadata: {name: web}\nspec:\n  chart: ../../charts/web\n  valuesFiles: [../../shared/values.yaml]\n",
        ),
        ("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n"),
    ]
    .into_iter()
    .collect();
    let read = |p: &str| {
        files
            .get(p)
            .map(|c| c.as_bytes().to_vec())
            .ok_or_else(|| "missing".to_string())
    };
    let unused = |file: &str| Diagnostic {
        origin: Origin {
            file: file.into(),
            document: 0,
            line: 1,
        },
        object: format!("unused {file}"),
        field: String::new(),
        message: String::new(),
    };
    let found = [
        Found::Release {
            folder: "apps/web".into(),
            file: "apps/web/helmrelease.yaml".into(),
        },
        Found::Chart {
            folder: "charts/web".into(),
            unused: unused("charts/web/Chart.yaml"),
        },
        Found::Chart {
            folder: "charts/other".into(),
            unused: unused("charts/other/Chart.yaml"),
        },
        Found::Values {
            file: "shared/values.yaml".into(),
            unused: unused("shared/values.yaml"),
        },
        Found::Values {
            file: "values.yaml".into(),
            unused: unused("values.yaml"),
        },
    ];
    let helm = Helm::new(Some("/nonexistent/helm".into()), None, Limits::default());
    let (rendered, problems) = helm.render_all(&found, &t, &read);
    assert!(rendered.is_empty());
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "apps/web/helmrelease.yaml:1: HelmRelease web: spec: missing field `namespace`",
            "charts/other/Chart.yaml:1: unused charts/other/Chart.yaml: ",
            "values.yaml:1: unused values.yaml: ",
        ]
    );
    // A missing helm is a clear error, reached only once the release is valid.
    let files: BTreeMap<&str, &str> = [(
        "apps/web/helmrelease.yaml",
        "apiVersion: gitfleet.io/v1alpha1\nkind: HelmRelease\nmetadata: {name: web}\nspec: {chart: ../../charts/web, namespace: web}\n",
    ), ("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n")]
    .into_iter()
    .collect();
    let read = |p: &str| {
        files
            .get(p)
            .map(|c| c.as_bytes().to_vec())
            .ok_or_else(|| "missing".to_string())
    };
    let (_, problems) = helm.render_all(&found[..1], &t, &read);
    let shown = problems[0].to_string();
    assert!(
        shown.starts_with("apps/web/helmrelease.yaml:1: HelmRelease web: cannot be rendered: helm is not installed (/nonexistent/helm cannot be run:")
            && shown.ends_with("install it with `go install helm.sh/helm/v3/cmd/helm@v3.22.0`, or name the program with --helm (GITFLEET_HELM)"),
        "{shown}"
    );
}
