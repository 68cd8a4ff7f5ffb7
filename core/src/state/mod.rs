//! The agent's local state: jobs, allocations, task states, per-task local state (driver
//! handle, hook state), node identity, the driver and device managers' last view of
//! their plugins, and Nomad Variables.
//!
//! [`StateDb`] is the interface the rest of the agent uses. Both implementations share one
//! typed layer ([`KvState`]) over a small ordered key-value [`Backend`]:
//! [`RedbBackend`] (the default, a file in the data dir) and [`MemBackend`] (tests).
//! Values are JSON; keys are `<alloc-id>` or `<alloc-id>/<task>`, so an allocation's rows
//! are one prefix and deleting an allocation is one range delete in one transaction.

mod alloc_row;
mod commit;
mod faulty;
mod kv;
mod mem;
mod recover;
mod redb_backend;
#[cfg(test)]
mod submission_tests;

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use commit::{CommitOptions, CommitStats, Durable};
pub use faulty::{
    FaultyBackend, WRITE_FAULTS_ENV, WRITE_FAULTS_SEED_ENV, open_redb, write_faults_from_env,
};
pub use kv::{KvState, MemState, RedbState};
pub use mem::MemBackend;
pub use redb_backend::RedbBackend;

pub use crate::executor::processes::ProcessRecord;
use crate::jobspec::Job;
use crate::structs::{Allocation, JobSubmission, TaskState, Variable};

/// Schema version this agent writes. Older files are upgraded at open; newer ones refused.
///
/// - 1: jobs, allocs, task_state, local_state, node.
/// - 2: adds `processes` (host processes started through the executor, for reattaching).
/// - 3: adds `job_versions` (the last [`JOB_VERSIONS_KEPT`] versions of each job); jobs carry
///   their version, indexes and status beside their spec.
/// - 4: adds `variables` (Nomad Variables, keyed `<namespace>/<path>`).
/// - 6: adds `job_submissions` (a job version's source as submitted, keyed as its version).
/// - 7: adds `deployments` (a service job version's roll-out, keyed by id).
/// - 8: adds `namespaces` (Nomad's namespaces as objects, keyed by name).
/// - 9: adds `services` (Nomad-native service registrations, keyed by id).
pub const SCHEMA_VERSION: u64 = 9;

/// Versions of a job kept for `/v1/job/{id}/versions` and revert (Nomad keeps six).
pub const JOB_VERSIONS_KEPT: u64 = 6;

/// Errors of the state DB.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file is damaged.
    #[error(
        "state file {path} is corrupt ({detail}); move it aside to start with an empty state, or restore a backup"
    )]
    Corrupt {
        path: String,
        /// What the storage layer said.
        detail: String,
    },
    /// The file was written by a newer agent.
    #[error(
        "state file {path} has schema version {found}, newer than this agent's {SCHEMA_VERSION}; run a newer agent, or move the file aside"
    )]
    TooNew {
        path: String,
        /// Version found.
        found: u64,
    },
    /// Another agent holds the file.
    #[error(
        "state file {path} is in use by another process (is another agent running with this data dir?)"
    )]
    InUse { path: String },
    /// A stored value could not be decoded.
    #[error("state entry {table}/{key} cannot be decoded: {detail}")]
    Decode {
        table: &'static str,
        key: String,
        /// Decoder's message.
        detail: String,
    },
    /// The disk failed a read or a write (full, read-only, failing). redb refuses every
    /// later operation until the file is reopened, which the committer does at once.
    #[error("I/O error on state file {path}: {detail}")]
    Io {
        path: String,
        /// What the operating system said (`No space left on device`).
        detail: String,
    },
    /// A write refused while the state DB cannot write: nothing of it was applied. The
    /// committer retries in the background; writes are taken again once
    /// one succeeds.
    #[error("the state DB cannot write ({reason}); retrying in the background, try again later")]
    Unwritable {
        /// The error that stopped the writes.
        reason: String,
    },
    /// Any other storage failure.
    #[error("state storage error: {0}")]
    Storage(String),
}

/// Log a write of `what` (of `subject`) that failed and will be written again once the
/// state DB writes. A refusal during an outage is only a debug line: the outage's start and
/// end are logged once each, and every write in it would repeat them at error level.
pub fn log_write_failed(e: &StateError, what: &str, subject: &str) {
    if matches!(e, StateError::Unwritable { .. }) {
        tracing::debug!(subject, error = %e, "persisting {what} refused while the state DB cannot write; written again once it writes");
    } else {
        tracing::error!(subject, error = %e, "persisting {what} failed; written again once the state DB writes");
    }
}

impl StateError {
    /// An I/O error or a refusal because of one: the disk, not the data, is at fault, and
    /// the same write may succeed once the disk does.
    pub fn is_io(&self) -> bool {
        matches!(self, StateError::Io { .. } | StateError::Unwritable { .. })
    }
}

/// A driver handle as persisted for a task (what `start` returned, updated by later calls).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredHandle {
    /// Driver name.
    pub driver: String,
    /// sha256 of the driver version that issued it.
    pub driver_sha256: String,
    /// Handle layout version chosen by the driver.
    pub version: u32,
    /// Task invocation id.
    pub task_id: String,
    /// The driver's opaque state.
    pub driver_state: Vec<u8>,
}

/// A hook's persisted state for one task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HookState {
    /// Prestart returned done.
    pub prestart_done: bool,
    /// The state map the hook returned.
    pub data: BTreeMap<String, String>,
    /// The env the hook set.
    pub env: BTreeMap<String, String>,
}

/// Per-task state only this client needs (Nomad's LocalState).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LocalTaskState {
    /// The driver handle of the running invocation.
    pub handle: Option<StoredHandle>,
    /// Hook state by hook name, in first-run order.
    pub hooks: Vec<(String, HookState)>,
    /// The task runner finished for good.
    pub run_complete: bool,
}

/// The state DB interface.
///
/// Every write is durable when it returns `Ok` (redb commits with an fsync). Methods may be
/// called from any thread; implementations serialise writers internally.
pub trait StateDb: Send + Sync {
    /// Record a host process (see [`ProcessRecord`]).
    fn put_process(&self, r: &ProcessRecord) -> Result<(), StateError>;
    /// Forget a host process.
    fn delete_process(&self, id: u64) -> Result<(), StateError>;
    /// Every recorded host process.
    fn processes(&self) -> Result<Vec<ProcessRecord>, StateError>;
    /// Store (or replace) a job, and the record of its version (the oldest version beyond
    /// [`JOB_VERSIONS_KEPT`] is dropped), in one transaction.
    fn put_job(&self, job: &Job) -> Result<(), StateError> {
        self.queue_job(job)?.wait()
    }
    /// [`StateDb::put_job`] queued, not waited for: writes are applied in the order they
    /// are queued, so a caller that queues under its lock keeps that order without holding
    /// the lock through the fsync.
    fn queue_job(&self, job: &Job) -> Result<Durable, StateError> {
        self.queue_job_placing(job, None)
    }
    /// [`StateDb::queue_job`], and in the same transaction, when `eval_id` is given, a mark
    /// that the placement of that evaluation is on its way: a restart finds the jobs whose
    /// placement a crash cut short ([`StateDb::interrupted_placements`]).
    fn queue_job_placing(&self, job: &Job, eval_id: Option<&str>) -> Result<Durable, StateError> {
        self.queue_job_version(job, eval_id, None)
    }
    /// [`StateDb::queue_job_placing`], with the source the version was submitted as, in the
    /// same transaction (kept as long as the version is).
    fn queue_job_version(
        &self,
        job: &Job,
        eval_id: Option<&str>,
        submission: Option<&JobSubmission>,
    ) -> Result<Durable, StateError>;
    /// The source version `version` of a job was submitted as, when it was given.
    fn job_submission(
        &self,
        namespace: &str,
        id: &str,
        version: u64,
    ) -> Result<Option<JobSubmission>, StateError>;
    /// The placement of evaluation `eval_id` is stored: forget its mark (queued).
    fn queue_placing_done(&self, eval_id: &str) -> Result<Durable, StateError>;
    /// Placements marked and never done, as (evaluation id, (namespace, job id)).
    fn interrupted_placements(&self) -> Result<Vec<(String, (String, String))>, StateError>;
    /// Remove a job and its versions (with their submissions).
    fn delete_job(&self, namespace: &str, id: &str) -> Result<(), StateError>;
    /// Replace the record of one kept version of a job (its stability changed).
    fn put_job_version(&self, job: &Job) -> Result<(), StateError>;
    /// The kept versions of a job, newest first.
    fn job_versions(&self, namespace: &str, id: &str) -> Result<Vec<Job>, StateError>;
    /// All jobs.
    fn jobs(&self) -> Result<Vec<Job>, StateError>;
    /// Store an allocation (its task states are stored separately and ignored here).
    fn put_alloc(&self, alloc: &Allocation) -> Result<(), StateError>;
    /// Store newly placed allocations with their task states, in one transaction: one
    /// durable write for a registration's thousands of allocations.
    fn put_placed(&self, allocs: &[Allocation]) -> Result<(), StateError> {
        self.queue_placed(allocs)?.wait()
    }
    /// [`StateDb::put_placed`] queued, not waited for (see [`StateDb::queue_job`]).
    fn queue_placed(&self, allocs: &[Allocation]) -> Result<Durable, StateError>;
    /// Remove an allocation with its task and local states, in one transaction.
    fn delete_alloc(&self, id: &str) -> Result<(), StateError>;
    /// Remove an allocation's local states (its tasks' handles), keeping its record.
    fn delete_local_states(&self, alloc_id: &str) -> Result<(), StateError>;
    /// All allocations, with their task states filled in.
    fn allocs(&self) -> Result<Vec<Allocation>, StateError>;
    /// Store a task's state.
    fn put_task_state(
        &self,
        alloc_id: &str,
        task: &str,
        state: &TaskState,
    ) -> Result<(), StateError>;
    /// A task's state and, when given, its allocation's record, in one transaction, queued
    /// (see [`StateDb::queue_job`]): an allocation's runner queues its changes in order
    /// under the allocation's lock and waits for them after letting it go.
    fn queue_task_state(
        &self,
        alloc_id: &str,
        task: &str,
        state: &TaskState,
        alloc: Option<&Allocation>,
    ) -> Result<Durable, StateError>;
    /// [`StateDb::put_alloc`], queued (see [`StateDb::queue_job`]).
    fn queue_alloc(&self, alloc: &Allocation) -> Result<Durable, StateError>;
    /// Task states of an allocation.
    fn task_states(&self, alloc_id: &str) -> Result<BTreeMap<String, TaskState>, StateError>;
    /// Store a task's local state.
    fn put_local_state(
        &self,
        alloc_id: &str,
        task: &str,
        state: &LocalTaskState,
    ) -> Result<(), StateError>;
    /// A task's local state.
    fn local_state(&self, alloc_id: &str, task: &str)
    -> Result<Option<LocalTaskState>, StateError>;
    /// Store the node's identity (id, name, secret).
    fn put_node_identity(&self, identity: &BTreeMap<String, String>) -> Result<(), StateError>;
    /// The node's identity, if one was stored.
    fn node_identity(&self) -> Result<Option<BTreeMap<String, String>>, StateError>;
    /// Store what a plugin manager knows of one plugin (`manager` is `driver` or
    /// `device`), as Nomad's PutDriverPluginState / PutDevicePluginState.
    fn put_plugin_state(
        &self,
        manager: &str,
        name: &str,
        state: &serde_json::Value,
    ) -> Result<(), StateError>;
    /// Forget a plugin's stored state.
    fn delete_plugin_state(&self, manager: &str, name: &str) -> Result<(), StateError>;
    /// Every plugin state a manager stored, by plugin name.
    fn plugin_states(
        &self,
        manager: &str,
    ) -> Result<BTreeMap<String, serde_json::Value>, StateError>;
    /// Store (or replace) a variable.
    fn put_variable(&self, var: &Variable) -> Result<(), StateError>;
    /// Remove a variable; removing one that does not exist is not an error.
    fn delete_variable(&self, namespace: &str, path: &str) -> Result<(), StateError>;
    /// Every variable.
    fn variables(&self) -> Result<Vec<Variable>, StateError>;

    fn put_deployment(&self, d: &crate::structs::Deployment) -> Result<(), StateError>;

    fn delete_deployment(&self, id: &str) -> Result<(), StateError>;

    fn deployments(&self) -> Result<Vec<crate::structs::Deployment>, StateError>;
    /// Store (or replace) a namespace.
    fn put_namespace(&self, ns: &crate::structs::Namespace) -> Result<(), StateError>;
    /// Remove a namespace; removing one that does not exist is not an error.
    fn delete_namespace(&self, name: &str) -> Result<(), StateError>;
    /// Every stored namespace.
    fn namespaces(&self) -> Result<Vec<crate::structs::Namespace>, StateError>;
    /// Store (or replace) service registrations and remove others, in one write.
    fn write_services(
        &self,
        put: &[crate::structs::ServiceRegistration],
        delete: &[String],
    ) -> Result<(), StateError>;
    /// Every stored service registration.
    fn services(&self) -> Result<Vec<crate::structs::ServiceRegistration>, StateError>;
    /// The write path's counters (writes asked, commits, writes de-duplicated away).
    fn commit_stats(&self) -> &CommitStats;
    /// Why writes are refused now (the I/O error that stopped them), or `None` while the
    /// state DB writes. Reads go on either way.
    fn unwritable(&self) -> Option<String>;
    /// Returns once every write queued before the call is durable (or has failed): what an
    /// agent that is asked to stop waits for.
    fn flush(&self) -> Result<(), StateError>;
}

/// Table names.
pub mod tables {
    pub const META: &str = "meta";
    pub const JOBS: &str = "jobs";
    pub const ALLOCS: &str = "allocs";
    pub const TASK_STATE: &str = "task_state";
    pub const LOCAL_STATE: &str = "local_state";
    pub const NODE: &str = "node";
    pub const PROCESSES: &str = "processes";
    pub const JOB_VERSIONS: &str = "job_versions";
    pub const VARIABLES: &str = "variables";
    /// The jobs allocation rows name, one row per job version (schema 5).
    pub const ALLOC_JOBS: &str = "alloc_jobs";
    /// A job version's source as submitted, keyed as the version (schema 6).
    pub const JOB_SUBMISSIONS: &str = "job_submissions";
    /// Deployments, keyed by id (schema 7).
    pub const DEPLOYMENTS: &str = "deployments";
    /// Namespaces, keyed by name (schema 8).
    pub const NAMESPACES: &str = "namespaces";
    /// Service registrations, keyed by id (schema 9).
    pub const SERVICES: &str = "services";
    pub const ALL: &[&str] = &[
        META,
        JOBS,
        ALLOCS,
        TASK_STATE,
        LOCAL_STATE,
        NODE,
        PROCESSES,
        JOB_VERSIONS,
        VARIABLES,
        ALLOC_JOBS,
        JOB_SUBMISSIONS,
        DEPLOYMENTS,
        NAMESPACES,
        SERVICES,
    ];
}

/// One write in a transaction.
#[derive(Debug, Clone)]
pub enum Op {
    /// Insert or replace.
    Put(&'static str, String, Vec<u8>),
    /// Delete one key.
    Delete(&'static str, String),
    /// Delete every key starting with the prefix.
    DeletePrefix(&'static str, String),
}

/// An ordered key-value store with atomic multi-op transactions.
pub trait Backend: Send + Sync {
    /// Apply `ops` atomically and durably.
    fn write(&self, ops: Vec<Op>) -> Result<(), StateError>;
    /// Read one key.
    fn get(&self, table: &'static str, key: &str) -> Result<Option<Vec<u8>>, StateError>;
    /// All `(key, value)` whose key starts with `prefix`, in key order.
    fn scan(&self, table: &'static str, prefix: &str)
    -> Result<Vec<(String, Vec<u8>)>, StateError>;
    /// Close and open the storage again after an I/O error ([`StateError::Io`]): redb
    /// refuses every operation once one failed, until the file is reopened. Does nothing
    /// when no I/O error was seen since the last open. Called by the committer thread only,
    /// so never beside a write; reads wait for it.
    fn reopen(&self) -> Result<(), StateError> {
        Ok(())
    }
}

/// A plugin manager's stored states, decoded as `T`. What cannot be read or decoded is
/// logged and left out: a manager then starts as if it had never seen that plugin.
pub fn load_plugin_states<T: DeserializeOwned>(
    db: &dyn StateDb,
    manager: &str,
) -> BTreeMap<String, T> {
    let stored = match db.plugin_states(manager) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(manager, error = %e, "reading stored plugin state failed");
            return BTreeMap::new();
        }
    };
    stored
        .into_iter()
        .filter_map(|(name, v)| match serde_json::from_value(v) {
            Ok(t) => Some((name, t)),
            Err(e) => {
                tracing::warn!(manager, plugin = %name, error = %e, "ignoring undecodable stored plugin state");
                None
            }
        })
        .collect()
}

/// The state DB as the process table's store.
pub struct DbProcessStore(pub std::sync::Arc<dyn StateDb>);

impl crate::executor::processes::ProcessStore for DbProcessStore {
    fn put(&self, r: &ProcessRecord) -> Result<(), crate::executor::processes::ProcessStoreError> {
        self.0
            .put_process(r)
            .map_err(|e| crate::executor::processes::ProcessStoreError(e.to_string()))
    }

    fn delete(&self, id: u64) -> Result<(), crate::executor::processes::ProcessStoreError> {
        self.0
            .delete_process(id)
            .map_err(|e| crate::executor::processes::ProcessStoreError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_states_are_kept_per_manager_beside_the_node_identity() {
        let db = MemState::new();
        db.put_node_identity(&[("id".to_string(), "n1".to_string())].into())
            .unwrap();
        db.put_plugin_state("driver", "mock", &serde_json::json!({"Healthy": true}))
            .unwrap();
        db.put_plugin_state("driver", "raw_exec", &serde_json::json!({"Healthy": false}))
            .unwrap();
        db.put_plugin_state("device", "mock-device", &serde_json::json!({"Groups": []}))
            .unwrap();
        let drivers = db.plugin_states("driver").unwrap();
        assert_eq!(drivers.keys().collect::<Vec<_>>(), ["mock", "raw_exec"]);
        assert_eq!(drivers["raw_exec"]["Healthy"], false);
        assert_eq!(db.plugin_states("device").unwrap().len(), 1);
        db.delete_plugin_state("driver", "mock").unwrap();
        assert_eq!(db.plugin_states("driver").unwrap().len(), 1);
        assert_eq!(db.node_identity().unwrap().unwrap()["id"], "n1");
    }
}
