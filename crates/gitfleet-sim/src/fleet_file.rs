//! The fleet file: which simulated members `gitfleet sim` serves, their nodes, their tokens and
//! the faults injected into them. It knows nothing of HTTP or of the object store.
//!
//! ```yaml
//! seed: 42                     # seeds fault randomness (optional; default 0), so runs repeat
//! anonymousAuth: false         # default for members: serve requests that carry no token?
//! kubernetesVersion: v1.33.1   # what /version reports (optional)
//! members:
//!   - name: eastus-staging     # also the kubeconfig context and cluster name
//!     context: eastus-staging  # optional: another context name
//!     token: s3cret            # optional: generated when absent
//!     port: 0                  # optional: 0 (default) picks a free loopback port
//!     anonymousAuth: true      # optional: overrides the file-wide default
//!     workloadDelayMs: 200     # delay before workloads get pods and status (default 200)
//!     nodes:
//!       - count: 3             # default 1
//!         pool: system         # node pool name, part of the node names (default pool<i>)
//!         cpu: "4"             # capacity (default "4")
//!         memory: 16Gi         # capacity (default "16Gi")
//!         allocatableCpu: 3800m    # optional, defaults to the capacity
//!         allocatableMemory: 15Gi  # optional, defaults to the capacity
//!         pods: 110            # default 110
//!         instanceType: Standard_D4s_v5   # sets node.kubernetes.io/instance-type
//!         labels: {topology.kubernetes.io/region: eastus}
//!         taints: [{key: dedicated, value: pci, effect: NoSchedule}]
//!         ready: true          # default true
//!         unschedulable: false # default false
//!     faults:                  # all optional; the admin endpoint changes them at run time
//!       latencyMs: 0           # added to every request
//!       errorRate: 0.0         # share of requests answered with an error, 0.0 to 1.0
//!       errorCodes: [500, 503, 429]   # picked from at random (default [500]); 429
//!                                     # carries Retry-After
//!       down: false            # true: the port refuses connections
//! ```
//!
//! About `anonymousAuth`: a request whose bearer token is wrong always gets 401, as on a real API
//! server. A request with no credentials at all gets 401 unless `anonymousAuth` is true, in which
//! case it is served (like an API server with anonymous auth and an allow-all authorizer).
//! kubectl (client-go) never sends credentials to an `http://` server, so members that kubectl
//! should reach need `anonymousAuth: true`; kube-rs sends the token over plain HTTP.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use gitfleet_kube_text::quantity::Quantity;

/// The Kubernetes version members report by default.
pub const DEFAULT_KUBERNETES_VERSION: &str = "v1.33.1";

/// Error codes a fault may inject.
pub const INJECTABLE_CODES: [u16; 5] = [429, 500, 502, 503, 504];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetFile {
    /// Seed for fault randomness; the same seed gives the same sequence of injected errors.
    #[serde(default)]
    pub seed: u64,
    /// Default for members that do not say: serve requests without credentials.
    #[serde(default)]
    pub anonymous_auth: bool,
    /// What `/version` reports, e.g. `v1.33.1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Changes each member keeps for watches to resume from (an older revision gets 410
    /// Expired) and for the admin change log; [`crate::store::LOG_CAPACITY`] when absent. Each
    /// keeps its object's versions: thousands of members need fewer. (A real API server keeps
    /// a resource's recent events in its watch cache, at least 100, and older ones in etcd
    /// until compaction.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_history: Option<usize>,
    pub members: Vec<MemberSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberSpec {
    pub name: String,
    /// Kubeconfig context name; the member name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Bearer token; generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Loopback port; 0 picks a free one.
    #[serde(default)]
    pub port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymous_auth: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    #[serde(default = "default_workload_delay_ms")]
    pub workload_delay_ms: u64,
    #[serde(default)]
    pub nodes: Vec<NodeGroup>,
    #[serde(default)]
    pub faults: Faults,
}

fn default_workload_delay_ms() -> u64 {
    200
}

/// A group of identical nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeGroup {
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(default = "default_cpu")]
    pub cpu: String,
    #[serde(default = "default_memory")]
    pub memory: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable_cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable_memory: Option<String>,
    #[serde(default = "default_pods")]
    pub pods: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<Taint>,
    #[serde(default = "yes")]
    pub ready: bool,
    #[serde(default)]
    pub unschedulable: bool,
}

impl Default for NodeGroup {
    fn default() -> Self {
        NodeGroup {
            count: 1,
            pool: None,
            cpu: default_cpu(),
            memory: default_memory(),
            allocatable_cpu: None,
            allocatable_memory: None,
            pods: default_pods(),
            instance_type: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            ready: true,
            unschedulable: false,
        }
    }
}

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn default_cpu() -> String {
    "4".into()
}
fn default_memory() -> String {
    "16Gi".into()
}
fn default_pods() -> u32 {
    110
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
}

/// Faults injected into one member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Faults {
    #[serde(default)]
    pub latency_ms: u64,
    #[serde(default)]
    pub error_rate: f64,
    #[serde(default = "default_error_codes")]
    pub error_codes: Vec<u16>,
    #[serde(default)]
    pub down: bool,
    /// Every request is answered `200 OK` with a body that is not JSON (a broken proxy, a
    /// captive portal): the client cannot read it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub garbage: bool,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            latency_ms: 0,
            error_rate: 0.0,
            error_codes: default_error_codes(),
            down: false,
            garbage: false,
        }
    }
}

fn default_error_codes() -> Vec<u16> {
    vec![500]
}

/// A change to a member's faults, as the admin endpoint accepts it: absent fields stay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultsUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_codes: Option<Vec<u16>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garbage: Option<bool>,
}

impl Faults {
    /// Applies an update and returns the problems with the result (empty when valid).
    pub fn updated(&self, update: &FaultsUpdate) -> Result<Faults, Vec<String>> {
        let mut next = self.clone();
        if let Some(v) = update.latency_ms {
            next.latency_ms = v;
        }
        if let Some(v) = update.error_rate {
            next.error_rate = v;
        }
        if let Some(v) = &update.error_codes {
            next.error_codes = v.clone();
        }
        if let Some(v) = update.down {
            next.down = v;
        }
        if let Some(v) = update.garbage {
            next.garbage = v;
        }
        let problems = next.problems("faults");
        if problems.is_empty() {
            Ok(next)
        } else {
            Err(problems)
        }
    }

    fn problems(&self, at: &str) -> Vec<String> {
        let mut out = Vec::new();
        if !(0.0..=1.0).contains(&self.error_rate) {
            out.push(format!(
                "{at}.errorRate: must be between 0.0 and 1.0, got {}",
                self.error_rate
            ));
        }
        if self.error_codes.is_empty() && self.error_rate > 0.0 {
            out.push(format!(
                "{at}.errorCodes: must not be empty when errorRate is above 0"
            ));
        }
        for code in &self.error_codes {
            if !INJECTABLE_CODES.contains(code) {
                out.push(format!(
                    "{at}.errorCodes: {code} is not one of {INJECTABLE_CODES:?}"
                ));
            }
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FleetFileError {
    #[error("cannot read fleet file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("fleet file {path} is not valid YAML for a fleet: {source}")]
    Parse {
        path: String,
        source: gitfleet_kube_text::yaml::Error,
    },
    #[error("fleet file {path} has {} problem(s):\n  {}", problems.len(), problems.join("\n  "))]
    Invalid { path: String, problems: Vec<String> },
}

impl FleetFile {
    /// Reads and validates a fleet file.
    pub fn load(path: &Path) -> Result<FleetFile, FleetFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| FleetFileError::Read {
            path: shown.clone(),
            source,
        })?;
        FleetFile::parse(&text, &shown)
    }

    /// Parses and validates fleet-file text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<FleetFile, FleetFileError> {
        let fleet: FleetFile =
            gitfleet_kube_text::yaml::from_str(text).map_err(|source| FleetFileError::Parse {
                path: origin.to_string(),
                source,
            })?;
        let problems = fleet.problems();
        if problems.is_empty() {
            Ok(fleet)
        } else {
            Err(FleetFileError::Invalid {
                path: origin.to_string(),
                problems,
            })
        }
    }

    /// Every problem with the fleet, each naming the field.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut names = BTreeSet::new();
        let mut contexts = BTreeSet::new();
        let mut ports = BTreeSet::new();
        if self.members.is_empty() {
            out.push("members: at least one member is required".to_string());
        }
        if self.watch_history == Some(0) {
            out.push("watchHistory: must keep at least one change".to_string());
        }
        for (i, m) in self.members.iter().enumerate() {
            let at = format!("members[{i}]");
            if !is_dns_label(&m.name) {
                out.push(format!(
                    "{at}.name: {:?} must be a DNS label (lowercase letters, digits, '-')",
                    m.name
                ));
            }
            if !names.insert(m.name.clone()) {
                out.push(format!("{at}.name: {:?} appears twice", m.name));
            }
            let context = m.context_name();
            if context.is_empty() {
                out.push(format!("{at}.context: must not be empty"));
            } else if !contexts.insert(context.to_string()) {
                out.push(format!("{at}.context: {context:?} appears twice"));
            }
            if m.port != 0 && !ports.insert(m.port) {
                out.push(format!("{at}.port: {} appears twice", m.port));
            }
            if let Some(token) = &m.token {
                if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    out.push(format!("{at}.token: must be non-empty without whitespace"));
                }
            }
            if let Some(v) = &m.kubernetes_version {
                if parse_version(v).is_none() {
                    out.push(format!("{at}.kubernetesVersion: {v:?} is not like v1.33.1"));
                }
            }
            let mut pools = BTreeSet::new();
            for (j, g) in m.nodes.iter().enumerate() {
                let at = format!("{at}.nodes[{j}]");
                let pool = g.pool_name(j);
                if !is_dns_label(&pool) {
                    out.push(format!("{at}.pool: {pool:?} must be a DNS label"));
                }
                if !pools.insert(pool.clone()) {
                    out.push(format!("{at}.pool: {pool:?} appears twice"));
                }
                for (field, value) in [
                    ("cpu", Some(&g.cpu)),
                    ("memory", Some(&g.memory)),
                    ("allocatableCpu", g.allocatable_cpu.as_ref()),
                    ("allocatableMemory", g.allocatable_memory.as_ref()),
                ] {
                    if let Some(v) = value {
                        match Quantity::parse(v) {
                            Ok(q) if q.0 >= 0.0 => {}
                            Ok(_) => out.push(format!("{at}.{field}: {v:?} must not be negative")),
                            Err(e) => out.push(format!("{at}.{field}: {e}")),
                        }
                    }
                }
                for (k, t) in g.taints.iter().enumerate() {
                    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&t.effect.as_str())
                    {
                        out.push(format!(
                            "{at}.taints[{k}].effect: {:?} is not NoSchedule, PreferNoSchedule or NoExecute",
                            t.effect
                        ));
                    }
                }
            }
            out.extend(m.faults.problems(&format!("{at}.faults")));
        }
        if let Some(v) = &self.kubernetes_version {
            if parse_version(v).is_none() {
                out.push(format!("kubernetesVersion: {v:?} is not like v1.33.1"));
            }
        }
        out
    }
}

impl MemberSpec {
    pub fn context_name(&self) -> &str {
        self.context.as_deref().unwrap_or(&self.name)
    }
}

impl NodeGroup {
    /// The pool name of the group at `index` in its member.
    pub fn pool_name(&self, index: usize) -> String {
        self.pool
            .clone()
            .unwrap_or_else(|| format!("pool{}", index + 1))
    }
}

/// `v1.33.1` → (1, 33, "v1.33.1").
pub fn parse_version(v: &str) -> Option<(u32, u32)> {
    let rest = v.strip_prefix('v')?;
    let mut parts = rest.splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?;
    let patch_digits: String = patch.chars().take_while(|c| c.is_ascii_digit()).collect();
    if patch_digits.is_empty() {
        return None;
    }
    Some((major, minor))
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_member_with_defaults() {
        let fleet = FleetFile::parse("members: [{name: a, nodes: [{count: 2}]}]", "t").unwrap();
        let m = &fleet.members[0];
        assert_eq!(m.context_name(), "a");
        assert_eq!(m.workload_delay_ms, 200);
        assert_eq!(m.nodes[0].cpu, "4");
        assert_eq!(m.nodes[0].pool_name(0), "pool1");
        assert!(m.nodes[0].ready);
        assert_eq!(m.faults, Faults::default());
    }

    #[test]
    fn reports_every_problem_with_its_field() {
        let text = r#"
watchHistory: 0
members:
  - name: A
    nodes: [{cpu: lots, taints: [{key: k, effect: Sometimes}]}]
    faults: {errorRate: 2, errorCodes: [404]}
  - name: b
    context: x
  - name: c
    context: x
"#;
        let Err(FleetFileError::Invalid { problems, .. }) = FleetFile::parse(text, "t") else {
            panic!("expected problems");
        };
        let all = problems.join("\n");
        for needle in [
            "members[0].name",
            "members[0].nodes[0].cpu",
            "members[0].nodes[0].taints[0].effect",
            "members[0].faults.errorRate",
            "members[0].faults.errorCodes: 404",
            "members[2].context: \"x\" appears twice",
            "watchHistory: must keep at least one change",
        ] {
            assert!(all.contains(needle), "{needle} missing from:\n{all}");
        }
    }

    #[test]
    fn unknown_fields_are_rejected() {
        assert!(FleetFile::parse("members: [{name: a, nodez: []}]", "t").is_err());
    }

    #[test]
    fn faults_update_keeps_absent_fields_and_validates() {
        let f = Faults::default();
        let next = f
            .updated(&FaultsUpdate {
                error_rate: Some(1.0),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(next.error_rate, 1.0);
        assert_eq!(next.error_codes, vec![500]);
        assert!(f
            .updated(&FaultsUpdate {
                error_codes: Some(vec![418]),
                ..Default::default()
            })
            .is_err());
    }

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("v1.33.1"), Some((1, 33)));
        assert_eq!(parse_version("1.33.1"), None);
    }
}
