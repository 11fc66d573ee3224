//! A placement's bindings while it is scheduled: by fleet position for the clusters of the
//! fleet, apart for those that left it.

use crate::schedule::fleet::Fleet;
use crate::schedule::{Binding, BindingState};

/// Working set of bindings: those to clusters of the fleet by their position in it (the order
/// of names, and what the filters ask by), and those to clusters that have left the fleet.
pub(super) struct Bindings<'f> {
    pub(super) fleet: &'f Fleet,
    /// The fleet positions of `bound`, ascending: picks mostly arrive in that order, so this is
    /// mostly appending.
    positions: Vec<u32>,
    /// Kept apart from their positions, so that they are the result as they are.
    bound: Vec<Binding>,
    /// Bindings to clusters no longer in the fleet: always unscheduled.
    gone: Vec<Binding>,
    pub(super) index: u64,
}

pub(super) fn live(b: &Binding) -> bool {
    b.state != BindingState::Unscheduled
}

impl<'f> Bindings<'f> {
    /// The previous bindings; those to clusters that are not fleet members any more (gone from
    /// the repository) are unscheduled.
    pub(super) fn new(fleet: &'f Fleet, previous: &[Binding], index: u64) -> Self {
        let mut at = Vec::with_capacity(previous.len());
        let mut gone = Vec::new();
        for b in previous {
            let mut b = b.clone();
            match fleet.position(&b.cluster) {
                Some(i) => {
                    if !fleet.clusters[i].fleet_member {
                        Self::unschedule(&mut b);
                    }
                    at.push((i as u32, b));
                }
                None => {
                    Self::unschedule(&mut b);
                    gone.push(b);
                }
            }
        }
        at.sort_by_key(|(i, _)| *i);
        // A cluster listed twice: the later entry wins, as a map would have it.
        at.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        let (positions, bound) = at.into_iter().unzip();
        Bindings {
            fleet,
            positions,
            bound,
            gone,
            index,
        }
    }

    /// How many bindings there are to clusters of the fleet.
    pub(super) fn len(&self) -> usize {
        self.bound.len()
    }

    fn find(&self, position: usize) -> Result<usize, usize> {
        self.positions.binary_search(&(position as u32))
    }

    pub(super) fn get(&self, position: usize) -> Option<&Binding> {
        Some(&self.bound[self.find(position).ok()?])
    }

    pub(super) fn get_mut(&mut self, position: usize) -> Option<&mut Binding> {
        let at = self.find(position).ok()?;
        Some(&mut self.bound[at])
    }

    /// All bindings, sorted by cluster name.
    pub(super) fn into_vec(self) -> Vec<Binding> {
        let mut all = self.bound;
        if !self.gone.is_empty() {
            all.extend(self.gone);
            all.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        }
        all
    }

    /// The bindings to clusters of the fleet, with their positions, by name.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &Binding)> {
        (self.positions.iter().map(|&i| i as usize)).zip(&self.bound)
    }

    /// The current bindings (live, for this policy), with their fleet positions, by name.
    pub(super) fn current(&self) -> impl Iterator<Item = (usize, &Binding)> {
        self.iter()
            .filter(move |(_, b)| live(b) && b.policy_index == self.index)
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
        let at = match self.find(position) {
            Ok(at) => at,
            Err(at) => {
                let fresh = self.fresh(position);
                self.positions.insert(at, position as u32);
                self.bound.insert(at, fresh);
                at
            }
        };
        rebind(&mut self.bound[at], self.index, scores);
    }

    /// PickAll's binding step in one pass over the bindings: picks every cluster of `passed`
    /// (fleet positions, ascending) that is not bound for the current policy yet, with `scores`,
    /// and unschedules the obsolete bindings of the others, as [`Self::pick`] for each and
    /// [`Self::unschedule_obsolete_except`] the picked would.
    pub(super) fn pick_all(&mut self, passed: &[u32], scores: (i32, i32)) {
        let index = self.index;
        let old_positions = std::mem::take(&mut self.positions);
        // The old bindings, in step with their positions.
        let mut old = std::mem::take(&mut self.bound).into_iter();
        let mut old_at = old_positions.iter().copied();
        let mut next_old = old_at.next();
        let capacity = passed.len() + old_positions.len();
        let (mut positions, mut bound) =
            (Vec::with_capacity(capacity), Vec::with_capacity(capacity));
        let unscheduled_if_obsolete = |mut b: Binding| {
            if live(&b) && b.policy_index != index {
                Self::unschedule(&mut b);
            }
            b
        };
        for &position in passed {
            while let Some(i) = next_old.filter(|&i| i < position) {
                positions.push(i);
                bound.extend(old.next().map(unscheduled_if_obsolete));
                next_old = old_at.next();
            }
            positions.push(position);
            if next_old == Some(position) {
                next_old = old_at.next();
                bound.extend(old.next().map(|mut b| {
                    // Bound for this policy already: not picked again.
                    if !(live(&b) && b.policy_index == index) {
                        rebind(&mut b, index, Some(scores));
                    }
                    b
                }));
            } else {
                bound.push(Binding {
                    affinity_score: Some(scores.0),
                    topology_spread_score: Some(scores.1),
                    ..self.fresh(position as usize)
                });
            }
        }
        positions.extend(next_old.into_iter().chain(old_at));
        bound.extend(old.map(unscheduled_if_obsolete));
        self.positions = positions;
        self.bound = bound;
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
        for (&i, b) in self.positions.iter().zip(&mut self.bound) {
            if live(b) && b.policy_index != index && !keep(i as usize) {
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
