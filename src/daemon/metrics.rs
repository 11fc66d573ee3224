//! The daemon's Prometheus metrics (`GET /metrics`, text exposition format): commits seen and
//! rejected, reconcile duration, applies and errors per member, member health, rollout progress,
//! approvals accepted and refused (by reason), staged update runs by state, renderings the
//! Kustomize and Helm sources ran (not found in their cache), notifications by sink and outcome.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

pub struct Metrics {
    registry: Registry,
    pub commits_seen: Counter,
    pub commits_rejected: Counter,
    pub reconcile_seconds: Histogram,
    /// By member and outcome (`applied`, `removed`, `failed`).
    pub pushes: Family<Labels, Counter>,
    /// 1 healthy, 0 not, by member.
    pub member_healthy: Family<Labels, Gauge>,
    /// Clusters up to date / waiting / being changed, by placement and state.
    pub rollout_clusters: Family<Labels, Gauge>,
    /// 1 for each placement held for invalid resource selectors (`Scheduled=False`,
    /// `InvalidResourceSelectors`), by placement; no series for the others.
    pub invalid_resource_selectors: Family<Labels, Gauge>,
    /// Approval tags accepted.
    pub approvals_accepted: Counter,
    /// Approval tags refused, by reason (each tag object and reason counted once).
    pub approval_rejections: Family<Labels, Counter>,
    /// Staged update runs by where they stand ([`super::runs::phase`]).
    pub update_runs: Family<Labels, Gauge>,
    /// Deletions the guard holds now (0: none held).
    pub deletions_held: Gauge,
    /// Fetches of the git source that failed.
    pub git_fetch_errors: Counter,
    /// When a fetch last succeeded (Unix seconds; 0 before the first).
    pub git_last_fetch_success: Gauge,
    /// The members `member_healthy` has a series for, so that members gone from the
    /// repository lose theirs.
    members_shown: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// `--state kubernetes`: 1 while this replica leads, else 0.
    pub is_leader: Gauge,
    /// `--state kubernetes`: 1 for the replica this one knows to lead, by identity (one series).
    pub leader: Family<Labels, Gauge>,
    /// Renderings run by a tool (`kustomize`, `helm`), not found in the render cache.
    pub source_renders: Family<Labels, Counter>,
    /// Notifications by sink and outcome (`sent`, `retried`, `failed`, `dropped`).
    pub notifications: Family<Labels, Counter>,
    /// What the members' watches reported, by member and cause (`changed`, `watch_restarted`,
    /// `status`): a steady rate of restarts says the watches keep breaking.
    pub member_changes: Family<Labels, Counter>,
    /// `--shards`: orders carried out, by shard and outcome (`delivered`, `fenced`).
    pub shard_orders: Family<Labels, Counter>,
    /// `--shards`, the leader: reports of deposed owners, refused.
    pub shard_reports_refused: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("gitfleet");
        let commits_seen = Counter::default();
        let commits_rejected = Counter::default();
        // 10 ms .. ~80 s.
        let reconcile_seconds = Histogram::new(exponential_buckets(0.01, 2.0, 14));
        let pushes = Family::<Labels, Counter>::default();
        let member_healthy = Family::<Labels, Gauge>::default();
        let rollout_clusters = Family::<Labels, Gauge>::default();
        let invalid_resource_selectors = Family::<Labels, Gauge>::default();
        let approvals_accepted = Counter::default();
        let approval_rejections = Family::<Labels, Counter>::default();
        let build = crate::build_info::BUILD;
        registry.register(
            "build",
            "The running gitfleet: version, commit and build date (always 1)",
            prometheus_client::metrics::info::Info::new(vec![
                ("version".to_string(), build.version.to_string()),
                ("commit".to_string(), build.commit.to_string()),
                ("build_date".to_string(), build.build_date.to_string()),
            ]),
        );
        let update_runs = Family::<Labels, Gauge>::default();
        registry.register(
            "update_runs",
            "Staged update runs by state (Initializing, Progressing, Waiting, Stuck, Stopping, Stopped, Succeeded, Failed)",
            update_runs.clone(),
        );
        let deletions_held = Gauge::default();
        registry.register(
            "deletions_held",
            "Object deletions of the newest head held by the mass-deletion guard (0: none)",
            deletions_held.clone(),
        );
        let is_leader = Gauge::default();
        registry.register(
            "is_leader",
            "Whether this replica holds the leader Lease and acts (1) or follows (0); --state kubernetes only",
            is_leader.clone(),
        );
        let leader = Family::<Labels, Gauge>::default();
        registry.register(
            "leader",
            "The replica leading, as this one knows it (1, labelled with its identity); --state kubernetes only",
            leader.clone(),
        );
        registry.register(
            "approvals_accepted",
            "Approval tags accepted",
            approvals_accepted.clone(),
        );
        registry.register(
            "approval_rejections",
            "Approval tags rejected, by reason",
            approval_rejections.clone(),
        );
        registry.register(
            "commits_seen",
            "New branch heads seen",
            commits_seen.clone(),
        );
        registry.register(
            "commits_rejected",
            "Commits rejected by validation",
            commits_rejected.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time of one reconcile (read, validate, probe, schedule, render, push)",
            reconcile_seconds.clone(),
        );
        registry.register(
            "member_pushes",
            "Placement pushes to a member by outcome",
            pushes.clone(),
        );
        registry.register(
            "member_healthy",
            "Whether the member answered its last probe (1) or not (0)",
            member_healthy.clone(),
        );
        registry.register(
            "rollout_clusters",
            "Clusters of a placement by rollout state (upToDate, waiting, applying, removing); failed: those whose last push failed or that became unavailable, also counted in their rollout state",
            rollout_clusters.clone(),
        );
        registry.register(
            "placement_invalid_resource_selectors",
            "Placements held because their resource selectors are invalid (Scheduled=False, InvalidResourceSelectors): 1 each, by placement",
            invalid_resource_selectors.clone(),
        );
        let source_renders = Family::<Labels, Counter>::default();
        registry.register(
            "source_renders",
            "Renderings run by a tool (kustomize, helm) because the render cache did not hold them",
            source_renders.clone(),
        );
        let git_fetch_errors = Counter::default();
        registry.register(
            "git_fetch_errors",
            "Fetches of the git source (or reads of a local repository's branch) that failed",
            git_fetch_errors.clone(),
        );
        let git_last_fetch_success = Gauge::default();
        registry.register(
            "git_last_fetch_success_timestamp_seconds",
            "When a fetch of the git source last succeeded (Unix seconds; 0: never)",
            git_last_fetch_success.clone(),
        );
        let notifications = Family::<Labels, Counter>::default();
        registry.register(
            "notifications",
            "Notifications by sink and outcome: sent, retried (each retry), failed (given up), dropped (a full queue; sink \"\" for snapshots)",
            notifications.clone(),
        );
        let member_changes = Family::<Labels, Counter>::default();
        registry.register(
            "member_changes",
            "Changes the members' watches reported, by member and cause: changed (an object gitfleet applied, changed or deleted by someone else), watch_restarted (a watch broke or started late: everything re-checked), status (a status an OCM work reads)",
            member_changes.clone(),
        );
        let shard_orders = Family::<Labels, Counter>::default();
        registry.register(
            "shard_orders",
            "--shards: orders this replica carried out for the shards it owns, by shard and outcome: delivered (a member's work, reported to the leader), probed (members probed), checked (the members of a shard it took over, compared with what gitfleet applied there), fenced (its claim of the shard was taken over first: not acted on)",
            shard_orders.clone(),
        );
        let shard_reports_refused = Counter::default();
        registry.register(
            "shard_reports_refused",
            "--shards, the leader: reports refused because their shard was claimed by another owner since (a deposed owner's)",
            shard_reports_refused.clone(),
        );
        Self {
            member_changes,
            shard_orders,
            shard_reports_refused,
            notifications,
            git_fetch_errors,
            git_last_fetch_success,
            members_shown: Default::default(),
            registry,
            commits_seen,
            commits_rejected,
            reconcile_seconds,
            pushes,
            member_healthy,
            rollout_clusters,
            invalid_resource_selectors,
            approvals_accepted,
            approval_rejections,
            update_runs,
            deletions_held,
            is_leader,
            leader,
            source_renders,
        }
    }
}

pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Metrics {
    /// `member_healthy` for the members of the commit probed now: one series each, and none
    /// left for members that are no longer in it (a removed member is not "unhealthy").
    pub fn members_health<'a>(&self, members: impl IntoIterator<Item = (&'a str, bool)>) {
        let mut shown = self.members_shown.lock().unwrap_or_else(|e| e.into_inner());
        let mut now = std::collections::BTreeSet::new();
        for (name, healthy) in members {
            self.member_healthy
                .get_or_create(&labels(&[("member", name)]))
                .set(i64::from(healthy));
            now.insert(name.to_string());
        }
        for gone in shown.difference(&now) {
            self.member_healthy.remove(&labels(&[("member", gone)]));
        }
        *shown = now;
    }

    /// `source_renders` brought up to what `sources` has run so far (its caches count their
    /// misses); a tool that has rendered nothing has no series.
    pub fn source_renders(&self, sources: &crate::sources::Sources) {
        self.renders_run([
            ("kustomize", sources.kustomize.builds()),
            ("helm", sources.helm.renders()),
        ]);
    }

    /// `source_renders` brought up to `runs` (tool, renderings run since the process started).
    fn renders_run(&self, runs: [(&str, u64); 2]) {
        for (tool, runs) in runs {
            if runs == 0 {
                continue;
            }
            let counter = self
                .source_renders
                .get_or_create(&labels(&[("tool", tool)]));
            counter.inc_by(runs.saturating_sub(counter.get()));
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.commits_seen.inc();
        m.pushes
            .get_or_create(&labels(&[("member", "m1"), ("outcome", "applied")]))
            .inc();
        m.member_healthy
            .get_or_create(&labels(&[("member", "m1")]))
            .set(1);
        m.reconcile_seconds.observe(0.2);
        m.approval_rejections
            .get_or_create(&labels(&[("reason", "UnknownKey")]))
            .inc();
        m.update_runs
            .get_or_create(&labels(&[("state", "Waiting")]))
            .set(2);
        let text = m.render();
        assert!(
            text.contains("gitfleet_update_runs{state=\"Waiting\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("gitfleet_approval_rejections_total{reason=\"UnknownKey\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gitfleet_approvals_accepted_total 0"),
            "{text}"
        );
        assert!(text.contains("gitfleet_commits_seen_total 1"), "{text}");
        let build = crate::build_info::BUILD;
        let info = format!(
            "gitfleet_build_info{{version=\"{}\",commit=\"{}\",build_date=\"{}\"}} 1",
            build.version, build.commit, build.build_date
        );
        assert!(text.contains(&info), "{info}\n{text}");
        assert!(
            text.contains("gitfleet_member_pushes_total{member=\"m1\",outcome=\"applied\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gitfleet_member_healthy{member=\"m1\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gitfleet_reconcile_duration_seconds_count 1"),
            "{text}"
        );
    }

    #[test]
    fn members_gone_from_the_commit_lose_their_health_series() {
        let m = Metrics::default();
        m.members_health([("alpha", true), ("bravo", false)]);
        let text = m.render();
        assert!(
            text.contains("gitfleet_member_healthy{member=\"bravo\"} 0"),
            "{text}"
        );
        m.members_health([("alpha", true)]);
        let text = m.render();
        assert!(
            text.contains("gitfleet_member_healthy{member=\"alpha\"} 1"),
            "{text}"
        );
        assert!(!text.contains("bravo"), "{text}");
    }

    #[test]
    fn git_fetch_metrics_are_named_as_documented() {
        let m = Metrics::default();
        m.git_fetch_errors.inc();
        m.git_last_fetch_success.set(1_700_000_000);
        let text = m.render();
        assert!(text.contains("gitfleet_git_fetch_errors_total 1"), "{text}");
        assert!(
            text.contains("gitfleet_git_last_fetch_success_timestamp_seconds 1700000000"),
            "{text}"
        );
    }

    #[test]
    fn source_renders_follow_the_render_caches_and_a_tool_that_rendered_nothing_has_no_series() {
        let m = Metrics::default();
        m.renders_run([("kustomize", 0), ("helm", 0)]);
        assert!(!m.render().contains("gitfleet_source_renders_total"));
        m.renders_run([("kustomize", 3), ("helm", 0)]);
        m.renders_run([("kustomize", 100), ("helm", 0)]);
        let text = m.render();
        assert!(
            text.contains("gitfleet_source_renders_total{tool=\"kustomize\"} 100"),
            "{text}"
        );
        assert!(!text.contains("tool=\"helm\""), "{text}");
        m.source_renders(&crate::sources::Sources::plain());
        assert!(m.render().contains("{tool=\"kustomize\"} 100"));
    }
}
