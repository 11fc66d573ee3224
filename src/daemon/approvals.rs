//! The daemon's side of approvals: after each step, the approval tags of the followed
//! repository (or its mirror, which fetches them with the branch) are read and judged against
//! the requests the runs wait on ([`crate::approvals::evaluate`]); new approvals are logged and
//! counted, each refused tag is logged and counted once per tag object and reason, and the
//! outcome is published for the status API (`/api/v1/approvals`).
//!
//! It does not decide what an approval unlocks: the staged step takes the accepted approvals as
//! input and records them (irrevocably) in its state.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;

use super::metrics::{self, Metrics};
use crate::api::ApprovalsView;
use crate::approvals::{evaluate, object, TagKind, Verifier};
use crate::rollout::approval::{Approval, RejectReason, Rejection, Request};

/// Judges approval tags for the daemon; remembers what it already reported.
pub struct ApprovalGate {
    repo: PathBuf,
    verifier: Option<Arc<Verifier>>,
    /// (tag, tag object or target, reason) already logged and counted.
    reported: HashSet<(String, String, RejectReason)>,
    warned_untrusted: bool,
}

impl ApprovalGate {
    /// `verifier` is `None` when no trust file was given: then no tag can approve anything.
    pub fn new(repo: PathBuf, verifier: Option<Verifier>) -> Self {
        Self {
            repo,
            verifier: verifier.map(Arc::new),
            reported: HashSet::new(),
            warned_untrusted: false,
        }
    }

    /// Reads the tags and judges those whose request is not approved yet (`accepted` holds
    /// the approvals already recorded: they stand whatever the tags do now). Returns the new
    /// approvals and the view to publish.
    pub async fn evaluate(
        &mut self,
        requests: Vec<Request>,
        accepted: &BTreeMap<String, Approval>,
        metrics: &Metrics,
        now: i64,
    ) -> Result<(Vec<Approval>, ApprovalsView)> {
        let Some(verifier) = self.verifier.clone() else {
            if !requests.is_empty() && !self.warned_untrusted {
                self.warned_untrusted = true;
                tracing::warn!(
                    "update runs wait on approval requests, but no --trusted-signers or --trusted-gpg-keys was given: no tag can approve them"
                );
            }
            return Ok((
                Vec::new(),
                ApprovalsView {
                    requests,
                    approvals: accepted.values().cloned().collect(),
                    rejections: Vec::new(),
                },
            ));
        };
        let repo = self.repo.clone();
        let pending: Vec<Request> = requests
            .iter()
            .filter(|r| !accepted.contains_key(&r.key()))
            .cloned()
            .collect();
        let done: HashSet<String> = accepted.keys().cloned().collect();
        let (new, rejections) = super::blocking(move || -> Result<_> {
            let tags: Vec<_> = object::read_approval_tags(&repo)?
                .into_iter()
                // A recorded approval is final: its tag is not judged again.
                .filter(|t| !done.contains(tag_key(&t.name)))
                .collect();
            let (approvals, rejections) = evaluate(&tags, &pending, &verifier, now);
            let ids: BTreeMap<String, String> = tags
                .iter()
                .map(|t| (t.name.clone(), object_of(&t.kind)))
                .collect();
            Ok((approvals, (rejections, ids)))
        })
        .await??;
        let (rejections, ids) = rejections;
        for a in &new {
            tracing::info!(request = %a.request, tag = %a.tag, signer = %a.signer, key = %a.key_fingerprint, commit = %a.commit, "approval accepted");
            metrics.approvals_accepted.inc();
        }
        for r in &rejections {
            let id = ids.get(&r.tag).cloned().unwrap_or_default();
            if self.reported.insert((r.tag.clone(), id, r.reason)) {
                tracing::warn!(tag = %r.tag, reason = %r.reason, "approval tag rejected: {}", r.detail);
                metrics
                    .approval_rejections
                    .get_or_create(&metrics::labels(&[("reason", r.reason.as_str())]))
                    .inc();
            }
        }
        let mut approvals: Vec<Approval> = accepted.values().cloned().collect();
        approvals.extend(new.iter().cloned());
        Ok((
            new,
            ApprovalsView {
                requests,
                approvals,
                rejections: sorted(rejections),
            },
        ))
    }
}

fn tag_key(name: &str) -> &str {
    name.strip_prefix(crate::rollout::approval::TAG_PREFIX)
        .unwrap_or(name)
}

fn object_of(kind: &TagKind) -> String {
    match kind {
        TagKind::Lightweight { target } => target.clone(),
        TagKind::Annotated { id, .. } => id.clone(),
        TagKind::Unreadable(why) | TagKind::Malformed(why) => why.clone(),
    }
}

/// What status shows: every refused tag, sorted by name.
fn sorted(mut r: Vec<Rejection>) -> Vec<Rejection> {
    r.sort_by(|a, b| a.tag.cmp(&b.tag));
    r
}
