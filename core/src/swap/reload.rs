//! Config reload (SIGHUP, `POST /v1/agent/reload`): the re-read config's `plugin` blocks
//! (grants, limits, config, auto-revert) and `hook` attachments are applied without a
//! restart. A component whose settings changed is prepared again from the same bytes with
//! its new settings and swapped in like a new file (make before break, drivers' tasks
//! handed over); files refused before are tried again. A config that does not parse is
//! refused before anything changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::{Applied, FileState, Swapper};
use crate::config::{AgentConfig, ConfigError};
use crate::runtime::ComponentSource;

impl Swapper {
    /// Apply `config` (read from `file`); returns what changed, by component or file.
    pub async fn reload_config(
        self: &Arc<Self>,
        config: &AgentConfig,
        file: &str,
    ) -> Result<Vec<(String, Applied)>, ConfigError> {
        let settings = config.component_settings(file)?;
        let auto_revert = config.auto_revert(file)?;
        let mut out = Vec::new();
        {
            let _one_at_a_time = self.lock.lock().await;
            let current = self.runtime.registry.list();
            let before: BTreeMap<String, _> = current
                .iter()
                .map(|c| (c.name.clone(), self.runtime.settings(&c.name)))
                .collect();
            self.runtime.set_settings(settings);
            *self.auto_revert.write().unwrap() = auto_revert;
            self.hooks.set_attachments(&config.hook);
            for c in current {
                if self.runtime.settings(&c.name) == before[&c.name] {
                    continue;
                }
                let bytes: Arc<[u8]> = match &c.source {
                    ComponentSource::File(p) => match std::fs::read(p) {
                        Ok(b) => Arc::from(b),
                        Err(e) => {
                            tracing::error!(name = %c.name, file = %p.display(), error = %e, "config reload: cannot read the component's file; it keeps its old settings");
                            continue;
                        }
                    },
                    ComponentSource::BuiltIn(f) => {
                        match guest_artifacts::BUILT_IN.iter().find(|a| a.file_name == f) {
                            Some(a) => Arc::from(a.bytes),
                            None => continue,
                        }
                    }
                };
                let applied = match self.runtime.prepare(c.source.clone(), bytes).await {
                    Ok(new) => self.install(new, Instant::now(), "config reloaded").await,
                    Err(r) => {
                        let reason = format!(
                            "config reload: {} cannot run with its new settings ({}); it keeps its old ones",
                            c.name, r.error
                        );
                        tracing::error!("{reason}");
                        self.remember(super::Kind::Refused, &c, None, &reason);
                        self.node_events
                            .push("Component", reason.clone(), BTreeMap::new());
                        Applied::Refused(reason)
                    }
                };
                out.push((c.name.clone(), applied));
            }
        }
        // Files refused before may load with the new settings (a grant `info()` needed).
        let refused: Vec<_> = self
            .files
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, r)| matches!(r.state, FileState::Refused(_)))
            .map(|(p, _)| p.clone())
            .collect();
        for path in refused {
            self.files.lock().unwrap().remove(&path);
            let applied = self.apply_file(&path, Instant::now()).await;
            out.push((path.display().to_string(), applied));
        }
        tracing::info!(file, changed = out.len(), "config reloaded");
        Ok(out)
    }
}
