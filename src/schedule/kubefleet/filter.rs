//! The filter plugins shared by PickAll and PickN: required cluster affinity (labels and
//! properties), eligibility, namespace affinity and taints; and why a cluster was filtered, as
//! KubeFleet words it.

use super::cache::{Cache, Prop, Sorted};
use super::{CycleError, Input};
use crate::model::member::Taint;
use crate::model::placement::{
    ClusterSelectorTerm, PropertyOperator, Toleration, TolerationOperator, TopologySpreadConstraint,
};
use crate::model::quantity::Quantity;
use crate::model::selector::LabelSelector;
use crate::schedule::fleet::Cluster;
use crate::schedule::labels::ClusterBits;
use std::rc::Rc;

/// A property expression of a required term: the value to compare with, and the property's
/// values by fleet position.
pub(super) type Wanted = (Option<f64>, Rc<[Prop]>);

/// Why a cluster is filtered out, as KubeFleet's `Status.String()` words it.
pub(super) fn unschedulable(reason: impl std::fmt::Display) -> String {
    format!("ClusterUnschedulable, {reason}")
}

pub(super) fn eligibility(c: &Cluster) -> Result<(), String> {
    if c.healthy {
        Ok(())
    } else {
        Err(format!(
            "cluster is not connected to the fleet: {}",
            c.health_reason
                .as_deref()
                .unwrap_or("its API server did not answer the last probe")
        ))
    }
}

/// Why the filters drop a cluster; worded (as KubeFleet's `Status.String()`) only for the few
/// decisions that list it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Filtered<'a> {
    NoAffinityTerm,
    Ineligible(&'a Cluster),
    NamespaceMissing,
    Taint(&'a Taint),
    Topology(&'a TopologySpreadConstraint),
}

impl Filtered<'_> {
    pub(super) fn reason(&self) -> String {
        match self {
            Filtered::NoAffinityTerm => unschedulable(
                "cluster does not match with any of the required cluster affinity terms",
            ),
            Filtered::Ineligible(c) => unschedulable(eligibility(c).err().unwrap_or_default()),
            Filtered::NamespaceMissing => {
                unschedulable("target namespace does not exist on cluster")
            }
            Filtered::Taint(t) => unschedulable(taint_reason(t)),
            Filtered::Topology(constraint) => unschedulable(format!(
                "violated doNotSchedule topology spread constraint {:?} (max skew {})",
                constraint.topology_key,
                constraint.max_skew.unwrap_or(1)
            )),
        }
    }
}

/// A placement's label selectors, worked out once over the whole fleet (see [`LabelIndex`]).
pub(super) struct Selectors {
    /// Per required term: the clusters its label selector matches (`None`: no label selector).
    /// `None` when the placement has no required affinity.
    pub(super) required: Option<Vec<Option<Rc<ClusterBits>>>>,
    /// Per required term, per expression of its property selector: the value to compare with
    /// and the property's values.
    pub(super) wanted: Vec<Vec<Wanted>>,
    /// Per preferred term, the same as `required`.
    pub(super) preferred: Vec<Option<Rc<ClusterBits>>>,
    /// Per preferred term with a property sorter (and a weight): what it scores each cluster.
    pub(super) sorters: Vec<Option<Rc<[Sorted]>>>,
}

impl Selectors {
    pub(super) fn new(input: &Input, cache: &mut Cache) -> Self {
        let fleet = input.fleet;
        let affinity = input
            .policy
            .affinity
            .as_ref()
            .and_then(|a| a.cluster_affinity.as_ref());
        let required = affinity.and_then(|ca| {
            ca.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
        let preferred = affinity
            .map(|ca| {
                ca.preferred_during_scheduling_ignored_during_execution
                    .as_slice()
            })
            .unwrap_or_default();
        let mut terms = |sel: Option<&LabelSelector>| sel.map(|s| cache.select(fleet, s));
        let required_labels = required.map(|req| {
            (req.cluster_selector_terms.iter())
                .map(|t| terms(t.label_selector.as_ref()))
                .collect()
        });
        let preferred_labels = (preferred.iter())
            .map(|p| terms(p.preference.label_selector.as_ref()))
            .collect();
        Selectors {
            required: required_labels,
            wanted: required
                .map(|req| {
                    let mut expressions = |t: &ClusterSelectorTerm| {
                        let exps = t
                            .property_selector
                            .iter()
                            .flat_map(|ps| &ps.match_expressions);
                        exps.map(|e| {
                            // Validation guarantees exactly one well-formed value.
                            let want = e.values.first().and_then(|v| Quantity::parse(v).ok());
                            (want.map(|q| q.0), cache.column(fleet, &e.name))
                        })
                        .collect()
                    };
                    req.cluster_selector_terms
                        .iter()
                        .map(&mut expressions)
                        .collect()
                })
                .unwrap_or_default(),
            preferred: preferred_labels,
            sorters: preferred
                .iter()
                .map(|p| {
                    let sorter = p.preference.property_sorter.as_ref()?;
                    let (name, order) = (&sorter.name, sorter.sort_order);
                    (p.weight != 0).then(|| cache.sorted(fleet, name, order, p.weight))
                })
                .collect(),
        }
    }
}

/// Whether the label selector of a term (worked out in `bits`) matches the `index`-th cluster.
pub(super) fn labels_match(bits: &Option<Rc<ClusterBits>>, index: usize) -> bool {
    bits.as_ref().is_none_or(|b| b.contains(index))
}

/// The placement's required cluster affinity terms, if it has any.
pub(super) fn required_terms<'p>(input: &Input<'p>) -> Option<&'p [ClusterSelectorTerm]> {
    let affinity = input.policy.affinity.as_ref()?.cluster_affinity.as_ref()?;
    let required = affinity
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    Some(&required.cluster_selector_terms)
}

/// Whether the cluster at `index` matches one of the required `terms` (their label selectors
/// worked out in `selectors`), trying them in order.
pub(super) fn affinity_matches(
    terms: &[ClusterSelectorTerm],
    selectors: &Selectors,
    index: usize,
    c: &Cluster,
) -> Result<bool, CycleError> {
    let bits = selectors.required.as_deref().unwrap_or_default();
    for ((term, bits), wanted) in terms.iter().zip(bits).zip(&selectors.wanted) {
        if labels_match(bits, index) && properties_match(term, wanted, index, c)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Why the static filters (required affinity, eligibility, namespace affinity, taints, in
/// that order) drop a member; `affine` says whether it matches the required affinity.
pub(super) fn dropped_by<'c>(
    input: &Input<'c>,
    affine: bool,
    c: &'c Cluster,
) -> Option<Filtered<'c>> {
    if !affine {
        return Some(Filtered::NoAffinityTerm);
    }
    if !c.healthy {
        return Some(Filtered::Ineligible(c));
    }
    if namespace_missing(input, c) {
        return Some(Filtered::NamespaceMissing);
    }
    untolerated_taint(&input.policy.tolerations, c).map(Filtered::Taint)
}

/// NamespaceAffinity (pkg/scheduler/framework/plugins/namespaceaffinity/filtering.go): a
/// ResourcePlacement goes only where its namespace exists, when the member's namespaces are
/// known; unknown (KubeFleet: no NamespaceCollectionSucceeded condition), every cluster passes.
pub(super) fn namespace_missing(input: &Input, c: &Cluster) -> bool {
    match (input.key.namespace.as_deref(), c.namespaces.as_ref()) {
        (Some(ns), Some(known)) => !known.contains(ns),
        _ => false,
    }
}

/// The property selector of a term (its label selector is checked first, through [`Selectors`]).
/// `wanted` holds each expression's value, parsed, and the property over the fleet; `index` is
/// the cluster's position there.
pub(super) fn properties_match(
    term: &ClusterSelectorTerm,
    wanted: &[Wanted],
    index: usize,
    c: &Cluster,
) -> Result<bool, CycleError> {
    let Some(ps) = &term.property_selector else {
        return Ok(true);
    };
    for (exp, (want, column)) in ps.match_expressions.iter().zip(wanted) {
        let value = match column[index] {
            Prop::Missing => return Ok(false),
            Prop::Value(v) => v,
            Prop::Invalid => return Err(invalid_property(c, &exp.name)),
        };
        let Some(want) = *want else {
            return Ok(false);
        };
        let ok = match exp.operator {
            PropertyOperator::Eq => value == want,
            PropertyOperator::Ne => value != want,
            PropertyOperator::Gt => value > want,
            PropertyOperator::Ge => value >= want,
            PropertyOperator::Lt => value < want,
            PropertyOperator::Le => value <= want,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

pub(super) fn invalid_property(c: &Cluster, property: &str) -> CycleError {
    CycleError {
        cluster: c.name.to_string(),
        property: property.to_string(),
        value: match c.property(property) {
            Some(Err(raw)) => raw,
            _ => String::new(),
        },
    }
}

/// The first taint of the cluster no toleration tolerates.
pub(super) fn untolerated_taint<'c>(
    tolerations: &[Toleration],
    c: &'c Cluster,
) -> Option<&'c Taint> {
    c.taints.iter().find(|t| {
        !tolerations.iter().any(|tol| {
            let op = tol.operator.unwrap_or_default();
            // The only effect is NoSchedule, so a toleration's effect always matches.
            match op {
                TolerationOperator::Exists => tol.key.is_empty() || tol.key == t.key,
                TolerationOperator::Equal => tol.key == t.key && tol.value == t.value,
            }
        })
    })
}

/// A taint as KubeFleet's `%+v` words it.
pub(super) fn taint_reason(t: &Taint) -> String {
    format!(
        "taint {{Key:{} Value:{} Effect:NoSchedule}} cannot be tolerated",
        t.key, t.value
    )
}
