//! OCM `PlacementDecision` (cluster.open-cluster-management.io/v1beta1) as a repository may
//! declare it: the object is all metadata and status, and OCM's scheduler writes the status. The
//! rules are those the API server applies when the object is created: the name, and no field the
//! CRD does not declare. Pure: no knowledge of where the object came from.
//!
//! The CRD enables the status subresource, so the API server drops `status` on create (and keeps
//! the old one on update) before it validates the object: the status's types and required fields
//! (`decisions`, and `clusterName` and `reason` in each decision) are never checked on that
//! path, and are not checked here. Unknown fields are found while the request is decoded, before
//! the status is dropped, so they are refused everywhere, status included.

use super::metadata::NameRule;
use super::object::ObjectMeta;
use super::{ApiObject, Problem, Problems};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `PlacementDecision` kind.
pub const PLACEMENT_DECISION: &str = "PlacementDecision";

/// A PlacementDecision: metadata, and a status kept as it is written (see the module doc for why
/// its types are not checked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementDecision {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

impl ApiObject for PlacementDecision {
    fn validate(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        let name = &self.metadata.name;
        if name.is_empty() && self.metadata.generate_name.is_none() {
            p.push("metadata.name", "Required value: name is required");
        } else if let Some(msg) = NameRule::Subdomain
            .problem(name)
            .filter(|_| !name.is_empty())
        {
            p.push("metadata.name", format!("Invalid value: {name:?}: {msg}"));
        }
        super::status::check(&self.api_version, &self.kind, self.status.as_ref(), &mut p);
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{decode, decode_valid};

    const HEAD: &str = "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: PlacementDecision\nmetadata:\n  name: web-decision-1\n  namespace: apps\n  labels: {cluster.open-cluster-management.io/placement: web}\n";

    fn check(yaml: &str) -> Result<PlacementDecision, Vec<(String, String)>> {
        let v: Value = crate::yaml::from_str(yaml).unwrap();
        decode_valid::<PlacementDecision>(&v)
            .map_err(|ps| ps.into_iter().map(|p| (p.field, p.message)).collect())
    }

    fn refused(yaml: &str) -> Vec<(String, String)> {
        check(yaml).expect_err(yaml)
    }

    #[test]
    fn a_decision_as_ocm_writes_it_is_accepted() {
        let d = check(&format!(
            "{HEAD}status:\n  decisions:\n  - {{clusterName: east, reason: ''}}\n  - {{clusterName: west, reason: picked, score: 80}}\n"
        ))
        .unwrap();
        assert_eq!(d.metadata.name, "web-decision-1");
        assert!(check(HEAD).is_ok());
    }

    /// The CRD declares no `spec`: strict decoding refuses it, as any unknown top-level field.
    #[test]
    fn placement_decision_unknown_top_level_field() {
        let v: Value = crate::yaml::from_str(&format!("{HEAD}spec: {{}}\n")).unwrap();
        let err = decode::<PlacementDecision>(&v).unwrap_err();
        assert_eq!(err.field, "spec");
        assert!(err.message.starts_with("unknown field `spec`"), "{err:?}");
    }

    /// Strict decoding runs before the status subresource drops the status: unknown fields in
    /// the status and in each decision are refused.
    #[test]
    fn placement_decision_unknown_status_fields() {
        assert_eq!(
            refused(&format!("{HEAD}status: {{decision: []}}\n")),
            [(
                "status.decision".to_string(),
                "unknown field `decision`, expected one of `decisions`".to_string()
            )]
        );
        assert_eq!(
            refused(&format!(
                "{HEAD}status: {{decisions: [{{clusterName: a, reason: b, weight: 1}}]}}\n"
            )),
            [(
                "status.decisions[0].weight".to_string(),
                "unknown field `weight`, expected one of `clusterName`, `reason`, `score`"
                    .to_string()
            )]
        );
    }

    /// The status subresource: the API server drops the status on create before validating, so
    /// its types and required fields are not admission's business (the test bed's API server
    /// creates each of these).
    #[test]
    fn placement_decision_status_is_not_validated_on_create() {
        for status in [
            "status: {}",
            "status: null",
            "status: {decisions: x}",
            "status: {decisions: [{clusterName: 1, score: x}]}",
        ] {
            assert!(check(&format!("{HEAD}{status}\n")).is_ok(), "{status}");
        }
    }

    /// `metadata.name` as every custom resource's: a DNS-1123 subdomain.
    #[test]
    fn placement_decision_name_is_a_dns_subdomain() {
        let got = refused(&HEAD.replace("web-decision-1", "Web_Decision"));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "metadata.name");
        assert!(
            got[0]
                .1
                .starts_with("Invalid value: \"Web_Decision\": a lowercase RFC 1123 subdomain"),
            "{got:?}"
        );
        assert_eq!(
            refused(&HEAD.replace("web-decision-1", "''")),
            [(
                "metadata.name".to_string(),
                "Required value: name is required".to_string()
            )]
        );
    }
    /// One test per rule, named after it: the breaking document names the field, the edge case
    /// is admitted.
    mod rules {
        use super::HEAD;
        use crate::model::testing::rule_tests;

        fn named(name: &str) -> String {
            HEAD.replace("name: web-decision-1", &format!("name: '{name}'"))
        }

        rule_tests! { super::PlacementDecision;
            decision_name_required: named("") => "metadata.name", "name is required";
                ok: named("").replace("name: ''", "generateName: web-");
            decision_name_is_a_dns_subdomain: named("Web_1") => "metadata.name", "RFC 1123 subdomain";
                ok: named(&format!("{}.b", "a".repeat(251)));
            status_unknown_field_refused: format!("{HEAD}status: {{decisions: [], extra: 1}}\n") => "status.extra", "unknown field `extra`";
                ok: format!("{HEAD}status: {{decisions: []}}\n");
            decision_unknown_field_refused: format!("{HEAD}status: {{decisions: [{{clusterName: a, reason: '', weight: 1}}]}}\n") => "status.decisions[0].weight", "unknown field `weight`";
                ok: format!("{HEAD}status: {{decisions: [{{clusterName: a, reason: '', score: 1}}]}}\n");
            unknown_top_level_field_refused: format!("{HEAD}spec: {{}}\n") => "spec", "unknown field `spec`";
                ok: HEAD;
        }
    }
}
