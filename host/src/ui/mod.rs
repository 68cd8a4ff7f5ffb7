//! The web UI at `/ui`: server-rendered pages of the agent's own state (jobs, a job, an
//! allocation, the node, the components), built with `maud` templates compiled into the
//! binary, one small stylesheet and one plain script embedded beside them. The pages work
//! without JavaScript; the script adds the live parts (lists and task events that follow
//! changes, task logs as they are written) and the buttons, which call the HTTP API.
//!
//! With an ACL token configured every page asks for it ([`auth`]): a login form keeps it
//! in an `HttpOnly`, `SameSite=Strict` cookie scoped to `/ui` (read by the pages only,
//! never by `/v1`), and in the tab's `sessionStorage` for the script, which sends it as
//! `X-Nomad-Token`.

mod alloc;
mod auth;
mod charts;
mod components;
mod editor;
mod evals;
mod files;
mod jobs;
mod node;
mod services;
mod vars;

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{DOCTYPE, Markup, html};

/// What every handler gets: the agent (the API's router state, named here so the UI does
/// not reach back into the API module that mounts it).
pub type AppState = std::sync::Arc<crate::agent::Agent>;

pub use auth::{Need, authorize};

/// The UI's routes; every page goes through [`auth::gate`], the login form and the assets
/// do not. `api` is the API's route table, by which a page offers only the calls the
/// viewer's token would pass.
pub fn routes(
    agent: AppState,
    api: std::sync::Arc<crate::acl::routes::RouteTable>,
) -> Router<AppState> {
    Router::new()
        .route("/ui/jobs", get(jobs::list))
        .route("/ui/jobs/{id}", get(jobs::job))
        .route("/ui/run", get(editor::editor))
        .route("/ui/allocations/{id}", get(alloc::show))
        .route("/ui/allocations/{id}/files", get(files::files))
        .route("/ui/node", get(node::node))
        .route("/ui/components", get(components::components))
        .route("/ui/evaluations", get(evals::list))
        .route("/ui/variables", get(vars::list))
        .route("/ui/variables/{*path}", get(vars::show))
        .route_layer(axum::middleware::from_fn_with_state(
            (agent, api),
            auth::gate,
        ))
        .route("/ui", get(to_jobs))
        .route("/ui/", get(to_jobs))
        .route("/ui/login", get(auth::login_page).post(auth::login))
        .route("/ui/logout", post(auth::logout))
        .route("/ui/assets/{file}", get(asset))
        .layer(axum::middleware::from_fn(guard_headers))
}

/// What every UI answer tells the browser: run only this agent's own script and styles,
/// connect only to this agent, never show the pages in a frame (a framed page's buttons
/// could be clicked through an overlay), send no referrer elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    style-src-attr 'unsafe-inline'; img-src 'self'; connect-src 'self'; form-action 'self'; \
    frame-ancestors 'none'; base-uri 'none'";

/// [`CSP`] for the allocation page, whose terminal emulator (xterm.js) sizes and colours
/// its rows with `<style>` elements it writes: inline style elements are allowed there,
/// scripts still only the agent's own.
const CSP_TERMINAL: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    style-src-elem 'self' 'unsafe-inline'; style-src-attr 'unsafe-inline'; img-src 'self'; \
    connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

async fn guard_headers(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let path = req.uri().path();
    let terminal = path.starts_with("/ui/allocations/") && path.matches('/').count() == 3;
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(if terminal { CSP_TERMINAL } else { CSP }),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    h.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("same-origin"),
    );
    r
}

async fn to_jobs() -> Redirect {
    Redirect::to("/ui/jobs")
}

const CSS: &str = include_str!("assets/ui.css");
const JS: &str = include_str!("assets/ui.js");
/// The exec terminal's emulator: xterm.js and its fit addon as their npm packages ship
/// them (pinned in `tests/ui/package-lock.json`; `ui::` checks these are those files).
const XTERM_JS: &str = include_str!("assets/vendor/xterm.js");
const XTERM_CSS: &str = include_str!("assets/vendor/xterm.css");
const XTERM_FIT_JS: &str = include_str!("assets/vendor/addon-fit.js");
/// The versions, in the vendored files' URLs (they are cached for a week).
pub(crate) const XTERM_VERSION: &str = "6.0.0";
pub(crate) const XTERM_FIT_VERSION: &str = "0.11.0";

/// The embedded stylesheet and script, and the terminal emulator's.
async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind, cache) = match file.as_str() {
        "ui.css" => (CSS, "text/css; charset=utf-8", "no-cache"),
        "ui.js" => (JS, "text/javascript; charset=utf-8", "no-cache"),
        "xterm.js" => (XTERM_JS, "text/javascript; charset=utf-8", "max-age=604800"),
        "xterm.css" => (XTERM_CSS, "text/css; charset=utf-8", "max-age=604800"),
        "addon-fit.js" => (
            XTERM_FIT_JS,
            "text/javascript; charset=utf-8",
            "max-age=604800",
        ),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    (
        [(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, cache)],
        body,
    )
        .into_response()
}

/// Which tab of the navigation a page belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tab {
    Jobs,
    Node,
    Components,
    Evaluations,
    Variables,
    None,
}

/// A whole page: the shell (navigation, stylesheet, script) around `body`. `watch` is
/// the API path whose blocking query tells the script when to refresh the `data-live`
/// parts of the page.
pub(crate) fn page(title: &str, tab: Tab, watch: Option<&str>, body: Markup) -> Html<String> {
    let nav = [
        (Tab::Jobs, "/ui/jobs", "Jobs"),
        (Tab::Node, "/ui/node", "Node"),
        (Tab::Components, "/ui/components", "Components"),
        (Tab::Evaluations, "/ui/evaluations", "Evaluations"),
        (Tab::Variables, "/ui/variables", "Variables"),
    ];
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (title) " · Paddock" }
                    link rel="stylesheet" href="/ui/assets/ui.css";
                    script src="/ui/assets/ui.js" defer {}
                }
                body data-watch=[watch] {
                    a.skip href="#main" { "Skip to content" }
                    header.top {
                        a.brand href="/ui/jobs" { "Paddock" }
                        nav aria-label="Main" {
                            ul {
                                @for (t, href, label) in nav {
                                    li {
                                        @if t == tab {
                                            a href=(href) aria-current="page" { (label) }
                                        } @else {
                                            a href=(href) { (label) }
                                        }
                                    }
                                }
                            }
                        }
                        form.logout method="post" action="/ui/logout" hidden data-logout {
                            button type="submit" { "Forget token" }
                        }
                    }
                    div #notice role="alert" hidden {}
                    main #main { (body) }
                }
            }
        }
        .into_string(),
    )
}

/// A page that says what is wrong, with its status code.
pub(crate) fn error_page(status: StatusCode, what: &str) -> Response {
    let body = html! {
        h1 { (status.as_u16()) ": " (status.canonical_reason().unwrap_or("Error")) }
        p.error { (what) }
        p { a href="/ui/jobs" { "Back to the jobs" } }
    };
    (status, page(&status.to_string(), Tab::None, None, body)).into_response()
}

/// A time in ns since the epoch as `2026-01-02 03:04:05 UTC` (empty for 0).
pub(crate) fn when(ns: u64) -> String {
    if ns == 0 {
        return String::new();
    }
    jiff::Timestamp::from_nanosecond(ns as i128)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

/// How long ago a time in ns was, shortly: `42s`, `5m`, `3h`, `2d`.
pub(crate) fn age(ns: u64) -> String {
    if ns == 0 {
        return String::new();
    }
    let now = jiff::Timestamp::now().as_nanosecond().max(0) as u64;
    let s = now.saturating_sub(ns) / 1_000_000_000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// A time element: the absolute time, readable, with the machine form for the script.
pub(crate) fn time_el(ns: u64) -> Markup {
    let t = when(ns);
    html! { time datetime=(t.replace(" UTC", "Z").replacen(' ', "T", 1)) title=(t) { (t) } }
}

/// A duration in ns, shortly (`250ms`, `5s`, `1m30s`).
pub(crate) fn duration(ns: u64) -> String {
    let ms = ns / 1_000_000;
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    match s {
        0..60 if !ms.is_multiple_of(1000) => format!("{:.1}s", ms as f64 / 1000.0),
        0..60 => format!("{s}s"),
        _ if s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{}m{}s", s / 60, s % 60),
    }
}

/// A serializable enum's wire name (`running`, `Task Setup`).
pub(crate) fn label<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// `s` percent-encoded for one path segment or query value.
pub(crate) fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The first eight characters of an id, as Nomad's UI shows them.
pub(crate) fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// The link to a job's page.
pub(crate) fn job_href(namespace: &str, id: &str) -> String {
    format!("/ui/jobs/{}?namespace={}", enc(id), enc(namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(enc("a b/c"), "a%20b%2Fc");
        assert_eq!(duration(1_500_000_000), "1.5s");
        assert_eq!(duration(90_000_000_000), "1m30s");
        assert_eq!(when(1_700_000_000_000_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(short("0123456789"), "01234567");
    }
}
