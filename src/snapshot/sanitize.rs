//! The stripping KubeFleet applies to a hub object before it enters a resource snapshot.

use crate::model::Gvk;
use serde_json::{Map, Value};
use std::sync::Arc;

const METADATA_FIELDS: &[&str] = &[
    "resourceVersion",
    "generation",
    "uid",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "creationTimestamp",
    "ownerReferences",
];

const DROPPED_ANNOTATIONS: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
];

const JOB_CONTROLLER_LABELS: &[&str] = &["controller-uid", "batch.kubernetes.io/controller-uid"];

/// [`sanitize`] for a shared value: the same value when there was nothing to remove (most
/// objects of a repository), so a selection holds no copy of the catalog.
pub fn sanitize_shared(gvk: &Gvk, value: &Arc<Value>) -> Arc<Value> {
    if nothing_to_remove(gvk, value) {
        return value.clone();
    }
    let v = sanitize(gvk, value);
    if v == **value {
        value.clone()
    } else {
        Arc::new(v)
    }
}

/// Whether [`sanitize`] would return `value` as it is, known without copying it (a commit's
/// selection reads every selected object). Services and Jobs have rules of their own: not
/// known here.
fn nothing_to_remove(gvk: &Gvk, value: &Value) -> bool {
    if matches!(
        (gvk.group.as_str(), gvk.kind.as_str()),
        ("", "Service") | ("batch", "Job")
    ) {
        return false;
    }
    let Some(obj) = value.as_object() else {
        return true;
    };
    if obj.contains_key("status") {
        return false;
    }
    let Some(meta) = obj.get("metadata").and_then(Value::as_object) else {
        return true;
    };
    if METADATA_FIELDS.iter().any(|f| meta.contains_key(*f)) {
        return false;
    }
    match meta.get("annotations").and_then(Value::as_object) {
        Some(ann) => !ann.is_empty() && !DROPPED_ANNOTATIONS.iter().any(|a| ann.contains_key(*a)),
        None => true,
    }
}

pub fn sanitize(gvk: &Gvk, value: &Value) -> Value {
    let mut v = value.clone();
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    obj.remove("status");
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in METADATA_FIELDS {
            meta.remove(*f);
        }
        if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            for a in DROPPED_ANNOTATIONS {
                ann.remove(*a);
            }
            if ann.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    match (gvk.group.as_str(), gvk.kind.as_str()) {
        ("", "Service") => sanitize_service(obj),
        ("batch", "Job") => sanitize_job(obj),
        _ => {}
    }
    v
}

fn sanitize_service(obj: &mut Map<String, Value>) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    spec.remove("healthCheckNodePort");
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.remove("nodePort");
        }
    }
}

fn sanitize_job(obj: &mut Map<String, Value>) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    for ptr in ["/selector/matchLabels", "/template/metadata/labels"] {
        if let Some(labels) = pointer_object(spec, ptr) {
            for l in JOB_CONTROLLER_LABELS {
                labels.remove(*l);
            }
        }
    }
    if let Some(meta) = pointer_object(spec, "/template/metadata") {
        meta.remove("creationTimestamp");
    }
}

fn pointer_object<'a>(
    map: &'a mut Map<String, Value>,
    ptr: &str,
) -> Option<&'a mut Map<String, Value>> {
    let mut parts = ptr.trim_start_matches('/').split('/');
    let first = parts.next()?;
    let mut cur = map.get_mut(first)?;
    for p in parts {
        cur = cur.get_mut(p)?;
    }
    cur.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_with_nothing_to_remove_is_shared_not_copied() {
        let gvk = Gvk::new("", "v1", "ConfigMap");
        let clean = Arc::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a"}, "data": {"k": "v"}}));
        assert!(Arc::ptr_eq(&sanitize_shared(&gvk, &clean), &clean));
        let served = Arc::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "uid": "u"}, "data": {"k": "v"}}));
        let got = sanitize_shared(&gvk, &served);
        assert!(!Arc::ptr_eq(&got, &served));
        assert_eq!(*got, *clean);
    }

    /// The shortcut agrees with the whole sanitising on values with and without something to
    /// remove, of every kind it has rules for.
    #[test]
    fn the_shared_value_is_the_sanitised_value() {
        let values = [
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
            json!({"metadata": {"name": "a", "annotations": {}}}),
            json!({"metadata": {"name": "a", "annotations": {"keep": "x"}}}),
            json!({"metadata": {"name": "a", "annotations": {"deployment.kubernetes.io/revision": "2"}}}),
            json!({"metadata": {"name": "a", "managedFields": []}}),
            json!({"metadata": {"name": "a"}, "status": {}}),
            json!({"metadata": "not a map"}),
            json!({"metadata": {"name": "a"}, "spec": {"clusterIP": "10.0.0.1", "ports": [{"nodePort": 30000}]}}),
            json!({"metadata": {"name": "a"}, "spec": {"template": {"metadata": {"creationTimestamp": null}}}}),
            json!("scalar"),
        ];
        let kinds = [
            Gvk::new("", "v1", "ConfigMap"),
            Gvk::new("", "v1", "Service"),
            Gvk::new("batch", "v1", "Job"),
        ];
        for gvk in &kinds {
            for v in &values {
                let shared = Arc::new(v.clone());
                let got = sanitize_shared(gvk, &shared);
                let want = sanitize(gvk, v);
                assert_eq!(*got, want, "{gvk:?} {v}");
                assert_eq!(Arc::ptr_eq(&got, &shared), want == *v, "{gvk:?} {v}");
            }
        }
    }

    #[test]
    fn strips_server_fields_and_tool_annotations() {
        let v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "1", "creationTimestamp": null,
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "x"}},
            "data": {"k": "v"}, "status": {}});
        let got = sanitize(&Gvk::new("", "v1", "ConfigMap"), &v);
        assert_eq!(
            got,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"keep": "x"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn services_lose_allocated_ips_and_ports() {
        let v = json!({"kind": "Service", "metadata": {"name": "s"}, "spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"],
            "healthCheckNodePort": 3, "ports": [{"port": 80, "nodePort": 30000}]}});
        let got = sanitize(&Gvk::new("", "v1", "Service"), &v);
        assert_eq!(got["spec"], json!({"ports": [{"port": 80}]}));
        let headless =
            json!({"kind": "Service", "metadata": {"name": "s"}, "spec": {"clusterIP": "None"}});
        assert_eq!(
            sanitize(&Gvk::new("", "v1", "Service"), &headless)["spec"]["clusterIP"],
            "None"
        );
    }

    #[test]
    fn jobs_lose_controller_uids_unless_manual() {
        let v = json!({"kind": "Job", "metadata": {"name": "j"}, "spec": {
            "selector": {"matchLabels": {"controller-uid": "x", "app": "a"}},
            "template": {"metadata": {"creationTimestamp": null, "labels": {"batch.kubernetes.io/controller-uid": "x", "app": "a"}}}}});
        let got = sanitize(&Gvk::new("batch", "v1", "Job"), &v);
        assert_eq!(got["spec"]["selector"]["matchLabels"], json!({"app": "a"}));
        assert_eq!(
            got["spec"]["template"]["metadata"],
            json!({"labels": {"app": "a"}})
        );
        let mut manual = v.clone();
        manual["spec"]["manualSelector"] = json!(true);
        assert_eq!(
            sanitize(&Gvk::new("batch", "v1", "Job"), &manual)["spec"]["selector"]["matchLabels"]
                ["controller-uid"],
            "x"
        );
    }
}
