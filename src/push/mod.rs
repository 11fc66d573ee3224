//! Pushing rendered manifests to member clusters (docs/guides/concepts.md; KubeFleet's work applier):
//! server-side apply in waves with gitfleet's labels and annotations, ClientSideApply and
//! ReportDiff, takeover and drift rules, a record of what was applied per placement on each
//! member, pruning of what is no longer delivered, and availability per kind.
//!
//! What to push, with which strategy and snapshot stamp, is the rollout's decision
//! ([`crate::rollout`]); push carries it out. Its helpers are pure ([`decorate`], [`compare`],
//! [`availability`], [`record`]); [`member`] talks to one member and [`fleet`] to many at once;
//! [`error`] says why a request failed, from the API server's `Status`.
//! This module does not know where manifests come from (git, rendering) nor how results are
//! printed.

pub mod availability;
pub mod compare;
pub mod decorate;
pub mod error;
pub mod fleet;
pub mod listed;
pub mod member;
pub mod record;
pub mod work;
pub mod writer;

use crate::model::PlacementKey;
use crate::render::Manifest;
use crate::rollout::ApplyStrategy;
use serde::Serialize;
use std::collections::BTreeSet;
use std::time::Duration;

pub use availability::Availability;
pub use compare::Diff;
pub use error::Error;
pub use fleet::push_fleet;
pub use work::member_pushes;

/// What one placement delivers to one member.
#[derive(Debug, Clone)]
pub struct PlacementPush {
    pub placement: PlacementKey,
    pub strategy: ApplyStrategy,
    /// Hash of the placement's selected resources (the `gitfleet.io/resource-snapshot` stamp).
    pub resource_snapshot: String,
    /// In apply order (waves).
    pub manifests: Vec<Manifest>,
    /// The staged update run whose snapshot this is: written in the placement's record.
    pub run: Option<crate::rollout::staged::RunDelivery>,
}

/// Everything one member should receive.
#[derive(Debug, Clone)]
pub struct MemberPush {
    pub member: String,
    /// The kubeconfig context that reaches it.
    pub context: String,
    pub placements: Vec<PlacementPush>,
    /// Which placements found in the member's records but not in `placements` are pruned
    /// entirely (their objects are no longer delivered to this member).
    pub prune_unlisted: PruneUnlisted,
}

/// Which recorded placements that are not pushed now get pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PruneUnlisted {
    /// All of them except these keys (e.g. placements that failed to render: unknown, not gone).
    AllExcept(BTreeSet<String>),
    /// Only these keys (when one placement is being pushed).
    Only(BTreeSet<String>),
}

impl PruneUnlisted {
    pub fn covers(&self, key: &str) -> bool {
        match self {
            PruneUnlisted::AllExcept(keep) => !keep.contains(key),
            PruneUnlisted::Only(keys) => keys.contains(key),
        }
    }
}

#[derive(Debug, Clone)]
pub struct PushOptions {
    pub commit: String,
    pub parallel_members: usize,
    pub parallel_requests: usize,
    pub retry_budget: Duration,
    /// Who writes: marks each placement's record while writing it (see [`writer`]).
    pub writer: writer::Identity,
    /// How OCM feedback values that are not scalars are reported.
    pub feedback_raw_json: crate::feedback::RawJson,
}

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Written (created or changed).
    Applied,
    /// Applied, and the member already had it exactly so.
    Unchanged,
    /// Deleted, and gone from the member: no longer delivered.
    Pruned,
    /// No longer delivered, left on the member without gitfleet's labels (Abandon, or a
    /// namespace gitfleet did not create).
    Abandoned,
    /// No longer delivered but not gitfleet's (no placement label): left alone.
    Left,
    /// IfNotDrifted: the member's object drifted from what gitfleet applied; not applied.
    Drifted,
    /// ReportDiff: differences found (nothing written).
    Diffed,
    /// ReportDiff: no differences.
    NoDiff,
    /// An OCM work's ReadOnly resource: read, never written (nor recorded, nor pruned).
    ReadOnly,
    /// It exists without gitfleet's label and whenToTakeOver forbids taking it over (or it
    /// differs, with IfNoDiff).
    NotTakenOver,
    Failed,
}

impl Outcome {
    /// Whether this counts as a failure of the apply (KubeFleet: `Applied=False`).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Failed | Outcome::NotTakenOver | Outcome::Drifted
        )
    }
}

/// Where an object is read and written on a member: its [`crate::model::ObjectKey`]'s parts
/// with the API version it is asked in. Written as such in the members' records.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

pub use crate::model::object::{metadata_field, metadata_str};

impl ObjectRef {
    pub fn of(v: &serde_json::Value) -> ObjectRef {
        let top = |f: &str| {
            v.get(f)
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_string()
        };
        ObjectRef {
            api_version: top("apiVersion"),
            kind: top("kind"),
            namespace: metadata_str(v, "namespace")
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            name: metadata_str(v, "name").unwrap_or_default().to_string(),
        }
    }

    /// Its identity (the version left out).
    pub fn key(&self) -> crate::model::ObjectKey {
        crate::model::ObjectKey::new(
            self.group(),
            &self.kind,
            self.namespace.as_deref(),
            &self.name,
        )
    }

    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    pub fn wave(&self) -> u32 {
        crate::render::wave_of(self.group(), &self.kind)
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectResult {
    #[serde(flatten)]
    pub object: ObjectRef,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Drifts (Drifted, or FullComparison after apply), diffs (Diffed, NotTakenOver).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<Diff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub availability: Option<Availability>,
    /// An OCM work's feedback and condition rules read from the live object, as the work's
    /// `status.resourceStatus.manifests[]` entry ([`crate::feedback`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<crate::feedback::ManifestCondition>,
}

impl ObjectResult {
    pub fn new(object: ObjectRef, outcome: Outcome) -> ObjectResult {
        ObjectResult {
            object,
            outcome,
            error: None,
            diffs: Vec::new(),
            availability: None,
            feedback: None,
        }
    }

    pub fn failed(object: ObjectRef, error: impl Into<String>) -> ObjectResult {
        ObjectResult {
            error: Some(error.into()),
            ..ObjectResult::new(object, Outcome::Failed)
        }
    }
}

/// One placement on one member.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementResult {
    /// `crp.<name>`, `rp.<ns>.<name>`, `ocm.<ns>.<name>`.
    pub placement: String,
    pub cluster: String,
    /// A failure of the placement as a whole (member unreachable, record unreadable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub objects: Vec<ObjectResult>,
}

impl PlacementResult {
    pub fn count(&self, outcome: Outcome) -> usize {
        self.objects.iter().filter(|o| o.outcome == outcome).count()
    }

    pub fn failed(&self) -> bool {
        self.error.is_some() || self.objects.iter().any(|o| o.outcome.is_failure())
    }
}

/// Everything that happened on one member.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberResult {
    pub member: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub placements: Vec<PlacementResult>,
}

impl MemberResult {
    pub fn failed(&self) -> bool {
        self.error.is_some() || self.placements.iter().any(PlacementResult::failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_refs_know_their_group_and_wave() {
        let r = ObjectRef::of(
            &serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "w", "namespace": "n"}}),
        );
        assert_eq!(r.group(), "apps");
        assert_eq!(r.wave(), 4);
        assert_eq!(r.to_string(), "Deployment n/w");
    }
}
