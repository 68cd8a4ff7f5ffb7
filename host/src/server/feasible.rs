//! Whether an allocation can be placed on this node, as Nomad's scheduler decides it for
//! one node: first the feasibility checks that filter a node out (the task's driver is
//! detected and healthy, the job's, group's and task's `constraint`s hold on the node's
//! attributes, the node has the host volumes it mounts), then the fit of its resources (CPU, memory, disk) in what the node has
//! left once every live allocation is counted. What does not pass is reported in Nomad's
//! words: `missing drivers` or the constraint (`ConstraintFiltered`), or the exhausted
//! dimension (`DimensionExhausted`: `cores`, `cpu`, `memory`, `disk`). A task asking for
//! `cores` gets whole cores that no other task holds, and their MHz count as its CPU
//! ([`crate::structs::Capacity`]).

use serde_json::Value;

use crate::constraint::Constraint;
use crate::evals::Unplaced;
use crate::jobspec::{Job, TaskGroup};
use crate::taskenv::NodeInfo;

/// The `Constraints` a job, group or task carries (kept from its JSON).
fn constraints_of(kept: &crate::jobspec::Kept) -> Vec<Constraint> {
    let Some(Value::Array(list)) = kept.get("Constraints") else {
        return Vec::new();
    };
    list.iter()
        .map(|c| {
            let s = |k: &str| {
                c.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            Constraint {
                ltarget: s("LTarget"),
                operand: s("Operand"),
                rtarget: s("RTarget"),
            }
        })
        .collect()
}

/// Why `group` of `job` cannot run on this node at all, if it cannot: the node in none of
/// the job's datacenters (Nomad's glob patterns; none given is `*`), a task's driver
/// missing or unhealthy, or a constraint that does not hold.
pub fn filter(
    job: &Job,
    group: &TaskGroup,
    node: &NodeInfo,
    healthy_drivers: &[String],
) -> Option<Unplaced> {
    let in_dc = job.datacenters.is_empty()
        || job
            .datacenters
            .iter()
            .any(|p| crate::util::glob_match(p, &node.datacenter));
    if !in_dc {
        return Some(Unplaced::Datacenters(job.datacenters.clone()));
    }
    if group
        .tasks
        .iter()
        .any(|t| !healthy_drivers.contains(&t.driver))
    {
        return Some(Unplaced::Filtered("missing drivers".into()));
    }
    let keys = node.keys();
    let all = constraints_of(&job.kept)
        .into_iter()
        .chain(constraints_of(&group.kept))
        .chain(group.tasks.iter().flat_map(|t| constraints_of(&t.kept)));
    for c in all {
        if !c.holds(&keys) {
            return Some(Unplaced::Filtered(c.describe()));
        }
    }
    None
}

/// Why the allocation of `group` at `index` cannot run here for its host volumes: one the
/// node lacks, or offers read-only to a group that writes — Nomad's `missing compatible
/// host volumes`, naming the volume as `missing devices` names its request.
pub fn volumes(group: &TaskGroup, node: &NodeInfo, index: u32) -> Option<Unplaced> {
    let missing = crate::volumes::unmet(group, &node.host_volumes, index)?;
    Some(Unplaced::Filtered(format!(
        "{}: {missing:?}",
        crate::volumes::MISSING
    )))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpuset_lists_are_ranges() {
        assert_eq!(crate::taskenv::cpuset_list(&[3, 0, 1, 2, 5]), "0-3,5");
        assert_eq!(crate::taskenv::cpuset_list(&[1]), "1");
    }
}
