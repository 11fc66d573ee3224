//! gitfleet: a Git repository as the hub of a Kubernetes fleet (KubeFleet and OCM placements).
//!
//! The core is pure and synchronous, values in and values out; the edges read repositories,
//! talk to members and people, and keep state. See docs/architecture.md.
//!
//! Core:
//! - [`model`]: the API objects as types, their defaults and per-object rules;
//! - [`yaml`]: YAML read as Kubernetes reads it, and written so it reads back the same
//!   (with [`timestamp`] and [`model::quantity`], from the `gitfleet-kube-text` crate);
//! - [`catalog`]: a commit's objects, parsed with their origin, classified and cross-validated;
//! - [`analyze`](mod@analyze): a commit's catalog and all its diagnostics, in one call;
//! - [`lint`]: likely mistakes in a valid commit (warnings) and "did you mean" hints;
//! - [`snapshot`]: resource selection, sanitisation, canonical hashes, snapshot indices;
//! - [`schedule`]: which members each placement picks (KubeFleet and OCM semantics);
//! - [`render`]: each member's manifests (overrides, envelopes, apply waves);
//! - [`feedback`]: what OCM works' feedback and condition rules read from a live object;
//! - [`rollout`]: one step for one commit — what each member gets now, paced — taken by
//!   `gitfleet run` (the [`daemon`]), `gitfleet apply` ([`cli`]) and `gitfleet plan`;
//! - [`plan`]: what a change does to the fleet, for review;
//! - [`text_table`]: aligned text tables for every command's table output.
//!
//! Edges:
//! - [`source`]: reading a commit's files with gix; [`follow`]: following a branch (local or
//!   mirrored), [`webhook`]: GitHub/GitLab webhook signatures;
//! - [`sources`]: what teams write turned into the files the catalog reads (SOPS files
//!   decrypted with keys kept outside the repository); every command reads commits through it;
//! - [`approvals`]: signed approval tags and signed commits, verified in-process against the
//!   daemon's trust files;
//! - [`members`]: kube clients per member, retries, the live inventory;
//! - [`push`]: applying manifests on members (SSA/CSA/ReportDiff, records, prune, drift);
//! - [`state`]: the daemon's state directory;
//! - [`daemon`]: `gitfleet run` (event loop, reconciler, status API, metrics);
//! - [`api`]: the status API's wire types, shared by the server and its clients, and
//!   [`api::client`], which reads a running daemon;
//! - [`cli`]: the command line, one file per command (`gitfleet quickstart` included);
//!   [`trimmed_output`]: long output printed as it is made (`gitfleet plan`);
//!
//! Beside it in the workspace (crates/): `gitfleet-kube-text` (Kubernetes' YAML, quantities and
//! timestamps), `gitfleet-sim` (simulated members: `gitfleet sim`, the quick start, the tests)
//! and `gitfleet-testkit` (the benchmarks' fleets and the fuzz targets' entry points).

pub mod analyze;
pub mod api;
pub mod approvals;
pub(crate) mod build_info;
pub mod catalog;
mod cli;
pub(crate) mod cluster_client;
#[cfg(test)]
mod compat_corpus;
pub mod daemon;
pub(crate) mod exact_fit;
pub(crate) mod fast_hash;
pub mod feedback;
pub(crate) mod follow;
pub mod lint;
pub(crate) mod members;
pub mod model;
pub mod notify;
pub mod plan;
pub mod push;
pub mod render;
pub mod rollout;
pub mod schedule;
pub mod snapshot;
pub mod source;
pub mod sources;
pub mod state;
pub(crate) mod text_table;
pub mod timestamp;
pub(crate) mod trimmed_output;
pub mod web;
pub mod webhook;

// Kubernetes' text formats live in their own crate, which the simulator shares.
pub use gitfleet_kube_text::yaml;

// `gitfleet::analyze(files)`, as before the function had its own module.
pub use analyze::analyze;

// The command line is the binary's, not the library's: only its entry point is public.
pub use cli::main as cli_main;
