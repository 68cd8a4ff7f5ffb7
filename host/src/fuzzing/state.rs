//! Targets over the state DB: its records' decoding (any bytes under any key of any table)
//! and a damaged state file.

use crate::state::{Backend, CommitOptions, KvState, MemBackend, Op, RedbState, StateDb};

/// The tables the state DB keeps (`state::tables::ALL`).
fn table(name: &str) -> Option<&'static str> {
    crate::state::tables::ALL
        .iter()
        .copied()
        .find(|t| *t == name)
}

/// Input: lines `TABLE<TAB>KEY<TAB>VALUE`, stored as they are. Every read the agent makes
/// at start and after gives the rows' values or a typed error, and writing an allocation
/// over them (which reads the allocation rows' job references) works or fails typed.
pub fn state_records(data: &[u8]) {
    let backend = MemBackend::default();
    let mut ops = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        let mut parts = line.splitn(3, |b| *b == b'\t');
        let (Some(t), Some(k), Some(v)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Some(t) = table(&String::from_utf8_lossy(t)) else {
            continue;
        };
        ops.push(Op::Put(
            t,
            String::from_utf8_lossy(k).into_owned(),
            v.to_vec(),
        ));
    }
    backend
        .write(ops)
        .expect("the memory backend takes any write");
    let db = KvState::with_backend(backend, CommitOptions::default());
    read_all(&db);
}

/// Input: the bytes of a state file. Opening it gives the state DB or a typed error; an
/// opened one reads as [`state_records`] does.
pub fn state_file(data: &[u8]) {
    let_redb_panics_unwind();
    let dir = tempfile::tempdir().expect("a temporary dir");
    let path = dir.path().join("state.redb");
    std::fs::write(&path, data).expect("writing the state file");
    if let Ok(db) = RedbState::open_with_cache(&path, 1 << 20) {
        read_all(&db);
    }
}

/// The state DB turns a panic inside redb into its `Corrupt` error (`redb_backend.rs`), but
/// libFuzzer's panic hook aborts at every panic, caught or not: here a panic raised in
/// redb's sources is left to unwind to that handler, and any other still aborts.
fn let_redb_panics_unwind() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_redb = info.location().is_some_and(|l| l.file().contains("/redb-"));
            if in_redb {
                tracing::debug!(%info, "redb panicked; the state DB reports the file corrupt");
            } else {
                fuzzer_hook(info);
            }
        }));
    });
}

/// Everything the agent reads, then one write that depends on what was read.
fn read_all<B: Backend + 'static>(db: &KvState<B>) {
    let _ = db.node_identity();
    for manager in ["drivers", "devices"] {
        let _ = db.plugin_states(manager);
    }
    let _ = db.variables();
    let _ = db.processes();
    let _ = db.interrupted_placements();
    if let Ok(jobs) = db.jobs() {
        for j in jobs.iter().take(8) {
            let _ = db.job_versions(&j.namespace, &j.id);
        }
    }
    let allocs = db.allocs();
    let keys = db
        .backend()
        .scan(crate::state::tables::LOCAL_STATE, "")
        .unwrap_or_default();
    for (key, _) in keys.iter().take(16) {
        let (alloc, task) = key.split_once('/').unwrap_or((key, ""));
        let _ = db.local_state(alloc, task);
        let _ = db.task_states(alloc);
    }
    if let Ok(allocs) = allocs {
        for a in allocs.iter().take(4) {
            let _ = db.task_states(&a.id);
            let _ = db.put_alloc(a);
        }
        let _ = db.flush();
    }
}
