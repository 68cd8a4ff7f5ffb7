//! The decoder: a `serde::Deserializer` over a `serde_json::Value` with the rules of Go's
//! `encoding/json` that types cannot carry.

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

/// Decodes `value` into `T` the way Go's `encoding/json` decodes into the mirrored struct
/// (see [`GoValue`]).
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(GoValue(value))
}

/// A deserializer over a JSON value that adds Go's rules:
///
/// * an object key names a struct field case-insensitively (an exact match wins, else
///   the field whose name equals it ignoring ASCII case);
/// * `null` is the zero value of any type (string, number, bool, slice, map, struct),
///   inside collections too;
/// * a struct field the object does not carry reads as `null`, so that the field's own
///   rule decides: the zero value, or an error for an `always` field (see the parent
///   module), whose path then names the field.
///
/// Everything else (integers refusing `1.0`, range checks, strings refusing numbers, a
/// struct refusing an array) is serde's, which agrees with Go.
#[derive(Clone, Copy)]
pub struct GoValue<'a>(pub &'a Value);

static EMPTY: [Value; 0] = [];
static NULL: Value = Value::Null;

struct GoSeq<'a> {
    iter: std::slice::Iter<'a, Value>,
}

impl<'de> SeqAccess<'de> for GoSeq<'_> {
    type Error = serde_json::Error;
    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Self::Error> {
        match self.iter.next() {
            Some(v) => seed.deserialize(GoValue(v)).map(Some),
            None => Ok(None),
        }
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// An object's entries, keys folded onto the struct's field names.
struct GoMap<'a> {
    entries: Vec<(String, &'a Value)>,
    next: usize,
}

impl<'a> GoMap<'a> {
    fn new(
        m: Option<&'a serde_json::Map<String, Value>>,
        fields: Option<&'static [&'static str]>,
    ) -> Self {
        let mut entries: Vec<(String, &'a Value)> = Vec::new();
        for (k, v) in m.into_iter().flatten() {
            let key = match fields {
                Some(fields) if !fields.contains(&k.as_str()) => fields
                    .iter()
                    .find(|f| f.eq_ignore_ascii_case(k))
                    .map_or_else(|| k.clone(), |f| f.to_string()),
                _ => k.clone(),
            };
            // Go decodes a repeated field again: the later value wins.
            match entries.iter_mut().find(|e| e.0 == key) {
                Some(e) => e.1 = v,
                None => entries.push((key, v)),
            }
        }
        for f in fields.into_iter().flatten() {
            if !entries.iter().any(|e| e.0 == *f) {
                entries.push((f.to_string(), &NULL));
            }
        }
        GoMap { entries, next: 0 }
    }
}

impl<'de> MapAccess<'de> for GoMap<'_> {
    type Error = serde_json::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.entries.get(self.next) {
            Some((k, _)) => seed.deserialize(k.clone().into_deserializer()).map(Some),
            None => Ok(None),
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let v = self.entries[self.next].1;
        self.next += 1;
        seed.deserialize(GoValue(v))
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len() - self.next)
    }
}

macro_rules! null_is {
    ($($method:ident => $zero:ident ( $($arg:expr)? );)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                match self.0 {
                    Value::Null => visitor.$zero($($arg)?),
                    _ => self.deserialize_any(visitor),
                }
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for GoValue<'_> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_str(s),
            Value::Array(a) => visitor.visit_seq(GoSeq { iter: a.iter() }),
            Value::Object(m) => visitor.visit_map(GoMap::new(Some(m), None)),
        }
    }

    null_is! {
        deserialize_bool => visit_bool(false);
        deserialize_i8 => visit_i64(0);
        deserialize_i16 => visit_i64(0);
        deserialize_i32 => visit_i64(0);
        deserialize_i64 => visit_i64(0);
        deserialize_u8 => visit_u64(0);
        deserialize_u16 => visit_u64(0);
        deserialize_u32 => visit_u64(0);
        deserialize_u64 => visit_u64(0);
        deserialize_f32 => visit_f64(0.0);
        deserialize_f64 => visit_f64(0.0);
        deserialize_str => visit_str("");
        deserialize_string => visit_str("");
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_seq(GoSeq { iter: EMPTY.iter() }),
            _ => self.deserialize_any(visitor),
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
            Value::Null => visitor.visit_map(GoMap::new(None, None)),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            // A zero struct (a `null` element of a `[]T`): every field is absent.
            Value::Null => visitor.visit_map(GoMap::new(None, Some(fields))),
            Value::Object(m) => visitor.visit_map(GoMap::new(Some(m), Some(fields))),
            // Go: "cannot unmarshal array into Go value of type struct".
            Value::Array(_) => Err(de::Error::invalid_type(de::Unexpected::Seq, &visitor)),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit unit_struct enum identifier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gotypes::{AgentHealthResponse, Allocation, Evaluation, Job, JobSummary, Node};
    use serde_json::json;

    crate::gotypes::go_struct! {
        /// Probe for the integer checks.
        IntProbe { Count: i64, Port: u16 }
    }

    #[test]
    fn integers_refuse_floats_and_out_of_range() {
        assert!(decode::<IntProbe>(&json!({"Count": 1.0})).is_err());
        assert!(decode::<IntProbe>(&json!({"Count": 1e3})).is_err());
        assert!(decode::<IntProbe>(&json!({"Port": 70000})).is_err());
        assert!(decode::<IntProbe>(&json!({"Count": 1, "Port": 8080})).is_ok());
        assert!(decode::<JobSummary>(&json!({"CreateIndex": -1})).is_err());
    }

    crate::gotypes::go_struct! {
        /// Probe for the zero-value rules (Allocation's kinds of fields).
        ZeroProbe {
            ID: String,
            Job: Option<Job>,
            TaskStates: std::collections::BTreeMap<String, Option<crate::gotypes::TaskState>>,
            DesiredTransition: crate::gotypes::DesiredTransition,
            PreemptedAllocations: Vec<String>,
            Services: std::collections::BTreeMap<String, String>,
            CreateIndex: u64,
        }
    }

    #[test]
    fn null_and_absence_are_zero_values() {
        let a: ZeroProbe = decode(&json!({
            "ID": null, "Job": null, "TaskStates": {"t": null}, "DesiredTransition": null,
            "PreemptedAllocations": [null], "Services": {"a": null}, "CreateIndex": null
        }))
        .unwrap();
        assert_eq!(a.ID, "");
        assert!(a.Job.is_none());
        assert_eq!(a.PreemptedAllocations, vec![String::new()]);
        assert_eq!(a.Services.get("a").map(String::as_str), Some(""));
        assert_eq!(
            decode::<ZeroProbe>(&json!({})).unwrap(),
            ZeroProbe::default()
        );
        let _: Evaluation = decode(&json!({})).unwrap();
        // An allocation without what Nomad always sends is refused, naming the field.
        let e = decode::<Allocation>(&json!({"ID": "a"})).unwrap_err();
        assert!(e.to_string().contains(crate::gotypes::NEVER_NIL), "{e}");
    }

    #[test]
    fn keys_match_case_insensitively_like_go() {
        // Lower-case `waituntil` still lands on WaitUntil, so its integer is refused.
        assert!(decode::<Evaluation>(&json!({"waituntil": 5})).is_err());
        let e: Evaluation = decode(&json!({"id": "x", "JOBID": "j"})).unwrap();
        assert_eq!((e.ID.as_str(), e.JobID.as_str()), ("x", "j"));
        // The exact name wins over a folded one.
        let h: AgentHealthResponse = decode(&json!({"Client": {"OK": true}})).unwrap();
        assert!(h.client.unwrap().ok);
    }

    #[test]
    fn structs_refuse_arrays_and_scalars() {
        assert!(decode::<Job>(&json!([])).is_err());
        assert!(decode::<Job>(&json!("job")).is_err());
        assert!(decode::<Vec<String>>(&json!({})).is_err());
        // A node with nothing in it lacks what Go clients dereference.
        assert!(decode::<Node>(&json!({})).is_err());
    }
}
