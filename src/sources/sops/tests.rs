//! Files encrypted by the real `sops` CLI at test time (built from its Go module, see
//! `.ci/run`), decrypted here and compared with their plaintext. Without sops the tests say
//! they were skipped, unless `GITFLEET_REQUIRE_TOOLS=1` (CI) makes that a failure.

use super::*;
use age::secrecy::ExposeSecret;
use serde_json::json;
use std::path::PathBuf;

/// The sops binary, or `None` (the check is skipped) where it is missing.
pub(crate) fn sops_binary() -> Option<PathBuf> {
    gitfleet_testkit::tools::SOPS.find("the SOPS checks")
}

/// A new age key: its secret key text and its recipient.
pub(crate) fn age_key() -> (String, String) {
    let identity = age::x25519::Identity::generate();
    let secret = identity.to_string().expose_secret().to_string();
    (secret, identity.to_public().to_string())
}

pub(crate) use gitfleet_testkit::tools::sops_encrypt as encrypt;

fn keys(secret: &str) -> AgeIdentities {
    AgeIdentities::parse(&format!("# created: now\n# public key: …\n{secret}\n")).unwrap()
}

fn yaml_docs(text: &str) -> Vec<Value> {
    crate::yaml::documents(text).unwrap()
}

const NESTED_YAML: &str = "\
apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: shop
  labels:
    tier: backend
type: Opaque
stringData:
  password: s3cr3t!
  empty: \"\"
  note: \"line one\\nline two\"
nested:
  list:
    - one
    - 2
    - 3.25
    - true
    - false
    - {inner: value, count: 7}
    - [a, b]
  nothing: null
  big: 12345678901
";

#[test]
fn yaml_with_nested_maps_and_lists_reads_back_as_written() {
    let Some(sops) = sops_binary() else { return };
    let (secret, recipient) = age_key();
    let encrypted = encrypt(&sops, "secret.yaml", NESTED_YAML, &recipient, &[]);
    let text = String::from_utf8(encrypted.clone()).unwrap();
    assert!(!text.contains("s3cr3t"), "{text}");
    assert!(may_be_encrypted(&encrypted));
    let docs = decrypt(&encrypted, false, &keys(&secret)).unwrap().unwrap();
    assert_eq!(docs, yaml_docs(NESTED_YAML));
}

#[test]
fn json_with_nested_maps_and_lists_reads_back_as_written() {
    let Some(sops) = sops_binary() else { return };
    let (secret, recipient) = age_key();
    let plain = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "labels": {"tier": "backend"}},
        "data": {"password": "czNjcjN0IQ=="},
        "nested": {"list": ["one", 2, 3.5, true, {"inner": "value"}, [1, 2]], "nothing": null},
    });
    let text = serde_json::to_string_pretty(&plain).unwrap();
    let encrypted = encrypt(&sops, "secret.json", &text, &recipient, &[]);
    assert!(!String::from_utf8_lossy(&encrypted).contains("czNjcjN0IQ"));
    let docs = decrypt(&encrypted, true, &keys(&secret)).unwrap().unwrap();
    assert_eq!(docs, vec![plain]);
}

#[test]
fn every_document_of_a_yaml_stream_is_decrypted() {
    let Some(sops) = sops_binary() else { return };
    let (secret, recipient) = age_key();
    let plain = "kind: Secret\nstringData:\n  a: one\n---\nkind: Secret\nstringData:\n  b: two\n";
    let encrypted = encrypt(&sops, "two.yaml", plain, &recipient, &[]);
    let docs = decrypt(&encrypted, false, &keys(&secret)).unwrap().unwrap();
    assert_eq!(docs, yaml_docs(plain));
}

/// What sops leaves in clear is read as it is and still covered by the MAC.
#[test]
fn unencrypted_suffix_values_stay_clear_and_count_in_the_mac() {
    let Some(sops) = sops_binary() else { return };
    let (secret, recipient) = age_key();
    let plain = "kind: Secret\nstringData:\n  password: hunter2\n  user_unencrypted: admin\n  port_unencrypted: 5432\n  ratio_unencrypted: 0.5\n  on_unencrypted: true\n";
    let encrypted = encrypt(&sops, "s.yaml", plain, &recipient, &[]);
    let text = String::from_utf8(encrypted.clone()).unwrap();
    assert!(text.contains("user_unencrypted: admin"), "{text}");
    assert!(text.contains("unencrypted_suffix: _unencrypted"), "{text}");
    let docs = decrypt(&encrypted, false, &keys(&secret)).unwrap().unwrap();
    assert_eq!(docs, yaml_docs(plain));
    // Changing the clear value breaks the MAC.
    let tampered = text.replace("user_unencrypted: admin", "user_unencrypted: root");
    assert_eq!(
        decrypt(tampered.as_bytes(), false, &keys(&secret)),
        Err(SopsError::MacMismatch)
    );
}

/// The usual way to encrypt a Secret (as Flux documents it): only its data.
#[test]
fn encrypted_regex_encrypts_only_what_it_names() {
    let Some(sops) = sops_binary() else { return };
    let (secret, recipient) = age_key();
    let plain = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: aHVudGVyMg==\nstringData:\n  token: abc\n";
    let encrypted = encrypt(
        &sops,
        "s.yaml",
        plain,
        &recipient,
        &["--encrypted-regex", "^(data|stringData)$"],
    );
    let text = String::from_utf8(encrypted.clone()).unwrap();
    assert!(
        text.contains("name: db") && !text.contains("aHVudGVyMg"),
        "{text}"
    );
    let docs = decrypt(&encrypted, false, &keys(&secret)).unwrap().unwrap();
    assert_eq!(docs, yaml_docs(plain));
}

#[test]
fn mac_only_encrypted_is_honoured() {
    let Some(sops) = sops_binary() else { return };
    let (secret, recipient) = age_key();
    let plain = "kind: Secret\nmetadata:\n  name: db\nstringData:\n  token: abc\n";
    let encrypted = encrypt(
        &sops,
        "s.yaml",
        plain,
        &recipient,
        &["--encrypted-regex", "^stringData$", "--mac-only-encrypted"],
    );
    let text = String::from_utf8(encrypted.clone()).unwrap();
    assert!(text.contains("mac_only_encrypted: true"), "{text}");
    let docs = decrypt(&encrypted, false, &keys(&secret)).unwrap().unwrap();
    assert_eq!(docs, yaml_docs(plain));
    // The clear name is outside the MAC (that is what the option is for); the value is not.
    let renamed = text.replace("name: db", "name: other");
    assert!(decrypt(renamed.as_bytes(), false, &keys(&secret)).is_ok());
    let removed: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("token:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        decrypt(removed.as_bytes(), false, &keys(&secret)),
        Err(SopsError::MacMismatch)
    );
}

#[test]
fn a_tampered_file_is_refused() {
    let Some(sops) = sops_binary() else { return };
    let (secret, recipient) = age_key();
    let plain = "kind: Secret\nstringData:\n  a: one\n  b: two\n";
    let text = String::from_utf8(encrypt(&sops, "s.yaml", plain, &recipient, &[])).unwrap();
    let keys = keys(&secret);
    // A value removed: every remaining value opens, the MAC does not match.
    let removed: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("b:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        decrypt(removed.as_bytes(), false, &keys),
        Err(SopsError::MacMismatch)
    );
    // A value moved to another key: its path is its additional data, so it does not open.
    let a = text
        .lines()
        .find(|l| l.trim_start().starts_with("a:"))
        .unwrap();
    let b = text
        .lines()
        .find(|l| l.trim_start().starts_with("b:"))
        .unwrap();
    let swapped = text
        .replace(a, "@A@")
        .replace(b, &a.replace("a:", "b:"))
        .replace("@A@", &b.replace("b:", "a:"));
    match decrypt(swapped.as_bytes(), false, &keys) {
        Err(SopsError::Value { field, message }) => {
            assert_eq!(field, "stringData.a");
            assert!(message.contains("authentication failed"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A ciphertext changed: it does not authenticate.
    let data_start = a.find("data:").unwrap() + "data:".len();
    let flipped_char = if &a[data_start..data_start + 1] == "A" {
        "B"
    } else {
        "A"
    };
    let flipped = format!(
        "{}{}{}",
        &a[..data_start],
        flipped_char,
        &a[data_start + 1..]
    );
    assert!(matches!(
        decrypt(text.replace(a, &flipped).as_bytes(), false, &keys),
        Err(SopsError::Value { .. })
    ));
}

#[test]
fn without_the_right_key_the_error_names_the_recipients() {
    let Some(sops) = sops_binary() else { return };
    let (_, recipient) = age_key();
    let (other, _) = age_key();
    let encrypted = encrypt(
        &sops,
        "s.yaml",
        "kind: Secret\nstringData:\n  a: one\n",
        &recipient,
        &[],
    );
    let wrong = decrypt(&encrypted, false, &keys(&other)).unwrap_err();
    assert_eq!(
        wrong,
        SopsError::WrongKeys {
            given: 1,
            recipients: vec![recipient.clone()]
        }
    );
    assert_eq!(
        wrong.to_string(),
        format!("none of the 1 age key given opens it (encrypted for {recipient})")
    );
    let none = decrypt(&encrypted, false, &AgeIdentities::default()).unwrap_err();
    assert!(
        none.to_string().starts_with(&format!(
            "no age key is given to decrypt it (encrypted for {recipient}): give one with --age-key-file"
        )),
        "{none}"
    );
}

/// Two recipients: either key opens the file.
#[test]
fn any_recipients_key_opens_the_file() {
    let Some(sops) = sops_binary() else { return };
    let (first, r1) = age_key();
    let (second, r2) = age_key();
    let plain = "kind: Secret\nstringData:\n  a: one\n";
    let encrypted = encrypt(&sops, "s.yaml", plain, &format!("{r1},{r2}"), &[]);
    for secret in [first, second] {
        let docs = decrypt(&encrypted, false, &keys(&secret)).unwrap().unwrap();
        assert_eq!(docs, yaml_docs(plain));
    }
}

#[test]
fn files_without_sops_metadata_are_not_sops_files() {
    let plain = b"kind: ConfigMap\ndata:\n  a: ENC[AES256_GCM,data:x,iv:y,tag:z,type:str]\n";
    assert!(may_be_encrypted(plain));
    assert_eq!(decrypt(plain, false, &AgeIdentities::default()), Ok(None));
    assert!(!may_be_encrypted(b"kind: ConfigMap\n"));
}

#[test]
fn key_files_are_read_as_age_keygen_writes_them() {
    let (secret, _) = age_key();
    let text = format!("# created: 2026-01-01T00:00:00Z\n# public key: age1…\n\n{secret}\n");
    assert_eq!(AgeIdentities::parse(&text).unwrap().len(), 1);
    let bad = AgeIdentities::parse("# comment\nAGE-SECRET-KEY-1NOTAKEY\n").unwrap_err();
    assert!(bad.starts_with("line 2: not an age secret key"), "{bad}");
    assert!(!bad.contains("NOTAKEY"), "{bad}");
}

/// Go formats the numbers it hashes without exponents and with the fewest digits; so does
/// Rust's Display.
#[test]
fn clear_values_are_hashed_as_sops_formats_them() {
    for (value, want) in [
        (json!(5432), "5432"),
        (json!(-7), "-7"),
        (json!(0.5), "0.5"),
        (json!(1.0), "1"),
        (json!(1e21), "1000000000000000000000"),
        (json!(true), "True"),
        (json!(false), "False"),
        (json!("text"), "text"),
    ] {
        assert_eq!(
            String::from_utf8(plain_bytes(&value)).unwrap(),
            want,
            "{value}"
        );
    }
}
