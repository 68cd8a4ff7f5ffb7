//! `agent run`: start the agent and serve the HTTP API until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::agent::{Agent, AgentOptions};
use crate::config::AgentConfig;

/// Flags of `agent run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Folder of driver and device-plugin components (repeatable).
    #[arg(long = "components", value_name = "DIR")]
    pub components: Vec<PathBuf>,
    /// Folder of hook components.
    #[arg(long, value_name = "DIR")]
    pub hooks: Option<PathBuf>,
    /// Data dir (state DB, compile cache, alloc dirs).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Compile cache folder (default `<data dir>/cache/components`; a `--dev` agent without
    /// a data dir uses `$XDG_CACHE_HOME/paddock/components`, else `~/.cache/…`): compiled
    /// components, loaded without validation, so it must be the agent's own (owned by its
    /// user, written by no one else). Agents of one binary may share one.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// HTTP address, `host:port` or `host` (port from config, else 4646); port 0 picks one.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Agent config file (HCL).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Dev mode: a fresh temporary data dir unless one is given, every built-in driver enabled.
    #[arg(long)]
    pub dev: bool,
    /// Job file (Nomad JSON) to register once the agent is up (repeatable).
    #[arg(long = "job", value_name = "FILE")]
    pub jobs: Vec<PathBuf>,
    /// Log level: trace, debug, info, warn, error.
    #[arg(long)]
    pub log_level: Option<String>,
    /// Log as JSON.
    #[arg(long)]
    pub log_json: bool,
    /// Turn on Nomad's ACL system (as `acl { enabled = true }`).
    #[arg(long)]
    pub acl_enabled: bool,
}

pub(super) async fn run(args: RunArgs) -> anyhow::Result<i32> {
    let (mut config, config_file) = match &args.config {
        Some(p) => (AgentConfig::load(p)?, p.display().to_string()),
        None => (AgentConfig::default(), "<none>".to_string()),
    };
    config.acl.enabled |= args.acl_enabled;
    let level = args
        .log_level
        .clone()
        .or(config.log_level.clone())
        .unwrap_or_else(|| "info".into());
    super::init_logging(&level, args.log_json || config.log_json.unwrap_or(false));

    let jobs = args
        .jobs
        .iter()
        .map(|f| super::read_job_source(f, &[], &[]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let bind = resolve_bind(args.bind.as_deref(), &config)?;
    // A `--dev` agent without a data dir of its own works in a temporary one: its tasks are
    // stopped and the dir removed when it stops.
    let temporary = args.dev && args.data_dir.is_none() && config.data_dir.is_none();
    let agent = Agent::start(AgentOptions {
        data_dir: args.data_dir.clone(),
        components: args.components.clone(),
        hooks: args.hooks.clone(),
        dev: args.dev,
        config_file,
        config,
        in_memory_state: false,
        fingerprint_interval: None,
        // A temporary dev agent would compile every component at every start: it keeps
        // its compilations in the user's cache instead (keyed by the component's hash and
        // the engine, as every cache entry is).
        cache_dir: args
            .cache_dir
            .clone()
            .or_else(|| temporary.then(dev_cache_dir).flatten()),
        executor_program: None,
    })
    .await?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding the HTTP API to {bind}"))?;
    let local = listener.local_addr()?;
    tracing::info!(address = %local, data_dir = %agent.data_dir().display(), dev = args.dev, "agent started; HTTP API listening on http://{local}");
    for r in agent.refusals() {
        tracing::warn!("{r}");
    }
    // Component files that change from now on are swapped in while tasks run.
    if let Err(e) = agent.watch_components() {
        tracing::error!(error = %e, "watching the components folders failed: use `agent component reload` (POST /v1/components/reload) to apply file changes");
    }
    reload_on_sighup(agent.clone());
    for (job, submission) in jobs {
        // The file's text is kept with the job's version, as `agent job run` sends it.
        let options = crate::agent::RegisterOptions {
            submission: Some(submission),
            ..Default::default()
        };
        let r = agent.server().register_job_with(job, options)?;
        tracing::info!(eval_id = %r.eval_id, allocs = ?r.allocs, "job from --job registered");
    }
    let state = agent.state().clone();
    let kept = agent.clone();
    if let Some(signal) = serve_until_stopped(agent, listener, !temporary).await? {
        stopped(&kept, &state, signal, temporary).await;
    }
    Ok(0)
}

/// After a stop signal: the state DB flushed; a temporary dev agent's allocations stopped
/// first and its data dir removed after (its executor, with no task left, exits once its
/// socket is gone).
async fn stopped(
    agent: &Arc<Agent>,
    state: &Arc<dyn crate::state::StateDb>,
    signal: &'static str,
    temporary: bool,
) {
    if temporary {
        stop_dev_allocations(agent, signal).await;
    }
    flush(state, signal, !temporary).await;
    if temporary {
        let dir = agent.data_dir();
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {
                tracing::info!(data_dir = %dir.display(), "dev mode: temporary data dir removed")
            }
            Err(e) => {
                tracing::warn!(data_dir = %dir.display(), error = %e, "dev mode: removing the temporary data dir failed")
            }
        }
    }
}

/// The compile cache of `--dev` agents without a data dir: `$XDG_CACHE_HOME/paddock/components`
/// (else `~/.cache/…`), when it is (or can be made) a folder of this user's alone; `None`
/// (a cache in the temporary dir) otherwise, said in a warning.
fn dev_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    let dir = base.join("paddock").join("components");
    let made =
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&dir);
    let ours = made
        .and_then(|()| std::fs::symlink_metadata(&dir))
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == rustix::process::geteuid().as_raw() && m.mode() & 0o022 == 0
        });
    match ours {
        Ok(true) => Some(dir),
        Ok(false) => {
            tracing::warn!(dir = %dir.display(), "dev mode: the user's compile cache is not a folder of this user's alone; compiling into the temporary data dir");
            None
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "dev mode: the user's compile cache cannot be made; compiling into the temporary data dir");
            None
        }
    }
}

/// How long a `--dev` agent waits for its allocations to stop before it goes anyway.
const DEV_STOP_WAIT: Duration = Duration::from_secs(30);

/// A `--dev` agent in a temporary data dir stops its allocations when it stops, as
/// Nomad's `-dev` does: nothing it started outlives it, as no later agent could reattach
/// them. Any other agent (`--dev` with a data dir of its own too) leaves them running, to
/// reattach at its next start.
async fn stop_dev_allocations(agent: &Arc<Agent>, signal: &'static str) {
    let runners = agent.client().runners();
    let live: Vec<_> = runners
        .into_iter()
        .filter(|r| !r.shared().peek(crate::structs::Allocation::is_terminal))
        .collect();
    if live.is_empty() {
        return;
    }
    tracing::info!(
        signal,
        allocations = live.len(),
        "dev mode: stopping every allocation before exiting"
    );
    for r in &live {
        r.stop("the dev agent stopped");
    }
    let all = futures::future::join_all(live.iter().map(|r| r.wait()));
    if tokio::time::timeout(DEV_STOP_WAIT, all).await.is_err() {
        tracing::warn!(waited = ?DEV_STOP_WAIT, "dev mode: some allocations had not stopped in time; exiting anyway");
    }
}

/// Serve the API until it stops or a stop signal comes: the signal, if one came.
async fn serve_until_stopped(
    agent: Arc<Agent>,
    listener: tokio::net::TcpListener,
    tasks_stay: bool,
) -> anyhow::Result<Option<&'static str>> {
    // SIGTERM or SIGINT: stop taking work (the API), flush the state DB, leave tasks running
    // (as Nomad's client does), exit 0; a second signal exits at once.
    let (stop, stopping) = tokio::sync::watch::channel(None::<&'static str>);
    watch_stop_signals(stop, tasks_stay)?;
    let shutdown = {
        let mut stopping = stopping.clone();
        async move {
            let _ = stopping.wait_for(Option::is_some).await;
        }
    };
    // The API on a runtime of its own: while thousands of allocations start on the agent's
    // runtime, a request does not queue behind them (placement runs on the request's
    // thread, the allocations it places on the agent's runtime).
    let api = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("api")
        .enable_all()
        .build()
        .context("starting the API's runtime")?;
    let listener = listener.into_std()?;
    let mut served = api.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        crate::api::serve(agent, listener, shutdown).await
    });
    let mut signalled = stopping.clone();
    let result = tokio::select! {
        r = &mut served => Some(r),
        _ = signalled.wait_for(Option::is_some) => {
            // Requests in flight get a moment to finish; streams and blocking queries,
            // which never end by themselves, are cut after it.
            tokio::time::timeout(STOP_GRACE, &mut served).await.ok()
        }
    };
    api.shutdown_background();
    if let Some(result) = result {
        result.context("the API stopped")??;
    }
    let signal = *stopping.borrow();
    Ok(signal)
}

/// SIGHUP re-reads the config's plugin and hook blocks.
fn reload_on_sighup(agent: Arc<Agent>) {
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hup.recv().await.is_some() {
            match agent.reload_config().await {
                Ok(changes) => tracing::info!(changed = changes.len(), "SIGHUP: config reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: config not reloaded; the running config stays")
                }
            }
        }
    });
}

/// A stopping agent flushes the state DB, waiting at most [`STOP_GRACE`]; `tasks_stay`
/// says whether its tasks keep running (a `--dev` agent in a temporary dir stopped them).
async fn flush(state: &Arc<dyn crate::state::StateDb>, signal: &'static str, tasks_stay: bool) {
    let state = state.clone();
    let flushed = tokio::time::timeout(
        STOP_GRACE,
        tokio::task::spawn_blocking(move || state.flush()),
    )
    .await;
    match flushed {
        Ok(Ok(Ok(()))) if tasks_stay => {
            tracing::info!(signal, "stopped: state DB flushed; tasks keep running")
        }
        Ok(Ok(Ok(()))) => tracing::info!(signal, "stopped: state DB flushed; tasks stopped"),
        Ok(Ok(Err(e))) => {
            tracing::error!(signal, error = %e, "stopped: the state DB could not be flushed")
        }
        _ => tracing::error!(
            signal,
            "stopped: the state DB did not flush within {STOP_GRACE:?}"
        ),
    }
}

/// How long a stopping agent waits for requests in flight, and then for the state DB.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Signals this close after the first are the same request delivered twice.
const SAME_REQUEST: std::time::Duration = std::time::Duration::from_millis(100);

/// Sets `stop` to the first SIGTERM or SIGINT; exits the process at once on a second one
/// (one sent again, not the first delivered twice: see [`SAME_REQUEST`]). `tasks_stay`:
/// whether the tasks outlive the agent (all but a temporary dev agent's), as the log says.
fn watch_stop_signals(
    stop: tokio::sync::watch::Sender<Option<&'static str>>,
    tasks_stay: bool,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    async fn next(
        term: &mut tokio::signal::unix::Signal,
        int: &mut tokio::signal::unix::Signal,
    ) -> &'static str {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    }
    tokio::spawn(async move {
        let first = next(&mut term, &mut int).await;
        if tasks_stay {
            tracing::info!(
                signal = first,
                "stopping: no new work, flushing the state DB; tasks keep running (a second signal exits at once)"
            );
        } else {
            tracing::info!(
                signal = first,
                "stopping: no new work; the dev agent's tasks are stopped and its temporary data dir removed (a second signal exits at once)"
            );
        }
        let _ = stop.send(Some(first));
        let asked = std::time::Instant::now();
        loop {
            let second = next(&mut term, &mut int).await;
            // `timeout` (and a shell's job control) sends its signal to the process and
            // then to its group: one request arriving twice within microseconds. Only a
            // signal sent again later asks to exit at once.
            if asked.elapsed() < SAME_REQUEST {
                tracing::debug!(
                    signal = second,
                    "the stop signal arrived twice at once; one request"
                );
                continue;
            }
            tracing::warn!(signal = second, "second signal: exiting now");
            std::process::exit(1);
        }
    });
    Ok(())
}

fn resolve_bind(flag: Option<&str>, config: &AgentConfig) -> anyhow::Result<SocketAddr> {
    let port = config.ports.http.unwrap_or(4646);
    let host = flag
        .map(str::to_string)
        .or(config.bind_addr.clone())
        .unwrap_or_else(|| "127.0.0.1".into());
    if let Ok(a) = host.parse::<SocketAddr>() {
        return Ok(a);
    }
    format!("{host}:{port}")
        .parse::<SocketAddr>()
        .with_context(|| format!("invalid bind address {host:?}"))
}
