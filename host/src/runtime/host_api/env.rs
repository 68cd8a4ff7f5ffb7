//! `env`: the environment of the task a call is about, from the agent's env builder.

use crate::runtime::bindings::v0_1_0::env::Host;
use crate::runtime::bindings::v0_1_0::types::HostError;
use crate::runtime::store::HostState;

impl Host for HostState {
    async fn all(&mut self) -> Result<Vec<(String, String)>, HostError> {
        if !self.component.grants.env {
            return Err(super::denied(self, "env", "env.all"));
        }
        Ok(self
            .task
            .as_ref()
            .map(|t| t.env.sorted_pairs())
            .unwrap_or_default())
    }

    async fn get(&mut self, key: String) -> Result<Option<String>, HostError> {
        if !self.component.grants.env {
            return Err(super::denied(self, "env", "env.get"));
        }
        Ok(self
            .task
            .as_ref()
            .and_then(|t| t.env.get(&key).map(str::to_string)))
    }

    async fn interpolate(&mut self, template: String) -> Result<String, HostError> {
        if !self.component.grants.env {
            return Err(super::denied(self, "env", "env.interpolate"));
        }
        Ok(match &self.task {
            Some(t) => t.env.interpolate(&template),
            None => template,
        })
    }
}
