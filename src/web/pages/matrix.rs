//! Placements × clusters, each cell coloured (and lettered) by the placement's state on the
//! cluster. Both axes are pages of the API's lists, so a page's weight is bounded however large
//! the fleet; the filters are the query string, so a link opens the same view.

use maud::{html, Markup};

use super::Paging;
use crate::api::{ClusterPlacementState, Member, PlacementStatus, Summary};
use crate::web::{badge, encode, layout, none, query_string, Page};

/// The filters, as the query string carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// Placements whose id contains this.
    pub name: String,
    /// Members whose labels match this (`key`, `key=value`, `key!=value`, comma-separated).
    pub label: String,
    /// Members whose name contains this.
    pub cluster: String,
    /// Placements with a cluster in this state.
    pub state: Option<ClusterPlacementState>,
    /// The first placement and member shown.
    pub offset: usize,
    pub moffset: usize,
}

impl Filters {
    /// The query string of these filters with the offsets given.
    pub fn link(&self, offset: usize, moffset: usize) -> String {
        let (o, m) = (offset.to_string(), moffset.to_string());
        format!(
            "/matrix{}",
            query_string(&[
                ("name", &self.name),
                ("label", &self.label),
                ("cluster", &self.cluster),
                ("state", self.state.map_or("", |s| s.as_str())),
                ("offset", if offset > 0 { &o } else { "" }),
                ("moffset", if moffset > 0 { &m } else { "" }),
            ])
        )
    }
}

pub struct Matrix<'a> {
    pub summary: &'a Summary,
    pub filters: &'a Filters,
    pub placements: &'a [&'a PlacementStatus],
    pub placements_paging: Paging,
    pub members: &'a [Member],
    pub members_paging: Paging,
}

/// The one-letter mark of a state (the colour is never the only sign).
fn letter(s: ClusterPlacementState) -> &'static str {
    match s {
        ClusterPlacementState::Scheduled => "s",
        ClusterPlacementState::Applying => "p",
        ClusterPlacementState::Available => "a",
        ClusterPlacementState::Failed => "F",
        ClusterPlacementState::Drifted => "D",
        ClusterPlacementState::Held => "h",
    }
}

pub fn page(m: &Matrix<'_>) -> Markup {
    let f = m.filters;
    let body = html! {
        h1 { "Placements × clusters" }
        form.filters method="get" action="/matrix" role="search" {
            label { "Placement " input type="search" name="name" value=(f.name) placeholder="name contains"; }
            label { "Member labels " input type="search" name="label" value=(f.label) placeholder="env=prod,region"; }
            label { "Member " input type="search" name="cluster" value=(f.cluster) placeholder="name contains"; }
            label { "State "
                select name="state" {
                    option value="" selected[f.state.is_none()] { "any" }
                    @for s in ClusterPlacementState::ALL {
                        option value=(s.as_str()) selected[f.state == Some(s)] { (s.as_str()) }
                    }
                }
            }
            button type="submit" { "Filter" }
            a href="/matrix" { "Clear" }
        }
        p.legend { "Legend: " @for s in ClusterPlacementState::ALL { (badge(s)) " " (letter(s)) " " } "· blank: not selected" }
        (m.placements_paging.nav("Placements", |o| f.link(o, f.moffset)))
        (m.members_paging.nav("Members", |o| f.link(f.offset, o)))
        @if m.placements.is_empty() || m.members.is_empty() {
            (none("Nothing matches these filters."))
        } @else {
            div.matrix-wrap {
                table.matrix #matrix {
                    caption { "Each cell: the placement's state on the member" }
                    thead { tr {
                        td {}
                        @for c in m.members { th scope="col" { span { (c.name) } } }
                    } }
                    tbody {
                        @for p in m.placements {
                            tr data-placement=(p.id) {
                                th scope="row" { a href=(format!("/placements/{}", encode(&p.id))) { (p.id) } }
                                @for c in m.members {
                                    @match p.cluster_state(&c.name) {
                                        Some(s) => td class=(s.as_str()) data-cluster=(c.name) { (letter(s)) },
                                        None => td {},
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(Page::Matrix, "Matrix", m.summary, body)
}
