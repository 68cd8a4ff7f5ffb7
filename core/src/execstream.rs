//! An `alloc exec` session's streams, whoever carries them (the agent's websocket route,
//! `paddock-nomad-driver`'s `ExecTaskStreaming`): the caller's inputs go to the command's
//! stdin, terminal or the driver's `exec-step`; its output and exit come back as
//! [`Event`]s. The carrier only translates frames.
//!
//! A host process's output is read until its end; once it has exited, what it wrote is
//! still passed on for [`DRAIN`] (what it left running may hold its stdout open). When the
//! caller goes away, the command is killed. A signal's exit is reported as `128 + signal`,
//! as a shell reports it.

use std::pin::Pin;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::runtime::types::{ExecInput, ExecOutput, ExecProcess, ExitResult};

/// What the caller sends.
#[derive(Debug)]
pub enum Incoming {
    /// An input for the command.
    Input(ExecInput),
    /// The caller went away (its stream ended or broke).
    Gone,
}

/// What goes back to the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes of the command's stdout (with a terminal, all of its output).
    Stdout(Vec<u8>),
    /// Bytes of its stderr.
    Stderr(Vec<u8>),
    /// Its stdout ended.
    StdoutClosed,
    /// Its stderr ended.
    StderrClosed,
    /// It exited with this code (the last event).
    Exited(i32),
}

/// The driver's side of a session it answers itself (`exec-step`).
pub trait Steps: Send + Sync {
    /// Hand the driver `input`, with the `state` its last output said.
    fn step(&self, state: Vec<u8>, input: ExecInput) -> BoxFuture<'_, Result<ExecOutput, String>>;
}

/// How the command started.
pub enum Started {
    /// A host process.
    Process(ExecProcess),
    /// A session the driver answers: its first output, then its steps.
    Session(ExecOutput, Box<dyn Steps>),
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The command exited ([`Event::Exited`] was sent).
    Exited(i32),
    /// The caller went away first (the command was killed).
    Gone,
    /// The driver failed a step; the reason, for the caller.
    Failed(String),
}

/// How long the output of an exited command is still read.
pub const DRAIN: Duration = Duration::from_secs(1);

/// An exit's code as the caller sees it.
pub fn exit_code(r: &ExitResult) -> i32 {
    if r.signal != 0 {
        128 + r.signal
    } else {
        r.exit_code
    }
}

/// Serve one session: `incoming` from the caller, `out` to it.
pub async fn serve(
    started: Started,
    incoming: mpsc::Receiver<Incoming>,
    out: mpsc::Sender<Event>,
) -> Ended {
    match started {
        Started::Process(p) => serve_process(p, incoming, out).await,
        Started::Session(first, steps) => serve_session(first, steps, incoming, out).await,
    }
}

/// What a command run to its end left: how it ended, and its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collected {
    /// How the session ended.
    pub ended: Ended,
    /// Its stdout (with a terminal, all of its output).
    pub stdout: Vec<u8>,
    /// Its stderr.
    pub stderr: Vec<u8>,
}

/// Run a session to its end with stdin closed at once, keeping its output (a command run
/// for its result: Nomad's `ExecTask`, a template's `change_script`, `component check`).
/// The caller bounds it in time; dropping the future kills the command.
pub async fn collect(started: Started) -> Collected {
    let (in_tx, in_rx) = mpsc::channel(1);
    let _ = in_tx.send(Incoming::Input(ExecInput::StdinClosed)).await;
    let (out_tx, mut out_rx) = mpsc::channel(64);
    let gather = async {
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        while let Some(e) = out_rx.recv().await {
            match e {
                Event::Stdout(b) => stdout.extend(b),
                Event::Stderr(b) => stderr.extend(b),
                Event::StdoutClosed | Event::StderrClosed | Event::Exited(_) => {}
            }
        }
        (stdout, stderr)
    };
    let (ended, (stdout, stderr)) = tokio::join!(serve(started, in_rx, out_tx), gather);
    // Held until here: a closed input channel would read as the caller gone.
    drop(in_tx);
    Collected {
        ended,
        stdout,
        stderr,
    }
}

/// Pass a stream's bytes on until its end (then its `closed` event).
fn pump(
    mut from: Pin<Box<dyn AsyncRead + Send>>,
    data: fn(Vec<u8>) -> Event,
    closed: Event,
    to: mpsc::Sender<Event>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 << 10];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.send(data(buf[..n].to_vec())).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = to.send(closed).await;
    })
}

async fn serve_process(
    p: ExecProcess,
    mut incoming: mpsc::Receiver<Incoming>,
    out: mpsc::Sender<Event>,
) -> Ended {
    let ExecProcess {
        mut stdin,
        stdout,
        stderr,
        control,
    } = p;
    let (tx, mut rx) = mpsc::channel::<Event>(64);
    let mut pumps = vec![pump(stdout, Event::Stdout, Event::StdoutClosed, tx.clone())];
    if let Some(e) = stderr {
        pumps.push(pump(e, Event::Stderr, Event::StderrClosed, tx.clone()));
    }
    drop(tx);
    let mut stdin_open = true;
    let mut outputs_done = false;
    let exited = control.wait();
    tokio::pin!(exited);
    let result = loop {
        tokio::select! {
            r = &mut exited => break Some(r),
            e = rx.recv(), if !outputs_done => match e {
                Some(e) => {
                    if out.send(e).await.is_err() {
                        break None;
                    }
                }
                None => outputs_done = true,
            },
            i = incoming.recv() => match i.unwrap_or(Incoming::Gone) {
                Incoming::Gone => break None,
                Incoming::Input(ExecInput::Stdin(b)) => {
                    if stdin_open && stdin.write_all(&b).await.is_err() {
                        stdin_open = false;
                    }
                }
                Incoming::Input(ExecInput::StdinClosed) => {
                    if stdin_open {
                        let _ = stdin.shutdown().await;
                        // Dropped: a pipe's reader sees its end.
                        stdin = Box::pin(tokio::io::sink());
                        stdin_open = false;
                    }
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
        return Ended::Gone;
    };
    let deadline = tokio::time::Instant::now() + DRAIN;
    if !outputs_done {
        while let Ok(Some(e)) = tokio::time::timeout_at(deadline, rx.recv()).await {
            if out.send(e).await.is_err() {
                break;
            }
        }
    }
    for p in pumps {
        p.abort();
    }
    let code = exit_code(&result);
    let _ = out.send(Event::Exited(code)).await;
    Ended::Exited(code)
}

async fn serve_session(
    first: ExecOutput,
    steps: Box<dyn Steps>,
    mut incoming: mpsc::Receiver<Incoming>,
    out: mpsc::Sender<Event>,
) -> Ended {
    let mut o = first;
    loop {
        for e in [
            Event::Stdout(std::mem::take(&mut o.stdout)),
            Event::Stderr(std::mem::take(&mut o.stderr)),
        ] {
            let empty = matches!(&e, Event::Stdout(b) | Event::Stderr(b) if b.is_empty());
            if !empty && out.send(e).await.is_err() {
                return Ended::Gone;
            }
        }
        if let Some(code) = o.exited {
            let _ = out.send(Event::Exited(code)).await;
            return Ended::Exited(code);
        }
        let input = match incoming.recv().await.unwrap_or(Incoming::Gone) {
            Incoming::Gone => return Ended::Gone,
            Incoming::Input(i) => i,
        };
        o = match steps.step(std::mem::take(&mut o.state), input).await {
            Ok(next) => next,
            Err(e) => return Ended::Failed(e),
        };
    }
}
