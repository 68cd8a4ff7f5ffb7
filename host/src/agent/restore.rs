//! Restore after a restart: jobs and allocations as the state DB has them, each live
//! allocation's runner reattaching to its running tasks, and then the processes recorded
//! before the restart that no restored task took back (their task is unknown to the state
//! DB: its handle or its allocation never reached the file) killed, so that nothing runs
//! that no job shows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::Agent;
use crate::allocrunner::AllocRunner;
use crate::jobspec::Job;
use crate::structs::DesiredStatus;

/// How long restored tasks get to reattach before the processes no task took back are
/// killed anyway (a task's prestart hooks run again before it reattaches).
const REATTACH_BOUND: Duration = Duration::from_secs(60);

/// After every restored task has reattached: time for a driver's first call on its task
/// (where it asks about the task's processes), before the others are killed.
const REAP_GRACE: Duration = Duration::from_secs(2);

impl Agent {
    /// Restore jobs and allocations from the state DB: finished allocations are listed as
    /// they were; every other one gets a runner that reattaches to its running tasks. One
    /// allocation that cannot be restored is marked failed and does not stop the others.
    pub(super) fn restore(self: &Arc<Self>) -> anyhow::Result<()> {
        let jobs = self.db.jobs()?;
        let allocs = self.db.allocs()?;
        // The change index goes on from where the stored state left it, so an index a
        // client saw before the restart (a blocking query's, an EnforceIndex) is never
        // handed out again for another change.
        let stored = jobs
            .iter()
            .map(|j| j.state.modify_index.max(j.state.job_modify_index))
            .chain(allocs.iter().map(|a| a.modify_index))
            .max()
            .unwrap_or(0);
        self.changes.raise_to(stored);
        let index = self.changes.bump();
        let config = self.client.runner_config();
        let mut restored = 0;
        let mut runners = Vec::new();
        // Allocations of one version of a job share one copy of it, as they did when placed
        // (rows of schema 4 and older each carry their own; the state DB shares the others').
        let mut shared_jobs: BTreeMap<(String, String, u64, u64), Arc<Job>> = BTreeMap::new();
        // What the stored jobs say was acknowledged wins over an allocation's own record: a
        // stop or purge answered 200 whose allocations' stop was refused by the state DB
        // (a failing disk) and then lost to a crash must not come back running.
        let running: std::collections::HashSet<(&str, &str)> = jobs
            .iter()
            .filter(|j| !j.stop)
            .map(|j| (j.namespace.as_str(), j.id.as_str()))
            .collect();
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
                self.client.restore_ended(a);
                continue;
            }
            if a.group().is_none() {
                a.client_status = crate::structs::ClientStatus::Failed;
                a.client_description =
                    format!("cannot restore: its job has no group {:?}", a.task_group);
                tracing::error!(alloc_id = %a.id, "{}", a.client_description);
                let _ = self.db.put_alloc(&a);
                self.client.restore_ended(a);
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
            if let Some(reason) = stop {
                runner.stop(&reason);
            }
            self.client.restore_runner(&runner);
            tokio::spawn(runner.clone().run());
            runners.push(runner);
            restored += 1;
        }
        let mut j = self.jobs.write().unwrap();
        for mut job in jobs {
            // A state file from before jobs kept their indexes: the job counts as created now.
            if job.state.create_index == 0 {
                job.state.create_index = index;
                job.state.modify_index = index;
                job.state.job_modify_index = index;
            }
            j.insert((job.namespace.clone(), job.id.clone()), job);
        }
        let periodic: Vec<Job> = j.values().filter(|j| j.is_periodic()).cloned().collect();
        drop(j);
        for job in &periodic {
            self.periodic_job_changed(job);
        }
        if restored > 0 {
            tracing::info!(allocations = restored, "allocations restored");
        }
        self.spawn_reaper(runners);
        Ok(())
    }

    /// Once every task of `runners` (the restored allocations) has reattached or given up,
    /// kill the processes recorded before the restart that no driver asked about: a task
    /// whose handle a failing state DB refused starts again as a new process, and the old
    /// one would run on untracked beside it.
    fn spawn_reaper(&self, runners: Vec<Arc<AllocRunner>>) {
        let processes = self.client.plugins().drivers.services().processes.clone();
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
