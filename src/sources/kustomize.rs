//! Kustomize folders built with the real `kustomize` (`kustomize build`), so a folder means what
//! kustomize makes of it. Only root kustomizations are built: one that another kustomization of
//! the commit uses (as a resource, base or component) is built only through it, so a base and
//! its overlays never place the same object twice.
//!
//! Before anything runs, every kustomization a root reaches is read from the commit: a remote
//! reference, a path leaving the repository and a symbolic link are refused with an error naming
//! the kustomization file. The folders it reaches are written from git (never the working tree)
//! into a temporary folder, and kustomize runs there through [`super::runner`] with its default
//! load restrictor (each kustomization reads only files below its own folder), no plugins, no
//! Helm, no network. So the git tree ids of the folders reached are all its inputs: they key the
//! [`super::cache`], and an unchanged folder is never built twice.
//!
//! The rendered stream stands in the catalog's input as a file named by the kustomization file
//! itself: diagnostics, `render` and `plan` trace each rendered object to it
//! ([`rendered_by`]).

use super::cache::{Keep, Key, Outcome};
use super::cached_tool::CachedTool;
use super::runner::{Limits, RunError};
use super::Keys;
use crate::catalog::{Diagnostic, SourceFile};
use crate::model::Origin;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::catalog::unrendered::{rendered_by, KUSTOMIZATION_FILES as FILE_NAMES};

/// How to install the version gitfleet is tested with.
pub const INSTALL: &str = "go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2";

/// A kustomization of the commit, as [`crate::source`] sets it aside: repository paths.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kustomization {
    /// Its folder (`""` for the repository's root).
    pub folder: String,
    /// Its kustomization file.
    pub file: String,
}

/// Why a kustomization is not built. Names the reference, never a file's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "{reference:?} is a remote base: gitfleet builds kustomizations without network; \
         vendor it into the repository and refer to it by a relative path"
    )]
    Remote { reference: String },
    #[error("{reference:?} leaves the repository: a kustomization may use only this repository's folders")]
    Outside { reference: String },
    #[error(
        "{path} is a symbolic link: gitfleet does not follow links in what kustomize reads \
         (a link may point outside the commit); commit the files themselves"
    )]
    Symlink { path: String },
    #[error("it cannot be read: {0}")]
    Unreadable(String),
}

/// What kind of entry a path of the commit's tree is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Blob,
    Tree,
    Link,
    /// A submodule.
    Commit,
}

/// A commit's tree as the kustomizations need it: every entry by path, with its git id.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// The id of the root tree.
    pub root: String,
    pub entries: BTreeMap<String, (EntryKind, String)>,
}

impl Tree {
    pub(super) fn kind(&self, path: &str) -> Option<EntryKind> {
        if path.is_empty() {
            return Some(EntryKind::Tree);
        }
        self.entries.get(path).map(|(k, _)| *k)
    }

    pub(super) fn id(&self, path: &str) -> &str {
        if path.is_empty() {
            return &self.root;
        }
        self.entries.get(path).map_or("", |(_, id)| id)
    }

    /// The entries below folder `dir`.
    pub(super) fn below<'a>(
        &'a self,
        dir: &'a str,
    ) -> impl Iterator<Item = (&'a String, EntryKind)> + 'a {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        self.entries
            .range(prefix.clone()..)
            .take_while(move |(p, _)| p.starts_with(&prefix))
            .map(|(p, (k, _))| (p, *k))
    }

    /// The kustomization file of folder `dir`, if it has one.
    fn kustomization_file(&self, dir: &str) -> Option<String> {
        FILE_NAMES
            .iter()
            .map(|name| join_path(dir, name))
            .find(|path| self.kind(path).is_some())
    }
}

pub(super) fn join_path(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Whether a kustomization's reference names something remote (kustomize fetches git URLs,
/// `github.com/…` shorthands and HTTP files).
fn is_remote(reference: &str) -> bool {
    reference.contains("://")
        || reference.starts_with("git@")
        || reference.contains("?ref=")
        || ["github.com/", "gitlab.com/", "bitbucket.org/"]
            .iter()
            .any(|host| reference.starts_with(host))
}

/// `reference` relative to folder `dir`, normalised; `None` when it leaves the repository.
pub(super) fn resolve(dir: &str, reference: &str) -> Option<String> {
    if reference.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in reference.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The folders and files a kustomization file refers to (`resources`, `bases`, `components`).
pub fn references(content: &[u8]) -> Result<Vec<String>, String> {
    let text = crate::yaml::text(content).map_err(|e| e.to_string())?;
    let docs = crate::yaml::documents(text).map_err(|e| e.to_string())?;
    let Some(doc) = docs.first() else {
        return Ok(Vec::new());
    };
    if !doc.is_object() && !doc.is_null() {
        return Err("it is not a mapping".into());
    }
    let mut out = Vec::new();
    for field in ["resources", "bases", "components"] {
        match doc.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        _ => return Err(format!("{field}: every entry must be a string")),
                    }
                }
            }
            Some(_) => return Err(format!("{field}: must be a list")),
        }
    }
    Ok(out)
}

/// The folders a kustomization reaches (its own first), each with its git tree id: all that
/// `kustomize build` reads, since each kustomization reads only below its own folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    pub folders: Vec<(String, String)>,
}

/// The inputs of the kustomization in `folder`; `read` gives a kustomization file's
/// [`references`]. A refusal names the kustomization file it is in.
pub fn inputs(
    tree: &Tree,
    folder: &str,
    read: &dyn Fn(&str) -> Result<Vec<String>, String>,
) -> Result<Inputs, (String, Refusal)> {
    let mut seen = BTreeSet::new();
    let mut queue = vec![folder.to_string()];
    let mut folders = Vec::new();
    while let Some(dir) = queue.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let file = tree
            .kustomization_file(&dir)
            .unwrap_or_else(|| join_path(&dir, FILE_NAMES[0]));
        let refuse = |r: Refusal| (file.clone(), r);
        if let Some((path, _)) = tree.below(&dir).find(|(_, k)| *k == EntryKind::Link) {
            return Err(refuse(Refusal::Symlink { path: path.clone() }));
        }
        folders.push((dir.clone(), tree.id(&dir).to_string()));
        if tree.kind(&file) != Some(EntryKind::Blob) {
            continue;
        }
        let references = read(&file).map_err(|e| refuse(Refusal::Unreadable(e)))?;
        for reference in references {
            if is_remote(&reference) {
                return Err(refuse(Refusal::Remote { reference }));
            }
            let Some(path) = resolve(&dir, &reference) else {
                return Err(refuse(Refusal::Outside { reference }));
            };
            // A link anywhere on the way is refused: kustomize would follow it.
            let mut at = String::new();
            for part in path.split('/').filter(|p| !p.is_empty()) {
                at = join_path(&at, part);
                if tree.kind(&at) == Some(EntryKind::Link) {
                    return Err(refuse(Refusal::Symlink { path: at }));
                }
            }
            // Another kustomization: its references may reach further.
            if tree.kind(&path) == Some(EntryKind::Tree) && tree.kustomization_file(&path).is_some()
            {
                queue.push(path);
            }
        }
    }
    folders.sort();
    Ok(Inputs { folders })
}

/// Builds Kustomize folders with a kustomize program, its renderings cached.
#[derive(Debug)]
pub struct Kustomize {
    tool: CachedTool,
    /// Each kustomization file's [`references`] by its blob id: every commit walks every
    /// kustomization, and most commits change none.
    references: std::sync::Mutex<std::collections::HashMap<String, Result<Vec<String>, String>>>,
}

impl Kustomize {
    /// `program` (a path, or a name looked up on PATH; `kustomize` when `None`); renderings kept
    /// under `cache_dir` as well as in memory.
    pub fn new(program: Option<PathBuf>, cache_dir: Option<PathBuf>, limits: Limits) -> Self {
        Kustomize {
            tool: CachedTool::new("kustomize", INSTALL, program, cache_dir, limits),
            references: Default::default(),
        }
    }

    /// Whether the program exists (a build may still fail).
    pub fn found(&self) -> bool {
        self.tool.found()
    }

    /// How many builds were run rather than found in the cache.
    pub fn builds(&self) -> u64 {
        self.tool.runs()
    }

    fn version(&self) -> Result<&str, RunError> {
        self.tool.version(|tool| {
            let out = tool.run(&["version"], &std::env::temp_dir(), &[])?;
            Ok(String::from_utf8_lossy(&out).trim().to_string())
        })
    }

    /// Builds the root kustomizations among `found`; their renderings as files named by their
    /// kustomization files, and one diagnostic per kustomization that cannot be built. SOPS
    /// files in the folders are decrypted with `keys` before kustomize reads them.
    pub fn build(
        &self,
        found: &[Kustomization],
        tree: &Tree,
        read: &dyn Fn(&str) -> Result<Vec<u8>, String>,
        keys: &Keys,
    ) -> (Vec<SourceFile>, Vec<Diagnostic>) {
        let diagnostic = |k: &Kustomization, file: &str, message: String| Diagnostic {
            origin: Origin {
                file: file.to_string(),
                document: 0,
                line: 1,
            },
            object: format!(
                "Kustomization {}",
                if k.folder.is_empty() { "." } else { &k.folder }
            ),
            field: String::new(),
            message,
        };
        let refs = |file: &str| self.references_of(tree, file, read);
        let walked: Vec<_> = found
            .iter()
            .map(|k| (k, inputs(tree, &k.folder, &refs)))
            .collect();
        // Used by another: named by another's resources, bases or components (whether or not
        // that one can be built, so a broken overlay does not turn its base into a root).
        let used: BTreeSet<String> = found
            .iter()
            .flat_map(|k| {
                refs(&k.file)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|r| resolve(&k.folder, &r))
                    .filter(|f| *f != k.folder)
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut files = Vec::new();
        let mut problems = Vec::new();
        for (k, walk) in walked {
            if used.contains(&k.folder) {
                continue;
            }
            let inputs = match walk {
                Ok(inputs) => inputs,
                Err((file, refusal)) => {
                    problems.push(diagnostic(k, &file, format!("not built: {refusal}")));
                    continue;
                }
            };
            let version = match self.version() {
                Ok(v) => v.to_string(),
                Err(e) => {
                    problems.push(diagnostic(k, &k.file, format!("cannot be built: {e}")));
                    continue;
                }
            };
            let mut parts = vec!["kustomize", version.as_str(), k.folder.as_str()];
            for (folder, id) in &inputs.folders {
                parts.push(folder);
                parts.push(id);
            }
            let key = Key::of(parts);
            let decrypted = std::cell::Cell::new(false);
            let outcome = self.tool.cache.get_or_render(
                &key,
                || {
                    tracing::debug!(kustomization = %k.file, "building with kustomize");
                    self.render(k, &inputs, tree, read, keys, &decrypted)
                },
                |o| keep(o, decrypted.get()),
            );
            match outcome {
                Ok(bytes) => files.push(SourceFile {
                    path: k.file.clone(),
                    content: bytes.as_ref().clone(),
                }),
                Err(message) => {
                    let message = message.trim_start_matches(TRANSIENT).to_string();
                    problems.push(diagnostic(
                        k,
                        &k.file,
                        format!("kustomize build: {message}"),
                    ));
                }
            }
        }
        (files, problems)
    }

    /// The [`references`] of the kustomization file at `file`, read once per blob.
    fn references_of(
        &self,
        tree: &Tree,
        file: &str,
        read: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Result<Vec<String>, String> {
        let id = tree.id(file);
        if let Some(known) = self.references.lock().expect("references lock").get(id) {
            return known.clone();
        }
        let found = references(&read(file)?);
        let mut known = self.references.lock().expect("references lock");
        // Bounded as the render cache is: a long-running daemon sees many commits.
        if known.len() >= 4096 {
            known.clear();
        }
        known.insert(id.to_string(), found.clone());
        found
    }

    /// Writes the folders `inputs` names from git into a temporary folder and builds `k` there;
    /// SOPS files are written decrypted (their MAC verified, as a whole file), and `decrypted`
    /// is set when one was.
    fn render(
        &self,
        k: &Kustomization,
        inputs: &Inputs,
        tree: &Tree,
        read: &dyn Fn(&str) -> Result<Vec<u8>, String>,
        keys: &Keys,
        decrypted: &std::cell::Cell<bool>,
    ) -> Outcome {
        let work =
            tempfile::tempdir().map_err(|e| format!("{TRANSIENT}a temporary folder: {e}"))?;
        let files = work.path().join("repo");
        let mut written = BTreeSet::new();
        for (folder, _) in &inputs.folders {
            std::fs::create_dir_all(files.join(folder))
                .map_err(|e| format!("{TRANSIENT}writing {folder}: {e}"))?;
            for (path, kind) in tree.below(folder) {
                let target = files.join(path);
                match kind {
                    EntryKind::Tree => std::fs::create_dir_all(&target),
                    EntryKind::Blob if written.insert(path.clone()) => {
                        let mut bytes = read(path).map_err(|e| format!("reading {path}: {e}"))?;
                        if let Some(plain) = super::decrypt_input(path, &bytes, keys)? {
                            bytes = plain;
                            decrypted.set(true);
                        }
                        std::fs::write(&target, bytes)
                    }
                    _ => Ok(()),
                }
                .map_err(|e| format!("{TRANSIENT}writing {path}: {e}"))?;
            }
        }
        let target = if k.folder.is_empty() {
            "."
        } else {
            k.folder.as_str()
        };
        // The load restrictor named although it is kustomize's default: no file outside a
        // kustomization's own folder, whatever a later version defaults to.
        let args = [
            "build",
            target,
            "--load-restrictor",
            "LoadRestrictionsRootOnly",
        ];
        // kustomize's messages name the temporary folder; the repository's paths are what the
        // user knows.
        let shown = |e: RunError| e.to_string().replace(&format!("{}/", files.display()), "");
        match self.tool.run(&args, &files, &[]) {
            Ok(out) => Ok(Arc::new(out)),
            Err(e) if e.is_transient() => Err(format!("{TRANSIENT}{}", shown(e))),
            Err(e) => Err(shown(e)),
        }
    }
}

/// Marks a failure that running again may not repeat (not cached).
pub(super) const TRANSIENT: &str = "\u{0}transient:";

/// Where an outcome is kept: a transient failure nowhere, an output holding decrypted values
/// in memory only.
pub(super) fn keep(outcome: &Outcome, decrypted: bool) -> Keep {
    match outcome {
        Err(e) if e.starts_with(TRANSIENT) => Keep::Not,
        Ok(_) if decrypted => Keep::InMemory,
        _ => Keep::Everywhere,
    }
}

#[cfg(test)]
mod tests;
