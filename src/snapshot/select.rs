//! Resource selection for one placement, as KubeFleet's `SelectResourcesForPlacement` does
//! (KubeFleet's resource selection): selectors, selection scopes, skipped and disabled objects, reserved
//! namespaces, duplicates, sanitisation and the deterministic order.
//!
//! Every error here is met at schedule time, not at admission: KubeFleet's hub admits the
//! placement, and its placement controller reports the error on it (`Scheduled=False`,
//! `InvalidResourceSelectors`) and takes no snapshot (pkg/controllers/placement/controller.go
//! `handleUpdate`), so gitfleet holds that placement and serves the rest of the commit
//! ([`super::invalid_selections`]). The user errors of kubefleet-dev/kubefleet
//! pkg/utils/controller/resource_selector_resolver.go, each a `NewUserError`:
//! - a kind the hub does not know (`fetchResources`: "failed to get GVR of the selector");
//! - a namespaced kind in a CRP, a cluster-scoped kind in an RP (`fetchResources`), a Namespace
//!   in an RP (`gatherSelectedResource`);
//! - a reserved namespace taken with its contents, named or by label
//!   (`fetchAllResourcesInOneNamespace`: "namespace %s is not allowed to propagate");
//! - `NamespaceWithResourceSelectors` with no namespace selected (`gatherSelectedResource`);
//! - a resource selected twice (`gatherSelectedResource`: "found duplicate resource").
//!
//! A selector of a disabled kind selects nothing, with no error, as KubeFleet skips it
//! (`IsResourceDisabled`). Where gitfleet is stricter than that code, on purpose: a reserved
//! namespace named with `NamespaceOnly` is an error here, and one a `NamespaceOnly` label selector matches is
//! skipped, where KubeFleet's generic fetch (`fetchResources`, `ShouldPropagateObj`) has no
//! reserved-namespace check and would select the namespace object (its API doc says reserved
//! namespaces are never selected: KubeFleet's docs and code differ here). gitfleet keeps to the API
//! doc there: a delivered `kube-*` Namespace would be pruned from every member when the placement
//! goes, which no commit should be able to ask for.

use super::sanitize::sanitize_shared;
use crate::catalog::Catalog;
use crate::model::placement::{Placement, ResourceSelectorTerm, SelectionScope};
use crate::model::scope::Scope;
use crate::model::{Gvk, Object, ObjectKey, Problem};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// An object a placement selected, sanitised for snapshotting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectedResource {
    pub gvk: Gvk,
    pub namespace: Option<String>,
    pub name: String,
    /// Shared with the catalog when sanitising had nothing to remove.
    #[serde(with = "crate::model::object::shared_value")]
    pub value: Arc<Value>,
}

impl SelectedResource {
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(
            &self.gvk.group,
            &self.gvk.kind,
            self.namespace.as_deref(),
            &self.name,
        )
    }
}

/// The identifier `status.selectedResources` lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceIdentifier {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl From<&SelectedResource> for ResourceIdentifier {
    fn from(r: &SelectedResource) -> Self {
        Self {
            group: r.gvk.group.clone(),
            version: r.gvk.version.clone(),
            kind: r.gvk.kind.clone(),
            name: r.name.clone(),
            namespace: r.namespace.clone(),
        }
    }
}

/// Namespaces no placement may select by name (`fleet-*`, `kube-*`).
pub fn is_reserved_namespace(name: &str) -> bool {
    name.starts_with("fleet-") || name.starts_with("kube-")
}

/// Kinds KubeFleet never propagates by default (its disabled-GVK list).
pub fn is_disabled(gvk: &Gvk) -> bool {
    let envelope = gvk.group == "placement.kubernetes-fleet.io"
        && matches!(
            gvk.kind.as_str(),
            "ClusterResourceEnvelope" | "ResourceEnvelope"
        );
    if envelope {
        return false;
    }
    matches!(
        gvk.group.as_str(),
        "cluster.kubernetes-fleet.io"
            | "placement.kubernetes-fleet.io"
            | "events.k8s.io"
            | "coordination.k8s.io"
            | "metrics.k8s.io"
    ) || (gvk.group.is_empty() && matches!(gvk.kind.as_str(), "Pod" | "Node" | "Event"))
}

/// Objects KubeFleet always skips: generated or owned by controllers, or about to disappear.
fn is_skipped(o: &Object, cat: &Catalog) -> bool {
    let v = &o.value;
    if v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return true;
    }
    let owned = v
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let (g, k) = (o.gvk.group.as_str(), o.gvk.kind.as_str());
    match (g, k) {
        ("apps", "ReplicaSet") | ("apps", "ControllerRevision") => owned,
        ("", "ConfigMap") => o.name == "kube-root-ca.crt",
        ("", "ServiceAccount") => o.name == "default",
        ("", "Secret") => {
            v.get("type").and_then(Value::as_str) == Some("kubernetes.io/service-account-token")
        }
        ("", "Endpoints") => cat.objects.iter().any(|s| {
            s.gvk.group.is_empty()
                && s.gvk.kind == "Service"
                && s.name == o.name
                && s.namespace == o.namespace
        }),
        ("discovery.k8s.io", "EndpointSlice") => v
            .pointer("/metadata/labels/endpointslice.kubernetes.io~1managed-by")
            .is_some(),
        _ => false,
    }
}

/// Selects the resources of `placement` from the commit, sanitised and in KubeFleet's order.
/// Errors are user errors (KubeFleet's `InvalidResourceSelectors`), each naming its selector.
pub fn select(cat: &Catalog, placement: &Placement) -> Result<Vec<SelectedResource>, Vec<Problem>> {
    let rp_namespace = if placement.is_namespaced() {
        Some(placement.metadata.namespace.clone().unwrap_or_default())
    } else {
        None
    };
    let selectors = &placement.spec.resource_selectors;
    // NamespaceWithResourceSelectors: namespaced kinds of the other selectors resolve in that namespace.
    let scoped_ns = selectors
        .iter()
        .find(|s| s.is_namespace() && s.scope() == SelectionScope::NamespaceWithResourceSelectors)
        .and_then(|s| s.name.clone());
    let mut errors = Vec::new();
    let mut picked: Vec<&Object> = Vec::new();
    for (i, sel) in selectors.iter().enumerate() {
        let field = format!("spec.resourceSelectors[{i}]");
        let gk = Gvk::new(&sel.group, &sel.version, &sel.kind);
        // KubeFleet skips a selector of a disabled kind, with no error (resource_selector_
        // resolver.go gatherSelectedResource: `IsResourceDisabled` -> "Skip select resource").
        if is_disabled(&gk) {
            continue;
        }
        let scope = cat.scopes.scope(&sel.group, &sel.kind);
        let Some(scope) = scope else {
            errors.push(Problem::new(
                &field,
                format!(
                    "unknown resource kind {} of group {:?}: neither built in nor defined by a CustomResourceDefinition in the repository{}",
                    sel.kind, sel.group, crate::lint::kind_hint(&cat.scopes, &sel.group, &sel.kind)
                ),
            ));
            continue;
        };
        match (&rp_namespace, scope) {
            (Some(_), Scope::Cluster) => {
                errors.push(Problem::new(
                    &field,
                    format!("a ResourcePlacement can only select namespaced resources, but {} is cluster-scoped", sel.kind),
                ));
                continue;
            }
            (None, Scope::Namespaced) if scoped_ns.is_none() => {
                errors.push(Problem::new(
                    &field,
                    format!("a ClusterResourcePlacement can only select cluster-scoped resources, but {} is namespaced", sel.kind),
                ));
                continue;
            }
            _ => {}
        }
        let namespace_filter = match scope {
            Scope::Namespaced => rp_namespace.clone().or(scoped_ns.clone()),
            Scope::Cluster => None,
        };
        if sel.is_namespace() {
            if let Some(name) = &sel.name {
                if is_reserved_namespace(name) {
                    errors.push(Problem::new(
                        format!("{field}.name"),
                        format!("namespace {name:?} is reserved (fleet-* and kube-* namespaces are never propagated)"),
                    ));
                    continue;
                }
            }
        }
        let candidates: Vec<&Object> = match &sel.name {
            Some(name) => cat.hub_objects_named(&sel.group, &sel.kind, name).collect(),
            None => cat.hub_objects_of_kind(&sel.group, &sel.kind).collect(),
        };
        let mut matches: Vec<&Object> = candidates
            .into_iter()
            .filter(|o| namespace_filter.is_none() || o.namespace == namespace_filter)
            .filter(|o| term_matches(sel, o))
            .filter(|o| !is_skipped(o, cat))
            .collect();
        if sel.is_namespace() {
            // KubeFleet takes every namespace a label selector matches with its contents, and a
            // reserved one is a user error as when it is named (pkg/utils/controller/
            // resource_selector_resolver.go, fetchNamespaceResources →
            // fetchAllResourcesInOneNamespace). NamespaceOnly and
            // NamespaceWithResourceSelectors go through its generic fetch, which has no such
            // check; gitfleet skips reserved namespaces there, as it always did.
            let reserved: Vec<&str> = matches
                .iter()
                .filter(|o| is_reserved_namespace(&o.name))
                .map(|o| o.name.as_str())
                .collect();
            if !reserved.is_empty() && sel.scope() == SelectionScope::NamespaceWithResources {
                for name in reserved {
                    errors.push(Problem::new(
                        format!("{field}.labelSelector"),
                        format!("selects namespace {name:?}, which is reserved (fleet-* and kube-* namespaces are never propagated)"),
                    ));
                }
                continue;
            }
            matches.retain(|o| !is_reserved_namespace(&o.name));
        }
        if sel.is_namespace()
            && sel.scope() == SelectionScope::NamespaceWithResourceSelectors
            && matches.is_empty()
        {
            errors.push(Problem::new(
                format!("{field}.name"),
                format!(
                    "namespace {:?} does not exist in the repository",
                    sel.name.clone().unwrap_or_default()
                ),
            ));
            continue;
        }
        for ns in matches {
            picked.push(ns);
            if sel.is_namespace() && sel.scope() == SelectionScope::NamespaceWithResources {
                picked.extend(namespace_contents(cat, &ns.name));
            }
        }
    }
    let mut seen = BTreeSet::new();
    for o in &picked {
        if !seen.insert(o.key()) {
            errors.push(Problem::new(
                "spec.resourceSelectors",
                format!(
                    "found duplicate resource {}: it is selected more than once",
                    o.key().short()
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut out: Vec<SelectedResource> = picked
        .into_iter()
        .map(|o| SelectedResource {
            gvk: o.gvk.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            value: sanitize_shared(&o.gvk, &o.value),
        })
        .collect();
    out.sort_by_key(order_key);
    Ok(out)
}

fn term_matches(sel: &ResourceSelectorTerm, o: &Object) -> bool {
    match (&sel.name, &sel.label_selector) {
        (Some(name), _) => &o.name == name,
        (None, Some(ls)) => ls.matches(&o.labels()),
        (None, None) => true,
    }
}

/// Every selectable namespaced object in namespace `ns`.
fn namespace_contents<'a>(cat: &'a Catalog, ns: &'a str) -> impl Iterator<Item = &'a Object> + 'a {
    cat.hub_objects_in(ns)
        .filter(move |o| !is_disabled(&o.gvk) && !is_skipped(o, cat))
}

/// KubeFleet's fixed kind order; unknown kinds come after all known ones.
const KIND_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// `(kind rank, GV for known kinds or full GVK for unknown ones, namespace/name)`.
fn order_key(r: &SelectedResource) -> (usize, String, String) {
    let rank = KIND_ORDER.iter().position(|k| *k == r.gvk.kind);
    let tie = match rank {
        Some(_) => r.gvk.api_version(),
        None => format!("{}/{}", r.gvk.api_version(), r.gvk.kind),
    };
    let id = format!("{}/{}", r.namespace.as_deref().unwrap_or(""), r.name);
    (rank.unwrap_or(KIND_ORDER.len()), tie, id)
}
