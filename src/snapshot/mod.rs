//! Resource and scheduling-policy snapshots of a placement: selection, canonical hashes, and
//! index assignment over history (KubeFleet's resource and policy snapshots). Pure.

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
use crate::model::PlacementKey;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

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

/// KubeFleet's reason on the `Scheduled` condition of a placement whose resource selectors are
/// invalid.
pub const INVALID_RESOURCE_SELECTORS: &str = "InvalidResourceSelectors";

/// A placement whose resource selection fails with a user error. KubeFleet's hub admits such a
/// placement; its placement controller meets the error while selecting, sets only the
/// `Scheduled` condition to False (reason [`INVALID_RESOURCE_SELECTORS`]) and returns before it
/// takes any policy or resource snapshot, so the placement's existing snapshots, bindings and
/// works stay as they were and every other placement proceeds (kubefleet-dev/kubefleet
/// pkg/controllers/placement/controller.go `handleUpdate`: "validate the resource selectors
/// first before creating any snapshot"). gitfleet holds such a placement likewise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSelection {
    /// Each error at the selector or field it is about, with the placement's file and document.
    pub diagnostics: Vec<Diagnostic>,
    /// The condition message, as KubeFleet words it.
    pub message: String,
}

/// The commit's placements whose selection fails, by placement key.
pub type InvalidSelections = BTreeMap<PlacementKey, InvalidSelection>;

/// Every placement of the commit whose resource selection fails, with KubeFleet's message: one
/// definition of which placements are held, for the daemon, `apply`, `plan`, `schedule`,
/// `render`, `validate` and status.
pub fn invalid_selections(cat: &Catalog) -> InvalidSelections {
    invalid_of(cat, &select_all(cat))
}

/// Every placement's selection of a commit, by the placement's index in the catalog's objects.
/// Made once per commit and shared: the daemon validates every placement's selectors when it
/// reads a commit and steps every placement after, each of which would select them again.
pub type Selected = crate::fast_hash::HashMap<
    usize,
    Result<Arc<Vec<SelectedResource>>, Vec<crate::model::Problem>>,
>;

/// [`select`] for every placement of the commit.
pub fn select_all(cat: &Catalog) -> Selected {
    cat.placements
        .iter()
        .map(|p| (p.index, select(cat, &p.spec).map(Arc::new)))
        .collect()
}

/// [`invalid_selections`] of the selections `selected` made for `cat`.
pub fn invalid_of(cat: &Catalog, selected: &Selected) -> InvalidSelections {
    let mut out = InvalidSelections::new();
    for p in &cat.placements {
        let Some(Err(problems)) = selected.get(&p.index) else {
            continue;
        };
        let key = cat.placement_key(p);
        let details: Vec<String> = problems
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        // KubeFleet: `fmt.Sprintf("The resource selectors are invalid: %v", err)` of an error
        // made by `controller.NewUserError` ("%w: %v" of ErrUserError, "failed to process the
        // request due to a client error", and the cause). It stops at its first error; gitfleet
        // lists them all.
        let message = format!(
            "The resource selectors are invalid: failed to process the request due to a client error: {}",
            details.join("; ")
        );
        let diagnostics = problems
            .iter()
            .map(|e| cat.diagnostic(p.index, &e.field, e.message.clone()))
            .collect();
        out.insert(
            key,
            InvalidSelection {
                diagnostics,
                message,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests;
