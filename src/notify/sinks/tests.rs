use super::*;
use serde_json::json;

fn failed() -> Event {
    let mut e = crate::notify::events::tests_support::event(Kind::PlacementFailed);
    e.commit = Some("0123456789abcdef0123456789abcdef01234567".into());
    e.placement = Some("crp/shop".into());
    e.clusters = vec!["m2".into()];
    e.message = "crp/shop failed: m2: admission webhook denied".into();
    e.link = Some("https://fleet.example.com/placements/crp/shop".into());
    e
}

#[test]
fn a_cloud_event_has_the_required_attributes_and_the_event_as_data() {
    let target = Target::CloudEvents {
        url: "http://127.0.0.1:1/e".into(),
        token: Some(Secret::new("t0ken")),
        source: "gitfleet/prod".into(),
    };
    let r = request(&target, &failed(), "abc-1").unwrap();
    assert_eq!(r.content_type, "application/cloudevents+json");
    assert_eq!(r.headers[0].0, "authorization");
    assert_eq!(r.headers[0].1.expose(), "Bearer t0ken");
    assert_eq!(
        r.body,
        json!({
            "specversion": "1.0",
            "id": "abc-1",
            "source": "gitfleet/prod",
            "type": "io.gitfleet.placement.failed",
            "time": "1970-01-01T00:01:40Z",
            "subject": "crp/shop",
            "datacontenttype": "application/json",
            "data": {
                "type": "placement.failed",
                "severity": "error",
                "time": 100,
                "commit": "0123456789abcdef0123456789abcdef01234567",
                "placement": "crp/shop",
                "clusters": ["m2"],
                "message": "crp/shop failed: m2: admission webhook denied",
                "link": "https://fleet.example.com/placements/crp/shop"
            }
        })
    );
    // Nothing of the request's credentials in its Debug form.
    assert!(!format!("{r:?}").contains("t0ken"));
}

#[test]
fn commit_statuses_speak_each_forges_api() {
    let token = Secret::new("tok");
    let status = |forge, api: &str, repo: &str| Target::CommitStatus {
        forge,
        api_url: api.into(),
        repository: repo.into(),
        token: token.clone(),
        context: "gitfleet/rollout".into(),
    };
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let gh = request(
        &status(Forge::GitHub, "https://api.github.com", "acme/fleet"),
        &failed(),
        "x",
    )
    .unwrap();
    assert_eq!(
        gh.url.expose(),
        format!("https://api.github.com/repos/acme/fleet/statuses/{sha}")
    );
    assert_eq!(
        gh.body,
        json!({"state": "failure", "context": "gitfleet/rollout",
            "description": "crp/shop failed: m2: admission webhook denied",
            "target_url": "https://fleet.example.com/placements/crp/shop"})
    );
    let headers: Vec<(&str, &str)> = gh.headers.iter().map(|(k, v)| (*k, v.expose())).collect();
    assert_eq!(
        headers,
        [
            ("authorization", "Bearer tok"),
            ("accept", "application/vnd.github+json"),
            ("x-github-api-version", "2022-11-28")
        ]
    );
    let gl = request(
        &status(Forge::GitLab, "https://gl.example.com/api/v4", "acme/fleet"),
        &failed(),
        "x",
    )
    .unwrap();
    assert_eq!(
        gl.url.expose(),
        format!("https://gl.example.com/api/v4/projects/acme%2Ffleet/statuses/{sha}")
    );
    assert_eq!(gl.body["state"], "failed");
    assert_eq!(gl.body["name"], "gitfleet/rollout");
    assert_eq!(gl.headers[0].0, "private-token");
    let gt = request(
        &status(Forge::Gitea, "https://git.example.com/api/v1", "acme/fleet"),
        &failed(),
        "x",
    )
    .unwrap();
    assert_eq!(
        gt.url.expose(),
        format!("https://git.example.com/api/v1/repos/acme/fleet/statuses/{sha}")
    );
    assert_eq!(gt.headers[0].1.expose(), "token tok");
    assert_eq!(gt.body["state"], "failure");

    // Pending when served, success when rolled out; nothing for events of no commit state.
    let mut served = failed();
    served.kind = Kind::CommitServed;
    let gh_target = status(Forge::GitHub, "https://api.github.com", "acme/fleet");
    assert_eq!(
        request(&gh_target, &served, "x").unwrap().body["state"],
        "pending"
    );
    served.kind = Kind::CommitRolledOut;
    assert_eq!(
        request(&gh_target, &served, "x").unwrap().body["state"],
        "success"
    );
    served.kind = Kind::DriftFound;
    assert!(request(&gh_target, &served, "x").is_none());
    // GitHub refuses a description over 140 characters.
    let mut long = failed();
    long.message = "x".repeat(300);
    let d = request(&gh_target, &long, "x").unwrap().body["description"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(d.chars().count(), 140);
}

#[test]
fn chat_messages_carry_the_text_details_and_link() {
    let url = Secret::new("https://hooks.slack.com/services/T/B/x");
    let s = request(&Target::Slack { url: url.clone() }, &failed(), "x").unwrap();
    assert_eq!(s.url.expose(), url.expose());
    assert_eq!(
        s.body["text"],
        ":x: gitfleet: crp/shop failed: m2: admission webhook denied"
    );
    assert_eq!(s.body["blocks"][0]["type"], "section");
    assert_eq!(
        s.body["blocks"][0]["fields"][1]["text"],
        "*Placement*\ncrp/shop"
    );
    assert_eq!(
        s.body["blocks"][1]["elements"][0]["text"],
        "<https://fleet.example.com/placements/crp/shop|Open in the gitfleet dashboard>"
    );
    let t = request(&Target::Teams { url }, &failed(), "x").unwrap();
    assert_eq!(t.body["type"], "message");
    let a = &t.body["attachments"][0];
    assert_eq!(a["contentType"], "application/vnd.microsoft.card.adaptive");
    assert_eq!(a["content"]["type"], "AdaptiveCard");
    assert_eq!(
        a["content"]["body"][1]["text"],
        "crp/shop failed: m2: admission webhook denied"
    );
    assert_eq!(
        a["content"]["body"][2]["facts"][2],
        json!({"title": "Clusters", "value": "m2"})
    );
    assert_eq!(
        a["content"]["actions"][0]["url"],
        "https://fleet.example.com/placements/crp/shop"
    );
}
