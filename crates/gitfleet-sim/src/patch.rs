//! Non-apply patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge
//! patch as kubectl sends it for built-in kinds (`kubectl patch`, `label`, `edit`, `set`, ...).
//!
//! Strategic merge patch here: maps merge as in a merge patch; the well-known associative lists
//! (see [`super::fields::list_keys`]) merge item by key and honour `$patch: delete` and
//! `$patch: replace` items; `$setElementOrder/…`, `$retainKeys` and `$deleteFromPrimitiveList/…`
//! directives are understood (the order directive is ignored); every other list is replaced.

use serde_json::{Map, Value};

use super::fields::{item_key, list_keys};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Apply,
    Merge,
    Json,
    Strategic,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            _ => None,
        }
    }
}

/// Why a patch was not applied; the API server answers the two differently.
#[derive(Debug, Clone, PartialEq)]
pub enum PatchError {
    /// The patch itself is malformed (400).
    Malformed(String),
    /// A well-formed JSON patch that does not apply to the object: a failed `test`, a path
    /// that is not there (422).
    NotApplicable(String),
}

impl From<String> for PatchError {
    fn from(message: String) -> Self {
        PatchError::Malformed(message)
    }
}

impl From<&str> for PatchError {
    fn from(message: &str) -> Self {
        PatchError::Malformed(message.to_string())
    }
}

/// Applies a non-apply patch to `doc`.
pub fn patch(doc: &Value, kind: PatchType, body: &Value) -> Result<Value, PatchError> {
    let mut out = doc.clone();
    match kind {
        PatchType::Merge => {
            if !body.is_object() {
                return Err("merge patch body must be a JSON object".into());
            }
            json_patch::merge(&mut out, body);
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(body.clone())
                .map_err(|e| format!("invalid JSON patch: {e}"))?;
            json_patch::patch(&mut out, &ops)
                .map_err(|e| PatchError::NotApplicable(e.to_string()))?;
        }
        PatchType::Strategic => {
            if !body.is_object() {
                return Err("strategic merge patch body must be a JSON object".into());
            }
            strategic_merge(&mut out, body);
        }
        PatchType::Apply => {
            return Err(PatchError::Malformed(
                "apply patches are not handled here".into(),
            ))
        }
    }
    Ok(out)
}

fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut clean = p.clone();
        clean.shift_remove("$patch");
        *target = Value::Object(clean);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("made an object above");
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()) || p.contains_key(k));
    }
    for (k, pv) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (t.get_mut(field), pv) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if pv.is_null() {
            t.shift_remove(k);
            continue;
        }
        match (t.get_mut(k), pv) {
            (Some(tv @ Value::Object(_)), Value::Object(_)) => strategic_merge(tv, pv),
            (Some(Value::Array(ta)), Value::Array(pa)) => {
                let plain: Vec<Value> = pa
                    .iter()
                    .filter(|i| i.get("$patch").is_none())
                    .cloned()
                    .collect();
                match list_keys(k, &plain) {
                    Some(keys) if !pa.is_empty() => merge_list(ta, pa, &keys),
                    _ => {
                        if pa
                            .iter()
                            .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
                        {
                            *ta = plain;
                        } else {
                            *ta = pa.clone();
                        }
                    }
                }
            }
            (_, pv) => {
                let mut clean = pv.clone();
                strip_directives(&mut clean);
                t.insert(k.clone(), clean);
            }
        }
    }
}

fn merge_list(target: &mut Vec<Value>, patch: &[Value], keys: &[&str]) {
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *target = patch
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        return;
    }
    for item in patch {
        let key = item_key(item, keys);
        let pos = target.iter().position(|t| item_key(t, keys) == key);
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = pos {
                target.remove(i);
            }
            continue;
        }
        match pos {
            Some(i) => strategic_merge(&mut target[i], item),
            None => {
                let mut clean = item.clone();
                strip_directives(&mut clean);
                target.push(clean);
            }
        }
    }
}

/// Drops strategic-merge directives (`$patch`, `$setElementOrder/…`, `$retainKeys`, …).
pub(super) fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_removes_fields() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "y"}});
        let out = patch(
            &doc,
            PatchType::Merge,
            &json!({"metadata": {"labels": {"a": null, "c": "3"}}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(out["data"], json!({"x": "y"}));
    }

    #[test]
    fn json_patch_applies_operations() {
        let doc = json!({"spec": {"replicas": 1}});
        let out = patch(
            &doc,
            PatchType::Json,
            &json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
        )
        .unwrap();
        assert_eq!(out["spec"]["replicas"], 3);
        assert!(patch(
            &doc,
            PatchType::Json,
            &json!([{"op": "remove", "path": "/nope"}])
        )
        .is_err());
    }

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let doc = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}});
        let p = json!({
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "spec": {"containers": [{"name": "b", "image": "3"}, {"name": "a", "$patch": "delete"}]}
        });
        let out = patch(&doc, PatchType::Strategic, &p).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "b", "image": "3"}])
        );
        // Unkeyed lists are replaced.
        let out = patch(
            &json!({"args": ["x"]}),
            PatchType::Strategic,
            &json!({"args": ["y"]}),
        )
        .unwrap();
        assert_eq!(out["args"], json!(["y"]));
    }

    #[test]
    fn content_types_map_to_patch_types() {
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Some(PatchType::Apply)
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }
}
