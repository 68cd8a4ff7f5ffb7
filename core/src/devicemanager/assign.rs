//! Assigning device instances to a task's `device` requests when its allocation is placed,
//! as Nomad's scheduler does: healthy instances no live allocation holds, all from one
//! group that meets the request's constraints, the one its affinities rank best. A request
//! no device on the node matches is [`DeviceShortage::Missing`]; one whose groups all fail
//! a constraint is [`DeviceShortage::Refused`], naming each group and the constraint it
//! fails; one whose instances are all held or unhealthy is [`DeviceShortage::Busy`],
//! naming who holds what.
//! Placement reports both as Nomad does (`missing devices`, `devices: no devices match
//! request`).

use std::collections::BTreeMap;

use super::rules;
use super::types::{NodeDevice, NodeDeviceResource};
use crate::jobspec::{JobspecError, Task};
use crate::structs::AllocatedDeviceResource;

/// Why a task's device request cannot be met on this node now.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DeviceShortage {
    /// No device on the node matches the request.
    #[error(transparent)]
    Missing(JobspecError),
    /// Devices match by name, but none meets the request's constraints.
    #[error(transparent)]
    Refused(JobspecError),
    /// Devices match, but too few instances are free and healthy.
    #[error(transparent)]
    Busy(JobspecError),
}

/// Choose instances of the node's device `groups` for each of `task`'s device requests:
/// healthy, not in `held` (instance key `<vendor>/<type>/<name>/<id>` → who holds it), all
/// from one group, as Nomad's scheduler does. The chosen ones are added to `held`. An
/// error names the request's field under `path` (the task's path).
pub fn assign(
    groups: &[NodeDeviceResource],
    path: &str,
    task: &Task,
    held: &mut BTreeMap<String, String>,
) -> Result<Vec<AllocatedDeviceResource>, DeviceShortage> {
    let mut out = Vec::new();
    for (i, req) in task.resources.devices.iter().enumerate() {
        let field = format!("{path}.Resources.Devices[{i}]");
        out.push(assign_one(groups, field, req, task, held)?);
    }
    Ok(out)
}

/// Instances for one device request (`field` names it), as [`assign`] chooses them.
fn assign_one(
    groups: &[NodeDeviceResource],
    field: String,
    req: &crate::jobspec::DeviceRequest,
    task: &Task,
    held: &mut BTreeMap<String, String>,
) -> Result<AllocatedDeviceResource, DeviceShortage> {
    let matching: Vec<&NodeDeviceResource> =
        groups.iter().filter(|g| g.matches(&req.name)).collect();
    if matching.is_empty() {
        let known: Vec<String> = groups.iter().map(NodeDeviceResource::id).collect();
        return Err(DeviceShortage::Missing(JobspecError::new(
            field,
            format!(
                "no device on this node matches {:?} (devices here: {})",
                req.name,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        )));
    }
    // Groups that fail a constraint are not used (Nomad's `nodeDeviceMatches`).
    let mut refused = Vec::new();
    let matching: Vec<&NodeDeviceResource> = matching
        .into_iter()
        .filter(|g| match rules::failed_constraint(req, g) {
            None => true,
            Some(c) => {
                refused.push(format!("{} fails {}", g.id(), c.describe()));
                false
            }
        })
        .collect();
    if matching.is_empty() {
        return Err(DeviceShortage::Refused(JobspecError::new(
            format!("{field}.Constraints"),
            format!(
                "no device matching {:?} meets its constraints ({})",
                req.name,
                refused.join("; ")
            ),
        )));
    }
    let chosen = choose(&matching, req, held);
    let (g, free, score) = match chosen {
        Ok(c) => c,
        Err(why) => {
            return Err(DeviceShortage::Busy(JobspecError::new(
                field,
                format!(
                    "{} instance(s) of {:?} requested, not available: {}",
                    req.count,
                    req.name,
                    why.join("; ")
                ),
            )));
        }
    };
    if !req.affinities.is_empty() {
        tracing::debug!(group = %g.id(), score, request = %req.name, "device group chosen by affinity");
    }
    let gid = g.id();
    let ids: Vec<String> = free.iter().map(|d| d.id.clone()).collect();
    for id in &ids {
        held.insert(format!("{gid}/{id}"), format!("task {:?}", task.name));
    }
    Ok(AllocatedDeviceResource {
        vendor: g.vendor.clone(),
        device_type: g.device_type.clone(),
        name: g.name.clone(),
        device_ids: ids,
    })
}

/// Why each instance of `g` that `req` cannot have is not free: held (by whom), unhealthy
/// (why), or excluded by a `${device.ids}` constraint.
fn not_free(
    g: &NodeDeviceResource,
    req: &crate::jobspec::DeviceRequest,
    held: &BTreeMap<String, String>,
) -> Vec<String> {
    let gid = g.id();
    g.instances
        .iter()
        .filter_map(|d| {
            let key = format!("{gid}/{}", d.id);
            if let Some(holder) = held.get(&key) {
                Some(format!("{} held by {holder}", d.id))
            } else if !d.healthy {
                Some(format!("{} unhealthy ({})", d.id, d.health_description))
            } else if !rules::instance_allowed(&d.id, req, g) {
                Some(format!("{} excluded by a ${{device.ids}} constraint", d.id))
            } else {
                None
            }
        })
        .collect()
}

/// Of the `matching` groups with enough free instances for `req`, the one its affinities
/// rank best (the first of equals, in the node's order), with the instances to take and
/// its score; else why each group falls short.
#[allow(clippy::type_complexity)]
fn choose<'a>(
    matching: &[&'a NodeDeviceResource],
    req: &crate::jobspec::DeviceRequest,
    held: &BTreeMap<String, String>,
) -> Result<(&'a NodeDeviceResource, Vec<&'a NodeDevice>, f64), Vec<String>> {
    let mut why = Vec::new();
    let mut chosen: Option<(&NodeDeviceResource, Vec<&NodeDevice>, f64)> = None;
    for g in matching {
        let gid = g.id();
        let free: Vec<&NodeDevice> = g
            .instances
            .iter()
            .filter(|d| d.healthy && !held.contains_key(&format!("{gid}/{}", d.id)))
            .filter(|d| rules::instance_allowed(&d.id, req, g))
            .collect();
        if free.len() >= req.count as usize {
            let score = rules::affinity_score(&req.affinities, g);
            if chosen.as_ref().is_none_or(|(_, _, best)| score > *best) {
                chosen = Some((*g, free[..req.count as usize].to_vec(), score));
            }
            continue;
        }
        why.push(format!(
            "{gid} has {} free of {} ({})",
            free.len(),
            g.instances.len(),
            not_free(g, req, held).join("; ")
        ));
    }
    chosen.ok_or(why)
}
