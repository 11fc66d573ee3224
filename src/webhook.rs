//! Verifying git webhooks before they make the daemon fetch: GitHub-style
//! `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>` and GitLab-style
//! `X-Gitlab-Token: <secret>`. Comparisons are constant-time so a caller cannot find the secret
//! byte by byte from response times.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Why a webhook was refused (answered 401, nothing changes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    #[error("no X-Hub-Signature-256 or X-Gitlab-Token header")]
    Unsigned,
    #[error("X-Hub-Signature-256 is not of the form sha256=<64 hex digits>")]
    Malformed,
    #[error("signature does not match the body and the webhook secret")]
    BadSignature,
    #[error("X-Gitlab-Token does not match the webhook secret")]
    BadToken,
}

/// Checks a request given its headers (name lookup is the caller's, case-insensitive) and body.
pub fn verify(
    secret: &[u8],
    github_signature: Option<&str>,
    gitlab_token: Option<&str>,
    body: &[u8],
) -> Result<(), WebhookError> {
    match (github_signature, gitlab_token) {
        (Some(sig), _) => verify_github(secret, sig, body),
        (None, Some(token)) => verify_gitlab(secret, token),
        (None, None) => Err(WebhookError::Unsigned),
    }
}

fn verify_github(secret: &[u8], header: &str, body: &[u8]) -> Result<(), WebhookError> {
    let hex = header
        .trim()
        .strip_prefix("sha256=")
        .ok_or(WebhookError::Malformed)?;
    let expected = decode_hex(hex).ok_or(WebhookError::Malformed)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| WebhookError::BadSignature)
}

fn verify_gitlab(secret: &[u8], token: &str) -> Result<(), WebhookError> {
    // HMAC both sides with a fixed key: equal-length digests compared in constant time, so
    // neither the length nor a prefix of the secret leaks.
    let digest = |v: &[u8]| {
        let mut mac = Hmac::<Sha256>::new_from_slice(b"gitfleet-webhook-token").expect("any key");
        mac.update(v);
        mac
    };
    let expected = digest(secret).finalize().into_bytes();
    digest(token.as_bytes())
        .verify_slice(&expected)
        .map_err(|_| WebhookError::BadToken)
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    // Hex digits only: `from_str_radix` also takes a sign, so "+e" would read as 0x0e and a
    // signature with `+` for a `0` would be accepted.
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // GitHub's documented example: secret "It's a Secret to Everybody", payload "Hello, World!".
    const SECRET: &[u8] = b"It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    const SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn github_documented_example_verifies() {
        assert_eq!(verify(SECRET, Some(SIGNATURE), None, BODY), Ok(()));
    }

    #[test]
    fn github_tampered_body_or_secret_is_refused() {
        assert_eq!(
            verify(SECRET, Some(SIGNATURE), None, b"Hello, World?"),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify(b"guess", Some(SIGNATURE), None, BODY),
            Err(WebhookError::BadSignature)
        );
    }

    #[test]
    fn github_malformed_headers_are_refused() {
        // The valid signature of BODY with one `0` written as `+` (a sign, not a digit).
        let signed_with_a_sign = SIGNATURE.replacen("0e", "+e", 1);
        for h in [
            "757107ea",
            "sha1=abc",
            "sha256=zz",
            "sha256=",
            signed_with_a_sign.as_str(),
        ] {
            assert_eq!(
                verify(SECRET, Some(h), None, BODY),
                Err(WebhookError::Malformed),
                "{h}"
            );
        }
    }

    #[test]
    fn gitlab_token_must_match() {
        assert_eq!(verify(b"s3cret", None, Some("s3cret"), b""), Ok(()));
        assert_eq!(
            verify(b"s3cret", None, Some("s3cre"), b""),
            Err(WebhookError::BadToken)
        );
        assert_eq!(
            verify(b"s3cret", None, None, b""),
            Err(WebhookError::Unsigned)
        );
    }
}
