//! What the host offers a driver: the imports of the `driver` world, with small helpers. They
//! are `paddock_guest_core`'s, which every guest SDK shares.

pub use paddock_guest_core::host::{config, devices, env, events, log, process, task_logs, timer};
