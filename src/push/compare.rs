//! Comparing what git wants with what a member has (KubeFleet's work applier): diffs as JSON paths with
//! the member's and git's values, for drift, takeover and ReportDiff; and ClientSideApply's
//! three-way merge patch. Pure.

use serde::Serialize;
use serde_json::{Map, Value};

/// At most this many differences are reported per object (as KubeFleet does).
pub const MAX_DIFFS: usize = 100;

/// One difference: the JSON pointer, the member's value and git's value (absent = missing).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Value>,
}

/// Which fields count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// Only the fields the manifest sets (KubeFleet's PartialComparison).
    Partial,
    /// Every field, also those only the member has (FullComparison).
    Full,
}

/// Strips what never counts as a difference: identity, server-set metadata, status, and the
/// labels and annotations of Kubernetes, KubeFleet and gitfleet itself.
pub fn comparable(obj: &Value) -> Value {
    let mut v = obj.clone();
    let Some(map) = v.as_object_mut() else {
        return v;
    };
    map.remove("status");
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "name",
            "namespace",
            "generateName",
            "finalizers",
            "managedFields",
            "ownerReferences",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
            "selfLink",
            "uid",
            "creationTimestamp",
        ] {
            meta.remove(k);
        }
        for field in ["labels", "annotations"] {
            if let Some(m) = meta.get_mut(field).and_then(Value::as_object_mut) {
                m.retain(|k, _| !ignored_key(k));
                if m.is_empty() {
                    meta.remove(field);
                }
            }
        }
        if meta.is_empty() {
            map.remove("metadata");
        }
    }
    strip_creation_timestamps(&mut v);
    v
}

fn ignored_key(k: &str) -> bool {
    k.contains("kubernetes.io/")
        || k.contains("k8s.io/")
        || k.contains("kubernetes-fleet.io/")
        || k.starts_with("gitfleet.io/")
        || k == super::decorate::MANAGED_BY_LABEL
}

fn strip_creation_timestamps(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("creationTimestamp");
            m.values_mut().for_each(strip_creation_timestamps);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_creation_timestamps),
        _ => {}
    }
}

/// The differences between `desired` (git) and `observed` (the member), both already
/// [`comparable`]. Partial: only the leaves `desired` sets; arrays of equal length are compared
/// item by item (so server defaults inside items do not count), else as a whole.
pub fn diff(desired: &Value, observed: Option<&Value>, how: Comparison) -> Vec<Diff> {
    let Some(observed) = observed else {
        return vec![Diff {
            path: "/".into(),
            observed: None,
            desired: Some(Value::String("(the whole object)".into())),
        }];
    };
    let mut out = Vec::new();
    walk(desired, observed, String::new(), how, &mut out);
    out.truncate(MAX_DIFFS);
    out
}

/// Whether [`diff`] (partial) would find no difference, without building one: a re-check of
/// an unchanged fleet asks this of every object it confirms.
pub fn holds_partial(desired: &Value, observed: &Value) -> bool {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => d
            .iter()
            .all(|(k, dv)| o.get(k).is_some_and(|ov| holds_partial(dv, ov))),
        (Value::Array(d), Value::Array(o)) if d.len() == o.len() => {
            d.iter().zip(o).all(|(dv, ov)| holds_partial(dv, ov))
        }
        _ => desired == observed,
    }
}

fn walk(desired: &Value, observed: &Value, path: String, how: Comparison, out: &mut Vec<Diff>) {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => {
            for (k, dv) in d {
                let p = format!("{path}/{}", escape(k));
                match o.get(k) {
                    Some(ov) => walk(dv, ov, p, how, out),
                    None => out.push(Diff {
                        path: p,
                        observed: None,
                        desired: Some(dv.clone()),
                    }),
                }
            }
            if how == Comparison::Full {
                for (k, ov) in o {
                    if !d.contains_key(k) {
                        out.push(Diff {
                            path: format!("{path}/{}", escape(k)),
                            observed: Some(ov.clone()),
                            desired: None,
                        });
                    }
                }
            }
        }
        (Value::Array(d), Value::Array(o)) if d.len() == o.len() => {
            for (i, (dv, ov)) in d.iter().zip(o).enumerate() {
                walk(dv, ov, format!("{path}/{i}"), how, out);
            }
        }
        _ if desired == observed => {}
        _ => out.push(Diff {
            path: if path.is_empty() { "/".into() } else { path },
            observed: Some(observed.clone()),
            desired: Some(desired.clone()),
        }),
    }
}

fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// Masks Secret values in diffs (KubeFleet obscures `data`/`stringData`).
pub fn obscure_secret(kind: &str, diffs: &mut [Diff]) {
    if kind != "Secret" {
        return;
    }
    for d in diffs {
        if d.path.starts_with("/data") || d.path.starts_with("/stringData") {
            let mask = |v: &mut Option<Value>| {
                if v.is_some() {
                    *v = Some(Value::String("(hidden)".into()));
                }
            };
            mask(&mut d.observed);
            mask(&mut d.desired);
        }
    }
}

/// ClientSideApply's three-way JSON merge patch: from `current` (the member) to `modified`
/// (git now), removing what `original` (git last time) set and `modified` no longer does.
/// Fields only others set are kept. Lists are replaced whole, as JSON merge patch does.
pub fn three_way_patch(original: Option<&Value>, modified: &Value, current: &Value) -> Value {
    let empty = Map::new();
    let orig = original.and_then(Value::as_object).unwrap_or(&empty);
    let (Some(m), Some(c)) = (modified.as_object(), current.as_object()) else {
        return modified.clone();
    };
    let mut patch = Map::new();
    for (k, mv) in m {
        match (mv, c.get(k)) {
            (Value::Object(_), Some(cv @ Value::Object(_))) => {
                let sub = three_way_patch(orig.get(k), mv, cv);
                if sub.as_object().is_some_and(|s| !s.is_empty()) {
                    patch.insert(k.clone(), sub);
                }
            }
            (_, Some(cv)) if cv == mv => {}
            _ => {
                patch.insert(k.clone(), mv.clone());
            }
        }
    }
    for k in orig.keys() {
        if !m.contains_key(k) && c.contains_key(k) {
            patch.insert(k.clone(), Value::Null);
        }
    }
    Value::Object(patch)
}

/// Only the removals (`null`s) of a merge patch, with the objects that lead to them; `None`
/// when it removes nothing.
pub fn removals(patch: &Value) -> Option<Value> {
    match patch {
        Value::Null => Some(Value::Null),
        Value::Object(map) => {
            let kept: Map<String, Value> = map
                .iter()
                .filter_map(|(k, v)| match v {
                    Value::Null | Value::Object(_) => removals(v).map(|r| (k.clone(), r)),
                    _ => None,
                })
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `holds_partial` answers what an empty partial diff answers, on every pair of a set of
    /// values that differ in each way `walk` tells apart.
    #[test]
    fn holds_partial_is_an_empty_partial_diff() {
        let values = [
            json!(null),
            json!(1),
            json!("a"),
            json!([]),
            json!([1]),
            json!([1, 2]),
            json!([{"a": 1}]),
            json!([{"a": 1, "b": 2}]),
            json!({}),
            json!({"a": 1}),
            json!({"a": 2}),
            json!({"a": 1, "b": {"c": [1, {"d": "e"}]}}),
            json!({"a": 1, "b": {"c": [1, {"d": "f"}]}}),
            json!({"a": 1, "b": {"c": [1, {"d": "e", "x": 0}], "y": 0}, "z": 0}),
            json!({"b": {"c": [1]}}),
        ];
        for d in &values {
            for o in &values {
                assert_eq!(
                    holds_partial(d, o),
                    diff(d, Some(o), Comparison::Partial).is_empty(),
                    "desired {d}, observed {o}"
                );
            }
        }
    }

    #[test]
    fn partial_diff_sees_only_what_git_sets() {
        let desired = json!({"spec": {"replicas": 3, "template": {"containers": [{"name": "a", "image": "x:2"}]}}});
        let observed = json!({"spec": {"replicas": 5, "paused": false,
            "template": {"containers": [{"name": "a", "image": "x:1", "imagePullPolicy": "Always"}]}}});
        let d = diff(&desired, Some(&observed), Comparison::Partial);
        let paths: Vec<&str> = d.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/spec/replicas", "/spec/template/containers/0/image"]
        );
        assert_eq!(d[0].observed, Some(json!(5)));
        assert_eq!(d[0].desired, Some(json!(3)));
        let full = diff(&desired, Some(&observed), Comparison::Full);
        assert!(full
            .iter()
            .any(|d| d.path == "/spec/paused" && d.desired.is_none()));
    }

    #[test]
    fn a_missing_object_is_one_diff_at_the_root() {
        let d = diff(&json!({"a": 1}), None, Comparison::Partial);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "/");
    }

    #[test]
    fn comparable_drops_server_fields_and_reserved_labels() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "u", "resourceVersion": "3",
                "labels": {"app": "x", "gitfleet.io/placement": "crp.a",
                    "app.kubernetes.io/managed-by": "gitfleet"},
                "annotations": {"gitfleet.io/commit": "c"}},
            "status": {"x": 1}, "data": {"a": "1"}});
        assert_eq!(
            comparable(&live),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"labels": {"app": "x"}}, "data": {"a": "1"}})
        );
    }

    #[test]
    fn three_way_removes_what_git_dropped_and_keeps_what_others_added() {
        let original = json!({"data": {"a": "1", "b": "2"}});
        let modified = json!({"data": {"a": "1", "c": "3"}});
        let current = json!({"data": {"a": "1", "b": "2", "other": "x"}});
        assert_eq!(
            three_way_patch(Some(&original), &modified, &current),
            json!({"data": {"c": "3", "b": null}})
        );
        // Nothing to do when the member already matches.
        let same = json!({"data": {"a": "1", "c": "3", "other": "x"}});
        assert_eq!(
            three_way_patch(Some(&modified), &modified, &same),
            json!({})
        );
    }

    #[test]
    fn removals_keep_only_the_nulls_of_a_patch() {
        let patch = json!({"data": {"c": "3", "b": null}, "spec": {"x": 1}, "gone": null});
        assert_eq!(
            removals(&patch),
            Some(json!({"data": {"b": null}, "gone": null}))
        );
        assert_eq!(removals(&json!({"data": {"c": "3"}})), None);
    }

    #[test]
    fn secrets_are_obscured() {
        let mut d = diff(
            &json!({"data": {"k": "bmV3"}}),
            Some(&json!({"data": {"k": "b2xk"}})),
            Comparison::Partial,
        );
        obscure_secret("Secret", &mut d);
        assert_eq!(d[0].observed, Some(json!("(hidden)")));
    }
}
