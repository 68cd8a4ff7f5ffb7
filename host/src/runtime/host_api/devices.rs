//! `devices`: the device reservations of the task a call is about.

use crate::runtime::bindings::v0_1_0::devices::{Host, Reservation as WitReservation};
use crate::runtime::bindings::v0_1_0::types::{DeviceNode, HostError, Mount};
use crate::runtime::store::HostState;

/// One device reservation made for a task (what a device plugin's `reserve` returned).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reservation {
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Mounts.
    pub mounts: Vec<Mount>,
    /// Device nodes.
    pub devices: Vec<DeviceNode>,
}

impl Host for HostState {
    async fn reserved(&mut self) -> Result<Vec<WitReservation>, HostError> {
        if !self.component.grants.devices {
            return Err(super::denied(self, "devices", "devices.reserved"));
        }
        let Some(task) = &self.task else {
            return Ok(Vec::new());
        };
        Ok(task
            .reservations
            .iter()
            .map(|r| WitReservation {
                env: r.env.clone(),
                mounts: r.mounts.clone(),
                devices: r.devices.clone(),
            })
            .collect())
    }
}
