//! The task runner alone: a fake [`TaskStateHandler`] in place of the alloc runner, the
//! in-memory state DB, and the real mock driver component. Also the fixture the built-in
//! hooks' own tests use.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::TaskRunner;
use super::interfaces::{Invocation, LogPaths, Plugins, TaskRunnerConfig, TaskStateHandler};
use crate::allocdir::AllocDir;
use crate::state::{MemState, StateDb};
use crate::structs::{Allocation, TaskEventType, TaskRunState, TaskState};
use crate::taskenv::{EnvBuilder, EnvRequest, NodeInfo};

/// An allocation held in memory, recording every change the runner reports.
pub(crate) struct FakeHandler {
    alloc: Mutex<Allocation>,
    /// Every state a task passed through, in order.
    pub(crate) history: Mutex<Vec<(String, TaskRunState)>>,
}

impl FakeHandler {
    pub(crate) fn new(alloc: Allocation) -> Arc<Self> {
        Arc::new(Self {
            alloc: Mutex::new(alloc),
            history: Mutex::new(Vec::new()),
        })
    }

    /// The event types of `task`, in order.
    pub(crate) fn events(&self, task: &str) -> Vec<TaskEventType> {
        self.task_state(task)
            .map(|s| s.events.iter().map(|e| e.event_type).collect())
            .unwrap_or_default()
    }
}

impl TaskStateHandler for FakeHandler {
    fn allocation(&self) -> Allocation {
        self.alloc.lock().unwrap().clone()
    }

    fn task_state(&self, task: &str) -> Option<TaskState> {
        self.alloc.lock().unwrap().task_states.get(task).cloned()
    }

    fn update_task(&self, task: &str, change: &mut dyn FnMut(&mut TaskState)) {
        let mut a = self.alloc.lock().unwrap();
        let s = a.task_states.entry(task.to_string()).or_default();
        change(s);
        let state = s.state;
        let mut h = self.history.lock().unwrap();
        if h.last() != Some(&(task.to_string(), state)) {
            h.push((task.to_string(), state));
        }
    }
}

/// One compile cache for every test in this binary.
fn cache_dir() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .to_path_buf()
}

/// The plugin managers over a runtime with the built-in mock driver (every grant).
pub(crate) async fn plugins() -> Plugins {
    let host = crate::pluginhost::PluginHost::build(crate::pluginhost::PluginHostOptions {
        cache_dir: Some(cache_dir()),
        dev: true,
        ..Default::default()
    })
    .unwrap();
    host.load_built_in(&guest_artifacts::MOCK_DRIVER)
        .await
        .unwrap();
    Plugins {
        drivers: host.drivers,
        devices: host.devices,
        hooks: host.hooks,
        secrets: host.secrets,
    }
}

/// A one-task batch allocation of job `j`, group `g`, task `t`.
pub(crate) fn allocation(task: serde_json::Value) -> Allocation {
    let job = serde_json::json!({"ID": "j", "Type": "batch", "TaskGroups": [{"Name": "g", "Tasks": [task]}]});
    let job = crate::jobspec::parse_job_json(job.to_string().as_bytes()).unwrap();
    serde_json::from_value(serde_json::json!({
        "ID": "0a1b2c3d-0000-0000-0000-000000000000", "Namespace": "default", "EvalID": "e",
        "Name": "j.g[0]", "NodeID": "n", "NodeName": "node", "JobID": "j", "Job": job,
        "TaskGroup": "g", "DesiredStatus": "run", "DesiredDescription": "",
        "ClientStatus": "pending", "ClientDescription": "", "TaskStates": {},
        "CreateIndex": 1, "ModifyIndex": 1, "CreateTime": 0, "ModifyTime": 0,
    }))
    .unwrap()
}

/// An invocation of the allocation's task `t`, as the runner builds one.
pub(crate) fn invocation(plugins: &Plugins, dir: &AllocDir, a: &Allocation) -> Invocation {
    let group = a.group().unwrap();
    let task = &group.tasks[0];
    let dirs = dir.task_dirs(&task.name);
    let env = EnvBuilder::new(EnvRequest {
        job: &a.job,
        group,
        task,
        alloc_id: &a.id,
        alloc_index: 0,
        dirs: &dirs,
        node: &NodeInfo::default(),
        ports: &[],
        cpu: None,
    });
    Invocation {
        task_id: format!("{}/{}/00000000", a.id, task.name),
        first: true,
        driver: plugins.drivers.driver(&task.driver),
        logs: LogPaths {
            stdout: dir.logs().join("t.stdout"),
            stderr: dir.logs().join("t.stderr"),
        },
        dirs,
        env,
        reservations: Vec::new(),
    }
}

struct Fixture {
    runner: Arc<TaskRunner>,
    handler: Arc<FakeHandler>,
    db: Arc<MemState>,
    kill: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn fixture(task: serde_json::Value) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let a = allocation(task);
    let alloc_dir = AllocDir::new(dir.path(), &a.id);
    alloc_dir.build().unwrap();
    let handler = FakeHandler::new(a.clone());
    let db = Arc::new(MemState::new());
    let kill = CancellationToken::new();
    let runner = TaskRunner::new(TaskRunnerConfig {
        alloc_id: a.id.clone(),
        task: a.group().unwrap().tasks[0].clone(),
        handler: handler.clone(),
        db: db.clone(),
        alloc_dir,
        node: Arc::default(),
        plugins: plugins().await,
        kill: kill.clone(),
    });
    Fixture {
        runner,
        handler,
        db,
        kill,
        _dir: dir,
    }
}

/// Wait (at most 10 s) until task `t` runs.
async fn until_running(h: &FakeHandler) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while h.task_state("t").map(|s| s.state) != Some(TaskRunState::Running) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never ran: {:?}",
            h.task_state("t")
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn mock_task(config: serde_json::Value, attempts: u32) -> serde_json::Value {
    serde_json::json!({
        "Name": "t", "Driver": "mock", "Config": config,
        "RestartPolicy": {"Attempts": attempts, "Interval": 60_000_000_000u64, "Delay": 1_000_000, "Mode": "fail"},
    })
}

#[tokio::test]
async fn a_task_runs_to_its_exit_and_its_handle_is_stored_only_while_it_runs() {
    let f = fixture(mock_task(serde_json::json!({"run_for": "300ms"}), 0)).await;
    let run = tokio::spawn(f.runner.clone().run());
    until_running(&f.handler).await;
    let local = f.db.local_state(&f.handler.allocation().id, "t").unwrap();
    assert!(
        local.and_then(|l| l.handle).is_some(),
        "the handle is stored while the task runs"
    );
    run.await.unwrap();
    assert_eq!(
        f.handler.events("t"),
        [
            TaskEventType::TaskSetup,
            TaskEventType::Started,
            TaskEventType::Terminated
        ]
    );
    let s = f.handler.task_state("t").unwrap();
    assert_eq!((s.state, s.failed), (TaskRunState::Dead, false));
    let local = f.db.local_state(&f.handler.allocation().id, "t").unwrap();
    assert!(
        local.unwrap().handle.is_none(),
        "the handle is cleared at exit"
    );
    assert_eq!(
        *f.handler.history.lock().unwrap(),
        [
            ("t".to_string(), TaskRunState::Pending),
            ("t".to_string(), TaskRunState::Running),
            ("t".to_string(), TaskRunState::Dead),
        ]
    );
}

#[tokio::test]
async fn a_failing_task_is_restarted_by_its_policy_then_fails() {
    let f = fixture(mock_task(
        serde_json::json!({"run_for": "1ms", "exit_code": 3}),
        1,
    ))
    .await;
    f.runner.clone().run().await;
    assert_eq!(
        f.handler.events("t"),
        [
            TaskEventType::TaskSetup,
            TaskEventType::Started,
            TaskEventType::Terminated,
            TaskEventType::Restarting,
            TaskEventType::Started,
            TaskEventType::Terminated,
            TaskEventType::NotRestarting,
        ]
    );
    let s = f.handler.task_state("t").unwrap();
    assert_eq!(
        (s.state, s.failed, s.restarts),
        (TaskRunState::Dead, true, 1)
    );
}

#[tokio::test]
async fn a_missing_driver_fails_the_task_without_setting_anything_up() {
    let f = fixture(serde_json::json!({"Name": "t", "Driver": "nope", "RestartPolicy": {"Attempts": 3, "Interval": 60_000_000_000u64, "Delay": 1_000_000, "Mode": "fail"}})).await;
    f.runner.clone().run().await;
    let events = f.handler.events("t");
    assert_eq!(
        events,
        [TaskEventType::DriverFailure, TaskEventType::NotRestarting],
        "no retries: a missing driver will not appear"
    );
    let s = f.handler.task_state("t").unwrap();
    assert!(s.events[0].driver_error.contains("\"nope\""), "{s:?}");
    assert!(s.failed);
}

#[tokio::test]
async fn a_task_killed_before_it_starts_never_reaches_its_driver() {
    let f = fixture(mock_task(serde_json::json!({"run_for": "1h"}), 0)).await;
    f.kill.cancel();
    f.runner.clone().run().await;
    assert_eq!(f.handler.events("t"), [TaskEventType::Killed]);
    assert_eq!(f.runner.drivers.event_handlers(), 0);
}

#[tokio::test]
async fn restart_and_signal_are_refused_unless_the_task_runs() {
    let f = fixture(mock_task(serde_json::json!({"run_for": "1h"}), 0)).await;
    assert!(matches!(
        f.runner.restart("because"),
        Err(super::TaskActionError::NotRunning(t)) if t == "t"
    ));
    assert!(matches!(
        f.runner.signal("SIGHUP").await,
        Err(super::TaskActionError::NotRunning(_))
    ));
}

/// A crash after the handle was stored but before the `running` state was: the task runs,
/// so the restored runner reattaches and records the start the crash cut off.
#[tokio::test]
async fn a_reattached_task_whose_start_was_not_recorded_is_marked_running() {
    let f = fixture(mock_task(serde_json::json!({"run_for": "1h"}), 0)).await;
    let first = tokio::spawn(f.runner.clone().run());
    until_running(&f.handler).await;
    // What the state DB held at the crash: the handle, and the task still pending.
    let mut a = f.handler.allocation();
    let s = a.task_states.get_mut("t").unwrap();
    s.state = TaskRunState::Pending;
    s.started_at = 0;
    s.events.retain(|e| e.event_type != TaskEventType::Started);
    let handler = FakeHandler::new(a.clone());
    let kill = CancellationToken::new();
    let alloc_dir = AllocDir::new(f._dir.path(), &a.id);
    let restored = TaskRunner::new(TaskRunnerConfig {
        alloc_id: a.id.clone(),
        task: a.group().unwrap().tasks[0].clone(),
        handler: handler.clone(),
        db: f.db.clone(),
        alloc_dir,
        node: Arc::default(),
        plugins: plugins().await,
        kill: kill.clone(),
    });
    let second = tokio::spawn(restored.clone().run());
    until_running(&handler).await;
    let s = handler.task_state("t").unwrap();
    let started: Vec<_> = s
        .events
        .iter()
        .filter(|e| e.event_type == TaskEventType::Started)
        .collect();
    assert_eq!(started.len(), 1, "{s:?}");
    assert_eq!(started[0].details["recorded_at_reattach"], "true");
    assert!(s.started_at > 0);
    assert_eq!(s.restarts, 0);
    kill.cancel();
    f.kill.cancel();
    second.await.unwrap();
    first.await.unwrap();
}
