//! Objects as a member's LIST sends them, but for `metadata.managedFields`.
//!
//! Nothing of gitfleet reads the managed fields of a listed object (comparisons strip them,
//! [`super::compare::comparable`]), and they are a large part of each item: every manager's
//! set of fields, the whole object over again for what gitfleet applied. Parsing them into
//! values would be a large part of a fleet-wide confirmation's CPU (a restart's, a resync's), so
//! they are skipped while the list is parsed.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

/// One listed object, as the member sent it but for `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed(pub Value);

impl<'de> Deserialize<'de> for Listed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Skipping {
            at: &["metadata", "managedFields"],
        })
        .map(Listed)
    }
}

/// A value without the key at the end of `at`: the first key names the member to go into.
struct Skipping {
    at: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for Skipping {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skipping {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match self.at {
                [last] if key == *last => {
                    map.next_value::<IgnoredAny>()?;
                }
                [first, rest @ ..] if key == *first && !rest.is_empty() => {
                    let value = map.next_value_seed(Skipping { at: rest })?;
                    out.insert(key, value);
                }
                _ => {
                    out.insert(key, map.next_value()?);
                }
            }
        }
        Ok(Value::Object(out))
    }

    // Anything but an object is taken as it is (there is nothing to skip in it).
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listed(v: &Value) -> Value {
        serde_json::from_str::<Listed>(&v.to_string()).unwrap().0
    }

    /// Everything but the managed fields, in the order sent (the field order of a
    /// `preserve_order` value), at any depth.
    #[test]
    fn a_listed_object_is_the_object_without_its_managed_fields() {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "a", "namespace": "n", "resourceVersion": "7",
                "labels": {"managedFields": "a label, kept"},
                "managedFields": [{"manager": "gitfleet", "operation": "Apply",
                                   "fieldsV1": {"f:data": {"f:k": {}}}}],
                "annotations": {"x": "y"}
            },
            "data": {"k": "v", "managedFields": "kept"},
            "spec": {"metadata": {"managedFields": "kept: not the object's metadata"}},
            "n": [1, -2, 3.5, true, null, {"a": "b"}]
        });
        let mut want = object.clone();
        want["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        let got = listed(&object);
        assert_eq!(got, want);
        let keys = |v: &Value| {
            v["metadata"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&got),
            [
                "name",
                "namespace",
                "resourceVersion",
                "labels",
                "annotations"
            ]
        );
        // Without managed fields, or without metadata: as they are.
        assert_eq!(listed(&want), want);
        assert_eq!(listed(&json!({"kind": "X"})), json!({"kind": "X"}));
        assert_eq!(
            listed(&json!({"metadata": null})),
            json!({"metadata": null})
        );
    }
}
