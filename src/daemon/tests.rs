//! The loop's and the reconciler's decisions — when to look again, when members are probed,
//! when state is saved — with a fake [`Deliverer`] (no members) and tokio's paused clock, on a
//! real git repository.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::rollout::BindingHealth;
use crate::schedule::InventoryCluster;

const MEMBERS: [&str; 3] = ["m1", "m2", "m3"];

/// What the fake members answer, and what they were asked.
#[derive(Default)]
struct Members {
    /// Members that do not answer their probe.
    down: Mutex<BTreeSet<String>>,
    /// How every push ends (`None`: it fails).
    health: Mutex<Option<BindingHealth>>,
    probes: AtomicUsize,
    /// The clusters of each delivery, in order.
    deliveries: Mutex<Vec<Vec<String>>>,
    /// Members whose pushes take this long (on tokio's clock).
    slow: Mutex<BTreeMap<String, Duration>>,
    /// Members whose pushes find them unreachable (their probes still answer unless `down`).
    unreachable: Mutex<BTreeSet<String>>,
    /// Where the daemon takes the members' changes (given when it first watches).
    changes: Mutex<Option<tokio::sync::mpsc::UnboundedSender<watch::MemberChange>>>,
    /// A change the next push to its member reports once it has pushed, as a watch that
    /// restarted meanwhile would.
    report: Mutex<Option<watch::MemberChange>>,
}

impl Members {
    fn set_health(&self, health: Option<BindingHealth>) {
        *self.health.lock().unwrap() = health;
    }

    fn probes(&self) -> usize {
        self.probes.load(Ordering::SeqCst)
    }

    /// Members probed, over the number of members: rounds of probes when every member is
    /// probed each time.
    fn probe_rounds(&self) -> usize {
        self.probes() / MEMBERS.len()
    }

    /// The deliveries that carried work.
    fn pushes(&self) -> Vec<Vec<String>> {
        let d = self.deliveries.lock().unwrap();
        d.iter().filter(|w| !w.is_empty()).cloned().collect()
    }
}

struct Fake(Arc<Members>);

impl Deliverer for Fake {
    async fn probe(&self, members: &[Member]) -> Result<Inventory> {
        self.0.probes.fetch_add(members.len(), Ordering::SeqCst);
        let down = self.0.down.lock().unwrap().clone();
        let clusters = members
            .iter()
            .map(|m| {
                let name = m.target.name.clone();
                let healthy = !down.contains(&name);
                InventoryCluster {
                    error: (!healthy).then(|| "connection refused".to_string()),
                    name,
                    healthy,
                    properties: Default::default(),
                    add_on_scores: Default::default(),
                    namespaces: None,
                    namespace_collection_degraded: false,
                }
            })
            .map(Arc::new)
            .collect();
        Ok(Inventory { clusters })
    }

    async fn deliver(
        &self,
        work: Vec<Work>,
        _commit: &str,
        _contexts: &BTreeMap<String, String>,
    ) -> Delivery {
        let clusters: Vec<String> = work.iter().map(|w| w.cluster.clone()).collect();
        let slowest = {
            let slow = self.0.slow.lock().unwrap();
            clusters.iter().filter_map(|c| slow.get(c)).max().copied()
        };
        if let Some(d) = slowest {
            tokio::time::sleep(d).await;
        }
        self.0.deliveries.lock().unwrap().push(clusters.clone());
        let health = *self.0.health.lock().unwrap();
        let unreachable: BTreeMap<String, String> = {
            let cut = self.0.unreachable.lock().unwrap();
            clusters
                .iter()
                .filter(|c| cut.contains(*c))
                .map(|c| (c.clone(), "connection refused".to_string()))
                .collect()
        };
        let results = work
            .into_iter()
            .map(|w| {
                let outcome = match (unreachable.get(&w.cluster), health) {
                    (Some(why), _) => Outcome::Failed(why.clone()),
                    (None, Some(h)) => Outcome::Done(h, Default::default()),
                    (None, None) => Outcome::Failed("409 conflict".into()),
                };
                (w, outcome)
            })
            .collect();
        let report = {
            let mut report = self.0.report.lock().unwrap();
            report.take_if(|c| clusters.contains(&c.member))
        };
        if let (Some(change), Some(to)) = (report, &*self.0.changes.lock().unwrap()) {
            to.send(change).unwrap();
        }
        Delivery {
            results,
            unreachable,
        }
    }

    fn watch(
        &self,
        _members: &BTreeMap<String, (String, std::collections::BTreeSet<watch::Kind>)>,
        changes: &tokio::sync::mpsc::UnboundedSender<watch::MemberChange>,
    ) {
        *self.0.changes.lock().unwrap() = Some(changes.clone());
    }
}

use crate::follow::tests::git;

fn fleet(version: &str) -> String {
    fleet_with(version, 1)
}

fn fleet_with(version: &str, max_unavailable: usize) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: app}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg, namespace: app}}\n\
         data: {{version: '{version}'}}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: app}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: app}}]\n\
         \x20 strategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: {max_unavailable}, maxSurge: 0}}}}\n"
    );
    for m in MEMBERS {
        yaml.push_str(&format!(
            "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
             metadata: {{name: {m}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
        ));
    }
    yaml
}

/// A repository, a state directory and the fake members of one test.
struct World {
    repo: tempfile::TempDir,
    state: tempfile::TempDir,
    members: Arc<Members>,
}

impl World {
    fn new(content: &str) -> World {
        let world = World {
            repo: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
            members: Arc::new(Members::default()),
        };
        world.members.set_health(Some(BindingHealth::Available));
        git(world.repo.path(), &["init", "-q", "-b", "main"]);
        world.commit(content);
        world
    }

    fn commit(&self, content: &str) -> String {
        std::fs::write(self.repo.path().join("fleet.yaml"), content).unwrap();
        git(self.repo.path(), &["add", "-A"]);
        git(self.repo.path(), &["commit", "-q", "-m", "c"]);
        git(self.repo.path(), &["rev-parse", "HEAD"])
    }

    fn daemon(&self, once: bool) -> Daemon<Fake> {
        self.try_daemon(once).unwrap()
    }

    fn try_daemon(&self, once: bool) -> Result<Daemon<Fake>> {
        let opts = RunOptions {
            repo: self.repo.path().to_path_buf(),
            remote: None,
            branch: "main".into(),
            path: String::new(),
            sources: Arc::new(crate::sources::Sources::plain()),
            state_dir: self.state.path().to_path_buf(),
            listen: None,
            poll: Duration::from_secs(30),
            resync: Duration::from_secs(600),
            once,
            webhook_secret: None,
            verifier: None,
            verify_commits: false,
            deletion_guard: Default::default(),
        };
        Daemon::open(opts, Fake(self.members.clone()))
    }

    /// A daemon whose reconciles wait for every member, as `--once`'s do (but recheck on
    /// start as `gitfleet run` does): for the decisions of one reconcile.
    fn waiting_daemon(&self) -> Daemon<Fake> {
        let mut d = self.daemon(false);
        d.isolated = false;
        d
    }

    /// [`Self::waiting_daemon`] on a state directory another daemon of this process held.
    /// flock is per open file description, and a child that another test forks holds a copy
    /// of every open description until it execs: of the old daemon's lock, or of this one's
    /// own attempt. So the open itself is retried while it is refused as locked (CI saw a
    /// probe-then-open race fail here).
    async fn reopened_waiting_daemon(&self) -> Daemon<Fake> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            match self.try_daemon(false) {
                Ok(mut d) => {
                    d.isolated = false;
                    return d;
                }
                Err(e)
                    if std::time::Instant::now() < deadline
                        && matches!(
                            e.downcast_ref::<crate::state::StateError>(),
                            Some(crate::state::StateError::Locked { .. })
                        ) =>
                {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                Err(e) => panic!("{e:#}"),
            }
        }
    }

    fn head(&self) -> String {
        git(self.repo.path(), &["rev-parse", "HEAD"])
    }

    fn stored(&self) -> StateStore {
        StateStore::open(self.state.path()).unwrap()
    }
}

const AT_ONCE: Action = Action {
    requeue_after: Some(Duration::ZERO),
};

#[tokio::test]
async fn a_new_commit_is_bound_at_once_then_settles_and_waits_for_a_change() {
    let w = World::new(&fleet("1"));
    let mut d = w.waiting_daemon();
    let head = w.head();
    // maxSurge 0 over 3 new bindings: all three are bound in the first step; something moved,
    // so the next step is at once; then nothing is left to do.
    assert_eq!(d.reconcile(&head).await.unwrap(), AT_ONCE);
    assert_eq!(d.reconcile(&head).await.unwrap(), Action::await_change());
    assert_eq!(w.members.pushes(), [MEMBERS.map(String::from).to_vec()]);
    // Every reconcile probes the members once.
    assert_eq!(w.members.probe_rounds(), 2);

    // A new version: one member per step (maxUnavailable 1), each step at once after the last.
    let head = w.commit(&fleet("2"));
    for _ in MEMBERS {
        assert_eq!(d.reconcile(&head).await.unwrap(), AT_ONCE);
    }
    assert_eq!(d.reconcile(&head).await.unwrap(), Action::await_change());
    let updates: Vec<Vec<String>> = w.members.pushes()[1..].to_vec();
    assert_eq!(updates, [["m1"], ["m2"], ["m3"]]);
}

/// The rollout gauges of each placement, from the metrics text: `state=count` pairs.
fn rollout_gauges(metrics: &metrics::Metrics, placement: &str) -> Vec<String> {
    let prefix = format!("gitfleet_rollout_clusters{{placement=\"{placement}\",state=\"");
    let mut out: Vec<String> = metrics
        .render()
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|l| l.replace("\"} ", "="))
        .collect();
    out.sort();
    out
}

/// The gauges follow the steps: set as a placement rolls, kept while it stays settled (its
/// step is reused, not metered again), gone with the placement.
#[tokio::test]
async fn the_rollout_gauges_follow_each_placements_step_and_leave_with_it() {
    let other = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\n\
                 apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
                 metadata: {name: other}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: other}]\n";
    let w = World::new(&format!("{}{other}", fleet("1")));
    let mut d = w.waiting_daemon();
    let head = w.head();
    while d.reconcile(&head).await.unwrap() == AT_ONCE {}
    let settled = [
        "applying=0",
        "failed=0",
        "removing=0",
        "upToDate=3",
        "waiting=0",
    ];
    assert_eq!(rollout_gauges(&d.metrics, "crp/app"), settled);
    assert_eq!(rollout_gauges(&d.metrics, "crp/other"), settled);

    // One member at a time for app; other's settled step is reused and its gauges stay.
    let head = w.commit(&format!("{}{other}", fleet("2")));
    assert_eq!(d.reconcile(&head).await.unwrap(), AT_ONCE);
    assert_eq!(
        rollout_gauges(&d.metrics, "crp/app"),
        [
            "applying=1",
            "failed=0",
            "removing=0",
            "upToDate=0",
            "waiting=2"
        ]
    );
    assert_eq!(rollout_gauges(&d.metrics, "crp/other"), settled);
    while d.reconcile(&head).await.unwrap() == AT_ONCE {}
    assert_eq!(rollout_gauges(&d.metrics, "crp/app"), settled);

    // other leaves the repository: its series go.
    let head = w.commit(&fleet("2"));
    while d.reconcile(&head).await.unwrap() == AT_ONCE {}
    assert_eq!(rollout_gauges(&d.metrics, "crp/app"), settled);
    assert_eq!(
        rollout_gauges(&d.metrics, "crp/other"),
        Vec::<String>::new()
    );
}

/// Clusters whose pushes fail are counted as failed (the status never calls such a placement
/// settled), and no longer once their pushes go through.
#[tokio::test]
async fn the_rollout_gauges_count_failed_clusters() {
    let w = World::new(&fleet("1"));
    w.members.set_health(None);
    let mut d = w.waiting_daemon();
    let head = w.head();
    d.reconcile(&head).await.unwrap();
    assert_eq!(
        rollout_gauges(&d.metrics, "crp/app"),
        [
            "applying=3",
            "failed=3",
            "removing=0",
            "upToDate=0",
            "waiting=0"
        ]
    );
    w.members.set_health(Some(BindingHealth::Available));
    for _ in 0..20 {
        if rollout_gauges(&d.metrics, "crp/app").contains(&"upToDate=3".to_string()) {
            break;
        }
        d.reconcile(&head).await.unwrap();
    }
    assert_eq!(
        rollout_gauges(&d.metrics, "crp/app"),
        [
            "applying=0",
            "failed=0",
            "removing=0",
            "upToDate=3",
            "waiting=0"
        ]
    );
}

#[tokio::test]
async fn a_pending_cluster_is_looked_at_every_availability_poll_until_available() {
    let w = World::new(&fleet("1"));
    w.members.set_health(Some(BindingHealth::Pending));
    let mut d = w.waiting_daemon();
    let head = w.head();
    // Binding is progress even when the objects are not available yet.
    assert_eq!(d.reconcile(&head).await.unwrap(), AT_ONCE);
    // Re-reading a pending cluster is not: the availability poll paces it.
    let poll = Action::requeue(AVAILABILITY_POLL);
    assert_eq!(d.reconcile(&head).await.unwrap(), poll);
    assert_eq!(d.reconcile(&head).await.unwrap(), poll);
    w.members.set_health(Some(BindingHealth::Available));
    assert_eq!(d.reconcile(&head).await.unwrap(), AT_ONCE);
    assert_eq!(d.reconcile(&head).await.unwrap(), Action::await_change());
}

#[tokio::test]
async fn a_failed_push_is_retried_after_five_seconds() {
    let w = World::new(&fleet("1"));
    w.members.set_health(None);
    let mut d = w.waiting_daemon();
    let head = w.head();
    let retry = Action::requeue(Duration::from_secs(5));
    assert_eq!(d.reconcile(&head).await.unwrap(), retry);
    w.members.set_health(Some(BindingHealth::Available));
    assert_eq!(d.reconcile(&head).await.unwrap(), AT_ONCE);
    let stored = w.stored().load_rollout().unwrap();
    let app = &stored.placements[&"crp/app".parse().unwrap()];
    assert!(app
        .clusters
        .values()
        .all(|c| c.details.last_error.is_none()));
}

/// Waits for every delivery handed to the members' workers and hands it to the next reconcile,
/// as the loop does.
async fn deliveries(d: &mut Daemon<Fake>) {
    while d.workers.outstanding() > 0 {
        let delivered = d.workers.delivered().await;
        d.workers.settled(&delivered);
        d.arrived.push(delivered);
    }
}

#[tokio::test(start_paused = true)]
async fn a_member_that_does_not_answer_is_not_pushed_to_and_its_work_fails_at_once() {
    let w = World::new(&fleet("1"));
    let mut d = w.daemon(false);
    let head = w.head();
    d.reconcile(&head).await.unwrap();
    deliveries(&mut d).await;
    d.reconcile(&head).await.unwrap();
    let before = w.members.pushes().len();
    // m1, first in line for the update, stops answering (it stays eligible for five minutes);
    // its next probe is due after its heartbeat (60 s).
    w.members.down.lock().unwrap().insert("m1".into());
    tokio::time::advance(Duration::from_secs(60)).await;
    let head = w.commit(&fleet("2"));
    d.reconcile(&head).await.unwrap();
    assert_eq!(d.workers.outstanding(), 0);
    assert_eq!(w.members.pushes().len(), before, "nothing was pushed to m1");
    let stored = w.stored().load_rollout().unwrap();
    let m1 = &stored.placements[&"crp/app".parse().unwrap()].clusters["m1"];
    assert_eq!(m1.health, BindingHealth::Failed);
    let error = m1.details.last_error.as_deref().unwrap();
    assert!(
        error.starts_with("member unreachable: connection refused"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_member_holds_up_neither_the_others_nor_the_next_commit() {
    // maxUnavailable 3: room for the slow member, so that only isolation is tested.
    let w = World::new(&fleet_with("1", 3));
    w.members
        .slow
        .lock()
        .unwrap()
        .insert("m3".into(), Duration::from_secs(60));
    let mut d = w.daemon(false);
    let started = Instant::now();
    let head = w.head();
    // The reconcile hands the work out and returns: nothing waits for m3.
    d.reconcile(&head).await.unwrap();
    assert_eq!(d.workers.outstanding(), 3);
    for _ in 0..2 {
        let delivered = d.workers.delivered().await;
        d.workers.settled(&delivered);
        d.arrived.push(delivered);
    }
    // m1 and m2 are bound and the next step absorbs it; m3's push is still in flight and is
    // not handed out again.
    d.reconcile(&head).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(d.workers.outstanding(), 1);
    let app: crate::model::PlacementKey = "crp/app".parse().unwrap();
    let bound: Vec<&str> = d.state.placements[&app]
        .clusters
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(bound, ["m1", "m2"]);

    // The next commit reaches m1 and m2 at once, and is saved, while m3 still pushes the
    // first (its work for the second waits in its queue).
    let v2 = w.commit(&fleet_with("2", 3));
    d.reconcile(&v2).await.unwrap();
    assert_eq!(d.workers.outstanding(), 3);
    for _ in 0..2 {
        let delivered = d.workers.delivered().await;
        assert_eq!(delivered.commit, v2);
        d.workers.settled(&delivered);
        d.arrived.push(delivered);
    }
    assert_eq!(started.elapsed(), Duration::ZERO);
    d.reconcile(&v2).await.unwrap();
    let stored = w.stored().load_rollout().unwrap();
    for m in ["m1", "m2"] {
        let c = &stored.placements[&app].clusters[m];
        assert_eq!(c.commit.as_deref(), Some(v2.as_str()), "{m}");
    }

    // m3 answers after its minute, then pushes the second commit (queued meanwhile); the
    // steps absorb both.
    deliveries(&mut d).await;
    assert_eq!(started.elapsed(), Duration::from_secs(120));
    d.reconcile(&v2).await.unwrap();
    let m3 = &d.state.placements[&app].clusters["m3"];
    assert_eq!(m3.commit.as_deref(), Some(v2.as_str()));
    let m3_pushes: Vec<_> = w
        .members
        .pushes()
        .into_iter()
        .filter(|p| p == &["m3"])
        .collect();
    assert_eq!(m3_pushes.len(), 2);
}

#[tokio::test]
async fn a_rejected_head_is_saved_without_probing_and_the_last_good_commit_keeps_being_served() {
    let w = World::new("kind: [not, valid");
    let mut d = w.waiting_daemon();
    let bad = w.head();
    assert_eq!(d.reconcile(&bad).await.unwrap(), Action::await_change());
    assert_eq!((w.members.probe_rounds(), w.members.pushes().len()), (0, 0));
    let stored = w.stored().load_rollout().unwrap();
    assert_eq!(stored.rejected.unwrap().commit, bad);
    assert_eq!(stored.serving, None);

    let good = w.commit(&fleet("1"));
    d.reconcile(&good).await.unwrap();
    let worse = w.commit("kind: [still, not");
    // The good commit is stepped further; the rejection is saved alongside.
    assert_eq!(d.reconcile(&worse).await.unwrap(), Action::await_change());
    let stored = w.stored().load_rollout().unwrap();
    assert_eq!(stored.serving.as_deref(), Some(good.as_str()));
    assert_eq!(stored.rejected.unwrap().commit, worse);
}

#[tokio::test]
async fn every_reconcile_saves_the_bindings_and_the_rollout_state() {
    let w = World::new(&fleet("1"));
    let mut d = w.waiting_daemon();
    let head = w.head();
    d.reconcile(&head).await.unwrap();
    let store = w.stored();
    assert_eq!(store.load_rollout().unwrap(), d.state);
    let (commit, previous) = store.load_schedule().unwrap();
    assert_eq!(commit.as_deref(), Some(head.as_str()));
    let bindings = &previous[&"crp/app".parse().unwrap()].bindings;
    assert!(bindings
        .iter()
        .all(|b| b.state == crate::schedule::BindingState::Bound));
    // A restarted daemon carries on from the store: nothing to bind again. What members hold
    // may have changed while it was not watching, so its first step re-applies what it
    // delivered once (a no-op on members where nothing changed), then it settles.
    // The first one is gone first: it holds the state directory's lock. Another test's child
    // process forked in this very moment holds the lock's file description until it execs
    // (flock is per description), so the lock is awaited, briefly.
    drop(d);
    let mut again = w.reopened_waiting_daemon().await;
    assert_eq!(
        again.reconcile(&head).await.unwrap(),
        Action::requeue(Duration::ZERO)
    );
    assert_eq!(w.members.pushes().len(), 2);
    assert!(again
        .state
        .placements
        .values()
        .all(|p| p.clusters.values().all(|c| c.recheck.is_none())));
    assert_eq!(
        again.reconcile(&head).await.unwrap(),
        Action::await_change()
    );
    assert_eq!(w.members.pushes().len(), 2);
}

/// The loop running in the background, with its webhook sender and shutdown token.
struct Running {
    handle: tokio::task::JoinHandle<Result<()>>,
    webhook: tokio::sync::mpsc::UnboundedSender<()>,
    shutdown: CancellationToken,
}

fn start(d: Daemon<Fake>) -> Running {
    let (webhook, rx) = tokio::sync::mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(d.run(rx, shutdown.clone()));
    Running {
        handle,
        webhook,
        shutdown,
    }
}

/// Lets the paused clock run for `d` (the runtime advances it whenever every task waits).
async fn elapse(d: Duration) {
    tokio::time::sleep(d).await;
}

/// The looks (reconciles) a daemon took so far, as its metrics count them.
fn looks(metrics: &metrics::Metrics) -> usize {
    let text = metrics.render();
    text.lines()
        .find_map(|l| l.strip_prefix("gitfleet_reconcile_duration_seconds_count "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test(start_paused = true)]
async fn the_loop_steps_until_settled_then_looks_again_at_the_poll_or_on_a_webhook() {
    let w = World::new(&fleet("1"));
    let d = w.daemon(false);
    let metrics = d.metrics.clone();
    let running = start(d);
    elapse(Duration::from_secs(1)).await;
    // Bound, then settled: two looks at once.
    assert_eq!(looks(&metrics), 2);
    elapse(Duration::from_secs(28)).await;
    assert_eq!(looks(&metrics), 2, "nothing happens before the poll");
    elapse(Duration::from_secs(2)).await;
    assert_eq!(looks(&metrics), 3, "the poll at 30 s");
    // The members were probed once, at the first look: their heartbeat (60 s) has not passed.
    assert_eq!(w.members.probe_rounds(), 1);
    // The webhook: a look at once, and the poll restarts from it.
    running.webhook.send(()).unwrap();
    elapse(Duration::from_millis(1)).await;
    assert_eq!(looks(&metrics), 4);
    elapse(Duration::from_secs(29)).await;
    // At 60 s their probes fell due, between looks; the same answers asked for no look.
    assert_eq!((w.members.probe_rounds(), looks(&metrics)), (2, 4));
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();
    // One delivery per member, each on its own.
    let mut pushes = w.members.pushes();
    pushes.sort();
    assert_eq!(pushes, [["m1"], ["m2"], ["m3"]]);
}

#[tokio::test(start_paused = true)]
async fn a_change_reported_with_a_delivery_is_marked_after_it_in_the_same_look() {
    let w = World::new(&fleet("1"));
    // m2's first push reports, as it ends, that anything on m2 may have changed since.
    *w.members.report.lock().unwrap() = Some(watch::MemberChange {
        member: "m2".into(),
        placement_label: None,
        what: "watch of ConfigMap restarted".into(),
        cause: crate::rollout::state::RecheckCause::MayHaveChanged,
        deleted: false,
        object: None,
    });
    let d = w.daemon(false);
    let metrics = d.metrics.clone();
    let running = start(d);
    elapse(Duration::from_secs(1)).await;
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();
    // The push that came with the change does not clear its mark: m2 is checked again. And
    // the change waits for no other look: bound, then the deliveries and the change, then
    // the re-check's result.
    let mut pushes = w.members.pushes();
    pushes.sort();
    assert_eq!(pushes, [["m1"], ["m2"], ["m2"], ["m3"]]);
    assert_eq!(looks(&metrics), 3);
}

#[tokio::test(start_paused = true)]
async fn the_loop_polls_availability_sooner_first_then_every_500ms_and_stops_when_available() {
    let w = World::new(&fleet("1"));
    w.members.set_health(Some(BindingHealth::Pending));
    let running = start(w.daemon(false));
    let m1 = || {
        let pushes = w.members.pushes();
        pushes
            .iter()
            .filter(|p| p.contains(&"m1".to_string()))
            .count()
    };
    // Pushes to each member at 0 (bind), 0 (refresh: pending), then after the worker's pace
    // for the same refresh, doubling from 10 ms up to 500 ms: at 20, 60, 140, 300, 620 and
    // 1,120 ms.
    elapse(Duration::from_millis(1250)).await;
    assert_eq!(m1(), 8);
    w.members.set_health(Some(BindingHealth::Available));
    // At 1.62 s the refresh finds them available; then nothing more is pushed or probed.
    elapse(Duration::from_millis(500)).await;
    assert_eq!(m1(), 9);
    let probes = w.members.probes();
    elapse(Duration::from_secs(20)).await;
    assert_eq!((m1(), w.members.probes()), (9, probes));
    assert_eq!(w.members.pushes().len(), 9 * MEMBERS.len());
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_the_loop_at_once_with_the_state_saved() {
    let w = World::new(&fleet("1"));
    let running = start(w.daemon(false));
    elapse(Duration::from_secs(1)).await;
    running.shutdown.cancel();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(1), running.handle)
        .await
        .expect("the loop ends on shutdown")
        .unwrap()
        .unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(
        w.stored().load_rollout().unwrap().serving.as_deref(),
        Some(w.head().as_str())
    );
}

/// `--once` returns when the rollout settles (whether it gives up waiting for availability is
/// [`Action::keeps_once_going`]'s, tested in `timer_tests`).
#[tokio::test(start_paused = true)]
async fn once_ends_when_settled() {
    let w = World::new(&fleet("1"));
    let started = Instant::now();
    let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
    w.daemon(true)
        .run(rx, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        (started.elapsed(), w.members.probe_rounds()),
        (Duration::ZERO, 2)
    );
    assert_eq!(w.members.pushes().len(), 1);
}

/// A restart re-checks every binding. The members' confirmations (nothing changed while the
/// daemon was down) are absorbed together: one look once the last has come, or
/// [`CONFIRMATIONS_WAIT`] after the first, not one look per member that answered.
#[tokio::test(start_paused = true)]
async fn a_restart_absorbs_the_members_confirmations_together() {
    let w = World::new(&fleet_with("1", 3));
    let running = start(w.daemon(false));
    elapse(Duration::from_secs(1)).await;
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();
    let app: crate::model::PlacementKey = "crp/app".parse().unwrap();
    let settled = w.stored().load_rollout().unwrap();
    assert_eq!(settled.placements[&app].clusters.len(), 3);

    let confirmed_after = |delays: [u64; 3]| {
        let mut slow = w.members.slow.lock().unwrap();
        for (m, ms) in MEMBERS.iter().zip(delays) {
            slow.insert(m.to_string(), Duration::from_millis(ms));
        }
    };
    // As the status shows them (marks are not saved).
    let rechecks = |status: &Arc<Mutex<Status>>| {
        let status = status.lock().unwrap();
        let app = status
            .placements
            .iter()
            .find(|p| p.id == "crp/app")
            .unwrap();
        app.clusters
            .values()
            .filter(|c| c.recheck.is_some())
            .count()
    };
    // The members answer at 100, 300 and 600 ms: the look at the start hands out the
    // re-checks, the next absorbs all three once the last has come.
    confirmed_after([100, 300, 600]);
    // Reopened as `gitfleet run` opens it: work goes to the members' workers.
    let mut d = w.reopened_waiting_daemon().await;
    d.isolated = true;
    let (metrics, status) = (d.metrics.clone(), d.status.clone());
    let running = start(d);
    elapse(Duration::from_millis(550)).await;
    assert_eq!(
        (looks(&metrics), rechecks(&status)),
        (1, 3),
        "two confirmations wait"
    );
    elapse(Duration::from_millis(100)).await;
    assert_eq!(
        (looks(&metrics), rechecks(&status)),
        (2, 0),
        "the last one brings the look"
    );
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();

    // Spread out (100 ms, 1.5 s, 3 s): none waits longer than CONFIRMATIONS_WAIT.
    confirmed_after([100, 1500, 3000]);
    let mut d = w.reopened_waiting_daemon().await;
    d.isolated = true;
    let (metrics, status) = (d.metrics.clone(), d.status.clone());
    let running = start(d);
    elapse(CONFIRMATIONS_WAIT + Duration::from_millis(150)).await;
    assert_eq!(
        (looks(&metrics), rechecks(&status)),
        (2, 2),
        "m1's, a second after it came"
    );
    elapse(Duration::from_millis(500)).await;
    assert_eq!((looks(&metrics), rechecks(&status)), (2, 2), "m2's waits");
    elapse(Duration::from_secs(2)).await;
    assert_eq!((looks(&metrics), rechecks(&status)), (4, 0));
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();
}

/// [`fleet`]'s members under an External placement, and a staged update run whose only stage
/// waits for an approval before it starts (no verifier here: no tag approves it).
fn waiting_run_fleet() -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {name: app}\nspec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: app}]\n\
         \x20 policy: {placementType: PickAll}\n  strategy: {type: External}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterStagedUpdateStrategy\n\
         metadata: {name: gated}\nspec:\n  stages:\n  - name: all\n    labelSelector: {matchLabels: {env: prod}}\n\
         \x20   beforeStageTasks: [{type: Approval}]\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterStagedUpdateRun\n\
         metadata: {name: run-1}\nspec: {placementName: app, stagedRolloutStrategyName: gated, state: Run}\n",
    );
    for m in MEMBERS {
        yaml.push_str(&format!(
            "---\napiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\n\
             metadata: {{name: {m}, labels: {{env: prod}}}}\nspec: {{identity: {{name: a, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n"
        ));
    }
    yaml
}

/// How many looks a daemon on `content`, its members answering `health`, takes in ten minutes
/// once it has settled (or reached its wait): its wake-ups when nothing can change. Also its
/// pushes in the last five of them.
async fn looks_in_ten_idle_minutes(
    content: &str,
    health: BindingHealth,
) -> (usize, usize, Arc<Mutex<Status>>) {
    let w = World::new(content);
    w.members.set_health(Some(health));
    let d = w.daemon(false);
    let (metrics, status) = (d.metrics.clone(), d.status.clone());
    let running = start(d);
    elapse(Duration::from_secs(10)).await;
    let before = looks(&metrics);
    elapse(Duration::from_secs(300)).await;
    let pushes = w.members.pushes().len();
    elapse(Duration::from_secs(300)).await;
    let looks = looks(&metrics) - before;
    let pushes = w.members.pushes().len() - pushes;
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();
    (looks, pushes, status)
}

/// A daemon whose run waits for an approval, or whose workload never becomes available (the
/// member's worker re-reads it, less and less often), wakes no more often than one with
/// nothing to do: at the poll (a tag, a commit and a member's change are events of their own).
#[tokio::test(start_paused = true)]
async fn a_waiting_run_or_a_workload_never_available_wakes_the_daemon_no_more_than_idle() {
    let (idle, _, _) = looks_in_ten_idle_minutes(&fleet("1"), BindingHealth::Available).await;
    assert!(
        idle <= 25,
        "an idle daemon looks at its 30 s poll: {idle} looks"
    );
    let (waiting, _, status) =
        looks_in_ten_idle_minutes(&waiting_run_fleet(), BindingHealth::Available).await;
    let waits_for = status.lock().unwrap().runs.waiting.clone();
    assert_eq!(waits_for.len(), 1, "the run waits for its approval");
    assert!(
        waiting <= idle,
        "{waiting} looks while a run waits, {idle} idle"
    );
    let (pending, rereads, _) =
        looks_in_ten_idle_minutes(&fleet("1"), BindingHealth::Pending).await;
    assert!(
        pending <= idle,
        "{pending} looks while a workload is not available, {idle} idle"
    );
    // Every 15 s per member by then.
    assert!(rereads <= 3 * 21, "{rereads} re-reads in five minutes");
}

/// Whether the status (inventory) and the metric show `member` healthy.
fn shown_healthy(
    status: &Arc<Mutex<Status>>,
    metrics: &metrics::Metrics,
    member: &str,
) -> (bool, bool) {
    let inventory = status.lock().unwrap().inventory.clone().unwrap();
    let listed = inventory
        .clusters
        .iter()
        .find(|c| c.name == member)
        .unwrap()
        .healthy;
    let metric = metrics
        .render()
        .contains(&format!("gitfleet_member_healthy{{member=\"{member}\"}} 1"));
    (listed, metric)
}

/// A push that cannot reach a member marks it unhealthy at once (status, metric) and has it
/// probed at once, not at its next heartbeat (60 s here); a probe that reaches it brings it
/// back, and its work goes on.
#[tokio::test(start_paused = true)]
async fn a_member_a_push_cannot_reach_is_unhealthy_at_once_until_a_probe_reaches_it() {
    let w = World::new(&fleet_with("1", 3));
    let d = w.daemon(false);
    let (metrics, status) = (d.metrics.clone(), d.status.clone());
    let running = start(d);
    elapse(Duration::from_secs(1)).await;
    assert_eq!(shown_healthy(&status, &metrics, "m3"), (true, true));
    let probes = w.members.probes();
    // m3 goes down: its pushes and its probes fail.
    w.members.unreachable.lock().unwrap().insert("m3".into());
    w.members.down.lock().unwrap().insert("m3".into());
    w.commit(&fleet_with("2", 3));
    running.webhook.send(()).unwrap();
    elapse(Duration::from_secs(1)).await;
    assert_eq!(shown_healthy(&status, &metrics, "m3"), (false, false));
    assert_eq!(shown_healthy(&status, &metrics, "m1"), (true, true));
    assert_eq!(w.members.probes(), probes + 1, "m3 was probed at once");
    // Back: its next probe (after RETRY_UNHEALTHY) reaches it, and v2 reaches it.
    w.members.unreachable.lock().unwrap().clear();
    w.members.down.lock().unwrap().clear();
    let pushes = w.members.pushes().len();
    elapse(probes::RETRY_UNHEALTHY + Duration::from_secs(1)).await;
    assert_eq!(shown_healthy(&status, &metrics, "m3"), (true, true));
    let m3_pushed = w.members.pushes()[pushes..]
        .iter()
        .any(|p| p.contains(&"m3".to_string()));
    assert!(m3_pushed, "m3 gets its work once healthy");
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();
}

/// A delivery that runs past [`workers::SLOW_DELIVERY`] has its member probed at once: a
/// member that answers nothing in time is unhealthy long before its next heartbeat.
#[tokio::test(start_paused = true)]
async fn a_member_whose_push_runs_long_is_probed_at_once() {
    let w = World::new(&fleet_with("1", 3));
    let d = w.daemon(false);
    let (metrics, status) = (d.metrics.clone(), d.status.clone());
    let running = start(d);
    elapse(Duration::from_secs(1)).await;
    w.members
        .slow
        .lock()
        .unwrap()
        .insert("m3".into(), Duration::from_secs(600));
    w.members.down.lock().unwrap().insert("m3".into());
    w.commit(&fleet_with("2", 3));
    running.webhook.send(()).unwrap();
    elapse(workers::SLOW_DELIVERY - Duration::from_secs(1)).await;
    assert_eq!(shown_healthy(&status, &metrics, "m3"), (true, true));
    elapse(Duration::from_secs(2)).await;
    assert_eq!(shown_healthy(&status, &metrics, "m3"), (false, false));
    running.shutdown.cancel();
    running.handle.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_served_commits_likely_mistakes_are_in_the_status_and_go_with_them() {
    let typo = fleet("1").replace(
        "kind: Namespace, name: app}",
        "kind: Namespace, name: apps}",
    );
    let w = World::new(&typo);
    let mut d = w.waiting_daemon();
    d.reconcile(&w.head()).await.unwrap();
    let warnings = d.status.lock().unwrap().warnings.clone();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("ClusterResourcePlacement/app: spec.resourceSelectors[0].name: selects nothing: no Namespace named \"apps\" in the commit (did you mean \"app\"?)"),
        "{warnings:?}"
    );
    let fixed = w.commit(&fleet("1"));
    d.reconcile(&fixed).await.unwrap();
    assert_eq!(d.status.lock().unwrap().warnings, Vec::<String>::new());
}
