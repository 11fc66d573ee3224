//! Placement status conditions as KubeFleet computes them: per cluster, the
//! binding's conditions in order RolloutStarted, Overridden, WorkSynchronized, then Applied and
//! Available (or DiffReported for ReportDiff), stopping at the first that is not True; per
//! placement, each type aggregated over clusters (Unknown wins, then False). [`of_step`] works
//! them out from a rollout step and the state it left. Pure.

use serde::Serialize;

use super::progressive::{PlacementSummary, ReplicaSetSummary};
use super::rolling::{BindingHealth, Revision};
use super::state::PlacementState;
use super::step::StepSummary;
use crate::model::{ClusterName, PlacementKind};
use crate::schedule::{ClusterDecision, Condition, PlacementSchedule};
use std::collections::BTreeSet;

/// What is known of one selected cluster.
#[derive(Debug, Clone)]
pub struct ClusterFacts<'a> {
    pub cluster: &'a str,
    /// The scheduler's reason for picking it.
    pub decision: &'a str,
    /// It runs (or was last attempted at) the latest resource snapshot with its overrides.
    pub at_latest: bool,
    /// The rollout held it back this step (`RolloutNotStartedYet`).
    pub blocked: bool,
    /// No push has reached it yet for the latest revision.
    pub health: Option<BindingHealth>,
    pub error: Option<&'a str>,
    /// Overrides apply to this cluster (else `NoOverrideSpecified`).
    pub overridden: bool,
    /// Rendering (overrides) failed for this cluster.
    pub override_error: Option<&'a str>,
    /// The overrides applied but made an object the hub's Work API refuses (KubeFleet's
    /// `WorkSynchronized=False`, `SyncWorkFailed`).
    pub sync_error: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConditions {
    pub cluster: String,
    pub conditions: Vec<Condition>,
}

fn cond(type_: &str, status: &str, reason: &str, message: impl Into<String>) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

/// The per-cluster conditions of one selected cluster.
pub fn cluster_conditions(f: &ClusterFacts, report_diff: bool) -> Vec<Condition> {
    cluster_conditions_borrowed(f, report_diff)
        .into_iter()
        .map(|c| cond(c.type_, c.status, c.reason, c.message))
        .collect()
}

/// A per-cluster condition as worked out, its message borrowed: what the placement's own
/// conditions are counted from, for every cluster at every step, without a string made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Borrowed<'a> {
    type_: &'static str,
    status: &'static str,
    reason: &'static str,
    message: &'a str,
}

fn borrowed<'a>(
    type_: &'static str,
    status: &'static str,
    reason: &'static str,
    message: &'a str,
) -> Borrowed<'a> {
    Borrowed {
        type_,
        status,
        reason,
        message,
    }
}

fn cluster_conditions_borrowed<'a>(f: &ClusterFacts<'a>, report_diff: bool) -> Vec<Borrowed<'a>> {
    let mut out = vec![borrowed("Scheduled", "True", "Scheduled", f.decision)];
    if !f.at_latest {
        out.push(if f.blocked {
            borrowed(
                "RolloutStarted",
                "False",
                "RolloutNotStartedYet",
                "The rollout is being blocked by the rollout strategy",
            )
        } else {
            borrowed(
                "RolloutStarted",
                "Unknown",
                "RolloutStartedUnknown",
                "In the process of deciding whether to roll out the latest resources or not",
            )
        });
        return out;
    }
    out.push(borrowed(
        "RolloutStarted",
        "True",
        "RolloutStarted",
        "Detected the new changes on the resources and started the rollout process",
    ));
    if let Some(e) = f.override_error {
        out.push(borrowed("Overridden", "False", "OverriddenFailed", e));
        return out;
    }
    out.push(if f.overridden {
        borrowed(
            "Overridden",
            "True",
            "OverriddenSucceeded",
            "Successfully applied the override rules on the resources",
        )
    } else {
        borrowed(
            "Overridden",
            "True",
            "NoOverrideSpecified",
            "No override rules are configured for the selected resources",
        )
    });
    if let Some(e) = f.sync_error {
        out.push(borrowed("WorkSynchronized", "False", "SyncWorkFailed", e));
        return out;
    }
    out.push(borrowed(
        "WorkSynchronized",
        "True",
        "AllWorkSynced",
        "All of the works are synchronized to the latest",
    ));
    let Some(health) = f.health else {
        let (type_, reason) = if report_diff {
            ("DiffReported", "DiffReportingPending")
        } else {
            ("Applied", "ApplyPending")
        };
        out.push(borrowed(type_, "Unknown", reason, "Not applied yet"));
        return out;
    };
    if report_diff {
        out.push(match health {
            BindingHealth::DiffReported => borrowed(
                "DiffReported",
                "True",
                "AllWorkHaveDiffReported",
                "Diff reporting in all work objects has been completed",
            ),
            _ => borrowed(
                "DiffReported",
                "False",
                "NotAllWorkHaveDiffReported",
                f.error.unwrap_or("Diff reporting has not completed"),
            ),
        });
        return out;
    }
    if health == BindingHealth::Failed {
        out.push(borrowed(
            "Applied",
            "False",
            "NotAllWorkHaveBeenApplied",
            f.error.unwrap_or("Failed to apply the manifests"),
        ));
        return out;
    }
    out.push(borrowed(
        "Applied",
        "True",
        "AllWorkHaveBeenApplied",
        "All corresponding work objects are applied",
    ));
    out.push(match health {
        BindingHealth::Available => borrowed(
            "Available",
            "True",
            "AllWorkAreAvailable",
            "All corresponding work objects are available",
        ),
        BindingHealth::AvailableUntrackable { .. } => borrowed(
            "Available",
            "True",
            "NotAllWorkAreAvailabilityTrackable",
            "The availability of some objects cannot be tracked",
        ),
        _ => borrowed(
            "Available",
            "False",
            "NotAllWorkAreAvailable",
            "Some objects are not available yet",
        ),
    });
    out
}

/// The condition types a placement expects after `…Scheduled`, in order.
fn expected(report_diff: bool) -> &'static [&'static str] {
    if report_diff {
        &[
            "RolloutStarted",
            "Overridden",
            "WorkSynchronized",
            "DiffReported",
        ]
    } else {
        &[
            "RolloutStarted",
            "Overridden",
            "WorkSynchronized",
            "Applied",
            "Available",
        ]
    }
}

/// (Unknown, False, True) reasons of each placement-level type.
fn reasons(type_: &str) -> (&'static str, &'static str, &'static str) {
    match type_ {
        "RolloutStarted" => (
            "RolloutStartedUnknown",
            "RolloutNotStartedYet",
            "RolloutStarted",
        ),
        "Overridden" => (
            "OverriddenPending",
            "OverriddenFailed",
            "OverriddenSucceeded",
        ),
        "WorkSynchronized" => (
            "WorkSynchronizedUnknown",
            "WorkNotSynchronizedYet",
            "WorkSynchronized",
        ),
        "Applied" => ("ApplyPending", "ApplyFailed", "ApplySucceeded"),
        "Available" => (
            "ResourceAvailableUnknown",
            "ResourceNotAvailableYet",
            "ResourceAvailable",
        ),
        _ => (
            "DiffReportingPending",
            "DiffReportingIncompleteOrFailed",
            "DiffReportingCompleted",
        ),
    }
}

/// What the placement-level conditions count of the clusters' own: for each expected type,
/// how many clusters have it Unknown (or lack it) and how many False; how many have no
/// override rules.
#[derive(Debug, Default)]
struct Tally {
    clusters: usize,
    unknown: [usize; 5],
    false_: [usize; 5],
    no_override: usize,
}

impl Tally {
    /// Counts one cluster, its conditions read through `status_of` (type → status) and
    /// `reasons` (its conditions' reasons).
    fn add<'s>(
        &mut self,
        report_diff: bool,
        status_of: impl Fn(&str) -> Option<&'s str>,
        mut reasons: impl Iterator<Item = &'s str>,
    ) {
        self.clusters += 1;
        for (i, type_) in expected(report_diff).iter().enumerate() {
            match status_of(type_).unwrap_or("Unknown") {
                "Unknown" => self.unknown[i] += 1,
                "False" => self.false_[i] += 1,
                _ => {}
            }
        }
        if reasons.any(|r| r == "NoOverrideSpecified") {
            self.no_override += 1;
        }
    }

    fn add_borrowed(&mut self, report_diff: bool, conditions: &[Borrowed<'_>]) {
        let status_of = |t: &str| conditions.iter().find(|c| c.type_ == t).map(|c| c.status);
        self.add(report_diff, status_of, conditions.iter().map(|c| c.reason));
    }
}

/// Placement-level conditions: `scheduled` (the scheduler's, type `Scheduled`) prefixed with
/// the kind (`ClusterResourcePlacement` or `ResourcePlacement`), then each expected type
/// aggregated over the clusters.
pub fn placement_conditions(
    kind: PlacementKind,
    scheduled: Option<&Condition>,
    clusters: &[ClusterConditions],
    report_diff: bool,
) -> Vec<Condition> {
    let mut tally = Tally::default();
    for c in clusters {
        let status_of = |t: &str| {
            c.conditions
                .iter()
                .find(|x| x.type_ == t)
                .map(|x| x.status.as_str())
        };
        tally.add(
            report_diff,
            status_of,
            c.conditions.iter().map(|x| x.reason.as_str()),
        );
    }
    placement_conditions_of(kind, scheduled, &tally, report_diff)
}

fn placement_conditions_of(
    kind: PlacementKind,
    scheduled: Option<&Condition>,
    tally: &Tally,
    report_diff: bool,
) -> Vec<Condition> {
    // KubeFleet prefixes the placement-level types with the kind: ClusterResourcePlacementApplied.
    let prefix = kind.api_kind();
    let mut out = Vec::new();
    let Some(s) = scheduled else {
        out.push(cond(
            &format!("{prefix}Scheduled"),
            "Unknown",
            "SchedulePending",
            "Scheduling has not completed",
        ));
        return out;
    };
    out.push(Condition {
        type_: format!("{prefix}{}", s.type_),
        ..s.clone()
    });
    if tally.clusters == 0 {
        return out;
    }
    for (i, type_) in expected(report_diff).iter().enumerate() {
        let (unknown, false_, true_) = reasons(type_);
        let (unknowns, falses) = (tally.unknown[i], tally.false_[i]);
        let name = format!("{prefix}{type_}");
        if unknowns > 0 {
            out.push(cond(
                &name,
                "Unknown",
                unknown,
                format!("There are still {unknowns} cluster(s) in the process of deciding whether to roll out the latest resources or not"),
            ));
            break;
        }
        if falses > 0 {
            out.push(cond(
                &name,
                "False",
                false_,
                format!(
                    "There are {falses} cluster(s) which are not {}",
                    type_.to_lowercase()
                ),
            ));
            break;
        }
        let reason = if *type_ == "Overridden" && tally.no_override == tally.clusters {
            "NoOverrideSpecified"
        } else {
            true_
        };
        out.push(cond(
            &name,
            "True",
            reason,
            format!(
                "All {} cluster(s) are {}",
                tally.clusters,
                type_.to_lowercase()
            ),
        ));
    }
    out
}

/// A placement's status conditions after a step: KubeFleet's placement-level and per-cluster
/// conditions for its placements, the scheduler's own conditions for OCM placements. `sched`
/// is the placement's schedule, `stored` its state after the step.
pub fn of_step(
    step: &StepSummary,
    sched: Option<&PlacementSchedule>,
    stored: Option<&PlacementState>,
) -> (Vec<Condition>, Vec<ClusterConditions>) {
    let mut per_cluster = Vec::new();
    let placement = worked_out(step, sched, stored, Some(&mut per_cluster));
    (placement, per_cluster)
}

/// The placement-level conditions of [`of_step`], and whether it has per-cluster conditions
/// at all: what a publish needs at every step, the per-cluster ones being worked out again
/// when they are served.
pub fn placement_conditions_of_step(
    step: &StepSummary,
    sched: Option<&PlacementSchedule>,
    stored: Option<&PlacementState>,
) -> (Vec<Condition>, bool) {
    let placement = worked_out(step, sched, stored, None);
    let per_cluster = sched.is_some_and(|s| s.key.kind.is_kubefleet() && !s.selected.is_empty());
    (placement, per_cluster)
}

/// The placement-level conditions; each cluster's own pushed to `per_cluster` when asked.
fn worked_out(
    step: &StepSummary,
    sched: Option<&PlacementSchedule>,
    stored: Option<&PlacementState>,
    mut per_cluster: Option<&mut Vec<ClusterConditions>>,
) -> Vec<Condition> {
    let Some(sched) = sched else {
        return vec![];
    };
    if !sched.key.kind.is_kubefleet() {
        let mut conditions = sched.conditions.clone();
        conditions.extend(replica_set_conditions(step, sched, stored));
        return conditions;
    }
    // By cluster: a lookup per selected cluster in the list was quadratic in the clusters.
    // Only the per-cluster conditions show the decisions (in `Scheduled`'s message).
    let decisions: std::collections::HashMap<&str, &ClusterDecision> = match per_cluster {
        Some(_) => sched
            .decisions
            .iter()
            .map(|d| (d.cluster.as_str(), d))
            .collect(),
        None => Default::default(),
    };
    let waiting: BTreeSet<&str> = step.waiting.iter().map(String::as_str).collect();
    let mut tally = Tally::default();
    for cluster in &sched.selected {
        let cluster = cluster.as_str();
        let cs = stored.and_then(|p| p.clusters.get(cluster));
        let desired = step.desired(cluster);
        let at = |r: Option<&Revision>| desired.is_some() && r == desired;
        // A cluster that cannot be rendered stops at Overridden=False.
        let at_latest = step.render_errors.contains_key(cluster)
            || cs.is_some_and(|c| {
                at(c.revision.as_ref())
                    || (c.health == BindingHealth::Failed && at(c.details.attempted.as_ref()))
            });
        let decision = decisions.get(cluster).map(|d| d.reason());
        let facts = ClusterFacts {
            cluster,
            decision: decision.as_deref().unwrap_or(""),
            at_latest,
            blocked: waiting.contains(cluster),
            health: cs.filter(|_| at_latest).map(|c| c.health),
            error: cs.and_then(|c| c.details.last_error.as_deref()),
            overridden: step.overridden.contains(cluster),
            override_error: step
                .render_errors
                .get(cluster)
                .filter(|_| !step.work_sync_errors.contains(cluster))
                .map(String::as_str),
            sync_error: step
                .render_errors
                .get(cluster)
                .filter(|_| step.work_sync_errors.contains(cluster))
                .map(String::as_str),
        };
        let conditions = cluster_conditions_borrowed(&facts, step.report_diff);
        tally.add_borrowed(step.report_diff, &conditions);
        if let Some(out) = per_cluster.as_deref_mut() {
            out.push(ClusterConditions {
                cluster: cluster.to_string(),
                conditions: conditions
                    .into_iter()
                    .map(|c| cond(c.type_, c.status, c.reason, c.message))
                    .collect(),
            });
        }
    }
    let scheduled = sched.conditions.iter().find(|c| c.type_ == "Scheduled");
    placement_conditions_of(sched.key.kind, scheduled, &tally, step.report_diff)
}

/// OCM's status of the ManifestWorkReplicaSets that name an OCM Placement, for that Placement
/// (its `placementsSummary` entry); `None` when none names it. As OCM's controller counts
/// (manifestworkreplicaset_deploy_reconcile.go, manifestworkreplicaset_status_reconcile.go): the
/// clusters whose work is the current template, and of those the applied, available,
/// progressing and degraded ones.
pub fn replica_set_summary(
    step: &StepSummary,
    sched: &PlacementSchedule,
    stored: Option<&PlacementState>,
) -> Option<PlacementSummary> {
    step.replica_sets.as_ref()?;
    let mut summary = ReplicaSetSummary::default();
    for cluster in sched.selected.iter().map(ClusterName::as_str) {
        let Some(c) = stored.and_then(|p| p.clusters.get(cluster)) else {
            continue;
        };
        let desired = step.desired(cluster);
        if desired.is_none() || c.revision.as_ref() != desired {
            continue;
        }
        summary.total += 1;
        summary.applied += 1;
        match c.health {
            BindingHealth::Pending => summary.progressing += 1,
            BindingHealth::Failed => summary.degraded += 1,
            BindingHealth::Available
            | BindingHealth::AvailableUntrackable { .. }
            | BindingHealth::DiffReported => summary.available += 1,
        }
    }
    let groups = sched.decision_groups.len().max(1);
    Some(PlacementSummary {
        name: sched.key.name.clone(),
        available_decision_groups: format!(
            "{groups} ({} / {} clusters applied)",
            summary.total,
            sched.selected.len()
        ),
        summary,
    })
}

/// The replica sets' conditions for the Placement: `PlacementVerified` (the strategy can be
/// carried out and some cluster has the workloads), `PlacementRolledOut` (every selected
/// cluster has them available) and `ManifestworkApplied` (every cluster with them has them
/// available, or still progressing).
fn replica_set_conditions(
    step: &StepSummary,
    sched: &PlacementSchedule,
    stored: Option<&PlacementState>,
) -> Vec<Condition> {
    let Some(rollout) = &step.replica_sets else {
        return vec![];
    };
    let Some(PlacementSummary { summary: s, .. }) = replica_set_summary(step, sched, stored) else {
        return vec![];
    };
    let verified = if rollout.error.is_some() {
        cond(
            "PlacementVerified",
            "False",
            "NotAsExpected",
            rollout.error.clone().unwrap_or_default(),
        )
    } else if s.total == 0 {
        cond("PlacementVerified", "False", "PlacementDecisionEmpty", "")
    } else {
        cond("PlacementVerified", "True", "AsExpected", "")
    };
    let rolled_out = if s.available == sched.selected.len() {
        cond("PlacementRolledOut", "True", "Complete", "")
    } else {
        cond("PlacementRolledOut", "False", "Progressing", "")
    };
    let applied = if s.total == 0 {
        let reason = if rollout.error.is_none() {
            "PlacementDecisionEmpty"
        } else {
            "NotAsExpected"
        };
        cond("ManifestworkApplied", "False", reason, "")
    } else if s.available == s.total && s.progressing == 0 && s.degraded == 0 {
        cond("ManifestworkApplied", "True", "AsExpected", "")
    } else if s.progressing > 0 && s.degraded == 0 {
        cond("ManifestworkApplied", "False", "Processing", "")
    } else {
        cond("ManifestworkApplied", "False", "NotAsExpected", "")
    };
    vec![verified, rolled_out, applied]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(cluster: &str) -> ClusterFacts<'_> {
        ClusterFacts {
            cluster,
            decision: "picked by scheduling policy",
            at_latest: true,
            blocked: false,
            health: Some(BindingHealth::Available),
            error: None,
            overridden: false,
            override_error: None,
            sync_error: None,
        }
    }

    fn types(c: &[Condition]) -> Vec<(String, String, String)> {
        c.iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect()
    }

    fn cc(cluster: &str, conditions: Vec<Condition>) -> ClusterConditions {
        ClusterConditions {
            cluster: cluster.into(),
            conditions,
        }
    }

    #[test]
    fn an_available_cluster_has_every_condition_true() {
        let c = cluster_conditions(&facts("a"), false);
        let reasons: Vec<String> = c.iter().map(|c| c.reason.clone()).collect();
        assert_eq!(
            reasons,
            [
                "Scheduled",
                "RolloutStarted",
                "NoOverrideSpecified",
                "AllWorkSynced",
                "AllWorkHaveBeenApplied",
                "AllWorkAreAvailable"
            ]
        );
    }

    #[test]
    fn a_blocked_cluster_stops_at_rollout_not_started() {
        let f = ClusterFacts {
            at_latest: false,
            blocked: true,
            ..facts("a")
        };
        let c = cluster_conditions(&f, false);
        assert_eq!(
            types(&c).last().unwrap(),
            &(
                "RolloutStarted".into(),
                "False".into(),
                "RolloutNotStartedYet".into()
            )
        );
    }

    /// An object the overrides made invalid: KubeFleet's overrides succeed, then the Work is
    /// refused (pkg/controllers/workgenerator/controller.go: WorkSynchronized=False,
    /// SyncWorkFailed when the error is not an override failure).
    #[test]
    fn a_refused_work_stops_at_work_synchronized() {
        let f = ClusterFacts {
            overridden: true,
            sync_error: Some("Failed to synchronize the work to the latest: …"),
            ..facts("a")
        };
        let c = cluster_conditions(&f, false);
        assert_eq!(
            types(&c)[2..],
            [
                (
                    "Overridden".into(),
                    "True".into(),
                    "OverriddenSucceeded".into()
                ),
                (
                    "WorkSynchronized".into(),
                    "False".into(),
                    "SyncWorkFailed".into()
                ),
            ]
        );
    }

    #[test]
    fn a_failed_apply_stops_at_applied_with_the_error() {
        let f = ClusterFacts {
            health: Some(BindingHealth::Failed),
            error: Some("409 conflict with kubectl"),
            ..facts("a")
        };
        let c = cluster_conditions(&f, false);
        let last = c.last().unwrap();
        assert_eq!(last.reason, "NotAllWorkHaveBeenApplied");
        assert_eq!(last.message, "409 conflict with kubectl");
    }

    #[test]
    fn placement_aggregates_unknown_before_false() {
        let scheduled = Condition::new("Scheduled", true, "SchedulingPolicyFulfilled", "ok");
        let ok = cluster_conditions(&facts("a"), false);
        let pending = cluster_conditions(
            &ClusterFacts {
                health: Some(BindingHealth::Pending),
                ..facts("b")
            },
            false,
        );
        let p = placement_conditions(
            PlacementKind::ClusterResourcePlacement,
            Some(&scheduled),
            &[cc("a", ok.clone()), cc("b", pending)],
            false,
        );
        assert_eq!(
            types(&p).last().unwrap(),
            &(
                "ClusterResourcePlacementAvailable".into(),
                "False".into(),
                "ResourceNotAvailableYet".into()
            )
        );
        assert_eq!(p[0].type_, "ClusterResourcePlacementScheduled");
        assert_eq!(p[2].reason, "NoOverrideSpecified");

        let all = placement_conditions(
            PlacementKind::ResourcePlacement,
            Some(&scheduled),
            &[cc("a", ok)],
            false,
        );
        assert_eq!(all.len(), 6);
        assert!(all.iter().all(|c| c.status == "True"));
        assert_eq!(all[5].reason, "ResourceAvailable");
    }

    #[test]
    fn zero_clusters_keep_only_scheduled_and_report_diff_uses_diff_reported() {
        let scheduled = Condition::new("Scheduled", false, "SchedulingPolicyUnfulfilled", "none");
        assert_eq!(
            placement_conditions(
                PlacementKind::ClusterResourcePlacement,
                Some(&scheduled),
                &[],
                false
            )
            .len(),
            1
        );
        let diffed = cluster_conditions(
            &ClusterFacts {
                health: Some(BindingHealth::DiffReported),
                ..facts("a")
            },
            true,
        );
        assert_eq!(diffed.last().unwrap().reason, "AllWorkHaveDiffReported");
        let p = placement_conditions(
            PlacementKind::ClusterResourcePlacement,
            Some(&Condition::new(
                "Scheduled",
                true,
                "SchedulingPolicyFulfilled",
                "",
            )),
            &[cc("a", diffed)],
            true,
        );
        assert_eq!(p.last().unwrap().reason, "DiffReportingCompleted");
    }
}
