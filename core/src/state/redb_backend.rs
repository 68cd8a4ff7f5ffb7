//! The redb backend: one file, one table per kind, a schema version in `meta`.
//!
//! Each write is one redb transaction committed with redb's default durability (a single
//! fsync, checksummed pages), so a write that returned `Ok` survives a crash or power loss.
//!
//! After an I/O error (a full disk, a failed fsync) redb refuses every later operation,
//! reads too, until the file is closed and opened again: [`Backend::reopen`] does that, and
//! a read that meets such an error reopens and tries once more. A commit that failed left
//! the file as the last successful commit wrote it (redb's commit writes the new pages
//! before the header that points at them), so reopening finds every acknowledged write.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Backend, Op, SCHEMA_VERSION, StateError, tables};

const VERSION_KEY: &str = "schema_version";

fn def(name: &'static str) -> TableDefinition<'static, &'static str, &'static [u8]> {
    TableDefinition::new(name)
}

/// A redb file.
pub struct RedbBackend {
    /// `None` only while a reopen failed (the next one tries again).
    db: RwLock<Option<Database>>,
    path: PathBuf,
    cache_bytes: usize,
    /// An I/O error was seen since the file was opened: redb refuses everything until it
    /// is opened again.
    failed: AtomicBool,
    /// The last I/O error the operating system reported (redb's later refusals only say
    /// that there was one).
    last_io: Mutex<Option<String>>,
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
        let backend = Self {
            db: RwLock::new(Some(open_file(path, cache_bytes)?)),
            path: path.to_path_buf(),
            cache_bytes,
            failed: AtomicBool::new(false),
            last_io: Mutex::new(None),
        };
        backend.init_schema()?;
        Ok(backend)
    }

    /// A redb error as a [`StateError`]; an I/O error marks the file for reopening.
    fn err(&self, e: impl Into<redb::Error>) -> StateError {
        let path = self.path.display().to_string();
        match e.into() {
            redb::Error::Io(io) => {
                let detail = io.to_string();
                *self.last_io.lock().unwrap() = Some(detail.clone());
                self.failed.store(true, Ordering::SeqCst);
                StateError::Io { path, detail }
            }
            redb::Error::PreviousIo | redb::Error::DatabaseClosed => {
                self.failed.store(true, Ordering::SeqCst);
                let last = self.last_io.lock().unwrap().clone();
                StateError::Io {
                    path,
                    detail: match last {
                        Some(d) => format!("{d} (an earlier operation failed)"),
                        None => "an earlier operation failed with an I/O error".into(),
                    },
                }
            }
            redb::Error::Corrupted(detail) => StateError::Corrupt { path, detail },
            other => {
                let text = other.to_string();
                if text.to_lowercase().contains("corrupt") {
                    StateError::Corrupt { path, detail: text }
                } else {
                    StateError::Storage(format!("{path}: {text}"))
                }
            }
        }
    }

    /// Run `f` on the open file. A read (`retry`) that fails with an I/O error reopens the
    /// file and runs once more: the error may be a write's, which poisoned the file for
    /// every reader too.
    fn with_db<T>(
        &self,
        retry: bool,
        f: impl Fn(&Database) -> Result<T, StateError>,
    ) -> Result<T, StateError> {
        let run = || {
            let guard = self.db.read().unwrap_or_else(|e| e.into_inner());
            match guard.as_ref() {
                Some(db) => unpanicked(&self.path, || f(db)),
                None => Err(self.closed()),
            }
        };
        match run() {
            Err(e) if retry && e.is_io() => {
                self.reopen()?;
                run()
            }
            other => other,
        }
    }

    fn closed(&self) -> StateError {
        StateError::Io {
            path: self.path.display().to_string(),
            detail: match self.last_io.lock().unwrap().clone() {
                Some(d) => format!("{d} (the file could not be reopened yet)"),
                None => "the file could not be reopened yet".into(),
            },
        }
    }

    fn init_schema(&self) -> Result<(), StateError> {
        self.with_db(false, |db| self.init_schema_in(db))
    }

    fn init_schema_in(&self, db: &Database) -> Result<(), StateError> {
        let txn = db.begin_write().map_err(|e| self.err(e))?;
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

/// Run `f` on the file; a panic inside redb is the file's corruption. redb checks most of
/// what it reads, but some damaged pages (a page of an unknown type, found by fuzzing:
/// `fuzz/corpus/state_file/`) reach an `unreachable!` in it instead of its `Corrupted`.
fn unpanicked<T>(path: &Path, f: impl FnOnce() -> Result<T, StateError>) -> Result<T, StateError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(StateError::Corrupt {
            path: path.display().to_string(),
            detail: format!("the storage layer failed reading it: {what}"),
        })
    })
}

/// Open (or create) the file with redb, its errors named for the user.
fn open_file(path: &Path, cache_bytes: usize) -> Result<Database, StateError> {
    let shown = path.display().to_string();
    let opened = unpanicked(path, || {
        Ok(redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(path))
    })?;
    opened.map_err(|e| match e {
        redb::DatabaseError::DatabaseAlreadyOpen => StateError::InUse {
            path: shown.clone(),
        },
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => {
            StateError::Corrupt {
                path: shown.clone(),
                detail,
            }
        }
        // redb reports a file that is not a redb file (a damaged header) as invalid data.
        redb::DatabaseError::Storage(redb::StorageError::Io(io))
            if io.kind() == std::io::ErrorKind::InvalidData =>
        {
            StateError::Corrupt {
                path: shown.clone(),
                detail: io.to_string(),
            }
        }
        redb::DatabaseError::Storage(redb::StorageError::Io(io)) => StateError::Io {
            path: shown.clone(),
            detail: format!("opening: {io}"),
        },
        redb::DatabaseError::UpgradeRequired(v) => StateError::Corrupt {
            path: shown.clone(),
            detail: format!("written in redb file format {v}, which this agent cannot read"),
        },
        other => StateError::Storage(format!("opening {shown}: {other}")),
    })
}

impl Backend for RedbBackend {
    fn write(&self, ops: Vec<Op>) -> Result<(), StateError> {
        self.with_db(false, |db| self.write_in(db, &ops))
    }

    fn get(&self, table: &'static str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        self.with_db(true, |db| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let t = txn.open_table(def(table)).map_err(|e| self.err(e))?;
            Ok(t.get(key)
                .map_err(|e| self.err(e))?
                .map(|v| v.value().to_vec()))
        })
    }

    fn scan(
        &self,
        table: &'static str,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        self.with_db(true, |db| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
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
        })
    }

    fn reopen(&self) -> Result<(), StateError> {
        let mut slot = self.db.write().unwrap_or_else(|e| e.into_inner());
        if !self.failed.load(Ordering::SeqCst) && slot.is_some() {
            return Ok(());
        }
        // Close first: redb holds a lock on the file, which a second open would meet.
        if let Some(old) = slot.take()
            && let Err(e) = old.close()
        {
            tracing::debug!(path = %self.path.display(), error = %e, "closing the state file after an I/O error");
        }
        let db = open_file(&self.path, self.cache_bytes)?;
        *slot = Some(db);
        self.failed.store(false, Ordering::SeqCst);
        tracing::debug!(path = %self.path.display(), "state file reopened after an I/O error");
        Ok(())
    }
}

impl RedbBackend {
    fn write_in(&self, db: &Database, ops: &[Op]) -> Result<(), StateError> {
        let txn = db.begin_write().map_err(|e| self.err(e))?;
        for op in ops {
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

    /// Found by fuzzing: a damaged page of an unknown type made redb panic while opening
    /// the file (an `unreachable!` in its B-tree code), which took the agent down instead of
    /// saying the file is corrupt.
    #[test]
    fn a_file_whose_damage_panics_redb_is_corrupt() {
        let damaged = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../fuzz/corpus/state_file/damaged-page-type.redb"),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        std::fs::write(&path, damaged).unwrap();
        match RedbBackend::open(&path) {
            Err(StateError::Corrupt { detail, .. }) => assert!(!detail.is_empty()),
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("the damaged file opened"),
        }
    }
}
