//! `/ui/jobs` (every job, filtered by namespace and text) and `/ui/jobs/{id}` (a job's
//! groups, its latest deployment with promote and fail, allocations, evaluations and
//! definition).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::AppState;
use super::{Tab, age, enc, error_page, job_href, label, page, short, time_el};
use crate::agent::GroupSummary;

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ListQuery {
    /// Namespace to show (empty or `*`: all).
    #[serde(default)]
    namespace: String,
    /// Text the job's id or name contains.
    #[serde(default)]
    q: String,
}

/// A group summary's counts by client status.
fn counts(s: &GroupSummary) -> [(&'static str, u64); 6] {
    [
        ("running", s.running),
        ("starting", s.starting),
        ("queued", s.queued),
        ("complete", s.complete),
        ("failed", s.failed),
        ("lost", s.lost + s.unknown),
    ]
}

/// Allocation counts by client status as a small stacked bar with its numbers.
fn bar<'a>(groups: impl Iterator<Item = &'a GroupSummary>) -> Markup {
    let mut total = [0u64; 6];
    let names = [
        "running", "starting", "queued", "complete", "failed", "lost",
    ];
    for g in groups {
        for (i, (_, n)) in counts(g).into_iter().enumerate() {
            total[i] += n;
        }
    }
    let sum: u64 = total.iter().sum();
    let text: Vec<String> = names
        .iter()
        .zip(total)
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| format!("{n} {c}"))
        .collect();
    let text = if text.is_empty() {
        "none".to_string()
    } else {
        text.join(", ")
    };
    html! {
        div.bar role="img" aria-label=(format!("Allocations: {text}")) {
            @for (c, n) in names.iter().zip(total) {
                @if n > 0 {
                    span class=(format!("seg {c}")) style=(format!("flex-grow:{n}")) {}
                }
            }
            @if sum == 0 { span.seg.empty {} }
        }
        span.counts { (text) }
    }
}

/// `GET /ui/jobs`.
pub(super) async fn list(
    State(agent): State<AppState>,
    Query(q): Query<ListQuery>,
    axum::Extension(viewer): axum::Extension<super::auth::Viewer>,
) -> Response {
    let mut jobs = agent.server().jobs();
    // Only the namespaces the token may read (all of them without ACL policies); a
    // periodic or parameterized job's children are on their parent's page, not here
    // (a cron job would flood the list).
    jobs.retain(|j| viewer.reads_jobs(&agent, &j.namespace) && j.parent_id.is_empty());
    let mut namespaces: Vec<String> = jobs.iter().map(|j| j.namespace.clone()).collect();
    namespaces.sort();
    namespaces.dedup();
    let all_ns = q.namespace.is_empty() || q.namespace == "*";
    let text = q.q.trim().to_lowercase();
    jobs.retain(|j| {
        (all_ns || j.namespace == q.namespace)
            && (text.is_empty()
                || j.id.to_lowercase().contains(&text)
                || j.name.to_lowercase().contains(&text))
    });
    jobs.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
    let body = html! {
        h1 { "Jobs" }
        p { a.button href="/ui/run" { "Run a job" } }
        form.filters method="get" action="/ui/jobs" role="search" {
            div {
                label for="ns" { "Namespace" }
                select #ns name="namespace" {
                    option value="*" selected[all_ns] { "All namespaces" }
                    @for n in &namespaces {
                        option value=(n) selected[!all_ns && *n == q.namespace] { (n) }
                    }
                }
            }
            div {
                label for="q" { "Search" }
                input #q type="search" name="q" value=(q.q) placeholder="id or name";
            }
            button type="submit" { "Filter" }
        }
        div #jobs data-live {
            @if jobs.is_empty() {
                p.empty { "No jobs" @if !text.is_empty() || !all_ns { " match the filter" } "." }
            } @else {
                div.scroll {
                    table.jobs {
                        caption.visually-hidden { "Jobs" }
                        thead { tr {
                            th scope="col" { "Name" } th scope="col" { "Namespace" }
                            th scope="col" { "Type" } th scope="col" { "Status" }
                            th scope="col" { "Allocations" } th scope="col" { "Submitted" }
                            th scope="col" { "Actions" }
                        } }
                        tbody {
                            @for j in &jobs {
                                @let summary = agent.server().job_summary(j);
                                tr data-job=(j.id) {
                                    td { a href=(job_href(&j.namespace, &j.id)) { (j.id) } }
                                    td { (j.namespace) }
                                    td { (label(&j.job_type)) }
                                    td { span class=(format!("status {}", j.state.status)) { (j.state.status) } }
                                    td { (bar(summary.summary.values())) }
                                    td { (time_el(j.state.submit_time.max(0) as u64)) }
                                    @let may = may_stop(&viewer, &agent, &j.namespace, &j.id);
                                    td.actions { (job_buttons(&j.namespace, &j.id, j.stop, may)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    page("Jobs", Tab::Jobs, Some("/v1/jobs?namespace=*"), body).into_response()
}

/// Whether the API will let `viewer` stop and purge job `id` (`submit-job` in its
/// namespace).
fn may_stop(viewer: &super::auth::Viewer, agent: &AppState, namespace: &str, id: &str) -> bool {
    let path = format!("/v1/job/{}", enc(id));
    viewer.may_call(agent, "DELETE", &path, namespace)
}

/// Stop and purge, for the script (they call `DELETE /v1/job/{id}`); offered only to a
/// token the API will let do it (`allowed`).
fn job_buttons(namespace: &str, id: &str, stopped: bool, allowed: bool) -> Markup {
    let api = format!("/v1/job/{}?namespace={}", enc(id), enc(namespace));
    if !allowed {
        let why =
            format!("Your token may not stop or purge jobs in namespace {namespace} (submit-job)");
        return html! { span.denied title=(why) { "Read only" } };
    }
    html! {
        a.button href=(format!("/ui/run?job={}&namespace={}", enc(id), enc(namespace))) { "Edit" }
        @if !stopped {
            button type="button" data-action="DELETE" data-url=(api)
                data-confirm=(format!("Stop job {id}?")) aria-label=(format!("Stop job {id}")) { "Stop" }
        }
        button.danger type="button" data-action="DELETE" data-url=(format!("{api}&purge=true"))
            data-confirm=(format!("Purge job {id}? It is forgotten for good."))
            aria-label=(format!("Purge job {id}")) { "Purge" }
    }
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct JobQuery {
    #[serde(default)]
    namespace: String,
}

/// `GET /ui/jobs/{id}`.
pub(super) async fn job(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<JobQuery>,
    axum::Extension(viewer): axum::Extension<super::auth::Viewer>,
) -> Response {
    let ns = if q.namespace.is_empty() {
        "default".to_string()
    } else {
        q.namespace
    };
    let Some(job) = agent.server().job(&ns, &id) else {
        return error_page(
            StatusCode::NOT_FOUND,
            &format!("No job {id:?} in namespace {ns:?}."),
        );
    };
    if let Err(why) = viewer.check_reads(&agent, &job.namespace) {
        let here = job_href(&job.namespace, &job.id);
        return super::auth::refused(&why, &here);
    }
    let summary = agent.server().job_summary(&job);
    let mut allocs = agent.server().job_allocations(&ns, &id, false);
    allocs.sort_by_key(|a| std::cmp::Reverse(a.create_time));
    let evals = agent.evals().of_job(&ns, &id);
    let definition = serde_json::to_string_pretty(&job).unwrap_or_default();
    // The HCL the current version was submitted as, when it came as HCL.
    let source = agent
        .server()
        .job_submission(&ns, &id, job.state.version)
        .unwrap_or_else(|e| {
            tracing::warn!(job = %id, error = %e, "reading the job's submission failed");
            None
        })
        .filter(|s| s.is_hcl());
    let watch = format!("/v1/job/{}/allocations?namespace={}", enc(&id), enc(&ns));
    let body = html! {
        h1 { "Job " (job.id) }
        div #job data-live {
            dl.facts {
                dt { "Namespace" } dd { (job.namespace) }
                dt { "Type" } dd { (label(&job.job_type)) }
                dt { "Status" } dd { span class=(format!("status {}", job.state.status)) { (job.state.status) } }
                dt { "Version" } dd { (job.state.version) }
                dt { "Priority" } dd { (job.priority) }
                dt { "Datacenters" } dd {
                    @if job.datacenters.is_empty() { "*" } @else { (job.datacenters.join(", ")) }
                }
                dt { "Submitted" } dd { (time_el(job.state.submit_time.max(0) as u64)) }
            }
            @let may = may_stop(&viewer, &agent, &job.namespace, &job.id);
            div.buttons { (job_buttons(&job.namespace, &job.id, job.stop, may)) }
            h2 { "Task groups" }
            (groups_table(&job, &summary))
            @if let Some(d) = agent.server().latest_deployment(&ns, &id) {
                (deployment_section(&d, &viewer, &agent))
            }
            h2 { "Allocations" }
            (allocs_table(&allocs))
            @if let Some(s) = super::services::of_job(&agent, &job.namespace, &job.id) {
                h2 { "Services" }
                (s)
            }
            h2 { "Evaluations" }
            (evals_table(&evals))
        }
        @if job.is_parent() {
            (children_section(&agent, &viewer, &job))
        }
        h2 { "Definition" }
        details {
            summary { "Job JSON" }
            pre.code { code { (definition) } }
        }
        @if let Some(s) = &source { (hcl_source(s)) }
    };
    page(&format!("Job {id}"), Tab::Jobs, Some(&watch), body).into_response()
}

/// The job's latest deployment: its status, each group's progress, and promote and fail
/// while it runs (offered to a token the API lets do them).
fn deployment_section(
    d: &crate::structs::Deployment,
    viewer: &super::auth::Viewer,
    agent: &AppState,
) -> Markup {
    let may = |op: &str| {
        viewer.may_call(
            agent,
            "POST",
            &format!("/v1/deployment/{op}/{}", d.id),
            &d.namespace,
        )
    };
    let url = |op: &str| {
        format!(
            "/v1/deployment/{op}/{}?namespace={}",
            d.id,
            enc(&d.namespace)
        )
    };
    let canaries = d.task_groups.values().any(|g| g.desired_canaries > 0);
    html! {
        h2 { "Deployment" }
        section #deployment aria-label="Latest deployment" {
            dl.facts {
                dt { "ID" } dd { code { (short(&d.id)) } }
                dt { "Job version" } dd { (d.job_version) }
                dt { "Status" } dd { span class=(format!("status {}", d.status)) { (d.status) } }
                dt { "Description" } dd { (d.status_description) }
            }
            div.scroll { table {
                thead { tr {
                    th { "Group" } th { "Desired" }
                    @if canaries { th { "Canaries" } th { "Promoted" } }
                    th { "Placed" } th { "Healthy" } th { "Unhealthy" } th { "Progress deadline" }
                } }
                tbody {
                    @for (name, g) in &d.task_groups {
                        tr {
                            td { (name) } td { (g.desired_total) }
                            @if canaries {
                                td { (g.desired_canaries) }
                                td { @if g.desired_canaries > 0 { (g.promoted) } @else { "n/a" } }
                            }
                            td { (g.placed_allocs) } td { (g.healthy_allocs) } td { (g.unhealthy_allocs) }
                            td { @if g.require_progress_by > 0 { (time_el(g.require_progress_by)) } @else { "n/a" } }
                        }
                    }
                }
            } }
            @if d.active() {
                div.buttons {
                    @if d.requires_promotion() && may("promote") {
                        button type="button" data-action="POST" data-url=(url("promote"))
                            data-confirm=(format!("Promote deployment {}?", short(&d.id)))
                            aria-label="Promote the deployment" { "Promote" }
                    }
                    @if may("fail") {
                        button.danger type="button" data-action="POST" data-url=(url("fail"))
                            data-confirm=(format!("Fail deployment {}?", short(&d.id)))
                            aria-label="Fail the deployment" { "Fail" }
                    }
                }
            }
        }
    }
}

/// A job's groups: count, tasks, allocations by status.
/// A periodic or parameterized job's children, newest first, with Force launch (periodic)
/// or a dispatch form (parameterized) for a token the API will let do it.
fn children_section(
    agent: &AppState,
    viewer: &super::auth::Viewer,
    job: &crate::jobspec::Job,
) -> Markup {
    let mut children = agent.server().job_children(&job.namespace, &job.id);
    children.sort_by_key(|c| std::cmp::Reverse(c.state.submit_time));
    let ns = job.namespace.as_str();
    let force = format!(
        "/v1/job/{}/periodic/force?namespace={}",
        enc(&job.id),
        enc(ns)
    );
    let dispatch = format!("/v1/job/{}/dispatch?namespace={}", enc(&job.id), enc(ns));
    let may_force = job.is_periodic()
        && !job.is_parameterized()
        && viewer.may_call(
            agent,
            "POST",
            &format!("/v1/job/{}/periodic/force", enc(&job.id)),
            ns,
        );
    let may_dispatch = job.is_parameterized()
        && viewer.may_call(
            agent,
            "POST",
            &format!("/v1/job/{}/dispatch", enc(&job.id)),
            ns,
        );
    html! {
        h2 { "Children" }
        @if may_force {
            div.buttons {
                button type="button" data-action="POST" data-url=(force)
                    aria-label=(format!("Force a launch of {}", job.id)) { "Force launch" }
            }
        }
        @if may_dispatch {
            form.dispatch data-dispatch=(dispatch) {
                label for="dispatch-meta" { "Meta, one " code { "key=value" } " a line" }
                textarea #dispatch-meta name="meta" rows="3" {}
                label for="dispatch-payload" { "Payload" }
                textarea #dispatch-payload name="payload" rows="3" {}
                button type="submit" { "Dispatch" }
            }
        }
        p #action-result role="status" aria-live="polite" {}
        div #children data-live {
        @if children.is_empty() {
            p.empty { "No children yet." }
        } @else {
            div.scroll { table.children {
                thead { tr {
                    th scope="col" { "Child" } th scope="col" { "Status" } th scope="col" { "Submitted" }
                } }
                tbody {
                    @for c in &children {
                        tr data-child=(c.id) {
                            td { a href=(job_href(&c.namespace, &c.id)) { (c.id) } }
                            td { span class=(format!("status {}", c.state.status)) { (c.state.status) } }
                            td { (time_el(c.state.submit_time.max(0) as u64)) }
                        }
                    }
                }
            } }
        }
        }
    }
}

fn groups_table(job: &crate::jobspec::Job, summary: &crate::agent::JobSummary) -> Markup {
    html! {
    div.scroll { table {
        thead { tr {
            th scope="col" { "Group" } th scope="col" { "Count" } th scope="col" { "Tasks" }
            th scope="col" { "Allocations" }
        } }
        tbody {
            @for g in &job.task_groups {
                tr {
                    td { (g.name) }
                    td { (g.count) }
                    td { (g.tasks.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")) }
                    td { (bar(summary.summary.get(&g.name).into_iter())) }
                }
            }
        }
    } }
    }
}

/// A job's allocations, newest first.
fn allocs_table(allocs: &[crate::structs::Allocation]) -> Markup {
    html! {
    @if allocs.is_empty() {
        p.empty { "No allocations." }
    } @else {
        div.scroll { table.allocs {
            thead { tr {
                th scope="col" { "ID" } th scope="col" { "Group" } th scope="col" { "Status" }
                th scope="col" { "Desired" } th scope="col" { "Age" } th scope="col" { "Restarts" }
            } }
            tbody {
                @for a in allocs {
                    @let status = label(&a.client_status);
                    tr {
                        td { a href=(format!("/ui/allocations/{}", enc(&a.id))) { code { (short(&a.id)) } } }
                        td { (a.task_group) }
                        td { span class=(format!("status {status}")) { (status) } }
                        td { (label(&a.desired_status)) }
                        td { (age(a.create_time)) }
                        td { (a.task_states.values().map(|s| s.restarts).sum::<u64>()) }
                    }
                }
            }
        } }
    }
    }
}

/// A job's evaluations, with their placement failures.
pub(super) fn failures_of(e: &crate::evals::Evaluation) -> Markup {
    failures(e.failed_tg_allocs.as_ref())
}

fn evals_table(evals: &[crate::evals::Evaluation]) -> Markup {
    html! {
    @if evals.is_empty() {
        p.empty { "No evaluations." }
    } @else {
        div.scroll { table.evals {
            thead { tr {
                th scope="col" { "ID" } th scope="col" { "Triggered by" } th scope="col" { "Status" }
                th scope="col" { "Placement failures" }
            } }
            tbody {
                @for e in evals {
                    tr {
                        td { code { (short(&e.id)) } }
                        td { (e.triggered_by) }
                        td { (e.status) @if !e.status_description.is_empty() { " · " (e.status_description) } }
                        td { (failures(e.failed_tg_allocs.as_ref())) }
                    }
                }
            }
        } }
    }
    }
}

/// The HCL a job version was submitted as, with the variables given with it.
fn hcl_source(s: &crate::structs::JobSubmission) -> Markup {
    html! {
        details.source {
            summary { "Job HCL (version " (s.version) ", as submitted)" }
            pre.code { code data-format=(s.format) { (s.source) } }
            @if let Some(flags) = s.variable_flags.as_ref().filter(|f| !f.is_empty()) {
                h3 { "Variables (-var)" }
                dl.facts {
                    @for (k, v) in flags { dt { (k) } dd { code { (v) } } }
                }
            }
            @if !s.variables.is_empty() {
                h3 { "Variable files" }
                pre.code { code { (s.variables) } }
            }
        }
    }
}

/// An evaluation's placement failures by group: what filtered or exhausted the node.
fn failures(failed: Option<&std::collections::BTreeMap<String, serde_json::Value>>) -> Markup {
    let Some(failed) = failed.filter(|f| !f.is_empty()) else {
        return html! { "none" };
    };
    html! {
        ul.failures {
            @for (group, m) in failed {
                li {
                    strong { (group) } ": "
                    (reasons(m).join("; "))
                }
            }
        }
    }
}

/// The reasons an `AllocMetric` gives, as short phrases.
fn reasons(m: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for key in [
        "ConstraintFiltered",
        "ClassFiltered",
        "DimensionExhausted",
        "ClassExhausted",
    ] {
        if let Some(obj) = m.get(key).and_then(|v| v.as_object()) {
            for (what, n) in obj {
                out.push(format!("{what} ({n})"));
            }
        }
    }
    if let Some(n) = m
        .get("CoalescedFailures")
        .and_then(|v| v.as_u64())
        .filter(|n| *n > 0)
    {
        out.push(format!("{n} more like it"));
    }
    if out.is_empty() {
        out.push("no node fits".into());
    }
    out
}
