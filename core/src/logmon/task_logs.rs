//! The task log files drivers write through the runtime's `task-logs` interface: the task
//! runner registers a task's log paths before `start` and removes them when the run ends;
//! a driver can only write to the tasks registered to it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::RotatingFile;
use crate::runtime::host_api::task_logs::TaskLogHost;
use crate::runtime::types::{HostError, LogConfig, LogStream};
use crate::safefs::Beneath;

/// Where one task's logs go, opened on first write (beneath the allocation dir, never
/// through a link).
struct Logs {
    owner: String,
    alloc_root: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
    max_files: u32,
    max_bytes: u64,
    open: [Option<RotatingFile>; 2],
}

/// Task logs by task invocation id.
#[derive(Default)]
pub struct TaskLogs {
    tasks: Mutex<HashMap<String, Arc<Mutex<Logs>>>>,
}

impl TaskLogs {
    /// Let driver `owner` write the logs of task `task_id`.
    pub fn register(
        &self,
        task_id: &str,
        owner: &str,
        alloc_root: PathBuf,
        (stdout, stderr): (PathBuf, PathBuf),
        logs: &LogConfig,
    ) {
        let entry = Logs {
            owner: owner.to_string(),
            alloc_root,
            stdout,
            stderr,
            max_files: logs.max_files,
            max_bytes: logs.max_bytes(),
            open: [None, None],
        };
        self.tasks
            .lock()
            .unwrap()
            .insert(task_id.to_string(), Arc::new(Mutex::new(entry)));
    }

    /// The task's run is over.
    pub fn unregister(&self, task_id: &str) {
        self.tasks.lock().unwrap().remove(task_id);
    }
}

impl TaskLogHost for TaskLogs {
    fn append(
        &self,
        caller: &str,
        task_id: &str,
        output: LogStream,
        data: &[u8],
    ) -> Result<(), HostError> {
        let entry = self.tasks.lock().unwrap().get(task_id).cloned();
        let Some(entry) = entry else {
            return Err(HostError::NotFound(format!("no running task {task_id:?}")));
        };
        let mut logs = entry.lock().unwrap();
        if logs.owner != caller {
            return Err(HostError::Denied(format!(
                "task {task_id:?} was not started by component {caller:?}"
            )));
        }
        let (slot, path) = match output {
            LogStream::Stdout => (0, logs.stdout.clone()),
            LogStream::Stderr => (1, logs.stderr.clone()),
        };
        if logs.open[slot].is_none() {
            let f = Beneath::open(&logs.alloc_root)
                .and_then(|root| {
                    RotatingFile::open_beneath(&root, &path, logs.max_files, logs.max_bytes)
                })
                .map_err(|e| HostError::Failed(format!("opening {}: {e}", path.display())))?;
            logs.open[slot] = Some(f);
        }
        let file = logs.open[slot].as_mut().expect("opened above");
        file.write_all(data)
            .map_err(|e| HostError::Failed(format!("writing {}: {e}", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_writes_and_only_while_registered() {
        let dir = tempfile::tempdir().unwrap();
        let logs = TaskLogs::default();
        let cfg = LogConfig {
            max_files: 2,
            max_file_size_mb: 1,
        };
        logs.register(
            "a/t/1",
            "mock",
            dir.path().to_path_buf(),
            (dir.path().join("t.stdout"), dir.path().join("t.stderr")),
            &cfg,
        );
        logs.append("mock", "a/t/1", LogStream::Stdout, b"hi\n")
            .unwrap();
        logs.append("mock", "a/t/1", LogStream::Stderr, b"oops\n")
            .unwrap();
        assert!(matches!(
            logs.append("other", "a/t/1", LogStream::Stdout, b"x"),
            Err(HostError::Denied(_))
        ));
        logs.unregister("a/t/1");
        assert!(matches!(
            logs.append("mock", "a/t/1", LogStream::Stdout, b"x"),
            Err(HostError::NotFound(_))
        ));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("t.stdout.0")).unwrap(),
            "hi\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("t.stderr.0")).unwrap(),
            "oops\n"
        );
    }
}
