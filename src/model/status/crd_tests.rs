//! The shapes held to the CRDs' own `status` schemas, so that neither can drift from the other
//! unnoticed. The CRDs are not in the repository: the test reads them from `GITFLEET_CRDS_DIR`
//! (KubeFleet's config/crd/bases and OCM's cluster and work CRDs, as tests/common/hub.rs reads
//! them) and passes, saying so, without it.

use super::{Field, Shape, KINDS};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Versions gitfleet accepts that the CRDs no longer define (their status was the same).
const NOT_IN_THE_CRDS: &[(&str, &str)] = &[
    ("ManagedClusterSet", "v1beta1"),
    ("ManagedClusterSetBinding", "v1beta1"),
];

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// The `status` schema of each served (group, kind, version) of the CRDs in `dir`.
fn status_schemas(dir: &Path) -> Vec<(String, String, String, Option<Value>)> {
    let mut files = Vec::new();
    yaml_files(dir, &mut files);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for crd in crate::yaml::documents(&text).unwrap() {
            if crd["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let group = crd["spec"]["group"].as_str().unwrap_or_default();
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
            for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
                if v["served"] != true {
                    continue;
                }
                let status = v["schema"]["openAPIV3Schema"]["properties"]
                    .get("status")
                    .cloned();
                let version = v["name"].as_str().unwrap_or_default();
                out.push((group.into(), kind.into(), version.into(), status));
            }
        }
    }
    out
}

/// `shape` as an indented outline: each field, `leaf`, `object`, `list` (of objects) or `map`,
/// and what it holds; fields sorted.
fn outline(shape: &Shape, indent: usize, out: &mut String) {
    let mut fields: Vec<_> = shape.iter().collect();
    fields.sort_by_key(|(name, _)| *name);
    for (name, f) in fields {
        outline_field(name, f, indent, out);
    }
}

fn outline_field(name: &str, f: &Field, indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent);
    match f {
        Field::Leaf => out.push_str(&format!("{pad}{name}: leaf\n")),
        Field::Object(shape) => {
            out.push_str(&format!("{pad}{name}: object\n"));
            outline(shape, indent + 1, out);
        }
        Field::List(shape) => {
            out.push_str(&format!("{pad}{name}: list\n"));
            outline(shape, indent + 1, out);
        }
        Field::Map(each) => {
            out.push_str(&format!("{pad}{name}: map\n"));
            outline_field("*", each, indent + 1, out);
        }
    }
}

/// The schema's `properties`, outlined as [`outline`] outlines a shape.
fn outline_schema(schema: &Value, at: &str, indent: usize, out: &mut String) {
    let props = schema["properties"].as_object().unwrap();
    let mut names: Vec<_> = props.keys().collect();
    names.sort();
    for name in names {
        outline_schema_field(name, &props[name], &format!("{at}.{name}"), indent, out);
    }
}

/// What a field's schema holds, in the terms of [`Field`]; a schema those terms cannot say
/// (unknown fields preserved, lists of lists) fails the test: the walker would need to learn it.
fn outline_schema_field(name: &str, s: &Value, at: &str, indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent);
    assert!(
        s["x-kubernetes-preserve-unknown-fields"] != true,
        "{at} preserves unknown fields: the status shapes cannot say so yet"
    );
    let has_props = s.get("properties").is_some();
    let map = s.get("additionalProperties").filter(|a| a.is_object());
    assert!(!(has_props && map.is_some()), "{at}: properties and a map");
    if has_props {
        out.push_str(&format!("{pad}{name}: object\n"));
        outline_schema(s, at, indent + 1, out);
    } else if s["type"] == "array" {
        let items = &s["items"];
        assert!(
            items["x-kubernetes-preserve-unknown-fields"] != true
                && items["type"] != "array"
                && items.get("additionalProperties").is_none(),
            "{at}: a list the status shapes cannot say"
        );
        if items.get("properties").is_some() {
            out.push_str(&format!("{pad}{name}: list\n"));
            outline_schema(items, &format!("{at}[]"), indent + 1, out);
        } else {
            out.push_str(&format!("{pad}{name}: leaf\n"));
        }
    } else if let Some(each) = map {
        out.push_str(&format!("{pad}{name}: map\n"));
        outline_schema_field("*", each, &format!("{at}.*"), indent + 1, out);
    } else {
        out.push_str(&format!("{pad}{name}: leaf\n"));
    }
}

#[test]
fn status_shapes_name_exactly_the_fields_of_the_crds() {
    let Some(dir) = std::env::var_os("GITFLEET_CRDS_DIR").filter(|d| !d.is_empty()) else {
        eprintln!("note: the status shapes are not held to the CRDs: GITFLEET_CRDS_DIR is not set");
        return;
    };
    let schemas = status_schemas(Path::new(&dir));
    assert!(!schemas.is_empty(), "no CRDs in {}", dir.to_string_lossy());
    let mut missing = Vec::new();
    for (group, kind, version, shape) in KINDS {
        let found = schemas
            .iter()
            .find(|(g, k, v, _)| g == group && k == kind && v == version);
        let Some((.., schema)) = found else {
            missing.push((*kind, *version));
            continue;
        };
        let schema = schema
            .as_ref()
            .unwrap_or_else(|| panic!("{kind} {version}: the CRD declares no status"));
        let (mut declared, mut from_crd) = (String::new(), String::new());
        outline(shape, 0, &mut declared);
        outline_schema(schema, "status", 0, &mut from_crd);
        assert_eq!(
            declared, from_crd,
            "{group} {kind} {version}: the status shape (left) is not the CRD's (right)"
        );
    }
    assert_eq!(
        missing, NOT_IN_THE_CRDS,
        "kinds and versions of the shapes the CRDs do not serve"
    );
}
