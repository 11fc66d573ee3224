//! `gitfleet run`: the daemon's flags, checked, and the daemon assembled from them (the state
//! backend, the members, the status API, leader election under `--state kubernetes`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use tokio_util::sync::CancellationToken;

use crate::daemon::deliver::PushDeliverer;
use crate::daemon::{Daemon, RunOptions};
use crate::members::inventory::Options as ProbeOptions;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The git repository to follow: a local path (a clone or a bare repository; pushes into it
    /// are seen at once) or a URL (file://, http(s)://, ssh://, git@host:path), mirrored into
    /// `<state-dir>/repo.git` and fetched every --poll and on the webhook.
    #[arg(
        long,
        env = "GITFLEET_REPO",
        default_value = ".",
        value_name = "DIR|URL"
    )]
    pub repo: String,
    /// Branch to follow.
    #[arg(long, env = "GITFLEET_BRANCH", default_value = "main")]
    pub branch: String,
    /// Folder of the repository holding the fleet (default: the whole tree).
    #[arg(
        long,
        env = "GITFLEET_PATH",
        default_value = "",
        hide_default_value = true,
        value_name = "DIR"
    )]
    pub path: String,
    #[command(flatten)]
    pub sources: crate::cli::flags::SourcesArgs,
    #[command(flatten)]
    pub kubeconfig: crate::cli::flags::KubeconfigArgs,
    /// Where the daemon keeps what must survive a restart: `directory` (--state-dir, one
    /// daemon per directory) or `kubernetes` (ConfigMaps in --state-namespace of the hosting
    /// cluster; replicas elect a leader through a Lease and only the leader acts).
    #[arg(long, env = "GITFLEET_STATE", value_enum, default_value = "directory")]
    pub state: StateKind,
    /// The state directory (created if missing), with `--state directory`; with `--state
    /// kubernetes`, where a remote --repo is mirrored unless --cache-dir says.
    #[arg(long, env = "GITFLEET_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// With `--state kubernetes`: where a remote --repo is mirrored (`<cache-dir>/repo.git`;
    /// default: --state-dir). A cache: a new replica fetches it again. (With a state directory
    /// the mirror is in it.)
    #[arg(long, env = "GITFLEET_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub hosting: HostingArgs,
    /// Address of the status API, metrics and webhook.
    #[arg(long, env = "GITFLEET_LISTEN", default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// How often to look at the branch and the members without being told (e.g. 30s, 2m).
    #[arg(long, env = "GITFLEET_POLL", default_value = "30s", value_parser = crate::cli::flags::parse_duration)]
    pub poll: Duration,
    /// How often everything delivered is re-applied (a no-op where nothing changed), the
    /// backstop for changes on members that the watches missed (e.g. 10m, 1h).
    #[arg(long, env = "GITFLEET_RESYNC", default_value = "10m", value_parser = crate::cli::flags::parse_duration)]
    pub resync: Duration,
    /// File holding the webhook secret; enables `POST /hooks/git`.
    #[arg(long, env = "GITFLEET_WEBHOOK_SECRET_FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// File holding a token the status API (`/api/v1`) and the web dashboard (`/`) then ask
    /// for: send `Authorization: Bearer TOKEN` (`status`, `wait`, `plan --server` and
    /// `approve` take --token-file), or open the dashboard once with `?token=TOKEN` (kept in an
    /// HttpOnly cookie). /healthz, /readyz, /metrics and /hooks/git stay open (the webhook has
    /// its own secret). Without it, whoever reaches --listen reads the status.
    /// (`--dashboard-token-file` and GITFLEET_DASHBOARD_TOKEN_FILE, its older names, still work.)
    #[arg(
        long,
        env = "GITFLEET_TOKEN_FILE",
        value_name = "FILE",
        alias = "dashboard-token-file"
    )]
    pub token_file: Option<PathBuf>,
    /// Reconcile the head until the rollout settles or has to wait, then exit (1 if the head is
    /// rejected or a push failed).
    #[arg(long, env = "GITFLEET_ONCE")]
    pub once: bool,
    #[command(flatten)]
    pub push: crate::cli::flags::PushArgs,
    #[command(flatten)]
    pub git: GitCredentialArgs,
    /// How long one member may take to answer its inventory probe (e.g. 10s; a bare number is
    /// seconds).
    #[arg(long, env = "GITFLEET_MEMBER_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = crate::cli::flags::parse_timeout)]
    pub member_timeout: Duration,
    /// Collect each member's namespaces in its inventory probe (names only, at most 200), so
    /// that a ResourcePlacement is scheduled only where its namespace exists, as KubeFleet's
    /// member agent does with `--enable-namespace-collection-in-property-provider`. Off: every
    /// member passes.
    #[arg(long, env = "GITFLEET_ENABLE_NAMESPACE_COLLECTION")]
    pub enable_namespace_collection: bool,
    /// Who may approve update runs with signed tags (and sign heads, with --verify-commits).
    #[command(flatten)]
    pub trust: crate::cli::approve::TrustArgs,
    /// Serve only heads whose commit signature (`git commit -S`, SSH or OpenPGP) verifies
    /// against the trusted signers; any other head is rejected like an invalid commit. The
    /// last verified commit served (recorded in the state when it began to be served) goes on
    /// being served and healed; when there is none (a commit served while this was off is not
    /// verified), nothing is served until a signed head comes: status and /readyz say so. The
    /// history is never walked back to an older signed commit.
    #[arg(long, env = "GITFLEET_VERIFY_COMMITS")]
    pub verify_commits: bool,
    #[command(flatten)]
    pub deletion_guard: crate::cli::flags::DeletionGuardArgs,
    /// `/readyz` fails after this many failed fetches of the git source in a row (a local
    /// repository: reads of the branch), so an orchestrator sees a daemon cut off from its
    /// repository; 0 never fails it for that.
    #[arg(
        long,
        env = "GITFLEET_READY_FETCH_FAILURES",
        value_name = "N",
        default_value_t = 3
    )]
    pub ready_fetch_failures: u32,
    /// The notifications file: the sinks events are sent to (CloudEvents webhooks, Slack,
    /// Teams, commit statuses on GitHub, GitLab, Gitea) and the dashboard URL they link to
    /// (docs/guides/notifications.md). Sending never delays a reconcile.
    #[arg(long, env = "GITFLEET_NOTIFICATIONS", value_name = "FILE")]
    pub notifications: Option<PathBuf>,
}

/// `--state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateKind {
    /// Files in --state-dir, locked by one daemon.
    Directory,
    /// ConfigMaps in the hosting cluster, written by the replica holding the Lease.
    Kubernetes,
}

/// The hosting cluster and the election, for `--state kubernetes`.
#[derive(Debug, Args)]
pub struct HostingArgs {
    /// Namespace of the Lease and the state ConfigMaps (default: POD_NAMESPACE, else the
    /// hosting kubeconfig context's namespace, else the pod's own namespace in a cluster).
    #[arg(long, env = "GITFLEET_STATE_NAMESPACE", value_name = "NAMESPACE")]
    pub state_namespace: Option<String>,
    /// Kubeconfig of the hosting cluster (default: the pod's service account, in a cluster).
    /// Members are always reached with --kubeconfig.
    #[arg(long, env = "GITFLEET_HOSTING_KUBECONFIG", value_name = "FILE")]
    pub hosting_kubeconfig: Option<PathBuf>,
    /// Context of --hosting-kubeconfig (default: its current context).
    #[arg(long, env = "GITFLEET_HOSTING_CONTEXT", value_name = "CONTEXT")]
    pub hosting_context: Option<String>,
    /// Name of the Lease; the state ConfigMaps are named after it (`<name>-state`,
    /// `<name>-p-…`).
    #[arg(long, env = "GITFLEET_LEASE_NAME", default_value = "gitfleet")]
    pub lease_name: String,
    /// How long a leader's Lease holds without renewal before another replica may take it.
    #[arg(long, env = "GITFLEET_LEASE_DURATION", default_value = "15s", value_parser = crate::cli::flags::parse_timeout)]
    pub lease_duration: Duration,
    /// A leader that has not renewed its Lease for this long stops acting (and exits, to
    /// restart as a follower); shorter than --lease-duration.
    #[arg(long, env = "GITFLEET_RENEW_DEADLINE", default_value = "10s", value_parser = crate::cli::flags::parse_timeout)]
    pub renew_deadline: Duration,
    /// How often the Lease is read and renewed (or tried for).
    #[arg(long, env = "GITFLEET_RETRY_PERIOD", default_value = "2s", value_parser = crate::cli::flags::parse_timeout)]
    pub retry_period: Duration,
    /// This replica's name in the Lease (default: HOSTNAME, the pod's name in a cluster).
    #[arg(long, env = "GITFLEET_IDENTITY")]
    pub identity: Option<String>,
    /// Divides the members into this many shards, held by the live replicas through Leases
    /// (0: none; --state kubernetes only). The leader still decides everything, and holds no
    /// shard while another replica is live; each other replica probes, pushes to and watches
    /// the members of the shards it holds, on the leader's orders through the hosting cluster
    /// (docs/architecture.md, "Sharding").
    #[arg(long, env = "GITFLEET_SHARDS", default_value_t = 0)]
    pub shards: u32,
}

impl HostingArgs {
    pub fn election(&self) -> Result<crate::daemon::leader::Election> {
        let identity = self.identity.clone().unwrap_or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| format!("gitfleet-{}", std::process::id()))
        });
        let election = crate::daemon::leader::Election {
            lease_name: self.lease_name.clone(),
            identity,
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        };
        election.check().map_err(crate::cli::flags::UsageError)?;
        Ok(election)
    }

    /// The hosting cluster's client and the state's namespace.
    async fn connect(&self) -> Result<(kube::Client, String)> {
        let config = match &self.hosting_kubeconfig {
            Some(path) => {
                let kubeconfig = crate::members::read_kubeconfig(path)?;
                let options = kube::config::KubeConfigOptions {
                    context: self.hosting_context.clone(),
                    ..Default::default()
                };
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .with_context(|| format!("hosting kubeconfig {}", path.display()))?
            }
            None => kube::Config::incluster().map_err(|e| {
                crate::cli::flags::UsageError(format!(
                    "--state kubernetes outside a cluster needs --hosting-kubeconfig (no \
                     in-cluster service account: {e})"
                ))
            })?,
        };
        let namespace = self
            .state_namespace
            .clone()
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|n| !n.is_empty())
            })
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = crate::cluster_client::client(config)
            .map_err(anyhow::Error::msg)
            .context("cannot build the hosting cluster's client")?;
        Ok((client, namespace))
    }
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

/// The API's token from `--token-file` (or the older GITFLEET_DASHBOARD_TOKEN_FILE), trimmed;
/// an empty one is refused.
fn api_token(args: &RunArgs) -> Result<Option<Arc<[u8]>>> {
    let old = std::env::var_os("GITFLEET_DASHBOARD_TOKEN_FILE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let Some(f) = args.token_file.as_ref().or(old.as_ref()) else {
        return Ok(None);
    };
    let token =
        std::fs::read(f).with_context(|| format!("cannot read the token file {}", f.display()))?;
    let token = token.trim_ascii();
    if token.is_empty() {
        bail!(
            "the token file {} is empty (or only whitespace): put a token in it",
            f.display()
        );
    }
    Ok(Some(Arc::from(token)))
}

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let token = api_token(args)?;
    // Read (secrets and all) and checked before anything starts: a mistake is a usage error.
    let notifications = match &args.notifications {
        Some(f) => Some(
            crate::notify::config::Config::load(f)
                .map_err(|e| crate::cli::flags::UsageError(e.to_string()))?,
        ),
        None => None,
    };
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
        return Err(crate::cli::flags::UsageError(
            "--verify-commits needs --trusted-signers and/or --trusted-gpg-keys".into(),
        )
        .into());
    }
    let verifier = if args.trust.given() || args.trust.approval_policy.is_some() {
        Some(args.trust.load()?)
    } else {
        None
    };
    if args.state == StateKind::Directory && args.state_dir.is_none() {
        return Err(crate::cli::flags::UsageError(
            "--state directory needs --state-dir (or --state kubernetes)".into(),
        )
        .into());
    }
    if args.state == StateKind::Directory && args.hosting.shards > 0 {
        return Err(crate::cli::flags::UsageError(
            "--shards divides members among replicas: use it with --state kubernetes".into(),
        )
        .into());
    }
    if args.state == StateKind::Kubernetes && args.once {
        return Err(crate::cli::flags::UsageError(
            "--once is one process acting alone: use it with --state directory".into(),
        )
        .into());
    }
    // Checked before anything is read or bound: a bad combination is a usage error.
    let election = match args.state {
        StateKind::Kubernetes => Some(args.hosting.election()?),
        StateKind::Directory => None,
    };
    let located = args.kubeconfig.load()?;
    let kubeconfig = Arc::new(located.kubeconfig);
    // The remote's mirror: in the state directory, or the cache directory.
    let cache_dir = match args.state {
        StateKind::Directory => args.state_dir.clone(),
        StateKind::Kubernetes => args.cache_dir.clone().or_else(|| args.state_dir.clone()),
    };
    let (repo, remote) = match crate::follow::remote::Location::parse(&args.repo)? {
        crate::follow::remote::Location::Local(path) => {
            if args.git.given() {
                return Err(crate::cli::flags::UsageError(format!(
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
            let Some(dir) = &cache_dir else {
                return Err(crate::cli::flags::UsageError(format!(
                    "--repo {} is a remote: give --cache-dir (or --state-dir) to mirror it in",
                    crate::follow::remote::redacted(&args.repo)
                ))
                .into());
            };
            let auth = args.git.load()?;
            let mirror = crate::follow::remote::Mirror::open(&url, dir)?;
            (
                mirror.path,
                Some(crate::follow::remote::Remote { url, auth }),
            )
        }
    };
    let state_dir = match args.state {
        StateKind::Directory => args.state_dir.clone(),
        StateKind::Kubernetes => cache_dir,
    };
    // Renderings kept beside the state, so a restart does not build again.
    let renders = state_dir.as_ref().map(|d| d.join("cache").join("renders"));
    let opts = RunOptions {
        repo,
        remote,
        branch: args.branch.clone(),
        path: args.path.clone(),
        sources: Arc::new(args.sources.load(renders)?),
        // The state directory, or (`--state kubernetes`) where the mirror is; with a local
        // --repo nothing is kept on disk then.
        state_dir: state_dir.unwrap_or_default(),
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
            namespaces: args.enable_namespace_collection,
            ..ProbeOptions::default()
        },
        parallel_members: usize::from(args.push.parallel_members),
        parallel_requests: usize::from(args.push.parallel_requests),
        retry_budget: args.push.retry_budget,
        writer: crate::push::writer::Identity::daemon(&match (args.state, &args.state_dir) {
            // Only the Lease's holder writes, and a new leader takes over the old one's marks.
            (StateKind::Kubernetes, _) => format!("lease {}", args.hosting.lease_name),
            (StateKind::Directory, dir) => state_identity(dir.as_deref().unwrap_or(".".as_ref())),
        }),
        feedback_raw_json: args.push.raw_json(),
        clock: crate::timestamp::now_unix,
        watches: Default::default(),
        slots: Default::default(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    if let Some(election) = election {
        return runtime.block_on(run_elected(
            args,
            opts,
            deliverer,
            webhook_secret,
            election,
            notifications,
        ));
    }
    runtime.block_on(async move {
        let mut daemon = Daemon::open(opts, deliverer)?;
        let notifier = notifications.map(|config| start_notifications(&mut daemon, config));
        let status = daemon.status.clone();
        let (wake_tx, wake_rx) = tokio::sync::mpsc::unbounded_channel();
        let listener = crate::daemon::server::bind(args.listen).await?;
        let api = crate::daemon::server::Api {
            status: status.clone(),
            metrics: daemon.metrics.clone(),
            webhook_secret: webhook_secret.map(Arc::from),
            wake: wake_tx,
            ready_fetch_failures: args.ready_fetch_failures,
            token,
        };
        let limits = crate::daemon::server::Limits::default();
        crate::daemon::open_files::raise_and_log(limits.connections);
        let mut server = crate::daemon::server::spawn(listener, api, limits)?;
        tracing::info!(listen = %server.local_addr(), repo = %crate::follow::remote::redacted(&args.repo), branch = %args.branch, "gitfleet run: following the branch");
        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        // The loop stops on a signal, or when the HTTP server dies (supervised: the daemon then
        // exits with the server's error instead of running on without its API).
        let result = server.supervise(daemon.run(wake_rx, shutdown.clone()), &shutdown).await;
        let served = server.finish().await;
        if let Some(n) = notifier {
            n.finish(NOTIFICATIONS_GRACE).await;
        }
        result?;
        served?;
        let st = status.lock().unwrap();
        let failed = st.rejected.is_some()
            || st
                .placements
                .iter()
                .any(|p| p.clusters.values().any(|c| c.details.last_error.is_some()));
        Ok(if args.once && failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    })
}

/// `--state kubernetes`: serves status and metrics at once, takes part in the election, and
/// once leading reads the state from the hosting cluster and runs the daemon on it. Losing
/// the lease (not renewed within the renew deadline) or being fenced by another replica's
/// write ends the process with an error, as kube-controller-manager does when it stops
/// leading: the pod restarts as a follower, and nothing this one had in flight goes on.
async fn run_elected(
    args: &RunArgs,
    opts: RunOptions,
    deliverer: PushDeliverer,
    webhook_secret: Option<Vec<u8>>,
    election: crate::daemon::leader::Election,
    notifications: Option<crate::notify::config::Config>,
) -> Result<ExitCode> {
    use crate::daemon::leader::{self, Leadership, Role, Seen};
    let (client, namespace) = args.hosting.connect().await?;
    let identity = election.identity.clone();
    let status = Arc::new(std::sync::Mutex::new(crate::daemon::Status {
        branch: opts.branch.clone(),
        leader: Some(crate::api::LeaderStatus {
            identity: identity.clone(),
            leader: None,
            leading: false,
            shards: None,
        }),
        ..crate::daemon::Status::default()
    }));
    let metrics = Arc::new(crate::daemon::metrics::Metrics::default());
    let (wake_tx, wake_rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = crate::daemon::server::bind(args.listen).await?;
    let api = crate::daemon::server::Api {
        status: status.clone(),
        metrics: metrics.clone(),
        webhook_secret: webhook_secret.map(Arc::from),
        wake: wake_tx,
        ready_fetch_failures: args.ready_fetch_failures,
        token: api_token(args)?,
    };
    let limits = crate::daemon::server::Limits::default();
    crate::daemon::open_files::raise_and_log(limits.connections);
    let mut server = crate::daemon::server::spawn(listener, api, limits)?;
    tracing::info!(listen = %server.local_addr(), repo = %crate::follow::remote::redacted(&args.repo), branch = %args.branch, identity = %identity, namespace = %namespace, lease = %election.lease_name, "gitfleet run: state in the hosting cluster; electing a leader");
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    let (seen_tx, seen_rx) = tokio::sync::watch::channel(Seen {
        role: Role::Unknown,
        renewed: None,
    });
    let stop_election = CancellationToken::new();
    let elector = tokio::spawn(leader::run(
        kube::Api::namespaced(client.clone(), &namespace),
        election.clone(),
        seen_tx,
        stop_election.clone(),
    ));
    tokio::spawn(publish_role(
        seen_rx.clone(),
        status.clone(),
        metrics.clone(),
        identity.clone(),
    ));
    let stop_shards = CancellationToken::new();
    let mut owned = None;
    let sharder = (args.hosting.shards > 0).then(|| {
        let sharding = crate::daemon::shards::leases::Sharding {
            shards: args.hosting.shards,
            names: crate::daemon::shards::Names {
                prefix: election.lease_name.clone(),
            },
            identity: crate::daemon::shards::ReplicaId::from(identity.as_str()),
            lease_duration: election.lease_duration,
            renew_deadline: election.renew_deadline,
            retry_period: election.retry_period,
        };
        let (owned_tx, owned_rx) = tokio::sync::watch::channel(Default::default());
        owned = Some(owned_rx.clone());
        tokio::spawn(publish_shards(owned_rx, status.clone(), sharding.clone()));
        tokio::spawn(crate::daemon::shards::leases::run(
            kube::Api::namespaced(client.clone(), &namespace),
            kube::Api::namespaced(client.clone(), &namespace),
            sharding,
            (seen_rx.clone(), owned_tx),
            stop_shards.clone(),
        ))
    });
    let leadership = Leadership {
        seen: seen_rx.clone(),
        renew_deadline: election.renew_deadline,
    };
    // With shards, every replica pushes to the members of the shards it owns, the leader's
    // orders in hand; the leader itself delivers only through those orders.
    let hosting = |objects| crate::daemon::shards::remote::Hosting {
        objects,
        secrets: kube::Api::namespaced(client.clone(), &namespace),
        names: crate::daemon::shards::Names {
            prefix: election.lease_name.clone(),
        },
        shards: args.hosting.shards,
        me: crate::daemon::shards::ReplicaId::from(identity.as_str()),
    };
    let delivering = match owned {
        None => Delivering::Direct(Box::new(deliverer)),
        Some(owned) => {
            let local = Arc::new(deliverer);
            let executor = Arc::new(crate::daemon::shards::executor::Executor::new(
                hosting(kube::Api::namespaced(client.clone(), &namespace)),
                election.renew_deadline,
                local.clone(),
                metrics.clone(),
            ));
            tokio::spawn(executor.run(owned, stop_shards.clone()));
            // A push's own retries (a probe's timeout), and a shard's move to another owner,
            // within the wait.
            let moves = 2 * election.lease_duration;
            let answer_within = args.push.retry_budget + moves + Duration::from_secs(60);
            let probe_within = args.member_timeout + moves + Duration::from_secs(10);
            Delivering::Sharded(Arc::new(
                crate::daemon::shards::remote::ShardedDeliverer::new(
                    local,
                    hosting(kube::Api::namespaced(client.clone(), &namespace)),
                    (answer_within, probe_within),
                    metrics.shard_reports_refused.clone(),
                ),
            ))
        }
    };
    let prefix = election.lease_name.clone();
    let lead = async {
        let mut seen = seen_rx.clone();
        // Follow (serving status and metrics) until this replica leads, or is told to stop.
        loop {
            if seen.borrow_and_update().role == Role::Leader {
                break;
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                changed = seen.changed() => {
                    if changed.is_err() {
                        return Err(anyhow::anyhow!("the leader election ended"));
                    }
                }
            }
        }
        let objects = crate::state::kube::ConfigMaps::new(
            client.clone(),
            &namespace,
            tokio::runtime::Handle::current(),
        );
        let started = std::time::Instant::now();
        let me = identity.clone();
        let (store, loaded) = tokio::task::spawn_blocking(move || {
            crate::state::kube::KubeStore::open(objects, &prefix, &me)
        })
        .await
        .context("reading the state failed")??;
        tracing::info!(
            objects = loaded.objects,
            bytes = loaded.bytes,
            previous_leader = %loaded.previous_leader,
            load_ms = started.elapsed().as_millis() as u64,
            "leading: read and claimed the state"
        );
        let leading = Leading {
            store: Arc::new(store),
            status: status.clone(),
            metrics: metrics.clone(),
            leadership,
            notifications,
        };
        match delivering {
            Delivering::Direct(deliverer) => {
                leading
                    .run(opts, *deliverer, wake_rx, shutdown.clone())
                    .await
            }
            Delivering::Sharded(sharded) => {
                sharded
                    .clear_earlier()
                    .await
                    .context("cannot clear the orders of an earlier leader")?;
                let records = kube::Api::namespaced(client.clone(), &namespace);
                tokio::spawn(sharded.clone().collect(records, shutdown.clone()));
                leading.run(opts, sharded, wake_rx, shutdown.clone()).await
            }
        }
    };
    let lost = async {
        let mut seen = seen_rx.clone();
        loop {
            if seen.borrow_and_update().role == Role::Lost {
                return;
            }
            if seen.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let result = server
        .supervise(
            async {
                tokio::select! {
                    r = lead => r,
                    () = lost => Err(leader::NotLeading.into()),
                }
            },
            &shutdown,
        )
        .await;
    if let Err(e) = &result {
        // Nothing this replica started may go on: exit now (in-flight pushes die with the
        // process; the new leader re-applies what they had not finished).
        tracing::error!(error = %format!("{e:#}"), "stopped acting; exiting so that this replica restarts as a follower");
        std::process::exit(1);
    }
    stop_shards.cancel();
    if let Some(sharder) = sharder {
        let _ = sharder.await;
    }
    stop_election.cancel();
    let _ = elector.await;
    server.finish().await?;
    Ok(ExitCode::SUCCESS)
}

/// How the leader reaches the members.
enum Delivering {
    Direct(Box<PushDeliverer>),
    /// Through the owners of the members' shards.
    Sharded(Arc<crate::daemon::shards::remote::ShardedDeliverer>),
}

/// What a replica that leads runs the daemon with.
struct Leading {
    store: Arc<dyn crate::state::StateBackend>,
    status: Arc<std::sync::Mutex<crate::daemon::Status>>,
    metrics: Arc<crate::daemon::metrics::Metrics>,
    leadership: crate::daemon::leader::Leadership,
    notifications: Option<crate::notify::config::Config>,
}

impl Leading {
    async fn run<D: crate::daemon::Deliverer>(
        self,
        opts: RunOptions,
        deliverer: D,
        wake: tokio::sync::mpsc::UnboundedReceiver<()>,
        shutdown: CancellationToken,
    ) -> Result<()> {
        let mut daemon = Daemon::open_with(opts, deliverer, self.store)?;
        daemon.lead(self.status, self.metrics, self.leadership);
        // Only the leader tells: followers publish nothing of their own.
        let _notifier = self
            .notifications
            .map(|config| start_notifications(&mut daemon, config));
        daemon.run(wake, shutdown).await
    }
}

/// How long queued notifications may take to be sent when the daemon stops (`--once`'s last
/// commit status included).
const NOTIFICATIONS_GRACE: Duration = Duration::from_secs(10);

/// Starts delivering `config`'s notifications from what `daemon` publishes.
fn start_notifications<D: crate::daemon::Deliverer>(
    daemon: &mut Daemon<D>,
    config: crate::notify::config::Config,
) -> crate::notify::deliver::Notifier {
    let sinks: Vec<&str> = config.sinks.iter().map(|s| s.name.as_str()).collect();
    tracing::info!(sinks = ?sinks, "notifications: sending to these sinks");
    let (offer, notifier) = crate::notify::deliver::start(
        config,
        daemon.metrics.notifications.clone(),
        crate::timestamp::now_unix,
    );
    daemon.notify(offer);
    notifier
}

/// Mirrors the election into the status (`gitfleet status`) and `/metrics`.
async fn publish_role(
    mut seen: tokio::sync::watch::Receiver<crate::daemon::leader::Seen>,
    status: Arc<std::sync::Mutex<crate::daemon::Status>>,
    metrics: Arc<crate::daemon::metrics::Metrics>,
    identity: String,
) {
    use crate::daemon::leader::Role;
    loop {
        let role = seen.borrow_and_update().role.clone();
        let (leader, leading) = match role {
            Role::Leader => (Some(identity.clone()), true),
            Role::Follower { leader } => (leader, false),
            Role::Unknown | Role::Lost => (None, false),
        };
        metrics.is_leader.set(i64::from(leading));
        metrics.leader.clear();
        if let Some(l) = &leader {
            metrics
                .leader
                .get_or_create(&crate::daemon::metrics::labels(&[("identity", l)]))
                .set(1);
        }
        {
            let mut st = status.lock().unwrap_or_else(|e| e.into_inner());
            let shards = st.leader.take().and_then(|l| l.shards);
            st.leader = Some(crate::api::LeaderStatus {
                identity: identity.clone(),
                leader,
                leading,
                shards,
            });
            st.changed();
        }
        if seen.changed().await.is_err() {
            return;
        }
    }
}

/// Mirrors the shards this replica holds into the status (`gitfleet status`), as they change
/// and as their renewals age past the renew deadline.
async fn publish_shards(
    mut owned: tokio::sync::watch::Receiver<crate::daemon::shards::leases::Owned>,
    status: Arc<std::sync::Mutex<crate::daemon::Status>>,
    sharding: crate::daemon::shards::leases::Sharding,
) {
    loop {
        let shown = {
            let o = owned.borrow_and_update();
            let now = tokio::time::Instant::now();
            crate::api::ShardsStatus {
                count: sharding.shards,
                held: o
                    .acting_for(sharding.renew_deadline, now)
                    .into_iter()
                    .map(|s| s.0)
                    .collect(),
                live: o.live.iter().map(ToString::to_string).collect(),
            }
        };
        {
            let mut st = status.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(leader) = st.leader.as_mut() {
                if leader.shards.as_ref() != Some(&shown) {
                    leader.shards = Some(shown);
                    st.changed();
                }
            }
        }
        tokio::select! {
            changed = owned.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(sharding.retry_period) => {}
        }
    }
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
