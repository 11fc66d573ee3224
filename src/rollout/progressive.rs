//! OCM's rollout of a ManifestWorkReplicaSet over its Placement's decision groups: the
//! `rolloutStrategy` types `All`, `Progressive` and `ProgressivePerGroup` as OCM's rollout
//! handler decides them. Given each cluster's rollout status ([`ClusterRollout`]: to apply,
//! progressing, succeeded, failed, with the time it entered it), the decision groups and the
//! time, which clusters get the work now, which timed out, whether `maxFailures` was breached
//! and when to look again ([`decide`]).
//!
//! Pure: the time is a parameter (Unix seconds). It knows nothing of how a cluster's status is
//! learnt ([`super::step`] maps what a push reported to it) nor of what the work holds.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::ocm::{
    go_duration_secs, is_progress_deadline, MandatoryDecisionGroup, OcmRolloutStrategy,
    OcmRolloutType,
};
use crate::model::placement::IntOrPercent;
use crate::model::ClusterName;
use crate::schedule::DecisionGroup;

/// Where one cluster's work stands, as OCM's rollout handler classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Status {
    /// The work is not (yet) applied as it should be.
    ToApply,
    /// Applied, its resources not available yet.
    Progressing,
    /// Applied and available.
    Succeeded,
    /// Applied, and failed.
    Failed,
    /// Progressing or failed for longer than `progressDeadline`.
    TimeOut,
    /// Not to be rolled out.
    Skip,
}

impl Status {
    fn is_failure(self) -> bool {
        matches!(self, Status::Failed | Status::TimeOut)
    }
}

/// A decision group, as OCM's PlacementDecisions label it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct GroupKey {
    pub name: String,
    pub index: usize,
}

/// One cluster's rollout status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterRollout {
    pub cluster: String,
    pub group: GroupKey,
    pub status: Status,
    /// When the cluster entered `status` (Unix seconds); the time of the decision if unknown.
    pub since: Option<u64>,
    /// When to look at it again: the end of its soak (`minSuccessTime`) or its deadline.
    pub recheck_at: Option<u64>,
}

impl ClusterRollout {
    pub fn new(cluster: &str, group: GroupKey, status: Status, since: Option<u64>) -> Self {
        ClusterRollout {
            cluster: cluster.to_string(),
            group,
            status,
            since,
            recheck_at: None,
        }
    }
}

/// A placement reference's `rolloutStrategy`, read as OCM's rollout handler reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strategy {
    pub type_: OcmRolloutType,
    /// `minSuccessTime`, seconds: how long a succeeded cluster soaks before the next ones.
    pub min_success_time: u64,
    /// `progressDeadline`, seconds; `None` waits forever.
    pub progress_deadline: Option<u64>,
    pub max_failures: IntOrPercent,
    /// Progressive only; `0` means every cluster.
    pub max_concurrency: IntOrPercent,
    pub mandatory: Vec<MandatoryDecisionGroup>,
}

/// Why a strategy cannot be carried out (OCM reports it as `PlacementVerified=False`,
/// reason `NotAsExpected`, and rolls nothing out).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrategyError {
    #[error("invalid timeout format {0:?}")]
    Timeout(String),
    #[error("failed to parse the provided {field}: {value:?} is an invalid maximum threshold value: string is not a percentage")]
    Threshold { field: &'static str, value: String },
}

/// The first reference to OCM Placement `key` of the ManifestWorkReplicaSets in `cat`: the
/// replica sets of one Placement share its strategy (the catalog checks it). `None` for
/// another kind of placement, or a Placement no replica set names.
pub fn replica_set_ref<'c>(
    cat: &'c crate::catalog::Catalog,
    key: &'c crate::model::PlacementKey,
) -> Option<&'c crate::model::ocm::LocalPlacementReference> {
    if key.kind != crate::model::PlacementKind::OcmPlacement {
        return None;
    }
    cat.replica_set_refs(key.namespace.as_deref(), &key.name)
        .next()
        .map(|(_, r)| r)
}

impl Strategy {
    /// The strategy of replica set reference `r` when it is progressive; `None` for `All`
    /// (every cluster at once).
    pub fn of_progressive(
        r: &crate::model::ocm::LocalPlacementReference,
    ) -> Option<Result<Strategy, StrategyError>> {
        let strategy = r.effective_strategy();
        if strategy.type_ == Some(OcmRolloutType::All) {
            return None;
        }
        Some(Strategy::of(Some(&strategy)))
    }

    /// The strategy `rs` asks for, with OCM's defaults (type `All`, no deadline, no failures
    /// tolerated, every cluster at once).
    pub fn of(rs: Option<&OcmRolloutStrategy>) -> Result<Strategy, StrategyError> {
        let type_ = rs.and_then(|r| r.type_).unwrap_or_default();
        let (mst, deadline, failures, concurrency, mandatory) = match type_ {
            OcmRolloutType::All => {
                let c = rs.and_then(|r| r.all.clone()).unwrap_or_default();
                (
                    c.min_success_time,
                    c.progress_deadline,
                    c.max_failures,
                    None,
                    vec![],
                )
            }
            OcmRolloutType::Progressive => {
                let c = rs.and_then(|r| r.progressive.clone()).unwrap_or_default();
                let m = c.mandatory_decision_groups;
                let (mst, dl, mf, mc) = (
                    c.min_success_time,
                    c.progress_deadline,
                    c.max_failures,
                    c.max_concurrency,
                );
                (mst, dl, mf, mc, m)
            }
            OcmRolloutType::ProgressivePerGroup => {
                let c = rs
                    .and_then(|r| r.progressive_per_group.clone())
                    .unwrap_or_default();
                let m = c.mandatory_decision_groups;
                (
                    c.min_success_time,
                    c.progress_deadline,
                    c.max_failures,
                    None,
                    m,
                )
            }
        };
        let strategy = Strategy {
            type_,
            min_success_time: mst.as_deref().and_then(go_duration_secs).unwrap_or(0),
            progress_deadline: parse_timeout(deadline.as_deref().unwrap_or(""))?,
            max_failures: failures.unwrap_or(IntOrPercent::Int(0)),
            max_concurrency: concurrency.unwrap_or(IntOrPercent::Int(0)),
            mandatory,
        };
        check_threshold("maxFailures", &strategy.max_failures)?;
        check_threshold("maxConcurrency", &strategy.max_concurrency)?;
        Ok(strategy)
    }
}

/// `progressDeadline`: `None` or empty waits forever; otherwise the CRD's pattern and a Go
/// duration.
fn parse_timeout(s: &str) -> Result<Option<u64>, StrategyError> {
    if s.is_empty() || s == "None" {
        return Ok(None);
    }
    if !is_progress_deadline(s) {
        return Err(StrategyError::Timeout(s.into()));
    }
    go_duration_secs(s)
        .map(Some)
        .ok_or_else(|| StrategyError::Timeout(s.into()))
}

/// OCM takes a string threshold only as a percentage (`"3"` is refused, `3` is not).
fn check_threshold(field: &'static str, v: &IntOrPercent) -> Result<(), StrategyError> {
    match v {
        IntOrPercent::String(s)
            if s.strip_suffix('%')
                .and_then(|p| p.parse::<f64>().ok())
                .is_none() =>
        {
            Err(StrategyError::Threshold {
                field,
                value: s.clone(),
            })
        }
        _ => Ok(()),
    }
}

/// A threshold over `total` clusters: an integer as given, `"p%"` as `ceil(p/100 · total)`;
/// 0 or less, or more than `total`, is `default`.
pub fn rollout_size(v: &IntOrPercent, total: usize, default: usize) -> usize {
    let length: i64 = match v {
        IntOrPercent::Int(i) => *i,
        IntOrPercent::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<f64>().ok()) {
            Some(p) => (p / 100.0 * total as f64).ceil() as i64,
            None => return default,
        },
    };
    if length <= 0 || length > total as i64 {
        default
    } else {
        length as usize
    }
}

/// What the strategy decides now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The clusters the rollout is at: to apply now (`ToApply`), or still in flight
    /// (progressing, failed within the deadline, succeeded but soaking).
    pub to_rollout: Vec<ClusterRollout>,
    pub timed_out: Vec<ClusterRollout>,
    /// Clusters with a status that no decision group holds any more.
    pub removed: Vec<ClusterRollout>,
    /// More clusters failed than `maxFailures` tolerates: the rollout stops where it is.
    pub max_failure_breach: bool,
    /// Seconds until a soak ends or a deadline passes.
    pub recheck_after: Option<u64>,
}

impl Decision {
    /// The clusters to apply the work to now.
    pub fn to_apply(&self) -> impl Iterator<Item = &str> {
        self.to_rollout
            .iter()
            .filter(|c| c.status == Status::ToApply)
            .map(|c| c.cluster.as_str())
    }
}

/// The decision of `strategy` over `groups` (the placement's decision groups, by index) for
/// clusters whose status is `existing` (clusters without one have never had this work), at
/// `now`.
pub fn decide(
    strategy: &Strategy,
    groups: &[DecisionGroup],
    existing: &[ClusterRollout],
    now: u64,
) -> Decision {
    let all: Vec<&DecisionGroup> = groups.iter().collect();
    let clusters = clusters_of(&all);
    let (current, removed): (Vec<ClusterRollout>, Vec<ClusterRollout>) = existing
        .iter()
        .cloned()
        .partition(|c| clusters.contains(c.cluster.as_str()));
    let t = Timing {
        min_success: strategy.min_success_time,
        deadline: strategy.progress_deadline,
        now,
    };
    let mandatory = mandatory_indices(&strategy.mandatory, groups);
    let (must, rest): (Vec<&DecisionGroup>, Vec<&DecisionGroup>) = groups
        .iter()
        .partition(|g| mandatory.contains(&g.group_index));
    let mut decision = match strategy.type_ {
        OcmRolloutType::All => {
            let n = clusters.len();
            // Every cluster at once, no failure stops it and nothing soaks.
            let t = Timing {
                min_success: 0,
                ..t
            };
            per_cluster(&all, n, n, &t, current)
        }
        OcmRolloutType::Progressive | OcmRolloutType::ProgressivePerGroup => {
            // The mandatory groups first, one by one, tolerating no failure.
            if !must.is_empty() {
                let d = per_group(&must, &IntOrPercent::Int(0), &t, current.clone());
                if !d.to_rollout.is_empty() || !d.timed_out.is_empty() {
                    return Decision { removed, ..d };
                }
            }
            if strategy.type_ == OcmRolloutType::Progressive {
                let failures = rollout_size(&strategy.max_failures, clusters.len(), 0);
                let total = clusters_of(&rest).len();
                let size = rollout_size(&strategy.max_concurrency, total, total);
                per_cluster(&rest, size, failures, &t, current)
            } else {
                per_group(&rest, &strategy.max_failures, &t, current)
            }
        }
    };
    decision.removed = removed;
    decision
}

fn clusters_of<'g>(groups: &[&'g DecisionGroup]) -> BTreeSet<&'g str> {
    groups
        .iter()
        .flat_map(|g| g.clusters.iter().map(ClusterName::as_str))
        .collect()
}

/// The indices of the groups `mandatory` names: by name when it has one (every group of that
/// name), else by index.
fn mandatory_indices(
    mandatory: &[MandatoryDecisionGroup],
    groups: &[DecisionGroup],
) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for m in mandatory {
        match m.group_name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => out.extend(
                groups
                    .iter()
                    .filter(|g| g.group_name == name)
                    .map(|g| g.group_index),
            ),
            None => {
                let index = m.group_index.unwrap_or(0);
                out.extend(
                    groups
                        .iter()
                        .filter(|g| g.group_index as i64 == i64::from(index))
                        .map(|g| g.group_index),
                );
            }
        }
    }
    out
}

fn key_of(g: &DecisionGroup) -> GroupKey {
    GroupKey {
        name: g.group_name.clone(),
        index: g.group_index,
    }
}

struct Timing {
    min_success: u64,
    deadline: Option<u64>,
    now: u64,
}

/// Where `status` stands now: still in the rollout (to apply, in flight, soaking), timed out,
/// or neither (succeeded and soaked, skipped).
fn classify(
    mut status: ClusterRollout,
    t: &Timing,
    rollout: &mut Vec<ClusterRollout>,
    timed_out: &mut Vec<ClusterRollout>,
) -> Status {
    let start = status.since.unwrap_or(t.now);
    match status.status {
        Status::ToApply => rollout.push(status.clone()),
        Status::Succeeded => {
            let soaked = start + t.min_success;
            if t.now < soaked {
                status.recheck_at = Some(soaked);
                rollout.push(status.clone());
            }
        }
        Status::TimeOut | Status::Skip => {}
        Status::Progressing | Status::Failed => {
            status.recheck_at = t.deadline.map(|d| start + d);
            match status.recheck_at {
                Some(at) if t.now >= at => {
                    status.status = Status::TimeOut;
                    timed_out.push(status.clone());
                }
                _ => rollout.push(status.clone()),
            }
        }
    }
    status.status
}

fn recheck_after(rollout: &[ClusterRollout], now: u64) -> Option<u64> {
    rollout
        .iter()
        .filter_map(|c| c.recheck_at)
        .filter(|at| *at > now)
        .map(|at| at - now)
        .min()
}

/// Cluster by cluster, by name: the clusters with a status first, then the others, until
/// `size` are in the rollout; stops adding when more than `max_failures` failed.
fn per_cluster(
    groups: &[&DecisionGroup],
    size: usize,
    max_failures: usize,
    t: &Timing,
    mut existing: Vec<ClusterRollout>,
) -> Decision {
    existing.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    let (mut rollout, mut timed_out) = (Vec::new(), Vec::new());
    let mut seen = BTreeSet::new();
    let (mut failures, mut breach) = (0, false);
    let done = |rollout: Vec<ClusterRollout>, timed_out, breach| Decision {
        recheck_after: recheck_after(&rollout, t.now),
        to_rollout: rollout,
        timed_out,
        removed: vec![],
        max_failure_breach: breach,
    };
    for status in existing {
        if status.cluster.is_empty() {
            continue;
        }
        seen.insert(status.cluster.clone());
        // After a breach only clusters that already have the work are followed.
        let now_status = if !breach || status.status != Status::ToApply {
            classify(status, t, &mut rollout, &mut timed_out)
        } else {
            status.status
        };
        if now_status.is_failure() {
            failures += 1;
            breach = failures > max_failures;
        }
        if rollout.len() >= size {
            return done(rollout, timed_out, breach);
        }
    }
    if breach {
        return done(rollout, timed_out, breach);
    }
    let mut fresh: Vec<(&str, GroupKey)> = groups
        .iter()
        .flat_map(|g| g.clusters.iter().map(move |c| (c.as_str(), key_of(g))))
        .filter(|(c, _)| !seen.contains(*c))
        .collect();
    fresh.sort();
    fresh.dedup_by(|a, b| a.0 == b.0);
    for (cluster, group) in fresh {
        rollout.push(ClusterRollout::new(cluster, group, Status::ToApply, None));
        if rollout.len() >= size {
            break;
        }
    }
    done(rollout, timed_out, false)
}

/// Group by group, in index order: the next group starts only when every cluster of the
/// groups before is done (succeeded and soaked, or failed within `max_failures` of its group).
fn per_group(
    groups: &[&DecisionGroup],
    max_failures: &IntOrPercent,
    t: &Timing,
    existing: Vec<ClusterRollout>,
) -> Decision {
    let (mut rollout, mut timed_out) = (Vec::new(), Vec::new());
    let mut known: BTreeMap<String, Status> = BTreeMap::new();
    for status in existing {
        // A cluster still to apply is taken up again with its group.
        if status.cluster.is_empty() || status.status == Status::ToApply {
            continue;
        }
        let name = status.cluster.clone();
        let now_status = classify(status, t, &mut rollout, &mut timed_out);
        known.insert(name, now_status);
    }
    let mut ordered: Vec<&&DecisionGroup> = groups.iter().collect();
    ordered.sort_by_key(|g| g.group_index);
    let (mut total_failures, mut breach) = (0usize, false);
    let decision = |rollout: Vec<ClusterRollout>, timed_out, breach| Decision {
        recheck_after: recheck_after(&rollout, t.now),
        to_rollout: rollout,
        timed_out,
        removed: vec![],
        max_failure_breach: breach,
    };
    for g in ordered {
        let mut clusters: Vec<&str> = g.clusters.iter().map(ClusterName::as_str).collect();
        clusters.sort_unstable();
        clusters.dedup();
        let tolerated = rollout_size(max_failures, clusters.len(), 0);
        let mut group_failures = 0;
        for cluster in clusters {
            if let Some(status) = known.get(cluster) {
                if status.is_failure() {
                    group_failures += 1;
                    breach = group_failures > tolerated;
                }
                continue;
            }
            rollout.push(ClusterRollout::new(
                cluster,
                key_of(g),
                Status::ToApply,
                None,
            ));
        }
        total_failures += group_failures;
        if rollout.len() > total_failures || breach {
            return decision(rollout, timed_out, breach);
        }
    }
    decision(rollout, timed_out, breach)
}

/// The order the strategy rolls out in when every cluster succeeds as soon as it is applied
/// (no soak, no deadline): the clusters of each step, for `gitfleet plan`.
pub fn order(strategy: &Strategy, groups: &[DecisionGroup]) -> Vec<Vec<ClusterRollout>> {
    let quick = Strategy {
        min_success_time: 0,
        progress_deadline: None,
        ..strategy.clone()
    };
    let mut done: Vec<ClusterRollout> = Vec::new();
    let mut steps = Vec::new();
    loop {
        let d = decide(&quick, groups, &done, 0);
        let batch: Vec<ClusterRollout> = d
            .to_rollout
            .into_iter()
            .filter(|c| c.status == Status::ToApply)
            .collect();
        if batch.is_empty() {
            return steps;
        }
        done.extend(batch.iter().map(|c| ClusterRollout {
            status: Status::Succeeded,
            since: Some(0),
            ..c.clone()
        }));
        steps.push(batch);
    }
}

/// [`order`] in words: `group 0 (m1, m2), then group 1 (m3, m4)`.
pub fn order_line(steps: &[Vec<ClusterRollout>]) -> String {
    let step_line = |batch: &Vec<ClusterRollout>| {
        let mut by_group: Vec<(&GroupKey, Vec<&str>)> = Vec::new();
        for c in batch {
            match by_group.iter_mut().find(|(g, _)| **g == c.group) {
                Some((_, cs)) => cs.push(&c.cluster),
                None => by_group.push((&c.group, vec![&c.cluster])),
            }
        }
        by_group
            .iter()
            .map(|(g, cs)| {
                let name = if g.name.is_empty() {
                    format!("group {}", g.index)
                } else {
                    format!("group {} {}", g.index, g.name)
                };
                format!("{name} ({})", cs.join(", "))
            })
            .collect::<Vec<_>>()
            .join(" + ")
    };
    steps
        .iter()
        .map(step_line)
        .collect::<Vec<_>>()
        .join(", then ")
}

/// What a Placement's step knows of the replica sets that name it: the type of their
/// `rolloutStrategy`, and why it cannot be carried out, if it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSetRollout {
    pub type_: OcmRolloutType,
    pub error: Option<String>,
}

/// OCM's `ManifestWorkReplicaSetSummary`: of the clusters that have the current workloads, how
/// many have them applied, available, degraded (failed) and progressing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSetSummary {
    pub total: usize,
    pub applied: usize,
    pub available: usize,
    pub degraded: usize,
    pub progressing: usize,
}

/// OCM's `placementsSummary` entry of a replica set's status for one Placement.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSummary {
    pub name: String,
    /// `<decision groups> (<clusters with the workloads> / <selected clusters> clusters applied)`.
    pub available_decision_groups: String,
    pub summary: ReplicaSetSummary,
}

#[cfg(test)]
mod tests;
