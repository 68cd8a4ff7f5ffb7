//! Custom service checks as components (world `check`, contract 0.1.1): the plugin client,
//! the only code of the agent that sees that world's bindings. The client's check
//! scheduler calls [`CheckComponents::probe`] for a check whose `type` names a loaded check
//! component, as it probes `http` and `tcp` checks; answers and failures come back as a
//! [`CheckAnswer`] or a [`CheckCallError`] naming the component.
//!
//! A probe reaches the network only through WASI sockets under the component's `network`
//! grant ([`crate::runtime::network`]). When the grant refused a connect during the call,
//! the answer is [`CheckCallError::Denied`] with the host's own words (the component, the
//! address, the grant), whatever the guest returned: a guest cannot hide a denial or word it
//! as something else.

use std::sync::Arc;
use std::time::Duration;

use crate::runtime::bindings::v0_1::check::exports::paddock::plugin::service_check as wit;
use crate::runtime::types::FieldError;
use crate::runtime::{CallError, LoadedComponent, Runtime, World, bounds};

/// What a probe is about (the WIT's `check-target`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckTarget {
    pub address: String,
    pub port: u16,
    pub service_name: String,
    pub check_name: String,
    pub alloc_id: String,
    pub task_name: String,
}

/// A probe's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    Passing,
    Warning,
    Critical,
}

/// A probe's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckAnswer {
    pub status: CheckStatus,
    /// What the probe saw (bounded).
    pub output: String,
}

/// Why a probe has no answer, naming the component.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CheckCallError {
    /// No check component of that name is loaded.
    #[error("check component {0:?} is not loaded")]
    NotLoaded(String),
    /// The check's config is wrong, as the component says.
    #[error("check component {check:?}: invalid config: {}", fields.iter().map(|f| format!("{}: {}", f.field, f.message)).collect::<Vec<_>>().join("; "))]
    InvalidConfig {
        check: String,
        fields: Vec<FieldError>,
    },
    /// A connect was refused by the component's `network` grant (the host's words).
    #[error("{message}")]
    Denied { check: String, message: String },
    /// The probe failed, as the component says.
    #[error("check component {check:?}: {message}")]
    Failed { check: String, message: String },
    /// The component failed (trap, memory, deadline).
    #[error("check component {check:?}: {error}")]
    Component { check: String, error: CallError },
    /// It did not answer within the check's timeout.
    #[error("check component {check:?}: no answer within the check's timeout of {timeout:?}")]
    Timeout { check: String, timeout: Duration },
}

/// The check components of a runtime.
pub struct CheckComponents {
    runtime: Arc<Runtime>,
}

impl CheckComponents {
    /// The check components `runtime` loads.
    pub fn new(runtime: Arc<Runtime>) -> Arc<Self> {
        Arc::new(Self { runtime })
    }

    /// The names of the loaded check components, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .runtime
            .registry
            .of_world(World::Check)
            .iter()
            .map(|c| c.name.clone())
            .collect();
        v.sort();
        v
    }

    fn component(&self, name: &str) -> Result<Arc<LoadedComponent>, CheckCallError> {
        self.runtime
            .registry
            .get(World::Check, name)
            .ok_or_else(|| CheckCallError::NotLoaded(name.to_string()))
    }

    /// Probe `target` with check component `name`; `config` is the check block's JSON.
    /// Bounded by `timeout` as well as by the component's own call deadline.
    pub async fn probe(
        &self,
        name: &str,
        target: &CheckTarget,
        config: &str,
        timeout: Duration,
    ) -> Result<CheckAnswer, CheckCallError> {
        let comp = self.component(name)?;
        let t = wit::CheckTarget {
            address: target.address.clone(),
            port: target.port,
            service_name: target.service_name.clone(),
            check_name: target.check_name.clone(),
            alloc_id: target.alloc_id.clone(),
            task_name: target.task_name.clone(),
        };
        let config = config.to_string();
        let call = self.runtime.call_check(&comp, "probe", move |c, s| {
            Box::pin(async move {
                // Denials of an earlier call on this store are not this one's.
                s.data().take_network_denials();
                let answer = c
                    .paddock_plugin_service_check()
                    .call_probe(&mut *s, &t, &config)
                    .await?;
                Ok((answer, s.data().take_network_denials()))
            })
        });
        let check = name.to_string();
        let (answer, denials) = match tokio::time::timeout(timeout, call).await {
            Err(_) => return Err(CheckCallError::Timeout { check, timeout }),
            Ok(Err(error)) => return Err(CheckCallError::Component { check, error }),
            Ok(Ok(a)) => a,
        };
        if let Some(message) = denials.into_iter().last() {
            return Err(CheckCallError::Denied { check, message });
        }
        let m = |s: String| bounds::text(s, bounds::MESSAGE);
        match answer {
            Ok(r) => Ok(CheckAnswer {
                status: match r.status {
                    wit::CheckStatus::Passing => CheckStatus::Passing,
                    wit::CheckStatus::Warning => CheckStatus::Warning,
                    wit::CheckStatus::Critical => CheckStatus::Critical,
                },
                output: m(r.output),
            }),
            Err(wit::CheckError::InvalidConfig(fields)) => Err(CheckCallError::InvalidConfig {
                check,
                fields: fields
                    .into_iter()
                    .take(bounds::ENTRIES)
                    .map(|f| FieldError {
                        field: bounds::text(f.field, bounds::KEY),
                        message: m(f.message),
                    })
                    .collect(),
            }),
            // A guest's own `denied` without a refusal by the host is its failure.
            Err(wit::CheckError::Denied(message) | wit::CheckError::Failed(message)) => {
                Err(CheckCallError::Failed {
                    check,
                    message: m(message),
                })
            }
        }
    }
}
