//! Placements cut short, made again: by a crash (at start) or by a state DB outage (a full
//! or failing disk, see [`crate::state`]) whose allocations could not be stored (once the
//! state DB writes again). Their jobs were stored with a mark that their placement was on
//! its way, which only a stored placement clears ([`Agent::place_interrupted`]).

use std::sync::Arc;
use std::time::Duration;

use super::Agent;

/// How often the watch looks at the state DB.
const TICK: Duration = Duration::from_millis(50);

impl Agent {
    /// Watch for the end of state DB outages, and place what they cut short.
    pub(super) fn spawn_outage_watch(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let failures = |a: &Agent| {
                a.db.commit_stats()
                    .failures
                    .load(std::sync::atomic::Ordering::Relaxed)
            };
            let mut was_down = false;
            let mut seen = weak.upgrade().map_or(0, |a| failures(&a));
            loop {
                tokio::time::sleep(TICK).await;
                let Some(a) = weak.upgrade() else { return };
                let down = a.db.unwritable().is_some();
                // An outage seen, or one that began and ended between two looks (or while
                // the last pass ran): failed writes were counted meanwhile.
                let failed = failures(&a);
                if !down && (was_down || failed != seen) {
                    seen = failed;
                    tracing::info!("the state DB writes again: placing what its outage cut short");
                    let agent = a.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        agent.resync_allocations();
                        agent.place_interrupted();
                    })
                    .await;
                }
                was_down = down;
            }
        });
    }

    /// Write again the allocation state whose writes an outage refused (see
    /// [`crate::allocrunner::AllocRunner::resync`]): a crash after the outage then finds it as it is.
    pub(super) fn resync_allocations(&self) {
        let runners = self.client.runners();
        let mut written = 0;
        for r in runners {
            match r.resync() {
                Ok(true) => written += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "writing allocation state again failed; retried after the next outage");
                    return;
                }
            }
        }
        if written > 0 {
            tracing::info!(
                allocations = written,
                "allocation state the outage refused written again"
            );
        }
    }

    /// Jobs whose registration was answered but whose placement a crash cut short (their
    /// mark is still in the state DB) are evaluated again: what they are missing is placed.
    pub(super) fn place_interrupted(self: &Arc<Self>) {
        let marked = match self.db.interrupted_placements() {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(error = %e, "reading interrupted placements failed");
                return;
            }
        };
        let mut jobs: Vec<(String, String)> = marked.iter().map(|(_, j)| j.clone()).collect();
        jobs.sort();
        jobs.dedup();
        // A job whose placement fails again (the state DB still cannot write) keeps its
        // marks, for the next try.
        let mut failed = std::collections::BTreeSet::new();
        for (namespace, id) in jobs {
            let Some(job) = self.job(&namespace, &id) else {
                continue;
            };
            if job.stop || job.is_parent() {
                continue;
            }
            tracing::info!(job = %id, namespace = %namespace, "placing a job whose placement was interrupted");
            if let Err(e) =
                self.evaluate_job_with(&namespace, &id, crate::evals::Trigger::JobRegister)
            {
                tracing::warn!(job = %id, error = %e, "placing an interrupted job failed");
                failed.insert((namespace, id));
            }
        }
        // Handled (placed again above, or no longer wanted): the marks go.
        for (eval, _) in marked.iter().filter(|(_, j)| !failed.contains(j)) {
            if let Err(e) = self.db.queue_placing_done(eval) {
                tracing::warn!(error = %e, "clearing a placement's mark failed");
            }
        }
    }
}
