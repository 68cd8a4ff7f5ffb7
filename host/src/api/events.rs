//! `GET /v1/event/stream`: newline-delimited JSON, one `{"Index": N, "Events": [...]}`
//! per change, `{}` as a heartbeat every 10 s. `topic=Topic:Key` (repeatable; either part
//! `*`; default every topic) and `namespace` (default `default`, `*` for all) filter it.
//! Topics with events here: `Job`, `Allocation`, `Evaluation`, `Node`, `Variables` (metadata
//! only); Nomad's other topics
//! (`Deployment`, `Service`, ...) are accepted and stay quiet. The stream starts with the
//! kept events (the newest 100, see [`crate::events`]) at or after `index` (all of them
//! for 0, the default, as Nomad does), then goes on live. With the ACL system on, an
//! event of a namespace reaches the stream only if the token holds `read-job` there (a
//! `namespace=*` stream, which any namespace granting it lets through, shows the token's
//! namespaces only, as Nomad filters each event).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use tokio::sync::broadcast::error::RecvError;

use super::acl::Who;
use super::{ApiError, AppState};
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

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/v1/event/stream", get(stream))
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
    let backlog: std::collections::VecDeque<_> = backlog.into();
    let body = futures::stream::unfold(
        (backlog, rx, topics, namespace, who),
        |(mut backlog, mut rx, topics, namespace, who)| async move {
            loop {
                let next = match backlog.pop_front() {
                    Some(ev) => Ok(Ok(ev)),
                    None => tokio::time::timeout(HEARTBEAT, rx.recv()).await,
                };
                let line = match next {
                    Err(_) => "{}\n".to_string(),
                    Ok(Ok(ev)) if ev.matches(&topics, &namespace) && visible(who.as_ref(), &ev) => {
                        format!(
                            "{}\n",
                            serde_json::json!({ "Index": ev.index, "Events": [ev.to_json()] })
                        )
                    }
                    Ok(Ok(_)) => continue,
                    Ok(Err(RecvError::Lagged(n))) => {
                        tracing::warn!(missed = n, "event stream subscriber fell behind");
                        format!(
                            "{}\n",
                            serde_json::json!({ "Error": format!("{n} events were dropped: the subscriber fell behind") })
                        )
                    }
                    Ok(Err(RecvError::Closed)) => return None,
                };
                return Some((
                    Ok::<_, std::io::Error>(line),
                    (backlog, rx, topics, namespace, who),
                ));
            }
        },
    );
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}
