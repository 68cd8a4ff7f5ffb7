//! What the host offers a device plugin: the imports of the `device-plugin` world. They are
//! `paddock_guest_core`'s, which every guest SDK shares.

pub use paddock_guest_core::host::{config, log, timer};
