//! What the API server fills in and checks for each kind: the defaults that a real server adds on
//! every write (so live objects look like a cluster's) and the validation that turns a bad object
//! into 422 Invalid. Only the common fields are covered; see the module list in `sim`.

use serde_json::{json, Map, Value};

use super::resources::ResourceType;

/// Fills in server defaults, in place. Idempotent.
pub fn apply_defaults(rt: &ResourceType, obj: &mut Value, alloc: &mut dyn FnMut() -> String) {
    if rt.is_custom() {
        return;
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => {
            let name = obj["metadata"]["name"].clone();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            set_default(obj, &["spec", "finalizers"], json!(["kubernetes"]));
            set_default(obj, &["status", "phase"], json!("Active"));
        }
        ("", "Pod") => {
            if let Some(spec) = obj.get_mut("spec") {
                pod_spec_defaults(spec);
            }
        }
        ("", "Secret") => {
            set_default(obj, &["type"], json!("Opaque"));
            if let Some(Value::Object(string_data)) = obj
                .as_object_mut()
                .and_then(|o| o.shift_remove("stringData"))
            {
                for (k, v) in string_data {
                    let text = v.as_str().unwrap_or_default().to_string();
                    obj["data"][k] = json!(base64(text.as_bytes()));
                }
            }
        }
        ("", "Service") => {
            set_default(obj, &["spec", "type"], json!("ClusterIP"));
            set_default(obj, &["spec", "sessionAffinity"], json!("None"));
            if obj["spec"]["type"] != "ExternalName" {
                if obj["spec"]["clusterIP"].as_str().unwrap_or("").is_empty() {
                    obj["spec"]["clusterIP"] = json!(alloc());
                }
                let ip = obj["spec"]["clusterIP"].clone();
                set_default(obj, &["spec", "clusterIPs"], json!([ip]));
                set_default(obj, &["spec", "ipFamilies"], json!(["IPv4"]));
                set_default(obj, &["spec", "ipFamilyPolicy"], json!("SingleStack"));
                set_default(obj, &["spec", "internalTrafficPolicy"], json!("Cluster"));
            }
            if let Some(Value::Array(ports)) = obj["spec"].get_mut("ports") {
                for p in ports {
                    set_default(p, &["protocol"], json!("TCP"));
                    let port = p["port"].clone();
                    set_default(p, &["targetPort"], port);
                }
            }
            set_default(obj, &["status", "loadBalancer"], json!({}));
        }
        ("apps", "Deployment") => {
            set_default(obj, &["spec", "replicas"], json!(1));
            set_default(obj, &["spec", "revisionHistoryLimit"], json!(10));
            set_default(obj, &["spec", "progressDeadlineSeconds"], json!(600));
            set_default(obj, &["spec", "strategy", "type"], json!("RollingUpdate"));
            if obj["spec"]["strategy"]["type"] == "RollingUpdate" {
                set_default(
                    obj,
                    &["spec", "strategy", "rollingUpdate", "maxSurge"],
                    json!("25%"),
                );
                set_default(
                    obj,
                    &["spec", "strategy", "rollingUpdate", "maxUnavailable"],
                    json!("25%"),
                );
            }
            template_defaults(obj);
        }
        ("apps", "StatefulSet") => {
            set_default(obj, &["spec", "replicas"], json!(1));
            set_default(obj, &["spec", "revisionHistoryLimit"], json!(10));
            set_default(obj, &["spec", "podManagementPolicy"], json!("OrderedReady"));
            set_default(
                obj,
                &["spec", "updateStrategy", "type"],
                json!("RollingUpdate"),
            );
            if obj["spec"]["updateStrategy"]["type"] == "RollingUpdate" {
                set_default(
                    obj,
                    &["spec", "updateStrategy", "rollingUpdate", "partition"],
                    json!(0),
                );
            }
            set_default(
                obj,
                &["spec", "persistentVolumeClaimRetentionPolicy"],
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            template_defaults(obj);
        }
        ("apps", "DaemonSet") => {
            set_default(obj, &["spec", "revisionHistoryLimit"], json!(10));
            set_default(
                obj,
                &["spec", "updateStrategy", "type"],
                json!("RollingUpdate"),
            );
            if obj["spec"]["updateStrategy"]["type"] == "RollingUpdate" {
                set_default(
                    obj,
                    &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"],
                    json!(1),
                );
                set_default(
                    obj,
                    &["spec", "updateStrategy", "rollingUpdate", "maxSurge"],
                    json!(0),
                );
            }
            template_defaults(obj);
        }
        ("apps", "ReplicaSet") | ("", "ReplicationController") => {
            set_default(obj, &["spec", "replicas"], json!(1));
            template_defaults(obj);
        }
        ("batch", "Job") => {
            set_default(obj, &["spec", "parallelism"], json!(1));
            set_default(obj, &["spec", "completions"], json!(1));
            set_default(obj, &["spec", "backoffLimit"], json!(6));
            set_default(obj, &["spec", "completionMode"], json!("NonIndexed"));
            set_default(obj, &["spec", "suspend"], json!(false));
            if obj["spec"]["template"].is_object() {
                set_default(
                    obj,
                    &["spec", "template", "spec", "restartPolicy"],
                    json!("Never"),
                );
            }
            template_defaults(obj);
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            set_default(obj, &["spec", "conversion", "strategy"], json!("None"));
        }
        _ => {}
    }
}

fn template_defaults(obj: &mut Value) {
    if let Some(spec) = obj
        .get_mut("spec")
        .and_then(|s| s.get_mut("template"))
        .and_then(|t| t.get_mut("spec"))
    {
        pod_spec_defaults(spec);
    }
}

fn pod_spec_defaults(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, &["restartPolicy"], json!("Always"));
    set_default(spec, &["dnsPolicy"], json!("ClusterFirst"));
    set_default(spec, &["schedulerName"], json!("default-scheduler"));
    set_default(spec, &["terminationGracePeriodSeconds"], json!(30));
    set_default(spec, &["securityContext"], json!({}));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs {
                if !c.is_object() {
                    continue;
                }
                let image = c["image"].as_str().unwrap_or_default();
                let tag = image.rsplit('/').next().unwrap_or_default();
                let latest = !tag.contains(':') || tag.ends_with(":latest");
                let policy = if latest && !image.contains('@') {
                    "Always"
                } else {
                    "IfNotPresent"
                };
                set_default(c, &["imagePullPolicy"], json!(policy));
                set_default(
                    c,
                    &["terminationMessagePath"],
                    json!("/dev/termination-log"),
                );
                set_default(c, &["terminationMessagePolicy"], json!("File"));
                set_default(c, &["resources"], json!({}));
                if let Some(Value::Array(ports)) = c.get_mut("ports") {
                    for p in ports {
                        set_default(p, &["protocol"], json!("TCP"));
                    }
                }
            }
        }
    }
}

/// Sets `path` to `value` when it is absent (or null), creating parent maps.
pub fn set_default(obj: &mut Value, path: &[&str], value: Value) {
    let mut cur = obj;
    for (i, seg) in path.iter().enumerate() {
        if !cur.is_object() {
            if cur.is_null() {
                *cur = Value::Object(Map::new());
            } else {
                return;
            }
        }
        let map = cur.as_object_mut().expect("checked above");
        if i == path.len() - 1 {
            if map.get(*seg).is_none_or(Value::is_null) {
                map.insert(seg.to_string(), value);
            }
            return;
        }
        cur = map.entry(seg.to_string()).or_insert(Value::Null);
    }
}

/// Problems that make an object invalid: `(field, message)` as the API server words them.
pub fn validate(rt: &ResourceType, obj: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if let Some(why) = name_problem(rt, name) {
        out.push((
            "metadata.name".to_string(),
            format!("Invalid value: {name:?}: {why}"),
        ));
    }
    for field in ["labels", "annotations"] {
        match &obj["metadata"][field] {
            Value::Null => {}
            Value::Object(m) => {
                for (k, v) in m {
                    if let Err(e) = check_qualified_name(k) {
                        out.push((
                            format!("metadata.{field}"),
                            format!("Invalid value: {k:?}: {e}"),
                        ));
                    }
                    if field == "labels" {
                        match v.as_str() {
                            Some(s) if valid_label_value(s) => {}
                            _ => out.push((
                                "metadata.labels".to_string(),
                                format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                            )),
                        }
                    } else if !v.is_string() {
                        out.push((
                            "metadata.annotations".to_string(),
                            format!("Invalid value: {v}: must be a string"),
                        ));
                    }
                }
            }
            other => out.push((
                format!("metadata.{field}"),
                format!("Invalid value: {other}: must be a map of strings"),
            )),
        }
    }
    if rt.is_custom() {
        return out;
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            let selector = &obj["spec"]["selector"];
            if !selector.is_object() {
                out.push(("spec.selector".into(), "Required value".into()));
            } else {
                let labels = &obj["spec"]["template"]["metadata"]["labels"];
                if !selector_matches(selector, labels) {
                    out.push((
                        "spec.template.metadata.labels".into(),
                        format!(
                            "Invalid value: {}: `selector` does not match template `labels`",
                            compact(labels)
                        ),
                    ));
                }
            }
            containers_required(
                &obj["spec"]["template"]["spec"],
                "spec.template.spec",
                &mut out,
            );
        }
        ("", "Pod") => containers_required(&obj["spec"], "spec", &mut out),
        ("", "ConfigMap" | "Secret") => {
            for field in ["data", "binaryData"] {
                if let Value::Object(m) = &obj[field] {
                    for k in m.keys() {
                        if k.is_empty()
                            || !k
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                        {
                            out.push((
                                format!("{field}[{k}]"),
                                format!("Invalid value: {k:?}: a valid config key must consist of alphanumeric characters, '-', '_' or '.'"),
                            ));
                        }
                    }
                }
            }
        }
        _ => {}
    }
    out
}

fn containers_required(pod_spec: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match pod_spec["containers"].as_array() {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter().enumerate() {
                if c["name"].as_str().unwrap_or_default().is_empty() {
                    out.push((
                        format!("{at}.containers[{i}].name"),
                        "Required value".into(),
                    ));
                }
                if c["image"].as_str().unwrap_or_default().is_empty() {
                    out.push((
                        format!("{at}.containers[{i}].image"),
                        "Required value".into(),
                    ));
                }
            }
        }
        _ => out.push((format!("{at}.containers"), "Required value".into())),
    }
}

fn compact(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}:{}", v.as_str().unwrap_or_default()))
                .collect();
            format!("map[string]string{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// Whether a `metav1.LabelSelector` (matchLabels, matchExpressions) selects `labels`.
pub fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| get(k) == v.as_str()));
    let exprs_ok = selector["matchExpressions"].as_array().is_none_or(|es| {
        es.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => get(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => get(key).is_some(),
                "DoesNotExist" => get(key).is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}

/// A selector in its string form (`app=web,tier in (a)`), as Scale status shows it.
pub fn selector_string(selector: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(m) = selector["matchLabels"].as_object() {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    if let Some(es) = selector["matchExpressions"].as_array() {
        for e in es {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            parts.push(match e["operator"].as_str().unwrap_or_default() {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                _ => format!("!{key}"),
            });
        }
    }
    parts.join(",")
}

fn name_problem(rt: &ResourceType, name: &str) -> Option<&'static str> {
    if rt.group == "rbac.authorization.k8s.io" {
        let ok = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains('/')
            && !name.contains('%');
        return (!ok).then_some("may not be '.' or '..' and may not contain '/' or '%'");
    }
    let label_only = rt.group.is_empty() && (rt.kind == "Namespace" || rt.kind == "Service");
    if label_only {
        return (!is_dns_label(name)).then_some(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        );
    }
    let ok = !name.is_empty() && name.len() <= 253 && name.split('.').all(is_dns_label);
    (!ok).then_some(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    )
}

pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn check_qualified_name(k: &str) -> Result<(), &'static str> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.len() > 253 || !p.split('.').all(is_dns_label) {
            return Err("prefix part must be a lowercase RFC 1123 subdomain");
        }
    }
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")
    }
}

fn valid_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

/// Standard base64 with padding (Secret `stringData` → `data`).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn rt(group: &str, kind: &str) -> std::sync::Arc<ResourceType> {
        Registry::default().by_kind(group, None, kind).unwrap()
    }

    #[test]
    fn deployments_get_the_server_defaults() {
        let mut d = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}});
        apply_defaults(&rt("apps", "Deployment"), &mut d, &mut || unreachable!());
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        let again = d.clone();
        apply_defaults(&rt("apps", "Deployment"), &mut d, &mut || unreachable!());
        assert_eq!(d, again, "defaults are idempotent");
        assert!(validate(&rt("apps", "Deployment"), &d).is_empty());
    }

    #[test]
    fn a_selector_that_misses_the_template_is_invalid() {
        let d = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let problems = validate(&rt("apps", "Deployment"), &d);
        assert_eq!(problems[0].0, "spec.template.metadata.labels");
    }

    #[test]
    fn names_and_labels_are_checked() {
        let bad =
            json!({"metadata": {"name": "Bad_Name", "labels": {"ok": "fine", "x": "no spaces"}}});
        let problems = validate(&rt("", "ConfigMap"), &bad);
        let fields: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, vec!["metadata.name", "metadata.labels"]);
        assert!(
            validate(&rt("", "Namespace"), &json!({"metadata": {"name": "a.b"}}))[0]
                .1
                .contains("RFC 1123 label")
        );
        assert!(validate(
            &rt("rbac.authorization.k8s.io", "ClusterRole"),
            &json!({"metadata": {"name": "system:viewer"}})
        )
        .is_empty());
    }

    #[test]
    fn secrets_fold_string_data_into_base64_data() {
        let mut s = json!({"metadata": {"name": "s"}, "stringData": {"k": "hello"}});
        apply_defaults(&rt("", "Secret"), &mut s, &mut || unreachable!());
        assert_eq!(s["data"]["k"], "aGVsbG8=");
        assert_eq!(s["type"], "Opaque");
        assert!(s.get("stringData").is_none());
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b""), "");
    }

    #[test]
    fn services_get_a_cluster_ip() {
        let mut s = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
        apply_defaults(&rt("", "Service"), &mut s, &mut || "10.0.0.7".into());
        assert_eq!(s["spec"]["clusterIP"], "10.0.0.7");
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
    }
}
