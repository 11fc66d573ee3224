//! Which replica owns which shard, and which shard a member is in: pure functions of names, so
//! every replica computes the same answer from the same set of live replicas, with no
//! coordination beyond agreeing on that set.
//!
//! Members go to shards by a stable digest of their name (a member never changes shard). Shards
//! go to replicas by rendezvous (highest random weight) hashing: each shard picks the live
//! replica with the highest digest of (shard, replica). A replica that leaves moves only its
//! own shards (each to its next-highest replica); one that joins takes only the shards it now
//! wins, about 1/N of them. Argo CD's controller sharding and Rancher Fleet's shards divide
//! clusters likewise by hashing, without a coordinator.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use super::{ReplicaId, ShardId};

/// The first eight bytes of the SHA-256 of `parts` (each length-prefixed, so that
/// `("ab", "c")` and `("a", "bc")` differ): stable across processes, builds and versions.
fn digest(parts: &[&[u8]]) -> u64 {
    let mut d = Sha256::new();
    for p in parts {
        d.update((p.len() as u64).to_le_bytes());
        d.update(p);
    }
    let out = d.finalize();
    u64::from_le_bytes(out[..8].try_into().expect("eight bytes"))
}

/// The shard of `member` among `shards` (at least one).
pub fn shard_of(member: &str, shards: u32) -> ShardId {
    ShardId((digest(&[member.as_bytes()]) % u64::from(shards.max(1))) as u32)
}

/// The owner of every shard among `live` replicas, by rendezvous hashing; empty when no replica
/// is live.
pub fn owners(shards: u32, live: &BTreeSet<ReplicaId>) -> BTreeMap<ShardId, ReplicaId> {
    (0..shards.max(1))
        .filter_map(|s| {
            let shard = ShardId(s);
            let owner = live.iter().max_by_key(|r| (weight(shard, r), *r))?;
            Some((shard, owner.clone()))
        })
        .collect()
}

/// The replicas that serve shards: the live ones but the leader, which decides for the whole
/// fleet and so already keeps every binding; it serves shards only while no other replica is
/// live. A change of leader moves only the new leader's shards (to the others) and the shards
/// the old leader now wins, as a replica leaving and one joining do.
pub fn serving(live: &BTreeSet<ReplicaId>, leader: Option<&ReplicaId>) -> BTreeSet<ReplicaId> {
    let others: BTreeSet<ReplicaId> = live
        .iter()
        .filter(|r| Some(*r) != leader)
        .cloned()
        .collect();
    if others.is_empty() {
        live.clone()
    } else {
        others
    }
}

fn weight(shard: ShardId, replica: &ReplicaId) -> u64 {
    digest(&[&shard.0.to_le_bytes(), replica.as_str().as_bytes()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replicas(names: &[&str]) -> BTreeSet<ReplicaId> {
        names.iter().map(|n| ReplicaId::from(*n)).collect()
    }

    fn count(owners: &BTreeMap<ShardId, ReplicaId>, replica: &str) -> usize {
        owners.values().filter(|r| r.as_str() == replica).count()
    }

    #[test]
    fn a_member_has_one_stable_shard_and_members_spread_over_all_shards() {
        assert_eq!(shard_of("eastus-prod-1", 16), shard_of("eastus-prod-1", 16));
        let mut per_shard = [0u32; 16];
        for i in 0..10_000 {
            per_shard[shard_of(&format!("member-{i:05}"), 16).0 as usize] += 1;
        }
        // 625 each on average; a stable digest spreads them within a few percent.
        assert!(
            per_shard.iter().all(|&n| (560..=690).contains(&n)),
            "{per_shard:?}"
        );
        assert_eq!(
            shard_of("anything", 0),
            ShardId(0),
            "no shards counts as one"
        );
    }

    #[test]
    fn every_shard_has_one_live_owner_and_the_shards_are_spread() {
        let live = replicas(&["gitfleet-0", "gitfleet-1", "gitfleet-2", "gitfleet-3"]);
        let owners = owners(64, &live);
        assert_eq!(owners.len(), 64);
        assert!(owners.values().all(|r| live.contains(r)));
        for r in &live {
            let n = count(&owners, r.as_str());
            assert!((8..=24).contains(&n), "{r}: {n} of 64");
        }
        assert!(super::owners(8, &BTreeSet::new()).is_empty());
    }

    #[test]
    fn a_replica_leaving_moves_only_its_shards_and_one_joining_takes_only_what_it_wins() {
        let four = replicas(&["a", "b", "c", "d"]);
        let before = owners(64, &four);
        let three = replicas(&["a", "b", "c"]);
        let after = owners(64, &three);
        for (shard, owner) in &before {
            if owner.as_str() != "d" {
                assert_eq!(&after[shard], owner, "{shard} moved without cause");
            }
        }
        // And back: d takes exactly the shards it had.
        assert_eq!(owners(64, &four), before);
        let five = replicas(&["a", "b", "c", "d", "e"]);
        let joined = owners(64, &five);
        let moved: Vec<_> = before.iter().filter(|(s, o)| joined[*s] != **o).collect();
        assert!(moved.iter().all(|(s, _)| joined[*s].as_str() == "e"));
        assert!((4..=24).contains(&moved.len()), "{} moved", moved.len());
    }

    #[test]
    fn the_leader_serves_no_shard_unless_it_is_alone() {
        let live = replicas(&["a", "b", "c"]);
        let a = ReplicaId::from("a");
        assert_eq!(serving(&live, Some(&a)), replicas(&["b", "c"]));
        assert_eq!(
            serving(&live, None),
            live,
            "no leader known: every live replica"
        );
        let gone = ReplicaId::from("z");
        assert_eq!(
            serving(&live, Some(&gone)),
            live,
            "a leader not live changes nothing"
        );
        let alone = replicas(&["a"]);
        assert_eq!(
            serving(&alone, Some(&a)),
            alone,
            "alone, it serves every shard"
        );
        assert_eq!(owners(8, &serving(&alone, Some(&a))).len(), 8);
    }

    #[test]
    fn a_new_leader_hands_its_shards_over_and_the_old_one_takes_only_what_it_wins() {
        let live = replicas(&["a", "b", "c", "d"]);
        let (a, b) = (ReplicaId::from("a"), ReplicaId::from("b"));
        let before = owners(64, &serving(&live, Some(&a)));
        let after = owners(64, &serving(&live, Some(&b)));
        assert!(before.values().all(|r| *r != a) && after.values().all(|r| *r != b));
        for (shard, owner) in &before {
            if *owner != b && after[shard] != a {
                assert_eq!(&after[shard], owner, "{shard} moved without cause");
            }
        }
    }
}
