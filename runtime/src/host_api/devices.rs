//! `devices`: the device reservations of the task a call is about.

use wasmtime::component::{HasData, Linker};

use crate::bindings::v0_1::devices::{self as wit, Host, Reservation as WitReservation};
use crate::bindings::v0_1::types::HostError as WitHostError;
use crate::context::{ComponentContext, TaskContext};

/// The `devices` view: the calling component (for its grant) and the task, if any.
pub struct Devices<'a> {
    component: &'a ComponentContext,
    task: Option<&'a TaskContext>,
}

impl<'a> Devices<'a> {
    /// The reservations of `task` as `component` sees them.
    pub fn new(component: &'a ComponentContext, task: Option<&'a TaskContext>) -> Self {
        Self { component, task }
    }
}

impl Host for Devices<'_> {
    async fn reserved(&mut self) -> Result<Vec<WitReservation>, WitHostError> {
        if !self.component.grants.devices {
            return Err(crate::types::HostError::denied(
                &self.component.name,
                "devices",
                "devices.reserved",
            )
            .into());
        }
        Ok(self
            .task
            .map(|t| t.reservations.iter().cloned().map(Into::into).collect())
            .unwrap_or_default())
    }
}

struct HasDevices;

impl HasData for HasDevices {
    type Data<'a> = Devices<'a>;
}

/// Add `devices` to `linker`; `view` projects the interface's view out of the store data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> Devices<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasDevices>(linker, view)
}
