//! `/ui/evaluations`: the newest evaluations of every namespace the token may read, with
//! what triggered them, their status and their placement failures, live.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::AppState;
use super::auth::Viewer;
use super::{Tab, job_href, page, short, time_el};

/// How many of the newest evaluations the page shows.
const SHOWN: usize = 200;

/// `GET /ui/evaluations`.
pub(super) async fn list(
    State(agent): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
) -> Response {
    // Newest first, as the book lists them.
    let evals: Vec<_> = agent
        .evals()
        .list("")
        .into_iter()
        .filter(|e| viewer.reads_jobs(&agent, &e.namespace))
        .take(SHOWN)
        .collect();
    let body = html! {
        h1 { "Evaluations" }
        div #evals data-live {
            @if evals.is_empty() {
                p.empty { "No evaluations." }
            } @else {
                div.scroll { table.evals {
                    thead { tr {
                        th scope="col" { "ID" } th scope="col" { "Job" } th scope="col" { "Namespace" }
                        th scope="col" { "Triggered by" } th scope="col" { "Status" }
                        th scope="col" { "Placement failures" } th scope="col" { "Created" }
                    } }
                    tbody {
                        @for e in &evals {
                            tr data-eval=(e.id) {
                                td { code { (short(&e.id)) } }
                                td { a href=(job_href(&e.namespace, &e.job_id)) { (e.job_id) } }
                                td { (e.namespace) }
                                td { (e.triggered_by) }
                                td { span class=(format!("status {}", e.status)) { (e.status) }
                                    @if !e.status_description.is_empty() { " · " (e.status_description) } }
                                td { (super::jobs::failures_of(e)) }
                                td { (time_el(e.create_time)) }
                            }
                        }
                    }
                } }
            }
        }
    };
    page(
        "Evaluations",
        Tab::Evaluations,
        Some("/v1/evaluations?namespace=*&per_page=1"),
        body,
    )
    .into_response()
}
