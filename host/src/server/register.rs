//! Registering, deregistering and versioning jobs: a single node is its own scheduler, so
//! registering plans the job here ([`super::plan`]), stores the job's new version with a
//! `pending` evaluation, and then places ([`super::placing`]): at once for the agent's own
//! callers, after the answer for the API's registrations, as Nomad does. Every
//! change of spec is a new version; the last [`crate::state::JOB_VERSIONS_KEPT`] are kept
//! for `/versions` and revert.

use std::sync::Arc;

use serde::Serialize;

use super::Server;
use super::placing::{Placing, PlanGuard};
use crate::evals::Trigger;
use crate::jobspec::{Job, JobspecError};
use crate::server::plan::{LiveAlloc, Plan};
use crate::state::{Durable, StateError};
use crate::structs::JobSubmission;

/// What registering (or deregistering) a job returns.
#[derive(Debug, Clone, Serialize)]
pub struct Registered {
    /// Evaluation id; empty when none was made (a periodic or parameterized job's own
    /// registration, a deregistration of a job that did not exist).
    pub eval_id: String,
    /// Index of the change.
    pub index: u64,
    /// The job's modify index after the change.
    pub job_modify_index: u64,
    /// Allocations placed.
    pub allocs: Vec<String>,
    /// What the job asks for that the agent does not act on, one line each (the
    /// answer's `Warnings`).
    pub warnings: Vec<String>,
}

/// Why a job was not registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The job is invalid as written (what cannot be placed *now* is not an error: it
    /// waits in a blocked evaluation); the error names the field.
    #[error(transparent)]
    Invalid(#[from] JobspecError),
    /// `EnforceIndex` was asked and the job's modify index is not the one given (Nomad's
    /// wording: "Enforcing job modify index ...").
    #[error("Enforcing job modify index {expected}: {why}")]
    IndexConflict {
        /// The index the request expected.
        expected: u64,
        /// What was found instead.
        why: String,
    },
    /// The job or version named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The state DB failed; nothing was placed.
    #[error(transparent)]
    State(#[from] StateError),
    /// The job asks for what the agent does not act on, and the operator set
    /// `client { unsupported_job_features = "error" }`.
    #[error("{}", unacted_refusal(.0))]
    Unacted(Vec<String>),
    /// The job's namespace does not exist, or does not allow what the job uses.
    #[error(transparent)]
    Namespace(#[from] super::NamespaceError),
}

/// The refusal of a job asking for what the agent does not act on, each field named.
fn unacted_refusal(list: &[String]) -> String {
    format!(
        "the job asks for what this agent does not act on, and client.unsupported_job_features is \"error\":\n* {}",
        list.join("\n* ")
    )
}

/// Options of a registration (Nomad's `JobRegisterRequest`).
#[derive(Debug, Clone, Default)]
pub struct RegisterOptions {
    /// Register only if the job's modify index is this (0: only if the job does not exist).
    pub enforce_index: Option<u64>,
    /// Keep the counts of the groups the registered job has (Nomad's `PreserveCounts`,
    /// which `nomad job run -preserve-counts` sets).
    pub preserve_counts: bool,
    /// The job file's source (Nomad's `Submission`), kept with the version the
    /// registration makes; dropped when the spec did not change (no version is made) or
    /// when it is over [`crate::structs::MAX_SOURCE_SIZE`].
    pub submission: Option<JobSubmission>,
}

impl Server {
    /// Register (or update) a job and place its allocations.
    pub fn register_job(self: &Arc<Self>, job: Job) -> Result<Registered, RegisterError> {
        self.register_job_with(job, RegisterOptions::default())
    }

    /// [`Server::register_job`] with Nomad's registration options; returns once the
    /// allocations are placed (stored, their runners started).
    pub fn register_job_with(
        self: &Arc<Self>,
        job: Job,
        opts: RegisterOptions,
    ) -> Result<Registered, RegisterError> {
        let (mut r, placing, job_written, previous) = self.store_job(job, opts)?;
        if let Some(p) = placing {
            r.allocs = p.run(self)?;
        }
        self.stored_or_undone(job_written, previous, &r)?;
        Ok(r)
    }

    /// Register a job as Nomad's API does: returns once the job is stored and its
    /// evaluation recorded `pending`; the placement follows on a thread of its own and
    /// ends the evaluation (`complete`, or `blocked` work, or `failed`). `allocs` of the
    /// answer is empty.
    pub fn submit_job_with(
        self: &Arc<Self>,
        job: Job,
        opts: RegisterOptions,
    ) -> Result<Registered, RegisterError> {
        let (r, placing, job_written, previous) = self.store_job(job, opts)?;
        if let Some(mut p) = placing {
            let agent = self.clone();
            let (in_table, placed) = std::sync::mpsc::channel();
            p.in_table = Some(in_table);
            self.client.work().spawn_blocking(move || {
                // A failure is logged and ends the evaluation `failed`.
                let _ = p.run(&agent);
            });
            // The answer waits until the allocations are in the table (not until they are
            // durable or started, nor for the evaluation to end): a client that lists the
            // job's allocations next finds them, however busy the machine. A placement
            // that fails drops its sender, which ends the wait too.
            crate::util::wait_blocking(|| {
                let _ = placed.recv_timeout(std::time::Duration::from_secs(5));
            });
        }
        // Answered once the job is durable; its placement may already be on its way (and
        // fails with it: the state DB fails every write queued after a failed one).
        self.stored_or_undone(job_written, previous, &r)?;
        Ok(r)
    }

    /// Wait for a registration's job write. When it failed (a full disk), the job table
    /// goes back to what is stored, unless a later change replaced the job meanwhile: a
    /// registration that was not acknowledged does not show as registered.
    fn stored_or_undone(
        &self,
        job_written: Durable,
        previous: ((String, String), Option<Job>),
        r: &Registered,
    ) -> Result<(), StateError> {
        let Err(e) = job_written.wait() else {
            return Ok(());
        };
        let (key, previous) = previous;
        let mut jobs = self.jobs.write().unwrap();
        if jobs
            .get(&key)
            .is_some_and(|j| j.state.modify_index == r.index)
        {
            match previous {
                Some(p) => jobs.insert(key, p),
                None => jobs.remove(&key),
            };
        }
        Err(e)
    }

    /// Plan `job` and store it with its evaluation; what is left to place is returned,
    /// with the job as it was before (to undo the change if the write fails).
    #[allow(clippy::type_complexity)]
    fn store_job(
        self: &Arc<Self>,
        mut job: Job,
        opts: RegisterOptions,
    ) -> Result<
        (
            Registered,
            Option<Placing>,
            Durable,
            ((String, String), Option<Job>),
        ),
        RegisterError,
    > {
        crate::jobspec::bounds::check(&job)?;
        self.check_components_known(&job)?;
        self.admit_into_namespace(&mut job)?;
        let warnings = self.unacted(&job)?;
        // Nothing is planned, changed in memory or started that could not be recorded.
        if let Some(reason) = self.db.unwritable() {
            return Err(StateError::Unwritable { reason }.into());
        }
        let guard = self.plan_lock.acquire();
        let key = (job.namespace.clone(), job.id.clone());
        let existing = self.jobs.read().unwrap().get(&key).cloned();
        if let Some(expected) = opts.enforce_index {
            check_index(expected, existing.as_ref())?;
        }
        if opts.preserve_counts
            && let Some(old) = existing.as_ref().filter(|e| !e.stop)
        {
            for g in &mut job.task_groups {
                if let Some(o) = old.group(&g.name) {
                    g.count = o.count;
                }
            }
        }
        let (submission, warning) =
            crate::structs::admit_submission(opts.submission, crate::structs::MAX_SOURCE_SIZE);
        if let Some(w) = warning {
            tracing::warn!(job = %key.1, namespace = %key.0, "{w}");
        }
        // The node as this plan sees it, taken first: a change while it plans is one the
        // unblocker sees, so a job blocked by what just changed is evaluated again.
        let seen = self.placement_snapshot();
        let plan = self.plan(job)?;
        let (mut r, placing, written) = self.apply(plan, seen, None, guard, submission)?;
        r.warnings = warnings;
        Ok((r, placing, written, (key, existing)))
    }

    /// Carry out a plan: store the job (a new version when its spec changed, with its
    /// `submission` when one was given), stop and update what the plan says, record the
    /// evaluation, and place the new allocations. `trigger` overrides what the evaluation
    /// says triggered it (an evaluation asked for).
    fn apply(
        self: &Arc<Self>,
        plan: Plan,
        seen: super::blocked::Snapshot,
        trigger: Option<Trigger>,
        guard: PlanGuard,
        submission: Option<JobSubmission>,
    ) -> Result<(Registered, Option<Placing>, Durable), RegisterError> {
        let spec_changed = plan.spec_changed();
        let Plan {
            mut job,
            existing,
            keep,
            destructive,
            stop,
            place,
            blocked,
            started,
            followups,
            waiting: _,
            canary_at: _,
            deployment,
            new_deployment,
        } = plan;
        let index = self.changes.bump();
        job.state = next_state(existing.as_ref(), spec_changed, index);
        let submission = version_source(&job, existing.is_none() || spec_changed, submission);
        if let Some(e) = &existing {
            keep_lineage(&mut job, e);
        }
        self.jobs
            .write()
            .unwrap()
            .insert((job.namespace.clone(), job.id.clone()), job.clone());
        self.stop_allocations(&job, &stop, &destructive);
        self.periodic_job_changed(&job);
        let deployment = self.plan_deployment(&job, deployment, new_deployment, index);

        // A periodic or parameterized job is not evaluated itself: its children are.
        if job.is_parent() {
            let (r, written) = self.store_parent(&job, index, submission.as_ref())?;
            return Ok((r, None, written));
        }
        // Evaluated before its allocations are placed, so the event stream tells them in
        // Nomad's order: the job, its evaluation, then the allocations.
        let trigger = trigger.unwrap_or_else(|| trigger_of(&job));
        let eval_id = self.evaluate_pending(&job, trigger, index);
        self.follow_up(&job, &followups, index);
        // Queued under the plan lock (so versions of a job are written in order), waited
        // for by the caller after the lock is let go; with the mark that its placement is
        // on its way, which the placement clears once its allocations are stored.
        let job_written = self
            .db
            .queue_job_version(&job, Some(&eval_id), submission.as_ref())?;
        let registered = Registered {
            eval_id: eval_id.clone(),
            index,
            job_modify_index: job.state.job_modify_index,
            allocs: Vec::new(),
            warnings: Vec::new(),
        };
        let kept = keep.len();
        let update = keep.into_iter().filter(|k| k.in_place || spec_changed);
        let placing = Placing {
            kept,
            stopped: stop.len() + destructive.len(),
            job,
            trigger,
            eval_id,
            index,
            update: update.collect(),
            place,
            blocked,
            started,
            deployment,
            in_table: None,
            seen,
            _guard: guard,
        };
        Ok((registered, Some(placing), job_written))
    }

    /// Store a periodic or parameterized job: its children are evaluated, not it.
    fn store_parent(
        &self,
        job: &Job,
        index: u64,
        submission: Option<&JobSubmission>,
    ) -> Result<(Registered, Durable), StateError> {
        tracing::info!(job = %job.id, namespace = %job.namespace, version = job.state.version, "job registered (launched by its children)");
        let job_written = self.db.queue_job_version(job, None, submission)?;
        let r = Registered {
            eval_id: String::new(),
            index,
            job_modify_index: job.state.job_modify_index,
            allocs: Vec::new(),
            warnings: Vec::new(),
        };
        Ok((r, job_written))
    }

    /// Stop what a plan stops: allocations not wanted any more, and those it replaces.
    fn stop_allocations(&self, job: &Job, stop: &[LiveAlloc], destructive: &[LiveAlloc]) {
        let unwanted = if job.stop {
            "job stopped"
        } else {
            "job updated: not wanted any more"
        };
        let stops = stop.iter().map(|a| (a, unwanted));
        for (a, why) in stops.chain(destructive.iter().map(|a| (a, "job updated"))) {
            if let Some(r) = self.client.runner(&a.id) {
                r.stop(why);
            }
        }
    }

    /// Evaluate a registered job again (`/v1/job/{id}/evaluate`): the allocations it is
    /// missing are placed again; one for its parent (periodic or parameterized) is refused.
    pub fn evaluate_job(
        self: &Arc<Self>,
        namespace: &str,
        id: &str,
    ) -> Result<Registered, RegisterError> {
        self.evaluate_job_with(namespace, id, Trigger::JobEvaluate)
    }

    /// [`Server::evaluate_job`], saying what triggered it.
    pub(super) fn evaluate_job_with(
        self: &Arc<Self>,
        namespace: &str,
        id: &str,
        trigger: Trigger,
    ) -> Result<Registered, RegisterError> {
        // The job as it is once this plan's turn comes: read before, a stop or purge that
        // came meanwhile would be undone by storing the job as it was.
        let guard = self.plan_lock.acquire();
        let job = self
            .job(namespace, id)
            .ok_or_else(|| RegisterError::NotFound("job not found".into()))?;
        if job.is_periodic() {
            return Err(RegisterError::Invalid(JobspecError::new(
                "Job",
                "can't evaluate periodic job",
            )));
        }
        if job.is_parameterized() {
            return Err(RegisterError::Invalid(JobspecError::new(
                "Job",
                "can't evaluate parameterized job",
            )));
        }
        let seen = self.placement_snapshot();
        let plan = self.plan_with(job, true)?;
        let (mut r, placing, job_written) = self.apply(plan, seen, Some(trigger), guard, None)?;
        if let Some(p) = placing {
            r.allocs = p.run(self)?;
        }
        job_written.wait()?;
        Ok(r)
    }

    /// Evaluate every job on the node again (`/v1/node/{id}/evaluate`, and when the node
    /// becomes eligible); returns the evaluations made.
    pub fn evaluate_node(self: &Arc<Self>) -> Vec<String> {
        self.jobs()
            .into_iter()
            .filter(|j| !j.is_parent() && !j.stop)
            .filter_map(|j| {
                match self.evaluate_job_with(&j.namespace, &j.id, Trigger::NodeUpdate) {
                    Ok(r) => Some(r.eval_id),
                    Err(e) => {
                        tracing::warn!(job = %j.id, error = %e, "evaluating a job failed");
                        None
                    }
                }
            })
            .collect()
    }

    /// Stop a job: a new version with `Stop` set, its allocations stopped; with `purge`,
    /// forget the job and its versions too. A job that does not exist is not an error (as
    /// in Nomad): nothing happens and no evaluation is made.
    ///
    /// The change is durable before anything else happens: the job table changes and the
    /// allocations stop only once the state DB took the write. A write the state DB refuses
    /// (a failing disk) changes nothing, so the refusal (503) and what the API shows agree,
    /// before and after a crash. Under the plan lock, so no plan made from the job as it was
    /// stores it again after the change.
    pub fn deregister_job(
        self: &Arc<Self>,
        namespace: &str,
        id: &str,
        purge: bool,
    ) -> Result<Registered, StateError> {
        if let Some(reason) = self.db.unwritable() {
            return Err(StateError::Unwritable { reason });
        }
        let key = (namespace.to_string(), id.to_string());
        let guard = self.plan_lock.acquire();
        let Some(existing) = self.jobs.read().unwrap().get(&key).cloned() else {
            return Ok(Registered {
                eval_id: String::new(),
                index: 0,
                job_modify_index: 0,
                allocs: Vec::new(),
                warnings: Vec::new(),
            });
        };
        let index = self.changes.bump();
        let mut job = existing.clone();
        job.stop = true;
        if purge {
            self.db.delete_job(namespace, id)?;
            self.jobs.write().unwrap().remove(&key);
            self.forget_deployments(namespace, id);
        } else {
            self.cancel_deployments(&job, crate::structs::deployment::desc::STOPPED_JOB, index);
            if !existing.stop {
                job.state.version += 1;
                job.state.job_modify_index = index;
                job.state.submit_time = crate::util::now_nanos() as i64;
            }
            job.state.modify_index = index;
            job.state.stable = false;
            self.db.put_job(&job)?;
            self.jobs.write().unwrap().insert(key, job.clone());
        }
        drop(guard);
        for r in self.live_runners(namespace, id) {
            r.stop("job deregistered");
        }
        self.periodic_job_changed(&job);
        let eval_id = if existing.is_parent() {
            String::new()
        } else {
            self.evaluate(&job, Trigger::JobDeregister, index)
        };
        Ok(Registered {
            eval_id,
            index,
            job_modify_index: index,
            allocs: Vec::new(),
            warnings: Vec::new(),
        })
    }
}

/// The source a registration of `job` keeps: as in Nomad, one that changes nothing makes
/// no version and keeps no source; a `new_version` keeps the source it was submitted as.
fn version_source(
    job: &Job,
    new_version: bool,
    submission: Option<JobSubmission>,
) -> Option<JobSubmission> {
    submission.filter(|_| new_version).map(|s| JobSubmission {
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        version: job.state.version,
        job_modify_index: job.state.job_modify_index,
        ..s
    })
}

/// Nomad's `EnforceIndex` check: 0 means the job must not exist yet.
fn check_index(expected: u64, existing: Option<&Job>) -> Result<(), RegisterError> {
    let conflict = |why: String| Err(RegisterError::IndexConflict { expected, why });
    match existing {
        None if expected == 0 => Ok(()),
        None => conflict("job does not exist".into()),
        Some(_) if expected == 0 => conflict("job already exists".into()),
        Some(j) if j.state.job_modify_index != expected => conflict(format!(
            "job exists with conflicting job modify index: {}",
            j.state.job_modify_index
        )),
        Some(_) => Ok(()),
    }
}

/// The state of a job registered at `index` over `existing`: the same version when the
/// spec did not change, else the next one (0 for a new job), submitted now.
fn next_state(existing: Option<&Job>, spec_changed: bool, index: u64) -> crate::jobspec::JobState {
    let now = crate::util::now_nanos() as i64;
    match existing {
        Some(e) if !spec_changed => {
            let mut s = e.state.clone();
            s.modify_index = index;
            s
        }
        Some(e) => crate::jobspec::JobState {
            version: e.state.version + 1,
            create_index: e.state.create_index,
            modify_index: index,
            job_modify_index: index,
            submit_time: now,
            ..Default::default()
        },
        None => crate::jobspec::JobState {
            version: 0,
            create_index: index,
            modify_index: index,
            job_modify_index: index,
            submit_time: now,
            ..Default::default()
        },
    }
}

/// Keep what the agent knows of the job's lineage (a dispatched or launched child): a
/// registration of the same id does not carry it.
fn keep_lineage(job: &mut Job, existing: &Job) {
    if job.parent_id.is_empty() {
        job.parent_id = existing.parent_id.clone();
    }
    job.dispatched |= existing.dispatched;
    if job.payload.is_empty() {
        job.payload = existing.payload.clone();
    }
}

/// What triggered the evaluation of a registration of `job` that says nothing else.
fn trigger_of(job: &Job) -> Trigger {
    if job.stop {
        Trigger::JobDeregister
    } else if !job.parent_id.is_empty() && !job.dispatched {
        Trigger::PeriodicJob
    } else {
        Trigger::JobRegister
    }
}
