//! Processes as children of this process, for a runtime without a task executor: their
//! output pumped into rotated log files, their exit published when they are reaped. They do
//! not outlive the agent.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::processes::{Proc, ProcessTable};
use crate::logmon::{self, Output, RotatingFile};
use crate::runtime::types::{Command, ExitResult, HostError};
use crate::safefs::Beneath;

impl ProcessTable {
    pub(super) async fn spawn_child(&self, owner: &str, cmd: Command) -> Result<u64, HostError> {
        let mut c = tokio::process::Command::new(&cmd.path);
        c.args(&cmd.args)
            .env_clear()
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .process_group(0)
            .kill_on_drop(false);
        // The working dir and the output files beneath the allocation dir, never through
        // a link (see `server.rs`, which does the same for the executor's processes).
        let root = Path::new(&cmd.alloc_root);
        let cwd = if cmd.cwd.is_empty() {
            None
        } else {
            let b = Beneath::open(root)
                .and_then(|b| b.dir(Path::new(&cmd.cwd)))
                .map_err(|e| HostError::Failed(format!("working dir {}: {e}", cmd.cwd)))?;
            Some(b)
        };
        if let Some(fd) = &cwd {
            use std::os::fd::AsRawFd;
            c.current_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        }
        if !cmd.user.is_empty() {
            let (uid, gid) = super::isolate::lookup_user(&cmd.user)
                .map_err(|e| HostError::Invalid(e.to_string()))?;
            c.uid(uid).gid(gid);
        }
        if !cmd.argv0.is_empty() {
            c.arg0(&cmd.argv0);
        }
        let rotate = cmd.logs.as_ref().map(|l| (l.max_files, l.max_bytes()));
        let open = |path: &str, what: &str| {
            logmon::open_output(root, path, rotate)
                .map_err(|e| HostError::Failed(format!("opening {what} log {path}: {e}")))
        };
        let (out, err) = (
            open(&cmd.stdout_path, "stdout")?,
            open(&cmd.stderr_path, "stderr")?,
        );
        let stdio = |o: Output| -> (Stdio, Option<RotatingFile>) {
            match o {
                Output::Discard => (Stdio::null(), None),
                Output::Stream(f) | Output::Plain(f) => (f.into(), None),
                Output::Rotating(log) => (Stdio::piped(), Some(log)),
            }
        };
        let ((out, out_log), (err, err_log)) = (stdio(out), stdio(err));
        c.stdout(out);
        c.stderr(err);

        let mut child = c
            .spawn()
            .map_err(|e| HostError::Failed(format!("spawning {}: {e}", cmd.path)))?;
        drop(cwd);
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
