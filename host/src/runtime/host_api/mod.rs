//! Host interfaces the guests import, one module per WIT interface. Each implements the
//! generated `Host` trait on [`HostState`](super::store::HostState) and checks the calling
//! component's grant; [`add_to_linker`] wires them (and WASI p2) in one place.

pub mod config;
pub mod devices;
pub mod env;
pub mod events;
pub mod log;
pub mod process;
pub mod task_logs;
pub mod timer;

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use super::bindings::v0_1_0;
use super::store::HostState;

/// Long-lived host services shared by every call (the per-call store only borrows them).
pub struct HostServices {
    /// Processes started by drivers.
    pub processes: process::ProcessTable,
    /// Where driver-emitted task events go.
    pub events: events::EventRouter,
    /// Log files of running tasks, for drivers that write them.
    pub task_logs: task_logs::TaskLogs,
}

impl HostServices {
    /// Fresh services.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            processes: process::ProcessTable::default(),
            events: events::EventRouter::default(),
            task_logs: task_logs::TaskLogs::default(),
        })
    }
}

/// Add WASI p2 and every Paddock host interface to `linker`. One linker serves all worlds:
/// `hook` and `device-plugin` import subsets of what `driver` imports.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    v0_1_0::driver::Driver::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

impl v0_1_0::types::Host for HostState {}
impl v0_1_0::info::Host for HostState {}

pub(crate) fn denied(state: &HostState, capability: &str, what: &str) -> v0_1_0::types::HostError {
    v0_1_0::types::HostError::Denied(format!(
        "component {:?} has no `{capability}` grant ({what})",
        state.component.name
    ))
}
