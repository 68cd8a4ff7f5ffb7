//! `GET /v1/event/stream`: newline-delimited JSON, one `{"Index": N, "Events": [...]}`
//! per change, `{}` as a heartbeat every 10 s. `topic=Topic:Key` (repeatable; either part
//! `*`; default every topic) and `namespace` (default `default`, `*` for all) filter it.
//! Topics: `Job`, `Allocation`, `Evaluation`, `Variables` (metadata only). The stream
//! starts at the request: events before it are not replayed.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::broadcast::error::RecvError;

use super::{ApiError, AppState};

/// Topics a subscription may name.
const TOPICS: &[&str] = &["*", "Job", "Allocation", "Evaluation", "Variables"];

/// Time between heartbeats.
const HEARTBEAT: Duration = Duration::from_secs(10);

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/v1/event/stream", get(stream))
}

async fn stream(
    State(agent): State<AppState>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let mut topics = Vec::new();
    let mut namespace = "default".to_string();
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
            _ => {}
        }
    }
    if topics.is_empty() {
        topics.push(("*".into(), "*".into()));
    }
    let rx = agent.events().subscribe();
    let body = futures::stream::unfold(
        (rx, topics, namespace),
        |(mut rx, topics, namespace)| async move {
            loop {
                let line = match tokio::time::timeout(HEARTBEAT, rx.recv()).await {
                    Err(_) => "{}\n".to_string(),
                    Ok(Ok(ev)) if ev.matches(&topics, &namespace) => format!(
                        "{}\n",
                        serde_json::json!({ "Index": ev.index, "Events": [ev.to_json()] })
                    ),
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
                return Some((Ok::<_, std::io::Error>(line), (rx, topics, namespace)));
            }
        },
    );
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}
