//! Likely mistakes in a commit that is valid: a selector that selects nothing, an override or
//! an update run naming a placement or strategy that does not exist, a cluster named in a
//! policy that is not a member. KubeFleet's hub admits all of these (an override for a missing
//! placement is simply never used), so they are warnings, not diagnostics: `validate`, `plan`
//! and the daemon's status show them, and only `--strict` makes them fail a command.
//!
//! Also the "did you mean" of a misspelled kind, field or name ([`did_you_mean`]), which
//! diagnostics use as well. Pure: takes the catalog, returns warnings located as diagnostics
//! are (`file:line: Kind/name: field: message`); knows nothing of how they are shown.

use crate::catalog::{Catalog, Diagnostic};
use crate::model::placement::Placement;
use crate::model::{PlacementKey, PlacementKind};
use std::collections::BTreeSet;

/// Every likely mistake of `cat`, sorted by file and line.
pub fn lint(cat: &Catalog) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    selectors_that_select_nothing(cat, &mut out);
    clusters_that_are_not_members(cat, &mut out);
    overrides_of_missing_placements(cat, &mut out);
    runs_of_missing_strategies(cat, &mut out);
    out.sort();
    out.dedup();
    out
}

/// The closest of `candidates` to `word`, when it is close enough to be a likely typo: at
/// least 0.8 Jaro-Winkler similarity (which favours a shared prefix, as typos of names keep
/// one), or one edit apart. Case differences count as close.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = word.to_lowercase();
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| {
            let cl = c.to_lowercase();
            let score = if cl == lower {
                2.0
            } else if strsim::levenshtein(&lower, &cl) <= 1 {
                1.5
            } else {
                strsim::jaro_winkler(&lower, &cl)
            };
            (score, c)
        })
        .filter(|(score, _)| *score >= 0.8)
        // Highest score; ties to the first name in order, so the answer is deterministic.
        .fold(None::<(f64, &str)>, |best, (s, c)| match best {
            Some((bs, bc)) if bs > s || (bs == s && bc <= c) => Some((bs, bc)),
            _ => Some((s, c)),
        })
        .map(|(_, c)| c)
}

/// ` (did you mean "x"?)`, or nothing.
pub fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    did_you_mean(word, candidates)
        .map(|c| format!(" (did you mean {c:?}?)"))
        .unwrap_or_default()
}

/// ` (did you mean "Deployment"?)` for a kind of `group` close to `kind`, or nothing.
pub fn kind_hint(scopes: &crate::model::scope::ScopeTable, group: &str, kind: &str) -> String {
    use crate::model::helm_release as release;
    if release::API_VERSION.split('/').next() == Some(group) && kind == release::KIND {
        return format!(
            " (a {kind} is read only from a file named {}, where helm renders it)",
            release::FILE_NAME
        );
    }
    let mut kinds: Vec<&str> = scopes.kinds_of(group).collect();
    kinds.sort_unstable();
    hint(kind, kinds)
}

/// serde's `unknown field `x`, expected one of `a`, `b`` with the likely one named: serde
/// lists the fields it knows but leaves the reader to find the typo among them.
pub fn suggest_field(message: &str) -> Option<String> {
    let rest = message.split("unknown field `").nth(1)?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected ")?.1;
    let known: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| !s.is_empty())
        .collect();
    did_you_mean(field, known.iter().copied()).map(|c| format!("did you mean `{c}`?"))
}

/// Adds [`suggest_field`]'s hint to each diagnostic of an unknown field.
pub fn with_field_hints(mut diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    for d in &mut diags {
        if let Some(h) = suggest_field(&d.message) {
            if !d.message.contains(&h) {
                d.message = format!("{} ({h})", d.message);
            }
        }
    }
    diags
}

/// A resource selector whose placement would be selected only by it, and that selects no
/// object of its kind: the placement then silently delivers less than its author meant (a
/// misspelled namespace removes the application from every cluster). A selector the hub
/// rejects is not among these: [`crate::snapshot::invalid_selections`] reports it.
fn selectors_that_select_nothing(cat: &Catalog, out: &mut Vec<Diagnostic>) {
    for entry in &cat.placements {
        let placement = &entry.spec;
        let selectors = &placement.spec.resource_selectors;
        // The namespace of NamespaceWithResourceSelectors resolves the other selectors: keep
        // it beside each one tried alone.
        let scoping = selectors.iter().position(|s| {
            s.is_namespace()
                && s.scope()
                    == crate::model::placement::SelectionScope::NamespaceWithResourceSelectors
        });
        for (i, sel) in selectors.iter().enumerate() {
            let mut alone: Placement = placement.clone();
            alone.spec.resource_selectors = match scoping {
                Some(s) if s != i => vec![selectors[s].clone(), sel.clone()],
                _ => vec![sel.clone()],
            };
            let Ok(selected) = crate::snapshot::select(cat, &alone) else {
                continue;
            };
            if crate::snapshot::is_disabled(&crate::model::Gvk::new(
                &sel.group,
                &sel.version,
                &sel.kind,
            )) {
                continue;
            }
            let of_kind = selected
                .iter()
                .any(|r| r.gvk.group == sel.group && r.gvk.kind == sel.kind);
            if of_kind {
                continue;
            }
            let field = format!("spec.resourceSelectors[{i}]");
            let (field, message) = match &sel.name {
                Some(name) => {
                    let names: BTreeSet<&str> = cat
                        .hub_objects_of_kind(&sel.group, &sel.kind)
                        .map(|o| o.name.as_str())
                        .collect();
                    (
                        format!("{field}.name"),
                        format!(
                            "selects nothing: no {} named {name:?} in the commit{}; this selector delivers nothing",
                            sel.kind,
                            hint(name, names)
                        ),
                    )
                }
                None => (
                    field,
                    format!(
                        "selects nothing: no {} in the commit matches it; this selector delivers nothing",
                        sel.kind
                    ),
                ),
            };
            out.push(cat.diagnostic(entry.index, &field, message));
        }
    }
}

/// The names of the fleet's members: KubeFleet MemberClusters and OCM ManagedClusters.
fn members(cat: &Catalog) -> BTreeSet<&str> {
    cat.member_clusters
        .iter()
        .map(|m| cat.objects[m.index].name.as_str())
        .chain(
            cat.managed_clusters
                .iter()
                .map(|m| cat.objects[m.index].name.as_str()),
        )
        .collect()
}

/// `clusterNames` of a policy naming a cluster the commit declares no member for: KubeFleet
/// reports it unschedulable there and places on the others.
fn clusters_that_are_not_members(cat: &Catalog, out: &mut Vec<Diagnostic>) {
    let members = members(cat);
    for entry in &cat.placements {
        let Some(policy) = &entry.spec.spec.policy else {
            continue;
        };
        for (i, name) in policy.cluster_names.iter().enumerate() {
            if members.contains(name.as_str()) {
                continue;
            }
            out.push(cat.diagnostic(
                entry.index,
                &format!("spec.policy.clusterNames[{i}]"),
                format!(
                    "cluster {name:?} is not a member of the fleet (no MemberCluster of that name in the commit){}; nothing is placed on it",
                    hint(name, members.iter().copied())
                ),
            ));
        }
    }
}

/// The ids of the KubeFleet placements of `cat`, for suggestions.
fn placement_ids(cat: &Catalog) -> Vec<PlacementKey> {
    cat.placements
        .iter()
        .map(|e| cat.placement_key(e))
        .collect()
}

/// The placement an override or run names, as a key, and whether the commit has it.
fn missing_placement(
    cat: &Catalog,
    kind: PlacementKind,
    namespace: Option<&str>,
    name: &str,
) -> Option<(PlacementKey, String)> {
    let namespace = match kind {
        PlacementKind::ClusterResourcePlacement => None,
        _ => namespace,
    };
    let key = PlacementKey::new(kind, namespace, name);
    let found = cat
        .placement(name, namespace)
        .is_some_and(|e| e.spec.kind == kind);
    if found {
        return None;
    }
    let ids: Vec<String> = placement_ids(cat)
        .iter()
        .filter(|k| k.kind == kind)
        .map(ToString::to_string)
        .collect();
    let hint = hint(&key.to_string(), ids.iter().map(String::as_str));
    Some((key, hint))
}

/// An override limited to a placement the commit does not have applies to nothing.
fn overrides_of_missing_placements(cat: &Catalog, out: &mut Vec<Diagnostic>) {
    let cluster = cat
        .cluster_overrides
        .iter()
        .filter_map(|e| Some((e.index, e.spec.spec.placement.as_ref()?)));
    let namespaced = cat
        .resource_overrides
        .iter()
        .filter_map(|e| Some((e.index, e.spec.spec.placement.as_ref()?)));
    for (index, placement) in cluster.chain(namespaced) {
        let kind = match placement.scope() {
            crate::model::overrides::PlacementScope::Cluster => {
                PlacementKind::ClusterResourcePlacement
            }
            crate::model::overrides::PlacementScope::Namespaced => PlacementKind::ResourcePlacement,
        };
        let namespace = cat.objects[index].namespace.as_deref();
        if let Some((key, hint)) = missing_placement(cat, kind, namespace, &placement.name) {
            out.push(cat.diagnostic(
                index,
                "spec.placement.name",
                format!(
                    "names placement {key}, which is not in the commit{hint}; the override applies to nothing"
                ),
            ));
        }
    }
}

/// An update run naming a strategy that does not exist never initialises, so the change it
/// was meant to deliver waits.
fn runs_of_missing_strategies(cat: &Catalog, out: &mut Vec<Diagnostic>) {
    for run in &cat.update_runs {
        let namespace = cat.objects[run.index].namespace.as_deref();
        // A run of a missing placement is an error of the catalog already.
        let spec = &run.spec.spec;
        let strategies: BTreeSet<&str> = cat
            .update_strategies
            .iter()
            .filter(|s| cat.objects[s.index].namespace.as_deref() == namespace)
            .map(|s| cat.objects[s.index].name.as_str())
            .collect();
        let name = spec.staged_rollout_strategy_name.as_str();
        if !strategies.contains(name) {
            let what = if namespace.is_some() {
                "StagedUpdateStrategy"
            } else {
                "ClusterStagedUpdateStrategy"
            };
            out.push(cat.diagnostic(
                run.index,
                "spec.stagedRolloutStrategyName",
                format!(
                    "names strategy {name:?}, but the commit has no {what} of that name{}; the run cannot start",
                    hint(name, strategies.iter().copied())
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::SourceFile;

    #[test]
    fn a_helm_release_outside_its_file_is_told_where_it_belongs() {
        let scopes = crate::model::scope::ScopeTable::builtin();
        assert_eq!(
            kind_hint(&scopes, "gitfleet.io", "HelmRelease"),
            " (a HelmRelease is read only from a file named helmrelease.yaml, where helm renders it)"
        );
        // Flux's HelmRelease is a hub object like any other.
        assert_eq!(
            kind_hint(&scopes, "helm.toolkit.fluxcd.io", "HelmRelease"),
            ""
        );
    }

    fn load(docs: &str) -> Catalog {
        let (cat, diags) = Catalog::load(&[SourceFile {
            path: "fleet.yaml".into(),
            content: docs.as_bytes().to_vec(),
        }]);
        assert!(diags.is_empty(), "{diags:?}");
        cat
    }

    const BASE: &str = "
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: cluster.kubernetes-fleet.io/v1
kind: MemberCluster
metadata: {name: east-1}
spec: {identity: {name: x, kind: ServiceAccount, namespace: fleet-system}}
---
apiVersion: cluster.kubernetes-fleet.io/v1
kind: MemberCluster
metadata: {name: west-1}
spec: {identity: {name: x, kind: ServiceAccount, namespace: fleet-system}}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateStrategy
metadata: {name: three-stage}
spec:
  stages:
    - name: all
      labelSelector: {}
";

    fn crp(selector_name: &str, cluster: &str) -> String {
        crp_with(selector_name, cluster, "")
    }

    fn crp_with(selector_name: &str, cluster: &str, strategy: &str) -> String {
        format!(
            "
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata: {{name: shop-app}}
spec:
  resourceSelectors:
    - {{group: '', version: v1, kind: Namespace, name: {selector_name}}}
  policy:
    placementType: PickFixed
    clusterNames: [{cluster}]
{strategy}"
        )
    }

    fn messages(cat: &Catalog) -> Vec<String> {
        lint(cat).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_correct_commit_has_no_warning() {
        let cat = load(&format!("{BASE}{}", crp("shop", "east-1")));
        assert_eq!(messages(&cat), Vec::<String>::new());
    }

    #[test]
    fn a_misspelled_namespace_selects_nothing_and_the_right_one_is_suggested() {
        let cat = load(&format!("{BASE}{}", crp("shopp", "east-1")));
        let m = messages(&cat);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].contains("ClusterResourcePlacement/shop-app: spec.resourceSelectors[0].name: selects nothing: no Namespace named \"shopp\" in the commit (did you mean \"shop\"?)"),
            "{m:?}"
        );
    }

    #[test]
    fn a_cluster_that_is_not_a_member_is_named_with_the_likely_one() {
        let cat = load(&format!("{BASE}{}", crp("shop", "east-2")));
        let m = messages(&cat);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].contains("spec.policy.clusterNames[0]: cluster \"east-2\" is not a member of the fleet (no MemberCluster of that name in the commit) (did you mean \"east-1\"?)"),
            "{m:?}"
        );
    }

    #[test]
    fn an_override_of_a_missing_placement_and_a_run_of_a_missing_strategy_are_named() {
        let extra = "
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourceOverride
metadata: {name: o}
spec:
  placement: {name: shop-appp}
  clusterResourceSelectors:
    - {group: '', version: v1, kind: Namespace, name: shop}
  policy: {overrideRules: [{clusterSelector: {clusterSelectorTerms: []}, jsonPatchOverrides: [{op: add, path: /metadata/labels/a, value: b}]}]}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterStagedUpdateRun
metadata: {name: r}
spec: {placementName: shop-app, stagedRolloutStrategyName: three-stagee}
";
        let external = "  strategy: {type: External}\n";
        let cat = load(&format!(
            "{BASE}{}{extra}",
            crp_with("shop", "east-1", external)
        ));
        let m = messages(&cat).join("\n");
        assert!(
            m.contains("ClusterResourceOverride/o: spec.placement.name: names placement crp/shop-appp, which is not in the commit (did you mean \"crp/shop-app\"?); the override applies to nothing"),
            "{m}"
        );
        assert!(
            m.contains("ClusterStagedUpdateRun/r: spec.stagedRolloutStrategyName: names strategy \"three-stagee\", but the commit has no ClusterStagedUpdateStrategy of that name (did you mean \"three-stage\"?); the run cannot start"),
            "{m}"
        );
        assert_eq!(m.lines().count(), 2, "{m}");
    }

    #[test]
    fn suggestions_are_close_names_only() {
        let names = ["shop", "payments", "telemetry"];
        assert_eq!(did_you_mean("shopp", names), Some("shop"));
        assert_eq!(did_you_mean("Shop", names), Some("shop"));
        assert_eq!(did_you_mean("telemtry", names), Some("telemetry"));
        assert_eq!(did_you_mean("inventory", names), None);
        assert_eq!(
            did_you_mean("shop", names),
            None,
            "an exact name is no typo"
        );
    }

    #[test]
    fn an_unknown_field_gets_the_likely_one() {
        let m = "unknown field `placementTyp`, expected one of `placementType`, `clusterNames`, `numberOfClusters`";
        assert_eq!(
            suggest_field(m).as_deref(),
            Some("did you mean `placementType`?")
        );
        assert_eq!(
            suggest_field("unknown field `zzz`, expected `a` or `b`"),
            None
        );
        assert_eq!(suggest_field("something else"), None);
    }
}
