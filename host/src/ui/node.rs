//! `/ui/node`: CPU and memory over time, the allocations by their share of the node,
//! attributes, drivers, devices, node events.

use axum::Extension;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::AppState;
use super::auth::Viewer;
use super::charts;
use super::{Tab, label, page, time_el};

/// `GET /ui/node`.
pub(super) async fn node(
    State(agent): State<AppState>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let n = agent.node_view();
    let body = html! {
        h1 { "Node " (n.name) }
        section.usage aria-labelledby="usage-h" {
            h2 #usage-h { "Resource use" }
            div #usage data-live data-poll=(charts::poll_ms(&agent)) { (charts::node_usage(&agent)) }
        }
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
            h2 { "Allocations" }
            (charts::topology(&agent, &viewer, &n))
            h2 { "Drivers" }
            (drivers_table(&n))
            h2 { "Devices" }
            (devices_table(&n))
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

/// The node's drivers with their health.
fn drivers_table(n: &crate::agent::NodeView) -> Markup {
    html! {
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
    }
}

/// The node's device instances with their health.
fn devices_table(n: &crate::agent::NodeView) -> Markup {
    html! {
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
    }
}
