//! Helm charts rendered with the real `helm` (`helm template`), one release per
//! `helmrelease.yaml` ([`crate::model::helm_release`]): the chart it names (a folder with
//! `Chart.yaml`, or a packaged `.tgz`, kept in the repository with its dependencies vendored
//! under `charts/`), its release name, namespace, values files and inline values. A chart is
//! rendered only through a release, so a chart other charts use as a dependency, or several
//! releases share, is never placed on its own; a chart or values file no release uses gets one
//! diagnostic that says how to declare a release.
//!
//! Before helm runs, the release's paths are read from the commit: a chart from a repository
//! (`oci://`, `https://`, a dependency not vendored under `charts/`), a path leaving the
//! repository and a symbolic link are refused with an error naming the release file and field.
//! The chart and values files are written from git into a temporary folder and helm runs there
//! through [`super::runner`] (no network, its cache and configuration in that folder, no
//! dependency update, no `--repo`). So the git ids of the declaration, the chart and the values
//! files, with helm's version, are all its inputs: they key the [`super::cache`].
//!
//! What `helm template` semantics mean here: CRDs of the chart's `crds/` are placed
//! (`--include-crds`, unless the release skips them); chart tests are left out (`--skip-tests`, as Argo CD and Flux do);
//! hooks are placed as plain objects, as `helm template | kubectl apply` would (no hook order,
//! weights or delete policies: gitfleet does not run Helm's release lifecycle). A rendered
//! namespaced object that names no namespace goes to the release namespace, as `helm install`
//! puts it. The rendered stream stands in the catalog's input as a file named by the release
//! file: diagnostics, `render` and `plan` trace each object to it
//! ([`crate::catalog::unrendered::rendered_by`]).

use super::cache::{Key, Outcome};
use super::cached_tool::CachedTool;
use super::kustomize::{join_path, keep, resolve, EntryKind, Tree, TRANSIENT};
use super::runner::{Limits, RunError};
use crate::catalog::{Diagnostic, SourceFile};
use crate::model::helm_release::HelmRelease;
use crate::model::scope::{Scope, ScopeTable};
use crate::model::Origin;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::model::helm_release::FILE_NAME;

/// How to install the version gitfleet is tested with.
pub const INSTALL: &str = "go install helm.sh/helm/v3/cmd/helm@v3.22.0";

/// What [`crate::source`] sets aside for helm: repository paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A folder with a `helmrelease.yaml` (`file`).
    Release { folder: String, file: String },
    /// A chart folder outside any release folder, with the diagnostic it gets when no release
    /// uses it.
    Chart { folder: String, unused: Diagnostic },
    /// A values file outside any chart or release folder, likewise.
    Values { file: String, unused: Diagnostic },
}

/// Why a release is not rendered. Names the reference, never a file's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "{reference:?} is a chart from a repository: gitfleet renders charts without network; \
         vendor it into the repository (`helm pull --untar`) and name its folder"
    )]
    Remote { reference: String },
    #[error("{reference:?} leaves the repository: a release may use only this repository's files")]
    Outside { reference: String },
    #[error(
        "{path} is a symbolic link: gitfleet does not follow links in what helm reads (a link \
         may point outside the commit); commit the files themselves"
    )]
    Symlink { path: String },
    #[error("{path} is a submodule: helm may read only this repository's files")]
    Submodule { path: String },
    #[error("{reference:?} is not in the commit ({path} does not exist)")]
    Missing { reference: String, path: String },
    #[error("{path} is no chart: a chart is a folder holding Chart.yaml or a packaged .tgz")]
    NotAChart { path: String },
    #[error("{path} is a folder, not a values file")]
    NotAFile { path: String },
    #[error(
        "the chart's dependency {name:?} (repository {repository:?}) is not vendored under \
         {charts}: gitfleet renders charts without network and does not update dependencies; \
         vendor it with `helm dependency build` and commit {charts}"
    )]
    Dependency {
        name: String,
        repository: String,
        charts: String,
    },
    #[error("{0}")]
    Unreadable(String),
}

/// What a release reads from the commit: repository paths, with their git ids (the cache key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    /// The chart's folder or `.tgz`.
    pub chart: String,
    pub values_files: Vec<String>,
    /// Every path read, with its git id: the declaration, the chart, the values files.
    pub ids: Vec<(String, String)>,
}

/// Whether a chart reference names something remote rather than a path.
fn is_remote(reference: &str) -> bool {
    reference.contains("://") || reference.starts_with("oci:")
}

/// The repository path `reference` (relative to folder `dir`) names, through no link.
fn locate(tree: &Tree, dir: &str, reference: &str) -> Result<String, Refusal> {
    if is_remote(reference) {
        return Err(Refusal::Remote {
            reference: reference.to_string(),
        });
    }
    let path = resolve(dir, reference).ok_or_else(|| Refusal::Outside {
        reference: reference.to_string(),
    })?;
    let mut at = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        at = join_path(&at, part);
        match tree.kind(&at) {
            Some(EntryKind::Link) => return Err(Refusal::Symlink { path: at }),
            Some(EntryKind::Commit) => return Err(Refusal::Submodule { path: at }),
            Some(_) => {}
            None => {
                return Err(Refusal::Missing {
                    reference: reference.to_string(),
                    path,
                })
            }
        }
    }
    Ok(path)
}

/// The dependencies `Chart.yaml` lists: `(name, repository)`.
fn dependencies(chart_yaml: &[u8]) -> Result<Vec<(String, String)>, String> {
    let text = crate::yaml::text(chart_yaml).map_err(|e| e.to_string())?;
    let docs = crate::yaml::documents(text).map_err(|e| e.to_string())?;
    let Some(deps) = docs.first().and_then(|d| d.get("dependencies")) else {
        return Ok(Vec::new());
    };
    let text = |v: &Value, field: &str| v.get(field).and_then(Value::as_str).map(str::to_string);
    match deps {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|d| {
                let name = text(d, "name").ok_or("dependencies: every entry needs a name")?;
                Ok((name, text(d, "repository").unwrap_or_default()))
            })
            .collect(),
        _ => Err("dependencies: must be a list".into()),
    }
}

/// Whether `charts` (a chart's `charts/` folder) holds dependency `name`: a folder of that name
/// or a packaged `NAME-VERSION.tgz`, as `helm dependency build` leaves it.
fn vendored(tree: &Tree, charts: &str, name: &str) -> bool {
    tree.below(charts).any(|(path, kind)| {
        let Some(entry) = path.strip_prefix(&format!("{charts}/")) else {
            return false;
        };
        if entry.contains('/') {
            return false;
        }
        match kind {
            EntryKind::Tree => entry == name,
            EntryKind::Blob => entry
                .strip_suffix(".tgz")
                .is_some_and(|stem| stem == name || stem.starts_with(&format!("{name}-"))),
            _ => false,
        }
    })
}

/// The inputs of `release`, declared in `file` of folder `folder`; a refusal names its field.
pub fn inputs(
    tree: &Tree,
    folder: &str,
    file: &str,
    release: &HelmRelease,
    read: &dyn Fn(&str) -> Result<Vec<u8>, String>,
) -> Result<Inputs, (String, Refusal)> {
    let field = |f: &str| f.to_string();
    let chart = locate(tree, folder, &release.spec.chart).map_err(|r| (field("spec.chart"), r))?;
    let mut ids = vec![(file.to_string(), tree.id(file).to_string())];
    match tree.kind(&chart) {
        Some(EntryKind::Tree) => {
            let refuse = |r| (field("spec.chart"), r);
            for (path, kind) in tree.below(&chart) {
                match kind {
                    EntryKind::Link => return Err(refuse(Refusal::Symlink { path: path.clone() })),
                    EntryKind::Commit => {
                        return Err(refuse(Refusal::Submodule { path: path.clone() }))
                    }
                    _ => {}
                }
            }
            let chart_yaml = join_path(&chart, "Chart.yaml");
            if tree.kind(&chart_yaml) != Some(EntryKind::Blob) {
                return Err(refuse(Refusal::NotAChart {
                    path: chart.clone(),
                }));
            }
            let content = read(&chart_yaml)
                .map_err(|e| refuse(Refusal::Unreadable(format!("{chart_yaml}: {e}"))))?;
            let deps = dependencies(&content)
                .map_err(|e| refuse(Refusal::Unreadable(format!("{chart_yaml}: {e}"))))?;
            let charts = join_path(&chart, "charts");
            for (name, repository) in deps {
                if !vendored(tree, &charts, &name) {
                    return Err(refuse(Refusal::Dependency {
                        name,
                        repository,
                        charts: format!("{charts}/"),
                    }));
                }
            }
        }
        Some(EntryKind::Blob) if chart.ends_with(".tgz") => {}
        _ => {
            return Err((
                field("spec.chart"),
                Refusal::NotAChart {
                    path: chart.clone(),
                },
            ))
        }
    }
    ids.push((chart.clone(), tree.id(&chart).to_string()));
    let mut values_files = Vec::new();
    for (i, reference) in release.spec.values_files.iter().enumerate() {
        let f = format!("spec.valuesFiles[{i}]");
        let path = match locate(tree, folder, reference) {
            Err(Refusal::Remote { reference }) => {
                return Err((
                    f,
                    Refusal::Unreadable(format!(
                        "{reference:?} is remote: values files are read from the commit only"
                    )),
                ))
            }
            Err(r) => return Err((f, r)),
            Ok(path) => path,
        };
        if tree.kind(&path) != Some(EntryKind::Blob) {
            return Err((f, Refusal::NotAFile { path }));
        }
        ids.push((path.clone(), tree.id(&path).to_string()));
        values_files.push(path);
    }
    Ok(Inputs {
        chart,
        values_files,
        ids,
    })
}

/// Renders Helm releases with a helm program, its renderings cached.
#[derive(Debug)]
pub struct Helm {
    tool: CachedTool,
}

impl Helm {
    /// `program` (a path, or a name looked up on PATH; `helm` when `None`); renderings kept
    /// under `cache_dir` as well as in memory.
    pub fn new(program: Option<PathBuf>, cache_dir: Option<PathBuf>, limits: Limits) -> Self {
        Helm {
            tool: CachedTool::new("helm", INSTALL, program, cache_dir, limits),
        }
    }

    /// Whether the program exists (a rendering may still fail).
    pub fn found(&self) -> bool {
        self.tool.found()
    }

    /// How many renderings were run rather than found in the cache.
    pub fn renders(&self) -> u64 {
        self.tool.runs()
    }

    fn version(&self) -> Result<&str, RunError> {
        self.tool.version(|tool| {
            let dir = tempfile::tempdir().map_err(|e| RunError::Io {
                tool: "helm",
                message: e.to_string(),
            })?;
            let out = tool.run(
                &["version", "--template", "{{ .Version }}"],
                dir.path(),
                &helm_env(dir.path()),
            )?;
            Ok(String::from_utf8_lossy(&out).trim().to_string())
        })
    }

    /// Renders the releases among `found`; their renderings as files named by their release
    /// files, and one diagnostic per release that cannot be rendered and per chart or values
    /// file no release uses.
    pub fn render_all(
        &self,
        found: &[Found],
        tree: &Tree,
        read: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> (Vec<SourceFile>, Vec<Diagnostic>) {
        let mut files = Vec::new();
        let mut problems = Vec::new();
        // What the releases name, read loosely so a release with a mistake still claims its
        // chart (one error, not two).
        let mut used = BTreeSet::new();
        for f in found {
            let Found::Release { folder, file } = f else {
                continue;
            };
            let doc = read(file)
                .ok()
                .and_then(|c| {
                    crate::yaml::text(&c)
                        .ok()
                        .and_then(|t| crate::yaml::documents(t).ok())
                })
                .and_then(|docs| docs.into_iter().next())
                .unwrap_or_default();
            let spec = &doc["spec"];
            let named = spec["chart"].as_str().into_iter().chain(
                spec["valuesFiles"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str),
            );
            used.extend(named.filter_map(|r| resolve(folder, r)));
        }
        for f in found {
            match f {
                Found::Release { folder, file } => match self.render(folder, file, tree, read) {
                    Ok(bytes) => files.push(SourceFile {
                        path: file.clone(),
                        content: bytes.as_ref().clone(),
                    }),
                    Err(d) => problems.push(*d),
                },
                Found::Chart { folder, unused } if !used.contains(folder) => {
                    problems.push(unused.clone())
                }
                Found::Values { file, unused } if !used.contains(file) => {
                    problems.push(unused.clone())
                }
                _ => {}
            }
        }
        (files, problems)
    }

    /// The rendering of the release declared in `file`, or the diagnostic saying why not.
    fn render(
        &self,
        folder: &str,
        file: &str,
        tree: &Tree,
        read: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Result<Arc<Vec<u8>>, Box<Diagnostic>> {
        let diagnostic = |object: &str, field: &str, message: String| {
            Box::new(Diagnostic {
                origin: Origin {
                    file: file.to_string(),
                    document: 0,
                    line: 1,
                },
                object: format!("HelmRelease {object}"),
                field: field.to_string(),
                message,
            })
        };
        let shown = if folder.is_empty() { "." } else { folder };
        let content = read(file).map_err(|e| diagnostic(shown, "", e))?;
        let docs = crate::yaml::text(&content)
            .and_then(crate::yaml::documents)
            .map_err(|e| diagnostic(shown, "", e.to_string()))?;
        let [doc] = docs.as_slice() else {
            return Err(diagnostic(
                shown,
                "",
                format!(
                    "{FILE_NAME} holds one HelmRelease and nothing else ({} documents found)",
                    docs.len()
                ),
            ));
        };
        let release = HelmRelease::parse(doc).map_err(|problems| {
            let first = &problems[0];
            let rest: Vec<String> = problems[1..]
                .iter()
                .map(|p| format!("{}: {}", p.field, p.message))
                .collect();
            let mut message = first.message.clone();
            if !rest.is_empty() {
                message.push_str(&format!("; and {}", rest.join("; ")));
            }
            diagnostic(
                doc["metadata"]["name"].as_str().unwrap_or(shown),
                &first.field,
                message,
            )
        })?;
        let name = release.metadata.name.as_str();
        let inputs = inputs(tree, folder, file, &release, read)
            .map_err(|(field, r)| diagnostic(name, &field, format!("not rendered: {r}")))?;
        let version = self
            .version()
            .map_err(|e| diagnostic(name, "", format!("cannot be rendered: {e}")))?
            .to_string();
        let mut parts = vec!["helm", version.as_str(), file];
        for (path, id) in &inputs.ids {
            parts.push(path);
            parts.push(id);
        }
        let key = Key::of(parts);
        let outcome = self.tool.cache.get_or_render(
            &key,
            || {
                tracing::debug!(release = %file, "rendering with helm");
                self.run(&release, &inputs, tree, read)
            },
            |o| keep(o, false),
        );
        outcome.map_err(|message| {
            let message = message.trim_start_matches(TRANSIENT).to_string();
            diagnostic(name, "", format!("helm template: {message}"))
        })
    }

    /// Writes the release's inputs from git into a temporary folder and runs `helm template`
    /// there.
    fn run(
        &self,
        release: &HelmRelease,
        inputs: &Inputs,
        tree: &Tree,
        read: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Outcome {
        let transient = |what: &str, e: &dyn std::fmt::Display| format!("{TRANSIENT}{what}: {e}");
        let work = tempfile::tempdir().map_err(|e| transient("a temporary folder", &e))?;
        let files = work.path().join("repo");
        let write = |path: &str| -> Result<(), String> {
            let target = files.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| transient(path, &e))?;
            }
            let bytes = read(path).map_err(|e| format!("reading {path}: {e}"))?;
            std::fs::write(&target, bytes).map_err(|e| transient(path, &e))
        };
        if tree.kind(&inputs.chart) == Some(EntryKind::Tree) {
            for (path, kind) in tree.below(&inputs.chart) {
                match kind {
                    EntryKind::Tree => std::fs::create_dir_all(files.join(path))
                        .map_err(|e| transient(path, &e))?,
                    EntryKind::Blob => write(path)?,
                    _ => {}
                }
            }
        } else {
            write(&inputs.chart)?;
        }
        for path in &inputs.values_files {
            write(path)?;
        }
        let inline = work.path().join("inline-values.json");
        let values = release.spec.values.clone().unwrap_or(Value::Null);
        let values = if values.is_null() {
            Value::Object(Default::default())
        } else {
            values
        };
        std::fs::write(&inline, values.to_string()).map_err(|e| transient("values", &e))?;
        let chart = format!("./{}", inputs.chart);
        let inline = inline.display().to_string();
        let mut args = vec![
            "template",
            release.release_name(),
            chart.as_str(),
            "--namespace",
            release.spec.namespace.as_str(),
            "--skip-tests",
            "--dependency-update=false",
        ];
        if !release.spec.skip_crds {
            args.push("--include-crds");
        }
        for path in &inputs.values_files {
            args.push("--values");
            args.push(path);
        }
        args.push("--values");
        args.push(&inline);
        let home = work.path().join("helm");
        // helm's messages name the temporary folder; the repository's paths are what the user
        // knows.
        let shown = |e: RunError| {
            e.to_string()
                .replace(&format!("{}/", files.display()), "")
                .replace(&inline, "spec.values")
        };
        let out = match self.tool.run(&args, &files, &helm_env(&home)) {
            Ok(out) => out,
            Err(e) if e.is_transient() => return Err(format!("{TRANSIENT}{}", shown(e))),
            Err(e) => return Err(shown(e)),
        };
        in_release_namespace(&out, &release.spec.namespace).map(Arc::new)
    }
}

/// Where helm keeps its cache, configuration and data: below `home`, a temporary folder, so
/// no repository list or plugin of the machine is read.
fn helm_env(home: &Path) -> [(&'static str, PathBuf); 3] {
    [
        ("HELM_CACHE_HOME", home.join("cache")),
        ("HELM_CONFIG_HOME", home.join("config")),
        ("HELM_DATA_HOME", home.join("data")),
    ]
}

/// helm's output with the release namespace set on each namespaced object that names none, as
/// `helm install` places them. A kind's scope comes from the built-in table and the CRDs of the
/// same output; a kind of unknown scope is left as rendered.
pub fn in_release_namespace(out: &[u8], namespace: &str) -> Result<Vec<u8>, String> {
    let text = crate::yaml::text(out).map_err(|e| format!("its output is not YAML: {e}"))?;
    let mut docs =
        crate::yaml::documents(text).map_err(|e| format!("its output is not YAML: {e}"))?;
    let mut scopes = ScopeTable::builtin();
    for d in &docs {
        if d["kind"] == "CustomResourceDefinition" {
            let spec = &d["spec"];
            if let (Some(group), Some(kind)) =
                (spec["group"].as_str(), spec["names"]["kind"].as_str())
            {
                let scope = if spec["scope"] == "Cluster" {
                    Scope::Cluster
                } else {
                    Scope::Namespaced
                };
                scopes.add(group, kind, scope);
            }
        }
    }
    let mut text = String::new();
    for d in &mut docs {
        let group = d["apiVersion"]
            .as_str()
            .and_then(|v| v.rsplit_once('/'))
            .map_or("", |(g, _)| g)
            .to_string();
        let kind = d["kind"].as_str().unwrap_or_default().to_string();
        if scopes.scope(&group, &kind) == Some(Scope::Namespaced) {
            if let Some(meta) = d.get_mut("metadata").and_then(Value::as_object_mut) {
                let named = meta
                    .get("namespace")
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty());
                if !named {
                    meta.insert("namespace".into(), Value::String(namespace.to_string()));
                }
            }
        }
        text.push_str("---\n");
        text.push_str(&crate::yaml::to_string(d).map_err(|e| e.to_string())?);
    }
    Ok(text.into_bytes())
}

#[cfg(test)]
mod tests;
