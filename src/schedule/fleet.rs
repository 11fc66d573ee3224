//! The fleet as the scheduler sees it: members declared in the commit (labels, taints) joined with
//! the live inventory (properties, health, OCM add-on scores; docs/guides/concepts.md).

use super::labels::LabelIndex;
use crate::catalog::Catalog;
use crate::model::member::{ManagedClusterTaint, Taint, MEMBER_NAME_LABEL};
use crate::model::quantity::Quantity;
use crate::model::{ClusterName, Labels};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The inventory file (`--inventory FILE`), also what `gitfleet inventory` prints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    /// Shared: the daemon keeps each member's last answer, the inventory built from the
    /// answers and the state's last probes, and a large fleet's answers are large (every
    /// namespace of every member).
    #[serde(default)]
    pub clusters: Vec<Arc<InventoryCluster>>,
}

// `Eq`: an `Arc` of one compares by address first (probe answers are shared).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryCluster {
    pub name: String,
    #[serde(default = "yes")]
    pub healthy: bool,
    /// Why the cluster is unhealthy (shown in scheduling reasons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add_on_scores: BTreeMap<String, i64>,
    /// The namespaces that exist on the member, when they were collected (KubeFleet's
    /// `MemberCluster.status.namespaces`); unset when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// The member has more namespaces than are collected (KubeFleet's
    /// `NamespaceCollectionSucceeded=False`, reason `Degraded`): `namespaces` holds the first
    /// ones only, and the scheduler still uses them, as KubeFleet's does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub namespace_collection_degraded: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: cluster {cluster:?} is listed twice")]
    Duplicate { file: String, cluster: String },
}

impl Inventory {
    /// Parses an inventory file's text (YAML or JSON); `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Inventory, InventoryError> {
        let value: serde_json::Value =
            crate::yaml::from_str(text).map_err(|e| InventoryError::Parse {
                file: file.into(),
                message: e.to_string(),
            })?;
        let inv: Inventory = crate::model::decode(&value).map_err(|p| InventoryError::Parse {
            file: file.into(),
            message: if p.field.is_empty() {
                p.message
            } else {
                format!("{}: {}", p.field, p.message)
            },
        })?;
        let mut seen = std::collections::BTreeSet::new();
        for c in &inv.clusters {
            if !seen.insert(&c.name) {
                return Err(InventoryError::Duplicate {
                    file: file.into(),
                    cluster: c.name.clone(),
                });
            }
        }
        Ok(inv)
    }
}

/// One member cluster, joined from the repository and the inventory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cluster {
    pub name: ClusterName,
    /// The labels KubeFleet sees: the `MemberCluster`'s, plus `kubernetes-fleet.io/member-name`.
    /// (A cluster declared only as a `ManagedCluster` has that object's labels here.)
    pub labels: Labels,
    /// The labels OCM sees: the `ManagedCluster`'s, with the cluster-set label defaulted to
    /// `default`. Kept apart from `labels`: each hub reads its own object, so neither API's
    /// labels leak into the other's scheduling.
    pub ocm_labels: Labels,
    /// Declared as a KubeFleet `MemberCluster`.
    pub fleet_member: bool,
    /// Declared as an OCM `ManagedCluster`.
    pub ocm_member: bool,
    pub taints: Vec<Taint>,
    pub ocm_taints: Vec<ManagedClusterTaint>,
    /// Properties as written (quantities), live ones and the member's declared ones.
    pub properties: BTreeMap<String, String>,
    /// The same, parsed once (`Err` keeps the raw text of a value that is not a quantity).
    numeric: BTreeMap<String, Result<f64, String>>,
    pub add_on_scores: BTreeMap<String, i64>,
    /// Eligible for new placements (the last probe succeeded).
    pub healthy: bool,
    pub health_reason: Option<String>,
    /// The member's namespaces, when the inventory knows them (KubeFleet's NamespaceAffinity).
    pub namespaces: Option<BTreeSet<String>>,
}

impl Cluster {
    /// A property as a number; `Err` carries the raw value when it is not a quantity.
    pub fn property(&self, name: &str) -> Option<Result<f64, String>> {
        self.numeric.get(name).cloned()
    }

    fn parse_properties(&mut self) {
        self.numeric = self
            .properties
            .iter()
            .map(|(k, raw)| {
                (
                    k.clone(),
                    Quantity::parse(raw).map(|q| q.0).map_err(|_| raw.clone()),
                )
            })
            .collect();
    }
}

/// All members, sorted by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fleet {
    pub clusters: Vec<Cluster>,
    /// The clusters' `labels` and `ocm_labels`, indexed once for every placement's selectors.
    label_index: LabelIndex,
    ocm_label_index: LabelIndex,
}

impl Fleet {
    /// Joins the commit's members with an inventory. Without an inventory every declared member
    /// is taken as healthy with only its declared properties (offline planning); with one, a
    /// member the inventory does not list is unhealthy.
    pub fn build(cat: &Catalog, inventory: Option<&Inventory>) -> Fleet {
        let mut by_name: BTreeMap<String, Cluster> = BTreeMap::new();
        let blank = |name: &str| Cluster {
            name: ClusterName::new(name),
            labels: Labels::new(),
            ocm_labels: Labels::new(),
            fleet_member: false,
            ocm_member: false,
            taints: vec![],
            ocm_taints: vec![],
            properties: BTreeMap::new(),
            numeric: BTreeMap::new(),
            add_on_scores: BTreeMap::new(),
            healthy: true,
            health_reason: None,
            namespaces: None,
        };
        for m in &cat.member_clusters {
            let c = by_name
                .entry(m.spec.metadata.name.clone())
                .or_insert_with(|| blank(&m.spec.metadata.name));
            c.fleet_member = true;
            c.labels = m.spec.labels();
            c.taints = m.spec.spec.taints.clone();
            declared_properties(&m.spec.metadata.annotations, &mut c.properties);
        }
        for m in &cat.managed_clusters {
            let c = by_name
                .entry(m.spec.metadata.name.clone())
                .or_insert_with(|| blank(&m.spec.metadata.name));
            c.ocm_member = true;
            c.ocm_labels = m.spec.labels();
            if !c.fleet_member {
                c.labels = c.ocm_labels.clone();
                c.labels
                    .insert(MEMBER_NAME_LABEL.into(), c.name.to_string());
            }
            c.ocm_taints = m.spec.spec.taints.clone();
            declared_properties(&m.spec.metadata.annotations, &mut c.properties);
        }
        if let Some(inv) = inventory {
            let live: BTreeMap<&str, &InventoryCluster> = inv
                .clusters
                .iter()
                .map(|c| (c.name.as_str(), &**c))
                .collect();
            for c in by_name.values_mut() {
                match live.get(c.name.as_str()) {
                    Some(l) => {
                        c.healthy = l.healthy;
                        c.health_reason = l.error.clone();
                        // Declared properties win over live ones of the same name.
                        let declared = std::mem::take(&mut c.properties);
                        c.properties = l.properties.clone();
                        c.properties.extend(declared);
                        c.add_on_scores = l.add_on_scores.clone();
                        c.namespaces = l.namespaces.as_ref().map(|n| n.iter().cloned().collect());
                    }
                    None => {
                        c.healthy = false;
                        c.health_reason = Some("the cluster is not in the inventory".into());
                    }
                }
            }
        }
        // One table of names for the whole fleet, which every result naming a cluster shares.
        let names = ClusterName::table(by_name.keys().map(String::as_str));
        let mut clusters: Vec<Cluster> = by_name.into_values().collect();
        for (c, name) in clusters.iter_mut().zip(names) {
            c.name = name;
        }
        for c in &mut clusters {
            c.parse_properties();
        }
        let label_index = LabelIndex::new(clusters.iter().map(|c| &c.labels));
        let ocm_label_index = LabelIndex::new(clusters.iter().map(|c| &c.ocm_labels));
        Fleet {
            clusters,
            label_index,
            ocm_label_index,
        }
    }

    /// The index of the clusters' KubeFleet `labels`.
    pub fn label_index(&self) -> &LabelIndex {
        &self.label_index
    }

    /// The index of the clusters' `ocm_labels`.
    pub fn ocm_label_index(&self) -> &LabelIndex {
        &self.ocm_label_index
    }

    pub fn get(&self, name: &str) -> Option<&Cluster> {
        self.position(name).map(|i| &self.clusters[i])
    }

    /// Where the cluster is in `clusters`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.clusters
            .binary_search_by(|c| c.name.as_str().cmp(name))
            .ok()
    }
}

/// A member's declared properties (a commit with a wrong declaration is not scheduled: the
/// catalog refuses it).
fn declared_properties(annotations: &BTreeMap<String, String>, out: &mut BTreeMap<String, String>) {
    out.extend(crate::model::member::declared_properties(annotations).values);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inventory_parses_and_rejects_unknown_fields() {
        let inv = Inventory::parse(
            "inv.yaml",
            "clusters:\n- name: a\n  properties: {kubernetes-fleet.io/node-count: '3'}\n  addOnScores: {cpuratio: 40}\n- name: b\n  healthy: false\n  error: connection refused\n",
        )
        .unwrap();
        assert_eq!(inv.clusters.len(), 2);
        assert!(inv.clusters[0].healthy);
        assert_eq!(inv.clusters[0].add_on_scores["cpuratio"], 40);
        assert_eq!(inv.clusters[0].namespaces, None);
        let inv =
            Inventory::parse("inv.yaml", "clusters:\n- name: a\n  namespaces: [app]\n").unwrap();
        assert_eq!(inv.clusters[0].namespaces, Some(vec!["app".to_string()]));
        let err =
            Inventory::parse("inv.yaml", "clusters:\n- name: a\n  helthy: true\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("inv.yaml: clusters[0].helthy: unknown field"),
            "{err}"
        );
        let err = Inventory::parse("inv.yaml", "clusters:\n- name: a\n- name: a\n").unwrap_err();
        assert!(err.to_string().contains("listed twice"));
    }
}
