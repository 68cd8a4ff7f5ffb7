//! Collecting the metrics model ([`crate::metrics`]) from the agent's allocations, their
//! tasks' drivers and the component runtime.

use std::collections::BTreeMap;

use super::Agent;
use crate::metrics::{Labels, Metric};
use crate::structs::ClientStatus;

impl Agent {
    /// Every metric sample now; running tasks' usage is asked of their drivers.
    pub async fn metrics(&self) -> Vec<Metric> {
        let node = self.node();
        let node_labels: Labels = vec![
            ("node_id", node.id.clone()),
            ("datacenter", node.datacenter.clone()),
            ("node_class", node.class.clone()),
        ];
        let mut out = Vec::new();
        self.alloc_metrics(&node_labels, &mut out).await;
        host_metrics(&node_labels, &mut out);
        self.device_metrics(&node_labels, &mut out).await;
        self.component_metrics(&mut out);
        self.queue_and_state_metrics(&mut out);
        let (by_status, passed, failed) = self.client.checks().counts();
        for (status, n) in by_status {
            out.push(Metric::Gauge(
                "paddock.client.service_checks",
                vec![("status", status.to_string())],
                n as f64,
            ));
        }
        for (result, n) in [("passed", passed), ("failed", failed)] {
            out.push(Metric::Counter(
                "paddock.client.service_check_probes",
                vec![("result", result.to_string())],
                n as f64,
            ));
        }
        out
    }

    /// Allocations by client status, task restarts, and the usage of running tasks.
    async fn alloc_metrics(&self, node_labels: &Labels, out: &mut Vec<Metric>) {
        let node_labels = || node_labels.clone();
        let allocs = self.allocations();
        let count = |f: &dyn Fn(ClientStatus) -> bool| {
            allocs.iter().filter(|a| f(a.client_status)).count() as f64
        };
        out.push(Metric::Gauge(
            "nomad.client.allocations.running",
            node_labels(),
            count(&|s| s == ClientStatus::Running),
        ));
        out.push(Metric::Gauge(
            "nomad.client.allocations.pending",
            node_labels(),
            count(&|s| s == ClientStatus::Pending),
        ));
        out.push(Metric::Gauge(
            "nomad.client.allocations.terminal",
            node_labels(),
            count(&|s| s != ClientStatus::Running && s != ClientStatus::Pending),
        ));
        out.push(Metric::Gauge(
            "nomad.client.allocations.blocked",
            node_labels(),
            0.0,
        ));
        out.push(Metric::Gauge(
            "nomad.client.allocations.migrating",
            node_labels(),
            0.0,
        ));

        for a in &allocs {
            for (task, state) in &a.task_states {
                out.push(Metric::Counter(
                    "nomad.client.allocs.restart",
                    task_labels(a, task),
                    state.restarts as f64,
                ));
            }
        }
        // Per-task usage of running allocations, asked of their drivers now.
        for a in allocs
            .iter()
            .filter(|a| a.client_status == ClientStatus::Running)
        {
            let Some(runner) = self.alloc_runner(&a.id) else {
                continue;
            };
            for t in runner.tasks() {
                let Some(u) = t.stats().await else { continue };
                let labels = task_labels(a, t.name());
                for (name, v) in [
                    ("nomad.client.allocs.memory.rss", u.rss_bytes),
                    ("nomad.client.allocs.memory.usage", u.rss_bytes),
                    ("nomad.client.allocs.cpu.user", u.cpu_user_ns),
                    ("nomad.client.allocs.cpu.system", u.cpu_system_ns),
                    (
                        "nomad.client.allocs.cpu.total_ticks",
                        u.cpu_user_ns + u.cpu_system_ns,
                    ),
                ] {
                    out.push(Metric::Gauge(name, labels.clone(), v as f64));
                }
            }
        }
    }

    /// The component runtime: calls per component and operation, loaded components, hot
    /// swaps, the compile cache.
    fn component_metrics(&self, out: &mut Vec<Metric>) {
        let rt = &self.runtime;
        for ((component, world, op), s) in rt.metrics.snapshot() {
            let labels: Labels = vec![
                ("component", component),
                ("world", world.to_string()),
                ("op", op.to_string()),
            ];
            for (name, v) in [
                ("paddock.component.calls", s.calls),
                ("paddock.component.traps", s.traps),
                ("paddock.component.deadline_hits", s.deadlines),
                ("paddock.component.memory_cap_hits", s.out_of_memory),
                ("paddock.component.warm_calls", s.warm),
            ] {
                out.push(Metric::Counter(name, labels.clone(), v as f64));
            }
            out.push(Metric::Histogram(
                "paddock.component.call_seconds",
                labels,
                s.buckets,
                s.calls,
                s.sum_seconds,
            ));
        }
        let mut by_world: BTreeMap<&'static str, usize> = BTreeMap::new();
        for c in rt.registry.list() {
            *by_world.entry(c.world.as_str()).or_default() += 1;
        }
        for (world, n) in by_world {
            out.push(Metric::Gauge(
                "paddock.components.loaded",
                vec![("world", world.to_string())],
                n as f64,
            ));
        }
        let swaps = self.swap_metrics();
        for (name, v) in [
            ("paddock.component.swaps", &swaps.swaps),
            ("paddock.component.refusals", &swaps.refusals),
            ("paddock.component.reverts", &swaps.reverts),
        ] {
            out.push(Metric::Counter(
                name,
                Vec::new(),
                v.load(std::sync::atomic::Ordering::Relaxed) as f64,
            ));
        }
        let first = swaps.first_call.snapshot();
        out.push(Metric::Histogram(
            "paddock.component.swap_first_call_seconds",
            Vec::new(),
            first.buckets,
            first.calls,
            first.sum_seconds,
        ));
        let (hits, misses) = rt.metrics.cache();
        out.push(Metric::Counter(
            "paddock.compile_cache.hits",
            Vec::new(),
            hits as f64,
        ));
        out.push(Metric::Counter(
            "paddock.compile_cache.misses",
            Vec::new(),
            misses as f64,
        ));
    }

    /// The driver start queue and the state DB's writes.
    fn queue_and_state_metrics(&self, out: &mut Vec<Metric>) {
        let q = self.client.plugins().drivers.start_queue().stats();
        let limits = self.client.plugins().drivers.start_queue().limits();
        for (name, v) in [
            ("paddock.client.start_queue.waiting", q.waiting as f64),
            ("paddock.client.start_queue.running", q.running as f64),
            (
                "paddock.client.start_queue.parallel",
                limits.parallel as f64,
            ),
            ("paddock.client.start_queue.bound", limits.bound as f64),
            // 1 while the state DB takes writes, 0 while a full or failing disk stops them.
            (
                "paddock.state.writable",
                if self.db.unwritable().is_none() {
                    1.0
                } else {
                    0.0
                },
            ),
        ] {
            out.push(Metric::Gauge(name, Vec::new(), v));
        }
        let c = self.db.commit_stats();
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        for (name, v) in [
            ("paddock.client.start_queue.started", q.started as f64),
            ("paddock.client.start_queue.queued", q.queued as f64),
            ("paddock.client.start_queue.held_back", q.held_back as f64),
            (
                "paddock.client.start_queue.wait_seconds",
                q.wait_ns as f64 / 1e9,
            ),
            ("paddock.state.writes", get(&c.writes) as f64),
            ("paddock.state.commits", get(&c.commits) as f64),
            ("paddock.state.writes_deduplicated", get(&c.skipped) as f64),
            ("paddock.state.commit_failures", get(&c.failures) as f64),
        ] {
            out.push(Metric::Counter(name, Vec::new(), v));
        }
    }
}

/// The host's memory and uptime.
fn host_metrics(node_labels: &Labels, out: &mut Vec<Metric>) {
    let node_labels = || node_labels.clone();
    let (total, available, _) = crate::node::meminfo();
    out.push(Metric::Gauge(
        "nomad.client.host.memory.total",
        node_labels(),
        total as f64,
    ));
    out.push(Metric::Gauge(
        "nomad.client.host.memory.available",
        node_labels(),
        available as f64,
    ));
    out.push(Metric::Gauge(
        "nomad.client.uptime",
        node_labels(),
        crate::node::uptime_secs() as f64,
    ));
}

impl Agent {
    /// Why the state DB refuses writes now (a full or failing disk), or `None` while it
    /// takes them: the API answers writes 503 meanwhile.
    pub fn state_unwritable(&self) -> Option<String> {
        self.db.unwritable()
    }
}

impl Agent {
    /// Per device instance: whether it is healthy, and its latest stats (the summary and
    /// every numeric statistic), labelled with the node's labels and the instance's
    /// `device_vendor`, `device_type`, `device_name` and `device_id`. Nomad's client emits
    /// no device metrics; these follow its host metrics (`nomad.client.host.*`).
    async fn device_metrics(&self, node: &Labels, out: &mut Vec<Metric>) {
        let labels = |vendor: &str, kind: &str, name: &str, id: &str| -> Labels {
            let mut l = node.clone();
            l.extend([
                ("device_vendor", vendor.to_string()),
                ("device_type", kind.to_string()),
                ("device_name", name.to_string()),
                ("device_id", id.to_string()),
            ]);
            l
        };
        for g in self.client.plugins().devices.node_devices() {
            for d in &g.instances {
                out.push(Metric::Gauge(
                    "nomad.client.host.device.healthy",
                    labels(&g.vendor, &g.device_type, &g.name, &d.id),
                    if d.healthy { 1.0 } else { 0.0 },
                ));
            }
        }
        for g in self.client.plugins().devices.stats().await {
            for (id, s) in &g.instance_stats {
                let base = labels(&g.vendor, &g.device_type, &g.name, id);
                if let Some(v) = s.summary.number {
                    let mut l = base.clone();
                    l.push(("unit", s.summary.unit.clone()));
                    out.push(Metric::Gauge("nomad.client.host.device.summary", l, v));
                }
                for (stat, v) in &s.stats.attributes {
                    let Some(n) = v.number else { continue };
                    let mut l = base.clone();
                    l.extend([("stat", stat.clone()), ("unit", v.unit.clone())]);
                    out.push(Metric::Gauge("nomad.client.host.device.stat", l, n));
                }
            }
        }
    }
}

fn task_labels(a: &crate::structs::Allocation, task: &str) -> Labels {
    vec![
        ("alloc_id", a.id.clone()),
        ("job", a.job_id.clone()),
        ("task_group", a.task_group.clone()),
        ("task", task.to_string()),
        ("namespace", a.namespace.clone()),
    ]
}
