//! Config reload (SIGHUP, `POST /v1/agent/reload`): the re-read config's `plugin` blocks
//! (grants, limits, config, auto-revert) and `hook` attachments are applied without a
//! restart. A component whose settings changed is the running version again, with its new
//! settings (the same compiled code: a refused newer file on disk does not stand in for
//! it), swapped in like a new file (make before break, drivers' tasks handed over); files
//! refused before are tried again. A config that does not parse is refused before
//! anything changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::{Applied, FileState, Swapper};
use crate::config::{AgentConfig, ConfigError};

impl Swapper {
    /// Apply `config` (read from `file`); returns what changed, by component or file.
    pub async fn reload_config(
        self: &Arc<Self>,
        config: &AgentConfig,
        file: &str,
    ) -> Result<Vec<(String, Applied)>, ConfigError> {
        let settings = config.component_settings(file)?;
        for w in config.warnings() {
            tracing::warn!(file = %file, "{w}");
        }
        let auto_revert = config.auto_revert(file)?;
        let remotes = config.remote_sources(file)?;
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
                // The running version itself, with its new settings: not the file on
                // disk, which may hold a newer version that was refused.
                let new = self.runtime.reconfigured(&c);
                let applied = self.install(new, Instant::now(), "config reloaded").await;
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
        out.extend(
            self.reload_remotes(remotes)
                .await
                .into_iter()
                .filter(|(_, a)| *a != Applied::Unchanged),
        );
        tracing::info!(file, changed = out.len(), "config reloaded");
        Ok(out)
    }
}
