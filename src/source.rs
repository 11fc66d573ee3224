//! Reading one commit of a fleet repository with gix: resolve a revision, walk its tree under a
//! path, and return the manifest files (spec/README §1). The working tree is never read, so
//! uncommitted edits are invisible.

use crate::catalog::SourceFile;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("the git repository {path} has no commits yet: commit the fleet's manifests first")]
    NoCommits { path: PathBuf },
    #[error("cannot open git repository {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("cannot resolve revision {rev:?} in {path}: {message}")]
    Revision {
        path: PathBuf,
        rev: String,
        message: String,
    },
    #[error("revision {rev:?} does not point at a commit: {message}")]
    NotACommit { rev: String, message: String },
    #[error("path {sub:?} does not exist in commit {commit} (or is not a folder)")]
    PathNotFound { sub: String, commit: String },
    #[error("cannot read {what} of commit {commit}: {message}")]
    Read {
        what: String,
        commit: String,
        message: String,
    },
}

/// One commit's manifests.
#[derive(Debug, Clone)]
pub struct CommitFiles {
    /// Full hex id of the commit.
    pub commit: String,
    /// Its message (trailers such as `Gitfleet-Allow-Deletions` are read from it).
    pub message: String,
    pub files: Vec<SourceFile>,
    /// Entries with a manifest's name that are not regular files, so not read.
    pub skipped: Vec<Skipped>,
}

/// A tree entry named like a manifest (`*.yaml`, `*.yml`, `*.json`) that gitfleet does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub path: String,
    pub kind: SkippedKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkippedKind {
    /// A symbolic link: its target is not followed (it may point outside the commit).
    Symlink,
    /// A submodule: another repository's commit, not part of this one.
    Submodule,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            SkippedKind::Symlink => {
                "a symbolic link (gitfleet reads regular files only and does not follow links)"
            }
            SkippedKind::Submodule => "a submodule (gitfleet reads only this repository's files)",
        };
        write!(f, "skipped {}: {what}", self.path)
    }
}

/// Is `path` (relative to the repository root) a manifest gitfleet reads?
pub fn is_manifest_path(path: &str) -> bool {
    let hidden = path
        .split('/')
        .rev()
        .skip(1)
        .any(|dir| dir.starts_with('.'));
    let ext_ok = [".yaml", ".yml", ".json"].iter().any(|e| path.ends_with(e));
    ext_ok && !hidden
}

/// Normalises `--path` (`./apps/`, `apps`, `/`) to a prefix without slashes at either end.
fn normalise_sub(sub: &str) -> String {
    sub.trim_start_matches("./").trim_matches('/').to_string()
}

/// Reads every manifest file of commit `rev` below folder `sub` ("" for the whole tree).
pub fn read_commit(repo_path: &Path, rev: &str, sub: &str) -> Result<CommitFiles, SourceError> {
    let repo = gix::open(repo_path).map_err(|e| SourceError::Open {
        path: repo_path.to_path_buf(),
        message: e.to_string(),
    })?;
    // An unborn HEAD (a fresh `git init`) has nothing to resolve; say so rather than a rev-spec
    // error.
    if repo.head_id().is_err() && matches!(repo.head(), Ok(head) if head.is_unborn()) {
        return Err(SourceError::NoCommits {
            path: repo_path.to_path_buf(),
        });
    }
    let id = repo
        .rev_parse_single(rev)
        .map_err(|e| SourceError::Revision {
            path: repo_path.to_path_buf(),
            rev: rev.to_string(),
            message: e.to_string(),
        })?;
    let not_a_commit = |e: &dyn std::fmt::Display| SourceError::NotACommit {
        rev: rev.to_string(),
        message: e.to_string(),
    };
    let object = id.object().map_err(|e| not_a_commit(&e))?;
    let commit = object.peel_to_commit().map_err(|e| not_a_commit(&e))?;
    let commit_id = commit.id.to_string();
    let message = commit
        .message_raw()
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .unwrap_or_default();
    let read_err = |what: &str, e: &dyn std::fmt::Display| SourceError::Read {
        what: what.to_string(),
        commit: commit_id.clone(),
        message: e.to_string(),
    };
    let tree = commit.tree().map_err(|e| read_err("the tree", &e))?;
    let sub = normalise_sub(sub);
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| read_err("the tree", &e))?;
    let prefix = if sub.is_empty() {
        String::new()
    } else {
        format!("{sub}/")
    };
    let sub_exists = sub.is_empty()
        || recorder
            .records
            .iter()
            .any(|r| r.mode.is_tree() && r.filepath == sub.as_str());
    if !sub_exists {
        return Err(SourceError::PathNotFound {
            sub,
            commit: commit_id,
        });
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for entry in &recorder.records {
        if entry.mode.is_tree() {
            continue;
        }
        let path = entry.filepath.to_string();
        let Some(relative) = path.strip_prefix(&prefix) else {
            continue;
        };
        if !is_manifest_path(relative) {
            continue;
        }
        if !entry.mode.is_blob() {
            let kind = if entry.mode.is_link() {
                SkippedKind::Symlink
            } else {
                SkippedKind::Submodule
            };
            skipped.push(Skipped { path, kind });
            continue;
        }
        let object = repo
            .find_object(entry.oid)
            .map_err(|e| read_err(&format!("file {path}"), &e))?;
        files.push(SourceFile {
            path,
            content: object.data.clone(),
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(CommitFiles {
        commit: commit_id,
        message,
        files,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_paths() {
        for (p, want) in [
            ("a.yaml", true),
            ("dir/b.yml", true),
            ("c.json", true),
            ("README.md", false),
            (".github/workflows/ci.yaml", false),
            ("apps/.hidden/x.yaml", false),
            ("apps/.x.yaml", true),
        ] {
            assert_eq!(is_manifest_path(p), want, "{p}");
        }
    }

    #[test]
    fn sub_paths_are_normalised() {
        assert_eq!(normalise_sub("./apps/"), "apps");
        assert_eq!(normalise_sub("/"), "");
        assert_eq!(normalise_sub("a/b"), "a/b");
    }
}
