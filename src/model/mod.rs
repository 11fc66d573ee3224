//! Typed API objects gitfleet accepts unchanged from KubeFleet and OCM, with their defaults and the
//! API-server/webhook validation rules. Pure: no I/O, no knowledge of git or clusters.

pub mod cluster_map;
pub mod cluster_name;
pub mod envelope;
pub mod helm_release;
pub mod member;
pub mod metadata;
pub mod object;
pub mod ocm;
pub mod overrides;
pub mod placement;
pub mod placement_decision;
pub mod placement_key;
pub use gitfleet_kube_text::quantity;
pub mod scope;
pub mod selector;
pub mod shared_text;
pub mod staged;
mod status;
#[cfg(test)]
mod testing;
pub mod work;

pub use cluster_map::ClusterMap;
pub use cluster_name::ClusterName;
pub use object::{Gvk, Object, ObjectKey, Origin};
pub use placement_key::{PlacementKey, PlacementKind};
pub use selector::{LabelSelector, Labels};
pub use shared_text::SharedText;

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
///
/// A `null` in a field is what the API server makes of it: the CRDs declare no field gitfleet
/// types as nullable, and the server prunes a null in a non-nullable field before it applies
/// defaults and validates (apiextensions' `PruneNonNullableNullsWithoutDefaults`), so the field
/// reads as omitted: defaulted when the CRD has a default, a missing required field otherwise.
/// Where the model types a field as a free-form `Value` (a schema that preserves unknown
/// fields), a null stays as written, as it does on the server. Items of a list are not pruned.
pub fn decode<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Result<T, Problem> {
    let mut pruned: Option<serde_json::Value> = None;
    loop {
        let input = pruned.as_ref().unwrap_or(value);
        let err = match serde_path_to_error::deserialize(input) {
            Ok(t) => return Ok(t),
            Err(e) => e,
        };
        // A null the model refuses in an object's field: drop that field and decode again (each
        // round removes one null, so this ends).
        if let Some((parent, key)) = refused_null(input, &err) {
            let mut next = input.clone();
            if let Some(serde_json::Value::Object(map)) = next.pointer_mut(&parent) {
                map.remove(&key);
                pruned = Some(next);
                continue;
            }
        }
        let path = err.path().to_string();
        let field = if path == "." { String::new() } else { path };
        return Err(Problem::new(
            field,
            clean_serde_message(&err.into_inner().to_string()),
        ));
    }
}

/// When `err` is a type error on a `null` that is the value of an object's field, the JSON
/// pointer of that object and the field's name.
fn refused_null(
    input: &serde_json::Value,
    err: &serde_path_to_error::Error<serde_json::Error>,
) -> Option<(String, String)> {
    use serde_path_to_error::Segment;
    // serde's own wording for a value of the wrong type; an unknown field whose value is null
    // stays an unknown field.
    if !err.inner().to_string().starts_with("invalid type: null") {
        return None;
    }
    let segments: Vec<&Segment> = err.path().iter().collect();
    let (Segment::Map { key }, parents) = segments.split_last()? else {
        return None;
    };
    let mut pointer = String::new();
    for s in parents {
        match s {
            Segment::Map { key } => {
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Segment::Seq { index } => pointer.push_str(&format!("/{index}")),
            Segment::Enum { .. } | Segment::Unknown => return None,
        }
    }
    let parent = input.pointer(&pointer)?;
    parent
        .get(key.as_str())
        .filter(|v| v.is_null())
        .map(|_| (pointer, key.clone()))
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

    /// A decoding problem as this kind's diagnostic says it: where gitfleet's types are
    /// stricter than the kind's admission (an enum the CRD does not have), the problem says
    /// whose rule it is.
    fn decode_problem(problem: Problem) -> Problem {
        problem
    }
}

/// Decode then validate: `Ok` with the typed object, or every problem found.
pub fn decode_valid<T: ApiObject>(value: &serde_json::Value) -> Result<T, Vec<Problem>> {
    let typed: T = decode(value).map_err(|p| vec![T::decode_problem(p)])?;
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
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        required: Inner,
        #[serde(default)]
        defaulted: Inner,
        #[serde(default)]
        items: Vec<String>,
        #[serde(default)]
        free: Option<serde_json::Value>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        #[serde(default)]
        n: i32,
    }

    /// apiextensions' `PruneNonNullableNullsWithoutDefaults`: a null in a non-nullable field is
    /// dropped, so the field reads as omitted and takes its default.
    #[test]
    fn null_in_a_field_reads_as_omitted() {
        let got: Outer = decode(&json!({
            "required": {"n": null}, "defaulted": null, "items": null
        }))
        .unwrap();
        assert_eq!(
            got,
            Outer {
                required: Inner { n: 0 },
                defaulted: Inner::default(),
                items: vec![],
                free: None
            }
        );
    }

    /// A required field that is null is pruned, then missing (the server's "Required value").
    #[test]
    fn null_in_a_required_field_is_a_missing_field() {
        let err = decode::<Outer>(&json!({"required": null})).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.message.as_str()),
            ("", "missing field `required`")
        );
    }

    /// Inside a free-form value (a schema that preserves unknown fields) nothing is pruned.
    #[test]
    fn null_inside_a_free_form_value_stays() {
        let got: Outer = decode(&json!({"required": {}, "free": {"a": null}})).unwrap();
        assert_eq!(got.free, Some(json!({"a": null})));
    }

    /// The server prunes nulls of fields, never items of a list, and an unknown field stays
    /// unknown whatever its value.
    #[test]
    fn null_list_items_and_unknown_fields_are_not_pruned() {
        let err = decode::<Outer>(&json!({"required": {}, "items": ["a", null]})).unwrap_err();
        assert_eq!(err.field, "items[1]");
        assert!(err.message.starts_with("invalid type: null"), "{err:?}");
        let err = decode::<Outer>(&json!({"required": {}, "other": null})).unwrap_err();
        assert_eq!(err.field, "other");
        assert!(err.message.starts_with("unknown field `other`"), "{err:?}");
    }

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
