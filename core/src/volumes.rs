//! Host volumes: which of the node's `client { host_volume }` folders a group's `volume`
//! blocks name (Nomad's static host volumes), whether the node can serve them (placement),
//! and the mounts a task's `volume_mount` blocks become (the driver's `task-config.mounts`,
//! bound into an isolated task's chroot by the host).

use std::collections::BTreeMap;

use crate::jobspec::{Task, TaskGroup, VolumeRequest};
use crate::runtime::types::Mount;
use crate::taskenv::HostVolume;

/// Nomad's placement failure for a node without a volume a group asks for.
pub const MISSING: &str = "missing compatible host volumes";

/// The node volume `req` names for the allocation at `index`: `source`, or with
/// `per_alloc`, `source[index]` (Nomad's `AllocSuffix`).
pub fn source(req: &VolumeRequest, index: u32) -> String {
    if req.per_alloc {
        format!("{}[{index}]", req.source)
    } else {
        req.source.clone()
    }
}

/// The first host volume of `group` the node cannot serve to the allocation at `index`:
/// missing, or read-only where the group asks to write (as Nomad's HostVolumeChecker).
pub fn unmet(group: &TaskGroup, node: &BTreeMap<String, HostVolume>, index: u32) -> Option<String> {
    group
        .volumes
        .values()
        .filter(|r| r.volume_type == "host")
        .map(|r| (r, source(r, index)))
        .find(|(r, s)| node.get(s).is_none_or(|v| v.read_only && !r.read_only))
        .map(|(_, s)| s)
}

/// The mounts of `task` for the allocation at `index`: each `volume_mount` of a host
/// volume, at its destination (relative ones under the task dir's root, as inside a
/// chroot), read-only when the node's volume, the group's request or the mount says so.
/// CSI volumes make no mount (the job was warned). A volume the node no longer has (a
/// reload removed it) is an error naming it.
pub fn mounts(
    group: &TaskGroup,
    task: &Task,
    node: &BTreeMap<String, HostVolume>,
    index: u32,
) -> Result<Vec<Mount>, String> {
    let mut out = Vec::new();
    for m in &task.volume_mounts {
        let Some(req) = group.volumes.get(&m.volume) else {
            return Err(format!(
                "volume_mount of {:?}: the group has no such volume",
                m.volume
            ));
        };
        if req.volume_type != "host" {
            continue;
        }
        let name = source(req, index);
        let Some(v) = node.get(&name) else {
            return Err(format!(
                "volume {:?}: the node has no host volume {name:?} (any more)",
                m.volume
            ));
        };
        let destination = if m.destination.starts_with('/') {
            m.destination.clone()
        } else {
            format!("/{}", m.destination.trim_start_matches("./"))
        };
        out.push(Mount {
            task_path: destination,
            host_path: v.path.clone(),
            read_only: v.read_only || req.read_only || m.read_only,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> TaskGroup {
        let j = serde_json::json!({"ID": "j", "TaskGroups": [{"Name": "g", "Count": 2,
        "Volumes": {
            "data": {"Type": "host", "Source": "data"},
            "shard": {"Type": "host", "Source": "shard", "PerAlloc": true, "ReadOnly": true},
            "fast": {"Type": "csi", "Source": "ebs"},
        },
        "Tasks": [{"Name": "t", "Driver": "mock", "VolumeMounts": [
            {"Volume": "data", "Destination": "/srv/data"},
            {"Volume": "shard", "Destination": "local/shard"},
            {"Volume": "fast", "Destination": "/fast"},
        ]}]}]});
        crate::jobspec::parse_job_json(j.to_string().as_bytes())
            .unwrap()
            .task_groups
            .remove(0)
    }

    fn vol(path: &str, read_only: bool) -> HostVolume {
        HostVolume {
            path: path.into(),
            read_only,
        }
    }

    #[test]
    fn placement_needs_each_host_volume_per_alloc_by_index_and_writable_when_asked() {
        let g = group();
        let mut node = BTreeMap::from([
            ("data".to_string(), vol("/v/data", false)),
            ("shard[0]".to_string(), vol("/v/s0", true)),
        ]);
        assert_eq!(unmet(&g, &node, 0), None);
        assert_eq!(unmet(&g, &node, 1).as_deref(), Some("shard[1]"));
        node.insert("data".into(), vol("/v/data", true));
        assert_eq!(
            unmet(&g, &node, 0).as_deref(),
            Some("data"),
            "read-only for a writer"
        );
    }

    #[test]
    fn mounts_take_the_node_s_paths_and_the_strictest_read_only() {
        let g = group();
        let node = BTreeMap::from([
            ("data".to_string(), vol("/v/data", false)),
            ("shard[1]".to_string(), vol("/v/s1", false)),
        ]);
        let m = mounts(&g, &g.tasks[0], &node, 1).unwrap();
        assert_eq!(
            m,
            [
                Mount {
                    task_path: "/srv/data".into(),
                    host_path: "/v/data".into(),
                    read_only: false
                },
                Mount {
                    task_path: "/local/shard".into(),
                    host_path: "/v/s1".into(),
                    read_only: true
                },
            ]
        );
        let e = mounts(&g, &g.tasks[0], &node, 0).unwrap_err();
        assert!(e.contains("shard[0]"), "{e}");
    }

    #[test]
    fn a_mount_of_a_volume_the_group_lacks_is_refused_naming_the_field() {
        let j = serde_json::json!({"ID": "j", "TaskGroups": [{"Name": "g",
            "Volumes": {"data": {"Type": "host", "Source": "data"}},
            "Tasks": [{"Name": "t", "Driver": "mock",
                "VolumeMounts": [{"Volume": "dta", "Destination": "/d"}]}]}]});
        let e = crate::jobspec::parse_job_json(j.to_string().as_bytes()).unwrap_err();
        assert_eq!(e.path, "Job.TaskGroups[0].Tasks[0].VolumeMounts[0].Volume");
        assert!(
            e.message.contains("\"dta\"") && e.message.contains("\"data\""),
            "{e}"
        );
        let j = serde_json::json!({"ID": "j", "TaskGroups": [{"Name": "g",
            "Volumes": {"data": {"Type": "nfs", "Source": "data"}},
            "Tasks": [{"Name": "t", "Driver": "mock"}]}]});
        let e = crate::jobspec::parse_job_json(j.to_string().as_bytes()).unwrap_err();
        assert_eq!(e.path, "Job.TaskGroups[0].Volumes[\"data\"].Type");
    }
}
