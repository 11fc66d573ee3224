//! Decision groups and PlacementDecision objects (OCM's decisionStrategy and PlacementDecision writer): how the
//! selected clusters are partitioned into groups and paged into objects of at most 100 entries.
//! Knows nothing of scoring: it receives the selection, best first.

use super::Misconfig;
use crate::model::ocm::{GroupStrategy, CLUSTER_GROUP};
use crate::model::placement::IntOrPercent;
use crate::model::ClusterName;
use crate::schedule::fleet::Fleet;
use crate::schedule::{DecisionGroup, PlacementSchedule};
use serde_json::{json, Value};

/// Label naming the placement a PlacementDecision belongs to.
pub const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";
/// Label carrying the decision group's name (possibly empty).
pub const DECISION_GROUP_NAME_LABEL: &str =
    "cluster.open-cluster-management.io/decision-group-name";
/// Label carrying the decision group's index, as a string.
pub const DECISION_GROUP_INDEX_LABEL: &str =
    "cluster.open-cluster-management.io/decision-group-index";
/// Most cluster decisions one PlacementDecision holds.
pub const MAX_DECISIONS_PER_OBJECT: usize = 100;

/// Clusters per decision group for `total` selected clusters, as OCM's `calculateLength`: an
/// integer as given, `"p%"` as `ceil(p/100 · total)`, default `"100%"`; 0 or less, or more than
/// `total`, means `total`. A string that is not a percentage is a misconfiguration.
pub(super) fn group_length(value: Option<&IntOrPercent>, total: usize) -> Result<usize, Misconfig> {
    let length: i64 = match value {
        None => total as i64,
        Some(IntOrPercent::Int(i)) => *i,
        Some(IntOrPercent::String(s)) => {
            let pct = s.strip_suffix('%').and_then(|p| p.parse::<f64>().ok());
            match pct {
                Some(p) => (p / 100.0 * total as f64).ceil() as i64,
                None => {
                    return Err(Misconfig::new(
                        "",
                        format!("{s} invalid type: string is not a percentage"),
                    ))
                }
            }
        }
    };
    Ok(if length <= 0 || length as u64 > total as u64 {
        total
    } else {
        length as usize
    })
}

/// OCM's `generateDecisionGroups`: `selected` holds the selected clusters best first, by
/// position in `fleet`. Each configured group takes, in order, the still-unassigned clusters its
/// selector matches (labels and claims; properties are the claims); the clusters left go to
/// unnamed groups. Every group's clusters are sorted by name and cut into chunks of the group
/// length; a group that matches nothing yields no chunk. With no chunk at all, one empty unnamed
/// group remains.
pub(super) fn decision_groups(
    strategy: &GroupStrategy,
    fleet: &Fleet,
    selected: &[u32],
) -> Result<Vec<DecisionGroup>, Misconfig> {
    let length = group_length(
        strategy.clusters_per_decision_group.as_ref(),
        selected.len(),
    )?;
    let mut assigned = vec![false; selected.len()];
    let mut groups = Vec::new();
    // The fleet is sorted by name: positions sort as names do.
    let chunk = |name: &str, mut members: Vec<u32>, groups: &mut Vec<DecisionGroup>| {
        members.sort_unstable();
        for part in members.chunks(length.max(1)) {
            groups.push(DecisionGroup {
                group_name: name.to_string(),
                group_index: groups.len(),
                clusters: part
                    .iter()
                    .map(|&i| fleet.clusters[i as usize].name.clone())
                    .collect(),
            });
        }
    };
    for group in &strategy.decision_groups {
        let sel = &group.group_cluster_selector;
        let labels = fleet.ocm_label_index().select(&sel.label_selector);
        let claims = &sel.claim_selector.match_expressions;
        let mut members = Vec::new();
        for (i, &c) in selected.iter().enumerate() {
            if !assigned[i]
                && labels.contains(c as usize)
                && claims
                    .iter()
                    .all(|r| r.matches(&fleet.clusters[c as usize].properties))
            {
                assigned[i] = true;
                members.push(c);
            }
        }
        chunk(&group.group_name, members, &mut groups);
    }
    let rest: Vec<u32> = selected
        .iter()
        .zip(&assigned)
        .filter(|(_, a)| !**a)
        .map(|(&c, _)| c)
        .collect();
    chunk("", rest, &mut groups);
    if groups.is_empty() {
        groups.push(DecisionGroup {
            group_name: String::new(),
            group_index: 0,
            clusters: vec![],
        });
    }
    Ok(groups)
}

/// The name of the `n`th PlacementDecision of a placement (`n` from 1, across groups and pages).
pub fn decision_object_name(placement: &str, n: usize) -> String {
    format!("{placement}-decision-{n}")
}

/// The PlacementDecision objects of a result, as OCM writes them: one or more per
/// decision group (an empty group still gets one, with no decisions), at most
/// [`MAX_DECISIONS_PER_OBJECT`] entries each, named `<placement>-decision-<n>` with `n` counting
/// from 1 across groups and pages, labelled with the placement, the group name and the group
/// index. Every field of a decision entry is a string (`clusterName`, and `reason`, which OCM
/// always leaves empty; no `score`), so Argo CD's `clusterDecisionResource` generator can read
/// them. A result with no decision groups (misconfigured groups, or a placement gitfleet did not
/// schedule) has no PlacementDecision: OCM deletes them all in that case.
///
/// gitfleet writes no `ownerReferences`: the Placement lives in Git, not on the cluster the
/// objects are applied to, so there is no UID to point at, and an owner reference to a missing
/// owner would make the garbage collector delete the object.
pub fn placement_decisions(result: &PlacementSchedule) -> Vec<Value> {
    let name = &result.key.name;
    let namespace = result.key.namespace.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for group in &result.decision_groups {
        let mut pages: Vec<&[ClusterName]> =
            group.clusters.chunks(MAX_DECISIONS_PER_OBJECT).collect();
        if pages.is_empty() {
            pages.push(&[]);
        }
        for page in pages {
            let decisions: Vec<Value> = page
                .iter()
                .map(|c| json!({"clusterName": c, "reason": ""}))
                .collect();
            out.push(json!({
                "apiVersion": format!("{CLUSTER_GROUP}/v1beta1"),
                "kind": "PlacementDecision",
                "metadata": {
                    "name": decision_object_name(name, out.len() + 1),
                    "namespace": namespace,
                    "labels": {
                        PLACEMENT_LABEL: name,
                        DECISION_GROUP_NAME_LABEL: group.group_name,
                        DECISION_GROUP_INDEX_LABEL: group.group_index.to_string(),
                    },
                },
                "status": {"decisions": decisions},
            }));
        }
    }
    out
}

/// `Placement.status.decisionGroups` for a result: `{decisionGroupIndex, decisionGroupName,
/// decisions: [PlacementDecision names], clusterCount}` per group.
pub fn decision_group_status(result: &PlacementSchedule) -> Vec<Value> {
    let mut n = 0;
    result
        .decision_groups
        .iter()
        .map(|g| {
            let pages = g.clusters.len().div_ceil(MAX_DECISIONS_PER_OBJECT).max(1);
            let names: Vec<String> = (0..pages)
                .map(|_| {
                    n += 1;
                    decision_object_name(&result.key.name, n)
                })
                .collect();
            json!({
                "decisionGroupIndex": g.group_index,
                "decisionGroupName": g.group_name,
                "decisions": names,
                "clusterCount": g.clusters.len(),
            })
        })
        .collect()
}
