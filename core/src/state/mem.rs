//! In-memory backend for tests: the same semantics as redb, without a file.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{Backend, Op, StateError};

/// Tables of ordered maps behind one lock; a write applies all its ops under the lock.
#[derive(Default)]
pub struct MemBackend {
    tables: Mutex<BTreeMap<&'static str, BTreeMap<String, Vec<u8>>>>,
}

impl Backend for MemBackend {
    fn write(&self, ops: Vec<Op>) -> Result<(), StateError> {
        let mut tables = self.tables.lock().unwrap();
        for op in ops {
            match op {
                Op::Put(t, k, v) => {
                    tables.entry(t).or_default().insert(k, v);
                }
                Op::Delete(t, k) => {
                    tables.entry(t).or_default().remove(&k);
                }
                Op::DeletePrefix(t, p) => tables
                    .entry(t)
                    .or_default()
                    .retain(|k, _| !k.starts_with(&p)),
            }
        }
        Ok(())
    }

    fn get(&self, table: &'static str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self
            .tables
            .lock()
            .unwrap()
            .get(table)
            .and_then(|t| t.get(key).cloned()))
    }

    fn scan(
        &self,
        table: &'static str,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let tables = self.tables.lock().unwrap();
        let Some(t) = tables.get(table) else {
            return Ok(Vec::new());
        };
        Ok(t.range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}
