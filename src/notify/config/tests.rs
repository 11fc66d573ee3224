use super::*;

fn env(k: &str) -> Option<String> {
    match k {
        "SLACK_URL" => Some("https://hooks.slack.com/services/T0/B0/sekrit\n".into()),
        "GH_TOKEN" => Some("ghp_sekrit".into()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<Config, Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gl-token"), "glpat-sekrit\n").unwrap();
    Config::parse(text, dir.path(), &env).map_err(|ps| ps.iter().map(|p| p.to_string()).collect())
}

#[test]
fn every_sink_type_reads_with_its_secrets_and_defaults() {
    let c = parse(
        r#"
dashboardUrl: https://fleet.example.com
sinks:
  - type: cloudevents
    url: http://127.0.0.1:9/events
    filter: {types: ["placement.*"], severity: warning, placements: ["crp/shop"]}
    retry: {attempts: 3, backoff: 10ms}
  - type: slack
    url: {env: SLACK_URL}
  - {type: teams, name: ops, url: {file: gl-token}}
  - {type: github, repository: acme/fleet, token: {env: GH_TOKEN}}
  - {type: gitlab, project: acme/fleet, apiUrl: "https://gitlab.example.com/api/v4/", token: {file: gl-token}}
  - {type: gitea, repository: acme/fleet, apiUrl: "https://git.example.com/api/v1", token: {env: GH_TOKEN}, context: deploy}
"#,
    )
    .unwrap();
    assert_eq!(
        c.dashboard_url.as_deref(),
        Some("https://fleet.example.com")
    );
    let names: Vec<&str> = c.sinks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["cloudevents", "slack", "ops", "github", "gitlab", "gitea"]
    );
    assert_eq!(c.sinks[0].retry.attempts, 3);
    assert_eq!(c.sinks[0].retry.backoff, Duration::from_millis(10));
    assert_eq!(c.sinks[0].filter.severity, Some(Severity::Warning));
    assert_eq!(
        c.sinks[1].target,
        Target::Slack {
            url: Secret::new("https://hooks.slack.com/services/T0/B0/sekrit")
        }
    );
    match &c.sinks[3].target {
        Target::CommitStatus {
            forge,
            api_url,
            context,
            ..
        } => {
            assert_eq!(*forge, Forge::GitHub);
            assert_eq!(api_url, "https://api.github.com");
            assert_eq!(context, "gitfleet/rollout");
        }
        t => panic!("{t:?}"),
    }
    match &c.sinks[4].target {
        Target::CommitStatus { api_url, token, .. } => {
            assert_eq!(api_url, "https://gitlab.example.com/api/v4");
            assert_eq!(token.expose(), "glpat-sekrit");
        }
        t => panic!("{t:?}"),
    }
    // Printing the configuration shows no secret.
    let printed = format!("{c:?}");
    assert!(!printed.contains("sekrit"), "{printed}");
}

#[test]
fn unknown_fields_and_every_problem_are_named() {
    let problems = parse(
        r#"
sinks:
  - {type: slack, url: "https://hooks.slack.com/services/x", context: c}
  - {type: github, repository: nope, token: {env: MISSING}}
  - {type: gitea, repository: a/b, token: {file: gl-token, env: GH_TOKEN}}
  - {type: pager}
  - {type: cloudevents, url: "http://x/", filter: {types: [placement.exploded]}, retry: {backoff: soon}}
"#,
    )
    .unwrap_err();
    assert_eq!(
        problems,
        [
            "sinks[0].context: not a field of a slack sink",
            "sinks[0].url: the incoming webhook's URL is a credential: give {file: PATH} or {env: NAME}",
            "sinks[1].repository: must be OWNER/REPO",
            "sinks[1].token: the environment variable MISSING is not set",
            "sinks[2].apiUrl: required for gitea (e.g. https://gitea.example.com/api/v1)",
            "sinks[2].token: give exactly one of `file` and `env`",
            "sinks[3].type: unknown sink type \"pager\": the types are cloudevents, slack, teams, github, gitlab, gitea",
            "sinks[4].filter.types[0]: \"placement.exploded\" matches no event type",
            "sinks[4].retry.backoff: not a duration (e.g. 500ms, 10s): expected number at 0",
        ]
    );
    let problems = parse("sinks: []\nsink: []\n").unwrap_err();
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].starts_with("sink: unknown field `sink`"),
        "{problems:?}"
    );
    let problems =
        parse("sinks:\n  - {type: slack, url: {env: SLACK_URL}, retries: 3}\n").unwrap_err();
    assert!(
        problems[0].starts_with("sinks[0].retries: unknown field"),
        "{problems:?}"
    );
}

#[test]
fn a_file_error_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("notifications.yaml");
    std::fs::write(
        &f,
        "sinks:\n  - {type: slack, url: {env: GITFLEET_TEST_NOT_SET_X}}\n",
    )
    .unwrap();
    let e = Config::load(&f).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}: sinks[0].url: the environment variable GITFLEET_TEST_NOT_SET_X is not set",
            f.display()
        )
    );
}

#[test]
fn filters_admit_by_type_severity_and_placement() {
    use crate::notify::events::{events_between, Snapshot};
    let served = events_between(
        &Snapshot::default(),
        &Snapshot {
            serving: Some("c".into()),
            ..Snapshot::default()
        },
        0,
        None,
    );
    let e = served[0].clone();
    assert_eq!(e.kind, Kind::CommitServed);
    let f = |types: &[&str], sev: Option<Severity>, placements: &[&str]| Filter {
        types: types.iter().map(|s| s.to_string()).collect(),
        severity: sev,
        placements: placements.iter().map(|s| s.to_string()).collect(),
    };
    assert!(f(&[], None, &[]).admits(&e));
    assert!(f(&["commit.*"], None, &[]).admits(&e));
    assert!(!f(&["placement.*"], None, &[]).admits(&e));
    assert!(!f(&[], Some(Severity::Warning), &[]).admits(&e));
    // Commit events concern no one placement: a placement filter lets them through.
    assert!(f(&[], None, &["crp/other"]).admits(&e));
    let mut p = e.clone();
    p.placement = Some("crp/shop".into());
    assert!(f(&[], None, &["crp/*"]).admits(&p));
    assert!(!f(&[], None, &["rp/*"]).admits(&p));
}

#[test]
fn backoff_doubles_up_to_its_limit() {
    let r = Retry {
        attempts: 5,
        backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(5),
        timeout: Duration::from_secs(1),
    };
    let waits: Vec<u64> = (1..=5).map(|n| r.wait(n).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 5, 5]);
}
