//! Resource use over time, for the UI's charts: every `telemetry { collection_interval }`
//! (Nomad's default 1 s) the client samples the node's CPU and memory and each live
//! allocation's, and keeps the last [`POINTS`] samples of each in a ring. Nomad's UI keeps
//! such a ring in the browser, filled while a page is open; here the agent keeps it, so a
//! chart has its last minutes the moment the page opens.
//!
//! A sample of an allocation is the sum over its running tasks, from their drivers' stats
//! (one call per task per tick, the same call `/v1/client/allocation/{id}/stats` makes);
//! its CPU is in MHz (CPU time over wall time, times the core's frequency), as Nomad's
//! `TotalTicks` is. A ring goes when its allocation's runner goes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Client;

/// Samples kept per ring: a minute at Nomad's 1 s interval.
pub const POINTS: usize = 60;

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// When, ms since the Unix epoch.
    pub at_ms: u64,
    /// CPU: MHz for an allocation, percent of all cores for the node.
    pub cpu: f64,
    /// Memory in use, bytes (an allocation's RSS; the node's total less available).
    pub memory: u64,
}

/// An allocation's ring and its last cumulative CPU reading.
#[derive(Default)]
struct AllocRing {
    points: VecDeque<Point>,
    last_cpu: Option<(Instant, u64)>,
}

/// The node's ring and every live allocation's.
pub struct History {
    pub interval: Duration,
    node: Mutex<VecDeque<Point>>,
    allocs: Mutex<HashMap<String, AllocRing>>,
    /// Its own CPU sampler: `/v1/client/stats`' reads between its own calls.
    cpu: crate::hoststats::CpuSampler,
}

fn push(ring: &mut VecDeque<Point>, p: Point) {
    if ring.len() == POINTS {
        ring.pop_front();
    }
    ring.push_back(p);
}

impl History {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            node: Mutex::default(),
            allocs: Mutex::default(),
            cpu: crate::hoststats::CpuSampler::default(),
        }
    }

    /// The node's samples, oldest first.
    pub fn node(&self) -> Vec<Point> {
        self.node.lock().unwrap().iter().copied().collect()
    }

    /// An allocation's samples, oldest first (none when it has no running task).
    pub fn alloc(&self, id: &str) -> Vec<Point> {
        self.allocs
            .lock()
            .unwrap()
            .get(id)
            .map(|r| r.points.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Record the node's sample.
    fn sample_node(&self, at_ms: u64) {
        let cores = self.cpu.read();
        let cpu = if cores.is_empty() {
            0.0
        } else {
            cores.iter().map(|c| c.total).sum::<f64>() / cores.len() as f64
        };
        let (total, available, _) = crate::node::meminfo();
        push(
            &mut self.node.lock().unwrap(),
            Point {
                at_ms,
                cpu,
                memory: total.saturating_sub(available),
            },
        );
    }

    /// Record an allocation's sample from its tasks' cumulative CPU time and RSS.
    fn sample_alloc(&self, id: &str, at_ms: u64, cpu_ns: u64, rss: u64, core_mhz: f64) {
        let now = Instant::now();
        let mut allocs = self.allocs.lock().unwrap();
        let ring = allocs.entry(id.to_string()).or_default();
        let cpu = match ring.last_cpu.replace((now, cpu_ns)) {
            // A rate needs two readings: the first is kept, not drawn.
            None => return,
            // A restarted task counts from zero again: that interval shows no use.
            Some((then, before)) if cpu_ns >= before => {
                let wall = now.duration_since(then).as_nanos().max(1) as f64;
                (cpu_ns - before) as f64 / wall * core_mhz
            }
            Some(_) => 0.0,
        };
        push(
            &mut ring.points,
            Point {
                at_ms,
                cpu,
                memory: rss,
            },
        );
    }

    /// Drop the rings of allocations no longer in `live`.
    fn keep_only(&self, live: &std::collections::HashSet<String>) {
        self.allocs
            .lock()
            .unwrap()
            .retain(|id, _| live.contains(id));
    }
}

impl Client {
    /// Sample the node and every allocation with a running task, every interval, for as
    /// long as the client lives.
    pub fn spawn_history(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let interval = self.history.interval;
        self.work.spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(c) = weak.upgrade() else { return };
                c.sample_history().await;
            }
        });
    }

    /// One round of samples.
    pub async fn sample_history(&self) {
        let at_ms = crate::util::now_nanos() / 1_000_000;
        self.history.sample_node(at_ms);
        let core_mhz = self
            .node
            .attributes
            .get("cpu.frequency")
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(1000.0);
        let mut live = std::collections::HashSet::new();
        let runners: Vec<_> = self
            .allocs
            .read()
            .unwrap()
            .iter()
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect();
        for (id, r) in runners {
            if r.shared().peek(crate::structs::Allocation::is_terminal) {
                continue;
            }
            let (mut cpu_ns, mut rss, mut any) = (0u64, 0u64, false);
            for t in r.tasks() {
                if let Some(u) = t.stats().await {
                    cpu_ns += u.cpu_user_ns + u.cpu_system_ns;
                    rss += u.rss_bytes;
                    any = true;
                }
            }
            if any {
                self.history.sample_alloc(&id, at_ms, cpu_ns, rss, core_mhz);
                live.insert(id);
            }
        }
        self.history.keep_only(&live);
    }

    /// The samples kept for the charts.
    pub fn history(&self) -> &History {
        &self.history
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_the_last_points_and_cpu_is_a_rate() {
        let h = History::new(Duration::from_secs(1));
        for i in 0..(POINTS as u64 + 5) {
            // One core's worth of CPU time per 10 ms of wall time at most.
            h.sample_alloc("a", i, i * 1_000_000, 100 + i, 2000.0);
            std::thread::sleep(Duration::from_millis(1));
        }
        let p = h.alloc("a");
        assert_eq!(p.len(), POINTS);
        assert_eq!(
            p[0].at_ms, 5,
            "the oldest went first (the first reading is not drawn)"
        );
        assert_eq!(p.last().unwrap().memory, 100 + POINTS as u64 + 4);
        // 1 ms of CPU per ≥ 1 ms of wall time: above zero, at most one core (2000 MHz).
        assert!(p.iter().all(|p| p.cpu > 0.0 && p.cpu <= 2000.0), "{p:?}");
        // A restart's counter going back shows no use, not a huge number.
        h.sample_alloc("a", 1000, 0, 1, 2000.0);
        assert_eq!(h.alloc("a").last().unwrap().cpu, 0.0);
        h.keep_only(&Default::default());
        assert!(h.alloc("a").is_empty());
        h.sample_node(1);
        let n = h.node();
        assert_eq!(n.len(), 1);
        assert!(
            n[0].memory > 0 && (0.0..=100.0).contains(&n[0].cpu),
            "{n:?}"
        );
    }
}
