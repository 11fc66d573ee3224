//! What a staged update run remembers between steps — KubeFleet's `UpdateRunStatus`
//! (apis/placement/v1beta1/stageupdate_types.go) as values: the snapshots it froze at
//! initialisation, its stages with their clusters and tasks, the delete stage, and the
//! conditions of each, with KubeFleet's types, reasons and messages
//! (pkg/utils/condition/reason.go). Stored in the rollout state, so a restart resumes the run
//! where it was.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::staged::{StageTaskType, UpdateRunState, UpdateStrategySpec};
use crate::rollout::approval::Approval;
use crate::rollout::rolling::Revision;

/// Run condition types (`StagedUpdateRunConditionType`).
pub const INITIALIZED: &str = "Initialized";
pub const PROGRESSING: &str = "Progressing";
pub const SUCCEEDED: &str = "Succeeded";
/// Cluster condition type (`ClusterUpdatingConditionStarted`); clusters also use SUCCEEDED.
pub const STARTED: &str = "Started";
/// Stage task condition types (`StageTaskConditionType`).
pub const APPROVAL_REQUEST_CREATED: &str = "ApprovalRequestCreated";
pub const APPROVAL_REQUEST_APPROVED: &str = "ApprovalRequestApproved";
pub const WAIT_TIME_ELAPSED: &str = "WaitTimeElapsed";
/// Approval request condition types (`ApprovalRequestConditionType`).
pub const APPROVED: &str = "Approved";
pub const APPROVAL_ACCEPTED: &str = "ApprovalAccepted";

/// KubeFleet's reasons (pkg/utils/condition/reason.go).
pub mod reason {
    pub const INITIALIZED: &str = "UpdateRunInitializedSuccessfully";
    pub const INITIALIZE_FAILED: &str = "UpdateRunInitializedFailed";
    pub const PROGRESSING: &str = "UpdateRunProgressing";
    pub const FAILED: &str = "UpdateRunFailed";
    pub const STUCK: &str = "UpdateRunStuck";
    pub const WAITING: &str = "UpdateRunWaiting";
    pub const STOPPING: &str = "UpdateRunStopping";
    pub const STOPPED: &str = "UpdateRunStopped";
    pub const SUCCEEDED: &str = "UpdateRunSucceeded";
    pub const STAGE_STARTED: &str = "StageUpdatingStarted";
    pub const STAGE_WAITING: &str = "StageUpdatingWaiting";
    pub const STAGE_STOPPING: &str = "StageUpdatingStopping";
    pub const STAGE_STOPPED: &str = "StageUpdatingStopped";
    pub const STAGE_FAILED: &str = "StageUpdatingFailed";
    pub const STAGE_SUCCEEDED: &str = "StageUpdatingSucceeded";
    pub const STAGE_SKIPPED: &str = "StageUpdatingSkippedNoClusters";
    pub const CLUSTER_STARTED: &str = "ClusterUpdatingStarted";
    pub const CLUSTER_FAILED: &str = "ClusterUpdatingFailed";
    pub const CLUSTER_SUCCEEDED: &str = "ClusterUpdatingSucceeded";
    pub const TASK_APPROVED: &str = "StageTaskApprovalRequestApproved";
    pub const TASK_CREATED: &str = "StageTaskApprovalRequestCreated";
    pub const WAIT_ELAPSED: &str = "AfterStageTaskWaitTimeElapsed";
    pub const APPROVAL_ACCEPTED: &str = "ApprovalRequestApprovalAccepted";
}

/// A `metav1.Condition` without the generation (a run's conditions always refer to the run as
/// the commit states it). Times are unix seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_transition_time: u64,
}

/// `meta.SetStatusCondition`: replaces the condition of the same type; the transition time only
/// moves when the status changes (the TimedWait clock depends on this).
pub fn set(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    now: u64,
) {
    let message = message.into();
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message;
        }
        None => conds.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message,
            last_transition_time: now,
        }),
    }
}

pub fn find<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

pub fn is_true(conds: &[Condition], type_: &str) -> bool {
    find(conds, type_).is_some_and(|c| c.status == "True")
}

pub fn is_false(conds: &[Condition], type_: &str) -> bool {
    find(conds, type_).is_some_and(|c| c.status == "False")
}

/// Which staged update run delivered what a cluster runs: kept with the cluster in the rollout
/// state and in the member's record of the placement (`gitfleet.io/update-run`), so that a
/// state rebuilt from the members knows a run all of whose clusters it delivered as finished.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunDelivery {
    /// The run's key ([`run_key`]).
    pub run: String,
    pub stage: String,
    pub resource_snapshot_index: u64,
    /// The resource snapshot's hash (the objects' `gitfleet.io/resource-snapshot` stamp).
    pub resource_snapshot: String,
    /// The commit the run renders from, and the one it was initialised at.
    pub render_commit: String,
    pub init_commit: String,
}

impl RunDelivery {
    /// What `st` delivers to the clusters of its stage `stage`.
    pub fn of(st: &RunStatus, stage: &str) -> RunDelivery {
        RunDelivery {
            run: run_key(st.namespace.as_deref(), &st.name),
            stage: stage.to_string(),
            resource_snapshot_index: st.resource_snapshot_index_used.unwrap_or_default(),
            resource_snapshot: st.resource_snapshot_hash.clone(),
            render_commit: st.render_commit.clone(),
            init_commit: st.init_commit.clone(),
        }
    }
}

/// One run's progress (KubeFleet's `UpdateRunStatus`, plus what Git adds: the commit the run
/// was initialised at, which approving tags must point at).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// `None` for a `ClusterStagedUpdateRun`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// The placement (written as its id, `crp/NAME`, `rp/NS/NAME`).
    #[serde(with = "crate::model::placement_key::as_id")]
    pub placement: crate::model::PlacementKey,
    pub strategy_name: String,
    /// The commit that brought the run: the run was initialised there.
    pub init_commit: String,
    /// When the run was first seen (unix seconds): its age.
    pub created_at: u64,
    /// `spec.state` as last seen.
    pub state: UpdateRunState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_snapshot_index_used: Option<u64>,
    /// PickN: N; PickFixed: the number of names; PickAll: the selected bindings at init.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_observed_cluster_count: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_snapshot_index_used: Option<u64>,
    /// The hash of that resource snapshot: the `gitfleet.io/resource-snapshot` stamp.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_snapshot_hash: String,
    /// The commit whose tree the run renders (the snapshot's content and the overrides).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub render_commit: String,
    /// The placement's `strategy.applyStrategy` at initialisation (a change aborts the run).
    #[serde(default)]
    pub applied_strategy: Value,
    /// The strategy's spec as it was at initialisation: later edits do not affect the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged_update_strategy_snapshot: Option<UpdateStrategySpec>,
    #[serde(default)]
    pub stages_status: Vec<StageStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_stage_status: Option<StageStatus>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    pub stage_name: String,
    #[serde(default)]
    pub clusters: Vec<ClusterStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before_stage_task_status: Vec<TaskStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_stage_task_status: Vec<TaskStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<u64>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub cluster_name: String,
    /// What the run gave the cluster when it started it (a different revision found later
    /// means another run changed it: preemption).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<Revision>,
    /// What the cluster ran, or last failed to run, when the run started it: until the run's
    /// own push lands (the daemon's workers push while later steps are decided), finding one
    /// of these is not preemption.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<Revision>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    #[serde(rename = "type")]
    pub type_: StageTaskType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_request_name: Option<String>,
    /// The accepted approval (irrevocable once recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// When the request was created (reached), unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<u64>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

impl RunStatus {
    /// The run's key: `<namespace>/<name>` or `<name>`.
    pub fn key(&self) -> String {
        run_key(self.namespace.as_deref(), &self.name)
    }

    /// Finished for good: succeeded, failed, or initialisation failed.
    pub fn is_terminal(&self) -> bool {
        let succeeded = find(&self.conditions, SUCCEEDED).is_some_and(|c| c.status != "Unknown");
        succeeded || is_false(&self.conditions, INITIALIZED)
    }

    /// The index of the stage being updated: the first that has not succeeded; the number of
    /// stages when only the delete stage is left.
    pub fn current_stage(&self) -> usize {
        self.stages_status
            .iter()
            .position(|s| !is_true(&s.conditions, SUCCEEDED))
            .unwrap_or(self.stages_status.len())
    }

    /// When the current stage's after-stage TimedWait ends (unix seconds): while every cluster
    /// of the stage is done and the wait has not elapsed. It starts when the stage's clusters
    /// finished (its Progressing condition's last transition), as the run executes it.
    pub fn timed_wait_ends(&self) -> Option<u64> {
        let i = self.current_stage();
        let stage = self.stages_status.get(i)?;
        let done = stage
            .clusters
            .iter()
            .all(|c| is_true(&c.conditions, SUCCEEDED));
        let start = find(&stage.conditions, PROGRESSING)?.last_transition_time;
        let tasks = &self
            .staged_update_strategy_snapshot
            .as_ref()?
            .stages
            .get(i)?
            .after_stage_tasks;
        let ends = stage
            .after_stage_task_status
            .iter()
            .zip(tasks)
            .filter(|(t, _)| {
                t.type_ == StageTaskType::TimedWait && !is_true(&t.conditions, WAIT_TIME_ELAPSED)
            })
            .map(|(_, cfg)| start + wait_secs(Some(cfg)))
            .max();
        ends.filter(|_| done)
    }
}

/// Where a run stands, in one word: `Succeeded`, `Failed` (initialisation or execution),
/// `Initializing` (no Progressing condition yet), else the Progressing condition's reason
/// without its prefix: `Waiting`, `Stuck`, `Stopping`, `Stopped`, or `Progressing`. The
/// daemon's metrics count runs by it and `gitfleet wait` waits for the runs still moving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunPhase {
    Initializing,
    Progressing,
    Waiting,
    Stuck,
    Stopping,
    Stopped,
    Succeeded,
    Failed,
}

impl RunPhase {
    pub const ALL: [RunPhase; 8] = [
        RunPhase::Initializing,
        RunPhase::Progressing,
        RunPhase::Waiting,
        RunPhase::Stuck,
        RunPhase::Stopping,
        RunPhase::Stopped,
        RunPhase::Succeeded,
        RunPhase::Failed,
    ];

    pub fn of(st: &RunStatus) -> RunPhase {
        if is_true(&st.conditions, SUCCEEDED) {
            return RunPhase::Succeeded;
        }
        if is_false(&st.conditions, SUCCEEDED) || is_false(&st.conditions, INITIALIZED) {
            return RunPhase::Failed;
        }
        match find(&st.conditions, PROGRESSING).map(|c| c.reason.as_str()) {
            None => RunPhase::Initializing,
            Some(reason::WAITING) => RunPhase::Waiting,
            Some(reason::STUCK) => RunPhase::Stuck,
            Some(reason::STOPPING) => RunPhase::Stopping,
            Some(reason::STOPPED) => RunPhase::Stopped,
            Some(_) => RunPhase::Progressing,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RunPhase::Initializing => "Initializing",
            RunPhase::Progressing => "Progressing",
            RunPhase::Waiting => "Waiting",
            RunPhase::Stuck => "Stuck",
            RunPhase::Stopping => "Stopping",
            RunPhase::Stopped => "Stopped",
            RunPhase::Succeeded => "Succeeded",
            RunPhase::Failed => "Failed",
        }
    }

    /// Still moving: neither finished nor stopped.
    pub fn in_progress(self) -> bool {
        !matches!(
            self,
            RunPhase::Stopped | RunPhase::Succeeded | RunPhase::Failed
        )
    }
}

impl fmt::Display for RunPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One line for people: the run's latest word (Succeeded, else Progressing, else Initialized).
pub fn summary(st: &RunStatus) -> String {
    let c = [SUCCEEDED, PROGRESSING, INITIALIZED]
        .iter()
        .find_map(|t| find(&st.conditions, t));
    match c {
        Some(c) => format!("{}={} {}: {}", c.type_, c.status, c.reason, c.message),
        None => "not initialised".into(),
    }
}

/// The approvals a run has recorded (accepted once, kept whatever the tags do later).
pub fn recorded_approvals(st: &RunStatus) -> Vec<Approval> {
    st.stages_status
        .iter()
        .flat_map(|s| {
            s.before_stage_task_status
                .iter()
                .chain(&s.after_stage_task_status)
        })
        .filter_map(|t| t.approval.clone())
        .collect()
}

/// The approval requests of a run that exist and are not approved yet: what the approvals
/// edge is asked about.
pub fn open_requests(st: &RunStatus) -> Vec<crate::rollout::approval::Request> {
    use crate::model::staged::TaskPhase;
    let mut out = Vec::new();
    if st.is_terminal() {
        return out;
    }
    for s in &st.stages_status {
        let tasks = s
            .before_stage_task_status
            .iter()
            .map(|t| (t, TaskPhase::BeforeStage))
            .chain(
                s.after_stage_task_status
                    .iter()
                    .map(|t| (t, TaskPhase::AfterStage)),
            );
        for (t, phase) in tasks {
            if t.type_ == StageTaskType::Approval
                && is_true(&t.conditions, APPROVAL_REQUEST_CREATED)
                && !is_true(&t.conditions, APPROVAL_REQUEST_APPROVED)
            {
                out.push(crate::rollout::approval::Request {
                    namespace: st.namespace.clone(),
                    run: st.name.clone(),
                    stage: s.stage_name.clone(),
                    phase,
                    commit: st.init_commit.clone(),
                });
            }
        }
    }
    out
}

/// A run's key: `<namespace>/<name>` or `<name>`.
pub fn run_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// A TimedWait task's wait in whole seconds, rounded up (none: no wait).
pub fn wait_secs(task: Option<&crate::model::staged::StageTask>) -> u64 {
    let d = task.and_then(|t| t.wait_duration()).unwrap_or_default();
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_phase_comes_from_its_conditions() {
        let mut st: RunStatus = serde_json::from_value(serde_json::json!({"name": "r1",
            "placement": "crp/app", "strategyName": "s", "initCommit": "c", "createdAt": 1,
            "state": "Run"}))
        .unwrap();
        let failed_init = {
            let mut f = st.clone();
            set(
                &mut f.conditions,
                INITIALIZED,
                "False",
                reason::INITIALIZE_FAILED,
                "",
                1,
            );
            f
        };
        assert_eq!(RunPhase::of(&failed_init), RunPhase::Failed);
        assert_eq!(RunPhase::of(&st), RunPhase::Initializing);
        set(
            &mut st.conditions,
            INITIALIZED,
            "True",
            reason::INITIALIZED,
            "",
            1,
        );
        for (progressing, want) in [
            (reason::PROGRESSING, RunPhase::Progressing),
            (reason::WAITING, RunPhase::Waiting),
            (reason::STUCK, RunPhase::Stuck),
            (reason::STOPPING, RunPhase::Stopping),
            (reason::STOPPED, RunPhase::Stopped),
        ] {
            set(&mut st.conditions, PROGRESSING, "False", progressing, "", 2);
            assert_eq!(RunPhase::of(&st), want, "{progressing}");
            assert_eq!(want.in_progress(), want != RunPhase::Stopped);
        }
        set(
            &mut st.conditions,
            SUCCEEDED,
            "True",
            reason::SUCCEEDED,
            "",
            3,
        );
        assert_eq!(RunPhase::of(&st), RunPhase::Succeeded);
        set(
            &mut st.conditions,
            SUCCEEDED,
            "False",
            reason::FAILED,
            "",
            4,
        );
        assert_eq!(RunPhase::of(&st), RunPhase::Failed);
        assert!(!RunPhase::Failed.in_progress());
    }

    #[test]
    fn set_moves_the_transition_time_only_when_the_status_changes() {
        let mut c = Vec::new();
        set(&mut c, PROGRESSING, "True", reason::STAGE_STARTED, "a", 10);
        set(&mut c, PROGRESSING, "True", reason::STAGE_STARTED, "b", 20);
        assert_eq!(c[0].last_transition_time, 10);
        assert_eq!(c[0].message, "b");
        set(&mut c, PROGRESSING, "False", reason::STAGE_WAITING, "c", 30);
        assert_eq!(c[0].last_transition_time, 30);
        assert_eq!(c[0].reason, reason::STAGE_WAITING);
        set(
            &mut c,
            PROGRESSING,
            "False",
            reason::STAGE_SUCCEEDED,
            "d",
            40,
        );
        assert_eq!(c[0].last_transition_time, 30);
    }
}
