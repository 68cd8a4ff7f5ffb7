//! `/ui/variables` and `/ui/variables/{path}`: Nomad Variables, listed and read as the
//! token's variable rules allow (`list`, `read`), and edited (`write`) with a
//! check-and-set on the index the page was shown at, so a change made meanwhile is not
//! overwritten: the API answers 409 and the page says so.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::AppState;
use super::auth::Viewer;
use super::{Tab, enc, error_page, page, time_el};
use crate::server::vars::Namespaces;

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Which {
    #[serde(default)]
    namespace: Option<String>,
}

impl Which {
    fn namespace(&self) -> String {
        self.namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into())
    }
}

/// `GET /ui/variables[?namespace=]`: the variables the token may list (`*`: every
/// namespace's).
pub(super) async fn list(
    State(agent): State<AppState>,
    Query(q): Query<Which>,
    axum::Extension(viewer): axum::Extension<Viewer>,
) -> Response {
    let ns = q.namespace();
    let which = if ns == "*" {
        Namespaces::All
    } else {
        Namespaces::One(&ns)
    };
    let vars: Vec<_> = agent
        .server()
        .variables(which, "")
        .into_iter()
        .filter(|v| viewer.may_variable(&agent, &v.namespace, &v.path, "list"))
        .collect();
    let body = html! {
        h1 { "Variables" }
        p { "Namespace " code { (ns) } " · "
            a href="/ui/variables?namespace=*" { "every namespace" } }
        div #vars data-live {
            @if vars.is_empty() {
                p.empty { "No variables here that this token may list." }
            } @else {
                div.scroll { table.vars {
                    thead { tr {
                        th scope="col" { "Path" } th scope="col" { "Namespace" }
                        th scope="col" { "Last written" } th scope="col" { "Index" }
                    } }
                    tbody {
                        @for v in &vars {
                            tr data-var=(v.path) {
                                td { a href=(href(&v.namespace, &v.path)) { (v.path) } }
                                td { (v.namespace) }
                                td { (time_el(v.modify_time.max(0) as u64)) }
                                td { (v.modify_index) }
                            }
                        }
                    }
                } }
            }
        }
    };
    let watch = format!("/v1/vars?namespace={}", enc(&ns));
    page("Variables", Tab::Variables, Some(&watch), body).into_response()
}

fn href(namespace: &str, path: &str) -> String {
    let segments: Vec<String> = path.split('/').map(enc).collect();
    format!(
        "/ui/variables/{}?namespace={}",
        segments.join("/"),
        enc(namespace)
    )
}

/// `GET /ui/variables/{path}`: its items (with `read`), and an editor (with `write`).
pub(super) async fn show(
    State(agent): State<AppState>,
    Path(path): Path<String>,
    Query(q): Query<Which>,
    axum::Extension(viewer): axum::Extension<Viewer>,
) -> Response {
    let ns = q.namespace();
    if !viewer.may_variable(&agent, &ns, &path, "read") {
        return error_page(
            StatusCode::FORBIDDEN,
            &format!("This token may not read the variable {path:?} in {ns:?}."),
        );
    }
    let Some(v) = agent.server().variable(&ns, &path) else {
        return error_page(
            StatusCode::NOT_FOUND,
            &format!("No variable {path:?} in {ns:?}."),
        );
    };
    let writes = viewer.may_variable(&agent, &ns, &path, "write");
    let api = format!(
        "/v1/var/{}?namespace={}",
        path.split('/').map(enc).collect::<Vec<_>>().join("/"),
        enc(&ns)
    );
    let lines: String = v.items.iter().map(|(k, x)| format!("{k}={x}\n")).collect();
    let body = html! {
        h1 { "Variable " code { (v.meta.path) } }
        dl.facts {
            dt { "Namespace" } dd { (v.meta.namespace) }
            dt { "Created" } dd { (time_el(v.meta.create_time.max(0) as u64)) }
            dt { "Last written" } dd { (time_el(v.meta.modify_time.max(0) as u64)) }
            dt { "Index" } dd #var-index { (v.meta.modify_index) }
        }
        h2 { "Items" }
        div.scroll { table.items {
            thead { tr { th scope="col" { "Key" } th scope="col" { "Value" } } }
            tbody {
                @for (k, x) in &v.items {
                    tr data-item=(k) { th scope="row" { code { (k) } } td { code { (x) } } }
                }
            }
        } }
        @if writes {
            h2 { "Edit" }
            form.var-edit data-var=(api) data-cas=(v.meta.modify_index) {
                label for="var-items" { "Items, one " code { "key=value" } " a line" }
                textarea #var-items name="items" rows="8" { (lines) }
                button type="submit" { "Save" }
                p #action-result role="status" {}
            }
        } @else {
            p.denied { "This token may not write this variable." }
        }
        p { a href=(format!("/ui/variables?namespace={}", enc(&ns))) { "All variables" } }
    };
    page(&format!("Variable {path}"), Tab::Variables, None, body).into_response()
}
