//! Processes as children of this process, for a runtime without a task executor: their
//! output pumped into rotated log files, their exit published when they are reaped. They do
//! not outlive the agent.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::os::open_plain;
use super::processes::{Proc, ProcessTable};
use crate::logmon::RotatingFile;
use crate::runtime::types::{Command, ExitResult, HostError};

impl ProcessTable {
    pub(super) async fn spawn_child(&self, owner: &str, cmd: Command) -> Result<u64, HostError> {
        let mut c = tokio::process::Command::new(&cmd.path);
        c.args(&cmd.args)
            .env_clear()
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .process_group(0)
            .kill_on_drop(false);
        if !cmd.cwd.is_empty() {
            c.current_dir(&cmd.cwd);
        }
        if !cmd.argv0.is_empty() {
            c.arg0(&cmd.argv0);
        }
        let rotate = |path: &str, what: &str| -> Result<Option<RotatingFile>, HostError> {
            match (
                &cmd.logs,
                path.is_empty() || crate::logmon::is_stream(Path::new(path)),
            ) {
                (Some(l), false) => RotatingFile::open(Path::new(path), l.max_files, l.max_bytes())
                    .map(Some)
                    .map_err(|e| HostError::Failed(format!("opening {what} log {path}: {e}"))),
                _ => Ok(None),
            }
        };
        let (out_log, err_log) = (
            rotate(&cmd.stdout_path, "stdout")?,
            rotate(&cmd.stderr_path, "stderr")?,
        );
        c.stdout(if out_log.is_some() {
            Stdio::piped()
        } else {
            open_plain(&cmd.stdout_path, "stdout")?
        });
        c.stderr(if err_log.is_some() {
            Stdio::piped()
        } else {
            open_plain(&cmd.stderr_path, "stderr")?
        });

        let mut child = c
            .spawn()
            .map_err(|e| HostError::Failed(format!("spawning {}: {e}", cmd.path)))?;
        let pid = child.id().unwrap_or_default();
        let mut pumps = Vec::new();
        if let (Some(log), Some(pipe)) = (out_log, child.stdout.take()) {
            pumps.push(tokio::spawn(crate::logmon::pump(pipe, log)));
        }
        if let (Some(log), Some(pipe)) = (err_log, child.stderr.take()) {
            pumps.push(tokio::spawn(crate::logmon::pump(pipe, log)));
        }
        let id = self.new_id();
        let proc = Proc::new(pid, owner);
        let tx = proc.exit_tx.clone();
        self.procs.lock().unwrap().insert(id, proc);
        tokio::spawn(async move {
            let result = match child.wait().await {
                Ok(status) => ExitResult {
                    exit_code: status.code().unwrap_or(0),
                    signal: status.signal().unwrap_or(0),
                    oom_killed: false,
                    err: None,
                },
                Err(e) => ExitResult {
                    exit_code: -1,
                    signal: 0,
                    oom_killed: false,
                    err: Some(e.to_string()),
                },
            };
            // Let the logs drain before the exit is published, but never wait on a
            // grandchild that keeps the pipe open.
            for p in pumps {
                let _ = tokio::time::timeout(Duration::from_secs(2), p).await;
            }
            let _ = tx.send(Some(result));
        });
        tracing::debug!(component = owner, id, pid, path = %cmd.path, "process spawned");
        Ok(id)
    }
}
