//! The soak bench: a release agent driven for 30 minutes (by default) by the soak's mix of
//! registrations, stops, restarts, signals, a misbehaving driver, hot swaps, SIGTERM
//! restarts, `kill -9` every few minutes and injected state DB faults, with the invariants
//! checked after every restart; prints a Markdown report (and writes it to `--report`).
//!
//! `cargo bench -p paddock-tests --bench soak -- [--minutes 30] [--seed N] [--report FILE]
//! [--kill-every SECONDS (180)] [--faults N (100: every other agent life fails about one
//! state DB commit in N as a failed fsync does; 0: none)]`
//!
//! Exits 1 when an invariant broke.

#[path = "../soak/mod.rs"]
mod soak;

use std::time::Duration;

fn main() {
    let mut minutes = 30.0f64;
    let mut seed = 1u64;
    let mut report: Option<String> = None;
    let mut kill_every = 180u64;
    let mut faults = 100u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--minutes" => {
                minutes = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--minutes N")
            }
            "--seed" => seed = args.next().and_then(|v| v.parse().ok()).expect("--seed N"),
            "--report" => report = Some(args.next().expect("--report FILE")),
            "--faults" => {
                faults = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--faults N")
            }
            "--kill-every" => {
                kill_every = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--kill-every SECONDS")
            }
            // cargo bench passes --bench; filters are not used.
            _ => {}
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let dir = tempfile::Builder::new()
        .prefix("paddock-soak-")
        .tempdir()
        .unwrap();
    let opts = soak::Options {
        duration: Duration::from_secs_f64(minutes * 60.0),
        seed,
        // PADDOCK_AGENT_BIN: another agent binary (a copy, so that a rebuild during a long
        // run does not swap the agent under it).
        agent_bin: std::env::var_os("PADDOCK_AGENT_BIN")
            .map(Into::into)
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_paddock-agent").into()),
        kill_every: Duration::from_secs(kill_every),
        check_every: Duration::from_secs(60),
        fault_one_in: faults,
        max_jobs: 60,
        hook: |b| {
            guest_artifacts::restamp(guest_artifacts::FIXTURE_VERSIONED_HOOK.bytes, b, 1, "ok")
                .expect("the versioned hook carries a stamp")
        },
        settle: Duration::from_secs(30),
        pending_bound: Duration::from_secs(60),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rep = rt.block_on(soak::run(opts, dir.path()));
    let text = rep.markdown();
    print!("{text}");
    if let Some(f) = report {
        std::fs::write(&f, &text).unwrap();
    }
    if !rep.violations.is_empty() {
        // Kept for a look: the agent's log and data dir.
        eprintln!("soak dir kept: {}", dir.keep().display());
        std::process::exit(1);
    }
}
