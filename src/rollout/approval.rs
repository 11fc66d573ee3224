//! Approvals of staged update runs, as the rollout core sees them: the requests a run waits on
//! (what the edge that reads signed tags is asked about) and what an accepted approval records.
//! Reading and verifying the tags themselves is an edge (`crate::approvals`); this module only
//! holds the values both sides agree on, so the staged step stays pure.
//!
//! A request `<run>-before-<stage>` / `<run>-after-<stage>` (KubeFleet's names) is approved by an
//! annotated, signed tag `gitfleet/approve/<request>` (namespaced runs:
//! `gitfleet/approve/<namespace>/<request>`) pointing at the commit at which the run was
//! initialised. An accepted approval is kept in the rollout state and is never revoked by a tag
//! that later moves or disappears.

use crate::model::staged::{approval_request_name, TaskPhase};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Prefix of the tags that approve requests.
pub const TAG_PREFIX: &str = "gitfleet/approve/";

/// An approval request a run has reached (or will reach): what a tag must name and point at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Request {
    /// The run's namespace; `None` for a `ClusterStagedUpdateRun`.
    pub namespace: Option<String>,
    /// The run's name.
    pub run: String,
    /// The stage the request gates.
    pub stage: String,
    /// Before the stage starts, or after it finished.
    pub phase: TaskPhase,
    /// The commit at which the run was initialised: the approving tag must point at it.
    pub commit: String,
}

impl Request {
    /// KubeFleet's name of the request: `<run>-before-<stage>` or `<run>-after-<stage>`.
    pub fn name(&self) -> String {
        approval_request_name(&self.run, &self.stage, self.phase)
    }

    /// The request's identity across namespaces: `<namespace>/<name>` or `<name>`.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name()),
            None => self.name(),
        }
    }

    /// The name of the tag that approves it: `gitfleet/approve/<key>`.
    pub fn tag_name(&self) -> String {
        format!("{TAG_PREFIX}{}", self.key())
    }
}

/// An accepted approval: who approved which request with which tag. Recorded in the rollout
/// state when accepted; what is recorded stands even if the tag is later deleted or moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The request's key ([`Request::key`]).
    pub request: String,
    /// Who signed: the principal of the allowed_signers line, or the OpenPGP user id.
    pub signer: String,
    /// The signing key's fingerprint (`SHA256:…` for SSH keys, hex for OpenPGP keys).
    pub key_fingerprint: String,
    /// The tag's name.
    pub tag: String,
    /// The tag object's id.
    pub tag_object: String,
    /// The commit the tag points at (the run's initialisation commit).
    pub commit: String,
    /// When the daemon accepted it, seconds since the Unix epoch.
    pub accepted_at: i64,
}

/// Why a tag does not approve anything. Each has one stable name, the same in JSON, metrics,
/// logs and status ([`RejectReason::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RejectReason {
    /// A lightweight tag: no tag object, so nothing signed.
    #[serde(rename = "LightweightTag")]
    Lightweight,
    /// An annotated tag without a signature.
    Unsigned,
    /// A signature that does not verify over the tag's content.
    BadSignature,
    /// Signed by a key that no trust file lists.
    UnknownKey,
    /// Signed by a trusted key outside its validity (`valid-after`/`valid-before`, expiry).
    ExpiredKey,
    /// A trusted signer that the approval policy does not allow for this stage.
    #[serde(rename = "SignerNotAllowed")]
    NotAllowed,
    /// Points at another commit than the one at which the run was initialised (a tag for an
    /// earlier run of the same name, or moved).
    WrongCommit,
    /// Names a request that no run has.
    NoSuchRequest,
    /// The tag could not be read or parsed.
    Malformed,
}

impl RejectReason {
    /// The reason's stable name (metrics label, logs, status).
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Lightweight => "LightweightTag",
            RejectReason::Unsigned => "Unsigned",
            RejectReason::BadSignature => "BadSignature",
            RejectReason::UnknownKey => "UnknownKey",
            RejectReason::ExpiredKey => "ExpiredKey",
            RejectReason::NotAllowed => "SignerNotAllowed",
            RejectReason::WrongCommit => "WrongCommit",
            RejectReason::NoSuchRequest => "NoSuchRequest",
            RejectReason::Malformed => "Malformed",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tag that was considered and refused, with the reason to show in status, logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// The tag's name.
    pub tag: String,
    /// The request key it names, when it names one.
    pub request: Option<String>,
    pub reason: RejectReason,
    /// A sentence for people: what was wrong and, where it helps, what to do.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kubefleet_and_tags_add_the_namespace() {
        let mut r = Request {
            namespace: None,
            run: "run-1".into(),
            stage: "canary".into(),
            phase: TaskPhase::AfterStage,
            commit: "c".repeat(40),
        };
        assert_eq!(r.name(), "run-1-after-canary");
        assert_eq!(r.tag_name(), "gitfleet/approve/run-1-after-canary");
        r.namespace = Some("team-a".into());
        r.phase = TaskPhase::BeforeStage;
        assert_eq!(r.key(), "team-a/run-1-before-canary");
        assert_eq!(r.tag_name(), "gitfleet/approve/team-a/run-1-before-canary");
    }

    #[test]
    fn reasons_have_one_name_everywhere() {
        for reason in [
            RejectReason::Lightweight,
            RejectReason::Unsigned,
            RejectReason::BadSignature,
            RejectReason::UnknownKey,
            RejectReason::ExpiredKey,
            RejectReason::NotAllowed,
            RejectReason::WrongCommit,
            RejectReason::NoSuchRequest,
            RejectReason::Malformed,
        ] {
            assert_eq!(
                serde_json::to_value(reason).unwrap(),
                serde_json::json!(reason.as_str())
            );
        }
    }
}
