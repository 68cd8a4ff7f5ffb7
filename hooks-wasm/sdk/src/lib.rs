//! SDK for Paddock task-runner hooks written as WebAssembly components: world `hook` of the
//! `paddock:plugin@0.1.3` contract (its WIT travels in this crate's `wit/`, a copy of the
//! repo's `wit/`), which exports the `task-hook` interface.
//!
//! A hook is stateless: a call may run in a fresh instance or in one that served earlier
//! calls, so it keeps nothing between calls; what it must remember goes in
//! the `state` of its [`PrestartResponse`], handed back as `previous_state`. Implement
//! [`Hook`] on a unit type and export it with [`export_hook!`]:
//!
//! ```ignore
//! use paddock_hook_sdk::{Hook, HookError, PluginInfo, PrestartRequest, PrestartResponse};
//!
//! struct Hello;
//!
//! impl Hook for Hello {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("hello", env!("CARGO_PKG_VERSION"))
//!     }
//!     fn prestart(_req: PrestartRequest) -> Result<PrestartResponse, HookError> {
//!         Ok(PrestartResponse { env: vec![("HELLO".into(), "world".into())], ..Default::default() })
//!     }
//! }
//!
//! paddock_hook_sdk::export_hook!(Hello);
//! ```

extern crate self as paddock_hook_sdk;

pub mod config;
pub mod host;
pub mod paths;

#[doc(hidden)]
pub use paddock_guest_core::__wit_bindgen::rt as __rt;

/// The fake host for this guest's native unit tests (see `paddock_guest_core::fake`).
#[cfg(not(target_arch = "wasm32"))]
pub use paddock_guest_core::fake;

/// Bindings generated from the contract; use the re-exports at the crate root instead. The
/// host imports, the types they use and `info` are `paddock_guest_core`'s; what is generated
/// here is the `task-hook` export and the types only it uses.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod __bindings {
    paddock_guest_core::generate_world! {
        imports: [log, config, env, devices, timer, variables, services, artifacts],
        options: {
            path: "wit",
            world: "hook",
            pub_export_macro: true,
            export_macro_name: "__export_hook_world",
            default_bindings_module: "paddock_hook_sdk::__bindings",
            runtime_path: "paddock_hook_sdk::__rt",
            additional_derives: [PartialEq],
        }
    }
}

use __bindings::exports::paddock::plugin::task_hook as wit;

pub use __bindings::paddock::plugin::types::{FieldError, TaskResources};
/// Declares the grants the component needs (its `paddock:grants` section).
pub use paddock_guest_core::declare_grants;
pub use paddock_guest_core::stamp::Stamp;
pub use paddock_guest_core::{
    DeviceNode, ExitResult, HostError, LogLevel, Mount, PluginInfo, StringMap,
};
pub use wit::{HookError, PrestartRequest, PrestartResponse, TaskInfo, Template};

impl Default for PrestartResponse {
    /// Nothing to add, no state, and `done = false` (prestart runs again on every start).
    fn default() -> Self {
        Self {
            env: Vec::new(),
            state: Vec::new(),
            done: false,
            mounts: Vec::new(),
            devices: Vec::new(),
        }
    }
}

impl TaskInfo {
    /// Task `task` of group `group` in job `job`, run by `driver`, with 100 MHz and 300 MB
    /// (Nomad's defaults) and every other field empty: what a hook's unit tests call it with.
    pub fn new(task: impl Into<String>, driver: impl Into<String>) -> Self {
        Self {
            alloc_id: String::new(),
            job_id: "job".into(),
            group_name: "group".into(),
            task_name: task.into(),
            driver: driver.into(),
            driver_config: "{}".into(),
            meta: Vec::new(),
            task_dir: String::new(),
            resources: TaskResources {
                cpu_mhz: 100,
                memory_mb: 300,
                memory_max_mb: 0,
            },
            templates: Vec::new(),
        }
    }
}

/// A task-runner hook (Nomad's task lifecycle hooks). Functions take no `self`: nothing is
/// kept between calls. Every phase but [`Hook::info`] does nothing by default.
pub trait Hook {
    /// Name and version.
    fn info() -> PluginInfo;
    /// Before every start of the task: what to add to it. Adds nothing by default.
    fn prestart(_req: PrestartRequest) -> Result<PrestartResponse, HookError> {
        Ok(PrestartResponse::default())
    }
    /// After the task started.
    fn poststart(_task: TaskInfo) -> Result<(), HookError> {
        Ok(())
    }
    /// After every exit of the task, whether or not it restarts.
    fn exited(_task: TaskInfo, _outcome: ExitResult) -> Result<(), HookError> {
        Ok(())
    }
    /// When the task runner ends, with the last `state` prestart returned; must be idempotent.
    fn stop(_task: TaskInfo, _state: StringMap) -> Result<(), HookError> {
        Ok(())
    }
    /// When the allocation is updated while the task runs.
    fn update(_task: TaskInfo) -> Result<(), HookError> {
        Ok(())
    }
}

/// Adapts a [`Hook`] to the generated bindings; used by [`export_hook!`].
#[doc(hidden)]
pub struct __Export<T>(core::marker::PhantomData<T>);

impl<T: Hook> wit::Guest for __Export<T> {
    fn info() -> PluginInfo {
        T::info()
    }
    fn prestart(req: PrestartRequest) -> Result<PrestartResponse, HookError> {
        T::prestart(req)
    }
    fn poststart(task: TaskInfo) -> Result<(), HookError> {
        T::poststart(task)
    }
    fn exited(task: TaskInfo, outcome: ExitResult) -> Result<(), HookError> {
        T::exited(task, outcome)
    }
    fn stop(task: TaskInfo, state: StringMap) -> Result<(), HookError> {
        T::stop(task, state)
    }
    fn update(task: TaskInfo) -> Result<(), HookError> {
        T::update(task)
    }
}

/// Exports a [`Hook`] implementation as the component's `task-hook` interface. Use it once,
/// in the hook's cdylib crate: `export_hook!(MyHook);`.
#[macro_export]
macro_rules! export_hook {
    ($hook:ty) => {
        #[doc(hidden)]
        type __PaddockHookExport = $crate::__Export<$hook>;
        $crate::__bindings::__export_hook_world!(__PaddockHookExport with_types_in $crate::__bindings);
    };
}
