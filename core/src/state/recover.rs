//! What the committer does when the disk fails it: refuse writes and retry.
//!
//! After a commit fails with an I/O error (a full disk, a failed fsync), every write queued
//! after it fails too, and new writes are refused at once with [`StateError::Unwritable`]
//! naming the error, so a caller never waits on a disk that is not there and nothing that
//! counts on a failed write lands without it. Meanwhile the committer thread reopens the
//! file (redb requires it; reads then work again) and tries a small write, waiting
//! [`FIRST_RETRY`] and doubling up to [`MAX_RETRY`] between tries. The first write that
//! succeeds ends the outage: writes are taken again, with no restart.
//!
//! Each change of state is logged once (the outage begins, its reason changes, it ends);
//! the retries themselves only at debug level.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Backend, Op, StateError, tables};

/// The wait before the first retry.
pub const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two retries.
pub const MAX_RETRY: Duration = Duration::from_secs(5);

/// The key of `meta` a retry writes, and deletes once that worked: a value as large as
/// the write that failed (a full disk may still take a small one in the file's free
/// pages, which would end the outage only for the next real write to fail again).
const PROBE_KEY: &str = "write_probe";

/// The largest value a retry writes.
const MAX_PROBE: usize = 8 << 20;

/// What a write puts on the disk, about: its values and keys.
pub(super) fn op_bytes(ops: &[Op]) -> usize {
    ops.iter()
        .map(|op| match op {
            Op::Put(_, k, v) => k.len() + v.len(),
            Op::Delete(_, k) | Op::DeletePrefix(_, k) => k.len(),
        })
        .sum()
}

/// Whether writes are taken: shared by the callers, who are refused at once during an
/// outage, and the committer thread, which starts and ends it.
#[derive(Default)]
pub(super) struct Health {
    refusing: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Health {
    /// Why writes are refused, when they are.
    pub(super) fn reason(&self) -> Option<String> {
        if !self.refusing.load(Ordering::Acquire) {
            return None;
        }
        self.reason.lock().unwrap().clone()
    }

    /// The error a refused write gets, when writes are refused.
    pub(super) fn refusal(&self) -> Option<StateError> {
        self.reason()
            .map(|reason| StateError::Unwritable { reason })
    }

    /// The error a write refused during an outage gets.
    pub(super) fn refused(&self) -> StateError {
        self.refusal().unwrap_or_else(|| StateError::Unwritable {
            reason: "the state DB cannot write".into(),
        })
    }

    fn refuse(&self, reason: String) {
        *self.reason.lock().unwrap() = Some(reason);
        self.refusing.store(true, Ordering::Release);
    }

    fn accept(&self) {
        self.refusing.store(false, Ordering::Release);
        *self.reason.lock().unwrap() = None;
    }
}

/// An outage: since when, and when to try again.
pub(super) struct Outage {
    since: Instant,
    tries: u32,
    wait: Duration,
    next_try: Instant,
    reason: String,
    /// The size of the write that failed.
    probe_bytes: usize,
}

impl Outage {
    /// A write of about `bytes` failed with `error`: refuse writes from now on, reopen the
    /// file so reads go on, and plan the first retry.
    pub(super) fn begin(
        backend: &dyn Backend,
        health: &Health,
        error: &StateError,
        bytes: usize,
    ) -> Self {
        let reason = error.to_string();
        tracing::error!(error = %reason, "the state DB cannot write: refusing writes until a retry succeeds (the agent retries with backoff, no restart needed)");
        health.refuse(reason.clone());
        if let Err(e) = backend.reopen() {
            tracing::debug!(error = %e, "reopening the state file failed; retrying");
        }
        let now = Instant::now();
        Self {
            since: now,
            tries: 0,
            wait: FIRST_RETRY,
            next_try: now + FIRST_RETRY,
            reason,
            probe_bytes: bytes.clamp(64, MAX_PROBE),
        }
    }

    /// Whether a retry is due.
    pub(super) fn due(&self) -> bool {
        Instant::now() >= self.next_try
    }

    /// How long until the next retry is due.
    pub(super) fn until_due(&self) -> Duration {
        self.next_try.saturating_duration_since(Instant::now())
    }

    /// Reopen the file if it needs it and try a write as large as the one that failed
    /// (deleted again at once). `true` ends the outage
    /// (writes are taken again); otherwise the next try is planned, twice as far off up to
    /// [`MAX_RETRY`].
    pub(super) fn retry(&mut self, backend: &dyn Backend, health: &Health) -> bool {
        self.tries += 1;
        let probe = vec![0u8; self.probe_bytes];
        let tried = backend
            .reopen()
            .and_then(|()| backend.write(vec![Op::Put(tables::META, PROBE_KEY.into(), probe)]))
            .and_then(|()| backend.write(vec![Op::Delete(tables::META, PROBE_KEY.into())]));
        match tried {
            Ok(()) => {
                health.accept();
                tracing::info!(
                    after_ms = self.since.elapsed().as_millis() as u64,
                    tries = self.tries,
                    "the state DB writes again: writes are taken"
                );
                true
            }
            Err(e) => {
                let reason = e.to_string();
                if reason != self.reason && !same_cause(&reason, &self.reason) {
                    tracing::warn!(error = %reason, "the state DB still cannot write, for another reason");
                    health.refuse(reason.clone());
                    self.reason = reason;
                }
                tracing::debug!(error = %e, tries = self.tries, "state DB write retry failed");
                self.wait = (self.wait * 2).min(MAX_RETRY);
                self.next_try = Instant::now() + self.wait;
                false
            }
        }
    }
}

/// Whether two errors tell the same cause: redb's refusals after an I/O error repeat the
/// first one's text with a note, which is no change worth a log line.
fn same_cause(a: &str, b: &str) -> bool {
    let core = |s: &str| s.split(" (").next().unwrap_or(s).to_string();
    core(a) == core(b)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use crate::state::{
        CommitOptions, FaultyBackend, HookState, KvState, LocalTaskState, MemBackend, StateDb,
        StateError,
    };
    use crate::structs::Allocation;

    type Db = KvState<FaultyBackend<MemBackend>>;

    fn db() -> Db {
        KvState::with_backend(
            FaultyBackend::new(MemBackend::default()),
            CommitOptions::default(),
        )
    }

    fn local(v: &str) -> LocalTaskState {
        let mut h = HookState::default();
        h.env.insert("A".into(), v.into());
        LocalTaskState {
            hooks: vec![("h".into(), h)],
            ..Default::default()
        }
    }

    /// Wait (5 s at most past the longest backoff) until the state DB takes writes again;
    /// how long that took.
    fn until_writable(db: &Db) -> Duration {
        let t = Instant::now();
        while db.unwritable().is_some() {
            assert!(
                t.elapsed() < super::MAX_RETRY + Duration::from_secs(5),
                "still refusing writes after {:?}",
                t.elapsed()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        t.elapsed()
    }

    #[test]
    fn a_failed_fsync_refuses_writes_at_once_keeps_reads_and_recovers_by_itself() {
        let db = db();
        db.put_local_state("a", "t", &local("1")).unwrap();
        db.backend().io.fail_sync_next(1);
        let e = db.put_local_state("a", "t", &local("2")).unwrap_err();
        assert!(matches!(e, StateError::Unwritable { .. }), "{e:?}");
        assert!(e.to_string().contains("fsync failed"), "{e}");
        // Reads go on (the committer reopened the backend at once); the failed value is
        // not there.
        assert_eq!(db.local_state("a", "t").unwrap(), Some(local("1")));
        let writes = db.backend().writes.load(Ordering::SeqCst);
        let recovered = until_writable(&db);
        assert!(recovered <= Duration::from_secs(1), "{recovered:?}");
        assert!(db.backend().io.reopens.load(Ordering::SeqCst) >= 1);
        // The retry was a write of its own; what was refused is not replayed.
        assert!(db.backend().writes.load(Ordering::SeqCst) > writes);
        assert_eq!(db.local_state("a", "t").unwrap(), Some(local("1")));
        // The same write now reaches the disk (the failed one is not taken for written).
        db.put_local_state("a", "t", &local("2")).unwrap();
        assert_eq!(db.local_state("a", "t").unwrap(), Some(local("2")));
        db.put_local_state("a", "t", &local("1")).unwrap();
        assert_eq!(db.local_state("a", "t").unwrap(), Some(local("1")));
    }

    #[test]
    fn a_full_disk_is_retried_with_backoff_and_writes_return_when_space_does() {
        let db = db();
        let io = &db.backend().io;
        io.set_disk_full(true);
        let e = db.put_local_state("a", "t", &local("1")).unwrap_err();
        assert!(e.to_string().contains("No space left on device"), "{e}");
        // Refused at once, without a try on the disk, and naming the reason.
        let tried = io.failed_writes.load(Ordering::SeqCst);
        let t = Instant::now();
        let e = db.put_local_state("b", "t", &local("1")).unwrap_err();
        assert!(t.elapsed() < Duration::from_millis(50));
        assert!(matches!(e, StateError::Unwritable { .. }), "{e:?}");
        assert!(e.to_string().contains("No space left on device"), "{e}");
        assert!(db.unwritable().unwrap().contains("No space left"));
        // Backoff: 100, 200, 400, 800 ms... a few tries in 1.6 s, not one per millisecond.
        std::thread::sleep(Duration::from_millis(1600));
        let retries = io.failed_writes.load(Ordering::SeqCst) - tried;
        assert!((2..=6).contains(&retries), "{retries} retries in 1.6 s");
        io.set_disk_full(false);
        let recovered = until_writable(&db);
        assert!(recovered <= super::MAX_RETRY + Duration::from_millis(500));
        db.put_local_state("b", "t", &local("2")).unwrap();
        assert_eq!(db.local_state("b", "t").unwrap(), Some(local("2")));
        assert_eq!(db.local_state("a", "t").unwrap(), None);
    }

    #[test]
    fn writes_queued_behind_a_failed_one_fail_with_it() {
        let db = db();
        db.backend().set_delay(Duration::from_millis(100));
        // In flight while the next two are queued: they share the next commit.
        let first = db
            .queue_task_state("x", "t", &Default::default(), None)
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        db.backend().io.fail_sync_next(1);
        let a = db
            .queue_task_state("a", "t", &Default::default(), None)
            .unwrap();
        let b = db
            .queue_task_state("b", "t", &Default::default(), None)
            .unwrap();
        first.wait().unwrap();
        assert!(a.wait().unwrap_err().is_io());
        assert!(b.wait().unwrap_err().is_io());
        db.backend().set_delay(Duration::ZERO);
        until_writable(&db);
        assert!(db.task_states("a").unwrap().is_empty());
        assert!(db.task_states("b").unwrap().is_empty());
        assert_eq!(db.task_states("x").unwrap().len(), 1);
    }

    /// An allocation of job version 0, `n`th of its group.
    fn alloc(n: u32) -> Allocation {
        let job = serde_json::json!({"ID": "j", "Type": "service",
            "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]});
        let job = crate::jobspec::parse_job_json(job.to_string().as_bytes()).unwrap();
        serde_json::from_value(serde_json::json!({
            "ID": format!("0a1b2c3d-0000-0000-0000-{n:012}"), "Namespace": "default",
            "EvalID": "e", "Name": format!("j.g[{n}]"), "NodeID": "n", "NodeName": "node",
            "JobID": "j", "Job": job, "TaskGroup": "g", "DesiredStatus": "run",
            "DesiredDescription": "", "ClientStatus": "pending", "ClientDescription": "",
            "TaskStates": {}, "CreateIndex": 1, "ModifyIndex": 1, "CreateTime": 0, "ModifyTime": 0,
        }))
        .unwrap()
    }

    #[test]
    fn an_allocation_stored_after_an_outage_brings_the_job_row_a_refused_one_held() {
        let db = db();
        db.backend().io.set_disk_full(true);
        // Its job's row goes with it, and is refused with it.
        assert!(db.put_alloc(&alloc(0)).unwrap_err().is_io());
        assert!(db.put_alloc(&alloc(1)).unwrap_err().is_io());
        db.backend().io.set_disk_full(false);
        until_writable(&db);
        db.put_alloc(&alloc(2)).unwrap();
        let stored = db.allocs().unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].job.id, "j");
    }
}
