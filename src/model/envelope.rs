//! Envelopes: objects that carry other objects to member clusters without those objects being
//! live on the hub. `ClusterResourceEnvelope` and `ResourceEnvelope`
//! (placement.kubernetes-fleet.io v1beta1) carry full objects in `data`; the legacy form is a v1
//! `ConfigMap` annotated `kubernetes-fleet.io/envelope-configmap` whose `data` values are YAML or
//! JSON manifests.
//!
//! Current KubeFleet no longer treats such a ConfigMap as an envelope: its work generator
//! unwraps only the two envelope kinds (pkg/controllers/workgenerator/controller.go,
//! processOneSelectedResource) and places anything else, that ConfigMap included, as it is. So
//! here too the legacy form is off by default: the ConfigMap is a plain ConfigMap and its
//! content never invalidates the commit. A repository that still relies on it opts in, per
//! ConfigMap, with the annotation `gitfleet.io/legacy-envelope: "true"` next to KubeFleet's;
//! living in the repository, the choice is the same for `plan`, `render` and the daemon.
//!
//! This module decodes and validates them and lists their contents
//! ([`envelope_contents`]), which the catalog validates and the renderer unwraps through the same
//! function. It knows nothing of placements, overrides or clusters.

use super::object::{Gvk, Object, ObjectMeta};
use super::scope::{Scope, ScopeTable};
use super::{decode, ApiObject, Problem, Problems};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The group of the envelope kinds.
pub const GROUP: &str = "placement.kubernetes-fleet.io";
/// The annotation that makes a `ConfigMap` a legacy envelope (any non-empty value).
pub const ENVELOPE_CONFIGMAP_ANNOTATION: &str = "kubernetes-fleet.io/envelope-configmap";
/// gitfleet's opt-in (value `"true"`) that makes a ConfigMap with
/// [`ENVELOPE_CONFIGMAP_ANNOTATION`] a legacy envelope (module doc).
pub const LEGACY_ENVELOPE_OPT_IN_ANNOTATION: &str = "gitfleet.io/legacy-envelope";
/// Most entries an envelope's `data` may hold.
pub const MAX_ENTRIES: usize = 50;

/// What kind of envelope an object is; the names are KubeFleet's `EnvelopeIdentifier.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EnvelopeKind {
    ClusterResourceEnvelope,
    ResourceEnvelope,
    /// The legacy `ConfigMap` envelope.
    ConfigMap,
}

impl EnvelopeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EnvelopeKind::ClusterResourceEnvelope => "ClusterResourceEnvelope",
            EnvelopeKind::ResourceEnvelope => "ResourceEnvelope",
            EnvelopeKind::ConfigMap => "ConfigMap",
        }
    }

    /// Is an object of this type and value an envelope? Envelope kinds are recognised in any
    /// version of their group (the catalog rejects versions other than v1beta1); a ConfigMap only
    /// with a non-empty envelope annotation and gitfleet's opt-in (module doc).
    pub fn of(gvk: &Gvk, value: &Value) -> Option<EnvelopeKind> {
        match (gvk.group.as_str(), gvk.kind.as_str()) {
            (GROUP, "ClusterResourceEnvelope") => Some(EnvelopeKind::ClusterResourceEnvelope),
            (GROUP, "ResourceEnvelope") => Some(EnvelopeKind::ResourceEnvelope),
            ("", "ConfigMap") if gvk.version == "v1" => {
                let annotations = value.pointer("/metadata/annotations")?;
                let text = |key: &str| annotations.get(key).and_then(Value::as_str);
                let legacy = text(ENVELOPE_CONFIGMAP_ANNOTATION).is_some_and(|v| !v.is_empty());
                let opted_in = text(LEGACY_ENVELOPE_OPT_IN_ANNOTATION) == Some("true");
                (legacy && opted_in).then_some(EnvelopeKind::ConfigMap)
            }
            _ => None,
        }
    }

    /// [`EnvelopeKind::of`] for a raw JSON object.
    pub fn of_value(value: &Value) -> Option<EnvelopeKind> {
        let api_version = value.get("apiVersion")?.as_str()?;
        let kind = value.get("kind")?.as_str()?;
        Self::of(&Gvk::from_api_version(api_version, kind), value)
    }
}

impl std::fmt::Display for EnvelopeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cluster-scoped envelope: it may carry only cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterResourceEnvelope {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    /// Entry key → the full object it carries.
    pub data: Map<String, Value>,
}

/// A namespaced envelope: it may carry only namespaced objects of its own namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceEnvelope {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    /// Entry key → the full object it carries.
    pub data: Map<String, Value>,
}

impl ApiObject for ClusterResourceEnvelope {
    fn validate(&self) -> Vec<Problem> {
        validate_envelope(&self.metadata, &self.data)
    }
}

impl ApiObject for ResourceEnvelope {
    fn validate(&self) -> Vec<Problem> {
        validate_envelope(&self.metadata, &self.data)
    }
}

impl ClusterResourceEnvelope {
    /// Every carried object must be of a kind known to be cluster-scoped, without a namespace.
    pub fn scope_problems(&self, scopes: &ScopeTable) -> Vec<Problem> {
        let mut p = Problems::default();
        for (key, obj) in &self.data {
            check_scope(
                &format!("data.{key}"),
                "",
                obj,
                EnvelopeKind::ClusterResourceEnvelope,
                None,
                scopes,
                &mut p,
            );
        }
        p.0
    }
}

impl ResourceEnvelope {
    /// Every carried object must be of a kind known to be namespaced, in the envelope's own
    /// namespace (`metadata.namespace`, unless the catalog resolved it otherwise: see
    /// [`ResourceEnvelope::scope_problems_in`]).
    pub fn scope_problems(&self, scopes: &ScopeTable) -> Vec<Problem> {
        self.scope_problems_in(self.metadata.namespace.as_deref(), scopes)
    }

    /// [`ResourceEnvelope::scope_problems`] for an envelope living in `namespace`.
    pub fn scope_problems_in(&self, namespace: Option<&str>, scopes: &ScopeTable) -> Vec<Problem> {
        let mut p = Problems::default();
        for (key, obj) in &self.data {
            check_scope(
                &format!("data.{key}"),
                "",
                obj,
                EnvelopeKind::ResourceEnvelope,
                namespace,
                scopes,
                &mut p,
            );
        }
        p.0
    }
}

/// The objects an envelope carries, or every problem that keeps it from being unwrapped; `None`
/// when `obj` is not an envelope. Contents are listed in `data` order (for the legacy ConfigMap,
/// documents in order within each entry).
pub fn envelope_contents(
    obj: &Object,
    scopes: &ScopeTable,
) -> Option<Result<Vec<Value>, Vec<Problem>>> {
    let kind = EnvelopeKind::of(&obj.gvk, &obj.value)?;
    Some(contents(kind, obj.namespace.as_deref(), &obj.value, scopes))
}

/// [`envelope_contents`] for a raw JSON object (a selected resource), whose namespace is its
/// `metadata.namespace`.
pub fn envelope_contents_of(
    value: &Value,
    scopes: &ScopeTable,
) -> Option<Result<Vec<Value>, Vec<Problem>>> {
    let kind = EnvelopeKind::of_value(value)?;
    let namespace = value
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty());
    Some(contents(kind, namespace, value, scopes))
}

fn contents(
    kind: EnvelopeKind,
    namespace: Option<&str>,
    value: &Value,
    scopes: &ScopeTable,
) -> Result<Vec<Value>, Vec<Problem>> {
    let (data, mut problems) = match kind {
        EnvelopeKind::ClusterResourceEnvelope => {
            let env: ClusterResourceEnvelope = decode(value).map_err(|p| vec![p])?;
            let mut problems = env.validate();
            problems.extend(env.scope_problems(scopes));
            (env.data.into_iter().map(|(_, v)| v).collect(), problems)
        }
        EnvelopeKind::ResourceEnvelope => {
            let env: ResourceEnvelope = decode(value).map_err(|p| vec![p])?;
            let mut problems = env.validate();
            problems.extend(env.scope_problems_in(namespace, scopes));
            (env.data.into_iter().map(|(_, v)| v).collect(), problems)
        }
        EnvelopeKind::ConfigMap => legacy_contents(namespace, value, scopes),
    };
    problems.dedup();
    if problems.is_empty() {
        Ok(data)
    } else {
        Err(problems)
    }
}

/// Unpacks a legacy ConfigMap envelope: each `data` value is one or more YAML (or JSON)
/// documents; empty documents are skipped; only namespaced objects of the ConfigMap's namespace.
fn legacy_contents(
    namespace: Option<&str>,
    value: &Value,
    scopes: &ScopeTable,
) -> (Vec<Value>, Vec<Problem>) {
    let mut p = Problems::default();
    let mut out = Vec::new();
    let data = match value.get("data") {
        None | Some(Value::Null) => return (out, p.0),
        Some(Value::Object(m)) => m,
        Some(_) => {
            p.push("data", "must be a map of strings");
            return (out, p.0);
        }
    };
    for (key, text) in data {
        let field = format!("data.{key}");
        let Some(text) = text.as_str() else {
            p.push(field, "must be a string holding YAML or JSON manifests");
            continue;
        };
        let docs = match parse_documents(text) {
            Ok(docs) => docs,
            Err(e) => {
                p.push(field, format!("is not valid YAML or JSON: {e}"));
                continue;
            }
        };
        let many = docs.len() > 1;
        for (i, doc) in docs.into_iter().enumerate() {
            let prefix = if many {
                format!("document {}: ", i + 1)
            } else {
                String::new()
            };
            let before = p.0.len();
            check_shape(&field, &prefix, &doc, &mut p);
            if p.0.len() == before {
                check_scope(
                    &field,
                    &prefix,
                    &doc,
                    EnvelopeKind::ConfigMap,
                    namespace,
                    scopes,
                    &mut p,
                );
            }
            out.push(doc);
        }
    }
    (out, p.0)
}

/// The non-empty documents of a YAML stream, as JSON.
fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    crate::yaml::documents(text).map_err(|e| e.to_string())
}

fn validate_envelope(meta: &ObjectMeta, data: &Map<String, Value>) -> Vec<Problem> {
    let mut p = Problems::default();
    if meta.name.is_empty() {
        p.push("metadata.name", "Required value: name is required");
    } else if !super::is_dns1123_subdomain(&meta.name) {
        p.push(
            "metadata.name",
            "must be a DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', starting and ending with an alphanumeric",
        );
    }
    if data.is_empty() {
        p.push(
            "data",
            "Required value: an envelope must carry at least one object",
        );
    } else if data.len() > MAX_ENTRIES {
        p.push(
            "data",
            format!(
                "must have at most {MAX_ENTRIES} entries, got {}",
                data.len()
            ),
        );
    }
    for (key, obj) in data {
        check_shape(&format!("data.{key}"), "", obj, &mut p);
    }
    p.0
}

/// The envelope CRD types each entry only as an object, so a hub admits an entry without
/// `apiVersion`, `kind` or name; KubeFleet's work generator or the member's applier then fails.
const SHAPE_OWN_RULE: &str =
    "gitfleet's own rule: a hub admits the envelope, but no member can apply the object";

/// A carried object must be a JSON object with `apiVersion`, `kind` and `metadata.name`.
fn check_shape(field: &str, prefix: &str, obj: &Value, p: &mut Problems) {
    let Some(map) = obj.as_object() else {
        // The CRD refuses every other type, but admits `null` as an entry.
        let own = if obj.is_null() {
            format!(" ({SHAPE_OWN_RULE})")
        } else {
            String::new()
        };
        p.push(
            field,
            format!(
                "{prefix}must be a Kubernetes object (a map), not {}{own}",
                type_name(obj)
            ),
        );
        return;
    };
    let text = |k: &str| map.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    if text("apiVersion").is_none() {
        p.push(
            format!("{field}.apiVersion"),
            format!("{prefix}Required value: the carried object must have an apiVersion ({SHAPE_OWN_RULE})"),
        );
    }
    if text("kind").is_none() {
        p.push(
            format!("{field}.kind"),
            format!(
                "{prefix}Required value: the carried object must have a kind ({SHAPE_OWN_RULE})"
            ),
        );
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    if name.is_none() {
        p.push(
            format!("{field}.metadata.name"),
            format!("{prefix}Required value: the carried object must have a metadata.name ({SHAPE_OWN_RULE})"),
        );
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// The scope rule for one carried object (skipped when the object is malformed: the shape rule
/// reports that). `namespace` is the envelope's own namespace.
fn check_scope(
    field: &str,
    prefix: &str,
    obj: &Value,
    envelope: EnvelopeKind,
    namespace: Option<&str>,
    scopes: &ScopeTable,
    p: &mut Problems,
) {
    let text = |ptr: &str| obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind, name) = (text("/apiVersion"), text("/kind"), text("/metadata/name"));
    if api_version.is_empty() || kind.is_empty() || name.is_empty() {
        return;
    }
    let gvk = Gvk::from_api_version(api_version, kind);
    let inner_ns = text("/metadata/namespace");
    let what = if inner_ns.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {inner_ns}/{name}")
    };
    let Some(scope) = scopes.scope(&gvk.group, &gvk.kind) else {
        let group = if gvk.group.is_empty() {
            "core"
        } else {
            gvk.group.as_str()
        };
        p.push(
            field,
            format!(
                "{prefix}the scope of kind {kind} (group {group}) is unknown; add its CustomResourceDefinition to the repository"
            ),
        );
        return;
    };
    match envelope {
        EnvelopeKind::ClusterResourceEnvelope => {
            if scope == Scope::Namespaced {
                p.push(
                    field,
                    format!(
                        "{prefix}a namespaced object {what} has been wrapped in a cluster resource envelope; a ClusterResourceEnvelope may carry only cluster-scoped objects"
                    ),
                );
            } else if !inner_ns.is_empty() {
                p.push(
                    format!("{field}.metadata.namespace"),
                    format!(
                        "{prefix}the cluster-scoped object {kind} {name} must not set metadata.namespace ({inner_ns:?})"
                    ),
                );
            }
        }
        EnvelopeKind::ResourceEnvelope | EnvelopeKind::ConfigMap => {
            let env = if envelope == EnvelopeKind::ConfigMap {
                "an envelope ConfigMap"
            } else {
                "a ResourceEnvelope"
            };
            let ns = namespace.unwrap_or_default();
            if scope == Scope::Cluster {
                p.push(
                    field,
                    format!(
                        "{prefix}a cluster-scoped object {what} has been wrapped in {env}; it may carry only namespaced objects of its own namespace"
                    ),
                );
            } else if inner_ns != ns {
                let message = if inner_ns.is_empty() {
                    format!(
                        "{prefix}Required value: the namespaced object {what} must set metadata.namespace to the envelope's namespace {ns:?}"
                    )
                } else {
                    format!(
                        "{prefix}a namespaced object {what} has been wrapped in {env} from another namespace ({ns:?})"
                    )
                };
                p.push(format!("{field}.metadata.namespace"), message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Origin;
    use serde_json::json;

    fn object(value: Value) -> Object {
        let api_version = value["apiVersion"].as_str().unwrap();
        let kind = value["kind"].as_str().unwrap();
        let namespace = value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        Object {
            origin: Origin {
                file: "f.yaml".into(),
                document: 0,
                line: 1,
            },
            gvk: Gvk::from_api_version(api_version, kind),
            name: value["metadata"]["name"].as_str().unwrap().to_string(),
            namespace,
            value: std::sync::Arc::new(value),
        }
    }

    fn yaml(text: &str) -> Value {
        crate::yaml::from_str(text).unwrap()
    }

    fn fields(problems: &[Problem]) -> Vec<(&str, &str)> {
        problems
            .iter()
            .map(|p| (p.field.as_str(), p.message.as_str()))
            .collect()
    }

    fn cm(name: &str, ns: Option<&str>) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}});
        if let Some(ns) = ns {
            v["metadata"]["namespace"] = json!(ns);
        }
        v
    }

    fn cluster_role(name: &str) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": []})
    }

    fn envelope(kind: &str, ns: Option<&str>, data: Value) -> Value {
        let mut v = json!({"apiVersion": "placement.kubernetes-fleet.io/v1beta1", "kind": kind, "metadata": {"name": "env"}, "data": data});
        if let Some(ns) = ns {
            v["metadata"]["namespace"] = json!(ns);
        }
        v
    }

    #[test]
    fn kubefleet_examples_unwrap() {
        let Some(corpus) = crate::compat_corpus::corpus() else {
            return;
        };
        let dir = corpus.join("kubefleet-examples/envelopes");
        let scopes = ScopeTable::builtin();
        for (file, want) in [("clusterscoped.yaml", 2), ("namespacescoped.yaml", 2)] {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let got = envelope_contents(&object(yaml(&text)), &scopes)
                .unwrap()
                .unwrap();
            assert_eq!(got.len(), want, "{file}");
        }
    }

    #[test]
    fn not_an_envelope() {
        let scopes = ScopeTable::builtin();
        assert!(envelope_contents(&object(cm("plain", Some("app"))), &scopes).is_none());
        let mut empty_annotation = cm("plain", Some("app"));
        empty_annotation["metadata"]["annotations"] = json!({ENVELOPE_CONFIGMAP_ANNOTATION: ""});
        assert!(envelope_contents(&object(empty_annotation), &scopes).is_none());
        // Current KubeFleet places an annotated ConfigMap as a plain one: without gitfleet's
        // opt-in it is no envelope, whatever its data holds.
        let mut not_opted_in = cm("legacy", Some("app"));
        not_opted_in["metadata"]["annotations"] = json!({ENVELOPE_CONFIGMAP_ANNOTATION: "true"});
        not_opted_in["data"] = json!({"bad.yaml": "kind: [\n"});
        assert!(envelope_contents(&object(not_opted_in), &scopes).is_none());
        let mut v1beta1_cm = cm("x", Some("app"));
        v1beta1_cm["apiVersion"] = json!("example.com/v1");
        v1beta1_cm["metadata"]["annotations"] = json!({ENVELOPE_CONFIGMAP_ANNOTATION: "true", LEGACY_ENVELOPE_OPT_IN_ANNOTATION: "true"});
        assert!(envelope_contents(&object(v1beta1_cm), &scopes).is_none());
    }

    #[test]
    fn cluster_envelope_contents_in_data_order() {
        let v = envelope(
            "ClusterResourceEnvelope",
            None,
            json!({"b": cluster_role("b"), "a": cluster_role("a")}),
        );
        let got = envelope_contents(&object(v), &ScopeTable::builtin())
            .unwrap()
            .unwrap();
        assert_eq!(got, vec![cluster_role("b"), cluster_role("a")]);
    }

    #[test]
    fn envelope_rules_each_name_their_field() {
        let mut widget =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        let many: Map<String, Value> = (0..51)
            .map(|i| (format!("k{i}"), cluster_role(&format!("r{i}"))))
            .collect();
        let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
            (
                envelope("ClusterResourceEnvelope", None, json!({})),
                vec![("data", "Required value: an envelope must carry at least one object")],
            ),
            (
                envelope("ClusterResourceEnvelope", None, Value::Object(many)),
                vec![("data", "must have at most 50 entries, got 51")],
            ),
            (
                envelope("ClusterResourceEnvelope", None, json!({"x": "apiVersion: v1"})),
                vec![("data.x", "must be a Kubernetes object (a map), not a string")],
            ),
            (
                envelope("ClusterResourceEnvelope", None, json!({"x": {"metadata": {}}})),
                vec![
                    ("data.x.apiVersion", "Required value: the carried object must have an apiVersion (gitfleet's own rule: a hub admits the envelope, but no member can apply the object)"),
                    ("data.x.kind", "Required value: the carried object must have a kind (gitfleet's own rule: a hub admits the envelope, but no member can apply the object)"),
                    ("data.x.metadata.name", "Required value: the carried object must have a metadata.name (gitfleet's own rule: a hub admits the envelope, but no member can apply the object)"),
                ],
            ),
            (
                envelope("ClusterResourceEnvelope", None, json!({"cm": cm("c", Some("app"))})),
                vec![("data.cm", "a namespaced object ConfigMap app/c has been wrapped in a cluster resource envelope; a ClusterResourceEnvelope may carry only cluster-scoped objects")],
            ),
            (
                envelope("ClusterResourceEnvelope", None, json!({"cr": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r", "namespace": "app"}}})),
                vec![("data.cr.metadata.namespace", "the cluster-scoped object ClusterRole r must not set metadata.namespace (\"app\")")],
            ),
            (
                envelope("ClusterResourceEnvelope", None, json!({"w": widget.clone()})),
                vec![("data.w", "the scope of kind Widget (group example.com) is unknown; add its CustomResourceDefinition to the repository")],
            ),
            (
                envelope("ResourceEnvelope", Some("app"), json!({"cr": cluster_role("r")})),
                vec![("data.cr", "a cluster-scoped object ClusterRole r has been wrapped in a ResourceEnvelope; it may carry only namespaced objects of its own namespace")],
            ),
            (
                envelope("ResourceEnvelope", Some("app"), json!({"cm": cm("c", Some("other"))})),
                vec![("data.cm.metadata.namespace", "a namespaced object ConfigMap other/c has been wrapped in a ResourceEnvelope from another namespace (\"app\")")],
            ),
            (
                envelope("ResourceEnvelope", Some("app"), json!({"cm": cm("c", None)})),
                vec![("data.cm.metadata.namespace", "Required value: the namespaced object ConfigMap c must set metadata.namespace to the envelope's namespace \"app\"")],
            ),
        ];
        let scopes = ScopeTable::builtin();
        for (v, want) in cases {
            let got = envelope_contents(&object(v.clone()), &scopes)
                .unwrap()
                .unwrap_err();
            assert_eq!(fields(&got), want, "{v}");
        }
        // A kind whose CRD the commit declares has a known scope.
        let mut scopes = ScopeTable::builtin();
        scopes.add("example.com", "Widget", Scope::Namespaced);
        widget["metadata"]["namespace"] = json!("app");
        let v = envelope(
            "ResourceEnvelope",
            Some("app"),
            json!({"w": widget.clone()}),
        );
        assert_eq!(
            envelope_contents(&object(v), &scopes).unwrap().unwrap(),
            vec![widget]
        );
    }

    #[test]
    fn validate_and_scope_problems_are_separate() {
        let v = envelope(
            "ResourceEnvelope",
            Some("app"),
            json!({"cr": cluster_role("r")}),
        );
        let env: ResourceEnvelope = decode(&v).unwrap();
        assert_eq!(env.validate(), vec![]);
        assert_eq!(env.scope_problems(&ScopeTable::builtin()).len(), 1);
        let v = envelope(
            "ClusterResourceEnvelope",
            None,
            json!({"cr": cluster_role("r")}),
        );
        let env: ClusterResourceEnvelope = decode(&v).unwrap();
        assert_eq!(env.validate(), vec![]);
        assert_eq!(env.scope_problems(&ScopeTable::builtin()), vec![]);
    }

    #[test]
    fn unknown_fields_are_decode_problems() {
        let mut v = envelope(
            "ClusterResourceEnvelope",
            None,
            json!({"cr": cluster_role("r")}),
        );
        v["spec"] = json!({});
        let got = envelope_contents(&object(v), &ScopeTable::builtin())
            .unwrap()
            .unwrap_err();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].field, "spec");
    }

    fn legacy(data: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "env", "namespace": "app", "annotations": {ENVELOPE_CONFIGMAP_ANNOTATION: "true", LEGACY_ENVELOPE_OPT_IN_ANNOTATION: "true"}},
            "data": data,
        })
    }

    #[test]
    fn legacy_configmap_unwraps_multi_document_yaml_and_json() {
        let multi = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: app}\n---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: two\n  namespace: app\nspec: {replicas: 2}\n";
        let json_doc = r#"{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "three", "namespace": "app"}}"#;
        let v = legacy(json!({"multi.yaml": multi, "secret.json": json_doc}));
        let got = envelope_contents(&object(v), &ScopeTable::builtin())
            .unwrap()
            .unwrap();
        assert_eq!(
            got,
            vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one", "namespace": "app"}}),
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "two", "namespace": "app"}, "spec": {"replicas": 2}}),
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "three", "namespace": "app"}}),
            ]
        );
        // Without data there is nothing to carry.
        let mut v = legacy(json!({}));
        v.as_object_mut().unwrap().remove("data");
        assert_eq!(
            envelope_contents(&object(v), &ScopeTable::builtin())
                .unwrap()
                .unwrap(),
            Vec::<Value>::new()
        );
    }

    #[test]
    fn legacy_configmap_rules() {
        let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
            (
                json!({"x": "kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\n"}),
                vec![("data.x", "a cluster-scoped object ClusterRole r has been wrapped in an envelope ConfigMap; it may carry only namespaced objects of its own namespace")],
            ),
            (
                json!({"x": "kind: ConfigMap\napiVersion: v1\nmetadata: {name: c, namespace: other}\n---\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: d}\n"}),
                vec![
                    ("data.x.metadata.namespace", "document 1: a namespaced object ConfigMap other/c has been wrapped in an envelope ConfigMap from another namespace (\"app\")"),
                    ("data.x.metadata.namespace", "document 2: Required value: the namespaced object ConfigMap d must set metadata.namespace to the envelope's namespace \"app\""),
                ],
            ),
            (
                json!({"x": "kind: ConfigMap\nmetadata: {name: c, namespace: app}\n"}),
                vec![("data.x.apiVersion", "Required value: the carried object must have an apiVersion (gitfleet's own rule: a hub admits the envelope, but no member can apply the object)")],
            ),
            (json!({"x": "a: [unclosed"}), vec![("data.x", "")]),
            (json!({"x": 3}), vec![("data.x", "must be a string holding YAML or JSON manifests")]),
            (json!({"x": "- a\n- b\n"}), vec![("data.x", "must be a Kubernetes object (a map), not a list")]),
        ];
        for (data, want) in cases {
            let got = envelope_contents(&object(legacy(data.clone())), &ScopeTable::builtin())
                .unwrap()
                .unwrap_err();
            if want[0].1.is_empty() {
                assert_eq!(got.len(), 1);
                assert_eq!(got[0].field, "data.x");
                assert!(
                    got[0].message.starts_with("is not valid YAML or JSON: "),
                    "{}",
                    got[0].message
                );
            } else {
                assert_eq!(fields(&got), want, "{data}");
            }
        }
    }

    #[test]
    fn contents_of_a_raw_value_use_its_namespace() {
        let v = envelope(
            "ResourceEnvelope",
            Some("app"),
            json!({"cm": cm("c", Some("app"))}),
        );
        assert_eq!(
            envelope_contents_of(&v, &ScopeTable::builtin())
                .unwrap()
                .unwrap(),
            vec![cm("c", Some("app"))]
        );
        assert!(envelope_contents_of(&cm("c", Some("app")), &ScopeTable::builtin()).is_none());
        assert_eq!(
            EnvelopeKind::of_value(&v),
            Some(EnvelopeKind::ResourceEnvelope)
        );
    }
    /// One test per rule of the envelope CRDs and gitfleet's own, named after the rule: the
    /// breaking document names the field, the edge case is admitted.
    mod rules {
        use crate::model::testing::rule_tests;

        const CR: &str =
            "{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: r}}";

        fn envelope(data: &str) -> String {
            format!("apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceEnvelope\nmetadata: {{name: e}}\ndata: {data}\n")
        }
        fn entries(n: usize) -> String {
            let items: Vec<String> = (0..n).map(|i| format!("e{i}: {CR}")).collect();
            envelope(&format!("{{{}}}", items.join(", ")))
        }
        fn one(obj: &str) -> String {
            envelope(&format!("{{x: {obj}}}"))
        }

        rule_tests! { super::ClusterResourceEnvelope;
            envelope_name_is_a_dns_subdomain: one(CR).replace("name: e}", "name: E_1}") => "metadata.name", "DNS-1123 subdomain";
                ok: one(CR).replace("name: e}", "name: e.1}");
            envelope_data_at_least_one_entry: entries(0) => "data", "at least one object";
                ok: entries(1);
            envelope_data_at_most_50_entries: entries(51) => "data", "at most 50 entries";
                ok: entries(50);
            envelope_data_required: envelope("{}").replace("data: {}\n", "") => "", "missing field `data`";
                ok: entries(1);
            envelope_entry_is_an_object: one("text") => "data.x", "must be a Kubernetes object (a map)";
                ok: one(CR);
            envelope_null_entry_is_gitfleets_own: one("null") => "data.x", "not null (gitfleet's own rule";
                ok: one(CR);
            envelope_entry_api_version_is_gitfleets_own: one("{kind: ClusterRole, metadata: {name: r}}") => "data.x.apiVersion", "gitfleet's own rule";
                ok: one(CR);
            envelope_entry_kind_is_gitfleets_own: one("{apiVersion: v1, metadata: {name: r}}") => "data.x.kind", "gitfleet's own rule";
                ok: one(CR);
            envelope_entry_name_is_gitfleets_own: one("{apiVersion: v1, kind: ClusterRole, metadata: {}}") => "data.x.metadata.name", "gitfleet's own rule";
                ok: one(CR);
        }
    }
}
