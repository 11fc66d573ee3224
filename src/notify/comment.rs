//! One pull-request comment that later runs update in place (`gitfleet plan --comment-on`):
//! found among the pull request's comments by a hidden marker (an HTML comment, which the
//! forges do not show), then edited, or created when there is none.
//! - GitHub: `GET /repos/{repo}/issues/{n}/comments` (paged), `PATCH
//!   /repos/{repo}/issues/comments/{id}`, `POST /repos/{repo}/issues/{n}/comments`;
//! - GitLab: `GET /projects/{id}/merge_requests/{iid}/notes` (paged), `PUT
//!   .../notes/{note_id}`, `POST .../notes`.
//!
//! Blocking (the plan command is), over ureq with rustls on ring. The token goes in a header
//! only; errors name the request's method and path, never the token.

use serde::Deserialize;

use super::sinks::path_segment;

/// Which forge's API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Forge {
    #[value(name = "github")]
    GitHub,
    #[value(name = "gitlab")]
    GitLab,
}

/// Where the comment goes.
#[derive(Debug, Clone)]
pub struct Target {
    pub forge: Forge,
    /// `https://api.github.com`, `https://gitlab.example.com/api/v4`.
    pub api_url: String,
    /// GitHub: `OWNER/REPO`; GitLab: the project's id or path.
    pub repository: String,
    /// The pull request's number (GitLab: the merge request's iid).
    pub number: u64,
    pub token: super::config::Secret,
}

#[derive(Debug, thiserror::Error)]
pub enum CommentError {
    #[error("{method} {path}: {message}")]
    Request {
        method: &'static str,
        path: String,
        message: String,
    },
}

/// What was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upserted {
    Created,
    Updated(u64),
}

/// The hidden line that marks gitfleet's comment (one per `key`, e.g. the fleet's folder, so
/// that two fleets of one repository keep a comment each).
pub fn marker(key: &str) -> String {
    if key.is_empty() {
        "<!-- gitfleet-plan -->".into()
    } else {
        format!("<!-- gitfleet-plan: {key} -->")
    }
}

#[derive(Deserialize)]
struct Comment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
}

/// Posts `body` (the marker is put first) as the comment marked `key`, or updates it.
pub fn upsert(target: &Target, key: &str, body: &str) -> Result<Upserted, CommentError> {
    let mark = marker(key);
    let body = format!("{mark}\n{body}");
    let api = target.api_url.trim_end_matches('/');
    let base = match target.forge {
        Forge::GitHub => format!("{api}/repos/{}/issues", target.repository),
        Forge::GitLab => format!(
            "{api}/projects/{}/merge_requests",
            path_segment(&target.repository)
        ),
    };
    let list = match target.forge {
        Forge::GitHub => format!("{base}/{}/comments", target.number),
        Forge::GitLab => format!("{base}/{}/notes", target.number),
    };
    let agent = agent();
    let mut found = None;
    for page in 1.. {
        let url = format!("{list}?per_page=100&page={page}");
        let text = call(&agent, target, "GET", &url, None)?;
        let comments: Vec<Comment> =
            serde_json::from_str(&text).map_err(|e| CommentError::Request {
                method: "GET",
                path: path_of(&url),
                message: format!("not a list of comments: {e}"),
            })?;
        found = comments
            .iter()
            .find(|c| c.body.as_deref().is_some_and(|b| b.starts_with(&mark)))
            .map(|c| c.id);
        if found.is_some() || comments.len() < 100 {
            break;
        }
    }
    let payload = serde_json::json!({ "body": body }).to_string();
    match found {
        Some(id) => {
            let (method, url) = match target.forge {
                Forge::GitHub => ("PATCH", format!("{base}/comments/{id}")),
                Forge::GitLab => ("PUT", format!("{list}/{id}")),
            };
            call(&agent, target, method, &url, Some(&payload))?;
            Ok(Upserted::Updated(id))
        }
        None => {
            call(&agent, target, "POST", &list, Some(&payload))?;
            Ok(Upserted::Created)
        }
    }
}

fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("/".into(), |i| rest[i..].to_string())
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .tls_config(crate::api::client::tls_config())
        .user_agent(concat!("gitfleet/", env!("CARGO_PKG_VERSION")))
        .timeout_global(Some(std::time::Duration::from_secs(60)))
        .build()
        .new_agent()
}

fn call(
    agent: &ureq::Agent,
    target: &Target,
    method: &'static str,
    url: &str,
    body: Option<&str>,
) -> Result<String, CommentError> {
    let fail = |message: String| CommentError::Request {
        method,
        path: path_of(url),
        message,
    };
    let token = target.token.expose();
    let (auth_name, auth_value) = match target.forge {
        Forge::GitHub => ("authorization", format!("Bearer {token}")),
        Forge::GitLab => ("private-token", token.to_string()),
    };
    let with = |r: ureq::RequestBuilder<ureq::typestate::WithBody>| {
        r.header(auth_name, &auth_value)
            .header("accept", "application/vnd.github+json")
            .header("content-type", "application/json")
    };
    let result = match method {
        "GET" => agent
            .get(url)
            .header(auth_name, &auth_value)
            .header("accept", "application/vnd.github+json")
            .call(),
        "POST" => with(agent.post(url)).send(body.unwrap_or_default()),
        "PATCH" => with(agent.patch(url)).send(body.unwrap_or_default()),
        _ => with(agent.put(url)).send(body.unwrap_or_default()),
    };
    let mut response = result.map_err(|e| match e {
        ureq::Error::StatusCode(code) => fail(format!("the forge answered HTTP {code}")),
        e => fail(e.to_string()),
    })?;
    response
        .body_mut()
        .read_to_string()
        .map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_hidden_and_per_fleet() {
        assert_eq!(marker(""), "<!-- gitfleet-plan -->");
        assert_eq!(marker("fleet/prod"), "<!-- gitfleet-plan: fleet/prod -->");
        assert_eq!(
            path_of("https://api.github.com/repos/a/b?x=1"),
            "/repos/a/b?x=1"
        );
    }
}
