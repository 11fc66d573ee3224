//! The members a placement's static filters let through (required affinity, eligibility,
//! namespace affinity and taints: the filters that do not depend on the bindings), worked out
//! for the whole fleet at once. Label selectors come from the label index and the other
//! filters from the run's member sets, so a cluster's own record is read only for a property,
//! a taint or a namespace list: every placement filters every member, and reading each
//! member's record would be most of that.

use super::cache::Cache;
use super::filter::{
    affinity_matches, dropped_by, namespace_missing, required_terms, untolerated_taint, Filtered,
    Selectors,
};
use super::{CycleError, Input, MAX_UNSELECTED_DECISIONS};
use crate::schedule::labels::ClusterBits;

/// What the static filters make of a placement's members.
pub(super) struct Feasible<'c> {
    /// The members that pass, by fleet position, ascending.
    pub(super) passed: Vec<u32>,
    /// The first members the filters drop (as many as the decisions may list), by position,
    /// with why.
    pub(super) dropped: Vec<(usize, Filtered<'c>)>,
    /// The first member whose filters cannot be worked out (a property that is not a
    /// quantity), by position, and why. The members after it are in neither list: a cycle
    /// stops there.
    pub(super) error: Option<(usize, CycleError)>,
}

impl<'c> Feasible<'c> {
    pub(super) fn new(input: &Input<'c>, selectors: &Selectors, cache: &mut Cache) -> Self {
        let fleet = input.fleet;
        let members = cache.members(fleet);
        let (affine, error) = affine(input, selectors, &members.all);
        let mut pass = affine.clone();
        pass.intersect(&members.healthy);
        if input.key.namespace.is_some() {
            for &i in &members.with_namespaces {
                if namespace_missing(input, &fleet.clusters[i as usize]) {
                    pass.remove(i as usize);
                }
            }
        }
        for group in &members.tainted {
            let first = &fleet.clusters[group[0] as usize];
            if untolerated_taint(&input.policy.tolerations, first).is_some() {
                group.iter().for_each(|&i| pass.remove(i as usize));
            }
        }
        let end = error.as_ref().map_or(fleet.clusters.len(), |(at, _)| *at);
        let mut dropped = members.all.clone();
        dropped.subtract(&pass);
        let dropped = dropped
            .iter()
            .take_while(|&i| i < end)
            .filter_map(|i| {
                Some((
                    i,
                    dropped_by(input, affine.contains(i), &fleet.clusters[i])?,
                ))
            })
            .take(MAX_UNSELECTED_DECISIONS)
            .collect();
        Feasible {
            passed: pass.iter().map(|i| i as u32).collect(),
            dropped,
            error,
        }
    }
}

/// The members that match the placement's required affinity (every member without one), and
/// the first member whose terms cannot be worked out; the members after it are not tried.
fn affine(
    input: &Input,
    selectors: &Selectors,
    members: &ClusterBits,
) -> (ClusterBits, Option<(usize, CycleError)>) {
    let (Some(terms), Some(labels)) = (required_terms(input), &selectors.required) else {
        return (members.clone(), None);
    };
    let n = input.fleet.clusters.len();
    // A cluster can match only a term whose label selector matches it.
    let mut reach = ClusterBits::empty(n);
    for bits in labels {
        match bits {
            Some(bits) => reach.union(bits),
            None => {
                reach = ClusterBits::full(n);
                break;
            }
        }
    }
    reach.intersect(members);
    if terms.iter().all(|t| t.property_selector.is_none()) {
        return (reach, None);
    }
    let mut matched = ClusterBits::empty(n);
    for i in reach.iter() {
        match affinity_matches(terms, selectors, i, &input.fleet.clusters[i]) {
            Ok(true) => matched.insert(i),
            Ok(false) => {}
            Err(e) => return (matched, Some((i, e))),
        }
    }
    (matched, None)
}
