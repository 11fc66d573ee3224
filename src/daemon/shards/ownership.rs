//! What a replica does with the Leases it read, without I/O: which replicas are live, and for
//! each shard whether to create, renew, take or release its Lease, or wait for another replica
//! to let go of it. The Lease rules are the leader election's ([`crate::daemon::leader::decide`]):
//! a record is taken only once it has not changed for its duration on this replica's own clock.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::Instant;

use super::{ReplicaId, ShardId};
use crate::daemon::leader::{decide, expiry, Decision, Observed, Role};

/// The Lease records this replica saw change, and when, by Lease name.
#[derive(Debug, Default)]
pub struct Observations(BTreeMap<String, Option<Observed>>);

impl Observations {
    fn decide(&mut self, me: &ReplicaId, lease: &Lease, now: Instant) -> Decision {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let seen = self.0.entry(name).or_default();
        decide(me.as_str(), lease, seen, now)
    }

    /// Records a Lease seen for the first time as changed when its `renewTime` says (at most
    /// its duration ago), by `wall` against this replica's `now`.
    fn first_seen_at_renewal(&mut self, lease: &Lease, now: Instant, wall: jiff::Timestamp) {
        let name = lease.metadata.name.clone().unwrap_or_default();
        if self.0.get(&name).is_some_and(Option::is_some) {
            return;
        }
        let spec = lease.spec.clone().unwrap_or_default();
        let Some(renewed) = spec.renew_time else {
            return;
        };
        let duration =
            std::time::Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        let age = wall.duration_since(renewed.0).unsigned_abs().min(duration);
        if wall <= renewed.0 {
            return;
        }
        let at = now.checked_sub(age).unwrap_or(now);
        self.0.insert(
            name,
            Some(Observed {
                resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
                at,
            }),
        );
    }

    /// Forgets the records of Leases that are gone.
    fn keep(&mut self, names: &BTreeSet<String>) {
        self.0.retain(|n, _| names.contains(n));
    }

    /// The first moment after `now` at which one of `leases` held by another replica expires
    /// on this replica's clock, unless it changes first: waking then rather than at the next
    /// retry period takes a dead replica's shards as soon as the rules allow. Only records
    /// already decided on count (their observation is of the resourceVersion read).
    pub fn next_expiry<'a>(
        &self,
        me: &ReplicaId,
        leases: impl IntoIterator<Item = &'a Lease>,
        now: Instant,
    ) -> Option<Instant> {
        leases
            .into_iter()
            .filter_map(|lease| {
                let seen = self.0.get(lease.metadata.name.as_deref()?)?.as_ref()?;
                expiry(me.as_str(), lease, seen)
            })
            .filter(|at| *at > now)
            .min()
    }
}

/// The replicas whose replica Lease (held by the replica itself, renewed every retry period)
/// changed within its duration, and `me`.
///
/// A Lease seen for the first time is taken to have last changed at its `renewTime` on this
/// replica's wall clock (`wall`), if that is earlier: otherwise a replica that starts would
/// count a dead replica live for a whole lease duration, and leave the shards it assigns it
/// unowned that long. Liveness only says where shards should go; who may act for a shard is
/// still decided by the shard Leases, on this replica's own clock.
pub fn live_replicas(
    me: &ReplicaId,
    replica_leases: &[Lease],
    seen: &mut Observations,
    (now, wall): (Instant, jiff::Timestamp),
) -> BTreeSet<ReplicaId> {
    let mut live = BTreeSet::from([me.clone()]);
    for lease in replica_leases {
        seen.first_seen_at_renewal(lease, now, wall);
        // Judged as a would-be taker: "Follow" means its holder renewed it in time.
        let nobody = ReplicaId::from("");
        if let Decision::Follow(holder) = seen.decide(&nobody, lease, now) {
            live.insert(ReplicaId::from(holder.as_str()));
        }
    }
    live
}

/// The replica Leases (by name) of replicas gone for good: not live, and unchanged on this
/// replica's clock for `after` (many lease durations). A replica whose pod was replaced leaves
/// its Lease behind under its old identity; these are deleted (name and resourceVersion: a
/// Lease renewed since is not).
pub fn gone_replicas(
    replica_leases: &[Lease],
    live: &BTreeSet<ReplicaId>,
    seen: &Observations,
    after: std::time::Duration,
    now: Instant,
) -> Vec<(String, String)> {
    replica_leases
        .iter()
        .filter(|l| {
            let holder = l.spec.as_ref().and_then(|s| s.holder_identity.as_deref());
            !holder.is_some_and(|h| live.contains(&ReplicaId::from(h)))
        })
        .filter_map(|l| {
            let name = l.metadata.name.clone()?;
            let rv = l.metadata.resource_version.clone()?;
            let o = seen.0.get(&name)?.as_ref()?;
            (now >= o.at + after).then_some((name, rv))
        })
        .collect()
}

/// The leader as this replica's election last saw it: itself, the holder it follows, or none
/// known (not read yet, the Lease free or expired, or lost).
pub fn leader(me: &ReplicaId, role: &Role) -> Option<ReplicaId> {
    match role {
        Role::Leader => Some(me.clone()),
        Role::Follower {
            leader: Some(holder),
        } => Some(ReplicaId::from(holder.as_str())),
        Role::Follower { leader: None } | Role::Unknown | Role::Lost => None,
    }
}

/// What to do with one shard's Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardAction {
    /// No Lease yet, and the shard is this replica's: create it, held.
    Create,
    /// Held and still this replica's: renew it.
    Renew,
    /// This replica's, free or expired: take it (a replace with the resourceVersion read).
    Take,
    /// Held but another replica's now: stop acting for it, then release it.
    Release,
    /// This replica's, but another still holds it (releasing it, or about to expire).
    Wait { holder: String },
}

/// Each shard's action among `shards`, given who should own what (`owners`) and the shard
/// Leases as read. Shards neither held by nor owed to this replica have none.
pub fn plan(
    me: &ReplicaId,
    owners: &BTreeMap<ShardId, ReplicaId>,
    shard_leases: &BTreeMap<ShardId, Lease>,
    seen: &mut Observations,
    now: Instant,
) -> BTreeMap<ShardId, ShardAction> {
    let names = shard_leases
        .values()
        .filter_map(|l| l.metadata.name.clone())
        .collect();
    seen.keep(&names);
    let mut actions = BTreeMap::new();
    for (shard, owner) in owners {
        let mine = owner == me;
        let action = match (shard_leases.get(shard), mine) {
            (None, true) => ShardAction::Create,
            (None, false) => continue,
            (Some(lease), _) => match (seen.decide(me, lease, now), mine) {
                (Decision::Renew, true) => ShardAction::Renew,
                (Decision::Renew, false) => ShardAction::Release,
                (Decision::Take, true) => ShardAction::Take,
                (Decision::Follow(holder), true) => ShardAction::Wait { holder },
                (Decision::Take | Decision::Follow(_), false) => continue,
            },
        };
        actions.insert(*shard, action);
    }
    // A shard this replica holds that no owner lists (fewer shards configured now): let go.
    for (shard, lease) in shard_leases {
        if !owners.contains_key(shard) && seen.decide(me, lease, now) == Decision::Renew {
            actions.insert(*shard, ShardAction::Release);
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::leader::read_lease as lease;
    use std::time::Duration;

    fn id(s: &str) -> ReplicaId {
        ReplicaId::from(s)
    }

    fn wall() -> jiff::Timestamp {
        jiff::Timestamp::now()
    }

    /// A replica Lease last renewed `ago` before now (wall clock).
    fn renewed(name: &str, holder: &str, ago: i64) -> Lease {
        let mut l = lease(name, "1", Some(holder), 4);
        let at = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(ago);
        l.spec.as_mut().unwrap().renew_time = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(at),
        );
        l
    }

    #[test]
    fn the_leader_is_this_replica_the_holder_it_follows_or_unknown() {
        let me = id("a");
        assert_eq!(leader(&me, &Role::Leader), Some(id("a")));
        let following = Role::Follower {
            leader: Some("b".into()),
        };
        assert_eq!(leader(&me, &following), Some(id("b")));
        for role in [Role::Follower { leader: None }, Role::Unknown, Role::Lost] {
            assert_eq!(leader(&me, &role), None, "{role:?}");
        }
    }

    #[test]
    fn a_replica_lease_first_seen_long_after_its_renewal_is_not_live() {
        let t0 = Instant::now();
        let mut seen = Observations::default();
        // b renewed a second ago; c, ten seconds ago, past its 4 s: c's replica is gone.
        let leases = [renewed("r-b", "b", 1), renewed("r-c", "c", 10)];
        let live = live_replicas(&id("a"), &leases, &mut seen, (t0, wall()));
        assert_eq!(live, BTreeSet::from([id("a"), id("b")]));
        // b is live until 4 s after its renewal as first seen (3 s from now), unless it renews.
        let t1 = t0 + Duration::from_secs(2);
        assert!(live_replicas(&id("a"), &leases, &mut seen, (t1, wall())).contains(&id("b")));
        let t2 = t0 + Duration::from_secs(4);
        assert!(!live_replicas(&id("a"), &leases, &mut seen, (t2, wall())).contains(&id("b")));
        // c comes back: its Lease changes, and it is live again.
        let mut back = renewed("r-c", "c", 0);
        back.metadata.resource_version = Some("2".into());
        assert!(live_replicas(&id("a"), &[back], &mut seen, (t2, wall())).contains(&id("c")));
    }

    #[test]
    fn a_replica_is_live_while_its_lease_changes_within_its_duration() {
        let t0 = Instant::now();
        let mut seen = Observations::default();
        let leases = [
            lease("r-b", "1", Some("b"), 4),
            lease("r-c", "1", Some("c"), 4),
        ];
        let live = live_replicas(&id("a"), &leases, &mut seen, (t0, wall()));
        assert_eq!(live, BTreeSet::from([id("a"), id("b"), id("c")]));
        // b renews, c does not: 5 s later only b is live.
        let t1 = t0 + Duration::from_secs(5);
        let leases = [
            lease("r-b", "2", Some("b"), 4),
            lease("r-c", "1", Some("c"), 4),
        ];
        let live = live_replicas(&id("a"), &leases, &mut seen, (t1, wall()));
        assert_eq!(live, BTreeSet::from([id("a"), id("b")]));
        // A released replica Lease (no holder) is no replica.
        let leases = [lease("r-b", "3", None, 1)];
        let live = live_replicas(&id("a"), &leases, &mut seen, (t1, wall()));
        assert_eq!(live, BTreeSet::from([id("a")]));
    }

    #[test]
    fn a_replica_lease_unchanged_for_long_is_gone_for_good() {
        let t0 = Instant::now();
        let mut seen = Observations::default();
        let leases = [lease("r-b", "1", Some("b"), 4), lease("r-c", "1", None, 1)];
        let live = live_replicas(&id("a"), &leases, &mut seen, (t0, wall()));
        let after = Duration::from_secs(40);
        assert!(gone_replicas(&leases, &live, &seen, after, t0).is_empty());
        // b keeps renewing; c was released and never came back.
        let later = t0 + after;
        let leases = [lease("r-b", "9", Some("b"), 4), lease("r-c", "1", None, 1)];
        let live = live_replicas(&id("a"), &leases, &mut seen, (later, wall()));
        assert_eq!(
            gone_replicas(&leases, &live, &seen, after, later),
            [("r-c".to_string(), "1".to_string())]
        );
    }

    #[test]
    fn the_next_expiry_is_the_first_of_the_leases_others_hold() {
        let t0 = Instant::now();
        let a = id("a");
        let owners = BTreeMap::from([(ShardId(0), a.clone()), (ShardId(1), a.clone())]);
        let leases = BTreeMap::from([
            (ShardId(0), lease("s-0", "1", Some("b"), 4)),
            (ShardId(1), lease("s-1", "1", Some("a"), 4)),
            (ShardId(2), lease("s-2", "1", None, 1)),
        ]);
        let mut seen = Observations::default();
        // Nothing decided yet: no expiry is known.
        assert_eq!(seen.next_expiry(&a, leases.values(), t0), None);
        plan(&a, &owners, &leases, &mut seen, t0);
        // b's shard 0 expires 4 s after it was seen; a's own and the free one never do.
        let expiry = t0 + Duration::from_secs(4);
        assert_eq!(seen.next_expiry(&a, leases.values(), t0), Some(expiry));
        // Waking then, a takes it; an expiry passed is no longer ahead.
        assert_eq!(
            plan(&a, &owners, &leases, &mut seen, expiry)[&ShardId(0)],
            ShardAction::Take
        );
        assert_eq!(seen.next_expiry(&a, leases.values(), expiry), None);
        // A record read since it was seen (renewed) is not judged by the old observation.
        let renewed = [lease("s-0", "2", Some("b"), 4)];
        assert_eq!(seen.next_expiry(&a, &renewed, t0), None);
        // Replica Leases: the earliest of the live ones.
        let mut seen = Observations::default();
        let replicas = [
            lease("r-b", "1", Some("b"), 4),
            lease("r-c", "1", Some("c"), 9),
        ];
        live_replicas(&a, &replicas, &mut seen, (t0, wall()));
        assert_eq!(seen.next_expiry(&a, &replicas, t0), Some(expiry));
    }

    #[test]
    fn shards_are_created_renewed_taken_released_or_waited_for() {
        let t0 = Instant::now();
        let (a, b) = (id("a"), id("b"));
        let owners = BTreeMap::from([
            (ShardId(0), a.clone()),
            (ShardId(1), a.clone()),
            (ShardId(2), a.clone()),
            (ShardId(3), b.clone()),
            (ShardId(4), a.clone()),
        ]);
        let leases = BTreeMap::from([
            (ShardId(1), lease("s-1", "1", Some("a"), 4)),
            (ShardId(2), lease("s-2", "1", None, 1)),
            (ShardId(3), lease("s-3", "1", Some("a"), 4)),
            (ShardId(4), lease("s-4", "1", Some("b"), 4)),
            // Shard 7 is beyond the shards configured now, and held.
            (ShardId(7), lease("s-7", "1", Some("a"), 4)),
        ]);
        let mut seen = Observations::default();
        let actions = plan(&a, &owners, &leases, &mut seen, t0);
        assert_eq!(
            actions,
            BTreeMap::from([
                (ShardId(0), ShardAction::Create),
                (ShardId(1), ShardAction::Renew),
                (ShardId(2), ShardAction::Take),
                (ShardId(3), ShardAction::Release),
                (ShardId(4), ShardAction::Wait { holder: "b".into() }),
                (ShardId(7), ShardAction::Release),
            ])
        );
        // b never released shard 4 nor renewed it: once its duration passed, a takes it.
        let later = t0 + Duration::from_secs(4);
        let actions = plan(&a, &owners, &leases, &mut seen, later);
        assert_eq!(actions[&ShardId(4)], ShardAction::Take);
        // b's view: shard 3 is owed to it but a still holds it; nothing of a's is b's to touch.
        let actions = plan(&b, &owners, &leases, &mut Observations::default(), t0);
        assert_eq!(
            actions,
            BTreeMap::from([
                (ShardId(3), ShardAction::Wait { holder: "a".into() }),
                (ShardId(4), ShardAction::Release),
            ])
        );
    }
}
