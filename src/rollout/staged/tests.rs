//! The staged engine through the rollout step, as the daemon drives it: a commit, the step at
//! an injected time, push outcomes chosen by the test, absorb. Expectations cite KubeFleet's
//! pkg/controllers/updaterun/ (initialization.go, execution.go, stop.go, validation.go).

use std::collections::BTreeMap;

use super::status::{self, reason, RunStatus};
use crate::catalog::{Catalog, SourceFile};
use crate::rollout::approval::{Approval, Request};
use crate::rollout::{
    absorb, step, Action, BindingHealth, Input, Outcome, Pacing, RolloutState, StagedInput,
};
use crate::schedule::{schedule_commit, Fleet, Previous};

/// m1..m3 staging, m4..m6 canary, m7..m9 production; `order` labels reverse the names in
/// canary, so sorting by label is visible.
fn members() -> String {
    let mut y = String::new();
    for i in 1..=9 {
        let env = match i {
            1..=3 => "staging",
            4..=6 => "canary",
            _ => "production",
        };
        let order = 10 - i;
        y.push_str(&format!(
            "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
             metadata: {{name: m{i}, labels: {{env: {env}, order: '{order}'}}}}\n\
             spec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
        ));
    }
    y
}

const STRATEGY: &str = r#"---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata: {name: three}
spec:
  stages:
  - name: staging
    labelSelector: {matchLabels: {env: staging}}
    maxConcurrency: 2
    afterStageTasks: [{type: TimedWait, waitTime: 60s}]
  - name: canary
    labelSelector: {matchLabels: {env: canary}}
    sortingLabelKey: order
    beforeStageTasks: [{type: Approval}]
  - name: production
    labelSelector: {matchLabels: {env: production}}
    maxConcurrency: '50%'
    afterStageTasks: [{type: Approval}, {type: TimedWait, waitTime: 30s}]
"#;

fn placement(strategy: &str, policy: &str) -> String {
    format!(
        "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: app}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: app}}]\n\
         \x20 policy: {policy}\n  strategy: {{type: {strategy}}}\n"
    )
}

fn run(name: &str, state: &str) -> String {
    format!(
        "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\n\
         metadata: {{name: {name}}}\nspec: {{placementName: app, stagedRolloutStrategyName: three, state: {state}}}\n"
    )
}

fn commit(tag: &str, extra: &str) -> Catalog {
    let yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: app, labels: {{tag: '{tag}'}}}}\n{}{}",
        members(),
        extra
    );
    let (cat, diags) = crate::analyze(&[SourceFile {
        path: "fleet.yaml".into(),
        content: yaml.into_bytes(),
    }]);
    assert!(diags.is_empty(), "{diags:#?}");
    cat
}

fn standard(tag: &str, run_state: &str) -> Catalog {
    commit(
        tag,
        &format!(
            "{}{STRATEGY}{}",
            placement("External", "{placementType: PickAll}"),
            run("r1", run_state)
        ),
    )
}

/// The daemon's side: bindings, rollout state, accepted approvals.
#[derive(Default)]
struct World {
    state: RolloutState,
    previous: Previous,
    approvals: BTreeMap<String, Approval>,
    /// Every commit stepped so far, as the daemon reads them for runs initialised earlier.
    catalogs: BTreeMap<String, std::sync::Arc<Catalog>>,
}

#[derive(Debug)]
struct Stepped {
    applied: Vec<String>,
    removed: Vec<String>,
    requests: Vec<String>,
    requeue_after: u64,
    /// The work itself, for what it carries.
    work: Vec<crate::rollout::Work>,
}

impl World {
    /// This world after its state was lost: what the commits were stays, and `app`'s
    /// clusters are adopted from the members' records (`delivered`), as the daemon adopts
    /// them: pending, to be re-checked, naming the run that delivered them.
    fn lost_and_adopted(
        self,
        app: &crate::model::PlacementKey,
        delivered: &BTreeMap<String, super::RunDelivery>,
    ) -> World {
        let mut ps = crate::rollout::PlacementState::default();
        for (c, d) in delivered {
            let mut cs = crate::rollout::ClusterState::with_health(BindingHealth::Pending);
            cs.recheck = Some("adopted from the member's record".into());
            cs.delivered_by = Some(std::sync::Arc::new(d.clone()));
            ps.clusters.insert(c.into(), cs);
        }
        let mut state = RolloutState::default();
        state
            .placements
            .insert(app.clone(), std::sync::Arc::new(ps));
        World {
            state,
            catalogs: self.catalogs,
            ..World::default()
        }
    }

    /// One step of `cat` at `now`; every push ends with `health`.
    fn step(&mut self, cat: &Catalog, sha: &str, now: u64, health: BindingHealth) -> Stepped {
        self.step_ending(cat, sha, now, Some(health))
    }

    /// One step whose pushes are still in flight when the next step is decided (the daemon's
    /// workers push while reconciles go on): none of their results is absorbed.
    fn step_in_flight(&mut self, cat: &Catalog, sha: &str, now: u64) -> Stepped {
        self.step_ending(cat, sha, now, None)
    }

    fn step_ending(
        &mut self,
        cat: &Catalog,
        sha: &str,
        now: u64,
        health: Option<BindingHealth>,
    ) -> Stepped {
        let fleet = Fleet::build(cat, None);
        let mut schedule = schedule_commit(
            cat,
            &crate::snapshot::invalid_selections(cat),
            &fleet,
            &self.previous,
            now as i64,
        );
        let input = Input {
            cat,
            commit: sha,
            schedule: &schedule,
            fleet: &fleet,
            unreachable: &BTreeMap::new(),
            only: None,
            now,
            staged: StagedInput {
                approvals: self.approvals.clone(),
                catalogs: self.catalogs.clone(),
            },
            selected: None,
        };
        let d = step(&input, &self.state, Pacing::Rolling);
        let pick = |remove: bool| -> Vec<String> {
            d.work
                .iter()
                .filter(|w| matches!(w.action, Action::Remove { .. }) == remove)
                .map(|w| w.cluster.clone())
                .collect()
        };
        let out = Stepped {
            applied: pick(false),
            removed: pick(true),
            requests: d.requests.iter().map(Request::key).collect(),
            requeue_after: d.steps.iter().map(|s| s.requeue_after).max().unwrap_or(0),
            work: d.work.clone(),
        };
        let results = match health {
            Some(health) => d
                .work
                .into_iter()
                .map(|w| (w, Outcome::Done(health, Default::default())))
                .collect(),
            None => Vec::new(),
        };
        absorb(&mut self.state, &mut schedule, d.ledger, results, sha, now);
        self.catalogs
            .insert(sha.to_string(), std::sync::Arc::new(cat.clone()));
        self.previous = schedule.into_iter().map(|p| (p.key.clone(), p)).collect();
        out
    }

    fn run(&self, key: &str) -> &RunStatus {
        &self.state.runs[key]
    }

    fn approve(&mut self, request: &str, commit: &str) {
        self.approvals.insert(
            request.to_string(),
            Approval {
                request: request.to_string(),
                signer: "sre@example.com".into(),
                key_fingerprint: "SHA256:test".into(),
                tag: format!("gitfleet/approve/{request}"),
                tag_object: "t".repeat(40),
                commit: commit.to_string(),
                accepted_at: 1,
            },
        );
    }
}

fn cond<'a>(conds: &'a [status::Condition], t: &str) -> (&'a str, &'a str) {
    let c = status::find(conds, t).unwrap_or_else(|| panic!("no {t} in {conds:#?}"));
    (c.status.as_str(), c.reason.as_str())
}

fn stage_clusters(st: &RunStatus) -> Vec<Vec<&str>> {
    st.stages_status
        .iter()
        .map(|s| s.clusters.iter().map(|c| c.cluster_name.as_str()).collect())
        .collect()
}

/// initialization.go: stages by label selector, `sortingLabelKey` as an integer then name,
/// snapshot indices recorded, strategy frozen, `Initialized=True UpdateRunInitializedSuccessfully`;
/// `state: Initialize` stops there.
#[test]
fn initialisation_records_stages_in_kubefleets_order_and_initialize_moves_nothing() {
    let mut w = World::default();
    let cat = standard("v1", "Initialize");
    let s = w.step(&cat, "c1", 1000, BindingHealth::Available);
    assert!(s.applied.is_empty(), "{s:?}");
    let st = w.run("r1");
    assert_eq!(
        cond(&st.conditions, status::INITIALIZED),
        ("True", reason::INITIALIZED)
    );
    assert_eq!(
        stage_clusters(st),
        [
            vec!["m1", "m2", "m3"],
            vec!["m6", "m5", "m4"],
            vec!["m7", "m8", "m9"]
        ]
    );
    assert_eq!(st.resource_snapshot_index_used, Some(0));
    assert_eq!(st.policy_snapshot_index_used, Some(0));
    assert_eq!(st.policy_observed_cluster_count, Some(9));
    assert_eq!(st.init_commit, "c1");
    assert_eq!(
        st.deletion_stage_status.as_ref().unwrap().stage_name,
        "kubernetes-fleet.io/deleteStage"
    );
    assert_eq!(
        st.stages_status[1].before_stage_task_status[0]
            .approval_request_name
            .as_deref(),
        Some("r1-before-canary")
    );
    // A new snapshot was taken for the run (External placements take none otherwise).
    let app = "crp/app".parse().unwrap();
    assert_eq!(w.state.placements[&app].resources.records.len(), 1);
}

/// The whole life of a run: maxConcurrency 2 then 50% of 3 = 1 (rounded down), a cluster is
/// done when available, the TimedWait counts from the stage's waiting transition, the
/// before-stage approval holds the stage, the after-stage Approval and TimedWait run together,
/// then `Succeeded=True UpdateRunSucceeded` (execution.go).
#[test]
fn a_run_moves_stage_by_stage_through_waits_and_approvals() {
    let mut w = World::default();
    let cat = standard("v1", "Run");
    // t=1000: the first two staging clusters start; pushes report Pending.
    let s = w.step(&cat, "c1", 1000, BindingHealth::Pending);
    assert_eq!(s.applied, ["m1", "m2"]);
    assert_eq!(s.requeue_after, super::execute::CLUSTER_POLL);
    let st = w.run("r1");
    assert_eq!(
        cond(&st.conditions, status::PROGRESSING),
        ("True", reason::PROGRESSING)
    );
    assert_eq!(
        cond(&st.stages_status[0].conditions, status::PROGRESSING),
        ("True", reason::STAGE_STARTED)
    );
    // Still pending: re-read, nothing new starts.
    let s = w.step(&cat, "c1", 1005, BindingHealth::Available);
    assert_eq!(s.applied, ["m1", "m2"]);
    // Both available: they succeed and m3 starts in the same pass.
    let s = w.step(&cat, "c1", 1010, BindingHealth::Available);
    assert_eq!(s.applied, ["m3"]);
    // m3 done at 1020: the stage waits 60 s from now.
    let s = w.step(&cat, "c1", 1020, BindingHealth::Available);
    assert!(s.applied.is_empty());
    assert_eq!(s.requeue_after, 60);
    let st = w.run("r1");
    assert_eq!(
        cond(&st.conditions, status::PROGRESSING),
        ("False", reason::WAITING)
    );
    assert_eq!(
        status::find(&st.conditions, status::PROGRESSING)
            .unwrap()
            .message,
        "The updateRun is waiting for after-stage tasks in stage staging to complete"
    );
    assert_eq!(
        st.timed_wait_ends(),
        Some(1080),
        "the soak's end, as status shows it"
    );
    let s = w.step(&cat, "c1", 1079, BindingHealth::Available);
    assert_eq!(s.requeue_after, 1);
    // t=1080: the wait elapsed; canary's before-stage approval is requested.
    let s = w.step(&cat, "c1", 1080, BindingHealth::Available);
    assert!(s.applied.is_empty());
    assert_eq!(s.requests, ["r1-before-canary"]);
    let st = w.run("r1");
    assert_eq!(st.timed_wait_ends(), None, "the soak is over");
    let staging = &st.stages_status[0];
    assert_eq!(
        cond(&staging.conditions, status::SUCCEEDED),
        ("True", reason::STAGE_SUCCEEDED)
    );
    assert_eq!(
        cond(
            &staging.after_stage_task_status[0].conditions,
            status::WAIT_TIME_ELAPSED
        ),
        ("True", reason::WAIT_ELAPSED)
    );
    let canary = &st.stages_status[1];
    assert_eq!(
        cond(&canary.conditions, status::PROGRESSING),
        ("False", reason::STAGE_WAITING)
    );
    assert_eq!(
        cond(
            &canary.before_stage_task_status[0].conditions,
            status::APPROVAL_REQUEST_CREATED
        ),
        ("True", reason::TASK_CREATED)
    );
    // An approval on another commit (an earlier run of the same name) does not count.
    w.approve("r1-before-canary", "c0");
    let s = w.step(&cat, "c1", 1090, BindingHealth::Available);
    assert!(s.applied.is_empty());
    assert_eq!(s.requeue_after, super::execute::STAGE_POLL);
    // Approved on the initialisation commit: canary runs one at a time, by the order label.
    w.approve("r1-before-canary", "c1");
    let mut order = Vec::new();
    for t in 0..3 {
        let s = w.step(&cat, "c1", 1100 + t, BindingHealth::Available);
        order.extend(s.applied);
    }
    assert_eq!(order, ["m6", "m5", "m4"]);
    // Canary done, production starts at once (no waits): 50% of 3 rounds down to 1.
    let s = w.step(&cat, "c1", 1110, BindingHealth::Available);
    assert_eq!(s.applied, ["m7"]);
    let st = w.run("r1");
    assert_eq!(
        cond(
            &st.stages_status[1].before_stage_task_status[0].conditions,
            status::APPROVAL_REQUEST_APPROVED
        ),
        ("True", reason::TASK_APPROVED)
    );
    assert_eq!(
        st.stages_status[1].before_stage_task_status[0]
            .approval
            .as_ref()
            .unwrap()
            .signer,
        "sre@example.com"
    );
    w.step(&cat, "c1", 1111, BindingHealth::Available);
    w.step(&cat, "c1", 1112, BindingHealth::Available);
    // All production clusters done at 1113: Approval and TimedWait (30 s) together.
    let s = w.step(&cat, "c1", 1113, BindingHealth::Available);
    assert_eq!(s.requests, ["r1-after-production"]);
    w.approve("r1-after-production", "c1");
    let s = w.step(&cat, "c1", 1120, BindingHealth::Available);
    assert_eq!(s.requeue_after, 23, "the wait still runs: {s:?}");
    assert!(s.requests.is_empty());
    let s = w.step(&cat, "c1", 1143, BindingHealth::Available);
    assert!(s.applied.is_empty());
    let st = w.run("r1");
    assert_eq!(
        cond(&st.conditions, status::SUCCEEDED),
        ("True", reason::SUCCEEDED)
    );
    assert_eq!(
        cond(&st.conditions, status::PROGRESSING),
        ("False", reason::SUCCEEDED)
    );
    // Every cluster runs snapshot 0, bound.
    let app = "crp/app".parse().unwrap();
    let ps = &w.state.placements[&app];
    assert_eq!(ps.clusters.len(), 9);
    assert!(ps
        .clusters
        .values()
        .all(|c| c.revision.as_ref().unwrap().resource_index == 0));
    assert!(w.previous[&app]
        .bindings
        .iter()
        .all(|b| b.state == crate::schedule::BindingState::Bound));
    // A finished run moves nothing more, even when the content changes: a new run is needed.
    let v2 = standard("v2", "Run");
    let s = w.step(&v2, "c2", 2000, BindingHealth::Available);
    assert!(s.applied.is_empty());
}

/// execution.go: a started cluster unfinished after `updateRunStuckThreshold` (5 min) makes the
/// run `Progressing=False UpdateRunStuck`; it recovers when the cluster finishes.
#[test]
fn a_cluster_pending_for_more_than_five_minutes_marks_the_run_stuck() {
    let mut w = World::default();
    let cat = standard("v1", "Run");
    w.step(&cat, "c1", 0, BindingHealth::Pending);
    w.step(&cat, "c1", 300, BindingHealth::Pending);
    assert_eq!(
        cond(&w.run("r1").conditions, status::PROGRESSING),
        ("True", reason::PROGRESSING)
    );
    w.step(&cat, "c1", 301, BindingHealth::Pending);
    let p = status::find(&w.run("r1").conditions, status::PROGRESSING).unwrap();
    assert_eq!(
        (p.status.as_str(), p.reason.as_str()),
        ("False", reason::STUCK)
    );
    assert!(p.message.contains("m1, m2"), "{}", p.message);
    // Failed pushes are retried, never fail the run (checkClusterUpdateResult).
    let s = w.step(&cat, "c1", 302, BindingHealth::Failed);
    assert_eq!(s.applied, ["m1", "m2"]);
    w.step(&cat, "c1", 303, BindingHealth::Available);
    let s = w.step(&cat, "c1", 304, BindingHealth::Available);
    assert_eq!(s.applied, ["m3"]);
    assert_eq!(
        cond(&w.run("r1").conditions, status::PROGRESSING),
        ("True", reason::PROGRESSING)
    );
}

/// stop.go: `state: Stop` lets started clusters finish and starts none
/// (`UpdateRunStopping`, then `UpdateRunStopped`); `state: Run` resumes.
#[test]
fn stop_lets_clusters_in_flight_finish_and_run_resumes() {
    let mut w = World::default();
    let running = standard("v1", "Run");
    let stopped = standard("v1", "Stop");
    let s = w.step(&running, "c1", 0, BindingHealth::Pending);
    assert_eq!(s.applied, ["m1", "m2"]);
    // Stop while m1 and m2 are in flight: they are re-read, nothing new starts.
    let s = w.step(&stopped, "c2", 10, BindingHealth::Pending);
    assert_eq!(s.applied, ["m1", "m2"]);
    let st = w.run("r1");
    assert_eq!(
        cond(&st.conditions, status::PROGRESSING),
        ("Unknown", reason::STOPPING)
    );
    assert_eq!(
        cond(&st.stages_status[0].conditions, status::PROGRESSING),
        ("Unknown", reason::STAGE_STOPPING)
    );
    w.step(&stopped, "c2", 20, BindingHealth::Available);
    let s = w.step(&stopped, "c2", 30, BindingHealth::Available);
    assert!(s.applied.is_empty(), "{s:?}");
    let st = w.run("r1");
    assert_eq!(
        cond(&st.conditions, status::PROGRESSING),
        ("False", reason::STOPPED)
    );
    assert_eq!(
        cond(&st.stages_status[0].conditions, status::PROGRESSING),
        ("False", reason::STAGE_STOPPED)
    );
    assert_eq!(
        st.init_commit, "c1",
        "editing the state does not re-initialise"
    );
    // Resumed: m3 starts.
    let s = w.step(&running, "c3", 40, BindingHealth::Available);
    assert_eq!(s.applied, ["m3"]);
    assert_eq!(
        cond(&w.run("r1").conditions, status::PROGRESSING),
        ("True", reason::PROGRESSING)
    );
}

/// validation.go: a later commit that changes the placement's apply strategy or its policy
/// (a new policy snapshot) aborts the run: `Succeeded=False UpdateRunFailed`. (A placement no
/// longer External while a run names it is an invalid commit: the catalog refuses it.)
#[test]
fn a_new_apply_strategy_or_policy_snapshot_aborts_the_run() {
    for (name, extra) in [
        (
            "apply",
            format!(
                "{}{STRATEGY}{}",
                placement(
                    "External, applyStrategy: {type: ServerSideApply}",
                    "{placementType: PickAll}"
                ),
                run("r1", "Run")
            ),
        ),
        (
            "policy",
            format!(
                "{}{STRATEGY}{}",
                placement(
                    "External",
                    "{placementType: PickAll, tolerations: [{key: k, operator: Exists}]}"
                ),
                run("r1", "Run")
            ),
        ),
    ] {
        let mut w = World::default();
        w.step(&standard("v1", "Run"), "c1", 0, BindingHealth::Pending);
        let changed = commit("v1", &extra);
        let s = w.step(&changed, "c2", 10, BindingHealth::Available);
        // Nothing moves; what the run gave m1 and m2 (still pending) is only read again.
        assert!(
            s.work.iter().all(|w| matches!(
                w.action,
                crate::rollout::Action::Apply { refresh: true, .. }
            )),
            "{name}: {s:?}"
        );
        let st = w.run("r1");
        assert_eq!(
            cond(&st.conditions, status::SUCCEEDED),
            ("False", reason::FAILED),
            "{name}"
        );
        let msg = &status::find(&st.conditions, status::SUCCEEDED)
            .unwrap()
            .message;
        let want = match name {
            "apply" => "the applyStrategy in the updateRun is outdated",
            _ => "the policy snapshot index used in the updateRun is outdated, latest: 1, recorded: 0",
        };
        assert!(msg.starts_with("cannot continue the updateRun"), "{msg}");
        assert!(msg.contains(want), "{name}: {msg}");
    }
}

/// execution.go: a started cluster whose binding another run changed fails the cluster
/// (`ClusterUpdatingFailed`), the stage (`StageUpdatingFailed`) and the run ("preempted").
#[test]
fn a_cluster_changed_by_another_run_aborts_this_one() {
    let mut w = World::default();
    let cat = standard("v1", "Run");
    w.step(&cat, "c1", 0, BindingHealth::Pending);
    let app = "crp/app".parse().unwrap();
    let m1 = std::sync::Arc::make_mut(w.state.placements.get_mut(&app).unwrap())
        .clusters
        .get_mut("m1")
        .unwrap();
    m1.revision.as_mut().unwrap().rendered = "another run's".into();
    w.step(&cat, "c1", 10, BindingHealth::Available);
    let st = w.run("r1");
    let c = &st.stages_status[0].clusters[0];
    assert_eq!(
        cond(&c.conditions, status::SUCCEEDED),
        ("False", reason::CLUSTER_FAILED)
    );
    assert_eq!(
        cond(&st.stages_status[0].conditions, status::SUCCEEDED),
        ("False", reason::STAGE_FAILED)
    );
    assert_eq!(
        cond(&st.conditions, status::SUCCEEDED),
        ("False", reason::FAILED)
    );
    assert!(status::find(&st.conditions, status::SUCCEEDED)
        .unwrap()
        .message
        .contains("concurrent updateRun"));
}

/// A second run over clusters that run the first run's revision: while its pushes are in
/// flight, a cluster still runs what it ran, and that is not another run's doing. (The
/// daemon's per-member workers push while later steps are decided: taking that for another
/// run's doing would fail every second run as "preempted".)
#[test]
fn a_cluster_still_running_its_previous_revision_is_not_preempted_while_its_push_is_in_flight() {
    const ONE_STAGE: &str = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\n\
        kind: ClusterStagedUpdateStrategy\nmetadata: {name: three}\n\
        spec:\n  stages:\n  - name: all\n    labelSelector: {}\n    maxConcurrency: 3\n";
    let with_run = |tag: &str, name: &str| {
        commit(
            tag,
            &format!(
                "{}{ONE_STAGE}{}",
                placement("External", "{placementType: PickAll}"),
                run(name, "Run")
            ),
        )
    };
    let mut w = World::default();
    let first = with_run("v1", "r1");
    let mut now = 0;
    while w
        .state
        .runs
        .get("r1")
        .is_none_or(|r| !status::is_true(&r.conditions, status::SUCCEEDED))
    {
        assert!(
            now < 100,
            "r1 never succeeded: {:#?}",
            w.state.runs.get("r1")
        );
        w.step(&first, "c1", now, BindingHealth::Available);
        now += 1;
    }
    let second = with_run("v2", "r2");
    let started = w.step_in_flight(&second, "c2", now);
    assert_eq!(started.applied, ["m1", "m2", "m3"]);
    // Reconciles while those pushes are in flight.
    for _ in 0..3 {
        now += 1;
        w.step_in_flight(&second, "c2", now);
        let st = w.run("r2");
        assert!(
            !status::is_false(&st.conditions, status::SUCCEEDED),
            "{:#?}",
            st.conditions
        );
    }
    while !status::is_true(&w.run("r2").conditions, status::SUCCEEDED) {
        assert!(now < 200, "r2 never succeeded: {:#?}", w.run("r2"));
        now += 1;
        w.step(&second, "c2", now, BindingHealth::Available);
        assert!(!status::is_false(
            &w.run("r2").conditions,
            status::SUCCEEDED
        ));
    }
}

const ONE_STAGE: &str = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\n\
    kind: ClusterStagedUpdateStrategy\nmetadata: {name: three}\n\
    spec:\n  stages:\n  - name: all\n    labelSelector: {}\n    maxConcurrency: 9\n";

/// One External placement and run `name` over one stage of all nine clusters.
fn one_stage_run(tag: &str, name: &str) -> Catalog {
    commit(
        tag,
        &format!(
            "{}{ONE_STAGE}{}",
            placement("External", "{placementType: PickAll}"),
            run(name, "Run")
        ),
    )
}

/// Steps `cat` until run `name` succeeds; returns the time after the last step.
fn run_to_success(w: &mut World, cat: &Catalog, sha: &str, mut now: u64, name: &str) -> u64 {
    while w
        .state
        .runs
        .get(name)
        .is_none_or(|r| !status::is_true(&r.conditions, status::SUCCEEDED))
    {
        assert!(
            now < 10_000,
            "{name} never succeeded: {:#?}",
            w.state.runs.get(name)
        );
        w.step(cat, sha, now, BindingHealth::Available);
        now += 1;
    }
    now
}

/// Once its runs are done, an External placement's clusters are still kept as the last run
/// delivered them, as KubeFleet's work applier keeps a binding's snapshot applied: a cluster
/// whose objects the member changed, or whose availability is not known, is re-applied with
/// the run's snapshot (not the head's content), and the re-check is cleared by that push.
#[test]
fn a_finished_runs_clusters_are_healed_with_what_it_delivered() {
    let mut w = World::default();
    let v1 = one_stage_run("v1", "r1");
    let mut now = run_to_success(&mut w, &v1, "c1", 0, "r1");
    let s = w.step(&v1, "c1", now, BindingHealth::Available);
    assert!(s.applied.is_empty(), "{s:?}");
    // The member deletes an object of m3; m5's last confirmation left it pending. A newer
    // commit (new content, no new run) is served meanwhile.
    w.state.recheck(
        "m3",
        None,
        (
            "Namespace app deleted",
            crate::rollout::state::RecheckCause::ChangedOnTheMember,
        ),
        true,
        now,
    );
    let app: crate::model::PlacementKey = "crp/app".parse().unwrap();
    std::sync::Arc::make_mut(w.state.placements.get_mut(&app).unwrap())
        .clusters
        .get_mut("m5")
        .unwrap()
        .health = BindingHealth::Pending;
    let v2 = one_stage_run("v2", "r1");
    now += 1;
    let s = w.step(&v2, "c2", now, BindingHealth::Available);
    assert_eq!(s.applied, ["m3", "m5"], "{s:?}");
    for work in &s.work {
        let crate::rollout::Action::Apply {
            manifests,
            revision,
            refresh,
            ..
        } = &work.action
        else {
            panic!("{work:?}");
        };
        assert!(refresh, "a confirmation, not a move: {work:?}");
        assert_eq!(revision.resource_index, 0);
        let ns = &manifests[0].value;
        assert_eq!(ns["metadata"]["labels"]["tag"], "v1", "{ns}");
    }
    let ps = &w.state.placements[&app];
    assert!(ps.clusters.values().all(|c| c.recheck.is_none()
        && c.health == BindingHealth::Available
        && c.revision.as_ref().unwrap().resource_index == 0));
    // Settled: nothing more to do.
    now += 1;
    let s = w.step(&v2, "c2", now, BindingHealth::Available);
    assert!(s.applied.is_empty(), "{s:?}");
}

/// KubeFleet's semantics are kept — runs are independent, so a run started earlier moves the
/// clusters it has yet to update to its own, older snapshot after a newer run succeeded — but
/// the older run says so: `RollingBack=True UpdateRunRollingBack`, naming the run, the clusters
/// and both indices, from the moment they run the newer snapshot until (and after) it moves
/// them.
#[test]
fn a_run_started_earlier_says_when_it_moves_clusters_back_to_its_older_snapshot() {
    use super::rollback::{REASON_ROLLING_BACK, ROLLING_BACK};
    let fast = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\n\
        kind: ClusterStagedUpdateStrategy\nmetadata: {name: fast}\n\
        spec:\n  stages:\n  - name: all\n    labelSelector: {}\n    maxConcurrency: 9\n";
    let r2 = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\n\
        metadata: {name: r2}\nspec: {placementName: app, stagedRolloutStrategyName: fast, state: Run}\n";
    let mut w = World::default();
    let v1 = standard("v1", "Run");
    // r1 (snapshot 0) updates staging, then soaks for 60 s.
    for now in 0..3 {
        w.step(&v1, "c1", now, BindingHealth::Available);
    }
    assert_eq!(
        cond(&w.run("r1").conditions, status::PROGRESSING),
        ("False", reason::WAITING)
    );
    assert!(status::find(&w.run("r1").conditions, ROLLING_BACK).is_none());
    // r2 (snapshot 1) moves every cluster meanwhile and succeeds.
    let v2 = commit(
        "v2",
        &format!(
            "{}{STRATEGY}{fast}{}{r2}",
            placement("External", "{placementType: PickAll}"),
            run("r1", "Run")
        ),
    );
    let now = run_to_success(&mut w, &v2, "c2", 3, "r2");
    assert_eq!(w.run("r2").resource_snapshot_index_used, Some(1));
    let c = status::find(&w.run("r1").conditions, ROLLING_BACK)
        .expect("r1 says it will move clusters back")
        .clone();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        (
            "True",
            REASON_ROLLING_BACK,
            "The updateRun r1 moves clusters m6, m5, m4, m7, m8, m9 from resource snapshot \
             index 1 back to the older index 0"
        )
    );
    // The soak ends; canary is approved: r1 does move m6 back to snapshot 0, and still says so.
    w.approve("r1-before-canary", "c1");
    let s = w.step(&v2, "c2", now + 60, BindingHealth::Available);
    assert_eq!(s.applied, ["m6"], "{s:?}");
    let crate::rollout::Action::Apply { revision, .. } = &s.work[0].action else {
        panic!("{:?}", s.work);
    };
    assert_eq!(revision.resource_index, 0);
    let c = status::find(&w.run("r1").conditions, ROLLING_BACK).unwrap();
    assert_eq!(c.status, "True");
    assert!(
        c.message.contains("m6, m5, m4, m7, m8, m9"),
        "{}",
        c.message
    );
}

/// A lost state directory: the daemon starts with what the members' records say — each
/// cluster's placement adopted, its revision unknown, the run that delivered it named — and no
/// run records. A run all of whose clusters' records name it finished: it is not run again at
/// the new head nor waits for approvals; its clusters are confirmed with the snapshot it
/// delivered, and a new run takes the next snapshot index.
#[test]
fn a_finished_run_is_not_run_again_when_the_state_is_rebuilt_from_the_members_records() {
    let mut w = World::default();
    let v1 = standard("v1", "Run");
    w.approve("r1-before-canary", "c1");
    w.approve("r1-after-production", "c1");
    let now = run_to_success(&mut w, &v1, "c1", 0, "r1");
    let app: crate::model::PlacementKey = "crp/app".parse().unwrap();
    let delivered: BTreeMap<String, super::RunDelivery> = w.state.placements[&app]
        .clusters
        .iter()
        .map(|(c, cs)| {
            (
                c.to_string(),
                super::RunDelivery::clone(cs.delivered_by.as_ref().expect("a run delivered it")),
            )
        })
        .collect();
    assert_eq!(delivered.len(), 9);
    assert!(delivered
        .values()
        .all(|d| d.run == "r1" && d.resource_snapshot_index == 0 && d.init_commit == "c1"));
    assert_eq!(delivered["m5"].stage, "canary");

    // The state directory is lost; the members' records are adopted, as the daemon does.
    let mut w = w.lost_and_adopted(&app, &delivered);
    // A newer head, content changed; no approval at hand.
    let v2 = standard("v2", "Run");
    let s = w.step(&v2, "c2", now + 10, BindingHealth::Available);
    assert!(s.requests.is_empty(), "{s:?}");
    let st = w.run("r1");
    assert_eq!(
        cond(&st.conditions, status::SUCCEEDED),
        ("True", reason::SUCCEEDED)
    );
    assert_eq!(st.resource_snapshot_index_used, Some(0));
    assert_eq!(st.init_commit, "c1");
    // Every cluster confirmed with what r1 delivered (v1, snapshot 0), not moved to the head.
    assert_eq!(s.applied.len(), 9, "{s:?}");
    for work in &s.work {
        let crate::rollout::Action::Apply {
            manifests,
            revision,
            refresh,
            ..
        } = &work.action
        else {
            panic!("{work:?}");
        };
        assert!(refresh, "{work:?}");
        assert_eq!(revision.resource_index, 0);
        assert_eq!(manifests[0].value["metadata"]["labels"]["tag"], "v1");
    }
    let s = w.step(&v2, "c2", now + 11, BindingHealth::Available);
    assert!(s.applied.is_empty() && s.requests.is_empty(), "{s:?}");
    // A new run takes the next index: indices only grow.
    let r2 = commit(
        "v2",
        &format!(
            "{}{STRATEGY}{}{}",
            placement("External", "{placementType: PickAll}"),
            run("r1", "Run"),
            run("r2", "Initialize")
        ),
    );
    w.step(&r2, "c3", now + 12, BindingHealth::Available);
    assert_eq!(w.run("r2").resource_snapshot_index_used, Some(1));
}

/// A state directory lost part-way through a run: the clusters of its first stage name it in
/// their records. The run resumes with the snapshot and initialisation commit they name — not
/// the head's content — so the tag that approved its canary stage at that commit still does.
#[test]
fn a_run_lost_part_way_resumes_with_what_the_records_name() {
    let mut w = World::default();
    let v1 = standard("v1", "Run");
    let mut now = 0;
    while w.state.runs.get("r1").is_none_or(|r| {
        !r.stages_status[0]
            .clusters
            .iter()
            .all(|c| status::is_true(&c.conditions, status::SUCCEEDED))
    }) {
        assert!(now < 1_000, "{:#?}", w.state.runs.get("r1"));
        w.step(&v1, "c1", now, BindingHealth::Available);
        now += 1;
    }
    let app: crate::model::PlacementKey = "crp/app".parse().unwrap();
    let delivered: BTreeMap<String, super::RunDelivery> = w.state.placements[&app]
        .clusters
        .iter()
        .filter_map(|(c, cs)| {
            Some((
                c.to_string(),
                super::RunDelivery::clone(cs.delivered_by.as_ref()?),
            ))
        })
        .collect();
    assert_eq!(
        delivered.len(),
        3,
        "the first stage's clusters: {delivered:?}"
    );

    // The state directory is lost; the members' records are adopted, as the daemon does.
    let mut w = w.lost_and_adopted(&app, &delivered);
    // The canary stage was approved at the run's initialisation commit before the state was lost.
    w.approve("r1-before-canary", "c1");
    let v2 = standard("v2", "Run");
    let mut seen_canary = false;
    for t in 0..200 {
        let s = w.step(&v2, "c2", now + t, BindingHealth::Available);
        for work in &s.work {
            if let crate::rollout::Action::Apply { manifests, .. } = &work.action {
                assert_eq!(
                    manifests[0].value["metadata"]["labels"]["tag"], "v1",
                    "the run delivers what it delivered before, not the head: {work:?}"
                );
            }
        }
        seen_canary |= s.applied.iter().any(|c| c == "m5");
        if seen_canary {
            break;
        }
    }
    let st = w.run("r1");
    assert_eq!(st.init_commit, "c1");
    assert_eq!(st.resource_snapshot_index_used, Some(0));
    assert!(
        seen_canary,
        "the canary stage went on with the earlier approval: {st:#?}"
    );
}

/// A run removed from the repository and added again under the same name is a new run, as a
/// deleted and re-created `ClusterStagedUpdateRun` is a new object in KubeFleet: the clusters'
/// deliveries name the earlier run, and are not read as this one having finished.
#[test]
fn a_run_added_again_under_the_same_name_is_a_new_run() {
    let mut w = World::default();
    let v1 = standard("v1", "Run");
    w.approve("r1-before-canary", "c1");
    w.approve("r1-after-production", "c1");
    let now = run_to_success(&mut w, &v1, "c1", 0, "r1");
    let without = commit(
        "v1",
        &format!(
            "{}{STRATEGY}",
            placement("External", "{placementType: PickAll}")
        ),
    );
    w.step(&without, "c2", now, BindingHealth::Available);
    assert!(!w.state.runs.contains_key("r1"));
    assert!(
        w.state.ended_runs.contains("r1"),
        "{:?}",
        w.state.ended_runs
    );

    let again = standard("v2", "Run");
    let s = w.step(&again, "c3", now + 1, BindingHealth::Available);
    let st = w.run("r1");
    assert_eq!(st.init_commit, "c3");
    assert!(
        !status::is_true(&st.conditions, status::SUCCEEDED),
        "{:#?}",
        st.conditions
    );
    // Its first stage moves to the head's snapshot, a new index.
    assert_eq!(s.applied, ["m1", "m2"], "{s:?}");
    assert_eq!(st.resource_snapshot_index_used, Some(1));
    assert!(
        w.state.ended_runs.is_empty(),
        "the new run replaces the ended one: {:?}",
        w.state.ended_runs
    );
}

fn init_failure(extra: &str) -> String {
    let mut w = World::default();
    let cat = commit("v1", extra);
    let s = w.step(&cat, "c1", 0, BindingHealth::Available);
    assert!(s.applied.is_empty());
    let st = w.run("r1");
    let c = status::find(&st.conditions, status::INITIALIZED)
        .unwrap()
        .clone();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", reason::INITIALIZE_FAILED)
    );
    // Terminal: a later commit fixing the cause does not revive it.
    let again = w.step(&standard("v1", "Run"), "c2", 10, BindingHealth::Available);
    assert!(again.applied.is_empty());
    c.message
}

/// initialization.go's terminal errors, each with KubeFleet's message. (A run whose placement
/// is missing or not External never gets here: the catalog refuses such a commit.)
#[test]
fn initialisation_errors_are_terminal_with_kubefleets_messages() {
    let ext = placement("External", "{placementType: PickAll}");
    let one_stage = |sel: &str, extra_stage: &str| {
        format!(
            "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\n\
             metadata: {{name: three}}\nspec:\n  stages:\n  - name: all\n    labelSelector: {sel}\n{extra_stage}"
        )
    };
    let cases = [
        (format!("{ext}{}", run("r1", "Run")), "referenced updateStrategy not found: `three`"),
        (
            format!("{ext}{}{}", one_stage("{matchLabels: {env: staging}}", ""), run("r1", "Run")),
            "some clusters are not placed in any stage, total 6, showing up to 10: m4, m5, m6, m7, m8, m9",
        ),
        (
            format!(
                "{ext}{}{}",
                one_stage("{}", "  - name: again\n    labelSelector: {matchLabels: {env: canary}}\n"),
                run("r1", "Run")
            ),
            "cluster `m4` appears in more than one stages",
        ),
        (
            format!("{ext}{}{}", one_stage("{}\n    sortingLabelKey: env", ""), run("r1", "Run")),
            "the sorting label `env:staging` on cluster `m1` is not valid: strconv.Atoi: parsing \"staging\": invalid syntax",
        ),
        (
            format!(
                "{}{STRATEGY}{}",
                placement("External", "{placementType: PickN, numberOfClusters: 20}"),
                run("r1", "Run")
            ),
            "policy snapshot `app-0` not fully scheduled yet",
        ),
    ];
    for (extra, want) in cases {
        let msg = init_failure(&extra);
        assert!(
            msg.starts_with("cannot continue the updateRun: failed to validate the updateRun: "),
            "{msg}"
        );
        assert!(msg.ends_with(want), "want …{want}\n got {msg}");
    }
}

/// A stage without clusters succeeds at once with `StageUpdatingSkippedNoClusters`
/// (kubefleet#610); a stage with `labelSelector` absent selects none.
#[test]
fn an_empty_stage_is_skipped() {
    let strategy = "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\n\
        metadata: {name: three}\nspec:\n  stages:\n  - name: nobody\n    beforeStageTasks: [{type: Approval}]\n\
        \x20 - name: everyone\n    labelSelector: {}\n    maxConcurrency: 9\n";
    let mut w = World::default();
    let cat = commit(
        "v1",
        &format!(
            "{}{strategy}{}",
            placement("External", "{placementType: PickAll}"),
            run("r1", "Run")
        ),
    );
    let s = w.step(&cat, "c1", 0, BindingHealth::Available);
    assert_eq!(
        s.applied.len(),
        9,
        "the empty stage's approval is not asked: {s:?}"
    );
    assert!(s.requests.is_empty());
    let st = w.run("r1");
    assert_eq!(
        cond(&st.stages_status[0].conditions, status::SUCCEEDED),
        ("True", reason::STAGE_SKIPPED)
    );
}

/// The delete stage: clusters whose bindings are unscheduled at initialisation are removed
/// after the last stage, then the run succeeds.
#[test]
fn the_delete_stage_removes_unscheduled_clusters_after_the_last_stage() {
    let pick = |names: &str| {
        format!(
            "{}{}{}",
            placement("External", &format!("{{placementType: PickFixed, clusterNames: [{names}]}}")),
            "---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\n\
             metadata: {name: three}\nspec:\n  stages:\n  - name: all\n    labelSelector: {}\n    maxConcurrency: 9\n",
            ""
        )
    };
    let mut w = World::default();
    // First run over m1, m2 (runs are named r1, r2: a finished run stays finished).
    let first = commit("v1", &format!("{}{}", pick("m1, m2"), run("r1", "Run")));
    w.step(&first, "c1", 0, BindingHealth::Available);
    w.step(&first, "c1", 1, BindingHealth::Available);
    assert_eq!(
        cond(&w.run("r1").conditions, status::SUCCEEDED),
        ("True", reason::SUCCEEDED)
    );
    // The policy now picks m2, m3: m1's binding is unscheduled; a second run.
    let second = commit(
        "v2",
        &format!("{}{}", pick("m2, m3"), run("r2", "Run").replace("r1", "r2")),
    );
    let s = w.step(&second, "c2", 10, BindingHealth::Available);
    assert_eq!(s.applied, ["m2", "m3"]);
    let st = w.run("r2");
    let del = st.deletion_stage_status.as_ref().unwrap();
    assert_eq!(del.clusters[0].cluster_name, "m1");
    let s = w.step(&second, "c2", 11, BindingHealth::Available);
    assert_eq!(s.removed, ["m1"]);
    w.step(&second, "c2", 12, BindingHealth::Available);
    let st = w.run("r2");
    assert_eq!(
        cond(&st.conditions, status::SUCCEEDED),
        ("True", reason::SUCCEEDED)
    );
    assert!(
        !w.state.runs.contains_key("r1"),
        "a run gone from the commit is forgotten"
    );
}

/// A run's record survives the state file (crash-safe state) unchanged.
#[test]
fn run_progress_round_trips_through_the_state_format() {
    let mut w = World::default();
    w.step(&standard("v1", "Run"), "c1", 0, BindingHealth::Pending);
    let text = serde_json::to_string(&w.state).unwrap();
    let back: RolloutState = serde_json::from_str(&text).unwrap();
    assert_eq!(back, w.state);
    // A state written before runs existed reads with none.
    let old: RolloutState = serde_json::from_str(r#"{"placements": {}}"#).unwrap();
    assert!(old.runs.is_empty());
}

#[test]
fn remembered_render_commits_follow_every_change_of_a_placement() {
    use crate::model::{PlacementKey, PlacementKind};
    use crate::rollout::{ClusterState, PlacementState};
    use std::sync::Arc;

    let delivered = |commit: &str| {
        let mut c = ClusterState::with_health(BindingHealth::Available);
        c.delivered_by = Some(Arc::new(super::RunDelivery {
            run: "r".into(),
            stage: "s".into(),
            resource_snapshot_index: 0,
            resource_snapshot: "h".into(),
            render_commit: commit.into(),
            init_commit: commit.into(),
        }));
        c
    };
    let key = |n: &str| PlacementKey::new(PlacementKind::ClusterResourcePlacement, None, n);
    let mut state = RolloutState::default();
    for (p, commit) in [("a", "c1"), ("b", "c2")] {
        let mut ps = PlacementState::default();
        ps.clusters.insert("m1".into(), delivered(commit));
        ps.clusters.insert(
            "m2".into(),
            ClusterState::with_health(BindingHealth::Available),
        );
        state.placements.insert(key(p), Arc::new(ps));
    }
    let mut memo = super::RenderCommits::default();
    let names = |s: std::collections::BTreeSet<String>| s.into_iter().collect::<Vec<_>>();
    assert_eq!(names(memo.of(&state)), ["c1", "c2"]);

    // Changed through copy-on-write, as a step changes it: seen, though the memo saw it before.
    let a = state.placements.get_mut(&key("a")).unwrap();
    Arc::make_mut(a)
        .clusters
        .insert("m2".into(), delivered("c3"));
    assert_eq!(names(memo.of(&state)), ["c1", "c2", "c3"]);
    Arc::make_mut(state.placements.get_mut(&key("a")).unwrap())
        .clusters
        .clear();
    assert_eq!(names(memo.of(&state)), ["c2"]);
    state.placements.remove(&key("b"));
    assert_eq!(names(memo.of(&state)), Vec::<String>::new());
    assert_eq!(memo.of(&state), super::render_commits(&state));
}
