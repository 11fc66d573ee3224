//! `gitfleet plan`: what a change (base → head) does to the fleet, for review.

use super::inputs::{load_inventory, read_previous, InventoryArgs};
use crate::catalog::{Catalog, Diagnostic};
use crate::source::CommitFiles;
use crate::sources::read_commit;
use crate::timestamp::now_unix_signed as now_unix;
use anyhow::{anyhow, Result};
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PlanFormat {
    /// For terminals (coloured when stdout is one).
    Text,
    /// A pull-request comment: summary table, a section per placement, diffs folded.
    Markdown,
    Json,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Path of the git repository.
    #[arg(long, env = "GITFLEET_REPO", default_value = ".", value_name = "DIR")]
    pub repo: PathBuf,
    /// The commit the fleet runs today (the pull request's target).
    #[arg(long)]
    pub base: String,
    /// The proposed commit.
    #[arg(long)]
    pub head: String,
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
    /// Inventory, as for `schedule`; `live` probes the members of base and head once and uses
    /// the answers for both.
    #[command(flatten)]
    pub inventory: InventoryArgs,
    /// A running gitfleet daemon (`http://host:port`) to take the live inventory and the
    /// current bindings from.
    #[arg(long, conflicts_with = "inventory")]
    pub server: Option<String>,
    #[command(flatten)]
    pub token: crate::cli::flags::TokenArgs,
    /// State directory with the current bindings (as for `schedule`), what each cluster runs
    /// and the staged update runs' records: runs are shown as the daemon has them, and a run
    /// that would move clusters back to an older snapshot is reported.
    #[arg(long, conflicts_with = "server")]
    pub state: Option<PathBuf>,
    /// Only diff these clusters' manifests (repeatable; all by default).
    #[arg(long = "cluster", value_name = "CLUSTER")]
    pub clusters: Vec<String>,
    /// Output format (`-o`/`--output` as on the other commands, or `--format`).
    #[arg(
        short = 'o',
        long = "format",
        visible_alias = "output",
        value_enum,
        default_value = "text"
    )]
    pub format: PlanFormat,
    /// Lines of context in diffs. (`--context` is kubectl's kubeconfig context; it is still
    /// read here as this flag, with a warning.)
    #[arg(long, alias = "context", value_name = "LINES", default_value_t = 3)]
    pub diff_context: usize,
    /// Exit 1 when the head brings warnings (likely mistakes such as a selector that selects
    /// nothing), as for errors.
    #[arg(long)]
    pub strict: bool,
    /// Markdown only: the most bytes to print (GitHub caps comments at 65,536).
    #[arg(long, default_value_t = 60_000)]
    pub max_bytes: usize,
    /// With trust files: say whether the head's signature passes `gitfleet run
    /// --verify-commits` (a head that would be refused makes the plan invalid).
    #[command(flatten)]
    pub trust: crate::cli::approve::TrustArgs,
    /// The daemon's thresholds, to warn when it would hold the head as a mass deletion.
    #[command(flatten)]
    pub deletion_guard: crate::cli::flags::DeletionGuardArgs,
}

pub(super) fn plan(args: &PlanArgs, color: crate::cli::flags::ColorChoice) -> Result<ExitCode> {
    if std::env::args().any(|a| a == "--context" || a.starts_with("--context=")) {
        eprintln!(
            "warning: plan's --context is now --diff-context (--context is a kubeconfig context, as in kubectl)"
        );
    }
    // Unreadable inputs are plain errors here (exit 1), as the plan's exit codes say.
    // Each commit's files are let go once analysed: from there on the plan reads the catalog.
    let sources = args.sources.load(None)?;
    let analyzed = |rev: &str| -> Result<(CommitFiles, Catalog, Vec<Diagnostic>)> {
        let mut commit =
            read_commit(&args.repo, rev, &args.path, &sources).map_err(|e| anyhow!(e))?;
        let (cat, diags) = commit.analyze();
        commit.files = Vec::new();
        Ok((commit, cat, diags))
    };
    let (base, base_cat, _) = analyzed(&args.base)?;
    let (head, head_cat, mut head_diags) = analyzed(&args.head)?;
    let mut signature_errors = Vec::new();
    let mut head_signature = None;
    if args.trust.given() {
        let trust = args.trust.load()?.trust;
        let (_, signed) =
            crate::approvals::object::read_commit_signature(&args.repo, &head.commit)?;
        match crate::approvals::verify_commit(signed.as_ref(), &trust, now_unix()) {
            Ok(s) => {
                head_signature = Some(format!(
                    "verified: signed by {} ({})",
                    s.name,
                    s.fingerprints.first().map(String::as_str).unwrap_or("")
                ))
            }
            Err(r) => {
                head_signature = Some(format!("refused: {}", r.reason));
                signature_errors.push(format!(
                    "commit signature ({}): {} (gitfleet run --verify-commits would not serve this head)",
                    r.reason, r.detail
                ));
            }
        }
    }
    let plan = if head_diags.is_empty() && signature_errors.is_empty() {
        // A running daemon gives the live inventory and the bindings as they are.
        let (inventory, previous) = match &args.server {
            Some(url) => {
                let daemon = args.token.daemon(url)?;
                (
                    Some(crate::api::client::inventory(&daemon)?),
                    crate::api::client::schedule(&daemon)?,
                )
            }
            // Base and head see the same inventory; a live one probes their members once.
            None => (
                load_inventory(&args.inventory, &[&head_cat, &base_cat])?,
                read_previous(args.state.as_deref())?,
            ),
        };
        // What clusters run and the runs' records: runs as the daemon has them.
        let rollout = match (&args.server, args.state.as_deref()) {
            (None, Some(dir)) => Some(crate::state::StateStore::open(dir)?.load_rollout()?),
            _ => None,
        };
        let inputs = crate::plan::Inputs {
            inventory: inventory.as_ref(),
            previous: &previous,
            rollout: rollout.as_ref(),
            now_unix: now_unix(),
        };
        // The guard first: its renderings are gone before the plan's diffs are made.
        let held = crate::plan::deletion_guard(
            (&base.commit, &base_cat),
            (&head.commit, &head_cat, &head.message),
            &inputs,
            &args.deletion_guard.policy(),
        );
        let plan = crate::plan::plan_catalogs(
            (&base.commit, &base_cat),
            (&head.commit, &head_cat),
            &inputs,
            &crate::plan::Options {
                clusters: args.clusters.clone(),
                context: args.diff_context,
            },
        );
        crate::plan::Plan { held, ..plan }
    } else {
        let mut errors: Vec<String> = head_diags.drain(..).map(|d| d.to_string()).collect();
        errors.extend(signature_errors);
        crate::plan::invalid(&base.commit, &head.commit, errors)
    };
    let plan = crate::plan::Plan {
        head_signature,
        ..plan
    };
    print_plan(&plan, args, color)?;
    Ok(
        if !plan.errors.is_empty()
            || plan.summary.render_errors > 0
            || (args.strict && !plan.warnings.is_empty())
        {
            ExitCode::from(1)
        } else if plan.has_changes() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// Prints the plan as it is formatted (its diffs can be many times the manifests' size, so the
/// text is never built whole), without trailing whitespace and with one final line break.
fn print_plan(
    plan: &crate::plan::Plan,
    args: &PlanArgs,
    color: crate::cli::flags::ColorChoice,
) -> Result<()> {
    use crate::plan::format;
    use crate::trimmed_output::{TrimmedOutput, Utf8Bytes};
    use std::io::IsTerminal;
    let stdout = std::io::stdout();
    let color = color.for_stream(stdout.is_terminal());
    let mut out = TrimmedOutput::new(std::io::BufWriter::new(stdout.lock()));
    let formatted = match args.format {
        PlanFormat::Json => {
            let mut bytes = std::io::BufWriter::new(Utf8Bytes::new(&mut out));
            format::write_json(&mut bytes, plan)?;
            bytes.flush()?;
            Ok(())
        }
        PlanFormat::Markdown => format::write_markdown(&mut out, plan, args.max_bytes),
        PlanFormat::Text => format::write_text(&mut out, plan, color),
    };
    // A formatting error stands for the I/O error `finish` reports.
    out.finish()?;
    formatted.map_err(|_| anyhow!("cannot format the plan"))
}
