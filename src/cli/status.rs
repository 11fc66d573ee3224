//! `gitfleet status`: the daemon's placements, update runs and approval requests, read from its
//! status API and shown for people ([`view`]) or as JSON/YAML.

mod view;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

/// `gitfleet status`'s first line under `--state kubernetes`: who leads, and who answered.
fn leader_line(l: &crate::api::LeaderStatus) -> String {
    match (&l.leader, l.leading) {
        (_, true) => format!("Leader: {} (this replica)", l.identity),
        (Some(leader), false) => format!(
            "Leader: {leader} (answered by follower {}; the leader's status has the rollout)",
            l.identity
        ),
        (None, false) => format!("Leader: none yet (answered by {})", l.identity),
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StatusFormat {
    Table,
    /// The table with the clusters of each placement by name (selected, updating, waiting,
    /// failed).
    Wide,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The daemon's address (its --listen).
    #[arg(long, env = "GITFLEET_SERVER", default_value = "http://127.0.0.1:7070")]
    pub server: String,
    #[command(flatten)]
    pub token: crate::cli::flags::TokenArgs,
    /// One placement (`crp/NAME`, `rp/NS/NAME`, `ocm/NS/NAME`, or a bare CRP name), described.
    pub placement: Option<String>,
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: StatusFormat,
    /// Keep asking the daemon (every --interval) and print the status again whenever it
    /// changes, until Ctrl-C (on a terminal the screen is redrawn).
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// How often --watch asks the daemon.
    #[arg(long, default_value = "2s", value_parser = crate::cli::flags::parse_timeout, requires = "watch")]
    pub interval: Duration,
}

/// What one look at the daemon shows: the document (to tell a change) and its text.
fn status_once(args: &StatusArgs) -> Result<(serde_json::Value, String)> {
    let daemon = &args.token.daemon(&args.server)?;
    let Some(want) = &args.placement else {
        let doc = crate::api::client::placements(daemon)?;
        let (runs, requests) = crate::api::client::update_runs(daemon)?;
        // Refused tags are shown beside the requests: otherwise only the log says why an
        // approval did not count.
        let refused = crate::api::client::approvals(daemon)
            .map(|v| v.rejections)
            .unwrap_or_default();
        // A daemon from before evictions has no such document: none to show.
        let evictions = crate::api::client::evictions(daemon)
            .map(|e| e.evictions)
            .unwrap_or_default();
        let all = crate::api::StatusDocument {
            placements: doc,
            update_runs: runs.update_runs,
            approval_requests: requests.approval_requests,
            refused_approvals: refused,
            evictions,
        };
        let text = match args.output {
            StatusFormat::Table | StatusFormat::Wide => {
                let now = crate::timestamp::now_unix();
                let wide = matches!(args.output, StatusFormat::Wide);
                let leader = all
                    .placements
                    .leader
                    .as_ref()
                    .map_or(String::new(), |l| format!("{}\n", leader_line(l)));
                format!(
                    "{leader}{}{}{}",
                    view::table(&all.placements, now, wide),
                    crate::daemon::runs::tables(&all.update_runs, &all.approval_requests, now),
                    view::refused_approvals(&all.refused_approvals)
                ) + &view::evictions(&all.evictions)
            }
            StatusFormat::Json => format!("{}\n", serde_json::to_string_pretty(&all)?),
            StatusFormat::Yaml => crate::yaml::to_string(&all)?,
        };
        return Ok((serde_json::to_value(&all)?, text));
    };
    let id = if want.contains('/') {
        want.clone()
    } else {
        format!("crp/{want}")
    };
    // One placement is read alone, not found in the whole fleet's document.
    let Some(p) = crate::api::client::placement(daemon, &id)? else {
        bail!("the daemon at {} has no placement {id}", args.server);
    };
    let p = &p;
    let text = match args.output {
        StatusFormat::Json => format!("{}\n", serde_json::to_string_pretty(p)?),
        StatusFormat::Yaml => crate::yaml::to_string(p)?,
        StatusFormat::Table | StatusFormat::Wide => view::describe(p),
    };
    Ok((serde_json::to_value(p)?, text))
}

pub fn status(args: &StatusArgs) -> Result<ExitCode> {
    if !args.watch {
        print!("{}", status_once(args)?.1);
        return Ok(ExitCode::SUCCESS);
    }
    watch_status(args)
}

/// `status --watch`: polls the daemon and prints the status whenever its document changes (a
/// terminal gets the screen cleared first, like `watch`; a pipe gets one block per change,
/// separated by a blank line). Ctrl-C or SIGTERM ends it with 0; a daemon that cannot be
/// reached is reported once and asked again.
fn watch_status(args: &StatusArgs) -> Result<ExitCode> {
    use std::io::{IsTerminal, Write};
    let terminal = std::io::stdout().is_terminal();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Registered before the first look, so a Ctrl-C at any moment ends the loop cleanly.
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut last: Option<serde_json::Value> = None;
        let mut last_error: Option<String> = None;
        let mut first = true;
        loop {
            let look = {
                let args = StatusArgs {
                    server: args.server.clone(),
                    token: args.token.clone(),
                    placement: args.placement.clone(),
                    output: args.output,
                    watch: false,
                    interval: args.interval,
                };
                tokio::task::spawn_blocking(move || status_once(&args)).await?
            };
            match look {
                Ok((doc, text)) => {
                    last_error = None;
                    if last.as_ref() != Some(&doc) {
                        let mut out = std::io::stdout().lock();
                        if terminal {
                            write!(out, "\x1b[H\x1b[2J")?;
                        } else if !first {
                            writeln!(out)?;
                        }
                        write!(out, "{text}")?;
                        out.flush()?;
                        last = Some(doc);
                        first = false;
                    }
                }
                Err(e) => {
                    let message = format!("{e:#}");
                    if last_error.as_ref() != Some(&message) {
                        eprintln!(
                            "{message}; asking again every {}",
                            humantime::format_duration(args.interval)
                        );
                        last_error = Some(message);
                    }
                }
            }
            tokio::select! {
                _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
                _ = terminate.recv() => return Ok(ExitCode::SUCCESS),
                () = tokio::time::sleep(args.interval) => {}
            }
        }
    })
}
