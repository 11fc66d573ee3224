//! The score plugins (preferred cluster affinity, by label and by property sorter) and
//! KubeFleet's ranking of the scored clusters.

use super::cache::Sorted;
use super::filter::{invalid_property, labels_match, Selectors};
use super::{CycleError, Input};
use crate::model::placement::SortOrder;
use crate::schedule::fleet::Cluster;
use std::cmp::Ordering;

/// A cluster that passed the filters, with its scores, as one key that orders as KubeFleet
/// ranks: `(topology spread, affinity, obsolete binding)`, then the lexicographically larger
/// name (the fleet is sorted by name, so the later position), larger first. Cycles rank
/// thousands of clusters, and one integer compares faster than the tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Scored(u128);

/// Flipping the sign bit makes a two's complement value order as an unsigned one.
const SIGN: u32 = 0x8000_0000;

impl Scored {
    pub(super) fn new(position: usize, topology: i32, affinity: i32, obsolete: bool) -> Self {
        let ordered = |v: i32| u128::from(v as u32 ^ SIGN);
        Scored(
            ordered(topology) << 96
                | ordered(affinity) << 64
                | u128::from(obsolete) << 32
                | position as u32 as u128,
        )
    }

    pub(super) fn position(self) -> usize {
        self.0 as u32 as usize
    }

    pub(super) fn topology(self) -> i32 {
        ((self.0 >> 96) as u32 ^ SIGN) as i32
    }

    pub(super) fn affinity(self) -> i32 {
        ((self.0 >> 64) as u32 ^ SIGN) as i32
    }

    /// Best first.
    pub(super) fn rank(a: &Scored, b: &Scored) -> Ordering {
        b.cmp(a)
    }
}

/// Preferred affinity: full weight for a matching term, or the weight interpolated over the
/// property's range in the whole fleet, rounded half away from zero (worked out per run:
/// [`super::cache::Cache::sorted`]).
pub(super) fn affinity_score(
    input: &Input,
    selectors: &Selectors,
    index: usize,
    c: &Cluster,
) -> Result<i32, CycleError> {
    let Some(ca) = input
        .policy
        .affinity
        .as_ref()
        .and_then(|a| a.cluster_affinity.as_ref())
    else {
        return Ok(0);
    };
    let mut total = 0i32;
    let terms = ca
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .zip(&selectors.preferred)
        .zip(&selectors.sorters);
    for ((pref, bits), sorter_values) in terms {
        if pref.weight == 0 || !labels_match(bits, index) {
            continue;
        }
        let term = &pref.preference;
        let Some(sorter) = &term.property_sorter else {
            total += pref.weight;
            continue;
        };
        let Some(scores) = sorter_values else {
            continue;
        };
        total += match scores[index] {
            Sorted::Missing => continue,
            Sorted::Score(s) => s,
            Sorted::Invalid => return Err(invalid_property(c, &sorter.name)),
        };
    }
    Ok(total)
}

/// KubeFleet's `interpolateWeightFor`: float64 ratio, Go `math.Round` (half away from zero).
pub fn interpolate(v: f64, extremes: Option<(f64, f64)>, order: SortOrder, weight: i32) -> i32 {
    let Some((min, max)) = extremes else {
        return 0;
    };
    if max == min {
        return 0;
    }
    let ratio = (v - min) / (max - min);
    let w = f64::from(weight);
    let score = match order {
        SortOrder::Descending => ratio * w,
        SortOrder::Ascending => (1.0 - ratio) * w,
    };
    score.round() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scored_clusters_rank_as_kubefleet_ranks_and_keep_their_scores() {
        let clusters = [
            (7, -1000, 40, false),
            (3, 0, -20, true),
            (9, 0, -20, false),
            (2, 0, -20, false),
            (5, -1, i32::MAX, true),
            (4, i32::MIN, i32::MIN, false),
            (8, 1, 0, false),
        ];
        let mut keys: Vec<Scored> = clusters
            .iter()
            .map(|&(p, t, a, o)| Scored::new(p, t, a, o))
            .collect();
        keys.sort_by(Scored::rank);
        let mut tuples = clusters.to_vec();
        tuples.sort_by_key(|&(p, t, a, o)| std::cmp::Reverse((t, a, o, p)));
        let back: Vec<(usize, i32, i32, bool)> = keys
            .iter()
            .map(|k| {
                (
                    k.position(),
                    k.topology(),
                    k.affinity(),
                    (k.0 >> 32) as u32 == 1,
                )
            })
            .collect();
        assert_eq!(back, tuples);
    }

    #[test]
    pub(super) fn interpolation_matches_the_api_docs_example() {
        // Range [10, 100], weight 100, value 20: 11 Descending, 89 Ascending.
        assert_eq!(
            interpolate(20.0, Some((10.0, 100.0)), SortOrder::Descending, 100),
            11
        );
        assert_eq!(
            interpolate(20.0, Some((10.0, 100.0)), SortOrder::Ascending, 100),
            89
        );
        assert_eq!(
            interpolate(5.0, Some((5.0, 5.0)), SortOrder::Descending, 100),
            0
        );
        assert_eq!(interpolate(5.0, None, SortOrder::Descending, 100), 0);
        // Half away from zero, negative weights too: 0.5 * -5 = -2.5 rounds to -3.
        assert_eq!(
            interpolate(15.0, Some((10.0, 20.0)), SortOrder::Descending, -5),
            -3
        );
        assert_eq!(
            interpolate(15.0, Some((10.0, 20.0)), SortOrder::Descending, 5),
            3
        );
    }
}
