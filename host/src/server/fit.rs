//! What the node has left for a plan, and fitting one allocation into it: its ports
//! (static and dynamic), its devices, its CPU and memory, taken together or not at all.

use std::collections::BTreeMap;

use crate::client::snapshot::{ClientSnapshot, LiveAlloc};
use crate::devicemanager::{DeviceShortage, NodeDeviceResource};
use crate::evals::Unplaced;
use crate::jobspec::TaskGroup;
use crate::structs::{AllocatedResources, Capacity};

/// What the node has left for this plan: what other jobs hold, and what the allocations
/// it keeps hold.
pub(super) struct Left {
    pub capacity: Capacity,
    pub ports: BTreeMap<u16, String>,
    pub devices: BTreeMap<String, String>,
}

/// What the node has left once the allocations a plan keeps (and those a deployment
/// leaves for later), `held`, hold theirs.
pub(super) fn left_for<'a>(
    held: impl Iterator<Item = &'a LiveAlloc>,
    snap: &ClientSnapshot,
) -> Left {
    let mut left = Left {
        capacity: snap.capacity.clone(),
        ports: snap.ports.clone(),
        devices: snap.held_devices.clone(),
    };
    for a in held {
        let holder = format!("allocation {} of this job", short(&a.id));
        for p in &a.resources.shared.ports {
            left.ports.insert(p.value, holder.clone());
        }
        for key in a.resources.device_keys() {
            left.devices.insert(key, holder.clone());
        }
        left.capacity.hold(&a.resources);
    }
    left
}

/// Ports, devices and room for one allocation of `group` (`path`, for errors), taken from
/// `left`; on failure `left` is as it was.
pub(super) fn place_one(
    path: &str,
    group: &TaskGroup,
    snap: &ClientSnapshot,
    left: &mut Left,
) -> Result<AllocatedResources, Unplaced> {
    let (ports_before, devices_before) = (left.ports.clone(), left.devices.clone());
    let placed = crate::ports::assign(path, group, &snap.host_ip, &mut left.ports)
        .map_err(|e| Unplaced::Exhausted(format!("network: {}", e.message)))
        .and_then(|ports| {
            let mut resources = AllocatedResources::of(group, ports);
            assign_devices(
                path,
                group,
                &snap.devices,
                &mut resources,
                &mut left.devices,
            )
            .map_err(unplaced_for_devices)?;
            left.capacity
                .place(group, &mut resources)
                .map_err(|d| Unplaced::Exhausted(d.into()))?;
            Ok(resources)
        });
    if placed.is_err() {
        (left.ports, left.devices) = (ports_before, devices_before);
    }
    placed
}

/// Nomad's words for a device request that cannot be met: `missing devices` (saying which
/// constraint each group fails), or `devices: no devices match request`.
fn unplaced_for_devices(e: DeviceShortage) -> Unplaced {
    match e {
        DeviceShortage::Missing(_) => Unplaced::Filtered("missing devices".into()),
        DeviceShortage::Refused(e) => Unplaced::Filtered(format!("missing devices: {}", e.message)),
        DeviceShortage::Busy(e) => {
            Unplaced::Exhausted(format!("devices: no devices match request ({})", e.message))
        }
    }
}

/// Assign each task of `group` the device instances it asks for, into `resources`.
fn assign_devices(
    path: &str,
    group: &TaskGroup,
    devices: &[NodeDeviceResource],
    resources: &mut AllocatedResources,
    held: &mut BTreeMap<String, String>,
) -> Result<(), DeviceShortage> {
    for (ti, task) in group.tasks.iter().enumerate() {
        let assigned =
            crate::devicemanager::assign(devices, &format!("{path}.Tasks[{ti}]"), task, held)?;
        if let Some(t) = resources.tasks.get_mut(&task.name) {
            t.devices = assigned;
        }
    }
    Ok(())
}

/// An allocation id's first eight characters, as Nomad shows them.
fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}
