//! Approvals as signed git tags, and signed heads (`--verify-commits`): the edge that reads
//! `refs/tags/gitfleet/approve/**` and commit signatures with gix ([`object`]), verifies them
//! in-process against signers configured outside the repository ([`verify`], [`signers`],
//! [`gpg`]) and the optional approval policy ([`policy`]), and hands the rollout core plain
//! values ([`crate::rollout::approval`]: `Approval`, `Rejection`).
//!
//! [`evaluate`] is pure over tags already read: the same tags, requests, trust and time give
//! the same approvals and rejections. It does not know runs or stages beyond the requests it is
//! given, nor what was accepted before: the caller keeps the first approval of a request (an
//! accepted approval is never revoked by a tag that later moves or disappears).

pub mod gpg;
pub mod object;
pub mod pattern;
pub mod policy;
pub mod signers;
pub mod verify;

pub use object::{ApprovalTag, TagKind};
pub use policy::Policy;
pub use verify::{Refusal, Signer, Trust};

use crate::rollout::approval::{Approval, RejectReason, Rejection, Request, TAG_PREFIX};
use std::path::Path;

/// A trust or policy file that cannot be used; the daemon and the commands refuse to start.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("--trusted-signers: {0}")]
    Signers(String),
    #[error("--trusted-gpg-keys: {0}")]
    Gpg(String),
    #[error("--approval-policy: {0}")]
    Policy(String),
}

/// Everything a verification needs besides the objects: trust and policy.
#[derive(Debug, Clone, Default)]
pub struct Verifier {
    pub trust: Trust,
    pub policy: Policy,
}

impl Verifier {
    /// Reads the trust files and the policy.
    pub fn load(
        signers: Option<&Path>,
        gpg_keys: Option<&Path>,
        policy: Option<&Path>,
    ) -> Result<Self, TrustError> {
        let policy = match policy {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| TrustError::Read {
                    path: p.display().to_string(),
                    message: e.to_string(),
                })?;
                Policy::parse(p, &text)?
            }
            None => Policy::default(),
        };
        Ok(Self {
            trust: Trust::load(signers, gpg_keys)?,
            policy,
        })
    }
}

/// Every approval tag judged against the requests that exist: accepted ones become
/// [`Approval`]s (accepted at `now`), the others [`Rejection`]s with their reason. A tag whose
/// request does not exist (yet) is `NoSuchRequest` now and counts once a run brings the request:
/// nothing here is remembered between calls.
pub fn evaluate(
    tags: &[ApprovalTag],
    requests: &[Request],
    verifier: &Verifier,
    now: i64,
) -> (Vec<Approval>, Vec<Rejection>) {
    let mut approvals = Vec::new();
    let mut rejections = Vec::new();
    for tag in tags {
        match judge(tag, requests, verifier, now) {
            Ok(a) => approvals.push(a),
            Err(r) => rejections.push(r),
        }
    }
    (approvals, rejections)
}

/// One tag judged: what `gitfleet verify-approval` explains.
pub fn judge(
    tag: &ApprovalTag,
    requests: &[Request],
    verifier: &Verifier,
    now: i64,
) -> Result<Approval, Rejection> {
    let key = tag.name.strip_prefix(TAG_PREFIX).unwrap_or(&tag.name);
    let reject = |reason: RejectReason, detail: String| Rejection {
        tag: tag.name.clone(),
        request: Some(key.to_string()),
        reason,
        detail,
    };
    let (id, headers, data) = match &tag.kind {
        TagKind::Unreadable(why) => {
            return Err(reject(RejectReason::Malformed, format!("cannot read the tag: {why}")))
        }
        TagKind::Malformed(why) => {
            return Err(Rejection {
                request: None,
                ..reject(RejectReason::Malformed, format!("skipped: {why}"))
            })
        }
        TagKind::Lightweight { target } => {
            return Err(reject(
                RejectReason::Lightweight,
                format!("a lightweight tag (pointing at {target}) carries no signature: make it with `git tag -s` (or `gitfleet approve`)"),
            ))
        }
        TagKind::Annotated { id, headers, data } => (id, headers, data),
    };
    // The name is signed over: a tag made for one request cannot be re-filed under another.
    if headers.name != tag.name {
        return Err(reject(
            RejectReason::Malformed,
            format!(
                "the tag object was made as {:?}: a signed tag cannot be renamed to approve another request",
                headers.name
            ),
        ));
    }
    let Some(signed) = object::split_tag(data) else {
        return Err(reject(
            RejectReason::Unsigned,
            "an annotated tag without a signature: make it with `git tag -s` (or `gitfleet approve`)".into(),
        ));
    };
    let signer = verifier
        .trust
        .verify(&signed, now)
        .map_err(|r| reject(r.reason, r.detail))?;
    let Some(request) = requests.iter().find(|r| r.key() == key) else {
        return Err(reject(
            RejectReason::NoSuchRequest,
            format!("no update run has an approval request {key:?} (a tag made before its run exists counts once a commit brings the run)"),
        ));
    };
    if headers.kind != "commit" || headers.object != request.commit {
        return Err(reject(
            RejectReason::WrongCommit,
            format!(
                "points at {} {}, but run {:?} was initialised at commit {} (a tag made for an earlier run of the same name, or moved)",
                headers.kind, headers.object, request.run, request.commit
            ),
        ));
    }
    verifier
        .policy
        .allows(&request.stage, &signer)
        .map_err(|d| reject(RejectReason::NotAllowed, d))?;
    Ok(Approval {
        request: key.to_string(),
        signer: signer.name,
        key_fingerprint: signer.fingerprints.first().cloned().unwrap_or_default(),
        tag: tag.name.clone(),
        tag_object: id.clone(),
        commit: request.commit.clone(),
        accepted_at: now,
    })
}

/// A head under `--verify-commits`: who signed it, or why it does not count.
pub fn verify_commit(
    signed: Option<&object::Signed>,
    trust: &Trust,
    now: i64,
) -> Result<Signer, Refusal> {
    let signed = signed.ok_or_else(|| {
        Refusal::new(
            RejectReason::Unsigned,
            "the commit is not signed (git commit -S)",
        )
    })?;
    trust.verify(signed, now)
}

/// `YYYY-MM-DDTHH:MM:SSZ`, for messages.
pub fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::staged::TaskPhase;

    fn key(seed: u8) -> ssh_key::PrivateKey {
        ssh_key::PrivateKey::from(ssh_key::private::Ed25519Keypair::from_seed(&[seed; 32]))
    }

    fn verifier(trusted: &[(&str, &ssh_key::PrivateKey)], policy: &str) -> Verifier {
        let lines: String = trusted
            .iter()
            .map(|(p, k)| format!("{p} {}\n", k.public_key().to_openssh().unwrap()))
            .collect();
        Verifier {
            trust: Trust {
                ssh: signers::AllowedSigners::parse(Path::new("s"), &lines).unwrap(),
                gpg: gpg::GpgKeys::default(),
            },
            policy: Policy::parse(Path::new("p"), policy).unwrap(),
        }
    }

    /// A tag object as `git tag -s` writes it with an SSH key.
    fn tag(name: &str, commit: &str, signer: Option<&ssh_key::PrivateKey>) -> ApprovalTag {
        let name = format!("{TAG_PREFIX}{name}");
        let mut data = format!(
            "object {commit}\ntype commit\ntag {name}\ntagger T <t@x> 1700000000 +0000\n\nApprove\n"
        );
        if let Some(k) = signer {
            let sig = ssh_key::SshSig::sign(k, "git", ssh_key::HashAlg::Sha512, data.as_bytes())
                .unwrap()
                .to_pem(ssh_key::LineEnding::LF)
                .unwrap();
            data.push_str(&sig);
        }
        ApprovalTag {
            kind: TagKind::Annotated {
                id: "7".repeat(40),
                headers: object::tag_headers(data.as_bytes()),
                data: data.into_bytes(),
            },
            name,
        }
    }

    fn request(run: &str, stage: &str, commit: &str) -> Request {
        Request {
            namespace: None,
            run: run.into(),
            stage: stage.into(),
            phase: TaskPhase::BeforeStage,
            commit: commit.into(),
        }
    }

    const NOW: i64 = 1_750_000_000;

    #[test]
    fn a_tag_made_before_its_request_counts_once_the_request_exists() {
        let alice = key(1);
        let v = verifier(&[("alice@x", &alice)], "rules: []");
        let c = "a".repeat(40);
        let tags = [tag("r1-before-prod", &c, Some(&alice))];
        let (ok, no) = evaluate(&tags, &[], &v, NOW);
        assert!(ok.is_empty());
        assert_eq!(no[0].reason, RejectReason::NoSuchRequest);
        let (ok, no) = evaluate(&tags, &[request("r1", "prod", &c)], &v, NOW);
        assert!(no.is_empty(), "{no:?}");
        assert_eq!(
            ok,
            vec![Approval {
                request: "r1-before-prod".into(),
                signer: "alice@x".into(),
                key_fingerprint: alice
                    .public_key()
                    .fingerprint(ssh_key::HashAlg::Sha256)
                    .to_string(),
                tag: "gitfleet/approve/r1-before-prod".into(),
                tag_object: "7".repeat(40),
                commit: c.clone(),
                accepted_at: NOW,
            }]
        );
    }

    #[test]
    fn each_refusal_has_its_reason() {
        let (alice, bob, mallory) = (key(1), key(2), key(3));
        let v = verifier(
            &[("alice@x", &alice), ("bob@x", &bob)],
            "rules:\n- stages: [prod]\n  principals: [alice@x]\n",
        );
        let (c, other) = ("a".repeat(40), "b".repeat(40));
        let requests = [request("r1", "prod", &c), request("r1", "canary", &c)];
        let mut tampered = tag("r1-before-canary", &c, Some(&alice));
        if let TagKind::Annotated { data, .. } = &mut tampered.kind {
            let text = String::from_utf8(data.clone())
                .unwrap()
                .replace("Approve", "Approvf");
            *data = text.into_bytes();
        }
        let mut renamed = tag("r1-before-canary", &c, Some(&alice));
        renamed.name = format!("{TAG_PREFIX}r1-before-prod");
        for (t, want) in [
            (
                ApprovalTag {
                    name: format!("{TAG_PREFIX}r1-before-prod"),
                    kind: TagKind::Lightweight { target: c.clone() },
                },
                RejectReason::Lightweight,
            ),
            (tag("r1-before-prod", &c, None), RejectReason::Unsigned),
            (tampered, RejectReason::BadSignature),
            (
                tag("r1-before-prod", &c, Some(&mallory)),
                RejectReason::UnknownKey,
            ),
            (
                tag("r1-before-prod", &c, Some(&bob)),
                RejectReason::NotAllowed,
            ),
            (
                tag("r1-before-prod", &other, Some(&alice)),
                RejectReason::WrongCommit,
            ),
            (
                tag("r2-before-prod", &c, Some(&alice)),
                RejectReason::NoSuchRequest,
            ),
            (renamed, RejectReason::Malformed),
        ] {
            let got = judge(&t, &requests, &v, NOW).unwrap_err();
            assert_eq!(got.reason, want, "{}: {}", t.name, got.detail);
            assert!(!got.detail.is_empty());
        }
        // Bob may approve canary: the policy only restricts prod.
        assert!(judge(&tag("r1-before-canary", &c, Some(&bob)), &requests, &v, NOW).is_ok());
    }

    #[test]
    fn utc_times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_868_801), "2000-03-01T00:00:01Z");
        assert_eq!(utc(1_798_859_040), "2027-01-02T03:04:00Z");
    }
}
