//! Warm stores: a store whose call ended cleanly waits here for the next call of the same
//! component version, so that call skips instantiation.

use super::Call;

/// Idle warm stores of one component version, at most [`WarmPool::MAX_IDLE`]. Each holds a
/// pool slot and a permit, so the cap keeps a quiet component cheap.
#[derive(Default)]
pub(crate) struct WarmPool {
    idle: std::sync::Mutex<Vec<Call>>,
    /// The version was retired: stores are no longer kept.
    closed: std::sync::atomic::AtomicBool,
}

impl WarmPool {
    const MAX_IDLE: usize = 4;

    pub(crate) fn take(&self) -> Option<Call> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    pub(crate) fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub(super) fn put(&self, call: Call) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < Self::MAX_IDLE && !self.closed() {
            idle.push(call);
        }
    }

    /// Drop every idle store and keep none from now on.
    pub(crate) fn clear(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        let drained: Vec<Call> =
            std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        drop(drained);
    }

    /// Keep stores again (a retired version made current again).
    pub(crate) fn reopen(&self) {
        self.closed
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }
}
