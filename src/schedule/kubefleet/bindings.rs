//! A placement's bindings while it is scheduled: by fleet position for the clusters of the
//! fleet, apart for those that left it.

use crate::schedule::fleet::Fleet;
use crate::schedule::{Binding, BindingState};

/// Working set of bindings: those to clusters of the fleet by their position in it (the order
/// of names, and what the filters ask by), and those to clusters that have left the fleet.
pub(super) struct Bindings<'f> {
    pub(super) fleet: &'f Fleet,
    /// Sorted by position: picks mostly arrive in that order, so this is mostly appending.
    pub(super) at: Vec<(usize, Binding)>,
    /// Bindings to clusters no longer in the fleet: always unscheduled.
    pub(super) gone: Vec<Binding>,
    pub(super) index: u64,
}

pub(super) fn live(b: &Binding) -> bool {
    b.state != BindingState::Unscheduled
}

impl<'f> Bindings<'f> {
    /// The previous bindings; those to clusters that are not fleet members any more (gone from
    /// the repository) are unscheduled.
    pub(super) fn new(fleet: &'f Fleet, previous: &[Binding], index: u64) -> Self {
        let mut bindings = Bindings {
            fleet,
            at: Vec::with_capacity(previous.len()),
            gone: Vec::new(),
            index,
        };
        for b in previous {
            let mut b = b.clone();
            match fleet.position(&b.cluster) {
                Some(i) => {
                    if !fleet.clusters[i].fleet_member {
                        Self::unschedule(&mut b);
                    }
                    bindings.at.push((i, b));
                }
                None => {
                    Self::unschedule(&mut b);
                    bindings.gone.push(b);
                }
            }
        }
        bindings.at.sort_by_key(|(i, _)| *i);
        // A cluster listed twice: the later entry wins, as a map would have it.
        bindings.at.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        bindings
    }

    pub(super) fn get(&self, position: usize) -> Option<&Binding> {
        let at = self.at.binary_search_by_key(&position, |(i, _)| *i).ok()?;
        Some(&self.at[at].1)
    }

    pub(super) fn get_mut(&mut self, position: usize) -> Option<&mut Binding> {
        let at = self.at.binary_search_by_key(&position, |(i, _)| *i).ok()?;
        Some(&mut self.at[at].1)
    }

    /// All bindings, sorted by cluster name.
    pub(super) fn into_vec(self) -> Vec<Binding> {
        let mut all: Vec<Binding> = self.at.into_iter().map(|(_, b)| b).collect();
        if !self.gone.is_empty() {
            all.extend(self.gone);
            all.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        }
        all
    }

    /// The current bindings (live, for this policy), with their fleet positions, by name.
    pub(super) fn current(&self) -> impl Iterator<Item = (usize, &Binding)> {
        self.at
            .iter()
            .filter(move |(_, b)| live(b) && b.policy_index == self.index)
            .map(|(i, b)| (*i, b))
    }
    pub(super) fn is_current(&self, position: usize) -> bool {
        self.get(position)
            .is_some_and(|b| live(b) && b.policy_index == self.index)
    }
    pub(super) fn is_obsolete(&self, position: usize) -> bool {
        self.get(position)
            .is_some_and(|b| live(b) && b.policy_index != self.index)
    }
    pub(super) fn unschedule(b: &mut Binding) {
        if live(b) {
            b.previous_state = Some(b.state);
            b.state = BindingState::Unscheduled;
        }
    }
    /// Binds the cluster at `position` for the current policy: patches an obsolete binding
    /// (state kept), revives an unscheduled one (previous state restored) or creates a
    /// `Scheduled` one.
    pub(super) fn pick(&mut self, position: usize, scores: Option<(i32, i32)>) {
        let at = match self.at.binary_search_by_key(&position, |(i, _)| *i) {
            Ok(at) => at,
            Err(at) => {
                let fresh = self.fresh(position);
                self.at.insert(at, (position, fresh));
                at
            }
        };
        let index = self.index;
        rebind(&mut self.at[at].1, index, scores);
    }

    /// PickAll's binding step in one pass over the bindings: picks every cluster of `passed`
    /// (fleet positions, ascending) that is not bound for the current policy yet, with `scores`,
    /// and unschedules the obsolete bindings of the others, as [`Self::pick`] for each and
    /// [`Self::unschedule_obsolete_except`] the picked would.
    pub(super) fn pick_all(&mut self, passed: &[u32], scores: (i32, i32)) {
        let index = self.index;
        let mut old = std::mem::take(&mut self.at).into_iter().peekable();
        let mut at = Vec::with_capacity(passed.len() + old.len());
        for position in passed.iter().map(|&p| p as usize) {
            while let Some(mut kept) = old.next_if(|(i, _)| *i < position) {
                if live(&kept.1) && kept.1.policy_index != index {
                    Self::unschedule(&mut kept.1);
                }
                at.push(kept);
            }
            let b = match old.next_if(|(i, _)| *i == position) {
                // Already bound for this policy: not picked again.
                Some((_, b)) if live(&b) && b.policy_index == index => b,
                Some((_, mut b)) => {
                    rebind(&mut b, index, Some(scores));
                    b
                }
                None => {
                    let mut b = self.fresh(position);
                    rebind(&mut b, index, Some(scores));
                    b
                }
            };
            at.push((position, b));
        }
        for mut kept in old {
            if live(&kept.1) && kept.1.policy_index != index {
                Self::unschedule(&mut kept.1);
            }
            at.push(kept);
        }
        self.at = at;
    }

    /// A new binding to the cluster at `position`.
    fn fresh(&self, position: usize) -> Binding {
        Binding {
            cluster: self.fleet.clusters[position].name.clone(),
            state: BindingState::Scheduled,
            policy_index: self.index,
            affinity_score: None,
            topology_spread_score: None,
            previous_state: None,
        }
    }

    pub(super) fn unschedule_obsolete_except(&mut self, keep: impl Fn(usize) -> bool) {
        let index = self.index;
        for (i, b) in self.at.iter_mut() {
            let i = *i;
            if live(b) && b.policy_index != index && !keep(i) {
                Self::unschedule(b);
            }
        }
    }
}

/// Makes `b` a binding for policy `index`, as [`Bindings::pick`] does.
fn rebind(b: &mut Binding, index: u64, scores: Option<(i32, i32)>) {
    if b.state == BindingState::Unscheduled {
        b.state = b.previous_state.take().unwrap_or(BindingState::Scheduled);
    }
    b.previous_state = None;
    b.policy_index = index;
    if let Some((affinity, topology)) = scores {
        b.affinity_score = Some(affinity);
        b.topology_spread_score = Some(topology);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ClusterName;
    use crate::schedule::fleet::Cluster;

    fn fleet(n: usize) -> Fleet {
        let names: Vec<String> = (0..n).map(|i| format!("c{i:02}")).collect();
        let mut fleet = Fleet::default();
        fleet.clusters = ClusterName::table(names.iter().map(String::as_str))
            .into_iter()
            .map(|name| {
                let mut c = Cluster::default();
                c.name = name;
                c.fleet_member = true;
                c
            })
            .collect();
        fleet
    }

    fn binding(cluster: &str, state: BindingState, policy_index: u64) -> Binding {
        Binding {
            cluster: cluster.into(),
            state,
            policy_index,
            affinity_score: Some(7),
            topology_spread_score: Some(-1),
            previous_state: (state == BindingState::Unscheduled).then_some(BindingState::Bound),
        }
    }

    /// PickAll's one pass gives the bindings that picking each cluster and then unscheduling
    /// the obsolete others gives, whatever the bindings were.
    #[test]
    fn pick_all_is_each_pick_and_then_the_obsolete_unscheduled() {
        use BindingState::*;
        let fleet = fleet(8);
        let previous = [
            binding("c00", Bound, 2),
            binding("c01", Scheduled, 1),
            binding("c02", Unscheduled, 1),
            binding("c03", Bound, 1),
            binding("c05", Unscheduled, 2),
            binding("c06", Scheduled, 2),
            binding("gone", Bound, 2),
        ];
        let passed: [&[u32]; 4] = [&[], &[0, 1, 2, 3, 4, 5, 6, 7], &[1, 4, 5], &[0, 3, 7]];
        for passed in passed {
            let mut one_pass = Bindings::new(&fleet, &previous, 2);
            one_pass.pick_all(passed, (0, 0));
            let mut each = Bindings::new(&fleet, &previous, 2);
            let picked: Vec<usize> = passed
                .iter()
                .map(|&p| p as usize)
                .filter(|&p| !each.is_current(p))
                .collect();
            for &p in &picked {
                each.pick(p, Some((0, 0)));
            }
            each.unschedule_obsolete_except(|i| picked.contains(&i));
            assert_eq!(one_pass.into_vec(), each.into_vec(), "{passed:?}");
        }
    }
}
