//! `agent alloc exec [-i] [-t] [-task NAME] [-job] ALLOC CMD…`, as `nomad alloc exec`: a command in
//! a running task over the agent's websocket route (`api/exec.rs`). Stdin is passed on
//! (`-i`, on by default; `-i=false` to not), a terminal is asked for when stdin is one (or
//! with `-t`; `-t=false` to not); the local terminal is raw while the command runs, its
//! size is sent at the start and at every SIGWINCH, and the command's exit code is this
//! command's. Everything after the allocation is the command, flags included.

use std::io::IsTerminal;
use std::os::fd::AsRawFd;
use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::ApiArgs;

/// `alloc exec`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// API address and token.
    #[command(flatten)]
    pub api: ApiArgs,
    /// Pass stdin to the command (default true; `-i=false` to not).
    #[arg(short = 'i', num_args = 0..=1, require_equals = true, default_value_t = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub stdin: bool,
    /// Give the command a terminal (default: when stdin is one; `-t=false` to not).
    #[arg(short = 't', num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub tty: Option<bool>,
    /// The task to run in; may be left out when the allocation has one task.
    #[arg(long)]
    pub task: Option<String>,
    /// Take ALLOC as a job id: run in one of that job's running allocations.
    #[arg(long)]
    pub job: bool,
    /// Allocation id or prefix (a job id with `-job`).
    pub id: String,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// With `-job`: a running allocation of job `job` (the first one listed, as Nomad takes
/// any), in the namespace the address's `NOMAD_NAMESPACE` would pick (`default`).
pub(super) async fn job_alloc(api: &ApiArgs, job: &str) -> anyhow::Result<String> {
    let allocs = api
        .get(&format!("/v1/job/{}/allocations", super::enc(job)))
        .await?;
    allocs
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["ClientStatus"] == "running")
        .and_then(|a| a["ID"].as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("job {job:?} has no running allocation"))
}

/// The local terminal in raw mode until dropped.
struct RawMode {
    saved: libc::termios,
}

impl RawMode {
    fn enter() -> Option<Self> {
        let fd = std::io::stdin().as_raw_fd();
        // SAFETY: tcgetattr/tcsetattr on stdin with a termios we own.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut t) != 0 {
                return None;
            }
            let saved = t;
            libc::cfmakeraw(&mut t);
            if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
                return None;
            }
            Some(RawMode { saved })
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: as above, the settings read at the start.
        unsafe {
            libc::tcsetattr(std::io::stdin().as_raw_fd(), libc::TCSANOW, &self.saved);
        }
    }
}

/// The local terminal's size, (rows, columns).
fn local_size() -> Option<(u16, u16)> {
    // SAFETY: TIOCGWINSZ into a winsize we own.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        for fd in [0, 1, 2] {
            if libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_row > 0 {
                return Some((ws.ws_row, ws.ws_col));
            }
        }
    }
    None
}

fn size_frame((rows, cols): (u16, u16)) -> Message {
    Message::text(json!({ "tty_size": { "height": rows, "width": cols } }).to_string())
}

/// Run `alloc exec` in task `task` of allocation `id` (resolved); returns the command's
/// exit code.
pub(super) async fn run(a: ExecArgs, id: String, task: String) -> anyhow::Result<i32> {
    let tty = a.tty.unwrap_or_else(|| std::io::stdin().is_terminal());
    let command = serde_json::to_string(&a.command)?;
    let url = a.api.url(&format!(
        "/v1/client/allocation/{}/exec?task={}&tty={tty}&command={}",
        super::enc(&id),
        super::enc(&task),
        super::enc(&command)
    ));
    let url = match url.strip_prefix("https://") {
        Some(rest) => format!("wss://{rest}"),
        None => url.replacen("http://", "ws://", 1),
    };
    let mut req = url.into_client_request()?;
    if let Some(t) = &a.api.token {
        req.headers_mut().insert("X-Nomad-Token", t.parse()?);
    }
    let (ws, _) = match tokio_tungstenite::connect_async(req).await {
        Ok(ok) => ok,
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let body = resp
                .body()
                .as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            anyhow::bail!("Error: {} ({})", body.trim(), resp.status());
        }
        Err(e) => return Err(e.into()),
    };
    let (mut tx, mut rx) = ws.split();
    let _raw = if tty && std::io::stdin().is_terminal() {
        RawMode::enter()
    } else {
        None
    };
    if tty && let Some(size) = local_size() {
        tx.send(size_frame(size)).await?;
    }
    let (in_tx, mut in_rx) = tokio::sync::mpsc::channel::<Message>(16);
    if a.stdin {
        let in_tx = in_tx.clone();
        tokio::spawn(async move {
            let mut stdin = tokio::io::stdin();
            let mut buf = vec![0u8; 16 << 10];
            loop {
                match stdin.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = in_tx
                            .send(Message::text(
                                json!({ "stdin": { "close": true } }).to_string(),
                            ))
                            .await;
                        return;
                    }
                    Ok(n) => {
                        let d = base64::engine::general_purpose::STANDARD.encode(&buf[..n]);
                        if in_tx
                            .send(Message::text(json!({ "stdin": { "data": d } }).to_string()))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
    }
    if tty {
        let in_tx = in_tx.clone();
        tokio::spawn(async move {
            let Ok(mut winch) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
            else {
                return;
            };
            while winch.recv().await.is_some() {
                if let Some(size) = local_size()
                    && in_tx.send(size_frame(size)).await.is_err()
                {
                    return;
                }
            }
        });
    }
    // Nomad's client says it is there every 10 s.
    let mut heartbeat = tokio::time::interval(Duration::from_secs(10));
    heartbeat.tick().await;
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    loop {
        tokio::select! {
            m = in_rx.recv() => {
                if let Some(m) = m {
                    tx.send(m).await?;
                }
            }
            _ = heartbeat.tick() => tx.send(Message::text("{}")).await?,
            m = rx.next() => {
                let m = match m {
                    None => anyhow::bail!("the agent closed the session without an exit code"),
                    Some(m) => m?,
                };
                match m {
                    Message::Text(t) => {
                        let v: Value = serde_json::from_str(&t)?;
                        let data = |stream: &str| -> anyhow::Result<Option<Vec<u8>>> {
                            Ok(match v[stream]["data"].as_str() {
                                Some(d) => Some(base64::engine::general_purpose::STANDARD.decode(d)?),
                                None => None,
                            })
                        };
                        if let Some(b) = data("stdout")? {
                            stdout.write_all(&b).await?;
                            stdout.flush().await?;
                        }
                        if let Some(b) = data("stderr")? {
                            stderr.write_all(&b).await?;
                            stderr.flush().await?;
                        }
                        if v["exited"] == true {
                            let code = v["result"]["exit_code"].as_i64().unwrap_or(0);
                            return Ok(i32::try_from(code).unwrap_or(1));
                        }
                    }
                    Message::Close(f) => {
                        let (code, reason) = f
                            .map(|f| (u16::from(f.code), f.reason.to_string()))
                            .unwrap_or((1005, String::new()));
                        drop(_raw);
                        anyhow::bail!("the session closed ({code}): {reason}");
                    }
                    _ => {}
                }
            }
        }
    }
}
