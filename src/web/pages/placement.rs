//! One placement: its strategy and scheduling policy (type, clusters, affinity, topology
//! spread, tolerations) as the API's document carries it, its policy snapshot, its conditions with KubeFleet's (or
//! OCM's) reasons, each cluster's scheduling decision with reasons and scores, where it stands
//! on each cluster with the objects placed there (names only), drift and diffs, and the staged
//! runs that move it.

use maud::{html, Markup};

use crate::api::{PlacementStatus, Summary, UpdateRun};
use crate::schedule::PlacementSchedule;
use crate::web::{badge, condition_status, encode, layout, none, short, Page};

pub struct Placement<'a> {
    pub summary: &'a Summary,
    pub status: &'a PlacementStatus,
    /// Its schedule (`/api/v1/schedule`), when it has one.
    pub schedule: Option<&'a PlacementSchedule>,
    /// The staged runs that name it.
    pub runs: &'a [&'a UpdateRun],
}

pub fn page(v: &Placement<'_>) -> Markup {
    let p = v.status;
    let per_cluster = p.per_cluster.get();
    let body = html! {
        h1 { "Placement " code { (p.id) } }
        section aria-labelledby="policy" {
            h2 #policy { "Policy" }
            dl.facts {
                div { dt { "Strategy" } dd { (format!("{:?}", p.strategy)) } }
                @if let Some(policy) = &p.policy { (kubefleet_facts(policy)) }
                @if let Some(spec) = &p.ocm_policy { (ocm_facts(spec)) }
                div { dt { "Clusters wanted" } dd { (p.target) } }
                div { dt { "Selected" } dd { (p.selected.len()) } }
                @if let Some(s) = v.schedule {
                    @if let Some(i) = s.policy_snapshot_index { div { dt { "Policy snapshot" } dd { (i) @if let Some(h) = &s.policy_hash { " " code { (short(Some(h))) } } } } }
                }
                @if let Some(i) = p.observed_resource_index { div { dt { "Resource snapshot" } dd { (i) } } }
                div { dt { "Ready" } dd { @if p.is_ready() { span.ok { "yes" } } @else { span.bad { "no" } } } }
            }
            @if let Some(n) = &p.note { p { (n) } }
            @if let Some(policy) = &p.policy { (kubefleet_rules(policy)) }
            @if let Some(spec) = &p.ocm_policy { (ocm_rules(spec)) }
            @if !p.selected_resources.is_empty() {
                h3 { "Selected resources" }
                ul.kv { @for r in &p.selected_resources { li { code { (r) } } } }
            }
        }
        section aria-labelledby="conditions" {
            h2 #conditions { "Conditions" }
            @if p.conditions.is_empty() { (none("No conditions yet.")) } @else {
                table.list {
                    thead { tr { th scope="col" { "Type" } th scope="col" { "Status" } th scope="col" { "Reason" } th scope="col" { "Message" } } }
                    tbody { @for c in &p.conditions { tr { th scope="row" { (c.type_) } td { (condition_status(&c.status)) } td { code { (c.reason) } } td { (c.message) } } } }
                }
            }
        }
        section aria-labelledby="decisions" {
            h2 #decisions { "Scheduling decisions" }
            @match v.schedule.filter(|s| !s.decisions.is_empty()) {
                None => (none("No decisions.")),
                Some(s) => table.list {
                    thead { tr { th scope="col" { "Cluster" } th scope="col" { "Selected" } th scope="col" { "Scores" } th scope="col" { "Reason" } } }
                    tbody { @for d in &s.decisions { tr {
                        th scope="row" { (d.cluster) }
                        td { @if d.selected { span.ok { "yes" } } @else { "no" } }
                        td {
                            @if let Some(a) = d.affinity_score { "affinity " (a) " " }
                            @if let Some(t) = d.topology_spread_score { "topology spread " (t) " " }
                            @if let Some(sc) = d.score { "score " (sc) }
                        }
                        td { (d.reason()) }
                    } } }
                },
            }
        }
        section aria-labelledby="clusters" {
            h2 #clusters { "On each cluster" }
            @let names: std::collections::BTreeSet<&str> = p.selected.iter().map(|c| c.as_str()).chain(p.clusters.keys().map(crate::model::ClusterName::as_str)).chain(p.removing.iter().map(String::as_str)).collect();
            @if names.is_empty() { (none("On no cluster.")) } @else {
                table.list {
                    thead { tr { th scope="col" { "Cluster" } th scope="col" { "State" } th scope="col" { "Revision" } th scope="col" { "Conditions" } th scope="col" { "Objects" } th scope="col" { "Drift and errors" } } }
                    tbody { @for c in names {
                        @let stored = p.clusters.get(c);
                        tr {
                            th scope="row" { (c) }
                            td { @if let Some(s) = p.cluster_state(c) { (badge(s)) } }
                            td { @if let Some(r) = stored.and_then(|s| s.revision.as_ref()) { "snapshot " (r.resource_index) " " code { (short(Some(&*r.rendered))) } } }
                            td { @if let Some(cc) = per_cluster.iter().find(|cc| cc.cluster == c) {
                                ul.kv { @for k in &cc.conditions { li { (k.type_) " " (condition_status(&k.status)) " " code { (k.reason) } } } }
                            } }
                            td { @if let Some(s) = stored {
                                details { summary { (s.objects.len()) " objects" } ul.kv { @for o in s.objects.iter() { li { code { (o.to_string()) } } } } }
                            } }
                            td {
                                @if let Some(e) = p.failed.get(c) { p.bad { (e) } }
                                @if let Some(e) = p.render_errors.get(c) { p.bad { "cannot render: " (e) } }
                                @if let Some(s) = stored {
                                    @if let Some(r) = &s.recheck { p { "drift: " (r) } }
                                    @for n in &s.details.not_available { p { "not available: " (n) } }
                                    @if !s.details.diffs.is_empty() { details { summary { (s.details.diffs.len()) " diffs" } ul.kv { @for d in &s.details.diffs { li { code { (d) } } } } } }
                                }
                            }
                        }
                    } }
                }
            }
        }
        @let works: Vec<(&crate::model::ClusterName, &crate::feedback::WorkStatus)> = p.clusters.iter().filter_map(|(c, s)| Some((c, s.details.work_status.as_deref()?))).collect();
        @if !works.is_empty() {
            section aria-labelledby="feedback" {
                h2 #feedback { "Status feedback" }
                table.list {
                    thead { tr { th scope="col" { "Cluster" } th scope="col" { "Object" } th scope="col" { "Values" } th scope="col" { "Conditions" } } }
                    tbody {
                        @for (c, w) in &works {
                            @if !w.conditions.is_empty() {
                                tr {
                                    th scope="row" { (c) }
                                    td { "the work" }
                                    td {}
                                    td { ul.kv { @for k in &w.conditions { li { (k.type_) " " (condition_status(&k.status)) " " code { (k.reason) } @if !k.message.is_empty() { " " (k.message) } } } } }
                                }
                            }
                            @for m in &w.resource_status.manifests {
                                tr {
                                    th scope="row" { (c) }
                                    td { code { (m.resource_meta.kind) " " @if !m.resource_meta.namespace.is_empty() { (m.resource_meta.namespace) "/" } (m.resource_meta.name) } }
                                    td { ul.kv { @for f in &m.status_feedback.values { li { (f.name) " " code { (f.field_value.to_string()) } } } } }
                                    td { ul.kv { @for k in &m.conditions { li { (k.type_) " " (condition_status(&k.status)) " " code { (k.reason) } @if !k.message.is_empty() { " " (k.message) } } } } }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !v.runs.is_empty() {
            section aria-labelledby="runs" {
                h2 #runs { "Staged runs" }
                ul { @for r in v.runs { li { a href=(format!("/runs#run-{}", encode(&r.name))) { (r.name) } " " (r.state) " · stage " (r.stage.as_deref().unwrap_or("-")) " · waiting for " (r.waiting_for) } } }
            }
        }
    };
    layout(Page::Placement, &p.id, v.summary, body)
}

/// `env=prod, tier in (a,b), !legacy`: a label selector as kubectl writes one.
fn labels(s: &crate::model::LabelSelector) -> String {
    use crate::model::selector::SelectorOperator as Op;
    let mut parts: Vec<String> = s
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    parts.extend(s.match_expressions.iter().map(|e| match e.operator {
        Op::In => format!("{} in ({})", e.key, e.values.join(",")),
        Op::NotIn => format!("{} notin ({})", e.key, e.values.join(",")),
        Op::Exists => e.key.clone(),
        Op::DoesNotExist => format!("!{}", e.key),
    }));
    if parts.is_empty() {
        "every cluster".into()
    } else {
        parts.join(", ")
    }
}

/// One cluster selector term: its labels, its properties, its sorter.
fn term(t: &crate::model::placement::ClusterSelectorTerm) -> String {
    let mut parts = Vec::new();
    if let Some(l) = &t.label_selector {
        parts.push(format!("labels {}", labels(l)));
    }
    if let Some(p) = &t.property_selector {
        for e in &p.match_expressions {
            parts.push(format!(
                "{} {:?} {}",
                e.name,
                e.operator,
                e.values.join(",")
            ));
        }
    }
    if let Some(s) = &t.property_sorter {
        parts.push(format!("sorted by {} {:?}", s.name, s.sort_order));
    }
    if parts.is_empty() {
        "every cluster".into()
    } else {
        parts.join("; ")
    }
}

fn kubefleet_facts(policy: &crate::model::placement::PlacementPolicy) -> Markup {
    html! {
        div { dt { "Placement type" } dd { (format!("{:?}", policy.placement_type)) } }
        @if let Some(n) = policy.number_of_clusters { div { dt { "Number of clusters" } dd { (n) } } }
        @if !policy.cluster_names.is_empty() {
            div { dt { "Cluster names" } dd { (policy.cluster_names.join(", ")) } }
        }
    }
}

fn kubefleet_rules(policy: &crate::model::placement::PlacementPolicy) -> Markup {
    let affinity = policy
        .affinity
        .as_ref()
        .and_then(|a| a.cluster_affinity.as_ref());
    let required = affinity
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.cluster_selector_terms.as_slice())
        .unwrap_or_default();
    let preferred = affinity
        .map(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_slice()
        })
        .unwrap_or_default();
    html! {
        h3 { "Affinity" }
        @if required.is_empty() && preferred.is_empty() { (none("No affinity.")) } @else {
            ul.kv.affinity {
                @for t in required { li { "required: " code { (term(t)) } } }
                @for p in preferred { li { "preferred (weight " (p.weight) "): " code { (term(&p.preference)) } } }
            }
        }
        h3 { "Topology spread" }
        @if policy.topology_spread_constraints.is_empty() { (none("No topology spread constraints.")) } @else {
            ul.kv.spread { @for c in &policy.topology_spread_constraints { li {
                "key " code { (c.topology_key) } ", max skew " (c.max_skew.unwrap_or(1))
                ", when unsatisfiable " (format!("{:?}", c.when_unsatisfiable.unwrap_or_default()))
            } } }
        }
        h3 { "Tolerations" }
        @if policy.tolerations.is_empty() { (none("No tolerations.")) } @else {
            ul.kv.tolerations { @for t in &policy.tolerations { li { code {
                (if t.key.is_empty() { "*" } else { &t.key })
                " " (format!("{:?}", t.operator.unwrap_or_default()))
                @if !t.value.is_empty() { " " (t.value) }
                @if let Some(e) = t.effect { " " (format!("{e:?}")) }
            } } } }
        }
    }
}

fn ocm_facts(spec: &crate::model::ocm::OcmPlacementSpec) -> Markup {
    html! {
        div { dt { "Placement type" } dd { "OCM Placement" } }
        div { dt { "Number of clusters" } dd { @match spec.number_of_clusters { Some(n) => (n), None => "every feasible cluster" } } }
        @if !spec.cluster_sets.is_empty() { div { dt { "Cluster sets" } dd { (spec.cluster_sets.join(", ")) } } }
    }
}

fn ocm_rules(spec: &crate::model::ocm::OcmPlacementSpec) -> Markup {
    // OCM's predicates, prioritizers and tolerations, as declared (compact JSON: their
    // shapes are OCM's, and readers of an OCM placement know them).
    html! {
        h3 { "Predicates" }
        @if spec.predicates.is_empty() { (none("No predicates: every cluster of the sets.")) } @else {
            ul.kv { @for p in &spec.predicates { li { code { (json(p)) } } } }
        }
        h3 { "Prioritizers" }
        p { code { (json(&spec.prioritizer_policy)) } }
        h3 { "Tolerations" }
        @if spec.tolerations.is_empty() { (none("No tolerations.")) } @else {
            ul.kv.tolerations { @for t in &spec.tolerations { li { code { (json(t)) } } } }
        }
    }
}

/// Compact JSON of a part of a spec.
fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: serde_json::Value) -> PlacementStatus {
        serde_json::from_value(json).unwrap()
    }

    /// The page of `p`, with no schedule and no runs.
    fn page_of(p: &PlacementStatus) -> String {
        page(&Placement {
            summary: &summary(),
            status: p,
            schedule: None,
            runs: &[],
        })
        .into_string()
    }

    fn summary() -> Summary {
        serde_json::from_value(serde_json::json!({
            "branch": "main", "members": 0,
            "placements": {"total": 1, "ready": 0, "unready": 1, "failed": 0, "staged": 0},
            "clusters": {"selected": 0, "applying": 0, "removing": 0, "waiting": 0,
                "upToDate": 0, "available": 0, "pending": 0, "failed": 0, "diffReported": 0},
            "updateRuns": {"total": 0, "inProgress": 0, "pendingApprovals": 0}
        }))
        .unwrap()
    }

    #[test]
    fn the_policy_is_shown_as_declared() {
        let p = status(serde_json::json!({
            "id": "crp/shop", "strategy": "RollingUpdate", "target": 3,
            "selected": [], "applying": [], "removing": [], "waiting": [], "upToDate": [],
            "clusters": {}, "conditions": [],
            "policy": {
                "placementType": "PickN", "numberOfClusters": 3,
                "affinity": {"clusterAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [
                        {"labelSelector": {"matchLabels": {"env": "prod"},
                            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                         "propertySelector": {"matchExpressions": [
                            {"name": "kubernetes-fleet.io/node-count", "operator": "Ge", "values": ["3"]}]}}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 60, "preference": {"propertySorter": {
                            "name": "resources.kubernetes-fleet.io/available-cpu", "sortOrder": "Descending"}}}]}},
                "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "region"}],
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
            }
        }));
        let html = page_of(&p);
        for shown in [
            "<dt>Placement type</dt><dd>PickN</dd>",
            "<dt>Number of clusters</dt><dd>3</dd>",
            "required: <code>labels env=prod, tier in (a,b); kubernetes-fleet.io/node-count Ge 3</code>",
            "preferred (weight 60): <code>sorted by resources.kubernetes-fleet.io/available-cpu Descending</code>",
            "key <code>region</code>, max skew 2, when unsatisfiable DoNotSchedule",
            "<code>dedicated Exists NoSchedule</code>",
        ] {
            assert!(html.contains(shown), "{shown} not in {html}");
        }
    }

    #[test]
    fn a_placement_without_a_policy_in_the_document_shows_none() {
        let p = status(serde_json::json!({
            "id": "mw/a/b", "strategy": "RollingUpdate", "target": 1,
            "selected": [], "applying": [], "removing": [], "waiting": [], "upToDate": [],
            "clusters": {}, "conditions": []
        }));
        let html = page_of(&p);
        assert!(!html.contains("Placement type"), "{html}");
        assert!(!html.contains("Status feedback"), "{html}");
    }

    /// An OCM work's feedback values and rule conditions, per cluster and object.
    #[test]
    fn a_works_status_feedback_is_a_table_of_its_own() {
        let p = status(serde_json::json!({
            "id": "mw/alpha/web", "strategy": "OCM", "target": 1,
            "selected": ["alpha"], "applying": [], "removing": [], "waiting": [], "upToDate": ["alpha"],
            "conditions": [],
            "clusters": {"alpha": {"health": {"state": "available"}, "updatedAt": 1, "workStatus": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "ConditionRulesAggregated", "message": "up"}],
                "resourceStatus": {"manifests": [{
                    "resourceMeta": {"group": "apps", "version": "v1", "kind": "Deployment",
                        "resource": "deployments", "namespace": "default", "name": "web"},
                    "statusFeedback": {"values": [
                        {"name": "ReadyReplicas", "fieldValue": {"type": "Integer", "integer": 2}}]},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "ConditionRuleEvaluated", "message": "up"}]
                }]}
            }}}
        }));
        let html = page_of(&p);
        for shown in [
            "<h2 id=\"feedback\">Status feedback</h2>",
            "<code>Deployment default/web</code>",
            "<li>ReadyReplicas <code>2</code></li>",
            "<code>ConditionRuleEvaluated</code> up",
            "<td>the work</td>",
        ] {
            assert!(html.contains(shown), "{shown} not in {html}");
        }
    }
}
