//! Per-run values of the fleet shared by all KubeFleet placements: the members and what the
//! filters read of them, each property's values by fleet position and its range over the
//! members, and each topology key's domains.

use super::score::interpolate;
use crate::model::member::Taint;
use crate::model::placement::SortOrder;
use crate::model::selector::LabelSelector;
use crate::schedule::fleet::Fleet;
use crate::schedule::labels::ClusterBits;
use std::collections::HashMap;
use std::rc::Rc;

/// Per-run caches shared by all placements (one fleet).
#[derive(Default)]
pub struct Cache {
    members: Option<Rc<Members>>,
    /// Label selectors worked out over the fleet: placements share them more often than not.
    selections: HashMap<LabelSelector, Rc<ClusterBits>>,
    columns: HashMap<String, Rc<[Prop]>>,
    extremes: HashMap<String, Option<(f64, f64)>>,
    /// By property, sort order (descending or not) and weight.
    sorted: HashMap<(String, bool, i32), Rc<[Sorted]>>,
    domains: HashMap<String, Rc<Domains>>,
}

/// A cluster's property, read once per run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Prop {
    Missing,
    Value(f64),
    /// Not a quantity: the cycle fails on it (the raw text is read again for the error).
    Invalid,
}

/// A cluster's score from a preferred term's property sorter, worked out once per run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Sorted {
    Missing,
    Score(i32),
    /// Not a quantity: the cycle fails on it.
    Invalid,
}

/// The fleet members as sets of positions, with what the filters read of each.
pub(super) struct Members {
    pub(super) all: ClusterBits,
    /// The clusters whose last probe succeeded.
    pub(super) healthy: ClusterBits,
    /// The members with taints, grouped by their taints (in order), each group ascending: a
    /// placement tolerates every member of a group or none.
    pub(super) tainted: Vec<Vec<u32>>,
    /// The members whose namespaces are known, ascending.
    pub(super) with_namespaces: Vec<u32>,
}

/// The domains of one topology key over the fleet members.
pub(super) struct Domains {
    /// Per fleet position: the domain (numbered in order of first appearance), if the cluster is
    /// a member with the label.
    pub(super) by_position: Vec<Option<usize>>,
    pub(super) count: usize,
}

impl Cache {
    pub(super) fn members(&mut self, fleet: &Fleet) -> Rc<Members> {
        self.members
            .get_or_insert_with(|| {
                let n = fleet.clusters.len();
                let mut members = Members {
                    all: ClusterBits::empty(n),
                    healthy: ClusterBits::empty(n),
                    tainted: vec![],
                    with_namespaces: vec![],
                };
                let mut groups: HashMap<&[Taint], usize> = HashMap::new();
                for (i, c) in fleet.clusters.iter().enumerate() {
                    if c.healthy {
                        members.healthy.insert(i);
                    }
                    if !c.fleet_member {
                        continue;
                    }
                    members.all.insert(i);
                    if !c.taints.is_empty() {
                        let next = groups.len();
                        let group = *groups.entry(&c.taints).or_insert(next);
                        if group == next {
                            members.tainted.push(vec![]);
                        }
                        members.tainted[group].push(i as u32);
                    }
                    if c.namespaces.is_some() {
                        members.with_namespaces.push(i as u32);
                    }
                }
                Rc::new(members)
            })
            .clone()
    }

    pub(super) fn column(&mut self, fleet: &Fleet, property: &str) -> Rc<[Prop]> {
        if let Some(c) = self.columns.get(property) {
            return c.clone();
        }
        let column: Rc<[Prop]> = fleet
            .clusters
            .iter()
            .map(|c| match c.property(property) {
                None => Prop::Missing,
                Some(Ok(v)) => Prop::Value(v),
                Some(Err(_)) => Prop::Invalid,
            })
            .collect();
        self.columns.insert(property.to_string(), column.clone());
        column
    }

    pub(super) fn extremes(&mut self, fleet: &Fleet, property: &str) -> Option<(f64, f64)> {
        if let Some(e) = self.extremes.get(property) {
            return *e;
        }
        let column = self.column(fleet, property);
        let mut mm: Option<(f64, f64)> = None;
        for (c, p) in fleet.clusters.iter().zip(column.iter()) {
            if let (true, Prop::Value(v)) = (c.fleet_member, *p) {
                mm = Some(mm.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
            }
        }
        self.extremes.insert(property.to_string(), mm);
        mm
    }

    /// The clusters `selector` matches (the fleet's label index worked out once per selector).
    pub(super) fn select(&mut self, fleet: &Fleet, selector: &LabelSelector) -> Rc<ClusterBits> {
        if let Some(bits) = self.selections.get(selector) {
            return bits.clone();
        }
        let bits = Rc::new(fleet.label_index().select(selector));
        self.selections.insert(selector.clone(), bits.clone());
        bits
    }

    /// What a property sorter of `weight` scores each cluster, by fleet position: the weight
    /// interpolated over the property's range over the members. Placements share sorters
    /// more often than not, and interpolating is most of scoring.
    pub(super) fn sorted(
        &mut self,
        fleet: &Fleet,
        property: &str,
        order: SortOrder,
        weight: i32,
    ) -> Rc<[Sorted]> {
        let key = (property.to_string(), order == SortOrder::Descending, weight);
        if let Some(s) = self.sorted.get(&key) {
            return s.clone();
        }
        let extremes = self.extremes(fleet, property);
        let sorted: Rc<[Sorted]> = (self.column(fleet, property).iter())
            .map(|p| match *p {
                Prop::Missing => Sorted::Missing,
                Prop::Value(v) => Sorted::Score(interpolate(v, extremes, order, weight)),
                Prop::Invalid => Sorted::Invalid,
            })
            .collect();
        self.sorted.insert(key, sorted.clone());
        sorted
    }

    pub(super) fn domains(&mut self, fleet: &Fleet, key: &str) -> Rc<Domains> {
        if let Some(d) = self.domains.get(key) {
            return d.clone();
        }
        let mut ids: HashMap<&str, usize> = HashMap::new();
        let by_position = fleet
            .clusters
            .iter()
            .map(|c| {
                let v = c.labels.get(key).filter(|_| c.fleet_member)?;
                let next = ids.len();
                Some(*ids.entry(v.as_str()).or_insert(next))
            })
            .collect();
        let domains = Rc::new(Domains {
            by_position,
            count: ids.len(),
        });
        self.domains.insert(key.to_string(), domains.clone());
        domains
    }
}
