use super::*;
use crate::rollout::guard::Assessment;
use crate::rollout::{ClusterState, Strategy};
use crate::schedule::fleet::InventoryCluster;

const DASH: Option<&str> = Some("https://fleet.example.com/");

fn placement(id: &str, f: impl FnOnce(&mut PlacementStatus)) -> Arc<PlacementStatus> {
    let mut p = PlacementStatus {
        id: id.into(),
        strategy: Strategy::RollingUpdate,
        target: 2,
        selected: vec!["m1".into(), "m2".into()].into(),
        applying: Default::default(),
        removing: Default::default(),
        waiting: Default::default(),
        up_to_date: ["m1", "m2"].map(String::from).into_iter().collect(),
        note: None,
        render_errors: Default::default(),
        clusters: ["m1", "m2"]
            .into_iter()
            .map(|c| {
                (
                    c.to_string(),
                    ClusterState::with_health(BindingHealth::Available),
                )
            })
            .collect(),
        observed_resource_index: None,
        selected_resources: vec![],
        conditions: vec![],
        per_cluster: Default::default(),
        replica_sets: None,
        failed: Default::default(),
        ready: Default::default(),
        policy: None,
        ocm_policy: None,
    };
    f(&mut p);
    Arc::new(p)
}

fn serving(c: &str, placements: Vec<Arc<PlacementStatus>>) -> Snapshot {
    Snapshot {
        serving: Some(c.into()),
        placements,
        ..Snapshot::default()
    }
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

fn rolling(id: &str) -> Arc<PlacementStatus> {
    placement(id, |p| {
        p.applying = vec![String::from("m2")].into();
        p.waiting = vec![String::from("m1")].into();
        p.clusters.get_mut("m2").unwrap().health = BindingHealth::Pending;
    })
}

/// A new commit: served, its placement starts on the clusters being changed, then settles,
/// and the commit is rolled out; each event carries the commit, placement, clusters and link.
#[test]
fn a_commit_rolled_out_is_served_started_settled_and_rolled_out() {
    let idle = serving("aaaa", vec![placement("crp/shop", |_| {})]);
    let started = serving("bbbb", vec![rolling("crp/shop")]);
    let events = events_between(&idle, &started, 100, DASH);
    assert_eq!(kinds(&events), ["commit.served", "placement.started"]);
    assert_eq!(events[0].commit.as_deref(), Some("bbbb"));
    assert_eq!(
        events[0].link.as_deref(),
        Some("https://fleet.example.com/")
    );
    let s = &events[1];
    assert_eq!(s.placement.as_deref(), Some("crp/shop"));
    assert_eq!(s.clusters, ["m1", "m2"]);
    assert_eq!(s.commit.as_deref(), Some("bbbb"));
    assert_eq!(s.time, 100);
    assert_eq!(s.severity, Severity::Info);
    assert_eq!(
        s.link.as_deref(),
        Some("https://fleet.example.com/placements/crp/shop")
    );

    let done = serving("bbbb", vec![placement("crp/shop", |_| {})]);
    let events = events_between(&started, &done, 101, None);
    assert_eq!(kinds(&events), ["placement.settled", "commit.rolledout"]);
    assert_eq!(events[0].clusters, ["m1", "m2"]);
    assert_eq!(events[1].commit.as_deref(), Some("bbbb"));
    assert!(events.iter().all(|e| e.link.is_none()));
    // Nothing changed: nothing to tell.
    assert!(events_between(&done, &done, 102, DASH).is_empty());
}

/// A push that fails is one `placement.failed` (an error) naming the failed cluster and why;
/// recovering settles it.
#[test]
fn a_failed_push_is_told_once_and_its_recovery_settles() {
    let started = serving("bbbb", vec![rolling("crp/shop")]);
    let failed = serving(
        "bbbb",
        vec![placement("crp/shop", |p| {
            p.failed
                .insert("m2".into(), "admission webhook denied".into());
            let c = p.clusters.get_mut("m2").unwrap();
            c.health = BindingHealth::Failed;
            c.details.make_mut().last_error = Some("admission webhook denied".into());
        })],
    );
    let events = events_between(&started, &failed, 5, None);
    assert_eq!(kinds(&events), ["placement.failed"]);
    assert_eq!(events[0].severity, Severity::Error);
    assert_eq!(events[0].clusters, ["m2"]);
    assert_eq!(
        events[0].message,
        "crp/shop failed: m2: admission webhook denied"
    );
    assert!(events_between(&failed, &failed, 6, None).is_empty());
    let fixed = serving("bbbb", vec![placement("crp/shop", |_| {})]);
    assert_eq!(
        kinds(&events_between(&failed, &fixed, 7, None)),
        ["placement.settled", "commit.rolledout"]
    );
}

#[test]
fn a_refused_commit_and_the_guard_are_told_once_each() {
    let before = serving("aaaa", vec![]);
    let refused = Snapshot {
        rejected: Some(Rejected {
            commit: "cccc".into(),
            errors: vec!["a.yaml:3: ConfigMap/x: data: bad".into()],
        }),
        ..before.clone()
    };
    let events = events_between(&before, &refused, 1, None);
    assert_eq!(kinds(&events), ["commit.refused"]);
    assert_eq!(events[0].commit.as_deref(), Some("cccc"));
    assert!(events[0].message.contains("data: bad"));
    assert!(events_between(&refused, &refused, 2, None).is_empty());

    let held = Snapshot {
        held: Some(Held {
            commit: "dddd".into(),
            assessment: Assessment {
                managed: 10,
                deleting: 9,
                by_placement: Default::default(),
            },
            message: "commit dddd deletes 9 of 10 objects".into(),
        }),
        ..before.clone()
    };
    let events = events_between(&before, &held, 3, DASH);
    assert_eq!(kinds(&events), ["guard.held"]);
    assert_eq!(events[0].severity, Severity::Warning);
    assert_eq!(events[0].commit.as_deref(), Some("dddd"));
    let events = events_between(&held, &before, 4, None);
    assert_eq!(kinds(&events), ["guard.released"]);
    assert_eq!(events[0].commit.as_deref(), Some("dddd"));
}

/// Drift is a re-apply the members' watch asked for; the periodic resync's is not.
#[test]
fn drift_is_what_the_watch_saw_not_the_resync() {
    let settled = serving("aaaa", vec![placement("crp/shop", |_| {})]);
    let resync = serving(
        "aaaa",
        vec![placement("crp/shop", |p| {
            for c in p.clusters.values_mut() {
                c.recheck = Some("periodic resync".into());
            }
        })],
    );
    assert!(!kinds(&events_between(&settled, &resync, 1, None)).contains(&"drift.found"));
    let deleted = serving(
        "aaaa",
        vec![placement("crp/shop", |p| {
            let c = p.clusters.get_mut("m1").unwrap();
            c.recheck = Some("ConfigMap shop/cfg deleted on the member".into());
            c.drift = true;
            c.health = BindingHealth::Pending;
        })],
    );
    let events = events_between(&settled, &deleted, 2, None);
    assert_eq!(kinds(&events), ["placement.started", "drift.found"]);
    let d = &events[1];
    assert_eq!(d.clusters, ["m1"]);
    assert_eq!(d.placement.as_deref(), Some("crp/shop"));
    assert!(d.message.contains("ConfigMap shop/cfg deleted"));
    let events = events_between(&deleted, &settled, 3, None);
    assert_eq!(
        kinds(&events),
        ["placement.settled", "drift.restored", "commit.rolledout"]
    );
    assert_eq!(events[1].clusters, ["m1"]);
}

fn run(stage: Option<&str>, succeeded: &str) -> UpdateRun {
    serde_json::from_value(serde_json::json!({
        "name": "r1", "placement": "crp/shop", "resourceSnapshotIndex": 1,
        "policySnapshotIndex": 0, "initialized": "True", "progressing": "True",
        "succeeded": succeeded, "createdAt": 1, "state": "Run", "stage": stage,
        "clusters": "0/1", "waitingFor": "-", "initCommit": "eeee",
        "status": {"name": "r1", "placement": "crp/shop", "strategyName": "s",
            "initCommit": "eeee", "createdAt": 1, "state": "Run"}
    }))
    .unwrap()
}

fn request(accepted: bool) -> ApprovalRequest {
    ApprovalRequest {
        name: "r1-canary-after".into(),
        namespace: None,
        update_run: "r1".into(),
        stage: "canary".into(),
        task_type: "afterStage".into(),
        approved: if accepted { "True" } else { "" }.into(),
        approval_accepted: if accepted { "True" } else { "" }.into(),
        created_at: 1,
        tag: "gitfleet/approve/r1/canary".into(),
        commit: "eeee".into(),
        approved_by: accepted.then(|| "alice@example.com".into()),
        approved_at: None,
    }
}

#[test]
fn a_staged_run_tells_its_stages_approvals_and_end() {
    let none = serving("eeee", vec![]);
    let canary = Snapshot {
        runs: vec![run(Some("canary"), "")],
        ..none.clone()
    };
    let events = events_between(&none, &canary, 1, DASH);
    assert_eq!(kinds(&events), ["run.stage.started"]);
    assert_eq!(events[0].run.as_deref(), Some("r1"));
    assert_eq!(events[0].stage.as_deref(), Some("canary"));
    assert_eq!(events[0].commit.as_deref(), Some("eeee"));
    assert_eq!(
        events[0].link.as_deref(),
        Some("https://fleet.example.com/runs")
    );
    let waiting = Snapshot {
        approvals: vec![request(false)],
        ..canary.clone()
    };
    let events = events_between(&canary, &waiting, 2, None);
    assert_eq!(kinds(&events), ["run.approval.waiting"]);
    assert!(events[0].message.contains("gitfleet/approve/r1/canary"));
    let approved = Snapshot {
        approvals: vec![request(true)],
        runs: vec![run(Some("prod"), "")],
        ..canary.clone()
    };
    let events = events_between(&waiting, &approved, 3, None);
    assert_eq!(
        kinds(&events),
        ["run.stage.started", "run.approval.approved"]
    );
    assert_eq!(events[1].approved_by.as_deref(), Some("alice@example.com"));
    let done = Snapshot {
        runs: vec![run(None, "True")],
        ..approved.clone()
    };
    assert_eq!(
        kinds(&events_between(&approved, &done, 4, None)),
        ["run.succeeded"]
    );
    let failed = Snapshot {
        runs: vec![run(Some("prod"), "False")],
        ..approved.clone()
    };
    let events = events_between(&approved, &failed, 4, None);
    assert_eq!(kinds(&events), ["run.failed"]);
    assert_eq!(events[0].severity, Severity::Error);
}

#[test]
fn members_are_told_when_they_turn_unhealthy_and_recover() {
    let inv = |healthy: bool| {
        Some(Arc::new(Inventory {
            clusters: vec![Arc::new(InventoryCluster {
                name: "m1".into(),
                healthy,
                error: (!healthy).then(|| "connection refused".into()),
                properties: Default::default(),
                add_on_scores: Default::default(),
                namespaces: None,
                namespace_collection_degraded: false,
            })],
        }))
    };
    let up = Snapshot {
        inventory: inv(true),
        ..Snapshot::default()
    };
    let down = Snapshot {
        inventory: inv(false),
        ..Snapshot::default()
    };
    assert!(events_between(&Snapshot::default(), &up, 1, None).is_empty());
    let events = events_between(&up, &down, 2, DASH);
    assert_eq!(kinds(&events), ["member.unhealthy"]);
    assert_eq!(events[0].clusters, ["m1"]);
    assert!(events[0].message.contains("connection refused"));
    assert_eq!(
        events[0].link.as_deref(),
        Some("https://fleet.example.com/matrix")
    );
    assert!(events_between(&down, &down, 3, None).is_empty());
    assert_eq!(
        kinds(&events_between(&down, &up, 4, None)),
        ["member.recovered"]
    );
}

#[test]
fn every_kind_has_a_distinct_name() {
    let names: BTreeSet<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), Kind::ALL.len());
}
