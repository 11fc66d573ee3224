//! What a member holds when it starts, as a fresh cluster would: the system namespaces (each
//! with its `default` ServiceAccount and `kube-root-ca.crt`), the `kubernetes` Service, and the
//! nodes the fleet file describes, with capacity, allocatable, labels, taints and conditions.

use serde_json::{json, Value};

use super::api::{self, Target, WriteOptions};
use super::fleet_file::{MemberSpec, NodeGroup};
use super::store::{ObjKey, Store};

pub fn seed(store: &mut Store, spec: &MemberSpec, version: &str, now: &str) {
    let ns_rt = store
        .registry
        .by_kind("", None, "Namespace")
        .expect("namespaces are built in");
    let opts = WriteOptions {
        dry_run: false,
        manager: "kube-apiserver".into(),
        manager_given: true,
        force: false,
        now: now.into(),
    };
    for ns in ["default", "kube-node-lease", "kube-public", "kube-system"] {
        let t = Target {
            rt: ns_rt.clone(),
            namespace: None,
            name: None,
            subresource: None,
        };
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        api::create(store, &t, body, &opts).expect("system namespaces are valid");
    }
    let svc_rt = store
        .registry
        .by_kind("", None, "Service")
        .expect("services are built in");
    let t = Target {
        rt: svc_rt,
        namespace: Some("default".into()),
        name: None,
        subresource: None,
    };
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}});
    api::create(store, &t, svc, &opts).expect("the kubernetes service is valid");

    let mut index = 0u32;
    for (g, group) in spec.nodes.iter().enumerate() {
        let pool = group.pool_name(g);
        for i in 0..group.count {
            let name = format!("{}-{pool}-{i}", spec.name);
            let node = node(store, spec, group, &pool, &name, index, version, now);
            store.put(ObjKey::new("", "nodes", "", &name), node);
            index += 1;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn node(
    store: &mut Store,
    spec: &MemberSpec,
    group: &NodeGroup,
    pool: &str,
    name: &str,
    index: u32,
    version: &str,
    now: &str,
) -> Value {
    let mut labels = json!({
        "agentpool": pool,
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/role": "agent",
        "node-role.kubernetes.io/agent": "",
    });
    if let Some(it) = &group.instance_type {
        labels["node.kubernetes.io/instance-type"] = json!(it);
        labels["beta.kubernetes.io/instance-type"] = json!(it);
    }
    for (k, v) in &group.labels {
        labels[k] = json!(v);
    }
    let capacity = json!({
        "cpu": group.cpu, "memory": group.memory, "pods": group.pods.to_string(),
        "ephemeral-storage": "129886128Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
    });
    let allocatable = json!({
        "cpu": group.allocatable_cpu.clone().unwrap_or_else(|| group.cpu.clone()),
        "memory": group.allocatable_memory.clone().unwrap_or_else(|| group.memory.clone()),
        "pods": group.pods.to_string(),
        "ephemeral-storage": "119703055367", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
    });
    let cond = |t: &str, s: &str, reason: &str, message: &str| json!({"type": t, "status": s, "lastHeartbeatTime": now, "lastTransitionTime": now, "reason": reason, "message": message});
    let ready = if group.ready {
        cond(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        )
    } else {
        cond(
            "Ready",
            "False",
            "KubeletNotReady",
            "container runtime network not ready (simulated)",
        )
    };
    let mut node_spec = json!({
        "providerID": format!("sim://{}/{name}", spec.name),
        "podCIDR": format!("10.244.{index}.0/24"),
        "podCIDRs": [format!("10.244.{index}.0/24")],
    });
    if !group.taints.is_empty() {
        let taints: Vec<Value> = group
            .taints
            .iter()
            .map(|t| {
                let mut v = json!({"key": t.key, "effect": t.effect});
                if let Some(val) = &t.value {
                    v["value"] = json!(val);
                }
                v
            })
            .collect();
        node_spec["taints"] = json!(taints);
    }
    if group.unschedulable {
        node_spec["unschedulable"] = json!(true);
    }
    let uid = store.new_uid();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid,
            "creationTimestamp": now,
            "labels": labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": node_spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                ready,
            ],
            "addresses": [
                {"type": "InternalIP", "address": format!("10.224.{}.{}", index / 250, index % 250 + 4)},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": uid.replace('-', ""),
                "systemUUID": uid,
                "bootID": uid,
                "kernelVersion": "5.15.0-1079-azure",
                "osImage": "Ubuntu 22.04.5 LTS",
                "containerRuntimeVersion": "containerd://1.7.27",
                "kubeletVersion": version,
                "kubeProxyVersion": version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    })
}
