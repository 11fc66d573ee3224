//! What a client learns before it talks about objects: `/version`, legacy discovery (`/api`,
//! `/apis`, `/api/v1`, `/apis/{group}[/{version}]`), aggregated discovery (`apidiscovery.k8s.io/v2`
//! and `v2beta1`, chosen by the `Accept` header as kubectl and kube's `run_aggregated` ask for it),
//! and a minimal OpenAPI v3 (paths with their PATCH parameters and group-version-kinds, which is
//! what kubectl reads to learn that the server validates fields itself). No schemas are served.

use serde_json::{json, Value};

use super::resources::{api_version, Registry, ResourceType};

pub fn version(git_version: &str) -> Value {
    let (major, minor) = super::fleet_file::parse_version(git_version).unwrap_or((1, 33));
    json!({
        "major": major.to_string(),
        "minor": minor.to_string(),
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
        "emulationMajor": major.to_string(),
        "emulationMinor": minor.to_string(),
        "minCompatibilityMajor": major.to_string(),
        "minCompatibilityMinor": (minor.saturating_sub(1)).to_string(),
    })
}

/// Which aggregated-discovery version the `Accept` header asks for, if any.
pub fn aggregated_version(accept: Option<&str>) -> Option<&'static str> {
    let accept = accept?;
    for want in ["v2", "v2beta1"] {
        let asked = accept.split(',').any(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            params.contains(&"g=apidiscovery.k8s.io")
                && params.contains(&format!("v={want}").as_str())
                && params.contains(&"as=APIGroupDiscoveryList")
        });
        if asked {
            return Some(want);
        }
    }
    None
}

pub fn aggregated_content_type(v: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList")
}

/// `GET /api` (legacy).
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_entry(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `GET /apis` (legacy).
pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .map(|g| group_entry(&g.name, &g.versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/{group}`.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let g = reg.groups().into_iter().find(|g| g.name == name)?;
    let mut v = group_entry(&g.name, &g.versions);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

/// `GET /api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if !reg.serves_version(group, version) {
        return None;
    }
    let mut resources = Vec::new();
    for r in reg.resources(group, version) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs(),
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        for sub in &r.subresources {
            let (kind, g, v) = sub_kind(&r, sub);
            let mut e = json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": sub_verbs(sub),
            });
            if matches!(sub.as_str(), "scale" | "eviction" | "token") {
                e["group"] = json!(g);
                e["version"] = json!(v);
            }
            resources.push(e);
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": api_version(group, version),
        "resources": resources,
    }))
}

fn sub_kind(r: &ResourceType, sub: &str) -> (String, String, String) {
    if sub == "scale" {
        ("Scale".into(), "autoscaling".into(), "v1".into())
    } else if sub == "eviction" {
        ("Eviction".into(), "policy".into(), "v1".into())
    } else if sub == "token" {
        (
            "TokenRequest".into(),
            "authentication.k8s.io".into(),
            "v1".into(),
        )
    } else {
        (r.kind.clone(), r.group.clone(), r.version.clone())
    }
}

fn sub_verbs(sub: &str) -> Vec<&'static str> {
    match sub {
        "finalize" => vec!["update"],
        "eviction" | "token" => vec!["create"],
        "log" => vec!["get"],
        _ => vec!["get", "patch", "update"],
    }
}

/// Aggregated discovery for the core group (`/api`) or every named group (`/apis`).
pub fn aggregated(reg: &Registry, core: bool, version: &str) -> Value {
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        reg.groups()
            .into_iter()
            .map(|g| (g.name, g.versions))
            .collect()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(name, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = reg
                        .resources(name, v)
                        .iter()
                        .map(|r| {
                            let subs: Vec<Value> = r
                                .subresources
                                .iter()
                                .map(|s| {
                                    let (kind, g, sv) = sub_kind(r, s);
                                    json!({"subresource": s, "responseKind": {"group": g, "version": sv, "kind": kind}, "verbs": sub_verbs(s)})
                                })
                                .collect();
                            let mut e = json!({
                                "resource": r.plural,
                                "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": r.singular,
                                "verbs": r.verbs(),
                            });
                            if !r.short_names.is_empty() {
                                e["shortNames"] = json!(r.short_names);
                            }
                            if !r.categories.is_empty() {
                                e["categories"] = json!(r.categories);
                            }
                            if !subs.is_empty() {
                                e["subresources"] = json!(subs);
                            }
                            e
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": name, "creationTimestamp": null}, "versions": vs})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// `GET /openapi/v3`: one entry per group version, each with a hash of what it serves (so a
/// client's cache stays valid until a CRD changes it).
pub fn openapi_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(String, String)> = vec![(String::new(), "v1".into())];
    for g in reg.groups() {
        for v in g.versions {
            gvs.push((g.name.clone(), v));
        }
    }
    for (g, v) in gvs {
        let p = if g.is_empty() {
            format!("api/{v}")
        } else {
            format!("apis/{g}/{v}")
        };
        let doc = openapi_group_version(reg, &g, &v)
            .unwrap_or_default()
            .to_string();
        let hash = doc.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash:016X}")}),
        );
    }
    json!({"paths": paths})
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`: paths and operations,
/// without schemas.
pub fn openapi_group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if !reg.serves_version(group, version) {
        return None;
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let param = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    let mut paths = serde_json::Map::new();
    for r in reg.resources(group, version) {
        if r.review {
            // Reviews are create-only; their OpenAPI path is left out.
            continue;
        }
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let base = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{prefix}/{}", r.plural)
        };
        let op = |action: &str, verb: &str, extra: &[&str]| {
            let mut params: Vec<Value> = vec![param("pretty")];
            params.extend(extra.iter().map(|p| param(p)));
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let write = ["dryRun", "fieldManager", "fieldValidation"];
        let patch = ["dryRun", "fieldManager", "fieldValidation", "force"];
        paths.insert(
            base.clone(),
            json!({
                "get": op("list", "list", &["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch"]),
                "post": op("post", "create", &write),
                "delete": op("deletecollection", "deleteCollectionOf", &["dryRun", "labelSelector", "fieldSelector"]),
            }),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": op("get", "read", &[]),
                "put": op("put", "replace", &write),
                "patch": op("patch", "patch", &patch),
                "delete": op("delete", "delete", &["dryRun", "gracePeriodSeconds", "propagationPolicy"]),
            }),
        );
        for sub in &r.subresources {
            if matches!(sub.as_str(), "finalize" | "eviction" | "log" | "token") {
                continue;
            }
            paths.insert(
                format!("{base}/{{name}}/{sub}"),
                json!({
                    "get": op("get", "read", &[]),
                    "put": op("put", "replace", &write),
                    "patch": op("patch", "patch", &patch),
                }),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (gitfleet sim)", "version": version},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_discovery_is_chosen_by_accept() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_version(Some(kubectl)), Some("v2"));
        assert_eq!(
            aggregated_version(Some(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            )),
            Some("v2beta1")
        );
        assert_eq!(aggregated_version(Some("application/json")), None);
        assert_eq!(aggregated_version(None), None);
    }

    #[test]
    fn legacy_lists_carry_subresources_and_preferred_versions() {
        let reg = Registry::default();
        let apps = resource_list(&reg, "apps", "v1").unwrap();
        let names: Vec<&str> = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"deployments")
                && names.contains(&"deployments/status")
                && names.contains(&"deployments/scale")
        );
        let groups = group_list(&reg);
        let autoscaling = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "autoscaling")
            .unwrap();
        assert_eq!(autoscaling["preferredVersion"]["version"], "v2");
        assert!(resource_list(&reg, "apps", "v9").is_none());
    }

    #[test]
    fn aggregated_core_group_has_an_empty_name() {
        let reg = Registry::default();
        let core = aggregated(&reg, true, "v2");
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        let pods = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap()
            .clone();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["responseKind"]["kind"], "Pod");
    }

    #[test]
    fn openapi_declares_field_validation_on_patch() {
        let reg = Registry::default();
        let doc = openapi_group_version(&reg, "", "v1").unwrap();
        let op = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "ConfigMap");
        assert!(op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation"));
    }
}
