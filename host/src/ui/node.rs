//! `/ui/node` (attributes, drivers, devices, node events) and `/ui/components` (every
//! loaded component with its identity, grants, limits, calls and call latency).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::AppState;
use super::{Tab, label, page, time_el, when};
use crate::metrics::{LATENCY_BUCKETS, Metric};

/// `GET /ui/node`.
pub(super) async fn node(State(agent): State<AppState>) -> Response {
    let n = agent.node_view();
    let body = html! {
        h1 { "Node " (n.name) }
        div #node data-live {
            dl.facts {
                dt { "ID" } dd { code { (n.id) } }
                dt { "Datacenter" } dd { (n.datacenter) }
                dt { "Class" } dd { @if n.node_class.is_empty() { "none" } @else { (n.node_class) } }
                dt { "Computed class" } dd { code { (n.computed_class) } }
                dt { "Status" } dd { span class=(format!("status {}", n.status)) { (n.status) } }
                dt { "Eligibility" } dd { (label(&n.scheduling_eligibility)) }
                dt { "Draining" } dd { (if n.drain { "yes" } else { "no" }) }
                dt { "HTTP address" } dd { (n.http_addr) }
            }
            h2 { "Drivers" }
            div.scroll { table.drivers {
                thead { tr {
                    th scope="col" { "Driver" } th scope="col" { "Detected" } th scope="col" { "Health" }
                    th scope="col" { "Reason" } th scope="col" { "Updated" }
                } }
                tbody {
                    @for (name, d) in &n.drivers {
                        @let health = if d.healthy { "healthy" } else { "unhealthy" };
                        tr data-driver=(name) {
                            th scope="row" { (name) }
                            td { (if d.detected { "yes" } else { "no" }) }
                            td { span class=(format!("status {health}")) { (health) } }
                            td { (d.health_description) }
                            td { (time_el(d.update_time)) }
                        }
                    }
                }
            } }
            h2 { "Devices" }
            @if n.node_resources.devices.is_empty() {
                p.empty { "No devices." }
            } @else {
                div.scroll { table.devices {
                    thead { tr {
                        th scope="col" { "Device" } th scope="col" { "Instance" }
                        th scope="col" { "Health" } th scope="col" { "Reason" }
                    } }
                    tbody {
                        @for d in &n.node_resources.devices {
                            @for i in &d.instances {
                                @let health = if i.healthy { "healthy" } else { "unhealthy" };
                                tr {
                                    td { (d.vendor) "/" (d.device_type) "/" (d.name) }
                                    td { code { (i.id) } }
                                    td { span class=(format!("status {health}")) { (health) } }
                                    td { (i.health_description) }
                                }
                            }
                        }
                    }
                } }
            }
            h2 { "Node events" }
            @if n.events.is_empty() {
                p.empty { "No events." }
            } @else {
                ol.timeline {
                    @for e in n.events.iter().rev() {
                        li { (time_el(e.timestamp)) " " strong { (e.subsystem) } " " span.msg { (e.message) } }
                    }
                }
            }
        }
        h2 { "Attributes" }
        details {
            summary { (n.attributes.len()) " attributes" }
            div.scroll { table.attrs {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Value" } } }
                tbody {
                    @for (k, v) in &n.attributes { tr { th scope="row" { code { (k) } } td { (v) } } }
                }
            } }
        }
    };
    page("Node", Tab::Node, Some("/v1/node/self"), body).into_response()
}

/// One component's calls, traps and latency, summed over its operations.
#[derive(Default)]
struct Calls {
    traps: f64,
    buckets: Vec<u64>,
    count: u64,
}

/// The bound under which a share `q` of the calls finished (`>5s` past the last bucket).
fn quantile(c: &Calls, q: f64) -> String {
    if c.count == 0 {
        return "–".into();
    }
    let want = (q * c.count as f64).ceil() as u64;
    for (bound, n) in LATENCY_BUCKETS.iter().zip(&c.buckets) {
        if *n >= want {
            return if *bound < 0.001 {
                format!("≤{}µs", (bound * 1e6).round())
            } else if *bound < 1.0 {
                format!("≤{}ms", (bound * 1e3).round())
            } else {
                format!("≤{bound}s")
            };
        }
    }
    format!(">{}s", LATENCY_BUCKETS[LATENCY_BUCKETS.len() - 1])
}

/// `GET /ui/components`.
pub(super) async fn components(State(agent): State<AppState>) -> Response {
    let mut calls: BTreeMap<String, Calls> = BTreeMap::new();
    for m in agent.metrics().await {
        let component = |l: &crate::metrics::Labels| {
            l.iter()
                .find(|(k, _)| *k == "component")
                .map(|(_, v)| v.clone())
        };
        match m {
            Metric::Counter("paddock.component.traps", l, v) => {
                if let Some(c) = component(&l) {
                    calls.entry(c).or_default().traps += v;
                }
            }
            Metric::Histogram("paddock.component.call_seconds", l, buckets, count, _) => {
                if let Some(c) = component(&l) {
                    let e = calls.entry(c).or_default();
                    e.buckets.resize(buckets.len().max(e.buckets.len()), 0);
                    for (a, b) in e.buckets.iter_mut().zip(&buckets) {
                        *a += b;
                    }
                    e.count += count;
                }
            }
            _ => {}
        }
    }
    let list = agent.components();
    let none = Calls::default();
    let body = html! {
        h1 { "Components" }
        div #components data-live {
            @if list.is_empty() { p.empty { "No components loaded." } }
            @for c in &list {
                @let state = label(&c.state);
                @let m = calls.get(&c.name).unwrap_or(&none);
                @let title = if c.name.is_empty() { c.source.clone() } else { c.name.clone() };
                section.component data-component=(c.name) aria-label=(title) {
                    h2 { (title) " " span class=(format!("status {}", state.to_lowercase())) { (state) } }
                    @if !c.reason.is_empty() { p.error { (c.reason) } }
                    dl.facts {
                        dt { "World" } dd { (c.world) }
                        dt { "Version" } dd { (c.plugin_version) " (contract " (c.contract_version) ")" }
                        dt { "SHA-256" } dd { code title=(c.sha256) { (c.sha256.get(..16).unwrap_or(&c.sha256)) } }
                        @if !c.previous_sha256.is_empty() {
                            dt { "Previous version" } dd { code title=(c.previous_sha256) { (c.previous_sha256.get(..16).unwrap_or(&c.previous_sha256)) } }
                        }
                        dt { "Source" } dd { (c.source) }
                        dt { "Loaded" } dd { (when(c.loaded_at)) " in " (format!("{:.1}", c.load_millis)) " ms" }
                        dt { "Grants" } dd { @if c.grants.is_empty() { "none" } @else { (c.grants.join(", ")) } }
                        dt { "Limits" } dd {
                            (c.memory_mb) " MiB memory, " (c.call_timeout_millis) " ms per call, "
                            (c.instance_reuse) " calls per instance"
                        }
                        dt { "Calls" } dd { (c.calls) }
                        dt { "Errors" } dd { (c.errors) }
                        dt { "Traps" } dd { (m.traps) }
                        dt { "Latency p50 / p99" } dd { (quantile(m, 0.5)) " / " (quantile(m, 0.99)) }
                        @if !c.tasks.is_empty() { dt { "Tasks" } dd { (c.tasks.join(", ")) } }
                    }
                }
            }
        }
    };
    page("Components", Tab::Components, None, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_read_cumulative_buckets() {
        let mut b = vec![0u64; LATENCY_BUCKETS.len()];
        // 90 calls within 1ms, all 100 within 50ms.
        for (i, v) in b.iter_mut().enumerate() {
            *v = if i < 4 {
                0
            } else if i < 7 {
                90
            } else {
                100
            };
        }
        let c = Calls {
            traps: 0.0,
            buckets: b,
            count: 100,
        };
        assert_eq!(quantile(&c, 0.5), "≤1ms");
        assert_eq!(quantile(&c, 0.99), "≤50ms");
    }
}
