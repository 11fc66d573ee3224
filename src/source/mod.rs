//! Reading one commit of a fleet repository with gix: resolve a revision, walk its tree under a
//! path, and return the manifest files (docs/guides/repository-layout.md). The working tree is never read, so
//! uncommitted edits are invisible. Files a `.gitfleetignore` at the path's root names are left
//! out ([`ignore`]); Kustomize folders and Helm releases, charts and values files are set aside
//! for [`crate::sources`] to render, Helm templates outside a chart get one diagnostic each
//! ([`crate::catalog::unrendered`]). Commands read commits through [`crate::sources`], which
//! decrypts what needs it.

pub mod ignore;
pub mod worktree;

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
    /// Problems found before the catalog reads the files, whose files are not in `files`: one
    /// per Helm templates folder outside a chart, one per SOPS file that cannot be decrypted,
    /// kustomization that cannot be built, or Helm release that cannot be rendered
    /// ([`crate::sources`]).
    pub problems: Vec<crate::catalog::Diagnostic>,
    /// The Kustomize folders, whose files are not in `files`: [`crate::sources`] builds them.
    pub kustomizations: Vec<crate::sources::kustomize::Kustomization>,
    /// The Helm releases, charts and values files, whose files are not in `files`:
    /// [`crate::sources`] renders the releases.
    pub helm: Vec<crate::sources::helm::Found>,
    /// The commit's whole tree, by path, when a tool renders some of its folders (so the
    /// renderers need not walk it again); `None` otherwise.
    pub tree: Option<crate::sources::kustomize::Tree>,
}

impl CommitFiles {
    /// The commit analysed ([`crate::analyze()`]), with the Kustomize and Helm findings among its
    /// problems: what `validate` prints and what the daemon and `apply` refuse.
    pub fn analyze(&self) -> (crate::catalog::Catalog, Vec<crate::catalog::Diagnostic>) {
        self.analyze_with(None)
    }

    /// [`CommitFiles::analyze`], parsing only the files `cache` has not seen as they are.
    pub fn analyze_cached(
        &self,
        cache: &mut crate::catalog::ParseCache,
    ) -> (crate::catalog::Catalog, Vec<crate::catalog::Diagnostic>) {
        self.analyze_with(Some(cache))
    }

    fn analyze_with(
        &self,
        cache: Option<&mut crate::catalog::ParseCache>,
    ) -> (crate::catalog::Catalog, Vec<crate::catalog::Diagnostic>) {
        let (cat, mut diags) = match cache {
            Some(c) => crate::analyze::analyze_cached(&self.files, c),
            None => crate::analyze(&self.files),
        };
        if !self.problems.is_empty() {
            diags.extend(self.problems.iter().cloned());
            diags.sort();
        }
        (cat, diags)
    }
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

/// The full id of the commit `rev` names in `repo_path` (`HEAD`, a branch, a tag, a prefix).
pub fn resolve_commit(repo_path: &Path, rev: &str) -> Result<String, SourceError> {
    let repo = open(repo_path)?;
    let id = commit_of(&repo, repo_path, rev)?.id.to_string();
    Ok(id)
}

fn open(repo_path: &Path) -> Result<gix::Repository, SourceError> {
    gix::open(repo_path).map_err(|e| SourceError::Open {
        path: repo_path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The commit `rev` names (a tag peeled to its commit).
fn commit_of<'r>(
    repo: &'r gix::Repository,
    repo_path: &Path,
    rev: &str,
) -> Result<gix::Commit<'r>, SourceError> {
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
    object.peel_to_commit().map_err(|e| not_a_commit(&e))
}

/// Reads every manifest file of commit `rev` below folder `sub` ("" for the whole tree).
pub fn read_commit(repo_path: &Path, rev: &str, sub: &str) -> Result<CommitFiles, SourceError> {
    read_commit_cached(repo_path, rev, sub, &mut BlobCache::default())
}

/// The contents of the manifest files last read, by blob id: the daemon reads every new
/// commit whole, and inflating every unchanged file again would dominate a one-file
/// commit's work. It holds the files of the last commit read only.
#[derive(Debug, Default)]
pub struct BlobCache {
    blobs: std::collections::HashMap<gix::ObjectId, Vec<u8>>,
}

/// [`read_commit`], taking the files `blobs` holds from it, and leaving it holding this
/// commit's.
pub fn read_commit_cached(
    repo_path: &Path,
    rev: &str,
    sub: &str,
    blobs: &mut BlobCache,
) -> Result<CommitFiles, SourceError> {
    let repo = open(repo_path)?;
    // An unborn HEAD (a fresh `git init`) has nothing to resolve; say so rather than a rev-spec
    // error.
    if repo.head_id().is_err() && matches!(repo.head(), Ok(head) if head.is_unborn()) {
        return Err(SourceError::NoCommits {
            path: repo_path.to_path_buf(),
        });
    }
    let commit = commit_of(&repo, repo_path, rev)?;
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
    // `.gitfleetignore` at the path's root, from the commit.
    let ignore_path = format!("{prefix}{}", ignore::FILE_NAME);
    let fleet_ignore = match recorder
        .records
        .iter()
        .find(|r| r.mode.is_blob() && r.filepath == ignore_path.as_str())
    {
        Some(entry) => {
            let object = repo
                .find_object(entry.oid)
                .map_err(|e| read_err(&format!("file {ignore_path}"), &e))?;
            ignore::FleetIgnore::parse(&object.data)
        }
        None => ignore::FleetIgnore::default(),
    };
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    // Kustomize also takes a `Kustomization` file without an extension as its marker.
    let mut others = Vec::new();
    let mut kept = std::collections::HashMap::new();
    for entry in &recorder.records {
        if entry.mode.is_tree() {
            continue;
        }
        let path = entry.filepath.to_string();
        let Some(relative) = path.strip_prefix(&prefix) else {
            continue;
        };
        if fleet_ignore.excludes(relative) {
            continue;
        }
        if !is_manifest_path(relative) {
            let kustomization = relative.rsplit('/').next() == Some("Kustomization");
            if entry.mode.is_blob()
                && kustomization
                && is_manifest_path(&format!("{relative}.yaml"))
            {
                others.push(relative.to_string());
            }
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
        let content = match blobs.blobs.get(&entry.oid) {
            Some(content) => content.clone(),
            None => {
                let object = repo
                    .find_object(entry.oid)
                    .map_err(|e| read_err(&format!("file {path}"), &e))?;
                object.detach().data
            }
        };
        kept.insert(entry.oid, content.clone());
        files.push(SourceFile { path, content });
    }
    blobs.blobs = kept;
    let SetAside {
        mut files,
        problems,
        kustomizations,
        helm,
    } = set_aside_unrendered(files, &others, &prefix);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let rendered = !kustomizations.is_empty() || !helm.is_empty();
    let tree = rendered.then(|| tree_of(tree.id, &recorder.records));
    Ok(CommitFiles {
        commit: commit_id,
        message,
        files,
        skipped,
        problems,
        kustomizations,
        helm,
        tree,
    })
}

/// Every entry of a commit's tree by repository path, as the renderers read it.
fn tree_of(
    root: gix::ObjectId,
    records: &[gix::traverse::tree::recorder::Entry],
) -> crate::sources::kustomize::Tree {
    use crate::sources::kustomize::EntryKind;
    let mut tree = crate::sources::kustomize::Tree {
        root: root.to_string(),
        ..Default::default()
    };
    for r in records {
        let kind = if r.mode.is_tree() {
            EntryKind::Tree
        } else if r.mode.is_link() {
            EntryKind::Link
        } else if r.mode.is_commit() {
            EntryKind::Commit
        } else {
            EntryKind::Blob
        };
        tree.entries
            .insert(r.filepath.to_string(), (kind, r.oid.to_string()));
    }
    tree
}

/// A commit's files once those a tool renders are set aside.
struct SetAside {
    files: Vec<SourceFile>,
    problems: Vec<crate::catalog::Diagnostic>,
    kustomizations: Vec<crate::sources::kustomize::Kustomization>,
    helm: Vec<crate::sources::helm::Found>,
}

/// Takes the files of Kustomize folders and Helm folders out of `files`: the Kustomize folders
/// and Helm findings to render, one diagnostic for each Helm templates folder outside a chart.
/// `others` are the kept files that are not manifests (path-relative).
fn set_aside_unrendered(files: Vec<SourceFile>, others: &[String], prefix: &str) -> SetAside {
    use crate::catalog::unrendered;
    use crate::sources::helm::Found;
    let relative = |f: &SourceFile| f.path[prefix.len()..].to_string();
    let contents: std::collections::HashMap<String, &[u8]> = files
        .iter()
        .map(|f| (relative(f), f.content.as_slice()))
        .collect();
    let paths: Vec<&str> = contents
        .keys()
        .map(String::as_str)
        .chain(others.iter().map(String::as_str))
        .collect();
    let found = unrendered::find(&paths, |p| contents.get(p).copied());
    if found.is_empty() {
        return SetAside {
            files,
            problems: Vec::new(),
            kustomizations: Vec::new(),
            helm: Vec::new(),
        };
    }
    let folder = |u: &unrendered::Unrendered| {
        format!("{prefix}{}", u.folder)
            .trim_end_matches('/')
            .to_string()
    };
    let mut problems = Vec::new();
    let mut kustomizations = Vec::new();
    let mut helm = Vec::new();
    for u in &found {
        match u.tool {
            unrendered::Tool::Kustomize => {
                kustomizations.push(crate::sources::kustomize::Kustomization {
                    folder: folder(u),
                    file: format!("{prefix}{}", u.marker),
                })
            }
            unrendered::Tool::HelmRelease => helm.push(Found::Release {
                folder: folder(u),
                file: format!("{prefix}{}", u.marker),
            }),
            unrendered::Tool::HelmChart => helm.push(Found::Chart {
                folder: folder(u),
                unused: u.diagnostic(prefix),
            }),
            unrendered::Tool::HelmValues => helm.push(Found::Values {
                file: folder(u),
                unused: u.diagnostic(prefix),
            }),
            unrendered::Tool::HelmTemplates => problems.push(u.diagnostic(prefix)),
        }
    }
    let covered = unrendered::Covered::of(&found);
    let kept = files
        .into_iter()
        .filter(|f| !covered.covers(&f.path[prefix.len()..]))
        .collect();
    SetAside {
        files: kept,
        problems,
        kustomizations,
        helm,
    }
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

    /// Reading commits through one blob cache gives what reading each alone gives: a changed
    /// file, a removed one, a new one with an unchanged file's bytes, and one brought back.
    #[test]
    fn a_cached_read_reads_what_a_fresh_read_reads() {
        use crate::follow::tests::git;
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "-b", "main"]);
        let write = |path: &str, text: &str| {
            let file = repo.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        };
        let commit = |msg: &str| {
            git(repo, &["add", "-A"]);
            git(repo, &["commit", "-q", "--allow-empty", "-m", msg]);
            git(repo, &["rev-parse", "HEAD"])
        };
        write("a.yaml", "kind: A\n");
        write("b/b.yaml", "kind: B\n");
        let first = commit("one");
        write("a.yaml", "kind: A2\n");
        std::fs::remove_file(repo.join("b/b.yaml")).unwrap();
        write("c.yaml", "kind: B\n");
        let second = commit("two");
        write("b/b.yaml", "kind: B\n");
        let third = commit("three");
        let contents = |files: &CommitFiles| -> Vec<(String, String)> {
            files
                .files
                .iter()
                .map(|f| {
                    (
                        f.path.clone(),
                        String::from_utf8(f.content.clone()).unwrap(),
                    )
                })
                .collect()
        };
        let mut cache = BlobCache::default();
        for rev in [&first, &second, &third, &first] {
            let cached = read_commit_cached(repo, rev, "", &mut cache).unwrap();
            let fresh = read_commit(repo, rev, "").unwrap();
            assert_eq!(contents(&cached), contents(&fresh), "{rev}");
            let distinct: std::collections::BTreeSet<&Vec<u8>> =
                fresh.files.iter().map(|f| &f.content).collect();
            assert_eq!(
                cache.blobs.len(),
                distinct.len(),
                "only this commit's blobs kept"
            );
        }
        assert_eq!(
            contents(&read_commit_cached(repo, &second, "", &mut cache).unwrap()),
            [
                ("a.yaml".to_string(), "kind: A2\n".to_string()),
                ("c.yaml".to_string(), "kind: B\n".to_string()),
            ]
        );
    }

    #[test]
    fn sub_paths_are_normalised() {
        assert_eq!(normalise_sub("./apps/"), "apps");
        assert_eq!(normalise_sub("/"), "");
        assert_eq!(normalise_sub("a/b"), "a/b");
    }
}
