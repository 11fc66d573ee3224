//! Following a remote repository: telling a URL from a local path, and keeping a bare mirror of
//! the followed branch inside the state directory, fetched with gix. The mirror is an ordinary
//! bare repository, so everything that reads commits reads it like a local one.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::FollowError;
use crate::rollout::approval::TAG_PREFIX as APPROVAL_TAGS;

/// Where `--repo` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A repository on this machine (a work tree or a bare repository), read in place.
    Local(PathBuf),
    /// A repository reached over a transport (`file://`, `http(s)://`, `ssh://`, `git://`, or
    /// scp-like `user@host:path`), mirrored into the state directory.
    Remote(String),
}

/// Schemes gix can fetch from with the features this build has.
const SCHEMES: &[&str] = &["file", "ssh", "git", "http", "https"];

impl Location {
    /// Reads `--repo` the way git does: `scheme://…` is a URL; a `:` before the first `/`
    /// (`git@host:org/repo.git`) is scp-like ssh; anything else is a local path.
    pub fn parse(repo: &str) -> Result<Self, FollowError> {
        if let Some((scheme, _)) = repo.split_once("://") {
            let known = SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme));
            if !known || scheme.is_empty() {
                return Err(FollowError::Url {
                    url: redacted(repo),
                    message: format!(
                        "unsupported scheme {scheme:?} (use a local path or one of {})",
                        SCHEMES.join(", ")
                    ),
                });
            }
        } else if !is_scp_like(repo) {
            return Ok(Self::Local(PathBuf::from(repo)));
        }
        gix::url::parse(repo).map_err(|e| FollowError::Url {
            url: redacted(repo),
            message: e.to_string(),
        })?;
        Ok(Self::Remote(repo.to_string()))
    }
}

/// `host:path` or `user@host:path`, as git reads it: a colon that comes before any slash.
fn is_scp_like(repo: &str) -> bool {
    let Some(colon) = repo.find(':') else {
        return false;
    };
    let before = &repo[..colon];
    let slash_first = repo.find('/').is_some_and(|slash| slash < colon);
    // `C:\…` and `C:/…` are Windows drive letters, not hosts.
    let drive = before.len() == 1 && before.chars().all(|c| c.is_ascii_alphabetic());
    !before.is_empty() && !slash_first && !drive
}

/// `url` fit for logs and errors: a password (`https://user:token@host/…`) is masked.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_string(),
    }
}

/// `text` (an error from gix, which may quote the URL it fetched) with the password of `url`,
/// if it has one, masked wherever it appears: what the status API may show.
pub fn scrubbed(text: &str, url: &str) -> String {
    let masked = redacted(url);
    if masked == url {
        return text.to_string();
    }
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|authority| authority.rsplit_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, password)| password)
        .filter(|p| !p.is_empty());
    let text = text.replace(url, &masked);
    match password {
        Some(p) => text.replace(p, "***"),
        None => text,
    }
}

/// A remote to follow and how to authenticate to it.
#[derive(Debug, Clone)]
pub struct Remote {
    pub url: String,
    pub auth: GitAuth,
}

/// How fetches authenticate: read from files once at start and handed to gix in-process. No
/// credential is ever put in a URL, an argument or the environment of a child process, in a
/// log line or an error (its `Debug` is redacted).
#[derive(Debug, Clone, Default)]
pub struct GitAuth {
    /// `ssh://` and scp-like remotes.
    pub ssh: SshAuth,
    /// `http(s)://` remotes: basic authentication (a token is the password). gix sends it only
    /// over `https://` (never in clear text over `http://`).
    pub http: Option<HttpAuth>,
    /// `--git-ca-file`: PEM certificates trusted for `https://` remotes besides the system's
    /// (a Git host behind an internal CA).
    pub ca_file: Option<PathBuf>,
}

/// What `ssh` is run with for `ssh://` remotes. Host keys are always checked strictly
/// (`StrictHostKeyChecking=yes`, never `accept-new`: an unknown host is refused, not learnt)
/// and nothing is asked interactively (`BatchMode=yes`).
#[derive(Debug, Clone)]
pub struct SshAuth {
    /// `--git-ssh-key`: the private key (only this one is offered: `IdentitiesOnly=yes`).
    pub key: Option<PathBuf>,
    /// `--git-known-hosts`: the only known_hosts file consulted.
    pub known_hosts: Option<PathBuf>,
    /// The ssh program (`ssh`; tests put a recording stand-in here).
    pub program: String,
}

impl Default for SshAuth {
    fn default() -> Self {
        Self {
            key: None,
            known_hosts: None,
            program: "ssh".into(),
        }
    }
}

impl SshAuth {
    /// The command gix runs (as git runs `core.sshCommand`: through `sh -c`, so paths are
    /// single-quoted). It names files, never their contents.
    pub fn command(&self) -> String {
        let mut cmd = vec![
            quote(&self.program),
            "-o".into(),
            "StrictHostKeyChecking=yes".into(),
            "-o".into(),
            "BatchMode=yes".into(),
        ];
        if let Some(key) = &self.key {
            cmd.extend([
                "-i".into(),
                quote(&key.display().to_string()),
                "-o".into(),
                "IdentitiesOnly=yes".into(),
            ]);
        }
        if let Some(hosts) = &self.known_hosts {
            cmd.extend([
                "-o".into(),
                quote(&format!("UserKnownHostsFile={}", hosts.display())),
                "-o".into(),
                "GlobalKnownHostsFile=/dev/null".into(),
            ]);
        }
        cmd.join(" ")
    }
}

/// `s` as one word for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A username and a password (or token) for `http(s)://` remotes.
#[derive(Clone)]
pub struct HttpAuth {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for HttpAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpAuth")
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

impl HttpAuth {
    /// Reads the secret from `file` (trailing whitespace, such as the newline `echo` or a
    /// Secret's editor leaves, is not part of it). An empty file is an error: it would send an
    /// empty password and fail later with a less clear message.
    pub fn from_file(username: &str, file: &Path) -> Result<Self, FollowError> {
        let err = |message: String| FollowError::Credentials {
            path: file.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(file).map_err(|e| err(e.to_string()))?;
        let password = text.trim_end().to_string();
        if password.is_empty() {
            return Err(err("the file is empty".into()));
        }
        if username.is_empty() {
            return Err(err("the username is empty".into()));
        }
        Ok(Self {
            username: username.to_string(),
            password,
        })
    }
}

/// The bare mirror of a remote repository inside the state directory.
#[derive(Debug, Clone)]
pub struct Mirror {
    /// The URL fetched from; shown only through [`redacted`].
    pub url: String,
    /// The mirror's git directory.
    pub path: PathBuf,
    /// How fetches authenticate.
    pub auth: GitAuth,
}

/// What one fetch did to the followed branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The branch's commit in the mirror before and after.
    pub before: Option<String>,
    pub after: String,
}

impl Mirror {
    /// The mirror of `url` at `<state_dir>/repo.git`, created empty when missing and re-used
    /// (then fetched again) after a restart.
    pub fn open(url: &str, state_dir: &Path) -> Result<Self, FollowError> {
        let path = state_dir.join("repo.git");
        let create_err = |message: String| FollowError::Mirror {
            path: path.clone(),
            url: redacted(url),
            message,
        };
        if !path.join("HEAD").exists() {
            std::fs::create_dir_all(state_dir).map_err(|e| create_err(e.to_string()))?;
            gix::init_bare(&path).map_err(|e| create_err(e.to_string()))?;
        }
        Ok(Self {
            url: url.to_string(),
            path,
            auth: GitAuth::default(),
        })
    }

    /// This mirror, fetched with `auth`.
    pub fn with_auth(self, auth: GitAuth) -> Self {
        Self { auth, ..self }
    }

    /// Fetches `branch` from the URL into `refs/heads/<branch>` of the mirror, force-updating
    /// it so that a rewritten history is followed, and the approval tags
    /// (`refs/tags/gitfleet/approve/*`) with it. Blocking: network and disk.
    pub fn fetch(&self, branch: &str, interrupt: &AtomicBool) -> Result<Fetched, FollowError> {
        let err = |message: String| FollowError::Fetch {
            url: redacted(&self.url),
            branch: branch.to_string(),
            message,
        };
        // The ssh command is configuration of this open repository only (an API override, not
        // written to the mirror's config file).
        let ssh = format!("core.sshCommand={}", self.auth.ssh.command());
        let options = gix::open::Options::default().config_overrides([ssh.as_str()]);
        let repo = gix::open_opts(&self.path, options).map_err(|e| FollowError::Open {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let before = super::branch_head(&self.path, branch).ok();
        // https needs a rustls crypto provider; ring is the one this build carries. Installing
        // it twice is refused harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        // Approval tags come with the branch (forced, as the remote has them: a tag accepted
        // once is recorded by the daemon, so moving it later changes nothing).
        let tags = format!("+refs/tags/{APPROVAL_TAGS}*:refs/tags/{APPROVAL_TAGS}*");
        let remote = repo
            .remote_at(self.url.as_str())
            .and_then(|r| {
                r.with_refspecs(
                    [refspec.as_str(), tags.as_str()],
                    gix::remote::Direction::Fetch,
                )
            })
            .map_err(|e| err(chain(&e)))?
            .with_fetch_tags(gix::remote::fetch::Tags::None);
        let mut connection = remote
            .connect(gix::remote::Direction::Fetch)
            .map_err(|e| err(chain(&e)))?;
        if let Some(ca) = &self.auth.ca_file {
            let options = self.http_options(&repo, ca).map_err(err)?;
            connection.set_transport_options(options);
        }
        if let Some(http) = self.auth.http.clone() {
            // Given to gix when the server asks (401), in-process: never the URL, never a
            // credential helper's command line. Any other request (store, erase) is ignored.
            connection.set_credentials(move |action| match action {
                gix::credentials::helper::Action::Get(ctx) => {
                    Ok(Some(gix::credentials::protocol::Outcome {
                        identity: gix::sec::identity::Account {
                            username: http.username.clone(),
                            password: http.password.clone(),
                            oauth_refresh_token: None,
                        },
                        next: ctx.into(),
                    }))
                }
                _ => Ok(None),
            });
        }
        let outcome = connection
            .prepare_fetch(gix::progress::Discard, Default::default())
            .and_then(|p| p.receive(gix::progress::Discard, interrupt))
            .map_err(|e| err(chain(&e)))?;
        let local = format!("refs/heads/{branch}");
        let has_branch = outcome
            .ref_map
            .mappings
            .iter()
            .any(|m| m.local.as_ref().is_some_and(|l| *l == local.as_str()));
        if !has_branch {
            return Err(err("the remote has no such branch".to_string()));
        }
        // The remote's approval tags, as the mirror names them: any other approval tag in the
        // mirror was deleted on the remote (gix fetches without pruning).
        let remote_tags: std::collections::HashSet<String> = outcome
            .ref_map
            .mappings
            .iter()
            .filter_map(|m| m.local.as_ref().map(|l| l.to_string()))
            .filter(|l| l.starts_with(&format!("refs/tags/{APPROVAL_TAGS}")))
            .collect();
        prune_approval_tags(&repo, &remote_tags).map_err(err)?;
        let after = super::branch_head(&self.path, branch)?;
        Ok(Fetched { before, after })
    }
}

impl Mirror {
    /// gix's HTTP options for this URL (from git configuration, as gix would use them) with
    /// the certificates of `ca` added to the trusted roots of its reqwest client.
    fn http_options(
        &self,
        repo: &gix::Repository,
        ca: &Path,
    ) -> Result<Box<dyn std::any::Any>, String> {
        use gix::protocol::transport::client::blocking_io::http;
        let pem = std::fs::read(ca).map_err(|e| format!("--git-ca-file {}: {e}", ca.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("--git-ca-file {}: {e}", ca.display()))?;
        let mut options = repo
            .transport_options(self.url.as_str(), None)
            .map_err(|e| chain(&e))?
            .and_then(|o| o.downcast::<http::Options>().ok())
            .map(|o| *o)
            .unwrap_or_default();
        let backend = http::reqwest::Options {
            configure_client: Some(Box::new(move |builder| {
                Ok(builder.tls_certs_merge(certs.clone()))
            })),
            configure_request: None,
        };
        options.backend = Some(std::sync::Arc::new(std::sync::Mutex::new(backend)));
        Ok(Box::new(options))
    }
}

/// Deletes the mirror's approval tags that are not in `keep` (full ref names), as `git fetch
/// --prune` would: a tag deleted on the remote must not approve a request the mirror still
/// knows. An approval already accepted is recorded in the daemon's state, so pruning its tag
/// revokes nothing.
fn prune_approval_tags(
    repo: &gix::Repository,
    keep: &std::collections::HashSet<String>,
) -> Result<(), String> {
    use gix::refs::transaction::{Change, PreviousValue, RefEdit, RefLog};
    let prefix = format!("refs/tags/{APPROVAL_TAGS}");
    let platform = repo.references().map_err(|e| chain(&e))?;
    let mut edits = Vec::new();
    for r in platform.prefixed(prefix.as_str()).map_err(|e| chain(&e))? {
        let r = r.map_err(|e| e.to_string())?;
        if !keep.contains(&r.name().as_bstr().to_string()) {
            edits.push(RefEdit {
                change: Change::Delete {
                    expected: PreviousValue::Any,
                    log: RefLog::AndReference,
                },
                name: r.name().to_owned(),
                deref: false,
            });
        }
    }
    if edits.is_empty() {
        return Ok(());
    }
    for e in &edits {
        tracing::info!(tag = %e.name.as_bstr(), "approval tag deleted on the remote: removed from the mirror");
    }
    repo.edit_references_as(edits, None)
        .map(|_| ())
        .map_err(|e| {
            format!(
                "cannot prune approval tags deleted on the remote: {}",
                chain(&e)
            )
        })
}

/// An error and its causes on one line, each said once.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(e) = next {
        let part = e.to_string();
        if !parts.contains(&part) {
            parts.push(part);
        }
        next = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths_are_told_apart() {
        let remote = |s: &str| Location::Remote(s.to_string());
        let local = |s: &str| Location::Local(PathBuf::from(s));
        for (input, want) in [
            (
                "file:///srv/git/fleet.git",
                remote("file:///srv/git/fleet.git"),
            ),
            (
                "https://example.com/org/fleet.git",
                remote("https://example.com/org/fleet.git"),
            ),
            (
                "http://127.0.0.1:8080/fleet",
                remote("http://127.0.0.1:8080/fleet"),
            ),
            (
                "ssh://git@example.com:2222/org/fleet.git",
                remote("ssh://git@example.com:2222/org/fleet.git"),
            ),
            (
                "git@github.com:org/fleet.git",
                remote("git@github.com:org/fleet.git"),
            ),
            ("example.com:fleet.git", remote("example.com:fleet.git")),
            ("/srv/git/fleet", local("/srv/git/fleet")),
            ("fleet", local("fleet")),
            ("./fleet", local("./fleet")),
            ("../a:b", local("../a:b")),
            ("dir/with:colon", local("dir/with:colon")),
            ("C:/fleet", local("C:/fleet")),
            (".", local(".")),
        ] {
            assert_eq!(Location::parse(input).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn passwords_are_masked_in_what_is_shown() {
        for (url, shown) in [
            (
                "https://bot:s3cret@example.com/fleet.git",
                "https://bot:***@example.com/fleet.git",
            ),
            (
                "https://bot@example.com/fleet.git",
                "https://bot@example.com/fleet.git",
            ),
            (
                "ssh://git@example.com/fleet.git",
                "ssh://git@example.com/fleet.git",
            ),
            ("https://example.com/a@b", "https://example.com/a@b"),
            (
                "git@github.com:org/fleet.git",
                "git@github.com:org/fleet.git",
            ),
            ("file:///srv/fleet.git", "file:///srv/fleet.git"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }

    #[test]
    fn a_fetch_brings_the_approval_tags_with_the_branch() {
        let git = crate::follow::tests::git;
        let src = tempfile::tempdir().unwrap();
        git(src.path(), &["init", "-q", "-b", "main"]);
        git(src.path(), &["commit", "-q", "--allow-empty", "-m", "one"]);
        git(
            src.path(),
            &[
                "tag",
                "-a",
                "-m",
                "ok",
                "gitfleet/approve/ns/run-before-prod",
            ],
        );
        git(src.path(), &["tag", "-a", "-m", "other", "v1"]);
        let state = tempfile::tempdir().unwrap();
        let url = format!("file://{}", src.path().display());
        let mirror = Mirror::open(&url, state.path()).unwrap();
        mirror.fetch("main", &AtomicBool::new(false)).unwrap();
        let tags = git(&mirror.path, &["tag", "-l"]);
        assert_eq!(
            tags, "gitfleet/approve/ns/run-before-prod",
            "only approval tags are fetched"
        );
        // Moved and deleted on the remote: the mirror follows (a fetch without pruning kept
        // deleted tags, which could still approve a pending request).
        git(src.path(), &["commit", "-q", "--allow-empty", "-m", "two"]);
        git(
            src.path(),
            &[
                "tag",
                "-f",
                "-a",
                "-m",
                "moved",
                "gitfleet/approve/ns/run-before-prod",
            ],
        );
        git(
            src.path(),
            &["tag", "-a", "-m", "gone", "gitfleet/approve/run-after-a"],
        );
        mirror.fetch("main", &AtomicBool::new(false)).unwrap();
        let peeled =
            |repo: &Path, tag: &str| git(repo, &["rev-parse", &format!("{tag}^{{commit}}")]);
        assert_eq!(
            peeled(&mirror.path, "gitfleet/approve/ns/run-before-prod"),
            peeled(src.path(), "main"),
            "a moved tag is moved in the mirror"
        );
        assert_eq!(git(&mirror.path, &["tag", "-l"]).lines().count(), 2);
        git(src.path(), &["tag", "-d", "gitfleet/approve/run-after-a"]);
        mirror.fetch("main", &AtomicBool::new(false)).unwrap();
        assert_eq!(
            git(&mirror.path, &["tag", "-l"]),
            "gitfleet/approve/ns/run-before-prod",
            "a tag deleted on the remote is deleted in the mirror"
        );
        let e = mirror
            .fetch("release", &AtomicBool::new(false))
            .unwrap_err();
        assert!(e.to_string().contains("no such branch"), "{e}");
    }

    /// gix runs the ssh command with the key and the known_hosts file given, strict host key
    /// checking and no prompt; a stand-in for ssh records its arguments (and a path with a
    /// space in it checks the quoting).
    #[test]
    fn ssh_remotes_run_ssh_with_the_key_and_strict_host_key_checking() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("argv");
        let fake = dir.path().join("fake ssh");
        // Written by sh, not by this process: a child another test thread forks meanwhile would
        // inherit a write descriptor until it execs, and running the script then fails with
        // "Text file busy".
        let script = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >> '{}'\nexit 255\n",
            record.display()
        );
        let written = std::process::Command::new("sh")
            .args([
                "-c",
                "printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\"",
                "sh",
            ])
            .arg(&script)
            .arg(&fake)
            .status()
            .unwrap();
        assert!(written.success());
        let key = dir.path().join("deploy key");
        let hosts = dir.path().join("known_hosts");
        std::fs::write(&key, "not read by gitfleet").unwrap();
        std::fs::write(&hosts, "").unwrap();
        let state = tempfile::tempdir().unwrap();
        let mirror = Mirror::open("ssh://git@example.invalid/org/fleet.git", state.path())
            .unwrap()
            .with_auth(GitAuth {
                ssh: SshAuth {
                    key: Some(key.clone()),
                    known_hosts: Some(hosts.clone()),
                    program: fake.display().to_string(),
                },
                ..GitAuth::default()
            });
        let e = mirror
            .fetch("main", &AtomicBool::new(false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot fetch branch"), "{e}");
        let argv = std::fs::read_to_string(&record).expect("ssh was run");
        let args: Vec<&str> = argv.lines().collect();
        let after = |flag: &str| {
            args.windows(2)
                .filter(|w| w[0] == flag)
                .map(|w| w[1])
                .collect::<Vec<_>>()
        };
        assert!(after("-i").contains(&key.to_str().unwrap()), "{args:?}");
        let options = after("-o");
        for want in [
            "StrictHostKeyChecking=yes",
            "BatchMode=yes",
            "IdentitiesOnly=yes",
            &format!("UserKnownHostsFile={}", hosts.display()),
        ] {
            assert!(options.contains(&want), "{want}: {args:?}");
        }
        assert!(!argv.contains("accept-new"), "{args:?}");
        assert!(argv.contains("example.invalid"), "{args:?}");
    }

    #[test]
    fn secrets_are_not_in_debug_output_and_empty_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "tok-SECRET\n").unwrap();
        let auth = HttpAuth::from_file("bot", &file).unwrap();
        assert_eq!(auth.password, "tok-SECRET", "the newline is not part of it");
        assert!(!format!("{auth:?}").contains("SECRET"));
        std::fs::write(&file, " \n").unwrap();
        let e = HttpAuth::from_file("bot", &file).unwrap_err().to_string();
        assert!(e.contains("empty") && e.contains("token"), "{e}");
    }

    #[test]
    fn unknown_schemes_are_refused_by_name() {
        let e = Location::parse("ftp://example.com/fleet.git")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ftp://example.com/fleet.git"), "{e}");
        assert!(e.contains("unsupported scheme \"ftp\""), "{e}");
    }

    #[test]
    fn a_password_in_the_url_is_scrubbed_from_error_text() {
        let url = "https://bot:tok3n@git.example.com/fleet.git";
        let text = format!("cannot fetch {url}: auth failed for bot:tok3n (tok3n)");
        let clean = scrubbed(&text, url);
        assert!(!clean.contains("tok3n"), "{clean}");
        assert!(
            clean.contains("https://bot:***@git.example.com/fleet.git"),
            "{clean}"
        );
        assert_eq!(
            scrubbed("no url here", "file:///srv/fleet.git"),
            "no url here"
        );
    }
}
