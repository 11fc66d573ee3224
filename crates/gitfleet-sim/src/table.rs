//! Server-side printing: the `meta.k8s.io/v1` `Table` that `kubectl get` asks for, with the
//! columns a real API server uses for the common kinds, a CRD's `additionalPrinterColumns` for
//! custom resources, and Name/Age otherwise. Also `PartialObjectMetadata` for metadata-only reads.

use serde_json::{json, Value};

use super::clock::age;
use super::defaults::selector_string;
use super::resources::ResourceType;

/// What the `Accept` header asks the object(s) to be turned into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Object,
    Table,
    Metadata,
}

pub fn shape(accept: Option<&str>) -> Shape {
    let Some(accept) = accept else {
        return Shape::Object;
    };
    for media in accept.split(',') {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        let is_meta = params.contains(&"g=meta.k8s.io");
        if is_meta && params.contains(&"as=Table") {
            return Shape::Table;
        }
        if is_meta
            && (params.contains(&"as=PartialObjectMetadata")
                || params.contains(&"as=PartialObjectMetadataList"))
        {
            return Shape::Metadata;
        }
        if params
            .first()
            .is_some_and(|m| *m == "application/json" || *m == "*/*")
            && params.len() == 1
        {
            return Shape::Object;
        }
    }
    Shape::Object
}

pub const TABLE_CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

pub fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

pub fn partial_metadata_list(list: &Value) -> Value {
    let items: Vec<Value> = list["items"]
        .as_array()
        .map(|a| a.iter().map(partial_metadata).collect())
        .unwrap_or_default();
    json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list["metadata"], "items": items})
}

struct Column {
    name: &'static str,
    kind: &'static str,
    priority: i64,
    description: &'static str,
}

const fn col(name: &'static str, priority: i64) -> Column {
    Column {
        name,
        kind: "string",
        priority,
        description: "",
    }
}

fn columns(rt: &ResourceType) -> Vec<Column> {
    let mut cols = vec![Column {
        name: "Name",
        kind: "string",
        priority: 0,
        description: "Name must be unique within a namespace.",
    }];
    let more: Vec<Column> = match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => vec![col("Status", 0), col("Age", 0)],
        ("", "Node") => vec![
            col("Status", 0),
            col("Roles", 0),
            col("Age", 0),
            col("Version", 0),
            col("Internal-IP", 1),
            col("External-IP", 1),
            col("OS-Image", 1),
            col("Kernel-Version", 1),
            col("Container-Runtime", 1),
        ],
        ("", "Pod") => vec![
            col("Ready", 0),
            col("Status", 0),
            col("Restarts", 0),
            col("Age", 0),
            col("IP", 1),
            col("Node", 1),
            col("Nominated Node", 1),
            col("Readiness Gates", 1),
        ],
        ("apps", "Deployment") => vec![
            col("Ready", 0),
            col("Up-to-date", 0),
            col("Available", 0),
            col("Age", 0),
            col("Containers", 1),
            col("Images", 1),
            col("Selector", 1),
        ],
        ("apps", "ReplicaSet") => vec![
            col("Desired", 0),
            col("Current", 0),
            col("Ready", 0),
            col("Age", 0),
        ],
        ("apps", "StatefulSet") => vec![col("Ready", 0), col("Age", 0)],
        ("apps", "DaemonSet") => vec![
            col("Desired", 0),
            col("Current", 0),
            col("Ready", 0),
            col("Up-to-date", 0),
            col("Available", 0),
            col("Node Selector", 0),
            col("Age", 0),
        ],
        ("", "ConfigMap") => vec![col("Data", 0), col("Age", 0)],
        ("", "Secret") => vec![col("Type", 0), col("Data", 0), col("Age", 0)],
        ("", "Service") => vec![
            col("Type", 0),
            col("Cluster-IP", 0),
            col("External-IP", 0),
            col("Port(s)", 0),
            col("Age", 0),
        ],
        ("batch", "Job") => vec![col("Status", 0), col("Completions", 0), col("Age", 0)],
        ("apiextensions.k8s.io", "CustomResourceDefinition") => vec![col("Created At", 0)],
        _ if rt.is_custom() => Vec::new(),
        _ => vec![col("Age", 0)],
    };
    cols.extend(more);
    cols
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn cells(rt: &ResourceType, obj: &Value, now: i64) -> Vec<Value> {
    let name = obj["metadata"]["name"].clone();
    let created = obj["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default();
    let a = json!(age(created, now));
    let spec = &obj["spec"];
    let status = &obj["status"];
    let mut out = vec![name];
    let rest: Vec<Value> = match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => vec![status["phase"].clone(), a],
        ("", "Node") => {
            let ready = status["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .map(|c| c["status"] == "True")
                .unwrap_or(false);
            let mut st = if ready {
                "Ready".to_string()
            } else {
                "NotReady".to_string()
            };
            if spec["unschedulable"] == json!(true) {
                st.push_str(",SchedulingDisabled");
            }
            let roles: Vec<String> = obj["metadata"]["labels"]
                .as_object()
                .map(|m| {
                    m.keys()
                        .filter_map(|k| {
                            k.strip_prefix("node-role.kubernetes.io/").map(String::from)
                        })
                        .collect()
                })
                .unwrap_or_default();
            let addr = |t: &str| {
                status["addresses"]
                    .as_array()
                    .and_then(|a| a.iter().find(|x| x["type"] == t))
                    .map(|x| x["address"].clone())
                    .unwrap_or(json!("<none>"))
            };
            let info = &status["nodeInfo"];
            vec![
                json!(st),
                json!(if roles.is_empty() {
                    "<none>".to_string()
                } else {
                    roles.join(",")
                }),
                a,
                info["kubeletVersion"].clone(),
                addr("InternalIP"),
                addr("ExternalIP"),
                info["osImage"].clone(),
                info["kernelVersion"].clone(),
                info["containerRuntimeVersion"].clone(),
            ]
        }
        ("", "Pod") => {
            let total = spec["containers"].as_array().map(Vec::len).unwrap_or(0);
            let ready = status["containerStatuses"]
                .as_array()
                .map(|cs| cs.iter().filter(|c| c["ready"] == json!(true)).count())
                .unwrap_or(0);
            let phase = status["reason"]
                .as_str()
                .or(status["phase"].as_str())
                .unwrap_or("Pending")
                .to_string();
            let phase = if obj["metadata"]["deletionTimestamp"].is_null() {
                phase
            } else {
                "Terminating".into()
            };
            vec![
                json!(format!("{ready}/{total}")),
                json!(phase),
                json!("0"),
                a,
                status["podIP"]
                    .as_str()
                    .map(|s| json!(s))
                    .unwrap_or(json!("<none>")),
                spec["nodeName"]
                    .as_str()
                    .map(|s| json!(s))
                    .unwrap_or(json!("<none>")),
                json!("<none>"),
                json!("<none>"),
            ]
        }
        ("apps", "Deployment") => {
            let containers = spec["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let names: Vec<&str> = containers
                .iter()
                .filter_map(|c| c["name"].as_str())
                .collect();
            let images: Vec<&str> = containers
                .iter()
                .filter_map(|c| c["image"].as_str())
                .collect();
            vec![
                json!(format!(
                    "{}/{}",
                    int(&status["readyReplicas"]),
                    int(&spec["replicas"])
                )),
                json!(int(&status["updatedReplicas"])),
                json!(int(&status["availableReplicas"])),
                a,
                json!(names.join(",")),
                json!(images.join(",")),
                json!(selector_string(&spec["selector"])),
            ]
        }
        ("apps", "ReplicaSet") => vec![
            json!(int(&spec["replicas"])),
            json!(int(&status["replicas"])),
            json!(int(&status["readyReplicas"])),
            a,
        ],
        ("apps", "StatefulSet") => vec![
            json!(format!(
                "{}/{}",
                int(&status["readyReplicas"]),
                int(&spec["replicas"])
            )),
            a,
        ],
        ("apps", "DaemonSet") => {
            let sel = spec["template"]["spec"]["nodeSelector"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "<none>".into());
            vec![
                json!(int(&status["desiredNumberScheduled"])),
                json!(int(&status["currentNumberScheduled"])),
                json!(int(&status["numberReady"])),
                json!(int(&status["updatedNumberScheduled"])),
                json!(int(&status["numberAvailable"])),
                json!(sel),
                a,
            ]
        }
        ("", "ConfigMap") => {
            let n = obj["data"].as_object().map(|m| m.len()).unwrap_or(0)
                + obj["binaryData"].as_object().map(|m| m.len()).unwrap_or(0);
            vec![json!(n), a]
        }
        ("", "Secret") => vec![
            obj["type"].clone(),
            json!(obj["data"].as_object().map(|m| m.len()).unwrap_or(0)),
            a,
        ],
        ("", "Service") => {
            let ports: Vec<String> = spec["ports"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .map(|p| {
                            let node = p["nodePort"]
                                .as_i64()
                                .map(|n| format!(":{n}"))
                                .unwrap_or_default();
                            format!(
                                "{}{node}/{}",
                                int(&p["port"]),
                                p["protocol"].as_str().unwrap_or("TCP")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            vec![
                spec["type"].clone(),
                spec["clusterIP"].clone(),
                json!("<none>"),
                json!(if ports.is_empty() {
                    "<none>".to_string()
                } else {
                    ports.join(",")
                }),
                a,
            ]
        }
        ("batch", "Job") => {
            let done = status["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Complete" && c["status"] == "True")
            });
            vec![
                json!(if done { "Complete" } else { "Running" }),
                json!(format!(
                    "{}/{}",
                    int(&status["succeeded"]),
                    spec["completions"].as_i64().unwrap_or(1)
                )),
                a,
            ]
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => vec![json!(created)],
        _ if rt.is_custom() => Vec::new(),
        _ => vec![a],
    };
    out.extend(rest);
    if rt.is_custom() {
        for c in &rt.printer_columns {
            out.push(json_path(obj, &c.json_path).cloned().unwrap_or(Value::Null));
        }
        out.push(json!(age(created, now)));
    }
    out
}

/// A table of `objects` (already presented for `rt`'s version).
pub fn table(
    rt: &ResourceType,
    objects: &[Value],
    resource_version: &str,
    now: i64,
    include_object: &str,
) -> Value {
    let mut defs: Vec<Value> = columns(rt)
        .iter()
        .map(|c| {
            json!({"name": c.name, "type": c.kind, "format": if c.name == "Name" { "name" } else { "" },
                   "description": c.description, "priority": c.priority})
        })
        .collect();
    if rt.is_custom() {
        for c in &rt.printer_columns {
            defs.push(json!({"name": c.name, "type": c.type_, "format": "", "description": c.description, "priority": c.priority}));
        }
        defs.push(
            json!({"name": "Age", "type": "date", "format": "", "description": "", "priority": 0}),
        );
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let object = match include_object {
                "None" => Value::Null,
                "Object" => o.clone(),
                _ => partial_metadata(o),
            };
            json!({"cells": cells(rt, o, now), "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": defs,
        "rows": rows,
    })
}

/// A small JSONPath subset for printer columns: `.a.b`, `.a[0]`, `.a[?(@.type=="Ready")].status`.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Ok(i) = inner.parse::<usize>() {
                cur = cur.get(i)?;
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (field, want) = f.split_once("==")?;
                let want = want.trim().trim_matches(['"', '\'']);
                cur = cur
                    .as_array()?
                    .iter()
                    .find(|it| it.get(field.trim()).and_then(Value::as_str) == Some(want))?;
            } else {
                return None;
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    #[test]
    fn kubectl_get_asks_for_a_table() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(shape(Some(kubectl)), Shape::Table);
        assert_eq!(
            shape(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            )),
            Shape::Metadata
        );
        assert_eq!(shape(Some("application/json")), Shape::Object);
        assert_eq!(shape(None), Shape::Object);
    }

    #[test]
    fn node_rows_show_status_and_version() {
        let rt = Registry::default().by_kind("", None, "Node").unwrap();
        let node = json!({"metadata": {"name": "n1", "creationTimestamp": "2024-05-01T12:00:00Z", "labels": {"node-role.kubernetes.io/agent": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.1"}}});
        let t = table(
            &rt,
            &[node],
            "5",
            crate::clock::parse_rfc3339("2024-05-01T12:10:00Z").unwrap(),
            "Metadata",
        );
        assert_eq!(
            t["rows"][0]["cells"].as_array().unwrap()[0..5],
            [
                json!("n1"),
                json!("Ready,SchedulingDisabled"),
                json!("agent"),
                json!("10m"),
                json!("v1.33.1")
            ]
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
    }

    #[test]
    fn json_path_subset() {
        let v = json!({"status": {"conditions": [{"type": "A", "status": "x"}, {"type": "Ready", "status": "True"}]}, "spec": {"l": [1, 2]}});
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(json_path(&v, ".spec.l[1]"), Some(&json!(2)));
        assert_eq!(json_path(&v, ".spec.missing"), None);
    }
}
