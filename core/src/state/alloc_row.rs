//! How an allocation is stored: its row holds everything but its task states (rows of
//! their own) and its job. The job is stored once per version in `alloc_jobs`, shared by
//! every allocation placed from that version and counted: the row goes with the last
//! allocation that names it. Schema 4 and older embedded the whole job in every row,
//! encoded again with every change of an allocation's client status; such rows are still
//! read.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Backend, Op, StateError, tables};
use crate::jobspec::Job;
use crate::structs::{
    AllocMetric, AllocatedResources, Allocation, ClientStatus, DesiredStatus, LegacyResources,
    Lineage,
};

/// The key of the job row an allocation names: the job's key, its version and the index
/// of the registration that made it (as a restore shares one copy of a job among
/// allocations). A job id may contain `/`; keys are only ever looked up whole.
pub(super) fn job_row_key(alloc: &Allocation) -> String {
    format!(
        "{}/{}/{:020}/{:020}",
        alloc.namespace, alloc.job_id, alloc.job.state.version, alloc.job.state.job_modify_index
    )
}

/// An allocation's row, borrowed to write and owned when read. Built from an allocation by
/// an exhaustive destructuring, so a field added to [`Allocation`] does not compile until
/// it is stored here too.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct AllocRow<'a> {
    #[serde(rename = "ID")]
    id: Cow<'a, str>,
    namespace: Cow<'a, str>,
    #[serde(rename = "EvalID")]
    eval_id: Cow<'a, str>,
    name: Cow<'a, str>,
    #[serde(rename = "NodeID")]
    node_id: Cow<'a, str>,
    node_name: Cow<'a, str>,
    #[serde(rename = "JobID")]
    job_id: Cow<'a, str>,
    /// The key of the row in `alloc_jobs` holding the job (schema 5 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    job_row: Option<Cow<'a, str>>,
    /// The whole job, as schema 4 and older stored it; never written now.
    #[serde(default, skip_serializing)]
    job: Option<Job>,
    task_group: Cow<'a, str>,
    #[serde(default)]
    index: u32,
    desired_status: DesiredStatus,
    desired_description: Cow<'a, str>,
    client_status: ClientStatus,
    client_description: Cow<'a, str>,
    #[serde(default)]
    allocated_resources: Cow<'a, AllocatedResources>,
    #[serde(default)]
    resources: Cow<'a, LegacyResources>,
    #[serde(default)]
    task_resources: Cow<'a, BTreeMap<String, LegacyResources>>,
    #[serde(default)]
    metrics: Cow<'a, AllocMetric>,
    create_index: u64,
    modify_index: u64,
    create_time: u64,
    modify_time: u64,
    #[serde(default)]
    lineage: Cow<'a, Lineage>,
}

impl<'a> AllocRow<'a> {
    /// The row of `alloc`, naming its job row `job_row`.
    pub(super) fn of(alloc: &'a Allocation, job_row: &'a str) -> Self {
        let Allocation {
            id,
            namespace,
            eval_id,
            name,
            node_id,
            node_name,
            job_id,
            job: _,
            task_group,
            index,
            desired_status,
            desired_description,
            client_status,
            client_description,
            task_states: _,
            allocated_resources,
            resources,
            task_resources,
            metrics,
            create_index,
            modify_index,
            create_time,
            modify_time,
            lineage,
        } = alloc;
        AllocRow {
            id: id.into(),
            namespace: namespace.into(),
            eval_id: eval_id.into(),
            name: name.into(),
            node_id: node_id.into(),
            node_name: node_name.into(),
            job_id: job_id.into(),
            job_row: Some(job_row.into()),
            job: None,
            task_group: task_group.into(),
            index: *index,
            desired_status: *desired_status,
            desired_description: desired_description.into(),
            client_status: *client_status,
            client_description: client_description.into(),
            allocated_resources: Cow::Borrowed(allocated_resources),
            resources: Cow::Borrowed(resources),
            task_resources: Cow::Borrowed(task_resources),
            metrics: Cow::Borrowed(metrics),
            create_index: *create_index,
            modify_index: *modify_index,
            create_time: *create_time,
            modify_time: *modify_time,
            lineage: Cow::Borrowed(lineage),
        }
    }
}

impl AllocRow<'static> {
    /// The allocation this row stores (without its task states), its job found by
    /// `job_of` from the job row's key unless the row carries the job itself.
    pub(super) fn into_allocation(
        self,
        job_of: impl FnOnce(&str) -> Result<Arc<Job>, StateError>,
    ) -> Result<Allocation, StateError> {
        let job = match (self.job, &self.job_row) {
            (Some(mut job), _) => {
                job.fill_stored_defaults();
                Arc::new(job)
            }
            (None, Some(key)) => job_of(key)?,
            (None, None) => {
                return Err(StateError::Decode {
                    table: tables::ALLOCS,
                    key: self.id.into_owned(),
                    detail: "the row names no job".into(),
                });
            }
        };
        Ok(Allocation {
            id: self.id.into_owned(),
            namespace: self.namespace.into_owned(),
            eval_id: self.eval_id.into_owned(),
            name: self.name.into_owned(),
            node_id: self.node_id.into_owned(),
            node_name: self.node_name.into_owned(),
            job_id: self.job_id.into_owned(),
            job,
            task_group: self.task_group.into_owned(),
            index: self.index,
            desired_status: self.desired_status,
            desired_description: self.desired_description.into_owned(),
            client_status: self.client_status,
            client_description: self.client_description.into_owned(),
            task_states: BTreeMap::new(),
            allocated_resources: self.allocated_resources.into_owned(),
            resources: self.resources.into_owned(),
            task_resources: self.task_resources.into_owned(),
            metrics: self.metrics.into_owned(),
            create_index: self.create_index,
            modify_index: self.modify_index,
            create_time: self.create_time,
            modify_time: self.modify_time,
            lineage: self.lineage.into_owned(),
        })
    }
}

/// Which job rows are stored and how many allocation rows name each, kept in memory so a
/// write knows whether its job's row must go with it. Loaded from the file at the first
/// write. A failed commit may have lost rows this believes stored: after one, each job row
/// is written again with the next allocation that names it. Counts may then run high,
/// which only keeps a row until the next start's clean-up; they never run low.
#[derive(Default)]
pub(super) struct JobRows {
    /// Job row key → allocation rows naming it.
    refs: HashMap<String, usize>,
    /// Allocation id → the job row its row names.
    of_alloc: HashMap<String, String>,
    /// Job rows known to be stored (or on their way with a write queued earlier).
    stored: HashSet<String>,
    /// The committer's failure count when `stored` was last trusted.
    failures_seen: u64,
}

/// Only what the count needs of a row.
#[derive(Deserialize)]
struct RowRef {
    #[serde(rename = "JobRow", default)]
    job_row: Option<String>,
}

impl JobRows {
    /// From the stored rows; job rows no allocation names any more (a crash between an
    /// allocation's removal and its job row's) are deleted by the ops returned.
    pub(super) fn load<B: Backend>(
        backend: &B,
        failures: u64,
    ) -> Result<(Self, Vec<Op>), StateError> {
        let mut rows = JobRows {
            failures_seen: failures,
            ..Default::default()
        };
        for (id, v) in backend.scan(tables::ALLOCS, "")? {
            let r: RowRef = serde_json::from_slice(&v).map_err(|e| StateError::Decode {
                table: tables::ALLOCS,
                key: id.clone(),
                detail: e.to_string(),
            })?;
            if let Some(key) = r.job_row {
                *rows.refs.entry(key.clone()).or_default() += 1;
                rows.of_alloc.insert(id, key);
            }
        }
        let mut orphans = Vec::new();
        for (k, _) in backend.scan(tables::ALLOC_JOBS, "")? {
            if rows.refs.contains_key(&k) {
                rows.stored.insert(k);
            } else {
                orphans.push(Op::Delete(tables::ALLOC_JOBS, k));
            }
        }
        Ok((rows, orphans))
    }

    /// After a failed commit, no job row is trusted to be stored until written again.
    pub(super) fn distrust_after(&mut self, failures: u64) {
        if failures != self.failures_seen {
            self.failures_seen = failures;
            self.stored.clear();
        }
    }

    /// The ops that store `alloc`'s row: its job's row first unless stored, and the
    /// delete of the job row it named before when it was that row's last.
    pub(super) fn put(&mut self, alloc: &Allocation, ops: &mut Vec<Op>) {
        let key = job_row_key(alloc);
        if !self.stored.contains(&key) {
            ops.push(Op::Put(
                tables::ALLOC_JOBS,
                key.clone(),
                serde_json::to_vec(&*alloc.job).expect("jobs serialize"),
            ));
            self.stored.insert(key.clone());
        }
        if self.of_alloc.get(&alloc.id) != Some(&key) {
            *self.refs.entry(key.clone()).or_default() += 1;
            if let Some(old) = self.of_alloc.insert(alloc.id.clone(), key.clone()) {
                self.release(&old, ops);
            }
        }
        ops.push(Op::Put(
            tables::ALLOCS,
            alloc.id.clone(),
            serde_json::to_vec(&AllocRow::of(alloc, &key)).expect("allocations serialize"),
        ));
    }

    /// The allocation `id`'s row is deleted: its job row too when it was the last to name
    /// it.
    pub(super) fn delete(&mut self, id: &str, ops: &mut Vec<Op>) {
        if let Some(old) = self.of_alloc.remove(id) {
            self.release(&old, ops);
        }
    }

    fn release(&mut self, key: &str, ops: &mut Vec<Op>) {
        if let Some(n) = self.refs.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                self.refs.remove(key);
                self.stored.remove(key);
                ops.push(Op::Delete(tables::ALLOC_JOBS, key.to_string()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{
        Backend, CommitOptions, FaultyBackend, KvState, MemBackend, RedbState, StateDb, tables,
    };
    use crate::structs::{Allocation, ClientStatus, TaskState};

    /// Allocation `n` of version `version` of job `j` (one group `g`, one mock task `t`).
    fn alloc(n: u32, version: u64) -> Allocation {
        let job = serde_json::json!({"ID": "j", "Type": "service",
            "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]});
        let mut job = crate::jobspec::parse_job_json(job.to_string().as_bytes()).unwrap();
        job.state.version = version;
        job.state.job_modify_index = 10 + version;
        let mut a: Allocation = serde_json::from_value(serde_json::json!({
            "ID": format!("0a1b2c3d-0000-0000-0000-{n:012}"), "Namespace": "default",
            "EvalID": "e", "Name": format!("j.g[{n}]"), "NodeID": "n", "NodeName": "node",
            "JobID": "j", "Job": job, "TaskGroup": "g", "DesiredStatus": "run",
            "DesiredDescription": "", "ClientStatus": "pending", "ClientDescription": "",
            "TaskStates": {}, "CreateIndex": 1, "ModifyIndex": 1, "CreateTime": 0, "ModifyTime": 0,
        }))
        .unwrap();
        a.index = n;
        a.task_states.insert("t".into(), TaskState::default());
        a
    }

    fn job_rows<B: Backend>(b: &B) -> Vec<String> {
        b.scan(tables::ALLOC_JOBS, "")
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    #[test]
    fn allocations_of_one_job_version_share_one_stored_job_which_goes_with_the_last() {
        let db = KvState::with_backend(MemBackend::default(), CommitOptions::default());
        let (a0, a1) = (alloc(0, 0), alloc(1, 0));
        db.queue_placed(&[a0.clone(), a1.clone()])
            .unwrap()
            .wait()
            .unwrap();
        let mut a1_running = a1.clone();
        a1_running.client_status = ClientStatus::Running;
        db.put_alloc(&a1_running).unwrap();
        assert_eq!(
            job_rows(db.backend()),
            ["default/j/00000000000000000000/00000000000000000010"]
        );
        let row = db.backend().get(tables::ALLOCS, &a0.id).unwrap().unwrap();
        let row: serde_json::Value = serde_json::from_slice(&row).unwrap();
        assert!(row.get("Job").is_none(), "the job is not in the row: {row}");
        assert_eq!(row["Index"], 0);

        let read = db.allocs().unwrap();
        assert_eq!(read.len(), 2);
        assert!(
            Arc::ptr_eq(&read[0].job, &read[1].job),
            "one copy of the job"
        );
        assert_eq!(read[0], a0);
        assert_eq!(read[1], a1_running);
        assert_eq!(read[1].index, 1);

        // An update in place to version 1: the new version's row comes, the old one stays
        // while a0 names it.
        let mut a1_v1 = alloc(1, 1);
        a1_v1.client_status = ClientStatus::Running;
        db.put_alloc(&a1_v1).unwrap();
        assert_eq!(job_rows(db.backend()).len(), 2);
        db.delete_alloc(&a0.id).unwrap();
        assert_eq!(
            job_rows(db.backend()),
            ["default/j/00000000000000000001/00000000000000000011"]
        );
        db.delete_alloc(&a1.id).unwrap();
        assert!(job_rows(db.backend()).is_empty());
        assert!(db.allocs().unwrap().is_empty());
    }

    #[test]
    fn a_row_of_schema_4_with_its_job_inside_is_still_read() {
        let db = KvState::with_backend(MemBackend::default(), CommitOptions::default());
        let a = alloc(3, 0);
        let mut old = serde_json::to_value(&a).unwrap();
        old.as_object_mut().unwrap().remove("TaskStates");
        old["TaskStates"] = serde_json::json!({});
        old["Index"] = serde_json::json!(3);
        db.backend()
            .write(vec![super::Op::Put(
                tables::ALLOCS,
                a.id.clone(),
                serde_json::to_vec(&old).unwrap(),
            )])
            .unwrap();
        db.put_task_state(&a.id, "t", &TaskState::default())
            .unwrap();
        assert_eq!(db.allocs().unwrap(), std::slice::from_ref(&a));
        // Its next write stores it the new way.
        db.put_alloc(&a).unwrap();
        assert_eq!(job_rows(db.backend()).len(), 1);
        assert_eq!(db.allocs().unwrap(), [a]);
    }

    #[test]
    fn counts_are_rebuilt_from_the_file_and_a_job_row_nothing_names_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let (a0, a1) = (alloc(0, 0), alloc(1, 0));
        {
            let db = RedbState::open(&path).unwrap();
            db.queue_placed(&[a0.clone(), a1.clone()])
                .unwrap()
                .wait()
                .unwrap();
            // As a crash could leave it: a job row no allocation names.
            db.backend()
                .write(vec![super::Op::Put(
                    tables::ALLOC_JOBS,
                    "default/gone/00000000000000000000/00000000000000000001".into(),
                    b"{}".to_vec(),
                )])
                .unwrap();
        }
        let db = RedbState::open(&path).unwrap();
        assert_eq!(db.allocs().unwrap().len(), 2);
        db.delete_alloc(&a0.id).unwrap();
        assert_eq!(
            job_rows(db.backend()),
            ["default/j/00000000000000000000/00000000000000000010"]
        );
        db.delete_alloc(&a1.id).unwrap();
        assert!(job_rows(db.backend()).is_empty());
    }

    #[test]
    fn after_a_failed_commit_the_job_row_is_written_again_with_the_next_allocation() {
        let db = KvState::with_backend(
            FaultyBackend::new(MemBackend::default()),
            CommitOptions::default(),
        );
        db.backend().fail_next(1);
        assert!(db.put_alloc(&alloc(0, 0)).is_err());
        assert!(job_rows(db.backend()).is_empty());
        db.put_alloc(&alloc(1, 0)).unwrap();
        assert_eq!(job_rows(db.backend()).len(), 1);
        assert_eq!(
            db.allocs().unwrap().len(),
            1,
            "the failed write left nothing"
        );
    }
}
