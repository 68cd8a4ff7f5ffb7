//! What the host decides for a guest's process, whatever the guest asked: every field of a
//! `command` and an `isolation` is checked against the component's grant and the task the
//! call is about before the embedder runs anything.
//!
//! - the environment holds no loader or interpreter variable the grant does not name
//!   (`LD_PRELOAD` would make a granted program run any code);
//! - the working directory is the task's dir or a folder below it or the alloc dir, and
//!   the output goes only to the task's own log files; both are opened beneath the
//!   allocation dir, never through a link (the embedder does that with `alloc_root`);
//! - an isolated process is rooted at its own task dir, holds the operator's `chroot_env`
//!   and the alloc dir and nothing else of the host, runs with no_new_privs, never as a uid
//!   or gid the grant denies (root by default), and in a cgroup with `pids.max`.
//!
//! Each refusal is `denied` (the guest asked for more than it may) or `invalid` (the
//! request cannot mean anything), naming the field.

use crate::context::{ComponentContext, TaskPaths};
use crate::grants::{plain_absolute, within};
use crate::types::{Command, HostError, Isolation, Mount};

/// The component may set every variable in `env`: no loader or interpreter variable its
/// grant does not name, and no name or value a process environment cannot hold.
pub fn environment(
    component: &ComponentContext,
    env: &[(String, String)],
) -> Result<(), HostError> {
    for (k, v) in env {
        if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
            return Err(HostError::Invalid(format!(
                "env: {k:?} is not a valid environment variable (an empty name, or a name with '=' or NUL, or a value with NUL)"
            )));
        }
        if !component.grants.allows_env(k) {
            return Err(HostError::Denied(format!(
                "component {name:?} may not pass {k} to a process: loader and interpreter variables run code of their own and need plugin {name:?} {{ grant {{ loader_env = [{k:?}] }} }}",
                name = component.name
            )));
        }
    }
    Ok(())
}

/// Where the process runs and writes: checked against the task's own places, and the
/// allocation dir they are opened beneath set on `cmd`. Without a task, a process has no
/// output and no working directory of a task.
pub fn placement(
    component: &ComponentContext,
    task: Option<&TaskPaths>,
    cmd: &mut Command,
) -> Result<(), HostError> {
    let name = &component.name;
    let Some(t) = task else {
        for (field, value) in [
            ("cwd", &cmd.cwd),
            ("stdout-path", &cmd.stdout_path),
            ("stderr-path", &cmd.stderr_path),
        ] {
            if !value.is_empty() {
                return Err(HostError::Denied(format!(
                    "{field}: component {name:?} started a process outside a call about a task, where it may name no folder or file ({value:?})"
                )));
            }
        }
        cmd.alloc_root.clear();
        return Ok(());
    };
    for (field, value) in [
        ("stdout-path", &cmd.stdout_path),
        ("stderr-path", &cmd.stderr_path),
    ] {
        if !value.is_empty() && value != &t.stdout && value != &t.stderr {
            return Err(HostError::Denied(format!(
                "{field}: component {name:?} may send a process's output only to the task's own logs ({:?} or {:?}), not {value:?}",
                t.stdout, t.stderr
            )));
        }
    }
    if cmd.cwd.is_empty() {
        cmd.cwd = t.task_dir.clone();
    } else if !(within(&cmd.cwd, &t.task_dir) || within(&cmd.cwd, &t.alloc_dir)) {
        return Err(HostError::Denied(format!(
            "cwd: component {name:?} may run a process only in the task dir {:?}, a folder below it, or the alloc dir {:?}, not {:?}",
            t.task_dir, t.alloc_dir, cmd.cwd
        )));
    }
    cmd.alloc_root = t.alloc_root.clone();
    Ok(())
}

/// The isolation the host carries out for `iso`: rooted at the task dir, with the
/// operator's binds, no_new_privs, and the grant's uid, gid and pid limits. Whatever the
/// guest asked beyond that is refused, naming the field.
pub fn isolation(
    component: &ComponentContext,
    task: Option<&TaskPaths>,
    mut iso: Isolation,
) -> Result<Isolation, HostError> {
    let name = &component.name;
    let grants = &component.grants;
    let Some(t) = task else {
        return Err(HostError::Denied(format!(
            "component {name:?} may isolate a process only in a call about a task, in that task's dir"
        )));
    };
    if !iso.chroot.is_empty() && plain_absolute(&iso.chroot) != plain_absolute(&t.task_dir) {
        return Err(HostError::Denied(format!(
            "isolation.chroot: an isolated process of component {name:?} is rooted at its own task dir {:?}, not {:?}",
            t.task_dir, iso.chroot
        )));
    }
    iso.chroot = t.task_dir.clone();
    let mut allowed: Vec<Mount> = grants
        .chroot_binds()
        .into_iter()
        .map(|(host, inside)| Mount {
            host_path: host,
            task_path: inside,
            read_only: true,
        })
        .collect();
    allowed.push(Mount {
        host_path: t.alloc_dir.clone(),
        task_path: "/alloc".into(),
        read_only: false,
    });
    // The task's host volumes and reservation mounts: the host's own list, never the
    // driver's (a driver may leave one out or make it read-only, not add or widen one).
    allowed.extend(t.mounts.iter().cloned());
    if iso.binds.is_empty() {
        iso.binds = allowed;
    } else {
        for b in &iso.binds {
            let ok = allowed.iter().any(|a| {
                plain_absolute(&a.host_path) == plain_absolute(&b.host_path)
                    && plain_absolute(&a.task_path) == plain_absolute(&b.task_path)
                    && (b.read_only || !a.read_only)
            });
            if !ok {
                return Err(HostError::Denied(format!(
                    "isolation.binds: component {name:?} may not bind {:?} at {:?}{}: an isolated task's chroot holds the operator's chroot_env (plugin {name:?} {{ grant {{ chroot_env = [...] }} }}, read-only), its alloc dir at /alloc, and its host volumes and device mounts",
                    b.host_path,
                    b.task_path,
                    if b.read_only { "" } else { " writable" }
                )));
            }
        }
    }
    if !iso.no_new_privs {
        return Err(HostError::Denied(format!(
            "isolation.no-new-privs: component {name:?} asked for false; isolated processes always run with no_new_privs"
        )));
    }
    if iso.user.is_empty() {
        iso.user = "nobody".into();
    }
    iso.denied_uids = grants.denied_uids();
    iso.denied_gids = grants.denied_gids();
    iso.pids_max = grants.pids_max.unwrap_or(crate::grants::DEFAULT_PIDS_MAX);
    iso.device_nodes = t.devices.clone();
    Ok(iso)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::Grants;

    fn component(grants: Grants) -> ComponentContext {
        ComponentContext {
            name: "exec".into(),
            grants,
            plugin_config: "{}".into(),
            limits: Default::default(),
        }
    }

    fn paths() -> TaskPaths {
        TaskPaths {
            alloc_root: "/data/alloc/a1".into(),
            task_dir: "/data/alloc/a1/web".into(),
            alloc_dir: "/data/alloc/a1/alloc".into(),
            stdout: "/data/alloc/a1/alloc/logs/web.stdout".into(),
            stderr: "/data/alloc/a1/alloc/logs/web.stderr".into(),
            ..Default::default()
        }
    }

    fn denied(r: Result<impl std::fmt::Debug, HostError>, want: &str) {
        match r {
            Err(HostError::Denied(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("expected a denial naming {want:?}, got {other:?}"),
        }
    }

    #[test]
    fn output_and_working_dir_are_the_tasks_own() {
        let c = component(Grants::default());
        let p = paths();
        let cmd = |cwd: &str, out: &str| Command {
            cwd: cwd.into(),
            stdout_path: out.into(),
            ..Default::default()
        };
        let mut ok = cmd("", &p.stdout);
        placement(&c, Some(&p), &mut ok).unwrap();
        assert_eq!(ok.cwd, p.task_dir, "the task dir by default");
        assert_eq!(ok.alloc_root, p.alloc_root);
        let mut below = cmd("/data/alloc/a1/web/local/./bin", &p.stderr);
        placement(&c, Some(&p), &mut below).unwrap();
        placement(&c, Some(&p), &mut cmd("/data/alloc/a1/alloc/data", "")).unwrap();
        denied(
            placement(&c, Some(&p), &mut cmd("", "/data/state.redb")),
            "stdout-path: component \"exec\" may send a process's output only to the task's own logs",
        );
        for cwd in [
            "/etc",
            "/data/alloc/a1",
            "/data/alloc/a1/web/../other",
            "local",
            "/data/alloc/a1/webx",
        ] {
            denied(placement(&c, Some(&p), &mut cmd(cwd, "")), "cwd:");
        }
        // Outside a task: nothing of a task's.
        let mut none = cmd("", "");
        placement(&c, None, &mut none).unwrap();
        assert!(none.alloc_root.is_empty() && none.cwd.is_empty());
        denied(
            placement(&c, None, &mut cmd("/tmp", "")),
            "outside a call about a task",
        );
        denied(placement(&c, None, &mut cmd("", &p.stdout)), "stdout-path");
    }

    #[test]
    fn loader_variables_are_refused_without_the_grant() {
        let env = |k: &str| {
            vec![
                ("PATH".to_string(), "/bin".to_string()),
                (k.to_string(), "/tmp/x.so".to_string()),
            ]
        };
        denied(
            environment(&component(Grants::default()), &env("LD_PRELOAD")),
            "may not pass LD_PRELOAD to a process",
        );
        let granted = component(Grants {
            loader_env: vec!["LD_PRELOAD".into()],
            ..Default::default()
        });
        environment(&granted, &env("LD_PRELOAD")).unwrap();
        assert!(matches!(
            environment(&granted, &env("A=B")),
            Err(HostError::Invalid(_))
        ));
    }

    #[test]
    fn isolation_is_the_hosts_to_decide() {
        let c = component(Grants {
            isolation: true,
            process: vec!["*".into()],
            ..Default::default()
        });
        let p = paths();
        let base = || Isolation {
            no_new_privs: true,
            ..Default::default()
        };
        let iso = isolation(&c, Some(&p), base()).unwrap();
        assert_eq!(iso.chroot, p.task_dir);
        assert_eq!(iso.user, "nobody");
        assert!(iso.denied_uids.contains(0));
        assert_eq!(iso.pids_max, crate::grants::DEFAULT_PIDS_MAX);
        assert!(
            iso.binds
                .iter()
                .any(|b| b.host_path == "/usr" && b.read_only)
        );
        assert!(
            iso.binds
                .iter()
                .any(|b| b.host_path == p.alloc_dir && b.task_path == "/alloc" && !b.read_only)
        );
        denied(
            isolation(
                &c,
                Some(&p),
                Isolation {
                    chroot: "/".into(),
                    ..base()
                },
            ),
            "isolation.chroot",
        );
        denied(
            isolation(
                &c,
                Some(&p),
                Isolation {
                    chroot: String::new(),
                    no_new_privs: false,
                    ..base()
                },
            ),
            "no-new-privs",
        );
        let dash_over_sleep = Mount {
            host_path: "/usr/bin/dash".into(),
            task_path: "/usr/bin/sleep".into(),
            read_only: true,
        };
        denied(
            isolation(
                &c,
                Some(&p),
                Isolation {
                    binds: vec![dash_over_sleep],
                    ..base()
                },
            ),
            "may not bind \"/usr/bin/dash\"",
        );
        let writable_usr = Mount {
            host_path: "/usr".into(),
            task_path: "/usr".into(),
            read_only: false,
        };
        denied(
            isolation(
                &c,
                Some(&p),
                Isolation {
                    binds: vec![writable_usr],
                    ..base()
                },
            ),
            "writable",
        );
        let subset = Mount {
            host_path: "/usr".into(),
            task_path: "/usr".into(),
            read_only: true,
        };
        let iso = isolation(
            &c,
            Some(&p),
            Isolation {
                binds: vec![subset.clone()],
                ..base()
            },
        )
        .unwrap();
        assert_eq!(iso.binds, [subset]);
        denied(isolation(&c, None, base()), "only in a call about a task");
    }

    #[test]
    fn a_task_s_volumes_and_device_nodes_are_the_host_s_list_never_the_driver_s() {
        let c = component(Grants {
            isolation: true,
            ..Default::default()
        });
        let volume = Mount {
            host_path: "/srv/volumes/data".into(),
            task_path: "/data".into(),
            read_only: true,
        };
        let node = crate::types::DeviceNode {
            task_path: "/dev/mock-0".into(),
            host_path: "/dev/null".into(),
            permissions: "rw".into(),
        };
        let p = TaskPaths {
            mounts: vec![volume.clone()],
            devices: vec![node.clone()],
            ..paths()
        };
        let base = || Isolation {
            no_new_privs: true,
            ..Default::default()
        };
        // Nothing asked: the operator's chroot_env, the alloc dir and the task's volume,
        // and the device nodes set by the host.
        let iso = isolation(&c, Some(&p), base()).unwrap();
        assert!(iso.binds.contains(&volume), "{:?}", iso.binds);
        assert_eq!(iso.device_nodes, [node.clone()]);
        // A driver asking for the volume writable, or for another host folder at its
        // destination, or naming device nodes of its own: the host's list stands.
        for bad in [
            Mount {
                read_only: false,
                ..volume.clone()
            },
            Mount {
                host_path: "/etc".into(),
                ..volume.clone()
            },
        ] {
            denied(
                isolation(
                    &c,
                    Some(&p),
                    Isolation {
                        binds: vec![bad],
                        ..base()
                    },
                ),
                "may not bind",
            );
        }
        let asked = Isolation {
            device_nodes: vec![crate::types::DeviceNode {
                host_path: "/dev/mem".into(),
                ..node.clone()
            }],
            ..base()
        };
        assert_eq!(isolation(&c, Some(&p), asked).unwrap().device_nodes, [node]);
    }
}
