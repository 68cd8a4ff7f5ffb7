//! `/ui/allocations/{id}/files?path=`: an allocation's files, as `nomad alloc fs` shows
//! them: a folder's entries, a file's details and its first 64 KiB when it is text. The
//! same checks as the API's file endpoints (no path out of the allocation's dir, no link
//! followed), offered only to a token the API lets read them (`read-fs`).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::AppState;
use super::auth::{Viewer, refused};
use super::{Tab, enc, error_page, page, short};

/// How much of a file the page shows.
const SHOWN: u64 = 64 * 1024;

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct At {
    #[serde(default)]
    path: Option<String>,
}

fn href(alloc: &str, path: &str) -> String {
    format!("/ui/allocations/{}/files?path={}", enc(alloc), enc(path))
}

/// `GET /ui/allocations/{id}/files?path=`.
pub(super) async fn files(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(at): Query<At>,
    axum::Extension(viewer): axum::Extension<Viewer>,
) -> Response {
    let Some(a) = agent.allocation(&id) else {
        return error_page(StatusCode::NOT_FOUND, &format!("No allocation {id:?}."));
    };
    if let Err(why) = viewer.check_reads(&agent, &a.namespace) {
        return refused(&why, &href(&a.id, ""));
    }
    let api = format!("/v1/client/fs/ls/{}", enc(&a.id));
    if !viewer.may_call(&agent, "GET", &api, &a.namespace) {
        return error_page(
            StatusCode::FORBIDDEN,
            "This token may not read the allocation's files (read-fs).",
        );
    }
    let path = at.path.unwrap_or_default();
    let path = path.trim_matches('/').to_string();
    let (info, head) = match crate::api::fs::head_for_ui(&agent, &a.id, &path, SHOWN).await {
        Ok(x) => x,
        Err(e) => return error_page(e.0, &e.1),
    };
    let is_dir = info["IsDir"] == true;
    let entries = if is_dir {
        match crate::api::fs::list_for_ui(&agent, &a.id, &path).await {
            Ok(l) => l,
            Err(e) => return error_page(e.0, &e.1),
        }
    } else {
        Vec::new()
    };
    // The path as links, one per folder above.
    let mut crumbs = vec![(String::new(), "/".to_string())];
    let mut acc = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        acc = if acc.is_empty() {
            part.to_string()
        } else {
            format!("{acc}/{part}")
        };
        crumbs.push((acc.clone(), part.to_string()));
    }
    let body = html! {
        h1 { "Files of allocation " a href=(format!("/ui/allocations/{}", enc(&a.id))) { code { (short(&a.id)) } } }
        nav.crumbs aria-label="Path" {
            @for (i, (p, name)) in crumbs.iter().enumerate() {
                @if i > 1 { " / " }
                a href=(href(&a.id, p)) { (name) }
            }
        }
        @if is_dir { (entries_table(&a.id, &path, &entries)) } @else { (file_view(&info, &head)) }
    };
    page(&format!("Files of {}", short(&a.id)), Tab::Jobs, None, body).into_response()
}

/// A folder's entries, each a link to itself.
fn entries_table(alloc: &str, path: &str, entries: &[serde_json::Value]) -> maud::Markup {
    html! {
        div.scroll { table.files {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Size" }
                    th scope="col" { "Mode" } th scope="col" { "Modified" }
                } }
                tbody {
                    @for e in entries {
                        @let name = e["Name"].as_str().unwrap_or("");
                        @let child = if path.is_empty() { name.to_string() } else { format!("{path}/{name}") };
                        tr data-file=(name) {
                            td { a href=(href(alloc, &child)) { (name) @if e["IsDir"] == true { "/" } } }
                            td { (e["Size"]) }
                            td { code { (e["FileMode"].as_str().unwrap_or("")) } }
                            td { (e["ModTime"].as_str().unwrap_or("")) }
                        }
                    }
                }
        } }
    }
}

/// A file's details and, when it is text, its first [`SHOWN`] bytes.
fn file_view(info: &serde_json::Value, head: &[u8]) -> maud::Markup {
    let text = info["ContentType"]
        .as_str()
        .is_some_and(|t| t.starts_with("text/") || t == "application/json");
    html! {
            dl.facts {
                dt { "Size" } dd { (info["Size"]) " bytes" }
                dt { "Mode" } dd { code { (info["FileMode"].as_str().unwrap_or("")) } }
                dt { "Type" } dd { (info["ContentType"].as_str().unwrap_or("")) }
                dt { "Modified" } dd { (info["ModTime"].as_str().unwrap_or("")) }
            }
            @if text {
                @if info["Size"].as_u64().unwrap_or(0) > SHOWN {
                    p.note { "Its first 64 KiB:" }
                }
                pre.code #file-content { (String::from_utf8_lossy(head)) }
            } @else {
                p.note { "Not text: not shown here (agent alloc fs prints it)." }
            }
    }
}
