//! Selection, hashing and snapshot tests on small in-memory commits.

use super::*;
use crate::catalog::SourceFile;

fn commit(files: &[(&str, &str)]) -> Catalog {
    let files: Vec<SourceFile> = files
        .iter()
        .map(|(p, c)| SourceFile {
            path: p.to_string(),
            content: c.as_bytes().to_vec(),
        })
        .collect();
    let (cat, diags) = crate::analyze(&files);
    assert!(diags.is_empty(), "{diags:#?}");
    cat
}

fn placement<'a>(cat: &'a Catalog, name: &str) -> &'a Placement {
    &cat.placements
        .iter()
        .find(|p| p.spec.metadata.name == name)
        .unwrap()
        .spec
}

fn selected(cat: &Catalog, name: &str) -> Vec<String> {
    select(cat, placement(cat, name))
        .unwrap()
        .iter()
        .map(|r| r.key().short().to_string())
        .collect()
}

const APP: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: app, labels: {team: a}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: app}
spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app}
spec: {clusterIP: 10.0.0.7, ports: [{port: 80, nodePort: 30080}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: app}
data: {k: v}
---
apiVersion: v1
kind: Namespace
metadata: {name: other, labels: {team: a}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: other}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-extra, labels: {team: a}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
";

fn crp(name: &str, selectors: &str) -> String {
    format!(
        "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {{name: {name}}}\nspec:\n  resourceSelectors:\n{selectors}"
    )
}

#[test]
fn namespace_with_resources_takes_everything_in_kubefleet_order() {
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    assert_eq!(
        selected(&cat, "p"),
        vec![
            "Namespace/app",
            "ConfigMap/app/settings",
            "Service/app/web",
            "Deployment/app/web"
        ]
    );
}

#[test]
fn namespace_only_takes_the_namespace() {
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app, selectionScope: NamespaceOnly}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    assert_eq!(selected(&cat, "p"), vec!["Namespace/app"]);
}

#[test]
fn namespace_with_resource_selectors_resolves_other_selectors_inside_it() {
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app, selectionScope: NamespaceWithResourceSelectors}\n  - {group: '', version: v1, kind: ConfigMap}\n  - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: reader}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    // The ConfigMap of namespace `other` is not taken; the cluster-scoped selector is unaffected.
    assert_eq!(
        selected(&cat, "p"),
        vec![
            "Namespace/app",
            "ConfigMap/app/settings",
            "ClusterRole/reader"
        ]
    );
}

/// A selector of a disabled kind (here MemberCluster, of the fleet's own API) selects nothing
/// and is no error: KubeFleet skips it (resource_selector_resolver.go gatherSelectedResource,
/// `IsResourceDisabled`); the placement's other selectors select as usual.
#[test]
fn a_disabled_kind_is_skipped_not_an_error() {
    let p = crp(
        "p",
        "  - {group: cluster.kubernetes-fleet.io, version: v1beta1, kind: MemberCluster}\n  - {group: '', version: v1, kind: Namespace, name: app, selectionScope: NamespaceOnly}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    assert!(crate::snapshot::invalid_selections(&cat).is_empty());
    assert_eq!(selected(&cat, "p"), vec!["Namespace/app"]);
}

#[test]
fn label_selected_namespaces_skip_reserved_ones() {
    let p = crp(
        "p",
        "  - group: ''\n    version: v1\n    kind: Namespace\n    selectionScope: NamespaceOnly\n    labelSelector: {matchLabels: {team: a}}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    assert_eq!(
        selected(&cat, "p"),
        vec!["Namespace/app", "Namespace/other"]
    );
}

/// KubeFleet fails the selection when a label selector with the default scope matches a
/// reserved namespace (resource_selector_resolver.go fetchAllResourcesInOneNamespace: "namespace
/// %s is not allowed to propagate"), as when it is named. Its hub admits the placement all the
/// same (the error is reported on it), so the commit is valid: the placement is held, with the
/// error at its selector and KubeFleet's condition message.
#[test]
fn label_selected_reserved_namespaces_with_their_resources_hold_the_placement() {
    let p = crp(
        "p",
        "  - group: ''\n    version: v1\n    kind: Namespace\n    labelSelector: {matchLabels: {team: a}}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    let invalid = invalid_selections(&cat);
    let keys: Vec<String> = invalid.keys().map(|k| k.to_string()).collect();
    assert_eq!(keys, vec!["crp/p"]);
    let held = &invalid.values().next().unwrap();
    let got: Vec<String> = held.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        got,
        vec!["p.yaml:9: ClusterResourcePlacement/p: spec.resourceSelectors[0].labelSelector: selects namespace \"kube-extra\", which is reserved (fleet-* and kube-* namespaces are never propagated)"]
    );
    assert_eq!(
        held.message,
        "The resource selectors are invalid: failed to process the request due to a client error: spec.resourceSelectors[0].labelSelector: selects namespace \"kube-extra\", which is reserved (fleet-* and kube-* namespaces are never propagated)"
    );
}

/// The selections made once for a whole commit are each placement's own, and the placements
/// they hold are the ones `invalid_selections` holds; a renderer's selections given them share
/// them instead of selecting again.
#[test]
fn selections_made_once_are_each_placements_own_and_shared() {
    let good = crp(
        "good",
        "  - {group: '', version: v1, kind: Namespace, name: app}\n",
    );
    let bad = crp(
        "bad",
        "  - group: ''\n    version: v1\n    kind: Namespace\n    labelSelector: {matchLabels: {team: a}}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("good.yaml", &good), ("bad.yaml", &bad)]);
    let made = select_all(&cat);
    assert_eq!(made.len(), 2);
    for p in &cat.placements {
        let own = select(&cat, &p.spec);
        let shared = &made[&p.index];
        assert_eq!(own.is_ok(), shared.is_ok(), "{}", p.spec.metadata.name);
        if let (Ok(own), Ok(shared)) = (own, shared) {
            assert_eq!(&own, &**shared);
            assert!(!own.is_empty());
        }
    }
    assert_eq!(invalid_of(&cat, &made), invalid_selections(&cat));
    assert_eq!(invalid_of(&cat, &made).len(), 1);
    let selections = crate::render::cluster::Selections::with(&cat, &made);
    let entry = cat.placement("good", None).unwrap();
    let Ok(shared) = &made[&entry.index] else {
        panic!("good selects cleanly");
    };
    assert!(Arc::ptr_eq(&selections.of(entry).unwrap(), shared));
    let entry = cat.placement("bad", None).unwrap();
    assert!(selections.of(entry).is_none());
}

/// A commit whose placements all select cleanly holds none.
#[test]
fn valid_selections_hold_nothing() {
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    assert!(invalid_selections(&cat).is_empty());
}

#[test]
fn selecting_a_missing_object_by_name_is_empty_not_an_error() {
    let p = crp(
        "p",
        "  - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: ghost}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    assert!(selected(&cat, "p").is_empty());
}

#[test]
fn generated_and_controller_owned_objects_are_skipped() {
    let extra = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-root-ca.crt, namespace: app}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: app}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: builder, namespace: app}
---
apiVersion: v1
kind: Secret
metadata: {name: token, namespace: app}
type: kubernetes.io/service-account-token
---
apiVersion: v1
kind: Endpoints
metadata: {name: web, namespace: app}
---
apiVersion: v1
kind: Endpoints
metadata: {name: external, namespace: app}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-1, namespace: app, ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-x, namespace: app, labels: {endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: leaving, namespace: app, deletionTimestamp: '2026-01-01T00:00:00Z'}
";
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("extra.yaml", extra), ("p.yaml", &p)]);
    assert_eq!(
        selected(&cat, "p"),
        vec![
            "Namespace/app",
            "ServiceAccount/app/builder",
            "ConfigMap/app/settings",
            "Service/app/web",
            "Deployment/app/web",
            // Endpoints has no rank in KubeFleet's order: unknown kinds come last.
            "Endpoints/app/external",
        ]
    );
}

#[test]
fn resource_placements_stay_in_their_namespace() {
    let rp = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ResourcePlacement\nmetadata: {name: rp, namespace: app}\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: ConfigMap}\n";
    let cat = commit(&[("app.yaml", APP), ("rp.yaml", rp)]);
    assert_eq!(selected(&cat, "rp"), vec!["ConfigMap/app/settings"]);
}

#[test]
fn selected_objects_are_sanitised() {
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    let snap = take(&cat, placement(&cat, "p")).unwrap();
    let svc = snap
        .resources
        .iter()
        .find(|r| r.gvk.kind == "Service")
        .unwrap();
    assert_eq!(
        svc.value["spec"],
        serde_json::json!({"ports": [{"port": 80}]})
    );
}

/// The same objects, written in another order, other files, other key order and flow style.
const APP_REWRITTEN: &[(&str, &str)] = &[
    (
        "z/configmaps.yaml",
        "kind: ConfigMap\napiVersion: v1\ndata:\n  k: v\nmetadata:\n  namespace: app\n  name: settings\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: other, name: settings}\n",
    ),
    (
        "a/workloads.json",
        r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"kind": "Service", "apiVersion": "v1", "metadata": {"namespace": "app", "name": "web"},
             "spec": {"ports": [{"nodePort": 30080, "port": 80}], "clusterIP": "10.0.0.7"}},
            {"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"namespace": "app", "name": "web"},
             "spec": {"template": {"metadata": {"labels": {"a": "b"}}}, "selector": {"matchLabels": {"a": "b"}}}}]}"#,
    ),
    (
        "m/namespaces.yml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    team: a\n  name: app\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other, labels: {team: a}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: kube-extra, labels: {team: a}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\n",
    ),
];

#[test]
fn resource_hash_ignores_layout_and_order() {
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app}\n",
    );
    let a = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    let mut files: Vec<(&str, &str)> = APP_REWRITTEN.to_vec();
    files.push(("placements/p.yaml", &p));
    let b = commit(&files);
    let ha = take(&a, placement(&a, "p")).unwrap().resource_hash;
    let hb = take(&b, placement(&b, "p")).unwrap().resource_hash;
    assert_eq!(ha, hb);
}

#[test]
fn any_content_change_gives_a_new_resource_hash() {
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app}\n",
    );
    let base = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    let h0 = take(&base, placement(&base, "p")).unwrap().resource_hash;
    for (from, to) in [
        ("data: {k: v}", "data: {k: w}"),
        ("port: 80", "port: 81"),
        (
            "labels: {team: a}}\n---\napiVersion: apps/v1",
            "labels: {team: b}}\n---\napiVersion: apps/v1",
        ),
        (
            "metadata: {name: settings, namespace: app}",
            "metadata: {name: settings2, namespace: app}",
        ),
    ] {
        let changed = APP.replacen(from, to, 1);
        assert_ne!(changed, APP, "{from}");
        let cat = commit(&[("app.yaml", &changed), ("p.yaml", &p)]);
        let h = take(&cat, placement(&cat, "p")).unwrap().resource_hash;
        assert_ne!(h, h0, "changing {from:?} to {to:?} must change the hash");
    }
    // Server-populated fields are sanitised away: they do not change the hash.
    let with_status = APP.replacen("data: {k: v}", "data: {k: v}\nstatus: {x: 1}", 1);
    let cat = commit(&[("app.yaml", &with_status), ("p.yaml", &p)]);
    assert_eq!(take(&cat, placement(&cat, "p")).unwrap().resource_hash, h0);
}

fn policy_of(spec_policy: &str) -> String {
    let p = crp(
        "p",
        &format!("  - {{group: '', version: v1, kind: Namespace, name: app}}\n{spec_policy}"),
    );
    let cat = commit(&[("app.yaml", APP), ("p.yaml", &p)]);
    take(&cat, placement(&cat, "p")).unwrap().policy_hash
}

#[test]
fn policy_hash_ignores_number_of_clusters_and_applies_defaults() {
    let n2 = policy_of("  policy: {placementType: PickN, numberOfClusters: 2}\n");
    let n5 = policy_of("  policy: {placementType: PickN, numberOfClusters: 5}\n");
    assert_eq!(n2, n5);
    assert_ne!(n2, policy_of("  policy: {placementType: PickAll}\n"));
    // An absent policy is PickAll; defaulted fields hash as if written.
    assert_eq!(
        policy_of(""),
        policy_of("  policy: {placementType: PickAll}\n")
    );
    assert_eq!(
        policy_of("  policy: {tolerations: [{key: k, value: v}]}\n"),
        policy_of("  policy: {tolerations: [{key: k, operator: Equal, value: v}]}\n")
    );
    assert_ne!(
        policy_of("  policy: {tolerations: [{key: k, value: v}]}\n"),
        policy_of("  policy: {tolerations: [{key: k, value: w}]}\n")
    );
    // The rollout strategy is not part of the policy.
    assert_eq!(policy_of(""), policy_of("  strategy: {type: External}\n"));
}

#[test]
fn envelopes_are_selected_as_themselves_and_their_contents_counted() {
    let env = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ResourceEnvelope\nmetadata: {name: guard, namespace: app}\ndata:\n  q.yaml:\n    apiVersion: v1\n    kind: ResourceQuota\n    metadata: {name: q, namespace: app}\n  r.yaml:\n    apiVersion: rbac.authorization.k8s.io/v1\n    kind: Role\n    metadata: {name: r, namespace: app}\n";
    let p = crp(
        "p",
        "  - {group: '', version: v1, kind: Namespace, name: app}\n",
    );
    let cat = commit(&[("app.yaml", APP), ("env.yaml", env), ("p.yaml", &p)]);
    let snap = take(&cat, placement(&cat, "p")).unwrap();
    assert!(snap
        .resources
        .iter()
        .any(|r| r.key().short().to_string() == "ResourceEnvelope/app/guard"));
    assert_eq!(snap.enveloped_objects, 2);
}
