//! `GET /v1/event/stream`: newline-delimited JSON, one `{"Index": N, "Events": [...]}`
//! per change, `{}` as a heartbeat every 10 s. `topic=Topic:Key` (repeatable; either part
//! `*`; default every topic) and `namespace` (default `default`, `*` for all) filter it.
//! Topics with events here: `Job`, `Allocation`, `Evaluation`, `Node`, `Variables` (metadata
//! only), `Deployment`, `Service` (`ServiceRegistration`, `ServiceDeregistration`) and
//! `Component`; Nomad's other topics (`NodePool`, `ACLToken`, ...) are accepted and stay
//! quiet. The stream starts with the
//! kept events (the newest 100, see [`crate::events`]) at or after `index` (all of them
//! for 0, the default, as Nomad does), then goes on live. With the ACL system on, an
//! event of a namespace reaches the stream only if the token holds `read-job` there (a
//! `namespace=*` stream, which any namespace granting it lets through, shows the token's
//! namespaces only, as Nomad filters each event). The token is checked again under the
//! rules as they are whenever a token or policy changes (and each second, for its expiry):
//! each event is filtered by the current rules, and a stream the token no longer allows
//! (deleted, expired, or its policies no longer granting the topics) ends with Nomad's
//! `{"Error": "subscription closed by server, client should resubscribe"}`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast::error::RecvError;

use super::acl::{Who, events_allowed};
use super::routes::Routes;
use super::{ApiError, AppState};
use crate::acl::check::Need;
use crate::events::Event;

/// Topics a subscription may name.
const TOPICS: &[&str] = &[
    "*",
    "Job",
    "Allocation",
    "Evaluation",
    "Node",
    "Variables",
    "NodePool",
    "Deployment",
    "Component",
    "Service",
    "Operator",
    "HostVolume",
    "CSIVolume",
    "CSIPlugin",
    "ACLToken",
    "ACLPolicy",
    "ACLRole",
];

/// Time between heartbeats.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// Longest time between two checks of a stream's token against the ACL store as it is
/// then (a deleted or expired token, a changed or deleted policy).
const ACL_RECHECK: Duration = Duration::from_secs(1);

/// What a stream whose token no longer allows it answers last (Nomad's
/// `ErrSubscriptionClosed`, sent when its broker closes the subscription).
const CLOSED_BY_SERVER: &str = "subscription closed by server, client should resubscribe";

/// One open stream.
struct Subscription {
    backlog: VecDeque<Arc<Event>>,
    rx: tokio::sync::broadcast::Receiver<Arc<Event>>,
    topics: Vec<(String, String)>,
    namespace: String,
    /// The caller under the rules as last checked (none: the ACL system is off).
    who: Option<Who>,
    /// The request's query, as the gate checked it when the stream opened.
    query: Vec<(String, String)>,
    agent: AppState,
    heartbeat_at: tokio::time::Instant,
    /// The ACL store's index and the time at the last check of `who`.
    acl_index: u64,
    checked_at: tokio::time::Instant,
    closed: bool,
}

impl Subscription {
    /// Whether the caller, under the tokens and policies as they are now, may still hold
    /// this stream; its `who` then holds the current rules, which each event is filtered
    /// by. A stream whose token is gone or whose topics are no longer allowed is closed,
    /// as Nomad's broker closes it on a token or policy change.
    fn still_allowed(&mut self) -> bool {
        let Some(who) = &self.who else {
            return true;
        };
        // Nothing to look at again until the store changes or a check's time comes
        // (a token may expire without any change).
        let index = self.agent.acl().index();
        if index == self.acl_index && self.checked_at.elapsed() < ACL_RECHECK {
            return true;
        }
        self.acl_index = index;
        self.checked_at = tokio::time::Instant::now();
        let Some(now) = who.refreshed(self.agent.acl()) else {
            return false;
        };
        let ns = self
            .query
            .iter()
            .find(|(k, _)| k == "namespace")
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
            .unwrap_or("default");
        let allowed = events_allowed(now.acl(), &self.query, ns);
        self.who = Some(now);
        allowed
    }

    /// The next line to send, `None` once the stream is over.
    async fn next_line(&mut self) -> Option<String> {
        if self.closed {
            return None;
        }
        loop {
            let next = match self.backlog.pop_front() {
                Some(ev) => Some(Ok(ev)),
                None => {
                    let wait = ACL_RECHECK.min(
                        self.heartbeat_at
                            .saturating_duration_since(tokio::time::Instant::now()),
                    );
                    tokio::time::timeout(wait, self.rx.recv()).await.ok()
                }
            };
            if !self.still_allowed() {
                tracing::debug!("event stream closed: its token no longer allows it");
                self.closed = true;
                return Some(format!(
                    "{}\n",
                    serde_json::json!({ "Error": CLOSED_BY_SERVER })
                ));
            }
            let line = match next {
                None if tokio::time::Instant::now() >= self.heartbeat_at => "{}\n".to_string(),
                None => continue,
                Some(Ok(ev))
                    if ev.matches(&self.topics, &self.namespace)
                        && visible(self.who.as_ref(), &ev) =>
                {
                    // Made once per event, whoever sends it first: a replay to many
                    // subscribers costs a copy each, not a serialization each.
                    ev.stream_line().to_string()
                }
                Some(Ok(_)) => continue,
                Some(Err(RecvError::Lagged(n))) => {
                    tracing::warn!(missed = n, "event stream subscriber fell behind");
                    format!(
                        "{}\n",
                        serde_json::json!({ "Error": format!("{n} events were dropped: the subscriber fell behind") })
                    )
                }
                Some(Err(RecvError::Closed)) => return None,
            };
            self.heartbeat_at = tokio::time::Instant::now() + HEARTBEAT;
            return Some(line);
        }
    }
}

pub(super) fn routes() -> Routes {
    // `stream/event_broker.go`: per topic.
    Routes::new().on("GET", "/v1/event/stream", stream, |_| Need::Events)
}

/// Whether the token `who` (none: the ACL system is off) may see `ev`: one outside
/// namespaces (the node's) was checked by the gate for its topic; one in a namespace
/// needs `read-job` there.
fn visible(who: Option<&Who>, ev: &Event) -> bool {
    ev.namespace.is_empty() || who.is_none_or(|w| w.acl().allow_ns(&ev.namespace, "read-job"))
}

async fn stream(
    State(agent): State<AppState>,
    who: Option<Extension<Who>>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let who = who.map(|Extension(w)| w);
    let gate_query = params.clone();
    let mut topics = Vec::new();
    let mut namespace = "default".to_string();
    let mut index = 0u64;
    for (k, v) in params {
        match k.as_str() {
            "topic" => {
                let (t, key) = v.split_once(':').unwrap_or((v.as_str(), "*"));
                if !TOPICS.contains(&t) {
                    return Err(ApiError::bad_request(format!(
                        "topic {t:?} is not one of {}",
                        TOPICS.join(", ")
                    )));
                }
                topics.push((t.to_string(), key.to_string()));
            }
            "namespace" => namespace = v,
            "index" => {
                index = v
                    .parse()
                    .map_err(|_| ApiError::bad_request(format!("index {v:?} is not a number")))?
            }
            _ => {}
        }
    }
    if topics.is_empty() {
        topics.push(("*".into(), "*".into()));
    }
    let (backlog, rx) = agent.events().subscribe_from(index);
    let acl_index = agent.acl().index();
    let sub = Subscription {
        backlog: backlog.into(),
        rx,
        topics,
        namespace,
        who,
        query: gate_query,
        agent,
        heartbeat_at: tokio::time::Instant::now() + HEARTBEAT,
        acl_index,
        checked_at: tokio::time::Instant::now(),
        closed: false,
    };
    let body = futures::stream::unfold(sub, |mut sub| async move {
        let line = sub.next_line().await?;
        // A long replay gives other connections their turn between lines.
        tokio::task::yield_now().await;
        Some((Ok::<_, std::io::Error>(line), sub))
    });
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}
