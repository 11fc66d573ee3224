//! `gitfleet run`: follow a branch and reconcile every new head. The loop is I/O around the pure
//! rollout step ([`crate::rollout::step`] at rolling pace): read the commit, validate (a bad
//! commit is rejected and the last good one keeps being served), probe the members' inventory,
//! schedule with the stored bindings, step, deliver the work to members, absorb the outcomes,
//! and save the state crash-safely before anything else happens.

pub mod command;
pub mod deliver;
pub mod metrics;
pub mod server;
pub mod view;

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::members::inventory::{collect, members_of, Options as ProbeOptions};
use crate::rollout::conditions::{self, ClusterConditions};
use crate::rollout::{
    Action, ClusterState, Input, Outcome, Pacing, Rejected, RolloutState, StepSummary, Work,
};
use crate::schedule::{schedule_commit, Fleet, Inventory, PlacementSchedule};
use crate::state::StateStore;

/// How often a cluster whose objects are not available yet is looked at again (members are
/// not watched).
pub const AVAILABILITY_POLL: Duration = Duration::from_millis(500);

/// How long `--once` waits for workloads to become available before it gives up and exits.
pub const ONCE_AVAILABILITY_LIMIT: Duration = Duration::from_secs(300);

/// Delivers work to members (push). A trait so that the loop stays testable without members.
pub trait Deliverer: Send + Sync {
    /// `contexts` maps each member of the commit to its kubeconfig context.
    fn deliver(
        &self,
        work: Vec<Work>,
        commit: &str,
        contexts: &std::collections::BTreeMap<String, String>,
    ) -> impl Future<Output = Vec<(Work, Outcome)>> + Send;
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The repository commits are read from: the local one followed, or the mirror of `remote`.
    pub repo: PathBuf,
    /// The URL followed when `repo` is its mirror (fetched every `poll` and on the webhook).
    pub remote: Option<String>,
    pub branch: String,
    pub path: String,
    pub kubeconfig: PathBuf,
    pub state_dir: PathBuf,
    pub listen: Option<std::net::SocketAddr>,
    pub poll: Duration,
    pub once: bool,
    pub webhook_secret: Option<Vec<u8>>,
    pub probe: ProbeOptions,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Rejected>,
    pub placements: Vec<PlacementStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    #[serde(skip)]
    pub schedule: Vec<PlacementSchedule>,
    pub reconciles: u64,
    pub commits_rejected: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    pub id: String,
    pub strategy: String,
    pub target: usize,
    pub selected: Vec<String>,
    pub applying: Vec<String>,
    pub removing: Vec<String>,
    pub waiting: Vec<String>,
    pub up_to_date: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Per cluster: revision, health and last error, as stored.
    pub clusters: std::collections::BTreeMap<String, ClusterState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_resource_index: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selected_resources: Vec<String>,
    /// Placement-level conditions (KubeFleet's `ClusterResourcePlacement…` /
    /// `ResourcePlacement…` types; OCM's for OCM placements).
    pub conditions: Vec<crate::schedule::Condition>,
    /// Per selected cluster, KubeFleet's per-cluster conditions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_cluster: Vec<ClusterConditions>,
    /// Clusters whose last push failed, with the error (KubeFleet's failedPlacements).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub failed: std::collections::BTreeMap<String, String>,
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The daemon's working set.
pub struct Daemon<D: Deliverer> {
    opts: RunOptions,
    store: StateStore,
    state: RolloutState,
    deliverer: D,
    pub status: Arc<Mutex<Status>>,
    pub metrics: Arc<metrics::Metrics>,
    /// The last head reconciled, to count new commits once.
    last_head: Option<String>,
    /// The last commits analyzed (see [`Daemon::analyzed`]), oldest first, at most two.
    analyzed: Vec<Arc<Analyzed>>,
    /// The schedule last saved to the store, as the next reconcile's previous results.
    previous: Option<crate::schedule::Previous>,
}

/// One commit read from the repository and analyzed.
struct Analyzed {
    /// The id it was asked for.
    requested: String,
    /// Its full id.
    commit: String,
    cat: crate::catalog::Catalog,
    diags: Vec<crate::catalog::Diagnostic>,
}

impl<D: Deliverer> Daemon<D> {
    pub fn open(opts: RunOptions, deliverer: D) -> Result<Self> {
        let store = StateStore::open(&opts.state_dir)?;
        let state = store.load_rollout()?;
        let status = Arc::new(Mutex::new(Status {
            branch: opts.branch.clone(),
            serving: state.serving.clone(),
            rejected: state.rejected.clone(),
            ..Status::default()
        }));
        Ok(Self {
            opts,
            store,
            state,
            deliverer,
            status,
            metrics: Arc::new(metrics::Metrics::default()),
            last_head: None,
            analyzed: Vec::new(),
            previous: None,
        })
    }

    /// One reconcile of `head`; returns how long until the rollout wants another look
    /// (`None`: settled, wait for a new commit or the poll).
    pub async fn reconcile(&mut self, head: &str) -> Result<Option<Duration>> {
        let started = std::time::Instant::now();
        if self.last_head.as_deref() != Some(head) {
            self.metrics.commits_seen.inc();
            self.last_head = Some(head.to_string());
        }
        let result = self.reconcile_inner(head).await;
        self.metrics
            .reconcile_seconds
            .observe(started.elapsed().as_secs_f64());
        result
    }

    /// The commit `id` read and analyzed, kept for the next reconciles: a commit never changes,
    /// and a rollout reconciles the same one many times (every 500 ms while it waits for
    /// availability). The head and, behind a rejected head, the last good commit are kept.
    fn analyzed(&mut self, id: &str) -> Result<Arc<Analyzed>> {
        if let Some(a) = self.analyzed.iter().find(|a| a.requested == id) {
            return Ok(a.clone());
        }
        let files = crate::source::read_commit(&self.opts.repo, id, &self.opts.path)?;
        let (cat, diags) = crate::analyze(&files.files);
        let a = Arc::new(Analyzed {
            requested: id.to_string(),
            commit: files.commit,
            cat,
            diags,
        });
        if self.analyzed.len() == 2 {
            self.analyzed.remove(0);
        }
        self.analyzed.push(a.clone());
        Ok(a)
    }

    async fn reconcile_inner(&mut self, head: &str) -> Result<Option<Duration>> {
        let analyzed = self.analyzed(head)?;
        let diags = &analyzed.diags;
        let commit = if diags.is_empty() {
            self.state.rejected = None;
            head.to_string()
        } else {
            let errors: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
            if self.state.rejected.as_ref().map(|r| r.commit.as_str()) != Some(head) {
                tracing::error!(
                    commit = head,
                    errors = errors.len(),
                    "commit rejected: {}",
                    errors.join("; ")
                );
                self.status.lock().unwrap().commits_rejected += 1;
                self.metrics.commits_rejected.inc();
            }
            self.state.rejected = Some(Rejected {
                commit: head.to_string(),
                errors,
            });
            self.store.save_rollout(&self.state)?;
            self.publish(None, vec![], None);
            match self.state.serving.clone() {
                // Keep rolling out the last good commit; nothing is deleted because of the bad one.
                Some(good) if good != head => good,
                _ => return Ok(None),
            }
        };
        let analyzed = if commit == head {
            analyzed
        } else {
            self.analyzed(&commit)?
        };
        let cat = &analyzed.cat;
        let commit = analyzed.commit.clone();
        if self.state.serving.as_deref() != Some(commit.as_str()) {
            tracing::info!(commit = %commit, "serving new commit");
        }
        self.state.serving = Some(commit.clone());

        let members = members_of(&[cat]);
        let inventory = collect(&members, &self.opts.kubeconfig, &self.opts.probe)
            .await
            .context("cannot probe the members")?;
        for c in &inventory.clusters {
            self.metrics
                .member_healthy
                .get_or_create(&metrics::labels(&[("member", &c.name)]))
                .set(i64::from(c.healthy));
        }
        for c in inventory.clusters.iter().filter(|c| !c.healthy) {
            tracing::warn!(member = %c.name, error = c.error.as_deref().unwrap_or(""), "member unhealthy");
        }
        let now = now_unix();
        let eligible = self.state.remember_probe(&inventory, now);
        let fleet = Fleet::build(cat, Some(&eligible));
        // The last reconcile's results, kept in memory; read from the store after a restart or
        // a failed reconcile.
        let previous = match self.previous.take() {
            Some(p) => p,
            None => self.store.load_schedule()?.1,
        };
        let mut schedule = schedule_commit(cat, &fleet, &previous, now as i64);
        // A member that did not answer its probe is not pushed to now: its work fails at once
        // with the probe's error (and is retried next time), so it cannot hold up the step.
        let unreachable: std::collections::BTreeMap<String, String> = inventory
            .clusters
            .iter()
            .filter(|c| !c.healthy)
            .map(|c| {
                let why = c.error.as_deref().unwrap_or("no answer");
                (c.name.clone(), format!("member unreachable: {why}"))
            })
            .collect();
        let input = Input {
            cat,
            commit: &commit,
            schedule: &schedule,
            fleet: &fleet,
            unreachable: &unreachable,
            only: None,
            now,
        };
        let decision = crate::rollout::step(&input, &self.state, Pacing::Rolling);
        for s in &decision.steps {
            if !s.applying.is_empty() || !s.removing.is_empty() {
                tracing::info!(placement = %s.placement, applying = ?s.applying, removing = ?s.removing, waiting = ?s.waiting, "rollout step");
            }
        }
        let contexts = crate::members::member_targets(cat)
            .into_iter()
            .map(|t| (t.name, t.context))
            .collect();
        let mut results = self
            .deliverer
            .deliver(decision.work, &commit, &contexts)
            .await;
        results.extend(
            decision
                .held
                .into_iter()
                .map(|(w, why)| (w, Outcome::Failed(why))),
        );
        for (w, o) in &results {
            let outcome = match (o, &w.action) {
                (Outcome::Failed(e), _) => {
                    tracing::warn!(placement = %w.placement, cluster = %w.cluster, error = %e, "push failed");
                    "failed"
                }
                (Outcome::Done(..), Action::Remove { .. }) => "removed",
                (Outcome::Done(..), Action::Apply { .. }) => "applied",
            };
            self.metrics
                .pushes
                .get_or_create(&metrics::labels(&[
                    ("member", &w.cluster),
                    ("outcome", outcome),
                ]))
                .inc();
        }
        // A step moved the rollout when a binding changed what it runs or became available;
        // re-reading a cluster that is still pending is not progress and is paced by the
        // availability poll.
        let progressed = results.iter().any(|(w, o)| match o {
            Outcome::Done(health, _) => {
                !matches!(w.action, Action::Apply { refresh: true, .. })
                    || *health != crate::rollout::BindingHealth::Pending
            }
            Outcome::Failed(_) => false,
        });
        let pending = results
            .iter()
            .any(|(_, o)| matches!(o, Outcome::Done(crate::rollout::BindingHealth::Pending, _)));
        let failed = results.iter().any(|(_, o)| matches!(o, Outcome::Failed(_)));
        crate::rollout::absorb(
            &mut self.state,
            &mut schedule,
            decision.ledger,
            results,
            &commit,
            now,
        );
        // Bindings first: a crash between the two writes re-applies one step (idempotent), it
        // never forgets one.
        self.store.save_schedule(&commit, &schedule)?;
        self.previous = Some(
            schedule
                .iter()
                .map(|p| (p.key.clone(), p.clone()))
                .collect(),
        );
        self.store.save_rollout(&self.state)?;

        let unsettled = decision
            .steps
            .iter()
            .filter(|s| !s.waiting.is_empty() || !s.applying.is_empty() || !s.removing.is_empty())
            .count();
        let requeue = if progressed {
            // Something moved: look again at once to take the next step.
            Some(Duration::ZERO)
        } else if pending {
            Some(AVAILABILITY_POLL)
        } else if failed || unsettled > 0 {
            let wait = decision
                .steps
                .iter()
                .map(|s| s.requeue_after)
                .filter(|w| *w > 0)
                .min()
                .unwrap_or(5);
            Some(Duration::from_secs(wait.min(60)))
        } else {
            None
        };
        self.metrics.rollout_clusters.clear();
        for s in &decision.steps {
            for (state, n) in [
                ("upToDate", s.up_to_date.len()),
                ("waiting", s.waiting.len()),
                ("applying", s.applying.len()),
                ("removing", s.removing.len()),
            ] {
                self.metrics
                    .rollout_clusters
                    .get_or_create(&metrics::labels(&[
                        ("placement", &s.placement.to_string()),
                        ("state", state),
                    ]))
                    .set(n as i64);
            }
        }
        self.publish(Some(inventory), decision.steps, Some(schedule));
        Ok(requeue)
    }

    fn publish(
        &self,
        inventory: Option<Inventory>,
        steps: Vec<StepSummary>,
        schedule: Option<Vec<PlacementSchedule>>,
    ) {
        let mut st = self.status.lock().unwrap();
        st.serving = self.state.serving.clone();
        st.rejected = self.state.rejected.clone();
        if let Some(inv) = inventory {
            st.inventory = Some(inv);
        }
        if let Some(schedule) = schedule {
            st.placements = steps
                .into_iter()
                .map(|s| {
                    let stored = self.state.placements.get(&s.placement);
                    let sched = schedule.iter().find(|p| p.key == s.placement);
                    let (conditions, per_cluster) = conditions::of_step(&s, sched, stored);
                    let failed = stored
                        .map(|p| {
                            p.clusters
                                .iter()
                                .filter_map(|(c, st)| Some((c.clone(), st.last_error.clone()?)))
                                .collect()
                        })
                        .unwrap_or_default();
                    PlacementStatus {
                        selected: sched.map(|p| p.selected.clone()).unwrap_or_default(),
                        conditions,
                        per_cluster,
                        failed,
                        selected_resources: s.selected_resources.clone(),
                        clusters: stored.map(|p| p.clusters.clone()).unwrap_or_default(),
                        observed_resource_index: stored
                            .and_then(|p| p.resources.latest().map(|r| r.index)),
                        id: s.placement.to_string(),
                        strategy: s.strategy,
                        target: s.target,
                        applying: s.applying,
                        removing: s.removing,
                        waiting: s.waiting,
                        up_to_date: s.up_to_date,
                        note: s.note,
                    }
                })
                .collect();
            st.schedule = schedule;
            st.reconciles += 1;
        }
    }

    /// Follows the branch until `shutdown` resolves (or, with `--once`, until the rollout
    /// settles or stops progressing).
    pub async fn run(
        mut self,
        mut wake: tokio::sync::mpsc::UnboundedReceiver<()>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<()> {
        let mut follower = match &self.opts.remote {
            None => crate::follow::Follower::local(&self.opts.repo, &self.opts.branch)?,
            Some(url) => crate::follow::Follower::remote(
                crate::follow::remote::Mirror::open(url, &self.opts.state_dir)?,
                &self.opts.branch,
                self.opts.poll,
            ),
        };
        tokio::pin!(shutdown);
        let once_started = std::time::Instant::now();
        loop {
            let head = match follower.newest_head().await {
                Ok(head) => Some(head),
                Err(e) if self.opts.once => return Err(e.into()),
                Err(e) => {
                    // What is deployed stays; the mirror's head (if any) keeps being served.
                    tracing::error!(error = %e, "cannot follow the branch; retrying at the next poll");
                    follower.current_head().ok()
                }
            };
            let Some(head) = head else {
                tokio::select! {
                    _ = &mut shutdown => return Ok(()),
                    _ = follower.changed() => {}
                    _ = wake.recv() => follower.wake(),
                    _ = tokio::time::sleep(self.opts.poll) => {}
                }
                continue;
            };
            self.status.lock().unwrap().head = Some(head.clone());
            let requeue = match self.reconcile(&head).await {
                Ok(r) => r,
                Err(e) if self.opts.once => return Err(e),
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "reconcile failed; retrying");
                    Some(Duration::from_secs(5))
                }
            };
            if self.opts.once {
                // Keep stepping while the rollout moves or waits for availability (bounded:
                // a workload that never becomes available must not hang a one-shot run).
                let waiting_for_availability = requeue == Some(AVAILABILITY_POLL)
                    && once_started.elapsed() < ONCE_AVAILABILITY_LIMIT;
                if requeue != Some(Duration::ZERO) && !waiting_for_availability {
                    return Ok(());
                }
            }
            let wait = requeue.unwrap_or(self.opts.poll).min(self.opts.poll);
            tokio::select! {
                _ = &mut shutdown => {
                    tracing::info!("shutting down; state is saved");
                    return Ok(());
                }
                _ = follower.changed() => {}
                _ = wake.recv() => follower.wake(),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}
