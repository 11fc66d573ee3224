//! `gitfleet run --notifications`: the real daemon tells local receivers that speak the real
//! APIs' shapes (a CloudEvents endpoint, GitHub's and GitLab's commit statuses, Slack's
//! incoming webhook) what it rolls out; a receiver that fails is retried and counted, one that
//! never answers delays nothing, and no secret reaches the log.

mod common;

use std::ffi::OsStr;

use common::daemon::{await_until, Daemon};
use common::kubectl::Kubectl as _;
use common::members::{Backend, Members};
use common::receiver::{Answer, Received, Receiver};
use common::Repo;
use serde_json::json;

on_both_backends!(a_rollout_is_told_to_every_sink_and_no_sink_delays_it);

const TOKEN: &str = "ghp_notify_e2e_token_value";
const SLACK_PATH: &str = "/slack/services/T000/B000/slack-secret-path";

fn fleet_repo(version: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shop-config, namespace: shop}}\n\
         data: {{version: \"{version}\"}}\n---\n\
         apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\n\
         metadata: {{name: shop}}\nspec:\n  resourceSelectors: [{{group: '', version: v1, kind: Namespace, name: shop}}]\n---\n{}---\n{}",
        common::member_cluster("alpha"),
        common::member_cluster("beta"),
    )
}

/// The answers of the real APIs, in short: GitHub and GitLab create a status (201), Slack says
/// `ok`, a CloudEvents receiver accepts (202); `/broken` always fails, `/hang` never answers.
fn answer(r: &Received) -> Answer {
    let p = r.path.as_str();
    if p.starts_with("/broken") {
        Answer::Json(503, json!({"message": "unavailable"}))
    } else if p.starts_with("/hang") {
        Answer::Hang
    } else if p.starts_with("/repos/") {
        Answer::Json(
            201,
            json!({"id": 1, "state": r.body["state"], "context": r.body["context"]}),
        )
    } else if p.starts_with("/api/v4/projects/") {
        Answer::Json(
            201,
            json!({"id": 1, "status": r.body["state"], "name": r.body["name"]}),
        )
    } else if p.starts_with("/slack/") {
        Answer::Json(200, json!("ok"))
    } else {
        Answer::Json(202, json!({}))
    }
}

fn metric(daemon: &Daemon, sink: &str, outcome: &str) -> u64 {
    let text = ureq::get(&format!("{}/metrics", daemon.addr))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default();
    let prefix = format!("gitfleet_notifications_total{{sink=\"{sink}\",outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0)
}

fn types(events: &[Received]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.body["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn a_rollout_is_told_to_every_sink_and_no_sink_delays_it(backend: Backend) {
    let members = Members::start(backend, common::TWO_MEMBERS);
    let receiver = Receiver::start(answer);
    let repo = Repo::new();
    repo.write("fleet.yaml", &fleet_repo("1"));
    let commit = repo.commit("v1");
    let state = tempfile::tempdir().unwrap();
    let dir = state.path();
    std::fs::write(dir.join("gitlab-token"), "glpat-notify-e2e-secret\n").unwrap();
    std::fs::write(
        dir.join("slack-url"),
        format!("{}{SLACK_PATH}\n", receiver.base),
    )
    .unwrap();
    std::fs::write(dir.join("secret"), "s3cret\n").unwrap();
    let base = &receiver.base;
    let config = format!(
        r#"
dashboardUrl: https://fleet.example.com/
sinks:
  - name: events
    type: cloudevents
    url: {base}/events
    source: gitfleet/e2e
    token: {{env: NOTIFY_E2E_TOKEN}}
  - type: github
    apiUrl: {base}
    repository: acme/fleet
    token: {{env: NOTIFY_E2E_TOKEN}}
  - type: gitlab
    apiUrl: {base}/api/v4
    project: acme/fleet
    token: {{file: gitlab-token}}
  - type: slack
    url: {{file: slack-url}}
    filter: {{types: ["commit.*"]}}
  - name: broken
    type: cloudevents
    url: {base}/broken
    filter: {{types: [commit.served]}}
    retry: {{attempts: 3, backoff: 10ms}}
  - name: hang
    type: cloudevents
    url: {base}/hang
    queueSize: 1
    retry: {{timeout: 1h}}
"#
    );
    let file = dir.join("notifications.yaml");
    std::fs::write(&file, config).unwrap();
    let flags = [OsStr::new("--notifications"), file.as_os_str()];
    let env = [
        ("NOTIFY_E2E_TOKEN", OsStr::new(TOKEN)),
        ("GITFLEET_LOG", OsStr::new("debug")),
    ];
    let daemon = Daemon::start_with(
        repo.path(),
        &members.kubeconfig,
        &dir.join("state"),
        &dir.join("secret"),
        "10m",
        &flags,
        &env,
    );

    // The rollout finished as told to the CloudEvents receiver, while `/hang` never answered
    // its first request and its queue of one overflowed.
    await_until("the commit rolled out, told as a CloudEvent", || {
        types(&receiver.at("/events")).contains(&"io.gitfleet.commit.rolledout".to_string())
    });
    await_until("the hanging sink's one request", || {
        receiver.at("/hang").len() == 1
    });
    await_until("the hanging sink's overflow counted", || {
        metric(&daemon, "hang", "dropped") > 0
    });
    let events = receiver.at("/events");
    assert_eq!(
        types(&events),
        [
            "io.gitfleet.commit.served",
            "io.gitfleet.placement.started",
            "io.gitfleet.placement.settled",
            "io.gitfleet.commit.rolledout"
        ]
    );
    for e in &events {
        assert_eq!(e.method, "POST");
        assert_eq!(
            e.header("content-type"),
            Some("application/cloudevents+json")
        );
        assert_eq!(
            e.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert_eq!(e.body["specversion"], "1.0");
        assert_eq!(e.body["source"], "gitfleet/e2e");
        assert!(!e.body["id"].as_str().unwrap().is_empty());
        assert!(e.body["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!(e.body["data"]["commit"], commit.as_str());
    }
    let ids: std::collections::BTreeSet<&str> = events
        .iter()
        .map(|e| e.body["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), events.len(), "every event its own id");
    let settled = &events[2].body;
    assert_eq!(settled["subject"], "crp/shop");
    assert_eq!(settled["data"]["placement"], "crp/shop");
    assert_eq!(settled["data"]["clusters"], json!(["alpha", "beta"]));
    assert_eq!(settled["data"]["severity"], "info");
    assert_eq!(
        settled["data"]["link"],
        "https://fleet.example.com/placements/crp/shop"
    );

    // The commit's status: pending, then success, on GitHub and GitLab.
    await_until("success on GitHub and GitLab", || {
        receiver.at("/repos/").len() == 2 && receiver.at("/api/v4/").len() == 2
    });
    let gh = receiver.at("/repos/");
    assert!(gh
        .iter()
        .all(|r| r.path == format!("/repos/acme/fleet/statuses/{commit}")));
    assert_eq!(gh[0].body["state"], "pending");
    assert_eq!(
        gh[1].body,
        json!({"state": "success", "context": "gitfleet/rollout",
            "description": "rolled out: every placement is ready",
            "target_url": "https://fleet.example.com/"})
    );
    assert_eq!(
        gh[1].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(gh[1].header("accept"), Some("application/vnd.github+json"));
    assert!(gh[1].header("user-agent").unwrap().starts_with("gitfleet/"));
    let gl = receiver.at("/api/v4/");
    assert!(gl
        .iter()
        .all(|r| r.path == format!("/api/v4/projects/acme%2Ffleet/statuses/{commit}")));
    assert_eq!(gl[0].body["state"], "pending");
    assert_eq!(gl[1].body["state"], "success");
    assert_eq!(gl[1].body["name"], "gitfleet/rollout");
    assert_eq!(
        gl[1].header("private-token"),
        Some("glpat-notify-e2e-secret")
    );

    // Slack, filtered to the commit's events.
    await_until("two Slack messages", || receiver.at("/slack/").len() == 2);
    let slack = receiver.at("/slack/");
    assert_eq!(slack[0].path, SLACK_PATH);
    assert_eq!(slack[1].header("content-type"), Some("application/json"));
    assert!(
        slack[1].body["text"]
            .as_str()
            .unwrap()
            .contains("rolled out"),
        "{:?}",
        slack[1].body
    );
    assert_eq!(slack[1].body["blocks"][0]["type"], "section");

    // The failing receiver: tried three times, then counted as failed.
    await_until("the failing receiver given up on", || {
        metric(&daemon, "broken", "failed") == 1
    });
    assert_eq!(receiver.at("/broken").len(), 3);
    assert_eq!(metric(&daemon, "broken", "retried"), 2);
    await_until("the four events counted as sent", || {
        metric(&daemon, "events", "sent") == 4
    });

    // A second commit rolls out although `/hang` still holds its first request.
    repo.write("fleet.yaml", &fleet_repo("2"));
    let second = repo.commit("v2");
    await_until("the second commit's success on GitHub", || {
        receiver
            .at(&format!("/repos/acme/fleet/statuses/{second}"))
            .iter()
            .any(|r| r.body["state"] == "success")
    });
    assert_eq!(receiver.at("/hang").len(), 1);

    // An object deleted on a member is drift, found and then restored; a resync is not.
    members.kubectl(
        "alpha",
        &["delete", "configmap", "shop-config", "-n", "shop"],
    );
    await_until("the drift found and restored", || {
        types(&receiver.at("/events")).contains(&"io.gitfleet.drift.restored".to_string())
    });
    let drift: Vec<_> = receiver
        .at("/events")
        .into_iter()
        .filter(|e| {
            e.body["type"]
                .as_str()
                .unwrap()
                .starts_with("io.gitfleet.drift.")
        })
        .collect();
    assert_eq!(
        types(&drift),
        ["io.gitfleet.drift.found", "io.gitfleet.drift.restored"]
    );
    assert_eq!(drift[0].body["data"]["clusters"], json!(["alpha"]));

    let log = daemon.stop_and_read_log().join("\n");
    for secret in [TOKEN, "glpat-notify-e2e-secret", "slack-secret-path"] {
        assert!(!log.contains(secret), "{secret} in the log");
    }
    assert!(
        log.contains("notification not delivered"),
        "the retries are logged"
    );
}
