//! The agent's jobs as the API shows them: a job with its status derived from its
//! allocations (or, for a periodic or parameterized job, its children), its kept versions,
//! its allocations (those of the job as it is now, not of a job of the same id purged
//! before), and Nomad's job summary; reverting to a version and marking one stable.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::register::RegisterError;
use super::{RegisterOptions, Registered, Server};
use crate::jobspec::{Job, JobspecError};
use crate::structs::{Allocation, ClientStatus};

/// Allocations of one group by client status (Nomad's `TaskGroupSummary`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct GroupSummary {
    /// Waiting to be placed.
    pub queued: u64,
    /// Finished successfully.
    pub complete: u64,
    /// Failed.
    pub failed: u64,
    /// Running.
    pub running: u64,
    /// Placed, not running yet.
    pub starting: u64,
    /// Lost.
    pub lost: u64,
    /// Unknown.
    pub unknown: u64,
}

/// A periodic or parameterized job's children by status (Nomad's `JobChildrenSummary`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChildrenSummary {
    /// Children pending.
    pub pending: u64,
    /// Children running.
    pub running: u64,
    /// Children dead.
    pub dead: u64,
}

/// Nomad's `JobSummary`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobSummary {
    /// Job id.
    #[serde(rename = "JobID")]
    pub job_id: String,
    /// Namespace.
    pub namespace: String,
    /// By group name.
    pub summary: BTreeMap<String, GroupSummary>,
    /// Children of a periodic or parameterized job.
    pub children: ChildrenSummary,
    /// The job's create index.
    pub create_index: u64,
    /// The job's modify index.
    pub modify_index: u64,
}

impl Server {
    /// What `job` asks for that the agent does not act on, one line each; refused when
    /// the operator said so (`client { unsupported_job_features = "error" }`).
    pub fn unacted(&self, job: &Job) -> Result<Vec<String>, RegisterError> {
        let list: Vec<String> = crate::jobspec::unacted(job)
            .iter()
            .map(ToString::to_string)
            .collect();
        if self.refuse_unacted && !list.is_empty() {
            return Err(RegisterError::Unacted(list));
        }
        Ok(list)
    }

    /// A job as it is now, with its status derived from its allocations, or, for a
    /// periodic or parameterized job, from whether it is stopped.
    pub fn job(&self, namespace: &str, id: &str) -> Option<Job> {
        let mut job = self
            .jobs
            .read()
            .unwrap()
            .get(&(namespace.to_string(), id.to_string()))
            .cloned()?;
        job.state.status = self.status_of(&job).into();
        Some(job)
    }

    fn status_of(&self, job: &Job) -> &'static str {
        if job.stop {
            return "dead";
        }
        if job.is_parent() {
            return "running";
        }
        let statuses =
            self.visit_job_allocations(&job.namespace, &job.id, false, |a| Some(a.client_status));
        if statuses.iter().all(|s| {
            matches!(
                s,
                ClientStatus::Complete | ClientStatus::Failed | ClientStatus::Lost
            )
        }) {
            // Allocations waiting for the node to be eligible again keep the job pending.
            if self.evals.queued(&job.namespace, &job.id).is_empty() {
                "dead"
            } else {
                "pending"
            }
        } else if statuses.contains(&ClientStatus::Running) {
            "running"
        } else {
            "pending"
        }
    }

    /// Every job, by namespace and id.
    pub fn jobs(&self) -> Vec<Job> {
        let keys: Vec<_> = self.jobs.read().unwrap().keys().cloned().collect();
        keys.iter()
            .filter_map(|(ns, id)| self.job(ns, id))
            .collect()
    }

    /// The children of periodic or parameterized job `parent`.
    pub fn job_children(&self, namespace: &str, parent: &str) -> Vec<Job> {
        let keys: Vec<_> = self
            .jobs
            .read()
            .unwrap()
            .iter()
            .filter(|((ns, _), j)| ns == namespace && j.parent_id == parent)
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter()
            .filter_map(|(ns, id)| self.job(ns, id))
            .collect()
    }

    /// The kept versions of a job, newest first (the current one included).
    pub fn job_versions(&self, namespace: &str, id: &str) -> Vec<Job> {
        let mut versions = match self.db.job_versions(namespace, id) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(job = id, error = %e, "reading job versions failed");
                Vec::new()
            }
        };
        if let Some(current) = self.job(namespace, id) {
            match versions
                .iter_mut()
                .find(|v| v.state.version == current.state.version)
            {
                Some(v) => *v = current,
                None => versions.insert(0, current),
            }
        }
        versions
    }

    /// A job's allocations in placement order: those of the job as registered now, or with
    /// `all`, those of earlier jobs of the same id too (purged, then registered again).
    pub fn job_allocations(&self, namespace: &str, id: &str, all: bool) -> Vec<Allocation> {
        self.visit_job_allocations(namespace, id, all, |a| Some(a.clone()))
    }

    /// `f` of each of a job's allocations (see [`Server::job_allocations`]) that it keeps,
    /// in placement order; the live ones are found through the job's index, not by a scan.
    pub fn visit_job_allocations<T>(
        &self,
        namespace: &str,
        id: &str,
        all: bool,
        mut f: impl FnMut(&Allocation) -> Option<T>,
    ) -> Vec<T> {
        let create_index = self
            .jobs
            .read()
            .unwrap()
            .get(&(namespace.to_string(), id.to_string()))
            .map(|j| j.state.create_index);
        let mine = |a: &Allocation| {
            a.job_id == id
                && a.namespace == namespace
                && (all || create_index.is_none_or(|c| a.job.state.create_index == c))
        };
        let key = (namespace.to_string(), id.to_string());
        self.client
            .visit_job_allocations(&key, |a| if mine(a) { f(a) } else { None })
    }

    /// Nomad's job summary: allocations per group by client status, and for a periodic or
    /// parameterized job, its children by status.
    pub fn job_summary(&self, job: &Job) -> JobSummary {
        let allocs = self.job_allocations(&job.namespace, &job.id, false);
        let queued = self.evals.queued(&job.namespace, &job.id);
        let summary = job
            .task_groups
            .iter()
            .map(|g| {
                let mut s = GroupSummary {
                    queued: queued.get(&g.name).copied().unwrap_or(0),
                    ..Default::default()
                };
                for a in allocs.iter().filter(|a| a.task_group == g.name) {
                    match a.client_status {
                        ClientStatus::Pending => s.starting += 1,
                        ClientStatus::Running => s.running += 1,
                        ClientStatus::Complete => s.complete += 1,
                        ClientStatus::Failed => s.failed += 1,
                        ClientStatus::Lost => s.lost += 1,
                    }
                }
                (g.name.clone(), s)
            })
            .collect();
        let mut children = ChildrenSummary::default();
        if job.is_parent() {
            for c in self.job_children(&job.namespace, &job.id) {
                match c.state.status.as_str() {
                    "pending" => children.pending += 1,
                    "running" => children.running += 1,
                    _ => children.dead += 1,
                }
            }
        }
        JobSummary {
            job_id: job.id.clone(),
            namespace: job.namespace.clone(),
            summary,
            children,
            create_index: job.state.create_index,
            modify_index: job.state.modify_index,
        }
    }
}

impl Server {
    /// Register version `version` of a job again, as a new version. With
    /// `enforce_prior_version`, only if the job's current version is that one.
    pub fn revert_job(
        self: &Arc<Self>,
        namespace: &str,
        id: &str,
        version: u64,
        enforce_prior_version: Option<u64>,
    ) -> Result<Registered, RegisterError> {
        let current = self
            .job(namespace, id)
            .ok_or_else(|| RegisterError::NotFound(format!("job {id:?} not found")))?;
        if let Some(prior) = enforce_prior_version
            && prior != current.state.version
        {
            return Err(RegisterError::IndexConflict {
                expected: prior,
                why: format!(
                    "current job has version {}, not {prior}",
                    current.state.version
                ),
            });
        }
        if version == current.state.version {
            return Err(RegisterError::Invalid(JobspecError::new(
                "JobVersion",
                format!("can't revert to current version {version}"),
            )));
        }
        let mut old = self.job_version(namespace, id, version)?;
        old.state = crate::jobspec::JobState::default();
        // The new version keeps the source the old one was submitted as (as in Nomad).
        let submission = self.db.job_submission(namespace, id, version)?;
        self.register_job_with(
            old,
            RegisterOptions {
                enforce_index: Some(current.state.job_modify_index),
                submission,
                ..Default::default()
            },
        )
    }

    /// Version `version` of a job, as kept, or a not-found naming it.
    fn job_version(&self, namespace: &str, id: &str, version: u64) -> Result<Job, RegisterError> {
        self.job_versions(namespace, id)
            .into_iter()
            .find(|v| v.state.version == version)
            .ok_or_else(|| {
                RegisterError::NotFound(format!(
                    "job {id:?} in namespace {namespace:?} at version {version} not found"
                ))
            })
    }

    /// Mark version `version` of a job stable or not.
    pub fn set_job_stable(
        &self,
        namespace: &str,
        id: &str,
        version: u64,
        stable: bool,
    ) -> Result<u64, RegisterError> {
        let mut v = self.job_version(namespace, id, version)?;
        let index = self.changes.bump();
        v.state.stable = stable;
        v.state.modify_index = index;
        let key = (namespace.to_string(), id.to_string());
        let current = self.jobs.read().unwrap().get(&key).cloned();
        match current {
            Some(mut c) if c.state.version == version => {
                c.state.stable = stable;
                c.state.modify_index = index;
                self.db.put_job(&c)?;
                self.jobs.write().unwrap().insert(key, c);
            }
            _ => self.db.put_job_version(&v)?,
        }
        Ok(index)
    }
}
