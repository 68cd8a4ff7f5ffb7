//! Host bindings of the WIT contract, one module per released contract version (Zed's
//! `since_vX` pattern). A released version is frozen; a new version gets a new module here
//! and the loader picks the module by the version the guest was built against.
//!
//! Each version's module also converts its types to and from the host-owned ones in
//! [`crate::types`], so only the host interfaces and the embedder's plugin clients (one
//! per world) ever see a versioned type.

/// Bindings of the `paddock:plugin@0.1` track, read from its newest minor (`0.1.3`): guests
/// built against any older minor of the track link against them through wasmtime's
/// semver-aware name matching (`paddock:plugin/log@0.1.0` resolves to `@0.1.3`).
pub mod v0_1 {
    /// Contract version these bindings serve (the newest minor of the track).
    pub const VERSION: &str = "0.1.3";

    /// The `driver` world; it also generates every shared host interface.
    pub mod driver {
        wasmtime::component::bindgen!({
            path: "../wit/0.1.3",
            world: "driver",
            imports: { default: async },
            exports: { default: async },
            additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
        });
    }

    /// The `hook` world, reusing the driver world's shared interfaces.
    pub mod hook {
        wasmtime::component::bindgen!({
            path: "../wit/0.1.3",
            world: "hook",
            imports: { default: async },
            exports: { default: async },
            additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
            with: {
                "paddock:plugin/types": super::driver::paddock::plugin::types,
                "paddock:plugin/info": super::driver::paddock::plugin::info,
                "paddock:plugin/log": super::driver::paddock::plugin::log,
                "paddock:plugin/config": super::driver::paddock::plugin::config,
                "paddock:plugin/env": super::driver::paddock::plugin::env,
                "paddock:plugin/devices": super::driver::paddock::plugin::devices,
                "paddock:plugin/timer": super::driver::paddock::plugin::timer,
            },
        });
    }

    /// The `device-plugin` world, reusing the driver world's shared interfaces.
    pub mod device {
        wasmtime::component::bindgen!({
            path: "../wit/0.1.3",
            world: "device-plugin",
            imports: { default: async },
            exports: { default: async },
            additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
            with: {
                "paddock:plugin/types": super::driver::paddock::plugin::types,
                "paddock:plugin/info": super::driver::paddock::plugin::info,
                "paddock:plugin/log": super::driver::paddock::plugin::log,
                "paddock:plugin/config": super::driver::paddock::plugin::config,
                "paddock:plugin/timer": super::driver::paddock::plugin::timer,
            },
        });
    }

    /// The `check` world (since 0.1.1), reusing the driver world's shared interfaces.
    pub mod check {
        wasmtime::component::bindgen!({
            path: "../wit/0.1.3",
            world: "check",
            imports: { default: async },
            exports: { default: async },
            additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
            with: {
                "paddock:plugin/types": super::driver::paddock::plugin::types,
                "paddock:plugin/info": super::driver::paddock::plugin::info,
                "paddock:plugin/log": super::driver::paddock::plugin::log,
                "paddock:plugin/config": super::driver::paddock::plugin::config,
                "paddock:plugin/timer": super::driver::paddock::plugin::timer,
            },
        });
    }

    /// The `secret-provider` world (since 0.1.2), reusing the driver world's shared
    /// interfaces and the hook world's `variables`.
    pub mod secret {
        wasmtime::component::bindgen!({
            path: "../wit/0.1.3",
            world: "secret-provider",
            imports: { default: async },
            exports: { default: async },
            additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
            with: {
                "paddock:plugin/types": super::driver::paddock::plugin::types,
                "paddock:plugin/info": super::driver::paddock::plugin::info,
                "paddock:plugin/log": super::driver::paddock::plugin::log,
                "paddock:plugin/config": super::driver::paddock::plugin::config,
                "paddock:plugin/timer": super::driver::paddock::plugin::timer,
                "paddock:plugin/variables": super::hook::paddock::plugin::variables,
            },
        });
    }

    /// The `task-exec` export of the `exec-driver` world (since 0.1.3), alone: a driver
    /// exports it or not, so the host looks it up apart from the `driver` world's exports
    /// (which every driver has), and a driver without it keeps loading. `task-driver` is
    /// in this world only because `task-exec` uses its `driver-error`; its bindings here
    /// go unused but for that type.
    pub mod exec {
        wasmtime::component::bindgen!({
            path: "../wit/0.1.3",
            inline: "
                package paddock:host-exec;
                world exec {
                    import paddock:plugin/types@0.1.3;
                    import paddock:plugin/process@0.1.3;
                    export paddock:plugin/task-driver@0.1.3;
                    export paddock:plugin/task-exec@0.1.3;
                }
            ",
            world: "exec",
            imports: { default: async },
            exports: { default: async },
            additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
            with: {
                "paddock:plugin/types": super::driver::paddock::plugin::types,
                "paddock:plugin/process": super::driver::paddock::plugin::process,
            },
        });
    }

    pub use driver::paddock::plugin::{
        config, devices, env, events, info, log, process, task_logs, timer, types,
    };
    /// Only hooks import `variables`, `services` and `artifacts`, so the hook world's
    /// bindings generate them.
    pub use hook::paddock::plugin::{artifacts, services, variables};

    mod convert {
        //! `paddock:plugin@0.1` types ⇄ host types: records with the same fields.
        use super::{devices, process, services, types as wit, variables};
        use crate::types;

        /// `From` both ways between a binding record and a host record with the same fields.
        macro_rules! same_fields {
            ($wit:ty, $host:ty, [$($f:ident),*]) => {
                impl From<$wit> for $host {
                    fn from(v: $wit) -> Self {
                        Self { $($f: v.$f.into()),* }
                    }
                }
                impl From<$host> for $wit {
                    fn from(v: $host) -> Self {
                        Self { $($f: v.$f.into()),* }
                    }
                }
            };
        }

        same_fields!(
            wit::ExitResult,
            types::ExitResult,
            [exit_code, signal, oom_killed, err]
        );
        same_fields!(
            wit::ResourceUsage,
            types::ResourceUsage,
            [
                rss_bytes,
                cpu_user_ns,
                cpu_system_ns,
                cpu_percent,
                timestamp
            ]
        );
        same_fields!(
            wit::LogConfig,
            types::LogConfig,
            [max_files, max_file_size_mb]
        );
        same_fields!(wit::Mount, types::Mount, [task_path, host_path, read_only]);
        same_fields!(
            wit::DeviceNode,
            types::DeviceNode,
            [task_path, host_path, permissions]
        );
        same_fields!(wit::FieldError, types::FieldError, [field, message]);
        same_fields!(
            variables::VariableMetadata,
            types::VariableMetadata,
            [
                namespace,
                path,
                create_index,
                modify_index,
                create_time,
                modify_time
            ]
        );

        same_fields!(
            services::ServiceRegistration,
            types::ServiceRegistration,
            [
                id,
                service_name,
                namespace,
                node_id,
                datacenter,
                job_id,
                alloc_id,
                tags,
                address,
                port
            ]
        );
        same_fields!(
            services::ServiceStub,
            types::ServiceStub,
            [name, namespace, tags]
        );

        /// `task-exec` uses the `task-driver` interface's error, which its bindings bind
        /// again: the same variant, as the driver world's type.
        impl From<super::exec::exports::paddock::plugin::task_driver::DriverError>
            for super::driver::exports::paddock::plugin::task_driver::DriverError
        {
            fn from(e: super::exec::exports::paddock::plugin::task_driver::DriverError) -> Self {
                use super::driver::exports::paddock::plugin::task_driver as to;
                use super::exec::exports::paddock::plugin::task_driver as from;
                match e {
                    from::DriverError::InvalidConfig(f) => Self::InvalidConfig(f),
                    from::DriverError::NotSupported(m) => Self::NotSupported(m),
                    from::DriverError::TaskNotFound(m) => Self::TaskNotFound(m),
                    from::DriverError::Denied(m) => Self::Denied(m),
                    from::DriverError::Failed(f) => Self::Failed(to::Failure {
                        message: f.message,
                        recoverable: f.recoverable,
                    }),
                }
            }
        }

        impl From<types::Reservation> for devices::Reservation {
            fn from(r: types::Reservation) -> Self {
                Self {
                    env: r.env,
                    mounts: r.mounts.into_iter().map(Into::into).collect(),
                    devices: r.devices.into_iter().map(Into::into).collect(),
                }
            }
        }

        impl From<types::HostError> for wit::HostError {
            fn from(e: types::HostError) -> Self {
                match e {
                    types::HostError::Denied(m) => Self::Denied(m),
                    types::HostError::NotFound(m) => Self::NotFound(m),
                    types::HostError::Invalid(m) => Self::Invalid(m),
                    types::HostError::Failed(m) => Self::Failed(m),
                }
            }
        }

        impl From<wit::Attribute> for types::Attribute {
            fn from(a: wit::Attribute) -> Self {
                match a {
                    wit::Attribute::Str(s) => Self::Str(s),
                    wit::Attribute::Int(i) => Self::Int(i),
                    wit::Attribute::Float(f) => Self::Float(f),
                    wit::Attribute::Boolean(b) => Self::Boolean(b),
                }
            }
        }

        impl From<process::Isolation> for types::Isolation {
            fn from(i: process::Isolation) -> Self {
                Self {
                    pid_namespace: i.pid_namespace,
                    ipc_namespace: i.ipc_namespace,
                    uts_namespace: i.uts_namespace,
                    chroot: i.chroot,
                    binds: i.binds.into_iter().map(Into::into).collect(),
                    user: i.user,
                    no_new_privs: i.no_new_privs,
                    memory_bytes: i.memory_bytes,
                    memory_max_bytes: i.memory_max_bytes,
                    cpu_shares: i.cpu_shares,
                    cpuset_cpus: i.cpuset_cpus,
                    // The host's to decide (`host_api::process`).
                    ..Default::default()
                }
            }
        }

        impl From<process::Command> for types::Command {
            fn from(c: process::Command) -> Self {
                Self {
                    path: c.path,
                    args: c.args,
                    env: c.env,
                    cwd: c.cwd,
                    stdout_path: c.stdout_path,
                    stderr_path: c.stderr_path,
                    logs: c.logs.map(Into::into),
                    user: c.user,
                    argv0: String::new(),
                    alloc_root: String::new(),
                }
            }
        }
    }
}
