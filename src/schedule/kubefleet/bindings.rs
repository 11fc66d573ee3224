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
        let index = self.index;
        let fleet = self.fleet;
        let at = match self.at.binary_search_by_key(&position, |(i, _)| *i) {
            Ok(at) => at,
            Err(at) => {
                let b = Binding {
                    cluster: fleet.clusters[position].name.clone(),
                    state: BindingState::Scheduled,
                    policy_index: index,
                    affinity_score: None,
                    topology_spread_score: None,
                    previous_state: None,
                };
                self.at.insert(at, (position, b));
                at
            }
        };
        let b = &mut self.at[at].1;
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
