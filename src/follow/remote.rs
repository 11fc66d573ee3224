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

/// The bare mirror of a remote repository inside the state directory.
#[derive(Debug, Clone)]
pub struct Mirror {
    /// The URL fetched from; shown only through [`redacted`].
    pub url: String,
    /// The mirror's git directory.
    pub path: PathBuf,
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
        })
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
        let repo = gix::open(&self.path).map_err(|e| FollowError::Open {
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
        let outcome = remote
            .connect(gix::remote::Direction::Fetch)
            .and_then(|c| c.prepare_fetch(gix::progress::Discard, Default::default()))
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

    #[test]
    fn unknown_schemes_are_refused_by_name() {
        let e = Location::parse("ftp://example.com/fleet.git")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ftp://example.com/fleet.git"), "{e}");
        assert!(e.contains("unsupported scheme \"ftp\""), "{e}");
    }
}
