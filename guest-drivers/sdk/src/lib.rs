//! SDK for Paddock task drivers written as WebAssembly components: world `exec-driver` of
//! the `paddock:plugin@0.1.3` contract (its WIT travels in this crate's `wit/`, a copy of the
//! repo's `wit/`), which exports the `task-driver` interface and `task-exec` (`alloc exec`;
//! not supported unless the driver implements [`Driver::exec_task`]).
//!
//! A driver is stateless: a call may run in a fresh instance or in one that served earlier
//! calls (the host keeps warm instances), so it keeps nothing between calls; whatever it
//! must remember about a task goes in the [`TaskHandle`] that [`Driver::start`] returns (see
//! [`TaskHandle::new`] and [`TaskHandle::state`]). Implement [`Driver`] on a unit type and
//! export it with [`export_driver!`]:
//!
//! ```ignore
//! use paddock_driver_sdk::{Driver, DriverError, PluginInfo, TaskConfig, TaskHandle, WaitStatus};
//!
//! struct Noop;
//!
//! impl Driver for Noop {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("noop", env!("CARGO_PKG_VERSION"))
//!     }
//!     fn start(config: TaskConfig) -> Result<TaskHandle, DriverError> {
//!         TaskHandle::new(config.id, &())
//!     }
//!     fn wait(_handle: TaskHandle) -> Result<WaitStatus, DriverError> {
//!         Ok(WaitStatus::Exited(Default::default()))
//!     }
//! }
//!
//! paddock_driver_sdk::export_driver!(Noop);
//! ```
//!
//! The host's imports are in [`host`]; Nomad-style durations are parsed by [`duration`], and
//! a task's `config` block is read into a serde type, every wrong field named, by [`config`].

extern crate self as paddock_driver_sdk;

pub mod config;
pub mod duration;
pub mod host;
pub mod process_task;
mod types;

/// The fake host for a driver's native unit tests (see `paddock_guest_core::fake`).
#[cfg(not(target_arch = "wasm32"))]
pub use paddock_guest_core::fake;
pub use paddock_guest_core::signal;
pub use paddock_guest_core::stamp::Stamp;
pub use process_task::ProcessTask;
pub use types::DEFAULT_STATE_VERSION;

#[doc(hidden)]
pub use paddock_guest_core::__wit_bindgen::rt as __rt;

/// Bindings generated from the contract; use the re-exports at the crate root instead. The
/// host imports, the types they use and `info` are `paddock_guest_core`'s; what is generated
/// here is the `task-driver` export and the types only it uses.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod __bindings {
    paddock_guest_core::generate_world! {
        imports: [log, config, env, devices, process, timer, events, task_logs],
        options: {
            path: "wit",
            world: "exec-driver",
            pub_export_macro: true,
            export_macro_name: "__export_driver_world",
            default_bindings_module: "paddock_driver_sdk::__bindings",
            runtime_path: "paddock_driver_sdk::__rt",
            additional_derives: [PartialEq],
        }
    }
}

use __bindings::exports::paddock::plugin::task_driver as wit;
use __bindings::exports::paddock::plugin::task_exec as wit_exec;

pub use __bindings::paddock::plugin::types::{
    Attribute, FieldError, TaskConfig, TaskHandle, TaskResources,
};
/// Declares the grants the component needs (its `paddock:grants` section).
pub use paddock_guest_core::declare_grants;
pub use paddock_guest_core::{
    DeviceNode, ExitResult, HostError, LogConfig, LogLevel, Mount, PluginInfo, ResourceUsage,
    StringMap,
};
pub use wit::{
    DriverCapabilities as Capabilities, DriverError, DriverFingerprint as Fingerprint, Failure,
    FsIsolation, Health, TaskState, TaskStatus, WaitStatus, WakeOn,
};
/// `alloc exec`'s types (contract 0.1.3): what was asked, how the host should run it.
pub use wit_exec::{ExecInput, ExecOutput, ExecPlan, ExecRequest, JoinedCommand, WindowSize};

/// A task driver (Nomad's DriverPlugin). Functions take no `self`: nothing is kept between
/// calls, and per-task state travels in the [`TaskHandle`].
pub trait Driver {
    /// Name (what jobs put in `driver`) and version.
    fn info() -> PluginInfo;
    /// What the driver supports; by default nothing (no signals, no exec, no isolation).
    fn capabilities() -> Capabilities {
        Capabilities::default()
    }
    /// Checks a task's `config` block (JSON) without starting anything; accepts all by default.
    fn validate_config(_config: &str) -> Result<(), DriverError> {
        Ok(())
    }
    /// Health and attributes; healthy without attributes by default.
    fn fingerprint() -> Fingerprint {
        Fingerprint::healthy()
    }
    /// Starts one task invocation and returns the handle the host persists.
    fn start(config: TaskConfig) -> Result<TaskHandle, DriverError>;
    /// Reattaches to a task after an agent restart; keeps the handle as is by default.
    fn recover(handle: TaskHandle) -> Result<TaskHandle, DriverError> {
        Ok(handle)
    }
    /// Says, without blocking, whether the task has exited or what to wake on.
    fn wait(handle: TaskHandle) -> Result<WaitStatus, DriverError>;
    /// Stops the task with `signal`, killing it after `timeout_ns`; unsupported by default.
    fn stop(
        _handle: TaskHandle,
        _timeout_ns: u64,
        _signal: &str,
    ) -> Result<TaskHandle, DriverError> {
        Err(DriverError::not_supported("stop"))
    }
    /// Releases what the task holds. The contract refuses a running task unless `force`;
    /// by default `wait` says whether it runs, a running one is refused without `force`,
    /// and with it the task is stopped at once (`SIGKILL`, no grace) where `stop` is
    /// supported.
    fn destroy(handle: TaskHandle, force: bool) -> Result<(), DriverError> {
        match Self::wait(handle.clone())? {
            WaitStatus::Exited(_) => Ok(()),
            WaitStatus::Pending(_) if !force => Err(DriverError::Failed(Failure {
                message: "cannot destroy running task (stop it first, or destroy with force)"
                    .into(),
                recoverable: false,
            })),
            WaitStatus::Pending(_) => match Self::stop(handle, 0, "SIGKILL") {
                Ok(_) | Err(DriverError::NotSupported(_)) => Ok(()),
                Err(e) => Err(e),
            },
        }
    }
    /// Describes the task; unsupported by default.
    fn inspect(_handle: TaskHandle) -> Result<TaskStatus, DriverError> {
        Err(DriverError::not_supported("inspect"))
    }
    /// Sends `signal` to the task; unsupported by default.
    fn signal(_handle: TaskHandle, _signal: &str) -> Result<TaskHandle, DriverError> {
        Err(DriverError::not_supported("signal"))
    }
    /// Resource usage of the task; unsupported by default.
    fn stats(_handle: TaskHandle) -> Result<ResourceUsage, DriverError> {
        Err(DriverError::not_supported("stats"))
    }
    /// How to run a command inside the running task (`alloc exec`): joined into one of its
    /// isolated processes, as a new host process, or a session the driver answers itself
    /// (see [`ExecPlan`]; [`ProcessTask::exec_joined`] and [`ProcessTask::exec_spawned`]
    /// build the first two). Unsupported by default; a driver that implements it says
    /// `exec: true` in [`Driver::capabilities`].
    fn exec_task(_handle: TaskHandle, _req: ExecRequest) -> Result<ExecPlan, DriverError> {
        Err(DriverError::not_supported("exec"))
    }
    /// The next step of a session the driver answers itself ([`ExecPlan::Session`]):
    /// `state` is what its last [`ExecOutput`] said. Unsupported by default.
    fn exec_step(
        _handle: TaskHandle,
        _state: Vec<u8>,
        _input: ExecInput,
    ) -> Result<ExecOutput, DriverError> {
        Err(DriverError::not_supported("exec"))
    }
}

/// Adapts a [`Driver`] to the generated bindings; used by [`export_driver!`].
#[doc(hidden)]
pub struct __Export<T>(core::marker::PhantomData<T>);

impl<T: Driver> wit::Guest for __Export<T> {
    fn info() -> PluginInfo {
        T::info()
    }
    fn capabilities() -> Capabilities {
        T::capabilities()
    }
    fn validate_config(config: String) -> Result<(), DriverError> {
        T::validate_config(&config)
    }
    fn fingerprint() -> Fingerprint {
        T::fingerprint()
    }
    fn start(config: TaskConfig) -> Result<TaskHandle, DriverError> {
        T::start(config)
    }
    fn recover(handle: TaskHandle) -> Result<TaskHandle, DriverError> {
        T::recover(handle)
    }
    fn wait(handle: TaskHandle) -> Result<WaitStatus, DriverError> {
        T::wait(handle)
    }
    fn stop(
        handle: TaskHandle,
        timeout_ns: u64,
        signal: String,
    ) -> Result<TaskHandle, DriverError> {
        T::stop(handle, timeout_ns, &signal)
    }
    fn destroy(handle: TaskHandle, force: bool) -> Result<(), DriverError> {
        T::destroy(handle, force)
    }
    fn inspect(handle: TaskHandle) -> Result<TaskStatus, DriverError> {
        T::inspect(handle)
    }
    fn signal(handle: TaskHandle, signal: String) -> Result<TaskHandle, DriverError> {
        T::signal(handle, &signal)
    }
    fn stats(handle: TaskHandle) -> Result<ResourceUsage, DriverError> {
        T::stats(handle)
    }
}

impl<T: Driver> wit_exec::Guest for __Export<T> {
    fn exec_task(handle: TaskHandle, req: ExecRequest) -> Result<ExecPlan, DriverError> {
        T::exec_task(handle, req)
    }
    fn exec_step(
        handle: TaskHandle,
        state: Vec<u8>,
        input: ExecInput,
    ) -> Result<ExecOutput, DriverError> {
        T::exec_step(handle, state, input)
    }
}

/// Exports a [`Driver`] implementation as the component's `task-driver` and `task-exec`
/// interfaces (the `exec-driver` world). Use it once,
/// in the driver's cdylib crate: `export_driver!(MyDriver);`.
#[macro_export]
macro_rules! export_driver {
    ($driver:ty) => {
        #[doc(hidden)]
        type __PaddockDriverExport = $crate::__Export<$driver>;
        $crate::__bindings::__export_driver_world!(
            __PaddockDriverExport with_types_in $crate::__bindings
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> TaskHandle {
        TaskHandle {
            version: 1,
            task_id: "a/t/1".into(),
            driver_state: Vec::new(),
        }
    }

    struct Running;

    impl Driver for Running {
        fn info() -> PluginInfo {
            PluginInfo::new("running", "0")
        }
        fn start(_config: TaskConfig) -> Result<TaskHandle, DriverError> {
            Ok(handle())
        }
        fn wait(_handle: TaskHandle) -> Result<WaitStatus, DriverError> {
            Ok(WaitStatus::Pending(WakeOn {
                processes: Vec::new(),
                after_ns: None,
                handle: None,
            }))
        }
    }

    struct Exited;

    impl Driver for Exited {
        fn info() -> PluginInfo {
            PluginInfo::new("exited", "0")
        }
        fn start(_config: TaskConfig) -> Result<TaskHandle, DriverError> {
            Ok(handle())
        }
        fn wait(_handle: TaskHandle) -> Result<WaitStatus, DriverError> {
            Ok(WaitStatus::Exited(Default::default()))
        }
    }

    #[test]
    fn the_default_destroy_refuses_a_running_task_unless_forced() {
        match Running::destroy(handle(), false) {
            Err(DriverError::Failed(f)) => assert!(f.message.contains("running"), "{}", f.message),
            other => panic!("{other:?}"),
        }
        // Forced: stopped where stop is supported (here it is not), then released.
        assert!(Running::destroy(handle(), true).is_ok());
        assert!(Exited::destroy(handle(), false).is_ok());
    }
}
