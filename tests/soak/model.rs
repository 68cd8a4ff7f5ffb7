//! What the soak asked for and the agent acknowledged: the jobs, their kinds, whether a
//! stop or purge was answered 200, and the allocations seen for them. The invariants are
//! checked against this record.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde_json::{Value, json};

/// A small, seeded generator (xorshift64*), so a run can be repeated.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The kinds of job the soak registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A service of mock tasks that run for an hour.
    MockService,
    /// A service of raw_exec `sleep` processes that ignore SIGHUP and SIGUSR1.
    RawService,
    /// A batch of short mock tasks.
    Batch,
    /// A batch whose mock driver misbehaves (traps, loops, hangs, eats memory) in one op.
    Misbehaving,
}

impl Kind {
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::MockService => "svc-mock",
            Kind::RawService => "svc-raw",
            Kind::Batch => "batch",
            Kind::Misbehaving => "bad",
        }
    }

    /// Services keep `Count` allocations running.
    pub fn is_service(self) -> bool {
        matches!(self, Kind::MockService | Kind::RawService)
    }
}

/// Where a job stands by the answers the agent gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// Registration answered 200, no stop since.
    Registered,
    /// Stop (`DELETE`) answered 200.
    Stopped,
    /// Purge answered 200.
    Purged,
}

/// One job of the soak.
pub struct JobRec {
    pub id: String,
    pub kind: Kind,
    pub count: u32,
    pub ack: Ack,
    /// An answer was not 200 (or never came) for a change: the agent may or may not
    /// have applied it; the job is read back before it is held to anything again.
    pub uncertain: bool,
    /// Allocations seen non-terminal with desired status `run` at the last check.
    pub live_allocs: BTreeSet<String>,
    /// Every allocation ever seen for the job.
    pub seen_allocs: BTreeSet<String>,
}

/// The soak's record.
#[derive(Default)]
pub struct Model {
    pub jobs: BTreeMap<String, JobRec>,
    pub next_id: u64,
    /// Allocations first seen `pending`, and when (agent uptime counted from there).
    pub pending_since: BTreeMap<String, Instant>,
}

impl Model {
    /// Jobs not purged.
    pub fn live(&self) -> impl Iterator<Item = &JobRec> {
        self.jobs.values().filter(|j| j.ack != Ack::Purged)
    }
}

/// The job body for `kind`, with `token` in every task's env (to find raw_exec processes).
pub fn job_body(rng: &mut Rng, id: &str, kind: Kind, token: &str) -> (Value, u32) {
    let env = json!({ "PADDOCK_SOAK": token });
    let (typ, count, restart, task) = match kind {
        Kind::MockService => {
            let count = 1 + rng.below(3) as u32;
            (
                "service",
                count,
                json!({ "Attempts": 2, "Interval": 1_800_000_000_000u64, "Delay": 200_000_000u64, "Mode": "fail" }),
                json!({ "Name": "t", "Driver": "mock", "Env": env,
                    "Config": { "run_for": "1h" } }),
            )
        }
        Kind::RawService => {
            let count = 1 + rng.below(2) as u32;
            (
                "service",
                count,
                json!({ "Attempts": 2, "Interval": 1_800_000_000_000u64, "Delay": 200_000_000u64, "Mode": "fail" }),
                json!({ "Name": "t", "Driver": "raw_exec", "Env": env,
                    "Config": { "command": "/bin/sh",
                        "args": ["-c", "trap '' HUP USR1; exec sleep 3600"] } }),
            )
        }
        Kind::Batch => {
            let count = 1 + rng.below(3) as u32;
            let ms = 50 + rng.below(2000);
            (
                "batch",
                count,
                json!({ "Attempts": 0, "Mode": "fail" }),
                json!({ "Name": "t", "Driver": "mock", "Env": env,
                    "Config": { "run_for": format!("{ms}ms") } }),
            )
        }
        Kind::Misbehaving => {
            let op = *rng.pick(&["start", "wait", "stop", "signal", "inspect"]);
            let how = *rng.pick(&["trap", "loop", "hang", "oom"]);
            (
                "batch",
                1,
                json!({ "Attempts": 0, "Mode": "fail" }),
                json!({ "Name": "t", "Driver": "mock", "Env": env,
                    "Config": { "run_for": "1h", "misbehave": { "op": op, "kind": how } } }),
            )
        }
    };
    let job = json!({ "ID": id, "Type": typ, "TaskGroups": [{ "Name": "g", "Count": count,
        "RestartPolicy": restart, "Tasks": [task] }] });
    (job, count)
}
