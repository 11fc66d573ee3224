//! Label and field selectors in their query-string form (`app=web,tier in (a,b),!legacy`), as
//! list, watch and deletecollection take them.

use std::collections::BTreeSet;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(input: &str) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        for term in split_terms(input)? {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_term(term)?);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub fn matches(&self, labels: &Value) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Eq(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEq(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Splits on commas outside parentheses.
fn split_terms(input: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unexpected ')' in selector {input:?}"));
                }
            }
            ',' if depth == 0 => {
                out.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced parentheses in selector {input:?}"));
    }
    out.push(&input[start..]);
    Ok(out)
}

fn parse_term(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        check_key(key)?;
        return Ok(Requirement::NotExists(key.to_string()));
    }
    for (op, ctor) in [
        (
            "!=",
            Requirement::NotEq as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Eq),
        ("=", Requirement::Eq),
    ] {
        if let Some((k, v)) = term.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            check_key(k)?;
            check_value(v)?;
            return Ok(ctor(k.to_string(), v.to_string()));
        }
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = words[0];
        let rest = words[1].trim_start();
        for (op, negated) in [("notin", true), ("in", false)] {
            if let Some(list) = rest.strip_prefix(op) {
                let list = list.trim();
                let inner = list
                    .strip_prefix('(')
                    .and_then(|l| l.strip_suffix(')'))
                    .ok_or_else(|| {
                        format!("found {list:?}, expected: '(' in selector term {term:?}")
                    })?;
                check_key(key)?;
                let values: BTreeSet<String> = inner
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect();
                for v in &values {
                    check_value(v)?;
                }
                return Ok(if negated {
                    Requirement::NotIn(key.to_string(), values)
                } else {
                    Requirement::In(key.to_string(), values)
                });
            }
        }
        return Err(format!("unable to parse requirement: {term:?}"));
    }
    check_key(term)?;
    Ok(Requirement::Exists(term.to_string()))
}

fn check_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(format!("invalid label key {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"))
    }
}

fn check_value(v: &str) -> Result<(), String> {
    let ok = v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!("invalid label value: {v:?}"))
    }
}

/// A parsed field selector: `metadata.name=x,spec.nodeName!=n1`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses a selector; `supported` says which field paths the resource can be selected by.
    pub fn parse(input: &str, supported: &[&str]) -> Result<FieldSelector, String> {
        let mut out = Vec::new();
        for term in input.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            out.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// Whether an object of this name and namespace matches, when the selector reads no other
    /// field (`None` when it does): found without the object.
    pub fn matches_name(&self, namespace: &str, name: &str) -> Option<bool> {
        self.0.iter().try_fold(true, |all, (field, equal, want)| {
            let got = match field.as_str() {
                "metadata.name" => name,
                "metadata.namespace" => namespace,
                _ => return None,
            };
            Some(all && ((got == want) == *equal))
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, want)| {
            let got = field
                .split('.')
                .try_fold(object, |v, seg| v.get(seg))
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (got == *want) == *equal
        })
    }
}

/// The field paths a resource may be selected by, as the API server allows them.
pub fn supported_fields(group: &str, plural: &str) -> Vec<&'static str> {
    let mut out = vec!["metadata.name", "metadata.namespace"];
    match (group, plural) {
        ("", "pods") => out.extend([
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]),
        ("", "nodes") => out.push("spec.unschedulable"),
        ("", "secrets") => out.push("type"),
        ("", "namespaces") => out.push("status.phase"),
        ("", "events") => out.extend([
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]),
        ("apps", "replicasets") => out.push("status.replicas"),
        ("batch", "jobs") => out.push("status.successful"),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_match_like_kubernetes() {
        let labels = json!({"app": "web", "tier": "frontend", "env": "prod"});
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=web,tier=backend", false),
            ("tier in (frontend, backend)", true),
            ("tier notin (frontend)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("missing!=x", true),
            ("app=web,tier in (frontend),!legacy", true),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&labels), want, "{sel}");
        }
        assert!(!LabelSelector::parse("app=web")
            .unwrap()
            .matches(&Value::Null));
    }

    #[test]
    fn bad_label_selectors_are_errors() {
        for sel in ["app in web", "a b c", "tier in (x", "-bad=1", "k=v v"] {
            assert!(LabelSelector::parse(sel).is_err(), "{sel}");
        }
    }

    #[test]
    fn field_selectors_match_and_refuse_unknown_fields() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}});
        let fields = supported_fields("", "pods");
        assert!(FieldSelector::parse("metadata.name=p", &fields)
            .unwrap()
            .matches(&pod));
        assert!(FieldSelector::parse("spec.nodeName!=n2", &fields)
            .unwrap()
            .matches(&pod));
        assert!(!FieldSelector::parse("metadata.namespace==x", &fields)
            .unwrap()
            .matches(&pod));
        let err = FieldSelector::parse("spec.image=x", &fields).unwrap_err();
        assert_eq!(err, "field label not supported: spec.image");
    }

    /// A selector of name and namespace only is answered from them, as the object would
    /// answer it; any other field needs the object.
    #[test]
    fn name_and_namespace_selectors_need_no_object() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}});
        let fields = supported_fields("", "pods");
        for sel in [
            "",
            "metadata.name=p",
            "metadata.name!=p",
            "metadata.namespace==ns,metadata.name=q",
            "metadata.namespace!=x,metadata.name=p",
        ] {
            let s = FieldSelector::parse(sel, &fields).unwrap();
            assert_eq!(s.matches_name("ns", "p"), Some(s.matches(&pod)), "{sel}");
        }
        let by_node = FieldSelector::parse("metadata.name=p,spec.nodeName=n1", &fields).unwrap();
        assert_eq!(by_node.matches_name("ns", "p"), None);
    }
}
