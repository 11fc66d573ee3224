//! The rollout's decision as pushes: one [`MemberPush`] per member with the placements it
//! applies now (a removal is a placement pushed with no manifests, so push prunes everything
//! its record holds for it), and what the member's records are swept of ([`PruneUnlisted`]).
//! Only translation: what to push, with which strategy and stamp, is decided by the rollout.

use std::collections::BTreeMap;

use super::{MemberPush, PlacementPush, PruneUnlisted};
use crate::rollout::{Action, Prune, Sweep, Work};

/// The pushes for `work` and `sweeps`, by member name. `contexts` maps members to their
/// kubeconfig context; a member missing from it is reached through the context of its name.
pub fn member_pushes(
    work: &[Work],
    sweeps: &[Sweep],
    contexts: &BTreeMap<String, String>,
) -> Vec<MemberPush> {
    let mut by_member: BTreeMap<String, MemberPush> = BTreeMap::new();
    for w in work {
        let (manifests, strategy, resource_snapshot, run) = match &w.action {
            Action::Apply {
                manifests,
                strategy,
                resource_snapshot,
                delivered_by,
                ..
            } => (
                manifests.to_vec(),
                *strategy,
                resource_snapshot.to_string(),
                delivered_by.as_deref().cloned(),
            ),
            Action::Remove { strategy } => (vec![], *strategy, String::new(), None),
        };
        slot(&mut by_member, &w.cluster, contexts)
            .placements
            .push(PlacementPush {
                placement: w.placement.clone(),
                strategy,
                resource_snapshot,
                manifests,
                run,
            });
    }
    for s in sweeps {
        let keys = |set: &std::collections::BTreeSet<_>| {
            set.iter()
                .map(crate::model::PlacementKey::record_key)
                .collect()
        };
        slot(&mut by_member, &s.cluster, contexts).prune_unlisted = match &s.prune {
            Prune::AllExcept(keep) => PruneUnlisted::AllExcept(keys(keep)),
            Prune::Only(only) => PruneUnlisted::Only(keys(only)),
        };
    }
    by_member.into_values().collect()
}

/// The member's push, created empty on first use.
fn slot<'m>(
    by_member: &'m mut BTreeMap<String, MemberPush>,
    member: &str,
    contexts: &BTreeMap<String, String>,
) -> &'m mut MemberPush {
    by_member
        .entry(member.to_string())
        .or_insert_with(|| MemberPush {
            member: member.to_string(),
            context: contexts
                .get(member)
                .cloned()
                .unwrap_or_else(|| member.to_string()),
            placements: Vec::new(),
            // Only what the rollout chose is touched: other placements on the member wait for
            // their own step.
            prune_unlisted: PruneUnlisted::Only(Default::default()),
        })
}
