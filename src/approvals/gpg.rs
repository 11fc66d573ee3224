//! The OpenPGP keys trusted to approve: a file of armored public keys (`gpg --export --armor`,
//! several keys or several blocks allowed), and the verification of a detached armored
//! signature as `git tag -s` / `git commit -S` make it with gpg. rPGP (the `pgp` crate) does the
//! cryptography, in-process: no gpg, no keyring, no trust database.
//!
//! A key's expiry is read from its newest self-signature (and a signing subkey's from its newest
//! binding signature); a key or subkey with a revocation signature in the file is refused.

use super::{utc, TrustError};
use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::{KeyDetails, Timestamp};
use std::path::Path;

/// The keys of the `--trusted-gpg-keys` file.
#[derive(Debug, Clone, Default)]
pub struct GpgKeys {
    pub keys: Vec<SignedPublicKey>,
}

/// A verified OpenPGP signature: whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpgSigner {
    /// The primary key's fingerprint, upper-case hex (as `gpg --fingerprint` without spaces).
    pub fingerprint: String,
    /// The fingerprint of the (sub)key that signed.
    pub signing_fingerprint: String,
    /// The key's user ids (`Name <email>`), primary first.
    pub user_ids: Vec<String>,
}

/// Why an OpenPGP signature does not count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpgRefusal {
    Malformed(String),
    UnknownKey(String),
    BadSignature(String),
    Expired(String),
    Revoked(String),
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

impl GpgKeys {
    /// Parses the file's text (`file` names it in errors): every armored public-key block in it.
    pub fn parse(file: &Path, text: &str) -> Result<Self, TrustError> {
        const BEGIN: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
        let err = |message: String| TrustError::Gpg(format!("{}: {message}", file.display()));
        let mut keys = Vec::new();
        let blocks: Vec<&str> = text.match_indices(BEGIN).map(|(i, _)| &text[i..]).collect();
        if blocks.is_empty() {
            return Err(err(format!("no {BEGIN} found")));
        }
        for (n, block) in blocks.iter().enumerate() {
            let block_err = |e: pgp::errors::Error| err(format!("key block {}: {e}", n + 1));
            for key in SignedPublicKey::from_armor_many(block.as_bytes())
                .map_err(block_err)?
                .0
            {
                let key = key.map_err(block_err)?;
                // The self-signatures carry the expiry we honour: they must be the key's own.
                key.verify_bindings().map_err(|e| {
                    err(format!(
                        "key {}: its self-signatures do not verify: {e}",
                        hex(key.primary_key.fingerprint().as_bytes())
                    ))
                })?;
                keys.push(key);
            }
        }
        Ok(Self { keys })
    }

    /// Verifies the armored detached `signature` over `payload` at `now` (seconds since the
    /// epoch).
    pub fn verify(
        &self,
        payload: &[u8],
        signature: &[u8],
        now: i64,
    ) -> Result<GpgSigner, GpgRefusal> {
        let (sig, _) = DetachedSignature::from_armor_single(signature)
            .map_err(|e| GpgRefusal::Malformed(format!("unreadable OpenPGP signature: {e}")))?;
        let sig = sig.signature;
        let issuers_fp: Vec<Vec<u8>> = sig
            .issuer_fingerprint()
            .iter()
            .map(|f| f.as_bytes().to_vec())
            .collect();
        let issuers_id: Vec<Vec<u8>> = sig
            .issuer_key_id()
            .iter()
            .map(|k| k.as_ref().to_vec())
            .collect();
        let issued_by = |fp: &[u8], id: &[u8]| {
            issuers_fp.iter().any(|f| f == fp) || issuers_id.iter().any(|k| k == id)
        };
        let named = if let Some(f) = issuers_fp.first() {
            hex(f)
        } else if let Some(k) = issuers_id.first() {
            hex(k)
        } else {
            return Err(GpgRefusal::Malformed(
                "the signature names no issuer".into(),
            ));
        };
        for key in &self.keys {
            let primary = &key.primary_key;
            let signer = |signing: &[u8]| GpgSigner {
                fingerprint: hex(primary.fingerprint().as_bytes()),
                signing_fingerprint: hex(signing),
                user_ids: user_ids(key),
            };
            if issued_by(
                primary.fingerprint().as_bytes(),
                primary.legacy_key_id().as_ref(),
            ) {
                sig.verify(primary, payload)
                    .map_err(|e| GpgRefusal::BadSignature(format!("key {named}: {e}")))?;
                check_key(key, None, now)?;
                return Ok(signer(primary.fingerprint().as_bytes()));
            }
            for sub in &key.public_subkeys {
                if issued_by(
                    sub.key.fingerprint().as_bytes(),
                    sub.key.legacy_key_id().as_ref(),
                ) {
                    sig.verify(&sub.key, payload)
                        .map_err(|e| GpgRefusal::BadSignature(format!("key {named}: {e}")))?;
                    check_key(key, Some(sub), now)?;
                    return Ok(signer(sub.key.fingerprint().as_bytes()));
                }
            }
        }
        Err(GpgRefusal::UnknownKey(format!(
            "OpenPGP key {named} is not in --trusted-gpg-keys"
        )))
    }
}

fn user_ids(key: &SignedPublicKey) -> Vec<String> {
    let mut users: Vec<&pgp::types::SignedUser> = key.details.users.iter().collect();
    users.sort_by_key(|u| !u.is_primary());
    users
        .iter()
        .map(|u| String::from_utf8_lossy(u.id.id()).into_owned())
        .collect()
}

/// The newest signature's key expiration, as an absolute time, from `created` (the key's
/// creation).
fn expiry(created: Timestamp, sigs: &[&pgp::packet::Signature]) -> Option<i64> {
    let newest = sigs
        .iter()
        .filter(|s| s.created().is_some())
        .max_by_key(|s| s.created().map(|t| t.as_secs()))?;
    let d = newest.key_expiration_time()?.as_secs();
    (d != 0).then(|| i64::from(created.as_secs()) + i64::from(d))
}

fn check_key(
    key: &SignedPublicKey,
    sub: Option<&pgp::composed::SignedPublicSubKey>,
    now: i64,
) -> Result<(), GpgRefusal> {
    let fp = hex(key.primary_key.fingerprint().as_bytes());
    if !key.details.revocation_signatures.is_empty() {
        return Err(GpgRefusal::Revoked(format!("key {fp} is revoked")));
    }
    let self_sigs: Vec<&pgp::packet::Signature> = key
        .details
        .users
        .iter()
        .flat_map(|u| u.signatures.iter())
        .chain(key.details.direct_signatures.iter())
        .collect();
    if let Some(at) = expiry(key.primary_key.created_at(), &self_sigs) {
        if now >= at {
            return Err(GpgRefusal::Expired(format!(
                "key {fp} expired at {}",
                utc(at)
            )));
        }
    }
    if let Some(sub) = sub {
        let sfp = hex(sub.key.fingerprint().as_bytes());
        if sub
            .signatures
            .iter()
            .any(|s| s.typ() == Some(pgp::packet::SignatureType::SubkeyRevocation))
        {
            return Err(GpgRefusal::Revoked(format!(
                "subkey {sfp} of key {fp} is revoked"
            )));
        }
        let binds: Vec<&pgp::packet::Signature> = sub.signatures.iter().collect();
        if let Some(at) = expiry(sub.key.created_at(), &binds) {
            if now >= at {
                return Err(GpgRefusal::Expired(format!(
                    "subkey {sfp} of key {fp} expired at {}",
                    utc(at)
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_keys_is_refused_by_name() {
        let e = GpgKeys::parse(Path::new("keys.asc"), "nothing here").unwrap_err();
        assert!(
            e.to_string()
                .contains("keys.asc: no -----BEGIN PGP PUBLIC KEY BLOCK-----"),
            "{e}"
        );
    }
}
