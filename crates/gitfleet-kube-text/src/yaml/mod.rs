//! YAML, read as Kubernetes reads it and written so that Kubernetes reads it back the same.
//! Every YAML gitfleet reads or writes goes through this module: manifests of a commit, fleet,
//! inventory and price files, the kubeconfig naming the members, request bodies of the
//! simulator, `-o yaml` outputs, tests.
//!
//! kubectl, client-go and the API server read YAML through sigs.k8s.io/yaml: go-yaml v2 (YAML
//! 1.1 scalars: `yes` is true, `0755` is 493), then a conversion to JSON. `resolve` holds
//! those rules, `read` builds JSON values from granit-parser's events (a YAML 1.2 parser with
//! positions and scalar styles; the resolution is ours), and [`Positions`] keeps the line of
//! every value for diagnostics. Writing ([`to_string`]) uses serde-saphyr, which quotes every
//! string a YAML 1.1 reader would take for something else (`"yes"`, `"0755"`, `"1:30"`).
//!
//! Pure: text in, values out; it knows nothing of Kubernetes objects beyond how their YAML is
//! read.

mod coerce;
mod positions;
mod read;
mod resolve;

pub use positions::Positions;
pub use read::{stream, Document, DocumentError};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// A YAML text that could not be read (or a value that could not be written), with the line
/// (1-based) of the problem when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct Error {
    pub line: Option<usize>,
    pub message: String,
}

impl Error {
    fn at(line: usize, message: impl Into<String>) -> Self {
        Error {
            line: Some(line),
            message: message.into(),
        }
    }
}

/// `bytes` as text: UTF-8 (a leading byte-order mark dropped), or an error naming the line and
/// column of the first byte that is not.
pub fn text(bytes: &[u8]) -> Result<&str, Error> {
    match std::str::from_utf8(bytes) {
        Ok(t) => Ok(t.strip_prefix('\u{feff}').unwrap_or(t)),
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
            let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            // Columns count characters, as editors show them.
            let column = String::from_utf8_lossy(&valid[line_start..])
                .chars()
                .count()
                + 1;
            Err(Error::at(
                line,
                format!(
                    "not valid UTF-8 (byte 0x{:02x} at column {column})",
                    bytes[e.valid_up_to()]
                ),
            ))
        }
    }
}

/// The non-empty documents of a YAML stream, as JSON values; the first problem as an error.
pub fn documents(text: &str) -> Result<Vec<Value>, Error> {
    let (docs, errors) = stream(text);
    if let Some(e) = errors.into_iter().next() {
        return Err(Error::at(e.line, e.message));
    }
    Ok(docs
        .into_iter()
        .map(|d| d.value)
        .filter(|v| !v.is_null())
        .collect())
}

/// The single document of `text` with its positions (null for an empty text).
fn single(text: &str) -> Result<(Value, Positions), Error> {
    let (docs, errors) = stream(text);
    if let Some(e) = errors.into_iter().next() {
        return Err(Error::at(e.line, e.message));
    }
    let mut docs = docs.into_iter().filter(|d| !d.value.is_null());
    match (docs.next(), docs.next()) {
        (None, _) => Ok((Value::Null, Positions::default())),
        (Some(d), None) => Ok((d.value, d.positions)),
        (Some(_), Some(second)) => Err(Error::at(
            second.line,
            "a second YAML document where one is expected",
        )),
    }
}

/// One YAML document read into `T` as sigs.k8s.io/yaml's `Unmarshal` reads it: YAML to JSON as
/// Kubernetes does, then into `T`, a number or boolean becoming its text where `T` wants a
/// string. An error names the line and the field.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let (value, positions) = single(text)?;
    deserialize(&value, &positions)
}

/// Every non-empty document of `text`, each read into `T` as [`from_str`] reads one.
pub fn all_from_str<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, Error> {
    let (docs, errors) = stream(text);
    if let Some(e) = errors.into_iter().next() {
        return Err(Error::at(e.line, e.message));
    }
    docs.iter()
        .filter(|d| !d.value.is_null())
        .map(|d| deserialize(&d.value, &d.positions))
        .collect()
}

fn deserialize<T: DeserializeOwned>(value: &Value, positions: &Positions) -> Result<T, Error> {
    serde_path_to_error::deserialize(coerce::Coercing(value)).map_err(|e| {
        let path = e.path().to_string();
        let line = positions
            .line(value, &path)
            .or_else(|| positions.root_line());
        let message = clean_serde_message(&e.into_inner().to_string());
        let message = if path == "." {
            message
        } else {
            format!("{path}: {message}")
        };
        Error { line, message }
    })
}

/// [`from_str`] on bytes, which must be UTF-8.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    from_str(text(bytes)?)
}

/// serde_json's messages end with " at line L column C", meaningless for a value.
fn clean_serde_message(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// `value` as one YAML document, block style, strings quoted wherever a YAML 1.1 or 1.2 reader
/// would take them for something else, so kubectl and gitfleet read back the same value.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, Error> {
    serde_saphyr::to_string(value).map_err(|e| Error {
        line: None,
        message: format!("cannot write YAML: {e}"),
    })
}

/// The positions of a JSON text read as YAML (JSON is YAML), for locating fields of a `.json`
/// file whose `value` serde_json read; empty when the two readings do not fit each other.
pub fn json_positions(text: &str, value: &Value) -> Positions {
    let (docs, errors) = stream(text);
    match (errors.is_empty(), docs.as_slice()) {
        (true, [doc]) if doc.positions.nodes.len() == positions::count(value) => Positions {
            nodes: doc.positions.nodes.clone(),
            spellings: Vec::new(),
            yaml: false,
        },
        _ => Positions::default(),
    }
}

#[cfg(test)]
mod tests;
