//! The JSON reader: walks an object field by field so that every error names the exact
//! path of its field, suggests the field meant when a name is close to a known one, and
//! refuses fields nobody read.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::R;
use crate::jobspec::JobspecError;

pub(super) struct Obj<'a> {
    pub(super) path: String,
    map: &'a Map<String, Value>,
    seen: BTreeSet<&'static str>,
}

impl<'a> Obj<'a> {
    pub(super) fn new(path: String, v: &'a Value) -> R<Self> {
        match v {
            Value::Object(map) => Ok(Self {
                path,
                map,
                seen: BTreeSet::new(),
            }),
            other => Err(JobspecError::new(
                path,
                format!("expected an object, found {}", kind(other)),
            )),
        }
    }

    pub(super) fn field(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    pub(super) fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.seen.insert(key);
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn string(&mut self, key: &'static str) -> R<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(o) => Err(JobspecError::new(
                self.field(key),
                format!("expected a string, found {}", kind(o)),
            )),
        }
    }

    pub(super) fn required_string(&mut self, key: &'static str) -> R<String> {
        match self.string(key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(JobspecError::new(self.field(key), "must not be empty")),
            None => Err(JobspecError::new(self.field(key), self.missing(key))),
        }
    }

    /// "missing required field", with a hint when a key that looks like a typo of it is there.
    pub(super) fn missing(&self, key: &str) -> String {
        let typo = self
            .map
            .keys()
            .find(|k| k.as_str() != key && close(&k.to_lowercase(), &key.to_lowercase()));
        match typo {
            Some(k) => format!("missing required field (found {k:?}: a typo?)"),
            None => "missing required field".into(),
        }
    }

    pub(super) fn uint(&mut self, key: &'static str, max: u64) -> R<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v <= max => Ok(Some(v)),
                _ => Err(JobspecError::new(
                    self.field(key),
                    format!("expected an integer between 0 and {max}, found {n}"),
                )),
            },
            Some(o) => Err(JobspecError::new(
                self.field(key),
                format!("expected an integer, found {}", kind(o)),
            )),
        }
    }

    pub(super) fn u32(&mut self, key: &'static str) -> R<Option<u32>> {
        Ok(self.uint(key, u32::MAX as u64)?.map(|v| v as u32))
    }

    pub(super) fn boolean(&mut self, key: &'static str) -> R<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(o) => Err(JobspecError::new(
                self.field(key),
                format!("expected a boolean, found {}", kind(o)),
            )),
        }
    }

    pub(super) fn string_map(&mut self, key: &'static str) -> R<BTreeMap<String, String>> {
        let Some(v) = self.get(key) else {
            return Ok(BTreeMap::new());
        };
        let Value::Object(m) = v else {
            return Err(JobspecError::new(
                self.field(key),
                format!("expected an object of strings, found {}", kind(v)),
            ));
        };
        m.iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                o => Err(JobspecError::new(
                    format!("{}.{k}", self.field(key)),
                    format!("expected a string, found {}", kind(o)),
                )),
            })
            .collect()
    }

    pub(super) fn array(&mut self, key: &'static str) -> R<Vec<&'a Value>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => Ok(a.iter().collect()),
            Some(o) => Err(JobspecError::new(
                self.field(key),
                format!("expected an array, found {}", kind(o)),
            )),
        }
    }

    pub(super) fn object(&mut self, key: &'static str) -> R<Option<Obj<'a>>> {
        let path = self.field(key);
        self.get(key).map(|v| Obj::new(path, v)).transpose()
    }

    /// The non-null values of `keys`, marked read: Nomad fields kept as given.
    pub(super) fn kept(&mut self, keys: &[&'static str]) -> BTreeMap<String, Value> {
        keys.iter()
            .filter_map(|k| self.get(k).map(|v| (k.to_string(), v.clone())))
            .collect()
    }

    /// Every key must have been read or be in `ignored`.
    pub(super) fn finish(self, ignored: &[&str]) -> R<()> {
        for k in self.map.keys() {
            if !self.seen.contains(k.as_str()) && !ignored.contains(&k.as_str()) {
                return Err(JobspecError::new(
                    format!("{}.{k}", self.path),
                    "unknown field",
                ));
            }
        }
        Ok(())
    }
}

/// Edit distance of at most 2 (insertions, deletions, substitutions).
fn close(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()] <= 2
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
