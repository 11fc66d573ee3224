//! The rules the API server applies to the `metadata` of every object, whatever its kind
//! (apimachinery's `ValidateObjectMeta` and the name rule each kind chooses): the name as the
//! kind requires it, the namespace, label keys and values, annotation keys and their total
//! size. Pure: it takes an object's kind and value and returns its problems; where the object
//! came from is the catalog's.

use super::member::{label_value_problem, qualified_name_problem};
use super::{is_dns1123_label, is_dns1123_subdomain, Problem};
use serde_json::Value;

/// Most bytes the keys and values of an object's annotations may hold together
/// (apimachinery's `TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// How a kind's `metadata.name` is validated (the `ValidateNameFunc` each kind's strategy passes
/// to `ValidateObjectMeta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: most built-in kinds, and every custom resource.
    Subdomain,
    /// `NameIsDNSLabel`: Namespace, and Service since Kubernetes 1.34 relaxed its names
    /// (`RelaxedServiceNameValidation`, on by default; before it a Service's name was a DNS-1035
    /// label, starting with a letter).
    Label,
    /// `ValidatePathSegmentName`: the RBAC kinds (their names only have to fit in a URL path).
    PathSegment,
}

impl NameRule {
    /// The rule of a kind. Kinds not listed are DNS subdomains, as custom resources are.
    pub fn of(group: &str, kind: &str) -> NameRule {
        match (group, kind) {
            ("", "Namespace" | "Service") => NameRule::Label,
            (
                "rbac.authorization.k8s.io",
                "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding",
            ) => NameRule::PathSegment,
            _ => NameRule::Subdomain,
        }
    }

    /// Why `name` breaks this rule, as the API server says it.
    pub fn problem(self, name: &str) -> Option<String> {
        match self {
            NameRule::Subdomain if name.len() > 253 => {
                Some("must be no more than 253 characters".into())
            }
            NameRule::Subdomain => (!is_dns1123_subdomain(name)).then(|| SUBDOMAIN.into()),
            NameRule::Label if name.len() > 63 => Some("must be no more than 63 characters".into()),
            NameRule::Label => (!is_dns1123_label(name)).then(|| LABEL.into()),
            NameRule::PathSegment => {
                if name == "." || name == ".." {
                    Some(format!("may not be '{name}'"))
                } else {
                    ['/', '%']
                        .into_iter()
                        .find(|c| name.contains(*c))
                        .map(|c| format!("may not contain '{c}'"))
                }
            }
        }
    }
}

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";

/// A field path naming one key of a map: `metadata.labels["bad key!"]` (the key as a JSON
/// string, so that dots and slashes in it stay in it).
pub fn key_field(map: &str, key: &str) -> String {
    format!(
        "{map}[{}]",
        serde_json::to_string(key).unwrap_or_else(|_| format!("{key:?}"))
    )
}

/// What gets checked of an object's metadata.
#[derive(Debug, Clone, Copy)]
pub struct Checks<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    /// The namespace when the kind is namespaced (a cluster-scoped object's is ignored, as
    /// kubectl ignores it).
    pub namespace: Option<&'a str>,
    /// Whether to check the name here (the fleet APIs' models check their own).
    pub name: bool,
}

/// Every problem of the metadata of `value`.
pub fn problems(value: &Value, checks: Checks<'_>) -> Vec<Problem> {
    let mut out = Vec::new();
    let meta = value.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str);
    if let (true, Some(name)) = (checks.name, name.filter(|n| !n.is_empty())) {
        if let Some(msg) = NameRule::of(checks.group, checks.kind).problem(name) {
            out.push(invalid("metadata.name", name, &msg));
        }
        // The CronJob's name is a prefix of its Jobs' names, which get 11 more characters.
        if (checks.group, checks.kind) == ("batch", "CronJob") && name.len() > 52 {
            out.push(invalid(
                "metadata.name",
                name,
                "must be no more than 52 characters",
            ));
        }
    }
    if let Some(ns) = checks.namespace.filter(|n| !n.is_empty()) {
        if let Some(msg) = NameRule::Label.problem(ns) {
            out.push(invalid("metadata.namespace", ns, &msg));
        }
    }
    if let Some(labels) = meta
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
    {
        for (k, v) in labels {
            let field = key_field("metadata.labels", k);
            if let Some(msg) = qualified_name_problem(k) {
                out.push(invalid(&field, k, &format!("key {msg}")));
            }
            // A value that is not a string is the string checks' (with what YAML made of it).
            if let Some(msg) = v.as_str().and_then(label_value_problem) {
                out.push(invalid(&field, v.as_str().unwrap_or_default(), &msg));
            }
        }
    }
    if let Some(annotations) = meta
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
    {
        let mut total = 0;
        for (k, v) in annotations {
            total += k.len() + v.as_str().map_or(0, str::len);
            // gitfleet's earlier declared-property spelling: read, with a warning that says
            // how to rewrite it (`member::declared_properties`), not refused.
            if k.starts_with(super::member::LEGACY_PROPERTY_PREFIX)
                && matches!(checks.kind, "MemberCluster" | "ManagedCluster")
            {
                continue;
            }
            // Annotation keys are checked lowercased: an upper-case prefix passes.
            if let Some(msg) = qualified_name_problem(&k.to_ascii_lowercase()) {
                out.push(invalid(
                    &key_field("metadata.annotations", k),
                    k,
                    &format!("key {msg}"),
                ));
            }
        }
        if total > TOTAL_ANNOTATION_SIZE_LIMIT {
            out.push(Problem::new(
                "metadata.annotations",
                format!(
                    "Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes (keys and values hold {total})"
                ),
            ));
        }
    }
    out
}

fn invalid(field: &str, value: &str, msg: &str) -> Problem {
    Problem::new(field, format!("Invalid value: {value:?}: {msg}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(group: &str, kind: &str, namespace: Option<&str>, metadata: Value) -> Vec<String> {
        problems(
            &json!({ "metadata": metadata }),
            Checks {
                group,
                kind,
                namespace,
                name: true,
            },
        )
        .into_iter()
        .map(|p| format!("{}: {}", p.field, p.message))
        .collect()
    }

    fn configmap(metadata: Value) -> Vec<String> {
        of("", "ConfigMap", Some("default"), metadata)
    }

    #[test]
    fn name_is_a_dns_subdomain_for_most_kinds() {
        assert!(configmap(json!({"name": "a.b-c"})).is_empty());
        assert!(of("example.com", "Widget", None, json!({"name": "a.b"})).is_empty());
        let long = "a".repeat(254);
        for bad in ["Bad", "-a", "a_b", "a..b", long.as_str()] {
            let got = configmap(json!({ "name": bad }));
            assert_eq!(got.len(), 1, "{bad}: {got:?}");
            assert!(
                got[0].starts_with("metadata.name: Invalid value"),
                "{got:?}"
            );
        }
        assert!(configmap(json!({"name": "a".repeat(253)})).is_empty());
    }

    #[test]
    fn name_is_a_dns_label_for_namespaces() {
        assert!(of("", "Namespace", None, json!({"name": "team-a"})).is_empty());
        assert!(!of("", "Namespace", None, json!({"name": "team.a"})).is_empty());
        assert!(!of("", "Namespace", None, json!({"name": "a".repeat(64)})).is_empty());
    }

    #[test]
    fn name_is_a_dns_label_for_services() {
        let svc = |n: &str| of("", "Service", Some("default"), json!({ "name": n }));
        assert!(svc("web").is_empty());
        assert!(svc("9web").is_empty());
        assert!(!svc("a.b").is_empty());
    }

    #[test]
    fn name_is_a_path_segment_for_rbac_kinds() {
        let role = |n: &str| {
            of(
                "rbac.authorization.k8s.io",
                "ClusterRole",
                None,
                json!({ "name": n }),
            )
        };
        assert!(role("system:controller:Odd_Name").is_empty());
        assert!(role("a/b")[0].contains("may not contain '/'"));
        assert!(role("..")[0].contains("may not be '..'"));
    }

    #[test]
    fn cronjob_name_is_at_most_52_characters() {
        let cj = |n: String| of("batch", "CronJob", Some("default"), json!({ "name": n }));
        assert!(cj("a".repeat(52)).is_empty());
        assert!(cj("a".repeat(53))[0].contains("52"));
    }

    #[test]
    fn namespace_is_a_dns_label() {
        assert!(of("", "ConfigMap", Some("Bad_NS"), json!({"name": "c"}))[0]
            .starts_with("metadata.namespace: Invalid value: \"Bad_NS\""));
        assert!(of("", "ConfigMap", Some("a.b"), json!({"name": "c"})).len() == 1);
    }

    #[test]
    fn label_keys_are_qualified_names() {
        let labels = |k: &str| configmap(json!({"name": "c", "labels": { k: "v" }}));
        for good in [
            "a",
            "example.com/a",
            "a.b_c-D",
            &format!("{}/x", "a".repeat(253)),
        ] {
            assert!(labels(good).is_empty(), "{good}: {:?}", labels(good));
        }
        for bad in [
            "bad key!",
            "a/b/c",
            "/a",
            "a/",
            "Example.com/a",
            "-a",
            &"a".repeat(64),
            &format!("{}/x", "a".repeat(254)),
        ] {
            let got = labels(bad);
            assert_eq!(got.len(), 1, "{bad}: {got:?}");
            assert!(
                got[0].starts_with(&format!(
                    "metadata.labels[{}]: Invalid value",
                    serde_json::to_string(bad).unwrap()
                )),
                "{got:?}"
            );
        }
    }

    #[test]
    fn label_values_are_label_values() {
        let labels = |v: &str| configmap(json!({"name": "c", "labels": { "k": v }}));
        for good in ["", "a", "v1.2_x-Y", &"a".repeat(63)] {
            assert!(labels(good).is_empty(), "{good}");
        }
        for bad in ["-a", "a b", "a/b", &"a".repeat(64)] {
            assert_eq!(labels(bad).len(), 1, "{bad}");
        }
    }

    #[test]
    fn annotation_keys_are_qualified_names_read_lowercased() {
        let annotations =
            |k: &str| configmap(json!({"name": "c", "annotations": { k: "any value / at all" }}));
        assert!(annotations("Example.COM/Some_Key").is_empty());
        assert!(
            annotations("a/b/c")[0].starts_with("metadata.annotations[\"a/b/c\"]: Invalid value")
        );
        assert_eq!(annotations("bad key!").len(), 1);
    }

    #[test]
    fn annotations_hold_at_most_256_kib() {
        let at = |n: usize| configmap(json!({"name": "c", "annotations": { "k": "x".repeat(n) }}));
        assert!(at(TOTAL_ANNOTATION_SIZE_LIMIT - 1).is_empty());
        assert!(at(TOTAL_ANNOTATION_SIZE_LIMIT)[0].starts_with("metadata.annotations: Too long"));
    }

    #[test]
    fn key_fields_quote_the_key() {
        assert_eq!(
            key_field("metadata.labels", "a.b/c"),
            r#"metadata.labels["a.b/c"]"#
        );
        assert_eq!(key_field("m", "q\""), r#"m["q\""]"#);
    }
}
