//! Running an initialised run one step further — KubeFleet's `validate`, `execute` and `stop`
//! (pkg/controllers/updaterun/{validation,execution,stop}.go): re-validate (abort if the
//! placement is no longer External, its apply strategy, policy snapshot or cluster count
//! changed, or the stages' clusters differ); then, for `state: Run`, the current stage: skip it
//! if empty, wait for its before-stage approval, start clusters in order up to
//! `maxConcurrency`, count them done when available (or diff reported), flag the run stuck when
//! one takes more than five minutes, and when all are done run the after-stage tasks (TimedWait
//! and Approval, together); after the last stage the delete stage. `state: Stop` lets started
//! clusters finish and starts none.
//!
//! Two departures, both invisible to a user of KubeFleet: what KubeFleet does over several
//! reconciles when nothing waits (next stage, approval request created then found approved) is
//! done in one pass; and pushing is synchronous here, so a binding whose removal failed is
//! removed again instead of aborting the run.

use std::collections::BTreeMap;

use super::init::{self, Failure, ABORTED};
use super::status::{self, reason, RunStatus, StageStatus, TaskStatus};
use super::{Moves, View};
use crate::model::staged::{StageConfig, StageTaskType, TaskPhase, UpdateRunState};
use crate::rollout::approval::{Approval, Request};
use crate::rollout::rolling::{BindingHealth, Revision};
use crate::rollout::work::Work;
use crate::schedule::BindingState;

/// KubeFleet's `updateRunStuckThreshold`.
pub const STUCK_AFTER: u64 = 5 * 60;
/// KubeFleet's `clusterUpdatingWaitTime`: look again while clusters update.
pub const CLUSTER_POLL: u64 = 15;
/// KubeFleet's `stageUpdatingWaitTime`: look again while waiting for an approval.
pub const STAGE_POLL: u64 = 60;

/// What one step of a run needs besides the run's record.
pub struct Exec<'a, 'v> {
    pub view: &'a View<'v>,
    pub state: UpdateRunState,
    pub approvals: &'a BTreeMap<String, Approval>,
    pub now: u64,
}

use super::RenderRun as Render;

/// One step of an initialised run.
pub fn step_run(st: &mut RunStatus, ex: &Exec, render: &mut Render, out: &mut Moves) {
    st.state = ex.state;
    if st.is_terminal() {
        return;
    }
    match revalidate(st, ex.view) {
        Ok(()) => {}
        Err(Failure::Fatal(m)) => return fail_run(st, &m, ex.now),
        Err(Failure::Retry(m)) => {
            out.note = Some(m);
            out.requeue(CLUSTER_POLL);
            return;
        }
    }
    match ex.state {
        UpdateRunState::Initialize => {}
        UpdateRunState::Run => execute(st, ex, render, out),
        UpdateRunState::Stop => stop(st, ex, render, out),
    }
}

/// validate(): the run may go on only if what it was initialised with still holds.
fn revalidate(st: &RunStatus, view: &View) -> Result<(), Failure> {
    let clusters = init::collect(view)?;
    let spec = view.spec.expect("collect checked the placement");
    let latest = init::applied_strategy(spec);
    if latest != st.applied_strategy {
        return Err(Failure::Fatal(format!(
            "{ABORTED}: the applyStrategy in the updateRun is outdated, latest: {latest}, recorded: {}",
            st.applied_strategy
        )));
    }
    let recorded = st.policy_snapshot_index_used.unwrap_or_default();
    if clusters.policy_index != recorded {
        return Err(Failure::Fatal(format!(
            "{ABORTED}: the policy snapshot index used in the updateRun is outdated, latest: {}, recorded: {recorded}",
            clusters.policy_index
        )));
    }
    if let (Some(n), Some(recorded)) = (clusters.expected, st.policy_observed_cluster_count) {
        if n != recorded {
            return Err(Failure::Fatal(format!(
                "{ABORTED}: the cluster count initialized in the updateRun is outdated, latest: {n}, recorded: {recorded}"
            )));
        }
    }
    let Some(frozen) = &st.staged_update_strategy_snapshot else {
        return Err(Failure::Fatal(format!(
            "{ABORTED}: the updateRun has nil updateStrategySnapshot"
        )));
    };
    let now = init::compute_stages(
        view,
        &st.name,
        &st.strategy_name,
        frozen,
        &clusters.to_update,
    )?;
    let (new, old) = (
        init::stage_clusters(&now),
        init::stage_clusters(&st.stages_status),
    );
    if new.len() != old.len() {
        return Err(Failure::Fatal(format!(
            "{ABORTED}: the number of stages in the updateRun has changed, new: {}, existing: {}",
            new.len(),
            old.len()
        )));
    }
    for (i, ((new_name, new_clusters), (old_name, old_clusters))) in
        new.iter().zip(&old).enumerate()
    {
        if new_name != old_name {
            return Err(Failure::Fatal(format!(
                "{ABORTED}: index `{i}` stage name in the updateRun has changed, new: {new_name}, existing: {old_name}"
            )));
        }
        if new_clusters.len() != old_clusters.len() {
            return Err(Failure::Fatal(format!(
                "{ABORTED}: the number of clusters in index `{i}` stage has changed, new: {}, existing: {}",
                new_clusters.len(),
                old_clusters.len()
            )));
        }
        for (j, (n, o)) in new_clusters.iter().zip(old_clusters).enumerate() {
            if n != o {
                return Err(Failure::Fatal(format!(
                    "{ABORTED}: the `{j}` cluster in the `{i}` stage has changed, new: {n}, existing: {o}"
                )));
            }
        }
    }
    Ok(())
}

/// recordUpdateRunFailed.
fn fail_run(st: &mut RunStatus, message: &str, now: u64) {
    status::set(
        &mut st.conditions,
        status::PROGRESSING,
        "False",
        reason::FAILED,
        "The stages are aborted due to a non-recoverable error",
        now,
    );
    status::set(
        &mut st.conditions,
        status::SUCCEEDED,
        "False",
        reason::FAILED,
        message,
        now,
    );
}

/// An aborted execution: the stage (or the delete stage) fails, then the run.
fn abort(st: &mut RunStatus, stage: Option<usize>, message: String, now: u64) {
    let s = match stage {
        Some(i) => st.stages_status.get_mut(i),
        None => st.deletion_stage_status.as_mut(),
    };
    if let Some(s) = s {
        s.end_time.get_or_insert(now);
        status::set(
            &mut s.conditions,
            status::PROGRESSING,
            "False",
            reason::STAGE_FAILED,
            "Stage update aborted due to a non-recoverable error",
            now,
        );
        status::set(
            &mut s.conditions,
            status::SUCCEEDED,
            "False",
            reason::STAGE_FAILED,
            &message,
            now,
        );
    }
    fail_run(st, &message, now);
}

fn run_progressing(st: &mut RunStatus, now: u64) {
    status::set(
        &mut st.conditions,
        status::PROGRESSING,
        "True",
        reason::PROGRESSING,
        "The update run is making progress",
        now,
    );
}

fn run_waiting(st: &mut RunStatus, phase: &str, stage: &str, now: u64) {
    status::set(
        &mut st.conditions,
        status::PROGRESSING,
        "False",
        reason::WAITING,
        format!("The updateRun is waiting for {phase} tasks in stage {stage} to complete"),
        now,
    );
}

fn stage_started(s: &mut StageStatus, now: u64) {
    s.start_time.get_or_insert(now);
    status::set(
        &mut s.conditions,
        status::PROGRESSING,
        "True",
        reason::STAGE_STARTED,
        "Clusters in the stage started updating",
        now,
    );
}

fn stage_waiting(s: &mut StageStatus, message: &str, now: u64) {
    status::set(
        &mut s.conditions,
        status::PROGRESSING,
        "False",
        reason::STAGE_WAITING,
        message,
        now,
    );
}

fn stage_succeeded(s: &mut StageStatus, now: u64) {
    s.end_time.get_or_insert(now);
    status::set(
        &mut s.conditions,
        status::PROGRESSING,
        "False",
        reason::STAGE_SUCCEEDED,
        "All clusters in the stage are updated and after-stage tasks are completed",
        now,
    );
    status::set(
        &mut s.conditions,
        status::SUCCEEDED,
        "True",
        reason::STAGE_SUCCEEDED,
        "Stage update completed successfully",
        now,
    );
}

fn cluster_started(c: &mut status::ClusterStatus, now: u64) {
    status::set(
        &mut c.conditions,
        status::STARTED,
        "True",
        reason::CLUSTER_STARTED,
        "Cluster update started",
        now,
    );
}

fn cluster_succeeded(c: &mut status::ClusterStatus, now: u64) {
    status::set(
        &mut c.conditions,
        status::SUCCEEDED,
        "True",
        reason::CLUSTER_SUCCEEDED,
        "Cluster update completed successfully",
        now,
    );
}

/// The Approval task of a stage: reached now (the request exists from here on), approved once
/// an accepted approval for it, on the run's initialisation commit, is at hand — and for good.
fn approval_task(
    task: &mut TaskStatus,
    request: Request,
    approvals: &BTreeMap<String, Approval>,
    out: &mut Moves,
    now: u64,
) -> bool {
    if status::is_true(&task.conditions, status::APPROVAL_REQUEST_APPROVED) {
        return true;
    }
    let created_now = !status::is_true(&task.conditions, status::APPROVAL_REQUEST_CREATED);
    if created_now {
        task.requested_at = Some(now);
        status::set(
            &mut task.conditions,
            status::APPROVAL_REQUEST_CREATED,
            "True",
            reason::TASK_CREATED,
            "ApprovalRequest object is created",
            now,
        );
    }
    match approvals
        .get(&request.key())
        .filter(|a| a.commit == request.commit)
    {
        Some(a) => {
            task.approval = Some(a.clone());
            status::set(
                &mut task.conditions,
                status::APPROVAL_REQUEST_APPROVED,
                "True",
                reason::TASK_APPROVED,
                "ApprovalRequest object is approved",
                now,
            );
            true
        }
        None => {
            if created_now {
                // Look again at once: the approvals edge, asked about the requests that
                // exist, can then answer for this one (a tag made before it counts).
                out.requeue(1);
            }
            out.waiting_on.push(request);
            false
        }
    }
}

fn request(st: &RunStatus, stage: &str, phase: TaskPhase) -> Request {
    Request {
        namespace: st.namespace.clone(),
        run: st.name.clone(),
        stage: stage.to_string(),
        phase,
        commit: st.init_commit.clone(),
    }
}

/// The binding of `cluster` in the placement's schedule, if it is to be updated.
fn binding_state(view: &View, cluster: &str) -> Option<BindingState> {
    view.schedule?
        .bindings
        .iter()
        .find(|b| b.cluster == cluster && b.state != BindingState::Unscheduled)
        .map(|b| b.state)
}

/// Applies the run's revision to `cluster` (again): `refresh` when it already runs it and only
/// its availability is read again.
fn push(
    st: &RunStatus,
    view: &View,
    (stage, cluster): (&str, &str),
    render: &mut Render,
    out: &mut Moves,
) -> Option<Revision> {
    let (manifests, revision) = render(st, cluster)?;
    let current = view.clusters.get(cluster);
    let refresh = current.is_some_and(|c| {
        c.revision.as_ref() == Some(&revision) && c.health == BindingHealth::Pending
    });
    let binds = binding_state(view, cluster) == Some(BindingState::Scheduled);
    out.work.push(
        Work::apply(
            view.key,
            cluster,
            (manifests, revision.clone()),
            view.apply_strategy,
            st.resource_snapshot_hash.as_str().into(),
            binds,
            refresh,
        )
        .by_run(std::sync::Arc::new(status::RunDelivery::of(st, stage))),
    );
    // A re-read is not a change: like the rolling step, only what changes is "applying".
    if !refresh {
        out.applying.push(cluster.to_string());
    }
    Some(revision)
}

/// How a started cluster stands: done, preempted by another run, or still updating.
enum Progress {
    Done,
    Preempted,
    Updating,
}

fn progress(view: &View, c: &status::ClusterStatus) -> Progress {
    let current = view.clusters.get(&c.cluster_name);
    let ours = c.revision.as_ref();
    let Some(cur) = current else {
        return Progress::Updating;
    };
    if cur.revision.as_ref() == ours && ours.is_some() {
        if cur.health.is_ready() {
            return Progress::Done;
        }
        return Progress::Updating;
    }
    // Running or attempting something this run neither gave it nor found there: another run
    // changed it. What it found there stays until the run's own push lands.
    let other =
        |r: Option<&Revision>| r.is_some_and(|r| Some(r) != ours && !c.replaced.contains(r));
    if other(cur.revision.as_ref()) || other(cur.details.attempted.as_ref()) {
        return Progress::Preempted;
    }
    Progress::Updating
}

fn execute(st: &mut RunStatus, ex: &Exec, render: &mut Render, out: &mut Moves) {
    let now = ex.now;
    // markUpdateRunProgressingIfNotWaitingOrStuck
    let waiting_or_stuck = status::find(&st.conditions, status::PROGRESSING).is_some_and(|c| {
        c.status == "False" && (c.reason == reason::WAITING || c.reason == reason::STUCK)
    });
    if !waiting_or_stuck {
        run_progressing(st, now);
    }
    let frozen = st
        .staged_update_strategy_snapshot
        .clone()
        .unwrap_or_default();
    loop {
        let i = st.current_stage();
        if i >= st.stages_status.len() {
            return delete_stage(st, ex, out);
        }
        let cfg = frozen.stages.get(i).cloned().unwrap_or_default();
        match execute_stage(st, i, &cfg, ex, render, out) {
            StageStep::Next => continue,
            StageStep::Wait => return,
        }
    }
}

enum StageStep {
    /// The stage succeeded: go on to the next at once.
    Next,
    /// Look again later (`out.requeue_after` says when).
    Wait,
}

fn execute_stage(
    st: &mut RunStatus,
    i: usize,
    cfg: &StageConfig,
    ex: &Exec,
    render: &mut Render,
    out: &mut Moves,
) -> StageStep {
    let now = ex.now;
    let stage_name = st.stages_status[i].stage_name.clone();
    if st.stages_status[i].clusters.is_empty() {
        let s = &mut st.stages_status[i];
        s.start_time.get_or_insert(now);
        s.end_time.get_or_insert(now);
        let msg = "Stage skipped because it has no clusters";
        status::set(
            &mut s.conditions,
            status::PROGRESSING,
            "False",
            reason::STAGE_SKIPPED,
            msg,
            now,
        );
        status::set(
            &mut s.conditions,
            status::SUCCEEDED,
            "True",
            reason::STAGE_SKIPPED,
            msg,
            now,
        );
        return StageStep::Next;
    }
    // Before-stage tasks: at most one, an Approval.
    let mut tasks = std::mem::take(&mut st.stages_status[i].before_stage_task_status);
    let mut approved = true;
    for task in tasks
        .iter_mut()
        .filter(|t| t.type_ == StageTaskType::Approval)
    {
        let req = request(st, &stage_name, TaskPhase::BeforeStage);
        approved = approval_task(task, req, ex.approvals, out, now);
    }
    st.stages_status[i].before_stage_task_status = tasks;
    if !approved {
        stage_waiting(
            &mut st.stages_status[i],
            "Not all before-stage tasks are completed, waiting for approval",
            now,
        );
        run_waiting(st, "before-stage", &stage_name, now);
        out.requeue(STAGE_POLL);
        return StageStep::Wait;
    }

    let total = st.stages_status[i].clusters.len();
    let max = cfg.max_concurrency_for(total);
    let mut finished = 0;
    let mut updating = 0;
    let mut stuck = Vec::new();
    let mut aborted: Option<String> = None;
    let view = ex.view;
    let mut clusters = std::mem::take(&mut st.stages_status[i].clusters);
    let mut j = 0;
    while j < clusters.len() && updating < max {
        let c = &mut clusters[j];
        j += 1;
        if status::is_true(&c.conditions, status::SUCCEEDED) {
            finished += 1;
            continue;
        }
        updating += 1;
        if status::is_false(&c.conditions, status::SUCCEEDED) {
            aborted.get_or_insert(format!(
                "{ABORTED}: the cluster `{}` in the stage {stage_name} has failed",
                c.cluster_name
            ));
            continue;
        }
        if binding_state(view, &c.cluster_name).is_none() {
            aborted.get_or_insert(format!(
                "{ABORTED}: the binding for cluster `{}` in stage `{stage_name}` is not found in the toBeUpdatedBindings map",
                c.cluster_name
            ));
            continue;
        }
        if !status::is_true(&c.conditions, status::STARTED) {
            // Already running exactly this, bound and ready: started and done at once.
            if let Some((_, revision)) = render(st, &c.cluster_name) {
                let current = view.clusters.get(&c.cluster_name);
                let bound = binding_state(view, &c.cluster_name) == Some(BindingState::Bound);
                if bound
                    && current.is_some_and(|cur| {
                        cur.revision.as_ref() == Some(&revision) && cur.health.is_ready()
                    })
                {
                    c.revision = Some(revision);
                    cluster_started(c, now);
                    cluster_succeeded(c, now);
                    finished += 1;
                    updating -= 1;
                    stage_started(&mut st.stages_status[i], now);
                    continue;
                }
            }
            // A cluster that cannot be rendered is not started (an error, retried).
            let Some(revision) = push(st, view, (&stage_name, &c.cluster_name), render, out) else {
                continue;
            };
            c.replaced = view
                .clusters
                .get(&c.cluster_name)
                .map(|cur| {
                    cur.revision
                        .iter()
                        .chain(&cur.details.attempted)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            c.revision = Some(revision);
            cluster_started(c, now);
            stage_started(&mut st.stages_status[i], now);
            continue;
        }
        match progress(view, c) {
            Progress::Done => {
                cluster_succeeded(c, now);
                finished += 1;
                updating -= 1;
            }
            Progress::Preempted => {
                let msg = format!(
                    "the binding of the updating cluster `{}` in the stage `{stage_name}` is not up-to-date with the desired status, please check the status of binding `{}` and see if there is a concurrent updateRun referencing the same placement and updating the same cluster",
                    c.cluster_name,
                    view.key
                );
                status::set(
                    &mut c.conditions,
                    status::SUCCEEDED,
                    "False",
                    reason::CLUSTER_FAILED,
                    &msg,
                    now,
                );
                aborted.get_or_insert(format!("{ABORTED}: {msg}"));
            }
            Progress::Updating => {
                // Failed pushes are retried; pending ones re-read (members are not watched).
                let name = c.cluster_name.clone();
                push(st, view, (&stage_name, &name), render, out);
                let since = status::find(&c.conditions, status::STARTED)
                    .map_or(now, |s| s.last_transition_time);
                if now.saturating_sub(since) > STUCK_AFTER {
                    stuck.push(name);
                }
            }
        }
    }
    st.stages_status[i].clusters = clusters;
    aggregate(st, &stage_name, &stuck, ex.state, now);
    if let Some(msg) = aborted {
        abort(st, Some(i), msg, now);
        return StageStep::Wait;
    }
    if finished < total {
        out.requeue(CLUSTER_POLL);
        return StageStep::Wait;
    }
    // handleStageCompletion: every cluster done; the after-stage tasks run together.
    run_waiting(st, "after-stage", &stage_name, now);
    stage_waiting(
        &mut st.stages_status[i],
        "All clusters in the stage are updated, waiting for after-stage tasks to complete",
        now,
    );
    let wait_start = status::find(&st.stages_status[i].conditions, status::PROGRESSING)
        .map_or(now, |c| c.last_transition_time);
    let mut passed = true;
    let mut wait: Option<u64> = None;
    let mut tasks = std::mem::take(&mut st.stages_status[i].after_stage_task_status);
    for (k, task) in tasks.iter_mut().enumerate() {
        match task.type_ {
            StageTaskType::TimedWait => {
                let end = wait_start + status::wait_secs(cfg.after_stage_tasks.get(k));
                if now < end {
                    passed = false;
                    wait = Some(end - now);
                } else {
                    status::set(
                        &mut task.conditions,
                        status::WAIT_TIME_ELAPSED,
                        "True",
                        reason::WAIT_ELAPSED,
                        "Wait time elapsed",
                        now,
                    );
                }
            }
            StageTaskType::Approval => {
                let req = request(st, &stage_name, TaskPhase::AfterStage);
                if !approval_task(task, req, ex.approvals, out, now) {
                    passed = false;
                }
            }
        }
    }
    st.stages_status[i].after_stage_task_status = tasks;
    if passed {
        run_progressing(st, now);
        stage_succeeded(&mut st.stages_status[i], now);
        return StageStep::Next;
    }
    out.requeue(wait.unwrap_or(STAGE_POLL));
    StageStep::Wait
}

/// aggregateUpdateRunStatus: stuck clusters make the run `Progressing=False UpdateRunStuck`;
/// otherwise a running run is progressing.
fn aggregate(st: &mut RunStatus, stage: &str, stuck: &[String], state: UpdateRunState, now: u64) {
    if !stuck.is_empty() {
        let shown = if stuck.len() <= 3 {
            stuck.join(", ")
        } else {
            format!("{}...", stuck[..3].join(", "))
        };
        status::set(
            &mut st.conditions,
            status::PROGRESSING,
            "False",
            reason::STUCK,
            format!("The updateRun is stuck waiting for {shown} cluster(s) in stage {stage} to finish updating, please check placement status for potential errors"),
            now,
        );
    } else if state == UpdateRunState::Run {
        run_progressing(st, now);
    }
}

/// The clusters whose bindings are unscheduled now.
fn unscheduled(view: &View) -> Vec<String> {
    view.schedule
        .map(|s| {
            s.bindings
                .iter()
                .filter(|b| b.state == BindingState::Unscheduled)
                .map(|b| b.cluster.to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn delete_stage(st: &mut RunStatus, ex: &Exec, out: &mut Moves) {
    let now = ex.now;
    let Some(mut del) = st.deletion_stage_status.take() else {
        return;
    };
    stage_started(&mut del, now);
    let deleting = unscheduled(ex.view);
    let mut problem = None;
    for cluster in &deleting {
        let Some(c) = del.clusters.iter_mut().find(|c| &c.cluster_name == cluster) else {
            problem.get_or_insert(format!(
                "{ABORTED}: the to be deleted cluster `{cluster}` is not in the deleting stage during execution"
            ));
            continue;
        };
        if status::is_true(&c.conditions, status::SUCCEEDED) {
            problem.get_or_insert(format!(
                "{ABORTED}: the deleted cluster `{cluster}` in the deleting stage still has a binding"
            ));
            continue;
        }
        // Started or not, the binding is (still) there: remove it (pushes are synchronous, so
        // one still there after being started failed and is retried).
        out.work
            .push(Work::remove(ex.view.key, cluster, ex.view.apply_strategy));
        out.removing.push(cluster.clone());
        cluster_started(c, now);
    }
    for c in del
        .clusters
        .iter_mut()
        .filter(|c| !deleting.contains(&c.cluster_name))
    {
        if !status::is_true(&c.conditions, status::STARTED) {
            cluster_started(c, now);
        }
        cluster_succeeded(c, now);
    }
    let done = deleting.is_empty();
    if done {
        stage_succeeded(&mut del, now);
    }
    st.deletion_stage_status = Some(del);
    if let Some(msg) = problem {
        return abort(st, None, msg, now);
    }
    if done {
        // recordUpdateRunSucceeded
        status::set(
            &mut st.conditions,
            status::PROGRESSING,
            "False",
            reason::SUCCEEDED,
            "All stages are completed",
            now,
        );
        status::set(
            &mut st.conditions,
            status::SUCCEEDED,
            "True",
            reason::SUCCEEDED,
            "All stages are completed successfully",
            now,
        );
    } else {
        out.requeue(CLUSTER_POLL);
    }
}

fn stop(st: &mut RunStatus, ex: &Exec, render: &mut Render, out: &mut Moves) {
    let now = ex.now;
    status::set(
        &mut st.conditions,
        status::PROGRESSING,
        "Unknown",
        reason::STOPPING,
        "The update run is the process of stopping, waiting for all the updating/deleting clusters to finish updating before completing the stop process",
        now,
    );
    let stopping = "Waiting for all the updating clusters to finish updating before completing the stop process";
    let stopped_msg = "All the updating clusters have finished updating, the stage is now stopped, waiting to be resumed";
    let i = st.current_stage();
    let finished = if i < st.stages_status.len() {
        let stage_name = st.stages_status[i].stage_name.clone();
        status::set(
            &mut st.stages_status[i].conditions,
            status::PROGRESSING,
            "Unknown",
            reason::STAGE_STOPPING,
            stopping,
            now,
        );
        let mut updating = 0;
        let mut stuck = Vec::new();
        let mut clusters = std::mem::take(&mut st.stages_status[i].clusters);
        for c in clusters.iter_mut() {
            if !status::is_true(&c.conditions, status::STARTED)
                || status::find(&c.conditions, status::SUCCEEDED).is_some()
            {
                continue;
            }
            updating += 1;
            match progress(ex.view, c) {
                Progress::Done => {
                    cluster_succeeded(c, now);
                    updating -= 1;
                }
                Progress::Preempted | Progress::Updating => {
                    let name = c.cluster_name.clone();
                    push(st, ex.view, (&stage_name, &name), render, out);
                    let since = status::find(&c.conditions, status::STARTED)
                        .map_or(now, |s| s.last_transition_time);
                    if now.saturating_sub(since) > STUCK_AFTER {
                        stuck.push(name);
                    }
                }
            }
        }
        st.stages_status[i].clusters = clusters;
        aggregate(st, &stage_name, &stuck, ex.state, now);
        if updating == 0 {
            status::set(
                &mut st.stages_status[i].conditions,
                status::PROGRESSING,
                "False",
                reason::STAGE_STOPPED,
                stopped_msg,
                now,
            );
        }
        updating == 0
    } else {
        // The delete stage: removals are synchronous, so nothing is in flight between steps.
        if let Some(del) = st.deletion_stage_status.as_mut() {
            status::set(
                &mut del.conditions,
                status::PROGRESSING,
                "False",
                reason::STAGE_STOPPED,
                stopped_msg,
                now,
            );
        }
        true
    };
    if finished {
        status::set(
            &mut st.conditions,
            status::PROGRESSING,
            "False",
            reason::STOPPED,
            "The update run has been stopped",
            now,
        );
    } else {
        out.requeue(CLUSTER_POLL);
    }
}
