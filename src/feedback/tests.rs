//! Ported case by case from OCM's own tests: pkg/work/spoke/statusfeedback/reader_test.go
//! (`TestStatusReader`) and pkg/work/spoke/conditions/reader_test.go (`TestConditionReader`),
//! each case named after OCM's.

use super::conditions::{self, COMPLETE, EVALUATED, EXPRESSION_ERROR};
use super::*;
use crate::model::work::{ConditionRule, JsonPathRule};
use serde_json::json;

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "test"},
        "status": {"readyReplicas": 1, "replicas": 2,
            "conditions": [{"type": "Available", "status": "true"}]}})
}

fn deployment_multi_condition() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "test"},
        "status": {"readyReplicas": 1, "replicas": 2, "conditions": [
            {"type": "Cond1", "status": "true"}, {"type": "Cond2", "status": "false"},
            {"type": "Cond3", "status": "true"}]}})
}

fn job() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "test"},
        "status": {"conditions": [{"status": "True", "type": "Complete"}], "succeeded": 1}})
}

fn pod(phase: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "test"},
        "status": {"conditions": [{"status": "False", "type": "Ready"}], "phase": phase}})
}

fn well_known() -> FeedbackRule {
    FeedbackRule {
        type_: FeedbackType::WellKnownStatus,
        json_paths: vec![],
    }
}

fn paths(p: &[(&str, &str, &str)]) -> FeedbackRule {
    FeedbackRule {
        type_: FeedbackType::JsonPaths,
        json_paths: p
            .iter()
            .map(|(name, path, version)| JsonPathRule {
                name: name.to_string(),
                path: path.to_string(),
                version: version.to_string(),
            })
            .collect(),
    }
}

fn int(name: &str, i: i64) -> FeedbackValue {
    FeedbackValue {
        name: name.into(),
        field_value: FieldValue::Integer { integer: i },
    }
}

fn string(name: &str, s: &str) -> FeedbackValue {
    FeedbackValue {
        name: name.into(),
        field_value: FieldValue::String { string: s.into() },
    }
}

fn raw(name: &str, s: &str) -> FeedbackValue {
    FeedbackValue {
        name: name.into(),
        field_value: FieldValue::JsonRaw { json_raw: s.into() },
    }
}

/// reader_test.go's reader has `WithMaxJsonRawLength(40)`; gitfleet's limit is OCM's default
/// (1024), so the "exceed max length" case reads a value longer than that.
#[test]
fn test_status_reader() {
    let big = json!({"apiVersion": "v1", "kind": "Pod", "status": {"big": "x".repeat(1100)}});
    /// Name, object, rule, raw JSON, whether it fails, the values.
    type Case = (
        &'static str,
        Value,
        FeedbackRule,
        RawJson,
        bool,
        Vec<FeedbackValue>,
    );
    let cases: Vec<Case> = vec![
        (
            "deployment values",
            deployment(),
            well_known(),
            RawJson::Off,
            false,
            vec![int("ReadyReplicas", 1), int("Replicas", 2)],
        ),
        (
            "deployment jsonpaths",
            deployment(),
            paths(&[(
                "available",
                ".status.conditions[?(@.type==\"Available\")].status ",
                "",
            )]),
            RawJson::Off,
            false,
            vec![string("available", "true")],
        ),
        (
            "wrong return type",
            deployment(),
            paths(&[
                ("available", ".status.conditions", ""),
                ("replicas", ".status.replicas", ""),
            ]),
            RawJson::Off,
            true,
            vec![int("replicas", 2)],
        ),
        (
            "mismatched gvk",
            json!({"apiVersion": "extensions/v1", "kind": "Deployment",
            "status": {"readyReplicas": 1}}),
            well_known(),
            RawJson::Off,
            true,
            vec![],
        ),
        (
            "wrong version set for jsonpaths",
            deployment(),
            paths(&[
                ("available", ".status.conditions", "v1beta1"),
                ("replicas", ".status.replicas", ""),
            ]),
            RawJson::Off,
            true,
            vec![int("replicas", 2)],
        ),
        (
            "Job values",
            job(),
            well_known(),
            RawJson::Off,
            false,
            vec![string("JobComplete", "True"), int("JobSucceeded", 1)],
        ),
        (
            "Pod values",
            pod("Succeeded"),
            well_known(),
            RawJson::Off,
            false,
            vec![string("PodReady", "False"), string("PodPhase", "Succeeded")],
        ),
        (
            "Return 1st item with multiple patch",
            deployment(),
            paths(&[(
                "type",
                ".status.conditions[?(@.status==\"true\")].type ",
                "",
            )]),
            RawJson::Off,
            false,
            vec![string("type", "Available")],
        ),
        (
            "rawjson value format",
            pod("Succeeded"),
            paths(&[("conditions", ".status.conditions", "")]),
            RawJson::On,
            false,
            vec![raw("conditions", r#"[{"status":"False","type":"Ready"}]"#)],
        ),
        (
            "rawjson value exceed max length",
            big,
            paths(&[("status", ".status", "")]),
            RawJson::On,
            true,
            vec![],
        ),
        (
            "filtered rawjson value format",
            deployment_multi_condition(),
            paths(&[(
                "conditions",
                ".status.conditions[?(@.status==\"true\")].type",
                "",
            )]),
            RawJson::On,
            false,
            vec![raw("conditions", r#"["Cond1","Cond3"]"#)],
        ),
    ];
    for (name, object, rule, raw, want_error, want) in cases {
        let (values, errors) = values_by_rule(&rule, &object, raw);
        assert_eq!(values, want, "{name}");
        assert_eq!(!errors.is_empty(), want_error, "{name}: {errors:?}");
    }
}

/// What a path that is missing, null or not a scalar gives (the JsonPath API doc: "If the path
/// points to a non-existing field, no value will be returned. If the path points to a
/// structure, map or slice, no value will be returned and the status condition of
/// StatusFeedBackSynced will be set as false"), with OCM's words.
#[test]
fn missing_null_and_structured_values_as_ocm_reports_them() {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "status": {"n": null, "ratio": 0.5, "ok": true, "big": 9_223_372_036_854_775_807_i64}});
    let rule = paths(&[
        ("missing", ".status.missing", ""),
        ("null", ".status.n", ""),
        ("ok", ".status.ok", ""),
        ("big", ".status.big", ""),
        ("ratio", ".status.ratio", ""),
        ("status", ".status", ""),
    ]);
    let (values, synced) = feedback(std::slice::from_ref(&rule), &d, RawJson::Off);
    assert_eq!(
        values,
        vec![
            FeedbackValue {
                name: "ok".into(),
                field_value: FieldValue::Boolean { boolean: true }
            },
            int("big", i64::MAX),
        ]
    );
    assert_eq!(synced.status, "False");
    assert_eq!(synced.reason, "StatusFeedbackSyncFailed");
    assert_eq!(
        synced.message,
        "Sync status feedback failed with error [the type float64 of the value for ratio is not found, the type map[string]interface {} of the value for status is not found]"
    );
    let (_, ok) = feedback(&[well_known()], &deployment(), RawJson::Off);
    assert_eq!(
        (ok.status.as_str(), ok.reason.as_str(), ok.message.as_str()),
        ("True", "StatusFeedbackSynced", "")
    );
    let (_, gvk) = feedback(
        &[well_known()],
        &json!({"apiVersion": "v1", "kind": "ConfigMap"}),
        RawJson::Off,
    );
    assert_eq!(
        gvk.message,
        "Sync status feedback failed with error cannot find the wellknown statuses for resource with gvk /v1, Kind=ConfigMap"
    );
    // Raw JSON is Go's json.Marshal: keys sorted, HTML characters escaped.
    let o = json!({"apiVersion": "v1", "kind": "Pod", "status": {"b": "<&>", "a": 1.5}});
    let (v, _) = values_by_rule(&paths(&[("s", ".status", "")]), &o, RawJson::On);
    assert_eq!(v, vec![raw("s", r#"{"a":1.5,"b":"\u003c\u0026\u003e"}"#)]);
}

/// Secrets are never read, whatever the rules (gitfleet's rule).
#[test]
fn nothing_is_read_from_a_secret() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": "c2VjcmV0"}});
    let rules = StatusRules {
        feedback: vec![paths(&[("p", ".data.password", "")])],
        conditions: vec![cel_rule("C", &["true"], "", "object.data.password")],
    };
    let meta = ResourceMeta {
        kind: "Secret".into(),
        version: "v1".into(),
        resource: "secrets".into(),
        name: "s".into(),
        ..ResourceMeta::default()
    };
    let m = read(meta, &rules, &secret, RawJson::On);
    assert!(m.status_feedback.values.is_empty());
    assert_eq!(m.conditions.len(), 1);
    assert!(!serde_json::to_string(&m).unwrap().contains("c2VjcmV0"));
}

fn cel_rule(
    condition: &str,
    expressions: &[&str],
    message: &str,
    message_expression: &str,
) -> ConditionRule {
    ConditionRule {
        condition: condition.into(),
        type_: ConditionRuleType::Cel,
        cel_expressions: expressions.iter().map(|e| e.to_string()).collect(),
        message: message.into(),
        message_expression: message_expression.into(),
    }
}

fn known(condition: &str) -> ConditionRule {
    ConditionRule {
        condition: condition.into(),
        type_: ConditionRuleType::WellKnownConditions,
        cel_expressions: vec![],
        message: String::new(),
        message_expression: String::new(),
    }
}

use crate::model::work::ConditionRuleType;

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

fn job_with(conditions: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "test"},
        "status": {"conditions": conditions}})
}

/// reader_test.go TestConditionReader. "invalid CEL" and "wrong return type" keep OCM's status
/// and reason, with cel-rust's message where cel-go's differs; "invalid message CEL" cannot
/// happen here (validation refuses it), and "Budget exceeded" is not ported (no cost model).
#[test]
fn test_condition_reader() {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "test"},
        "status": {"readyReplicas": 1, "replicas": 2,
            "conditions": [{"type": "Available", "status": "True"}]}});
    let cases: Vec<(&str, Value, ConditionRule, Condition)> = vec![
        (
            "deployment available",
            deployment.clone(),
            cel_rule(
                "Available",
                &[
                    r#"object.status.conditions.exists(c, c.type == "Available" && c.status == "True")"#,
                ],
                "",
                r#"result ? "Deployment available" : "Deployment unavailable""#,
            ),
            cond("Available", "True", EVALUATED, "Deployment available"),
        ),
        (
            "wrong return type",
            deployment.clone(),
            cel_rule(
                "Available",
                &[r#"object.status.conditions.filter(c, c.type == "Available")[0].status"#],
                "",
                "",
            ),
            cond(
                "Available",
                "False",
                EXPRESSION_ERROR,
                "expected bool result, got string",
            ),
        ),
        (
            "cel lib function hasConditions",
            deployment.clone(),
            cel_rule(
                "HasConditions",
                &[r#"hasConditions(object.status)
                && !hasConditions({})
                && !hasConditions("badtype")
                && !hasConditions({"conditions": []})
                && !hasConditions({"conditions": null})"#],
                "should work",
                "",
            ),
            cond("HasConditions", "True", EVALUATED, "should work"),
        ),
        (
            "Job complete",
            job_with(
                json!([{"status": "True", "type": "Complete"}, {"status": "True", "type": "Another"}]),
            ),
            known(COMPLETE),
            cond(COMPLETE, "True", EVALUATED, "Job is finished"),
        ),
        (
            "Job failed",
            job_with(json!([{"status": "True", "type": "Failed"}])),
            known(COMPLETE),
            cond(COMPLETE, "True", EVALUATED, "Job is finished"),
        ),
        (
            "Job incomplete",
            job_with(
                json!([{"status": "False", "type": "Complete"}, {"status": "True", "type": "Another"}]),
            ),
            known(COMPLETE),
            cond(COMPLETE, "False", EVALUATED, "Job is not finished"),
        ),
        (
            "Pod complete",
            pod("Succeeded"),
            known(COMPLETE),
            cond(COMPLETE, "True", EVALUATED, "Pod is in phase Succeeded"),
        ),
        (
            "Pod failed",
            pod("Failed"),
            known(COMPLETE),
            cond(COMPLETE, "True", EVALUATED, "Pod is in phase Failed"),
        ),
        (
            "Pod running",
            pod("Running"),
            known(COMPLETE),
            cond(COMPLETE, "False", EVALUATED, "Pod is in phase Running"),
        ),
    ];
    for (name, object, rule, want) in cases {
        let got = conditions::evaluate(std::slice::from_ref(&rule), &object);
        assert_eq!(got, vec![want], "{name}");
    }
    // "invalid CEL": a key the object lacks fails evaluation.
    let got = conditions::evaluate(
        &[cel_rule("Available", &["object.missing"], "", "")],
        &deployment,
    );
    assert_eq!(
        (got[0].status.as_str(), got[0].reason.as_str()),
        ("False", EXPRESSION_ERROR)
    );
    assert!(got[0].message.contains("missing"), "{got:?}");
}

/// EvaluateConditions: a well-known rule for a kind or condition OCM has no rule for sets no
/// condition; messages fall back as getConditionMessageByRule does.
#[test]
fn well_known_rules_of_other_kinds_set_nothing_and_messages_fall_back() {
    assert_eq!(
        conditions::evaluate(&[known(COMPLETE)], &deployment()),
        vec![]
    );
    assert_eq!(conditions::evaluate(&[known("Ready")], &job()), vec![]);
    let d = deployment();
    let got = conditions::evaluate(
        &[
            cel_rule("A", &["true", "false"], "", ""),
            cel_rule("B", &[], "", ""),
            cel_rule("C", &["true"], "fixed", "''"),
            cel_rule("D", &["true"], "", "1"),
        ],
        &d,
    );
    assert_eq!(
        got,
        vec![
            cond("A", "False", EVALUATED, "Manifest is not A"),
            cond("B", "True", EVALUATED, "Manifest is B"),
            cond("C", "True", EVALUATED, "fixed"),
            cond(
                "D",
                "True",
                EVALUATED,
                "expected message expression to have a string result, got int64"
            ),
        ]
    );
    // A Job's well-known message can be overridden.
    let mut custom = known(COMPLETE);
    custom.message_expression = "result ? 'done' : 'not done'".into();
    assert_eq!(conditions::evaluate(&[custom], &job())[0].message, "done");
}

/// pkg/work/spoke/conditions/helpers.go AggregateManifestConditions, read from its code (it
/// has no unit test of its own), for the conditions rules set: False wins, then Unknown;
/// Progressing is True when any is; one manifest's message is kept.
#[test]
fn rule_conditions_aggregate_as_ocm_aggregates_them() {
    let manifest = |conditions: Vec<Condition>| ManifestCondition {
        resource_meta: ResourceMeta::default(),
        status_feedback: StatusFeedback::default(),
        conditions,
    };
    let got = conditions::aggregate(&[
        manifest(vec![
            cond("Complete", "True", EVALUATED, "Job is finished"),
            cond("Progressing", "False", EVALUATED, ""),
            cond("Ready", "True", EVALUATED, ""),
            cond(STATUS_FEEDBACK_SYNCED, "True", "StatusFeedbackSynced", ""),
        ]),
        manifest(vec![
            cond("Progressing", "True", EVALUATED, ""),
            cond("Ready", "False", EXPRESSION_ERROR, "boom"),
        ]),
    ]);
    assert_eq!(
        got,
        vec![
            cond(
                "Complete",
                "True",
                "ConditionRulesAggregated",
                "Job is finished"
            ),
            cond(
                "Progressing",
                "True",
                "ConditionRulesAggregated",
                "Aggregated from 2 manifest conditions"
            ),
            cond(
                "Ready",
                "False",
                "ConditionRulesAggregated",
                "Aggregated from 2 manifest conditions"
            ),
        ]
    );
}

/// gitfleet's validation: paths parse, expressions compile in the agent's environment (its
/// variables only, no selector-only function), and no rule names a Secret.
#[test]
fn bad_rules_are_refused_naming_the_field() {
    let t: crate::model::ocm::ManifestWorkTemplate = serde_json::from_value(json!({
        "workload": {"manifests": []},
        "manifestConfigs": [
            {"resourceIdentifier": {"group": "apps", "resource": "deployments", "namespace": "default", "name": "web"},
             "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [
                 {"name": "ok", "path": ".status.replicas"}, {"name": "bad", "path": "status["}]}],
             "conditionRules": [
                 {"type": "CEL", "condition": "A", "celExpressions": ["object.status.replicas > 0", "managedCluster.x"]},
                 {"type": "CEL", "condition": "B", "celExpressions": ["object.metadata.name.parseJSON() == {}"],
                  "messageExpression": "result ? 1 +"},
                 {"type": "CEL", "condition": "C", "celExpressions": ["true"],
                  "messageExpression": "result ? 'yes' : object.metadata.name"}]},
            {"resourceIdentifier": {"resource": "secrets", "namespace": "default", "name": "s"},
             "feedbackRules": [{"type": "WellKnownStatus"}]}
        ]
    }))
    .unwrap();
    let problems = validate("spec", &t);
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.manifestConfigs[0].feedbackRules[0].jsonPaths[1].path",
            "spec.manifestConfigs[0].conditionRules[0].celExpressions[1]",
            "spec.manifestConfigs[0].conditionRules[1].celExpressions[0]",
            "spec.manifestConfigs[0].conditionRules[1].messageExpression",
            "spec.manifestConfigs[1].feedbackRules",
        ],
        "{problems:#?}"
    );
    assert!(problems[1]
        .message
        .contains("undeclared reference to 'managedCluster'"));
    assert!(problems[2].message.contains("parseJSON"));
}
