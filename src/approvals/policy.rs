//! Who may approve which stage: the optional `--approval-policy FILE`, so that only SREs
//! approve production.
//!
//! ```yaml
//! rules:
//!   - stages: ["prod*"]                     # globs on stage names; the first rule that matches applies
//!     principals: ["sre@example.com", "*@sre.example.com"]
//!     keys: ["SHA256:…", "0123ABCD…"]       # SSH (SHA256:…) or OpenPGP (hex) fingerprints
//!   - stages: ["*"]
//!     principals: ["*"]
//! ```
//!
//! A signer is allowed by a rule when one of its principals (an allowed_signers principal, or an
//! OpenPGP user id or its e-mail address) matches a `principals` glob, or its key fingerprint
//! (OpenPGP: the primary key's or the signing subkey's) is listed in `keys`. A stage no rule
//! matches may be approved by any trusted signer. Pure: text in, decisions out.

use super::pattern;
use super::verify::Signer;
use super::TrustError;
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub stages: Vec<String>,
    #[serde(default)]
    pub principals: Vec<String>,
    #[serde(default)]
    pub keys: Vec<String>,
}

/// OpenPGP fingerprints are compared without spaces and case (`gpg --fingerprint` prints them
/// grouped).
fn normalized_key(k: &str) -> String {
    if k.starts_with("SHA256:") {
        k.to_string()
    } else {
        k.chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_uppercase()
    }
}

impl Policy {
    pub fn parse(file: &Path, text: &str) -> Result<Self, TrustError> {
        let err = |message: String| TrustError::Policy(format!("{}: {message}", file.display()));
        let policy: Policy = crate::yaml::from_str(text).map_err(|e| err(e.to_string()))?;
        for (i, rule) in policy.rules.iter().enumerate() {
            if rule.stages.is_empty() {
                return Err(err(format!("rules[{i}].stages: Required value")));
            }
        }
        Ok(policy)
    }

    /// `Ok` when `signer` may approve a request of `stage`; otherwise why not.
    pub fn allows(&self, stage: &str, signer: &Signer) -> Result<(), String> {
        let Some((i, rule)) = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.stages.iter().any(|g| pattern::matches(g, stage)))
        else {
            return Ok(());
        };
        let by_principal = signer
            .principals
            .iter()
            .any(|p| rule.principals.iter().any(|g| pattern::matches(g, p)));
        let by_key = signer.fingerprints.iter().any(|f| {
            let f = normalized_key(f);
            rule.keys.iter().any(|k| normalized_key(k) == f)
        });
        if by_principal || by_key {
            Ok(())
        } else {
            Err(format!(
                "{} ({}) may not approve stage {stage:?}: approval policy rules[{i}] (stages {:?}) allows principals {:?} and keys {:?}",
                signer.name, signer.fingerprints.first().map(String::as_str).unwrap_or(""), rule.stages, rule.principals, rule.keys
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer(principals: &[&str], fp: &str) -> Signer {
        Signer {
            name: principals.first().unwrap_or(&"").to_string(),
            principals: principals.iter().map(|s| s.to_string()).collect(),
            fingerprints: vec![fp.to_string()],
        }
    }

    const POLICY: &str = "rules:\n- stages: [\"prod*\"]\n  principals: [\"*@sre.example.com\"]\n  keys: [\"0123 abcd\"]\n- stages: [staging]\n  principals: [\"*\"]\n";

    #[test]
    fn first_matching_rule_decides_and_unmatched_stages_are_open() {
        let p = Policy::parse(Path::new("policy.yaml"), POLICY).unwrap();
        let sre = signer(&["ann@sre.example.com"], "SHA256:x");
        let dev = signer(&["bob@dev.example.com"], "SHA256:y");
        let gpg_sre = signer(&["Carol <carol@dev.example.com>"], "0123ABCD");
        assert_eq!(p.allows("production", &sre), Ok(()));
        let e = p.allows("production", &dev).unwrap_err();
        assert!(
            e.contains("bob@dev.example.com") && e.contains("rules[0]"),
            "{e}"
        );
        assert_eq!(p.allows("production", &gpg_sre), Ok(()));
        assert_eq!(p.allows("staging", &dev), Ok(()));
        assert_eq!(p.allows("canary", &dev), Ok(()));
    }

    #[test]
    fn bad_files_are_named() {
        let e = Policy::parse(Path::new("policy.yaml"), "rules:\n- principals: [a]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("policy.yaml") && e.contains("stages"), "{e}");
        let e = Policy::parse(
            Path::new("policy.yaml"),
            "rules:\n- stages: [a]\n  people: [b]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("people"), "{e}");
    }
}
