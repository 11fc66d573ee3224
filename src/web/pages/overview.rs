//! The fleet: the summary's counts, the members with health, properties, labels and taints,
//! and the placements with their clusters counted per state.

use maud::{html, Markup};

use super::{state_counts, Paging};
use crate::api::{ClusterPlacementState, Member, PlacementStatus, Summary};
use crate::web::{badge, encode, layout, none, query_string, Page};

/// What the fleet page shows; the lists are pages of the API's lists.
pub struct Fleet<'a> {
    pub summary: &'a Summary,
    pub members: &'a [Member],
    pub members_paging: Paging,
    pub placements: &'a [&'a PlacementStatus],
    pub placements_paging: Paging,
}

pub fn page(f: &Fleet<'_>) -> Markup {
    let s = f.summary;
    let body = html! {
        h1 { "Fleet" }
        section aria-labelledby="counts" {
            h2 #counts { "At a glance" }
            dl.counts {
                div { dt { "Members" } dd { (s.members) } }
                div { dt { "Placements" } dd { (s.placements.total) } }
                div { dt { "Ready" } dd { (s.placements.ready) } }
                div { dt { "Not ready" } dd { (s.placements.unready) } }
                div { dt { "With failures" } dd { (s.placements.failed) } }
                div { dt { "Staged runs in progress" } dd { (s.update_runs.in_progress) } }
                div { dt { "Approvals pending" } dd {
                    @if s.update_runs.pending_approvals > 0 {
                        a href="/runs" { (s.update_runs.pending_approvals) }
                    } @else { "0" }
                } }
            }
            @if let Some(h) = &s.held {
                p.alert role="alert" { "The deletion guard holds " code { (crate::web::short(Some(&h.commit))) } ": " a href="/source" { "how to release it" } }
            }
            @if let Some(r) = &s.rejected {
                p.alert role="alert" { "The head " code { (crate::web::short(Some(&r.commit))) } " is refused: " a href="/source" { "its diagnostics" } }
            }
        }
        section aria-labelledby="members" {
            h2 #members { "Members" }
            @if f.members.is_empty() { (none("No members yet.")) } @else {
                table.list {
                    thead { tr { th scope="col" { "Member" } th scope="col" { "Health" } th scope="col" { "Properties" } th scope="col" { "Labels" } th scope="col" { "Taints" } } }
                    tbody {
                        @for m in f.members {
                            tr {
                                th scope="row" { a href=(format!("/matrix?cluster={}", encode(&m.name))) { (m.name) } }
                                td {
                                    @if m.healthy { span.ok { "healthy" } } @else {
                                        span.bad { "unhealthy" }
                                        @if let Some(r) = &m.health_reason { br; small { (r) } }
                                    }
                                }
                                td { ul.kv { @for (k, v) in &m.properties { li { code { (k) } " " (v) } } } }
                                td { ul.kv { @for (k, v) in &m.labels { li { code { (k) "=" (v) } } } } }
                                td { ul.kv { @for t in &m.taints { li { code { (t) } } } } }
                            }
                        }
                    }
                }
            }
            (f.members_paging.nav("Members", |o| format!("/{}", query_string(&[("moffset", &o.to_string()), ("poffset", &f.placements_paging.offset.to_string())]))))
        }
        section aria-labelledby="placements" {
            h2 #placements { "Placements" }
            @if f.placements.is_empty() { (none("No placements.")) } @else {
                table.list {
                    thead { tr {
                        th scope="col" { "Placement" }
                        th scope="col" { "Strategy" }
                        th scope="col" { "Ready" }
                        @for st in ClusterPlacementState::ALL { th scope="col" { (badge(st)) } }
                    } }
                    tbody {
                        @for p in f.placements {
                            tr {
                                th scope="row" { a href=(format!("/placements/{}", encode(&p.id))) { (p.id) } }
                                td { (format!("{:?}", p.strategy)) }
                                td { @if p.is_ready() { span.ok { "yes" } } @else { span.bad { "no" } } }
                                @for (st, n) in state_counts(p) {
                                    td.num { @if n > 0 { a href=(format!("/matrix{}", query_string(&[("name", &p.id), ("state", st.as_str())]))) { (n) } } @else { "0" } }
                                }
                            }
                        }
                    }
                }
            }
            (f.placements_paging.nav("Placements", |o| format!("/{}", query_string(&[("moffset", &f.members_paging.offset.to_string()), ("poffset", &o.to_string())]))))
        }
    };
    layout(Page::Fleet, "Fleet", s, body)
}
