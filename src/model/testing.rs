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

/// What an object's own rules and strict decoding find: `(field, message)` of each problem, or
/// the decode error, as the kind says it, as the one problem (enums, types and unknown fields
/// are refused there).
pub fn findings<T: ApiObject>(yaml: &str) -> Vec<(String, String)> {
    match super::decode_valid::<T>(&value(yaml)) {
        Ok(_) => vec![],
        Err(problems) => problems.into_iter().map(|p| (p.field, p.message)).collect(),
    }
}

/// One rule's test: `bad` breaks the rule, so a problem names `field` with a message holding
/// `says`; `ok` is the edge case the rule still admits (exactly the limit, the field present),
/// so nothing is found in it.
pub fn check_rule<T: ApiObject>(rule: &str, bad: &str, field: &str, says: &str, ok: &str) {
    let got = findings::<T>(bad);
    assert!(
        got.iter().any(|(f, m)| f == field && m.contains(says)),
        "rule {rule}: expected {field}: …{says}…, got {got:?}\ndocument:\n{bad}"
    );
    let got = findings::<T>(ok);
    assert!(
        got.is_empty(),
        "rule {rule}: its valid edge case is refused: {got:?}\ndocument:\n{ok}"
    );
}

/// One `#[test]` per rule, named after it, each a [`check_rule`] of the kind `$ty`:
/// `name: bad => field, says; ok: edge case;`.
macro_rules! rule_tests {
    ($ty:ty; $($name:ident: $bad:expr => $field:expr, $says:expr; ok: $ok:expr;)*) => {
        $(
            #[test]
            fn $name() {
                $crate::model::testing::check_rule::<$ty>(
                    stringify!($name),
                    &$bad,
                    &$field,
                    &$says,
                    &$ok,
                );
            }
        )*
    };
}
pub(crate) use rule_tests;
