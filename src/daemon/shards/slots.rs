//! The leader's bound on the delivery orders outstanding at each owner. An order's answer is
//! awaited from the order's creation, but an owner carries out only `--parallel-members`
//! deliveries at once, across every shard it holds: unbounded, a large step's orders would wait
//! at the owner past their deadline, fail, and be ordered again. Bounded per owner (not per
//! shard: an owner holds several, and how many depends on `--shards` and the replicas), an
//! order waits behind at most [`ROUNDS`] − 1 rounds of the owner's deliveries. More than one
//! round is out because an order's answer takes a round trip through the hosting cluster (the
//! report written, seen, taken, the next order written and seen): with one round only, an
//! owner whose deliveries are quick (a re-check that writes nothing) would wait on that trip
//! more than it works.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{ReplicaId, ShardId};

/// Rounds of an owner's `--parallel-members` deliveries that may be outstanding at once.
pub const ROUNDS: usize = 8;

/// Whose slots an order takes: its shard's owner's, or the shard's own while no claim of its
/// record was seen.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Holder {
    Owner(ReplicaId),
    Unclaimed(ShardId),
}

pub struct OwnerSlots {
    per_owner: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    owners: HashMap<ShardId, ReplicaId>,
    slots: HashMap<Holder, Arc<Semaphore>>,
}

impl OwnerSlots {
    /// `parallel` is the owners' `--parallel-members`.
    pub fn new(parallel: usize) -> OwnerSlots {
        OwnerSlots {
            per_owner: ROUNDS * parallel.max(1),
            inner: Mutex::default(),
        }
    }

    /// `shard`'s record is claimed by `owner` now: its next orders take `owner`'s slots.
    /// Orders already out keep the slots they took until they are answered.
    pub fn owned_by(&self, shard: ShardId, owner: ReplicaId) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.owners.insert(shard, owner);
    }

    /// Waits for a slot at `shard`'s owner; the slot is freed when the permit is dropped.
    pub async fn acquire(&self, shard: ShardId) -> OwnedSemaphorePermit {
        let slots = {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let holder = match inner.owners.get(&shard) {
                Some(owner) => Holder::Owner(owner.clone()),
                None => Holder::Unclaimed(shard),
            };
            let per_owner = self.per_owner;
            inner
                .slots
                .entry(holder)
                .or_insert_with(|| Arc::new(Semaphore::new(per_owner)))
                .clone()
        };
        slots.acquire_owned().await.expect("never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const WAIT: Duration = Duration::from_millis(50);

    async fn takes(slots: &OwnerSlots, shard: u32) -> Option<OwnedSemaphorePermit> {
        tokio::time::timeout(WAIT, slots.acquire(ShardId(shard)))
            .await
            .ok()
    }

    /// Two shards of one owner share its bound; another owner's shard does not wait; an
    /// answered order makes room.
    #[test]
    fn an_owner_may_have_rounds_of_its_parallel_deliveries_outstanding() {
        assert_eq!(OwnerSlots::new(16).per_owner, ROUNDS * 16);
        assert_eq!(
            OwnerSlots::new(0).per_owner,
            ROUNDS,
            "at least one delivery at a time"
        );
    }

    #[tokio::test]
    async fn an_owners_outstanding_orders_are_bounded_across_its_shards() {
        let slots = OwnerSlots {
            per_owner: 2,
            inner: Mutex::default(),
        };
        slots.owned_by(ShardId(1), ReplicaId::from("r1"));
        slots.owned_by(ShardId(2), ReplicaId::from("r1"));
        slots.owned_by(ShardId(3), ReplicaId::from("r2"));
        let first = takes(&slots, 1).await.expect("a first order");
        let _second = takes(&slots, 2)
            .await
            .expect("a second order, of another shard");
        assert!(
            takes(&slots, 1).await.is_none(),
            "a third order at r1 went out"
        );
        assert!(
            takes(&slots, 2).await.is_none(),
            "a third order at r1 went out"
        );
        assert!(takes(&slots, 3).await.is_some(), "r2's shard waited for r1");
        drop(first);
        assert!(takes(&slots, 2).await.is_some(), "an answer made no room");
    }

    /// A shard not claimed yet is bounded on its own; once claimed by a replica, its orders
    /// count at that replica, with the other shards it holds.
    #[tokio::test]
    async fn a_shard_counts_at_its_owner_once_claimed() {
        let slots = OwnerSlots {
            per_owner: 2,
            inner: Mutex::default(),
        };
        let _a = takes(&slots, 5).await.unwrap();
        let _b = takes(&slots, 5).await.unwrap();
        assert!(
            takes(&slots, 5).await.is_none(),
            "unclaimed shard 5 unbounded"
        );
        assert!(
            takes(&slots, 6).await.is_some(),
            "shard 6 waited for shard 5"
        );
        slots.owned_by(ShardId(7), ReplicaId::from("r3"));
        let _c = takes(&slots, 7).await.unwrap();
        let _d = takes(&slots, 7).await.unwrap();
        slots.owned_by(ShardId(5), ReplicaId::from("r3"));
        assert!(
            takes(&slots, 5).await.is_none(),
            "shard 5 not counted at r3"
        );
        slots.owned_by(ShardId(5), ReplicaId::from("r4"));
        assert!(
            takes(&slots, 5).await.is_some(),
            "shard 5 moved, still counted at r3"
        );
    }
}
