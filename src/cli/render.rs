//! `gitfleet render`: the manifests one placement delivers to one cluster, overrides applied
//! and envelopes unwrapped, in apply order; Secrets' values shown as `***`.

use super::inputs::{load_valid, placement_arg, run_schedule, CommitArgs, ScheduleInputs};
use crate::catalog::Catalog;
use crate::model::member::MEMBER_NAME_LABEL;
use crate::model::Labels;
use crate::render::cluster::{overrides_of, render_cluster, render_placement, PlacementManifests};
use crate::render::{ClusterTarget, Manifest};
use crate::schedule::Fleet;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ManifestFormat {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
    /// The placement, as `status` and `plan` write it: `crp/NAME` or `rp/NAMESPACE/NAME` (a
    /// bare NAME is a ClusterResourcePlacement, or a ResourcePlacement with --namespace).
    /// Without it, everything the schedule sends to --cluster is rendered.
    #[arg(long, value_name = "PLACEMENT")]
    pub placement: Option<String>,
    /// Namespace of a ResourcePlacement given by its bare name.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// The member cluster to render for: a MemberCluster or ManagedCluster of the commit. Its
    /// labels are the member's plus `kubernetes-fleet.io/member-name`; --labels adds or
    /// overrides (and renders for a cluster the commit does not declare yet).
    #[arg(long, value_name = "CLUSTER")]
    pub cluster: String,
    /// Cluster labels, `k=v,k2=v2`.
    #[arg(long, value_parser = parse_labels, default_value = "", hide_default_value = true, value_name = "LABELS")]
    pub labels: Labels,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: ManifestFormat,
    #[command(flatten)]
    pub inputs: ScheduleInputs,
}

pub(super) fn parse_labels(s: &str) -> Result<Labels, String> {
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

pub(super) fn render(args: &RenderArgs) -> Result<ExitCode> {
    let (commit, cat) = match load_valid(&args.commit)? {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let members = Fleet::build(&cat, None);
    if members.get(&args.cluster).is_none() {
        let names: Vec<&str> = members.clusters.iter().map(|c| c.name.as_str()).collect();
        let hint = crate::lint::hint(&args.cluster, names);
        if args.labels.is_empty() {
            bail!(
                "cluster {:?} is not a member of the fleet in commit {} (no MemberCluster or ManagedCluster of that name){hint}; to render for a cluster not declared yet, give its labels with --labels",
                args.cluster,
                &commit.commit[..12.min(commit.commit.len())]
            );
        }
        eprintln!(
            "note: cluster {:?} is not a member of the fleet{hint}; rendering with the labels given",
            args.cluster
        );
    }
    let mut labels = member_labels(&cat, &args.cluster);
    labels.extend(args.labels.clone());
    let cluster = ClusterTarget {
        name: &args.cluster,
        labels: &labels,
    };
    let rendered: Vec<PlacementManifests> = match &args.placement {
        Some(given) => {
            let (name, namespace) = placement_arg(given, args.namespace.as_deref())?;
            let name = &name;
            let Some(entry) = cat.placement(name, namespace.as_deref()) else {
                match &namespace {
                    Some(ns) => bail!("no ResourcePlacement {name:?} in namespace {ns:?} in commit {}", commit.commit),
                    None => bail!(
                        "no ClusterResourcePlacement {name:?} in commit {} (use --namespace for a ResourcePlacement)",
                        commit.commit
                    ),
                }
            };
            let key = cat.placement_key(entry);
            if let Some(invalid) = crate::snapshot::invalid_selections(&cat).get(&key) {
                eprintln!(
                    "placement {key} is held (Scheduled=False, InvalidResourceSelectors): {}; nothing is rendered for it",
                    invalid.message
                );
                return Ok(ExitCode::SUCCESS);
            }
            let manifests = render_placement(&cat, &key, &overrides_of(&cat), &cluster)
                .ok_or_else(|| anyhow!("placement {name:?} selects nothing renderable"))?;
            vec![PlacementManifests {
                placement: key,
                manifests,
            }]
        }
        None => {
            let schedule = run_schedule(&cat, &args.inputs)?;
            for p in &schedule {
                if let Some(message) = p.held() {
                    eprintln!(
                        "note: placement {} is held (Scheduled=False, InvalidResourceSelectors): {message}; nothing is rendered for it",
                        p.key
                    );
                }
            }
            render_cluster(&cat, &schedule, &cluster)
        }
    };
    let mut manifests = Vec::new();
    for p in rendered {
        let key = &p.placement;
        manifests.extend(
            p.manifests
                .with_context(|| format!("rendering {key} for cluster {}", args.cluster))?,
        );
    }
    // Several placements: one apply order over all of them (stable, so each keeps its own order).
    manifests.sort_by_key(|m| m.wave);
    if manifests.is_empty() && args.placement.is_none() {
        eprintln!(
            "no placement sends anything to cluster {:?} in this schedule",
            args.cluster
        );
    }
    print_manifests(&manifests, &rendered_sources(&cat), args.output)?;
    Ok(ExitCode::SUCCESS)
}

/// Labels of a declared member as KubeFleet's overrides see them (those of its MemberCluster,
/// or of its ManagedCluster when it is only that), with the label gitfleet adds.
pub(super) fn member_labels(cat: &Catalog, cluster: &str) -> Labels {
    match Fleet::build(cat, None).get(cluster) {
        Some(c) => c.labels.clone(),
        None => Labels::from([(MEMBER_NAME_LABEL.to_string(), cluster.to_string())]),
    }
}

/// Where a tool rendered an object from: `(apiVersion, kind, namespace, name)` to `kustomize
/// FILE`, for the objects of built kustomizations.
type RenderedSources = std::collections::HashMap<[String; 4], String>;

fn identity(value: &serde_json::Value) -> [String; 4] {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    [
        text(&value["apiVersion"]),
        text(&value["kind"]),
        text(&value["metadata"]["namespace"]),
        text(&value["metadata"]["name"]),
    ]
}

fn rendered_sources(cat: &Catalog) -> RenderedSources {
    cat.objects
        .iter()
        .filter_map(|o| {
            crate::catalog::unrendered::rendered_by(&o.origin.file)
                .map(|tool| (identity(&o.value), format!("{tool} {}", o.origin.file)))
        })
        .collect()
}

/// The manifests; in YAML, each rendered by a tool preceded by a comment naming its source.
pub(super) fn print_manifests(
    manifests: &[Manifest],
    sources: &RenderedSources,
    format: ManifestFormat,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        ManifestFormat::Json => {
            let items: Vec<_> = manifests
                .iter()
                .map(|m| crate::render::masked(&m.value))
                .collect();
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
        }
        ManifestFormat::Yaml => {
            for m in manifests {
                writeln!(out, "---")?;
                if let Some(source) = sources.get(&identity(&m.value)) {
                    writeln!(out, "# rendered by {source}")?;
                }
                write!(
                    out,
                    "{}",
                    crate::yaml::to_string(&crate::render::masked(&m.value))?
                )?;
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
}
