//! Command-line flags that several commands share: durations, and how members are pushed
//! (`apply` and `run` flatten [`PushArgs`]). Every command of [`crate::cli`] may use it; it
//! uses none of them.

use clap::{Args, ValueEnum};
use std::time::Duration;

/// Exit code of a command line that cannot be used as given (sysexits' `EX_USAGE`): a
/// mistyped flag, a missing value, flags that need each other. Kept apart from the codes
/// commands give their results (`plan` exits 2 for "the fleet changes").
pub const EX_USAGE: u8 = 64;

/// A command line clap accepts but the command cannot use (e.g. `--verify-commits` without
/// trust files); `cli::main` exits with [`EX_USAGE`] for it as for clap's own errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A duration flag: humantime's units and combinations (`500ms`, `30s`, `2m`, `1h30m`), or a
/// bare number of seconds (`10`, `0.5`), as `--member-timeout` always took.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let d = if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        s.parse::<f64>()
            .ok()
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| format!("{s:?} is not a duration like 30s, 500ms, 2m or 1h30m"))?
    } else {
        humantime::parse_duration(s)
            .map_err(|e| format!("{s:?} is not a duration like 30s, 500ms, 2m or 1h30m: {e}"))?
    };
    Ok(d)
}

/// A duration flag that must be more than zero (`--member-timeout`).
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err(format!("{s:?}: a timeout must be more than zero")),
        d => Ok(d),
    }
}

/// How log lines are written to stderr (`--log-format`, every command).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// `--color`: whether output for people gets ANSI colours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// When the stream is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether a stream gets colours: `always` and `never` as said; `auto` when the stream is
    /// a terminal and `NO_COLOR` (https://no-color.org: set and not empty) is not set.
    pub fn enabled(self, is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto => is_terminal && no_color.is_none_or(|v| v.is_empty()),
        }
    }

    /// [`Self::enabled`] for this process's `NO_COLOR`.
    pub fn for_stream(self, is_terminal: bool) -> bool {
        self.enabled(is_terminal, std::env::var_os("NO_COLOR").as_deref())
    }
}

/// `--kubeconfig`, found as kubectl finds it when not given (see [`crate::members::kubeconfig`]).
/// Every command that reaches members flattens it.
#[derive(Debug, Clone, Default, Args)]
pub struct KubeconfigArgs {
    /// Kubeconfig with one context per member (the member's name, or the context its
    /// `gitfleet.io/kubeconfig-context` annotation names). Without it, as kubectl: the files
    /// KUBECONFIG lists (`:`-separated, merged: the first file to set a context, cluster or user
    /// wins), else ~/.kube/config.
    #[arg(long, env = "GITFLEET_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<std::path::PathBuf>,
}

impl KubeconfigArgs {
    /// Finds and reads the kubeconfig (this process's `KUBECONFIG` and home folder).
    pub fn load(&self) -> Result<crate::members::kubeconfig::Located, crate::members::MemberError> {
        crate::members::kubeconfig::KubeconfigSource::from_process(self.kubeconfig.as_deref())?
            .load()
    }
}

/// What turns the repository's files into hub objects ([`crate::sources`]): the keys that
/// decrypt SOPS-encrypted files, the kustomize that builds Kustomize folders and the helm that
/// renders Helm releases. Every command that reads a commit flattens it.
#[derive(Debug, Clone, Default, Args)]
pub struct SourcesArgs {
    /// Age key file (as `age-keygen` writes it) that opens SOPS-encrypted files of the
    /// repository; without it SOPS_AGE_KEY_FILE is read, as sops reads it, and age keys in
    /// SOPS_AGE_KEY (one per line) are used too. Keys stay outside the repository; a SOPS file
    /// no key opens makes the commit invalid.
    #[arg(
        long,
        env = "GITFLEET_AGE_KEY_FILE",
        value_name = "FILE",
        hide_env_values = true
    )]
    pub age_key_file: Option<std::path::PathBuf>,
    /// The kustomize program that builds the repository's Kustomize folders (a path, or a name
    /// looked up on PATH; `kustomize` by default). gitfleet is tested with v5.8.2: `go install
    /// sigs.k8s.io/kustomize/kustomize/v5@v5.8.2`.
    #[arg(long, env = "GITFLEET_KUSTOMIZE", value_name = "PROGRAM")]
    pub kustomize: Option<std::path::PathBuf>,
    /// The helm program that renders the repository's Helm releases (`helmrelease.yaml`; a
    /// path, or a name looked up on PATH; `helm` by default). gitfleet is tested with v3.22.0:
    /// `go install helm.sh/helm/v3/cmd/helm@v3.22.0`.
    #[arg(long, env = "GITFLEET_HELM", value_name = "PROGRAM")]
    pub helm: Option<std::path::PathBuf>,
    /// Longest time one kustomize build or helm rendering may take before it is stopped and the
    /// commit is invalid.
    #[arg(long, env = "GITFLEET_RENDER_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub render_timeout: std::time::Duration,
    /// Largest output (in MiB) one kustomize build or helm rendering may print before it is
    /// stopped and the commit is invalid.
    #[arg(long, env = "GITFLEET_RENDER_MAX_MIB", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub render_max_mib: u32,
}

impl SourcesArgs {
    /// The keys (the file or `SOPS_AGE_KEY_FILE`'s, and `SOPS_AGE_KEY` from the environment)
    /// kustomize and helm, their renderings kept under `cache_dir` when given.
    pub fn load(
        &self,
        cache_dir: Option<std::path::PathBuf>,
    ) -> Result<crate::sources::Sources, crate::sources::KeyError> {
        let keys = crate::sources::Keys::from_env(self.age_key_file.as_deref())?;
        let limits = crate::sources::runner::Limits {
            time: self.render_timeout,
            output: self.render_max_mib as usize * 1024 * 1024,
        };
        Ok(crate::sources::Sources::new(
            keys,
            crate::sources::Kustomize::new(self.kustomize.clone(), cache_dir.clone(), limits),
            crate::sources::Helm::new(self.helm.clone(), cache_dir, limits),
        ))
    }
}

/// How members are pushed: shared by `gitfleet apply` and `gitfleet run`.
#[derive(Debug, Clone, Args)]
pub struct PushArgs {
    /// Members pushed at the same time.
    #[arg(long, env = "GITFLEET_PARALLEL_MEMBERS", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub parallel_members: u16,
    /// Requests in flight per member.
    #[arg(long, env = "GITFLEET_PARALLEL_REQUESTS", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub parallel_requests: u16,
    /// How long each member's requests may keep being retried in one push (e.g. 30s, 500ms,
    /// 2m).
    #[arg(long, env = "GITFLEET_RETRY_BUDGET", default_value = "30s", value_parser = parse_duration)]
    pub retry_budget: Duration,
    /// OCM work feedback: report a value that is not an integer, string or bool (a map, a list,
    /// a float) as `JsonRaw`, and a path's several matches as the list of them, as OCM's work
    /// agent does with its `RawFeedbackJsonString` feature gate; without it such a value is an
    /// error of `StatusFeedbackSynced` and the first match is taken, as by OCM's default.
    #[arg(long, env = "GITFLEET_FEEDBACK_RAW_JSON")]
    pub feedback_raw_json: bool,
}

impl PushArgs {
    /// The push options for one commit.
    pub fn options(&self, commit: &str) -> crate::push::PushOptions {
        crate::push::PushOptions {
            commit: commit.to_string(),
            parallel_members: usize::from(self.parallel_members),
            parallel_requests: usize::from(self.parallel_requests),
            retry_budget: self.retry_budget,
            writer: crate::push::writer::Identity::process("apply"),
            feedback_raw_json: self.raw_json(),
        }
    }

    pub fn raw_json(&self) -> crate::feedback::RawJson {
        if self.feedback_raw_json {
            crate::feedback::RawJson::On
        } else {
            crate::feedback::RawJson::Off
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_follows_the_flag_then_no_color_then_the_terminal() {
        use std::ffi::OsStr;
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert!(ColorChoice::Auto.enabled(true, None));
        assert!(!ColorChoice::Auto.enabled(false, None));
        assert!(!ColorChoice::Auto.enabled(true, set));
        assert!(
            ColorChoice::Auto.enabled(true, empty),
            "an empty NO_COLOR is unset"
        );
        assert!(ColorChoice::Always.enabled(false, set));
        assert!(!ColorChoice::Never.enabled(true, None));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("0.5").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        assert!(parse_timeout("0").is_err());
        assert_eq!(parse_timeout("10").unwrap(), Duration::from_secs(10));
        assert!(parse_duration("").is_err());
        assert!(parse_duration(".").is_err());
    }
}

/// The mass-deletion guard's thresholds: shared by `gitfleet run`, `apply` and `plan`, so that
/// the plan's warning is the daemon's verdict.
#[derive(Debug, Clone, Args)]
pub struct DeletionGuardArgs {
    /// A new commit deleting more than this share of the objects gitfleet manages on members
    /// is held until a commit allows it (trailer `Gitfleet-Allow-Deletions: <count>`).
    #[arg(long, value_name = "PERCENT", env = "GITFLEET_DELETION_GUARD_SHARE", default_value = "50%", value_parser = crate::rollout::guard::parse_share)]
    pub deletion_guard_share: u32,
    /// ... and at least this many objects (fewer deletions are never held).
    #[arg(
        long,
        value_name = "COUNT",
        env = "GITFLEET_DELETION_GUARD_MIN",
        default_value_t = 10
    )]
    pub deletion_guard_min: usize,
}

impl DeletionGuardArgs {
    pub fn policy(&self) -> crate::rollout::guard::Policy {
        crate::rollout::guard::Policy {
            share_percent: self.deletion_guard_share,
            min: self.deletion_guard_min,
        }
    }
}

/// `--token-file`, for the commands that read a running daemon (`--server`): the token of a
/// daemon started with `--token-file`, sent as `Authorization: Bearer`.
#[derive(Debug, Clone, Default, Args)]
pub struct TokenArgs {
    /// File holding the daemon's API token (the file its `run --token-file` reads), for a
    /// daemon that asks for one.
    #[arg(long, env = "GITFLEET_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

impl TokenArgs {
    /// The daemon at `url`, shown the token when there is one.
    pub fn daemon(
        &self,
        url: &str,
    ) -> Result<crate::api::client::Daemon, crate::api::client::TokenFileError> {
        let token = match &self.token_file {
            Some(f) => Some(crate::api::client::read_token(f)?),
            None => None,
        };
        Ok(crate::api::client::Daemon::new(url, token))
    }
}
