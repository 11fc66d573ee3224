//! One verifier for every signed object (approval tags, and heads under `--verify-commits`):
//! a signature as git makes it, checked in-process against the trusted signers — SSH
//! signatures (git's `gpg.format=ssh`: an armored SSHSIG in namespace `git`) with the `ssh-key`
//! crate, OpenPGP detached signatures with rPGP. Never the git or gpg binary: what counts is
//! only what the daemon was told to trust.

use super::gpg::{GpgKeys, GpgRefusal};
use super::object::{SignatureFormat, Signed};
use super::signers::{AllowedSigners, Refused};
use super::TrustError;
use crate::rollout::approval::RejectReason;
use std::path::Path;

/// The namespace git signs in with SSH keys (`ssh-keygen -Y sign -n git`).
pub const GIT_NAMESPACE: &str = "git";

/// The signers trusted, from files outside the repository.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    pub ssh: AllowedSigners,
    pub gpg: GpgKeys,
}

/// Who made a signature that verifies against [`Trust`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// For people: the allowed_signers principals field, or the primary OpenPGP user id.
    pub name: String,
    /// What the approval policy matches: each allowed_signers principal (of every line that
    /// vouches for the key), or each OpenPGP user id and its e-mail address.
    pub principals: Vec<String>,
    /// `SHA256:…` for SSH; the primary then the signing (sub)key's hex fingerprint for OpenPGP.
    pub fingerprints: Vec<String>,
}

/// Why a signature does not count: a [`RejectReason`] and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: RejectReason,
    pub detail: String,
}

impl Refusal {
    pub fn new(reason: RejectReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}

impl Trust {
    /// Reads the trust files given to the daemon (either may be absent; with neither, nothing
    /// verifies).
    pub fn load(signers: Option<&Path>, gpg_keys: Option<&Path>) -> Result<Self, TrustError> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|e| TrustError::Read {
                path: p.display().to_string(),
                message: e.to_string(),
            })
        };
        Ok(Self {
            ssh: match signers {
                Some(p) => AllowedSigners::parse(p, &read(p)?)?,
                None => AllowedSigners::default(),
            },
            gpg: match gpg_keys {
                Some(p) => GpgKeys::parse(p, &read(p)?)?,
                None => GpgKeys::default(),
            },
        })
    }

    /// Verifies `signed` at `now` (seconds since the epoch). Key validity (`valid-after`,
    /// `valid-before`, OpenPGP expiry) is judged at `now`, the time of verification, not at the
    /// time the object claims: that date is written by the signer.
    pub fn verify(&self, signed: &Signed, now: i64) -> Result<Signer, Refusal> {
        match signed.format {
            SignatureFormat::Ssh => self.verify_ssh(signed, now),
            SignatureFormat::OpenPgp => self.verify_gpg(signed, now),
            SignatureFormat::X509 => Err(Refusal::new(
                RejectReason::UnknownKey,
                "an X.509 (gpgsm) signature: only SSH and OpenPGP signatures are verified",
            )),
        }
    }

    fn verify_ssh(&self, signed: &Signed, now: i64) -> Result<Signer, Refusal> {
        let sig = ssh_key::SshSig::from_pem(&signed.signature).map_err(|e| {
            Refusal::new(
                RejectReason::Malformed,
                format!("unreadable SSH signature: {e}"),
            )
        })?;
        let key = ssh_key::PublicKey::from(sig.public_key().clone());
        let fingerprint = key.fingerprint(ssh_key::HashAlg::Sha256).to_string();
        if sig.namespace() != GIT_NAMESPACE {
            return Err(Refusal::new(
                RejectReason::BadSignature,
                format!(
                    "SSH signature by {fingerprint} is for namespace {:?}, git signs in {GIT_NAMESPACE:?}",
                    sig.namespace()
                ),
            ));
        }
        key.verify(GIT_NAMESPACE, &signed.payload, &sig)
            .map_err(|e| {
                Refusal::new(
                    RejectReason::BadSignature,
                    format!("the SSH signature by {fingerprint} does not verify over the signed content: {e}"),
                )
            })?;
        let lines: Vec<_> = self.ssh.lines_for(sig.public_key()).collect();
        if lines.is_empty() {
            return Err(Refusal::new(
                RejectReason::UnknownKey,
                format!("SSH key {fingerprint} is not in --trusted-signers"),
            ));
        }
        let vouching: Vec<_> = lines
            .iter()
            .filter(|l| l.refuses(GIT_NAMESPACE, now).is_none())
            .collect();
        if vouching.is_empty() {
            // Every line listing the key refuses it: say why for the first one.
            let l = lines[0];
            return Err(match l.refuses(GIT_NAMESPACE, now) {
                Some(Refused::Namespace(ns)) => Refusal::new(
                    RejectReason::UnknownKey,
                    format!(
                        "SSH key {fingerprint} ({}) is trusted only for namespaces {ns:?} (--trusted-signers line {}), not {GIT_NAMESPACE:?}",
                        l.principals, l.line
                    ),
                ),
                Some(Refused::NotYetValid(t)) => Refusal::new(
                    RejectReason::ExpiredKey,
                    format!(
                        "SSH key {fingerprint} ({}) is not valid before {} (valid-after, --trusted-signers line {})",
                        l.principals,
                        super::utc(t),
                        l.line
                    ),
                ),
                Some(Refused::Expired(t)) => Refusal::new(
                    RejectReason::ExpiredKey,
                    format!(
                        "SSH key {fingerprint} ({}) expired at {} (valid-before, --trusted-signers line {})",
                        l.principals,
                        super::utc(t),
                        l.line
                    ),
                ),
                None => Refusal::new(
                    RejectReason::UnknownKey,
                    format!("SSH key {fingerprint} is not trusted"),
                ),
            });
        }
        let mut principals: Vec<String> = vouching
            .iter()
            .flat_map(|l| l.principals.split(','))
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty() && !p.starts_with('!'))
            .collect();
        principals.dedup();
        Ok(Signer {
            name: vouching[0].principals.clone(),
            principals,
            fingerprints: vec![fingerprint],
        })
    }

    fn verify_gpg(&self, signed: &Signed, now: i64) -> Result<Signer, Refusal> {
        let s = self
            .gpg
            .verify(&signed.payload, &signed.signature, now)
            .map_err(|r| match r {
                GpgRefusal::Malformed(d) => Refusal::new(RejectReason::Malformed, d),
                GpgRefusal::UnknownKey(d) => Refusal::new(RejectReason::UnknownKey, d),
                GpgRefusal::BadSignature(d) => Refusal::new(
                    RejectReason::BadSignature,
                    format!("the OpenPGP signature does not verify over the signed content: {d}"),
                ),
                GpgRefusal::Expired(d) | GpgRefusal::Revoked(d) => {
                    Refusal::new(RejectReason::ExpiredKey, d)
                }
            })?;
        let mut principals = Vec::new();
        for uid in &s.user_ids {
            principals.push(uid.clone());
            if let Some(email) = uid.rsplit_once('<').and_then(|(_, e)| e.strip_suffix('>')) {
                principals.push(email.to_string());
            }
        }
        let mut fingerprints = vec![s.fingerprint.clone()];
        if s.signing_fingerprint != s.fingerprint {
            fingerprints.push(s.signing_fingerprint);
        }
        Ok(Signer {
            name: s.user_ids.first().cloned().unwrap_or(s.fingerprint),
            principals,
            fingerprints,
        })
    }
}
