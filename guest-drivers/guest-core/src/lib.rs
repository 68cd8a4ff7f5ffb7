//! The part of Paddock's guest SDKs that does not depend on the world: the host imports of
//! the `paddock:plugin@0.1.3` contract (its WIT travels in this crate's `wit/`, a copy of
//! the repo's `wit/`) (`log`, `config`, `env`, `devices`, `process`, `timer`, `events`,
//! `task-logs`, `variables`, `services`), the contract types they use, and the [`PluginInfo`] every
//! world's export returns.
//!
//! This crate owns the one copy of their bindings and of the helpers over them ([`host`]).
//! The driver, device-plugin and hook SDKs generate only their own world's exports, with
//! [`generate_world!`], which points the world's imports at this crate's bindings; each SDK
//! re-exports the [`host`] modules its world imports, so guests never name this crate.
//!
//! A component whose world imports only some of these interfaces (a hook, a device plugin)
//! still imports only what its code calls: binding them all here adds nothing to its imports.

#[cfg(not(target_arch = "wasm32"))]
pub mod fake;
pub mod fields;
pub mod host;
pub mod signal;
pub mod stamp;
mod types;

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

/// Declares the grants this component needs, as a grant block's JSON, in its
/// `paddock:grants` custom section: what an agent compares a new version with before it
/// replaces a running one (a version that declares more waits for the operator's
/// approval). It grants nothing: the operator's grants are what the component runs with.
/// Use it once per component:
///
/// ```ignore
/// paddock_driver_sdk::declare_grants!(r#"{"network": {"hosts": ["api.example.com:443"]}}"#);
/// ```
#[macro_export]
macro_rules! declare_grants {
    ($json:literal) => {
        #[doc(hidden)]
        #[cfg_attr(target_arch = "wasm32", unsafe(link_section = "paddock:grants"))]
        #[used]
        static __PADDOCK_DECLARED_GRANTS: [u8; $json.len()] = {
            let text = $json.as_bytes();
            let mut out = [0u8; $json.len()];
            let mut i = 0;
            while i < text.len() {
                out[i] = text[i];
                i += 1;
            }
            out
        };
    };
}

/// Bindings of the host interfaces; use [`host`] and the re-exports at the crate root instead.
///
/// The world is written here rather than in `/wit` because it is a detail of the SDKs, not
/// part of the contract: every host interface, imported, and nothing exported, so it can be
/// linked into a component of any world.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod __bindings {
    wit_bindgen::generate!({
        path: "wit",
        inline: "
            package paddock:guest-core;

            world host-imports {
                import paddock:plugin/log@0.1.3;
                import paddock:plugin/config@0.1.3;
                import paddock:plugin/env@0.1.3;
                import paddock:plugin/devices@0.1.3;
                import paddock:plugin/process@0.1.3;
                import paddock:plugin/timer@0.1.3;
                import paddock:plugin/events@0.1.3;
                import paddock:plugin/task-logs@0.1.3;
                import paddock:plugin/variables@0.1.3;
                import paddock:plugin/services@0.1.3;
                import paddock:plugin/artifacts@0.1.3;
                // Not a host interface, only a type every world's export returns.
                import paddock:plugin/info@0.1.3;
            }
        ",
        world: "host-imports",
        // The interfaces are another package's (`paddock:plugin`); bind them all here.
        generate_all,
        additional_derives: [PartialEq],
    });
}

// The contract types the host imports use, which every SDK shares. wit-bindgen binds the
// other types of `types` here too, but those copies go unused: `task-config`, `task-handle`,
// `field-error`, `attribute` and `task-resources` are bound by the SDK whose world exports
// them, because only the crate that defines a type can give it constructors.
pub use __bindings::paddock::plugin::types::{
    DeviceNode, ExitResult, HostError, LogConfig, LogLevel, Mount, ResourceUsage, StringMap,
};

pub use __bindings::paddock::plugin::info::PluginInfo;

/// Generates a guest SDK's world bindings with `wit_bindgen::generate!`, reusing this crate's
/// bindings for the host interfaces listed in `imports`, for the contract types they use and
/// for `info` (which every world has).
///
/// `imports` names the world's host imports, all of them, as modules of [`host`] (one left
/// out would be bound again in the SDK, without an error; one the world lacks is an error);
/// `options` are `generate!`'s own, `path` and `world` included. Sharing the types is what
/// lets a guest pass a [`HostError`] from [`host::process`] to its SDK's error conversions:
/// bindings the SDK generated itself would be types of their own.
///
/// ```ignore
/// paddock_guest_core::generate_world! {
///     imports: [log, config, timer],
///     options: { path: "wit", world: "device-plugin" }
/// }
/// ```
#[macro_export]
macro_rules! generate_world {
    (imports: [$($import:ident),* $(,)?], options: { $($option:tt)* } $(,)?) => {
        $crate::generate_world!(@with [$($import)*] [] { $($option)* });
    };
    // One arm per host interface: its key in `generate!`'s `with` map. The paths start from
    // the crate name, not `$crate`: wit-bindgen re-parses them as text.
    (@with [log $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/log@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::log,
        ] $options);
    };
    (@with [config $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/config@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::config,
        ] $options);
    };
    (@with [env $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/env@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::env,
        ] $options);
    };
    (@with [devices $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/devices@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::devices,
        ] $options);
    };
    (@with [process $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/process@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::process,
        ] $options);
    };
    (@with [timer $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/timer@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::timer,
        ] $options);
    };
    (@with [events $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/events@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::events,
        ] $options);
    };
    (@with [task_logs $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/task-logs@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::task_logs,
        ] $options);
    };
    (@with [variables $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/variables@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::variables,
        ] $options);
    };
    (@with [services $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/services@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::services,
        ] $options);
    };
    (@with [artifacts $($rest:ident)*] [$($with:tt)*] $options:tt) => {
        $crate::generate_world!(@with [$($rest)*] [$($with)*
            "paddock:plugin/artifacts@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::artifacts,
        ] $options);
    };
    (@with [$unknown:ident $($rest:ident)*] $with:tt $options:tt) => {
        ::core::compile_error!(::core::concat!(
            "`", ::core::stringify!($unknown), "` is not a host interface of paddock_guest_core"
        ));
    };
    (@with [] [$($with:tt)*] { $($option:tt)* }) => {
        $crate::__wit_bindgen::generate!({
            with: {
                $($with)*
                "paddock:plugin/info@0.1.3": ::paddock_guest_core::__bindings::paddock::plugin::info,
                // Every type the host interfaces use, so that there is one of each.
                "paddock:plugin/types@0.1.3/string-map": ::paddock_guest_core::StringMap,
                "paddock:plugin/types@0.1.3/log-level": ::paddock_guest_core::LogLevel,
                "paddock:plugin/types@0.1.3/host-error": ::paddock_guest_core::HostError,
                "paddock:plugin/types@0.1.3/log-config": ::paddock_guest_core::LogConfig,
                "paddock:plugin/types@0.1.3/mount": ::paddock_guest_core::Mount,
                "paddock:plugin/types@0.1.3/device-node": ::paddock_guest_core::DeviceNode,
                "paddock:plugin/types@0.1.3/exit-result": ::paddock_guest_core::ExitResult,
                "paddock:plugin/types@0.1.3/resource-usage": ::paddock_guest_core::ResourceUsage,
            },
            $($option)*
        });
    };
}
