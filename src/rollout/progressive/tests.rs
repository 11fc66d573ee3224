//! OCM's own cases for its rollout handler, behaviour by behaviour: each test names the case of
//! open-cluster-management-io/sdk-go `pkg/apis/cluster/v1alpha1/rollout_test.go` it ports (the
//! rollout helpers formerly in open-cluster-management-io/api `cluster/v1alpha1/helpers.go`).
//! OCM's fake clock is `NOW`; times are offsets from it in seconds.

use super::*;
use serde_json::json;

const NOW: u64 = 1_000_000;

fn at(offset: i64) -> u64 {
    (NOW as i64 + offset) as u64
}

type GroupSpec<'a> = (&'a str, usize, &'a [&'a str]);

fn groups(spec: &[GroupSpec]) -> Vec<DecisionGroup> {
    spec.iter()
        .map(|(name, index, clusters)| DecisionGroup {
            group_name: name.to_string(),
            group_index: *index,
            clusters: clusters.iter().map(|&c| c.into()).collect(),
        })
        .collect()
}

fn key(name: &str, index: usize) -> GroupKey {
    GroupKey {
        name: name.into(),
        index,
    }
}

/// A workload's status (OCM's dummy workload: waiting, applying, done, failed).
fn work(cluster: &str, group: (&str, usize), status: Status, since: Option<i64>) -> ClusterRollout {
    ClusterRollout::new(cluster, key(group.0, group.1), status, since.map(at))
}

/// An expected entry of the result.
fn r(
    cluster: &str,
    group: (&str, usize),
    status: Status,
    since: Option<i64>,
    recheck: Option<i64>,
) -> ClusterRollout {
    ClusterRollout {
        recheck_at: recheck.map(at),
        ..work(cluster, group, status, since)
    }
}

fn strategy(v: serde_json::Value) -> Strategy {
    let rs: OcmRolloutStrategy = serde_json::from_value(v).unwrap();
    Strategy::of(Some(&rs)).unwrap()
}

use Status::{Failed, Progressing, Succeeded, TimeOut, ToApply};

const G1: (&str, usize) = ("group1", 0);
const G2: (&str, usize) = ("", 1);
const G3: (&str, usize) = ("", 2);

fn check(
    s: &Strategy,
    g: &[GroupSpec],
    existing: &[ClusterRollout],
    to_rollout: &[ClusterRollout],
    timed_out: &[ClusterRollout],
    breach: bool,
    recheck_after: Option<u64>,
) -> Decision {
    let d = decide(s, &groups(g), existing, NOW);
    assert_eq!(d.to_rollout, to_rollout, "clusters to roll out");
    assert_eq!(d.timed_out, timed_out, "timed out");
    assert_eq!(d.max_failure_breach, breach, "max failure breach");
    assert_eq!(d.recheck_after, recheck_after, "recheck after");
    d
}

const SIX: &[GroupSpec] = &[
    ("group1", 0, &["cluster1", "cluster2", "cluster3"]),
    ("", 1, &["cluster4", "cluster5", "cluster6"]),
];
const NINE: &[GroupSpec] = &[
    ("group1", 0, &["cluster1", "cluster2", "cluster3"]),
    ("", 1, &["cluster4", "cluster5", "cluster6"]),
    ("", 2, &["cluster7", "cluster8", "cluster9"]),
];

/// The first three clusters of group1: done 60s ago, failed 120s ago, `third`.
fn first_group(third: (Status, i64)) -> Vec<ClusterRollout> {
    vec![
        work("cluster1", G1, Succeeded, Some(-60)),
        work("cluster2", G1, Failed, Some(-120)),
        work("cluster3", G1, third.0, Some(third.1)),
    ]
}

// TestGetRolloutCluster_All

/// "test rollout all with timeout 90s without workload created"
#[test]
fn all_without_workload_created() {
    let s = strategy(json!({"type": "All", "all": {"progressDeadline": "90s"}}));
    let all: Vec<ClusterRollout> = ["cluster1", "cluster2", "cluster3"]
        .iter()
        .map(|c| r(c, G1, ToApply, None, None))
        .chain(
            ["cluster4", "cluster5", "cluster6"]
                .iter()
                .map(|c| r(c, G2, ToApply, None, None)),
        )
        .collect();
    check(&s, SIX, &[], &all, &[], false, None);
}

// TestGetRolloutCluster_Progressive

/// "test progressive rollout with timeout 90s without workload created" (and "deprecated
/// timeout", the same case).
#[test]
fn progressive_without_workload_created() {
    let s = strategy(
        json!({"type": "Progressive", "progressive": {"progressDeadline": "90s", "maxConcurrency": 2}}),
    );
    let expect = [
        r("cluster1", G1, ToApply, None, None),
        r("cluster2", G1, ToApply, None, None),
    ];
    check(&s, SIX, &[], &expect, &[], false, None);
}

fn ten_waiting() -> Vec<ClusterRollout> {
    let mut w = vec![work("cluster1", G1, Progressing, Some(-60))];
    w.extend(["cluster2", "cluster3"].map(|c| work(c, G1, ToApply, None)));
    w.extend(["cluster4", "cluster5", "cluster6"].map(|c| work(c, G2, ToApply, None)));
    w.extend(["cluster7", "cluster8", "cluster9", "cluster10"].map(|c| work(c, G3, ToApply, None)));
    w
}

/// "test progressive rollout with timeout 90s and workload clusterRollOutStatus are in
/// ToApply status": cluster10 is in no group any more, so removed.
#[test]
fn progressive_with_workloads_to_apply() {
    let s = strategy(
        json!({"type": "Progressive", "progressive": {"progressDeadline": "90s", "maxConcurrency": 4}}),
    );
    let expect = [
        r("cluster1", G1, Progressing, Some(-60), Some(30)),
        r("cluster2", G1, ToApply, None, None),
        r("cluster3", G1, ToApply, None, None),
        r("cluster4", G2, ToApply, None, None),
    ];
    let d = check(&s, NINE, &ten_waiting(), &expect, &[], false, Some(30));
    assert_eq!(d.removed, [r("cluster10", G3, ToApply, None, None)]);
}

/// "test progressive rollout with timeout 90s and MaxConcurrency not set": every cluster.
#[test]
fn progressive_without_max_concurrency_takes_every_cluster() {
    let s = strategy(json!({"type": "Progressive", "progressive": {"progressDeadline": "90s"}}));
    let mut expect = vec![
        r("cluster1", G1, Progressing, Some(-60), Some(30)),
        r("cluster2", G1, ToApply, None, None),
        r("cluster3", G1, ToApply, None, None),
    ];
    expect.extend(["cluster4", "cluster5", "cluster6"].map(|c| r(c, G2, ToApply, None, None)));
    expect.extend(["cluster7", "cluster8", "cluster9"].map(|c| r(c, G3, ToApply, None, None)));
    let d = check(&s, NINE, &ten_waiting(), &expect, &[], false, Some(30));
    assert_eq!(d.removed, [r("cluster10", G3, ToApply, None, None)]);
}

/// "test progressive rollout with timeout 90s and no maxFailures set": one timeout breaches.
#[test]
fn progressive_without_max_failures_stops_at_the_first_timeout() {
    let s = strategy(
        json!({"type": "Progressive", "progressive": {"progressDeadline": "90s", "maxConcurrency": 2}}),
    );
    check(
        &s,
        SIX,
        &first_group((Progressing, -60)),
        &[r("cluster3", G1, Progressing, Some(-60), Some(30))],
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        true,
        Some(30),
    );
}

/// "test progressive rollout with timeout 90s, 100% maxFailures, minSuccessTime 60s": a
/// cluster that succeeded 30s ago still soaks and holds a place.
#[test]
fn progressive_soaking_cluster_holds_its_place() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "progressDeadline": "90s", "maxFailures": "100%", "minSuccessTime": "60s", "maxConcurrency": 2}}));
    let existing = [
        work("cluster1", G1, Succeeded, Some(-30)),
        work("cluster2", G1, Failed, Some(-120)),
        work("cluster3", G1, Progressing, Some(-30)),
    ];
    check(
        &s,
        SIX,
        &existing,
        &[
            r("cluster1", G1, Succeeded, Some(-30), Some(30)),
            r("cluster3", G1, Progressing, Some(-30), Some(60)),
        ],
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        false,
        Some(30),
    );
}

/// "test progressive rollout with mixed timeout and minSuccessTime scenarios"
#[test]
fn progressive_mixed_timeout_and_soak() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "progressDeadline": "90s", "maxFailures": "100%", "minSuccessTime": "1m", "maxConcurrency": 4}}));
    let g: &[GroupSpec] = &[(
        "group1",
        0,
        &["cluster1", "cluster2", "cluster3", "cluster4"],
    )];
    let existing = [
        work("cluster1", G1, Succeeded, Some(-30)),
        work("cluster2", G1, Progressing, Some(-60)),
        work("cluster3", G1, Progressing, Some(-30)),
        work("cluster4", G1, Succeeded, Some(-120)),
    ];
    check(
        &s,
        g,
        &existing,
        &[
            r("cluster1", G1, Succeeded, Some(-30), Some(30)),
            r("cluster2", G1, Progressing, Some(-60), Some(30)),
            r("cluster3", G1, Progressing, Some(-30), Some(60)),
        ],
        &[],
        false,
        Some(30),
    );
}

/// "test progressive rollout with timeout 90s and maxFailures 1": one timeout is tolerated.
#[test]
fn progressive_tolerates_max_failures() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "progressDeadline": "90s", "maxFailures": 1, "maxConcurrency": 2}}));
    check(
        &s,
        SIX,
        &first_group((Progressing, -60)),
        &[
            r("cluster3", G1, Progressing, Some(-60), Some(30)),
            r("cluster4", G2, ToApply, None, None),
        ],
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        false,
        Some(30),
    );
}

/// "test progressive rollout with timeout 0s, maxFailures 3": a zero deadline times out at once.
#[test]
fn progressive_zero_deadline_times_out_at_once() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "progressDeadline": "0s", "maxFailures": 3, "maxConcurrency": 2}}));
    let existing = [
        work("cluster1", G1, Succeeded, Some(-30)),
        work("cluster2", G1, Progressing, Some(-30)),
        work("cluster3", G1, Progressing, Some(-30)),
    ];
    check(
        &s,
        SIX,
        &existing,
        &[
            r("cluster4", G2, ToApply, None, None),
            r("cluster5", G2, ToApply, None, None),
        ],
        &[
            r("cluster2", G1, TimeOut, Some(-30), Some(-30)),
            r("cluster3", G1, TimeOut, Some(-30), Some(-30)),
        ],
        false,
        None,
    );
}

/// "test progressive rollout with mandatoryDecisionGroup and timeout 90s": the mandatory group
/// tolerates no failure.
#[test]
fn progressive_mandatory_group_tolerates_no_failure() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "mandatoryDecisionGroups": [{"groupName": "group1"}],
        "progressDeadline": "90s", "maxConcurrency": 3}}));
    check(
        &s,
        SIX,
        &first_group((Progressing, -60)),
        &[r("cluster3", G1, Progressing, Some(-60), Some(30))],
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        true,
        Some(30),
    );
}

/// "test progressive rollout with timeout None, MaxConcurrency 50%, MaxFailures 100%"
#[test]
fn progressive_percent_concurrency_and_failures() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "progressDeadline": "None", "maxFailures": "100%", "maxConcurrency": "50%"}}));
    let g: &[GroupSpec] = &[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("", 1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
    ];
    let existing = [
        work("cluster1", G1, Succeeded, Some(-60)),
        work("cluster2", G1, Failed, Some(-120)),
        work("cluster3", G2, Progressing, Some(-60)),
    ];
    check(
        &s,
        g,
        &existing,
        &[
            r("cluster2", G1, Failed, Some(-120), None),
            r("cluster3", G2, Progressing, Some(-60), None),
            r("cluster4", G2, ToApply, None, None),
        ],
        &[],
        false,
        None,
    );
    // "... MaxFailures 0%": the failed cluster stops the rollout.
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "progressDeadline": "None", "maxFailures": "0%", "maxConcurrency": "50%"}}));
    check(
        &s,
        g,
        &existing,
        &[
            r("cluster2", G1, Failed, Some(-120), None),
            r("cluster3", G2, Progressing, Some(-60), None),
        ],
        &[],
        true,
        None,
    );
}

const THREE_PAIRS: &[GroupSpec] = &[
    ("group1", 0, &["cluster1", "cluster2"]),
    ("", 1, &["cluster3", "cluster4"]),
    ("", 2, &["cluster5", "cluster6"]),
];

/// "test progressive rollout with mandatory decision groups failed"
#[test]
fn progressive_mandatory_groups_failed() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "mandatoryDecisionGroups": [{"groupName": "group1"}],
        "maxConcurrency": 3, "progressDeadline": "90s"}}));
    let existing = [
        work("cluster1", G1, Failed, Some(-120)),
        work("cluster2", G1, Failed, Some(-60)),
    ];
    check(
        &s,
        THREE_PAIRS,
        &existing,
        &[r("cluster2", G1, Failed, Some(-60), Some(30))],
        &[r("cluster1", G1, TimeOut, Some(-120), Some(-30))],
        true,
        Some(30),
    );
}

/// "test progressive rollout with mandatory decision groups Succeed": then the rest, by
/// `maxConcurrency`.
#[test]
fn progressive_mandatory_groups_succeeded() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "mandatoryDecisionGroups": [{"groupName": "group1"}], "maxConcurrency": 3}}));
    let existing = [
        work("cluster1", G1, Succeeded, Some(-60)),
        work("cluster2", G1, Succeeded, Some(-120)),
    ];
    check(
        &s,
        THREE_PAIRS,
        &existing,
        &[
            r("cluster3", G2, ToApply, None, None),
            r("cluster4", G2, ToApply, None, None),
            r("cluster5", G3, ToApply, None, None),
        ],
        &[],
        false,
        None,
    );
}

// TestGetRolloutCluster_ProgressivePerGroup

fn per_group(deadline: &str, extra: serde_json::Value) -> Strategy {
    let mut c = json!({"progressDeadline": deadline});
    c.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    strategy(json!({"type": "ProgressivePerGroup", "progressivePerGroup": c}))
}

/// "test progressivePerGroup rollout with timeout 90s without workload created": the first
/// group only.
#[test]
fn per_group_without_workload_created() {
    let s = per_group("90s", json!({}));
    let expect = ["cluster1", "cluster2", "cluster3"].map(|c| r(c, G1, ToApply, None, None));
    check(&s, SIX, &[], &expect, &[], false, None);
}

/// "test progressivePerGroup rollout with timeout 90s and all workload clusterRollOutStatus are
/// in ToApply status"
#[test]
fn per_group_with_workloads_to_apply() {
    let s = per_group("90s", json!({}));
    let mut existing = vec![work("cluster1", G1, Progressing, Some(-60))];
    existing.extend(["cluster2", "cluster3"].map(|c| work(c, G1, ToApply, None)));
    existing.extend(["cluster4", "cluster5", "cluster6"].map(|c| work(c, G2, ToApply, None)));
    check(
        &s,
        SIX,
        &existing,
        &[
            r("cluster1", G1, Progressing, Some(-60), Some(30)),
            r("cluster2", G1, ToApply, None, None),
            r("cluster3", G1, ToApply, None, None),
        ],
        &[],
        false,
        Some(30),
    );
}

/// "test progressivePerGroup rollout with timeout 90s": a timeout in the group breaches.
#[test]
fn per_group_timeout_breaches() {
    let s = per_group("90s", json!({}));
    check(
        &s,
        SIX,
        &first_group((Progressing, -60)),
        &[r("cluster3", G1, Progressing, Some(-60), Some(30))],
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        true,
        Some(30),
    );
}

/// "test progressivePerGroup rollout with timeout 90s and first group timeOut, maxFailures 2"
#[test]
fn per_group_moves_on_within_max_failures() {
    let s = per_group("90s", json!({"maxFailures": 2}));
    check(
        &s,
        NINE,
        &first_group((Succeeded, -60)),
        &["cluster4", "cluster5", "cluster6"].map(|c| r(c, G2, ToApply, None, None)),
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        false,
        None,
    );
    // "... first group timeOut, second group succeeded": on to the third.
    let mut existing = first_group((Succeeded, -60));
    existing
        .extend(["cluster4", "cluster5", "cluster6"].map(|c| work(c, G2, Succeeded, Some(-60))));
    check(
        &s,
        NINE,
        &existing,
        &["cluster7", "cluster8", "cluster9"].map(|c| r(c, G3, ToApply, None, None)),
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        false,
        None,
    );
}

/// "test progressivePerGroup rollout with timeout None and first group failing", "... first
/// group 1 cluster is failing and maxFailures is 2", "... 2 clusters are failing 2 and
/// maxFailures is 30%"
#[test]
fn per_group_failures_without_deadline() {
    let failing = r("cluster2", G1, Failed, Some(-120), None);
    check(
        &per_group("None", json!({})),
        NINE,
        &first_group((Succeeded, -60)),
        std::slice::from_ref(&failing),
        &[],
        true,
        None,
    );
    let mut expect = vec![failing.clone()];
    expect.extend(["cluster4", "cluster5", "cluster6"].map(|c| r(c, G2, ToApply, None, None)));
    check(
        &per_group("None", json!({"maxFailures": 2})),
        NINE,
        &first_group((Succeeded, -60)),
        &expect,
        &[],
        false,
        None,
    );
    check(
        &per_group("None", json!({"maxFailures": "30%"})),
        NINE,
        &first_group((Failed, -120)),
        &[failing, r("cluster3", G1, Failed, Some(-120), None)],
        &[],
        true,
        None,
    );
}

/// "test ProgressivePerGroup rollout with mandatoryDecisionGroup failing and timeout 90s", "...
/// failing 1 cluster, timeout 90s and with maxFailures is 2" (maxFailures is not for mandatory
/// groups), "... mandatoryDecisionGroup Succeeded and timeout 90s"
#[test]
fn per_group_mandatory_groups() {
    let mandatory = json!({"mandatoryDecisionGroups": [{"groupName": "group1"}]});
    check(
        &per_group("90s", mandatory.clone()),
        SIX,
        &first_group((Failed, -120)),
        &[],
        &[
            r("cluster2", G1, TimeOut, Some(-120), Some(-30)),
            r("cluster3", G1, TimeOut, Some(-120), Some(-30)),
        ],
        true,
        None,
    );
    check(
        &per_group(
            "90s",
            json!({"mandatoryDecisionGroups": [{"groupName": "group1"}], "maxFailures": 2}),
        ),
        NINE,
        &first_group((Succeeded, -60)),
        &[],
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        true,
        None,
    );
    let done = ["cluster1", "cluster2", "cluster3"].map(|c| work(c, G1, Succeeded, Some(-60)));
    check(
        &per_group("90s", mandatory),
        NINE,
        &done,
        &["cluster4", "cluster5", "cluster6"].map(|c| r(c, G2, ToApply, None, None)),
        &[],
        false,
        None,
    );
}

/// "test progressivePerGroup rollout with minSuccessTime and mixed cluster states"
#[test]
fn per_group_soak_holds_the_group() {
    let s = per_group("90s", json!({"maxFailures": "50%", "minSuccessTime": "1m"}));
    let g: &[GroupSpec] = &[
        ("group1", 0, &["cluster1", "cluster2", "cluster3"]),
        ("group2", 1, &["cluster4", "cluster5"]),
    ];
    let existing = [
        work("cluster1", G1, Succeeded, Some(-30)),
        work("cluster2", G1, Succeeded, Some(-120)),
        work("cluster3", G1, Progressing, Some(-30)),
    ];
    check(
        &s,
        g,
        &existing,
        &[
            r("cluster1", G1, Succeeded, Some(-30), Some(30)),
            r("cluster3", G1, Progressing, Some(-30), Some(60)),
        ],
        &[],
        false,
        Some(30),
    );
}

// TestGetRolloutCluster_ClusterAdded / _ClusterRemoved

/// "test progressivePerGroup rollout with timeout 90s and cluster added after rollout start.":
/// the clusters in flight come first, then the group's new cluster.
#[test]
fn per_group_cluster_added_after_rollout_start() {
    let s = per_group("90s", json!({}));
    let existing = [
        work("cluster1", G1, Succeeded, Some(-60)),
        work("cluster2", G1, Succeeded, Some(-60)),
        work("cluster4", G2, Progressing, Some(-60)),
        work("cluster5", G2, Progressing, Some(-60)),
    ];
    check(
        &s,
        SIX,
        &existing,
        &[
            r("cluster4", G2, Progressing, Some(-60), Some(30)),
            r("cluster5", G2, Progressing, Some(-60), Some(30)),
            r("cluster3", G1, ToApply, None, None),
        ],
        &[],
        false,
        Some(30),
    );
}

/// "test progressive rollout with timeout 90s, MaxFailures 100%, and cluster removed"
#[test]
fn progressive_cluster_removed() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "progressDeadline": "90s", "maxFailures": "100%", "maxConcurrency": 2}}));
    let g: &[GroupSpec] = &[
        ("group1", 0, &["cluster2", "cluster3"]),
        ("", 1, &["cluster4", "cluster5", "cluster6"]),
    ];
    let d = check(
        &s,
        g,
        &first_group((Progressing, -60)),
        &[
            r("cluster3", G1, Progressing, Some(-60), Some(30)),
            r("cluster4", G2, ToApply, None, None),
        ],
        &[r("cluster2", G1, TimeOut, Some(-120), Some(-30))],
        false,
        Some(30),
    );
    assert_eq!(d.removed, [r("cluster1", G1, Succeeded, Some(-60), None)]);
}

// TestDetermineRolloutStatus

#[test]
fn determine_rollout_status() {
    let t = Timing {
        min_success: 60,
        deadline: Some(90),
        now: NOW,
    };
    // name, status, since, in the rollout as, timed out as
    type Case<'a> = (&'a str, Status, Option<i64>, Option<Status>, Option<Status>);
    let cases: &[Case] = &[
        // name, status, since, in rollout as, timed out as
        ("ToApply status", ToApply, None, Some(ToApply), None),
        ("Skip status", Status::Skip, None, None, None),
        ("Succeeded status", Succeeded, Some(-120), None, None),
        (
            "Succeeded status within the minSuccessTime",
            Succeeded,
            Some(-30),
            Some(Succeeded),
            None,
        ),
        ("TimeOut status", TimeOut, None, None, None),
        (
            "Progressing status within the timeout duration",
            Progressing,
            Some(-60),
            Some(Progressing),
            None,
        ),
        (
            "Failed status outside of the timeout duration",
            Failed,
            Some(-120),
            None,
            Some(TimeOut),
        ),
        // With no known start, the start is now: soaking, within the deadline.
        (
            "Succeeded status with nil LastTransitionTime and minSuccessTime",
            Succeeded,
            None,
            Some(Succeeded),
            None,
        ),
    ];
    for (name, status, since, rolled, timed) in cases {
        let (mut rollout, mut timed_out) = (vec![], vec![]);
        classify(
            work("c", G1, *status, *since),
            &t,
            &mut rollout,
            &mut timed_out,
        );
        assert_eq!(rollout.first().map(|c| c.status), *rolled, "{name}");
        assert_eq!(timed_out.first().map(|c| c.status), *timed, "{name}");
    }
}

// TestCalculateRolloutSize

#[test]
fn calculate_rollout_size() {
    let cases = [
        (IntOrPercent::Int(50), 100, 50),
        (IntOrPercent::String("50%".into()), 100, 50),
        (IntOrPercent::String("33%".into()), 10, 4),
        (IntOrPercent::Int(0), 10, 10),
        (IntOrPercent::Int(150), 100, 100),
        (IntOrPercent::String("150%".into()), 100, 100),
    ];
    for (v, total, want) in cases {
        assert_eq!(rollout_size(&v, total, total), want, "{v:?} of {total}");
    }
}

// TestParseTimeout

#[test]
fn parse_timeout_as_ocm() {
    assert_eq!(parse_timeout(""), Ok(None));
    assert_eq!(parse_timeout("None"), Ok(None));
    assert_eq!(parse_timeout("90s"), Ok(Some(90)));
    assert_eq!(parse_timeout("2h"), Ok(Some(7200)));
    assert!(parse_timeout("5d").is_err());
    // The pattern admits `5|`, Go's duration parser does not.
    assert!(parse_timeout("5|").is_err());
}

/// A threshold string that is not a percentage is OCM's error, not a count.
#[test]
fn threshold_string_must_be_a_percentage() {
    let rs: OcmRolloutStrategy =
        serde_json::from_value(json!({"type": "Progressive", "progressive": {"maxFailures": "3"}}))
            .unwrap();
    assert!(matches!(
        Strategy::of(Some(&rs)),
        Err(StrategyError::Threshold {
            field: "maxFailures",
            ..
        })
    ));
}

// TestDecisionGroupsToGroupKeys: a name wins over an index; by name, every group of that name.
#[test]
fn mandatory_groups_by_name_then_index() {
    let g = groups(&[
        ("a", 0, &["c1"]),
        ("b", 1, &["c2"]),
        ("a", 2, &["c3"]),
        ("", 3, &["c4"]),
    ]);
    let m = |name: Option<&str>, index: Option<i32>| MandatoryDecisionGroup {
        group_name: name.map(String::from),
        group_index: index,
    };
    let idx =
        |ms: &[MandatoryDecisionGroup]| mandatory_indices(ms, &g).into_iter().collect::<Vec<_>>();
    assert_eq!(idx(&[m(Some("a"), Some(3))]), [0, 2]);
    assert_eq!(idx(&[m(None, Some(3))]), [3]);
    assert_eq!(idx(&[m(None, None)]), [0]);
    assert_eq!(idx(&[m(Some("zzz"), None)]), Vec::<usize>::new());
    assert_eq!(idx(&[]), Vec::<usize>::new());
}

/// `gitfleet plan`'s order: the mandatory group first, then by name `maxConcurrency` at a time
/// (Progressive), or group by group (ProgressivePerGroup).
#[test]
fn order_is_the_rollout_when_every_cluster_succeeds() {
    let s = strategy(json!({"type": "Progressive", "progressive": {
        "mandatoryDecisionGroups": [{"groupIndex": 1}], "maxConcurrency": 2, "minSuccessTime": "1h"}}));
    assert_eq!(
        order_line(&order(&s, &groups(SIX))),
        "group 1 (cluster4, cluster5, cluster6), then group 0 group1 (cluster1, cluster2), then group 0 group1 (cluster3)"
    );
    let s = per_group("None", json!({}));
    assert_eq!(
        order_line(&order(&s, &groups(SIX))),
        "group 0 group1 (cluster1, cluster2, cluster3), then group 1 (cluster4, cluster5, cluster6)"
    );
}
