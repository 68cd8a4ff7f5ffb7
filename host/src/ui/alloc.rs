//! `/ui/allocations/{id}`: each task's state and events as a timeline, its resources and
//! device instances, the restart, signal and stop buttons, and its logs as they are written.
//!
//! With ACL policies the page is shown only to a token that may read jobs in the
//! allocation's own namespace (a 403 otherwise, whatever `?namespace=` says); its buttons
//! only with `alloc-lifecycle` there and its logs only with `read-logs`, as the API will
//! check when they are used.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::AppState;
use super::auth::{Viewer, refused};
use super::{Tab, age, duration, enc, error_page, job_href, label, page, short, time_el};
use crate::structs::{Allocation, TaskEvent, TaskEventType, TaskState};

/// Signals the page offers.
const SIGNALS: [&str; 6] = [
    "SIGHUP", "SIGINT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGKILL",
];

/// `GET /ui/allocations/{id}` (a unique prefix of the id works too, among the
/// allocations the viewer may read).
async fn render(agent: &AppState, viewer: &Viewer, id: &str) -> Response {
    let alloc = agent.allocation(id).or_else(|| {
        let found = agent.visit_allocations(|a| {
            (a.id.starts_with(id) && viewer.reads_jobs(agent, &a.namespace)).then(|| a.clone())
        });
        (found.len() == 1 && id.len() >= 2).then(|| found.into_iter().next().unwrap())
    });
    let Some(a) = alloc else {
        return error_page(StatusCode::NOT_FOUND, &format!("No allocation {id:?}."));
    };
    if let Err(why) = viewer.check_reads(agent, &a.namespace) {
        return refused(&why, &format!("/ui/allocations/{}", enc(id)));
    }
    // What the buttons and the log panel will call, asked of the API's own table.
    let (eid, ns) = (enc(&a.id), a.namespace.as_str());
    let lifecycle = [
        format!("/v1/client/allocation/{eid}/restart"),
        format!("/v1/client/allocation/{eid}/signal"),
        format!("/v1/allocation/{eid}/stop"),
    ]
    .iter()
    .all(|p| viewer.may_call(agent, "POST", p, ns));
    let read_logs = viewer.may_call(agent, "GET", &format!("/v1/client/fs/logs/{eid}"), ns);
    let tasks: Vec<String> = a
        .group()
        .map(|g| g.tasks.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_else(|| a.task_states.keys().cloned().collect());
    let watch = format!("/v1/allocation/{}", enc(&a.id));
    let body = html! {
        h1 { "Allocation " code { (short(&a.id)) } }
        div #alloc data-live { (facts(&a)) }
        @let services = super::services::of_alloc(agent, &a);
        @if let Some(s) = services {
            section.services aria-labelledby="services-h" {
                h2 #services-h { "Services" }
                div #services data-live data-poll=(super::charts::poll_ms(agent)) { (s) }
            }
        }
        section.usage aria-labelledby="usage-h" {
            h2 #usage-h { "Resource use" }
            div #usage data-live data-poll=(super::charts::poll_ms(agent)) { (super::charts::alloc_usage(agent, &a)) }
        }
        (actions(&a, &tasks, lifecycle))
        div #tasks data-live {
            @for t in &tasks {
                (task_section(&a, t, a.task_states.get(t)))
            }
        }
        (logs(&a, &tasks, read_logs))
        (exec_panel(agent, viewer, &a).await)
    };
    page(
        &format!("Allocation {}", short(&a.id)),
        Tab::Jobs,
        Some(&watch),
        body,
    )
    .into_response()
}

pub(super) async fn show(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    axum::Extension(viewer): axum::Extension<Viewer>,
) -> Response {
    render(&agent, &viewer, &id).await
}

fn facts(a: &Allocation) -> Markup {
    let status = label(&a.client_status);
    html! {
        dl.facts {
            dt { "ID" } dd { code { (a.id) } }
            dt { "Job" } dd { a href=(job_href(&a.namespace, &a.job_id)) { (a.job_id) } }
            dt { "Group" } dd { (a.task_group) }
            dt { "Status" } dd {
                span class=(format!("status {status}")) { (status) }
                @if !a.client_description.is_empty() { " · " (a.client_description) }
            }
            dt { "Desired" } dd {
                (label(&a.desired_status))
                @if !a.desired_description.is_empty() { " · " (a.desired_description) }
            }
            dt { "Node" } dd { a href="/ui/node" { (a.node_name) } }
            @if !a.allocated_resources.shared.ports.is_empty() {
                dt { "Addresses" } dd.addresses {
                    @for (i, p) in a.allocated_resources.shared.ports.iter().enumerate() {
                        @if i > 0 { ", " }
                        span data-port=(p.label) {
                            (p.label) " " code { (p.host_ip) ":" (p.value) }
                            @if p.to > 0 { " → " (p.to) }
                        }
                    }
                }
            }
            dt { "Created" } dd { (time_el(a.create_time)) " (" (age(a.create_time)) " ago)" }
            dt { "Files" } dd { a href=(format!("/ui/allocations/{}/files", enc(&a.id))) { "Browse" } }
        }
    }
}

/// The exec terminal: the running tasks whose driver runs commands in them, when the
/// token passes the route (`alloc-exec`, and `alloc-node-exec` for a driver without
/// filesystem isolation). Nothing when no task could take a command.
async fn exec_panel(agent: &AppState, viewer: &Viewer, a: &Allocation) -> Markup {
    use crate::drivermanager::types::FsIsolation;
    if a.client_status != "running" {
        return html! {};
    }
    let ns = a.namespace.as_str();
    let mut open = Vec::new();
    let mut needs = Vec::new();
    for t in a.group().map(|g| g.tasks.clone()).unwrap_or_default() {
        let Ok(runner) = agent.client().exec_task(&a.id, &t.name) else {
            continue;
        };
        let Ok(caps) = runner.capabilities().await else {
            continue;
        };
        if !caps.exec {
            continue;
        }
        let mut need = vec!["alloc-exec"];
        if caps.fs_isolation == FsIsolation::None {
            need.push("alloc-node-exec");
        }
        if need.iter().all(|c| viewer.holds(agent, ns, c)) {
            open.push(t.name.clone());
        } else {
            needs.push((t.name.clone(), need.join(" and ")));
        }
    }
    if open.is_empty() {
        if needs.is_empty() {
            return html! {};
        }
        return denied(
            "exec",
            "Exec",
            html! {
                "Your token may not run commands in this allocation's tasks: "
                @for (i, (task, need)) in needs.iter().enumerate() {
                    @if i > 0 { "; " }
                    code { (task) } " needs " (need)
                }
                "."
            },
        );
    }
    html! {
        section.exec aria-labelledby="exec-h" {
            h2 #exec-h { "Exec" }
            link rel="stylesheet" href=(format!("/ui/assets/xterm.css?v={}", super::XTERM_VERSION));
            script src=(format!("/ui/assets/xterm.js?v={}", super::XTERM_VERSION)) {}
            script src=(format!("/ui/assets/addon-fit.js?v={}", super::XTERM_FIT_VERSION)) {}
            form.inline #exec-form data-exec=(a.id) {
                label for="exec-task" { "Task" }
                select #exec-task name="task" {
                    @for t in &open { option value=(t) { (t) } }
                }
                label for="exec-command" { "Command" }
                input #exec-command name="command" value="/bin/sh" spellcheck="false";
                button type="submit" { "Open terminal" }
            }
            div #exec-terminal {}
        }
    }
}

/// A panel the token may not use (`name`: its class and the stem of its ids): its heading,
/// and `why` in place of its content.
fn denied(name: &str, title: &str, why: Markup) -> Markup {
    let heading = format!("{name}-h");
    html! {
        section class=(name) aria-labelledby=(heading) {
            h2 id=(heading) { (title) }
            p.denied id=(format!("{name}-denied")) { (why) }
        }
    }
}

/// Restart, signal and stop: forms the script sends to the API (offered only to a token
/// with `alloc-lifecycle` in the allocation's namespace, `allowed`).
fn actions(a: &Allocation, tasks: &[String], allowed: bool) -> Markup {
    let id = enc(&a.id);
    if !allowed {
        return denied(
            "actions",
            "Actions",
            html! {
                "Your token may not restart, signal or stop this allocation: that needs "
                code { "alloc-lifecycle" } " in namespace " code { (a.namespace) } "."
            },
        );
    }
    html! {
        section.actions aria-labelledby="actions-h" {
            h2 #actions-h { "Actions" }
            form.inline data-api=(format!("/v1/client/allocation/{id}/restart")) {
                label for="restart-task" { "Task" }
                select #restart-task name="TaskName" {
                    option value="" { "All tasks" }
                    @for t in tasks { option value=(t) { (t) } }
                }
                button type="submit" { "Restart" }
            }
            form.inline data-api=(format!("/v1/client/allocation/{id}/signal")) {
                label for="signal-task" { "Task" }
                select #signal-task name="Task" {
                    option value="" { "All tasks" }
                    @for t in tasks { option value=(t) { (t) } }
                }
                label for="signal" { "Signal" }
                select #signal name="Signal" {
                    @for s in SIGNALS { option value=(s) { (s) } }
                }
                button type="submit" { "Send signal" }
            }
            form.inline data-api=(format!("/v1/allocation/{id}/stop"))
                data-confirm="Stop this allocation?" {
                button.danger type="submit" { "Stop allocation" }
            }
            p #action-result role="status" aria-live="polite" {}
        }
    }
}

/// What an event says, with what Nomad's UI adds: the restart delay, the exit code, the
/// failing driver.
fn event_text(e: &TaskEvent) -> String {
    let mut s = if e.display_message.is_empty() {
        e.message.clone()
    } else {
        e.display_message.clone()
    };
    let mut add = |x: String| {
        if !x.is_empty() && !s.contains(&x) {
            if !s.is_empty() {
                s.push_str(" · ");
            }
            s.push_str(&x);
        }
    };
    match e.event_type {
        // The delay, rounded (the message has it to the ns).
        TaskEventType::Restarting if e.start_delay > 0 => {
            return format!("Task restarting in {}", duration(e.start_delay));
        }
        TaskEventType::Terminated => add(format!("Exit Code: {}", e.exit_code)),
        TaskEventType::DriverFailure => add(e.driver_error.clone()),
        TaskEventType::SetupFailure => add(e.setup_error.clone()),
        TaskEventType::Killing | TaskEventType::Killed => add(e.kill_reason.clone()),
        _ => {}
    }
    s
}

fn task_section(a: &Allocation, task: &str, state: Option<&TaskState>) -> Markup {
    let res = a
        .allocated_resources
        .tasks
        .get(task)
        .and_then(|r| serde_json::to_value(r).ok())
        .unwrap_or_default();
    let hid = format!("task-{}", enc(task));
    html! {
        section.task aria-labelledby=(hid) {
            h2 id=(hid) { "Task " (task) }
            @match state {
                None => p.empty { "Not started yet." },
                Some(s) => {
                    @let st = label(&s.state);
                    dl.facts {
                        dt { "State" } dd {
                            span class=(format!("status {st}")) { (st) }
                            @if s.failed { " (failed)" }
                        }
                        dt { "Restarts" } dd { (s.restarts) }
                        @if s.started_at > 0 { dt { "Started" } dd { (time_el(s.started_at)) } }
                        @if s.finished_at > 0 { dt { "Finished" } dd { (time_el(s.finished_at)) } }
                        dt { "CPU" } dd { (res["Cpu"]["CpuShares"]) " MHz" }
                        dt { "Memory" } dd { (res["Memory"]["MemoryMB"]) " MiB" }
                    }
                    (devices(&res))
                    h3 { "Events" }
                    ol.timeline {
                        @for e in s.events.iter().rev() {
                            li data-event=(e.event_type.as_str()) {
                                (time_el(e.time))
                                " "
                                strong { (e.event_type.as_str()) }
                                @let text = event_text(e);
                                @if !text.is_empty() { " " span.msg { (text) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A task's device instances, from its allocated resources.
fn devices(res: &serde_json::Value) -> Markup {
    let Some(devs) = res["Devices"].as_array().filter(|d| !d.is_empty()) else {
        return html! {};
    };
    html! {
        h3 { "Devices" }
        ul {
            @for d in devs {
                li {
                    (d["Vendor"].as_str().unwrap_or("")) "/" (d["Type"].as_str().unwrap_or(""))
                    "/" (d["Name"].as_str().unwrap_or("")) ": "
                    @let ids: Vec<&str> = d["DeviceIDs"].as_array().into_iter().flatten()
                        .filter_map(|v| v.as_str()).collect();
                    code { (ids.join(", ")) }
                }
            }
        }
    }
}

/// The logs panel; the script follows the framed logs endpoint into it. A token the logs
/// endpoint would refuse (`allowed`: `read-logs` or `read-fs` in the allocation's
/// namespace) is told so instead.
fn logs(a: &Allocation, tasks: &[String], allowed: bool) -> Markup {
    if !allowed {
        return denied(
            "logs",
            "Logs",
            html! {
                "Your token may not read logs in this allocation's namespace: that needs "
                code { "read-logs" } " (or " code { "read-fs" } ") in namespace "
                code { (a.namespace) } "."
            },
        );
    }
    html! {
        section.logs aria-labelledby="logs-h" data-logs=(a.id) {
            h2 #logs-h { "Logs" }
            div.inline {
                label for="log-task" { "Task" }
                select #log-task {
                    @for t in tasks { option value=(t) { (t) } }
                }
                label for="log-type" { "Stream" }
                select #log-type {
                    option value="stdout" { "stdout" }
                    option value="stderr" { "stderr" }
                }
                button #log-pause type="button" aria-pressed="false" { "Pause" }
                span #log-state role="status" aria-live="polite" {}
            }
            pre #log tabindex="0" aria-label="Task output" {
                noscript { "Following the logs needs JavaScript; the API serves them at /v1/client/fs/logs/"
                    (a.id) "?task=NAME&type=stdout&plain=true." }
            }
        }
    }
}
