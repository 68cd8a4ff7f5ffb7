//! SDK for Paddock secret providers written as WebAssembly components: world
//! `secret-provider` of the `paddock:plugin@0.1.3` contract (its WIT travels in this crate's
//! `wit/`, a copy of the repo's `wit/`), which exports the `secret-source` interface.
//!
//! A job's `secret "db" { provider = "<name>", path = "…", config { … } }` asks the provider
//! of that name for the items at `path` before the task starts; they become
//! `${secret.db.KEY}` in the task's interpolation. Implement [`SecretProvider`] on a unit
//! type and export it with [`export_secret_provider!`]:
//!
//! ```ignore
//! use paddock_secret_sdk::{PluginInfo, SecretError, SecretProvider, StringMap};
//!
//! struct Fixed;
//!
//! impl SecretProvider for Fixed {
//!     fn info() -> PluginInfo {
//!         PluginInfo::new("fixed", "0.1.0")
//!     }
//!     fn fetch(path: String, _config: StringMap) -> Result<StringMap, SecretError> {
//!         Ok(vec![("path".into(), path)])
//!     }
//! }
//!
//! paddock_secret_sdk::export_secret_provider!(Fixed);
//! ```
//!
//! A provider reads Nomad Variables through [`host::variables`] (what the task may read,
//! with the `variables` grant) and reaches anything else through `wasi:http` or
//! `std::net` only where the operator's `network` grant allows.

extern crate self as paddock_secret_sdk;

pub mod host {
    //! What the host offers a secret provider: the imports of the `secret-provider` world.
    pub use paddock_guest_core::host::{config, log, timer, variables};
}

#[doc(hidden)]
pub use paddock_guest_core::__wit_bindgen::rt as __rt;

/// The fake host for this guest's native unit tests (see `paddock_guest_core::fake`).
#[cfg(not(target_arch = "wasm32"))]
pub use paddock_guest_core::fake;

/// Bindings generated from the contract; use the re-exports at the crate root instead.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod __bindings {
    paddock_guest_core::generate_world! {
        imports: [log, config, timer, variables],
        options: {
            path: "wit",
            world: "secret-provider",
            pub_export_macro: true,
            export_macro_name: "__export_secret_world",
            default_bindings_module: "paddock_secret_sdk::__bindings",
            runtime_path: "paddock_secret_sdk::__rt",
            additional_derives: [PartialEq],
        }
    }
}

use __bindings::exports::paddock::plugin::secret_source as wit;

pub use __bindings::paddock::plugin::types::FieldError;
/// Declares the grants the component needs (its `paddock:grants` section).
pub use paddock_guest_core::declare_grants;
pub use paddock_guest_core::{HostError, LogLevel, PluginInfo, StringMap};
pub use wit::SecretError;

/// A secret provider. Functions take no `self`: nothing is kept between calls.
pub trait SecretProvider {
    /// Name and version; the name is what a job's `provider` says.
    fn info() -> PluginInfo;
    /// The items at `path`, with the block's `config` (values as text).
    fn fetch(path: String, config: StringMap) -> Result<StringMap, SecretError>;
}

/// Adapts a [`SecretProvider`] to the generated bindings; used by
/// [`export_secret_provider!`].
#[doc(hidden)]
pub struct __Export<T>(core::marker::PhantomData<T>);

impl<T: SecretProvider> wit::Guest for __Export<T> {
    fn info() -> PluginInfo {
        T::info()
    }
    fn fetch(path: String, config: StringMap) -> Result<StringMap, SecretError> {
        T::fetch(path, config)
    }
}

/// Exports a [`SecretProvider`] implementation as the component's `secret-source`
/// interface. Use it once, in the provider's cdylib crate.
#[macro_export]
macro_rules! export_secret_provider {
    ($provider:ty) => {
        #[doc(hidden)]
        type __PaddockSecretExport = $crate::__Export<$provider>;
        $crate::__bindings::__export_secret_world!(__PaddockSecretExport with_types_in $crate::__bindings);
    };
}
