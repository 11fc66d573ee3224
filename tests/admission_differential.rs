//! `gitfleet validate` held to what a real hub admits, object by object. The cases are every
//! object of examples/fleet-repo (its plain files; Kustomize and Helm folders are rendered by
//! their tools) and mutations of them generated from the installed CRDs' own
//! `openAPIV3Schema` (the served version of each object's `apiVersion`): for the fields the
//! object reaches, an unknown field, a wrong type, a value outside an enum and each value of
//! it, below a minimum or above a maximum, over `maxItems` or `maxLength`, a pattern violation,
//! a required field removed, `null`, an empty object for an absent one; and on every object,
//! metadata gone wrong (a bad label key, a 64-character label value, an annotation key `a/b/c`,
//! an invalid name). Seed objects add the kinds and versions the sample lacks. The status is
//! dropped on create before it is validated, so inside it only unknown fields are refused: its
//! cases are an unknown field in each object the status reaches (every one of them, not a share),
//! on status seeds whose statuses populate every field their CRD declares.
//!
//! The oracle is a test-bed API server (a real kube-apiserver) with KubeFleet's and OCM's CRDs
//! installed: each case is a server-side dry-run create with strict field validation (what
//! `kubectl apply --dry-run=server --validate=strict` sends for a new object; an `AlreadyExists`
//! answer means it passed validation). gitfleet's verdict is `gitfleet validate`'s on the sample
//! repository with that object in place of the original (the same analysis, in process): its
//! diagnostics on the object's own file, as what other objects make of a changed one (a
//! reference that no longer fits) is no admission of it.
//! Every disagreement is printed as a table; the test fails on any that is not a listed known
//! difference, and when a listed one no longer occurs.
//!
//! The CRDs are not in the repository (see tests/common/hub.rs for where they are found and
//! how the test skips without them).

mod common;
use common::hub;
use common::kubectl::Kubectl as _;
use common::members::{available, Backend};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// At most this many schema mutations per object, taken evenly from all it reaches, to keep
/// the test within a few minutes on the test bed.
const MUTATIONS_PER_OBJECT: usize = 100;

/// A disagreement that is expected: the hub on the test bed admits what gitfleet refuses,
/// because a rule outside the CRDs refuses it on a real hub (KubeFleet's or OCM's validating
/// webhooks, which do not run on the test bed), or because the rule is gitfleet's own and its
/// diagnostic says so.
struct Known {
    /// Text of the case's name (`file#document Kind/name: mutation field`).
    case: &'static str,
    /// Text of gitfleet's diagnostic.
    gitfleet_says: &'static str,
    why: &'static str,
}

const KUBEFLEET_OVERRIDES: &str =
    "KubeFleet's override webhook (validateOverridePolicy, pkg/utils/validator/resourceoverride.go)";

const KUBEFLEET_OVERRIDE_SELECTORS: &str = "KubeFleet's override webhook (validateClusterResourceSelectors, pkg/utils/validator/clusterresourceoverride.go)";

/// Every expected disagreement; any other fails the test, and so does one that no longer occurs.
const KNOWN: &[Known] = &[
    Known {
        case: "ManagedClusterSetBinding/production: null spec",
        gitfleet_says: "spec",
        why: "OCM's registration webhook (ManagedClusterSetBindingWebhook.ValidateCreate, pkg/registration/webhook/v1beta2) refuses a binding whose spec.clusterSet is not its name",
    },
    Known {
        case: "ManifestWorkReplicaSet/logging-agent: null spec",
        gitfleet_says: "",
        why: "OCM's work webhook (validatePlaceManifests, pkg/work/webhook/v1alpha1) refuses a ManifestWorkReplicaSet without manifests (\"Workload manifests should not be empty\")",
    },
    Known {
        case: "ManifestWork/seed-",
        gitfleet_says: "Workload manifests should not be empty",
        why: "OCM's work webhook (ManifestWorkWebhook.validateRequest, pkg/work/webhook/v1) refuses a ManifestWork without manifests",
    },
    Known {
        case: "executor",
        gitfleet_says: "not built in gitfleet",
        why: "gitfleet's own rule: it applies with its own credentials and impersonates no executor",
    },
    Known {
        case: "rolloutStrategy.type",
        gitfleet_says: "so they share one rolloutStrategy",
        why: "gitfleet's own rule: the replica sets of one Placement reach each cluster together, so they must agree on its rolloutStrategy (OCM keeps a work per replica set); here a status seed's replica set names the same Placement",
    },
    Known {
        case: "null data.",
        gitfleet_says: "gitfleet's own rule",
        why: "gitfleet's own rule: a null envelope entry holds no object any member could apply",
    },
    Known {
        case: "labelSelector",
        gitfleet_says: "labelSelector is required",
        why: KUBEFLEET_OVERRIDES,
    },
    Known {
        case: "overrideType",
        gitfleet_says: "jsonPatchOverrides cannot be set when the overrideType is Delete",
        why: KUBEFLEET_OVERRIDES,
    },
    Known {
        case: "null spec.policy.overrideRules",
        gitfleet_says: "jsonPatchOverrides cannot be empty when the overrideType is JSONPatch",
        why: KUBEFLEET_OVERRIDES,
    },
    Known {
        case: ".op",
        gitfleet_says: "remove operation cannot have value",
        why: "KubeFleet's override webhook (validateJSONPatchOverride, pkg/utils/validator/resourceoverride.go)",
    },
    Known {
        case: "empty object spec.clusterResourceSelectors",
        gitfleet_says: "label selector is not supported for resource selection",
        why: KUBEFLEET_OVERRIDE_SELECTORS,
    },
    Known {
        case: "null spec.clusterResourceSelectors",
        gitfleet_says: "resource name is required for resource selection",
        why: KUBEFLEET_OVERRIDE_SELECTORS,
    },
    Known {
        case: "matchExpressions[0].values",
        gitfleet_says: "must be specified",
        why: "KubeFleet's placement webhook (validateLabelSelector, pkg/utils/validator/placement.go) refuses In and NotIn without values",
    },
    Known {
        case: "spec.strategy",
        gitfleet_says: "rollingUpdate config is not valid for External rollout strategy type",
        why: "KubeFleet's placement webhook (validateRolloutStrategy, pkg/utils/validator/placement.go)",
    },
];

/// Objects of kinds and versions gitfleet reads that the sample fleet does not hold, added to
/// it as files of their own so their schemas are held to the hub too. `eastus-prod-1` is a managed
/// cluster of the sample: its namespace is the one registration makes on a hub.
const SEEDS: &str = "\
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {name: seed-work, namespace: eastus-prod-1}
spec:
  workload:
    manifests:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: seed, namespace: default}}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: PlacementDecision
metadata:
  name: seed-decision-1
  namespace: ocm-apps
  labels: {cluster.open-cluster-management.io/placement: logging-agent}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: seed-beta}
spec:
  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: reports}]
  policy: {placementType: PickN, numberOfClusters: 1}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
---
apiVersion: cluster.kubernetes-fleet.io/v1
kind: MemberCluster
metadata: {name: seed-member}
spec:
  identity: {kind: ServiceAccount, name: fleet-member-agent, namespace: fleet-system, apiGroup: ''}
  heartbeatPeriodSeconds: 60
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourceOverride
metadata: {name: seed-cro}
spec:
  clusterResourceSelectors: [{group: '', version: v1, kind: Namespace, name: reports}]
  policy:
    overrideRules:
    - clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {environment: staging}}}]}
      jsonPatchOverrides: [{op: add, path: /metadata/labels/seed, value: x}]
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: StagedUpdateStrategy
metadata: {name: seed-strategy, namespace: shop}
spec:
  stages:
  - name: all
    labelSelector: {matchLabels: {environment: staging}}
    afterStageTasks: [{type: TimedWait, waitTime: 1h}]
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacementDisruptionBudget
metadata: {name: payments-app}
spec: {maxUnavailable: 1}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacementEviction
metadata: {name: seed-eviction}
spec: {placementName: payments-app, clusterName: eastus-prod-1}
---
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {name: seed-orphans, namespace: eastus-prod-1}
spec:
  deleteOption:
    propagationPolicy: SelectivelyOrphan
    selectivelyOrphans:
      orphaningRules: [{group: '', resource: configmaps, namespace: default, name: orphan}]
  manifestConfigs:
  - resourceIdentifier: {group: '', resource: configmaps, namespace: default, name: orphan}
    updateStrategy: {type: ServerSideApply}
  workload:
    manifests:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: orphan, namespace: default}}
---
apiVersion: placement.kubernetes-fleet.io/v1alpha1
kind: ResourceOverride
metadata: {name: seed-ro, namespace: reports}
spec:
  resourceSelectors: [{group: '', version: v1, kind: ConfigMap, name: seed-config}]
  policy:
    overrideRules:
    - clusterSelector: {clusterSelectorTerms: [{labelSelector: {matchLabels: {environment: staging}}}]}
      jsonPatchOverrides: [{op: add, path: /metadata/labels/seed, value: x}]
---
apiVersion: placement.kubernetes-fleet.io/v1alpha1
kind: ClusterStagedUpdateStrategy
metadata: {name: seed-alpha}
spec:
  stages:
  - name: all
    labelSelector: {matchLabels: {environment: staging}}
";

/// Objects with every field of their CRD's `status` populated (the sample and the seeds above
/// have none), one of each kind and version that has a status. Only their status is mutated.
const STATUS_SEEDS: &str = include_str!("admission_differential/status_seeds.yaml");

/// One step of a path into a JSON value.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

fn shown_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// A change to an object: `value` set at `path` (the parent exists), or the field removed.
#[derive(Debug, Clone)]
struct Mutation {
    label: &'static str,
    path: Vec<Seg>,
    value: Option<Value>,
}

impl Mutation {
    fn apply(&self, object: &Value) -> Value {
        let mut out = object.clone();
        let (last, parents) = self.path.split_last().expect("a path");
        let mut at = &mut out;
        for seg in parents {
            at = match seg {
                Seg::Key(k) => at
                    .as_object_mut()
                    .unwrap()
                    .entry(k.clone())
                    .or_insert_with(|| json!({})),
                Seg::Index(i) => &mut at.as_array_mut().unwrap()[*i],
            };
        }
        match (last, &self.value) {
            (Seg::Key(k), Some(v)) => {
                at.as_object_mut().unwrap().insert(k.clone(), v.clone());
            }
            (Seg::Key(k), None) => {
                at.as_object_mut().unwrap().remove(k);
            }
            (Seg::Index(i), Some(v)) => at.as_array_mut().unwrap()[*i] = v.clone(),
            (Seg::Index(i), None) => {
                at.as_array_mut().unwrap().remove(*i);
            }
        }
        out
    }

    fn name(&self) -> String {
        format!("{} {}", self.label, shown_path(&self.path))
    }
}

fn child(path: &[Seg], seg: Seg) -> Vec<Seg> {
    let mut p = path.to_vec();
    p.push(seg);
    p
}

fn is_true(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// The mutations of `value` that break one constraint of `schema` on a scalar field at `path`
/// (present or not).
fn constraint_mutations(schema: &Value, path: &[Seg], out: &mut Vec<Mutation>) {
    let set = |label, value| Mutation {
        label,
        path: path.to_vec(),
        value: Some(value),
    };
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        out.push(set("enum", json!("NotInTheEnum")));
        // Every allowed value: the CRDs' CEL rules tie other fields to some of them.
        for v in values {
            out.push(set("enum value", v.clone()));
        }
    }
    let exclusive_min = is_true(schema, "exclusiveMinimum");
    if let Some(min) = schema.get("minimum").and_then(Value::as_i64) {
        out.push(set(
            "minimum",
            json!(if exclusive_min { min } else { min - 1 }),
        ));
    }
    let exclusive_max = is_true(schema, "exclusiveMaximum");
    if let Some(max) = schema.get("maximum").and_then(Value::as_i64) {
        out.push(set(
            "maximum",
            json!(if exclusive_max { max } else { max + 1 }),
        ));
    }
    if let Some(n) = schema.get("maxLength").and_then(Value::as_u64) {
        out.push(set("maxLength", json!("a".repeat(n as usize + 1))));
    }
    if schema.get("pattern").is_some() {
        out.push(set("pattern", json!("not a Valid pattern!")));
    }
}

/// A value of another type than `schema` declares, if it declares one a value can break.
fn wrong_type(schema: &Value) -> Option<Value> {
    if is_true(schema, "x-kubernetes-int-or-string") {
        return Some(json!(true));
    }
    match schema.get("type").and_then(Value::as_str)? {
        "string" => Some(json!(12345)),
        "integer" | "number" => Some(json!("not-a-number")),
        "boolean" => Some(json!("not-a-boolean")),
        "array" | "object" => Some(json!("not-a-collection")),
        _ => None,
    }
}

/// Walks `value` beside `schema`, collecting the mutations of the fields it reaches.
fn walk(schema: &Value, value: &Value, path: &[Seg], top: bool, out: &mut Vec<Mutation>) {
    let preserve = is_true(schema, "x-kubernetes-preserve-unknown-fields");
    match value {
        Value::Object(fields) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                if !preserve {
                    out.push(Mutation {
                        label: "unknown field",
                        path: child(path, Seg::Key("gitfleetUnknownField".into())),
                        value: Some(json!("x")),
                    });
                }
                for r in schema
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    if fields.contains_key(r) && !(top && matches!(r, "apiVersion" | "kind")) {
                        out.push(Mutation {
                            label: "required removed",
                            path: child(path, Seg::Key(r.into())),
                            value: None,
                        });
                    }
                }
                for (k, sub) in props {
                    // The status has cases of its own (see `status_mutations`).
                    if top && matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
                        continue;
                    }
                    let p = child(path, Seg::Key(k.clone()));
                    match fields.get(k) {
                        Some(v) => present(sub, v, &p, out),
                        None if sub.get("type").and_then(Value::as_str) == Some("object") => {
                            // An empty object: its required fields and CEL rules.
                            out.push(Mutation {
                                label: "empty object",
                                path: p.clone(),
                                value: Some(json!({})),
                            });
                            // And one per value of each enum it holds, which CEL rules of the
                            // CRDs tie other fields to.
                            for (ck, csub) in sub
                                .get("properties")
                                .and_then(Value::as_object)
                                .into_iter()
                                .flatten()
                            {
                                for v in csub
                                    .get("enum")
                                    .and_then(Value::as_array)
                                    .into_iter()
                                    .flatten()
                                {
                                    out.push(Mutation {
                                        label: "object with enum value",
                                        path: p.clone(),
                                        value: Some(json!({ ck.as_str(): v })),
                                    });
                                }
                            }
                        }
                        None => constraint_mutations(sub, &p, out),
                    }
                }
            } else if let Some(sub) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                if let Some((k, v)) = fields.iter().next() {
                    present(sub, v, &child(path, Seg::Key(k.clone())), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, item) in items.iter().enumerate().take(2) {
                    present(sub, item, &child(path, Seg::Index(i)), out);
                }
            }
        }
        _ => {}
    }
}

/// The mutations of a field present in the object, and of what it holds.
fn present(schema: &Value, value: &Value, path: &[Seg], out: &mut Vec<Mutation>) {
    // What the API server makes of `null` (a non-nullable field is dropped, then defaulted).
    if !matches!(path.last(), Some(Seg::Index(_))) {
        out.push(Mutation {
            label: "null",
            path: path.to_vec(),
            value: Some(Value::Null),
        });
    }
    if let Some(v) = wrong_type(schema) {
        out.push(Mutation {
            label: "wrong type",
            path: path.to_vec(),
            value: Some(v),
        });
    }
    if !value.is_object() && !value.is_array() {
        constraint_mutations(schema, path, out);
    }
    if let (Some(n), Some(first)) = (
        schema.get("maxItems").and_then(Value::as_u64),
        value.as_array().and_then(|a| a.first()),
    ) {
        out.push(Mutation {
            label: "maxItems",
            path: path.to_vec(),
            value: Some(Value::Array(vec![first.clone(); n as usize + 1])),
        });
    }
    walk(schema, value, path, false, out);
}

/// An unknown field in each object `value` (a status, or what it holds) reaches beside its
/// `schema`, in every item of its lists and every entry of its maps: the only rule the server
/// applies to a status on create.
fn status_mutations(schema: &Value, value: &Value, path: &[Seg], out: &mut Vec<Mutation>) {
    match value {
        Value::Object(fields) => {
            if !is_true(schema, "x-kubernetes-preserve-unknown-fields") {
                out.push(Mutation {
                    label: "unknown field in status",
                    path: child(path, Seg::Key("gitfleetUnknownField".into())),
                    value: Some(json!("x")),
                });
            }
            for (k, v) in fields {
                let sub = schema["properties"]
                    .get(k)
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
                    .unwrap_or(&Value::Null);
                status_mutations(sub, v, &child(path, Seg::Key(k.clone())), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                status_mutations(&schema["items"], item, &child(path, Seg::Index(i)), out);
            }
        }
        _ => {}
    }
}

/// The metadata mutations every object gets.
fn metadata_mutations() -> Vec<Mutation> {
    let meta = |k: &str| vec![Seg::Key("metadata".into()), Seg::Key(k.into())];
    vec![
        Mutation {
            label: "bad label key",
            path: child(&meta("labels"), Seg::Key("bad key!".into())),
            value: Some(json!("x")),
        },
        Mutation {
            label: "64-character label value",
            path: child(&meta("labels"), Seg::Key("gitfleet.io/long".into())),
            value: Some(json!("a".repeat(64))),
        },
        Mutation {
            label: "annotation key a/b/c",
            path: child(&meta("annotations"), Seg::Key("a/b/c".into())),
            value: Some(json!("x")),
        },
        Mutation {
            label: "invalid name",
            path: meta("name"),
            value: Some(json!("Invalid/Name")),
        },
    ]
}

/// Every `count`-th of `all`, spread evenly, keeping at most `count`.
fn spread(all: Vec<Mutation>, count: usize) -> Vec<Mutation> {
    if all.len() <= count {
        return all;
    }
    let len = all.len();
    all.into_iter()
        .enumerate()
        .filter(|(i, _)| i * count / len != (i + 1) * count / len)
        .map(|(_, m)| m)
        .collect()
}

/// The served version's `openAPIV3Schema` of each (group, version, kind) the CRDs define.
fn schemas(crds: &Path) -> BTreeMap<(String, String, String), Value> {
    let mut out = BTreeMap::new();
    for f in hub::fleet_files(crds) {
        let text = std::fs::read_to_string(&f).unwrap();
        for crd in gitfleet_kube_text::yaml::documents(&text).unwrap() {
            let group = crd["spec"]["group"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let kind = crd["spec"]["names"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
                if v["served"].as_bool() == Some(true) {
                    out.insert(
                        (
                            group.clone(),
                            v["name"].as_str().unwrap().to_string(),
                            kind.clone(),
                        ),
                        v["schema"]["openAPIV3Schema"].clone(),
                    );
                }
            }
        }
    }
    out
}

/// `kubectl proxy` on a free port, stopped on drop.
struct Proxy {
    child: Child,
    url: String,
}

impl Proxy {
    fn start(kubeconfig: &Path) -> Proxy {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--context", "hub", "proxy", "--port=0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kubectl runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .unwrap_or_else(|| panic!("kubectl proxy said {line:?}"));
        Proxy {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where objects of an apiVersion and kind are created: (plural, namespaced), from discovery.
struct Resources {
    agent: ureq::Agent,
    base: String,
    found: BTreeMap<(String, String), (String, bool)>,
}

impl Resources {
    fn get(&mut self, api_version: &str, kind: &str) -> (String, bool) {
        let key = (api_version.to_string(), kind.to_string());
        if !self.found.contains_key(&key) {
            let path = if api_version.contains('/') {
                format!("{}/apis/{api_version}", self.base)
            } else {
                format!("{}/api/{api_version}", self.base)
            };
            let list: Value = serde_json::from_str(
                &self
                    .agent
                    .get(&path)
                    .call()
                    .unwrap()
                    .body_mut()
                    .read_to_string()
                    .unwrap(),
            )
            .unwrap();
            for r in list["resources"].as_array().into_iter().flatten() {
                let name = r["name"].as_str().unwrap_or_default();
                if !name.contains('/') {
                    self.found.insert(
                        (
                            api_version.to_string(),
                            r["kind"].as_str().unwrap().to_string(),
                        ),
                        (name.to_string(), r["namespaced"].as_bool() == Some(true)),
                    );
                }
            }
        }
        self.found
            .get(&key)
            .unwrap_or_else(|| panic!("the hub serves no {kind} in {api_version}"))
            .clone()
    }

    /// The server's verdict on creating `object`: admitted, or refused with its message.
    fn verdict(&mut self, object: &Value) -> Result<(), String> {
        let api_version = object["apiVersion"].as_str().unwrap();
        let kind = object["kind"].as_str().unwrap();
        let (plural, namespaced) = self.get(api_version, kind);
        let prefix = if api_version.contains('/') {
            "apis"
        } else {
            "api"
        };
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let url = if namespaced {
            format!(
                "{}/{prefix}/{api_version}/namespaces/{ns}/{plural}",
                self.base
            )
        } else {
            format!("{}/{prefix}/{api_version}/{plural}", self.base)
        };
        let mut resp = self
            .agent
            .post(format!("{url}?dryRun=All&fieldValidation=Strict"))
            .header("Content-Type", "application/json")
            .send(serde_json::to_string(object).unwrap())
            .unwrap();
        let code = resp.status().as_u16();
        let body = resp.body_mut().read_to_string().unwrap();
        let status: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        match code {
            200..=299 => Ok(()),
            // Validation runs before storage: an existing object passed it.
            409 if status["reason"] == "AlreadyExists" => Ok(()),
            400 | 422 => Err(status["message"].as_str().unwrap_or(&body).to_string()),
            _ => panic!("the hub answered {code} to creating {kind}: {body}"),
        }
    }
}

/// One file of the sample fleet, as its documents.
struct Sample {
    path: String,
    docs: Vec<Value>,
}

/// The sample repository with document `doc` of file `file` replaced by `object`.
fn repository(
    samples: &[Sample],
    file: usize,
    doc: usize,
    object: &Value,
) -> Vec<gitfleet::catalog::SourceFile> {
    samples
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let text = if i == file {
                s.docs
                    .iter()
                    .enumerate()
                    .map(|(j, d)| {
                        gitfleet_kube_text::yaml::to_string(if j == doc { object } else { d })
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
                    .join("---\n")
            } else {
                s.docs
                    .iter()
                    .map(|d| gitfleet_kube_text::yaml::to_string(d).unwrap())
                    .collect::<Vec<_>>()
                    .join("---\n")
            };
            gitfleet::catalog::SourceFile {
                path: s.path.clone(),
                content: text.into_bytes(),
            }
        })
        .collect()
}

fn short(message: &str) -> String {
    let one_line = message.replace('\n', " ");
    if one_line.chars().count() > 220 {
        format!("{}…", one_line.chars().take(220).collect::<String>())
    } else {
        one_line
    }
}

#[test]
fn gitfleet_validate_admits_what_a_real_hub_admits() {
    if !available(Backend::Real) {
        return;
    }
    let Some(crds) = hub::crds_dir("the admission differential test") else {
        return;
    };
    let root = common::manifest_dir().join("examples/fleet-repo");
    let files: Vec<PathBuf> = hub::fleet_files(&root);
    let mut samples: Vec<Sample> = files
        .iter()
        .map(|f| Sample {
            path: f.strip_prefix(&root).unwrap().display().to_string(),
            docs: gitfleet_kube_text::yaml::documents(&std::fs::read_to_string(f).unwrap())
                .unwrap()
                .into_iter()
                .filter(|d| !d.is_null())
                .collect(),
        })
        .collect();
    // One file each: a case's verdict is read from its own file.
    for (i, seed) in gitfleet_kube_text::yaml::documents(SEEDS)
        .unwrap()
        .into_iter()
        .enumerate()
    {
        samples.push(Sample {
            path: format!("admission-seeds/{i}.yaml"),
            docs: vec![seed],
        });
    }
    let status_seeds = samples.len();
    for (i, seed) in gitfleet_kube_text::yaml::documents(STATUS_SEEDS)
        .unwrap()
        .into_iter()
        .enumerate()
    {
        samples.push(Sample {
            path: format!("admission-status-seeds/{i}.yaml"),
            docs: vec![seed],
        });
    }
    let schemas = schemas(&crds);

    let members = hub::start_with_crds(&crds);
    // No file replaced: the sample (and seeds) as written.
    let as_written = repository(&samples, usize::MAX, 0, &Value::Null);
    hub::create_namespaces(&members, &as_written);
    let (code, _, err) = members.kubectl("hub", &["create", "namespace", "eastus-prod-1"]);
    assert_eq!(code, 0, "kubectl create namespace eastus-prod-1: {err}");
    let proxy = Proxy::start(&members.kubeconfig);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut server = Resources {
        agent,
        base: proxy.url.clone(),
        found: BTreeMap::new(),
    };

    let metadata_labels: Vec<&str> = metadata_mutations().iter().map(|m| m.label).collect();
    let mut generated = 0;
    let mut status_cases = 0;
    let (mut cases, mut both_admit, mut both_refuse) = (0, 0, 0);
    let mut known_seen = vec![0usize; KNOWN.len()];
    let mut table = Vec::new();
    let mut unexplained = 0;
    // The oracle itself: the samples go on a hub as written, and the metadata mutations never do.
    let mut oracle_wrong = Vec::new();
    // Per kind of mutation: (cases, refused by the server).
    let mut per_label: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (fi, sample) in samples.iter().enumerate() {
        for (di, original) in sample.docs.iter().enumerate() {
            let api_version = original["apiVersion"].as_str().unwrap_or_default();
            let kind = original["kind"].as_str().unwrap_or_default().to_string();
            let (group, version) = match api_version.split_once('/') {
                Some((g, v)) => (g.to_string(), v.to_string()),
                None => (String::new(), api_version.to_string()),
            };
            let schema = schemas.get(&(group, version, kind.clone()));
            let mut mutations = Vec::new();
            let mut in_status = Vec::new();
            if let Some(schema) = schema {
                if fi < status_seeds {
                    walk(schema, original, &[], true, &mut mutations);
                }
                if let Some(status) = original.get("status") {
                    let path = [Seg::Key("status".into())];
                    status_mutations(
                        &schema["properties"]["status"],
                        status,
                        &path,
                        &mut in_status,
                    );
                }
            }
            generated += mutations.len();
            status_cases += in_status.len();
            let mut all: Vec<(&str, String, Value)> =
                vec![("as written", "as written".into(), original.clone())];
            let metadata = if fi < status_seeds {
                metadata_mutations()
            } else {
                vec![]
            };
            for m in spread(mutations, MUTATIONS_PER_OBJECT)
                .into_iter()
                .chain(metadata)
                .chain(in_status)
            {
                all.push((m.label, m.name(), m.apply(original)));
            }
            let object_name = format!(
                "{}#{di} {kind}/{}",
                sample.path,
                original["metadata"]["name"].as_str().unwrap_or_default()
            );
            for (label, what, object) in all {
                cases += 1;
                let name = format!("{object_name}: {what}");
                let by_server = server.verdict(&object);
                let counts = per_label.entry(label.to_string()).or_default();
                counts.0 += 1;
                counts.1 += usize::from(by_server.is_err());
                let expect_admitted = label == "as written";
                let expect_refused = metadata_labels.contains(&label);
                if (expect_admitted && by_server.is_err()) || (expect_refused && by_server.is_ok())
                {
                    oracle_wrong.push(format!("{name}: {by_server:?}"));
                }
                let (_, diags) = gitfleet::analyze(&repository(&samples, fi, di, &object));
                // The case's own file: what other objects make of it (a reference that no
                // longer fits) is no admission of this object.
                let own: Vec<String> = diags
                    .iter()
                    .filter(|d| d.origin.file == sample.path)
                    .map(ToString::to_string)
                    .collect();
                let by_gitfleet = if own.is_empty() {
                    Ok(())
                } else {
                    Err(own.join("; "))
                };
                let known = match (&by_server, &by_gitfleet) {
                    (Ok(()), Ok(())) => {
                        both_admit += 1;
                        continue;
                    }
                    (Err(_), Err(_)) => {
                        both_refuse += 1;
                        continue;
                    }
                    (Ok(()), Err(says)) => KNOWN
                        .iter()
                        .position(|k| name.contains(k.case) && says.contains(k.gitfleet_says)),
                    (Err(_), Ok(())) => None,
                };
                let note = match known {
                    Some(i) => {
                        known_seen[i] += 1;
                        format!("known: {}", KNOWN[i].why)
                    }
                    None => {
                        unexplained += 1;
                        "UNEXPLAINED".to_string()
                    }
                };
                let say = |v: &Result<(), String>| match v {
                    Ok(()) => "admits".to_string(),
                    Err(m) => format!("refuses: {}", short(m)),
                };
                table.push(format!(
                    "{name}\n    server:   {}\n    gitfleet: {}\n    {note}",
                    say(&by_server),
                    say(&by_gitfleet)
                ));
            }
        }
    }
    drop(proxy);
    let known_total: usize = known_seen.iter().sum();
    eprintln!(
        "admission differential: {cases} cases (of {generated} schema mutations, at most {MUTATIONS_PER_OBJECT} per object, and {status_cases} unknown fields in statuses), {} agree ({both_admit} admitted by both, {both_refuse} refused by both), {known_total} known differences, {unexplained} unexplained\n{}",
        both_admit + both_refuse,
        table.join("\n")
    );
    eprintln!("per kind of case (cases, refused by the hub): {per_label:?}");
    assert!(
        oracle_wrong.is_empty(),
        "the hub does not answer as expected:\n{}",
        oracle_wrong.join("\n")
    );
    let gone: Vec<&str> = KNOWN
        .iter()
        .zip(&known_seen)
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| k.case)
        .collect();
    assert!(
        gone.is_empty(),
        "these known differences no longer occur: drop them from KNOWN: {gone:?}"
    );
    assert_eq!(
        unexplained, 0,
        "gitfleet validate and the hub disagree on {unexplained} cases (table above)"
    );
}
