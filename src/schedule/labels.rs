//! The fleet's labels as an inverted index. A placement's label selector is worked out once over
//! the whole fleet, as a set of clusters, instead of once per cluster: at fleet scale selectors
//! are evaluated for every placement, and walking each cluster's label map dominated scheduling.

use crate::model::selector::{LabelSelector, Labels, SelectorOperator};
use std::collections::HashMap;

/// A set of fleet clusters, by index in `Fleet::clusters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterBits {
    words: Vec<u64>,
}

impl ClusterBits {
    /// No cluster of a fleet of `len`.
    pub fn empty(len: usize) -> Self {
        ClusterBits {
            words: vec![0; len.div_ceil(64)],
        }
    }

    /// Every cluster of a fleet of `len`.
    pub fn full(len: usize) -> Self {
        let mut bits = ClusterBits {
            words: vec![u64::MAX; len.div_ceil(64)],
        };
        bits.trim(len);
        bits
    }

    /// The clusters of a fleet of `len` at `indices`.
    pub fn from_indices(len: usize, indices: &[u32]) -> Self {
        let mut bits = Self::empty(len);
        for &i in indices {
            bits.insert(i as usize);
        }
        bits
    }

    /// Clears the bits past `len` in the last word, so that a complement stays in range.
    fn trim(&mut self, len: usize) {
        if !len.is_multiple_of(64) {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << (len % 64)) - 1;
            }
        }
    }

    pub fn contains(&self, index: usize) -> bool {
        self.words
            .get(index / 64)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    pub fn insert(&mut self, index: usize) {
        self.words[index / 64] |= 1 << (index % 64);
    }

    pub fn remove(&mut self, index: usize) {
        self.words[index / 64] &= !(1 << (index % 64));
    }

    pub fn intersect(&mut self, other: &ClusterBits) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }

    pub fn union(&mut self, other: &ClusterBits) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    pub fn subtract(&mut self, other: &ClusterBits) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !b;
        }
    }

    /// The clusters in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    w * 64 + bit
                })
            })
        })
    }
}

/// Which clusters carry each label key and each key=value pair. The member lists are sparse
/// (indices, ascending) so that the index grows with the number of labels, not with clusters ×
/// distinct values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelIndex {
    len: usize,
    keys: HashMap<String, KeyIndex>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct KeyIndex {
    any: Vec<u32>,
    values: HashMap<String, Vec<u32>>,
}

impl LabelIndex {
    /// Indexes the labels of each cluster, in fleet order.
    pub fn new<'a>(clusters: impl IntoIterator<Item = &'a Labels>) -> Self {
        let mut index = LabelIndex::default();
        for (i, labels) in clusters.into_iter().enumerate() {
            index.len = i + 1;
            for (k, v) in labels {
                let key = index.keys.entry(k.clone()).or_default();
                key.any.push(i as u32);
                key.values.entry(v.clone()).or_default().push(i as u32);
            }
        }
        index
    }

    /// The clusters `selector` matches, with the rules of [`LabelSelector::matches`].
    pub fn select(&self, selector: &LabelSelector) -> ClusterBits {
        let mut out = ClusterBits::full(self.len);
        for (k, v) in &selector.match_labels {
            out.intersect(&self.with_values(k, std::slice::from_ref(v)));
        }
        for r in &selector.match_expressions {
            match r.operator {
                SelectorOperator::In => out.intersect(&self.with_values(&r.key, &r.values)),
                SelectorOperator::NotIn => out.subtract(&self.with_values(&r.key, &r.values)),
                SelectorOperator::Exists => out.intersect(&self.with_key(&r.key)),
                SelectorOperator::DoesNotExist => out.subtract(&self.with_key(&r.key)),
            }
        }
        out
    }

    fn with_key(&self, key: &str) -> ClusterBits {
        let indices = self.keys.get(key).map(|k| k.any.as_slice()).unwrap_or(&[]);
        ClusterBits::from_indices(self.len, indices)
    }

    fn with_values(&self, key: &str, values: &[String]) -> ClusterBits {
        let mut out = ClusterBits::empty(self.len);
        let Some(k) = self.keys.get(key) else {
            return out;
        };
        for v in values {
            for &i in k.values.get(v).map(Vec::as_slice).unwrap_or(&[]) {
                out.words[i as usize / 64] |= 1 << (i % 64);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::selector::testing::{labels, req};

    /// The index agrees with `LabelSelector::matches` for every operator, on a fleet that spans
    /// more than one word and ends mid-word (so complements must not leak past the end).
    #[test]
    fn select_agrees_with_matches() {
        use SelectorOperator::*;
        let envs = ["prod", "staging", "dev"];
        let fleet: Vec<Labels> = (0..150)
            .map(|i| {
                let mut l = labels(&[("env", envs[i % 3])]);
                if i % 4 == 0 {
                    l.insert("gpu".into(), "true".into());
                }
                if i % 5 == 0 {
                    l.insert("region".into(), format!("r{}", i % 7));
                }
                l
            })
            .collect();
        let index = LabelIndex::new(&fleet);
        let selectors = [
            LabelSelector::default(),
            LabelSelector {
                match_labels: labels(&[("env", "prod")]),
                match_expressions: vec![],
            },
            LabelSelector {
                match_labels: labels(&[("env", "prod"), ("gpu", "true")]),
                match_expressions: vec![],
            },
            LabelSelector {
                match_labels: labels(&[("missing", "x")]),
                match_expressions: vec![],
            },
            LabelSelector {
                match_labels: Default::default(),
                match_expressions: vec![req("region", In, &["r0", "r3", "nowhere"])],
            },
            LabelSelector {
                match_labels: Default::default(),
                match_expressions: vec![req("region", NotIn, &["r0"])],
            },
            LabelSelector {
                match_labels: Default::default(),
                match_expressions: vec![req("missing", NotIn, &["r0"])],
            },
            LabelSelector {
                match_labels: Default::default(),
                match_expressions: vec![req("gpu", Exists, &[]), req("env", NotIn, &["dev"])],
            },
            LabelSelector {
                match_labels: labels(&[("env", "staging")]),
                match_expressions: vec![req("gpu", DoesNotExist, &[])],
            },
            LabelSelector {
                match_labels: Default::default(),
                match_expressions: vec![req("missing", DoesNotExist, &[])],
            },
        ];
        for s in &selectors {
            let bits = index.select(s);
            for (i, l) in fleet.iter().enumerate() {
                assert_eq!(bits.contains(i), s.matches(l), "cluster {i}, {s:?}");
            }
            assert!(!bits.contains(fleet.len()), "{s:?} leaks past the fleet");
        }
    }

    #[test]
    fn sets_combine_and_list_their_clusters_in_order() {
        let len = 130;
        let mut a = ClusterBits::from_indices(len, &[0, 5, 64, 127, 129]);
        assert_eq!(a.iter().collect::<Vec<_>>(), [0, 5, 64, 127, 129]);
        let b = ClusterBits::from_indices(len, &[5, 6, 129]);
        let mut union = a.clone();
        union.union(&b);
        assert_eq!(union.iter().collect::<Vec<_>>(), [0, 5, 6, 64, 127, 129]);
        let mut both = a.clone();
        both.intersect(&b);
        assert_eq!(both.iter().collect::<Vec<_>>(), [5, 129]);
        a.subtract(&b);
        a.insert(1);
        a.remove(64);
        assert_eq!(a.iter().collect::<Vec<_>>(), [0, 1, 127]);
        assert_eq!(ClusterBits::full(len).iter().count(), len);
        assert_eq!(ClusterBits::empty(len).iter().next(), None);
    }

    #[test]
    fn an_empty_fleet_selects_nothing() {
        let index = LabelIndex::new(std::iter::empty());
        assert!(!index.select(&LabelSelector::default()).contains(0));
    }
}
