//! The agent's metrics model: Nomad's client metrics (allocations by state, restarts,
//! per-task CPU and memory, host memory) under Nomad's names, plus the component runtime's
//! (calls, latency histograms, traps, deadline hits, memory-cap hits, warm-store reuse,
//! compile cache). The agent collects the samples ([`crate::agent::Agent::metrics`]); the
//! API renders them as go-metrics JSON or Prometheus text.
//!
//! Names are dotted (`nomad.client.allocations.running`), as Nomad shows them in JSON.

pub use crate::runtime::metrics::LATENCY_BUCKETS;

pub type Labels = Vec<(&'static str, String)>;

/// One metric sample.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// A value now.
    Gauge(&'static str, Labels, f64),
    /// A count since the agent started.
    Counter(&'static str, Labels, f64),
    /// Cumulative bucket counts (per [`LATENCY_BUCKETS`]), count, sum (seconds).
    Histogram(&'static str, Labels, Vec<u64>, u64, f64),
}

impl Metric {
    /// Its dotted name.
    pub fn name(&self) -> &'static str {
        match self {
            Metric::Gauge(n, ..) | Metric::Counter(n, ..) | Metric::Histogram(n, ..) => n,
        }
    }
}

/// One line of help per metric name.
pub const HELP: &[(&str, &str)] = &[
    (
        "nomad.client.allocations.running",
        "Allocations running on this node",
    ),
    (
        "nomad.client.allocations.pending",
        "Allocations pending on this node",
    ),
    (
        "nomad.client.allocations.terminal",
        "Allocations complete, failed or lost on this node",
    ),
    (
        "nomad.client.allocations.blocked",
        "Allocations blocked on this node (always 0: placement is immediate)",
    ),
    (
        "nomad.client.allocations.migrating",
        "Allocations migrating (always 0 on a single node)",
    ),
    (
        "nomad.client.allocs.restart",
        "Restarts of a task since its allocation was placed",
    ),
    (
        "nomad.client.allocs.memory.rss",
        "Task resident memory, bytes",
    ),
    (
        "nomad.client.allocs.memory.usage",
        "Task memory usage, bytes",
    ),
    (
        "nomad.client.allocs.cpu.total_ticks",
        "Task CPU time (user + system), ns",
    ),
    ("nomad.client.allocs.cpu.user", "Task user CPU time, ns"),
    ("nomad.client.allocs.cpu.system", "Task system CPU time, ns"),
    ("nomad.client.host.memory.total", "Host memory, bytes"),
    (
        "nomad.client.host.memory.available",
        "Host memory available, bytes",
    ),
    ("nomad.client.uptime", "Host uptime, seconds"),
    (
        "nomad.client.host.device.healthy",
        "Whether a device instance is healthy (1) or not (0)",
    ),
    (
        "nomad.client.host.device.summary",
        "A device instance's headline statistic, in its unit",
    ),
    (
        "nomad.client.host.device.stat",
        "One of a device instance's statistics, by name, in its unit",
    ),
    (
        "paddock.component.calls",
        "Calls into a component, by operation",
    ),
    (
        "paddock.component.call_seconds",
        "Latency of calls into a component, seconds",
    ),
    (
        "paddock.component.traps",
        "Calls that trapped (guest panic, unreachable, ...)",
    ),
    (
        "paddock.component.deadline_hits",
        "Calls that missed their deadline",
    ),
    (
        "paddock.component.memory_cap_hits",
        "Calls that hit the component's memory cap",
    ),
    (
        "paddock.component.warm_calls",
        "Calls served by a warm (reused) store",
    ),
    ("paddock.components.loaded", "Components loaded, by world"),
    (
        "paddock.client.service_checks",
        "Nomad-native service checks the client runs, by status (success, failure, pending)",
    ),
    (
        "paddock.client.service_check_probes",
        "Service check probes run, by result (passed, failed)",
    ),
    (
        "paddock.component.swaps",
        "Component versions installed over a running version (hot swaps)",
    ),
    (
        "paddock.component.refusals",
        "Component files refused (the running version stayed)",
    ),
    (
        "paddock.component.reverts",
        "Component versions rolled back by auto_revert",
    ),
    (
        "paddock.component.swap_first_call_seconds",
        "Time from a component file's event to the first call on the version it made, seconds",
    ),
    (
        "paddock.compile_cache.hits",
        "Component loads served by the compile cache",
    ),
    (
        "paddock.compile_cache.misses",
        "Component loads that compiled",
    ),
];
