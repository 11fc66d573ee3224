//! The read-only web dashboard on the status API's listener: `GET /` (the fleet), `/matrix`,
//! `/placements/<id>`, `/runs`, `/source`, and its stylesheet and script under `/assets/`.
//!
//! Each handler reads the status into the same documents the JSON API writes
//! ([`super::status_api`], [`crate::api`]) and hands them to [`crate::web`] to render: the
//! dashboard shows what the API shows, nothing more. Pages carry the status's ETag like the
//! documents (the page script polls with `If-None-Match`).
//!
//! Headers for a read-only app: a Content-Security-Policy allowing only this origin's own
//! script and stylesheet (no inline script, no framing), `X-Frame-Options: DENY`,
//! `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`.
//!
//! With `--token-file`, every dashboard request needs the token ([`super::access`]): as
//! `Authorization: Bearer <token>`, or once as `?token=<token>`, which answers with a redirect
//! to the same page without it and an HttpOnly, SameSite=Strict cookie holding it.

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::access;
use super::server::{status_of, Api};
use super::status_api::{self, MembersQuery, PlacementsQuery};
use crate::api::{ClusterPlacementState, PlacementStatus};
use crate::web::pages::{self, Paging};

/// The dashboard's routes, behind the token (when there is one) and with its headers.
pub fn routes(api: Api) -> Router<Api> {
    Router::new()
        .route("/", get(fleet))
        .route("/matrix", get(matrix))
        .route("/placements/{*id}", get(placement))
        .route("/runs", get(runs))
        .route("/source", get(source))
        .route("/assets/dashboard.css", get(css))
        .route("/assets/dashboard.js", get(js))
        .route("/assets/favicon.svg", get(favicon))
        // Browsers ask for it whatever the page says.
        .route("/favicon.ico", get(favicon))
        .route_layer(axum::middleware::from_fn_with_state(
            api.clone(),
            status_api::etags,
        ))
        .route_layer(axum::middleware::from_fn_with_state(api, token))
        .route_layer(axum::middleware::map_response(headers))
}

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The headers of every dashboard response.
async fn headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    res
}

/// The query without its `token` parameter, and that parameter's value.
fn without_token(query: Option<&str>) -> (String, Option<String>) {
    let mut token = None;
    let rest: Vec<&str> = query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| match status_api::query_pairs(Some(p)).next() {
            Some((key, value)) if key == "token" => {
                token = Some(value.into_owned());
                false
            }
            _ => true,
        })
        .collect();
    (rest.join("&"), token)
}

async fn token(State(api): State<Api>, request: Request, next: Next) -> Response {
    let Some(expected) = api.token.clone() else {
        return next.run(request).await;
    };
    if access::shows(&expected, request.headers()) {
        return next.run(request).await;
    }
    let (rest, given) = without_token(request.uri().query());
    if let Some(given) = given.filter(|t| access::same_token(&expected, t)) {
        let path = request.uri().path();
        let location = if rest.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{rest}")
        };
        // The token is in a cookie the page's script cannot read, sent only to this origin's
        // own requests; the address bar (and history) keeps the link without it.
        let cookie = format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            access::COOKIE,
            crate::web::encode(&given)
        );
        let mut res = StatusCode::SEE_OTHER.into_response();
        if let (Ok(l), Ok(c)) = (
            HeaderValue::from_str(&location),
            HeaderValue::from_str(&cookie),
        ) {
            res.headers_mut().insert(header::LOCATION, l);
            res.headers_mut().insert(header::SET_COOKIE, c);
        }
        return res;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer realm=\"gitfleet dashboard\"")],
        Html(
            "<!DOCTYPE html><title>gitfleet</title><p>This dashboard needs its token: open it once \
             with <code>?token=&lt;token&gt;</code>, or send <code>Authorization: Bearer \
             &lt;token&gt;</code>.</p>",
        ),
    )
        .into_response()
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        crate::web::CSS,
    )
        .into_response()
}

async fn favicon() -> Response {
    (
        [(header::CONTENT_TYPE, "image/svg+xml")],
        crate::web::FAVICON,
    )
        .into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        crate::web::JS,
    )
        .into_response()
}

fn html(markup: maud::Markup) -> Response {
    Html(markup.into_string()).into_response()
}

fn bad_request(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Html(maud::html! { p { (message) } }.into_string()),
    )
        .into_response()
}

/// Rows of a page of a list, and how many pages the dashboard shows.
const PLACEMENTS_PER_PAGE: usize = 50;
const MEMBERS_PER_PAGE: usize = 50;

/// Query parameters the dashboard's pages take (unknown ones are ignored: a link with more
/// still opens).
fn params(uri: &Uri) -> std::collections::BTreeMap<String, String> {
    status_api::query_pairs(uri.query())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn number(p: &std::collections::BTreeMap<String, String>, key: &str) -> usize {
    p.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The placements a query matches, paged, and how many matched: the API's own filter.
fn placements_page(
    api: &Api,
    q: &PlacementsQuery,
) -> (Vec<std::sync::Arc<PlacementStatus>>, usize) {
    let (shared, staged) = {
        let st = status_of(api);
        let staged: std::collections::BTreeSet<String> = status_api::staged(&st)
            .into_iter()
            .map(String::from)
            .collect();
        (st.placements.clone(), staged)
    };
    let staged = staged.iter().map(String::as_str).collect();
    let matching: Vec<_> = shared.iter().filter(|p| q.admits(p, &staged)).collect();
    let matched = matching.len();
    let page = matching
        .into_iter()
        .skip(q.offset)
        .take(q.limit.unwrap_or(usize::MAX))
        .cloned()
        .collect();
    (page, matched)
}

async fn fleet(State(api): State<Api>, uri: Uri) -> Response {
    let p = params(&uri);
    let (moffset, poffset) = (number(&p, "moffset"), number(&p, "poffset"));
    let (summary, members) = {
        let st = status_of(&api);
        let q = MembersQuery {
            offset: moffset,
            limit: Some(MEMBERS_PER_PAGE),
            ..MembersQuery::default()
        };
        (status_api::summary(&st), status_api::members(&st, &q))
    };
    let q = PlacementsQuery {
        offset: poffset,
        limit: Some(PLACEMENTS_PER_PAGE),
        ..PlacementsQuery::default()
    };
    let (placements, matched) = placements_page(&api, &q);
    let placements: Vec<&PlacementStatus> = placements.iter().map(|p| &**p).collect();
    html(pages::overview::page(&pages::overview::Fleet {
        summary: &summary,
        members: &members.members,
        members_paging: Paging {
            offset: moffset,
            limit: MEMBERS_PER_PAGE,
            matched: members.matched,
        },
        placements: &placements,
        placements_paging: Paging {
            offset: poffset,
            limit: PLACEMENTS_PER_PAGE,
            matched,
        },
    }))
}

async fn matrix(State(api): State<Api>, uri: Uri) -> Response {
    let p = params(&uri);
    let get = |k: &str| p.get(k).cloned().unwrap_or_default();
    let state = match get("state").as_str() {
        "" => None,
        s => match ClusterPlacementState::parse(s) {
            Some(s) => Some(s),
            None => return bad_request(&format!("state={s}: not a state")),
        },
    };
    let filters = pages::matrix::Filters {
        name: get("name"),
        label: get("label"),
        cluster: get("cluster"),
        state,
        offset: number(&p, "offset"),
        moffset: number(&p, "moffset"),
    };
    let (summary, members) = {
        let st = status_of(&api);
        let q = MembersQuery {
            name: Some(filters.cluster.clone()).filter(|c| !c.is_empty()),
            label: Some(filters.label.clone()).filter(|c| !c.is_empty()),
            offset: filters.moffset,
            limit: Some(MEMBERS_PER_PAGE),
        };
        (status_api::summary(&st), status_api::members(&st, &q))
    };
    let q = PlacementsQuery {
        name: Some(filters.name.clone()).filter(|n| !n.is_empty()),
        cluster_states: state.into_iter().collect(),
        offset: filters.offset,
        limit: Some(PLACEMENTS_PER_PAGE),
        ..PlacementsQuery::default()
    };
    let (placements, matched) = placements_page(&api, &q);
    let placements: Vec<&PlacementStatus> = placements.iter().map(|p| &**p).collect();
    html(pages::matrix::page(&pages::matrix::Matrix {
        summary: &summary,
        filters: &filters,
        placements: &placements,
        placements_paging: Paging {
            offset: filters.offset,
            limit: PLACEMENTS_PER_PAGE,
            matched,
        },
        members: &members.members,
        members_paging: Paging {
            offset: filters.moffset,
            limit: MEMBERS_PER_PAGE,
            matched: members.matched,
        },
    }))
}

async fn placement(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let id = id.trim_matches('/');
    let (summary, status, schedule, runs) = {
        let st = status_of(&api);
        let status = st.placements.iter().find(|p| p.id == id).cloned();
        let schedule = st
            .schedule
            .iter()
            .find(|s| s.key.to_string() == id)
            .cloned();
        let runs: Vec<crate::api::UpdateRun> = st
            .runs
            .update_runs
            .iter()
            .filter(|r| r.placement == id)
            .cloned()
            .collect();
        (status_api::summary(&st), status, schedule, runs)
    };
    let Some(status) = status else {
        return (
            StatusCode::NOT_FOUND,
            Html(maud::html! { p { "No placement " code { (id) } "." } }.into_string()),
        )
            .into_response();
    };
    let runs: Vec<&crate::api::UpdateRun> = runs.iter().collect();
    html(pages::placement::page(&pages::placement::Placement {
        summary: &summary,
        status: &status,
        schedule: schedule.as_deref(),
        runs: &runs,
    }))
}

async fn runs(State(api): State<Api>) -> Response {
    let (summary, runs, requests, approvals) = {
        let st = status_of(&api);
        (
            status_api::summary(&st),
            st.runs.update_runs.clone(),
            st.runs.approval_requests.clone(),
            st.approvals.clone(),
        )
    };
    html(pages::runs::page(&pages::runs::Runs {
        summary: &summary,
        runs: &runs,
        requests: &requests,
        approvals: &approvals,
        now: crate::timestamp::now_unix(),
    }))
}

async fn source(State(api): State<Api>) -> Response {
    let (summary, doc) = {
        let st = status_of(&api);
        let doc = st.placements_head::<&PlacementStatus>();
        (status_api::summary(&st), doc)
    };
    html(pages::source::page(&pages::source::Source {
        summary: &summary,
        doc: &doc,
        now: crate::timestamp::now_unix(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_parameter_is_taken_out_of_the_query() {
        assert_eq!(
            without_token(Some("name=a&token=x%2By&state=failed")),
            ("name=a&state=failed".to_string(), Some("x+y".to_string()))
        );
        assert_eq!(without_token(None), (String::new(), None));
    }
}
