//! `gitfleet status`: the daemon's placements for people — a compact table of all placements,
//! or a `kubectl describe`-like view of one. Pure: JSON from `GET /api/v1/placements` in, text
//! out.

use std::fmt::Write as _;

use serde_json::Value;

fn list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn short(commit: &Value) -> String {
    commit
        .as_str()
        .map_or("-".to_string(), |c| c.chars().take(12).collect())
}

/// Counts clusters per health state, e.g. `3 available, 1 pending`.
fn health_summary(clusters: &Value) -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    if let Some(map) = clusters.as_object() {
        for c in map.values() {
            let state = c["health"]["state"]
                .as_str()
                .unwrap_or("unknown")
                .to_string();
            *counts.entry(state).or_default() += 1;
        }
    }
    if counts.is_empty() {
        return "-".into();
    }
    counts
        .into_iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The header lines and one row per placement.
pub fn table(doc: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "branch {}  head {}  serving {}",
        doc["branch"].as_str().unwrap_or("-"),
        short(&doc["head"]),
        short(&doc["serving"])
    );
    if let Some(r) = doc.get("rejected").filter(|r| !r.is_null()) {
        let errors = list(&r["errors"]);
        let _ = writeln!(
            out,
            "REJECTED {} ({} error(s)); first: {}",
            short(&r["commit"]),
            errors.len(),
            errors.first().map_or("", String::as_str)
        );
    }
    let rows: Vec<[String; 6]> = doc["placements"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    let selected = list(&p["selected"]);
                    let rollout = if !list(&p["applying"]).is_empty()
                        || !list(&p["removing"]).is_empty()
                        || !list(&p["waiting"]).is_empty()
                    {
                        format!(
                            "rolling: {} applying, {} removing, {} waiting",
                            list(&p["applying"]).len(),
                            list(&p["removing"]).len(),
                            list(&p["waiting"]).len()
                        )
                    } else if let Some(note) = p["note"].as_str() {
                        note.to_string()
                    } else {
                        "settled".to_string()
                    };
                    [
                        p["id"].as_str().unwrap_or("?").to_string(),
                        p["strategy"].as_str().unwrap_or("-").to_string(),
                        format!("{}/{}", selected.len(), p["target"].as_u64().unwrap_or(0)),
                        p["observedResourceIndex"]
                            .as_u64()
                            .map_or("-".into(), |i| i.to_string()),
                        health_summary(&p["clusters"]),
                        rollout,
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    let header = [
        "PLACEMENT",
        "STRATEGY",
        "SELECTED",
        "RESOURCES",
        "CLUSTERS",
        "ROLLOUT",
    ]
    .map(String::from);
    let mut all = vec![header];
    all.extend(rows);
    out.push_str(&crate::text_table::render(&all));
    out
}

/// One placement, `kubectl describe` style.
pub fn describe(p: &Value) -> String {
    let mut out = String::new();
    let field = |out: &mut String, k: &str, v: String| {
        let _ = writeln!(out, "{:<22}{v}", format!("{k}:"));
    };
    field(
        &mut out,
        "Placement",
        p["id"].as_str().unwrap_or("?").into(),
    );
    field(
        &mut out,
        "Strategy",
        p["strategy"].as_str().unwrap_or("-").into(),
    );
    field(
        &mut out,
        "Target",
        p["target"].as_u64().unwrap_or(0).to_string(),
    );
    field(&mut out, "Selected", list(&p["selected"]).join(", "));
    if let Some(i) = p["observedResourceIndex"].as_u64() {
        field(&mut out, "Resource index", i.to_string());
    }
    for (k, name) in [
        ("applying", "Applying"),
        ("removing", "Removing"),
        ("waiting", "Waiting (budget)"),
        ("upToDate", "Up to date"),
    ] {
        let l = list(&p[k]);
        if !l.is_empty() {
            field(&mut out, name, l.join(", "));
        }
    }
    if let Some(n) = p["note"].as_str() {
        field(&mut out, "Note", n.into());
    }
    if let Some(conds) = p["conditions"].as_array().filter(|c| !c.is_empty()) {
        let _ = writeln!(out, "Conditions:");
        for c in conds {
            let _ = writeln!(
                out,
                "  {:<44} {:<7} {}",
                c["type"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?"),
                c["reason"].as_str().unwrap_or("")
            );
        }
    }
    if let Some(r) = p["selectedResources"].as_array().filter(|r| !r.is_empty()) {
        field(
            &mut out,
            "Selected resources",
            list(&Value::Array(r.clone())).join(", "),
        );
    }
    let _ = writeln!(out, "Clusters:");
    if let Some(map) = p["clusters"].as_object() {
        for (name, c) in map {
            let _ = writeln!(
                out,
                "  {name}: {} (resource index {}, commit {}){}",
                c["health"]["state"].as_str().unwrap_or("unknown"),
                c["revision"]["resourceIndex"]
                    .as_u64()
                    .map_or("-".into(), |i| i.to_string()),
                short(&c["commit"]),
                c["lastError"]
                    .as_str()
                    .map_or(String::new(), |e| format!("\n    error: {e}"))
            );
            for d in list(&c["diffs"]) {
                let _ = writeln!(out, "    diff: {d}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "branch": "main", "head": "0123456789abcdef", "serving": "0123456789abcdef",
            "placements": [{
                "id": "crp/app", "strategy": "RollingUpdate", "target": 3,
                "selected": ["a", "b", "c"], "applying": ["b"], "removing": [], "waiting": ["c"],
                "upToDate": ["a"], "observedResourceIndex": 2,
                "clusters": {
                    "a": {"health": {"state": "available"}, "revision": {"resourceIndex": 2}, "commit": "0123456789abcdef"},
                    "b": {"health": {"state": "failed"}, "lastError": "409 conflict with manager kubectl", "revision": {"resourceIndex": 1}}
                }
            }]
        })
    }

    #[test]
    fn table_shows_rollout_and_health() {
        let t = table(&doc());
        assert!(t.contains("serving 0123456789ab"), "{t}");
        assert!(t.contains("crp/app"), "{t}");
        assert!(t.contains("3/3"), "{t}");
        assert!(t.contains("1 available, 1 failed"), "{t}");
        assert!(
            t.contains("rolling: 1 applying, 0 removing, 1 waiting"),
            "{t}"
        );
    }

    #[test]
    fn describe_lists_clusters_with_errors() {
        let d = describe(&doc()["placements"][0]);
        assert!(d.contains("Waiting (budget):     c"), "{d}");
        assert!(d.contains("b: failed (resource index 1"), "{d}");
        assert!(
            d.contains("error: 409 conflict with manager kubectl"),
            "{d}"
        );
    }

    #[test]
    fn rejected_commit_is_loud() {
        let mut d = doc();
        d["rejected"] = json!({"commit": "fedcba9876543210", "errors": ["a.yaml:1: x"]});
        assert!(table(&d).contains("REJECTED fedcba987654 (1 error(s)); first: a.yaml:1: x"));
    }
}
