//! Restore after a restart: allocations as the state DB has them, each live
//! allocation's runner reattaching to its running tasks, and then the processes recorded
//! before the restart that no restored task took back (their task is unknown to the state
//! DB: its handle or its allocation never reached the file) killed, so that nothing runs
//! that no job shows.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use super::Client;
use crate::allocrunner::AllocRunner;
use crate::jobspec::Job;
use crate::structs::{Allocation, DesiredStatus};

/// How long restored tasks get to reattach before the processes no task took back are
/// killed anyway (a task's prestart hooks run again before it reattaches).
const REATTACH_BOUND: Duration = Duration::from_secs(60);

/// After every restored task has reattached: time for a driver's first call on its task
/// (where it asks about the task's processes), before the others are killed.
const REAP_GRACE: Duration = Duration::from_secs(2);

impl Client {
    /// Restore the allocations the state DB has: finished ones are listed as they were;
    /// every other one gets a runner that reattaches to its running tasks, and is stopped
    /// when its job is not in `running` (stopped or purged: what the stored jobs say was
    /// acknowledged wins over an allocation's own record). One allocation that cannot be
    /// restored is marked failed and does not stop the others. Once the restored tasks
    /// have reattached, processes no task took back are killed.
    pub fn restore(&self, allocs: Vec<Allocation>, running: &HashSet<(&str, &str)>) {
        let config = self.runner_config();
        let mut runners = Vec::new();
        // Allocations of one version of a job share one copy of it, as they did when placed
        // (rows of schema 4 and older each carry their own; the state DB shares the others').
        let mut shared_jobs: BTreeMap<(String, String, u64, u64), Arc<Job>> = BTreeMap::new();
        for mut a in allocs {
            let version = (
                a.namespace.clone(),
                a.job_id.clone(),
                a.job.state.version,
                a.job.state.job_modify_index,
            );
            a.job = shared_jobs
                .entry(version)
                .or_insert_with(|| a.job.clone())
                .clone();
            if a.is_terminal() {
                self.restore_ended(a);
                continue;
            }
            if a.group().is_none() {
                a.client_status = crate::structs::ClientStatus::Failed;
                a.client_description =
                    format!("cannot restore: its job has no group {:?}", a.task_group);
                tracing::error!(alloc_id = %a.id, "{}", a.client_description);
                let _ = self.db.put_alloc(&a);
                self.restore_ended(a);
                continue;
            }
            let stop = if a.desired_status == DesiredStatus::Stop {
                Some(a.desired_description.clone())
            } else if !running.contains(&(a.namespace.as_str(), a.job_id.as_str())) {
                tracing::warn!(alloc_id = %a.id, job = %a.job_id, "restored allocation of a stopped or purged job: stopping it");
                Some("job deregistered".to_string())
            } else {
                None
            };
            let runner = AllocRunner::restore(a, &config);
            // Its services and their checks as its stored state has them: a task that
            // reattaches changes nothing, so nothing else would start its checks again.
            runner.shared().peek(|a| (config.on_change)(a));
            if let Some(reason) = stop {
                runner.stop(&reason);
            }
            self.restore_runner(&runner);
            tokio::spawn(runner.clone().run());
            runners.push(runner);
        }
        if !runners.is_empty() {
            tracing::info!(allocations = runners.len(), "allocations restored");
        }
        self.spawn_reaper(runners);
    }

    /// Once every task of `runners` (the restored allocations) has reattached or given up,
    /// kill the processes recorded before the restart that no driver asked about: a task
    /// whose handle a failing state DB refused starts again as a new process, and the old
    /// one would run on untracked beside it.
    fn spawn_reaper(&self, runners: Vec<Arc<AllocRunner>>) {
        let processes = self.plugins().drivers.services().processes.clone();
        tokio::spawn(async move {
            let settled = || {
                runners
                    .iter()
                    .all(|r| r.tasks().iter().all(|t| t.reattach_settled()))
            };
            let deadline = tokio::time::Instant::now() + REATTACH_BOUND;
            while !settled() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            drop(runners);
            tokio::time::sleep(REAP_GRACE).await;
            let reaped = processes.reap_unclaimed();
            if !reaped.is_empty() {
                tracing::warn!(processes = ?reaped, "killed processes recorded before the restart that no task took back");
            }
        });
    }
}
