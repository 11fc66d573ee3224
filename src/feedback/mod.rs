//! OCM's status feedback: what a ManifestWork's `feedbackRules` and `conditionRules` read from
//! a manifest's live object, reported as OCM's work agent reports it in the work's
//! `status.resourceStatus.manifests[]` (`statusFeedback.values[]` and `conditions`) and, for
//! the rules' conditions, aggregated in the work's `status.conditions`. Read from
//! open-cluster-management-io/ocm:
//! - values (pkg/work/spoke/statusfeedback/reader.go `GetValuesByRule`): `WellKnownStatus` reads
//!   OCM's paths for the object's group, version and kind ([`well_known_paths`]; another kind
//!   is an error); `JSONPaths` reads each path, skipping (with an error) one whose `version` is
//!   not the object's; a path that finds nothing or a null gives no value and no error; an
//!   integer, string or bool is a value of that type; anything else (a map, a list, a float) is
//!   an error, unless raw JSON is on (OCM's `RawFeedbackJsonString` feature gate, off by
//!   default): then it is `JsonRaw` (at most 1024 bytes); several matches give the first,
//!   or with raw JSON the list of all;
//! - the `StatusFeedbackSynced` condition (pkg/work/spoke/controllers/statuscontroller
//!   availablestatus_controller.go `getFeedbackValues`): `True`/`StatusFeedbackSynced`, or
//!   `False`/`StatusFeedbackSyncFailed` with every rule's errors, the values found still
//!   reported; the manifest's conditions from condition rules ([`conditions`]).
//!
//! Secrets: no rule is ever evaluated on a core `Secret` (gitfleet's rule, beyond OCM, whose
//! agent reads what rules name): validation refuses rules whose resource is `secrets`
//! ([`validate`]), and [`read`] reports nothing from a Secret whatever the rules say, so no
//! value of one reaches status, logs, plan or the dashboard.
//!
//! Pure: rules and an object in, values and conditions out; reading the object is push's.

pub mod conditions;
pub mod jsonpath;

use crate::model::work::{FeedbackRule, FeedbackType, StatusRules};
use crate::model::{Problem, Problems};
use crate::schedule::Condition;
use jsonpath::{Found, JsonPath};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// OCM's maximum length of a `JsonRaw` value (reader.go `maxJSONRawLength`, the CRD's
/// `maxLength`).
pub const MAX_JSON_RAW_LENGTH: usize = 1024;

/// The manifest condition that says whether the feedback rules could be read.
pub const STATUS_FEEDBACK_SYNCED: &str = "StatusFeedbackSynced";

/// How values that are not scalars are reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RawJson {
    /// OCM's default: such a value is an error, and of several matches the first is taken.
    #[default]
    Off,
    /// OCM's `RawFeedbackJsonString` feature gate: reported as `JsonRaw`.
    On,
}

/// `statusFeedback.values[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    pub name: String,
    pub field_value: FieldValue,
}

/// `fieldValue`: one of the four, with its type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum FieldValue {
    Integer {
        integer: i64,
    },
    String {
        string: String,
    },
    Boolean {
        boolean: bool,
    },
    JsonRaw {
        #[serde(rename = "jsonRaw")]
        json_raw: String,
    },
}

impl std::fmt::Display for FieldValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldValue::Integer { integer } => write!(f, "{integer}"),
            FieldValue::String { string } => write!(f, "{string:?}"),
            FieldValue::Boolean { boolean } => write!(f, "{boolean}"),
            FieldValue::JsonRaw { json_raw } => f.write_str(json_raw),
        }
    }
}

/// `status.resourceStatus.manifests[i].resourceMeta`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceMeta {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// The plural resource name, as the member's discovery names it.
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

/// `status.resourceStatus.manifests[i]`, for a manifest that has rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCondition {
    pub resource_meta: ResourceMeta,
    #[serde(default)]
    pub status_feedback: StatusFeedback,
    /// `StatusFeedbackSynced` (when it has feedback rules), then the condition rules' ones.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusFeedback {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<FeedbackValue>,
}

/// What a ManifestWork's status says of the rules' results on one cluster: OCM's
/// `status.conditions` as far as rules make them (the aggregated conditions of the condition
/// rules) and `status.resourceStatus`, for the manifests that have rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    pub resource_status: ResourceStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceStatus {
    #[serde(default)]
    pub manifests: Vec<ManifestCondition>,
}

impl WorkStatus {
    /// The work's status from its manifests' (`None` when no manifest has rules).
    pub fn of(manifests: Vec<ManifestCondition>) -> Option<WorkStatus> {
        if manifests.is_empty() {
            return None;
        }
        Some(WorkStatus {
            conditions: conditions::aggregate(&manifests),
            resource_status: ResourceStatus { manifests },
        })
    }
}

/// Whether `group`/`kind` is a core Secret, whose values are never read.
pub fn is_secret(group: &str, kind: &str) -> bool {
    group.is_empty() && kind == "Secret"
}

/// The manifest's status from its live object under `rules`.
pub fn read(
    meta: ResourceMeta,
    rules: &StatusRules,
    object: &Value,
    raw: RawJson,
) -> ManifestCondition {
    if is_secret(&meta.group, &meta.kind) {
        return ManifestCondition {
            resource_meta: meta,
            status_feedback: StatusFeedback::default(),
            conditions: vec![Condition {
                type_: STATUS_FEEDBACK_SYNCED.into(),
                status: "False".into(),
                reason: "StatusFeedbackSyncFailed".into(),
                message: "gitfleet never reads feedback or conditions from a Secret".into(),
            }],
        };
    }
    let mut out = Vec::new();
    let mut values = Vec::new();
    if !rules.feedback.is_empty() {
        let (v, synced) = feedback(&rules.feedback, object, raw);
        values = v;
        out.push(synced);
    }
    out.extend(conditions::evaluate(&rules.conditions, object));
    ManifestCondition {
        resource_meta: meta,
        status_feedback: StatusFeedback { values },
        conditions: out,
    }
}

/// `getFeedbackValues`: every rule's values, and `StatusFeedbackSynced`.
pub fn feedback(
    rules: &[FeedbackRule],
    object: &Value,
    raw: RawJson,
) -> (Vec<FeedbackValue>, Condition) {
    let mut values = Vec::new();
    let mut errors: Vec<Vec<String>> = Vec::new();
    for rule in rules {
        let (v, e) = values_by_rule(rule, object, raw);
        values.extend(v);
        if !e.is_empty() {
            errors.push(e);
        }
    }
    let condition = match aggregate_message(&errors) {
        None => Condition {
            type_: STATUS_FEEDBACK_SYNCED.into(),
            status: "True".into(),
            reason: "StatusFeedbackSynced".into(),
            message: String::new(),
        },
        Some(e) => Condition {
            type_: STATUS_FEEDBACK_SYNCED.into(),
            status: "False".into(),
            reason: "StatusFeedbackSyncFailed".into(),
            message: format!("Sync status feedback failed with error {e}"),
        },
    };
    (values, condition)
}

/// Kubernetes' `utilerrors.NewAggregate(...).Error()` of the rules' aggregates: one error is
/// its own text; several are flattened, deduplicated and listed in brackets.
fn aggregate_message(rules: &[Vec<String>]) -> Option<String> {
    let one = |errs: &[String]| -> String {
        let mut seen: Vec<&String> = Vec::new();
        for e in errs {
            if !seen.contains(&e) {
                seen.push(e);
            }
        }
        match seen.as_slice() {
            [single] => (*single).clone(),
            many => format!(
                "[{}]",
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    };
    match rules {
        [] => None,
        [single] => Some(one(single)),
        many => Some(one(&many.concat())),
    }
}

/// OCM's well-known status paths of a kind (pkg/work/spoke/statusfeedback/rules/rule.go).
pub fn well_known_paths(
    group: &str,
    version: &str,
    kind: &str,
) -> &'static [(&'static str, &'static str)] {
    match (group, version, kind) {
        ("apps", "v1", "Deployment") => &[
            ("ReadyReplicas", ".status.readyReplicas"),
            ("Replicas", ".status.replicas"),
            ("AvailableReplicas", ".status.availableReplicas"),
        ],
        ("apps", "v1", "DaemonSet") => &[
            ("NumberReady", ".status.numberReady"),
            ("DesiredNumberScheduled", ".status.desiredNumberScheduled"),
            ("NumberAvailable", ".status.numberAvailable"),
        ],
        ("batch", "v1", "Job") => &[
            (
                "JobComplete",
                r#".status.conditions[?(@.type=="Complete")].status"#,
            ),
            ("JobSucceeded", ".status.succeeded"),
        ],
        ("", "v1", "Pod") => &[
            (
                "PodReady",
                r#".status.conditions[?(@.type=="Ready")].status"#,
            ),
            ("PodPhase", ".status.phase"),
        ],
        _ => &[],
    }
}

/// The object's group, version and kind from its `apiVersion` and `kind`.
fn gvk(object: &Value) -> (&str, &str, &str) {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    (group, version, kind)
}

/// `GetValuesByRule`: the values one rule reads, and its errors.
pub fn values_by_rule(
    rule: &FeedbackRule,
    object: &Value,
    raw: RawJson,
) -> (Vec<FeedbackValue>, Vec<String>) {
    let mut values = Vec::new();
    let mut errors = Vec::new();
    let (group, version, kind) = gvk(object);
    let read =
        |name: &str, path: &str, values: &mut Vec<_>, errors: &mut Vec<_>| match value_by_path(
            name, path, object, raw,
        ) {
            Ok(Some(v)) => values.push(v),
            Ok(None) => {}
            Err(e) => errors.push(e),
        };
    match rule.type_ {
        FeedbackType::WellKnownStatus => {
            let paths = well_known_paths(group, version, kind);
            if paths.is_empty() {
                // As schema.GroupVersionKind prints itself.
                errors.push(format!(
                    "cannot find the wellknown statuses for resource with gvk {}{version}, Kind={kind}",
                    if group.is_empty() { "/".to_string() } else { format!("{group}/") }
                ));
            }
            for (name, path) in paths {
                read(name, path, &mut values, &mut errors);
            }
        }
        FeedbackType::JsonPaths => {
            for p in &rule.json_paths {
                if !p.version.is_empty() && p.version != version {
                    errors.push(format!(
                        "version set in the path {} is not matched for the related resource",
                        p.name
                    ));
                    continue;
                }
                read(&p.name, &p.path, &mut values, &mut errors);
            }
        }
    }
    (values, errors)
}

/// `getValueByJsonPath`: one named path's value, none, or why it cannot be reported.
fn value_by_path(
    name: &str,
    path: &str,
    object: &Value,
    raw: RawJson,
) -> Result<Option<FeedbackValue>, String> {
    let p = JsonPath::parse(path)
        .map_err(|e| format!("failed to parse json path {path} of {name} with error: {e}"))?;
    let found = p
        .find(object)
        .map_err(|e| format!("failed to find value for {name} with error: {e}"))?;
    let value = match (found.as_slice(), raw) {
        ([], _) => return Ok(None),
        ([first, ..], RawJson::Off) | ([first], RawJson::On) => first.clone(),
        (all, RawJson::On) => {
            return raw_value(
                name,
                &Value::Array(all.iter().map(Found::to_json).collect()),
            )
            .map(Some)
        }
    };
    let field_value = match &value {
        Found::Json(Value::Null) => return Ok(None),
        Found::Json(Value::Number(n)) if n.is_i64() => FieldValue::Integer {
            integer: n.as_i64().expect("checked"),
        },
        Found::Json(Value::String(s)) => FieldValue::String { string: s.clone() },
        Found::Text(s) => FieldValue::String { string: s.clone() },
        Found::Json(Value::Bool(b)) | Found::Bool(b) => FieldValue::Boolean { boolean: *b },
        other => match raw {
            RawJson::On => return raw_value(name, &other.to_json()).map(Some),
            RawJson::Off => {
                return Err(format!(
                    "the type {} of the value for {name} is not found",
                    other.go_type()
                ))
            }
        },
    };
    Ok(Some(FeedbackValue {
        name: name.to_string(),
        field_value,
    }))
}

fn raw_value(name: &str, v: &Value) -> Result<FeedbackValue, String> {
    let json = go_json(v);
    if json.len() > MAX_JSON_RAW_LENGTH {
        return Err(format!("the length of returned json raw string for name {name} is larger than the maximum length {MAX_JSON_RAW_LENGTH}"));
    }
    Ok(FeedbackValue {
        name: name.to_string(),
        field_value: FieldValue::JsonRaw { json_raw: json },
    })
}

/// Go's `json.Marshal` of an unstructured value: map keys sorted, `<`, `>`, `&`, U+2028 and
/// U+2029 escaped.
fn go_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v)
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// gitfleet's rules on a work template's feedback and condition rules, beyond the CRD's
/// (`prefix` is the template's path): every JSONPath parses, every CEL expression compiles in
/// OCM's environment, and no rule reads a Secret.
pub fn validate(prefix: &str, t: &crate::model::ocm::ManifestWorkTemplate) -> Vec<Problem> {
    let mut p = Problems::default();
    let cel = conditions::Cel::new();
    for (i, c) in t.manifest_configs.iter().enumerate() {
        let f = format!("{prefix}.manifestConfigs[{i}]");
        let id = &c.resource_identifier;
        if id.group.is_empty() && id.resource == "secrets" {
            for (field, any) in [
                ("feedbackRules", !c.feedback_rules.is_empty()),
                ("conditionRules", !c.condition_rules.is_empty()),
            ] {
                if any {
                    p.push(
                        format!("{f}.{field}"),
                        "gitfleet never reads a Secret's values back into status: remove the rules of this Secret",
                    );
                }
            }
            continue;
        }
        for (j, rule) in c.feedback_rules.iter().enumerate() {
            for (k, path) in rule.json_paths.iter().enumerate() {
                if let Err(e) = JsonPath::parse(&path.path) {
                    p.push(
                        format!("{f}.feedbackRules[{j}].jsonPaths[{k}].path"),
                        format!("invalid JSONPath {:?}: {e}", path.path),
                    );
                }
            }
        }
        for (j, rule) in c.condition_rules.iter().enumerate() {
            let at = format!("{f}.conditionRules[{j}]");
            for (k, e) in rule.cel_expressions.iter().enumerate() {
                if let Err(err) = cel.compile_rule(e) {
                    p.push(format!("{at}.celExpressions[{k}]"), err);
                }
            }
            if !rule.message_expression.is_empty() {
                if let Err(err) = cel.compile_message(&rule.message_expression) {
                    p.push(format!("{at}.messageExpression"), err);
                }
            }
        }
    }
    p.0
}

#[cfg(test)]
mod tests;
