//! `gitfleet wait`: block until a commit is served by the daemon and its placements settle, or
//! fail, or time out — for CI after a push, as `argocd app wait` and `kubectl wait` are used.
//! [`verdict`] is pure (the status API's documents in, where the commit stands out); [`wait`]
//! polls the daemon and maps the verdict to the exit code.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;

use crate::api::{Placements, UpdateRun};
use crate::rollout::staged::status::RunPhase;
use crate::rollout::BindingHealth;

pub const WAIT_AFTER_HELP: &str = "\
Examples:
  # In CI, after pushing: wait for this checkout's HEAD to be served and settled
  git push && gitfleet wait --repo . --server http://gitfleet:7070 --timeout 10m
  # A given commit (a prefix of its id is enough), only two placements
  gitfleet wait --commit 3f2a9c1 crp/frontend rp/shop/cart
  # Whatever the daemon's branch head is now
  gitfleet wait

Settled: the daemon serves the commit (or, with --repo, a newer commit that contains it), and
every placement has nothing being applied, removed or waiting for its budget, no cluster
waiting for its objects to become available, and no staged update run in progress.

Exit codes:
  0  the commit is served and every placement settled without a failure
  1  the commit was rejected (invalid, or unsigned with --verify-commits), held by the
     deletion guard, or a placement settled with failed clusters, a failed update run or
     invalid resource selectors (Scheduled=False, InvalidResourceSelectors); or
     the daemon cannot be reached at the start (a wrong --server fails at once; once it has
     answered, a daemon that stops answering — a restart, a rolling upgrade, a new leader —
     is waited for until --timeout)
  2  --timeout passed first (the last thing waited for is printed)
  64 bad command line (unknown flag, missing or invalid value)";

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The daemon's address (its --listen).
    #[arg(long, env = "GITFLEET_SERVER", default_value = "http://127.0.0.1:7070")]
    pub server: String,
    #[command(flatten)]
    pub token: crate::cli::flags::TokenArgs,
    /// The commit to wait for: with --repo any revision of it (default HEAD), else a commit id
    /// or a prefix of one (default: the daemon's branch head when wait starts).
    #[arg(long, value_name = "REV")]
    pub commit: Option<String>,
    /// A clone of the followed repository: --commit is resolved in it, and a newer commit
    /// served that contains it also counts.
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// Give up after this long (exit 2).
    #[arg(long, default_value = "5m", value_parser = crate::cli::flags::parse_duration)]
    pub timeout: Duration,
    /// How often to ask the daemon.
    #[arg(long, default_value = "1s", value_parser = crate::cli::flags::parse_timeout)]
    pub interval: Duration,
    /// Only these placements (`crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`, or a bare CRP name);
    /// default: all.
    pub placements: Vec<String>,
}

/// Where the awaited commit stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not there yet: why, in a few words.
    Waiting(String),
    /// Served, every placement settled, no failure: a summary.
    Settled(String),
    /// It cannot settle well: why.
    Failed(String),
}

fn short(c: &str) -> &str {
    &c[..12.min(c.len())]
}

/// Whether `commit` (a full id) is `want` (a full id or a prefix of one).
fn same(commit: &str, want: &str) -> bool {
    !want.is_empty() && commit.starts_with(want)
}

/// Where commit `want` stands in `doc`. `served`: whether the daemon's serving commit is `want`
/// or contains it (the caller knows the history; without it, only equality). `only`: the
/// placements to look at (empty: all). Pure.
pub fn verdict(
    doc: &Placements,
    runs: &[UpdateRun],
    want: &str,
    served: bool,
    only: &[String],
) -> Verdict {
    if let Some(r) = doc.rejected.as_ref().filter(|r| same(&r.commit, want)) {
        return Verdict::Failed(format!(
            "commit {} was rejected ({} error(s)); first: {}",
            short(&r.commit),
            r.errors.len(),
            r.errors.first().map_or("", String::as_str)
        ));
    }
    if let Some(h) = doc.held.as_ref().filter(|h| same(&h.commit, want)) {
        return Verdict::Failed(format!(
            "commit {} is held by the deletion guard: {}",
            short(&h.commit),
            h.message
        ));
    }
    if !served {
        return Verdict::Waiting(match &doc.serving {
            Some(s) => format!("the daemon serves {}, not yet {}", short(s), short(want)),
            None => format!(
                "the daemon serves no commit yet (waiting for {})",
                short(want)
            ),
        });
    }
    let picked: Vec<_> = doc
        .placements
        .iter()
        .filter(|p| only.is_empty() || only.contains(&p.id))
        .collect();
    for id in only {
        if !picked.iter().any(|p| &p.id == id) {
            return Verdict::Waiting(format!("the served commit has no placement {id} yet"));
        }
    }
    let mut failed = Vec::new();
    for p in &picked {
        let in_flight = p.applying.len() + p.removing.len() + p.waiting.len();
        if in_flight > 0 {
            return Verdict::Waiting(format!(
                "{}: {} applying, {} removing, {} waiting for the budget",
                p.id,
                p.applying.len(),
                p.removing.len(),
                p.waiting.len()
            ));
        }
        let pending: Vec<&str> = p
            .clusters
            .iter()
            .filter(|(_, c)| c.health == BindingHealth::Pending)
            .map(|(n, _)| n.as_str())
            .collect();
        if !pending.is_empty() {
            return Verdict::Waiting(format!(
                "{}: waiting for {} to become available",
                p.id,
                pending.join(", ")
            ));
        }
        // Said as status says it: available, and re-applying. A failed cluster fails the wait
        // below even while it is looked at again: a conflict or drift that stays would keep it
        // "re-applying" forever.
        let rechecked: Vec<String> = p
            .clusters
            .iter()
            .filter(|(_, c)| c.health != BindingHealth::Failed && c.details.last_error.is_none())
            .filter_map(|(n, c)| Some(format!("{n} ({})", c.recheck.as_ref()?)))
            .collect();
        if !rechecked.is_empty() {
            return Verdict::Waiting(format!(
                "{}: waiting for {} to be re-applied",
                p.id,
                rechecked.join(", ")
            ));
        }
        let of_placement = || runs.iter().filter(|r| r.placement == p.id);
        if let Some((r, phase)) = of_placement()
            .map(|r| (r, RunPhase::of(&r.status)))
            .find(|(_, phase)| phase.in_progress())
        {
            return Verdict::Waiting(format!(
                "{}: update run {} is {phase} ({})",
                p.id, r.name, r.waiting_for
            ));
        }
        for (cluster, e) in &p.render_errors {
            failed.push(format!("{} on {cluster}: cannot render: {e}", p.id));
        }
        // Held for invalid resource selectors: served, but it does not roll out until fixed
        // (before, such a commit was rejected and `wait` failed on it).
        if let Some(c) = p.conditions.iter().find(|c| {
            c.type_.ends_with(crate::schedule::kubefleet::SCHEDULED)
                && c.reason == crate::snapshot::INVALID_RESOURCE_SELECTORS
        }) {
            failed.push(format!("{}: held: {}", p.id, c.message));
        }
        for (name, c) in &p.clusters {
            if let Some(e) = &c.details.last_error {
                failed.push(format!("{} on {name}: {e}", p.id));
            } else if c.health == BindingHealth::Failed {
                failed.push(format!("{} on {name}: not available", p.id));
            }
        }
        for r in of_placement()
            .filter(|r| RunPhase::of(&r.status) == RunPhase::Failed && same(&r.init_commit, want))
        {
            failed.push(format!("{}: update run {} failed", p.id, r.name));
        }
    }
    if !failed.is_empty() {
        return Verdict::Failed(failed.join("\n"));
    }
    let clusters: usize = picked.iter().map(|p| p.selected.len()).sum();
    Verdict::Settled(format!(
        "{} placement(s) settled on {clusters} cluster placement(s)",
        picked.len()
    ))
}

/// The placement ids as the status API writes them (`app` is `crp/app`).
fn placement_ids(given: &[String]) -> Vec<String> {
    given
        .iter()
        .map(|p| {
            if p.contains('/') {
                p.clone()
            } else {
                format!("crp/{p}")
            }
        })
        .collect()
}

/// The awaited commit, resolved in `--repo` when given.
fn resolve(args: &WaitArgs) -> Result<Option<String>> {
    match (&args.repo, &args.commit) {
        (Some(repo), rev) => {
            let rev = rev.as_deref().unwrap_or("HEAD");
            Ok(Some(crate::source::resolve_commit(repo, rev)?))
        }
        (None, Some(c)) => {
            let c = c.to_ascii_lowercase();
            if c.len() < 4 || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(crate::cli::flags::UsageError(format!(
                    "--commit {c}: without --repo, give a commit id (or a prefix of at least 4 \
                     hex digits); with --repo, any revision"
                ))
                .into());
            }
            Ok(Some(c))
        }
        (None, None) => Ok(None),
    }
}

pub fn wait(args: &WaitArgs) -> Result<ExitCode> {
    let mut want = resolve(args)?;
    let daemon = args.token.daemon(&args.server)?;
    let only = placement_ids(&args.placements);
    let started = Instant::now();
    let mut last_reason = String::new();
    let mut answered = false;
    loop {
        let asked = match ask(args, &daemon, &mut want, &only) {
            Ok(v) => {
                answered = true;
                v
            }
            // A daemon that answered once and stops is restarting (an upgrade, a new
            // leader): waited for like anything else, until the timeout. A refused token is
            // not: asking again would be refused again.
            Err(e) if answered && !e.is_unauthorized() => Asked {
                want: want.clone().unwrap_or_default(),
                verdict: Verdict::Waiting(format!("{e}; asking again")),
            },
            Err(e) => return Err(e.into()),
        };
        let Asked {
            want: want_now,
            verdict,
        } = asked;
        match verdict {
            Verdict::Settled(summary) => {
                println!("commit {} served: {summary}", short(&want_now));
                return Ok(ExitCode::SUCCESS);
            }
            Verdict::Failed(why) => {
                eprintln!("commit {} failed:\n{why}", short(&want_now));
                return Ok(ExitCode::FAILURE);
            }
            Verdict::Waiting(why) => {
                if started.elapsed() >= args.timeout {
                    eprintln!(
                        "timed out after {}: {why}",
                        humantime::format_duration(args.timeout)
                    );
                    return Ok(ExitCode::from(2));
                }
                if why != last_reason {
                    eprintln!("{why}");
                    last_reason = why;
                }
            }
        }
        let left = args.timeout.saturating_sub(started.elapsed());
        std::thread::sleep(args.interval.min(left).max(Duration::from_millis(10)));
    }
}

/// Where the awaited commit stands, with the commit awaited (the daemon's head when wait
/// started without one).
struct Asked {
    want: String,
    verdict: Verdict,
}

/// What one look reads: the document's head fields with the placements that may keep the
/// commit from settling, and how many placements and cluster placements there are in all.
struct Look {
    doc: Placements,
    placements: usize,
    clusters: usize,
}

impl std::ops::Deref for Look {
    type Target = Placements;
    fn deref(&self) -> &Placements {
        &self.doc
    }
}

/// Reads the daemon without its whole placements document: the placements named one by one,
/// else the summary and the placements unready, failed or in a staged run (a settled fleet's
/// answer is empty, however large the fleet).
fn look(
    server: &crate::api::client::Daemon,
    only: &[String],
) -> Result<Look, crate::api::client::ClientError> {
    use crate::api::client;
    let query = if only.is_empty() {
        "state=unready,failed,staged".to_string()
    } else {
        // The head fields alone; the placements come one by one.
        "limit=0".to_string()
    };
    let mut doc = client::placements_where(server, &query)?;
    doc.matched = None;
    for id in only {
        doc.placements.extend(client::placement(server, id)?);
    }
    let (placements, clusters) = if only.is_empty() {
        let summary = client::summary(server)?;
        (summary.placements.total, summary.clusters.selected)
    } else {
        (0, 0)
    };
    Ok(Look {
        doc,
        placements,
        clusters,
    })
}

/// One look at the daemon.
fn ask(
    args: &WaitArgs,
    daemon: &crate::api::client::Daemon,
    want: &mut Option<String>,
    only: &[String],
) -> Result<Asked, crate::api::client::ClientError> {
    let doc = look(daemon, only)?;
    let want_now = match &*want {
        Some(w) => w.clone(),
        None => match &doc.head {
            Some(h) => {
                eprintln!("waiting for the daemon's head {}", short(h));
                *want = Some(h.clone());
                h.clone()
            }
            None => String::new(),
        },
    };
    let verdict = if want_now.is_empty() {
        Verdict::Waiting("the daemon has not read its branch yet".into())
    } else {
        let served = doc.serving.as_deref().is_some_and(|s| {
            same(s, &want_now)
                || args.repo.as_ref().is_some_and(|repo| {
                    crate::follow::descends_from(repo, &want_now, s).unwrap_or(false)
                })
        });
        let runs = if served {
            crate::api::client::update_runs(daemon)?.0.update_runs
        } else {
            Vec::new()
        };
        match verdict(&doc.doc, &runs, &want_now, served, only) {
            // Only the placements that could keep it from settling were read: the count is
            // the summary's.
            Verdict::Settled(_) if only.is_empty() => Verdict::Settled(format!(
                "{} placement(s) settled on {} cluster placement(s)",
                doc.placements, doc.clusters
            )),
            v => v,
        }
    };
    Ok(Asked {
        want: want_now,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";

    fn doc(extra: serde_json::Value) -> Placements {
        let mut v = json!({
            "branch": "main", "head": HEAD, "serving": HEAD,
            "placements": [{
                "id": "crp/app", "strategy": "RollingUpdate", "target": 2,
                "selected": ["a", "b"], "applying": [], "removing": [], "waiting": [],
                "upToDate": ["a", "b"], "conditions": [],
                "clusters": {
                    "a": {"health": {"state": "available"}, "updatedAt": 1},
                    "b": {"health": {"state": "available"}, "updatedAt": 1}
                }
            }]
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                o.insert(k.clone(), x.clone());
            }
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn settled_when_served_and_nothing_moves() {
        let d = doc(json!({}));
        assert!(matches!(
            verdict(&d, &[], HEAD, true, &[]),
            Verdict::Settled(_)
        ));
        assert!(matches!(
            verdict(&d, &[], "0123456", true, &[]),
            Verdict::Settled(_)
        ));
    }

    #[test]
    fn waits_until_served_and_while_clusters_move_or_become_available() {
        let d = doc(json!({}));
        let v = verdict(&d, &[], "fedcba98", false, &[]);
        assert_eq!(
            v,
            Verdict::Waiting("the daemon serves 0123456789ab, not yet fedcba98".into())
        );
        let mut d = doc(json!({}));
        d.placements[0].applying = vec![String::from("b")].into();
        assert!(
            matches!(verdict(&d, &[], HEAD, true, &[]), Verdict::Waiting(w) if w.contains("1 applying"))
        );
        let mut d = doc(json!({}));
        d.placements[0].clusters.get_mut("b").unwrap().health = BindingHealth::Pending;
        assert!(
            matches!(verdict(&d, &[], HEAD, true, &[]), Verdict::Waiting(w) if w.contains("waiting for b"))
        );
        // Only the placements asked for count; one the commit lacks is waited for.
        assert!(
            matches!(verdict(&d, &[], HEAD, true, &["crp/other".into()]), Verdict::Waiting(w) if w.contains("no placement crp/other"))
        );
    }

    #[test]
    fn rejected_held_and_failed_clusters_fail() {
        let d = doc(json!({"rejected": {"commit": HEAD, "errors": ["a.yaml:1: bad"]}}));
        assert!(
            matches!(verdict(&d, &[], HEAD, false, &[]), Verdict::Failed(w) if w.contains("a.yaml:1: bad"))
        );
        let mut d = doc(json!({}));
        d.placements[0]
            .clusters
            .get_mut("a")
            .unwrap()
            .details
            .make_mut()
            .last_error = Some("409 conflict".into());
        assert_eq!(
            verdict(&d, &[], HEAD, true, &[]),
            Verdict::Failed("crp/app on a: 409 conflict".into())
        );
        // Also while the failed cluster is being looked at again.
        let a = d.placements[0].clusters.get_mut("a").unwrap();
        a.health = BindingHealth::Failed;
        a.recheck = Some("changed on the member".into());
        assert_eq!(
            verdict(&d, &[], HEAD, true, &[]),
            Verdict::Failed("crp/app on a: 409 conflict".into())
        );
    }

    /// A placement held for invalid resource selectors settles, and fails the wait.
    #[test]
    fn a_placement_held_for_invalid_resource_selectors_fails() {
        let mut d = doc(json!({}));
        d.placements[0].conditions = vec![crate::schedule::Condition::new(
            "ClusterResourcePlacementScheduled",
            false,
            "InvalidResourceSelectors",
            "The resource selectors are invalid: x",
        )];
        assert_eq!(
            verdict(&d, &[], HEAD, true, &[]),
            Verdict::Failed("crp/app: held: The resource selectors are invalid: x".into())
        );
    }

    /// A cluster the commit cannot render for fails the wait, by the status's field (not by
    /// the note's wording).
    #[test]
    fn a_cluster_the_commit_cannot_render_for_fails() {
        let mut d = doc(json!({}));
        d.placements[0].note = Some("anything".into());
        assert!(matches!(
            verdict(&d, &[], HEAD, true, &[]),
            Verdict::Settled(_)
        ));
        d.placements[0]
            .render_errors
            .insert("b".into(), "override o: no such path".into());
        assert_eq!(
            verdict(&d, &[], HEAD, true, &[]),
            Verdict::Failed("crp/app on b: cannot render: override o: no such path".into())
        );
    }

    /// A run as the daemon serves it (`state` is the run's `spec.state`): where it stands
    /// comes from its status's conditions.
    fn run(progressing: (&str, &str), succeeded: Option<(&str, &str)>) -> UpdateRun {
        let condition = |t: &str, (status, reason): (&str, &str)| {
            json!({"type": t, "status": status, "reason": reason, "message": "",
                "lastTransitionTime": 1})
        };
        let mut conditions = vec![
            condition("Initialized", ("True", "UpdateRunInitializedSuccessfully")),
            condition("Progressing", progressing),
        ];
        conditions.extend(succeeded.map(|s| condition("Succeeded", s)));
        serde_json::from_value(json!({
            "name": "r1", "placement": "crp/app", "resourceSnapshotIndex": 0,
            "policySnapshotIndex": 0, "initialized": "True", "progressing": "False",
            "succeeded": "Unknown", "createdAt": 1, "state": "Run", "stage": "canary",
            "clusters": "1/2", "waitingFor": "approval", "initCommit": HEAD,
            "status": {"name": "r1", "placement": "crp/app", "strategyName": "s",
                "initCommit": HEAD, "createdAt": 1, "state": "Run", "conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn a_staged_run_in_progress_is_waited_for() {
        let d = doc(json!({}));
        let waiting = run(("False", "UpdateRunWaiting"), None);
        assert!(
            matches!(verdict(&d, &[waiting], HEAD, true, &[]), Verdict::Waiting(w) if w.contains("update run r1 is Waiting (approval)"))
        );
        let stopped = run(("False", "UpdateRunStopped"), None);
        assert!(matches!(
            verdict(&d, &[stopped], HEAD, true, &[]),
            Verdict::Settled(_)
        ));
    }

    #[test]
    fn a_failed_staged_run_fails_the_wait() {
        let d = doc(json!({}));
        let failed = run(
            ("False", "UpdateRunFailed"),
            Some(("False", "UpdateRunFailed")),
        );
        assert_eq!(
            verdict(&d, &[failed], HEAD, true, &[]),
            Verdict::Failed("crp/app: update run r1 failed".into())
        );
    }
}
