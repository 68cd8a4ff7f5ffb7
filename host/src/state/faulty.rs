//! A backend that fails on purpose, for tests of what the state layer does when the disk
//! does: wraps another backend and fails its next writes on request.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Backend, Op, StateError};

/// Fails the next `n` writes (set with [`FaultyBackend::fail_next`]) and can make writes
/// slow like an fsync ([`FaultyBackend::set_delay`]); reads pass through.
pub struct FaultyBackend<B: Backend> {
    inner: B,
    fail: AtomicU64,
    delay_us: AtomicU64,
    /// Writes that reached the inner backend.
    pub writes: AtomicU64,
}

impl<B: Backend> FaultyBackend<B> {
    /// Wrap `inner`.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            fail: AtomicU64::new(0),
            delay_us: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        }
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
        self.inner.get(table, key)
    }

    fn scan(
        &self,
        table: &'static str,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        self.inner.scan(table, prefix)
    }
}
