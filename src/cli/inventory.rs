//! `gitfleet inventory`: the members' live properties and health, as the inventory file
//! `--inventory FILE` reads.

use super::inputs::{live_inventory, load_valid, CommitArgs, ProbeArgs};
use super::render::ManifestFormat;
use crate::cli::flags::KubeconfigArgs;
use anyhow::Result;
use clap::Args;
use std::io::Write;
use std::process::ExitCode;

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

pub(super) fn inventory(args: &InventoryCmdArgs) -> Result<ExitCode> {
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
