//! Files encrypted with SOPS (github.com/getsops/sops), decrypted as `sops --decrypt` does:
//! the data key taken from the `sops.age` stanzas with the age identities given, every value the
//! file's rules say is encrypted (`ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`, AES-256-GCM with a
//! 32-byte nonce and the value's path `a:b:` as additional data) opened, and the MAC (SHA-512
//! over the values in document order, `mac_only_encrypted` over the encrypted ones only)
//! compared with the file's, so a value changed, added or removed after encryption refuses the
//! file.
//!
//! Supported: YAML (one or more documents) and JSON files, age recipients, `unencrypted_suffix`,
//! `encrypted_suffix`, `unencrypted_regex`, `encrypted_regex`, `mac_only_encrypted`. Refused
//! with an error saying so: files only PGP or a cloud KMS can open, Shamir key groups, and the
//! comment rules (`*_comment_regex`: gitfleet's YAML reader does not keep comments).
//!
//! Pure: a file's bytes and the identities in, its documents or a typed error out. It does not
//! read key files (see [`super::keys`]) and never puts a decrypted value in an error.

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use serde_json::Value;
use sha2::Digest;

/// What marks every SOPS file: its MAC (and its values) are written this way.
const MARKER: &[u8] = b"ENC[AES256_GCM,";

/// The bytes sops puts first into the hash when `mac_only_encrypted` is set, so that the two
/// kinds of MAC never match each other (sops.go, `MACOnlyEncryptedInitialization`).
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

/// AES-256-GCM with the 32-byte nonces sops uses.
type Cipher = aes_gcm::AesGcm<aes_gcm::aes::Aes256, U32>;

/// Why a SOPS file could not be decrypted. No variant holds a decrypted value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SopsError {
    #[error("cannot read the file: {0}")]
    Parse(String),
    #[error("its SOPS metadata is invalid: {field}: {message}")]
    Metadata { field: String, message: String },
    #[error("{0} (gitfleet decrypts SOPS files encrypted for age recipients)")]
    Unsupported(String),
    #[error(
        "no age key is given to decrypt it (encrypted for {}): give one with --age-key-file, \
         SOPS_AGE_KEY_FILE or SOPS_AGE_KEY",
        recipients.join(", ")
    )]
    NoKeys { recipients: Vec<String> },
    #[error(
        "none of the {given} age key{} given opens it (encrypted for {})",
        if *given == 1 { "" } else { "s" },
        recipients.join(", ")
    )]
    WrongKeys {
        given: usize,
        recipients: Vec<String>,
    },
    #[error("its data key cannot be read: {0}")]
    DataKey(String),
    #[error("the value at {field} cannot be decrypted: {message}")]
    Value { field: String, message: String },
    #[error(
        "its MAC does not match its values: the file was changed after it was encrypted \
         (edit it with `sops`, which updates the MAC)"
    )]
    MacMismatch,
}

/// The age identities decryption may use (their Debug never shows a key).
#[derive(Default)]
pub struct AgeIdentities {
    identities: Vec<age::x25519::Identity>,
}

impl std::fmt::Debug for AgeIdentities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AgeIdentities({} keys)", self.identities.len())
    }
}

impl AgeIdentities {
    /// The identities of an age key file's text (`AGE-SECRET-KEY-1…` lines; `#` comments and
    /// blank lines skipped), as `age-keygen` writes it and sops reads it. The error names the
    /// line, never its content.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut identities = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let identity = line.parse::<age::x25519::Identity>().map_err(|_| {
                format!(
                    "line {}: not an age secret key (AGE-SECRET-KEY-1…; plugin and SSH keys are not supported)",
                    i + 1
                )
            })?;
            identities.push(identity);
        }
        Ok(AgeIdentities { identities })
    }

    pub fn extend(&mut self, other: AgeIdentities) {
        self.identities.extend(other.identities);
    }

    pub fn len(&self) -> usize {
        self.identities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.identities.is_empty()
    }
}

/// Whether `bytes` may be a SOPS file (cheap: every SOPS file holds an encrypted MAC). A file
/// that passes is a SOPS file only when its first document has a top-level `sops` mapping.
pub fn may_be_encrypted(bytes: &[u8]) -> bool {
    bytes.windows(MARKER.len()).any(|w| w == MARKER)
}

/// The documents of a SOPS-encrypted file, decrypted and without their `sops` key; `Ok(None)`
/// when the file is no SOPS file (no top-level `sops` mapping in its first document).
/// `json`: the file is JSON (one document), else YAML.
pub fn decrypt(
    bytes: &[u8],
    json: bool,
    keys: &AgeIdentities,
) -> Result<Option<Vec<Value>>, SopsError> {
    let mut docs = parse(bytes, json)?;
    let Some(Value::Object(meta)) = docs.first().and_then(|d| d.get("sops")).cloned() else {
        return Ok(None);
    };
    let meta = Metadata::read(&meta)?;
    let key = data_key(&meta, keys)?;
    let mut walk = Walk {
        meta: &meta,
        key: &key,
        hash: sha2::Sha512::new(),
        path: Vec::new(),
    };
    if meta.mac_only_encrypted {
        walk.hash.update(MAC_ONLY_ENCRYPTED_INIT);
    }
    for doc in &mut docs {
        if let Value::Object(map) = doc {
            map.shift_remove("sops");
        }
        walk.value(doc)?;
    }
    let computed: String = walk
        .hash
        .finalize()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let stored = open_value(&meta.mac, &key, &meta.last_modified).map_err(|message| {
        SopsError::Metadata {
            field: "sops.mac".into(),
            message,
        }
    })?;
    if stored.0 != computed.as_bytes() {
        return Err(SopsError::MacMismatch);
    }
    Ok(Some(docs))
}

fn parse(bytes: &[u8], json: bool) -> Result<Vec<Value>, SopsError> {
    if json {
        return serde_json::from_slice(bytes)
            .map(|v| vec![v])
            .map_err(|e| SopsError::Parse(e.to_string()));
    }
    let text = crate::yaml::text(bytes).map_err(|e| SopsError::Parse(e.to_string()))?;
    crate::yaml::documents(text).map_err(|e| SopsError::Parse(e.to_string()))
}

/// The `sops` mapping, as far as decryption needs it.
#[derive(Debug)]
struct Metadata {
    age: Vec<(String, String)>,
    other_keys: Vec<&'static str>,
    last_modified: String,
    mac: String,
    unencrypted_suffix: Option<String>,
    encrypted_suffix: Option<String>,
    unencrypted_regex: Option<regex::Regex>,
    encrypted_regex: Option<regex::Regex>,
    mac_only_encrypted: bool,
}

impl Metadata {
    fn read(meta: &serde_json::Map<String, Value>) -> Result<Self, SopsError> {
        let bad = |field: &str, message: &str| SopsError::Metadata {
            field: format!("sops.{field}"),
            message: message.to_string(),
        };
        let string = |field: &str| -> Result<Option<String>, SopsError> {
            match meta.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(field, "must be a string")),
            }
        };
        let regex = |field: &str| -> Result<Option<regex::Regex>, SopsError> {
            string(field)?
                .map(|r| regex::Regex::new(&r).map_err(|e| bad(field, &e.to_string())))
                .transpose()
        };
        for field in ["unencrypted_comment_regex", "encrypted_comment_regex"] {
            if string(field)?.is_some() {
                return Err(SopsError::Unsupported(format!(
                    "sops.{field} is set: comments decide what is encrypted, and gitfleet does not read comments"
                )));
            }
        }
        if meta
            .get("key_groups")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty())
        {
            return Err(SopsError::Unsupported(
                "it uses key groups (Shamir secret sharing)".into(),
            ));
        }
        let mut age = Vec::new();
        match meta.get("age") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let field = |f: &str| {
                        item.get(f)
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .ok_or_else(|| bad(&format!("age[{i}].{f}"), "missing"))
                    };
                    age.push((field("recipient")?, field("enc")?));
                }
            }
            Some(_) => return Err(bad("age", "must be a list")),
        }
        let other_keys = ["pgp", "kms", "gcp_kms", "azure_kv", "hc_vault", "hckms"]
            .into_iter()
            .filter(|k| {
                meta.get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty())
            })
            .collect();
        Ok(Metadata {
            age,
            other_keys,
            last_modified: string("lastmodified")?.ok_or_else(|| bad("lastmodified", "missing"))?,
            mac: string("mac")?.ok_or_else(|| bad("mac", "missing"))?,
            unencrypted_suffix: string("unencrypted_suffix")?,
            encrypted_suffix: string("encrypted_suffix")?,
            unencrypted_regex: regex("unencrypted_regex")?,
            encrypted_regex: regex("encrypted_regex")?,
            mac_only_encrypted: meta
                .get("mac_only_encrypted")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// Whether the value at `path` is encrypted (sops.go, `shouldBeEncrypted`, without the
    /// comment rules, which are refused).
    fn encrypts(&self, path: &[String]) -> bool {
        let mut encrypted = true;
        if let Some(suffix) = &self.unencrypted_suffix {
            if path.iter().any(|p| p.ends_with(suffix.as_str())) {
                encrypted = false;
            }
        }
        if let Some(suffix) = &self.encrypted_suffix {
            encrypted = path.iter().any(|p| p.ends_with(suffix.as_str()));
        }
        if let Some(re) = &self.unencrypted_regex {
            if path.iter().any(|p| re.is_match(p)) {
                encrypted = false;
            }
        }
        if let Some(re) = &self.encrypted_regex {
            encrypted = path.iter().any(|p| re.is_match(p));
        }
        encrypted
    }
}

/// The 32-byte data key, from the first `sops.age` stanza one of `keys` opens.
fn data_key(meta: &Metadata, keys: &AgeIdentities) -> Result<Vec<u8>, SopsError> {
    let recipients: Vec<String> = meta.age.iter().map(|(r, _)| r.clone()).collect();
    if meta.age.is_empty() {
        return Err(SopsError::Unsupported(if meta.other_keys.is_empty() {
            "it names no key that can open it".to_string()
        } else {
            format!("only {} keys can open it", meta.other_keys.join(", "))
        }));
    }
    if keys.is_empty() {
        return Err(SopsError::NoKeys { recipients });
    }
    for (_, enc) in &meta.age {
        let reader = age::armor::ArmoredReader::new(enc.as_bytes());
        let decryptor = age::Decryptor::new(reader)
            .map_err(|e| SopsError::DataKey(format!("not an age file: {e}")))?;
        let identities = keys.identities.iter().map(|i| i as &dyn age::Identity);
        match decryptor.decrypt(identities) {
            Ok(mut stream) => {
                let mut key = Vec::new();
                std::io::Read::read_to_end(&mut stream, &mut key)
                    .map_err(|e| SopsError::DataKey(e.to_string()))?;
                if key.len() != 32 {
                    return Err(SopsError::DataKey(format!(
                        "it is {} bytes long, not 32",
                        key.len()
                    )));
                }
                return Ok(key);
            }
            Err(age::DecryptError::NoMatchingKeys) => continue,
            Err(e) => return Err(SopsError::DataKey(e.to_string())),
        }
    }
    Err(SopsError::WrongKeys {
        given: keys.len(),
        recipients,
    })
}

/// One `ENC[AES256_GCM,…]` value opened with `key` and `aad`: its plaintext and its type.
fn open_value(enc: &str, key: &[u8], aad: &str) -> Result<(Vec<u8>, String), String> {
    use base64::Engine;
    let inner = enc
        .strip_prefix("ENC[AES256_GCM,")
        .and_then(|s| s.strip_suffix(']'))
        .ok_or("not a SOPS-encrypted value (ENC[AES256_GCM,…])")?;
    let mut parts = [("data:", ""), ("iv:", ""), ("tag:", ""), ("type:", "")];
    let mut rest = inner;
    for (i, (name, value)) in parts.iter_mut().enumerate() {
        let field = if i == 3 {
            rest
        } else {
            let end = rest.find(',').ok_or("not a SOPS-encrypted value")?;
            let field = &rest[..end];
            rest = &rest[end + 1..];
            field
        };
        *value = field
            .strip_prefix(*name)
            .ok_or_else(|| format!("no {name} field"))?;
    }
    let b64 = |s: &str, what: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| format!("its {what} is not base64: {e}"))
    };
    let mut data = b64(parts[0].1, "data")?;
    let iv = b64(parts[1].1, "iv")?;
    let tag = b64(parts[2].1, "tag")?;
    if iv.len() != 32 || tag.len() != 16 {
        return Err(format!(
            "its iv is {} bytes and its tag {} (sops writes 32 and 16)",
            iv.len(),
            tag.len()
        ));
    }
    data.extend_from_slice(&tag);
    let cipher = Cipher::new_from_slice(key).map_err(|_| "the data key is not 32 bytes")?;
    let nonce = aes_gcm::aead::generic_array::GenericArray::from_slice(&iv);
    let plain = cipher
        .decrypt(
            nonce,
            Payload {
                msg: &data,
                aad: aad.as_bytes(),
            },
        )
        .map_err(|_| {
            "authentication failed (a wrong data key, or the value or its path changed)"
        })?;
    Ok((plain, parts[3].1.to_string()))
}

/// The walk over the documents that decrypts and hashes, in document order (sops.go,
/// `Tree.Decrypt`): list items share their list's path; nulls are neither decrypted nor hashed.
struct Walk<'a> {
    meta: &'a Metadata,
    key: &'a [u8],
    hash: sha2::Sha512,
    path: Vec<String>,
}

impl Walk<'_> {
    fn value(&mut self, value: &mut Value) -> Result<(), SopsError> {
        match value {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    self.path.push(k.clone());
                    let r = self.value(v);
                    self.path.pop();
                    r?;
                }
                Ok(())
            }
            Value::Array(items) => items.iter_mut().try_for_each(|v| self.value(v)),
            Value::Null => Ok(()),
            leaf => self.leaf(leaf),
        }
    }

    fn leaf(&mut self, leaf: &mut Value) -> Result<(), SopsError> {
        let field = || {
            if self.path.is_empty() {
                "(root)".to_string()
            } else {
                self.path.join(".")
            }
        };
        if !self.meta.encrypts(&self.path) {
            if !self.meta.mac_only_encrypted {
                self.hash.update(plain_bytes(leaf));
            }
            return Ok(());
        }
        let Value::String(enc) = leaf else {
            return Err(SopsError::Value {
                field: field(),
                message: "it is not encrypted, though the file's rules say it should be".into(),
            });
        };
        // sops writes an empty string as it is.
        if enc.is_empty() {
            return Ok(());
        }
        let aad = format!("{}:", self.path.join(":"));
        let (plain, kind) =
            open_value(enc, self.key, &aad).map_err(|message| SopsError::Value {
                field: field(),
                message,
            })?;
        self.hash.update(&plain);
        let text = String::from_utf8(plain);
        let bad_type = |kind: &str| SopsError::Value {
            field: field(),
            message: format!("its decrypted value is not a valid {kind}"),
        };
        *leaf = match (kind.as_str(), text) {
            ("str" | "time", Ok(s)) => Value::String(s),
            ("bytes", Ok(s)) => Value::String(s),
            ("bytes", Err(e)) => Value::String(String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ("int", Ok(s)) => s
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| s.parse::<u64>().map(Value::from))
                .map_err(|_| bad_type("int"))?,
            ("float", Ok(s)) => s
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| bad_type("float"))?,
            ("bool", Ok(s)) => match s.as_str() {
                "True" | "true" | "TRUE" | "t" | "T" | "1" => Value::Bool(true),
                "False" | "false" | "FALSE" | "f" | "F" | "0" => Value::Bool(false),
                _ => return Err(bad_type("bool")),
            },
            (kind @ ("str" | "time" | "int" | "float" | "bool"), Err(_)) => {
                return Err(bad_type(kind))
            }
            (other, _) => {
                return Err(SopsError::Value {
                    field: field(),
                    message: format!("unknown value type {other:?}"),
                })
            }
        };
        Ok(())
    }
}

/// A value left in clear as sops hashes it (sops.go, `ToBytes`): Go's formatting of numbers
/// and `True`/`False`.
fn plain_bytes(leaf: &Value) -> Vec<u8> {
    match leaf {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Bool(true) => b"True".to_vec(),
        Value::Bool(false) => b"False".to_vec(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string().into_bytes(),
            (_, Some(u), _) => u.to_string().into_bytes(),
            // Rust's Display of f64, like Go's FormatFloat(f, 'f', -1, 64), is the shortest
            // text that reads back the same, without an exponent.
            (_, _, Some(f)) => f.to_string().into_bytes(),
            _ => n.to_string().into_bytes(),
        },
        Value::Null | Value::Array(_) | Value::Object(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
