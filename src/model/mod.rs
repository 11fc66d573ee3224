//! Typed API objects gitfleet accepts unchanged from KubeFleet and OCM, with their defaults and the
//! API-server/webhook validation rules. Pure: no I/O, no knowledge of git or clusters.

pub mod envelope;
pub mod member;
pub mod metadata;
pub mod object;
pub mod ocm;
pub mod overrides;
pub mod placement;
pub mod placement_key;
pub use gitfleet_kube_text::quantity;
pub mod scope;
pub mod selector;
pub mod staged;
#[cfg(test)]
mod testing;
pub mod work;

pub use object::{Gvk, Object, ObjectKey, Origin};
pub use placement_key::{PlacementKey, PlacementKind};
pub use selector::{LabelSelector, Labels};

/// One validation problem inside an object: the field path (`spec.policy.numberOfClusters`) and
/// what is wrong with it. The catalog adds file, line and object identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl Problem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Collects problems under a common field prefix.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem::new(field, message));
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Is `s` a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.', alphanumeric at both ends)?
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Is `s` a DNS-1123 label (≤ 63, lowercase alphanumerics and '-')?
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && !s.contains('.') && is_dns1123_subdomain(s)
}

/// Is `s` a valid label value (≤ 63, alphanumerics, '-', '_', '.', alphanumeric at both ends, or empty)?
pub fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric())
}

/// Is `s` a qualified name (`[prefix/]name`, prefix a DNS subdomain, name like a label value but non-empty)?
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    prefix.is_none_or(is_dns1123_subdomain) && !name.is_empty() && is_label_value(name)
}

/// Decodes a JSON value into a typed API object, as a strict API server would: unknown fields and
/// wrong types are problems that name the field path (`spec.policy.placementType`).
pub fn decode<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        Problem::new(field, clean_serde_message(&e.into_inner().to_string()))
    })
}

/// serde_json's messages end with " at line L column C", meaningless for a `Value` input.
fn clean_serde_message(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// A typed API object: it decodes strictly and knows its own validation rules.
pub trait ApiObject: serde::de::DeserializeOwned {
    /// Every rule the API server, its CEL rules and the admission webhooks enforce for this object
    /// on its own (cross-object rules live in the catalog).
    fn validate(&self) -> Vec<Problem>;
}

/// Decode then validate: `Ok` with the typed object, or every problem found.
pub fn decode_valid<T: ApiObject>(value: &serde_json::Value) -> Result<T, Vec<Problem>> {
    let typed: T = decode(value).map_err(|p| vec![p])?;
    let problems = typed.validate();
    if problems.is_empty() {
        Ok(typed)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_dns1123_subdomain("a.b-c"));
        assert!(!is_dns1123_subdomain("A"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(is_dns1123_label("abc-1"));
        assert!(!is_dns1123_label("a.b"));
        assert!(is_label_value(""));
        assert!(is_label_value("v1.2_x"));
        assert!(!is_label_value("-x"));
        assert!(is_qualified_name("kubernetes-fleet.io/member-name"));
        assert!(!is_qualified_name("a/"));
        assert!(!is_qualified_name("Bad Prefix/x"));
    }
}
