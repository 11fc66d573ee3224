//! `gitfleet validate`: one commit, every object parsed, classified and checked.

use super::inputs::{
    print_diagnostics, print_warnings, read, summary, warn_invalid_selections, CommitArgs,
};
use anyhow::Result;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
    /// Fail (exit 1) on warnings too: likely mistakes such as a selector that selects nothing
    /// or an override of a placement that does not exist.
    #[arg(long)]
    pub strict: bool,
}

pub(super) fn validate(args: &ValidateArgs) -> Result<ExitCode> {
    let commit = read(&args.commit)?;
    let (cat, diags) = commit.analyze();
    warn_invalid_selections(&crate::snapshot::invalid_selections(&cat), &diags);
    for w in &cat.warnings {
        eprintln!("warning: {w}");
    }
    if !diags.is_empty() {
        print_diagnostics(&diags);
        return Ok(ExitCode::from(1));
    }
    let warnings = print_warnings(&cat);
    println!("{}", summary(&commit, &cat));
    if args.strict && warnings > 0 {
        eprintln!(
            "{warnings} warning{} and --strict: failing",
            if warnings == 1 { "" } else { "s" }
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
