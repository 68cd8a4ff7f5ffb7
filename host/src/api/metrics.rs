//! `/v1/metrics`: the agent's metrics model ([`crate::metrics`]) rendered as go-metrics'
//! JSON by default (`Gauges`, `Counters`, `Samples`), or as Prometheus text with
//! `?format=prometheus`.
//!
//! Names are dotted (`nomad.client.allocations.running`) in JSON, as Nomad shows them, and
//! underscored (`nomad_client_allocations_running`) in Prometheus text.

use std::fmt::Write;

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::routes::Routes;
use super::{ApiError, AppState, with_index};
use crate::acl::check::Need;
use crate::metrics::{HELP, LATENCY_BUCKETS, Labels, Metric};

pub(super) fn routes() -> Routes {
    // Open, as in Nomad.
    Routes::new().on("GET", "/v1/metrics", metrics, |_| Need::Open)
}

#[derive(Deserialize)]
struct MetricsQuery {
    format: Option<String>,
}

async fn metrics(
    State(agent): State<AppState>,
    Query(q): Query<MetricsQuery>,
) -> Result<Response, ApiError> {
    let all = agent.metrics().await;
    match q.format.as_deref() {
        None | Some("") | Some("json") => Ok(with_index(agent.index(), &as_json(&all))),
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
            // go-metrics' `Count` is an `int`: a count goes out as an integer.
            Metric::Counter(name, labels, v) => counters.push(json!({
                "Name": name, "Count": v.round() as i64, "Sum": v, "Rate": 0.0, "Labels": labels_json(labels),
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
    crate::util::format_now("%Y-%m-%d %H:%M:%S +0000 UTC")
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
