//! What several commands read: a commit of a repository, the inventory (a file or the live
//! members), the previous state; and how its problems are printed.

use crate::catalog::{Catalog, Diagnostic};
use crate::cli::flags::{parse_timeout, KubeconfigArgs};
use crate::model::PlacementKey;
use crate::schedule::{Fleet, Inventory, PlacementSchedule, Previous};
use crate::source::CommitFiles;
use crate::sources::read_commit;
use crate::state::StateStore;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Where the scheduler's inputs beyond the commit come from.
#[derive(Debug, Args)]
pub struct ScheduleInputs {
    #[command(flatten)]
    pub inventory: InventoryArgs,
    /// State directory: the previous bindings are read from it (the daemon's store).
    #[arg(long)]
    pub state: Option<PathBuf>,
}

/// Where the inventory comes from (see [`load_inventory`]).
#[derive(Debug, Args)]
pub struct InventoryArgs {
    /// Inventory file (per cluster health, properties and add-on scores, as `gitfleet
    /// inventory` prints it), or `live` to ask the members now through
    /// --kubeconfig. Without it every declared member counts as healthy with only its declared
    /// properties.
    #[arg(long, value_name = "FILE|live")]
    pub inventory: Option<InventorySource>,
    /// How `--inventory live` reaches the members.
    #[command(flatten)]
    pub kubeconfig: KubeconfigArgs,
    #[command(flatten)]
    pub probe: ProbeArgs,
}

/// `--inventory FILE` or `--inventory live`.
#[derive(Debug, Clone, PartialEq)]
pub enum InventorySource {
    File(PathBuf),
    Live,
}

impl std::str::FromStr for InventorySource {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // A file really named `live` is still reachable as `./live`.
        Ok(if s == "live" {
            InventorySource::Live
        } else {
            InventorySource::File(PathBuf::from(s))
        })
    }
}

/// How members are probed for a live inventory.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Price table: hourly cost of a node by instance type (`instanceTypes: {Standard_D4s_v5:
    /// 0.192}`); adds the per-cpu-core and per-gb-memory cost properties.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// How long one member may take to answer (e.g. 10s, 1m30s; a bare number is seconds); a
    /// slower member is reported unhealthy.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub member_timeout: std::time::Duration,
    /// Members asked at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// Collect each member's namespaces (names only, at most 200), so that a ResourcePlacement
    /// is scheduled only where its namespace exists, as KubeFleet's member agent does with
    /// `--enable-namespace-collection-in-property-provider`. Off: every member passes.
    #[arg(long)]
    pub enable_namespace_collection: bool,
}

/// Which commit of which repository, and which folder of it.
#[derive(Debug, Args)]
pub struct CommitArgs {
    /// Path of the git repository.
    #[arg(long, env = "GITFLEET_REPO", default_value = ".", value_name = "DIR")]
    pub repo: PathBuf,
    /// Branch, tag or commit to read.
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// Folder of the repository holding the fleet (default: the whole tree).
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        value_name = "DIR"
    )]
    pub path: String,
    #[command(flatten)]
    pub sources: crate::cli::flags::SourcesArgs,
}

/// Failures that map to an exit code other than 1.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(super) struct SourceFailure(#[from] crate::source::SourceError);

pub(super) fn read(args: &CommitArgs) -> Result<CommitFiles> {
    let sources = args.sources.load(None)?;
    let files = read_commit(&args.repo, &args.rev, &args.path, &sources)
        .map_err(|e| anyhow!(SourceFailure(e)))?;
    for skipped in &files.skipped {
        eprintln!("note: {skipped}");
    }
    note_uncommitted(args, &files);
    Ok(files)
}

/// A note when the commit read is the one checked out and the working tree's manifests differ
/// from it: gitfleet reads commits, so those edits are not what was checked.
fn note_uncommitted(args: &CommitArgs, files: &CommitFiles) {
    const LIMIT: usize = 20_000;
    let Ok(changed) = crate::source::worktree::uncommitted_manifests(
        &args.repo,
        &args.path,
        &files.commit,
        LIMIT,
    ) else {
        return;
    };
    if changed.is_empty() {
        return;
    }
    let shown: Vec<&str> = changed.iter().take(3).map(String::as_str).collect();
    let more = match changed.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    eprintln!(
        "note: {} differ{} from commit {} ({}{more}): gitfleet reads commits, not files; commit the edits to check them",
        if changed.len() == 1 { "1 manifest in the working tree".to_string() } else { format!("{} manifests in the working tree", changed.len()) },
        if changed.len() == 1 { "s" } else { "" },
        &files.commit[..12.min(files.commit.len())],
        shown.join(", "),
    );
}

/// `--placement` as written: an id (`crp/NAME`, `rp/NAMESPACE/NAME`) or a bare name with
/// `--namespace`; the name and namespace to look up.
pub(super) fn placement_arg(
    given: &str,
    namespace: Option<&str>,
) -> Result<(String, Option<String>)> {
    if !given.contains('/') {
        return Ok((given.to_string(), namespace.map(str::to_string)));
    }
    let key: PlacementKey = given.parse().map_err(|e| anyhow!("--placement: {e}"))?;
    if !key.kind.is_kubefleet() {
        bail!("--placement {given}: only KubeFleet placements (crp/, rp/) are taken here");
    }
    if namespace.is_some_and(|ns| key.namespace.as_deref() != Some(ns)) {
        bail!("--placement {given} and --namespace disagree: give one of them");
    }
    Ok((key.name, key.namespace))
}

/// Prints the likely mistakes of a valid commit ([`crate::lint`]) on stderr; returns how many.
pub(super) fn print_warnings(cat: &Catalog) -> usize {
    let warnings = crate::lint::lint(cat);
    let mut err = std::io::stderr().lock();
    for w in &warnings {
        let _ = writeln!(err, "warning: {w}");
    }
    warnings.len()
}

pub(super) fn print_diagnostics(diags: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diags {
        let _ = writeln!(err, "{d}");
    }
    let _ = writeln!(
        err,
        "{} problem{} found",
        diags.len(),
        if diags.len() == 1 { "" } else { "s" }
    );
}

/// Warns of each placement held for invalid resource selectors: KubeFleet's hub admits it and
/// reports the error on it, so the commit is not rejected for it. A selector the commit's
/// validation already refuses (`refused`: KubeFleet's webhook refuses it) is not warned of too.
pub(super) fn warn_invalid_selections(
    invalid: &crate::snapshot::InvalidSelections,
    refused: &[Diagnostic],
) {
    let mut err = std::io::stderr().lock();
    let already = |d: &Diagnostic| {
        refused.iter().any(|r| {
            r.origin.file == d.origin.file
                && r.origin.document == d.origin.document
                && r.field == d.field
        })
    };
    for d in invalid
        .values()
        .flat_map(|i| &i.diagnostics)
        .filter(|d| !already(d))
    {
        let _ = writeln!(
            err,
            "warning: {d} (reported on the placement as Scheduled=False InvalidResourceSelectors and not rejected: KubeFleet's hub admits it; the placement is held, keeping what it placed)"
        );
    }
}

/// `ok abc1234: 12 files, 40 objects (3 ClusterResourcePlacement, 6 MemberCluster, …)`
pub(super) fn summary(commit: &CommitFiles, cat: &Catalog) -> String {
    let counts = cat.counts_by_kind();
    let kinds: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!(
        "ok {}: {} files, {} objects ({})",
        &commit.commit[..12.min(commit.commit.len())],
        commit.files.len(),
        cat.objects.len(),
        kinds.join(", ")
    )
}

/// Reads and validates a commit; `Err(code)` when it is invalid (diagnostics printed).
pub(super) fn load_valid(args: &CommitArgs) -> Result<Result<(CommitFiles, Catalog), ExitCode>> {
    let commit = read(args)?;
    let (cat, diags) = commit.analyze();
    if !diags.is_empty() {
        print_diagnostics(&diags);
        eprintln!("the commit is invalid; nothing is scheduled or rendered from it");
        return Ok(Err(ExitCode::from(1)));
    }
    Ok(Ok((commit, cat)))
}

/// Runs the scheduler on a valid commit with the given inventory and previous state.
pub(super) fn run_schedule(
    cat: &Catalog,
    inputs: &ScheduleInputs,
) -> Result<Vec<Arc<PlacementSchedule>>> {
    let inventory = load_inventory(&inputs.inventory, &[cat])?;
    let previous = read_previous(inputs.state.as_deref())?;
    let fleet = Fleet::build(cat, inventory.as_ref());
    Ok(crate::schedule::schedule_commit(
        cat,
        &crate::snapshot::invalid_selections(cat),
        &fleet,
        &previous,
        crate::timestamp::now_unix_signed(),
    ))
}

/// The inventory the scheduler sees, wherever it comes from: the file `--inventory FILE`, the
/// members of `cats` asked now (`--inventory live`, every member of every catalog probed once),
/// or none. Members that do not answer a live probe are listed unhealthy and named on stderr.
/// Must not be called from inside a tokio runtime (it runs its own for the probe).
pub fn load_inventory(args: &InventoryArgs, cats: &[&Catalog]) -> Result<Option<Inventory>> {
    load_inventory_from(args.inventory.as_ref(), &args.kubeconfig, &args.probe, cats)
}

/// [`load_inventory`] from its parts (`apply` always has a kubeconfig).
pub fn load_inventory_from(
    source: Option<&InventorySource>,
    kubeconfig: &KubeconfigArgs,
    probe: &ProbeArgs,
    cats: &[&Catalog],
) -> Result<Option<Inventory>> {
    match source {
        None => Ok(None),
        Some(InventorySource::File(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read inventory {}", path.display()))?;
            Ok(Some(Inventory::parse(&path.display().to_string(), &text)?))
        }
        Some(InventorySource::Live) => {
            let inventory = live_inventory(cats, kubeconfig, probe)?;
            for c in inventory.clusters.iter().filter(|c| !c.healthy) {
                eprintln!(
                    "warning: member {} is unhealthy: {}",
                    c.name,
                    c.error.as_deref().unwrap_or("no reason given")
                );
            }
            Ok(Some(inventory))
        }
    }
}

/// Probes the members of `cats` through `kubeconfig`; errors only when nothing could be asked.
pub(super) fn live_inventory(
    cats: &[&Catalog],
    kubeconfig: &KubeconfigArgs,
    probe: &ProbeArgs,
) -> Result<Inventory> {
    use crate::members::inventory::{collect_with, members_of, Options, PriceTable};
    let located = kubeconfig.load()?;
    let prices = match &probe.prices {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read price table {}", path.display()))?;
            Some(PriceTable::parse(&path.display().to_string(), &text)?)
        }
        None => None,
    };
    let options = Options {
        concurrency: usize::from(probe.concurrency),
        timeout: probe.member_timeout,
        prices,
        namespaces: probe.enable_namespace_collection,
    };
    let members = members_of(cats);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime that probes members")?;
    Ok(runtime.block_on(collect_with(
        &members,
        std::sync::Arc::new(located.kubeconfig),
        &located.name,
        &options,
    )))
}

pub(super) fn read_previous(state: Option<&Path>) -> Result<Previous> {
    Ok(match state {
        Some(dir) => StateStore::open(dir)?.load_schedule()?.1,
        None => Previous::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placement_is_an_id_or_a_name_with_its_namespace() {
        assert_eq!(
            placement_arg("crp/web", None).unwrap(),
            ("web".to_string(), None)
        );
        assert_eq!(
            placement_arg("rp/shop/cart", None).unwrap(),
            ("cart".to_string(), Some("shop".to_string()))
        );
        assert_eq!(
            placement_arg("cart", Some("shop")).unwrap(),
            ("cart".to_string(), Some("shop".to_string()))
        );
        assert!(placement_arg("rp/shop/cart", Some("other")).is_err());
        assert!(placement_arg("shop/cart", None).is_err());
    }
}
