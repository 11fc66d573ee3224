//! Runs that move clusters to an older resource snapshot than the one they run. KubeFleet runs
//! the runs of one placement independently (a cluster another run changes under a running one
//! fails that one as preempted), so a run started earlier can, after a newer one succeeded, put
//! clusters back on its older snapshot. That is kept, and said: the run carries the condition
//! [`ROLLING_BACK`] naming itself, the clusters and both indices, and `gitfleet plan` reports the
//! same computation for the runs a commit brings.

use std::collections::BTreeMap;

use super::status::{self, RunStatus};

/// Run condition type: `True` while (and after) the run moves clusters to an older resource
/// snapshot than the one they run.
pub const ROLLING_BACK: &str = "RollingBack";
/// Its reasons.
pub const REASON_ROLLING_BACK: &str = "UpdateRunRollingBack";
pub const REASON_NOT_ROLLING_BACK: &str = "UpdateRunNotRollingBack";

/// One cluster a run moves (or moved) back: from the newer index `from` to the run's own.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollback {
    pub cluster: String,
    pub from: u64,
}

/// The clusters of `st` that run (or ran, when the run replaced it) a newer resource snapshot
/// than the run's: started ones by the revision the run replaced, the others by what they run
/// now (`clusters`, the placement's state). In stage order.
pub fn of(st: &RunStatus, clusters: &crate::rollout::ClusterStates) -> Vec<Rollback> {
    let Some(to) = st.resource_snapshot_index_used else {
        return vec![];
    };
    let mut out = Vec::new();
    for c in st.stages_status.iter().flat_map(|s| &s.clusters) {
        let from = if status::is_true(&c.conditions, status::STARTED) {
            c.replaced.iter().map(|r| r.resource_index).max()
        } else {
            clusters
                .get(&c.cluster_name)
                .and_then(|cs| cs.revision.as_ref())
                .map(|r| r.resource_index)
        };
        if let Some(from) = from.filter(|from| *from > to) {
            out.push(Rollback {
                cluster: c.cluster_name.clone(),
                from,
            });
        }
    }
    out
}

/// `The updateRun r1 moves clusters m4, m5 from resource snapshot index 2 back to the older
/// index 1`, grouped by the index they leave.
pub fn message(run: &str, to: u64, rollbacks: &[Rollback]) -> String {
    let mut by_from: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for r in rollbacks {
        by_from.entry(r.from).or_default().push(&r.cluster);
    }
    let parts: Vec<String> = by_from
        .iter()
        .map(|(from, clusters)| {
            let noun = if clusters.len() == 1 {
                "cluster"
            } else {
                "clusters"
            };
            format!(
                "{noun} {} from resource snapshot index {from}",
                clusters.join(", ")
            )
        })
        .collect();
    format!(
        "The updateRun {run} moves {} back to the older index {to}",
        parts.join(" and ")
    )
}

/// Sets the run's [`ROLLING_BACK`] condition from [`of`]: `True` with [`message`] when it moves
/// clusters back; `False` when it no longer does (absent when it never did).
pub fn note(st: &mut RunStatus, clusters: &crate::rollout::ClusterStates, now: u64) {
    let found = of(st, clusters);
    if let (Some(to), false) = (st.resource_snapshot_index_used, found.is_empty()) {
        let msg = message(&st.name, to, &found);
        status::set(
            &mut st.conditions,
            ROLLING_BACK,
            "True",
            REASON_ROLLING_BACK,
            msg,
            now,
        );
    } else if status::find(&st.conditions, ROLLING_BACK).is_some() {
        status::set(
            &mut st.conditions,
            ROLLING_BACK,
            "False",
            REASON_NOT_ROLLING_BACK,
            "The updateRun moves no cluster to an older resource snapshot",
            now,
        );
    }
}
