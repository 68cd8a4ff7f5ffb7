//! `agent run`: start the agent and serve the HTTP API until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;

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
}

pub(super) async fn run(args: RunArgs) -> anyhow::Result<i32> {
    let (config, config_file) = match &args.config {
        Some(p) => (AgentConfig::load(p)?, p.display().to_string()),
        None => (AgentConfig::default(), "<none>".to_string()),
    };
    let level = args
        .log_level
        .clone()
        .or(config.log_level.clone())
        .unwrap_or_else(|| "info".into());
    super::init_logging(&level, args.log_json || config.log_json.unwrap_or(false));

    let jobs = args
        .jobs
        .iter()
        .map(|f| super::read_job_file(f, &[]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let bind = resolve_bind(args.bind.as_deref(), &config)?;
    let agent = Agent::start(AgentOptions {
        data_dir: args.data_dir.clone(),
        components: args.components.clone(),
        hooks: args.hooks.clone(),
        dev: args.dev,
        config_file,
        config,
        in_memory_state: false,
        fingerprint_interval: None,
        cache_dir: None,
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
    // SIGHUP re-reads the config's plugin and hook blocks.
    let reloader = agent.clone();
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hup.recv().await.is_some() {
            match reloader.reload_config().await {
                Ok(changes) => tracing::info!(changed = changes.len(), "SIGHUP: config reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: config not reloaded; the running config stays")
                }
            }
        }
    });
    for job in jobs {
        let r = agent.register_job(job)?;
        tracing::info!(eval_id = %r.eval_id, allocs = ?r.allocs, "job from --job registered");
    }
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("interrupted: shutting down (tasks keep their state)");
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
    let served = api.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        crate::api::serve(agent, listener, shutdown).await
    });
    let result = served.await;
    api.shutdown_background();
    result.context("the API stopped")??;
    Ok(0)
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
