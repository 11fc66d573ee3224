//! `gitfleet sim`: simulated members on loopback (the `gitfleet-sim` crate).

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

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

pub(super) fn sim(args: SimArgs) -> Result<ExitCode> {
    gitfleet_sim::run_blocking(gitfleet_sim::SimOptions {
        fleet: args.fleet,
        kubeconfig_out: args.kubeconfig_out,
        admin: args.admin,
        admin_token: args.admin_token,
    })?;
    Ok(ExitCode::SUCCESS)
}
