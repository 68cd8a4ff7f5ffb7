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
//! What the caller asked wrongly is answered before the upgrade, as plain HTTP: a query
//! field that does not parse or is missing (400, naming it), an unknown allocation or task
//! (404), a driver that does not run commands in its tasks (400), a token without
//! `alloc-exec` (403, at the ACL gate) or, for a driver without filesystem isolation
//! (`raw_exec`), without `alloc-node-exec` as well (403), as Nomad's client requires. Once
//! upgraded, a failure closes the socket as Nomad's HTTP layer does: code 1011 for an
//! internal error, 1008 (policy violation) for the rest, with the message. The command is
//! killed when the socket goes away; a signal's exit is reported as `128 + signal`.

use std::time::Duration;

use axum::Extension;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::acl::Who;
use super::routes::Routes;
use super::{ApiError, AppState};
use crate::acl::check::{Need, NsFrom};
use crate::drivermanager::types::FsIsolation;
use crate::runtime::types::{ExecInput, ExecOutput, ExecProcess};
use crate::taskrunner::{DriverSession, TaskExec};

pub(super) fn routes() -> Routes {
    // `client/alloc_endpoint.go`: `alloc-exec` in the allocation's namespace, and
    // `alloc-node-exec` too for a driver without filesystem isolation (checked below).
    Routes::new().on("GET", "/v1/client/allocation/{id}/exec", exec, |a| {
        Need::Ns(&["alloc-exec"], NsFrom::Alloc(a.param("id")))
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

async fn exec(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<ExecQuery>, axum::extract::rejection::QueryRejection>,
    who: Option<Extension<Who>>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if q.task.is_empty() {
        return Err(ApiError::bad_request("task: missing task name"));
    }
    let command = command_of(&q)?;
    let alloc = agent
        .allocation(&id)
        .ok_or_else(|| ApiError::not_found(format!("alloc {id:?} not found")))?;
    let runner = agent
        .client()
        .exec_task(&id, &q.task)
        .map_err(|e| ApiError::not_found(e.to_string()))?;
    let caps = runner
        .capabilities()
        .await
        .map_err(|e| ApiError(StatusCode::NOT_FOUND, e.to_string()))?;
    let driver = runner.task().driver.clone();
    if !caps.exec {
        return Err(ApiError::bad_request(format!(
            "driver {driver:?} of task {:?} does not run commands in its tasks",
            q.task
        )));
    }
    if caps.fs_isolation == FsIsolation::None
        && who.is_some_and(|w| !w.acl().allow_ns(&alloc.namespace, "alloc-node-exec"))
    {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            format!(
                "Permission denied: driver {driver:?} runs commands on the node itself, which needs alloc-node-exec"
            ),
        ));
    }
    let task = q.task.clone();
    let tty = q.tty;
    tracing::info!(alloc = %id, task = %task, command = ?command, tty, "alloc exec session starting");
    Ok(ws.on_upgrade(move |socket| async move {
        let started = runner.exec(command, tty).await;
        match started {
            Err(e) => close(socket, 1008, &e.to_string()).await,
            Ok(TaskExec::Process(p)) => serve_process(socket, p).await,
            Ok(TaskExec::Session(first, s)) => serve_session(socket, first, s).await,
        }
        tracing::info!(alloc = %id, task = %task, "alloc exec session ended");
    }))
}

/// Close the socket with `code` and `reason` (cut to what a close frame holds).
async fn close(mut socket: WebSocket, code: u16, reason: &str) {
    let mut reason = reason.to_string();
    if reason.len() > 120 {
        let mut end = 120;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: Utf8Bytes::from(reason),
        })))
        .await;
}

fn frame(v: Value) -> Message {
    Message::Text(Utf8Bytes::from(v.to_string()))
}

fn data_frame(stream: &str, bytes: &[u8]) -> Message {
    frame(json!({ stream: { "data": base64::engine::general_purpose::STANDARD.encode(bytes) } }))
}

/// One caller frame, as an input.
enum Incoming {
    Input(ExecInput),
    Heartbeat,
    Gone,
    Bad(String),
}

fn incoming(msg: Option<Result<Message, axum::Error>>) -> Incoming {
    let text = match msg {
        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Incoming::Gone,
        Some(Ok(Message::Text(t))) => t.to_string(),
        Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
        Some(Ok(Message::Ping(_) | Message::Pong(_))) => return Incoming::Heartbeat,
    };
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return Incoming::Bad(format!("a frame that is not JSON: {e}")),
    };
    if let Some(s) = v.get("tty_size").filter(|s| !s.is_null()) {
        let dim = |k: &str| s[k].as_u64().map(|n| n.min(u64::from(u16::MAX)) as u16);
        return match (dim("height"), dim("width")) {
            (Some(rows), Some(cols)) => Incoming::Input(ExecInput::Resize { rows, cols }),
            _ => Incoming::Bad("tty_size: height and width must be numbers".into()),
        };
    }
    if let Some(s) = v.get("stdin").filter(|s| !s.is_null()) {
        if let Some(d) = s["data"].as_str().filter(|d| !d.is_empty()) {
            return match base64::engine::general_purpose::STANDARD.decode(d) {
                Ok(b) => Incoming::Input(ExecInput::Stdin(b)),
                Err(e) => Incoming::Bad(format!("stdin.data: not base64: {e}")),
            };
        }
        if s["close"].as_bool() == Some(true) {
            return Incoming::Input(ExecInput::StdinClosed);
        }
    }
    Incoming::Heartbeat
}

/// Pump a stream's bytes into frames until its end (then a `close` frame).
fn pump(
    mut from: std::pin::Pin<Box<dyn AsyncRead + Send>>,
    stream: &'static str,
    to: mpsc::Sender<Message>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 << 10];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.send(data_frame(stream, &buf[..n])).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = to.send(frame(json!({ stream: { "close": true } }))).await;
    })
}

/// How long the output of an exited command is still read (what it left running may hold
/// its stdout open).
const DRAIN: Duration = Duration::from_secs(1);

async fn serve_process(socket: WebSocket, p: ExecProcess) {
    use futures::{SinkExt, StreamExt};
    let ExecProcess {
        mut stdin,
        stdout,
        stderr,
        control,
    } = p;
    let (mut tx, mut rx) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(64);
    let mut pumps = vec![pump(stdout, "stdout", out_tx.clone())];
    if let Some(e) = stderr {
        pumps.push(pump(e, "stderr", out_tx.clone()));
    }
    drop(out_tx);
    let mut stdin_open = true;
    let mut outputs_done = false;
    let exited = control.wait();
    tokio::pin!(exited);
    let result = loop {
        tokio::select! {
            r = &mut exited => break Some(r),
            m = out_rx.recv(), if !outputs_done => match m {
                Some(m) => {
                    if tx.send(m).await.is_err() {
                        break None;
                    }
                }
                None => outputs_done = true,
            },
            m = rx.next() => match incoming(m) {
                Incoming::Gone => break None,
                Incoming::Heartbeat => {}
                Incoming::Bad(why) => {
                    tracing::warn!(error = %why, "alloc exec: a frame the agent cannot read");
                }
                Incoming::Input(ExecInput::Stdin(b)) if stdin_open => {
                    if stdin.write_all(&b).await.is_err() {
                        stdin_open = false;
                    }
                }
                Incoming::Input(ExecInput::Stdin(_)) => {}
                Incoming::Input(ExecInput::StdinClosed) => {
                    let _ = stdin.shutdown().await;
                    stdin = Box::pin(tokio::io::sink());
                    stdin_open = false;
                }
                Incoming::Input(ExecInput::Resize { rows, cols }) => {
                    if let Err(e) = control.resize(rows, cols) {
                        tracing::debug!(error = %e, "alloc exec: resize");
                    }
                }
            },
        }
    };
    let Some(result) = result else {
        // The caller went away: the command goes too.
        control.kill();
        for p in pumps {
            p.abort();
        }
        let _ = control.wait().await;
        return;
    };
    // Exited: what it wrote is still sent, for a while.
    let deadline = tokio::time::Instant::now() + DRAIN;
    while !outputs_done {
        match tokio::time::timeout_at(deadline, out_rx.recv()).await {
            Ok(Some(m)) => {
                if tx.send(m).await.is_err() {
                    break;
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    for p in pumps {
        p.abort();
    }
    let code = if result.signal != 0 {
        128 + result.signal
    } else {
        result.exit_code
    };
    let _ = tx
        .send(frame(
            json!({ "exited": true, "result": { "exit_code": code } }),
        ))
        .await;
    let _ = tx
        .send(Message::Close(Some(CloseFrame {
            code: 1000,
            reason: Utf8Bytes::from_static(""),
        })))
        .await;
}

async fn serve_session(mut socket: WebSocket, first: ExecOutput, session: DriverSession) {
    let mut out = first;
    loop {
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            if !bytes.is_empty() && socket.send(data_frame(stream, bytes)).await.is_err() {
                return;
            }
        }
        if let Some(code) = out.exited {
            let _ = socket
                .send(frame(
                    json!({ "exited": true, "result": { "exit_code": code } }),
                ))
                .await;
            let _ = socket
                .send(Message::Close(Some(CloseFrame {
                    code: 1000,
                    reason: Utf8Bytes::from_static(""),
                })))
                .await;
            return;
        }
        let input = loop {
            match incoming(socket.recv().await) {
                Incoming::Gone => return,
                Incoming::Heartbeat => {}
                Incoming::Bad(why) => {
                    tracing::warn!(error = %why, "alloc exec: a frame the agent cannot read");
                }
                Incoming::Input(i) => break i,
            }
        };
        out = match session.step(std::mem::take(&mut out.state), input).await {
            Ok(o) => o,
            Err(e) => return close(socket, 1011, &e.to_string()).await,
        };
    }
}
