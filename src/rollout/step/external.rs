//! The step of a KubeFleet placement with `strategy.type: External` at rolling pacing: its
//! staged update runs move it, stage by stage ([`crate::rollout::staged`]), and what they
//! delivered is kept in place between and after them; without a run nothing moves. Also the
//! runs that target no such placement (they fail) and those gone from the repository.

use std::collections::{BTreeMap, BTreeSet};

use super::render::{render_at, Renderings};
use super::StepSummary;
use super::{note_render_errors, Context, Effects, Input, KubeFleet, Pacing, Placement};
use crate::model::staged::StagedUpdateRun;
use crate::model::PlacementKey;
use crate::rollout::approval::Request;
use crate::rollout::staged::{self, RunStatus};
use crate::rollout::state::RolloutState;
use crate::rollout::strategy::ApplyStrategy;
use crate::rollout::work::Work;
use crate::schedule::BindingState;

/// The commit's staged update runs by the placement they target, for the step's placements;
/// only the daemon's pace (rolling) steps them.
pub(super) fn runs_by_placement<'a>(
    cx: &Context<'_, 'a>,
) -> BTreeMap<PlacementKey, Vec<&'a StagedUpdateRun>> {
    let mut runs: BTreeMap<PlacementKey, Vec<&StagedUpdateRun>> = BTreeMap::new();
    if cx.pacing == Pacing::Rolling {
        for e in &cx.input.cat.update_runs {
            let key = staged::placement_of(&e.spec);
            if cx.in_scope(&key) {
                runs.entry(key).or_default().push(&e.spec);
            }
        }
    }
    runs
}

/// The step of External placement `p` with the commit's `runs` that target it, from `step`
/// (started): its summary, the work of its runs and of their healing, its history, the
/// approvals its runs wait on and the runs after the step.
pub(super) fn step(
    cx: &Context,
    p: &Placement,
    kf: KubeFleet,
    runs: &[&StagedUpdateRun],
    mut step: StepSummary,
    renderings: &mut Renderings,
) -> (StepSummary, Effects) {
    let Context { input, state, .. } = *cx;
    let (key, ps, prev) = (p.key, p.schedule, p.prev);
    let view = staged::View {
        key,
        spec: Some(kf.spec),
        schedule: Some(ps),
        fleet: input.fleet,
        clusters: &prev.clusters,
        resource_hash: Some(&kf.resource_snapshot),
        revision_history_limit: kf.history_limit,
        indices_in_use: kf.in_use,
        apply_strategy: kf.strategy,
    };
    let mut history = prev.resources.clone();
    let mut render_run = |run: &RunStatus, cluster: &str| {
        let index = run.resource_snapshot_index_used.unwrap_or_default();
        if run.render_commit == input.commit {
            renderings.render(&mut step, p.index, key, cluster, index)
        } else {
            let other = input.staged.catalogs.get(&run.render_commit)?;
            render_at(other, key, input.fleet, cluster, index)
        }
    };
    let mut outcome = step_runs(&view, runs, state, &mut history, input, &mut render_run);
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
        .map(|b| b.cluster.as_str())
        .filter(|c| {
            prev.clusters.get(c).is_some_and(|cs| cs.revision.is_some())
                && !outcome.applying.iter().any(|a| a == c)
                && !outcome.removing.iter().any(|r| r == c)
        })
        .map(str::to_string)
        .collect();
    step.applying = outcome.applying;
    step.removing = outcome.removing;
    step.requeue_after = outcome.requeue_after;
    step.note = Some(outcome.note);
    note_render_errors(&mut step);
    let effects = Effects {
        work: outcome.work,
        history: Some((history, kf.strategy.abandon)),
        requests: outcome.waiting_on,
        runs: outcome.runs,
    };
    (step, effects)
}

/// The runs of the commit whose placement is missing or not External, by the placement they
/// name: they fail (no work can come of them). Their records after the step.
pub(super) fn orphaned(
    cx: &Context,
    runs: BTreeMap<PlacementKey, Vec<&StagedUpdateRun>>,
) -> Vec<(String, Option<RunStatus>)> {
    let Context { input, state, .. } = *cx;
    let no_clusters = crate::rollout::ClusterStates::new();
    let mut records = Vec::new();
    for (key, runs) in runs {
        let entry = input.cat.placement(&key.name, key.namespace.as_deref());
        let prev = state.placements.get(&key);
        let view = staged::View {
            key: &key,
            spec: entry.map(|e| &e.spec.spec),
            schedule: input.schedule.iter().find(|p| p.key == key).map(|p| &**p),
            fleet: input.fleet,
            clusters: prev.map_or(&no_clusters, |p| &p.clusters),
            resource_hash: None,
            revision_history_limit: 10,
            indices_in_use: BTreeSet::new(),
            apply_strategy: ApplyStrategy::default(),
        };
        let mut history = prev.map(|p| p.resources.clone()).unwrap_or_default();
        let outcome = step_runs(&view, &runs, state, &mut history, input, &mut |_, _| None);
        records.extend(outcome.runs);
    }
    records
}

/// The records of runs gone from the repository (`None`: forgotten), when the step is a
/// rolling one over every placement.
pub(super) fn gone(cx: &Context) -> Vec<(String, Option<RunStatus>)> {
    if cx.pacing != Pacing::Rolling || cx.input.only.is_some() {
        return Vec::new();
    }
    let present: BTreeSet<String> = cx
        .input
        .cat
        .update_runs
        .iter()
        .map(|e| run_key_of(&e.spec))
        .collect();
    cx.state
        .runs
        .keys()
        .filter(|k| !present.contains(*k))
        .map(|gone| (gone.clone(), None))
        .collect()
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
