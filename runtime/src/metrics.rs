//! Counters of the component runtime, for `/v1/metrics`: calls per component and
//! operation with their outcome and a latency histogram, warm-store reuse, and compile
//! cache hits. Recording a call is a map lookup at its start and a few relaxed atomic adds
//! at its end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::call::outcome::CallFailure;

/// Upper bounds of the call latency histogram, seconds (a last bucket, +Inf, is implied).
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0,
];

/// The counters of one operation of one component.
#[derive(Default)]
pub struct OpMetrics {
    calls: AtomicU64,
    traps: AtomicU64,
    out_of_memory: AtomicU64,
    deadlines: AtomicU64,
    other_failures: AtomicU64,
    warm: AtomicU64,
    /// `buckets[i]` counts calls slower than `LATENCY_BUCKETS[i - 1]` and no slower than
    /// `LATENCY_BUCKETS[i]` (one add per call; the snapshot makes them cumulative). Calls
    /// slower than every bound are `calls` minus the sum.
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    sum_nanos: AtomicU64,
}

impl OpMetrics {
    /// Count one finished call: how long it took, whether it ran on a warm store, and how
    /// it failed, if it did.
    pub fn record(&self, elapsed: Duration, warm: bool, failure: Option<CallFailure>) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if warm {
            self.warm.fetch_add(1, Ordering::Relaxed);
        }
        match failure {
            None => {}
            Some(CallFailure::Trap) => {
                self.traps.fetch_add(1, Ordering::Relaxed);
            }
            Some(CallFailure::OutOfMemory) => {
                self.out_of_memory.fetch_add(1, Ordering::Relaxed);
            }
            Some(CallFailure::Deadline) => {
                self.deadlines.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => {
                self.other_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        let secs = elapsed.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|bound| secs <= *bound) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.sum_nanos
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }

    /// A copy of the counters, buckets made cumulative.
    pub fn snapshot(&self) -> OpSnapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        OpSnapshot {
            calls: get(&self.calls),
            traps: get(&self.traps),
            out_of_memory: get(&self.out_of_memory),
            deadlines: get(&self.deadlines),
            other_failures: get(&self.other_failures),
            warm: get(&self.warm),
            buckets: self
                .buckets
                .iter()
                .scan(0, |total, b| {
                    *total += get(b);
                    Some(*total)
                })
                .collect(),
            sum_seconds: get(&self.sum_nanos) as f64 / 1e9,
        }
    }
}

/// A copy of one operation's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSnapshot {
    /// Calls finished.
    pub calls: u64,
    /// Calls that trapped.
    pub traps: u64,
    /// Calls that hit the memory cap.
    pub out_of_memory: u64,
    /// Calls that missed their deadline.
    pub deadlines: u64,
    /// Calls that failed otherwise (wrong world, closed, contract mismatch).
    pub other_failures: u64,
    /// Calls served by a warm store.
    pub warm: u64,
    /// Cumulative latency bucket counts, matching [`LATENCY_BUCKETS`].
    pub buckets: Vec<u64>,
    /// Total latency, seconds.
    pub sum_seconds: f64,
}

/// Key of one operation's counters: component name, world, operation.
pub type OpKey = (String, &'static str, &'static str);

/// One component's counters, by (world, operation).
type ComponentOps = BTreeMap<(&'static str, &'static str), Arc<OpMetrics>>;

/// The runtime's counters.
#[derive(Default)]
pub struct RuntimeMetrics {
    /// By component name, then (world, op): looked up with borrowed keys, so finding a
    /// call's counters allocates nothing.
    ops: RwLock<BTreeMap<String, ComponentOps>>,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
}

impl RuntimeMetrics {
    /// The counters of `op` of `component` (created on first use; kept across hot swaps,
    /// since they are keyed by name).
    pub fn op(&self, component: &str, world: &'static str, op: &'static str) -> Arc<OpMetrics> {
        if let Some(m) = self
            .ops
            .read()
            .unwrap()
            .get(component)
            .and_then(|ops| ops.get(&(world, op)))
        {
            return m.clone();
        }
        self.ops
            .write()
            .unwrap()
            .entry(component.to_string())
            .or_default()
            .entry((world, op))
            .or_default()
            .clone()
    }

    /// Count a component load served by (or missing) the compile cache.
    pub fn record_load(&self, hit: bool) {
        if hit {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.cache_misses.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Compile cache hits and misses.
    pub fn cache(&self) -> (u64, u64) {
        (
            self.cache_hits.load(Ordering::Relaxed),
            self.cache_misses.load(Ordering::Relaxed),
        )
    }

    /// Every operation's counters, in key order.
    pub fn snapshot(&self) -> Vec<(OpKey, OpSnapshot)> {
        self.ops
            .read()
            .unwrap()
            .iter()
            .flat_map(|(name, ops)| {
                ops.iter()
                    .map(move |((world, op), m)| ((name.clone(), *world, *op), m.snapshot()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_lands_in_every_bucket_at_or_above_its_latency() {
        let m = RuntimeMetrics::default();
        let op = m.op("mock", "driver", "start");
        op.record(Duration::from_micros(20), true, None);
        op.record(Duration::from_millis(2), false, Some(CallFailure::Trap));
        op.record(Duration::from_secs(10), false, Some(CallFailure::Deadline));
        let snap = m.snapshot();
        assert_eq!(snap.len(), 1);
        let s = &snap[0].1;
        assert_eq!((s.calls, s.warm, s.traps, s.deadlines), (3, 1, 1, 1));
        // 20 µs: from the 50 µs bucket up; 2 ms: from 5 ms; 10 s: only +Inf.
        assert_eq!(s.buckets, [0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2]);
        assert!((s.sum_seconds - 10.002_02).abs() < 1e-9);
        assert!(Arc::ptr_eq(&op, &m.op("mock", "driver", "start")));
    }
}
