//! Per-cluster manifests (§4.1): what one placement puts on one member cluster. The selected hub
//! objects of the placement get the overrides that follow the placement (JSON patches with
//! variables, `Delete`), envelopes are replaced by the objects they carry (overrides applied to
//! those too), and the result is put in apply order (waves, §4.2).
//!
//! Pure: it takes values and returns values. It does not know where the selection, the overrides
//! or the cluster labels came from, nor how manifests are applied.
//!
//! Decisions where KubeFleet leaves room:
//! - Override selectors match a resource by group, kind and name; the version is not part of the
//!   identity (KubeFleet compares the version too, because its hub serves each object in the
//!   version the placement selected; a repository holds each object once, as written).
//! - ClusterResourceOverrides follow
//!   [`crate::model::overrides::ClusterResourceOverride::follows_placement`] (one without
//!   `spec.placement` that selects Namespace X applies to ResourcePlacements in X too);
//!   ResourceOverrides follow [`crate::model::overrides::ResourceOverride::follows_placement`].
//! - A `Delete` rule drops the resource for that cluster: no later rule of the override and no
//!   later override is evaluated.
//! - Overrides never apply to an envelope itself (one that selects only an envelope changes
//!   nothing); they apply to each object it carries, as KubeFleet's work generator does.
//! - An object that its overrides have made invalid as an embedded Kubernetes object (what the
//!   hub's `Work` CRD, `x-kubernetes-embedded-resource`, admits: apiVersion, kind, metadata) is
//!   not delivered: rendering fails for that cluster naming the overrides, as KubeFleet's Work
//!   creation fails with `WorkSynchronized=False`.
//! - Order: by wave; within a wave, plain objects in selection order, then the contents of
//!   envelopes in selection order of the envelopes, each envelope's contents sorted by their JSON
//!   (keys sorted, compact) descending before overrides, as KubeFleet sorts an envelope's raw
//!   manifests.
//! - Two manifests with the same identity (group, kind, namespace, name) are an error: a member
//!   would refuse the second.

pub mod cluster;
mod envelope;
mod overrides;
mod waves;

pub use crate::model::envelope::EnvelopeKind;
pub use overrides::{
    ClusterKey, OverrideFailure, OverrideRef, CLUSTER_LABEL_KEY_VARIABLE_PREFIX,
    CLUSTER_NAME_VARIABLE,
};
pub use waves::{wave_of, LAST_WAVE};

use crate::model::overrides::{ClusterResourceOverride, ResourceOverride};
use crate::model::scope::ScopeTable;
use crate::model::{Gvk, Labels, ObjectKey, Problem};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The member cluster being rendered for: its name and labels (the label
/// `kubernetes-fleet.io/member-name` included, if the inventory adds it).
#[derive(Debug, Clone, Copy)]
pub struct ClusterTarget<'a> {
    pub name: &'a str,
    pub labels: &'a Labels,
}

/// The placement being rendered: a ClusterResourcePlacement when `namespace` is `None`, else a
/// ResourcePlacement in that namespace.
#[derive(Debug, Clone, Copy)]
pub struct PlacementRef<'a> {
    pub name: &'a str,
    pub namespace: Option<&'a str>,
}

/// Every override of the commit; rendering keeps those that follow the placement.
#[derive(Debug, Clone, Default)]
pub struct OverrideSet<'a> {
    pub cluster: Vec<&'a ClusterResourceOverride>,
    pub namespaced: Vec<&'a ResourceOverride>,
}

/// The envelope that carried a manifest (KubeFleet's `EnvelopeIdentifier`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EnvelopeRef {
    pub kind: EnvelopeKind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl fmt::Display for EnvelopeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// One object to apply on the member, with its apply wave and the envelope that carried it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Shared with the selection (and so with the catalog) until an override patches it: one
    /// object rendered for 300 clusters is one value in memory.
    #[serde(with = "crate::model::object::shared_value")]
    pub value: Arc<Value>,
    pub wave: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<EnvelopeRef>,
    /// An OCM work's `manifestConfigs` and `deleteOption`, when it has any beyond gitfleet's
    /// defaults (the member resolves which holds for this object: it knows the resource name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<crate::model::work::WorkConfig>,
}

/// Why a placement cannot be rendered for a cluster. All are user errors: nothing changes until
/// the repository (or the cluster's labels) does.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    /// KubeFleet: binding `Overridden=False`, reason `OverriddenFailed`.
    #[error(transparent)]
    Override(Box<OverrideError>),
    /// An envelope whose contents break the envelope rules (scope, namespace, shape).
    #[error("invalid envelope {envelope}: {}", list(.problems))]
    Envelope {
        envelope: EnvelopeRef,
        problems: Vec<Problem>,
    },
    /// A selected value without `apiVersion`, `kind` or `metadata.name`.
    #[error("selected resource #{index} is not a Kubernetes object: {reason}")]
    InvalidResource { index: usize, reason: String },
    /// Two manifests with one identity: a member would refuse the second.
    #[error(transparent)]
    Duplicate(Box<DuplicateError>),
    /// KubeFleet: binding `WorkSynchronized=False`, reason `SyncWorkFailed` (the hub refuses the
    /// Work that would carry the object).
    #[error(transparent)]
    InvalidAfterOverride(Box<InvalidAfterOverride>),
}

impl RenderError {
    /// KubeFleet reports this one as `WorkSynchronized=False` (`SyncWorkFailed`) rather than
    /// `Overridden=False` (`OverriddenFailed`): the overrides applied, the Work was refused.
    pub fn is_work_sync_failure(&self) -> bool {
        matches!(self, RenderError::InvalidAfterOverride(_))
    }
}

/// An object that its overrides made invalid for one cluster.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("Failed to synchronize the work to the latest: {resource}{} for cluster {cluster} is not a valid Kubernetes object after {}: {}", carried_by(.envelope), overrides_list(.overrides), list(.problems), resource = .resource.short())]
pub struct InvalidAfterOverride {
    pub resource: ObjectKey,
    pub envelope: Option<EnvelopeRef>,
    pub cluster: String,
    /// The overrides that patched it, in application order.
    pub overrides: Vec<OverrideRef>,
    pub problems: Vec<Problem>,
}

fn overrides_list(overrides: &[OverrideRef]) -> String {
    let names: Vec<String> = overrides.iter().map(|o| o.to_string()).collect();
    format!("the overrides {}", names.join(", "))
}

/// One override rule that could not be applied to one resource for one cluster.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("Failed to apply the override rules on the resources: {override_ref} rule {rule} on {resource}{} for cluster {cluster}: {failure}", carried_by(.envelope), resource = .resource.short())]
pub struct OverrideError {
    pub override_ref: OverrideRef,
    /// Index of the rule in `spec.policy.overrideRules`.
    pub rule: usize,
    pub resource: ObjectKey,
    /// The envelope that carried the resource, if any.
    pub envelope: Option<EnvelopeRef>,
    pub cluster: String,
    pub failure: OverrideFailure,
}

/// The same object (group, kind, namespace, name) rendered twice for one cluster.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{resource} would be applied twice to cluster {cluster} (from {} and from {})", source_of(.first), source_of(.second), resource = .resource.short())]
pub struct DuplicateError {
    pub resource: ObjectKey,
    pub cluster: String,
    /// Where the first and the second copy came from: `None` for the selected resources.
    pub first: Option<EnvelopeRef>,
    pub second: Option<EnvelopeRef>,
}

fn carried_by(envelope: &Option<EnvelopeRef>) -> String {
    envelope
        .as_ref()
        .map(|e| format!(" (carried by {e})"))
        .unwrap_or_default()
}

fn source_of(envelope: &Option<EnvelopeRef>) -> String {
    envelope
        .as_ref()
        .map_or_else(|| "the selected resources".to_string(), |e| e.to_string())
}

fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| {
            if p.field.is_empty() {
                p.message.clone()
            } else {
                format!("{}: {}", p.field, p.message)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Renders one placement for one cluster: `selected` are the placement's selected hub objects
/// (sanitised, in snapshot order), `overrides` every override of the commit.
pub fn render_for_cluster(
    placement: &PlacementRef,
    selected: &[Arc<Value>],
    overrides: &OverrideSet,
    cluster: &ClusterTarget,
    scopes: &ScopeTable,
) -> Result<Vec<Manifest>, RenderError> {
    let applicable = overrides::Applicable::new(placement, overrides);
    let selected: Vec<&Arc<Value>> = selected.iter().collect();
    render_with(&applicable, &selected, cluster, scopes)
}

/// [`render_for_cluster`] with the placement's overrides already chosen.
fn render_with(
    applicable: &overrides::Applicable,
    selected: &[&Arc<Value>],
    cluster: &ClusterTarget,
    scopes: &ScopeTable,
) -> Result<Vec<Manifest>, RenderError> {
    let mut out: Vec<(Order, ObjectKey, Manifest)> = Vec::new();
    for (i, value) in selected.iter().enumerate() {
        let key =
            identity(value).map_err(|reason| RenderError::InvalidResource { index: i, reason })?;
        // Overrides never apply to an envelope itself, only to what it carries: KubeFleet's
        // work generator applies them in its non-envelope branch and to each extracted manifest
        // (pkg/controllers/workgenerator/controller.go processOneSelectedResource, envelope.go
        // applyOverridesToEnvelopeManifests).
        match envelope::unwrap(value, scopes) {
            None => {
                let Some(value) = applicable.apply(Arc::clone(value), &key, None, cluster)? else {
                    continue;
                };
                check_embedded(&value, &key, None, applicable, cluster)?;
                let wave = wave_of(key.group(), key.kind());
                out.push(((wave, false, i, 0), key, manifest(value, wave, None)));
            }
            Some(unwrapped) => {
                let (envelope, contents) = unwrapped?;
                for (j, inner) in contents.into_iter().enumerate() {
                    // The envelope rules guarantee the identity of what it carries.
                    let inner_key =
                        identity(&inner).map_err(|reason| RenderError::InvalidResource {
                            index: i,
                            reason: format!("in {envelope}: {reason}"),
                        })?;
                    let Some(inner) =
                        applicable.apply(Arc::new(inner), &inner_key, Some(&envelope), cluster)?
                    else {
                        continue;
                    };
                    check_embedded(&inner, &inner_key, Some(&envelope), applicable, cluster)?;
                    let wave = wave_of(inner_key.group(), inner_key.kind());
                    let m = manifest(inner, wave, Some(envelope.clone()));
                    out.push(((wave, true, i, j), inner_key, m));
                }
            }
        }
    }
    out.sort_by_key(|(order, _, _)| *order);
    check_duplicates(&out, cluster)?;
    Ok(out.into_iter().map(|(_, _, m)| m).collect())
}

/// Fails when overrides patched `value` into something the hub's `Work` API refuses as an
/// embedded resource (see [`embedded_problems`]).
fn check_embedded(
    value: &Value,
    key: &ObjectKey,
    envelope: Option<&EnvelopeRef>,
    applicable: &overrides::Applicable,
    cluster: &ClusterTarget,
) -> Result<(), RenderError> {
    let overrides = applicable.patching(key, cluster);
    if overrides.is_empty() {
        return Ok(());
    }
    let problems = embedded_problems(value);
    if problems.is_empty() {
        return Ok(());
    }
    Err(RenderError::InvalidAfterOverride(Box::new(
        InvalidAfterOverride {
            resource: key.clone(),
            envelope: envelope.cloned(),
            cluster: cluster.name.to_string(),
            overrides,
            problems,
        },
    )))
}

/// What the API server checks of an embedded resource (`x-kubernetes-embedded-resource`, as
/// KubeFleet's `Work.spec.workload.manifests` are): `apiVersion` and `kind` non-empty strings,
/// and `metadata` an ObjectMeta (name and namespace strings, labels and annotations maps of
/// strings with valid keys, label values valid).
pub fn embedded_problems(value: &Value) -> Vec<Problem> {
    use crate::model::{is_label_value, is_qualified_name};
    let mut problems = Vec::new();
    let mut push = |field: &str, message: String| problems.push(Problem::new(field, message));
    for field in ["apiVersion", "kind"] {
        match value.get(field) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(Value::String(_)) | None => push(field, "Required value".into()),
            Some(other) => push(field, format!("must be a string, got {other}")),
        }
    }
    if let Some(Value::String(v)) = value.get("apiVersion") {
        if v.matches('/').count() > 1 {
            push("apiVersion", format!("{v:?} is not a group/version"));
        }
    }
    let Some(meta) = value.get("metadata") else {
        return problems;
    };
    let Some(meta) = meta.as_object() else {
        push("metadata", format!("must be an object, got {meta}"));
        return problems;
    };
    for field in ["name", "namespace", "generateName"] {
        if let Some(v) = meta.get(field) {
            if !v.is_string() {
                push(
                    &format!("metadata.{field}"),
                    format!("must be a string, got {v}"),
                );
            }
        }
    }
    for (field, values_are_labels) in [("labels", true), ("annotations", false)] {
        let Some(map) = meta.get(field) else { continue };
        let path = format!("metadata.{field}");
        let Some(map) = map.as_object() else {
            push(&path, format!("must be a map of strings, got {map}"));
            continue;
        };
        for (k, v) in map {
            if !is_qualified_name(k) {
                push(&path, format!("key {k:?} is not a valid qualified name"));
            }
            match v.as_str() {
                None => push(&format!("{path}.{k}"), format!("must be a string, got {v}")),
                Some(s) if values_are_labels && !is_label_value(s) => push(
                    &format!("{path}.{k}"),
                    format!("{s:?} is not a valid label value"),
                ),
                Some(_) => {}
            }
        }
    }
    problems
}

fn manifest(value: Arc<Value>, wave: u32, envelope: Option<EnvelopeRef>) -> Manifest {
    Manifest {
        value,
        wave,
        envelope,
        work: None,
    }
}

/// Group, kind, namespace (when set) and name of an object.
fn identity(value: &Value) -> Result<ObjectKey, String> {
    let text = |ptr: &str| {
        value
            .pointer(ptr)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let api_version = text("/apiVersion").ok_or("it has no apiVersion")?;
    let kind = text("/kind").ok_or("it has no kind")?;
    let name = text("/metadata/name").ok_or("it has no metadata.name")?;
    let gvk = Gvk::from_api_version(api_version, kind);
    Ok(ObjectKey::new(
        &gvk.group,
        &gvk.kind,
        text("/metadata/namespace"),
        name,
    ))
}

/// Where a manifest goes in the output: wave, carried by an envelope, index in `selected`, index
/// in the envelope's sorted contents.
type Order = (u32, bool, usize, usize);

fn check_duplicates(
    out: &[(Order, ObjectKey, Manifest)],
    cluster: &ClusterTarget,
) -> Result<(), RenderError> {
    let mut seen: BTreeMap<&ObjectKey, &Option<EnvelopeRef>> = BTreeMap::new();
    for (_, key, m) in out {
        if let Some(first) = seen.insert(key, &m.envelope) {
            return Err(RenderError::Duplicate(Box::new(DuplicateError {
                resource: key.clone(),
                cluster: cluster.name.to_string(),
                first: first.clone(),
                second: m.envelope.clone(),
            })));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

/// Whether `value` is a Secret (`v1`), whose `data` and `stringData` are never shown.
pub fn is_secret(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some("Secret")
        && value.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// `value` as it may be shown to people: a Secret's `data` and `stringData` values replaced by
/// `***` (its keys kept), everything else as it is.
pub fn masked(value: &Value) -> std::borrow::Cow<'_, Value> {
    if !is_secret(value) {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut value = value.clone();
    for field in ["data", "stringData"] {
        if let Some(map) = value.get_mut(field).and_then(Value::as_object_mut) {
            for v in map.values_mut() {
                *v = Value::String("***".into());
            }
        }
    }
    std::borrow::Cow::Owned(value)
}
