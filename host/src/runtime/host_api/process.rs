//! `process`: host processes for drivers, because WASI cannot spawn or wait.
//!
//! Each process gets a host id; a tokio task waits on it and publishes its exit through a
//! `watch` channel, which is how the host (not a guest blocked in a store) waits for tasks.
//! Processes run in their own process group, so a signal to the agent does not reach them.
//! Every call checks the component's `process` grant; spawn also checks the command path.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::logmon::RotatingFile;
use crate::runtime::bindings::v0_1_0::process::{Command, Host, ProcessStatus as Status};
use crate::runtime::bindings::v0_1_0::types::{ExitResult, HostError, ResourceUsage};
use crate::runtime::store::HostState;
use crate::util::signal_number;

struct Proc {
    pid: u32,
    owner: String,
    exit: watch::Receiver<Option<ExitResult>>,
}

/// Processes started through `process`, by host id.
#[derive(Default)]
pub struct ProcessTable {
    next: AtomicU64,
    procs: Mutex<HashMap<u64, Proc>>,
}

impl ProcessTable {
    /// A receiver that changes when process `id` exits; `None` if the id is unknown.
    pub fn exit_watch(&self, id: u64) -> Option<watch::Receiver<Option<ExitResult>>> {
        self.procs.lock().unwrap().get(&id).map(|p| p.exit.clone())
    }

    fn lookup(
        &self,
        id: u64,
        owner: &str,
    ) -> Result<(u32, watch::Receiver<Option<ExitResult>>), HostError> {
        let procs = self.procs.lock().unwrap();
        match procs.get(&id) {
            Some(p) if p.owner == owner => Ok((p.pid, p.exit.clone())),
            _ => Err(HostError::NotFound(format!("no process with id {id}"))),
        }
    }

    async fn spawn(&self, owner: &str, cmd: Command) -> Result<u64, HostError> {
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
        if !cmd.user.is_empty() {
            return Err(HostError::Invalid(format!(
                "user: running as {:?} is not supported yet",
                cmd.user
            )));
        }
        let rotate = |path: &str, what: &str| -> Result<Option<RotatingFile>, HostError> {
            match (&cmd.logs, path.is_empty()) {
                (Some(l), false) => RotatingFile::open(
                    Path::new(path),
                    l.max_files,
                    u64::from(l.max_file_size_mb.max(1)) << 20,
                )
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
        let (tx, rx) = watch::channel(None);
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
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.procs.lock().unwrap().insert(
            id,
            Proc {
                pid,
                owner: owner.to_string(),
                exit: rx,
            },
        );
        tracing::debug!(component = owner, id, pid, path = %cmd.path, "process spawned");
        Ok(id)
    }
}

/// The absolute path a command runs: a bare name is looked up in the command's `PATH`
/// (else the agent's), a relative path is taken from the working directory. The grant is
/// checked against this path, so `sh` cannot slip past a `/usr/bin/*` allowlist.
fn resolve_program(path: &str, env: &[(String, String)], cwd: &str) -> Result<String, HostError> {
    use std::os::unix::fs::PermissionsExt;
    if path.is_empty() {
        return Err(HostError::Invalid("command: must not be empty".into()));
    }
    if path.contains('/') {
        let p = Path::new(path);
        let full = if p.is_absolute() || cwd.is_empty() {
            p.to_path_buf()
        } else {
            Path::new(cwd).join(p)
        };
        return Ok(full.display().to_string());
    }
    let search = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in search.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(path);
        if let Ok(m) = std::fs::metadata(&candidate)
            && m.is_file()
            && m.permissions().mode() & 0o111 != 0
        {
            return Ok(candidate.display().to_string());
        }
    }
    Err(HostError::Invalid(format!(
        "command: {path:?} not found in PATH ({search})"
    )))
}

fn open_plain(path: &str, what: &str) -> Result<Stdio, HostError> {
    if path.is_empty() {
        return Ok(Stdio::null());
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Into::into)
        .map_err(|e| HostError::Failed(format!("opening {what} file {path}: {e}")))
}

fn send_signal(pid: u32, signal: &str) -> Result<(), HostError> {
    let n = signal_number(signal)
        .ok_or_else(|| HostError::Invalid(format!("signal: unknown signal {signal:?}")))?;
    let sig = rustix::process::Signal::from_named_raw(n)
        .ok_or_else(|| HostError::Invalid(format!("signal: {signal:?} cannot be sent")))?;
    let pid = rustix::process::Pid::from_raw(pid as i32)
        .ok_or_else(|| HostError::Invalid("process has no pid".into()))?;
    // The process leads its own group: signal the group so its children get it too.
    rustix::process::kill_process_group(pid, sig)
        .or_else(|_| rustix::process::kill_process(pid, sig))
        .map_err(|e| HostError::Failed(format!("sending {signal}: {e}")))
}

fn read_usage(pid: u32) -> Result<ResourceUsage, HostError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| HostError::NotFound(format!("process {pid}: {e}")))?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let tick_ns = 1_000_000_000 / 100;
    let rss_pages = fields
        .get(21)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    Ok(ResourceUsage {
        rss_bytes: rss_pages * 4096,
        cpu_user_ns: ticks(11) * tick_ns,
        cpu_system_ns: ticks(12) * tick_ns,
        cpu_percent: 0.0,
        timestamp: crate::util::now_nanos(),
    })
}

impl HostState {
    fn check_process_grant(&self, what: &str) -> Result<(), HostError> {
        if self.component.grants.process.is_empty() {
            return Err(super::denied(self, "process", what));
        }
        Ok(())
    }
}

impl Host for HostState {
    async fn spawn(&mut self, mut cmd: Command) -> Result<u64, HostError> {
        self.check_process_grant("process.spawn")?;
        cmd.path = resolve_program(&cmd.path, &cmd.env, &cmd.cwd)?;
        if !self.component.grants.allows_command(&cmd.path) {
            return Err(HostError::Denied(format!(
                "component {:?} may not run {:?}: allowed commands are {:?}",
                self.component.name, cmd.path, self.component.grants.process
            )));
        }
        self.services
            .processes
            .spawn(&self.component.name, cmd)
            .await
    }

    async fn signal(&mut self, id: u64, signal: String) -> Result<(), HostError> {
        self.check_process_grant("process.signal")?;
        let (pid, exit) = self.services.processes.lookup(id, &self.component.name)?;
        if exit.borrow().is_some() {
            return Err(HostError::NotFound(format!("process {id} has exited")));
        }
        send_signal(pid, &signal)
    }

    async fn stop(&mut self, id: u64, signal: String, timeout_ns: u64) -> Result<(), HostError> {
        self.check_process_grant("process.stop")?;
        let (pid, mut exit) = self.services.processes.lookup(id, &self.component.name)?;
        if exit.borrow().is_some() {
            return Ok(());
        }
        send_signal(pid, &signal)?;
        let timeout = Duration::from_nanos(timeout_ns);
        tokio::spawn(async move {
            let exited = tokio::time::timeout(timeout, exit.wait_for(|e| e.is_some())).await;
            if exited.is_err() {
                tracing::info!(pid, "process ignored its stop signal; sending SIGKILL");
                let _ = send_signal(pid, "SIGKILL");
            }
        });
        Ok(())
    }

    async fn status(&mut self, id: u64) -> Result<Status, HostError> {
        self.check_process_grant("process.status")?;
        let (_, exit) = self.services.processes.lookup(id, &self.component.name)?;
        let current = exit.borrow().clone();
        Ok(match current {
            Some(r) => Status::Exited(r),
            None => Status::Running,
        })
    }

    async fn stats(&mut self, id: u64) -> Result<ResourceUsage, HostError> {
        self.check_process_grant("process.stats")?;
        let (pid, _) = self.services.processes.lookup(id, &self.component.name)?;
        read_usage(pid)
    }

    async fn release(&mut self, id: u64) -> Result<(), HostError> {
        self.check_process_grant("process.release")?;
        let (pid, exit) = self.services.processes.lookup(id, &self.component.name)?;
        if exit.borrow().is_none() {
            let _ = send_signal(pid, "SIGKILL");
        }
        self.services.processes.procs.lock().unwrap().remove(&id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_to_absolute_paths() {
        let env = vec![("PATH".to_string(), "/nonexistent:/bin:/usr/bin".to_string())];
        let sh = resolve_program("sh", &env, "/tmp").unwrap();
        assert!(sh == "/bin/sh" || sh == "/usr/bin/sh", "{sh}");
        assert_eq!(
            resolve_program("local/run.sh", &env, "/alloc/t").unwrap(),
            "/alloc/t/local/run.sh"
        );
        assert_eq!(resolve_program("/bin/true", &env, "").unwrap(), "/bin/true");
        assert!(matches!(
            resolve_program("no-such-program-here", &env, ""),
            Err(HostError::Invalid(_))
        ));
    }
}
