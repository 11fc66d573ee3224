//! Folders that a tool must render before they are manifests: Kustomize folders
//! (`kustomization.yaml`), Helm releases (`helmrelease.yaml`) and Helm charts (`Chart.yaml`,
//! `templates/`, `values*.yaml`). Read as plain YAML they give a cascade of errors (templates do
//! not parse, patches are partial objects, values files have no kind), so their files are never
//! read one by one: Kustomize folders and Helm releases are rendered by [`crate::sources`]; a
//! chart or values file no release uses, and Helm templates outside any chart, get one
//! diagnostic each that names what they are and how to render them or leave them out.
//!
//! Pure: paths (relative to the fleet's `--path`) and contents in, findings out.

use super::Diagnostic;
use crate::model::Origin;

/// The file at the root of the fleet's path that leaves files out (read by `source`).
pub const IGNORE_FILE: &str = ".gitfleetignore";

/// The names kustomize takes for a kustomization file, in the order it looks for them.
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The file a Helm release is declared in ([`crate::model::helm_release`]).
pub const HELM_RELEASE_FILE: &str = crate::model::helm_release::FILE_NAME;

/// The tool that rendered an object whose origin file is `file`, when a tool did: the objects
/// of a built kustomization come from a file named like a kustomization file, those of a Helm
/// release from its `helmrelease.yaml` (gitfleet reads neither as manifests).
pub fn rendered_by(file: &str) -> Option<&'static str> {
    let name = base_name(file);
    if KUSTOMIZATION_FILES.contains(&name) {
        Some("kustomize")
    } else if name == HELM_RELEASE_FILE {
        Some("helm")
    } else {
        None
    }
}

/// What renders a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tool {
    /// A folder with a `kustomization.yaml` (a base or an overlay).
    Kustomize,
    /// A folder with a `helmrelease.yaml`: one Helm release of a chart.
    HelmRelease,
    /// A folder with a `Chart.yaml`.
    HelmChart,
    /// A `templates/` folder of Helm templates (`{{ … }}`) outside any chart.
    HelmTemplates,
    /// A `values*.yaml` file that is not a Kubernetes object, outside any chart.
    HelmValues,
}

/// One folder (or, for [`Tool::HelmValues`], one file) that is not read as manifests.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unrendered {
    pub tool: Tool,
    /// Relative to the path's root, without slashes at the ends; `""` is the root itself. The
    /// file itself for [`Tool::HelmValues`].
    pub folder: String,
    /// The file that gave it away (relative to the path's root).
    pub marker: String,
}

fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

fn base_name(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

fn inside(path: &str, folder: &str) -> bool {
    folder.is_empty()
        || path
            .strip_prefix(folder)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What a set of findings covers, looked up by a path's own folders rather than against every
/// finding: a commit is read whole, and a fleet may hold hundreds of Kustomize folders among
/// thousands of files.
#[derive(Debug, Default)]
pub struct Covered {
    /// Folders whose every file is covered (`""`: the root).
    folders: std::collections::HashSet<String>,
    /// Single files covered ([`Tool::HelmValues`]).
    files: std::collections::HashSet<String>,
}

impl Covered {
    pub fn of(found: &[Unrendered]) -> Self {
        let mut covered = Covered::default();
        for u in found {
            covered.add(u);
        }
        covered
    }

    fn add(&mut self, u: &Unrendered) {
        match u.tool {
            Tool::HelmValues => self.files.insert(u.folder.clone()),
            _ => self.folders.insert(u.folder.clone()),
        };
    }

    /// Whether the file at `path` (relative to the path's root) is one of the findings'.
    pub fn covers(&self, path: &str) -> bool {
        self.files.contains(path) || self.in_folder(path)
    }

    /// Whether `path` is inside (or is) a covered folder.
    fn in_folder(&self, path: &str) -> bool {
        self.folders.contains("")
            || self.folders.contains(path)
            || path
                .match_indices('/')
                .any(|(i, _)| self.folders.contains(&path[..i]))
    }
}

/// A Kubernetes object names its kind at the top level; a values file does not.
fn has_top_level_kind(content: &[u8]) -> bool {
    String::from_utf8_lossy(content)
        .lines()
        .any(|l| l.starts_with("kind:") || l.starts_with("\"kind\":"))
}

/// Finds what needs rendering among `paths` (every file of the path, relative to its root);
/// `content` gives a manifest file's bytes (`None` for files that are not read). Only the
/// outermost folder of each nest is reported: leaving it out covers what is inside.
pub fn find<'a>(paths: &[&str], content: impl Fn(&str) -> Option<&'a [u8]>) -> Vec<Unrendered> {
    let mut found: Vec<Unrendered> = Vec::new();
    for path in paths {
        let tool = match base_name(path) {
            "Chart.yaml" => Tool::HelmChart,
            HELM_RELEASE_FILE => Tool::HelmRelease,
            "kustomization.yaml" | "kustomization.yml" | "Kustomization" => Tool::Kustomize,
            _ => continue,
        };
        found.push(Unrendered {
            tool,
            folder: parent(path).to_string(),
            marker: path.to_string(),
        });
    }
    // Templates folders join as they are found; values files cover nothing else.
    let mut covered = Covered::of(&found);
    for path in paths {
        if covered.in_folder(path) {
            continue;
        }
        let Some(bytes) = content(path) else {
            continue;
        };
        // Helm templates outside a chart: the nearest `templates` folder above the file.
        let templates = path
            .match_indices("templates/")
            .map(|(i, _)| &path[..i + "templates".len()])
            .find(|t| *t == "templates" || t.ends_with("/templates"));
        if let Some(folder) = templates {
            if bytes.windows(2).any(|w| w == b"{{") {
                let templates = Unrendered {
                    tool: Tool::HelmTemplates,
                    folder: folder.to_string(),
                    marker: path.to_string(),
                };
                covered.add(&templates);
                found.push(templates);
                continue;
            }
        }
        let name = base_name(path);
        let values =
            name.starts_with("values") && (name.ends_with(".yaml") || name.ends_with(".yml"));
        if values && !has_top_level_kind(bytes) {
            found.push(Unrendered {
                tool: Tool::HelmValues,
                folder: path.to_string(),
                marker: path.to_string(),
            });
        }
    }
    found.sort_by(|a, b| (&a.folder, a.tool).cmp(&(&b.folder, b.tool)));
    // Outermost only: a chart inside a kustomization (or a subchart) goes with its parent.
    let mut outer: Vec<Unrendered> = Vec::new();
    for u in found {
        let nested = outer.iter().any(|o| {
            o.tool != Tool::HelmValues
                && (inside(&u.folder, &o.folder) && (u.folder != o.folder || u.tool == o.tool))
        });
        if !nested {
            outer.push(u);
        }
    }
    outer
}

impl Unrendered {
    /// Whether the file at `relative` (to the path's root) is one of this finding's.
    pub fn covers(&self, relative: &str) -> bool {
        match self.tool {
            Tool::HelmValues => relative == self.folder,
            _ => inside(relative, &self.folder),
        }
    }

    /// The one diagnostic for it. `root` is the path's root as a prefix of repository paths
    /// (`""` or `fleet/`): diagnostics name files from the repository root, `.gitfleetignore`
    /// lines are relative to the path's root.
    pub fn diagnostic(&self, root: &str) -> Diagnostic {
        let folder = &self.folder;
        let ignore_file = format!("{root}{IGNORE_FILE}");
        let leave_out = if folder.is_empty() {
            "or point --path at the rendered output instead of this folder".to_string()
        } else if self.tool == Tool::HelmValues {
            format!("or leave it out with the line `/{folder}` in {ignore_file}")
        } else {
            format!("or leave the folder out with the line `/{folder}/` in {ignore_file}")
        };
        let shown = if folder.is_empty() {
            root.trim_end_matches('/').to_string()
        } else {
            format!("{root}{folder}")
        };
        let shown = if shown.is_empty() { ".".into() } else { shown };
        let (object, message) = match self.tool {
            Tool::Kustomize => (
                format!("Kustomize folder {shown}"),
                format!(
                    "a Kustomize base or overlay (kustomization.yaml): gitfleet reads plain \
                     manifests and does not run kustomize, so no file of this folder was read; \
                     render it in CI (`kustomize build {shown}`) and commit the output, {leave_out}"
                ),
            ),
            Tool::HelmChart => (
                format!("Helm chart {shown}"),
                format!(
                    "a Helm chart (Chart.yaml) that no {HELM_RELEASE_FILE} uses: gitfleet \
                     renders a chart only through a HelmRelease naming its release name and \
                     namespace, so no file of this folder was read; declare one in a \
                     {HELM_RELEASE_FILE} (`spec.chart` naming this folder; see \
                     docs/guides/helm.md), {leave_out}"
                ),
            ),
            Tool::HelmRelease => (
                format!("Helm release {shown}"),
                "a Helm release, rendered by helm".to_string(),
            ),
            Tool::HelmTemplates => (
                format!("Helm templates {shown}"),
                format!(
                    "Helm templates (`{{{{ … }}}}`) are not manifests until Helm renders them, so \
                     no file of this folder was read; put them in a chart (a folder with \
                     Chart.yaml) that a {HELM_RELEASE_FILE} renders, {leave_out}"
                ),
            ),
            Tool::HelmValues => (
                format!("Helm values {shown}"),
                format!(
                    "Helm values (a values*.yaml that is no Kubernetes object: it has no kind) \
                     are input to `helm template`, not manifests, so it was not read; name it \
                     in a {HELM_RELEASE_FILE}'s `spec.valuesFiles`, {}",
                    leave_out
                ),
            ),
        };
        Diagnostic {
            origin: Origin {
                file: format!("{root}{}", self.marker),
                document: 0,
                line: 1,
            },
            object,
            field: String::new(),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn found(files: &[(&str, &str)]) -> Vec<(Tool, String)> {
        let map: BTreeMap<&str, &[u8]> = files.iter().map(|(p, c)| (*p, c.as_bytes())).collect();
        let paths: Vec<&str> = map.keys().copied().collect();
        find(&paths, |p| map.get(p).copied())
            .into_iter()
            .map(|u| (u.tool, u.folder))
            .collect()
    }

    #[test]
    fn charts_and_kustomizations_are_found_once_at_their_outermost_folder() {
        let got = found(&[
            ("apps/ns.yaml", "kind: Namespace\n"),
            ("charts/web/Chart.yaml", "name: web\n"),
            ("charts/web/values.yaml", "replicas: 2\n"),
            ("charts/web/values-prod.yaml", "replicas: 3\n"),
            (
                "charts/web/templates/deploy.yaml",
                "kind: Deployment\nname: {{ .Release.Name }}\n",
            ),
            ("charts/web/charts/sub/Chart.yaml", "name: sub\n"),
            (
                "overlays/prod/kustomization.yaml",
                "resources: [../../base]\n",
            ),
            ("overlays/prod/patch.yaml", "spec: {replicas: 3}\n"),
            ("overlays/prod/extra/kustomization.yaml", "resources: []\n"),
            ("base/Kustomization", ""),
            ("base/deploy.yaml", "kind: Deployment\n"),
            ("releases/web/helmrelease.yaml", "kind: HelmRelease\n"),
            ("releases/web/values-prod.yaml", "replicas: 3\n"),
            ("releases/web/chart/Chart.yaml", "name: inner\n"),
        ]);
        assert_eq!(
            got,
            vec![
                (Tool::Kustomize, "base".to_string()),
                (Tool::HelmChart, "charts/web".to_string()),
                (Tool::Kustomize, "overlays/prod".to_string()),
                (Tool::HelmRelease, "releases/web".to_string()),
            ]
        );
        assert_eq!(rendered_by("releases/web/helmrelease.yaml"), Some("helm"));
        assert_eq!(
            rendered_by("overlays/prod/kustomization.yaml"),
            Some("kustomize")
        );
        assert_eq!(rendered_by("releases/web/values.yaml"), None);
    }

    #[test]
    fn templates_and_values_outside_a_chart_are_found_but_plain_manifests_are_not() {
        let got = found(&[
            (
                "lib/templates/a.yaml",
                "kind: ConfigMap\ndata: {x: '{{ .Values.x }}'}\n",
            ),
            ("lib/templates/b.yaml", "kind: ConfigMap\n"),
            ("apps/templates/plain.yaml", "kind: ConfigMap\n"),
            ("values.yaml", "image: nginx\n"),
            ("apps/values-cm.yaml", "apiVersion: v1\nkind: ConfigMap\n"),
        ]);
        assert_eq!(
            got,
            vec![
                (Tool::HelmTemplates, "lib/templates".to_string()),
                (Tool::HelmValues, "values.yaml".to_string()),
            ]
        );
    }

    #[test]
    fn the_diagnostic_names_the_tool_and_the_ignore_line_relative_to_the_path() {
        let u = Unrendered {
            tool: Tool::HelmChart,
            folder: "charts/web".into(),
            marker: "charts/web/Chart.yaml".into(),
        };
        let d = u.diagnostic("fleet/").to_string();
        assert!(
            d.starts_with("fleet/charts/web/Chart.yaml:1: Helm chart fleet/charts/web: a Helm chart (Chart.yaml) that no helmrelease.yaml uses"),
            "{d}"
        );
        assert!(
            d.contains(
                "or leave the folder out with the line `/charts/web/` in fleet/.gitfleetignore"
            ),
            "{d}"
        );
        assert!(u.covers("charts/web/templates/x.yaml") && !u.covers("charts/webx.yaml"));
    }
}
