//! `gitfleet validate`: one commit, every object parsed, classified and checked.

use super::inputs::{print_diagnostics, read, summary, warn_invalid_selections, CommitArgs};
use anyhow::Result;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
}

pub(super) fn validate(args: &ValidateArgs) -> Result<ExitCode> {
    let commit = read(&args.commit)?;
    let (cat, diags) = commit.analyze();
    warn_invalid_selections(&crate::snapshot::invalid_selections(&cat));
    for w in &cat.warnings {
        eprintln!("warning: {w}");
    }
    if !diags.is_empty() {
        print_diagnostics(&diags);
        return Ok(ExitCode::from(1));
    }
    println!("{}", summary(&commit, &cat));
    Ok(ExitCode::SUCCESS)
}
