//! Following a branch: where its head is, whether a new head descends from the old one (a
//! force-push does not), a watcher that wakes the daemon when a local repository's refs change,
//! and (in [`remote`]) a mirror of a remote repository fetched with gix. [`Follower`] puts them
//! together for the daemon. Bursts of ref updates are coalesced: the caller reads the head once
//! per wake-up, so it only ever sees the newest commit.

pub mod remote;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("cannot open git repository {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("{path}: branch {branch:?}: {message}")]
    Branch {
        path: PathBuf,
        branch: String,
        message: String,
    },
    #[error("{path}: cannot walk the history of {commit}: {message}")]
    History {
        path: PathBuf,
        commit: String,
        message: String,
    },
    #[error("cannot watch {path}: {message}")]
    Watch { path: PathBuf, message: String },
    #[error("--repo {url}: {message}")]
    Url { url: String, message: String },
    #[error("cannot create the mirror {path} of {url}: {message}")]
    Mirror {
        path: PathBuf,
        url: String,
        message: String,
    },
    #[error("git credentials {path}: {message}")]
    Credentials { path: PathBuf, message: String },
    #[error("cannot fetch branch {branch:?} from {url}: {message}")]
    Fetch {
        url: String,
        branch: String,
        message: String,
    },
}

fn open(repo: &Path) -> Result<gix::Repository, FollowError> {
    gix::open(repo).map_err(|e| FollowError::Open {
        path: repo.to_path_buf(),
        message: e.to_string(),
    })
}

/// The commit `refs/heads/<branch>` points at, as full hex.
pub fn branch_head(repo: &Path, branch: &str) -> Result<String, FollowError> {
    head_in(&open(repo)?, repo, branch)
}

/// [`branch_head`] in an opened repository (`path` names it in errors).
fn head_in(r: &gix::Repository, path: &Path, branch: &str) -> Result<String, FollowError> {
    let err = |message: String| FollowError::Branch {
        path: path.to_path_buf(),
        branch: branch.to_string(),
        message,
    };
    let mut reference = r
        .find_reference(&format!("refs/heads/{branch}"))
        .map_err(|e| err(e.to_string()))?;
    let id = reference
        .peel_to_id()
        .map_err(|e| err(format!("does not point at an object: {e}")))?;
    Ok(id.to_string())
}

/// Does `new` have `old` in its history (a fast-forward)? `false` means the branch was rewritten
/// (force-push), which the daemon follows and logs.
pub fn descends_from(repo: &Path, old: &str, new: &str) -> Result<bool, FollowError> {
    if old == new {
        return Ok(true);
    }
    descends_in(&open(repo)?, repo, old, new)
}

/// [`descends_from`] in an opened repository (`path` names it in errors).
fn descends_in(
    r: &gix::Repository,
    path: &Path,
    old: &str,
    new: &str,
) -> Result<bool, FollowError> {
    let history = |commit: &str, message: String| FollowError::History {
        path: path.to_path_buf(),
        commit: commit.to_string(),
        message,
    };
    let parse = |hex: &str| {
        gix::ObjectId::from_hex(hex.as_bytes()).map_err(|e| history(hex, e.to_string()))
    };
    let (old_id, new_id) = (parse(old)?, parse(new)?);
    if r.find_object(old_id).is_err() {
        // The old head is gone from the repository (rewritten and collected): not an ancestor.
        return Ok(false);
    }
    let walk = r
        .rev_walk([new_id])
        .all()
        .map_err(|e| history(new, e.to_string()))?;
    for info in walk {
        let info = info.map_err(|e| history(new, e.to_string()))?;
        if info.id == old_id {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Wakes up when anything under the repository's refs changes (a push, a commit, a fetch, a
/// packed-refs rewrite). Dropping it stops watching.
pub struct RefWatcher {
    _watcher: notify::RecommendedWatcher,
    rx: tokio::sync::mpsc::UnboundedReceiver<()>,
}

impl RefWatcher {
    /// Watches the git directory of `repo` (`.git` of a work tree, or a bare repository).
    pub fn new(repo: &Path) -> Result<Self, FollowError> {
        let git_dir = open(repo)?.git_dir().to_path_buf();
        let watch_err = |e: notify::Error| FollowError::Watch {
            path: git_dir.clone(),
            message: e.to_string(),
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        // Object writes are frequent and never move a branch on their own: only refs matter.
        let relevant: HashSet<&'static str> = ["HEAD", "packed-refs", "FETCH_HEAD"].into();
        let refs_dir = git_dir.join("refs");
        let handler = move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else {
                // A watcher error may hide a change: wake the follower to look.
                let _ = tx.send(());
                return;
            };
            // inotify reports opens and reads too: the daemon's own reads of the refs must
            // not wake it (that made an idle daemon reconcile back to back).
            if matches!(event.kind, notify::EventKind::Access(_)) {
                return;
            }
            let touches_refs = event.paths.iter().any(|p| {
                p.starts_with(&refs_dir)
                    || p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| relevant.contains(n.trim_end_matches(".lock")))
            });
            if touches_refs {
                let _ = tx.send(());
            }
        };
        let mut watcher = notify::recommended_watcher(handler).map_err(watch_err)?;
        watcher
            .watch(&git_dir, RecursiveMode::NonRecursive)
            .map_err(watch_err)?;
        watcher
            .watch(&git_dir.join("refs"), RecursiveMode::Recursive)
            .map_err(watch_err)?;
        Ok(Self {
            _watcher: watcher,
            rx,
        })
    }

    /// Waits for the next change, then swallows the rest of the burst already queued.
    /// Returns `false` when the watcher has stopped.
    pub async fn changed(&mut self) -> bool {
        if self.rx.recv().await.is_none() {
            return false;
        }
        while self.rx.try_recv().is_ok() {}
        true
    }
}

/// How long one fetch may take before it is abandoned (and retried at the next poll), so that a
/// remote that stops answering cannot hang the daemon.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// A look at the branch: its head, and whether the look reached the source (a remote fetched,
/// a local repository read) rather than only the mirror as the last fetch left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub commit: String,
    pub fetched: bool,
}

/// The branch the daemon follows, local or remote: it answers "what is the newest head" and
/// "wait until something may have changed". A remote repository is fetched into its mirror at
/// the first look, when [`Follower::wake`] was called (the webhook), and once every `poll`;
/// looks in between (rollout steps) read the mirror as it is.
pub struct Follower {
    branch: String,
    repo: PathBuf,
    mirror: Option<remote::Mirror>,
    watcher: Option<RefWatcher>,
    poll: Duration,
    fetched_at: Option<Instant>,
    fetch_due: bool,
    last: Option<String>,
    /// The repository, opened at the first look and kept: opening it (its config, its object
    /// database's indices) at every step would be a real cost of the daemon in a rollout.
    /// References are read from disk at each look, and objects a push adds are found (gix
    /// looks again for packs it does not know when an object is missing).
    opened: Option<gix::ThreadSafeRepository>,
}

impl Follower {
    /// Follows `branch` of the local repository `repo`, watching its refs.
    pub fn local(repo: &Path, branch: &str) -> Result<Self, FollowError> {
        Ok(Self::new(
            repo.to_path_buf(),
            None,
            Some(RefWatcher::new(repo)?),
            branch,
            Duration::MAX,
        ))
    }

    /// Follows `branch` of a remote repository through its mirror, fetched every `poll`.
    pub fn remote(mirror: remote::Mirror, branch: &str, poll: Duration) -> Self {
        Self::new(mirror.path.clone(), Some(mirror), None, branch, poll)
    }

    fn new(
        repo: PathBuf,
        mirror: Option<remote::Mirror>,
        watcher: Option<RefWatcher>,
        branch: &str,
        poll: Duration,
    ) -> Self {
        Self {
            branch: branch.to_string(),
            repo,
            mirror,
            watcher,
            poll,
            fetched_at: None,
            fetch_due: true,
            last: None,
            opened: None,
        }
    }

    /// The next look fetches (the webhook said the remote changed).
    pub fn wake(&mut self) {
        self.fetch_due = true;
    }

    /// Fetches when due, then returns the branch's head; a rewritten history is logged. A failed
    /// fetch is returned as the error; [`Follower::current_head`] still reads the mirror. The
    /// git work runs on the blocking pool.
    pub async fn newest_head(&mut self) -> Result<Head, FollowError> {
        let due = self.fetch_due || self.fetched_at.is_none_or(|t| t.elapsed() >= self.poll);
        let mut fetched = self.mirror.is_none();
        if let (Some(mirror), true) = (&self.mirror, due) {
            self.fetch_due = false;
            self.fetched_at = Some(Instant::now());
            let result = fetch(mirror.clone(), self.branch.clone()).await?;
            if let Some(before) = result.before.filter(|b| *b != result.after) {
                tracing::info!(url = %remote::redacted(&mirror.url), old = %before, new = %result.after, "fetched a new head");
                self.last.get_or_insert(before);
            }
            fetched = true;
        }
        Ok(Head {
            commit: self.current_head().await?,
            fetched,
        })
    }

    /// The branch's head as the repository (or mirror) has it now, without fetching; read on
    /// the blocking pool.
    pub async fn current_head(&mut self) -> Result<String, FollowError> {
        let (repo, branch, last) = (self.repo.clone(), self.branch.clone(), self.last.clone());
        let opened = self.opened.clone();
        let (opened, head) = tokio::task::spawn_blocking(move || {
            let opened = match opened {
                Some(r) => r,
                None => open(&repo)?.into_sync(),
            };
            let head = read_head(&opened.to_thread_local(), &repo, &branch, last.as_deref())?;
            Ok::<_, FollowError>((opened, head))
        })
        .await
        .map_err(|e| FollowError::Branch {
            path: self.repo.clone(),
            branch: self.branch.clone(),
            message: format!("the read failed: {e}"),
        })??;
        self.opened = Some(opened);
        self.last = Some(head.clone());
        Ok(head)
    }

    /// Resolves when a local repository's refs change; never for a remote one (the poll and the
    /// webhook wake the daemon instead).
    pub async fn changed(&mut self) {
        let alive = match &mut self.watcher {
            Some(w) => w.changed().await,
            None => false,
        };
        if !alive {
            std::future::pending::<()>().await;
        }
    }
}

/// The branch's head; logs when it does not descend from `last` (a force-push).
fn read_head(
    r: &gix::Repository,
    path: &Path,
    branch: &str,
    last: Option<&str>,
) -> Result<String, FollowError> {
    let head = head_in(r, path, branch)?;
    if let Some(old) = last.filter(|old| *old != head) {
        if !descends_in(r, path, old, &head)? {
            tracing::warn!(old = %old, new = %head, "branch history rewritten (force-push); following the new head");
        }
    }
    Ok(head)
}

/// One fetch, off the async threads, bounded by [`FETCH_TIMEOUT`].
async fn fetch(mirror: remote::Mirror, branch: String) -> Result<remote::Fetched, FollowError> {
    let interrupt = Arc::new(AtomicBool::new(false));
    let stop = interrupt.clone();
    let (url, name) = (remote::redacted(&mirror.url), branch.clone());
    let task = tokio::task::spawn_blocking(move || mirror.fetch(&branch, &interrupt));
    let failed = |message: String| FollowError::Fetch {
        url: url.clone(),
        branch: name.clone(),
        message,
    };
    match tokio::time::timeout(FETCH_TIMEOUT, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(failed(format!("the fetch task failed: {join}"))),
        Err(_) => {
            // Stops a pack transfer in progress; a stuck handshake ends with its connection.
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            Err(failed(format!(
                "no answer within {}s",
                FETCH_TIMEOUT.as_secs()
            )))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::process::Command;

    /// git in `dir` with a fixed identity and no user configuration (shared by the tests of
    /// the daemon and of the remote mirror).
    pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        dir
    }

    fn commit(dir: &Path, msg: &str) -> String {
        git(dir, &["commit", "-q", "--allow-empty", "-m", msg]);
        git(dir, &["rev-parse", "HEAD"])
    }

    #[test]
    fn head_and_fast_forward() {
        let dir = repo();
        let first = commit(dir.path(), "one");
        assert_eq!(branch_head(dir.path(), "main").unwrap(), first);
        let second = commit(dir.path(), "two");
        assert_eq!(branch_head(dir.path(), "main").unwrap(), second);
        assert!(descends_from(dir.path(), &first, &second).unwrap());
        assert!(!descends_from(dir.path(), &second, &first).unwrap());
    }

    #[test]
    fn force_push_is_not_a_descendant() {
        let dir = repo();
        let base = commit(dir.path(), "base");
        let old = commit(dir.path(), "old");
        git(dir.path(), &["reset", "-q", "--hard", &base]);
        let rewritten = commit(dir.path(), "rewritten");
        assert!(!descends_from(dir.path(), &old, &rewritten).unwrap());
        assert!(descends_from(dir.path(), &base, &rewritten).unwrap());
    }

    #[test]
    fn missing_branch_is_a_clear_error() {
        let dir = repo();
        commit(dir.path(), "one");
        let e = branch_head(dir.path(), "release").unwrap_err().to_string();
        assert!(e.contains("branch \"release\""), "{e}");
    }

    /// The follower opens the repository once: what later pushes bring (each push a new pack,
    /// a force-push, a repack with packed refs) must still be read, and walked for the
    /// fast-forward check, through the repository it keeps.
    #[tokio::test]
    async fn a_follower_kept_open_reads_later_pushes_rewrites_and_repacks() {
        let bare = tempfile::tempdir().unwrap();
        git(bare.path(), &["init", "-q", "--bare", "-b", "main"]);
        git(bare.path(), &["config", "receive.unpackLimit", "1"]);
        let work = repo();
        let origin = bare.path().to_str().unwrap();
        git(work.path(), &["remote", "add", "origin", origin]);
        let push = |force: bool| {
            let args: &[&str] = if force {
                &["push", "-q", "--force", "origin", "main"]
            } else {
                &["push", "-q", "origin", "main"]
            };
            git(work.path(), args);
        };
        let one = commit(work.path(), "one");
        push(false);
        let mut follower = Follower::local(bare.path(), "main").unwrap();
        assert_eq!(follower.current_head().await.unwrap(), one);

        let two = commit(work.path(), "two");
        push(false);
        assert_eq!(follower.current_head().await.unwrap(), two);

        git(work.path(), &["reset", "-q", "--hard", &one]);
        let rewritten = commit(work.path(), "rewritten");
        push(true);
        assert_eq!(follower.current_head().await.unwrap(), rewritten);

        git(bare.path(), &["gc", "-q", "--prune=now"]);
        let three = commit(work.path(), "three");
        push(false);
        assert_eq!(follower.current_head().await.unwrap(), three);
        assert!(follower.opened.is_some());
    }

    #[tokio::test]
    async fn reading_the_branch_does_not_wake_the_watcher() {
        let dir = repo();
        commit(dir.path(), "one");
        let mut w = RefWatcher::new(dir.path()).unwrap();
        for _ in 0..5 {
            branch_head(dir.path(), "main").unwrap();
        }
        // Proving an absence needs a bound: inotify delivers within milliseconds, so reads
        // that woke the watcher would show up well inside it.
        let woke = tokio::time::timeout(std::time::Duration::from_millis(500), w.changed()).await;
        assert!(woke.is_err(), "reading the branch woke the watcher");
        commit(dir.path(), "two");
        let woke = tokio::time::timeout(std::time::Duration::from_secs(20), w.changed()).await;
        assert!(woke.is_ok());
    }

    #[tokio::test]
    async fn watcher_wakes_on_a_commit() {
        let dir = repo();
        commit(dir.path(), "one");
        let mut w = RefWatcher::new(dir.path()).unwrap();
        commit(dir.path(), "two");
        let woke = tokio::time::timeout(std::time::Duration::from_secs(20), w.changed())
            .await
            .expect("a commit wakes the watcher");
        assert!(woke);
    }
}
