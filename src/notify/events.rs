//! What happened, as typed events: worked out from two consecutive snapshots of what the daemon
//! publishes ([`Snapshot`]), by [`events_between`]. Pure: no clock (the time is a parameter), no
//! I/O, no knowledge of sinks. A dropped snapshot only merges two transitions into one: the
//! events are differences of states, so none is invented and the last state is always told.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::api::{ApprovalRequest, PlacementStatus, UpdateRun};
use crate::rollout::guard::Held;
use crate::rollout::{BindingHealth, Rejected};
use crate::schedule::Inventory;

/// What the daemon published once, as far as events are concerned (shared parts shared).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The commit being rolled out.
    pub serving: Option<String>,
    /// The newest head, when it was refused.
    pub rejected: Option<Rejected>,
    /// The newest head, when the deletion guard holds it.
    pub held: Option<Held>,
    pub placements: Vec<Arc<PlacementStatus>>,
    pub runs: Vec<UpdateRun>,
    pub approvals: Vec<ApprovalRequest>,
    /// The members' last health (`None` before the first probe).
    pub inventory: Option<Arc<Inventory>>,
}

/// Every kind of event; [`Kind::name`] is its stable name (CloudEvents `type` suffix, filters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Kind {
    CommitServed,
    CommitRefused,
    /// Every placement of the served commit is ready, none failed.
    CommitRolledOut,
    PlacementStarted,
    PlacementSettled,
    PlacementFailed,
    StageStarted,
    ApprovalWaiting,
    Approved,
    RunFailed,
    RunSucceeded,
    GuardHeld,
    GuardReleased,
    DriftFound,
    DriftRestored,
    MemberUnhealthy,
    MemberRecovered,
}

impl Kind {
    pub const ALL: [Kind; 17] = [
        Kind::CommitServed,
        Kind::CommitRefused,
        Kind::CommitRolledOut,
        Kind::PlacementStarted,
        Kind::PlacementSettled,
        Kind::PlacementFailed,
        Kind::StageStarted,
        Kind::ApprovalWaiting,
        Kind::Approved,
        Kind::RunFailed,
        Kind::RunSucceeded,
        Kind::GuardHeld,
        Kind::GuardReleased,
        Kind::DriftFound,
        Kind::DriftRestored,
        Kind::MemberUnhealthy,
        Kind::MemberRecovered,
    ];

    /// `placement.failed`, ...: what filters name and CloudEvents' `type` ends with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::CommitServed => "commit.served",
            Kind::CommitRefused => "commit.refused",
            Kind::CommitRolledOut => "commit.rolledout",
            Kind::PlacementStarted => "placement.started",
            Kind::PlacementSettled => "placement.settled",
            Kind::PlacementFailed => "placement.failed",
            Kind::StageStarted => "run.stage.started",
            Kind::ApprovalWaiting => "run.approval.waiting",
            Kind::Approved => "run.approval.approved",
            Kind::RunFailed => "run.failed",
            Kind::RunSucceeded => "run.succeeded",
            Kind::GuardHeld => "guard.held",
            Kind::GuardReleased => "guard.released",
            Kind::DriftFound => "drift.found",
            Kind::DriftRestored => "drift.restored",
            Kind::MemberUnhealthy => "member.unhealthy",
            Kind::MemberRecovered => "member.recovered",
        }
    }

    pub fn severity(self) -> Severity {
        match self {
            Kind::CommitRefused
            | Kind::PlacementFailed
            | Kind::RunFailed
            | Kind::MemberUnhealthy => Severity::Error,
            Kind::GuardHeld | Kind::DriftFound | Kind::ApprovalWaiting => Severity::Warning,
            _ => Severity::Info,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One thing that happened, with what it concerns and where to read more.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(rename = "type", serialize_with = "kind_name")]
    pub kind: Kind,
    pub severity: Severity,
    /// Unix seconds of the snapshot that showed it.
    pub time: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The placement's id (`crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    /// A staged update run (`NAME` or `NAMESPACE/NAME`), its stage, who approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// One line for people.
    pub message: String,
    /// The dashboard's page for it (absent without a dashboard URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

fn kind_name<S: serde::Serializer>(k: &Kind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

impl Event {
    fn new(kind: Kind, time: u64, message: String) -> Event {
        Event {
            kind,
            severity: kind.severity(),
            time,
            commit: None,
            placement: None,
            clusters: Vec::new(),
            run: None,
            stage: None,
            approved_by: None,
            message,
            link: None,
        }
    }

    fn commit(mut self, c: Option<&str>) -> Event {
        self.commit = c.map(str::to_string);
        self
    }

    fn placement(mut self, p: &str, clusters: Vec<String>) -> Event {
        self.placement = Some(p.to_string());
        self.clusters = clusters;
        self
    }

    fn run(mut self, r: &str, stage: Option<&str>) -> Event {
        self.run = Some(r.to_string());
        self.stage = stage.map(str::to_string);
        self
    }
}

/// The dashboard page an event links to, under `base` (the dashboard's external URL).
pub fn page(e: &Event) -> String {
    match e.kind {
        Kind::PlacementStarted
        | Kind::PlacementSettled
        | Kind::PlacementFailed
        | Kind::DriftFound
        | Kind::DriftRestored => match &e.placement {
            Some(p) => format!("/placements/{p}"),
            None => "/".into(),
        },
        Kind::StageStarted
        | Kind::ApprovalWaiting
        | Kind::Approved
        | Kind::RunFailed
        | Kind::RunSucceeded => "/runs".into(),
        Kind::MemberUnhealthy | Kind::MemberRecovered => "/matrix".into(),
        Kind::CommitServed
        | Kind::CommitRefused
        | Kind::CommitRolledOut
        | Kind::GuardHeld
        | Kind::GuardReleased => "/".into(),
    }
}

/// Everything that happened between `prev` and `next`, at `time`, each linked under
/// `dashboard` (its external URL, no trailing slash needed). Ordered: commit, guard,
/// placements (by id), runs, approvals, members, then the commit's end.
pub fn events_between(
    prev: &Snapshot,
    next: &Snapshot,
    time: u64,
    dashboard: Option<&str>,
) -> Vec<Event> {
    let mut out = Vec::new();
    commits(prev, next, time, &mut out);
    guard(prev, next, time, &mut out);
    let serving = next.serving.as_deref();
    let before: BTreeMap<&str, &PlacementStatus> = prev
        .placements
        .iter()
        .map(|p| (p.id.as_str(), &**p))
        .collect();
    for p in &next.placements {
        placement(
            before.get(p.id.as_str()).copied(),
            p,
            serving,
            time,
            &mut out,
        );
    }
    runs(prev, next, serving, time, &mut out);
    approvals(prev, next, time, &mut out);
    members(prev, next, time, &mut out);
    if let Some(c) = serving.filter(|_| rolled_out(next) && !rolled_out_same(prev, next)) {
        let n = next.placements.len();
        let e = Event::new(
            Kind::CommitRolledOut,
            time,
            format!("commit {} rolled out: {n} placement(s) ready", short(c)),
        );
        out.push(e.commit(Some(c)));
    }
    if let Some(base) = dashboard {
        let base = base.trim_end_matches('/');
        for e in &mut out {
            e.link = Some(format!("{base}{}", page(e)));
        }
    }
    out
}

fn short(c: &str) -> &str {
    &c[..c.len().min(12)]
}

fn rolled_out(s: &Snapshot) -> bool {
    s.serving.is_some()
        && s.placements
            .iter()
            .all(|p| p.is_ready() && !p.has_failure())
}

fn rolled_out_same(prev: &Snapshot, next: &Snapshot) -> bool {
    rolled_out(prev) && prev.serving == next.serving
}

fn commits(prev: &Snapshot, next: &Snapshot, time: u64, out: &mut Vec<Event>) {
    if let Some(c) = next
        .serving
        .as_deref()
        .filter(|c| prev.serving.as_deref() != Some(*c))
    {
        let e = Event::new(
            Kind::CommitServed,
            time,
            format!("commit {} is served", short(c)),
        );
        out.push(e.commit(Some(c)));
    }
    if let Some(r) = &next.rejected {
        if prev.rejected.as_ref().map(|p| &p.commit) != Some(&r.commit) {
            let why = r.errors.first().map_or("", String::as_str);
            let e = Event::new(
                Kind::CommitRefused,
                time,
                format!("commit {} refused: {why}", short(&r.commit)),
            );
            out.push(e.commit(Some(&r.commit)));
        }
    }
}

fn guard(prev: &Snapshot, next: &Snapshot, time: u64, out: &mut Vec<Event>) {
    let before = prev.held.as_ref().map(|h| &h.commit);
    match &next.held {
        Some(h) if before != Some(&h.commit) => {
            let e = Event::new(Kind::GuardHeld, time, h.message.clone());
            out.push(e.commit(Some(&h.commit)));
        }
        None => {
            if let Some(c) = before {
                let e = Event::new(
                    Kind::GuardReleased,
                    time,
                    format!("the deletion guard no longer holds commit {}", short(c)),
                );
                out.push(e.commit(Some(c)));
            }
        }
        Some(_) => {}
    }
}

/// Clusters where `p` failed: a failed push, no rendering, or failed objects.
fn failed_clusters(p: &PlacementStatus) -> Vec<String> {
    let mut set: BTreeSet<&str> = p
        .failed
        .keys()
        .chain(p.render_errors.keys())
        .map(String::as_str)
        .collect();
    set.extend(
        p.clusters
            .iter()
            .filter(|(_, c)| c.details.last_error.is_some() || c.health == BindingHealth::Failed)
            .map(|(n, _)| n.as_str()),
    );
    set.into_iter().map(str::to_string).collect()
}

fn first_failure(p: &PlacementStatus) -> String {
    let from_clusters = p
        .clusters
        .iter()
        .find_map(|(n, c)| c.details.last_error.as_ref().map(|e| format!("{n}: {e}")));
    p.failed
        .iter()
        .chain(&p.render_errors)
        .map(|(n, e)| format!("{n}: {e}"))
        .next()
        .or(from_clusters)
        .unwrap_or_else(|| {
            if p.is_held() {
                "held for invalid resource selectors".into()
            } else {
                "objects failed".into()
            }
        })
}

fn placement(
    prev: Option<&PlacementStatus>,
    p: &PlacementStatus,
    serving: Option<&str>,
    time: u64,
    out: &mut Vec<Event>,
) {
    let (was_rolling, was_failed) =
        prev.map_or((false, false), |q| (!q.is_ready(), q.has_failure()));
    let (rolling, failed) = (!p.is_ready(), p.has_failure());
    let id = p.id.as_str();
    if failed && !was_failed {
        let e = Event::new(
            Kind::PlacementFailed,
            time,
            format!("{id} failed: {}", first_failure(p)),
        );
        out.push(e.commit(serving).placement(id, failed_clusters(p)));
    } else if rolling && !failed && !was_rolling && !was_failed {
        let mut clusters: Vec<String> = p
            .applying
            .iter()
            .chain(&p.removing)
            .chain(&p.waiting)
            .cloned()
            .collect();
        clusters.sort();
        clusters.dedup();
        let e = Event::new(
            Kind::PlacementStarted,
            time,
            format!("{id}: rollout started on {} cluster(s)", clusters.len()),
        );
        out.push(e.commit(serving).placement(id, clusters));
    } else if !rolling && !failed && (was_rolling || was_failed) {
        let e = Event::new(
            Kind::PlacementSettled,
            time,
            format!(
                "{id}: rollout settled, {} cluster(s) ready",
                p.selected.len()
            ),
        );
        let selected = p.selected.iter().map(|c| c.to_string()).collect();
        out.push(e.commit(serving).placement(id, selected));
    }
    drift(prev, p, serving, time, out);
}

fn drift(
    prev: Option<&PlacementStatus>,
    p: &PlacementStatus,
    serving: Option<&str>,
    time: u64,
    out: &mut Vec<Event>,
) {
    let was = |c: &str| {
        prev.and_then(|q| q.clusters.get(c))
            .is_some_and(|s| s.drift)
    };
    let mut found = Vec::new();
    let mut why = None;
    let mut restored = Vec::new();
    for (c, s) in &p.clusters {
        if s.drift && !was(c) {
            why = why.or(s.recheck.as_deref().map(String::from));
            found.push(c.to_string());
        } else if s.recheck.is_none() && was(c) && s.details.last_error.is_none() {
            restored.push(c.to_string());
        }
    }
    let id = p.id.as_str();
    if !found.is_empty() {
        let why = why.unwrap_or_default();
        let e = Event::new(Kind::DriftFound, time, format!("{id}: drift: {why}"));
        out.push(e.commit(serving).placement(id, found));
    }
    if !restored.is_empty() {
        let e = Event::new(
            Kind::DriftRestored,
            time,
            format!("{id}: restored on {}", restored.join(", ")),
        );
        out.push(e.commit(serving).placement(id, restored));
    }
}

fn run_id(r: &UpdateRun) -> String {
    match &r.namespace {
        Some(ns) => format!("{ns}/{}", r.name),
        None => r.name.clone(),
    }
}

fn runs(prev: &Snapshot, next: &Snapshot, serving: Option<&str>, time: u64, out: &mut Vec<Event>) {
    let before: BTreeMap<String, &UpdateRun> = prev.runs.iter().map(|r| (run_id(r), r)).collect();
    for r in &next.runs {
        let id = run_id(r);
        let q = before.get(&id);
        let commit = Some(r.init_commit.as_str()).or(serving);
        let with = |e: Event| e.commit(commit).placement(&r.placement, Vec::new());
        if let Some(stage) = r.stage.as_deref() {
            if q.and_then(|q| q.stage.as_deref()) != Some(stage) {
                let e = Event::new(
                    Kind::StageStarted,
                    time,
                    format!("run {id}: stage {stage} started"),
                );
                out.push(with(e).run(&id, Some(stage)));
            }
        }
        let was = q.map_or("", |q| q.succeeded.as_str());
        if r.succeeded == "True" && was != "True" {
            let e = Event::new(Kind::RunSucceeded, time, format!("run {id} succeeded"));
            out.push(with(e).run(&id, None));
        } else if r.succeeded == "False" && was != "False" {
            let e = Event::new(
                Kind::RunFailed,
                time,
                format!("run {id} failed: {}", r.waiting_for),
            );
            out.push(with(e).run(&id, r.stage.as_deref()));
        }
    }
}

fn approvals(prev: &Snapshot, next: &Snapshot, time: u64, out: &mut Vec<Event>) {
    let key = |a: &ApprovalRequest| (a.namespace.clone(), a.name.clone());
    let before: BTreeMap<_, &ApprovalRequest> =
        prev.approvals.iter().map(|a| (key(a), a)).collect();
    for a in &next.approvals {
        let q = before.get(&key(a));
        let run = match &a.namespace {
            Some(ns) => format!("{ns}/{}", a.update_run),
            None => a.update_run.clone(),
        };
        let accepted = a.approval_accepted == "True";
        if accepted && q.is_none_or(|q| q.approval_accepted != "True") {
            let by = a.approved_by.clone().unwrap_or_else(|| "unknown".into());
            let mut e = Event::new(
                Kind::Approved,
                time,
                format!(
                    "run {run}: stage {} approved by {by} (tag {})",
                    a.stage, a.tag
                ),
            )
            .commit(Some(&a.commit))
            .run(&run, Some(&a.stage));
            e.approved_by = Some(by);
            out.push(e);
        } else if !accepted && q.is_none() {
            let e = Event::new(
                Kind::ApprovalWaiting,
                time,
                format!(
                    "run {run}: stage {} waits for approval: tag {} on commit {}",
                    a.stage,
                    a.tag,
                    short(&a.commit)
                ),
            );
            out.push(e.commit(Some(&a.commit)).run(&run, Some(&a.stage)));
        }
    }
}

fn members(prev: &Snapshot, next: &Snapshot, time: u64, out: &mut Vec<Event>) {
    let Some(inv) = &next.inventory else {
        return;
    };
    let before: BTreeMap<&str, bool> = prev
        .inventory
        .iter()
        .flat_map(|i| i.clusters.iter().map(|c| (c.name.as_str(), c.healthy)))
        .collect();
    for c in &inv.clusters {
        let was = before.get(c.name.as_str()).copied();
        let e = match (was, c.healthy) {
            (None | Some(true), false) => Event::new(
                Kind::MemberUnhealthy,
                time,
                format!(
                    "member {} is unhealthy: {}",
                    c.name,
                    c.error.as_deref().unwrap_or("no answer")
                ),
            ),
            (Some(false), true) => Event::new(
                Kind::MemberRecovered,
                time,
                format!("member {} recovered", c.name),
            ),
            _ => continue,
        };
        let mut e = e;
        e.clusters = vec![c.name.clone()];
        out.push(e);
    }
}

#[cfg(test)]
mod tests;

/// Events made by hand, for the sinks' tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    pub fn event(kind: Kind) -> Event {
        Event::new(kind, 100, String::new())
    }
}
