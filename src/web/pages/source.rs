//! The git source: the commit served against the branch's head, the last fetches, a refused
//! head with its diagnostics, the served commit's warnings, and the deletion guard when it
//! holds a commit, with how to release it.

use maud::{html, Markup};

use crate::api::{PlacementStatus, Placements, Summary};
use crate::web::{ago, layout, none, Page};

pub struct Source<'a> {
    pub summary: &'a Summary,
    /// The placements document's head (no placements): it carries the warnings.
    pub doc: &'a Placements<&'a PlacementStatus>,
    pub now: u64,
}

pub fn page(v: &Source<'_>) -> Markup {
    let d = v.doc;
    let behind = d.head.is_some() && d.head != d.serving;
    let body = html! {
        h1 { "Git source" }
        section aria-labelledby="commits" {
            h2 #commits { "Commits" }
            dl.facts {
                @if let Some(s) = &d.source {
                    div { dt { "Repository" } dd { code { (s.url) } " (" (s.kind) ")" } }
                }
                div { dt { "Branch" } dd { code { (d.branch) } } }
                div { dt { "Branch head" } dd { code.head { (d.head.as_deref().unwrap_or("-")) } } }
                div { dt { "Served commit" } dd { code.serving { (d.serving.as_deref().unwrap_or("-")) }
                    @if behind { " " span.bad { "(not the head)" } } @else if d.serving.is_some() { " " span.ok { "(the head)" } } } }
                @if let Some(v) = &d.verified { div { dt { "Signed by" } dd { (v.signer) } } }
                @if let Some(n) = &d.not_serving { div { dt { "Serving nothing" } dd.bad { (n) } } }
                @if let Some(s) = &d.source {
                    div { dt { "Last successful fetch" } dd { @if let Some(t) = s.last_success { (ago(v.now, t)) } @else { "never" } } }
                    @if s.consecutive_failures > 0 {
                        div { dt { "Failing fetches" } dd.bad { (s.consecutive_failures) " in a row: " (s.last_error.as_deref().unwrap_or("")) } }
                    } @else if let (Some(e), Some(at)) = (&s.last_error, s.last_error_at) {
                        div { dt { "Last fetch error" } dd { (e) " (" (ago(v.now, at)) ")" } }
                    }
                }
            }
        }
        section aria-labelledby="refused" {
            h2 #refused { "Refused commit" }
            @match &d.rejected {
                None => (none("The head is not refused.")),
                Some(r) => {
                    p { "The commit " code { (r.commit) } " is refused; the last good commit goes on being served. Its diagnostics:" }
                    ul.diagnostics { @for e in &r.errors { li { code { (e) } } } }
                },
            }
        }
        section aria-labelledby="guard" {
            h2 #guard { "Deletion guard" }
            @match &d.held {
                None => (none("The deletion guard holds nothing.")),
                Some(h) => {
                    p.alert role="alert" { "The guard holds " code { (h.commit) } ": it would delete " (h.assessment.deleting) " of the " (h.assessment.managed) " objects gitfleet manages." }
                    @if !h.assessment.by_placement.is_empty() {
                        ul.kv { @for (p, n) in &h.assessment.by_placement { li { code { (p) } ": " (n) } } }
                    }
                    h3 { "How to release it" }
                    pre.release { (h.message) }
                },
            }
        }
        section aria-labelledby="warnings" {
            h2 #warnings { "Warnings of the served commit" }
            @if d.warnings.is_empty() { (none("None.")) } @else {
                ul.diagnostics { @for w in &d.warnings { li { (w) } } }
            }
        }
    };
    layout(Page::Source, "Git source", v.summary, body)
}
