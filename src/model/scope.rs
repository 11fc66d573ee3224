//! Whether a kind is namespaced: a built-in table of Kubernetes and fleet kinds, extended by the
//! CustomResourceDefinitions a commit carries.

use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Cluster,
    Namespaced,
}

/// `(group, kind)` → scope. Versions do not change a kind's scope.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeTable {
    kinds: HashMap<(String, String), Scope>,
}

const CLUSTER: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("policy", "PodSecurityPolicy"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("placement.kubernetes-fleet.io", "ClusterResourcePlacement"),
    ("placement.kubernetes-fleet.io", "ClusterResourceOverride"),
    ("placement.kubernetes-fleet.io", "ClusterResourceEnvelope"),
    (
        "placement.kubernetes-fleet.io",
        "ClusterStagedUpdateStrategy",
    ),
    ("placement.kubernetes-fleet.io", "ClusterStagedUpdateRun"),
    ("placement.kubernetes-fleet.io", "ClusterApprovalRequest"),
    (
        "placement.kubernetes-fleet.io",
        "ClusterResourcePlacementEviction",
    ),
    (
        "placement.kubernetes-fleet.io",
        "ClusterResourcePlacementDisruptionBudget",
    ),
    ("placement.kubernetes-fleet.io", "ClusterResourceSnapshot"),
    (
        "placement.kubernetes-fleet.io",
        "ClusterSchedulingPolicySnapshot",
    ),
    ("placement.kubernetes-fleet.io", "ClusterResourceBinding"),
    ("placement.kubernetes-fleet.io", "AppliedWork"),
    ("cluster.kubernetes-fleet.io", "MemberCluster"),
    ("cluster.open-cluster-management.io", "ManagedCluster"),
    ("cluster.open-cluster-management.io", "ManagedClusterSet"),
];

const NAMESPACED: &[(&str, &str)] = &[
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("", "Pod"),
    ("", "PodTemplate"),
    ("", "Endpoints"),
    ("", "Event"),
    ("", "LimitRange"),
    ("", "ResourceQuota"),
    ("", "PersistentVolumeClaim"),
    ("", "ReplicationController"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("apps", "ControllerRevision"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("policy", "PodDisruptionBudget"),
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("coordination.k8s.io", "Lease"),
    ("events.k8s.io", "Event"),
    ("storage.k8s.io", "CSIStorageCapacity"),
    ("resource.k8s.io", "ResourceClaim"),
    ("resource.k8s.io", "ResourceClaimTemplate"),
    ("placement.kubernetes-fleet.io", "ResourcePlacement"),
    ("placement.kubernetes-fleet.io", "ResourceOverride"),
    ("placement.kubernetes-fleet.io", "ResourceEnvelope"),
    ("placement.kubernetes-fleet.io", "StagedUpdateStrategy"),
    ("placement.kubernetes-fleet.io", "StagedUpdateRun"),
    ("placement.kubernetes-fleet.io", "ApprovalRequest"),
    ("placement.kubernetes-fleet.io", "ResourceSnapshot"),
    ("placement.kubernetes-fleet.io", "SchedulingPolicySnapshot"),
    ("placement.kubernetes-fleet.io", "ResourceBinding"),
    ("placement.kubernetes-fleet.io", "Work"),
    (
        "placement.kubernetes-fleet.io",
        "ClusterResourcePlacementStatus",
    ),
    ("cluster.open-cluster-management.io", "Placement"),
    ("cluster.open-cluster-management.io", "PlacementDecision"),
    (
        "cluster.open-cluster-management.io",
        "ManagedClusterSetBinding",
    ),
    ("cluster.open-cluster-management.io", "AddOnPlacementScore"),
    ("work.open-cluster-management.io", "ManifestWorkReplicaSet"),
    ("work.open-cluster-management.io", "ManifestWork"),
];

impl Default for ScopeTable {
    fn default() -> Self {
        Self::builtin()
    }
}

impl ScopeTable {
    pub fn builtin() -> Self {
        let mut kinds = HashMap::new();
        for (g, k) in CLUSTER {
            kinds.insert((g.to_string(), k.to_string()), Scope::Cluster);
        }
        for (g, k) in NAMESPACED {
            kinds.insert((g.to_string(), k.to_string()), Scope::Namespaced);
        }
        Self { kinds }
    }

    /// Adds the kind a CRD defines (`spec.group`, `spec.names.kind`, `spec.scope`).
    pub fn add(&mut self, group: &str, kind: &str, scope: Scope) {
        self.kinds.insert((group.into(), kind.into()), scope);
    }

    pub fn scope(&self, group: &str, kind: &str) -> Option<Scope> {
        self.kinds
            .get(&(group.to_string(), kind.to_string()))
            .copied()
    }

    /// The kinds of `group` this table knows, for a "did you mean" on a misspelled kind.
    pub fn kinds_of<'a>(&'a self, group: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.kinds
            .keys()
            .filter(move |(g, _)| g == group)
            .map(|(_, k)| k.as_str())
    }

    pub fn is_namespaced(&self, group: &str, kind: &str) -> Option<bool> {
        self.scope(group, kind).map(|s| s == Scope::Namespaced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_and_crd_kinds() {
        let mut t = ScopeTable::builtin();
        assert_eq!(t.scope("", "Namespace"), Some(Scope::Cluster));
        assert_eq!(t.scope("apps", "Deployment"), Some(Scope::Namespaced));
        assert_eq!(t.scope("example.com", "Widget"), None);
        t.add("example.com", "Widget", Scope::Namespaced);
        assert_eq!(t.is_namespaced("example.com", "Widget"), Some(true));
    }
}
