//! Live inventory (docs/guides/concepts.md): what each member's API says about its nodes and pods, turned
//! into the properties the scheduler reads. [`properties`] is pure (nodes and pods in, properties
//! out); [`collect`] asks every member in parallel, with bounded concurrency and a per-member
//! timeout, and reports a member that does not answer as unhealthy with its error.
//!
//! Which nodes count:
//! - `kubernetes-fleet.io/node-count`: every node (as KubeFleet's property provider counts them);
//! - `resources.kubernetes-fleet.io/{total,allocatable,available}-{cpu,memory}`, and the costs:
//!   ready, schedulable nodes; `available` is allocatable minus the requests of the pods bound to
//!   those nodes that have not terminated (phase neither `Succeeded` nor `Failed`), never below 0;
//! - `kubernetes.azure.com/vm-sizes/<instance type>/capacity`: ready nodes, by the label
//!   `node.kubernetes.io/instance-type`.
//!
//! Quantities are written canonically: cpu in cores, or millicores when not whole (`12`,
//! `3800m`); memory in the largest binary unit that divides it exactly (`48Gi`, `1536Mi`, bytes
//! otherwise).
//!
//! Namespaces are collected only when asked ([`Options::namespaces`], the flag
//! `--enable-namespace-collection`), as KubeFleet's member agent collects them only with
//! `--enable-namespace-collection-in-property-provider` (cmd/memberagent/options/
//! propertyprovider.go; off by default). Names only, at most [`NAMESPACE_LIMIT`], KubeFleet's
//! `namespaceTrackerLimit` (pkg/propertyprovider/default/trackers/namespaces.go): a member with
//! more is reported `namespaceCollectionDegraded` (KubeFleet's `NamespaceCollectionSucceeded`
//! condition `False`, reason `Degraded`) with the first ones its API lists, by name; the
//! scheduler still uses them, as KubeFleet's NamespaceAffinity filter does, so a namespace
//! beyond the limit counts as missing. KubeFleet's tracker keeps the first ones it watched
//! rather than the first by name.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use kube::api::{Api, ListParams};
use kube::config::Kubeconfig;
use serde::de::DeserializeOwned;

use super::connect::{connect, MemberError, MemberTarget};
use crate::catalog::Catalog;
use crate::model::member::DEFAULT_HEARTBEAT_PERIOD_SECONDS;
use crate::model::quantity::Quantity;
use crate::schedule::{Fleet, Inventory, InventoryCluster};

pub const NODE_COUNT: &str = "kubernetes-fleet.io/node-count";
pub const TOTAL_CPU: &str = "resources.kubernetes-fleet.io/total-cpu";
pub const TOTAL_MEMORY: &str = "resources.kubernetes-fleet.io/total-memory";
pub const ALLOCATABLE_CPU: &str = "resources.kubernetes-fleet.io/allocatable-cpu";
pub const ALLOCATABLE_MEMORY: &str = "resources.kubernetes-fleet.io/allocatable-memory";
pub const AVAILABLE_CPU: &str = "resources.kubernetes-fleet.io/available-cpu";
pub const AVAILABLE_MEMORY: &str = "resources.kubernetes-fleet.io/available-memory";
pub const PER_CPU_CORE_COST: &str = "kubernetes.azure.com/per-cpu-core-cost";
pub const PER_GB_MEMORY_COST: &str = "kubernetes.azure.com/per-gb-memory-cost";
/// The most namespaces collected from one member: KubeFleet's `namespaceTrackerLimit`.
pub const NAMESPACE_LIMIT: u32 = 200;
/// The label naming a node's instance type (VM size).
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

/// `kubernetes.azure.com/vm-sizes/<instance type>/capacity`.
pub fn vm_size_capacity(instance_type: &str) -> String {
    format!("kubernetes.azure.com/vm-sizes/{instance_type}/capacity")
}

/// How long one member may take to answer all of a probe by default.
pub const DEFAULT_MEMBER_TIMEOUT: Duration = Duration::from_secs(10);
/// How many members are probed at once by default.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Page size of node and pod lists, so a large member answers in pieces.
const PAGE_SIZE: u32 = 500;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The price table (`--prices FILE`): the on-demand hourly cost of one node of each instance type.
///
/// ```yaml
/// instanceTypes:
///   Standard_D4s_v5: 0.192
///   Standard_D8s_v5: 0.384
/// ```
///
/// A member's `per-cpu-core-cost` is the hourly cost of its ready, schedulable nodes divided by
/// their cpu capacity in cores, `per-gb-memory-cost` the same cost divided by their memory in GiB
/// (as KubeFleet's Azure property provider computes them). A member with a node whose instance
/// type the table does not price gets no cost properties: a partial sum would understate them.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriceTable {
    pub instance_types: BTreeMap<String, f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: instanceTypes.{instance_type}: the hourly cost must be a finite number >= 0, not {cost}")]
    BadCost {
        file: String,
        instance_type: String,
        cost: f64,
    },
}

impl PriceTable {
    /// Parses a price table's text (YAML or JSON); `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<PriceTable, PriceError> {
        let table: PriceTable = crate::yaml::from_str(text).map_err(|e| PriceError::Parse {
            file: file.into(),
            message: e.to_string(),
        })?;
        if let Some((t, c)) = table
            .instance_types
            .iter()
            .find(|(_, c)| !c.is_finite() || **c < 0.0)
        {
            return Err(PriceError::BadCost {
                file: file.into(),
                instance_type: t.clone(),
                cost: *c,
            });
        }
        Ok(table)
    }
}

/// The live properties of one member from its nodes and pods (which nodes and
/// pods count is in the module documentation).
pub fn properties(
    nodes: &[Node],
    pods: &[Pod],
    prices: Option<&PriceTable>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert(NODE_COUNT.to_string(), nodes.len().to_string());

    let mut vm_sizes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut counted: Vec<&Node> = Vec::new();
    for node in nodes.iter().filter(|n| is_ready(n)) {
        if let Some(t) = instance_type(node) {
            *vm_sizes.entry(t).or_default() += 1;
        }
        if is_schedulable(node) {
            counted.push(node);
        }
    }
    for (t, n) in vm_sizes {
        out.insert(vm_size_capacity(t), n.to_string());
    }

    let mut capacity = Resources::default();
    let mut allocatable = Resources::default();
    for node in &counted {
        let status = node.status.as_ref();
        capacity.add_list(status.and_then(|s| s.capacity.as_ref()));
        allocatable.add_list(status.and_then(|s| s.allocatable.as_ref()));
    }
    let counted_names: std::collections::BTreeSet<&str> = counted
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut requested = Resources::default();
    for pod in pods {
        let bound_here = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| counted_names.contains(n));
        if bound_here && !is_terminated(pod) {
            requested.add(&pod_requests(pod));
        }
    }
    let available = Resources {
        milli_cpu: (allocatable.milli_cpu - requested.milli_cpu).max(0),
        memory: (allocatable.memory - requested.memory).max(0),
    };
    for (cpu, memory, r) in [
        (TOTAL_CPU, TOTAL_MEMORY, &capacity),
        (ALLOCATABLE_CPU, ALLOCATABLE_MEMORY, &allocatable),
        (AVAILABLE_CPU, AVAILABLE_MEMORY, &available),
    ] {
        out.insert(cpu.to_string(), format_cpu(r.milli_cpu));
        out.insert(memory.to_string(), format_memory(r.memory));
    }

    if let Some((per_core, per_gb)) = prices.and_then(|p| costs(&counted, &capacity, p)) {
        out.insert(PER_CPU_CORE_COST.to_string(), format!("{per_core:.3}"));
        out.insert(PER_GB_MEMORY_COST.to_string(), format!("{per_gb:.3}"));
    }
    out
}

/// Per-core and per-GiB hourly costs of `nodes`, or `None` when some node is not priced or the
/// nodes have no cpu or memory to divide by.
fn costs(nodes: &[&Node], capacity: &Resources, prices: &PriceTable) -> Option<(f64, f64)> {
    let mut hourly = 0.0;
    for node in nodes {
        hourly += prices.instance_types.get(instance_type(node)?)?;
    }
    if capacity.milli_cpu <= 0 || capacity.memory <= 0 {
        return None;
    }
    Some((
        hourly / (capacity.milli_cpu as f64 / 1000.0),
        hourly / (capacity.memory as f64 / GIB),
    ))
}

/// Cpu in millicores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Resources {
    milli_cpu: i64,
    memory: i64,
}

impl Resources {
    fn add(&mut self, other: &Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
    }

    fn max(self, other: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.max(other.milli_cpu),
            memory: self.memory.max(other.memory),
        }
    }

    fn of_list(list: Option<&BTreeMap<String, KubeQuantity>>) -> Resources {
        let get = |name: &str, scale: f64| {
            list.and_then(|l| l.get(name))
                .map_or(0, |q| quantity(q, scale))
        };
        Resources {
            milli_cpu: get("cpu", 1000.0),
            memory: get("memory", 1.0),
        }
    }

    fn add_list(&mut self, list: Option<&BTreeMap<String, KubeQuantity>>) {
        self.add(&Resources::of_list(list));
    }
}

/// A quantity in `1/scale` units, rounded up as Kubernetes rounds (`0.1m` of cpu is `1m`). The
/// API server validates quantities, so one that does not parse counts as zero.
fn quantity(q: &KubeQuantity, scale: f64) -> i64 {
    Quantity::parse(&q.0).map_or(0, |v| {
        // Rounding to 1e-6 first keeps `0.1 * 1000` at 100 rather than 101.
        let scaled = (v.0 * scale * 1e6).round() / 1e6;
        scaled.ceil() as i64
    })
}

/// What the scheduler reserves for a pod: its app containers and sidecars, or its largest init
/// step if that is more, plus the pod overhead (Kubernetes' `PodRequests`).
fn pod_requests(pod: &Pod) -> Resources {
    let Some(spec) = &pod.spec else {
        return Resources::default();
    };
    let requests =
        |c: &Container| Resources::of_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    let mut app = Resources::default();
    for c in &spec.containers {
        app.add(&requests(c));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&requests(c));
            init_peak = init_peak.max(sidecars);
        } else {
            let mut step = sidecars;
            step.add(&requests(c));
            init_peak = init_peak.max(step);
        }
    }
    app.add(&sidecars);
    let mut total = app.max(init_peak);
    total.add(&Resources::of_list(spec.overhead.as_ref()));
    total
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn is_schedulable(node: &Node) -> bool {
    !node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

fn instance_type(node: &Node) -> Option<&str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(INSTANCE_TYPE_LABEL))
        .map(String::as_str)
        .filter(|t| !t.is_empty())
}

fn is_terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// `12`, `3800m`.
fn format_cpu(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// `48Gi`, `1536Mi`, `1000` (bytes).
fn format_memory(bytes: i64) -> String {
    const UNITS: [(&str, i64); 5] = [
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    if bytes == 0 {
        return "0".into();
    }
    UNITS
        .iter()
        .find(|(_, unit)| bytes % unit == 0)
        .map_or_else(
            || bytes.to_string(),
            |(s, unit)| format!("{}{s}", bytes / unit),
        )
}

/// Why one member could not be probed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Connect(#[from] MemberError),
    #[error("listing {what}: {source}")]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl ProbeError {
    /// The member answered, with 429 or a 5xx.
    pub fn is_server_error(&self) -> bool {
        matches!(self, ProbeError::List { source: kube::Error::Api(status), .. }
            if status.code == 429 || status.code >= 500)
    }
}

/// What one probe of a member found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probed {
    pub properties: BTreeMap<String, String>,
    /// Set when namespace collection is on.
    pub namespaces: Option<Vec<String>>,
    /// More than [`NAMESPACE_LIMIT`] namespaces: `namespaces` holds the first ones.
    pub namespace_collection_degraded: bool,
}

/// Lists nodes and the pods bound to nodes that may still run, and computes the properties;
/// with `namespaces`, lists the member's namespaces too (module doc).
pub async fn probe(
    client: &kube::Client,
    prices: Option<&PriceTable>,
    namespaces: bool,
) -> Result<Probed, ProbeError> {
    let nodes: Vec<Node> =
        list_all(Api::all(client.clone()), ListParams::default(), "nodes").await?;
    // Unbound and finished pods hold nothing; the server leaves them out.
    let pods: Vec<Pod> = list_all(
        Api::all(client.clone()),
        ListParams::default()
            .fields("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"),
        "pods",
    )
    .await?;
    let mut probed = Probed {
        properties: properties(&nodes, &pods, prices),
        ..Probed::default()
    };
    if namespaces {
        let (names, more) = list_namespaces(client).await?;
        probed.namespaces = Some(names);
        probed.namespace_collection_degraded = more;
    }
    Ok(probed)
}

/// The first [`NAMESPACE_LIMIT`] namespace names, and whether the member has more.
async fn list_namespaces(client: &kube::Client) -> Result<(Vec<String>, bool), ProbeError> {
    let page = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().limit(NAMESPACE_LIMIT))
        .await
        .map_err(|source| ProbeError::List {
            what: "namespaces",
            source,
        })?;
    let more = page.metadata.continue_.is_some_and(|c| !c.is_empty());
    let mut names: Vec<String> = page
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    // A server that ignores `limit` (it may) still yields at most the limit, by name.
    names.sort_unstable();
    let more = more || names.len() > NAMESPACE_LIMIT as usize;
    names.truncate(NAMESPACE_LIMIT as usize);
    Ok((names, more))
}

async fn list_all<K>(
    api: Api<K>,
    params: ListParams,
    what: &'static str,
) -> Result<Vec<K>, ProbeError>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut items = Vec::new();
    let mut params = params.limit(PAGE_SIZE);
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|source| ProbeError::List { what, source })?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}

/// A member to probe: how to reach it and the properties it declares in the repository.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub target: MemberTarget,
    pub declared: BTreeMap<String, String>,
    /// How often the daemon probes it: `MemberCluster.spec.heartbeatPeriodSeconds`, or a
    /// `ManagedCluster`'s `spec.leaseDurationSeconds` (both 60 s by default).
    pub heartbeat: Duration,
}

/// The members of one or more commits (plan probes base and head once), by name; the first
/// catalog that declares a member gives its context and declared properties.
pub fn members_of(cats: &[&Catalog]) -> Vec<Member> {
    let mut out: BTreeMap<String, Member> = BTreeMap::new();
    for cat in cats {
        // Without an inventory the fleet carries exactly the declared properties.
        let fleet = Fleet::build(cat, None);
        let heartbeats: BTreeMap<&str, i32> = cat
            .member_clusters
            .iter()
            .map(|e| {
                (
                    e.spec.metadata.name.as_str(),
                    e.spec.heartbeat_period_seconds(),
                )
            })
            .chain(cat.managed_clusters.iter().map(|e| {
                (
                    e.spec.metadata.name.as_str(),
                    e.spec.lease_duration_seconds(),
                )
            }))
            .collect();
        for target in super::member_targets(cat) {
            let declared = fleet
                .get(&target.name)
                .map(|c| c.properties.clone())
                .unwrap_or_default();
            let seconds = heartbeats
                .get(target.name.as_str())
                .copied()
                .unwrap_or(DEFAULT_HEARTBEAT_PERIOD_SECONDS);
            let heartbeat = Duration::from_secs(u64::try_from(seconds.max(1)).unwrap_or(60));
            out.entry(target.name.clone()).or_insert(Member {
                target,
                declared,
                heartbeat,
            });
        }
    }
    out.into_values().collect()
}

/// How [`collect`] probes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Members probed at once (at least 1).
    pub concurrency: usize,
    /// How long one member may take, connection included; a slower member is unhealthy.
    pub timeout: Duration,
    pub prices: Option<PriceTable>,
    /// Collect each member's namespaces (KubeFleet's namespace collection; module doc).
    pub namespaces: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            concurrency: DEFAULT_CONCURRENCY,
            timeout: DEFAULT_MEMBER_TIMEOUT,
            prices: None,
            namespaces: false,
        }
    }
}

/// The live inventory of `members`, sorted by name, with the kubeconfig already read: every
/// member that cannot be reached or answers with an error is listed `healthy: false` with the
/// error, and delays the others by nothing.
pub async fn collect_with(
    members: &[Member],
    kubeconfig: Arc<Kubeconfig>,
    kubeconfig_path: &Path,
    options: &Options,
) -> Inventory {
    let permits = Arc::new(tokio::sync::Semaphore::new(options.concurrency.max(1)));
    let prices = Arc::new(options.prices.clone());
    // One copy shared by the members' tasks, not one each.
    let shared = Arc::new(kubeconfig.clone());
    let mut tasks = tokio::task::JoinSet::new();
    for (i, member) in members.iter().enumerate() {
        let permits = permits.clone();
        let kubeconfig = Arc::clone(&shared);
        let path = kubeconfig_path.to_path_buf();
        let target = member.target.clone();
        let prices = prices.clone();
        let timeout = options.timeout;
        let namespaces = options.namespaces;
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("never closed");
            let deadline = tokio::time::Instant::now() + timeout;
            let result = tokio::time::timeout(timeout, async {
                let client = connect(&kubeconfig, &path, &target).await?;
                let mut attempt = 0;
                loop {
                    match probe(&client, prices.as_ref().as_ref(), namespaces).await {
                        // A member that answers with 429 or 5xx is up but busy or flaky: ask
                        // again with backoff within its time. One that does not answer at all
                        // is reported at once rather than holding up the inventory.
                        Err(e) if e.is_server_error() => {
                            let wait = super::retry::delay(attempt, None);
                            if tokio::time::Instant::now() + wait >= deadline {
                                return Err(e);
                            }
                            tokio::time::sleep(wait).await;
                            attempt += 1;
                        }
                        other => return other,
                    }
                }
            })
            .await
            .unwrap_or(Err(ProbeError::Timeout(timeout)));
            (i, result)
        });
    }
    let mut results: Vec<Option<Result<Probed, ProbeError>>> =
        members.iter().map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        // A probe task only panics on a bug; its member then stays without an answer below.
        if let Ok((i, result)) = joined {
            results[i] = Some(result);
        }
    }
    let mut clusters: Vec<InventoryCluster> = members
        .iter()
        .zip(results)
        .map(|(member, result)| match result {
            Some(Ok(mut probed)) => {
                probed.properties.extend(member.declared.clone());
                InventoryCluster {
                    name: member.target.name.clone(),
                    healthy: true,
                    error: None,
                    properties: probed.properties,
                    add_on_scores: BTreeMap::new(),
                    namespaces: probed.namespaces,
                    namespace_collection_degraded: probed.namespace_collection_degraded,
                }
            }
            Some(Err(e)) => unhealthy(&member.target.name, error_text(&e)),
            None => unhealthy(&member.target.name, "the probe failed unexpectedly".into()),
        })
        .collect();
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    Inventory {
        clusters: clusters.into_iter().map(Arc::new).collect(),
    }
}

fn unhealthy(name: &str, error: String) -> InventoryCluster {
    InventoryCluster {
        name: name.to_string(),
        healthy: false,
        error: Some(error),
        properties: BTreeMap::new(),
        add_on_scores: BTreeMap::new(),
        namespaces: None,
        namespace_collection_degraded: false,
    }
}

/// The error with its causes, on one line.
fn error_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cpu: &str, memory: &str, extra: serde_json::Value) -> Node {
        let mut v = json!({
            "metadata": {"name": name, "labels": {INSTANCE_TYPE_LABEL: "D4"}},
            "status": {
                "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        });
        merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn pod(node: &str, phase: &str, spec: serde_json::Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase},
        });
        merge(&mut v, json!({"spec": spec}));
        serde_json::from_value(v).unwrap()
    }

    fn requests(cpu: &str, memory: &str) -> serde_json::Value {
        json!({"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}})
    }

    fn merge(into: &mut serde_json::Value, patch: serde_json::Value) {
        match (into, patch) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (slot, v) => *slot = v,
        }
    }

    fn props(nodes: &[Node], pods: &[Pod]) -> BTreeMap<String, String> {
        properties(nodes, pods, None)
    }

    #[test]
    fn quantities_are_formatted_canonically() {
        for (milli, want) in [(0, "0"), (12000, "12"), (3800, "3800m"), (1, "1m")] {
            assert_eq!(format_cpu(milli), want);
        }
        for (bytes, want) in [
            (0, "0"),
            (48 << 30, "48Gi"),
            (1536 << 20, "1536Mi"),
            (1000, "1000"),
            (3 << 10, "3Ki"),
        ] {
            assert_eq!(format_memory(bytes), want);
        }
        // Every formatted value reads back as the same quantity.
        for bytes in [1536 << 20, 1000, 48 << 30] {
            assert_eq!(quantity(&KubeQuantity(format_memory(bytes)), 1.0), bytes);
        }
        for milli in [3800, 12000, 1] {
            assert_eq!(quantity(&KubeQuantity(format_cpu(milli)), 1000.0), milli);
        }
        for (text, scale, want) in [
            ("100m", 1000.0, 100),
            ("0.1", 1000.0, 100),
            ("1.5Gi", 1.0, 1536 << 20),
            ("0.1m", 1000.0, 1),
        ] {
            assert_eq!(quantity(&KubeQuantity(text.into()), scale), want, "{text}");
        }
    }

    #[test]
    fn totals_allocatable_and_available_over_ready_schedulable_nodes() {
        let nodes = [
            node(
                "a",
                "4",
                "16Gi",
                json!({"status": {"allocatable": {"cpu": "3800m", "memory": "15Gi"}}}),
            ),
            node("b", "4", "16Gi", json!({})),
            node(
                "down",
                "8",
                "32Gi",
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
            node(
                "cordoned",
                "8",
                "32Gi",
                json!({"spec": {"unschedulable": true}}),
            ),
        ];
        let pods = [
            pod(
                "a",
                "Running",
                json!({"containers": [requests("500m", "1Gi"), requests("250m", "512Mi")]}),
            ),
            pod(
                "b",
                "Pending",
                json!({"containers": [requests("1", "2Gi")]}),
            ),
            // Finished, on a node that does not count, or not bound: they hold nothing.
            pod(
                "b",
                "Succeeded",
                json!({"containers": [requests("1", "1Gi")]}),
            ),
            pod("b", "Failed", json!({"containers": [requests("1", "1Gi")]})),
            pod(
                "cordoned",
                "Running",
                json!({"containers": [requests("2", "1Gi")]}),
            ),
            pod("", "Pending", json!({"containers": [requests("2", "1Gi")]})),
        ];
        let p = props(&nodes, &pods);
        let want: BTreeMap<String, String> = [
            (NODE_COUNT, "4"),
            (TOTAL_CPU, "8"),
            (TOTAL_MEMORY, "32Gi"),
            (ALLOCATABLE_CPU, "7800m"),
            (ALLOCATABLE_MEMORY, "31Gi"),
            (AVAILABLE_CPU, "6050m"),
            (AVAILABLE_MEMORY, "28160Mi"),
            ("kubernetes.azure.com/vm-sizes/D4/capacity", "3"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(p, want);
    }

    #[test]
    fn available_never_goes_below_zero() {
        let nodes = [node("a", "1", "1Gi", json!({}))];
        let pods = [pod(
            "a",
            "Running",
            json!({"containers": [requests("2", "2Gi")]}),
        )];
        let p = props(&nodes, &pods);
        assert_eq!(p[AVAILABLE_CPU], "0");
        assert_eq!(p[AVAILABLE_MEMORY], "0");
    }

    #[test]
    fn an_empty_cluster_has_zeroes_not_missing_properties() {
        let p = props(&[], &[]);
        assert_eq!(p[NODE_COUNT], "0");
        assert_eq!(p[AVAILABLE_CPU], "0");
        assert_eq!(p[TOTAL_MEMORY], "0");
    }

    #[test]
    fn pod_requests_follow_the_scheduler() {
        let p = pod(
            "a",
            "Running",
            json!({
                "containers": [requests("100m", "100Mi"), requests("200m", "100Mi")],
                // A plain init step larger than the app in cpu, smaller in memory.
                "initContainers": [requests("1", "50Mi"), {"name": "side", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "50m", "memory": "10Mi"}}}],
                "overhead": {"cpu": "10m", "memory": "1Mi"},
            }),
        );
        assert_eq!(
            pod_requests(&p),
            Resources {
                milli_cpu: 1000 + 10,
                memory: (210 + 1) << 20,
            }
        );
        // No requests at all: nothing reserved.
        let bare = pod("a", "Running", json!({"containers": [{"name": "c"}]}));
        assert_eq!(pod_requests(&bare), Resources::default());
    }

    #[test]
    fn vm_sizes_count_ready_nodes_by_instance_type() {
        let typed = |name: &str, t: &str| {
            node(
                name,
                "4",
                "16Gi",
                json!({"metadata": {"labels": {INSTANCE_TYPE_LABEL: t}}}),
            )
        };
        let mut unlabelled = node("x", "4", "16Gi", json!({}));
        unlabelled.metadata.labels = None;
        let cordoned = node(
            "c",
            "4",
            "16Gi",
            json!({"spec": {"unschedulable": true}, "metadata": {"labels": {INSTANCE_TYPE_LABEL: "E8"}}}),
        );
        let p = props(
            &[
                typed("a", "D4"),
                typed("b", "E8"),
                typed("c", "E8"),
                unlabelled,
                cordoned,
            ],
            &[],
        );
        assert_eq!(p["kubernetes.azure.com/vm-sizes/D4/capacity"], "1");
        // A cordoned node is ready, so it counts as capacity of its size.
        assert_eq!(p["kubernetes.azure.com/vm-sizes/E8/capacity"], "3");
        assert_eq!(p.keys().filter(|k| k.contains("vm-sizes")).count(), 2);
    }

    #[test]
    fn costs_need_every_node_priced() {
        let nodes = [
            node("a", "4", "16Gi", json!({})),
            node("b", "4", "16Gi", json!({})),
        ];
        let table = PriceTable::parse("prices.yaml", "instanceTypes: {D4: 0.2}").unwrap();
        let p = properties(&nodes, &[], Some(&table));
        assert_eq!(p[PER_CPU_CORE_COST], "0.050");
        assert_eq!(p[PER_GB_MEMORY_COST], "0.013");
        let other = PriceTable::parse("prices.yaml", "instanceTypes: {E8: 0.4}").unwrap();
        let p = properties(&nodes, &[], Some(&other));
        assert!(!p.contains_key(PER_CPU_CORE_COST), "{p:?}");
        assert!(!props(&nodes, &[]).contains_key(PER_GB_MEMORY_COST));
    }

    #[test]
    fn bad_price_tables_name_the_file_and_field() {
        let err = PriceTable::parse("p.yaml", "instanceTypes: {D4: -1}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.yaml: instanceTypes.D4: the hourly cost must be a finite number >= 0, not -1"
        );
        let err = PriceTable::parse("p.yaml", "instanceType: {D4: 1}").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p.yaml: line 1: instanceType: unknown field `instanceType`"),
            "{err}"
        );
    }

    #[test]
    fn members_of_unions_commits_with_declared_properties() {
        let cat = |yaml: &str| {
            let (cat, diags) = crate::analyze(&[crate::catalog::SourceFile {
                path: "m.yaml".into(),
                content: yaml.as_bytes().to_vec(),
            }]);
            assert!(diags.is_empty(), "{diags:#?}");
            cat
        };
        let member = |name: &str, annotations: &str| {
            format!("apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata: {{name: {name}, annotations: {{{annotations}}}}}\nspec: {{identity: {{name: agent, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}}}\n")
        };
        let base = cat(&format!(
            "{}---\n{}",
            member(
                "a",
                "gitfleet.io/properties: '{\"example.com/tier\": \"2\"}'"
            ),
            member("b", "")
        ));
        let head = cat(&member("c", "gitfleet.io/kubeconfig-context: admin@c"));
        let m = members_of(&[&head, &base]);
        let names: Vec<(&str, &str)> = m
            .iter()
            .map(|m| (m.target.name.as_str(), m.target.context.as_str()))
            .collect();
        assert_eq!(names, [("a", "a"), ("b", "b"), ("c", "admin@c")]);
        assert_eq!(m[0].declared["example.com/tier"], "2");
        assert!(m[1].declared.is_empty());
    }

    #[tokio::test]
    async fn an_unreachable_member_is_unhealthy_with_its_error_and_others_are_not_delayed() {
        // A listener that accepts and never answers, and a closed port.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed_port = closed.local_addr().unwrap().port();
        drop(closed);
        let kubeconfig: Kubeconfig = crate::yaml::from_str(&format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: silent\n  cluster: {{server: 'http://{}'}}\n- name: closed\n  cluster: {{server: 'http://127.0.0.1:{closed_port}'}}\ncontexts:\n- name: silent\n  context: {{cluster: silent, user: u}}\n- name: closed\n  context: {{cluster: closed, user: u}}\nusers:\n- name: u\n  user: {{token: t}}\n",
            silent.local_addr().unwrap()
        ))
        .unwrap();
        let member = |name: &str| Member {
            heartbeat: Duration::from_secs(60),
            target: MemberTarget {
                name: name.into(),
                context: name.into(),
            },
            declared: BTreeMap::new(),
        };
        let options = Options {
            timeout: Duration::from_millis(300),
            ..Options::default()
        };
        let inv = collect_with(
            &[member("silent"), member("closed"), member("nocontext")],
            Arc::new(kubeconfig),
            Path::new("/tmp/kc"),
            &options,
        )
        .await;
        let got: Vec<(&str, bool, &str)> = inv
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c.healthy, c.error.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|(_, healthy, _)| !healthy), "{got:?}");
        assert!(got[0].2.starts_with("listing nodes"), "{got:?}");
        assert_eq!(
            got[1],
            (
                "nocontext",
                false,
                "member nocontext: kubeconfig /tmp/kc has no context \"nocontext\""
            )
        );
        assert_eq!(got[2].2, "no answer within 300ms");
    }
}
