//! Host bindings of the WIT contract, one module per released contract version (Zed's
//! `since_vX` pattern). A released version is frozen; a new version gets a new module here
//! and the loader picks the module by the version the guest was built against.

/// Bindings of `paddock:plugin@0.1.0`.
pub mod v0_1_0 {
    /// Contract version these bindings serve.
    pub const VERSION: &str = "0.1.0";

    /// The `driver` world; it also generates every shared host interface.
    pub mod driver {
        wasmtime::component::bindgen!({
            path: "../wit",
            world: "driver",
            imports: { default: async },
            exports: { default: async },
            additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
        });
    }

    /// The `hook` world, reusing the driver world's shared interfaces.
    pub mod hook {
        wasmtime::component::bindgen!({
            path: "../wit",
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
            path: "../wit",
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

    pub use driver::paddock::plugin::{
        config, devices, env, events, info, log, process, task_logs, timer, types,
    };
}
