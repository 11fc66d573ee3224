//! Delivering a step's work through [`crate::push`] (one push per member, see
//! [`crate::push::work`]), and the per-placement results back as binding health for the
//! rollout.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kube::config::Kubeconfig;

use super::Deliverer;
use crate::members::inventory::{collect_with, Member, Options as ProbeOptions};
use crate::push::{
    member_pushes, push_fleet, Availability, Outcome as ObjectOutcome, PlacementResult, PushOptions,
};
use crate::rollout::{BindingHealth, Observed, Outcome, Work};
use crate::schedule::Inventory;

pub struct PushDeliverer {
    pub kubeconfig: Arc<Kubeconfig>,
    pub kubeconfig_path: PathBuf,
    /// How members are probed for their inventory.
    pub probe: ProbeOptions,
    pub parallel_members: usize,
    pub parallel_requests: usize,
    pub retry_budget: std::time::Duration,
    /// Marks the records of the placements it writes (see [`crate::push::writer`]).
    pub writer: crate::push::writer::Identity,
    /// How OCM feedback values that are not scalars are reported.
    pub feedback_raw_json: crate::feedback::RawJson,
    /// Unix seconds, for the untrackable-availability clock.
    pub clock: fn() -> u64,
    /// The watches of what was delivered (`gitfleet run`).
    pub watches: super::watch::Watches,
    /// Deliveries in flight at once, across the members' workers (`parallel_members` of
    /// them; made on first use).
    pub slots: MemberSlots,
}

/// The bound on deliveries in flight across every member's worker: each worker delivers on its
/// own, so `push_fleet`'s bound within one delivery no longer spans the fleet.
#[derive(Default)]
pub struct MemberSlots(std::sync::OnceLock<Arc<tokio::sync::Semaphore>>);

impl MemberSlots {
    fn get(&self, size: usize) -> Arc<tokio::sync::Semaphore> {
        self.0
            .get_or_init(|| Arc::new(tokio::sync::Semaphore::new(size.max(1))))
            .clone()
    }
}

/// One line per difference push found on an object: `Kind ns/name: path: observed → desired`.
fn diff_lines(o: &crate::push::ObjectResult) -> Vec<String> {
    let show = |v: &Option<serde_json::Value>| {
        v.as_ref().map_or("(absent)".to_string(), |v| v.to_string())
    };
    o.diffs
        .iter()
        .map(|d| {
            format!(
                "{}: {}: {} → {}",
                o.object,
                d.path,
                show(&d.observed),
                show(&d.desired)
            )
        })
        .collect()
}

/// `Kind ns/name: why` for every object of the result that is not available yet.
fn not_available(result: &PlacementResult) -> Vec<String> {
    result
        .objects
        .iter()
        .filter_map(|o| match &o.availability {
            Some(Availability::NotYet(why)) => Some(format!("{}: {why}", o.object)),
            _ => None,
        })
        .collect()
}

/// The binding health one placement's push result stands for (KubeFleet's binding
/// conditions: Applied, Available, DiffReported).
pub fn health_of(result: &PlacementResult, now: u64) -> Result<BindingHealth, String> {
    if let Some(e) = &result.error {
        return Err(e.clone());
    }
    if let Some(o) = result.objects.iter().find(|o| o.outcome.is_failure()) {
        // Drift and refused takeovers carry their differences: say which fields.
        let diffs = diff_lines(o);
        let diffs = if diffs.is_empty() {
            String::new()
        } else {
            format!(" ({})", diffs.join("; "))
        };
        return Err(format!(
            "{}: {:?}{}{diffs}",
            o.object,
            o.outcome,
            o.error
                .as_deref()
                .map_or(String::new(), |e| format!(": {e}"))
        ));
    }
    if result
        .objects
        .iter()
        .any(|o| matches!(o.outcome, ObjectOutcome::Diffed | ObjectOutcome::NoDiff))
    {
        return Ok(BindingHealth::DiffReported);
    }
    let mut untrackable = false;
    for o in &result.objects {
        match &o.availability {
            Some(Availability::NotYet(_)) => return Ok(BindingHealth::Pending),
            Some(Availability::NotTrackable) => untrackable = true,
            _ => {}
        }
    }
    Ok(if untrackable {
        BindingHealth::AvailableUntrackable { since: now }
    } else {
        BindingHealth::Available
    })
}

impl PushDeliverer {
    /// Records, before the push, the objects whose status `work`'s rules may read: the push reads
    /// them early, and a status change that lands between that read and the end of the delivery
    /// (a Deployment becoming ready while the rest is written) must reach the watch as a change
    /// to read again, not be dropped as nothing gitfleet reads. A superset until the delivery
    /// ends (the member resolves which rules hold for an object); then what the push read.
    fn read_from_the_start(&self, work: &[Work]) {
        for w in work {
            let crate::rollout::Action::Apply { manifests, .. } = &w.action else {
                continue;
            };
            let read: std::collections::HashSet<crate::push::ObjectRef> = manifests
                .iter()
                .filter(|m| {
                    m.work
                        .as_ref()
                        .is_some_and(|c| c.manifest_configs.iter().any(|o| o.reads_status()))
                })
                .map(|m| crate::push::ObjectRef::of(&m.value))
                .collect();
            if !read.is_empty() {
                self.watches
                    .status_reads
                    .record(&w.cluster, &w.placement.record_key(), read);
            }
        }
    }
}

impl Deliverer for PushDeliverer {
    fn watch(
        &self,
        members: &BTreeMap<String, (String, std::collections::BTreeSet<super::watch::Kind>)>,
        changes: &tokio::sync::mpsc::UnboundedSender<super::watch::MemberChange>,
    ) {
        for (name, (context, kinds)) in members {
            let target = crate::members::MemberTarget {
                name: name.clone(),
                context: context.clone(),
            };
            self.watches.ensure(
                &self.kubeconfig,
                &self.kubeconfig_path,
                &target,
                kinds,
                changes,
            );
        }
    }

    async fn records(&self, members: &[Member]) -> Vec<crate::push::fleet::MemberRecords> {
        let opts = PushOptions {
            commit: String::new(),
            parallel_members: self.parallel_members,
            parallel_requests: self.parallel_requests,
            retry_budget: self.retry_budget,
            writer: self.writer.clone(),
            feedback_raw_json: self.feedback_raw_json,
        };
        let targets = members.iter().map(|m| m.target.clone()).collect();
        crate::push::fleet::records_of(&self.kubeconfig, &self.kubeconfig_path, targets, &opts)
            .await
    }

    async fn probe(&self, members: &[Member]) -> anyhow::Result<Inventory> {
        let kubeconfig = self.kubeconfig.clone();
        Ok(collect_with(members, kubeconfig, &self.kubeconfig_path, &self.probe).await)
    }

    async fn deliver(
        &self,
        work: Vec<Work>,
        commit: &str,
        contexts: &BTreeMap<String, String>,
    ) -> super::Delivery {
        // A delivery under `--once` carries the whole fleet in one (bounded by push_fleet).
        let _slot = self
            .slots
            .get(self.parallel_members)
            .acquire_owned()
            .await
            .expect("never closed");
        self.read_from_the_start(&work);
        let members = member_pushes(&work, &[], contexts);
        let opts = PushOptions {
            commit: commit.to_string(),
            parallel_members: self.parallel_members,
            parallel_requests: self.parallel_requests,
            retry_budget: self.retry_budget,
            writer: self.writer.clone(),
            feedback_raw_json: self.feedback_raw_json,
        };
        let results = push_fleet(
            &self.kubeconfig,
            &self.kubeconfig_path,
            members,
            &opts,
            Arc::new(|_| {}),
        )
        .await;
        let now = (self.clock)();
        // The member's first request failed (after push's retries): the member, not one of
        // its placements, is failing.
        let unreachable = results
            .iter()
            .filter_map(|m| Some((m.member.clone(), m.error.clone()?)))
            .collect();
        type Health = Result<(BindingHealth, Observed), String>;
        let mut by_key: BTreeMap<(String, String), Health> = BTreeMap::new();
        for m in &results {
            for p in &m.placements {
                let read = p.objects.iter().filter(|o| o.feedback.is_some());
                self.watches.status_reads.record(
                    &m.member,
                    &p.placement,
                    read.map(|o| o.object.clone()).collect(),
                );
                let observed = Observed {
                    diffs: p.objects.iter().flat_map(diff_lines).collect(),
                    not_available: not_available(p),
                    work_status: crate::feedback::WorkStatus::of(
                        p.objects
                            .iter()
                            .filter_map(|o| o.feedback.clone())
                            .collect(),
                    ),
                };
                by_key.insert(
                    (m.member.clone(), p.placement.clone()),
                    health_of(p, now).map(|h| (h, observed)),
                );
            }
        }
        let results = work
            .into_iter()
            .map(|w| {
                let key = (w.cluster.clone(), w.placement.record_key());
                let outcome = match by_key.remove(&key) {
                    Some(Ok((health, observed))) => Outcome::Done(health, observed),
                    Some(Err(e)) => Outcome::Failed(e),
                    None => {
                        Outcome::Failed("the member reported nothing for this placement".into())
                    }
                };
                (w, outcome)
            })
            .collect();
        super::Delivery {
            results,
            unreachable,
        }
    }
}
