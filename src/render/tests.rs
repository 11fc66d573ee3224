//! Rendering tests: overrides, envelopes and order, each pinned to exact output.

use super::*;
use crate::model::decode;
use crate::model::envelope::{ENVELOPE_CONFIGMAP_ANNOTATION, LEGACY_ENVELOPE_OPT_IN_ANNOTATION};
use crate::model::scope::Scope;
use serde_json::json;

fn yaml(text: &str) -> Value {
    crate::yaml::from_str(text).unwrap()
}

fn cro(text: &str) -> ClusterResourceOverride {
    decode(&yaml(text)).unwrap()
}

fn ro(text: &str) -> ResourceOverride {
    decode(&yaml(text)).unwrap()
}

/// A ClusterResourceOverride `name` selecting `selectors` (flow YAML) with `rules` (flow YAML).
fn cro_with(name: &str, placement: &str, selectors: &str, rules: &str) -> ClusterResourceOverride {
    cro(&format!(
        "apiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ClusterResourceOverride\nmetadata: {{name: {name}}}\nspec:\n{placement}  clusterResourceSelectors: {selectors}\n  policy: {{overrideRules: {rules}}}\n"
    ))
}

fn ro_with(
    ns: &str,
    name: &str,
    placement: &str,
    selectors: &str,
    rules: &str,
) -> ResourceOverride {
    ro(&format!(
        "apiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ResourceOverride\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{placement}  resourceSelectors: {selectors}\n  policy: {{overrideRules: {rules}}}\n"
    ))
}

const ALL: &str = "clusterSelector: {clusterSelectorTerms: []}";
const NS_APP: &str = "[{group: '', version: v1, kind: Namespace, name: app}]";
const DEPLOY_WEB: &str = "[{group: apps, version: v1, kind: Deployment, name: web}]";

/// One rule for every cluster replacing `/spec/replicas` with `n`.
fn replicas(n: u32) -> String {
    format!("[{{{ALL}, jsonPatchOverrides: [{{op: replace, path: /spec/replicas, value: {n}}}]}}]")
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn config_map(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}})
}

fn deployment(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns, "labels": {"app": name}}, "spec": {"replicas": 1}})
}

fn cluster_role(name: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": [{"verbs": ["get"]}]})
}

fn widget(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": ns}})
}

const CRP: PlacementRef<'static> = PlacementRef {
    name: "crp",
    namespace: None,
};

struct World<'a> {
    placement: PlacementRef<'a>,
    cros: Vec<ClusterResourceOverride>,
    ros: Vec<ResourceOverride>,
    cluster: &'a str,
    labels: Labels,
}

impl<'a> World<'a> {
    fn new() -> Self {
        World {
            placement: CRP,
            cros: vec![],
            ros: vec![],
            cluster: "member-1",
            labels: [("env".to_string(), "prod".to_string())].into(),
        }
    }

    fn render(&self, selected: &[Value]) -> Result<Vec<Manifest>, RenderError> {
        self.render_shared(&selected.iter().cloned().map(Arc::new).collect::<Vec<_>>())
    }

    fn render_shared(&self, selected: &[Arc<Value>]) -> Result<Vec<Manifest>, RenderError> {
        let overrides = OverrideSet {
            cluster: self.cros.iter().collect(),
            namespaced: self.ros.iter().collect(),
        };
        let cluster = ClusterTarget {
            name: self.cluster,
            labels: &self.labels,
        };
        render_for_cluster(
            &self.placement,
            selected,
            &overrides,
            &cluster,
            &ScopeTable::builtin(),
        )
    }

    fn values(&self, selected: &[Value]) -> Vec<Value> {
        self.render(selected)
            .unwrap()
            .into_iter()
            .map(|m| Arc::unwrap_or_clone(m.value))
            .collect()
    }
}

fn replicas_of(m: &Value) -> &Value {
    &m["spec"]["replicas"]
}

// ---------------------------------------------------------------------------------------------
// Order

#[test]
fn manifests_come_out_by_wave_keeping_selection_order_within_a_wave() {
    let selected = [
        widget("app", "w"),
        deployment("app", "web"),
        config_map("app", "b"),
        cluster_role("reader"),
        namespace("app"),
        config_map("app", "a"),
    ];
    let got: Vec<(u32, String, String)> = World::new()
        .render(&selected)
        .unwrap()
        .into_iter()
        .map(|m| {
            assert_eq!(m.envelope, None);
            (
                m.wave,
                m.value["kind"].as_str().unwrap().to_string(),
                m.value["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        (0, "Namespace", "app"),
        (1, "ConfigMap", "b"),
        (1, "ConfigMap", "a"),
        (2, "ClusterRole", "reader"),
        (4, "Deployment", "web"),
        (999, "Widget", "w"),
    ];
    let want: Vec<(u32, String, String)> = want
        .iter()
        .map(|(w, k, n)| (*w, k.to_string(), n.to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn no_overrides_leave_objects_unchanged() {
    let selected = [namespace("app"), deployment("app", "web")];
    assert_eq!(World::new().values(&selected), selected.to_vec());
}

#[test]
fn a_rendering_shares_each_value_no_override_patched_for_its_cluster() {
    // Memory: an object rendered for 300 clusters is one value, not 300 copies.
    let selected = [
        Arc::new(namespace("app")),
        Arc::new(deployment("app", "web")),
    ];
    let mut w = World::new();
    // Selects the Deployment, but its one rule is for staging clusters: nothing patched here.
    let staging = "[{clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {env: staging}}}]}, jsonPatchOverrides: [{op: replace, path: /spec/replicas, value: 9}]}]";
    w.ros = vec![ro_with("app", "ro", "", DEPLOY_WEB, staging)];
    let got = w.render_shared(&selected).unwrap();
    assert!(Arc::ptr_eq(&got[0].value, &selected[0]));
    assert!(Arc::ptr_eq(&got[1].value, &selected[1]));
    // Patched for this cluster: a copy, and the shared value is left as it was.
    w.ros = vec![ro_with("app", "ro", "", DEPLOY_WEB, &replicas(3))];
    let got = w.render_shared(&selected).unwrap();
    assert!(Arc::ptr_eq(&got[0].value, &selected[0]));
    assert!(!Arc::ptr_eq(&got[1].value, &selected[1]));
    assert_eq!(replicas_of(&got[1].value), 3);
    assert_eq!(*selected[1], deployment("app", "web"));
}

// ---------------------------------------------------------------------------------------------
// Which overrides apply

#[test]
fn cluster_overrides_by_name_then_resource_overrides_so_the_resource_override_wins() {
    let mut w = World::new();
    // Given out of order on purpose: application order is by name, not input order.
    w.cros = vec![
        cro_with("b", "", NS_APP, &replicas(3)),
        cro_with("a", "", NS_APP, &replicas(2)),
    ];
    assert_eq!(replicas_of(&w.values(&[deployment("app", "web")])[0]), 3);
    w.ros = vec![
        ro_with("app", "z", "", DEPLOY_WEB, &replicas(5)),
        ro_with("app", "ya", "", DEPLOY_WEB, &replicas(4)),
    ];
    assert_eq!(replicas_of(&w.values(&[deployment("app", "web")])[0]), 5);
}

#[test]
fn rules_apply_in_order_last_write_wins() {
    let mut w = World::new();
    let rules = format!(
        "[{{{ALL}, jsonPatchOverrides: [{{op: replace, path: /spec/replicas, value: 7}}]}}, {{{ALL}, jsonPatchOverrides: [{{op: replace, path: /spec/replicas, value: 8}}, {{op: add, path: /metadata/labels/tier, value: web}}]}}]"
    );
    w.ros = vec![ro_with("app", "ro", "", DEPLOY_WEB, &rules)];
    let got = &w.values(&[deployment("app", "web")])[0];
    assert_eq!(replicas_of(got), 8);
    assert_eq!(
        got["metadata"]["labels"],
        json!({"app": "web", "tier": "web"})
    );
}

#[test]
fn what_a_cluster_override_selects() {
    let add_label = format!(
        "[{{{ALL}, jsonPatchOverrides: [{{op: add, path: /metadata/labels, value: {{o: x}}}}]}}]"
    );
    let mut w = World::new();
    w.cros = vec![cro_with(
        "cro",
        "",
        "[{group: '', version: v1, kind: Namespace, name: app}, {group: rbac.authorization.k8s.io, version: v1beta1, kind: ClusterRole, name: reader}]",
        &add_label,
    )];
    let selected = [
        namespace("app"),
        namespace("other"),
        cluster_role("reader"),
        cluster_role("writer"),
        config_map("app", "c"),
        config_map("other", "c"),
    ];
    let got: Vec<(String, bool)> = w
        .values(&selected)
        .iter()
        .map(|v| {
            (
                format!(
                    "{}/{}",
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["name"].as_str().unwrap()
                ) + &v["metadata"]["namespace"]
                    .as_str()
                    .map(|ns| format!("@{ns}"))
                    .unwrap_or_default(),
                v["metadata"]["labels"] == json!({"o": "x"}),
            )
        })
        .collect();
    let want = [
        ("Namespace/app", true), // by its own identity
        ("Namespace/other", false),
        ("ConfigMap/c@app", true), // through its Namespace
        ("ConfigMap/c@other", false),
        ("ClusterRole/reader", true), // version is not part of the identity
        ("ClusterRole/writer", false),
    ];
    let want: Vec<(String, bool)> = want.iter().map(|(n, b)| (n.to_string(), *b)).collect();
    assert_eq!(got, want);
}

#[test]
fn a_resource_override_applies_only_in_its_namespace_and_never_to_cluster_scoped_objects() {
    let mut w = World::new();
    let add = format!(
        "[{{{ALL}, jsonPatchOverrides: [{{op: add, path: /metadata/labels, value: {{o: x}}}}]}}]"
    );
    w.ros = vec![ro_with(
        "app",
        "ro",
        "",
        "[{group: '', version: v1, kind: ConfigMap, name: c}, {group: '', version: v1, kind: Namespace, name: app}]",
        &add,
    )];
    let got = w.values(&[
        namespace("app"),
        config_map("app", "c"),
        config_map("other", "c"),
    ]);
    assert_eq!(got[0], namespace("app"));
    assert_eq!(got[1]["metadata"]["labels"], json!({"o": "x"}));
    assert_eq!(got[2], config_map("other", "c"));
}

#[test]
fn only_overrides_that_follow_the_placement_apply() {
    let cro_for = |placement: &str| cro_with("cro", placement, NS_APP, &replicas(2));
    let ro_for = |placement: &str| ro_with("app", "ro", placement, DEPLOY_WEB, &replicas(3));
    let rp = PlacementRef {
        name: "rp",
        namespace: Some("app"),
    };
    let rp_elsewhere = PlacementRef {
        name: "rp",
        namespace: Some("other"),
    };
    // (placement rendered, CRO placement field, RO placement field, expected replicas)
    let cases: Vec<(PlacementRef, &str, &str, u32)> = vec![
        (CRP, "", "", 3),
        (CRP, "  placement: {name: crp}\n", "", 3),
        (
            CRP,
            "  placement: {name: crp, scope: Cluster}\n",
            "  placement: {name: other}\n",
            2,
        ),
        (
            CRP,
            "  placement: {name: other}\n",
            "  placement: {name: other}\n",
            1,
        ),
        (CRP, "", "  placement: {name: crp, scope: Namespaced}\n", 2),
        (CRP, "", "  placement: {name: crp, scope: Cluster}\n", 3),
        // A ClusterResourceOverride without placement applies to a ResourcePlacement through
        // the Namespace it selects; one with a placement never does (KubeFleet's overrider).
        (rp, "", "  placement: {name: crp}\n", 2),
        (
            rp,
            "  placement: {name: rp}\n",
            "  placement: {name: crp}\n",
            1,
        ),
        (rp, "", "", 3),
        (rp, "", "  placement: {name: rp, scope: Namespaced}\n", 3),
        (rp, "", "  placement: {name: rp}\n", 2),
        (rp, "", "  placement: {name: other, scope: Namespaced}\n", 2),
        (
            rp_elsewhere,
            "  placement: {name: rp}\n",
            "  placement: {name: rp, scope: Namespaced}\n",
            1,
        ),
    ];
    for (placement, cro_placement, ro_placement, want) in cases {
        let mut w = World::new();
        w.placement = placement;
        w.cros = vec![cro_for(cro_placement)];
        w.ros = vec![ro_for(ro_placement)];
        let got = w.values(&[deployment("app", "web")]);
        assert_eq!(
            replicas_of(&got[0]),
            want,
            "{placement:?} cro={cro_placement:?} ro={ro_placement:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Rules and clusters

#[test]
fn cluster_selectors_choose_the_rules() {
    // A rule that would fail if it were evaluated proves it was skipped.
    let bad = "jsonPatchOverrides: [{op: replace, path: /spec/missing, value: 1}]";
    let good = "jsonPatchOverrides: [{op: replace, path: /spec/replicas, value: 9}]";
    let cases: Vec<(String, Result<u32, ()>)> = vec![
        (format!("[{{{bad}}}]"), Ok(1)), // nil selector: no cluster
        (format!("[{{{ALL}, {good}}}]"), Ok(9)),
        (format!("[{{clusterSelector: {{clusterSelectorTerms: []}}, {good}}}]"), Ok(9)),
        (
            format!("[{{clusterSelector: {{clusterSelectorTerms: [{{labelSelector: {{matchLabels: {{env: dev}}}}}}]}}, {bad}}}]"),
            Ok(1),
        ),
        (
            format!("[{{clusterSelector: {{clusterSelectorTerms: [{{labelSelector: {{matchLabels: {{env: dev}}}}}}, {{labelSelector: {{matchExpressions: [{{key: env, operator: In, values: [prod]}}]}}}}]}}, {good}}}]"),
            Ok(9),
        ),
        (format!("[{{{ALL}, {bad}}}]"), Err(())),
    ];
    for (rules, want) in cases {
        let mut w = World::new();
        w.ros = vec![ro_with("app", "ro", "", DEPLOY_WEB, &rules)];
        let got = w.render(&[deployment("app", "web")]);
        match want {
            Ok(n) => assert_eq!(replicas_of(&got.unwrap()[0].value), n, "{rules}"),
            Err(()) => assert!(got.is_err(), "{rules}"),
        }
    }
}

#[test]
fn delete_drops_the_resource_and_stops_evaluation() {
    let bad =
        format!("{{{ALL}, jsonPatchOverrides: [{{op: replace, path: /spec/missing, value: 1}}]}}");
    let mut w = World::new();
    // Rule 1 would fail; the Delete in rule 0 stops before it. The RO after the CRO is not
    // evaluated either.
    w.cros = vec![cro_with(
        "cro",
        "",
        NS_APP,
        &format!("[{{{ALL}, overrideType: Delete}}, {bad}]"),
    )];
    w.ros = vec![ro_with("app", "ro", "", DEPLOY_WEB, &format!("[{bad}]"))];
    let got = w.values(&[
        namespace("app"),
        deployment("app", "web"),
        config_map("app", "c"),
    ]);
    assert_eq!(got, Vec::<Value>::new());
    // A Delete for other clusters only.
    let mut w = World::new();
    w.ros = vec![ro_with(
        "app",
        "ro",
        "",
        DEPLOY_WEB,
        "[{clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {env: dev}}}]}, overrideType: Delete}]",
    )];
    assert_eq!(
        w.values(&[deployment("app", "web")]),
        vec![deployment("app", "web")]
    );
    w.labels.insert("env".into(), "dev".into());
    assert_eq!(w.values(&[deployment("app", "web")]), Vec::<Value>::new());
}

#[test]
fn patch_operations_follow_rfc_6902() {
    let rules = format!(
        "[{{{ALL}, jsonPatchOverrides: [{{op: remove, path: /metadata/labels/app}}, {{op: add, path: /spec/template, value: {{containers: [{{name: a}}]}}}}, {{op: add, path: /spec/template/containers/-, value: {{name: b}}}}, {{op: add, path: /spec/template/containers/0, value: {{name: first}}}}, {{op: replace, path: /spec/replicas}}]}}]"
    );
    let mut w = World::new();
    w.ros = vec![ro_with("app", "ro", "", DEPLOY_WEB, &rules)];
    let got = &w.values(&[deployment("app", "web")])[0];
    assert_eq!(
        got,
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "app", "labels": {}},
                "spec": {"replicas": null, "template": {"containers": [{"name": "first"}, {"name": "a"}, {"name": "b"}]}}})
    );
}

#[test]
fn a_missing_path_is_an_error_that_names_everything() {
    let mut w = World::new();
    w.ros = vec![ro_with(
        "app",
        "ro",
        "",
        DEPLOY_WEB,
        &format!("[{{clusterSelector: {{clusterSelectorTerms: [{{labelSelector: {{matchLabels: {{env: dev}}}}}}]}}, overrideType: Delete}}, {{{ALL}, jsonPatchOverrides: [{{op: add, path: /metadata/annotations/a, value: x}}]}}]"),
    )];
    let err = w.render(&[deployment("app", "web")]).unwrap_err();
    assert_eq!(
        err,
        RenderError::Override(Box::new(OverrideError {
            override_ref: OverrideRef {
                kind: "ResourceOverride".into(),
                namespace: Some("app".into()),
                name: "ro".into()
            },
            rule: 1,
            resource: ObjectKey::new("apps", "Deployment", Some("app"), "web"),
            envelope: None,
            cluster: "member-1".into(),
            failure: OverrideFailure::Patch {
                patch: 0,
                op: "add".into(),
                path: "/metadata/annotations/a".into(),
                reason:
                    "the path does not exist in the resource (or an array index is out of range)"
                        .into()
            },
        }))
    );
    assert_eq!(
        err.to_string(),
        "Failed to apply the override rules on the resources: ResourceOverride app/ro rule 1 on Deployment/app/web for cluster member-1: jsonPatchOverrides[0] (add /metadata/annotations/a) failed: the path does not exist in the resource (or an array index is out of range)"
    );
}

#[test]
fn missing_paths_for_each_operation() {
    for (op, path) in [
        ("replace", "/spec/paused"),
        ("remove", "/spec/paused"),
        ("add", "/spec/strategy/type"),
        ("add", "/spec/list/3"),
    ] {
        let value = if op == "remove" { "" } else { ", value: 1" };
        let mut w = World::new();
        w.cros = vec![cro_with(
            "cro",
            "",
            NS_APP,
            &format!("[{{{ALL}, jsonPatchOverrides: [{{op: {op}, path: {path}{value}}}]}}]"),
        )];
        let mut d = deployment("app", "web");
        d["spec"]["list"] = json!([1]);
        let RenderError::Override(e) = w.render(&[d]).unwrap_err() else {
            panic!("{op} {path}: not an override error");
        };
        assert_eq!(e.override_ref.to_string(), "ClusterResourceOverride cro");
        assert_eq!(e.rule, 0);
        assert!(
            matches!(&e.failure, OverrideFailure::Patch { patch: 0, path: p, .. } if p == path),
            "{op} {path}: {e:?}"
        );
    }
}

#[test]
fn variables_are_replaced_in_values() {
    let mut w = World::new();
    w.labels.insert("region".into(), "east".into());
    w.ros = vec![ro_with(
        "app",
        "ro",
        "",
        DEPLOY_WEB,
        &format!("[{{{ALL}, jsonPatchOverrides: [{{op: add, path: /metadata/labels/where, value: '${{MEMBER-CLUSTER-NAME}}.${{MEMBER-CLUSTER-LABEL-KEY-region}}'}}, {{op: add, path: /spec/template, value: {{env: ['${{MEMBER-CLUSTER-LABEL-KEY-env}}', '${{MEMBER-CLUSTER-NAME}}']}}}}]}}]"),
    )];
    let got = &w.values(&[deployment("app", "web")])[0];
    assert_eq!(got["metadata"]["labels"]["where"], "member-1.east");
    assert_eq!(
        got["spec"]["template"],
        json!({"env": ["prod", "member-1"]})
    );
}

#[test]
fn variable_errors() {
    let cases = [
        (
            "'${MEMBER-CLUSTER-LABEL-KEY-zone}'",
            OverrideFailure::MissingLabel { key: "zone".into() },
            "label key \"zone\" not found on the cluster",
        ),
        (
            "'a-${MEMBER-CLUSTER-LABEL-KEY-env'",
            OverrideFailure::UnclosedVariable {
                patch: 1,
                value: "\"a-${MEMBER-CLUSTER-LABEL-KEY-env\"".into(),
            },
            "the value \"a-${MEMBER-CLUSTER-LABEL-KEY-env\" of jsonPatchOverrides[1] is missing the closing bracket `}` of a ${MEMBER-CLUSTER-LABEL-KEY-<key>} variable",
        ),
    ];
    for (value, want, message) in cases {
        let mut w = World::new();
        w.cluster = "m9";
        w.ros = vec![ro_with(
            "app",
            "ro",
            "",
            DEPLOY_WEB,
            &format!("[{{{ALL}, jsonPatchOverrides: [{{op: replace, path: /spec/replicas, value: 2}}, {{op: add, path: /metadata/labels/x, value: {value}}}]}}]"),
        )];
        let err = w.render(&[deployment("app", "web")]).unwrap_err();
        let RenderError::Override(e) = &err else {
            panic!("{err:?}");
        };
        assert_eq!((&e.failure, e.cluster.as_str(), e.rule), (&want, "m9", 0));
        assert_eq!(
            err.to_string(),
            format!("Failed to apply the override rules on the resources: ResourceOverride app/ro rule 0 on Deployment/app/web for cluster m9: {message}")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Envelopes

fn resource_envelope(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "placement.kubernetes-fleet.io/v1beta1", "kind": "ResourceEnvelope", "metadata": {"name": name, "namespace": ns}, "data": data})
}

fn cluster_envelope(name: &str, data: Value) -> Value {
    json!({"apiVersion": "placement.kubernetes-fleet.io/v1beta1", "kind": "ClusterResourceEnvelope", "metadata": {"name": name}, "data": data})
}

fn carried(kind: EnvelopeKind, ns: Option<&str>, name: &str) -> Option<EnvelopeRef> {
    Some(EnvelopeRef {
        kind,
        name: name.into(),
        namespace: ns.map(str::to_string),
    })
}

#[test]
fn envelopes_are_replaced_by_their_contents_after_plain_objects_of_the_same_wave() {
    let env = resource_envelope(
        "app",
        "env",
        json!({"1": config_map("app", "a"), "2": deployment("app", "web"), "3": config_map("app", "z")}),
    );
    let selected = [
        namespace("app"),
        env,
        config_map("app", "plain"),
        cluster_envelope("cenv", json!({"r": cluster_role("r")})),
        deployment("app", "plain"),
    ];
    let got: Vec<(u32, String, Option<EnvelopeRef>)> = World::new()
        .render(&selected)
        .unwrap()
        .into_iter()
        .map(|m| {
            let v = &m.value;
            (
                m.wave,
                format!(
                    "{}/{}",
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["name"].as_str().unwrap()
                ),
                m.envelope,
            )
        })
        .collect();
    let in_env = carried(EnvelopeKind::ResourceEnvelope, Some("app"), "env");
    let in_cenv = carried(EnvelopeKind::ClusterResourceEnvelope, None, "cenv");
    let want = vec![
        (0, "Namespace/app".to_string(), None),
        (1, "ConfigMap/plain".to_string(), None),
        // Contents sorted by their JSON, descending: {"apiVersion":"v1","data":…,"metadata":{"name":"z"…
        (1, "ConfigMap/z".to_string(), in_env.clone()),
        (1, "ConfigMap/a".to_string(), in_env.clone()),
        (2, "ClusterRole/r".to_string(), in_cenv),
        (4, "Deployment/plain".to_string(), None),
        (4, "Deployment/web".to_string(), in_env),
    ];
    assert_eq!(got, want);
}

#[test]
fn overrides_apply_to_the_objects_an_envelope_carries() {
    let mut w = World::new();
    w.placement = PlacementRef {
        name: "ingress",
        namespace: Some("app"),
    };
    w.ros = vec![ro_with(
        "app",
        "ro",
        "  placement: {name: ingress, scope: Namespaced}\n",
        DEPLOY_WEB,
        "[{clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {env: canary}}}]}, jsonPatchOverrides: [{op: replace, path: /spec/replicas, value: 3}]}]",
    )];
    let selected = [resource_envelope(
        "app",
        "env",
        json!({"d": deployment("app", "web")}),
    )];
    let got = w.render(&selected).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(replicas_of(&got[0].value), 1);
    w.labels.insert("env".into(), "canary".into());
    let got = w.render(&selected).unwrap();
    assert_eq!(
        got,
        vec![Manifest {
            value: Arc::new({
                let mut d = deployment("app", "web");
                d["spec"]["replicas"] = json!(3);
                d
            }),
            wave: 4,
            envelope: carried(EnvelopeKind::ResourceEnvelope, Some("app"), "env"),
            work: None,
        }]
    );
}

#[test]
fn an_override_error_inside_an_envelope_names_the_envelope() {
    let mut w = World::new();
    w.cros = vec![cro_with(
        "cro",
        "",
        "[{group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: r}]",
        &format!(
            "[{{{ALL}, jsonPatchOverrides: [{{op: add, path: /rules/5/verbs/-, value: watch}}]}}]"
        ),
    )];
    let err = w
        .render(&[cluster_envelope("cenv", json!({"r": cluster_role("r")}))])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Failed to apply the override rules on the resources: ClusterResourceOverride cro rule 0 on ClusterRole/r (carried by ClusterResourceEnvelope cenv) for cluster member-1: jsonPatchOverrides[0] (add /rules/5/verbs/-) failed: the path does not exist in the resource (or an array index is out of range)"
    );
}

/// KubeFleet never applies overrides to an envelope itself (pkg/controllers/workgenerator/
/// controller.go processOneSelectedResource; pkg/utils/overrider/overrider.go collects override
/// candidates from an envelope's contents, never the envelope): a Delete that selects only the
/// envelope leaves it and its contents in place.
#[test]
fn an_override_selecting_only_the_envelope_is_not_applied() {
    let mut w = World::new();
    w.cros = vec![cro_with(
        "cro",
        "",
        "[{group: placement.kubernetes-fleet.io, version: v1beta1, kind: ClusterResourceEnvelope, name: cenv}]",
        &format!("[{{{ALL}, overrideType: Delete}}]"),
    )];
    let got = w.values(&[
        cluster_envelope("cenv", json!({"r": cluster_role("r")})),
        cluster_role("plain"),
    ]);
    assert_eq!(got, vec![cluster_role("plain"), cluster_role("r")]);
}

/// An override that makes an object invalid (here `metadata.annotations` a string) does not
/// deliver it: KubeFleet's Work, whose manifests are `x-kubernetes-embedded-resource`, is
/// refused by the hub (pkg/controllers/workgenerator/override_test.go patches
/// /metadata/annotations; config/crd/bases/placement.kubefleet.dev_works.yaml).
#[test]
fn an_override_that_makes_an_object_invalid_fails_rendering_for_that_cluster() {
    let mut w = World::new();
    w.ros = vec![ro_with(
        "app",
        "ro",
        "",
        DEPLOY_WEB,
        "[{clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {env: prod}}}]}, jsonPatchOverrides: [{op: add, path: /metadata/annotations, value: oops}]}]",
    )];
    let err = w.render(&[deployment("app", "web")]).unwrap_err();
    assert!(err.is_work_sync_failure());
    assert_eq!(
        err.to_string(),
        "Failed to synchronize the work to the latest: Deployment/app/web for cluster member-1 is not a valid Kubernetes object after the overrides ResourceOverride app/ro: metadata.annotations: must be a map of strings, got \"oops\""
    );
    // The same override inside an envelope names the envelope.
    let err = w
        .render(&[resource_envelope(
            "app",
            "env",
            json!({"d": deployment("app", "web")}),
        )])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Deployment/app/web (carried by ResourceEnvelope app/env)"),
        "{err}"
    );
    // A cluster the rule does not select gets the object unchanged.
    w.labels.insert("env".into(), "dev".into());
    assert_eq!(
        w.values(&[deployment("app", "web")]),
        vec![deployment("app", "web")]
    );
}

/// A ClusterResourceOverride without `spec.placement` that selects Namespace app applies to a
/// ResourcePlacement's objects in app; one bound to a ClusterResourcePlacement does not
/// (pkg/utils/overrider/overrider.go FetchAllMatchingOverridesForResourceSnapshot: only a
/// placement that names another key is skipped; a ResourcePlacement's key is namespace/name).
#[test]
fn a_cluster_override_without_placement_follows_resource_placements_in_its_namespace() {
    let mut w = World::new();
    w.placement = PlacementRef {
        name: "rp",
        namespace: Some("app"),
    };
    w.cros = vec![
        cro_with("unbound", "", NS_APP, &replicas(5)),
        cro_with("bound", "  placement: {name: rp}\n", NS_APP, &replicas(7)),
    ];
    let got = w.values(&[deployment("app", "web")]);
    assert_eq!(replicas_of(&got[0]), 5);
    // Another namespace's objects are not selected by it.
    let got = w.values(&[deployment("other", "web")]);
    assert_eq!(replicas_of(&got[0]), 1);
}

#[test]
fn envelope_scope_errors() {
    let cases = [
        (
            cluster_envelope("cenv", json!({"cm": config_map("app", "c")})),
            "invalid envelope ClusterResourceEnvelope cenv: data.cm: a namespaced object ConfigMap app/c has been wrapped in a cluster resource envelope; a ClusterResourceEnvelope may carry only cluster-scoped objects",
        ),
        (
            resource_envelope("app", "env", json!({"cr": cluster_role("r")})),
            "invalid envelope ResourceEnvelope app/env: data.cr: a cluster-scoped object ClusterRole r has been wrapped in a ResourceEnvelope; it may carry only namespaced objects of its own namespace",
        ),
        (
            resource_envelope("app", "env", json!({"cm": config_map("other", "c")})),
            "invalid envelope ResourceEnvelope app/env: data.cm.metadata.namespace: a namespaced object ConfigMap other/c has been wrapped in a ResourceEnvelope from another namespace (\"app\")",
        ),
        (
            resource_envelope("app", "env", json!({"w": widget("app", "w")})),
            "invalid envelope ResourceEnvelope app/env: data.w: the scope of kind Widget (group example.com) is unknown; add its CustomResourceDefinition to the repository",
        ),
    ];
    for (env, message) in cases {
        let err = World::new().render(&[env]).unwrap_err();
        assert!(matches!(err, RenderError::Envelope { .. }), "{err:?}");
        assert_eq!(err.to_string(), message);
    }
}

#[test]
fn a_crd_of_the_commit_makes_a_custom_kind_placeable_in_an_envelope() {
    let mut scopes = ScopeTable::builtin();
    scopes.add("example.com", "Widget", Scope::Namespaced);
    let labels = Labels::new();
    let got = render_for_cluster(
        &CRP,
        &[Arc::new(resource_envelope(
            "app",
            "env",
            json!({"w": widget("app", "w")}),
        ))],
        &OverrideSet::default(),
        &ClusterTarget {
            name: "m",
            labels: &labels,
        },
        &scopes,
    )
    .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(*got[0].value, widget("app", "w"));
    assert_eq!(got[0].wave, 999);
}

fn legacy_envelope(data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "legacy", "namespace": "app", "annotations": {ENVELOPE_CONFIGMAP_ANNOTATION: "true", LEGACY_ENVELOPE_OPT_IN_ANNOTATION: "true"}},
        "data": data,
    })
}

#[test]
fn a_legacy_configmap_envelope_is_unwrapped() {
    let docs = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: app}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: app}\nspec: {replicas: 1}\n---\n";
    let mut w = World::new();
    w.ros = vec![ro_with("app", "ro", "", DEPLOY_WEB, &replicas(4))];
    let got = w
        .render(&[
            legacy_envelope(json!({"manifests.yaml": docs})),
            config_map("app", "plain"),
        ])
        .unwrap();
    let by = carried(EnvelopeKind::ConfigMap, Some("app"), "legacy");
    assert_eq!(
        got,
        vec![
            Manifest {
                value: Arc::new(config_map("app", "plain")),
                wave: 1,
                envelope: None,
                work: None,
            },
            Manifest {
                value: Arc::new(
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one", "namespace": "app"}})
                ),
                wave: 1,
                envelope: by.clone(),
                work: None,
            },
            Manifest {
                value: Arc::new(
                    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "app"}, "spec": {"replicas": 4}})
                ),
                wave: 4,
                envelope: by,
                work: None,
            },
        ]
    );
    // A legacy envelope may carry only objects of its own namespace.
    let err = World::new()
        .render(&[legacy_envelope(
            json!({"x": "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n"}),
        )])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid envelope ConfigMap app/legacy: data.x: a cluster-scoped object Namespace app has been wrapped in an envelope ConfigMap; it may carry only namespaced objects of its own namespace"
    );
}

#[test]
fn a_configmap_without_the_annotation_is_placed_as_is() {
    let cm = config_map("app", "c");
    let got = World::new().render(std::slice::from_ref(&cm)).unwrap();
    assert_eq!(
        got,
        vec![Manifest {
            value: Arc::new(cm),
            wave: 1,
            envelope: None,
            work: None,
        }]
    );
}

#[test]
fn kubefleet_override_inside_envelope_example() {
    let Some(corpus) = crate::compat_corpus::corpus() else {
        return;
    };
    let path = corpus.join("kubefleet-examples/envelopes/override-inside-envelope.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> = crate::yaml::documents(&text).unwrap();
    let find = |kind: &str| docs.iter().find(|d| d["kind"] == kind).unwrap();
    let ro: ResourceOverride = decode(find("ResourceOverride")).unwrap();
    let cro: ClusterResourceOverride = decode(find("ClusterResourceOverride")).unwrap();
    let overrides = OverrideSet {
        cluster: vec![&cro],
        namespaced: vec![&ro],
    };
    let canary: Labels = [("env".to_string(), "canary".to_string())].into();
    let cluster = ClusterTarget {
        name: "c1",
        labels: &canary,
    };
    let scopes = ScopeTable::builtin();
    let rp = PlacementRef {
        name: "ingress",
        namespace: Some("app"),
    };
    let got = render_for_cluster(
        &rp,
        &[Arc::new(find("ResourceEnvelope").clone())],
        &overrides,
        &cluster,
        &scopes,
    )
    .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].value["spec"]["replicas"], 3);
    let crp = PlacementRef {
        name: "reader-role",
        namespace: None,
    };
    let got = render_for_cluster(
        &crp,
        &[Arc::new(find("ClusterResourceEnvelope").clone())],
        &overrides,
        &cluster,
        &scopes,
    )
    .unwrap();
    assert_eq!(
        got[0].value["rules"][0]["verbs"],
        json!(["get", "list", "watch"])
    );
    assert_eq!(
        got[0].envelope,
        carried(EnvelopeKind::ClusterResourceEnvelope, None, "reader-role")
    );
}

// ---------------------------------------------------------------------------------------------
// Errors about the selection itself

#[test]
fn the_same_object_twice_is_an_error() {
    let err = World::new()
        .render(&[
            config_map("app", "c"),
            resource_envelope("app", "env", json!({"c": config_map("app", "c")})),
        ])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ConfigMap/app/c would be applied twice to cluster member-1 (from the selected resources and from ResourceEnvelope app/env)"
    );
}

#[test]
fn a_selected_value_must_be_an_object() {
    let err = World::new()
        .render(&[
            namespace("a"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        ])
        .unwrap_err();
    assert_eq!(
        err,
        RenderError::InvalidResource {
            index: 1,
            reason: "it has no metadata.name".into()
        }
    );
}
