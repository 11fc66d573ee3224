//! What a placement's staged update runs will do with a commit, for `gitfleet plan`: each run's
//! stages as the rollout core cuts them (a run the daemon initialised as it recorded it, any
//! other as its initialisation would at the commit), what its stages do not show (it cannot be
//! initialised, or it moves clusters back to an older snapshot), and whether it delivers the
//! commit at all: a run renders the commit it was initialised at (its resources and overrides),
//! so when two runs share a placement only one the commit brings delivers the change.

use std::collections::BTreeSet;

use super::{init, placement_of, rollback, strategy_of, View};
use crate::catalog::Catalog;
use crate::model::placement::PlacementSpec;
use crate::model::staged::StageTask;
use crate::rollout::state::RolloutState;
use crate::rollout::step::run_key_of;
use crate::rollout::strategy::ApplyStrategy;
use crate::schedule::{Fleet, PlacementSchedule};
use serde::Serialize;

/// One stage of one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StageImpact {
    pub run: String,
    pub stage: String,
    pub clusters: Vec<String>,
    pub max_concurrency: usize,
    pub before: Vec<String>,
    pub after: Vec<String>,
    /// The run renders the commit (not an earlier one it was initialised with).
    pub delivers: bool,
}

/// What a run's stages do not show.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunNote {
    pub run: String,
    #[serde(flatten)]
    pub kind: RunNoteKind,
    /// In words: the daemon's own message (`Initialized=False`, `RollingBack=True`), or why the
    /// run does not deliver the commit.
    pub message: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum RunNoteKind {
    /// The run cannot be initialised: the daemon fails it with `message`.
    InitializationFailed,
    /// A transient state: the daemon tries again later.
    NotInitializedYet,
    /// It moves clusters to its resource snapshot `to`, older than the one they run.
    #[serde(rename_all = "camelCase")]
    RollsBack {
        to: u64,
        clusters: Vec<rollback::Rollback>,
    },
    /// It renders an earlier commit, with resource snapshot `index` (unknown without the
    /// daemon's state), not the commit's resources and overrides.
    #[serde(rename_all = "camelCase")]
    DoesNotDeliver { index: Option<u64> },
}

/// The placement and the commit its runs are previewed at.
pub struct Commit<'a> {
    pub commit: &'a str,
    pub cat: &'a Catalog,
    pub fleet: &'a Fleet,
    /// The daemon's state, when known: its runs are shown as it recorded them.
    pub rollout: Option<&'a RolloutState>,
    /// The hash of what the placement selects at the commit.
    pub resource_hash: Option<&'a str>,
    /// Runs of the base commit (by [`run_key_of`]): without the daemon's state, a run the base already had was
    /// initialised before this commit, with the resources of its time.
    pub base_runs: &'a BTreeSet<String>,
}

/// The stages of `schedule`'s placement's runs at `at`, and the notes on them.
pub fn preview(
    at: &Commit,
    schedule: &PlacementSchedule,
    spec: &PlacementSpec,
) -> (Vec<StageImpact>, Vec<RunNote>) {
    let key = &schedule.key;
    let no_clusters = crate::rollout::ClusterStates::new();
    let placement = at.rollout.and_then(|r| r.placements.get(key));
    let clusters = placement.map_or(&no_clusters, |p| &p.clusters);
    let view = View {
        key,
        spec: Some(spec),
        schedule: Some(schedule),
        fleet: at.fleet,
        clusters,
        resource_hash: at.resource_hash,
        revision_history_limit: spec.revision_history_limit.unwrap_or(10).max(1) as u32,
        indices_in_use: BTreeSet::new(),
        apply_strategy: ApplyStrategy::from_rollout(Some(&spec.strategy)),
    };
    let (mut stages, mut notes) = (Vec::new(), Vec::new());
    for e in &at.cat.update_runs {
        let run = &e.spec;
        if placement_of(run) != *key {
            continue;
        }
        let name = run_key_of(run);
        let mut history = placement.map(|p| p.resources.clone()).unwrap_or_default();
        let recorded = at.rollout.and_then(|r| r.runs.get(&name)).cloned();
        let started_before =
            recorded.is_some() || (at.rollout.is_none() && at.base_runs.contains(&name));
        let st = match recorded {
            Some(st) => st,
            None => {
                // As the daemon does: a run the members' records name resumes what they say.
                let ended = at.rollout.is_some_and(|r| r.ended_runs.contains(&name));
                let resumed = (!ended).then(|| init::recorded(&view, run)).flatten();
                let strategy = strategy_of(at.cat, run);
                match init::initialize(&view, run, strategy, &mut history, at.commit, resumed, 0) {
                    Ok(st) => st,
                    Err(failure) => {
                        let (kind, message) = match failure {
                            init::Failure::Fatal(m) => (RunNoteKind::InitializationFailed, m),
                            init::Failure::Retry(m) => (RunNoteKind::NotInitializedYet, m),
                        };
                        notes.push(RunNote {
                            run: name,
                            kind,
                            message,
                        });
                        continue;
                    }
                }
            }
        };
        if st.is_terminal() {
            continue;
        }
        let rollbacks = rollback::of(&st, clusters);
        if let (Some(to), false) = (st.resource_snapshot_index_used, rollbacks.is_empty()) {
            notes.push(RunNote {
                run: name.clone(),
                message: rollback::message(&st.name, to, &rollbacks),
                kind: RunNoteKind::RollsBack {
                    to,
                    clusters: rollbacks,
                },
            });
        }
        // A run renders one commit's resources and overrides, fixed at its initialisation (as
        // KubeFleet's run keeps the snapshots it recorded then); without the daemon's state, a
        // run the base already had was initialised with the base or earlier.
        let unknown_before = started_before && at.rollout.is_none();
        let delivers = !unknown_before && st.render_commit == at.commit;
        if !delivers {
            let index = st.resource_snapshot_index_used.filter(|_| !unknown_before);
            let message = match index {
                Some(i) => format!(
                    "it renders commit {} (resource snapshot {i}), fixed when it was initialised, not this commit",
                    &st.render_commit[..st.render_commit.len().min(12)]
                ),
                None => "it was initialised before this commit and renders the resources and overrides of that time, not this commit's (`gitfleet plan --state` or `--server` shows which)".to_string(),
            };
            notes.push(RunNote {
                run: name.clone(),
                kind: RunNoteKind::DoesNotDeliver { index },
                message,
            });
        }
        let frozen = st
            .staged_update_strategy_snapshot
            .clone()
            .unwrap_or_default();
        for (s, cfg) in st.stages_status.iter().zip(&frozen.stages) {
            let task = |t: &StageTask| match &t.wait_time {
                Some(w) => format!("{:?} {w}", t.type_),
                None => format!("{:?}", t.type_),
            };
            let clusters: Vec<String> = s.clusters.iter().map(|c| c.cluster_name.clone()).collect();
            stages.push(StageImpact {
                run: run.metadata.name.clone(),
                stage: s.stage_name.clone(),
                max_concurrency: cfg.max_concurrency_for(clusters.len()),
                clusters,
                before: cfg.before_stage_tasks.iter().map(task).collect(),
                after: cfg.after_stage_tasks.iter().map(task).collect(),
                delivers,
            });
        }
    }
    (stages, notes)
}
