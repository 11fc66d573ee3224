//! Everything a schedule sends to one cluster: each KubeFleet placement that selected it,
//! rendered, and the workloads of the ManifestWorkReplicaSets whose OCM Placement selected it.
//! The daemon, `gitfleet render` and `gitfleet plan` all go through here.

use super::{
    render_for_cluster, wave_of, ClusterTarget, Manifest, OverrideSet, PlacementRef, RenderError,
};
use crate::catalog::Catalog;
use crate::model::Gvk;
use crate::schedule::{PlacementKey, PlacementSchedule};
use serde_json::Value;

/// The manifests one placement delivers to the cluster, or why they cannot be rendered.
#[derive(Debug)]
pub struct PlacementManifests {
    pub placement: PlacementKey,
    pub manifests: Result<Vec<Manifest>, RenderError>,
}

/// All overrides of the commit.
pub fn overrides_of(cat: &Catalog) -> OverrideSet<'_> {
    OverrideSet {
        cluster: cat.cluster_overrides.iter().map(|e| &e.spec).collect(),
        namespaced: cat.resource_overrides.iter().map(|e| &e.spec).collect(),
    }
}

/// Renders one KubeFleet placement (by key) for a cluster; `None` if the commit lacks it.
pub fn render_placement(
    cat: &Catalog,
    key: &PlacementKey,
    overrides: &OverrideSet,
    cluster: &ClusterTarget,
) -> Option<Result<Vec<Manifest>, RenderError>> {
    let entry = cat.placement(&key.name, key.namespace.as_deref())?;
    // A commit with selection errors is never rendered (it fails validation); be safe anyway.
    let resources = crate::snapshot::select(cat, &entry.spec).ok()?;
    let values: Vec<Value> = resources.into_iter().map(|r| r.value).collect();
    let placement = PlacementRef {
        name: &key.name,
        namespace: key.namespace.as_deref(),
    };
    Some(render_for_cluster(
        &placement,
        &values,
        overrides,
        cluster,
        &cat.scopes,
    ))
}

/// The workloads an OCM Placement delivers through the ManifestWorkReplicaSets that name it.
pub fn ocm_workloads(cat: &Catalog, key: &PlacementKey) -> Vec<Manifest> {
    let mut out = Vec::new();
    for mwrs in &cat.manifest_work_replica_sets {
        let same_ns = cat.objects[mwrs.index].namespace == key.namespace;
        if !same_ns
            || !mwrs
                .spec
                .spec
                .placement_refs
                .iter()
                .any(|r| r.name == key.name)
        {
            continue;
        }
        for m in &mwrs.spec.spec.manifest_work_template.workload.manifests {
            let gvk = Gvk::from_api_version(
                m.get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                m.get("kind").and_then(Value::as_str).unwrap_or_default(),
            );
            out.push(Manifest {
                value: m.clone(),
                wave: wave_of(&gvk.group, &gvk.kind),
                envelope: None,
            });
        }
    }
    out
}

/// Every placement of `schedule` that selected `cluster`, rendered, in schedule order.
pub fn render_cluster(
    cat: &Catalog,
    schedule: &[PlacementSchedule],
    cluster: &ClusterTarget,
) -> Vec<PlacementManifests> {
    let overrides = overrides_of(cat);
    schedule
        .iter()
        .filter(|p| p.selected.iter().any(|c| c == cluster.name))
        .filter_map(|p| {
            let manifests = if p.key.kind == "Placement" {
                Ok(ocm_workloads(cat, &p.key))
            } else {
                render_placement(cat, &p.key, &overrides, cluster)?
            };
            Some(PlacementManifests {
                placement: p.key.clone(),
                manifests,
            })
        })
        .collect()
}
