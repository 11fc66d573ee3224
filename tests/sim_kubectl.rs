//! The simulator checked with the real `kubectl`: what kubectl sends, the simulator answers as a
//! Kubernetes API server does. Where kubectl hides the wire (status codes, headers, watch
//! streams, tokens) the tests speak plain HTTP to the member.
//!
//! What a real server does is what kube-apiserver does (tests/sim_differential.rs compares the two).

mod common;
use common::kubectl::Kubectl as _;

use std::collections::BTreeSet;

use common::sim::{eventually, SimFleet};
use serde_json::{json, Value};

const FLEET: &str = r#"
anonymousAuth: true
kubernetesVersion: v1.32.7
members:
  - name: alpha
    workloadDelayMs: 20
    nodes:
      - count: 2
        pool: general
        cpu: "4"
        memory: 16Gi
        instanceType: Standard_D4s_v5
        labels: {topology.kubernetes.io/region: eastus}
      - count: 1
        pool: broken
        cpu: "2"
        memory: 8Gi
        ready: false
        taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
  - name: beta
    nodes:
      - count: 1
        cpu: "8"
        memory: 32Gi
        instanceType: Standard_D8s_v5
  - name: secure
    anonymousAuth: false
    token: s3cret
    nodes:
      - count: 1
"#;

fn start() -> SimFleet {
    SimFleet::start(FLEET)
}

/// Names of the items of a `kubectl get -o json` list.
fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn configmap(name: &str, labels: Value, data: Value) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "data": data,
    })
    .to_string()
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wg]}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: default, labels: {app: api}}
spec:
  replicas: 3
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - name: api
          image: nginx:1.27
          resources: {requests: {cpu: 500m, memory: 1Gi}}
"#;

#[test]
fn kubectl_lists_each_members_nodes() {
    let sim = start();
    let alpha = sim.get_json("alpha", &["nodes"]);
    assert_eq!(alpha["items"].as_array().unwrap().len(), 3);
    let beta = sim.get_json("beta", &["nodes"]);
    let items = beta["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["status"]["capacity"]["cpu"], "8");
}

#[test]
fn nodes_carry_the_fleet_files_shape_labels_taints_and_readiness() {
    let sim = start();
    let nodes = sim.get_json(
        "alpha",
        &[
            "nodes",
            "-l",
            "node.kubernetes.io/instance-type=Standard_D4s_v5",
        ],
    );
    let items = nodes["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "the general pool: {nodes}");
    for n in items {
        assert_eq!(
            n["metadata"]["labels"]["topology.kubernetes.io/region"],
            "eastus"
        );
        assert_eq!(n["status"]["capacity"]["cpu"], "4");
        assert_eq!(n["status"]["capacity"]["memory"], "16Gi");
        assert_eq!(ready_condition(n), "True");
    }
    let all = sim.get_json("alpha", &["nodes"]);
    let broken: Vec<&Value> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"]["capacity"]["cpu"] == "2")
        .collect();
    assert_eq!(broken.len(), 1);
    assert_eq!(ready_condition(broken[0]), "False");
    assert_eq!(
        broken[0]["spec"]["taints"],
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    );
}

fn ready_condition(node: &Value) -> String {
    node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| c["status"].as_str().unwrap().to_string())
        .expect("a Ready condition")
}

#[test]
fn kubectl_version_reports_the_fleet_files_kubernetes_version() {
    let sim = start();
    let (code, out, err) = sim.kubectl("alpha", &["version", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["serverVersion"]["gitVersion"], "v1.32.7");
    assert_eq!(v["serverVersion"]["major"], "1");
    assert_eq!(v["serverVersion"]["minor"], "32");
}

#[test]
fn api_resources_lists_built_in_kinds_and_a_crds_kind_once_applied() {
    let sim = start();
    let (code, out, err) = sim.kubectl("alpha", &["api-resources", "-o", "wide"]);
    assert_eq!(code, 0, "{err}");
    for (name, version, kind) in [
        ("deployments", "apps/v1", "Deployment"),
        ("statefulsets", "apps/v1", "StatefulSet"),
        ("daemonsets", "apps/v1", "DaemonSet"),
        ("configmaps", "v1", "ConfigMap"),
        ("namespaces", "v1", "Namespace"),
        (
            "customresourcedefinitions",
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
        ),
    ] {
        assert!(
            out.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.first() == Some(&name) && cols.contains(&version) && cols.contains(&kind)
            }),
            "{name} {version} {kind} missing from:\n{out}"
        );
    }
    assert!(!out.contains("example.com"), "no CRD yet:\n{out}");

    sim.apply("alpha", WIDGET_CRD, &[]);
    // Spec §4: once a CRD is established its group is in discovery.
    let (code, out, err) = sim.kubectl("alpha", &["api-resources", "--api-group=example.com"]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("widgets"))
        .unwrap_or_else(|| panic!("widgets missing:\n{out}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols, ["widgets", "wg", "example.com/v1", "true", "Widget"]);

    sim.apply(
        "alpha",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 3}\n",
        &[],
    );
    let list = sim.get_json("alpha", &["wg"]);
    assert_eq!(names(&list), set(&["w1"]));
    let w = sim.get_json("alpha", &["widgets.example.com", "w1"]);
    assert_eq!(w["spec"]["size"], 3);
    assert_eq!(w["kind"], "Widget");
    assert_eq!(w["metadata"]["generation"], 1);
}

#[test]
fn server_side_apply_creates_then_updates_with_resource_version_and_generation() {
    let sim = start();
    // resourceVersion: a ConfigMap has no controller writing to it, so its rv moves only with
    // our writes. Real servers give ConfigMaps no generation (no spec).
    let out = sim.apply("alpha", &configmap("rv", json!({}), json!({"a": "1"})), &[]);
    assert!(out.contains("configmap/rv serverside-applied"), "{out}");
    let first = sim.get_json("alpha", &["cm", "rv"]);
    let rv1 = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!first["metadata"]["uid"].as_str().unwrap().is_empty());
    assert!(first["metadata"]["creationTimestamp"].is_string());
    // The same apply again changes nothing, so the server writes nothing.
    sim.apply("alpha", &configmap("rv", json!({}), json!({"a": "1"})), &[]);
    let same = sim.get_json("alpha", &["cm", "rv"]);
    assert_eq!(same["metadata"]["resourceVersion"], rv1.as_str());
    sim.apply("alpha", &configmap("rv", json!({}), json!({"a": "2"})), &[]);
    let changed = sim.get_json("alpha", &["cm", "rv"]);
    let rv2 = changed["metadata"]["resourceVersion"].as_str().unwrap();
    assert_ne!(rv2, rv1);
    assert!(rv2.parse::<u64>().unwrap() > rv1.parse::<u64>().unwrap());
    assert_eq!(changed["data"]["a"], "2");
    assert_eq!(changed["metadata"]["uid"], first["metadata"]["uid"]);

    // generation: bumped by a spec change, not by a metadata change.
    sim.apply("alpha", DEPLOYMENT, &[]);
    let generation = |sim: &SimFleet| {
        sim.get_json("alpha", &["deploy", "api"])["metadata"]["generation"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(generation(&sim), 1);
    let relabelled = DEPLOYMENT.replace(
        "metadata: {name: api, namespace: default, labels: {app: api}}",
        "metadata: {name: api, namespace: default, labels: {app: api, team: blue}}",
    );
    assert_ne!(relabelled, DEPLOYMENT);
    sim.apply("alpha", &relabelled, &[]);
    let d = sim.get_json("alpha", &["deploy", "api"]);
    assert_eq!(d["metadata"]["labels"]["team"], "blue");
    assert_eq!(generation(&sim), 1, "a label is not spec");
    sim.apply(
        "alpha",
        &relabelled.replace("replicas: 3", "replicas: 2"),
        &[],
    );
    assert_eq!(generation(&sim), 2);
}

#[test]
fn label_selectors_equality_set_and_existence() {
    let sim = start();
    for (name, labels) in [
        ("web", json!({"app": "web", "tier": "front"})),
        ("api", json!({"app": "api", "tier": "back"})),
        ("db", json!({"app": "db"})),
        ("bare", json!({})),
    ] {
        sim.apply("alpha", &configmap(name, labels, json!({})), &[]);
    }
    let select = |sel: &str| {
        let list = sim.get_json("alpha", &["cm", "-l", sel]);
        let mut n = names(&list);
        // Every namespace has the root CA ConfigMap, as on a real cluster.
        n.remove("kube-root-ca.crt");
        n
    };
    assert_eq!(select("app=web"), set(&["web"]));
    assert_eq!(select("app==web"), set(&["web"]));
    assert_eq!(select("app=web,tier=front"), set(&["web"]));
    assert_eq!(select("app!=web"), set(&["api", "db", "bare"]));
    assert_eq!(select("app in (api,db)"), set(&["api", "db"]));
    assert_eq!(select("app notin (api,db)"), set(&["web", "bare"]));
    assert_eq!(select("tier"), set(&["web", "api"]));
    assert_eq!(select("!tier"), set(&["db", "bare"]));
    assert_eq!(select("app,!tier"), set(&["db"]));
    assert_eq!(select("app=nothing"), set(&[]));
    // A malformed selector is the server's 400, which kubectl reports.
    let (code, _, err) = sim.kubectl("alpha", &["get", "cm", "-l", "app in (x"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("unable to parse requirement") || err.contains("BadRequest"),
        "{err}"
    );
}

#[test]
fn get_json_has_the_shape_of_a_real_server() {
    let sim = start();
    sim.apply(
        "alpha",
        &configmap("shape", json!({"k": "v"}), json!({"a": "1"})),
        &[],
    );
    let one = sim.get_json("alpha", &["cm", "shape"]);
    assert_eq!(one["apiVersion"], "v1");
    assert_eq!(one["kind"], "ConfigMap");
    assert_eq!(one["metadata"]["namespace"], "default");
    for field in ["uid", "resourceVersion", "creationTimestamp"] {
        assert!(one["metadata"][field].is_string(), "{field} in {one}");
    }
    // kubectl hides managedFields unless asked.
    assert!(one["metadata"].get("managedFields").is_none());
    let with = sim.get_json("alpha", &["cm", "shape", "--show-managed-fields"]);
    let mf = &with["metadata"]["managedFields"][0];
    assert_eq!(mf["manager"], "kubectl");
    assert_eq!(mf["operation"], "Apply");
    assert_eq!(mf["fieldsType"], "FieldsV1");
    assert_eq!(mf["fieldsV1"]["f:data"]["f:a"], json!({}));

    // The list on the wire: <Kind>List with a resourceVersion, items without
    // apiVersion/kind for built-ins.
    let token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    let r = sim.http(
        "alpha",
        "GET",
        "/api/v1/namespaces/default/configmaps?labelSelector=k%3Dv",
        Some(&token),
        &[],
        "",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    let list = r.json();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["apiVersion"], "v1");
    assert!(!list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .is_empty());
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert!(list["items"][0].get("kind").is_none(), "{list}");
}

const OWNED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: default}\ndata: {a: \"1\"}\n";

#[test]
fn a_field_owned_by_another_manager_conflicts_until_forced() {
    let sim = start();
    sim.apply("alpha", OWNED, &[]);
    let theirs = OWNED.replace("a: \"1\"", "a: \"2\"");
    let (code, _, err) = sim.kubectl_stdin(
        "alpha",
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        &theirs,
    );
    assert_ne!(code, 0, "a conflict fails the apply");
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#),
        "{err}"
    );
    assert_eq!(sim.get_json("alpha", &["cm", "owned"])["data"]["a"], "1");
    // Applying the same value co-owns the field: no conflict.
    sim.apply("alpha", OWNED, &["--field-manager=cosigner"]);

    // The same conflict on the wire: 409 with a FieldManagerConflict cause.
    let token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "owned", "namespace": "default"}, "data": {"a": "3"}});
    let r = sim.http(
        "alpha",
        "PATCH",
        "/api/v1/namespaces/default/configmaps/owned?fieldManager=other",
        Some(&token),
        &[("Content-Type", "application/apply-patch+yaml")],
        &body.to_string(),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let status = r.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(status["code"], 409);
    let causes = status["details"]["causes"].as_array().unwrap();
    assert!(causes.iter().all(|c| c["reason"] == "FieldManagerConflict"));
    assert!(causes.iter().any(|c| c["field"] == ".data.a"));

    let out = sim.apply(
        "alpha",
        &theirs,
        &["--field-manager=other", "--force-conflicts"],
    );
    assert!(out.contains("serverside-applied"), "{out}");
    let cm = sim.get_json("alpha", &["cm", "owned", "--show-managed-fields"]);
    assert_eq!(cm["data"]["a"], "2");
    let owns_a = |manager: &str| {
        cm["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["manager"] == manager && e["fieldsV1"]["f:data"].get("f:a").is_some())
    };
    assert!(owns_a("other"));
    assert!(!owns_a("kubectl"), "forcing takes the field away: {cm}");
    assert!(!owns_a("cosigner"));
}

#[test]
fn apply_without_field_manager_and_with_a_wrong_name_are_rejected() {
    let sim = start();
    let token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    let apply = |path: &str, name: &str| {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        sim.http(
            "alpha",
            "PATCH",
            path,
            Some(&token),
            &[("Content-Type", "application/apply-patch+yaml")],
            &body.to_string(),
        )
    };
    let r = apply("/api/v1/namespaces/default/configmaps/x", "x");
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.json()["reason"], "Invalid");
    let r = apply(
        "/api/v1/namespaces/default/configmaps/x?fieldManager=m",
        "y",
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["reason"], "BadRequest");
}

#[test]
fn merge_patch_sets_and_removes_fields() {
    let sim = start();
    sim.apply(
        "alpha",
        &configmap("mp", json!({}), json!({"a": "1", "b": "2"})),
        &[],
    );
    let (code, out, err) = sim.kubectl(
        "alpha",
        &[
            "patch",
            "cm",
            "mp",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"a":null,"c":"3"},"metadata":{"labels":{"x":"y"}}}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("configmap/mp patched"), "{out}");
    let cm = sim.get_json("alpha", &["cm", "mp", "--show-managed-fields"]);
    assert_eq!(cm["data"], json!({"b": "2", "c": "3"}));
    assert_eq!(cm["metadata"]["labels"]["x"], "y");
    // A non-apply write is an Update entry under kubectl's patch manager.
    assert!(
        cm["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["manager"] == "kubectl-patch" && e["operation"] == "Update"),
        "{cm}"
    );
}

#[test]
fn delete_removes_an_object_and_missing_objects_are_not_found() {
    let sim = start();
    sim.apply("alpha", &configmap("gone", json!({}), json!({})), &[]);
    let (code, out, err) = sim.kubectl("alpha", &["delete", "cm", "gone"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(r#"configmap "gone" deleted"#), "{out}");
    let (code, _, err) = sim.kubectl("alpha", &["get", "cm", "gone"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        r#"Error from server (NotFound): configmaps "gone" not found"#
    );
    let (code, _, err) = sim.kubectl("alpha", &["delete", "cm", "gone"]);
    assert_eq!(code, 1);
    assert!(
        err.contains(r#"Error from server (NotFound): configmaps "gone" not found"#),
        "{err}"
    );

    // On the wire: a Status of kind Status, so clients tell it from an object.
    sim.apply("alpha", &configmap("gone2", json!({}), json!({})), &[]);
    let token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    let r = sim.http(
        "alpha",
        "DELETE",
        "/api/v1/namespaces/default/configmaps/gone2",
        Some(&token),
        &[("Content-Type", "application/json")],
        r#"{"propagationPolicy":"Background"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let s = r.json();
    assert_eq!(
        (s["kind"].as_str(), s["status"].as_str()),
        (Some("Status"), Some("Success"))
    );
    assert_eq!(s["details"]["name"], "gone2");
}

#[test]
fn get_of_a_missing_object_is_not_found() {
    let sim = start();
    let (code, out, err) = sim.kubectl("alpha", &["get", "deploy", "nope"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        err.trim(),
        r#"Error from server (NotFound): deployments.apps "nope" not found"#
    );
    let token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    let r = sim.http(
        "alpha",
        "GET",
        "/api/v1/namespaces/default/configmaps/nope",
        Some(&token),
        &[],
        "",
    );
    assert_eq!(r.status, 404);
    let s = r.json();
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["reason"], "NotFound");
    assert_eq!(s["code"], 404);
    assert_eq!(s["details"]["name"], "nope");
    assert_eq!(s["details"]["kind"], "configmaps");
}

#[test]
fn a_namespaced_object_needs_its_namespace() {
    let sim = start();
    let (code, _, err) = sim.kubectl_stdin(
        "alpha",
        &["apply", "--server-side", "-n", "missing", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains(r#"Error from server (NotFound): namespaces "missing" not found"#),
        "{err}"
    );
    // Once the namespace exists the same apply works.
    sim.apply(
        "alpha",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: missing}\n",
        &[],
    );
    sim.apply(
        "alpha",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        &["-n", "missing"],
    );
    let cm = sim.get_json("alpha", &["cm", "-n", "missing", "x"]);
    assert_eq!(cm["metadata"]["namespace"], "missing");
}

#[test]
fn deleting_a_namespace_deletes_what_is_in_it() {
    let sim = start();
    sim.apply(
        "alpha",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team}\n",
        &[],
    );
    sim.apply(
        "alpha",
        &DEPLOYMENT.replace("namespace: default", "namespace: team"),
        &[],
    );
    let (code, _, err) = sim.kubectl("alpha", &["delete", "ns", "team"]);
    assert_eq!(code, 0, "{err}");
    // A real server marks the namespace Terminating and its controller deletes the contents
    // before the namespace goes (the simulator does it within the request, a documented
    // divergence): await the end state.
    eventually("the namespace to go", || {
        let (code, _, _) = sim.kubectl("alpha", &["get", "ns", "team"]);
        (code == 1).then_some(())
    });
    for kind in ["cm", "deploy", "rs", "pods"] {
        let mut left = names(&sim.get_json("alpha", &[kind, "-n", "team"]));
        left.remove("kube-root-ca.crt");
        assert!(
            left.is_empty(),
            "{kind} left in a deleted namespace: {left:?}"
        );
    }
}

#[test]
fn delete_propagation_policy_orphan_keeps_dependents() {
    let sim = start();
    sim.apply("alpha", DEPLOYMENT, &[]);
    let rs = eventually("a ReplicaSet", || {
        let list = sim.get_json("alpha", &["rs", "-l", "app=api"]);
        names(&list).into_iter().next()
    });
    let (code, _, err) = sim.kubectl("alpha", &["delete", "deploy", "api", "--cascade=orphan"]);
    assert_eq!(code, 0, "{err}");
    let kept = sim.get_json("alpha", &["rs", &rs]);
    assert!(
        kept["metadata"]
            .get("ownerReferences")
            .is_none_or(|o| o.as_array().unwrap().is_empty()),
        "an orphan loses its owner reference: {kept}"
    );
    // The same Deployment applied again adopts the orphan (its selector matches) and is ready.
    sim.apply("alpha", DEPLOYMENT, &[]);
    eventually("the orphan adopted and the Deployment ready", || {
        let d = sim.get_json("alpha", &["deploy", "api"]);
        let rs = sim.get_json("alpha", &["rs", &rs]);
        (d["status"]["readyReplicas"] == 3
            && d["status"]["updatedReplicas"] == 3
            && rs["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"])
            .then_some(())
    });
    // Background (kubectl's default) lets the garbage collector delete dependents.
    sim.apply(
        "alpha",
        &DEPLOYMENT
            .replace("name: api,", "name: web,")
            .replace("app: api", "app: web"),
        &[],
    );
    eventually("web's pods", || {
        (names(&sim.get_json("alpha", &["pods", "-l", "app=web"])).len() == 3).then_some(())
    });
    let (code, _, err) = sim.kubectl("alpha", &["delete", "deploy", "web"]);
    assert_eq!(code, 0, "{err}");
    eventually("web's pods to go", || {
        names(&sim.get_json("alpha", &["pods", "-l", "app=web"]))
            .is_empty()
            .then_some(())
    });
}

#[test]
fn a_deployment_gets_status_and_pods_carrying_its_requests() {
    let sim = start();
    sim.apply("alpha", DEPLOYMENT, &[]);
    let d = eventually("readyReplicas 3", || {
        let d = sim.get_json("alpha", &["deploy", "api"]);
        (d["status"]["readyReplicas"] == 3).then_some(d)
    });
    assert_eq!(
        d["status"]["observedGeneration"],
        d["metadata"]["generation"]
    );
    assert_eq!(d["status"]["availableReplicas"], 3);
    assert_eq!(d["status"]["updatedReplicas"], 3);
    let pods = sim.get_json("alpha", &["pods", "-l", "app=api"]);
    let pods = pods["items"].as_array().unwrap();
    assert_eq!(pods.len(), 3);
    for p in pods {
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "500m", "memory": "1Gi"})
        );
        assert_eq!(p["status"]["phase"], "Running");
        let node = p["spec"]["nodeName"].as_str().expect("scheduled");
        assert!(
            node.contains("general"),
            "not on the NotReady, tainted node: {node}"
        );
    }
    // The requests count against the nodes: kubectl describe adds them up per node.
    let (code, out, err) = sim.kubectl("alpha", &["describe", "nodes"]);
    assert_eq!(code, 0, "{err}");
    let cpu_requested: u32 = out
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.first() == Some(&"cpu")).then(|| cols[1])
        })
        .map(|q| {
            q.strip_suffix('m')
                .map_or_else(|| q.parse::<u32>().unwrap() * 1000, |m| m.parse().unwrap())
        })
        .sum();
    assert_eq!(cpu_requested, 1500, "{out}");

    // Scaling down: status follows the new generation.
    sim.apply(
        "alpha",
        &DEPLOYMENT.replace("replicas: 3", "replicas: 1"),
        &[],
    );
    eventually("one pod", || {
        let d = sim.get_json("alpha", &["deploy", "api"]);
        let pods = names(&sim.get_json("alpha", &["pods", "-l", "app=api"]));
        (d["status"]["observedGeneration"] == 2
            && d["status"]["readyReplicas"] == 1
            && pods.len() == 1)
            .then_some(())
    });
}

#[test]
fn statefulsets_and_daemonsets_get_status_and_pods() {
    let sim = start();
    let sts = DEPLOYMENT
        .replace("kind: Deployment", "kind: StatefulSet")
        .replace("name: api,", "name: db,")
        .replace("app: api", "app: db")
        .replace("replicas: 3", "replicas: 2");
    let ds = DEPLOYMENT
        .replace("kind: Deployment", "kind: DaemonSet")
        .replace("name: api,", "name: agent,")
        .replace("app: api", "app: agent")
        .replace("  replicas: 3\n", "");
    sim.apply("alpha", &format!("{sts}\n---\n{ds}"), &[]);
    eventually("the StatefulSet ready", || {
        let s = sim.get_json("alpha", &["sts", "db"]);
        (s["status"]["readyReplicas"] == 2 && s["status"]["observedGeneration"] == 1).then_some(())
    });
    assert_eq!(
        names(&sim.get_json("alpha", &["pods", "-l", "app=db"])),
        set(&["db-0", "db-1"])
    );
    // One pod per schedulable node: the tainted node is skipped (its taint is not tolerated).
    let ds = eventually("the DaemonSet ready", || {
        let d = sim.get_json("alpha", &["ds", "agent"]);
        (d["status"]["numberReady"] == 2).then_some(d)
    });
    assert_eq!(ds["status"]["desiredNumberScheduled"], 2);
    assert_eq!(
        names(&sim.get_json("alpha", &["pods", "-l", "app=agent"])).len(),
        2
    );
}

#[test]
fn a_watch_streams_added_modified_and_deleted_events() {
    let sim = start();
    let token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    let r = sim.http(
        "alpha",
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Some(&token),
        &[],
        "",
    );
    let rv = r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}");
    let events = sim.watch_events(
        "alpha",
        &path,
        || {
            sim.apply("alpha", &configmap("w", json!({}), json!({"a": "1"})), &[]);
            sim.apply("alpha", &configmap("w", json!({}), json!({"a": "2"})), &[]);
            let (code, _, err) = sim.kubectl("alpha", &["delete", "cm", "w"]);
            assert_eq!(code, 0, "{err}");
        },
        |events| events.iter().any(|e| e["type"] == "DELETED"),
    );
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"], "{events:?}");
    let rvs: Vec<u64> = events
        .iter()
        .map(|e| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    assert!(rvs[0] > rv.parse::<u64>().unwrap());
    assert_eq!(events[1]["object"]["data"]["a"], "2");
    assert_eq!(events[0]["object"]["kind"], "ConfigMap");

    // Watching from rv 0 starts with synthetic ADDED events for what exists.
    let initial = sim.watch_events(
        "alpha",
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0",
        || {},
        |events| !events.is_empty(),
    );
    assert_eq!(initial[0]["type"], "ADDED");
    assert_eq!(initial[0]["object"]["metadata"]["name"], "kube-root-ca.crt");
}

#[test]
fn a_wrong_bearer_token_is_unauthorized() {
    let sim = start();
    let path = "/api/v1/namespaces";
    let wrong = sim.http("secure", "GET", path, Some("wrong"), &[], "");
    assert_eq!(wrong.status, 401);
    let s = wrong.json();
    assert_eq!(
        (s["kind"].as_str(), s["reason"].as_str(), s["code"].as_i64()),
        (Some("Status"), Some("Unauthorized"), Some(401))
    );
    assert_eq!(sim.http("secure", "GET", path, None, &[], "").status, 401);
    assert_eq!(
        sim.http("secure", "GET", path, Some("s3cret"), &[], "")
            .status,
        200
    );
    // A member with anonymous auth still refuses a wrong token.
    assert_eq!(
        sim.http("alpha", "GET", path, Some("wrong"), &[], "")
            .status,
        401
    );
    // kubectl sends no token over plain http, so it is refused by a member without anonymous
    // auth.
    let (code, _, err) = sim.kubectl("secure", &["get", "ns"]);
    assert_ne!(code, 0);
    assert!(err.contains("You must be logged in to the server"), "{err}");
}

#[test]
fn a_member_that_is_down_refuses_connections_until_it_is_up() {
    let sim = start();
    assert_eq!(sim.kubectl("beta", &["get", "ns"]).0, 0);
    sim.set_faults("beta", json!({"down": true}));
    let (code, _, err) = sim.kubectl("beta", &["get", "ns"]);
    assert_ne!(code, 0);
    assert!(err.contains("refused"), "{err}");
    // Other members are not affected.
    assert_eq!(sim.kubectl("alpha", &["get", "ns"]).0, 0);
    sim.set_faults("beta", json!({"down": false}));
    let (code, out, err) = sim.kubectl("beta", &["get", "ns", "default"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("default"));
    // The member kept its state while down.
    assert_eq!(
        sim.get_json("beta", &["nodes"])["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn injected_errors_503_429_and_latency() {
    let sim = start();
    sim.set_faults("beta", json!({"errorRate": 1.0, "errorCodes": [503]}));
    let (code, _, err) = sim.kubectl("beta", &["get", "ns"]);
    assert_ne!(code, 0);
    assert!(err.contains("ServiceUnavailable"), "{err}");
    let r = sim.http("beta", "GET", "/api/v1/namespaces", None, &[], "");
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["reason"], "ServiceUnavailable");

    // 429 tells the client when to come back, as the API server's priority and fairness does.
    sim.set_faults("beta", json!({"errorCodes": [429]}));
    let r = sim.http("beta", "GET", "/api/v1/namespaces", None, &[], "");
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    let s = r.json();
    assert_eq!(
        (s["reason"].as_str(), s["code"].as_i64()),
        (Some("TooManyRequests"), Some(429))
    );
    assert_eq!(s["details"]["retryAfterSeconds"], 1);
    assert!(sim.member("beta")["injectedErrors"].as_u64().unwrap() >= 3);

    // Latency slows requests down but they succeed (no timing is asserted).
    sim.set_faults("beta", json!({"errorRate": 0.0, "latencyMs": 100}));
    let (code, out, err) = sim.kubectl("beta", &["get", "ns", "default"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("default"));
    assert_eq!(sim.member("beta")["faults"]["latencyMs"], 100);
}

/// kubectl's typed generators send protobuf, which a real API server reads for every built-in
/// kind; the simulator reads it for the kinds those generators create.
#[test]
fn kubectl_create_generators_send_protobuf_and_it_is_understood() {
    let sim = start();
    for args in [
        &["create", "namespace", "shop"][..],
        &[
            "create",
            "configmap",
            "settings",
            "-n",
            "shop",
            "--from-literal=mode=fast",
        ],
        &[
            "create",
            "secret",
            "generic",
            "creds",
            "-n",
            "shop",
            "--from-literal=password=hunter2",
        ],
        &[
            "create",
            "deployment",
            "web",
            "-n",
            "shop",
            "--image=nginx:1.27",
            "--replicas=2",
            "--port=80",
        ],
        &[
            "create",
            "service",
            "clusterip",
            "web",
            "-n",
            "shop",
            "--tcp=80:8080",
        ],
        &[
            "create",
            "role",
            "reader",
            "-n",
            "shop",
            "--verb=get",
            "--resource=pods",
        ],
        &["create", "priorityclass", "high", "--value=1000"],
    ] {
        let (code, out, err) = sim.kubectl("alpha", args);
        assert_eq!(code, 0, "kubectl {args:?}: {err}");
        assert!(out.contains("created"), "{out}");
    }
    let cm = sim.get_json("alpha", &["cm", "settings", "-n", "shop"]);
    assert_eq!(cm["data"], json!({"mode": "fast"}));
    let secret = sim.get_json("alpha", &["secret", "creds", "-n", "shop"]);
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==");
    let svc = sim.get_json("alpha", &["svc", "web", "-n", "shop"]);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(
        sim.get_json("alpha", &["priorityclass", "high"])["value"],
        1000
    );
    let d = eventually("the created Deployment ready", || {
        let d = sim.get_json("alpha", &["deploy", "web", "-n", "shop"]);
        (d["status"]["readyReplicas"] == 2).then_some(d)
    });
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "nginx:1.27");
    assert_eq!(
        c["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );

    // A kind outside the simulator's protobuf table is refused by name, not half-read.
    let (code, _, err) = sim.kubectl(
        "alpha",
        &[
            "create",
            "ingress",
            "web",
            "-n",
            "shop",
            "--rule=shop.example/=web:80",
        ],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains(r#"does not decode protobuf for kind "Ingress""#),
        "{err}"
    );
}

#[test]
fn rollout_history_and_undo_follow_replica_set_revisions() {
    let sim = start();
    sim.apply("alpha", DEPLOYMENT, &[]);
    let ready_with = |image: &'static str, revision: &'static str| {
        eventually(
            &format!("{image} rolled out as revision {revision}"),
            || {
                let d = sim.get_json("alpha", &["deploy", "api"]);
                let c = &d["spec"]["template"]["spec"]["containers"][0];
                (c["image"] == image
                    && d["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                        == revision
                    && d["status"]["updatedReplicas"] == 3
                    && d["status"]["observedGeneration"] == d["metadata"]["generation"])
                    .then_some(())
            },
        )
    };
    ready_with("nginx:1.27", "1");
    let (code, _, err) = sim.kubectl("alpha", &["set", "image", "deploy/api", "api=nginx:1.28"]);
    assert_eq!(code, 0, "{err}");
    ready_with("nginx:1.28", "2");
    let (code, out, err) = sim.kubectl("alpha", &["rollout", "history", "deploy/api"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\n1 ") && out.contains("\n2 "), "{out}");
    // Undo brings revision 1's template back as revision 3 (a real controller renumbers it).
    let (code, out, err) = sim.kubectl("alpha", &["rollout", "undo", "deploy/api"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back"), "{out}");
    ready_with("nginx:1.27", "3");
    let (code, out, err) = sim.kubectl(
        "alpha",
        &["rollout", "status", "deploy/api", "--timeout=20s"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("successfully rolled out"), "{out}");
}

/// kubectl drain evicts through `pods/{name}/eviction` (protobuf bodies); a
/// PodDisruptionBudget that would be broken answers 429.
#[test]
fn drain_evicts_pods_and_disruption_budgets_hold_them() {
    let sim = start();
    sim.apply("alpha", DEPLOYMENT, &[]);
    let pods = eventually("three ready pods", || {
        let d = sim.get_json("alpha", &["deploy", "api"]);
        (d["status"]["readyReplicas"] == 3)
            .then(|| sim.get_json("alpha", &["pods", "-l", "app=api"]))
    });
    let victim = pods["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let node = pods["items"][0]["spec"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();

    let (code, _, err) = sim.kubectl(
        "alpha",
        &[
            "create",
            "pdb",
            "api",
            "--selector=app=api",
            "--min-available=3",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": victim, "namespace": "default"}});
    let r = sim.http(
        "alpha",
        "POST",
        &format!("/api/v1/namespaces/default/pods/{victim}/eviction"),
        Some(&token),
        &[("Content-Type", "application/json")],
        &eviction.to_string(),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    let s = r.json();
    assert_eq!(s["reason"], "TooManyRequests");
    assert_eq!(s["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert!(s["details"]["causes"][0]["message"]
        .as_str()
        .unwrap()
        .contains("needs 3 healthy pods and has 3"));
    sim.get_json("alpha", &["pod", &victim]);

    let (code, _, err) = sim.kubectl("alpha", &["delete", "pdb", "api"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = sim.kubectl(
        "alpha",
        &["drain", &node, "--ignore-daemonsets", "--timeout=20s"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("pod/{victim} evicted")), "{out}");
    assert!(out.contains(&format!("node/{node} drained")), "{out}");
    eventually("the pods replaced on another node", || {
        let pods = sim.get_json("alpha", &["pods", "-l", "app=api"]);
        let items = pods["items"].as_array().unwrap();
        (items.len() == 3
            && items.iter().all(|p| {
                p["spec"]["nodeName"] != node.as_str() && p["status"]["phase"] == "Running"
            }))
        .then_some(())
    });
    let n = sim.get_json("alpha", &["node", &node]);
    assert_eq!(n["spec"]["unschedulable"], true);
}

/// Requests use up the nodes' allocatable CPU: what does not fit stays Pending, as the
/// scheduler leaves it.
#[test]
fn pods_that_do_not_fit_stay_pending_and_the_deployment_is_partly_ready() {
    let sim = start();
    // Two schedulable 4-CPU nodes (the third is NotReady and tainted) hold eight 1-CPU pods.
    let big = DEPLOYMENT
        .replace("replicas: 3", "replicas: 10")
        .replace("cpu: 500m", "cpu: \"1\"");
    sim.apply("alpha", &big, &[]);
    let pods = eventually("8 running and 2 pending", || {
        let pods = sim.get_json("alpha", &["pods", "-l", "app=api"]);
        let items = pods["items"].as_array().unwrap().clone();
        let running = items
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        let pending = items
            .iter()
            .filter(|p| p["status"]["phase"] == "Pending")
            .count();
        (running == 8 && pending == 2).then_some(items)
    });
    let pending = pods
        .iter()
        .find(|p| p["status"]["phase"] == "Pending")
        .unwrap();
    assert!(pending["spec"].get("nodeName").is_none(), "{pending}");
    let scheduled = pending["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .expect("a PodScheduled condition");
    assert_eq!(scheduled["status"], "False");
    assert_eq!(scheduled["reason"], "Unschedulable");
    assert!(
        scheduled["message"]
            .as_str()
            .unwrap()
            .contains("Insufficient cpu"),
        "{scheduled}"
    );
    let d = eventually("the Deployment's status", || {
        let d = sim.get_json("alpha", &["deploy", "api"]);
        (d["status"]["readyReplicas"] == 8).then_some(d)
    });
    assert_eq!(d["status"]["replicas"], 10);
    assert_eq!(d["status"]["unavailableReplicas"], 2);
}

/// `kubectl get --watch` (a real watch from kubectl) sees changes as they happen.
#[test]
fn kubectl_get_watch_prints_events_as_they_happen() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    let sim = start();
    // kubectl prints nothing for an empty list, so there is one object before it starts.
    sim.apply(
        "alpha",
        &configmap("w1", json!({"watched": "yes"}), json!({"a": "1"})),
        &[],
    );
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&sim.kubeconfig)
        .args([
            "--context",
            "alpha",
            "get",
            "cm",
            "-l",
            "watched=yes",
            "--watch",
            "--output-watch-events",
        ])
        .env("KUBECACHEDIR", sim.dir.path().join("kube-cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut next = |what: &str| -> String {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("kubectl --watch printed no {what}; so far {seen:?}"));
        seen.push(line.clone());
        line
    };
    // The header, then the listed object as ADDED; the watch starts from the list's
    // resourceVersion, so no later change is missed whenever it begins.
    let header = next("header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["EVENT", "NAME", "DATA", "AGE"]
    );
    let added = next("ADDED");
    assert_eq!(
        added.split_whitespace().take(3).collect::<Vec<_>>(),
        ["ADDED", "w1", "1"]
    );
    sim.apply(
        "alpha",
        &configmap("w1", json!({"watched": "yes"}), json!({"a": "1", "b": "2"})),
        &[],
    );
    let modified = next("MODIFIED");
    assert_eq!(
        modified.split_whitespace().take(3).collect::<Vec<_>>(),
        ["MODIFIED", "w1", "2"]
    );
    // Not selected: no event.
    sim.apply(
        "alpha",
        &configmap("other", json!({}), json!({"a": "9"})),
        &[],
    );
    let (code, _, err) = sim.kubectl("alpha", &["delete", "cm", "w1"]);
    assert_eq!(code, 0, "{err}");
    let deleted = next("DELETED");
    assert_eq!(
        deleted.split_whitespace().take(3).collect::<Vec<_>>(),
        ["DELETED", "w1", "2"]
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A watch with a label selector sees an object leave it as DELETED and come back as ADDED,
/// as the API server's watch cache reports it.
#[test]
fn a_selective_watch_sees_objects_enter_and_leave_the_selection() {
    let sim = start();
    let token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    sim.apply(
        "alpha",
        &configmap("s", json!({"team": "a"}), json!({})),
        &[],
    );
    let r = sim.http(
        "alpha",
        "GET",
        "/api/v1/namespaces/default/configmaps?labelSelector=team%3Da",
        Some(&token),
        &[],
        "",
    );
    let rv = r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let relabel = |team: &str| {
        let (code, _, err) = sim.kubectl(
            "alpha",
            &["label", "cm", "s", &format!("team={team}"), "--overwrite"],
        );
        assert_eq!(code, 0, "{err}");
    };
    let events = sim.watch_events(
        "alpha",
        &format!("/api/v1/namespaces/default/configmaps?watch=true&labelSelector=team%3Da&resourceVersion={rv}"),
        || {
            relabel("b");
            relabel("c");
            relabel("a");
        },
        |events| events.len() >= 2,
    );
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["DELETED", "ADDED"], "{events:?}");
    assert_eq!(events[0]["object"]["metadata"]["labels"]["team"], "b");
    assert_eq!(events[1]["object"]["metadata"]["labels"]["team"], "a");
}

/// Simulated containers print nothing; kubectl logs reads that (and the API server's errors).
#[test]
fn kubectl_logs_reads_an_empty_log_and_the_servers_errors() {
    let sim = start();
    sim.apply("alpha", DEPLOYMENT, &[]);
    let pod = eventually("a running pod", || {
        let pods = sim.get_json("alpha", &["pods", "-l", "app=api"]);
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["status"]["phase"] == "Running")
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
    });
    let (code, out, err) = sim.kubectl("alpha", &["logs", &pod]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let (code, _, err) = sim.kubectl("alpha", &["logs", &pod, "-c", "nope"]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("container nope is not valid for pod {pod}")),
        "{err}"
    );
    let (code, _, err) = sim.kubectl("alpha", &["logs", "missing"]);
    assert_ne!(code, 0);
    assert!(err.contains(r#"pods "missing" not found"#), "{err}");
}

/// examples/sim-fleet.yaml serves the sample fleet's eight members with the node counts and
/// allocatable CPU of its inventory (examples/fleet-repo/.inventory/inventory.yaml).
#[test]
fn the_example_fleet_matches_the_sample_inventory() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let sim = SimFleet::start_file(
        &root.join("examples/sim-fleet.yaml"),
        tempfile::tempdir().unwrap(),
    );
    let inventory: Value = gitfleet::yaml::from_str(
        &std::fs::read_to_string(root.join("examples/fleet-repo/.inventory/inventory.yaml"))
            .unwrap(),
    )
    .unwrap();
    let members = ureq::get(&format!("{}/members", sim.admin))
        .header("authorization", sim.admin_auth())
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let members: Value = serde_json::from_str(&members).unwrap();
    let members = members["members"].as_array().unwrap();
    assert_eq!(members.len(), 8);
    for cluster in inventory["clusters"].as_array().unwrap() {
        let name = cluster["name"].as_str().unwrap();
        let member = members
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not simulated"));
        // The flaky member's injected errors are switched off, so kubectl's answers are certain.
        sim.set_faults(name, json!({"errorRate": 0.0}));
        let context = member["context"].as_str().unwrap();
        let nodes = sim.get_json(context, &["nodes"]);
        let nodes = nodes["items"].as_array().unwrap();
        let props = &cluster["properties"];
        assert_eq!(
            nodes.len().to_string(),
            props["kubernetes-fleet.io/node-count"].as_str().unwrap(),
            "{name}"
        );
        let cpu: u64 = nodes
            .iter()
            .map(|n| {
                n["status"]["allocatable"]["cpu"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum();
        assert_eq!(
            cpu.to_string(),
            props["resources.kubernetes-fleet.io/allocatable-cpu"]
                .as_str()
                .unwrap(),
            "{name}"
        );
    }
}

/// A typo in a built-in kind is refused as the API server refuses it: server-side apply cannot
/// type the patch (500, "field not declared in schema"); kubectl create (fieldValidation=Strict)
/// gets a strict decoding error.
#[test]
fn unknown_fields_of_built_in_kinds_are_refused() {
    let sim = start();
    let typo = DEPLOYMENT.replace("replicas: 3", "replica: 3");
    let (code, _, err) = sim.kubectl_stdin("alpha", &["apply", "--server-side", "-f", "-"], &typo);
    assert_ne!(code, 0);
    assert!(
        err.contains("Error from server: failed to create typed patch object (default/api; apps/v1, Kind=Deployment): .spec.replica: field not declared in schema"),
        "{err}"
    );
    let (code, _, err) = sim.kubectl_stdin("alpha", &["create", "-f", "-"], &typo);
    assert_ne!(code, 0);
    assert!(
        err.contains(r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replica""#),
        "{err}"
    );
    // Without strict validation the server drops what it does not know.
    let (code, _, err) =
        sim.kubectl_stdin("alpha", &["create", "--validate=false", "-f", "-"], &typo);
    assert_eq!(code, 0, "{err}");
    let d = sim.get_json("alpha", &["deploy", "api"]);
    assert!(d["spec"].get("replica").is_none(), "{d}");
    assert_eq!(d["spec"]["replicas"], 1, "the default");
    // A custom resource keeps any field (no schema in the simulator).
    sim.apply("alpha", WIDGET_CRD, &[]);
    sim.apply("alpha", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspek: {size: 1}\n", &[]);
    assert_eq!(sim.get_json("alpha", &["widget", "w"])["spek"]["size"], 1);
}

/// The admin endpoint hands out member tokens and takes members down: without its own token
/// (generated at start and written beside the kubeconfig, mode 0600, or given with
/// `--admin-token`) every request is refused, and the refusal leaks no member token.
#[test]
fn the_admin_endpoint_needs_its_own_token() {
    let sim = start();
    let file = sim.dir.path().join("kubeconfig.admin-token");
    assert!(
        sim.banner
            .contains(&format!("admin token file: {}", file.display())),
        "{}",
        sim.banner
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let member_token = sim.member("alpha")["token"].as_str().unwrap().to_string();
    let call = |method: &str, path: &str, auth: Option<&str>| {
        let url = format!("{}{path}", sim.admin);
        let mut req = ureq::http::Request::builder().method(method).uri(&url);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent();
        let mut r = agent
            .run(req.body(r#"{"down": true}"#.to_string()).unwrap())
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
    };
    for auth in [None, Some("Bearer wrong"), Some(member_token.as_str())] {
        for (method, path) in [
            ("GET", "/members"),
            ("GET", "/members/alpha"),
            ("GET", "/healthz"),
            ("POST", "/members/alpha/faults"),
        ] {
            let (code, body) = call(method, path, auth);
            assert_eq!(code, 401, "{method} {path} with {auth:?}: {body}");
            assert!(!body.contains(&member_token), "{body}");
        }
    }
    // Nothing was changed by the refused POSTs.
    assert_eq!(sim.member("alpha")["faults"]["down"], false);
    let (code, body) = call("GET", "/members", Some(&sim.admin_auth()));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(&member_token));

    // A token given on the command line is the one required.
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(&fleet, FLEET).unwrap();
    let chosen = SimFleet::start_args(&fleet, dir, &["--admin-token", "chosen-token"]);
    assert_eq!(chosen.admin_token, "chosen-token");
    assert_eq!(chosen.member("alpha")["name"], "alpha");
}

/// Faults given in the fleet file are in force from the start, and the admin endpoint lifts
/// them.
#[test]
fn faults_from_the_fleet_file_hold_from_the_start() {
    let sim = SimFleet::start(
        r#"
anonymousAuth: true
members:
  - name: throttled
    faults: {errorRate: 1.0, errorCodes: [429], latencyMs: 20}
  - name: dark
    faults: {down: true}
"#,
    );
    let r = sim.http("throttled", "GET", "/version", None, &[], "");
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(sim.member("throttled")["faults"]["latencyMs"], 20);
    let (code, _, err) = sim.kubectl("dark", &["get", "ns"]);
    assert_ne!(code, 0);
    assert!(err.contains("refused"), "{err}");
    sim.set_faults("dark", json!({"down": false}));
    sim.set_faults("throttled", json!({"errorRate": 0.0}));
    for member in ["dark", "throttled"] {
        let (code, out, err) = sim.kubectl(member, &["get", "ns", "default", "-o", "name"]);
        assert_eq!(
            (code, out.trim()),
            (0, "namespace/default"),
            "{member}: {err}"
        );
    }
}

/// The simulator has no RBAC: every authenticated request is allowed, so `kubectl auth can-i`
/// (a SelfSubjectAccessReview, sent as protobuf) says yes.
#[test]
fn kubectl_auth_can_i_is_always_yes() {
    let sim = start();
    for args in [
        &["auth", "can-i", "create", "deployments"][..],
        &["auth", "can-i", "delete", "nodes"],
        &["auth", "can-i", "get", "/healthz"],
    ] {
        let (code, out, err) = sim.kubectl("alpha", args);
        assert_eq!((code, out.trim()), (0, "yes"), "kubectl {args:?}: {err}");
    }
    let (code, out, err) = sim.kubectl(
        "alpha",
        &[
            "api-resources",
            "--api-group=authorization.k8s.io",
            "-o",
            "wide",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("selfsubjectaccessreviews"))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        [
            "selfsubjectaccessreviews",
            "authorization.k8s.io/v1",
            "false",
            "SelfSubjectAccessReview",
            "create"
        ]
    );
}

/// `kubectl create token` gets a token that authenticates to the member (the simulator has one
/// credential per member: its bearer token).
#[test]
fn kubectl_create_token_issues_a_working_token() {
    let sim = start();
    let (code, out, err) = sim.kubectl("alpha", &["create", "token", "default", "--duration=2h"]);
    assert_eq!(code, 0, "{err}");
    let token = out.trim();
    assert_eq!(token, sim.member("alpha")["token"].as_str().unwrap());
    let r = sim.http("alpha", "GET", "/api/v1/namespaces", Some(token), &[], "");
    assert_eq!(r.status, 200);
    let (code, _, err) = sim.kubectl("alpha", &["create", "token", "nobody"]);
    assert_ne!(code, 0);
    assert!(
        err.contains(r#"serviceaccounts "nobody" not found"#),
        "{err}"
    );
    let (code, _, err) = sim.kubectl("alpha", &["create", "token", "default", "--duration=1m"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
}
