//! Fields the API server requires to be strings, in objects gitfleet does not decode itself:
//! label and annotation values, ConfigMap and Secret data, container environment values,
//! arguments and commands. YAML 1.1 makes booleans and numbers of plain `yes`, `on`, `0755`, so
//! these are where a manifest that looks right is refused by the API server; each such value is
//! reported with what YAML made of it. A null is accepted, as by the API server (it reads as
//! "").

use super::{fleet_versions, Catalog, Diagnostic};
use serde_json::Value;

pub(super) fn check(cat: &Catalog, diags: &mut Vec<Diagnostic>) {
    for (i, o) in cat.objects.iter().enumerate() {
        // The fleet APIs are decoded strictly; their decoding reports these itself.
        if fleet_versions(&o.gvk).is_some() {
            continue;
        }
        let mut fields = Vec::new();
        for map in ["metadata.labels", "metadata.annotations"] {
            map_values(&o.value, map, &mut fields);
        }
        match (o.gvk.group.as_str(), o.gvk.kind.as_str()) {
            ("", "ConfigMap") => {
                map_values(&o.value, "data", &mut fields);
                map_values(&o.value, "binaryData", &mut fields);
            }
            ("", "Secret") => {
                map_values(&o.value, "data", &mut fields);
                map_values(&o.value, "stringData", &mut fields);
            }
            (group, kind) => {
                if let Some(pod) = pod_spec_path(group, kind) {
                    containers(&o.value, pod, &mut fields);
                }
            }
        }
        for (field, value) in fields {
            let kind = match value {
                // The API server reads null into a string as "", as Go's JSON does.
                Value::String(_) | Value::Null => continue,
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::Array(_) => "a list",
                Value::Object(_) => "a mapping",
            };
            let mut message = format!("Invalid value: must be a string, not {kind}");
            if let Some(hint) = cat.yaml_hint(i, &field) {
                message.push_str("; ");
                message.push_str(&hint);
            }
            diags.push(cat.diagnostic(i, &field, message));
        }
    }
}

/// The values of the map at `path` (dotted, no dots in its keys), with their field paths.
fn map_values<'v>(object: &'v Value, path: &str, out: &mut Vec<(String, &'v Value)>) {
    let map = path
        .split('.')
        .try_fold(object, |v, k| v.get(k))
        .and_then(Value::as_object);
    for (k, v) in map.into_iter().flatten() {
        out.push((format!("{path}.{k}"), v));
    }
}

/// Where a workload kind keeps its pod spec.
fn pod_spec_path(group: &str, kind: &str) -> Option<&'static str> {
    Some(match (group, kind) {
        ("", "Pod") => "spec",
        ("", "ReplicationController")
        | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job") => "spec.template.spec",
        ("batch", "CronJob") => "spec.jobTemplate.spec.template.spec",
        _ => return None,
    })
}

/// Environment values, arguments and commands of every container of the pod spec at `pod`.
fn containers<'v>(object: &'v Value, pod: &str, out: &mut Vec<(String, &'v Value)>) {
    let Some(spec) = pod.split('.').try_fold(object, |v, k| v.get(k)) else {
        return;
    };
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let Some(containers) = spec.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (c, container) in containers.iter().enumerate() {
            let at = format!("{pod}.{list}[{c}]");
            for key in ["args", "command"] {
                for (j, v) in container
                    .get(key)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    out.push((format!("{at}.{key}[{j}]"), v));
                }
            }
            for (j, env) in container
                .get("env")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if let Some(v) = env.get("value") {
                    out.push((format!("{at}.env[{j}].value"), v));
                }
            }
        }
    }
}
