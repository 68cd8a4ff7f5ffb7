//! Registered services with their checks' states, for the allocation page (its services)
//! and the job page (every allocation's): the same table, from the server's registry and
//! the client's check results.

use maud::{Markup, html};

use super::{AppState, enc, short};
use crate::structs::{Allocation, ServiceRegistration, ServiceSpec};

/// Whether a group or a task of the allocation's job has a `service` block.
fn has_services(a: &Allocation) -> bool {
    a.group().is_some_and(|g| {
        std::iter::once(&g.kept)
            .chain(g.tasks.iter().map(|t| &t.kept))
            .any(|k| !ServiceSpec::list(k).is_empty())
    })
}

/// A check status as the stylesheet colours it.
fn check_class(status: &str) -> &'static str {
    match status {
        "success" => "healthy",
        "failure" => "unhealthy",
        _ => "pending",
    }
}

/// The registrations with each one's checks; `with_alloc` adds the allocation column.
fn table(agent: &AppState, regs: &[ServiceRegistration], with_alloc: bool) -> Markup {
    html! {
        div.scroll { table.services {
            thead { tr {
                th scope="col" { "Service" }
                @if with_alloc { th scope="col" { "Allocation" } }
                th scope="col" { "Address" }
                th scope="col" { "Tags" } th scope="col" { "Checks" }
            } }
            tbody {
                @for r in regs {
                    @let checks = agent.client().check_results(&r.alloc_id);
                    tr data-service=(r.service_name) {
                        td { (r.service_name) }
                        @if with_alloc {
                            td { a href=(format!("/ui/allocations/{}", enc(&r.alloc_id))) { code { (short(&r.alloc_id)) } } }
                        }
                        td { code { (r.address) @if r.port > 0 { ":" (r.port) } } }
                        td { (r.tags.join(", ")) }
                        td {
                            @let mine: Vec<_> = checks.values().filter(|c| c.service == r.service_name).collect();
                            @if mine.is_empty() { span.empty { "none" } }
                            @for c in mine {
                                span.check data-check=(c.check) title=(c.output) {
                                    (c.check) " " span class=(format!("status {}", check_class(c.status))) { (c.status) }
                                }
                                " "
                            }
                        }
                    }
                }
            }
        } }
    }
}

/// An allocation's registered services with their checks' states (`None` when its job
/// has no service).
pub(super) fn of_alloc(agent: &AppState, a: &Allocation) -> Option<Markup> {
    if !has_services(a) {
        return None;
    }
    let regs = agent.server().alloc_services(&a.id);
    Some(html! {
        @if regs.is_empty() {
            p.empty { "Not registered: a service is registered while its task runs." }
        } @else {
            (table(agent, &regs, false))
        }
    })
}

/// A job's registered services, every allocation's (`None` when none is registered).
pub(super) fn of_job(agent: &AppState, namespace: &str, job_id: &str) -> Option<Markup> {
    let regs: Vec<ServiceRegistration> = agent
        .server()
        .service_registrations(|ns| ns == namespace)
        .into_iter()
        .filter(|r| r.job_id == job_id)
        .collect();
    (!regs.is_empty()).then(|| table(agent, &regs, true))
}
