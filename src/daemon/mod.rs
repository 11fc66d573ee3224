//! `gitfleet run`: follow a branch and roll every new head out.
//!
//! The loop ([`Daemon::run`]) is one `select!` over a closed [`Event`] enum — the followed
//! repository's refs changed, the poll is due, the webhook said so, the last reconcile asked to
//! be requeued, shutdown — and each event leads to one look at the branch: read its head and
//! reconcile it ([`reconciler`]). The reconciler, like kube-runtime's, returns an [`Action`]:
//! when it wants to be looked at again. The rollout itself is the core's
//! ([`crate::rollout::step()`] at rolling pace); blocking work (git reads, analysis, scheduling and
//! the step, fsync'd saves) runs on tokio's blocking pool so that the runtime keeps answering.
//!
//! The members are reached one by one, each on its own ([`probes`], [`workers`]): a reconcile
//! waits at most a short while for probes, hands each member's work to that member's worker and
//! returns; each finished delivery comes back as an event ([`Event::Delivered`]) and is absorbed
//! by the next reconcile, so a slow or failing member holds up only itself.
//! `--once` waits for every member instead.
//!
//! The HTTP server ([`server`]) shares only two things with the loop: the status snapshot it
//! reads ([`Status`], replaced after every reconcile) and the webhook channel it sends wake-ups
//! into. Shutdown is a `CancellationToken` the loop selects on; the step in flight finishes and
//! its state is saved.

pub mod access;
pub mod approvals;
pub mod dashboard;
pub mod deliver;
pub mod error;
pub mod leader;
pub mod metrics;
pub mod open_files;
pub mod probes;
pub mod reconciler;
pub mod runs;
pub mod server;
pub mod shards;
pub mod status_api;
pub mod watch;
pub mod workers;

#[cfg(test)]
mod tests;

use crate::fast_hash::HashMap;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;

use crate::timestamp::now_unix;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::{LeaderStatus, PlacementStatus};
use crate::members::inventory::Member;
use crate::rollout::{Outcome, Rejected, RolloutState, Work};
use crate::schedule::{Inventory, PlacementSchedule};
use crate::state::{StateBackend, StateStore};
use reconciler::Analyzed;

/// How often a cluster whose objects are not available yet is looked at again (members are
/// not watched), once the first re-reads ([`AVAILABILITY_FIRST_POLL`], doubling) found it not
/// available.
pub const AVAILABILITY_POLL: Duration = Duration::from_millis(500);

/// The first re-read of a cluster whose objects were not available yet waits this long
/// ([`workers::availability_pause`]).
pub const AVAILABILITY_FIRST_POLL: Duration = Duration::from_millis(10);

/// How long `--once` waits for workloads to become available before it gives up and exits.
pub const ONCE_AVAILABILITY_LIMIT: Duration = Duration::from_secs(300);

/// How long a delivery that only confirms what the state holds waits for others, to be
/// absorbed with them in one look ([`workers::Delivered::only_confirms`]); longer (twice the
/// last look) where a look takes longer than half of it.
pub const CONFIRMATIONS_WAIT: Duration = Duration::from_secs(1);

/// After a failed reconcile (git unreadable, members not probed, state not saved), the next try.
pub const RETRY_AFTER_ERROR: Duration = Duration::from_secs(5);

/// The daemon's way to the members: probing them and delivering work to them (push). A trait
/// so that the loop and the reconciler are testable without members. `gitfleet run` calls it
/// per member, from the members' own tasks ([`probes`], [`workers`]); `--once` for the fleet.
pub trait Deliverer: Send + Sync + 'static {
    /// Every member's health and properties (a member that does not answer is unhealthy).
    fn probe(&self, members: &[Member]) -> impl Future<Output = Result<Inventory>> + Send;

    /// `contexts` maps each member of the commit to its kubeconfig context.
    fn deliver(
        &self,
        work: Vec<Work>,
        commit: &str,
        contexts: &BTreeMap<String, String>,
    ) -> impl Future<Output = Delivery> + Send;

    /// Every member's records of what gitfleet applied there (`applied.<placement>`), or why
    /// they cannot be read: how a daemon without state rebuilds its view. Without members
    /// (the default), nothing is found.
    fn records(
        &self,
        _members: &[Member],
    ) -> impl Future<Output = Vec<crate::push::fleet::MemberRecords>> + Send {
        async { Vec::new() }
    }

    /// Makes sure `kinds` are watched on each member (by name, with its context) and changes
    /// reported into `changes`. Without watches (the default), only `--resync` heals.
    fn watch(
        &self,
        _members: &BTreeMap<String, (String, std::collections::BTreeSet<watch::Kind>)>,
        _changes: &UnboundedSender<watch::MemberChange>,
    ) {
    }
}

/// A deliverer shared with another part of the process (`--shards`: with the report collector).
impl<T: Deliverer> Deliverer for Arc<T> {
    fn probe(&self, members: &[Member]) -> impl Future<Output = Result<Inventory>> + Send {
        T::probe(self, members)
    }

    fn deliver(
        &self,
        work: Vec<Work>,
        commit: &str,
        contexts: &BTreeMap<String, String>,
    ) -> impl Future<Output = Delivery> + Send {
        T::deliver(self, work, commit, contexts)
    }

    fn records(
        &self,
        members: &[Member],
    ) -> impl Future<Output = Vec<crate::push::fleet::MemberRecords>> + Send {
        T::records(self, members)
    }

    fn watch(
        &self,
        members: &BTreeMap<String, (String, std::collections::BTreeSet<watch::Kind>)>,
        changes: &UnboundedSender<watch::MemberChange>,
    ) {
        T::watch(self, members, changes);
    }
}

/// What a delivery found: each work's outcome, and the members it could not reach or read at
/// all (by name, with why), which the daemon marks unhealthy until a probe says otherwise.
#[derive(Debug, Default)]
pub struct Delivery {
    pub results: Vec<(Work, Outcome)>,
    pub unreachable: BTreeMap<String, String>,
}

impl From<Vec<(Work, Outcome)>> for Delivery {
    /// Outcomes of members that were all reached.
    fn from(results: Vec<(Work, Outcome)>) -> Delivery {
        Delivery {
            results,
            unreachable: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The repository commits are read from: the local one followed, or the mirror of `remote`.
    pub repo: PathBuf,
    /// The remote followed when `repo` is its mirror (fetched every `poll` and on the webhook).
    pub remote: Option<crate::follow::remote::Remote>,
    pub branch: String,
    pub path: String,
    /// What turns the repository's files into hub objects: the SOPS keys, kustomize and its
    /// cache (shared by every commit the daemon reads).
    pub sources: Arc<crate::sources::Sources>,
    pub state_dir: PathBuf,
    pub listen: Option<std::net::SocketAddr>,
    pub poll: Duration,
    /// Every this long, everything delivered is re-applied (a no-op where nothing changed),
    /// the backstop for changes on members the watches missed.
    pub resync: Duration,
    pub once: bool,
    pub webhook_secret: Option<Vec<u8>>,
    /// The trusted signers and approval policy (`--trusted-signers`, `--trusted-gpg-keys`,
    /// `--approval-policy`); `None`: no tag approves and `verify_commits` rejects every head.
    pub verifier: Option<crate::approvals::Verifier>,
    /// `--verify-commits`: serve only heads signed by a trusted signer.
    pub verify_commits: bool,
    /// `--deletion-guard-share`, `--deletion-guard-min`: which new commits are held as mass
    /// deletions ([`crate::rollout::guard`]).
    pub deletion_guard: crate::rollout::guard::Policy,
}

/// What the daemon shows on its HTTP API and in logs; replaced after every reconcile.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub branch: String,
    /// The newest head seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The commit being rolled out (the last valid one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving: Option<String>,
    /// Why no commit is served, while none may be (`serving` is then absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_serving: Option<String>,
    /// Under `--verify-commits`, the commit served and who signed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<crate::rollout::serve::Verified>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Rejected>,
    /// The served commit's likely mistakes ([`crate::lint`]): the hub accepts them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The newest head, when the deletion guard holds it, with why and how to release it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<crate::rollout::guard::Held>,
    /// The git source: URL, branch, head, last fetch success and error.
    pub source: crate::api::Source,
    /// Shared with the last publish: a settled placement's status is built once, not at every
    /// reconcile, and the server serialises it without holding the lock.
    #[serde(serialize_with = "crate::api::shared_list")]
    pub placements: Vec<Arc<PlacementStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Arc<Inventory>>,
    #[serde(skip)]
    pub schedule: Vec<Arc<PlacementSchedule>>,
    /// The members as the last look scheduled them (declarations joined with the inventory):
    /// `/api/v1/members`.
    #[serde(skip)]
    pub fleet: Option<Arc<crate::schedule::Fleet>>,
    pub reconciles: u64,
    pub commits_rejected: u64,
    /// Staged update runs and their approval requests (`/api/v1/updateruns`,
    /// `/api/v1/approvalrequests`).
    #[serde(skip)]
    pub runs: runs::Runs,
    /// Approval requests, accepted approvals and refused tags (`/api/v1/approvals`).
    #[serde(skip)]
    pub approvals: crate::api::ApprovalsView,
    /// The evictions of the commit served, as judged (`/api/v1/evictions`).
    #[serde(skip)]
    pub evictions: crate::api::Evictions,
    /// `--state kubernetes`: who leads (`None` with a state directory: this process acts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderStatus>,
    /// Counts the changes published: every writer bumps it ([`Status::changed`]), and the
    /// status API's ETags are made of it, so a client that has the current document is told
    /// so without the document being written again.
    #[serde(skip)]
    pub generation: u64,
}

impl Status {
    /// Marks the status as changed (a new ETag for every document).
    pub fn changed(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// The placements document's head fields, with no placements: what every reader of the
    /// document shows above them.
    pub fn placements_head<P>(&self) -> crate::api::Placements<P> {
        crate::api::Placements {
            branch: self.branch.clone(),
            head: self.head.clone(),
            serving: self.serving.clone(),
            not_serving: self.not_serving.clone(),
            verified: self.verified.clone(),
            rejected: self.rejected.clone(),
            warnings: self.warnings.clone(),
            held: self.held.clone(),
            source: Some(self.source.clone()),
            placements: vec![],
            matched: None,
            leader: self.leader.clone(),
        }
    }
}

/// Everything that makes the daemon look at the branch again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The followed repository's refs changed (a local repository is watched).
    RefChanged,
    /// `--poll` passed since the last look: fetch (a remote), look again.
    PollTick,
    /// A member's probe fell due (its heartbeat period passed since its last answer): start
    /// it; its answer asks for a look if it brings news ([`probes`]).
    ProbesDue,
    /// The webhook said the remote changed: fetch at once.
    Webhook,
    /// The last reconcile asked to be looked at again ([`Action::requeue_after`]).
    Requeue,
    /// Something gitfleet manages changed on a member (a watch saw it).
    MemberChanged,
    /// `--resync` passed: re-apply everything delivered.
    Resync,
    /// A member's worker finished a delivery ([`workers`]): absorb it and take the next step.
    Delivered,
    /// A member's probe answered after its round's wait, with news ([`probes`]).
    Probed,
    /// A member's delivery runs long ([`workers::SLOW_DELIVERY`]): probe it now.
    SlowDelivery,
    /// SIGTERM or Ctrl-C: stop between looks (state is saved after every look).
    Shutdown,
}

/// What a reconcile asks of the loop, as kube-runtime's reconcilers return it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    /// Look again after this long (at the latest at the next poll); `None`: only on an event.
    pub requeue_after: Option<Duration>,
}

/// The rollout's next wake-up, on the daemon's timers.
impl From<crate::rollout::Wake> for Action {
    fn from(wake: crate::rollout::Wake) -> Action {
        use crate::rollout::Wake;
        match wake {
            Wake::Now => Action::requeue(Duration::ZERO),
            Wake::AvailabilityPoll => Action::requeue(AVAILABILITY_POLL),
            Wake::After(wait) => Action::requeue(wait),
            Wake::OnChange => Action::await_change(),
        }
    }
}

impl Action {
    pub fn requeue(after: Duration) -> Action {
        Action {
            requeue_after: Some(after),
        }
    }

    /// Settled, or nothing to do: wait for a change or the poll.
    pub fn await_change() -> Action {
        Action {
            requeue_after: None,
        }
    }

    /// `--once` keeps stepping while the rollout moves, or waits for availability (bounded: a
    /// workload that never becomes available must not hang a one-shot run).
    fn keeps_once_going(&self, elapsed: Duration) -> bool {
        match self.requeue_after {
            Some(Duration::ZERO) => true,
            Some(AVAILABILITY_POLL) => elapsed < ONCE_AVAILABILITY_LIMIT,
            _ => false,
        }
    }
}

/// The loop's two clocks: the poll, restarted by every look, and the requeue the last look
/// asked for (never later than the poll).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timers {
    poll: Duration,
    next_poll: Instant,
    requeue_at: Option<Instant>,
}

impl Timers {
    /// The first look is at once.
    fn start(poll: Duration, now: Instant) -> Timers {
        Timers {
            poll,
            next_poll: now + poll,
            requeue_at: Some(now),
        }
    }

    fn looked(&mut self, now: Instant, action: Action) {
        self.next_poll = now + self.poll;
        self.requeue_at = action.requeue_after.map(|after| now + after.min(self.poll));
    }
}

/// The daemon's working set: one task owns it and is the only one to change the state.
pub struct Daemon<D: Deliverer> {
    opts: RunOptions,
    store: Arc<dyn StateBackend>,
    state: RolloutState,
    deliverer: Arc<D>,
    /// Whether each member is probed and pushed to on its own, and results are absorbed as
    /// they come (`gitfleet run`); otherwise a reconcile waits for every member (`--once`).
    isolated: bool,
    /// `gitfleet run`: the members' probes and push workers, each member on its own.
    probes: probes::Probes<D>,
    workers: workers::Workers<D>,
    /// Deliveries finished since the last reconcile, absorbed by the next one.
    arrived: Vec<workers::Delivered>,
    /// Status changes seen while work for their placement and member was with the workers:
    /// that work may have read the status before the change, and its result clears the mark,
    /// so they are marked again once it is absorbed.
    rereads_after_delivery: Vec<watch::MemberChange>,
    /// Changes the members reported since the last step: marked by the next step once it has
    /// absorbed the deliveries that arrived before them, so that a result read before a change
    /// does not clear its mark.
    reported: Vec<watch::MemberChange>,
    /// What each placement's last logged step applied and removed: steps taken while its work
    /// is still with the workers decide the same again, and are not logged again.
    logged_steps: HashMap<crate::model::PlacementKey, String>,
    /// Lasting conditions are logged when they start and when they end, not at every look:
    /// the members last seen unhealthy, the approval requests last seen waited on, and the
    /// last failure logged for each placement and cluster.
    logged_unhealthy: std::collections::BTreeSet<String>,
    logged_waiting: std::collections::BTreeSet<String>,
    logged_failures: HashMap<(crate::model::PlacementKey, String), String>,
    pub status: Arc<Mutex<Status>>,
    pub metrics: Arc<metrics::Metrics>,
    /// The last head reconciled, to count new commits once.
    last_head: Option<String>,
    /// The last commits analyzed (see [`Daemon::analyzed`]), oldest first, at most two.
    analyzed: Vec<Arc<Analyzed>>,
    /// The schedule last saved to the store, as the next reconcile's previous results.
    previous: Option<crate::schedule::Previous>,
    /// The eviction verdicts last saved with it: a reconcile that fails after judging an
    /// eviction leaves its verdict in the state but not its unscheduled binding, and the next
    /// one, which starts from the saved schedule, starts from these verdicts too.
    saved_evictions: BTreeMap<String, crate::rollout::eviction::EvictionRecord>,
    /// The status last published for each settled placement, by its settled step's number
    /// ([`crate::rollout::StepSummary::settled`]).
    published: HashMap<crate::model::PlacementKey, (u64, Arc<PlacementStatus>)>,
    /// Each placement's step whose gauges (`rollout_clusters`, `invalid_resource_selectors`)
    /// are set: a settled placement's step, shared with the last look's, sets nothing again.
    metered: HashMap<crate::model::PlacementKey, Arc<crate::rollout::StepSummary>>,
    /// The commit of the schedule last saved by this process: a reconcile whose schedule is
    /// the saved one, for the same commit, does not write it again.
    schedule_saved_for: Option<String>,
    /// The steps of settled placements, reused while their inputs stay the same.
    step_memo: crate::rollout::StepMemo,
    /// The placements' last KubeFleet schedules and their inputs, reused while they hold.
    schedule_memo: crate::schedule::ScheduleMemo,
    /// The last look's fleet, with the member declarations and the members' answers it was
    /// built from: the next look with the same ones (at the same commit, or at one that left
    /// the members' files as they were) takes it as it is.
    fleet_memo: Option<(
        reconciler::MemberDeclarations,
        Arc<Inventory>,
        Arc<crate::schedule::Fleet>,
    )>,
    /// The members' answers last remembered in the rollout state: the same ones again are
    /// remembered without comparing them.
    remembered: Option<Arc<Inventory>>,
    /// The files of the last commit read, and parsed: the next commit reads and parses only
    /// what it changed.
    read_cache: reconciler::ReadCache,
    /// Catalogs of older commits that staged update runs render from, by commit id.
    run_catalogs: BTreeMap<String, Arc<crate::catalog::Catalog>>,
    /// Which of those commits the state still needs, remembered per placement.
    render_commits: crate::rollout::staged::RenderCommits,
    /// Reads and judges approval tags.
    approvals: approvals::ApprovalGate,
    /// The last head whose signature was judged (`--verify-commits`): its signer, or why it
    /// does not count.
    signature_checked: Option<(String, Result<String, String>)>,
    /// The served commit's likely mistakes ([`crate::lint`]).
    warnings: Vec<String>,
    /// Why no commit is served, while none may be ([`crate::rollout::serve`]).
    not_serving: Option<String>,
    /// The state directory held no rollout state at start: the first reconcile rebuilds the
    /// view from the members' records before it steps.
    rebuild: bool,
    /// Where the members' watches report changes; the loop owns the receiver.
    changes: UnboundedSender<watch::MemberChange>,
    changes_rx: Option<UnboundedReceiver<watch::MemberChange>>,
    /// The kinds delivered to each member so far (by member name), to be watched there.
    watched: BTreeMap<String, std::collections::BTreeSet<watch::Kind>>,
    /// `--state kubernetes`: the election's verdict, checked before work is handed to the
    /// members (`None`: this process is the only writer of its state directory).
    leadership: Option<leader::Leadership>,
    /// How long the last look took: confirmations wait at least twice that long to be
    /// absorbed together, so that a flood of them (a restart at fleet scale, where one look
    /// is long) leaves the members' workers most of the CPU.
    last_look: Duration,
    /// `--notifications`: where each look's status is offered (never waited on).
    notify: Option<crate::notify::deliver::Offer>,
}

impl<D: Deliverer> Daemon<D> {
    /// The daemon on the state directory `opts.state_dir` (locked: one writer per directory).
    pub fn open(opts: RunOptions, deliverer: D) -> Result<Self> {
        let store = StateStore::lock(&opts.state_dir)?;
        Self::open_with(opts, deliverer, Arc::new(store))
    }

    /// The daemon on any state backend (`--state kubernetes`: the leader's claimed store).
    pub fn open_with(opts: RunOptions, deliverer: D, store: Arc<dyn StateBackend>) -> Result<Self> {
        // Every state file is read now, so that a corrupt one stops the start naming it; the
        // schedule read is the first step's previous results (read once, not checked and then
        // read again: it is large in a large fleet).
        let (_, previous) = store.load_schedule()?;
        let rebuild = !store.has_rollout()?;
        let mut state = store.load_rollout()?;
        // What members hold may have changed while the daemon was not watching: the first
        // step re-applies everything delivered (a no-op where nothing changed). Not for
        // `--once`, which continues a rollout and does not watch. A re-apply stamps the commit
        // served now on the objects (the snapshot stamp and content are unchanged).
        if !opts.once {
            state.recheck_all("the daemon started");
        }
        let (changes, changes_rx) = tokio::sync::mpsc::unbounded_channel();
        let status = Arc::new(Mutex::new(Status {
            branch: opts.branch.clone(),
            serving: state.serving.clone(),
            rejected: state.rejected.clone(),
            held: state.held.clone(),
            source: crate::api::Source {
                url: match &opts.remote {
                    Some(r) => crate::follow::remote::redacted(&r.url),
                    None => opts.repo.display().to_string(),
                },
                branch: opts.branch.clone(),
                kind: if opts.remote.is_some() {
                    "remote"
                } else {
                    "local"
                }
                .into(),
                ..crate::api::Source::default()
            },
            ..Status::default()
        }));
        let gate = approvals::ApprovalGate::new(opts.repo.clone(), opts.verifier.clone());
        let deliverer = Arc::new(deliverer);
        let saved_evictions = state.evictions.clone();
        Ok(Self {
            probes: probes::Probes::new(deliverer.clone()),
            workers: workers::Workers::new(deliverer.clone()),
            arrived: Vec::new(),
            rereads_after_delivery: Vec::new(),
            reported: Vec::new(),
            logged_steps: HashMap::default(),
            logged_unhealthy: Default::default(),
            logged_waiting: Default::default(),
            logged_failures: HashMap::default(),
            isolated: !opts.once,
            approvals: gate,
            signature_checked: None,
            warnings: Vec::new(),
            not_serving: None,
            rebuild,
            opts,
            store,
            state,
            deliverer,
            status,
            metrics: Arc::new(metrics::Metrics::default()),
            last_head: None,
            analyzed: Vec::new(),
            previous: Some(previous),
            saved_evictions,
            schedule_saved_for: None,
            published: HashMap::default(),
            metered: HashMap::default(),
            fleet_memo: None,
            remembered: None,
            step_memo: Default::default(),
            schedule_memo: Default::default(),
            read_cache: Default::default(),
            run_catalogs: BTreeMap::new(),
            render_commits: Default::default(),
            changes,
            changes_rx: Some(changes_rx),
            watched: BTreeMap::new(),
            leadership: None,
            last_look: Duration::ZERO,
            notify: None,
        })
    }

    /// Publishes into `status` and `metrics` (made before the daemon, served while this
    /// replica followed) instead of its own, and acts only while `leadership` says it leads.
    pub fn lead(
        &mut self,
        status: Arc<Mutex<Status>>,
        metrics: Arc<metrics::Metrics>,
        leadership: leader::Leadership,
    ) {
        let mine = std::mem::take(&mut *self.status.lock().unwrap());
        {
            let mut shared = status.lock().unwrap();
            let leader = shared.leader.take();
            let generation = shared.generation;
            *shared = mine;
            shared.leader = leader;
            shared.generation = generation;
            shared.changed();
        }
        self.status = status;
        self.metrics = metrics;
        self.leadership = Some(leadership);
        // A new leader reads the members' records before it steps: what the
        // previous leader applied after its last save is adopted, so that a placement deleted
        // meanwhile is still pruned. Pairs the state knows are left as they are.
        self.rebuild = true;
    }

    /// Offers every published status to `offer` (`--notifications`).
    pub fn notify(&mut self, offer: crate::notify::deliver::Offer) {
        self.notify = Some(offer);
    }

    /// Hands the published status to the notifications, if any (cheap: shared parts shared).
    fn offer_status(&self) {
        let Some(offer) = &self.notify else { return };
        let snapshot = {
            let st = self.status.lock().unwrap_or_else(|e| e.into_inner());
            crate::notify::events::Snapshot {
                serving: st.serving.clone(),
                rejected: st.rejected.clone(),
                held: st.held.clone(),
                placements: st.placements.clone(),
                runs: st.runs.update_runs.clone(),
                approvals: st.runs.approval_requests.clone(),
                inventory: st.inventory.clone(),
            }
        };
        offer.offer(snapshot);
    }

    /// Whether this process may act on members now: always with a state directory; under
    /// `--state kubernetes`, while its lease is renewed within the renew deadline.
    fn may_act(&self) -> bool {
        self.leadership.as_ref().is_none_or(|l| l.leading())
    }

    /// Follows the branch until `shutdown` is cancelled (or, with `--once`, until the rollout
    /// settles or stops progressing). `webhook` receives the server's wake-ups.
    pub async fn run(
        mut self,
        mut webhook: UnboundedReceiver<()>,
        shutdown: CancellationToken,
    ) -> Result<()> {
        let mut follower = match &self.opts.remote {
            None => crate::follow::Follower::local(&self.opts.repo, &self.opts.branch)?,
            Some(remote) => crate::follow::Follower::remote(
                crate::follow::remote::Mirror::open(&remote.url, &self.opts.state_dir)?
                    .with_auth(remote.auth.clone()),
                &self.opts.branch,
                self.opts.poll,
            ),
        };
        let started = Instant::now();
        let mut timers = Timers::start(self.opts.poll, started);
        let mut changes = self
            .changes_rx
            .take()
            .expect("the daemon runs once: it owns the change receiver");
        let mut next_resync = started + self.opts.resync;
        let mut slow_members = self.workers.take_slow();
        loop {
            let requeue = async {
                match timers.requeue_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let probe_due = self.probes.next_start();
            let probes_due = async {
                match probe_due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let mut change = None;
            let mut delivered = None;
            let mut probed = None;
            let mut slow = None;
            let event = tokio::select! {
                biased;
                () = shutdown.cancelled() => Event::Shutdown,
                Some(()) = webhook.recv() => Event::Webhook,
                d = self.workers.delivered() => {
                    delivered = Some(d);
                    Event::Delivered
                }
                a = self.probes.late_answer() => {
                    probed = Some(a);
                    Event::Probed
                }
                Some(m) = slow_members.recv() => {
                    slow = Some(m);
                    Event::SlowDelivery
                }
                Some(c) = changes.recv() => {
                    change = Some(c);
                    Event::MemberChanged
                }
                () = follower.changed() => Event::RefChanged,
                () = requeue => Event::Requeue,
                () = probes_due => Event::ProbesDue,
                () = tokio::time::sleep_until(timers.next_poll) => Event::PollTick,
                () = tokio::time::sleep_until(next_resync) => Event::Resync,
            };
            tracing::debug!(?event, "event");
            match event {
                Event::Shutdown => {
                    self.compact_state().await;
                    tracing::info!("shutting down; state is saved");
                    return Ok(());
                }
                Event::Webhook => follower.wake(),
                Event::MemberChanged => {}
                Event::Resync => {
                    tracing::info!("periodic resync: re-applying everything delivered");
                    self.state.recheck_all("periodic resync");
                    next_resync = Instant::now() + self.opts.resync;
                }
                Event::Delivered => {
                    // Every delivery finished by now is one look.
                    let first = delivered.into_iter();
                    let more = std::iter::from_fn(|| self.workers.try_delivered());
                    let mut news = false;
                    for d in first.chain(more).collect::<Vec<_>>() {
                        self.workers.settled(&d);
                        if let Some(why) = &d.unreachable {
                            self.probes.push_failed(&d.member, why);
                        }
                        news |= !d.only_confirms(&self.state);
                        self.arrived.push(d);
                    }
                    // Confirmations (a restart's or a resync's, one delivery per member) change
                    // no decision: while more are coming they wait, CONFIRMATIONS_WAIT or twice
                    // the last look if longer, to be absorbed together, instead of one look (a
                    // whole step, save and publish) per member that answered. Not when changes
                    // wait for a look: the select prefers deliveries, and a stream of
                    // confirmations would hold them back (a shard's new owner's members, marked
                    // while the confirmations of another shard's come in).
                    if !news && self.workers.outstanding() > 0 && changes.is_empty() {
                        let wait = CONFIRMATIONS_WAIT.max(2 * self.last_look);
                        let at = Instant::now() + wait;
                        timers.requeue_at = Some(timers.requeue_at.map_or(at, |r| r.min(at)));
                        continue;
                    }
                }
                Event::SlowDelivery => {
                    // Its answer asks for a look if it brings news.
                    if let Some(m) = slow {
                        self.probes.ask(&m);
                        self.probes.start_due();
                    }
                    continue;
                }
                Event::ProbesDue => {
                    // Their answers ask for a look when they change what is known.
                    self.probes.start_due();
                    continue;
                }
                Event::Probed => {
                    let news = probed.is_some_and(|a| self.probes.answered(a));
                    // As with confirmations: changes waiting behind answers get their look.
                    if !news && changes.is_empty() {
                        continue;
                    }
                }
                Event::RefChanged | Event::PollTick | Event::Requeue => {}
            }
            // Every change reported by now goes to this look, whatever woke it: the select
            // prefers deliveries, and a long rollout's stream of them would otherwise hold
            // changes back until it ends, when they would mark everything delivered meanwhile.
            // A burst (a namespace deleted) is one look.
            self.reported.extend(change);
            while let Ok(c) = changes.try_recv() {
                self.reported.push(c);
            }
            let looking = Instant::now();
            let action = self.look(&mut follower).await?;
            self.last_look = looking.elapsed();
            self.offer_status();
            if self.opts.once && !action.keeps_once_going(started.elapsed()) {
                self.compact_state().await;
                return Ok(());
            }
            timers.looked(Instant::now(), action);
        }
    }

    /// Leaves the state whole at a clean stop (the state directory's journal folded into its
    /// files). Every save already made it durable: a failure here is logged, not fatal.
    async fn compact_state(&mut self) {
        let store = self.store.clone();
        let state = std::mem::take(&mut self.state);
        match blocking(move || {
            let r = store.compact(&state);
            (state, r)
        })
        .await
        {
            Ok((state, r)) => {
                self.state = state;
                if let Err(e) = r {
                    tracing::warn!(error = %e, "cannot write the state whole at exit; its journal keeps it");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot write the state whole at exit"),
        }
    }

    /// Whether `change` is a deletion this daemon's own work made: work handed to the member
    /// (or answered and not absorbed yet) for the object's placement that removes it, or
    /// applies a set of objects without it (push prunes what is gone); or, the delivery
    /// absorbed already, an object the state no longer records as applied there.
    fn deleted_by_own_work(&self, change: &watch::MemberChange) -> bool {
        let (Some(label), Some(object)) = (&change.placement_label, &change.object) else {
            return false;
        };
        if !change.deleted {
            return false;
        }
        let label_of = crate::model::PlacementKey::label_value;
        let id = object.key();
        let no_longer_recorded = self.state.placements.iter().any(|(key, ps)| {
            ps.clusters
                .get(&change.member)
                .is_some_and(|c| !c.objects.is_empty() && !c.objects.contains(&id))
                && label_of(key) == *label
        });
        if no_longer_recorded {
            return true;
        }
        self.unabsorbed_work(&change.member, label)
            .any(|action| match action {
                crate::rollout::Action::Remove { .. } => true,
                crate::rollout::Action::Apply { manifests, .. } => !manifests
                    .iter()
                    .any(|m| crate::push::ObjectRef::of(&m.value) == *object),
            })
    }

    /// The work for the placement labelled `label` on `member` whose result is not absorbed
    /// yet: handed to the member's worker, or answered and waiting for the next look.
    fn unabsorbed_work<'a>(
        &'a self,
        member: &'a str,
        label: &'a str,
    ) -> impl Iterator<Item = &'a crate::rollout::Action> + 'a {
        let arrived = self
            .arrived
            .iter()
            .filter(move |d| d.member == member)
            .flat_map(|d| d.results.iter().map(|(w, _)| (&w.placement, &w.action)));
        self.workers
            .handed(member)
            .chain(arrived)
            .filter(move |(placement, _)| placement.label_value() == label)
            .map(|(_, action)| action)
    }

    /// Marks what the members changed for a re-apply at the next step (and, for deletions,
    /// as not available until then). The daemon's own deletions are left alone: the delivery
    /// that made them says what the member holds.
    fn member_changed(&mut self, changes: Vec<watch::MemberChange>) {
        let now = now_unix();
        let mut marking = Vec::with_capacity(changes.len());
        for c in changes {
            if self.deleted_by_own_work(&c) {
                tracing::debug!(member = %c.member, "{}: pruned by this daemon", c.what);
                continue;
            }
            let labels = metrics::labels(&[("member", &c.member), ("cause", c.cause.name())]);
            self.metrics.member_changes.get_or_create(&labels).inc();
            marking.push(c);
        }
        self.mark_changed(marking, now);
    }

    /// Marks changes for the next step, all in one pass over the state; a status change seen
    /// while its placement's work is out waits for that work's result
    /// ([`Self::rereads_after_delivery`]).
    fn mark_changed(&mut self, changes: Vec<watch::MemberChange>, now: u64) {
        use crate::rollout::state::{Recheck, RecheckCause};
        let (waiting, marking): (Vec<_>, Vec<_>) = changes.into_iter().partition(|c| {
            c.cause == RecheckCause::StatusChanged
                && c.placement_label
                    .as_deref()
                    .is_some_and(|label| self.unabsorbed_work(&c.member, label).next().is_some())
        });
        self.rereads_after_delivery.extend(waiting);
        let each: Vec<Recheck> = marking
            .iter()
            .map(|c| Recheck {
                member: &c.member,
                placement_label: c.placement_label.as_deref(),
                why: &c.what,
                cause: c.cause,
                deleted: c.deleted,
            })
            .collect();
        let marked = self.state.recheck_each(&each, now);
        for (c, marked) in marking.iter().zip(marked) {
            if marked == 0 {
                continue;
            }
            if c.deleted {
                tracing::warn!(member = %c.member, "{}: restoring it", c.what);
            } else if c.cause == RecheckCause::StatusChanged {
                tracing::debug!(member = %c.member, "{}: reading it again", c.what);
            } else {
                tracing::debug!(member = %c.member, "{}: checking it", c.what);
            }
        }
    }

    /// Starts watches for the kinds `work` delivers to each member (`contexts`: member name to
    /// kubeconfig context).
    fn watch_delivered(&mut self, work: &[Work], contexts: &BTreeMap<String, String>) {
        if !watch::add_delivered_kinds(work, &mut self.watched) {
            return;
        }
        let members = watch::with_contexts(&self.watched, contexts);
        self.deliverer.watch(&members, &self.changes);
    }

    /// One look at the branch: its newest head, reconciled. Errors end a `--once` run; the
    /// daemon logs them and tries again.
    async fn look(&mut self, follower: &mut crate::follow::Follower) -> Result<Action> {
        let head = match follower.newest_head().await {
            Ok(head) => {
                if head.fetched {
                    self.source_reached();
                }
                Some(head.commit)
            }
            Err(e) if self.opts.once => return Err(e.into()),
            Err(e) => {
                // What is deployed stays; the mirror's head (if any) keeps being served.
                tracing::error!(error = %e, "cannot follow the branch; retrying at the next poll");
                self.source_failed(&e);
                follower.current_head().await.ok()
            }
        };
        let Some(head) = head else {
            return Ok(Action::await_change());
        };
        {
            let mut status = self.status.lock().unwrap();
            status.head = Some(head.clone());
            status.source.head = Some(head.clone());
            status.changed();
        }
        match self.reconcile(&head).await {
            Ok(action) => Ok(action),
            Err(e) if self.opts.once => Err(e.into_anyhow()),
            // Another replica owns the state, or this one's lease ran out: stop acting.
            Err(e) if !e.retry() => Err(e.into_anyhow()),
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "reconcile failed; retrying");
                Ok(Action::requeue(RETRY_AFTER_ERROR))
            }
        }
    }
}

impl<D: Deliverer> Daemon<D> {
    /// A fetch (or a local read of the branch) succeeded: the source is fine again.
    fn source_reached(&self) {
        let now = now_unix();
        let mut status = self.status.lock().unwrap();
        status.source.last_success = Some(now);
        status.source.consecutive_failures = 0;
        status.changed();
        self.metrics
            .git_last_fetch_success
            .set(i64::try_from(now).unwrap_or(i64::MAX));
    }

    /// A fetch failed: counted, and shown with its message (no password of the URL in it).
    fn source_failed(&self, e: &crate::follow::FollowError) {
        let mut text = e.to_string();
        if let Some(remote) = &self.opts.remote {
            text = crate::follow::remote::scrubbed(&text, &remote.url);
        }
        let mut status = self.status.lock().unwrap();
        status.source.last_error = Some(text);
        status.source.last_error_at = Some(now_unix());
        status.source.consecutive_failures = status.source.consecutive_failures.saturating_add(1);
        status.changed();
        self.metrics.git_fetch_errors.inc();
    }
}

/// Runs `f` on the blocking pool (git, analysis, the rollout step, fsync'd saves).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    use anyhow::Context;
    tokio::task::spawn_blocking(f)
        .await
        .context("a blocking task of the daemon failed")
}

#[cfg(test)]
mod timer_tests {
    use super::*;

    #[test]
    fn a_requeue_is_never_later_than_the_poll_and_every_look_restarts_the_poll() {
        let poll = Duration::from_secs(30);
        let t0 = Instant::now();
        let mut timers = Timers::start(poll, t0);
        assert_eq!(timers.requeue_at, Some(t0));
        let t1 = t0 + Duration::from_secs(7);
        timers.looked(t1, Action::requeue(Duration::from_secs(60)));
        assert_eq!(timers.requeue_at, Some(t1 + poll));
        assert_eq!(timers.next_poll, t1 + poll);
        timers.looked(t1, Action::requeue(AVAILABILITY_POLL));
        assert_eq!(timers.requeue_at, Some(t1 + AVAILABILITY_POLL));
        timers.looked(t1, Action::await_change());
        assert_eq!(timers.requeue_at, None);
    }

    #[test]
    fn once_goes_on_while_the_rollout_moves_or_waits_for_availability_within_the_limit() {
        let early = Duration::from_secs(1);
        assert!(Action::requeue(Duration::ZERO).keeps_once_going(early));
        assert!(Action::requeue(AVAILABILITY_POLL).keeps_once_going(early));
        assert!(!Action::requeue(AVAILABILITY_POLL).keeps_once_going(ONCE_AVAILABILITY_LIMIT));
        assert!(!Action::requeue(RETRY_AFTER_ERROR).keeps_once_going(early));
        assert!(!Action::await_change().keeps_once_going(early));
    }
}
