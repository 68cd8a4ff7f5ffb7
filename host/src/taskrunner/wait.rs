//! Waiting for a task's exit: the driver's non-blocking `wait` says "exited" or what to
//! wake on (process exits, a timer); the runner sleeps on those host events, and a kill
//! sends the driver's `stop` and keeps waiting, bounded by the kill timeout.

use std::time::Duration;

use super::interfaces::TaskView;
use super::{KILL_GRACE, TaskRunner};
use crate::drivermanager::types::{ExitResult, WaitStatus, WakeOn};
use crate::drivermanager::{DriverCallError, TaskBinding};
use crate::structs::{TaskEvent, TaskEventType};

impl TaskRunner {
    /// Wait for the task's exit through its binding (its driver version and latest
    /// handle, which a swap may change between two calls). Returns the exit and whether it
    /// was killed.
    pub(super) async fn wait_exit(
        &self,
        task: &TaskBinding,
        view: TaskView<'_>,
    ) -> Result<(ExitResult, bool), DriverCallError> {
        // Every call is boxed: a component call's future is large and lasts the call, while
        // this loop lasts the task; inline, each would size what every running task holds.
        let destroy =
            || Box::pin(task.call(|d, h| async move { Ok((d.destroy(h, true).await?, None)) }));
        let mut kill_deadline: Option<tokio::time::Instant> = None;
        loop {
            let status = Box::pin(task.call(|d, h| async move {
                let status = d.wait(h).await?;
                let updated = match &status {
                    WaitStatus::Pending(w) => w.handle.clone(),
                    WaitStatus::Exited(_) => None,
                };
                Ok((status, updated))
            }))
            .await?;
            let wake = match status {
                WaitStatus::Exited(r) => {
                    let _ = destroy().await;
                    return Ok((r, kill_deadline.is_some()));
                }
                WaitStatus::Pending(w) => w,
            };
            if let Some(deadline) = kill_deadline
                && tokio::time::Instant::now() >= deadline
            {
                let _ = destroy().await;
                return Ok((
                        ExitResult {
                            exit_code: 0,
                            signal: 9,
                            oom_killed: false,
                            err: Some("driver did not report the exit after stop; resources may have been leaked".into()),
                        },
                        true,
                    ));
            }
            let killing = kill_deadline.is_some();
            tokio::select! {
                _ = self.wake(&wake, kill_deadline) => {}
                _ = self.restart_signal.notified(), if !killing => {
                    Box::pin(self.killing(view)).await;
                    Box::pin(self.stop_task(task)).await?;
                    kill_deadline = Some(tokio::time::Instant::now() + Duration::from_nanos(self.task.kill_timeout) + KILL_GRACE);
                }
                _ = self.kill.cancelled(), if !killing => {
                    Box::pin(self.killing(view)).await;
                    let timeout = Duration::from_nanos(self.task.kill_timeout);
                    self.event(TaskEvent::new(TaskEventType::Killing, format!("Sent interrupt. Waiting {} before force killing", crate::util::go_duration(timeout))));
                    Box::pin(self.stop_task(task)).await?;
                    kill_deadline = Some(tokio::time::Instant::now() + timeout + KILL_GRACE);
                }
            }
        }
    }

    /// Ask the driver to stop the task (its kill signal, then SIGKILL after its kill
    /// timeout).
    async fn stop_task(&self, task: &TaskBinding) -> Result<(), DriverCallError> {
        let (timeout, signal) = (self.task.kill_timeout, self.kill_signal());
        task.call(|d, h| async move { Ok(((), Some(d.stop(h, timeout, signal).await?))) })
            .await
    }

    /// Sleep until a wake condition: a listed process exits, the timer fires, or (while
    /// killing) the kill deadline passes.
    pub(super) async fn wake(&self, wake: &WakeOn, kill_deadline: Option<tokio::time::Instant>) {
        self.drivers.sleep_until_wake(wake, kill_deadline).await
    }
}
