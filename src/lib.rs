//! gitfleet: a Git repository as the hub of a Kubernetes fleet.
//!
//! The core (`model`, `catalog`, `snapshot`, `schedule`, `render`, `rollout`, `plan`) is pure and
//! synchronous: values in, values out. `rollout` is one step for one commit, which `gitfleet
//! run` (the `daemon`), `gitfleet apply` (`cli`) and `gitfleet plan` all take. The edges
//! (`source`, `follow`, `members`, `push`, `state`, `daemon`, `cli`) read repositories, talk to
//! members and people, and keep state. See ARCHITECTURE.md.

pub mod approvals;
pub mod bench;
pub mod catalog;
pub mod cli;
pub mod daemon;
pub mod daemon_client;
pub mod follow;
pub mod members;
pub mod model;
pub mod plan;
pub mod push;
pub mod quickstart;
pub mod render;
pub mod rollout;
pub mod schedule;
pub mod sim;
pub mod snapshot;
pub mod source;
pub mod state;
pub mod text_table;
pub mod webhook;
pub mod yaml;

use catalog::{Catalog, Diagnostic, SourceFile};

/// Everything one commit declares, validated: the catalog plus every problem found, including the
/// placements' resource-selection errors. A commit with any diagnostic must not be rolled out.
pub fn analyze(files: &[SourceFile]) -> (Catalog, Vec<Diagnostic>) {
    let (cat, mut diags) = Catalog::load(files);
    diags.extend(snapshot::selection_diagnostics(&cat));
    diags.sort();
    diags.dedup();
    (cat, diags)
}
