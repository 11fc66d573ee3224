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

/// An object's identity, as Kubernetes identifies objects: API group, kind, namespace (`None`
/// when cluster-scoped) and name. The version is not part of it: the same object read in two
/// API versions is one object (a member is asked in a version: that is [`crate::push::ObjectRef`]).
///
/// Held as its id, `Kind.group/namespace/name` (`Kind/…` for the core group, no namespace part
/// when cluster-scoped), with where each part ends: one allocation and the size of a `String`,
/// no heavier than the id text the guard's sets held, and sorted as that text, so the sets
/// state files store are written in the same order. The id is what state files store ([`ObjectKey::from_id`] reads it back
/// there, at the edge); [`ObjectKey::short`] is the `Kind/namespace/name` diagnostics and plans
/// show.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    id: Box<str>,
    /// Where the kind, the `.group` and the `/namespace` end in `id` (equal ends: no group, no
    /// namespace). 16 bits keep the key the size of a `String`: what comes before the name is
    /// short in any object Kubernetes accepts (kind and namespace at most 63 characters, group
    /// 253). A key whose is not has [`LONG`] first, whether it is namespaced second, and finds
    /// its parts again in its id.
    ends: [u16; 3],
}

/// See [`ObjectKey`]'s `ends`.
const LONG: u16 = u16::MAX;

impl ObjectKey {
    pub fn new(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
        let mut id = String::with_capacity(
            kind.len() + group.len() + namespace.map_or(0, str::len) + name.len() + 3,
        );
        id.push_str(kind);
        let kind_end = id.len();
        if !group.is_empty() {
            id.push('.');
            id.push_str(group);
        }
        let group_end = id.len();
        if let Some(ns) = namespace {
            id.push('/');
            id.push_str(ns);
        }
        let namespace_end = id.len();
        id.push('/');
        id.push_str(name);
        let ends = match u16::try_from(namespace_end) {
            Ok(end) if end < LONG => [kind_end as u16, group_end as u16, end],
            _ => [LONG, u16::from(namespace.is_some()), 0],
        };
        ObjectKey {
            id: id.into_boxed_str(),
            ends,
        }
    }

    /// The key of a manifest as written: missing fields are empty (an empty namespace is kept
    /// as one, as the ids in state files always had it).
    pub fn of(manifest: &Value) -> ObjectKey {
        let top = |f: &str| manifest.get(f).and_then(Value::as_str).unwrap_or_default();
        let group = top("apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
        ObjectKey::new(
            group,
            top("kind"),
            metadata_str(manifest, "namespace"),
            metadata_str(manifest, "name").unwrap_or_default(),
        )
    }

    /// Reads an id back (state files): `Kind[.group]/[namespace/]name`. Kinds have no dots and
    /// namespaces and names no slashes, which is what makes the id readable; an id that would
    /// not be written again as it was read is refused.
    pub fn from_id(id: &str) -> Result<ObjectKey, ParseObjectKeyError> {
        let (kind_group, rest) = id
            .split_once('/')
            .ok_or_else(|| ParseObjectKeyError(id.to_string()))?;
        let (kind, group) = kind_group.split_once('.').unwrap_or((kind_group, ""));
        let (namespace, name) = match rest.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, rest),
        };
        let key = ObjectKey::new(group, kind, namespace, name);
        if &*key.id != id {
            return Err(ParseObjectKeyError(id.to_string()));
        }
        Ok(key)
    }

    /// Where the kind, the `.group` and the `/namespace` end.
    fn ends(&self) -> [usize; 3] {
        let [kind, group, namespace] = self.ends;
        if kind != LONG {
            return [kind.into(), group.into(), namespace.into()];
        }
        let id = &*self.id;
        let group_end = id.find('/').unwrap_or(id.len());
        let kind_end = id[..group_end].find('.').unwrap_or(group_end);
        let namespace_end = if group == 1 {
            id[group_end + 1..]
                .find('/')
                .map_or(id.len(), |i| group_end + 1 + i)
        } else {
            group_end
        };
        [kind_end, group_end, namespace_end]
    }

    pub fn kind(&self) -> &str {
        &self.id[..self.ends()[0]]
    }

    /// The API group, empty for the core group.
    pub fn group(&self) -> &str {
        let [kind, group, _] = self.ends();
        if group == kind {
            ""
        } else {
            &self.id[kind + 1..group]
        }
    }

    pub fn namespace(&self) -> Option<&str> {
        let [_, group, namespace] = self.ends();
        (namespace != group).then(|| &self.id[group + 1..namespace])
    }

    pub fn name(&self) -> &str {
        &self.id[self.ends()[2] + 1..]
    }

    /// The id (what `Display` writes).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `Kind/namespace/name` (`Kind/name` when cluster-scoped), without the group: how
    /// diagnostics, KubeFleet's messages and plans name an object.
    pub fn short(&self) -> Short<'_> {
        Short(self)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.id, f)
    }
}

/// See [`ObjectKey::short`].
pub struct Short<'a>(&'a ObjectKey);

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.0;
        match key.namespace() {
            Some(ns) => write!(f, "{}/{}/{}", key.kind(), ns, key.name()),
            None => write!(f, "{}/{}", key.kind(), key.name()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an object id (Kind.group/namespace/name, Kind/name, ...)")]
pub struct ParseObjectKeyError(pub String);

/// Written as its id.
impl Serialize for ObjectKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.id)
    }
}

impl<'de> Deserialize<'de> for ObjectKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ObjectKey, D::Error> {
        let id = String::deserialize(d)?;
        ObjectKey::from_id(&id).map_err(serde::de::Error::custom)
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
        ObjectKey::new(
            &self.gvk.group,
            &self.gvk.kind,
            self.namespace.as_deref(),
            &self.name,
        )
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_has_its_parts_and_its_id() {
        let k = ObjectKey::new("apps", "Deployment", Some("ns"), "web");
        assert_eq!(
            (k.group(), k.kind(), k.namespace(), k.name()),
            ("apps", "Deployment", Some("ns"), "web")
        );
        assert_eq!(k.to_string(), "Deployment.apps/ns/web");
        assert_eq!(k.short().to_string(), "Deployment/ns/web");
        let k = ObjectKey::new("", "Namespace", None, "ns");
        assert_eq!((k.group(), k.namespace()), ("", None));
        assert_eq!(k.to_string(), "Namespace/ns");
        let of = ObjectKey::of(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "ns", "name": "web"},
        }));
        assert_eq!(of, ObjectKey::new("apps", "Deployment", Some("ns"), "web"));
    }

    /// The ids state files hold (as gitfleet has always written them) read back to the same
    /// key, and are written again byte for byte.
    #[test]
    fn ids_read_back_to_the_same_key() {
        for id in [
            "ConfigMap/n/c",
            "Deployment.apps/n/d",
            "Namespace/n",
            "ClusterRole.rbac.authorization.k8s.io/view",
            "ConfigMap//no-namespace-value",
            "Thing.example.com/",
        ] {
            let key = ObjectKey::from_id(id).unwrap();
            assert_eq!(key.to_string(), id);
            let json = serde_json::to_string(&key).unwrap();
            assert_eq!(serde_json::from_str::<ObjectKey>(&json).unwrap(), key);
        }
        for bad in ["Namespace", "Kind./x", ""] {
            assert!(ObjectKey::from_id(bad).is_err(), "{bad}");
        }
    }

    /// Sets of keys sort as the ids did when they were text, so state is written in the
    /// same order.
    /// Parts too long for the key's 16-bit ends are found again in its id.
    #[test]
    fn a_key_with_long_parts_keeps_them() {
        let long = "n".repeat(70_000);
        for namespace in [Some(long.as_str()), None] {
            let k = ObjectKey::new(&long, "Kind", namespace, "x");
            assert_eq!(
                (k.group(), k.kind(), k.namespace(), k.name()),
                (long.as_str(), "Kind", namespace, "x")
            );
        }
        assert_eq!(
            std::mem::size_of::<ObjectKey>(),
            std::mem::size_of::<String>()
        );
    }

    #[test]
    fn keys_sort_as_their_ids() {
        let ids = [
            "Deployment.apps/n/d",
            "ConfigMap/n/c",
            "Namespace/n",
            "Event.events.k8s.io/n/e",
            "Event/n/e",
        ];
        let keys: std::collections::BTreeSet<ObjectKey> = ids
            .iter()
            .map(|id| ObjectKey::from_id(id).unwrap())
            .collect();
        let texts: std::collections::BTreeSet<&str> = ids.into_iter().collect();
        let sorted: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(sorted, texts.into_iter().collect::<Vec<_>>());
    }
}
