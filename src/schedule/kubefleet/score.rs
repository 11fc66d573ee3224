//! The score plugins: preferred cluster affinity, by label and by property sorter.

use super::cache::Prop;
use super::filter::{invalid_property, labels_match, Selectors};
use super::{CycleError, Input};
use crate::model::placement::SortOrder;
use crate::schedule::fleet::Cluster;

/// Preferred affinity: full weight for a matching term, or the weight interpolated over the
/// property's range in the whole fleet, rounded half away from zero.
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
        let Some((column, extremes)) = sorter_values else {
            continue;
        };
        let v = match column[index] {
            Prop::Missing => continue,
            Prop::Value(v) => v,
            Prop::Invalid => return Err(invalid_property(c, &sorter.name)),
        };
        total += interpolate(v, *extremes, sorter.sort_order, pref.weight);
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
