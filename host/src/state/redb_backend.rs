//! The redb backend: one file, one table per kind, a schema version in `meta`.
//!
//! Each write is one redb transaction committed with redb's default durability (a single
//! fsync, checksummed pages), so a write that returned `Ok` survives a crash or power loss.

use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Backend, Op, SCHEMA_VERSION, StateError, tables};

const VERSION_KEY: &str = "schema_version";

fn def(name: &'static str) -> TableDefinition<'static, &'static str, &'static [u8]> {
    TableDefinition::new(name)
}

/// A redb file.
pub struct RedbBackend {
    db: Database,
    path: PathBuf,
}

impl RedbBackend {
    /// The cache [`RedbBackend::open`] gives redb: what a 10,000-task state file's hot pages
    /// need, where redb's own default (1 GiB) would let it grow into most of the agent's
    /// memory.
    pub const DEFAULT_CACHE: usize = 32 << 20;

    /// Open or create the file; create the tables; check and upgrade the schema version.
    pub fn open(path: &Path) -> Result<Self, StateError> {
        Self::open_with_cache(path, Self::DEFAULT_CACHE)
    }

    /// [`RedbBackend::open`], with redb keeping at most `cache_bytes` of the file in memory
    /// (read cache and write buffer together).
    pub fn open_with_cache(path: &Path, cache_bytes: usize) -> Result<Self, StateError> {
        let shown = path.display().to_string();
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => StateError::InUse {
                    path: shown.clone(),
                },
                redb::DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => {
                    StateError::Corrupt {
                        path: shown.clone(),
                        detail,
                    }
                }
                redb::DatabaseError::UpgradeRequired(v) => StateError::Corrupt {
                    path: shown.clone(),
                    detail: format!(
                        "written in redb file format {v}, which this agent cannot read"
                    ),
                },
                other => StateError::Storage(format!("opening {shown}: {other}")),
            })?;
        let backend = Self {
            db,
            path: path.to_path_buf(),
        };
        backend.init_schema()?;
        Ok(backend)
    }

    fn err(&self, e: impl std::fmt::Display) -> StateError {
        let text = e.to_string();
        if text.to_lowercase().contains("corrupt") {
            StateError::Corrupt {
                path: self.path.display().to_string(),
                detail: text,
            }
        } else {
            StateError::Storage(format!("{}: {text}", self.path.display()))
        }
    }

    fn init_schema(&self) -> Result<(), StateError> {
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        let found = {
            for t in tables::ALL {
                txn.open_table(def(t)).map_err(|e| self.err(e))?;
            }
            let meta = txn.open_table(def(tables::META)).map_err(|e| self.err(e))?;
            let v = meta.get(VERSION_KEY).map_err(|e| self.err(e))?;
            v.map(|g| {
                let b = g.value();
                let mut arr = [0u8; 8];
                if b.len() == 8 {
                    arr.copy_from_slice(b);
                }
                u64::from_le_bytes(arr)
            })
        };
        match found {
            Some(v) if v > SCHEMA_VERSION => {
                return Err(StateError::TooNew {
                    path: self.path.display().to_string(),
                    found: v,
                });
            }
            Some(v) if v == SCHEMA_VERSION => {
                txn.abort().map_err(|e| self.err(e))?;
                return Ok(());
            }
            Some(v) => {
                tracing::info!(path = %self.path.display(), from = v, to = SCHEMA_VERSION, "upgrading state schema")
            }
            None => tracing::debug!(path = %self.path.display(), "new state file"),
        }
        {
            let mut meta = txn.open_table(def(tables::META)).map_err(|e| self.err(e))?;
            meta.insert(VERSION_KEY, SCHEMA_VERSION.to_le_bytes().as_slice())
                .map_err(|e| self.err(e))?;
        }
        txn.commit().map_err(|e| self.err(e))
    }
}

impl Backend for RedbBackend {
    fn write(&self, ops: Vec<Op>) -> Result<(), StateError> {
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        for op in &ops {
            match op {
                Op::Put(t, k, v) => {
                    let mut table = txn.open_table(def(t)).map_err(|e| self.err(e))?;
                    table
                        .insert(k.as_str(), v.as_slice())
                        .map_err(|e| self.err(e))?;
                }
                Op::Delete(t, k) => {
                    let mut table = txn.open_table(def(t)).map_err(|e| self.err(e))?;
                    table.remove(k.as_str()).map_err(|e| self.err(e))?;
                }
                Op::DeletePrefix(t, p) => {
                    let mut table = txn.open_table(def(t)).map_err(|e| self.err(e))?;
                    let keys: Vec<String> = table
                        .range(p.as_str()..)
                        .map_err(|e| self.err(e))?
                        .map_while(|r| r.ok().map(|(k, _)| k.value().to_string()))
                        .take_while(|k| k.starts_with(p.as_str()))
                        .collect();
                    for k in keys {
                        table.remove(k.as_str()).map_err(|e| self.err(e))?;
                    }
                }
            }
        }
        txn.commit().map_err(|e| self.err(e))
    }

    fn get(&self, table: &'static str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = txn.open_table(def(table)).map_err(|e| self.err(e))?;
        Ok(t.get(key)
            .map_err(|e| self.err(e))?
            .map(|v| v.value().to_vec()))
    }

    fn scan(
        &self,
        table: &'static str,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = txn.open_table(def(table)).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for item in t.range(prefix..).map_err(|e| self.err(e))? {
            let (k, v) = item.map_err(|e| self.err(e))?;
            let k = k.value();
            if !k.starts_with(prefix) {
                break;
            }
            out.push((k.to_string(), v.value().to_vec()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{RedbState, StateDb};

    /// A file as an agent with schema 1 left it: the five tables of then, one allocation.
    fn write_v1(path: &Path) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        for t in [
            "meta",
            "jobs",
            "allocs",
            "task_state",
            "local_state",
            "node",
        ] {
            txn.open_table(def(t)).unwrap();
        }
        {
            let mut meta = txn.open_table(def(tables::META)).unwrap();
            meta.insert(VERSION_KEY, 1u64.to_le_bytes().as_slice())
                .unwrap();
            let mut node = txn.open_table(def(tables::NODE)).unwrap();
            node.insert("identity", br#"{"id":"node-1"}"#.as_slice())
                .unwrap();
        }
        txn.commit().unwrap();
    }

    fn version(path: &Path) -> u64 {
        let db = Database::create(path).unwrap();
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(def(tables::META)).unwrap();
        let v = t.get(VERSION_KEY).unwrap().unwrap();
        u64::from_le_bytes(v.value().try_into().unwrap())
    }

    #[test]
    fn a_schema_1_file_is_upgraded_keeping_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        write_v1(&path);
        {
            let db = RedbState::open(&path).unwrap();
            assert_eq!(db.node_identity().unwrap().unwrap()["id"], "node-1");
            // The tables later schemas added are there.
            assert!(db.processes().unwrap().is_empty());
            assert!(db.variables().unwrap().is_empty());
        }
        assert_eq!(version(&path), SCHEMA_VERSION);
    }

    #[test]
    fn a_newer_schema_or_a_file_in_use_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        {
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut meta = txn.open_table(def(tables::META)).unwrap();
                meta.insert(VERSION_KEY, 99u64.to_le_bytes().as_slice())
                    .unwrap();
            }
            txn.commit().unwrap();
        }
        let e = RedbState::open(&path)
            .err()
            .expect("a newer schema must be refused");
        assert!(matches!(e, StateError::TooNew { found: 99, .. }), "{e:?}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        // Refusing it changed nothing.
        assert_eq!(version(&path), 99);

        let other = dir.path().join("other.redb");
        let _held = RedbState::open(&other).unwrap();
        let e = RedbState::open(&other)
            .err()
            .expect("a second opener must be refused");
        assert!(matches!(e, StateError::InUse { .. }), "{e:?}");
    }
}
