//! One module per page of the dashboard.

pub mod matrix;
pub mod overview;
pub mod placement;
pub mod runs;
pub mod source;

use maud::{html, Markup};

/// Which part of a longer list a page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    pub offset: usize,
    pub limit: usize,
    /// How many there are in all (that matched the filters).
    pub matched: usize,
}

impl Paging {
    /// "Previous" and "next" links: `link(offset)` makes the link to the page at `offset`,
    /// every other parameter kept (shared links open the same view).
    pub fn nav(&self, label: &str, link: impl Fn(usize) -> String) -> Markup {
        let end = (self.offset + self.limit).min(self.matched);
        html! {
            nav.pager aria-label=(label) {
                @if self.offset > 0 {
                    a rel="prev" href=(link(self.offset.saturating_sub(self.limit))) { "← previous" }
                }
                span { (label) " " (if self.matched == 0 { 0 } else { self.offset + 1 }) "–" (end) " of " (self.matched) }
                @if end < self.matched {
                    a rel="next" href=(link(end)) { "next →" }
                }
            }
        }
    }
}

/// Counts of a placement's clusters per state, in [`crate::api::ClusterPlacementState::ALL`]'s
/// order.
pub fn state_counts(
    p: &crate::api::PlacementStatus,
) -> [(crate::api::ClusterPlacementState, usize); 6] {
    let mut counts = crate::api::ClusterPlacementState::ALL.map(|s| (s, 0));
    let mut seen = std::collections::BTreeSet::new();
    for c in p
        .selected
        .iter()
        .map(|c| c.as_str())
        .chain(p.clusters.keys().map(crate::model::ClusterName::as_str))
        .chain(p.removing.iter().map(String::as_str))
    {
        if !seen.insert(c) {
            continue;
        }
        if let Some(s) = p.cluster_state(c) {
            if let Some(slot) = counts.iter_mut().find(|(k, _)| *k == s) {
                slot.1 += 1;
            }
        }
    }
    counts
}
