//! What each sink sends for an event: the HTTP request, built without sending it (pure, so
//! the payloads are tested field by field). The shapes are the receivers' own:
//! - CloudEvents 1.0, structured mode: one JSON object with `specversion`, `id`, `source`,
//!   `type` (`io.gitfleet.<event>`), `time`, `subject`, `datacontenttype` and the event as
//!   `data`, sent as `application/cloudevents+json`;
//! - Slack incoming webhooks: `{text, blocks}` (the text is the notification's fallback);
//! - Microsoft Teams incoming webhooks: a `message` with one Adaptive Card attachment;
//! - commit statuses: GitHub's and Gitea's `POST /repos/{owner}/{repo}/statuses/{sha}`
//!   (`state`, `target_url`, `description`, `context`), GitLab's
//!   `POST /projects/{id}/statuses/{sha}` (`state`, `name`, `target_url`, `description`).
//!
//! Commit statuses are one per commit (the sink's `context`), not one per placement: a
//! placement's context would stay pending forever on the commits after it was deleted, and
//! a required check on a branch needs one name that every commit has. The commit is pending
//! from when it is served, failed when a placement fails or the commit is refused, and
//! succeeds once every placement is ready; the description and link name what failed.

use serde_json::json;

use super::config::{Forge, Secret, Target};
use super::events::{Event, Kind, Severity};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Post,
}

/// One HTTP request for a sink. Its URL may be a credential (chat webhooks): `Debug` hides it
/// and the headers' values.
#[derive(Clone, PartialEq)]
pub struct Request {
    pub method: Method,
    pub url: Secret,
    pub headers: Vec<(&'static str, Secret)>,
    pub body: serde_json::Value,
    pub content_type: &'static str,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("content_type", &self.content_type)
            .finish_non_exhaustive()
    }
}

/// The request `target` makes of `event` (`None`: this sink says nothing of it); `id` is the
/// CloudEvents id, unique per event sent.
pub fn request(target: &Target, event: &Event, id: &str) -> Option<Request> {
    match target {
        Target::CloudEvents { url, token, source } => {
            let mut headers = Vec::new();
            if let Some(t) = token {
                headers.push((
                    "authorization",
                    Secret::new(format!("Bearer {}", t.expose())),
                ));
            }
            Some(Request {
                method: Method::Post,
                url: Secret::new(url.clone()),
                headers,
                body: cloud_event(event, id, source),
                content_type: "application/cloudevents+json",
            })
        }
        Target::Slack { url } => Some(json_post(url.clone(), slack(event))),
        Target::Teams { url } => Some(json_post(url.clone(), teams(event))),
        Target::CommitStatus {
            forge,
            api_url,
            repository,
            token,
            context,
        } => commit_status(*forge, api_url, repository, token, context, event),
    }
}

fn json_post(url: Secret, body: serde_json::Value) -> Request {
    Request {
        method: Method::Post,
        url,
        headers: Vec::new(),
        body,
        content_type: "application/json",
    }
}

/// The CloudEvents `type` of an event.
pub fn cloud_event_type(kind: Kind) -> String {
    format!("io.gitfleet.{}", kind.name())
}

pub fn cloud_event(e: &Event, id: &str, source: &str) -> serde_json::Value {
    let mut ce = json!({
        "specversion": "1.0",
        "id": id,
        "source": source,
        "type": cloud_event_type(e.kind),
        "time": crate::timestamp::format_unix_seconds(i64::try_from(e.time).unwrap_or(i64::MAX)),
        "datacontenttype": "application/json",
        "data": e,
    });
    if let Some(subject) = e.placement.as_deref().or(e.commit.as_deref()) {
        ce["subject"] = json!(subject);
    }
    ce
}

fn icon(s: Severity) -> &'static str {
    match s {
        Severity::Info => ":information_source:",
        Severity::Warning => ":warning:",
        Severity::Error => ":x:",
    }
}

/// Slack: the text for notifications, a section with the details and the link.
pub fn slack(e: &Event) -> serde_json::Value {
    let text = format!("{} gitfleet: {}", icon(e.severity), e.message);
    let mut fields = Vec::new();
    if let Some(c) = &e.commit {
        fields.push(json!({"type": "mrkdwn", "text": format!("*Commit*\n`{}`", short(c))}));
    }
    if let Some(p) = &e.placement {
        fields.push(json!({"type": "mrkdwn", "text": format!("*Placement*\n{p}")}));
    }
    if !e.clusters.is_empty() {
        fields.push(
            json!({"type": "mrkdwn", "text": format!("*Clusters*\n{}", e.clusters.join(", "))}),
        );
    }
    let mut section = json!({"type": "section", "text": {"type": "mrkdwn", "text": format!("*{}*\n{}", e.kind.name(), e.message)}});
    if !fields.is_empty() {
        section["fields"] = json!(fields);
    }
    let mut blocks = vec![section];
    if let Some(link) = &e.link {
        blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!("<{link}|Open in the gitfleet dashboard>")}]}));
    }
    json!({"text": text, "blocks": blocks})
}

/// Teams: a message with one Adaptive Card (what Teams' incoming webhooks and Workflows accept).
pub fn teams(e: &Event) -> serde_json::Value {
    let color = match e.severity {
        Severity::Info => "Default",
        Severity::Warning => "Warning",
        Severity::Error => "Attention",
    };
    let mut facts = Vec::new();
    if let Some(c) = &e.commit {
        facts.push(json!({"title": "Commit", "value": short(c)}));
    }
    if let Some(p) = &e.placement {
        facts.push(json!({"title": "Placement", "value": p}));
    }
    if !e.clusters.is_empty() {
        facts.push(json!({"title": "Clusters", "value": e.clusters.join(", ")}));
    }
    let mut card = json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {"type": "TextBlock", "text": format!("gitfleet: {}", e.kind.name()), "weight": "Bolder", "color": color},
            {"type": "TextBlock", "text": e.message, "wrap": true},
            {"type": "FactSet", "facts": facts},
        ],
    });
    if let Some(link) = &e.link {
        card["actions"] =
            json!([{"type": "Action.OpenUrl", "title": "Open in the dashboard", "url": link}]);
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": card,
        }],
    })
}

fn short(c: &str) -> &str {
    &c[..c.len().min(12)]
}

/// The state a commit gets for an event, with a description: (GitHub/Gitea state, GitLab
/// state, description); `None`: the event says nothing of the commit's rollout.
fn commit_state(e: &Event) -> Option<(&'static str, &'static str, String)> {
    Some(match e.kind {
        Kind::CommitServed => (
            "pending",
            "pending",
            "gitfleet is rolling this commit out".into(),
        ),
        Kind::GuardHeld => (
            "pending",
            "pending",
            format!("held by the deletion guard: {}", e.message),
        ),
        Kind::CommitRolledOut => (
            "success",
            "success",
            "rolled out: every placement is ready".into(),
        ),
        Kind::PlacementFailed => ("failure", "failed", e.message.clone()),
        Kind::CommitRefused => ("failure", "failed", e.message.clone()),
        _ => return None,
    })
}

/// At most `n` characters (GitHub refuses a longer description).
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n - 1).collect();
    out.push('…');
    out
}

/// A path segment: GitLab's project path `group/project` is one (`group%2Fproject`).
pub fn path_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn commit_status(
    forge: Forge,
    api: &str,
    repository: &str,
    token: &Secret,
    context: &str,
    e: &Event,
) -> Option<Request> {
    let sha = e.commit.as_deref()?;
    let (state, gitlab_state, description) = commit_state(e)?;
    let description = clip(&description, 140);
    let mut body = match forge {
        Forge::GitHub | Forge::Gitea => {
            json!({"state": state, "description": description, "context": context})
        }
        Forge::GitLab => {
            json!({"state": gitlab_state, "description": description, "name": context})
        }
    };
    if let Some(link) = &e.link {
        body["target_url"] = json!(link);
    }
    let (url, headers) = match forge {
        Forge::GitHub => (
            format!("{api}/repos/{repository}/statuses/{sha}"),
            vec![
                (
                    "authorization",
                    Secret::new(format!("Bearer {}", token.expose())),
                ),
                ("accept", Secret::new("application/vnd.github+json")),
                ("x-github-api-version", Secret::new("2022-11-28")),
            ],
        ),
        Forge::Gitea => (
            format!("{api}/repos/{repository}/statuses/{sha}"),
            vec![(
                "authorization",
                Secret::new(format!("token {}", token.expose())),
            )],
        ),
        Forge::GitLab => (
            format!("{api}/projects/{}/statuses/{sha}", path_segment(repository)),
            vec![("private-token", Secret::new(token.expose()))],
        ),
    };
    Some(Request {
        method: Method::Post,
        url: Secret::new(url),
        headers,
        body,
        content_type: "application/json",
    })
}

#[cfg(test)]
mod tests;
