//! Starting the agent: the data dir and state DB, the plugin host, the node, then restore
//! and the background work (unblocking, outage watch, the collectors, an unfinished drain).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::{Agent, AgentOptions};
use crate::changes::Changes;
use crate::pluginhost::{PluginHost, PluginHostOptions};
use crate::server::{core_gc, vars};
use crate::state::{MemState, StateDb};
use crate::taskenv::NodeInfo;
use crate::taskrunner::interfaces::Plugins;

impl Agent {
    /// Start: open state, build the runtime, load components, fingerprint, restore.
    pub async fn start(opts: AgentOptions) -> anyhow::Result<Arc<Self>> {
        let (data_dir, tempdir, db) = open_data_dir(&opts)?;

        // Variables are loaded before anything takes a change index: the index starts past
        // theirs.
        let buffer = opts.config.server.event_buffer_size;
        let changes = Arc::new(Changes::new(
            buffer.unwrap_or(crate::events::DEFAULT_BUFFER_SIZE),
        ));
        let vars = vars::VarStore::load(db.clone(), changes.clone())
            .context("reading variables from the state DB")?;
        let server_gc =
            core_gc::ServerGcConfig::from_server(&opts.config.server, &opts.config_file)?;
        let http_limits = opts.config.limits.http(&opts.config_file)?;
        // The service registry is the server's, and tasks' templates read it (`services`).
        let services = Arc::new(crate::server::services::ServiceBook::default());
        let (plugins, swapper) =
            start_plugins(&opts, &data_dir, &db, &vars, &services, &changes).await?;
        let PluginHost {
            runtime,
            drivers,
            devices,
            hooks,
            checks,
            secrets,
            node_events,
            ..
        } = plugins;

        let plugins = Plugins {
            drivers,
            devices,
            hooks,
            secrets,
        };
        let client = Arc::new(new_client(
            &opts, &data_dir, &db, &changes, plugins, checks,
        )?);
        let (acl_on, token) = (opts.config.acl.enabled, opts.config.acl.token.as_deref());
        let acl = crate::acl::AclStore::open(db.clone(), acl_on, token);
        let server = Arc::new(crate::server::Server::new(crate::server::ServerParts {
            db: db.clone(),
            changes: changes.clone(),
            client: client.clone(),
            vars,
            services,
            node_events: node_events.clone(),
            refuse_unacted: opts.config.client.unsupported_job_features
                == crate::config::UnsupportedJobFeatures::Error,
        }));
        let agent = Arc::new(Self {
            runtime,
            client,
            server,
            db,
            changes,
            data_dir,
            swapper,
            watch: std::sync::Mutex::new(None),
            config_file: opts.config_file.clone(),
            acl_token: opts.config.acl.token.clone().filter(|t| !t.is_empty()),
            acl,
            node_events,
            http_addr: Default::default(),
            http_limits,
            _tempdir: tempdir,
        });
        agent.begin(server_gc)?;
        Ok(agent)
    }

    /// Restore what the last run left, then start the background work.
    fn begin(self: &Arc<Self>, server_gc: core_gc::ServerGcConfig) -> anyhow::Result<()> {
        let weak = Arc::downgrade(self);
        self.server.set_node_view(Box::new(move || {
            weak.upgrade()
                .and_then(|a| serde_json::to_value(a.node_view()).ok())
                .unwrap_or_default()
        }));
        self.client.warn_if_little_disk();
        self.restore()?;
        self.server.spawn_unblocker();
        self.server.spawn_rescheduler();
        self.server.spawn_deployment_watcher();
        self.server.spawn_service_sync();
        self.client.spawn_health_tracker();
        self.spawn_outage_watch();
        self.server.spawn_core_gc(server_gc);
        self.client.spawn_gc();
        self.client.spawn_history();
        self.client.spawn_checks();
        self.client.spawn_template_watch();
        self.server.place_interrupted();
        self.server.reschedule_restored();
        self.server.resume_scheduling();
        Ok(())
    }
}

impl Agent {
    /// Restore after a restart: jobs and allocations as the state DB has them. The change
    /// index goes on from where the stored state left it, so an index a client saw before
    /// the restart (a blocking query's, an EnforceIndex) is never handed out again.
    fn restore(&self) -> anyhow::Result<()> {
        let jobs = self.db.jobs()?;
        let allocs = self.db.allocs()?;
        let stored = jobs
            .iter()
            .map(|j| j.state.modify_index.max(j.state.job_modify_index))
            .chain(allocs.iter().map(|a| a.modify_index))
            .max()
            .unwrap_or(0);
        self.changes.raise_to(stored);
        let index = self.changes.bump();
        let running: std::collections::HashSet<(&str, &str)> = jobs
            .iter()
            .filter(|j| !j.stop)
            .map(|j| (j.namespace.as_str(), j.id.as_str()))
            .collect();
        self.client.restore(allocs, &running);
        self.server.restore_jobs(jobs, index);
        self.server.restore_deployments();
        self.server.restore_namespaces();
        self.server.restore_services();
        Ok(())
    }
}

/// The data dir (a fresh temporary one in dev mode without one) and its state DB.
fn open_data_dir(
    opts: &AgentOptions,
) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>, Arc<dyn StateDb>)> {
    let (data_dir, tempdir) = match (&opts.data_dir, &opts.config.data_dir, opts.dev) {
        (Some(d), _, _) | (None, Some(d), _) => (d.clone(), None),
        (None, None, true) => {
            let t = tempfile::Builder::new()
                .prefix("paddock-dev-")
                .tempdir()
                .context("creating a temporary data dir")?;
            (t.path().to_path_buf(), Some(t))
        }
        (None, None, false) => {
            anyhow::bail!("no data dir: pass --data-dir, set data_dir in the config, or use --dev")
        }
    };
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating data dir {}", data_dir.display()))?;
    let db: Arc<dyn StateDb> = if opts.in_memory_state {
        Arc::new(MemState::new())
    } else {
        crate::state::open_redb(
            &data_dir.join("state.redb"),
            opts.config.client.state_cache_bytes(),
        )?
    };
    Ok((data_dir, tempdir, db))
}

/// The plugin host over the agent's state, variables and compile cache, with processes
/// through the task executor, the built-in components and the folders loaded under hot
/// swap, and a first fingerprint taken.
async fn start_plugins(
    opts: &AgentOptions,
    data_dir: &std::path::Path,
    db: &Arc<dyn StateDb>,
    vars: &Arc<vars::VarStore>,
    services: &Arc<crate::server::services::ServiceBook>,
    changes: &Arc<Changes>,
) -> anyhow::Result<(PluginHost, Arc<crate::swap::Swapper>)> {
    for w in opts.config.warnings() {
        tracing::warn!(file = %opts.config_file, "{w}");
    }
    let plugins = PluginHost::build(PluginHostOptions {
        cache_dir: Some(
            opts.cache_dir
                .clone()
                .unwrap_or_else(|| data_dir.join("cache").join("components")),
        ),
        settings: opts.config.component_settings(&opts.config_file)?,
        dev: opts.dev,
        engine: crate::runtime::engine::EngineConfig {
            memory_budget_bytes: opts.config.limits.guest_memory_bytes(&opts.config_file)?,
            ..Default::default()
        },
        variables: Some(vars.clone()),
        services: Some(services.clone()),
        // Both managers start from their state of the last run, so a change that happened
        // while the agent was down is a node event at this first fingerprint.
        db: Some(db.clone()),
        start_limits: opts.config.client.start_limits(),
        hooks: opts.config.hook.clone(),
    })?;
    // Host processes go through the task executor and are recorded in the state DB, so
    // tasks outlive the agent and are found again after a restart.
    let executor_program = match &opts.executor_program {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("finding this executable for the task executor")?,
    };
    plugins
        .use_executor(executor_program, data_dir, db.clone())
        .await
        .context("reading process records")?;
    let mut dirs = opts.components.clone();
    dirs.extend(opts.config.components.iter().cloned());
    if let Some(h) = opts.hooks.as_ref().or(opts.config.hooks.as_ref()) {
        dirs.push(h.clone());
    }
    // The built-in components, then every file of the components folders.
    let swapper = plugins
        .start_swapper(
            changes.clone(),
            dirs,
            opts.config.auto_revert(&opts.config_file)?,
            crate::pluginhost::RemoteSources {
                cache: Some(data_dir.join("cache").join("pulled")),
                specs: opts.config.remote_sources(&opts.config_file)?,
            },
        )
        .await
        .context("reading a components folder")?;
    plugins.drivers.fingerprint_all().await;
    plugins.devices.fingerprint_all().await;
    let interval = opts.fingerprint_interval.unwrap_or(Duration::from_secs(30));
    plugins.drivers.spawn_fingerprinter(interval);
    plugins.devices.spawn_fingerprinter(interval);
    Ok((plugins, swapper))
}

/// The client: its allocation dir made, the host fingerprinted, the node named.
fn new_client(
    opts: &AgentOptions,
    data_dir: &std::path::Path,
    db: &Arc<dyn StateDb>,
    changes: &Arc<Changes>,
    plugins: Plugins,
    checks: Arc<crate::checkcomponents::CheckComponents>,
) -> anyhow::Result<crate::client::Client> {
    let c = &opts.config.client;
    let alloc_root = c.alloc_root(data_dir, &opts.config_file)?;
    let gc = crate::client::GcConfig::from_client(c, &opts.config_file)?;
    std::fs::create_dir_all(&alloc_root).context("creating client.alloc_dir")?;
    let host_attributes = crate::node::fingerprint(&alloc_root);
    let node = node_info(opts, db.as_ref(), &host_attributes)?;
    Ok(crate::client::Client::new(crate::client::ClientParts {
        db: db.clone(),
        changes: changes.clone(),
        plugins,
        checks,
        node,
        // Loopback in dev mode (as Nomad's `-dev` uses `lo`), else the host's address.
        host_ip: host_attributes
            .get("unique.network.ip-address")
            .filter(|_| !opts.dev)
            .cloned()
            .unwrap_or_else(|| "127.0.0.1".into()),
        resources: c.clone(),
        alloc_root,
        gc,
        stats_interval: opts
            .config
            .telemetry
            .collection_interval(&opts.config_file)?,
        work: tokio::runtime::Handle::current(),
    }))
}

/// The node as placement sees it: identity, the config's datacenter, region, class and
/// meta, the host's fingerprint (the client adds the drivers' attributes as they are).
fn node_info(
    opts: &AgentOptions,
    db: &dyn StateDb,
    host_attributes: &BTreeMap<String, String>,
) -> anyhow::Result<NodeInfo> {
    let (id, name) = crate::node::identity(db, opts.config.name.as_deref())?;
    let attributes = host_attributes.clone();
    Ok(NodeInfo {
        id,
        name,
        datacenter: opts
            .config
            .datacenter
            .clone()
            .unwrap_or_else(|| "dc1".into()),
        region: opts
            .config
            .region
            .clone()
            .unwrap_or_else(|| "global".into()),
        class: opts.config.client.node_class.clone().unwrap_or_default(),
        attributes,
        meta: opts.config.client.meta.clone(),
        host_volumes: opts.config.client.host_volumes(&opts.config_file)?,
    })
}

/// How often the outage watch looks at the state DB.
const OUTAGE_TICK: Duration = Duration::from_millis(50);

impl Agent {
    /// Watch for the end of state DB outages (a full or failing disk, see
    /// [`crate::state`]), and then write again what the client could not store and place
    /// what the outage cut short ([`crate::server::Server::place_interrupted`]).
    pub(super) fn spawn_outage_watch(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let failures = |a: &Agent| {
                a.db.commit_stats()
                    .failures
                    .load(std::sync::atomic::Ordering::Relaxed)
            };
            let mut was_down = false;
            let mut seen = weak.upgrade().map_or(0, |a| failures(&a));
            loop {
                tokio::time::sleep(OUTAGE_TICK).await;
                let Some(a) = weak.upgrade() else { return };
                let down = a.db.unwritable().is_some();
                // An outage seen, or one that began and ended between two looks (or while
                // the last pass ran): failed writes were counted meanwhile.
                let failed = failures(&a);
                if !down && (was_down || failed != seen) {
                    seen = failed;
                    tracing::info!("the state DB writes again: placing what its outage cut short");
                    let agent = a.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        agent.client.resync_allocations();
                        agent.server.place_interrupted();
                    })
                    .await;
                }
                was_down = down;
            }
        });
    }
}
