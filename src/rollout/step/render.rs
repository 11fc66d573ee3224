//! What a placement's clusters are given: the rendered manifests, their fingerprint (the
//! revision a cluster runs) and the deletion guard's ids of their objects.
//!
//! Each placement's selection is made once and shared; each placement is rendered once per
//! distinct cluster input (and, for status, once without overrides), and what is worked out
//! from a rendering (its fingerprint, its objects' ids, the manifests as work carries them) is
//! worked out once for all the clusters that share it.

use crate::fast_hash::HashMap;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;

use super::{Rendered, StepSummary};
use crate::catalog::Catalog;
use crate::model::{ClusterName, ObjectKey, PlacementKey, SharedText};
use crate::render::cluster::{
    ocm_workloads, overrides_of, render_placement, CommitRenderer, Selections,
};
use crate::render::{ClusterTarget, Manifest};
use crate::rollout::rolling::Revision;
use crate::rollout::work::Manifests;
use crate::schedule::Fleet;

pub(super) fn rendered_fingerprint(manifests: &[Manifest]) -> String {
    let mut values: Vec<&Value> = manifests.iter().map(|m| &*m.value).collect();
    // An OCM work's options change how its objects are written: a change re-pushes them.
    // (Without options, the fingerprint is what it always was.)
    let works: Vec<Value> = manifests
        .iter()
        .filter_map(|m| m.work.as_ref())
        .map(|w| serde_json::json!({"work": w}))
        .collect();
    values.extend(&works);
    // Hashed as written: `json!(values)` would copy the whole rendering first.
    crate::snapshot::hash_list(None, &values)
}

/// Renders placement `key` of another commit's catalog for `cluster`.
pub(super) fn render_at(
    cat: &Catalog,
    key: &PlacementKey,
    fleet: &Fleet,
    cluster: &str,
    resource_index: u64,
) -> Option<(Manifests, Revision)> {
    let c = fleet.get(cluster)?;
    let target = ClusterTarget {
        name: cluster,
        labels: &c.labels,
    };
    let manifests = render_placement(cat, key, &overrides_of(cat), &target)?.ok()?;
    let rendered = rendered_fingerprint(&manifests).into();
    Some((
        Arc::new(manifests),
        Revision {
            resource_index,
            rendered,
        },
    ))
}

/// The deletion guard's ids of the objects of one rendering.
pub(super) fn ids_of(manifests: &[Manifest]) -> Arc<BTreeSet<ObjectKey>> {
    Arc::new(manifests.iter().map(|m| ObjectKey::of(&m.value)).collect())
}

/// The renderings of one step's commit, with what is worked out from each kept for the
/// clusters that share it.
pub(super) struct Renderings<'a> {
    cat: &'a Catalog,
    fleet: &'a Fleet,
    renderer: CommitRenderer<'a>,
    /// The same without overrides: which clusters the overrides change (status's Overridden).
    plain: CommitRenderer<'a>,
    /// Whether `plain` is asked (rolling pacing only).
    track_overrides: bool,
    // By the address of a shared rendering (renderings live as long as the renderer):
    /// Fingerprints (shared: every cluster's revision holds its rendering's).
    fingerprints: HashMap<usize, SharedText>,
    /// The manifests as the work items carry them (`Arc`: work crosses threads).
    manifests: HashMap<usize, Manifests>,
    /// The deletion guard's object ids.
    object_ids: HashMap<usize, Arc<BTreeSet<ObjectKey>>>,
    /// The step's entries, by rendering and resource snapshot.
    entries: HashMap<(usize, u64), Arc<Rendered>>,
}

impl<'a> Renderings<'a> {
    pub(super) fn new(
        cat: &'a Catalog,
        fleet: &'a Fleet,
        selections: &Selections<'a>,
        schedule: &'a [Arc<crate::schedule::PlacementSchedule>],
        track_overrides: bool,
    ) -> Renderings<'a> {
        Renderings {
            cat,
            fleet,
            renderer: selections.renderer(schedule),
            plain: selections.renderer(schedule).without_overrides(),
            track_overrides,
            fingerprints: HashMap::default(),
            manifests: HashMap::default(),
            object_ids: HashMap::default(),
            entries: HashMap::default(),
        }
    }

    /// What `cluster` should run of placement `key` (at `index` in the schedule), recorded in
    /// `step` (its desired revision, objects, overrides, render errors); `None` when rendering
    /// fails (reported, not pushed).
    pub(super) fn render(
        &mut self,
        step: &mut StepSummary,
        index: usize,
        key: &PlacementKey,
        cluster: &str,
        resource_index: u64,
    ) -> Option<(Manifests, Revision)> {
        let c = self.fleet.get(cluster);
        let (manifests, rendered, ids) = if key.kind.is_ocm() {
            let manifests = Arc::new(ocm_workloads(self.cat, key));
            let rendered = rendered_fingerprint(&manifests).into();
            let ids = ids_of(&manifests);
            (manifests, rendered, ids)
        } else {
            let c = c?;
            let target = ClusterTarget {
                name: cluster,
                labels: &c.labels,
            };
            let shared = self.renderer.render_index(index, &target)?;
            match shared.as_ref() {
                Ok(m) => {
                    if self.track_overrides {
                        let without = self.plain.render_index(index, &target);
                        if !matches!(without.as_deref(), Some(Ok(p)) if p == m) {
                            step.overridden.insert(cluster.to_string());
                        }
                    }
                    let rendered = self
                        .fingerprints
                        .entry(Rc::as_ptr(&shared) as usize)
                        .or_insert_with(|| rendered_fingerprint(m).into())
                        .clone();
                    let ids = self
                        .object_ids
                        .entry(Rc::as_ptr(&shared) as usize)
                        .or_insert_with(|| ids_of(m))
                        .clone();
                    let m = self
                        .manifests
                        .entry(Rc::as_ptr(&shared) as usize)
                        .or_insert_with(|| Arc::new(m.clone()))
                        .clone();
                    (m, rendered, ids)
                }
                Err(e) => {
                    if e.is_work_sync_failure() {
                        step.work_sync_errors.insert(cluster.to_string());
                        // The overrides did apply (they made the object invalid): KubeFleet
                        // reports Overridden=True (OverriddenSucceeded) before the
                        // WorkSynchronized failure (test/e2e/actuals_test.go
                        // perClusterWorkSynchronizedFailedConditions with hasOverrides).
                        if self.track_overrides {
                            step.overridden.insert(cluster.to_string());
                        }
                    }
                    step.render_errors
                        .insert(cluster.to_string(), e.to_string());
                    return None;
                }
            }
        };
        let revision = Revision {
            resource_index,
            rendered,
        };
        // The fleet's shared name; a cluster it does not know (an OCM placement's) gets its own.
        let name = c.map_or_else(|| ClusterName::new(cluster), |c| c.name.clone());
        let make = || {
            Arc::new(Rendered {
                revision: revision.clone(),
                objects: Some(ids),
            })
        };
        // Keyed by the rendering's fingerprint text, which every cluster given it shares.
        let entry = self
            .entries
            .entry((revision.rendered.address(), resource_index))
            .or_insert_with(make)
            .clone();
        step.rendered.insert(name, entry);
        Some((manifests, revision))
    }
}
