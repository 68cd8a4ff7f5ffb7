//! `/v1/metrics`: Nomad's client metrics (allocations by state, restarts, per-task CPU and
//! memory, host memory) under Nomad's names, plus Paddock's component runtime metrics
//! (calls, latency histograms, traps, deadline hits, memory-cap hits, warm-store reuse,
//! compile cache). JSON in go-metrics' shape by default (`Gauges`, `Counters`, `Samples`),
//! Prometheus text with `?format=prometheus`.
//!
//! Names are dotted (`nomad.client.allocations.running`) in JSON, as Nomad shows them, and
//! underscored (`nomad_client_allocations_running`) in Prometheus text.

use std::collections::BTreeMap;
use std::fmt::Write;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, AppState, with_index};
use crate::runtime::metrics::LATENCY_BUCKETS;
use crate::structs::client_status;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/v1/metrics", get(metrics))
}

#[derive(Deserialize)]
struct MetricsQuery {
    format: Option<String>,
}

type Labels = Vec<(&'static str, String)>;

/// One metric sample.
enum Metric {
    Gauge(&'static str, Labels, f64),
    Counter(&'static str, Labels, f64),
    /// Cumulative bucket counts (per [`LATENCY_BUCKETS`]), count, sum (seconds).
    Histogram(&'static str, Labels, Vec<u64>, u64, f64),
}

impl Metric {
    fn name(&self) -> &'static str {
        match self {
            Metric::Gauge(n, ..) | Metric::Counter(n, ..) | Metric::Histogram(n, ..) => n,
        }
    }
}

const HELP: &[(&str, &str)] = &[
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
        "paddock.compile_cache.hits",
        "Component loads served by the compile cache",
    ),
    (
        "paddock.compile_cache.misses",
        "Component loads that compiled",
    ),
];

async fn collect(agent: &AppState) -> Vec<Metric> {
    let node = agent.node();
    let node_labels = || -> Labels {
        vec![
            ("node_id", node.id.clone()),
            ("datacenter", node.datacenter.clone()),
            ("node_class", node.class.clone()),
        ]
    };
    let mut out = Vec::new();

    let allocs = agent.allocations();
    let count = |f: &dyn Fn(&str) -> bool| {
        allocs
            .iter()
            .filter(|a| f(a.client_status.as_str()))
            .count() as f64
    };
    out.push(Metric::Gauge(
        "nomad.client.allocations.running",
        node_labels(),
        count(&|s| s == client_status::RUNNING),
    ));
    out.push(Metric::Gauge(
        "nomad.client.allocations.pending",
        node_labels(),
        count(&|s| s == client_status::PENDING),
    ));
    out.push(Metric::Gauge(
        "nomad.client.allocations.terminal",
        node_labels(),
        count(&|s| s != client_status::RUNNING && s != client_status::PENDING),
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
        .filter(|a| a.client_status == client_status::RUNNING)
    {
        let Some(runner) = agent.alloc_runner(&a.id) else {
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

    let (total, available, _) = super::client::meminfo();
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
        super::client::uptime_secs() as f64,
    ));

    let rt = &agent.runtime;
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
    out
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

async fn metrics(
    State(agent): State<AppState>,
    Query(q): Query<MetricsQuery>,
) -> Result<Response, ApiError> {
    let all = collect(&agent).await;
    match q.format.as_deref() {
        None | Some("") | Some("json") => Ok(with_index(agent.changes.index(), &as_json(&all))),
        Some("prometheus") => Ok((
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            as_prometheus(&all),
        )
            .into_response()),
        Some(other) => Err(ApiError::bad_request(format!(
            "format {other:?} is not supported: use json (the default) or prometheus"
        ))),
    }
}

fn labels_json(labels: &Labels) -> serde_json::Value {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// go-metrics' `DisplayMetrics` shape, as Nomad's `/v1/metrics` returns it.
fn as_json(all: &[Metric]) -> serde_json::Value {
    let (mut gauges, mut counters, mut samples) = (Vec::new(), Vec::new(), Vec::new());
    for m in all {
        match m {
            Metric::Gauge(name, labels, v) => gauges.push(json!({
                "Name": name, "Value": v, "Labels": labels_json(labels),
            })),
            Metric::Counter(name, labels, v) => counters.push(json!({
                "Name": name, "Count": v, "Sum": v, "Rate": 0.0, "Labels": labels_json(labels),
            })),
            Metric::Histogram(name, labels, buckets, count, sum) => {
                let b: serde_json::Map<String, serde_json::Value> = LATENCY_BUCKETS
                    .iter()
                    .zip(buckets)
                    .map(|(le, n)| (le.to_string(), json!(n)))
                    .collect();
                samples.push(json!({
                    "Name": name, "Count": count, "Sum": sum,
                    "Mean": if *count == 0 { 0.0 } else { sum / *count as f64 },
                    "Buckets": b, "Labels": labels_json(labels),
                }))
            }
        }
    }
    json!({
        "Timestamp": humantime_utc(),
        "Gauges": gauges, "Counters": counters, "Samples": samples, "Points": [],
    })
}

fn humantime_utc() -> String {
    let (y, m, d, h, mi, sec) = crate::util::utc_datetime(crate::util::now_nanos());
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{sec:02} +0000 UTC")
}

fn prom_name(name: &str) -> String {
    name.replace('.', "_")
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn prom_labels(labels: &Labels, extra: Option<(&str, String)>) -> String {
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .chain(extra.map(|(k, v)| (k.to_string(), v)))
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(&v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

fn prom_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The Prometheus text exposition format (0.0.4): each family once, with HELP and TYPE,
/// its samples together; counters end in `_total`.
fn as_prometheus(all: &[Metric]) -> String {
    let mut families: Vec<&'static str> = Vec::new();
    for m in all {
        if !families.contains(&m.name()) {
            families.push(m.name());
        }
    }
    let mut out = String::new();
    for family in families {
        let members: Vec<&Metric> = all.iter().filter(|m| m.name() == family).collect();
        let help = HELP
            .iter()
            .find(|(n, _)| *n == family)
            .map(|(_, h)| *h)
            .unwrap_or("");
        let base = prom_name(family);
        let (kind, name) = match members[0] {
            Metric::Gauge(..) => ("gauge", base),
            Metric::Counter(..) => ("counter", format!("{base}_total")),
            Metric::Histogram(..) => ("histogram", base),
        };
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for m in members {
            match m {
                Metric::Gauge(_, labels, v) | Metric::Counter(_, labels, v) => {
                    let _ = writeln!(
                        out,
                        "{name}{} {}",
                        prom_labels(labels, None),
                        prom_value(*v)
                    );
                }
                Metric::Histogram(_, labels, buckets, count, sum) => {
                    for (le, n) in LATENCY_BUCKETS.iter().zip(buckets) {
                        let _ = writeln!(
                            out,
                            "{name}_bucket{} {n}",
                            prom_labels(labels, Some(("le", le.to_string())))
                        );
                    }
                    let _ = writeln!(
                        out,
                        "{name}_bucket{} {count}",
                        prom_labels(labels, Some(("le", "+Inf".into())))
                    );
                    let _ = writeln!(out, "{name}_sum{} {sum}", prom_labels(labels, None));
                    let _ = writeln!(out, "{name}_count{} {count}", prom_labels(labels, None));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_groups_families_and_suffixes_counters() {
        let all = vec![
            Metric::Counter(
                "paddock.component.calls",
                vec![("component", "a\"b".into())],
                3.0,
            ),
            Metric::Gauge("nomad.client.allocations.running", Vec::new(), 2.0),
            Metric::Counter(
                "paddock.component.calls",
                vec![("component", "c".into())],
                1.0,
            ),
        ];
        let text = as_prometheus(&all);
        assert_eq!(
            text,
            "# HELP paddock_component_calls_total Calls into a component, by operation\n\
             # TYPE paddock_component_calls_total counter\n\
             paddock_component_calls_total{component=\"a\\\"b\"} 3\n\
             paddock_component_calls_total{component=\"c\"} 1\n\
             # HELP nomad_client_allocations_running Allocations running on this node\n\
             # TYPE nomad_client_allocations_running gauge\n\
             nomad_client_allocations_running 2\n"
        );
    }

    #[test]
    fn the_timestamp_is_a_civil_utc_date() {
        let t = humantime_utc();
        assert!(t.ends_with(" +0000 UTC"), "{t}");
        let year: i32 = t[..4].parse().unwrap();
        assert!(year >= 2024, "{t}");
    }
}
