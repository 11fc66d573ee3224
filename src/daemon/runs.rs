//! Staged update runs and their approval requests as the status API serves them
//! (`/api/v1/updateruns`, `/api/v1/approvalrequests`) and `gitfleet status` prints them, like
//! `kubectl get clusterstagedupdaterun` and `kubectl get clusterapprovalrequest` (the columns of
//! KubeFleet's CRDs, apis/placement/v1beta1/stageupdate_types.go, plus where the run stands and
//! what it waits for). Built from the rollout state's run records into the wire types
//! ([`crate::api::UpdateRun`], [`crate::api::ApprovalRequest`]); printing is pure (those types
//! in, text out).

use serde::{Deserialize, Serialize};

use crate::api::{ApprovalRequest, UpdateRun};

use crate::model::staged::StageTaskType;
use crate::rollout::approval::Request;
use crate::rollout::staged::status::{self, RunStatus};
use crate::rollout::RolloutState;

/// Everything the two endpoints serve.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Runs {
    pub update_runs: Vec<UpdateRun>,
    pub approval_requests: Vec<ApprovalRequest>,
    /// The requests the last step waits on (what the tag verifier is asked about).
    #[serde(skip)]
    pub waiting: Vec<Request>,
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
                    out.approval_requests.push(ApprovalRequest {
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

fn run_view(st: &RunStatus) -> UpdateRun {
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
    UpdateRun {
        name: st.name.clone(),
        namespace: st.namespace.clone(),
        placement: st.placement.to_string(),
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
        wait_ends: st.timed_wait_ends(),
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

/// `42s`, `5m`, `3h`, `2d` since `created` (kubectl's AGE column).
pub(crate) fn age(created: u64, now: u64) -> String {
    let s = now.saturating_sub(created);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn text(v: &str) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.to_string()
    }
}

fn number(v: Option<u64>) -> String {
    v.map_or("-".into(), |n| n.to_string())
}

fn name_of(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{}", text(name)),
        None => text(name),
    }
}

/// `kubectl get clusterstagedupdaterun` and where each run stands.
pub fn runs_table(runs: &[UpdateRun], now: u64) -> String {
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
    for r in runs {
        rows.push(vec![
            name_of(r.namespace.as_deref(), &r.name),
            text(&r.placement),
            number(r.resource_snapshot_index),
            number(r.policy_snapshot_index),
            text(&r.initialized),
            text(&r.progressing),
            text(&r.succeeded),
            age(r.created_at, now),
            text(&r.state),
            text(r.stage.as_deref().unwrap_or_default()),
            text(&r.clusters),
            text(&r.waiting_for),
        ]);
    }
    crate::text_table::render(&rows)
}

/// `kubectl get clusterapprovalrequest`, with the tag that approves each.
pub fn approvals_table(requests: &[ApprovalRequest], now: u64) -> String {
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
    for r in requests {
        rows.push(vec![
            name_of(r.namespace.as_deref(), &r.name),
            text(&r.update_run),
            text(&r.stage),
            text(&r.approved),
            text(&r.approval_accepted),
            age(r.created_at, now),
            text(r.approved_by.as_deref().unwrap_or_default()),
            text(&r.tag),
            text(&r.commit.chars().take(12).collect::<String>()),
        ]);
    }
    crate::text_table::render(&rows)
}

/// Both tables, each after a blank line and only when there is something to show.
pub fn tables(runs: &[UpdateRun], requests: &[ApprovalRequest], now: u64) -> String {
    let mut out = String::new();
    if !runs.is_empty() {
        out.push_str("\nUPDATE RUNS\n");
        out.push_str(&runs_table(runs, now));
    }
    if !requests.is_empty() {
        out.push_str("\nAPPROVAL REQUESTS\n");
        out.push_str(&approvals_table(requests, now));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_kubectls_columns_and_dashes_for_blanks() {
        let status = serde_json::json!({"name": "r1", "placement": "crp/app",
            "strategyName": "s", "initCommit": "c", "createdAt": 100, "state": "Run"});
        let doc: crate::api::StatusDocument = serde_json::from_value(serde_json::json!({
            "branch": "main", "placements": [],
            "updateRuns": [{"name": "r1", "placement": "crp/app", "resourceSnapshotIndex": 0,
                "policySnapshotIndex": 0, "initialized": "True", "progressing": "False",
                "succeeded": "", "createdAt": 100, "state": "Run", "stage": "canary",
                "clusters": "3/3", "waitingFor": "r1-after-canary", "initCommit": "c",
                "status": status}],
            "approvalRequests": [{"name": "r1-after-canary", "updateRun": "r1", "stage": "canary",
                "taskType": "afterStage",
                "approved": "", "approvalAccepted": "", "createdAt": 130,
                "tag": "gitfleet/approve/r1-after-canary", "commit": "0123456789abcdef"}]
        }))
        .unwrap();
        let runs = runs_table(&doc.update_runs, 160);
        assert!(runs.starts_with("NAME  PLACEMENT  RESOURCE-SNAPSHOT-INDEX  POLICY-SNAPSHOT-INDEX  INITIALIZED  PROGRESSING  SUCCEEDED  AGE"), "{runs}");
        assert!(runs.contains("r1    crp/app    0"), "{runs}");
        assert!(runs.contains("60s"), "{runs}");
        assert!(runs.contains("r1-after-canary"), "{runs}");
        let reqs = approvals_table(&doc.approval_requests, 160);
        assert!(reqs.contains("r1-after-canary  r1          canary  -         -                  30s  -            gitfleet/approve/r1-after-canary  0123456789ab"), "{reqs}");
        assert!(crate::rollout::approval::TAG_PREFIX.starts_with("gitfleet/"));
    }
}
