//! Staged update runs as timelines: each run's stages in order with their clusters, the
//! before- and after-stage tasks (a timed wait with the time left, an approval with the exact
//! command that approves it, or who approved it and when), and the approval tags the daemon
//! refused, with why.

use maud::{html, Markup};

use crate::api::{ApprovalRequest, ApprovalsView, Summary, UpdateRun};
use crate::model::staged::StageTaskType;
use crate::rollout::staged::status::{self as run_status, StageStatus, TaskStatus};
use crate::web::{ago, condition_status, duration, layout, none, short, when, Page};

pub struct Runs<'a> {
    pub summary: &'a Summary,
    pub runs: &'a [UpdateRun],
    pub requests: &'a [ApprovalRequest],
    pub approvals: &'a ApprovalsView,
    /// Unix seconds, for ages and the time left.
    pub now: u64,
}

/// The command that approves `r` (run in the fleet repository, with a signing key the daemon
/// trusts).
pub fn approve_command(r: &ApprovalRequest) -> String {
    match &r.namespace {
        Some(ns) => format!("gitfleet approve -n {ns} {}", r.name),
        None => format!("gitfleet approve {}", r.name),
    }
}

pub fn page(v: &Runs<'_>) -> Markup {
    let pending: Vec<&ApprovalRequest> = v
        .requests
        .iter()
        .filter(|a| a.approval_accepted != "True")
        .collect();
    let body = html! {
        h1 { "Staged update runs" }
        section aria-labelledby="pending" #pending-approvals {
            h2 #pending { "Pending approvals" }
            @if pending.is_empty() { (none("No approval is pending.")) } @else {
                ul.approvals { @for a in &pending {
                    li data-request=(a.name) {
                        strong { (a.name) } " · run " (a.update_run) " · " (a.task_type) " " (a.stage) " · asked " (ago(v.now, a.created_at))
                        br;
                        "Approve it, in the fleet repository: " code.command { (approve_command(a)) }
                        " (a signed tag " code { (a.tag) } " on " code { (short(Some(&a.commit))) } ")"
                    }
                } }
            }
        }
        section aria-labelledby="refused" {
            h2 #refused { "Refused approval tags" }
            @if v.approvals.rejections.is_empty() { (none("No tag was refused.")) } @else {
                table.list {
                    thead { tr { th scope="col" { "Tag" } th scope="col" { "Request" } th scope="col" { "Reason" } th scope="col" { "Detail" } } }
                    tbody { @for r in &v.approvals.rejections { tr {
                        th scope="row" { code { (r.tag) } }
                        td { (r.request.as_deref().unwrap_or("-")) }
                        td { code { (format!("{:?}", r.reason)) } }
                        td { (r.detail) }
                    } } }
                }
            }
        }
        section aria-labelledby="timelines" {
            h2 #timelines { "Runs" }
            @if v.runs.is_empty() { (none("No staged update run.")) }
            @for r in v.runs { (run(v, r)) }
        }
    };
    layout(Page::Runs, "Staged runs", v.summary, body)
}

fn run(v: &Runs<'_>, r: &UpdateRun) -> Markup {
    let current = r.status.current_stage();
    html! {
        article.run id=(format!("run-{}", r.name)) data-run=(r.name) {
            h3 { (r.name) @if let Some(ns) = &r.namespace { " (" (ns) ")" } }
            p {
                "placement " a href=(format!("/placements/{}", crate::web::encode(&r.placement))) { (r.placement) }
                " · " (r.state) " · started " (ago(v.now, r.created_at))
                " · commit " code { (short(Some(&r.init_commit))) }
                " · waiting for " strong.waiting { (r.waiting_for) }
                @if let Some(end) = r.wait_ends { " · wait ends in " (time_left(v, end, "strong")) }
            }
            ol.timeline {
                @for (i, s) in r.status.stages_status.iter().enumerate() {
                    (stage(v, r, s, i == current))
                }
                @if let Some(d) = &r.status.deletion_stage_status { (stage(v, r, d, current >= r.status.stages_status.len())) }
            }
        }
    }
}

fn stage(v: &Runs<'_>, r: &UpdateRun, s: &StageStatus, is_current: bool) -> Markup {
    let done = run_status::is_true(&s.conditions, run_status::SUCCEEDED);
    let class = if done {
        "stage done"
    } else if is_current {
        "stage current"
    } else {
        "stage"
    };
    html! {
        li class=(class) aria-current=[is_current.then_some("step")] {
            h4 { (s.stage_name) " " @if done { span.ok { "done" } } @else if is_current { span.unknown { "now" } } }
            p.times {
                @if let Some(t) = s.start_time { "started " (when(t as i64)) " " }
                @if let Some(t) = s.end_time { "· ended " (when(t as i64)) }
            }
            @if !s.before_stage_task_status.is_empty() { p { "Before: " @for t in &s.before_stage_task_status { (task(v, r, t, is_current)) " " } } }
            ul.clusters { @for c in &s.clusters {
                li { (c.cluster_name) " " @match c.conditions.iter().rev().find(|k| k.type_ == run_status::SUCCEEDED || k.type_ == "Started") {
                    Some(k) => { (k.type_) " " (condition_status(&k.status)) },
                    None => "not started",
                } }
            } }
            @if !s.after_stage_task_status.is_empty() { p { "After: " @for t in &s.after_stage_task_status { (task(v, r, t, is_current)) " " } } }
        }
    }
}

/// A before- or after-stage task; the time left and the approve command only for the stage
/// the run is at.
fn task(v: &Runs<'_>, r: &UpdateRun, t: &TaskStatus, is_current: bool) -> Markup {
    let ends = r.wait_ends.filter(|_| is_current);
    html! {
        @match t.type_ {
            StageTaskType::TimedWait => span.task {
                "timed wait: "
                @if run_status::is_true(&t.conditions, run_status::WAIT_TIME_ELAPSED) { "elapsed" }
                @else if let Some(end) = ends { (time_left(v, end, "span")) " left" }
                @else { "not started" }
            },
            StageTaskType::Approval => span.task {
                "approval "
                @if let Some(name) = &t.approval_request_name { code { (name) } " " }
                @if let Some(a) = &t.approval {
                    span.ok.approved { "approved by " (a.signer) " at " (when(a.accepted_at)) }
                } @else if let Some(req) = v.requests.iter().find(|a| Some(&a.name) == t.approval_request_name.as_ref()) {
                    span.unknown { "pending: " code.command { (approve_command(req)) } }
                } @else { "not reached" }
            },
        }
    }
}

/// The time left until `end` (the daemon's Unix seconds), as of the page's `now`; the page
/// script counts it down every second from `data-ends` and `data-now` (the daemon's clock, so
/// a browser whose clock differs still counts right).
fn time_left(v: &Runs<'_>, end: u64, tag: &str) -> Markup {
    let text = duration(end.saturating_sub(v.now));
    html! {
        @if tag == "strong" {
            strong.time-left data-ends=(end) data-now=(v.now) { (text) }
        } @else {
            span.time-left data-ends=(end) data-now=(v.now) { (text) }
        }
    }
}
