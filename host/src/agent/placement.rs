//! Placing jobs: a single node is its own scheduler. Registering a job plans each group's
//! allocations (kept and updated in place, replaced, or placed new), reserves their ports
//! and devices, records the evaluation and starts the runners; deregistering stops them.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Agent, JobRecord, Registered};
use crate::allocrunner::AllocRunner;
use crate::jobspec::{Job, JobspecError};
use crate::state::StateError;

/// Why a job was not registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The job cannot be placed as written (a port or device another job holds, a device
    /// this node lacks); the error names the field.
    #[error(transparent)]
    Invalid(#[from] JobspecError),
    /// The state DB failed; nothing was placed.
    #[error(transparent)]
    State(#[from] StateError),
}
use crate::structs::{Allocation, ClientStatus, DesiredStatus};

impl Agent {
    /// Record the (complete) evaluation of a change to `job`.
    pub(super) fn evaluate(
        &self,
        id: String,
        job: &Job,
        trigger: crate::evals::Trigger,
        index: u64,
    ) -> String {
        let eval = self.evals.record(crate::evals::EvalRequest {
            id,
            namespace: &job.namespace,
            job_id: &job.id,
            job_type: job.job_type.as_str(),
            priority: job.priority.clamp(0, 100) as u32,
            groups: job.task_groups.iter().map(|g| g.name.clone()).collect(),
            triggered_by: trigger,
            index,
            node_id: &self.node.read().unwrap().id,
        });
        let id = eval.id.clone();
        let events = &self.changes.events;
        if events.wanted() {
            // The job as the API shows it, then its evaluation (Nomad's order).
            if let Some(event_type) = trigger.job_event() {
                let record = self
                    .job(&job.namespace, &job.id)
                    .map(|r| serde_json::to_value(r).unwrap_or_default())
                    .unwrap_or_else(|| serde_json::to_value(job).unwrap_or_default());
                events.publish(|| crate::events::Event {
                    topic: "Job",
                    event_type,
                    key: job.id.clone(),
                    namespace: job.namespace.clone(),
                    filter_keys: Vec::new(),
                    index,
                    payload: crate::events::Payload::Job(Box::new(record)),
                });
            }
            events.publish(|| crate::events::Event {
                topic: "Evaluation",
                event_type: "EvaluationUpdated",
                key: eval.id.clone(),
                namespace: job.namespace.clone(),
                filter_keys: vec![job.id.clone()],
                index,
                payload: crate::events::Payload::Evaluation(Box::new(eval)),
            });
        }
        id
    }

    /// Ports held by live allocations, other than those of job `except` (which a
    /// registration replaces).
    pub(super) fn ports_in_use(
        &self,
        except: &(String, String),
    ) -> std::collections::BTreeMap<u16, String> {
        let mut held = std::collections::BTreeMap::new();
        for r in self.allocs.read().unwrap().values() {
            r.shared().peek(|a| {
                if a.is_terminal() || (a.namespace == except.0 && a.job_id == except.1) {
                    return;
                }
                for p in &a.allocated_resources.shared.ports {
                    held.insert(
                        p.value,
                        format!("allocation {} of job {:?}", &a.id[..8], a.job_id),
                    );
                }
            });
        }
        held
    }

    /// Device instances held by live allocations other than those of job `except`, keyed
    /// `<vendor>/<type>/<name>/<id>`.
    pub(super) fn devices_in_use(&self, except: &(String, String)) -> BTreeMap<String, String> {
        let mut held = BTreeMap::new();
        for r in self.allocs.read().unwrap().values() {
            r.shared().peek(|a| {
                if a.is_terminal() || (a.namespace == except.0 && a.job_id == except.1) {
                    return;
                }
                hold_devices(
                    a,
                    &format!("allocation {} of job {:?}", &a.id[..8], a.job_id),
                    &mut held,
                );
            });
        }
        held
    }

    /// Register (or update) a job and place its allocations.
    pub fn register_job(self: &Arc<Self>, job: Job) -> Result<Registered, RegisterError> {
        let key = (job.namespace.clone(), job.id.clone());
        let eval_id = uuid::Uuid::new_v4().to_string();
        let existing = self.jobs.read().unwrap().get(&key).cloned();
        let live: Vec<Arc<AllocRunner>> = self
            .job_runners(&key.0, &key.1)
            .into_iter()
            .filter(|r| !r.shared().peek(Allocation::is_terminal))
            .collect();
        if let Some(old) = &existing
            && old.job == job
            && !old.stop
            && !live.is_empty()
        {
            let index = self.changes.index();
            let eval_id = self.evaluate(eval_id, &job, crate::evals::Trigger::JobRegister, index);
            return Ok(Registered {
                eval_id,
                index,
                allocs: Vec::new(),
            });
        }
        // Plan: a live allocation whose group did not change (only the count, or job
        // fields no task sees) is updated in place and keeps running, as Nomad does; the
        // others are replaced, and missing indexes of each group are placed.
        let previous = existing.as_ref().filter(|e| !e.stop).map(|e| &e.job);
        let (mut keep, mut replace) = (Vec::new(), Vec::new());
        for r in live {
            let (group, index) = r.shared().peek(|a| (a.task_group.clone(), a.index));
            let in_place = previous.is_some_and(|old| updatable_in_place(old, &job, &group))
                && job
                    .group(&group)
                    .is_some_and(|g| index < job.placed_count(g));
            if in_place {
                keep.push((group, index, r));
            } else {
                replace.push(r);
            }
        }
        // Ports before any change: a static port another job holds refuses the
        // registration, with nothing stored or stopped.
        let mut held = self.ports_in_use(&key);
        for (_, _, r) in &keep {
            r.shared().peek(|a| {
                for p in &a.allocated_resources.shared.ports {
                    held.insert(p.value, format!("allocation {} of this job", &a.id[..8]));
                }
            });
        }
        // Devices likewise: instances other jobs hold, and those of allocations kept.
        let mut held_devices = self.devices_in_use(&key);
        for (_, _, r) in &keep {
            r.shared().peek(|a| {
                hold_devices(
                    a,
                    &format!("allocation {} of this job", &a.id[..8]),
                    &mut held_devices,
                )
            });
        }
        let mut to_place = Vec::new();
        for (gi, group) in job.task_groups.iter().enumerate() {
            for i in 0..job.placed_count(group) {
                if keep.iter().any(|(g, idx, _)| *g == group.name && *idx == i) {
                    continue;
                }
                let path = format!("Job.TaskGroups[{gi}]");
                let ports = crate::ports::assign(&path, group, &self.host_ip, &mut held)?;
                let mut tasks = BTreeMap::new();
                for (ti, task) in group.tasks.iter().enumerate() {
                    let devices = self.devices.assign(
                        &format!("{path}.Tasks[{ti}]"),
                        task,
                        &mut held_devices,
                    )?;
                    if !devices.is_empty() {
                        tasks.insert(
                            task.name.clone(),
                            crate::structs::AllocatedTaskResources { devices },
                        );
                    }
                }
                to_place.push((group, i, ports, tasks));
            }
        }
        for r in &replace {
            r.stop("job updated");
        }
        self.db.put_job(&job)?;
        let index = self.changes.bump();
        let now = crate::util::now_nanos();
        let record = JobRecord {
            job: job.clone(),
            status: "running".into(),
            stop: false,
            version: existing.as_ref().map(|e| e.version + 1).unwrap_or(0),
            create_index: existing.as_ref().map(|e| e.create_index).unwrap_or(index),
            modify_index: index,
            job_modify_index: index,
            submit_time: now,
        };
        self.jobs.write().unwrap().insert(key, record);
        // Evaluated before its allocations are placed, so the event stream tells them in
        // Nomad's order: the job, its evaluation, then the allocations.
        let eval_id = self.evaluate(eval_id, &job, crate::evals::Trigger::JobRegister, index);

        let config = self.runner_config();
        let node = &config.node;
        let mut placed = Vec::new();
        for (_, _, r) in &keep {
            r.update(job.clone(), &eval_id);
        }
        for (group, i, ports, tasks) in to_place {
            let alloc = Allocation {
                id: uuid::Uuid::new_v4().to_string(),
                namespace: job.namespace.clone(),
                eval_id: eval_id.clone(),
                name: format!("{}.{}[{i}]", job.id, group.name),
                node_id: node.id.clone(),
                node_name: node.name.clone(),
                job_id: job.id.clone(),
                job: job.clone(),
                task_group: group.name.clone(),
                index: i,
                desired_status: DesiredStatus::Run,
                desired_description: String::new(),
                client_status: ClientStatus::Pending,
                client_description: String::new(),
                task_states: BTreeMap::new(),
                allocated_resources: crate::structs::AllocatedResources {
                    shared: crate::structs::AllocatedSharedResources { ports },
                    tasks,
                },
                create_index: index,
                modify_index: index,
                create_time: now,
                modify_time: now,
            };
            let id = alloc.id.clone();
            let runner = AllocRunner::new(alloc, &config);
            self.allocs
                .write()
                .unwrap()
                .insert(id.clone(), runner.clone());
            tokio::spawn(runner.run());
            placed.push(id);
        }
        tracing::info!(job = %job.id, namespace = %job.namespace, placed = placed.len(), updated_in_place = keep.len(), "job registered");
        Ok(Registered {
            eval_id,
            index,
            allocs: placed,
        })
    }

    /// Stop a job's allocations; with `purge`, forget the job too.
    pub fn deregister_job(
        &self,
        namespace: &str,
        id: &str,
        purge: bool,
    ) -> Result<Option<Registered>, StateError> {
        let key = (namespace.to_string(), id.to_string());
        let Some(job) = self.jobs.read().unwrap().get(&key).map(|r| r.job.clone()) else {
            return Ok(None);
        };
        for r in self.job_runners(namespace, id) {
            r.stop("job deregistered");
        }
        let index = self.changes.bump();
        if purge {
            self.jobs.write().unwrap().remove(&key);
            self.db.delete_job(namespace, id)?;
        } else if let Some(rec) = self.jobs.write().unwrap().get_mut(&key) {
            rec.stop = true;
            rec.modify_index = index;
        }
        Ok(Some(Registered {
            eval_id: self.evaluate(
                uuid::Uuid::new_v4().to_string(),
                &job,
                crate::evals::Trigger::JobDeregister,
                index,
            ),
            index,
            allocs: Vec::new(),
        }))
    }
}

/// Whether allocations of `group` can move from `old` to `new` in place: nothing a task
/// sees changed (the group apart from its count, and the job's name, type and meta, which
/// reach the tasks' environment), as Nomad's `tasksUpdated` decides.
fn updatable_in_place(old: &Job, new: &Job, group: &str) -> bool {
    let (Some(a), Some(b)) = (old.group(group), new.group(group)) else {
        return false;
    };
    let mut a = a.clone();
    a.count = b.count;
    a == *b && old.name == new.name && old.job_type == new.job_type && old.meta == new.meta
}

/// Add the device instances `a` holds to `held` (keyed `<vendor>/<type>/<name>/<id>`).
fn hold_devices(a: &Allocation, holder: &str, held: &mut BTreeMap<String, String>) {
    for t in a.allocated_resources.tasks.values() {
        for d in &t.devices {
            for id in &d.device_ids {
                held.insert(
                    format!("{}/{}/{}/{id}", d.vendor, d.device_type, d.name),
                    holder.to_string(),
                );
            }
        }
    }
}
