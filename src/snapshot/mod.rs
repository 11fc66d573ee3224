//! Resource and scheduling-policy snapshots of a placement: selection, canonical hashes, and
//! index assignment over history (kubefleet.md §1.3, §1.11; spec/README §3). Pure.

mod hash;
mod history;
mod sanitize;
mod select;

pub use hash::{canonical_json, hash_list, hash_value};
pub use history::{Advance, History, SnapshotRecord};
pub use sanitize::sanitize;
pub use select::{
    is_disabled, is_reserved_namespace, select, ResourceIdentifier, SelectedResource,
};

use crate::catalog::{Catalog, Diagnostic};
use crate::model::placement::{Placement, PlacementPolicy};
use serde::Serialize;
use serde_json::Value;

/// What one commit says about one placement, before indices are assigned.
#[derive(Debug, Clone, Serialize)]
pub struct PlacementSnapshot {
    pub resources: Vec<SelectedResource>,
    /// sha256 of `{"selectedResources": [...]}` in canonical JSON.
    pub resource_hash: String,
    /// The defaulted policy; `numberOfClusters` is part of it but not of its hash.
    pub policy: PlacementPolicy,
    pub policy_hash: String,
    /// How many objects the selected envelopes carry.
    pub enveloped_objects: usize,
}

/// sha256 of the defaulted policy with `numberOfClusters` cleared, so changing only N never takes
/// a new policy snapshot.
pub fn policy_hash(policy: &PlacementPolicy) -> String {
    let mut p = policy.clone();
    p.number_of_clusters = None;
    hash_value(&serde_json::to_value(&p).expect("policy serialises"))
}

pub fn resource_hash(resources: &[SelectedResource]) -> String {
    let values: Vec<&Value> = resources.iter().map(|r| &*r.value).collect();
    hash::hash_list(Some("selectedResources"), &values)
}

/// Selects and hashes a placement's resources and policy.
pub fn take(
    cat: &Catalog,
    placement: &Placement,
) -> Result<PlacementSnapshot, Vec<crate::model::Problem>> {
    let resources = select(cat, placement)?;
    let policy = placement.spec.policy_or_default();
    let enveloped_objects = resources
        .iter()
        .filter_map(|r| {
            let envelope = cat.objects.iter().find(|o| o.key() == r.key())?;
            crate::model::envelope::envelope_contents(envelope, &cat.scopes)?.ok()
        })
        .map(|contents| contents.len())
        .sum();
    Ok(PlacementSnapshot {
        resource_hash: resource_hash(&resources),
        policy_hash: policy_hash(&policy),
        resources,
        policy,
        enveloped_objects,
    })
}

/// Selection errors of every placement of the commit, as diagnostics at the placement.
pub fn selection_diagnostics(cat: &Catalog) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for p in &cat.placements {
        if let Err(problems) = select(cat, &p.spec) {
            out.extend(
                problems
                    .into_iter()
                    .map(|e| cat.diagnostic(p.index, &e.field, e.message)),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests;
