//! A Kubernetes object as read from a commit: its type, identity, origin and raw JSON value.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// Where an object came from: file (relative to the repository root), document index in the file
/// (0-based, as the YAML stream counts them) and the 1-based line where the document starts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Origin {
    pub file: String,
    pub document: usize,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Group, version, kind. The core group is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// Split an `apiVersion` (`apps/v1`, `v1`) into group and version.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((g, v)) => Self::new(g, v, kind),
            None => Self::new("", api_version, kind),
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, Kind={}", self.api_version(), self.kind)
    }
}

/// An object's identity: the same object in two API versions is the same object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// (De)serialises an `Arc<Value>` as the value it holds. serde's own `rc` feature would do the
/// same, but turning it on changes how every crate that uses serde is built.
pub mod shared_value {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(value: &Arc<Value>, s: S) -> Result<S::Ok, S::Error> {
        value.as_ref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Value>, D::Error> {
        Value::deserialize(d).map(Arc::new)
    }
}

/// `metadata.<field>` of an object. Field by field, not `Value::pointer`: that allocates each
/// step of its path, and this runs for every object of every push and every object a
/// fleet-wide re-check reads.
pub fn metadata_field<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    v.get("metadata")?.get(field)
}

/// [`metadata_field`] as a string.
pub fn metadata_str<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    metadata_field(v, field)?.as_str()
}

/// One object of a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Object {
    pub origin: Origin,
    pub gvk: Gvk,
    pub name: String,
    /// `None` for cluster-scoped objects (and before scope is known).
    pub namespace: Option<String>,
    /// The whole object as JSON, exactly as written; shared by the selections and renderings
    /// that carry it unchanged.
    #[serde(with = "shared_value")]
    pub value: Arc<Value>,
}

impl Object {
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            group: self.gvk.group.clone(),
            kind: self.gvk.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    pub fn labels(&self) -> crate::model::Labels {
        labels_of(&self.value)
    }

    /// `Kind/name` as diagnostics show it.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.gvk.kind, self.name)
    }
}

/// The `metadata.labels` of a JSON object (non-string values are ignored).
pub fn labels_of(value: &Value) -> crate::model::Labels {
    value
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Standard `metadata` of a typed API object. Unknown metadata fields are errors, as on a server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_references: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_fields: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
}
