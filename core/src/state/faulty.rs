//! A backend that fails on purpose, for tests of what the state layer does when the disk
//! does: wraps another backend and fails its next writes on request, or a share of all
//! its writes.
//!
//! A running agent takes the share from the environment, for soak tests only:
//! `PADDOCK_TEST_STATE_WRITE_FAULTS=N` (off when unset) fails about one state DB commit in
//! `N`, chosen by a fixed pseudo-random sequence (`PADDOCK_TEST_STATE_WRITE_FAULTS_SEED`, 0
//! by default). The agent logs a warning at start when it is on.
//!
//! `PADDOCK_TEST_STATE_FULL_FILE=<path>` makes the disk full on demand, for tests that need
//! a refused write at a chosen moment: every commit fails with `No space left on device`
//! while a file exists at that path (the agent's retries included), and writes are taken
//! again once it is removed.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Backend, Op, StateError};

/// Fails the next `n` writes (set with [`FaultyBackend::fail_next`]) and can make writes
/// slow like an fsync ([`FaultyBackend::set_delay`]); reads pass through.
pub struct FaultyBackend<B: Backend> {
    inner: B,
    fail: AtomicU64,
    delay_us: AtomicU64,
    /// Fail about one write in this many (0: never).
    one_in: AtomicU64,
    seed: AtomicU64,
    /// Writes seen, for the pseudo-random sequence.
    seen: AtomicU64,
    /// Writes that reached the inner backend.
    pub writes: AtomicU64,
    /// Writes failed on purpose.
    pub injected: AtomicU64,
    /// Disk faults as redb meets them (see [`IoFaults`]).
    pub io: IoFaults,
}

/// The environment variable that turns injected commit failures on in a running agent.
pub const WRITE_FAULTS_ENV: &str = "PADDOCK_TEST_STATE_WRITE_FAULTS";
/// Its seed.
pub const WRITE_FAULTS_SEED_ENV: &str = "PADDOCK_TEST_STATE_WRITE_FAULTS_SEED";
/// The environment variable naming the file whose presence makes the disk full.
pub const FULL_FILE_ENV: &str = "PADDOCK_TEST_STATE_FULL_FILE";

/// `(one_in, seed)` from [`WRITE_FAULTS_ENV`] and [`WRITE_FAULTS_SEED_ENV`]: `None` when
/// unset, empty or 0, an error naming the variable when not a number.
pub fn write_faults_from_env() -> Result<Option<(u64, u64)>, StateError> {
    let read =
        |name: &str| -> Result<Option<u64>, StateError> {
            match std::env::var(name) {
                Ok(v) if !v.trim().is_empty() => v.trim().parse().map(Some).map_err(|_| {
                    StateError::Storage(format!("{name}={v:?} is not a whole number"))
                }),
                _ => Ok(None),
            }
        };
    match read(WRITE_FAULTS_ENV)? {
        Some(n) if n > 0 => Ok(Some((n, read(WRITE_FAULTS_SEED_ENV)?.unwrap_or(0)))),
        _ => Ok(None),
    }
}

/// The agent's state DB: the redb file at `path`, behind a [`FaultyBackend`] failing a
/// share of the commits when [`WRITE_FAULTS_ENV`] says so.
pub fn open_redb(
    path: &std::path::Path,
    cache_bytes: usize,
) -> Result<std::sync::Arc<dyn super::StateDb>, StateError> {
    let faults = write_faults_from_env()?;
    let full_file = std::env::var_os(FULL_FILE_ENV).filter(|v| !v.is_empty());
    if faults.is_none() && full_file.is_none() {
        return Ok(std::sync::Arc::new(super::RedbState::open_with_cache(
            path,
            cache_bytes,
        )?));
    }
    let backend = FaultyBackend::new(super::RedbBackend::open_with_cache(path, cache_bytes)?);
    if let Some((one_in, seed)) = faults {
        tracing::warn!(
            one_in,
            seed,
            "{WRITE_FAULTS_ENV} is set: about one state DB commit in {one_in} will fail on purpose"
        );
        backend.fail_one_in(one_in, seed);
    }
    if let Some(file) = full_file {
        let file = std::path::PathBuf::from(file);
        tracing::warn!(file = %file.display(), "{FULL_FILE_ENV} is set: state DB commits fail as on a full disk while this file exists");
        backend.io.full_while_exists(file);
    }
    Ok(std::sync::Arc::new(super::KvState::with_backend(
        backend,
        super::CommitOptions::default(),
    )))
}

/// SplitMix64: a well-spread value for the `i`th write.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<B: Backend> FaultyBackend<B> {
    /// Wrap `inner`.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            fail: AtomicU64::new(0),
            delay_us: AtomicU64::new(0),
            one_in: AtomicU64::new(0),
            seed: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            io: IoFaults::default(),
        }
    }

    /// Fail about one write in `n` (0: none), picked by a pseudo-random sequence from
    /// `seed`, so a run can be repeated.
    pub fn fail_one_in(&self, n: u64, seed: u64) {
        self.seed.store(seed, Ordering::SeqCst);
        self.one_in.store(n, Ordering::SeqCst);
    }

    /// Make every write take `d` (as a disk's fsync would).
    pub fn set_delay(&self, d: std::time::Duration) {
        self.delay_us.store(d.as_micros() as u64, Ordering::SeqCst);
    }

    /// Make the next `n` writes fail (nothing of them is applied).
    pub fn fail_next(&self, n: u64) {
        self.fail.store(n, Ordering::SeqCst);
    }
}

impl<B: Backend> Backend for FaultyBackend<B> {
    fn write(&self, ops: Vec<Op>) -> Result<(), StateError> {
        // The share set by `fail_one_in` fails as a failed fsync does (the file refuses
        // everything until reopened), not as a lone failed commit.
        let one_in = self.one_in.load(Ordering::SeqCst);
        if one_in > 0 && !self.io.failed.load(Ordering::SeqCst) {
            let i = self.seen.fetch_add(1, Ordering::Relaxed);
            if mix(self.seed.load(Ordering::Relaxed) ^ i).is_multiple_of(one_in) {
                let n = self.injected.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(
                    injected = n,
                    "state DB fsync failed on purpose (injected fault)"
                );
                self.io.fail_sync_next(1);
            }
        }
        self.io.write()?;
        let failing = self
            .fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(StateError::Storage(
                "injected fault: the commit failed".into(),
            ));
        }
        let delay = self.delay_us.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay));
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write(ops)
    }

    fn get(&self, table: &'static str, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        self.io.read()?;
        self.inner.get(table, key)
    }

    fn scan(
        &self,
        table: &'static str,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        self.io.read()?;
        self.inner.scan(table, prefix)
    }

    fn reopen(&self) -> Result<(), StateError> {
        self.io.reopen();
        self.inner.reopen()
    }
}

/// Disk faults as redb meets them: a failed fsync or a full disk fails the commit with an
/// I/O error ([`StateError::Io`]), and every later read and write fails too until the
/// backend is reopened ([`Backend::reopen`]).
#[derive(Default)]
pub struct IoFaults {
    fail_sync: AtomicU64,
    full: std::sync::atomic::AtomicBool,
    /// The disk is full while a file exists here.
    full_file: std::sync::OnceLock<std::path::PathBuf>,
    failed: std::sync::atomic::AtomicBool,
    /// Times the backend was reopened after a fault.
    pub reopens: AtomicU64,
    /// Writes failed with an I/O error on purpose.
    pub failed_writes: AtomicU64,
}

impl IoFaults {
    /// Fail the next `n` commits as a failed fsync does.
    pub fn fail_sync_next(&self, n: u64) {
        self.fail_sync.store(n, Ordering::SeqCst);
    }

    /// Fail every commit with `No space left on device` until called with `false`.
    pub fn set_disk_full(&self, full: bool) {
        self.full.store(full, Ordering::SeqCst);
    }

    /// Fail every commit with `No space left on device` while a file exists at `path`.
    pub fn full_while_exists(&self, path: std::path::PathBuf) {
        let _ = self.full_file.set(path);
    }

    fn full(&self) -> bool {
        self.full.load(Ordering::SeqCst) || self.full_file.get().is_some_and(|p| p.exists())
    }

    fn error(detail: &str) -> StateError {
        StateError::Io {
            path: "(injected fault)".into(),
            detail: detail.into(),
        }
    }

    fn read(&self) -> Result<(), StateError> {
        if self.failed.load(Ordering::SeqCst) {
            return Err(Self::error(
                "Previous I/O error occurred. Please close and re-open the database.",
            ));
        }
        Ok(())
    }

    fn write(&self) -> Result<(), StateError> {
        self.read()?;
        let detail = if self.full() {
            "No space left on device (os error 28)"
        } else if self
            .fail_sync
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            "fsync failed: Input/output error (os error 5)"
        } else {
            return Ok(());
        };
        self.failed.store(true, Ordering::SeqCst);
        self.failed_writes.fetch_add(1, Ordering::Relaxed);
        Err(Self::error(detail))
    }

    fn reopen(&self) {
        if self.failed.swap(false, Ordering::SeqCst) {
            self.reopens.fetch_add(1, Ordering::Relaxed);
        }
    }
}
