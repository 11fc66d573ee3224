//! A commit's objects: read as Kubernetes reads YAML ([`crate::yaml`]) with their origin and the
//! line of every field, classified (docs/guides/repository-layout.md), decoded into the typed models and validated.
//! Every problem is returned at once as a located [`Diagnostic`].
//! Pure: it takes file contents, never reads them.

mod diagnostic;
mod limits;
pub mod parse;
mod strings;
pub mod unrendered;
mod validate;

pub use diagnostic::Diagnostic;

use crate::fast_hash::HashMap;
use crate::model::envelope::{ClusterResourceEnvelope, ResourceEnvelope};
use crate::model::member::{
    ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, MemberCluster,
};
use crate::model::ocm::{ManifestWorkReplicaSet, OcmPlacement};
use crate::model::overrides::{ClusterResourceOverride, ResourceOverride};
use crate::model::placement::Placement;
use crate::model::scope::{Scope, ScopeTable};
use crate::model::staged::{
    ApprovalRequest, ClusterResourcePlacementDisruptionBudget, ClusterResourcePlacementEviction,
    StagedUpdateRun, StagedUpdateStrategy,
};
use crate::model::work::ManifestWork;
use crate::model::{Gvk, Object, ObjectKey, Origin};
use parse::Document;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A file of the commit: its path relative to the repository root, and its bytes.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: String,
    pub content: Vec<u8>,
}

/// What an object is to gitfleet (docs/guides/repository-layout.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Class {
    Placement,
    Rollout,
    Override,
    Member,
    /// Anything a placement may select, envelopes included.
    Hub,
}

/// A typed object and the index of its raw [`Object`] in [`Catalog::objects`].
#[derive(Debug, Clone)]
pub struct Entry<T> {
    pub index: usize,
    pub spec: T,
}

/// Everything one commit declares.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// Every object, in file order (paths sorted), `List`s expanded.
    pub objects: Vec<Object>,
    pub classes: Vec<Class>,
    pub scopes: ScopeTable,
    pub placements: Vec<Entry<Placement>>,
    pub ocm_placements: Vec<Entry<OcmPlacement>>,
    pub manifest_work_replica_sets: Vec<Entry<ManifestWorkReplicaSet>>,
    /// Plain ManifestWorks: each delivered to the cluster its namespace names.
    pub manifest_works: Vec<Entry<ManifestWork>>,
    pub cluster_overrides: Vec<Entry<ClusterResourceOverride>>,
    pub resource_overrides: Vec<Entry<ResourceOverride>>,
    pub cluster_envelopes: Vec<Entry<ClusterResourceEnvelope>>,
    pub resource_envelopes: Vec<Entry<ResourceEnvelope>>,
    pub member_clusters: Vec<Entry<MemberCluster>>,
    pub managed_clusters: Vec<Entry<ManagedCluster>>,
    pub cluster_sets: Vec<Entry<ManagedClusterSet>>,
    pub cluster_set_bindings: Vec<Entry<ManagedClusterSetBinding>>,
    pub update_strategies: Vec<Entry<StagedUpdateStrategy>>,
    pub update_runs: Vec<Entry<StagedUpdateRun>>,
    pub approval_requests: Vec<Entry<ApprovalRequest>>,
    pub evictions: Vec<Entry<ClusterResourcePlacementEviction>>,
    pub disruption_budgets: Vec<Entry<ClusterResourcePlacementDisruptionBudget>>,
    /// What is accepted but should be written otherwise (a deprecated spelling), located as
    /// diagnostics are; never a reason to refuse the commit.
    pub warnings: Vec<Diagnostic>,
    /// Where each object's fields are written, to locate them by line; indexed like `objects`.
    positions: Vec<Arc<crate::yaml::Positions>>,
    /// Objects that repeat an identity defined earlier (reported; never selected).
    duplicates: std::collections::BTreeSet<usize>,
    /// The hub objects by kind and by namespace, built once the commit is loaded: resource
    /// selection looks objects up for every selector of every placement.
    hub: HubIndex,
}

/// Files parsed for an earlier commit, by path, with the digest of the bytes they were parsed
/// from: a commit that changes one file of a thousand parses one (the daemon reads every new
/// commit whole). Documents are shared out of it: the objects of an unchanged file
/// are the very values of the last commit's.
#[derive(Debug, Default)]
pub struct ParseCache {
    files: HashMap<String, ParsedFile>,
    reused: usize,
    decoded: DecodeCache,
}

/// Typed decodes of fleet objects that decoded and validated cleanly, by the address of the
/// value they were decoded from (kept, so that the address stays its own): an unchanged
/// file's objects are the very values of the last commit (see [`ParseCache`]), and decoding
/// every placement again would dominate validating a commit that changed one file.
#[derive(Default)]
pub(crate) struct DecodeCache {
    entries: HashMap<(std::any::TypeId, usize), Decoded>,
}

struct Decoded {
    /// Never read: held so that no other value can take its address while it is a key.
    _value: Arc<serde_json::Value>,
    typed: Box<dyn std::any::Any + Send + Sync>,
    used: bool,
}

impl std::fmt::Debug for DecodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeCache")
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl DecodeCache {
    /// The clean decode of `value` as a `T` that was kept, if any.
    pub(crate) fn get<T: Clone + 'static>(&mut self, value: &Arc<serde_json::Value>) -> Option<T> {
        let key = (std::any::TypeId::of::<T>(), Arc::as_ptr(value) as usize);
        // The entry holds its value: no other live value can have that address.
        let d = self.entries.get_mut(&key)?;
        d.used = true;
        d.typed.downcast_ref::<T>().cloned()
    }

    /// Keeps `typed`, the clean decode of `value`.
    pub(crate) fn put<T: Send + Sync + 'static>(
        &mut self,
        value: &Arc<serde_json::Value>,
        typed: T,
    ) {
        let key = (std::any::TypeId::of::<T>(), Arc::as_ptr(value) as usize);
        self.entries.insert(
            key,
            Decoded {
                _value: value.clone(),
                typed: Box::new(typed),
                used: true,
            },
        );
    }

    /// Forgets what the last load did not use, and starts counting again.
    fn sweep(&mut self) {
        self.entries.retain(|_, d| std::mem::take(&mut d.used));
    }
}

#[derive(Debug)]
struct ParsedFile {
    digest: [u8; 32],
    docs: Vec<Document>,
    errors: Vec<parse::ParseError>,
}

impl ParseCache {
    /// Files the last load took from the cache.
    pub fn reused(&self) -> usize {
        self.reused
    }

    fn parse(&mut self, f: &SourceFile) -> (Vec<Document>, Vec<parse::ParseError>) {
        use sha2::Digest;
        let digest: [u8; 32] = sha2::Sha256::digest(&f.content).into();
        if let Some(p) = self.files.get(&f.path).filter(|p| p.digest == digest) {
            self.reused += 1;
            return (p.docs.clone(), p.errors.clone());
        }
        let (docs, errors) = parse::parse_file(&f.path, &f.content);
        self.files.insert(
            f.path.clone(),
            ParsedFile {
                digest,
                docs: docs.clone(),
                errors: errors.clone(),
            },
        );
        (docs, errors)
    }
}

/// Hub objects (see [`Catalog::hub_objects`]) by group and kind and by namespace, as indices in
/// `objects`, ascending.
#[derive(Debug, Clone, Default)]
struct HubIndex {
    by_kind: HashMap<String, HashMap<String, KindIndex>>,
    by_namespace: HashMap<String, Vec<usize>>,
    /// Placements by namespace (`""`: cluster-scoped) and name, as indices in `placements`
    /// (the first of a name): a step looks every placement up.
    placements: HashMap<String, HashMap<String, usize>>,
}

/// The hub objects of one kind, and by name: a selector that names its object (most do) finds
/// it without reading every object of the kind (a scan per selector is quadratic in a fleet
/// whose placements each name their own namespace).
#[derive(Debug, Clone, Default)]
struct KindIndex {
    all: Vec<usize>,
    by_name: HashMap<String, Vec<usize>>,
}

/// The kinds gitfleet understands as APIs of its own, with the versions each accepts.
const FLEET_KINDS: &[(&str, &str, &[&str], Class)] = &[
    (
        PLACEMENT,
        "ClusterResourcePlacement",
        &["v1", "v1beta1"],
        Class::Placement,
    ),
    (
        PLACEMENT,
        "ResourcePlacement",
        &["v1", "v1beta1"],
        Class::Placement,
    ),
    (
        PLACEMENT,
        "ClusterResourceOverride",
        &["v1alpha1", "v1beta1", "v1"],
        Class::Override,
    ),
    (
        PLACEMENT,
        "ResourceOverride",
        &["v1alpha1", "v1beta1", "v1"],
        Class::Override,
    ),
    (
        PLACEMENT,
        "ClusterResourceEnvelope",
        &["v1beta1"],
        Class::Hub,
    ),
    (PLACEMENT, "ResourceEnvelope", &["v1beta1"], Class::Hub),
    // v1alpha1 still serves the cluster-scoped staged-update kinds, eviction and disruption
    // budget in KubeFleet's apis/placement/v1alpha1.
    (
        PLACEMENT,
        "ClusterStagedUpdateStrategy",
        &["v1", "v1beta1", "v1alpha1"],
        Class::Rollout,
    ),
    (
        PLACEMENT,
        "StagedUpdateStrategy",
        &["v1", "v1beta1"],
        Class::Rollout,
    ),
    (
        PLACEMENT,
        "ClusterStagedUpdateRun",
        &["v1", "v1beta1", "v1alpha1"],
        Class::Rollout,
    ),
    (
        PLACEMENT,
        "StagedUpdateRun",
        &["v1", "v1beta1"],
        Class::Rollout,
    ),
    (
        PLACEMENT,
        "ClusterApprovalRequest",
        &["v1", "v1beta1", "v1alpha1"],
        Class::Rollout,
    ),
    (
        PLACEMENT,
        "ApprovalRequest",
        &["v1", "v1beta1"],
        Class::Rollout,
    ),
    (
        PLACEMENT,
        "ClusterResourcePlacementEviction",
        &["v1beta1", "v1alpha1"],
        Class::Rollout,
    ),
    (
        PLACEMENT,
        "ClusterResourcePlacementDisruptionBudget",
        &["v1beta1", "v1alpha1"],
        Class::Rollout,
    ),
    (
        "cluster.kubernetes-fleet.io",
        "MemberCluster",
        &["v1", "v1beta1"],
        Class::Member,
    ),
    (OCM_CLUSTER, "Placement", &["v1beta1"], Class::Placement),
    // Written by OCM's scheduler; a repository's is a hub object like any other, decoded only to
    // be checked as the API server checks it.
    (OCM_CLUSTER, "PlacementDecision", &["v1beta1"], Class::Hub),
    (OCM_CLUSTER, "ManagedCluster", &["v1"], Class::Member),
    (
        OCM_CLUSTER,
        "ManagedClusterSet",
        &["v1beta2", "v1beta1"],
        Class::Member,
    ),
    (
        OCM_CLUSTER,
        "ManagedClusterSetBinding",
        &["v1beta2", "v1beta1"],
        Class::Member,
    ),
    (
        "work.open-cluster-management.io",
        "ManifestWorkReplicaSet",
        &["v1alpha1"],
        Class::Placement,
    ),
    // Delivered to the cluster its namespace names; classed so no placement selects it.
    (
        "work.open-cluster-management.io",
        "ManifestWork",
        &["v1"],
        Class::Placement,
    ),
];

const PLACEMENT: &str = "placement.kubernetes-fleet.io";
const OCM_CLUSTER: &str = "cluster.open-cluster-management.io";

/// Namespaces every Kubernetes cluster has, so objects may live there without declaring them.
pub const BUILTIN_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

impl Catalog {
    /// Parses, classifies and validates the files of one commit. The catalog holds every object
    /// that could be understood; the diagnostics list every problem, sorted by file and line.
    pub fn load(files: &[SourceFile]) -> (Catalog, Vec<Diagnostic>) {
        Catalog::load_with(files, None)
    }

    /// [`Catalog::load`], taking each file's documents from `cache` when the file is unchanged
    /// since the cache saw it (and keeping this commit's files there for the next).
    pub fn load_cached(files: &[SourceFile], cache: &mut ParseCache) -> (Catalog, Vec<Diagnostic>) {
        Catalog::load_with(files, Some(cache))
    }

    fn load_with(
        files: &[SourceFile],
        mut cache: Option<&mut ParseCache>,
    ) -> (Catalog, Vec<Diagnostic>) {
        let mut files: Vec<&SourceFile> = files.iter().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut cat = Catalog {
            scopes: ScopeTable::builtin(),
            ..Default::default()
        };
        let mut diags = Vec::new();
        if let Some(c) = cache.as_deref_mut() {
            let paths: crate::fast_hash::HashSet<&str> =
                files.iter().map(|f| f.path.as_str()).collect();
            c.files.retain(|p, _| paths.contains(p.as_str()));
            c.reused = 0;
        }
        for f in files {
            let (docs, errors) = match cache.as_deref_mut() {
                Some(c) => c.parse(f),
                None => parse::parse_file(&f.path, &f.content),
            };
            diags.extend(errors.into_iter().map(|e| Diagnostic {
                object: format!("document {}", e.origin.document),
                origin: e.origin,
                field: String::new(),
                message: e.message,
            }));
            for doc in docs {
                cat.add_document(doc, &mut diags);
            }
        }
        validate::run(
            &mut cat,
            &mut diags,
            cache.as_deref_mut().map(|c| &mut c.decoded),
        );
        if let Some(c) = cache {
            c.decoded.sweep();
        }
        cat.index_hub_objects();
        diags.sort();
        diags.dedup();
        (cat, diags)
    }

    /// Turns one parsed document (a `List` becomes its items) into objects.
    fn add_document(&mut self, doc: Document, diags: &mut Vec<Diagnostic>) {
        let is_list = doc.value.get("kind").and_then(|k| k.as_str()) == Some("List")
            && doc.value.get("items").is_some();
        if !is_list {
            self.add_object(doc, diags);
            return;
        }
        let positions = doc.positions.items(&doc.value, "items");
        let items_line = doc.line("items");
        let Document { origin, value, .. } = doc;
        let mut value = Arc::unwrap_or_clone(value);
        match value.get_mut("items").and_then(|i| i.as_array_mut()) {
            Some(items) => {
                let items = std::mem::take(items);
                let mut positions = positions.into_iter();
                for item in items {
                    let positions = positions.next().unwrap_or_default();
                    let origin = Origin {
                        line: positions.root_line().unwrap_or(origin.line),
                        ..origin.clone()
                    };
                    self.add_object(
                        Document {
                            origin,
                            value: Arc::new(item),
                            positions: Arc::new(positions),
                        },
                        diags,
                    );
                }
            }
            None => diags.push(Diagnostic {
                origin: Origin {
                    line: items_line,
                    ..origin
                },
                object: "List".into(),
                field: "items".into(),
                message: "must be a list of objects".into(),
            }),
        }
    }

    fn add_object(&mut self, doc: Document, diags: &mut Vec<Diagnostic>) {
        let at = |field: &str, object: String, message: String| Diagnostic {
            origin: Origin {
                line: doc.line(field),
                ..doc.origin.clone()
            },
            object,
            field: field.into(),
            message,
        };
        let fallback = format!("document {}", doc.origin.document);
        let Some(map) = doc.value.as_object() else {
            diags.push(at(
                "",
                fallback,
                "a Kubernetes object must be a mapping".into(),
            ));
            return;
        };
        let text = |k: &str| {
            map.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let name = map
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string();
        let object = match (kind.is_empty(), name.is_empty()) {
            (false, false) => format!("{kind}/{name}"),
            (false, true) => format!("{kind}/?"),
            _ => fallback,
        };
        let mut ok = true;
        for (field, value) in [("apiVersion", &api_version), ("kind", &kind)] {
            if value.is_empty() {
                diags.push(at(
                    field,
                    object.clone(),
                    "Required value: must be a non-empty string".into(),
                ));
                ok = false;
            }
        }
        if name.is_empty() {
            let msg = if map
                .get("metadata")
                .and_then(|m| m.get("generateName"))
                .is_some()
            {
                "Required value: generateName is not supported; gitfleet needs a stable name"
            } else {
                "Required value: name is required"
            };
            diags.push(at("metadata.name", object.clone(), msg.into()));
            ok = false;
        }
        if !ok {
            return;
        }
        let namespace = map
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(|n| n.as_str())
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let gvk = Gvk::from_api_version(&api_version, &kind);
        let class = class_of(&gvk);
        self.objects.push(Object {
            origin: doc.origin,
            gvk,
            name,
            namespace,
            value: doc.value,
        });
        self.classes.push(class);
        self.positions.push(doc.positions);
    }

    /// The rules between this commit and the previous one the daemon served, as an API server
    /// applies them on update: a staged update run's immutable fields and forbidden state
    /// transitions, an approval request's and an eviction's immutable spec. A run, request or
    /// eviction is the same object in both commits when kind, namespace and name agree.
    pub fn update_diagnostics(&self, old: &Catalog) -> Vec<Diagnostic> {
        fn same<T>(
            new_cat: &Catalog,
            old_cat: &Catalog,
            new: &[Entry<T>],
            old: &[Entry<T>],
            problems: impl Fn(&T, &T) -> Vec<crate::model::Problem>,
            out: &mut Vec<Diagnostic>,
        ) {
            for n in new {
                let id = new_cat.objects[n.index].key();
                let Some(o) = old.iter().find(|o| old_cat.objects[o.index].key() == id) else {
                    continue;
                };
                for p in problems(&n.spec, &o.spec) {
                    out.push(new_cat.diagnostic(n.index, &p.field, p.message));
                }
            }
        }
        let mut out = Vec::new();
        same(
            self,
            old,
            &self.update_runs,
            &old.update_runs,
            |n, o| n.update_problems(o),
            &mut out,
        );
        same(
            self,
            old,
            &self.approval_requests,
            &old.approval_requests,
            |n, o| n.update_problems(o),
            &mut out,
        );
        same(
            self,
            old,
            &self.evictions,
            &old.evictions,
            |n, o| n.update_problems(o),
            &mut out,
        );
        out
    }

    /// The line of `field` in object `index`, for diagnostics.
    pub fn diagnostic(&self, index: usize, field: &str, message: impl Into<String>) -> Diagnostic {
        let object = &self.objects[index];
        Diagnostic {
            origin: Origin {
                line: self.positions[index]
                    .line(&object.value, field)
                    .unwrap_or(object.origin.line),
                ..object.origin.clone()
            },
            object: object.display_name(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// What YAML made of a plain scalar at `field` of object `index`, when it made a boolean,
    /// number or null of it (see [`crate::yaml::Positions::hint`]).
    pub fn yaml_hint(&self, index: usize, field: &str) -> Option<String> {
        self.positions[index].hint(&self.objects[index].value, field)
    }

    /// Objects a placement may select (everything that is not a fleet API).
    pub fn hub_objects(&self) -> impl Iterator<Item = &Object> {
        self.objects
            .iter()
            .enumerate()
            .filter(|(i, _)| self.is_hub_object(*i))
            .map(|(_, o)| o)
    }

    fn is_hub_object(&self, index: usize) -> bool {
        self.classes[index] == Class::Hub && !self.duplicates.contains(&index)
    }

    fn index_hub_objects(&mut self) {
        let mut hub = HubIndex::default();
        for (i, o) in self.objects.iter().enumerate() {
            if !self.is_hub_object(i) {
                continue;
            }
            let kind = hub
                .by_kind
                .entry(o.gvk.group.clone())
                .or_default()
                .entry(o.gvk.kind.clone())
                .or_default();
            kind.all.push(i);
            kind.by_name.entry(o.name.clone()).or_default().push(i);
            if let Some(ns) = &o.namespace {
                hub.by_namespace.entry(ns.clone()).or_default().push(i);
            }
        }
        for (i, p) in self.placements.iter().enumerate() {
            let ns = self.objects[p.index].namespace.clone().unwrap_or_default();
            hub.placements
                .entry(ns)
                .or_default()
                .entry(p.spec.metadata.name.clone())
                .or_insert(i);
        }
        self.hub = hub;
    }

    /// The hub objects of one group and kind, in [`Catalog::hub_objects`] order.
    pub fn hub_objects_of_kind<'a>(
        &'a self,
        group: &str,
        kind: &str,
    ) -> impl Iterator<Item = &'a Object> + 'a {
        let indices = self.hub.by_kind.get(group).and_then(|k| k.get(kind));
        indices
            .into_iter()
            .flat_map(|k| &k.all)
            .map(|&i| &self.objects[i])
    }

    /// The hub objects of one group and kind named `name` (of any namespace), in
    /// [`Catalog::hub_objects`] order.
    pub fn hub_objects_named<'a>(
        &'a self,
        group: &str,
        kind: &str,
        name: &str,
    ) -> impl Iterator<Item = &'a Object> + 'a {
        let indices = self
            .hub
            .by_kind
            .get(group)
            .and_then(|k| k.get(kind))
            .and_then(|k| k.by_name.get(name));
        indices.into_iter().flatten().map(|&i| &self.objects[i])
    }

    /// The hub objects in namespace `ns`, in [`Catalog::hub_objects`] order.
    pub fn hub_objects_in<'a>(&'a self, ns: &str) -> impl Iterator<Item = &'a Object> + 'a {
        let indices = self.hub.by_namespace.get(ns);
        indices.into_iter().flatten().map(|&i| &self.objects[i])
    }

    pub fn scope_of(&self, gvk: &Gvk) -> Option<Scope> {
        self.scopes.scope(&gvk.group, &gvk.kind)
    }

    /// The key of a KubeFleet placement of this catalog (its namespace is its object's).
    pub fn placement_key(&self, entry: &Entry<Placement>) -> crate::model::PlacementKey {
        crate::model::PlacementKey {
            kind: entry.spec.kind,
            namespace: self.objects[entry.index].namespace.clone(),
            name: entry.spec.metadata.name.clone(),
        }
    }

    /// Finds a placement by kind-insensitive name: a CRP when `namespace` is `None`, else an RP.
    pub fn placement(&self, name: &str, namespace: Option<&str>) -> Option<&Entry<Placement>> {
        let is = |p: &&Entry<Placement>| {
            p.spec.metadata.name == name && self.objects[p.index].namespace.as_deref() == namespace
        };
        let indexed = self
            .hub
            .placements
            .get(namespace.unwrap_or_default())
            .and_then(|names| names.get(name))
            .and_then(|&i| self.placements.get(i))
            .filter(is);
        // A catalog not built by `load` has no index.
        indexed.or_else(|| self.placements.iter().find(is))
    }

    /// The placement references of the ManifestWorkReplicaSets that name OCM Placement
    /// `name` of `namespace`, with the index of their object: whose `rolloutStrategy` paces
    /// the placement's workloads.
    pub fn replica_set_refs<'c>(
        &'c self,
        namespace: Option<&'c str>,
        name: &'c str,
    ) -> impl Iterator<Item = (usize, &'c crate::model::ocm::LocalPlacementReference)> + 'c {
        self.manifest_work_replica_sets
            .iter()
            .filter(move |m| self.objects[m.index].namespace.as_deref() == namespace)
            .flat_map(move |m| {
                m.spec
                    .spec
                    .placement_refs
                    .iter()
                    .filter(move |r| r.name == name)
                    .map(move |r| (m.index, r))
            })
    }

    /// The work templates an OCM key delivers, with the index of their object: for a Placement,
    /// those of the ManifestWorkReplicaSets that name it; for a plain ManifestWork, its own.
    pub fn ocm_work_templates(
        &self,
        key: &crate::model::PlacementKey,
    ) -> Vec<(usize, &crate::model::ocm::ManifestWorkTemplate)> {
        use crate::model::PlacementKind;
        match key.kind {
            PlacementKind::ManifestWork => self
                .manifest_works
                .iter()
                .filter(|w| {
                    w.spec.metadata.name == key.name
                        && self.objects[w.index].namespace == key.namespace
                })
                .map(|w| (w.index, &w.spec.spec))
                .take(1)
                .collect(),
            PlacementKind::OcmPlacement => self
                .manifest_work_replica_sets
                .iter()
                .filter(|m| {
                    self.objects[m.index].namespace == key.namespace
                        && m.spec
                            .spec
                            .placement_refs
                            .iter()
                            .any(|r| r.name == key.name)
                })
                .map(|m| (m.index, &m.spec.spec.manifest_work_template))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Counts of objects by kind, for the one-line summary.
    pub fn counts_by_kind(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for o in &self.objects {
            *counts.entry(o.gvk.kind.clone()).or_insert(0) += 1;
        }
        counts
    }

    pub fn key_index(&self) -> BTreeMap<ObjectKey, usize> {
        self.objects
            .iter()
            .enumerate()
            .map(|(i, o)| (o.key(), i))
            .collect()
    }
}

/// The classification of docs/guides/repository-layout.md; versions are checked during validation.
pub fn class_of(gvk: &Gvk) -> Class {
    FLEET_KINDS
        .iter()
        .find(|(g, k, _, _)| *g == gvk.group && *k == gvk.kind)
        .map(|(_, _, _, c)| *c)
        .unwrap_or(Class::Hub)
}

/// The versions gitfleet accepts for a fleet API kind; `None` for kinds that are not fleet APIs.
pub fn fleet_versions(gvk: &Gvk) -> Option<&'static [&'static str]> {
    FLEET_KINDS
        .iter()
        .find(|(g, k, _, _)| *g == gvk.group && *k == gvk.kind)
        .map(|(_, _, v, _)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loading with a parse cache gives what loading without one gives, commit after commit
    /// (a file changed, one added, one removed, one that does not parse), and parses only the
    /// files that changed.
    #[test]
    fn a_cached_load_is_a_plain_load_and_reuses_unchanged_files() {
        let files = |version: &str, extra: Option<&str>| -> Vec<SourceFile> {
            let mut f = vec![
                ("a.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n".to_string()),
                (
                    "b.yaml",
                    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b, namespace: a}}\ndata: {{v: '{version}'}}\n"),
                ),
                ("c.yaml", "kind: [broken\n".to_string()),
                // Fleet objects: one sound (its decode is kept), one that does not decode.
                (
                    "e.yaml",
                    "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
                     metadata: {name: e}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: a}]\n"
                        .to_string(),
                ),
                (
                    "f.yaml",
                    "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
                     metadata: {name: f}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: a}]\n\
                     \x20 policy: {placementType: Sometimes}\n"
                        .to_string(),
                ),
            ];
            if let Some(e) = extra {
                f.push(("d.yaml", e.to_string()));
            }
            f.into_iter()
                .map(|(p, c)| SourceFile {
                    path: p.into(),
                    content: c.into_bytes(),
                })
                .collect()
        };
        let mut cache = ParseCache::default();
        let commits = [
            (files("1", None), 0),
            (files("2", None), 4),
            (
                files(
                    "2",
                    Some("apiVersion: v1\nkind: Namespace\nmetadata: {name: d}\n"),
                ),
                5,
            ),
            (files("2", None), 5),
        ];
        for (i, (commit, reused)) in commits.iter().enumerate() {
            let plain = Catalog::load(commit);
            let cached = Catalog::load_cached(commit, &mut cache);
            // (The hub index is hash maps: its Debug order is not stable, its content follows.)
            let shape = |c: &Catalog| {
                format!(
                    "{:?} {:?} {:?} {:?} {:?}",
                    c.objects, c.classes, c.placements, c.positions, c.duplicates
                )
            };
            assert_eq!(shape(&plain.0), shape(&cached.0), "commit {i}");
            assert_eq!(plain.1, cached.1, "commit {i}");
            assert!(!plain.1.is_empty(), "c.yaml is reported");
            assert!(
                plain.1.iter().any(|d| d.origin.file == "f.yaml"),
                "f.yaml is reported: {:?}",
                plain.1
            );
            assert_eq!(cache.reused(), *reused, "commit {i}");
            // The sound placement's decode is kept, and found by the next commit.
            assert_eq!(cache.decoded.entries.len(), 1, "commit {i}");
            let e = &cached.0.placements[0];
            assert_eq!(
                cache
                    .decoded
                    .get::<Placement>(&cached.0.objects[e.index].value)
                    .map(|p| p.metadata.name),
                Some("e".to_string())
            );
        }
    }

    fn load(files: &[(&str, &str)]) -> (Catalog, Vec<String>) {
        let files: Vec<SourceFile> = files
            .iter()
            .map(|(path, text)| SourceFile {
                path: path.to_string(),
                content: text.as_bytes().to_vec(),
            })
            .collect();
        let (cat, diags) = Catalog::load(&files);
        (cat, diags.iter().map(|d| d.to_string()).collect())
    }

    #[test]
    fn typed_fleet_fields_read_yaml_as_kubectl_sends_it() {
        let crp = "apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: app}\n  policy:\n    placementType: PickN\n    numberOfClusters: 010\n";
        let ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n";
        let (cat, diags) = load(&[("p.yaml", crp), ("ns.yaml", ns)]);
        assert!(diags.is_empty(), "{diags:?}");
        let policy = cat.placements[0].spec.spec.policy.as_ref().unwrap();
        assert_eq!(policy.number_of_clusters, Some(8));
    }

    #[test]
    fn metadata_problems_name_the_key_at_its_line() {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n  namespace: default\n  labels:\n    ok: v\n    \"bad key!\": v\n  annotations:\n    a/b/c: x\n";
        let (_, diags) = load(&[("c.yaml", cm)]);
        assert_eq!(
            diags,
            [
                "c.yaml:4: ConfigMap/Bad_Name: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                "c.yaml:8: ConfigMap/Bad_Name: metadata.labels[\"bad key!\"]: Invalid value: \"bad key!\": key name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                "c.yaml:10: ConfigMap/Bad_Name: metadata.annotations[\"a/b/c\"]: Invalid value: \"a/b/c\": key a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ]
        );
    }

    #[test]
    fn list_items_sit_at_their_own_line_with_their_fields() {
        let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: b\n    labels: {on: off}\n";
        let (cat, diags) = load(&[("l.yaml", list)]);
        assert_eq!(
            diags,
            ["l.yaml:11: Namespace/b: metadata.labels.true: Invalid value: must be a string, not a boolean; YAML reads `off` as the boolean false here; quote it (\"off\") to keep the text"]
        );
        let lines: Vec<usize> = cat.objects.iter().map(|o| o.origin.line).collect();
        assert_eq!(lines, [4, 7]);
    }
}
