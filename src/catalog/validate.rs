//! Validation over a whole commit: scope, namespaces, duplicates, typed decoding of the fleet APIs
//! with their own rules, and the rules that span several objects.

use super::{fleet_versions, Catalog, Class, Diagnostic, Entry, BUILTIN_NAMESPACES};
use crate::model::scope::Scope;
use crate::model::{decode, ApiObject, Problem};
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn run(
    cat: &mut Catalog,
    diags: &mut Vec<Diagnostic>,
    decoded: Option<&mut super::DecodeCache>,
) {
    register_crds(cat, diags);
    check_scopes(cat, diags);
    check_metadata(cat, diags);
    check_duplicates(cat, diags);
    let mut none = super::DecodeCache::default();
    decode_fleet_objects(cat, diags, decoded.unwrap_or(&mut none));
    super::strings::check(cat, diags);
    super::limits::check(cat, diags);
    check_envelopes(cat, diags);
    check_placement_scopes(cat, diags);
    check_overrides(cat, diags);
    check_update_runs(cat, diags);
    check_replica_set_strategies(cat, diags);
    check_declared_properties(cat, diags);
}

/// gitfleet's own rule: the ManifestWorkReplicaSets that name one Placement name it with one
/// `rolloutStrategy`, as their workloads reach each of its clusters together (OCM keeps a
/// work per replica set and paces each on its own).
fn check_replica_set_strategies(cat: &Catalog, diags: &mut Vec<Diagnostic>) {
    let mut first: BTreeMap<(Option<&str>, &str), (usize, crate::model::ocm::OcmRolloutStrategy)> =
        BTreeMap::new();
    for m in &cat.manifest_work_replica_sets {
        let ns = cat.objects[m.index].namespace.as_deref();
        for (i, r) in m.spec.spec.placement_refs.iter().enumerate() {
            let strategy = r.effective_strategy();
            match first.get(&(ns, r.name.as_str())) {
                None => {
                    first.insert((ns, r.name.as_str()), (m.index, strategy));
                }
                Some((other, s)) if *s != strategy => diags.push(cat.diagnostic(
                    m.index,
                    &format!("spec.placementRefs[{i}].rolloutStrategy"),
                    format!(
                        "differs from the rolloutStrategy {} gives Placement {:?} (gitfleet's own rule: gitfleet delivers the workloads of the replica sets of one Placement to each cluster together, so they share one rolloutStrategy)",
                        cat.objects[*other].display_name(),
                        r.name
                    ),
                )),
                Some(_) => {}
            }
        }
    }
}

/// The properties members declare: a wrong declaration is an error, the earlier spelling a
/// warning that says how to rewrite it.
fn check_declared_properties(cat: &mut Catalog, diags: &mut Vec<Diagnostic>) {
    use crate::model::member::declared_properties;
    let members = cat
        .member_clusters
        .iter()
        .map(|e| (e.index, &e.spec.metadata.annotations))
        .chain(
            cat.managed_clusters
                .iter()
                .map(|e| (e.index, &e.spec.metadata.annotations)),
        );
    let mut warnings = Vec::new();
    for (i, annotations) in members {
        let declared = declared_properties(annotations);
        for p in declared.problems {
            diags.push(cat.diagnostic(i, &p.field, p.message));
        }
        for p in declared.warnings {
            warnings.push(cat.diagnostic(i, &p.field, p.message));
        }
    }
    warnings.sort();
    cat.warnings = warnings;
}

/// CRDs in the commit define the scope of their kinds.
fn register_crds(cat: &mut Catalog, diags: &mut Vec<Diagnostic>) {
    for i in 0..cat.objects.len() {
        let o = &cat.objects[i];
        if o.gvk.group != "apiextensions.k8s.io" || o.gvk.kind != "CustomResourceDefinition" {
            continue;
        }
        let spec = o.value.get("spec");
        let get = |path: &str| {
            spec.and_then(|s| s.pointer(path))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let (group, kind, scope) = (get("/group"), get("/names/kind"), get("/scope"));
        let scope = match scope.as_deref() {
            Some("Namespaced") => Some(Scope::Namespaced),
            Some("Cluster") => Some(Scope::Cluster),
            _ => None,
        };
        match (group, kind, scope) {
            (Some(g), Some(k), Some(s)) => cat.scopes.add(&g, &k, s),
            (g, k, s) => {
                for (field, missing, msg) in [
                    ("spec.group", g.is_none(), "Required value"),
                    ("spec.names.kind", k.is_none(), "Required value"),
                    (
                        "spec.scope",
                        s.is_none(),
                        "Required value: must be Namespaced or Cluster",
                    ),
                ] {
                    if missing {
                        diags.push(cat.diagnostic(i, field, msg));
                    }
                }
            }
        }
    }
}

fn check_scopes(cat: &mut Catalog, diags: &mut Vec<Diagnostic>) {
    let declared: BTreeSet<String> = cat
        .objects
        .iter()
        .filter(|o| o.gvk.group.is_empty() && o.gvk.kind == "Namespace")
        .map(|o| o.name.clone())
        .collect();
    let declared: std::collections::HashSet<&str> = declared.iter().map(String::as_str).collect();
    // On an OCM hub every cluster has its namespace (the registration controller makes it), and
    // that is where its ManifestWorks live: a declared cluster's name is a namespace for them.
    let clusters: BTreeSet<String> = cat
        .objects
        .iter()
        .filter(|o| matches!(o.gvk.kind.as_str(), "MemberCluster" | "ManagedCluster"))
        .map(|o| o.name.clone())
        .collect();
    for i in 0..cat.objects.len() {
        let o = &cat.objects[i];
        let (group, kind) = (o.gvk.group.as_str(), o.gvk.kind.as_str());
        let cluster_namespace = |ns: &str| {
            kind == "ManifestWork"
                && group == crate::model::ocm::WORK_GROUP
                && clusters.contains(ns)
        };
        match cat.scopes.scope(group, kind) {
            None => diags.push(cat.diagnostic(
                i,
                "",
                format!(
                    "unknown scope: kind {kind} of group {group:?} is neither a built-in kind nor defined by a CustomResourceDefinition in the repository{}",
                    crate::lint::kind_hint(&cat.scopes, group, kind)
                ),
            )),
            Some(Scope::Cluster) => {
                // As kubectl does, a namespace on a cluster-scoped object is ignored.
                cat.objects[i].namespace = None;
            }
            Some(Scope::Namespaced) => match o.namespace.as_deref() {
                None => diags.push(cat.diagnostic(
                    i,
                    "metadata.namespace",
                    format!("Required value: {kind} is namespaced and must name its namespace"),
                )),
                Some(ns)
                    if !declared.contains(ns)
                        && !BUILTIN_NAMESPACES.contains(&ns)
                        && !cluster_namespace(ns) =>
                {
                    diags.push(cat.diagnostic(
                        i,
                        "metadata.namespace",
                        format!("namespace {ns:?} does not exist in the repository (no Namespace object declares it)"),
                    ))
                }
                Some(_) => {}
            },
        }
    }
}

/// Every object's metadata as the API server checks it (see [`crate::model::metadata`]). The
/// fleet APIs' models check their names themselves.
fn check_metadata(cat: &Catalog, diags: &mut Vec<Diagnostic>) {
    use crate::model::metadata::{problems, Checks};
    for (i, o) in cat.objects.iter().enumerate() {
        let checks = Checks {
            group: &o.gvk.group,
            kind: &o.gvk.kind,
            namespace: o.namespace.as_deref(),
            name: fleet_versions(&o.gvk).is_none(),
        };
        for p in problems(&o.value, checks) {
            diags.push(cat.diagnostic(i, &p.field, p.message));
        }
    }
}

fn check_duplicates(cat: &mut Catalog, diags: &mut Vec<Diagnostic>) {
    // Borrowed, hashed keys: the daemon checks every object of every commit it reads.
    let mut first: std::collections::HashMap<(&str, &str, Option<&str>, &str), usize> =
        std::collections::HashMap::with_capacity(cat.objects.len());
    let mut repeated = Vec::new();
    for (i, o) in cat.objects.iter().enumerate() {
        let key = (
            o.gvk.group.as_str(),
            o.gvk.kind.as_str(),
            o.namespace.as_deref(),
            o.name.as_str(),
        );
        if let Some(&j) = first.get(&key) {
            repeated.push((i, j));
        } else {
            first.insert(key, i);
        }
    }
    for (i, j) in repeated {
        let message = format!(
            "duplicate object: {} is already defined at {}",
            cat.objects[i].key().short(),
            cat.objects[j].origin
        );
        diags.push(cat.diagnostic(i, "metadata.name", message));
        cat.duplicates.insert(i);
    }
}

fn decode_fleet_objects(
    cat: &mut Catalog,
    diags: &mut Vec<Diagnostic>,
    decoded: &mut super::DecodeCache,
) {
    for i in 0..cat.objects.len() {
        let gvk = cat.objects[i].gvk.clone();
        let Some(versions) = fleet_versions(&gvk) else {
            continue;
        };
        if !versions.contains(&gvk.version.as_str()) {
            diags.push(cat.diagnostic(
                i,
                "apiVersion",
                format!(
                        "no kind {:?} is registered for version {:?} (accepted: {})",
                        gvk.kind,
                        gvk.api_version(),
                        versions
                            .iter()
                            .map(|v| format!("{}/{v}", gvk.group))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
            ));
            continue;
        }
        match gvk.kind.as_str() {
            "ClusterResourcePlacement" | "ResourcePlacement" if gvk.group == super::PLACEMENT => {
                push_typed(cat, i, diags, decoded, |c| &mut c.placements)
            }
            "Placement" => push_typed(cat, i, diags, decoded, |c| &mut c.ocm_placements),
            "ManifestWorkReplicaSet" => {
                push_typed(cat, i, diags, decoded, |c| {
                    &mut c.manifest_work_replica_sets
                });
                // What of OCM's work API gitfleet does not carry out is refused (17.5).
                if let Some(e) = cat
                    .manifest_work_replica_sets
                    .last()
                    .filter(|e| e.index == i)
                {
                    let template = &e.spec.spec.manifest_work_template;
                    for p in crate::model::ocm::not_built(&e.spec).into_iter().chain(
                        crate::feedback::validate("spec.manifestWorkTemplate", template),
                    ) {
                        diags.push(cat.diagnostic(i, &p.field, p.message));
                    }
                }
            }
            "ClusterResourceOverride" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.cluster_overrides)
            }
            "ResourceOverride" => push_typed(cat, i, diags, decoded, |c| &mut c.resource_overrides),
            "ClusterResourceEnvelope" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.cluster_envelopes)
            }
            "ResourceEnvelope" => push_typed(cat, i, diags, decoded, |c| &mut c.resource_envelopes),
            "MemberCluster" => push_typed(cat, i, diags, decoded, |c| &mut c.member_clusters),
            "ManagedCluster" => push_typed(cat, i, diags, decoded, |c| &mut c.managed_clusters),
            "ManagedClusterSet" => push_typed(cat, i, diags, decoded, |c| &mut c.cluster_sets),
            "ManagedClusterSetBinding" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.cluster_set_bindings)
            }
            "ClusterStagedUpdateStrategy" | "StagedUpdateStrategy" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.update_strategies)
            }
            "ClusterStagedUpdateRun" | "StagedUpdateRun" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.update_runs)
            }
            "ClusterApprovalRequest" | "ApprovalRequest" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.approval_requests)
            }
            "ClusterResourcePlacementEviction" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.evictions)
            }
            "ClusterResourcePlacementDisruptionBudget" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.disruption_budgets)
            }
            "PlacementDecision" => {
                check_typed::<crate::model::placement_decision::PlacementDecision>(cat, i, diags)
            }
            "ManifestWork" => {
                push_typed(cat, i, diags, decoded, |c| &mut c.manifest_works);
                // What of OCM's work API gitfleet does not carry out is refused (17.5).
                if let Some(e) = cat.manifest_works.last().filter(|e| e.index == i) {
                    for p in crate::model::work::not_built("spec", &e.spec.spec)
                        .into_iter()
                        .chain(crate::feedback::validate("spec", &e.spec.spec))
                    {
                        diags.push(cat.diagnostic(i, &p.field, p.message));
                    }
                }
            }
            _ => {}
        }
    }
}

/// Decodes object `i` strictly and validates it, for a kind gitfleet checks but does not use.
fn check_typed<T: ApiObject>(cat: &Catalog, i: usize, diags: &mut Vec<Diagnostic>) {
    let problems = match decode::<T>(&cat.objects[i].value) {
        Ok(typed) => typed.validate(),
        Err(p) => vec![p],
    };
    for p in problems {
        diags.push(cat.diagnostic(i, &p.field, p.message));
    }
}

/// Decodes object `i` strictly, validates it, and files it under `list` when it is sound.
fn push_typed<T: ApiObject + Clone + Send + Sync + 'static>(
    cat: &mut Catalog,
    i: usize,
    diags: &mut Vec<Diagnostic>,
    decoded: &mut super::DecodeCache,
    list: impl Fn(&mut Catalog) -> &mut Vec<Entry<T>>,
) {
    // Decoded and found sound before, from this very value.
    if let Some(typed) = decoded.get::<T>(&cat.objects[i].value) {
        list(cat).push(Entry {
            index: i,
            spec: typed,
        });
        return;
    }
    let typed: T = match decode(&cat.objects[i].value).map_err(T::decode_problem) {
        Ok(t) => t,
        Err(p) => {
            // A type error on a value YAML read as a boolean or number: say so.
            let message = match cat.yaml_hint(i, &p.field) {
                Some(hint) if p.message.starts_with("invalid type") => {
                    format!("{}; {hint}", p.message)
                }
                _ => p.message,
            };
            diags.push(cat.diagnostic(i, &p.field, message));
            return;
        }
    };
    let problems: Vec<Problem> = typed.validate();
    if problems.is_empty() {
        decoded.put(&cat.objects[i].value, typed.clone());
        list(cat).push(Entry {
            index: i,
            spec: typed,
        });
    } else {
        for p in problems {
            diags.push(cat.diagnostic(i, &p.field, p.message));
        }
    }
}

/// Envelope contents must be objects of the right scope (and namespace). KubeFleet's hub
/// admits any envelope its CRD allows; its work generator checks the carried objects when it
/// places them (`pkg/controllers/workgenerator`), so a problem there fails only that placement's
/// work. gitfleet refuses the commit instead, and says so.
fn check_envelopes(cat: &Catalog, diags: &mut Vec<Diagnostic>) {
    const AT_PLACEMENT: &str = " (gitfleet's own rule: KubeFleet's hub admits the envelope, and \
         its work generator refuses the carried object when it places it)";
    for (i, o) in cat.objects.iter().enumerate() {
        if cat.classes[i] != Class::Hub {
            continue;
        }
        if let Some(Err(problems)) = crate::model::envelope::envelope_contents(o, &cat.scopes) {
            for p in problems {
                let message = if p.field.starts_with("data.") {
                    format!("{}{AT_PLACEMENT}", p.message)
                } else {
                    p.message
                };
                diags.push(cat.diagnostic(i, &p.field, message));
            }
        }
    }
}

/// What a placement may select, by scope (see [`crate::model::placement::Placement::scope_problems`]),
/// and only kinds the hub serves: KubeFleet's webhook refuses a selector whose kind its REST
/// mapper does not know ("failed to get GVR of the selector"); here the hub's kinds are the
/// built-in ones and those of the repository's CustomResourceDefinitions.
fn check_placement_scopes(cat: &Catalog, diags: &mut Vec<Diagnostic>) {
    for e in &cat.placements {
        for (j, s) in e.spec.spec.resource_selectors.iter().enumerate() {
            if cat.scopes.scope(&s.group, &s.kind).is_none() {
                diags.push(cat.diagnostic(
                    e.index,
                    &format!("spec.resourceSelectors[{j}]"),
                    format!(
                        "failed to get GVR of the selector: kind {} of group {:?} is neither built in nor defined by a CustomResourceDefinition in the repository{}",
                        s.kind,
                        s.group,
                        crate::lint::kind_hint(&cat.scopes, &s.group, &s.kind)
                    ),
                ));
            }
        }
        for p in e.spec.scope_problems(&cat.scopes) {
            diags.push(cat.diagnostic(e.index, &p.field, p.message));
        }
    }
}

/// A resource may be selected by at most one ClusterResourceOverride and one ResourceOverride.
fn check_overrides(cat: &Catalog, diags: &mut Vec<Diagnostic>) {
    for e in &cat.cluster_overrides {
        for p in e.spec.scope_problems(&cat.scopes) {
            diags.push(cat.diagnostic(e.index, &p.field, p.message));
        }
    }
    let mut seen: BTreeMap<(String, String, Option<String>, String), &str> = BTreeMap::new();
    for e in &cat.cluster_overrides {
        for (j, s) in e.spec.spec.cluster_resource_selectors.iter().enumerate() {
            let key = (s.group.clone(), s.kind.clone(), None, s.name.clone());
            if let Some(other) = seen.insert(key, &e.spec.metadata.name) {
                diags.push(cat.diagnostic(
                    e.index,
                    &format!("spec.clusterResourceSelectors[{j}]"),
                    format!(
                        "the resource {}/{} is already selected by ClusterResourceOverride {other:?}; a resource may be selected by at most one ClusterResourceOverride",
                        s.kind, s.name
                    ),
                ));
            }
        }
    }
    let mut seen: BTreeMap<(String, String, Option<String>, String), String> = BTreeMap::new();
    for e in &cat.resource_overrides {
        let ns = cat.objects[e.index].namespace.clone();
        for (j, s) in e.spec.spec.resource_selectors.iter().enumerate() {
            let key = (s.group.clone(), s.kind.clone(), ns.clone(), s.name.clone());
            if let Some(other) = seen.insert(key, e.spec.metadata.name.clone()) {
                diags.push(cat.diagnostic(
                    e.index,
                    &format!("spec.resourceSelectors[{j}]"),
                    format!(
                        "the resource {}/{} is already selected by ResourceOverride {other:?}; a resource may be selected by at most one ResourceOverride",
                        s.kind, s.name
                    ),
                ));
            }
        }
    }
}

/// An update run must name a placement of the commit whose rollout strategy is External.
fn check_update_runs(cat: &Catalog, diags: &mut Vec<Diagnostic>) {
    use crate::model::placement::RolloutStrategyType;
    for run in &cat.update_runs {
        let ns = cat.objects[run.index].namespace.as_deref();
        let name = &run.spec.spec.placement_name;
        match cat.placement(name, ns) {
            None => diags.push(cat.diagnostic(
                run.index,
                "spec.placementName",
                format!(
                    "placement {name:?} does not exist in the repository{}",
                    crate::lint::hint(
                        name,
                        cat.placements
                            .iter()
                            .filter(|p| cat.objects[p.index].namespace.as_deref() == ns)
                            .map(|p| p.spec.metadata.name.as_str())
                    )
                ),
            )),
            Some(p) if p.spec.spec.strategy.type_ != Some(RolloutStrategyType::External) => {
                diags.push(cat.diagnostic(
                    run.index,
                    "spec.placementName",
                    format!("placement {name:?} does not have strategy type External, so it cannot be rolled out by an update run"),
                ))
            }
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::catalog::SourceFile;

    /// KubeFleet's webhook (pkg/utils/validator) maps each selector's kind through its REST
    /// mapper and refuses one it cannot map: "failed to get GVR of the selector".
    #[test]
    fn a_selector_of_a_kind_the_hub_does_not_serve_is_refused_with_the_likely_kind() {
        let doc = "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
                   metadata: {name: p}\nspec:\n  resourceSelectors:\n\
                   \x20 - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRoel, name: r}\n\
                   \x20 - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: r}\n";
        let (_, diags) = crate::analyze(&[SourceFile {
            path: "p.yaml".into(),
            content: doc.as_bytes().to_vec(),
        }]);
        let got: Vec<String> = diags
            .iter()
            .map(|d| format!("{}: {}", d.field, d.message))
            .collect();
        assert_eq!(
            got,
            [
                "spec.resourceSelectors[0]: failed to get GVR of the selector: kind ClusterRoel of group \"rbac.authorization.k8s.io\" is neither built in nor defined by a CustomResourceDefinition in the repository (did you mean \"ClusterRole\"?)"
            ]
        );
    }
}
