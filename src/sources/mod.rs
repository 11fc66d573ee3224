//! What teams write, turned into the files the catalog reads: the one place between reading a
//! commit ([`crate::source`]) and analysing it, so `validate`, `render`, `plan`, `apply` and
//! `run` see the same objects. Files encrypted with SOPS ([`sops`]) are decrypted with keys
//! kept outside the repository ([`Keys`], loaded at the edge by [`keys`]); Kustomize folders
//! are built by the real kustomize ([`kustomize`]) and Helm releases rendered by the real helm
//! ([`helm`]), both through a bounded [`runner`] and a [`cache`] keyed by git tree ids.
//!
//! A SOPS file may hold only Secrets (`v1`): their `data` and `stringData` are what plans mask,
//! and nothing downstream keeps a Secret's values (the state and status hold names and hashes),
//! so a decrypted value never reaches a plan, log, status, metric, the state or the dashboard.
//! A file that cannot be decrypted is left out with one diagnostic naming it, which makes the
//! commit invalid (never served), as any other problem of the commit.

pub mod cache;
pub mod cached_tool;
pub mod helm;
pub mod keys;
pub mod kustomize;
pub mod runner;
pub mod sops;

use crate::catalog::{Diagnostic, SourceFile};
use crate::model::Origin;
use crate::source::{BlobCache, CommitFiles, SourceError};
use serde_json::Value;
use std::path::Path;

pub use helm::Helm;
pub use keys::{KeyError, Keys};
pub use kustomize::Kustomize;

/// What turns a commit's files into hub objects: the SOPS keys, the kustomize that builds
/// Kustomize folders and the helm that renders Helm releases (each with its cache, shared by
/// every commit read through it).
#[derive(Debug)]
pub struct Sources {
    pub keys: Keys,
    pub kustomize: Kustomize,
    pub helm: Helm,
}

impl Sources {
    pub fn new(keys: Keys, kustomize: Kustomize, helm: Helm) -> Self {
        Sources {
            keys,
            kustomize,
            helm,
        }
    }

    /// No SOPS keys; `kustomize` and `helm` from PATH, cached in memory only.
    pub fn plain() -> Self {
        Sources::new(
            Keys::none(),
            Kustomize::new(None, None, runner::Limits::default()),
            Helm::new(None, None, runner::Limits::default()),
        )
    }
}

/// Reads commit `rev` of `repo_path` below `sub` ([`crate::source::read_commit`]) and prepares
/// its files with `sources`.
pub fn read_commit(
    repo_path: &Path,
    rev: &str,
    sub: &str,
    sources: &Sources,
) -> Result<CommitFiles, SourceError> {
    read_commit_cached(repo_path, rev, sub, &mut BlobCache::default(), sources)
}

/// [`read_commit`] through a blob cache ([`crate::source::read_commit_cached`]).
pub fn read_commit_cached(
    repo_path: &Path,
    rev: &str,
    sub: &str,
    blobs: &mut BlobCache,
    sources: &Sources,
) -> Result<CommitFiles, SourceError> {
    let mut files = crate::source::read_commit_cached(repo_path, rev, sub, blobs)?;
    prepare(&mut files, &sources.keys);
    render_folders(repo_path, &mut files, sources)?;
    Ok(files)
}

/// Builds the commit's root kustomizations and renders its Helm releases; their renderings
/// join `files.files`, their problems `files.problems`.
fn render_folders(
    repo_path: &Path,
    files: &mut CommitFiles,
    sources: &Sources,
) -> Result<(), SourceError> {
    let Some(tree) = files.tree.take() else {
        return Ok(());
    };
    let repo = gix::open(repo_path).map_err(|e| SourceError::Read {
        what: "the files of its Kustomize and Helm folders".into(),
        commit: files.commit.clone(),
        message: e.to_string(),
    })?;
    let read = |path: &str| -> Result<Vec<u8>, String> {
        let (_, id) = tree.entries.get(path).ok_or("not in the commit")?;
        let id = gix::ObjectId::from_hex(id.as_bytes()).map_err(|e| e.to_string())?;
        let object = repo.find_object(id).map_err(|e| e.to_string())?;
        Ok(object.detach().data)
    };
    let (mut rendered, mut problems) =
        sources
            .kustomize
            .build(&files.kustomizations, &tree, &read, &sources.keys);
    let (charts, chart_problems) = sources.helm.render_all(&files.helm, &tree, &read);
    rendered.extend(charts);
    problems.extend(chart_problems);
    files.files.extend(rendered);
    files.files.sort_by(|a, b| a.path.cmp(&b.path));
    if !problems.is_empty() {
        files.problems.extend(problems);
        files.problems.sort();
    }
    Ok(())
}

/// Decrypts the SOPS files among `files` in place; a file that cannot be decrypted is taken
/// out, with a diagnostic in `files.problems`.
pub fn prepare(files: &mut CommitFiles, keys: &Keys) {
    let mut problems = Vec::new();
    files.files.retain_mut(|file| {
        if !sops::may_be_encrypted(&file.content) {
            return true;
        }
        match decrypt_file(file, keys) {
            Ok(()) => true,
            Err(d) => {
                problems.push(*d);
                false
            }
        }
    });
    if !problems.is_empty() {
        files.problems.extend(problems);
        files.problems.sort();
    }
}

/// The decrypted content of `bytes`, a file a rendering tool reads, when it is a SOPS file:
/// the same rules as for a SOPS file of the commit ([`decrypt_file`]), its problem as one
/// message that names the file and field.
fn decrypt_input(path: &str, bytes: &[u8], keys: &Keys) -> Result<Option<Vec<u8>>, String> {
    if !sops::may_be_encrypted(bytes) {
        return Ok(None);
    }
    if ![".yaml", ".yml", ".json"]
        .iter()
        .any(|ext| path.ends_with(ext))
    {
        return Err(format!(
            "{path} is encrypted by SOPS in a format gitfleet does not decrypt: it decrypts \
             YAML and JSON files (name them .yaml, .yml or .json), not dotenv, INI or binary \
             files"
        ));
    }
    let mut file = SourceFile {
        path: path.to_string(),
        content: bytes.to_vec(),
    };
    match decrypt_file(&mut file, keys) {
        Ok(()) if file.content == bytes => Ok(None),
        Ok(()) => Ok(Some(file.content)),
        Err(d) => {
            let at = match (d.origin.document, d.field.as_str()) {
                (0, "") => String::new(),
                (0, field) => format!(" ({field})"),
                (n, "") => format!(" (document {n})"),
                (n, field) => format!(" (document {n}, {field})"),
            };
            Err(format!("{path}{at}: {}", d.message))
        }
    }
}

/// Replaces a SOPS file's content with its decrypted documents (a file that is no SOPS file
/// is left as it is).
fn decrypt_file(file: &mut SourceFile, keys: &Keys) -> Result<(), Box<Diagnostic>> {
    let json = file.path.ends_with(".json");
    let diagnostic = |document: usize, field: &str, message: String| {
        Box::new(Diagnostic {
            origin: Origin {
                file: file.path.clone(),
                document,
                line: 1,
            },
            object: "SOPS file".into(),
            field: field.into(),
            message,
        })
    };
    let docs = match sops::decrypt(&file.content, json, &keys.age) {
        Ok(Some(docs)) => docs,
        Ok(None) => return Ok(()),
        Err(e) => {
            // The field goes into the diagnostic's own place, not into its message.
            let (field, message) = match e {
                sops::SopsError::Metadata { field, message } => {
                    (field, format!("its SOPS metadata is invalid: {message}"))
                }
                sops::SopsError::Value { field, message } => {
                    (field, format!("this value cannot be decrypted: {message}"))
                }
                e => (String::new(), e.to_string()),
            };
            return Err(diagnostic(0, &field, format!("cannot decrypt: {message}")));
        }
    };
    for (i, doc) in docs.iter().enumerate() {
        let is_secret = doc.get("apiVersion").and_then(Value::as_str) == Some("v1")
            && doc.get("kind").and_then(Value::as_str) == Some("Secret");
        if !is_secret {
            return Err(diagnostic(
                i,
                "kind",
                "a SOPS-encrypted file may hold only Secrets (apiVersion: v1, kind: Secret): \
                 their data and stringData are what gitfleet masks in plans and renderings, \
                 so a decrypted value is never shown; keep other objects in files of their own"
                    .into(),
            ));
        }
    }
    file.content = if json {
        let doc = docs.into_iter().next().unwrap_or(Value::Null);
        serde_json::to_vec_pretty(&doc).unwrap_or_default()
    } else {
        let mut text = String::new();
        for doc in &docs {
            text.push_str("---\n");
            text.push_str(&crate::yaml::to_string(doc).unwrap_or_default());
        }
        text.into_bytes()
    };
    Ok(())
}
