//! A ManifestWork's `conditionRules`: conditions of a manifest worked out from its live object,
//! as OCM's work agent works them out (open-cluster-management-io/ocm
//! pkg/work/spoke/conditions/reader.go, rules/rule.go, helpers.go):
//! - `CEL`: every expression of `celExpressions` in turn, with the variable `object` (the live
//!   object); the first `false` makes the condition `False`, all `true` (or none) `True`, both
//!   with reason `ConditionRuleEvaluated`; one that does not compile or fails, or whose result
//!   is not a bool, makes it `False` with reason `ConditionRuleExpressionError` and the error as
//!   its message;
//! - the message: `messageExpression` (variables `object` and `result`, the rule's result) when
//!   it gives a non-empty string, else `message`, else `Manifest is <condition>` / `Manifest is
//!   not <condition>`; a message expression that fails leaves its error as the message;
//! - `WellKnownConditions`: OCM's own CEL rule for the kind and condition (`Complete` of a
//!   `batch/v1` Job and of a `v1` Pod), with the rule's `message` and `messageExpression` over
//!   OCM's; any other kind or condition gives no condition at all;
//! - the work's own conditions (helpers.go `AggregateManifestConditions`, rule conditions
//!   only): per condition type over the manifests, `False` wins, then `Unknown` (or no `True`),
//!   else `True`; `Progressing` is `True` if any manifest's is; reason
//!   `ConditionRulesAggregated`; the message is the one manifest's when there is one, else
//!   `Aggregated from N manifest conditions`; sorted by type.
//!
//! CEL is gitfleet's OCM evaluator ([`crate::schedule::ocm::cel`]) in the agent's environment.
//! Where gitfleet differs: expressions are compiled at validation too, so a rule that does not
//! compile never reaches a member (OCM accepts the work and reports the error as the
//! condition); cel-go's runtime cost budget is not enforced (cel-rust has no cost model); error
//! texts are cel-rust's; conditions carry no `observedGeneration` nor `lastTransitionTime`.
//!
//! Pure.

use super::ManifestCondition;
use crate::model::work::{ConditionRule, ConditionRuleType};
use crate::schedule::ocm::cel::ObjectCel;
use crate::schedule::Condition;
use serde_json::Value;

/// Reasons (work/v1 types.go): every reason a rule sets starts with `ConditionRule`.
pub const EVALUATED: &str = "ConditionRuleEvaluated";
pub const EXPRESSION_ERROR: &str = "ConditionRuleExpressionError";
const RULE_PREFIX: &str = "ConditionRule";
const AGGREGATED: &str = "ConditionRulesAggregated";

/// OCM's `ManifestComplete` condition.
pub const COMPLETE: &str = "Complete";

/// The agent's two CEL environments: rules see `object`, messages `object` and `result`.
pub struct Cel(ObjectCel);

impl Default for Cel {
    fn default() -> Cel {
        Cel::new()
    }
}

impl Cel {
    pub fn new() -> Cel {
        Cel(ObjectCel::new())
    }

    /// Compiles a rule's expression; the error as cel-go's `Compile` would word it.
    pub fn compile_rule(&self, expression: &str) -> Result<cel::Program, String> {
        self.0.compile(expression, &["object"])
    }

    pub fn compile_message(&self, expression: &str) -> Result<cel::Program, String> {
        self.0.compile(expression, &["object", "result"])
    }
}

/// One rule's CEL (a well-known rule's, or the user's).
struct CelRule<'a> {
    condition: &'a str,
    expressions: Vec<&'a str>,
    message: &'a str,
    message_expression: &'a str,
}

/// The well-known rule for `gvk` and `condition` (rules/rule.go), without overrides.
fn well_known(
    group: &str,
    version: &str,
    kind: &str,
    condition: &str,
) -> Option<(&'static str, &'static str)> {
    if condition != COMPLETE {
        return None;
    }
    match (group, version, kind) {
        ("batch", "v1", "Job") => Some((
            "hasConditions(object.status)
			? object.status.conditions.filter(c, c.type == 'Complete' || c.type == 'Failed').exists(c, c.status == 'True')
			: false",
            r#"result ? "Job is finished" : "Job is not finished""#,
        )),
        ("", "v1", "Pod") => Some((
            "object.status.phase in ['Succeeded', 'Failed']",
            r#""Pod is in phase " + object.status.phase"#,
        )),
        _ => None,
    }
}

/// `EvaluateConditions`: the conditions `rules` give for `object`, in rule order.
pub fn evaluate(rules: &[ConditionRule], object: &Value) -> Vec<Condition> {
    if rules.is_empty() {
        return Vec::new();
    }
    let cel = Cel::new();
    let (group, version, kind) = super::gvk(object);
    rules
        .iter()
        .filter_map(|rule| {
            let cel_rule = match rule.type_ {
                ConditionRuleType::Cel => CelRule {
                    condition: &rule.condition,
                    expressions: rule.cel_expressions.iter().map(String::as_str).collect(),
                    message: &rule.message,
                    message_expression: &rule.message_expression,
                },
                ConditionRuleType::WellKnownConditions => {
                    let (expression, message_expression) =
                        well_known(group, version, kind, &rule.condition)?;
                    CelRule {
                        condition: &rule.condition,
                        expressions: vec![expression],
                        message: &rule.message,
                        message_expression: if rule.message_expression.is_empty() {
                            message_expression
                        } else {
                            &rule.message_expression
                        },
                    }
                }
            };
            Some(by_cel(&cel, &cel_rule, object))
        })
        .collect()
}

fn condition(rule: &CelRule, status: &str, reason: &str, message: String) -> Condition {
    Condition {
        type_: rule.condition.to_string(),
        status: status.into(),
        reason: reason.into(),
        message,
    }
}

/// `getConditionByCelRule`.
fn by_cel(cel: &Cel, rule: &CelRule, object: &Value) -> Condition {
    let mut result = true;
    for e in &rule.expressions {
        let out = cel
            .compile_rule(e)
            .and_then(|p| cel.0.evaluate(&p, &[("object", object)]));
        match out {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                result = false;
                break;
            }
            Ok(other) => {
                return condition(
                    rule,
                    "False",
                    EXPRESSION_ERROR,
                    format!("expected bool result, got {}", go_type(&other)),
                )
            }
            Err(e) => return condition(rule, "False", EXPRESSION_ERROR, e),
        }
    }
    let status = if result { "True" } else { "False" };
    condition(rule, status, EVALUATED, message(cel, rule, object, result))
}

/// `getConditionMessageByRule`.
fn message(cel: &Cel, rule: &CelRule, object: &Value, result: bool) -> String {
    if !rule.message_expression.is_empty() {
        let out = cel.compile_message(rule.message_expression).and_then(|p| {
            cel.0
                .evaluate(&p, &[("object", object), ("result", &Value::Bool(result))])
        });
        match out {
            Ok(cel::Value::String(s)) if !s.is_empty() => return s.to_string(),
            Ok(cel::Value::String(_)) => {}
            Ok(other) => {
                return format!(
                    "expected message expression to have a string result, got {}",
                    go_type(&other)
                )
            }
            Err(e) => return e,
        }
    }
    if !rule.message.is_empty() {
        return rule.message.to_string();
    }
    if result {
        format!("Manifest is {}", rule.condition)
    } else {
        format!("Manifest is not {}", rule.condition)
    }
}

/// The Go type of a CEL result's `Value()`, as OCM's error messages print it.
fn go_type(v: &cel::Value) -> &'static str {
    match v {
        cel::Value::Int(_) => "int64",
        cel::Value::UInt(_) => "uint64",
        cel::Value::Float(_) => "float64",
        cel::Value::String(_) => "string",
        cel::Value::Bytes(_) => "[]uint8",
        cel::Value::Bool(_) => "bool",
        cel::Value::List(_) => "[]ref.Val",
        cel::Value::Map(_) => "map[ref.Val]ref.Val",
        cel::Value::Null => "structpb.NullValue",
        _ => "ref.Val",
    }
}

/// `AggregateManifestConditions`, for the conditions rules set (module doc).
pub fn aggregate(manifests: &[ManifestCondition]) -> Vec<Condition> {
    #[derive(Default)]
    struct Counts {
        t: usize,
        f: usize,
        u: usize,
        message: String,
    }
    let mut by_type: std::collections::BTreeMap<&str, Counts> = Default::default();
    for c in manifests
        .iter()
        .flat_map(|m| &m.conditions)
        .filter(|c| c.reason.starts_with(RULE_PREFIX))
    {
        let n = by_type.entry(&c.type_).or_default();
        match c.status.as_str() {
            "True" => n.t += 1,
            "False" => n.f += 1,
            "Unknown" => n.u += 1,
            _ => {}
        }
        if !c.message.is_empty() {
            n.message.clone_from(&c.message);
        }
    }
    by_type
        .into_iter()
        .map(|(type_, n)| {
            let status = if type_ == "Progressing" {
                if n.t > 0 {
                    "True"
                } else if n.u > 0 {
                    "Unknown"
                } else {
                    "False"
                }
            } else if n.f > 0 {
                "False"
            } else if n.u > 0 || n.t == 0 {
                "Unknown"
            } else {
                "True"
            };
            let total = n.t + n.f + n.u;
            let message = if total == 1 && !n.message.is_empty() {
                n.message
            } else {
                format!("Aggregated from {total} manifest conditions")
            };
            Condition {
                type_: type_.to_string(),
                status: status.into(),
                reason: AGGREGATED.into(),
                message,
            }
        })
        .collect()
}
