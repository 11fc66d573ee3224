//! The notifications file (`gitfleet run --notifications FILE`): the dashboard's external URL
//! and the sinks, read strictly (an unknown field is an error naming the file and field, every
//! problem at once). Secrets (tokens, chat webhook URLs) are named here, read from a file or
//! the environment at load, and kept in [`Secret`], which never prints its value.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::events::{Event, Kind, Severity};

/// A value that must never reach a log, a status or a `Debug` print.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// For tests and callers that hold the value already.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the notifications file {file}: {message}")]
    Read { file: PathBuf, message: String },
    #[error("{}", .problems.iter().map(|p| format!("{}: {p}", .file.display())).collect::<Vec<_>>().join("\n"))]
    Invalid {
        file: PathBuf,
        problems: Vec<Problem>,
    },
}

/// One problem of the file: the field's path (`sinks[1].token`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawFile {
    /// The dashboard's URL as people reach it (events link to its pages).
    #[serde(default)]
    dashboard_url: Option<String>,
    #[serde(default)]
    sinks: Vec<RawSink>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSink {
    #[serde(default)]
    name: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    /// CloudEvents: the receiver's URL (text); Slack and Teams: a secret (`{file|env}`).
    #[serde(default)]
    url: Option<serde_json::Value>,
    #[serde(default)]
    token: Option<SecretRef>,
    /// CloudEvents `source` attribute.
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    api_url: Option<String>,
    /// GitHub, Gitea: `OWNER/REPO`.
    #[serde(default)]
    repository: Option<String>,
    /// GitLab: the project's id or `group/project` path.
    #[serde(default)]
    project: Option<String>,
    /// Commit statuses: the status's name on the commit.
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    filter: Filter,
    #[serde(default)]
    retry: RawRetry,
    #[serde(default)]
    queue_size: Option<usize>,
}

/// A secret's origin: exactly one of a file (its content, trimmed) or an environment variable.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretRef {
    #[serde(default)]
    file: Option<PathBuf>,
    #[serde(default)]
    env: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawRetry {
    #[serde(default)]
    attempts: Option<u32>,
    #[serde(default)]
    backoff: Option<String>,
    #[serde(default)]
    max_backoff: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
}

/// Which events a sink is given: all three must admit an event. An empty list admits all.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Filter {
    /// Event names (`placement.failed`) or prefixes ending in `*` (`run.*`).
    #[serde(default)]
    pub types: Vec<String>,
    /// The lowest severity told (`info`, `warning`, `error`).
    #[serde(default)]
    pub severity: Option<Severity>,
    /// Placement ids (`crp/shop`) or prefixes ending in `*`; events of no placement (commits,
    /// members) pass.
    #[serde(default)]
    pub placements: Vec<String>,
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

impl Filter {
    pub fn admits(&self, e: &Event) -> bool {
        (self.types.is_empty() || self.types.iter().any(|t| matches(t, e.kind.name())))
            && self.severity.is_none_or(|s| e.severity >= s)
            && (self.placements.is_empty()
                || e.placement
                    .as_deref()
                    .is_none_or(|p| self.placements.iter().any(|f| matches(f, p))))
    }
}

/// How a sink retries: `attempts` in all, waiting `backoff`, doubled each time up to
/// `max_backoff`; each request given up after `timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    pub attempts: u32,
    pub backoff: Duration,
    pub max_backoff: Duration,
    pub timeout: Duration,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            attempts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        }
    }
}

impl Retry {
    /// The wait before attempt `n` (1 is the first retry).
    pub fn wait(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.saturating_sub(1));
        self.backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// The git hosts whose commit statuses gitfleet sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forge {
    GitHub,
    GitLab,
    Gitea,
}

/// Where a sink sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    CloudEvents {
        url: String,
        token: Option<Secret>,
        source: String,
    },
    Slack {
        url: Secret,
    },
    Teams {
        url: Secret,
    },
    CommitStatus {
        forge: Forge,
        /// The API's base (`https://api.github.com`, `https://gitlab.example.com/api/v4`).
        api_url: String,
        /// `OWNER/REPO` (GitHub, Gitea) or the GitLab project's id or path.
        repository: String,
        token: Secret,
        context: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sink {
    pub name: String,
    pub target: Target,
    pub filter: Filter,
    pub retry: Retry,
    pub queue_size: usize,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    pub dashboard_url: Option<String>,
    pub sinks: Vec<Sink>,
}

/// Where secrets come from: the environment, here a function so tests give their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Config {
    /// Reads and checks `file`, secrets from their files and the process's environment.
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(file).map_err(|e| ConfigError::Read {
            file: file.to_path_buf(),
            message: e.to_string(),
        })?;
        let base = file.parent().unwrap_or(Path::new("."));
        Config::parse(&text, base, &|k| std::env::var(k).ok()).map_err(|problems| {
            ConfigError::Invalid {
                file: file.to_path_buf(),
                problems,
            }
        })
    }

    /// Checks `text`; secret files relative to `base`.
    pub fn parse(text: &str, base: &Path, env: Env<'_>) -> Result<Config, Vec<Problem>> {
        let problem = |field: &str, message: String| Problem {
            field: field.into(),
            message,
        };
        let value: serde_json::Value =
            crate::yaml::from_str(text).map_err(|e| vec![problem("", e.to_string())])?;
        let raw: RawFile = serde_path_to_error::deserialize(&value).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { String::new() } else { path };
            vec![problem(&field, e.into_inner().to_string())]
        })?;
        let mut problems = Vec::new();
        if let Some(u) = &raw.dashboard_url {
            if !is_http_url(u) {
                problems.push(problem("dashboardUrl", "must be an http(s) URL".into()));
            }
        }
        let mut sinks = Vec::new();
        let mut names = BTreeSet::new();
        for (i, s) in raw.sinks.into_iter().enumerate() {
            let at = format!("sinks[{i}]");
            let mut p = Vec::new();
            if let Some(sink) = sink(s, &at, base, env, &mut p) {
                if !names.insert(sink.name.clone()) {
                    p.push(problem(
                        &format!("{at}.name"),
                        format!("{:?} names two sinks: give each its own name", sink.name),
                    ));
                }
                sinks.push(sink);
            }
            problems.extend(p);
        }
        if problems.is_empty() {
            Ok(Config {
                dashboard_url: raw.dashboard_url,
                sinks,
            })
        } else {
            Err(problems)
        }
    }
}

fn is_http_url(u: &str) -> bool {
    (u.starts_with("https://") || u.starts_with("http://")) && u.len() > "https://".len()
}

fn duration(text: Option<&str>, default: Duration, field: &str, p: &mut Vec<Problem>) -> Duration {
    match text.map(humantime::parse_duration) {
        None => default,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            p.push(Problem {
                field: field.into(),
                message: format!("not a duration (e.g. 500ms, 10s): {e}"),
            });
            default
        }
    }
}

fn secret(
    r: &SecretRef,
    field: &str,
    base: &Path,
    env: Env<'_>,
    p: &mut Vec<Problem>,
) -> Option<Secret> {
    let mut fail = |message: String| {
        p.push(Problem {
            field: field.into(),
            message,
        });
        None
    };
    let value = match (&r.file, &r.env) {
        (Some(f), None) => {
            let path = base.join(f);
            match std::fs::read_to_string(&path) {
                Ok(t) => t.trim().to_string(),
                Err(e) => return fail(format!("cannot read {}: {e}", path.display())),
            }
        }
        (None, Some(name)) => match env(name) {
            Some(v) => v.trim().to_string(),
            None => return fail(format!("the environment variable {name} is not set")),
        },
        _ => return fail("give exactly one of `file` and `env`".into()),
    };
    if value.is_empty() {
        return fail("is empty".into());
    }
    Some(Secret(value))
}

fn sink(s: RawSink, at: &str, base: &Path, env: Env<'_>, p: &mut Vec<Problem>) -> Option<Sink> {
    let field = |f: &str| format!("{at}.{f}");
    let mut problem = |f: &str, message: &str| {
        p.push(Problem {
            field: field(f),
            message: message.into(),
        })
    };
    let kind = s.kind.as_str();
    // The fields each type reads; any other given is a mistake, not ignored.
    let allowed: &[&str] = match kind {
        "cloudevents" => &["url", "token", "source"],
        "slack" | "teams" => &["url"],
        "github" | "gitlab" | "gitea" => &["token", "apiUrl", "repository", "project", "context"],
        _ => {
            problem(
                "type",
                &format!(
                    "unknown sink type {kind:?}: the types are cloudevents, slack, teams, github, gitlab, gitea"
                ),
            );
            return None;
        }
    };
    let given = [
        ("url", s.url.is_some()),
        ("token", s.token.is_some()),
        ("source", s.source.is_some()),
        ("apiUrl", s.api_url.is_some()),
        ("repository", s.repository.is_some()),
        ("project", s.project.is_some()),
        ("context", s.context.is_some()),
    ];
    for (f, is) in given {
        let forge_field_ok = !matches!(
            (kind, f),
            ("gitlab", "repository") | ("github" | "gitea", "project")
        );
        if is && (!allowed.contains(&f) || !forge_field_ok) {
            problem(f, &format!("not a field of a {kind} sink"));
        }
    }
    for (i, t) in s.filter.types.iter().enumerate() {
        let known = Kind::ALL.iter().any(|k| matches(t, k.name()));
        if !known {
            problem(
                &format!("filter.types[{i}]"),
                &format!("{t:?} matches no event type"),
            );
        }
    }
    let mut local = Vec::new();
    let retry = Retry {
        attempts: s.retry.attempts.unwrap_or(Retry::default().attempts).max(1),
        backoff: duration(
            s.retry.backoff.as_deref(),
            Retry::default().backoff,
            &field("retry.backoff"),
            &mut local,
        ),
        max_backoff: duration(
            s.retry.max_backoff.as_deref(),
            Retry::default().max_backoff,
            &field("retry.maxBackoff"),
            &mut local,
        ),
        timeout: duration(
            s.retry.timeout.as_deref(),
            Retry::default().timeout,
            &field("retry.timeout"),
            &mut local,
        ),
    };
    let target = match kind {
        "cloudevents" => {
            let url = match &s.url {
                Some(serde_json::Value::String(u)) if is_http_url(u) => Some(u.clone()),
                Some(_) => {
                    problem("url", "must be the receiver's http(s) URL");
                    None
                }
                None => {
                    problem("url", "required");
                    None
                }
            };
            let token = s
                .token
                .as_ref()
                .and_then(|t| secret(t, &field("token"), base, env, &mut local));
            url.map(|url| Target::CloudEvents {
                url,
                token,
                source: s.source.clone().unwrap_or_else(|| "gitfleet".into()),
            })
        }
        "slack" | "teams" => {
            let url = match &s.url {
                Some(v @ serde_json::Value::Object(_)) => {
                    match serde_path_to_error::deserialize::<_, SecretRef>(v) {
                        Ok(r) => secret(&r, &field("url"), base, env, &mut local),
                        Err(e) => {
                            problem("url", &e.into_inner().to_string());
                            None
                        }
                    }
                }
                Some(_) => {
                    problem(
                        "url",
                        "the incoming webhook's URL is a credential: give {file: PATH} or {env: NAME}",
                    );
                    None
                }
                None => {
                    problem("url", "required");
                    None
                }
            };
            url.map(|url| {
                if kind == "slack" {
                    Target::Slack { url }
                } else {
                    Target::Teams { url }
                }
            })
        }
        _ => {
            let forge = match kind {
                "github" => Forge::GitHub,
                "gitlab" => Forge::GitLab,
                _ => Forge::Gitea,
            };
            let api_url = match (&s.api_url, forge) {
                (Some(u), _) if is_http_url(u) => Some(u.trim_end_matches('/').to_string()),
                (Some(_), _) => {
                    problem("apiUrl", "must be an http(s) URL");
                    None
                }
                (None, Forge::GitHub) => Some("https://api.github.com".into()),
                (None, Forge::GitLab) => Some("https://gitlab.com/api/v4".into()),
                (None, Forge::Gitea) => {
                    problem(
                        "apiUrl",
                        "required for gitea (e.g. https://gitea.example.com/api/v1)",
                    );
                    None
                }
            };
            let repository = match forge {
                Forge::GitLab => s.project.clone(),
                Forge::GitHub | Forge::Gitea => s.repository.clone(),
            };
            let repository = match repository {
                Some(r)
                    if forge == Forge::GitLab
                        || r.split('/').filter(|x| !x.is_empty()).count() == 2 =>
                {
                    Some(r)
                }
                Some(_) => {
                    problem("repository", "must be OWNER/REPO");
                    None
                }
                None if forge == Forge::GitLab => {
                    problem(
                        "project",
                        "required: the project's id or group/project path",
                    );
                    None
                }
                None => {
                    problem("repository", "required: OWNER/REPO");
                    None
                }
            };
            let token = match &s.token {
                Some(t) => secret(t, &field("token"), base, env, &mut local),
                None => {
                    problem("token", "required: {file: PATH} or {env: NAME}");
                    None
                }
            };
            match (api_url, repository, token) {
                (Some(api_url), Some(repository), Some(token)) => Some(Target::CommitStatus {
                    forge,
                    api_url,
                    repository,
                    token,
                    context: s
                        .context
                        .clone()
                        .unwrap_or_else(|| "gitfleet/rollout".into()),
                }),
                _ => None,
            }
        }
    };
    p.extend(local);
    let target = target?;
    Some(Sink {
        name: s.name.unwrap_or_else(|| kind.to_string()),
        target,
        filter: s.filter,
        retry,
        queue_size: s.queue_size.unwrap_or(1000).max(1),
    })
}

#[cfg(test)]
mod tests;
