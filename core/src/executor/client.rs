//! The agent's side of the executor socket: connect (starting the executor when none
//! answers), send spawns and watches, and hand every exit to a callback.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::oneshot;

use super::{Exit, Message, SpawnCommand};

/// Why the executor could not do something.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecutorError {
    /// It could not be reached or started.
    #[error("the task executor is unavailable: {0}")]
    Unavailable(String),
    /// It refused or failed the request.
    #[error("{0}")]
    Failed(String),
}

/// What the agent does with news from the executor.
pub trait ExitSink: Send + Sync {
    /// Process `id` exited.
    fn exited(&self, id: u64, exit: Exit);
    /// The executor does not know process `id`.
    fn unknown(&self, id: u64);
    /// The connection is gone: processes still running have lost their waiter.
    fn disconnected(&self);
}

/// Spawn requests waiting for their answer (pid, and whether the executor guards paths),
/// by id.
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<(u32, bool), ExecutorError>>>>>;

/// A connection to the executor.
pub struct ExecutorClient {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Pending,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

/// How to find or start the executor.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// The program that runs `executor` (the agent binary).
    pub program: PathBuf,
    /// Socket path.
    pub socket: PathBuf,
    /// Where exits are recorded, and the executor's log goes.
    pub dir: PathBuf,
}

impl ExecutorClient {
    /// Connect, starting the executor if nothing answers on the socket.
    pub async fn connect(
        cfg: &ExecutorConfig,
        sink: Arc<dyn ExitSink>,
    ) -> Result<Arc<Self>, ExecutorError> {
        let stream = match UnixStream::connect(&cfg.socket).await {
            Ok(s) => s,
            Err(_) => {
                start(cfg)?;
                let mut last = String::new();
                let mut stream = None;
                for _ in 0..200 {
                    match UnixStream::connect(&cfg.socket).await {
                        Ok(s) => {
                            stream = Some(s);
                            break;
                        }
                        Err(e) => last = e.to_string(),
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                stream.ok_or_else(|| {
                    ExecutorError::Unavailable(format!(
                        "started {} but cannot connect to {}: {last}",
                        cfg.program.display(),
                        cfg.socket.display()
                    ))
                })?
            }
        };
        let (read, write) = stream.into_split();
        let client = Arc::new(Self {
            writer: tokio::sync::Mutex::new(write),
            pending: Arc::new(Mutex::new(HashMap::new())),
            closed: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        });
        let pending = client.pending.clone();
        let closed = client.closed.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<Message>(&line) {
                    Ok(Message::Spawned { id, pid, guarded }) => {
                        if let Some(tx) = pending.lock().unwrap().remove(&id) {
                            let _ = tx.send(Ok((pid, guarded)));
                        }
                    }
                    Ok(Message::Error { id, message }) => {
                        if let Some(tx) = pending.lock().unwrap().remove(&id) {
                            let _ = tx.send(Err(ExecutorError::Failed(message)));
                        } else {
                            tracing::warn!(id, %message, "executor error");
                        }
                    }
                    Ok(Message::Exited { id, exit }) => sink.exited(id, exit),
                    Ok(Message::Unknown { id }) => sink.unknown(id),
                    Ok(other) => tracing::warn!(?other, "unexpected executor message"),
                    Err(e) => tracing::warn!(error = %e, "unreadable executor message"),
                }
            }
            tracing::warn!("connection to the task executor lost");
            closed.store(true, std::sync::atomic::Ordering::SeqCst);
            for (_, tx) in pending.lock().unwrap().drain() {
                let _ = tx.send(Err(ExecutorError::Unavailable(
                    "the executor connection was lost".into(),
                )));
            }
            sink.disconnected();
        });
        Ok(client)
    }

    async fn send(&self, m: &Message) -> Result<(), ExecutorError> {
        let mut line = serde_json::to_vec(m).expect("messages serialize");
        line.push(b'\n');
        self.writer
            .lock()
            .await
            .write_all(&line)
            .await
            .map_err(|e| ExecutorError::Unavailable(e.to_string()))
    }

    /// Whether the connection is gone.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Start a process; returns its pid, and whether the executor opened its files beneath
    /// the allocation dir without following links (an executor from before that does not).
    pub async fn spawn(&self, id: u64, cmd: SpawnCommand) -> Result<(u32, bool), ExecutorError> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        if let Err(e) = self.send(&Message::Spawn { id, cmd }).await {
            self.pending.lock().unwrap().remove(&id);
            return Err(e);
        }
        match rx.await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ExecutorError::Unavailable("no answer".into())),
        }
    }

    /// Ask for process `id`'s exit (now if it has one, else when it comes).
    pub async fn watch(&self, id: u64) -> Result<(), ExecutorError> {
        self.send(&Message::Watch { id }).await
    }
}

/// Start `program executor` detached, logging to `<dir>/executor.log`.
fn start(cfg: &ExecutorConfig) -> Result<(), ExecutorError> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| ExecutorError::Unavailable(e.to_string()))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(cfg.dir.join("executor.log"))
        .map_err(|e| ExecutorError::Unavailable(format!("opening the executor log: {e}")))?;
    let err = log
        .try_clone()
        .map_err(|e| ExecutorError::Unavailable(e.to_string()))?;
    let mut c = std::process::Command::new(&cfg.program);
    c.arg("executor")
        .arg("--socket")
        .arg(&cfg.socket)
        .arg("--dir")
        .arg(&cfg.dir)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(err);
    // It calls setsid itself (a group leader could not).
    let mut child = c.spawn().map_err(|e| {
        ExecutorError::Unavailable(format!("starting {} executor: {e}", cfg.program.display()))
    })?;
    // Reap it if it ever exits while this agent runs; it is not waited on otherwise.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    tracing::info!(program = %cfg.program.display(), socket = %cfg.socket.display(), "task executor started");
    Ok(())
}

/// The executor's socket under a data dir. Unix socket paths are short (108 bytes); a long
/// data dir gets a socket in the temp dir named after it.
pub fn socket_for(data_dir: &Path) -> PathBuf {
    let p = data_dir.join("executor.sock");
    if p.as_os_str().len() < 100 {
        return p;
    }
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(p.as_os_str().as_encoded_bytes()));
    std::env::temp_dir().join(format!("paddock-executor-{}.sock", &digest[..16]))
}
