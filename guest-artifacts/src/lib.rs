//! The repo's guest components, built by `build.rs` for `wasm32-wasip2`.
//!
//! The agent embeds the ones in [`BUILT_IN`] so that it runs with no files beside it; the
//! tests also use the fixtures, which exist to be refused or to count their calls.

pub mod sources;

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
    /// The `exec` driver: commands isolated in namespaces, a chroot and a cgroup, through
    /// the `process` and `isolation` grants.
    EXEC_DRIVER, "PADDOCK_GUEST_EXEC_DRIVER", "exec_driver.wasm");
artifact!(
    /// The `sleeper` driver: the SDK's example, a task that sleeps for `seconds`.
    SLEEPER_DRIVER, "PADDOCK_GUEST_SLEEPER_DRIVER", "sleeper_driver.wasm");
artifact!(
    /// The `mock-device` device plugin.
    MOCK_DEVICE, "PADDOCK_GUEST_MOCK_DEVICE", "mock_device.wasm");
artifact!(
    /// The `host-devices` device plugin: the host's real device nodes (KVM, FUSE, TUN, DRM
    /// render nodes, classes the operator names), found through sysfs.
    HOST_DEVICES, "PADDOCK_GUEST_HOST_DEVICES", "host_devices.wasm");
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
    /// The `artifact` hook: fetches a task's `artifact` blocks over http(s) into its task
    /// dir, under the `network` and `task_dir` grants.
    ARTIFACT_HOOK, "PADDOCK_GUEST_ARTIFACT_HOOK", "artifact_hook.wasm");
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
    /// Test fixture: the `hostile` driver, which does one hostile thing per task config option
    /// (reads host files, spawns outside its grant, floods logs, grows memory, spins).
    FIXTURE_HOSTILE, "PADDOCK_GUEST_FIXTURE_HOSTILE", "fixture_hostile.wasm");
artifact!(
    /// Test fixture: the `fixture-env` hook, a second env-setting hook that counts its runs.
    FIXTURE_ENV_HOOK, "PADDOCK_GUEST_FIXTURE_ENV_HOOK", "fixture_env_hook.wasm");

artifact!(
    /// Test fixture: the `versioned` hook, which puts its build stamp in the task's env as
    /// `PADDOCK_HOOK_BUILD` (or traps on every call but `info`); see [`restamp`].
    FIXTURE_VERSIONED_HOOK, "PADDOCK_GUEST_FIXTURE_VERSIONED_HOOK", "fixture_versioned_hook.wasm");

artifact!(
    /// Test fixture: the `hostile-hook` hook, which does one hostile thing per task meta key
    /// (returns `LD_PRELOAD`, plants links in the task's folders, writes files, floods its
    /// env and state).
    FIXTURE_HOSTILE_HOOK, "PADDOCK_GUEST_FIXTURE_HOSTILE_HOOK", "fixture_hostile_hook.wasm");

artifact!(
    /// The `redis-ping` check: a Redis `PING` over TCP, through the `network` grant.
    REDIS_PING_CHECK, "PADDOCK_GUEST_REDIS_PING_CHECK", "redis_ping_check.wasm");

artifact!(
    /// Test fixture: the `hostile-check` check, which ignores its target and connects,
    /// listens or sends where its check's `Body` says.
    FIXTURE_HOSTILE_CHECK, "PADDOCK_GUEST_FIXTURE_HOSTILE_CHECK", "fixture_hostile_check.wasm");

artifact!(
    /// The `nomad` secret provider: a Nomad Variable's items for a task's `secret` block,
    /// under the `variables` grant.
    NOMAD_SECRETS, "PADDOCK_GUEST_NOMAD_SECRETS", "nomad_secrets.wasm");

/// The components built into the agent binary.
pub const BUILT_IN: &[Artifact] = &[
    MOCK_DRIVER,
    RAW_EXEC_DRIVER,
    EXEC_DRIVER,
    MOCK_DEVICE,
    HOST_DEVICES,
    ENV_INJECT_HOOK,
    POLICY_HOOK,
    TEMPLATE_HOOK,
    ARTIFACT_HOOK,
    REDIS_PING_CHECK,
    NOMAD_SECRETS,
];

/// The prefix of the build stamp a guest reads with `paddock_guest_core::stamp::Stamp`.
const STAMP_PREFIX: &[u8] = b"paddock-stamp:";

/// A copy of a built component whose build stamp says `build` (at most 99999), handle format
/// `handle_format` (at most 9999) and `mode` (`ok` or `trap`): a distinct version of the same
/// code, with its own sha256, made without a compile. `None` when `bytes` holds no stamp
/// (only components that read theirs keep one: the `raw_exec` driver and the `versioned`
/// hook).
pub fn restamp(bytes: &[u8], build: u32, handle_format: u32, mode: &str) -> Option<Vec<u8>> {
    assert!(build <= 99_999 && handle_format <= 9_999 && mode.len() <= 4);
    let at = bytes
        .windows(STAMP_PREFIX.len())
        .position(|w| w == STAMP_PREFIX)?;
    let stamp = format!("b{build:05}:f{handle_format:04}:m{mode:-<4}");
    let mut out = bytes.to_vec();
    out[at + STAMP_PREFIX.len()..at + STAMP_PREFIX.len() + stamp.len()]
        .copy_from_slice(stamp.as_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restamping_changes_only_the_stamp() {
        let a = FIXTURE_VERSIONED_HOOK.bytes;
        let b = restamp(a, 42, 3, "trap").unwrap();
        assert_eq!(a.len(), b.len());
        let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        assert!(!diff.is_empty() && diff.len() <= 18, "{diff:?}");
        let text = String::from_utf8_lossy(&b);
        assert!(text.contains("paddock-stamp:b00042:f0003:mtrap"));
        assert!(restamp(RAW_EXEC_DRIVER.bytes, 1, 1, "ok").is_some());
        assert!(restamp(MOCK_DRIVER.bytes, 1, 1, "ok").is_none());
    }
}
