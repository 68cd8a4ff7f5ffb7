//! Periodic jobs (Nomad's periodic dispatcher): each enabled periodic job has a timer that
//! sleeps until its next launch time and then registers a child job,
//! `<id>/periodic-<unix seconds of the launch>`, with the parent's spec and no `periodic`
//! block. With `prohibit_overlap`, a launch is skipped while an earlier child still runs.
//! A launch missed while the agent was down is not made up (Nomad does not either).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

use super::{RegisterError, Registered, Server};
use crate::jobspec::{Job, JobState};

/// The timers of periodic jobs, by namespace and id.
#[derive(Default)]
pub(super) struct PeriodicTimers(Mutex<BTreeMap<(String, String), tokio::task::JoinHandle<()>>>);

impl Drop for PeriodicTimers {
    fn drop(&mut self) {
        for (_, t) in std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner())) {
            t.abort();
        }
    }
}

/// Why a periodic launch was refused.
#[derive(Debug, thiserror::Error)]
pub enum PeriodicError {
    /// No such job.
    #[error("job not found")]
    NotFound,
    /// The job is not periodic.
    #[error("job {0:?} is not periodic")]
    NotPeriodic(String),
    /// Registering the child failed.
    #[error(transparent)]
    Register(#[from] RegisterError),
}

impl Server {
    /// A job was registered, changed or stopped: (re)arm or disarm its launch timer.
    pub(super) fn periodic_job_changed(self: &Arc<Self>, job: &Job) {
        let key = (job.namespace.clone(), job.id.clone());
        let mut timers = self.periodic.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = timers.remove(&key) {
            old.abort();
        }
        let Some(p) = job.periodic.as_ref().filter(|p| p.enabled && !job.stop) else {
            return;
        };
        let schedule = match crate::cron::Schedule::parse(&p.specs, &p.time_zone) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(job = %job.id, error = %e, "periodic job cannot be scheduled");
                return;
            }
        };
        let agent = Arc::downgrade(self);
        let (ns, id) = key.clone();
        timers.insert(
            key,
            tokio::spawn(async move {
                let mut after = Timestamp::now();
                while let Some(next) = schedule.next_after(after) {
                    let wait_ns = next.as_nanosecond() - Timestamp::now().as_nanosecond();
                    if wait_ns > 0 {
                        let wait = std::time::Duration::from_nanos(wait_ns as u64);
                        tokio::time::sleep(wait).await;
                    }
                    let Some(agent) = agent.upgrade() else { return };
                    if let Err(e) = agent.launch_periodic(&ns, &id, next, false) {
                        tracing::error!(job = %id, error = %e, "periodic launch failed");
                    }
                    after = next;
                }
                tracing::info!(job = %id, "periodic job has no further launch time");
            }),
        );
    }

    /// When the periodic job `(namespace, id)` launches next, ns since the epoch.
    pub fn next_periodic_launch(&self, namespace: &str, id: &str) -> Option<u64> {
        let job = self.job(namespace, id)?;
        let p = job.periodic.as_ref().filter(|p| p.enabled && !job.stop)?;
        let schedule = crate::cron::Schedule::parse(&p.specs, &p.time_zone).ok()?;
        let next = schedule.next_after(Timestamp::now())?;
        u64::try_from(next.as_nanosecond()).ok()
    }

    /// Launch a child of periodic job `(namespace, id)` now, whatever its schedule and
    /// `prohibit_overlap` (`/v1/job/{id}/periodic/force`).
    pub fn force_periodic(
        self: &Arc<Self>,
        namespace: &str,
        id: &str,
    ) -> Result<Registered, PeriodicError> {
        match self.launch_periodic(namespace, id, Timestamp::now(), true)? {
            Some(r) => Ok(r),
            None => Err(PeriodicError::NotPeriodic(id.to_string())),
        }
    }

    /// Launch a child for launch time `at`; `None` when skipped (overlap prohibited).
    fn launch_periodic(
        self: &Arc<Self>,
        namespace: &str,
        id: &str,
        at: Timestamp,
        forced: bool,
    ) -> Result<Option<Registered>, PeriodicError> {
        let parent = self.job(namespace, id).ok_or(PeriodicError::NotFound)?;
        let Some(p) = &parent.periodic else {
            return Err(PeriodicError::NotPeriodic(id.to_string()));
        };
        if !forced && p.prohibit_overlap {
            let running = self
                .job_children(namespace, id)
                .iter()
                .any(|c| c.state.status != "dead");
            if running {
                tracing::info!(job = %id, "periodic launch skipped: the previous child still runs (prohibit_overlap)");
                return Ok(None);
            }
        }
        let mut child = parent.clone();
        child.id = format!("{id}/periodic-{}", at.as_second());
        child.name = child.id.clone();
        child.periodic = None;
        child.parent_id = id.to_string();
        child.state = JobState::default();
        tracing::info!(job = %id, child = %child.id, "periodic launch");
        Ok(Some(self.register_job(child)?))
    }
}
