//! The `gitfleet` command line: parse arguments, call the library, print. Thin by design.

use crate::catalog::{Catalog, Diagnostic};
use crate::model::Labels;
use crate::render::{render_for_cluster, ClusterTarget, Manifest, OverrideSet, PlacementRef};
use crate::source::{read_commit, CommitFiles};
use anyhow::{anyhow, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  the commit is invalid (every diagnostic is printed) or the request cannot be met
     (unknown placement, an override that fails for this cluster)
  2  bad command line
  3  the repository, revision or path cannot be read";

#[derive(Debug, Parser)]
#[command(
    name = "gitfleet",
    version,
    about = "A Git repository as the hub of a Kubernetes fleet (KubeFleet and OCM placements)",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate one commit: every object parsed, classified and checked against its API rules.
    #[command(after_help = EXIT_CODES)]
    Validate(ValidateArgs),
    /// Print the manifests a placement delivers to one cluster, overrides applied and envelopes
    /// unwrapped, in apply order.
    #[command(after_help = EXIT_CODES)]
    Render(RenderArgs),
}

/// Which commit of which repository, and which folder of it.
#[derive(Debug, Args)]
pub struct CommitArgs {
    /// Path of the git repository.
    #[arg(long, env = "GITFLEET_REPO")]
    pub repo: PathBuf,
    /// Branch, tag or commit to read.
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// Folder of the repository holding the fleet (default: the whole tree).
    #[arg(long, default_value = "")]
    pub path: String,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ManifestFormat {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
    /// Name of the ClusterResourcePlacement, or of the ResourcePlacement with --namespace.
    #[arg(long)]
    pub placement: String,
    /// Namespace of a ResourcePlacement.
    #[arg(long)]
    pub namespace: Option<String>,
    /// The member cluster to render for. Its labels come from its MemberCluster in the
    /// repository (if declared) plus `kubernetes-fleet.io/member-name`; --labels adds or overrides.
    #[arg(long)]
    pub cluster: String,
    /// Cluster labels, `k=v,k2=v2`.
    #[arg(long, value_parser = parse_labels, default_value = "")]
    pub labels: Labels,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: ManifestFormat,
}

fn parse_labels(s: &str) -> Result<Labels, String> {
    let mut labels = Labels::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("label {pair:?} is not of the form key=value"))?;
        if !crate::model::is_qualified_name(k) {
            return Err(format!("label key {k:?} is not a valid qualified name"));
        }
        if !crate::model::is_label_value(v) {
            return Err(format!("label value {v:?} is not a valid label value"));
        }
        labels.insert(k.to_string(), v.to_string());
    }
    Ok(labels)
}

/// Failures that map to an exit code other than 1.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct SourceFailure(#[from] crate::source::SourceError);

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate(args) => validate(&args),
        Command::Render(args) => render(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<SourceFailure>().is_some() {
                ExitCode::from(3)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn read(args: &CommitArgs) -> Result<CommitFiles> {
    read_commit(&args.repo, &args.rev, &args.path).map_err(|e| anyhow!(SourceFailure(e)))
}

fn print_diagnostics(diags: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diags {
        let _ = writeln!(err, "{d}");
    }
    let _ = writeln!(
        err,
        "{} problem{} found",
        diags.len(),
        if diags.len() == 1 { "" } else { "s" }
    );
}

fn validate(args: &ValidateArgs) -> Result<ExitCode> {
    let commit = read(&args.commit)?;
    let (cat, diags) = crate::analyze(&commit.files);
    if !diags.is_empty() {
        print_diagnostics(&diags);
        return Ok(ExitCode::from(1));
    }
    println!("{}", summary(&commit, &cat));
    Ok(ExitCode::SUCCESS)
}

/// `ok abc1234: 12 files, 40 objects (3 ClusterResourcePlacement, 6 MemberCluster, …)`
fn summary(commit: &CommitFiles, cat: &Catalog) -> String {
    let counts = cat.counts_by_kind();
    let kinds: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!(
        "ok {}: {} files, {} objects ({})",
        &commit.commit[..12.min(commit.commit.len())],
        commit.files.len(),
        cat.objects.len(),
        kinds.join(", ")
    )
}

fn render(args: &RenderArgs) -> Result<ExitCode> {
    let commit = read(&args.commit)?;
    let (cat, diags) = crate::analyze(&commit.files);
    if !diags.is_empty() {
        print_diagnostics(&diags);
        eprintln!("the commit is invalid; nothing is rendered from it");
        return Ok(ExitCode::from(1));
    }
    let entry = cat
        .placement(&args.placement, args.namespace.as_deref())
        .ok_or_else(|| match &args.namespace {
            Some(ns) => anyhow!("no ResourcePlacement {:?} in namespace {ns:?} in commit {}", args.placement, commit.commit),
            None => anyhow!(
                "no ClusterResourcePlacement {:?} in commit {} (use --namespace for a ResourcePlacement)",
                args.placement,
                commit.commit
            ),
        })?;
    let snapshot = crate::snapshot::take(&cat, &entry.spec).map_err(|problems| {
        let list: Vec<String> = problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.message))
            .collect();
        anyhow!("resource selection failed: {}", list.join("; "))
    })?;
    let mut labels = member_labels(&cat, &args.cluster);
    labels.extend(args.labels.clone());
    let values: Vec<serde_json::Value> = snapshot.resources.into_iter().map(|r| r.value).collect();
    let overrides = OverrideSet {
        cluster: cat.cluster_overrides.iter().map(|e| &e.spec).collect(),
        namespaced: cat.resource_overrides.iter().map(|e| &e.spec).collect(),
    };
    let placement = PlacementRef {
        name: &args.placement,
        namespace: args.namespace.as_deref(),
    };
    let cluster = ClusterTarget {
        name: &args.cluster,
        labels: &labels,
    };
    let manifests = render_for_cluster(&placement, &values, &overrides, &cluster, &cat.scopes)
        .with_context(|| format!("rendering {} for cluster {}", args.placement, args.cluster))?;
    print_manifests(&manifests, args.output)?;
    Ok(ExitCode::SUCCESS)
}

/// Labels of a declared member (MemberCluster or ManagedCluster), with the label gitfleet adds.
fn member_labels(cat: &Catalog, cluster: &str) -> Labels {
    let mut labels = Labels::new();
    for o in &cat.objects {
        let member = matches!(
            (o.gvk.group.as_str(), o.gvk.kind.as_str()),
            ("cluster.kubernetes-fleet.io", "MemberCluster")
                | ("cluster.open-cluster-management.io", "ManagedCluster")
        );
        if member && o.name == cluster {
            labels.extend(o.labels());
        }
    }
    labels.insert(
        "kubernetes-fleet.io/member-name".into(),
        cluster.to_string(),
    );
    labels
}

fn print_manifests(manifests: &[Manifest], format: ManifestFormat) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        ManifestFormat::Json => {
            let items: Vec<&serde_json::Value> = manifests.iter().map(|m| &m.value).collect();
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
        }
        ManifestFormat::Yaml => {
            for m in manifests {
                writeln!(out, "---")?;
                write!(out, "{}", serde_yaml::to_string(&m.value)?)?;
            }
        }
    }
    if manifests.is_empty() && matches!(format, ManifestFormat::Yaml) {
        eprintln!("the placement delivers nothing to this cluster");
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse() {
        let l = parse_labels("a=b, region=east").unwrap();
        assert_eq!(l.get("region").map(String::as_str), Some("east"));
        assert!(parse_labels("novalue").is_err());
        assert!(parse_labels("Bad Key=x").is_err());
        assert!(parse_labels("").unwrap().is_empty());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
