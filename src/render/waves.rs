//! Apply waves (KubeFleet's work applier, §4.2): the order in which a member applies the
//! manifests of one Work. Namespaces first, then what other objects need (quotas, accounts,
//! configuration, CRDs), RBAC, workloads, and the webhooks and API services last; anything else
//! (custom resources, unknown groups) after all of them.

/// The wave of kinds the table does not name: custom resources and unknown groups.
pub const LAST_WAVE: u32 = 999;

/// `(wave, group, kinds)`; the core group is `""`.
const WAVES: &[(u32, &str, &[&str])] = &[
    (0, "", &["Namespace"]),
    (0, "scheduling.k8s.io", &["PriorityClass"]),
    (1, "networking.k8s.io", &["NetworkPolicy", "IngressClass"]),
    (
        1,
        "",
        &[
            "ResourceQuota",
            "LimitRange",
            "ServiceAccount",
            "Secret",
            "ConfigMap",
            "PersistentVolume",
            "PersistentVolumeClaim",
        ],
    ),
    (1, "policy", &["PodSecurityPolicy", "PodDisruptionBudget"]),
    (1, "storage.k8s.io", &["StorageClass"]),
    (1, "apiextensions.k8s.io", &["CustomResourceDefinition"]),
    (2, "rbac.authorization.k8s.io", &["ClusterRole", "Role"]),
    (
        3,
        "rbac.authorization.k8s.io",
        &["ClusterRoleBinding", "RoleBinding"],
    ),
    (4, "", &["Service", "Pod", "ReplicationController"]),
    (
        4,
        "apps",
        &["DaemonSet", "ReplicaSet", "Deployment", "StatefulSet"],
    ),
    (4, "autoscaling", &["HorizontalPodAutoscaler"]),
    (4, "batch", &["Job", "CronJob"]),
    (4, "networking.k8s.io", &["Ingress"]),
    (5, "apiregistration.k8s.io", &["APIService"]),
    (
        5,
        "admissionregistration.k8s.io",
        &[
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ],
    ),
];

/// The apply wave of a kind: 0 to 5 for the kinds KubeFleet orders, [`LAST_WAVE`] for the rest.
/// The group matters: a custom `Service` kind in another group is applied last.
pub fn wave_of(group: &str, kind: &str) -> u32 {
    WAVES
        .iter()
        .find(|(_, g, kinds)| *g == group && kinds.contains(&kind))
        .map_or(LAST_WAVE, |(wave, _, _)| *wave)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waves_follow_kubefleet() {
        let cases = [
            ("", "Namespace", 0),
            ("scheduling.k8s.io", "PriorityClass", 0),
            ("networking.k8s.io", "NetworkPolicy", 1),
            ("", "ResourceQuota", 1),
            ("", "LimitRange", 1),
            ("policy", "PodSecurityPolicy", 1),
            ("policy", "PodDisruptionBudget", 1),
            ("", "ServiceAccount", 1),
            ("", "Secret", 1),
            ("", "ConfigMap", 1),
            ("storage.k8s.io", "StorageClass", 1),
            ("", "PersistentVolume", 1),
            ("", "PersistentVolumeClaim", 1),
            ("apiextensions.k8s.io", "CustomResourceDefinition", 1),
            ("networking.k8s.io", "IngressClass", 1),
            ("rbac.authorization.k8s.io", "ClusterRole", 2),
            ("rbac.authorization.k8s.io", "Role", 2),
            ("rbac.authorization.k8s.io", "ClusterRoleBinding", 3),
            ("rbac.authorization.k8s.io", "RoleBinding", 3),
            ("", "Service", 4),
            ("apps", "DaemonSet", 4),
            ("", "Pod", 4),
            ("", "ReplicationController", 4),
            ("apps", "ReplicaSet", 4),
            ("apps", "Deployment", 4),
            ("autoscaling", "HorizontalPodAutoscaler", 4),
            ("apps", "StatefulSet", 4),
            ("batch", "Job", 4),
            ("batch", "CronJob", 4),
            ("networking.k8s.io", "Ingress", 4),
            ("apiregistration.k8s.io", "APIService", 5),
            (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
                5,
            ),
            (
                "admissionregistration.k8s.io",
                "MutatingWebhookConfiguration",
                5,
            ),
            ("example.com", "Widget", 999),
            ("example.com", "Service", 999),
            ("", "Deployment", 999),
            ("coordination.k8s.io", "Lease", 999),
        ];
        for (group, kind, want) in cases {
            assert_eq!(wave_of(group, kind), want, "{group}/{kind}");
        }
    }
}
