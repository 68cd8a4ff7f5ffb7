//! `shutdown_delay`: before a task is sent its kill signal, wait its `shutdown_delay`
//! (Nomad's grace period for clients to drain), announcing it with an event.

use std::time::Duration;

use futures::future::BoxFuture;

use crate::structs::{TaskEvent, event_type};
use crate::taskrunner::interfaces::{HookResult, KillRequest, TaskHook};

/// Waits the task's shutdown delay before a kill.
pub struct ShutdownDelayHook;

impl TaskHook for ShutdownDelayHook {
    fn name(&self) -> &str {
        "shutdown_delay"
    }

    fn killing<'a>(&'a self, req: &'a KillRequest<'a>) -> BoxFuture<'a, HookResult> {
        Box::pin(async move {
            let delay = Duration::from_nanos(req.view.task.shutdown_delay);
            if !delay.is_zero() {
                let mut ev = TaskEvent::new(
                    event_type::WAITING_SHUTDOWN_DELAY,
                    format!("Waiting for shutdown_delay of {delay:?} before killing the task."),
                );
                ev.details
                    .insert("shutdown_delay".into(), format!("{delay:?}"));
                (req.emit)(ev);
                tokio::time::sleep(delay).await;
            }
            Ok(())
        })
    }
}
