//! Synthetic fleets and the scheduler benchmark. A tool, like `sim`: [`generate`] writes the files
//! of one commit and a live inventory for a fleet of any size, deterministically from a seed;
//! [`run`] schedules such fleets with [`gitfleet::schedule::schedule_commit`] and compares the time
//! with a baseline that only evaluates the placements' label selectors once per cluster.
//! It reads the clock and `/proc/self/status`, so no core module may call it; it knows the
//! scheduler only through `schedule_commit` and the catalog's typed placements.

use gitfleet::catalog::{Catalog, SourceFile};
use gitfleet::model::placement::PlacementType;
use gitfleet::model::selector::LabelSelector;
use gitfleet::schedule::{schedule_commit, Fleet, Inventory, InventoryCluster, Previous};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::hint::black_box;
use std::time::{Duration, Instant};

pub mod git;
pub mod manifest;
pub mod plan;

/// The seed [`run`] uses, so every report measures the same fleets.
pub const DEFAULT_SEED: u64 = 0x6769_7466_6c65_6574;
/// The scheduler's clock in [`run`]: 2026-02-01T00:00:00Z (after every generated `timeAdded`).
pub const NOW_UNIX: i64 = 1_769_904_000;
/// Sizes (placements × clusters) up to this many pairs are scheduled three times (best counts);
/// larger ones once.
const REPEAT_LIMIT: usize = 2_000_000;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetSpec {
    pub clusters: usize,
    pub placements: usize,
    pub seed: u64,
}

impl FleetSpec {
    pub fn new(placements: usize, clusters: usize) -> Self {
        Self {
            clusters,
            placements,
            seed: DEFAULT_SEED,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Generator
// ---------------------------------------------------------------------------------------------

/// xorshift64*, seeded through splitmix64 (so seeds 0, 1, 2… give unrelated streams).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is negligible for these small `n`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// `k` distinct items of `items`, in their original order.
    fn subset<'a, T>(&mut self, items: &'a [T], k: usize) -> Vec<&'a T> {
        let mut idx: Vec<usize> = (0..items.len()).collect();
        for i in 0..k.min(idx.len()) {
            let j = i + self.below(idx.len() - i);
            idx.swap(i, j);
        }
        idx.truncate(k.min(items.len()));
        idx.sort_unstable();
        idx.into_iter().map(|i| &items[i]).collect()
    }
}

const REGIONS: &[&str] = &[
    "eastus",
    "westus2",
    "westeurope",
    "northeurope",
    "southeastasia",
    "japaneast",
];
/// `(label value, name part, share in percent)`.
const ENVIRONMENTS: &[(&str, &str, usize)] = &[
    ("staging", "stg", 20),
    ("canary", "can", 10),
    ("production", "prod", 70),
];
const TIERS: &[(&str, usize)] = &[("basic", 15), ("standard", 60), ("premium", 25)];
const TEAMS: usize = 12;
const TAINT_VALUES: &[&str] = &["pci", "gpu"];
/// OCM cluster sets: one per environment (exclusive cluster-set label).
const CLUSTER_SETS: &[&str] = &["staging", "canary", "production"];
const OCM_NAMESPACES: usize = 4;
const TAINT_TIME: &str = "2026-01-15T00:00:00Z";

const NODE_COUNT: &str = "kubernetes-fleet.io/node-count";
const ALLOCATABLE_CPU: &str = "resources.kubernetes-fleet.io/allocatable-cpu";
const AVAILABLE_CPU: &str = "resources.kubernetes-fleet.io/available-cpu";
const ALLOCATABLE_MEMORY: &str = "resources.kubernetes-fleet.io/allocatable-memory";
const AVAILABLE_MEMORY: &str = "resources.kubernetes-fleet.io/available-memory";
const CPU_COST: &str = "kubernetes.azure.com/per-cpu-core-cost";
const COST_TIER: &str = "example.com/cost-tier";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const CLUSTER_SET_LABEL: &str = gitfleet::model::member::CLUSTER_SET_LABEL;

fn weighted<'a, T>(rng: &mut Rng, items: &'a [T], share: impl Fn(&T) -> usize) -> &'a T {
    let total: usize = items.iter().map(&share).sum();
    let mut roll = rng.below(total);
    for item in items {
        let s = share(item);
        if roll < s {
            return item;
        }
        roll -= s;
    }
    &items[items.len() - 1]
}

fn yaml_file(path: String, docs: &[Value]) -> SourceFile {
    let text = docs
        .iter()
        .map(|d| gitfleet::yaml::to_string(d).expect("JSON values serialise as YAML"))
        .collect::<Vec<_>>()
        .join("---\n");
    SourceFile {
        path,
        content: text.into_bytes(),
    }
}

/// The files of one commit (members, OCM sets and bindings, application namespaces, placements)
/// and the live inventory of its clusters. The same spec always gives the same output, and the
/// commit validates with no diagnostic.
pub fn generate(spec: FleetSpec) -> (Vec<SourceFile>, Inventory) {
    let mut rng = Rng::new(spec.seed);
    let mut files = Vec::new();
    let mut inventory = Inventory::default();
    let mut clusters = Vec::with_capacity(spec.clusters);
    for i in 0..spec.clusters {
        let region = *rng.pick(REGIONS);
        let (env, env_part, _) = *weighted(&mut rng, ENVIRONMENTS, |e| e.2);
        let (tier, _) = *weighted(&mut rng, TIERS, |t| t.1);
        let zone = format!("{region}-{}", rng.range(1, 3));
        let team = format!("team-{:02}", rng.below(TEAMS));
        let taint = rng.percent(3).then(|| *rng.pick(TAINT_VALUES));
        let name = format!("{region}-{env_part}-{i:05}");
        let labels: BTreeMap<String, String> = [
            ("region", region.to_string()),
            ("environment", env.to_string()),
            ("tier", tier.to_string()),
            (ZONE_LABEL, zone),
            ("team", team),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let cost_tier = match tier {
            "basic" => 1,
            "standard" => 2,
            _ => 3,
        };
        let mut member = json!({
            "apiVersion": "cluster.kubernetes-fleet.io/v1",
            "kind": "MemberCluster",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {"gitfleet.io/properties": json!({ COST_TIER: cost_tier.to_string() }).to_string()},
            },
            "spec": {
                "identity": {
                    "name": format!("fleet-member-agent-{name}"),
                    "kind": "ServiceAccount",
                    "namespace": "fleet-system",
                    "apiGroup": "",
                },
                "heartbeatPeriodSeconds": 60,
            },
        });
        let mut ocm_labels = labels.clone();
        ocm_labels.insert(CLUSTER_SET_LABEL.into(), env.to_string());
        let mut managed = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {"name": name, "labels": ocm_labels},
            "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60},
        });
        if let Some(value) = taint {
            member["spec"]["taints"] =
                json!([{"key": "dedicated", "value": value, "effect": "NoSchedule"}]);
            managed["spec"]["taints"] = json!([{
                "key": "dedicated", "value": value, "effect": "NoSelect", "timeAdded": TAINT_TIME,
            }]);
        }
        files.push(yaml_file(format!("members/{name}.yaml"), &[member]));
        files.push(yaml_file(format!("ocm/clusters/{name}.yaml"), &[managed]));

        let nodes = rng.range(2, 40);
        let cores = *rng.pick(&[4i64, 8, 16, 32]);
        let allocatable_cpu = nodes * cores;
        let available_cpu = allocatable_cpu * rng.range(5, 90) / 100;
        let allocatable_gib = allocatable_cpu * 4;
        let available_gib = allocatable_gib * rng.range(5, 90) / 100;
        let cost = format!("0.{:03}", rng.range(20, 120));
        let healthy = !rng.percent(1);
        let properties: BTreeMap<String, String> = [
            (NODE_COUNT, nodes.to_string()),
            (ALLOCATABLE_CPU, allocatable_cpu.to_string()),
            (AVAILABLE_CPU, available_cpu.to_string()),
            (ALLOCATABLE_MEMORY, format!("{allocatable_gib}Gi")),
            (AVAILABLE_MEMORY, format!("{available_gib}Gi")),
            (CPU_COST, cost),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let add_on_scores: BTreeMap<String, i64> = [
            ("cpuratio".to_string(), rng.range(-100, 100)),
            ("memratio".to_string(), rng.range(-100, 100)),
        ]
        .into_iter()
        .collect();
        inventory
            .clusters
            .push(std::sync::Arc::new(InventoryCluster {
                name: name.clone(),
                healthy,
                error: (!healthy).then(|| "connection refused".to_string()),
                properties,
                add_on_scores,
                namespaces: None,
                namespace_collection_degraded: false,
            }));
        clusters.push(name);
    }

    files.push(yaml_file(
        "ocm/clustersets.yaml".into(),
        &CLUSTER_SETS
            .iter()
            .map(|set| {
                json!({
                    "apiVersion": "cluster.open-cluster-management.io/v1beta2",
                    "kind": "ManagedClusterSet",
                    "metadata": {"name": set},
                    "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}},
                })
            })
            .collect::<Vec<_>>(),
    ));
    for k in 0..OCM_NAMESPACES {
        let ns = format!("ocm-apps-{k}");
        let mut docs = vec![json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"app.kubernetes.io/part-of": "ocm"}},
        })];
        // The first namespace sees production only; the others every set.
        let sets: &[&str] = if k == 0 {
            &["production"]
        } else {
            CLUSTER_SETS
        };
        docs.extend(sets.iter().map(|set| {
            json!({
                "apiVersion": "cluster.open-cluster-management.io/v1beta2",
                "kind": "ManagedClusterSetBinding",
                "metadata": {"name": set, "namespace": ns},
                "spec": {"clusterSet": set},
            })
        }));
        files.push(yaml_file(format!("ocm/{ns}.yaml"), &docs));
    }

    for i in 0..spec.placements {
        let kind = PLACEMENT_MIX[i % PLACEMENT_MIX.len()];
        let (path, docs) = placement(&mut rng, kind, i, &clusters);
        files.push(yaml_file(path, &docs));
    }
    (files, inventory)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// PickAll without affinity (half of them tolerating the dedicated taints).
    PickAll,
    /// PickAll with required affinity and, mostly, a toleration.
    PickAllAffinity,
    /// PickN with required label and property affinity and preferred affinity.
    PickN,
    /// PickN (3 to 5) spread over regions.
    PickNSpread,
    PickFixed,
    /// A namespaced ResourcePlacement.
    ResourcePlacement,
    Ocm,
}

/// The mix of placements, repeated: 20 % OCM, 25 % PickAll, 20 % PickN, 15 % spread PickN,
/// 15 % PickFixed, 5 % ResourcePlacement.
const PLACEMENT_MIX: &[Kind] = &[
    Kind::PickAll,
    Kind::PickN,
    Kind::Ocm,
    Kind::PickNSpread,
    Kind::PickFixed,
    Kind::PickAllAffinity,
    Kind::PickN,
    Kind::Ocm,
    Kind::PickAll,
    Kind::PickNSpread,
    Kind::ResourcePlacement,
    Kind::PickFixed,
    Kind::Ocm,
    Kind::PickAllAffinity,
    Kind::PickN,
    Kind::PickNSpread,
    Kind::Ocm,
    Kind::PickAllAffinity,
    Kind::PickFixed,
    Kind::PickN,
];

fn in_expr(key: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": "In", "values": values})
}

fn regions(rng: &mut Rng, lo: usize, hi: usize) -> Vec<&'static str> {
    let k = rng.range(lo as i64, hi as i64) as usize;
    rng.subset(REGIONS, k).into_iter().copied().collect()
}

fn toleration(rng: &mut Rng) -> Value {
    if rng.percent(50) {
        json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"})
    } else {
        json!({"key": "dedicated", "operator": "Equal", "value": rng.pick(TAINT_VALUES), "effect": "NoSchedule"})
    }
}

/// The namespace and ConfigMap a KubeFleet placement deploys.
fn app(name: &str, i: usize) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": name}},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "app-config", "namespace": name},
            "data": {"REPLICAS": (1 + i % 5).to_string(), "LOG_LEVEL": "info"},
        }),
    ]
}

fn crp(name: &str, policy: Value) -> Value {
    json!({
        "apiVersion": "placement.kubernetes-fleet.io/v1",
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": format!("app-{name}")}],
            "policy": policy,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
        },
    })
}

/// One placement: its file path and documents (with what it deploys, for KubeFleet placements).
fn placement(rng: &mut Rng, kind: Kind, i: usize, clusters: &[String]) -> (String, Vec<Value>) {
    let name = match kind {
        Kind::Ocm => format!("ocm-{i:05}"),
        Kind::ResourcePlacement => format!("rp-{i:05}"),
        _ => format!("crp-{i:05}"),
    };
    let mut docs = match kind {
        Kind::Ocm | Kind::ResourcePlacement => vec![],
        _ => app(&format!("app-{name}"), i),
    };
    match kind {
        Kind::PickAll => {
            let mut policy = json!({"placementType": "PickAll"});
            if rng.percent(50) {
                policy["tolerations"] = json!([toleration(rng)]);
            }
            docs.push(crp(&name, policy));
        }
        Kind::PickAllAffinity => {
            let mut terms = vec![json!({"labelSelector": {
                "matchLabels": {"environment": "production"},
                "matchExpressions": [in_expr("region", &regions(rng, 2, 4))],
            }})];
            if rng.percent(40) {
                terms.push(json!({"labelSelector": {"matchExpressions": [
                    in_expr("environment", &["canary"]),
                    in_expr("tier", &["standard", "premium"]),
                ]}}));
            }
            let mut policy = json!({
                "placementType": "PickAll",
                "affinity": {"clusterAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "clusterSelectorTerms": terms,
                }}},
            });
            if rng.percent(70) {
                policy["tolerations"] = json!([toleration(rng)]);
            }
            docs.push(crp(&name, policy));
        }
        Kind::PickN => {
            let mut preferred = vec![
                json!({"weight": 40, "preference": {"labelSelector": {"matchLabels": {"tier": "premium"}}}}),
                json!({"weight": 60, "preference": {"propertySorter": {"name": AVAILABLE_CPU, "sortOrder": "Descending"}}}),
            ];
            if rng.percent(50) {
                preferred.push(json!({"weight": 30, "preference": {"propertySorter": {"name": CPU_COST, "sortOrder": "Ascending"}}}));
            }
            if rng.percent(30) {
                let avoid = *rng.pick(REGIONS);
                preferred.push(json!({"weight": -20, "preference": {"labelSelector": {"matchExpressions": [in_expr("region", &[avoid])]}}}));
            }
            let policy = json!({
                "placementType": "PickN",
                "numberOfClusters": rng.range(3, 10),
                "affinity": {"clusterAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [{
                        "labelSelector": {"matchExpressions": [
                            in_expr("environment", &["canary", "production"]),
                            {"key": "tier", "operator": "NotIn", "values": ["basic"]},
                        ]},
                        "propertySelector": {"matchExpressions": [
                            {"name": NODE_COUNT, "operator": "Ge", "values": [rng.range(3, 8).to_string()]},
                            {"name": AVAILABLE_CPU, "operator": "Gt", "values": [rng.range(8, 32).to_string()]},
                        ]},
                    }]},
                    "preferredDuringSchedulingIgnoredDuringExecution": preferred,
                }},
            });
            docs.push(crp(&name, policy));
        }
        Kind::PickNSpread => {
            let when = if rng.percent(75) {
                "DoNotSchedule"
            } else {
                "ScheduleAnyway"
            };
            let policy = json!({
                "placementType": "PickN",
                "numberOfClusters": rng.range(3, 5),
                "affinity": {"clusterAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [{
                        "labelSelector": {"matchLabels": {"environment": "production"}},
                    }]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 20, "preference": {"labelSelector": {"matchLabels": {"tier": "premium"}}}},
                        {"weight": 50, "preference": {"propertySorter": {"name": AVAILABLE_MEMORY, "sortOrder": "Descending"}}},
                    ],
                }},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "region", "whenUnsatisfiable": when}],
            });
            docs.push(crp(&name, policy));
        }
        Kind::PickFixed => {
            let k = rng.range(3, 5) as usize;
            let names: Vec<&str> = rng
                .subset(clusters, k)
                .into_iter()
                .map(String::as_str)
                .collect();
            let policy = json!({"placementType": "PickFixed", "clusterNames": names});
            docs.push(crp(&name, policy));
        }
        Kind::ResourcePlacement => {
            let ns = format!("app-{name}");
            docs.extend(app(&ns, i));
            let policy = if rng.percent(50) {
                json!({
                    "placementType": "PickAll",
                    "affinity": {"clusterAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "clusterSelectorTerms": [{"propertySelector": {"matchExpressions": [
                            {"name": COST_TIER, "operator": "Ge", "values": ["2"]},
                        ]}}],
                    }}},
                })
            } else {
                json!({
                    "placementType": "PickN",
                    "numberOfClusters": 2,
                    "affinity": {"clusterAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "clusterSelectorTerms": [{"labelSelector": {"matchExpressions": [
                            in_expr("environment", &["staging"]),
                        ]}}],
                    }}},
                })
            };
            docs.push(json!({
                "apiVersion": "placement.kubernetes-fleet.io/v1",
                "kind": "ResourcePlacement",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "app-config"}],
                    "policy": policy,
                    "strategy": {"type": "RollingUpdate"},
                },
            }));
        }
        Kind::Ocm => docs.push(ocm_placement(rng, &name)),
    }
    let dir = match kind {
        Kind::Ocm => "ocm/placements",
        _ => "placements",
    };
    (format!("{dir}/{name}.yaml"), docs)
}

fn ocm_placement(rng: &mut Rng, name: &str) -> Value {
    let k = rng.below(OCM_NAMESPACES);
    let ns = format!("ocm-apps-{k}");
    let mut predicates = vec![json!({"requiredClusterSelector": {"labelSelector": {
        "matchExpressions": [in_expr("region", &regions(rng, 2, 4))],
    }}})];
    if rng.percent(40) {
        predicates.push(json!({"requiredClusterSelector": {"labelSelector": {
            "matchLabels": {"tier": "premium"},
        }}}));
    }
    let mut configurations = vec![json!({
        "scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"},
        "weight": rng.range(1, 3),
    })];
    if rng.percent(60) {
        configurations.push(json!({
            "scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "resource-usage-score", "scoreName": rng.pick(&["cpuratio", "memratio"])}},
            "weight": rng.range(1, 2),
        }));
    }
    if rng.percent(30) {
        configurations.push(json!({
            "scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableMemory"},
            "weight": 1,
        }));
    }
    let mut spec = json!({
        "predicates": predicates,
        "prioritizerPolicy": {
            "mode": if rng.percent(50) { "Additive" } else { "Exact" },
            "configurations": configurations,
        },
    });
    if k != 0 && rng.percent(60) {
        let sets: Vec<&str> = if rng.percent(50) {
            vec!["production"]
        } else {
            vec!["canary", "production"]
        };
        spec["clusterSets"] = json!(sets);
    }
    if rng.percent(80) {
        spec["numberOfClusters"] = json!(rng.range(3, 20));
    }
    if rng.percent(30) {
        spec["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
    }
    if rng.percent(30) {
        spec["decisionStrategy"] = json!({"groupStrategy": {
            "decisionGroups": [{"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"environment": "canary"}}}}],
            "clustersPerDecisionGroup": "25%",
        }});
    }
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

// ---------------------------------------------------------------------------------------------
// Benchmark
// ---------------------------------------------------------------------------------------------

/// One measured size.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub placements: usize,
    pub clusters: usize,
    /// Objects in the generated commit.
    pub objects: usize,
    /// Diagnostics of the generated commit (0 unless the generator is wrong).
    pub diagnostics: usize,
    pub generate: Duration,
    /// `analyze`: parsing, validation and resource selection.
    pub analyze: Duration,
    /// `Fleet::build`.
    pub fleet: Duration,
    /// `schedule_commit` with no previous state, best of `schedule_runs`.
    pub schedule: Duration,
    /// CPU time of the best schedule run (less sensitive to other processes).
    pub schedule_cpu: Option<Duration>,
    pub schedule_runs: usize,
    /// The baseline (label selectors of every placement over every cluster, once), best of 3.
    pub baseline: Duration,
    /// Selector matches the baseline counted.
    pub baseline_matches: usize,
    /// Placement results `schedule_commit` returned.
    pub results: usize,
    /// Selected clusters over all placements.
    pub selected: usize,
    /// Decision lines over all placements.
    pub decisions: usize,
    /// `VmHWM` after this size: the process's peak resident memory so far, in KiB.
    pub peak_rss_kib: Option<u64>,
    /// `schedule_commit` over each kind of placement alone (one run each): where the time goes.
    pub by_policy: Vec<PolicyTime>,
    /// The daemon's reconcile decision over the schedule (first commit, empty state), once,
    /// after everything else (`peak_rss_kib` is read before it): its time and the work items
    /// it produced. `None` above `REPEAT_LIMIT` pairs.
    pub reconcile: Option<(Duration, usize)>,
}

/// The time of scheduling only the placements of one policy kind.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyTime {
    /// `PickAll`, `PickAll+affinity`, `PickN`, `PickN+spread`, `PickFixed` or `OCM`.
    pub policy: &'static str,
    pub placements: usize,
    pub time: Duration,
}

impl Row {
    /// Schedule time over baseline time.
    pub fn ratio(&self) -> f64 {
        self.schedule.as_secs_f64() / self.baseline.as_secs_f64().max(1e-9)
    }
}

/// What [`run`] measured, one row per size, smallest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub seed: u64,
    pub rows: Vec<Row>,
}

/// Generates, analyses and schedules each size `(placements, clusters)`, smallest first (so the
/// process-wide peak memory of a row is that of its size, not of a larger one measured before).
pub fn run(sizes: &[(usize, usize)]) -> Report {
    let mut sizes = sizes.to_vec();
    sizes.sort_by_key(|&(p, c)| (p.saturating_mul(c), c, p));
    let rows = sizes
        .into_iter()
        .map(|(placements, clusters)| measure(FleetSpec::new(placements, clusters)))
        .collect();
    Report {
        seed: DEFAULT_SEED,
        rows,
    }
}

/// `"100x100,1000x1000"` → `[(100, 100), (1000, 1000)]` (placements × clusters), for the
/// benchmarks' `GITFLEET_BENCH_SIZES`.
pub fn parse_sizes(text: &str) -> Result<Vec<(usize, usize)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (p, c) = s
                .split_once(['x', 'X'])
                .ok_or_else(|| format!("{s:?}: expected PLACEMENTSxCLUSTERS, e.g. 1000x1000"))?;
            let number = |n: &str| {
                n.trim()
                    .replace('_', "")
                    .parse::<usize>()
                    .map_err(|e| format!("{s:?}: {n:?} is not a count: {e}"))
            };
            Ok((number(p)?, number(c)?))
        })
        .collect()
}

/// The sizes of `GITFLEET_BENCH_SIZES`, or `default` when it is not set.
pub fn sizes_from_env(default: &[(usize, usize)]) -> Result<Vec<(usize, usize)>, String> {
    match std::env::var("GITFLEET_BENCH_SIZES") {
        Ok(text) => match parse_sizes(&text) {
            Ok(sizes) if !sizes.is_empty() => Ok(sizes),
            Ok(_) => Err("GITFLEET_BENCH_SIZES names no size".into()),
            Err(e) => Err(format!("GITFLEET_BENCH_SIZES: {e}")),
        },
        Err(_) => Ok(default.to_vec()),
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

fn measure(spec: FleetSpec) -> Row {
    let ((files, inventory), generate) = timed(|| generate(spec));
    let ((cat, diags), analyze) = timed(|| gitfleet::analyze(&files));
    drop(files);
    let (fleet, fleet_time) = timed(|| Fleet::build(&cat, Some(&inventory)));
    drop(inventory);
    let previous = Previous::new();

    let runs = if spec.placements.saturating_mul(spec.clusters) <= REPEAT_LIMIT {
        3
    } else {
        1
    };
    let mut schedule = Duration::MAX;
    let mut schedule_cpu = None;
    let mut counts = (0, 0, 0);
    for _ in 0..runs {
        let cpu = thread_cpu_time();
        let (out, t) =
            timed(|| schedule_commit(&cat, &Default::default(), &fleet, &previous, NOW_UNIX));
        if t < schedule {
            schedule = t;
            schedule_cpu = cpu.zip(thread_cpu_time()).map(|(a, b)| b.saturating_sub(a));
        }
        counts = (
            out.len(),
            out.iter().map(|p| p.selected.len()).sum(),
            out.iter().map(|p| p.decisions.len()).sum(),
        );
        drop(out);
    }
    let mut baseline_time = Duration::MAX;
    let mut baseline_matches = 0;
    for _ in 0..3 {
        let (m, t) = timed(|| baseline(black_box(&cat), black_box(&fleet)));
        baseline_time = baseline_time.min(t);
        baseline_matches = m;
    }
    let by_policy = by_policy(&cat, &fleet, &previous);
    // Before the reconcile below, whose work items (manifests per cluster) dwarf the schedule.
    let peak_rss_kib = peak_rss_kib();
    // What the daemon does next with the schedule: render every selected cluster and decide
    // the first rollout step.
    // Its work items hold every cluster's manifests, so it is measured on the smaller sizes only.
    let reconcile = (spec.placements.saturating_mul(spec.clusters) <= REPEAT_LIMIT).then(|| {
        let out = schedule_commit(&cat, &Default::default(), &fleet, &previous, NOW_UNIX);
        let state = gitfleet::rollout::RolloutState::default();
        let unreachable = BTreeMap::new();
        let input = gitfleet::rollout::Input {
            cat: &cat,
            commit: "bench",
            schedule: &out,
            fleet: &fleet,
            unreachable: &unreachable,
            only: None,
            now: 0,
            staged: Default::default(),
            selected: None,
        };
        let (decision, time) =
            timed(|| gitfleet::rollout::step(&input, &state, gitfleet::rollout::Pacing::Rolling));
        (time, decision.work.len())
    });
    Row {
        placements: spec.placements,
        clusters: spec.clusters,
        objects: cat.objects.len(),
        diagnostics: diags.len(),
        generate,
        analyze,
        fleet: fleet_time,
        schedule,
        schedule_cpu,
        schedule_runs: runs,
        baseline: baseline_time,
        baseline_matches,
        results: counts.0,
        selected: counts.1,
        decisions: counts.2,
        peak_rss_kib,
        by_policy,
        reconcile,
    }
}

/// The policy kind a KubeFleet placement is counted under in [`Row::by_policy`].
fn policy_kind(p: &gitfleet::model::placement::Placement) -> &'static str {
    let policy = p.spec.policy_or_default();
    let required = policy
        .affinity
        .as_ref()
        .and_then(|a| a.cluster_affinity.as_ref())
        .is_some_and(|a| {
            a.required_during_scheduling_ignored_during_execution
                .is_some()
        });
    match policy.placement_type {
        PlacementType::PickFixed => "PickFixed",
        PlacementType::PickAll if required => "PickAll+affinity",
        PlacementType::PickAll => "PickAll",
        PlacementType::PickN if !policy.topology_spread_constraints.is_empty() => "PickN+spread",
        PlacementType::PickN => "PickN",
    }
}

/// Schedules the placements of each policy kind on their own, once.
fn by_policy(cat: &Catalog, fleet: &Fleet, previous: &Previous) -> Vec<PolicyTime> {
    const KINDS: &[&str] = &[
        "PickAll",
        "PickAll+affinity",
        "PickN",
        "PickN+spread",
        "PickFixed",
        "OCM",
    ];
    let mut part = cat.clone();
    KINDS
        .iter()
        .map(|&kind| {
            if kind == "OCM" {
                part.placements.clear();
                part.ocm_placements = cat.ocm_placements.clone();
            } else {
                part.ocm_placements.clear();
                part.placements = cat
                    .placements
                    .iter()
                    .filter(|p| policy_kind(&p.spec) == kind)
                    .cloned()
                    .collect();
            }
            let placements = part.placements.len() + part.ocm_placements.len();
            let (out, time) =
                timed(|| schedule_commit(&part, &Default::default(), fleet, previous, NOW_UNIX));
            drop(out);
            PolicyTime {
                policy: kind,
                placements,
                time,
            }
        })
        .collect()
}

/// The least any scheduler must do: evaluate each placement's label selectors over each cluster
/// once. KubeFleet placements: the required terms' label selectors (any may match) and each
/// preferred term's; a PickAll without selectors counts one trivial match per cluster. OCM
/// placements: the predicates' label selectors (any may match) over the managed clusters.
pub fn baseline(cat: &Catalog, fleet: &Fleet) -> usize {
    let mut matches = 0;
    for e in &cat.placements {
        let policy = e.spec.spec.policy.as_ref();
        let affinity = policy
            .and_then(|p| p.affinity.as_ref())
            .and_then(|a| a.cluster_affinity.as_ref());
        let required: Vec<&LabelSelector> = affinity
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|r| {
                r.cluster_selector_terms
                    .iter()
                    .filter_map(|t| t.label_selector.as_ref())
                    .collect()
            })
            .unwrap_or_default();
        let preferred: Vec<&LabelSelector> = affinity
            .map(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .iter()
                    .filter_map(|p| p.preference.label_selector.as_ref())
                    .collect()
            })
            .unwrap_or_default();
        let members = fleet.clusters.iter().filter(|c| c.fleet_member);
        if required.is_empty() && preferred.is_empty() {
            let pick_all = policy.is_none_or(|p| p.placement_type == PlacementType::PickAll);
            if pick_all {
                matches += members
                    .map(|c| usize::from(black_box(c).fleet_member))
                    .sum::<usize>();
            }
            continue;
        }
        for c in members {
            if required.iter().any(|s| s.matches(&c.labels)) {
                matches += 1;
            }
            matches += preferred.iter().filter(|s| s.matches(&c.labels)).count();
        }
    }
    for e in &cat.ocm_placements {
        let predicates = &e.spec.spec.predicates;
        for c in fleet.clusters.iter().filter(|c| c.ocm_member) {
            let hit = predicates.is_empty()
                || predicates.iter().any(|p| {
                    p.required_cluster_selector
                        .label_selector
                        .matches(&c.labels)
                });
            matches += usize::from(hit);
        }
    }
    matches
}

/// CPU time (user + system) of the calling thread so far (Linux, 10 ms resolution: USER_HZ
/// is 100); `None` where `/proc` is absent. On a shared machine it moves less than the clock.
pub fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// `VmHWM` of this process in KiB (Linux); `None` where `/proc` is absent.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 10.0 {
        format!("{s:.1} s")
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>10} {:>8} {:>7} {:>9} {:>9} {:>8} {:>14} {:>9} {:>9} {:>7} {:>9} {:>9} {:>10}",
            "placements",
            "clusters",
            "objects",
            "generate",
            "analyze",
            "fleet",
            "schedule",
            "sched cpu",
            "baseline",
            "ratio",
            "selected",
            "decisions",
            "peak RSS",
        )?;
        for r in &self.rows {
            let schedule = format!("{} ({}x)", secs(r.schedule), r.schedule_runs);
            let rss = r
                .peak_rss_kib
                .map_or("?".to_string(), |k| format!("{} MiB", k / 1024));
            writeln!(
                f,
                "{:>10} {:>8} {:>7} {:>9} {:>9} {:>8} {:>14} {:>9} {:>9} {:>6.1}x {:>9} {:>9} {:>10}",
                r.placements,
                r.clusters,
                r.objects,
                secs(r.generate),
                secs(r.analyze),
                secs(r.fleet),
                schedule,
                r.schedule_cpu.map_or("?".into(), secs),
                secs(r.baseline),
                r.ratio(),
                r.selected,
                r.decisions,
                rss,
            )?;
            let parts: Vec<String> = r
                .by_policy
                .iter()
                .map(|p| format!("{} {} ({})", p.policy, secs(p.time), p.placements))
                .collect();
            writeln!(f, "{:>10} by policy: {}", "", parts.join(" · "))?;
            let reconcile = match r.reconcile {
                Some((time, work)) => format!("{}, {work} work items", secs(time)),
                None => format!("not measured (over {REPEAT_LIMIT} placement×cluster pairs)"),
            };
            writeln!(
                f,
                "{:>10} daemon reconcile (the rollout step at rolling pace on this schedule, empty state): {reconcile}",
                ""
            )?;
            if r.diagnostics > 0 {
                writeln!(
                    f,
                    "{:>10} warning: the generated commit has {} diagnostics",
                    "", r.diagnostics
                )?;
            }
        }
        writeln!(f)?;
        writeln!(
            f,
            "seed {:#x}; schedule = schedule_commit with no previous state, best of the runs shown \
             (3 up to {REPEAT_LIMIT} placement×cluster pairs, else 1), sched cpu = its CPU time; baseline = every placement's \
             label selectors over every cluster once, best of 3; ratio = schedule / baseline; \
             by policy = each kind of placement scheduled alone, once (time and count).",
            self.seed
        )?;
        write!(
            f,
            "peak RSS is VmHWM (generation, analysis and scheduling together), process-wide and \
             monotonic: sizes are measured smallest first, so each row's figure is the peak of that \
             size (or of an earlier, smaller one, its daemon reconcile included); it is read before \
             the row's own daemon reconcile, whose work items hold every cluster's manifests."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_files() {
        let spec = FleetSpec {
            clusters: 40,
            placements: 30,
            seed: 7,
        };
        let (a, inv_a) = generate(spec);
        let (b, inv_b) = generate(spec);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.path, y.path);
            assert_eq!(x.content, y.content, "{}", x.path);
        }
        assert_eq!(inv_a, inv_b);
        let (c, _) = generate(FleetSpec { seed: 8, ..spec });
        assert!(
            a.iter().zip(&c).any(|(x, y)| x.content != y.content),
            "another seed gives another fleet"
        );
    }

    #[test]
    fn generated_commit_validates_with_no_diagnostic() {
        let (files, inventory) = generate(FleetSpec::new(50, 50));
        let (cat, diags) = gitfleet::analyze(&files);
        assert!(diags.is_empty(), "{diags:#?}");
        assert_eq!(cat.member_clusters.len(), 50);
        assert_eq!(cat.managed_clusters.len(), 50);
        assert_eq!(cat.placements.len() + cat.ocm_placements.len(), 50);
        assert_eq!(cat.ocm_placements.len(), 10, "20 % OCM");
        assert!(cat
            .placements
            .iter()
            .any(|p| p.spec.kind == gitfleet::model::PlacementKind::ResourcePlacement));
        for t in [
            PlacementType::PickAll,
            PlacementType::PickN,
            PlacementType::PickFixed,
        ] {
            assert!(
                cat.placements
                    .iter()
                    .any(|p| p.spec.spec.policy_or_default().placement_type == t),
                "{t:?}"
            );
        }
        assert_eq!(inventory.clusters.len(), 50);
        let fleet = Fleet::build(&cat, Some(&inventory));
        assert!(fleet
            .clusters
            .iter()
            .all(|c| c.fleet_member && c.ocm_member));
    }

    #[test]
    fn taints_and_unhealthy_clusters_appear_in_a_large_fleet() {
        let (files, inventory) = generate(FleetSpec::new(0, 1000));
        let tainted = files
            .iter()
            .filter(|f| f.path.starts_with("members/"))
            .filter(|f| String::from_utf8_lossy(&f.content).contains("taints:"))
            .count();
        assert!((10..=60).contains(&tainted), "{tainted} tainted of 1000");
        let unhealthy = inventory.clusters.iter().filter(|c| !c.healthy).count();
        assert!(
            (1..=30).contains(&unhealthy),
            "{unhealthy} unhealthy of 1000"
        );
    }

    #[test]
    fn run_on_a_tiny_fleet_gives_sane_numbers() {
        let report = run(&[(20, 30), (10, 10)]);
        assert_eq!(report.rows.len(), 2);
        assert_eq!(
            (report.rows[0].placements, report.rows[0].clusters),
            (10, 10),
            "smallest first"
        );
        for r in &report.rows {
            assert_eq!(r.diagnostics, 0);
            assert_eq!(r.schedule_runs, 3);
            assert!(r.objects >= 2 * r.clusters + r.placements);
            assert!(r.baseline_matches > 0);
            assert!(r.selected > 0 && r.decisions > 0);
            // The OCM scheduler may still be a placeholder: at least every KubeFleet placement.
            assert!(r.results >= r.placements * 4 / 5, "{r:?}");
            assert!(r.ratio().is_finite() && r.ratio() > 0.0);
            assert_eq!(r.by_policy.len(), 6);
            let counted: usize = r.by_policy.iter().map(|p| p.placements).sum();
            assert_eq!(
                counted, r.placements,
                "every placement is in one policy kind"
            );
        }
        // Only that it is read: the kernel sums RSS from per-CPU counters approximately, so two
        // reads of VmHWM in one process can go down by a little (seen in a full `--lib` run).
        if cfg!(target_os = "linux") {
            assert!(report.rows.iter().all(|r| r.peak_rss_kib.unwrap() > 0));
        }
        let text = report.to_string();
        assert!(
            text.contains("placements") && text.contains("VmHWM"),
            "{text}"
        );
    }
}
