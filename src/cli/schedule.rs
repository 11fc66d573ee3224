//! `gitfleet schedule`: which member clusters each placement of a commit targets, with scores
//! and reasons.

use super::inputs::{load_valid, run_schedule, CommitArgs, ScheduleInputs};
use crate::catalog::Catalog;
use crate::model::PlacementKind;
use crate::schedule::PlacementSchedule;
use crate::state::StateStore;
use anyhow::Result;
use clap::{Args, ValueEnum};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScheduleFormat {
    Json,
    Yaml,
    Table,
    /// The table with every picked cluster by name, the policy snapshot index and every
    /// condition.
    Wide,
    /// OCM PlacementDecision objects (as Argo CD's clusterDecisionResource generator reads them).
    Placementdecisions,
}

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    #[command(flatten)]
    pub commit: CommitArgs,
    #[command(flatten)]
    pub inputs: ScheduleInputs,
    /// Write the new decisions to --state, so the next run sees them as previous.
    #[arg(long, requires = "state")]
    pub save: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: ScheduleFormat,
}

pub(super) fn schedule(args: &ScheduleArgs) -> Result<ExitCode> {
    let (commit, cat) = match load_valid(&args.commit)? {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let placements = run_schedule(&cat, &args.inputs)?;
    if args.save {
        let dir = args
            .inputs
            .state
            .as_ref()
            .expect("clap requires --state with --save");
        StateStore::lock(dir)?.save_schedule(&commit.commit, &placements)?;
    }
    let mut out = std::io::stdout().lock();
    match args.output {
        ScheduleFormat::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&schedule_view(&commit.commit, &placements))?
        )?,
        ScheduleFormat::Yaml => write!(
            out,
            "{}",
            crate::yaml::to_string(&schedule_view(&commit.commit, &placements))?
        )?,
        ScheduleFormat::Table => write!(out, "{}", schedule_table(&cat, &placements, false))?,
        ScheduleFormat::Wide => write!(out, "{}", schedule_table(&cat, &placements, true))?,
        ScheduleFormat::Placementdecisions => {
            for p in placements
                .iter()
                .filter(|p| p.key.kind == PlacementKind::OcmPlacement)
            {
                for d in crate::schedule::ocm::placement_decisions(p) {
                    writeln!(out, "---")?;
                    write!(out, "{}", crate::yaml::to_string(&d)?)?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The schedule as a table (docs/reference/cli.md).
fn schedule_view(commit: &str, placements: &[Arc<PlacementSchedule>]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = placements
        .iter()
        .map(|p| {
            let mut v = serde_json::json!({
                "kind": p.key.kind,
                "namespace": p.key.namespace,
                "name": p.key.name,
            });
            if let Some(i) = p.policy_snapshot_index {
                v["policySnapshotIndex"] = i.into();
            }
            v["selected"] = serde_json::json!(p.selected);
            v["decisions"] = serde_json::json!(p.decisions);
            v["conditions"] = serde_json::json!(p.conditions);
            if !p.decision_groups.is_empty() {
                v["decisionGroups"] = serde_json::json!(p.decision_groups);
            }
            v
        })
        .collect();
    serde_json::json!({"commit": commit, "placements": items})
}

/// A table for people: placement, type, wanted, picked clusters, condition; `wide` lists
/// every picked cluster and adds the policy snapshot index and every condition.
fn schedule_table(cat: &Catalog, placements: &[Arc<PlacementSchedule>], wide: bool) -> String {
    use crate::model::placement::PlacementType;
    let mut header = vec![
        "PLACEMENT".to_string(),
        "TYPE".to_string(),
        "WANTED".to_string(),
        "PICKED".to_string(),
        "CONDITION".to_string(),
    ];
    if wide {
        header.insert(3, "POLICY-INDEX".to_string());
        header[5] = "CONDITIONS".to_string();
    }
    let mut rows = vec![header];
    for p in placements {
        let (ty, wanted) = match p.key.kind {
            PlacementKind::OcmPlacement => {
                let n = cat
                    .ocm_placements
                    .iter()
                    .find(|e| {
                        e.spec.metadata.name == p.key.name
                            && cat.objects[e.index].namespace == p.key.namespace
                    })
                    .and_then(|e| e.spec.spec.number_of_clusters);
                (
                    "OCM".to_string(),
                    n.map_or("all".to_string(), |n| n.to_string()),
                )
            }
            PlacementKind::ManifestWork => ("ManifestWork".to_string(), "1".to_string()),
            _ => {
                let policy = cat
                    .placement(&p.key.name, p.key.namespace.as_deref())
                    .map(|e| e.spec.spec.policy_or_default())
                    .unwrap_or_default();
                match policy.placement_type {
                    PlacementType::PickAll => ("PickAll".to_string(), "all".to_string()),
                    PlacementType::PickN => (
                        "PickN".to_string(),
                        policy.number_of_clusters.unwrap_or(0).to_string(),
                    ),
                    PlacementType::PickFixed => (
                        "PickFixed".to_string(),
                        policy.cluster_names.len().to_string(),
                    ),
                }
            }
        };
        // The placement's id, as status, plan and render write it.
        let name = p.key.to_string();
        let condition =
            |c: &crate::schedule::Condition| format!("{}={} ({})", c.type_, c.status, c.reason);
        if wide {
            let picked = if p.selected.is_empty() {
                "-".to_string()
            } else {
                p.selected.join(",")
            };
            let index = p
                .policy_snapshot_index
                .map_or("-".to_string(), |i| i.to_string());
            let all: Vec<String> = p.conditions.iter().map(condition).collect();
            rows.push(vec![name, ty, wanted, index, picked, all.join(", ")]);
        } else {
            let picked = picked_summary(&p.selected);
            let first = p.conditions.first().map(condition).unwrap_or_default();
            rows.push(vec![name, ty, wanted, picked, first]);
        }
    }
    crate::text_table::render(&rows)
}

/// `a,b,c` or, for long lists, the first names and how many more.
fn picked_summary(selected: &[crate::model::ClusterName]) -> String {
    const SHOWN: usize = 4;
    match selected.len() {
        0 => "-".to_string(),
        n if n <= SHOWN => selected.join(","),
        n => format!("{} (+{} more)", selected[..SHOWN].join(","), n - SHOWN),
    }
}
