//! Which resources a member serves: a table of built-in Kubernetes resources plus those that the
//! CustomResourceDefinitions applied to the member add. Discovery, routing and the store all
//! look resources up here. It knows nothing of HTTP.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// One resource (a plural name in one group and version).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// `status`, `scale`, `finalize`.
    pub subresources: Vec<String>,
    /// Whether writes maintain `metadata.generation`.
    pub generation: bool,
    /// Whether DELETE answers with the object rather than a `Status`.
    pub returns_deleted_object: bool,
    /// Defined by a CustomResourceDefinition (its name), not built in.
    pub crd: Option<String>,
    /// CRD `additionalPrinterColumns` for this version.
    pub printer_columns: Vec<PrinterColumn>,
    /// A review (SelfSubjectAccessReview): create only, answered and never stored.
    pub review: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub json_path: String,
    pub priority: i64,
    pub description: String,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        api_version(&self.group, &self.version)
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s == "status")
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        if self.review {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }

    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }
}

pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Splits `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    namespaced: bool,
    sub: &'static [&'static str],
    all: bool,
    generation: bool,
    returns_object: bool,
    review: bool,
}

const fn b(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    namespaced: bool,
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        short,
        namespaced,
        sub: &[],
        all: false,
        generation: false,
        returns_object: false,
        review: false,
    }
}

impl Builtin {
    const fn sub(mut self, sub: &'static [&'static str]) -> Self {
        self.sub = sub;
        self
    }
    const fn all(mut self) -> Self {
        self.all = true;
        self
    }
    const fn gen(mut self) -> Self {
        self.generation = true;
        self
    }
    const fn returns_object(mut self) -> Self {
        self.returns_object = true;
        self
    }
    const fn review(mut self) -> Self {
        self.review = true;
        self
    }
}

const ST: &[&str] = &["status"];
const ST_SCALE: &[&str] = &["scale", "status"];

/// The built-in resources, in the order discovery lists their groups.
const BUILTINS: &[Builtin] = &[
    b("", "v1", "ConfigMap", "configmaps", &["cm"], true),
    b("", "v1", "Endpoints", "endpoints", &["ep"], true),
    b("", "v1", "Event", "events", &["ev"], true),
    b("", "v1", "LimitRange", "limitranges", &["limits"], true),
    b("", "v1", "Namespace", "namespaces", &["ns"], false)
        .sub(&["finalize", "status"])
        .returns_object(),
    b("", "v1", "Node", "nodes", &["no"], false)
        .sub(ST)
        .returns_object(),
    b(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        &["pvc"],
        true,
    )
    .sub(ST)
    .returns_object(),
    b(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        &["pv"],
        false,
    )
    .sub(ST)
    .returns_object(),
    b("", "v1", "Pod", "pods", &["po"], true)
        .sub(&["eviction", "log", "status"])
        .all()
        .returns_object(),
    b("", "v1", "PodTemplate", "podtemplates", &[], true).returns_object(),
    b(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        &["rc"],
        true,
    )
    .sub(ST_SCALE)
    .all()
    .gen()
    .returns_object(),
    b(
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        &["quota"],
        true,
    )
    .sub(ST),
    b("", "v1", "Secret", "secrets", &[], true),
    b("", "v1", "ServiceAccount", "serviceaccounts", &["sa"], true)
        .sub(&["token"])
        .returns_object(),
    b("", "v1", "Service", "services", &["svc"], true)
        .sub(ST)
        .all()
        .returns_object(),
    b(
        "apps",
        "v1",
        "ControllerRevision",
        "controllerrevisions",
        &[],
        true,
    ),
    b("apps", "v1", "DaemonSet", "daemonsets", &["ds"], true)
        .sub(ST)
        .all()
        .gen()
        .returns_object(),
    // DELETE answers a Status for Deployments, the object for ServiceAccounts and CRDs, as
    // kube-apiserver v1.37 does (tests/sim_differential.rs).
    b("apps", "v1", "Deployment", "deployments", &["deploy"], true)
        .sub(ST_SCALE)
        .all()
        .gen(),
    b("apps", "v1", "ReplicaSet", "replicasets", &["rs"], true)
        .sub(ST_SCALE)
        .all()
        .gen()
        .returns_object(),
    b("apps", "v1", "StatefulSet", "statefulsets", &["sts"], true)
        .sub(ST_SCALE)
        .all()
        .gen()
        .returns_object(),
    b(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        &["hpa"],
        true,
    )
    .sub(ST)
    .all(),
    b(
        "autoscaling",
        "v1",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        &["hpa"],
        true,
    )
    .sub(ST)
    .all(),
    b("batch", "v1", "CronJob", "cronjobs", &["cj"], true)
        .sub(ST)
        .all()
        .gen(),
    b("batch", "v1", "Job", "jobs", &[], true)
        .sub(ST)
        .all()
        .gen(),
    b(
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        &[],
        false,
    ),
    b(
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        &["ing"],
        true,
    )
    .sub(ST)
    .gen(),
    b(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        &["netpol"],
        true,
    )
    .gen(),
    b(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        &["pdb"],
        true,
    )
    .sub(ST)
    .gen(),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        &[],
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        &[],
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        &[],
        true,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        &[],
        true,
    ),
    b(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        &["sc"],
        false,
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        &[],
        false,
    )
    .gen(),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        &[],
        false,
    )
    .gen(),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        &[],
        false,
    )
    .sub(ST)
    .gen(),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        &[],
        false,
    )
    .gen(),
    b(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        &["crd", "crds"],
        false,
    )
    .sub(ST)
    .gen()
    .returns_object(),
    b(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        &["pc"],
        false,
    ),
    b("coordination.k8s.io", "v1", "Lease", "leases", &[], true),
    b(
        "node.k8s.io",
        "v1",
        "RuntimeClass",
        "runtimeclasses",
        &[],
        false,
    ),
    b(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        &[],
        true,
    ),
    b(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        &[],
        false,
    )
    .review(),
];

fn builtins() -> Vec<Arc<ResourceType>> {
    BUILTINS
        .iter()
        .map(|b| {
            Arc::new(ResourceType {
                group: b.group.into(),
                version: b.version.into(),
                kind: b.kind.into(),
                plural: b.plural.into(),
                singular: b.kind.to_lowercase(),
                short_names: b.short.iter().map(|s| s.to_string()).collect(),
                categories: if b.all { vec!["all".into()] } else { vec![] },
                namespaced: b.namespaced,
                subresources: b.sub.iter().map(|s| s.to_string()).collect(),
                generation: b.generation,
                returns_deleted_object: b.returns_object,
                crd: None,
                printer_columns: vec![],
                review: b.review,
            })
        })
        .collect()
}

/// A group as discovery shows it: versions, preferred first.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupVersions {
    pub name: String,
    pub versions: Vec<String>,
}

/// Built-in resources plus those defined by CRDs.
#[derive(Debug, Clone)]
pub struct Registry {
    builtin: Vec<Arc<ResourceType>>,
    /// CRD name → the resource types (one per served version) it defines.
    custom: BTreeMap<String, Vec<Arc<ResourceType>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            builtin: builtins(),
            custom: BTreeMap::new(),
        }
    }
}

impl Registry {
    fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.builtin.iter().chain(self.custom.values().flatten())
    }

    /// The resource served at `/apis/{group}/{version}/{plural}`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.all()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// The resource of a kind in a group, at `version` when given, else its preferred version.
    pub fn by_kind(
        &self,
        group: &str,
        version: Option<&str>,
        kind: &str,
    ) -> Option<Arc<ResourceType>> {
        self.all()
            .find(|r| r.group == group && r.kind == kind && version.is_none_or(|v| r.version == v))
            .cloned()
    }

    /// Whether the group/version is served at all.
    pub fn serves_version(&self, group: &str, version: &str) -> bool {
        self.all().any(|r| r.group == group && r.version == version)
    }

    /// Resources of one group version, in table order.
    pub fn resources(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.all()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect()
    }

    /// Every resource (all versions).
    pub fn every(&self) -> Vec<Arc<ResourceType>> {
        self.all().cloned().collect()
    }

    /// Named groups (not the core group): built-ins in table order, then CRD groups by name.
    pub fn groups(&self) -> Vec<GroupVersions> {
        let mut out: Vec<GroupVersions> = Vec::new();
        let mut custom: Vec<&Arc<ResourceType>> = self.custom.values().flatten().collect();
        custom.sort_by(|a, b| a.group.cmp(&b.group));
        for r in self.builtin.iter().chain(custom) {
            if r.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|g| g.name == r.group) {
                Some(g) => {
                    if !g.versions.contains(&r.version) {
                        g.versions.push(r.version.clone());
                    }
                }
                None => out.push(GroupVersions {
                    name: r.group.clone(),
                    versions: vec![r.version.clone()],
                }),
            }
        }
        for g in &mut out {
            g.versions
                .sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }

    /// Registers (or replaces) the resources a CRD object defines. Returns the problems that
    /// make the CRD unusable (then nothing is registered).
    pub fn set_crd(&mut self, crd: &Value) -> Result<(), Vec<(String, String)>> {
        let types = crd_types(crd)?;
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for t in &types {
            if let Some(clash) = self.all().find(|r| {
                r.group == t.group
                    && r.plural == t.plural
                    && r.crd.as_deref() != Some(name.as_str())
            }) {
                return Err(vec![(
                    "spec.names.plural".into(),
                    format!(
                        "Invalid value: {:?}: already served by {}",
                        t.plural, clash.kind
                    ),
                )]);
            }
        }
        self.custom.insert(name, types);
        Ok(())
    }

    pub fn remove_crd(&mut self, name: &str) -> Option<Vec<Arc<ResourceType>>> {
        self.custom.remove(name)
    }
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first; others last.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    for (prefix, rank) in [("beta", 2u8), ("alpha", 1u8)] {
        if let Some(n) = tail.strip_prefix(prefix) {
            if let Ok(minor) = n.parse::<u32>() {
                return (rank, major, minor);
            }
        }
    }
    (0, 0, 0)
}

/// The resource types a CRD defines, one per served version, or the problems with it.
pub fn crd_types(crd: &Value) -> Result<Vec<Arc<ResourceType>>, Vec<(String, String)>> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let mut problems = Vec::new();
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if group.is_empty() {
        problems.push(("spec.group".into(), "Required value".into()));
    }
    if plural.is_empty() {
        problems.push(("spec.names.plural".into(), "Required value".into()));
    }
    if kind.is_empty() {
        problems.push(("spec.names.kind".into(), "Required value".into()));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        problems.push((
            "metadata.name".into(),
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = spec["scope"].as_str().unwrap_or_default();
    if scope != "Namespaced" && scope != "Cluster" {
        problems.push((
            "spec.scope".into(),
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage_versions = versions
        .iter()
        .filter(|v| v["storage"] == Value::Bool(true))
        .count();
    if storage_versions != 1 {
        problems.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for v in versions
        .iter()
        .filter(|v| v["served"] != Value::Bool(false))
    {
        let version = v["name"].as_str().unwrap_or_default().to_string();
        let mut subresources = Vec::new();
        if v["subresources"]["scale"].is_object() {
            subresources.push("scale".to_string());
        }
        if v["subresources"]["status"].is_object() {
            subresources.push("status".to_string());
        }
        let printer_columns = v["additionalPrinterColumns"]
            .as_array()
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: c["name"].as_str().unwrap_or_default().into(),
                        type_: c["type"].as_str().unwrap_or("string").into(),
                        json_path: c["jsonPath"].as_str().unwrap_or_default().into(),
                        priority: c["priority"].as_i64().unwrap_or(0),
                        description: c["description"].as_str().unwrap_or_default().into(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Arc::new(ResourceType {
            group: group.into(),
            version,
            kind: kind.into(),
            plural: plural.into(),
            singular: names["singular"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| kind.to_lowercase()),
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            namespaced: scope == "Namespaced",
            subresources,
            generation: true,
            returns_deleted_object: false,
            crd: Some(name.into()),
            printer_columns,
            review: false,
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                    {"name": "v1alpha1", "served": false, "storage": false}
                ]
            }
        })
    }

    #[test]
    fn builtins_resolve_by_path_and_kind() {
        let r = Registry::default();
        let d = r.lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(d.kind, "Deployment");
        assert!(d.namespaced && d.generation && d.has_status());
        let cm = r.by_kind("", None, "ConfigMap").unwrap();
        assert!(!cm.generation);
        assert!(r.lookup("apps", "v1", "widgets").is_none());
        let autoscaling = r
            .groups()
            .into_iter()
            .find(|g| g.name == "autoscaling")
            .unwrap();
        assert_eq!(autoscaling.versions, vec!["v2", "v1"]);
    }

    #[test]
    fn a_crd_adds_its_served_versions_and_group() {
        let mut r = Registry::default();
        r.set_crd(&widget_crd()).unwrap();
        assert!(r
            .lookup("example.com", "v1", "widgets")
            .unwrap()
            .has_status());
        assert!(r.lookup("example.com", "v1beta1", "widgets").is_some());
        assert!(r.lookup("example.com", "v1alpha1", "widgets").is_none());
        let g = r
            .groups()
            .into_iter()
            .find(|g| g.name == "example.com")
            .unwrap();
        assert_eq!(g.versions, vec!["v1", "v1beta1"]);
        r.remove_crd("widgets.example.com");
        assert!(r.lookup("example.com", "v1", "widgets").is_none());
    }

    #[test]
    fn an_invalid_crd_is_refused_with_its_fields() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("wrong");
        crd["spec"]["scope"] = json!("Global");
        let problems = crd_types(&crd).unwrap_err();
        let fields: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, vec!["metadata.name", "spec.scope"]);
    }

    #[test]
    fn version_priority_orders_like_kubernetes() {
        let mut v = vec!["v1alpha1", "v2beta1", "v1", "v1beta2", "v2", "foo"];
        v.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(v, vec!["v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]);
    }
}
