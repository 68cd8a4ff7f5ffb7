//! Task events drivers emit (the runtime's `events` interface), routed to the handler each
//! task runner registers for its task, as Nomad's driver manager routes them, and only
//! from the driver that runs the task: another component naming a task it does not run
//! reaches nobody.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::runtime::host_api::events::EventSink;
use crate::runtime::types::DriverEvent;

/// Handler a task runner registers for its task's events.
pub type EventHandler = Arc<dyn Fn(DriverEvent) + Send + Sync>;

/// Routes driver events by `(alloc id, task name)`, parsed from the task id. Events for
/// tasks nobody registered, or from a component other than the task's driver, are logged
/// and dropped, as Nomad's driver manager drops events for unknown tasks.
#[derive(Default)]
pub struct EventRouter {
    /// The task's driver and its handler, by (alloc id, task name).
    handlers: Mutex<HashMap<(String, String), (String, EventHandler)>>,
}

impl EventRouter {
    /// Register the handler for a task run by `driver`; replaces any earlier one.
    pub fn register(&self, alloc_id: &str, task: &str, driver: &str, handler: EventHandler) {
        self.handlers
            .lock()
            .unwrap()
            .insert((alloc_id.into(), task.into()), (driver.into(), handler));
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
}

impl EventSink for EventRouter {
    /// Deliver an event to its task's handler.
    fn emit(&self, ev: DriverEvent) {
        let mut parts = ev.task_id.splitn(3, '/');
        let (Some(alloc), Some(task)) = (parts.next(), parts.next()) else {
            tracing::debug!(component = %ev.component, task_id = ?ev.task_id, "driver event with a malformed task id dropped");
            return;
        };
        let handler = self
            .handlers
            .lock()
            .unwrap()
            .get(&(alloc.to_string(), task.to_string()))
            .cloned();
        match handler {
            Some((driver, h)) if driver == ev.component => h(ev),
            Some((driver, _)) => {
                tracing::debug!(component = %ev.component, driver = %driver, task_id = ?ev.task_id, "driver event for a task another driver runs dropped")
            }
            None => {
                tracing::debug!(component = %ev.component, task_id = ?ev.task_id, "driver event for an unknown task dropped")
            }
        }
    }
}
