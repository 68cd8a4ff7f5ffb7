//! `alloc exec` into a running task: the task's driver version says how (its `task-exec`),
//! the host runs it ([`crate::executor`]'s exec, or a session the driver answers itself)
//! with the task's environment, dir and user from its latest start.

use std::sync::Arc;

use super::{TaskActionError, TaskRunner};
use crate::drivermanager::types::{DriverCapabilities, TaskConfig};
use crate::drivermanager::{DriverCallError, TaskBinding};
use crate::runtime::types::{ExecInput, ExecOutput, ExecProcess, ExecStarted};

/// A running `alloc exec`.
pub enum TaskExec {
    /// A host process whose stdio the caller streams.
    Process(ExecProcess),
    /// A session the driver answers itself: its first output, then [`DriverSession::step`].
    Session(ExecOutput, DriverSession),
}

/// The driver end of a session the driver answers itself: each input is a call on the
/// task's driver version, with the task's latest handle.
pub struct DriverSession {
    binding: Arc<TaskBinding>,
}

impl DriverSession {
    /// Hand the driver `input`, with the `state` its last output said.
    pub async fn step(
        &self,
        state: Vec<u8>,
        input: ExecInput,
    ) -> Result<ExecOutput, DriverCallError> {
        self.binding
            .call(|d, h| async move { Ok((d.exec_step(h, state, input).await?, None)) })
            .await
    }
}

impl crate::execstream::Steps for DriverSession {
    fn step(
        &self,
        state: Vec<u8>,
        input: ExecInput,
    ) -> futures::future::BoxFuture<'_, Result<ExecOutput, String>> {
        Box::pin(async move {
            DriverSession::step(self, state, input)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

impl TaskExec {
    /// As [`crate::execstream`] serves it.
    pub fn into_started(self) -> crate::execstream::Started {
        match self {
            TaskExec::Process(p) => crate::execstream::Started::Process(p),
            TaskExec::Session(first, s) => crate::execstream::Started::Session(first, Box::new(s)),
        }
    }
}

impl TaskRunner {
    /// What the running task's driver version can do (`exec`, its filesystem isolation):
    /// what `alloc exec` needs of it, and of the caller's token.
    pub async fn capabilities(&self) -> Result<DriverCapabilities, TaskActionError> {
        let binding = self.running_binding()?;
        binding
            .call(|d, _| async move { Ok((d.capabilities().await?, None)) })
            .await
            .map_err(|error| TaskActionError::Exec {
                task: self.task.name.clone(),
                error,
            })
    }

    /// Run `command` in the running task (`alloc exec`), with a terminal when `tty`.
    pub async fn exec(&self, command: Vec<String>, tty: bool) -> Result<TaskExec, TaskActionError> {
        let binding = self.running_binding()?;
        let Some(inv) = self.last.lock().unwrap().clone() else {
            return Err(TaskActionError::NotRunning(self.task.name.clone()));
        };
        let cfg = TaskConfig {
            id: inv.task_id.clone(),
            name: self.task.name.clone(),
            alloc_id: self.alloc_id.clone(),
            env: inv.env.build().sorted_pairs(),
            user: self.task.user.clone(),
            alloc_dir: inv.dirs.alloc_dir.clone(),
            task_dir: inv.dirs.task_dir.clone(),
            stdout_path: inv.logs.stdout.display().to_string(),
            stderr_path: inv.logs.stderr.display().to_string(),
            ..TaskConfig::default()
        };
        let started = binding
            .call(|d, h| async move { Ok((d.exec_task(h, &cfg, command, tty).await?, None)) })
            .await
            .map_err(|error| TaskActionError::Exec {
                task: self.task.name.clone(),
                error,
            })?;
        Ok(match started {
            ExecStarted::Process(p) => TaskExec::Process(p),
            ExecStarted::Session(first) => TaskExec::Session(first, DriverSession { binding }),
        })
    }

    fn running_binding(&self) -> Result<Arc<TaskBinding>, TaskActionError> {
        if self.kill.is_cancelled() {
            return Err(TaskActionError::NotRunning(self.task.name.clone()));
        }
        self.binding
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(|| TaskActionError::NotRunning(self.task.name.clone()))
    }
}
