//! `gitfleet completion`: shell completion scripts, from clap's own generator.

use super::*;
use anyhow::Result;
use clap::{Args, ValueEnum};
use std::process::ExitCode;

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

pub(super) fn completion(args: &CompletionArgs) -> Result<ExitCode> {
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
