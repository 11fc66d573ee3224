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
//!
//! Here: the entry points, and the dispatch of each placement to the step of its kind, behind
//! the memo of settled steps (`memo.rs`). Each kind's step is a function of its own, from the
//! placement and its state to its summary and work: `ocm.rs` (OCM workloads), `immediate.rs`
//! and `rolling.rs` (KubeFleet placements at immediate pacing, and at rolling pacing with the
//! RollingUpdate strategy), `external.rs` (the External strategy: staged update runs),
//! `held.rs` (invalid resource selectors) and `removed.rs` (gone from the commit). What they
//! share: `pace.rs`, `render.rs`; after the work: `sweep.rs` (immediate pacing) and
//! `absorb.rs`.

use crate::fast_hash::HashSet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::approval::{Approval, Request};
use super::rolling::Revision;
use super::staged::RunStatus;
use super::state::{PlacementState, RolloutState};
use super::strategy::{ApplyStrategy, Strategy};
use super::work::{Sweep, Work};
use crate::catalog::Catalog;
use crate::model::placement::PlacementSpec;
use crate::model::staged::StagedUpdateRun;
use crate::model::{ClusterMap, ObjectKey, PlacementKey};
use crate::render::cluster::Selections;
use crate::schedule::{Fleet, PlacementSchedule};

mod absorb;
mod external;
mod held;
mod immediate;
mod memo;
mod ocm;
mod pace;
mod removed;
mod render;
mod rolling;
mod sweep;

pub use absorb::{absorb, absorb_indexed, BindingIndex, NameSource};
pub use external::run_key_of;
use memo::Settled;
pub use memo::StepMemo;
pub use ocm::groups_of as ocm_groups_of;
pub use pace::{rolling_params, target_of, Pace, Pacing};
use render::Renderings;
use sweep::sweep;

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
    /// What each rendered cluster should run now, and hold. Shared by the clusters given the
    /// same rendering: a settled placement's step is kept (the memo), with an entry for every
    /// cluster it runs on.
    pub rendered: ClusterMap<Arc<Rendered>>,
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
    /// The settled step this one is, by its number in the [`StepMemo`]: two summaries with the
    /// same number had the same inputs (spec, selection, schedule, state) and outcome, so what
    /// is derived from them alone (the status) can be kept rather than derived again.
    pub settled: Option<u64>,
    /// Held for invalid resource selectors ([`PlacementSchedule::held`]): nothing of it is
    /// applied, pruned or swept, and the deletion guard counts none of its objects as deleted.
    pub held: bool,
    /// An OCM Placement that ManifestWorkReplicaSets name: their rollout strategy.
    pub replica_sets: Option<super::progressive::ReplicaSetRollout>,
}

impl StepSummary {
    pub(crate) fn new(placement: PlacementKey, strategy: Strategy) -> StepSummary {
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
            rendered: ClusterMap::new(),
            overridden: BTreeSet::new(),
            render_errors: BTreeMap::new(),
            work_sync_errors: BTreeSet::new(),
            report_diff: false,
            selected_resources: vec![],
            settled: None,
            held: false,
            replica_sets: None,
        }
    }

    /// Something changes or waits for the budget.
    pub fn is_moving(&self) -> bool {
        !self.waiting.is_empty() || !self.applying.is_empty() || !self.removing.is_empty()
    }

    /// Gives back the room the per-cluster lists' filling left over.
    fn shrink_to_fit(&mut self) {
        self.rendered.shrink_to_fit();
        for list in [
            &mut self.applying,
            &mut self.removing,
            &mut self.waiting,
            &mut self.up_to_date,
        ] {
            crate::exact_fit::fit(list);
        }
    }

    /// What `cluster` should run now, if it was rendered (or, held, keeps what it runs).
    pub fn desired(&self, cluster: &str) -> Option<&Revision> {
        self.rendered.get(cluster).map(|r| &r.revision)
    }

    /// What `cluster` should hold, if it was rendered.
    pub fn objects(&self, cluster: &str) -> Option<&Arc<BTreeSet<ObjectKey>>> {
        self.rendered.get(cluster)?.objects.as_ref()
    }
}

/// What one rendered cluster of a placement should run and hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub revision: Revision,
    /// Its objects by [`ObjectKey`] (shared between clusters with the same rendering): what
    /// the deletion guard counts against. `None` for a held placement's cluster, which is not
    /// rendered and keeps what it runs.
    pub objects: Option<Arc<BTreeSet<ObjectKey>>>,
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

/// What every placement's step reads.
struct Context<'s, 'a> {
    input: &'s Input<'a>,
    state: &'s RolloutState,
    pacing: Pacing,
}

impl Context<'_, '_> {
    /// Whether the step takes placement `key`.
    fn in_scope(&self, key: &PlacementKey) -> bool {
        self.input.only.is_none_or(|only| only.contains(key))
    }
}

/// A placement of the commit's schedule, as its step reads it.
struct Placement<'a> {
    key: &'a PlacementKey,
    /// Its position in the schedule (the renderings' index of it).
    index: usize,
    schedule: &'a Arc<PlacementSchedule>,
    /// Its state before the step.
    prev: &'a Arc<PlacementState>,
}

/// A KubeFleet placement of the commit with its resources selected: what its step reads at
/// any pace.
struct KubeFleet<'a> {
    spec: &'a PlacementSpec,
    /// The whole hash of the selected resources: every cluster's snapshot stamp.
    resource_snapshot: crate::model::SharedText,
    /// Resource snapshot indices that clusters or runs still use: kept in the history.
    in_use: BTreeSet<u64>,
    history_limit: u32,
    strategy: ApplyStrategy,
}

/// What one placement's step adds to the decision besides its summary.
#[derive(Default)]
struct Effects {
    work: Vec<Work>,
    /// Its resource snapshot history after the step, and whether it abandons its objects on
    /// removal (KubeFleet placements that take snapshots).
    history: Option<(crate::snapshot::History, bool)>,
    /// Approval requests its staged runs reached and wait on.
    requests: Vec<Request>,
    /// Its staged runs after the step, by run key.
    runs: Vec<(String, Option<RunStatus>)>,
}

impl Effects {
    fn work(work: Vec<Work>) -> Effects {
        Effects {
            work,
            ..Effects::default()
        }
    }
}

impl Decision {
    /// Adds placement `p`'s step; its work joins `work` (delivered or held at the end).
    fn add(&mut self, work: &mut Vec<Work>, p: &Placement, summary: Arc<StepSummary>, e: Effects) {
        if let Some((history, abandon)) = e.history {
            record(&mut self.ledger, p.key, p.prev, history, abandon);
        }
        work.extend(e.work);
        self.requests.extend(e.requests);
        self.ledger.runs.extend(e.runs);
        self.steps.push(summary);
    }
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
        ..
    } = *input;
    let cx = Context {
        input,
        state,
        pacing,
    };
    let selections = match input.selected {
        Some(made) => Selections::with(cat, made),
        None => Selections::new(cat),
    };
    let track_overrides = pacing == Pacing::Rolling;
    let mut renderings = Renderings::new(cat, fleet, &selections, schedule, track_overrides);
    let same_commit = memo.start(cat, fleet, commit);
    let mut runs = external::runs_by_placement(&cx);
    let mut decision = Decision::default();
    let mut work = Vec::new();
    // Borrowed, not cloned: most placements are settled and reused, and a copy of every
    // placement's state (every cluster's objects) at every step would be the bulk of its time.
    let no_state = Arc::new(PlacementState::default());
    for (index, ps) in schedule.iter().enumerate() {
        if !cx.in_scope(&ps.key) {
            continue;
        }
        let p = Placement {
            key: &ps.key,
            index,
            schedule: ps,
            prev: state.placements.get(&ps.key).unwrap_or(&no_state),
        };
        // The same commit: only the schedule and the state can have changed since. Asked
        // before anything else (a summary is not even started): it is most placements at most
        // looks.
        let (summary, effects) =
            if let Some(s) = memo.reuse(p.key, pacing, ps, p.prev, |_| same_commit) {
                (s, Effects::default())
            } else if p.key.kind.is_ocm() {
                let (summary, work) = ocm::step(&cx, &p, &mut renderings);
                (Arc::new(summary), Effects::work(work))
            } else {
                let stepped = kubefleet(&cx, &p, memo, &selections, &mut renderings, &mut runs);
                let Some(stepped) = stepped else {
                    continue;
                };
                stepped
            };
        decision.add(&mut work, &p, summary, effects);
    }
    decision.ledger.runs.extend(external::orphaned(&cx, runs));
    decision.ledger.runs.extend(external::gone(&cx));

    let scheduled: HashSet<&PlacementKey> = schedule.iter().map(|p| &p.key).collect();
    memo.keep_only(&scheduled);
    for (key, ps) in &state.placements {
        if scheduled.contains(key) || !cx.in_scope(key) {
            continue;
        }
        let (summary, removals) = removed::step(key, ps, fleet);
        work.extend(removals);
        decision.steps.push(Arc::new(summary));
    }

    deliver(input.unreachable, &mut decision, work);
    if pacing == Pacing::Immediate {
        sweep(input, &mut decision);
    }
    decision
}

/// The step of KubeFleet placement `p`: held for invalid resource selectors, reused from the
/// memo when its selection or its snapshot is the settled step's, or taken at its pace;
/// `None` when the commit has no such placement.
fn kubefleet<'a>(
    cx: &Context<'_, 'a>,
    p: &Placement,
    memo: &mut StepMemo,
    selections: &Selections,
    renderings: &mut Renderings,
    runs: &mut BTreeMap<PlacementKey, Vec<&'a StagedUpdateRun>>,
) -> Option<(Arc<StepSummary>, Effects)> {
    let Context { input, pacing, .. } = *cx;
    let entry = input
        .cat
        .placement(&p.key.name, p.key.namespace.as_deref())?;
    let spec = &entry.spec.spec;
    let pace = Pace::of(pacing, spec);
    if let Some(message) = p.schedule.held() {
        // Invalid resource selectors: KubeFleet's placement controller takes no snapshot
        // and its works stay, so nothing is applied, pruned or recorded here (history,
        // cluster states and staged runs as they were). Its runs are not stepped.
        runs.remove(p.key);
        memo.forget(p.key);
        let summary = held::step(p.key, pace.strategy(), p.schedule, p.prev, message);
        return Some((Arc::new(summary), Effects::default()));
    }
    let is_rolling = matches!(pace, Pace::Rolling { .. });
    let resources = selections.of(entry).unwrap_or_default();
    let source = &input.cat.objects[entry.index].value;
    if is_rolling {
        let same = |m: &Settled| m.same_objects(source, &resources);
        if let Some(s) = memo.reuse(p.key, pacing, p.schedule, p.prev, same) {
            return Some((s, Effects::default()));
        }
    }
    let mut step = StepSummary::new(p.key.clone(), pace.strategy());
    step.selected_resources = resources
        .iter()
        .map(|r| match &r.namespace {
            Some(ns) => format!("{}/{ns}/{}", r.gvk.kind, r.name),
            None => format!("{}/{}", r.gvk.kind, r.name),
        })
        .collect();
    let kf = KubeFleet {
        spec,
        resource_snapshot: crate::snapshot::resource_hash(&resources).into(),
        in_use: in_use(cx.state, p),
        history_limit: spec.revision_history_limit.unwrap_or(10).max(1) as u32,
        strategy: ApplyStrategy::from_rollout(Some(&spec.strategy)),
    };
    if is_rolling {
        let same = |m: &Settled| m.same_snapshot(&kf.resource_snapshot, &entry.spec);
        if let Some(s) = memo.reuse(p.key, pacing, p.schedule, p.prev, same) {
            return Some((s, Effects::default()));
        }
    }
    step.report_diff = kf.strategy.reports_diff();
    if pace == Pace::Staged {
        // External: a resource snapshot is taken only when a run initialises (as KubeFleet's updaterun controller takes it).
        let runs = runs.remove(p.key).unwrap_or_default();
        let (step, effects) = external::step(cx, p, kf, &runs, step, renderings);
        return Some((Arc::new(step), effects));
    }
    let advance = p.prev.resources.advance(
        &kf.resource_snapshot,
        input.commit,
        kf.history_limit,
        &kf.in_use,
    );
    let (summary, work) = match pace {
        Pace::Staged => unreachable!("stepped above"),
        Pace::Now => {
            let (step, work) = immediate::step(p, &kf, advance.index, step, renderings);
            (Arc::new(step), work)
        }
        Pace::Rolling { target, params } => {
            let budget = (target, &params);
            let (step, work) = rolling::step(cx, p, &kf, budget, advance.index, step, renderings);
            // What the step was worked out from, taken only when it is kept.
            let inputs = |summary: Arc<StepSummary>| Settled {
                pacing,
                source: source.clone(),
                selected: resources.iter().map(|r| r.value.clone()).collect(),
                placement: entry.spec.clone(),
                resource_snapshot: kf.resource_snapshot.clone(),
                schedule: p.schedule.clone(),
                state: p.prev.clone(),
                summary,
            };
            let settled = memo::is_settled(&step, &work, advance.created, p.prev);
            (memo.remember(p.key, step, settled.then_some(inputs)), work)
        }
    };
    let effects = Effects {
        history: Some((advance.history, kf.strategy.abandon)),
        ..Effects::work(work)
    };
    Some((summary, effects))
}

/// The resource snapshot indices placement `p`'s clusters run, or its staged runs use.
fn in_use(state: &RolloutState, p: &Placement) -> BTreeSet<u64> {
    let mut in_use: BTreeSet<u64> = p
        .prev
        .clusters
        .values()
        .filter_map(|c| c.revision.as_ref().map(|r| r.resource_index))
        .collect();
    in_use.extend(
        state
            .runs
            .values()
            .filter(|r| r.placement == *p.key)
            .filter_map(|r| r.resource_snapshot_index_used),
    );
    in_use
}

/// Hands `work` to the decision. A member that cannot be reached now is not pushed to: its
/// work is held (and fails at once), so that it delays only itself.
fn deliver(unreachable: &BTreeMap<String, String>, decision: &mut Decision, work: Vec<Work>) {
    if unreachable.is_empty() {
        decision.work = work;
        return;
    }
    for w in work {
        match unreachable.get(&w.cluster) {
            Some(why) => {
                decision.skipped.insert(w.cluster.clone(), why.clone());
                decision.held.push((w, why.clone()));
            }
            None => decision.work.push(w),
        }
    }
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

#[cfg(test)]
mod tests;
