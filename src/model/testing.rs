//! Helpers for the models' unit tests: decode YAML strictly and list the validation problems.

use super::{decode, ApiObject};
use serde_json::Value;

pub fn value(yaml: &str) -> Value {
    crate::yaml::from_str(yaml).unwrap()
}

pub fn typed<T: ApiObject>(yaml: &str) -> T {
    decode::<T>(&value(yaml)).unwrap()
}

/// `(field, message)` of every problem the object's own rules find.
pub fn problems<T: ApiObject>(yaml: &str) -> Vec<(String, String)> {
    typed::<T>(yaml)
        .validate()
        .into_iter()
        .map(|p| (p.field, p.message))
        .collect()
}

/// Each case must yield exactly the one problem given.
pub fn expect_one<T: ApiObject>(cases: &[(String, &str, &str)]) {
    for (yaml, field, message) in cases {
        assert_eq!(
            problems::<T>(yaml),
            vec![(field.to_string(), message.to_string())],
            "document:\n{}",
            &yaml[..yaml.len().min(400)]
        );
    }
}
