//! `paddock-nomad-driver`: a Nomad external task-driver plugin that runs Paddock's driver
//! components. Nomad's client starts it as go-plugin does (a magic cookie, a handshake line
//! on stdout, gRPC on a Unix socket) and calls Nomad's `BasePlugin` and `Driver` services;
//! every call goes to one driver component (the mock, raw_exec, exec or a third party's)
//! through the same runtime and driver manager as the agent's, with its grants and limits.
//!
//! Files: `handshake.rs` (cookie, versions, the line), `hclog.rs` (logs as go-plugin reads
//! them), `cty.rs` (config as Nomad encodes it), `spec.rs` (the hclspec schemas),
//! `config.rs` (the plugin's config), `host.rs` (the runtime, components and task executor
//! behind the driver), `tasks.rs` (the tasks this plugin runs and their waiters),
//! `driver.rs` (the `Driver` service), `status.rs` (errors as Nomad reads them), `stats.rs`
//! (usage samples), `base.rs` (`BasePlugin`), `goplugin.rs` (go-plugin's controller, stdio
//! and broker services), `server.rs` (startup and serving), `authority.rs` (the relay in
//! front of the socket that mends the `:authority` grpcio sends), `client.rs` (dialling a plugin,
//! for tools and tests).

pub mod authority;
pub mod base;
pub mod client;
pub mod config;
pub mod cty;
pub mod driver;
pub mod goplugin;
pub mod handshake;
pub mod hclog;
pub mod host;
pub mod proto;
pub mod server;
pub mod spec;
pub mod stats;
pub mod status;
pub mod tasks;

/// For the binary's edge, which may be built by another package (the tests').
pub use tracing;
