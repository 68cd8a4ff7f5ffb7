//! A short soak in CI: 56 seconds of the soak bench's mix (tests/soak/) against the debug
//! agent, with a restart about every 16 seconds (two `kill -9` for each SIGTERM) and a
//! full check every 12; every invariant must hold after every restart and at the end. Without injected state DB faults:
//! an 8-minute soak with them (faults 1 in 50) still saw a raw_exec service short of its
//! Count at one check, not yet traced, and a CI run must not fail by chance; the faults'
//! known effects have deterministic tests (`outage::`, `disk_full::`), and the bench runs
//! the soak with them.

use std::time::Duration;

#[path = "../../soak/mod.rs"]
mod tool;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_keeps_every_invariant() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tool::Options {
        duration: Duration::from_secs(56),
        seed: 7,
        agent_bin: crate::harness::agent_bin(),
        kill_every: Duration::from_secs(16),
        check_every: Duration::from_secs(12),
        fault_one_in: 0,
        max_jobs: 25,
        hook: |b| {
            guest_artifacts::restamp(guest_artifacts::FIXTURE_VERSIONED_HOOK.bytes, b, 1, "ok")
                .expect("the versioned hook carries a stamp")
        },
        settle: Duration::from_secs(30),
        pending_bound: Duration::from_secs(60),
    };
    let rep = tool::run(opts, dir.path()).await;
    let text = rep.markdown();
    // Enough of each kind happened for the invariants to mean something.
    assert!(rep.kills >= 3, "{text}");
    assert!(
        rep.swaps >= 1 && rep.ops.get("restart_alloc").is_some_and(|o| o.0 > 0),
        "{text}"
    );
    assert!(rep.jobs_registered >= 20, "{text}");
    assert!(rep.checks >= 5, "{text}");
    assert!(rep.violations.is_empty(), "{text}");
}
