//! The OCM scheduler against OCM's own formulas and examples, value by value.

use super::*;
use crate::catalog::SourceFile;
use crate::schedule::{Inventory, InventoryCluster};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn cluster(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {"hubAcceptsClient": true},
    })
}

fn tainted(name: &str, taints: Value) -> Value {
    let mut c = cluster(name, json!({}));
    c["spec"]["taints"] = taints;
    c
}

fn set(name: &str) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSet",
        "metadata": {"name": name},
    })
}

fn bind(ns: &str, set: &str) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": set, "namespace": ns},
        "spec": {"clusterSet": set},
    })
}

fn placement(ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

/// `default` set bound into namespace `app`, plus the given objects.
fn commit(objects: Vec<Value>) -> Catalog {
    let mut docs = vec![namespace("app"), set("default"), bind("app", "default")];
    docs.extend(objects);
    load(docs)
}

fn load(docs: Vec<Value>) -> Catalog {
    let files: Vec<SourceFile> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| SourceFile {
            path: format!("objects/{i:04}.json"),
            content: serde_json::to_vec(d).unwrap(),
        })
        .collect();
    let (cat, diags) = crate::analyze(&files);
    assert!(diags.is_empty(), "{diags:#?}");
    cat
}

struct Live<'a> {
    name: &'a str,
    healthy: bool,
    properties: &'a [(&'a str, &'a str)],
    add_on: &'a [(&'a str, i64)],
}

fn live(name: &str) -> Live<'_> {
    Live {
        name,
        healthy: true,
        properties: &[],
        add_on: &[],
    }
}

fn inventory(clusters: &[Live]) -> Inventory {
    Inventory {
        clusters: clusters
            .iter()
            .map(|c| InventoryCluster {
                name: c.name.into(),
                healthy: c.healthy,
                error: (!c.healthy).then(|| "connection refused".into()),
                properties: c
                    .properties
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                add_on_scores: c.add_on.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                namespaces: None,
                namespace_collection_degraded: false,
            })
            .map(Arc::new)
            .collect(),
    }
}

fn fleet(cat: &Catalog, inv: Option<&Inventory>) -> Fleet {
    Fleet::build(cat, inv)
}

/// Schedules the placement `app/<name>` alone (no other placements) with a previous selection.
fn one(cat: &Catalog, fleet: &Fleet, name: &str, previous: &[&str], now: i64) -> PlacementSchedule {
    let entry = cat
        .ocm_placements
        .iter()
        .find(|e| e.spec.metadata.name == name)
        .unwrap();
    let prev = previous_of(name, previous);
    schedule_one(cat, entry, fleet, prev.as_ref(), &BTreeMap::new(), now)
}

fn previous_of(name: &str, selected: &[&str]) -> Option<PlacementSchedule> {
    (!selected.is_empty()).then(|| PlacementSchedule {
        key: PlacementKey::new(PlacementKind::OcmPlacement, Some("app"), name),
        policy_snapshot_index: None,
        policy_hash: None,
        selected: selected.iter().map(|&s| s.into()).collect(),
        decisions: vec![],
        conditions: vec![],
        bindings: vec![],
        decision_groups: vec![],
    })
}

/// `(cluster, score)` of every scored decision, by name.
fn scores(r: &PlacementSchedule) -> Vec<(String, i64)> {
    let mut s: Vec<(String, i64)> = r
        .decisions
        .iter()
        .filter_map(|d| Some((d.cluster.to_string(), d.score?)))
        .collect();
    s.sort();
    s
}

fn named(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

fn satisfied_of(r: &PlacementSchedule) -> (&str, &str, &str) {
    let c = r.conditions.iter().find(|c| c.type_ == SATISFIED).unwrap();
    (&c.status, &c.reason, &c.message)
}

fn misconfigured_of(r: &PlacementSchedule) -> (&str, &str, &str) {
    let c = r
        .conditions
        .iter()
        .find(|c| c.type_ == MISCONFIGURED)
        .unwrap();
    (&c.status, &c.reason, &c.message)
}

fn decision_of<'r>(r: &'r PlacementSchedule, cluster: &str) -> &'r ClusterDecision {
    r.decisions
        .iter()
        .find(|d| d.cluster == cluster)
        .unwrap_or_else(|| panic!("no decision for {cluster}: {:#?}", r.decisions))
}

fn plain_clusters(names: &[&str]) -> Vec<Value> {
    names.iter().map(|n| cluster(n, json!({}))).collect()
}

// ---------------------------------------------------------------------------------------------
// Formulas
// ---------------------------------------------------------------------------------------------

#[test]
fn balance_truncates_toward_zero_before_doubling() {
    let cases: &[(i64, i64, i64)] = &[
        (0, 0, 100),
        (0, 5, 100),
        (1, 1, -100),
        (1, 2, 0),
        (1, 3, 32),
        (2, 3, -32),
        (3, 3, -100),
        (1, 7, 70),
        (2, 7, 42),
        (3, 7, 14),
        (4, 7, -14),
        (5, 7, -42),
        (6, 7, -70),
        (7, 7, -100),
        // 100·(0.5 - 1/6) = 33.33 → 33 → 66 (floor-then-double and round would differ elsewhere)
        (1, 6, 66),
        (5, 6, -66),
    ];
    for &(count, max, want) in cases {
        assert_eq!(balance_score(count, max), want, "count {count} of {max}");
        assert_eq!(want % 2, 0, "Balance scores are always even");
    }
}

#[test]
fn resource_scores_are_linear_truncated_and_100_when_all_equal() {
    let cases: &[(f64, f64, f64, i64)] = &[
        (60.0, 60.0, 100.0, -100),
        (80.0, 60.0, 100.0, 0),
        (100.0, 60.0, 100.0, 100),
        // 2/9 → -55.6 → -55 (not -56); 4/9 → -11.1 → -11
        (80.0, 60.0, 150.0, -55),
        (100.0, 60.0, 150.0, -11),
        // 7/9 → 55.6 → 55
        (130.0, 60.0, 150.0, 55),
        (150.0, 60.0, 150.0, 100),
        (5.0, 5.0, 5.0, 100),
        (0.0, 0.0, 0.0, 100),
    ];
    for &(a, lo, hi, want) in cases {
        assert_eq!(resource_score(a, lo, hi), want, "{a} in [{lo}, {hi}]");
    }
}

// ---------------------------------------------------------------------------------------------
// OCM's worked examples, recomputed
// ---------------------------------------------------------------------------------------------

fn memory(mb: &str) -> [(&str, &str); 2] {
    [(ALLOCATABLE_MEMORY, mb), (CAPACITY_MEMORY, "1Gi")]
}

/// Clusters 1–3 with 60/80/100 MiB (cluster4 with `c4` if given) and the placement `p` with
/// `numberOfClusters: 2` and the given prioritizer policy.
fn memory_world(policy: Value, c4: Option<&str>) -> (Catalog, Fleet) {
    let mut names = vec!["cluster1", "cluster2", "cluster3"];
    if c4.is_some() {
        names.push("cluster4");
    }
    let mut objects = plain_clusters(&names);
    objects.push(placement(
        "app",
        "p",
        json!({"numberOfClusters": 2, "prioritizerPolicy": policy}),
    ));
    let cat = commit(objects);
    let (m1, m2, m3) = (memory("60Mi"), memory("80Mi"), memory("100Mi"));
    let m4 = memory(c4.unwrap_or("0"));
    let mut live_clusters = vec![
        Live {
            properties: &m1,
            ..live("cluster1")
        },
        Live {
            properties: &m2,
            ..live("cluster2")
        },
        Live {
            properties: &m3,
            ..live("cluster3")
        },
    ];
    if c4.is_some() {
        live_clusters.push(Live {
            properties: &m4,
            ..live("cluster4")
        });
    }
    let f = fleet(&cat, Some(&inventory(&live_clusters)));
    (cat, f)
}

fn memory_policy(mode: &str, mem: i32, steady: Option<i32>) -> Value {
    let mut configurations = vec![json!({
        "scoreCoordinate": {"builtIn": "ResourceAllocatableMemory"}, "weight": mem,
    })];
    if let Some(w) = steady {
        configurations.push(json!({"scoreCoordinate": {"builtIn": "Steady"}, "weight": w}));
    }
    json!({"mode": mode, "configurations": configurations})
}

#[test]
fn example_1_memory_weight_1() {
    let policy = memory_policy("Additive", 1, None);
    let (cat, f) = memory_world(policy.clone(), None);
    let first = one(&cat, &f, "p", &[], NOW);
    assert_eq!(
        scores(&first),
        named(&[("cluster1", 0), ("cluster2", 100), ("cluster3", 200)])
    );
    assert_eq!(first.selected, ["cluster2", "cluster3"]);
    // The resync that follows: Steady adds 100 to the selected clusters; nothing changes.
    let resync = one(&cat, &f, "p", &["cluster2", "cluster3"], NOW);
    assert_eq!(
        scores(&resync),
        named(&[("cluster1", 0), ("cluster2", 200), ("cluster3", 300)])
    );
    assert_eq!(resync.selected, first.selected);

    // cluster4 with 150 MiB: the published cluster1:200 cannot come from the code; 0 does.
    let (cat, f) = memory_world(policy.clone(), Some("150Mi"));
    let next = one(&cat, &f, "p", &["cluster2", "cluster3"], NOW);
    assert_eq!(
        scores(&next),
        named(&[
            ("cluster1", 0),
            ("cluster2", 145),
            ("cluster3", 189),
            ("cluster4", 200)
        ])
    );
    assert_eq!(next.selected, ["cluster3", "cluster4"]);
    assert_eq!(
        decision_of(&next, "cluster2").reason(),
        "does not score high enough: not in the top 2 (score 145, rank 3 of 4; Balance 100×1 + ResourceAllocatableMemory -55×1 + Steady 100×1)"
    );
    assert_eq!(
        decision_of(&next, "cluster4").reason(),
        "selected: score 200, rank 1 of 4 (Balance 100×1 + ResourceAllocatableMemory 100×1 + Steady 0×1)"
    );

    // cluster4 with 100 MiB: cluster2 and cluster4 tie at 200; the name keeps cluster2.
    let (cat, f) = memory_world(policy, Some("100Mi"));
    let tie = one(&cat, &f, "p", &["cluster2", "cluster3"], NOW);
    assert_eq!(
        scores(&tie),
        named(&[
            ("cluster1", 0),
            ("cluster2", 200),
            ("cluster3", 300),
            ("cluster4", 200)
        ])
    );
    assert_eq!(tie.selected, ["cluster2", "cluster3"]);
    let order: Vec<&str> = tie.decisions.iter().map(|d| d.cluster.as_str()).collect();
    assert_eq!(order, ["cluster3", "cluster2", "cluster4", "cluster1"]);
}

#[test]
fn example_2_memory_weight_3() {
    let policy = memory_policy("Additive", 3, None);
    let (cat, f) = memory_world(policy.clone(), None);
    let first = one(&cat, &f, "p", &[], NOW);
    assert_eq!(
        scores(&first),
        named(&[("cluster1", -200), ("cluster2", 100), ("cluster3", 400)])
    );
    assert_eq!(first.selected, ["cluster2", "cluster3"]);
    let (cat, f) = memory_world(policy.clone(), Some("100Mi"));
    let next = one(&cat, &f, "p", &["cluster2", "cluster3"], NOW);
    assert_eq!(
        scores(&next),
        named(&[
            ("cluster1", -200),
            ("cluster2", 200),
            ("cluster3", 500),
            ("cluster4", 400)
        ])
    );
    assert_eq!(next.selected, ["cluster3", "cluster4"]);
    let (cat, f) = memory_world(policy, Some("150Mi"));
    let big = one(&cat, &f, "p", &["cluster2", "cluster3"], NOW);
    assert_eq!(
        scores(&big),
        named(&[
            ("cluster1", -200),
            ("cluster2", 35),
            ("cluster3", 167),
            ("cluster4", 400)
        ])
    );
}

#[test]
fn example_3_steady_weight_3_variants() {
    // (mode, memory weight, initial c1/c2/c3, +c4 100 MiB, selection, +c4 150 MiB, selection)
    type Row = (
        &'static str,
        i32,
        [i64; 3],
        [i64; 4],
        [&'static str; 2],
        [i64; 4],
        [&'static str; 2],
    );
    let rows: &[Row] = &[
        (
            "Additive",
            1,
            [0, 100, 200],
            [0, 400, 500, 200],
            ["cluster2", "cluster3"],
            [0, 345, 389, 200],
            ["cluster2", "cluster3"],
        ),
        (
            "Exact",
            1,
            [-100, 0, 100],
            [-100, 300, 400, 100],
            ["cluster2", "cluster3"],
            [-100, 245, 289, 100],
            ["cluster2", "cluster3"],
        ),
        (
            "Additive",
            3,
            [-200, 100, 400],
            [-200, 400, 700, 400],
            ["cluster2", "cluster3"],
            [-200, 235, 367, 400],
            ["cluster3", "cluster4"],
        ),
        (
            "Exact",
            3,
            [-300, 0, 300],
            [-300, 300, 600, 300],
            ["cluster2", "cluster3"],
            [-300, 135, 267, 300],
            ["cluster3", "cluster4"],
        ),
    ];
    let names = ["cluster1", "cluster2", "cluster3", "cluster4"];
    for (mode, mem, initial, plus100, sel100, plus150, sel150) in rows {
        let policy = memory_policy(mode, *mem, Some(3));
        let (cat, f) = memory_world(policy.clone(), None);
        let first = one(&cat, &f, "p", &[], NOW);
        let want: Vec<(String, i64)> = names
            .iter()
            .zip(initial)
            .map(|(n, s)| (n.to_string(), *s))
            .collect();
        assert_eq!(scores(&first), want, "{mode} mem {mem}: initial");
        assert_eq!(first.selected, ["cluster2", "cluster3"]);
        for (c4, totals, sel) in [("100Mi", plus100, sel100), ("150Mi", plus150, sel150)] {
            let (cat, f) = memory_world(policy.clone(), Some(c4));
            let r = one(&cat, &f, "p", &["cluster2", "cluster3"], NOW);
            let want: Vec<(String, i64)> = names
                .iter()
                .zip(totals)
                .map(|(n, s)| (n.to_string(), *s))
                .collect();
            assert_eq!(scores(&r), want, "{mode} mem {mem}: cluster4 {c4}");
            assert_eq!(r.selected, sel, "{mode} mem {mem}: cluster4 {c4}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Prioritizers, modes and weights
// ---------------------------------------------------------------------------------------------

/// Three clusters: a (cpu 4, addon cpuratio 50), b (cpu 8, -20), c (cpu 16, no data).
fn scoring_world(policy: Value, n: Option<i32>) -> (Catalog, Fleet) {
    let mut objects = plain_clusters(&["a", "b", "c"]);
    let mut spec = json!({"prioritizerPolicy": policy});
    if let Some(n) = n {
        spec["numberOfClusters"] = n.into();
    }
    objects.push(placement("app", "p", spec));
    let cat = commit(objects);
    let inv = inventory(&[
        Live {
            properties: &[(ALLOCATABLE_CPU, "4"), (CAPACITY_CPU, "8")],
            add_on: &[("cpuratio", 50)],
            ..live("a")
        },
        Live {
            properties: &[(ALLOCATABLE_CPU, "8000m"), (CAPACITY_CPU, "8")],
            add_on: &[("cpuratio", -20)],
            ..live("b")
        },
        Live {
            // Capacity without allocatable, and allocatable without capacity: no data.
            properties: &[(ALLOCATABLE_CPU, "16")],
            add_on: &[("memratio", 99)],
            ..live("c")
        },
    ]);
    let f = fleet(&cat, Some(&inv));
    (cat, f)
}

fn addon(score: &str, weight: i32) -> Value {
    json!({"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "usage", "scoreName": score}}, "weight": weight})
}

fn builtin(name: &str, weight: i32) -> Value {
    json!({"scoreCoordinate": {"type": "BuiltIn", "builtIn": name}, "weight": weight})
}

#[test]
fn prioritizers_modes_and_weights() {
    type Case = (&'static str, Value, [i64; 3], [&'static str; 2]);
    let cases: Vec<Case> = vec![
        // Defaults: Balance 100 + Steady 0 for everyone; ties by name.
        ("additive defaults", json!({}), [100, 100, 100], ["a", "b"]),
        (
            "empty mode is Additive",
            json!({"mode": ""}),
            [100, 100, 100],
            ["a", "b"],
        ),
        (
            "exact with nothing",
            json!({"mode": "Exact"}),
            [0, 0, 0],
            ["a", "b"],
        ),
        // CPU: a is min (-100), b max (100), c has no data (0).
        (
            "cpu additive",
            json!({"configurations": [builtin("ResourceAllocatableCPU", 1)]}),
            [0, 200, 100],
            ["b", "c"],
        ),
        (
            "cpu exact weight 2",
            json!({"mode": "Exact", "configurations": [builtin("ResourceAllocatableCPU", 2)]}),
            [-200, 200, 0],
            ["b", "c"],
        ),
        (
            "negative weight prefers low scores",
            json!({"mode": "Exact", "configurations": [builtin("ResourceAllocatableCPU", -1)]}),
            [100, -100, 0],
            ["a", "c"],
        ),
        (
            "balance off",
            json!({"configurations": [builtin("Balance", 0)]}),
            [0, 0, 0],
            ["a", "b"],
        ),
        (
            "addon exact",
            json!({"mode": "Exact", "configurations": [addon("cpuratio", 1)]}),
            [50, -20, 0],
            ["a", "c"],
        ),
        (
            "addon additive weight 3",
            json!({"configurations": [addon("cpuratio", 3)]}),
            [250, 40, 100],
            ["a", "c"],
        ),
        (
            "identical add-ons both count",
            json!({"mode": "Exact", "configurations": [addon("cpuratio", 1), addon("cpuratio", 2)]}),
            [150, -60, 0],
            ["a", "c"],
        ),
        (
            "identical built-ins: the last wins",
            json!({"mode": "Exact", "configurations": [builtin("Balance", 5), builtin("Balance", 1)]}),
            [100, 100, 100],
            ["a", "b"],
        ),
        (
            "zero-weight unknown built-in is not built",
            json!({"mode": "Exact", "configurations": [builtin("Spread", 0), addon("cpuratio", 1)]}),
            [50, -20, 0],
            ["a", "c"],
        ),
    ];
    for (name, policy, want, selected) in cases {
        let (cat, f) = scoring_world(policy, Some(2));
        let r = one(&cat, &f, "p", &[], NOW);
        assert_eq!(
            scores(&r),
            named(&[("a", want[0]), ("b", want[1]), ("c", want[2])]),
            "{name}"
        );
        assert_eq!(r.selected, selected, "{name}");
        assert_eq!(satisfied_of(&r).1, "AllDecisionsScheduled", "{name}");
    }
}

#[test]
fn steady_rewards_the_previous_selection_only() {
    let (cat, f) = scoring_world(
        json!({"mode": "Exact", "configurations": [builtin("Steady", 2)]}),
        Some(1),
    );
    let r = one(&cat, &f, "p", &["c"], NOW);
    assert_eq!(scores(&r), named(&[("a", 0), ("b", 0), ("c", 200)]));
    assert_eq!(r.selected, ["c"]);
}

#[test]
fn resource_reason_says_when_data_is_missing() {
    let (cat, f) = scoring_world(
        json!({"mode": "Exact", "configurations": [builtin("ResourceAllocatableCPU", 1)]}),
        None,
    );
    let r = one(&cat, &f, "p", &[], NOW);
    assert_eq!(
        decision_of(&r, "c").reason(),
        "selected: score 0, rank 2 of 3 (ResourceAllocatableCPU 0×1 (no data))"
    );
}

#[test]
fn one_cluster_with_resource_data_scores_100() {
    let (cat, f) = scoring_world(
        json!({"mode": "Exact", "configurations": [builtin("ResourceAllocatableCPU", 1)]}),
        None,
    );
    let entry = &cat.ocm_placements[0];
    // Only b has data once a is filtered out by a predicate on its name label.
    let mut entry = Entry {
        index: entry.index,
        spec: entry.spec.clone(),
    };
    entry.spec.spec.predicates = vec![serde_json::from_value(json!({
        "requiredClusterSelector": {"labelSelector": {"matchExpressions": [
            {"key": "kubernetes-fleet.io/member-name", "operator": "DoesNotExist"},
        ]}, "claimSelector": {"matchExpressions": [
            {"key": ALLOCATABLE_CPU, "operator": "NotIn", "values": ["4"]},
        ]}},
    }))
    .unwrap()];
    let r = schedule_one(&cat, &entry, &f, None, &BTreeMap::new(), NOW);
    assert_eq!(scores(&r), named(&[("b", 100), ("c", 0)]));
    assert_eq!(
        decision_of(&r, "a").reason(),
        "filtered by Predicate: the cluster's claims (properties) do not match its claimSelector"
    );
}

#[test]
fn ties_break_by_name_bytes_and_top_k_cuts() {
    let mut objects = plain_clusters(&["cluster2", "cluster10", "cluster1", "alpha"]);
    objects.push(placement("app", "two", json!({"numberOfClusters": 2})));
    objects.push(placement("app", "zero", json!({"numberOfClusters": 0})));
    objects.push(placement("app", "six", json!({"numberOfClusters": 6})));
    objects.push(placement("app", "all", json!({})));
    let cat = commit(objects);
    let f = fleet(&cat, None);
    let two = one(&cat, &f, "two", &[], NOW);
    assert_eq!(two.selected, ["alpha", "cluster1"]);
    let order: Vec<&str> = two.decisions.iter().map(|d| d.cluster.as_str()).collect();
    assert_eq!(order, ["alpha", "cluster1", "cluster10", "cluster2"]);
    assert_eq!(
        decision_of(&two, "cluster10").reason(),
        "does not score high enough: not in the top 2 (score 100, rank 3 of 4; Balance 100×1 + Steady 0×1)"
    );
    assert_eq!(
        satisfied_of(&two),
        (
            "True",
            "AllDecisionsScheduled",
            "All cluster decisions scheduled"
        )
    );
    let zero = one(&cat, &f, "zero", &[], NOW);
    assert!(zero.selected.is_empty());
    assert_eq!(
        satisfied_of(&zero),
        (
            "False",
            "NoManagedClusterMatched",
            "No ManagedCluster matches any of the cluster predicate"
        )
    );
    let six = one(&cat, &f, "six", &[], NOW);
    assert_eq!(six.selected.len(), 4);
    assert_eq!(
        satisfied_of(&six),
        (
            "False",
            "NotAllDecisionsScheduled",
            "2 cluster decisions unscheduled"
        )
    );
    let all = one(&cat, &f, "all", &[], NOW);
    assert_eq!(all.selected, ["alpha", "cluster1", "cluster10", "cluster2"]);
    assert_eq!(satisfied_of(&all).1, "AllDecisionsScheduled");
    assert_eq!(
        misconfigured_of(&all),
        (
            "False",
            "Succeedconfigured",
            "Placement configurations check pass"
        )
    );
    assert_eq!(all.conditions[0].type_, SATISFIED);
}

// ---------------------------------------------------------------------------------------------
// Balance across placements
// ---------------------------------------------------------------------------------------------

#[test]
fn balance_counts_the_other_placements_in_order() {
    let mut objects = plain_clusters(&["c1", "c2", "c3"]);
    objects.push(placement("app", "b", json!({"numberOfClusters": 1})));
    objects.push(placement("app", "a", json!({"numberOfClusters": 1})));
    let cat = commit(objects);
    let f = fleet(&cat, None);
    let out = schedule_all(&cat, &f, &Previous::new(), NOW);
    let ids: Vec<String> = out.iter().map(|r| r.key.to_string()).collect();
    assert_eq!(ids, ["ocm/app/a", "ocm/app/b"]);
    assert_eq!(out[0].selected, ["c1"]);
    // b sees a's new decision on c1: maxCount 1, so c1 scores -100.
    assert_eq!(out[1].selected, ["c2"]);
    assert_eq!(
        scores(&out[1]),
        named(&[("c1", -100), ("c2", 100), ("c3", 100)])
    );

    // With b's previous decision on c3: a (first) counts it; b keeps c3 with Steady.
    let mut previous = Previous::new();
    previous.insert(
        "ocm/app/b".parse().unwrap(),
        previous_of("b", &["c3"]).unwrap().into(),
    );
    let out = schedule_all(&cat, &f, &previous, NOW);
    assert_eq!(
        scores(&out[0]),
        named(&[("c1", 100), ("c2", 100), ("c3", -100)])
    );
    assert_eq!(out[0].selected, ["c1"]);
    assert_eq!(
        scores(&out[1]),
        named(&[("c1", -100), ("c2", 100), ("c3", 200)])
    );
    assert_eq!(out[1].selected, ["c3"]);
}

#[test]
fn balance_max_count_includes_clusters_that_are_not_candidates() {
    let mut objects = plain_clusters(&["c1", "c2"]);
    objects.push(placement("app", "p", json!({})));
    let cat = commit(objects);
    let f = fleet(&cat, None);
    let others: BTreeMap<String, i64> = [("c1".to_string(), 1), ("gone".to_string(), 3)].into();
    let r = schedule_one(&cat, &cat.ocm_placements[0], &f, None, &others, NOW);
    // 100·(0.5 - 1/3) = 16.67 → 16 → 32.
    assert_eq!(scores(&r), named(&[("c1", 32), ("c2", 100)]));
}

// ---------------------------------------------------------------------------------------------
// Taints and tolerations
// ---------------------------------------------------------------------------------------------

#[test]
fn taints_and_tolerations() {
    const ADDED: &str = "2026-01-01T00:00:00Z";
    // (case, taints, tolerations, previously selected, now, selected?, reason fragment)
    type Case = (&'static str, Value, Value, bool, i64, bool, &'static str);
    let cases: Vec<Case> = vec![
        ("no taint", json!([]), json!([]), false, NOW, true, ""),
        ("NoSelect", json!([{"key": "gpu", "value": "true", "effect": "NoSelect"}]), json!([]), false, NOW, false,
            "filtered by TaintToleration: taint gpu=true:NoSelect is not tolerated"),
        ("NoSelect evicts", json!([{"key": "gpu", "effect": "NoSelect"}]), json!([]), true, NOW, false,
            "filtered by TaintToleration: taint gpu:NoSelect is not tolerated; the cluster is removed from the placement's decisions"),
        ("NoSelect tolerated (Equal)", json!([{"key": "gpu", "value": "true", "effect": "NoSelect"}]),
            json!([{"key": "gpu", "value": "true"}]), false, NOW, true, ""),
        ("NoSelect, wrong value", json!([{"key": "gpu", "value": "true", "effect": "NoSelect"}]),
            json!([{"key": "gpu", "value": "false"}]), false, NOW, false, "is not tolerated"),
        ("NoSelect tolerated (Exists, any key)", json!([{"key": "gpu", "value": "true", "effect": "NoSelect"}]),
            json!([{"operator": "Exists"}]), false, NOW, true, ""),
        ("toleration for another effect", json!([{"key": "gpu", "effect": "NoSelect"}]),
            json!([{"key": "gpu", "operator": "Exists", "effect": "NoSelectIfNew"}]), false, NOW, false, "is not tolerated"),
        ("PreferNoSelect is always tolerated", json!([{"key": "gpu", "effect": "PreferNoSelect"}]), json!([]), false, NOW, true, ""),
        ("NoSelectIfNew, new", json!([{"key": "maint", "effect": "NoSelectIfNew"}]), json!([]), false, NOW, false,
            "filtered by TaintToleration: taint maint:NoSelectIfNew is not tolerated and the cluster is not in the placement's current decisions"),
        ("NoSelectIfNew, already selected", json!([{"key": "maint", "effect": "NoSelectIfNew"}]), json!([]), true, NOW, true, ""),
        ("NoSelectIfNew, new but tolerated", json!([{"key": "maint", "effect": "NoSelectIfNew"}]),
            json!([{"key": "maint", "operator": "Exists"}]), false, NOW, true, ""),
        ("tolerationSeconds running", json!([{"key": "gpu", "effect": "NoSelect", "timeAdded": ADDED}]),
            json!([{"key": "gpu", "operator": "Exists", "tolerationSeconds": 300}]), true, NOW + 299, true,
            "; taint gpu:NoSelect is tolerated until 2026-01-01T00:05:00Z"),
        ("tolerationSeconds run out", json!([{"key": "gpu", "effect": "NoSelect", "timeAdded": ADDED}]),
            json!([{"key": "gpu", "operator": "Exists", "tolerationSeconds": 300}]), true, NOW + 300, false,
            "filtered by TaintToleration: taint gpu:NoSelect was tolerated until 2026-01-01T00:05:00Z; its tolerationSeconds have run out; the cluster is removed from the placement's decisions"),
        ("tolerationSeconds 0", json!([{"key": "gpu", "effect": "NoSelect", "timeAdded": ADDED}]),
            json!([{"key": "gpu", "operator": "Exists", "tolerationSeconds": 0}]), false, NOW, false, "have run out"),
        ("tolerationSeconds without timeAdded", json!([{"key": "gpu", "effect": "NoSelect"}]),
            json!([{"key": "gpu", "operator": "Exists", "tolerationSeconds": 3600}]), false, NOW, false,
            "filtered by TaintToleration: taint gpu:NoSelect has no timeAdded, so the tolerationSeconds of the toleration that matches it have run out"),
        ("expired toleration, then a lasting one", json!([{"key": "gpu", "effect": "NoSelect", "timeAdded": ADDED}]),
            json!([{"key": "gpu", "operator": "Exists", "tolerationSeconds": 1}, {"key": "gpu", "operator": "Exists"}]), false, NOW + 10, true, ""),
        ("the earliest expiry is reported", json!([
                {"key": "a", "effect": "NoSelect", "timeAdded": ADDED},
                {"key": "b", "effect": "NoSelect", "timeAdded": "2025-12-31T23:59:00Z"}]),
            json!([{"operator": "Exists", "tolerationSeconds": 120}]), false, NOW + 30, true,
            "; taint b:NoSelect is tolerated until 2026-01-01T00:01:00Z"),
        ("every taint must be tolerated", json!([
                {"key": "a", "effect": "NoSelect"}, {"key": "b", "effect": "NoSelect"}]),
            json!([{"key": "a", "operator": "Exists"}]), false, NOW, false, "taint b:NoSelect is not tolerated"),
    ];
    for (name, taints, tolerations, before, now, want, fragment) in cases {
        let cat = commit(vec![
            tainted("c", taints),
            placement("app", "p", json!({"tolerations": tolerations})),
        ]);
        let f = fleet(&cat, None);
        let r = one(&cat, &f, "p", if before { &["c"] } else { &[] }, now);
        let d = decision_of(&r, "c");
        assert_eq!(d.selected, want, "{name}: {}", d.reason());
        assert_eq!(d.score.is_some(), want, "{name}");
        assert!(d.reason().contains(fragment), "{name}: {}", d.reason());
        let status = if want { "True" } else { "False" };
        assert_eq!(satisfied_of(&r).0, status, "{name}");
    }
}

#[test]
fn an_unhealthy_cluster_carries_the_unreachable_taint() {
    let objects = |tolerations: Value| {
        commit(vec![
            cluster("up", json!({})),
            cluster("down", json!({})),
            placement("app", "p", json!({"tolerations": tolerations})),
        ])
    };
    let inv = inventory(&[
        live("up"),
        Live {
            healthy: false,
            ..live("down")
        },
    ]);
    let cat = objects(json!([]));
    let f = fleet(&cat, Some(&inv));
    let r = one(&cat, &f, "p", &["down"], NOW);
    assert_eq!(r.selected, ["up"]);
    assert_eq!(
        decision_of(&r, "down").reason(),
        "filtered by TaintToleration: taint cluster.open-cluster-management.io/unreachable:NoSelect (gitfleet's stand-in for the hub's taint: the cluster is unhealthy: connection refused) is not tolerated; the cluster is removed from the placement's decisions"
    );
    let cat = objects(json!([{"key": TAINT_UNREACHABLE, "operator": "Exists"}]));
    let f = fleet(&cat, Some(&inv));
    assert_eq!(one(&cat, &f, "p", &[], NOW).selected, ["down", "up"]);
    let cat = objects(
        json!([{"key": TAINT_UNREACHABLE, "operator": "Exists", "tolerationSeconds": 600}]),
    );
    let f = fleet(&cat, Some(&inv));
    let r = one(&cat, &f, "p", &["down"], NOW);
    assert_eq!(r.selected, ["up"]);
    assert!(
        decision_of(&r, "down")
            .reason()
            .contains("when the cluster became unhealthy is unknown"),
        "{}",
        decision_of(&r, "down").reason()
    );
}

#[test]
fn toleration_rules_are_checked_when_there_are_clusters() {
    let cat = commit(vec![
        cluster("c", json!({})),
        placement("app", "p", json!({})),
    ]);
    let f = fleet(&cat, None);
    let mut entry = Entry {
        index: cat.ocm_placements[0].index,
        spec: cat.ocm_placements[0].spec.clone(),
    };
    entry.spec.spec.tolerations = vec![OcmToleration {
        key: String::new(),
        operator: None,
        value: String::new(),
        effect: None,
        toleration_seconds: None,
    }];
    let r = schedule_one(&cat, &entry, &f, None, &BTreeMap::new(), NOW);
    assert_eq!(
        misconfigured_of(&r),
        (
            "True",
            "Misconfigured",
            "TaintToleration:If the key is empty, operator must be Exists."
        )
    );
    assert_eq!(satisfied_of(&r).1, "NoManagedClusterMatched");
    assert!(r.selected.is_empty());
    assert_eq!(
        decision_of(&r, "c").reason(),
        "not scheduled: the placement is misconfigured (TaintToleration:If the key is empty, operator must be Exists.)"
    );
    // A misconfigured placement writes one empty PlacementDecision.
    let pds = placement_decisions(&r);
    assert_eq!(pds.len(), 1);
    assert_eq!(pds[0]["status"]["decisions"], json!([]));
    entry.spec.spec.tolerations[0] = OcmToleration {
        key: "gpu".into(),
        operator: Some(OcmTolerationOperator::Exists),
        value: "x".into(),
        effect: None,
        toleration_seconds: None,
    };
    let r = schedule_one(&cat, &entry, &f, None, &BTreeMap::new(), NOW);
    assert_eq!(
        misconfigured_of(&r).2,
        "TaintToleration:If the operator is Exists, the value should be empty."
    );
}

#[test]
fn unknown_builtin_prioritizer_is_misconfigured() {
    let cat = commit(vec![
        cluster("c", json!({})),
        placement("app", "p", json!({})),
    ]);
    let f = fleet(&cat, None);
    let mut entry = Entry {
        index: cat.ocm_placements[0].index,
        spec: cat.ocm_placements[0].spec.clone(),
    };
    entry.spec.spec.prioritizer_policy.configurations =
        vec![serde_json::from_value(builtin("Spread", 1)).unwrap()];
    let r = schedule_one(&cat, &entry, &f, None, &BTreeMap::new(), NOW);
    assert_eq!(
        misconfigured_of(&r),
        (
            "True",
            "Misconfigured",
            ":incorrect builtin prioritizer: Spread"
        )
    );
    assert!(r.selected.is_empty());
    entry.spec.spec.prioritizer_policy.configurations =
        vec![serde_json::from_value(json!({"scoreCoordinate": {"type": "AddOn"}})).unwrap()];
    let r = schedule_one(&cat, &entry, &f, None, &BTreeMap::new(), NOW);
    assert_eq!(misconfigured_of(&r).2, ":addOn should not be empty");
}

// ---------------------------------------------------------------------------------------------
// Predicates, claims and CEL
// ---------------------------------------------------------------------------------------------

#[test]
fn predicates_are_ored_and_claims_are_properties() {
    let cat = commit(vec![
        cluster("east", json!({"region": "east"})),
        cluster("west", json!({"region": "west"})),
        cluster("gpu", json!({"region": "north"})),
        cluster("none", json!({"region": "south"})),
        placement(
            "app",
            "p",
            json!({"predicates": [
                {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"region": "east"}}}},
                {"requiredClusterSelector": {"claimSelector": {"matchExpressions": [
                    {"key": "gpu.example.com/count", "operator": "In", "values": ["2"]}]}}},
            ]}),
        ),
        placement(
            "app",
            "west-only",
            json!({"predicates": [
                {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"region": "west"}}}},
            ]}),
        ),
    ]);
    let inv = inventory(&[
        live("east"),
        live("west"),
        Live {
            properties: &[("gpu.example.com/count", "2")],
            ..live("gpu")
        },
        live("none"),
    ]);
    let f = fleet(&cat, Some(&inv));
    let r = one(&cat, &f, "p", &[], NOW);
    assert_eq!(r.selected, ["east", "gpu"]);
    assert_eq!(
        decision_of(&r, "west").reason(),
        "filtered by Predicate: the cluster matches none of the 2 predicates"
    );
    let r = one(&cat, &f, "west-only", &[], NOW);
    assert_eq!(r.selected, ["west"]);
    assert_eq!(
        decision_of(&r, "east").reason(),
        "filtered by Predicate: the cluster's labels do not match its labelSelector"
    );
    // Filtered clusters follow the scored ones, by name.
    let order: Vec<&str> = r.decisions.iter().map(|d| d.cluster.as_str()).collect();
    assert_eq!(order, ["west", "east", "gpu", "none"]);
}

/// Cases of open-cluster-management-io/ocm pkg/placement/plugins/predicate/predicate_test.go
/// ("match with CEL expression on labels", "... on claims", "... and other selectors",
/// "invalid CEL expression").
#[test]
fn cel_selectors_select_as_ocm_does() {
    let cel = |exprs: &[&str]| json!({"celSelector": {"celExpressions": exprs}});
    let mut with_labels = cel(&[
        r#"managedCluster.status.clusterClaims.exists(c, c.name == "cloud" && c.value == "Amazon")"#,
    ]);
    with_labels["labelSelector"] = json!({"matchLabels": {"env": "prod"}});
    let cat = commit(vec![
        cluster("c1", json!({"region": "us-east-1", "env": "prod"})),
        cluster("c2", json!({"region": "us-west-1", "env": "prod"})),
        cluster("c3", json!({"region": "us-east-1", "env": "dev"})),
        placement(
            "app",
            "labels",
            json!({"predicates": [{"requiredClusterSelector": cel(&[r#"managedCluster.metadata.labels["region"] == "us-east-1""#])}]}),
        ),
        placement(
            "app",
            "claims-and-labels",
            json!({"predicates": [{"requiredClusterSelector": with_labels}]}),
        ),
        placement(
            "app",
            "two",
            json!({"predicates": [{"requiredClusterSelector": cel(&[
                r#"managedCluster.metadata.labels["env"] == "prod""#,
                r#"managedCluster.metadata.name.startsWith("c1")"#,
            ])}]}),
        ),
        placement(
            "app",
            "runtime-error",
            json!({"predicates": [{"requiredClusterSelector": cel(&["managedCluster.metadata.labels.missing == 'x'"])}]}),
        ),
    ]);
    let claims = |cloud| Live {
        properties: match cloud {
            "Amazon" => &[("cloud", "Amazon")],
            _ => &[("cloud", "Azure")],
        },
        ..live("x")
    };
    let inv = inventory(&[
        Live {
            name: "c1",
            ..claims("Amazon")
        },
        Live {
            name: "c2",
            ..claims("Azure")
        },
        Live {
            name: "c3",
            ..claims("Amazon")
        },
    ]);
    let f = fleet(&cat, Some(&inv));
    let r = one(&cat, &f, "labels", &[], NOW);
    assert_eq!(r.selected, ["c1", "c3"]);
    assert_eq!(
        decision_of(&r, "c2").reason(),
        "filtered by Predicate: the cluster does not satisfy its celSelector"
    );
    assert_eq!(misconfigured_of(&r).0, "False");
    let r = one(&cat, &f, "claims-and-labels", &[], NOW);
    assert_eq!(r.selected, ["c1"]);
    let r = one(&cat, &f, "two", &[], NOW);
    assert_eq!(r.selected, ["c1"]);
    // An evaluation error is no match (OCM's EvaluateSingleExpression), not a misconfiguration.
    let r = one(&cat, &f, "runtime-error", &[], NOW);
    assert!(r.selected.is_empty());
    assert_eq!(misconfigured_of(&r).0, "False");
}

/// An expression that does not compile, or calls a function of OCM's library with arguments
/// cel-go's checker rejects, makes the placement misconfigured with no decisions (predicate.go returns
/// Misconfigured with the compile error).
#[test]
fn cel_compile_errors_make_the_placement_misconfigured() {
    let cat = commit(vec![
        cluster("c", json!({})),
        placement(
            "app",
            "syntax",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": ["managedCluster.metadata.name =="]}}}]}),
        ),
        placement(
            "app",
            "quantity",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
                "quantity(managedCluster.metadata.labels['mem']).isLessThan('1Gi')"
            ]}}}]}),
        ),
        placement(
            "app",
            "scores-as-global",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
                "scores(managedCluster, 'test-addon').size() > 0"
            ]}}}]}),
        ),
    ]);
    let f = fleet(&cat, None);
    let r = one(&cat, &f, "syntax", &[], NOW);
    assert!(r.selected.is_empty());
    let (status, reason, message) = misconfigured_of(&r);
    assert_eq!((status, reason), ("True", "Misconfigured"));
    assert!(
        message.starts_with("Predicate:compilation failed: "),
        "{message}"
    );
    assert_eq!(satisfied_of(&r).1, "NoManagedClusterMatched");
    let r = one(&cat, &f, "quantity", &[], NOW);
    assert!(r.selected.is_empty());
    assert_eq!(
        misconfigured_of(&r).2,
        "Predicate:compilation failed: found no matching overload for 'isLessThan' (OCM declares <Semver>.isLessThan(<Semver>) or <Quantity>.isLessThan(<Quantity>)) (\"quantity(managedCluster.metadata.labels['mem']).isLessThan('1Gi')\")"
    );
    // `scores` is a member function in OCM (ManagedClusterLib's MemberOverload): called as a
    // global one, cel-go's checker finds no overload.
    let r = one(&cat, &f, "scores-as-global", &[], NOW);
    assert!(r.selected.is_empty());
    assert_eq!(
        misconfigured_of(&r).2,
        "Predicate:compilation failed: found no matching overload for 'scores' (OCM declares <ManagedCluster>.scores(<string>)) (\"scores(managedCluster, 'test-addon').size() > 0\")"
    );
}

/// OCM's library functions in a placement: `scores` reads the inventory's add-on scores
/// (sdk-go managedcluster.go clusterScores; the README example of a CEL selector on an
/// AddOnPlacementScore), `semver` compares versions (ocm pkg/placement/helpers/cel_test.go),
/// `quantity` and `cidr` compare label values.
/// A cluster whose expression fails at evaluation is filtered, the placement is not
/// misconfigured.
#[test]
fn cel_library_functions_select_clusters() {
    let cat = commit(vec![
        cluster(
            "hot",
            json!({"version": "1.31.2", "memory": "128Gi", "api-ip": "10.1.2.3"}),
        ),
        cluster(
            "cool",
            json!({"version": "1.29.0", "memory": "68719476736", "api-ip": "192.168.0.1"}),
        ),
        cluster(
            "unscored",
            json!({"version": "not-a-version", "memory": "lots", "api-ip": "10.0.0.1"}),
        ),
        placement(
            "app",
            "scores",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
                "managedCluster.scores('test-addon').filter(s, s.name == 'test-score').all(e, e.value > 80)"
            ]}}}]}),
        ),
        placement(
            "app",
            "semver",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
                "semver(managedCluster.metadata.labels['version']).isLessThan(semver('1.30.0'))"
            ]}}}]}),
        ),
        // Kubernetes' quantity and CIDR libraries (quantity_test.go, cidr_test.go) on labels.
        placement(
            "app",
            "quantity",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
                "quantity(managedCluster.metadata.labels['memory']).isGreaterThan(quantity('64Gi'))"
            ]}}}]}),
        ),
        placement(
            "app",
            "cidr",
            json!({"predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
                "cidr('10.0.0.0/8').containsIP(managedCluster.metadata.labels['api-ip'])"
            ]}}}]}),
        ),
    ]);
    let inv = inventory(&[
        Live {
            add_on: &[("test-score", 90)],
            ..live("hot")
        },
        Live {
            add_on: &[("test-score", 10)],
            ..live("cool")
        },
        live("unscored"),
    ]);
    let f = fleet(&cat, Some(&inv));
    let r = one(&cat, &f, "scores", &[], NOW);
    assert_eq!(r.selected, ["hot"]);
    assert_eq!(misconfigured_of(&r).0, "False");
    assert_eq!(
        decision_of(&r, "unscored").reason(),
        "filtered by Predicate: the cluster does not satisfy its celSelector"
    );
    let r = one(&cat, &f, "semver", &[], NOW);
    assert_eq!(r.selected, ["cool"]);
    assert_eq!(misconfigured_of(&r).0, "False");
    // 68719476736 is 64Gi exactly, not greater; "lots" is no quantity: an evaluation error.
    let r = one(&cat, &f, "quantity", &[], NOW);
    assert_eq!(r.selected, ["hot"]);
    assert_eq!(misconfigured_of(&r).0, "False");
    let r = one(&cat, &f, "cidr", &[], NOW);
    assert_eq!(r.selected, ["hot", "unscored"]);
}

// ---------------------------------------------------------------------------------------------
// Cluster sets and bindings
// ---------------------------------------------------------------------------------------------

#[test]
fn candidates_come_from_the_sets_bound_into_the_namespace() {
    let label_set = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSet",
        "metadata": {"name": "gpus"},
        "spec": {"clusterSelector": {"selectorType": "LabelSelector", "labelSelector": {"matchLabels": {"gpu": "true"}}}},
    });
    let set_label = "cluster.open-cluster-management.io/clusterset";
    let cat = load(vec![
        namespace("app"),
        namespace("other"),
        namespace("empty"),
        namespace("lonely"),
        namespace("nowhere"),
        set("prod"),
        set("dev"),
        set("vacant"),
        label_set,
        bind("app", "prod"),
        bind("app", "gpus"),
        bind("other", "dev"),
        bind("empty", "vacant"),
        bind("lonely", "missing"),
        cluster("p1", json!({set_label: "prod"})),
        cluster("p2", json!({set_label: "prod", "gpu": "true"})),
        cluster("d1", json!({set_label: "dev", "gpu": "true"})),
        cluster("x1", json!({})),
        // Declared as a KubeFleet member only: never an OCM candidate.
        json!({"apiVersion": "cluster.kubernetes-fleet.io/v1beta1", "kind": "MemberCluster",
            "metadata": {"name": "fleet-only", "labels": {set_label: "prod"}},
            "spec": {"identity": {"name": "a", "kind": "ServiceAccount", "namespace": "fleet-system", "apiGroup": ""}}}),
        placement("app", "all", json!({})),
        placement("app", "prod-only", json!({"clusterSets": ["prod"]})),
        placement(
            "app",
            "not-bound",
            json!({"clusterSets": ["dev", "staging"]}),
        ),
        placement("other", "dev", json!({})),
        placement("empty", "p", json!({})),
        placement("lonely", "p", json!({})),
        placement("nowhere", "p", json!({})),
    ]);
    let f = fleet(&cat, None);
    let out = schedule_all(&cat, &f, &Previous::new(), NOW);
    let get = |id: &str| out.iter().find(|r| r.key.to_string() == id).unwrap();
    let candidates = |id: &str| {
        let mut c: Vec<&str> = get(id)
            .decisions
            .iter()
            .map(|d| d.cluster.as_str())
            .collect();
        c.sort();
        c
    };
    assert_eq!(candidates("ocm/app/all"), ["d1", "p1", "p2"]);
    assert_eq!(get("ocm/app/all").selected, ["d1", "p1", "p2"]);
    assert_eq!(candidates("ocm/app/prod-only"), ["p1", "p2"]);
    assert_eq!(
        satisfied_of(get("ocm/app/not-bound")),
        (
            "False",
            "NoIntersection",
            "None of ManagedClusterSets [dev,staging] is bound to placement namespace"
        )
    );
    assert_eq!(get("ocm/other/dev").selected, ["d1"]);
    assert_eq!(
        satisfied_of(get("ocm/empty/p")),
        (
            "False",
            "AllManagedClusterSetsEmpty",
            "All ManagedClusterSets [vacant] have no member ManagedCluster"
        )
    );
    let none = (
        "False",
        "NoManagedClusterSetBindings",
        "No valid ManagedClusterSetBindings found in placement namespace",
    );
    assert_eq!(satisfied_of(get("ocm/lonely/p")), none);
    assert_eq!(satisfied_of(get("ocm/nowhere/p")), none);
    // Even with nothing to schedule there is one (empty) decision group.
    assert_eq!(get("ocm/nowhere/p").decision_groups.len(), 1);
    assert_eq!(placement_decisions(get("ocm/nowhere/p")).len(), 1);
}

#[test]
fn clusters_being_deleted_are_not_candidates() {
    let mut deleting = cluster("old", json!({}));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let cat = commit(vec![
        deleting,
        cluster("new", json!({})),
        placement("app", "p", json!({})),
    ]);
    let f = fleet(&cat, None);
    let r = one(&cat, &f, "p", &[], NOW);
    assert_eq!(r.selected, ["new"]);
    assert_eq!(r.decisions.len(), 1);
}

#[test]
fn a_disabled_placement_keeps_its_previous_result() {
    let mut p = placement("app", "p", json!({}));
    p["metadata"]["annotations"] = json!({DISABLE_ANNOTATION: "true"});
    let cat = commit(vec![cluster("a", json!({})), cluster("b", json!({})), p]);
    let f = fleet(&cat, None);
    let r = one(&cat, &f, "p", &["b"], NOW);
    assert_eq!(r.selected, ["b"]);
    let r = one(&cat, &f, "p", &[], NOW);
    assert!(r.selected.is_empty() && r.conditions.is_empty() && r.decision_groups.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Decision groups and PlacementDecisions
// ---------------------------------------------------------------------------------------------

#[test]
fn decision_groups_follow_the_docs_example() {
    let mut objects = Vec::new();
    let mut names = Vec::new();
    for i in 0..310 {
        let name = format!("c{i:03}");
        let region = match i {
            0..10 => "west",
            10..20 => "east",
            _ => "central",
        };
        objects.push(cluster(
            &name,
            json!({"region": region, "canary": if i < 20 { "true" } else { "false" }}),
        ));
        names.push(name);
    }
    objects.push(placement("app", "p", json!({"decisionStrategy": {"groupStrategy": {
        "clustersPerDecisionGroup": 150,
        "decisionGroups": [
            {"groupName": "canary-west", "groupClusterSelector": {"labelSelector": {"matchLabels": {"region": "west"}}}},
            // Matches west too, but west is taken: a cluster joins the first group that matches.
            {"groupName": "canary-east", "groupClusterSelector": {"labelSelector": {"matchLabels": {"canary": "true"}}}},
            {"groupName": "nobody", "groupClusterSelector": {"labelSelector": {"matchLabels": {"region": "mars"}}}},
        ],
    }}})));
    let cat = commit(objects);
    let f = fleet(&cat, None);
    let r = one(&cat, &f, "p", &[], NOW);
    let shape: Vec<(&str, usize, usize)> = r
        .decision_groups
        .iter()
        .map(|g| (g.group_name.as_str(), g.group_index, g.clusters.len()))
        .collect();
    assert_eq!(
        shape,
        [
            ("canary-west", 0, 10),
            ("canary-east", 1, 10),
            ("", 2, 150),
            ("", 3, 140)
        ]
    );
    assert_eq!(r.decision_groups[1].clusters[0], "c010");
    assert_eq!(r.decision_groups[2].clusters[0], "c020");
    assert_eq!(r.decision_groups[3].clusters[0], "c170");
    let pds = placement_decisions(&r);
    let pages: Vec<(String, usize, String, String)> = pds
        .iter()
        .map(|d| {
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                d["status"]["decisions"].as_array().unwrap().len(),
                d["metadata"]["labels"][DECISION_GROUP_NAME_LABEL]
                    .as_str()
                    .unwrap()
                    .to_string(),
                d["metadata"]["labels"][DECISION_GROUP_INDEX_LABEL]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let want: Vec<(String, usize, String, String)> = [
        ("p-decision-1", 10, "canary-west", "0"),
        ("p-decision-2", 10, "canary-east", "1"),
        ("p-decision-3", 100, "", "2"),
        ("p-decision-4", 50, "", "2"),
        ("p-decision-5", 100, "", "3"),
        ("p-decision-6", 40, "", "3"),
    ]
    .iter()
    .map(|(a, b, c, d)| (a.to_string(), *b, c.to_string(), d.to_string()))
    .collect();
    assert_eq!(pages, want);
    assert_eq!(
        decision_group_status(&r)[2],
        json!({"decisionGroupIndex": 2, "decisionGroupName": "", "decisions": ["p-decision-3", "p-decision-4"], "clusterCount": 150})
    );
    let _ = names;
}

#[test]
fn placement_decisions_page_by_100_with_string_fields_only() {
    let mut objects: Vec<Value> = (0..250)
        .map(|i| cluster(&format!("m{i:03}"), json!({})))
        .collect();
    objects.push(placement("app", "web", json!({"numberOfClusters": 230})));
    let cat = commit(objects);
    let f = fleet(&cat, None);
    let r = one(&cat, &f, "web", &[], NOW);
    assert_eq!(r.selected.len(), 230);
    let pds = placement_decisions(&r);
    assert_eq!(pds.len(), 3);
    assert_eq!(
        pds[0],
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1",
            "kind": "PlacementDecision",
            "metadata": {
                "name": "web-decision-1",
                "namespace": "app",
                "labels": {
                    PLACEMENT_LABEL: "web",
                    DECISION_GROUP_NAME_LABEL: "",
                    DECISION_GROUP_INDEX_LABEL: "0",
                },
            },
            "status": {"decisions": (0..100).map(|i| json!({"clusterName": format!("m{i:03}"), "reason": ""})).collect::<Vec<_>>()},
        })
    );
    let sizes: Vec<usize> = pds
        .iter()
        .map(|d| d["status"]["decisions"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [100, 100, 30]);
    assert_eq!(pds[2]["metadata"]["name"], "web-decision-3");
    assert_eq!(pds[2]["status"]["decisions"][29]["clusterName"], "m229");
    for pd in &pds {
        for d in pd["status"]["decisions"].as_array().unwrap() {
            assert!(d.as_object().unwrap().values().all(Value::is_string), "{d}");
        }
    }
}

#[test]
fn clusters_per_decision_group_percentages_and_misconfiguration() {
    let mut objects = plain_clusters(&["a", "b", "c", "d", "e", "f", "g"]);
    objects.push(placement(
        "app",
        "p",
        json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "30%"}}}),
    ));
    let cat = commit(objects);
    let f = fleet(&cat, None);
    let r = one(&cat, &f, "p", &[], NOW);
    // ceil(0.3 × 7) = 3
    let sizes: Vec<usize> = r.decision_groups.iter().map(|g| g.clusters.len()).collect();
    assert_eq!(sizes, [3, 3, 1]);
    assert_eq!(r.decision_groups[2].clusters, ["g"]);

    let cases: &[(Option<IntOrPercent>, usize, Result<usize, &str>)] = &[
        (None, 310, Ok(310)),
        (Some(IntOrPercent::Int(150)), 310, Ok(150)),
        (Some(IntOrPercent::Int(0)), 310, Ok(310)),
        (Some(IntOrPercent::Int(-3)), 310, Ok(310)),
        (Some(IntOrPercent::Int(400)), 310, Ok(310)),
        (Some(IntOrPercent::String("25%".into())), 7, Ok(2)),
        (Some(IntOrPercent::String("12.5%".into())), 16, Ok(2)),
        (Some(IntOrPercent::String("100%".into())), 0, Ok(0)),
        (
            Some(IntOrPercent::String("5".into())),
            7,
            Err("5 invalid type: string is not a percentage"),
        ),
        (
            Some(IntOrPercent::String("x%".into())),
            7,
            Err("x% invalid type: string is not a percentage"),
        ),
    ];
    for (value, total, want) in cases {
        let got = groups::group_length(value.as_ref(), *total).map_err(|m| m.message);
        assert_eq!(got, want.map_err(String::from), "{value:?} of {total}");
    }

    // A non-percentage string: no group, no PlacementDecision, nothing selected.
    let mut entry = Entry {
        index: cat.ocm_placements[0].index,
        spec: cat.ocm_placements[0].spec.clone(),
    };
    entry
        .spec
        .spec
        .decision_strategy
        .group_strategy
        .clusters_per_decision_group = Some(IntOrPercent::String("5".into()));
    let r = schedule_one(&cat, &entry, &f, None, &BTreeMap::new(), NOW);
    assert!(r.decision_groups.is_empty());
    assert!(placement_decisions(&r).is_empty());
    assert!(r.selected.is_empty());
    assert_eq!(
        misconfigured_of(&r),
        (
            "True",
            "Misconfigured",
            ":5 invalid type: string is not a percentage"
        )
    );
    // OCM computes PlacementSatisfied from the scheduler's result, which is complete.
    assert_eq!(satisfied_of(&r).1, "AllDecisionsScheduled");
    let d = decision_of(&r, "a");
    assert!(!d.selected);
    assert!(d.reason().starts_with("not placed: the placement is misconfigured (:5 invalid type: string is not a percentage)"), "{}", d.reason());
}

#[test]
fn claim_selectors_group_clusters_too() {
    let mut objects = plain_clusters(&["a", "b", "c"]);
    objects.push(placement(
        "app",
        "p",
        json!({"decisionStrategy": {"groupStrategy": {"decisionGroups": [
            {"groupName": "big", "groupClusterSelector": {"claimSelector": {"matchExpressions": [
                {"key": "size", "operator": "In", "values": ["big"]}]}}},
        ]}}}),
    ));
    let cat = commit(objects);
    let inv = inventory(&[
        live("a"),
        Live {
            properties: &[("size", "big")],
            ..live("b")
        },
        live("c"),
    ]);
    let f = fleet(&cat, Some(&inv));
    let r = one(&cat, &f, "p", &[], NOW);
    let shape: Vec<(&str, Vec<String>)> = r
        .decision_groups
        .iter()
        .map(|g| {
            (
                g.group_name.as_str(),
                g.clusters.iter().map(|c| c.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("big", vec!["b".to_string()]),
            ("", vec!["a".to_string(), "c".to_string()])
        ]
    );
}

use crate::model::placement::IntOrPercent;
