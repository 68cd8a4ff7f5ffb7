//! The state DB round trip, for the redb file and the in-memory implementation alike.

use std::collections::BTreeMap;

use paddock::jobspec::parse_job_json;
use paddock::state::{
    HookState, LocalTaskState, MemState, RedbState, StateDb, StateError, StoredHandle,
};
use paddock::structs::{
    Allocation, ClientStatus, DesiredStatus, TaskEvent, TaskEventType, TaskRunState, TaskState,
};

fn sample_alloc(id: &str) -> Allocation {
    let job = parse_job_json(br#"{"ID": "j1", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]}"#).unwrap();
    Allocation {
        id: id.into(),
        namespace: "default".into(),
        eval_id: "e".into(),
        name: "j1.g[2]".into(),
        node_id: "n".into(),
        node_name: "n".into(),
        job_id: "j1".into(),
        job: std::sync::Arc::new(job),
        task_group: "g".into(),
        index: 2,
        desired_status: DesiredStatus::Run,
        desired_description: String::new(),
        client_status: ClientStatus::Running,
        client_description: String::new(),
        task_states: BTreeMap::new(),
        allocated_resources: Default::default(),
        resources: Default::default(),
        task_resources: BTreeMap::new(),
        metrics: Default::default(),
        create_index: 5,
        modify_index: 6,
        create_time: 1,
        modify_time: 2,
        lineage: Default::default(),
    }
}

fn round_trip(db: &dyn StateDb) {
    let a = sample_alloc("a1");
    let b = sample_alloc("a10");
    db.put_job(&a.job).unwrap();
    db.put_alloc(&a).unwrap();
    db.put_alloc(&b).unwrap();
    let mut st = TaskState {
        state: TaskRunState::Running,
        restarts: 2,
        ..Default::default()
    };
    st.push_event(TaskEvent::new(
        TaskEventType::Started,
        "Task started by client",
    ));
    db.put_task_state("a1", "t", &st).unwrap();
    db.put_task_state("a10", "t", &TaskState::default())
        .unwrap();
    let local = LocalTaskState {
        handle: Some(StoredHandle {
            driver: "mock".into(),
            driver_sha256: "abc".into(),
            version: 1,
            task_id: "a1/t/12345678".into(),
            driver_state: vec![1, 2, 3],
        }),
        hooks: vec![(
            "env".into(),
            HookState {
                prestart_done: true,
                data: BTreeMap::new(),
                env: [("K".to_string(), "V".to_string())].into(),
            },
        )],
        run_complete: false,
    };
    db.put_local_state("a1", "t", &local).unwrap();
    db.put_node_identity(&[("id".to_string(), "node-1".to_string())].into())
        .unwrap();

    check(db, &a, &st, &local);

    // Deleting "a1" removes its task and local state, and nothing of "a10".
    db.delete_alloc("a1").unwrap();
    let allocs = db.allocs().unwrap();
    assert_eq!(allocs.len(), 1);
    assert_eq!(allocs[0].id, "a10");
    assert!(db.task_states("a1").unwrap().is_empty());
    assert_eq!(db.task_states("a10").unwrap().len(), 1);
    assert_eq!(db.local_state("a1", "t").unwrap(), None);
}

fn check(db: &dyn StateDb, a: &Allocation, st: &TaskState, local: &LocalTaskState) {
    assert_eq!(db.jobs().unwrap(), vec![(*a.job).clone()]);
    let allocs = db.allocs().unwrap();
    let got = allocs.iter().find(|x| x.id == "a1").unwrap();
    assert_eq!(got.index, 2);
    assert_eq!(got.job, a.job);
    assert_eq!(got.task_states.get("t"), Some(st));
    assert_eq!(db.local_state("a1", "t").unwrap().as_ref(), Some(local));
    assert_eq!(db.node_identity().unwrap().unwrap()["id"], "node-1");
}

#[test]
fn mem_state_round_trip() {
    round_trip(&MemState::new());
}

#[test]
fn redb_state_round_trip_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    {
        let db = RedbState::open(&path).unwrap();
        round_trip(&db);
        db.put_alloc(&sample_alloc("a1")).unwrap();
        db.put_task_state(
            "a1",
            "t",
            &TaskState {
                restarts: 7,
                ..Default::default()
            },
        )
        .unwrap();
    }
    let db = RedbState::open(&path).unwrap();
    let allocs = db.allocs().unwrap();
    let a1 = allocs.iter().find(|a| a.id == "a1").unwrap();
    assert_eq!(a1.task_states["t"].restarts, 7);
    assert_eq!(db.node_identity().unwrap().unwrap()["id"], "node-1");
}

#[test]
fn corrupt_state_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    {
        let db = RedbState::open(&path).unwrap();
        db.put_alloc(&sample_alloc("a1")).unwrap();
    }
    // Smash the file's header.
    let mut bytes = std::fs::read(&path).unwrap();
    for b in bytes.iter_mut().take(512) {
        *b = 0xAB;
    }
    std::fs::write(&path, &bytes).unwrap();
    let err = RedbState::open(&path)
        .err()
        .expect("a corrupt file must not open as empty");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(
        matches!(err, StateError::Corrupt { .. } | StateError::Storage(_)),
        "{err:?}"
    );
}
