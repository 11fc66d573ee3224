//! OCM's work API (work.open-cluster-management.io/v1, api repo work/v1/types.go): a plain
//! `ManifestWork`, and the per-resource options a work (or a replica set's template) gives its
//! manifests: `manifestConfigs` (update strategy) and `deleteOption` (orphaning). Pure: which
//! options hold for one resource is decided here ([`WorkConfig::for_resource`]); carrying them
//! out on a member is push's.
//!
//! How OCM's work agent reads them (open-cluster-management-io/ocm):
//! - a manifest's options are those of the *first* `manifestConfigs` entry whose
//!   `resourceIdentifier` matches its group, resource (plural), namespace and name, `*` a
//!   wildcard in namespace and name (pkg/work/helper/helpers.go, FindManifestConfiguration and
//!   wildcardMatch); an entry's `updateStrategy.type` defaults to `Update` (CRD default);
//! - `deleteOption`: Foreground (default) owns every resource, Orphan none, SelectivelyOrphan all
//!   but the listed ones (helpers.go, OwnedByTheWork); a resource the work does not own is left
//!   on the cluster both when the work is deleted and when the manifest leaves the work
//!   (DeleteAppliedResources skips what it does not own);
//! - ReadOnly is never written and never deleted (pkg/work/spoke/apply/read_only_apply.go).
//!
//! gitfleet deviations, on purpose: a manifest no `manifestConfigs` entry matches is
//! server-side applied by gitfleet (gitfleet's default for every placement), where OCM's agent
//! defaults to `Update`; and `fieldManager` left empty means gitfleet's own field manager, not
//! `work-agent`.

use super::object::ObjectMeta;
use super::{ApiObject, Problem, Problems};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A `ManifestWork`: delivered to the cluster its namespace names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestWork {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: super::ocm::ManifestWorkTemplate,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

impl ApiObject for ManifestWork {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        super::member::check_name(&self.metadata, None, &mut p);
        if self
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            p.push(
                "metadata.namespace",
                "Required value: a ManifestWork lives in the namespace of its cluster",
            );
        }
        super::ocm::validate_manifests(
            "spec.workload.manifests",
            &self.spec.workload.manifests,
            &mut p,
        );
        validate_config("spec", &self.spec, &mut p);
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

/// `manifestConfigs[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestConfigOption {
    pub resource_identifier: ResourceIdentifier,
    /// What of the resource's live object is read back into the work's status
    /// ([`crate::feedback`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback_rules: Vec<FeedbackRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Conditions of the manifest worked out from its live object ([`crate::feedback`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub condition_rules: Vec<ConditionRule>,
    /// Poll (the CRD default) or Watch: when OCM's agent reads the object again. gitfleet reads
    /// it at every push of the work either way (docs/reference/compatibility.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_scrape_type: Option<FeedbackScrapeType>,
}

impl ManifestConfigOption {
    /// Whether the resource's live status is read back: it has feedback or condition rules.
    pub fn reads_status(&self) -> bool {
        !self.feedback_rules.is_empty() || !self.condition_rules.is_empty()
    }
}

/// `feedbackRules[]`: which of the live object's fields are reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackRule {
    #[serde(rename = "type")]
    pub type_: FeedbackType,
    /// For `JSONPaths` (OCM ignores them under `WellKnownStatus`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_paths: Vec<JsonPathRule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FeedbackType {
    /// The kind's well-known status fields (Deployment, DaemonSet, Job, Pod).
    WellKnownStatus,
    #[serde(rename = "JSONPaths")]
    JsonPaths,
}

/// `jsonPaths[]`: a named Kubernetes JSONPath.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonPathRule {
    pub name: String,
    /// Only read when the object is of this version (empty: any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    pub path: String,
}

/// `conditionRules[]`: a condition of the manifest worked out from its live object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionRule {
    pub condition: String,
    #[serde(rename = "type")]
    pub type_: ConditionRuleType,
    /// For `CEL`: all must be true (variable `object`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Variables `object` and `result`; a non-empty string wins over `message`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message_expression: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionRuleType {
    /// OCM's own rule for the condition and kind (`Complete` of a Job or a Pod).
    WellKnownConditions,
    #[serde(rename = "CEL")]
    Cel,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FeedbackScrapeType {
    #[default]
    Poll,
    Watch,
}

/// A resource by group, resource (plural, lowercase), namespace and name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceIdentifier {
    #[serde(default)]
    pub group: String,
    /// Required by the CRD (as `name`), in manifestConfigs and in orphaning rules alike.
    pub resource: String,
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

impl std::fmt::Display for ResourceIdentifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.resource)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        match self.namespace.as_str() {
            "" => write!(f, " {}", self.name),
            ns => write!(f, " {ns}/{}", self.name),
        }
    }
}

impl ResourceIdentifier {
    /// Whether a manifest may be the resource this names: same group, namespace and name
    /// (wildcards as the work agent reads them), and a kind whose plural the resource is, as
    /// near as can be told without the member's discovery.
    pub fn may_name(&self, manifest: &Value) -> bool {
        fn text(v: Option<&Value>) -> &str {
            v.and_then(Value::as_str).unwrap_or_default()
        }
        let api_version = text(manifest.get("apiVersion"));
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let kind = text(manifest.get("kind")).to_lowercase();
        let meta = manifest.get("metadata");
        group == self.group
            && wildcard_match(text(meta.and_then(|m| m.get("namespace"))), &self.namespace)
            && wildcard_match(text(meta.and_then(|m| m.get("name"))), &self.name)
            && self.resource.starts_with(kind.trim_end_matches('y'))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateStrategy {
    /// Default `Update` (CRD default).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<UpdateStrategyType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApplyConfig>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpdateStrategyType {
    #[default]
    Update,
    CreateOnly,
    ServerSideApply,
    ReadOnly,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerSideApplyConfig {
    #[serde(default)]
    pub force: bool,
    /// Must start with `work-agent` (CRD pattern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_manager: Option<String>,
    /// Not built: refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_fields: Vec<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteOption {
    /// Default `Foreground`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<DeletePropagationPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectively_orphans: Option<SelectivelyOrphan>,
    /// Only meaningful with condition rules (not built): refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeletePropagationPolicy {
    #[default]
    Foreground,
    Orphan,
    SelectivelyOrphan,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectivelyOrphan {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphaning_rules: Vec<ResourceIdentifier>,
}

/// What a work asks of its manifests, carried with each of them to the member (only when it
/// asks something gitfleet does not do by default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkConfig {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest_configs: Vec<ManifestConfigOption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
}

/// How one resource is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateMode {
    /// Server-side apply; `field_manager` `None` is gitfleet's own.
    ServerSideApply {
        force: bool,
        field_manager: Option<String>,
    },
    /// Create, or replace by an update call (labels and annotations merged with the live ones).
    Update,
    /// Create when absent, never update.
    CreateOnly,
    /// Never written: only read.
    ReadOnly,
}

/// The options for one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceOptions {
    pub update: UpdateMode,
    /// Left on the member when no longer delivered (the work does not own it).
    pub orphan: bool,
    /// What is read back from its live object, when the work asks anything.
    pub rules: Option<StatusRules>,
}

/// The feedback and condition rules that hold for one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusRules {
    pub feedback: Vec<FeedbackRule>,
    pub conditions: Vec<ConditionRule>,
}

impl Default for ResourceOptions {
    fn default() -> Self {
        ResourceOptions {
            update: UpdateMode::ServerSideApply {
                force: false,
                field_manager: None,
            },
            orphan: false,
            rules: None,
        }
    }
}

impl WorkConfig {
    /// `None` when the work asks nothing beyond gitfleet's defaults.
    pub fn of(template: &super::ocm::ManifestWorkTemplate) -> Option<WorkConfig> {
        let policy = template
            .delete_option
            .as_ref()
            .and_then(|d| d.propagation_policy)
            .unwrap_or_default();
        let c = WorkConfig {
            manifest_configs: template.manifest_configs.clone(),
            delete_option: (policy != DeletePropagationPolicy::Foreground)
                .then(|| template.delete_option.clone())
                .flatten(),
        };
        (c != WorkConfig::default()).then_some(c)
    }

    /// The options for the resource `group`/`resource` `namespace`/`name` (`namespace` empty for
    /// a cluster-scoped one), as OCM's work agent finds them.
    pub fn for_resource(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> ResourceOptions {
        let matches = |id: &ResourceIdentifier| {
            id.group == group
                && id.resource == resource
                && wildcard_match(namespace, &id.namespace)
                && wildcard_match(name, &id.name)
        };
        let update = self
            .manifest_configs
            .iter()
            .filter(|c| matches(&c.resource_identifier))
            .find_map(|c| c.update_strategy.as_ref())
            .map_or_else(
                || ResourceOptions::default().update,
                |s| match s.type_.unwrap_or_default() {
                    UpdateStrategyType::Update => UpdateMode::Update,
                    UpdateStrategyType::CreateOnly => UpdateMode::CreateOnly,
                    UpdateStrategyType::ReadOnly => UpdateMode::ReadOnly,
                    UpdateStrategyType::ServerSideApply => {
                        let c = s.server_side_apply.clone().unwrap_or_default();
                        UpdateMode::ServerSideApply {
                            force: c.force,
                            field_manager: c.field_manager.filter(|f| !f.is_empty()),
                        }
                    }
                },
            );
        // OwnedByTheWork compares orphaning rules exactly (no wildcard).
        let orphan = match &self.delete_option {
            None => false,
            Some(d) => match d.propagation_policy.unwrap_or_default() {
                DeletePropagationPolicy::Foreground => false,
                DeletePropagationPolicy::Orphan => true,
                DeletePropagationPolicy::SelectivelyOrphan => d
                    .selectively_orphans
                    .iter()
                    .flat_map(|s| &s.orphaning_rules)
                    .any(|o| {
                        o.group == group
                            && o.resource == resource
                            && o.name == name
                            && o.namespace == namespace
                    }),
            },
        };
        // FindManifestConfiguration: the feedback rules and the condition rules of the first
        // matching entry that has any, each on its own.
        let mut matching = self
            .manifest_configs
            .iter()
            .filter(|c| matches(&c.resource_identifier));
        let rules = StatusRules {
            feedback: matching
                .clone()
                .find(|c| !c.feedback_rules.is_empty())
                .map(|c| c.feedback_rules.clone())
                .unwrap_or_default(),
            conditions: matching
                .find(|c| !c.condition_rules.is_empty())
                .map(|c| c.condition_rules.clone())
                .unwrap_or_default(),
        };
        let rules = (rules != StatusRules::default()).then_some(rules);
        ResourceOptions {
            update,
            orphan,
            rules,
        }
    }
}

/// `resource == target`, or `target` a pattern with `*` for any text (helpers.go wildcardMatch).
fn wildcard_match(resource: &str, target: &str) -> bool {
    if resource == target || target == "*" {
        return true;
    }
    let parts: Vec<&str> = target.split('*').collect();
    if parts.len() == 1 {
        return false;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if resource.len() < first.len() + last.len()
        || !resource.starts_with(first)
        || !resource.ends_with(last)
    {
        return false;
    }
    let mut rest = &resource[first.len()..resource.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

const FIELD_MANAGER_PREFIX: &str = "work-agent";

/// The CRD's rules on `manifestConfigs` and `deleteOption` (`prefix` is the template's path).
pub(crate) fn validate_config(
    prefix: &str,
    t: &super::ocm::ManifestWorkTemplate,
    p: &mut Problems,
) {
    for (i, c) in t.manifest_configs.iter().enumerate() {
        let f = format!("{prefix}.manifestConfigs[{i}]");
        let id = &c.resource_identifier;
        for (field, v) in [("resource", &id.resource), ("name", &id.name)] {
            if v.is_empty() {
                p.push(format!("{f}.resourceIdentifier.{field}"), "Required value");
            }
        }
        validate_rules(&f, c, p);
        if let Some(fm) = c
            .update_strategy
            .as_ref()
            .and_then(|s| s.server_side_apply.as_ref())
            .and_then(|s| s.field_manager.as_deref())
            .filter(|fm| !fm.starts_with(FIELD_MANAGER_PREFIX))
        {
            p.push(
                format!("{f}.updateStrategy.serverSideApply.fieldManager"),
                format!("{fm:?} should match '^{FIELD_MANAGER_PREFIX}'"),
            );
        }
    }
}

/// The CRD's rules on one entry's feedback and condition rules (`f` is the entry's path): names
/// and conditions are list-map keys, so unique; a CEL rule names its condition.
fn validate_rules(f: &str, c: &ManifestConfigOption, p: &mut Problems) {
    for (j, rule) in c.feedback_rules.iter().enumerate() {
        let mut names = std::collections::BTreeSet::new();
        for (k, path) in rule.json_paths.iter().enumerate() {
            if !names.insert(path.name.as_str()) {
                p.push(
                    format!("{f}.feedbackRules[{j}].jsonPaths[{k}]"),
                    format!("Duplicate value: {{\"name\":{:?}}}", path.name),
                );
            }
        }
    }
    let mut conditions = std::collections::BTreeSet::new();
    for (j, rule) in c.condition_rules.iter().enumerate() {
        let at = format!("{f}.conditionRules[{j}]");
        if rule.type_ == ConditionRuleType::Cel && rule.condition.is_empty() {
            p.push(
                &at,
                "Invalid value: \"object\": Condition is required for CEL rules",
            );
        }
        if !conditions.insert(rule.condition.as_str()) {
            p.push(
                &at,
                format!("Duplicate value: {{\"condition\":{:?}}}", rule.condition),
            );
        }
    }
}

/// What of the work API gitfleet does not carry out: refused, never accepted and ignored.
/// `prefix` is the template's path (`spec` or `spec.manifestWorkTemplate`).
pub fn not_built(prefix: &str, t: &super::ocm::ManifestWorkTemplate) -> Vec<Problem> {
    const NOT_BUILT: &str = "not built in gitfleet";
    let mut problems = Problems::default();
    let p = &mut problems;
    for (i, c) in t.manifest_configs.iter().enumerate() {
        let f = format!("{prefix}.manifestConfigs[{i}]");
        if c.update_strategy
            .as_ref()
            .and_then(|s| s.server_side_apply.as_ref())
            .is_some_and(|s| !s.ignore_fields.is_empty())
        {
            p.push(
                format!("{f}.updateStrategy.serverSideApply.ignoreFields"),
                format!("{NOT_BUILT}: every field of the manifest is applied; remove ignoreFields"),
            );
        }
    }
    if t.delete_option
        .as_ref()
        .is_some_and(|d| d.ttl_seconds_after_finished.is_some())
    {
        p.push(
            format!("{prefix}.deleteOption.ttlSecondsAfterFinished"),
            format!("{NOT_BUILT}: a work is never deleted once its manifests are Complete; remove ttlSecondsAfterFinished"),
        );
    }
    if t.executor.is_some() {
        p.push(
            format!("{prefix}.executor"),
            format!("{NOT_BUILT}: gitfleet applies with its own credentials for the member and does not impersonate an executor; remove executor"),
        );
    }
    problems.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ocm::ManifestWorkTemplate;

    fn template(yaml: &str) -> ManifestWorkTemplate {
        serde_json::from_value(crate::model::testing::value(yaml)).unwrap()
    }

    fn config(yaml: &str) -> WorkConfig {
        WorkConfig::of(&template(yaml)).unwrap_or_default()
    }

    #[test]
    fn wildcards_match_as_ocm_matches_them() {
        // As the regular expression of ocm pkg/work/helper/helpers.go wildcardMatch matches.
        for (resource, target, want) in [
            ("foo", "foo", true),
            ("foo", "*", true),
            ("foo", "f*", true),
            ("foo", "*o", true),
            ("foo", "f*o", true),
            ("foo", "b*", false),
            ("foo", "", false),
            ("", "", true),
            ("foo-bar-baz", "foo*baz", true),
            ("foo-bar-baz", "*bar*", true),
            ("foo-baz", "*bar*", false),
            ("ab", "a*b*", true),
            ("a", "a*a", false),
        ] {
            assert_eq!(
                wildcard_match(resource, target),
                want,
                "{resource} ~ {target}"
            );
        }
    }

    #[test]
    fn the_first_matching_update_strategy_holds() {
        let c = config(
            r#"
manifestConfigs:
- resourceIdentifier: {group: "", resource: configmaps, namespace: "*", name: "cm-*"}
- resourceIdentifier: {group: "", resource: configmaps, namespace: default, name: cm-a}
  updateStrategy: {type: ReadOnly}
- resourceIdentifier: {group: "", resource: configmaps, namespace: "*", name: "*"}
  updateStrategy: {type: CreateOnly}
- resourceIdentifier: {group: apps, resource: deployments, namespace: default, name: web}
  updateStrategy: {type: ServerSideApply, serverSideApply: {force: true, fieldManager: work-agent-x}}
- resourceIdentifier: {group: "", resource: secrets, name: s}
  updateStrategy: {}
"#,
        );
        let update = |g, r, ns, n| c.for_resource(g, r, ns, n).update;
        // The first entry matches but has no strategy: the next one that has one holds.
        assert_eq!(
            update("", "configmaps", "default", "cm-a"),
            UpdateMode::ReadOnly
        );
        assert_eq!(
            update("", "configmaps", "other", "x"),
            UpdateMode::CreateOnly
        );
        assert_eq!(
            update("apps", "deployments", "default", "web"),
            UpdateMode::ServerSideApply {
                force: true,
                field_manager: Some("work-agent-x".into())
            }
        );
        // `updateStrategy: {}`: the CRD default, Update (cluster-scoped: empty namespace).
        assert_eq!(update("", "secrets", "", "s"), UpdateMode::Update);
        // Nothing matches: gitfleet's server-side apply.
        assert_eq!(
            update("apps", "deployments", "default", "other"),
            ResourceOptions::default().update
        );
    }

    /// ocm pkg/work/helper/helper_test.go TestFindManifestConfiguration: the first matching
    /// entry with feedback rules gives them, and the first with condition rules gives those,
    /// each on its own; nothing matches, or nothing asks: no rules.
    #[test]
    fn status_rules_are_found_as_find_manifest_configuration_finds_them() {
        let c = config(
            r#"
manifestConfigs:
- resourceIdentifier: {group: "", resource: configmaps, name: test, namespace: "test*"}
  feedbackRules: [{type: WellKnownStatus}]
- resourceIdentifier: {group: "", resource: nodes, name: node1}
  conditionRules: [{type: WellKnownConditions, condition: Other}]
- resourceIdentifier: {group: "", resource: configmaps, name: test, namespace: testns}
  feedbackRules: [{type: JSONPaths}]
- resourceIdentifier: {group: "", resource: configmaps, name: "*", namespace: testns}
  conditionRules: [{type: WellKnownConditions, condition: Completed}]
  updateStrategy: {type: Update}
"#,
        );
        let rules = |r, n, ns| c.for_resource("", r, ns, n).rules;
        let found = rules("configmaps", "test", "testns").expect("rules");
        assert_eq!(found.feedback[0].type_, FeedbackType::WellKnownStatus);
        assert_eq!(found.feedback.len(), 1);
        assert_eq!(found.conditions[0].condition, "Completed");
        assert_eq!(rules("configmaps", "test1", "other"), None);
        assert_eq!(rules("secrets", "test", "testns"), None);
        // "no feedbackRules, conditionRules, or updateStrategy": a match that asks nothing.
        let bare = config("manifestConfigs: [{resourceIdentifier: {resource: configmaps, name: '*', namespace: 'test*'}}]");
        assert_eq!(
            bare.for_resource("", "configmaps", "testns", "test").rules,
            None
        );
    }

    #[test]
    fn delete_options_orphan_as_ocm_owns() {
        let orphan = config("deleteOption: {propagationPolicy: Orphan}");
        assert!(orphan.for_resource("", "configmaps", "default", "x").orphan);
        let some = config(
            r#"
deleteOption:
  propagationPolicy: SelectivelyOrphan
  selectivelyOrphans:
    orphaningRules: [{group: "", resource: configmaps, namespace: default, name: keep}]
"#,
        );
        assert!(
            some.for_resource("", "configmaps", "default", "keep")
                .orphan
        );
        assert!(
            !some
                .for_resource("", "configmaps", "default", "other")
                .orphan
        );
        // No wildcards in orphaning rules (OwnedByTheWork compares exactly).
        let star = config(
            r#"
deleteOption:
  propagationPolicy: SelectivelyOrphan
  selectivelyOrphans:
    orphaningRules: [{group: "", resource: configmaps, namespace: default, name: "*"}]
"#,
        );
        assert!(
            !star
                .for_resource("", "configmaps", "default", "keep")
                .orphan
        );
        // SelectivelyOrphan without rules orphans nothing; Foreground is the default.
        let none = config("deleteOption: {propagationPolicy: SelectivelyOrphan}");
        assert!(!none.for_resource("", "configmaps", "default", "x").orphan);
        assert_eq!(
            WorkConfig::of(&template("deleteOption: {propagationPolicy: Foreground}")),
            None
        );
    }

    #[test]
    fn what_is_not_built_is_named() {
        let t = template(
            r#"
manifestConfigs:
- resourceIdentifier: {resource: configmaps, name: a}
  feedbackRules: [{type: WellKnownStatus}]
  conditionRules: [{type: WellKnownConditions, condition: Complete}]
  updateStrategy:
    type: ServerSideApply
    serverSideApply: {ignoreFields: [{condition: OnSpokePresent, jsonPaths: [.data]}]}
deleteOption: {propagationPolicy: Orphan, ttlSecondsAfterFinished: 5}
executor: {subject: {type: ServiceAccount}}
"#,
        );
        let fields: Vec<String> = not_built("spec", &t).into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "spec.manifestConfigs[0].updateStrategy.serverSideApply.ignoreFields",
                "spec.deleteOption.ttlSecondsAfterFinished",
                "spec.executor",
            ]
        );
        let mut p = Problems::default();
        let bad = template(
            "manifestConfigs: [{resourceIdentifier: {resource: '', name: a}, updateStrategy: {type: ServerSideApply, serverSideApply: {fieldManager: me}}}]",
        );
        validate_config("spec", &bad, &mut p);
        let fields: Vec<&str> = p.0.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.manifestConfigs[0].resourceIdentifier.resource",
                "spec.manifestConfigs[0].updateStrategy.serverSideApply.fieldManager",
            ]
        );
    }

    /// The CRD requires `name` and `resource` of a resource identifier (orphaning rules and
    /// manifestConfigs alike).
    #[test]
    fn orphaning_rules_require_name_and_resource() {
        let v = crate::model::testing::value(
            "workload: {manifests: []}\ndeleteOption:\n  propagationPolicy: SelectivelyOrphan\n  selectivelyOrphans:\n    orphaningRules: [{group: '', resource: configmaps, namespace: default}]\n",
        );
        let err = crate::model::decode::<ManifestWorkTemplate>(&v).unwrap_err();
        assert_eq!(
            err.field,
            "deleteOption.selectivelyOrphans.orphaningRules[0]"
        );
        assert!(
            err.message.contains("missing field `name`"),
            "{}",
            err.message
        );
    }
    /// One test per rule of OCM's ManifestWork CRD and work webhook, named after the rule: the
    /// breaking document names the field, the edge case is admitted.
    mod rules {
        use crate::model::testing::rule_tests;

        const CM: &str =
            "{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: default}}";

        fn work(spec_extra: &str) -> String {
            format!("apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\nmetadata: {{name: w, namespace: cluster1}}\nspec:\n  workload: {{manifests: [{CM}]}}\n{spec_extra}")
        }
        fn configs(c: &str) -> String {
            work(&format!("  manifestConfigs: [{c}]\n"))
        }
        fn orphans(rule: &str) -> String {
            work(&format!("  deleteOption: {{propagationPolicy: SelectivelyOrphan, selectivelyOrphans: {{orphaningRules: [{rule}]}}}}\n"))
        }

        rule_tests! { super::ManifestWork;
            work_name_is_a_dns_subdomain: work("").replace("name: w,", "name: W_1,") => "metadata.name", "RFC 1123 subdomain";
                ok: work("").replace("name: w,", "name: w.1,");
            work_namespace_required: work("").replace(", namespace: cluster1}", "}") => "metadata.namespace", "Required value";
                ok: work("");
            work_manifests_not_empty: work("").replace(&format!("manifests: [{CM}]"), "manifests: []") => "spec.workload.manifests", "should not be empty";
                ok: work("");
            manifest_config_resource_required: configs("{resourceIdentifier: {resource: '', name: cm, namespace: default}}") => "spec.manifestConfigs[0].resourceIdentifier.resource", "Required value";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm, namespace: default}}");
            manifest_config_name_required: configs("{resourceIdentifier: {resource: configmaps, name: '', namespace: default}}") => "spec.manifestConfigs[0].resourceIdentifier.name", "Required value";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: '*', namespace: default}}");
            field_manager_starts_with_work_agent: configs("{resourceIdentifier: {resource: configmaps, name: cm}, updateStrategy: {type: ServerSideApply, serverSideApply: {fieldManager: mine}}}") => "spec.manifestConfigs[0].updateStrategy.serverSideApply.fieldManager", "should match '^work-agent'";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, updateStrategy: {type: ServerSideApply, serverSideApply: {fieldManager: work-agent-x}}}");
            update_strategy_type_is_an_enum: configs("{resourceIdentifier: {resource: configmaps, name: cm}, updateStrategy: {type: Replace}}") => "spec.manifestConfigs[0].updateStrategy.type", "unknown variant";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, updateStrategy: {type: Update}}");
            orphaning_rule_name_required: orphans("{group: '', resource: configmaps, namespace: default}") => "spec.deleteOption.selectivelyOrphans.orphaningRules[0]", "missing field `name`";
                ok: orphans("{group: '', resource: configmaps, namespace: default, name: cm}");
            orphaning_rule_resource_required: orphans("{group: '', name: cm, namespace: default}") => "spec.deleteOption.selectivelyOrphans.orphaningRules[0]", "missing field `resource`";
                ok: orphans("{resource: configmaps, name: cm}");
            work_status_unknown_field_refused: format!("{}status: {{resourceStatus: {{}}, applied: true}}\n", work("")) => "status.applied", "unknown field `applied`";
                ok: format!("{}status: {{resourceStatus: {{manifests: []}}, conditions: []}}\n", work(""));
            feedback_rule_type_is_an_enum: configs("{resourceIdentifier: {resource: configmaps, name: cm}, feedbackRules: [{type: WellKnownStatuses}]}") => "spec.manifestConfigs[0].feedbackRules[0].type", "unknown variant `WellKnownStatuses`";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, feedbackRules: [{type: JSONPaths, jsonPaths: [{name: a, path: .data.a}]}]}");
            json_path_needs_a_path: configs("{resourceIdentifier: {resource: configmaps, name: cm}, feedbackRules: [{type: JSONPaths, jsonPaths: [{name: a}]}]}") => "spec.manifestConfigs[0].feedbackRules[0].jsonPaths[0]", "missing field `path`";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, feedbackRules: [{type: JSONPaths, jsonPaths: [{name: a, path: .data.a, version: v1}]}]}");
            json_path_names_are_unique: configs("{resourceIdentifier: {resource: configmaps, name: cm}, feedbackRules: [{type: JSONPaths, jsonPaths: [{name: a, path: .a}, {name: a, path: .b}]}]}") => "spec.manifestConfigs[0].feedbackRules[0].jsonPaths[1]", "Duplicate value";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, feedbackRules: [{type: JSONPaths, jsonPaths: [{name: a, path: .a}, {name: b, path: .b}]}]}");
            condition_rule_type_is_an_enum: configs("{resourceIdentifier: {resource: configmaps, name: cm}, conditionRules: [{type: WellKnownCompletions, condition: Complete}]}") => "spec.manifestConfigs[0].conditionRules[0].type", "unknown variant `WellKnownCompletions`";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, conditionRules: [{type: WellKnownConditions, condition: Complete}]}");
            condition_rule_needs_its_condition: configs("{resourceIdentifier: {resource: configmaps, name: cm}, conditionRules: [{type: CEL, condition: '', celExpressions: ['true']}]}") => "spec.manifestConfigs[0].conditionRules[0]", "Condition is required for CEL rules";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, conditionRules: [{type: CEL, condition: Ready, celExpressions: ['true']}]}");
            condition_rules_are_unique_by_condition: configs("{resourceIdentifier: {resource: configmaps, name: cm}, conditionRules: [{type: WellKnownConditions, condition: Complete}, {type: CEL, condition: Complete}]}") => "spec.manifestConfigs[0].conditionRules[1]", "Duplicate value";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, conditionRules: [{type: WellKnownConditions, condition: Complete}, {type: CEL, condition: Ready}]}");
            feedback_scrape_type_is_an_enum: configs("{resourceIdentifier: {resource: configmaps, name: cm}, feedbackScrapeType: Push}") => "spec.manifestConfigs[0].feedbackScrapeType", "unknown variant `Push`";
                ok: configs("{resourceIdentifier: {resource: configmaps, name: cm}, feedbackScrapeType: Watch}");
            propagation_policy_is_an_enum: work("  deleteOption: {propagationPolicy: Background}\n") => "spec.deleteOption.propagationPolicy", "unknown variant";
                ok: work("  deleteOption: {propagationPolicy: Orphan}\n");
        }
    }
}
