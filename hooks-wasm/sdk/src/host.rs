//! What the host offers a hook: the imports of the `hook` world, with small helpers. They are
//! `paddock_guest_core`'s, which every guest SDK shares.

pub use paddock_guest_core::host::{
    artifacts, config, devices, env, log, services, timer, variables,
};
