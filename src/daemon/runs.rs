//! Staged update runs and their approval requests as the status API serves them
//! (`/api/v1/updateruns`, `/api/v1/approvalrequests`) and `gitfleet status` prints them, like
//! `kubectl get clusterstagedupdaterun` and `kubectl get clusterapprovalrequest` (the columns of
//! KubeFleet's CRDs, apis/placement/v1beta1/stageupdate_types.go, plus where the run stands and
//! what it waits for). Built from the rollout state's run records; printing is pure (JSON in,
//! text out).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::staged::StageTaskType;
use crate::rollout::approval::Request;
use crate::rollout::staged::status::{self, RunStatus};
use crate::rollout::RolloutState;

/// Everything the two endpoints serve.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Runs {
    pub update_runs: Vec<UpdateRunView>,
    pub approval_requests: Vec<ApprovalRequestView>,
    /// The requests the last step waits on (what the tag verifier is asked about).
    #[serde(skip)]
    pub waiting: Vec<Request>,
}

/// One run: the `kubectl get` columns, where it stands, and its whole status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateRunView {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub placement: String,
    pub resource_snapshot_index: Option<u64>,
    pub policy_snapshot_index: Option<u64>,
    pub initialized: String,
    pub progressing: String,
    pub succeeded: String,
    pub created_at: u64,
    pub state: String,
    /// The stage being updated (`kubernetes-fleet.io/deleteStage` at the end), if any.
    pub stage: Option<String>,
    /// Clusters done / in the stage.
    pub clusters: String,
    /// What the run waits for, in a few words (`-` when nothing).
    pub waiting_for: String,
    /// The commit at which the run was initialised (approving tags point at it).
    pub init_commit: String,
    pub status: RunStatus,
}

/// One approval request a run has reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequestView {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub update_run: String,
    pub stage: String,
    /// `beforeStage` or `afterStage`.
    pub task_type: String,
    pub approved: String,
    pub approval_accepted: String,
    pub created_at: u64,
    /// The tag that approves it, and the commit it must point at.
    pub tag: String,
    pub commit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<i64>,
}

fn cond(conds: &[status::Condition], t: &str) -> String {
    status::find(conds, t).map_or(String::new(), |c| c.status.clone())
}

impl Runs {
    /// The runs of the state, by key, and every approval request they reached.
    pub fn of(state: &RolloutState) -> Runs {
        let mut out = Runs::default();
        for st in state.runs.values() {
            out.update_runs.push(run_view(st));
            for s in &st.stages_status {
                let tasks = s
                    .before_stage_task_status
                    .iter()
                    .map(|t| (t, crate::model::staged::TaskPhase::BeforeStage))
                    .chain(
                        s.after_stage_task_status
                            .iter()
                            .map(|t| (t, crate::model::staged::TaskPhase::AfterStage)),
                    );
                for (t, phase) in tasks {
                    if t.type_ != StageTaskType::Approval
                        || !status::is_true(&t.conditions, status::APPROVAL_REQUEST_CREATED)
                    {
                        continue;
                    }
                    let req = Request {
                        namespace: st.namespace.clone(),
                        run: st.name.clone(),
                        stage: s.stage_name.clone(),
                        phase,
                        commit: st.init_commit.clone(),
                    };
                    let approved =
                        status::is_true(&t.conditions, status::APPROVAL_REQUEST_APPROVED);
                    let flag = if approved { "True" } else { "" };
                    out.approval_requests.push(ApprovalRequestView {
                        name: req.name(),
                        namespace: st.namespace.clone(),
                        update_run: st.name.clone(),
                        stage: s.stage_name.clone(),
                        task_type: phase.label_value().to_string(),
                        approved: flag.into(),
                        approval_accepted: flag.into(),
                        created_at: t.requested_at.unwrap_or(st.created_at),
                        tag: req.tag_name(),
                        commit: req.commit.clone(),
                        approved_by: t.approval.as_ref().map(|a| a.signer.clone()),
                        approved_at: t.approval.as_ref().map(|a| a.accepted_at),
                    });
                }
            }
        }
        out
    }
}

fn run_view(st: &RunStatus) -> UpdateRunView {
    let i = st.current_stage();
    let (stage, clusters) =
        if st.is_terminal() || st.stages_status.is_empty() && st.deletion_stage_status.is_none() {
            (None, "-".to_string())
        } else if let Some(s) = st.stages_status.get(i) {
            let done = s
                .clusters
                .iter()
                .filter(|c| status::is_true(&c.conditions, status::SUCCEEDED))
                .count();
            (
                Some(s.stage_name.clone()),
                format!("{done}/{}", s.clusters.len()),
            )
        } else {
            let del = st.deletion_stage_status.as_ref();
            let total = del.map_or(0, |d| d.clusters.len());
            let done = del.map_or(0, |d| {
                d.clusters
                    .iter()
                    .filter(|c| status::is_true(&c.conditions, status::SUCCEEDED))
                    .count()
            });
            (
                Some(crate::model::staged::DELETE_STAGE_NAME.to_string()),
                format!("{done}/{total}"),
            )
        };
    UpdateRunView {
        name: st.name.clone(),
        namespace: st.namespace.clone(),
        placement: st.placement.clone(),
        resource_snapshot_index: st.resource_snapshot_index_used,
        policy_snapshot_index: st.policy_snapshot_index_used,
        initialized: cond(&st.conditions, status::INITIALIZED),
        progressing: cond(&st.conditions, status::PROGRESSING),
        succeeded: cond(&st.conditions, status::SUCCEEDED),
        created_at: st.created_at,
        state: format!("{:?}", st.state),
        stage,
        clusters,
        waiting_for: waiting_for(st),
        init_commit: st.init_commit.clone(),
        status: st.clone(),
    }
}

/// What the run waits for: an approval request, a timed wait, clusters, or nothing.
fn waiting_for(st: &RunStatus) -> String {
    if st.is_terminal() {
        return "-".into();
    }
    let Some(p) = status::find(&st.conditions, status::PROGRESSING) else {
        return "-".into();
    };
    let Some(s) = st.stages_status.get(st.current_stage()) else {
        return if p.reason == status::reason::PROGRESSING {
            "deletions".into()
        } else {
            "-".into()
        };
    };
    let pending_approvals = |tasks: &[status::TaskStatus]| -> Vec<String> {
        tasks
            .iter()
            .filter(|t| {
                t.type_ == StageTaskType::Approval
                    && status::is_true(&t.conditions, status::APPROVAL_REQUEST_CREATED)
                    && !status::is_true(&t.conditions, status::APPROVAL_REQUEST_APPROVED)
            })
            .filter_map(|t| t.approval_request_name.clone())
            .collect()
    };
    match p.reason.as_str() {
        r if r == status::reason::WAITING => {
            let mut what = pending_approvals(&s.before_stage_task_status);
            what.extend(pending_approvals(&s.after_stage_task_status));
            let timed = s.after_stage_task_status.iter().any(|t| {
                t.type_ == StageTaskType::TimedWait
                    && !status::is_true(&t.conditions, status::WAIT_TIME_ELAPSED)
            });
            let all_done = s
                .clusters
                .iter()
                .all(|c| status::is_true(&c.conditions, status::SUCCEEDED));
            if timed && all_done {
                what.push("TimedWait".into());
            }
            if what.is_empty() {
                "-".into()
            } else {
                what.join(", ")
            }
        }
        r if r == status::reason::STUCK => format!("stuck: {}", p.message),
        r if r == status::reason::STOPPING => "in-flight clusters (stopping)".into(),
        r if r == status::reason::STOPPED => "state: Run".into(),
        _ => "clusters".into(),
    }
}

fn age(created: u64, now: u64) -> String {
    let s = now.saturating_sub(created);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) if !s.is_empty() => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => "-".into(),
    }
}

fn name_of(v: &Value) -> String {
    match v["namespace"].as_str() {
        Some(ns) => format!("{ns}/{}", text(&v["name"])),
        None => text(&v["name"]),
    }
}

/// `kubectl get clusterstagedupdaterun` and where each run stands; JSON of [`Runs`] in.
pub fn runs_table(doc: &Value, now: u64) -> String {
    let mut rows = vec![[
        "NAME",
        "PLACEMENT",
        "RESOURCE-SNAPSHOT-INDEX",
        "POLICY-SNAPSHOT-INDEX",
        "INITIALIZED",
        "PROGRESSING",
        "SUCCEEDED",
        "AGE",
        "STATE",
        "STAGE",
        "CLUSTERS",
        "WAITING-FOR",
    ]
    .map(String::from)
    .to_vec()];
    for r in doc["updateRuns"].as_array().into_iter().flatten() {
        rows.push(vec![
            name_of(r),
            text(&r["placement"]),
            text(&r["resourceSnapshotIndex"]),
            text(&r["policySnapshotIndex"]),
            text(&r["initialized"]),
            text(&r["progressing"]),
            text(&r["succeeded"]),
            age(r["createdAt"].as_u64().unwrap_or(now), now),
            text(&r["state"]),
            text(&r["stage"]),
            text(&r["clusters"]),
            text(&r["waitingFor"]),
        ]);
    }
    crate::text_table::render(&rows)
}

/// `kubectl get clusterapprovalrequest`, with the tag that approves each; JSON of [`Runs`] in.
pub fn approvals_table(doc: &Value, now: u64) -> String {
    let mut rows = vec![[
        "NAME",
        "UPDATE-RUN",
        "STAGE",
        "APPROVED",
        "APPROVAL-ACCEPTED",
        "AGE",
        "APPROVED-BY",
        "TAG",
        "ON-COMMIT",
    ]
    .map(String::from)
    .to_vec()];
    for r in doc["approvalRequests"].as_array().into_iter().flatten() {
        rows.push(vec![
            name_of(r),
            text(&r["updateRun"]),
            text(&r["stage"]),
            text(&r["approved"]),
            text(&r["approvalAccepted"]),
            age(r["createdAt"].as_u64().unwrap_or(now), now),
            text(&r["approvedBy"]),
            text(&r["tag"]),
            r["commit"]
                .as_str()
                .map_or("-".into(), |c| c.chars().take(12).collect()),
        ]);
    }
    crate::text_table::render(&rows)
}

/// Both tables, each after a blank line and only when there is something to show.
pub fn tables(doc: &Value, now: u64) -> String {
    let mut out = String::new();
    let has = |k: &str| doc[k].as_array().is_some_and(|a| !a.is_empty());
    if has("updateRuns") {
        out.push_str("\nUPDATE RUNS\n");
        out.push_str(&runs_table(doc, now));
    }
    if has("approvalRequests") {
        out.push_str("\nAPPROVAL REQUESTS\n");
        out.push_str(&approvals_table(doc, now));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_kubectls_columns_and_dashes_for_blanks() {
        let doc = serde_json::json!({
            "updateRuns": [{"name": "r1", "placement": "crp/app", "resourceSnapshotIndex": 0,
                "policySnapshotIndex": 0, "initialized": "True", "progressing": "False",
                "succeeded": "", "createdAt": 100, "state": "Run", "stage": "canary",
                "clusters": "3/3", "waitingFor": "r1-after-canary"}],
            "approvalRequests": [{"name": "r1-after-canary", "updateRun": "r1", "stage": "canary",
                "approved": "", "approvalAccepted": "", "createdAt": 130,
                "tag": "gitfleet/approve/r1-after-canary", "commit": "0123456789abcdef"}]
        });
        let runs = runs_table(&doc, 160);
        assert!(runs.starts_with("NAME  PLACEMENT  RESOURCE-SNAPSHOT-INDEX  POLICY-SNAPSHOT-INDEX  INITIALIZED  PROGRESSING  SUCCEEDED  AGE"), "{runs}");
        assert!(runs.contains("r1    crp/app    0"), "{runs}");
        assert!(runs.contains("60s"), "{runs}");
        assert!(runs.contains("r1-after-canary"), "{runs}");
        let reqs = approvals_table(&doc, 160);
        assert!(reqs.contains("r1-after-canary  r1          canary  -         -                  30s  -            gitfleet/approve/r1-after-canary  0123456789ab"), "{reqs}");
        assert!(crate::rollout::approval::TAG_PREFIX.starts_with("gitfleet/"));
    }
}
