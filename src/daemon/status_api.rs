//! The parts of the status API that keep it cheap on a large fleet: ETags on every document, the
//! fleet summary (`GET /api/v1/summary`), one update run (`GET /api/v1/updateruns/<name>`), and
//! the placements query (paging and filtering, `GET /api/v1/placements?...`).
//!
//! ETags: the daemon publishes its status as a whole and counts the publishes
//! ([`Status::generation`]); a document's ETag is that count with a token of this process (a
//! restarted daemon counts from 0 again). The count is read before the handler reads the
//! status, so an ETag never claims a newer status than the body it comes with: at worst a
//! client fetches once more.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::server::{json_ok, problem, status_of, Api};
use super::Status;
use crate::api::{ClusterCounts, PlacementCounts, PlacementState, PlacementStatus, RunCounts};
use crate::rollout::BindingHealth;

/// This process's part of every ETag.
static BOOT: LazyLock<String> = LazyLock::new(|| {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}", std::process::id(), nanos & 0xffff_ffff_ffff)
});

/// The ETag of every document written from the status at `generation`.
pub fn etag(generation: u64) -> String {
    format!("\"{}-{generation}\"", *BOOT)
}

/// Whether an `If-None-Match` header's value names `tag` (or is `*`).
fn matches(if_none_match: &str, tag: &str) -> bool {
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag)
}

/// Middleware on the JSON documents: 304 to a client that has the current one, the ETag on
/// every 200.
pub async fn etags(State(api): State<Api>, request: Request, next: Next) -> Response {
    let tag = etag(status_of(&api).generation);
    let fresh = request
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| matches(v, &tag));
    if fresh {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, tag)]).into_response();
    }
    let mut response = next.run(request).await;
    if response.status() == StatusCode::OK {
        if let Ok(v) = HeaderValue::from_str(&tag) {
            response.headers_mut().insert(header::ETAG, v);
        }
    }
    response
}

/// The ids of the placements a staged update run names.
pub fn staged(st: &Status) -> BTreeSet<&str> {
    st.runs
        .update_runs
        .iter()
        .map(|r| r.placement.as_str())
        .collect()
}

/// The fleet summary of a status.
pub fn summary(st: &Status) -> crate::api::Summary {
    let staged = staged(st);
    let mut placements = PlacementCounts::default();
    let mut clusters = ClusterCounts::default();
    for p in &st.placements {
        placements.total += 1;
        if p.is_ready() {
            placements.ready += 1;
        } else {
            placements.unready += 1;
        }
        placements.failed += usize::from(p.has_failure());
        placements.staged += usize::from(staged.contains(p.id.as_str()));
        clusters.selected += p.selected.len();
        clusters.applying += p.applying.len();
        clusters.removing += p.removing.len();
        clusters.waiting += p.waiting.len();
        clusters.up_to_date += p.up_to_date.len();
        for c in p.clusters.values() {
            match c.health {
                BindingHealth::Available | BindingHealth::AvailableUntrackable { .. } => {
                    clusters.available += 1
                }
                BindingHealth::Pending => clusters.pending += 1,
                BindingHealth::Failed => clusters.failed += 1,
                BindingHealth::DiffReported => clusters.diff_reported += 1,
            }
        }
    }
    let runs = &st.runs.update_runs;
    crate::api::Summary {
        branch: st.branch.clone(),
        head: st.head.clone(),
        serving: st.serving.clone(),
        not_serving: st.not_serving.clone(),
        verified: st.verified.clone(),
        rejected: st.rejected.clone(),
        held: st.held.clone(),
        source: Some(st.source.clone()),
        leader: st.leader.clone(),
        members: st.inventory.as_ref().map_or(0, |i| i.clusters.len()),
        placements,
        clusters,
        update_runs: RunCounts {
            total: runs.len(),
            in_progress: runs
                .iter()
                .filter(|r| crate::rollout::staged::status::RunPhase::of(&r.status).in_progress())
                .count(),
            pending_approvals: st
                .runs
                .approval_requests
                .iter()
                .filter(|a| a.approval_accepted != "True")
                .count(),
        },
    }
}

pub async fn summary_doc(State(api): State<Api>) -> Response {
    let doc = summary(&status_of(&api));
    json_ok(&doc)
}

/// One staged update run, by `NAME` (cluster-scoped runs) or `NAMESPACE/NAME`.
pub async fn update_run(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let id = id.trim_matches('/');
    let (namespace, name) = match id.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, id),
    };
    let found = status_of(&api)
        .runs
        .update_runs
        .iter()
        .find(|r| r.name == name && r.namespace.as_deref() == namespace)
        .cloned();
    match found {
        Some(run) => json_ok(&run),
        None => problem(StatusCode::NOT_FOUND, &format!("no update run {id:?}")),
    }
}

/// What `GET /api/v1/members`' query asks for: `name` (contained in the member's name),
/// `label` (`key`, `key=value`, `key!=value`, comma-separated), `offset`, `limit`.
#[derive(Debug, Default, PartialEq)]
pub struct MembersQuery {
    pub name: Option<String>,
    pub label: Option<String>,
    pub offset: usize,
    pub limit: Option<usize>,
}

pub fn members_query(query: Option<&str>) -> Result<MembersQuery, String> {
    let mut q = MembersQuery::default();
    for (key, value) in query_pairs(query) {
        match &*key {
            "name" => q.name = Some(value.into_owned()).filter(|n| !n.is_empty()),
            "label" => q.label = Some(value.into_owned()).filter(|n| !n.is_empty()),
            "limit" => q.limit = Some(count("limit", &value)?),
            "offset" => q.offset = count("offset", &value)?,
            other => {
                return Err(format!(
                    "unknown query parameter {other:?} (the ones known are name, label, \
                     offset and limit)"
                ))
            }
        }
    }
    Ok(q)
}

/// The members a query asks for, from the last look's fleet.
pub fn members(st: &Status, q: &MembersQuery) -> crate::api::Members {
    let all = st.fleet.as_ref().map_or(&[][..], |f| &f.clusters[..]);
    let matching = all
        .iter()
        .filter(|c| q.name.as_ref().is_none_or(|n| c.name.contains(n.as_str())));
    let mut matched = 0;
    let mut members = Vec::new();
    for c in matching {
        let m = crate::api::Member::of(c);
        if q.label.as_ref().is_some_and(|l| !m.has_labels(l)) {
            continue;
        }
        if matched >= q.offset && members.len() < q.limit.unwrap_or(usize::MAX) {
            members.push(m);
        }
        matched += 1;
    }
    crate::api::Members { members, matched }
}

pub async fn members_doc(State(api): State<Api>, uri: axum::http::Uri) -> Response {
    let query = match members_query(uri.query()) {
        Ok(q) => q,
        Err(e) => return problem(StatusCode::BAD_REQUEST, &e),
    };
    let doc = members(&status_of(&api), &query);
    json_ok(&doc)
}

/// What `GET /api/v1/placements`'s query asks for; anything it does not know is refused,
/// naming it.
#[derive(Debug, Default, PartialEq)]
pub struct PlacementsQuery {
    /// Placements in any of these states (none: all).
    pub states: Vec<PlacementState>,
    /// Placements whose id contains this.
    pub name: Option<String>,
    /// Placements that select this cluster or have it among their clusters.
    pub cluster: Option<String>,
    /// Placements with a cluster in any of these states (none: all).
    pub cluster_states: Vec<crate::api::ClusterPlacementState>,
    /// Skip this many of the matching placements.
    pub offset: usize,
    pub limit: Option<usize>,
}

impl PlacementsQuery {
    /// Whether the answer is a page (and says how many matched).
    pub fn paged(&self) -> bool {
        self.limit.is_some() || self.offset > 0
    }

    pub fn admits(&self, p: &PlacementStatus, staged: &BTreeSet<&str>) -> bool {
        (self.states.is_empty() || self.states.iter().any(|s| p.is_in(*s, staged)))
            && self.name.as_ref().is_none_or(|n| p.id.contains(n.as_str()))
            && self.cluster.as_ref().is_none_or(|c| {
                p.selected.iter().any(|s| s == c) || p.clusters.contains_key(c.as_str())
            })
            && (self.cluster_states.is_empty() || self.has_cluster_in_state(p))
    }

    fn has_cluster_in_state(&self, p: &PlacementStatus) -> bool {
        let clusters = p
            .selected
            .iter()
            .map(|c| c.as_str())
            .chain(p.clusters.keys().map(crate::model::ClusterName::as_str))
            .chain(p.removing.iter().map(String::as_str));
        clusters
            .filter_map(|c| p.cluster_state(c))
            .any(|s| self.cluster_states.contains(&s))
    }
}

fn count(key: &str, n: &str) -> Result<usize, String> {
    n.parse()
        .map_err(|_| format!("{key}={n}: the value is a count (0, 1, 2, ...)"))
}

pub fn placements_query(query: Option<&str>) -> Result<PlacementsQuery, String> {
    let mut q = PlacementsQuery::default();
    for (key, value) in query_pairs(query) {
        match (&*key, &*value) {
            ("unready", "" | "true") => q.states.push(PlacementState::Unready),
            ("unready", "false") => {}
            ("unready", other) => {
                return Err(format!("unready={other}: the value is true or false"))
            }
            ("state", list) => {
                for s in list.split(',').filter(|s| !s.is_empty()) {
                    q.states.push(s.parse()?);
                }
            }
            ("clusterState", list) => {
                for s in list.split(',').filter(|s| !s.is_empty()) {
                    q.cluster_states
                        .push(crate::api::ClusterPlacementState::parse(s).ok_or_else(|| {
                            format!(
                                "clusterState={s}: the states are scheduled, applying, \
                                 available, failed, drifted and held"
                            )
                        })?);
                }
            }
            ("name", n) => q.name = Some(n.to_string()).filter(|n| !n.is_empty()),
            ("cluster", c) => q.cluster = Some(c.to_string()).filter(|c| !c.is_empty()),
            ("limit", n) => q.limit = Some(count("limit", n)?),
            ("offset", n) => q.offset = count("offset", n)?,
            (other, _) => {
                return Err(format!(
                    "unknown query parameter {other:?} (the ones known are state, name, \
                     cluster, clusterState, offset, limit and unready)"
                ))
            }
        }
    }
    Ok(q)
}

/// The pairs of a URL's query string, `%XX` and `+` decoded as browsers and `curl` encode them
/// (`application/x-www-form-urlencoded`); empty pairs are skipped.
pub fn query_pairs(
    query: Option<&str>,
) -> impl Iterator<Item = (std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>)> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_parsed_and_unknown_ones_refused() {
        let q = placements_query(Some(
            "state=failed,staged&name=web%2Fa&cluster=m1&offset=5&limit=10",
        ))
        .unwrap();
        assert_eq!(
            q,
            PlacementsQuery {
                states: vec![PlacementState::Failed, PlacementState::Staged],
                name: Some("web/a".into()),
                cluster: Some("m1".into()),
                cluster_states: vec![],
                offset: 5,
                limit: Some(10),
            }
        );
        assert!(q.paged());
        assert_eq!(
            placements_query(Some("unready")).unwrap().states,
            [PlacementState::Unready]
        );
        assert!(placements_query(Some("state=green"))
            .unwrap_err()
            .contains("state=green"));
        assert!(placements_query(Some("offset=-1"))
            .unwrap_err()
            .contains("offset=-1"));
        assert!(placements_query(Some("sort=id"))
            .unwrap_err()
            .contains("\"sort\""));
    }

    #[test]
    fn if_none_match_lists_and_weak_tags_match() {
        let tag = etag(7);
        assert!(matches(&tag, &tag));
        assert!(matches(&format!("\"x\", W/{tag}"), &tag));
        assert!(matches("*", &tag));
        assert!(!matches(&etag(8), &tag));
    }
}
