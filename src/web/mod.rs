//! The read-only dashboard's HTML: one function per page, each taking the status API's wire
//! types ([`crate::api`]) and returning the page. The daemon's server
//! ([`crate::daemon::dashboard`]) reads its status into those documents, exactly as the JSON
//! API does, and hands them here: a page can show only what the API shows (Secrets' data never
//! reaches the status, their diffs are masked before it), and the pages can be rendered in a
//! test from documents written by hand.
//!
//! The stylesheet and the script are in the crate ([`CSS`], [`JS`]) and served from
//! `/assets/`: nothing is fetched from elsewhere, and no page carries an inline script, so the
//! Content-Security-Policy can forbid them. The script only polls the page it is on and swaps
//! its `<main>` when the page's ETag changes; every page is whole without it.
//!
//! What it must not know: the daemon, its locks and its loop; the clock (time is a parameter).

pub mod pages;

use maud::{html, Markup, DOCTYPE};

use crate::api::ClusterPlacementState;

pub const CSS: &str = include_str!("assets/dashboard.css");
pub const JS: &str = include_str!("assets/dashboard.js");
pub const FAVICON: &str = include_str!("assets/favicon.svg");

/// The pages, for the navigation and to mark the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Fleet,
    Matrix,
    Placement,
    Runs,
    Source,
}

const NAV: [(Page, &str, &str); 4] = [
    (Page::Fleet, "/", "Fleet"),
    (Page::Matrix, "/matrix", "Matrix"),
    (Page::Runs, "/runs", "Staged runs"),
    (Page::Source, "/source", "Git source"),
];

/// A whole page: the header with the branch and what is served, the navigation, and `body`
/// in `<main>` (what the script swaps).
pub fn layout(page: Page, title: &str, header: &crate::api::Summary, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · gitfleet" }
                link rel="icon" href="/assets/favicon.svg" type="image/svg+xml";
                link rel="stylesheet" href="/assets/dashboard.css";
                script src="/assets/dashboard.js" defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    span.brand { "gitfleet" }
                    nav aria-label="Pages" {
                        ul {
                            @for (p, href, name) in NAV {
                                li {
                                    @if p == page {
                                        a href=(href) aria-current="page" { (name) }
                                    } @else {
                                        a href=(href) { (name) }
                                    }
                                }
                            }
                        }
                    }
                    span.branch {
                        "branch " code { (header.branch) }
                        " · serving " code { (short(header.serving.as_deref())) }
                    }
                    span #live-state role="status" aria-live="polite" {}
                }
                main #main tabindex="-1" { (body) }
            }
        }
    }
}

/// The first 12 characters of a commit, or `-`.
pub fn short(commit: Option<&str>) -> &str {
    commit.map_or("-", |c| c.get(..12).unwrap_or(c))
}

/// `ago(now, then)`: how long ago, in a few words.
pub fn ago(now: u64, then: u64) -> String {
    format!("{} ago", duration(now.saturating_sub(then)))
}

/// Seconds as `1h2m`, `3m4s`, `5s`.
pub fn duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m"),
    }
}

/// Unix seconds as RFC 3339 (UTC).
pub fn when(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

/// A state as a badge: its name in words (never colour alone), its colour from the class.
pub fn badge(state: ClusterPlacementState) -> Markup {
    html! { span class=(format!("badge {}", state.as_str())) { (state.as_str()) } }
}

/// A condition's status as a word with its class (`True`, `False`, `Unknown`).
pub fn condition_status(status: &str) -> Markup {
    let class = match status {
        "True" => "ok",
        "False" => "bad",
        _ => "unknown",
    };
    html! { span class=(class) { (status) } }
}

/// `?key=value&...` of the pairs whose value is not empty, percent-encoded.
pub fn query_string(pairs: &[(&str, &str)]) -> String {
    let kept: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    }
}

/// Percent-encoding for a query value (unreserved characters kept).
pub fn encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// An empty-state note.
pub fn none(what: &str) -> Markup {
    html! { p.none { (what) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_keep_set_values_encoded() {
        assert_eq!(
            query_string(&[("name", "crp/web app"), ("label", ""), ("state", "failed")]),
            "?name=crp/web%20app&state=failed"
        );
        assert_eq!(query_string(&[("name", "")]), "");
        assert_eq!(encode("env=prod&x"), "env%3Dprod%26x");
    }

    #[test]
    fn durations_read_shortly() {
        assert_eq!(duration(5), "5s");
        assert_eq!(duration(125), "2m5s");
        assert_eq!(duration(3 * 3600 + 120), "3h2m");
    }
}
