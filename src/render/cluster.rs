//! Everything a schedule sends to one cluster: each KubeFleet placement that selected it,
//! rendered, the workloads of the ManifestWorkReplicaSets whose OCM Placement selected it, and
//! the plain ManifestWorks in its namespace.
//! The daemon, `gitfleet render` and `gitfleet plan` all go through here.

use super::overrides::Applicable;
use super::{
    render_for_cluster, render_with, wave_of, ClusterKey, ClusterTarget, Manifest, OverrideSet,
    PlacementRef, RenderError,
};
use crate::catalog::{Catalog, Entry};
use crate::model::ocm::ManifestWorkTemplate;
use crate::model::placement::Placement;
use crate::model::work::WorkConfig;
use crate::model::Gvk;
use crate::model::PlacementKey;
use crate::schedule::PlacementSchedule;
use crate::snapshot::SelectedResource;
use serde_json::Value;
use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

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
    // A placement whose selection fails is held (its schedule says so), never rendered.
    let resources = crate::snapshot::select(cat, &entry.spec).ok()?;
    let values: Vec<Arc<Value>> = resources.into_iter().map(|r| r.value).collect();
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

/// The workloads an OCM key delivers: for a Placement, those of the ManifestWorkReplicaSets that
/// name it; for a plain ManifestWork, its own. Each carries its work's options.
pub fn ocm_workloads(cat: &Catalog, key: &PlacementKey) -> Vec<Manifest> {
    let mut out = Vec::new();
    let mut push = |t: &ManifestWorkTemplate| {
        let work = WorkConfig::of(t);
        for m in &t.workload.manifests {
            let gvk = Gvk::from_api_version(
                m.get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                m.get("kind").and_then(Value::as_str).unwrap_or_default(),
            );
            out.push(Manifest {
                value: Arc::new(m.clone()),
                wave: wave_of(&gvk.group, &gvk.kind),
                envelope: None,
                work: work.clone(),
            });
        }
    };
    for (_, t) in cat.ocm_work_templates(key) {
        push(t);
    }
    out
}

/// Every placement of `schedule` that selected `cluster`, rendered, in schedule order.
pub fn render_cluster(
    cat: &Catalog,
    schedule: &[Arc<PlacementSchedule>],
    cluster: &ClusterTarget,
) -> Vec<PlacementManifests> {
    let renderer = CommitRenderer::new(cat, schedule);
    renderer
        .render(cluster)
        .into_iter()
        .map(|(i, manifests)| PlacementManifests {
            placement: schedule[i].key.clone(),
            manifests: Rc::try_unwrap(manifests).unwrap_or_else(|rc| (*rc).clone()),
        })
        .collect()
}

/// A commit's placements' selected resources, each selected once and shared by whoever needs
/// them: renderers of the commit, `gitfleet plan`'s comparison of placements, the daemon's
/// snapshot bookkeeping.
pub struct Selections<'a> {
    cat: &'a Catalog,
    /// Selections made already for the commit (the daemon's, when it read it).
    made: Option<&'a crate::snapshot::Selected>,
    /// By the placement's index in the catalog's objects; `None` for a selection error.
    memo: Rc<SelectionMemo>,
}

type SelectionMemo = RefCell<HashMap<usize, Option<Arc<Vec<SelectedResource>>>>>;

impl<'a> Selections<'a> {
    pub fn new(cat: &'a Catalog) -> Self {
        Self {
            cat,
            made: None,
            memo: Rc::default(),
        }
    }

    /// Selections that take each placement's from `made`, the selections of `cat`
    /// ([`crate::snapshot::select_all`]), and select only those it lacks.
    pub fn with(cat: &'a Catalog, made: &'a crate::snapshot::Selected) -> Self {
        Self {
            made: Some(made),
            ..Self::new(cat)
        }
    }

    /// The placement's selection; `None` for a selection error.
    pub fn of(&self, entry: &Entry<Placement>) -> Option<Arc<Vec<SelectedResource>>> {
        Self::memoised(self.cat, self.made, &self.memo, entry)
    }

    fn memoised(
        cat: &Catalog,
        made: Option<&crate::snapshot::Selected>,
        memo: &SelectionMemo,
        entry: &Entry<Placement>,
    ) -> Option<Arc<Vec<SelectedResource>>> {
        if let Some(s) = made.and_then(|m| m.get(&entry.index)) {
            return s.as_ref().ok().cloned();
        }
        if let Some(s) = memo.borrow().get(&entry.index) {
            return s.clone();
        }
        let s = crate::snapshot::select(cat, &entry.spec).ok().map(Arc::new);
        memo.borrow_mut().insert(entry.index, s.clone());
        s
    }

    /// A renderer of the world that shares these selections.
    pub fn renderer(&self, schedule: &'a [Arc<PlacementSchedule>]) -> CommitRenderer<'a> {
        let (cat, made, memo) = (self.cat, self.made, self.memo.clone());
        let select = move |e: &Entry<Placement>| Self::memoised(cat, made, &memo, e);
        CommitRenderer::with_selector(self.cat, schedule, Box::new(select))
    }

    pub fn of_key(&self, key: &PlacementKey) -> Option<Arc<Vec<SelectedResource>>> {
        self.of(self.cat.placement(&key.name, key.namespace.as_deref())?)
    }
}

/// One placement's manifests for one cluster, shared by the clusters that render alike.
pub type SharedManifests = Rc<Result<Vec<Manifest>, RenderError>>;

/// Renders one commit's schedule for many clusters. Each placement's selection and overrides
/// are worked out once, and its manifests rendered once per [`ClusterKey`] (what of a cluster the
/// overrides read) instead of once per cluster: most placements send every cluster the same
/// objects. A failed rendering is never shared, since its error names the cluster.
pub struct CommitRenderer<'a> {
    cat: &'a Catalog,
    schedule: &'a [Arc<PlacementSchedule>],
    overrides: OverrideSet<'a>,
    /// Indices in `schedule` of the placements that selected each cluster, in schedule order;
    /// built on first use (the daemon's step renders by placement, never by cluster, and
    /// indexing every binding of a large fleet at every look would be a real share of it).
    by_cluster: OnceCell<HashMap<&'a str, Vec<usize>>>,
    /// Per schedule entry, worked out on first use; `None` when the commit cannot render it.
    sources: Vec<OnceCell<Option<Source<'a>>>>,
    select: Box<Selector<'a>>,
    cache: RefCell<HashMap<(usize, ClusterKey), SharedManifests>>,
    twin: Option<Twin<'a>>,
}

/// Another commit's renderer whose renderings this one reuses, for the placements that have the
/// same key, selected resources and overrides in both commits (`gitfleet plan`'s base, for its
/// head: most placements are the same on both sides).
struct Twin<'a> {
    base: Rc<CommitRenderer<'a>>,
    by_key: HashMap<&'a PlacementKey, usize>,
    /// Per schedule entry of this renderer: the index of its twin in `base`'s schedule.
    of: Vec<OnceCell<Option<usize>>>,
}

/// A placement's selected resources (`None` for a selection error), as
/// [`crate::snapshot::select`] gives them; a caller that needs them elsewhere too can share them.
pub type Selector<'a> = dyn Fn(&Entry<Placement>) -> Option<Arc<Vec<SelectedResource>>> + 'a;

enum Source<'a> {
    /// The same for every cluster (OCM workloads).
    Fixed(SharedManifests),
    KubeFleet {
        applicable: Applicable<'a>,
        resources: Arc<Vec<SelectedResource>>,
    },
}

impl<'a> CommitRenderer<'a> {
    pub fn new(cat: &'a Catalog, schedule: &'a [Arc<PlacementSchedule>]) -> Self {
        let select =
            move |e: &Entry<Placement>| crate::snapshot::select(cat, &e.spec).ok().map(Arc::new);
        Self::with_selector(cat, schedule, Box::new(select))
    }

    /// A renderer that takes the placements' selections from `select`.
    pub fn with_selector(
        cat: &'a Catalog,
        schedule: &'a [Arc<PlacementSchedule>],
        select: Box<Selector<'a>>,
    ) -> Self {
        Self {
            cat,
            schedule,
            overrides: overrides_of(cat),
            by_cluster: OnceCell::new(),
            sources: schedule.iter().map(|_| OnceCell::new()).collect(),
            select,
            cache: RefCell::new(HashMap::new()),
            twin: None,
        }
    }

    /// This renderer, with no override applied (to tell what the overrides change).
    pub fn without_overrides(mut self) -> Self {
        self.overrides = OverrideSet::default();
        self.sources = self.schedule.iter().map(|_| OnceCell::new()).collect();
        self
    }

    /// The manifests the `i`-th placement of the schedule sends to `cluster` (whether or not
    /// the schedule selected it); `None` when the commit cannot render that placement.
    pub fn render_index(&self, i: usize, cluster: &ClusterTarget) -> Option<SharedManifests> {
        self.render_one(i, cluster, false)
    }

    /// This renderer, reusing `base`'s renderings (and filling its cache) for each placement
    /// that renders the same in both commits. See [`CommitRenderer::render_reusing`].
    pub fn reusing(mut self, base: Rc<CommitRenderer<'a>>) -> Self {
        self.twin = Some(Twin {
            by_key: base
                .schedule
                .iter()
                .enumerate()
                .map(|(j, p)| (&p.key, j))
                .collect(),
            of: self.schedule.iter().map(|_| OnceCell::new()).collect(),
            base,
        });
        self
    }

    /// The base renderer and the index there of placement `i`'s twin, if it has one.
    fn twin_of(&self, i: usize) -> Option<(&CommitRenderer<'a>, usize)> {
        let twin = self.twin.as_ref()?;
        let j = *twin.of[i].get_or_init(|| {
            let j = *twin.by_key.get(&self.schedule[i].key)?;
            match (self.source(i)?, twin.base.source(j)?) {
                (
                    Source::KubeFleet {
                        applicable: a,
                        resources: r,
                    },
                    Source::KubeFleet {
                        applicable: b,
                        resources: s,
                    },
                ) if a.same_as(b) && (Arc::ptr_eq(r, s) || r == s) => Some(j),
                _ => None,
            }
        });
        Some((&twin.base, j?))
    }

    /// Indices in the schedule of the placements that selected `cluster`, in schedule order.
    pub fn indices_of(&self, cluster: &str) -> &[usize] {
        let by_cluster = self.by_cluster.get_or_init(|| {
            let mut by_cluster: HashMap<&str, Vec<usize>> = HashMap::new();
            for (i, p) in self.schedule.iter().enumerate() {
                for c in &p.selected {
                    let list = by_cluster.entry(c.as_str()).or_default();
                    if list.last() != Some(&i) {
                        list.push(i);
                    }
                }
            }
            by_cluster
        });
        by_cluster.get(cluster).map_or(&[], Vec::as_slice)
    }

    fn source(&self, i: usize) -> Option<&Source<'a>> {
        self.sources[i]
            .get_or_init(|| {
                let key = &self.schedule[i].key;
                if key.kind.is_ocm() {
                    return Some(Source::Fixed(Rc::new(Ok(ocm_workloads(self.cat, key)))));
                }
                let entry = self.cat.placement(&key.name, key.namespace.as_deref())?;
                // A placement whose selection fails is held: nothing of it is rendered (the
                // rollout leaves what it placed; `plan` keeps the base's objects).
                let resources = (self.select)(entry)?;
                let placement = PlacementRef {
                    name: &key.name,
                    namespace: key.namespace.as_deref(),
                };
                Some(Source::KubeFleet {
                    applicable: Applicable::new(&placement, &self.overrides),
                    resources,
                })
            })
            .as_ref()
    }

    /// What [`render_cluster`] returns, as `(index in the schedule, manifests)`: equal
    /// renderings of one placement for two clusters are the same `Rc`.
    pub fn render(&self, cluster: &ClusterTarget) -> Vec<(usize, SharedManifests)> {
        self.render_reusing(cluster, false)
    }

    /// [`CommitRenderer::render`], taking what it can from the base renderer given to
    /// [`CommitRenderer::reusing`]: the same `Rc`s, so that unchanged objects are recognised
    /// without comparing them. `same_cluster` says the cluster has the same labels in the base;
    /// only then are renderings that substitute the cluster's name or labels reused (their cache
    /// key is the cluster's name alone).
    pub fn render_reusing(
        &self,
        cluster: &ClusterTarget,
        same_cluster: bool,
    ) -> Vec<(usize, SharedManifests)> {
        self.indices_of(cluster.name)
            .iter()
            .filter_map(|&i| Some((i, self.render_one(i, cluster, same_cluster)?)))
            .collect()
    }

    fn render_one(
        &self,
        i: usize,
        cluster: &ClusterTarget,
        same_cluster: bool,
    ) -> Option<SharedManifests> {
        let (applicable, resources) = match self.source(i)? {
            Source::Fixed(m) => return Some(m.clone()),
            Source::KubeFleet {
                applicable,
                resources,
            } => (applicable, resources),
        };
        let cluster_key = applicable.cluster_key(cluster);
        if let Some((base, j)) = self.twin_of(i) {
            if same_cluster || matches!(cluster_key, ClusterKey::Rules(_)) {
                return base.render_one(j, cluster, same_cluster);
            }
        }
        let key = (i, cluster_key);
        if let Some(m) = self.cache.borrow().get(&key) {
            if m.is_ok() {
                return Some(m.clone());
            }
        }
        let values: Vec<&Arc<Value>> = resources.iter().map(|r| &r.value).collect();
        let m = Rc::new(render_with(applicable, &values, cluster, &self.cat.scopes));
        if m.is_ok() {
            self.cache.borrow_mut().insert(key, m.clone());
        }
        Some(m)
    }
}
