//! The tasks this plugin process runs: Nomad's `TaskConfig` turned into Paddock's, the
//! handle blob Nomad stores (`TaskHandle.driver_state`), and one waiter per task that follows
//! the driver's non-blocking `wait` until the exit, which every `WaitTask` then reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use paddock_core::drivermanager::types::{
    ExitResult, LogConfig, TaskConfig, TaskHandle, TaskResources, WaitStatus,
};
use paddock_core::drivermanager::{Driver, DriverManager};
use paddock_core::runtime::types::TaskEnv;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::proto::drivers as pb;

/// The handle layout this plugin writes into `TaskHandle.driver_state` (JSON), so that a
/// restarted plugin can hand the component back its own handle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredHandle {
    /// The driver component that started the task.
    pub driver: String,
    /// The component's handle version.
    pub version: u32,
    /// The invocation id.
    pub task_id: String,
    /// The component's own state, base64.
    pub state: String,
}

impl StoredHandle {
    pub fn of(driver: &str, h: &TaskHandle) -> Self {
        Self {
            driver: driver.to_string(),
            version: h.version,
            task_id: h.task_id.clone(),
            state: base64::engine::general_purpose::STANDARD.encode(&h.driver_state),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a handle serializes")
    }

    /// Read Nomad's stored bytes back.
    pub fn decode(bytes: &[u8]) -> Result<(Self, TaskHandle), String> {
        let s: Self = serde_json::from_slice(bytes)
            .map_err(|e| format!("driver_state is not a Paddock task handle: {e}"))?;
        let driver_state = base64::engine::general_purpose::STANDARD
            .decode(&s.state)
            .map_err(|e| format!("driver_state.state: {e}"))?;
        let h = TaskHandle {
            version: s.version,
            task_id: s.task_id.clone(),
            driver_state,
        };
        Ok((s, h))
    }
}

/// One task: what Nomad sent, the component's latest handle, and its exit once known.
pub struct Task {
    pub config: pb::TaskConfig,
    pub handle: Mutex<TaskHandle>,
    pub exit: watch::Sender<Option<ExitResult>>,
    pub started_at: SystemTime,
    pub completed_at: Mutex<Option<SystemTime>>,
    waiter: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Wakes the waiter to ask the driver again (after a stop or a signal changed things).
    poke: tokio::sync::Notify,
}

impl Task {
    pub fn new(config: pb::TaskConfig, handle: TaskHandle) -> Arc<Self> {
        Arc::new(Self {
            config,
            handle: Mutex::new(handle),
            exit: watch::channel(None).0,
            started_at: SystemTime::now(),
            completed_at: Mutex::new(None),
            waiter: Mutex::new(None),
            poke: tokio::sync::Notify::new(),
        })
    }

    pub fn handle(&self) -> TaskHandle {
        self.handle.lock().unwrap().clone()
    }

    /// Keep the driver's new handle (from `stop` or `signal`) and have the waiter ask the
    /// driver's `wait` again at once.
    pub fn update(&self, h: TaskHandle) {
        *self.handle.lock().unwrap() = h;
        self.poke.notify_one();
    }

    pub fn exited(&self) -> Option<ExitResult> {
        self.exit.borrow().clone()
    }

    fn finish(&self, r: ExitResult) {
        *self.completed_at.lock().unwrap() = Some(SystemTime::now());
        self.exit.send_replace(Some(r));
    }

    /// Wait until the task has exited.
    pub async fn wait(&self) -> ExitResult {
        let mut rx = self.exit.subscribe();
        let r = rx.wait_for(|e| e.is_some()).await;
        match r {
            Ok(e) => e.clone().expect("waited for Some"),
            Err(_) => unreachable!("the task holds its sender"),
        }
    }

    /// Follow the driver's `wait` in the background until the exit.
    pub fn spawn_waiter(self: &Arc<Self>, driver: Driver, drivers: Arc<DriverManager>) {
        let task = self.clone();
        let join = tokio::spawn(async move {
            let mut failures = 0u32;
            loop {
                match driver.wait(task.handle()).await {
                    Ok(WaitStatus::Exited(r)) => return task.finish(r),
                    Ok(WaitStatus::Pending(w)) => {
                        failures = 0;
                        if let Some(h) = w.handle.clone() {
                            *task.handle.lock().unwrap() = h;
                        }
                        tokio::select! {
                            _ = drivers.sleep_until_wake(&w, None) => {}
                            _ = task.poke.notified() => {}
                        }
                    }
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(task_id = %task.config.id, error = %e, failures, "wait failed");
                        if failures >= WAIT_FAILURES {
                            return task.finish(ExitResult {
                                exit_code: 0,
                                signal: 0,
                                oom_killed: false,
                                err: Some(format!(
                                    "the driver's wait failed {failures} times: {e}"
                                )),
                            });
                        }
                        tokio::time::sleep(Duration::from_millis(200) * failures).await;
                    }
                }
            }
        });
        *self.waiter.lock().unwrap() = Some(join);
    }

    /// Stop following the task (it is being destroyed).
    pub fn abort_waiter(&self) {
        if let Some(j) = self.waiter.lock().unwrap().take() {
            j.abort();
        }
    }
}

/// Consecutive failed `wait` calls after which the task is reported as exited with the error.
pub const WAIT_FAILURES: u32 = 5;

/// The tasks by id.
#[derive(Default)]
pub struct Tasks {
    map: Mutex<HashMap<String, Arc<Task>>>,
}

impl Tasks {
    pub fn get(&self, id: &str) -> Option<Arc<Task>> {
        self.map.lock().unwrap().get(id).cloned()
    }

    pub fn insert(&self, task: Arc<Task>) {
        self.map
            .lock()
            .unwrap()
            .insert(task.config.id.clone(), task);
    }

    pub fn remove(&self, id: &str) -> Option<Arc<Task>> {
        self.map.lock().unwrap().remove(id)
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Paddock's task config from Nomad's, with the driver config already decoded to JSON.
/// Nomad's `alloc_dir` is the allocation's root: its tasks share `<alloc_dir>/alloc` and
/// each has `<alloc_dir>/<task>`.
pub fn task_config(t: &pb::TaskConfig, driver_config: String) -> TaskConfig {
    let sorted = |m: &HashMap<String, String>| {
        let mut v: Vec<(String, String)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        v.sort();
        v
    };
    let resources = t.resources.as_ref();
    let alloc = resources.and_then(|r| r.allocated_resources.as_ref());
    let clamp = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
    let root = std::path::Path::new(&t.alloc_dir);
    TaskConfig {
        id: t.id.clone(),
        name: t.name.clone(),
        alloc_id: t.alloc_id.clone(),
        job_id: t.job_id.clone(),
        job_name: t.job_name.clone(),
        group_name: t.task_group_name.clone(),
        namespace: t.namespace.clone(),
        node_id: t.node_id.clone(),
        node_name: t.node_name.clone(),
        env: sorted(&t.env),
        device_env: sorted(&t.device_env),
        user: t.user.clone(),
        resources: TaskResources {
            cpu_mhz: clamp(
                alloc
                    .and_then(|a| a.cpu.as_ref())
                    .map_or(0, |c| c.cpu_shares),
            ),
            memory_mb: clamp(
                alloc
                    .and_then(|a| a.memory.as_ref())
                    .map_or(0, |m| m.memory_mb),
            ),
            memory_max_mb: clamp(
                alloc
                    .and_then(|a| a.memory.as_ref())
                    .map_or(0, |m| m.memory_max_mb),
            ),
        },
        driver_config,
        alloc_dir: root.join("alloc").display().to_string(),
        task_dir: root.join(&t.name).display().to_string(),
        stdout_path: t.stdout_path.clone(),
        stderr_path: t.stderr_path.clone(),
        // Nomad's logmon rotates what it reads from the FIFOs.
        logs: LogConfig::default(),
        kill_signal: "SIGTERM".into(),
        kill_timeout_ns: 5_000_000_000,
        mounts: Vec::new(),
        devices: Vec::new(),
    }
}

/// The task's environment as the runtime's `env` interface shows it, with the node keys
/// Nomad's config carries.
pub fn task_env(t: &pb::TaskConfig) -> TaskEnv {
    let node: BTreeMap<String, String> = [
        ("node.unique.id", t.node_id.as_str()),
        ("node.unique.name", t.node_name.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    TaskEnv {
        env: t.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        node: Arc::new(node),
        secrets: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_handle_reads_back() {
        let h = TaskHandle {
            version: 3,
            task_id: "a/t/1".into(),
            driver_state: vec![0, 1, 255],
        };
        let bytes = StoredHandle::of("mock", &h).encode();
        let (s, back) = StoredHandle::decode(&bytes).unwrap();
        assert_eq!(back, h);
        assert_eq!(s.driver, "mock");
        assert!(StoredHandle::decode(b"\x81\xa1x").is_err());
    }

    #[test]
    fn nomads_dirs_become_the_alloc_and_task_dirs() {
        let t = pb::TaskConfig {
            id: "a1/web/xyz".into(),
            name: "web".into(),
            alloc_dir: "/var/nomad/alloc/a1".into(),
            env: [
                ("B".to_string(), "2".to_string()),
                ("A".to_string(), "1".to_string()),
            ]
            .into(),
            ..Default::default()
        };
        let c = task_config(&t, "{}".into());
        assert_eq!(c.alloc_dir, "/var/nomad/alloc/a1/alloc");
        assert_eq!(c.task_dir, "/var/nomad/alloc/a1/web");
        assert_eq!(c.env[0].0, "A");
    }
}
