//! Initialising a run, once, at the commit that brings it — KubeFleet's `initialize`
//! (pkg/controllers/updaterun/initialization.go): the placement must exist with strategy
//! External; the latest policy snapshot must be Scheduled, with the expected cluster count; the
//! bindings of that snapshot are the clusters to update, unscheduled ones go to the delete
//! stage; the strategy is frozen and cut into stages by label selector (a cluster in two stages
//! or in none is an error, empty stages are fine), sorted by `sortingLabelKey` as an integer,
//! then name; the resource snapshot is the given index or the latest (taken now if the content
//! changed). The same computation re-validates a running run ([`compute_stages`]).

use std::collections::BTreeSet;

use super::status::{self, reason, ClusterStatus, RunStatus, StageStatus, TaskStatus};
use super::View;
use crate::model::placement::{PlacementType, RolloutStrategyType};
use crate::model::staged::{
    StageTaskType, StagedUpdateRun, StagedUpdateStrategy, TaskPhase, UpdateStrategySpec,
    DELETE_STAGE_NAME,
};
use crate::schedule::BindingState;
use crate::snapshot::History;

/// KubeFleet's `errStagedUpdatedAborted` and `errValidationFailed` texts, which prefix every
/// terminal message (pkg/controllers/updaterun/controller.go).
pub const ABORTED: &str = "cannot continue the updateRun";
pub const VALIDATION_FAILED: &str =
    "cannot continue the updateRun: failed to validate the updateRun";

/// Why a run cannot be initialised (or continued).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Terminal: the run fails with this message.
    Fatal(String),
    /// A transient state (KubeFleet retries): try again at the next step.
    Retry(String),
}

fn fatal(msg: impl std::fmt::Display) -> Failure {
    Failure::Fatal(format!("{VALIDATION_FAILED}: {msg}"))
}

/// The clusters of the placement's latest policy snapshot: to update (in no particular order)
/// and to delete (sorted by name), and the expected count when the policy fixes one.
pub struct Clusters {
    pub policy_index: u64,
    pub expected: Option<usize>,
    pub to_update: BTreeSet<String>,
    pub to_delete: Vec<String>,
}

/// Steps 1–3: placement External, policy snapshot Scheduled, bindings (collectScheduledClusters).
pub fn collect(view: &View) -> Result<Clusters, Failure> {
    let Some(spec) = view.spec else {
        return Err(fatal("parent placement not found"));
    };
    let strategy = spec.strategy.type_.unwrap_or_default();
    if strategy != RolloutStrategyType::External {
        return Err(fatal(format!(
            "parent placement does not have an external rollout strategy, current strategy: {strategy:?}"
        )));
    }
    let Some(schedule) = view.schedule else {
        return Err(fatal("no latest policy snapshot found"));
    };
    let Some(policy_index) = schedule.policy_snapshot_index else {
        return Err(fatal("no latest policy snapshot found"));
    };
    let snapshot_name = format!("{}-{policy_index}", view.key.name);
    let expected = match spec.policy.as_ref() {
        Some(p) if p.placement_type == PlacementType::PickN => {
            Some(p.number_of_clusters.unwrap_or(0).max(0) as usize)
        }
        Some(p) if p.placement_type == PlacementType::PickFixed => Some(p.cluster_names.len()),
        _ => None,
    };
    let scheduled = schedule
        .conditions
        .iter()
        .any(|c| c.type_ == crate::schedule::kubefleet::SCHEDULED && c.status == "True");
    if !scheduled {
        return Err(fatal(format!(
            "policy snapshot `{snapshot_name}` not fully scheduled yet"
        )));
    }
    let mut to_update = BTreeSet::new();
    let mut to_delete = Vec::new();
    for b in &schedule.bindings {
        if b.state == BindingState::Unscheduled {
            to_delete.push(b.cluster.to_string());
        } else if b.policy_index == policy_index {
            to_update.insert(b.cluster.to_string());
        } else {
            return Err(Failure::Retry(format!(
                "binding of cluster `{}` with old policy snapshot `{}-{}` has state {:?}, we might observe a transient state, need retry",
                b.cluster, view.key.name, b.policy_index, b.state
            )));
        }
    }
    if to_update.is_empty() && to_delete.is_empty() {
        return Err(fatal(format!(
            "no scheduled or to-be-deleted bindings found for the latest policy snapshot {snapshot_name}"
        )));
    }
    if let Some(n) = expected {
        if n != to_update.len() {
            return Err(fatal(format!(
                "the number of selected bindings {} is not equal to the observed cluster count {n}",
                to_update.len()
            )));
        }
    }
    to_delete.sort();
    Ok(Clusters {
        policy_index,
        expected,
        to_update,
        to_delete,
    })
}

/// Go's `strconv.Atoi`, the parse KubeFleet applies to sorting label values.
fn go_atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {s:?}: invalid syntax"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {s:?}: value out of range"))
}

/// Step 4 (computeRunStageStatus): the stages of the frozen strategy with their clusters in
/// update order, and their tasks.
pub fn compute_stages(
    view: &View,
    run: &str,
    strategy_name: &str,
    spec: &UpdateStrategySpec,
    to_update: &BTreeSet<String>,
) -> Result<Vec<StageStatus>, Failure> {
    let mut placed: BTreeSet<&str> = BTreeSet::new();
    let mut stages = Vec::new();
    for stage in &spec.stages {
        if let Err(e) = validate_tasks(&stage.before_stage_tasks, TaskPhase::BeforeStage) {
            return Err(fatal(format!(
                "the before stage tasks are invalid, updateStrategy: `{strategy_name}`, stage: {}, err: {e}",
                stage.name
            )));
        }
        if let Err(e) = validate_tasks(&stage.after_stage_tasks, TaskPhase::AfterStage) {
            return Err(fatal(format!(
                "the after stage tasks are invalid, updateStrategy: `{strategy_name}`, stage: {}, err: {e}",
                stage.name
            )));
        }
        // Member clusters are listed by name, as the API server lists them.
        let mut members: Vec<(i64, &str)> = Vec::new();
        for c in view.fleet.clusters.iter().filter(|c| c.fleet_member) {
            if !to_update.contains(c.name.as_str()) || !stage.selects(&c.labels) {
                continue;
            }
            if placed.contains(c.name.as_str()) {
                return Err(fatal(format!(
                    "cluster `{}` appears in more than one stages",
                    c.name
                )));
            }
            let order = match &stage.sorting_label_key {
                Some(key) => {
                    let value = c.labels.get(key).map(String::as_str).unwrap_or("");
                    go_atoi(value).map_err(|e| {
                        fatal(format!(
                            "the sorting label `{key}:{value}` on cluster `{}` is not valid: {e}",
                            c.name
                        ))
                    })?
                }
                None => 0,
            };
            placed.insert(&c.name);
            members.push((order, &c.name));
        }
        members.sort();
        let task = |t: &crate::model::staged::StageTask, phase| TaskStatus {
            type_: t.type_,
            approval_request_name: (t.type_ == StageTaskType::Approval)
                .then(|| crate::model::staged::approval_request_name(run, &stage.name, phase)),
            approval: None,
            requested_at: None,
            conditions: vec![],
        };
        stages.push(StageStatus {
            stage_name: stage.name.clone(),
            clusters: members
                .into_iter()
                .map(|(_, name)| ClusterStatus {
                    cluster_name: name.to_string(),
                    revision: None,
                    replaced: vec![],
                    conditions: vec![],
                })
                .collect(),
            before_stage_task_status: stage
                .before_stage_tasks
                .iter()
                .map(|t| task(t, TaskPhase::BeforeStage))
                .collect(),
            after_stage_task_status: stage
                .after_stage_tasks
                .iter()
                .map(|t| task(t, TaskPhase::AfterStage))
                .collect(),
            start_time: None,
            end_time: None,
            conditions: vec![],
        });
    }
    if placed.len() != to_update.len() {
        let missing: Vec<&str> = to_update
            .iter()
            .map(String::as_str)
            .filter(|c| !placed.contains(c))
            .collect();
        return Err(fatal(format!(
            "some clusters are not placed in any stage, total {}, showing up to 10: {}",
            missing.len(),
            missing[..missing.len().min(10)].join(", ")
        )));
    }
    Ok(stages)
}

/// validateBeforeStageTask / validateAfterStageTask (the API's CEL rules say the same; a run
/// checks again because the strategy may come from a commit that was never validated by them).
fn validate_tasks(
    tasks: &[crate::model::staged::StageTask],
    phase: TaskPhase,
) -> Result<(), String> {
    match phase {
        TaskPhase::BeforeStage => {
            if tasks.len() > 1 {
                return Err("beforeStageTasks can have at most one task".into());
            }
            for (i, t) in tasks.iter().enumerate() {
                if t.type_ != StageTaskType::Approval {
                    return Err(format!(
                        "task {i} of type {:?} is not allowed in beforeStageTasks, allowed type: Approval",
                        t.type_
                    ));
                }
                if t.wait_time.is_some() {
                    return Err(format!(
                        "task {i} of type Approval cannot have wait duration set"
                    ));
                }
            }
        }
        TaskPhase::AfterStage => {
            if tasks.len() == 2 && tasks[0].type_ == tasks[1].type_ {
                return Err(format!(
                    "afterStageTasks cannot have two tasks of the same type: {:?}",
                    tasks[0].type_
                ));
            }
            for (i, t) in tasks.iter().enumerate() {
                if t.type_ == StageTaskType::TimedWait {
                    match t.wait_duration() {
                        None => {
                            return Err(format!(
                                "task {i} of type TimedWait has wait duration set to nil"
                            ))
                        }
                        Some(d) if d.is_zero() => {
                            return Err(format!(
                                "task {i} of type TimedWait has wait duration <= 0"
                            ))
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    Ok(())
}

/// Steps 1–4 of the initialisation: the clusters, the strategy the run names and the stages it
/// cuts them into — or the failure the run's initialisation reports. `gitfleet plan` shows a
/// run's stages from here, so that a pull request shows the order the daemon will use.
pub fn stages<'s>(
    view: &View,
    run: &StagedUpdateRun,
    strategy: Option<&'s StagedUpdateStrategy>,
) -> Result<(Clusters, &'s StagedUpdateStrategy, Vec<StageStatus>), Failure> {
    let clusters = collect(view)?;
    let strategy_name = &run.spec.staged_rollout_strategy_name;
    let Some(strategy) = strategy else {
        let namespace = run
            .metadata
            .namespace
            .as_deref()
            .filter(|_| run.is_namespaced());
        let key = status::run_key(namespace, strategy_name);
        return Err(fatal(format!(
            "referenced updateStrategy not found: `{key}`"
        )));
    };
    let stages = compute_stages(
        view,
        &run.metadata.name,
        strategy_name,
        &strategy.spec,
        &clusters.to_update,
    )?;
    Ok((clusters, strategy, stages))
}

/// A run the rollout state has no record of, that every one of its clusters' records names as
/// what it runs (the state was lost after the run finished: the members keep its trace): its
/// record rebuilt as finished — every stage and cluster done at the snapshot the records name —
/// so that it is neither run again nor waits for approvals again. `None` when a cluster's
/// record names another run or none (the run is then initialised as any new one).
pub fn rebuilt(
    view: &View,
    run: &StagedUpdateRun,
    strategy: Option<&StagedUpdateStrategy>,
    now: u64,
) -> Option<RunStatus> {
    let namespace = run
        .metadata
        .namespace
        .clone()
        .filter(|_| run.is_namespaced());
    let key = status::run_key(namespace.as_deref(), &run.metadata.name);
    let (clusters, strategy, mut stages) = stages(view, run, strategy).ok()?;
    let delivered: Vec<&status::RunDelivery> = stages
        .iter()
        .flat_map(|s| &s.clusters)
        .map(|c| {
            view.clusters
                .get(&c.cluster_name)?
                .delivered_by
                .as_deref()
                .filter(|d| d.run == key)
        })
        .collect::<Option<_>>()?;
    let first = *delivered.first()?;
    if delivered
        .iter()
        .any(|d| d.resource_snapshot_index != first.resource_snapshot_index)
    {
        return None;
    }
    let done = |conds: &mut Vec<status::Condition>, started: Option<(&str, &str)>, succeeded| {
        if let Some((type_, reason)) = started {
            status::set(conds, type_, "True", reason, "", now);
        }
        let (type_, reason) = succeeded;
        status::set(conds, type_, "True", reason, "", now);
    };
    for s in &mut stages {
        for c in &mut s.clusters {
            c.revision = view
                .clusters
                .get(&c.cluster_name)
                .and_then(|cs| cs.revision.clone());
            done(
                &mut c.conditions,
                Some((status::STARTED, reason::CLUSTER_STARTED)),
                (status::SUCCEEDED, reason::CLUSTER_SUCCEEDED),
            );
        }
        s.start_time = Some(now);
        s.end_time = Some(now);
        status::set(
            &mut s.conditions,
            status::PROGRESSING,
            "False",
            reason::STAGE_SUCCEEDED,
            "",
            now,
        );
        done(
            &mut s.conditions,
            None,
            (status::SUCCEEDED, reason::STAGE_SUCCEEDED),
        );
    }
    let spec = view.spec?;
    let mut conditions = Vec::new();
    status::set(
        &mut conditions,
        status::INITIALIZED,
        "True",
        reason::INITIALIZED,
        "The UpdateRun initialized successfully",
        now,
    );
    status::set(
        &mut conditions,
        status::PROGRESSING,
        "False",
        reason::SUCCEEDED,
        "All stages are completed",
        now,
    );
    status::set(
        &mut conditions,
        status::SUCCEEDED,
        "True",
        reason::SUCCEEDED,
        "All stages are completed successfully (rebuilt from the members' records, which \
         name this run on every one of its clusters)",
        now,
    );
    let mut deletion = StageStatus {
        stage_name: DELETE_STAGE_NAME.to_string(),
        clusters: vec![],
        before_stage_task_status: vec![],
        after_stage_task_status: vec![],
        start_time: Some(now),
        end_time: Some(now),
        conditions: vec![],
    };
    done(
        &mut deletion.conditions,
        None,
        (status::SUCCEEDED, reason::STAGE_SUCCEEDED),
    );
    Some(RunStatus {
        namespace,
        name: run.metadata.name.clone(),
        placement: view.key.clone(),
        strategy_name: run.spec.staged_rollout_strategy_name.clone(),
        init_commit: first.init_commit.clone(),
        created_at: now,
        state: run.state(),
        policy_snapshot_index_used: Some(clusters.policy_index),
        policy_observed_cluster_count: Some(clusters.expected.unwrap_or(clusters.to_update.len())),
        resource_snapshot_index_used: Some(first.resource_snapshot_index),
        resource_snapshot_hash: first.resource_snapshot.clone(),
        render_commit: first.render_commit.clone(),
        applied_strategy: applied_strategy(spec),
        staged_update_strategy_snapshot: Some(strategy.spec.clone()),
        stages_status: stages,
        deletion_stage_status: Some(deletion),
        conditions,
    })
}

/// What the members' records say a run delivered, when the state has no record of the run
/// but some of its clusters' records name it (the state was lost part-way through the run) and
/// agree on what it delivered: the run resumes with that snapshot and initialisation commit,
/// so that it neither moves to the head's content nor needs its approvals again (approving
/// tags point at the initialisation commit). Its stages run again from the first: clusters
/// that have the snapshot are confirmed, a gate is passed by the tag that passed it before, a
/// timed wait is waited again.
pub fn recorded<'v>(view: &'v View, run: &StagedUpdateRun) -> Option<&'v status::RunDelivery> {
    let namespace = run
        .metadata
        .namespace
        .as_deref()
        .filter(|_| run.is_namespaced());
    let key = status::run_key(namespace, &run.metadata.name);
    let mut named = view
        .clusters
        .values()
        .filter_map(|c| c.delivered_by.as_ref())
        .filter(|d| d.run == key);
    let first = named.next()?;
    named
        .all(|d| {
            d.resource_snapshot_index == first.resource_snapshot_index
                && d.resource_snapshot == first.resource_snapshot
                && d.init_commit == first.init_commit
                && d.render_commit == first.render_commit
        })
        .then_some(first)
}

/// Initialises `run` at `commit`: every field KubeFleet records, or why it cannot start. The
/// resource history gains a snapshot when the run takes the latest and the content changed.
/// A run `resumed` from the members' records ([`recorded`]) keeps the snapshot and the
/// initialisation commit they name.
pub fn initialize(
    view: &View,
    run: &StagedUpdateRun,
    strategy: Option<&StagedUpdateStrategy>,
    history: &mut History,
    commit: &str,
    resumed: Option<&status::RunDelivery>,
    now: u64,
) -> Result<RunStatus, Failure> {
    let namespace = run
        .metadata
        .namespace
        .clone()
        .filter(|_| run.is_namespaced());
    let name = &run.metadata.name;
    let strategy_name = &run.spec.staged_rollout_strategy_name;
    let (clusters, strategy, stages) = stages(view, run, strategy)?;
    // Step 5: the resource snapshot.
    let commit = resumed.map_or(commit, |d| d.init_commit.as_str());
    let (index, hash, render_commit) = match run.spec.resource_snapshot_index.as_deref() {
        _ if resumed.is_some() => {
            let d = resumed.expect("matched");
            (
                d.resource_snapshot_index,
                d.resource_snapshot.clone(),
                d.render_commit.clone(),
            )
        }
        Some(given) if !given.is_empty() => {
            let Some(i) = run.resource_snapshot_index() else {
                return Err(fatal(format!(
                    "invalid resource snapshot index `{given}` provided, expected an integer >= 0"
                )));
            };
            let Some(rec) = history.records.iter().find(|r| r.index == i) else {
                return Err(fatal(format!(
                    "no resourceSnapshots with index `{i}` found for placement `{}`",
                    view.key
                )));
            };
            (i, rec.hash.clone(), rec.commit.clone())
        }
        _ => {
            let Some(hash) = view.resource_hash else {
                return Err(fatal(format!(
                    "no master resourceSnapshot found for placement {}",
                    view.key
                )));
            };
            let in_use = view.indices_in_use.clone();
            let advance = history.advance(hash, commit, view.revision_history_limit, &in_use);
            *history = advance.history;
            (advance.index, hash.to_string(), commit.to_string())
        }
    };
    let spec = view.spec.expect("collect checked the placement");
    let mut conditions = Vec::new();
    status::set(
        &mut conditions,
        status::INITIALIZED,
        "True",
        reason::INITIALIZED,
        "The UpdateRun initialized successfully",
        now,
    );
    Ok(RunStatus {
        namespace,
        name: name.clone(),
        placement: view.key.clone(),
        strategy_name: strategy_name.clone(),
        init_commit: commit.to_string(),
        created_at: now,
        state: run.state(),
        policy_snapshot_index_used: Some(clusters.policy_index),
        policy_observed_cluster_count: Some(clusters.expected.unwrap_or(clusters.to_update.len())),
        resource_snapshot_index_used: Some(index),
        resource_snapshot_hash: hash,
        render_commit,
        applied_strategy: applied_strategy(spec),
        staged_update_strategy_snapshot: Some(strategy.spec.clone()),
        stages_status: stages,
        deletion_stage_status: Some(StageStatus {
            stage_name: DELETE_STAGE_NAME.to_string(),
            clusters: clusters
                .to_delete
                .iter()
                .map(|c| ClusterStatus {
                    cluster_name: c.clone(),
                    revision: None,
                    replaced: vec![],
                    conditions: vec![],
                })
                .collect(),
            before_stage_task_status: vec![],
            after_stage_task_status: vec![],
            start_time: None,
            end_time: None,
            conditions: vec![],
        }),
        conditions,
    })
}

/// The placement's `strategy.applyStrategy` as recorded (`status.appliedStrategy`).
pub fn applied_strategy(spec: &crate::model::placement::PlacementSpec) -> serde_json::Value {
    serde_json::to_value(&spec.strategy.apply_strategy).unwrap_or_default()
}

/// A run that could not be initialised: `Initialized=False`, terminal.
pub fn failed(
    view_key: &crate::model::PlacementKey,
    run: &StagedUpdateRun,
    commit: &str,
    message: &str,
    now: u64,
) -> RunStatus {
    let mut conditions = Vec::new();
    status::set(
        &mut conditions,
        status::INITIALIZED,
        "False",
        reason::INITIALIZE_FAILED,
        message,
        now,
    );
    RunStatus {
        namespace: run
            .metadata
            .namespace
            .clone()
            .filter(|_| run.is_namespaced()),
        name: run.metadata.name.clone(),
        placement: view_key.clone(),
        strategy_name: run.spec.staged_rollout_strategy_name.clone(),
        init_commit: commit.to_string(),
        created_at: now,
        state: run.state(),
        policy_snapshot_index_used: None,
        policy_observed_cluster_count: None,
        resource_snapshot_index_used: None,
        resource_snapshot_hash: String::new(),
        render_commit: String::new(),
        applied_strategy: serde_json::Value::Null,
        staged_update_strategy_snapshot: None,
        stages_status: vec![],
        deletion_stage_status: None,
        conditions,
    }
}

/// The cluster names of each stage, in order, for comparing a recomputation with the record.
pub fn stage_clusters(stages: &[StageStatus]) -> Vec<(String, Vec<String>)> {
    stages
        .iter()
        .map(|s| {
            (
                s.stage_name.clone(),
                s.clusters.iter().map(|c| c.cluster_name.clone()).collect(),
            )
        })
        .collect()
}
