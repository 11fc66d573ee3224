//! Which fields of a built-in object the API server knows. A real server decodes built-ins
//! into their Go types, so a field the type lacks (a typo such as `spec.replica`) is an error
//! for server-side apply and for `fieldValidation=Strict`, and is dropped otherwise.
//!
//! The simulator borrows the types from k8s-openapi (already a dependency; its `v1_33`
//! feature matches the version members report): an object is decoded into its type and
//! encoded back, and every non-null input field missing from the result is unknown. A body
//! the type cannot decode at all (a wrong value type, say) is left to the rest of the request
//! path, so this never refuses what it cannot judge. Custom resources have no schema here.

use serde_json::Value;

use super::status::ApiError;

/// One step of a path into an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Field(String),
    Index(usize, Option<String>),
}

pub type FieldPath = Vec<Step>;

/// The fields of `obj` (of `group/version, kind`) its type does not have; empty when they are
/// all known, or when the kind or the body cannot be judged.
pub fn unknown_fields(group: &str, version: &str, kind: &str, obj: &Value) -> Vec<FieldPath> {
    let Some(known) = round_trip(group, version, kind, obj) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    diff(obj, &known, &mut Vec::new(), &mut out);
    // In path order, so that messages do not depend on the order of the body's keys.
    out.sort_by_key(|p| indexed(p));
    out
}

/// Removes `paths` from `obj` (what decoding into the type does to unknown fields).
pub fn remove(obj: &mut Value, paths: &[FieldPath]) {
    for p in paths {
        remove_one(obj, p);
    }
}

fn remove_one(obj: &mut Value, path: &[Step]) {
    match path {
        [] => {}
        [Step::Field(f)] => {
            if let Some(m) = obj.as_object_mut() {
                m.remove(f);
            }
        }
        [Step::Field(f), rest @ ..] => {
            if let Some(v) = obj.get_mut(f) {
                remove_one(v, rest);
            }
        }
        [Step::Index(i, _), rest @ ..] => {
            if let Some(v) = obj.get_mut(*i) {
                remove_one(v, rest);
            }
        }
    }
}

/// Server-side apply's error (a plain error in the API server, so 500 with no reason):
/// `failed to create typed patch object (ns/name; group/version, Kind=K): .spec.x: field not
/// declared in schema`.
pub fn apply_error(
    group: &str,
    version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    paths: &[FieldPath],
) -> ApiError {
    let problems: Vec<String> = paths
        .iter()
        .map(|p| format!("{}: field not declared in schema", keyed(p)))
        .collect();
    let detail = match problems.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    ApiError::unknown_internal(format!(
        "failed to create typed patch object ({namespace}/{name}; {group}/{version}, Kind={kind}): {detail}"
    ))
}

/// `fieldValidation=Strict`'s error on create and replace (400): `Deployment in version "v1"
/// cannot be handled as a Deployment: strict decoding error: unknown field "spec.x"`.
pub fn strict_error(version: &str, kind: &str, paths: &[FieldPath]) -> ApiError {
    let fields: Vec<String> = paths
        .iter()
        .map(|p| format!("unknown field \"{}\"", indexed(p)))
        .collect();
    ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        fields.join(", ")
    ))
}

/// `.spec.containers[name="web"].imagePullPolicyy` (structured-merge-diff's form: list items
/// by their `name` key when they have one).
fn keyed(p: &[Step]) -> String {
    p.iter()
        .map(|s| match s {
            Step::Field(f) => format!(".{f}"),
            Step::Index(_, Some(name)) => format!("[name=\"{name}\"]"),
            Step::Index(i, None) => format!("[{i}]"),
        })
        .collect()
}

/// `spec.containers[0].imagePullPolicyy` (the strict decoder's form).
fn indexed(p: &[Step]) -> String {
    let mut out = String::new();
    for s in p {
        match s {
            Step::Field(f) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(f);
            }
            Step::Index(i, _) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

fn diff(input: &Value, known: &Value, path: &mut FieldPath, out: &mut Vec<FieldPath>) {
    match (input, known) {
        (Value::Object(i), Value::Object(k)) => {
            for (key, v) in i {
                if v.is_null() {
                    continue;
                }
                path.push(Step::Field(key.clone()));
                match k.get(key) {
                    Some(kv) => diff(v, kv, path, out),
                    None => out.push(path.clone()),
                }
                path.pop();
            }
        }
        (Value::Array(i), Value::Array(k)) if i.len() == k.len() => {
            for (n, (v, kv)) in i.iter().zip(k).enumerate() {
                let name = v.get("name").and_then(Value::as_str).map(String::from);
                path.push(Step::Index(n, name));
                diff(v, kv, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn round_trip(group: &str, version: &str, kind: &str, obj: &Value) -> Option<Value> {
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, apps::v1 as apps, autoscaling::v1 as as1,
        autoscaling::v2 as as2, batch::v1 as batch, coordination::v1 as coordination,
        core::v1 as core, discovery::v1 as discovery, networking::v1 as networking,
        node::v1 as node, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
        storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;

    fn rt<T: serde::de::DeserializeOwned + serde::Serialize>(obj: &Value) -> Option<Value> {
        let typed: T = serde_json::from_value(obj.clone()).ok()?;
        serde_json::to_value(typed).ok()
    }
    match (group, version, kind) {
        ("", "v1", "ConfigMap") => rt::<core::ConfigMap>(obj),
        ("", "v1", "Endpoints") => rt::<core::Endpoints>(obj),
        ("", "v1", "Event") => rt::<core::Event>(obj),
        ("", "v1", "LimitRange") => rt::<core::LimitRange>(obj),
        ("", "v1", "Namespace") => rt::<core::Namespace>(obj),
        ("", "v1", "Node") => rt::<core::Node>(obj),
        ("", "v1", "PersistentVolumeClaim") => rt::<core::PersistentVolumeClaim>(obj),
        ("", "v1", "PersistentVolume") => rt::<core::PersistentVolume>(obj),
        ("", "v1", "Pod") => rt::<core::Pod>(obj),
        ("", "v1", "PodTemplate") => rt::<core::PodTemplate>(obj),
        ("", "v1", "ReplicationController") => rt::<core::ReplicationController>(obj),
        ("", "v1", "ResourceQuota") => rt::<core::ResourceQuota>(obj),
        ("", "v1", "Secret") => rt::<core::Secret>(obj),
        ("", "v1", "ServiceAccount") => rt::<core::ServiceAccount>(obj),
        ("", "v1", "Service") => rt::<core::Service>(obj),
        ("apps", "v1", "ControllerRevision") => rt::<apps::ControllerRevision>(obj),
        ("apps", "v1", "DaemonSet") => rt::<apps::DaemonSet>(obj),
        ("apps", "v1", "Deployment") => rt::<apps::Deployment>(obj),
        ("apps", "v1", "ReplicaSet") => rt::<apps::ReplicaSet>(obj),
        ("apps", "v1", "StatefulSet") => rt::<apps::StatefulSet>(obj),
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => rt::<as2::HorizontalPodAutoscaler>(obj),
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => rt::<as1::HorizontalPodAutoscaler>(obj),
        ("batch", "v1", "CronJob") => rt::<batch::CronJob>(obj),
        ("batch", "v1", "Job") => rt::<batch::Job>(obj),
        ("networking.k8s.io", "v1", "IngressClass") => rt::<networking::IngressClass>(obj),
        ("networking.k8s.io", "v1", "Ingress") => rt::<networking::Ingress>(obj),
        ("networking.k8s.io", "v1", "NetworkPolicy") => rt::<networking::NetworkPolicy>(obj),
        ("policy", "v1", "PodDisruptionBudget") => rt::<policy::PodDisruptionBudget>(obj),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => {
            rt::<rbac::ClusterRoleBinding>(obj)
        }
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => rt::<rbac::ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => rt::<rbac::RoleBinding>(obj),
        ("rbac.authorization.k8s.io", "v1", "Role") => rt::<rbac::Role>(obj),
        ("storage.k8s.io", "v1", "StorageClass") => rt::<storage::StorageClass>(obj),
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration") => {
            rt::<admission::MutatingWebhookConfiguration>(obj)
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration") => {
            rt::<admission::ValidatingWebhookConfiguration>(obj)
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy") => {
            rt::<admission::ValidatingAdmissionPolicy>(obj)
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding") => {
            rt::<admission::ValidatingAdmissionPolicyBinding>(obj)
        }
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => {
            rt::<apiextensions::CustomResourceDefinition>(obj)
        }
        ("scheduling.k8s.io", "v1", "PriorityClass") => rt::<scheduling::PriorityClass>(obj),
        ("coordination.k8s.io", "v1", "Lease") => rt::<coordination::Lease>(obj),
        ("node.k8s.io", "v1", "RuntimeClass") => rt::<node::RuntimeClass>(obj),
        ("discovery.k8s.io", "v1", "EndpointSlice") => rt::<discovery::EndpointSlice>(obj),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(container: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default", "creationTimestamp": null},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [container]}}},
            "status": {}})
    }

    #[test]
    fn known_fields_pass_and_unknown_ones_are_found() {
        let ok = deployment(json!({"name": "web", "image": "nginx",
            "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80}]}));
        assert!(unknown_fields("apps", "v1", "Deployment", &ok).is_empty());
        let mut bad =
            deployment(json!({"name": "web", "image": "nginx", "imagePullPolicyy": "Always"}));
        bad["spec"]["replica"] = json!(2);
        let unknown = unknown_fields("apps", "v1", "Deployment", &bad);
        assert_eq!(unknown.len(), 2, "{unknown:?}");
        let e = apply_error("apps", "v1", "Deployment", "default", "d", &unknown);
        assert_eq!((e.code, e.reason), (500, ""));
        assert_eq!(
            e.message,
            "failed to create typed patch object (default/d; apps/v1, Kind=Deployment): errors:\n  .spec.replica: field not declared in schema\n  .spec.template.spec.containers[name=\"web\"].imagePullPolicyy: field not declared in schema"
        );
        let e = strict_error("v1", "Deployment", &unknown);
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.replica\", unknown field \"spec.template.spec.containers[0].imagePullPolicyy\""
        );
        remove(&mut bad, &unknown);
        assert!(unknown_fields("apps", "v1", "Deployment", &bad).is_empty());
        assert_eq!(bad["spec"]["replicas"], 1);
    }

    #[test]
    fn what_cannot_be_judged_is_let_through() {
        // A custom kind, and a body its type cannot decode (a string for an integer).
        let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spek": {}});
        assert!(unknown_fields("example.com", "v1", "Widget", &cr).is_empty());
        let mut odd = deployment(json!({"name": "web"}));
        odd["spec"]["replicas"] = json!("three");
        odd["spec"]["replica"] = json!(2);
        assert!(unknown_fields("apps", "v1", "Deployment", &odd).is_empty());
    }
}
