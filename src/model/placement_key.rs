//! Which placement a value is about: its kind (KubeFleet ClusterResourcePlacement or
//! ResourcePlacement, OCM Placement) and its key (kind, namespace, name), the identity every map
//! of placements is keyed by (state, schedule, status, metrics, plan).
//!
//! Text only where it meets text, every form made here: the id `crp/NAME`, `rp/NAMESPACE/NAME`,
//! `ocm/NAMESPACE/NAME` (state files, the status API, logs and metrics) through `Display` and
//! `FromStr`; the record key `crp.NAME`, `rp.NAMESPACE.NAME`, … that names the placement in
//! the records members keep ([`PlacementKey::record_key`], read back by
//! [`PlacementKey::from_record_key`]); the label value gitfleet puts on what it applies
//! ([`PlacementKey::label_value`]); and the kind's API name in JSON.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The kinds of placement gitfleet rolls out. Serialised as the API kind (`Placement` for OCM).
///
/// Declared in the order of their ids' prefixes (`crp` < `mw` < `ocm` < `rp`), so that keys
/// sort as their ids did when maps were keyed by text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PlacementKind {
    ClusterResourcePlacement,
    /// A plain OCM `ManifestWork` (work.open-cluster-management.io): not a placement in OCM, but
    /// rolled out as one here, to the one cluster its namespace names.
    ManifestWork,
    /// OCM's `Placement` (cluster.open-cluster-management.io).
    #[serde(rename = "Placement")]
    OcmPlacement,
    ResourcePlacement,
}

impl PlacementKind {
    /// The first part of the id: `crp`, `ocm` or `rp`.
    pub fn prefix(self) -> &'static str {
        match self {
            PlacementKind::ClusterResourcePlacement => "crp",
            PlacementKind::ManifestWork => "mw",
            PlacementKind::OcmPlacement => "ocm",
            PlacementKind::ResourcePlacement => "rp",
        }
    }

    /// The kind as its API names it.
    pub fn api_kind(self) -> &'static str {
        match self {
            PlacementKind::ClusterResourcePlacement => "ClusterResourcePlacement",
            PlacementKind::ManifestWork => "ManifestWork",
            PlacementKind::OcmPlacement => "Placement",
            PlacementKind::ResourcePlacement => "ResourcePlacement",
        }
    }

    /// KubeFleet's placements (the ones with resource selectors and a rollout strategy).
    pub fn is_kubefleet(self) -> bool {
        matches!(
            self,
            PlacementKind::ClusterResourcePlacement | PlacementKind::ResourcePlacement
        )
    }

    /// OCM's: a Placement (whose ManifestWorkReplicaSets deliver) or a plain ManifestWork. Both
    /// deliver fixed workloads to every cluster at once.
    pub fn is_ocm(self) -> bool {
        !self.is_kubefleet()
    }
}

impl fmt::Display for PlacementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.api_kind())
    }
}

/// One placement: kind, namespace (for the namespaced kinds) and name. Serialised as its three
/// fields (`kind`, `namespace`, `name`); see [`by_id`] and [`as_id`] for its text form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PlacementKey {
    pub kind: PlacementKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl PlacementKey {
    pub fn new(kind: PlacementKind, namespace: Option<&str>, name: &str) -> PlacementKey {
        PlacementKey {
            kind,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    /// `crp.NAME`, `rp.NAMESPACE.NAME`, `ocm.NAMESPACE.NAME`, `mw.NAMESPACE.NAME`: names the
    /// placement in the records members keep and, through [`Self::label_value`], in labels
    /// (byte for byte as gitfleet 0.1.0 wrote them).
    pub fn record_key(&self) -> String {
        let prefix = self.kind.prefix();
        match &self.namespace {
            Some(ns) => format!("{prefix}.{ns}.{}", self.name),
            None => format!("{prefix}.{}", self.name),
        }
    }

    /// The placement a record key names, as a member's record holds it (namespaces have no
    /// dots, names may); `None` for a key no placement writes.
    pub fn from_record_key(key: &str) -> Option<PlacementKey> {
        let (prefix, rest) = key.split_once('.')?;
        let (kind, namespace, name) = match prefix {
            "crp" => (PlacementKind::ClusterResourcePlacement, None, rest),
            "rp" | "ocm" | "mw" => {
                let (ns, name) = rest.split_once('.')?;
                let kind = match prefix {
                    "rp" => PlacementKind::ResourcePlacement,
                    "ocm" => PlacementKind::OcmPlacement,
                    _ => PlacementKind::ManifestWork,
                };
                (kind, Some(ns), name)
            }
            _ => return None,
        };
        let part = |s: &str| !s.is_empty() && !s.contains('/');
        (part(name) && namespace.is_none_or(part)).then(|| PlacementKey::new(kind, namespace, name))
    }

    /// The value of the placement label on what gitfleet applies: [`Self::record_key`] as a
    /// label value ([`label_value_of`]).
    pub fn label_value(&self) -> String {
        label_value_of(&self.record_key())
    }
}

/// The longest label value Kubernetes accepts.
const LABEL_VALUE_MAX: usize = 63;

/// A record key (as [`PlacementKey::record_key`] writes it, or as a member's record holds it)
/// as a label value: as is when it fits in 63 characters, else a prefix and a hash of the
/// whole key, so that two long keys never share a value.
pub fn label_value_of(record_key: &str) -> String {
    if record_key.len() <= LABEL_VALUE_MAX {
        return record_key.to_string();
    }
    let hash = short_hash(record_key);
    let keep = LABEL_VALUE_MAX - hash.len() - 1;
    // Keys are ASCII (DNS names and dots); a value must end with an alphanumeric character.
    let prefix = record_key[..keep].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{prefix}-{hash}")
}

/// The first 10 hex digits of the sha256 of the key as a JSON string: what the snapshot
/// hash of the key as a JSON value gives, which labels written before carry.
fn short_hash(key: &str) -> String {
    use sha2::{Digest, Sha256};
    let json = serde_json::to_string(key).expect("a string serialises");
    let digest = Sha256::digest(json.as_bytes());
    let mut hex = String::with_capacity(10);
    for b in &digest[..5] {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// The id: `crp/NAME`, `rp/NAMESPACE/NAME`, `ocm/NAMESPACE/NAME`, `mw/CLUSTER/NAME`.
impl fmt::Display for PlacementKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{ns}/{}", self.kind.prefix(), self.name),
            None => write!(f, "{}/{}", self.kind.prefix(), self.name),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a placement id (crp/NAME, rp/NAMESPACE/NAME, ocm/NAMESPACE/NAME or mw/NAMESPACE/NAME)")]
pub struct ParseKeyError(pub String);

impl FromStr for PlacementKey {
    type Err = ParseKeyError;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = id.split('/').collect();
        let key = match parts.as_slice() {
            ["crp", name] => PlacementKey::new(PlacementKind::ClusterResourcePlacement, None, name),
            ["rp", ns, name] => PlacementKey::new(PlacementKind::ResourcePlacement, Some(ns), name),
            ["ocm", ns, name] => PlacementKey::new(PlacementKind::OcmPlacement, Some(ns), name),
            ["mw", ns, name] => PlacementKey::new(PlacementKind::ManifestWork, Some(ns), name),
            _ => return Err(ParseKeyError(id.to_string())),
        };
        if key.name.is_empty() || key.namespace.as_deref() == Some("") {
            return Err(ParseKeyError(id.to_string()));
        }
        Ok(key)
    }
}

/// Serde for one key written as its id (`#[serde(with = "as_id")]`).
pub mod as_id {
    use super::PlacementKey;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(key: &PlacementKey, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(key)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PlacementKey, D::Error> {
        let id = String::deserialize(d)?;
        id.parse().map_err(D::Error::custom)
    }
}

/// Serde for a map keyed by placement, written as a JSON object keyed by id
/// (`#[serde(with = "by_id")]`): the state files' form since gitfleet 0.1.0.
pub mod by_id {
    use super::{BTreeMap, PlacementKey};
    use serde::{de::Error, ser::SerializeMap, Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, V: Serialize>(
        map: &BTreeMap<PlacementKey, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(Some(map.len()))?;
        for (key, value) in map {
            out.serialize_entry(&key.to_string(), value)?;
        }
        out.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
        d: D,
    ) -> Result<BTreeMap<PlacementKey, V>, D::Error> {
        let by_text = BTreeMap::<String, V>::deserialize(d)?;
        by_text
            .into_iter()
            .map(|(id, v)| Ok((id.parse().map_err(D::Error::custom)?, v)))
            .collect()
    }
}

/// [`by_id`] for a map of shared values (`Arc`), each written as the value itself (serde's own
/// `Arc` support is behind its `rc` feature, which would rebuild every dependency that uses
/// serde).
pub mod by_id_shared {
    use super::{BTreeMap, PlacementKey};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer, V: Serialize>(
        map: &BTreeMap<PlacementKey, Arc<V>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(map.iter().map(|(key, value)| (key.to_string(), &**value)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
        d: D,
    ) -> Result<BTreeMap<PlacementKey, Arc<V>>, D::Error> {
        let owned: BTreeMap<PlacementKey, V> = super::by_id::deserialize(d)?;
        Ok(owned.into_iter().map(|(k, v)| (k, Arc::new(v))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_name_the_kind() {
        for (id, kind) in [
            ("crp/a", PlacementKind::ClusterResourcePlacement),
            ("rp/ns/b", PlacementKind::ResourcePlacement),
            ("ocm/ns/c", PlacementKind::OcmPlacement),
        ] {
            let key: PlacementKey = id.parse().unwrap();
            assert_eq!(key.kind, kind);
            assert_eq!(key.to_string(), id);
        }
        for bad in [
            "x/y",
            "crp",
            "crp/ns/a",
            "rp/a",
            "rp//a",
            "crp/",
            "ocm/a/b/c",
        ] {
            assert!(bad.parse::<PlacementKey>().is_err(), "{bad}");
        }
    }

    #[test]
    fn record_keys_name_the_kind_namespace_and_name_and_read_back() {
        let key = |id: &str| id.parse::<PlacementKey>().unwrap().record_key();
        assert_eq!(key("crp/web"), "crp.web");
        assert_eq!(key("rp/team/web"), "rp.team.web");
        assert_eq!(key("ocm/ocm-ns/p"), "ocm.ocm-ns.p");
        for id in [
            "crp/app",
            "crp/a.b",
            "rp/web/web",
            "rp/web/x.y",
            "ocm/ocm-apps/agent",
            "mw/cluster-1/web.app",
        ] {
            let key: PlacementKey = id.parse().unwrap();
            let written = key.record_key();
            assert_eq!(
                PlacementKey::from_record_key(&written),
                Some(key),
                "{written}"
            );
        }
        for bad in ["what.ever", "rp.nodots", "crp.", "rp..x", "crp.a/b", "crp"] {
            assert_eq!(PlacementKey::from_record_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn long_label_values_are_shortened_with_a_hash() {
        let crp = PlacementKey::new(PlacementKind::ClusterResourcePlacement, None, "web");
        assert_eq!(crp.label_value(), "crp.web");
        let long = PlacementKey::new(
            PlacementKind::ResourcePlacement,
            Some(&"n".repeat(40)),
            &"x".repeat(40),
        );
        let v = long.label_value();
        assert_eq!(v.len(), 63);
        assert!(crate::model::is_label_value(&v), "{v}");
        // The hash is the one labels on members already carry.
        let hash =
            &crate::snapshot::hash_value(&serde_json::Value::String(long.record_key()))[..10];
        assert!(v.ends_with(&format!("-{hash}")), "{v}");
        let other = format!("rp.{}.{}", "n".repeat(40), "y".repeat(40));
        assert_ne!(v, label_value_of(&other));
        // A cut that lands on a dot does not leave the value ending in one.
        let dotted = format!("crp.{}.{}", "a".repeat(47), "b".repeat(30));
        assert!(crate::model::is_label_value(&label_value_of(&dotted)));
    }

    #[test]
    fn keys_serialise_with_the_api_kind_and_sort_as_their_ids() {
        let key = PlacementKey::new(PlacementKind::OcmPlacement, Some("ns"), "p");
        assert_eq!(
            serde_json::to_value(&key).unwrap(),
            serde_json::json!({"kind": "Placement", "namespace": "ns", "name": "p"})
        );
        let mut keys: Vec<PlacementKey> = ["rp/a/b", "ocm/a/b", "crp/z", "crp/a"]
            .iter()
            .map(|id| id.parse().unwrap())
            .collect();
        keys.sort();
        let ids: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(ids, ["crp/a", "crp/z", "ocm/a/b", "rp/a/b"]);
    }

    #[test]
    fn maps_keyed_by_placement_are_objects_keyed_by_id() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Holder {
            #[serde(with = "by_id")]
            placements: BTreeMap<PlacementKey, u32>,
        }
        let h = Holder {
            placements: [
                ("crp/a".parse().unwrap(), 1),
                ("rp/n/b".parse().unwrap(), 2),
            ]
            .into(),
        };
        let json = serde_json::to_value(&h).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"placements": {"crp/a": 1, "rp/n/b": 2}})
        );
        assert_eq!(serde_json::from_value::<Holder>(json).unwrap(), h);
        let bad = serde_json::json!({"placements": {"nope": 1}});
        let err = serde_json::from_value::<Holder>(bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"nope\" is not a placement id"), "{err}");
    }
}
