//! The write path: one committer thread per state DB that turns concurrent writes into
//! shared transactions (group commit) and drops writes that change nothing (de-duplication).
//!
//! - **Group commit.** Every `write` is queued and its caller blocks until the transaction
//!   holding it has committed (with redb, one fsync): a write is acknowledged only once it
//!   is durable. While one commit is in flight, the writes that arrive meanwhile are
//!   gathered into the next one, so 200 task runners updating their state share commits
//!   instead of paying an fsync each.
//! - **De-duplication.** The committer remembers the last *committed* value of every key
//!   it wrote, as its SHA-256 (32 bytes, not the value: a 10,000-task agent's values would
//!   be tens of MiB of its memory). A put of the same bytes, or a delete of a key known to be absent, is dropped,
//!   and a write left with nothing to do skips the transaction entirely, not only the
//!   stores (Nomad's boltdd still opened and committed one). The memory is updated only
//!   after the commit succeeded: a failed commit leaves it as it was, so a value that never
//!   reached the disk is never taken for written (Nomad's cache could go stale there).
//! - **Isolation of failures.** When a shared transaction fails, each write in it is tried
//!   again in a transaction of its own, so one bad write fails only its caller.
//! - **Outages.** When the disk fails a commit (full, failing fsync), it and every write
//!   queued after it fail, new writes are refused at once, and the file is reopened and
//!   retried with backoff ([`super::recover`]). The de-duplication memory is forgotten:
//!   a commit that reported an error may still have reached the file.
//!
//! What a power loss can lose: nothing that was acknowledged. A write whose caller has not
//! returned yet may or may not be on disk.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use super::recover::{Health, Outage, op_bytes};
use super::{Backend, Op, StateError};

/// Counters of the write path.
#[derive(Debug, Default)]
pub struct CommitStats {
    /// Writes asked for.
    pub writes: AtomicU64,
    /// Transactions committed.
    pub commits: AtomicU64,
    /// Writes that had nothing left to do after de-duplication.
    pub skipped: AtomicU64,
    /// Writes that failed: transactions that failed, and writes refused while the state
    /// DB cannot write.
    pub failures: AtomicU64,
}

/// How the committer works (both on by default; off for comparisons).
#[derive(Debug, Clone, Copy)]
pub struct CommitOptions {
    /// Drop writes that change nothing.
    pub dedup: bool,
    /// Share transactions between concurrent writes.
    pub group: bool,
}

impl Default for CommitOptions {
    fn default() -> Self {
        Self {
            dedup: true,
            group: true,
        }
    }
}

struct Request {
    ops: Vec<Op>,
    /// The ops as asked for, to clear their in-flight marks when done.
    asked: Vec<Op>,
    done: mpsc::SyncSender<Result<(), StateError>>,
}

/// Most writes gathered into one transaction.
const MAX_BATCH: usize = 1024;

/// Forget the de-duplication memory when it holds more keys than this.
const MAX_REMEMBERED: usize = 200_000;

type Key = (&'static str, String);

/// What the callers and the committer thread share: the committed values, and which keys
/// have writes queued or in flight (a write of the committed value is a no-op only when no
/// other write to its key is still on its way).
#[derive(Default)]
struct Shared {
    memory: Memory,
    in_flight: HashMap<Key, usize>,
    prefixes_in_flight: usize,
}

impl Shared {
    fn track(&mut self, ops: &[Op], delta: isize) {
        for op in ops {
            match op {
                Op::Put(t, k, _) | Op::Delete(t, k) => {
                    let key = (*t, k.clone());
                    let n = self.in_flight.entry(key.clone()).or_insert(0);
                    *n = n.saturating_add_signed(delta);
                    if *n == 0 {
                        self.in_flight.remove(&key);
                    }
                }
                Op::DeletePrefix(..) => {
                    self.prefixes_in_flight = self.prefixes_in_flight.saturating_add_signed(delta);
                }
            }
        }
    }

    /// Whether every op is known to change nothing, with nothing else on its way.
    fn all_noop(&self, ops: &[Op]) -> bool {
        self.prefixes_in_flight == 0
            && ops.iter().all(|op| match op {
                Op::Put(t, k, v) => {
                    let key = (*t, k.clone());
                    !self.in_flight.contains_key(&key)
                        && self
                            .memory
                            .values
                            .get(&key)
                            .is_some_and(|cur| *cur == Some(digest(v)))
                }
                Op::Delete(t, k) => {
                    let key = (*t, k.clone());
                    !self.in_flight.contains_key(&key)
                        && self.memory.values.get(&key) == Some(&None)
                }
                Op::DeletePrefix(..) => false,
            })
    }
}

/// The committer of one backend.
pub struct Committer {
    queue: Option<mpsc::Sender<Request>>,
    stats: Arc<CommitStats>,
    thread: Option<std::thread::JoinHandle<()>>,
    shared: Arc<Mutex<Shared>>,
    health: Arc<Health>,
    dedup: bool,
}

impl Drop for Committer {
    /// Finish what is queued and stop, so the backend (and its file lock) is released when
    /// the state DB is dropped.
    fn drop(&mut self) {
        self.queue.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Committer {
    /// Start the committer thread for `backend`.
    pub fn start<B: Backend + 'static>(backend: Arc<B>, options: CommitOptions) -> Self {
        let (queue, rx) = mpsc::channel::<Request>();
        let stats = Arc::new(CommitStats::default());
        let shared = Arc::new(Mutex::new(Shared::default()));
        let health = Arc::new(Health::default());
        let (s, sh, h) = (stats.clone(), shared.clone(), health.clone());
        let thread = std::thread::Builder::new()
            .name("state-commit".into())
            .spawn(move || run(backend.as_ref(), &rx, options, &s, &sh, &h))
            .expect("starting the state committer thread");
        Self {
            queue: Some(queue),
            stats,
            thread: Some(thread),
            shared,
            health,
            dedup: options.dedup,
        }
    }

    /// Why writes are refused now, or `None` while they are taken.
    pub fn unwritable(&self) -> Option<String> {
        self.health.reason()
    }

    /// Apply `ops` atomically; returns once they are durable (or known to change nothing).
    pub fn write(&self, ops: Vec<Op>) -> Result<(), StateError> {
        self.queue(ops)?.wait()
    }

    /// Queue `ops` to be applied atomically, in the order queued, and return without
    /// waiting: [`Durable::wait`] says when they are durable. Writes queued under a lock
    /// keep that lock's order and are still committed together with other writers'.
    pub fn queue(&self, ops: Vec<Op>) -> Result<Durable, StateError> {
        self.stats.writes.fetch_add(1, Ordering::Relaxed);
        // During an outage: refused at once, not queued behind a disk that is not there.
        if let Some(refused) = self.health.refusal() {
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            return Err(refused);
        }
        if self.dedup {
            let mut shared = self.shared.lock().unwrap();
            // Nothing to do and nothing on its way: no transaction, not even a hop to the
            // committer thread.
            if shared.all_noop(&ops) {
                self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                return Ok(Durable(None));
            }
            shared.track(&ops, 1);
        }
        let asked = if self.dedup { ops.clone() } else { Vec::new() };
        let (done, rx) = mpsc::sync_channel(1);
        self.queue
            .as_ref()
            .ok_or_else(stopped)?
            .send(Request { ops, asked, done })
            .map_err(|_| stopped())?;
        Ok(Durable(Some(rx)))
    }

    pub fn stats(&self) -> &CommitStats {
        &self.stats
    }

    /// Returns once every request queued before it has been answered: an empty request
    /// goes through the queue in order, past the de-duplication that would answer it at once.
    pub fn flush(&self) -> Result<(), StateError> {
        let (done, rx) = mpsc::sync_channel(1);
        let request = Request {
            ops: Vec::new(),
            asked: Vec::new(),
            done,
        };
        self.queue
            .as_ref()
            .ok_or_else(stopped)?
            .send(request)
            .map_err(|_| stopped())?;
        rx.recv().map_err(|_| stopped())?
    }
}

fn stopped() -> StateError {
    StateError::Storage("the state committer has stopped".into())
}

/// A queued write: [`Durable::wait`] returns once it is durable, or its error.
#[must_use = "a queued write is acknowledged only once it is durable"]
pub struct Durable(Option<mpsc::Receiver<Result<(), StateError>>>);

impl Durable {
    /// Wait until the write is durable (at once when it changed nothing). Called from async
    /// code on a worker of the agent's runtime, it tells tokio: two task starts waiting
    /// for their commits would otherwise stall every other task and the API; it also lets
    /// many writers wait at once, which is what group commit batches.
    pub fn wait(self) -> Result<(), StateError> {
        match self.0 {
            None => Ok(()),
            Some(rx) => crate::util::wait_blocking(|| rx.recv().map_err(|_| stopped())?),
        }
    }
}

/// A batch's pending changes over the memory: `Some(known)` or `None` (forget the key).
type View = HashMap<Key, Option<Option<Digest>>>;

/// A value as the memory keeps it.
type Digest = [u8; 32];

fn digest(v: &[u8]) -> Digest {
    use sha2::Digest as _;
    sha2::Sha256::digest(v).into()
}

/// Known committed values: `Some(bytes)`, or `None` for a key known to be absent.
#[derive(Default)]
struct Memory {
    values: HashMap<Key, Option<Digest>>,
}

impl Memory {
    /// `ops` without what would change nothing, given `view` (this batch's pending changes
    /// over the committed memory). Records the kept ops' effects in `view`.
    fn filter(&self, ops: Vec<Op>, view: &mut View) -> Vec<Op> {
        let known = |view: &View, k: &Key| -> Option<Option<Digest>> {
            match view.get(k) {
                Some(v) => *v,
                None => self.values.get(k).copied(),
            }
        };
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                Op::Put(t, k, v) => {
                    let key = (t, k);
                    let d = digest(&v);
                    if known(view, &key) == Some(Some(d)) {
                        continue;
                    }
                    view.insert(key.clone(), Some(Some(d)));
                    out.push(Op::Put(t, key.1, v));
                }
                Op::Delete(t, k) => {
                    let key = (t, k);
                    if known(view, &key) == Some(None) {
                        continue;
                    }
                    view.insert(key.clone(), Some(None));
                    out.push(Op::Delete(t, key.1));
                }
                Op::DeletePrefix(t, p) => {
                    // Which keys go is not known here: forget them (unknown is safe).
                    let matches = |(tt, kk): &&Key| *tt == t && kk.starts_with(&p);
                    let gone: Vec<Key> = self
                        .values
                        .keys()
                        .filter(matches)
                        .chain(view.keys().filter(matches))
                        .cloned()
                        .collect();
                    for k in gone {
                        view.insert(k, None);
                    }
                    out.push(Op::DeletePrefix(t, p));
                }
            }
        }
        out
    }

    /// A batch committed: its view becomes the memory.
    fn apply(&mut self, view: View) {
        for (k, v) in view {
            match v {
                Some(known) => {
                    self.values.insert(k, known);
                }
                None => {
                    self.values.remove(&k);
                }
            }
        }
        if self.values.len() > MAX_REMEMBERED {
            self.values.clear();
        }
    }
}

fn run(
    backend: &dyn Backend,
    rx: &mpsc::Receiver<Request>,
    options: CommitOptions,
    stats: &CommitStats,
    shared: &Mutex<Shared>,
    health: &Health,
) {
    // Answer a request and clear its in-flight marks (after the memory is up to date, so a
    // caller never sees its key free while the memory still lags).
    let answer = |r: Request, result: Result<(), StateError>| {
        if options.dedup {
            shared.lock().unwrap().track(&r.asked, -1);
        }
        let _ = r.done.send(result);
    };
    let filter = |ops: Vec<Op>, view: &mut View| {
        if options.dedup {
            shared.lock().unwrap().memory.filter(ops, view)
        } else {
            ops
        }
    };
    let remember = |view: View| {
        if options.dedup {
            shared.lock().unwrap().memory.apply(view);
        }
    };
    // Set while the disk fails the writes (see `super::recover`).
    let mut outage: Option<Outage> = None;
    let begin_outage = |e: &StateError, bytes: usize| {
        stats.failures.fetch_add(1, Ordering::Relaxed);
        // A commit that reported an error may have reached the file all the same: what
        // the memory says was committed is no longer known.
        if options.dedup {
            shared.lock().unwrap().memory.values.clear();
        }
        Outage::begin(backend, health, e, bytes)
    };
    loop {
        let first = match &outage {
            None => match rx.recv() {
                Ok(r) => r,
                Err(_) => break,
            },
            Some(o) => match rx.recv_timeout(o.until_due()) {
                Ok(r) => r,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if outage.as_mut().is_some_and(|o| o.retry(backend, health)) {
                        outage = None;
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            },
        };
        let mut batch = vec![first];
        if options.group {
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
        }
        // During an outage, what was queued before it began (or raced its start) fails:
        // writes are applied in the order queued, so nothing that counts on a failed write
        // lands without it. A steady stream of writes does not put the retries off.
        if let Some(o) = &mut outage
            && !(o.due() && o.retry(backend, health))
        {
            for r in batch {
                if !r.ops.is_empty() {
                    stats.failures.fetch_add(1, Ordering::Relaxed);
                }
                answer(r, Err(health.refused()));
            }
            continue;
        }
        outage = None;
        let mut view = View::new();
        let mut per_request = Vec::with_capacity(batch.len());
        for r in &mut batch {
            let kept = filter(std::mem::take(&mut r.ops), &mut view);
            if kept.is_empty() {
                stats.skipped.fetch_add(1, Ordering::Relaxed);
            }
            per_request.push(kept);
        }
        let all: Vec<Op> = per_request.iter().flatten().cloned().collect();
        if all.is_empty() {
            for r in batch {
                answer(r, Ok(()));
            }
            continue;
        }
        let bytes = op_bytes(&all);
        match backend.write(all) {
            Ok(()) => {
                stats.commits.fetch_add(1, Ordering::Relaxed);
                remember(view);
                for r in batch {
                    answer(r, Ok(()));
                }
            }
            Err(e) if e.is_io() => {
                // The disk, not one write, is at fault: the whole batch fails.
                outage = Some(begin_outage(&e, bytes));
                for r in batch {
                    answer(r, Err(health.refused()));
                }
            }
            Err(e) if batch.len() == 1 => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                answer(batch.remove(0), Err(e));
            }
            Err(_) => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                // Each on its own, so that one bad write fails only its caller.
                for (r, ops) in batch.into_iter().zip(per_request) {
                    if ops.is_empty() {
                        answer(r, Ok(()));
                        continue;
                    }
                    if let Some(refused) = health.refusal() {
                        stats.failures.fetch_add(1, Ordering::Relaxed);
                        answer(r, Err(refused));
                        continue;
                    }
                    let mut view = View::new();
                    let ops = filter(ops, &mut view);
                    let bytes = op_bytes(&ops);
                    let res = backend.write(ops);
                    match &res {
                        Ok(()) => {
                            stats.commits.fetch_add(1, Ordering::Relaxed);
                            remember(view);
                        }
                        Err(e) if e.is_io() => {
                            outage = Some(begin_outage(e, bytes));
                        }
                        Err(_) => {
                            stats.failures.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    answer(r, res);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use crate::state::{
        CommitOptions, FaultyBackend, HookState, KvState, LocalTaskState, MemBackend, StateDb,
    };

    fn db() -> KvState<FaultyBackend<MemBackend>> {
        KvState::with_backend(
            FaultyBackend::new(MemBackend::default()),
            CommitOptions::default(),
        )
    }

    fn local(env: &str) -> LocalTaskState {
        let mut h = HookState::default();
        h.env.insert("A".into(), env.into());
        LocalTaskState {
            hooks: vec![("h".into(), h)],
            ..Default::default()
        }
    }

    #[test]
    fn an_identical_write_skips_the_whole_transaction() {
        let db = db();
        db.put_local_state("a", "t", &local("1")).unwrap();
        db.put_local_state("a", "t", &local("1")).unwrap();
        db.put_local_state("a", "t", &local("1")).unwrap();
        assert_eq!(db.backend().writes.load(Ordering::SeqCst), 1);
        assert_eq!(db.commit_stats().skipped.load(Ordering::SeqCst), 2);
        db.put_local_state("a", "t", &local("2")).unwrap();
        assert_eq!(db.backend().writes.load(Ordering::SeqCst), 2);
        // After a delete, the same value is a change again.
        db.delete_alloc("a").unwrap();
        db.put_local_state("a", "t", &local("2")).unwrap();
        assert_eq!(db.local_state("a", "t").unwrap(), Some(local("2")));
    }

    #[test]
    fn a_failed_commit_is_not_taken_for_written() {
        let db = db();
        db.put_local_state("a", "t", &local("1")).unwrap();
        db.backend().fail_next(1);
        assert!(db.put_local_state("a", "t", &local("2")).is_err());
        assert_eq!(db.local_state("a", "t").unwrap(), Some(local("1")));
        // The same write again must reach the disk: the failed one never did.
        db.put_local_state("a", "t", &local("2")).unwrap();
        assert_eq!(db.local_state("a", "t").unwrap(), Some(local("2")));
        // And going back to the first value is a real write too.
        db.put_local_state("a", "t", &local("1")).unwrap();
        assert_eq!(db.local_state("a", "t").unwrap(), Some(local("1")));
    }

    #[test]
    fn concurrent_writers_share_commits_and_each_is_durable_when_acknowledged() {
        let db = std::sync::Arc::new(db());
        db.backend().set_delay(Duration::from_millis(5));
        let threads: Vec<_> = (0..200)
            .map(|i| {
                let db = db.clone();
                std::thread::spawn(move || {
                    db.put_local_state(&format!("a{i}"), "t", &local(&i.to_string()))
                        .unwrap();
                    // Acknowledged: readable now.
                    assert_eq!(
                        db.local_state(&format!("a{i}"), "t").unwrap(),
                        Some(local(&i.to_string()))
                    );
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let commits = db.commit_stats().commits.load(Ordering::SeqCst);
        assert!(commits < 100, "200 writes took {commits} commits");
    }

    #[test]
    fn a_flush_returns_once_every_queued_write_is_on_the_backend() {
        let backend = std::sync::Arc::new(FaultyBackend::new(MemBackend::default()));
        backend.set_delay(Duration::from_millis(20));
        let committer = super::Committer::start(backend.clone(), CommitOptions::default());
        let key = |i: usize| format!("k{i}");
        for i in 0..5 {
            // Queued, not waited for: what task state updates do.
            let op = crate::state::Op::Put("jobs", key(i), vec![i as u8]);
            drop(committer.queue(vec![op]).unwrap());
        }
        use crate::state::Backend;
        assert!(
            backend.get("jobs", &key(4)).unwrap().is_none(),
            "written already"
        );
        committer.flush().unwrap();
        for i in 0..5 {
            assert_eq!(backend.get("jobs", &key(i)).unwrap(), Some(vec![i as u8]));
        }
        // A flush with nothing queued returns at once.
        committer.flush().unwrap();
    }
}
