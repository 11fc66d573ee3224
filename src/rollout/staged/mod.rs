//! Staged update runs (kubefleet.md §1.8, §3.3): `ClusterStagedUpdateRun`/`StagedUpdateRun`
//! objects in the commit move the clusters of `strategy.type: External` placements stage by
//! stage, as KubeFleet's updaterun controller moves them (pkg/controllers/updaterun/), with
//! approvals given by signed tags instead of `kubectl patch` (spec/README §4).
//!
//! - [`init`]: initialisation, once, at the commit that brings the run;
//! - [`execute`]: re-validation, the stages, their tasks, the delete stage, Stop;
//! - [`status`]: what a run remembers (its KubeFleet status), with KubeFleet's condition
//!   vocabulary.
//!
//! Pure: the clock, the accepted approvals and the fleet's last outcomes are parameters; it
//! returns the work for the clusters that move now — the same [`Work`] the rolling step makes —
//! and the approval requests it waits on. It does not read tags or talk to members.

pub mod execute;
pub mod init;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};

use super::approval::{Approval, Request};
use super::rolling::Revision;
use super::state::ClusterState;
use super::strategy::ApplyStrategy;
use super::work::{Manifests, Work};
use crate::model::placement::PlacementSpec;
use crate::model::staged::{StagedUpdateRun, StagedUpdateStrategy};
use crate::model::PlacementKey;
use crate::schedule::{Fleet, PlacementSchedule};
use crate::snapshot::History;

pub use status::RunStatus;

/// The placement a run targets, as this commit and the rollout state see it.
pub struct View<'a> {
    pub key: &'a PlacementKey,
    /// `None`: the placement does not exist (or is not a KubeFleet placement).
    pub spec: Option<&'a PlacementSpec>,
    pub schedule: Option<&'a PlacementSchedule>,
    pub fleet: &'a Fleet,
    /// What each cluster was last given by this placement, and its health.
    pub clusters: &'a BTreeMap<String, ClusterState>,
    /// The hash of what the placement selects in this commit (a snapshot is taken from it
    /// when a run without `resourceSnapshotIndex` initialises).
    pub resource_hash: Option<&'a str>,
    pub revision_history_limit: u32,
    /// Snapshot indices bindings or runs still use (never dropped from the history).
    pub indices_in_use: BTreeSet<u64>,
    pub apply_strategy: ApplyStrategy,
}

/// What one step of one run asks for.
#[derive(Debug, Default)]
pub struct Moves {
    pub work: Vec<Work>,
    pub applying: Vec<String>,
    pub removing: Vec<String>,
    /// Approval requests reached and not approved.
    pub waiting_on: Vec<Request>,
    /// Seconds until the run wants another look; 0: only on a change.
    pub requeue_after: u64,
    /// Why the run did not move, when it is a transient state.
    pub note: Option<String>,
}

impl Moves {
    fn requeue(&mut self, secs: u64) {
        let secs = secs.max(1);
        if self.requeue_after == 0 || secs < self.requeue_after {
            self.requeue_after = secs;
        }
    }
}

/// What a cluster should run for a run: its snapshot rendered with the cluster's overrides
/// (`None` when it cannot be rendered).
pub type RenderRun<'r> = dyn FnMut(&RunStatus, &str) -> Option<(Manifests, Revision)> + 'r;

/// One run of the commit, with what the step needs about it.
pub struct RunInput<'a> {
    pub run: &'a StagedUpdateRun,
    /// The strategy the run names, in this commit (used only at initialisation).
    pub strategy: Option<&'a StagedUpdateStrategy>,
    /// The run's record from the previous steps; `None` for a run this commit brings.
    pub previous: Option<&'a RunStatus>,
}

/// One step of a run: its record after the step (`None` when it cannot be initialised yet, a
/// transient state) and what moves.
pub struct RunStep {
    pub status: Option<RunStatus>,
    pub moves: Moves,
}

/// Steps every run of one placement. `history` is the placement's resource snapshot history,
/// advanced when a run takes a new snapshot; `render` gives what a cluster should run for a run
/// (its snapshot, rendered with its overrides).
pub fn advance(
    view: &View,
    runs: &[RunInput],
    history: &mut History,
    approvals: &BTreeMap<String, Approval>,
    commit: &str,
    now: u64,
    render: &mut RenderRun,
) -> Vec<RunStep> {
    let mut steps = Vec::new();
    for r in runs {
        let mut moves = Moves::default();
        let status = match r.previous {
            Some(prev) => {
                let mut st = prev.clone();
                let ex = execute::Exec {
                    view,
                    state: r.run.state(),
                    approvals,
                    now,
                };
                execute::step_run(&mut st, &ex, render, &mut moves);
                Some(st)
            }
            None => match init::initialize(view, r.run, r.strategy, history, commit, now) {
                Ok(mut st) => {
                    // KubeFleet goes on in the same reconcile with the state the run asks for.
                    let ex = execute::Exec {
                        view,
                        state: r.run.state(),
                        approvals,
                        now,
                    };
                    execute::step_run(&mut st, &ex, render, &mut moves);
                    Some(st)
                }
                Err(init::Failure::Fatal(m)) => {
                    Some(init::failed(&view.key.to_string(), r.run, commit, &m, now))
                }
                Err(init::Failure::Retry(m)) => {
                    moves.note = Some(m);
                    moves.requeue(execute::CLUSTER_POLL);
                    None
                }
            },
        };
        steps.push(RunStep { status, moves });
    }
    steps
}

/// The placement a run targets: `crp/NAME` for a `ClusterStagedUpdateRun`, `rp/NS/NAME` for a
/// `StagedUpdateRun`.
pub fn placement_of(run: &StagedUpdateRun) -> PlacementKey {
    let id = match (&run.metadata.namespace, run.is_namespaced()) {
        (Some(ns), true) => format!("rp/{ns}/{}", run.spec.placement_name),
        _ => format!("crp/{}", run.spec.placement_name),
    };
    id.parse().expect("a well-formed placement id")
}

/// The strategy a run names, in `cat`: the cluster-scoped one for a cluster-scoped run, the
/// one in the run's namespace for a namespaced one.
pub fn strategy_of<'c>(
    cat: &'c crate::catalog::Catalog,
    run: &StagedUpdateRun,
) -> Option<&'c StagedUpdateStrategy> {
    cat.update_strategies.iter().map(|e| &e.spec).find(|s| {
        s.metadata.name == run.spec.staged_rollout_strategy_name
            && s.is_namespaced() == run.is_namespaced()
            && (!run.is_namespaced() || s.metadata.namespace == run.metadata.namespace)
    })
}

#[cfg(test)]
mod tests;
