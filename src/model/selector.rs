//! Kubernetes label selectors (`matchLabels` + `matchExpressions`) and their matching rules.
//! Pure: knows nothing of where labels come from.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The map of labels an object or a cluster carries.
pub type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl LabelSelector {
    /// An empty selector matches everything, as in Kubernetes.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Problems with the selector as the API server would report them: `(field, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (i, r) in self.match_expressions.iter().enumerate() {
            let field = format!("matchExpressions[{i}]");
            match r.operator {
                SelectorOperator::In | SelectorOperator::NotIn if r.values.is_empty() => {
                    out.push((
                        format!("{field}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'".into(),
                    ))
                }
                SelectorOperator::Exists | SelectorOperator::DoesNotExist
                    if !r.values.is_empty() =>
                {
                    out.push((
                        format!("{field}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'".into(),
                    ))
                }
                _ => {}
            }
            if r.key.is_empty() {
                out.push((format!("{field}.key"), "must not be empty".into()));
            }
        }
        out
    }
}

impl LabelSelectorRequirement {
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

/// Builders for the tests of selectors and of what uses them.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    pub fn req(key: &str, operator: SelectorOperator, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{labels, req};
    use super::*;

    #[test]
    fn empty_selector_matches_everything() {
        assert!(LabelSelector::default().matches(&labels(&[])));
        assert!(LabelSelector::default().matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn operators_follow_kubernetes() {
        use SelectorOperator::*;
        let l = labels(&[("env", "prod"), ("region", "east")]);
        let cases = [
            (req("env", In, &["prod", "canary"]), true),
            (req("env", In, &["staging"]), false),
            (req("missing", In, &["x"]), false),
            (req("env", NotIn, &["staging"]), true),
            (req("env", NotIn, &["prod"]), false),
            (req("missing", NotIn, &["x"]), true),
            (req("region", Exists, &[]), true),
            (req("missing", Exists, &[]), false),
            (req("missing", DoesNotExist, &[]), true),
            (req("env", DoesNotExist, &[]), false),
        ];
        for (r, want) in cases {
            assert_eq!(r.matches(&l), want, "{r:?}");
        }
    }

    #[test]
    fn match_labels_and_expressions_are_anded() {
        let s = LabelSelector {
            match_labels: labels(&[("env", "prod")]),
            match_expressions: vec![req("region", SelectorOperator::In, &["west"])],
        };
        assert!(!s.matches(&labels(&[("env", "prod"), ("region", "east")])));
        assert!(s.matches(&labels(&[("env", "prod"), ("region", "west")])));
    }

    #[test]
    fn problems_name_the_field() {
        let s = LabelSelector {
            match_labels: Default::default(),
            match_expressions: vec![req("a", SelectorOperator::In, &[])],
        };
        assert_eq!(s.problems()[0].0, "matchExpressions[0].values");
    }
}
