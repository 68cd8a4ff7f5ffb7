//! Nomad's client garbage collection of ended allocations.
//!
//! An allocation whose tasks have all ended keeps its runner, its directory (logs, task
//! files) and its local state until the client collects it; its record stays after that,
//! as a Nomad server keeps it once its client has collected it, until the server's own
//! collection (or a forced one) removes it. Collection is driven by pressure, as in Nomad's
//! `client/gc.go`, never by age: the oldest ended allocation goes while the allocation
//! directory's disk use is over `gc_disk_usage_threshold`, its inode use over
//! `gc_inode_usage_threshold`, or the client keeps more than `gc_max_allocs` allocations
//! (running or ended and not yet collected). It runs every `gc_interval`, and at once when
//! an allocation ends or new ones are placed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

pub use crate::config::gc::ClientGcConfig as GcConfig;

use super::Client;

/// Ended allocations not yet collected, oldest ending first.
#[derive(Debug, Default)]
struct Queue {
    by_age: BTreeMap<u64, String>,
    /// Each queued id's place in `by_age`, and whether it has a runner (a restored ended
    /// allocation has only its directory).
    entries: HashMap<String, (u64, bool)>,
    next: u64,
    /// Queued entries without a runner (they count among the client's allocations).
    dirs_only: usize,
}

impl Queue {
    fn push(&mut self, id: &str, runner: bool) {
        if self.entries.contains_key(id) {
            return;
        }
        self.next += 1;
        self.by_age.insert(self.next, id.to_string());
        self.entries.insert(id.to_string(), (self.next, runner));
        self.dirs_only += usize::from(!runner);
    }

    fn remove(&mut self, id: &str) -> Option<bool> {
        let (seq, runner) = self.entries.remove(id)?;
        self.by_age.remove(&seq);
        self.dirs_only -= usize::from(!runner);
        Some(runner)
    }

    fn pop(&mut self) -> Option<(String, bool)> {
        let (_, id) = self.by_age.pop_first()?;
        let (_, runner) = self.entries.remove(&id)?;
        self.dirs_only -= usize::from(!runner);
        Some((id, runner))
    }
}

/// The collector's state: its config, the queue, and what wakes it.
#[derive(Debug, Default)]
pub struct ClientGc {
    config: GcConfig,
    queue: Mutex<Queue>,
    wake: tokio::sync::Notify,
}

impl ClientGc {
    pub fn new(config: GcConfig) -> Self {
        Self {
            config,
            ..Default::default()
        }
    }

    /// An allocation ended (`ended`) or runs again: queue it, or take it off the queue.
    pub fn ended(&self, id: &str, ended: bool) {
        let mut q = self.queue.lock().unwrap();
        if ended {
            q.push(id, true);
            drop(q);
            self.wake.notify_one();
        } else {
            q.remove(id);
        }
    }

    /// A restored ended allocation whose directory is still on disk.
    fn queue_dir(&self, id: &str) {
        self.queue.lock().unwrap().push(id, false);
    }

    /// The allocation is gone by other means (a forced collection): off the queue.
    pub fn forget(&self, id: &str) {
        self.queue.lock().unwrap().remove(id);
    }

    /// New allocations were placed: see whether the client is now over `gc_max_allocs`.
    pub fn placed(&self) {
        self.wake.notify_one();
    }
}

/// The allocation dir's filesystem use, percent: (disk, inodes), as Nomad's client
/// measures it (used over used plus available to unprivileged users; inodes used over all).
fn usage(root: &std::path::Path) -> Option<(f64, f64)> {
    let st = rustix::fs::statvfs(root).ok()?;
    let used = st.f_blocks.saturating_sub(st.f_bfree) as f64;
    let disk = match used + st.f_bavail as f64 {
        0.0 => 0.0,
        all => used / all * 100.0,
    };
    let inodes = match st.f_files {
        0 => 0.0,
        n => n.saturating_sub(st.f_ffree) as f64 / n as f64 * 100.0,
    };
    Some((disk, inodes))
}

impl Client {
    /// Queue the restored ended allocations whose directories are still on disk (oldest
    /// ending first), then collect every `gc_interval` and whenever woken.
    pub fn spawn_gc(self: &Arc<Self>) {
        let mut ended: Vec<(u64, String)> = self
            .restored
            .read()
            .unwrap()
            .values()
            .filter(|a| self.alloc_root.join(&a.id).exists())
            .map(|a| (a.modify_time, a.id.clone()))
            .collect();
        ended.sort();
        for (_, id) in &ended {
            self.gc.queue_dir(id);
        }
        let weak = Arc::downgrade(self);
        let interval = self.gc.config.interval;
        tokio::spawn(async move {
            loop {
                let Some(a) = weak.upgrade() else { return };
                a.keep_usage_below_threshold().await;
                let gc = a.gc.clone();
                drop(a);
                // A wake while it collected left a permit: the next wait ends at once.
                let _ = tokio::time::timeout(interval, gc.wake.notified()).await;
            }
        });
    }

    /// Allocations the client keeps: runners (running, or ended and not collected) and
    /// restored ended allocations whose directories are still there.
    fn kept_allocations(&self) -> usize {
        self.allocs.read().unwrap().len() + self.gc.queue.lock().unwrap().dirs_only
    }

    /// Why the client must collect now, if it must.
    fn gc_reason(&self) -> Option<(String, usize)> {
        let c = &self.gc.config;
        if let Some((disk, inodes)) = usage(&self.alloc_root) {
            if disk > c.disk_usage_threshold {
                return Some((
                    format!(
                        "disk usage of {disk:.0} is over gc threshold of {:.0}",
                        c.disk_usage_threshold
                    ),
                    1,
                ));
            }
            if inodes > c.inode_usage_threshold {
                return Some((
                    format!(
                        "inode usage of {inodes:.0} is over gc threshold of {:.0}",
                        c.inode_usage_threshold
                    ),
                    1,
                ));
            }
        }
        let kept = self.kept_allocations();
        (kept > c.max_allocs).then(|| {
            (
                format!(
                    "number of allocations ({kept}) is over the limit ({})",
                    c.max_allocs
                ),
                kept - c.max_allocs,
            )
        })
    }

    /// Collect the oldest ended allocations while a threshold is passed, at most
    /// `gc_parallel_destroys` at once.
    async fn keep_usage_below_threshold(&self) {
        while let Some((reason, excess)) = self.gc_reason() {
            let batch: Vec<(String, bool)> = {
                let mut q = self.gc.queue.lock().unwrap();
                std::iter::from_fn(|| q.pop())
                    .take(excess.min(self.gc.config.parallel_destroys))
                    .collect()
            };
            if batch.is_empty() {
                let over_twice = self.kept_allocations() >= 2 * self.gc.config.max_allocs;
                if over_twice {
                    tracing::warn!(
                        reason,
                        "garbage collection skipped because no terminal allocations"
                    );
                } else {
                    tracing::debug!(
                        reason,
                        "garbage collection skipped because no terminal allocations"
                    );
                }
                return;
            }
            let collect = batch
                .into_iter()
                .map(|(id, runner)| self.collect_ended(id, runner, &reason));
            futures::future::join_all(collect).await;
        }
    }

    /// Let one ended allocation's runner, directory and local state go; keep its record.
    pub(super) async fn collect_ended(&self, id: String, runner: bool, reason: &str) {
        tracing::info!(alloc_id = %id, reason, "garbage collecting allocation");
        if !runner {
            if let Err(e) = std::fs::remove_dir_all(self.alloc_root.join(&id))
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(alloc_id = %id, error = %e, "removing allocation dir failed");
            }
            if let Err(e) = self.db.delete_local_states(&id) {
                tracing::debug!(alloc_id = %id, error = %e, "removing a collected allocation's local state failed");
            }
            return;
        }
        let Some(r) = self.runner(&id) else {
            return;
        };
        if !r.shared().peek(crate::structs::Allocation::is_terminal) {
            return;
        }
        let Some(record) = r.retire().await else {
            // A refused write is still to be made again: later.
            self.gc.ended(&id, true);
            return;
        };
        {
            let mut live = self.allocs.write().unwrap();
            let mut kept = self.restored.write().unwrap();
            live.remove(&id);
            kept.insert(id.clone(), record);
        }
        self.usage.forget(&id);
        tracing::debug!(alloc_id = %id, "allocation garbage collected");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_gives_the_oldest_first_and_counts_directories_alone() {
        let mut q = Queue::default();
        q.push("a", true);
        q.push("b", false);
        q.push("c", true);
        q.push("a", true);
        assert_eq!(q.dirs_only, 1);
        assert_eq!(q.remove("c"), Some(true));
        assert_eq!(q.pop(), Some(("a".to_string(), true)));
        assert_eq!(q.pop(), Some(("b".to_string(), false)));
        assert_eq!(q.dirs_only, 0);
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn usage_is_a_percentage() {
        let d = tempfile::tempdir().unwrap();
        let (disk, inodes) = usage(d.path()).unwrap();
        assert!((0.0..=100.0).contains(&disk), "{disk}");
        assert!((0.0..=100.0).contains(&inodes), "{inodes}");
    }
}
