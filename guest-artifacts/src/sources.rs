//! The sources a plugin project needs outside this repository, carried in the binary for
//! `agent component new`: the contract's WIT, the SDK crates and the guest workspace's
//! manifest and lock (the versions the SDKs are built and tested with).

/// One file of an SDK crate.
#[derive(Debug, Clone, Copy)]
pub struct SdkFile {
    /// The crate's package name, e.g. `paddock-driver-sdk`.
    pub package: &'static str,
    /// Path inside the crate, `/`-separated, e.g. `src/lib.rs` or `Cargo.toml`.
    pub path: &'static str,
    /// The file's text.
    pub text: &'static str,
}

/// Every file of the SDK crates (`paddock-guest-core`, `paddock-driver-sdk`,
/// `paddock-device-sdk`, `paddock-hook-sdk`): manifest, `src/` and `wit/`.
pub const SDK_FILES: &[SdkFile] = include!(concat!(env!("OUT_DIR"), "/sdk_sources.rs"));

/// The contract's WIT files, `(file name, text)`: package `paddock:plugin@0.1.3`, the newest served.
pub const WIT: &[(&str, &str)] = &[
    ("host.wit", include_str!("../../wit/0.1.3/host.wit")),
    ("plugins.wit", include_str!("../../wit/0.1.3/plugins.wit")),
    ("types.wit", include_str!("../../wit/0.1.3/types.wit")),
];

/// The guest workspace's root manifest: the versions its members inherit.
pub const GUEST_WORKSPACE_MANIFEST: &str = include_str!("../../guest-drivers/Cargo.toml");

/// The guest workspace's lock file: the exact crate versions the SDKs were built with.
pub const GUEST_LOCK: &str = include_str!("../../guest-drivers/Cargo.lock");
