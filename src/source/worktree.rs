//! How the working tree differs from the commit checked out, in the manifests gitfleet would
//! read: gitfleet reads commits, never files, so a command run beside uncommitted edits says so
//! rather than judge a commit the user did not mean. Compares the bytes of manifest files only
//! (no index, no `.gitignore`), which is enough for a note and needs no `git` binary.

use super::{is_manifest_path, normalise_sub, open, SourceError};
use std::collections::BTreeMap;
use std::path::Path;

/// The manifests under `sub` that differ between the working tree and `commit`, when `commit`
/// is the one checked out (`HEAD`); empty otherwise, or for a bare repository. Paths are
/// repository-relative, sorted; at most `limit` files of the working tree are looked at.
pub fn uncommitted_manifests(
    repo_path: &Path,
    sub: &str,
    commit: &str,
    limit: usize,
) -> Result<Vec<String>, SourceError> {
    let repo = open(repo_path)?;
    let Some(workdir) = repo.workdir().map(Path::to_path_buf) else {
        return Ok(Vec::new());
    };
    let head = match repo.head_id() {
        Ok(id) => id.to_string(),
        Err(_) => return Ok(Vec::new()),
    };
    if head != commit {
        return Ok(Vec::new());
    }
    let read_err = |e: &dyn std::fmt::Display| SourceError::Read {
        what: "the tree".into(),
        commit: commit.to_string(),
        message: e.to_string(),
    };
    let tree = repo
        .head_commit()
        .map_err(|e| read_err(&e))?
        .tree()
        .map_err(|e| read_err(&e))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| read_err(&e))?;
    let sub = normalise_sub(sub);
    let under = |p: &str| sub.is_empty() || p == sub || p.starts_with(&format!("{sub}/"));
    let committed: BTreeMap<String, gix::ObjectId> = recorder
        .records
        .iter()
        .filter(|r| r.mode.is_blob())
        .map(|r| (r.filepath.to_string(), r.oid))
        .filter(|(p, _)| under(p) && is_manifest_path(p))
        .collect();
    let mut on_disk = Vec::new();
    walk(&workdir, &workdir.join(&sub), limit, &mut on_disk);
    let mut changed = Vec::new();
    for path in &on_disk {
        let Ok(bytes) = std::fs::read(workdir.join(path)) else {
            continue;
        };
        let same = committed.get(path).is_some_and(|oid| {
            repo.find_object(*oid)
                .map(|o| o.data == bytes)
                .unwrap_or(false)
        });
        if !same {
            changed.push(path.clone());
        }
    }
    // A walk cut short by `limit` cannot tell a deleted file from one not reached.
    let complete = on_disk.len() < limit;
    let on_disk: std::collections::BTreeSet<&String> = on_disk.iter().collect();
    changed.extend(
        committed
            .keys()
            .filter(|p| complete && !on_disk.contains(p))
            .cloned(),
    );
    changed.sort();
    Ok(changed)
}

/// The manifest files under `dir`, repository-relative, skipping hidden folders (`.git`
/// among them) as reading a commit does.
fn walk(root: &Path, dir: &Path, limit: usize, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= limit {
            return;
        }
        let path = entry.path();
        let name = entry.file_name();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !name.to_string_lossy().starts_with('.') {
                walk(root, &path, limit, out);
            }
        } else if kind.is_file() {
            let Ok(relative) = path.strip_prefix(root) else {
                continue;
            };
            let relative = relative.to_string_lossy().replace('\\', "/");
            if is_manifest_path(&relative) {
                out.push(relative);
            }
        }
    }
}
