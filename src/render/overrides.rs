//! Applying ClusterResourceOverrides and ResourceOverrides to one resource for one cluster (§1.9):
//! which overrides follow the placement, which of them select the resource, rule by rule cluster
//! matching, `Delete`, RFC 6902 patches and the `${MEMBER-CLUSTER-...}` variables.

use super::{ClusterTarget, EnvelopeRef, OverrideError, OverrideSet, PlacementRef, RenderError};
use crate::model::overrides::{
    ClusterResourceOverride, JsonPatchOverride, OverrideRule, OverrideType, ResourceOverride,
    CLUSTER_RESOURCE_OVERRIDE, RESOURCE_OVERRIDE,
};
use crate::model::ObjectKey;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt;
use std::sync::Arc;

/// Replaced by the member cluster's name.
pub const CLUSTER_NAME_VARIABLE: &str = "${MEMBER-CLUSTER-NAME}";
/// `${MEMBER-CLUSTER-LABEL-KEY-<key>}` is replaced by the value of the cluster's label `<key>`.
pub const CLUSTER_LABEL_KEY_VARIABLE_PREFIX: &str = "${MEMBER-CLUSTER-LABEL-KEY-";

/// Names one override in errors: `ClusterResourceOverride cro` or `ResourceOverride app/ro`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OverrideRef {
    /// `ClusterResourceOverride` or `ResourceOverride`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for OverrideRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Why one override rule could not be applied to a resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideFailure {
    #[error("label key {key:?} not found on the cluster")]
    MissingLabel { key: String },
    #[error("the value {value} of jsonPatchOverrides[{patch}] is missing the closing bracket `}}` of a ${{MEMBER-CLUSTER-LABEL-KEY-<key>}} variable")]
    UnclosedVariable { patch: usize, value: String },
    #[error("the value of jsonPatchOverrides[{patch}] is not valid JSON after variable substitution: {reason}")]
    InvalidValue { patch: usize, reason: String },
    #[error("jsonPatchOverrides[{patch}] is not a valid JSON patch operation: {reason}")]
    InvalidPatch { patch: usize, reason: String },
    #[error("jsonPatchOverrides[{patch}] ({op} {path}) failed: {reason}")]
    Patch {
        patch: usize,
        op: String,
        path: String,
        reason: String,
    },
}

/// The overrides that follow one placement, in application order: ClusterResourceOverrides by
/// name, then ResourceOverrides by (namespace, name), so a ResourceOverride has the last word.
pub(super) struct Applicable<'a> {
    cluster: Vec<&'a ClusterResourceOverride>,
    namespaced: Vec<&'a ResourceOverride>,
    /// Every rule of `cluster` then `namespaced`, in order, and whether it uses variables.
    rules: Vec<(&'a OverrideRule, bool)>,
}

/// What of a cluster one placement's rendering reads (see [`Applicable::cluster_key`]): two
/// clusters with equal keys get the same manifests, though not the same errors (which name the
/// cluster).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClusterKey {
    /// Which override rules select the cluster, in application order (one bit per rule).
    Rules(Vec<u64>),
    /// A rule that selects the cluster substitutes its name or labels: this cluster only.
    Cluster(String),
}

/// What the rules of one override did to a resource.
enum Outcome {
    Kept,
    Deleted,
}

impl<'a> Applicable<'a> {
    /// Which overrides follow the placement: see [`ClusterResourceOverride::follows_placement`]
    /// (one without `spec.placement` follows ResourcePlacements too, through their Namespace)
    /// and [`ResourceOverride::follows_placement`].
    pub(super) fn new(placement: &PlacementRef, set: &OverrideSet<'a>) -> Self {
        let mut cluster: Vec<&ClusterResourceOverride> = set
            .cluster
            .iter()
            .copied()
            .filter(|o| o.follows_placement(placement.name, placement.namespace))
            .collect();
        cluster.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut namespaced: Vec<&ResourceOverride> = set
            .namespaced
            .iter()
            .copied()
            .filter(|o| o.follows_placement(placement.name, placement.namespace))
            .collect();
        namespaced.sort_by(|a, b| {
            (a.namespace(), a.metadata.name.as_str())
                .cmp(&(b.namespace(), b.metadata.name.as_str()))
        });
        let rules = cluster
            .iter()
            .map(|o| &o.spec.policy.override_rules)
            .chain(namespaced.iter().map(|o| &o.spec.policy.override_rules))
            .flatten()
            .map(|r| (r, rule_has_variables(r)))
            .collect();
        Self {
            cluster,
            namespaced,
            rules,
        }
    }

    /// Do both follow the same overrides (equal in content, in the same order)? Then they render
    /// any resource alike for clusters with equal [`ClusterKey`]s.
    pub(super) fn same_as(&self, other: &Applicable) -> bool {
        self.cluster.len() == other.cluster.len()
            && self.namespaced.len() == other.namespaced.len()
            && self.cluster.iter().zip(&other.cluster).all(|(a, b)| a == b)
            && self
                .namespaced
                .iter()
                .zip(&other.namespaced)
                .all(|(a, b)| a == b)
    }

    /// The cluster's [`ClusterKey`]: the cluster enters rendering only through the rules whose
    /// cluster selector matches it ([`apply_rules`]) and the variables those rules substitute.
    pub(super) fn cluster_key(&self, cluster: &ClusterTarget) -> ClusterKey {
        let mut bits = Vec::new();
        for (i, (rule, has_variables)) in self.rules.iter().enumerate() {
            if i % 64 == 0 {
                bits.push(0u64);
            }
            if rule.selects_cluster(cluster.labels) {
                if *has_variables {
                    return ClusterKey::Cluster(cluster.name.to_string());
                }
                bits[i / 64] |= 1 << (i % 64);
            }
        }
        ClusterKey::Rules(bits)
    }

    /// The overrides with a JSON patch rule for `resource` on this cluster, in application
    /// order: those that may have changed it.
    pub(super) fn patching(
        &self,
        resource: &ObjectKey,
        cluster: &ClusterTarget,
    ) -> Vec<OverrideRef> {
        let patches = |rules: &[OverrideRule]| {
            rules.iter().any(|r| {
                r.override_type == OverrideType::JSONPatch && r.selects_cluster(cluster.labels)
            })
        };
        let mut out: Vec<OverrideRef> = self
            .cluster
            .iter()
            .filter(|o| match resource.namespace() {
                None => o.selects(resource.group(), resource.kind(), resource.name()),
                Some(ns) => o.selects_namespace(ns),
            })
            .filter(|o| patches(&o.spec.policy.override_rules))
            .map(|o| OverrideRef {
                kind: CLUSTER_RESOURCE_OVERRIDE.into(),
                namespace: None,
                name: o.metadata.name.clone(),
            })
            .collect();
        if let Some(ns) = resource.namespace() {
            out.extend(
                self.namespaced
                    .iter()
                    .filter(|o| o.selects(resource.group(), resource.kind(), ns, resource.name()))
                    .filter(|o| patches(&o.spec.policy.override_rules))
                    .map(|o| OverrideRef {
                        kind: RESOURCE_OVERRIDE.into(),
                        namespace: Some(o.namespace().to_string()),
                        name: o.metadata.name.clone(),
                    }),
            );
        }
        out
    }

    /// Applies every override that selects `resource` to `value`: `Ok(None)` when a `Delete`
    /// rule drops it for this cluster (no later rule or override is evaluated).
    pub(super) fn apply(
        &self,
        mut value: Arc<Value>,
        resource: &ObjectKey,
        envelope: Option<&EnvelopeRef>,
        cluster: &ClusterTarget,
    ) -> Result<Option<Arc<Value>>, RenderError> {
        let fail = |override_ref: OverrideRef, (rule, failure): (usize, OverrideFailure)| {
            RenderError::Override(Box::new(OverrideError {
                override_ref,
                rule,
                resource: resource.clone(),
                envelope: envelope.cloned(),
                cluster: cluster.name.to_string(),
                failure,
            }))
        };
        let cluster_overrides = self.cluster.iter().filter(|o| match resource.namespace() {
            None => o.selects(resource.group(), resource.kind(), resource.name()),
            Some(ns) => o.selects_namespace(ns),
        });
        for o in cluster_overrides {
            let r = OverrideRef {
                kind: CLUSTER_RESOURCE_OVERRIDE.into(),
                namespace: None,
                name: o.metadata.name.clone(),
            };
            match apply_rules(&o.spec.policy.override_rules, &mut value, cluster) {
                Ok(Outcome::Kept) => {}
                Ok(Outcome::Deleted) => return Ok(None),
                Err(e) => return Err(fail(r, e)),
            }
        }
        let Some(ns) = resource.namespace() else {
            return Ok(Some(value));
        };
        let resource_overrides = self
            .namespaced
            .iter()
            .filter(|o| o.selects(resource.group(), resource.kind(), ns, resource.name()));
        for o in resource_overrides {
            let r = OverrideRef {
                kind: RESOURCE_OVERRIDE.into(),
                namespace: Some(o.namespace().to_string()),
                name: o.metadata.name.clone(),
            };
            match apply_rules(&o.spec.policy.override_rules, &mut value, cluster) {
                Ok(Outcome::Kept) => {}
                Ok(Outcome::Deleted) => return Ok(None),
                Err(e) => return Err(fail(r, e)),
            }
        }
        Ok(Some(value))
    }
}

/// Does a patch of the rule use `${MEMBER-CLUSTER-...}` variables (as [`substitute_value`]
/// looks for them)?
fn rule_has_variables(rule: &OverrideRule) -> bool {
    rule.json_patch_overrides.iter().any(|p| {
        p.value
            .as_ref()
            .is_some_and(|v| v.to_string().contains("${MEMBER-CLUSTER-"))
    })
}

/// Rules in order; a rule whose cluster selector does not match is skipped.
fn apply_rules(
    rules: &[OverrideRule],
    value: &mut Arc<Value>,
    cluster: &ClusterTarget,
) -> Result<Outcome, (usize, OverrideFailure)> {
    for (i, rule) in rules.iter().enumerate() {
        if !rule.selects_cluster(cluster.labels) {
            continue;
        }
        match rule.override_type {
            OverrideType::Delete => return Ok(Outcome::Deleted),
            OverrideType::JSONPatch => {
                // Copied here, on the first patch for this cluster: an object no override
                // patches stays the selection's value.
                apply_patches(&rule.json_patch_overrides, Arc::make_mut(value), cluster)
                    .map_err(|e| (i, e))?
            }
        }
    }
    Ok(Outcome::Kept)
}

/// The patches of one rule, as one RFC 6902 patch: all of them or none.
fn apply_patches(
    patches: &[JsonPatchOverride],
    value: &mut Value,
    cluster: &ClusterTarget,
) -> Result<(), OverrideFailure> {
    let mut ops = Vec::with_capacity(patches.len());
    for (i, p) in patches.iter().enumerate() {
        let mut op = json!({"op": p.op.as_str(), "path": p.path});
        if p.op != crate::model::overrides::PatchOp::Remove {
            // An absent value is `null`, as KubeFleet marshals it.
            let v = p.value.clone().unwrap_or(Value::Null);
            op["value"] = substitute_value(&v, i, cluster)?;
        }
        let op: json_patch::PatchOperation =
            serde_json::from_value(op).map_err(|e| OverrideFailure::InvalidPatch {
                patch: i,
                reason: e.to_string(),
            })?;
        ops.push(op);
    }
    json_patch::patch(value, &ops).map_err(|e| {
        let p = &patches[e.operation];
        let reason = match e.kind {
            json_patch::PatchErrorKind::InvalidPointer => {
                "the path does not exist in the resource (or an array index is out of range)"
                    .to_string()
            }
            other => other.to_string(),
        };
        OverrideFailure::Patch {
            patch: e.operation,
            op: p.op.as_str().into(),
            path: p.path.clone(),
            reason,
        }
    })
}

/// Replaces the variables in the JSON text of `value` (case-sensitive), then reads it back.
fn substitute_value(
    value: &Value,
    patch: usize,
    cluster: &ClusterTarget,
) -> Result<Value, OverrideFailure> {
    let text = value.to_string();
    if !text.contains("${MEMBER-CLUSTER-") {
        return Ok(value.clone());
    }
    let replaced = substitute(&text, patch, cluster)?;
    serde_json::from_str(&replaced).map_err(|e| OverrideFailure::InvalidValue {
        patch,
        reason: e.to_string(),
    })
}

/// KubeFleet's substitution on JSON text: first every `${MEMBER-CLUSTER-NAME}`, then each
/// `${MEMBER-CLUSTER-LABEL-KEY-<key>}` up to the next `}`. Variables can only occur inside JSON
/// strings, so the inserted text is escaped as string content (a no-op for valid names and
/// label values). Text inserted is never scanned again.
pub(super) fn substitute(
    text: &str,
    patch: usize,
    cluster: &ClusterTarget,
) -> Result<String, OverrideFailure> {
    let text = text.replace(CLUSTER_NAME_VARIABLE, &escape(cluster.name));
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find(CLUSTER_LABEL_KEY_VARIABLE_PREFIX) {
        out.push_str(&rest[..start]);
        let after = &rest[start + CLUSTER_LABEL_KEY_VARIABLE_PREFIX.len()..];
        let Some(end) = after.find('}') else {
            return Err(OverrideFailure::UnclosedVariable {
                patch,
                value: text.clone(),
            });
        };
        let key = &after[..end];
        let Some(label) = cluster.labels.get(key) else {
            return Err(OverrideFailure::MissingLabel { key: key.into() });
        };
        out.push_str(&escape(label));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `s` as the content of a JSON string.
fn escape(s: &str) -> String {
    let quoted = Value::String(s.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::selector::testing::labels;

    #[test]
    fn substitution_cases() {
        let l = labels(&[
            ("region", "east"),
            ("kubernetes-fleet.io/member-name", "m1"),
            ("odd", "a\"b"),
        ]);
        let c = ClusterTarget {
            name: "member-1",
            labels: &l,
        };
        let cases: &[(&str, Result<&str, OverrideFailure>)] = &[
            ("\"plain\"", Ok("\"plain\"")),
            ("\"${MEMBER-CLUSTER-NAME}\"", Ok("\"member-1\"")),
            (
                "\"${MEMBER-CLUSTER-NAME}-${MEMBER-CLUSTER-NAME}\"",
                Ok("\"member-1-member-1\""),
            ),
            ("\"${MEMBER-CLUSTER-LABEL-KEY-region}\"", Ok("\"east\"")),
            (
                "{\"a\":\"${MEMBER-CLUSTER-LABEL-KEY-kubernetes-fleet.io/member-name}/${MEMBER-CLUSTER-LABEL-KEY-region}\"}",
                Ok("{\"a\":\"m1/east\"}"),
            ),
            ("\"${MEMBER-CLUSTER-LABEL-KEY-odd}\"", Ok("\"a\\\"b\"")),
            // Case-sensitive: not a variable.
            ("\"${member-cluster-name}\"", Ok("\"${member-cluster-name}\"")),
            (
                "\"${MEMBER-CLUSTER-LABEL-KEY-zone}\"",
                Err(OverrideFailure::MissingLabel { key: "zone".into() }),
            ),
            (
                "\"${MEMBER-CLUSTER-LABEL-KEY-region\"",
                Err(OverrideFailure::UnclosedVariable {
                    patch: 0,
                    value: "\"${MEMBER-CLUSTER-LABEL-KEY-region\"".into(),
                }),
            ),
        ];
        for (text, want) in cases {
            let got = substitute(text, 0, &c);
            assert_eq!(got.as_deref().map_err(Clone::clone), want.clone(), "{text}");
        }
    }

    #[test]
    fn failure_messages() {
        assert_eq!(
            OverrideFailure::UnclosedVariable {
                patch: 1,
                value: "\"${MEMBER-CLUSTER-LABEL-KEY-a\"".into()
            }
            .to_string(),
            "the value \"${MEMBER-CLUSTER-LABEL-KEY-a\" of jsonPatchOverrides[1] is missing the closing bracket `}` of a ${MEMBER-CLUSTER-LABEL-KEY-<key>} variable"
        );
        assert_eq!(
            OverrideFailure::MissingLabel { key: "zone".into() }.to_string(),
            "label key \"zone\" not found on the cluster"
        );
    }
}
