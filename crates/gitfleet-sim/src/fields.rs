//! Field sets: which fields of an object a manager owns, in the `FieldsV1` form that
//! `metadata.managedFields` carries (`{"f:data":{"f:a":{}}}`, `k:{"name":"web"}` for list items).
//!
//! Simplifications against the API server (whose sets come from OpenAPI schemas): which fields
//! are maps (marked `"."` when an Update creates them) comes from a table of names; a list is
//! associative (`k:` items) only in built-in kinds and only
//! for the well-known list fields in [`list_keys`] (containers and volumes by `name`, container
//! ports by `containerPort`, service ports by `port`, conditions by `type`, ...); every other list
//! is atomic and owned as a whole.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    Field(String),
    /// A list item by its key fields, as canonical JSON (`{"name":"web"}`).
    Key(String),
    /// A set item by value, as JSON.
    Value(String),
    Index(usize),
}

pub type FieldPath = Vec<PathElement>;

/// A set of owned paths: leaves (scalars, atomic lists, empty maps) and list items themselves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet(pub BTreeSet<FieldPath>);

/// The key fields of the associative list at `field`, given its items; `None` for atomic lists.
pub fn list_keys(field: &str, items: &[Value]) -> Option<Vec<&'static str>> {
    let keys: &[&'static str] = match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "webhooks"
        | "resourceClaims" => &["name"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "hostAliases" => &["ip"],
        "conditions" => &["type"],
        "ownerReferences" => &["uid"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        "ports" => {
            if items.iter().all(|i| i.get("containerPort").is_some()) {
                &["containerPort"]
            } else if items.iter().all(|i| i.get("port").is_some()) {
                &["port"]
            } else {
                return None;
            }
        }
        _ => return None,
    };
    let all_keyed = items
        .iter()
        .all(|i| i.is_object() && keys.iter().all(|k| i.get(*k).is_some_and(|v| !v.is_null())));
    all_keyed.then(|| keys.to_vec())
}

/// The canonical key of a list item.
pub fn item_key(item: &Value, keys: &[&str]) -> String {
    let mut m = Map::new();
    let mut sorted: Vec<&&str> = keys.iter().collect();
    sorted.sort();
    for k in sorted {
        m.insert(k.to_string(), item.get(*k).cloned().unwrap_or(Value::Null));
    }
    Value::Object(m).to_string()
}

fn key_names(key_json: &str) -> Vec<String> {
    serde_json::from_str::<Map<String, Value>>(key_json)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

impl FieldSet {
    /// The fields set in `value` (already stripped of what managers never own).
    /// `associative`: whether built-in list keys apply (false for custom resources).
    pub fn of(value: &Value, associative: bool) -> FieldSet {
        let mut out = BTreeSet::new();
        if let Value::Object(map) = value {
            let mut path = Vec::new();
            for (k, v) in map {
                path.push(PathElement::Field(k.clone()));
                collect_field(k, v, &mut path, &mut out, associative);
                path.pop();
            }
        }
        FieldSet(out)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, p: &FieldPath) -> bool {
        self.0.contains(p)
    }

    /// Whether the set holds `p` or any path below it.
    pub fn covers_or_below(&self, p: &FieldPath) -> bool {
        self.0
            .range(p.clone()..)
            .next()
            .is_some_and(|q| q.starts_with(p))
    }

    /// The `FieldsV1` JSON form.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Map::new();
        for path in &self.0 {
            let mut node = &mut root;
            for el in path {
                let key = encode_element(el);
                node = node
                    .entry(key)
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                    .expect("field set nodes are objects");
            }
            // A list item, or a map owned itself beside its entries (an Update that created
            // it), is marked `"."`.
            let has_children = self
                .0
                .range(path.clone()..)
                .nth(1)
                .is_some_and(|q| q.starts_with(path));
            if has_children
                || matches!(
                    path.last(),
                    Some(PathElement::Key(_) | PathElement::Index(_))
                )
            {
                node.insert(".".into(), Value::Object(Map::new()));
            }
        }
        Value::Object(root)
    }

    /// Reads the `FieldsV1` form back.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        let mut out = BTreeSet::new();
        if let Value::Object(m) = v {
            decode_node(m, &mut Vec::new(), &mut out);
        }
        FieldSet(out)
    }
}

fn collect_field(
    name: &str,
    v: &Value,
    path: &mut FieldPath,
    out: &mut BTreeSet<FieldPath>,
    associative: bool,
) {
    // A label selector is an atomic struct in built-in kinds (`structType=atomic`): owned whole.
    let atomic_selector = associative
        && name == "selector"
        && v.as_object()
            .is_some_and(|m| m.contains_key("matchLabels") || m.contains_key("matchExpressions"));
    match v {
        Value::Object(map) if !map.is_empty() && !atomic_selector => {
            for (k, child) in map {
                path.push(PathElement::Field(k.clone()));
                collect_field(k, child, path, out, associative);
                path.pop();
            }
        }
        Value::Array(items) if associative && !items.is_empty() => {
            let Some(keys) = list_keys(name, items) else {
                out.insert(path.clone());
                return;
            };
            for item in items {
                path.push(PathElement::Key(item_key(item, &keys)));
                out.insert(path.clone());
                if let Value::Object(m) = item {
                    for (k, child) in m {
                        path.push(PathElement::Field(k.clone()));
                        collect_field(k, child, path, out, associative);
                        path.pop();
                    }
                }
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

fn encode_element(el: &PathElement) -> String {
    match el {
        PathElement::Field(f) => format!("f:{f}"),
        PathElement::Key(k) => format!("k:{k}"),
        PathElement::Value(v) => format!("v:{v}"),
        PathElement::Index(i) => format!("i:{i}"),
    }
}

fn decode_node(m: &Map<String, Value>, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    for (k, child) in m {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        let el = if let Some(f) = k.strip_prefix("f:") {
            PathElement::Field(f.into())
        } else if let Some(key) = k.strip_prefix("k:") {
            PathElement::Key(key.into())
        } else if let Some(v) = k.strip_prefix("v:") {
            PathElement::Value(v.into())
        } else if let Some(i) = k.strip_prefix("i:") {
            match i.parse() {
                Ok(i) => PathElement::Index(i),
                Err(_) => continue,
            }
        } else {
            continue;
        };
        path.push(el);
        match child {
            Value::Object(cm) if !cm.is_empty() => decode_node(cm, path, out),
            _ => {
                out.insert(path.clone());
            }
        }
        path.pop();
    }
}

/// The path as the API server prints it: `.spec.containers[name="web"].image`.
pub fn path_string(path: &FieldPath) -> String {
    let mut s = String::new();
    for el in path {
        match el {
            PathElement::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            PathElement::Key(k) => {
                let m: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!("[{}]", parts.join(",")));
            }
            PathElement::Value(v) => s.push_str(&format!("[={v}]")),
            PathElement::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The value at `path` in `obj`.
pub fn value_at<'a>(obj: &'a Value, path: &[PathElement]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        cur = match el {
            PathElement::Field(f) => cur.get(f)?,
            PathElement::Index(i) => cur.get(*i)?,
            PathElement::Key(k) => {
                let names = key_names(k);
                let keys: Vec<&str> = names.iter().map(String::as_str).collect();
                cur.as_array()?
                    .iter()
                    .find(|it| item_key(it, &keys) == *k)?
            }
            PathElement::Value(v) => cur.as_array()?.iter().find(|it| it.to_string() == *v)?,
        };
    }
    Some(cur)
}

/// Removes the field or list item at `path`; missing paths are ignored.
pub fn remove_at(obj: &mut Value, path: &[PathElement]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let Some(parent) = value_at_mut(obj, parent_path) else {
        return;
    };
    match last {
        PathElement::Field(f) => {
            if let Some(m) = parent.as_object_mut() {
                m.shift_remove(f);
            }
        }
        PathElement::Index(i) => {
            if let Some(a) = parent.as_array_mut() {
                if *i < a.len() {
                    a.remove(*i);
                }
            }
        }
        PathElement::Key(k) => {
            let names = key_names(k);
            let keys: Vec<&str> = names.iter().map(String::as_str).collect();
            if let Some(a) = parent.as_array_mut() {
                a.retain(|it| item_key(it, &keys) != *k);
            }
        }
        PathElement::Value(v) => {
            // The element is the JSON text of a set member; compare values, not spellings.
            let wanted: Option<Value> = serde_json::from_str(v).ok();
            if let (Some(a), Some(wanted)) = (parent.as_array_mut(), wanted) {
                a.retain(|it| *it != wanted);
            }
        }
    }
}

fn value_at_mut<'a>(obj: &'a mut Value, path: &[PathElement]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for el in path {
        cur = match el {
            PathElement::Field(f) => cur.get_mut(f)?,
            PathElement::Index(i) => cur.get_mut(*i)?,
            PathElement::Key(k) => {
                let names = key_names(k);
                let keys: Vec<&str> = names.iter().map(String::as_str).collect();
                cur.as_array_mut()?
                    .iter_mut()
                    .find(|it| item_key(it, &keys) == *k)?
            }
            PathElement::Value(v) => cur
                .as_array_mut()?
                .iter_mut()
                .find(|it| it.to_string() == *v)?,
        };
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> PathElement {
        PathElement::Field(s.into())
    }

    #[test]
    fn field_sets_follow_list_keys_and_round_trip() {
        let spec = json!({
            "data": {"a": "1", "b": "2"},
            "spec": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "web", "image": "nginx", "args": ["x"]}]}}
            }
        });
        let set = FieldSet::of(&spec, true);
        let container = PathElement::Key(r#"{"name":"web"}"#.into());
        let base = vec![
            f("spec"),
            f("template"),
            f("spec"),
            f("containers"),
            container.clone(),
        ];
        assert!(set.contains(&vec![f("data"), f("a")]));
        assert!(set.contains(&base));
        let mut args = base.clone();
        args.push(f("args"));
        assert!(set.contains(&args), "atomic lists are leaves");
        let v1 = set.to_fields_v1();
        assert_eq!(
            v1["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"web"}"#]["."],
            json!({})
        );
        assert_eq!(FieldSet::from_fields_v1(&v1), set);
        assert_eq!(
            path_string(&args),
            ".spec.template.spec.containers[name=\"web\"].args"
        );
        assert_eq!(value_at(&spec, &args), Some(&json!(["x"])));
    }

    #[test]
    fn custom_resources_treat_lists_as_atomic() {
        let set = FieldSet::of(&json!({"spec": {"containers": [{"name": "a"}]}}), false);
        assert_eq!(set.0.len(), 1);
        assert!(set.contains(&vec![f("spec"), f("containers")]));
    }

    #[test]
    fn remove_at_drops_fields_and_items() {
        let mut v = json!({"spec": {"ports": [{"port": 80}, {"port": 443}], "x": 1}});
        remove_at(
            &mut v,
            &[
                f("spec"),
                f("ports"),
                PathElement::Key(r#"{"port":80}"#.into()),
            ],
        );
        remove_at(&mut v, &[f("spec"), f("x")]);
        remove_at(&mut v, &[f("missing"), f("x")]);
        assert_eq!(v, json!({"spec": {"ports": [{"port": 443}]}}));
    }
}
