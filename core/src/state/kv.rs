//! The typed state layer: [`StateDb`] over any ordered key-value [`Backend`], values as
//! JSON, keys laid out so that an allocation's rows are one prefix. Writes go through the
//! committer ([`super::commit`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::alloc_row::{AllocRow, JobRows};
use super::{
    Backend, CommitOptions, CommitStats, Durable, JOB_VERSIONS_KEPT, LocalTaskState, MemBackend,
    Op, ProcessRecord, RedbBackend, StateDb, StateError, commit, tables,
};
use crate::jobspec::Job;
use crate::structs::{Allocation, JobSubmission, TaskState, Variable};

/// The typed state layer over a backend; writes go through the committer (group commit
/// and de-duplication, see [`commit`]).
pub struct KvState<B: Backend> {
    backend: std::sync::Arc<B>,
    commit: commit::Committer,
    /// Which job rows the allocation rows name (loaded at the first allocation write).
    job_rows: std::sync::Mutex<Option<JobRows>>,
}

impl<B: Backend + 'static> KvState<B> {
    /// A state layer over `backend`.
    pub fn with_backend(backend: B, options: CommitOptions) -> Self {
        let backend = std::sync::Arc::new(backend);
        Self {
            commit: commit::Committer::start(backend.clone(), options),
            backend,
            job_rows: Default::default(),
        }
    }

    /// The backend (for tests that inject faults).
    pub fn backend(&self) -> &B {
        &self.backend
    }
}

/// The default state DB: a redb file.
pub type RedbState = KvState<RedbBackend>;
/// The in-memory state DB for tests.
pub type MemState = KvState<MemBackend>;

impl RedbState {
    /// Open (or create) the state file at `path`, upgrading an older schema.
    pub fn open(path: &std::path::Path) -> Result<Self, StateError> {
        Self::open_with_cache(path, RedbBackend::DEFAULT_CACHE)
    }

    /// [`RedbState::open`], with redb keeping at most `cache_bytes` of the file in memory.
    pub fn open_with_cache(path: &std::path::Path, cache_bytes: usize) -> Result<Self, StateError> {
        Ok(KvState::with_backend(
            RedbBackend::open_with_cache(path, cache_bytes)?,
            CommitOptions::default(),
        ))
    }
}

impl MemState {
    /// A fresh in-memory state.
    pub fn new() -> Self {
        KvState::with_backend(MemBackend::default(), CommitOptions::default())
    }
}

impl Default for MemState {
    fn default() -> Self {
        Self::new()
    }
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("state values are plain data and always serialize")
}

/// A stored job, with what later agents add to a registration filled in
/// ([`Job::fill_stored_defaults`]).
fn decode_job(table: &'static str, key: &str, bytes: &[u8]) -> Result<Job, StateError> {
    let mut job: Job = decode(table, key, bytes)?;
    job.fill_stored_defaults();
    Ok(job)
}

fn decode<T: DeserializeOwned>(
    table: &'static str,
    key: &str,
    bytes: &[u8],
) -> Result<T, StateError> {
    serde_json::from_slice(bytes).map_err(|e| StateError::Decode {
        table,
        key: key.to_string(),
        detail: e.to_string(),
    })
}

/// Plugin manager state lives in the node table under `plugins/<manager>/<name>`, beside
/// the node's identity (no schema change: older agents never read these keys).
fn plugin_key(manager: &str, name: &str) -> String {
    format!("plugins/{manager}/{name}")
}

/// A job version's key: its job's key and the version, zero-padded so that keys sort by
/// version (a job id may contain `/`, so versions of `a` and `a/b` never share a prefix
/// scan: the version is all digits).
fn version_key(job_key: &str, version: u64) -> String {
    format!("{job_key}/{version:020}")
}

/// Key prefix of the marks of placements on their way (see `queue_job_placing`).
const PLACING: &str = "placing/";

fn task_key(alloc_id: &str, task: &str) -> String {
    format!("{alloc_id}/{task}")
}

/// A variable's key. Namespace names hold no `/` (the agent refuses such a namespace for a
/// variable), so the key is unique and one namespace's variables are one prefix.
fn variable_key(namespace: &str, path: &str) -> String {
    format!("{namespace}/{path}")
}

impl<B: Backend + 'static> KvState<B> {
    /// The rows of `table` (keyed by version) of the job stored under `job_key`, oldest
    /// first; not those of a job whose id extends this one's (`a` and `a/periodic-1`).
    fn version_rows(
        &self,
        table: &'static str,
        job_key: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let prefix = format!("{job_key}/");
        Ok(self
            .backend
            .scan(table, &prefix)?
            .into_iter()
            .filter(|(k, _)| {
                let rest = &k[prefix.len()..];
                rest.len() == 20 && rest.bytes().all(|b| b.is_ascii_digit())
            })
            .collect())
    }
}

impl<B: Backend + 'static> KvState<B> {
    /// Queue `ops` after the allocation rows (and job rows) `rows` adds, in one write: under
    /// the job rows' lock, so a write that counts on a job row stored by an earlier one is
    /// queued after it.
    fn queue_with_rows(
        &self,
        mut ops: Vec<Op>,
        rows: impl FnOnce(&mut JobRows, &mut Vec<Op>),
    ) -> Result<Durable, StateError> {
        let mut guard = self.job_rows.lock().unwrap();
        let failures = self.commit.stats().failures.load(Ordering::Relaxed);
        let job_rows = match &mut *guard {
            Some(r) => {
                r.distrust_after(failures);
                r
            }
            slot @ None => {
                let (r, orphans) = JobRows::load(&*self.backend, failures)?;
                ops.extend(orphans);
                slot.insert(r)
            }
        };
        rows(job_rows, &mut ops);
        self.commit.queue(ops)
    }

    /// The job row `key` names, decoded once per read of the allocations.
    fn job_row(
        &self,
        key: &str,
        seen: &mut HashMap<String, Arc<Job>>,
    ) -> Result<Arc<Job>, StateError> {
        if let Some(j) = seen.get(key) {
            return Ok(j.clone());
        }
        let bytes =
            self.backend
                .get(tables::ALLOC_JOBS, key)?
                .ok_or_else(|| StateError::Decode {
                    table: tables::ALLOC_JOBS,
                    key: key.to_string(),
                    detail: "an allocation names this job row, which is missing".into(),
                })?;
        let job: Arc<Job> = Arc::new(decode_job(tables::ALLOC_JOBS, key, &bytes)?);
        seen.insert(key.to_string(), job.clone());
        Ok(job)
    }
}

impl<B: Backend + 'static> StateDb for KvState<B> {
    fn commit_stats(&self) -> &CommitStats {
        self.commit.stats()
    }
    fn unwritable(&self) -> Option<String> {
        self.commit.unwritable()
    }
    fn flush(&self) -> Result<(), StateError> {
        self.commit.flush()
    }

    fn queue_job_version(
        &self,
        job: &Job,
        eval_id: Option<&str>,
        submission: Option<&JobSubmission>,
    ) -> Result<Durable, StateError> {
        let key = format!("{}/{}", job.namespace, job.id);
        let version = job.state.version;
        let mut ops = vec![
            Op::Put(tables::JOBS, key.clone(), encode(job)),
            Op::Put(
                tables::JOB_VERSIONS,
                version_key(&key, version),
                encode(job),
            ),
        ];
        if let Some(s) = submission {
            ops.push(Op::Put(
                tables::JOB_SUBMISSIONS,
                version_key(&key, version),
                encode(s),
            ));
        }
        if let Some(old) = version.checked_sub(JOB_VERSIONS_KEPT) {
            ops.push(Op::Delete(tables::JOB_VERSIONS, version_key(&key, old)));
            ops.push(Op::Delete(tables::JOB_SUBMISSIONS, version_key(&key, old)));
        }
        if let Some(eval) = eval_id {
            ops.push(Op::Put(
                tables::NODE,
                format!("{PLACING}{eval}"),
                encode(&(&job.namespace, &job.id)),
            ));
        }
        self.commit.queue(ops)
    }

    fn queue_placing_done(&self, eval_id: &str) -> Result<Durable, StateError> {
        self.commit.queue(vec![Op::Delete(
            tables::NODE,
            format!("{PLACING}{eval_id}"),
        )])
    }

    fn interrupted_placements(&self) -> Result<Vec<(String, (String, String))>, StateError> {
        self.backend
            .scan(tables::NODE, PLACING)?
            .iter()
            .map(|(k, v)| Ok((k[PLACING.len()..].to_string(), decode(tables::NODE, k, v)?)))
            .collect()
    }

    fn delete_job(&self, namespace: &str, id: &str) -> Result<(), StateError> {
        let key = format!("{namespace}/{id}");
        let mut ops = vec![Op::Delete(tables::JOBS, key.clone())];
        for (k, _) in self.version_rows(tables::JOB_VERSIONS, &key)? {
            ops.push(Op::Delete(tables::JOB_VERSIONS, k));
        }
        for (k, _) in self.version_rows(tables::JOB_SUBMISSIONS, &key)? {
            ops.push(Op::Delete(tables::JOB_SUBMISSIONS, k));
        }
        self.commit.write(ops)
    }

    fn job_submission(
        &self,
        namespace: &str,
        id: &str,
        version: u64,
    ) -> Result<Option<JobSubmission>, StateError> {
        let key = version_key(&format!("{namespace}/{id}"), version);
        self.backend
            .get(tables::JOB_SUBMISSIONS, &key)?
            .map(|v| decode(tables::JOB_SUBMISSIONS, &key, &v))
            .transpose()
    }

    fn put_job_version(&self, job: &Job) -> Result<(), StateError> {
        let key = format!("{}/{}", job.namespace, job.id);
        self.commit.write(vec![Op::Put(
            tables::JOB_VERSIONS,
            version_key(&key, job.state.version),
            encode(job),
        )])
    }

    fn job_versions(&self, namespace: &str, id: &str) -> Result<Vec<Job>, StateError> {
        let mut out = self
            .version_rows(tables::JOB_VERSIONS, &format!("{namespace}/{id}"))?
            .iter()
            .map(|(k, v)| decode_job(tables::JOB_VERSIONS, k, v))
            .collect::<Result<Vec<_>, _>>()?;
        out.reverse();
        Ok(out)
    }

    fn jobs(&self) -> Result<Vec<Job>, StateError> {
        self.backend
            .scan(tables::JOBS, "")?
            .iter()
            .map(|(k, v)| decode_job(tables::JOBS, k, v))
            .collect()
    }

    fn put_alloc(&self, alloc: &Allocation) -> Result<(), StateError> {
        self.queue_alloc(alloc)?.wait()
    }

    fn queue_alloc(&self, alloc: &Allocation) -> Result<Durable, StateError> {
        self.queue_with_rows(Vec::new(), |rows, ops| rows.put(alloc, ops))
    }

    fn queue_task_state(
        &self,
        alloc_id: &str,
        task: &str,
        state: &TaskState,
        alloc: Option<&Allocation>,
    ) -> Result<Durable, StateError> {
        let ops = vec![Op::Put(
            tables::TASK_STATE,
            task_key(alloc_id, task),
            encode(state),
        )];
        match alloc {
            Some(a) => self.queue_with_rows(ops, |rows, ops| rows.put(a, ops)),
            None => self.commit.queue(ops),
        }
    }

    fn queue_placed(&self, allocs: &[Allocation]) -> Result<Durable, StateError> {
        self.queue_with_rows(Vec::with_capacity(allocs.len() * 2 + 1), |rows, ops| {
            for a in allocs {
                rows.put(a, ops);
                for (task, state) in &a.task_states {
                    ops.push(Op::Put(
                        tables::TASK_STATE,
                        task_key(&a.id, task),
                        encode(state),
                    ));
                }
            }
        })
    }

    fn delete_alloc(&self, id: &str) -> Result<(), StateError> {
        let prefix = format!("{id}/");
        let ops = vec![
            Op::Delete(tables::ALLOCS, id.to_string()),
            Op::DeletePrefix(tables::TASK_STATE, prefix.clone()),
            Op::DeletePrefix(tables::LOCAL_STATE, prefix),
        ];
        self.queue_with_rows(ops, |rows, ops| rows.delete(id, ops))?
            .wait()
    }

    fn delete_local_states(&self, alloc_id: &str) -> Result<(), StateError> {
        let ops = vec![Op::DeletePrefix(
            tables::LOCAL_STATE,
            format!("{alloc_id}/"),
        )];
        self.commit.queue(ops)?.wait()
    }

    fn allocs(&self) -> Result<Vec<Allocation>, StateError> {
        // Every task state in one scan (keys are `<alloc id>/<task>`; ids hold no `/`).
        let mut states: HashMap<String, BTreeMap<String, TaskState>> = HashMap::new();
        for (k, v) in self.backend.scan(tables::TASK_STATE, "")? {
            if let Some((alloc, task)) = k.split_once('/') {
                let state = decode(tables::TASK_STATE, &k, &v)?;
                states
                    .entry(alloc.to_string())
                    .or_default()
                    .insert(task.to_string(), state);
            }
        }
        let mut out = Vec::new();
        let mut jobs = HashMap::new();
        for (k, v) in self.backend.scan(tables::ALLOCS, "")? {
            let row: AllocRow<'static> = decode(tables::ALLOCS, &k, &v)?;
            let mut a = row.into_allocation(|key| self.job_row(key, &mut jobs))?;
            a.task_states = states.remove(&a.id).unwrap_or_default();
            out.push(a);
        }
        Ok(out)
    }

    fn put_task_state(
        &self,
        alloc_id: &str,
        task: &str,
        state: &TaskState,
    ) -> Result<(), StateError> {
        self.commit.write(vec![Op::Put(
            tables::TASK_STATE,
            task_key(alloc_id, task),
            encode(state),
        )])
    }

    fn task_states(&self, alloc_id: &str) -> Result<BTreeMap<String, TaskState>, StateError> {
        let prefix = format!("{alloc_id}/");
        self.backend
            .scan(tables::TASK_STATE, &prefix)?
            .into_iter()
            .map(|(k, v)| {
                Ok((
                    k[prefix.len()..].to_string(),
                    decode(tables::TASK_STATE, &k, &v)?,
                ))
            })
            .collect()
    }

    fn put_local_state(
        &self,
        alloc_id: &str,
        task: &str,
        state: &LocalTaskState,
    ) -> Result<(), StateError> {
        self.commit.write(vec![Op::Put(
            tables::LOCAL_STATE,
            task_key(alloc_id, task),
            encode(state),
        )])
    }

    fn local_state(
        &self,
        alloc_id: &str,
        task: &str,
    ) -> Result<Option<LocalTaskState>, StateError> {
        let key = task_key(alloc_id, task);
        self.backend
            .get(tables::LOCAL_STATE, &key)?
            .map(|v| decode(tables::LOCAL_STATE, &key, &v))
            .transpose()
    }

    fn put_node_identity(&self, identity: &BTreeMap<String, String>) -> Result<(), StateError> {
        self.commit.write(vec![Op::Put(
            tables::NODE,
            "identity".into(),
            encode(identity),
        )])
    }

    fn node_identity(&self) -> Result<Option<BTreeMap<String, String>>, StateError> {
        self.backend
            .get(tables::NODE, "identity")?
            .map(|v| decode(tables::NODE, "identity", &v))
            .transpose()
    }

    fn put_plugin_state(
        &self,
        manager: &str,
        name: &str,
        state: &serde_json::Value,
    ) -> Result<(), StateError> {
        self.commit.write(vec![Op::Put(
            tables::NODE,
            plugin_key(manager, name),
            encode(state),
        )])
    }

    fn delete_plugin_state(&self, manager: &str, name: &str) -> Result<(), StateError> {
        self.commit
            .write(vec![Op::Delete(tables::NODE, plugin_key(manager, name))])
    }

    fn plugin_states(
        &self,
        manager: &str,
    ) -> Result<BTreeMap<String, serde_json::Value>, StateError> {
        let prefix = plugin_key(manager, "");
        self.backend
            .scan(tables::NODE, &prefix)?
            .into_iter()
            .map(|(k, v)| Ok((k[prefix.len()..].to_string(), decode(tables::NODE, &k, &v)?)))
            .collect()
    }

    fn put_process(&self, r: &ProcessRecord) -> Result<(), StateError> {
        self.commit.write(vec![Op::Put(
            tables::PROCESSES,
            format!("{:020}", r.id),
            encode(r),
        )])
    }

    fn delete_process(&self, id: u64) -> Result<(), StateError> {
        self.commit
            .write(vec![Op::Delete(tables::PROCESSES, format!("{id:020}"))])
    }

    fn processes(&self) -> Result<Vec<ProcessRecord>, StateError> {
        self.backend
            .scan(tables::PROCESSES, "")?
            .into_iter()
            .map(|(k, v)| decode(tables::PROCESSES, &k, &v))
            .collect()
    }

    fn put_variable(&self, var: &Variable) -> Result<(), StateError> {
        self.commit.write(vec![Op::Put(
            tables::VARIABLES,
            variable_key(&var.meta.namespace, &var.meta.path),
            encode(var),
        )])
    }

    fn delete_variable(&self, namespace: &str, path: &str) -> Result<(), StateError> {
        self.commit.write(vec![Op::Delete(
            tables::VARIABLES,
            variable_key(namespace, path),
        )])
    }

    fn variables(&self) -> Result<Vec<Variable>, StateError> {
        self.backend
            .scan(tables::VARIABLES, "")?
            .into_iter()
            .map(|(k, v)| decode(tables::VARIABLES, &k, &v))
            .collect()
    }

    fn put_deployment(&self, d: &crate::structs::Deployment) -> Result<(), StateError> {
        self.commit
            .write(vec![Op::Put(tables::DEPLOYMENTS, d.id.clone(), encode(d))])
    }

    fn delete_deployment(&self, id: &str) -> Result<(), StateError> {
        self.commit
            .write(vec![Op::Delete(tables::DEPLOYMENTS, id.to_string())])
    }

    fn deployments(&self) -> Result<Vec<crate::structs::Deployment>, StateError> {
        self.backend
            .scan(tables::DEPLOYMENTS, "")?
            .into_iter()
            .map(|(k, v)| decode(tables::DEPLOYMENTS, &k, &v))
            .collect()
    }

    fn put_namespace(&self, ns: &crate::structs::Namespace) -> Result<(), StateError> {
        self.commit.write(vec![Op::Put(
            tables::NAMESPACES,
            ns.name.clone(),
            encode(ns),
        )])
    }

    fn delete_namespace(&self, name: &str) -> Result<(), StateError> {
        self.commit
            .write(vec![Op::Delete(tables::NAMESPACES, name.to_string())])
    }

    fn namespaces(&self) -> Result<Vec<crate::structs::Namespace>, StateError> {
        self.backend
            .scan(tables::NAMESPACES, "")?
            .into_iter()
            .map(|(k, v)| decode(tables::NAMESPACES, &k, &v))
            .collect()
    }

    fn write_services(
        &self,
        put: &[crate::structs::ServiceRegistration],
        delete: &[String],
    ) -> Result<(), StateError> {
        let ops = put
            .iter()
            .map(|s| Op::Put(tables::SERVICES, s.id.clone(), encode(s)))
            .chain(
                delete
                    .iter()
                    .map(|id| Op::Delete(tables::SERVICES, id.clone())),
            )
            .collect();
        self.commit.write(ops)
    }

    fn services(&self) -> Result<Vec<crate::structs::ServiceRegistration>, StateError> {
        self.backend
            .scan(tables::SERVICES, "")?
            .into_iter()
            .map(|(k, v)| decode(tables::SERVICES, &k, &v))
            .collect()
    }
}
