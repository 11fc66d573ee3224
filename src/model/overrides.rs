//! KubeFleet `ClusterResourceOverride` and `ResourceOverride` (placement.kubernetes-fleet.io
//! v1alpha1, v1beta1 and v1, one model each): the spec, the API/CEL/webhook rules that concern one
//! override on its own, and the small questions the renderer asks of an override (does it follow
//! this placement, does it select this resource, does this rule target this cluster).
//! Cross-object rules (a resource selected by two overrides) belong to the catalog; applying
//! rules to manifests belongs to `render`.

use super::object::ObjectMeta;
use super::placement::SelectionScope;
use super::scope::{Scope, ScopeTable};
use super::selector::{LabelSelector, Labels};
use super::{is_dns1123_subdomain, ApiObject, Problem, Problems};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `ClusterResourceOverride` kind.
pub const CLUSTER_RESOURCE_OVERRIDE: &str = "ClusterResourceOverride";
/// The `ResourceOverride` kind.
pub const RESOURCE_OVERRIDE: &str = "ResourceOverride";

/// Most resource selectors, override rules and patches per rule an override may carry.
pub const MAX_ITEMS: usize = 20;

/// A cluster-scoped override: selects cluster-scoped resources (and, through a `Namespace`
/// selector, every resource of that namespace) by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterResourceOverride {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ClusterResourceOverrideSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterResourceOverrideSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<OverridePlacement>,
    pub cluster_resource_selectors: Vec<ClusterResourceSelector>,
    pub policy: OverridePolicy,
}

/// A namespaced override: selects resources of its own namespace by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceOverride {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ResourceOverrideSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceOverrideSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<OverridePlacement>,
    pub resource_selectors: Vec<ResourceSelector>,
    pub policy: OverridePolicy,
}

/// `spec.placement`: the one placement an override is limited to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverridePlacement {
    pub name: String,
    /// `Cluster` (the default) names a ClusterResourcePlacement; `Namespaced` a ResourcePlacement
    /// in the override's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<PlacementScope>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlacementScope {
    #[default]
    Cluster,
    Namespaced,
}

impl OverridePlacement {
    pub fn scope(&self) -> PlacementScope {
        self.scope.unwrap_or_default()
    }
}

/// A selector of a `ClusterResourceOverride`. `labelSelector` exists in the shared KubeFleet type
/// but overrides must select by name; it is decoded only to be rejected with a clear message.
/// `selectionScope` too is in the shared type (and the CRD): admitted, and without effect, as
/// KubeFleet's overrider matches a resource by group, version, kind and name only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterResourceSelector {
    pub group: String,
    pub version: String,
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_scope: Option<super::placement::SelectionScope>,
}

/// A selector of a `ResourceOverride`; the namespace is the override's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSelector {
    pub group: String,
    pub version: String,
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverridePolicy {
    #[serde(default)]
    pub override_rules: Vec<OverrideRule>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideRule {
    /// `None` selects no cluster; an empty selector (or empty term list) selects every cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<ClusterSelector>,
    #[serde(default)]
    pub override_type: OverrideType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_patch_overrides: Vec<JsonPatchOverride>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSelector {
    /// Required by the CRD (every version), at most 10 items; an empty list selects every
    /// cluster.
    pub cluster_selector_terms: Vec<ClusterSelectorTerm>,
}

/// One term of an override's cluster selector. Only `labelSelector` is supported; the property
/// fields of the shared KubeFleet type are decoded only to be rejected with a clear message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property_selector: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property_sorter: Option<Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OverrideType {
    #[default]
    JSONPatch,
    Delete,
}

/// One RFC 6902 operation. `value: null` reads as no value: the CRD's `value` is not nullable,
/// so the API server prunes the null before KubeFleet's webhook sees the object (a `remove`
/// with `value: null` is admitted; the test bed's API server stores it without `value`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonPatchOverride {
    pub op: PatchOp,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchOp {
    Add,
    Remove,
    Replace,
}

impl PatchOp {
    pub fn as_str(self) -> &'static str {
        match self {
            PatchOp::Add => "add",
            PatchOp::Remove => "remove",
            PatchOp::Replace => "replace",
        }
    }
}

impl ClusterSelector {
    /// Terms are ORed; no term at all selects every cluster.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.cluster_selector_terms.is_empty()
            || self.cluster_selector_terms.iter().any(|t| {
                t.label_selector
                    .as_ref()
                    .is_some_and(|ls| ls.matches(labels))
            })
    }
}

impl OverrideRule {
    /// Does this rule target a cluster with these labels? A rule without `clusterSelector`
    /// targets no cluster (KubeFleet: "a nil clusterSelector selects NO member clusters").
    pub fn selects_cluster(&self, labels: &Labels) -> bool {
        self.cluster_selector
            .as_ref()
            .is_some_and(|s| s.matches(labels))
    }
}

impl ClusterResourceSelector {
    /// Selectors identify a resource by group, kind and name; the version is not part of the
    /// identity (the same object served in two versions is the same object).
    pub fn selects(&self, group: &str, kind: &str, name: &str) -> bool {
        self.label_selector.is_none()
            && self.group == group
            && self.kind == kind
            && self.name == name
    }
}

impl ResourceSelector {
    /// See [`ClusterResourceSelector::selects`]: the version is not part of the identity.
    pub fn selects(&self, group: &str, kind: &str, name: &str) -> bool {
        self.group == group && self.kind == kind && self.name == name
    }
}

impl ClusterResourceOverride {
    /// Does this override follow the placement `name` (`namespace` `Some` for a
    /// ResourcePlacement)? Unset `spec.placement` follows every placement, ResourcePlacements
    /// included: KubeFleet skips a ClusterResourceOverride only when its placement names
    /// another placement key, and a ResourcePlacement's key is `namespace/name`, which no
    /// ClusterResourceOverride names (pkg/utils/overrider/overrider.go,
    /// FetchAllMatchingOverridesForResourceSnapshot). For a ResourcePlacement it then applies
    /// through the Namespace it selects.
    pub fn follows_placement(&self, name: &str, namespace: Option<&str>) -> bool {
        match (&self.spec.placement, namespace) {
            (None, _) => true,
            (Some(p), None) => p.scope() == PlacementScope::Cluster && p.name == name,
            (Some(_), Some(_)) => false,
        }
    }

    /// Does one of the selectors name this cluster-scoped resource?
    pub fn selects(&self, group: &str, kind: &str, name: &str) -> bool {
        self.spec
            .cluster_resource_selectors
            .iter()
            .any(|s| s.selects(group, kind, name))
    }

    /// Does the override select the `Namespace` called `namespace` (and so every resource in it)?
    pub fn selects_namespace(&self, namespace: &str) -> bool {
        self.selects("", "Namespace", namespace)
    }

    /// Rules that need to know which kinds are namespaced: a ClusterResourceOverride may select
    /// only cluster-scoped resources (kinds of unknown scope are let through).
    pub fn scope_problems(&self, scopes: &ScopeTable) -> Vec<Problem> {
        let mut p = Problems::default();
        for (i, s) in self.spec.cluster_resource_selectors.iter().enumerate() {
            if scopes.scope(&s.group, &s.kind) == Some(Scope::Namespaced) {
                p.push(
                    format!("spec.clusterResourceSelectors[{i}]"),
                    format!(
                        "clusterResourceOverride can only select cluster scoped resources; {} is namespaced (use a ResourceOverride, or select its Namespace)",
                        s.kind
                    ),
                );
            }
        }
        p.0
    }
}

impl ResourceOverride {
    /// The override's namespace (empty when the document does not say).
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// Does this override follow the placement `name` (`namespace` `Some` for a
    /// ResourcePlacement)? Unset `spec.placement` follows every placement; scope `Cluster` (the
    /// default) names a ClusterResourcePlacement; `Namespaced` a ResourcePlacement in the
    /// override's own namespace.
    pub fn follows_placement(&self, name: &str, namespace: Option<&str>) -> bool {
        match &self.spec.placement {
            None => true,
            Some(p) if p.name != name => false,
            Some(p) => match (p.scope(), namespace) {
                (PlacementScope::Cluster, None) => true,
                (PlacementScope::Namespaced, Some(ns)) => ns == self.namespace(),
                _ => false,
            },
        }
    }

    /// Does one of the selectors name this resource of the override's namespace?
    pub fn selects(&self, group: &str, kind: &str, namespace: &str, name: &str) -> bool {
        namespace == self.namespace()
            && self
                .spec
                .resource_selectors
                .iter()
                .any(|s| s.selects(group, kind, name))
    }
}

impl ApiObject for ClusterResourceOverride {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        validate_name(&self.metadata, &mut p);
        if let Some(pl) = &self.spec.placement {
            validate_placement_ref(pl, &mut p);
            if pl.scope() == PlacementScope::Namespaced {
                p.push(
                    "spec.placement.scope",
                    "clusterResourceOverride placement reference cannot be Namespaced scope",
                );
            }
        }
        let f = "spec.clusterResourceSelectors";
        let selectors = &self.spec.cluster_resource_selectors;
        validate_count(f, selectors.len(), "resource selector", &mut p);
        let mut seen: Vec<SelectorKey> = Vec::new();
        for (i, s) in selectors.iter().enumerate() {
            let sf = format!("{f}[{i}]");
            if s.label_selector.is_some() {
                p.push(
                    format!("{sf}.labelSelector"),
                    "label selector is not supported for resource selection; select the resource by name",
                );
                continue;
            }
            // The webhook compares whole selectors, the defaulted scope included.
            let key = (
                s.group.as_str(),
                s.version.as_str(),
                s.kind.as_str(),
                s.name.as_str(),
                s.selection_scope.unwrap_or_default(),
            );
            validate_selector(&sf, key, &mut seen, &mut p);
        }
        validate_policy(&self.spec.policy, &mut p);
        p.0
    }
}

impl ApiObject for ResourceOverride {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        validate_name(&self.metadata, &mut p);
        if let Some(pl) = &self.spec.placement {
            validate_placement_ref(pl, &mut p);
        }
        let f = "spec.resourceSelectors";
        let selectors = &self.spec.resource_selectors;
        validate_count(f, selectors.len(), "resource selector", &mut p);
        let mut seen: Vec<SelectorKey> = Vec::new();
        for (i, s) in selectors.iter().enumerate() {
            let key = (
                s.group.as_str(),
                s.version.as_str(),
                s.kind.as_str(),
                s.name.as_str(),
                SelectionScope::default(),
            );
            validate_selector(&format!("{f}[{i}]"), key, &mut seen, &mut p);
        }
        validate_policy(&self.spec.policy, &mut p);
        p.0
    }
}

fn validate_name(meta: &ObjectMeta, p: &mut Problems) {
    if meta.name.is_empty() {
        p.push("metadata.name", "Required value: name is required");
    } else if !is_dns1123_subdomain(&meta.name) {
        p.push(
            "metadata.name",
            "must be a DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', starting and ending with an alphanumeric",
        );
    }
}

fn validate_placement_ref(pl: &OverridePlacement, p: &mut Problems) {
    if pl.name.is_empty() {
        p.push(
            "spec.placement.name",
            "Required value: the placement name is required",
        );
    }
}

/// `1..=20` items.
fn validate_count(field: &str, n: usize, what: &str, p: &mut Problems) {
    if n == 0 {
        p.push(
            field,
            format!("Required value: at least one {what} is required"),
        );
    } else if n > MAX_ITEMS {
        p.push(
            field,
            format!("must have at most {MAX_ITEMS} items, got {n}"),
        );
    }
}

type SelectorKey<'a> = (&'a str, &'a str, &'a str, &'a str, SelectionScope);

fn validate_selector<'a>(
    field: &str,
    key: SelectorKey<'a>,
    seen: &mut Vec<SelectorKey<'a>>,
    p: &mut Problems,
) {
    let (group, version, kind, name, _) = key;
    if version.is_empty() {
        p.push(format!("{field}.version"), "Required value");
    }
    if kind.is_empty() {
        p.push(format!("{field}.kind"), "Required value");
    }
    if name.is_empty() {
        p.push(
            format!("{field}.name"),
            "Required value: resource name is required for resource selection",
        );
        return;
    }
    if seen.contains(&key) {
        p.push(
            field,
            format!(
                "resource selector {{group: {group:?}, version: {version:?}, kind: {kind:?}, name: {name:?}}} already exists, and must be unique"
            ),
        );
    } else {
        seen.push(key);
    }
}

fn validate_policy(policy: &OverridePolicy, p: &mut Problems) {
    let f = "spec.policy.overrideRules";
    validate_count(f, policy.override_rules.len(), "override rule", p);
    for (i, rule) in policy.override_rules.iter().enumerate() {
        let rf = format!("{f}[{i}]");
        if let Some(cs) = &rule.cluster_selector {
            let n = cs.cluster_selector_terms.len();
            if n > 10 {
                p.push(
                    format!("{rf}.clusterSelector.clusterSelectorTerms"),
                    format!("Too many: {n}: must have at most 10 items"),
                );
            }
            for (j, term) in cs.cluster_selector_terms.iter().enumerate() {
                validate_term(
                    term,
                    &format!("{rf}.clusterSelector.clusterSelectorTerms[{j}]"),
                    p,
                );
            }
        }
        let pf = format!("{rf}.jsonPatchOverrides");
        match rule.override_type {
            OverrideType::Delete => {
                if !rule.json_patch_overrides.is_empty() {
                    p.push(
                        pf,
                        "jsonPatchOverrides cannot be set when the overrideType is Delete",
                    );
                }
            }
            OverrideType::JSONPatch => {
                let n = rule.json_patch_overrides.len();
                if n == 0 {
                    p.push(
                        pf.clone(),
                        "Required value: jsonPatchOverrides cannot be empty when the overrideType is JSONPatch",
                    );
                } else if n > MAX_ITEMS {
                    p.push(
                        pf.clone(),
                        format!("must have at most {MAX_ITEMS} items, got {n}"),
                    );
                }
                for (j, patch) in rule.json_patch_overrides.iter().enumerate() {
                    let of = format!("{pf}[{j}]");
                    if let Err(msg) = check_patch_path(&patch.path) {
                        p.push(format!("{of}.path"), msg);
                    }
                    if patch.op == PatchOp::Remove && patch.value.is_some() {
                        p.push(format!("{of}.value"), "remove operation cannot have value");
                    }
                }
            }
        }
    }
}

fn validate_term(term: &ClusterSelectorTerm, f: &str, p: &mut Problems) {
    if term.property_selector.is_some() {
        p.push(
            format!("{f}.propertySelector"),
            "only labelSelector is supported in the clusterSelector of an override",
        );
    }
    if term.property_sorter.is_some() {
        p.push(
            format!("{f}.propertySorter"),
            "only labelSelector is supported in the clusterSelector of an override",
        );
    }
    match &term.label_selector {
        None => p.push(
            format!("{f}.labelSelector"),
            "Required value: labelSelector is required",
        ),
        // The webhook's LabelSelectorAsSelector: structure, keys and values.
        Some(ls) => super::member::check_selector(&format!("{f}.labelSelector"), ls, p),
    }
}

/// KubeFleet's path rules: starts with `/`, no empty segment, and never the type meta, the
/// status or metadata other than labels and annotations.
pub fn check_patch_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("Required value: path cannot be empty".into());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("path {path:?} must start with /"));
    };
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        ["kind" | "apiVersion", ..] => {
            return Err(format!("path {path:?}: cannot override typeMeta fields"))
        }
        ["metadata"] => return Err(format!("path {path:?}: cannot override field metadata")),
        ["metadata", field, ..] if *field != "labels" && *field != "annotations" => {
            return Err(format!(
                "path {path:?}: cannot override metadata fields except annotations and labels"
            ))
        }
        ["status", ..] => return Err(format!("path {path:?}: cannot override status fields")),
        _ => {}
    }
    if parts.iter().any(|s| s.trim().is_empty()) {
        return Err(format!("path {path:?} cannot contain empty segments"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::decode;

    fn cro(yaml: &str) -> ClusterResourceOverride {
        let v: Value = crate::yaml::from_str(yaml).unwrap();
        decode(&v).unwrap()
    }

    fn ro(yaml: &str) -> ResourceOverride {
        let v: Value = crate::yaml::from_str(yaml).unwrap();
        decode(&v).unwrap()
    }

    fn problems<T: ApiObject>(t: &T) -> Vec<(String, String)> {
        t.validate()
            .into_iter()
            .map(|p| (p.field, p.message))
            .collect()
    }

    const CRO_HEAD: &str =
        "apiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ClusterResourceOverride\nmetadata: {name: cro}\nspec:\n";
    const RO_HEAD: &str = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ResourceOverride\nmetadata: {name: ro, namespace: app}\nspec:\n";
    const CRO_SEL: &str =
        "  clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n";
    const RO_SEL: &str =
        "  resourceSelectors: [{group: apps, version: v1, kind: Deployment, name: web}]\n";
    const RULES: &str = "  policy:\n    overrideRules:\n    - clusterSelector: {clusterSelectorTerms: []}\n      jsonPatchOverrides: [{op: add, path: /metadata/labels/a, value: b}]\n";

    #[test]
    fn kubefleet_examples_decode_and_validate() {
        let Some(corpus) = crate::compat_corpus::corpus() else {
            return;
        };
        let dir = corpus.join("kubefleet-examples");
        for file in [
            "test-cro1.yaml",
            "test-ro1.yaml",
            "nginx/config-ro.yaml",
            "migration/resourceoverride.yaml",
        ] {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let v: Value = crate::yaml::from_str(&text).unwrap();
            let problems = if v["kind"] == "ClusterResourceOverride" {
                decode::<ClusterResourceOverride>(&v).unwrap().validate()
            } else {
                decode::<ResourceOverride>(&v).unwrap().validate()
            };
            assert_eq!(problems, vec![], "{file}");
        }
    }

    #[test]
    fn valid_overrides_have_no_problems() {
        assert_eq!(
            problems(&cro(&format!("{CRO_HEAD}{CRO_SEL}{RULES}"))),
            vec![]
        );
        assert_eq!(problems(&ro(&format!("{RO_HEAD}{RO_SEL}{RULES}"))), vec![]);
    }

    #[test]
    fn label_selectors_are_unknown_fields_on_resource_overrides() {
        let y = format!(
            "{RO_HEAD}  resourceSelectors: [{{group: apps, version: v1, kind: Deployment, name: web, labelSelector: {{}}}}]\n{RULES}"
        );
        let v: Value = crate::yaml::from_str(&y).unwrap();
        let err = decode::<ResourceOverride>(&v).unwrap_err();
        assert_eq!(err.field, "spec.resourceSelectors[0].labelSelector");
    }

    #[test]
    fn override_type_defaults_to_json_patch() {
        let o = cro(&format!("{CRO_HEAD}{CRO_SEL}{RULES}"));
        assert_eq!(
            o.spec.policy.override_rules[0].override_type,
            OverrideType::JSONPatch
        );
    }

    fn twenty_one(item: &str) -> String {
        vec![item; 21].join(", ")
    }

    #[test]
    fn cluster_override_rules_each_name_their_field() {
        let sel = |s: &str| format!("  clusterResourceSelectors: [{s}]\n");
        let ns = |n: usize| format!("{{group: '', version: v1, kind: Namespace, name: n{n}}}");
        let many: Vec<String> = (0..21).map(ns).collect();
        let cases: Vec<(String, &str, &str)> = vec![
            (sel(""), "spec.clusterResourceSelectors", "Required value: at least one resource selector is required"),
            (sel(&many.join(", ")), "spec.clusterResourceSelectors", "must have at most 20 items, got 21"),
            (
                sel("{group: '', version: v1, kind: Namespace}"),
                "spec.clusterResourceSelectors[0].name",
                "Required value: resource name is required for resource selection",
            ),
            (
                sel("{group: '', version: v1, kind: Namespace, labelSelector: {matchLabels: {a: b}}}"),
                "spec.clusterResourceSelectors[0].labelSelector",
                "label selector is not supported for resource selection; select the resource by name",
            ),
            (
                sel("{group: '', version: v1, kind: Namespace, name: a}, {group: '', version: v1, kind: Namespace, name: a}"),
                "spec.clusterResourceSelectors[1]",
                "resource selector {group: \"\", version: \"v1\", kind: \"Namespace\", name: \"a\"} already exists, and must be unique",
            ),
            (
                format!("  placement: {{name: crp, scope: Namespaced}}\n{CRO_SEL}"),
                "spec.placement.scope",
                "clusterResourceOverride placement reference cannot be Namespaced scope",
            ),
            (
                format!("  placement: {{name: ''}}\n{CRO_SEL}"),
                "spec.placement.name",
                "Required value: the placement name is required",
            ),
        ];
        for (spec, field, msg) in cases {
            let o = cro(&format!("{CRO_HEAD}{spec}{RULES}"));
            assert_eq!(
                problems(&o),
                vec![(field.to_string(), msg.to_string())],
                "{spec}"
            );
        }
    }

    #[test]
    fn resource_override_selectors() {
        let sel = |s: &str| format!("  resourceSelectors: [{s}]\n");
        let d = "{group: apps, version: v1, kind: Deployment, name: web}";
        let many: Vec<String> = (0..21)
            .map(|i| format!("{{group: apps, version: v1, kind: Deployment, name: d{i}}}"))
            .collect();
        let cases: Vec<(String, &str, &str)> = vec![
            (sel(""), "spec.resourceSelectors", "Required value: at least one resource selector is required"),
            (sel(&many.join(", ")), "spec.resourceSelectors", "must have at most 20 items, got 21"),
            (
                sel("{group: apps, version: v1, kind: Deployment, name: ''}"),
                "spec.resourceSelectors[0].name",
                "Required value: resource name is required for resource selection",
            ),
            (
                sel("{group: apps, version: '', kind: '', name: x}"),
                "spec.resourceSelectors[0].version",
                "Required value",
            ),
            (
                sel(&format!("{d}, {d}")),
                "spec.resourceSelectors[1]",
                "resource selector {group: \"apps\", version: \"v1\", kind: \"Deployment\", name: \"web\"} already exists, and must be unique",
            ),
        ];
        for (spec, field, msg) in cases {
            let o = ro(&format!("{RO_HEAD}{spec}{RULES}"));
            let got = problems(&o);
            assert_eq!(got[0], (field.to_string(), msg.to_string()), "{spec}");
            if field.ends_with(".version") {
                assert_eq!(got[1].0, "spec.resourceSelectors[0].kind");
            } else {
                assert_eq!(got.len(), 1, "{got:?}");
            }
        }
        // A namespaced placement reference is fine for a ResourceOverride.
        let o = ro(&format!(
            "{RO_HEAD}  placement: {{name: rp, scope: Namespaced}}\n{RO_SEL}{RULES}"
        ));
        assert_eq!(problems(&o), vec![]);
    }

    #[test]
    fn metadata_name_is_required() {
        let y = format!("{CRO_HEAD}{CRO_SEL}{RULES}").replace("{name: cro}", "{name: ''}");
        assert_eq!(
            problems(&cro(&y)),
            vec![(
                "metadata.name".to_string(),
                "Required value: name is required".to_string()
            )]
        );
        let y = format!("{RO_HEAD}{RO_SEL}{RULES}").replace("name: ro,", "name: Bad_Name,");
        assert_eq!(problems(&ro(&y))[0].0, "metadata.name");
    }

    #[test]
    fn policy_rules_each_name_their_field() {
        let r = "spec.policy.overrideRules";
        let rule = |body: &str| format!("  policy:\n    overrideRules:\n    - {body}\n");
        let patch = |p: &str| {
            rule(&format!(
                "clusterSelector: {{clusterSelectorTerms: []}}\n      jsonPatchOverrides: [{p}]"
            ))
        };
        let op = "{op: add, path: /spec/x, value: 1}";
        let cases: Vec<(String, String, &str)> = vec![
            (
                "  policy: {overrideRules: []}\n".into(),
                r.into(),
                "Required value: at least one override rule is required",
            ),
            (
                format!(
                    "  policy:\n    overrideRules: [{}]\n",
                    twenty_one("{overrideType: Delete}")
                ),
                r.into(),
                "must have at most 20 items, got 21",
            ),
            (
                rule("clusterSelector: {clusterSelectorTerms: []}"),
                format!("{r}[0].jsonPatchOverrides"),
                "Required value: jsonPatchOverrides cannot be empty when the overrideType is JSONPatch",
            ),
            (
                patch(&twenty_one(op)),
                format!("{r}[0].jsonPatchOverrides"),
                "must have at most 20 items, got 21",
            ),
            (
                rule(&format!("overrideType: Delete\n      jsonPatchOverrides: [{op}]")),
                format!("{r}[0].jsonPatchOverrides"),
                "jsonPatchOverrides cannot be set when the overrideType is Delete",
            ),
            (
                patch(&format!("{op}, {{op: remove, path: /spec/y, value: 1}}")),
                format!("{r}[0].jsonPatchOverrides[1].value"),
                "remove operation cannot have value",
            ),
            (
                rule("clusterSelector:\n        clusterSelectorTerms: [{}]\n      overrideType: Delete"),
                format!("{r}[0].clusterSelector.clusterSelectorTerms[0].labelSelector"),
                "Required value: labelSelector is required",
            ),
            (
                rule("clusterSelector:\n        clusterSelectorTerms: [{labelSelector: {}, propertySelector: {}}]\n      overrideType: Delete"),
                format!("{r}[0].clusterSelector.clusterSelectorTerms[0].propertySelector"),
                "only labelSelector is supported in the clusterSelector of an override",
            ),
            (
                rule("clusterSelector:\n        clusterSelectorTerms: [{labelSelector: {}, propertySorter: {}}]\n      overrideType: Delete"),
                format!("{r}[0].clusterSelector.clusterSelectorTerms[0].propertySorter"),
                "only labelSelector is supported in the clusterSelector of an override",
            ),
            (
                rule("clusterSelector:\n        clusterSelectorTerms: [{labelSelector: {matchExpressions: [{key: env, operator: In}]}}]\n      overrideType: Delete"),
                format!("{r}[0].clusterSelector.clusterSelectorTerms[0].labelSelector.matchExpressions[0].values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            ),
        ];
        for (policy, field, msg) in cases {
            let o = cro(&format!("{CRO_HEAD}{CRO_SEL}{policy}"));
            assert_eq!(problems(&o), vec![(field, msg.to_string())], "{policy}");
            let o = ro(&format!("{RO_HEAD}{RO_SEL}{policy}"));
            assert_eq!(problems(&o).len(), 1, "{policy}");
        }
        // A Delete rule without a cluster selector, and an empty term list, are valid.
        let o = cro(&format!(
            "{CRO_HEAD}{CRO_SEL}{}",
            rule("overrideType: Delete")
        ));
        assert_eq!(problems(&o), vec![]);
    }

    #[test]
    fn patch_paths_follow_kubefleet() {
        let cases: &[(&str, Option<&str>)] = &[
            ("/spec/replicas", None),
            ("/metadata/labels", None),
            ("/metadata/labels/app", None),
            ("/metadata/annotations/a~1b", None),
            ("/data/key", None),
            ("/spec/template/spec/containers/0/image", None),
            ("", Some("Required value: path cannot be empty")),
            ("spec/replicas", Some("path \"spec/replicas\" must start with /")),
            ("/", Some("path \"/\" cannot contain empty segments")),
            ("/spec//replicas", Some("path \"/spec//replicas\" cannot contain empty segments")),
            ("/spec/ /replicas", Some("path \"/spec/ /replicas\" cannot contain empty segments")),
            ("/metadata/labels/", Some("path \"/metadata/labels/\" cannot contain empty segments")),
            ("/kind", Some("path \"/kind\": cannot override typeMeta fields")),
            ("/apiVersion", Some("path \"/apiVersion\": cannot override typeMeta fields")),
            ("/status", Some("path \"/status\": cannot override status fields")),
            ("/status/phase", Some("path \"/status/phase\": cannot override status fields")),
            ("/metadata", Some("path \"/metadata\": cannot override field metadata")),
            (
                "/metadata/name",
                Some("path \"/metadata/name\": cannot override metadata fields except annotations and labels"),
            ),
            (
                "/metadata/namespace",
                Some("path \"/metadata/namespace\": cannot override metadata fields except annotations and labels"),
            ),
            (
                "/metadata/finalizers/0",
                Some("path \"/metadata/finalizers/0\": cannot override metadata fields except annotations and labels"),
            ),
        ];
        for (path, want) in cases {
            assert_eq!(check_patch_path(path).err().as_deref(), *want, "{path}");
        }
        // The rule reports through validate with the full field path.
        let o = cro(&format!(
            "{CRO_HEAD}{CRO_SEL}  policy:\n    overrideRules:\n    - jsonPatchOverrides: [{{op: add, path: /spec/a, value: 1}}, {{op: replace, path: /kind, value: X}}]\n"
        ));
        assert_eq!(
            problems(&o),
            vec![(
                "spec.policy.overrideRules[0].jsonPatchOverrides[1].path".to_string(),
                "path \"/kind\": cannot override typeMeta fields".to_string()
            )]
        );
    }

    #[test]
    fn unknown_op_is_a_decode_error() {
        let y = format!(
            "{CRO_HEAD}{CRO_SEL}  policy:\n    overrideRules:\n    - jsonPatchOverrides: [{{op: move, path: /spec/a}}]\n"
        );
        let v: Value = crate::yaml::from_str(&y).unwrap();
        let err = decode::<ClusterResourceOverride>(&v).unwrap_err();
        assert_eq!(
            err.field,
            "spec.policy.overrideRules[0].jsonPatchOverrides[0].op"
        );
    }

    #[test]
    fn cluster_selector_matching() {
        let labels: Labels = [("env".to_string(), "prod".to_string())].into();
        let rule = |cs: &str| -> OverrideRule {
            let v: Value =
                crate::yaml::from_str(&format!("{{{cs} overrideType: Delete}}")).unwrap();
            decode(&v).unwrap()
        };
        let cases = [
            ("", false),                                 // nil selector: no cluster
            ("clusterSelector: {clusterSelectorTerms: []},", true),
            ("clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {env: prod}}}]},", true),
            ("clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {env: dev}}}]},", false),
            (
                "clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {env: dev}}}, {labelSelector: {matchLabels: {env: prod}}}]},",
                true,
            ),
            ("clusterSelector: {clusterSelectorTerms: [{labelSelector: {}}]},", true),
        ];
        for (cs, want) in cases {
            assert_eq!(rule(cs).selects_cluster(&labels), want, "{cs}");
        }
    }

    #[test]
    fn placement_following() {
        let with = |pl: &str| format!("{RO_HEAD}{pl}{RO_SEL}{RULES}");
        let unset = ro(&with(""));
        let cluster = ro(&with("  placement: {name: p}\n"));
        let cluster_explicit = ro(&with("  placement: {name: p, scope: Cluster}\n"));
        let namespaced = ro(&with("  placement: {name: p, scope: Namespaced}\n"));
        let cases = [
            (&unset, "p", None, true),
            (&unset, "q", Some("other"), true),
            (&cluster, "p", None, true),
            (&cluster, "q", None, false),
            (&cluster, "p", Some("app"), false),
            (&cluster_explicit, "p", None, true),
            (&namespaced, "p", Some("app"), true),
            (&namespaced, "p", Some("other"), false),
            (&namespaced, "p", None, false),
            (&namespaced, "q", Some("app"), false),
        ];
        for (o, name, ns, want) in cases {
            assert_eq!(
                o.follows_placement(name, ns),
                want,
                "{:?} {name} {ns:?}",
                o.spec.placement
            );
        }
        let c = cro(&format!(
            "{CRO_HEAD}  placement: {{name: p}}\n{CRO_SEL}{RULES}"
        ));
        assert!(c.follows_placement("p", None));
        assert!(!c.follows_placement("q", None));
        // A ResourcePlacement's key is namespace/name, which no CRO's placement names.
        assert!(!c.follows_placement("p", Some("app")));
        let unbound = cro(&format!("{CRO_HEAD}{CRO_SEL}{RULES}"));
        assert!(unbound.follows_placement("q", None));
        assert!(unbound.follows_placement("q", Some("app")));
    }

    #[test]
    fn selection_ignores_version() {
        let c = cro(&format!(
            "{CRO_HEAD}  clusterResourceSelectors: [{{group: rbac.authorization.k8s.io, version: v1beta1, kind: ClusterRole, name: r}}, {{group: '', version: v1, kind: Namespace, name: app}}]\n{RULES}"
        ));
        assert!(c.selects("rbac.authorization.k8s.io", "ClusterRole", "r"));
        assert!(!c.selects("rbac.authorization.k8s.io", "ClusterRole", "s"));
        assert!(!c.selects("", "ClusterRole", "r"));
        assert!(c.selects_namespace("app"));
        assert!(!c.selects_namespace("other"));
        let r = ro(&format!("{RO_HEAD}{RO_SEL}{RULES}"));
        assert!(r.selects("apps", "Deployment", "app", "web"));
        assert!(!r.selects("apps", "Deployment", "other", "web"));
        assert!(!r.selects("apps", "StatefulSet", "app", "web"));
    }

    #[test]
    fn cluster_override_may_not_select_namespaced_kinds() {
        let c = cro(&format!(
            "{CRO_HEAD}  clusterResourceSelectors: [{{group: '', version: v1, kind: Namespace, name: a}}, {{group: apps, version: v1, kind: Deployment, name: web}}, {{group: example.com, version: v1, kind: Widget, name: w}}]\n{RULES}"
        ));
        let got = c.scope_problems(&ScopeTable::builtin());
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].field, "spec.clusterResourceSelectors[1]");
        assert!(got[0].message.starts_with("clusterResourceOverride can only select cluster scoped resources; Deployment is namespaced"));
    }

    /// The API server prunes `value: null` (the field is not nullable) before KubeFleet's
    /// webhook checks that a `remove` has no value: admitted.
    #[test]
    fn remove_with_null_value_is_a_remove_without_value() {
        let o = cro(&format!(
            "{CRO_HEAD}{CRO_SEL}  policy:\n    overrideRules:\n    - jsonPatchOverrides: [{{op: remove, path: /spec/y, value: null}}]\n"
        ));
        assert_eq!(problems(&o), vec![]);
        assert_eq!(
            o.spec.policy.override_rules[0].json_patch_overrides[0].value,
            None
        );
    }

    /// The CRD's shared selector type has `selectionScope`: admitted on a
    /// ClusterResourceOverride's selector, and part of what makes two selectors the same for the
    /// webhook's duplicate rule.
    #[test]
    fn cluster_override_selector_admits_selection_scope() {
        let ns = "{group: '', version: v1, kind: Namespace, name: app";
        let o = cro(&format!(
            "{CRO_HEAD}  clusterResourceSelectors: [{ns}, selectionScope: NamespaceOnly}}, {ns}}}]\n{RULES}"
        ));
        assert_eq!(problems(&o), vec![]);
        let o = cro(&format!(
            "{CRO_HEAD}  clusterResourceSelectors: [{ns}, selectionScope: NamespaceWithResources}}, {ns}}}]\n{RULES}"
        ));
        assert_eq!(problems(&o)[0].0, "spec.clusterResourceSelectors[1]");
    }

    /// KubeFleet's webhook turns each term's label selector into a selector
    /// (`LabelSelectorAsSelector`): keys and values must be label keys and values.
    #[test]
    fn override_cluster_selector_keys_and_values_are_labels() {
        let rule = |ls: &str| {
            format!(
                "  policy:\n    overrideRules:\n    - clusterSelector: {{clusterSelectorTerms: [{{labelSelector: {ls}}}]}}\n      overrideType: Delete\n"
            )
        };
        let f =
            "spec.policy.overrideRules[0].clusterSelector.clusterSelectorTerms[0].labelSelector";
        for (ls, field) in [
            ("{matchLabels: {'bad key!': x}}", format!("{f}.matchLabels")),
            ("{matchLabels: {env: '-x'}}", format!("{f}.matchLabels")),
            (
                "{matchExpressions: [{key: 'a/b/c', operator: Exists}]}",
                format!("{f}.matchExpressions[0].key"),
            ),
        ] {
            let got = problems(&cro(&format!("{CRO_HEAD}{CRO_SEL}{}", rule(ls))));
            assert_eq!(got.len(), 1, "{ls}: {got:?}");
            assert_eq!(got[0].0, field, "{ls}");
        }
        assert_eq!(
            problems(&cro(&format!(
                "{CRO_HEAD}{CRO_SEL}{}",
                rule("{matchLabels: {example.com/env: prod}}")
            ))),
            vec![]
        );
    }

    /// `required: [clusterSelectorTerms]` of the CRD (v1alpha1, v1beta1, v1) on an override
    /// rule's `clusterSelector`: `{}` is refused, `{clusterSelectorTerms: []}` selects every
    /// cluster.
    #[test]
    fn override_cluster_selector_terms_are_required() {
        let y = format!(
            "{CRO_HEAD}{CRO_SEL}  policy:\n    overrideRules:\n    - clusterSelector: {{}}\n      overrideType: Delete\n"
        );
        let v: Value = crate::yaml::from_str(&y).unwrap();
        let err = decode::<ClusterResourceOverride>(&v).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.message.as_str()),
            (
                "spec.policy.overrideRules[0].clusterSelector",
                "missing field `clusterSelectorTerms`"
            )
        );
    }

    /// `maxItems: 10` of the CRD on an override rule's `clusterSelectorTerms`.
    #[test]
    fn override_cluster_selector_terms_are_at_most_10() {
        let terms = |n: usize| {
            format!(
                "  policy:\n    overrideRules:\n    - clusterSelector: {{clusterSelectorTerms: [{}]}}\n      overrideType: Delete\n",
                vec!["{labelSelector: {}}"; n].join(", ")
            )
        };
        assert!(problems(&cro(&format!("{CRO_HEAD}{CRO_SEL}{}", terms(10)))).is_empty());
        let got = problems(&cro(&format!("{CRO_HEAD}{CRO_SEL}{}", terms(11))));
        assert_eq!(
            got,
            [(
                "spec.policy.overrideRules[0].clusterSelector.clusterSelectorTerms".to_string(),
                "Too many: 11: must have at most 10 items".to_string()
            )]
        );
    }
    /// One test per rule of the CRDs and of KubeFleet's webhook
    /// (pkg/utils/validator/clusterresourceoverride.go, resourceoverride.go), named after it.
    mod rules {
        use super::{CRO_HEAD, CRO_SEL, RO_HEAD};
        use crate::model::testing::rule_tests;

        const PATCH: &str = "{op: add, path: /metadata/labels/a, value: b}";

        /// A ClusterResourceOverride with these selectors and one rule.
        fn cro(selectors: &str, rule: &str) -> String {
            format!("{CRO_HEAD}  clusterResourceSelectors: [{selectors}]\n  policy:\n    overrideRules: [{rule}]\n")
        }
        fn cro_rule(rule: &str) -> String {
            cro("{group: '', version: v1, kind: Namespace, name: app}", rule)
        }
        fn cro_rules(rules: &str) -> String {
            format!("{CRO_HEAD}{CRO_SEL}  policy:\n    overrideRules: [{rules}]\n")
        }
        fn patches(list: &str) -> String {
            cro_rule(&format!("{{jsonPatchOverrides: [{list}]}}"))
        }
        fn path(path: &str) -> String {
            patches(&format!("{{op: add, path: '{path}', value: x}}"))
        }
        fn terms(terms: &str) -> String {
            cro_rule(&format!(
                "{{clusterSelector: {{clusterSelectorTerms: [{terms}]}}, jsonPatchOverrides: [{PATCH}]}}"
            ))
        }
        fn n(count: usize, item: &str) -> String {
            vec![item; count].join(", ")
        }
        fn namespaces(count: usize) -> String {
            let items: Vec<String> = (0..count)
                .map(|i| format!("{{group: '', version: v1, kind: Namespace, name: ns{i}}}"))
                .collect();
            cro(
                &items.join(", "),
                &format!("{{jsonPatchOverrides: [{PATCH}]}}"),
            )
        }
        fn with_placement(pl: &str) -> String {
            cro_rule(&format!("{{jsonPatchOverrides: [{PATCH}]}}"))
                .replace("spec:\n", &format!("spec:\n  placement: {pl}\n"))
        }
        fn named(name: &str) -> String {
            cro_rule(&format!("{{jsonPatchOverrides: [{PATCH}]}}"))
                .replace("{name: cro}", &format!("{{name: '{name}'}}"))
        }
        const TERMS: &str = "policy.overrideRules[0].clusterSelector.clusterSelectorTerms";
        const NS: &str = "{group: '', version: v1, kind: Namespace, name: app}";

        rule_tests! { super::ClusterResourceOverride;
            name_is_required: named("") => "metadata.name", "name is required";
                ok: named("a");
            name_is_a_dns_subdomain: named("Bad_Name") => "metadata.name", "DNS-1123 subdomain";
                ok: named("a.b-c");
            placement_name_required: with_placement("{name: ''}") => "spec.placement.name", "placement name is required";
                ok: with_placement("{name: crp}");
            cluster_override_placement_not_namespaced: with_placement("{name: rp, scope: Namespaced}") => "spec.placement.scope", "cannot be Namespaced scope";
                ok: with_placement("{name: crp, scope: Cluster}");
            placement_scope_is_an_enum: with_placement("{name: crp, scope: Fleet}") => "spec.placement.scope", "unknown variant";
                ok: with_placement("{name: crp, scope: Cluster}");
            cluster_resource_selectors_required: namespaces(0) => "spec.clusterResourceSelectors", "at least one resource selector";
                ok: namespaces(1);
            cluster_resource_selectors_at_most_20: namespaces(21) => "spec.clusterResourceSelectors", "at most 20 items";
                ok: namespaces(20);
            cluster_resource_selector_no_label_selector: cro("{group: '', version: v1, kind: Namespace, labelSelector: {}}", &format!("{{jsonPatchOverrides: [{PATCH}]}}")) => "spec.clusterResourceSelectors[0].labelSelector", "label selector is not supported";
                ok: namespaces(1);
            cluster_resource_selector_name_required: cro("{group: '', version: v1, kind: Namespace}", &format!("{{jsonPatchOverrides: [{PATCH}]}}")) => "spec.clusterResourceSelectors[0].name", "resource name is required";
                ok: namespaces(1);
            cluster_resource_selector_version_required: cro("{group: '', version: '', kind: Namespace, name: a}", &format!("{{jsonPatchOverrides: [{PATCH}]}}")) => "spec.clusterResourceSelectors[0].version", "Required value";
                ok: namespaces(1);
            cluster_resource_selector_kind_required: cro("{group: '', version: v1, kind: '', name: a}", &format!("{{jsonPatchOverrides: [{PATCH}]}}")) => "spec.clusterResourceSelectors[0].kind", "Required value";
                ok: namespaces(1);
            cluster_resource_selectors_unique: cro(&format!("{NS}, {NS}"), &format!("{{jsonPatchOverrides: [{PATCH}]}}")) => "spec.clusterResourceSelectors[1]", "must be unique";
                ok: cro(&format!("{NS}, {}", NS.replace("}", ", selectionScope: NamespaceOnly}")), &format!("{{jsonPatchOverrides: [{PATCH}]}}"));
            override_rules_required: cro_rules("") => "spec.policy.overrideRules", "at least one override rule";
                ok: cro_rules(&format!("{{jsonPatchOverrides: [{PATCH}]}}"));
            override_rules_at_most_20: cro_rules(&n(21, &format!("{{jsonPatchOverrides: [{PATCH}]}}"))) => "spec.policy.overrideRules", "at most 20 items";
                ok: cro_rules(&n(20, &format!("{{jsonPatchOverrides: [{PATCH}]}}")));
            override_type_is_an_enum: cro_rule("{overrideType: Replace}") => "spec.policy.overrideRules[0].overrideType", "unknown variant";
                ok: cro_rule("{overrideType: Delete}");
            override_cluster_selector_terms_required: cro_rule(&format!("{{clusterSelector: {{}}, jsonPatchOverrides: [{PATCH}]}}")) => "spec.policy.overrideRules[0].clusterSelector", "missing field `clusterSelectorTerms`";
                ok: terms("");
            override_cluster_selector_terms_at_most_10: terms(&n(11, "{labelSelector: {}}")) => format!("spec.{TERMS}"), "must have at most 10 items";
                ok: terms(&n(10, "{labelSelector: {}}"));
            override_term_refuses_property_selector: terms("{labelSelector: {}, propertySelector: {matchExpressions: []}}") => format!("spec.{TERMS}[0].propertySelector"), "only labelSelector is supported";
                ok: terms("{labelSelector: {}}");
            override_term_refuses_property_sorter: terms("{labelSelector: {}, propertySorter: {name: x, sortOrder: Ascending}}") => format!("spec.{TERMS}[0].propertySorter"), "only labelSelector is supported";
                ok: terms("{labelSelector: {}}");
            override_term_requires_label_selector: terms("{}") => format!("spec.{TERMS}[0].labelSelector"), "labelSelector is required";
                ok: terms("{labelSelector: {}}");
            override_term_label_selector_keys_are_qualified_names: terms("{labelSelector: {matchLabels: {'a/b/c': x}}}") => format!("spec.{TERMS}[0].labelSelector.matchLabels"), "key \"a/b/c\"";
                ok: terms("{labelSelector: {matchLabels: {'a.io/b': x}}}");
            override_term_label_selector_values_are_label_values: terms("{labelSelector: {matchExpressions: [{key: a, operator: In, values: ['x y']}]}}") => format!("spec.{TERMS}[0].labelSelector.matchExpressions[0].values[0]"), "";
                ok: terms("{labelSelector: {matchExpressions: [{key: a, operator: In, values: [x_y]}]}}");
            delete_refuses_json_patch_overrides: cro_rule(&format!("{{overrideType: Delete, jsonPatchOverrides: [{PATCH}]}}")) => "spec.policy.overrideRules[0].jsonPatchOverrides", "cannot be set when the overrideType is Delete";
                ok: cro_rule("{overrideType: Delete, jsonPatchOverrides: []}");
            json_patch_requires_json_patch_overrides: patches("") => "spec.policy.overrideRules[0].jsonPatchOverrides", "cannot be empty";
                ok: patches(PATCH);
            json_patch_overrides_at_most_20: patches(&n(21, PATCH)) => "spec.policy.overrideRules[0].jsonPatchOverrides", "at most 20 items";
                ok: patches(&n(20, PATCH));
            json_patch_op_is_an_enum: patches("{op: move, path: /spec/x}") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].op", "unknown variant";
                ok: patches("{op: remove, path: /spec/x}");
            remove_has_no_value: patches("{op: remove, path: /spec/x, value: 1}") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].value", "remove operation cannot have value";
                ok: patches("{op: replace, path: /spec/x, value: 1}");
            patch_path_required: path("") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].path", "path cannot be empty";
                ok: path("/spec");
            patch_path_starts_with_slash: path("spec/x") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].path", "must start with /";
                ok: path("/spec/x");
            patch_path_not_type_meta: path("/apiVersion") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].path", "cannot override typeMeta fields";
                ok: path("/apiVersions");
            patch_path_not_metadata_itself: path("/metadata") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].path", "cannot override field metadata";
                ok: path("/metadata/annotations");
            patch_path_metadata_only_labels_and_annotations: path("/metadata/name") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].path", "except annotations and labels";
                ok: path("/metadata/labels/a");
            patch_path_not_status: path("/status/phase") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].path", "cannot override status fields";
                ok: path("/statuses");
            patch_path_no_empty_segments: path("/spec//x") => "spec.policy.overrideRules[0].jsonPatchOverrides[0].path", "cannot contain empty segments";
                ok: path("/spec/x");
            status_refused: format!("{}status: {{}}\n", cro_rule(&format!("{{jsonPatchOverrides: [{PATCH}]}}"))) => "status", "unknown field `status`";
                ok: cro_rule(&format!("{{jsonPatchOverrides: [{PATCH}]}}"));
            unknown_fields_refused: cro_rule(&format!("{{jsonPatchOverrides: [{PATCH}], priority: 1}}")) => "spec.policy.overrideRules[0].priority", "unknown field";
                ok: cro_rule(&format!("{{jsonPatchOverrides: [{PATCH}]}}"));
        }

        fn ro(selectors: &str) -> String {
            format!("{RO_HEAD}  resourceSelectors: [{selectors}]\n  policy:\n    overrideRules: [{{jsonPatchOverrides: [{PATCH}]}}]\n")
        }
        fn deployments(count: usize) -> String {
            let items: Vec<String> = (0..count)
                .map(|i| format!("{{group: apps, version: v1, kind: Deployment, name: d{i}}}"))
                .collect();
            ro(&items.join(", "))
        }
        const DEPLOY: &str = "{group: apps, version: v1, kind: Deployment, name: web}";

        mod resource_override {
            use super::*;
            rule_tests! { super::super::ResourceOverride;
                resource_selectors_required: deployments(0) => "spec.resourceSelectors", "at least one resource selector";
                    ok: deployments(1);
                resource_selectors_at_most_20: deployments(21) => "spec.resourceSelectors", "at most 20 items";
                    ok: deployments(20);
                resource_selector_name_required: ro("{group: apps, version: v1, kind: Deployment, name: ''}") => "spec.resourceSelectors[0].name", "resource name is required";
                    ok: ro(DEPLOY);
                resource_selectors_unique: ro(&format!("{DEPLOY}, {DEPLOY}")) => "spec.resourceSelectors[1]", "must be unique";
                    ok: ro(&format!("{DEPLOY}, {}", DEPLOY.replace("web", "api")));
                namespaced_placement_reference_allowed: ro(DEPLOY).replace("spec:\n", "spec:\n  placement: {name: ''}\n") => "spec.placement.name", "placement name is required";
                    ok: ro(DEPLOY).replace("spec:\n", "spec:\n  placement: {name: rp, scope: Namespaced}\n");
                resource_override_status_refused: format!("{}status: {{}}\n", ro(DEPLOY)) => "status", "unknown field `status`";
                    ok: ro(DEPLOY);
                no_label_selector_field: ro("{group: apps, version: v1, kind: Deployment, name: web, labelSelector: {}}") => "spec.resourceSelectors[0].labelSelector", "unknown field";
                    ok: ro(DEPLOY);
            }
        }
    }
}
