//! The command-line edge of the daemon: `gitfleet run` and `gitfleet status`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use tokio_util::sync::CancellationToken;

use super::deliver::PushDeliverer;
use super::{Daemon, RunOptions};
use crate::members::inventory::Options as ProbeOptions;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The git repository to follow: a local path (a clone or a bare repository; pushes into it
    /// are seen at once) or a URL (file://, http(s)://, ssh://, git@host:path), mirrored into
    /// `<state-dir>/repo.git` and fetched every --poll and on the webhook.
    #[arg(long, env = "GITFLEET_REPO")]
    pub repo: String,
    /// Branch to follow.
    #[arg(long, env = "GITFLEET_BRANCH", default_value = "main")]
    pub branch: String,
    /// Folder of the repository holding the fleet (default: the whole tree).
    #[arg(long, env = "GITFLEET_PATH", default_value = "")]
    pub path: String,
    #[command(flatten)]
    pub kubeconfig: crate::flags::KubeconfigArgs,
    /// Where the daemon keeps what must survive a restart (created if missing).
    #[arg(long, env = "GITFLEET_STATE_DIR")]
    pub state_dir: PathBuf,
    /// Address of the status API, metrics and webhook.
    #[arg(long, env = "GITFLEET_LISTEN", default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// How often to look at the branch and the members without being told (e.g. 30s, 2m).
    #[arg(long, env = "GITFLEET_POLL", default_value = "30s", value_parser = crate::flags::parse_duration)]
    pub poll: Duration,
    /// How often everything delivered is re-applied (a no-op where nothing changed), the
    /// backstop for changes on members that the watches missed (e.g. 10m, 1h).
    #[arg(long, env = "GITFLEET_RESYNC", default_value = "10m", value_parser = crate::flags::parse_duration)]
    pub resync: Duration,
    /// File holding the webhook secret; enables `POST /hooks/git`.
    #[arg(long, env = "GITFLEET_WEBHOOK_SECRET_FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// Reconcile the head until the rollout settles or has to wait, then exit (1 if the head is
    /// rejected or a push failed).
    #[arg(long, env = "GITFLEET_ONCE")]
    pub once: bool,
    #[command(flatten)]
    pub push: crate::flags::PushArgs,
    #[command(flatten)]
    pub git: GitCredentialArgs,
    /// How long one member may take to answer its inventory probe (e.g. 10s; a bare number is
    /// seconds).
    #[arg(long, env = "GITFLEET_MEMBER_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = crate::flags::parse_timeout)]
    pub member_timeout: Duration,
    /// Who may approve update runs with signed tags (and sign heads, with --verify-commits).
    #[command(flatten)]
    pub trust: crate::approvals::command::TrustArgs,
    /// Serve only heads whose commit signature (`git commit -S`, SSH or OpenPGP) verifies
    /// against the trusted signers; any other head is rejected like an invalid commit.
    #[arg(long, env = "GITFLEET_VERIFY_COMMITS")]
    pub verify_commits: bool,
    #[command(flatten)]
    pub deletion_guard: crate::flags::DeletionGuardArgs,
}

/// How a remote `--repo` is authenticated to. Secrets are read from files (a mounted Secret),
/// never taken as values, so they appear in no process list.
#[derive(Debug, Args)]
pub struct GitCredentialArgs {
    /// Private key for `ssh://` and `git@host:path` remotes (only this key is offered).
    #[arg(long, env = "GITFLEET_GIT_SSH_KEY", value_name = "FILE")]
    pub git_ssh_key: Option<PathBuf>,
    /// known_hosts file for ssh remotes; host keys are always checked strictly (an unknown or
    /// changed host key is refused, never learnt).
    #[arg(long, env = "GITFLEET_GIT_KNOWN_HOSTS", value_name = "FILE")]
    pub git_known_hosts: Option<PathBuf>,
    /// File holding a token for `https://` remotes, sent as the password of --git-username.
    #[arg(
        long,
        env = "GITFLEET_GIT_TOKEN_FILE",
        value_name = "FILE",
        conflicts_with = "git_password_file"
    )]
    pub git_token_file: Option<PathBuf>,
    /// Username for `https://` remotes (with --git-token-file: default `git`; GitHub and GitLab
    /// take any name with a token).
    #[arg(long, env = "GITFLEET_GIT_USERNAME", value_name = "NAME")]
    pub git_username: Option<String>,
    /// PEM certificates to trust for `https://` remotes besides the system's (a Git host
    /// behind an internal certificate authority).
    #[arg(long, env = "GITFLEET_GIT_CA_FILE", value_name = "FILE")]
    pub git_ca_file: Option<PathBuf>,
    /// File holding the password of --git-username for `https://` remotes.
    #[arg(
        long,
        env = "GITFLEET_GIT_PASSWORD_FILE",
        value_name = "FILE",
        requires = "git_username"
    )]
    pub git_password_file: Option<PathBuf>,
}

impl GitCredentialArgs {
    fn given(&self) -> bool {
        self.git_ssh_key.is_some()
            || self.git_known_hosts.is_some()
            || self.git_token_file.is_some()
            || self.git_password_file.is_some()
            || self.git_ca_file.is_some()
    }

    /// Reads the secret files now, so a missing or empty one fails at start.
    pub fn load(&self) -> Result<crate::follow::remote::GitAuth> {
        use crate::follow::remote::{GitAuth, HttpAuth, SshAuth};
        let http = match (&self.git_token_file, &self.git_password_file) {
            (Some(file), _) => Some(HttpAuth::from_file(
                self.git_username.as_deref().unwrap_or("git"),
                file,
            )?),
            (None, Some(file)) => Some(HttpAuth::from_file(
                self.git_username.as_deref().unwrap_or_default(),
                file,
            )?),
            (None, None) => None,
        };
        for file in [&self.git_ssh_key, &self.git_known_hosts, &self.git_ca_file]
            .into_iter()
            .flatten()
        {
            std::fs::metadata(file).with_context(|| format!("cannot read {}", file.display()))?;
        }
        Ok(GitAuth {
            ssh: SshAuth {
                key: self.git_ssh_key.clone(),
                known_hosts: self.git_known_hosts.clone(),
                ..SshAuth::default()
            },
            http,
            ca_file: self.git_ca_file.clone(),
        })
    }
}

/// The daemon's writer identity: its state directory on this host (one live daemon per
/// directory, held by the directory lock), so a restarted daemon recognises its own marks.
fn state_identity(dir: &std::path::Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    format!(
        "{} on {}",
        dir.display(),
        crate::push::writer::Process::current().host
    )
}

fn now_unix() -> u64 {
    super::now_unix()
}

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let webhook_secret = match &args.webhook_secret_file {
        Some(f) => {
            let secret = std::fs::read(f)
                .with_context(|| format!("cannot read webhook secret {}", f.display()))?
                .trim_ascii()
                .to_vec();
            // An empty HMAC key would make every signature computable by anyone.
            if secret.is_empty() {
                bail!(
                    "the webhook secret file {} is empty (or only whitespace): put the secret \
                     the Git host signs with in it",
                    f.display()
                );
            }
            Some(secret)
        }
        None => None,
    };
    if args.verify_commits && !args.trust.given() {
        return Err(crate::flags::UsageError(
            "--verify-commits needs --trusted-signers and/or --trusted-gpg-keys".into(),
        )
        .into());
    }
    let verifier = if args.trust.given() || args.trust.approval_policy.is_some() {
        Some(args.trust.load()?)
    } else {
        None
    };
    let located = args.kubeconfig.load()?;
    let kubeconfig = Arc::new(located.kubeconfig);
    let (repo, remote) = match crate::follow::remote::Location::parse(&args.repo)? {
        crate::follow::remote::Location::Local(path) => {
            if args.git.given() {
                return Err(crate::flags::UsageError(format!(
                    "--repo {} is a local repository: the --git-* credentials are for a remote URL",
                    path.display()
                ))
                .into());
            }
            // Fail early with a clear message rather than inside the loop.
            crate::follow::branch_head(&path, &args.branch)?;
            (path, None)
        }
        // Created here, fetched by the loop (where a failure is retried, not fatal).
        crate::follow::remote::Location::Remote(url) => {
            let auth = args.git.load()?;
            let mirror = crate::follow::remote::Mirror::open(&url, &args.state_dir)?;
            (
                mirror.path,
                Some(crate::follow::remote::Remote { url, auth }),
            )
        }
    };
    let opts = RunOptions {
        repo,
        remote,
        branch: args.branch.clone(),
        path: args.path.clone(),
        state_dir: args.state_dir.clone(),
        listen: Some(args.listen),
        poll: args.poll,
        resync: args.resync,
        once: args.once,
        webhook_secret: webhook_secret.clone(),
        verifier,
        verify_commits: args.verify_commits,
        deletion_guard: args.deletion_guard.policy(),
    };
    let deliverer = PushDeliverer {
        kubeconfig,
        kubeconfig_path: located.name.clone(),
        probe: ProbeOptions {
            timeout: args.member_timeout,
            ..ProbeOptions::default()
        },
        parallel_members: usize::from(args.push.parallel_members),
        parallel_requests: usize::from(args.push.parallel_requests),
        retry_budget: args.push.retry_budget,
        writer: crate::push::writer::Identity::daemon(&state_identity(&args.state_dir)),
        clock: now_unix,
        watches: Default::default(),
        slots: Default::default(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let daemon = Daemon::open(opts, deliverer)?;
        let status = daemon.status.clone();
        let (wake_tx, wake_rx) = tokio::sync::mpsc::unbounded_channel();
        let listener = super::server::bind(args.listen).await?;
        let api = super::server::Api {
            status: status.clone(),
            metrics: daemon.metrics.clone(),
            webhook_secret: webhook_secret.map(Arc::from),
            wake: wake_tx,
        };
        let mut server = super::server::spawn(listener, api, super::server::Limits::default())?;
        tracing::info!(listen = %server.local_addr(), repo = %crate::follow::remote::redacted(&args.repo), branch = %args.branch, "gitfleet run: following the branch");
        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        // The loop stops on a signal, or when the HTTP server dies (supervised: the daemon then
        // exits with the server's error instead of running on without its API).
        let result = server.supervise(daemon.run(wake_rx, shutdown.clone()), &shutdown).await;
        let served = server.finish().await;
        result?;
        served?;
        let st = status.lock().unwrap();
        let failed = st.rejected.is_some()
            || st
                .placements
                .iter()
                .any(|p| p.clusters.values().any(|c| c.last_error.is_some()));
        Ok(if args.once && failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    })
}

/// Cancels `shutdown` on the first SIGTERM or Ctrl-C (the loop then stops after the step in
/// flight, with state saved); a second signal exits at once.
async fn cancel_on_signal(shutdown: CancellationToken) {
    wait_for_signal().await;
    shutdown.cancel();
    tracing::info!("signal received: finishing the step in flight; a second signal exits now");
    tokio::spawn(async {
        wait_for_signal().await;
        eprintln!("second signal: exiting now");
        std::process::exit(130);
    });
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StatusFormat {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The daemon's address (its --listen).
    #[arg(long, env = "GITFLEET_SERVER", default_value = "http://127.0.0.1:7070")]
    pub server: String,
    /// One placement (`crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`, or a bare CRP name), described.
    pub placement: Option<String>,
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: StatusFormat,
}

pub fn status(args: &StatusArgs) -> Result<ExitCode> {
    let doc = crate::daemon_client::placements(&args.server)?;
    let Some(want) = &args.placement else {
        let (runs, requests) = crate::daemon_client::update_runs(&args.server)?;
        match args.output {
            StatusFormat::Table => {
                print!("{}", super::view::table(&doc));
                print!(
                    "{}",
                    super::runs::tables(
                        &runs.update_runs,
                        &requests.approval_requests,
                        super::now_unix()
                    )
                );
            }
            format => {
                let all = super::wire::StatusDocument {
                    placements: doc,
                    update_runs: runs.update_runs,
                    approval_requests: requests.approval_requests,
                };
                match format {
                    StatusFormat::Json => println!("{}", serde_json::to_string_pretty(&all)?),
                    _ => print!("{}", crate::yaml::to_string(&all)?),
                }
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let id = if want.contains('/') {
        want.clone()
    } else {
        format!("crp/{want}")
    };
    let Some(p) = doc.placement(&id) else {
        bail!("the daemon at {} has no placement {id}", args.server);
    };
    match args.output {
        StatusFormat::Json => println!("{}", serde_json::to_string_pretty(p)?),
        StatusFormat::Yaml => print!("{}", crate::yaml::to_string(p)?),
        StatusFormat::Table => print!("{}", super::view::describe(p)),
    }
    Ok(ExitCode::SUCCESS)
}
