//! SDK for Paddock device plugins written as WebAssembly components (world `device-plugin`
//! of the `paddock:plugin@0.1.3` contract (its WIT travels in this crate's `wit/`, a copy
//! of the repo's `wit/`)).
//!
//! A device plugin is stateless: a call may run in a fresh instance or in one that served
//! earlier calls, so it keeps nothing between calls. Implement
//! [`DevicePlugin`] on a unit type and export it with [`export_device_plugin!`]:
//!
//! ```ignore
//! use paddock_device_sdk::{ContainerReservation, DeviceError, DeviceGroup, DevicePlugin, PluginInfo};
//!
//! struct NoDevices;
//!
//! impl DevicePlugin for NoDevices {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("none", env!("CARGO_PKG_VERSION"))
//!     }
//!     fn fingerprint() -> Result<Vec<DeviceGroup>, DeviceError> {
//!         Ok(Vec::new())
//!     }
//!     fn reserve(ids: Vec<String>) -> Result<ContainerReservation, DeviceError> {
//!         Err(DeviceError::UnknownDevice(ids.join(",")))
//!     }
//! }
//!
//! paddock_device_sdk::export_device_plugin!(NoDevices);
//! ```

extern crate self as paddock_device_sdk;

pub mod host;
mod types;

#[doc(hidden)]
pub use paddock_guest_core::__wit_bindgen::rt as __rt;

/// The fake host for this guest's native unit tests (see `paddock_guest_core::fake`).
#[cfg(not(target_arch = "wasm32"))]
pub use paddock_guest_core::fake;

/// Bindings generated from the contract; use the re-exports at the crate root instead. The
/// host imports, the types they use and `info` are `paddock_guest_core`'s; what is generated
/// here is the `device` export and the types only it uses.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod __bindings {
    paddock_guest_core::generate_world! {
        imports: [log, config, timer],
        options: {
            path: "wit",
            world: "device-plugin",
            pub_export_macro: true,
            export_macro_name: "__export_device_world",
            default_bindings_module: "paddock_device_sdk::__bindings",
            runtime_path: "paddock_device_sdk::__rt",
            additional_derives: [PartialEq],
        }
    }
}

use __bindings::exports::paddock::plugin::device as wit;

pub use __bindings::paddock::plugin::types::Attribute;
/// Declares the grants the component needs (its `paddock:grants` section).
pub use paddock_guest_core::declare_grants;
pub use paddock_guest_core::{DeviceNode, LogLevel, Mount, PluginInfo, StringMap};
pub use wit::{
    ContainerReservation, DeviceError, DeviceGroup, DeviceInstance, GroupStats, InstanceStats,
    StatValue,
};

/// A device plugin (Nomad's DevicePlugin). Functions take no `self`: nothing is kept
/// between calls.
pub trait DevicePlugin {
    /// Name and version.
    fn info() -> PluginInfo;
    /// The devices on this node, in groups of identical devices.
    fn fingerprint() -> Result<Vec<DeviceGroup>, DeviceError>;
    /// Reserves devices by id for a task: what the task gets (env, mounts, device nodes).
    fn reserve(ids: Vec<String>) -> Result<ContainerReservation, DeviceError>;
    /// Current stats of every device; none by default.
    fn stats() -> Result<Vec<GroupStats>, DeviceError> {
        Ok(Vec::new())
    }
}

/// Adapts a [`DevicePlugin`] to the generated bindings; used by [`export_device_plugin!`].
#[doc(hidden)]
pub struct __Export<T>(core::marker::PhantomData<T>);

impl<T: DevicePlugin> wit::Guest for __Export<T> {
    fn info() -> PluginInfo {
        T::info()
    }
    fn fingerprint() -> Result<Vec<DeviceGroup>, DeviceError> {
        T::fingerprint()
    }
    fn reserve(ids: Vec<String>) -> Result<ContainerReservation, DeviceError> {
        T::reserve(ids)
    }
    fn stats() -> Result<Vec<GroupStats>, DeviceError> {
        T::stats()
    }
}

/// Exports a [`DevicePlugin`] implementation as the component's `device` interface. Use it
/// once, in the plugin's cdylib crate: `export_device_plugin!(MyPlugin);`.
#[macro_export]
macro_rules! export_device_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        type __PaddockDeviceExport = $crate::__Export<$plugin>;
        $crate::__bindings::__export_device_world!(
            __PaddockDeviceExport with_types_in $crate::__bindings
        );
    };
}
