//! Member shards over the live replicas of `gitfleet run --state kubernetes --shards N`, held
//! through Leases in the hosting cluster: Kubernetes is the distributed engine, no consensus of
//! gitfleet's own (docs/architecture.md, "Sharding").
//!
//! Every replica holds a replica Lease of its own, renewed every retry period: the replicas
//! whose Lease changed within its duration are the live ones ([`ownership::live_replicas`]).
//! From that set every replica computes the same owner for every shard ([`assign::owners`]),
//! and holds the shard Leases it owns with the leader election's rules: a Lease is taken only
//! when free or unrenewed for its duration, every write carries the resourceVersion read, and a
//! replica stops acting for a shard it could not renew within the renew deadline, before
//! another may take it. A shard that moves is released by its old owner after it stopped acting
//! for it, so no member is acted for by two replicas. Each shard's record (a ConfigMap) is
//! claimed by its owner when it takes the shard; a deposed owner's later write to it is refused
//! by the API server ([`claims`]).

pub mod assign;
pub mod claims;
pub mod executor;
pub mod leases;
pub mod orders;
pub mod ownership;
pub mod remote;
pub mod renderings;
pub mod slots;

use std::fmt;

/// A shard: members are divided among `--shards` of them by a digest of their name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ShardId(pub u32);

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard {}", self.0)
    }
}

/// A replica, by its `--identity`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ReplicaId(String);

impl ReplicaId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ReplicaId {
    fn from(s: &str) -> ReplicaId {
        ReplicaId(s.to_string())
    }
}

impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The names of the objects of one group of replicas (`--lease-name`), in the hosting
/// cluster's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub prefix: String,
}

/// The label that marks every Lease of a group of replicas (its value: the `--lease-name`).
pub const GROUP_LABEL: &str = "gitfleet.io/shards-of";
/// The label that says what a Lease of the group is: `replica` or `shard`.
pub const ROLE_LABEL: &str = "gitfleet.io/lease-role";

impl Names {
    /// A replica's Lease: its identity made a valid object name, with a digest of the identity
    /// so that two identities never share one.
    pub fn replica_lease(&self, replica: &ReplicaId) -> String {
        use sha2::Digest;
        let clean: String = replica
            .as_str()
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9' | '-') => c,
                _ => '-',
            })
            .take(32)
            .collect();
        let digest = sha2::Sha256::digest(replica.as_str().as_bytes());
        let tag: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        format!("{}-replica-{}-{tag}", self.prefix, clean.trim_matches('-'))
    }

    pub fn shard_lease(&self, shard: ShardId) -> String {
        format!("{}-shard-{}", self.prefix, shard.0)
    }

    /// A shard's record, claimed by each owner as it takes the shard.
    pub fn shard_record(&self, shard: ShardId) -> String {
        format!("{}-shard-{}-record", self.prefix, shard.0)
    }

    /// The shard a record's name stands for, if it is one of this group's.
    pub fn shard_of_record(&self, name: &str) -> Option<ShardId> {
        self.shard_of_lease(name.strip_suffix("-record")?)
    }

    /// The shard a shard Lease's name stands for, if it is one of this group's.
    pub fn shard_of_lease(&self, name: &str) -> Option<ShardId> {
        let n = name.strip_prefix(&self.prefix)?.strip_prefix("-shard-")?;
        n.parse().ok().map(ShardId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_valid_and_distinct_for_any_identity() {
        let names = Names {
            prefix: "gitfleet".into(),
        };
        let a = names.replica_lease(&ReplicaId::from("gitfleet-7d9f-abcde"));
        let b = names.replica_lease(&ReplicaId::from("Gitfleet_7d9f.abcde"));
        assert!(
            a.starts_with("gitfleet-replica-gitfleet-7d9f-abcde-"),
            "{a}"
        );
        assert_ne!(a, b);
        let valid = |n: &str| {
            n.len() <= 63
                && n.chars().all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-'))
                && !n.starts_with('-')
                && !n.ends_with('-')
        };
        assert!(valid(&a) && valid(&b), "{a} {b}");
        let long = names.replica_lease(&ReplicaId::from(&*"x".repeat(300)));
        assert!(valid(&long), "{long}");
        assert_eq!(names.shard_lease(ShardId(12)), "gitfleet-shard-12");
        assert_eq!(names.shard_of_lease("gitfleet-shard-12"), Some(ShardId(12)));
        assert_eq!(names.shard_of_lease("gitfleet-shard-12-record"), None);
        assert_eq!(
            names.shard_of_record(&names.shard_record(ShardId(12))),
            Some(ShardId(12))
        );
        assert_eq!(names.shard_of_record("gitfleet-shard-12"), None);
        assert_eq!(names.shard_of_lease("other-shard-1"), None);
    }
}
