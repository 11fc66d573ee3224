//! Server-side apply and field ownership: merging an applied configuration into the live object,
//! removing fields a manager stopped applying, detecting conflicts with other managers, and
//! keeping `metadata.managedFields` up to date for every write. Pure functions over JSON.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::fields::{
    item_key, list_keys, path_string, remove_at, value_at, FieldPath, FieldSet, PathElement,
};

/// Metadata fields that no manager owns.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedEntry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl ManagedEntry {
    fn same_identity(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    /// How a conflict message names this manager, as the API server does.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s = format!("{s} with subresource {sub:?}");
        }
        if self.operation == "Update" {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// Who writes and how.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    /// `Some("status")` for writes through the status subresource.
    pub subresource: Option<&'a str>,
    /// Built-in kind: well-known lists merge by key.
    pub associative: bool,
    pub now: &'a str,
}

pub fn read_entries(obj: &Value) -> Vec<ManagedEntry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| ManagedEntry {
                    manager: e["manager"].as_str().unwrap_or_default().into(),
                    operation: e["operation"].as_str().unwrap_or("Update").into(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().into(),
                    time: e["time"].as_str().unwrap_or_default().into(),
                    subresource: e["subresource"].as_str().map(String::from),
                    fields: FieldSet::from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn write_entries(obj: &mut Value, entries: &[ManagedEntry]) {
    // In the API server's order (its `sortEncodedManagedFields`): Apply before Update, then by
    // time (whole seconds), manager, apiVersion and subresource.
    let mut sorted: Vec<&ManagedEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let list: Vec<Value> = sorted
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": e.fields.to_fields_v1(),
            });
            if let Some(s) = &e.subresource {
                v["subresource"] = json!(s);
            }
            v
        })
        .collect();
    let meta = obj
        .as_object_mut()
        .and_then(|o| o.get_mut("metadata"))
        .and_then(Value::as_object_mut);
    if let Some(meta) = meta {
        if list.is_empty() {
            meta.shift_remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// What a manager owns in `obj`: everything but type, identity and server-maintained metadata;
/// with `subresource` `status`, only `status`; without it, `status` is left out when the resource
/// has a status subresource (`drop_status`).
/// Map fields of built-in kinds (string-keyed maps in their OpenAPI schemas, not structs).
const BUILT_IN_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "data",
    "binaryData",
    "stringData",
    "nodeSelector",
    "requests",
    "limits",
    "capacity",
    "allocatable",
    "parameters",
];

/// The maps above the `changed` paths that the write created (absent before it). In built-in
/// kinds the maps of [`BUILT_IN_MAPS`] (and a Service's `selector`, a map of strings); in
/// custom resources, whose schema the server deduces as maps throughout, every object outside
/// `metadata` (and its labels and annotations).
fn created_maps(
    changed: &[FieldPath],
    old: Option<&Value>,
    new: &Value,
    built_in: bool,
) -> Vec<FieldPath> {
    let is_map = |q: &[PathElement], v: &Value| -> bool {
        let Some(PathElement::Field(name)) = q.last() else {
            return false;
        };
        if !v.is_object() || q.iter().any(|e| !matches!(e, PathElement::Field(_))) {
            return false;
        }
        let in_metadata = matches!(q.first(), Some(PathElement::Field(f)) if f == "metadata");
        let metadata_map =
            in_metadata && q.len() == 2 && (name == "labels" || name == "annotations");
        if built_in {
            BUILT_IN_MAPS.contains(&name.as_str()) && (!in_metadata || metadata_map)
                || (name == "selector"
                    && v.as_object()
                        .is_some_and(|m| m.values().all(Value::is_string)))
        } else {
            !in_metadata || metadata_map
        }
    };
    let mut out = BTreeSet::new();
    for p in changed {
        for len in 1..p.len() {
            let q = &p[..len];
            let Some(v) = value_at(new, q) else { continue };
            if is_map(q, v) && old.is_none_or(|o| value_at(o, q).is_none()) {
                out.insert(q.to_vec());
            }
        }
    }
    out.into_iter().collect()
}

pub fn ownable(obj: &Value, subresource: Option<&str>, drop_status: bool) -> Value {
    let Value::Object(map) = obj else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for (k, v) in map {
        match (k.as_str(), subresource) {
            ("status", Some("status")) => {
                out.insert(k.clone(), v.clone());
            }
            (_, Some("status")) => {}
            ("apiVersion" | "kind", _) => {}
            ("status", None) if drop_status => {}
            ("metadata", None) => {
                if let Value::Object(meta) = v {
                    let kept: Map<String, Value> = meta
                        .iter()
                        .filter(|(mk, _)| !SERVER_METADATA.contains(&mk.as_str()))
                        .map(|(mk, mv)| (mk.clone(), mv.clone()))
                        .collect();
                    if !kept.is_empty() {
                        out.insert(k.clone(), Value::Object(kept));
                    }
                }
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The manager as conflict messages name it (`"other"`, `"kubectl-edit" using v1`).
    pub manager: String,
    /// `.data.key`
    pub field: String,
}

/// Applies `config` (already reduced by [`ownable`]) by `writer` onto `live` (the current object,
/// or a bare new object) and returns the merged object with updated managed fields.
pub fn apply(
    live: &Value,
    config: &Value,
    writer: &Writer,
    force: bool,
) -> Result<Value, Vec<Conflict>> {
    let mut entries = read_entries(live);
    let applied = FieldSet::of(config, writer.associative);
    let previous = entries
        .iter()
        .find(|e| e.same_identity(writer.manager, "Apply", writer.subresource))
        .map(|e| e.fields.clone())
        .unwrap_or_default();

    // Conflicts: leaves this apply sets to a value other than the live one, owned by others.
    let mut conflicts: Vec<(usize, FieldPath)> = Vec::new();
    for path in &applied.0 {
        if matches!(
            path.last(),
            Some(PathElement::Key(_) | PathElement::Value(_) | PathElement::Index(_))
        ) {
            continue;
        }
        let (Some(want), Some(have)) = (value_at(config, path), value_at(live, path)) else {
            continue;
        };
        if want == have {
            continue;
        }
        for (i, e) in entries.iter().enumerate() {
            if e.same_identity(writer.manager, "Apply", writer.subresource) {
                continue;
            }
            if e.fields.contains(path) {
                conflicts.push((i, path.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts
            .iter()
            .map(|(i, p)| Conflict {
                manager: entries[*i].describe(),
                field: path_string(p),
            })
            .collect());
    }
    for (i, p) in &conflicts {
        entries[*i].fields.0.remove(p);
    }

    let mut merged = live.clone();
    // Fields this manager applied before and no longer does are removed, unless someone else
    // still owns them (or something below them). Shallowest first, so that a list item goes
    // before its fields would be emptied out of it.
    let mut dropped: Vec<&FieldPath> = previous.0.iter().filter(|p| !applied.contains(p)).collect();
    dropped.sort_by_key(|p| p.len());
    for path in dropped {
        let owned_elsewhere = entries.iter().any(|e| {
            !e.same_identity(writer.manager, "Apply", writer.subresource)
                && e.fields.covers_or_below(path)
        });
        if !owned_elsewhere {
            remove_at(&mut merged, path);
        }
    }
    merge_into(&mut merged, config, writer.associative);

    // As kube-apiserver does, an apply that changes nothing (the same object, the same fields)
    // leaves its manager's entry as it was, time and place: the object is not written at all.
    let unchanged = merged == *live
        && entries.iter().any(|e| {
            e.same_identity(writer.manager, "Apply", writer.subresource)
                && e.api_version == writer.api_version
                && e.fields == applied
        });
    if unchanged {
        return Ok(merged);
    }
    entries.retain(|e| !e.same_identity(writer.manager, "Apply", writer.subresource));
    if !applied.is_empty() {
        entries.push(ManagedEntry {
            manager: writer.manager.into(),
            operation: "Apply".into(),
            api_version: writer.api_version.into(),
            time: writer.now.into(),
            subresource: writer.subresource.map(String::from),
            fields: applied,
        });
    }
    write_entries(&mut merged, &entries);
    Ok(merged)
}

/// Records a non-apply write (create, update, patch) by `writer`: it takes ownership of every
/// field it changed, other managers lose those fields, and removed fields leave every set.
/// `old` and `new` are full objects; `new` gets the updated `managedFields`.
pub fn record_update(old: Option<&Value>, new: &mut Value, writer: &Writer, drop_status: bool) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let new_view = ownable(new, writer.subresource, drop_status);
    let old_view = old.map(|o| ownable(o, writer.subresource, drop_status));
    let new_set = FieldSet::of(&new_view, writer.associative);
    let old_set = old_view
        .as_ref()
        .map(|o| FieldSet::of(o, writer.associative))
        .unwrap_or_default();
    let changed: Vec<FieldPath> = new_set
        .0
        .iter()
        .filter(|p| match &old_view {
            None => true,
            Some(o) => value_at(o, p) != value_at(&new_view, p) || !old_set.contains(p),
        })
        .cloned()
        .collect();
    let removed: Vec<FieldPath> = old_set
        .0
        .iter()
        .filter(|p| !new_set.contains(p))
        .cloned()
        .collect();
    if changed.is_empty() && removed.is_empty() && old.is_some() {
        write_entries(new, &entries);
        return;
    }
    // An Update owns the maps it creates themselves too (`"."` in FieldsV1), as the API
    // server's Update field sets do; Apply sets never hold them.
    let mut changed = changed;
    changed.extend(created_maps(
        &changed,
        old_view.as_ref(),
        &new_view,
        writer.associative,
    ));
    for e in &mut entries {
        for p in changed.iter().chain(&removed) {
            e.fields.0.remove(p);
        }
        // A removed list item takes its fields with it.
        e.fields
            .0
            .retain(|p| !removed.iter().any(|r| p.starts_with(r)));
    }
    match entries
        .iter_mut()
        .find(|e| e.same_identity(writer.manager, "Update", writer.subresource))
    {
        Some(e) => {
            e.fields.0.extend(changed);
            e.api_version = writer.api_version.into();
            e.time = writer.now.into();
        }
        None => entries.push(ManagedEntry {
            manager: writer.manager.into(),
            operation: "Update".into(),
            api_version: writer.api_version.into(),
            time: writer.now.into(),
            subresource: writer.subresource.map(String::from),
            fields: FieldSet(changed.into_iter().collect()),
        }),
    }
    write_entries(new, &entries);
}

/// Merges an applied configuration into an object: maps field by field, associative lists item
/// by item, everything else replaced. A `null` removes the field.
pub fn merge_into(target: &mut Value, config: &Value, associative: bool) {
    let (Value::Object(t), Value::Object(c)) = (&mut *target, config) else {
        *target = config.clone();
        return;
    };
    for (k, cv) in c {
        if cv.is_null() {
            t.shift_remove(k);
            continue;
        }
        match t.get_mut(k) {
            Some(tv) => match (tv, cv) {
                (Value::Array(ta), Value::Array(ca)) if associative => {
                    match (list_keys(k, ta), list_keys(k, ca)) {
                        (Some(keys), Some(_)) => merge_list(ta, ca, &keys, associative),
                        _ => *ta = ca.clone(),
                    }
                }
                (tv @ Value::Object(_), Value::Object(_)) => merge_into(tv, cv, associative),
                (tv, cv) => *tv = cv.clone(),
            },
            None => {
                t.insert(k.clone(), cv.clone());
            }
        }
    }
}

fn merge_list(target: &mut Vec<Value>, config: &[Value], keys: &[&str], associative: bool) {
    for item in config {
        let key = item_key(item, keys);
        match target.iter_mut().find(|t| item_key(t, keys) == key) {
            Some(t) => merge_into(t, item, associative),
            None => target.push(item.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2024-05-01T12:00:00Z";

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            api_version: "v1",
            subresource: None,
            associative: true,
            now: NOW,
        }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": data})
    }

    fn do_apply(
        live: &Value,
        cfg: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, Vec<Conflict>> {
        apply(live, &ownable(cfg, None, false), &writer(manager), force)
    }

    #[test]
    fn apply_records_ownership_of_applied_fields() {
        let out = do_apply(&cm(json!(null)), &cm(json!({"a": "1"})), "mgr", false).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
        let mf = &out["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "mgr");
        assert_eq!(mf["operation"], "Apply");
        assert_eq!(mf["fieldsType"], "FieldsV1");
        assert_eq!(mf["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    }

    /// Regression: the entry moved to the end of the list on every apply, so re-applying an
    /// unchanged configuration after another manager's write changed the object (a write, a new
    /// resourceVersion) where kube-apiserver changes nothing.
    #[test]
    fn an_apply_that_changes_nothing_leaves_the_managed_fields_as_they_are() {
        let live = do_apply(&cm(json!(null)), &cm(json!({"a": "1"})), "mgr", false).unwrap();
        let mut updated = live.clone();
        updated["metadata"]["annotations"] = json!({"note": "x"});
        let other = Writer {
            now: "2026-01-02T00:00:00Z",
            ..writer("controller")
        };
        record_update(Some(&live), &mut updated, &other, false);
        let again = do_apply(&updated, &cm(json!({"a": "1"})), "mgr", false).unwrap();
        assert_eq!(again, updated);
        // A changed value is a write: the entry takes the time of the apply.
        let changed = do_apply(&updated, &cm(json!({"a": "2"})), "mgr", false).unwrap();
        let entries = read_entries(&changed);
        assert_eq!(entries.len(), 2);
        assert_eq!(changed["data"]["a"], "2");
    }

    #[test]
    fn another_manager_changing_an_owned_field_conflicts_unless_forced() {
        let live = do_apply(&cm(json!(null)), &cm(json!({"a": "1"})), "first", false).unwrap();
        let err = do_apply(&live, &cm(json!({"a": "2"})), "second", false).unwrap_err();
        assert_eq!(
            err,
            vec![Conflict {
                manager: "\"first\"".into(),
                field: ".data.a".into()
            }]
        );
        // Same value: shared ownership, no conflict.
        let shared = do_apply(&live, &cm(json!({"a": "1"})), "second", false).unwrap();
        assert_eq!(read_entries(&shared).len(), 2);
        // Forced: the second manager takes the field.
        let forced = do_apply(&live, &cm(json!({"a": "2"})), "second", true).unwrap();
        assert_eq!(forced["data"]["a"], "2");
        let entries = read_entries(&forced);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].manager, "second");
    }

    #[test]
    fn dropping_a_field_removes_it_unless_someone_else_owns_it() {
        let live = do_apply(
            &cm(json!(null)),
            &cm(json!({"a": "1", "b": "2"})),
            "m",
            false,
        )
        .unwrap();
        let out = do_apply(&live, &cm(json!({"a": "1"})), "m", false).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
        // If another manager shares b, dropping it keeps it.
        let shared = do_apply(&live, &cm(json!({"b": "2"})), "other", false).unwrap();
        let out = do_apply(&shared, &cm(json!({"a": "1"})), "m", false).unwrap();
        assert_eq!(out["data"], json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn update_managers_take_changed_fields_and_conflict_with_appliers() {
        let live = do_apply(&cm(json!(null)), &cm(json!({"a": "1"})), "applier", false).unwrap();
        let mut edited = live.clone();
        edited["data"]["a"] = json!("edited");
        edited["data"]["z"] = json!("new");
        record_update(Some(&live), &mut edited, &writer("kubectl-edit"), false);
        let entries = read_entries(&edited);
        assert_eq!(entries.len(), 1, "the applier lost its only field");
        assert_eq!(entries[0].operation, "Update");
        let err = do_apply(&edited, &cm(json!({"z": "mine"})), "applier", false).unwrap_err();
        assert_eq!(err[0].manager, "\"kubectl-edit\" using v1");
        assert_eq!(err[0].field, ".data.z");
    }

    #[test]
    fn containers_merge_by_name() {
        let dep = |containers: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"template": {"spec": {"containers": containers}}}})
        };
        let live = do_apply(
            &dep(json!(null)),
            &dep(json!([{"name": "web", "image": "a"}])),
            "m1",
            false,
        )
        .unwrap();
        let both = do_apply(
            &live,
            &dep(json!([{"name": "side", "image": "s"}])),
            "m2",
            false,
        )
        .unwrap();
        let names: Vec<&str> = both["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["web", "side"]);
        // m1 stops applying its container: it goes, m2's stays.
        let out = do_apply(&both, &dep(json!([])), "m1", false).unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "side", "image": "s"}])
        );
    }

    #[test]
    fn ownable_leaves_out_identity_server_fields_and_status() {
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u", "labels": {"a": "b"}},
                         "spec": {"x": 1}, "status": {"phase": "Running"}});
        assert_eq!(
            ownable(&obj, None, true),
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}})
        );
        assert_eq!(
            ownable(&obj, Some("status"), true),
            json!({"status": {"phase": "Running"}})
        );
    }
}
