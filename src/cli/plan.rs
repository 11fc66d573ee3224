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
    /// Also post the plan (markdown) as one comment on the pull request (GitLab: merge
    /// request), found again by a hidden marker and updated in place by later runs. The token
    /// is read from GITFLEET_FORGE_TOKEN (GitHub: a token that may write pull-request comments;
    /// GitLab: an access token with `api`). The exit code is the plan's; a failed post exits 1.
    #[arg(long, env = "GITFLEET_COMMENT_ON", value_enum, value_name = "FORGE")]
    pub comment_on: Option<crate::notify::comment::Forge>,
    /// With --comment-on: the API's base URL (default: https://api.github.com,
    /// https://gitlab.com/api/v4).
    #[arg(long, env = "GITFLEET_FORGE_API_URL", value_name = "URL")]
    pub forge_api_url: Option<String>,
    /// With --comment-on: GitHub's `OWNER/REPO`, or GitLab's project id or path.
    #[arg(long, env = "GITFLEET_FORGE_REPOSITORY", value_name = "REPO")]
    pub forge_repository: Option<String>,
    /// With --comment-on: the pull request's number (GitLab: the merge request's iid).
    #[arg(long, env = "GITFLEET_PULL_REQUEST", value_name = "N")]
    pub pull_request: Option<u64>,
}

pub(super) fn plan(args: &PlanArgs, color: crate::cli::flags::ColorChoice) -> Result<ExitCode> {
    if std::env::args().any(|a| a == "--context" || a.starts_with("--context=")) {
        eprintln!(
            "warning: plan's --context is now --diff-context (--context is a kubeconfig context, as in kubectl)"
        );
    }
    // Unreadable inputs are plain errors here (exit 1), as the plan's exit codes say.
    // Each commit's files are let go once analysed: from there on the plan reads the catalog.
    // A --comment-on without what it needs is a usage error before any work.
    comment_target(args)?;
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
    if let Some(target) = comment_target(args)? {
        let mut markdown = String::new();
        crate::plan::format::write_markdown(&mut markdown, &plan, args.max_bytes)
            .map_err(|_| anyhow!("cannot format the plan"))?;
        let done = crate::notify::comment::upsert(&target, &args.path, &markdown)?;
        eprintln!(
            "{}",
            match done {
                crate::notify::comment::Upserted::Created => "plan posted as a new comment".into(),
                crate::notify::comment::Upserted::Updated(id) =>
                    format!("plan comment {id} updated"),
            }
        );
    }
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

/// Where `--comment-on` posts, checked before anything is read.
fn comment_target(args: &PlanArgs) -> Result<Option<crate::notify::comment::Target>> {
    use crate::notify::comment::{Forge, Target};
    let Some(forge) = args.comment_on else {
        return Ok(None);
    };
    let usage = |m: &str| crate::cli::flags::UsageError(format!("--comment-on: {m}"));
    let repository = args
        .forge_repository
        .clone()
        .ok_or_else(|| usage("give --forge-repository (GITFLEET_FORGE_REPOSITORY)"))?;
    let number = args
        .pull_request
        .ok_or_else(|| usage("give --pull-request (GITFLEET_PULL_REQUEST)"))?;
    let token = std::env::var("GITFLEET_FORGE_TOKEN")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| usage("set GITFLEET_FORGE_TOKEN to a token that may comment"))?;
    let api_url = args.forge_api_url.clone().unwrap_or_else(|| match forge {
        Forge::GitHub => "https://api.github.com".into(),
        Forge::GitLab => "https://gitlab.com/api/v4".into(),
    });
    Ok(Some(Target {
        forge,
        api_url,
        repository,
        number,
        token: crate::notify::config::Secret::new(token),
    }))
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
