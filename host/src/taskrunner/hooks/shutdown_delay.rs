//! `shutdown_delay`: before a task is sent its kill signal, wait its `shutdown_delay`
//! (Nomad's grace period for clients to drain), announcing it with an event.

use std::time::Duration;

use futures::future::BoxFuture;

use crate::structs::{TaskEvent, TaskEventType};
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
                    TaskEventType::WaitingShutdownDelay,
                    format!(
                        "Waiting for shutdown_delay of {} before killing the task.",
                        crate::util::go_duration(delay)
                    ),
                );
                ev.details
                    .insert("shutdown_delay".into(), crate::util::go_duration(delay));
                (req.emit)(ev);
                tokio::time::sleep(delay).await;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::taskrunner::interfaces::TaskView;
    use crate::taskrunner::tests::allocation;

    #[tokio::test]
    async fn waits_the_delay_with_an_event_and_not_at_all_without_one() {
        for (delay_ns, want_events) in [(0u64, 0usize), (150_000_000, 1)] {
            let a = allocation(
                serde_json::json!({"Name": "t", "Driver": "mock", "ShutdownDelay": delay_ns}),
            );
            let group = a.group().unwrap();
            let node = Default::default();
            let events = std::sync::Mutex::new(Vec::new());
            let emit = |e: TaskEvent| events.lock().unwrap().push(e);
            let req = KillRequest {
                view: TaskView {
                    alloc: &a,
                    group,
                    task: &group.tasks[0],
                    node: &node,
                },
                reason: "test",
                emit: &emit,
            };
            let started = std::time::Instant::now();
            ShutdownDelayHook.killing(&req).await.unwrap();
            let took = started.elapsed();
            let want = Duration::from_nanos(delay_ns);
            assert!(took >= want, "{took:?} < {want:?}");
            assert!(took < want + Duration::from_secs(2), "{took:?}");
            let events = events.lock().unwrap();
            assert_eq!(events.len(), want_events);
            if let Some(e) = events.first() {
                assert_eq!(e.event_type, TaskEventType::WaitingShutdownDelay);
                assert_eq!(e.details["shutdown_delay"], "150ms");
            }
        }
    }
}
