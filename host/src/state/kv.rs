//! The typed state layer: [`StateDb`] over any ordered key-value [`Backend`], values as
//! JSON, keys laid out so that an allocation's rows are one prefix. Writes go through the
//! committer ([`super::commit`]).

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{
    Backend, CommitOptions, CommitStats, JOB_VERSIONS_KEPT, LocalTaskState, MemBackend, Op,
    ProcessRecord, RedbBackend, StateDb, StateError, commit, tables,
};
use crate::jobspec::Job;
use crate::structs::{Allocation, TaskState, Variable};

/// The typed state layer over a backend; writes go through the committer (group commit
/// and de-duplication, see [`commit`]).
pub struct KvState<B: Backend> {
    backend: std::sync::Arc<B>,
    commit: commit::Committer,
}

impl<B: Backend + 'static> KvState<B> {
    /// A state layer over `backend`.
    pub fn with_backend(backend: B, options: CommitOptions) -> Self {
        let backend = std::sync::Arc::new(backend);
        Self {
            commit: commit::Committer::start(backend.clone(), options),
            backend,
        }
    }

    /// The backend (for tests that inject faults).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Write-path counters.
    pub fn commit_stats(&self) -> &CommitStats {
        self.commit.stats()
    }
}

/// The default state DB: a redb file.
pub type RedbState = KvState<RedbBackend>;
/// The in-memory state DB for tests.
pub type MemState = KvState<MemBackend>;

impl RedbState {
    /// Open (or create) the state file at `path`, upgrading an older schema.
    pub fn open(path: &std::path::Path) -> Result<Self, StateError> {
        Ok(KvState::with_backend(
            RedbBackend::open(path)?,
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

fn task_key(alloc_id: &str, task: &str) -> String {
    format!("{alloc_id}/{task}")
}

/// A variable's key. Namespace names hold no `/` (the agent refuses such a namespace for a
/// variable), so the key is unique and one namespace's variables are one prefix.
fn variable_key(namespace: &str, path: &str) -> String {
    format!("{namespace}/{path}")
}

impl<B: Backend + 'static> KvState<B> {
    /// The version rows of the job stored under `job_key`, oldest first; not those of a
    /// job whose id extends this one's (`a` and `a/periodic-1`).
    fn version_rows(&self, job_key: &str) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let prefix = format!("{job_key}/");
        Ok(self
            .backend
            .scan(tables::JOB_VERSIONS, &prefix)?
            .into_iter()
            .filter(|(k, _)| {
                let rest = &k[prefix.len()..];
                rest.len() == 20 && rest.bytes().all(|b| b.is_ascii_digit())
            })
            .collect())
    }
}

/// An allocation's row: the allocation without its task states (stored apart), with its
/// index.
fn alloc_op(alloc: &Allocation) -> Op {
    let mut a = alloc.clone();
    a.task_states.clear();
    let mut stored = serde_json::to_value(&a).expect("allocations serialize");
    stored["Index"] = serde_json::json!(alloc.index);
    Op::Put(
        tables::ALLOCS,
        alloc.id.clone(),
        serde_json::to_vec(&stored).expect("json"),
    )
}

impl<B: Backend + 'static> StateDb for KvState<B> {
    fn put_job(&self, job: &Job) -> Result<(), StateError> {
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
        if let Some(old) = version.checked_sub(JOB_VERSIONS_KEPT) {
            ops.push(Op::Delete(tables::JOB_VERSIONS, version_key(&key, old)));
        }
        self.commit.write(ops)
    }

    fn delete_job(&self, namespace: &str, id: &str) -> Result<(), StateError> {
        let key = format!("{namespace}/{id}");
        let mut ops = vec![Op::Delete(tables::JOBS, key.clone())];
        for (k, _) in self.version_rows(&key)? {
            ops.push(Op::Delete(tables::JOB_VERSIONS, k));
        }
        self.commit.write(ops)
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
            .version_rows(&format!("{namespace}/{id}"))?
            .iter()
            .map(|(k, v)| decode::<Job>(tables::JOB_VERSIONS, k, v))
            .collect::<Result<Vec<_>, _>>()?;
        out.reverse();
        Ok(out)
    }

    fn jobs(&self) -> Result<Vec<Job>, StateError> {
        self.backend
            .scan(tables::JOBS, "")?
            .iter()
            .map(|(k, v)| decode(tables::JOBS, k, v))
            .collect()
    }

    fn put_alloc(&self, alloc: &Allocation) -> Result<(), StateError> {
        self.commit.write(vec![alloc_op(alloc)])
    }

    fn put_placed(&self, allocs: &[Allocation]) -> Result<(), StateError> {
        let mut ops = Vec::with_capacity(allocs.len() * 2);
        for a in allocs {
            ops.push(alloc_op(a));
            for (task, state) in &a.task_states {
                ops.push(Op::Put(
                    tables::TASK_STATE,
                    task_key(&a.id, task),
                    encode(state),
                ));
            }
        }
        self.commit.write(ops)
    }

    fn delete_alloc(&self, id: &str) -> Result<(), StateError> {
        let prefix = format!("{id}/");
        self.commit.write(vec![
            Op::Delete(tables::ALLOCS, id.to_string()),
            Op::DeletePrefix(tables::TASK_STATE, prefix.clone()),
            Op::DeletePrefix(tables::LOCAL_STATE, prefix),
        ])
    }

    fn allocs(&self) -> Result<Vec<Allocation>, StateError> {
        let mut out = Vec::new();
        for (k, v) in self.backend.scan(tables::ALLOCS, "")? {
            let raw: serde_json::Value = decode(tables::ALLOCS, &k, &v)?;
            let index = raw.get("Index").and_then(|i| i.as_u64()).unwrap_or(0) as u32;
            let mut a: Allocation =
                serde_json::from_value(raw).map_err(|e| StateError::Decode {
                    table: tables::ALLOCS,
                    key: k.clone(),
                    detail: e.to_string(),
                })?;
            a.index = index;
            a.task_states = self.task_states(&a.id)?;
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
}
