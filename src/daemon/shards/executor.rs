//! A shard owner's side of sharded delivery, on every replica: it watches the leader's orders,
//! carries out those of the shards it acts for with its own pushes, and reports back under its
//! claim of each shard's record. Before acting on a shard's orders it writes the record under
//! that claim: once a successor has claimed the shard, the write is refused and this replica
//! does not act (the fencing of [`super::claims`]). It watches the members it delivered to and
//! reports what changes there; the watches of a shard that moves away stop.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::Api;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::claims::{self, Claim, ClaimError, ClaimToken};
use super::leases::Owned;
use super::orders::{self, CheckMembers, MemberWork, Order, OrderName, Report, ReportBody};
use super::renderings::Fetched;
use super::{assign, Names, ReplicaId, ShardId};
use crate::daemon::deliver::PushDeliverer;
use crate::daemon::metrics::{labels, Metrics};
use crate::daemon::watch::{self, MemberChange};
use crate::daemon::Deliverer as _;
use crate::members::inventory::Member;
use crate::members::MemberTarget;
use crate::rollout::state::RecheckCause;
use crate::rollout::{Outcome, Work};

/// Changes seen on the members are gathered this long before they are reported.
const CHANGES_GATHERED_FOR: Duration = Duration::from_millis(200);
/// After the hosting cluster failed a shard's record write or a report, the next try.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

pub struct Executor {
    /// Orders, reports and shard records, in the hosting cluster's namespace.
    pub objects: Api<ConfigMap>,
    pub renderings: Fetched,
    pub names: Names,
    pub me: ReplicaId,
    pub shards: u32,
    pub renew_deadline: Duration,
    pub local: Arc<PushDeliverer>,
    pub metrics: Arc<Metrics>,
    /// The kinds delivered to each member this replica acts for, to be watched there.
    watched: Mutex<watch::Delivered>,
    reports: AtomicU64,
}

/// The orders being carried out, with their shard.
type Running = HashMap<OrderName, (ShardId, tokio::task::AbortHandle)>;

/// An order as watched. Every replica watches every order, and most are for shards others act
/// for: the payload is read (unzipped and parsed) only once this replica acts on it.
enum Watched {
    Unread(Box<ConfigMap>),
    Read(Arc<Order>),
    /// Left alone until it changes.
    Unreadable,
}

impl Watched {
    /// The order, read now if it was not yet; `None` (with a warning the first time) if it
    /// cannot be read.
    fn read(&mut self) -> Option<Arc<Order>> {
        if let Watched::Unread(cm) = self {
            *self = match orders::order_payload(cm) {
                Ok(order) => Watched::Read(Arc::new(order)),
                Err(e) => {
                    tracing::warn!(error = %e, "an unreadable order: left alone");
                    Watched::Unreadable
                }
            };
        }
        match self {
            Watched::Read(order) => Some(order.clone()),
            Watched::Unread(_) | Watched::Unreadable => None,
        }
    }
}

/// What a task of the executor ended with.
enum Ended {
    /// A shard's record was written under `claim` (or refused it: `fenced`) before acting on
    /// `pending`.
    Fence {
        claim: Claim,
        pending: Vec<(OrderName, Arc<Order>)>,
        written: Result<(), Fence>,
    },
    /// An order was delivered; `reported`: and its report posted.
    Order { name: OrderName, reported: bool },
}

enum Fence {
    /// A successor claimed the shard: this replica stops acting for it.
    Claimed,
    /// The hosting cluster did not take the write: tried again.
    Failed,
}

impl Executor {
    pub fn new(
        hosting: super::remote::Hosting,
        renew_deadline: Duration,
        local: Arc<PushDeliverer>,
        metrics: Arc<Metrics>,
    ) -> Executor {
        Executor {
            renderings: Fetched::new(hosting.secrets, hosting.names.clone()),
            objects: hosting.objects,
            names: hosting.names,
            me: hosting.me,
            shards: hosting.shards,
            renew_deadline,
            local,
            metrics,
            watched: Mutex::default(),
            reports: AtomicU64::new(0),
        }
    }

    /// Carries out the orders of the shards this replica acts for, until `stop`.
    pub async fn run(
        self: Arc<Self>,
        mut owned: tokio::sync::watch::Receiver<Owned>,
        stop: CancellationToken,
    ) {
        let (changes_tx, mut changes_rx) = tokio::sync::mpsc::unbounded_channel();
        let selector = format!("{}={}", orders::ORDER_LABEL, self.names.prefix);
        let stream = watcher(
            self.objects.clone(),
            watcher::Config::default().labels(&selector),
        )
        // A hosting cluster that does not answer is asked again after a growing pause.
        .default_backoff();
        let mut stream = std::pin::pin!(stream);
        let mut known: BTreeMap<OrderName, (ShardId, Watched)> = BTreeMap::new();
        let mut listing: Option<BTreeSet<OrderName>> = None;
        let mut delivered: HashSet<OrderName> = HashSet::new();
        let mut claims: BTreeMap<ShardId, Claim> = BTreeMap::new();
        let mut fenced: HashSet<ClaimToken> = HashSet::new();
        // Shards whose record is being written, and orders being delivered.
        let mut fencing: BTreeSet<ShardId> = BTreeSet::new();
        let mut running: Running = HashMap::new();
        let mut acting: BTreeSet<ShardId> = BTreeSet::new();
        let mut tasks: JoinSet<Ended> = JoinSet::new();
        let mut changes: Vec<MemberChange> = Vec::new();
        loop {
            let flush = async {
                if changes.is_empty() {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(CHANGES_GATHERED_FOR).await;
            };
            tokio::select! {
                () = stop.cancelled() => break,
                event = stream.next() => match event {
                    Some(Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm))) => {
                        match orders::order_header(&cm) {
                            Ok((name, shard)) => {
                                if let Some(l) = listing.as_mut() {
                                    l.insert(name.clone());
                                }
                                known.insert(name, (shard, Watched::Unread(Box::new(cm))));
                            }
                            Err(e) => tracing::warn!(error = %e, "an unreadable order: left alone"),
                        }
                    }
                    Some(Ok(watcher::Event::Delete(cm))) => {
                        let name = OrderName(cm.metadata.name.unwrap_or_default());
                        known.remove(&name);
                        delivered.remove(&name);
                    }
                    Some(Ok(watcher::Event::Init)) => listing = Some(BTreeSet::new()),
                    Some(Ok(watcher::Event::InitDone)) => {
                        // Orders deleted while the watch was down are gone from the listing.
                        if let Some(listed) = listing.take() {
                            known.retain(|n, _| listed.contains(n));
                            delivered.retain(|n| listed.contains(n));
                        }
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "watching the orders failed; resuming"),
                    None => break,
                },
                changed = owned.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                Some(ended) = tasks.join_next() => match ended {
                    Ok(Ended::Order { name, reported }) => {
                        running.remove(&name);
                        if reported {
                            delivered.insert(name);
                        }
                    }
                    Ok(Ended::Fence { claim, pending, written }) => {
                        let shard = claim.shard;
                        fencing.remove(&shard);
                        match written {
                            // Only under the claim the shard is still acted for by.
                            Ok(()) if claims.get(&shard).is_some_and(|c| c.token == claim.token) => {
                                for (name, order) in pending {
                                    let under = (shard, claim.token.clone());
                                    self.start(&mut tasks, &mut running, under, (name, order), &changes_tx);
                                }
                            }
                            Ok(()) => {}
                            Err(Fence::Claimed) => {
                                tracing::warn!(%shard, "claimed by another replica since: not acting for it");
                                self.metrics
                                    .shard_orders
                                    .get_or_create(&labels(&[("shard", &shard.0.to_string()), ("outcome", "fenced")]))
                                    .inc_by(pending.len() as u64);
                                fenced.insert(claim.token.clone());
                            }
                            Err(Fence::Failed) => {}
                        }
                        // The write moved the claim on, unless the shard was claimed anew.
                        if let Some(c) = claims.get_mut(&shard) {
                            if c.token == claim.token {
                                *c = claim;
                            }
                        }
                    }
                    Err(_) => {}
                },
                Some(c) = changes_rx.recv() => changes.push(c),
                () = flush => self.report_changes(std::mem::take(&mut changes), &claims),
            }
            // What this replica acts for now, and by which claims.
            let now = tokio::time::Instant::now();
            let (now_acting, held) = {
                let o = owned.borrow();
                (o.acting_for(self.renew_deadline, now), o.claims.clone())
            };
            claims.retain(|s, _| now_acting.contains(s));
            for (shard, claim) in held {
                if !now_acting.contains(&shard) {
                    continue;
                }
                if claims.get(&shard).map(|c| &c.token) != Some(&claim.token) {
                    claims.insert(shard, claim);
                }
            }
            if now_acting != acting {
                acting = now_acting;
                self.stop_watching_others(&acting);
                // What was started for a shard let go of stops with it (its next owner does
                // it again).
                running.retain(|_, (shard, task)| {
                    let kept = acting.contains(shard);
                    if !kept {
                        task.abort();
                    }
                    kept
                });
            }
            for (shard, claim) in &claims {
                if fenced.contains(&claim.token) {
                    continue;
                }
                let (probes, deliveries): (Vec<_>, Vec<_>) = known
                    .iter_mut()
                    .filter(|(n, (s, _))| {
                        s == shard && !delivered.contains(*n) && !running.contains_key(*n)
                    })
                    .filter_map(|(n, (_, o))| Some((n.clone(), o.read()?)))
                    .partition(|(_, o)| matches!(**o, Order::Probe(_) | Order::Check(_)));
                // A probe or a check only reads (and watches): it needs no fencing write (its
                // report is checked as any).
                for order in probes {
                    let under = (*shard, claim.token.clone());
                    self.start(&mut tasks, &mut running, under, order, &changes_tx);
                }
                if deliveries.is_empty() || fencing.contains(shard) {
                    continue;
                }
                fencing.insert(*shard);
                tasks.spawn(self.clone().fence(claim.clone(), deliveries));
            }
        }
        tasks.shutdown().await;
    }

    /// Starts carrying out one order under a claim of its shard.
    fn start(
        self: &Arc<Self>,
        tasks: &mut JoinSet<Ended>,
        running: &mut Running,
        (shard, token): (ShardId, ClaimToken),
        (name, order): (OrderName, Arc<Order>),
        changes: &UnboundedSender<MemberChange>,
    ) {
        let (me, changes, key) = (self.clone(), changes.clone(), name.clone());
        let task = tasks.spawn(async move {
            let reported = me.carry_out(shard, &token, &name, &order, &changes).await;
            Ended::Order { name, reported }
        });
        running.insert(key, (shard, task));
    }

    /// Forgets the members of the shards this replica no longer acts for: stops watching them
    /// and drops their clients.
    fn stop_watching_others(&self, acting: &BTreeSet<ShardId>) {
        let mine = |member: &str| acting.contains(&assign::shard_of(member, self.shards));
        self.watched.lock().unwrap().retain(|m, _| mine(m));
        self.local.watches.keep_members(mine);
        crate::members::connect::keep_clients_of(mine);
    }

    /// Writes the shard's record under `claim` before its `pending` orders are acted on: a
    /// successor's claim makes the API server refuse it.
    async fn fence(
        self: Arc<Self>,
        mut claim: Claim,
        pending: Vec<(OrderName, Arc<Order>)>,
    ) -> Ended {
        let data = BTreeMap::from([("acting".to_string(), pending.len().to_string())]);
        let written = match claims::write(&self.objects, &self.names, &mut claim, &self.me, data)
            .await
        {
            Ok(()) => Ok(()),
            Err(ClaimError::Fenced { .. }) => Err(Fence::Claimed),
            Err(e) => {
                tracing::warn!(shard = %claim.shard, error = %e, "cannot write the shard's record; trying again");
                tokio::time::sleep(RETRY_AFTER_ERROR).await;
                Err(Fence::Failed)
            }
        };
        Ended::Fence {
            claim,
            pending,
            written,
        }
    }

    /// Carries out one order and reports it; whether the report was posted.
    async fn carry_out(
        &self,
        shard: ShardId,
        token: &ClaimToken,
        name: &OrderName,
        order: &Order,
        changes: &UnboundedSender<MemberChange>,
    ) -> bool {
        let body = match order {
            Order::Deliver(work) => self.deliver(name, work, changes).await,
            Order::Check(check) => ReportBody::Checked {
                order: name.clone(),
                changes: self.check(check, changes).await,
            },
            Order::Probe(probe) => {
                let members: Vec<_> = probe
                    .members
                    .iter()
                    .cloned()
                    .map(|m| m.into_member())
                    .collect();
                ReportBody::Probed {
                    order: name.clone(),
                    inventory: self
                        .local
                        .probe(&members)
                        .await
                        .map_err(|e| format!("{e:#}")),
                }
            }
        };
        let report = Report {
            shard,
            token: token.clone(),
            body,
        };
        let object =
            orders::report_object(&self.names, &self.names.delivered_report(name), &report);
        let shard_label = shard.0.to_string();
        let outcome = match order {
            Order::Deliver(_) => "delivered",
            Order::Probe(_) => "probed",
            Order::Check(_) => "checked",
        };
        match self.post(&object).await {
            Ok(()) => {
                self.metrics
                    .shard_orders
                    .get_or_create(&labels(&[("shard", &shard_label), ("outcome", outcome)]))
                    .inc();
                true
            }
            Err(e) => {
                tracing::warn!(order = %name, error = %e, "cannot report an order's result; it is carried out again");
                tokio::time::sleep(RETRY_AFTER_ERROR).await;
                false
            }
        }
    }

    /// Delivers one member's work: what its report says.
    async fn deliver(
        &self,
        name: &OrderName,
        order: &MemberWork,
        changes: &UnboundedSender<MemberChange>,
    ) -> ReportBody {
        let (outcomes, unreachable) = match self.works_of(order).await {
            Err(why) => (
                order
                    .works
                    .iter()
                    .map(|_| Outcome::Failed(why.clone()))
                    .collect(),
                BTreeMap::new(),
            ),
            Ok(works) => {
                let contexts: BTreeMap<String, String> = if order.context.is_empty() {
                    BTreeMap::new()
                } else {
                    BTreeMap::from([(order.member.clone(), order.context.clone())])
                };
                let watch = {
                    let mut watched = self.watched.lock().unwrap();
                    watch::add_delivered_kinds(&works, &mut watched)
                        .then(|| watch::with_contexts(&watched, &contexts))
                };
                let delivery = self.local.deliver(works, &order.commit, &contexts).await;
                if let Some(members) = watch {
                    self.local.watch(&members, changes);
                }
                let outcomes = delivery.results.into_iter().map(|(_, o)| o).collect();
                (outcomes, delivery.unreachable)
            }
        };
        ReportBody::Delivered {
            order: name.clone(),
            outcomes,
            unreachable,
        }
    }

    /// Compares the members of a shard taken over with what gitfleet applied there, by their
    /// records, and watches them from the lists compared (no change is lost between the two):
    /// what changed while no replica watched them, and each member that could not be checked
    /// as anything that may have changed. Nothing is pushed: the leader has only what differs
    /// delivered again.
    async fn check(
        &self,
        check: &CheckMembers,
        changes: &UnboundedSender<MemberChange>,
    ) -> Vec<MemberChange> {
        let unchecked = |member: &str, why: String| MemberChange {
            member: member.to_string(),
            placement_label: None,
            what: why,
            cause: RecheckCause::MayHaveChanged,
            deleted: false,
            object: None,
        };
        let members: Vec<Member> = check
            .members
            .iter()
            .map(|m| Member {
                target: MemberTarget {
                    name: m.name.clone(),
                    context: m.context.clone(),
                },
                declared: BTreeMap::new(),
                heartbeat: Duration::ZERO,
            })
            .collect();
        let records = self.local.records(&members).await;
        let contexts: HashMap<&str, &str> = check
            .members
            .iter()
            .map(|m| (m.name.as_str(), m.context.as_str()))
            .collect();
        let checks = records.into_iter().map(|(member, records)| {
            let context = contexts.get(member.as_str()).copied().unwrap_or_default();
            let target = MemberTarget {
                name: member,
                context: context.to_string(),
            };
            async move {
                let records = match records {
                    Ok(r) => r,
                    Err(e) => {
                        let why =
                            format!("its records could not be read after it changed owner: {e}");
                        return vec![unchecked(&target.name, why)];
                    }
                };
                let expected = watch::expected_of(records.values());
                self.watched
                    .lock()
                    .unwrap()
                    .entry(target.name.clone())
                    .or_default()
                    .extend(expected.keys().cloned());
                let answers = self.local.watches.check(
                    &self.local.kubeconfig,
                    &self.local.kubeconfig_path,
                    &target,
                    expected,
                    changes,
                );
                // Which statuses the member's works read is known from their deliveries, and
                // this owner made none yet: the leader re-reads those that read one.
                let mut found = vec![MemberChange {
                    member: target.name.clone(),
                    placement_label: None,
                    what: "statuses read there may have changed while it changed owner".into(),
                    cause: RecheckCause::StatusChanged,
                    deleted: false,
                    object: None,
                }];
                for answer in answers {
                    match answer.await {
                        Ok(changed) => found.extend(changed),
                        Err(_) => {
                            let why = "a kind it holds could not be listed after it changed owner";
                            found.push(unchecked(&target.name, why.to_string()));
                        }
                    }
                }
                found
            }
        });
        let found: Vec<Vec<MemberChange>> = futures_util::stream::iter(checks)
            .buffer_unordered(self.local.parallel_members.max(1))
            .collect()
            .await;
        let found: Vec<MemberChange> = found.into_iter().flatten().collect();
        tracing::info!(
            members = check.members.len(),
            changed = found
                .iter()
                .filter(|c| c.cause != RecheckCause::StatusChanged)
                .count(),
            "checked the members of a shard taken over"
        );
        found
    }

    /// An order's work with its manifests, fetched from the hosting cluster.
    async fn works_of(&self, order: &MemberWork) -> Result<Vec<Work>, String> {
        let mut works = Vec::with_capacity(order.works.len());
        for w in &order.works {
            let work = w
                .clone()
                .into_work(async |id| self.renderings.get(id).await);
            works.push(work.await.map_err(|e| e.to_string())?);
        }
        Ok(works)
    }

    /// Creates a report, or (a report of the same order left by an earlier delivery) replaces
    /// it.
    async fn post(&self, object: &ConfigMap) -> Result<(), kube::Error> {
        match self.objects.create(&PostParams::default(), object).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let name = object.metadata.name.clone().unwrap_or_default();
                self.objects
                    .replace(&name, &PostParams::default(), object)
                    .await
                    .map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// Reports `changes`, one report per shard, under the claims this replica acts by.
    fn report_changes(
        self: &Arc<Self>,
        changes: Vec<MemberChange>,
        claims: &BTreeMap<ShardId, Claim>,
    ) {
        let mut by_shard: BTreeMap<ShardId, Vec<MemberChange>> = BTreeMap::new();
        for c in changes {
            by_shard
                .entry(assign::shard_of(&c.member, self.shards))
                .or_default()
                .push(c);
        }
        for (shard, changes) in by_shard {
            // Changes of a shard this replica let go of are its next owner's to see.
            let Some(claim) = claims.get(&shard) else {
                continue;
            };
            let name = self
                .names
                .changes_report(&self.me, self.reports.fetch_add(1, Ordering::Relaxed));
            let report = Report {
                shard,
                token: claim.token.clone(),
                body: ReportBody::Changed { changes },
            };
            let object = orders::report_object(&self.names, &name, &report);
            let me = self.clone();
            tokio::spawn(async move {
                if let Err(e) = me.post(&object).await {
                    tracing::warn!(%shard, error = %e, "cannot report changes seen on the members");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::shards::orders::{order_object, ProbeMembers};

    #[test]
    fn a_watched_order_is_read_once_when_acted_on_and_an_unreadable_one_is_left_alone() {
        let names = Names {
            prefix: "gitfleet".into(),
        };
        let order = Order::Probe(ProbeMembers { members: vec![] });
        let name = names.order(&"r1".into(), 1);
        let cm = order_object(&names, &name, ShardId(3), &order);
        let mut watched = Watched::Unread(Box::new(cm.clone()));
        assert_eq!(watched.read().as_deref(), Some(&order));
        assert!(matches!(watched, Watched::Read(_)), "read once, kept read");
        assert_eq!(watched.read().as_deref(), Some(&order));

        let mut garbled = cm;
        for bytes in garbled.binary_data.iter_mut().flat_map(|d| d.values_mut()) {
            bytes.0 = b"not gzip".to_vec();
        }
        let mut watched = Watched::Unread(Box::new(garbled));
        assert_eq!(watched.read(), None);
        assert!(matches!(watched, Watched::Unreadable));
        assert_eq!(watched.read(), None);
    }
}
