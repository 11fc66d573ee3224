//! Snapshot indices over time (docs/guides/concepts.md): a new index only when the hash changes, indices
//! only grow, and at most `revisionHistoryLimit` records are kept — never one still in use.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub index: u64,
    pub hash: String,
    /// The commit the snapshot was first taken at.
    pub commit: String,
}

/// One placement's resource or policy snapshot history, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub records: Vec<SnapshotRecord>,
}

/// The outcome of offering a hash to a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advance {
    /// The index the content has now (new or the latest).
    pub index: u64,
    /// True when a new snapshot was taken.
    pub created: bool,
    pub history: History,
    /// Indices dropped by the history limit.
    pub dropped: Vec<u64>,
}

impl History {
    pub fn latest(&self) -> Option<&SnapshotRecord> {
        self.records.last()
    }

    /// Takes back a snapshot known from elsewhere (a member's record of what a run delivered,
    /// when the state was lost), unless its index is known: later indices follow it, so that
    /// indices still only grow.
    pub fn remember(&mut self, index: u64, hash: &str, commit: &str) {
        if self.records.iter().any(|r| r.index == index) {
            return;
        }
        let at = self.records.partition_point(|r| r.index < index);
        self.records.insert(
            at,
            SnapshotRecord {
                index,
                hash: hash.to_string(),
                commit: commit.to_string(),
            },
        );
    }

    /// Offers the content hash of `commit`. `limit` is the placement's `revisionHistoryLimit`;
    /// `in_use` are indices still referenced by bindings or update runs, which are never dropped.
    pub fn advance(&self, hash: &str, commit: &str, limit: u32, in_use: &BTreeSet<u64>) -> Advance {
        if let Some(latest) = self.latest() {
            if latest.hash == hash {
                return Advance {
                    index: latest.index,
                    created: false,
                    history: self.clone(),
                    dropped: vec![],
                };
            }
        }
        let index = self.latest().map_or(0, |l| l.index + 1);
        let mut records = self.records.clone();
        records.push(SnapshotRecord {
            index,
            hash: hash.to_string(),
            commit: commit.to_string(),
        });
        let limit = limit.max(1) as usize;
        let mut dropped = Vec::new();
        // Oldest first; the new latest is never dropped.
        let mut i = 0;
        while records.len() > limit && i + 1 < records.len() {
            if in_use.contains(&records[i].index) {
                i += 1;
            } else {
                dropped.push(records.remove(i).index);
            }
        }
        Advance {
            index,
            created: true,
            history: History { records },
            dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indices(h: &History) -> Vec<u64> {
        h.records.iter().map(|r| r.index).collect()
    }

    #[test]
    fn first_snapshot_is_zero_and_same_hash_keeps_index() {
        let h = History::default();
        let a = h.advance("h1", "c1", 10, &BTreeSet::new());
        assert_eq!((a.index, a.created), (0, true));
        let b = a.history.advance("h1", "c2", 10, &BTreeSet::new());
        assert_eq!((b.index, b.created), (0, false));
        assert_eq!(b.history.records[0].commit, "c1");
    }

    #[test]
    fn reverting_content_takes_a_new_index() {
        let mut h = History::default();
        for (hash, want) in [("a", 0), ("b", 1), ("a", 2)] {
            let adv = h.advance(hash, "c", 10, &BTreeSet::new());
            assert_eq!(adv.index, want);
            h = adv.history;
        }
    }

    #[test]
    fn limit_drops_oldest_but_not_in_use() {
        let mut h = History::default();
        for i in 0..5 {
            h = h
                .advance(&format!("h{i}"), "c", 3, &BTreeSet::new())
                .history;
        }
        assert_eq!(indices(&h), vec![2, 3, 4]);
        let in_use = BTreeSet::from([2]);
        let adv = h.advance("h5", "c", 3, &in_use);
        assert_eq!(indices(&adv.history), vec![2, 4, 5]);
        assert_eq!(adv.dropped, vec![3]);
        let adv = adv.history.advance("h6", "c", 1, &BTreeSet::from([2, 4]));
        assert_eq!(indices(&adv.history), vec![2, 4, 6]);
    }
}
