//! One worker per member (`gitfleet run`): the task that owns the member's push queue, so that
//! a member that is slow, down or failing delays only its own work.
//!
//! The reconcile hands each member's work to its worker ([`Workers::dispatch`]) and returns at
//! once; the worker pushes through the [`Deliverer`] (with push's own retries and backoff, see
//! [`crate::members::retry`]) and reports every finished delivery back into the daemon's loop
//! ([`Delivered`]), whose next reconcile absorbs it. A worker with nothing queued, paced or
//! awaited ends, and the member's next work starts another: a fleet at rest holds a small
//! mailbox per member, not a task. What a worker holds:
//!
//! - a queue with the latest work per placement ([`Queue`]): work for a placement replaces the
//!   queued work for it (a new commit supersedes one not yet pushed); work in flight finishes;
//! - a pace per placement: the same work is not redone sooner than [`availability_pause`] (from
//!   [`AVAILABILITY_FIRST_POLL`], doubling up to [`AVAILABILITY_POLL`]) after a delivery that
//!   found the objects not available yet, nor sooner than [`RETRY_FAILED`] after
//!   a failure (the step asks for it again at once; the pace spares the member). New work (an
//!   other revision, a removal) is never held by the pace of the old.
//!
//! The daemon remembers what it handed out and not yet heard back about ([`Workers`]), so that
//! the steps taken meanwhile (which ask for the same work again: the state changes only when the
//! result is absorbed) do not queue it twice. Nothing here is saved: work in flight at a crash
//! is asked for again by the first step after the restart and redone (server-side apply is
//! idempotent).
//!
//! It must not decide what is pushed (the rollout core does) nor how (push does).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Deliverer, AVAILABILITY_FIRST_POLL, AVAILABILITY_POLL};
use crate::model::PlacementKey;
use crate::rollout::{Action, BindingHealth, Outcome, RolloutState, Work};

/// The pause before the same work is tried again on a member after it failed (push has already
/// retried within its budget).
pub const RETRY_FAILED: Duration = Duration::from_secs(5);

/// A delivery still running after this long (`--member-timeout`'s default: as long as a probe
/// may take) reports its member as slow, so that the daemon probes it at once rather than at
/// its next heartbeat.
pub const SLOW_DELIVERY: Duration = Duration::from_secs(10);

/// What makes two pieces of work for the same placement and cluster the same: the revision
/// applied (and whether only to read availability again), or a removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fingerprint {
    Apply {
        resource_index: u64,
        rendered: crate::model::SharedText,
        refresh: bool,
    },
    Remove,
}

impl Fingerprint {
    pub fn of(work: &Work) -> Fingerprint {
        match &work.action {
            Action::Apply {
                revision, refresh, ..
            } => Fingerprint::Apply {
                resource_index: revision.resource_index,
                rendered: revision.rendered.clone(),
                refresh: *refresh,
            },
            Action::Remove { .. } => Fingerprint::Remove,
        }
    }
}

/// One piece of work for a member's worker, with the commit it is pushed for (shared by the
/// jobs of a dispatch: a first rollout hands out one per binding).
#[derive(Debug, Clone)]
pub struct Job {
    pub commit: Arc<str>,
    pub work: Work,
}

/// One delivery to one member, finished: the commit it was for and each work's outcome.
#[derive(Debug)]
pub struct Delivered {
    pub member: String,
    pub commit: String,
    pub results: Vec<(Work, Outcome)>,
    /// Why the member could not be reached or read at all, if so.
    pub unreachable: Option<String>,
}

impl Delivered {
    /// Whether every result only confirms what `state` already holds: a re-read (refresh) of
    /// the revision the cluster runs, whose health (and work status) is the one recorded and
    /// ready. Absorbing
    /// such results clears re-checks and nothing else the rollout decides on, so the loop may
    /// absorb them later, with others (a restart or resync confirms every binding this way).
    pub fn only_confirms(&self, state: &RolloutState) -> bool {
        self.results.iter().all(|(w, outcome)| {
            let Action::Apply {
                refresh: true,
                revision,
                ..
            } = &w.action
            else {
                return false;
            };
            let Outcome::Done(health, observed) = outcome else {
                return false;
            };
            let ready = health.is_ready();
            let recorded = state
                .placements
                .get(&w.placement)
                .and_then(|ps| ps.clusters.get(&w.cluster));
            ready
                && recorded.is_some_and(|c| {
                    c.health == *health
                        && c.revision.as_ref() == Some(revision)
                        && c.details.work_status.as_deref() == observed.work_status.as_ref()
                })
        })
    }
}

/// A member's queue: the latest job per placement and the pace of each placement. Pure (time
/// is a parameter), so that the worker's decisions are tested without a member.
#[derive(Debug, Default)]
pub struct Queue {
    waiting: BTreeMap<PlacementKey, Job>,
    /// Not before this instant, for work with this fingerprint.
    paced: BTreeMap<PlacementKey, (Fingerprint, Instant)>,
    /// Answers "not available yet" in a row, by placement: what the next re-read waits.
    pending: BTreeMap<PlacementKey, u32>,
    /// The last "not available yet" reported to the daemon, by placement: a re-read that finds
    /// the same is not reported (see [`Queue::news`]).
    reported: BTreeMap<PlacementKey, Outcome>,
}

/// How long a re-read of a cluster waits after its `n`th answer "not available yet" in a row
/// (`n` from 1): [`AVAILABILITY_FIRST_POLL`], twice as long each time, at most
/// [`AVAILABILITY_POLL`]. Most workloads become available within moments of an apply (a
/// ConfigMap, a Deployment whose pods were ready before), and the next batch of a rollout
/// waits for that answer; slow ones are read every half second. One still not available after
/// [`SLOW_AVAILABILITY_AFTER`] re-reads (about half a minute) is read less and less often, up to
/// every [`SLOW_AVAILABILITY_POLL`]: a workload broken for good costs its member a read now and
/// then, not two a second.
pub fn availability_pause(n: u32) -> Duration {
    if n > SLOW_AVAILABILITY_AFTER {
        let doubled =
            Duration::from_secs(1).saturating_mul(1 << (n - SLOW_AVAILABILITY_AFTER - 1).min(16));
        return doubled.min(SLOW_AVAILABILITY_POLL);
    }
    let doubled = AVAILABILITY_FIRST_POLL.saturating_mul(1 << n.saturating_sub(1).min(16));
    doubled.min(AVAILABILITY_POLL)
}

/// Re-reads at [`AVAILABILITY_POLL`] pace before a cluster counts as slow to become available.
pub const SLOW_AVAILABILITY_AFTER: u32 = 64;

/// The longest pause between re-reads of a cluster slow to become available: KubeFleet's
/// `clusterUpdatingWaitTime`, how often its staged runs look at clusters that are updating.
pub const SLOW_AVAILABILITY_POLL: Duration = Duration::from_secs(15);

impl Queue {
    /// Queues `job`, replacing any queued job of its placement.
    pub fn put(&mut self, job: Job) {
        self.waiting.insert(job.work.placement.clone(), job);
    }

    fn ready_at(&self, job: &Job) -> Option<Instant> {
        match self.paced.get(&job.work.placement) {
            Some((f, at)) if *f == Fingerprint::of(&job.work) => Some(*at),
            _ => None,
        }
    }

    /// The jobs that may go now, all of one commit (the commit of the first ready placement,
    /// in placement order): one delivery. `None` when nothing may go yet.
    pub fn take_ready(&mut self, now: Instant) -> Option<(String, Vec<Work>)> {
        let ready = |q: &Queue, j: &Job| q.ready_at(j).is_none_or(|at| at <= now);
        let commit = self
            .waiting
            .values()
            .find(|j| ready(self, j))?
            .commit
            .to_string();
        let keys: Vec<PlacementKey> = self
            .waiting
            .iter()
            .filter(|(_, j)| *j.commit == *commit && ready(self, j))
            .map(|(k, _)| k.clone())
            .collect();
        let work = keys
            .iter()
            .filter_map(|k| self.waiting.remove(k))
            .map(|j| j.work)
            .collect();
        self.release_emptied();
        Some((commit, work))
    }

    /// Frees the maps left empty. A `BTreeMap` emptied by removals keeps its root node (11
    /// entries' room: about 4 KB with jobs in it), and a member's queue is empty most of the
    /// time: one such node per member and map is what an idle fleet would hold for nothing.
    fn release_emptied(&mut self) {
        fn release<K, V>(map: &mut BTreeMap<K, V>) {
            if map.is_empty() {
                *map = BTreeMap::new();
            }
        }
        release(&mut self.waiting);
        release(&mut self.paced);
        release(&mut self.pending);
        release(&mut self.reported);
    }

    /// When the earliest queued job held by its pace may go (`None`: none is held).
    pub fn next_ready_at(&self) -> Option<Instant> {
        self.waiting.values().filter_map(|j| self.ready_at(j)).min()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Nothing queued and nothing remembered of past deliveries (paces, answers reported): a
    /// worker whose queue this is has nothing left to do or to know.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty()
            && self.paced.is_empty()
            && self.pending.is_empty()
            && self.reported.is_empty()
    }

    /// What of a finished delivery of `commit` is news for the daemon. A re-read that finds a
    /// cluster not available yet, exactly as last reported, is not: the worker keeps the work
    /// queued and reads again after its pace, and the daemon looks only when an answer
    /// changes (available, failed, other objects or reasons). Call after [`Queue::finished`].
    pub fn news(&mut self, commit: &str, results: Vec<(Work, Outcome)>) -> Vec<(Work, Outcome)> {
        let mut news = Vec::with_capacity(results.len());
        for (work, outcome) in results {
            let rereads = matches!(work.action, Action::Apply { refresh: true, .. });
            let pending = matches!(outcome, Outcome::Done(BindingHealth::Pending, _));
            if !(rereads && pending) {
                self.reported.remove(&work.placement);
                news.push((work, outcome));
                continue;
            }
            if self.reported.get(&work.placement) != Some(&outcome) {
                self.reported
                    .insert(work.placement.clone(), outcome.clone());
                news.push((work, outcome));
                continue;
            }
            // Newer work for the placement, queued meanwhile, goes instead.
            if !self.waiting.contains_key(&work.placement) {
                self.put(Job {
                    commit: commit.into(),
                    work,
                });
            }
        }
        self.release_emptied();
        news
    }

    /// Paces the placements of a finished delivery (at `now`) by how each ended.
    pub fn finished(&mut self, results: &[(Work, Outcome)], now: Instant) {
        for (work, outcome) in results {
            let pause = match outcome {
                Outcome::Failed(_) => Some(RETRY_FAILED),
                Outcome::Done(BindingHealth::Pending, _) => {
                    let n = self.pending.entry(work.placement.clone()).or_default();
                    *n += 1;
                    Some(availability_pause(*n))
                }
                Outcome::Done(..) => {
                    self.pending.remove(&work.placement);
                    None
                }
            };
            match pause {
                Some(p) => {
                    self.paced
                        .insert(work.placement.clone(), (Fingerprint::of(work), now + p));
                }
                None => {
                    self.paced.remove(&work.placement);
                }
            }
        }
        self.release_emptied();
    }
}

/// A member's jobs handed out and not yet taken by its worker, and whether a worker runs:
/// one lock over both, so that a worker ending and new jobs arriving never miss each other
/// (they find a worker running, or start one).
#[derive(Default)]
struct Mailbox {
    post: Mutex<Post>,
    arrived: Notify,
}

#[derive(Default)]
struct Post {
    jobs: Vec<Job>,
    running: bool,
}

impl Mailbox {
    /// Leaves `jobs` for the worker. Whether no worker runs, so that the caller starts one
    /// (from now on counted as running).
    fn post(&self, jobs: Vec<Job>) -> bool {
        let mut post = self
            .post
            .lock()
            .expect("a mailbox's lock is never poisoned");
        post.jobs.extend(jobs);
        let start = !post.running;
        post.running = true;
        drop(post);
        if !start {
            self.arrived.notify_one();
        }
        start
    }

    /// The jobs left since the last look.
    fn take(&self) -> Vec<Job> {
        let mut post = self
            .post
            .lock()
            .expect("a mailbox's lock is never poisoned");
        std::mem::take(&mut post.jobs)
    }

    /// Marks the worker ended unless jobs arrived meanwhile; whether it ended.
    fn end_if_empty(&self) -> bool {
        let mut post = self
            .post
            .lock()
            .expect("a mailbox's lock is never poisoned");
        if post.jobs.is_empty() {
            post.running = false;
            // Its room, which the next jobs need not share with an idle fleet.
            post.jobs = Vec::new();
        }
        !post.running
    }

    #[cfg(test)]
    fn is_running(&self) -> bool {
        self.post
            .lock()
            .expect("a mailbox's lock is never poisoned")
            .running
    }
}

/// The workers of the members, and what the daemon handed them and has not heard back about.
pub struct Workers<D: Deliverer + 'static> {
    deliverer: Arc<D>,
    /// Each member's mailbox, kept while its worker comes and goes.
    mailboxes: BTreeMap<String, Arc<Mailbox>>,
    /// The latest work handed out per member and placement and not answered yet, with its
    /// fingerprint: what is in flight (not handed out again), and what tells the daemon's own
    /// deletions (prunes, removals) from a deletion by someone else. One map for both: in a
    /// first rollout every binding is in it at once, so only the action is kept (its member
    /// and placement are the keys).
    handed: BTreeMap<String, BTreeMap<PlacementKey, (Fingerprint, Action)>>,
    /// The entries of `handed`.
    outstanding: usize,
    results: UnboundedSender<Delivered>,
    reported: UnboundedReceiver<Delivered>,
    /// Members whose delivery has run past [`SLOW_DELIVERY`]; the loop takes the receiver.
    slow: UnboundedSender<String>,
    slow_reported: Option<UnboundedReceiver<String>>,
}

impl<D: Deliverer + 'static> Workers<D> {
    /// Workers that push through `deliverer`.
    pub fn new(deliverer: Arc<D>) -> Workers<D> {
        let (results, reported) = unbounded_channel();
        let (slow, slow_reported) = unbounded_channel();
        Workers {
            slow,
            slow_reported: Some(slow_reported),
            deliverer,
            mailboxes: BTreeMap::new(),
            handed: BTreeMap::new(),
            outstanding: 0,
            results,
            reported,
        }
    }

    /// The next finished delivery of any member (for the loop, which absorbs it).
    pub async fn delivered(&mut self) -> Delivered {
        match self.reported.recv().await {
            Some(d) => d,
            // Never: the sender lives in `self`.
            None => std::future::pending().await,
        }
    }

    /// Where the members whose delivery runs past [`SLOW_DELIVERY`] are named (for the loop,
    /// which has them probed); taken once.
    pub fn take_slow(&mut self) -> UnboundedReceiver<String> {
        self.slow_reported
            .take()
            .expect("the loop runs once: it takes the slow members' receiver")
    }

    /// A finished delivery, if one is waiting.
    pub fn try_delivered(&mut self) -> Option<Delivered> {
        self.reported.try_recv().ok()
    }

    /// Hands each piece of `work` to its member's worker (started on first use), unless the
    /// same work is already queued or in flight there. Returns how many were handed out.
    /// `contexts` maps member names to kubeconfig contexts.
    pub fn dispatch(
        &mut self,
        work: Vec<Work>,
        commit: &str,
        contexts: &BTreeMap<String, String>,
    ) -> usize {
        // One message per member with all of its new jobs: a worker already running on the
        // other thread would otherwise start a delivery with the first job it sees and push
        // the member again for the rest (work comes placement by placement, so each member's
        // jobs are spread over the whole list; at a restart that was two confirmations of
        // every member).
        let mut batches: BTreeMap<String, Vec<Job>> = BTreeMap::new();
        let commit: Arc<str> = commit.into();
        for w in work {
            let fingerprint = Fingerprint::of(&w);
            if !self.handed.contains_key(&w.cluster) {
                self.handed.insert(w.cluster.clone(), BTreeMap::new());
            }
            let member = self.handed.get_mut(&w.cluster).expect("inserted above");
            if member
                .get(&w.placement)
                .is_some_and(|(f, _)| *f == fingerprint)
            {
                continue;
            }
            if member
                .insert(w.placement.clone(), (fingerprint, w.action.clone()))
                .is_none()
            {
                self.outstanding += 1;
            }
            batches.entry(w.cluster.clone()).or_default().push(Job {
                commit: commit.clone(),
                work: w,
            });
        }
        let mut sent = 0;
        for (member, jobs) in batches {
            sent += jobs.len();
            let mailbox = self.mailboxes.entry(member.clone()).or_default();
            if mailbox.post(jobs) {
                let context = contexts
                    .get(&member)
                    .map(|c| BTreeMap::from([(member.clone(), c.clone())]))
                    .unwrap_or_default();
                tokio::spawn(run(
                    member,
                    context,
                    self.deliverer.clone(),
                    mailbox.clone(),
                    (self.results.clone(), self.slow.clone()),
                ));
            }
        }
        sent
    }

    /// Members whose worker is running now.
    #[cfg(test)]
    fn running(&self) -> usize {
        self.mailboxes.values().filter(|m| m.is_running()).count()
    }

    /// Forgets what `delivered` answers (work handed out later for the same placement, not yet
    /// answered, stays outstanding).
    pub fn settled(&mut self, delivered: &Delivered) {
        for (w, _) in &delivered.results {
            let fingerprint = Fingerprint::of(w);
            self.forget_handed(w, |f| *f == fingerprint);
        }
    }

    /// Forgets the work handed out for `w`'s member and placement, if `which` says it is the
    /// one meant.
    fn forget_handed(&mut self, w: &Work, which: impl Fn(&Fingerprint) -> bool) {
        let Some(m) = self.handed.get_mut(&w.cluster) else {
            return;
        };
        if !m.get(&w.placement).is_some_and(|(f, _)| which(f)) {
            return;
        }
        m.remove(&w.placement);
        self.outstanding -= 1;
        if m.is_empty() {
            self.handed.remove(&w.cluster);
        }
    }

    /// The work handed to `member` and not answered yet: each placement's action.
    pub fn handed(&self, member: &str) -> impl Iterator<Item = (&PlacementKey, &Action)> {
        (self.handed.get(member).into_iter()).flat_map(|m| m.iter().map(|(p, (_, a))| (p, a)))
    }

    /// The pieces of work handed out and not answered yet.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }
}

/// One member's worker: takes jobs as they come, delivers what may go, reports each delivery.
/// Ends when it has nothing left to do or know ([`Queue::is_idle`]) and no job arrived, or
/// when the daemon stops taking reports.
async fn run<D: Deliverer>(
    member: String,
    contexts: BTreeMap<String, String>,
    deliverer: Arc<D>,
    mailbox: Arc<Mailbox>,
    (reports, slow): (UnboundedSender<Delivered>, UnboundedSender<String>),
) {
    let mut queue = Queue::default();
    loop {
        mailbox.take().into_iter().for_each(|j| queue.put(j));
        if let Some((commit, work)) = queue.take_ready(Instant::now()) {
            let mut delivery = {
                // Boxed: a member's delivery is a large future, and only a delivering worker
                // needs its room.
                let mut delivering = Box::pin(deliverer.deliver(work, &commit, &contexts));
                tokio::select! {
                    d = &mut delivering => d,
                    () = tokio::time::sleep(SLOW_DELIVERY) => {
                        let _ = slow.send(member.clone());
                        delivering.await
                    }
                }
            };
            queue.finished(&delivery.results, Instant::now());
            let results = queue.news(&commit, delivery.results);
            let unreachable = delivery.unreachable.remove(&member);
            if results.is_empty() && unreachable.is_none() {
                continue;
            }
            let delivered = Delivered {
                unreachable,
                member: member.clone(),
                commit,
                results,
            };
            if reports.send(delivered).is_err() {
                return;
            }
            continue;
        }
        if queue.is_idle() && mailbox.end_if_empty() {
            return;
        }
        let wake = queue.next_ready_at();
        tokio::select! {
            () = mailbox.arrived.notified() => {}
            () = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {}
            () = reports.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::{ApplyStrategy, Revision};

    fn key(name: &str) -> PlacementKey {
        format!("crp/{name}").parse().unwrap()
    }

    fn apply(placement: &str, cluster: &str, index: u64, refresh: bool) -> Work {
        Work {
            placement: key(placement),
            cluster: cluster.into(),
            action: Action::Apply {
                manifests: Default::default(),
                revision: Revision {
                    resource_index: index,
                    rendered: format!("r{index}").into(),
                },
                binds: false,
                refresh,
                strategy: ApplyStrategy::default(),
                resource_snapshot: "".into(),
                delivered_by: None,
            },
        }
    }

    fn job(commit: &str, work: Work) -> Job {
        Job {
            commit: commit.into(),
            work,
        }
    }

    fn placements(work: &[Work]) -> Vec<String> {
        work.iter().map(|w| w.placement.to_string()).collect()
    }

    #[test]
    fn a_cluster_not_available_yet_is_read_again_sooner_first_then_every_half_second() {
        let pauses: Vec<u64> = (1..=8)
            .map(|n| availability_pause(n).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 500, 500]);
        assert_eq!(
            availability_pause(SLOW_AVAILABILITY_AFTER),
            AVAILABILITY_POLL
        );
        let slow: Vec<u64> = (1..=6)
            .map(|n| availability_pause(SLOW_AVAILABILITY_AFTER + n).as_secs())
            .collect();
        assert_eq!(slow, [1, 2, 4, 8, 15, 15]);
        assert_eq!(availability_pause(u32::MAX), SLOW_AVAILABILITY_POLL);
    }

    /// A re-read that finds a cluster not available yet, as last reported, is kept by the
    /// worker and read again; the daemon hears of the first answer and of every change.
    #[test]
    fn a_re_read_finding_what_was_reported_is_not_news_and_is_read_again() {
        let now = Instant::now();
        let mut q = Queue::default();
        let pending = |why: &str| {
            Outcome::Done(
                BindingHealth::Pending,
                crate::rollout::Observed {
                    diffs: vec![],
                    not_available: vec![why.to_string()],
                    work_status: None,
                },
            )
        };
        // One re-read of placement a on m1: (results news, whether a is queued again).
        let deliver = |q: &mut Queue, outcome: Outcome| {
            let results = vec![(apply("a", "m1", 1, true), outcome)];
            q.finished(&results, now);
            let news = q.news("c1", results);
            (news.len(), q.waiting.contains_key(&key("a")))
        };
        assert_eq!(
            deliver(&mut q, pending("0/1 ready")),
            (1, false),
            "the first answer"
        );
        assert_eq!(
            deliver(&mut q, pending("0/1 ready")),
            (0, true),
            "the same: read again"
        );
        q.take_ready(now + SLOW_AVAILABILITY_POLL).unwrap();
        assert_eq!(
            deliver(&mut q, pending("0/1 ready, pulling")),
            (1, false),
            "a change"
        );
        let done = Outcome::Done(BindingHealth::Available, Default::default());
        assert_eq!(deliver(&mut q, done), (1, false), "available");
        // Newer work queued meanwhile is not replaced by the re-read.
        assert_eq!(deliver(&mut q, pending("0/1 ready")), (1, false));
        q.put(job("c2", apply("a", "m1", 2, false)));
        assert_eq!(deliver(&mut q, pending("0/1 ready")), (0, true));
        let (commit, work) = q.take_ready(now + SLOW_AVAILABILITY_POLL).unwrap();
        assert_eq!(
            (commit.as_str(), placements(&work)),
            ("c2", vec!["crp/a".to_string()])
        );
    }

    #[test]
    fn only_a_re_read_of_a_ready_binding_as_recorded_is_a_confirmation() {
        use crate::rollout::{ClusterState, Observed, PlacementState};
        let ready = BindingHealth::Available;
        let recorded = |health: BindingHealth, index: u64| ClusterState {
            revision: Some(Revision {
                resource_index: index,
                rendered: format!("r{index}").into(),
            }),
            recheck: Some("the daemon started".into()),
            drift: false,
            ..ClusterState::with_health(health)
        };
        let mut state = RolloutState::default();
        let mut ps = PlacementState::default();
        ps.clusters.insert("m1".into(), recorded(ready, 1));
        ps.clusters
            .insert("m2".into(), recorded(BindingHealth::Pending, 1));
        state.placements.insert(key("a"), Arc::new(ps));
        let delivered = |w: Work, o: Outcome| Delivered {
            member: w.cluster.clone(),
            commit: "c1".into(),
            results: vec![(w, o)],
            unreachable: None,
        };
        let done = |h: BindingHealth| Outcome::Done(h, Observed::default());
        let confirms = |w: Work, o: Outcome| delivered(w, o).only_confirms(&state);
        assert!(confirms(apply("a", "m1", 1, true), done(ready)));
        // A push of new work, a failure, a change of health, another revision, an unknown
        // binding, or a binding that was not ready (a rollout waits on it): news.
        assert!(!confirms(apply("a", "m1", 1, false), done(ready)));
        assert!(!confirms(
            apply("a", "m1", 1, true),
            Outcome::Failed("x".into())
        ));
        assert!(!confirms(
            apply("a", "m1", 1, true),
            done(BindingHealth::Pending)
        ));
        assert!(!confirms(apply("a", "m1", 2, true), done(ready)));
        assert!(!confirms(apply("a", "m3", 1, true), done(ready)));
        assert!(!confirms(apply("a", "m2", 1, true), done(ready)));
        assert!(!confirms(
            apply("a", "m2", 1, true),
            done(BindingHealth::Pending)
        ));
        // A re-read whose work status (an OCM work's feedback) is not the one recorded.
        let read = Observed {
            work_status: Some(crate::feedback::WorkStatus::default()),
            ..Observed::default()
        };
        assert!(!confirms(
            apply("a", "m1", 1, true),
            Outcome::Done(ready, read)
        ));
        let mut both = delivered(apply("a", "m1", 1, true), done(ready));
        both.results.push((apply("a", "m2", 1, true), done(ready)));
        assert!(!both.only_confirms(&state));
    }

    #[test]
    fn the_latest_work_per_placement_wins_and_one_delivery_carries_one_commit() {
        let now = Instant::now();
        let mut q = Queue::default();
        q.put(job("c1", apply("a", "m1", 1, false)));
        q.put(job("c1", apply("b", "m1", 1, false)));
        q.put(job("c2", apply("a", "m1", 2, false)));
        let (commit, work) = q.take_ready(now).unwrap();
        // a's c1 work was replaced by c2's; a comes first, so c2 goes first, alone.
        assert_eq!(
            (commit.as_str(), placements(&work)),
            ("c2", vec!["crp/a".into()])
        );
        let (commit, work) = q.take_ready(now).unwrap();
        assert_eq!(
            (commit.as_str(), placements(&work)),
            ("c1", vec!["crp/b".into()])
        );
        assert!(q.take_ready(now).is_none() && q.is_empty());
    }

    #[test]
    fn the_same_work_waits_after_a_failure_and_after_a_pending_answer_but_new_work_does_not() {
        let now = Instant::now();
        let mut q = Queue::default();
        let failed = (apply("a", "m1", 1, false), Outcome::Failed("503".into()));
        let pending = (
            apply("b", "m1", 1, true),
            Outcome::Done(BindingHealth::Pending, Default::default()),
        );
        q.finished(&[failed, pending], now);
        q.put(job("c1", apply("a", "m1", 1, false)));
        q.put(job("c1", apply("b", "m1", 1, true)));
        assert!(q.take_ready(now).is_none());
        assert_eq!(q.next_ready_at(), Some(now + AVAILABILITY_FIRST_POLL));
        let (_, work) = q.take_ready(now + AVAILABILITY_FIRST_POLL).unwrap();
        assert_eq!(placements(&work), ["crp/b"]);
        assert_eq!(q.next_ready_at(), Some(now + RETRY_FAILED));
        // Not available again: the next re-read waits twice as long.
        let pending = (
            apply("b", "m1", 1, true),
            Outcome::Done(BindingHealth::Pending, Default::default()),
        );
        q.finished(std::slice::from_ref(&pending), now);
        q.put(job("c1", apply("b", "m1", 1, true)));
        assert_eq!(q.next_ready_at(), Some(now + 2 * AVAILABILITY_FIRST_POLL));
        assert!(q.take_ready(now + 2 * AVAILABILITY_FIRST_POLL).is_some());
        // A new revision for a is not held by the old one's failure.
        q.put(job("c2", apply("a", "m1", 2, false)));
        let (commit, work) = q.take_ready(now).unwrap();
        assert_eq!(
            (commit.as_str(), placements(&work)),
            ("c2", vec!["crp/a".into()])
        );
        // Success clears the pace.
        let done = (
            apply("a", "m1", 1, false),
            Outcome::Done(BindingHealth::Available, Default::default()),
        );
        q.finished(&[done], now);
        q.put(job("c1", apply("a", "m1", 1, false)));
        assert!(q.take_ready(now).is_some());
    }

    /// Members whose pushes take as long as they are told, and what each was given.
    #[derive(Default)]
    struct Slow {
        delay: Mutex<BTreeMap<String, Duration>>,
        pushed: Mutex<Vec<(String, Vec<String>)>>,
    }

    impl Deliverer for Slow {
        async fn probe(
            &self,
            _: &[crate::members::inventory::Member],
        ) -> anyhow::Result<crate::schedule::Inventory> {
            unreachable!("workers do not probe")
        }

        async fn deliver(
            &self,
            work: Vec<Work>,
            _commit: &str,
            contexts: &BTreeMap<String, String>,
        ) -> crate::daemon::Delivery {
            let member = work[0].cluster.clone();
            assert_eq!(contexts.keys().collect::<Vec<_>>(), [&member]);
            let delay = self.delay.lock().unwrap().get(&member).copied();
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            self.pushed
                .lock()
                .unwrap()
                .push((member, placements(&work)));
            work.into_iter()
                .map(|w| {
                    let o = Outcome::Done(BindingHealth::Available, Default::default());
                    (w, o)
                })
                .collect::<Vec<_>>()
                .into()
        }
    }

    fn contexts() -> BTreeMap<String, String> {
        ["m1", "m2", "m3"]
            .map(|m| (m.to_string(), format!("ctx-{m}")))
            .into()
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_member_delays_only_itself_and_work_in_flight_is_not_handed_out_twice() {
        let members = Arc::new(Slow::default());
        members
            .delay
            .lock()
            .unwrap()
            .insert("m1".into(), Duration::from_secs(30));
        let mut workers = Workers::new(members.clone());
        let started = Instant::now();
        let work = ["m1", "m2", "m3"].map(|m| apply("a", m, 1, false)).to_vec();
        assert_eq!(workers.dispatch(work.clone(), "c1", &contexts()), 3);
        // The steps taken meanwhile ask for the same work: it is not queued again.
        assert_eq!(workers.dispatch(work, "c1", &contexts()), 0);
        assert_eq!(workers.outstanding(), 3);
        let mut order = Vec::new();
        for _ in 0..2 {
            let d = workers.delivered().await;
            workers.settled(&d);
            order.push(d.member);
        }
        order.sort();
        assert_eq!(order, ["m2", "m3"]);
        // The fast members answered at once on the paused clock: m1's 30 s did not hold them.
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(workers.outstanding(), 1);
        // New work for m2 goes through while m1 is still pushing.
        workers.dispatch(vec![apply("a", "m2", 2, false)], "c2", &contexts());
        let d = workers.delivered().await;
        assert_eq!((d.member.as_str(), d.commit.as_str()), ("m2", "c2"));
        workers.settled(&d);
        assert_eq!(started.elapsed(), Duration::ZERO);
        let d = workers.delivered().await;
        assert_eq!(d.member, "m1");
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        workers.settled(&d);
        assert_eq!(workers.outstanding(), 0);
    }

    /// A fleet at rest holds no worker: each ends once its member's work is answered, and the
    /// member's next work starts another. A worker pacing a failure stays, to keep the pace.
    #[tokio::test(start_paused = true)]
    async fn workers_end_when_their_member_is_done_and_start_again_for_new_work() {
        let members = Arc::new(Slow::default());
        let mut workers = Workers::new(members.clone());
        let work = ["m1", "m2"].map(|m| apply("a", m, 1, false)).to_vec();
        assert_eq!(workers.dispatch(work, "c1", &contexts()), 2);
        assert_eq!(workers.running(), 2);
        for _ in 0..2 {
            let d = workers.delivered().await;
            workers.settled(&d);
        }
        // The workers end on their own after their report.
        while workers.running() > 0 {
            tokio::task::yield_now().await;
        }
        workers.dispatch(vec![apply("a", "m1", 2, false)], "c2", &contexts());
        assert_eq!(workers.running(), 1);
        let d = workers.delivered().await;
        assert_eq!((d.member.as_str(), d.commit.as_str()), ("m1", "c2"));
        workers.settled(&d);
        assert_eq!(workers.outstanding(), 0);
        let pushed = members.pushed.lock().unwrap().clone();
        assert_eq!(pushed.len(), 3, "each job pushed once: {pushed:?}");
    }

    #[test]
    fn a_queue_that_paces_or_remembers_a_report_is_not_idle() {
        let now = Instant::now();
        let mut q = Queue::default();
        assert!(q.is_idle());
        let failed = (apply("a", "m1", 1, false), Outcome::Failed("503".into()));
        q.finished(std::slice::from_ref(&failed), now);
        assert!(!q.is_idle(), "the failure's pace is kept");
        let done = (
            apply("a", "m1", 1, false),
            Outcome::Done(BindingHealth::Available, Default::default()),
        );
        q.finished(std::slice::from_ref(&done), now);
        assert!(q.is_idle());
        let pending = (
            apply("b", "m1", 1, true),
            Outcome::Done(BindingHealth::Pending, Default::default()),
        );
        q.finished(std::slice::from_ref(&pending), now);
        let news = q.news("c1", vec![pending]);
        assert_eq!(news.len(), 1);
        assert!(!q.is_idle(), "the re-read's pace and its report are kept");
    }

    #[tokio::test(start_paused = true)]
    async fn work_queued_behind_a_delivery_in_flight_goes_next_with_the_latest_revision() {
        let members = Arc::new(Slow::default());
        members
            .delay
            .lock()
            .unwrap()
            .insert("m1".into(), Duration::from_secs(10));
        let mut workers = Workers::new(members.clone());
        workers.dispatch(vec![apply("a", "m1", 1, false)], "c1", &contexts());
        // Let the worker take the first job before the next ones arrive.
        tokio::task::yield_now().await;
        for (i, c) in [(2, "c2"), (3, "c3")] {
            workers.dispatch(vec![apply("a", "m1", i, false)], c, &contexts());
        }
        let first = workers.delivered().await;
        workers.settled(&first);
        // Revision 3 is still outstanding: the answer for revision 1 does not clear it.
        assert_eq!(workers.outstanding(), 1);
        let second = workers.delivered().await;
        workers.settled(&second);
        let commits = [first.commit, second.commit];
        assert_eq!(commits, ["c1", "c3"], "c2 was superseded before it went");
        assert_eq!(workers.outstanding(), 0);
    }

    /// A member's work of one dispatch goes in one delivery, even to a worker that is idle on
    /// the other thread when the dispatch starts (not the first job at once and the rest in a
    /// second push to the same member).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_members_work_of_one_dispatch_is_one_delivery() {
        let members = Arc::new(Slow::default());
        let mut workers = Workers::new(members.clone());
        let warm = ["m1", "m2"].map(|m| apply("warm", m, 1, false)).to_vec();
        workers.dispatch(warm, "c1", &contexts());
        for _ in 0..2 {
            let d = workers.delivered().await;
            workers.settled(&d);
        }
        let names: Vec<String> = (0..500).map(|i| format!("p{i:03}")).collect();
        let work: Vec<Work> = names
            .iter()
            .flat_map(|p| ["m1", "m2"].map(|m| apply(p, m, 1, true)))
            .collect();
        assert_eq!(workers.dispatch(work, "c2", &contexts()), 1000);
        let mut deliveries = Vec::new();
        while workers.outstanding() > 0 {
            let d = workers.delivered().await;
            workers.settled(&d);
            deliveries.push((d.member, d.results.len()));
        }
        deliveries.sort();
        assert_eq!(
            deliveries,
            [("m1".to_string(), 500), ("m2".to_string(), 500)]
        );
    }
}
