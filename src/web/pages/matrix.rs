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

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(json: serde_json::Value) -> PlacementStatus {
        serde_json::from_value(json).unwrap()
    }

    fn member(name: &str, labels: &[(&str, &str)]) -> Member {
        Member {
            name: name.into(),
            healthy: true,
            health_reason: None,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ocm_labels: Default::default(),
            taints: vec![],
            properties: Default::default(),
        }
    }

    fn summary() -> Summary {
        serde_json::from_value(serde_json::json!({
            "branch": "main", "members": 3,
            "placements": {"total": 1, "ready": 0, "unready": 1, "failed": 1, "staged": 0},
            "clusters": {"selected": 3, "applying": 1, "removing": 0, "waiting": 1,
                "upToDate": 1, "available": 1, "pending": 0, "failed": 1, "diffReported": 0},
            "updateRuns": {"total": 0, "inProgress": 0, "pendingApprovals": 0}
        }))
        .unwrap()
    }

    /// Each cell says the state `cluster_state` gives, by class and letter; what is not
    /// selected is blank; names are escaped.
    #[test]
    fn cells_show_each_clusters_state_and_names_are_escaped() {
        let p = placement(serde_json::json!({
            "id": "crp/<b>x</b>", "strategy": "RollingUpdate", "target": 4,
            "selected": ["m1", "m2", "m3", "m4"], "applying": ["m2"], "removing": [],
            "waiting": ["m3"], "upToDate": ["m1"],
            "clusters": {
                "m1": {"revision": {"resourceIndex": 0, "rendered": "h"}, "health": {"state": "available"}, "updatedAt": 1},
                "m4": {"health": {"state": "failed"}, "lastError": "boom", "updatedAt": 1}
            },
            "conditions": []
        }));
        let members: Vec<Member> = ["m1", "m2", "m3", "m4", "m5"]
            .iter()
            .map(|m| member(m, &[]))
            .collect();
        let states: Vec<_> = members
            .iter()
            .map(|m| p.cluster_state(&m.name).map(|s| s.as_str()))
            .collect();
        assert_eq!(
            states,
            [
                Some("available"),
                Some("applying"),
                Some("held"),
                Some("failed"),
                None
            ]
        );
        let placements = [&p];
        let paging = Paging {
            offset: 0,
            limit: 50,
            matched: 1,
        };
        let html = page(&Matrix {
            summary: &summary(),
            filters: &Filters::default(),
            placements: &placements,
            placements_paging: paging,
            members: &members,
            members_paging: Paging {
                matched: 5,
                ..paging
            },
        })
        .into_string();
        assert!(html.contains(r#"<td class="available" data-cluster="m1">a</td>"#));
        assert!(html.contains(r#"<td class="applying" data-cluster="m2">p</td>"#));
        assert!(html.contains(r#"<td class="held" data-cluster="m3">h</td>"#));
        assert!(html.contains(r#"<td class="failed" data-cluster="m4">F</td>"#));
        assert!(!html.contains("<b>x</b>"), "the id is escaped");
        assert!(html.contains("crp/&lt;b&gt;x&lt;/b&gt;"));
        assert!(!html.contains("<script>"), "no inline script");
    }

    #[test]
    fn filters_make_the_link_that_opens_them() {
        let f = Filters {
            name: "web app".into(),
            label: "env=prod".into(),
            state: Some(ClusterPlacementState::Failed),
            ..Filters::default()
        };
        assert_eq!(
            f.link(50, 0),
            "/matrix?name=web%20app&label=env%3Dprod&state=failed&offset=50"
        );
    }

    #[test]
    fn label_selectors_match_as_kubectl_reads_them() {
        let m = member("m1", &[("env", "prod"), ("region", "eu")]);
        assert!(m.has_labels("env=prod"));
        assert!(m.has_labels("env==prod,region"));
        assert!(m.has_labels("env!=dev"));
        assert!(!m.has_labels("env=dev"));
        assert!(!m.has_labels("tier"));
        assert!(m.has_labels(""));
    }
}
