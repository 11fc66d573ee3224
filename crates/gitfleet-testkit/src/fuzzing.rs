//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz, libFuzzer, nightly) and for the
//! test that replays their committed corpora on stable (`tests/fuzz_corpus.rs`). Each takes
//! arbitrary bytes, feeds them to one parser that reads untrusted input, and checks what must
//! hold whatever the input: no panic (the fuzzer's finding), and the invariants asserted here.
//!
//! Inputs that carry several values (a secret, a header and a body) split them at NUL bytes,
//! so that the fuzzer can grow each part independently.

use gitfleet::catalog::SourceFile;

/// `data` split at NUL bytes into at most `n` parts (the last keeps any further NULs).
fn parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    data.splitn(n, |b| *b == 0).collect()
}

/// File names the analysis input is spread over: manifest extensions, a nested directory, and
/// names gitfleet skips, so that path handling is exercised too.
const PATHS: &[&str] = &["a.yaml", "fleet/b.yml", "c.json", "d/e/f.yaml", "README.md"];

/// A commit's files (parts of `data`, named from [`PATHS`]) through [`gitfleet::analyze::analyze`]:
/// YAML and JSON of any shape in, diagnostics out. Every diagnostic names one of the files.
pub fn analyze(data: &[u8]) {
    let files: Vec<SourceFile> = parts(data, PATHS.len())
        .into_iter()
        .zip(PATHS)
        .filter(|(_, path)| gitfleet::source::is_manifest_path(path))
        .map(|(content, path)| SourceFile {
            path: path.to_string(),
            content: content.to_vec(),
        })
        .collect();
    let (_, diags) = gitfleet::analyze::analyze(&files);
    for d in &diags {
        let shown = d.to_string();
        assert!(
            files.iter().any(|f| shown.starts_with(&f.path)),
            "a diagnostic names no input file: {shown}"
        );
    }
}

/// A webhook request (`secret \0 X-Hub-Signature-256 \0 X-Gitlab-Token \0 body`; an empty
/// header part is an absent header) through [`gitfleet::webhook::verify`]. Accepted only when
/// the header really is the body's HMAC, or the token is the secret.
pub fn webhook(data: &[u8]) {
    let p = parts(data, 4);
    let part = |i: usize| p.get(i).copied().unwrap_or_default();
    let header = |i: usize| {
        let text = String::from_utf8_lossy(part(i)).into_owned();
        (!text.is_empty()).then_some(text)
    };
    let (secret, github, gitlab, body) = (part(0), header(1), header(2), part(3));
    let verdict = gitfleet::webhook::verify(secret, github.as_deref(), gitlab.as_deref(), body);
    if verdict.is_ok() {
        match &github {
            Some(sig) => {
                use hmac::{KeyInit, Mac};
                let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
                mac.update(body);
                let hex: String = mac
                    .finalize()
                    .into_bytes()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                assert!(
                    sig.trim().eq_ignore_ascii_case(&format!("sha256={hex}")),
                    "accepted a signature that is not the body's HMAC: {sig}"
                );
            }
            None => assert_eq!(
                gitlab.as_deref().map(str::as_bytes),
                Some(secret),
                "accepted a token that is not the secret"
            ),
        }
    }
}

/// A signed object and trust files (`tag or commit object \0 allowed_signers \0 armored
/// OpenPGP keys \0 approval policy`) through the approval parsers and the verifier: the tag
/// and commit splitting, the tag headers, the allowed_signers, key and policy files, and
/// signature verification. Nothing verifies without a trusted key's signature, which the
/// fuzzer cannot forge; with the trust files' keys absent, nothing may verify at all.
pub fn approval(data: &[u8]) {
    use gitfleet::approvals::verify::Trust;
    use gitfleet::approvals::{gpg::GpgKeys, object, policy::Policy, signers::AllowedSigners};
    use std::path::Path;
    let p = parts(data, 4);
    let part = |i: usize| p.get(i).copied().unwrap_or_default();
    let text = |i: usize| String::from_utf8_lossy(part(i)).into_owned();
    let obj = part(0);
    let _ = object::tag_headers(obj);
    let trust = Trust {
        ssh: AllowedSigners::parse(Path::new("allowed_signers"), &text(1)).unwrap_or_default(),
        gpg: GpgKeys::parse(Path::new("keys.asc"), &text(2)).unwrap_or_default(),
    };
    let policy = Policy::parse(Path::new("policy.yaml"), &text(3)).ok();
    let untrusted = Trust::default();
    for signed in [object::split_tag(obj), object::split_commit(obj)]
        .into_iter()
        .flatten()
    {
        assert!(
            obj.len() >= signed.payload.len(),
            "the signed payload is longer than the object"
        );
        if let (Ok(signer), Some(policy)) = (trust.verify(&signed, 1_800_000_000), &policy) {
            let _ = policy.allows("production", &signer);
        }
        assert!(
            untrusted.verify(&signed, 1_800_000_000).is_err(),
            "a signature verified with no trusted key"
        );
    }
}

/// Bytes off a connection through the simulator's HTTP/1.1 request reader
/// ([`gitfleet_sim::http::read_request`]) with its default limits, request after request until
/// the input ends or is refused: no request may exceed the limits.
pub fn sim_http(data: &[u8]) {
    use gitfleet_sim::http::{read_request, Limits};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let limits = Limits::default();
    runtime.block_on(async {
        let mut reader = tokio::io::BufReader::new(data);
        // Each request consumes at least one byte, so this ends.
        for _ in 0..=data.len() {
            match read_request(&mut reader, &limits).await {
                Ok(Some(request)) => assert!(
                    request.body.len() <= limits.body_bytes,
                    "a body over the limit was read"
                ),
                Ok(None) | Err(_) => break,
            }
        }
    });
}

/// A fuzz target: bytes in, a panic if an invariant fails.
pub type Target = fn(&[u8]);

/// The targets by name, as `fuzz/fuzz_targets/` and the corpus folders name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("analyze", analyze),
    ("webhook", webhook),
    ("approval", approval),
    ("sim_http", sim_http),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_split_at_nul_up_to_n() {
        assert_eq!(parts(b"a\0b\0c", 2), vec![&b"a"[..], &b"b\0c"[..]]);
        assert_eq!(parts(b"", 3), vec![&b""[..]]);
    }

    #[test]
    fn every_target_takes_empty_and_junk_input() {
        for (_, target) in TARGETS {
            target(b"");
            target(b"\0\0\0\xff\xfe---\n: [\n");
        }
    }

    #[test]
    fn webhook_accepts_the_right_signature() {
        // HMAC-SHA256("key", "body"), as GitHub sends it.
        use hmac::{KeyInit, Mac};
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"key").unwrap();
        mac.update(b"body");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let input = format!("key\0sha256={hex}\0\0body");
        webhook(input.as_bytes());
    }

    #[test]
    fn sim_http_reads_pipelined_requests() {
        sim_http(
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
        );
    }
}
