//! Scheduler scenarios: every file in tests/scenarios/ holds a commit's objects, an inventory,
//! previous results and the expected decisions; this one test runs them all.
//!
//! Format:
//! ```yaml
//! description: one line
//! now: 1767225600                     # unix seconds (optional)
//! repo: [objects of the commit]
//! inventory: {clusters: [...]}        # optional, spec/README §2
//! previous: {<placement id>: <a PlacementSchedule as `schedule -o json` keeps it>}
//! expect:
//!   <placement id>:                   # crp/<name>, rp/<ns>/<name>, ocm/<ns>/<name>, mw/<ns>/<name>
//!     selected: [names]               # exact
//!     decisions: [{cluster, selected, affinityScore, topologySpreadScore, score, reason}]
//!                                     # each listed cluster must have a decision with these fields
//!     decisionOrder: [names]          # optional: the exact order of all decisions
//!     conditions: [{type, status, reason, message}]   # listed fields compared
//!     bindings: [{cluster, state, ...}]               # optional, exact
//! ```

mod common;
use gitfleet::catalog::SourceFile;
use gitfleet::schedule::{schedule_commit, Fleet, Inventory, PlacementSchedule, Previous};
use serde_json::Value;

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
    let (cat, diags) = gitfleet::analyze(&files);
    if !diags.is_empty() {
        let list: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        return Err(format!(
            "the scenario's repo is invalid:\n{}",
            list.join("\n")
        ));
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
    let results = schedule_commit(&cat, &fleet, &previous, now);
    let expect = doc["expect"].as_object().ok_or("no expect")?;
    let mut errors = Vec::new();
    for (id, want) in expect {
        let Some(got) = results.iter().find(|r| r.key.to_string() == *id) else {
            errors.push(format!("{id}: not scheduled"));
            continue;
        };
        check(id, want, got, &mut errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
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
    for w in want["conditions"].as_array().into_iter().flatten() {
        let ty = w["type"].as_str().unwrap_or_default();
        let Some(c) = got_json["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
        else {
            errors.push(format!("{id}: no condition {ty}"));
            continue;
        };
        for (field, value) in w.as_object().unwrap() {
            if c.get(field) != Some(value) {
                errors.push(format!(
                    "{id}: condition {ty}.{field} = {}, want {value}",
                    c[field]
                ));
            }
        }
    }
    if let Some(b) = want.get("bindings") {
        if got_json["bindings"] != *b {
            errors.push(format!("{id}: bindings {}, want {b}", got_json["bindings"]));
        }
    }
}

#[test]
fn every_scenario_schedules_as_expected() {
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
