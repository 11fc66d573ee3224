//! The `gitfleet` command line: parse arguments, call the library, print. Thin by design.

use crate::catalog::{Catalog, Diagnostic};
use crate::flags::{parse_timeout, KubeconfigArgs, PushArgs, UsageError, EX_USAGE};
use crate::model::member::MEMBER_NAME_LABEL;
use crate::model::Labels;
use crate::model::{PlacementKey, PlacementKind};
use crate::render::cluster::{overrides_of, render_cluster, render_placement, PlacementManifests};
use crate::render::{ClusterTarget, Manifest};
use crate::schedule::{Fleet, Inventory, PlacementSchedule, Previous};
use crate::source::{read_commit, CommitFiles};
use crate::state::StateStore;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  the commit is invalid (every diagnostic is printed) or the request cannot be met
     (unknown placement, an override that fails for this cluster)
  3  the repository, revision or path cannot be read
  64 bad command line (unknown flag, missing or invalid value)";

/// `Examples:` then the exit codes, for a command's `--help`.
fn help(examples: &str, exit_codes: &str) -> String {
    format!("Examples:\n{examples}\n\n{exit_codes}")
}

const VALIDATE_EXAMPLES: &str = "  # Check the commit checked out, as CI does on a pull request
  gitfleet validate --repo .
  # Another branch, only the fleet folder
  gitfleet validate --repo . --rev origin/main --path fleet";

const SCHEDULE_EXAMPLES: &str =
    "  # Which clusters each placement picks, with the members' live properties
  gitfleet schedule --repo . --inventory live --kubeconfig ~/.kube/fleet.yaml
  # Every picked cluster by name, the policy snapshot and all conditions
  gitfleet schedule --repo . -o wide
  # OCM PlacementDecisions for Argo CD's clusterDecisionResource generator
  gitfleet schedule --repo . -o placementdecisions";

const RENDER_EXAMPLES: &str =
    "  # What placement `web` delivers to cluster east-1, overrides applied
  gitfleet render --repo . --placement web --cluster east-1
  # A ResourcePlacement, as JSON
  gitfleet render --repo . --placement cart --namespace shop --cluster west-2 -o json";

const PLAN_EXAMPLES: &str = "  # In a pull request: what merging it does to the fleet, as a comment
  gitfleet plan --repo . --base origin/main --head HEAD -o markdown > plan.md || [ $? -eq 2 ]
  # Starting from what the running daemon sees (inventory and bindings)
  gitfleet plan --repo . --base origin/main --head HEAD --server http://gitfleet:7070";

const INVENTORY_EXAMPLES: &str =
    "  # Ask every member for its properties; save them for offline scheduling
  gitfleet inventory --repo . --kubeconfig ~/.kube/fleet.yaml > inventory.yaml
  gitfleet schedule --repo . --inventory inventory.yaml";

const APPLY_EXAMPLES: &str = "  # Push everything the commit places, now, to every member
  gitfleet apply --repo . --kubeconfig ~/.kube/fleet.yaml
  # One placement only
  gitfleet apply --repo . --placement web";

const RUN_EXAMPLES: &str = "  # Follow a local repository (pushes into it are seen at once)
  gitfleet run --repo /srv/fleet.git --state-dir /var/lib/gitfleet
  # Follow a remote over HTTPS with a token, fetched every minute and on the webhook
  gitfleet run --repo https://git.example.com/fleet.git --git-token-file /run/secrets/token \\
    --state-dir /var/lib/gitfleet --poll 1m --webhook-secret-file /run/secrets/hook
  # Roll the head out once and exit (CI, cron)
  gitfleet run --repo . --state-dir state --once";

const STATUS_EXAMPLES: &str = "  # Every placement, with the clusters by name
  gitfleet status -o wide
  # Follow a rollout as it happens (Ctrl-C to stop)
  gitfleet status --watch
  # One placement described, from a remote daemon
  gitfleet status crp/web --server http://gitfleet:7070";

const QUICKSTART_EXAMPLES: &str = "  gitfleet quickstart
  # Another folder and port; approve the staged run yourself
  gitfleet quickstart --dir /tmp/gf --listen 127.0.0.1:7171 --no-approve";

const SIM_EXAMPLES: &str =
    "  # The sample fleet's members, with a kubeconfig for kubectl and gitfleet
  gitfleet sim --fleet examples/sim-fleet.yaml --kubeconfig-out /tmp/sim.kubeconfig
  kubectl --kubeconfig /tmp/sim.kubeconfig --context eastus-staging get namespaces";

#[derive(Debug, Parser)]
#[command(
    name = "gitfleet",
    version,
    long_version = crate::build_info::LONG_VERSION,
    about = "A Git repository as the hub of a Kubernetes fleet (KubeFleet and OCM placements)",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes, before or after its name.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Log lines on stderr: text, or one JSON object per line (`GITFLEET_LOG=debug` for more).
    #[arg(
        long,
        global = true,
        env = "GITFLEET_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: crate::flags::LogFormat,
    /// Colours in output for people (plan's diffs, log levels): `auto` when the stream is a
    /// terminal and NO_COLOR is not set.
    #[arg(
        long,
        global = true,
        env = "GITFLEET_COLOR",
        value_enum,
        default_value = "auto"
    )]
    pub color: crate::flags::ColorChoice,
}

/// Logs go to stderr, with ANSI escapes only when `--color` allows them for stderr (a file or
/// a log collector gets plain text).
fn init_logging(global: &GlobalArgs) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("GITFLEET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = global.color.for_stream(std::io::stderr().is_terminal());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match global.log_format {
        crate::flags::LogFormat::Text => builder.with_ansi(ansi).try_init(),
        crate::flags::LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}

// One value per process, parsed once: `run`'s many flags make its variant the largest, and
// boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate one commit: every object parsed, classified and checked against its API rules.
    #[command(after_help = help(VALIDATE_EXAMPLES, EXIT_CODES))]
    Validate(ValidateArgs),
    /// Decide which member clusters each placement targets (KubeFleet and OCM semantics), with
    /// scores and reasons.
    #[command(after_help = help(SCHEDULE_EXAMPLES, EXIT_CODES))]
    Schedule(ScheduleArgs),
    /// Print the manifests a placement delivers to one cluster, overrides applied and envelopes
    /// unwrapped, in apply order.
    #[command(after_help = help(RENDER_EXAMPLES, EXIT_CODES))]
    Render(RenderArgs),
    /// What a change (base → head) does to the fleet: placements, clusters gained and lost and why,
    /// manifest diffs per cluster, rollout impact. For pull-request review.
    #[command(after_help = help(PLAN_EXAMPLES, PLAN_EXIT_CODES))]
    Plan(PlanArgs),
    /// Ask every member the commit declares for its live properties (nodes, cpu, memory, instance
    /// types, costs) and health; prints the inventory file that `--inventory FILE` reads.
    #[command(after_help = help(INVENTORY_EXAMPLES, INVENTORY_EXIT_CODES))]
    Inventory(InventoryCmdArgs),
    /// Push what the schedule sends to each member: server-side apply in waves, prune what is no
    /// longer delivered, report drift, diffs and availability. Everything is pushed now (no
    /// rollout pacing).
    #[command(after_help = help(APPLY_EXAMPLES, APPLY_EXIT_CODES))]
    Apply(ApplyArgs),
    /// Follow a branch and roll every commit out to the members (the daemon): RollingUpdate
    /// pacing, status API, metrics and webhook on --listen, state in --state-dir.
    #[command(after_help = help(RUN_EXAMPLES, RUN_EXIT_CODES))]
    Run(crate::daemon::command::RunArgs),
    /// Show the placements of a running daemon: a table, or one placement described; the git
    /// source and its last fetch; `--watch` to follow it.
    #[command(after_help = help(STATUS_EXAMPLES, OTHER_EXIT_CODES))]
    Status(crate::daemon::command::StatusArgs),
    /// Wait until the daemon serves a commit and its placements settle (or fail, or time out):
    /// for CI after a push.
    #[command(after_help = crate::daemon::wait::WAIT_AFTER_HELP)]
    Wait(crate::daemon::wait::WaitArgs),
    /// Try gitfleet on one machine: writes the sample fleet repository, serves its eight
    /// members with the simulator, runs the daemon on it and prints the rollout as it happens.
    #[command(after_help = help(QUICKSTART_EXAMPLES, OTHER_EXIT_CODES))]
    Quickstart(crate::quickstart::QuickstartArgs),
    /// Serve simulated member clusters that speak the Kubernetes API over HTTP on loopback, one
    /// port each, for trying gitfleet and kubectl on one machine. Runs until Ctrl-C.
    #[command(after_help = help(SIM_EXAMPLES, OTHER_EXIT_CODES))]
    Sim(SimArgs),
    /// Approve a staged update run's approval request: a signed tag `gitfleet/approve/<request>`
    /// on the commit the run was initialised at, made by `git tag -s` with your own signing
    /// setup, after asking the daemon that the request exists.
    #[command(after_help = crate::approvals::command::APPROVE_AFTER_HELP)]
    Approve(crate::approvals::command::ApproveArgs),
    /// Explain whether an approval tag is accepted, against the same trust files and policy the
    /// daemon uses (verified in-process: no git, no gpg).
    #[command(after_help = crate::approvals::command::VERIFY_AFTER_HELP)]
    VerifyApproval(crate::approvals::command::VerifyApprovalArgs),
    /// Print gitfleet's version, the commit it was built from and when.
    #[command(after_help = OTHER_EXIT_CODES)]
    Version(VersionArgs),
    /// Print a shell completion script: `source <(gitfleet completion bash)`, or write it where
    /// the shell reads completions (zsh: a `_gitfleet` file on $fpath; fish:
    /// ~/.config/fish/completions/gitfleet.fish).
    #[command(after_help = OTHER_EXIT_CODES)]
    Completion(CompletionArgs),
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: VersionFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum VersionFormat {
    Text,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

const RUN_EXIT_CODES: &str = "\
Exit codes:
  0  stopped by a signal (or, with --once, the head is served and settled)
  1  cannot start (unreadable kubeconfig, repository or state, address in use), or with --once
     the head is rejected or a push failed
  64 bad command line (unknown flag, missing or invalid value)";

const OTHER_EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error (the message says which)
  64 bad command line (unknown flag, missing or invalid value)";

const APPLY_EXIT_CODES: &str = "\
Exit codes:
  0  everything applied (or diffed, with applyStrategy ReportDiff)
  1  the commit is invalid (nothing is applied), or something failed: a member unreachable
     within the retry budget, a request refused (e.g. a 409 field conflict), an object not taken
     over, drifted (whenToApply IfNotDrifted), or a placement that cannot be rendered
  3  the repository, revision or path cannot be read
  64 bad command line (unknown flag, missing or invalid value)";

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
    /// Only this ClusterResourcePlacement (or ResourcePlacement, with --namespace).
    #[arg(long)]
    pub placement: Option<String>,
    /// Namespace of the ResourcePlacement or OCM Placement given with --placement.
    #[arg(long, requires = "placement")]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub push: PushArgs,
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: ApplyFormat,
    /// The daemon's mass-deletion thresholds: the members' records are read first, and a
    /// commit deleting more is refused unless its message allows it
    /// (`Gitfleet-Allow-Deletions: <count>`) or --allow-mass-deletion is given.
    #[command(flatten)]
    pub deletion_guard: crate::flags::DeletionGuardArgs,
    /// Apply even when the commit deletes more than the deletion guard allows (a one-shot
    /// human act; the daemon takes only a commit trailer).
    #[arg(long)]
    pub allow_mass_deletion: bool,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// The fleet file: members, their nodes, tokens and faults (see examples/sim-fleet.yaml).
    #[arg(long)]
    pub fleet: PathBuf,
    /// Write a kubeconfig with one context per member here (mode 0600).
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Serve the admin endpoint (fault injection: latency, errors, down/up) on this address,
    /// e.g. 127.0.0.1:0. Every admin request needs `Authorization: Bearer <admin token>`.
    #[arg(long)]
    pub admin: Option<std::net::SocketAddr>,
    /// The admin endpoint's token (default: a random one). It is written to
    /// `<kubeconfig-out>.admin-token` (mode 0600), or printed without --kubeconfig-out.
    #[arg(long, env = "GITFLEET_SIM_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
}

const PLAN_EXIT_CODES: &str = "\
Exit codes:
  0  no change to the fleet
  1  error: the head commit is invalid (its diagnostics come first), fails to render for a
     cluster (an override that cannot apply), or an input is unreadable
  2  the head changes the fleet
  64 bad command line (unknown flag, missing or invalid value): never 2, so a CI step that
     accepts 2 (`gitfleet plan … || [ $? -eq 2 ]`) still fails on a typo";

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
    #[arg(long, env = "GITFLEET_REPO")]
    pub repo: PathBuf,
    /// The commit the fleet runs today (the pull request's target).
    #[arg(long)]
    pub base: String,
    /// The proposed commit.
    #[arg(long)]
    pub head: String,
    /// Folder of the repository holding the fleet.
    #[arg(long, default_value = "")]
    pub path: String,
    /// Inventory, as for `schedule`; `live` probes the members of base and head once and uses
    /// the answers for both.
    #[command(flatten)]
    pub inventory: InventoryArgs,
    /// A running gitfleet daemon (`http://host:port`) to take the live inventory and the
    /// current bindings from.
    #[arg(long, conflicts_with = "inventory")]
    pub server: Option<String>,
    /// State directory with the current bindings (as for `schedule`), what each cluster runs
    /// and the staged update runs' records: runs are shown as the daemon has them, and a run
    /// that would move clusters back to an older snapshot is reported.
    #[arg(long, conflicts_with = "server")]
    pub state: Option<PathBuf>,
    /// Only diff these clusters' manifests (repeatable; all by default).
    #[arg(long = "cluster")]
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
    /// Lines of context in diffs.
    #[arg(long, default_value_t = 3)]
    pub context: usize,
    /// Markdown only: the most bytes to print (GitHub caps comments at 65,536).
    #[arg(long, default_value_t = 60_000)]
    pub max_bytes: usize,
    /// With trust files: say whether the head's signature passes `gitfleet run
    /// --verify-commits` (a head that would be refused makes the plan invalid).
    #[command(flatten)]
    pub trust: crate::approvals::command::TrustArgs,
    /// The daemon's thresholds, to warn when it would hold the head as a mass deletion.
    #[command(flatten)]
    pub deletion_guard: crate::flags::DeletionGuardArgs,
}

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
    /// Inventory file (spec/README §2 format: per cluster health, properties, add-on scores,
    /// as `gitfleet inventory` prints it), or `live` to ask the members now through
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

const INVENTORY_EXIT_CODES: &str = "\
Exit codes:
  0  the inventory is printed (members that did not answer are listed healthy: false, with the
     error)
  1  nothing could be asked (unreadable kubeconfig or price table) or the commit is invalid
  3  the repository, revision or path cannot be read
  64 bad command line (unknown flag, missing or invalid value)";

#[derive(Debug, Args)]
pub struct InventoryCmdArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
    #[command(flatten)]
    pub kubeconfig: KubeconfigArgs,
    #[command(flatten)]
    pub probe: ProbeArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: ManifestFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScheduleFormat {
    Json,
    Yaml,
    Table,
    /// The table with every picked cluster by name, the policy snapshot index and every
    /// condition.
    Wide,
    /// OCM PlacementDecision objects (as Argo CD's clusterDecisionResource generator reads them).
    Placementdecisions,
}

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
    #[command(flatten)]
    pub inputs: ScheduleInputs,
    /// Write the new decisions to --state, so the next run sees them as previous.
    #[arg(long, requires = "state")]
    pub save: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: ScheduleFormat,
}

/// Which commit of which repository, and which folder of it.
#[derive(Debug, Args)]
pub struct CommitArgs {
    /// Path of the git repository.
    #[arg(long, env = "GITFLEET_REPO")]
    pub repo: PathBuf,
    /// Branch, tag or commit to read.
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// Folder of the repository holding the fleet (default: the whole tree).
    #[arg(long, default_value = "")]
    pub path: String,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ManifestFormat {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
    /// Name of the ClusterResourcePlacement, or of the ResourcePlacement with --namespace.
    /// Without it, everything the schedule sends to --cluster is rendered.
    #[arg(long)]
    pub placement: Option<String>,
    /// Namespace of a ResourcePlacement.
    #[arg(long)]
    pub namespace: Option<String>,
    /// The member cluster to render for. Its labels come from its MemberCluster in the
    /// repository (if declared) plus `kubernetes-fleet.io/member-name`; --labels adds or overrides.
    #[arg(long)]
    pub cluster: String,
    /// Cluster labels, `k=v,k2=v2`.
    #[arg(long, value_parser = parse_labels, default_value = "")]
    pub labels: Labels,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: ManifestFormat,
    #[command(flatten)]
    pub inputs: ScheduleInputs,
}

fn parse_labels(s: &str) -> Result<Labels, String> {
    let mut labels = Labels::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("label {pair:?} is not of the form key=value"))?;
        if !crate::model::is_qualified_name(k) {
            return Err(format!("label key {k:?} is not a valid qualified name"));
        }
        if !crate::model::is_label_value(v) {
            return Err(format!("label value {v:?} is not a valid label value"));
        }
        labels.insert(k.to_string(), v.to_string());
    }
    Ok(labels)
}

/// Failures that map to an exit code other than 1.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct SourceFailure(#[from] crate::source::SourceError);

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_exit(&e),
    };
    init_logging(&cli.global);
    let color = cli.global.color;
    let result = match cli.command {
        Command::Validate(args) => validate(&args),
        Command::Schedule(args) => schedule(&args),
        Command::Render(args) => render(&args),
        Command::Plan(args) => plan(&args, color),
        Command::Inventory(args) => inventory(&args),
        Command::Apply(args) => apply(&args),
        Command::Run(args) => crate::daemon::command::run(&args),
        Command::Status(args) => crate::daemon::command::status(&args),
        Command::Wait(args) => crate::daemon::wait::wait(&args),
        Command::Quickstart(args) => crate::quickstart::run(&args),
        Command::Sim(args) => sim(args),
        Command::Approve(args) => crate::approvals::command::approve(&args),
        Command::VerifyApproval(args) => crate::approvals::command::verify_approval(&args),
        Command::Version(args) => version(&args),
        Command::Completion(args) => completion(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<SourceFailure>().is_some() {
                ExitCode::from(3)
            } else if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(EX_USAGE)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// clap's verdict on the command line: `--help` and `--version` print to stdout and exit 0;
/// every other case is a usage error, exit [`EX_USAGE`] (clap itself would exit 2).
fn usage_exit(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if e.use_stderr() {
        ExitCode::from(EX_USAGE)
    } else {
        ExitCode::SUCCESS
    }
}

fn version(args: &VersionArgs) -> Result<ExitCode> {
    let build = crate::build_info::BUILD;
    match args.output {
        VersionFormat::Text => println!(
            "gitfleet {}\ncommit:     {}\nbuild date: {}",
            build.version, build.commit, build.build_date
        ),
        VersionFormat::Json => println!("{}", serde_json::to_string_pretty(&build)?),
        VersionFormat::Yaml => print!("{}", crate::yaml::to_string(&build)?),
    }
    Ok(ExitCode::SUCCESS)
}

fn completion(args: &CompletionArgs) -> Result<ExitCode> {
    use clap::CommandFactory;
    use clap_complete::Shell;
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    clap_complete::generate(
        shell,
        &mut Cli::command(),
        "gitfleet",
        &mut std::io::stdout(),
    );
    Ok(ExitCode::SUCCESS)
}

fn sim(args: SimArgs) -> Result<ExitCode> {
    crate::sim::run_blocking(crate::sim::SimOptions {
        fleet: args.fleet,
        kubeconfig_out: args.kubeconfig_out,
        admin: args.admin,
        admin_token: args.admin_token,
    })?;
    Ok(ExitCode::SUCCESS)
}

fn read(args: &CommitArgs) -> Result<CommitFiles> {
    let files =
        read_commit(&args.repo, &args.rev, &args.path).map_err(|e| anyhow!(SourceFailure(e)))?;
    for skipped in &files.skipped {
        eprintln!("note: {skipped}");
    }
    Ok(files)
}

fn print_diagnostics(diags: &[Diagnostic]) {
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
/// reports the error on it, so the commit is not rejected for it.
fn warn_invalid_selections(invalid: &crate::snapshot::InvalidSelections) {
    let mut err = std::io::stderr().lock();
    for d in invalid.values().flat_map(|i| &i.diagnostics) {
        let _ = writeln!(
            err,
            "warning: {d} (reported on the placement as Scheduled=False InvalidResourceSelectors and not rejected: KubeFleet's hub admits it; the placement is held, keeping what it placed)"
        );
    }
}

fn validate(args: &ValidateArgs) -> Result<ExitCode> {
    let commit = read(&args.commit)?;
    let (cat, diags) = commit.analyze();
    warn_invalid_selections(&crate::snapshot::invalid_selections(&cat));
    if !diags.is_empty() {
        print_diagnostics(&diags);
        return Ok(ExitCode::from(1));
    }
    println!("{}", summary(&commit, &cat));
    Ok(ExitCode::SUCCESS)
}

/// `ok abc1234: 12 files, 40 objects (3 ClusterResourcePlacement, 6 MemberCluster, …)`
fn summary(commit: &CommitFiles, cat: &Catalog) -> String {
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
fn load_valid(args: &CommitArgs) -> Result<Result<(CommitFiles, Catalog), ExitCode>> {
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
fn run_schedule(cat: &Catalog, inputs: &ScheduleInputs) -> Result<Vec<Arc<PlacementSchedule>>> {
    let inventory = load_inventory(&inputs.inventory, &[cat])?;
    let previous = read_previous(inputs.state.as_deref())?;
    let fleet = Fleet::build(cat, inventory.as_ref());
    Ok(crate::schedule::schedule_commit(
        cat,
        &crate::snapshot::invalid_selections(cat),
        &fleet,
        &previous,
        now_unix(),
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
fn live_inventory(
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

fn inventory(args: &InventoryCmdArgs) -> Result<ExitCode> {
    let (_, cat) = match load_valid(&args.commit)? {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let inventory = live_inventory(&[&cat], &args.kubeconfig, &args.probe)?;
    let mut out = std::io::stdout().lock();
    match args.output {
        ManifestFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&inventory)?)?,
        ManifestFormat::Yaml => write!(out, "{}", crate::yaml::to_string(&inventory)?)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn read_previous(state: Option<&Path>) -> Result<Previous> {
    Ok(match state {
        Some(dir) => StateStore::open(dir)?.load_schedule()?.1,
        None => Previous::new(),
    })
}

/// The clock, read only here at the edge.
fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn schedule(args: &ScheduleArgs) -> Result<ExitCode> {
    let (commit, cat) = match load_valid(&args.commit)? {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let placements = run_schedule(&cat, &args.inputs)?;
    if args.save {
        let dir = args
            .inputs
            .state
            .as_ref()
            .expect("clap requires --state with --save");
        StateStore::lock(dir)?.save_schedule(&commit.commit, &placements)?;
    }
    let mut out = std::io::stdout().lock();
    match args.output {
        ScheduleFormat::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&schedule_view(&commit.commit, &placements))?
        )?,
        ScheduleFormat::Yaml => write!(
            out,
            "{}",
            crate::yaml::to_string(&schedule_view(&commit.commit, &placements))?
        )?,
        ScheduleFormat::Table => write!(out, "{}", schedule_table(&cat, &placements, false))?,
        ScheduleFormat::Wide => write!(out, "{}", schedule_table(&cat, &placements, true))?,
        ScheduleFormat::Placementdecisions => {
            for p in placements
                .iter()
                .filter(|p| p.key.kind == PlacementKind::OcmPlacement)
            {
                for d in crate::schedule::ocm::placement_decisions(p) {
                    writeln!(out, "---")?;
                    write!(out, "{}", crate::yaml::to_string(&d)?)?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The schedule as spec/README §6 prints it.
fn schedule_view(commit: &str, placements: &[Arc<PlacementSchedule>]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = placements
        .iter()
        .map(|p| {
            let mut v = serde_json::json!({
                "kind": p.key.kind,
                "namespace": p.key.namespace,
                "name": p.key.name,
            });
            if let Some(i) = p.policy_snapshot_index {
                v["policySnapshotIndex"] = i.into();
            }
            v["selected"] = serde_json::json!(p.selected);
            v["decisions"] = serde_json::json!(p.decisions);
            v["conditions"] = serde_json::json!(p.conditions);
            if !p.decision_groups.is_empty() {
                v["decisionGroups"] = serde_json::json!(p.decision_groups);
            }
            v
        })
        .collect();
    serde_json::json!({"commit": commit, "placements": items})
}

/// A table for people: placement, type, wanted, picked clusters, condition; `wide` lists
/// every picked cluster and adds the policy snapshot index and every condition.
fn schedule_table(cat: &Catalog, placements: &[Arc<PlacementSchedule>], wide: bool) -> String {
    use crate::model::placement::PlacementType;
    let mut header = vec![
        "PLACEMENT".to_string(),
        "TYPE".to_string(),
        "WANTED".to_string(),
        "PICKED".to_string(),
        "CONDITION".to_string(),
    ];
    if wide {
        header.insert(3, "POLICY-INDEX".to_string());
        header[5] = "CONDITIONS".to_string();
    }
    let mut rows = vec![header];
    for p in placements {
        let (ty, wanted) = match p.key.kind {
            PlacementKind::OcmPlacement => {
                let n = cat
                    .ocm_placements
                    .iter()
                    .find(|e| {
                        e.spec.metadata.name == p.key.name
                            && cat.objects[e.index].namespace == p.key.namespace
                    })
                    .and_then(|e| e.spec.spec.number_of_clusters);
                (
                    "OCM".to_string(),
                    n.map_or("all".to_string(), |n| n.to_string()),
                )
            }
            PlacementKind::ManifestWork => ("ManifestWork".to_string(), "1".to_string()),
            _ => {
                let policy = cat
                    .placement(&p.key.name, p.key.namespace.as_deref())
                    .map(|e| e.spec.spec.policy_or_default())
                    .unwrap_or_default();
                match policy.placement_type {
                    PlacementType::PickAll => ("PickAll".to_string(), "all".to_string()),
                    PlacementType::PickN => (
                        "PickN".to_string(),
                        policy.number_of_clusters.unwrap_or(0).to_string(),
                    ),
                    PlacementType::PickFixed => (
                        "PickFixed".to_string(),
                        policy.cluster_names.len().to_string(),
                    ),
                }
            }
        };
        let name = match &p.key.namespace {
            Some(ns) => format!("{ns}/{}", p.key.name),
            None => p.key.name.clone(),
        };
        let condition =
            |c: &crate::schedule::Condition| format!("{}={} ({})", c.type_, c.status, c.reason);
        if wide {
            let picked = if p.selected.is_empty() {
                "-".to_string()
            } else {
                p.selected.join(",")
            };
            let index = p
                .policy_snapshot_index
                .map_or("-".to_string(), |i| i.to_string());
            let all: Vec<String> = p.conditions.iter().map(condition).collect();
            rows.push(vec![name, ty, wanted, index, picked, all.join(", ")]);
        } else {
            let picked = picked_summary(&p.selected);
            let first = p.conditions.first().map(condition).unwrap_or_default();
            rows.push(vec![name, ty, wanted, picked, first]);
        }
    }
    crate::text_table::render(&rows)
}

/// `a,b,c` or, for long lists, the first names and how many more.
fn picked_summary(selected: &[String]) -> String {
    const SHOWN: usize = 4;
    match selected.len() {
        0 => "-".to_string(),
        n if n <= SHOWN => selected.join(","),
        n => format!("{} (+{} more)", selected[..SHOWN].join(","), n - SHOWN),
    }
}

fn render(args: &RenderArgs) -> Result<ExitCode> {
    let (commit, cat) = match load_valid(&args.commit)? {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let mut labels = member_labels(&cat, &args.cluster);
    labels.extend(args.labels.clone());
    let cluster = ClusterTarget {
        name: &args.cluster,
        labels: &labels,
    };
    let rendered: Vec<PlacementManifests> = match &args.placement {
        Some(name) => {
            let Some(entry) = cat.placement(name, args.namespace.as_deref()) else {
                match &args.namespace {
                    Some(ns) => bail!("no ResourcePlacement {name:?} in namespace {ns:?} in commit {}", commit.commit),
                    None => bail!(
                        "no ClusterResourcePlacement {name:?} in commit {} (use --namespace for a ResourcePlacement)",
                        commit.commit
                    ),
                }
            };
            let key = PlacementKey {
                kind: entry.spec.kind,
                namespace: args.namespace.clone(),
                name: name.clone(),
            };
            if let Some(invalid) = crate::snapshot::invalid_selections(&cat).get(&key) {
                eprintln!(
                    "placement {key} is held (Scheduled=False, InvalidResourceSelectors): {}; nothing is rendered for it",
                    invalid.message
                );
                return Ok(ExitCode::SUCCESS);
            }
            let manifests = render_placement(&cat, &key, &overrides_of(&cat), &cluster)
                .ok_or_else(|| anyhow!("placement {name:?} selects nothing renderable"))?;
            vec![PlacementManifests {
                placement: key,
                manifests,
            }]
        }
        None => {
            let schedule = run_schedule(&cat, &args.inputs)?;
            for p in &schedule {
                if let Some(message) = p.held() {
                    eprintln!(
                        "note: placement {} is held (Scheduled=False, InvalidResourceSelectors): {message}; nothing is rendered for it",
                        p.key
                    );
                }
            }
            render_cluster(&cat, &schedule, &cluster)
        }
    };
    let mut manifests = Vec::new();
    for p in rendered {
        let name = match &p.placement.namespace {
            Some(ns) => format!("{}/{}", ns, p.placement.name),
            None => p.placement.name.clone(),
        };
        manifests.extend(
            p.manifests
                .with_context(|| format!("rendering {name} for cluster {}", args.cluster))?,
        );
    }
    // Several placements: one apply order over all of them (stable, so each keeps its own order).
    manifests.sort_by_key(|m| m.wave);
    if manifests.is_empty() && args.placement.is_none() {
        eprintln!(
            "no placement sends anything to cluster {:?} in this schedule",
            args.cluster
        );
    }
    print_manifests(&manifests, args.output)?;
    Ok(ExitCode::SUCCESS)
}

fn plan(args: &PlanArgs, color: crate::flags::ColorChoice) -> Result<ExitCode> {
    // Unreadable inputs are plain errors here (exit 1), as the plan's exit codes say.
    // Each commit's files are let go once analysed: from there on the plan reads the catalog.
    let analyzed = |rev: &str| -> Result<(CommitFiles, Catalog, Vec<Diagnostic>)> {
        let mut commit = read_commit(&args.repo, rev, &args.path).map_err(|e| anyhow!(e))?;
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
            Some(url) => (
                Some(crate::daemon_client::inventory(url)?),
                crate::daemon_client::schedule(url)?,
            ),
            // Base and head see the same inventory; a live one probes their members once.
            None => (
                load_inventory(&args.inventory, &[&head_cat, &base_cat])?,
                read_previous(args.state.as_deref())?,
            ),
        };
        // What clusters run and the runs' records: runs as the daemon has them.
        let rollout = match (&args.server, args.state.as_deref()) {
            (None, Some(dir)) => Some(StateStore::open(dir)?.load_rollout()?),
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
                context: args.context,
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
        if !plan.errors.is_empty() || plan.summary.render_errors > 0 {
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
    color: crate::flags::ColorChoice,
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

/// Labels of a declared member as KubeFleet's overrides see them (those of its MemberCluster,
/// or of its ManagedCluster when it is only that), with the label gitfleet adds.
fn member_labels(cat: &Catalog, cluster: &str) -> Labels {
    match Fleet::build(cat, None).get(cluster) {
        Some(c) => c.labels.clone(),
        None => Labels::from([(MEMBER_NAME_LABEL.to_string(), cluster.to_string())]),
    }
}

fn print_manifests(manifests: &[Manifest], format: ManifestFormat) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        ManifestFormat::Json => {
            let items: Vec<&serde_json::Value> = manifests.iter().map(|m| &*m.value).collect();
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
        }
        ManifestFormat::Yaml => {
            for m in manifests {
                writeln!(out, "---")?;
                write!(out, "{}", crate::yaml::to_string(&*m.value)?)?;
            }
        }
    }
    if manifests.is_empty() && matches!(format, ManifestFormat::Yaml) {
        eprintln!("the placement delivers nothing to this cluster");
    }
    out.flush()?;
    Ok(())
}

fn apply(args: &ApplyArgs) -> Result<ExitCode> {
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
    let now = now_unix();
    let invalid = crate::snapshot::invalid_selections(&cat);
    let schedule = crate::schedule::schedule_commit(&cat, &invalid, &fleet, &Previous::new(), now);
    let only: Option<BTreeSet<PlacementKey>> = match &args.placement {
        None => None,
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
            (c.name.clone(), why.to_string())
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
                    placement: crate::push::decorate::placement_key(&step.placement),
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
    use crate::push::decorate::placement_key;
    use crate::rollout::guard::{self, Fate};
    use crate::rollout::Prune;
    let mut managed = guard::Managed::new();
    for (member, recs) in records {
        for r in recs.iter().flat_map(|r| r.values()).filter(|r| !r.abandon) {
            let ids = r
                .entries
                .iter()
                .map(|e| {
                    guard::object_id(&serde_json::json!({
                        "apiVersion": e.object.api_version,
                        "kind": e.object.kind,
                        "metadata": {"name": e.object.name, "namespace": e.object.namespace},
                    }))
                })
                .collect();
            managed.insert((r.key.clone(), member.clone()), ids);
        }
    }
    let steps: std::collections::BTreeMap<String, &crate::rollout::StepSummary> = decision
        .steps
        .iter()
        .map(|s| (placement_key(&s.placement), &**s))
        .collect();
    let assessment = guard::assess(&managed, |key, member| {
        if let Some(s) = steps.get(key) {
            return guard::fate_in(Some(s), member);
        }
        let swept = decision.sweeps.iter().find(|s| s.cluster == member);
        match swept.map(|s| &s.prune) {
            Some(Prune::AllExcept(keep)) if !keep.iter().any(|k| placement_key(k) == key) => {
                Fate::Removed
            }
            Some(Prune::Only(only)) if only.iter().any(|k| placement_key(k) == key) => {
                Fate::Removed
            }
            _ => Fate::Untouched,
        }
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse() {
        let l = parse_labels("a=b, region=east").unwrap();
        assert_eq!(l.get("region").map(String::as_str), Some("east"));
        assert!(parse_labels("novalue").is_err());
        assert!(parse_labels("Bad Key=x").is_err());
        assert!(parse_labels("").unwrap().is_empty());
    }

    #[test]
    fn push_flags_and_durations_are_shared_by_apply_and_run() {
        use std::time::Duration;
        let run = Cli::try_parse_from([
            "gitfleet",
            "run",
            "--repo",
            "r",
            "--kubeconfig",
            "k",
            "--state-dir",
            "s",
            "--poll",
            "1h30m",
            "--retry-budget",
            "2m",
            "--member-timeout",
            "2",
            "--parallel-members",
            "4",
        ])
        .unwrap();
        let Command::Run(run) = run.command else {
            panic!("run parses as run")
        };
        assert_eq!(run.poll, Duration::from_secs(5400));
        assert_eq!(run.push.retry_budget, Duration::from_secs(120));
        assert_eq!(run.push.parallel_members, 4);
        assert_eq!(run.member_timeout, Duration::from_secs(2));
        let apply = Cli::try_parse_from([
            "gitfleet",
            "apply",
            "--repo",
            "r",
            "--kubeconfig",
            "k",
            "--retry-budget",
            "1m30s",
            "--member-timeout",
            "1m",
        ])
        .unwrap();
        let Command::Apply(apply) = apply.command else {
            panic!("apply parses as apply")
        };
        assert_eq!(apply.push.retry_budget, Duration::from_secs(90));
        assert_eq!(apply.push.parallel_requests, 8);
        assert_eq!(apply.probe.member_timeout, Duration::from_secs(60));
        assert!(Cli::try_parse_from([
            "gitfleet",
            "apply",
            "--repo",
            "r",
            "--kubeconfig",
            "k",
            "--member-timeout",
            "0s",
        ])
        .is_err());
    }

    /// Every `gitfleet run` flag (its own, flattened groups and global ones) can come from the
    /// environment as `GITFLEET_<FLAG>`, so a Deployment configures it without arguments.
    #[test]
    fn every_run_flag_has_a_gitfleet_environment_variable() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        cli.build();
        let run = cli.find_subcommand("run").expect("run");
        let mut checked = 0;
        for arg in run.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "help" | "version") {
                continue;
            }
            let want = format!("GITFLEET_{}", long.to_uppercase().replace('-', "_"));
            assert_eq!(
                arg.get_env().and_then(|e| e.to_str()),
                Some(want.as_str()),
                "--{long}"
            );
            checked += 1;
        }
        assert!(checked >= 20, "only {checked} flags seen");
        // And the help says so, as clap shows `[env: …]`.
        let help = run.clone().render_long_help().to_string();
        assert!(help.contains("[env: GITFLEET_STATE_DIR="), "{help}");
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
