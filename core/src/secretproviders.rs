//! Secret providers as components (world `secret-provider`, contract 0.1.2): the plugin
//! client, the only code of the agent that sees that world's bindings. The task runner's
//! `secrets` hook calls [`SecretProviders::fetch`] for each of a task's `secret` blocks,
//! on the task's behalf (its workload identity bounds what `variables` answers); items and
//! failures come back as a map or a [`SecretError`] naming the provider and the secret.
//!
//! A provider that failed after the host refused it a connection or a request fails with
//! the host's words (the grant and the address), whatever the guest answered.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::runtime::bindings::v0_1::secret::exports::paddock::plugin::secret_source as wit;
use crate::runtime::{
    CallError, CallFailure, LoadedComponent, Runtime, TaskContext, World, bounds,
};

/// Why a secret has no items, naming the provider and the secret.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SecretError {
    /// No secret provider of that name is loaded.
    #[error("secret {secret:?}: no secret provider {provider:?} is loaded (loaded: {loaded:?})")]
    NotLoaded {
        secret: String,
        provider: String,
        loaded: Vec<String>,
    },
    /// Nothing at the path.
    #[error("secret {secret:?}: provider {provider:?} found nothing: {message}")]
    NotFound {
        secret: String,
        provider: String,
        message: String,
    },
    /// The block's config is wrong, as the provider says.
    #[error("secret {secret:?}: provider {provider:?}: invalid config: {message}")]
    InvalidConfig {
        secret: String,
        provider: String,
        message: String,
    },
    /// The provider failed, or the host refused it something (the host's words).
    #[error("secret {secret:?}: provider {provider:?}: {message}")]
    Failed {
        secret: String,
        provider: String,
        message: String,
    },
    /// The component failed (trap, memory, deadline).
    #[error("secret {secret:?}: provider {provider:?}: {error}")]
    Component {
        secret: String,
        provider: String,
        error: CallError,
    },
}

impl SecretError {
    /// Whether a retry may help: a failure or a missed deadline, not a wrong config or a
    /// provider that is not there.
    pub fn recoverable(&self) -> bool {
        match self {
            SecretError::Failed { .. } | SecretError::NotFound { .. } => true,
            SecretError::Component { error, .. } => {
                matches!(error.kind, CallFailure::Deadline | CallFailure::Busy)
            }
            SecretError::NotLoaded { .. } | SecretError::InvalidConfig { .. } => false,
        }
    }
}

/// The secret providers of a runtime.
pub struct SecretProviders {
    runtime: Arc<Runtime>,
}

impl SecretProviders {
    /// The secret providers `runtime` loads.
    pub fn new(runtime: Arc<Runtime>) -> Arc<Self> {
        Arc::new(Self { runtime })
    }

    /// The names of the loaded providers, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .runtime
            .registry
            .of_world(World::SecretProvider)
            .iter()
            .map(|c| c.name.clone())
            .collect();
        v.sort();
        v
    }

    fn component(&self, provider: &str, secret: &str) -> Result<Arc<LoadedComponent>, SecretError> {
        self.runtime
            .registry
            .get(World::SecretProvider, provider)
            .ok_or_else(|| SecretError::NotLoaded {
                secret: secret.to_string(),
                provider: provider.to_string(),
                loaded: self.names(),
            })
    }

    /// The items of secret `secret` at `path` from `provider`, fetched on behalf of the
    /// task `ctx` is about.
    pub async fn fetch(
        &self,
        provider: &str,
        secret: &str,
        path: &str,
        config: &BTreeMap<String, String>,
        ctx: Arc<TaskContext>,
    ) -> Result<BTreeMap<String, String>, SecretError> {
        let comp = self.component(provider, secret)?;
        let (path, config) = (
            path.to_string(),
            config.clone().into_iter().collect::<Vec<_>>(),
        );
        let answer = self
            .runtime
            .call_secret(&comp, Some(ctx), "fetch", move |p, s| {
                Box::pin(async move {
                    s.data().take_network_denials();
                    let answer = p
                        .paddock_plugin_secret_source()
                        .call_fetch(&mut *s, &path, &config)
                        .await?;
                    Ok((answer, s.data().take_network_denials()))
                })
            })
            .await;
        let (secret, provider) = (secret.to_string(), provider.to_string());
        let m = |s: String| bounds::text(s, bounds::MESSAGE);
        let (answer, denials) = answer.map_err(|error| SecretError::Component {
            secret: secret.clone(),
            provider: provider.clone(),
            error,
        })?;
        match answer {
            Ok(items) => Ok(items
                .into_iter()
                .take(bounds::ENTRIES)
                .map(|(k, v)| (bounds::text(k, bounds::KEY), v))
                .collect()),
            Err(_) if !denials.is_empty() => Err(SecretError::Failed {
                secret,
                provider,
                message: m(denials.last().cloned().unwrap_or_default()),
            }),
            Err(wit::SecretError::NotFound(message)) => Err(SecretError::NotFound {
                secret,
                provider,
                message: m(message),
            }),
            Err(wit::SecretError::InvalidConfig(fields)) => Err(SecretError::InvalidConfig {
                secret,
                provider,
                message: m(fields
                    .into_iter()
                    .take(bounds::ENTRIES)
                    .map(|f| format!("{}: {}", f.field, f.message))
                    .collect::<Vec<_>>()
                    .join("; ")),
            }),
            Err(wit::SecretError::Failed(message)) => Err(SecretError::Failed {
                secret,
                provider,
                message: m(message),
            }),
        }
    }
}
