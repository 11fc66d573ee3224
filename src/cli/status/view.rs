//! `gitfleet status`: the daemon's placements for people — a compact table of all placements,
//! or a `kubectl describe`-like view of one. Pure: the status API's document
//! ([`crate::api::Placements`]) in, text out.

use std::fmt::Write as _;

use crate::api::PlacementStatus;
use crate::api::Placements;
use crate::rollout::BindingHealth;

fn short(commit: Option<&str>) -> String {
    commit.map_or("-".to_string(), |c| c.chars().take(12).collect())
}

/// The health state as the API writes it (`available`, `failed`, ...).
fn health_state(h: &BindingHealth) -> String {
    serde_json::to_value(h)
        .ok()
        .and_then(|v| v["state"].as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// Counts clusters per health state, e.g. `3 available, 1 pending`.
fn health_summary(clusters: &crate::rollout::ClusterStates) -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for c in clusters.values() {
        *counts.entry(health_state(&c.health)).or_default() += 1;
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

fn rollout_summary(p: &PlacementStatus) -> String {
    if !p.applying.is_empty() || !p.removing.is_empty() || !p.waiting.is_empty() {
        format!(
            "rolling: {} applying, {} removing, {} waiting",
            p.applying.len(),
            p.removing.len(),
            p.waiting.len()
        )
    } else if let Some(failed) = failed_summary(p) {
        // Never settled while a cluster failed: KubeFleet's Applied (or Available) condition
        // is False there, and the placement's with it.
        match &p.note {
            Some(note) => format!("{failed}; {note}"),
            None => failed,
        }
    } else if let Some(note) = &p.note {
        note.clone()
    } else {
        let pending = p
            .clusters
            .values()
            .filter(|c| c.health == BindingHealth::Pending)
            .count();
        if pending > 0 {
            // Not settled: KubeFleet's Available condition is not true on these clusters yet.
            format!("waiting for availability on {pending} cluster(s)")
        } else {
            "settled".to_string()
        }
    }
}

/// `failed on 1 cluster(s): b` when a cluster's last push failed or it became unavailable.
fn failed_summary(p: &PlacementStatus) -> Option<String> {
    let failed: Vec<&str> = p
        .clusters
        .iter()
        .filter(|(_, c)| c.health == BindingHealth::Failed || c.details.last_error.is_some())
        .map(|(name, _)| name.as_str())
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "failed on {} cluster(s): {}",
            failed.len(),
            failed.join(",")
        )
    })
}

/// Names, comma-separated, or `-` for none.
fn names<S: std::borrow::Borrow<str>>(list: &[S]) -> String {
    if list.is_empty() {
        "-".into()
    } else {
        list.join(",")
    }
}

/// The git source: where from, when last fetched, and loudly when fetches fail.
fn source_lines(out: &mut String, source: &crate::api::Source, now: u64) {
    let fetched = source.last_success.map_or("never".to_string(), |t| {
        format!("{} ago", crate::daemon::runs::age(t, now))
    });
    let verb = if source.kind == "local" {
        "read"
    } else {
        "fetched"
    };
    let _ = writeln!(out, "source {}  {verb} {fetched}", source.url);
    if source.consecutive_failures > 0 {
        let _ = writeln!(
            out,
            "SOURCE FAILING: {} failure(s) in a row, the last {}: {}",
            source.consecutive_failures,
            source.last_error_at.map_or("-".to_string(), |t| format!(
                "{} ago",
                crate::daemon::runs::age(t, now)
            )),
            source.last_error.as_deref().unwrap_or("")
        );
    }
}

/// The header lines and one row per placement; `wide` (`-o wide`) adds the clusters by name:
/// selected, being changed, waiting, failed.
pub fn table(doc: &Placements, now: u64, wide: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "branch {}  head {}  serving {}",
        doc.branch,
        short(doc.head.as_deref()),
        short(doc.serving.as_deref())
    );
    if let Some(source) = &doc.source {
        source_lines(&mut out, source, now);
    }
    if let Some(why) = &doc.not_serving {
        let _ = writeln!(out, "NOT SERVING: {why}");
    }
    if let Some(v) = doc.verified.as_ref().filter(|_| doc.rejected.is_some()) {
        let _ = writeln!(
            out,
            "SERVING {}, the last verified commit (signed by {})",
            short(Some(&v.commit)),
            v.signer
        );
    }
    if let Some(r) = &doc.rejected {
        let _ = writeln!(
            out,
            "REJECTED {} ({} error(s)); first: {}",
            short(Some(&r.commit)),
            r.errors.len(),
            r.errors.first().map_or("", String::as_str)
        );
    }
    if let Some(h) = &doc.held {
        let _ = writeln!(out, "HELD {}: {}", short(Some(&h.commit)), h.message);
    }
    for w in &doc.warnings {
        let _ = writeln!(out, "WARNING {w}");
    }
    let mut header: Vec<String> = [
        "PLACEMENT",
        "STRATEGY",
        "SELECTED",
        "RESOURCES",
        "CLUSTERS",
        "ROLLOUT",
    ]
    .map(String::from)
    .into();
    if wide {
        header.extend(["SELECTED-CLUSTERS", "UPDATING", "WAITING", "FAILED"].map(String::from));
    }
    let mut all = vec![header];
    all.extend(doc.placements.iter().map(|p| {
        let mut row = vec![
            p.id.clone(),
            p.strategy.to_string(),
            format!("{}/{}", p.selected.len(), p.target),
            p.observed_resource_index
                .map_or("-".into(), |i| i.to_string()),
            health_summary(&p.clusters),
            rollout_summary(p),
        ];
        if wide {
            let updating: Vec<String> = p.applying.iter().chain(&p.removing).cloned().collect();
            let failed: Vec<String> = p
                .clusters
                .iter()
                .filter(|(_, c)| c.details.last_error.is_some())
                .map(|(name, _)| name.to_string())
                .collect();
            row.extend([
                names(&p.selected),
                names(&updating),
                names(&p.waiting),
                names(&failed),
            ]);
        }
        row
    }));
    out.push_str(&crate::text_table::render(&all));
    out
}

/// One placement, `kubectl describe` style.
pub fn describe(p: &PlacementStatus) -> String {
    let mut out = String::new();
    let field = |out: &mut String, k: &str, v: String| {
        let _ = writeln!(out, "{:<22}{v}", format!("{k}:"));
    };
    field(&mut out, "Placement", p.id.clone());
    field(&mut out, "Strategy", p.strategy.to_string());
    field(&mut out, "Target", p.target.to_string());
    field(&mut out, "Selected", p.selected.join(", "));
    if let Some(i) = p.observed_resource_index {
        field(&mut out, "Resource index", i.to_string());
    }
    for (l, name) in [
        (&p.applying, "Applying"),
        (&p.removing, "Removing"),
        (&p.waiting, "Waiting (budget)"),
        (&p.up_to_date, "Up to date"),
    ] {
        if !l.is_empty() {
            field(&mut out, name, l.join(", "));
        }
    }
    if let Some(n) = &p.note {
        field(&mut out, "Note", n.clone());
    }
    if !p.conditions.is_empty() {
        let _ = writeln!(out, "Conditions:");
        for c in &p.conditions {
            let _ = writeln!(out, "  {:<44} {:<7} {}", c.type_, c.status, c.reason);
        }
    }
    if !p.selected_resources.is_empty() {
        field(
            &mut out,
            "Selected resources",
            p.selected_resources.join(", "),
        );
    }
    let _ = writeln!(out, "Clusters:");
    for (name, c) in &p.clusters {
        let _ = writeln!(
            out,
            "  {name}: {} (resource index {}, commit {}){}",
            health_state(&c.health),
            c.revision
                .as_ref()
                .map_or("-".into(), |r| r.resource_index.to_string()),
            short(c.commit.as_deref()),
            c.details
                .last_error
                .as_ref()
                .map_or(String::new(), |e| format!("\n    error: {e}"))
        );
        for d in &c.details.diffs {
            let _ = writeln!(out, "    diff: {d}");
        }
        for n in &c.details.not_available {
            let _ = writeln!(out, "    not available: {n}");
        }
        if let Some(w) = &c.details.work_status {
            out.push_str(&work_status(w));
        }
        if let Some(why) = &c.recheck {
            let _ = writeln!(out, "    re-applying: {why}");
        }
    }
    out
}

/// An OCM work's status from its feedback and condition rules, indented under its cluster:
/// the work's conditions, then per manifest its values and conditions.
fn work_status(w: &crate::feedback::WorkStatus) -> String {
    let mut out = String::new();
    let cond = |c: &crate::schedule::Condition| {
        let message = if c.message.is_empty() {
            String::new()
        } else {
            format!(": {}", c.message)
        };
        format!("{} {} ({}{message})", c.type_, c.status, c.reason)
    };
    for c in &w.conditions {
        let _ = writeln!(out, "    work condition: {}", cond(c));
    }
    for m in &w.resource_status.manifests {
        let r = &m.resource_meta;
        let object = match r.namespace.as_str() {
            "" => format!("{} {}", r.kind, r.name),
            ns => format!("{} {ns}/{}", r.kind, r.name),
        };
        let values: Vec<String> = m
            .status_feedback
            .values
            .iter()
            .map(|v| format!("{}={}", v.name, v.field_value))
            .collect();
        if !values.is_empty() {
            let _ = writeln!(out, "    feedback {object}: {}", values.join(", "));
        }
        for c in &m.conditions {
            let _ = writeln!(out, "    condition {object}: {}", cond(c));
        }
    }
    out
}

/// The approval tags the daemon refused, each with its reason and what to do, after a blank
/// line; nothing when there is none.
pub fn refused_approvals(refused: &[crate::rollout::approval::Rejection]) -> String {
    if refused.is_empty() {
        return String::new();
    }
    let mut rows = vec![["TAG", "REQUEST", "REFUSED", "WHY"]
        .map(String::from)
        .to_vec()];
    for r in refused {
        rows.push(vec![
            r.tag.clone(),
            r.request.clone().unwrap_or_else(|| "-".into()),
            r.reason.to_string(),
            r.detail.clone(),
        ]);
    }
    format!(
        "\nREFUSED APPROVAL TAGS\n{}",
        crate::text_table::render(&rows)
    )
}

/// The evictions, as `kubectl get clusterresourceplacementeviction` lists them, with the
/// message of the condition that decided each.
pub fn evictions(evictions: &[crate::api::Eviction]) -> String {
    if evictions.is_empty() {
        return String::new();
    }
    let mut rows = vec![[
        "EVICTION",
        "PLACEMENT",
        "CLUSTER",
        "VALID",
        "EXECUTED",
        "MESSAGE",
    ]
    .map(String::from)
    .to_vec()];
    for e in evictions {
        let dash = |s: &str| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.to_string()
            }
        };
        rows.push(vec![
            e.name.clone(),
            e.placement_name.clone(),
            e.cluster_name.clone(),
            dash(&e.valid),
            dash(&e.executed),
            e.conditions
                .last()
                .map_or(String::new(), |c| c.message.clone()),
        ]);
    }
    format!("\nEVICTIONS\n{}", crate::text_table::render(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Invalid evictions have no `Executed`; each row says what decided it.
    #[test]
    fn evictions_are_listed_with_the_deciding_message() {
        use crate::rollout::eviction::{EvictionRecord, Verdict};
        let mut state = crate::rollout::RolloutState::default();
        for (name, v) in [
            (
                "e1",
                Verdict::Executed(
                    "Eviction is allowed, no ClusterResourcePlacementDisruptionBudget specified"
                        .into(),
                ),
            ),
            (
                "e2",
                Verdict::Invalid(crate::rollout::eviction::INVALID_MISSING_CRP),
            ),
        ] {
            state.evictions.insert(
                name.into(),
                EvictionRecord {
                    placement_name: "app".into(),
                    cluster_name: "m1".into(),
                    conditions: v.conditions(),
                },
            );
        }
        let text = evictions(&crate::api::Evictions::of(&state).evictions);
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        assert_eq!(lines[1], "EVICTIONS");
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>()[..5],
            ["EVICTION", "PLACEMENT", "CLUSTER", "VALID", "EXECUTED"]
        );
        assert!(
            lines[3].starts_with("e1")
                && lines[3].contains("True")
                && lines[3].ends_with("specified"),
            "{text}"
        );
        assert!(
            lines[4].contains(" False ")
                && lines[4].contains(" - ")
                && lines[4].ends_with("targeted by eviction"),
            "{text}"
        );
    }

    /// As the server sends it (through the same types).
    fn doc() -> Placements {
        serde_json::from_value(json!({
            "branch": "main", "head": "0123456789abcdef", "serving": "0123456789abcdef",
            "placements": [{
                "id": "crp/app", "strategy": "RollingUpdate", "target": 3,
                "selected": ["a", "b", "c"], "applying": ["b"], "removing": [], "waiting": ["c"],
                "upToDate": ["a"], "observedResourceIndex": 2, "conditions": [],
                "clusters": {
                    "a": {"health": {"state": "available"}, "revision": {"resourceIndex": 2, "rendered": "r2"}, "commit": "0123456789abcdef", "updatedAt": 1},
                    "b": {"health": {"state": "failed"}, "lastError": "409 conflict with manager kubectl", "revision": {"resourceIndex": 1, "rendered": "r1"}, "updatedAt": 1}
                }
            }]
        }))
        .unwrap()
    }

    #[test]
    fn refused_approval_tags_are_listed_with_their_reason() {
        let r = crate::rollout::approval::Rejection {
            tag: "gitfleet/approve/r1-after-canary".into(),
            request: Some("r1-after-canary".into()),
            reason: crate::rollout::approval::RejectReason::UnknownKey,
            detail: "signed by a key no trust file names".into(),
        };
        let t = refused_approvals(&[r]);
        assert!(t.starts_with("\nREFUSED APPROVAL TAGS\nTAG"), "{t}");
        assert!(
            t.contains("gitfleet/approve/r1-after-canary  r1-after-canary  UnknownKey  signed by a key no trust file names"),
            "{t}"
        );
        assert_eq!(refused_approvals(&[]), "");
    }

    #[test]
    fn the_served_commits_warnings_are_shown_above_the_table() {
        let mut d = doc();
        d.warnings = vec!["placements/shop.yaml:13: ClusterResourcePlacement/shop-app: spec.resourceSelectors[0].name: selects nothing".into()];
        let t = table(&d, 0, false);
        assert!(
            t.contains("WARNING placements/shop.yaml:13: ClusterResourcePlacement/shop-app: spec.resourceSelectors[0].name: selects nothing\nPLACEMENT"),
            "{t}"
        );
    }

    #[test]
    fn table_shows_rollout_and_health() {
        let t = table(&doc(), 0, false);
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
        let d = describe(&doc().placements[0]);
        assert!(d.contains("Waiting (budget):     c"), "{d}");
        assert!(d.contains("b: failed (resource index 1"), "{d}");
        assert!(
            d.contains("error: 409 conflict with manager kubectl"),
            "{d}"
        );
    }

    /// An OCM work's feedback values and rule conditions are listed under their cluster.
    #[test]
    fn describe_lists_a_works_feedback_and_conditions() {
        let mut d = doc();
        let status: crate::feedback::WorkStatus = serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "Ready", "status": "True", "reason": "ConditionRulesAggregated", "message": "up"}],
            "resourceStatus": {"manifests": [{
                "resourceMeta": {"group": "apps", "version": "v1", "kind": "Deployment",
                    "resource": "deployments", "namespace": "app", "name": "web"},
                "statusFeedback": {"values": [
                    {"name": "ReadyReplicas", "fieldValue": {"type": "Integer", "integer": 1}},
                    {"name": "phase", "fieldValue": {"type": "String", "string": "Up"}}]},
                "conditions": [{"type": "Ready", "status": "True", "reason": "ConditionRuleEvaluated", "message": "up"}]
            }]}
        }))
        .unwrap();
        d.placements[0]
            .clusters
            .get_mut("b")
            .unwrap()
            .details
            .make_mut()
            .work_status = Some(status.into());
        let text = describe(&d.placements[0]);
        assert!(
            text.contains("    work condition: Ready True (ConditionRulesAggregated: up)\n"),
            "{text}"
        );
        assert!(
            text.contains("    feedback Deployment app/web: ReadyReplicas=1, phase=\"Up\"\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "    condition Deployment app/web: Ready True (ConditionRuleEvaluated: up)\n"
            ),
            "{text}"
        );
    }

    /// A failed cluster is never "settled", whatever else the placement says.
    #[test]
    fn a_placement_with_a_failed_cluster_is_not_settled() {
        let mut d = doc();
        let p = &mut d.placements[0];
        (p.applying, p.waiting) = (Default::default(), Default::default());
        let t = table(&d, 0, false);
        assert!(t.contains("failed on 1 cluster(s): b"), "{t}");
        assert!(!t.contains("settled"), "{t}");
        // Failed health alone (an object became unavailable) counts too, and a note stays.
        let p = &mut d.placements[0];
        p.clusters
            .get_mut("b")
            .unwrap()
            .details
            .make_mut()
            .last_error = None;
        p.note = Some("External: waits for an update run".into());
        let t = table(&d, 0, false);
        assert!(
            t.contains("failed on 1 cluster(s): b; External: waits for an update run"),
            "{t}"
        );
        // Once it is available again, the placement is settled.
        let p = &mut d.placements[0];
        p.note = None;
        p.clusters.get_mut("b").unwrap().health = BindingHealth::Available;
        assert!(table(&d, 0, false).contains("settled"));
    }

    #[test]
    fn a_cluster_waiting_for_availability_is_not_settled_and_says_why() {
        let mut d = doc();
        let p = &mut d.placements[0];
        (p.applying, p.waiting) = (Default::default(), Default::default());
        let b = p.clusters.get_mut("b").unwrap();
        b.health = BindingHealth::Pending;
        b.details.make_mut().last_error = None;
        b.details.make_mut().not_available =
            vec!["Deployment app/web: 0/1 replicas available, 1/1 updated".into()];
        let t = table(&d, 0, false);
        assert!(
            t.contains("waiting for availability on 1 cluster(s)"),
            "{t}"
        );
        assert!(!t.contains("settled"), "{t}");
        let text = describe(&d.placements[0]);
        assert!(
            text.contains("b: pending (resource index 1")
                && text.contains(
                    "    not available: Deployment app/web: 0/1 replicas available, 1/1 updated"
                ),
            "{text}"
        );
    }

    #[test]
    fn wide_names_the_clusters_and_the_source_shows_its_failures() {
        let mut d = doc();
        d.source = Some(crate::api::Source {
            url: "https://git.example.com/fleet.git".into(),
            branch: "main".into(),
            kind: "remote".into(),
            last_success: Some(1000),
            last_error: Some("cannot fetch branch \"main\": connection refused".into()),
            last_error_at: Some(1090),
            consecutive_failures: 2,
            ..Default::default()
        });
        let t = table(&d, 1100, true);
        assert!(
            t.contains("source https://git.example.com/fleet.git  fetched 100s ago"),
            "{t}"
        );
        assert!(
            t.contains("SOURCE FAILING: 2 failure(s) in a row, the last 10s ago: cannot fetch"),
            "{t}"
        );
        let header = t.lines().find(|l| l.starts_with("PLACEMENT")).unwrap();
        assert!(
            header.ends_with("SELECTED-CLUSTERS  UPDATING  WAITING  FAILED"),
            "{t}"
        );
        let row = t.lines().find(|l| l.starts_with("crp/app")).unwrap();
        assert!(
            row.ends_with("a,b,c              b         c        b"),
            "{t}"
        );
        let narrow = table(&d, 1100, false);
        assert!(!narrow.contains("SELECTED-CLUSTERS"), "{narrow}");
        d.source.as_mut().unwrap().consecutive_failures = 0;
        assert!(!table(&d, 1100, false).contains("FAILING"));
    }

    #[test]
    fn rejected_commit_is_loud() {
        let mut d = doc();
        d.rejected = Some(crate::rollout::Rejected {
            commit: "fedcba9876543210".into(),
            errors: vec!["a.yaml:1: x".into()],
        });
        assert!(
            table(&d, 0, false).contains("REJECTED fedcba987654 (1 error(s)); first: a.yaml:1: x")
        );
    }

    #[test]
    fn the_document_reads_back_as_written() {
        let d = doc();
        let again: Placements = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(again, d);
    }
}
