//! Auto-revert, Nomad's deployment `auto_revert` for component versions: a new version's
//! first calls are watched, and when more of them fail (trap, memory cap, deadline) than
//! its plugin's `auto_revert` allows, the version it replaced is made current again, a
//! driver's tasks are offered back to it, and a `ComponentReverted` event says why. Once
//! the watch ends (enough good calls, or its window passed), the replaced version is let
//! go, so its memory is returned. Also: a draining driver version is told unloaded when
//! its last task ends.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Swapper;
use crate::runtime::{LoadedComponent, World};

/// How often a watch looks when no call ends (a safety net under the call notifications).
const TICK: Duration = Duration::from_millis(100);

/// Why a watch ended.
enum Verdict {
    /// Too many failures: roll back.
    Bad { calls: u64, failures: u64 },
    /// Enough calls, or the window passed: keep it.
    Good,
    /// Another version replaced it meanwhile.
    Superseded,
}

impl Swapper {
    /// Watch `new` (which replaced a version) per its plugin's auto-revert policy.
    pub(super) fn watch_new_version(self: &Arc<Self>, new: Arc<LoadedComponent>) {
        let policy = self
            .auto_revert
            .read()
            .unwrap()
            .get(&new.name)
            .copied()
            .unwrap_or_default();
        let (world, name) = (new.world, new.name.clone());
        if !policy.enabled {
            self.runtime.registry.forget_previous(world, &name);
            return;
        }
        let me = Arc::downgrade(self);
        let weak = Arc::downgrade(&new);
        drop(new);
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + policy.window;
            let verdict = loop {
                let Some(v) = weak.upgrade() else {
                    break Verdict::Superseded;
                };
                let Some(s) = me.upgrade() else { return };
                let current = s.runtime.registry.get(world, &name);
                if !current.is_some_and(|c| Arc::ptr_eq(&c, &v)) {
                    break Verdict::Superseded;
                }
                let (calls, failures) = (v.stats.calls(), v.stats.failures());
                if failures > policy.max_failures {
                    break Verdict::Bad { calls, failures };
                }
                if calls >= policy.calls || tokio::time::Instant::now() >= deadline {
                    break Verdict::Good;
                }
                drop(s);
                let wait =
                    TICK.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
                let _ = tokio::time::timeout(wait, v.stats.changed()).await;
            };
            let Some(s) = me.upgrade() else { return };
            match verdict {
                Verdict::Good => {
                    let _g = s.lock.lock().await;
                    if s.is_current(&weak) {
                        s.runtime.registry.forget_previous(world, &name);
                    }
                }
                Verdict::Superseded => {}
                Verdict::Bad { calls, failures } => {
                    let Some(bad) = weak.upgrade() else { return };
                    s.revert(bad, calls, failures, policy.calls).await;
                }
            }
        });
    }

    fn is_current(&self, v: &std::sync::Weak<LoadedComponent>) -> bool {
        match (
            v.upgrade(),
            v.upgrade()
                .and_then(|v| self.runtime.registry.get(v.world, &v.name)),
        ) {
            (Some(v), Some(c)) => Arc::ptr_eq(&v, &c),
            _ => false,
        }
    }

    /// Roll `bad` back to the version it replaced.
    async fn revert(
        self: &Arc<Self>,
        bad: Arc<LoadedComponent>,
        calls: u64,
        failures: u64,
        watched: u64,
    ) {
        let _one_at_a_time = self.lock.lock().await;
        let Some(good) = self.runtime.registry.revert(&bad) else {
            return;
        };
        self.metrics.reverts.fetch_add(1, Ordering::Relaxed);
        let handoff = if good.world == World::Driver {
            self.drivers.bindings().handoff(&good).await
        } else {
            Default::default()
        };
        if good.world == World::DevicePlugin {
            self.devices.fingerprint_all().await;
        }
        let why = format!(
            "version {} failed {failures} of its first {calls} calls (more than its auto_revert allows among {watched}); version {} serves again",
            &bad.sha256[..12],
            &good.sha256[..12]
        );
        tracing::warn!(name = %bad.name, world = %bad.world, bad = %&bad.sha256[..12], good = %&good.sha256[..12], moved_back = handoff.moved.len(), "{why}");
        self.previous
            .lock()
            .unwrap()
            .remove(&(bad.world, bad.name.clone()));
        self.tell(super::Kind::Reverted, &good, Some(&bad), &why);
        if !handoff.pinned.is_empty() {
            self.watch_draining(bad);
        }
    }

    /// Tell `ComponentUnloaded` for a driver version no longer current once its last
    /// running task has ended (its memory is returned then).
    pub(super) fn watch_draining(self: &Arc<Self>, old: Arc<LoadedComponent>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            // `old` is held here until it is told unloaded: at most a second past its last
            // task.
            loop {
                let Some(s) = me.upgrade() else { return };
                let bindings = s.drivers.bindings().clone();
                if !bindings
                    .versions_in_use(&old.name)
                    .contains_key(&old.sha256)
                {
                    tracing::info!(name = %old.name, sha256 = %&old.sha256[..12], "draining driver version unloaded: its last task ended");
                    s.tell(
                        super::Kind::Drained,
                        &old,
                        None,
                        "its last running task ended",
                    );
                    return;
                }
                drop(s);
                let _ = tokio::time::timeout(Duration::from_secs(1), bindings.ended()).await;
            }
        });
    }
}
