//! The soak's figures: operations by kind, kills, faults, checks, the agent's RSS over
//! time and API latency, written as Markdown.

use std::collections::BTreeMap;
use std::fmt::Write;

/// What a soak did and saw.
#[derive(Default)]
pub struct Report {
    pub seed: u64,
    pub minutes: f64,
    /// Operations by kind: (answered 200, answered otherwise or not at all).
    pub ops: BTreeMap<&'static str, (u64, u64)>,
    pub kills: u64,
    pub graceful_restarts: u64,
    pub agent_sighups: u64,
    pub swaps: u64,
    /// Agent lives started with injected state DB faults.
    pub faulty_lives: u64,
    pub lives: u64,
    /// Commits failed on purpose (counted in the agent's log).
    pub faults_injected: u64,
    pub checks: u64,
    /// Broken invariants, with the check they were first found at.
    pub violations: Vec<String>,
    /// Problems seen so far (a problem that holds on is told once).
    pub seen: std::collections::HashSet<String>,
    /// Times a problem already told was seen again at a later check.
    pub repeated: u64,
    /// `(seconds since the start, life, RSS KiB, of which in wasm memory slots KiB)`.
    pub rss: Vec<(f64, u64, u64, u64)>,
    /// API latency by kind of call (ms).
    pub latencies: BTreeMap<&'static str, Vec<f64>>,
    /// Seconds from spawn to a healthy API, per start.
    pub start_times: Vec<f64>,
    pub jobs_registered: u64,
    pub allocs_seen: u64,
    pub hook_build: u32,
}

/// The `q` quantile (0..=1) of `v`, sorted in place.
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

impl Report {
    /// Medians of RSS outside wasm memory slots over the first and last thirds of the run
    /// (MiB).
    pub fn rss_thirds(&self) -> (f64, f64) {
        let end = self.rss.last().map_or(0.0, |r| r.0);
        let third = |lo: f64, hi: f64| {
            let mut v: Vec<f64> = self
                .rss
                .iter()
                .filter(|r| r.0 >= lo && r.0 <= hi)
                .map(|r| r.2.saturating_sub(r.3) as f64 / 1024.0)
                .collect();
            quantile(&mut v, 0.5)
        };
        (third(0.0, end / 3.0), third(end * 2.0 / 3.0, end))
    }

    /// The highest RSS of each life, and the highest part of it in wasm memory slots (MiB),
    /// in order.
    pub fn rss_peaks(&self) -> Vec<(f64, f64)> {
        let mut peaks: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for (_, life, kib, slots) in &self.rss {
            let p = peaks.entry(*life).or_default();
            *p = (p.0.max(*kib), p.1.max(*slots));
        }
        peaks
            .values()
            .map(|(k, s)| (*k as f64 / 1024.0, *s as f64 / 1024.0))
            .collect()
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Soak of {:.1} minutes, seed {}: {} agent lives ({} with injected state DB faults), {} kill -9, {} SIGTERM restarts, {} SIGHUPs, {} hot swaps (last build {}), {} invariant checks.\n",
            self.minutes,
            self.seed,
            self.lives,
            self.faulty_lives,
            self.kills,
            self.graceful_restarts,
            self.agent_sighups,
            self.swaps,
            self.hook_build,
            self.checks
        );
        let _ = writeln!(
            s,
            "Jobs registered: {}; allocations seen: {}; state DB commits failed on purpose: {}.\n",
            self.jobs_registered, self.allocs_seen, self.faults_injected
        );
        let _ = writeln!(s, "| operation | 200 | other or no answer |\n|---|---|---|");
        for (k, (ok, bad)) in &self.ops {
            let _ = writeln!(s, "| {k} | {ok} | {bad} |");
        }
        let mut all: Vec<f64> = self.rss.iter().map(|r| r.2 as f64 / 1024.0).collect();
        let (first, last) = self.rss_thirds();
        let peaks = self.rss_peaks();
        let _ = writeln!(
            s,
            "\nAgent RSS ({} samples): min {:.1} / median {:.1} / max {:.1} MiB; outside wasm memory slots, median of the first third {:.1}, of the last third {:.1} MiB (ratio {:.2}); peak per life (of which in wasm memory slots): {}.\n",
            all.len(),
            quantile(&mut all, 0.0),
            quantile(&mut all, 0.5),
            quantile(&mut all, 1.0),
            first,
            last,
            last / first,
            peaks
                .iter()
                .map(|(p, s)| format!("{p:.1} ({s:.1})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut starts = self.start_times.clone();
        let _ = writeln!(
            s,
            "Start to healthy API: median {:.2} s, max {:.2} s.\n",
            quantile(&mut starts, 0.5),
            quantile(&mut starts, 1.0)
        );
        let _ = writeln!(
            s,
            "| API calls | count | p50 ms | p99 ms |\n|---|---|---|---|"
        );
        let mut every = Vec::new();
        for (k, v) in &self.latencies {
            let mut v = v.clone();
            every.extend_from_slice(&v);
            let _ = writeln!(
                s,
                "| {k} | {} | {:.1} | {:.1} |",
                v.len(),
                quantile(&mut v, 0.5),
                quantile(&mut v, 0.99)
            );
        }
        let _ = writeln!(
            s,
            "| all | {} | {:.1} | {:.1} |",
            every.len(),
            quantile(&mut every, 0.5),
            quantile(&mut every, 0.99)
        );
        if self.violations.is_empty() {
            let _ = writeln!(s, "\nInvariants: all held.");
        } else {
            let _ = writeln!(
                s,
                "\nInvariants broken ({}, each told at the first check that saw it; seen again at later checks {} times):",
                self.violations.len(),
                self.repeated
            );
            for v in &self.violations {
                let _ = writeln!(s, "- {v}");
            }
        }
        s
    }
}
