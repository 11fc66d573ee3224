//! What gitfleet adds to every object it applies (docs/guides/concepts.md): the managed-by and placement
//! labels, and the snapshot, commit and spec-hash annotations. Pure.

use crate::snapshot::hash_value;
use serde_json::{Map, Value};

pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "gitfleet";
pub const PLACEMENT_LABEL: &str = "gitfleet.io/placement";
pub const SNAPSHOT_ANNOTATION: &str = "gitfleet.io/resource-snapshot";
pub const COMMIT_ANNOTATION: &str = "gitfleet.io/commit";
pub const SPEC_HASH_ANNOTATION: &str = "gitfleet.io/spec-hash";
/// ClientSideApply's memory of what gitfleet last applied (KubeFleet keeps the same in
/// `kubernetes-fleet.io/last-applied-configuration`).
pub const LAST_APPLIED_ANNOTATION: &str = "gitfleet.io/last-applied";
/// The field manager of every write gitfleet makes.
pub const FIELD_MANAGER: &str = "gitfleet";

/// sha256 of the manifest as rendered: changes exactly when git changes what is delivered.
pub fn spec_hash(manifest: &Value) -> String {
    hash_value(manifest)
}

/// Stamps passed to [`decorate`].
#[derive(Debug, Clone)]
pub struct Stamp<'a> {
    pub placement_label: &'a str,
    pub resource_snapshot: &'a str,
    pub commit: &'a str,
}

/// The manifest with gitfleet's labels and annotations added.
pub fn decorate(manifest: &Value, stamp: &Stamp) -> Value {
    let mut v = manifest.clone();
    let hash = spec_hash(manifest);
    let labels = object_at(&mut v, "metadata", "labels");
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    labels.insert(PLACEMENT_LABEL.into(), stamp.placement_label.into());
    let annotations = object_at(&mut v, "metadata", "annotations");
    annotations.insert(SNAPSHOT_ANNOTATION.into(), stamp.resource_snapshot.into());
    annotations.insert(COMMIT_ANNOTATION.into(), stamp.commit.into());
    annotations.insert(SPEC_HASH_ANNOTATION.into(), hash.into());
    v
}

/// `v[outer][inner]` as an object, created (or replaced when not an object) on the way.
pub(crate) fn object_at<'a>(
    v: &'a mut Value,
    outer: &str,
    inner: &str,
) -> &'a mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    let map = v.as_object_mut().expect("made an object above");
    child(child(map, outer), inner)
}

fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("made an object above")
}

/// The placement label value on a live object, if any.
pub fn placement_label_of(obj: &Value) -> Option<&str> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(PLACEMENT_LABEL))
        .and_then(Value::as_str)
}

/// An annotation of a live object.
pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decorate_adds_labels_and_annotations_and_keeps_the_rest() {
        let m = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"app": "web"}}, "data": {"a": "1"}});
        let d = decorate(
            &m,
            &Stamp {
                placement_label: "crp.web",
                resource_snapshot: "abc",
                commit: "c0ffee",
            },
        );
        assert_eq!(d["metadata"]["labels"]["app"], "web");
        assert_eq!(d["metadata"]["labels"][MANAGED_BY_LABEL], "gitfleet");
        assert_eq!(d["metadata"]["labels"][PLACEMENT_LABEL], "crp.web");
        assert_eq!(d["metadata"]["annotations"][COMMIT_ANNOTATION], "c0ffee");
        assert_eq!(
            d["metadata"]["annotations"][SPEC_HASH_ANNOTATION],
            spec_hash(&m)
        );
        assert_eq!(d["data"], m["data"]);
        assert_eq!(placement_label_of(&d), Some("crp.web"));
    }
}
