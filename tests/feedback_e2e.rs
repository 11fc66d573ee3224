//! OCM ManifestWork status feedback end to end: `gitfleet run` follows a real git repository
//! whose ManifestWork asks for a Deployment's well-known status, a JSONPath and a CEL condition
//! rule; the values and conditions read back from the member show in the status API and in
//! `gitfleet status`, as OCM reports them in the work's `status.resourceStatus`. On members
//! served by `gitfleet sim` and by real API servers (the test bed).
//!
//! OCM's semantics are unit-tested in src/feedback (ported from OCM's reader tests); this
//! checks that the values reach the user.

mod common;

use common::daemon::{await_until, Daemon};
use common::kubectl::Kubectl as _;
use common::members::{Backend, Members};
use common::{gitfleet, Repo};
use serde_json::{json, Value};

on_both_backends!(
    a_works_feedback_and_conditions_reach_the_status,
    a_status_written_on_the_member_after_the_push_is_read_back_at_once,
);

const FLEET: &str = r#"
anonymousAuth: true
members:
  - name: alpha
    nodes: [{count: 1, cpu: "4", memory: 16Gi, instanceType: D4}]
"#;

const WORK: &str = r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {name: web, namespace: alpha}
spec:
  manifestConfigs:
  - resourceIdentifier: {group: apps, resource: deployments, namespace: default, name: web}
    feedbackRules:
    - {type: WellKnownStatus}
    - type: JSONPaths
      jsonPaths:
      - {name: image, path: '.spec.template.spec.containers[0].image'}
      - {name: available, path: '.status.conditions[?(@.type=="Available")].status'}
    conditionRules:
    - type: CEL
      condition: AllReady
      celExpressions: ['object.status.readyReplicas == object.spec.replicas']
      messageExpression: 'result ? "all " + string(object.spec.replicas) + " ready" : "not all ready"'
  workload:
    manifests:
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web, namespace: default}
      spec:
        replicas: 1
        selector: {matchLabels: {app: web}}
        template:
          metadata: {labels: {app: web}}
          spec: {containers: [{name: web, image: 'web:1', resources: {requests: {cpu: 100m}}}]}
"#;

/// The work's status on `cluster` as the status API serves it, once it has any.
fn work_status(daemon: &Daemon, cluster: &str) -> Option<Value> {
    let run = gitfleet(&["status", "--server", &daemon.addr, "-o", "json"]);
    if run.code != 0 {
        return None;
    }
    let doc: Value = serde_json::from_str(&run.stdout).ok()?;
    doc["placements"]
        .as_array()?
        .iter()
        .find(|p| p["id"] == "mw/alpha/web")?["clusters"][cluster]
        .get("workStatus")
        .cloned()
}

fn value(manifest: &Value, name: &str) -> Value {
    manifest["statusFeedback"]["values"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == name))
        .map_or(Value::Null, |v| v["fieldValue"].clone())
}

fn a_works_feedback_and_conditions_reach_the_status(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &common::member_cluster("alpha"));
    repo.commit("the member");
    repo.write("works/web.yaml", WORK);
    repo.commit("a work with feedback rules");
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s").unwrap();
    let daemon = Daemon::start(
        repo.path(),
        &members.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1m",
    );
    // Read again while the Deployment is not available; its values settle once it is.
    let mut last = None;
    await_until("the Deployment's feedback with every replica ready", || {
        last = work_status(&daemon, "alpha");
        last.as_ref().is_some_and(|w| {
            let m = &w["resourceStatus"]["manifests"][0];
            value(m, "ReadyReplicas") == json!({"type": "Integer", "integer": 1})
        })
    });
    let w = last.unwrap();
    let m = &w["resourceStatus"]["manifests"][0];
    assert_eq!(
        m["resourceMeta"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment",
            "resource": "deployments", "namespace": "default", "name": "web"}),
        "{w:#}"
    );
    // WellKnownStatus: OCM's Deployment paths; JSONPaths: each by its name.
    assert_eq!(
        value(m, "Replicas"),
        json!({"type": "Integer", "integer": 1}),
        "{w:#}"
    );
    assert_eq!(
        value(m, "AvailableReplicas"),
        json!({"type": "Integer", "integer": 1}),
        "{w:#}"
    );
    assert_eq!(
        value(m, "image"),
        json!({"type": "String", "string": "web:1"}),
        "{w:#}"
    );
    assert_eq!(
        value(m, "available"),
        json!({"type": "String", "string": "True"}),
        "{w:#}"
    );
    let conditions = m["conditions"].as_array().unwrap();
    assert_eq!(
        conditions[0],
        json!({"type": "StatusFeedbackSynced", "status": "True", "reason": "StatusFeedbackSynced", "message": ""}),
        "{w:#}"
    );
    assert_eq!(
        conditions[1],
        json!({"type": "AllReady", "status": "True", "reason": "ConditionRuleEvaluated", "message": "all 1 ready"}),
        "{w:#}"
    );
    // The work's own condition, aggregated from its manifests' rule conditions.
    assert_eq!(
        w["conditions"],
        json!([{"type": "AllReady", "status": "True", "reason": "ConditionRulesAggregated", "message": "all 1 ready"}]),
        "{w:#}"
    );
    // `gitfleet status` describes them under the cluster.
    let run = gitfleet(&["status", "--server", &daemon.addr, "mw/alpha/web"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for line in [
        "feedback Deployment default/web: ReadyReplicas=1, Replicas=1, AvailableReplicas=1, image=\"web:1\", available=\"True\"",
        "condition Deployment default/web: AllReady True (ConditionRuleEvaluated: all 1 ready)",
        "work condition: AllReady True (ConditionRulesAggregated: all 1 ready)",
    ] {
        assert!(run.stdout.contains(line), "{line}\n{}", run.stdout);
    }
    // `gitfleet plan` lists the rules the work declares (the values exist only once applied).
    let path = repo.path().display().to_string();
    let run = gitfleet(&[
        "plan", "--repo", &path, "--base", "HEAD~1", "--head", "HEAD", "--format", "json",
    ]);
    // Exit 2: the head changes the fleet.
    assert_eq!(run.code, 2, "{}", run.stderr);
    let plan: Value = serde_json::from_str(&run.stdout).unwrap();
    let declared = plan["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "ManifestWork")
        .map(|p| p["feedback"][0].clone())
        .unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(
        declared["manifests"],
        json!(["Deployment default/web"]),
        "{declared:#}"
    );
    assert_eq!(
        declared["feedback"],
        json!([
            "WellKnownStatus",
            "image=.spec.template.spec.containers[0].image",
            "available=.status.conditions[?(@.type==\"Available\")].status"
        ])
    );
}

/// A work delivering a custom resource and its definition, reading the `phase` an operator on
/// the member writes into its status.
const WIDGET_WORK: &str = r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {name: widget, namespace: alpha}
spec:
  manifestConfigs:
  - resourceIdentifier: {group: example.com, resource: widgets, namespace: default, name: web}
    feedbackRules:
    - type: JSONPaths
      jsonPaths:
      - {name: phase, path: .status.phase}
  workload:
    manifests:
    - apiVersion: apiextensions.k8s.io/v1
      kind: CustomResourceDefinition
      metadata: {name: widgets.example.com}
      spec:
        group: example.com
        scope: Namespaced
        names: {plural: widgets, singular: widget, kind: Widget}
        versions:
        - name: v1
          served: true
          storage: true
          subresources: {status: {}}
          schema:
            openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    - apiVersion: example.com/v1
      kind: Widget
      metadata: {name: web, namespace: default}
      spec: {size: 3}
"#;

/// The Widget's `phase` as the status API serves it, once the work has a status.
fn widget_phase(daemon: &Daemon) -> Option<Value> {
    let run = gitfleet(&["status", "--server", &daemon.addr, "-o", "json"]);
    let doc: Value = serde_json::from_str(&run.stdout).ok()?;
    let placement = doc["placements"]
        .as_array()?
        .iter()
        .find(|p| p["id"] == "mw/alpha/widget")?
        .clone();
    let manifests = placement["clusters"]["alpha"]["workStatus"]["resourceStatus"]["manifests"]
        .as_array()?
        .clone();
    let widget = manifests
        .iter()
        .find(|m| m["resourceMeta"]["kind"] == "Widget")?;
    Some(value(widget, "phase"))
}

/// A status that changes after the push (an operator on the member reporting on its custom
/// resource, a Job completing) reaches the work's status through the members' watch, as OCM's
/// agent reports it, not at the next resync (ten minutes away here).
fn a_status_written_on_the_member_after_the_push_is_read_back_at_once(backend: Backend) {
    let members = Members::start(backend, FLEET);
    let repo = Repo::new();
    repo.write("members/alpha.yaml", &common::member_cluster("alpha"));
    repo.write("works/widget.yaml", WIDGET_WORK);
    repo.commit("a work reading a custom resource's status");
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("secret");
    std::fs::write(&secret, "s").unwrap();
    let daemon = Daemon::start_with(
        repo.path(),
        &members.kubeconfig,
        &state.path().join("state"),
        &secret,
        "1h",
        &[],
        &[(
            "GITFLEET_LOG",
            "info,gitfleet::daemon::watch=debug".as_ref(),
        )],
    );
    // Read at the push: the Widget exists, with no phase yet.
    await_until("the Widget's feedback, without a phase", || {
        widget_phase(&daemon) == Some(Value::Null)
    });
    daemon.await_log(&["watching", "Widget", "alpha"]);
    for phase in ["Provisioning", "Ready"] {
        let patch = format!(r#"{{"status":{{"phase":"{phase}"}}}}"#);
        let (code, _, err) = members.kubectl(
            "alpha",
            &[
                "patch",
                "widgets.example.com",
                "web",
                "-n",
                "default",
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch,
            ],
        );
        assert_eq!(code, 0, "{err}");
        await_until(&format!("the Widget's phase {phase} in the status"), || {
            widget_phase(&daemon) == Some(json!({"type": "String", "string": phase}))
        });
    }
    // Counted as what they were: status changes, no drift.
    let metrics = ureq::get(&format!("{}/metrics", daemon.addr))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let series = |cause: &str| {
        metrics.lines().find_map(|l| {
            let rest = l.strip_prefix(&format!(
                "gitfleet_member_changes_total{{member=\"alpha\",cause=\"{cause}\"}} "
            ))?;
            rest.parse::<u64>().ok()
        })
    };
    assert!(series("status").is_some_and(|n| n >= 2), "{metrics}");
    assert_eq!(series("changed"), None, "{metrics}");
    // A status update is no drift: nothing was restored, the spec is as committed.
    let widget = members.get_json("alpha", &["widgets.example.com", "web", "-n", "default"]);
    assert_eq!(widget["spec"]["size"], 3, "{widget:#}");
    let log = daemon.stop_and_read_log();
    assert!(
        !log.iter().any(|l| l.contains("restoring it")),
        "{}",
        log.join("\n")
    );
}
