//! What one reconcile of a validated commit does, decided without I/O: for every placement, the
//! RollingUpdate step (kubefleet.md §3.1) over its bindings, turned into work for members —
//! apply these manifests to that cluster, remove that placement from this cluster — and, once
//! the work is done, the new state. The daemon loop does the I/O around it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use serde_json::Value;

use super::state::{ClusterState, DaemonState, PlacementState};
use crate::catalog::Catalog;
use crate::model::placement::{PlacementType, RolloutStrategyType};
use crate::model::{PlacementKey, PlacementKind};
use crate::push::Strategy;
use crate::render::cluster::{ocm_workloads, Selections};
use crate::render::{ClusterTarget, Manifest};
use crate::rollout::{plan_step, BindingHealth, Revision, RollingParams, RolloutBinding, Target};
use crate::schedule::{BindingState, Fleet, PlacementSchedule};
use crate::snapshot::hash_value;

/// What to do on one member for one placement.
#[derive(Debug, Clone)]
pub enum Action {
    /// Apply the manifests (the placement's full set for the cluster: push prunes what is gone).
    Apply {
        manifests: Vec<Manifest>,
        revision: Revision,
        /// The binding goes Scheduled → Bound once this succeeds.
        binds: bool,
        /// Only re-applied to read availability again (the cluster already runs it).
        refresh: bool,
        strategy: Strategy,
        /// The `gitfleet.io/resource-snapshot` stamp: the placement's resource hash.
        resource_snapshot: String,
    },
    /// Remove everything this placement put on the cluster (or, with `abandon`, let go of it).
    Remove { strategy: Strategy },
}

#[derive(Debug, Clone)]
pub struct Work {
    pub placement: PlacementKey,
    pub cluster: String,
    pub action: Action,
}

impl Work {
    /// Apply `manifests` at `revision`; `binds` and `refresh` as in [`Action::Apply`].
    fn apply(
        placement: &PlacementKey,
        cluster: &str,
        (manifests, revision): (Vec<Manifest>, Revision),
        strategy: Strategy,
        resource_snapshot: String,
        binds: bool,
        refresh: bool,
    ) -> Work {
        Work {
            placement: placement.clone(),
            cluster: cluster.to_string(),
            action: Action::Apply {
                manifests,
                revision,
                binds,
                refresh,
                strategy,
                resource_snapshot,
            },
        }
    }

    fn remove(placement: &PlacementKey, cluster: &str, strategy: Strategy) -> Work {
        Work {
            placement: placement.clone(),
            cluster: cluster.to_string(),
            action: Action::Remove { strategy },
        }
    }
}

/// How a piece of work ended, as push reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Applied (or removed); the health of what is on the cluster now, and the differences
    /// push reported (ReportDiff diffs, fields others changed under FullComparison), one line
    /// each.
    Done(BindingHealth, Vec<String>),
    /// It failed; the message says why. Failed bindings are retried on the next reconcile.
    Failed(String),
}

impl StepSummary {
    fn new(placement: PlacementKey) -> StepSummary {
        StepSummary {
            placement,
            strategy: String::new(),
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
            report_diff: false,
            selected_resources: vec![],
        }
    }
}

/// Per placement: what the step decided, for status and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSummary {
    pub placement: PlacementKey,
    pub strategy: String,
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
    /// Clusters whose manifests the overrides change.
    pub overridden: BTreeSet<String>,
    /// Clusters the placement cannot be rendered for, and why.
    pub render_errors: BTreeMap<String, String>,
    /// ReportDiff apply strategy: status reports DiffReported instead of Applied/Available.
    pub report_diff: bool,
    /// `Kind/namespace/name` (or `Kind/name`) of what the placement selects.
    pub selected_resources: Vec<String>,
}

/// The decision for one commit.
#[derive(Debug, Default)]
pub struct Decision {
    pub work: Vec<Work>,
    pub steps: Vec<StepSummary>,
    /// Resource snapshot histories after this commit, by placement.
    pub histories: BTreeMap<PlacementKey, crate::snapshot::History>,
    /// Whether each placement abandons its objects on removal, remembered for when the
    /// placement itself is deleted from the repository.
    pub abandon: BTreeMap<PlacementKey, bool>,
}

fn rendered_fingerprint(manifests: &[Manifest]) -> String {
    let values: Vec<&Value> = manifests.iter().map(|m| &m.value).collect();
    hash_value(&serde_json::json!(values))
}

fn rolling_params(ru: Option<&crate::model::placement::RollingUpdateConfig>) -> RollingParams {
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

/// Decides the work for `commit`. `schedule` is the scheduler's result for it (bindings
/// included); `fleet` gives each cluster's labels for rendering; `now` is unix seconds.
pub fn decide(
    cat: &Catalog,
    commit: &str,
    schedule: &[PlacementSchedule],
    fleet: &Fleet,
    state: &DaemonState,
    now: u64,
) -> Decision {
    // Each placement's selection is made once and shared; each placement is rendered once per
    // distinct cluster input (and once without overrides, for the Overridden reason).
    let selections = Selections::new(cat);
    let renderer = selections.renderer(schedule);
    let plain = selections.renderer(schedule).without_overrides();
    // Fingerprints of shared renderings, by address (renderings live as long as the renderer).
    let mut fingerprints: HashMap<usize, String> = HashMap::new();
    let members: BTreeSet<&str> = fleet.clusters.iter().map(|c| c.name.as_str()).collect();
    let mut decision = Decision::default();

    for (i, ps) in schedule.iter().enumerate() {
        let id = &ps.key;
        let prev = state.placements.get(id).cloned().unwrap_or_default();
        let mut step = StepSummary::new(id.clone());
        // Renders what `cluster` should run; `None` when rendering fails (reported, not pushed).
        let mut render_errors = Vec::new();
        let mut render =
            |cluster: &str, resource_index: u64| -> Option<(Vec<Manifest>, Revision)> {
                let (manifests, rendered) = if ps.key.kind == PlacementKind::OcmPlacement {
                    let manifests = ocm_workloads(cat, &ps.key);
                    let rendered = rendered_fingerprint(&manifests);
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
                            // Whether overrides changed anything, for the Overridden reason.
                            let without = plain.render_index(i, &target);
                            if !matches!(without.as_deref(), Some(Ok(p)) if p == m) {
                                step.overridden.insert(cluster.to_string());
                            }
                            let rendered = fingerprints
                                .entry(Rc::as_ptr(&shared) as usize)
                                .or_insert_with(|| rendered_fingerprint(m))
                                .clone();
                            (m.clone(), rendered)
                        }
                        Err(e) => {
                            render_errors.push(format!("{cluster}: {e}"));
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

        if ps.key.kind == PlacementKind::OcmPlacement {
            // OCM placements: ManifestWorkReplicaSet workloads go to every selected cluster.
            step.strategy = "OCM".into();
            step.target = ps.selected.len();
            let strategy = Strategy::default();
            for cluster in &ps.selected {
                let Some((manifests, revision)) = render(cluster, 0) else {
                    continue;
                };
                let current = prev.clusters.get(cluster);
                if current.and_then(|c| c.revision.as_ref()) == Some(&revision)
                    && current.is_some_and(|c| c.health != BindingHealth::Failed)
                {
                    step.up_to_date.push(cluster.clone());
                    continue;
                }
                step.applying.push(cluster.clone());
                let resource_snapshot = revision.rendered.clone();
                let rendered = (manifests, revision);
                let work = Work::apply(
                    &ps.key,
                    cluster,
                    rendered,
                    strategy,
                    resource_snapshot,
                    false,
                    false,
                );
                decision.work.push(work);
            }
            for cluster in prev.clusters.keys() {
                if !ps.selected.contains(cluster) && members.contains(cluster.as_str()) {
                    step.removing.push(cluster.clone());
                    decision.work.push(Work::remove(&ps.key, cluster, strategy));
                }
            }
            decision.steps.push(step);
            continue;
        }

        let Some(entry) = cat.placement(&ps.key.name, ps.key.namespace.as_deref()) else {
            continue;
        };
        let spec = &entry.spec.spec;
        let resources = selections.of(entry).unwrap_or_default();
        step.selected_resources = resources
            .iter()
            .map(|r| match &r.namespace {
                Some(ns) => format!("{}/{ns}/{}", r.gvk.kind, r.name),
                None => format!("{}/{}", r.gvk.kind, r.name),
            })
            .collect();
        let in_use: BTreeSet<u64> = prev
            .clusters
            .values()
            .filter_map(|c| c.revision.as_ref().map(|r| r.resource_index))
            .collect();
        let resource_snapshot = crate::snapshot::resource_hash(&resources);
        let advance = prev.resources.advance(
            &resource_snapshot,
            commit,
            spec.revision_history_limit.unwrap_or(10).max(1) as u32,
            &in_use,
        );
        let resource_index = advance.index;
        decision.histories.insert(id.clone(), advance.history);
        let strategy = Strategy::from_rollout(Some(&spec.strategy));
        decision.abandon.insert(id.clone(), strategy.abandon);
        step.report_diff = strategy.type_ == crate::model::placement::ApplyStrategyType::ReportDiff;

        let strategy_type = spec.strategy.type_.unwrap_or_default();
        if strategy_type == RolloutStrategyType::External {
            step.strategy = "External".into();
            step.note = Some(
                "strategy External: scheduled, not rolled out (staged update runs are not built yet)"
                    .into(),
            );
            decision.steps.push(step);
            continue;
        }
        step.strategy = "RollingUpdate".into();
        let params = rolling_params(spec.strategy.rolling_update.as_ref());

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
                    // Removal is synchronous within a reconcile: a failed one is retried as a
                    // fresh removal candidate, never left "deleting".
                    deleting: false,
                    current: current.and_then(|c| c.revision.clone()),
                    health: current.map_or(BindingHealth::Pending, |c| c.health),
                }
            })
            .collect();
        let mut desired: BTreeMap<String, Option<(Vec<Manifest>, Revision)>> = BTreeMap::new();
        for b in &ps.bindings {
            if b.state != BindingState::Unscheduled {
                desired.insert(b.cluster.clone(), render(&b.cluster, resource_index));
            }
        }
        let placement_type = spec
            .policy
            .as_ref()
            .map_or(PlacementType::PickAll, |p| p.placement_type);
        let target = match placement_type {
            PlacementType::PickAll => Target::PickAll,
            PlacementType::PickFixed => {
                Target::Count(spec.policy.as_ref().map_or(0, |p| p.cluster_names.len()))
            }
            PlacementType::PickN => Target::Count(
                spec.policy
                    .as_ref()
                    .and_then(|p| p.number_of_clusters)
                    .unwrap_or(0)
                    .max(0) as usize,
            ),
        };
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
            let snapshot = resource_snapshot.clone();
            let work = Work::apply(&ps.key, cluster, rendered, strategy, snapshot, binds, false);
            decision.work.push(work);
        }
        for cluster in &plan.remove {
            step.removing.push(cluster.clone());
            decision.work.push(Work::remove(&ps.key, cluster, strategy));
        }
        // Up-to-date clusters whose availability is not known yet are re-applied (a no-op on
        // the member) to read it again.
        for cluster in &plan.up_to_date {
            let pending = prev
                .clusters
                .get(cluster)
                .is_some_and(|c| c.health == BindingHealth::Pending);
            if let Some(Some(rendered)) = desired.remove(cluster).filter(|_| pending) {
                let snapshot = resource_snapshot.clone();
                let work = Work::apply(&ps.key, cluster, rendered, strategy, snapshot, false, true);
                decision.work.push(work);
            }
        }
        step.waiting = plan.waiting;
        step.up_to_date = plan.up_to_date;
        step.requeue_after = plan.requeue_after;
        if !render_errors.is_empty() {
            step.note = Some(format!("cannot render: {}", render_errors.join("; ")));
        }
        decision.steps.push(step);
    }

    // Placements gone from the commit: remove what they placed, no pacing (KubeFleet deletes
    // every binding at once), except on members that left the repository.
    let live: BTreeSet<&PlacementKey> = schedule.iter().map(|p| &p.key).collect();
    for (key, ps) in &state.placements {
        if live.contains(key) {
            continue;
        }
        let strategy = Strategy {
            abandon: ps.abandon,
            ..Strategy::default()
        };
        let mut step = StepSummary {
            strategy: "Deleted".into(),
            ..StepSummary::new(key.clone())
        };
        for cluster in ps.clusters.keys() {
            if members.contains(cluster.as_str()) {
                step.removing.push(cluster.clone());
                decision.work.push(Work::remove(key, cluster, strategy));
            }
        }
        decision.steps.push(step);
    }
    decision
}

/// Folds the outcomes of the work into the state and the schedule's bindings: applied clusters
/// record their revision and health and become Bound; removed ones leave both.
pub fn absorb(
    state: &mut DaemonState,
    schedule: &mut [PlacementSchedule],
    decided: (
        BTreeMap<PlacementKey, crate::snapshot::History>,
        BTreeMap<PlacementKey, bool>,
    ),
    results: Vec<(Work, Outcome)>,
    commit: &str,
    now: u64,
) {
    let (histories, abandon) = decided;
    for (id, history) in histories {
        state.placements.entry(id).or_default().resources = history;
    }
    for (id, abandon) in abandon {
        state.placements.entry(id).or_default().abandon = abandon;
    }
    for (work, outcome) in results {
        let id = &work.placement;
        let ps: &mut PlacementState = state.placements.entry(id.clone()).or_default();
        match (work.action, outcome) {
            (
                Action::Apply {
                    revision, binds, ..
                },
                Outcome::Done(health, diffs),
            ) => {
                ps.clusters.insert(
                    work.cluster.clone(),
                    ClusterState {
                        revision: Some(revision),
                        attempted: None,
                        commit: Some(commit.to_string()),
                        health,
                        diffs,
                        last_error: None,
                        updated_at: now,
                    },
                );
                if binds {
                    if let Some(p) = schedule.iter_mut().find(|p| &p.key == id) {
                        for b in p.bindings.iter_mut().filter(|b| b.cluster == work.cluster) {
                            b.state = BindingState::Bound;
                        }
                    }
                }
            }
            (Action::Remove { .. }, Outcome::Done(..)) => {
                ps.clusters.remove(&work.cluster);
                if let Some(p) = schedule.iter_mut().find(|p| &p.key == id) {
                    p.bindings.retain(|b| {
                        !(b.cluster == work.cluster && b.state == BindingState::Unscheduled)
                    });
                }
            }
            (action, Outcome::Failed(message)) => {
                let entry =
                    ps.clusters
                        .entry(work.cluster.clone())
                        .or_insert_with(|| ClusterState {
                            revision: None,
                            attempted: None,
                            commit: None,
                            health: BindingHealth::Failed,
                            diffs: vec![],
                            last_error: None,
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
    // A placement with nothing left on any cluster and gone from the commit is forgotten.
    let live: BTreeSet<&PlacementKey> = schedule.iter().map(|p| &p.key).collect();
    state
        .placements
        .retain(|key, ps| live.contains(key) || !ps.clusters.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::SourceFile;

    const MEMBERS: &[&str] = &["m1", "m2", "m3", "m4"];

    fn commit(image_tag: &str, extra: &str) -> Catalog {
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
        let (cat, diags) = crate::analyze(&[SourceFile {
            path: "fleet.yaml".into(),
            content: yaml.into_bytes(),
        }]);
        assert!(diags.is_empty(), "{diags:#?}");
        cat
    }

    /// One reconcile with every push succeeding with `health`; returns the clusters applied.
    fn step(
        cat: &Catalog,
        sha: &str,
        state: &mut DaemonState,
        previous: &mut crate::schedule::Previous,
        health: BindingHealth,
    ) -> (Vec<String>, Vec<String>) {
        let fleet = Fleet::build(cat, None);
        let mut schedule = crate::schedule::schedule_commit(cat, &fleet, previous, 0);
        let d = decide(cat, sha, &schedule, &fleet, state, 0);
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
            .map(|w| (w, Outcome::Done(health, vec![])))
            .collect();
        absorb(
            state,
            &mut schedule,
            (d.histories, d.abandon),
            results,
            sha,
            0,
        );
        *previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
        (applied, removed)
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
        let schedule = crate::schedule::schedule_commit(&cat, &fleet, &Default::default(), 0);
        // maxUnavailable 1, maxSurge 1: the first step only; render every cluster through it.
        let d = decide(&cat, "c1", &schedule, &fleet, &DaemonState::default(), 0);
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

    /// State and bindings after the first commit landed everywhere and became available.
    fn settled_on_v1() -> (DaemonState, crate::schedule::Previous) {
        let mut state = DaemonState::default();
        let mut previous = crate::schedule::Previous::new();
        step(
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
        let mut state = DaemonState::default();
        let mut previous = crate::schedule::Previous::new();
        let v1 = commit("1", "");
        // PickAll over 4: target 4 + surge 1 - 0 can-be-ready = 5 may be bound: all 4 are.
        let (applied, _) = step(
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
            let (applied, _) = step(
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
        let (applied, _) = step(
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
        let (first, _) = step(&v2, "c2", &mut state, &mut previous, BindingHealth::Pending);
        assert_eq!(first, ["m1"]);
        // m1 is not available yet: no budget for another, but m1 is re-applied to read health.
        let (again, _) = step(&v2, "c2", &mut state, &mut previous, BindingHealth::Pending);
        assert_eq!(again, ["m1"]);
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
        let (_, removed) = step(
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
        let schedule = crate::schedule::schedule_commit(&cat, &fleet, &Default::default(), 0);
        assert_eq!(schedule[0].selected, MEMBERS);
        let d = decide(&cat, "c1", &schedule, &fleet, &DaemonState::default(), 0);
        assert!(d.work.is_empty());
        assert!(d.steps[0].note.as_deref().unwrap().contains("External"));
    }

    fn app() -> PlacementKey {
        "crp/app".parse().unwrap()
    }
}
