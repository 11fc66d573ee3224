//! The plan benchmark (`cargo bench --bench plan`): a base and a head commit of a synthetic fleet,
//! planned with [`gitfleet::plan::plan_catalogs`], the function `gitfleet plan` runs, then printed
//! as text, markdown and JSON. The base is [`super::generate`]'s commit plus overrides (some with
//! cluster variables, so renderings differ per cluster) and ManifestWorkReplicaSets; the head
//! changes a realistic fraction of it: policies, `numberOfClusters`, selected resources, an
//! override, a ManifestWorkReplicaSet.

use super::{
    generate, peak_rss_kib, secs, thread_cpu_time, timed, yaml_file, FleetSpec, Rng, NOW_UNIX,
};
use gitfleet::catalog::SourceFile;
use gitfleet::plan::{format, plan_catalogs, Inputs, Options, Plan};
use gitfleet::schedule::{schedule_commit, Fleet, Inventory, Previous};
use serde_json::{json, Value};
use std::fmt;
use std::hint::black_box;
use std::time::Duration;

/// `--max-bytes` of `gitfleet plan --format markdown` by default.
const MARKDOWN_MAX_BYTES: usize = 60_000;
/// Each of the head's kinds of change touches about this share of the placements, in per mille.
const CHANGE_PER_MILLE: usize = 20;

/// The two commits and the inventory of one plan benchmark.
pub struct PlanFleet {
    pub base: Vec<SourceFile>,
    pub head: Vec<SourceFile>,
    pub inventory: Inventory,
    /// What the head changes, in words (for the report).
    pub changes: Vec<String>,
}

fn docs_of(file: &SourceFile) -> Vec<Value> {
    let text = String::from_utf8_lossy(&file.content);
    text.split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| gitfleet::yaml::from_str(d).expect("generated YAML parses"))
        .collect()
}

/// Rewrites the file at `path` through `edit` of its documents.
fn edit(files: &mut [SourceFile], path: &str, edit: impl FnOnce(&mut Vec<Value>)) {
    let file = files
        .iter_mut()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("{path} is generated"));
    let mut docs = docs_of(file);
    edit(&mut docs);
    *file = yaml_file(path.to_string(), &docs);
}

fn placement_docs(files: &[SourceFile]) -> Vec<(String, Vec<Value>)> {
    files
        .iter()
        .filter(|f| f.path.starts_with("placements/") || f.path.starts_with("ocm/placements/"))
        .map(|f| (f.path.clone(), docs_of(f)))
        .collect()
}

fn placement_of(docs: &[Value]) -> &Value {
    docs.iter()
        .find(|d| {
            matches!(
                d["kind"].as_str(),
                Some("ClusterResourcePlacement" | "ResourcePlacement" | "Placement")
            )
        })
        .expect("a placement file holds a placement")
}

/// A ClusterResourceOverride that stamps the objects of a placement's namespace with the
/// cluster's name and region (so every cluster renders differently) on production clusters.
fn stamp_override(crp: &str, label: &str) -> Value {
    json!({
        "apiVersion": "placement.kubernetes-fleet.io/v1",
        "kind": "ClusterResourceOverride",
        "metadata": {"name": format!("{crp}-{label}")},
        "spec": {
            "placement": {"name": crp, "scope": "Cluster"},
            "clusterResourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": format!("app-{crp}")}],
            "policy": {"overrideRules": [{
                "clusterSelector": {"clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"environment": "production"}}}]},
                "overrideType": "JSONPatch",
                "jsonPatchOverrides": [
                    {"op": "add", "path": "/metadata/annotations", "value": {"fleet-member": "${MEMBER-CLUSTER-NAME}"}},
                    {"op": "add", "path": format!("/metadata/annotations/fleet-{label}"), "value": "${MEMBER-CLUSTER-LABEL-KEY-region}"},
                ],
            }]},
        },
    })
}

/// A ResourceOverride that sets the replicas of a placement's ConfigMap by tier (the same
/// rendering for every cluster of a tier).
fn tier_override(crp: &str, replicas: &str) -> Value {
    json!({
        "apiVersion": "placement.kubernetes-fleet.io/v1",
        "kind": "ResourceOverride",
        "metadata": {"name": "replicas-by-tier", "namespace": format!("app-{crp}")},
        "spec": {
            "placement": {"name": crp, "scope": "Cluster"},
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "app-config"}],
            "policy": {"overrideRules": [{
                "clusterSelector": {"clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"tier": "premium"}}}]},
                "jsonPatchOverrides": [{"op": "replace", "path": "/data/REPLICAS", "value": replicas}],
            }]},
        },
    })
}

fn manifest_work_replica_set(ocm: &Value, log_level: &str) -> Value {
    let name = ocm["metadata"]["name"].as_str().unwrap_or_default();
    let ns = ocm["metadata"]["namespace"].as_str().unwrap_or_default();
    json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "placementRefs": [{"name": name, "rolloutStrategy": {"type": "All"}}],
            "manifestWorkTemplate": {"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("work-{name}")}},
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "agent-config", "namespace": format!("work-{name}")},
                 "data": {"LOG_LEVEL": log_level}},
            ]}},
        },
    })
}

/// The base and head commits of a plan benchmark (deterministic in `spec`).
pub fn generate_plan(spec: FleetSpec) -> PlanFleet {
    let (mut base, inventory) = generate(spec);
    let mut rng = Rng::new(spec.seed ^ 0x706c_616e);
    let placements = placement_docs(&base);
    let kind_of = |docs: &[Value]| -> (String, Value) {
        let p = placement_of(docs);
        let policy = &p["spec"]["policy"];
        let kind = match (p["kind"].as_str(), policy["placementType"].as_str()) {
            (Some("Placement"), _) => "OCM",
            (Some("ResourcePlacement"), _) => "RP",
            (_, Some("PickN")) if policy.get("topologySpreadConstraints").is_some() => {
                "PickN+spread"
            }
            (_, Some("PickN")) => "PickN",
            (_, Some("PickFixed")) => "PickFixed",
            (_, _) if policy.get("affinity").is_some() => "PickAll+affinity",
            _ => "PickAll",
        };
        (kind.to_string(), p.clone())
    };
    let by_kind = |kind: &str| -> Vec<(String, Value)> {
        placements
            .iter()
            .filter_map(|(path, docs)| {
                let (k, p) = kind_of(docs);
                (k == kind).then(|| (path.clone(), p))
            })
            .collect()
    };
    let name = |p: &Value| {
        p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let share = |n: usize| (n * CHANGE_PER_MILLE).div_ceil(1000).max(1);

    // Base extras: overrides on a tenth of the PickAll placements, ManifestWorkReplicaSets for
    // half of the OCM placements.
    let pick_all: Vec<(String, Value)> = [by_kind("PickAll"), by_kind("PickAll+affinity")].concat();
    let mut overrides = Vec::new();
    for (i, (_, p)) in pick_all.iter().enumerate().filter(|(i, _)| i % 10 == 0) {
        overrides.push(stamp_override(&name(p), "region"));
        if i % 20 == 0 {
            overrides.push(tier_override(&name(p), "5"));
        }
    }
    let ocm = by_kind("OCM");
    let works: Vec<Value> = ocm
        .iter()
        .step_by(2)
        .map(|(_, p)| manifest_work_replica_set(p, "info"))
        .collect();
    if !overrides.is_empty() {
        base.push(yaml_file("overrides/generated.yaml".into(), &overrides));
    }
    if !works.is_empty() {
        base.push(yaml_file("ocm/works.yaml".into(), &works));
    }

    let mut head = base.clone();
    let mut changes = Vec::new();
    // Policies: a PickAll with affinity changes its regions.
    let affinity = by_kind("PickAll+affinity");
    for (path, _) in affinity.iter().take(share(placements.len())) {
        let regions = super::regions(&mut rng, 1, 3);
        edit(&mut head, path, |docs| {
            let p = docs
                .iter_mut()
                .find(|d| d["kind"] == "ClusterResourcePlacement")
                .expect("a CRP");
            let terms = &mut p["spec"]["policy"]["affinity"]["clusterAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["clusterSelectorTerms"];
            terms[0]["labelSelector"]["matchExpressions"] =
                json!([super::in_expr("region", &regions)]);
        });
    }
    changes.push(format!(
        "{} PickAll policies",
        share(placements.len()).min(affinity.len())
    ));
    // numberOfClusters of PickN placements, up and down.
    let pick_n = by_kind("PickN");
    for (j, (path, _)) in pick_n.iter().take(share(placements.len())).enumerate() {
        edit(&mut head, path, |docs| {
            let p = docs
                .iter_mut()
                .find(|d| d["kind"] == "ClusterResourcePlacement")
                .expect("a CRP");
            let n = &mut p["spec"]["policy"]["numberOfClusters"];
            let now = n.as_i64().unwrap_or(3);
            *n = json!(if j % 2 == 0 {
                now + 2
            } else {
                (now - 1).max(1)
            });
        });
    }
    changes.push(format!(
        "{} numberOfClusters",
        share(placements.len()).min(pick_n.len())
    ));
    // Selected resources: the ConfigMaps of some PickAll placements (the widest ones).
    let mut resources = 0;
    for (path, _) in pick_all
        .iter()
        .skip(1)
        .step_by(7)
        .take(share(placements.len()))
    {
        edit(&mut head, path, |docs| {
            for d in docs.iter_mut().filter(|d| d["kind"] == "ConfigMap") {
                d["data"]["LOG_LEVEL"] = json!("debug");
            }
        });
        resources += 1;
    }
    changes.push(format!("{resources} ConfigMaps"));
    // Overrides: a new one with cluster variables, and one changed.
    if let Some((_, p)) = pick_all.get(1) {
        let mut docs = vec![stamp_override(&name(p), "zone")];
        docs[0]["spec"]["policy"]["overrideRules"][0]["jsonPatchOverrides"][1]["value"] =
            json!("${MEMBER-CLUSTER-LABEL-KEY-topology.kubernetes.io/zone}");
        head.push(yaml_file("overrides/new.yaml".into(), &docs));
        changes.push("1 new ClusterResourceOverride".into());
    }
    if !overrides.is_empty() {
        edit(&mut head, "overrides/generated.yaml", |docs| {
            if let Some(o) = docs.iter_mut().find(|d| d["kind"] == "ResourceOverride") {
                o["spec"]["policy"]["overrideRules"][0]["jsonPatchOverrides"][0]["value"] =
                    json!("7");
            }
        });
        changes.push("1 ResourceOverride".into());
    }
    if !works.is_empty() {
        edit(&mut head, "ocm/works.yaml", |docs| {
            docs[0]["spec"]["manifestWorkTemplate"]["workload"]["manifests"][1]["data"]
                ["LOG_LEVEL"] = json!("debug");
        });
        changes.push("1 ManifestWorkReplicaSet".into());
    }
    PlanFleet {
        base,
        head,
        inventory,
        changes,
    }
}

/// One measured plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRow {
    pub placements: usize,
    pub clusters: usize,
    pub changes: Vec<String>,
    pub diagnostics: usize,
    /// `analyze` of both commits (what `gitfleet plan` does after reading them).
    pub analyze: Duration,
    /// [`plan_catalogs`]: fleets, schedules and the comparison, best of `runs`.
    pub plan: Duration,
    /// CPU time of the best run (less sensitive to other processes than `plan`).
    pub plan_cpu: Option<Duration>,
    pub runs: usize,
    /// Printing the plan: text, markdown and JSON.
    pub text: Duration,
    pub markdown: Duration,
    pub json: Duration,
    /// Baseline: both commits' fleets and schedules alone (no rendering, no comparison).
    pub baseline: Duration,
    pub placements_changed: usize,
    pub clusters_with_changes: usize,
    pub objects_changed: usize,
    pub text_bytes: usize,
    pub peak_rss_kib: Option<u64>,
}

impl PlanRow {
    /// `analyze` + `plan` + text: what `gitfleet plan --format text` computes after reading git.
    pub fn command(&self) -> Duration {
        self.analyze + self.plan + self.text
    }

    /// `analyze` + `plan` over `analyze` + baseline.
    pub fn ratio(&self) -> f64 {
        (self.analyze + self.plan).as_secs_f64()
            / (self.analyze + self.baseline).as_secs_f64().max(1e-9)
    }
}

/// The plan of a generated fleet, as `gitfleet plan` computes it.
pub fn plan_of(fleet: &PlanFleet, opts: &Options) -> Plan {
    let (base_cat, _) = gitfleet::analyze(&fleet.base);
    let (head_cat, _) = gitfleet::analyze(&fleet.head);
    let previous = Previous::new();
    plan_catalogs(
        ("base", &base_cat),
        ("head", &head_cat),
        &Inputs {
            inventory: Some(&fleet.inventory),
            previous: &previous,
            rollout: None,
            now_unix: NOW_UNIX,
        },
        opts,
    )
}

pub fn measure_plan(spec: FleetSpec, runs: usize) -> PlanRow {
    let fleet = generate_plan(spec);
    let ((base_cat, head_cat, diagnostics), analyze) = timed(|| {
        let (b, _) = gitfleet::analyze(&fleet.base);
        let (h, diags) = gitfleet::analyze(&fleet.head);
        (b, h, diags.len())
    });
    let previous = Previous::new();
    let inputs = Inputs {
        inventory: Some(&fleet.inventory),
        previous: &previous,
        rollout: None,
        now_unix: NOW_UNIX,
    };
    let opts = Options {
        clusters: vec![],
        context: 3,
    };
    let mut plan_time = Duration::MAX;
    let mut plan_cpu = None;
    let mut plan = None;
    for _ in 0..runs.max(1) {
        let cpu = thread_cpu_time();
        let (p, t) =
            timed(|| plan_catalogs(("base", &base_cat), ("head", &head_cat), &inputs, &opts));
        let cpu = cpu.zip(thread_cpu_time()).map(|(a, b)| b.saturating_sub(a));
        if t < plan_time {
            plan_time = t;
            plan_cpu = cpu;
        }
        drop(plan.replace(p));
    }
    let plan = plan.expect("at least one run");
    let (text, text_time) = timed(|| format::text(&plan, false));
    let (_, markdown) = timed(|| black_box(format::markdown(&plan, MARKDOWN_MAX_BYTES)));
    let (_, json) = timed(|| black_box(format::json(&plan)));
    let mut baseline = Duration::MAX;
    for _ in 0..runs.max(1) {
        let (_, t) = timed(|| {
            let bf = Fleet::build(&base_cat, inputs.inventory);
            let hf = Fleet::build(&head_cat, inputs.inventory);
            let bs = schedule_commit(&base_cat, &Default::default(), &bf, &previous, NOW_UNIX);
            let prev: Previous = bs.iter().map(|p| (p.key.clone(), p.clone())).collect();
            black_box(schedule_commit(
                &head_cat,
                &Default::default(),
                &hf,
                &prev,
                NOW_UNIX,
            ))
        });
        baseline = baseline.min(t);
    }
    PlanRow {
        placements: spec.placements,
        clusters: spec.clusters,
        changes: fleet.changes.clone(),
        diagnostics,
        analyze,
        plan: plan_time,
        plan_cpu,
        runs: runs.max(1),
        text: text_time,
        markdown,
        json,
        baseline,
        placements_changed: plan.summary.placements_changed,
        clusters_with_changes: plan.summary.clusters_with_manifest_changes,
        objects_changed: plan.summary.objects_added
            + plan.summary.objects_removed
            + plan.summary.objects_changed,
        text_bytes: text.len(),
        peak_rss_kib: peak_rss_kib(),
    }
}

/// What [`run_plan`] measured.
pub struct PlanReport {
    pub seed: u64,
    pub rows: Vec<PlanRow>,
}

/// Plans each size `(placements, clusters)`, smallest first, `runs` times each (best counts).
pub fn run_plan(sizes: &[(usize, usize)], runs: usize) -> PlanReport {
    let mut sizes = sizes.to_vec();
    sizes.sort_by_key(|&(p, c)| (p.saturating_mul(c), c, p));
    PlanReport {
        seed: super::DEFAULT_SEED,
        rows: sizes
            .into_iter()
            .map(|(p, c)| measure_plan(FleetSpec::new(p, c), runs))
            .collect(),
    }
}

impl fmt::Display for PlanReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>10} {:>8} {:>9} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>10}",
            "placements",
            "clusters",
            "analyze",
            "plan",
            "plan cpu",
            "text",
            "markdown",
            "json",
            "command",
            "baseline",
            "ratio",
            "peak RSS",
        )?;
        for r in &self.rows {
            let rss = r
                .peak_rss_kib
                .map_or("?".to_string(), |k| format!("{} MiB", k / 1024));
            writeln!(
                f,
                "{:>10} {:>8} {:>9} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6.2}x {:>10}",
                r.placements,
                r.clusters,
                secs(r.analyze),
                format!("{} ({}x)", secs(r.plan), r.runs),
                r.plan_cpu.map_or("?".into(), secs),
                secs(r.text),
                secs(r.markdown),
                secs(r.json),
                secs(r.command()),
                secs(r.baseline),
                r.ratio(),
                rss,
            )?;
            writeln!(
                f,
                "{:>10} head changes: {}; plan: {} placements changed, {} clusters with manifest \
                 changes, {} object changes, {} bytes of text",
                "",
                r.changes.join(", "),
                r.placements_changed,
                r.clusters_with_changes,
                r.objects_changed,
                r.text_bytes,
            )?;
            if r.diagnostics > 0 {
                writeln!(
                    f,
                    "{:>10} warning: the generated head has {} diagnostics",
                    "", r.diagnostics
                )?;
            }
        }
        writeln!(f)?;
        write!(
            f,
            "seed {:#x}; analyze = both commits; plan = plan::plan_catalogs (fleets, schedules, \
             rendering and comparison), best of the runs shown, and the CPU time of that run; command = analyze + plan + text, \
             what `gitfleet plan` computes after reading git; baseline = both fleets and schedules \
             alone, best of the same runs; ratio = (analyze + plan) / (analyze + baseline); peak \
             RSS is VmHWM, process-wide, sizes measured smallest first.",
            self.seed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_commits_validate_and_the_head_changes_the_fleet() {
        let fleet = generate_plan(FleetSpec::new(60, 40));
        let (_, base_diags) = gitfleet::analyze(&fleet.base);
        let (_, head_diags) = gitfleet::analyze(&fleet.head);
        assert!(base_diags.is_empty(), "{base_diags:#?}");
        assert!(head_diags.is_empty(), "{head_diags:#?}");
        let plan = plan_of(
            &fleet,
            &Options {
                clusters: vec![],
                context: 3,
            },
        );
        assert!(plan.errors.is_empty());
        assert!(plan.summary.placements_changed > 0, "{:#?}", plan.summary);
        assert!(plan.summary.objects_changed > 0, "{:#?}", plan.summary);
        assert_eq!(plan.summary.render_errors, 0, "{:#?}", plan.clusters);
    }

    #[test]
    fn run_plan_on_a_tiny_fleet_gives_sane_numbers() {
        let report = run_plan(&[(30, 20)], 1);
        let r = &report.rows[0];
        assert_eq!(r.diagnostics, 0);
        assert!(r.ratio().is_finite() && r.ratio() > 0.0);
        assert!(r.text_bytes > 0);
        assert!(report.to_string().contains("plan_catalogs"));
    }
}

/// Writes the schedules and plans of a few generated fleets to `$GITFLEET_DUMP_DIR`, so a change
/// meant to be performance-only can be checked byte for byte against the code before it:
/// `GITFLEET_DUMP_DIR=/tmp/before cargo test --release --lib dump_outputs -- --ignored`, again
/// after the change into another folder, then `diff -r`.
#[cfg(test)]
mod dump {
    use super::*;

    #[test]
    #[ignore = "a tool: writes files for a before/after comparison"]
    fn dump_outputs() {
        let dir = std::path::PathBuf::from(
            std::env::var("GITFLEET_DUMP_DIR").expect("GITFLEET_DUMP_DIR names a folder"),
        );
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: String, text: String| std::fs::write(dir.join(name), text).unwrap();
        for (seed, placements, clusters) in
            [(1, 120, 150), (2, 200, 80), (3, 60, 400), (4, 300, 1000)]
        {
            let spec = FleetSpec {
                clusters,
                placements,
                seed,
            };
            let fleet = generate_plan(spec);
            let (base_cat, _) = gitfleet::analyze(&fleet.base);
            let (head_cat, _) = gitfleet::analyze(&fleet.head);
            let bf = Fleet::build(&base_cat, Some(&fleet.inventory));
            let hf = Fleet::build(&head_cat, Some(&fleet.inventory));
            let bs = schedule_commit(
                &base_cat,
                &Default::default(),
                &bf,
                &Previous::new(),
                NOW_UNIX,
            );
            let prev: Previous = bs.iter().map(|p| (p.key.clone(), p.clone())).collect();
            let hs = schedule_commit(&head_cat, &Default::default(), &hf, &prev, NOW_UNIX);
            // The head's schedule again from its own result: nothing changes, downscale paths.
            let prev2: Previous = hs.iter().map(|p| (p.key.clone(), p.clone())).collect();
            let again = schedule_commit(&base_cat, &Default::default(), &bf, &prev2, NOW_UNIX);
            let tag = format!("s{seed}-{placements}x{clusters}");
            let pretty = |v: &dyn erased::Json| v.json();
            write(format!("{tag}-schedule-base.json"), pretty(&bs));
            write(format!("{tag}-schedule-head.json"), pretty(&hs));
            write(format!("{tag}-schedule-back.json"), pretty(&again));
            let previous = Previous::new();
            let inputs = Inputs {
                inventory: Some(&fleet.inventory),
                previous: &previous,
                rollout: None,
                now_unix: NOW_UNIX,
            };
            for (variant, opts) in [
                (
                    "all",
                    Options {
                        clusters: vec![],
                        context: 3,
                    },
                ),
                (
                    "some",
                    Options {
                        clusters: bf
                            .clusters
                            .iter()
                            .step_by(7)
                            .map(|c| c.name.to_string())
                            .collect(),
                        context: 1,
                    },
                ),
            ] {
                let plan = plan_catalogs(("base", &base_cat), ("head", &head_cat), &inputs, &opts);
                write(format!("{tag}-plan-{variant}.json"), format::json(&plan));
                write(
                    format!("{tag}-plan-{variant}.txt"),
                    format::text(&plan, true),
                );
                for max in [4_000, 60_000, usize::MAX] {
                    write(
                        format!("{tag}-plan-{variant}-{max}.md"),
                        format::markdown(&plan, max),
                    );
                }
            }
            // The plan the other way round: removals, losses.
            let plan = plan_catalogs(
                ("head", &head_cat),
                ("base", &base_cat),
                &inputs,
                &Options {
                    clusters: vec![],
                    context: 3,
                },
            );
            write(format!("{tag}-plan-reverse.json"), format::json(&plan));
        }
    }

    mod erased {
        pub trait Json {
            fn json(&self) -> String;
        }
        impl<T: serde::Serialize> Json for T {
            fn json(&self) -> String {
                serde_json::to_string_pretty(self).unwrap()
            }
        }
    }
}
