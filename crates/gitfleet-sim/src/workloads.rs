//! What the controllers, the scheduler and the kubelets of a real cluster would do, in brief:
//! after a member's `workloadDelayMs`, Deployments get a ReplicaSet, ReplicaSets, StatefulSets,
//! DaemonSets and Jobs get Pods carrying their template's resource requests, Pods are bound to a
//! node with room for them (or stay Pending as Unschedulable) and run, and every workload gets a
//! status (observedGeneration, replicas, ready, available, updated, conditions). Rollouts are
//! instant: old pods go, new ones come, in one step. A new generation with the same spec (a
//! Deployment's annotations changed) is observed at once: no pod changes, no delay. Nodes never
//! fail on their own.
//!
//! The reconcile functions are synchronous over the store; [`run`] drives them from store events.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::time::Instant;

use super::api::remove_object;
use super::apply::{record_update, Writer};
use super::clock;
use super::defaults::{apply_defaults, selector_matches};
use super::member::Member;
use super::store::{Event, EventType, Missed, ObjKey, Store};
use gitfleet_kube_text::quantity::Quantity;

fn model_quantity(s: &str) -> Option<f64> {
    Quantity::parse(s).ok().map(|q| q.0)
}

const CONTROLLER: &str = "kube-controller-manager";
const SCHEDULER: &str = "kube-scheduler";
const KUBELET: &str = "kubelet";

/// Follows the member's store and reconciles workloads after the member's delay.
pub async fn run(member: Arc<Member>, mut shutdown: watch::Receiver<bool>) {
    let mut changes = member.store().subscribe();
    let mut due = Due::default();
    loop {
        tokio::select! {
            events = changes.next(&member.store) => match events {
                Ok(events) => {
                    let now = Instant::now();
                    for e in events {
                        let keys = interested(&member.store(), &e);
                        if keys.is_empty() {
                            continue;
                        }
                        if only_generation_to_observe(&e) {
                            keys.into_iter().for_each(|key| due.observe(key, now));
                            continue;
                        }
                        // Once an event: it parses both versions.
                        let pods = may_need_pods(&e);
                        for key in keys {
                            due.after(key, now + member.workload_delay, pods);
                        }
                    }
                }
                Err(Missed::Expired) => {
                    // Fell behind the log: whatever it missed may concern any workload.
                    changes = member.store().subscribe();
                    for key in all_workloads(&member.store()) {
                        due.after(key, Instant::now() + member.workload_delay, true);
                    }
                }
                Err(Missed::Closed) => return,
            },
            _ = async { match due.next() { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                let ready = due.take_until(Instant::now());
                let mut store = member.store();
                let stamp = clock::now_rfc3339();
                for key in ready {
                    reconcile(&mut store, &key, &stamp);
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// When each workload is reconciled next, and whether that reconcile may change pods (an object
/// new or with a new spec, a pod gone, a node changed), which waits for the member's delay.
#[derive(Default)]
struct Due(BTreeMap<ObjKey, (Instant, bool)>);

impl Due {
    /// Reconcile `key` at `at`, or earlier if it is already due.
    fn after(&mut self, key: ObjKey, at: Instant, pods: bool) {
        let entry = self.0.entry(key).or_insert((at, pods));
        entry.1 |= pods;
    }

    /// Reconcile `key` now, unless it already waits to change pods: that reconcile observes too.
    fn observe(&mut self, key: ObjKey, now: Instant) {
        let entry = self.0.entry(key).or_insert((now, false));
        if !entry.1 {
            entry.0 = entry.0.min(now);
        }
    }

    fn next(&self) -> Option<Instant> {
        self.0.values().map(|(t, _)| *t).min()
    }

    /// The keys due by `now`, no longer due.
    fn take_until(&mut self, now: Instant) -> Vec<ObjKey> {
        let ready: Vec<ObjKey> = (self.0.iter())
            .filter(|(_, (t, _))| *t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &ready {
            self.0.remove(key);
        }
        ready
    }
}

/// A workload whose generation moved while its spec stayed (a Deployment's annotations changed):
/// the controller only has to observe the new generation, no pod changes, which a real
/// deployment controller does within milliseconds, so the member's delay, which stands for
/// pods starting, does not apply.
fn only_generation_to_observe(e: &Event) -> bool {
    let Some(old) = &e.old else {
        return false;
    };
    if e.kind != EventType::Modified || !is_workload(&e.key) {
        return false;
    }
    let (old, new) = (old.value(), e.object.value());
    old["metadata"]["generation"] != new["metadata"]["generation"] && old["spec"] == new["spec"]
}

/// Whether the reconciles a change causes may create, bind or remove pods: all but a status or
/// metadata write to an object whose spec stayed.
fn may_need_pods(e: &Event) -> bool {
    match (&e.old, e.kind) {
        (Some(old), EventType::Modified) => old.value()["spec"] != e.object.value()["spec"],
        _ => true,
    }
}

fn is_workload(key: &ObjKey) -> bool {
    matches!(
        (key.group.as_str(), key.resource.as_str()),
        (
            "apps",
            "deployments" | "replicasets" | "statefulsets" | "daemonsets"
        ) | ("batch", "jobs")
            | ("", "pods")
    )
}

/// The objects to reconcile because of a change.
fn interested(store: &Store, e: &Event) -> Vec<ObjKey> {
    let (key, kind) = (&e.key, e.kind);
    let mut out = Vec::new();
    let pod_freed = key.group.is_empty() && key.resource == "pods" && kind == EventType::Deleted;
    let node_changed = key.group.is_empty() && key.resource == "nodes";
    if is_workload(key) && kind != EventType::Deleted {
        out.push(key.clone());
    }
    if pod_freed || node_changed {
        // Room may have appeared (or gone): pending pods and DaemonSets.
        for (k, p) in store.list("", "pods", None) {
            if p["spec"]["nodeName"].as_str().unwrap_or("").is_empty() {
                out.push(k.clone());
            }
        }
        out.extend(store.list_keys("apps", "daemonsets", None).cloned());
    }
    if pod_freed {
        // The owner of a deleted pod replaces it (if the owner still exists).
        for (g, r, k) in [
            ("apps", "replicasets", "ReplicaSet"),
            ("apps", "statefulsets", "StatefulSet"),
            ("apps", "daemonsets", "DaemonSet"),
            ("batch", "jobs", "Job"),
        ] {
            if let Some(owner) = owner_key(store, &e.object.value(), g, r, k) {
                out.push(owner);
            }
        }
    }
    out
}

fn all_workloads(store: &Store) -> Vec<ObjKey> {
    store.keys().filter(|k| is_workload(k)).cloned().collect()
}

/// Brings one object's dependents and status up to date.
pub fn reconcile(store: &mut Store, key: &ObjKey, now: &str) {
    let Some(obj) = store.get(key) else {
        return;
    };
    if !obj["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    match (key.group.as_str(), key.resource.as_str()) {
        ("apps", "deployments") => deployment(store, key, &obj, now),
        ("apps", "replicasets") => {
            replica_set(store, key, &obj, now);
            if let Some(owner) = owner_key(store, &obj, "apps", "deployments", "Deployment") {
                if let Some(d) = store.get(&owner) {
                    deployment_status(store, &owner, &d, now);
                }
            }
        }
        ("apps", "statefulsets") => stateful_set(store, key, &obj, now),
        ("apps", "daemonsets") => daemon_set(store, key, &obj, now),
        ("batch", "jobs") => job(store, key, &obj, now),
        ("", "pods") => {
            let changed = run_pod(store, key, now);
            if changed {
                refresh_owners(store, key, now);
            }
        }
        _ => {}
    }
}

/// After a pod changed on its own (scheduled late), owners recompute their status.
fn refresh_owners(store: &mut Store, pod_key: &ObjKey, now: &str) {
    let Some(pod) = store.get(pod_key) else {
        return;
    };
    for (g, r, k) in [
        ("apps", "replicasets", "ReplicaSet"),
        ("apps", "statefulsets", "StatefulSet"),
        ("apps", "daemonsets", "DaemonSet"),
        ("batch", "jobs", "Job"),
    ] {
        if let Some(owner) = owner_key(store, &pod, g, r, k) {
            reconcile(store, &owner, now);
        }
    }
}

fn owner_key(
    store: &Store,
    obj: &Value,
    group: &str,
    resource: &str,
    kind: &str,
) -> Option<ObjKey> {
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
    let r = obj["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == kind && r["controller"] == json!(true))?;
    let key = ObjKey::new(group, resource, ns, r["name"].as_str()?);
    let owner = store.get(&key)?;
    (owner["metadata"]["uid"] == r["uid"]).then_some(key)
}

fn owned_by<'a>(
    store: &'a Store,
    group: &'a str,
    resource: &'a str,
    ns: &'a str,
    uid: &'a str,
) -> Vec<(ObjKey, Value)> {
    store
        .list(group, resource, Some(ns))
        .filter(|(_, o)| {
            o["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|rs| {
                    rs.iter()
                        .any(|r| r["uid"] == uid && r["controller"] == json!(true))
                })
        })
        .map(|(k, o)| (k.clone(), o.clone()))
        .collect()
}

/// A controller claims the objects its selector matches that have no controller (left behind
/// by `kubectl delete --cascade=orphan`, say) by becoming their controller owner, as the
/// controllers' ControllerRefManager does. Without it a recreated Deployment would find its
/// ReplicaSet by name but never count it.
fn adopt_orphans(
    store: &mut Store,
    owner: &Value,
    group: &str,
    resource: &str,
    kind: &str,
    now: &str,
) {
    let selector = &owner["spec"]["selector"];
    let empty = |f: &str| {
        selector[f].as_object().is_none_or(|m| m.is_empty())
            && selector[f].as_array().is_none_or(|a| a.is_empty())
    };
    if empty("matchLabels") && empty("matchExpressions") {
        // An empty selector would claim everything; the API server rejects it for workloads.
        return;
    }
    let ns = owner["metadata"]["namespace"].as_str().unwrap_or_default();
    let orphans: Vec<(ObjKey, Value)> = store
        .list(group, resource, Some(ns))
        .filter(|(_, o)| {
            o["metadata"]["deletionTimestamp"].is_null()
                && !o["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|rs| rs.iter().any(|r| r["controller"] == json!(true)))
                && selector_matches(selector, &o["metadata"]["labels"])
        })
        .map(|(k, o)| (k.clone(), o.clone()))
        .collect();
    let api_version = owner["apiVersion"].as_str().unwrap_or("apps/v1");
    for (key, old) in orphans {
        let mut new = old.clone();
        let mut refs = old["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        refs.push(owner_ref(owner, api_version, kind));
        new["metadata"]["ownerReferences"] = json!(refs);
        write_update(store, key, &old, new, CONTROLLER, None, now);
    }
}

fn owner_ref(obj: &Value, api_version: &str, kind: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// A short hash of a pod template, in the alphabet Kubernetes uses for generated names.
pub fn template_hash(template: &Value) -> String {
    const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let digest = Sha256::digest(template.to_string().as_bytes());
    digest
        .iter()
        .take(10)
        .map(|b| SAFE[*b as usize % SAFE.len()] as char)
        .collect()
}

fn suffix(store: &mut Store) -> String {
    const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let uid = store.new_uid();
    let digest = Sha256::digest(uid.as_bytes());
    digest
        .iter()
        .take(5)
        .map(|b| SAFE[*b as usize % SAFE.len()] as char)
        .collect()
}

fn writer<'a>(
    manager: &'a str,
    api_version: &'a str,
    sub: Option<&'a str>,
    now: &'a str,
) -> Writer<'a> {
    Writer {
        manager,
        api_version,
        subresource: sub,
        associative: true,
        now,
    }
}

/// Writes a new object as a controller would through the API.
fn create(
    store: &mut Store,
    key: ObjKey,
    mut obj: Value,
    api_version: &str,
    kind: &str,
    manager: &str,
    now: &str,
) {
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    obj["metadata"]["uid"] = json!(store.new_uid());
    obj["metadata"]["creationTimestamp"] = json!(now);
    if let Some(rt) = store.registry.by_kind(&key.group, None, kind) {
        if rt.generation {
            obj["metadata"]["generation"] = json!(1);
        }
        apply_defaults(&rt, &mut obj, &mut || String::new());
    }
    record_update(
        None,
        &mut obj,
        &writer(manager, api_version, None, now),
        true,
    );
    store.put(key, obj);
}

/// Replaces `status` if it differs, recording the status manager.
fn set_status(
    store: &mut Store,
    key: &ObjKey,
    old: &Value,
    status: Value,
    manager: &str,
    now: &str,
) {
    if old["status"] == status {
        return;
    }
    let mut new = old.clone();
    new["status"] = status;
    write_update(store, key.clone(), old, new, manager, Some("status"), now);
}

fn set_replicas(store: &mut Store, key: &ObjKey, old: &Value, replicas: i64, now: &str) {
    if old["spec"]["replicas"].as_i64() == Some(replicas) {
        return;
    }
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(replicas);
    let g = old["metadata"]["generation"].as_i64().unwrap_or(1);
    new["metadata"]["generation"] = json!(g + 1);
    write_update(store, key.clone(), old, new, CONTROLLER, None, now);
}

/// Stores `new`, `manager`'s update of `old` (through `subresource`, if any), with its managed
/// fields recorded as the API server records them.
fn write_update(
    store: &mut Store,
    key: ObjKey,
    old: &Value,
    mut new: Value,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) {
    let av = old["apiVersion"].as_str().unwrap_or("v1").to_string();
    record_update(
        Some(old),
        &mut new,
        &writer(manager, &av, subresource, now),
        true,
    );
    store.put(key, new);
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn omit_zero(mut status: Value) -> Value {
    if let Some(m) = status.as_object_mut() {
        m.retain(|k, v| v.as_i64() != Some(0) || k == "observedGeneration" || k == "replicas");
    }
    status
}

fn condition(kind: &str, ok: bool, reason: &str, message: &str, now: &str, old: &Value) -> Value {
    let status = if ok { "True" } else { "False" };
    let prev = old["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind));
    let since = match prev {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let updated = match prev {
        Some(p) if p["status"] == status && p["reason"] == reason => p["lastUpdateTime"].clone(),
        _ => json!(now),
    };
    json!({"type": kind, "status": status, "lastUpdateTime": updated, "lastTransitionTime": since, "reason": reason, "message": message})
}

// ---------------------------------------------------------------------------------------------
// Deployments and ReplicaSets

fn deployment(store: &mut Store, key: &ObjKey, d: &Value, now: &str) {
    let ns = key.namespace.clone();
    let uid = d["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let replicas = d["spec"]["replicas"].as_i64().unwrap_or(1);
    let mut template = d["spec"]["template"].clone();
    let hash = template_hash(&template);
    let rs_name = format!("{}-{hash}", key.name);
    let rs_key = ObjKey::new("apps", "replicasets", &ns, &rs_name);
    adopt_orphans(store, d, "apps", "replicasets", "Deployment", now);
    let owned = owned_by(store, "apps", "replicasets", &ns, &uid);
    // The newest revision among the other ReplicaSets: the new one's is one more, also when
    // an old template comes back (rollout undo), as the deployment controller numbers them.
    let revision = owned
        .iter()
        .filter(|(k, _)| k.name != rs_name)
        .filter_map(|(_, rs)| {
            rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                .as_str()?
                .parse::<i64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    for (k, rs) in &owned {
        if k.name != rs_name {
            set_replicas(store, k, rs, 0, now);
            if let Some(rs) = store.get(k) {
                replica_set(store, k, &rs, now);
            }
        }
    }
    let new_revision = (revision + 1).to_string();
    match store.get(&rs_key) {
        Some(rs) => {
            set_replicas(store, &rs_key, &rs, replicas, now);
            let current = rs["metadata"]["annotations"][REVISION]
                .as_str()
                .and_then(|r| r.parse::<i64>().ok())
                .unwrap_or(0);
            if current <= revision {
                if let Some(rs) = store.get(&rs_key) {
                    set_annotation(store, &rs_key, &rs, REVISION, &new_revision, now);
                }
            }
        }
        None => {
            template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
            let mut selector = d["spec"]["selector"].clone();
            selector["matchLabels"]["pod-template-hash"] = json!(hash);
            let labels = template["metadata"]["labels"].clone();
            let rs = json!({
                "metadata": {
                    "name": rs_name, "namespace": ns, "labels": labels,
                    "annotations": {
                        "deployment.kubernetes.io/desired-replicas": replicas.to_string(),
                        "deployment.kubernetes.io/max-replicas": replicas.to_string(),
                        REVISION: new_revision,
                    },
                    "ownerReferences": [owner_ref(d, "apps/v1", "Deployment")],
                },
                "spec": {"replicas": replicas, "selector": selector, "template": template},
            });
            create(
                store,
                rs_key.clone(),
                rs,
                "apps/v1",
                "ReplicaSet",
                CONTROLLER,
                now,
            );
        }
    }
    if let Some(rs) = store.get(&rs_key) {
        let rs_revision = rs["metadata"]["annotations"][REVISION]
            .as_str()
            .unwrap_or(&new_revision)
            .to_string();
        replica_set(store, &rs_key, &rs, now);
        // The Deployment carries its newest ReplicaSet's revision (kubectl rollout undo
        // replaces /metadata/annotations, which must therefore exist).
        if let Some(d) = store.get(key) {
            set_annotation(store, key, &d, REVISION, &rs_revision, now);
        }
    }
    if let Some(d) = store.get(key) {
        deployment_status(store, key, &d, now);
    }
}

const REVISION: &str = "deployment.kubernetes.io/revision";

/// Sets one annotation as a controller would (an Update; no generation bump).
fn set_annotation(
    store: &mut Store,
    key: &ObjKey,
    old: &Value,
    name: &str,
    value: &str,
    now: &str,
) {
    if old["metadata"]["annotations"][name].as_str() == Some(value) {
        return;
    }
    let mut new = old.clone();
    if !new["metadata"]["annotations"].is_object() {
        new["metadata"]["annotations"] = json!({});
    }
    new["metadata"]["annotations"][name] = json!(value);
    write_update(store, key.clone(), old, new, CONTROLLER, None, now);
}

fn deployment_status(store: &mut Store, key: &ObjKey, d: &Value, now: &str) {
    let uid = d["metadata"]["uid"].as_str().unwrap_or_default();
    let hash = template_hash(&d["spec"]["template"]);
    let new_rs = format!("{}-{hash}", key.name);
    let (mut total, mut updated, mut ready) = (0, 0, 0);
    for (k, rs) in owned_by(store, "apps", "replicasets", &key.namespace, uid) {
        let s = &rs["status"];
        total += int(&s["replicas"]);
        ready += int(&s["readyReplicas"]);
        if k.name == new_rs {
            updated += int(&s["replicas"]);
        }
    }
    let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
    let complete = updated == want && ready == want && total == want;
    let available = ready >= want - max_unavailable(d, want);
    let conditions = vec![
        condition(
            "Available",
            available,
            if available {
                "MinimumReplicasAvailable"
            } else {
                "MinimumReplicasUnavailable"
            },
            if available {
                "Deployment has minimum availability."
            } else {
                "Deployment does not have minimum availability."
            },
            now,
            d,
        ),
        condition(
            "Progressing",
            true,
            if complete {
                "NewReplicaSetAvailable"
            } else {
                "ReplicaSetUpdated"
            },
            &if complete {
                format!("ReplicaSet \"{new_rs}\" has successfully progressed.")
            } else {
                format!("ReplicaSet \"{new_rs}\" is progressing.")
            },
            now,
            d,
        ),
    ];
    let mut status = omit_zero(json!({
        "observedGeneration": d["metadata"]["generation"],
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": (want - ready).max(0),
    }));
    status["conditions"] = json!(conditions);
    set_status(store, key, d, status, CONTROLLER, now);
}

fn max_unavailable(d: &Value, replicas: i64) -> i64 {
    let v = &d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"];
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) if s.ends_with('%') => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(25);
            replicas * pct / 100
        }
        _ => 0,
    }
}

fn replica_set(store: &mut Store, key: &ObjKey, rs: &Value, now: &str) {
    let ns = key.namespace.clone();
    let uid = rs["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let want = rs["spec"]["replicas"].as_i64().unwrap_or(1).max(0) as usize;
    let mut pods = owned_by(store, "", "pods", &ns, &uid);
    pods.sort_by(|a, b| {
        a.1["metadata"]["creationTimestamp"]
            .as_str()
            .cmp(&b.1["metadata"]["creationTimestamp"].as_str())
            .then(a.0.cmp(&b.0))
    });
    while pods.len() > want {
        let (k, _) = pods.pop().expect("more pods than wanted");
        remove_object(store, &k);
    }
    for _ in pods.len()..want {
        let name = format!("{}-{}", key.name, suffix(store));
        let pod = pod_from_template(
            rs,
            &rs["spec"]["template"],
            &name,
            &ns,
            owner_ref(rs, "apps/v1", "ReplicaSet"),
        );
        let pk = ObjKey::new("", "pods", &ns, &name);
        create(store, pk.clone(), pod, "v1", "Pod", CONTROLLER, now);
        run_pod(store, &pk, now);
    }
    for (k, _) in &pods {
        run_pod(store, k, now);
    }
    let pods = owned_by(store, "", "pods", &ns, &uid);
    let ready = pods.iter().filter(|(_, p)| pod_ready(p)).count() as i64;
    let Some(rs) = store.get(key) else {
        return;
    };
    let status = omit_zero(json!({
        "replicas": pods.len(),
        "fullyLabeledReplicas": pods.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": rs["metadata"]["generation"],
    }));
    set_status(store, key, &rs, status, CONTROLLER, now);
}

fn pod_from_template(
    owner: &Value,
    template: &Value,
    name: &str,
    ns: &str,
    owner_ref: Value,
) -> Value {
    let _ = owner;
    let mut meta = template["metadata"].clone();
    if !meta.is_object() {
        meta = json!({});
    }
    meta["name"] = json!(name);
    meta["namespace"] = json!(ns);
    meta["ownerReferences"] = json!([owner_ref]);
    let mut spec = template["spec"].clone();
    if spec["serviceAccountName"].is_null() {
        spec["serviceAccountName"] = json!("default");
        spec["serviceAccount"] = json!("default");
    }
    spec["enableServiceLinks"] = spec
        .get("enableServiceLinks")
        .cloned()
        .unwrap_or(json!(true));
    spec["priority"] = json!(0);
    json!({"metadata": meta, "spec": spec, "status": {"phase": "Pending", "qosClass": qos_class(&template["spec"])}})
}

fn pod_ready(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

// ---------------------------------------------------------------------------------------------
// StatefulSets, DaemonSets, Jobs

fn stateful_set(store: &mut Store, key: &ObjKey, s: &Value, now: &str) {
    let ns = key.namespace.clone();
    let uid = s["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let want = s["spec"]["replicas"].as_i64().unwrap_or(1).max(0);
    let revision = format!("{}-{}", key.name, template_hash(&s["spec"]["template"]));
    for (k, p) in owned_by(store, "", "pods", &ns, &uid) {
        let ordinal: i64 = k
            .name
            .rsplit('-')
            .next()
            .and_then(|o| o.parse().ok())
            .unwrap_or(i64::MAX);
        if ordinal >= want || p["metadata"]["labels"]["controller-revision-hash"] != json!(revision)
        {
            remove_object(store, &k);
        }
    }
    for i in 0..want {
        let name = format!("{}-{i}", key.name);
        let pk = ObjKey::new("", "pods", &ns, &name);
        if store.get(&pk).is_none() {
            let mut pod = pod_from_template(
                s,
                &s["spec"]["template"],
                &name,
                &ns,
                owner_ref(s, "apps/v1", "StatefulSet"),
            );
            pod["metadata"]["labels"]["controller-revision-hash"] = json!(revision);
            pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] = json!(name);
            pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = json!(i.to_string());
            pod["spec"]["hostname"] = json!(name);
            create(store, pk.clone(), pod, "v1", "Pod", CONTROLLER, now);
        }
        run_pod(store, &pk, now);
    }
    let pods = owned_by(store, "", "pods", &ns, &uid);
    let ready = pods.iter().filter(|(_, p)| pod_ready(p)).count() as i64;
    let Some(s) = store.get(key) else {
        return;
    };
    let mut status = omit_zero(json!({
        "observedGeneration": s["metadata"]["generation"],
        "replicas": pods.len(),
        "readyReplicas": ready,
        "currentReplicas": pods.len(),
        "updatedReplicas": pods.len(),
        "availableReplicas": ready,
    }));
    status["currentRevision"] = json!(revision);
    status["updateRevision"] = json!(revision);
    status["collisionCount"] = json!(0);
    set_status(store, key, &s, status, CONTROLLER, now);
}

fn daemon_set(store: &mut Store, key: &ObjKey, ds: &Value, now: &str) {
    let ns = key.namespace.clone();
    let uid = ds["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let template = &ds["spec"]["template"];
    let hash = template_hash(template);
    let eligible: Vec<String> = store
        .list("", "nodes", None)
        .filter(|(_, n)| node_ready(n) && fits_selector_and_taints(&template["spec"], n, true))
        .map(|(k, _)| k.name.clone())
        .collect();
    let mut covered = Vec::new();
    for (k, p) in owned_by(store, "", "pods", &ns, &uid) {
        let node = p["spec"]["nodeName"].as_str().unwrap_or("").to_string();
        let stale = p["metadata"]["labels"]["controller-revision-hash"] != json!(hash);
        if !eligible.contains(&node) || stale || covered.contains(&node) {
            remove_object(store, &k);
        } else {
            covered.push(node);
        }
    }
    for node in eligible.iter().filter(|n| !covered.contains(n)) {
        let name = format!("{}-{}", key.name, suffix(store));
        let mut pod = pod_from_template(
            ds,
            template,
            &name,
            &ns,
            owner_ref(ds, "apps/v1", "DaemonSet"),
        );
        pod["metadata"]["labels"]["controller-revision-hash"] = json!(hash);
        pod["spec"]["nodeName"] = json!(node);
        let pk = ObjKey::new("", "pods", &ns, &name);
        create(store, pk.clone(), pod, "v1", "Pod", CONTROLLER, now);
    }
    for (k, _) in owned_by(store, "", "pods", &ns, &uid) {
        run_pod(store, &k, now);
    }
    let pods = owned_by(store, "", "pods", &ns, &uid);
    let ready = pods.iter().filter(|(_, p)| pod_ready(p)).count() as i64;
    let Some(ds) = store.get(key) else {
        return;
    };
    let status = json!({
        "currentNumberScheduled": pods.len(),
        "desiredNumberScheduled": eligible.len(),
        "numberMisscheduled": 0,
        "numberReady": ready,
        "numberAvailable": ready,
        "updatedNumberScheduled": pods.len(),
        "observedGeneration": ds["metadata"]["generation"],
    });
    set_status(store, key, &ds, status, CONTROLLER, now);
}

fn job(store: &mut Store, key: &ObjKey, j: &Value, now: &str) {
    if j["status"]["completionTime"].is_string() || j["spec"]["suspend"] == json!(true) {
        return;
    }
    let ns = key.namespace.clone();
    let uid = j["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let completions = j["spec"]["completions"].as_i64().unwrap_or(1).max(0);
    let existing = owned_by(store, "", "pods", &ns, &uid).len() as i64;
    for _ in existing..completions {
        let name = format!("{}-{}", key.name, suffix(store));
        let mut pod = pod_from_template(
            j,
            &j["spec"]["template"],
            &name,
            &ns,
            owner_ref(j, "batch/v1", "Job"),
        );
        pod["metadata"]["labels"]["job-name"] = json!(key.name);
        pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] = json!(key.name);
        let pk = ObjKey::new("", "pods", &ns, &name);
        create(store, pk.clone(), pod, "v1", "Pod", CONTROLLER, now);
        run_pod(store, &pk, now);
    }
    let pods = owned_by(store, "", "pods", &ns, &uid);
    let succeeded = pods
        .iter()
        .filter(|(_, p)| p["status"]["phase"] == "Succeeded")
        .count() as i64;
    let Some(j) = store.get(key) else {
        return;
    };
    let mut status = json!({
        "startTime": j["status"]["startTime"].as_str().unwrap_or(now),
        "active": pods.len() as i64 - succeeded,
        "succeeded": succeeded,
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
    });
    if succeeded >= completions {
        status["completionTime"] = json!(now);
        status["conditions"] = json!([
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
        ]);
    }
    set_status(store, key, &j, omit_zero(status), CONTROLLER, now);
}

// ---------------------------------------------------------------------------------------------
// Scheduler and kubelet

/// Binds a pod to a node with room and starts it (kubelet), or marks it Unschedulable.
/// Returns whether the pod changed.
pub fn run_pod(store: &mut Store, key: &ObjKey, now: &str) -> bool {
    let Some(pod) = store.get(key) else {
        return false;
    };
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return false;
    }
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    if matches!(phase, "Running" | "Succeeded" | "Failed") {
        return false;
    }
    let mut node = pod["spec"]["nodeName"].as_str().unwrap_or("").to_string();
    if node.is_empty() {
        match pick_node(store, &pod) {
            Ok(n) => {
                let mut bound = pod.clone();
                bound["spec"]["nodeName"] = json!(n);
                record_update(
                    Some(&pod),
                    &mut bound,
                    &writer(SCHEDULER, "v1", Some("binding"), now),
                    true,
                );
                store.put(key.clone(), bound);
                node = n;
            }
            Err(message) => {
                let status = json!({
                    "phase": "Pending",
                    "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": null,
                                    "lastTransitionTime": pod["status"]["conditions"][0]["lastTransitionTime"].as_str().unwrap_or(now),
                                    "reason": "Unschedulable", "message": message}],
                    "qosClass": qos_class(&pod["spec"]),
                });
                let before = pod["status"].clone();
                set_status(store, key, &pod, status, SCHEDULER, now);
                return before
                    != store
                        .get(key)
                        .map(|p| p["status"].clone())
                        .unwrap_or_default();
            }
        }
    }
    let Some(pod) = store.get(key) else {
        return false;
    };
    let host_ip = store
        .get(&ObjKey::new("", "nodes", "", &node))
        .and_then(|n| {
            n["status"]["addresses"][0]["address"]
                .as_str()
                .map(String::from)
        })
        .unwrap_or_default();
    let is_job = pod["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|rs| rs.iter().any(|r| r["kind"] == "Job"));
    let containers = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .map(|c| {
            let state = if is_job {
                json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}})
            } else {
                json!({"running": {"startedAt": now}})
            };
            json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": !is_job, "started": !is_job,
                   "restartCount": 0, "state": state, "containerID": format!("containerd://{}", template_hash(&json!([key.name, c["name"]])))})
        })
        .collect();
    let ready = if is_job { "False" } else { "True" };
    let cond = |t: &str, s: &str| json!({"type": t, "status": s, "lastProbeTime": null, "lastTransitionTime": now});
    let status = json!({
        "phase": if is_job { "Succeeded" } else { "Running" },
        "conditions": [cond("PodReadyToStartContainers", "True"), cond("Initialized", "True"), cond("Ready", ready),
                       cond("ContainersReady", ready), cond("PodScheduled", "True")],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip(key),
        "podIPs": [{"ip": pod_ip(key)}],
        "startTime": now,
        "containerStatuses": statuses,
        "qosClass": qos_class(&pod["spec"]),
    });
    set_status(store, key, &pod, status, KUBELET, now);
    true
}

fn pod_ip(key: &ObjKey) -> String {
    let d = Sha256::digest(format!("{}/{}", key.namespace, key.name).as_bytes());
    format!("10.244.{}.{}", d[0], d[1].max(2))
}

fn qos_class(spec: &Value) -> &'static str {
    let cs = spec["containers"].as_array().cloned().unwrap_or_default();
    let has = |field: &str| {
        cs.iter().any(|c| {
            c["resources"][field]
                .as_object()
                .is_some_and(|m| !m.is_empty())
        })
    };
    if !has("requests") && !has("limits") {
        return "BestEffort";
    }
    let guaranteed = cs.iter().all(|c| {
        let l = &c["resources"]["limits"];
        ["cpu", "memory"]
            .iter()
            .all(|r| l[r].is_string() || l[r].is_number())
            && (c["resources"]["requests"].is_null() || c["resources"]["requests"] == *l)
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn node_ready(n: &Value) -> bool {
    n["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn fits_selector_and_taints(pod_spec: &Value, node: &Value, daemon: bool) -> bool {
    let selector_ok = pod_spec["nodeSelector"]
        .as_object()
        .is_none_or(|sel| sel.iter().all(|(k, v)| node["metadata"]["labels"][k] == *v));
    let affinity = &pod_spec["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    let affinity_ok = affinity.as_array().is_none_or(|terms| {
        terms.is_empty()
            || terms.iter().any(|t| {
                let sel = json!({"matchExpressions": t["matchExpressions"]});
                selector_matches(&sel, &node["metadata"]["labels"])
            })
    });
    let tolerations = pod_spec["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let taints_ok = node["spec"]["taints"].as_array().is_none_or(|taints| {
        taints.iter().all(|t| {
            let effect = t["effect"].as_str().unwrap_or("");
            effect == "PreferNoSchedule"
                || tolerations.iter().any(|tol| {
                    let key_ok = tol["key"].is_null() || tol["key"] == t["key"];
                    let op = tol["operator"].as_str().unwrap_or("Equal");
                    let value_ok = op == "Exists"
                        || tol["value"].as_str().unwrap_or("") == t["value"].as_str().unwrap_or("");
                    let effect_ok = tol["effect"]
                        .as_str()
                        .is_none_or(|e| e.is_empty() || e == effect);
                    key_ok && value_ok && effect_ok
                })
        })
    });
    let unschedulable_ok = daemon || node["spec"]["unschedulable"] != json!(true);
    selector_ok && affinity_ok && taints_ok && unschedulable_ok
}

/// What a pod asks for: (cpu cores, memory bytes), requests defaulting to limits.
pub fn pod_requests(spec: &Value) -> (f64, f64) {
    let mut cpu = 0.0;
    let mut mem = 0.0;
    for c in spec["containers"].as_array().into_iter().flatten() {
        let r = &c["resources"];
        let get = |res: &str| {
            r["requests"][res]
                .as_str()
                .or(r["limits"][res].as_str())
                .map(String::from)
                .or_else(|| r["requests"][res].as_f64().map(|n| n.to_string()))
        };
        cpu += get("cpu").and_then(|q| model_quantity(&q)).unwrap_or(0.0);
        mem += get("memory")
            .and_then(|q| model_quantity(&q))
            .unwrap_or(0.0);
    }
    (cpu, mem)
}

fn pick_node(store: &Store, pod: &Value) -> Result<String, String> {
    let (cpu, mem) = pod_requests(&pod["spec"]);
    let mut used: BTreeMap<String, (f64, f64, usize)> = BTreeMap::new();
    for (_, p) in store.list("", "pods", None) {
        let Some(node) = p["spec"]["nodeName"].as_str() else {
            continue;
        };
        if matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
            continue;
        }
        let (c, m) = pod_requests(&p["spec"]);
        let e = used.entry(node.to_string()).or_default();
        e.0 += c;
        e.1 += m;
        e.2 += 1;
    }
    let mut candidates = Vec::new();
    let (mut not_ready, mut no_cpu, mut no_mem, mut no_fit, mut total) = (0, 0, 0, 0, 0);
    for (k, n) in store.list("", "nodes", None) {
        total += 1;
        if !node_ready(&n) || !fits_selector_and_taints(&pod["spec"], &n, false) {
            if node_ready(&n) {
                no_fit += 1;
            } else {
                not_ready += 1;
            }
            continue;
        }
        let alloc = &n["status"]["allocatable"];
        let a_cpu = alloc["cpu"]
            .as_str()
            .and_then(model_quantity)
            .unwrap_or(0.0);
        let a_mem = alloc["memory"]
            .as_str()
            .and_then(model_quantity)
            .unwrap_or(0.0);
        let a_pods = alloc["pods"]
            .as_str()
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(110);
        let (u_cpu, u_mem, u_pods) = used.get(&k.name).copied().unwrap_or_default();
        let cpu_ok = u_cpu + cpu <= a_cpu + 1e-9;
        let mem_ok = u_mem + mem <= a_mem + 0.5;
        if !cpu_ok {
            no_cpu += 1;
        }
        if !mem_ok {
            no_mem += 1;
        }
        if cpu_ok && mem_ok && u_pods < a_pods {
            candidates.push((a_cpu - u_cpu - cpu, k.name.clone()));
        }
    }
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    if let Some((_, n)) = candidates.into_iter().next() {
        return Ok(n);
    }
    let mut reasons = Vec::new();
    if no_cpu > 0 {
        reasons.push(format!("{no_cpu} Insufficient cpu"));
    }
    if no_mem > 0 {
        reasons.push(format!("{no_mem} Insufficient memory"));
    }
    if no_fit > 0 {
        reasons.push(format!(
            "{no_fit} node(s) didn't match Pod's node affinity/selector or had untolerated taint"
        ));
    }
    if not_ready > 0 {
        reasons.push(format!(
            "{not_ready} node(s) had untolerated taint {{node.kubernetes.io/not-ready: }}"
        ));
    }
    Err(format!(
        "0/{total} nodes are available: {}.",
        reasons.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hashes_are_stable_and_short() {
        let a = template_hash(&json!({"spec": {"containers": [{"name": "a"}]}}));
        assert_eq!(a.len(), 10);
        assert_eq!(
            a,
            template_hash(&json!({"spec": {"containers": [{"name": "a"}]}}))
        );
        assert_ne!(
            a,
            template_hash(&json!({"spec": {"containers": [{"name": "b"}]}}))
        );
    }

    #[test]
    fn requests_default_to_limits() {
        let spec = json!({"containers": [
            {"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
            {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
        ]});
        let (cpu, mem) = pod_requests(&spec);
        assert!((cpu - 1.25).abs() < 1e-9);
        assert_eq!(mem, (64 + 1024) as f64 * 1024.0 * 1024.0);
    }

    #[test]
    fn taints_need_tolerations() {
        let node = json!({"metadata": {"labels": {"pool": "a"}}, "spec": {"taints": [{"key": "dedicated", "value": "pci", "effect": "NoSchedule"}]}});
        assert!(!fits_selector_and_taints(&json!({}), &node, false));
        let tol = json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "pci", "effect": "NoSchedule"}]});
        assert!(fits_selector_and_taints(&tol, &node, false));
        assert!(!fits_selector_and_taints(
            &json!({"nodeSelector": {"pool": "b"}, "tolerations": tol["tolerations"]}),
            &node,
            false
        ));
    }
}
