//! The words of an OCM placement's decisions for the clusters that passed its filters: the
//! total score, the rank and each prioritizer's part. Every feasible cluster has such a
//! decision, each worded differently, so they are worded when shown, from one table that a
//! placement's decisions share: over a large fleet, writing each out would be most of the work
//! of scheduling an OCM placement.

use std::cmp::Reverse;
use std::fmt::{self, Write as _};
use std::sync::Arc;

/// A placement's feasible clusters in rank order, with their scores.
#[derive(Debug)]
pub struct Ranking {
    /// OCM's `numberOfClusters` as the decisions quote it (all feasible clusters when unset).
    k: usize,
    /// The ranks below this one are chosen.
    chosen: usize,
    /// Why the chosen clusters are not written to PlacementDecisions (a misconfiguration found
    /// after scoring); `None` when they are.
    unwritten: Option<String>,
    /// Each prioritizer's name, as the decisions show it, and weight.
    prioritizers: Vec<(String, i32)>,
    /// Rank → position in the feasible clusters (the order the scores below are in).
    order: Vec<u32>,
    totals: Vec<i64>,
    /// Per prioritizer, its score of each feasible cluster.
    scores: Vec<Column>,
    /// The chosen ranks that rely on a toleration with `tolerationSeconds`: when the earliest
    /// runs out and its taint, worded.
    tolerated: Vec<(u32, i128, String)>,
}

/// What scoring gave a placement's feasible clusters.
pub(super) struct Scores {
    /// Each prioritizer's name, as the decisions show it, and weight.
    pub prioritizers: Vec<(String, i32)>,
    /// Rank → feasible position (the order of `totals` and `scores`), best first.
    pub order: Vec<u32>,
    pub totals: Vec<i64>,
    /// Per prioritizer, its score of each feasible cluster.
    pub scores: Vec<Column>,
}

/// One prioritizer's scores of the feasible clusters, by position: 0 where it has no data,
/// and those positions listed. Most prioritizers have data for every cluster, so the list is
/// short or empty, and a score takes the 8 bytes of an `i64` (an `Option<i64>` takes 16; a
/// placement's scores are kept with its decisions).
#[derive(Debug, Default)]
pub(super) struct Column {
    values: Vec<i64>,
    no_data: Vec<u32>,
}

impl Column {
    /// The score at `at`, `None` without data.
    pub(super) fn get(&self, at: usize) -> Option<i64> {
        let none = self.no_data.binary_search(&(at as u32)).is_ok();
        (!none).then(|| self.values[at])
    }

    /// The score at `at`, 0 without data.
    pub(super) fn value(&self, at: usize) -> i64 {
        self.values[at]
    }
}

impl FromIterator<Option<i64>> for Column {
    fn from_iter<I: IntoIterator<Item = Option<i64>>>(scores: I) -> Self {
        let scores = scores.into_iter();
        let mut column = Column {
            values: Vec::with_capacity(scores.size_hint().0),
            no_data: Vec::new(),
        };
        for score in scores {
            if score.is_none() {
                column.no_data.push(column.values.len() as u32);
            }
            column.values.push(score.unwrap_or(0));
        }
        column
    }
}

/// Positions of `totals` best first: total descending, then position ascending. A placement's
/// totals lie close together (a prioritizer scores at most 100 either way, times a small
/// weight), so they are counted into one slot per value, in one pass; spread wider, sorted.
pub(super) fn best_first(totals: &[i64]) -> Vec<u32> {
    let (Some(&low), Some(&high)) = (totals.iter().min(), totals.iter().max()) else {
        return Vec::new();
    };
    let span = high.abs_diff(low) as usize;
    if span > 4 * totals.len() + 1024 {
        let mut keyed: Vec<(Reverse<i64>, u32)> = (totals.iter())
            .enumerate()
            .map(|(at, &t)| (Reverse(t), at as u32))
            .collect();
        keyed.sort_unstable();
        return keyed.into_iter().map(|(_, at)| at).collect();
    }
    // Slot 0 holds the highest total. Counted, then each slot's first place in the order.
    let slot = |t: i64| high.abs_diff(t) as usize;
    let mut starts = vec![0u32; span + 1];
    for &t in totals {
        starts[slot(t)] += 1;
    }
    let mut next = 0;
    for s in &mut starts {
        (*s, next) = (next, next + *s);
    }
    let mut order = vec![0u32; totals.len()];
    for (at, &t) in totals.iter().enumerate() {
        let start = &mut starts[slot(t)];
        order[*start as usize] = at as u32;
        *start += 1;
    }
    order
}

/// What a feasible cluster's decision says, taken from its placement's [`Ranking`].
#[derive(Clone)]
pub struct RankedReason {
    ranking: Arc<Ranking>,
    rank: u32,
}

/// How the decision at a rank begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    NotTop,
    Selected,
    NotWritten,
}

impl Ranking {
    /// The first `chosen` ranks are chosen; `tolerated` gives, by feasible position, the expiry
    /// and the worded taint of a timed toleration a cluster relies on.
    pub(super) fn new(
        scores: Scores,
        k: usize,
        chosen: usize,
        unwritten: Option<String>,
        tolerated: impl Fn(u32) -> Option<(i128, String)>,
    ) -> Arc<Ranking> {
        let Scores {
            prioritizers,
            order,
            totals,
            scores,
        } = scores;
        let tolerated = order[..chosen]
            .iter()
            .enumerate()
            .filter_map(|(rank, &at)| tolerated(at).map(|(until, t)| (rank as u32, until, t)))
            .collect();
        Arc::new(Ranking {
            k,
            chosen,
            unwritten,
            prioritizers,
            order,
            totals,
            scores,
            tolerated,
        })
    }

    /// The feasible position of each rank, best first.
    pub(super) fn order(&self) -> &[u32] {
        &self.order
    }

    /// The reason of the decision at `rank`.
    pub(super) fn reason(self: &Arc<Self>, rank: usize) -> RankedReason {
        RankedReason {
            ranking: self.clone(),
            rank: rank as u32,
        }
    }

    fn standing(&self, rank: usize) -> Standing {
        match (rank < self.chosen, self.unwritten.is_none()) {
            (false, _) => Standing::NotTop,
            (true, true) => Standing::Selected,
            (true, false) => Standing::NotWritten,
        }
    }

    fn tolerated_at(&self, rank: usize) -> Option<&(u32, i128, String)> {
        let at = self
            .tolerated
            .binary_search_by_key(&(rank as u32), |t| t.0)
            .ok()?;
        Some(&self.tolerated[at])
    }

    fn write(&self, rank: usize, out: &mut String) {
        let at = self.order[rank] as usize;
        let standing = self.standing(rank);
        match standing {
            Standing::NotTop => {
                let _ = write!(
                    out,
                    "does not score high enough: not in the top {} (score ",
                    self.k
                );
            }
            Standing::Selected => out.push_str("selected: score "),
            Standing::NotWritten => {
                let _ = write!(
                    out,
                    "not placed: the placement is misconfigured ({}), so no PlacementDecision is written (score ",
                    self.unwritten.as_deref().unwrap_or_default()
                );
            }
        }
        push_int(out, self.totals[at]);
        out.push_str(", rank ");
        push_int(out, rank as i64 + 1);
        out.push_str(" of ");
        push_int(out, self.order.len() as i64);
        out.push_str(if standing == Standing::Selected {
            " ("
        } else {
            "; "
        });
        if self.prioritizers.is_empty() {
            out.push_str("no prioritizer");
        }
        for (p, ((name, weight), scores)) in self.prioritizers.iter().zip(&self.scores).enumerate()
        {
            if p > 0 {
                out.push_str(" + ");
            }
            out.push_str(name);
            out.push(' ');
            let score = scores.get(at);
            push_int(out, score.unwrap_or(0));
            out.push('×');
            push_int(out, i64::from(*weight));
            if score.is_none() {
                out.push_str(" (no data)");
            }
        }
        out.push(')');
        if let Some((_, until, taint)) = self.tolerated_at(rank) {
            let _ = write!(
                out,
                "; taint {taint} is tolerated until {}",
                crate::timestamp::format_unix_nanos(*until)
            );
        }
    }

    /// Whether the decisions at `rank` here and at `other_rank` in `other` are made of the
    /// same parts (and so say the same).
    fn same_parts(&self, rank: usize, other: &Ranking, other_rank: usize) -> bool {
        let (at, other_at) = (self.order[rank] as usize, other.order[other_rank] as usize);
        let standing = self.standing(rank);
        rank == other_rank
            && standing == other.standing(other_rank)
            && match standing {
                Standing::NotTop => self.k == other.k,
                Standing::Selected => true,
                Standing::NotWritten => self.unwritten == other.unwritten,
            }
            && self.order.len() == other.order.len()
            && self.totals[at] == other.totals[other_at]
            && self.prioritizers == other.prioritizers
            && self
                .scores
                .iter()
                .zip(&other.scores)
                .all(|(a, b)| a.get(at) == b.get(other_at))
            && self.tolerated_at(rank).map(|t| (t.1, &t.2))
                == other.tolerated_at(other_rank).map(|t| (t.1, &t.2))
    }
}

impl RankedReason {
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(160);
        self.ranking.write(self.rank as usize, &mut out);
        out
    }
}

/// Equal when they say the same: decisions of one ranking by rank, others part by part (the
/// daemon compares each look's schedules with the last), and by their words when the parts
/// differ.
impl PartialEq for RankedReason {
    fn eq(&self, other: &Self) -> bool {
        if Arc::ptr_eq(&self.ranking, &other.ranking) {
            return self.rank == other.rank;
        }
        let (rank, other_rank) = (self.rank as usize, other.rank as usize);
        self.ranking.same_parts(rank, &other.ranking, other_rank) || self.text() == other.text()
    }
}

impl Eq for RankedReason {}

impl fmt::Debug for RankedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text(), f)
    }
}

/// Appends a decimal integer without going through `fmt` (a placement's decisions are worded
/// together when its schedule is written out).
fn push_int(out: &mut String, value: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = value.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if value < 0 {
        out.push('-');
    }
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranking(unwritten: Option<&str>, tolerated: bool) -> Arc<Ranking> {
        // Feasible positions 0..3 ranked 2, 0, 1; two chosen of k = 2.
        let scores = Scores {
            prioritizers: vec![("Balance".into(), 1), ("AddOn/usage/cpu".into(), 2)],
            order: vec![2, 0, 1],
            totals: vec![150, 100, -20],
            scores: vec![
                [Some(100), Some(60), Some(-20)].into_iter().collect(),
                [Some(0), None, Some(25)].into_iter().collect(),
            ],
        };
        Ranking::new(scores, 2, 2, unwritten.map(str::to_string), |at| {
            (tolerated && at == 0).then(|| (1_000_000_000, "dedicated=gpu:NoSelect".into()))
        })
    }

    #[test]
    fn decisions_are_worded_by_rank() {
        let r = ranking(None, true);
        let words: Vec<String> = (0..3).map(|rank| r.reason(rank).text()).collect();
        assert_eq!(
            words,
            [
                "selected: score -20, rank 1 of 3 (Balance -20×1 + AddOn/usage/cpu 25×2)",
                "selected: score 150, rank 2 of 3 (Balance 100×1 + AddOn/usage/cpu 0×2); taint dedicated=gpu:NoSelect is tolerated until 1970-01-01T00:00:01Z",
                "does not score high enough: not in the top 2 (score 100, rank 3 of 3; Balance 60×1 + AddOn/usage/cpu 0×2 (no data))",
            ]
        );
        let unwritten = ranking(Some(":bad groups"), false);
        assert_eq!(
            unwritten.reason(0).text(),
            "not placed: the placement is misconfigured (:bad groups), so no PlacementDecision is written (score -20, rank 1 of 3; Balance -20×1 + AddOn/usage/cpu 25×2)"
        );
        let scores = Scores {
            prioritizers: vec![],
            order: vec![0],
            totals: vec![0],
            scores: vec![],
        };
        let none = Ranking::new(scores, 1, 1, None, |_| None);
        assert_eq!(
            none.reason(0).text(),
            "selected: score 0, rank 1 of 1 (no prioritizer)"
        );
    }

    #[test]
    fn reasons_are_equal_when_they_say_the_same() {
        let (a, b) = (ranking(None, false), ranking(None, false));
        assert_eq!(a.reason(1), a.reason(1));
        assert_ne!(a.reason(1), a.reason(2));
        // Another ranking with the same parts.
        assert_eq!(a.reason(1), b.reason(1));
        // A part that differs makes other words, except where the decision does not show it.
        let tolerated = ranking(None, true);
        assert_ne!(a.reason(1), tolerated.reason(1));
        assert_eq!(a.reason(2), tolerated.reason(2));
        let unwritten = ranking(Some(":bad"), false);
        assert_ne!(a.reason(0), unwritten.reason(0));
        assert_eq!(a.reason(2), unwritten.reason(2));
    }

    /// Counted or sorted, the order is the stable sort's by total, descending.
    #[test]
    fn positions_come_best_first_with_ties_in_order() {
        let narrow: Vec<i64> = (0..500).map(|i| (i * 7919 % 61) - 30).collect();
        let wide: Vec<i64> = (0..500)
            .map(|i| (i * 7919 % 61 - 30) * 1_000_000_007)
            .collect();
        for totals in [
            vec![],
            vec![5],
            vec![i64::MIN, i64::MAX, 0, i64::MAX],
            narrow,
            wide,
        ] {
            let mut want: Vec<u32> = (0..totals.len() as u32).collect();
            want.sort_by_key(|&at| Reverse(totals[at as usize]));
            assert_eq!(best_first(&totals), want, "{totals:?}");
        }
    }

    #[test]
    fn integers_are_written_as_display_writes_them() {
        for n in [0, 7, -7, 10, 1_000_000, i64::MAX, i64::MIN] {
            let mut s = String::new();
            push_int(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }
}
