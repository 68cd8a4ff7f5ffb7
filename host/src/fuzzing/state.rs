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
    let dir = tempfile::tempdir().expect("a temporary dir");
    let path = dir.path().join("state.redb");
    std::fs::write(&path, data).expect("writing the state file");
    if let Ok(db) = RedbState::open_with_cache(&path, 1 << 20) {
        read_all(&db);
    }
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
