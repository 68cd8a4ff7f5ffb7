//! SDK for Paddock service checks written as WebAssembly components: world `check` of the
//! `paddock:plugin@0.1.3` contract (its WIT travels in this crate's `wit/`, a copy of the
//! repo's `wit/`), which exports the `service-check` interface.
//!
//! A job's `check { type = "<name>" }` runs the check component of that name on the check's
//! interval; implement [`Check`] on a unit type and export it with [`export_check!`]:
//!
//! ```ignore
//! use paddock_check_sdk::{Check, CheckError, CheckResult, CheckStatus, CheckTarget, PluginInfo};
//!
//! struct Up;
//!
//! impl Check for Up {
//!     fn info() -> PluginInfo {
//!         PluginInfo { name: "up".into(), version: "0.1.0".into() }
//!     }
//!     fn probe(target: CheckTarget, _config: String) -> Result<CheckResult, CheckError> {
//!         let _stream = paddock_check_sdk::connect(&target)?;
//!         Ok(CheckResult { status: CheckStatus::Passing, output: "connected".into() })
//!     }
//! }
//!
//! paddock_check_sdk::export_check!(Up);
//! ```
//!
//! A check reaches the network through `std::net` (WASI sockets) only where the operator's
//! `network` grant allows; [`connect`] words a refusal as [`CheckError::Denied`], and the
//! host answers such a probe with its own denial naming the grant.

extern crate self as paddock_check_sdk;

pub mod host {
    //! What the host offers a check: the imports of the `check` world.
    pub use paddock_guest_core::host::{config, log, timer};
}

#[doc(hidden)]
pub use paddock_guest_core::__wit_bindgen::rt as __rt;

/// Bindings generated from the contract; use the re-exports at the crate root instead.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod __bindings {
    paddock_guest_core::generate_world! {
        imports: [log, config, timer],
        options: {
            path: "wit",
            world: "check",
            pub_export_macro: true,
            export_macro_name: "__export_check_world",
            default_bindings_module: "paddock_check_sdk::__bindings",
            runtime_path: "paddock_check_sdk::__rt",
            additional_derives: [PartialEq],
        }
    }
}

use __bindings::exports::paddock::plugin::service_check as wit;

pub use __bindings::paddock::plugin::types::FieldError;
/// Declares the grants the component needs (its `paddock:grants` section).
pub use paddock_guest_core::declare_grants;
pub use paddock_guest_core::{LogLevel, PluginInfo};
pub use wit::{CheckError, CheckResult, CheckStatus, CheckTarget};

/// A service check. Functions take no `self`: nothing is kept between calls.
pub trait Check {
    /// Name and version.
    fn info() -> PluginInfo;
    /// Probe `target`; `config` is the job's `check` block as JSON (Nomad's API names).
    fn probe(target: CheckTarget, config: String) -> Result<CheckResult, CheckError>;
}

/// A TCP connection to `target`'s address and port, with reads and writes bounded by
/// `timeout` where the host supports it. A connect the `network` grant refuses is
/// [`CheckError::Denied`]; any other failure is [`CheckError::Failed`] with the system's
/// words.
pub fn connect_timeout(
    target: &CheckTarget,
    timeout: std::time::Duration,
) -> Result<std::net::TcpStream, CheckError> {
    let addr = if target.address.contains(':') {
        format!("[{}]:{}", target.address, target.port)
    } else {
        format!("{}:{}", target.address, target.port)
    };
    let stream = std::net::TcpStream::connect(&addr).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            CheckError::Denied(format!("connecting to {addr}: {e}"))
        }
        _ => CheckError::Failed(format!("dial tcp {addr}: {e}")),
    })?;
    // Timeouts are best effort: the host bounds the whole call by the check's timeout.
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    Ok(stream)
}

/// [`connect_timeout`] with 5 s.
pub fn connect(target: &CheckTarget) -> Result<std::net::TcpStream, CheckError> {
    connect_timeout(target, std::time::Duration::from_secs(5))
}

impl CheckResult {
    /// A result of `status` saying `output`.
    pub fn new(status: CheckStatus, output: impl Into<String>) -> Self {
        Self {
            status,
            output: output.into(),
        }
    }
}

/// Adapts a [`Check`] to the generated bindings; used by [`export_check!`].
#[doc(hidden)]
pub struct __Export<T>(core::marker::PhantomData<T>);

impl<T: Check> wit::Guest for __Export<T> {
    fn info() -> PluginInfo {
        T::info()
    }
    fn probe(target: CheckTarget, config: String) -> Result<CheckResult, CheckError> {
        T::probe(target, config)
    }
}

/// Exports a [`Check`] implementation as the component's `service-check` interface. Use it
/// once, in the check's cdylib crate: `export_check!(MyCheck);`.
#[macro_export]
macro_rules! export_check {
    ($check:ty) => {
        #[doc(hidden)]
        type __PaddockCheckExport = $crate::__Export<$check>;
        $crate::__bindings::__export_check_world!(__PaddockCheckExport with_types_in $crate::__bindings);
    };
}
