//! While the state DB cannot write (a full or failing disk, see [`crate::state`]), requests
//! that would write are answered 503 Service Unavailable naming the error, before they
//! change anything, with `Retry-After`: the agent retries the disk by itself and takes
//! writes again once one succeeds. Reads go on. A write that met the failure itself (the
//! request that found the disk full) turns from a 500 into the same 503.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState};

/// Seconds a client is told to wait before trying again (the longest wait between the
/// agent's own retries).
const RETRY_AFTER_SECS: u64 = 5;

/// Requests with a writing method that only read (plans, parsing, validation, search).
fn only_reads(path: &str) -> bool {
    path.ends_with("/plan")
        || path.starts_with("/v1/search")
        || path == "/v1/jobs/parse"
        || path == "/v1/validate/job"
}

fn would_write(method: &Method, path: &str) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::DELETE | Method::PATCH
    ) && !only_reads(path)
}

fn unavailable(reason: &str) -> Response {
    let mut r = ApiError(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the state DB cannot write, so nothing that needs a write is taken: {reason}; the agent retries by itself, try again later"
        ),
    )
    .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    r
}

/// The layer: 503 before a write while writes are refused, and for a write that failed
/// because they are.
pub(super) async fn refuse_writes_while_unwritable(
    State(agent): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let writes = would_write(req.method(), req.uri().path());
    if writes && let Some(reason) = agent.state_unwritable() {
        return unavailable(&reason);
    }
    let response = next.run(req).await;
    if writes && response.status() == StatusCode::INTERNAL_SERVER_ERROR {
        // The request's own write may have been the one that met the failure: its 500
        // said "state DB cannot write"; the status says so too.
        if agent.state_unwritable().is_some() {
            let (mut parts, body) = response.into_parts();
            parts.status = StatusCode::SERVICE_UNAVAILABLE;
            parts
                .headers
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            return Response::from_parts(parts, body);
        }
    }
    response
}
