//! Staged update runs (KubeFleet's staged update API and updaterun controller): `ClusterStagedUpdateRun`/`StagedUpdateRun`
//! objects in the commit move the clusters of `strategy.type: External` placements stage by
//! stage, as KubeFleet's updaterun controller moves them (pkg/controllers/updaterun/), with
//! approvals given by signed tags instead of `kubectl patch` (docs/guides/staged-runs-and-approvals.md).
//!
//! - [`init`]: initialisation, once, at the commit that brings the run;
//! - [`execute`]: re-validation, the stages, their tasks, the delete stage, Stop;
//! - [`rollback`]: a run that moves clusters to an older snapshot than they run says so;
//! - [`status`]: what a run remembers (its KubeFleet status), with KubeFleet's condition
//!   vocabulary.
//!
//! Pure: the clock, the accepted approvals and the fleet's last outcomes are parameters; it
//! returns the work for the clusters that move now — the same [`Work`] the rolling step makes —
//! and the approval requests it waits on. It does not read tags or talk to members.

pub mod execute;
pub mod init;
pub mod preview;
pub mod rollback;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use super::approval::{Approval, Request};
use super::rolling::{self, Revision};
use super::strategy::ApplyStrategy;
use super::work::{Manifests, Work};
use crate::model::placement::PlacementSpec;
use crate::model::staged::{StagedUpdateRun, StagedUpdateStrategy};
use crate::model::{PlacementKey, PlacementKind};
use crate::schedule::{Fleet, PlacementSchedule};
use crate::snapshot::History;

pub use status::{RunDelivery, RunStatus};

/// The placement a run targets, as this commit and the rollout state see it.
pub struct View<'a> {
    pub key: &'a PlacementKey,
    /// `None`: the placement does not exist (or is not a KubeFleet placement).
    pub spec: Option<&'a PlacementSpec>,
    pub schedule: Option<&'a PlacementSchedule>,
    pub fleet: &'a Fleet,
    /// What each cluster was last given by this placement, and its health.
    pub clusters: &'a crate::rollout::ClusterStates,
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
    /// A run of this name left the repository earlier ([`super::RolloutState::ended_runs`]):
    /// the deliveries that name it are the earlier run's, so this one is never rebuilt from
    /// them.
    pub ended_before: bool,
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
    // Snapshots that members' records say runs delivered (a state rebuilt from them).
    for d in view
        .clusters
        .values()
        .filter_map(|c| c.delivered_by.as_ref())
    {
        history.remember(
            d.resource_snapshot_index,
            &d.resource_snapshot,
            &d.render_commit,
        );
    }
    let mut steps = Vec::new();
    for r in runs {
        let mut moves = Moves::default();
        let rebuilt = (r.previous.is_none() && !r.ended_before)
            .then(|| init::rebuilt(view, r.run, r.strategy, now))
            .flatten();
        if let Some(st) = rebuilt {
            steps.push(RunStep {
                status: Some(st),
                moves,
            });
            continue;
        }
        let status = match r.previous {
            Some(prev) => {
                let mut st = prev.clone();
                let ex = execute::Exec {
                    view,
                    state: r.run.state(),
                    approvals,
                    now,
                };
                let was_terminal = st.is_terminal();
                execute::step_run(&mut st, &ex, render, &mut moves);
                if !was_terminal {
                    rollback::note(&mut st, view.clusters, now);
                }
                Some(st)
            }
            None => match init::initialize(
                view,
                r.run,
                r.strategy,
                history,
                commit,
                (!r.ended_before)
                    .then(|| init::recorded(view, r.run))
                    .flatten(),
                now,
            ) {
                Ok(mut st) => {
                    // KubeFleet goes on in the same reconcile with the state the run asks for.
                    let ex = execute::Exec {
                        view,
                        state: r.run.state(),
                        approvals,
                        now,
                    };
                    execute::step_run(&mut st, &ex, render, &mut moves);
                    rollback::note(&mut st, view.clusters, now);
                    Some(st)
                }
                Err(init::Failure::Fatal(m)) => {
                    Some(init::failed(view.key, r.run, commit, &m, now))
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

/// Keeps what the runs delivered in place, as KubeFleet's work applier keeps applying a
/// binding's snapshot whatever its runs do: each cluster of the placement that no run pushes
/// to in this step (`busy`), still scheduled, whose objects the member changed (a re-check),
/// whose availability is not known, or whose last confirmation failed, is re-applied with what
/// it runs — the rendering of the run that delivered its revision (deleted objects restored,
/// drift handled by the apply strategy, as for any push). A confirmation, not a move: nothing
/// is "applying". A cluster whose revision no run of `runs` delivered, or that renders
/// otherwise now, is left as it is (no run may be moved without a run).
pub fn heal(
    view: &View,
    runs: &[&RunStatus],
    busy: &BTreeSet<&str>,
    render: &mut RenderRun,
) -> Moves {
    use crate::schedule::BindingState;
    let mut moves = Moves::default();
    for (cluster, cs) in view.clusters {
        if busy.contains(cluster.as_str()) {
            continue;
        }
        let due = cs.is_marked()
            || cs.health == rolling::BindingHealth::Pending
            || (cs.health == rolling::BindingHealth::Failed
                && cs
                    .details
                    .attempted
                    .as_ref()
                    .is_none_or(|a| Some(a) == cs.revision.as_ref()));
        if !due {
            continue;
        }
        let Some(binding) = view.schedule.and_then(|s| {
            s.bindings
                .iter()
                .find(|b| &b.cluster == cluster && b.state != BindingState::Unscheduled)
        }) else {
            continue;
        };
        // The run that gave the cluster its revision; for a cluster adopted from its record
        // (revision unknown), the run the record names.
        let delivered_by = runs.iter().find(|r| match &cs.revision {
            Some(revision) => r
                .stages_status
                .iter()
                .flat_map(|s| &s.clusters)
                .any(|c| &c.cluster_name == cluster && c.revision.as_ref() == Some(revision)),
            None => cs.delivered_by.as_ref().is_some_and(|d| {
                d.run == status::run_key(r.namespace.as_deref(), &r.name)
                    && Some(d.resource_snapshot_index) == r.resource_snapshot_index_used
            }),
        });
        let Some(run) = delivered_by else {
            continue;
        };
        let Some(rendered) = render(run, cluster)
            .filter(|(_, r)| cs.revision.as_ref().is_none_or(|revision| r == revision))
        else {
            continue;
        };
        let stage = run
            .stages_status
            .iter()
            .find(|s| s.clusters.iter().any(|c| &c.cluster_name == cluster))
            .map_or("", |s| s.stage_name.as_str());
        if cs.health == rolling::BindingHealth::Pending {
            moves.requeue(execute::CLUSTER_POLL);
        }
        moves.work.push(
            Work::apply(
                view.key,
                cluster,
                rendered,
                view.apply_strategy,
                run.resource_snapshot_hash.as_str().into(),
                binding.state == BindingState::Scheduled,
                true,
            )
            .by_run(std::sync::Arc::new(RunDelivery::of(run, stage))),
        );
    }
    moves
}

/// The commits runs render from that a step may need besides its own: those of runs still
/// going, and those that delivered what a cluster runs now ([`heal`] renders them again).
pub fn render_commits(state: &super::RolloutState) -> BTreeSet<String> {
    RenderCommits::default().of(state)
}

/// [`render_commits`] for a daemon that asks at every reconcile: each placement's deliveries
/// are remembered with the placement state they were read from, so only the placements a
/// reconcile changed (a new `Arc`, copied on write) are walked again.
#[derive(Debug, Default)]
pub struct RenderCommits {
    /// A `Weak` keeps the allocation, so an equal pointer is the same unchanged state, and
    /// does not count as a holder for `Arc::make_mut` (which would otherwise copy it).
    delivered: BTreeMap<PlacementKey, (Weak<super::state::PlacementState>, BTreeSet<String>)>,
}

impl RenderCommits {
    pub fn of(&mut self, state: &super::RolloutState) -> BTreeSet<String> {
        self.delivered
            .retain(|key, _| state.placements.contains_key(key));
        let mut commits: BTreeSet<String> = state
            .runs
            .values()
            .filter(|r| !r.is_terminal() && !r.render_commit.is_empty())
            .map(|r| r.render_commit.clone())
            .collect();
        for (key, ps) in &state.placements {
            let fresh = self
                .delivered
                .get(key)
                .is_some_and(|(seen, _)| std::ptr::eq(seen.as_ptr(), Arc::as_ptr(ps)));
            if !fresh {
                let by = ps
                    .clusters
                    .values()
                    .filter_map(|c| c.delivered_by.as_ref())
                    .map(|d| d.render_commit.clone())
                    .collect();
                self.delivered.insert(key.clone(), (Arc::downgrade(ps), by));
            }
            commits.extend(self.delivered[key].1.iter().cloned());
        }
        commits
    }
}

/// The placement a run targets: `crp/NAME` for a `ClusterStagedUpdateRun`, `rp/NS/NAME` for a
/// `StagedUpdateRun`.
pub fn placement_of(run: &StagedUpdateRun) -> PlacementKey {
    let name = &run.spec.placement_name;
    match (&run.metadata.namespace, run.is_namespaced()) {
        (Some(ns), true) => PlacementKey::new(PlacementKind::ResourcePlacement, Some(ns), name),
        _ => PlacementKey::new(PlacementKind::ClusterResourcePlacement, None, name),
    }
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
