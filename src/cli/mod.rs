//! The `gitfleet` command line: parse arguments, call the library, print. Thin by design: one
//! file per command; [`flags`] holds the flags several commands share, `inputs` what several
//! commands read (a commit, an inventory, the previous state).

pub mod apply;
pub mod approve;
pub mod completion;
pub mod flags;
mod inputs;
pub mod inventory;
pub mod plan;
#[cfg(feature = "sim")]
pub mod quickstart;
pub mod render;
pub mod run;
pub mod schedule;
#[cfg(feature = "sim")]
pub mod sim;
pub mod status;
pub mod validate;
pub mod version;
pub mod wait;

use clap::{Args, Parser, Subcommand};
use flags::{UsageError, EX_USAGE};
use std::process::ExitCode;

use apply::ApplyArgs;
use completion::CompletionArgs;
use inputs::SourceFailure;
use inventory::InventoryCmdArgs;
use plan::PlanArgs;
use render::RenderArgs;
use schedule::ScheduleArgs;
#[cfg(feature = "sim")]
use sim::SimArgs;
use validate::ValidateArgs;
use version::VersionArgs;

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

#[cfg(feature = "sim")]
const QUICKSTART_EXAMPLES: &str = "  gitfleet quickstart
  # Another folder and port; approve the staged run yourself
  gitfleet quickstart --dir /tmp/gf --listen 127.0.0.1:7171 --no-approve";

#[cfg(feature = "sim")]
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
    pub log_format: flags::LogFormat,
    /// Colours in output for people (plan's diffs, log levels): `auto` when the stream is a
    /// terminal and NO_COLOR is not set.
    #[arg(
        long,
        global = true,
        env = "GITFLEET_COLOR",
        value_enum,
        default_value = "auto"
    )]
    pub color: flags::ColorChoice,
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
        flags::LogFormat::Text => builder.with_ansi(ansi).try_init(),
        flags::LogFormat::Json => builder.json().with_ansi(false).try_init(),
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
    /// unwrapped, in apply order (Secrets' data and stringData values shown as `***`).
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
    Run(run::RunArgs),
    /// Show the placements of a running daemon: a table, or one placement described; the git
    /// source and its last fetch; `--watch` to follow it.
    #[command(after_help = help(STATUS_EXAMPLES, OTHER_EXIT_CODES))]
    Status(status::StatusArgs),
    /// Wait until the daemon serves a commit and its placements settle (or fail, or time out):
    /// for CI after a push.
    #[command(after_help = wait::WAIT_AFTER_HELP)]
    Wait(wait::WaitArgs),
    /// Try gitfleet on one machine: writes the sample fleet repository, serves its eight
    /// members with the simulator, runs the daemon on it and prints the rollout as it happens.
    #[cfg(feature = "sim")]
    #[command(after_help = help(QUICKSTART_EXAMPLES, OTHER_EXIT_CODES))]
    Quickstart(quickstart::QuickstartArgs),
    /// Serve simulated member clusters that speak the Kubernetes API over HTTP on loopback, one
    /// port each, for trying gitfleet and kubectl on one machine. Runs until Ctrl-C.
    #[cfg(feature = "sim")]
    #[command(after_help = help(SIM_EXAMPLES, OTHER_EXIT_CODES))]
    Sim(SimArgs),
    /// Approve a staged update run's approval request: a signed tag `gitfleet/approve/<request>`
    /// on the commit the run was initialised at, made by `git tag -s` with your own signing
    /// setup, after asking the daemon that the request exists.
    #[command(after_help = approve::APPROVE_AFTER_HELP)]
    Approve(approve::ApproveArgs),
    /// Explain whether an approval tag is accepted, against the same trust files and policy the
    /// daemon uses (verified in-process: no git, no gpg).
    #[command(after_help = approve::VERIFY_AFTER_HELP)]
    VerifyApproval(approve::VerifyApprovalArgs),
    /// Print gitfleet's version, the commit it was built from and when.
    #[command(after_help = OTHER_EXIT_CODES)]
    Version(VersionArgs),
    /// Print a shell completion script: `source <(gitfleet completion bash)`, or write it where
    /// the shell reads completions (zsh: a `_gitfleet` file on $fpath; fish:
    /// ~/.config/fish/completions/gitfleet.fish; PowerShell: `gitfleet completion powershell |
    /// Out-String | Invoke-Expression` in $PROFILE). bash, zsh and fish also complete the
    /// placement and cluster names of the repository after --placement and --cluster.
    #[command(after_help = OTHER_EXIT_CODES)]
    Completion(CompletionArgs),
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

const PLAN_EXIT_CODES: &str = "\
Exit codes:
  0  no change to the fleet
  1  error: the head commit is invalid (its diagnostics come first), fails to render for a
     cluster (an override that cannot apply), or an input is unreadable; with --strict, the
     head brings warnings
  2  the head changes the fleet
  64 bad command line (unknown flag, missing or invalid value): never 2, so a CI step that
     accepts 2 (`gitfleet plan … || [ $? -eq 2 ]`) still fails on a typo";

const INVENTORY_EXIT_CODES: &str = "\
Exit codes:
  0  the inventory is printed (members that did not answer are listed healthy: false, with the
     error)
  1  nothing could be asked (unreadable kubeconfig or price table) or the commit is invalid
  3  the repository, revision or path cannot be read
  64 bad command line (unknown flag, missing or invalid value)";

pub fn main() -> ExitCode {
    // The completion scripts' helper is no subcommand of `Cli`: clap's generators would offer
    // even a hidden one.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == completion::NAMES_COMMAND)
    {
        return completion::names_main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_exit(&e),
    };
    // The quick start logs to a file of its own, beside its progress.
    if !matches!(cli.command, Command::Quickstart(_)) {
        init_logging(&cli.global);
    }
    let color = cli.global.color;
    let result = match cli.command {
        Command::Validate(args) => validate::validate(&args),
        Command::Schedule(args) => schedule::schedule(&args),
        Command::Render(args) => render::render(&args),
        Command::Plan(args) => plan::plan(&args, color),
        Command::Inventory(args) => inventory::inventory(&args),
        Command::Apply(args) => apply::apply(&args),
        Command::Run(args) => run::run(&args),
        Command::Status(args) => status::status(&args),
        Command::Wait(args) => wait::wait(&args),
        #[cfg(feature = "sim")]
        Command::Quickstart(args) => quickstart::run(&args),
        #[cfg(feature = "sim")]
        Command::Sim(args) => sim::sim(args),
        Command::Approve(args) => approve::approve(&args),
        Command::VerifyApproval(args) => approve::verify_approval(&args),
        Command::Version(args) => version::version(&args),
        Command::Completion(args) => completion::completion(&args),
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

#[cfg(test)]
mod tests {
    use super::*;

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
