//! Scheduler and rendering scenarios: every file in tests/scenarios/ holds a commit's objects, an
//! inventory, previous results and what is expected of each placement; this one test runs them
//! all, through the library's own entry points: [`gitfleet::analyze`] (what `validate` checks),
//! [`schedule_commit`], [`render_cluster`] (what `gitfleet render`, `plan` and the daemon render)
//! and one rolling step of [`gitfleet::rollout::step`] with [`conditions::of_step`] (the
//! per-cluster conditions the daemon's status API reports).
//!
//! Format:
//! ```yaml
//! description: one line
//! now: 1767225600                     # unix seconds (optional)
//! repo: [objects of the commit]
//! inventory: {clusters: [...]}        # optional (docs/guides/concepts.md)
//! previous: {<placement id>: <a PlacementSchedule as `schedule -o json` keeps it>}
//! expect:
//!   <placement id>:                   # crp/<name>, rp/<ns>/<name>, ocm/<ns>/<name>, mw/<ns>/<name>
//!     selected: [names]               # exact
//!     decisions: [{cluster, selected, affinityScore, topologySpreadScore, score, reason}]
//!                                     # each listed cluster must have a decision with these fields
//!     decisionOrder: [names]          # optional: the exact order of all decisions
//!     conditions: [{type, status, reason, message}]   # listed fields compared
//!     bindings: [{cluster, state, ...}]               # optional, exact
//!     diagnostics: [{field, message}] # the commit is invalid: exactly these diagnostics are at
//!                                     # this placement (listed fields compared, in order)
//!     render:                         # KubeFleet placements: what each listed cluster gets
//!       <cluster>:
//!         absent: true                # the placement sends this cluster nothing (not selected)
//!         objects: [Kind/ns/name]     # exact identities of its manifests, in apply order
//!         manifests:                  # each compared whole with the rendered one of its identity
//!         - {apiVersion: v1, kind: ConfigMap, ...}          # a plain object: not from an envelope
//!         - {object: {...}, carriedBy: ResourceEnvelope app/env}   # or with its envelope
//!         error: substring            # rendering fails for this cluster with this in its message
//!         conditions: [{type, status, reason, message}]   # this cluster's status conditions
//!                                     # after the daemon's first step: all of them, in order;
//!                                     # listed fields compared
//! ```
//! Without `objects`, the identities of `manifests` are the exact list, so an extra object fails.
//! `manifests`/`objects` and `error` exclude each other; `absent` stands alone. A scenario with `diagnostics` is
//! neither scheduled nor rendered (neither `plan`, `render` nor the daemon goes further), and
//! every diagnostic of its commit must be expected at some placement.

mod common;
use gitfleet::catalog::{Catalog, Diagnostic, SourceFile};
use gitfleet::model::PlacementKey;
use gitfleet::render::cluster::render_cluster;
use gitfleet::render::{ClusterTarget, Manifest};
use gitfleet::rollout::conditions::{self, ClusterConditions};
use gitfleet::rollout::{Input, Pacing, RolloutState, StagedInput};
use gitfleet::schedule::{schedule_commit, Fleet, Inventory, PlacementSchedule, Previous};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

fn run_scenario(path: &std::path::Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc: Value =
        gitfleet::yaml::from_str(&text).map_err(|e| format!("bad scenario YAML: {e}"))?;
    let objects = doc["repo"].as_array().ok_or("no repo")?;
    let files: Vec<SourceFile> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| SourceFile {
            path: format!("objects/{i:04}.json"),
            content: serde_json::to_vec(o).unwrap(),
        })
        .collect();
    let expect = doc["expect"].as_object().ok_or("no expect")?;
    let (cat, diags) = gitfleet::analyze(&files);
    if !diags.is_empty() || expect.values().any(|w| w.get("diagnostics").is_some()) {
        return check_diagnostics(&cat, &diags, expect);
    }
    let inventory: Option<Inventory> = match doc.get("inventory") {
        Some(v) if !v.is_null() => {
            Some(serde_json::from_value(v.clone()).map_err(|e| format!("inventory: {e}"))?)
        }
        _ => None,
    };
    // `policyHash: $current` in a previous result means "the policy as this commit has it".
    let mut previous_json = doc.get("previous").cloned().unwrap_or(Value::Null);
    if let Some(map) = previous_json.as_object_mut() {
        for p in map.values_mut() {
            if p["policyHash"] == "$current" {
                let name = p["name"].as_str().unwrap_or_default();
                let ns = p["namespace"].as_str();
                let entry = cat
                    .placement(name, ns)
                    .ok_or(format!("previous names unknown placement {name}"))?;
                p["policyHash"] =
                    gitfleet::snapshot::policy_hash(&entry.spec.spec.policy_or_default()).into();
            }
        }
    }
    let previous: Previous = match previous_json {
        Value::Null => Previous::new(),
        // Keyed by placement id in the scenario files.
        v => serde_json::from_value::<std::collections::BTreeMap<String, _>>(v)
            .map_err(|e| format!("previous: {e}"))?
            .into_iter()
            .map(|(id, p)| Ok((id.parse().map_err(|e| format!("previous: {e}"))?, p)))
            .collect::<Result<_, String>>()?,
    };
    let now = doc["now"].as_i64().unwrap_or(1_767_225_600);
    let fleet = Fleet::build(&cat, inventory.as_ref());
    let invalid = gitfleet::snapshot::invalid_selections(&cat);
    let results = schedule_commit(&cat, &invalid, &fleet, &previous, now);
    let world = World {
        cat: &cat,
        fleet: &fleet,
        schedule: &results,
        status: status_of(&cat, &fleet, &results, now),
    };
    let mut errors = Vec::new();
    for (id, want) in expect {
        let Some(got) = results.iter().find(|r| r.key.to_string() == *id) else {
            errors.push(format!("{id}: not scheduled"));
            continue;
        };
        check(id, want, got, &mut errors);
        if let Some(render) = want.get("render") {
            check_render(id, render, got, &world, &mut errors);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// What a scenario's rendering expectations are checked against.
struct World<'a> {
    cat: &'a Catalog,
    fleet: &'a Fleet,
    schedule: &'a [Arc<PlacementSchedule>],
    /// Per placement, its per-cluster conditions after the daemon's first step.
    status: BTreeMap<PlacementKey, Vec<ClusterConditions>>,
}

/// The daemon's first rolling step from an empty state, and the per-cluster conditions its
/// status API reports from it (src/daemon/reconciler.rs: `step_memoized`, then `of_step` with
/// what the state holds, here nothing: no push has been made yet).
fn status_of(
    cat: &Catalog,
    fleet: &Fleet,
    schedule: &[Arc<PlacementSchedule>],
    now: i64,
) -> BTreeMap<PlacementKey, Vec<ClusterConditions>> {
    let unreachable = BTreeMap::new();
    let input = Input {
        cat,
        commit: "scenario",
        schedule,
        fleet,
        unreachable: &unreachable,
        only: None,
        now: now as u64,
        staged: StagedInput::default(),
        selected: None,
    };
    let decision = gitfleet::rollout::step(&input, &RolloutState::default(), Pacing::Rolling);
    decision
        .steps
        .iter()
        .map(|s| {
            let sched = schedule.iter().find(|p| p.key == s.placement).map(|p| &**p);
            let (_, per_cluster) = conditions::of_step(s, sched, None);
            (s.placement.clone(), per_cluster)
        })
        .collect()
}

/// An invalid commit: each placement's expected diagnostics, and no diagnostic unexpected.
fn check_diagnostics(
    cat: &Catalog,
    diags: &[Diagnostic],
    expect: &serde_json::Map<String, Value>,
) -> Result<(), String> {
    let shown = |ds: &[&Diagnostic]| -> String {
        let lines: Vec<String> = ds.iter().map(|d| format!("  {d}")).collect();
        if lines.is_empty() {
            "  (none)".to_string()
        } else {
            lines.join("\n")
        }
    };
    let mut errors = Vec::new();
    let mut claimed = vec![false; diags.len()];
    for (id, want) in expect {
        let others: Vec<&String> = want
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys())
            .filter(|k| *k != "diagnostics")
            .collect();
        if !others.is_empty() {
            errors.push(format!(
                "{id}: expects {others:?}, but an invalid commit is neither scheduled nor rendered"
            ));
        }
        let key: PlacementKey = id.parse().map_err(|e| format!("{id}: {e}"))?;
        let Some(entry) = cat.placement(&key.name, key.namespace.as_deref()) else {
            errors.push(format!("{id}: no such placement in the repo"));
            continue;
        };
        let object = &cat.objects[entry.index];
        let (name, file) = (object.display_name(), &object.origin.file);
        let mine: Vec<(usize, &Diagnostic)> = diags
            .iter()
            .enumerate()
            .filter(|(_, d)| d.object == name && d.origin.file == *file)
            .collect();
        let wanted = want["diagnostics"].as_array().cloned().unwrap_or_default();
        let matches = mine.len() == wanted.len()
            && mine.iter().zip(&wanted).all(|((_, d), w)| {
                let got = serde_json::json!({"field": d.field, "message": d.message});
                w.as_object()
                    .is_some_and(|w| w.iter().all(|(k, v)| got.get(k) == Some(v)))
            });
        if !matches {
            errors.push(format!(
                "{id}: diagnostics at the placement:\n{}\nwant {}",
                shown(&mine.iter().map(|(_, d)| *d).collect::<Vec<_>>()),
                Value::Array(wanted)
            ));
        }
        for (i, _) in mine {
            claimed[i] = true;
        }
    }
    let unexpected: Vec<&Diagnostic> = diags
        .iter()
        .zip(&claimed)
        .filter(|(_, c)| !**c)
        .map(|(d, _)| d)
        .collect();
    if !unexpected.is_empty() {
        errors.push(format!(
            "the scenario's repo is invalid:\n{}",
            shown(&unexpected)
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// `Kind/namespace/name` or `Kind/name`, as gitfleet names objects in its messages.
fn identity(value: &Value) -> String {
    let text = |p: &str| value.pointer(p).and_then(Value::as_str).unwrap_or_default();
    match value.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => format!("{}/{}/{}", text("/kind"), ns, text("/metadata/name")),
        None => format!("{}/{}", text("/kind"), text("/metadata/name")),
    }
}

fn check_render(
    id: &str,
    want: &Value,
    got: &PlacementSchedule,
    world: &World,
    errors: &mut Vec<String>,
) {
    let Some(clusters) = want.as_object() else {
        errors.push(format!(
            "{id}: render must map cluster names to expectations"
        ));
        return;
    };
    for (cluster, w) in clusters {
        let at = format!("{id}: render {cluster}");
        let known = ["absent", "objects", "manifests", "error", "conditions"];
        let Some(w) = w.as_object() else {
            errors.push(format!("{at}: expected a map"));
            continue;
        };
        if let Some(k) = w.keys().find(|k| !known.contains(&k.as_str())) {
            errors.push(format!("{at}: unknown key {k:?} (known: {known:?})"));
            continue;
        }
        let has = |k: &str| w.contains_key(k);
        if (has("absent") && w.len() > 1) || (has("error") && (has("manifests") || has("objects")))
        {
            errors.push(format!(
                "{at}: `absent` stands alone, and `error` excludes `manifests`/`objects`"
            ));
            continue;
        }
        let Some(member) = world.fleet.get(cluster) else {
            errors.push(format!("{at}: no such cluster in the fleet"));
            continue;
        };
        let target = ClusterTarget {
            name: cluster,
            labels: &member.labels,
        };
        let rendered = render_cluster(world.cat, world.schedule, &target)
            .into_iter()
            .find(|p| p.placement == got.key);
        let absent = w.get("absent") == Some(&Value::Bool(true));
        let manifests = match (absent, rendered) {
            (true, None) => continue,
            (true, Some(p)) => {
                errors.push(format!(
                    "{at}: want nothing, but the placement sends it {}",
                    describe(&p.manifests)
                ));
                continue;
            }
            (false, None) => {
                errors.push(format!(
                    "{at}: the placement sends this cluster nothing (selected: {:?})",
                    got.selected
                ));
                continue;
            }
            (false, Some(p)) => p.manifests,
        };
        match (w.get("error"), manifests) {
            (Some(want_err), Err(e)) => {
                let want_err = want_err.as_str().unwrap_or_default();
                if !e.to_string().contains(want_err) {
                    errors.push(format!(
                        "{at}: rendering fails with\n  {e}\nwhich does not contain\n  {want_err}"
                    ));
                }
            }
            (Some(want_err), Ok(ms)) => errors.push(format!(
                "{at}: want the rendering error {want_err}, but it renders {}",
                describe(&Ok(ms))
            )),
            (None, Err(e)) => errors.push(format!("{at}: rendering fails: {e}")),
            (None, Ok(ms)) => check_manifests(&at, w, &ms, errors),
        }
        if let Some(want_conds) = w.get("conditions") {
            let got_conds = world
                .status
                .get(&got.key)
                .and_then(|cs| cs.iter().find(|c| c.cluster == *cluster))
                .map(|c| serde_json::to_value(&c.conditions).unwrap())
                .unwrap_or(Value::Array(vec![]));
            // The whole list, in order (as KubeFleet's tests compare a binding's conditions).
            let types = |cs: &Value| -> Vec<String> {
                cs.as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| c["type"].as_str().unwrap_or_default().to_string())
                    .collect()
            };
            if types(want_conds) != types(&got_conds) {
                errors.push(format!(
                    "{at}: condition types {:?}, want {:?}; conditions: {got_conds}",
                    types(&got_conds),
                    types(want_conds)
                ));
            }
            check_condition_fields(&at, want_conds, &got_conds, errors);
        }
    }
}

/// Each wanted condition (a list of maps) is in `got` by its type, with the fields it lists.
fn check_condition_fields(at: &str, want: &Value, got: &Value, errors: &mut Vec<String>) {
    for w in want.as_array().into_iter().flatten() {
        let ty = &w["type"];
        let Some(c) = got
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == *ty))
        else {
            errors.push(format!("{at}: no condition {ty}; conditions: {got}"));
            continue;
        };
        for (field, value) in w.as_object().into_iter().flatten() {
            if c.get(field) != Some(value) {
                errors.push(format!(
                    "{at}: condition {ty}.{field} = {}, want {value}",
                    c[field]
                ));
            }
        }
    }
}

/// The rendered identities (with their envelope), or the error, for failure messages.
fn describe(manifests: &Result<Vec<Manifest>, gitfleet::render::RenderError>) -> String {
    match manifests {
        Ok(ms) => {
            let ids: Vec<String> = ms
                .iter()
                .map(|m| match &m.envelope {
                    Some(e) => format!("{} (carried by {e})", identity(&m.value)),
                    None => identity(&m.value),
                })
                .collect();
            format!("{ids:?}")
        }
        Err(e) => format!("the error: {e}"),
    }
}

fn check_manifests(
    at: &str,
    want: &serde_json::Map<String, Value>,
    got: &[Manifest],
    errors: &mut Vec<String>,
) {
    // Each listed manifest: the object and the envelope that carried it (none for a bare object).
    let listed: Vec<(&Value, Option<&str>)> = want
        .get("manifests")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| match m.get("object") {
            Some(o) => (o, m.get("carriedBy").and_then(Value::as_str)),
            None => (m, None),
        })
        .collect();
    let want_ids: Vec<String> = match want.get("objects") {
        Some(ids) => ids
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect(),
        None => listed.iter().map(|(o, _)| identity(o)).collect(),
    };
    let got_ids: Vec<String> = got.iter().map(|m| identity(&m.value)).collect();
    if got_ids != want_ids {
        errors.push(format!(
            "{at}: objects {}, want {want_ids:?}",
            describe(&Ok(got.to_vec()))
        ));
    }
    for (object, carried_by) in listed {
        let id = identity(object);
        let Some(m) = got.iter().find(|m| identity(&m.value) == id) else {
            errors.push(format!("{at}: {id} is not rendered"));
            continue;
        };
        if *m.value != *object {
            errors.push(format!(
                "{at}: {id} renders as\n  {}\nwant\n  {}",
                m.value, object
            ));
        }
        let got_by = m.envelope.as_ref().map(|e| e.to_string());
        if got_by.as_deref() != carried_by {
            errors.push(format!(
                "{at}: {id} carried by {got_by:?}, want {carried_by:?}"
            ));
        }
    }
}

fn check(id: &str, want: &Value, got: &PlacementSchedule, errors: &mut Vec<String>) {
    let got_json = serde_json::to_value(got).unwrap();
    if let Some(sel) = want.get("selected") {
        if *sel != serde_json::json!(got.selected) {
            errors.push(format!("{id}: selected {:?}, want {sel}", got.selected));
        }
    }
    for w in want["decisions"].as_array().into_iter().flatten() {
        let cluster = w["cluster"].as_str().unwrap_or_default();
        let Some(d) = got_json["decisions"]
            .as_array()
            .and_then(|ds| ds.iter().find(|d| d["cluster"] == cluster))
        else {
            errors.push(format!(
                "{id}: no decision for {cluster}; decisions: {}",
                got_json["decisions"]
            ));
            continue;
        };
        for (field, value) in w.as_object().unwrap() {
            let actual = d.get(field).unwrap_or(&Value::Null);
            if actual != value {
                errors.push(format!(
                    "{id}: decision {cluster}.{field} = {actual}, want {value}"
                ));
            }
        }
    }
    if let Some(order) = want.get("decisionOrder") {
        let got_order: Vec<&Value> = got_json["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["cluster"])
            .collect();
        if serde_json::json!(got_order) != *order {
            errors.push(format!("{id}: decision order {got_order:?}, want {order}"));
        }
    }
    check_condition_fields(id, &want["conditions"], &got_json["conditions"], errors);
    if let Some(b) = want.get("bindings") {
        if got_json["bindings"] != *b {
            errors.push(format!("{id}: bindings {}, want {b}", got_json["bindings"]));
        }
    }
}

#[test]
fn every_scenario_schedules_and_renders_as_expected() {
    let dir = common::manifest_dir().join("tests/scenarios");
    let files: Vec<_> = common::walk(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    assert!(files.len() >= 10, "only {} scenarios", files.len());
    let mut failures = Vec::new();
    for f in &files {
        if let Err(e) = run_scenario(f) {
            failures.push(format!(
                "{}:\n{e}",
                f.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}
