//! One reconcile of a head, the I/O around the rollout core: read and validate the commit (a bad
//! one is rejected and the last good one keeps being served), probe the members, absorb the
//! deliveries the members' workers finished since the last step, schedule with the stored
//! bindings and step at rolling pace (both on the blocking pool), hand the work to the members'
//! workers (`--once`: deliver it and wait), absorb what is known of it, save the state
//! crash-safely (bindings first), publish the status — and decide, from what happened, when to
//! look again ([`crate::rollout::next_wake`]; a finished delivery is an event of its own).

use crate::fast_hash::{HashMap, HashSet};
use crate::rollout::staged::status::RunPhase;
use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::error::ReconcileError;
use super::{blocking, metrics, Action, Daemon, Deliverer, PlacementStatus};
use crate::api::shared_status::{SelectedClusters, StepClusters};
use crate::members::inventory::members_of;
use crate::rollout::conditions;
use crate::rollout::{BindingHealth, Input, Outcome, Pacing, Rejected, StepSummary, Work};
use crate::schedule::{schedule_commit_memoized, Fleet, Inventory, PlacementSchedule};

/// One commit read from the repository and analyzed.
pub(super) struct Analyzed {
    /// The id it was asked for.
    requested: String,
    /// Its full id.
    commit: String,
    /// Its message (the deletion guard's release trailer).
    message: String,
    cat: crate::catalog::Catalog,
    diags: Vec<crate::catalog::Diagnostic>,
    /// Its placements' selections, made once per commit: the step takes them from here.
    selected: crate::snapshot::Selected,
    /// Its placements held for invalid resource selectors, worked out once per commit.
    invalid: crate::snapshot::InvalidSelections,
    /// Its members, and each one's kubeconfig context by name: a function of the commit, asked
    /// for at every look (building them each time is a large share of a look).
    members: Arc<[crate::members::inventory::Member]>,
    contexts: BTreeMap<String, String>,
    /// Its likely mistakes ([`crate::lint`]), as the status shows them; none for an invalid
    /// commit, whose diagnostics say more.
    warnings: Vec<String>,
}

/// What reading the last commit leaves for reading the next: most of a new commit's files
/// are the last one's, so their blobs are not inflated and their documents not parsed again.
#[derive(Debug, Default)]
pub(super) struct ReadCache {
    blobs: crate::source::BlobCache,
    parsed: crate::catalog::ParseCache,
}

/// Commit `requested` read and analyzed, parsing only the files `cache` has not seen as they are.
fn read_analyzed(
    repo: &std::path::Path,
    requested: String,
    path: &str,
    sources: &crate::sources::Sources,
    cache: &mut ReadCache,
) -> Result<Analyzed> {
    let files =
        crate::sources::read_commit_cached(repo, &requested, path, &mut cache.blobs, sources)?;
    for skipped in &files.skipped {
        tracing::warn!(commit = %files.commit, "{skipped}");
    }
    let (cat, diags) = files.analyze_cached(&mut cache.parsed);
    let selected = crate::snapshot::select_all(&cat);
    let invalid = crate::snapshot::invalid_of(&cat, &selected);
    let warnings = if diags.is_empty() {
        crate::lint::lint(&cat)
            .iter()
            .map(|w| w.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let members: Arc<[_]> = members_of(&[&cat]).into();
    let contexts = members
        .iter()
        .map(|m| (m.target.name.clone(), m.target.context.clone()))
        .collect();
    Ok(Analyzed {
        requested,
        commit: files.commit,
        message: files.message,
        cat,
        diags,
        selected,
        invalid,
        members,
        contexts,
        warnings,
    })
}

/// One step of a commit, before its effects are saved.
struct Stepped {
    inventory: Arc<Inventory>,
    schedule: Vec<Arc<PlacementSchedule>>,
    decision: crate::rollout::Decision,
    now: u64,
    /// The previous results the step started from, when they are still what the store holds
    /// (no delivery absorbed into them since they were saved).
    saved: Option<crate::schedule::Previous>,
}

impl<D: Deliverer> Daemon<D> {
    /// One reconcile of `head`; returns when the rollout wants another look.
    pub async fn reconcile(&mut self, head: &str) -> Result<Action, ReconcileError> {
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

    /// The commit `id` read and analyzed (on the blocking pool), kept for the next reconciles:
    /// a commit never changes, and a rollout reconciles the same one many times (every 500 ms
    /// while it waits for availability). The head and, behind a rejected head, the last good
    /// commit are kept.
    async fn analyzed(&mut self, id: &str) -> Result<Arc<Analyzed>> {
        if let Some(a) = self.analyzed.iter().find(|a| a.requested == id) {
            return Ok(a.clone());
        }
        let (repo, path, requested) = (
            self.opts.repo.clone(),
            self.opts.path.clone(),
            id.to_string(),
        );
        let sources = self.opts.sources.clone();
        // The read cache is lent to the blocking pool and comes back whether or not the read
        // succeeds.
        let mut cache = std::mem::take(&mut self.read_cache);
        let (a, cache) = blocking(move || {
            let analyzed = read_analyzed(&repo, requested, &path, &sources, &mut cache);
            (analyzed, cache)
        })
        .await?;
        self.read_cache = cache;
        self.metrics.source_renders(&self.opts.sources);
        let a = a?;
        let a = Arc::new(a);
        if self.analyzed.len() == 2 {
            self.analyzed.remove(0);
        }
        self.analyzed.push(a.clone());
        Ok(a)
    }

    /// Saves the rollout state, and the schedule first when given (a crash between the two
    /// writes re-applies one step, which is idempotent; it never forgets one), on the blocking
    /// pool.
    async fn save(
        &mut self,
        schedule: Option<(String, Vec<Arc<PlacementSchedule>>)>,
    ) -> Result<Vec<Arc<PlacementSchedule>>, ReconcileError> {
        let store = self.store.clone();
        let state = std::mem::take(&mut self.state);
        let (state, saved) = blocking(move || {
            let saved = store.save(
                schedule.as_ref().map(|(c, s)| (c.as_str(), s.as_slice())),
                &state,
            );
            (
                state,
                saved.map(|()| schedule.map(|(_, s)| s).unwrap_or_default()),
            )
        })
        .await?;
        self.state = state;
        let saved = saved?;
        if self.saved_evictions != self.state.evictions {
            self.saved_evictions = self.state.evictions.clone();
        }
        Ok(saved)
    }

    /// The rules between the head and the commit being served (a staged update run's
    /// immutable fields, ...): problems of the head as an update of that commit.
    async fn update_problems(&mut self, head: &Analyzed) -> Result<Vec<String>> {
        let Some(good) = self.state.serving.clone() else {
            return Ok(vec![]);
        };
        if good == head.commit {
            return Ok(vec![]);
        }
        let old = self.analyzed(&good).await?;
        Ok(head
            .cat
            .update_diagnostics(&old.cat)
            .iter()
            .map(|d| d.to_string())
            .collect())
    }

    /// The catalogs of the commits that staged update runs render from, other than `commit`
    /// (read once each, and dropped when no run, going or delivered, needs them any more).
    async fn run_catalogs(
        &mut self,
        commit: &str,
    ) -> Result<BTreeMap<String, Arc<crate::catalog::Catalog>>> {
        let mut wanted = self.render_commits.of(&self.state);
        wanted.remove(commit);
        self.run_catalogs.retain(|c, _| wanted.contains(c));
        for c in wanted {
            if self.run_catalogs.contains_key(&c) {
                continue;
            }
            let (repo, path, id) = (self.opts.repo.clone(), self.opts.path.clone(), c.clone());
            let sources = self.opts.sources.clone();
            let cat = blocking(move || -> Result<crate::catalog::Catalog> {
                let files = crate::sources::read_commit(&repo, &id, &path, &sources)?;
                Ok(files.analyze().0)
            })
            .await?
            .with_context(|| {
                format!("cannot read commit {c}, which a staged update run renders")
            })?;
            self.metrics.source_renders(&self.opts.sources);
            self.run_catalogs.insert(c, Arc::new(cat));
        }
        Ok(self.run_catalogs.clone())
    }

    /// Under `--verify-commits`, who signed `commit` (as the trust files name the signer), or
    /// why its signature does not count. Judged once per commit.
    async fn signature(&mut self, commit: &str) -> Result<Result<String, String>> {
        if let Some((c, verdict)) = &self.signature_checked {
            if c == commit {
                return Ok(verdict.clone());
            }
        }
        let (repo, id, verifier) = (
            self.opts.repo.clone(),
            commit.to_string(),
            self.opts.verifier.clone().unwrap_or_default(),
        );
        let now = crate::timestamp::now_unix_signed();
        let verdict = blocking(move || -> Result<Result<String, String>> {
            let (_, signed) = crate::approvals::object::read_commit_signature(&repo, &id)?;
            Ok(
                match crate::approvals::verify_commit(signed.as_ref(), &verifier.trust, now) {
                    Ok(signer) => {
                        tracing::debug!(commit = %id, signer = %signer.name, "head signature verified");
                        Ok(signer.name)
                    }
                    Err(r) => Err(format!(
                        "commit signature ({}): {} (--verify-commits)",
                        r.reason, r.detail
                    )),
                },
            )
        })
        .await??;
        self.signature_checked = Some((commit.to_string(), verdict.clone()));
        Ok(verdict)
    }

    /// The approvals newly accepted for the requests the staged update runs wait on, judged
    /// from the approval tags (approvals already recorded in a run stay in its record and are
    /// not judged again). Publishes the evaluation; a tag that cannot be read is logged and
    /// the rollout goes on without it.
    async fn accepted_approvals(
        &mut self,
        requests: Vec<crate::rollout::approval::Request>,
        now: u64,
    ) -> BTreeMap<String, crate::rollout::approval::Approval> {
        let recorded: BTreeMap<String, crate::rollout::approval::Approval> = self
            .state
            .runs
            .values()
            .flat_map(crate::rollout::staged::status::recorded_approvals)
            .map(|a| (a.request.clone(), a))
            .collect();
        match self
            .approvals
            .evaluate(requests, &recorded, &self.metrics, now as i64)
            .await
        {
            Ok((new, view)) => {
                let mut st = self.status.lock().unwrap();
                st.approvals = view;
                st.changed();
                new.into_iter().map(|a| (a.request.clone(), a)).collect()
            }
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "cannot read the approval tags");
                BTreeMap::new()
            }
        }
    }

    /// Probes the members of `analyzed` and takes one rolling step of it from the state
    /// (scheduling and the step on the blocking pool, with the state lent to them). Nothing
    /// changes but the metrics and the members' last probes.
    async fn step_commit(&mut self, analyzed: &Arc<Analyzed>) -> Result<Stepped> {
        let begun = std::time::Instant::now();
        let commit = analyzed.commit.clone();
        let members = &analyzed.members;
        // `--once` waits for every member; the daemon for none longer than a short wait.
        let inventory = if !self.isolated {
            let probed = self.deliverer.probe(members).await;
            Arc::new(probed.context("cannot probe the members")?)
        } else {
            self.probes.inventory(members).await
        };
        let look_ms = begun.elapsed().as_millis() as u64;
        let known = self
            .remembered
            .as_ref()
            .is_some_and(|r| Arc::ptr_eq(r, &inventory));
        // The same answers as the last look: metered and logged then.
        if !known {
            self.metrics.members_health(
                inventory
                    .clusters
                    .iter()
                    .map(|c| (c.name.as_str(), c.healthy)),
            );
            self.log_member_health(&inventory);
        }
        let now = crate::timestamp::now_unix();
        // `--once` probed every member just now; the daemon's answers each have their time.
        let probes = &self.probes;
        let isolated = self.isolated;
        let answered_at = |m: &str| probes.answered_at(m).filter(|_| isolated);
        let eligible = self
            .state
            .remember_probe(&inventory, known, &answered_at, now);
        self.remembered = Some(inventory.clone());
        // The last reconcile's results, kept in memory; read from the store after a restart or
        // a failed reconcile.
        let mut previous = match self.previous.take() {
            Some(p) => p,
            None => {
                let store = self.store.clone();
                // What the file holds is not what the status shows: the next save writes.
                self.schedule_saved_for = None;
                self.state.evictions = self.saved_evictions.clone();
                blocking(move || store.load_schedule()).await??.1
            }
        };
        // What the members' workers finished since the last step, before this step decides.
        let arrived = std::mem::take(&mut self.arrived);
        let (absorbed, absorbing) = (arrived.len(), std::time::Instant::now());
        let previous_is_saved = arrived.is_empty();
        if !arrived.is_empty() {
            // Taken apart and put back together in key order, the keys moved, not copied.
            let (keys, mut bindings): (Vec<_>, Vec<Arc<PlacementSchedule>>) =
                std::mem::take(&mut previous).into_iter().unzip();
            // New entries share the names of the fleet the work was decided for.
            let fleet = self.fleet_memo.as_ref();
            let names = fleet.map(|(_, _, f)| f.clone() as Arc<dyn crate::rollout::NameSource>);
            let mut index = crate::rollout::BindingIndex::naming_from(names);
            for d in arrived {
                self.count_pushes(&d.results);
                let ledger = crate::rollout::Ledger::default();
                let state = &mut self.state;
                let (results, commit) = (d.results, &d.commit);
                crate::rollout::absorb_indexed(
                    state,
                    &mut bindings,
                    &mut index,
                    ledger,
                    results,
                    commit,
                    now,
                );
            }
            previous = keys.into_iter().zip(bindings).collect();
        }
        // Status changes seen while their work was out are read again, now that its result
        // (which cleared their marks) is in; those whose work is still out wait again.
        let absorb_ms = absorbing.elapsed().as_millis() as u64;
        let marking = std::time::Instant::now();
        let rereads = std::mem::take(&mut self.rereads_after_delivery);
        self.mark_changed(rereads, now);
        let reported = std::mem::take(&mut self.reported);
        let changes = reported.len();
        if !reported.is_empty() {
            self.member_changed(reported);
        }
        let mark_ms = marking.elapsed().as_millis() as u64;
        // A member that did not answer its probe is not pushed to now: its work fails at once
        // with the probe's error (and is retried next time), so it cannot hold up the step.
        let unreachable: BTreeMap<String, String> = inventory
            .clusters
            .iter()
            .filter(|c| !c.healthy)
            .map(|c| {
                let why = c.error.as_deref().unwrap_or("no answer");
                (c.name.clone(), format!("member unreachable: {why}"))
            })
            .collect();
        let asked: Vec<crate::rollout::approval::Request> = self
            .state
            .runs
            .values()
            .flat_map(crate::rollout::staged::status::open_requests)
            .collect();
        let staged = crate::rollout::StagedInput {
            approvals: self.accepted_approvals(asked, now).await,
            catalogs: self.run_catalogs(&commit).await?,
        };
        // The fleet is a function of the member declarations and the members' answers: most
        // looks reuse it, and so do most commits (building and comparing it again is a large
        // share of a one-placement commit in a large fleet).
        let fleet_begun = std::time::Instant::now();
        let declarations = MemberDeclarations::of(&analyzed.cat);
        let (fleet, fleet_reused) = match self.fleet_memo.take() {
            Some((d, answers, fleet))
                if d == declarations
                    && (Arc::ptr_eq(&answers, &eligible) || answers == eligible) =>
            {
                (fleet, true)
            }
            _ => (
                Arc::new(Fleet::build(&analyzed.cat, Some(&eligible))),
                false,
            ),
        };
        self.fleet_memo = Some((declarations, eligible, fleet.clone()));
        let fleet_ms = fleet_begun.elapsed().as_millis() as u64;
        // Scheduling and the step take seconds on a large fleet: off the async threads, with
        // the state lent to them.
        let state = std::mem::take(&mut self.state);
        let mut memo = std::mem::take(&mut self.step_memo);
        let mut schedule_memo = std::mem::take(&mut self.schedule_memo);
        let (step_commit, step_analyzed) = (commit.clone(), analyzed.clone());
        let prepare_ms = begun.elapsed().as_millis() as u64;
        let (state, schedule, decision, (memo, schedule_memo), previous, judged) =
            blocking(move || {
                let (mut state, mut previous) = (state, previous);
                let cat = &step_analyzed.cat;
                let started = std::time::Instant::now();
                let invalid = &step_analyzed.invalid;
                // Evictions first: an executed one unschedules its binding before the scheduler
                // runs, as KubeFleet's scheduler sees the binding gone.
                let (records, judged) = crate::rollout::eviction::evict(cat, &mut previous, &state);
                state.evictions = records;
                let schedule = schedule_commit_memoized(
                    cat,
                    invalid,
                    &fleet,
                    &previous,
                    now as i64,
                    &mut schedule_memo,
                );
                let scheduled = started.elapsed();
                let input = Input {
                    cat,
                    commit: &step_commit,
                    schedule: &schedule,
                    fleet: &fleet,
                    unreachable: &unreachable,
                    only: None,
                    now,
                    staged,
                    selected: Some(&step_analyzed.selected),
                };
                let decision =
                    crate::rollout::step_memoized(&input, &state, Pacing::Rolling, &mut memo);
                tracing::debug!(
                    target: "gitfleet::daemon::timing",
                    prepare_ms,
                    look_ms,
                    mark_ms,
                    fleet_ms,
                    absorbed,
                    absorb_ms,
                    changes,
                    schedule_ms = scheduled.as_millis() as u64,
                    step_ms = (started.elapsed() - scheduled).as_millis() as u64,
                    work = decision.work.len(),
                    reused = memo.reused(),
                    schedules_reused = schedule_memo.reused(),
                    fleet_reused,
                    "scheduled and stepped"
                );
                (
                    state,
                    schedule,
                    decision,
                    (memo, schedule_memo),
                    previous,
                    judged,
                )
            })
            .await?;
        self.state = state;
        for j in &judged {
            self.log_eviction(j);
        }
        // An executed eviction changed the bindings the step started from.
        let executed = judged
            .iter()
            .any(|j| matches!(j.verdict, crate::rollout::eviction::Verdict::Executed(_)));
        self.step_memo = memo;
        self.schedule_memo = schedule_memo;
        Ok(Stepped {
            inventory,
            schedule,
            decision,
            now,
            saved: (previous_is_saved && !executed).then_some(previous),
        })
    }

    /// Rebuilds the view of a daemon that starts without state (a new or lost state
    /// directory), or completes a new leader's (`--state kubernetes`), from the records members keep of what gitfleet applied there: each placement
    /// found on a member of `analyzed` is adopted as delivered there (revision unknown, so the
    /// step re-applies it if it is still placed there), and one no placement delivers any more
    /// is removed by the step like any deleted placement, subject to the deletion guard.
    /// Members whose records cannot be read are logged and not adopted: their orphans stay
    /// (gitfleet never deletes what it cannot see recorded).
    async fn adopt_records(&mut self, analyzed: &Analyzed) {
        let records = self.deliverer.records(&analyzed.members).await;
        let had_state = !self.state.placements.is_empty();
        let now = crate::timestamp::now_unix();
        let (mut placements, mut clusters) = (std::collections::BTreeSet::new(), 0);
        for (member, found) in records {
            let found = match found {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(member = %member, error = %e, "cannot read the member's records: what gitfleet applied there is not adopted");
                    continue;
                }
            };
            // One name for the member, which its entries of every placement share.
            let member_name = crate::model::ClusterName::new(&member);
            for (key, r) in found {
                let Some(placement) = crate::model::PlacementKey::from_record_key(&key) else {
                    tracing::warn!(member = %member, record = %key, "a record names no placement gitfleet knows; left alone");
                    continue;
                };
                let ps = Arc::make_mut(self.state.placements.entry(placement.clone()).or_default());
                ps.abandon = r.abandon;
                let name = |_: &str| member_name.clone();
                ps.clusters.get_or_insert_named(&member, name, || {
                    clusters += 1;
                    crate::rollout::ClusterState {
                        revision: None,
                        details: Default::default(),
                        commit: None,
                        health: BindingHealth::Pending,
                        recheck: Some("adopted from the member's record".into()),
                        drift: false,
                        reread: false,
                        // What a staged run delivered there: a finished run is known by it.
                        delivered_by: r.run.clone().map(Arc::new),
                        updated_at: now,
                        objects: Arc::new(r.entries.iter().map(|e| e.object.key()).collect()),
                    }
                });
                placements.insert(placement);
            }
        }
        if had_state {
            tracing::info!(
                placements = placements.len(),
                clusters,
                "leader takeover: read the members' records; adopted what they list beyond the saved state (what no placement delivers any more is removed)"
            );
        } else {
            tracing::info!(
                placements = placements.len(),
                clusters,
                "no rollout state: rebuilt the view from the members' records (adopted what they list; what no placement delivers any more is removed)"
            );
        }
    }

    /// Records the head refused, logged and counted once per commit.
    fn refuse(&mut self, refused: Rejected) {
        if self.state.rejected.as_ref().map(|r| &r.commit) != Some(&refused.commit) {
            tracing::error!(
                commit = %refused.commit,
                errors = refused.errors.len(),
                "commit rejected: {}",
                refused.errors.join("; ")
            );
            let mut st = self.status.lock().unwrap();
            st.commits_rejected += 1;
            st.changed();
            self.metrics.commits_rejected.inc();
        }
        self.state.rejected = Some(refused);
    }

    /// No commit may be served: said in status and `/readyz`, logged when it starts or its
    /// reason changes.
    fn serve_nothing(&mut self, why: String) {
        if self.not_serving.as_ref() != Some(&why) {
            tracing::warn!("serving no commit: {why}");
        }
        self.not_serving = Some(why);
    }

    /// The deletion guard's verdict on `analyzed` stepped into `decision`: `Some` when it is
    /// held. What is on members is what the state recorded as applied.
    fn judge_deletions(
        &self,
        analyzed: &Analyzed,
        decision: &crate::rollout::Decision,
    ) -> Option<crate::rollout::guard::Held> {
        use crate::rollout::guard;
        let members: HashSet<&str> = analyzed
            .members
            .iter()
            .map(|m| m.target.name.as_str())
            .collect();
        let on_members = self
            .state
            .placements
            .iter()
            .map(|(key, ps)| guard::Recorded {
                placement: key,
                abandon: ps.abandon,
                clusters: ps.clusters.iter().map(|(c, s)| (c.as_str(), &*s.objects)),
            });
        let assessment = guard::assess(
            on_members,
            &guard::Judged::new(&decision.steps, &decision.ledger.abandon),
            |cluster| members.contains(cluster),
            // Every placement is stepped, a deleted one too.
            |_, _| guard::Fate::Untouched,
        );
        match guard::judge(
            &self.opts.deletion_guard,
            assessment,
            &analyzed.commit,
            &analyzed.message,
        ) {
            guard::Verdict::Proceed => None,
            guard::Verdict::Released(allowed) => {
                tracing::warn!(commit = %analyzed.commit, ?allowed, "mass deletion released by the commit's {} trailer", guard::TRAILER);
                None
            }
            guard::Verdict::Held(h) => Some(h),
        }
    }

    async fn reconcile_inner(&mut self, head: &str) -> Result<Action, ReconcileError> {
        use crate::rollout::serve;
        let analyzed = self.analyzed(head).await?;
        let mut problems: Vec<String> = analyzed.diags.iter().map(|d| d.to_string()).collect();
        if problems.is_empty() {
            problems = self.update_problems(&analyzed).await?;
        }
        let verify = self.opts.verify_commits;
        let signature = if serve::signature_needed(&self.state, head, verify) {
            Some(self.signature(head).await?)
        } else {
            None
        };
        let choice = serve::choose(
            serve::Head {
                commit: head,
                problems,
                signature,
            },
            &self.state,
            verify,
        );
        let mut verified = None;
        let commit = match choice {
            serve::Serve::Head { verified: v } => {
                self.state.rejected = None;
                if self.warnings != analyzed.warnings {
                    for w in &analyzed.warnings {
                        tracing::warn!(commit = %analyzed.commit, "{w}");
                    }
                    self.warnings = analyzed.warnings.clone();
                }
                verified = v;
                head.to_string()
            }
            serve::Serve::Before { commit, refused } => {
                self.refuse(refused);
                self.save(None).await?;
                self.publish(None, vec![], None);
                // Keep rolling out the commit served before; nothing is deleted because of the
                // refused one.
                commit
            }
            serve::Serve::Nothing { refused, why } => {
                self.refuse(refused);
                self.serve_nothing(why);
                self.save(None).await?;
                self.publish(None, vec![], None);
                return Ok(Action::await_change());
            }
        };
        // The commit served before this look: a new commit is judged by the deletion guard
        // once, before anything of it is applied; a commit already being served is not judged
        // again (its deletions were allowed, or were no mass deletion, when it began).
        let served_before = self.state.serving.clone();
        if self.rebuild {
            self.rebuild = false;
            self.adopt_records(&analyzed).await;
        }
        let mut candidate = commit;
        let (analyzed, commit, stepped) = loop {
            let analyzed = if candidate == head {
                analyzed.clone()
            } else {
                self.analyzed(&candidate).await?
            };
            let commit = analyzed.commit.clone();
            let stepped = self.step_commit(&analyzed).await?;
            let decision = &stepped.decision;
            // Without a commit served before, what is judged is what was adopted from the
            // members' records (nothing, on a new fleet).
            let held = (served_before.as_deref() != Some(commit.as_str()))
                .then(|| self.judge_deletions(&analyzed, decision))
                .flatten();
            if let Some(held) = held {
                if self.state.held.as_ref() != Some(&held) {
                    tracing::warn!(commit = %held.commit, deleting = held.assessment.deleting, managed = held.assessment.managed, "{}", held.message);
                }
                self.metrics
                    .deletions_held
                    .set(held.assessment.deleting as i64);
                self.state.held = Some(held);
                // The commit served before goes on (heals, resyncs, the rest of its rollout)
                // when it may; without one, nothing moves until a commit releases or undoes
                // the deletions.
                match serve::fallback(&self.state, verify).map(str::to_string) {
                    Ok(before) => {
                        candidate = before;
                        continue;
                    }
                    Err(why) => {
                        self.serve_nothing(format!(
                            "the head is held by the deletion guard, and {why}"
                        ));
                        self.save(None).await?;
                        self.publish(None, vec![], None);
                        return Ok(Action::await_change());
                    }
                }
            }
            if candidate == head && self.state.held.take().is_some() {
                self.metrics.deletions_held.set(0);
            }
            break (analyzed, commit, stepped);
        };
        let Stepped {
            inventory,
            mut schedule,
            decision,
            now,
            saved,
        } = stepped;
        if self.state.serving.as_deref() != Some(commit.as_str()) {
            tracing::info!(commit = %commit, "serving new commit");
        }
        if self.not_serving.take().is_some() {
            tracing::info!(commit = %commit, "serving a commit again");
        }
        self.state.serving = Some(commit.clone());
        if commit == head {
            if let Some(v) = verified {
                self.state.verified = Some(v);
            }
        }
        for s in &decision.steps {
            if s.held {
                let note = s.note.clone().unwrap_or_default();
                if self.logged_steps.get(&s.placement) != Some(&note) {
                    tracing::warn!(placement = %s.placement, "{note}");
                    self.logged_steps.insert(s.placement.clone(), note);
                }
                continue;
            }
            if s.applying.is_empty() && s.removing.is_empty() {
                self.logged_steps.remove(&s.placement);
                continue;
            }
            let moves = format!("{:?} {:?}", s.applying, s.removing);
            if self.logged_steps.get(&s.placement) != Some(&moves) {
                tracing::info!(placement = %s.placement, applying = ?s.applying, removing = ?s.removing, waiting = ?s.waiting, "rollout step");
                self.logged_steps.insert(s.placement.clone(), moves);
            }
        }
        let contexts = &analyzed.contexts;
        if !self.opts.once {
            self.watch_delivered(&decision.work, contexts);
        }
        // Only the leader acts: a replica whose lease was not renewed in time (a pause, a lost
        // API server) stops here, before the step reaches any member.
        if !self.may_act() {
            return Err(super::leader::NotLeading.into());
        }
        // `--once` waits for every delivery; the daemon hands each member's work to its worker
        // and absorbs the results as they come (the next step follows each one).
        let mut results = if !self.isolated {
            self.deliverer
                .deliver(decision.work, &commit, contexts)
                .await
                .results
        } else {
            self.workers.dispatch(decision.work, &commit, contexts);
            Vec::new()
        };
        results.extend(
            decision
                .held
                .into_iter()
                .map(|(w, why)| (w, Outcome::Failed(why))),
        );
        self.count_pushes(&results);
        self.log_waiting(&decision.requests);
        let waiting = decision.requests.clone();
        let action = Action::from(crate::rollout::next_wake(&decision.steps, &results));
        crate::rollout::absorb(
            &mut self.state,
            &mut schedule,
            decision.ledger,
            results,
            &commit,
            now,
        );
        let saving = std::time::Instant::now();
        // Most reconciles leave the schedule as it was saved (the status holds that one): it is
        // compared, not serialised and written again (costly in a large fleet).
        let unchanged = self.schedule_saved_for.as_deref() == Some(commit.as_str())
            && crate::schedule::same_schedules(&self.status.lock().unwrap().schedule, &schedule);
        let schedule = if unchanged {
            self.save(None).await?;
            schedule
        } else {
            let result = self.save(Some((commit.clone(), schedule))).await;
            // The file may hold this schedule or the one before: not known to be either.
            self.schedule_saved_for = None;
            let schedule = result?;
            self.schedule_saved_for = Some(commit);
            schedule
        };
        // The next step starts from this schedule: the results this step started from, when
        // no delivery was absorbed into them and the schedule did not change; else rebuilt.
        self.previous = Some(match saved.filter(|_| unchanged) {
            Some(previous) => previous,
            None => schedule
                .iter()
                .map(|p| (p.key.clone(), p.clone()))
                .collect(),
        });
        let saved = saving.elapsed();

        self.meter_steps(&decision.steps);
        // Every state is set (0 included), never cleared: a scrape never sees a gap.
        for phase in RunPhase::ALL {
            let n = self
                .state
                .runs
                .values()
                .filter(|st| RunPhase::of(st) == phase)
                .count();
            self.metrics
                .update_runs
                .get_or_create(&metrics::labels(&[("state", phase.name())]))
                .set(n as i64);
        }
        self.publish(
            Some(inventory),
            decision.steps,
            Some((schedule, &analyzed.cat)),
        );
        tracing::debug!(
            target: "gitfleet::daemon::timing",
            save_ms = saved.as_millis() as u64,
            publish_ms = (saving.elapsed() - saved).as_millis() as u64,
            "saved and published"
        );
        {
            let mut st = self.status.lock().unwrap();
            st.runs = super::runs::Runs::of(&self.state);
            st.evictions = crate::api::Evictions::of(&self.state);
            st.changed();
            // Requests this step reached are listed at once; their tags are judged at the next
            // reconcile, which the step asks for straight away.
            st.approvals.requests = waiting.clone();
            st.runs.waiting = waiting;
        }
        Ok(action)
    }

    /// Sets the rollout gauges of the steps that changed since the last look, and removes those
    /// of placements no longer stepped. Series are replaced in place, never cleared first: a
    /// scrape never sees a placement missing.
    fn meter_steps(&mut self, steps: &[Arc<StepSummary>]) {
        const STATES: [&str; 5] = ["upToDate", "waiting", "applying", "removing", "failed"];
        let m = &self.metrics;
        for s in steps {
            let last = self.metered.get_mut(&s.placement);
            if last.as_ref().is_some_and(|l| Arc::ptr_eq(l, s)) {
                continue;
            }
            let placement = s.placement.to_string();
            let held = metrics::labels(&[("placement", &placement)]);
            if s.held {
                m.invalid_resource_selectors.get_or_create(&held).set(1);
            } else {
                m.invalid_resource_selectors.remove(&held);
            }
            // Failed: as the status says it (never settled), from the state this step's
            // results were absorbed into.
            let failed = self.state.placements.get(&s.placement).map_or(0, |p| {
                p.clusters
                    .values()
                    .filter(|c| {
                        c.health == crate::rollout::BindingHealth::Failed
                            || c.details.last_error.is_some()
                    })
                    .count()
            });
            let counts = [
                s.up_to_date.len(),
                s.waiting.len(),
                s.applying.len(),
                s.removing.len(),
                failed,
            ];
            for (state, clusters) in STATES.into_iter().zip(counts) {
                m.rollout_clusters
                    .get_or_create(&metrics::labels(&[
                        ("placement", &placement),
                        ("state", state),
                    ]))
                    .set(clusters as i64);
            }
            match last {
                Some(l) => *l = s.clone(),
                None => {
                    self.metered.insert(s.placement.clone(), s.clone());
                }
            }
        }
        // Kept in place (most looks step the same placements): the gone ones are looked for
        // only when there are more metered than stepped.
        if self.metered.len() == steps.len() {
            return;
        }
        let stepped: HashSet<&crate::model::PlacementKey> =
            steps.iter().map(|s| &s.placement).collect();
        let gone: Vec<crate::model::PlacementKey> = self
            .metered
            .keys()
            .filter(|k| !stepped.contains(k))
            .cloned()
            .collect();
        for gone in gone {
            self.metered.remove(&gone);
            let placement = gone.to_string();
            m.invalid_resource_selectors
                .remove(&metrics::labels(&[("placement", &placement)]));
            for state in STATES {
                m.rollout_clusters.remove(&metrics::labels(&[
                    ("placement", &placement),
                    ("state", state),
                ]));
            }
        }
    }

    /// An eviction is logged once, when it is judged.
    fn log_eviction(&self, j: &crate::rollout::eviction::Judged) {
        use crate::rollout::eviction::Verdict;
        let (eviction, placement, cluster) = (&j.name, &j.placement, &j.cluster);
        match &j.verdict {
            Verdict::Executed(m) => {
                tracing::info!(%eviction, %placement, %cluster, "eviction executed: {m}")
            }
            Verdict::Blocked(m) => {
                tracing::warn!(%eviction, %placement, %cluster, "eviction not executed: {m}")
            }
            Verdict::Invalid(m) => {
                tracing::warn!(%eviction, %placement, %cluster, "eviction invalid: {m}")
            }
        }
    }

    /// A member's health is logged when it changes: unhealthy when it stops answering (or a
    /// push finds it failing), healthy again when it answers.
    fn log_member_health(&mut self, inventory: &Inventory) {
        let unhealthy: std::collections::BTreeSet<String> = inventory
            .clusters
            .iter()
            .filter(|c| !c.healthy)
            .map(|c| c.name.clone())
            .collect();
        for c in &inventory.clusters {
            let was = self.logged_unhealthy.contains(&c.name);
            if !c.healthy && !was {
                tracing::warn!(member = %c.name, error = c.error.as_deref().unwrap_or(""), "member unhealthy");
            } else if c.healthy && was {
                tracing::info!(member = %c.name, "member healthy again");
            }
        }
        self.logged_unhealthy = unhealthy;
    }

    /// A wait for an approval is logged when it starts and when it ends.
    fn log_waiting(&mut self, requests: &[crate::rollout::approval::Request]) {
        let waiting: std::collections::BTreeSet<String> =
            requests.iter().map(|r| r.key()).collect();
        for r in requests
            .iter()
            .filter(|r| !self.logged_waiting.contains(&r.key()))
        {
            tracing::info!(request = %r.key(), tag = %r.tag_name(), commit = %r.commit, "staged update run waits for approval");
        }
        for gone in self.logged_waiting.difference(&waiting) {
            tracing::info!(request = %gone, "staged update run no longer waits for approval");
        }
        self.logged_waiting = waiting;
    }

    /// Logs failed pushes (a failure once, until the placement's push to that cluster succeeds
    /// or fails otherwise) and counts every push by member and outcome.
    fn count_pushes(&mut self, results: &[(Work, Outcome)]) {
        for (w, o) in results {
            let pair = || (w.placement.clone(), w.cluster.clone());
            let outcome = match (o, &w.action) {
                (Outcome::Failed(e), _) => {
                    if self.logged_failures.get(&pair()) != Some(e) {
                        tracing::warn!(placement = %w.placement, cluster = %w.cluster, error = %e, "push failed");
                        self.logged_failures.insert(pair(), e.clone());
                    }
                    "failed"
                }
                (Outcome::Done(..), action) => {
                    if !self.logged_failures.is_empty() {
                        self.logged_failures.remove(&pair());
                    }
                    match action {
                        crate::rollout::Action::Remove { .. } => "removed",
                        crate::rollout::Action::Apply { .. } => "applied",
                    }
                }
            };
            self.metrics
                .pushes
                .get_or_create(&metrics::labels(&[
                    ("member", &w.cluster),
                    ("outcome", outcome),
                ]))
                .inc();
        }
    }

    /// Replaces the status snapshot the server reads (built first, then swapped in, so that
    /// the server never waits for it to be built).
    /// The schedule comes with the catalog it was made from (the placements' specs).
    fn publish(
        &mut self,
        inventory: Option<Arc<Inventory>>,
        steps: Vec<Arc<StepSummary>>,
        scheduled: Option<(Vec<Arc<PlacementSchedule>>, &crate::catalog::Catalog)>,
    ) {
        let (schedule, cat) = match scheduled {
            Some((s, cat)) => (Some(s), Some(cat)),
            None => (None, None),
        };
        let mut published = std::mem::take(&mut self.published);
        let placements: Option<Vec<Arc<PlacementStatus>>> = schedule.as_ref().map(|schedule| {
            // By key, built when a status is worked out (looking each placement up in the list
            // was quadratic in the placements).
            let mut by_key: Option<HashMap<&crate::model::PlacementKey, &Arc<PlacementSchedule>>> =
                None;
            // Statuses kept in place: most looks publish the same settled placements again.
            let mut kept = 0;
            let list: Vec<Arc<PlacementStatus>> = steps
                .iter()
                .map(|s| {
                    // A settled step the last publish saw has the same status as then.
                    if let Some(n) = s.settled {
                        if let Some((_, status)) =
                            published.get(&s.placement).filter(|(m, _)| *m == n)
                        {
                            kept += 1;
                            return status.clone();
                        }
                    }
                    let (key, number) = (s.placement.clone(), s.settled);
                    let stored_arc = self.state.placements.get(&s.placement).cloned();
                    let stored = stored_arc.as_deref();
                    let by_key = by_key
                        .get_or_insert_with(|| schedule.iter().map(|p| (&p.key, p)).collect());
                    let shared_sched = by_key.get(&s.placement).copied();
                    let sched = shared_sched.map(|p| &**p);
                    let (conditions, per_cluster) =
                        conditions::placement_conditions_of_step(s, sched, stored);
                    let replica_sets =
                        sched.and_then(|p| conditions::replica_set_summary(s, p, stored));
                    let per_cluster = crate::api::shared_status::PerCluster::of(
                        s.clone(),
                        shared_sched.cloned(),
                        stored_arc.clone(),
                        per_cluster,
                    );
                    let failed = stored
                        .map(|p| {
                            p.clusters
                                .iter()
                                .filter_map(|(c, st)| {
                                    Some((c.to_string(), st.details.last_error.clone()?))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let (policy, ocm_policy) = cat.map_or((None, None), |c| policies(c, &key));
                    let status = PlacementStatus {
                        policy,
                        ocm_policy,
                        selected: shared_sched
                            .map(|p| SelectedClusters::of(p, |p| &p.selected))
                            .unwrap_or_default(),
                        conditions,
                        per_cluster,
                        replica_sets,
                        failed,
                        ready: Default::default(),
                        selected_resources: s.selected_resources.clone(),
                        clusters: crate::api::shared_status::Clusters::of(stored_arc.clone()),
                        observed_resource_index: stored
                            .and_then(|p| p.resources.latest().map(|r| r.index)),
                        id: s.placement.to_string(),
                        strategy: s.strategy,
                        target: s.target,
                        applying: StepClusters::of(s, |s| &s.applying),
                        removing: StepClusters::of(s, |s| &s.removing),
                        waiting: StepClusters::of(s, |s| &s.waiting),
                        up_to_date: StepClusters::of(s, |s| &s.up_to_date),
                        note: s.note.clone(),
                        render_errors: s.render_errors.clone(),
                    };
                    let status = Arc::new(status);
                    match number {
                        Some(n) => {
                            kept += 1;
                            published.insert(key, (n, status.clone()));
                        }
                        None => {
                            published.remove(&key);
                        }
                    }
                    status
                })
                .collect();
            // Placements no longer settled or no longer stepped are forgotten.
            if published.len() != kept {
                let stepped: HashSet<&crate::model::PlacementKey> =
                    steps.iter().map(|s| &s.placement).collect();
                published.retain(|k, _| stepped.contains(k));
            }
            list
        });
        self.published = published;
        let mut st = self.status.lock().unwrap();
        st.changed();
        // While no commit may be served, the one last served is not shown as served.
        let serving = match &self.not_serving {
            Some(_) => None,
            None => self.state.serving.clone(),
        };
        st.verified = self
            .state
            .verified
            .clone()
            .filter(|v| self.opts.verify_commits && serving.as_ref() == Some(&v.commit));
        st.serving = serving;
        st.not_serving = self.not_serving.clone();
        st.rejected = self.state.rejected.clone();
        st.warnings = self.warnings.clone();
        st.held = self.state.held.clone();
        if let Some(inv) = inventory {
            st.inventory = Some(inv);
        }
        if let Some((_, _, fleet)) = &self.fleet_memo {
            st.fleet = Some(fleet.clone());
        }
        if let (Some(placements), Some(schedule)) = (placements, schedule) {
            st.placements = placements;
            st.schedule = schedule;
            st.reconciles += 1;
        }
    }
}

/// What a commit declares of its members, as [`Fleet::build`] reads it: the `MemberCluster`
/// and `ManagedCluster` objects, in order. Equal for two commits that left the members'
/// files as they were (compared by address first: the same commit shares them).
#[derive(Debug)]
pub(crate) struct MemberDeclarations(Vec<Arc<serde_json::Value>>);

impl MemberDeclarations {
    pub(crate) fn of(cat: &crate::catalog::Catalog) -> MemberDeclarations {
        let indices = cat.member_clusters.iter().map(|e| e.index);
        let indices = indices.chain(cat.managed_clusters.iter().map(|e| e.index));
        MemberDeclarations(indices.map(|i| cat.objects[i].value.clone()).collect())
    }
}

impl PartialEq for MemberDeclarations {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
    }
}

/// A placement's policy as its spec in `cat` declares it: KubeFleet's `spec.policy` (PickAll
/// when absent), or an OCM Placement's spec; neither for a ManifestWork.
fn policies(
    cat: &crate::catalog::Catalog,
    key: &crate::model::PlacementKey,
) -> (
    Option<crate::model::placement::PlacementPolicy>,
    Option<crate::model::ocm::OcmPlacementSpec>,
) {
    use crate::model::PlacementKind;
    match key.kind {
        PlacementKind::ClusterResourcePlacement | PlacementKind::ResourcePlacement => (
            cat.placement(&key.name, key.namespace.as_deref())
                .map(|p| p.spec.spec.policy.clone().unwrap_or_default()),
            None,
        ),
        PlacementKind::OcmPlacement => (
            None,
            cat.ocm_placements
                .iter()
                .find(|p| {
                    p.spec.metadata.name == key.name
                        && cat.objects[p.index].namespace == key.namespace
                })
                .map(|p| p.spec.spec.clone()),
        ),
        PlacementKind::ManifestWork => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, SourceFile};

    fn declarations(files: &[(&str, &str)]) -> MemberDeclarations {
        let files: Vec<SourceFile> = files
            .iter()
            .map(|(path, text)| SourceFile {
                path: path.to_string(),
                content: text.as_bytes().to_vec(),
            })
            .collect();
        MemberDeclarations::of(&Catalog::load(&files).0)
    }

    /// A commit that leaves the members' files as they were declares the same members (the
    /// fleet is reused); one that changes a member's labels, or adds one, does not.
    #[test]
    fn member_declarations_are_equal_only_while_the_members_files_are() {
        let member = |name: &str, env: &str| {
            format!(
                "apiVersion: cluster.kubernetes-fleet.io/v1\nkind: MemberCluster\nmetadata:\n  name: {name}\n  labels: {{env: {env}}}\nspec:\n  identity: {{kind: ServiceAccount, name: fleet, namespace: fleet-system}}\n"
            )
        };
        let ns =
            |name: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n");
        let (m1, m2) = (member("m1", "prod"), member("m2", "prod"));
        let before = declarations(&[("m1.yaml", &m1), ("m2.yaml", &m2), ("ns.yaml", &ns("a"))]);
        let placement_only =
            declarations(&[("m1.yaml", &m1), ("m2.yaml", &m2), ("ns.yaml", &ns("b"))]);
        assert_eq!(before.0.len(), 2);
        assert!(before == placement_only);
        let relabelled = declarations(&[("m1.yaml", &m1), ("m2.yaml", &member("m2", "dev"))]);
        assert!(before != relabelled);
        let m3 = member("m3", "prod");
        let added = declarations(&[("m1.yaml", &m1), ("m2.yaml", &m2), ("m3.yaml", &m3)]);
        assert!(before != added);
    }
}
