//! `HelmRelease` (`gitfleet.io/v1alpha1`): gitfleet's own declaration of one Helm release of a
//! chart kept in the repository, read from a file named [`FILE_NAME`]. Shaped after Rancher
//! Fleet's `fleet.yaml` `helm:` section and Flux's `HelmRelease` (a chart, a release name, a
//! namespace, values files and inline values), with what gitfleet cannot do left out: no chart
//! repository, version or `valuesFrom` (charts are rendered without network, from the commit
//! alone), and no per-cluster values (hub objects are rendered once per commit; overrides vary
//! them per cluster).
//!
//! Pure: the document in, the typed declaration or its problems (with field paths) out.

use super::{decode, is_dns1123_label, Problem, Problems};
use serde::Deserialize;
use serde_json::Value;

/// The group and version of gitfleet's own kinds.
pub const API_VERSION: &str = "gitfleet.io/v1alpha1";
pub const KIND: &str = "HelmRelease";
/// The file a release is declared in: one per folder, as one kustomization is.
pub const FILE_NAME: &str = "helmrelease.yaml";

/// Helm's own limit on a release name (it names Secrets and labels).
const RELEASE_NAME_MAX: usize = 53;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HelmRelease {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    pub spec: Spec,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    pub name: String,
    /// Kept for the reader; gitfleet does not use them.
    #[serde(default)]
    pub labels: Option<Value>,
    #[serde(default)]
    pub annotations: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// The chart: a folder holding `Chart.yaml` or a packaged chart (`.tgz`), relative to the
    /// declaration's folder.
    pub chart: String,
    /// The release name (`.Release.Name`); `metadata.name` when omitted.
    #[serde(default)]
    pub release_name: Option<String>,
    /// The release namespace (`.Release.Namespace`): where rendered namespaced objects that
    /// name no namespace go, as `helm install --namespace` puts them.
    pub namespace: String,
    /// Values files relative to the declaration's folder, in order (later ones win).
    #[serde(default)]
    pub values_files: Vec<String>,
    /// Values given inline, applied after the values files.
    #[serde(default)]
    pub values: Option<Value>,
    /// Leaves out the CRDs of the chart's `crds/` folder (helm's `--skip-crds`): a second
    /// release of a chart would place them twice.
    #[serde(default, rename = "skipCRDs")]
    pub skip_crds: bool,
}

impl HelmRelease {
    /// The release name helm renders with.
    pub fn release_name(&self) -> &str {
        self.spec
            .release_name
            .as_deref()
            .unwrap_or(&self.metadata.name)
    }

    /// Decodes one document strictly and checks it; every problem, each with its field path.
    pub fn parse(doc: &Value) -> Result<HelmRelease, Vec<Problem>> {
        let mut problems = Problems::default();
        if let Some(map) = doc.as_object() {
            let api_version = map.get("apiVersion").and_then(Value::as_str);
            if api_version != Some(API_VERSION) {
                problems.push(
                    "apiVersion",
                    format!("must be {API_VERSION} (gitfleet's own kind, read from {FILE_NAME})"),
                );
            }
            if map.get("kind").and_then(Value::as_str) != Some(KIND) {
                problems.push("kind", format!("must be {KIND} in {FILE_NAME}"));
            }
        }
        if !problems.is_empty() {
            return Err(problems.0);
        }
        let release: HelmRelease = decode(doc).map_err(|p| vec![p])?;
        release.check(&mut problems);
        if problems.is_empty() {
            Ok(release)
        } else {
            Err(problems.0)
        }
    }

    fn check(&self, problems: &mut Problems) {
        let name = self.release_name();
        let field = if self.spec.release_name.is_some() {
            "spec.releaseName"
        } else {
            "metadata.name"
        };
        if !is_dns1123_label(name) || name.len() > RELEASE_NAME_MAX {
            problems.push(
                field,
                format!(
                    "Invalid value: {name:?}: a release name is a DNS-1123 label of at most \
                     {RELEASE_NAME_MAX} characters (helm's rule)"
                ),
            );
        }
        if !is_dns1123_label(&self.spec.namespace) {
            problems.push(
                "spec.namespace",
                format!(
                    "Invalid value: {:?}: a namespace is a DNS-1123 label",
                    self.spec.namespace
                ),
            );
        }
        if self.spec.chart.is_empty() {
            problems.push("spec.chart", "Required value: the chart's folder or .tgz");
        }
        if let Some(v) = &self.spec.values {
            if !v.is_object() && !v.is_null() {
                problems.push("spec.values", "must be a mapping of values");
            }
        }
        for (i, f) in self.spec.values_files.iter().enumerate() {
            if f.is_empty() {
                problems.push(format!("spec.valuesFiles[{i}]"), "Required value: a path");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HelmRelease, Vec<String>> {
        let doc = crate::yaml::documents(text).unwrap().remove(0);
        HelmRelease::parse(&doc).map_err(|ps| {
            ps.into_iter()
                .map(|p| format!("{}: {}", p.field, p.message))
                .collect()
        })
    }

    const HEAD: &str =
        "apiVersion: gitfleet.io/v1alpha1\nkind: HelmRelease\nmetadata: {name: web}\n";

    #[test]
    fn a_full_declaration_reads_and_the_release_name_defaults_to_the_name() {
        let r = parse(&format!(
            "{HEAD}spec:\n  chart: ../../charts/web\n  namespace: web\n  valuesFiles: [prod.yaml]\n  values: {{replicas: 3}}\n"
        ))
        .unwrap();
        assert_eq!(r.release_name(), "web");
        assert_eq!(r.spec.chart, "../../charts/web");
        assert_eq!(r.spec.values_files, vec!["prod.yaml".to_string()]);
        assert_eq!(r.spec.values, Some(serde_json::json!({"replicas": 3})));
        assert!(!r.spec.skip_crds);
        let r = parse(&format!(
            "{HEAD}spec: {{chart: c, namespace: web, releaseName: web-prod, skipCRDs: true}}\n"
        ))
        .unwrap();
        assert_eq!(r.release_name(), "web-prod");
        assert!(r.spec.skip_crds);
    }

    #[test]
    fn unknown_fields_and_bad_values_are_refused_with_their_field() {
        for (text, want) in [
            (
                format!("{HEAD}spec: {{chart: c, namespace: web, repo: https://charts.example.com}}\n"),
                "spec.repo: unknown field `repo`, expected one of `chart`, `releaseName`, `namespace`, `valuesFiles`, `values`, `skipCRDs`",
            ),
            (
                "apiVersion: gitfleet.io/v1alpha1\nkind: HelmRelease\nmetadata: {name: web, namespace: x}\nspec: {chart: c, namespace: web}\n".to_string(),
                "metadata.namespace: unknown field `namespace`",
            ),
            (
                format!("{HEAD}spec: {{chart: c}}\n"),
                "spec: missing field `namespace`",
            ),
            (
                format!("{HEAD}spec: {{chart: c, namespace: Web_1}}\n"),
                "spec.namespace: Invalid value: \"Web_1\"",
            ),
            (
                format!("{HEAD}spec: {{chart: c, namespace: web, releaseName: Bad.Name}}\n"),
                "spec.releaseName: Invalid value: \"Bad.Name\"",
            ),
            (
                format!("{HEAD}spec: {{chart: c, namespace: web, values: [1]}}\n"),
                "spec.values: must be a mapping",
            ),
            (
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web}\n"
                    .to_string(),
                "apiVersion: must be gitfleet.io/v1alpha1",
            ),
        ] {
            let got = parse(&text).unwrap_err();
            assert!(
                got.iter().any(|g| g.starts_with(want)),
                "{text}: want {want:?}, got {got:?}"
            );
        }
    }
}
