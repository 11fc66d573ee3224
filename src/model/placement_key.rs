//! Which placement a value is about: its kind (KubeFleet ClusterResourcePlacement or
//! ResourcePlacement, OCM Placement) and its key (kind, namespace, name), the identity every map
//! of placements is keyed by (state, schedule, status, metrics, plan).
//!
//! Text only where it meets text: the id `crp/NAME`, `rp/NAMESPACE/NAME`, `ocm/NAMESPACE/NAME`
//! (state files, the status API, logs and metrics) through `Display` and `FromStr`, and the
//! kind's API name in JSON. The labels gitfleet puts on members (`crp.NAME`, …) are push's.

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
