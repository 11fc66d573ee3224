//! Whether an applied object is available, per kind (as KubeFleet's work applier tracks it), read from the live
//! object after apply. Pure.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "reason")]
pub enum Availability {
    Available,
    /// Not yet, and why.
    NotYet(String),
    /// The kind has no availability rule (custom resources, Jobs, Ingresses, ...).
    NotTrackable,
}

const DATA_KINDS: &[&str] = &[
    "Namespace",
    "Secret",
    "ConfigMap",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ServiceAccount",
    "NetworkPolicy",
    "CSIDriver",
    "CSINode",
    "StorageClass",
    "CSIStorageCapacity",
    "ControllerRevision",
    "IngressClass",
    "LimitRange",
    "ResourceQuota",
    "PriorityClass",
];

fn int(v: &Value, path: &str) -> i64 {
    v.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

fn generation_current(obj: &Value) -> bool {
    int(obj, "/status/observedGeneration") == int(obj, "/metadata/generation")
}

fn condition_true(obj: &Value, ty: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == ty && c["status"].as_str() == Some("True"))
        })
}

fn verdict(ok: bool, why: &str) -> Availability {
    if ok {
        Availability::Available
    } else {
        Availability::NotYet(why.to_string())
    }
}

/// Why a Deployment or StatefulSet is not available: its replica counts, or a status that is
/// not of the current generation.
fn replicas_why(obj: &Value, replicas: i64) -> String {
    if !generation_current(obj) {
        return "status not of the current generation yet".into();
    }
    format!(
        "{}/{replicas} replicas available, {}/{replicas} updated",
        int(obj, "/status/availableReplicas"),
        int(obj, "/status/updatedReplicas")
    )
}

/// The availability of a live object of `group`/`kind`.
pub fn availability(group: &str, kind: &str, obj: &Value) -> Availability {
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    match (group, kind) {
        ("apps", "Deployment") => verdict(
            generation_current(obj)
                && int(obj, "/status/availableReplicas") == replicas
                && int(obj, "/status/updatedReplicas") == replicas
                && int(obj, "/status/unavailableReplicas") == 0,
            &replicas_why(obj, replicas),
        ),
        ("apps", "StatefulSet") => verdict(
            generation_current(obj)
                && int(obj, "/status/availableReplicas") == replicas
                && int(obj, "/status/currentReplicas") == int(obj, "/status/updatedReplicas")
                && obj.pointer("/status/currentRevision") == obj.pointer("/status/updateRevision"),
            &replicas_why(obj, replicas),
        ),
        ("apps", "DaemonSet") => verdict(
            generation_current(obj)
                && int(obj, "/status/numberAvailable")
                    == int(obj, "/status/desiredNumberScheduled")
                && int(obj, "/status/currentNumberScheduled")
                    == int(obj, "/status/updatedNumberScheduled"),
            "daemon pods not all updated and available",
        ),
        ("", "Service") => {
            let ty = obj
                .pointer("/spec/type")
                .and_then(Value::as_str)
                .unwrap_or("");
            match ty {
                "ExternalName" => Availability::NotTrackable,
                "LoadBalancer" => {
                    let ingress = obj.pointer("/status/loadBalancer/ingress/0");
                    verdict(
                        ingress.is_some_and(|i| {
                            i.get("ip").is_some_and(|v| v != "")
                                || i.get("hostname").is_some_and(|v| v != "")
                        }),
                        "load balancer has no ingress yet",
                    )
                }
                _ => verdict(
                    obj.pointer("/spec/clusterIPs/0")
                        .and_then(Value::as_str)
                        .is_some_and(|ip| !ip.is_empty()),
                    "no cluster IP yet",
                ),
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => verdict(
            condition_true(obj, "Established") && condition_true(obj, "NamesAccepted"),
            "not established",
        ),
        ("policy", "PodDisruptionBudget") => {
            verdict(generation_current(obj), "status not up to date")
        }
        (_, k) if DATA_KINDS.contains(&k) && is_builtin(group) => Availability::Available,
        _ => Availability::NotTrackable,
    }
}

fn is_builtin(group: &str) -> bool {
    matches!(
        group,
        "" | "rbac.authorization.k8s.io"
            | "networking.k8s.io"
            | "storage.k8s.io"
            | "apps"
            | "scheduling.k8s.io"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_follow_kubefleet() {
        let ready = json!({"metadata": {"generation": 2}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "availableReplicas": 2, "updatedReplicas": 2}});
        assert_eq!(
            availability("apps", "Deployment", &ready),
            Availability::Available
        );
        let stale = json!({"metadata": {"generation": 3}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "availableReplicas": 2, "updatedReplicas": 2}});
        assert!(matches!(
            availability("apps", "Deployment", &stale),
            Availability::NotYet(_)
        ));
        let svc = json!({"spec": {"clusterIPs": ["10.0.0.1"]}});
        assert_eq!(availability("", "Service", &svc), Availability::Available);
        let ext = json!({"spec": {"type": "ExternalName"}});
        assert_eq!(
            availability("", "Service", &ext),
            Availability::NotTrackable
        );
        assert_eq!(
            availability("", "ConfigMap", &json!({})),
            Availability::Available
        );
        assert_eq!(
            availability("batch", "Job", &json!({})),
            Availability::NotTrackable
        );
        assert_eq!(
            availability("example.com", "ConfigMap", &json!({})),
            Availability::NotTrackable
        );
        let crd = json!({"status": {"conditions": [
            {"type": "Established", "status": "True"}, {"type": "NamesAccepted", "status": "True"}]}});
        assert_eq!(
            availability("apiextensions.k8s.io", "CustomResourceDefinition", &crd),
            Availability::Available
        );
    }
}
