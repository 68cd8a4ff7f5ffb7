//! Deliberate misbehaviours, for testing how the host copes with a broken driver.

use crate::config::{Kind, Misbehave, Op, PluginConfig, parse_plugin_config};
use paddock_driver_sdk::host::{config, log, timer};
use std::hint::black_box;

/// Misbehaves if the plugin config names `op`; an unreadable plugin config names nothing.
pub fn check_plugin(op: Op) {
    let plugin = parse_plugin_config(&config::raw()).unwrap_or_else(|_| PluginConfig::default());
    check(plugin.misbehave, op);
}

/// Misbehaves if `misbehave` names `op`.
pub fn check(misbehave: Option<Misbehave>, op: Op) {
    if let Some(m) = misbehave.filter(|m| m.op == op) {
        act(m);
    }
}

/// Misbehaves as `m` says: never returns.
fn act(m: Misbehave) -> ! {
    log::warn(&format!(
        "misbehaving on purpose: {:?} in {}",
        m.kind,
        m.op.name()
    ));
    match m.kind {
        Kind::Loop => spin(),
        Kind::Trap => panic!("mock driver: trap in {} on purpose", m.op.name()),
        Kind::Oom => exhaust_memory(),
        Kind::Hang => loop {
            timer::sleep(u64::MAX);
        },
    }
}

/// Burns CPU in pure wasm forever.
fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

/// Allocates and touches 1 MiB after 1 MiB until the allocator gives up (which traps).
fn exhaust_memory() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = vec![0u8; 1 << 20];
        chunk.iter_mut().step_by(4096).for_each(|byte| *byte = 1);
        hoard.push(black_box(chunk));
    }
}
