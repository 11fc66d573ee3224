//! Reading a JSON value into a typed `T` as sigs.k8s.io/yaml's `Unmarshal` does: where `T` wants
//! a string and the YAML held a number or a boolean, the value's text (`cpu: 4` into a string
//! field is `"4"`). Everything else is serde_json's own reading of the value.

use super::resolve;
use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

/// A deserializer over a value that turns numbers and booleans into strings on request.
pub(super) struct Coercing<'v>(pub &'v Value);

/// The text sigs.k8s.io/yaml writes for a number or boolean read into a string.
fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(match n.as_i64() {
            Some(i) => i.to_string(),
            None => match n.as_u64() {
                Some(u) => u.to_string(),
                None => resolve::float_text(n.as_f64().unwrap_or(0.0)),
            },
        }),
        _ => None,
    }
}

macro_rules! forward {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                self.0.$method(visitor)
            }
        )*
    };
}

impl<'de, 'v> Deserializer<'de> for Coercing<'v>
where
    'v: 'de,
{
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            Value::Object(map) => visitor.visit_map(Entries {
                iter: map.iter(),
                value: None,
            }),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match as_text(self.0) {
            Some(text) => visitor.visit_string(text),
            None => self.0.deserialize_str(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Entries {
                iter: map.iter(),
                value: None,
            }),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Entries {
                iter: map.iter(),
                value: None,
            }),
            other => other.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    forward! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_bytes
        deserialize_byte_buf deserialize_unit deserialize_identifier deserialize_ignored_any
    }
}

struct Items<'v>(std::slice::Iter<'v, Value>);

impl<'de, 'v: 'de> SeqAccess<'de> for Items<'v> {
    type Error = serde_json::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Coercing(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries<'v> {
    iter: serde_json::map::Iter<'v>,
    value: Option<&'v Value>,
}

impl<'de, 'v: 'de> MapAccess<'de> for Entries<'v> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.iter.next() {
            Some((k, v)) => {
                self.value = Some(v);
                let key: de::value::StrDeserializer<'_, serde_json::Error> =
                    k.as_str().into_deserializer();
                seed.deserialize(key).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        match self.value.take() {
            Some(v) => seed.deserialize(Coercing(v)),
            None => Err(de::Error::custom(
                "a map value was asked for before its key",
            )),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Typed {
        name: String,
        count: u32,
        on: bool,
        tags: Vec<String>,
        maybe: Option<String>,
        map: std::collections::BTreeMap<String, String>,
    }

    #[test]
    fn numbers_and_booleans_become_text_where_strings_are_wanted() {
        let v = serde_json::json!({
            "name": 493, "count": 3, "on": true, "tags": [1, true, "x", 0.5],
            "maybe": 7, "map": {"a": 1e21, "b": false}
        });
        let t = Typed::deserialize(Coercing(&v)).unwrap();
        assert_eq!(t.name, "493");
        assert_eq!(t.tags, ["1", "true", "x", "0.5"]);
        assert_eq!(t.maybe.as_deref(), Some("7"));
        assert_eq!(t.map["a"], "1e+21");
        assert_eq!(t.map["b"], "false");
        // Values wanted as values are left alone.
        assert_eq!(Value::deserialize(Coercing(&v)).unwrap(), v);
        let bad = serde_json::json!({"name": "x", "count": "3", "on": true, "tags": [], "map": {}});
        assert!(Typed::deserialize(Coercing(&bad)).is_err());
    }
}
