//! `events`: task events a driver emits, routed to the handler the task's runner registered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::runtime::bindings::v0_1_0::events::Host;
use crate::runtime::store::HostState;

/// A task event emitted by a driver.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverEvent {
    /// Component that emitted it.
    pub component: String,
    /// Task invocation id (`<alloc>/<task>/<uuid8>`).
    pub task_id: String,
    /// Message.
    pub message: String,
    /// Details (Nomad's annotations).
    pub details: Vec<(String, String)>,
}

/// Handler a task runner registers for its task's events.
pub type EventHandler = Arc<dyn Fn(DriverEvent) + Send + Sync>;

/// Routes driver events by `(alloc id, task name)`, parsed from the task id. Events for
/// tasks nobody registered are logged and dropped, as Nomad's driver manager does.
#[derive(Default)]
pub struct EventRouter {
    handlers: Mutex<HashMap<(String, String), EventHandler>>,
}

impl EventRouter {
    /// Register the handler for a task; replaces any earlier one.
    pub fn register(&self, alloc_id: &str, task: &str, handler: EventHandler) {
        self.handlers
            .lock()
            .unwrap()
            .insert((alloc_id.into(), task.into()), handler);
    }

    /// How many tasks have a handler.
    pub fn len(&self) -> usize {
        self.handlers.lock().unwrap().len()
    }

    /// Whether no task has a handler.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Remove a task's handler.
    pub fn unregister(&self, alloc_id: &str, task: &str) {
        self.handlers
            .lock()
            .unwrap()
            .remove(&(alloc_id.to_string(), task.to_string()));
    }

    /// Deliver an event.
    pub fn dispatch(&self, ev: DriverEvent) {
        let mut parts = ev.task_id.splitn(3, '/');
        let (Some(alloc), Some(task)) = (parts.next(), parts.next()) else {
            tracing::warn!(component = %ev.component, task_id = %ev.task_id, "driver event with a malformed task id dropped");
            return;
        };
        let handler = self
            .handlers
            .lock()
            .unwrap()
            .get(&(alloc.to_string(), task.to_string()))
            .cloned();
        match handler {
            Some(h) => h(ev),
            None => {
                tracing::debug!(component = %ev.component, task_id = %ev.task_id, "driver event for an unknown task dropped")
            }
        }
    }
}

impl Host for HostState {
    async fn emit(&mut self, task_id: String, message: String, details: Vec<(String, String)>) {
        if !self.component.grants.events {
            tracing::debug!(component = %self.component.name, "events.emit without the `events` grant ignored");
            return;
        }
        self.services.events.dispatch(DriverEvent {
            component: self.component.name.clone(),
            task_id,
            message,
            details,
        });
    }
}
