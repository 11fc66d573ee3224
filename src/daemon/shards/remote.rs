//! The leader's side of sharded delivery: a [`Deliverer`] that hands each member's work to the
//! owner of the member's shard through the hosting cluster, and takes the owners' reports back.
//!
//! Every decision stays with the leader (its workers, retries and backoff run as without
//! shards); only the pushes, and the watches that follow them, move to the owners. Each
//! delivery is one order object; the owner answers with a report object that carries the token
//! of its claim of the shard's record. A report whose token the record no longer holds comes
//! from a deposed owner and is refused: the order stays for the owner that claimed the shard
//! since. Probes go the same way, gathered per shard for a moment so that a fleet's probes
//! make a few orders, not one per member. The members' records (read once, when a leader
//! starts without state) are still read by the leader itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::Api;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::claims::ClaimToken;
use super::orders::{
    self, CheckMembers, CheckedMember, MemberWork, Order, OrderName, OrderedWork, ProbeMembers,
    ProbedMember, Report, ReportBody,
};
use super::renderings::Published;
use super::slots::OwnerSlots;
use super::{assign, Names, ReplicaId, ShardId};
use crate::daemon::deliver::PushDeliverer;
use crate::daemon::watch::{Kind, MemberChange};
use crate::daemon::{Deliverer, Delivery};
use crate::members::inventory::Member;
use crate::rollout::{Outcome, Work};
use crate::schedule::{Inventory, InventoryCluster};

/// How long probes are gathered per shard before they are ordered together.
const PROBES_GATHERED_FOR: Duration = Duration::from_millis(50);

/// Probes waiting to be ordered, by shard: each member with where its answer goes.
type Gathering = HashMap<
    ShardId,
    Vec<(
        ProbedMember,
        oneshot::Sender<Result<Arc<InventoryCluster>, String>>,
    )>,
>;

/// Changes the owners reported, for the daemon's channel once the daemon has given it.
#[derive(Default)]
struct ChangesSink {
    to: Option<UnboundedSender<MemberChange>>,
    early: Vec<MemberChange>,
}

pub struct ShardedDeliverer {
    local: Arc<PushDeliverer>,
    objects: Api<ConfigMap>,
    names: Names,
    shards: u32,
    me: ReplicaId,
    renderings: Published,
    waiting: Mutex<HashMap<OrderName, oneshot::Sender<ReportBody>>>,
    /// Delivery orders outstanding, per owner.
    outstanding: OwnerSlots,
    /// The members probed so far, with their contexts: those a shard's new owner is told to
    /// check.
    members: Mutex<BTreeMap<String, String>>,
    probing: Mutex<Gathering>,
    sent: AtomicU64,
    changes: Mutex<ChangesSink>,
    /// How long an order may go unanswered (a push's own retries included) before its work
    /// counts as failed, to be ordered again at the next step.
    answer_within: Duration,
    /// The same for a probe (the member's own timeout included).
    probe_within: Duration,
    refused: prometheus_client::metrics::counter::Counter,
}

/// Where the leader's side works, and with what.
pub struct Hosting {
    pub objects: Api<ConfigMap>,
    pub secrets: Api<k8s_openapi::api::core::v1::Secret>,
    pub names: Names,
    pub shards: u32,
    pub me: ReplicaId,
}

impl ShardedDeliverer {
    pub fn new(
        local: Arc<PushDeliverer>,
        hosting: Hosting,
        (answer_within, probe_within): (Duration, Duration),
        refused: prometheus_client::metrics::counter::Counter,
    ) -> ShardedDeliverer {
        ShardedDeliverer {
            outstanding: OwnerSlots::new(local.parallel_members),
            local,
            renderings: Published::new(hosting.secrets, hosting.names.clone()),
            objects: hosting.objects,
            names: hosting.names,
            shards: hosting.shards,
            me: hosting.me,
            waiting: Mutex::default(),
            members: Mutex::default(),
            probing: Mutex::default(),
            sent: AtomicU64::new(0),
            changes: Mutex::default(),
            answer_within,
            probe_within,
            refused,
        }
    }

    /// Deletes the orders and reports an earlier leader left: their deliveries are done again
    /// by this leader's steps, and nobody waits for their answers.
    pub async fn clear_earlier(&self) -> Result<(), kube::Error> {
        for label in [orders::ORDER_LABEL, orders::REPORT_LABEL] {
            let selector = format!("{label}={}", self.names.prefix);
            self.objects
                .delete_collection(
                    &DeleteParams::default(),
                    &ListParams::default().labels(&selector),
                )
                .await?;
        }
        Ok(())
    }

    /// Takes the owners' reports until `stop`: answers to the orders waiting, changes to the
    /// daemon. Every report is deleted once read, accepted or not.
    pub async fn collect(self: Arc<Self>, records: Api<ConfigMap>, stop: CancellationToken) {
        let selector = format!("{}={}", orders::REPORT_LABEL, self.names.prefix);
        let reports = watcher(
            self.objects.clone(),
            watcher::Config::default().labels(&selector),
        )
        // A hosting cluster that does not answer is asked again after a growing pause.
        .default_backoff();
        let mut reports = std::pin::pin!(reports);
        let group = format!("{}={}", super::GROUP_LABEL, self.names.prefix);
        let claimed =
            watcher(records.clone(), watcher::Config::default().labels(&group)).default_backoff();
        let mut claimed = std::pin::pin!(claimed);
        let mut owners: HashMap<ShardId, ClaimToken> = HashMap::new();
        let mut gc = tokio::time::interval(Duration::from_secs(600));
        gc.tick().await;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                record = claimed.next() => {
                    if let Some(Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r))) = record {
                        if let Some((shard, members)) = self.claimed(&r, &mut owners) {
                            let me = self.clone();
                            tokio::spawn(async move { me.check(shard, members).await });
                        }
                    }
                    continue;
                }
                _ = gc.tick() => {
                    match self.renderings.collect_garbage().await {
                        Ok(n) if n > 0 => tracing::info!(deleted = n, "deleted renderings no order names"),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "cannot list the stored renderings"),
                    }
                    continue;
                }
                event = reports.next() => event,
            };
            let report = match event {
                Some(Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm))) => cm,
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching the shard owners' reports failed; resuming");
                    continue;
                }
                None => return,
            };
            let me = self.clone();
            let records = records.clone();
            tokio::spawn(async move { me.take(&records, &report).await });
        }
    }

    /// A shard's record as written: when a new claim replaces one this leader knew, the shard
    /// has a new owner, which has not watched its members yet: the shard and its members (with
    /// their contexts), for that owner to check.
    fn claimed(
        &self,
        record: &ConfigMap,
        owners: &mut HashMap<ShardId, ClaimToken>,
    ) -> Option<(ShardId, Vec<CheckedMember>)> {
        let name = record.metadata.name.as_deref().unwrap_or_default();
        let shard = self.names.shard_of_record(name)?;
        let token = ClaimToken::of_record(record)?;
        self.outstanding.owned_by(shard, token.holder());
        let before = owners.insert(shard, token.clone());
        if before.is_none() || before.as_ref() == Some(&token) {
            return None;
        }
        let members: Vec<CheckedMember> = self
            .members
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| assign::shard_of(m, self.shards) == shard)
            .map(|(name, context)| CheckedMember {
                name: name.clone(),
                context: context.clone(),
            })
            .collect();
        tracing::info!(%shard, members = members.len(), "a new owner took the shard: it checks its members");
        Some((shard, members))
    }

    /// Has the new owner of `shard` check `members` against what gitfleet applied there, and
    /// hands what it found changed to the daemon. An owner that does not answer in time (it
    /// died too, or the shard moved on before it answered) leaves every member to be checked
    /// again by the rollout: pushes that write nothing where nothing changed.
    async fn check(&self, shard: ShardId, members: Vec<CheckedMember>) {
        if members.is_empty() {
            return;
        }
        let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
        let order = Order::Check(CheckMembers { members });
        let changes = match self.ask(shard, &order, self.answer_within).await {
            Ok(ReportBody::Checked { changes, .. }) => {
                tracing::info!(%shard, changed = changes.len(), "the shard's new owner checked its members");
                changes
            }
            answer => {
                let why = match answer {
                    Err(why) => why,
                    Ok(_) => format!("{shard}'s owner answered for another order"),
                };
                tracing::warn!(%shard, error = %why, "the shard's members were not checked: each is checked again");
                names
                    .into_iter()
                    .map(|member| MemberChange {
                        what: format!("{shard} has a new owner, which did not check it"),
                        member,
                        placement_label: None,
                        cause: crate::rollout::state::RecheckCause::MayHaveChanged,
                        deleted: false,
                        object: None,
                    })
                    .collect()
            }
        };
        self.forward(changes);
    }

    /// Hands the owners' changes to the daemon (kept until the daemon gives its channel).
    fn forward(&self, changes: Vec<MemberChange>) {
        let mut sink = self.changes.lock().unwrap();
        match &sink.to {
            Some(to) => {
                for c in changes {
                    let _ = to.send(c);
                }
            }
            None => sink.early.extend(changes),
        }
    }

    /// Reads one report, acts on it if its owner still holds the shard, and deletes it.
    async fn take(&self, records: &Api<ConfigMap>, object: &ConfigMap) {
        let name = object.metadata.name.clone().unwrap_or_default();
        match orders::read_report(object) {
            Err(e) => tracing::warn!(error = %e, "an unreadable report: deleted"),
            Ok(report) => match records
                .get_opt(&self.names.shard_record(report.shard))
                .await
            {
                Err(e) => {
                    // Left for the next event of it (the watch's resync lists it again).
                    tracing::warn!(report = %name, error = %e, "cannot read the shard's record to check a report");
                    return;
                }
                Ok(record) => {
                    let current = record.as_ref().and_then(ClaimToken::of_record);
                    if accepts(current.as_ref(), &report) {
                        self.act_on(report);
                    } else {
                        self.refused.inc();
                        tracing::warn!(report = %name, shard = %report.shard, "refused a report of a deposed owner of the shard");
                    }
                }
            },
        }
        if let Err(e) = self.objects.delete(&name, &DeleteParams::default()).await {
            if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
                tracing::warn!(report = %name, error = %e, "cannot delete a report");
            }
        }
    }

    fn act_on(&self, report: Report) {
        match report.body {
            ReportBody::Delivered { ref order, .. }
            | ReportBody::Probed { ref order, .. }
            | ReportBody::Checked { ref order, .. } => {
                let waiting = self.waiting.lock().unwrap().remove(order);
                if let Some(waiting) = waiting {
                    let _ = waiting.send(report.body);
                }
            }
            ReportBody::Changed { changes } => self.forward(changes),
        }
    }

    /// One member's work, ordered from the owner of its shard and waited for.
    async fn order(
        &self,
        member: String,
        works: Vec<Work>,
        commit: &str,
        context: String,
    ) -> Delivery {
        let shard = assign::shard_of(&member, self.shards);
        let failed = |works: Vec<Work>, why: String| {
            Delivery::from(
                works
                    .into_iter()
                    .map(|w| (w, Outcome::Failed(why.clone())))
                    .collect::<Vec<_>>(),
            )
        };
        let mut ordered = Vec::with_capacity(works.len());
        for w in &works {
            match OrderedWork::of(w, async |m| self.renderings.store(m).await).await {
                Ok(o) => ordered.push(o),
                Err(e) => {
                    return failed(
                        works,
                        format!("cannot store the rendering in the hosting cluster: {e}"),
                    )
                }
            }
        }
        let order = Order::Deliver(MemberWork {
            member,
            context,
            commit: commit.to_string(),
            works: ordered,
        });
        let _turn = self.outstanding.acquire(shard).await;
        match self.ask(shard, &order, self.answer_within).await {
            Ok(ReportBody::Delivered {
                outcomes,
                unreachable,
                ..
            }) if outcomes.len() == works.len() => Delivery {
                results: works.into_iter().zip(outcomes).collect(),
                unreachable,
            },
            Ok(_) => failed(works, format!("{shard}'s owner answered for other work")),
            Err(why) => failed(works, why),
        }
    }

    /// Orders `order` from `shard`'s owner and waits for the answer at most `within`.
    async fn ask(
        &self,
        shard: ShardId,
        order: &Order,
        within: Duration,
    ) -> Result<ReportBody, String> {
        let name = self
            .names
            .order(&self.me, self.sent.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(name.clone(), tx);
        let object = orders::order_object(&self.names, &name, shard, order);
        if let Err(e) = self.objects.create(&PostParams::default(), &object).await {
            self.waiting.lock().unwrap().remove(&name);
            return Err(format!("cannot order it from {shard}'s owner: {e}"));
        }
        let answer = tokio::time::timeout(within, rx).await;
        self.waiting.lock().unwrap().remove(&name);
        if let Err(e) = self.objects.delete(&name.0, &DeleteParams::default()).await {
            tracing::debug!(order = %name, error = %e, "cannot delete an order");
        }
        match answer {
            Ok(Ok(body)) => Ok(body),
            _ => Err(format!(
                "{shard}'s owner did not answer within {} s",
                within.as_secs()
            )),
        }
    }

    /// Orders the probes gathered for `shard` and hands each member its answer.
    async fn probe_gathered(&self, shard: ShardId) {
        let gathered = self
            .probing
            .lock()
            .unwrap()
            .remove(&shard)
            .unwrap_or_default();
        if gathered.is_empty() {
            return;
        }
        let order = Order::Probe(ProbeMembers {
            members: gathered.iter().map(|(m, _)| m.clone()).collect(),
        });
        let answer = match self.ask(shard, &order, self.probe_within).await {
            Ok(ReportBody::Probed { inventory, .. }) => inventory,
            Ok(_) => Err(format!("{shard}'s owner answered for another order")),
            Err(why) => Err(why),
        };
        let mut clusters: HashMap<String, Arc<InventoryCluster>> = match &answer {
            Ok(inventory) => inventory
                .clusters
                .iter()
                .map(|c| (c.name.clone(), c.clone()))
                .collect(),
            Err(_) => HashMap::new(),
        };
        for (member, to) in gathered {
            let one = match &answer {
                Err(why) => Err(why.clone()),
                Ok(_) => clusters
                    .remove(&member.name)
                    .ok_or_else(|| format!("{shard}'s owner did not probe {}", member.name)),
            };
            let _ = to.send(one);
        }
    }
}

/// Whether a report is taken: only from the owner whose claim the shard's record holds now.
pub fn accepts(current: Option<&ClaimToken>, report: &Report) -> bool {
    current == Some(&report.token)
}

impl Deliverer for ShardedDeliverer {
    /// Each member probed by its shard's owner. The first probe of a shard gathers the others
    /// that come within a moment, and orders them all.
    async fn probe(&self, members: &[Member]) -> anyhow::Result<Inventory> {
        self.members.lock().unwrap().extend(
            members
                .iter()
                .map(|m| (m.target.name.clone(), m.target.context.clone())),
        );
        let mut answers = Vec::with_capacity(members.len());
        let mut leads = Vec::new();
        for m in members {
            let shard = assign::shard_of(&m.target.name, self.shards);
            let (tx, rx) = oneshot::channel();
            let first = {
                let mut probing = self.probing.lock().unwrap();
                let gathered = probing.entry(shard).or_default();
                gathered.push((ProbedMember::of(m), tx));
                gathered.len() == 1
            };
            if first {
                leads.push(shard);
            }
            answers.push(rx);
        }
        if !leads.is_empty() {
            tokio::time::sleep(PROBES_GATHERED_FOR).await;
            futures_util::future::join_all(leads.into_iter().map(|s| self.probe_gathered(s))).await;
        }
        let mut inventory = Inventory::default();
        for rx in answers {
            match rx.await {
                Ok(Ok(cluster)) => inventory.clusters.push(cluster),
                Ok(Err(why)) => anyhow::bail!(why),
                Err(_) => anyhow::bail!("the probe that gathered this one was dropped"),
            }
        }
        Ok(inventory)
    }

    /// Read by the leader itself, once, when it starts without state. The clients that read
    /// makes are not kept: the members' connections are their shards' owners' to hold.
    async fn records(&self, members: &[Member]) -> Vec<crate::push::fleet::MemberRecords> {
        let before = crate::members::connect::members_with_clients();
        let records = self.local.records(members).await;
        crate::members::connect::keep_clients_of(|m| before.contains(m));
        records
    }

    /// The owners watch what they deliver; this only takes the daemon's channel for what they
    /// report.
    fn watch(
        &self,
        _members: &BTreeMap<String, (String, std::collections::BTreeSet<Kind>)>,
        changes: &UnboundedSender<MemberChange>,
    ) {
        let mut sink = self.changes.lock().unwrap();
        if sink.to.is_none() {
            for c in std::mem::take(&mut sink.early) {
                let _ = changes.send(c);
            }
            sink.to = Some(changes.clone());
        }
    }

    async fn deliver(
        &self,
        work: Vec<Work>,
        commit: &str,
        contexts: &BTreeMap<String, String>,
    ) -> Delivery {
        let mut by_member: BTreeMap<String, Vec<Work>> = BTreeMap::new();
        for w in work {
            by_member.entry(w.cluster.clone()).or_default().push(w);
        }
        let orders = by_member.into_iter().map(|(member, works)| {
            let context = contexts.get(&member).cloned().unwrap_or_default();
            self.order(member, works, commit, context)
        });
        let mut all = Delivery::default();
        for d in futures_util::future::join_all(orders).await {
            all.results.extend(d.results);
            all.unreachable.extend(d.unreachable);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::shards::ShardId;

    #[test]
    fn only_a_report_under_the_records_current_claim_is_taken() {
        let token = |t: &str| -> ClaimToken { serde_json::from_str(&format!("\"{t}\"")).unwrap() };
        let report = Report {
            shard: ShardId(1),
            token: token("r1@1"),
            body: ReportBody::Changed { changes: vec![] },
        };
        assert!(accepts(Some(&token("r1@1")), &report));
        // Claimed by another owner since, or never claimed: a deposed (or stray) owner's.
        assert!(!accepts(Some(&token("r2@2")), &report));
        assert!(!accepts(None, &report));
    }
}
