//! Member clusters as a hub declares them: KubeFleet `MemberCluster` (cluster.kubernetes-fleet.io v1
//! and v1beta1, one model) and OCM `ManagedCluster` (cluster.open-cluster-management.io v1), with
//! OCM's `ManagedClusterSet` (v1beta2, and the removed v1beta1) and `ManagedClusterSetBinding`
//! (v1beta2 and v1beta1). Each knows its defaults, the labels the hub adds, and the API/CEL/webhook
//! rules that concern one object on its own. Pure: it does not know whether a cluster is reachable
//! (that is inventory) nor which placements select it (that is the scheduler).
//!
//! This file also holds the small field checks (label keys and values, label selectors, object
//! names) that `staged` and `ocm` share, phrased as the Kubernetes API server phrases them.

use super::object::ObjectMeta;
use super::placement::TaintEffect;
use super::selector::{LabelSelector, LabelSelectorRequirement, Labels};
use super::{is_dns1123_label, is_dns1123_subdomain, is_label_value, ApiObject, Problem, Problems};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The KubeFleet cluster API group.
pub const FLEET_CLUSTER_GROUP: &str = "cluster.kubernetes-fleet.io";
/// The OCM cluster API group.
pub const OCM_CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
/// The label the KubeFleet hub puts on every `MemberCluster`, valued with the cluster's own name
/// (it overwrites any value the user wrote).
pub const MEMBER_NAME_LABEL: &str = "kubernetes-fleet.io/member-name";
/// The OCM label that puts a `ManagedCluster` into an exclusive `ManagedClusterSet`.
pub const CLUSTER_SET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
/// The set OCM puts clusters into when they carry no [`CLUSTER_SET_LABEL`] (feature gate
/// `DefaultClusterSet`, on by default).
pub const DEFAULT_CLUSTER_SET: &str = "default";
/// Taint the OCM hub adds (effect `NoSelect`) when a cluster's `ManagedClusterConditionAvailable`
/// is `False`.
pub const TAINT_UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";
/// Taint the OCM hub adds (effect `NoSelect`) when that condition is missing or `Unknown`.
pub const TAINT_UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
/// Most taints a `MemberCluster` may carry.
pub const MAX_MEMBER_TAINTS: usize = 100;
/// `MemberCluster.spec.heartbeatPeriodSeconds` when absent.
pub const DEFAULT_HEARTBEAT_PERIOD_SECONDS: i32 = 60;
/// `ManagedCluster.spec.leaseDurationSeconds` when absent or zero.
pub const DEFAULT_LEASE_DURATION_SECONDS: i32 = 60;

// ---------------------------------------------------------------------------------------------
// KubeFleet MemberCluster
// ---------------------------------------------------------------------------------------------

/// A KubeFleet `MemberCluster` (cluster-scoped): joining the fleet is creating it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberCluster {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: MemberClusterSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberClusterSpec {
    /// The identity the member agent uses on the hub (irrelevant to a push daemon, but required).
    pub identity: Subject,
    /// Default [`DEFAULT_HEARTBEAT_PERIOD_SECONDS`]; see [`MemberCluster::heartbeat_period_seconds`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_period_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// v1beta1 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_options: Option<DeleteOptions>,
}

/// An RBAC subject (`rbac.authorization.k8s.io/v1` `Subject`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subject {
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// A taint on a `MemberCluster`: placements that do not tolerate it are not scheduled there.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Only `NoSchedule` exists.
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteOptions {
    /// Default `Strict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_mode: Option<DeleteValidationMode>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeleteValidationMode {
    #[default]
    Strict,
    Skip,
}

impl MemberCluster {
    /// `spec.heartbeatPeriodSeconds`, defaulted to 60.
    pub fn heartbeat_period_seconds(&self) -> i32 {
        self.spec
            .heartbeat_period_seconds
            .unwrap_or(DEFAULT_HEARTBEAT_PERIOD_SECONDS)
    }

    /// `spec.deleteOptions.validationMode`, defaulted to `Strict`.
    pub fn delete_validation_mode(&self) -> DeleteValidationMode {
        self.spec
            .delete_options
            .as_ref()
            .and_then(|d| d.validation_mode)
            .unwrap_or_default()
    }

    /// The cluster's labels as the hub shows them: `metadata.labels` plus
    /// `kubernetes-fleet.io/member-name: <name>` (which overrides a user-written value).
    pub fn labels(&self) -> Labels {
        let mut labels = self.metadata.labels.clone();
        labels.insert(MEMBER_NAME_LABEL.to_string(), self.metadata.name.clone());
        labels
    }

    fn is_v1(&self) -> bool {
        self.api_version == format!("{FLEET_CLUSTER_GROUP}/v1")
    }
}

impl ApiObject for MemberCluster {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, Some(63), &mut p);
        let spec = &self.spec;
        if let Some(s) = spec.heartbeat_period_seconds {
            if !(1..=600).contains(&s) {
                p.push(
                    "spec.heartbeatPeriodSeconds",
                    format!("must be between 1 and 600, got {s}"),
                );
            }
        }
        if spec.taints.len() > MAX_MEMBER_TAINTS {
            p.push(
                "spec.taints",
                format!(
                    "must have at most {MAX_MEMBER_TAINTS} items, got {}",
                    spec.taints.len()
                ),
            );
        }
        for (i, t) in spec.taints.iter().enumerate() {
            let f = format!("spec.taints[{i}]");
            if let Some(msg) = qualified_name_problem(&t.key) {
                p.push(
                    format!("{f}.key"),
                    format!("invalid taint key {:?}: {msg}", t.key),
                );
            }
            if let Some(msg) = label_value_problem(&t.value) {
                p.push(
                    format!("{f}.value"),
                    format!("invalid taint value {:?}: {msg}", t.value),
                );
            }
            // KubeFleet compares whole taints (key, value, effect).
            if spec.taints[..i].contains(t) {
                p.push(
                    f,
                    format!(
                        "taint {{key: {:?}, value: {:?}, effect: {:?}}} already exists, taints must be unique",
                        t.key, t.value, t.effect
                    ),
                );
            }
        }
        if self.is_v1() && spec.delete_options.is_some() {
            p.push(
                "spec.deleteOptions",
                "unknown field \"deleteOptions\" (v1beta1 only)",
            );
        }
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

// ---------------------------------------------------------------------------------------------
// OCM ManagedCluster
// ---------------------------------------------------------------------------------------------

/// An OCM `ManagedCluster` (cluster-scoped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedCluster {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    /// The CRD does not require a spec; absent means all defaults.
    #[serde(default)]
    pub spec: ManagedClusterSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_cluster_client_configs: Vec<ClientConfig>,
    #[serde(default)]
    pub hub_accepts_client: bool,
    /// Default 60 (and 0 means 60); see [`ManagedCluster::lease_duration_seconds`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<ManagedClusterTaint>,
}

/// The API server address of a managed cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientConfig {
    pub url: String,
    /// Base64 of the PEM bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
}

/// A taint on a `ManagedCluster`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterTaint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: OcmTaintEffect,
    /// RFC 3339 time; `null` allowed. On create the OCM hub overwrites it with "now".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

/// The effect of an OCM taint on placements that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OcmTaintEffect {
    /// Not selected; removed from decisions that already hold it.
    NoSelect,
    /// Always tolerated by the OCM scheduler (no scoring effect).
    PreferNoSelect,
    /// Not newly selected; clusters already in the decisions stay.
    NoSelectIfNew,
}

impl ManagedCluster {
    /// `spec.leaseDurationSeconds`, 60 when absent or zero.
    pub fn lease_duration_seconds(&self) -> i32 {
        match self.spec.lease_duration_seconds {
            None | Some(0) => DEFAULT_LEASE_DURATION_SECONDS,
            Some(s) => s,
        }
    }

    /// The cluster's labels as the OCM hub shows them: `metadata.labels`, plus
    /// `cluster.open-cluster-management.io/clusterset: default` when the cluster names no set
    /// (the `DefaultClusterSet` feature, on by default).
    pub fn labels(&self) -> Labels {
        let mut labels = self.metadata.labels.clone();
        labels
            .entry(CLUSTER_SET_LABEL.to_string())
            .or_insert_with(|| DEFAULT_CLUSTER_SET.to_string());
        labels
    }
}

impl ApiObject for ManagedCluster {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        // The OCM webhook requires a cluster name to be a valid namespace name.
        let name = &self.metadata.name;
        if name.is_empty() {
            p.push("metadata.name", "Required value: name is required");
        } else if !is_dns1123_label(name) {
            // OCM's webhook (validateManagedClusterObj) returns early when there are no client
            // configs, dropping this error: then only gitfleet refuses the name.
            let own = if self.spec.managed_cluster_client_configs.is_empty() {
                " (gitfleet's own rule here: OCM's webhook skips it for a cluster without client configs, but OCM names the cluster's namespace after it, so the cluster cannot register)"
            } else {
                ""
            };
            p.push(
                "metadata.name",
                format!("metadata.name format is not correct: {DNS1123_LABEL_MESSAGE}{own}"),
            );
        }
        for (i, c) in self.spec.managed_cluster_client_configs.iter().enumerate() {
            let f = format!("spec.managedClusterClientConfigs[{i}]");
            if !is_https_url(&c.url) {
                p.push(
                    format!("{f}.url"),
                    format!("url {:?} is invalid in client configs", c.url),
                );
            }
            if let Some(ca) = &c.ca_bundle {
                if !is_base64(ca) {
                    p.push(
                        format!("{f}.caBundle"),
                        "must be base64-encoded (format: byte)",
                    );
                }
            }
        }
        for (i, t) in self.spec.taints.iter().enumerate() {
            let f = format!("spec.taints[{i}]");
            if let Some(msg) = ocm_key_problem(&t.key) {
                p.push(format!("{f}.key"), msg);
            }
            if t.value.len() > 1024 {
                p.push(
                    format!("{f}.value"),
                    format!(
                        "must be no more than 1024 characters, got {}",
                        t.value.len()
                    ),
                );
            }
            if let Some(at) = &t.time_added {
                if crate::timestamp::parse(at).is_none() {
                    p.push(
                        format!("{f}.timeAdded"),
                        format!("{at:?} is not an RFC 3339 date-time"),
                    );
                }
            }
        }
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

// ---------------------------------------------------------------------------------------------
// OCM ManagedClusterSet and ManagedClusterSetBinding
// ---------------------------------------------------------------------------------------------

/// An OCM `ManagedClusterSet` (cluster-scoped): a named group of managed clusters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterSet {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    /// Default `{clusterSelector: {selectorType: ExclusiveClusterSetLabel}}`.
    #[serde(default)]
    pub spec: ManagedClusterSetSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterSetSpec {
    #[serde(default)]
    pub cluster_selector: ManagedClusterSelector,
    /// v1beta2 only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_namespaces: Vec<ManagedNamespaceConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterSelector {
    /// Default `ExclusiveClusterSetLabel` (v1beta2) / `LegacyClusterSetLabel` (v1beta1), which
    /// mean the same thing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector_type: Option<SelectorType>,
    /// Used with `selectorType: LabelSelector`; absent there selects no cluster, `{}` every cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectorType {
    /// v1beta2: members are the clusters labelled `cluster.open-cluster-management.io/clusterset: <set>`.
    ExclusiveClusterSetLabel,
    /// v1beta1 name of `ExclusiveClusterSetLabel`.
    LegacyClusterSetLabel,
    /// Members are the clusters matching `labelSelector`.
    LabelSelector,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedNamespaceConfig {
    pub name: String,
}

impl ManagedClusterSet {
    /// Is a cluster with these labels (as [`ManagedCluster::labels`] gives them) a member?
    pub fn selects(&self, labels: &Labels) -> bool {
        let selector = &self.spec.cluster_selector;
        match selector.selector_type {
            None
            | Some(SelectorType::ExclusiveClusterSetLabel)
            | Some(SelectorType::LegacyClusterSetLabel) => {
                labels.get(CLUSTER_SET_LABEL) == Some(&self.metadata.name)
            }
            Some(SelectorType::LabelSelector) => selector
                .label_selector
                .as_ref()
                .is_some_and(|s| s.matches(labels)),
        }
    }

    fn is_v1beta1(&self) -> bool {
        self.api_version == format!("{OCM_CLUSTER_GROUP}/v1beta1")
    }
}

impl ApiObject for ManagedClusterSet {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, None, &mut p);
        let f = "spec.clusterSelector";
        let selector = &self.spec.cluster_selector;
        let (wrong, supported) = if self.is_v1beta1() {
            (
                SelectorType::ExclusiveClusterSetLabel,
                "\"LegacyClusterSetLabel\", \"LabelSelector\"",
            )
        } else {
            (
                SelectorType::LegacyClusterSetLabel,
                "\"ExclusiveClusterSetLabel\", \"LabelSelector\"",
            )
        };
        if selector.selector_type == Some(wrong) {
            p.push(
                format!("{f}.selectorType"),
                format!("Unsupported value: \"{wrong:?}\": supported values: {supported}"),
            );
        }
        if let Some(ls) = &selector.label_selector {
            check_selector(&format!("{f}.labelSelector"), ls, &mut p);
        }
        if self.is_v1beta1() && !self.spec.managed_namespaces.is_empty() {
            p.push(
                "spec.managedNamespaces",
                "unknown field \"managedNamespaces\" (v1beta2 only)",
            );
        }
        let namespaces = &self.spec.managed_namespaces;
        for (i, ns) in namespaces.iter().enumerate() {
            let nf = format!("spec.managedNamespaces[{i}].name");
            if ns.name.is_empty() {
                p.push(nf, "Required value");
            } else if !is_dns1123_label(&ns.name) {
                p.push(nf, DNS1123_LABEL_MESSAGE);
            } else if namespaces[..i].iter().any(|o| o.name == ns.name) {
                p.push(nf, format!("Duplicate value: {:?}", ns.name));
            }
        }
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

/// An OCM `ManagedClusterSetBinding` (namespaced): makes a set's clusters available to the
/// placements of its namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterSetBinding {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ManagedClusterSetBindingSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedClusterSetBindingSpec {
    /// The bound set; must equal `metadata.name`.
    pub cluster_set: String,
}

impl ApiObject for ManagedClusterSetBinding {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, None, &mut p);
        if self.spec.cluster_set.is_empty() {
            p.push(
                "spec.clusterSet",
                "Required value: must be at least 1 character long",
            );
        } else if self.spec.cluster_set != self.metadata.name {
            p.push(
                "spec.clusterSet",
                "The ManagedClusterSetBinding must have the same name as the target ManagedClusterSet",
            );
        }
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

impl ManagedClusterSetBinding {
    /// Rules between this binding and the one it replaces (`spec.clusterSet` cannot change).
    pub fn update_problems(&self, old: &ManagedClusterSetBinding) -> Vec<Problem> {
        let mut p = Problems::default();
        if self.spec.cluster_set != old.spec.cluster_set {
            p.push("spec.clusterSet", "field is immutable");
        }
        p.0
    }
}

// ---------------------------------------------------------------------------------------------
// Declared properties
// ---------------------------------------------------------------------------------------------

/// The annotation a member declares its properties with: a mapping (YAML or JSON) of property
/// name to quantity, as KubeFleet's `MemberCluster.status.properties` maps them, so that any
/// property name a placement can write (`example.com/cost-tier`) fits in one valid key.
pub const PROPERTIES_ANNOTATION: &str = "gitfleet.io/properties";
/// The earlier spelling, one annotation `gitfleet.io/property.<name>` per property: still read,
/// with a warning, since a name with a `/` in it makes a key no API server accepts.
pub const LEGACY_PROPERTY_PREFIX: &str = "gitfleet.io/property.";

/// What a member's annotations declare.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeclaredProperties {
    /// Property name to quantity (as written).
    pub values: std::collections::BTreeMap<String, String>,
    /// Why the declaration is wrong (the commit is invalid).
    pub problems: Vec<Problem>,
    /// Properties declared with the earlier spelling, each with how to rewrite it.
    pub warnings: Vec<Problem>,
}

/// The properties the annotations of a member declare ([`PROPERTIES_ANNOTATION`], and
/// [`LEGACY_PROPERTY_PREFIX`] below it: the new spelling wins for a name written both ways).
pub fn declared_properties(
    annotations: &std::collections::BTreeMap<String, String>,
) -> DeclaredProperties {
    let mut out = DeclaredProperties::default();
    let legacy: Vec<(&String, &str, &String)> = annotations
        .iter()
        .filter_map(|(k, v)| Some((k, k.strip_prefix(LEGACY_PROPERTY_PREFIX)?, v)))
        .collect();
    for (key, name, value) in &legacy {
        out.values.insert(name.to_string(), value.to_string());
        let rewrite = serde_json::json!({ *name: value }).to_string();
        out.warnings.push(Problem::new(
            super::metadata::key_field("metadata.annotations", key),
            format!(
                "the spelling {LEGACY_PROPERTY_PREFIX}<name> is deprecated (a property name with a '/' makes an annotation key no API server accepts); declare it in the annotation {PROPERTIES_ANNOTATION} instead: `{PROPERTIES_ANNOTATION}: '{rewrite}'` (one mapping for all the member's properties)"
            ),
        ));
    }
    let Some(text) = annotations.get(PROPERTIES_ANNOTATION) else {
        return out;
    };
    let field = super::metadata::key_field("metadata.annotations", PROPERTIES_ANNOTATION);
    let map = match crate::yaml::from_str::<Value>(text) {
        Ok(Value::Object(map)) => map,
        Ok(Value::Null) => return out,
        Ok(_) => {
            out.problems.push(Problem::new(
                field,
                "must be a mapping of property name to quantity, such as '{\"example.com/cost-tier\": \"3\"}'",
            ));
            return out;
        }
        Err(e) => {
            out.problems.push(Problem::new(
                field,
                format!("must be a mapping of property name to quantity (YAML or JSON): {e}"),
            ));
            return out;
        }
    };
    for (name, value) in map {
        if let Err(msg) = super::placement::check_property_name(&name) {
            out.problems.push(Problem::new(field.clone(), msg));
        }
        let Some(value) = value.as_str() else {
            out.problems.push(Problem::new(
                field.clone(),
                format!("property {name:?}: the quantity must be a string (quote it: \"{value}\"), not {value}"),
            ));
            continue;
        };
        if let Err(e) = super::quantity::Quantity::parse(value) {
            out.problems.push(Problem::new(
                field.clone(),
                format!("property {name:?}: {e}"),
            ));
        }
        out.values.insert(name, value.to_string());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Field checks shared with `staged` and `ocm`
// ---------------------------------------------------------------------------------------------

pub(crate) const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const NAME_PART_MESSAGE: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `metadata.name` of a custom resource: required, a DNS-1123 subdomain, and at most `max` bytes
/// when the API adds a CEL length rule (`size(self.metadata.name) < 64`).
pub(crate) fn check_name(meta: &ObjectMeta, max: Option<usize>, p: &mut Problems) {
    let name = &meta.name;
    if name.is_empty() {
        p.push("metadata.name", "Required value: name is required");
        return;
    }
    if let Some(max) = max {
        if name.len() > max {
            p.push(
                "metadata.name",
                format!("metadata.name max length is {max} (it has {})", name.len()),
            );
            return;
        }
    }
    if !is_dns1123_subdomain(name) {
        p.push("metadata.name", DNS1123_SUBDOMAIN_MESSAGE);
    }
}

/// Why `s` is not a Kubernetes qualified name (`[prefix/]name`), as `IsQualifiedName` says it.
pub(crate) fn qualified_name_problem(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if name.contains('/') {
        return Some("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into());
    }
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if !is_dns1123_subdomain(prefix) {
            return Some(format!("prefix part {DNS1123_SUBDOMAIN_MESSAGE}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    if !is_label_value(name) {
        return Some(NAME_PART_MESSAGE.into());
    }
    None
}

/// Why `s` is not a label value, as `IsValidLabelValue` says it.
pub(crate) fn label_value_problem(s: &str) -> Option<String> {
    if s.len() > 63 {
        Some("must be no more than 63 characters".into())
    } else if !is_label_value(s) {
        Some(LABEL_VALUE_MESSAGE.into())
    } else {
        None
    }
}

/// OCM's key pattern for taints, tolerations and topology keys:
/// `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`,
/// at most 316 characters (no per-part length limit, unlike a label key).
pub(crate) fn ocm_key_problem(s: &str) -> Option<String> {
    const PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
    if s.len() > 316 {
        return Some(format!(
            "must be no more than 316 characters, got {}",
            s.len()
        ));
    }
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if prefix_ok && name_ok {
        None
    } else {
        Some(format!("{s:?} must match '{PATTERN}'"))
    }
}

/// Every problem `metav1.LabelSelectorAsSelector` would find in a selector: the structural rules
/// of [`LabelSelector::problems`] plus label keys and values that are not valid.
pub(crate) fn check_selector(field: &str, s: &LabelSelector, p: &mut Problems) {
    for (k, v) in &s.match_labels {
        if let Some(msg) = qualified_name_problem(k) {
            p.push(format!("{field}.matchLabels"), format!("key {k:?}: {msg}"));
        }
        if let Some(msg) = label_value_problem(v) {
            p.push(
                format!("{field}.matchLabels"),
                format!("value {v:?} of key {k:?}: {msg}"),
            );
        }
    }
    check_requirements(field, &s.match_expressions, p);
    for (sub, msg) in s.problems() {
        p.push(format!("{field}.{sub}"), msg);
    }
}

/// The key and value rules of selector requirements (the structural ones are in
/// [`LabelSelector::problems`]).
fn check_requirements(field: &str, reqs: &[LabelSelectorRequirement], p: &mut Problems) {
    for (i, r) in reqs.iter().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        if !r.key.is_empty() {
            if let Some(msg) = qualified_name_problem(&r.key) {
                p.push(format!("{f}.key"), msg);
            }
        }
        for (j, v) in r.values.iter().enumerate() {
            if let Some(msg) = label_value_problem(v) {
                p.push(format!("{f}.values[{j}]"), msg);
            }
        }
    }
}

/// Requirements that stand alone (OCM claim selectors): structure, keys and values.
pub(crate) fn check_requirement_list(
    field: &str,
    reqs: &[LabelSelectorRequirement],
    p: &mut Problems,
) {
    let as_selector = LabelSelector {
        match_labels: Default::default(),
        match_expressions: reqs.to_vec(),
    };
    check_selector(field, &as_selector, p);
}

/// Go's `url.Parse(u)` succeeds with scheme `https` (the scheme is case-insensitive).
fn is_https_url(u: &str) -> bool {
    let Some((scheme, rest)) = u.split_once(':') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("https")
        && !rest.is_empty()
        && !u.bytes().any(|b| b.is_ascii_control() || b == b' ')
}

/// Standard base64 with padding, as Kubernetes decodes `format: byte`.
fn is_base64(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    let pad = s.len() - body.len();
    s.len().is_multiple_of(4)
        && pad <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::decode;
    use crate::model::testing::*;

    // kubefleet-examples/fleet_v1beta1_membercluster.yaml
    const MEMBER_EXAMPLE: &str = r#"
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: kind-cluster-1
spec:
  identity:
    name: fleet-member-agent-cluster-1
    kind: ServiceAccount
    namespace: fleet-system
    apiGroup: ""
"#;

    #[test]
    fn member_cluster_example_is_valid_and_defaulted() {
        assert_eq!(problems::<MemberCluster>(MEMBER_EXAMPLE), vec![]);
        let mc: MemberCluster = decode(&value(MEMBER_EXAMPLE)).unwrap();
        assert_eq!(mc.spec.identity.kind, "ServiceAccount");
        assert_eq!(mc.spec.identity.namespace, "fleet-system");
        assert_eq!(mc.heartbeat_period_seconds(), 60);
        assert_eq!(mc.delete_validation_mode(), DeleteValidationMode::Strict);
        assert_eq!(
            mc.labels().get(MEMBER_NAME_LABEL).map(String::as_str),
            Some("kind-cluster-1")
        );
    }

    #[test]
    fn member_name_label_overrides_a_user_value() {
        let doc = MEMBER_EXAMPLE.replace(
            "  name: kind-cluster-1\n",
            "  name: kind-cluster-1\n  labels: {kubernetes-fleet.io/member-name: other, env: prod}\n",
        );
        let mc: MemberCluster = decode(&value(&doc)).unwrap();
        let labels = mc.labels();
        assert_eq!(labels[MEMBER_NAME_LABEL], "kind-cluster-1");
        assert_eq!(labels["env"], "prod");
    }

    #[test]
    fn member_cluster_full_spec_decodes() {
        let doc = format!(
            "{MEMBER_EXAMPLE}  heartbeatPeriodSeconds: 30\n  taints:\n  - {{key: gpu, value: 'true', effect: NoSchedule}}\n  - {{key: gpu, value: 'false', effect: NoSchedule}}\n  deleteOptions: {{validationMode: Skip}}\nstatus: {{conditions: []}}\n"
        );
        assert_eq!(problems::<MemberCluster>(&doc), vec![]);
        let mc: MemberCluster = decode(&value(&doc)).unwrap();
        assert_eq!(mc.heartbeat_period_seconds(), 30);
        assert_eq!(mc.delete_validation_mode(), DeleteValidationMode::Skip);
        assert_eq!(mc.spec.taints.len(), 2);
    }

    #[test]
    fn member_cluster_decoding_is_strict() {
        let cases = [
            (
                MEMBER_EXAMPLE.replace("    apiGroup: \"\"\n", "    apiGroup: \"\"\n    uid: x\n"),
                "spec.identity.uid",
                "unknown field `uid`",
            ),
            (
                format!("{MEMBER_EXAMPLE}  taints: [{{key: a, effect: NoExecute}}]\n"),
                "spec.taints[0].effect",
                "unknown variant `NoExecute`",
            ),
            (
                format!("{MEMBER_EXAMPLE}  deleteOptions: {{validationMode: Lax}}\n"),
                "spec.deleteOptions.validationMode",
                "unknown variant `Lax`",
            ),
            (
                MEMBER_EXAMPLE.replace("    kind: ServiceAccount\n", ""),
                "spec.identity",
                "missing field `kind`",
            ),
        ];
        for (doc, field, msg) in cases {
            let err = decode::<MemberCluster>(&value(&doc)).unwrap_err();
            assert_eq!(err.field, field, "{doc}");
            assert!(err.message.contains(msg), "{}", err.message);
        }
    }

    #[test]
    fn member_cluster_rules_name_their_field() {
        let long = "a".repeat(64);
        let many: String = (0..101)
            .map(|i| format!("  - {{key: k{i}, effect: NoSchedule}}\n"))
            .collect();
        expect_one::<MemberCluster>(&[
            (
                MEMBER_EXAMPLE.replace("kind-cluster-1", &long),
                "metadata.name",
                "metadata.name max length is 63 (it has 64)",
            ),
            (
                MEMBER_EXAMPLE.replace("kind-cluster-1", "Kind"),
                "metadata.name",
                DNS1123_SUBDOMAIN_MESSAGE,
            ),
            (
                MEMBER_EXAMPLE.replace("  name: kind-cluster-1\n", "  labels: {}\n"),
                "metadata.name",
                "Required value: name is required",
            ),
            (
                format!("{MEMBER_EXAMPLE}  heartbeatPeriodSeconds: 0\n"),
                "spec.heartbeatPeriodSeconds",
                "must be between 1 and 600, got 0",
            ),
            (
                format!("{MEMBER_EXAMPLE}  heartbeatPeriodSeconds: 601\n"),
                "spec.heartbeatPeriodSeconds",
                "must be between 1 and 600, got 601",
            ),
            (
                format!("{MEMBER_EXAMPLE}  taints:\n{many}"),
                "spec.taints",
                "must have at most 100 items, got 101",
            ),
            (
                format!("{MEMBER_EXAMPLE}  taints: [{{key: 'key@123:', effect: NoSchedule}}]\n"),
                "spec.taints[0].key",
                &format!("invalid taint key \"key@123:\": {NAME_PART_MESSAGE}"),
            ),
            (
                format!("{MEMBER_EXAMPLE}  taints: [{{key: '', value: v, effect: NoSchedule}}]\n"),
                "spec.taints[0].key",
                "invalid taint key \"\": name part must be non-empty",
            ),
            (
                format!("{MEMBER_EXAMPLE}  taints: [{{key: k, value: 'val&123:98_', effect: NoSchedule}}]\n"),
                "spec.taints[0].value",
                &format!("invalid taint value \"val&123:98_\": {LABEL_VALUE_MESSAGE}"),
            ),
            (
                format!("{MEMBER_EXAMPLE}  taints:\n  - {{key: a, value: b, effect: NoSchedule}}\n  - {{key: c, effect: NoSchedule}}\n  - {{key: a, value: b, effect: NoSchedule}}\n"),
                "spec.taints[2]",
                "taint {key: \"a\", value: \"b\", effect: NoSchedule} already exists, taints must be unique",
            ),
            (
                format!("{MEMBER_EXAMPLE}  deleteOptions: {{validationMode: Skip}}\n")
                    .replace("/v1beta1", "/v1"),
                "spec.deleteOptions",
                "unknown field \"deleteOptions\" (v1beta1 only)",
            ),
        ]);
    }

    #[test]
    fn v1_member_cluster_is_accepted() {
        let doc = MEMBER_EXAMPLE.replace("/v1beta1", "/v1");
        assert_eq!(problems::<MemberCluster>(&doc), vec![]);
    }

    const MANAGED: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: cluster1
  labels: {vendor: OpenShift}
spec:
  hubAcceptsClient: true
  leaseDurationSeconds: 0
  managedClusterClientConfigs:
  - url: https://api.cluster1.example.com:6443
    caBundle: LS0tLS1CRUdJTg==
  taints:
  - key: gpu
    value: "true"
    effect: NoSelect
    timeAdded: "2024-01-02T03:04:05Z"
  - key: example.com/maintenance
    effect: PreferNoSelect
    timeAdded: null
"#;

    #[test]
    fn managed_cluster_decodes_with_defaults() {
        assert_eq!(problems::<ManagedCluster>(MANAGED), vec![]);
        let mc: ManagedCluster = decode(&value(MANAGED)).unwrap();
        assert!(mc.spec.hub_accepts_client);
        assert_eq!(mc.lease_duration_seconds(), 60);
        assert_eq!(mc.spec.taints[0].effect, OcmTaintEffect::NoSelect);
        assert_eq!(mc.spec.taints[1].time_added, None);
        assert_eq!(mc.labels()[CLUSTER_SET_LABEL], "default");
        let bare: ManagedCluster = decode(&value(
            "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata: {name: c, labels: {cluster.open-cluster-management.io/clusterset: east}}\n",
        ))
        .unwrap();
        assert!(!bare.spec.hub_accepts_client);
        assert_eq!(bare.labels()[CLUSTER_SET_LABEL], "east");
        assert!(bare.validate().is_empty());
    }

    #[test]
    fn managed_cluster_rules_name_their_field() {
        let long_value = "v".repeat(1025);
        expect_one::<ManagedCluster>(&[
            (
                MANAGED.replace("name: cluster1", "name: cluster.one"),
                "metadata.name",
                &format!("metadata.name format is not correct: {DNS1123_LABEL_MESSAGE}"),
            ),
            (
                MANAGED.replace("https://api", "http://api"),
                "spec.managedClusterClientConfigs[0].url",
                "url \"http://api.cluster1.example.com:6443\" is invalid in client configs",
            ),
            (
                MANAGED.replace("LS0tLS1CRUdJTg==", "not base64!"),
                "spec.managedClusterClientConfigs[0].caBundle",
                "must be base64-encoded (format: byte)",
            ),
            (
                MANAGED.replace("key: gpu", "key: -gpu"),
                "spec.taints[0].key",
                r#""-gpu" must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$'"#,
            ),
            (
                MANAGED.replace("value: \"true\"", &format!("value: {long_value}")),
                "spec.taints[0].value",
                "must be no more than 1024 characters, got 1025",
            ),
            (
                MANAGED.replace("2024-01-02T03:04:05Z", "yesterday"),
                "spec.taints[0].timeAdded",
                "\"yesterday\" is not an RFC 3339 date-time",
            ),
        ]);
        let err = decode::<ManagedCluster>(&value(&MANAGED.replace("NoSelect\n", "NoSchedule\n")))
            .unwrap_err();
        assert_eq!(err.field, "spec.taints[0].effect");
    }

    #[test]
    fn ocm_keys_allow_long_name_parts() {
        assert_eq!(ocm_key_problem(&"a".repeat(100)), None);
        assert_eq!(ocm_key_problem("example.com/Gpu_1"), None);
        assert!(ocm_key_problem("Example.com/gpu").is_some());
        assert!(ocm_key_problem("a/b/c").is_some());
        assert!(ocm_key_problem(&"a".repeat(317)).is_some());
    }

    const SET: &str = "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSet\nmetadata: {name: east}\n";

    #[test]
    fn cluster_sets_select_their_members() {
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let exclusive: ManagedClusterSet = decode(&value(SET)).unwrap();
        assert!(exclusive.validate().is_empty());
        assert!(exclusive.selects(&labels(&[(CLUSTER_SET_LABEL, "east")])));
        assert!(!exclusive.selects(&labels(&[(CLUSTER_SET_LABEL, "west")])));
        let by_label: ManagedClusterSet = decode(&value(&format!(
            "{SET}spec:\n  clusterSelector:\n    selectorType: LabelSelector\n    labelSelector: {{matchLabels: {{region: east}}}}\n"
        )))
        .unwrap();
        assert!(by_label.validate().is_empty());
        assert!(by_label.selects(&labels(&[("region", "east")])));
        assert!(!by_label.selects(&labels(&[(CLUSTER_SET_LABEL, "east")])));
        let nothing: ManagedClusterSet = decode(&value(&format!(
            "{SET}spec: {{clusterSelector: {{selectorType: LabelSelector}}}}\n"
        )))
        .unwrap();
        assert!(!nothing.selects(&labels(&[("region", "east")])));
        let global: ManagedClusterSet = decode(&value(&format!(
            "{SET}spec: {{clusterSelector: {{selectorType: LabelSelector, labelSelector: {{}}}}}}\n"
        )))
        .unwrap();
        assert!(global.selects(&labels(&[])));
        let legacy: ManagedClusterSet = decode(&value(
            &format!("{SET}spec: {{clusterSelector: {{selectorType: LegacyClusterSetLabel}}}}\n")
                .replace("v1beta2", "v1beta1"),
        ))
        .unwrap();
        assert!(legacy.validate().is_empty());
        assert!(legacy.selects(&labels(&[(CLUSTER_SET_LABEL, "east")])));
    }

    #[test]
    fn cluster_set_rules_name_their_field() {
        expect_one::<ManagedClusterSet>(&[
            (
                format!("{SET}spec: {{clusterSelector: {{selectorType: LegacyClusterSetLabel}}}}\n"),
                "spec.clusterSelector.selectorType",
                "Unsupported value: \"LegacyClusterSetLabel\": supported values: \"ExclusiveClusterSetLabel\", \"LabelSelector\"",
            ),
            (
                format!("{SET}spec: {{clusterSelector: {{selectorType: ExclusiveClusterSetLabel}}}}\n")
                    .replace("v1beta2", "v1beta1"),
                "spec.clusterSelector.selectorType",
                "Unsupported value: \"ExclusiveClusterSetLabel\": supported values: \"LegacyClusterSetLabel\", \"LabelSelector\"",
            ),
            (
                format!("{SET}spec: {{managedNamespaces: [{{name: apps}}]}}\n")
                    .replace("v1beta2", "v1beta1"),
                "spec.managedNamespaces",
                "unknown field \"managedNamespaces\" (v1beta2 only)",
            ),
            (
                format!("{SET}spec: {{managedNamespaces: [{{name: apps}}, {{name: apps}}]}}\n"),
                "spec.managedNamespaces[1].name",
                "Duplicate value: \"apps\"",
            ),
            (
                format!("{SET}spec: {{managedNamespaces: [{{name: Apps}}]}}\n"),
                "spec.managedNamespaces[0].name",
                DNS1123_LABEL_MESSAGE,
            ),
            (
                format!("{SET}spec: {{clusterSelector: {{selectorType: LabelSelector, labelSelector: {{matchExpressions: [{{key: a, operator: In}}]}}}}}}\n"),
                "spec.clusterSelector.labelSelector.matchExpressions[0].values",
                "must be specified when `operator` is 'In' or 'NotIn'",
            ),
            (
                format!("{SET}spec: {{clusterSelector: {{selectorType: LabelSelector, labelSelector: {{matchLabels: {{'a b': c}}}}}}}}\n"),
                "spec.clusterSelector.labelSelector.matchLabels",
                &format!("key \"a b\": {NAME_PART_MESSAGE}"),
            ),
            (
                format!("{SET}spec: {{clusterSelector: {{selectorType: LabelSelector, labelSelector: {{matchLabels: {{a: -c}}}}}}}}\n"),
                "spec.clusterSelector.labelSelector.matchLabels",
                &format!("value \"-c\" of key \"a\": {LABEL_VALUE_MESSAGE}"),
            ),
        ]);
    }

    const BINDING: &str = "apiVersion: cluster.open-cluster-management.io/v1beta2\nkind: ManagedClusterSetBinding\nmetadata: {name: global, namespace: kueue-system}\nspec: {clusterSet: global}\n";

    #[test]
    fn binding_must_name_its_set() {
        assert_eq!(problems::<ManagedClusterSetBinding>(BINDING), vec![]);
        assert_eq!(
            problems::<ManagedClusterSetBinding>(&BINDING.replace("v1beta2", "v1beta1")),
            vec![]
        );
        expect_one::<ManagedClusterSetBinding>(&[
            (
                BINDING.replace("clusterSet: global", "clusterSet: east"),
                "spec.clusterSet",
                "The ManagedClusterSetBinding must have the same name as the target ManagedClusterSet",
            ),
            (
                BINDING.replace("clusterSet: global", "clusterSet: ''"),
                "spec.clusterSet",
                "Required value: must be at least 1 character long",
            ),
        ]);
        let old: ManagedClusterSetBinding = decode(&value(BINDING)).unwrap();
        let mut new = old.clone();
        assert!(new.update_problems(&old).is_empty());
        new.spec.cluster_set = "east".into();
        assert_eq!(new.update_problems(&old)[0].field, "spec.clusterSet");
    }

    #[test]
    fn qualified_names_report_like_kubernetes() {
        assert_eq!(
            qualified_name_problem("kubernetes-fleet.io/member-name"),
            None
        );
        assert_eq!(
            qualified_name_problem("/a").as_deref(),
            Some("prefix part must be non-empty")
        );
        assert_eq!(
            qualified_name_problem(&"a".repeat(64)).as_deref(),
            Some("name part must be no more than 63 characters")
        );
        assert!(qualified_name_problem("a/b/c").is_some());
        assert!(qualified_name_problem("Bad_Prefix/x")
            .unwrap()
            .starts_with("prefix part"));
    }

    #[test]
    fn base64_and_url_shapes() {
        assert!(is_base64(""));
        assert!(is_base64("YWJj"));
        assert!(!is_base64("YWJ"));
        assert!(is_https_url("HTTPS://x"));
        assert!(!is_https_url("https://a b"));
    }

    fn annotations(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn declared_properties_are_one_mapping_annotation() {
        let d = declared_properties(&annotations(&[(
            PROPERTIES_ANNOTATION,
            "{\"example.com/cost-tier\": \"3\", plain: 500m}",
        )]));
        assert_eq!(d.problems, vec![]);
        assert_eq!(d.warnings, vec![]);
        assert_eq!(d.values["example.com/cost-tier"], "3");
        assert_eq!(d.values["plain"], "500m");
        // YAML block form reads the same.
        let d = declared_properties(&annotations(&[(
            PROPERTIES_ANNOTATION,
            "example.com/cost-tier: \"3\"\n",
        )]));
        assert_eq!(d.values["example.com/cost-tier"], "3");
    }

    #[test]
    fn declared_properties_refuse_what_is_not_a_mapping_of_names_to_quantities() {
        let problems = |v: &str| {
            declared_properties(&annotations(&[(PROPERTIES_ANNOTATION, v)]))
                .problems
                .into_iter()
                .map(|p| format!("{}: {}", p.field, p.message))
                .collect::<Vec<_>>()
        };
        assert!(problems("[a]")[0].contains("must be a mapping"));
        assert!(problems("{a: [unclosed")[0].contains("must be a mapping"));
        assert!(problems("{\"a/b/c d\": \"1\"}")[0].contains("invalid property name"));
        assert!(problems("{a: lots}")[0].contains("property \"a\""));
        assert!(problems("{a: 3}")[0].contains("must be a string"));
        assert!(
            problems("{a: 3}")[0].starts_with("metadata.annotations[\"gitfleet.io/properties\"]: ")
        );
    }

    #[test]
    fn declared_properties_read_the_legacy_spelling_with_a_warning() {
        let d = declared_properties(&annotations(&[
            ("gitfleet.io/property.example.com/cost-tier", "3"),
            ("gitfleet.io/property.plain", "1"),
            (PROPERTIES_ANNOTATION, "{plain: \"2\"}"),
        ]));
        assert_eq!(d.problems, vec![]);
        assert_eq!(d.values["example.com/cost-tier"], "3");
        // The new spelling wins.
        assert_eq!(d.values["plain"], "2");
        assert_eq!(d.warnings.len(), 2);
        assert_eq!(
            d.warnings[0].field,
            "metadata.annotations[\"gitfleet.io/property.example.com/cost-tier\"]"
        );
        assert!(
            d.warnings[0]
                .message
                .contains("`gitfleet.io/properties: '{\"example.com/cost-tier\":\"3\"}'`"),
            "{}",
            d.warnings[0].message
        );
    }
    /// One test per rule of the CRDs, KubeFleet's member-cluster webhook
    /// (pkg/utils/validator/membercluster.go) and OCM's registration webhook, named after the
    /// rule: the breaking document names the field, the edge case is admitted.
    mod rules {
        use super::{BINDING, MEMBER_EXAMPLE, SET};
        use crate::model::testing::rule_tests;

        fn member(extra: &str) -> String {
            format!("{MEMBER_EXAMPLE}{extra}")
        }
        fn member_named(name: &str) -> String {
            member("").replace("name: kind-cluster-1", &format!("name: '{name}'"))
        }
        fn taints(list: &str) -> String {
            member(&format!("  taints: [{list}]\n"))
        }
        fn n_taints(n: usize) -> String {
            taints(
                &(0..n)
                    .map(|i| format!("{{key: k{i}, effect: NoSchedule}}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        }
        fn managed(spec: &str) -> String {
            format!("apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata: {{name: cluster1}}\nspec: {{hubAcceptsClient: true{spec}}}\n")
        }
        fn managed_named(name: &str) -> String {
            managed("").replace("name: cluster1", &format!("name: '{name}'"))
        }
        fn set(spec: &str) -> String {
            format!("{SET}spec: {spec}\n")
        }
        fn v1beta1(doc: String) -> String {
            doc.replace("/v1beta2", "/v1beta1")
        }

        rule_tests! { super::MemberCluster;
            member_name_at_most_63_characters: member_named(&"a".repeat(64)) => "metadata.name", "max length is 63";
                ok: member_named(&"a".repeat(63));
            member_name_is_a_dns_subdomain: member_named("Kind_1") => "metadata.name", "RFC 1123 subdomain";
                ok: member_named("kind.cluster-1");
            heartbeat_period_at_least_1: member("  heartbeatPeriodSeconds: 0\n") => "spec.heartbeatPeriodSeconds", "between 1 and 600";
                ok: member("  heartbeatPeriodSeconds: 1\n");
            heartbeat_period_at_most_600: member("  heartbeatPeriodSeconds: 601\n") => "spec.heartbeatPeriodSeconds", "between 1 and 600";
                ok: member("  heartbeatPeriodSeconds: 600\n");
            member_taints_at_most_100: n_taints(101) => "spec.taints", "at most 100 items";
                ok: n_taints(100);
            member_taint_key_is_a_qualified_name: taints("{key: 'a/b/c', effect: NoSchedule}") => "spec.taints[0].key", "invalid taint key";
                ok: taints("{key: example.com/gpu, effect: NoSchedule}");
            member_taint_value_is_a_label_value: taints(&format!("{{key: a, value: {}, effect: NoSchedule}}", "v".repeat(64))) => "spec.taints[0].value", "invalid taint value";
                ok: taints(&format!("{{key: a, value: {}, effect: NoSchedule}}", "v".repeat(63)));
            member_taints_unique: taints("{key: a, value: b, effect: NoSchedule}, {key: a, value: b, effect: NoSchedule}") => "spec.taints[1]", "taints must be unique";
                ok: taints("{key: a, value: b, effect: NoSchedule}, {key: a, value: c, effect: NoSchedule}");
            member_taint_effect_is_an_enum: taints("{key: a, effect: NoExecute}") => "spec.taints[0].effect", "unknown variant";
                ok: taints("{key: a, effect: NoSchedule}");
            member_v1_has_no_delete_options: member("  deleteOptions: {validationMode: Skip}\n").replace("/v1beta1", "/v1") => "spec.deleteOptions", "v1beta1 only";
                ok: member("  deleteOptions: {validationMode: Skip}\n");
            member_status_unknown_field_refused: format!("{}status: {{bogus: 1}}\n", member("")) => "status.bogus", "unknown field `bogus`";
                ok: format!("{}status: {{namespaces: {{a: b}}, properties: {{}}}}\n", member(""));
            member_v1_status_has_no_namespaces: format!("{}status: {{namespaces: {{}}}}\n", member("")).replace("/v1beta1", "/v1") => "status.namespaces", "unknown field";
                ok: format!("{}status: {{agentStatus: []}}\n", member("")).replace("/v1beta1", "/v1");
            member_identity_required: "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata: {name: m}\nspec: {}\n" => "spec", "missing field `identity`";
                ok: member("");
        }

        mod managed_cluster {
            use super::*;
            rule_tests! { super::super::ManagedCluster;
                managed_cluster_name_required: managed_named("") => "metadata.name", "name is required";
                    ok: managed_named("a");
                managed_cluster_name_is_a_dns_label: managed_named("cluster.one").replace("hubAcceptsClient: true", "hubAcceptsClient: true, managedClusterClientConfigs: [{url: 'https://a'}]") => "metadata.name", "format is not correct: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
                    ok: managed_named(&"a".repeat(63));
                managed_cluster_name_without_client_configs_is_gitfleets_own: managed_named("cluster.one") => "metadata.name", "gitfleet's own rule here";
                    ok: managed_named(&"a".repeat(63));
                managed_cluster_name_at_most_63_characters: managed_named(&"a".repeat(64)) => "metadata.name", "format is not correct";
                    ok: managed_named("cluster-1");
                client_config_url_is_https: managed(", managedClusterClientConfigs: [{url: 'http://api.example.com'}]") => "spec.managedClusterClientConfigs[0].url", "is invalid in client configs";
                    ok: managed(", managedClusterClientConfigs: [{url: 'HTTPS://api.example.com:6443'}]");
                client_config_ca_bundle_is_base64: managed(", managedClusterClientConfigs: [{url: 'https://a', caBundle: 'not base64!'}]") => "spec.managedClusterClientConfigs[0].caBundle", "base64";
                    ok: managed(", managedClusterClientConfigs: [{url: 'https://a', caBundle: 'LS0tLS1CRUdJTg=='}]");
                managed_taint_key_pattern: managed(", taints: [{key: 'a/b/c', effect: NoSelect}]") => "spec.taints[0].key", "must match";
                    ok: managed(&format!(", taints: [{{key: example.com/{}, effect: NoSelect}}]", "k".repeat(100)));
                managed_taint_key_at_most_316_characters: managed(&format!(", taints: [{{key: {}, effect: NoSelect}}]", "k".repeat(317))) => "spec.taints[0].key", "no more than 316 characters";
                    ok: managed(&format!(", taints: [{{key: {}, effect: NoSelect}}]", "k".repeat(316)));
                managed_taint_value_at_most_1024_characters: managed(&format!(", taints: [{{key: a, value: {}, effect: NoSelect}}]", "v".repeat(1025))) => "spec.taints[0].value", "no more than 1024 characters";
                    ok: managed(&format!(", taints: [{{key: a, value: {}, effect: NoSelect}}]", "v".repeat(1024)));
                managed_taint_effect_is_an_enum: managed(", taints: [{key: a, effect: NoSchedule}]") => "spec.taints[0].effect", "unknown variant";
                    ok: managed(", taints: [{key: a, effect: NoSelectIfNew}]");
                managed_cluster_status_unknown_field_refused: format!("{}status: {{version: {{}}, bogus: 1}}\n", managed("")) => "status.bogus", "unknown field `bogus`";
                    ok: format!("{}status: {{version: {{}}, clusterClaims: [], managedNamespaces: []}}\n", managed(""));
                managed_taint_time_added_is_a_date_time: managed(", taints: [{key: a, effect: NoSelect, timeAdded: yesterday}]") => "spec.taints[0].timeAdded", "not an RFC 3339 date-time";
                    ok: managed(", taints: [{key: a, effect: NoSelect, timeAdded: '2024-01-02T03:04:05Z'}]");
            }
        }

        mod cluster_set {
            use super::*;
            rule_tests! { super::super::ManagedClusterSet;
                v1beta2_selector_type_has_no_legacy: set("{clusterSelector: {selectorType: LegacyClusterSetLabel}}") => "spec.clusterSelector.selectorType", "Unsupported value";
                    ok: set("{clusterSelector: {selectorType: ExclusiveClusterSetLabel}}");
                v1beta1_selector_type_has_no_exclusive: v1beta1(set("{clusterSelector: {selectorType: ExclusiveClusterSetLabel}}")) => "spec.clusterSelector.selectorType", "Unsupported value";
                    ok: v1beta1(set("{clusterSelector: {selectorType: LegacyClusterSetLabel}}"));
                cluster_set_label_selector_syntax: set("{clusterSelector: {selectorType: LabelSelector, labelSelector: {matchLabels: {'a/b/c': x}}}}") => "spec.clusterSelector.labelSelector.matchLabels", "key \"a/b/c\"";
                    ok: set("{clusterSelector: {selectorType: LabelSelector, labelSelector: {matchLabels: {'a/b': x}}}}");
                managed_namespaces_not_in_v1beta1: v1beta1(set("{managedNamespaces: [{name: a}]}")) => "spec.managedNamespaces", "v1beta2 only";
                    ok: set("{managedNamespaces: [{name: a}]}");
                managed_namespace_name_required: set("{managedNamespaces: [{name: ''}]}") => "spec.managedNamespaces[0].name", "Required value";
                    ok: set("{managedNamespaces: [{name: a}]}");
                managed_namespace_name_is_a_dns_label: set("{managedNamespaces: [{name: a.b}]}") => "spec.managedNamespaces[0].name", "RFC 1123 label";
                    ok: set(&format!("{{managedNamespaces: [{{name: {}}}]}}", "a".repeat(63)));
                cluster_set_status_unknown_field_refused: format!("{}status: {{members: 1}}\n", set("{}")) => "status.members", "unknown field `members`";
                    ok: format!("{}status: {{conditions: []}}\n", set("{}"));
                managed_namespace_names_unique: set("{managedNamespaces: [{name: a}, {name: a}]}") => "spec.managedNamespaces[1].name", "Duplicate value";
                    ok: set("{managedNamespaces: [{name: a}, {name: b}]}");
            }
        }

        mod cluster_set_binding {
            use super::*;
            rule_tests! { super::super::ManagedClusterSetBinding;
                binding_cluster_set_required: BINDING.replace("clusterSet: global", "clusterSet: ''") => "spec.clusterSet", "at least 1 character";
                    ok: BINDING;
                binding_status_unknown_field_refused: format!("{BINDING}status: {{bound: true}}\n") => "status.bound", "unknown field `bound`";
                    ok: format!("{BINDING}status: {{conditions: []}}\n");
                binding_names_its_set: BINDING.replace("clusterSet: global", "clusterSet: other") => "spec.clusterSet", "same name as the target ManagedClusterSet";
                    ok: BINDING;
            }
        }
    }
}
