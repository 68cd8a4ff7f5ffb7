//! The repo's guest components, built by `build.rs` for `wasm32-wasip2`.
//!
//! The agent embeds the ones in [`BUILT_IN`] so that it runs with no files beside it; the
//! tests also use the fixtures, which exist to be refused or to count their calls.

/// A built guest component: its file name and bytes.
#[derive(Debug, Clone, Copy)]
pub struct Artifact {
    /// File name, e.g. `mock_driver.wasm`.
    pub file_name: &'static str,
    /// Path of the built file on the build machine (for tests that copy it around).
    pub path: &'static str,
    /// The component bytes.
    pub bytes: &'static [u8],
}

macro_rules! artifact {
    ($(#[$doc:meta])* $name:ident, $env:literal, $file:literal) => {
        $(#[$doc])*
        pub const $name: Artifact = Artifact {
            file_name: $file,
            path: env!($env),
            bytes: include_bytes!(env!($env)),
        };
    };
}

artifact!(
    /// The `mock` driver (Nomad's mock driver options plus misbehaviours for tests).
    MOCK_DRIVER, "PADDOCK_GUEST_MOCK_DRIVER", "mock_driver.wasm");
artifact!(
    /// The `raw_exec` driver: commands as host processes, through the `process` grant.
    RAW_EXEC_DRIVER, "PADDOCK_GUEST_RAW_EXEC_DRIVER", "raw_exec_driver.wasm");
artifact!(
    /// The `mock-device` device plugin.
    MOCK_DEVICE, "PADDOCK_GUEST_MOCK_DEVICE", "mock_device.wasm");
artifact!(
    /// The `env-inject` hook: adds configured, interpolated env vars to tasks.
    ENV_INJECT_HOOK, "PADDOCK_GUEST_ENV_INJECT_HOOK", "env_inject_hook.wasm");
artifact!(
    /// The `policy` hook: refuses tasks outside the operator's policy.
    POLICY_HOOK, "PADDOCK_GUEST_POLICY_HOOK", "policy_hook.wasm");
artifact!(
    /// The `template` hook: renders a task's `template` blocks into its task dir.
    TEMPLATE_HOOK, "PADDOCK_GUEST_TEMPLATE_HOOK", "template_hook.wasm");
artifact!(
    /// Test fixture: a driver built against an unsupported contract version (9.0.0).
    FIXTURE_FUTURE_VERSION, "PADDOCK_GUEST_FIXTURE_FUTURE_VERSION", "fixture_future_version.wasm");
artifact!(
    /// Test fixture: a component exporting a world Paddock does not know.
    FIXTURE_UNKNOWN_WORLD, "PADDOCK_GUEST_FIXTURE_UNKNOWN_WORLD", "fixture_unknown_world.wasm");

artifact!(
    /// Test fixture: a hook claiming contract 0.1.0 whose export types differ.
    FIXTURE_MISMATCHED_HOOK, "PADDOCK_GUEST_FIXTURE_MISMATCHED_HOOK", "fixture_mismatched_hook.wasm");
artifact!(
    /// Test fixture: the `fixture-env` hook, a second env-setting hook that counts its runs.
    FIXTURE_ENV_HOOK, "PADDOCK_GUEST_FIXTURE_ENV_HOOK", "fixture_env_hook.wasm");

/// The components built into the agent binary.
pub const BUILT_IN: &[Artifact] = &[
    MOCK_DRIVER,
    RAW_EXEC_DRIVER,
    MOCK_DEVICE,
    ENV_INJECT_HOOK,
    POLICY_HOOK,
    TEMPLATE_HOOK,
];
