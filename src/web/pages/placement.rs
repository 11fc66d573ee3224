//! One placement: its strategy and policy snapshot, its conditions with KubeFleet's (or
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
                div { dt { "Clusters wanted" } dd { (p.target) } }
                div { dt { "Selected" } dd { (p.selected.len()) } }
                @if let Some(s) = v.schedule {
                    @if let Some(i) = s.policy_snapshot_index { div { dt { "Policy snapshot" } dd { (i) @if let Some(h) = &s.policy_hash { " " code { (short(Some(h))) } } } } }
                }
                @if let Some(i) = p.observed_resource_index { div { dt { "Resource snapshot" } dd { (i) } } }
                div { dt { "Ready" } dd { @if p.is_ready() { span.ok { "yes" } } @else { span.bad { "no" } } } }
            }
            @if let Some(n) = &p.note { p { (n) } }
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
            @let names: std::collections::BTreeSet<&String> = p.selected.iter().chain(p.clusters.keys()).chain(&p.removing).collect();
            @if names.is_empty() { (none("On no cluster.")) } @else {
                table.list {
                    thead { tr { th scope="col" { "Cluster" } th scope="col" { "State" } th scope="col" { "Revision" } th scope="col" { "Conditions" } th scope="col" { "Objects" } th scope="col" { "Drift and errors" } } }
                    tbody { @for c in names {
                        @let stored = p.clusters.get(c.as_str());
                        tr {
                            th scope="row" { (c) }
                            td { @if let Some(s) = p.cluster_state(c) { (badge(s)) } }
                            td { @if let Some(r) = stored.and_then(|s| s.revision.as_ref()) { "snapshot " (r.resource_index) " " code { (short(Some(&r.rendered))) } } }
                            td { @if let Some(cc) = per_cluster.iter().find(|cc| &cc.cluster == c) {
                                ul.kv { @for k in &cc.conditions { li { (k.type_) " " (condition_status(&k.status)) " " code { (k.reason) } } } }
                            } }
                            td { @if let Some(s) = stored {
                                details { summary { (s.objects.len()) " objects" } ul.kv { @for o in s.objects.iter() { li { code { (o.to_string()) } } } } }
                            } }
                            td {
                                @if let Some(e) = p.failed.get(c.as_str()) { p.bad { (e) } }
                                @if let Some(e) = p.render_errors.get(c.as_str()) { p.bad { "cannot render: " (e) } }
                                @if let Some(s) = stored {
                                    @if let Some(r) = &s.recheck { p { "drift: " (r) } }
                                    @for n in &s.not_available { p { "not available: " (n) } }
                                    @if !s.diffs.is_empty() { details { summary { (s.diffs.len()) " diffs" } ul.kv { @for d in &s.diffs { li { code { (d) } } } } } }
                                }
                            }
                        }
                    } }
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
