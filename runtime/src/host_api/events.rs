//! `events`: task events a driver emits, handed to the embedder's [`EventSink`] (the
//! agent routes them to the runner of the task they name).

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::events::{self as wit, Host};
use crate::context::ComponentContext;
use crate::types::DriverEvent;

/// Where driver events go. Called on the guest's call path: it must not block.
pub trait EventSink: Send + Sync {
    /// Deliver one event.
    fn emit(&self, event: DriverEvent);
}

/// Events one call may emit; the rest of that call's are dropped, with one warning naming
/// the component (each event becomes a task event the agent stores).
pub const MAX_EVENTS_PER_CALL: u32 = 100;

/// The `events` view: the calling component, the embedder's sink, and how many events the
/// current call has emitted.
pub struct Events<'a> {
    component: &'a ComponentContext,
    sink: Option<&'a dyn EventSink>,
    emitted: &'a mut u32,
}

impl<'a> Events<'a> {
    /// Events of `component`, delivered to `sink`; `emitted` counts this call's.
    pub fn new(
        component: &'a ComponentContext,
        sink: Option<&'a dyn EventSink>,
        emitted: &'a mut u32,
    ) -> Self {
        Self {
            component,
            sink,
            emitted,
        }
    }
}

impl Host for Events<'_> {
    async fn emit(&mut self, task_id: String, message: String, details: Vec<(String, String)>) {
        // `emit` cannot fail by contract: without the grant or a sink the event is dropped.
        if !self.component.grants.events {
            tracing::debug!(component = %self.component.name, "events.emit without the `events` grant ignored");
            return;
        }
        let Some(sink) = self.sink else {
            tracing::debug!(component = %self.component.name, "events.emit in a runtime without an event sink ignored");
            return;
        };
        *self.emitted = self.emitted.saturating_add(1);
        if *self.emitted > MAX_EVENTS_PER_CALL {
            if *self.emitted == MAX_EVENTS_PER_CALL + 1 {
                tracing::warn!(component = %self.component.name, task_id = ?crate::bounds::text(task_id, crate::bounds::KEY), "component emitted more than {MAX_EVENTS_PER_CALL} events in one call: the rest of this call's are dropped");
            }
            return;
        }
        // Each event is kept in its allocation's record and sent to every reader of it:
        // its message and details have their caps.
        sink.emit(DriverEvent {
            component: self.component.name.clone(),
            task_id: crate::bounds::text(task_id, crate::bounds::KEY),
            message: crate::bounds::text(message, crate::bounds::MESSAGE),
            details: crate::bounds::pairs(details),
        });
    }
}

struct HasEvents;

impl HasData for HasEvents {
    type Data<'a> = Events<'a>;
}

/// Add `events` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Events<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasEvents>(linker, view)
}
