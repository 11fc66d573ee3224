//! The leader's side of sharded delivery: a [`Deliverer`] that hands each member's work to the
//! owner of the member's shard through the hosting cluster, and takes the owners' reports back.
//!
//! Every decision stays with the leader (its workers, retries and backoff run as without
//! shards); only the pushes, and the watches that follow them, move to the owners. Each
//! delivery is one order object; the owner answers with a report object that carries the token
//! of its claim of the shard's record. A report whose token the record no longer holds comes
//! from a deposed owner and is refused: the order stays for the owner that claimed the shard
//! since. Probes and the members' records are still read by the leader itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::Api;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::claims::ClaimToken;
use super::orders::{self, Order, OrderName, OrderedWork, Report, ReportBody};
use super::renderings::Published;
use super::{assign, Names, ReplicaId};
use crate::daemon::deliver::PushDeliverer;
use crate::daemon::watch::{Kind, MemberChange};
use crate::daemon::{Deliverer, Delivery};
use crate::members::inventory::Member;
use crate::rollout::{Action, Outcome, Work};
use crate::schedule::Inventory;

/// What an owner answered for one order.
struct Answer {
    outcomes: Vec<Outcome>,
    unreachable: BTreeMap<String, String>,
}

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
    waiting: Mutex<HashMap<OrderName, oneshot::Sender<Answer>>>,
    sent: AtomicU64,
    changes: Mutex<ChangesSink>,
    /// How long an order may go unanswered (a push's own retries included) before its work
    /// counts as failed, to be ordered again at the next step.
    answer_within: Duration,
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
        answer_within: Duration,
        refused: prometheus_client::metrics::counter::Counter,
    ) -> ShardedDeliverer {
        ShardedDeliverer {
            local,
            renderings: Published::new(hosting.secrets, hosting.names.clone()),
            objects: hosting.objects,
            names: hosting.names,
            shards: hosting.shards,
            me: hosting.me,
            waiting: Mutex::default(),
            sent: AtomicU64::new(0),
            changes: Mutex::default(),
            answer_within,
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
        );
        let mut reports = std::pin::pin!(reports);
        let mut gc = tokio::time::interval(Duration::from_secs(600));
        gc.tick().await;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
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
            ReportBody::Delivered {
                order,
                outcomes,
                unreachable,
            } => {
                if let Some(waiting) = self.waiting.lock().unwrap().remove(&order) {
                    let _ = waiting.send(Answer {
                        outcomes,
                        unreachable,
                    });
                }
            }
            ReportBody::Changed { changes } => {
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
            let id = match &w.action {
                Action::Apply { manifests, .. } => match self.renderings.store(manifests).await {
                    Ok(id) => Some(id),
                    Err(e) => {
                        return failed(
                            works,
                            format!("cannot store the rendering in the hosting cluster: {e}"),
                        )
                    }
                },
                Action::Remove { .. } => None,
            };
            ordered.push(OrderedWork::of(w, |_| {
                id.expect("an apply's rendering is stored")
            }));
        }
        let order = Order {
            member,
            context,
            commit: commit.to_string(),
            works: ordered,
        };
        let name = self
            .names
            .order(&self.me, self.sent.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(name.clone(), tx);
        let object = orders::order_object(&self.names, &name, shard, &order);
        if let Err(e) = self.objects.create(&PostParams::default(), &object).await {
            self.waiting.lock().unwrap().remove(&name);
            return failed(
                works,
                format!("cannot order the delivery from {shard}'s owner: {e}"),
            );
        }
        let answer = tokio::time::timeout(self.answer_within, rx).await;
        self.waiting.lock().unwrap().remove(&name);
        if let Err(e) = self.objects.delete(&name.0, &DeleteParams::default()).await {
            tracing::debug!(order = %name, error = %e, "cannot delete an order");
        }
        match answer {
            Ok(Ok(answer)) if answer.outcomes.len() == works.len() => Delivery {
                results: works.into_iter().zip(answer.outcomes).collect(),
                unreachable: answer.unreachable,
            },
            Ok(Ok(_)) => failed(works, format!("{shard}'s owner answered for other work")),
            _ => failed(
                works,
                format!(
                    "{shard}'s owner did not answer within {} s",
                    self.answer_within.as_secs()
                ),
            ),
        }
    }
}

/// Whether a report is taken: only from the owner whose claim the shard's record holds now.
pub fn accepts(current: Option<&ClaimToken>, report: &Report) -> bool {
    current == Some(&report.token)
}

impl Deliverer for ShardedDeliverer {
    async fn probe(&self, members: &[Member]) -> anyhow::Result<Inventory> {
        self.local.probe(members).await
    }

    async fn records(&self, members: &[Member]) -> Vec<crate::push::fleet::MemberRecords> {
        self.local.records(members).await
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
