//! Ports for a group's `network` block, as Nomad's scheduler and client assign them on one
//! node: a static port must not be held by another live allocation; a dynamic port is a free
//! one between [`MIN_DYNAMIC`] and [`MAX_DYNAMIC`] (Nomad's defaults) that nothing on the host
//! is listening on.

use std::collections::BTreeMap;

use crate::jobspec::{JobspecError, TaskGroup};
use crate::structs::AllocatedPort;

/// Lowest dynamic port.
pub const MIN_DYNAMIC: u16 = 20000;
/// Highest dynamic port.
pub const MAX_DYNAMIC: u16 = 32000;

/// Ports for one allocation of `group`. `held` maps ports in use to who holds them, and
/// gets this allocation's ports added. An error names the port's field under `path`.
pub fn assign(
    path: &str,
    group: &TaskGroup,
    host_ip: &str,
    held: &mut BTreeMap<u16, String>,
) -> Result<Vec<AllocatedPort>, JobspecError> {
    let mut out = Vec::new();
    let Some(net) = group.networks.first() else {
        return Ok(out);
    };
    for (j, p) in net.reserved_ports.iter().enumerate() {
        if let Some(holder) = held.get(&p.value) {
            return Err(JobspecError::new(
                format!("{path}.Networks[0].ReservedPorts[{j}].Value"),
                format!(
                    "static port {} ({:?}) is already held by {holder}",
                    p.value, p.label
                ),
            ));
        }
        held.insert(p.value, format!("port {:?} of this job", p.label));
        out.push(AllocatedPort {
            label: p.label.clone(),
            value: p.value,
            to: p.to,
            host_ip: host_ip.to_string(),
        });
    }
    let span = u32::from(MAX_DYNAMIC - MIN_DYNAMIC) + 1;
    for (j, p) in net.dynamic_ports.iter().enumerate() {
        let start = (uuid::Uuid::new_v4().as_u64_pair().0 % u64::from(span)) as u32;
        let value = (0..span)
            .map(|k| MIN_DYNAMIC + ((start + k) % span) as u16)
            .find(|port| !held.contains_key(port) && bindable(host_ip, *port))
            .ok_or_else(|| {
                JobspecError::new(
                    format!("{path}.Networks[0].DynamicPorts[{j}]"),
                    format!("no free dynamic port between {MIN_DYNAMIC} and {MAX_DYNAMIC}"),
                )
            })?;
        held.insert(value, format!("port {:?} of this job", p.label));
        out.push(AllocatedPort {
            label: p.label.clone(),
            value,
            to: p.to,
            host_ip: host_ip.to_string(),
        });
    }
    Ok(out)
}

/// Whether nothing listens on `ip:port` now.
fn bindable(ip: &str, port: u16) -> bool {
    std::net::TcpListener::bind((ip, port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobspec::{Network, Port};

    fn group(reserved: &[(&str, u16)], dynamic: &[&str]) -> TaskGroup {
        let job = crate::jobspec::parse_register_request(
            br#"{"Job": {"ID": "j", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}]}}"#,
        )
        .unwrap()
        .job;
        let mut g = job.task_groups[0].clone();
        g.networks = vec![Network {
            mode: "host".into(),
            reserved_ports: reserved
                .iter()
                .map(|(l, v)| Port {
                    label: l.to_string(),
                    value: *v,
                    to: 0,
                })
                .collect(),
            dynamic_ports: dynamic
                .iter()
                .map(|l| Port {
                    label: l.to_string(),
                    value: 0,
                    to: 8080,
                })
                .collect(),
        }];
        g
    }

    #[test]
    fn static_ports_conflict_and_dynamic_ports_are_free_and_distinct() {
        let mut held = BTreeMap::new();
        held.insert(8500, "allocation 1234 of job \"other\"".to_string());
        let e = assign(
            "Job.TaskGroups[0]",
            &group(&[("http", 8500)], &[]),
            "127.0.0.1",
            &mut held,
        )
        .unwrap_err();
        assert_eq!(
            e.path,
            "Job.TaskGroups[0].Networks[0].ReservedPorts[0].Value"
        );
        assert!(e.message.contains("already held by allocation 1234"), "{e}");

        let g = group(&[("admin", 8600)], &["a", "b", "c"]);
        let first = assign("p", &g, "127.0.0.1", &mut held).unwrap();
        assert_eq!(first[0].value, 8600);
        let dynamic: Vec<u16> = first[1..].iter().map(|p| p.value).collect();
        assert!(
            dynamic
                .iter()
                .all(|p| (MIN_DYNAMIC..=MAX_DYNAMIC).contains(p))
        );
        assert_eq!(first[1].to, 8080);
        let mut uniq = dynamic.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), 3);
        // A second allocation of the same group cannot have the same static port.
        assert!(assign("p", &g, "127.0.0.1", &mut held).is_err());
    }

    #[test]
    fn a_port_something_listens_on_is_not_handed_out() {
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let busy = l.local_addr().unwrap().port();
        assert!(!bindable("127.0.0.1", busy));
    }
}
