//! `gitfleet sim`: simulated member clusters that speak the Kubernetes API over plain HTTP on
//! loopback, for the quick start, end-to-end tests and benchmarks. Each member has its own port,
//! bearer token, in-memory object store, nodes (from the fleet file, see [`fleet_file`]) and
//! simulated workloads; faults (latency, errors, down) can be injected per member, from the
//! fleet file and at run time through the admin endpoint ([`admin`], behind a token of its
//! own). Members and the admin endpoint are served by the simulator's own small HTTP/1.1
//! server ([`http`]), which bounds what a client can make it hold.
//!
//! It serves what kube-rs and kubectl use (the test bed's real kube-apiserver is the reference: tests/sim_differential.rs): `/version`, legacy
//! and aggregated discovery, a minimal OpenAPI v3, get/list/watch/create/update/patch (server-side
//! apply with managed fields and conflicts, JSON merge, JSON and strategic merge patch)/delete/
//! deletecollection on every built-in kind in [`resources`] and on any CRD applied to it, with
//! `Status` errors, resourceVersion and generation as a real server keeps them, server-side
//! `Table` printing, status and scale subresources, pod eviction with PodDisruptionBudgets,
//! finalizers and owner-reference GC.
//!
//! What it must not know: anything of gitfleet. It is a Kubernetes API server, not a gitfleet
//! fixture; its one dependency in the workspace is `gitfleet-kube-text`, for Kubernetes' YAML,
//! quantities and timestamps.
//!
//! Known divergences from a real API server (each is a simplification, not a goal):
//! - plain HTTP only; kubectl (client-go) never sends credentials over plain HTTP, so members
//!   that kubectl must reach need `anonymousAuth: true` in the fleet file (kube-rs does send
//!   its token);
//! - no schemas for custom resources: they are neither validated nor pruned; built-ins are
//!   checked for unknown fields only (see [`schema`]); OpenAPI documents have paths but no
//!   schemas;
//! - field ownership follows a built-in table of list keys instead of OpenAPI list types
//!   (see [`fields`]); custom-resource lists are atomic;
//! - deletion is synchronous: namespaces, foreground deletion and garbage collection finish
//!   within the DELETE request (a namespace holding objects with finalizers stays Terminating
//!   until they go, as on a real server); pods have no grace period;
//! - one served version per built-in kind (two for HorizontalPodAutoscaler), no conversion
//!   webhooks, no admission webhooks, no RBAC (an authenticated user may do anything);
//! - workloads roll out in one step after the member's delay (a new generation with the same
//!   spec is observed at once); see [`workloads`];
//! - request bodies in Kubernetes protobuf (kubectl's `create` generators) are read for the kinds
//!   in [`protobuf`]'s table only; other kinds get 415 (JSON and YAML work for every kind);
//! - SelfSubjectAccessReviews always allow (no RBAC); a TokenRequest issues the member's own
//!   bearer token (one credential per member); pod logs are empty; pod specs are not
//!   immutable; a PodDisruptionBudget counts the pods it selects as the expected number.
//!
//! Held to kube-apiserver v1.37 by tests/sim_differential.rs, which sends the same requests
//! to a simulated member and a real one (the test bed) and pins every answer that still
//! differs in its `KNOWN_DIVERGENCES` table, with the reason: an Update's managed fields
//! include fields the server defaults or allocates (the server tracks ownership before
//! defaulting); Service ports are keyed by port alone (the server: port and protocol);
//! custom resources' maps are not marked `"."` in Apply sets; Secret `stringData` is tracked
//! as such; `metadata.finalizers` is owned atomically (the server: a set); the messages for
//! bodies that are no JSON; seeded objects (no bootstrap RBAC roles, a placeholder CA); a CRD
//! is removed at once (the server keeps it, with its cleanup finalizer, until its custom
//! resources are gone); an unserved group gets a NotFound `Status` (the server: plain
//! `404 page not found`); custom resource lists carry no `continue: ""`.

// `ApiError` is the Status body of a response; boxing it everywhere buys nothing here.
#![allow(clippy::result_large_err)]

pub mod admin;
pub mod api;
pub mod apply;
pub mod clock;
pub mod defaults;
pub mod discovery;
pub mod faults;
pub mod fields;
pub mod fleet_file;
pub mod http;
pub mod kubeconfig;
pub mod member;
pub mod patch;
pub mod protobuf;
pub mod resources;
pub mod schema;
pub mod seed;
pub mod selector;
pub mod status;
pub mod store;
pub mod table;
pub mod workloads;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use fleet_file::{
    Faults, FaultsUpdate, FleetFile, FleetFileError, MemberSpec, NodeGroup, Taint,
};
pub use kubeconfig::KubeconfigEntry;

use member::Member;

/// Options for [`run`]: what `gitfleet sim --fleet FILE [--kubeconfig-out F] [--admin ADDR]
/// [--admin-token T]` takes.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The fleet file.
    pub fleet: PathBuf,
    /// Where to write the kubeconfig (none: not written). The admin token, if any, is written
    /// beside it, to `<kubeconfig>.admin-token`.
    pub kubeconfig_out: Option<PathBuf>,
    /// Address for the admin endpoint, e.g. `127.0.0.1:0` (none: no admin endpoint).
    pub admin: Option<SocketAddr>,
    /// The admin endpoint's bearer token (none: a random one).
    pub admin_token: Option<String>,
}

/// Options for [`start`].
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Address for the admin endpoint (none: no admin endpoint).
    pub admin: Option<SocketAddr>,
    /// The admin endpoint's bearer token (none: a random one).
    pub admin_token: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    FleetFile(#[from] FleetFileError),
    #[error("member {member}: cannot listen on {addr}: {source}")]
    Bind {
        member: String,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("admin endpoint: cannot listen on {addr}: {source}")]
    AdminBind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot write the admin token to {path}: {source}")]
    AdminToken {
        path: String,
        source: std::io::Error,
    },
    #[error("admin token: {0}")]
    InvalidAdminToken(&'static str),
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: std::io::Error,
    },
    #[error("no member named {0:?}")]
    UnknownMember(String),
    #[error("member {member}: invalid faults: {}", problems.join("; "))]
    InvalidFaults {
        member: String,
        problems: Vec<String>,
    },
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot wait for Ctrl-C: {0}")]
    Signal(std::io::Error),
}

/// How to reach one running member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberInfo {
    pub name: String,
    /// The kubeconfig context (and cluster and user) name.
    pub context: String,
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`
    pub server: String,
    pub token: String,
}

impl MemberInfo {
    fn kubeconfig_entry(&self) -> KubeconfigEntry {
        KubeconfigEntry {
            context: self.context.clone(),
            server: self.server.clone(),
            token: self.token.clone(),
        }
    }
}

/// A started fleet. Dropping it stops the members (as [`RunningFleet::shutdown`] does, without
/// waiting).
pub struct RunningFleet {
    members: Vec<Arc<Member>>,
    info: Vec<MemberInfo>,
    admin: Option<SocketAddr>,
    admin_token: Option<String>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningFleet {
    pub fn members(&self) -> &[MemberInfo] {
        &self.info
    }

    pub fn member(&self, name: &str) -> Option<&MemberInfo> {
        self.info.iter().find(|m| m.name == name)
    }

    /// The admin endpoint's address, when started with one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// The bearer token every admin request must carry, when started with an admin endpoint.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }

    /// Writes the admin token to `path` (mode 0600).
    pub fn write_admin_token(&self, path: &Path) -> Result<(), SimError> {
        let Some(token) = &self.admin_token else {
            return Ok(());
        };
        kubeconfig::write_private(path, format!("{token}\n").as_bytes()).map_err(|source| {
            SimError::AdminToken {
                path: path.display().to_string(),
                source,
            }
        })
    }

    /// The kubeconfig text for every member.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::kubeconfig_yaml(
            &self
                .info
                .iter()
                .map(MemberInfo::kubeconfig_entry)
                .collect::<Vec<_>>(),
        )
    }

    /// Writes the kubeconfig for every member to `path` (mode 0600).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), SimError> {
        write_kubeconfig(path, &self.info)
    }

    /// A member's current faults.
    pub fn faults(&self, member: &str) -> Result<Faults, SimError> {
        self.find(member).map(|m| m.current_faults())
    }

    /// Requests every member received so far, `(reads, writes)` in total (see
    /// [`member::RequestCounts`]).
    pub fn request_counts(&self) -> (u64, u64) {
        self.request_counts_except(None)
    }

    /// Requests every member but `except` received so far, counted in one pass: subtracting
    /// one member's count from the total read earlier would take off the requests it received
    /// in between from the others'.
    pub fn request_counts_except(&self, except: Option<&str>) -> (u64, u64) {
        self.members
            .iter()
            .filter(|m| Some(m.name.as_str()) != except)
            .fold((0, 0), |(r, w), m| {
                let (mr, mw) = m.requests.get();
                (r + mr, w + mw)
            })
    }

    /// Requests one member received so far, `(reads, writes)`.
    pub fn member_request_counts(&self, member: &str) -> Result<(u64, u64), SimError> {
        self.find(member).map(|m| m.requests.get())
    }

    /// Changes a member's faults (the fields the update gives); `down` takes effect at once.
    pub fn set_faults(&self, member: &str, update: &FaultsUpdate) -> Result<Faults, SimError> {
        let m = self.find(member)?;
        let next =
            m.current_faults()
                .updated(update)
                .map_err(|problems| SimError::InvalidFaults {
                    member: member.into(),
                    problems,
                })?;
        m.set_faults(next.clone());
        Ok(next)
    }

    fn find(&self, member: &str) -> Result<&Arc<Member>, SimError> {
        self.members
            .iter()
            .find(|m| m.name == member)
            .ok_or_else(|| SimError::UnknownMember(member.into()))
    }

    /// Stops every member and the admin endpoint and waits for their tasks.
    pub async fn shutdown(mut self) {
        self.stop();
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
    }

    fn stop(&self) {
        self.shutdown.send_replace(true);
        for m in &self.members {
            m.stopped.send_replace(true);
        }
    }
}

impl Drop for RunningFleet {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts every member of `fleet` (and the admin endpoint) in the current tokio runtime and
/// returns once all of them accept connections.
pub async fn start(fleet: FleetFile, opts: StartOptions) -> Result<RunningFleet, SimError> {
    let problems = fleet.problems();
    if !problems.is_empty() {
        return Err(FleetFileError::Invalid {
            path: "<fleet>".into(),
            problems,
        }
        .into());
    }
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut members = Vec::new();
    let mut info = Vec::new();
    let mut tasks = Vec::new();
    let now = clock::now_rfc3339();
    for (i, spec) in fleet.members.iter().enumerate() {
        let want = SocketAddr::from((Ipv4Addr::LOCALHOST, spec.port));
        let listener = TcpListener::bind(want)
            .await
            .map_err(|source| SimError::Bind {
                member: spec.name.clone(),
                addr: want,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            member: spec.name.clone(),
            addr: want,
            source,
        })?;
        let token = spec.token.clone().unwrap_or_else(generate_token);
        let version = spec
            .kubernetes_version
            .clone()
            .or_else(|| fleet.kubernetes_version.clone())
            .unwrap_or_else(|| fleet_file::DEFAULT_KUBERNETES_VERSION.to_string());
        let anonymous = spec.anonymous_auth.unwrap_or(fleet.anonymous_auth);
        let m = Arc::new(Member::new(
            spec,
            token,
            anonymous,
            version.clone(),
            addr,
            fleet.seed.wrapping_add(i as u64),
        ));
        if let Some(events) = fleet.watch_history {
            m.store().keep_events(events);
        }
        seed::seed(&mut m.store(), spec, &version, &now);
        tasks.push(tokio::spawn(member::listen(
            m.clone(),
            listener,
            shutdown_rx.clone(),
        )));
        tasks.push(tokio::spawn(workloads::run(m.clone(), shutdown_rx.clone())));
        info.push(MemberInfo {
            name: m.name.clone(),
            context: m.context.clone(),
            addr,
            server: m.url(),
            token: m.token.clone(),
        });
        members.push(m);
    }
    let admin_token = match (&opts.admin, opts.admin_token) {
        (None, _) => None,
        (Some(_), Some(t)) if t.trim().is_empty() => {
            return Err(SimError::InvalidAdminToken("empty"));
        }
        (Some(_), Some(t)) => Some(t.trim().to_string()),
        (Some(_), None) => Some(generate_token()),
    };
    let admin = match opts.admin {
        Some(want) => {
            let listener = TcpListener::bind(want)
                .await
                .map_err(|source| SimError::AdminBind { addr: want, source })?;
            let addr = listener
                .local_addr()
                .map_err(|source| SimError::AdminBind { addr: want, source })?;
            tasks.push(tokio::spawn(serve_admin(
                listener,
                members.clone(),
                admin_token.clone().unwrap_or_default(),
                shutdown_rx.clone(),
            )));
            Some(addr)
        }
        None => None,
    };
    Ok(RunningFleet {
        members,
        info,
        admin,
        admin_token,
        shutdown,
        tasks,
    })
}

async fn serve_admin(
    listener: TcpListener,
    members: Vec<Arc<Member>>,
    token: String,
    mut shutdown: watch::Receiver<bool>,
) {
    let members = Arc::new(members);
    let token = Arc::new(token);
    let handler: http::Handler = Arc::new(move |req| {
        let (members, token) = (members.clone(), token.clone());
        Box::pin(async move {
            // The admin endpoint hands out member tokens and can take members down.
            match admin::authorize(&token, &req) {
                Ok(()) => admin::handle(&members, &req),
                Err(refused) => refused,
            }
        })
    });
    loop {
        tokio::select! {
            a = listener.accept() => {
                if let Ok((stream, _)) = a {
                    tokio::spawn(http::serve_connection(stream, handler.clone(), shutdown.clone(), http::Limits::default()));
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// A random bearer token: 128 bits from the operating system, in hex.
fn generate_token() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a kubeconfig for `members` to `path` (mode 0600): one context, cluster and user per
/// member, named like the member's context.
pub fn write_kubeconfig(path: &Path, members: &[MemberInfo]) -> Result<(), SimError> {
    let entries: Vec<KubeconfigEntry> = members.iter().map(MemberInfo::kubeconfig_entry).collect();
    kubeconfig::write_kubeconfig(path, &entries).map_err(|source| SimError::Kubeconfig {
        path: path.display().to_string(),
        source,
    })
}

/// `gitfleet sim`: loads the fleet file, starts the members, writes the kubeconfig, prints the
/// members and a `ready` line on stdout, and serves until Ctrl-C.
pub async fn run(opts: SimOptions) -> Result<(), SimError> {
    let fleet = FleetFile::load(&opts.fleet)?;
    let running = start(
        fleet,
        StartOptions {
            admin: opts.admin,
            admin_token: opts.admin_token,
        },
    )
    .await?;
    if let Some(path) = &opts.kubeconfig_out {
        running.write_kubeconfig(path)?;
        running.write_admin_token(&admin_token_path(path))?;
    }
    print!("{}", ready_text(&running, opts.kubeconfig_out.as_deref()));
    let _ = std::io::stdout().flush();
    tokio::signal::ctrl_c().await.map_err(SimError::Signal)?;
    running.shutdown().await;
    Ok(())
}

/// [`run`] on a runtime of its own, for callers that are not async (the CLI).
pub fn run_blocking(opts: SimOptions) -> Result<(), SimError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(SimError::Runtime)?
        .block_on(run(opts))
}

/// Where `gitfleet sim` writes the admin token: beside the kubeconfig, `<kubeconfig>.admin-token`.
pub fn admin_token_path(kubeconfig: &Path) -> PathBuf {
    let mut name = kubeconfig.as_os_str().to_owned();
    name.push(".admin-token");
    PathBuf::from(name)
}

/// What `gitfleet sim` prints once every member listens.
pub fn ready_text(running: &RunningFleet, kubeconfig: Option<&Path>) -> String {
    let width = running
        .members()
        .iter()
        .map(|m| m.context.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for m in running.members() {
        out.push_str(&format!("  {:width$}  {}\n", m.context, m.server));
    }
    if let Some(k) = kubeconfig {
        out.push_str(&format!("kubeconfig: {}\n", k.display()));
    }
    if let (Some(a), Some(token)) = (running.admin_addr(), running.admin_token()) {
        out.push_str(&format!("admin: http://{a}/members\n"));
        match kubeconfig {
            Some(k) => out.push_str(&format!(
                "admin token file: {}\n",
                admin_token_path(k).display()
            )),
            // Nowhere to write it: the only way to hand it over.
            None => out.push_str(&format!("admin token: {token}\n")),
        }
    }
    out.push_str(&format!(
        "gitfleet sim: ready, {} member(s); Ctrl-C stops\n",
        running.members().len()
    ));
    out
}

#[cfg(test)]
mod tests;
