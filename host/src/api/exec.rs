//! `GET /v1/client/allocation/{id}/exec`: `alloc exec` over a websocket, in Nomad's protocol
//! (`command/agent/alloc_endpoint.go`, `client/alloc_endpoint.go`, `plugins/drivers`'
//! `ExecTaskStreamingRequestMsg`/`ResponseMsg` in their JSON form).
//!
//! Query: `task` (required), `command` (a JSON array of strings, not empty), `tty`
//! (`strconv.ParseBool`). Every frame is a JSON text message:
//!
//! | caller → agent | agent → caller |
//! |---|---|
//! | `{"stdin":{"data":"<base64>"}}`, `{"stdin":{"close":true}}` | `{"stdout":{"data":"<base64>"}}`, `{"stdout":{"close":true}}` |
//! | `{"tty_size":{"height":H,"width":W}}` | `{"stderr":{...}}` (none with a terminal) |
//! | `{}` (a heartbeat, ignored) | `{"exited":true,"result":{"exit_code":N}}`, then a close frame (1000) |
//!
//! A browser, which cannot set a header on a websocket, adds `ws_handshake=true` and sends
//! its token in the first message, `{"version":1,"auth_token":"…"}` (Nomad's
//! `command/agent/websockets.go`): everything below is then checked after the upgrade and
//! refused with a close frame, a token without `alloc-exec` as 1008 `Permission denied`.
//!
//! Otherwise what the caller asked wrongly is answered before the upgrade, as plain HTTP: a query
//! field that does not parse or is missing (400, naming it), an unknown allocation or task
//! (404), a driver that does not run commands in its tasks (400), a token without
//! `alloc-exec` (403, at the ACL gate) or, for a driver without filesystem isolation
//! (`raw_exec`), without `alloc-node-exec` as well (403), as Nomad's client requires. Once
//! upgraded, a failure closes the socket as Nomad's HTTP layer does: code 1011 for an
//! internal error, 1008 (policy violation) for the rest, with the message. The command is
//! killed when the socket goes away; a signal's exit is reported as `128 + signal`
//! ([`crate::execstream`] serves the session; this file translates its frames).

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::acl::Who;
use super::routes::Routes;
use super::{ApiError, AppState};
use crate::acl::check::{Need, NsFrom};
use crate::drivermanager::types::FsIsolation;
use crate::execstream::{Ended, Event, Incoming};
use crate::runtime::types::ExecInput;
use crate::taskrunner::TaskRunner;

pub(super) fn routes() -> Routes {
    // `client/alloc_endpoint.go`: `alloc-exec` in the allocation's namespace, and
    // `alloc-node-exec` too for a driver without filesystem isolation (checked below). A
    // browser cannot set a header on a websocket: with `ws_handshake=true` the token comes
    // in the first message, so the handler checks it after the upgrade.
    Routes::new().on("GET", "/v1/client/allocation/{id}/exec", exec, |a| {
        if TRUE.iter().any(|v| a.query_has("ws_handshake", v)) {
            Need::Open
        } else {
            Need::Ns(&["alloc-exec"], NsFrom::Alloc(a.param("id")))
        }
    })
}

/// `strconv.ParseBool`'s true.
const TRUE: [&str; 6] = ["true", "1", "t", "T", "TRUE", "True"];

/// Whether `req` is an `alloc exec` whose token comes in its first message
/// (`ws_handshake=true`): its handler checks the token, not the layer in front of it.
pub(super) fn handshake_request(req: &axum::extract::Request) -> bool {
    let path = req.uri().path();
    let exec_path = path.starts_with("/v1/client/allocation/")
        && path.ends_with("/exec")
        && path.matches('/').count() == 5;
    exec_path
        && req.method() == axum::http::Method::GET
        && req.uri().query().is_some_and(|q| {
            q.split('&').any(|kv| {
                kv.split_once('=')
                    .is_some_and(|(k, v)| k == "ws_handshake" && TRUE.contains(&v))
            })
        })
}

#[derive(Debug, Deserialize)]
struct ExecQuery {
    #[serde(default)]
    task: String,
    #[serde(default)]
    command: String,
    #[serde(default, deserialize_with = "super::go_bool")]
    tty: bool,
    #[serde(default, deserialize_with = "super::go_bool")]
    ws_handshake: bool,
}

/// The caller's `command`: a JSON array of strings, not empty.
fn command_of(q: &ExecQuery) -> Result<Vec<String>, ApiError> {
    if q.command.is_empty() {
        return Err(ApiError::bad_request(
            "command: missing (a JSON array of strings, e.g. [\"/bin/sh\"])",
        ));
    }
    let cmd: Vec<String> = serde_json::from_str(&q.command)
        .map_err(|e| ApiError::bad_request(format!("command: not a JSON array of strings: {e}")))?;
    if cmd.is_empty() || cmd[0].is_empty() {
        return Err(ApiError::bad_request("command is not present"));
    }
    Ok(cmd)
}

fn forbidden(m: impl Into<String>) -> ApiError {
    ApiError(StatusCode::FORBIDDEN, m.into())
}

/// The running task to exec in, once the caller may (`acl`: the token's rules; `None`
/// when the gate already checked `alloc-exec` or ACLs are off).
async fn prepare(
    agent: &AppState,
    id: &str,
    task: &str,
    acl: Option<&crate::acl::Acl>,
    checked: Option<&crate::acl::Acl>,
) -> Result<Arc<TaskRunner>, ApiError> {
    if task.is_empty() {
        return Err(ApiError::bad_request("task: missing task name"));
    }
    let alloc = agent
        .allocation(id)
        .ok_or_else(|| ApiError::not_found(format!("alloc {id:?} not found")))?;
    if let Some(acl) = acl
        && !acl.allow_ns(&alloc.namespace, "alloc-exec")
    {
        return Err(forbidden("Permission denied"));
    }
    let runner = agent
        .client()
        .exec_task(id, task)
        .map_err(|e| ApiError::not_found(e.to_string()))?;
    let caps = runner
        .capabilities()
        .await
        .map_err(|e| ApiError::not_found(e.to_string()))?;
    let driver = runner.task().driver.clone();
    if !caps.exec {
        return Err(ApiError::bad_request(format!(
            "driver {driver:?} of task {task:?} does not run commands in its tasks"
        )));
    }
    if caps.fs_isolation == FsIsolation::None
        && acl
            .or(checked)
            .is_some_and(|acl| !acl.allow_ns(&alloc.namespace, "alloc-node-exec"))
    {
        return Err(forbidden(format!(
            "Permission denied: driver {driver:?} runs commands on the node itself, which needs alloc-node-exec"
        )));
    }
    Ok(runner)
}

/// A refusal after the upgrade, as Nomad's HTTP layer closes the socket: 1011 for an
/// internal error, 1008 for the rest.
fn close_code(e: &ApiError) -> u16 {
    if e.0 == StatusCode::INTERNAL_SERVER_ERROR {
        1011
    } else {
        1008
    }
}

/// The token of a `ws_handshake` session's first message (`{"version":1,"auth_token":…}`),
/// which must agree with a header token when the caller sent one.
async fn handshake(socket: &mut WebSocket, header: Option<&str>) -> Result<String, String> {
    let first = tokio::time::timeout(Duration::from_secs(30), socket.recv())
        .await
        .map_err(|_| "no handshake message within 30 s".to_string())?;
    let text = match first {
        Some(Ok(Message::Text(t))) => t.to_string(),
        _ => return Err("the handshake message is missing".into()),
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("handshake: not JSON: {e}"))?;
    let token = v["auth_token"].as_str().unwrap_or_default().to_string();
    if header.is_some_and(|h| !h.is_empty() && h != token) {
        return Err("handshake auth token mismatched auth header token".into());
    }
    if v["version"].as_i64() != Some(1) {
        return Err(format!("unexpected handshake value: {}", v["version"]));
    }
    Ok(token)
}

async fn exec(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<ExecQuery>, axum::extract::rejection::QueryRejection>,
    who: Option<Extension<Who>>,
    headers: axum::http::HeaderMap,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let command = command_of(&q)?;
    let (task, tty) = (q.task.clone(), q.tty);
    if !q.ws_handshake {
        let checked = who.as_ref().map(|w| w.acl());
        let runner = prepare(&agent, &id, &task, None, checked).await?;
        return Ok(ws.on_upgrade(move |socket| session(socket, runner, id, task, command, tty)));
    }
    let header = super::acl::secret_of(&headers).map(str::to_string);
    Ok(ws.on_upgrade(move |mut socket| async move {
        let token = match handshake(&mut socket, header.as_deref()).await {
            Ok(t) => t,
            Err(e) => return close(socket, 1008, &e).await,
        };
        let store = agent.acl();
        let acl = if store.enabled() {
            match store.resolve(Some(&token)) {
                Some(caller) => Some(store.acl_of(&caller)),
                None => return close(socket, 1008, "ACL token not found").await,
            }
        } else {
            if let Some(want) = agent.acl_token()
                && !super::token_matches(&token, want)
            {
                return close(
                    socket,
                    1008,
                    "Permission denied: the ACL token is not valid",
                )
                .await;
            }
            None
        };
        match prepare(&agent, &id, &task, acl.as_ref(), None).await {
            Ok(runner) => session(socket, runner, id, task, command, tty).await,
            Err(e) => close(socket, close_code(&e), &e.1).await,
        }
    }))
}

async fn session(
    socket: WebSocket,
    runner: Arc<TaskRunner>,
    id: String,
    task: String,
    command: Vec<String>,
    tty: bool,
) {
    use futures::{SinkExt, StreamExt};
    tracing::info!(alloc = %id, task = %task, command = ?command, tty, "alloc exec session starting");
    let started = match runner.exec(command, tty).await {
        Ok(s) => s.into_started(),
        Err(e) => return close(socket, 1008, &e.to_string()).await,
    };
    let (mut tx, mut rx) = socket.split();
    let (in_tx, in_rx) = mpsc::channel(16);
    let (out_tx, mut out_rx) = mpsc::channel::<Event>(64);
    // The caller's frames, as inputs.
    let reader = tokio::spawn(async move {
        loop {
            let i = match incoming(rx.next().await) {
                Frame::Input(i) => Incoming::Input(i),
                Frame::Heartbeat => continue,
                Frame::Bad(why) => {
                    tracing::warn!(error = %why, "alloc exec: a frame the agent cannot read");
                    continue;
                }
                Frame::Gone => Incoming::Gone,
            };
            let gone = matches!(i, Incoming::Gone);
            if in_tx.send(i).await.is_err() || gone {
                return;
            }
        }
    });
    // The session's events, as frames.
    let writer = tokio::spawn(async move {
        while let Some(e) = out_rx.recv().await {
            let m = match e {
                Event::Stdout(b) => data_frame("stdout", &b),
                Event::Stderr(b) => data_frame("stderr", &b),
                Event::StdoutClosed => frame(json!({ "stdout": { "close": true } })),
                Event::StderrClosed => frame(json!({ "stderr": { "close": true } })),
                Event::Exited(code) => {
                    frame(json!({ "exited": true, "result": { "exit_code": code } }))
                }
            };
            if tx.send(m).await.is_err() {
                break;
            }
        }
        tx
    });
    let ended = crate::execstream::serve(started, in_rx, out_tx).await;
    reader.abort();
    if let Ok(mut tx) = writer.await {
        let (code, reason) = match &ended {
            Ended::Exited(_) => (1000, String::new()),
            Ended::Failed(e) => (1011, e.clone()),
            Ended::Gone => (1000, String::new()),
        };
        let _ = tx
            .send(Message::Close(Some(CloseFrame {
                code,
                reason: Utf8Bytes::from(cut(&reason)),
            })))
            .await;
    }
    tracing::info!(alloc = %id, task = %task, ended = ?ended, "alloc exec session ended");
}

/// `reason` cut to what a close frame holds (123 bytes), at a character boundary.
fn cut(reason: &str) -> String {
    let mut end = reason.len().min(120);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

/// Close the socket with `code` and `reason`.
async fn close(mut socket: WebSocket, code: u16, reason: &str) {
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: Utf8Bytes::from(cut(reason)),
        })))
        .await;
}

fn frame(v: Value) -> Message {
    Message::Text(Utf8Bytes::from(v.to_string()))
}

fn data_frame(stream: &str, bytes: &[u8]) -> Message {
    frame(json!({ stream: { "data": base64::engine::general_purpose::STANDARD.encode(bytes) } }))
}

/// One caller frame.
enum Frame {
    Input(ExecInput),
    Heartbeat,
    Gone,
    Bad(String),
}

fn incoming(msg: Option<Result<Message, axum::Error>>) -> Frame {
    let text = match msg {
        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Frame::Gone,
        Some(Ok(Message::Text(t))) => t.to_string(),
        Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
        Some(Ok(Message::Ping(_) | Message::Pong(_))) => return Frame::Heartbeat,
    };
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return Frame::Bad(format!("a frame that is not JSON: {e}")),
    };
    if let Some(s) = v.get("tty_size").filter(|s| !s.is_null()) {
        let dim = |k: &str| s[k].as_u64().map(|n| n.min(u64::from(u16::MAX)) as u16);
        return match (dim("height"), dim("width")) {
            (Some(rows), Some(cols)) => Frame::Input(ExecInput::Resize { rows, cols }),
            _ => Frame::Bad("tty_size: height and width must be numbers".into()),
        };
    }
    if let Some(s) = v.get("stdin").filter(|s| !s.is_null()) {
        if let Some(d) = s["data"].as_str().filter(|d| !d.is_empty()) {
            return match base64::engine::general_purpose::STANDARD.decode(d) {
                Ok(b) => Frame::Input(ExecInput::Stdin(b)),
                Err(e) => Frame::Bad(format!("stdin.data: not base64: {e}")),
            };
        }
        if s["close"].as_bool() == Some(true) {
            return Frame::Input(ExecInput::StdinClosed);
        }
    }
    Frame::Heartbeat
}
