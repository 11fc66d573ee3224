//! `gitfleet apply`: everything a commit places, pushed now to every member (no pacing).

use super::inputs::{load_inventory_from, load_valid, CommitArgs, InventorySource, ProbeArgs};
use crate::cli::flags::{KubeconfigArgs, PushArgs};
use crate::model::{ObjectKey, PlacementKey};
use crate::schedule::{Fleet, Previous};
use crate::source::CommitFiles;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ApplyFormat {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
    #[command(flatten)]
    pub kubeconfig: KubeconfigArgs,
    /// Inventory file (as for `schedule`), or `live` to ask the members through --kubeconfig
    /// first. Without it every declared member counts as healthy.
    #[arg(long, value_name = "FILE|live")]
    pub inventory: Option<InventorySource>,
    #[command(flatten)]
    pub probe: ProbeArgs,
    /// Only this placement: `crp/NAME`, `rp/NAMESPACE/NAME` or `ocm/NAMESPACE/NAME` (as
    /// status and plan write it), or a bare name (a ClusterResourcePlacement, or with
    /// --namespace a ResourcePlacement or OCM Placement).
    #[arg(long, value_name = "PLACEMENT")]
    pub placement: Option<String>,
    /// Namespace of a placement given by its bare name.
    #[arg(short = 'n', long, requires = "placement")]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub push: PushArgs,
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: ApplyFormat,
    /// The daemon's mass-deletion thresholds: the members' records are read first, and a
    /// commit deleting more is refused unless its message allows it
    /// (`Gitfleet-Allow-Deletions: <count>`) or --allow-mass-deletion is given.
    #[command(flatten)]
    pub deletion_guard: crate::cli::flags::DeletionGuardArgs,
    /// Apply even when the commit deletes more than the deletion guard allows (a one-shot
    /// human act; the daemon takes only a commit trailer).
    #[arg(long)]
    pub allow_mass_deletion: bool,
}

pub(super) fn apply(args: &ApplyArgs) -> Result<ExitCode> {
    use crate::push::PlacementResult;
    use crate::rollout::{Input, Pacing, RolloutState};
    use std::collections::{BTreeMap, BTreeSet};

    let (commit, cat) = match load_valid(&args.commit)? {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let inventory = load_inventory_from(
        args.inventory.as_ref(),
        &args.kubeconfig,
        &args.probe,
        &[&cat],
    )?;
    let fleet = Fleet::build(&cat, inventory.as_ref());
    let now = crate::timestamp::now_unix_signed();
    let invalid = crate::snapshot::invalid_selections(&cat);
    let schedule = crate::schedule::schedule_commit(&cat, &invalid, &fleet, &Previous::new(), now);
    let only: Option<BTreeSet<PlacementKey>> = match &args.placement {
        None => None,
        Some(given) if given.contains('/') => {
            let key: PlacementKey = given
                .parse()
                .map_err(|e| anyhow::anyhow!("--placement: {e}"))?;
            if args.namespace.is_some() {
                bail!("--placement {given} names its namespace: --namespace is for a bare name");
            }
            if !schedule.iter().any(|p| p.key == key) {
                bail!("no placement {key} in commit {}", commit.commit);
            }
            Some(BTreeSet::from([key]))
        }
        Some(name) => {
            let keys: BTreeSet<PlacementKey> = schedule
                .iter()
                .map(|p| &p.key)
                .filter(|k| &k.name == name && k.namespace == args.namespace)
                .cloned()
                .collect();
            if keys.is_empty() {
                bail!(
                    "no placement {name:?}{} in commit {}",
                    args.namespace
                        .as_ref()
                        .map(|ns| format!(" in namespace {ns:?}"))
                        .unwrap_or_default(),
                    commit.commit
                );
            }
            Some(keys)
        }
    };
    // A member the inventory says is unhealthy is not touched at all: the schedule (without the
    // daemon's bindings) no longer picks it, and sweeping it would wipe a cluster that may only
    // be briefly unreachable.
    let unreachable: BTreeMap<String, String> = fleet
        .clusters
        .iter()
        .filter(|c| !c.healthy)
        .map(|c| {
            let why = c.health_reason.as_deref().unwrap_or("unhealthy");
            (c.name.to_string(), why.to_string())
        })
        .collect();
    let input = Input {
        cat: &cat,
        commit: &commit.commit,
        schedule: &schedule,
        fleet: &fleet,
        unreachable: &unreachable,
        only: only.as_ref(),
        now: now.max(0) as u64,
        staged: Default::default(),
        selected: None,
    };
    let decision = crate::rollout::step(&input, &RolloutState::default(), Pacing::Immediate);
    let mut skipped = Vec::new();
    for (name, reason) in &decision.skipped {
        eprintln!("{name}: skipped, unhealthy in the inventory ({reason})");
        skipped.push(serde_json::json!({"member": name, "reason": reason}));
    }
    let contexts: BTreeMap<String, String> = crate::members::member_targets(&cat)
        .into_iter()
        .map(|t| (t.name, t.context))
        .collect();
    let members = crate::push::member_pushes(&decision.work, &decision.sweeps, &contexts);
    let kubeconfig = args.kubeconfig.load()?;
    let shared_kubeconfig = std::sync::Arc::new(kubeconfig.kubeconfig);
    let opts = args.push.options(&commit.commit);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let targets = members
        .iter()
        .map(|m| crate::members::MemberTarget {
            name: m.member.clone(),
            context: m.context.clone(),
        })
        .collect();
    let records = runtime.block_on(crate::push::fleet::records_of(
        &shared_kubeconfig,
        &kubeconfig.name,
        targets,
        &opts,
    ));
    match apply_deletion_verdict(&decision, &records, &commit, &args.deletion_guard.policy()) {
        crate::rollout::guard::Verdict::Held(h) if !args.allow_mass_deletion => {
            let (n, policy) = (h.assessment.deleting, args.deletion_guard.policy());
            eprintln!(
                "commit {} would delete {n} of the {} objects gitfleet manages on these members \
                 (more than {}% and at least {}): nothing is applied. Allow it in the commit \
                 with the trailer `{}: {n}`, or for this apply only with --allow-mass-deletion",
                h.commit,
                h.assessment.managed,
                policy.share_percent,
                policy.min,
                crate::rollout::guard::TRAILER,
            );
            return Ok(ExitCode::from(1));
        }
        crate::rollout::guard::Verdict::Held(h) => {
            eprintln!(
                "applying a mass deletion ({} of {} objects) as --allow-mass-deletion allows",
                h.assessment.deleting, h.assessment.managed
            );
        }
        crate::rollout::guard::Verdict::Released(_) => {
            eprintln!(
                "applying a mass deletion the commit's {} trailer allows",
                crate::rollout::guard::TRAILER
            );
        }
        crate::rollout::guard::Verdict::Proceed => {}
    }
    let progress: std::sync::Arc<dyn Fn(&crate::push::MemberResult) + Send + Sync> =
        std::sync::Arc::new(|r: &crate::push::MemberResult| {
            let state = if r.failed() { "failed" } else { "done" };
            eprintln!("{}: {state}", r.member);
        });
    let mut results = runtime.block_on(crate::push::push_fleet(
        &shared_kubeconfig,
        &kubeconfig.name,
        members,
        &opts,
        progress,
    ));
    // What cannot be rendered for a member is reported with that member's results.
    for step in &decision.steps {
        if step.held {
            eprintln!(
                "note: placement {}: {}",
                step.placement,
                step.note.as_deref().unwrap_or_default()
            );
        }
        for (cluster, e) in &step.render_errors {
            if let Some(m) = results.iter_mut().find(|m| &m.member == cluster) {
                m.placements.push(PlacementResult {
                    placement: step.placement.record_key(),
                    cluster: cluster.clone(),
                    error: Some(format!("cannot render: {e}")),
                    objects: Vec::new(),
                });
            }
        }
    }
    let failed = results.iter().any(crate::push::MemberResult::failed);
    let mut out = std::io::stdout().lock();
    match args.output {
        ApplyFormat::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"commit": commit.commit, "members": results, "skipped": skipped})
            )?
        )?,
        ApplyFormat::Table => write!(out, "{}", apply_table(&results))?,
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The deletion guard on `gitfleet apply`'s decision: what is managed is what the members'
/// records list (placements that abandon their objects left out; a member whose records cannot
/// be read counts as holding nothing); a recorded placement is kept, pruned or removed as the
/// step and its sweeps say.
fn apply_deletion_verdict(
    decision: &crate::rollout::Decision,
    records: &[crate::push::fleet::MemberRecords],
    commit: &CommitFiles,
    policy: &crate::rollout::guard::Policy,
) -> crate::rollout::guard::Verdict {
    use crate::rollout::guard::{self, Fate};
    use crate::rollout::Prune;
    // Owned here (a record lists its entries); a record whose key this version cannot read
    // names no placement it delivers, so nothing here judges it.
    let records: Vec<(&str, PlacementKey, bool, BTreeSet<ObjectKey>)> = records
        .iter()
        .flat_map(|(member, recs)| {
            recs.iter()
                .flat_map(|r| r.values())
                .map(move |r| (member, r))
        })
        .filter_map(|(member, r)| {
            let key = PlacementKey::from_record_key(&r.key)?;
            let ids = r.entries.iter().map(|e| e.object.key()).collect();
            Some((member.as_str(), key, r.abandon, ids))
        })
        .collect();
    let on_members = records
        .iter()
        .map(|(member, key, abandon, ids)| guard::Recorded {
            placement: key,
            abandon: *abandon,
            clusters: [(*member, ids)],
        });
    let assessment = guard::assess(
        on_members,
        &guard::Judged::new(&decision.steps, &decision.ledger.abandon),
        // The records are read from the commit's members only.
        |_| true,
        |key, member| {
            let swept = decision.sweeps.iter().find(|s| s.cluster == member);
            match swept.map(|s| &s.prune) {
                Some(Prune::AllExcept(keep)) if !keep.contains(key) => Fate::Removed,
                Some(Prune::Only(only)) if only.contains(key) => Fate::Removed,
                _ => Fate::Untouched,
            }
        },
    );
    guard::judge(policy, assessment, &commit.commit, &commit.message)
}

/// Per placement and cluster: counts, then one line per problem or difference.
fn apply_table(results: &[crate::push::MemberResult]) -> String {
    use crate::push::{Availability, Outcome};
    let mut rows = vec![[
        "PLACEMENT",
        "CLUSTER",
        "APPLIED",
        "UNCHANGED",
        "PRUNED",
        "DRIFTED",
        "DIFFED",
        "FAILED",
        "AVAILABLE",
    ]
    .map(String::from)];
    let mut details = Vec::new();
    for m in results {
        if m.placements.is_empty() {
            if let Some(e) = &m.error {
                details.push(format!("{}: {e}", m.member));
            }
        }
        for p in &m.placements {
            let failed = p.objects.iter().filter(|o| o.outcome.is_failure()).count()
                - p.count(Outcome::Drifted);
            let applied: Vec<_> = p
                .objects
                .iter()
                .filter_map(|o| o.availability.as_ref())
                .collect();
            let available = applied
                .iter()
                .filter(|a| !matches!(a, Availability::NotYet(_)))
                .count();
            let untrackable = applied
                .iter()
                .filter(|a| matches!(a, Availability::NotTrackable))
                .count();
            let mut avail = format!("{available}/{}", applied.len());
            if untrackable > 0 {
                avail.push_str(&format!(" ({untrackable} untrackable)"));
            }
            rows.push([
                p.placement.clone(),
                p.cluster.clone(),
                p.count(Outcome::Applied).to_string(),
                p.count(Outcome::Unchanged).to_string(),
                p.count(Outcome::Pruned).to_string(),
                p.count(Outcome::Drifted).to_string(),
                p.count(Outcome::Diffed).to_string(),
                if p.error.is_some() {
                    "all".to_string()
                } else {
                    failed.to_string()
                },
                avail,
            ]);
            if let Some(e) = &p.error {
                details.push(format!("{} {}: {e}", p.placement, p.cluster));
            }
            for o in &p.objects {
                let noteworthy = !matches!(
                    o.outcome,
                    Outcome::Applied | Outcome::Unchanged | Outcome::Pruned | Outcome::NoDiff
                ) || !o.diffs.is_empty();
                if !noteworthy {
                    continue;
                }
                let outcome = serde_json::to_value(o.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let mut line = format!("{} {}: {}: {outcome}", p.placement, p.cluster, o.object);
                if let Some(e) = &o.error {
                    line.push_str(&format!(": {e}"));
                }
                details.push(line);
                for d in &o.diffs {
                    let show = |v: &Option<serde_json::Value>| {
                        v.as_ref().map_or("(absent)".to_string(), |v| v.to_string())
                    };
                    details.push(format!(
                        "    {}: member {}, git {}",
                        d.path,
                        show(&d.observed),
                        show(&d.desired)
                    ));
                }
            }
        }
    }
    let mut out = crate::text_table::render(&rows);
    if !details.is_empty() {
        out.push('\n');
        for d in details {
            out.push_str(&d);
            out.push('\n');
        }
    }
    out
}
