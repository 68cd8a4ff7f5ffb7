//! `task-logs`: drivers append to the rotated log files of the tasks they started, through
//! the embedder's [`TaskLogHost`] (which knows which driver started which task).

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::task_logs::{self as wit, Host, LogStream as WitLogStream};
use crate::bindings::v0_1::types::HostError as WitHostError;
use crate::context::ComponentContext;
use crate::types::{HostError, LogStream};

/// Where drivers' task output goes.
pub trait TaskLogHost: Send + Sync {
    /// Append `data` to one of task `task_id`'s logs, as component `writer`. A driver may
    /// write only to the tasks it started (`denied` otherwise; `not-found` for a task that
    /// is not running).
    fn append(
        &self,
        writer: &str,
        task_id: &str,
        stream: LogStream,
        data: &[u8],
    ) -> Result<(), HostError>;
}

/// The `task-logs` view: the calling component and the embedder's log host.
pub struct TaskLogs<'a> {
    component: &'a ComponentContext,
    host: Option<&'a dyn TaskLogHost>,
}

impl<'a> TaskLogs<'a> {
    /// Task logs as `component` writes them, through `host`.
    pub fn new(component: &'a ComponentContext, host: Option<&'a dyn TaskLogHost>) -> Self {
        Self { component, host }
    }
}

impl Host for TaskLogs<'_> {
    async fn append(
        &mut self,
        task_id: String,
        output: WitLogStream,
        data: Vec<u8>,
    ) -> Result<(), WitHostError> {
        let host = self
            .host
            .ok_or_else(|| crate::types::HostError::unavailable("task-logs.append"))?;
        let stream = match output {
            WitLogStream::Stdout => LogStream::Stdout,
            WitLogStream::Stderr => LogStream::Stderr,
        };
        Ok(host.append(&self.component.name, &task_id, stream, &data)?)
    }
}

struct HasTaskLogs;

impl HasData for HasTaskLogs {
    type Data<'a> = TaskLogs<'a>;
}

/// Add `task-logs` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> TaskLogs<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasTaskLogs>(linker, view)
}
