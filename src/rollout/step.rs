//! One rollout step for one commit: given the commit's catalog and schedule, the fleet, the
//! state and the clock, which cluster gets which snapshot now — the [`Work`] for members — and,
//! once the work is done ([`absorb`]), the state it leaves.
//!
//! The pacing is the parameter ([`Pacing`]): `gitfleet apply` steps immediately (everything
//! now, no budget), `gitfleet run` at each placement's own pace (KubeFleet's RollingUpdate per
//! placement, [`super::rolling`]). Everything else — what a cluster should run, the manifests,
//! the apply strategy, the `gitfleet.io/resource-snapshot` stamp, removals — is decided here
//! once for both, so an `apply` followed by a `run` of the same commit finds nothing to change.
//!
//! A placement the schedule holds for invalid resource selectors ([`PlacementSchedule::held`])
//! gets no work at all, as KubeFleet's placement controller takes no snapshot of it and leaves
//! its works alone: nothing applied, pruned or swept, no new snapshot, its staged runs not
//! advanced. Unlike KubeFleet, whose rollout would still roll the old resource snapshot to
//! clusters newly bound meanwhile, its clusters stay exactly as they were.

use crate::fast_hash::{HashMap, HashSet};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;

use super::approval::{Approval, Request};
use super::rolling::{plan_step, BindingHealth, Revision, RollingParams, RolloutBinding, Target};
use super::staged::{self, RunStatus};
use super::state::{ClusterState, PlacementState, RolloutState};
use super::strategy::{ApplyStrategy, Strategy};
use super::work::{Action, Manifests, Outcome, Prune, Sweep, Work};
use crate::catalog::Catalog;
use crate::model::placement::{
    PlacementPolicy, PlacementSpec, PlacementType, RollingUpdateConfig, RolloutStrategyType,
};
use crate::model::staged::StagedUpdateRun;
use crate::model::{ObjectKey, PlacementKey};
use crate::render::cluster::{ocm_workloads, overrides_of, render_placement, Selections};
use crate::render::{ClusterTarget, Manifest};
use crate::schedule::{same_schedule, BindingState, Fleet, PlacementSchedule};

/// How fast a step moves the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// `gitfleet apply`: every selected cluster gets every placement's current manifests now,
    /// whatever its strategy, without a budget; what a member no longer receives is swept from
    /// its records ([`Sweep`]).
    Immediate,
    /// `gitfleet run`: each placement at its own pace. KubeFleet's RollingUpdate within the
    /// budget of `strategy.rollingUpdate`; OCM workloads to every selected cluster at once;
    /// `strategy.type: External` placements move only as staged update runs say (see
    /// [`Pace::Staged`]).
    Rolling,
}

/// How one placement moves in a step, from the pacing and its strategy.
#[derive(Debug, Clone, PartialEq)]
pub enum Pace {
    /// Every binding now.
    Now,
    /// KubeFleet's RollingUpdate (kubefleet.md §3.1).
    Rolling {
        target: Target,
        params: RollingParams,
    },
    /// `strategy.type: External`: the staged update runs of the commit decide which clusters
    /// move, stage by stage (kubefleet.md §3.3, [`super::staged`]); without a run nothing moves.
    Staged,
}

impl Pace {
    /// The pace of a KubeFleet placement with `spec` under `pacing`.
    pub fn of(pacing: Pacing, spec: &PlacementSpec) -> Pace {
        match (pacing, spec.strategy.type_.unwrap_or_default()) {
            (Pacing::Immediate, _) => Pace::Now,
            (Pacing::Rolling, RolloutStrategyType::External) => Pace::Staged,
            (Pacing::Rolling, RolloutStrategyType::RollingUpdate) => Pace::Rolling {
                target: target_of(spec.policy.as_ref()),
                params: rolling_params(spec.strategy.rolling_update.as_ref()),
            },
        }
    }

    /// How status names the pace.
    pub fn strategy(&self) -> Strategy {
        match self {
            Pace::Now => Strategy::Immediate,
            Pace::Rolling { .. } => Strategy::RollingUpdate,
            Pace::Staged => Strategy::External,
        }
    }
}

/// How many clusters a placement targets (kubefleet.md §3.1 step 2).
pub fn target_of(policy: Option<&PlacementPolicy>) -> Target {
    match policy.map_or(PlacementType::PickAll, |p| p.placement_type) {
        PlacementType::PickAll => Target::PickAll,
        PlacementType::PickFixed => Target::Count(policy.map_or(0, |p| p.cluster_names.len())),
        PlacementType::PickN => Target::Count(
            policy
                .and_then(|p| p.number_of_clusters)
                .unwrap_or(0)
                .max(0) as usize,
        ),
    }
}

/// `strategy.rollingUpdate` with KubeFleet's defaults.
pub fn rolling_params(ru: Option<&RollingUpdateConfig>) -> RollingParams {
    let d = RollingParams::default();
    let Some(ru) = ru else { return d };
    RollingParams {
        max_unavailable: ru.max_unavailable.clone().unwrap_or(d.max_unavailable),
        max_surge: ru.max_surge.clone().unwrap_or(d.max_surge),
        unavailable_period_seconds: ru
            .unavailable_period_seconds
            .map_or(d.unavailable_period_seconds, |s| s.max(0) as u64),
    }
}

/// What a step needs besides the state.
pub struct Input<'a> {
    pub cat: &'a Catalog,
    /// The commit being rolled out (recorded in the snapshot history).
    pub commit: &'a str,
    /// The scheduler's result for the commit, bindings included.
    pub schedule: &'a [Arc<PlacementSchedule>],
    /// The clusters, with the labels overrides read.
    pub fleet: &'a Fleet,
    /// Members that cannot be reached now, and why: nothing is pushed to them in this step.
    pub unreachable: &'a BTreeMap<String, String>,
    /// Only these placements are stepped (all when `None`).
    pub only: Option<&'a BTreeSet<PlacementKey>>,
    /// Unix seconds.
    pub now: u64,
    /// What staged update runs need besides the commit.
    pub staged: StagedInput,
    /// The commit's selections, when they were made already ([`crate::snapshot::select_all`]);
    /// else each placement's is made here.
    pub selected: Option<&'a crate::snapshot::Selected>,
}

/// The inputs of staged update runs that come from outside the commit.
#[derive(Debug, Clone, Default)]
pub struct StagedInput {
    /// Accepted approvals, by request key ([`Request::key`]): what the tag verifier accepted.
    pub approvals: BTreeMap<String, Approval>,
    /// The catalogs of other commits that runs render from (a run renders the tree of the
    /// commit it was initialised at, or of its pinned snapshot), by full commit id.
    pub catalogs: BTreeMap<String, Arc<Catalog>>,
}

/// Per placement: what the step decided, for status and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSummary {
    pub placement: PlacementKey,
    pub strategy: Strategy,
    pub target: usize,
    pub applying: Vec<String>,
    pub removing: Vec<String>,
    pub waiting: Vec<String>,
    pub up_to_date: Vec<String>,
    /// Seconds until the placement wants another look (0: settled).
    pub requeue_after: u64,
    /// A line for people when the placement is not rolled out (External strategy, render error).
    pub note: Option<String>,
    /// What each rendered cluster should run now.
    pub desired: BTreeMap<String, Revision>,
    /// Clusters whose manifests the overrides change (worked out under rolling pacing only:
    /// status's Overridden reason).
    pub overridden: BTreeSet<String>,
    /// Clusters the placement cannot be rendered for, and why.
    pub render_errors: BTreeMap<String, String>,
    /// Those of `render_errors` that KubeFleet reports as `WorkSynchronized=False` rather than
    /// `Overridden=False` ([`crate::render::RenderError::is_work_sync_failure`]).
    pub work_sync_errors: BTreeSet<String>,
    /// ReportDiff apply strategy: status reports DiffReported instead of Applied/Available.
    pub report_diff: bool,
    /// `Kind/namespace/name` (or `Kind/name`) of what the placement selects.
    pub selected_resources: Vec<String>,
    /// What each rendered cluster should hold, by [`ObjectKey`] (shared between
    /// clusters with the same rendering): what the deletion guard counts against.
    pub objects: BTreeMap<String, Arc<BTreeSet<ObjectKey>>>,
    /// The settled step this one is, by its number in the [`StepMemo`]: two summaries with the
    /// same number had the same inputs (spec, selection, schedule, state) and outcome, so what
    /// is derived from them alone (the status) can be kept rather than derived again.
    pub settled: Option<u64>,
    /// Held for invalid resource selectors ([`PlacementSchedule::held`]): nothing of it is
    /// applied, pruned or swept, and the deletion guard counts none of its objects as deleted.
    pub held: bool,
}

impl StepSummary {
    fn new(placement: PlacementKey, strategy: Strategy) -> StepSummary {
        StepSummary {
            placement,
            strategy,
            target: 0,
            applying: vec![],
            removing: vec![],
            waiting: vec![],
            up_to_date: vec![],
            requeue_after: 0,
            note: None,
            desired: BTreeMap::new(),
            overridden: BTreeSet::new(),
            render_errors: BTreeMap::new(),
            work_sync_errors: BTreeSet::new(),
            report_diff: false,
            selected_resources: vec![],
            objects: BTreeMap::new(),
            settled: None,
            held: false,
        }
    }

    /// Something changes or waits for the budget.
    pub fn is_moving(&self) -> bool {
        !self.waiting.is_empty() || !self.applying.is_empty() || !self.removing.is_empty()
    }
}

/// What a step records whatever the work's outcomes.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Resource snapshot histories after this commit, by placement: those that differ from
    /// the state's.
    pub histories: BTreeMap<PlacementKey, crate::snapshot::History>,
    /// Whether each placement abandons its objects on removal, remembered for when the
    /// placement itself is deleted from the repository: where it differs from the state's.
    pub abandon: BTreeMap<PlacementKey, bool>,
    /// Staged update runs after this step, by run key; `None`: the run left the repository.
    pub runs: BTreeMap<String, Option<RunStatus>>,
}

/// The decision of one step.
#[derive(Debug, Default)]
pub struct Decision {
    /// To deliver now.
    pub work: Vec<Work>,
    /// For members that cannot be reached now, with why: not delivered, failed at once.
    pub held: Vec<(Work, String)>,
    /// Immediate pacing: the members whose records are swept, and how.
    pub sweeps: Vec<Sweep>,
    /// Members the step does not touch at all because they cannot be reached, and why.
    pub skipped: BTreeMap<String, String>,
    /// Shared: a settled placement's step is the memo's, reused as it is.
    pub steps: Vec<Arc<StepSummary>>,
    pub ledger: Ledger,
    /// Approval requests staged update runs have reached and wait on.
    pub requests: Vec<Request>,
}

fn rendered_fingerprint(manifests: &[Manifest]) -> String {
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

/// The steps of settled placements, kept from one step to the next with what each was worked
/// out from: a later step whose inputs for the placement are the same (the
/// placement, its selected resources' hash, its schedule and its state, and the commit's
/// overrides, clusters and scopes) takes the same decision, so it is reused instead of
/// rendering and planning the placement again. Only placements that are settled are kept
/// (nothing to push, nothing waiting, every binding available and not marked for a re-check),
/// so a reused decision never depends on the clock or on what members answer.
#[derive(Debug, Default)]
pub struct StepMemo {
    context: Option<MemoContext>,
    /// The commit the settled steps were taken for: within one commit a placement's spec and
    /// selected resources cannot change, so they are not selected and hashed again.
    commit: Option<String>,
    settled: HashMap<PlacementKey, Settled>,
    reused: usize,
    /// The number of the last settled step recorded ([`StepSummary::settled`]).
    generations: u64,
}

impl StepMemo {
    /// Placements whose step was reused by the last step.
    pub fn reused(&self) -> usize {
        self.reused
    }
}

/// What every placement's step reads besides its own inputs.
#[derive(Debug)]
struct MemoContext {
    cluster_overrides: Vec<crate::model::overrides::ClusterResourceOverride>,
    resource_overrides: Vec<crate::model::overrides::ResourceOverride>,
    clusters: Vec<(String, crate::model::selector::Labels)>,
    scopes: crate::model::scope::ScopeTable,
}

impl MemoContext {
    fn of(cat: &Catalog, fleet: &Fleet) -> MemoContext {
        MemoContext {
            cluster_overrides: cat
                .cluster_overrides
                .iter()
                .map(|e| e.spec.clone())
                .collect(),
            resource_overrides: cat
                .resource_overrides
                .iter()
                .map(|e| e.spec.clone())
                .collect(),
            clusters: fleet
                .clusters
                .iter()
                .map(|c| (c.name.clone(), c.labels.clone()))
                .collect(),
            scopes: cat.scopes.clone(),
        }
    }

    /// Whether this is [`MemoContext::of`] `cat` and `fleet`, without copying them (every look
    /// asks; the answer is nearly always yes).
    fn matches(&self, cat: &Catalog, fleet: &Fleet) -> bool {
        fn same<A, B>(a: &[A], b: &[B], eq: impl Fn(&A, &B) -> bool) -> bool {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| eq(a, b))
        }
        same(&self.cluster_overrides, &cat.cluster_overrides, |a, e| {
            *a == e.spec
        }) && same(&self.resource_overrides, &cat.resource_overrides, |a, e| {
            *a == e.spec
        }) && same(&self.clusters, &fleet.clusters, |(name, labels), c| {
            *name == c.name && *labels == c.labels
        }) && self.scopes == cat.scopes
    }
}

/// A settled placement's step and its inputs.
#[derive(Debug)]
struct Settled {
    /// The pacing it was stepped at (only rolling steps are kept: the others read inputs the
    /// memo does not hold); with the same commit, the same pacing is the same pace.
    pacing: Pacing,
    /// The placement object and the values it selected, kept (so their addresses stay
    /// theirs): the same ones are the same placement and the same resource snapshot.
    source: Arc<serde_json::Value>,
    selected: Vec<Arc<serde_json::Value>>,
    placement: crate::model::placement::Placement,
    resource_snapshot: String,
    schedule: Arc<PlacementSchedule>,
    /// Shared with the rollout state it was taken from (not a copy of every cluster's state).
    state: Arc<PlacementState>,
    summary: Arc<StepSummary>,
}

impl Settled {
    /// Whether it still holds at `pacing` for this schedule and state (the caller checks what
    /// else it was worked out from).
    fn holds(
        &self,
        pacing: Pacing,
        ps: &Arc<PlacementSchedule>,
        prev: &Arc<PlacementState>,
    ) -> bool {
        self.pacing == pacing && same_schedule(&self.schedule, ps) && same_state(&self.state, prev)
    }
}

/// The same placement state: the same shared value (unchanged since), or an equal one.
fn same_state(a: &Arc<PlacementState>, b: &Arc<PlacementState>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// A settled placement's step taken again: the same summary. Its history and abandon flag are
/// the state's (a settled step takes no new snapshot), so the ledger records nothing for it.
fn reuse(decision: &mut Decision, m: &Settled) {
    decision.steps.push(m.summary.clone());
}

/// Records in the ledger the placement's history and abandon flag after this step, where they
/// differ from the state's: the ledger carries changes only (copying every placement's
/// history at every look would be a large share of a look's step).
fn record(
    ledger: &mut Ledger,
    key: &PlacementKey,
    prev: &PlacementState,
    history: crate::snapshot::History,
    abandon: bool,
) {
    if history != prev.resources {
        ledger.histories.insert(key.clone(), history);
    }
    if abandon != prev.abandon {
        ledger.abandon.insert(key.clone(), abandon);
    }
}

/// One step for the commit of `input` from `state`, at `pacing`.
pub fn step(input: &Input, state: &RolloutState, pacing: Pacing) -> Decision {
    step_memoized(input, state, pacing, &mut StepMemo::default())
}

/// [`step`], reusing the decisions `memo` kept for placements whose inputs did not change since
/// (and keeping this step's settled ones for the next). The decision is the same as [`step`]'s.
pub fn step_memoized(
    input: &Input,
    state: &RolloutState,
    pacing: Pacing,
    memo: &mut StepMemo,
) -> Decision {
    let Input {
        cat,
        commit,
        schedule,
        fleet,
        now,
        ..
    } = *input;
    let in_scope = |key: &PlacementKey| input.only.is_none_or(|only| only.contains(key));
    // Each placement's selection is made once and shared; each placement is rendered once per
    // distinct cluster input (and, for status, once without overrides).
    let selections = match input.selected {
        Some(made) => Selections::with(cat, made),
        None => Selections::new(cat),
    };
    let renderer = selections.renderer(schedule);
    let plain = selections.renderer(schedule).without_overrides();
    let track_overrides = pacing == Pacing::Rolling;
    // Fingerprints of shared renderings, by address (renderings live as long as the renderer).
    let mut fingerprints: HashMap<usize, String> = HashMap::default();
    // Shared renderings as the work items carry them (`Arc`: work crosses threads), by address.
    let mut shared_manifests: HashMap<usize, Manifests> = HashMap::default();
    // Object ids of shared renderings, by address, likewise.
    let mut object_ids: HashMap<usize, Arc<BTreeSet<ObjectKey>>> = HashMap::default();
    // A member of the fleet (its clusters are sorted by name: no set built at every look).
    let is_member = |cluster: &str| fleet.position(cluster).is_some();
    let mut decision = Decision::default();
    let mut work = Vec::new();
    if !memo.context.as_ref().is_some_and(|c| c.matches(cat, fleet)) {
        memo.settled.clear();
        memo.context = Some(MemoContext::of(cat, fleet));
    }
    let same_commit = memo.commit.as_deref() == Some(commit);
    memo.commit = Some(commit.to_string());
    memo.reused = 0;
    // Staged update runs by the placement they target; only the daemon's pace steps them.
    let mut runs_by_placement: BTreeMap<PlacementKey, Vec<&StagedUpdateRun>> = BTreeMap::new();
    if pacing == Pacing::Rolling {
        for e in &cat.update_runs {
            let key = staged::placement_of(&e.spec);
            if in_scope(&key) {
                runs_by_placement.entry(key).or_default().push(&e.spec);
            }
        }
    }

    // Borrowed, not cloned: most placements are settled and reused, and a copy of every
    // placement's state (every cluster's objects) at every step would be the bulk of its time.
    let no_state = Arc::new(PlacementState::default());
    for (i, ps) in schedule.iter().enumerate() {
        let key = &ps.key;
        if !in_scope(key) {
            continue;
        }
        let prev = state.placements.get(key).unwrap_or(&no_state);
        // The same commit: only the schedule and the state can have changed since. Asked
        // before anything else (a summary is not even started): it is most placements at most
        // looks.
        let settled_now = memo
            .settled
            .get(key)
            .filter(|m| same_commit && m.holds(pacing, ps, prev));
        if let Some(m) = settled_now {
            reuse(&mut decision, m);
            memo.reused += 1;
            continue;
        }
        let work_before = work.len();
        // Its strategy is set below, once its kind and pace are known.
        let mut step = StepSummary::new(key.clone(), Strategy::Immediate);
        // Renders what `cluster` should run; `None` when rendering fails (reported, not pushed).
        let mut render = |cluster: &str, resource_index: u64| -> Option<(Manifests, Revision)> {
            let (manifests, rendered) = if key.kind.is_ocm() {
                let manifests = Arc::new(ocm_workloads(cat, key));
                let rendered = rendered_fingerprint(&manifests);
                step.objects.insert(cluster.to_string(), ids_of(&manifests));
                (manifests, rendered)
            } else {
                let c = fleet.get(cluster)?;
                let target = ClusterTarget {
                    name: cluster,
                    labels: &c.labels,
                };
                let shared = renderer.render_index(i, &target)?;
                match shared.as_ref() {
                    Ok(m) => {
                        if track_overrides {
                            let without = plain.render_index(i, &target);
                            if !matches!(without.as_deref(), Some(Ok(p)) if p == m) {
                                step.overridden.insert(cluster.to_string());
                            }
                        }
                        let rendered = fingerprints
                            .entry(Rc::as_ptr(&shared) as usize)
                            .or_insert_with(|| rendered_fingerprint(m))
                            .clone();
                        let ids = object_ids
                            .entry(Rc::as_ptr(&shared) as usize)
                            .or_insert_with(|| ids_of(m))
                            .clone();
                        step.objects.insert(cluster.to_string(), ids);
                        let m = shared_manifests
                            .entry(Rc::as_ptr(&shared) as usize)
                            .or_insert_with(|| Arc::new(m.clone()))
                            .clone();
                        (m, rendered)
                    }
                    Err(e) => {
                        if e.is_work_sync_failure() {
                            step.work_sync_errors.insert(cluster.to_string());
                            // The overrides did apply (they made the object invalid): KubeFleet
                            // reports Overridden=True (OverriddenSucceeded) before the
                            // WorkSynchronized failure (test/e2e/actuals_test.go
                            // perClusterWorkSynchronizedFailedConditions with hasOverrides).
                            if track_overrides {
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
            step.desired.insert(cluster.to_string(), revision.clone());
            Some((manifests, revision))
        };

        if key.kind.is_ocm() {
            // OCM placements: the ManifestWorkReplicaSet workloads go to every selected cluster
            // at once (their own rolloutStrategy is not modelled); a plain ManifestWork to its
            // one cluster, at once, as its cluster's work agent applies it.
            let strategy = ApplyStrategy::default();
            let mut applying = Vec::new();
            let mut up_to_date = Vec::new();
            for cluster in &ps.selected {
                let Some((manifests, revision)) = render(cluster, 0) else {
                    continue;
                };
                let current = prev.clusters.get(cluster);
                let settled = current.and_then(|c| c.revision.as_ref()) == Some(&revision)
                    && current.is_some_and(|c| c.health != BindingHealth::Failed);
                if settled && pacing == Pacing::Rolling {
                    up_to_date.push(cluster.clone());
                    // What the member changed is re-applied, as a refresh.
                    if current.is_some_and(|c| c.recheck.is_some()) {
                        let stamp = revision.rendered.clone();
                        work.push(Work::apply(
                            key,
                            cluster,
                            (manifests, revision),
                            strategy,
                            stamp,
                            false,
                            true,
                        ));
                    }
                    continue;
                }
                applying.push(cluster.clone());
                // The workloads' own hash is their snapshot stamp.
                let stamp = revision.rendered.clone();
                let rendered = (manifests, revision);
                work.push(Work::apply(
                    key, cluster, rendered, strategy, stamp, false, false,
                ));
            }
            let mut removing = Vec::new();
            for cluster in prev.clusters.keys() {
                if !ps.selected.contains(cluster) && is_member(cluster) {
                    removing.push(cluster.clone());
                    work.push(Work::remove(key, cluster, strategy));
                }
            }
            step.strategy = Strategy::Ocm;
            step.target = ps.selected.len();
            step.applying = applying;
            step.up_to_date = up_to_date;
            step.removing = removing;
            decision.steps.push(Arc::new(step));
            continue;
        }

        let Some(entry) = cat.placement(&key.name, key.namespace.as_deref()) else {
            continue;
        };
        let spec = &entry.spec.spec;
        let pace = Pace::of(pacing, spec);
        if let Some(message) = ps.held() {
            // Invalid resource selectors: KubeFleet's placement controller takes no snapshot
            // and its works stay, so nothing is applied, pruned or recorded here (history,
            // cluster states and staged runs as they were). Its runs are not stepped.
            runs_by_placement.remove(key);
            memo.settled.remove(key);
            decision
                .steps
                .push(Arc::new(held_step(key, pace.strategy(), ps, prev, message)));
            continue;
        }
        let resources = selections.of(entry).unwrap_or_default();
        // The same placement object selecting the very same objects (an unchanged file's,
        // shared from the last commit): the same snapshot, known without hashing it again.
        let source = &cat.objects[entry.index].value;
        if matches!(pace, Pace::Rolling { .. }) {
            let same = memo.settled.get(key).filter(|m| {
                Arc::ptr_eq(&m.source, source)
                    && m.selected.len() == resources.len()
                    && m.selected
                        .iter()
                        .zip(resources.iter())
                        .all(|(a, r)| Arc::ptr_eq(a, &r.value))
                    && m.holds(pacing, ps, prev)
            });
            if let Some(m) = same {
                reuse(&mut decision, m);
                memo.reused += 1;
                continue;
            }
        }
        step.selected_resources = resources
            .iter()
            .map(|r| match &r.namespace {
                Some(ns) => format!("{}/{ns}/{}", r.gvk.kind, r.name),
                None => format!("{}/{}", r.gvk.kind, r.name),
            })
            .collect();
        let mut in_use: BTreeSet<u64> = prev
            .clusters
            .values()
            .filter_map(|c| c.revision.as_ref().map(|r| r.resource_index))
            .collect();
        in_use.extend(
            state
                .runs
                .values()
                .filter(|r| r.placement == *key)
                .filter_map(|r| r.resource_snapshot_index_used),
        );
        // The snapshot stamp: the whole hash of the selected resources, for every cluster.
        let resource_snapshot = crate::snapshot::resource_hash(&resources);
        let strategy = ApplyStrategy::from_rollout(Some(&spec.strategy));
        if matches!(pace, Pace::Rolling { .. }) {
            let same = memo.settled.get(key).filter(|m| {
                m.resource_snapshot == resource_snapshot
                    && m.placement == entry.spec
                    && m.holds(pacing, ps, prev)
            });
            if let Some(m) = same {
                reuse(&mut decision, m);
                memo.reused += 1;
                continue;
            }
        }
        if pace == Pace::Staged {
            // External: a resource snapshot is taken only when a run initialises (spec/README §3).
            let history_limit = spec.revision_history_limit.unwrap_or(10).max(1) as u32;
            let runs = runs_by_placement.remove(key).unwrap_or_default();
            let view = staged::View {
                key,
                spec: Some(spec),
                schedule: Some(ps),
                fleet,
                clusters: &prev.clusters,
                resource_hash: Some(&resource_snapshot),
                revision_history_limit: history_limit,
                indices_in_use: in_use,
                apply_strategy: strategy,
            };
            let mut history = prev.resources.clone();
            let mut render_run = |run: &RunStatus, cluster: &str| {
                let index = run.resource_snapshot_index_used.unwrap_or_default();
                if run.render_commit == commit {
                    render(cluster, index)
                } else {
                    let other = input.staged.catalogs.get(&run.render_commit)?;
                    render_at(other, key, fleet, cluster, index)
                }
            };
            let mut outcome = step_runs(&view, &runs, state, &mut history, input, &mut render_run);
            // What the runs delivered is kept in place between (and after) them.
            let stepped: BTreeMap<&str, &RunStatus> = outcome
                .runs
                .iter()
                .filter_map(|(k, st)| Some((k.as_str(), st.as_ref()?)))
                .collect();
            let known: Vec<&RunStatus> = state
                .runs
                .iter()
                .filter(|(k, r)| r.placement == *key && !stepped.contains_key(k.as_str()))
                .map(|(_, r)| r)
                .chain(stepped.values().copied())
                .collect();
            let busy: BTreeSet<&str> = outcome.work.iter().map(|w| w.cluster.as_str()).collect();
            let healing = staged::heal(&view, &known, &busy, &mut render_run);
            if healing.requeue_after > 0
                && (outcome.requeue_after == 0 || healing.requeue_after < outcome.requeue_after)
            {
                outcome.requeue_after = healing.requeue_after;
            }
            outcome.work.extend(healing.work);
            record(&mut decision.ledger, key, prev, history, strategy.abandon);
            step.strategy = pace.strategy();
            step.report_diff = strategy.reports_diff();
            step.target = ps
                .bindings
                .iter()
                .filter(|b| b.state != BindingState::Unscheduled)
                .count();
            // Up to date: running what a run gave them, and not moving now (as the rolling
            // step counts them: status and the rollout gauges read this).
            step.up_to_date = ps
                .bindings
                .iter()
                .filter(|b| b.state != BindingState::Unscheduled)
                .map(|b| &b.cluster)
                .filter(|c| {
                    prev.clusters
                        .get(*c)
                        .is_some_and(|cs| cs.revision.is_some())
                        && !outcome.applying.contains(c)
                        && !outcome.removing.contains(c)
                })
                .cloned()
                .collect();
            step.applying = outcome.applying;
            step.removing = outcome.removing;
            step.requeue_after = outcome.requeue_after;
            step.note = Some(outcome.note);
            work.extend(outcome.work);
            decision.requests.extend(outcome.waiting_on);
            decision.ledger.runs.extend(outcome.runs);
            note_render_errors(&mut step);
            decision.steps.push(Arc::new(step));
            continue;
        }
        let advance = prev.resources.advance(
            &resource_snapshot,
            commit,
            spec.revision_history_limit.unwrap_or(10).max(1) as u32,
            &in_use,
        );
        let resource_index = advance.index;
        let new_snapshot = advance.created;
        record(
            &mut decision.ledger,
            key,
            prev,
            advance.history,
            strategy.abandon,
        );
        step.report_diff = strategy.reports_diff();

        step.strategy = pace.strategy();
        let (target, params) = match pace {
            Pace::Staged => unreachable!("stepped above"),
            Pace::Now => {
                // Everything now: every binding is applied (or removed), whatever it runs.
                for b in &ps.bindings {
                    if b.state == BindingState::Unscheduled {
                        step.removing.push(b.cluster.clone());
                        work.push(Work::remove(key, &b.cluster, strategy));
                        continue;
                    }
                    step.target += 1;
                    let Some(rendered) = render(&b.cluster, resource_index) else {
                        continue;
                    };
                    step.applying.push(b.cluster.clone());
                    let binds = b.state == BindingState::Scheduled;
                    let stamp = resource_snapshot.clone();
                    work.push(Work::apply(
                        key, &b.cluster, rendered, strategy, stamp, binds, false,
                    ));
                }
                note_render_errors(&mut step);
                decision.steps.push(Arc::new(step));
                continue;
            }
            Pace::Rolling { target, params } => (target, params),
        };

        // Bindings of clusters that left the repository are gone from the schedule: a member
        // removed from the repository keeps what it has (KubeFleet behaves the same).
        let bindings: Vec<RolloutBinding> = ps
            .bindings
            .iter()
            .map(|b| {
                let current = prev.clusters.get(&b.cluster);
                RolloutBinding {
                    cluster: b.cluster.clone(),
                    state: b.state,
                    // Removal is synchronous within a step: a failed one is retried as a
                    // fresh removal candidate, never left "deleting".
                    deleting: false,
                    current: current.and_then(|c| c.revision.clone()),
                    health: current.map_or(BindingHealth::Pending, |c| c.health),
                }
            })
            .collect();
        let mut desired: BTreeMap<String, Option<(Manifests, Revision)>> = BTreeMap::new();
        for b in &ps.bindings {
            if b.state != BindingState::Unscheduled {
                desired.insert(b.cluster.clone(), render(&b.cluster, resource_index));
            }
        }
        // A cluster that cannot be rendered keeps what it runs: desired = current, so it is
        // neither updated nor counted as stale; the error is in the step's note.
        let plan = plan_step(
            &bindings,
            |cluster| match desired.get(cluster) {
                Some(Some((_, r))) => r.clone(),
                _ => prev
                    .clusters
                    .get(cluster)
                    .and_then(|c| c.revision.clone())
                    .unwrap_or(Revision {
                        resource_index,
                        rendered: String::new(),
                    }),
            },
            target,
            &params,
            now,
        );
        step.target = plan.budget.target;
        for (cluster, binds) in plan
            .bind
            .iter()
            .map(|c| (c, true))
            .chain(plan.update.iter().map(|c| (c, false)))
        {
            let Some(Some(rendered)) = desired.remove(cluster) else {
                continue;
            };
            step.applying.push(cluster.clone());
            let stamp = resource_snapshot.clone();
            work.push(Work::apply(
                key, cluster, rendered, strategy, stamp, binds, false,
            ));
        }
        for cluster in &plan.remove {
            step.removing.push(cluster.clone());
            work.push(Work::remove(key, cluster, strategy));
        }
        // Up-to-date clusters whose availability is not known yet are re-applied (a no-op on
        // the member) to read it again; so are those whose objects the member changed (a
        // deleted object is restored, drift corrected or, under IfNotDrifted and ReportDiff,
        // reported: the strategy decides, as for any apply).
        for cluster in &plan.up_to_date {
            let pending = prev
                .clusters
                .get(cluster)
                .is_some_and(|c| c.health == BindingHealth::Pending || c.recheck.is_some());
            if let Some(Some(rendered)) = desired.remove(cluster).filter(|_| pending) {
                let stamp = resource_snapshot.clone();
                work.push(Work::apply(
                    key, cluster, rendered, strategy, stamp, false, true,
                ));
            }
        }
        step.waiting = plan.waiting;
        step.up_to_date = plan.up_to_date;
        step.requeue_after = plan.requeue_after;
        note_render_errors(&mut step);
        let settled = work.len() == work_before
            && !new_snapshot
            && !step.is_moving()
            && step.requeue_after == 0
            && step.render_errors.is_empty()
            && prev
                .clusters
                .values()
                .all(|c| c.health == BindingHealth::Available && c.recheck.is_none());
        if settled {
            memo.generations += 1;
            step.settled = Some(memo.generations);
        }
        // One summary for the decision and the memo (a copy is large in a large fleet).
        let step = Arc::new(step);
        if settled {
            memo.settled.insert(
                key.clone(),
                Settled {
                    pacing,
                    source: source.clone(),
                    selected: resources.iter().map(|r| r.value.clone()).collect(),
                    placement: entry.spec.clone(),
                    resource_snapshot: resource_snapshot.clone(),
                    schedule: ps.clone(),
                    state: prev.clone(),
                    summary: step.clone(),
                },
            );
        } else {
            memo.settled.remove(key);
        }
        decision.steps.push(step);
    }

    // Runs whose placement is missing or not External: they fail (no work can come of them).
    let no_clusters = BTreeMap::new();
    for (key, runs) in std::mem::take(&mut runs_by_placement) {
        let entry = cat.placement(&key.name, key.namespace.as_deref());
        let prev = state.placements.get(&key);
        let view = staged::View {
            key: &key,
            spec: entry.map(|e| &e.spec.spec),
            schedule: schedule.iter().find(|p| p.key == key).map(|p| &**p),
            fleet,
            clusters: prev.map_or(&no_clusters, |p| &p.clusters),
            resource_hash: None,
            revision_history_limit: 10,
            indices_in_use: BTreeSet::new(),
            apply_strategy: ApplyStrategy::default(),
        };
        let mut history = prev.map(|p| p.resources.clone()).unwrap_or_default();
        let outcome = step_runs(&view, &runs, state, &mut history, input, &mut |_, _| None);
        decision.ledger.runs.extend(outcome.runs);
    }
    if pacing == Pacing::Rolling && input.only.is_none() {
        let present: BTreeSet<String> = cat
            .update_runs
            .iter()
            .map(|e| run_key_of(&e.spec))
            .collect();
        for gone in state.runs.keys().filter(|k| !present.contains(*k)) {
            decision.ledger.runs.insert(gone.clone(), None);
        }
    }

    let scheduled: HashSet<&PlacementKey> = schedule.iter().map(|p| &p.key).collect();
    memo.settled.retain(|k, _| scheduled.contains(k));

    // Placements gone from the commit: remove what they placed, no pacing (KubeFleet deletes
    // every binding at once), except on members that left the repository.
    for (key, ps) in &state.placements {
        if scheduled.contains(key) || !in_scope(key) {
            continue;
        }
        let strategy = ApplyStrategy {
            abandon: ps.abandon,
            ..ApplyStrategy::default()
        };
        let mut step = StepSummary::new(key.clone(), Strategy::Deleted);
        let mut kept = Vec::new();
        for cluster in ps.clusters.keys() {
            if is_member(cluster) {
                step.removing.push(cluster.clone());
                work.push(Work::remove(key, cluster, strategy));
            } else {
                kept.push(cluster.as_str());
            }
        }
        if !kept.is_empty() {
            // Not "settled": its objects are still there.
            step.note =
                Some(format!(
                "deleted from the repository; its objects stay on {} ({}): members removed from \
                 the repository keep what they have, as in KubeFleet",
                if kept.len() == 1 { "1 cluster no longer in the repository".to_string() }
                else { format!("{} clusters no longer in the repository", kept.len()) },
                kept.join(", ")
            ));
        }
        decision.steps.push(Arc::new(step));
    }

    // A member that cannot be reached now is not pushed to: its work is held (and fails at
    // once), so that it delays only itself.
    if input.unreachable.is_empty() {
        decision.work = work;
        work = Vec::new();
    }
    for w in work {
        match input.unreachable.get(&w.cluster) {
            Some(why) => {
                decision.skipped.insert(w.cluster.clone(), why.clone());
                decision.held.push((w, why.clone()));
            }
            None => decision.work.push(w),
        }
    }
    if pacing == Pacing::Immediate {
        sweep(input, &mut decision);
    }
    decision
}

/// The key under which a run's record is kept.
pub fn run_key_of(run: &StagedUpdateRun) -> String {
    staged::status::run_key(
        run.metadata
            .namespace
            .as_deref()
            .filter(|_| run.is_namespaced()),
        &run.metadata.name,
    )
}

/// What the runs of one placement did in a step.
struct RunsOutcome {
    work: Vec<Work>,
    applying: Vec<String>,
    removing: Vec<String>,
    waiting_on: Vec<Request>,
    requeue_after: u64,
    note: String,
    runs: Vec<(String, Option<RunStatus>)>,
}

fn step_runs(
    view: &staged::View,
    runs: &[&StagedUpdateRun],
    state: &RolloutState,
    history: &mut crate::snapshot::History,
    input: &Input,
    render: &mut staged::RenderRun,
) -> RunsOutcome {
    let inputs: Vec<staged::RunInput> = runs
        .iter()
        .map(|r| staged::RunInput {
            run: r,
            strategy: staged::strategy_of(input.cat, r),
            previous: state.runs.get(&run_key_of(r)),
            ended_before: state.ended_runs.contains(&run_key_of(r)),
        })
        .collect();
    let steps = staged::advance(
        view,
        &inputs,
        history,
        &input.staged.approvals,
        input.commit,
        input.now,
        render,
    );
    let mut out = RunsOutcome {
        work: vec![],
        applying: vec![],
        removing: vec![],
        waiting_on: vec![],
        requeue_after: 0,
        note: String::new(),
        runs: vec![],
    };
    let mut notes = Vec::new();
    for (r, s) in runs.iter().zip(steps) {
        let m = s.moves;
        out.work.extend(m.work);
        out.applying.extend(m.applying);
        out.removing.extend(m.removing);
        out.waiting_on.extend(m.waiting_on);
        if m.requeue_after > 0 && (out.requeue_after == 0 || m.requeue_after < out.requeue_after) {
            out.requeue_after = m.requeue_after;
        }
        let name = run_key_of(r);
        match (&s.status, m.note) {
            (_, Some(note)) => notes.push(format!("run {name}: {note}")),
            (Some(st), None) => notes.push(format!("run {name}: {}", staged::status::summary(st))),
            (None, None) => {}
        }
        if let Some(st) = s.status {
            out.runs.push((name, Some(st)));
        }
    }
    out.note = if notes.is_empty() {
        "strategy External: moved only by staged update runs; none targets it".into()
    } else {
        notes.join("; ")
    };
    out
}

/// Renders placement `key` of another commit's catalog for `cluster`.
fn render_at(
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
    let rendered = rendered_fingerprint(&manifests);
    Some((
        Arc::new(manifests),
        Revision {
            resource_index,
            rendered,
        },
    ))
}

/// The step of a placement held for invalid resource selectors ([`PlacementSchedule::held`]):
/// no work, and each bound cluster "wants" what it runs, so its conditions stay what the
/// member reports.
fn held_step(
    key: &PlacementKey,
    strategy: Strategy,
    ps: &PlacementSchedule,
    prev: &PlacementState,
    message: &str,
) -> StepSummary {
    let mut step = StepSummary::new(key.clone(), strategy);
    step.held = true;
    step.target = ps
        .bindings
        .iter()
        .filter(|b| b.state != BindingState::Unscheduled)
        .count();
    for cluster in &ps.selected {
        if let Some(revision) = prev.clusters.get(cluster).and_then(|c| c.revision.clone()) {
            step.desired.insert(cluster.clone(), revision);
            step.up_to_date.push(cluster.clone());
        }
    }
    step.note = Some(format!(
        "held: {message}; what it placed stays as it is until its selectors are fixed"
    ));
    step
}

fn note_render_errors(step: &mut StepSummary) {
    if !step.render_errors.is_empty() {
        let lines: Vec<String> = step
            .render_errors
            .iter()
            .map(|(cluster, e)| format!("{cluster}: {e}"))
            .collect();
        step.note = Some(format!("cannot render: {}", lines.join("; ")));
    }
}

/// Immediate pacing: every member of the fleet, and every cluster given work, is swept of what
/// it no longer receives — except the placements that cannot be rendered for it (unknown, not
/// gone), the placements held for invalid resource selectors (kept as they are) and, when the step is limited to some placements, the others. A member that cannot be
/// reached is not touched at all.
fn sweep(input: &Input, decision: &mut Decision) {
    let mut clusters: BTreeSet<&str> = input
        .fleet
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    clusters.extend(decision.work.iter().map(|w| w.cluster.as_str()));
    let mut sweeps = Vec::new();
    for cluster in clusters {
        if let Some(why) = input.unreachable.get(cluster) {
            decision.skipped.insert(cluster.to_string(), why.clone());
            continue;
        }
        let unrenderable: BTreeSet<PlacementKey> = decision
            .steps
            .iter()
            .filter(|s| s.held || s.render_errors.contains_key(cluster))
            .map(|s| s.placement.clone())
            .collect();
        let prune = match input.only {
            None => Prune::AllExcept(unrenderable),
            Some(only) => Prune::Only(only.difference(&unrenderable).cloned().collect()),
        };
        sweeps.push(Sweep {
            cluster: cluster.to_string(),
            prune,
        });
    }
    decision.sweeps = sweeps;
}

/// The deletion guard's ids of the objects of one rendering.
fn ids_of(manifests: &[Manifest]) -> Arc<BTreeSet<ObjectKey>> {
    Arc::new(manifests.iter().map(|m| ObjectKey::of(&m.value)).collect())
}

/// Shares `objects` with an equal set the placement holds: the cluster's own (`before`: a
/// push that found it as it was), else one of a few distinct sets of its other clusters (each
/// delivery is absorbed on its own, one member at a time: the clusters of a placement
/// rendered alike would otherwise each keep their own copy).
fn share_equal_set(
    objects: &mut Arc<BTreeSet<ObjectKey>>,
    before: Option<&ClusterState>,
    ps: &PlacementState,
) {
    const LOOKS: usize = 4;
    let held = before.into_iter().chain(ps.clusters.values());
    let mut seen: Vec<&Arc<BTreeSet<ObjectKey>>> = Vec::with_capacity(LOOKS);
    for other in held.map(|c| &c.objects) {
        if seen.iter().any(|s| Arc::ptr_eq(s, other)) {
            continue;
        }
        if *other == *objects {
            *objects = other.clone();
            return;
        }
        seen.push(other);
        if seen.len() == LOOKS {
            return;
        }
    }
}

/// Folds the outcomes of the work into the state and the schedule's bindings: applied clusters
/// record their revision and health and become Bound; removed ones leave both.
pub fn absorb(
    state: &mut RolloutState,
    schedule: &mut [Arc<PlacementSchedule>],
    ledger: Ledger,
    results: Vec<(Work, Outcome)>,
    commit: &str,
    now: u64,
) {
    // Written only where they change: a placement's state is shared, and copied on write.
    for (key, history) in ledger.histories {
        let ps = state.placements.entry(key).or_default();
        if ps.resources != history {
            Arc::make_mut(ps).resources = history;
        }
    }
    for (key, abandon) in ledger.abandon {
        let ps = state.placements.entry(key).or_default();
        if ps.abandon != abandon {
            Arc::make_mut(ps).abandon = abandon;
        }
    }
    for (key, run) in ledger.runs {
        match run {
            Some(r) => {
                state.ended_runs.remove(&key);
                state.runs.insert(key, r);
            }
            None => {
                state.runs.remove(&key);
                state.ended_runs.insert(key);
            }
        }
    }
    let mut object_sets: HashMap<usize, Arc<BTreeSet<ObjectKey>>> = HashMap::default();
    for (work, outcome) in results {
        let key = &work.placement;
        let ps: &mut PlacementState =
            Arc::make_mut(state.placements.entry(key.clone()).or_default());
        match (work.action, outcome) {
            (
                Action::Apply {
                    revision,
                    binds,
                    manifests,
                    delivered_by,
                    ..
                },
                Outcome::Done(health, observed),
            ) => {
                // One set per rendering: clusters given the same manifests share it.
                let objects = object_sets
                    .entry(Arc::as_ptr(&manifests) as usize)
                    .or_insert_with(|| ids_of(&manifests))
                    .clone();
                let mut pushed = ClusterState {
                    objects,
                    revision: Some(revision),
                    attempted: None,
                    commit: Some(commit.to_string()),
                    health,
                    diffs: observed.diffs,
                    not_available: observed.not_available,
                    last_error: None,
                    recheck: None,
                    delivered_by,
                    updated_at: now,
                };
                // A push that confirmed what the cluster had (a re-check's, a restart's) is no
                // change of the entry: it keeps the commit that delivered the revision and its
                // time, and the state stays as saved.
                let before = ps.clusters.get(&work.cluster);
                share_equal_set(&mut pushed.objects, before, ps);
                if let Some(before) = before {
                    if before.revision == pushed.revision && before.commit.is_some() {
                        pushed.commit.clone_from(&before.commit);
                    }
                    if before.same_but_for_time_and_recheck(&pushed) {
                        pushed.updated_at = before.updated_at;
                    }
                }
                ps.clusters.insert(work.cluster.clone(), pushed);
                if binds {
                    // Only a binding still Scheduled: the daemon absorbs results that may come
                    // after a later schedule unscheduled the cluster, which must stay so.
                    let binding = |b: &crate::schedule::Binding| {
                        b.cluster == work.cluster && b.state == BindingState::Scheduled
                    };
                    // Copied on write: the schedule may be shared with the scheduler's memo.
                    if let Some(p) = schedule
                        .iter_mut()
                        .find(|p| &p.key == key && p.bindings.iter().any(binding))
                    {
                        for b in Arc::make_mut(p).bindings.iter_mut().filter(|b| binding(b)) {
                            b.state = BindingState::Bound;
                        }
                    }
                }
            }
            (Action::Remove { .. }, Outcome::Done(..)) => {
                ps.clusters.remove(&work.cluster);
                let binding = |b: &crate::schedule::Binding| {
                    b.cluster == work.cluster && b.state == BindingState::Unscheduled
                };
                if let Some(p) = schedule
                    .iter_mut()
                    .find(|p| &p.key == key && p.bindings.iter().any(binding))
                {
                    Arc::make_mut(p).bindings.retain(|b| !binding(b));
                }
            }
            (action, Outcome::Failed(message)) => {
                let entry =
                    ps.clusters
                        .entry(work.cluster.clone())
                        .or_insert_with(|| ClusterState {
                            objects: Default::default(),
                            revision: None,
                            attempted: None,
                            commit: None,
                            health: BindingHealth::Failed,
                            diffs: vec![],
                            not_available: vec![],
                            last_error: None,
                            recheck: None,
                            delivered_by: None,
                            updated_at: now,
                        });
                entry.health = BindingHealth::Failed;
                if let Action::Apply { revision, .. } = action {
                    entry.attempted = Some(revision);
                }
                entry.last_error = Some(message);
                entry.updated_at = now;
            }
        }
    }
    // An ended run is remembered only while a cluster still names it as its deliverer.
    if !state.ended_runs.is_empty() {
        let named: BTreeSet<&str> = state
            .placements
            .values()
            .flat_map(|ps| ps.clusters.values())
            .filter_map(|c| c.delivered_by.as_ref())
            .map(|d| d.run.as_str())
            .collect();
        let ended = std::mem::take(&mut state.ended_runs);
        state.ended_runs = ended
            .into_iter()
            .filter(|k| named.contains(k.as_str()))
            .collect();
    }
    // A placement with nothing left on any cluster and gone from the commit is forgotten. The
    // set of live keys is built only when one could be (most looks have none, and building it
    // and looking every placement up in it is a real share of a settled look).
    if state.placements.values().any(|ps| ps.clusters.is_empty()) {
        let live: BTreeSet<&PlacementKey> = schedule.iter().map(|p| &p.key).collect();
        state
            .placements
            .retain(|key, ps| live.contains(key) || !ps.clusters.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::SourceFile;

    const MEMBERS: &[&str] = &["m1", "m2", "m3", "m4"];

    fn commit(image_tag: &str, extra: &str) -> Catalog {
        let (cat, diags) = crate::analyze(&[SourceFile {
            path: "fleet.yaml".into(),
            content: commit_yaml(image_tag, extra).into_bytes(),
        }]);
        assert!(diags.is_empty(), "{diags:#?}");
        cat
    }

    fn commit_yaml(image_tag: &str, extra: &str) -> String {
        let mut yaml = String::from(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: app}\n",
        );
        yaml.push_str(&format!("data: {{tag: '{image_tag}'}}\n"));
        for m in MEMBERS {
            yaml.push_str(&format!(
                "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                 metadata: {{name: {m}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
            ));
        }
        yaml.push_str(
            "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
             metadata: {name: app}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
             \x20 strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1, maxSurge: 1}}\n",
        );
        yaml.push_str(extra);
        yaml
    }

    fn decide(
        cat: &Catalog,
        commit: &str,
        schedule: &[Arc<PlacementSchedule>],
        fleet: &Fleet,
        state: &RolloutState,
        pacing: Pacing,
    ) -> Decision {
        let input = Input {
            cat,
            commit,
            schedule,
            fleet,
            unreachable: &BTreeMap::new(),
            only: None,
            now: 0,
            staged: Default::default(),
            selected: None,
        };
        step(&input, state, pacing)
    }

    /// One rolling step with every push succeeding with `health`; returns the clusters applied
    /// and removed.
    fn roll(
        cat: &Catalog,
        sha: &str,
        state: &mut RolloutState,
        previous: &mut crate::schedule::Previous,
        health: BindingHealth,
    ) -> (Vec<String>, Vec<String>) {
        roll_at(cat, sha, state, previous, health, 0)
    }

    /// [`roll`] with the results absorbed at `now`.
    fn roll_at(
        cat: &Catalog,
        sha: &str,
        state: &mut RolloutState,
        previous: &mut crate::schedule::Previous,
        health: BindingHealth,
        now: u64,
    ) -> (Vec<String>, Vec<String>) {
        let fleet = Fleet::build(cat, None);
        let mut schedule = crate::schedule::schedule_commit(
            cat,
            &crate::snapshot::invalid_selections(cat),
            &fleet,
            previous,
            0,
        );
        let d = decide(cat, sha, &schedule, &fleet, state, Pacing::Rolling);
        let applied: Vec<String> = d
            .work
            .iter()
            .filter(|w| matches!(w.action, Action::Apply { .. }))
            .map(|w| w.cluster.clone())
            .collect();
        let removed: Vec<String> = d
            .work
            .iter()
            .filter(|w| matches!(w.action, Action::Remove { .. }))
            .map(|w| w.cluster.clone())
            .collect();
        let results = d
            .work
            .into_iter()
            .map(|w| (w, Outcome::Done(health, Default::default())))
            .collect();
        absorb(state, &mut schedule, d.ledger, results, sha, now);
        *previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
        (applied, removed)
    }

    /// A placement whose selectors become invalid (a reserved namespace) is held as KubeFleet
    /// holds it (pkg/controllers/placement/controller.go handleUpdate: no new snapshot, works
    /// left as they are): its schedule is the previous one, no work of it at either pace (no
    /// apply, no removal, not swept), no new history, the deletion guard counts nothing of it,
    /// its status says Scheduled=False InvalidResourceSelectors while its clusters keep their
    /// conditions; the other placement rolls on. Fixed, it is scheduled and stepped again.
    #[test]
    fn a_placement_with_invalid_selectors_is_held_while_the_others_roll() {
        use crate::model::PlacementKind;
        let other = |name: &str| {
            format!(
                "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: other}}\n---\n\
                 apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
                 metadata: {{name: other}}\nspec:\n\
                 \x20 resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: {name}}}]\n"
            )
        };
        let key = PlacementKey::new(PlacementKind::ClusterResourcePlacement, None, "other");
        let v1 = commit("1", &other("other"));
        let (mut state, mut previous) = (RolloutState::default(), Default::default());
        for _ in 0..10 {
            roll(
                &v1,
                "c1",
                &mut state,
                &mut previous,
                BindingHealth::Available,
            );
        }
        let before = state.placements[&key].clone();
        let scheduled_before = previous[&key].clone();
        assert_eq!(before.clusters.len(), MEMBERS.len());

        let v2 = commit("2", &other("kube-system"));
        let fleet = Fleet::build(&v2, None);
        let invalid = crate::snapshot::invalid_selections(&v2);
        let schedule = crate::schedule::schedule_commit(&v2, &invalid, &fleet, &previous, 0);
        let held = schedule.iter().find(|p| p.key == key).unwrap();
        assert_eq!(held.held(), Some(invalid[&key].message.as_str()));
        assert_eq!(
            PlacementSchedule {
                conditions: scheduled_before.conditions.clone(),
                ..(**held).clone()
            },
            *scheduled_before
        );
        for pacing in [Pacing::Rolling, Pacing::Immediate] {
            let d = decide(&v2, "c2", &schedule, &fleet, &state, pacing);
            assert!(d.work.iter().all(|w| w.placement != key), "{pacing:?}");
            assert!(
                d.work.iter().any(|w| w.placement.name == "app"),
                "{pacing:?}"
            );
            assert!(!d.ledger.histories.contains_key(&key));
            for sweep in &d.sweeps {
                assert!(matches!(&sweep.prune, Prune::AllExcept(keep) if keep.contains(&key)));
            }
            let step = d.steps.iter().find(|s| s.placement == key).unwrap();
            assert!(step.held);
            assert!(step.note.as_deref().unwrap().contains(held.held().unwrap()));
            for m in MEMBERS {
                assert_eq!(
                    super::super::guard::fate_in(Some(step), m),
                    super::super::guard::Fate::Untouched
                );
            }
            let (placement, clusters) =
                super::super::conditions::of_step(step, Some(held), Some(&before));
            assert_eq!(
                (
                    placement[0].type_.as_str(),
                    placement[0].status.as_str(),
                    placement[0].reason.as_str()
                ),
                (
                    "ClusterResourcePlacementScheduled",
                    "False",
                    "InvalidResourceSelectors"
                )
            );
            assert_eq!(clusters.len(), MEMBERS.len());
            for c in &clusters {
                assert!(
                    c.conditions.iter().all(|x| x.status == "True"),
                    "{:?}",
                    c.conditions
                );
            }
        }
        for _ in 0..10 {
            roll(
                &v2,
                "c2",
                &mut state,
                &mut previous,
                BindingHealth::Available,
            );
        }
        assert_eq!(state.placements[&key], before);
        assert_eq!(previous[&key].bindings, scheduled_before.bindings);

        // Fixed (and changed): scheduled and rolled out again.
        let v3 = commit(
            "2",
            &other("other").replace("name: other}\n---", "name: other, labels: {v: '3'}}\n---"),
        );
        let fleet = Fleet::build(&v3, None);
        let invalid = crate::snapshot::invalid_selections(&v3);
        assert!(invalid.is_empty());
        let schedule = crate::schedule::schedule_commit(&v3, &invalid, &fleet, &previous, 0);
        assert!(schedule.iter().all(|p| p.held().is_none()));
        let (applied, _) = roll(
            &v3,
            "c3",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        assert!(!applied.is_empty());
    }

    /// Overrides that select some clusters change only those clusters' manifests and revision
    /// fingerprints, and only those count as overridden (the Overridden condition's reason).
    #[test]
    fn overridden_clusters_are_those_whose_manifests_the_overrides_change() {
        let cro = "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourceOverride\n\
                   metadata: {name: mark}\nspec:\n\
                   \x20 placement: {name: app, scope: Cluster}\n\
                   \x20 clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
                   \x20 policy:\n    overrideRules:\n\
                   \x20   - clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchExpressions: [{key: kubernetes-fleet.io/member-name, operator: In, values: [m2, m3]}]}}]}\n\
                   \x20     jsonPatchOverrides: [{op: add, path: /metadata/labels, value: {marked: 'yes'}}]\n";
        let cat = commit("1", cro);
        let fleet = Fleet::build(&cat, None);
        let schedule = crate::schedule::schedule_commit(
            &cat,
            &crate::snapshot::invalid_selections(&cat),
            &fleet,
            &Default::default(),
            0,
        );
        // maxUnavailable 1, maxSurge 1: the first step only; render every cluster through it.
        let d = decide(
            &cat,
            "c1",
            &schedule,
            &fleet,
            &RolloutState::default(),
            Pacing::Rolling,
        );
        let step = &d.steps[0];
        let overridden: Vec<&str> = step.overridden.iter().map(String::as_str).collect();
        assert_eq!(overridden, ["m2", "m3"]);
        let rendered = |c: &str| step.desired[c].rendered.clone();
        assert_eq!(rendered("m1"), rendered("m4"));
        assert_eq!(rendered("m2"), rendered("m3"));
        assert_ne!(rendered("m1"), rendered("m2"));
        for w in &d.work {
            let Action::Apply { manifests, .. } = &w.action else {
                continue;
            };
            let marked = manifests[0]
                .value
                .pointer("/metadata/labels/marked")
                .is_some();
            assert_eq!(
                marked,
                ["m2", "m3"].contains(&w.cluster.as_str()),
                "{}",
                w.cluster
            );
        }
    }

    /// The memoized step decides exactly what a full step decides, over commits
    /// that change one placement's resources, then the other's, then add an override, with
    /// pushes that leave clusters pending before they become available and a member's change
    /// marked for a re-check; and it does reuse the settled placement's step meanwhile. The
    /// commits are read as the daemon reads them, through one parse cache, so a file a commit
    /// leaves unchanged hands the next one its very objects (the memo's shortcut by address),
    /// and the memoized step is given the commit's selections made once, as the daemon's is.
    #[test]
    fn a_memoized_step_decides_what_a_full_step_decides() {
        // The placement and the ConfigMap it selects are in files of their own: a commit that
        // changes the ConfigMap only leaves the placement object as it was.
        let other = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\n\
                     apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
                     metadata: {name: other}\nspec:\n\
                     \x20 resourceSelectors: [{group: '', version: v1, kind: Namespace, name: other}]\n"
            .to_string();
        let other_data = |v: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: o, namespace: other}}\n\
                 data: {{v: '{v}'}}\n"
            )
        };
        let cro = "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourceOverride\n\
                   metadata: {name: mark}\nspec:\n\
                   \x20 placement: {name: other, scope: Cluster}\n\
                   \x20 clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: other}]\n\
                   \x20 policy:\n    overrideRules:\n\
                   \x20   - clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchExpressions: [{key: kubernetes-fleet.io/member-name, operator: In, values: [m2]}]}}]}\n\
                   \x20     jsonPatchOverrides: [{op: add, path: /metadata/labels, value: {marked: 'yes'}}]\n";
        let mut cache = crate::catalog::ParseCache::default();
        // A commit of the app's files at `tag`, the other placement's with its ConfigMap at
        // `data`, and the override when asked.
        let mut load = |tag: &str, data: &str, with_override: bool| {
            let mut files = vec![
                ("fleet.yaml", commit_yaml(tag, "")),
                ("other.yaml", other.clone()),
                ("other-data.yaml", other_data(data)),
            ];
            if with_override {
                files.push(("override.yaml", cro.to_string()));
            }
            let files: Vec<SourceFile> = files
                .into_iter()
                .map(|(path, text)| SourceFile {
                    path: path.to_string(),
                    content: text.into_bytes(),
                })
                .collect();
            let (cat, diags) = crate::analyze::analyze_cached(&files, &mut cache);
            assert!(diags.is_empty(), "{diags:#?}");
            cat
        };
        let commits = [
            ("c1", load("1", "a", false)),
            ("c2", load("2", "a", false)),
            ("c3", load("2", "b", false)),
            ("c4", load("2", "b", true)),
        ];
        let mut state = RolloutState::default();
        let mut previous = crate::schedule::Previous::new();
        let mut memo = StepMemo::default();
        let mut reused = 0;
        for (sha, cat) in &commits {
            // The daemon's way: the commit's selections made once, when it was read.
            let made = crate::snapshot::select_all(cat);
            for round in 0..7 {
                if round == 3 {
                    state.recheck(
                        "m3",
                        Some("crp.other"),
                        "ConfigMap other/o deleted",
                        true,
                        0,
                    );
                }
                let fleet = Fleet::build(cat, None);
                let mut schedule = crate::schedule::schedule_commit(
                    cat,
                    &crate::snapshot::invalid_selections(cat),
                    &fleet,
                    &previous,
                    0,
                );
                let input = Input {
                    cat,
                    commit: sha,
                    schedule: &schedule,
                    fleet: &fleet,
                    unreachable: &BTreeMap::new(),
                    only: None,
                    now: 0,
                    staged: Default::default(),
                    selected: None,
                };
                let daemon_input = Input {
                    selected: Some(&made),
                    staged: Default::default(),
                    ..input
                };
                let mut full = step(&input, &state, Pacing::Rolling);
                let mut memoized = step_memoized(&daemon_input, &state, Pacing::Rolling, &mut memo);
                // A settled step's number names a memo entry: not part of what is decided.
                for s in full.steps.iter_mut().chain(memoized.steps.iter_mut()) {
                    Arc::make_mut(s).settled = None;
                }
                assert_eq!(
                    format!("{full:#?}"),
                    format!("{memoized:#?}"),
                    "{sha}, round {round}"
                );
                reused += memo.reused();
                let health = if round == 1 {
                    BindingHealth::Pending
                } else {
                    BindingHealth::Available
                };
                let results = full
                    .work
                    .into_iter()
                    .map(|w| (w, Outcome::Done(health, Default::default())))
                    .collect();
                absorb(&mut state, &mut schedule, full.ledger, results, sha, 0);
                previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
            }
        }
        let ps = &state.placements[&"crp/other".parse::<PlacementKey>().unwrap()];
        // The override reached m2 (only its rendering changed).
        assert_eq!(ps.clusters["m2"].commit.as_deref(), Some("c4"));
        assert!(reused >= 10, "{reused}");
    }

    /// State and bindings after the first commit landed everywhere and became available.
    fn settled_on_v1() -> (RolloutState, crate::schedule::Previous) {
        let mut state = RolloutState::default();
        let mut previous = crate::schedule::Previous::new();
        roll(
            &commit("1", ""),
            "c1",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        (state, previous)
    }

    #[test]
    fn first_commit_binds_every_cluster_then_updates_one_at_a_time() {
        let mut state = RolloutState::default();
        let mut previous = crate::schedule::Previous::new();
        let v1 = commit("1", "");
        // PickAll over 4: target 4 + surge 1 - 0 can-be-ready = 5 may be bound: all 4 are.
        let (applied, _) = roll(
            &v1,
            "c1",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        assert_eq!(applied, MEMBERS);
        let bindings = &previous[&app()].bindings;
        assert!(bindings.iter().all(|b| b.state == BindingState::Bound));

        // A new resource version: maxUnavailable 1 of 4 → one cluster per step while each
        // becomes available.
        let v2 = commit("2", "");
        let mut order = Vec::new();
        for _ in 0..4 {
            let (applied, _) = roll(
                &v2,
                "c2",
                &mut state,
                &mut previous,
                BindingHealth::Available,
            );
            assert_eq!(applied.len(), 1, "{applied:?}");
            order.extend(applied);
        }
        assert_eq!(order, MEMBERS);
        let (applied, _) = roll(
            &v2,
            "c2",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        assert!(applied.is_empty());
        let ps = &state.placements[&app()];
        assert!(ps
            .clusters
            .values()
            .all(|c| c.revision.as_ref().unwrap().resource_index == 1));
    }

    #[test]
    fn a_cluster_that_stays_pending_stalls_the_update() {
        let (mut state, mut previous) = settled_on_v1();
        let v2 = commit("2", "");
        let (first, _) = roll(&v2, "c2", &mut state, &mut previous, BindingHealth::Pending);
        assert_eq!(first, ["m1"]);
        // m1 is not available yet: no budget for another, but m1 is re-applied to read health.
        let (again, _) = roll(&v2, "c2", &mut state, &mut previous, BindingHealth::Pending);
        assert_eq!(again, ["m1"]);
    }

    /// What a member lost is re-applied through the step, with the cluster's own
    /// revision (no budget for an update is spent), and the re-apply clears the mark.
    #[test]
    fn a_cluster_marked_for_recheck_is_reapplied_once_with_what_it_runs() {
        let (mut state, mut previous) = settled_on_v1();
        let v1 = commit("1", "");
        let (none, _) = roll(
            &v1,
            "c1",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        assert!(none.is_empty());
        state.recheck("m3", Some("crp.app"), "ConfigMap app/x deleted", true, 5);
        assert_eq!(
            state.placements[&app()].clusters["m3"].health,
            BindingHealth::Pending
        );
        let (healed, _) = roll(
            &v1,
            "c1",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        assert_eq!(healed, ["m3"]);
        let m3 = &state.placements[&app()].clusters["m3"];
        assert_eq!(
            (m3.health, m3.recheck.as_deref()),
            (BindingHealth::Available, None)
        );
        let (again, _) = roll(
            &v1,
            "c1",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        assert!(again.is_empty());
        // Everything marked (start-up, resync): every cluster once. Pushes that find what
        // was there change no entry, not even its time or its commit (a later commit that
        // left this placement as it was): the state is as it was.
        let before = state.clone();
        state.recheck_all("periodic resync");
        let (all, _) = roll_at(
            &v1,
            "c2",
            &mut state,
            &mut previous,
            BindingHealth::Available,
            99,
        );
        assert_eq!(all, MEMBERS);
        assert_eq!(state, before);
        // Clusters given the same rendering share one object set.
        let clusters = &state.placements[&app()].clusters;
        assert!(Arc::ptr_eq(
            &clusters["m1"].objects,
            &clusters["m4"].objects
        ));
        // One that finds the cluster otherwise is a change, at that time.
        state.recheck_all("periodic resync");
        roll_at(
            &v1,
            "c1",
            &mut state,
            &mut previous,
            BindingHealth::Pending,
            100,
        );
        let m1 = &state.placements[&app()].clusters["m1"];
        assert_eq!((m1.health, m1.updated_at), (BindingHealth::Pending, 100));
    }

    /// Deliveries absorbed one member at a time, each with its own rendering of the same
    /// objects, share one object set; a cluster given other objects keeps its own.
    #[test]
    fn clusters_absorbed_apart_share_equal_object_sets() {
        let manifests = |name: &str| -> super::super::work::Manifests {
            let value = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "app"}, "data": {"x": name}});
            Arc::new(vec![Manifest {
                value: Arc::new(value),
                wave: 0,
                envelope: None,
                work: None,
            }])
        };
        let mut state = RolloutState::default();
        for (cluster, name) in [("m1", "cfg"), ("m2", "cfg"), ("m3", "other"), ("m4", "cfg")] {
            let revision = Revision {
                resource_index: 0,
                rendered: cluster.into(),
            };
            let work = Work::apply(
                &app(),
                cluster,
                (manifests(name), revision),
                ApplyStrategy::default(),
                "r0".into(),
                false,
                false,
            );
            let done = Outcome::Done(BindingHealth::Available, Default::default());
            absorb(
                &mut state,
                &mut [],
                Ledger::default(),
                vec![(work, done)],
                "c1",
                0,
            );
        }
        let c = &state.placements[&app()].clusters;
        assert!(Arc::ptr_eq(&c["m1"].objects, &c["m2"].objects));
        assert!(Arc::ptr_eq(&c["m1"].objects, &c["m4"].objects));
        assert!(!Arc::ptr_eq(&c["m1"].objects, &c["m3"].objects));
        assert_eq!(
            c["m3"].objects.iter().next().unwrap(),
            &ObjectKey::new("", "ConfigMap", Some("app"), "other")
        );
    }

    #[test]
    fn a_deleted_placement_is_removed_everywhere_and_forgotten() {
        let (mut state, mut previous) = settled_on_v1();
        let without = {
            let yaml = "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n";
            let mut text = yaml.to_string();
            for m in MEMBERS {
                text.push_str(&format!(
                    "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
                     metadata: {{name: {m}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
                ));
            }
            crate::analyze(&[SourceFile {
                path: "fleet.yaml".into(),
                content: text.into_bytes(),
            }])
            .0
        };
        let (_, removed) = roll(
            &without,
            "c2",
            &mut state,
            &mut previous,
            BindingHealth::Available,
        );
        assert_eq!(removed, MEMBERS);
        assert!(state.placements.is_empty());
    }

    #[test]
    fn external_strategy_is_scheduled_but_not_pushed() {
        let mut cat = commit("1", "");
        cat.placements[0].spec.spec.strategy.type_ = Some(RolloutStrategyType::External);
        let fleet = Fleet::build(&cat, None);
        let schedule = crate::schedule::schedule_commit(
            &cat,
            &crate::snapshot::invalid_selections(&cat),
            &fleet,
            &Default::default(),
            0,
        );
        assert_eq!(schedule[0].selected, MEMBERS);
        let d = decide(
            &cat,
            "c1",
            &schedule,
            &fleet,
            &RolloutState::default(),
            Pacing::Rolling,
        );
        assert!(d.work.is_empty());
        assert!(d.steps[0].note.as_deref().unwrap().contains("External"));
    }

    fn app() -> PlacementKey {
        "crp/app".parse().unwrap()
    }

    fn applied(d: &Decision) -> BTreeMap<String, (Revision, String, usize)> {
        d.work
            .iter()
            .filter_map(|w| match &w.action {
                Action::Apply {
                    revision,
                    resource_snapshot,
                    manifests,
                    ..
                } => Some((
                    w.cluster.clone(),
                    (revision.clone(), resource_snapshot.clone(), manifests.len()),
                )),
                Action::Remove { .. } => None,
            })
            .collect()
    }

    /// `apply` and `run` are one step at two paces: immediately every cluster gets what the
    /// rolling step gives it in its turn — same manifests, revision and the whole snapshot hash
    /// as stamp (a stamp cut short by `apply` would make a run after it re-patch everything).
    #[test]
    fn immediate_pacing_gives_every_cluster_now_what_rolling_gives_it_in_turn() {
        let (state, mut previous) = settled_on_v1();
        let v2 = commit("2", "");
        let fleet = Fleet::build(&v2, None);
        let schedule = crate::schedule::schedule_commit(
            &v2,
            &crate::snapshot::invalid_selections(&v2),
            &fleet,
            &previous,
            0,
        );
        let rolling = decide(&v2, "c2", &schedule, &fleet, &state, Pacing::Rolling);
        let now = decide(&v2, "c2", &schedule, &fleet, &state, Pacing::Immediate);
        let (rolled, immediate) = (applied(&rolling), applied(&now));
        assert_eq!(rolled.keys().collect::<Vec<_>>(), ["m1"]);
        assert_eq!(immediate.keys().collect::<Vec<_>>(), MEMBERS);
        assert_eq!(rolled["m1"], immediate["m1"]);
        let selected = crate::snapshot::select(&v2, &v2.placements[0].spec).unwrap();
        let hash = crate::snapshot::resource_hash(&selected);
        assert_eq!(hash.len(), 64);
        assert!(immediate.values().all(|(_, stamp, _)| *stamp == hash));
        assert_eq!(now.steps[0].strategy, Strategy::Immediate);
        assert!(now.steps[0].waiting.is_empty());
        // A fresh schedule (what `apply` has, with no bindings kept) steps the same way.
        previous.clear();
        let fresh = crate::schedule::schedule_commit(
            &v2,
            &crate::snapshot::invalid_selections(&v2),
            &fleet,
            &previous,
            0,
        );
        let from_nothing = decide(
            &v2,
            "c2",
            &fresh,
            &fleet,
            &RolloutState::default(),
            Pacing::Immediate,
        );
        // Its history starts at 0 (it keeps none); the rest is the same.
        let strip =
            |m: BTreeMap<String, (Revision, String, usize)>| -> Vec<(String, String, String)> {
                m.into_iter()
                    .map(|(c, (r, stamp, _))| (c, r.rendered, stamp))
                    .collect()
            };
        assert_eq!(strip(applied(&from_nothing)), strip(immediate));
    }

    #[test]
    fn immediate_pacing_pushes_external_placements_that_rolling_leaves_to_staged_runs() {
        let mut cat = commit("1", "");
        cat.placements[0].spec.spec.strategy.type_ = Some(RolloutStrategyType::External);
        let fleet = Fleet::build(&cat, None);
        let schedule = crate::schedule::schedule_commit(
            &cat,
            &crate::snapshot::invalid_selections(&cat),
            &fleet,
            &Default::default(),
            0,
        );
        let state = RolloutState::default();
        let now = decide(&cat, "c1", &schedule, &fleet, &state, Pacing::Immediate);
        assert_eq!(applied(&now).len(), MEMBERS.len());
        assert_eq!(
            Pace::of(Pacing::Rolling, &cat.placements[0].spec.spec),
            Pace::Staged
        );
    }

    /// `apply` sweeps every member of what it no longer receives, except placements that cannot
    /// be rendered for it; a member that cannot be reached is not touched at all; limited to
    /// some placements, the sweep is limited to them.
    #[test]
    fn immediate_pacing_sweeps_members_and_leaves_unreachable_ones_alone() {
        let broken = "---\napiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourceOverride\n\
                      metadata: {name: broken}\nspec:\n\
                      \x20 placement: {name: app, scope: Cluster}\n\
                      \x20 clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
                      \x20 policy:\n    overrideRules:\n\
                      \x20   - clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchExpressions: [{key: kubernetes-fleet.io/member-name, operator: In, values: [m2]}]}}]}\n\
                      \x20     jsonPatchOverrides: [{op: replace, path: /spec/missing, value: 1}]\n";
        let cat = commit("1", broken);
        let fleet = Fleet::build(&cat, None);
        let schedule = crate::schedule::schedule_commit(
            &cat,
            &crate::snapshot::invalid_selections(&cat),
            &fleet,
            &Default::default(),
            0,
        );
        let unreachable: BTreeMap<String, String> = [("m4".to_string(), "down".to_string())].into();
        let app: PlacementKey = "crp/app".parse().unwrap();
        let step_with = |only: Option<&BTreeSet<PlacementKey>>| {
            let input = Input {
                cat: &cat,
                commit: "c1",
                schedule: &schedule,
                fleet: &fleet,
                unreachable: &unreachable,
                only,
                now: 0,
                staged: Default::default(),
                selected: None,
            };
            step(&input, &RolloutState::default(), Pacing::Immediate)
        };
        let d = step_with(None);
        assert_eq!(applied(&d).keys().collect::<Vec<_>>(), ["m1", "m3"]);
        assert!(
            d.steps[0].render_errors.contains_key("m2"),
            "{:?}",
            d.steps[0]
        );
        let held: Vec<&str> = d.held.iter().map(|(w, _)| w.cluster.as_str()).collect();
        assert_eq!(held, ["m4"]);
        assert_eq!(d.skipped.keys().collect::<Vec<_>>(), ["m4"]);
        let sweeps: Vec<(&str, &Prune)> = d
            .sweeps
            .iter()
            .map(|s| (s.cluster.as_str(), &s.prune))
            .collect();
        let keep_app = Prune::AllExcept([app.clone()].into());
        let keep_none = Prune::AllExcept(BTreeSet::new());
        assert_eq!(
            sweeps,
            [("m1", &keep_none), ("m2", &keep_app), ("m3", &keep_none)]
        );
        let only: BTreeSet<PlacementKey> = [app.clone()].into();
        let limited = step_with(Some(&only));
        assert_eq!(limited.sweeps[0].prune, Prune::Only(only.clone()));
        assert_eq!(limited.sweeps[1].prune, Prune::Only(BTreeSet::new()));
        // Rolling pace sweeps nothing: it knows what it placed.
        let input = Input {
            cat: &cat,
            commit: "c1",
            schedule: &schedule,
            fleet: &fleet,
            unreachable: &unreachable,
            only: None,
            now: 0,
            staged: Default::default(),
            selected: None,
        };
        assert!(step(&input, &RolloutState::default(), Pacing::Rolling)
            .sweeps
            .is_empty());
    }
}
