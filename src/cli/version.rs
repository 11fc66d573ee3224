//! `gitfleet version`: the version, the commit the binary is built from and when.

use anyhow::Result;
use clap::{Args, ValueEnum};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct VersionArgs {
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: VersionFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum VersionFormat {
    Text,
    Json,
    Yaml,
}

pub(super) fn version(args: &VersionArgs) -> Result<ExitCode> {
    let build = crate::build_info::BUILD;
    match args.output {
        VersionFormat::Text => println!(
            "gitfleet {}\ncommit:     {}\nbuild date: {}",
            build.version, build.commit, build.build_date
        ),
        VersionFormat::Json => println!("{}", serde_json::to_string_pretty(&build)?),
        VersionFormat::Yaml => print!("{}", crate::yaml::to_string(&build)?),
    }
    Ok(ExitCode::SUCCESS)
}
