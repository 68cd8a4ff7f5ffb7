//! `paddock-nomad-driver`: the binary's edge. Run by Nomad (with its cookie) it serves the
//! plugin; run as `paddock-nomad-driver executor …` it is the task executor the plugin
//! starts for its tasks' processes; run by hand it says what it is and exits 1.

use std::io::Write;

use paddock_nomad_driver::{handshake, hclog, server};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "executor") {
        std::process::exit(executor(&args[2..]));
    }
    let cookie = std::env::var(handshake::MAGIC_COOKIE_KEY).ok();
    if !handshake::cookie_ok(cookie.as_deref()) {
        let _ = writeln!(std::io::stderr(), "{}", handshake::NOT_FROM_NOMAD);
        std::process::exit(1);
    }
    // PADDOCK_LOG is an env filter (default info); the compiler's per-function lines stay
    // out of a debug log unless asked for by name.
    let wanted = std::env::var("PADDOCK_LOG").unwrap_or_else(|_| "info".into());
    let mut directives = wanted.clone();
    if !wanted.contains("cranelift") {
        directives.push_str(",cranelift_codegen=info,wasmtime_internal_cranelift=info");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(filter)
        .with(hclog::HclogLayer)
        .init();
    let version = handshake::app_version(std::env::var("PLUGIN_PROTOCOL_VERSIONS").ok().as_deref());
    let name = server::plugin_name(args.first().map(|a| a.as_os_str()).unwrap_or_default());
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            paddock_nomad_driver::tracing::error!(error = %e, "starting the async runtime");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(server::run(name, version)) {
        paddock_nomad_driver::tracing::error!(error = format!("{e:#}"), "plugin failed");
        rt.shutdown_timeout(std::time::Duration::from_millis(100));
        std::process::exit(1);
    }
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
}

/// `executor --socket S --dir D`: the task executor, as the agent's own binary runs it.
fn executor(args: &[std::ffi::OsString]) -> i32 {
    let mut socket = None;
    let mut dir = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--socket") => socket = it.next().map(std::path::PathBuf::from),
            Some("--dir") => dir = it.next().map(std::path::PathBuf::from),
            _ => {}
        }
    }
    let (Some(socket), Some(dir)) = (socket, dir) else {
        let _ = writeln!(
            std::io::stderr(),
            "usage: executor --socket PATH --dir PATH"
        );
        return 2;
    };
    // Its log is the executor.log the plugin opened as its stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    match paddock_core::executor::server::serve(&socket, &dir) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "executor: {e}");
            1
        }
    }
}
