//! The start queue: backpressure for task starts. A burst of placements (a job of 10,000
//! tasks) would otherwise start every task at once; the starts would share the two cores
//! and the instance pool, each would take thousands of times longer than alone, and the
//! slowest would miss their deadlines, which looks like a broken driver. Instead at most
//! `parallel` starts are in a driver at once and the others wait in order; a start's
//! deadline counts from when it leaves the queue. The queue is bounded: placement waits
//! for room ([`StartQueue::wait_for_room`]) before it hands more starts to it, so a burst
//! is held as stored, pending allocations rather than as thousands of waiting starts,
//! while the API answers as before. Its depth, the starts in progress and the time waited
//! are metrics (`paddock.client.start_queue.*`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Starts in a driver at once, by default.
pub const DEFAULT_PARALLEL: usize = 64;
/// Starts waiting, at most, before placement holds back more, by default.
pub const DEFAULT_BOUND: usize = 4096;

/// The queue's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartLimits {
    /// Starts in a driver at once.
    pub parallel: usize,
    /// Starts waiting, at most, before placement holds back more.
    pub bound: usize,
}

impl Default for StartLimits {
    fn default() -> Self {
        Self {
            parallel: DEFAULT_PARALLEL,
            bound: DEFAULT_BOUND,
        }
    }
}

/// What the queue has seen, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartQueueStats {
    /// Starts waiting now.
    pub waiting: u64,
    /// Starts in a driver now.
    pub running: u64,
    /// Starts that left the queue, ever.
    pub started: u64,
    /// Starts that had to wait, ever.
    pub queued: u64,
    /// Time spent waiting, all starts, ns.
    pub wait_ns: u64,
    /// Times placement waited for room.
    pub held_back: u64,
}

/// Task starts, at most `parallel` at once.
pub struct StartQueue {
    limits: StartLimits,
    permits: Semaphore,
    waiting: AtomicU64,
    running: AtomicU64,
    started: AtomicU64,
    queued: AtomicU64,
    wait_ns: AtomicU64,
    held_back: AtomicU64,
    /// Wakes placement waiting for room.
    room: (Mutex<()>, Condvar),
}

/// A start in progress; dropping it lets the next one go.
pub struct StartSlot<'a> {
    queue: &'a StartQueue,
    _permit: SemaphorePermit<'a>,
}

impl StartQueue {
    /// A queue with these limits (a limit of 0 is taken as 1).
    pub fn new(limits: StartLimits) -> Self {
        let limits = StartLimits {
            parallel: limits.parallel.max(1),
            bound: limits.bound.max(1),
        };
        Self {
            limits,
            permits: Semaphore::new(limits.parallel),
            waiting: AtomicU64::new(0),
            running: AtomicU64::new(0),
            started: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            held_back: AtomicU64::new(0),
            room: (Mutex::new(()), Condvar::new()),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> StartLimits {
        self.limits
    }

    /// Wait for a turn to start a task.
    pub async fn enter(&self) -> StartSlot<'_> {
        let permit = match self.permits.try_acquire() {
            Ok(p) => p,
            Err(_) => {
                let since = std::time::Instant::now();
                self.queued.fetch_add(1, Ordering::Relaxed);
                self.waiting.fetch_add(1, Ordering::Relaxed);
                // Counted down on every way out, a cancelled wait too.
                let _left = Left(self);
                let p = self
                    .permits
                    .acquire()
                    .await
                    .expect("the start queue's semaphore is never closed");
                let waited = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.wait_ns.fetch_add(waited, Ordering::Relaxed);
                p
            }
        };
        self.running.fetch_add(1, Ordering::Relaxed);
        self.started.fetch_add(1, Ordering::Relaxed);
        StartSlot {
            queue: self,
            _permit: permit,
        }
    }

    /// Block (a blocking thread, or telling tokio) until fewer than the bound wait:
    /// placement calls this before it hands each allocation to its runner. The bound is
    /// checked against the starts already in the queue, so a runner on its way to it is
    /// not counted yet: the bound is approximate by the starts in flight.
    pub fn wait_for_room(&self) {
        let bound = self.limits.bound as u64;
        if self.waiting.load(Ordering::Relaxed) < bound {
            return;
        }
        self.held_back.fetch_add(1, Ordering::Relaxed);
        crate::util::wait_blocking(|| {
            let (lock, cv) = &self.room;
            let mut g = lock.lock().unwrap();
            while self.waiting.load(Ordering::Relaxed) >= bound {
                // Woken by each start that leaves the queue; the timeout covers a wake
                // that raced the check.
                g = cv
                    .wait_timeout(g, std::time::Duration::from_millis(50))
                    .unwrap()
                    .0;
            }
        });
    }

    /// What the queue has seen.
    pub fn stats(&self) -> StartQueueStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StartQueueStats {
            waiting: get(&self.waiting),
            running: get(&self.running),
            started: get(&self.started),
            queued: get(&self.queued),
            wait_ns: get(&self.wait_ns),
            held_back: get(&self.held_back),
        }
    }
}

/// Counts a waiting start out of the queue, and wakes placement when there is room.
struct Left<'a>(&'a StartQueue);

impl Drop for Left<'_> {
    fn drop(&mut self) {
        let q = self.0;
        let before = q.waiting.fetch_sub(1, Ordering::Relaxed);
        if before == q.limits.bound as u64 {
            q.room.1.notify_all();
        }
    }
}

impl Drop for StartSlot<'_> {
    fn drop(&mut self) {
        self.queue.running.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_most_parallel_starts_run_and_the_rest_wait_in_the_queue() {
        let q = Arc::new(StartQueue::new(StartLimits {
            parallel: 2,
            bound: 3,
        }));
        let a = q.enter().await;
        let _b = q.enter().await;
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    let _slot = q.enter().await;
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                })
            })
            .collect();
        while q.stats().waiting < 3 {
            tokio::task::yield_now().await;
        }
        assert_eq!(q.stats().running, 2);
        // The queue is at its bound: placement is held back until a start leaves it.
        let held = {
            let q = q.clone();
            tokio::task::spawn_blocking(move || {
                let since = std::time::Instant::now();
                q.wait_for_room();
                since.elapsed()
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        assert!(
            !held.is_finished(),
            "placement waits while the queue is full"
        );
        drop(a);
        held.await.unwrap();
        for w in waiters {
            w.await.unwrap();
        }
        let s = q.stats();
        assert_eq!((s.waiting, s.queued, s.started, s.held_back), (0, 3, 5, 1));
        assert!(s.wait_ns > 0);
    }
}
