//! KubeFleet staged rollouts and voluntary disruptions (placement.kubernetes-fleet.io):
//! `ClusterStagedUpdateStrategy`/`StagedUpdateStrategy` (one model), `ClusterStagedUpdateRun`/
//! `StagedUpdateRun` (one model), `ClusterApprovalRequest`/`ApprovalRequest` (one model) in v1,
//! v1beta1 and the older v1alpha1, and `ClusterResourcePlacementEviction` and
//! `ClusterResourcePlacementDisruptionBudget` (v1beta1 and v1alpha1). Each knows its defaults, the
//! API/CEL/webhook rules that concern it on its own, and the small arithmetic the rollout needs
//! (stage concurrency, wait times). Pure: it does not know which clusters exist nor when a stage
//! started; the rollout passes those in.

use super::member::{check_name, check_selector};
use super::object::ObjectMeta;
use super::placement::{IntOrPercent, Placement, PlacementType};
use super::selector::{LabelSelector, Labels};
use super::{ApiObject, Problem, Problems};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The KubeFleet placement API group.
pub const GROUP: &str = "placement.kubernetes-fleet.io";
/// Most stages a strategy may have.
pub const MAX_STAGES: usize = 31;
/// Most characters of a stage name.
pub const MAX_STAGE_NAME: usize = 63;
/// Name of the stage that removes resources from clusters no longer selected, after all stages.
pub const DELETE_STAGE_NAME: &str = "kubernetes-fleet.io/deleteStage";
/// Label on an approval request: the update run it belongs to.
pub const TARGET_UPDATE_RUN_LABEL: &str = "kubernetes-fleet.io/targetUpdateRun";
/// Label on an approval request: the stage it gates.
pub const TARGET_UPDATING_STAGE_LABEL: &str = "kubernetes-fleet.io/targetUpdatingStage";
/// Label on an approval request: `beforeStage` or `afterStage`.
pub const TASK_TYPE_LABEL: &str = "kubernetes-fleet.io/taskType";
/// Label on an approval request: `"true"` on the latest request of a run.
pub const IS_LATEST_APPROVAL_LABEL: &str = "kubernetes-fleet.io/isLatestUpdateRunApproval";
/// Most characters of `placementName` and `clusterName` references.
pub const MAX_REFERENCE: usize = 255;

const STAGE_NAME_PATTERN: &str = "^[a-z0-9]+$";
const MAX_CONCURRENCY_PATTERN: &str = "^(100|[1-9][0-9]?)%$";
const WAIT_TIME_PATTERN: &str = r"^(?:(?:0|[1-9][0-9]*)(\.[0-9]+)?(?:s|m|h))+$";
/// The status fields of an update run's CRD; the last is not in v1alpha1.
const BUDGET_MESSAGE: &str = "If supplied value is String should match regex '^(100|[0-9]{1,2})%$' or If supplied value is Integer must be greater than or equal to 0";

fn version_of(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or_default()
}

fn is_v1alpha1(api_version: &str) -> bool {
    version_of(api_version) == "v1alpha1"
}

/// `Required value` for an empty required string, `must be no more than …` for a long one.
fn check_reference(field: &str, value: &str, max: Option<usize>, p: &mut Problems) {
    if value.is_empty() {
        p.push(field, "Required value");
    } else if let Some(max) = max {
        if value.len() > max {
            p.push(
                field,
                format!("must be no more than {max} characters, got {}", value.len()),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Update strategy
// ---------------------------------------------------------------------------------------------

/// A `ClusterStagedUpdateStrategy` (cluster-scoped) or `StagedUpdateStrategy` (namespaced): the
/// ordered stages an update run walks through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StagedUpdateStrategy {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: UpdateStrategySpec,
    // The CRD declares no status: strict decoding refuses one.
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateStrategySpec {
    /// At most [`MAX_STAGES`]; may be empty.
    pub stages: Vec<StageConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageConfig {
    /// `^[a-z0-9]+$`, at most 63 characters, unique in the strategy.
    pub name: String,
    /// Absent selects no cluster; `{}` selects every cluster (see [`StageConfig::selects`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Clusters of the stage are updated in ascending integer order of this label's value, then by
    /// name; every cluster of the stage must carry an integer value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sorting_label_key: Option<String>,
    /// Default 1; see [`StageConfig::max_concurrency_for`]. Not in v1alpha1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<IntOrPercent>,
    /// At most 2, at most one of each type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_stage_tasks: Vec<StageTask>,
    /// At most 1, `Approval` only. Not in v1alpha1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before_stage_tasks: Vec<StageTask>,
}

/// A gate before a stage starts or before the run moves past it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageTask {
    #[serde(rename = "type")]
    pub type_: StageTaskType,
    /// A Go duration in h, m and s only (`1h30m`, `90s`, `1.5h`); required for `TimedWait`,
    /// forbidden for `Approval`. See [`parse_wait_time`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_time: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StageTaskType {
    TimedWait,
    Approval,
}

/// Whether a task runs before a stage or after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskPhase {
    BeforeStage,
    AfterStage,
}

impl TaskPhase {
    /// The value of [`TASK_TYPE_LABEL`].
    pub fn label_value(self) -> &'static str {
        match self {
            TaskPhase::BeforeStage => "beforeStage",
            TaskPhase::AfterStage => "afterStage",
        }
    }
}

/// The name of the approval request of `run` for `stage`: `<run>-before-<stage>` or
/// `<run>-after-<stage>`.
pub fn approval_request_name(run: &str, stage: &str, phase: TaskPhase) -> String {
    match phase {
        TaskPhase::BeforeStage => format!("{run}-before-{stage}"),
        TaskPhase::AfterStage => format!("{run}-after-{stage}"),
    }
}

/// Parses a stage task's `waitTime`: a Go duration restricted by the CRD pattern
/// `^(?:(?:0|[1-9][0-9]*)(\.[0-9]+)?(?:s|m|h))+$` (units h, m, s; fractions allowed; `1h30m`).
/// Fractions below a nanosecond are truncated, as Go does; more than about 292 years is an error,
/// as in Go. The error is the message to show.
pub fn parse_wait_time(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} must match '{WAIT_TIME_PATTERN}' (units h, m and s only)");
    if s.is_empty() {
        return Err(bad());
    }
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut total: u128 = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let whole = &s[start..i];
        // `0` or no leading zero.
        if whole.is_empty() || (whole.len() > 1 && whole.starts_with('0')) {
            return Err(bad());
        }
        let mut frac = "";
        if i < bytes.len() && bytes[i] == b'.' {
            let fstart = i + 1;
            i = fstart;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            frac = &s[fstart..i];
            if frac.is_empty() {
                return Err(bad());
            }
        }
        let unit: u128 = match bytes.get(i) {
            Some(b's') => 1_000_000_000,
            Some(b'm') => 60 * 1_000_000_000,
            Some(b'h') => 3600 * 1_000_000_000,
            _ => return Err(bad()),
        };
        i += 1;
        let too_long = || format!("{s:?} is too long a duration");
        let whole: u128 = whole.parse().map_err(|_| too_long())?;
        // 20 fraction digits are far below a nanosecond for every unit.
        let frac = &frac[..frac.len().min(20)];
        let frac_ns = if frac.is_empty() {
            0
        } else {
            frac.parse::<u128>().map_err(|_| too_long())? * unit / 10u128.pow(frac.len() as u32)
        };
        total = whole
            .checked_mul(unit)
            .and_then(|w| w.checked_add(frac_ns))
            .and_then(|t| t.checked_add(total))
            .ok_or_else(too_long)?;
        if total > i64::MAX as u128 {
            return Err(too_long());
        }
    }
    Ok(Duration::from_nanos(total as u64))
}

impl StageTask {
    /// The parsed `waitTime`, if present and well-formed.
    pub fn wait_duration(&self) -> Option<Duration> {
        self.wait_time
            .as_deref()
            .and_then(|w| parse_wait_time(w).ok())
    }
}

impl StageConfig {
    /// Does the stage take a cluster with these labels? An absent selector takes none, `{}` all.
    pub fn selects(&self, labels: &Labels) -> bool {
        self.label_selector
            .as_ref()
            .is_some_and(|s| s.matches(labels))
    }

    /// How many clusters of a stage of `stage_size` clusters may update at once: the integer as
    /// given, or the percentage of the stage size rounded down; never less than 1. Default 1.
    pub fn max_concurrency_for(&self, stage_size: usize) -> usize {
        let n = match &self.max_concurrency {
            None => 1,
            Some(IntOrPercent::Int(i)) => usize::try_from(*i).unwrap_or(0),
            Some(IntOrPercent::String(s)) => match s.strip_suffix('%') {
                Some(pct) => pct.parse::<usize>().unwrap_or(0) * stage_size / 100,
                None => s.parse().unwrap_or(0),
            },
        };
        n.max(1)
    }
}

impl StagedUpdateStrategy {
    pub fn is_namespaced(&self) -> bool {
        self.kind == "StagedUpdateStrategy"
    }

    /// The stage named `name`.
    pub fn stage(&self, name: &str) -> Option<&StageConfig> {
        self.spec.stages.iter().find(|s| s.name == name)
    }
}

impl ApiObject for StagedUpdateStrategy {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, None, &mut p);
        let alpha = is_v1alpha1(&self.api_version);
        let stages = &self.spec.stages;
        if stages.len() > MAX_STAGES {
            p.push(
                "spec.stages",
                format!("must have at most {MAX_STAGES} items, got {}", stages.len()),
            );
        }
        for (i, stage) in stages.iter().enumerate() {
            let f = format!("spec.stages[{i}]");
            validate_stage(stage, &f, alpha, &mut p);
            // gitfleet's own rule: KubeFleet's API says stage names MUST be unique, but neither
            // its CRD nor its webhook checks it; its run controller names a stage's approval
            // requests after the run and the stage, so two stages of one name share them.
            if !stage.name.is_empty() && stages[..i].iter().any(|o| o.name == stage.name) {
                p.push(
                    format!("{f}.name"),
                    format!(
                        "Duplicate value: {:?}: stage names must be unique (gitfleet's own check of a rule KubeFleet states but does not enforce: two stages of one name would share their approval requests)",
                        stage.name
                    ),
                );
            }
        }
        p.0
    }
}

fn validate_stage(stage: &StageConfig, f: &str, alpha: bool, p: &mut Problems) {
    let name = &stage.name;
    if name.is_empty() {
        p.push(format!("{f}.name"), "Required value");
    } else if name.len() > MAX_STAGE_NAME {
        p.push(
            format!("{f}.name"),
            format!(
                "must be no more than {MAX_STAGE_NAME} characters, got {}",
                name.len()
            ),
        );
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        p.push(
            format!("{f}.name"),
            format!("{name:?} must match '{STAGE_NAME_PATTERN}'"),
        );
    }
    if let Some(ls) = &stage.label_selector {
        check_selector(&format!("{f}.labelSelector"), ls, p);
    }
    if let Some(mc) = &stage.max_concurrency {
        let field = format!("{f}.maxConcurrency");
        if alpha {
            p.push(field, "unknown field \"maxConcurrency\" (not in v1alpha1)");
        } else {
            match mc {
                IntOrPercent::Int(n) if *n < 1 => {
                    p.push(field, "maxConcurrency must be at least 1")
                }
                IntOrPercent::Int(_) => {}
                IntOrPercent::String(s) => {
                    let ok = s.strip_suffix('%').is_some_and(|d| {
                        d == "100"
                            || (matches!(d.len(), 1 | 2)
                                && d.bytes().all(|b| b.is_ascii_digit())
                                && !d.starts_with('0'))
                    });
                    if !ok {
                        p.push(
                            field,
                            format!("{s:?} must match '{MAX_CONCURRENCY_PATTERN}'"),
                        );
                    }
                }
            }
        }
    }
    validate_before_tasks(&stage.before_stage_tasks, f, alpha, p);
    validate_after_tasks(&stage.after_stage_tasks, f, p);
}

fn validate_before_tasks(tasks: &[StageTask], f: &str, alpha: bool, p: &mut Problems) {
    let lf = format!("{f}.beforeStageTasks");
    if alpha && !tasks.is_empty() {
        p.push(lf, "unknown field \"beforeStageTasks\" (not in v1alpha1)");
        return;
    }
    if tasks.len() > 1 {
        p.push(
            lf.clone(),
            format!("must have at most 1 items, got {}", tasks.len()),
        );
    }
    for (j, t) in tasks.iter().enumerate() {
        let tf = format!("{lf}[{j}]");
        match t.type_ {
            StageTaskType::TimedWait => p.push(
                format!("{tf}.type"),
                "BeforeStageTaskType cannot be TimedWait",
            ),
            StageTaskType::Approval if t.wait_time.is_some() => p.push(
                format!("{tf}.waitTime"),
                "AfterStageTaskType is Approval, waitTime is not allowed",
            ),
            StageTaskType::Approval => {}
        }
    }
}

fn validate_after_tasks(tasks: &[StageTask], f: &str, p: &mut Problems) {
    let lf = format!("{f}.afterStageTasks");
    if tasks.len() > 2 {
        p.push(
            lf.clone(),
            format!("must have at most 2 items, got {}", tasks.len()),
        );
    }
    for (j, t) in tasks.iter().enumerate() {
        let tf = format!("{lf}[{j}]");
        if tasks[..j].iter().any(|o| o.type_ == t.type_) {
            p.push(
                format!("{tf}.type"),
                format!(
                    "afterStageTasks cannot have two tasks of the same type: {:?}",
                    t.type_
                ),
            );
        }
        match (t.type_, &t.wait_time) {
            (StageTaskType::Approval, Some(_)) => p.push(
                format!("{tf}.waitTime"),
                "AfterStageTaskType is Approval, waitTime is not allowed",
            ),
            (StageTaskType::Approval, None) => {}
            (StageTaskType::TimedWait, None) => p.push(
                format!("{tf}.waitTime"),
                "AfterStageTaskType is TimedWait, waitTime is required",
            ),
            (StageTaskType::TimedWait, Some(w)) => match parse_wait_time(w) {
                Err(msg) => p.push(format!("{tf}.waitTime"), msg),
                Ok(d) if d.is_zero() => p.push(
                    format!("{tf}.waitTime"),
                    format!("task {j} of type TimedWait has wait duration <= 0"),
                ),
                Ok(_) => {}
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Update run
// ---------------------------------------------------------------------------------------------

/// A `ClusterStagedUpdateRun` (cluster-scoped, for a CRP) or `StagedUpdateRun` (namespaced, for an
/// RP): one release of one resource snapshot through the stages of a strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StagedUpdateRun {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: UpdateRunSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateRunSpec {
    /// The placement (CRP, or RP in the run's namespace); immutable.
    pub placement_name: String,
    /// A resource snapshot index (`"0"`, `"12"`); absent or empty means the latest. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_snapshot_index: Option<String>,
    /// The strategy (cluster-scoped for a cluster run, same namespace otherwise); immutable.
    pub staged_rollout_strategy_name: String,
    /// Default `Initialize`. Not in v1alpha1 (where a run always runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<UpdateRunState>,
}

/// What the user wants the run to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UpdateRunState {
    /// Compute the stages but update nothing.
    #[default]
    Initialize,
    /// Update (or resume).
    Run,
    /// Let clusters in flight finish, start no new ones.
    Stop,
}

impl UpdateRunState {
    /// The CEL transition rules: Initialize→Stop, Run→Initialize and Stop→Initialize are forbidden.
    pub fn transition_problem(from: UpdateRunState, to: UpdateRunState) -> Option<String> {
        use UpdateRunState::*;
        match (from, to) {
            (Initialize, Stop) | (Run, Initialize) | (Stop, Initialize) => Some(format!(
                "invalid state transition: cannot transition from {from:?} to {to:?}"
            )),
            _ => None,
        }
    }
}

impl StagedUpdateRun {
    pub fn is_namespaced(&self) -> bool {
        self.kind == "StagedUpdateRun"
    }

    /// `spec.state`, defaulted to `Initialize`; a v1alpha1 run (which has no state) runs.
    pub fn state(&self) -> UpdateRunState {
        match self.spec.state {
            Some(s) => s,
            None if is_v1alpha1(&self.api_version) => UpdateRunState::Run,
            None => UpdateRunState::Initialize,
        }
    }

    /// The pinned resource snapshot index; `None` means the latest (or an invalid value, which
    /// validation reports).
    pub fn resource_snapshot_index(&self) -> Option<u64> {
        self.spec
            .resource_snapshot_index
            .as_deref()
            .filter(|s| !s.is_empty())
            .and_then(parse_go_atoi_non_negative)
    }

    /// The approval request this run creates for a stage's `Approval` task.
    pub fn approval_request_name(&self, stage: &str, phase: TaskPhase) -> String {
        approval_request_name(&self.metadata.name, stage, phase)
    }

    /// Rules between this run and the same run in the previous commit: immutable fields and the
    /// forbidden state transitions.
    pub fn update_problems(&self, old: &StagedUpdateRun) -> Vec<Problem> {
        let mut p = Problems::default();
        if self.spec.placement_name != old.spec.placement_name {
            p.push("spec.placementName", "placementName is immutable");
        }
        if self
            .spec
            .resource_snapshot_index
            .as_deref()
            .unwrap_or_default()
            != old
                .spec
                .resource_snapshot_index
                .as_deref()
                .unwrap_or_default()
        {
            p.push(
                "spec.resourceSnapshotIndex",
                "resourceSnapshotIndex is immutable",
            );
        }
        if self.spec.staged_rollout_strategy_name != old.spec.staged_rollout_strategy_name {
            p.push(
                "spec.stagedRolloutStrategyName",
                "stagedRolloutStrategyName is immutable",
            );
        }
        // The CEL rules test `has(oldSelf.state)`, which always holds on a server because the
        // state is defaulted on create; so an old run without a state counts as `Initialize`.
        if let Some(msg) = UpdateRunState::transition_problem(old.state(), self.state()) {
            p.push("spec.state", msg);
        }
        p.0
    }
}

/// Go's `strconv.Atoi` (optional sign, decimal digits) for a value that must be ≥ 0.
fn parse_go_atoi_non_negative(s: &str) -> Option<u64> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = digits.parse().ok()?;
    match (neg, n) {
        (true, 0) | (false, _) => Some(n as u64),
        (true, _) => None,
    }
}

impl ApiObject for StagedUpdateRun {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, Some(63), &mut p);
        let spec = &self.spec;
        check_reference(
            "spec.placementName",
            &spec.placement_name,
            Some(MAX_REFERENCE),
            &mut p,
        );
        // Required in v1alpha1 only (later versions take the latest snapshot when it is absent).
        if spec.resource_snapshot_index.is_none() && is_v1alpha1(&self.api_version) {
            p.push("spec.resourceSnapshotIndex", "Required value");
        }
        if let Some(idx) = spec.resource_snapshot_index.as_deref() {
            if !idx.is_empty() && parse_go_atoi_non_negative(idx).is_none() {
                p.push(
                    "spec.resourceSnapshotIndex",
                    format!(
                        "invalid resource snapshot index `{idx}` provided, expected an integer >= 0"
                    ),
                );
            }
        }
        check_reference(
            "spec.stagedRolloutStrategyName",
            &spec.staged_rollout_strategy_name,
            None,
            &mut p,
        );
        if spec.state.is_some() && is_v1alpha1(&self.api_version) {
            p.push("spec.state", "unknown field \"state\" (not in v1alpha1)");
        }
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

// ---------------------------------------------------------------------------------------------
// Approval request
// ---------------------------------------------------------------------------------------------

/// A `ClusterApprovalRequest` or `ApprovalRequest`: the gate of one stage task of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalRequest {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ApprovalRequestSpec,
    /// Ignored: gitfleet counts approvals only from signed tags.
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalRequestSpec {
    /// The update run (Go field `TargetUpdateRun`).
    pub parent_stage_rollout: String,
    pub target_stage: String,
}

impl ApprovalRequest {
    pub fn is_namespaced(&self) -> bool {
        self.kind == "ApprovalRequest"
    }

    /// The spec is immutable.
    pub fn update_problems(&self, old: &ApprovalRequest) -> Vec<Problem> {
        if self.spec == old.spec {
            vec![]
        } else {
            vec![Problem::new("spec", "The spec field is immutable")]
        }
    }
}

impl ApiObject for ApprovalRequest {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, None, &mut p);
        check_reference(
            "spec.parentStageRollout",
            &self.spec.parent_stage_rollout,
            None,
            &mut p,
        );
        check_reference("spec.targetStage", &self.spec.target_stage, None, &mut p);
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

// ---------------------------------------------------------------------------------------------
// Eviction and disruption budget
// ---------------------------------------------------------------------------------------------

/// A `ClusterResourcePlacementEviction`: remove one CRP's resources from one cluster, once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterResourcePlacementEviction {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: PlacementEvictionSpec,
    #[serde(default, skip_serializing)]
    pub status: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementEvictionSpec {
    /// Immutable, at most 255 characters.
    pub placement_name: String,
    /// Immutable, at most 255 characters.
    pub cluster_name: String,
}

impl ClusterResourcePlacementEviction {
    /// The ClusterResourcePlacement it evicts from (`crp/NAME`).
    pub fn placement_key(&self) -> super::PlacementKey {
        super::PlacementKey::new(
            super::PlacementKind::ClusterResourcePlacement,
            None,
            &self.spec.placement_name,
        )
    }

    /// The webhook's rule against the placement it names (when that placement exists): a
    /// PickFixed placement cannot be evicted from.
    pub fn problems_with_placement(&self, placement: &Placement) -> Vec<Problem> {
        match placement.spec.policy.as_ref().map(|p| p.placement_type) {
            Some(PlacementType::PickFixed) => vec![Problem::new(
                "spec.placementName",
                "cluster resource placement policy type PickFixed is not supported",
            )],
            _ => vec![],
        }
    }

    /// Both fields are immutable.
    pub fn update_problems(&self, old: &ClusterResourcePlacementEviction) -> Vec<Problem> {
        let mut p = Problems::default();
        if self.spec.placement_name != old.spec.placement_name {
            p.push("spec.placementName", "The PlacementName field is immutable");
        }
        if self.spec.cluster_name != old.spec.cluster_name {
            p.push("spec.clusterName", "The ClusterName field is immutable");
        }
        p.0
    }
}

impl ApiObject for ClusterResourcePlacementEviction {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, None, &mut p);
        check_reference(
            "spec.placementName",
            &self.spec.placement_name,
            Some(MAX_REFERENCE),
            &mut p,
        );
        check_reference(
            "spec.clusterName",
            &self.spec.cluster_name,
            Some(MAX_REFERENCE),
            &mut p,
        );
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

/// A `ClusterResourcePlacementDisruptionBudget`: how many clusters of the CRP with the same name
/// may be down through evictions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterResourcePlacementDisruptionBudget {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: PlacementDisruptionBudgetSpec,
    // The CRD declares no status: strict decoding refuses one.
}

/// At most one of the two; with neither, no eviction is ever allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementDisruptionBudgetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrPercent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrPercent>,
}

/// Integers ≥ 0, strings `^(100|[0-9]{1,2})%$`.
fn is_budget_value(v: &IntOrPercent) -> bool {
    match v {
        IntOrPercent::Int(i) => *i >= 0,
        IntOrPercent::String(s) => s.strip_suffix('%').is_some_and(|d| {
            d == "100" || (matches!(d.len(), 1 | 2) && d.bytes().all(|b| b.is_ascii_digit()))
        }),
    }
}

impl ClusterResourcePlacementDisruptionBudget {
    /// The webhook's rules against the CRP of the same name (when it exists): for PickAll (or no
    /// policy) only an integer `minAvailable` is allowed.
    pub fn problems_with_placement(&self, placement: &Placement) -> Vec<Problem> {
        let mut p = Problems::default();
        let pick_all = placement
            .spec
            .policy
            .as_ref()
            .is_none_or(|pol| pol.placement_type == PlacementType::PickAll);
        if pick_all {
            if self.spec.max_unavailable.is_some() {
                p.push(
                    "spec.maxUnavailable",
                    "cluster resource placement policy type PickAll is not supported with any specified max unavailable",
                );
            }
            if let Some(IntOrPercent::String(_)) = self.spec.min_available {
                p.push(
                    "spec.minAvailable",
                    "cluster resource placement policy type PickAll is not supported with min available as a percentage",
                );
            }
        }
        p.0
    }
}

impl ApiObject for ClusterResourcePlacementDisruptionBudget {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_name(&self.metadata, None, &mut p);
        let spec = &self.spec;
        if spec.max_unavailable.is_some() && spec.min_available.is_some() {
            p.push(
                "spec",
                "Both MaxUnavailable and MinAvailable cannot be specified",
            );
        }
        for (field, v) in [
            ("spec.maxUnavailable", &spec.max_unavailable),
            ("spec.minAvailable", &spec.min_available),
        ] {
            if let Some(v) = v {
                if !is_budget_value(v) {
                    p.push(field, BUDGET_MESSAGE);
                }
            }
        }
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::decode;
    use crate::model::testing::*;

    // kubefleet-examples/stagedupdaterun/updateStrategy.yaml
    const STRATEGY_EXAMPLE: &str = r#"
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata:
  name: example-strategy
spec:
  stages:
    - name: staging
      labelSelector:
        matchLabels:
          environment: staging
      afterStageTasks:
        - type: TimedWait
          waitTime: 1h
    - name: canary
      labelSelector:
        matchLabels:
          environment: canary
      sortingLabelKey: name
      afterStageTasks:
        - type: Approval
    - name: production
      labelSelector:
        matchLabels:
          environment: production
      sortingLabelKey: order
      afterStageTasks:
        - type: Approval
        - type: TimedWait
          waitTime: 1h
"#;

    // kubefleet-examples/stagedupdaterun/clusterStagedUpdateRun.yaml
    const RUN_EXAMPLE: &str = r#"
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateRun
metadata:
  name: example-run
spec:
  placementName: example-placement
  resourceSnapshotIndex: "0"
  stagedRolloutStrategyName: example-strategy
status:
  policySnapshotIndexUsed: "0"
  policyObservedClusterCount: 3
  appliedStrategy:
    type: Immediate
  stagedUpdateStrategySnapshot:
    stages:
      - name: stage1
        labelSelector:
          matchLabels:
            environment: production
        sortingLabelKey: priority
        afterStageTasks:
          - type: TimedWait
            waitTime: 1h
  stagesStatus:
    - stageName: stage1
      clusters:
        - clusterName: cluster1
          conditions:
            - type: Started
              status: "True"
      startTime: "2023-10-01T00:00:00Z"
      endTime: "2023-10-01T01:00:00Z"
      conditions:
        - type: Progressing
          status: "True"
  conditions:
    - type: Initialized
      status: "True"
    - type: Progressing
      status: "True"
    - type: Succeeded
      status: "False"
"#;

    // kubefleet-examples/stagedupdaterun/approvalRequest.yaml
    const APPROVAL_EXAMPLE: &str = r#"
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterApprovalRequest
metadata:
  name: example-run-canary
  labels:
    kubernetes-fleet.io/targetupdaterun: example-run
    kubernetes-fleet.io/targetUpdatingStage: canary
    kubernetes-fleet.io/isLatestUpdateRunApproval: "true"
spec:
  parentStageRollout: example-run
  targetStage: canary
status:
  conditions:
  - type: Approved
    status: "True"
"#;

    // kubefleet-examples/eviction/eviction.yaml and test-crp-eviction.yaml
    const EVICTION_EXAMPLES: [&str; 2] = [
        "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementEviction\nmetadata:\n  name: test-eviction\nspec:\n  placementName: test-crp\n  clusterName: kind-cluster-1\n",
        "apiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ClusterResourcePlacementEviction\nmetadata:\n  name: test-crp-eviction\nspec:\n  placementName: test-crp\n  clusterName: cluster-1\n",
    ];

    // kubefleet-examples/eviction/clusterpdb.yaml and test-crp-disruptionbudget.yaml
    const BUDGET_EXAMPLES: [&str; 2] = [
        "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementDisruptionBudget\nmetadata:\n  name: test-crp\nspec:\n  minAvailable: 1\n",
        "apiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ClusterResourcePlacementDisruptionBudget\nmetadata:\n  name: test-crp-disruption-budget\nspec:\n  maxUnavailable: 1\n",
    ];

    #[test]
    fn compat_examples_decode_and_validate() {
        assert_eq!(problems::<StagedUpdateStrategy>(STRATEGY_EXAMPLE), vec![]);
        assert_eq!(problems::<StagedUpdateRun>(RUN_EXAMPLE), vec![]);
        assert_eq!(problems::<ApprovalRequest>(APPROVAL_EXAMPLE), vec![]);
        for e in EVICTION_EXAMPLES {
            assert_eq!(problems::<ClusterResourcePlacementEviction>(e), vec![]);
        }
        for b in BUDGET_EXAMPLES {
            assert_eq!(
                problems::<ClusterResourcePlacementDisruptionBudget>(b),
                vec![]
            );
        }
        let s: StagedUpdateStrategy = typed(STRATEGY_EXAMPLE);
        assert_eq!(s.spec.stages.len(), 3);
        assert_eq!(
            s.stage("production").unwrap().after_stage_tasks[1].wait_duration(),
            Some(Duration::from_secs(3600))
        );
        let run: StagedUpdateRun = typed(RUN_EXAMPLE);
        assert_eq!(run.state(), UpdateRunState::Initialize);
        assert_eq!(run.resource_snapshot_index(), Some(0));
        assert_eq!(
            run.approval_request_name("canary", TaskPhase::AfterStage),
            "example-run-after-canary"
        );
        let a: ApprovalRequest = typed(APPROVAL_EXAMPLE);
        assert_eq!(a.spec.parent_stage_rollout, "example-run");
        assert!(!a.is_namespaced());
    }

    #[test]
    fn namespaced_kinds_and_v1_share_the_models() {
        let doc = STRATEGY_EXAMPLE
            .replace(
                "kind: ClusterStagedUpdateStrategy",
                "kind: StagedUpdateStrategy",
            )
            .replace("/v1beta1", "/v1")
            .replace(
                "  name: example-strategy\n",
                "  name: example-strategy\n  namespace: apps\n",
            );
        assert_eq!(problems::<StagedUpdateStrategy>(&doc), vec![]);
        assert!(typed::<StagedUpdateStrategy>(&doc).is_namespaced());
        let run = "apiVersion: placement.kubernetes-fleet.io/v1\nkind: StagedUpdateRun\nmetadata: {name: r, namespace: apps}\nspec: {placementName: rp, stagedRolloutStrategyName: s, state: Run}\n";
        assert_eq!(problems::<StagedUpdateRun>(run), vec![]);
        let run: StagedUpdateRun = typed(run);
        assert!(run.is_namespaced());
        assert_eq!(run.state(), UpdateRunState::Run);
        assert_eq!(run.resource_snapshot_index(), None);
    }

    const STAGE_HEAD: &str = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata: {name: s}\nspec:\n  stages:\n";

    fn strategy(stages: &str) -> String {
        format!("{STAGE_HEAD}{stages}")
    }

    /// Neither KubeFleet's CRD nor its webhook checks that stage names are unique (the test
    /// bed's API server admits two stages named `a`); gitfleet does, and says it is its own rule.
    #[test]
    fn duplicate_stage_names_are_gitfleets_own_rule() {
        let got = problems::<StagedUpdateStrategy>(&strategy("  - name: a\n  - name: a\n"));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "spec.stages[1].name");
        assert!(got[0].1.contains("gitfleet's own check"), "{got:?}");
    }

    #[test]
    fn strategy_rules_name_their_field() {
        let too_many: String = (0..32).map(|i| format!("  - name: s{i}\n")).collect();
        let long = "a".repeat(64);
        expect_one::<StagedUpdateStrategy>(&[
            (strategy(&too_many), "spec.stages", "must have at most 31 items, got 32"),
            (strategy("  - name: ''\n"), "spec.stages[0].name", "Required value"),
            (
                strategy(&format!("  - name: {long}\n")),
                "spec.stages[0].name",
                "must be no more than 63 characters, got 64",
            ),
            (
                strategy("  - name: Canary-1\n"),
                "spec.stages[0].name",
                "\"Canary-1\" must match '^[a-z0-9]+$'",
            ),
            (
                strategy("  - name: a\n  - name: b\n  - name: a\n"),
                "spec.stages[2].name",
                "Duplicate value: \"a\": stage names must be unique (gitfleet's own check of a rule KubeFleet states but does not enforce: two stages of one name would share their approval requests)",
            ),
            (
                strategy("  - name: a\n    labelSelector: {matchExpressions: [{key: env, operator: Exists, values: [x]}]}\n"),
                "spec.stages[0].labelSelector.matchExpressions[0].values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            (
                strategy("  - name: a\n    maxConcurrency: 0\n"),
                "spec.stages[0].maxConcurrency",
                "maxConcurrency must be at least 1",
            ),
            (
                strategy("  - name: a\n    maxConcurrency: '0%'\n"),
                "spec.stages[0].maxConcurrency",
                "\"0%\" must match '^(100|[1-9][0-9]?)%$'",
            ),
            (
                strategy("  - name: a\n    maxConcurrency: '5'\n"),
                "spec.stages[0].maxConcurrency",
                "\"5\" must match '^(100|[1-9][0-9]?)%$'",
            ),
            (
                strategy("  - name: a\n    maxConcurrency: '101%'\n"),
                "spec.stages[0].maxConcurrency",
                "\"101%\" must match '^(100|[1-9][0-9]?)%$'",
            ),
            (
                strategy("  - name: a\n    beforeStageTasks: [{type: Approval}, {type: Approval}]\n"),
                "spec.stages[0].beforeStageTasks",
                "must have at most 1 items, got 2",
            ),
            (
                strategy("  - name: a\n    beforeStageTasks: [{type: TimedWait, waitTime: 1h}]\n"),
                "spec.stages[0].beforeStageTasks[0].type",
                "BeforeStageTaskType cannot be TimedWait",
            ),
            (
                strategy("  - name: a\n    beforeStageTasks: [{type: Approval, waitTime: 1h}]\n"),
                "spec.stages[0].beforeStageTasks[0].waitTime",
                "AfterStageTaskType is Approval, waitTime is not allowed",
            ),
            (
                strategy("  - name: a\n    afterStageTasks: [{type: Approval}, {type: Approval}]\n"),
                "spec.stages[0].afterStageTasks[1].type",
                "afterStageTasks cannot have two tasks of the same type: Approval",
            ),
            (
                strategy("  - name: a\n  - name: b\n    afterStageTasks: [{type: TimedWait}]\n"),
                "spec.stages[1].afterStageTasks[0].waitTime",
                "AfterStageTaskType is TimedWait, waitTime is required",
            ),
            (
                strategy("  - name: a\n    afterStageTasks: [{type: Approval, waitTime: 1h}]\n"),
                "spec.stages[0].afterStageTasks[0].waitTime",
                "AfterStageTaskType is Approval, waitTime is not allowed",
            ),
            (
                strategy("  - name: a\n    afterStageTasks: [{type: TimedWait, waitTime: 0s}]\n"),
                "spec.stages[0].afterStageTasks[0].waitTime",
                "task 0 of type TimedWait has wait duration <= 0",
            ),
            (
                strategy("  - name: a\n    afterStageTasks: [{type: TimedWait, waitTime: 100ms}]\n"),
                "spec.stages[0].afterStageTasks[0].waitTime",
                "\"100ms\" must match '^(?:(?:0|[1-9][0-9]*)(\\.[0-9]+)?(?:s|m|h))+$' (units h, m and s only)",
            ),
        ]);
    }

    #[test]
    fn three_after_stage_tasks_are_too_many() {
        // Three tasks of two types always repeat a type too: both rules report.
        let doc = strategy(
            "  - name: a\n  - name: b\n    afterStageTasks: [{type: Approval}, {type: TimedWait, waitTime: 1m}, {type: Approval}]\n",
        );
        assert_eq!(
            problems::<StagedUpdateStrategy>(&doc),
            vec![
                (
                    "spec.stages[1].afterStageTasks".to_string(),
                    "must have at most 2 items, got 3".to_string()
                ),
                (
                    "spec.stages[1].afterStageTasks[2].type".to_string(),
                    "afterStageTasks cannot have two tasks of the same type: Approval".to_string()
                ),
            ]
        );
    }

    #[test]
    fn v1alpha1_strategy_has_no_concurrency_nor_before_tasks() {
        let doc = strategy(
            "  - name: a\n    maxConcurrency: 2\n    beforeStageTasks: [{type: Approval}]\n",
        )
        .replace("/v1beta1", "/v1alpha1");
        assert_eq!(
            problems::<StagedUpdateStrategy>(&doc),
            vec![
                (
                    "spec.stages[0].maxConcurrency".to_string(),
                    "unknown field \"maxConcurrency\" (not in v1alpha1)".to_string()
                ),
                (
                    "spec.stages[0].beforeStageTasks".to_string(),
                    "unknown field \"beforeStageTasks\" (not in v1alpha1)".to_string()
                ),
            ]
        );
    }

    #[test]
    fn strategy_decoding_is_strict() {
        let cases = [
            (
                strategy("  - name: a\n    afterStageTasks: [{type: Sleep}]\n"),
                "spec.stages[0].afterStageTasks[0].type",
                "unknown variant `Sleep`",
            ),
            (
                strategy("  - name: a\n    maxSkew: 1\n"),
                "spec.stages[0].maxSkew",
                "unknown field `maxSkew`",
            ),
            (
                "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata: {name: s}\nspec: {}\n".to_string(),
                "spec",
                "missing field `stages`",
            ),
        ];
        for (doc, field, msg) in cases {
            let err = decode::<StagedUpdateStrategy>(&value(&doc)).unwrap_err();
            assert_eq!(err.field, field, "{doc}");
            assert!(err.message.contains(msg), "{}", err.message);
        }
    }

    #[test]
    fn max_concurrency_rounds_down_with_a_floor_of_one() {
        let stage = |mc: Option<IntOrPercent>| StageConfig {
            name: "a".into(),
            max_concurrency: mc,
            ..Default::default()
        };
        let pct = |s: &str| Some(IntOrPercent::String(s.into()));
        let cases = [
            (stage(None), 10, 1),
            (stage(Some(IntOrPercent::Int(3))), 10, 3),
            (stage(Some(IntOrPercent::Int(30))), 10, 30),
            (stage(pct("50%")), 10, 5),
            (stage(pct("25%")), 10, 2),
            (stage(pct("33%")), 3, 1),
            (stage(pct("10%")), 5, 1),
            (stage(pct("100%")), 7, 7),
            (stage(pct("50%")), 0, 1),
        ];
        for (s, size, want) in cases {
            assert_eq!(
                s.max_concurrency_for(size),
                want,
                "{:?} of {size}",
                s.max_concurrency
            );
        }
    }

    #[test]
    fn stage_selectors_nil_selects_nothing() {
        let labels: Labels = [("env".to_string(), "prod".to_string())].into();
        let none = StageConfig::default();
        assert!(!none.selects(&labels));
        let all = StageConfig {
            label_selector: Some(LabelSelector::default()),
            ..Default::default()
        };
        assert!(all.selects(&labels));
    }

    #[test]
    fn wait_times_parse_like_go() {
        let ok = [
            ("1h", 3600.0),
            ("1h30m", 5400.0),
            ("90s", 90.0),
            ("1.5h", 5400.0),
            ("0.5s", 0.5),
            ("1m0.25s", 60.25),
            ("0s", 0.0),
            ("2h2h", 14400.0),
        ];
        for (s, secs) in ok {
            assert_eq!(parse_wait_time(s).unwrap().as_secs_f64(), secs, "{s}");
        }
        for bad in [
            "", "1", "01h", "1d", "-1h", "1.h", ".5h", "1h 30m", "1H", "5ms", "1us",
        ] {
            assert!(parse_wait_time(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(parse_wait_time("2562047h").is_ok());
        assert_eq!(
            parse_wait_time("2562048h").unwrap_err(),
            "\"2562048h\" is too long a duration"
        );
        assert_eq!(
            parse_wait_time("0.0000000001s").unwrap(),
            Duration::ZERO,
            "below a nanosecond truncates"
        );
    }

    const RUN_HEAD: &str = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\nmetadata: {name: run}\n";

    fn run(spec: &str) -> String {
        format!("{RUN_HEAD}spec: {{{spec}}}\n")
    }

    #[test]
    fn run_rules_name_their_field() {
        let long = "a".repeat(64);
        let long_ref = "p".repeat(256);
        expect_one::<StagedUpdateRun>(&[
            (
                run("placementName: p, stagedRolloutStrategyName: s").replace("name: run", &format!("name: {long}")),
                "metadata.name",
                "metadata.name max length is 63 (it has 64)",
            ),
            (
                run("placementName: '', stagedRolloutStrategyName: s"),
                "spec.placementName",
                "Required value",
            ),
            (
                run(&format!("placementName: {long_ref}, stagedRolloutStrategyName: s")),
                "spec.placementName",
                "must be no more than 255 characters, got 256",
            ),
            (
                run("placementName: p, stagedRolloutStrategyName: ''"),
                "spec.stagedRolloutStrategyName",
                "Required value",
            ),
            (
                run("placementName: p, stagedRolloutStrategyName: s, resourceSnapshotIndex: 'latest'"),
                "spec.resourceSnapshotIndex",
                "invalid resource snapshot index `latest` provided, expected an integer >= 0",
            ),
            (
                run("placementName: p, stagedRolloutStrategyName: s, resourceSnapshotIndex: '-1'"),
                "spec.resourceSnapshotIndex",
                "invalid resource snapshot index `-1` provided, expected an integer >= 0",
            ),
            (
                run("placementName: p, stagedRolloutStrategyName: s, state: Run, resourceSnapshotIndex: '0'").replace("/v1beta1", "/v1alpha1"),
                "spec.state",
                "unknown field \"state\" (not in v1alpha1)",
            ),
        ]);
        let err = decode::<StagedUpdateRun>(&value(&run(
            "placementName: p, stagedRolloutStrategyName: s, state: Pause",
        )))
        .unwrap_err();
        assert_eq!(err.field, "spec.state");
        let err = decode::<StagedUpdateRun>(&value(&run("placementName: p"))).unwrap_err();
        assert!(err
            .message
            .contains("missing field `stagedRolloutStrategyName`"));
        assert_eq!(
            problems::<StagedUpdateRun>(&run(
                "placementName: p, stagedRolloutStrategyName: s, resourceSnapshotIndex: ''"
            )),
            vec![]
        );
    }

    #[test]
    fn run_updates_keep_immutable_fields_and_legal_transitions() {
        let old: StagedUpdateRun = typed(&run(
            "placementName: p, stagedRolloutStrategyName: s, resourceSnapshotIndex: '1', state: Initialize",
        ));
        let mut new = old.clone();
        new.spec.state = Some(UpdateRunState::Run);
        assert!(new.update_problems(&old).is_empty());
        let mut implicit = old.clone();
        implicit.spec.state = None;
        let mut stopped = implicit.clone();
        stopped.spec.state = Some(UpdateRunState::Stop);
        assert_eq!(
            stopped.update_problems(&implicit),
            vec![Problem::new(
                "spec.state",
                "invalid state transition: cannot transition from Initialize to Stop"
            )],
            "an absent state is the defaulted Initialize"
        );
        new.spec.state = Some(UpdateRunState::Stop);
        new.spec.placement_name = "q".into();
        new.spec.resource_snapshot_index = Some("2".into());
        new.spec.staged_rollout_strategy_name = "t".into();
        let got: Vec<(String, String)> = new
            .update_problems(&old)
            .into_iter()
            .map(|p| (p.field, p.message))
            .collect();
        let want: Vec<(String, String)> = [
            ("spec.placementName", "placementName is immutable"),
            (
                "spec.resourceSnapshotIndex",
                "resourceSnapshotIndex is immutable",
            ),
            (
                "spec.stagedRolloutStrategyName",
                "stagedRolloutStrategyName is immutable",
            ),
            (
                "spec.state",
                "invalid state transition: cannot transition from Initialize to Stop",
            ),
        ]
        .iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect();
        assert_eq!(got, want);
        use UpdateRunState::*;
        assert!(UpdateRunState::transition_problem(Run, Initialize).is_some());
        assert!(UpdateRunState::transition_problem(Stop, Initialize).is_some());
        assert!(UpdateRunState::transition_problem(Run, Stop).is_none());
        assert!(UpdateRunState::transition_problem(Stop, Run).is_none());
    }

    #[test]
    fn snapshot_index_follows_go_atoi() {
        assert_eq!(parse_go_atoi_non_negative("12"), Some(12));
        assert_eq!(parse_go_atoi_non_negative("+3"), Some(3));
        assert_eq!(parse_go_atoi_non_negative("007"), Some(7));
        assert_eq!(parse_go_atoi_non_negative("-0"), Some(0));
        assert_eq!(parse_go_atoi_non_negative("-1"), None);
        assert_eq!(parse_go_atoi_non_negative("1.0"), None);
        assert_eq!(parse_go_atoi_non_negative(" 1"), None);
    }

    #[test]
    fn approval_request_rules() {
        expect_one::<ApprovalRequest>(&[
            (
                APPROVAL_EXAMPLE
                    .replace("parentStageRollout: example-run", "parentStageRollout: ''"),
                "spec.parentStageRollout",
                "Required value",
            ),
            (
                APPROVAL_EXAMPLE.replace("targetStage: canary", "targetStage: ''"),
                "spec.targetStage",
                "Required value",
            ),
        ]);
        let old: ApprovalRequest = typed(APPROVAL_EXAMPLE);
        let mut new = old.clone();
        assert!(new.update_problems(&old).is_empty());
        new.spec.target_stage = "prod".into();
        assert_eq!(
            new.update_problems(&old),
            vec![Problem::new("spec", "The spec field is immutable")]
        );
        assert_eq!(
            approval_request_name("r", "s", TaskPhase::BeforeStage),
            "r-before-s"
        );
        assert_eq!(TaskPhase::AfterStage.label_value(), "afterStage");
    }

    fn placement(policy: &str) -> Placement {
        decode(&value(&format!(
            "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {{name: test-crp}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: a}}]\n{policy}"
        )))
        .unwrap()
    }

    #[test]
    fn eviction_rules() {
        let long = "c".repeat(256);
        expect_one::<ClusterResourcePlacementEviction>(&[
            (
                EVICTION_EXAMPLES[0].replace("placementName: test-crp", "placementName: ''"),
                "spec.placementName",
                "Required value",
            ),
            (
                EVICTION_EXAMPLES[0].replace("kind-cluster-1", &long),
                "spec.clusterName",
                "must be no more than 255 characters, got 256",
            ),
        ]);
        let e: ClusterResourcePlacementEviction = typed(EVICTION_EXAMPLES[0]);
        assert!(e.problems_with_placement(&placement("")).is_empty());
        assert!(e
            .problems_with_placement(&placement(
                "  policy: {placementType: PickN, numberOfClusters: 1}\n"
            ))
            .is_empty());
        assert_eq!(
            e.problems_with_placement(&placement(
                "  policy: {placementType: PickFixed, clusterNames: [a]}\n"
            )),
            vec![Problem::new(
                "spec.placementName",
                "cluster resource placement policy type PickFixed is not supported"
            )]
        );
        let mut moved = e.clone();
        moved.spec.cluster_name = "other".into();
        assert_eq!(moved.update_problems(&e)[0].field, "spec.clusterName");
    }

    #[test]
    fn budget_rules() {
        let head = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementDisruptionBudget\nmetadata: {name: test-crp}\n";
        expect_one::<ClusterResourcePlacementDisruptionBudget>(&[
            (
                format!("{head}spec: {{maxUnavailable: 1, minAvailable: 1}}\n"),
                "spec",
                "Both MaxUnavailable and MinAvailable cannot be specified",
            ),
            (
                format!("{head}spec: {{maxUnavailable: -1}}\n"),
                "spec.maxUnavailable",
                BUDGET_MESSAGE,
            ),
            (
                format!("{head}spec: {{minAvailable: '101%'}}\n"),
                "spec.minAvailable",
                BUDGET_MESSAGE,
            ),
            (
                format!("{head}spec: {{minAvailable: '3'}}\n"),
                "spec.minAvailable",
                BUDGET_MESSAGE,
            ),
        ]);
        assert_eq!(
            problems::<ClusterResourcePlacementDisruptionBudget>(&format!("{head}spec: {{}}\n")),
            vec![],
            "neither field is allowed by the API (it blocks every eviction)"
        );
        assert_eq!(
            problems::<ClusterResourcePlacementDisruptionBudget>(&format!(
                "{head}spec: {{maxUnavailable: '0%'}}\n"
            )),
            vec![]
        );
        let pct: ClusterResourcePlacementDisruptionBudget =
            typed(&format!("{head}spec: {{minAvailable: '50%'}}\n"));
        let max: ClusterResourcePlacementDisruptionBudget =
            typed(&format!("{head}spec: {{maxUnavailable: 1}}\n"));
        let int: ClusterResourcePlacementDisruptionBudget = typed(BUDGET_EXAMPLES[0]);
        assert!(int.problems_with_placement(&placement("")).is_empty());
        assert_eq!(
            pct.problems_with_placement(&placement("")),
            vec![Problem::new(
                "spec.minAvailable",
                "cluster resource placement policy type PickAll is not supported with min available as a percentage"
            )]
        );
        assert_eq!(
            max.problems_with_placement(&placement("  policy: {placementType: PickAll}\n"))[0]
                .field,
            "spec.maxUnavailable"
        );
        let pick_n = placement("  policy: {placementType: PickN, numberOfClusters: 3}\n");
        assert!(pct.problems_with_placement(&pick_n).is_empty());
        assert!(max.problems_with_placement(&pick_n).is_empty());
    }
    /// One test per rule of the CRDs (schema and CEL), KubeFleet's webhooks and gitfleet's own,
    /// named after the rule: the breaking document names the field, the edge case is admitted.
    mod rules {
        use super::{run, strategy};
        use crate::model::testing::rule_tests;

        fn stage(body: &str) -> String {
            strategy(&format!("  - name: a\n{body}"))
        }
        fn stages(n: usize) -> String {
            strategy(
                &(0..n)
                    .map(|i| format!("  - name: s{i}\n"))
                    .collect::<String>(),
            )
        }
        fn named_stage(name: &str) -> String {
            strategy(&format!("  - name: '{name}'\n"))
        }
        fn alpha(doc: String) -> String {
            doc.replace("/v1beta1", "/v1alpha1")
        }
        fn run_ok(extra: &str) -> String {
            run(&format!(
                "placementName: p, stagedRolloutStrategyName: s{extra}"
            ))
        }
        fn approval(spec: &str) -> String {
            format!("apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterApprovalRequest\nmetadata: {{name: r}}\nspec: {{{spec}}}\n")
        }
        fn eviction(spec: &str) -> String {
            format!("apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementEviction\nmetadata: {{name: e}}\nspec: {{{spec}}}\n")
        }
        fn budget(spec: &str) -> String {
            format!("apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementDisruptionBudget\nmetadata: {{name: b}}\nspec: {{{spec}}}\n")
        }

        rule_tests! { super::StagedUpdateStrategy;
            stages_at_most_31: stages(32) => "spec.stages", "at most 31 items";
                ok: stages(31);
            stage_name_required: named_stage("") => "spec.stages[0].name", "Required value";
                ok: named_stage("a");
            stage_name_at_most_63_characters: named_stage(&"a".repeat(64)) => "spec.stages[0].name", "no more than 63 characters";
                ok: named_stage(&"a".repeat(63));
            stage_name_pattern: named_stage("Canary-1") => "spec.stages[0].name", "must match '^[a-z0-9]+$'";
                ok: named_stage("canary1");
            stage_names_unique_is_gitfleets_own: strategy("  - name: a\n  - name: a\n") => "spec.stages[1].name", "gitfleet's own check";
                ok: strategy("  - name: a\n  - name: b\n");
            stage_label_selector_syntax: stage("    labelSelector: {matchLabels: {'bad key!': x}}\n") => "spec.stages[0].labelSelector.matchLabels", "key \"bad key!\"";
                ok: stage("    labelSelector: {matchLabels: {env: canary}}\n");
            max_concurrency_at_least_1: stage("    maxConcurrency: 0\n") => "spec.stages[0].maxConcurrency", "at least 1";
                ok: stage("    maxConcurrency: 1\n");
            max_concurrency_percent_pattern: stage("    maxConcurrency: '0%'\n") => "spec.stages[0].maxConcurrency", "must match";
                ok: stage("    maxConcurrency: '100%'\n");
            max_concurrency_not_in_v1alpha1: alpha(stage("    maxConcurrency: 1\n")) => "spec.stages[0].maxConcurrency", "not in v1alpha1";
                ok: alpha(stage(""));
            before_stage_tasks_at_most_1: stage("    beforeStageTasks: [{type: Approval}, {type: Approval}]\n") => "spec.stages[0].beforeStageTasks", "at most 1 items";
                ok: stage("    beforeStageTasks: [{type: Approval}]\n");
            before_stage_tasks_not_in_v1alpha1: alpha(stage("    beforeStageTasks: [{type: Approval}]\n")) => "spec.stages[0].beforeStageTasks", "not in v1alpha1";
                ok: alpha(stage("    afterStageTasks: [{type: Approval}]\n"));
            before_stage_task_not_timed_wait: stage("    beforeStageTasks: [{type: TimedWait, waitTime: 1h}]\n") => "spec.stages[0].beforeStageTasks[0].type", "cannot be TimedWait";
                ok: stage("    beforeStageTasks: [{type: Approval}]\n");
            before_stage_approval_has_no_wait_time: stage("    beforeStageTasks: [{type: Approval, waitTime: 1h}]\n") => "spec.stages[0].beforeStageTasks[0].waitTime", "waitTime is not allowed";
                ok: stage("    beforeStageTasks: [{type: Approval}]\n");
            after_stage_tasks_at_most_2: stage("    afterStageTasks: [{type: Approval}, {type: TimedWait, waitTime: 1m}, {type: Approval}]\n") => "spec.stages[0].afterStageTasks", "at most 2 items";
                ok: stage("    afterStageTasks: [{type: Approval}, {type: TimedWait, waitTime: 1m}]\n");
            after_stage_task_types_differ: stage("    afterStageTasks: [{type: Approval}, {type: Approval}]\n") => "spec.stages[0].afterStageTasks[1].type", "two tasks of the same type";
                ok: stage("    afterStageTasks: [{type: TimedWait, waitTime: 1m}, {type: Approval}]\n");
            after_stage_approval_has_no_wait_time: stage("    afterStageTasks: [{type: Approval, waitTime: 1h}]\n") => "spec.stages[0].afterStageTasks[0].waitTime", "waitTime is not allowed";
                ok: stage("    afterStageTasks: [{type: Approval}]\n");
            after_stage_timed_wait_requires_wait_time: stage("    afterStageTasks: [{type: TimedWait}]\n") => "spec.stages[0].afterStageTasks[0].waitTime", "waitTime is required";
                ok: stage("    afterStageTasks: [{type: TimedWait, waitTime: 1s}]\n");
            wait_time_pattern: stage("    afterStageTasks: [{type: TimedWait, waitTime: 100ms}]\n") => "spec.stages[0].afterStageTasks[0].waitTime", "must match";
                ok: stage("    afterStageTasks: [{type: TimedWait, waitTime: 1h30m0.5s}]\n");
            wait_time_positive: stage("    afterStageTasks: [{type: TimedWait, waitTime: 0s}]\n") => "spec.stages[0].afterStageTasks[0].waitTime", "wait duration <= 0";
                ok: stage("    afterStageTasks: [{type: TimedWait, waitTime: 0.1s}]\n");
            strategy_status_refused: format!("{}status: {{}}\n", stages(1)) => "status", "unknown field `status`";
                ok: stages(1);
            stage_task_type_is_an_enum: stage("    afterStageTasks: [{type: Sleep}]\n") => "spec.stages[0].afterStageTasks[0].type", "unknown variant";
                ok: stage("    afterStageTasks: [{type: Approval}]\n");
        }

        mod update_run {
            use super::*;
            rule_tests! { super::super::StagedUpdateRun;
                run_name_at_most_63_characters: run_ok("").replace("name: run", &format!("name: {}", "a".repeat(64))) => "metadata.name", "max length is 63";
                    ok: run_ok("").replace("name: run", &format!("name: {}", "a".repeat(63)));
                placement_name_required: run("placementName: '', stagedRolloutStrategyName: s") => "spec.placementName", "Required value";
                    ok: run_ok("");
                placement_name_at_most_255_characters: run(&format!("placementName: {}, stagedRolloutStrategyName: s", "p".repeat(256))) => "spec.placementName", "no more than 255 characters";
                    ok: run(&format!("placementName: {}, stagedRolloutStrategyName: s", "p".repeat(255)));
                strategy_name_required: run("placementName: p, stagedRolloutStrategyName: ''") => "spec.stagedRolloutStrategyName", "Required value";
                    ok: run_ok("");
                strategy_name_field_required: run("placementName: p") => "spec", "missing field `stagedRolloutStrategyName`";
                    ok: run_ok("");
                resource_snapshot_index_is_a_non_negative_integer: run_ok(", resourceSnapshotIndex: '-1'") => "spec.resourceSnapshotIndex", "expected an integer >= 0";
                    ok: run_ok(", resourceSnapshotIndex: '0'");
                state_not_in_v1alpha1: alpha(run_ok(", state: Run")) => "spec.state", "not in v1alpha1";
                    ok: alpha(run_ok(", resourceSnapshotIndex: '0'"));
                resource_snapshot_index_required_in_v1alpha1: alpha(run_ok("")) => "spec.resourceSnapshotIndex", "Required value";
                    ok: alpha(run_ok(", resourceSnapshotIndex: ''"));
                run_status_unknown_field_refused: format!("{}status: {{stagesStatus: 1, bogus: 1}}\n", run_ok("")) => "status.bogus", "unknown field `bogus`";
                    ok: format!("{}status: {{stagesStatus: 1, resourceSnapshotIndexUsed: '0'}}\n", run_ok(""));
                run_status_v1alpha1_has_no_resource_snapshot_index_used: alpha(format!("{}status: {{resourceSnapshotIndexUsed: '0'}}\n", run_ok(", resourceSnapshotIndex: '0'"))) => "status.resourceSnapshotIndexUsed", "unknown field";
                    ok: alpha(format!("{}status: {{policySnapshotIndexUsed: '0'}}\n", run_ok(", resourceSnapshotIndex: '0'")));
                state_is_an_enum: run_ok(", state: Pause") => "spec.state", "unknown variant";
                    ok: run_ok(", state: Stop");
            }
        }

        mod approval_request {
            use super::*;
            rule_tests! { super::super::ApprovalRequest;
                parent_stage_rollout_required: approval("parentStageRollout: '', targetStage: s") => "spec.parentStageRollout", "Required value";
                    ok: approval("parentStageRollout: r, targetStage: s");
                approval_status_condition_unknown_field_refused: format!("{}status: {{conditions: [{{type: Approved, status: 'True', by: me}}]}}\n", approval("parentStageRollout: r, targetStage: s")) => "status.conditions[0].by", "unknown field `by`";
                    ok: format!("{}status: {{conditions: [{{type: Approved, status: 'True'}}]}}\n", approval("parentStageRollout: r, targetStage: s"));
                target_stage_required: approval("parentStageRollout: r, targetStage: ''") => "spec.targetStage", "Required value";
                    ok: approval("parentStageRollout: r, targetStage: s");
            }
        }

        mod eviction {
            use super::*;
            rule_tests! { super::super::ClusterResourcePlacementEviction;
                eviction_placement_name_required: eviction("placementName: '', clusterName: c") => "spec.placementName", "Required value";
                    ok: eviction("placementName: p, clusterName: c");
                eviction_placement_name_at_most_255_characters: eviction(&format!("placementName: {}, clusterName: c", "p".repeat(256))) => "spec.placementName", "no more than 255 characters";
                    ok: eviction(&format!("placementName: {}, clusterName: c", "p".repeat(255)));
                eviction_status_unknown_field_refused: format!("{}status: {{phase: done}}\n", eviction("placementName: p, clusterName: c")) => "status.phase", "unknown field `phase`";
                    ok: format!("{}status: {{conditions: []}}\n", eviction("placementName: p, clusterName: c"));
                eviction_cluster_name_required: eviction("placementName: p, clusterName: ''") => "spec.clusterName", "Required value";
                    ok: eviction("placementName: p, clusterName: c");
                eviction_cluster_name_at_most_255_characters: eviction(&format!("placementName: p, clusterName: {}", "c".repeat(256))) => "spec.clusterName", "no more than 255 characters";
                    ok: eviction(&format!("placementName: p, clusterName: {}", "c".repeat(255)));
            }
        }

        mod disruption_budget {
            use super::*;
            rule_tests! { super::super::ClusterResourcePlacementDisruptionBudget;
                budget_not_both_fields: budget("maxUnavailable: 1, minAvailable: 1") => "spec", "cannot be specified";
                    ok: budget("minAvailable: 1");
                budget_status_refused: format!("{}status: {{}}\n", budget("minAvailable: 1")) => "status", "unknown field `status`";
                    ok: budget("minAvailable: 1");
                budget_max_unavailable_not_negative: budget("maxUnavailable: -1") => "spec.maxUnavailable", "greater than or equal to 0";
                    ok: budget("maxUnavailable: 0");
                budget_max_unavailable_percent_pattern: budget("maxUnavailable: '101%'") => "spec.maxUnavailable", "should match regex";
                    ok: budget("maxUnavailable: '100%'");
                budget_min_available_not_negative: budget("minAvailable: -1") => "spec.minAvailable", "greater than or equal to 0";
                    ok: budget("minAvailable: 0");
                budget_min_available_percent_pattern: budget("minAvailable: '5'") => "spec.minAvailable", "should match regex";
                    ok: budget("minAvailable: '0%'");
            }
        }
    }
}
