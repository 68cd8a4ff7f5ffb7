//! Who may see the UI's pages.
//!
//! The API takes the agent's ACL token in `X-Nomad-Token` (or `Authorization: Bearer`).
//! A browser cannot send a header when it follows a link, so the pages also take it from
//! a cookie, set by the login form:
//! - `paddock_ui_token`, `Path=/ui; HttpOnly; SameSite=Strict`, no expiry (it ends with
//!   the browser session). `HttpOnly` keeps it from scripts; `SameSite=Strict` keeps other
//!   sites' pages from sending it; `Path=/ui` and this gate, which alone reads it, keep it
//!   a key to the pages only: every change (stop, purge, restart, signal) is a `/v1` call
//!   that needs the header, which only this origin's script can add, so a cookie can never
//!   make a forged request change anything.
//! - The same form's script keeps the token in the tab's `sessionStorage`, from which the
//!   live parts and buttons send it as `X-Nomad-Token`. A tab without it (opened anew)
//!   shows the pages through the cookie and asks for the token again for the live parts.
//!
//! What is checked is [`authorize`]'s to say: the one configured token, compared in
//! constant time, or with Nomad's ACL system the token's policies. The gate checks what
//! the path says a page needs ([`Need`]); a page about one object (an allocation, a job)
//! checks again in the object's own namespace, whatever `?namespace=` said, and offers
//! only what the API will let the token do there ([`Viewer::may_call`]): the logs with
//! `read-logs` (or `read-fs`), stop and purge with `submit-job`, restart, signal and stop
//! of an allocation with `alloc-lifecycle`.

use axum::Form;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

use std::sync::Arc;

use super::AppState;
use super::{Tab, enc, page};
use crate::acl::routes::RouteTable;
use crate::agent::Agent;

/// The cookie that carries the token for the pages.
const COOKIE: &str = "paddock_ui_token";

/// What a page shows, for the check of a token's rights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// The jobs list of every namespace: it shows those the token may read, so it needs
    /// one of them (the default namespace or one holding a job).
    ListJobs,
    /// Jobs, their allocations and evaluations in a namespace.
    ReadJobs { namespace: String },
    /// The node: attributes, drivers, devices, events.
    ReadNode,
    /// The loaded components and their metrics.
    ReadAgent,
    /// Variables: any token (as the API's list); each page shows and offers only what the
    /// token's variable rules allow ([`Viewer::may_variable`]).
    Variables,
}

impl Need {
    /// What the page at `path` (with its `?namespace=`) shows.
    fn of(path: &str, query: Option<&str>) -> Self {
        if path.starts_with("/ui/node") {
            return Need::ReadNode;
        }
        if path.starts_with("/ui/components") {
            return Need::ReadAgent;
        }
        if path.starts_with("/ui/variables") {
            return Need::Variables;
        }
        // The allocation's namespace is known once it is found: the page checks it then.
        if path.starts_with("/ui/allocations/") {
            return Need::ListJobs;
        }
        let namespace = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .find_map(|kv| kv.strip_prefix("namespace="))
            .filter(|n| !n.is_empty());
        match namespace {
            None | Some("*") if path == "/ui/jobs" || path == "/ui/evaluations" => Need::ListJobs,
            n => Need::ReadJobs {
                namespace: n.unwrap_or("default").to_string(),
            },
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("this agent requires an ACL token")]
    Missing,
    #[error("the ACL token is not valid")]
    Invalid,
    #[error("the ACL token's policies do not allow this page")]
    NotAllowed,
}

/// Whether `token` may see what `need` names.
pub fn authorize(agent: &Agent, token: Option<&str>, need: &Need) -> Result<(), Denied> {
    if agent.acl().enabled() {
        // Nomad's ACL system: what the API's reads of the same things need.
        let token = token.filter(|t| !t.is_empty());
        let caller = agent.acl().resolve(token).ok_or(Denied::Invalid)?;
        let acl = agent.acl().acl_of(&caller);
        let ok = match need {
            Need::ReadJobs { namespace } => acl.allow_ns(namespace, "read-job"),
            Need::ListJobs => agent
                .server()
                .jobs()
                .iter()
                .map(|j| j.namespace.as_str())
                .chain(["default"])
                .any(|ns| acl.allow_ns(ns, "read-job")),
            Need::ReadNode => acl.allow_node(crate::acl::Level::Read),
            Need::ReadAgent => acl.allow_agent(crate::acl::Level::Read),
            Need::Variables => true,
        };
        return match (ok, token) {
            (true, _) => Ok(()),
            (false, None) => Err(Denied::Missing),
            (false, Some(_)) => Err(Denied::NotAllowed),
        };
    }
    // One token sees everything.
    let Some(want) = agent.acl_token() else {
        return Ok(());
    };
    let given = token.ok_or(Denied::Missing)?;
    let same = given.len() == want.len()
        && given
            .bytes()
            .zip(want.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same { Ok(()) } else { Err(Denied::Invalid) }
}

/// The token a request carries: the API's headers, else the UI's cookie.
fn token_of(h: &HeaderMap) -> Option<String> {
    if let Some(t) = h.get("X-Nomad-Token").and_then(|v| v.to_str().ok()) {
        return Some(t.to_string());
    }
    if let Some(t) = h
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(t.to_string());
    }
    h.get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .map(decode)
}

/// Undo [`enc`] (the cookie's value is percent-encoded).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a viewer's token may do, for the pages' offers.
enum Rules {
    /// No ACL policies: everything (the gate's check was all).
    Off,
    /// A token the ACL system does not know: nothing.
    Unknown,
    /// The token's rules.
    Of(Box<crate::acl::Acl>),
}

/// The token a page was let in with, for pages that show only what it may see, and the
/// API's route table, by which it offers only the calls the token would pass.
#[derive(Clone)]
pub(crate) struct Viewer {
    token: Option<String>,
    api: Arc<RouteTable>,
}

impl Viewer {
    /// Whether this viewer may read the jobs of `namespace`.
    pub(crate) fn reads_jobs(&self, agent: &Agent, namespace: &str) -> bool {
        self.check_reads(agent, namespace).is_ok()
    }

    /// Whether this viewer may read the jobs (and allocations) of `namespace`, and why not.
    pub(crate) fn check_reads(&self, agent: &Agent, namespace: &str) -> Result<(), Denied> {
        let need = Need::ReadJobs {
            namespace: namespace.to_string(),
        };
        authorize(agent, self.token.as_deref(), &need)
    }

    /// Whether this viewer's token allows `op` (`list`, `read`, `write`) on the variable at
    /// `path` in `namespace` (everything without ACL policies).
    pub(crate) fn may_variable(
        &self,
        agent: &Agent,
        namespace: &str,
        path: &str,
        op: &str,
    ) -> bool {
        match self.rules(agent) {
            Rules::Off => true,
            Rules::Unknown => false,
            Rules::Of(acl) => acl.allow_variable(namespace, path, op),
        }
    }

    /// Whether this viewer's token holds the namespace capability `cap` in `namespace`
    /// (everything without ACL policies): what a call's handler checks beyond the route's
    /// need (`alloc-node-exec` for `alloc exec` into `raw_exec`).
    pub(crate) fn holds(&self, agent: &Agent, namespace: &str, cap: &str) -> bool {
        match self.rules(agent) {
            Rules::Off => true,
            Rules::Unknown => false,
            Rules::Of(acl) => acl.allow_ns(namespace, cap),
        }
    }

    /// The rules of this viewer's token.
    fn rules(&self, agent: &Agent) -> Rules {
        if !agent.acl().enabled() {
            return Rules::Off;
        }
        let token = self.token.as_deref().filter(|t| !t.is_empty());
        match agent.acl().resolve(token) {
            Some(caller) => Rules::Of(Box::new(agent.acl().acl_of(&caller))),
            None => Rules::Unknown,
        }
    }

    /// Whether the API will let this viewer make the call `method path` on an object of
    /// `namespace`, by the API's own table of what each endpoint needs
    /// ([`RouteTable::need`]): the page offers a button or a panel only then (the
    /// logs with `read-logs` or `read-fs`, stop and purge with `submit-job`, restart,
    /// signal and stop of an allocation with `alloc-lifecycle`). Without ACL policies the
    /// gate's check was all.
    pub(crate) fn may_call(
        &self,
        agent: &Agent,
        method: &str,
        path: &str,
        namespace: &str,
    ) -> bool {
        use crate::acl::check::Need as Api;
        let acl = match self.rules(agent) {
            Rules::Off => return true,
            Rules::Unknown => return false,
            Rules::Of(acl) => acl,
        };
        match self.api.need(method, path) {
            Api::Ns(caps, _) => caps.iter().any(|c| acl.allow_ns_spec(namespace, c)),
            Api::Open => true,
            // The pages offer only namespace-scoped calls; anything else is not offered.
            _ => acl.is_management(),
        }
    }
}

/// The 403 page of a page whose object the viewer may not see, asking for a token that
/// may; `here` is the page, to come back to after signing in.
pub(crate) fn refused(why: &Denied, here: &str) -> Response {
    login_form(StatusCode::FORBIDDEN, why, here)
}

/// The pages' gate: a request without the right token gets a 403 page that says so and
/// asks for the token.
pub(super) async fn gate(
    State((agent, api)): State<(AppState, Arc<RouteTable>)>,
    req: Request,
    next: Next,
) -> Response {
    let need = Need::of(req.uri().path(), req.uri().query());
    match authorize(&agent, token_of(req.headers()).as_deref(), &need) {
        Ok(()) => {
            let token = token_of(req.headers());
            let mut req = req;
            req.extensions_mut().insert(Viewer { token, api });
            next.run(req).await
        }
        Err(why) => {
            let here = req
                .uri()
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/ui/jobs".into());
            login_form(StatusCode::FORBIDDEN, &why, &here)
        }
    }
}

/// The form that asks for the token; `status` is 403 when a page was refused.
fn login_form(status: StatusCode, why: &Denied, next: &str) -> Response {
    let title = if status == StatusCode::FORBIDDEN {
        "403: Permission denied"
    } else {
        "Sign in"
    };
    let body: Markup = html! {
        h1 { (title) }
        p.error #denied { "Permission denied: " (why) ". Enter the agent's ACL token to see this page." }
        form.login method="post" action="/ui/login" data-login {
            input type="hidden" name="next" value=(next);
            label for="token" { "ACL token" }
            input #token type="password" name="token" autocomplete="off" required
                aria-describedby="denied";
            button type="submit" { "Sign in" }
        }
        p.hint { "The token is kept for this browser session only." }
    };
    (status, page(title, Tab::None, None, body)).into_response()
}

/// Where to go after signing in: a UI page of this agent only.
fn safe_next(next: &str) -> &str {
    if next.starts_with("/ui/") && !next.starts_with("//") && !next.contains('\\') {
        next
    } else {
        "/ui/jobs"
    }
}

#[derive(serde::Deserialize)]
pub(super) struct NextQuery {
    next: Option<String>,
}

/// `GET /ui/login`.
pub(super) async fn login_page(
    axum::extract::Query(q): axum::extract::Query<NextQuery>,
) -> Response {
    let next = safe_next(q.next.as_deref().unwrap_or(""));
    login_form(StatusCode::OK, &Denied::Missing, next)
}

#[derive(serde::Deserialize)]
pub(super) struct LoginForm {
    token: String,
    #[serde(default)]
    next: String,
}

/// `POST /ui/login`: a right token sets the cookie and goes on to the page asked for; a
/// wrong one is a 403 that says so.
pub(super) async fn login(State(agent): State<AppState>, Form(f): Form<LoginForm>) -> Response {
    let next = safe_next(&f.next).to_string();
    let token = f.token.trim();
    // A valid token logs in; each page then checks what its policies allow.
    if let Err(why) = authorize(&agent, Some(token), &Need::ReadAgent)
        && why != Denied::NotAllowed
    {
        return login_form(StatusCode::FORBIDDEN, &why, &next);
    }
    let cookie = format!(
        "{COOKIE}={}; Path=/ui; HttpOnly; SameSite=Strict",
        enc(token)
    );
    let mut r = Redirect::to(&next).into_response();
    *r.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `POST /ui/logout`: forget the cookie (the script forgets its copy).
pub(super) async fn logout() -> Response {
    let mut r = Redirect::to("/ui/login").into_response();
    *r.status_mut() = StatusCode::SEE_OTHER;
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "paddock_ui_token=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_token_from_header_or_cookie() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; paddock_ui_token=s%3Bx"),
        );
        assert_eq!(token_of(&h).as_deref(), Some("s;x"));
        h.insert("X-Nomad-Token", HeaderValue::from_static("hdr"));
        assert_eq!(token_of(&h).as_deref(), Some("hdr"));
    }

    #[test]
    fn next_stays_on_the_ui() {
        assert_eq!(safe_next("/ui/node"), "/ui/node");
        assert_eq!(safe_next("https://example.com/"), "/ui/jobs");
        assert_eq!(safe_next("//example.com/ui/"), "/ui/jobs");
        assert_eq!(
            Need::of("/ui/jobs/x", Some("namespace=prod")),
            Need::ReadJobs {
                namespace: "prod".into()
            }
        );
        assert_eq!(Need::of("/ui/node", None), Need::ReadNode);
        assert_eq!(
            Need::of("/ui/allocations/abc", Some("namespace=default")),
            Need::ListJobs,
            "the page checks the allocation's own namespace"
        );
        assert_eq!(Need::of("/ui/jobs", None), Need::ListJobs);
        assert_eq!(Need::of("/ui/jobs", Some("namespace=*")), Need::ListJobs);
    }
}
